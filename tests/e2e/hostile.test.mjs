// A hostile client of the /2 push protocol (docs/hardening.md, "Hostile
// pushes"), sent as raw HTTP to the real Worker under `wrangler dev
// --local`: duplicated digests, sizes that disagree, recipes and bases that
// lie, bombs in every route that reads a body, oversized bodies, the
// clean-up collecting packs an open push relies on (with the CLI resuming
// such a push), the real clean-up run beside pushes, their compactions and
// the DELETE of their base, concurrent completes, and tokens of every
// scope, another token's push included. Every refusal must be a typed 4xx with its code,
// leave nothing stored under the packet's digest (HEAD 404, no D1 row),
// disclose nothing of a packet the request did not name, and the store
// must answer `GET /v1` right after. The number of cases and how long each
// bomb took to refuse are printed, not asserted (the machine is shared).
//
// Run: node --test --test-concurrency=1 tests/e2e/hostile.test.mjs
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';

import { PILLBOX, TOKEN, buildRelease, buildWorker, client, fixtures, pushBodyExample, sha256, startEdge, workerFixtures } from './edge.mjs';
import { startProxy } from './proxy.mjs';
import { gzipBomb, rawSend, zstdBomb } from './raw.mjs';
import {
  agePacks, chunksIn, dropPushUses, packRows, packetCount, packetsAmong, packsAmong, packsOfPacket, packsOfPush, packsOnlyOfPush,
  partRecord, unmarkedPacksWithoutUsers, usesOfMissingPacks,
} from './store.mjs';
import { MIB, chunkBatch, cutsAndFrames, fixedCuts, frameOf, pushBody, recipesDocument, sha } from './wire.mjs';

const PUSH = { 'content-type': 'application/x-pillbox-push' };
const CHUNKS = { 'content-type': 'application/x-pillbox-chunks' };
const JSON_TYPE = { 'content-type': 'application/json' };
/** One token per scope, a second pusher, and a reader that pushes. */
const SCOPES = {
  reader: ['read'],
  lister: ['list'],
  pusher: ['push'],
  other: ['push'],
  namer: ['refs:sessions/x/'],
  deleter: ['delete'],
  admin: ['admin'],
  sandbox: ['read', 'push'],
};

let edge;
let proxy;
let fx;
const work = mkdtempSync(join(tmpdir(), 'pillbox-e2e-hostile-'));
/** Every case: { name, status, code, ms, next }. */
const seen = [];
/** How long each bomb took to refuse. */
const bombs = [];
/** Hex digests of the stored packet no hostile request names. */
let victim = [];

const hexOf = (digest) => digest.slice('sha256:'.length);
const tokenOf = (id) => (id === undefined ? TOKEN : edge.tokens[id] ?? id);
const send = (method, path, options = {}) => rawSend(edge.url, method, path, { ...options, token: tokenOf(options.as) });
const code = (r) => r.json?.error?.code;
const pushPath = (entry, extra = '') => `/v1/pushes?digest=${entry.digest}&size=${entry.size}${extra}`;
const baseQuery = (digest) => `&base=${digest}`;

before(async () => {
  buildRelease();
  buildWorker();
  fx = fixtures();
  edge = await startEdge({ UPLOAD_TTL_HOURS: '1' }, { testScheduled: true, tokens: SCOPES });
  proxy = await startProxy(edge.url);
  const api = client(edge.url);
  // The packet no hostile request names: none of its bytes, bodies or
  // name may show in an answer.
  const small = fx.index.small;
  assert.equal((await api.call('PUT', `/v1/packets/${small.digest}`, { body: fx.read('small') })).status, 201);
  const elsewhere = new Set(Object.entries(fx.index).filter(([n]) => n !== 'small' && n !== 'v1-small')
    .flatMap(([, e]) => e.members.map((m) => m.sha256)));
  victim = [hexOf(small.digest), ...small.members.filter((m) => m.sha256 && !elsewhere.has(m.sha256)).map((m) => hexOf(m.sha256))];
  // The base a push may build on, pushed as /2 (its bodies in chunks).
  const out = join(work, 'base.body');
  pushBodyExample([join(fx.dir, 'base.pkt'), out]);
  const base = await api.call('POST', pushPath(fx.index.base), { body: readFileSync(out), headers: PUSH });
  assert.equal(base.status, 201, JSON.stringify(base.json));
}, { timeout: 900_000 });

after(async () => {
  const bombLines = bombs.map((b) => `  ${b.name}: ${b.status} ${b.code} in ${b.ms.toFixed(0)} ms`).join('\n');
  console.log(`hostile cases: ${seen.length}\nbombs refused:\n${bombLines}`);
  await proxy?.stop();
  await edge?.stop();
});

/** HEAD /v1/packets/{digest} with the admin token: 404, nothing stored. */
async function notStored(digest, what) {
  const r = await send('HEAD', `/v1/packets/${digest}`);
  assert.equal(r.status, 404, `${what}: HEAD ${digest} is ${r.status}`);
}

/** No D1 row for any of `digests`. */
function noRows(digests) {
  assert.deepEqual(packetsAmong(edge, digests), [], 'no packet row');
}

/**
 * A refusal: `status` and `code`, a message and advice, nothing of the
 * victim packet nor any of `computed` (digests the store computed) in the
 * answer, nothing stored under `digest`, and `GET /v1` answered after.
 */
async function refused(t, name, r, status, expected, digest, { computed = [], bomb = false } = {}) {
  const next = await send('GET', '/v1', { as: null });
  seen.push({ name, status: r.status, code: code(r), ms: r.ms, next: next.ms });
  if (bomb) bombs.push({ name, status: r.status, code: code(r), ms: r.ms });
  t.diagnostic(`${name}: ${r.status} ${code(r) ?? r.error} in ${r.ms.toFixed(0)} ms; GET /v1 right after: ${next.ms.toFixed(0)} ms`);
  assert.equal(r.error, undefined, `${name}: ${r.error}`);
  assert.deepEqual([r.status, code(r)], [status, expected], `${name}: ${JSON.stringify(r.json)}`);
  assert.ok(r.json.error.message && r.json.error.advice, `${name}: a message and advice`);
  const text = JSON.stringify(r.json);
  for (const hex of [...victim, ...computed]) assert.ok(!text.includes(hex), `${name}: the answer names ${hex}: ${text}`);
  if (digest) await notStored(digest, name);
  assert.equal(next.status, 200, `GET /v1 after ${name}: ${next.error ?? next.status}`);
}

/** What a push of fixture `name` sends: recipes, the manifest's frames, the bodies' frames. */
function pushOf(name, options) {
  const entry = fx.index[name];
  const all = cutsAndFrames(entry, fx.read(name), options);
  const names = new Set(all.recipes.manifest.map((c) => c.sha256.toString('hex')));
  const isManifest = (f) => names.has(f.sha256.toString('hex'));
  return { entry, recipes: all.recipes, manifestFrames: all.frames.filter(isManifest), bodyFrames: all.frames.filter((f) => !isManifest(f)) };
}

/** A push of `name` left open (manifest sent, no body, no recipe), by token `as`. */
async function openPush(name, as, extra = '') {
  const p = pushOf(name);
  const r = await send('POST', pushPath(p.entry, extra), { body: pushBody({ manifest: p.recipes.manifest }, p.manifestFrames), headers: PUSH, as });
  assert.equal(r.status, 202, JSON.stringify(r.json));
  return { ...p, location: r.json.location, id: r.json.push_id };
}

/** A member of fixture `name` and its bytes. */
function member(name, path) {
  const m = fx.index[name].members.find((x) => x.path === path);
  return { ...m, bytes: fx.read(name).subarray(m.data_offset, m.data_offset + m.size) };
}

const chunkOf = (bytes) => ({ chunk: { sha256: sha(bytes), size: bytes.length } });

describe('duplicated digests and sizes that disagree', () => {
  test('are refused, typed, nothing stored', { timeout: 300_000 }, async (t) => {
    const h = pushOf('harness');
    const twice = pushBody(h.recipes, [...h.manifestFrames, h.bodyFrames[0], h.bodyFrames[0]]);
    await refused(t, 'a frame sent twice', await send('POST', pushPath(h.entry), { body: twice, headers: PUSH }), 422, 'chunk_not_needed', h.entry.digest);

    // packet.json whose members give one sha256 two sizes.
    const small = fx.index.small;
    const json = JSON.parse(fx.read('small').subarray(small.manifest_offset, small.manifest_offset + small.manifest_len).toString('utf8'));
    const files = json.members.filter((m) => m.type === 'file' && m.size > 0);
    const [a, b] = [files[0], files.find((m) => m.size !== files[0].size)];
    b.sha256 = a.sha256;
    const lie = Buffer.from(JSON.stringify(json));
    const lieDigest = sha256(lie);
    const conflict = pushBody({ manifest: [{ sha256: sha(lie), size: lie.length }] }, [frameOf(lie)]);
    await refused(t, 'one sha256 of two sizes in packet.json', await send('POST', `/v1/pushes?digest=${lieDigest}&size=${small.size}`, { body: conflict, headers: PUSH }),
      422, 'digest_size_conflict', lieDigest);

    // A frame of a body of the packet, its size one byte short.
    const body = h.bodyFrames.find((f) => f.raw > 1);
    const short = { sha256: body.sha256, raw: body.raw - 1, encoding: 0, stored: Buffer.alloc(body.raw - 1) };
    await refused(t, 'a frame whose size is not its body\'s', await send('POST', pushPath(h.entry), { body: pushBody(h.recipes, [...h.manifestFrames, short]), headers: PUSH }),
      422, 'chunk_size_mismatch', h.entry.digest);

    await refused(t, 'size= that is not the manifest\'s', await send('POST', `/v1/pushes?digest=${h.entry.digest}&size=${h.entry.size + 512}`, { body: pushBody(h.recipes, [...h.manifestFrames, ...h.bodyFrames]), headers: PUSH }),
      400, 'size_mismatch', h.entry.digest);

    // Two recipes in one request giving one chunk two sizes.
    const open = await openPush('edited', 'pusher');
    const blob = member('edited', 'workspace/assets/blob.bin');
    const log = member('edited', 'workspace/logs/session.jsonl');
    const blobPieces = fixedCuts(blob.bytes, 256 << 10);
    const last = blobPieces[blobPieces.length - 1];
    const logPieces = fixedCuts(log.bytes, 256 << 10);
    const blobRecipe = { sha256: Buffer.from(hexOf(blob.sha256), 'hex'), size: blob.size, runs: blobPieces.map(chunkOf) };
    const logRecipe = {
      sha256: Buffer.from(hexOf(log.sha256), 'hex'), size: log.size,
      runs: [{ chunk: { sha256: sha(last), size: logPieces[0].length } }, ...logPieces.slice(1).map(chunkOf)],
    };
    await refused(t, 'two recipes giving one chunk two sizes', await send('POST', `${open.location}/recipes`, { body: recipesDocument({ bodies: [blobRecipe, logRecipe] }), as: 'pusher' }),
      422, 'recipe_invalid', open.entry.digest);
    await refused(t, 'a recipe of a body of another size', await send('POST', `${open.location}/recipes`, { body: recipesDocument({ bodies: [{ ...blobRecipe, size: blob.size + 1, runs: [...blobRecipe.runs, chunkOf(Buffer.from('x'))] }] }), as: 'pusher' }),
      422, 'recipe_not_needed', open.entry.digest);
    const state = await send('GET', open.location, { as: 'pusher' });
    assert.equal(state.status, 200);
    assert.equal(state.json.missing_chunks.length, 0, 'no recipe was taken');
    noRows([h.entry.digest, lieDigest, open.entry.digest]);
  });
});

describe('recipes that lie', () => {
  test('a wrong chunk list, wrong bytes and copies out of range are refused; the wrong digest is not told', { timeout: 300_000 }, async (t) => {
    const base = fx.index.base;
    const open = await openPush('edited', 'sandbox', baseQuery(base.digest));
    const log = member('edited', 'workspace/logs/session.jsonl');
    const baseLog = member('base', 'workspace/logs/session.jsonl');
    const logHex = Buffer.from(hexOf(log.sha256), 'hex');
    const pieces = fixedCuts(log.bytes, MIB);
    const recipes = (runs, size = log.size) => recipesDocument({ bodies: [{ sha256: logHex, size, runs }] });
    const post = (body) => send('POST', `${open.location}/recipes`, { body, as: 'sandbox' });
    await refused(t, 'chunks that do not add up to the body', await post(recipes(pieces.slice(1).map(chunkOf))), 422, 'recipe_invalid', open.entry.digest);
    const copy = (first, count, size = baseLog.size) => ({ copy: { sha256: Buffer.from(hexOf(baseLog.sha256), 'hex'), size, first, count } });
    await refused(t, 'a copy past the base body\'s chunks', await post(recipes([copy(0, 10_000)])), 422, 'recipe_invalid', open.entry.digest);
    await refused(t, 'a copy of a body no base holds', await post(recipes([{ copy: { sha256: sha(Buffer.from('nothing')), size: 7, first: 0, count: 1 } }])), 422, 'recipe_invalid', open.entry.digest);
    await refused(t, 'a copy of a base body of another size', await post(recipes([copy(0, 1, baseLog.size + 1), ...pieces.map(chunkOf)])), 422, 'recipe_invalid', open.entry.digest);

    // Chunks that add up, their bytes not the body's: taken as chunks,
    // refused when the body is proven; what they hash to is not told.
    const fake = pieces.map((p, i) => Buffer.alloc(p.length, 0x61 + i));
    const rec = await post(recipes(fake.map(chunkOf)));
    assert.equal(rec.status, 200, JSON.stringify(rec.json));
    const state = await send('GET', open.location, { as: 'sandbox' });
    const small = state.json.missing.filter((hex) => hex !== hexOf(log.sha256));
    const bodies = pushOf('edited').bodyFrames.filter((f) => small.includes(f.sha256.toString('hex')));
    const part = await send('PUT', `${open.location}/parts/1`, { body: chunkBatch([...fake.map((b) => frameOf(b)), ...bodies]), headers: CHUNKS, as: 'sandbox' });
    assert.equal(part.status, 200, JSON.stringify(part.json));
    const done = await send('POST', `${open.location}/complete`, { as: 'sandbox' });
    await refused(t, 'chunks whose bytes are not the body\'s', done, 422, 'member_digest_mismatch', open.entry.digest,
      { computed: [sha(Buffer.concat(fake)).toString('hex')] });
    assert.equal(done.json.error.path, 'workspace/logs/session.jsonl');
    assert.equal((await send('GET', open.location, { as: 'sandbox' })).status, 404, 'a refused push ends');
    noRows([open.entry.digest]);
  });

  test('a frame whose bytes are not its name is refused without the digest they have', { timeout: 120_000 }, async (t) => {
    const h = pushOf('harness');
    const f = h.bodyFrames[0];
    const wrong = Buffer.alloc(f.raw, 0x7a);
    const r = await send('POST', pushPath(h.entry), { body: pushBody(h.recipes, [...h.manifestFrames, { ...f, encoding: 0, stored: wrong }]), headers: PUSH });
    await refused(t, 'a frame named for other bytes', r, 422, 'chunk_digest_mismatch', h.entry.digest, { computed: [sha(wrong).toString('hex')] });
    // A whole packet under another packet's name.
    const put = await send('PUT', `/v1/packets/${fx.index['v1-harness'].digest}`, { body: fx.read('harness') });
    await refused(t, 'a whole packet under another name', put, 422, 'packet_digest_mismatch', fx.index['v1-harness'].digest, { computed: [hexOf(fx.index.harness.digest)] });
  });
});

describe('bases that lie', () => {
  test('a base the token may not read, one the store lacks, and a base body of another size give nothing away', { timeout: 300_000 }, async (t) => {
    const base = fx.index.base;
    const edited = pushOf('edited');
    const noManifest = pushBody({ manifest: edited.recipes.manifest }, []);
    const mine = new Set(edited.recipes.manifest.map((c) => c.sha256.toString('hex')));
    for (const [what, as, extra] of [
      ['a base the token may not read', 'pusher', baseQuery(base.digest)],
      ['a base the store lacks', 'sandbox', baseQuery(sha256(Buffer.from('no such packet')))],
    ]) {
      const r = await send('POST', pushPath(edited.entry, extra), { body: noManifest, headers: PUSH, as });
      await refused(t, `${what}: packet.json's chunks left out`, r, 409, 'manifest_incomplete', edited.entry.digest);
      assert.ok(r.json.error.missing.every((hex) => mine.has(hex)), `${what}: only chunks the request named are listed`);
    }
    // As a pusher that may not read the base, a copy of its body is a copy
    // of nothing.
    const open = await openPush('edited', 'pusher', baseQuery(base.digest));
    assert.deepEqual((await send('GET', open.location, { as: 'pusher' })).json.bases_used, []);
    const log = member('edited', 'workspace/logs/session.jsonl');
    const baseLog = member('base', 'workspace/logs/session.jsonl');
    const copy = { copy: { sha256: Buffer.from(hexOf(baseLog.sha256), 'hex'), size: baseLog.size, first: 0, count: 1 } };
    const doc = recipesDocument({ bodies: [{ sha256: Buffer.from(hexOf(log.sha256), 'hex'), size: log.size, runs: [copy] }] });
    await refused(t, 'a copy of a base the token may not read', await send('POST', `${open.location}/recipes`, { body: doc, as: 'pusher' }), 422, 'recipe_invalid', open.entry.digest);
    noRows([edited.entry.digest]);
  });
});

describe('bombs and oversized bodies', () => {
  test('a zstd frame that decodes past 1 MiB, and a bomb as the Content-Encoding of every route, are refused', { timeout: 600_000 }, async (t) => {
    const log = member('edited', 'workspace/logs/session.jsonl');
    const pieces = fixedCuts(log.bytes, MIB);
    const recipe = { sha256: Buffer.from(hexOf(log.sha256), 'hex'), size: log.size, runs: pieces.map(chunkOf) };
    const edited = pushOf('edited');
    const open = await openPush('edited', 'pusher');
    assert.equal((await send('POST', `${open.location}/recipes`, { body: recipesDocument({ bodies: [recipe] }), as: 'pusher' })).status, 200);
    // 1 MiB claimed, 64 MiB of zeros inside.
    const past = { sha256: sha(pieces[0]), raw: MIB, encoding: 1, stored: zstdBomb(64) };
    const create = pushBody({ manifest: edited.recipes.manifest, bodies: [recipe] }, [...edited.manifestFrames, past]);
    await refused(t, 'a 1 MiB frame that decodes to 64 MiB, create', await send('POST', pushPath(edited.entry), { body: create, headers: PUSH }), 422, 'chunk_frame_invalid', edited.entry.digest, { bomb: true });
    await refused(t, 'a 1 MiB frame that decodes to 64 MiB, part', await send('PUT', `${open.location}/parts/1`, { body: chunkBatch([past]), headers: CHUNKS, as: 'pusher' }), 422, 'chunk_frame_invalid', edited.entry.digest, { bomb: true });

    const gzip = gzipBomb(1024);
    const zstd = zstdBomb(1024);
    const routes = [
      ['POST /v1/pushes', 'POST', pushPath(edited.entry), PUSH],
      ['POST …/recipes', 'POST', `${open.location}/recipes`, {}],
      ['PUT …/parts/{n}', 'PUT', `${open.location}/parts/1`, CHUNKS],
      ['POST /v1/packets/{digest}/chunks', 'POST', `/v1/packets/${fx.index.small.digest}/chunks`, JSON_TYPE],
      ['PUT /v1/packets/{digest}', 'PUT', `/v1/packets/${edited.entry.digest}`, {}],
      ['POST /v1/uploads', 'POST', '/v1/uploads', JSON_TYPE],
      ['PUT /v1/refs/{name}', 'PUT', '/v1/refs/sessions/x/hostile', JSON_TYPE],
    ];
    for (const [route, method, path, type] of routes) {
      // The push's routes as its creator, the others as admin.
      const as = path.startsWith(open.location) ? 'pusher' : 'admin';
      for (const [encoding, body] of [['gzip', gzip], ['zstd', zstd], ['br', zstd], ['deflate', gzip]]) {
        const r = await send(method, path, { body, headers: { 'content-encoding': encoding, ...type }, as });
        await refused(t, `a 1 GiB ${encoding} bomb, ${route}`, r, 415, 'encoding_unsupported', edited.entry.digest, { bomb: true });
      }
    }
    // A route that reads no body answers as it would, the bomb dropped
    // undecoded.
    const complete = await send('POST', `${open.location}/complete`, { body: gzip, headers: { 'content-encoding': 'gzip' }, as: 'pusher' });
    await refused(t, 'a 1 GiB gzip bomb, POST …/complete (reads no body)', complete, 409, 'push_incomplete', edited.entry.digest, { bomb: true });
    const state = await send('GET', open.location, { as: 'pusher' });
    assert.deepEqual(state.json.parts, [], 'no part was recorded');
    noRows([edited.entry.digest]);
  });

  test('a body over the cap of each push route is refused', { timeout: 600_000 }, async (t) => {
    const open = await openPush('edited', 'pusher');
    const body = { piece: Buffer.alloc(MIB, 0x20), total: 100 * 1000 * 1000 };
    for (const [route, method, path, type, status, expected] of [
      ['POST /v1/pushes', 'POST', pushPath(open.entry), PUSH, 413, 'push_too_large'],
      ['POST …/recipes', 'POST', `${open.location}/recipes`, {}, 413, 'body_too_large'],
      ['PUT …/parts/{n}', 'PUT', `${open.location}/parts/1`, CHUNKS, 413, 'part_too_large'],
    ]) {
      await refused(t, `100 MB, ${route}`, await send(method, path, { body, headers: type, as: 'pusher' }), status, expected, open.entry.digest);
    }
    noRows([open.entry.digest]);
  });
});

/**
 * What a clean-up racing push `id` leaves when it wins: the packs the push
 * found were taken before the push could use them. The race is made
 * certain by undoing the push's use of its packs and dating them past the
 * TTL, then running the scheduled clean-up: every pack only the push used
 * goes (one a stored packet uses stays). Returns the hex digests of the
 * chunks that lay in the packs collected.
 */
async function collectPacksOf(id) {
  const packs = packsOnlyOfPush(edge, id);
  assert.ok(packs.length > 0, 'the push has packs of its own');
  const lost = [...new Set(chunksIn(edge, packs).map((r) => r.sha256))];
  dropPushUses(edge, id, packs);
  agePacks(edge, packs, { mark: true });
  await edge.scheduled();
  const left = packRows(edge, packs);
  assert.deepEqual(left, [], 'the packs are collected');
  return { packs, lost };
}

describe('races', () => {
  test('a clean-up that collects every pack a push relied on: GET and complete list all that was lost; sent again, the push completes', { timeout: 600_000 }, async (t) => {
    const p = await openPush('big', 'pusher');
    assert.equal((await send('POST', `${p.location}/recipes`, { body: recipesDocument({ bodies: p.recipes.bodies }), as: 'pusher' })).status, 200);
    const half = Math.ceil(p.bodyFrames.length / 2);
    for (const [n, frames] of [[1, p.bodyFrames.slice(0, half)], [2, p.bodyFrames.slice(half)]]) {
      const r = await send('PUT', `${p.location}/parts/${n}`, { body: chunkBatch(frames), headers: CHUNKS, as: 'pusher' });
      assert.equal(r.status, 200, JSON.stringify(r.json));
    }
    const before = await send('GET', p.location, { as: 'pusher' });
    assert.deepEqual([before.json.missing, before.json.missing_chunks], [[], []], 'everything was at hand');
    const { packs, lost } = await collectPacksOf(p.id);
    assert.ok(packs.length >= 3, `the create's and both parts' packs: ${packs}`);
    t.diagnostic(`${packs.length} packs collected, ${lost.length} chunks in them`);
    const state = await send('GET', p.location, { as: 'pusher' });
    const listed = new Set([...state.json.missing_chunks, ...state.json.missing]);
    for (const hex of lost) assert.ok(listed.has(hex), `${hex}, lost with its pack, is listed`);
    const ours = new Set([...p.manifestFrames, ...p.bodyFrames].map((f) => f.sha256.toString('hex')));
    assert.ok(state.json.missing_chunks.every((hex) => lost.includes(hex) && ours.has(hex)), 'only what was lost');
    const done = await send('POST', `${p.location}/complete`, { as: 'pusher' });
    await refused(t, 'complete after its packs were collected', done, 409, 'push_incomplete', p.entry.digest);
    assert.deepEqual(done.json.error.missing, [...state.json.missing_chunks, ...state.json.missing], 'complete lists what GET lists');
    // What is listed, sent again.
    const resend = [...p.manifestFrames, ...p.bodyFrames].filter((f) => listed.has(f.sha256.toString('hex')));
    const again = await send('PUT', `${p.location}/parts/3`, { body: chunkBatch(resend), headers: CHUNKS, as: 'pusher' });
    assert.equal(again.status, 200, JSON.stringify(again.json));
    const stored = await send('POST', `${p.location}/complete`, { as: 'pusher' });
    assert.equal(stored.status, 201, JSON.stringify(stored.json));
    const got = await client(edge.url).call('GET', `/v1/packets/${p.entry.digest}`);
    assert.ok(got.bytes.equals(fx.read('big')), 'the packet is served as pushed');
  });

  test('the CLI resumes a push whose packs were collected, sends what the store lists and completes', { timeout: 600_000 }, async () => {
    const state = { XDG_STATE_HOME: join(work, 'cli-state'), XDG_CACHE_HOME: join(work, 'cli-cache') };
    const env = { ...process.env, PILLBOX_TOKEN: TOKEN, ...state };
    for (const k of ['CODEX_HOME', 'CLAUDE_CONFIG_DIR', 'PILLBOX_REMOTE', 'PILLBOX_CACHE_MAX_BYTES']) delete env[k];
    const pillbox = (args) => {
      const r = spawnSync(PILLBOX, ['checkpoint', ...args, '--quiet'], { env, encoding: 'utf8', maxBuffer: 1 << 26 });
      let json;
      try { json = JSON.parse(r.stdout.trim()); } catch { /* not JSON */ }
      return { code: r.status, json, out: r.stdout + r.stderr };
    };
    const file = join(work, 'edited.pkt');
    writeFileSync(file, fx.read('edited'));
    await proxy.fail('/complete', 5);
    const failed = pillbox(['push', file, '--remote', proxy.url]);
    assert.equal(failed.code, 4, failed.out);
    const [saved] = readdirSync(join(state.XDG_STATE_HOME, 'pillbox/uploads')).filter((f) => f.endsWith('.push.json'));
    const id = JSON.parse(readFileSync(join(state.XDG_STATE_HOME, 'pillbox/uploads', saved), 'utf8')).push_id;
    assert.match(id, /^[0-9a-f]{32}$/);
    await collectPacksOf(id);
    const resumed = pillbox(['push', file, '--remote', proxy.url]);
    assert.equal(resumed.code, 0, resumed.out);
    assert.equal(resumed.json.resumed, true, resumed.out);
    assert.equal(resumed.json.uploaded, true);
    assert.ok(resumed.json.delta.parts_sent > 0, 'what was lost is sent again');
    const got = await client(edge.url).call('GET', `/v1/packets/${fx.index.edited.digest}`);
    assert.ok(got.bytes.equals(fx.read('edited')), 'the packet is served as pushed');
  });

  test('concurrent completes of one push store it once', { timeout: 300_000 }, async (t) => {
    const p = await openPush('harness', 'pusher');
    const part = await send('PUT', `${p.location}/parts/1`, { body: chunkBatch(p.bodyFrames), headers: CHUNKS, as: 'pusher' });
    assert.equal(part.status, 200, JSON.stringify(part.json));
    const answers = await Promise.all([1, 2, 3, 4].map(() => send('POST', `${p.location}/complete`, { as: 'pusher' })));
    const statuses = answers.map((r) => r.status);
    t.diagnostic(`four completes at once: ${statuses.join(', ')}`);
    seen.push({ name: 'concurrent completes', status: statuses.join('/'), code: '', ms: Math.max(...answers.map((r) => r.ms)), next: 0 });
    assert.equal(statuses.filter((s) => s === 201).length, 1, `one stores it: ${statuses}`);
    for (const r of answers.filter((x) => x.status !== 201)) {
      assert.ok(r.status === 200 || (r.status === 404 && code(r) === 'not_found'), `${r.status} ${JSON.stringify(r.json)}`);
    }
    assert.equal(packetCount(edge, p.entry.digest)[0].n, 1);
    const got = await client(edge.url).call('GET', `/v1/packets/${p.entry.digest}`);
    assert.ok(got.bytes.equals(fx.read('harness')));
    assert.equal((await send('GET', '/v1', { as: null })).status, 200);
  });
});

describe('tokens of every scope', () => {
  test('only a token that may push creates one, and a push is its creator\'s alone', { timeout: 300_000 }, async (t) => {
    const h = pushOf('many');
    const body = pushBody(h.recipes, [...h.manifestFrames, ...h.bodyFrames]);
    for (const as of ['reader', 'lister', 'namer', 'deleter']) {
      await refused(t, `create as ${as}`, await send('POST', pushPath(h.entry), { body, headers: PUSH, as }), 403, 'scope_missing', h.entry.digest);
    }
    await refused(t, 'create with no token', await send('POST', pushPath(h.entry), { body, headers: PUSH, as: null }), 401, 'unauthorized', h.entry.digest);
    await refused(t, 'create with a wrong token', await send('POST', pushPath(h.entry), { body, headers: PUSH, as: 'not-a-token' }), 403, 'forbidden', h.entry.digest);

    const open = await openPush('many', 'pusher');
    const first = h.bodyFrames.slice(0, 3);
    assert.equal((await send('PUT', `${open.location}/parts/1`, { body: chunkBatch(first), headers: CHUNKS, as: 'pusher' })).status, 200);
    const mine = await send('GET', open.location, { as: 'pusher' });
    for (const as of ['other', 'sandbox', 'admin', 'reader']) {
      const status = as === 'reader' ? 403 : 404;
      const expected = as === 'reader' ? 'scope_missing' : 'not_found';
      for (const [what, method, path, options] of [
        ['GET', 'GET', open.location, {}],
        ['a part', 'PUT', `${open.location}/parts/1`, { body: chunkBatch(h.bodyFrames.slice(3, 4)), headers: CHUNKS }],
        ['recipes', 'POST', `${open.location}/recipes`, { body: recipesDocument({ bodies: [] }) }],
        ['complete', 'POST', `${open.location}/complete`, {}],
        ['DELETE', 'DELETE', open.location, {}],
      ]) {
        const r = await send(method, path, { ...options, as });
        await refused(t, `${what} of another token's push, as ${as}`, r, status, expected, h.entry.digest);
        assert.ok(!JSON.stringify(r.json).includes(edge.tokens.pusher), 'never a token');
      }
    }
    const still = await send('GET', open.location, { as: 'pusher' });
    assert.deepEqual(still.json, mine.json, 'the push is as its creator left it');

    // A part sent again replaces its record: the one it replaced goes.
    const recordOf = () => partRecord(edge, open.id, 1);
    const old = recordOf();
    assert.equal((await send('PUT', `${open.location}/parts/1`, { body: chunkBatch(first), headers: CHUNKS, as: 'pusher' })).status, 200);
    const now = recordOf();
    assert.notEqual(now, old);
    assert.equal(edge.r2Has(old), false, `${old} is deleted`);
    assert.equal(edge.r2Has(now), true);
    noRows([h.entry.digest]);
  });
});

// Races that run the real scheduled clean-up (and compaction) at the same
// time as pushes, on packets packed here by the CLI from fresh random
// bytes, so no earlier case shares their chunks. The clean-up takes only
// packs older than UPLOAD_TTL_HOURS (1 here, so open pushes stay): the
// packs a race may take are dated into the past first, which stands for
// their age and nothing else; who uses them, and when the clean-up runs,
// is left to the race.

/** Runs the scheduled clean-up once. */
async function cleanUp() {
  await edge.scheduled();
}

/** Dates packs `keys` past the TTL, so that the clean-up may take them once nothing uses them. */
function age(keys) {
  agePacks(edge, keys);
}

/** Which of `keys` still have their row. */
function present(keys) {
  return new Set(packsAmong(edge, keys));
}

/** The chunks (hex) lying in packs `keys`, by pack. */
function chunksByPack(keys) {
  const out = new Map(keys.map((k) => [k, []]));
  for (const r of chunksIn(edge, keys)) out.get(r.pack).push(r.sha256);
  return out;
}

/**
 * Every pack is either used (a stored packet or an open push) or marked
 * for the clean-up, and every pack a stored packet or open push uses has
 * its row and its object.
 */
function noPackWithoutUsers(what) {
  assert.deepEqual(unmarkedPacksWithoutUsers(edge), [], `${what}: a pack without users is marked for the clean-up`);
  const dangling = usesOfMissingPacks(edge);
  for (const { pack } of dangling) assert.ok(!edge.r2Has(pack), `${what}: ${pack}, without a row, has no object either`);
}

let cliEnvOf;
/** Packs `files` ({ name: bytes }) into a packet with the CLI: { file, bytes, entry }. */
function packed(tag, files) {
  const ws = join(work, `ws-${tag}`);
  rmSync(ws, { recursive: true, force: true });
  mkdirSync(ws, { recursive: true });
  for (const [name, bytes] of Object.entries(files)) writeFileSync(join(ws, name), bytes);
  const file = join(work, `${tag}.pkt`);
  const r = spawnSync(PILLBOX, ['checkpoint', 'pack', ws, '-o', file, '--quiet'], { env: cliEnvOf(), encoding: 'utf8' });
  assert.equal(r.status, 0, r.stdout + r.stderr);
  const entry = JSON.parse(workerFixtures(['describe', file]).stdout);
  return { tag, file, bytes: readFileSync(file), entry };
}

/** What a push of packet `p` on `base` sends: the manifest's frames, the bodies' frames (none above the body threshold). */
function framesOf(p, base) {
  const held = new Set((base?.entry.members ?? []).filter((m) => m.type === 'file').map((m) => `${hexOf(m.sha256)}/${m.size}`));
  const all = cutsAndFrames(p.entry, p.bytes, { have: (hex, size) => held.has(`${hex}/${size}`), compress: false });
  assert.deepEqual(all.recipes.bodies, [], 'no body needs a recipe');
  const names = new Set(all.recipes.manifest.map((c) => c.sha256.toString('hex')));
  const isManifest = (f) => names.has(f.sha256.toString('hex'));
  return { recipes: all.recipes, manifestFrames: all.frames.filter(isManifest), bodyFrames: all.frames.filter((f) => !isManifest(f)) };
}

const withBase = (base) => (base ? baseQuery(base.entry.digest) : '');

/** Saves `p` on `base` in one request: 201. */
async function saveWhole(p, base) {
  const f = framesOf(p, base);
  const r = await send('POST', pushPath(p.entry, withBase(base)), { body: pushBody(f.recipes, [...f.manifestFrames, ...f.bodyFrames]), headers: PUSH });
  assert.equal(r.status, 201, JSON.stringify(r.json));
}

/** Opens a push of `p` on `base` (its manifest's frames only): its location and frames. */
async function openOn(p, base) {
  const f = framesOf(p, base);
  const r = await send('POST', pushPath(p.entry, withBase(base)), { body: pushBody(f.recipes, f.manifestFrames), headers: PUSH, as: 'sandbox' });
  assert.equal(r.status, 202, JSON.stringify(r.json));
  return { ...f, p, location: r.json.location, id: r.json.push_id };
}

/**
 * The end of a push of `p` that raced the clean-up, from `answer` (its
 * complete's, or its one-request create's): stored (201, or 200 when
 * another push stored it first), or refused typed, listing what to send
 * again (409 `push_incomplete` from complete, 202 from a create, the push
 * left open; GET lists the same, or more lost since), and every body or
 * chunk of `p` that lay in a pack collected (`lost`) is listed. What GET
 * lists is sent again and the push completes. Returns how it ended.
 */
async function settle(t, name, p, answer, { location, lost = [], part = 9 }) {
  const frames = [...framesOf(p).manifestFrames, ...framesOf(p).bodyFrames];
  const ours = new Map(frames.map((f) => [f.sha256.toString('hex'), f]));
  if (answer.status === 201 || answer.status === 200) {
    assert.equal(answer.error, undefined, answer.error);
    seen.push({ name, status: answer.status, code: 'stored', ms: answer.ms, next: 0 });
    return 'stored';
  }
  let listed;
  let at = location;
  if (answer.status === 202) {
    // A one-request create that lost a pack while it completed.
    assert.equal(answer.error, undefined, answer.error);
    at = answer.json.location;
    listed = [...answer.json.missing_chunks, ...answer.json.missing];
    seen.push({ name, status: 202, code: 'open', ms: answer.ms, next: 0 });
    t.diagnostic(`${name}: 202, ${listed.length} to send again, in ${answer.ms.toFixed(0)} ms`);
  } else {
    await refused(t, name, answer, 409, 'push_incomplete', p.entry.digest);
    listed = answer.json.error.missing;
  }
  const state = await send('GET', at, { as: 'sandbox' });
  assert.equal(state.status, 200, JSON.stringify(state.json));
  // The answer lists what was missing when it was made; the clean-up runs
  // alongside and may collect more packs after it: GET lists at least as
  // much, and anything more lay in a pack that was collected.
  const now = [...state.json.missing_chunks, ...state.json.missing];
  for (const hex of listed) assert.ok(now.includes(hex), `${name}: ${hex}, listed by the answer, is listed by GET`);
  for (const hex of now) assert.ok(listed.includes(hex) || lost.includes(hex), `${name}: ${hex}, listed by GET only, lay in a pack collected`);
  listed = now;
  const needed = lost.filter((hex) => ours.has(hex));
  for (const hex of needed) assert.ok(listed.includes(hex), `${name}: ${hex}, lost with its pack, is listed`);
  assert.ok(listed.length > 0 && listed.every((hex) => ours.has(hex)), `${name}: only what the packet is made of: ${listed}`);
  const again = await send('PUT', `${at}/parts/${part}`, { body: chunkBatch(listed.map((hex) => ours.get(hex))), headers: CHUNKS, as: 'sandbox' });
  assert.equal(again.status, 200, JSON.stringify(again.json));
  const done = await send('POST', `${at}/complete`, { as: 'sandbox' });
  assert.ok(done.status === 201 || done.status === 200, `${name}, sent again: ${done.status} ${JSON.stringify(done.json)}`);
  return `sent ${listed.length} again`;
}

/** The packet `p` is served byte for byte. */
async function servedExact(p, what) {
  const got = await client(edge.url).call('GET', `/v1/packets/${p.entry.digest}`);
  assert.equal(got.status, 200, `${what}: GET ${p.entry.digest}`);
  assert.ok(got.bytes.equals(p.bytes), `${what}: the packet is served as pushed`);
}

/** `ms` milliseconds. */
const pause = (ms) => new Promise((ok) => setTimeout(ok, ms));

/** Deletes stored packet `p`, then runs the clean-up: the race's other side. */
async function deleteAndClean(p, delay = 0) {
  await pause(delay);
  const r = await send('DELETE', `/v1/packets/${p.entry.digest}`);
  assert.equal(r.status, 204, JSON.stringify(r.json));
  await cleanUp();
}

const randomFiles = (n, size) => Object.fromEntries(Array.from({ length: n }, (_, i) => [`f${i}.bin`, randomBytes(size)]));

describe('races with the clean-up and compaction', () => {
  before(() => {
    const state = { XDG_STATE_HOME: join(work, 'race-state'), XDG_CACHE_HOME: join(work, 'race-cache') };
    cliEnvOf = () => {
      const env = { ...process.env, PILLBOX_TOKEN: TOKEN, ...state };
      for (const k of ['CODEX_HOME', 'CLAUDE_CONFIG_DIR', 'PILLBOX_REMOTE', 'PILLBOX_CACHE_MAX_BYTES']) delete env[k];
      return env;
    };
  });

  test('a compaction racing pushes that use the same small packs, the DELETE of the packet that owns them and the clean-up', { timeout: 900_000 }, async (t) => {
    for (const round of [0, 1, 2]) {
      // A packet after many small saves: each save a pack of its own, the
      // last taking its bodies from at least MERGE_AT small packs.
      const files = randomFiles(10, 40 << 10);
      const chain = [packed(`chain${round}-0`, files)];
      await saveWhole(chain[0]);
      for (let i = 1; packsOfPacket(edge, chain[chain.length - 1].entry.digest).length < 8; i++) {
        assert.ok(i < 20, 'the packs add up to a merge');
        files[`f${i % 10}.bin`] = randomBytes(40 << 10);
        const next = packed(`chain${round}-${i}`, files);
        await saveWhole(next, chain[chain.length - 1]);
        chain.push(next);
      }
      const top = chain[chain.length - 1];
      const shared = packsOfPacket(edge, top.entry.digest);
      // Only the packet on top uses them: the pushes race its DELETE.
      for (const p of chain.slice(0, -1)) assert.equal((await send('DELETE', `/v1/packets/${p.entry.digest}`)).status, 204);
      age(shared);
      const lostBy = chunksByPack(shared);
      const q = packed(`q${round}`, { ...files, 'f0.bin': randomBytes(40 << 10), 'new.bin': randomBytes(8 << 10) });
      const r = packed(`r${round}`, { ...files, 'f1.bin': randomBytes(40 << 10) });
      const qPush = await openOn(q, top);
      assert.equal((await send('PUT', `${qPush.location}/parts/1`, { body: chunkBatch(qPush.bodyFrames), headers: CHUNKS, as: 'sandbox' })).status, 200);
      // Round 1: the other push is a one-request save; else an open push's complete.
      let rPush;
      let rSave;
      if (round === 1) {
        const f = framesOf(r, top);
        rSave = () => send('POST', pushPath(r.entry, withBase(top)), { body: pushBody(f.recipes, [...f.manifestFrames, ...f.bodyFrames]), headers: PUSH, as: 'sandbox' });
      } else {
        rPush = await openOn(r, top);
        assert.equal((await send('PUT', `${rPush.location}/parts/1`, { body: chunkBatch(rPush.bodyFrames), headers: CHUNKS, as: 'sandbox' })).status, 200);
        rSave = () => send('POST', `${rPush.location}/complete`, { as: 'sandbox' });
      }
      // Round 2: the DELETE and the clean-up go first, the pushes right after.
      const [qDone, rDone] = await Promise.all([
        (async () => { if (round === 2) await pause(5); return send('POST', `${qPush.location}/complete`, { as: 'sandbox' }); })(),
        (async () => { if (round === 2) await pause(5); return rSave(); })(),
        deleteAndClean(top, round === 0 ? 20 : 0),
      ]);
      const gone = shared.filter((k) => !present(shared).has(k));
      const lost = gone.flatMap((k) => lostBy.get(k));
      const qEnd = await settle(t, `compaction race ${round}, complete of a push on the merged packet`, q, qDone, { location: qPush.location, lost });
      const rEnd = await settle(t, `compaction race ${round}, ${round === 1 ? 'one-request save' : 'complete'} of another push on it`, r, rDone, { location: rPush?.location, lost });
      t.diagnostic(`round ${round}: ${shared.length} small packs, ${gone.length} collected; q ${qDone.status} in ${qDone.ms.toFixed(0)} ms (${qEnd}), r ${rDone.status} in ${rDone.ms.toFixed(0)} ms (${rEnd})`);
      await servedExact(q, `round ${round}, q`);
      await servedExact(r, `round ${round}, r`);
      // Whatever the interleaving, the packets stored name only packs that are there.
      for (const p of [q, r]) {
        const used = packsOfPacket(edge, p.entry.digest);
        assert.equal(present(used).size, used.length, `round ${round}: every pack ${p.tag} uses has its row`);
      }
      noPackWithoutUsers(`compaction race ${round}`);
      // A clean-up after the race leaves every stored packet whole.
      age(shared);
      await cleanUp();
      await servedExact(q, `round ${round}, q after another clean-up`);
      await servedExact(r, `round ${round}, r after another clean-up`);
    }
  });

  test('the clean-up running while a push is between its parts and while it completes: GET and complete list what was lost; sent again, it completes', { timeout: 900_000 }, async (t) => {
    // Which request the DELETE of the base and the clean-up race.
    const rounds = [
      { at: 'part 1', delay: 0 }, { at: 'part 2', delay: 10 }, { at: 'complete', delay: 0 }, { at: 'complete', delay: 30 },
    ];
    let lostAny = 0;
    for (const [i, { at, delay }] of rounds.entries()) {
      const files = randomFiles(8, 64 << 10);
      const base = packed(`base${i}`, files);
      await saveWhole(base);
      const child = packed(`child${i}`, { ...files, 'f0.bin': randomBytes(64 << 10), 'f1.bin': randomBytes(64 << 10), 'more.bin': randomBytes(30 << 10) });
      const open = await openOn(child, base);
      const shared = packsOfPacket(edge, base.entry.digest);
      age(shared);
      const lostBy = chunksByPack(shared);
      const halves = [open.bodyFrames.slice(0, 1), open.bodyFrames.slice(1)];
      const part = (n) => send('PUT', `${open.location}/parts/${n}`, { body: chunkBatch(halves[n - 1]), headers: CHUNKS, as: 'sandbox' });
      let done;
      for (const step of ['part 1', 'part 2', 'complete']) {
        const request = step === 'complete' ? () => send('POST', `${open.location}/complete`, { as: 'sandbox' }) : () => part(Number(step.slice(-1)));
        if (step !== at) {
          const r = await request();
          if (step === 'complete') done = r;
          else assert.equal(r.status, 200, JSON.stringify(r.json));
          continue;
        }
        const [r] = await Promise.all([request(), deleteAndClean(base, delay)]);
        if (step === 'complete') done = r;
        else assert.equal(r.status, 200, `${step} racing the clean-up: ${JSON.stringify(r.json)}`);
      }
      const gone = shared.filter((k) => !present(shared).has(k));
      const lost = gone.flatMap((k) => lostBy.get(k));
      if (gone.length > 0 && done.status !== 201) lostAny += 1;
      const end = await settle(t, `clean-up racing ${at} (+${delay} ms)`, child, done, { location: open.location, lost });
      t.diagnostic(`round ${i}, clean-up racing ${at} (+${delay} ms): ${gone.length}/${shared.length} base packs collected, complete ${done.status} in ${done.ms.toFixed(0)} ms (${end})`);
      await servedExact(child, `round ${i}`);
      noPackWithoutUsers(`clean-up race ${i}`);
    }
    t.diagnostic(`${lostAny} of ${rounds.length} rounds lost a pack before the push completed`);
  });

  test('the CLI pushing while the clean-up runs finishes on its own', { timeout: 600_000 }, async (t) => {
    const files = randomFiles(8, 64 << 10);
    const base = packed('cli-base', files);
    await saveWhole(base);
    const child = packed('cli-child', { ...files, 'f2.bin': randomBytes(64 << 10) });
    age(packsOfPacket(edge, base.entry.digest));
    const cli = spawn(PILLBOX, ['checkpoint', 'push', child.file, '--remote', edge.url, '--quiet'], { env: cliEnvOf(), stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    cli.stdout.on('data', (d) => { out += d; });
    cli.stderr.on('data', (d) => { out += d; });
    const started = performance.now();
    const exited = new Promise((ok) => cli.once('exit', ok));
    let running = true;
    exited.then(() => { running = false; });
    // The DELETE of the packet whose chunks the push finds stored, once
    // the CLI is under way, then the clean-up again and again until the
    // CLI is done.
    let runs = 0;
    await deleteAndClean(base);
    while (running) { await cleanUp(); runs += 1; }
    const code = await exited;
    seen.push({ name: 'the CLI pushing beside the clean-up', status: code, code: 'exit', ms: performance.now() - started, next: 0 });
    assert.equal(code, 0, out);
    const json = JSON.parse(out.trim());
    t.diagnostic(`the CLI finished with ${runs} clean-ups beside it: ${JSON.stringify(json.delta ?? {})}`);
    await servedExact(child, 'the CLI\'s push');
    noPackWithoutUsers('the CLI race');
  });

  test('a one-request save whose chunks lay in an open push\'s packs, that push aborted and its packs collected while the save runs', { timeout: 900_000 }, async (t) => {
    // The save finds the frames an open push sent already stored, in that
    // push's packs, and names them; the push is aborted and the clean-up
    // runs at the same time, at a few moments. Whether the packs go
    // between the save's look-up and its packet row is up to the race
    // (counted, not asserted). The save's own pack, unused until its
    // packet row names it, is taken only by a clean-up older than it,
    // which no request can slip in between the store writing the pack and
    // the packet row; that path is the same code (the packet row refused,
    // the push left open listing what lay in the lost packs) and is not
    // staged here.
    let open202 = 0;
    const delays = [0, 40, 120, 250];
    for (const [i, delay] of delays.entries()) {
      // The push holds four bodies; the save brings them and 6 MB more,
      // so that it runs a while after finding the four stored.
      const held = Object.fromEntries(Array.from({ length: 4 }, (_, n) => [`a${n}.bin`, randomBytes(32 << 10)]));
      const more = Object.fromEntries(Array.from({ length: 30 }, (_, n) => [`z${String(n).padStart(2, '0')}.bin`, randomBytes(200 << 10)]));
      const p = packed(`theirs${i}`, { ...held, ...more });
      const g = framesOf(p);
      const heldHex = new Set(Object.values(held).map((b) => sha(b).toString('hex')));
      const open = await openOn(p);
      const part = g.bodyFrames.filter((f) => heldHex.has(f.sha256.toString('hex')));
      assert.equal(part.length, 4);
      assert.equal((await send('PUT', `${open.location}/parts/1`, { body: chunkBatch(part), headers: CHUNKS, as: 'sandbox' })).status, 200);
      const openPacks = packsOfPush(edge, open.id);
      age(openPacks);
      const lostBy = chunksByPack(openPacks);
      const [answer] = await Promise.all([
        send('POST', pushPath(p.entry), { body: pushBody(g.recipes, [...g.manifestFrames, ...g.bodyFrames]), headers: PUSH, as: 'sandbox' }),
        (async () => {
          await pause(delay);
          assert.equal((await send('DELETE', open.location, { as: 'sandbox' })).status, 204);
          await cleanUp();
        })(),
      ]);
      const gone = openPacks.filter((k) => !present(openPacks).has(k));
      const lost = gone.flatMap((k) => lostBy.get(k));
      if (answer.status === 202) open202 += 1;
      const end = await settle(t, `a one-request save racing the abort of the push it found its chunks in (+${delay} ms)`, p, answer, { lost });
      t.diagnostic(`round ${i} (+${delay} ms): ${gone.length}/${openPacks.length} packs collected, save ${answer.status} in ${answer.ms.toFixed(0)} ms (${end})`);
      await servedExact(p, `round ${i}`);
      noPackWithoutUsers(`one-request save race ${i}`);
    }
    t.diagnostic(`${open202} of ${delays.length} saves lost a pack and stayed open`);
  });
});
