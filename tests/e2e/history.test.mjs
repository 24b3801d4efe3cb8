// A ref's history on the real Worker (`wrangler dev --local`): each create
// and move is recorded with the moving token's id, in the same D1 batch as
// the change (a refused move records nothing), the last 100 moves are kept,
// pages run newest to oldest, deleting the ref deletes its history; the
// listing carries each ref's packet's size and labels; digests are found
// by prefix. Who may read them is the `read` scope.
//
// Run: node --test --test-concurrency=1 tests/e2e/history.test.mjs
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';

import { buildWorker, client, fixtures, startEdge } from './edge.mjs';
import { refHistory, refHistoryCount } from './store.mjs';

const KEPT = 100;
const NAME = 'sessions/h/latest';

let edge;
let fx;
/** The API as one of the edge's scoped tokens (or the single token). */
const as = (id) => client(edge.url, id ? edge.tokens[id] : undefined);
const code = (r) => r.json?.error?.code;

before(async () => {
  buildWorker();
  fx = fixtures();
  edge = await startEdge({}, { tokens: { ci: ['read', 'push', 'refs:sessions/h/'], reader: ['read'], lister: ['list'] } });
  for (const [name, label] of [['small', 'kind=small'], ['harness', 'kind=harness']]) {
    const r = await as().call('PUT', `/v1/packets/${fx.index[name].digest}?label=${label}`, { body: fx.read(name) });
    assert.equal(r.status, 201, JSON.stringify(r.json));
  }
}, { timeout: 600_000 });

after(async () => {
  await edge?.stop();
});

/** Every move of `name`, newest first, page by page. */
async function allMoves(api, name, limit) {
  const moves = [];
  let cursor = null;
  for (;;) {
    const r = await api.call('GET', `/v1/ref-history/${name}?limit=${limit}${cursor ? `&cursor=${cursor}` : ''}`);
    assert.equal(r.status, 200, JSON.stringify(r.json));
    assert.ok(r.json.moves.length <= limit);
    moves.push(...r.json.moves);
    cursor = r.json.next_cursor;
    if (cursor === null) return moves;
  }
}

test('every move is recorded with its token, the last 100 are kept, newest first', { timeout: 300_000 }, async () => {
  const [a, b] = [fx.index.small.digest, fx.index.harness.digest];
  const ci = as('ci');
  assert.equal((await ci.call('PUT', `/v1/refs/${NAME}`, { body: { digest: a } })).status, 201);
  // A second create and a move from a digest the ref does not hold are refused, and record nothing.
  assert.equal((await ci.call('PUT', `/v1/refs/${NAME}`, { body: { digest: b } })).status, 409);
  assert.equal((await ci.call('PUT', `/v1/refs/${NAME}`, { body: { digest: a }, headers: { 'if-match': `"${b}"` } })).status, 409);
  assert.deepEqual(refHistory(edge, NAME), [{ digest: a, token_id: 'ci' }]);
  // 104 moves, alternating: 105 changes in all, the last 100 kept.
  let held = a;
  for (let i = 0; i < 104; i++) {
    const next = held === a ? b : a;
    const moved = await ci.call('PUT', `/v1/refs/${NAME}`, { body: { digest: next }, headers: { 'if-match': `"${held}"` } });
    assert.equal(moved.status, 200, JSON.stringify(moved.json));
    held = next;
  }
  assert.deepEqual(refHistoryCount(edge, NAME), [{ n: KEPT }]);
  const moves = await allMoves(as('reader'), NAME, 30);
  assert.equal(moves.length, KEPT);
  assert.equal(moves[0].digest, held, 'the newest move is what the ref names');
  assert.equal((await as('reader').call('GET', `/v1/refs/${NAME}`)).json.digest, held);
  moves.forEach((m, i) => assert.equal(m.digest, i % 2 === 0 ? held : (held === a ? b : a), `move ${i}`));
  assert.ok(moves.every((m) => m.by === 'ci'));
  for (let i = 1; i < moves.length; i++) assert.ok(moves[i - 1].at >= moves[i].at, `move ${i} is older`);
  const page = await as('reader').call('GET', `/v1/ref-history/${NAME}`);
  assert.deepEqual([page.json.name, page.json.kept, page.json.moves.length], [NAME, KEPT, 50]);
  // The single token's id.
  const single = await as().call('PUT', `/v1/refs/${NAME}`, { body: { digest: a }, headers: { 'if-match': `"${held}"` } });
  assert.equal(single.status, 200);
  const newest = await as('reader').call('GET', `/v1/ref-history/${NAME}?limit=1`);
  assert.deepEqual(newest.json.moves[0], { digest: a, at: single.json.updated, by: 'PILLBOX_TOKEN' });
  assert.deepEqual(refHistoryCount(edge, NAME), [{ n: KEPT }]);
});

test('deleting a ref deletes its history; a refused delete keeps it', async () => {
  const name = 'sessions/h/gone';
  const [a, b] = [fx.index.small.digest, fx.index.harness.digest];
  const ci = as('ci');
  assert.equal((await ci.call('PUT', `/v1/refs/${name}`, { body: { digest: a } })).status, 201);
  assert.equal((await ci.call('PUT', `/v1/refs/${name}`, { body: { digest: b }, headers: { 'if-match': `"${a}"` } })).status, 200);
  const refused = await ci.call('DELETE', `/v1/refs/${name}`, { headers: { 'if-match': `"${a}"` } });
  assert.deepEqual([refused.status, code(refused)], [409, 'ref_conflict']);
  assert.deepEqual(refHistoryCount(edge, name), [{ n: 2 }]);
  assert.equal((await ci.call('DELETE', `/v1/refs/${name}`, { headers: { 'if-match': `"${b}"` } })).status, 204);
  assert.deepEqual(refHistoryCount(edge, name), [{ n: 0 }]);
  const gone = await as('reader').call('GET', `/v1/ref-history/${name}`);
  assert.deepEqual([gone.status, code(gone)], [404, 'not_found']);
  assert.equal((await ci.call('PUT', `/v1/refs/${name}`, { body: { digest: a } })).status, 201);
  assert.deepEqual((await as('reader').call('GET', `/v1/ref-history/${name}`)).json.moves.map((m) => m.digest), [a], 'made again, it starts afresh');
});

test('the history and digest prefixes need the read scope; the listing gives sizes and labels', async () => {
  const small = fx.index.small;
  const anonymous = client(edge.url, null);
  for (const path of [`/v1/ref-history/${NAME}`, `/v1/digests/${small.digest.slice(0, 15)}`]) {
    assert.equal((await anonymous.call('GET', path)).status, 401, path);
    const r = await as('lister').call('GET', path);
    assert.deepEqual([r.status, code(r)], [403, 'scope_missing'], path);
    assert.ok(!JSON.stringify(r.json).includes(edge.tokens.lister), 'never the token');
  }
  const bad = await as('reader').call('GET', '/v1/ref-history/a%20b');
  assert.deepEqual([bad.status, code(bad)], [400, 'ref_name_invalid']);
  // A ref may be named history: its own path is not the history's.
  assert.equal((await as('ci').call('PUT', '/v1/refs/sessions/h/history', { body: { digest: small.digest } })).status, 201);
  assert.equal((await as('reader').call('GET', '/v1/refs/sessions/h/history')).json.digest, small.digest);

  const listed = await as('lister').call('GET', '/v1/refs?prefix=sessions/h/');
  assert.equal(listed.status, 200);
  const bySmall = listed.json.refs.find((r) => r.name === 'sessions/h/history');
  assert.deepEqual([bySmall.size, bySmall.labels], [small.size, ['kind=small']]);

  const reader = as('reader');
  const hex = small.digest.slice(7);
  for (const n of [8, 12, 64]) {
    const r = await reader.call('GET', `/v1/digests/sha256:${hex.slice(0, n)}`);
    assert.deepEqual([r.status, r.json.digests, r.json.truncated], [200, [small.digest], false], `${n} hex digits`);
  }
  const encoded = await reader.call('GET', `/v1/digests/sha256%3A${hex.slice(0, 8)}`);
  assert.deepEqual(encoded.json.digests, [small.digest]);
  for (const prefix of ['sha256:0123456', 'sha256:0123ABCD', `${hex.slice(0, 8)}`, `sha256:${hex}0`]) {
    const r = await reader.call('GET', `/v1/digests/${prefix}`);
    assert.deepEqual([r.status, code(r)], [400, 'digest_prefix_invalid'], prefix);
  }
});
