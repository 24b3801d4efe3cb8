// The scheduled clean-up of unfinished multipart uploads: uploads older than
// UPLOAD_TTL_HOURS lose their R2 parts, staging object and D1 rows; younger
// ones are untouched and still complete. The scheduled handler runs through
// `wrangler dev --test-scheduled` (GET /__scheduled?cron=…).
//
// Run: node --test --test-concurrency=1 tests/e2e/expire.test.mjs
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';

import { buildWorker, client, fixtures, sha256, startEdge } from './edge.mjs';
import { uploadCounts } from './store.mjs';

const MIB = 1 << 20;
// 0.002 h = 7.2 s: an upload made before the pause below has expired, one
// made after it has not.
const TTL_MS = 0.002 * 3_600_000;

let edge;
let api;
let fx;

before(async () => {
  buildWorker();
  fx = fixtures();
  edge = await startEdge({ UPLOAD_TTL_HOURS: '0.002', PART_SIZE_BYTES: String(5 * MIB) }, { testScheduled: true });
  api = client(edge.url);
}, { timeout: 600_000 });

after(async () => {
  await edge?.stop();
});

const rows = (id) => uploadCounts(edge, id)[0];

async function runScheduled() {
  await edge.scheduled();
}

test('uploads older than UPLOAD_TTL_HOURS are aborted and forgotten; younger ones stay and complete', { timeout: 120_000 }, async () => {
  // An old upload with one part received, in R2 and in D1.
  const noise = Buffer.alloc(5 * MIB, 7);
  const old = await api.call('POST', '/v1/uploads', { body: { digest: sha256(Buffer.concat([noise, noise])), size: 10 * MIB } });
  assert.equal(old.status, 201, JSON.stringify(old.json));
  const oldId = old.json.upload_id;
  assert.equal((await api.call('PUT', `${old.json.location}/parts/1`, { body: noise })).status, 200);
  assert.deepEqual(rows(oldId), { uploads: 1, parts: 1 });

  await new Promise((ok) => setTimeout(ok, TTL_MS + 1500));

  // A young upload of a real packet, every part received.
  const small = fx.index.small;
  const young = await api.call('POST', '/v1/uploads', { body: { digest: small.digest, size: small.size } });
  assert.equal(young.status, 201, JSON.stringify(young.json));
  const youngId = young.json.upload_id;
  assert.equal((await api.call('PUT', `${young.json.location}/parts/1`, { body: fx.read('small') })).status, 200);

  await runScheduled();

  assert.deepEqual(rows(oldId), { uploads: 0, parts: 0 }, 'the old upload\'s D1 rows');
  assert.equal(edge.r2Has(`uploads/${oldId}`), false, 'no staging object');
  assert.equal((await api.call('GET', old.json.location)).status, 404);
  assert.equal((await api.call('PUT', `${old.json.location}/parts/2`, { body: noise })).status, 404);
  assert.equal((await api.call('POST', `${old.json.location}/complete`)).status, 404);

  assert.deepEqual(rows(youngId), { uploads: 1, parts: 1 }, 'the young upload is untouched');
  const state = await api.call('GET', young.json.location);
  assert.deepEqual([state.status, state.json.missing], [200, []]);
  const done = await api.call('POST', `${young.json.location}/complete`);
  assert.equal(done.status, 201, JSON.stringify(done.json));
  assert.equal(done.json.digest, small.digest);
  assert.ok((await api.call('GET', `/v1/packets/${small.digest}`)).bytes.equals(fx.read('small')));

  // A run with nothing to do changes nothing.
  await runScheduled();
  assert.equal((await api.call('GET', `/v1/packets/${small.digest}`)).status, 200);
});
