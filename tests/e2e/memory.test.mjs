// Bounded memory, tested: the Worker reports its wasm linear memory after a
// verification (Pillbox-Wasm-Memory-Bytes; linear memory never shrinks, so
// it is the instance's peak). Verifying a 64 MiB packet uploaded in parts
// must leave it below half the packet's size: the packet is streamed, never
// held.
//
// Run: node --test --test-concurrency=1 tests/e2e/memory.test.mjs
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';

import { buildWorker, client, startEdge, workerFixtures } from './edge.mjs';

const MIB = 1 << 20;
const PART = 16 * MIB;
const BOUND = 32 * MIB;

let edge;
let api;
let packet;
let digest;

before(async () => {
  buildWorker();
  const dir = mkdtempSync(join(tmpdir(), 'pillbox-e2e-memory-'));
  const file = join(dir, 'p.pkt');
  // 64 files of 1 MiB (incompressible), about 64 MiB.
  workerFixtures(['large', file, '64', '0']);
  packet = readFileSync(file);
  digest = JSON.parse(workerFixtures(['describe', file]).stdout).digest;
  edge = await startEdge({ MAX_SINGLE_UPLOAD_BYTES: String(PART), PART_SIZE_BYTES: String(PART) });
  api = client(edge.url);
}, { timeout: 600_000 });

after(async () => {
  await edge?.stop();
});

test('verifying a 64 MiB packet in parts keeps wasm memory under 32 MiB', { timeout: 300_000 }, async (t) => {
  assert.ok(packet.length > 64 * MIB, `the packet is ${packet.length} bytes`);
  const up = await api.call('POST', '/v1/uploads', { body: { digest, size: packet.length, part_size: PART } });
  assert.equal(up.status, 201, JSON.stringify(up.json));
  for (let n = 1; n <= up.json.parts; n++) {
    const r = await api.call('PUT', `${up.json.location}/parts/${n}`, { body: packet.subarray((n - 1) * PART, n * PART) });
    assert.equal(r.status, 200, `part ${n}`);
  }
  const done = await api.call('POST', `${up.json.location}/complete`);
  assert.equal(done.status, 201, JSON.stringify(done.json));
  assert.equal(done.json.members, 64 + 3);
  const wasm = Number(done.headers.get('pillbox-wasm-memory-bytes'));
  assert.ok(Number.isSafeInteger(wasm) && wasm >= 65536, `Pillbox-Wasm-Memory-Bytes: ${done.headers.get('pillbox-wasm-memory-bytes')}`);
  t.diagnostic(`wasm linear memory after verifying ${packet.length} bytes: ${wasm} bytes`);
  assert.ok(wasm < BOUND, `wasm linear memory ${wasm} bytes after verifying ${packet.length} bytes (bound ${BOUND})`);
  // The stored packet is the one sent.
  const got = await api.call('GET', `/v1/packets/${digest}`);
  assert.ok(got.bytes.equals(packet));
});
