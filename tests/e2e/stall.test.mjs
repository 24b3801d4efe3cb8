// The stall (docs/transfer.md, "The stall"): on `wrangler dev`, a request
// sent on a keep-alive connection that just carried a request of more than
// about ten seconds of storage work is never answered. The CLI never sends
// another request on such a connection; this pushes a packet whose
// multipart `complete` runs that long, then moves a ref, and asserts that
// no request had to be sent again.
//
// Run: node --test tests/e2e/stall.test.mjs
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, openSync, closeSync, rmSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';

import { ROOT, TARGET, TOKEN, buildWorker, client, startEdge } from './edge.mjs';

const MIB = 1 << 20;
const PILLBOX = join(TARGET, 'release/pillbox');
// 300 MB of incompressible bytes: `complete` took 16.6 s on the
// development machine (150 MB: 7.2 s), well past the ten seconds.
const PACKET_MIB = 300;

let edge;
let work;

before(async () => {
  buildWorker();
  const b = spawnSync('cargo', ['build', '--quiet', '--release', '-p', 'pillbox'], { cwd: ROOT, encoding: 'utf8' });
  if (b.status !== 0) throw new Error(`cargo build failed:\n${b.stderr}`);
  work = mkdtempSync(join(tmpdir(), 'pillbox-e2e-stall-'));
  edge = await startEdge({});
}, { timeout: 900_000 });

after(async () => {
  await edge?.stop();
  if (work) rmSync(work, { recursive: true, force: true });
});

test('a multipart push whose complete runs long moves its ref with no request sent twice', { timeout: 900_000 }, async () => {
  const ws = join(work, 'ws');
  mkdirSync(ws);
  const fd = openSync(join(ws, 'big.bin'), 'w');
  for (let i = 0; i < PACKET_MIB; i += 1) writeSync(fd, randomBytes(MIB));
  closeSync(fd);
  const packet = join(work, 'p.tar');
  const env = { ...process.env, PILLBOX_TOKEN: TOKEN, XDG_STATE_HOME: join(work, 'state'), XDG_CACHE_HOME: join(work, 'cache') };
  const packed = spawnSync(PILLBOX, ['checkpoint', 'pack', ws, '-o', packet, '--quiet'], { encoding: 'utf8', env });
  assert.equal(packed.status, 0, packed.stdout + packed.stderr);
  const digest = JSON.parse(packed.stdout).digest;
  const r = spawnSync(PILLBOX, ['checkpoint', 'push', packet, '--remote', edge.url, '--ref', 'sessions/e2e/stall', '--whole', '--quiet'],
    { encoding: 'utf8', env, timeout: 600_000 });
  assert.equal(r.status, 0, r.stdout + r.stderr);
  const pushed = JSON.parse(r.stdout);
  assert.equal(pushed.mode, 'multipart');
  assert.equal(pushed.uploaded, true);
  assert.equal(pushed.ref.digest, digest);
  assert.equal(pushed.retries, 0, 'no request had to be sent again');
  const ref = await client(edge.url).call('GET', '/v1/refs/sessions/e2e/stall');
  assert.equal(ref.json.digest, digest);
});
