// The scheduled clean-up with packets pushed as /2 (docs/transfer.md,
// "Clean-up"): a push left open is discarded and its packs go; a deleted
// packet's packs go once no packet uses them, and a packet that shares them
// keeps every byte.
//
// Run: node --test --test-concurrency=1 tests/e2e/clean2.test.mjs
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';

import { buildWorker, client, fixtures, pushBodyExample, startEdge } from './edge.mjs';
import { packsOfPacket, packsWithoutUsersCount, partPacks } from './store.mjs';
import { chunkBatch, cutsAndFrames, pushBody } from './wire.mjs';

let edge;
let api;
let fx;
const work = mkdtempSync(join(tmpdir(), 'pillbox-e2e-clean2-'));

before(async () => {
  buildWorker();
  fx = fixtures();
  edge = await startEdge({ UPLOAD_TTL_HOURS: '0' }, { testScheduled: true });
  api = client(edge.url);
}, { timeout: 600_000 });

after(async () => {
  await edge?.stop();
});

function referenceBody(name, base) {
  const out = join(work, `${name}.body`);
  const args = [join(fx.dir, `${name}.pkt`), out];
  if (base) args.push(join(fx.dir, `${base}.pkt`));
  pushBodyExample(args);
  return readFileSync(out);
}

const post = (entry, body, bases = []) => api.call('POST',
  `/v1/pushes?digest=${entry.digest}&size=${entry.size}${bases.map((b) => `&base=${b}`).join('')}`,
  { body, headers: { 'content-type': 'application/x-pillbox-push' } });

test('open pushes and unused packs go; what a stored packet uses stays', { timeout: 600_000 }, async () => {
  const [base, edited, big] = [fx.index.base, fx.index.edited, fx.index.big];
  assert.equal((await post(base, referenceBody('base'))).status, 201);
  assert.equal((await post(edited, referenceBody('edited', 'base'), [base.digest])).status, 201);
  // A push left open with a part in it.
  const all = cutsAndFrames(big, fx.read('big'));
  const names = new Set(all.recipes.manifest.map((c) => c.sha256.toString('hex')));
  const open = await post(big, pushBody(all.recipes, all.frames.filter((f) => names.has(f.sha256.toString('hex')))));
  assert.equal(open.status, 202, JSON.stringify(open.json));
  const part = await api.call('PUT', `${open.json.location}/parts/1`, { body: chunkBatch(all.frames.filter((f) => !names.has(f.sha256.toString('hex'))).slice(0, 2)) });
  assert.equal(part.status, 200, JSON.stringify(part.json));
  const openPacks = partPacks(edge, open.json.push_id);
  assert.ok(openPacks.length > 0);
  // The base goes; the packet built on it stays.
  assert.equal((await api.call('DELETE', `/v1/packets/${base.digest}`)).status, 204);
  await edge.scheduled();
  assert.equal((await api.call('GET', open.json.location)).status, 404, 'the open push is discarded');
  for (const key of openPacks) assert.equal(edge.r2Has(key), false, `${key} is collected`);
  assert.deepEqual(packsWithoutUsersCount(edge), [{ n: 0 }],
    'every pack left has a user');
  for (const pack of packsOfPacket(edge, edited.digest)) {
    assert.equal(edge.r2Has(pack), true, `${pack} is kept for the packet that uses it`);
  }
  const got = await api.call('GET', `/v1/packets/${edited.digest}`);
  assert.ok(got.bytes.equals(fx.read('edited')), 'the packet that shared the base\'s packs keeps every byte');
});
