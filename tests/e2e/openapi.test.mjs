// Conformance of the pillbox Worker to its HTTP API document,
// proto/openapi.yaml. Every operation in the document is called on the real
// Worker (`wrangler dev --local`) for each status it declares; every answer
// is checked against the document: the status is declared for that
// operation, the Content-Type is a declared one, a JSON body validates
// against the declared schema ($refs resolved), declared required headers
// are present and every declared header that is present matches its schema.
// The document and the Worker's router (worker/src/route.rs) must also name
// the same routes, and a method a path does not list must be 405 with an
// `Allow` header naming exactly the document's methods.
//
// Run: node --test --test-concurrency=1 tests/e2e/openapi.test.mjs
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { request as httpRequest } from 'node:http';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';

import Ajv2020Module from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';

import { readDocument } from '../openapi/document.mjs';
import { ROOT, TOKEN, buildWorker, fixtures, pushBodyExample, sha256, startEdge } from './edge.mjs';
import { chunkBatch, cutsAndFrames, frameOf, manifestFirst, pushBody, readBatch, readRecipes, recipesDocument, sha } from './wire.mjs';

const Ajv2020 = Ajv2020Module.default ?? Ajv2020Module;
const addFormats = addFormatsModule.default ?? addFormatsModule;

const MIB = 1 << 20;
const LIMITS = {
  MAX_SINGLE_UPLOAD_BYTES: String(8 * MIB),
  PART_SIZE_BYTES: String(5 * MIB),
  MAX_PACKET_BYTES: String(16 * MIB),
  MAX_MEMBERS: '200',
  PUSH_PART_BYTES: String(1 * MIB),
  // The preflights below come from this origin (none is allowed by default).
  CORS_ORIGIN: 'http://inspector.test',
};
const METHODS = ['get', 'head', 'put', 'post', 'delete', 'options', 'patch', 'trace'];

// ---- the document ---------------------------------------------------------

// Strictly: a key twice, or a key split off by a comma in a flow mapping,
// fails here (tests/openapi/ also runs independent OpenAPI validators).
const spec = readDocument();

function pointer(ref) {
  assert.ok(ref.startsWith('#/'), `only local $refs are used: ${ref}`);
  let node = spec;
  for (const raw of ref.slice(2).split('/')) {
    const key = raw.replace(/~1/g, '/').replace(/~0/g, '~');
    assert.ok(node && typeof node === 'object' && key in node, `unresolvable $ref ${ref}`);
    node = node[key];
  }
  return node;
}

/** A copy of `node` with every `$ref` replaced by what it points at. */
function deref(node, depth = 0) {
  assert.ok(depth < 64, '$ref chain too deep (a cycle?)');
  if (Array.isArray(node)) return node.map((n) => deref(n, depth + 1));
  if (node && typeof node === 'object') {
    if (typeof node.$ref === 'string') {
      const { $ref, ...rest } = node;
      return deref({ ...pointer($ref), ...rest }, depth + 1);
    }
    return Object.fromEntries(Object.entries(node).map(([k, v]) => [k, deref(v, depth + 1)]));
  }
  return node;
}

/** "METHOD /template" → the operation with its responses resolved. */
const operations = new Map();
for (const [template, item] of Object.entries(spec.paths)) {
  for (const method of METHODS) {
    if (item[method]) operations.set(`${method.toUpperCase()} ${template}`, deref(item[method]));
  }
}

const ajv = new Ajv2020({ strict: false, allErrors: true });
addFormats(ajv);
const validators = new Map();
function validate(schema, value, what) {
  const key = JSON.stringify(schema);
  if (!validators.has(key)) validators.set(key, ajv.compile(schema));
  const check = validators.get(key);
  assert.ok(check(value), `${what} does not match the document: ${ajv.errorsText(check.errors)}\n${JSON.stringify(value)}`);
}

// ---- requests and the conformance check -----------------------------------

/** Statuses seen per operation. */
const seen = new Map();

function send(base, method, path, { body, headers = {}, token = TOKEN, chunked = false } = {}) {
  return new Promise((ok, fail) => {
    const h = { ...headers };
    if (token) h.authorization = `Bearer ${token}`;
    let payload = body;
    if (body !== undefined && !(body instanceof Uint8Array) && typeof body !== 'string') {
      payload = JSON.stringify(body);
      h['content-type'] = 'application/json';
    }
    if (payload !== undefined) payload = Buffer.from(payload);
    if (!chunked) h['content-length'] = String(payload ? payload.length : 0);
    const req = httpRequest(base + path, { method, headers: h, agent: false, timeout: 60_000 }, (res) => {
      const chunks = [];
      res.on('data', (c) => chunks.push(c));
      res.on('error', fail);
      res.on('end', () => {
        const out = new Headers();
        for (const [k, v] of Object.entries(res.headers)) out.set(k, Array.isArray(v) ? v.join(', ') : v);
        ok({ status: res.statusCode, headers: out, bytes: Buffer.concat(chunks) });
      });
    });
    req.on('timeout', () => req.destroy(new Error(`${method} ${path}: no answer in 60 s`)));
    req.on('error', (e) => fail(new Error(`${method} ${path}: ${e.message}`)));
    if (chunked && payload) {
      // Two writes without a Content-Length: Transfer-Encoding: chunked.
      req.write(payload.subarray(0, 1));
      req.end(payload.subarray(1));
    } else {
      req.end(payload);
    }
  });
}

/** Fills `{name}` placeholders (values are used as given: already encoded). */
function fill(template, params) {
  return template.replace(/\{(\w+)\}/g, (_, name) => {
    assert.ok(name in params, `no value for {${name}}`);
    return String(params[name]);
  });
}

/** Checks one answer against the document. */
function conform(method, template, res) {
  const key = `${method} ${template}`;
  const op = operations.get(key);
  assert.ok(op, `${key} is not in the document`);
  const status = String(res.status);
  const where = `${key} → ${status}`;
  assert.ok(status in op.responses,
    `${key} answered ${status}; the document declares ${Object.keys(op.responses).join(', ')}\n${res.bytes.toString('utf8').slice(0, 500)}`);
  if (!seen.has(key)) seen.set(key, new Set());
  seen.get(key).add(status);
  const response = op.responses[status];
  for (const [name, header] of Object.entries(response.headers ?? {})) {
    const value = res.headers.get(name);
    if (header.required) assert.notEqual(value, null, `${where}: the document requires the ${name} header`);
    if (value !== null && header.schema) validate(header.schema, value, `${where}: header ${name}`);
  }
  const type = (res.headers.get('content-type') ?? '').split(';')[0].trim();
  if (response.content) {
    const declared = Object.keys(response.content);
    assert.ok(declared.includes(type), `${where}: Content-Type ${JSON.stringify(type)}, the document declares ${declared}`);
    if (method !== 'HEAD' && type === 'application/json') {
      let json;
      assert.doesNotThrow(() => { json = JSON.parse(res.bytes.toString('utf8')); }, `${where}: the body is not JSON`);
      validate(response.content[type].schema, json, `${where}: body`);
      res.json = json;
      walkAnswer(method, template, status, json);
    }
  } else {
    assert.equal(res.bytes.length, 0, `${where}: the document declares no body, the Worker sent ${res.bytes.length} bytes`);
  }
  return res;
}

let edge;
let tokenEdge;
let fx;

/** Calls an operation on the main Worker and checks the answer. */
async function call(method, template, params = {}, options = {}) {
  const res = await send(edge.url, method, fill(template, params) + (options.query ?? ''), options);
  return conform(method, template, res);
}

/** Same, on the Worker that needs the token for reads too. */
async function callTokenEdge(method, template, params = {}, options = {}) {
  const res = await send(tokenEdge.url, method, fill(template, params) + (options.query ?? ''), options);
  return conform(method, template, res);
}

const flip = (bytes, offset) => {
  const copy = Buffer.from(bytes);
  copy[offset] ^= 1;
  return copy;
};
const code = (res) => res.json?.error?.code;
const UNKNOWN = `sha256:${'0'.repeat(63)}1`;
const UNKNOWN_UPLOAD = 'f'.repeat(32);

before(async () => {
  buildWorker();
  fx = fixtures();
  [edge, tokenEdge] = await Promise.all([startEdge(LIMITS), startEdge({ ...LIMITS, READ_ACCESS: 'token' })]);
}, { timeout: 600_000 });

after(async () => {
  await Promise.all([edge?.stop(), tokenEdge?.stop()]);
});

// ---- the document and the router name the same routes -------------------

describe('the document and the router', () => {
  test('every route of worker/src/route.rs is in the document, and every operation of the document is routed', () => {
    const source = readFileSync(join(ROOT, 'worker/src/route.rs'), 'utf8');
    const body = source.slice(source.indexOf('pub enum Route {'));
    const enumBody = body.slice(0, body.indexOf('\n}\n'));
    const routed = new Set();
    let variants = 0;
    for (const line of enumBody.split('\n')) {
      const m = line.match(/^\s*\/\/\/ `(?:([A-Z]+)`\/`)?([A-Z]+) (\/v1[^`]*)`/);
      if (m) {
        variants += 1;
        for (const method of [m[1], m[2]].filter(Boolean)) routed.add(`${method} ${m[3]}`);
      }
    }
    assert.ok(variants >= 15, `read ${variants} routes from route.rs: its doc comments changed shape`);
    const documented = new Set(operations.keys());
    assert.deepEqual([...routed].filter((r) => !documented.has(r)), [], 'routes the Worker serves that the document lacks');
    assert.deepEqual([...documented].filter((r) => !routed.has(r)), [], 'operations of the document the router lacks');
  });
});

// ---- every operation, every declared status --------------------------------

describe('operations', () => {
  test('GET and HEAD /v1', async () => {
    const info = await call('GET', '/v1');
    assert.equal(info.status, 200);
    assert.equal(info.json.max_single_upload_bytes, 8 * MIB);
    const head = await call('HEAD', '/v1');
    assert.equal(head.status, 200);
    const anonymous = await callTokenEdge('GET', '/v1', {}, { token: null });
    assert.equal(anonymous.status, 200, 'settings are public even when reads need the token');
    assert.equal(anonymous.json.read_access, 'token');
  });

  test('PUT /v1/packets/{digest}', async () => {
    const T = '/v1/packets/{digest}';
    const small = fx.index.small;
    const bytes = fx.read('small');
    assert.equal((await call('PUT', T, { digest: small.digest }, { body: bytes, token: null })).status, 401);
    assert.equal((await call('PUT', T, { digest: small.digest }, { body: bytes, token: 'wrong' })).status, 403);
    const bad = await call('PUT', T, { digest: 'sha256:ABC' }, { body: bytes });
    assert.equal(code(bad), 'digest_syntax');
    const label = await call('PUT', T, { digest: small.digest }, { body: bytes, query: '?label=a%20b' });
    assert.deepEqual([label.status, code(label)], [400, 'label_invalid']);
    const chunked = await call('PUT', T, { digest: small.digest }, { body: bytes, chunked: true });
    assert.deepEqual([chunked.status, code(chunked)], [411, 'length_required']);
    const large = await call('PUT', T, { digest: fx.index.big.digest }, { body: new Uint8Array(8 * MIB + 1) });
    assert.deepEqual([large.status, code(large)], [413, 'upload_too_large']);
    const data = small.members.find((m) => m.path === 'workspace/src/data.bin');
    const tampered = await call('PUT', T, { digest: small.digest }, { body: flip(bytes, data.data_offset + 5) });
    assert.deepEqual([tampered.status, code(tampered)], [422, 'member_digest_mismatch']);
    const stored = await call('PUT', T, { digest: small.digest }, { body: bytes, query: '?label=kind=sample' });
    assert.equal(stored.status, 201);
    assert.equal(stored.headers.get('location'), `/v1/packets/${small.digest}`);
    assert.equal(stored.json.created, true);
    assert.ok(Number(stored.headers.get('pillbox-wasm-memory-bytes')) >= 65536);
    const again = await call('PUT', T, { digest: small.digest }, { body: bytes });
    assert.deepEqual([again.status, again.json.created], [200, false]);
    assert.equal((await call('PUT', T, { digest: fx.index.harness.digest }, { body: fx.read('harness') })).status, 201);
  });

  test('GET /v1/packets', async () => {
    const T = '/v1/packets';
    const list = await call('GET', T);
    assert.equal(list.status, 200);
    assert.ok(list.json.packets.some((p) => p.digest === fx.index.small.digest));
    const codex = await call('GET', T, {}, { query: '?harness=codex&limit=1' });
    assert.deepEqual(codex.json.packets.map((p) => p.digest), [fx.index.harness.digest]);
    assert.equal(codex.json.packets[0].harness.kind, 'codex');
    const bad = await call('GET', T, {}, { query: '?limit=0' });
    assert.deepEqual([bad.status, code(bad)], [400, 'limit_invalid']);
  });

  for (const method of ['GET', 'HEAD']) {
    test(`${method} /v1/packets/{digest}`, async () => {
      const T = '/v1/packets/{digest}';
      const small = fx.index.small;
      const bytes = fx.read('small');
      const whole = await call(method, T, { digest: small.digest });
      assert.equal(whole.status, 200);
      assert.equal(whole.headers.get('content-length'), String(small.size));
      if (method === 'GET') assert.ok(whole.bytes.equals(fx.read('small')));
      const part = await call(method, T, { digest: small.digest }, { headers: { range: 'bytes=0-99' } });
      assert.equal(part.status, 206);
      assert.equal(part.headers.get('content-range'), `bytes 0-99/${small.size}`);
      if (method === 'GET') assert.ok(part.bytes.equals(bytes.subarray(0, 100)));
      const cached = await call(method, T, { digest: small.digest }, { headers: { 'if-none-match': `"${small.digest}"` } });
      assert.equal(cached.status, 304);
      const beyond = await call(method, T, { digest: small.digest }, { headers: { range: `bytes=${small.size}-` } });
      assert.equal(beyond.status, 416);
      assert.equal(beyond.headers.get('content-range'), `bytes */${small.size}`);
      assert.equal((await call(method, T, { digest: UNKNOWN })).status, 404);
      assert.equal((await call(method, T, { digest: 'sha256:xyz' })).status, 400);
    });
  }

  test('GET /v1/packets/{digest}/manifest', async () => {
    const T = '/v1/packets/{digest}/manifest';
    const small = fx.index.small;
    const manifest = await call('GET', T, { digest: small.digest });
    assert.equal(manifest.status, 200);
    assert.ok(manifest.bytes.equals(fx.read('small').subarray(small.manifest_offset, small.manifest_offset + small.manifest_len)));
    assert.equal((await call('GET', T, { digest: UNKNOWN })).status, 404);
    assert.equal((await call('GET', T, { digest: 'sha256%3Axyz' })).status, 400);
  });

  for (const method of ['GET', 'HEAD']) {
    test(`${method} /v1/packets/{digest}/members/{path}`, async () => {
      const T = '/v1/packets/{digest}/members/{path}';
      const small = fx.index.small;
      const digest = small.digest;
      const main = small.members.find((m) => m.path === 'workspace/src/main.rs');
      const whole = await call(method, T, { digest, path: main.path });
      assert.equal(whole.status, 200);
      assert.equal(whole.headers.get('pillbox-member-sha256'), main.sha256);
      if (method === 'GET') assert.equal(sha256(whole.bytes), main.sha256);
      const part = await call(method, T, { digest, path: main.path }, { headers: { range: 'bytes=3-6' } });
      assert.equal(part.status, 206);
      assert.equal(part.headers.get('content-range'), `bytes 3-6/${main.size}`);
      const beyond = await call(method, T, { digest, path: main.path }, { headers: { range: `bytes=${main.size + 10}-` } });
      assert.equal(beyond.status, 416);
      const dir = await call(method, T, { digest, path: 'workspace/src' });
      assert.equal(dir.status, 404);
      if (method === 'GET') assert.equal(code(dir), 'not_a_file');
      assert.equal((await call(method, T, { digest, path: 'workspace/nope' })).status, 404);
      const badPath = await call(method, T, { digest, path: 'workspace/%ff' });
      assert.equal(badPath.status, 400);
      if (method === 'GET') assert.equal(code(badPath), 'bad_path');
    });
  }

  test('GET /v1/search', async () => {
    const T = '/v1/search';
    const main = fx.index.small.members.find((m) => m.path === 'workspace/src/main.rs');
    const byPath = await call('GET', T, {}, { query: `?path=${encodeURIComponent(main.path)}` });
    assert.equal(byPath.status, 200);
    assert.ok(byPath.json.matches.some((m) => m.digest === fx.index.small.digest));
    const bySha = await call('GET', T, {}, { query: `?sha256=${main.sha256.slice(7)}` });
    assert.equal(bySha.json.matches[0].sha256, main.sha256);
    const neither = await call('GET', T);
    assert.deepEqual([neither.status, code(neither)], [400, 'search_invalid']);
  });

  test('refs: PUT, GET, list, DELETE', async () => {
    const T = '/v1/refs/{name}';
    const name = 'sessions/conformance/latest';
    const small = fx.index.small.digest;
    const harness = fx.index.harness.digest;
    assert.equal((await call('PUT', T, { name }, { body: { digest: small }, token: null })).status, 401);
    assert.equal((await call('PUT', T, { name }, { body: { digest: small }, token: 'wrong' })).status, 403);
    const badBody = await call('PUT', T, { name }, { body: { digest: small, extra: 1 } });
    assert.deepEqual([badBody.status, code(badBody)], [400, 'body_invalid']);
    const huge = await call('PUT', T, { name }, { body: { digest: 'x'.repeat(70 * 1024) } });
    assert.equal(huge.status, 413);
    const gzipped = await call('PUT', T, { name }, { body: { digest: small }, headers: { 'content-encoding': 'gzip' } });
    assert.deepEqual([gzipped.status, code(gzipped)], [415, 'encoding_unsupported']);
    assert.equal((await call('PUT', T, { name }, { body: { digest: UNKNOWN } })).status, 404);
    const created = await call('PUT', T, { name }, { body: { digest: small } });
    assert.deepEqual([created.status, created.json.previous], [201, null]);
    const conflict = await call('PUT', T, { name }, { body: { digest: harness } });
    assert.deepEqual([conflict.status, conflict.json.error.current], [409, small]);
    const moved = await call('PUT', T, { name }, { body: { digest: harness }, headers: { 'if-match': `"${small}"` } });
    assert.deepEqual([moved.status, moved.json.previous, moved.json.digest], [200, small, harness]);
    await call('PUT', T, { name }, { body: { digest: small }, headers: { 'if-match': `"${harness}"` } });

    const got = await call('GET', T, { name });
    assert.equal(got.status, 200);
    assert.equal(got.headers.get('etag'), `"${small}"`);
    assert.equal((await call('GET', T, { name: 'sessions/none' })).status, 404);
    assert.equal((await call('GET', T, { name: 'a%20b' })).status, 400);

    const list = await call('GET', '/v1/refs', {}, { query: '?prefix=sessions/' });
    assert.deepEqual(list.json.refs.map((r) => r.name), [name]);
    assert.deepEqual([list.json.refs[0].size, list.json.refs[0].labels], [fx.index.small.size, ['kind=sample']]);
    assert.equal((await call('GET', '/v1/refs', {}, { query: '?limit=x' })).status, 400);

    // Its history: created, moved, moved back; newest first.
    const H = '/v1/ref-history/{name}';
    const history = await call('GET', H, { name });
    assert.equal(history.status, 200);
    assert.deepEqual(history.json.moves.map((m) => m.digest), [small, harness, small]);
    assert.deepEqual([history.json.next_cursor, history.json.kept], [null, 100]);
    const page = await call('GET', H, { name }, { query: '?limit=1' });
    assert.deepEqual([page.json.moves.length, typeof page.json.next_cursor], [1, 'string']);
    const older = await call('GET', H, { name }, { query: `?limit=5&cursor=${page.json.next_cursor}` });
    assert.deepEqual(older.json.moves.map((m) => m.digest), [harness, small]);
    assert.equal((await call('GET', H, { name: 'sessions/none' })).status, 404);
    assert.equal((await call('GET', H, { name }, { query: '?limit=0' })).status, 400);
    assert.equal((await call('GET', H, { name }, { token: null })).status, 401);
    assert.equal((await call('GET', H, { name }, { token: 'wrong' })).status, 403);

    // Digests by prefix.
    const D = '/v1/digests/{prefix}';
    const found = await call('GET', D, { prefix: small.slice(0, 15) });
    assert.equal(found.status, 200);
    assert.deepEqual([found.json.prefix, found.json.digests, found.json.truncated], [small.slice(0, 15), [small], false]);
    const first = await call('GET', D, { prefix: 'sha256:00000000' });
    assert.deepEqual([first.json.digests, first.json.truncated], [[], false]);
    const bad = await call('GET', D, { prefix: 'sha256:0123' });
    assert.deepEqual([bad.status, code(bad)], [400, 'digest_prefix_invalid']);
    assert.equal((await call('GET', D, { prefix: small.slice(0, 15) }, { token: null })).status, 401);
    assert.equal((await call('GET', D, { prefix: small.slice(0, 15) }, { token: 'wrong' })).status, 403);

    // The packet a ref holds cannot be deleted (409), see below.
    const referenced = await call('DELETE', '/v1/packets/{digest}', { digest: small });
    assert.deepEqual([referenced.status, code(referenced)], [409, 'packet_referenced']);

    assert.equal((await call('DELETE', T, { name }, { token: null })).status, 401);
    assert.equal((await call('DELETE', T, { name }, { token: 'wrong' })).status, 403);
    assert.equal((await call('DELETE', T, { name }, { headers: { 'if-match': 'garbage' } })).status, 400);
    const wrong = await call('DELETE', T, { name }, { headers: { 'if-match': `"${harness}"` } });
    assert.deepEqual([wrong.status, wrong.json.error.current], [409, small]);
    assert.equal((await call('DELETE', T, { name }, { headers: { 'if-match': `"${small}"` } })).status, 204);
    assert.equal((await call('DELETE', T, { name })).status, 404);
  });

  test('DELETE /v1/packets/{digest}', async () => {
    const T = '/v1/packets/{digest}';
    const digest = fx.index.harness.digest;
    assert.equal((await call('DELETE', T, { digest }, { token: null })).status, 401);
    assert.equal((await call('DELETE', T, { digest }, { token: 'wrong' })).status, 403);
    assert.equal((await call('DELETE', T, { digest: 'sha256:1' })).status, 400);
    assert.equal((await call('DELETE', T, { digest })).status, 204);
    assert.equal((await call('DELETE', T, { digest })).status, 404);
  });

  test('multipart uploads', async () => {
    const big = fx.index.big;
    const bigBytes = fx.read('big');
    const PART = 5 * MIB;
    const create = (body, options = {}) => call('POST', '/v1/uploads', {}, { body, ...options });
    assert.equal((await create({ digest: big.digest, size: big.size }, { token: null })).status, 401);
    assert.equal((await create({ digest: big.digest, size: big.size }, { token: 'wrong' })).status, 403);
    const badBody = await create({ digest: big.digest });
    assert.deepEqual([badBody.status, code(badBody)], [400, 'body_invalid']);
    const gzipped = await create({ digest: big.digest, size: big.size }, { headers: { 'content-encoding': 'gzip' } });
    assert.deepEqual([gzipped.status, code(gzipped)], [415, 'encoding_unsupported']);
    const tooBig = await create({ digest: big.digest, size: 17 * MIB });
    assert.deepEqual([tooBig.status, code(tooBig)], [413, 'limit_size']);
    const stored = await create({ digest: fx.index.small.digest, size: fx.index.small.size });
    assert.deepEqual([stored.status, stored.json.created], [200, false]);

    // A tampered packet: assembled, then refused (422).
    const bad = await create({ digest: big.digest, size: big.size, part_size: PART });
    assert.equal(bad.status, 201);
    assert.equal(bad.headers.get('location'), bad.json.location);
    const tampered = flip(bigBytes, big.members.find((m) => m.path === 'workspace/blob-b.bin').data_offset + 77);
    const id = bad.json.upload_id;
    const P = '/v1/uploads/{id}/parts/{number}';
    for (let n = 1; n <= bad.json.parts; n++) {
      const r = await call('PUT', P, { id, number: n }, { body: tampered.subarray((n - 1) * PART, n * PART) });
      assert.equal(r.status, 200);
      assert.deepEqual(r.json, { upload_id: id, number: n, size: Math.min(PART, big.size - (n - 1) * PART) });
    }
    const refused = await call('POST', '/v1/uploads/{id}/complete', { id });
    assert.deepEqual([refused.status, code(refused)], [422, 'member_digest_mismatch']);
    assert.equal((await call('GET', '/v1/uploads/{id}', { id })).status, 404, 'a refused upload is gone');

    // A good one, with every refusal on the way.
    const up = await create({ digest: big.digest, size: big.size, part_size: PART, labels: ['kind=big'] });
    assert.equal(up.status, 201);
    const uid = up.json.upload_id;
    assert.deepEqual(up.json.missing, [1, 2, 3]);
    assert.equal((await call('PUT', P, { id: uid, number: 1 }, { body: bigBytes.subarray(0, PART), token: null })).status, 401);
    assert.equal((await call('PUT', P, { id: uid, number: 1 }, { body: bigBytes.subarray(0, PART), token: 'wrong' })).status, 403);
    const wrongSize = await call('PUT', P, { id: uid, number: 1 }, { body: bigBytes.subarray(0, 10) });
    assert.deepEqual([wrongSize.status, code(wrongSize)], [400, 'part_size_mismatch']);
    assert.equal((await call('PUT', P, { id: uid, number: 0 }, { body: 'x' })).status, 400);
    assert.equal((await call('PUT', P, { id: UNKNOWN_UPLOAD, number: 1 }, { body: 'x' })).status, 404);
    const chunked = await call('PUT', P, { id: uid, number: 1 }, { body: bigBytes.subarray(0, 1024), chunked: true });
    assert.deepEqual([chunked.status, code(chunked)], [411, 'length_required']);
    assert.equal((await call('PUT', P, { id: uid, number: 2 }, { body: bigBytes.subarray(PART, 2 * PART) })).status, 200);
    const state = await call('GET', '/v1/uploads/{id}', { id: uid });
    assert.deepEqual([state.status, state.json.missing], [200, [1, 3]]);
    assert.equal((await call('GET', '/v1/uploads/{id}', { id: UNKNOWN_UPLOAD })).status, 404);
    const C = '/v1/uploads/{id}/complete';
    assert.equal((await call('POST', C, { id: uid }, { token: null })).status, 401);
    assert.equal((await call('POST', C, { id: uid }, { token: 'wrong' })).status, 403);
    const incomplete = await call('POST', C, { id: uid });
    assert.deepEqual([incomplete.status, code(incomplete)], [409, 'upload_incomplete']);
    for (const n of [1, 3]) {
      assert.equal((await call('PUT', P, { id: uid, number: n }, { body: bigBytes.subarray((n - 1) * PART, n * PART) })).status, 200);
    }
    const done = await call('POST', C, { id: uid });
    assert.equal(done.status, 201);
    assert.deepEqual([done.json.digest, done.json.created, done.json.labels], [big.digest, true, ['kind=big']]);
    assert.equal((await call('POST', C, { id: uid })).status, 404, 'a finished upload is gone');
    const got = await call('GET', '/v1/packets/{digest}', { digest: big.digest });
    assert.ok(got.bytes.equals(fx.read('big')));

    // Stored by someone else meanwhile: completing answers 200.
    const harness = fx.index.harness;
    const late = await create({ digest: harness.digest, size: harness.size });
    assert.equal(late.status, 201);
    assert.equal((await call('PUT', '/v1/packets/{digest}', { digest: harness.digest }, { body: fx.read('harness') })).status, 201);
    const meanwhile = await call('POST', C, { id: late.json.upload_id });
    assert.deepEqual([meanwhile.status, meanwhile.json.created], [200, false]);

    // Aborting.
    const D = '/v1/uploads/{id}';
    const gone = await create({ digest: UNKNOWN, size: 1000 });
    assert.equal(gone.status, 201);
    assert.equal((await call('DELETE', D, { id: gone.json.upload_id }, { token: null })).status, 401);
    assert.equal((await call('DELETE', D, { id: gone.json.upload_id }, { token: 'wrong' })).status, 403);
    assert.equal((await call('DELETE', D, { id: gone.json.upload_id })).status, 204);
    assert.equal((await call('DELETE', D, { id: gone.json.upload_id })).status, 404);

    const huge = await create({ digest: big.digest, size: 1, labels: ['x'.repeat(70 * 1024)] });
    assert.deepEqual([huge.status, code(huge)], [413, 'body_too_large']);
  });

  test('pushes of /2 packets, and the recipes and chunks of a packet', async () => {
    const base = fx.index.base;
    const bytes = fx.read('base');
    const all = cutsAndFrames(base, bytes);
    const manifestNames = new Set(all.recipes.manifest.map((c) => c.sha256.toString('hex')));
    const manifestFrames = all.frames.filter((f) => manifestNames.has(f.sha256.toString('hex')));
    const bodyFrames = all.frames.filter((f) => !manifestNames.has(f.sha256.toString('hex')));
    const kind = { 'content-type': 'application/x-pillbox-push' };
    const C = '/v1/pushes';
    const manifestOnly = pushBody({ manifest: all.recipes.manifest }, manifestFrames);
    const create = (query, body = manifestOnly, options = {}) => call('POST', C, {}, { body, headers: kind, query, ...options });
    const q = (digest, size = base.size, extra = '') => `?digest=${digest}&size=${size}${extra}`;
    assert.equal((await create(q(base.digest), manifestOnly, { token: null })).status, 401);
    assert.equal((await create(q(base.digest), manifestOnly, { token: 'wrong' })).status, 403);
    const badSize = await create(`?digest=${base.digest}&size=abc`);
    assert.deepEqual([badSize.status, code(badSize)], [400, 'size_invalid']);
    const tooBig = await create(q(base.digest, 17 * MIB));
    assert.deepEqual([tooBig.status, code(tooBig)], [413, 'limit_size']);
    const chunked = await create(q(base.digest), manifestOnly, { chunked: true });
    assert.deepEqual([chunked.status, code(chunked)], [411, 'length_required']);
    const br = await create(q(base.digest), manifestOnly, { headers: { ...kind, 'content-encoding': 'br' } });
    assert.deepEqual([br.status, code(br)], [415, 'encoding_unsupported']);
    const many = fx.index.many;
    const m = cutsAndFrames(many, fx.read('many'));
    const refused = await create(q(many.digest, many.size), pushBody({ manifest: m.recipes.manifest }, m.frames.slice(0, m.recipes.manifest.length)));
    assert.deepEqual([refused.status, code(refused)], [422, 'limit_members']);
    const lacking = await create(q(base.digest), pushBody({ manifest: all.recipes.manifest }, []));
    assert.deepEqual([lacking.status, code(lacking)], [409, 'manifest_incomplete']);
    assert.deepEqual(lacking.json.error.missing, [...manifestNames]);

    // A push of `base` with the manifest only, and a second one left open.
    const first = await create(q(base.digest, base.size, '&label=via=push'));
    assert.equal(first.status, 202, JSON.stringify(first.json));
    const second = await create(q(base.digest));
    assert.equal(second.status, 202);
    const P = '/v1/pushes/{id}';
    const id = first.json.push_id;
    for (const [method, t] of [['GET', P], ['DELETE', P]]) {
      assert.equal((await call(method, t, { id }, { token: null })).status, 401);
      assert.equal((await call(method, t, { id }, { token: 'wrong' })).status, 403);
      assert.equal((await call(method, t, { id: UNKNOWN_UPLOAD })).status, 404);
    }
    const R = '/v1/pushes/{id}/recipes';
    const doc = recipesDocument({ bodies: all.recipes.bodies });
    assert.equal((await call('POST', R, { id }, { body: doc, token: null })).status, 401);
    assert.equal((await call('POST', R, { id }, { body: doc, token: 'wrong' })).status, 403);
    assert.equal((await call('POST', R, { id: UNKNOWN_UPLOAD }, { body: doc })).status, 404);
    const shape = await call('POST', R, { id }, { body: Buffer.from('PBRECIPX') });
    assert.deepEqual([shape.status, code(shape)], [422, 'recipes_magic']);
    const gz = await call('POST', R, { id }, { body: doc, headers: { 'content-encoding': 'gzip' } });
    assert.deepEqual([gz.status, code(gz)], [415, 'encoding_unsupported']);
    const noLength = await call('POST', R, { id }, { body: doc, chunked: true });
    assert.deepEqual([noLength.status, code(noLength)], [411, 'length_required']);
    const huge = await call('POST', R, { id }, { body: Buffer.alloc(17 * MIB) });
    assert.deepEqual([huge.status, code(huge)], [413, 'body_too_large']);
    const readme = base.members.find((x) => x.path === 'workspace/README.md');
    const readmeName = Buffer.from(readme.sha256.slice(7), 'hex');
    const notNeeded = await call('POST', R, { id }, { body: recipesDocument({ bodies: [{ sha256: readmeName, size: readme.size, runs: [{ chunk: { sha256: readmeName, size: readme.size } }] }] }) });
    assert.deepEqual([notNeeded.status, code(notNeeded)], [422, 'recipe_not_needed']);
    const sent = await call('POST', R, { id }, { body: doc });
    assert.equal(sent.status, 200, JSON.stringify(sent.json));
    const log = all.recipes.bodies.find((r) => r.runs.length > 2);
    const pieces = [];
    for (let at = 0, k = 0; at < log.size; at += MIB, k++) pieces.push({ chunk: { sha256: sha(Buffer.from(`other ${k}`)), size: Math.min(MIB, log.size - at) } });
    const other = recipesDocument({ bodies: [{ ...log, runs: pieces }] });
    const conflict = await call('POST', R, { id }, { body: other });
    assert.deepEqual([conflict.status, code(conflict)], [409, 'recipe_conflict']);

    const N = '/v1/pushes/{id}/parts/{number}';
    const batch = chunkBatch(bodyFrames.slice(0, 1));
    const part = (number, body, options = {}) => call('PUT', N, { id, number }, { body, headers: { 'content-type': 'application/x-pillbox-chunks' }, ...options });
    assert.equal((await part(1, batch, { token: null })).status, 401);
    assert.equal((await part(1, batch, { token: 'wrong' })).status, 403);
    assert.equal((await call('PUT', N, { id: UNKNOWN_UPLOAD, number: 1 }, { body: batch })).status, 404);
    const zero = await part(0, batch);
    assert.deepEqual([zero.status, code(zero)], [400, 'part_number_invalid']);
    const partChunked = await part(1, batch, { chunked: true });
    assert.deepEqual([partChunked.status, code(partChunked)], [411, 'length_required']);
    const partOversize = await part(1, Buffer.alloc(5 * MIB));
    assert.deepEqual([partOversize.status, code(partOversize)], [413, 'part_too_large']);
    const badEncoding = await part(1, batch, { headers: { 'content-encoding': 'gzip' } });
    assert.deepEqual([badEncoding.status, code(badEncoding)], [415, 'encoding_unsupported']);
    const stranger = await part(1, chunkBatch([frameOf(Buffer.from('a chunk of nothing here'))]));
    assert.deepEqual([stranger.status, code(stranger)], [422, 'chunk_not_needed']);
    // Everything, in parts of at most 1 MiB (PUSH_PART_BYTES).
    const D = '/v1/pushes/{id}/complete';
    const done = (options = {}) => call('POST', D, { id }, options);
    assert.equal((await done({ token: null })).status, 401);
    assert.equal((await done({ token: 'wrong' })).status, 403);
    assert.equal((await call('POST', D, { id: UNKNOWN_UPLOAD })).status, 404);
    const incomplete = await done();
    assert.deepEqual([incomplete.status, code(incomplete)], [409, 'push_incomplete']);
    let number = 0;
    for (let i = 0; i < bodyFrames.length;) {
      const group = [];
      let size = 0;
      while (i < bodyFrames.length && size + bodyFrames[i].stored.length <= MIB) {
        size += bodyFrames[i].stored.length;
        group.push(bodyFrames[i++]);
      }
      const r = await part(++number, chunkBatch(group));
      assert.equal(r.status, 200, JSON.stringify(r.json));
      assert.equal(r.json.frames, group.length);
    }
    const state = await call('GET', P, { id });
    assert.deepEqual([state.status, state.json.missing, state.json.parts.length], [200, [], number]);
    const stored = await done();
    assert.equal(stored.status, 201, JSON.stringify(stored.json));
    assert.deepEqual([stored.json.created, stored.json.labels], [true, ['via=push']]);
    const late = await call('POST', D, { id: second.json.push_id });
    assert.deepEqual([late.status, late.json.created], [200, false]);
    const again = await create(q(base.digest));
    assert.deepEqual([again.status, again.json.created], [200, false]);
    assert.equal((await call('DELETE', P, { id: first.json.push_id })).status, 404, 'a completed push is gone');
    // Everything at hand in one request: the packet is stored at once.
    const out = join(mkdtempSync(join(tmpdir(), 'pillbox-e2e-openapi-')), 'fresh');
    pushBodyExample(['fresh', out, '77']);
    const fresh = JSON.parse(readFileSync(`${out}.json`, 'utf8'));
    const s = cutsAndFrames(fresh, readFileSync(`${out}.pkt`));
    const oneShot = await create(q(fresh.digest, fresh.size), pushBody(s.recipes, manifestFirst(s)));
    assert.equal(oneShot.status, 201, JSON.stringify(oneShot.json));
    // A wrong digest is refused at create, without the digest computed.
    const wrong = await create(q(sha256(Buffer.from('not base')), base.size, `&base=${base.digest}`));
    assert.deepEqual([wrong.status, code(wrong)], [422, 'packet_digest_mismatch']);
    // A body whose chunks come in the wrong order is refused at complete.
    const edited = fx.index.edited;
    const e = cutsAndFrames(edited, fx.read('edited'));
    const eNames = new Set(e.recipes.manifest.map((c) => c.sha256.toString('hex')));
    const lie = e.recipes.bodies.find((r) => r.runs.length > 2);
    [lie.runs[0], lie.runs[1]] = [lie.runs[1], lie.runs[0]];
    const open = await create(q(edited.digest, edited.size), pushBody({ manifest: e.recipes.manifest, bodies: e.recipes.bodies }, e.frames.filter((f) => eNames.has(f.sha256.toString('hex')))));
    assert.equal(open.status, 202, JSON.stringify(open.json));
    const rest = e.frames.filter((f) => !eNames.has(f.sha256.toString('hex')));
    for (let i = 0, n = 1; i < rest.length; n++) {
      const group = [];
      let size = 0;
      while (i < rest.length && size + rest[i].stored.length <= MIB) { size += rest[i].stored.length; group.push(rest[i++]); }
      assert.equal((await call('PUT', N, { id: open.json.push_id, number: n }, { body: chunkBatch(group) })).status, 200);
    }
    const mismatch = await call('POST', D, { id: open.json.push_id });
    assert.deepEqual([mismatch.status, code(mismatch)], [422, 'member_digest_mismatch']);
    const aborted = await create(q(sha256(Buffer.from('aborted')), base.size));
    assert.equal(aborted.status, 422);
    const toAbort = await create(q(edited.digest, edited.size), pushBody({ manifest: e.recipes.manifest }, e.frames.filter((f) => eNames.has(f.sha256.toString('hex')))));
    assert.equal((await call('DELETE', P, { id: toAbort.json.push_id })).status, 204);

    // What a pull reads.
    const G = '/v1/packets/{digest}/recipes';
    const got = await call('GET', G, { digest: base.digest });
    assert.equal(got.status, 200);
    const read = readRecipes(got.bytes);
    assert.deepEqual(read.manifest.map((c) => c.hex), [...manifestNames]);
    assert.equal(read.bodies.length, all.recipes.bodies.length);
    assert.equal((await call('GET', G, { digest: UNKNOWN })).status, 404);
    assert.equal((await call('GET', G, { digest: 'sha256:nope' })).status, 400);
    const K = '/v1/packets/{digest}/chunks';
    const names = read.bodies[0].runs.slice(0, 3).map((r) => r.chunk.hex);
    const asked = await call('POST', K, { digest: base.digest }, { body: { chunks: names } });
    assert.equal(asked.status, 200);
    assert.deepEqual(readBatch(asked.bytes).map((f) => f.hex), names);
    const unknownChunk = await call('POST', K, { digest: base.digest }, { body: { chunks: ['0'.repeat(64)] } });
    assert.deepEqual([unknownChunk.status, code(unknownChunk)], [400, 'chunk_unknown']);
    assert.equal((await call('POST', K, { digest: UNKNOWN }, { body: { chunks: [] } })).status, 404);
    const tooMany = await call('POST', K, { digest: base.digest }, { body: { chunks: Array(65_537).fill(names[0]) } });
    assert.deepEqual([tooMany.status, code(tooMany)], [413, 'chunks_too_many']);
    const tooLong = await call('POST', K, { digest: base.digest }, { body: Buffer.alloc(6 * MIB), headers: { 'content-type': 'application/json' } });
    assert.deepEqual([tooLong.status, code(tooLong)], [413, 'body_too_large']);
    const unsized = await call('POST', K, { digest: base.digest }, { body: { chunks: [] }, chunked: true });
    assert.deepEqual([unsized.status, code(unsized)], [411, 'length_required']);
    const gzipped = await call('POST', K, { digest: base.digest }, { body: { chunks: [] }, headers: { 'content-encoding': 'gzip' } });
    assert.deepEqual([gzipped.status, code(gzipped)], [415, 'encoding_unsupported']);
  });

  test('reads need the token when READ_ACCESS=token (401 without, 403 with a wrong one)', async () => {
    const digest = fx.index.small.digest;
    const reads = [
      ['GET', '/v1/packets', {}],
      ['GET', '/v1/packets/{digest}', { digest }],
      ['HEAD', '/v1/packets/{digest}', { digest }],
      ['GET', '/v1/packets/{digest}/manifest', { digest }],
      ['GET', '/v1/packets/{digest}/members/{path}', { digest, path: 'workspace/README.md' }],
      ['HEAD', '/v1/packets/{digest}/members/{path}', { digest, path: 'workspace/README.md' }],
      ['GET', '/v1/uploads/{id}', { id: UNKNOWN_UPLOAD }],
      ['GET', '/v1/refs', {}],
      ['GET', '/v1/refs/{name}', { name: 'sessions/x' }],
      ['GET', '/v1/ref-history/{name}', { name: 'sessions/x' }],
      ['GET', '/v1/digests/{prefix}', { prefix: digest.slice(0, 15) }],
      ['GET', '/v1/search', {}],
      ['GET', '/v1/packets/{digest}/recipes', { digest }],
      ['POST', '/v1/packets/{digest}/chunks', { digest }],
    ];
    for (const [method, template, params] of reads) {
      const anonymous = await callTokenEdge(method, template, params, { token: null });
      assert.equal(anonymous.status, 401, `${method} ${template}`);
      const wrong = await callTokenEdge(method, template, params, { token: 'wrong' });
      assert.equal(wrong.status, 403, `${method} ${template}`);
      const right = await callTokenEdge(method, template, params);
      assert.ok(![401, 403].includes(right.status), `${method} ${template} with the token: ${right.status}`);
    }
  });
});

// ---- every property of the document is one the Worker sends ----------------
//
// Each JSON answer is also walked along the document's own schema ($refs
// followed by hand), so that each property is named by the component that
// declares it (`Problem.current`, `Harness.model`, `Info.part_size.min`) or,
// in an inline schema, by its operation (`GET /v1/packets → 200.next_cursor`).
// The last test checks that every property the document declares for an
// answer was sent with a value, and also as null where the document allows
// null, and that no answer carried a key the document does not name (even
// where the schema leaves additionalProperties open). A property the
// document gains that the Worker never sends, or a null it promises that the
// Worker never sends, fails it. On the Rust side, wire/tests/openapi.rs ties
// the wire types to the same document.

/** "Owner.property" → the JSON types the Worker sent there. */
const sentTypes = new Map();
/** Keys of live answers that the document does not declare. */
const undeclared = new Set();

const jsonType = (v) => (v === null ? 'null' : Array.isArray(v) ? 'array' : Number.isInteger(v) ? 'integer' : typeof v);
const refName = (ref) => ref.split('/').pop();

/** The schemas that describe one value: $refs followed (and named), allOf parts flattened. */
function expand(parts, depth = 0) {
  assert.ok(depth < 64, '$ref chain too deep (a cycle?)');
  const out = [];
  for (const { schema, owner } of parts) {
    if (typeof schema.$ref === 'string') {
      out.push(...expand([{ schema: pointer(schema.$ref), owner: refName(schema.$ref) }], depth + 1));
    } else {
      out.push({ schema, owner });
      for (const part of schema.allOf ?? []) out.push(...expand([{ schema: part, owner }], depth + 1));
    }
  }
  return out;
}

/** property name → the schemas (with their owners) that declare it, over all parts. */
function declaredProperties(parts) {
  const props = new Map();
  for (const { schema, owner } of parts) {
    for (const [name, sub] of Object.entries(schema.properties ?? {})) {
      // `false`: a response that narrows a schema says the property is never there.
      if (sub === false) continue;
      if (!props.has(name)) props.set(name, []);
      props.get(name).push({ schema: sub, owner: `${owner}.${name}` });
    }
  }
  return props;
}

function itemParts(parts) {
  return parts.filter((p) => p.schema.items).map((p) => ({ schema: p.schema.items, owner: `${p.owner}[]` }));
}

function walk(value, parts) {
  parts = expand(parts);
  if (Array.isArray(value)) {
    const items = itemParts(parts);
    if (items.length) for (const v of value) walk(v, items);
    return;
  }
  if (!value || typeof value !== 'object') return;
  const props = declaredProperties(parts);
  if (props.size === 0) return; // a free-form object (the manifest)
  for (const [name, v] of Object.entries(value)) {
    if (!props.has(name)) {
      undeclared.add(`${parts[0].owner}.${name}`);
      continue;
    }
    for (const { owner } of props.get(name)) {
      if (!sentTypes.has(owner)) sentTypes.set(owner, new Set());
      sentTypes.get(owner).add(jsonType(v));
    }
    walk(v, props.get(name));
  }
}

/** The raw answer schema of an operation's status, with its owner's name. */
function answerSchema(method, template, status) {
  let response = spec.paths[template][method.toLowerCase()].responses[status];
  let owner = `${method} ${template} → ${status}`;
  if (response.$ref) {
    owner = refName(response.$ref);
    response = pointer(response.$ref);
  }
  const schema = response.content?.['application/json']?.schema;
  return schema && { schema, owner };
}

function walkAnswer(method, template, status, json) {
  const root = answerSchema(method, template, status);
  if (root) walk(json, [root]);
}

function allowsNull(schema) {
  const s = schema.$ref ? pointer(schema.$ref) : schema;
  const types = [s.type ?? []].flat();
  return types.includes('null') || (s.oneOf ?? []).some(allowsNull) || (s.anyOf ?? []).some(allowsNull);
}

/** Every property an answer of the document may carry: "Owner.property" → whether it may be null. */
function documentedProperties() {
  const out = new Map();
  const declare = (parts, depth = 0) => {
    assert.ok(depth < 64, 'schema too deep (a cycle?)');
    parts = expand(parts);
    for (const [, subs] of declaredProperties(parts)) {
      for (const sub of subs) out.set(sub.owner, (out.get(sub.owner) ?? false) || allowsNull(sub.schema));
      declare(subs, depth + 1);
    }
    const items = itemParts(parts);
    if (items.length) declare(items, depth + 1);
  };
  for (const [template, item] of Object.entries(spec.paths)) {
    for (const method of METHODS.filter((m) => item[m])) {
      for (const status of Object.keys(item[method].responses)) {
        const root = answerSchema(method.toUpperCase(), template, status);
        if (root) declare([root]);
      }
    }
  }
  return out;
}

/** Nulls the document allows that no live answer here can show, and why. */
const NULLS_NOT_EXERCISED = {
  'Harness.model': 'every fixture packet with a harness names its model (wire/tests/openapi.rs sends the null)',
  'ListedRef.size': 'a ref naming a packet that is not stored needs a delete racing a move (wire/tests/openapi.rs sends the null)',
  'RefMove.by': 'only refs made before migration 0004 have moves by no token (migration.test.mjs reads one)',
};

describe('answers that carry what the calls above do not', () => {
  test('a next page, a search match without a sha256, a conflict on a ref that does not exist', async () => {
    const small = fx.index.small.digest;
    const packets = await call('GET', '/v1/packets', {}, { query: '?limit=1' });
    assert.equal(packets.status, 200);
    assert.equal(typeof packets.json.next_cursor, 'string', 'more than one packet is stored: a next page');
    for (const name of ['sessions/paging/a', 'sessions/paging/b']) {
      assert.equal((await call('PUT', '/v1/refs/{name}', { name }, { body: { digest: small } })).status, 201);
    }
    const refs = await call('GET', '/v1/refs', {}, { query: '?prefix=sessions/paging/&limit=1' });
    assert.deepEqual([refs.json.refs.map((r) => r.name), refs.json.next_cursor], [['sessions/paging/a'], 'sessions/paging/a']);
    const absent = await call('PUT', '/v1/refs/{name}', { name: 'sessions/paging/none' },
      { body: { digest: small }, headers: { 'if-match': `"${small}"` } });
    assert.deepEqual([absent.status, code(absent), absent.json.error.current], [409, 'ref_conflict', null]);
    // A folder every fixture packet has: two matches, no sha256.
    const dirs = await call('GET', '/v1/search', {}, { query: '?path=workspace&limit=1' });
    assert.equal(dirs.status, 200);
    assert.deepEqual([dirs.json.matches[0].type, dirs.json.matches[0].sha256], ['dir', null]);
    assert.equal(typeof dirs.json.next_cursor, 'string');
  });
});

describe('coverage', () => {
  test('a method a path does not list is 405 with Allow naming the documented methods; OPTIONS is a preflight', async () => {
    const params = {
      digest: fx.index.small.digest, path: 'workspace/README.md', id: UNKNOWN_UPLOAD, number: 1, name: 'sessions/x',
      prefix: 'sha256:00000000',
    };
    // The body the document's description promises: {"error": Problem}.
    const problem = deref({ $ref: '#/components/schemas/ErrorBody' });
    for (const [template, item] of Object.entries(spec.paths)) {
      const documented = METHODS.filter((m) => item[m] && m !== 'options').map((m) => m.toUpperCase());
      for (const method of ['GET', 'HEAD', 'PUT', 'POST', 'DELETE', 'PATCH'].filter((m) => !documented.includes(m))) {
        const res = await send(edge.url, method, fill(template, params), { token: null });
        const where = `${method} ${template}`;
        assert.equal(res.status, 405, where);
        const allow = res.headers.get('allow').split(',').map((s) => s.trim()).sort();
        assert.deepEqual(allow, [...documented].sort(), `${where}: Allow`);
        assert.equal((res.headers.get('content-type') ?? '').split(';')[0], 'application/json', where);
        if (method !== 'HEAD') {
          const body = JSON.parse(res.bytes);
          validate(problem, body, `${where}: body`);
          assert.equal(body.error.code, 'method_not_allowed', where);
        }
      }
      // The CORS preflight the document's description promises on every path.
      const preflight = await send(edge.url, 'OPTIONS', fill(template, params), { token: null, headers: { origin: 'http://inspector.test' } });
      assert.equal(preflight.status, 204, `OPTIONS ${template}`);
      assert.equal(preflight.bytes.length, 0);
      const allowed = preflight.headers.get('access-control-allow-methods').split(',').map((s) => s.trim());
      for (const m of documented) assert.ok(allowed.includes(m), `OPTIONS ${template}: ${m} not in ${allowed}`);
    }
  });

  test('every operation of the document answered every status it declares', (t) => {
    const missing = [];
    for (const [key, op] of operations) {
      const statuses = seen.get(key) ?? new Set();
      t.diagnostic(`${key}: ${[...statuses].sort().join(' ')}`);
      for (const status of Object.keys(op.responses)) {
        if (!statuses.has(status)) missing.push(`${key} → ${status}`);
      }
    }
    assert.deepEqual(missing, [], 'declared statuses never exercised');
  });
});

describe('the document and the Worker name the same fields', () => {
  test('every property an answer may carry was sent, with a value and, where the document allows it, as null; no other key was', () => {
    const problems = [];
    const documented = documentedProperties();
    assert.ok(documented.size >= 40, `the document declares only ${documented.size} answer properties: did the walk stop following it?`);
    for (const [property, nullable] of documented) {
      const types = sentTypes.get(property) ?? new Set();
      if (![...types].some((t) => t !== 'null')) problems.push(`${property}: never sent with a value`);
      if (nullable && !types.has('null') && !(property in NULLS_NOT_EXERCISED)) problems.push(`${property}: never sent as null`);
    }
    assert.deepEqual(problems, [], 'documented properties the Worker did not send');
    assert.deepEqual([...undeclared], [], 'keys the Worker sent that the document does not declare');
    assert.ok(sentTypes.size >= 40, `only ${sentTypes.size} properties were seen: did the walk stop following the document?`);
  });
});
