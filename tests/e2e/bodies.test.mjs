// Hostile request bodies against the real Worker under `wrangler dev
// --local` (docs/transfer.md, "Decoding limits"; docs/hardening.md,
// "Request bodies"), sent as raw HTTP by a client that speaks the push
// protocol itself: gzip and zstd bombs (10 GiB of zeros) to every route that
// takes a compressed body, and bodies over the cap of every route that reads
// one, with a Content-Length and chunked. Every one must get a typed 4xx,
// leave nothing stored, and the store must go on answering `GET /v1` right
// after. How long each refusal and the next `GET /v1` took is printed, not
// asserted (the machine is shared). Also: the isolate's wasm memory after
// 100 MB bodies to the chunks route, and a body far over every cap cut off
// before it is sent.
//
// Run: node --test --test-concurrency=1 tests/e2e/bodies.test.mjs
import assert from 'node:assert/strict';
import { connect } from 'node:net';
import { request as httpRequest } from 'node:http';
import { constants, crc32, deflateRawSync, gunzipSync, gzipSync } from 'node:zlib';
import { after, before, describe, test } from 'node:test';

import { TOKEN, buildWorker, client, fixtures, sha256, startEdge } from './edge.mjs';
import { chunkBatch, cutBody, bodiesOf, manifestOf } from './transfer.mjs';

const MIB = 1 << 20;
/** What a bomb decodes to. */
const BOMB_MIB = 10 * 1024;
/** Bodies over every route's cap (Cloudflare's request cap on most plans). */
const OVERSIZED = 100 * 1000 * 1000;
/** No answer in this long fails a request (a generous bound, not a timing). */
const ANSWER_TIMEOUT = 120_000;

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

/**
 * gzip of `mib` MiB of zeros, built without compressing them: one deflate
 * segment of 1 MiB of zeros, flushed to a byte boundary, repeated (its
 * back-references reach only zeros, so every copy decodes the same). The
 * trailer's CRC is computed only for small bombs; a large bomb's is never
 * reached.
 */
function gzipBomb(mib) {
  const segment = deflateRawSync(Buffer.alloc(MIB), { level: 9, finishFlush: constants.Z_SYNC_FLUSH });
  const trailer = Buffer.alloc(8);
  if (mib <= 16) {
    let crc = 0;
    for (let i = 0; i < mib; i++) crc = crc32(Buffer.alloc(MIB), crc);
    trailer.writeUInt32LE(crc >>> 0, 0);
    trailer.writeUInt32LE((mib * MIB) >>> 0, 4);
  }
  const head = Buffer.from([0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff]);
  // 0x03 0x00: a final, empty block of fixed Huffman codes.
  return Buffer.concat([head, ...Array(mib).fill(segment), Buffer.from([0x03, 0x00]), trailer]);
}

/**
 * zstd of `mib` MiB of zeros (RFC 8878): one frame, window 8 MiB, no
 * content size, blocks of 128 KiB each run-length encoded (4 bytes each).
 */
function zstdBomb(mib) {
  const blocks = mib * 8;
  const out = Buffer.alloc(6 + 4 * blocks);
  out.writeUInt32LE(0xfd2fb528, 0);
  out[4] = 0x00; // no content size, not single-segment, no checksum, no dictionary
  out[5] = (23 - 10) << 3; // window 2^23
  for (let i = 0; i < blocks; i++) {
    const last = i === blocks - 1 ? 1 : 0;
    const header = last | (1 << 1) | ((128 << 10) << 3); // RLE, 128 KiB
    out.writeUIntLE(header, 6 + 4 * i, 3);
    out[6 + 4 * i + 3] = 0;
  }
  return out;
}

/** `total` bytes: `piece` repeated (a streamed body never held whole). */
function repeated(piece, total) {
  return { piece, total };
}

// ---- raw HTTP -------------------------------------------------------------

/**
 * Sends one request with `body` (bytes, or a `repeated` body streamed in
 * pieces), with a Content-Length unless `chunked`. Resolves with
 * { status, json, ms } or { error, ms }; never rejects.
 */
function send(method, path, { body, headers = {}, chunked = false, token = TOKEN } = {}) {
  return new Promise((ok) => {
    const started = performance.now();
    const h = { ...headers };
    if (token) h.authorization = `Bearer ${token}`;
    const total = body === undefined ? 0 : (body.total ?? body.length);
    if (!chunked) h['content-length'] = String(total);
    let settled = false;
    const settle = (r) => {
      if (settled) return;
      settled = true;
      ok({ ...r, ms: performance.now() - started });
    };
    const req = httpRequest(edge.url + path, { method, headers: h, agent: false, timeout: ANSWER_TIMEOUT }, (res) => {
      const parts = [];
      res.on('data', (c) => parts.push(c));
      res.on('error', (e) => settle({ error: e.message, status: res.statusCode }));
      res.on('end', () => {
        const bytes = Buffer.concat(parts);
        let json;
        try { json = JSON.parse(bytes.toString('utf8')); } catch { /* not JSON */ }
        settle({ status: res.statusCode, json, headers: res.headers });
      });
    });
    req.on('timeout', () => req.destroy(new Error(`no answer in ${ANSWER_TIMEOUT} ms`)));
    req.on('error', (e) => settle({ error: e.message }));
    if (body === undefined) { req.end(); return; }
    if (!body.piece) {
      if (chunked) {
        // Several writes and no Content-Length: Transfer-Encoding: chunked.
        for (let at = 0; at < body.length; at += MIB) req.write(body.subarray(at, at + MIB));
        req.end();
      } else {
        req.end(body);
      }
      return;
    }
    let sent = 0;
    const pump = () => {
      while (sent < body.total && !req.destroyed) {
        const n = Math.min(body.piece.length, body.total - sent);
        sent += n;
        if (!req.write(n === body.piece.length ? body.piece : body.piece.subarray(0, n))) {
          req.once('drain', pump);
          return;
        }
      }
      req.end();
    };
    pump();
  });
}

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
const TABLES = ['packets', 'labels', 'refs', 'uploads', 'upload_parts', 'chunks', 'packs', 'pack_users', 'pushes', 'push_parts'];
function rowCounts() {
  return edge.d1(`SELECT ${TABLES.map((t) => `(SELECT count(*) FROM ${t}) AS ${t}`).join(', ')}`)[0];
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

// ---- a push to aim at -----------------------------------------------------

/** A push of the `base` fixture: its id, the recipes it needs, a part. */
async function openPush() {
  const entry = fx.index.base;
  const bytes = fx.read('base');
  const create = await api.call('POST', `/v1/pushes?digest=${entry.digest}&size=${entry.size}`, { body: manifestOf(entry, bytes), headers: { 'content-type': 'application/json' } });
  assert.equal(create.status, 201, JSON.stringify(create.json));
  const bodies = new Map(bodiesOf(entry, bytes).map((b) => [b.hex, b]));
  const small = create.json.missing.map((h) => bodies.get(h)).find((b) => b.size <= 256 * 1024);
  const large = create.json.missing.map((h) => bodies.get(h)).find((b) => b.size > 256 * 1024);
  return { entry, location: create.json.location, small, recipes: { recipes: [cutBody(large.body).recipe] } };
}

// ---- the tests ------------------------------------------------------------

test('the bombs decode as built', () => {
  assert.ok(gunzipSync(gzipBomb(3)).equals(Buffer.alloc(3 * MIB)));
  assert.ok(gzipBomb(BOMB_MIB).length < 11 * MIB);
  assert.equal(zstdBomb(BOMB_MIB).length, 6 + 4 * 8 * BOMB_MIB);
});

test('100 MB bodies to the chunks route leave the isolate\'s wasm memory as it was', { timeout: 600_000 }, async (t) => {
  const store = async (name) => {
    const entry = fx.index[name];
    const r = await api.call('PUT', `/v1/packets/${entry.digest}`, { body: fx.read(name) });
    assert.equal(r.status, 201, JSON.stringify(r.json));
    const wasm = Number(r.headers.get('pillbox-wasm-memory-bytes'));
    assert.ok(Number.isSafeInteger(wasm) && wasm > 0, `Pillbox-Wasm-Memory-Bytes: ${r.headers.get('pillbox-wasm-memory-bytes')}`);
    return wasm;
  };
  const first = await store('small');
  const path = `/v1/packets/${fx.index.small.digest}/chunks`;
  const body = repeated(Buffer.alloc(MIB, 0x20), OVERSIZED);
  for (const chunked of [false, true]) {
    const r = await send('POST', path, { body, chunked, headers: { 'content-type': 'application/json' } });
    t.diagnostic(`100 MB to POST …/chunks${chunked ? ', chunked' : ''}: ${r.status} ${code(r) ?? r.error} in ${r.ms.toFixed(0)} ms`);
    assertRefused(r, 413, 'body_too_large', `100 MB${chunked ? ' chunked' : ''}`);
  }
  const after = await store('harness');
  t.diagnostic(`wasm linear memory: ${first} bytes before, ${after} bytes after two 100 MB bodies`);
  assert.ok(after - first < 16 * MIB, `wasm memory grew from ${first} to ${after} bytes`);
});

describe('bombs', () => {
  let push;
  before(async () => {
    push = await openPush();
  });

  test('a gzip or zstd bomb to every route that takes a compressed body is refused at once, nothing stored', { timeout: 900_000 }, async (t) => {
    const gzip = gzipBomb(BOMB_MIB);
    const zstd = zstdBomb(BOMB_MIB);
    t.diagnostic(`bombs of ${BOMB_MIB} MiB of zeros: gzip ${gzip.length} bytes, zstd ${zstd.length} bytes`);
    const edited = fx.index.edited;
    const manifest = `/v1/pushes?digest=${edited.digest}&size=${edited.size}`;
    const encoded = (body, encoding, chunked = false) => ({ body, chunked, headers: { 'content-encoding': encoding, 'content-type': 'application/octet-stream' } });
    const cases = [];
    for (const chunked of [false, true]) {
      const how = chunked ? ', chunked' : '';
      cases.push(
        { name: `gzip bomb, manifest${how}`, method: 'POST', path: manifest, options: encoded(gzip, 'gzip', chunked), status: 413, code: 'limit_manifest' },
        { name: `zstd bomb, manifest${how}`, method: 'POST', path: manifest, options: encoded(zstd, 'zstd', chunked), status: 413, code: 'limit_manifest' },
        { name: `gzip bomb, recipes${how}`, method: 'POST', path: `${push.location}/recipes`, options: encoded(gzip, 'gzip', chunked), status: 413, code: 'decoded_too_large' },
        // Recipes take identity and gzip only.
        { name: `zstd bomb, recipes${how}`, method: 'POST', path: `${push.location}/recipes`, options: encoded(zstd, 'zstd', chunked), status: 415, code: 'encoding_unsupported' },
      );
    }
    // A part's zeros are no chunk batch; a part needs a Content-Length.
    cases.push(
      { name: 'gzip bomb, part', method: 'PUT', path: `${push.location}/parts/1`, options: encoded(gzip, 'gzip'), status: 422, code: 'chunk_batch_magic' },
      { name: 'zstd bomb, part', method: 'PUT', path: `${push.location}/parts/1`, options: encoded(zstd, 'zstd'), status: 422, code: 'chunk_batch_magic' },
      { name: 'gzip bomb, part, chunked', method: 'PUT', path: `${push.location}/parts/1`, options: encoded(gzip, 'gzip', true), status: 411, code: 'length_required' },
    );
    // A part that starts as a batch of the chunk the push needs, then zeros.
    const head = chunkBatch([push.small.body], [push.small.hex]).subarray(0, 12 + 36);
    const batchBomb = (encoding) => {
      if (encoding === 'zstd') return Buffer.concat([zstdFrameOf(head), zstd]);
      // The table as deflate blocks flushed to a byte boundary, then the
      // bomb's blocks (each segment starts with a literal zero).
      const table = deflateRawSync(head, { finishFlush: constants.Z_SYNC_FLUSH });
      return Buffer.concat([gzip.subarray(0, 10), table, gzip.subarray(10)]);
    };
    cases.push(
      { name: 'gzip bomb after a batch table, part', method: 'PUT', path: `${push.location}/parts/1`, options: encoded(batchBomb('gzip'), 'gzip'), status: 422, code: 'chunk_digest_mismatch' },
      { name: 'zstd bomb after a batch table, part', method: 'PUT', path: `${push.location}/parts/1`, options: encoded(batchBomb('zstd'), 'zstd'), status: 422, code: 'chunk_digest_mismatch' },
    );
    await refuseAll(t, cases, [edited.digest, push.entry.digest]);
    const state = await api.call('GET', push.location);
    assert.deepEqual(state.json.parts, [], 'no part was recorded');
  });

  test('a body that does not decode is 422 encoding_invalid on every compressed route', { timeout: 300_000 }, async (t) => {
    const edited = fx.index.edited;
    const garbage = Buffer.from('this is not compressed at all, whatever its header says');
    const cases = [];
    for (const encoding of ['gzip', 'zstd']) {
      const options = { body: garbage, headers: { 'content-encoding': encoding } };
      cases.push(
        { name: `${encoding} garbage, manifest`, method: 'POST', path: `/v1/pushes?digest=${edited.digest}&size=${edited.size}`, options, status: 422, code: 'encoding_invalid' },
        { name: `${encoding} garbage, part`, method: 'PUT', path: `${push.location}/parts/1`, options, status: 422, code: 'encoding_invalid' },
      );
    }
    cases.push({ name: 'gzip garbage, recipes', method: 'POST', path: `${push.location}/recipes`, options: { body: garbage, headers: { 'content-encoding': 'gzip' } }, status: 422, code: 'encoding_invalid' });
    await refuseAll(t, cases, [edited.digest]);
  });

  test('a part within its caps, gzip and zstd, is still taken', async () => {
    const batch = chunkBatch([push.small.body], [push.small.hex]);
    for (const [n, encoding, bytes] of [[1, 'gzip', gzipSync(batch)], [2, 'zstd', zstdFrameOf(batch)]]) {
      const r = await send('PUT', `${push.location}/parts/${n}`, { body: bytes, headers: { 'content-encoding': encoding } });
      assert.equal(r.status, 200, `${encoding}: ${JSON.stringify(r.json)}`);
      assert.equal(r.json.frames, 1);
    }
  });
});

/** `bytes` as one zstd frame of raw blocks (no compression needed). */
function zstdFrameOf(bytes) {
  const pieces = [];
  const head = Buffer.alloc(6);
  head.writeUInt32LE(0xfd2fb528, 0);
  head[4] = 0x00;
  head[5] = (23 - 10) << 3;
  pieces.push(head);
  const BLOCK = 128 << 10;
  for (let at = 0; at < bytes.length || at === 0; at += BLOCK) {
    const piece = bytes.subarray(at, at + BLOCK);
    const last = at + BLOCK >= bytes.length ? 1 : 0;
    const header = Buffer.alloc(3);
    header.writeUIntLE(last | (0 << 1) | (piece.length << 3), 0, 3);
    pieces.push(header, piece);
    if (bytes.length === 0) break;
  }
  return Buffer.concat(pieces);
}

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
    const json = { 'content-type': 'application/json' };
    const body = repeated(Buffer.alloc(MIB, 0x20), OVERSIZED);
    const routes = [
      // [name, method, path, headers, with a Content-Length, chunked]
      ['PUT /v1/packets/{digest}', 'PUT', `/v1/packets/${many.digest}`, {}, [413, 'upload_too_large'], [411, 'length_required']],
      ['POST /v1/uploads', 'POST', '/v1/uploads', json, [413, 'body_too_large'], [413, 'body_too_large']],
      ['PUT /v1/uploads/{id}/parts/{n}', 'PUT', `${upload.json.location}/parts/1`, {}, [400, 'part_size_mismatch'], [411, 'length_required']],
      ['PUT /v1/refs/{name}', 'PUT', '/v1/refs/sessions/hostile', json, [413, 'body_too_large'], [413, 'body_too_large']],
      ['POST /v1/packets/{digest}/chunks', 'POST', `/v1/packets/${stored}/chunks`, json, [413, 'body_too_large'], [413, 'body_too_large']],
      ['POST /v1/pushes', 'POST', `/v1/pushes?digest=${many.digest}&size=${many.size}`, json, [413, 'limit_manifest'], [413, 'limit_manifest']],
      ['POST /v1/pushes/{id}/recipes', 'POST', `${push.location}/recipes`, json, [413, 'body_too_large'], [413, 'body_too_large']],
      ['PUT /v1/pushes/{id}/parts/{n}', 'PUT', `${push.location}/parts/1`, {}, [413, 'part_too_large'], [411, 'length_required']],
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
    // close overtakes it; if it arrives, it is the typed refusal.
    if (status) assert.match(status, /^HTTP\/1\.1 413 /);
    if (status) assert.match(result.got, /"code":"body_too_large"/);
    t.diagnostic(`GET /v1 right after: ${(await storeAnswers('the cut-off body')).toFixed(0)} ms`);
  });
});

test('a stored packet reads back after all this', async () => {
  const r = await api.call('GET', `/v1/packets/${fx.index.small.digest}`);
  assert.equal(r.status, 200);
  assert.equal(sha256(r.bytes), fx.index.small.digest);
});
