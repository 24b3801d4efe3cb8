// Hostile request bodies against the real Worker under `wrangler dev
// --local` (docs/transfer.md, "Decoding limits"; docs/hardening.md,
// "Request bodies"), sent as raw HTTP by a client that speaks the /2 push
// protocol itself: gzip and zstd bombs (10 GiB of zeros) as the
// Content-Encoding of every route that reads a body, zstd frames that decode
// past their raw size (10 GiB claimed), with a window over the limit or not
// zstd at all, and chunk tables past the raw cap, in a push's create body
// and in a part; and bodies over the cap of every route that reads one,
// with a Content-Length and chunked. Every one must get a typed 4xx, leave
// nothing stored, and the store must go on answering `GET /v1` right after.
// How long each refusal and the next `GET /v1` took is printed, not
// asserted (the machine is shared). Also: the isolate's wasm memory after
// 100 MB bodies, and a body far over every cap cut off before it is sent.
//
// Run: node --test --test-concurrency=1 tests/e2e/bodies.test.mjs
import assert from 'node:assert/strict';
import { connect } from 'node:net';
import { gunzipSync } from 'node:zlib';
import { after, before, describe, test } from 'node:test';

import { TOKEN, buildWorker, client, fixtures, startEdge } from './edge.mjs';
import { gzipBomb, rawSend, zstdBomb } from './raw.mjs';
import { tableCounts } from './store.mjs';
import {
  chunkBatch, cutsAndFrames, fixedCuts, frameOf, pushBody, rawOf, recipeSections, recipesDocument, sha, zstd,
} from './wire.mjs';

const MIB = 1 << 20;
/** What a bomb decodes to. */
const BOMB_MIB = 10 * 1024;
/** Bodies over every route's cap (Cloudflare's request cap on most plans). */
const OVERSIZED = 100 * 1000 * 1000;
const PUSH = { 'content-type': 'application/x-pillbox-push' };
const CHUNKS = { 'content-type': 'application/x-pillbox-chunks' };
const JSON_TYPE = { 'content-type': 'application/json' };

let edge;
let api;
let fx;

before(async () => {
  buildWorker();
  fx = fixtures();
  edge = await startEdge();
  api = client(edge.url);
}, { timeout: 600_000 });

after(async () => {
  await edge?.stop();
});

// ---- bodies ---------------------------------------------------------------

/** A zstd frame (encoding 1) named `name` ({ sha256, size }) whose stored bytes are `stored`. */
const lyingFrame = (name, stored) => ({ sha256: name.sha256, raw: name.size, encoding: 1, stored });

/**
 * A chunk batch whose table claims `count` zstd frames of 1 MiB raw and
 * 1 byte stored (more raw bytes than a request may carry once `count`
 * MiB passes the push's `part_limits.max_raw_bytes`), and holds no frame
 * bytes.
 */
function tableOver(count) {
  const head = Buffer.alloc(12);
  head.write('PBCHUNK2');
  head.writeUInt32BE(count, 8);
  const entries = [];
  for (let i = 0; i < count; i++) {
    const e = Buffer.alloc(41);
    sha(Buffer.from(`frame ${i}`)).copy(e, 0);
    e.writeUInt32BE(MIB, 32);
    e.writeUInt32BE(1, 36);
    e[40] = 1;
    entries.push(e);
  }
  return Buffer.concat([head, ...entries]);
}

/** `total` bytes: `piece` repeated (a streamed body never held whole). */
function repeated(piece, total) {
  return { piece, total };
}

// ---- raw HTTP -------------------------------------------------------------

const send = (method, path, options) => rawSend(edge.url, method, path, options);

const code = (r) => r.json?.error?.code;

/** A typed refusal: the status, the code, a message and advice. */
function assertRefused(r, status, expected, what) {
  assert.equal(r.error, undefined, `${what}: ${r.error}`);
  assert.deepEqual([r.status, code(r)], [status, expected], `${what}: ${JSON.stringify(r.json)}`);
  assert.ok(r.json.error.message && r.json.error.advice, `${what}: a message and advice`);
}

/** `GET /v1` answers; returns how long it took. */
async function storeAnswers(what) {
  const r = await send('GET', '/v1', { token: null });
  assert.equal(r.status, 200, `GET /v1 after ${what}: ${r.error ?? r.status}`);
  return r.ms;
}

/** Rows in every table of the index (the store's state, in D1). */
const TABLES = ['packets', 'labels', 'refs', 'uploads', 'upload_parts', 'chunks', 'packs', 'pack_users', 'pushes', 'push_parts', 'body_ends'];
function rowCounts() {
  return tableCounts(edge, TABLES)[0];
}

/** Sends each case, checks its refusal, prints the times, then checks nothing was stored. */
async function refuseAll(t, cases, digests) {
  const before = rowCounts();
  const objects = digests.map((d) => edge.objectsFor(d));
  for (const c of cases) {
    const r = await send(c.method, c.path, c.options);
    const what = `${c.name}`;
    const next = await storeAnswers(what);
    t.diagnostic(`${what}: ${r.status} ${code(r) ?? r.error} in ${r.ms.toFixed(0)} ms; GET /v1 right after: ${next.toFixed(0)} ms`);
    assertRefused(r, c.status, c.code, what);
  }
  assert.deepEqual(rowCounts(), before, `no row was written (before: ${JSON.stringify(before)})`);
  digests.forEach((d, i) => assert.deepEqual(edge.objectsFor(d), objects[i], `no object was stored for ${d}`));
}

// ---- pushes to aim at -----------------------------------------------------

const pushPath = (entry) => `/v1/pushes?digest=${entry.digest}&size=${entry.size}`;
const hexOf = (digest) => digest.slice('sha256:'.length);

/**
 * What a push of fixture `name` sends, with its session log's recipe cut
 * into 1 MiB chunks (the store takes any cuts that make the body): its
 * recipes, the manifest's frames, and the log's chunks (1 MiB names that a
 * 10 GiB zstd bomb fits under).
 */
function pushOf(name) {
  const entry = fx.index[name];
  const bytes = fx.read(name);
  const all = cutsAndFrames(entry, bytes, { compress: false });
  const manifestNames = new Set(all.recipes.manifest.map((c) => c.sha256.toString('hex')));
  const manifestFrames = all.frames.filter((f) => manifestNames.has(f.sha256.toString('hex')));
  const log = entry.members.find((m) => m.path === 'workspace/logs/session.jsonl');
  const pieces = fixedCuts(bytes.subarray(log.data_offset, log.data_offset + log.size), MIB);
  assert.ok(pieces.length >= 3 && pieces[0].length === MIB, `the log has ${log.size} bytes`);
  const chunks = pieces.map((p) => ({ sha256: sha(p), size: p.length, bytes: p }));
  const recipe = {
    sha256: Buffer.from(hexOf(log.sha256), 'hex'),
    size: log.size,
    runs: chunks.map((c) => ({ chunk: { sha256: c.sha256, size: c.size } })),
  };
  return { entry, manifest: all.recipes.manifest, manifestFrames, recipe, chunks };
}

/** A push of `base` left open: the manifest sent, the log's recipe, no body. */
async function openPush() {
  const p = pushOf('base');
  const create = await api.call('POST', pushPath(p.entry), { body: pushBody({ manifest: p.manifest, bodies: [] }, p.manifestFrames), headers: PUSH });
  assert.equal(create.status, 202, JSON.stringify(create.json));
  const rec = await api.call('POST', `${create.json.location}/recipes`, { body: recipesDocument({ bodies: [p.recipe] }) });
  assert.equal(rec.status, 200, JSON.stringify(rec.json));
  assert.equal(rec.json.missing_chunks.length, p.chunks.length);
  return { ...p, location: create.json.location, limits: create.json.part_limits };
}

// ---- the tests ------------------------------------------------------------

test('the bombs decode as built', () => {
  assert.ok(gunzipSync(gzipBomb(3)).equals(Buffer.alloc(3 * MIB)));
  assert.ok(gzipBomb(BOMB_MIB).length < 11 * MIB);
  assert.equal(zstdBomb(BOMB_MIB).length, 6 + 4 * 8 * BOMB_MIB);
  assert.ok(zstdBomb(BOMB_MIB).length < MIB, 'a 10 GiB bomb fits in the stored bytes of a 1 MiB frame');
  if (zstd(Buffer.alloc(1)) !== null) assert.ok(rawOf({ encoding: 1, bytes: zstdBomb(3) }).equals(Buffer.alloc(3 * MIB)));
});

test('100 MB bodies leave the isolate\'s wasm memory as it was', { timeout: 600_000 }, async (t) => {
  const store = async (name) => {
    const entry = fx.index[name];
    const r = await api.call('PUT', `/v1/packets/${entry.digest}`, { body: fx.read(name) });
    assert.equal(r.status, 201, JSON.stringify(r.json));
    const wasm = Number(r.headers.get('pillbox-wasm-memory-bytes'));
    assert.ok(Number.isSafeInteger(wasm) && wasm > 0, `Pillbox-Wasm-Memory-Bytes: ${r.headers.get('pillbox-wasm-memory-bytes')}`);
    return wasm;
  };
  const first = await store('small');
  const body = repeated(Buffer.alloc(MIB, 0x20), OVERSIZED);
  const cases = [
    ['POST …/chunks', `/v1/packets/${fx.index.small.digest}/chunks`, 'POST', false],
    // Counted as it arrives: refused at 64 KiB.
    ['PUT /v1/refs/{name}, chunked', '/v1/refs/sessions/hostile', 'PUT', true],
    ['POST /v1/uploads, chunked', '/v1/uploads', 'POST', true],
  ];
  for (const [name, path, method, chunked] of cases) {
    const r = await send(method, path, { body, chunked, headers: JSON_TYPE });
    t.diagnostic(`100 MB to ${name}: ${r.status} ${code(r) ?? r.error} in ${r.ms.toFixed(0)} ms`);
    assertRefused(r, 413, 'body_too_large', `100 MB to ${name}`);
  }
  const after = await store('harness');
  t.diagnostic(`wasm linear memory: ${first} bytes before, ${after} bytes after three 100 MB bodies`);
  assert.ok(after - first < 16 * MIB, `wasm memory grew from ${first} to ${after} bytes`);
});

describe('bombs', () => {
  let push;
  before(async () => {
    push = await openPush();
  });

  test('a gzip or zstd bomb as the Content-Encoding of any route is refused before it is read, nothing stored', { timeout: 900_000 }, async (t) => {
    const gzip = gzipBomb(BOMB_MIB);
    const zstdBody = zstdBomb(BOMB_MIB);
    t.diagnostic(`bombs of ${BOMB_MIB} MiB of zeros: gzip ${gzip.length} bytes, zstd ${zstdBody.length} bytes`);
    const edited = fx.index.edited;
    const encoded = (body, encoding, type, chunked) => ({ body, chunked, headers: { 'content-encoding': encoding, ...type } });
    const routes = [
      ['POST /v1/pushes', 'POST', pushPath(edited), PUSH],
      ['POST …/recipes', 'POST', `${push.location}/recipes`, {}],
      ['PUT …/parts/{n}', 'PUT', `${push.location}/parts/1`, CHUNKS],
      ['POST …/chunks', 'POST', `/v1/packets/${fx.index.small.digest}/chunks`, JSON_TYPE],
      ['POST /v1/uploads', 'POST', '/v1/uploads', JSON_TYPE],
      ['PUT /v1/refs/{name}', 'PUT', '/v1/refs/sessions/hostile', JSON_TYPE],
    ];
    const cases = [];
    for (const [name, method, path, type] of routes) {
      for (const chunked of [false, true]) {
        const how = chunked ? ', chunked' : '';
        cases.push(
          { name: `gzip bomb, ${name}${how}`, method, path, options: encoded(gzip, 'gzip', type, chunked), status: 415, code: 'encoding_unsupported' },
          { name: `zstd bomb, ${name}${how}`, method, path, options: encoded(zstdBody, 'zstd', type, chunked), status: 415, code: 'encoding_unsupported' },
        );
      }
    }
    await refuseAll(t, cases, [edited.digest, push.entry.digest]);
    const state = await api.call('GET', push.location);
    assert.deepEqual(state.json.parts, [], 'no part was recorded');
  });

  test('a zstd frame that decodes past its raw size, with too large a window, or not at all, and a table past the raw cap are refused, nothing stored', { timeout: 900_000 }, async (t) => {
    const bomb = zstdBomb(BOMB_MIB);
    const wide = zstdBomb(1, 27);
    const garbage = Buffer.from('this is not a zstd frame, whatever its table says');
    const edited = pushOf('edited');
    // A create body: the manifest's frames as they are, then a frame of the
    // log's first chunk (a chunk this push needs) with the bytes given.
    const create = (stored) => pushBody({ manifest: edited.manifest, bodies: [edited.recipe] },
      [...edited.manifestFrames, lyingFrame(edited.chunks[0], stored)]);
    const part = (stored) => chunkBatch([lyingFrame(push.chunks[0], stored)]);
    assert.equal(push.limits.max_raw_bytes % MIB, 0, JSON.stringify(push.limits));
    const over = push.limits.max_raw_bytes / MIB + 1;
    const cases = [
      { name: 'a 10 GiB frame bomb, create body', method: 'POST', path: pushPath(edited.entry), options: { body: create(bomb), headers: PUSH }, status: 422, code: 'chunk_frame_invalid' },
      { name: 'a 10 GiB frame bomb, part', method: 'PUT', path: `${push.location}/parts/1`, options: { body: part(bomb), headers: CHUNKS }, status: 422, code: 'chunk_frame_invalid' },
      { name: 'a 128 MiB window, create body', method: 'POST', path: pushPath(edited.entry), options: { body: create(wide), headers: PUSH }, status: 422, code: 'zstd_window_too_large' },
      { name: 'a 128 MiB window, part', method: 'PUT', path: `${push.location}/parts/1`, options: { body: part(wide), headers: CHUNKS }, status: 422, code: 'zstd_window_too_large' },
      { name: 'not zstd, create body', method: 'POST', path: pushPath(edited.entry), options: { body: create(garbage), headers: PUSH }, status: 422, code: 'chunk_frame_invalid' },
      { name: 'not zstd, part', method: 'PUT', path: `${push.location}/parts/1`, options: { body: part(garbage), headers: CHUNKS }, status: 422, code: 'chunk_frame_invalid' },
      // One frame of 1 MiB raw more than a request's frames may decode to
      // (part_limits.max_raw_bytes), refused at the table before a frame
      // is read.
      { name: 'a table past the raw cap, create body', method: 'POST', path: pushPath(edited.entry),
        options: { body: Buffer.concat([Buffer.from('PBPUSH02'), recipeSections({ manifest: edited.manifest }), tableOver(over)]), headers: PUSH },
        status: 422, code: 'chunk_batch_size' },
      { name: 'a table past the raw cap, part', method: 'PUT', path: `${push.location}/parts/1`, options: { body: tableOver(over), headers: CHUNKS }, status: 422, code: 'chunk_batch_size' },
    ];
    await refuseAll(t, cases, [edited.entry.digest, push.entry.digest]);
    const state = await api.call('GET', push.location);
    assert.deepEqual(state.json.parts, [], 'no part was recorded');
  });

  test('frames within the caps, zstd and as they are, are still taken', async () => {
    const frames = [frameOf(push.chunks[1].bytes), frameOf(push.chunks[2].bytes, { compress: false })];
    const r = await send('PUT', `${push.location}/parts/1`, { body: chunkBatch(frames), headers: CHUNKS });
    assert.equal(r.status, 200, JSON.stringify(r.json));
    assert.equal(r.json.frames, 2);
    if (zstd(Buffer.alloc(1)) !== null) assert.equal(frames[0].encoding, 1, 'the log compresses');
  });
});

/** Stores a fixture packet unless it is stored already. */
async function ensureStored(name) {
  const r = await api.call('PUT', `/v1/packets/${fx.index[name].digest}`, { body: fx.read(name) });
  assert.ok(r.status === 201 || r.status === 200, JSON.stringify(r.json));
}

describe('oversized bodies', () => {
  before(async () => {
    await ensureStored('small');
  });

  test('a body over the cap of every route that reads one is refused, with a Content-Length and chunked, nothing stored', { timeout: 900_000 }, async (t) => {
    const push = await openPush();
    const upload = await api.call('POST', '/v1/uploads', { body: { digest: fx.index.big.digest, size: fx.index.big.size, part_size: 5 * MIB } });
    assert.equal(upload.status, 201, JSON.stringify(upload.json));
    const many = fx.index.many;
    const stored = fx.index.small.digest;
    const body = repeated(Buffer.alloc(MIB, 0x20), OVERSIZED);
    const routes = [
      // [name, method, path, headers, with a Content-Length, chunked]
      ['PUT /v1/packets/{digest}', 'PUT', `/v1/packets/${many.digest}`, {}, [413, 'upload_too_large'], [411, 'length_required']],
      ['POST /v1/uploads', 'POST', '/v1/uploads', JSON_TYPE, [413, 'body_too_large'], [413, 'body_too_large']],
      ['PUT /v1/uploads/{id}/parts/{n}', 'PUT', `${upload.json.location}/parts/1`, {}, [400, 'part_size_mismatch'], [411, 'length_required']],
      ['PUT /v1/refs/{name}', 'PUT', '/v1/refs/sessions/hostile', JSON_TYPE, [413, 'body_too_large'], [413, 'body_too_large']],
      ['POST /v1/packets/{digest}/chunks', 'POST', `/v1/packets/${stored}/chunks`, JSON_TYPE, [413, 'body_too_large'], [411, 'length_required']],
      ['POST /v1/pushes', 'POST', pushPath(many), PUSH, [413, 'push_too_large'], [411, 'length_required']],
      ['POST /v1/pushes/{id}/recipes', 'POST', `${push.location}/recipes`, {}, [413, 'body_too_large'], [411, 'length_required']],
      ['PUT /v1/pushes/{id}/parts/{n}', 'PUT', `${push.location}/parts/1`, CHUNKS, [413, 'part_too_large'], [411, 'length_required']],
      // A route that reads no body: answered, the body dropped.
      ['POST /v1/pushes/{id}/complete', 'POST', `/v1/pushes/${'0'.repeat(32)}/complete`, {}, [404, 'not_found'], [404, 'not_found']],
    ];
    const cases = [];
    for (const [name, method, path, headers, withLength, chunked] of routes) {
      cases.push({ name: `100 MB, ${name}`, method, path, options: { body, headers }, status: withLength[0], code: withLength[1] });
      cases.push({ name: `100 MB chunked, ${name}`, method, path, options: { body, headers, chunked: true }, status: chunked[0], code: chunked[1] });
    }
    await refuseAll(t, cases, [many.digest, push.entry.digest]);
  });

  test('a body far over every cap is cut off before it is sent, and the store goes on answering', { timeout: 300_000 }, async (t) => {
    // 1 GiB announced and streamed to the chunks route: refused on its
    // Content-Length; more than the store drains, so the connection closes.
    const total = 1024 * MIB;
    const result = await new Promise((ok) => {
      const started = performance.now();
      const socket = connect(Number(new URL(edge.url).port), '127.0.0.1');
      let got = '';
      let sent = 0;
      socket.on('data', (d) => { got += d; });
      socket.on('error', () => {});
      socket.on('close', () => ok({ got, sent, ms: performance.now() - started }));
      socket.write(`POST /v1/packets/${fx.index.small.digest}/chunks HTTP/1.1\r\nhost: pillbox\r\nauthorization: Bearer ${TOKEN}\r\ncontent-type: application/json\r\ncontent-length: ${total}\r\nconnection: close\r\n\r\n`);
      const piece = Buffer.alloc(MIB, 0x20);
      const pump = () => {
        while (sent < total && !socket.destroyed) {
          sent += piece.length;
          if (!socket.write(piece)) { socket.once('drain', pump); return; }
        }
      };
      pump();
    });
    const status = result.got.split('\r\n')[0];
    t.diagnostic(`1 GiB announced: closed after ${(result.sent / MIB).toFixed(0)} MiB written in ${result.ms.toFixed(0)} ms; answer: ${JSON.stringify(status)}`);
    assert.ok(result.sent < total, 'the store closed the connection before the body was sent');
    // The answer arrives when the client reads as it sends, unless the
    // close overtakes it. The Worker's answer is the typed refusal; when
    // the close overtakes it inside the local server (miniflare's entry
    // worker, in front of ours), that server answers 500 itself: "Network
    // connection lost", with no problem document of the Worker's.
    const fromWorker = /"error":\{"code":/.test(result.got);
    const lost = status.startsWith('HTTP/1.1 500 ') && !fromWorker && /Network connection lost/.test(result.got);
    if (lost) {
      t.diagnostic(`the local server's own answer to the closed connection: ${JSON.stringify(result.got.slice(0, 300))}`);
    } else if (status) {
      assert.match(status, /^HTTP\/1\.1 413 /);
      assert.match(result.got, /"code":"body_too_large"/);
    }
    t.diagnostic(`GET /v1 right after: ${(await storeAnswers('the cut-off body')).toFixed(0)} ms`);
  });
});

test('a stored packet reads back after all this', async () => {
  const r = await api.call('GET', `/v1/packets/${fx.index.small.digest}`);
  assert.equal(r.status, 200);
  assert.ok(r.bytes.equals(fx.read('small')));
});
