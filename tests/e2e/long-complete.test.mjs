// Pushes whose `complete` runs long: a multipart push (`push --whole`) and
// a delta push (`push`) of a packet of more than 400 MB, straight to
// `wrangler dev` (no proxy in between, so the CLI's own pooled
// connections meet the local server's), each followed by the request that
// moves the ref. Every request is answered the first time: `retries` is 0.
// The client has no pause or fresh connection after a long request
// (docs/transfer.md, "Retries"); a store that dropped the request after a
// long one would show here as a retry (or as a push that gives up).
//
// Run: node --test tests/e2e/long-complete.test.mjs
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { closeSync, mkdirSync, mkdtempSync, openSync, rmSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';

import { PILLBOX, TOKEN, buildRelease, buildWorker, client, startEdge } from './edge.mjs';

const MIB = 1 << 20;
// Four files of 100 MiB of random bytes: a 419 MB packet, which neither
// compression nor chunking makes smaller. Its multipart `complete` takes
// about 20 s on the 2-core development machine.
const FILES = 4;
const FILE_MIB = 100;
const REF = 'sessions/e2e/long-complete';

let edge;
let work;

before(async () => {
  buildWorker();
  buildRelease();
  work = mkdtempSync(join(tmpdir(), 'pillbox-e2e-long-'));
  edge = await startEdge({});
}, { timeout: 900_000 });

after(async () => {
  await edge?.stop();
  if (work) rmSync(work, { recursive: true, force: true });
});

/** Writes `mib` MiB of random bytes to `file`, 1 MiB at a time. */
function randomFile(file, mib) {
  const fd = openSync(file, 'w');
  try {
    for (let i = 0; i < mib; i += 1) writeSync(fd, randomBytes(MIB));
  } finally {
    closeSync(fd);
  }
}

/** Runs `pillbox checkpoint ARGS --quiet` (one host's state and cache) and reads its JSON. */
function pillbox(args) {
  const env = { ...process.env, PILLBOX_TOKEN: TOKEN, XDG_STATE_HOME: join(work, 'state'), XDG_CACHE_HOME: join(work, 'cache') };
  const r = spawnSync(PILLBOX, ['checkpoint', ...args, '--quiet'], { encoding: 'utf8', env, timeout: 600_000 });
  assert.equal(r.status, 0, `pillbox ${args.join(' ')}:\n${r.stdout}\n${r.stderr}`);
  return JSON.parse(r.stdout);
}

async function refDigest() {
  const r = await client(edge.url).call('GET', `/v1/refs/${REF}`);
  assert.equal(r.status, 200);
  return r.json.digest;
}

test('a multipart push and a delta push of a 419 MB packet need no retry, complete and ref move alike', { timeout: 900_000 }, async () => {
  const ws = join(work, 'ws');
  mkdirSync(ws);
  for (let i = 0; i < FILES; i += 1) randomFile(join(ws, `blob-${i}.bin`), FILE_MIB);

  const first = join(work, 'first.tar');
  const packed = pillbox(['pack', ws, '-o', first]);
  assert.ok(packed.size > 400_000_000, `${packed.size} bytes`);
  const whole = pillbox(['push', first, '--remote', edge.url, '--ref', REF, '--whole']);
  assert.equal(whole.mode, 'multipart');
  assert.equal(whole.uploaded, true);
  assert.equal(whole.ref.digest, packed.digest);
  assert.equal(whole.retries, 0, 'no request of the multipart push was sent twice');
  assert.equal(await refDigest(), packed.digest);

  // One more file: the delta push sends it, and the store rebuilds and
  // verifies the whole packet from the first one's bytes and the new ones.
  randomFile(join(ws, 'turn.bin'), 8);
  const second = join(work, 'second.tar');
  const repacked = pillbox(['pack', ws, '-o', second]);
  const delta = pillbox(['push', second, '--remote', edge.url, '--ref', REF]);
  assert.equal(delta.mode, 'delta');
  assert.equal(delta.uploaded, true);
  assert.deepEqual(delta.delta.bases, [packed.digest]);
  assert.ok(delta.bytes_sent < 16 * MIB, `${delta.bytes_sent} bytes sent`);
  assert.equal(delta.ref.digest, repacked.digest);
  assert.equal(delta.retries, 0, 'no request of the delta push was sent twice');
  assert.equal(await refDigest(), repacked.digest);
});
