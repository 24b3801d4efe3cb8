// Delta pushes and the reads of chunked packets (docs/transfer.md), on the
// real Worker: a first push stores a packet as chunks in packs and every
// read answers exactly what the packet file holds; a second push after one
// more turn sends only what changed; gzip and zstd parts; every refusal
// leaves nothing visible and its packs are collected by the scheduled
// clean-up; concurrent pushes of overlapping content both succeed.
//
// Run: node --test --test-concurrency=1 tests/e2e/transfer.test.mjs
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { after, before, describe, test } from 'node:test';

import { buildWorker, client, fixtures, sha256, startEdge } from './edge.mjs';
import { bodiesOf, chunkBatch, cutBody, encoded, hexOf, manifestOf, push, readBatch } from './transfer.mjs';

// 0.001 h = 3.6 s: what a test leaves for the clean-up is old enough after a pause.
const TTL_MS = 0.001 * 3_600_000;

let edge;
let api;
let fx;

before(async () => {
  buildWorker();
  fx = fixtures();
  edge = await startEdge({ UPLOAD_TTL_HOURS: '0.001' }, { testScheduled: true });
  api = client(edge.url);
}, { timeout: 600_000 });

after(async () => {
  await edge?.stop();
});

const code = (r) => r.json?.error?.code;
const packetPath = (d) => `/v1/packets/${d}`;
const sleep = (ms) => new Promise((ok) => setTimeout(ok, ms));

async function runCleanUp() {
  await sleep(TTL_MS + 1000);
  const r = await fetch(`${edge.url}/__scheduled?cron=${encodeURIComponent('17 * * * *')}`);
  assert.equal(r.status, 200, await r.text());
}

const storage = (digest) => edge.d1(`SELECT storage, layout_key, manifest_key FROM packets WHERE digest = '${digest}'`)[0];

/** Every read of a stored packet answers what the packet file holds. */
async function assertReadsAsFile(entry, bytes) {
  const path = packetPath(entry.digest);
  const whole = await api.call('GET', path);
  assert.equal(whole.status, 200);
  assert.equal(whole.headers.get('content-length'), String(entry.size));
  assert.equal(whole.headers.get('etag'), `"${entry.digest}"`);
  assert.ok(whole.bytes.equals(bytes), 'GET answers the packet byte for byte');
  const head = await api.call('HEAD', path);
  assert.deepEqual([head.status, head.headers.get('content-length'), head.bytes.length], [200, String(entry.size), 0]);
  assert.equal((await api.call('GET', path, { headers: { 'if-none-match': `"${entry.digest}"` } })).status, 304);
  // Ranges across headers, padding, bodies and chunk boundaries.
  const session = entry.members.find((m) => m.path === 'workspace/logs/session.jsonl');
  const starts = [0, 511, 512, entry.manifest_offset + 3, session.header_offset - 7, session.data_offset + 262_140, entry.size - 1030, entry.size - 1];
  for (const start of starts) {
    for (const len of [1, 700, 300_000]) {
      const end = Math.min(start + len, entry.size) - 1;
      const r = await api.call('GET', path, { headers: { range: `bytes=${start}-${end}` } });
      assert.equal(r.status, 206, `${start}-${end}`);
      assert.equal(r.headers.get('content-range'), `bytes ${start}-${end}/${entry.size}`);
      assert.ok(r.bytes.equals(bytes.subarray(start, end + 1)), `bytes ${start}-${end}`);
    }
  }
  const suffix = await api.call('GET', path, { headers: { range: 'bytes=-5000' } });
  assert.ok(suffix.bytes.equals(bytes.subarray(entry.size - 5000)));
  assert.equal((await api.call('GET', path, { headers: { range: `bytes=${entry.size}-` } })).status, 416);
  const manifest = await api.call('GET', `${path}/manifest`);
  assert.ok(manifest.bytes.equals(manifestOf(entry, bytes)));
  for (const b of bodiesOf(entry, bytes)) {
    const member = `${path}/members/${b.path}`;
    const r = await api.call('GET', member);
    assert.equal(r.status, 200, b.path);
    assert.ok(r.bytes.equals(b.body), b.path);
    assert.equal(r.headers.get('pillbox-member-sha256'), `sha256:${b.hex}`);
    const from = Math.floor(b.size / 3);
    const part = await api.call('GET', member, { headers: { range: `bytes=${from}-${b.size - 1}` } });
    assert.equal(part.status, 206);
    assert.ok(part.bytes.equals(b.body.subarray(from)), `${b.path} from ${from}`);
  }
  const dir = await api.call('GET', `${path}/members/workspace/src`);
  assert.deepEqual([dir.status, code(dir)], [404, 'not_a_file']);
}

describe('a first push, then one after another turn', () => {
  test('the first push sends every body and stores a chunked packet that reads back as the file', { timeout: 180_000 }, async () => {
    const base = fx.index.base;
    const bytes = fx.read('base');
    const r = await push(api, base, bytes, { labels: ['turn=1'], complete: false });
    assert.equal(r.create.status, 201, JSON.stringify(r.create.json));
    assert.equal(r.create.headers.get('location'), r.create.json.location);
    const unique = new Set(bodiesOf(base, bytes).map((b) => b.hex));
    assert.deepEqual(new Set(r.create.json.missing), unique, 'every body once (two files share one)');
    assert.equal(r.create.json.missing.length, unique.size);
    assert.deepEqual(r.create.json.bases_used, []);
    assert.equal(r.create.json.chunking.algorithm, 'fastcdc-v2020');
    assert.equal(r.recipes.status, 200);
    for (const p of r.parts) assert.equal(p.status, 200, JSON.stringify(p.json));
    const state = await api.call('GET', r.location);
    assert.equal(state.status, 200);
    assert.deepEqual([state.json.missing, state.json.missing_chunks, state.json.missing_bytes], [[], [], 0]);
    assert.equal(state.json.parts.length, r.parts.length);
    const done = await api.call('POST', `${r.location}/complete`);
    assert.equal(done.status, 201, JSON.stringify(done.json));
    assert.deepEqual([done.json.digest, done.json.created, done.json.labels], [base.digest, true, ['turn=1']]);
    assert.equal(done.headers.get('location'), packetPath(base.digest));
    assert.equal(storage(base.digest).storage, 'chunked');
    assert.equal((await api.call('GET', r.location)).status, 404, 'a completed push is gone');
    await assertReadsAsFile(base, bytes);
    // A second push of the same packet: stored already.
    const again = await api.call('POST', `/v1/pushes?digest=${base.digest}&size=${base.size}&label=turn=one`, encoded(manifestOf(base, bytes)));
    assert.deepEqual([again.status, again.json.created, again.json.labels], [200, false, ['turn=1', 'turn=one']]);
  });

  test('a push after one more turn, based on the first, sends only what changed (gzip)', { timeout: 180_000 }, async () => {
    const [base, edited] = [fx.index.base, fx.index.edited];
    const bytes = fx.read('edited');
    const r = await push(api, edited, bytes, { bases: [base.digest, `sha256:${'0'.repeat(64)}`], encoding: 'gzip' });
    assert.equal(r.create.status, 201, JSON.stringify(r.create.json));
    assert.deepEqual(r.create.json.bases_used, [base.digest], 'a base that is not stored is ignored');
    const changed = bodiesOf(edited, bytes).filter((b) => !bodiesOf(base, fx.read('base')).some((o) => o.hex === b.hex));
    assert.deepEqual(r.create.json.missing, changed.map((b) => b.hex), 'the grown log and the edited file');
    // The log grew at its end: only its last chunks are missing.
    const log = changed.find((b) => b.path === 'workspace/logs/session.jsonl');
    const cut = cutBody(log.body);
    assert.ok(r.recipes.json.missing_chunks.length <= 2, JSON.stringify(r.recipes.json));
    assert.deepEqual(r.recipes.json.missing_chunks, cut.recipe.chunks.slice(-r.recipes.json.missing_chunks.length).map((c) => c.sha256));
    assert.equal(r.complete.status, 201, JSON.stringify(r.complete.json));
    assert.ok(r.sent < edited.size / 50, `sent ${r.sent} bytes for a packet of ${edited.size}`);
    await assertReadsAsFile(edited, bytes);
    const recipes = await api.call('GET', `${packetPath(edited.digest)}/recipes`);
    assert.equal(recipes.status, 200);
    assert.deepEqual(recipes.json.recipes.map((x) => x.sha256).sort(), bodiesOf(edited, bytes).filter((b) => b.size > 262_144).map((b) => b.hex).sort());
    assert.deepEqual(recipes.json.recipes.find((x) => x.sha256 === log.hex), cut.recipe);
  });

  test('a pull gets any chunk of a packet as a chunk batch, in the order asked', async () => {
    const edited = fx.index.edited;
    const bytes = fx.read('edited');
    const small = bodiesOf(edited, bytes).filter((b) => b.size <= 1 << 20);
    const log = cutBody(bodiesOf(edited, bytes).find((b) => b.path === 'workspace/logs/session.jsonl').body);
    const asked = [log.chunks[3], small[0].body, log.chunks[0], log.chunks[1], small[small.length - 1].body];
    const r = await api.call('POST', `${packetPath(edited.digest)}/chunks`, { body: { chunks: asked.map(hexOf) } });
    assert.equal(r.status, 200);
    assert.equal(r.headers.get('content-type'), 'application/x-pillbox-chunks');
    const got = readBatch(r.bytes);
    assert.deepEqual(got.map((f) => f.hex), asked.map(hexOf));
    got.forEach((f, i) => assert.ok(f.bytes.equals(asked[i])));
    const unknown = await api.call('POST', `${packetPath(edited.digest)}/chunks`, { body: { chunks: [hexOf(Buffer.from('not in it'))] } });
    assert.deepEqual([unknown.status, code(unknown)], [400, 'chunk_unknown']);
  });

  test('search finds members of chunked and whole packets by scanning manifests', async () => {
    const small = fx.index.small;
    assert.equal((await api.call('PUT', packetPath(small.digest), { body: fx.read('small') })).status, 201);
    const lib = await api.call('GET', '/v1/search?path=workspace/src/lib.rs');
    assert.deepEqual(lib.json.matches.map((m) => m.digest).sort(), [fx.index.base.digest, fx.index.edited.digest].sort());
    const copy = fx.index.base.members.find((m) => m.path === 'workspace/copy-a.txt');
    const bySha = await api.call('GET', `/v1/search?sha256=${copy.sha256}&limit=1`);
    assert.equal(bySha.json.matches.length, 1);
    const seen = [...bySha.json.matches];
    let cursor = bySha.json.next_cursor;
    while (cursor) {
      const page = await api.call('GET', `/v1/search?sha256=${copy.sha256}&limit=1&cursor=${encodeURIComponent(cursor)}`);
      assert.equal(page.status, 200);
      seen.push(...page.json.matches);
      cursor = page.json.next_cursor;
    }
    assert.deepEqual(seen.map((m) => `${m.digest} ${m.path}`), [
      `${fx.index.base.digest} workspace/copy-a.txt`, `${fx.index.base.digest} workspace/copy-b.txt`,
      `${fx.index.edited.digest} workspace/copy-a.txt`, `${fx.index.edited.digest} workspace/copy-b.txt`,
    ]);
    const readme = await api.call('GET', '/v1/search?path=workspace/README.md');
    assert.ok(readme.json.matches.some((m) => m.digest === small.digest), 'a whole packet too');
    assert.equal(code(await api.call('GET', '/v1/search?path=x&cursor=17')), 'cursor_invalid');
  });
});

describe('encodings', () => {
  test('a zstd manifest and zstd parts', { timeout: 120_000 }, async () => {
    const big = fx.index.big;
    const r = await push(api, big, fx.read('big'), { encoding: 'zstd', partBytes: 3 << 20 });
    assert.equal(r.create.status, 201, JSON.stringify(r.create.json));
    assert.ok(r.parts.length >= 4);
    for (const p of r.parts) assert.equal(p.status, 200, JSON.stringify(p.json));
    assert.equal(r.complete.status, 201, JSON.stringify(r.complete.json));
    const got = await api.call('GET', packetPath(big.digest));
    assert.equal(sha256(got.bytes), big.digest);
  });

  test('a zstd part with a window over the limit, or bytes that are not what they say, is refused', async () => {
    const entry = fx.index.harness;
    const bytes = fx.read('harness');
    const create = await api.call('POST', `/v1/pushes?digest=${entry.digest}&size=${entry.size}`, encoded(manifestOf(entry, bytes)));
    assert.equal(create.status, 201);
    const body = bodiesOf(entry, bytes)[0];
    const batch = chunkBatch([body.body]);
    const put = (part) => api.call('PUT', `${create.json.location}/parts/1`, part);
    const long = spawnSync('zstd', ['--long=27', '-3', '-c', '-q'], { input: batch });
    assert.equal(long.status, 0, String(long.stderr));
    const windowed = await put({ body: long.stdout, headers: { 'content-encoding': 'zstd' } });
    assert.deepEqual([windowed.status, code(windowed)], [422, 'zstd_window_too_large']);
    const gz = encoded(batch, 'gzip', 'application/x-pillbox-chunks');
    const lying = await put({ body: Buffer.from('not gzip at all'), headers: gz.headers });
    assert.deepEqual([lying.status, code(lying)], [422, 'encoding_invalid']);
    const br = await put({ body: batch, headers: { 'content-encoding': 'br' } });
    assert.deepEqual([br.status, code(br)], [415, 'encoding_unsupported']);
    assert.equal((await put(gz)).status, 200);
  });
});

describe('refusals leave nothing visible', () => {
  test('a manifest packet-core refuses, a size that does not match, a malformed part', async () => {
    const small = fx.index.small;
    const bytes = fx.read('small');
    const manifest = Buffer.from(manifestOf(small, bytes));
    const bad = Buffer.from(manifest.toString('utf8').replace('"workspace/README.md"', '"workspace/../README.md"'));
    const refused = await api.call('POST', `/v1/pushes?digest=${sha256(Buffer.from('x'))}&size=${small.size}`, encoded(bad));
    assert.equal(refused.status, 422, JSON.stringify(refused.json));
    assert.equal(code(refused), 'path_not_canonical');
    const size = await api.call('POST', `/v1/pushes?digest=${sha256(Buffer.from('x'))}&size=${small.size + 512}`, encoded(manifest));
    assert.deepEqual([size.status, code(size)], [400, 'size_mismatch']);
    assert.deepEqual(edge.d1(`SELECT count(*) AS n FROM pushes WHERE digest = '${sha256(Buffer.from('x'))}'`), [{ n: 0 }], 'no push was opened');
  });

  test('parts with a wrong frame, a chunk the push does not need or a bad batch are not recorded; the push stays open', async () => {
    const entry = fx.index.many;
    const bytes = fx.read('many');
    const digest = sha256(Buffer.concat([bytes, Buffer.from('another')]));
    // The manifest of `many` under another digest: its push cannot complete.
    const create = await api.call('POST', `/v1/pushes?digest=${digest}&size=${entry.size}`, encoded(manifestOf(entry, bytes)));
    assert.equal(create.status, 201);
    const loc = create.json.location;
    const bodies = bodiesOf(entry, bytes);
    const put = (n, batch) => api.call('PUT', `${loc}/parts/${n}`, { body: batch, headers: { 'content-type': 'application/x-pillbox-chunks' } });
    const wrong = await put(1, chunkBatch([Buffer.from('other bytes')], [bodies[0].hex]));
    assert.deepEqual([wrong.status, code(wrong)], [422, 'chunk_size_mismatch']);
    const flipped = Buffer.from(bodies[0].body);
    flipped[0] ^= 1;
    const mismatch = await put(1, chunkBatch([flipped], [bodies[0].hex]));
    assert.deepEqual([mismatch.status, code(mismatch)], [422, 'chunk_digest_mismatch']);
    const stranger = await put(1, chunkBatch([Buffer.from('not in this packet')]));
    assert.deepEqual([stranger.status, code(stranger)], [422, 'chunk_not_needed']);
    const twice = await put(1, chunkBatch([bodies[0].body, bodies[0].body]));
    assert.deepEqual([twice.status, code(twice)], [422, 'chunk_not_needed']);
    const cut = chunkBatch([bodies[0].body, bodies[1].body]);
    const truncated = await put(1, cut.subarray(0, cut.length - 1));
    assert.deepEqual([truncated.status, code(truncated)], [422, 'chunk_batch_truncated']);
    const trailing = await put(1, Buffer.concat([cut, Buffer.from('!')]));
    assert.deepEqual([trailing.status, code(trailing)], [422, 'chunk_batch_trailing']);
    const magic = await put(1, Buffer.from('PBCHUNK9\0\0\0\0'));
    assert.deepEqual([magic.status, code(magic)], [422, 'chunk_batch_magic']);
    const state = await api.call('GET', loc);
    assert.deepEqual([state.json.parts, state.json.missing.length], [[], new Set(bodies.map((b) => b.hex)).size]);
    // Every body now, in two parts; complete finds the digest wrong.
    const half = Math.ceil(bodies.length / 2);
    assert.equal((await put(1, chunkBatch(bodies.slice(0, half).map((b) => b.body)))).status, 200);
    const early = await api.call('POST', `${loc}/complete`);
    assert.deepEqual([early.status, code(early)], [409, 'push_incomplete']);
    assert.deepEqual(early.json.error.missing.sort(), bodies.slice(half).map((b) => b.hex).sort());
    assert.equal((await put(2, chunkBatch(bodies.slice(half).map((b) => b.body)))).status, 200);
    const done = await api.call('POST', `${loc}/complete`);
    assert.deepEqual([done.status, code(done)], [422, 'packet_digest_mismatch']);
    assert.equal((await api.call('GET', loc)).status, 404, 'a refused push is discarded');
    assert.equal((await api.call('GET', packetPath(digest))).status, 404);
    assert.deepEqual(edge.d1(`SELECT count(*) AS n FROM packets WHERE digest = '${digest}'`), [{ n: 0 }]);
  });

  test('chunks that do not make their body are member_digest_mismatch at complete', async () => {
    const entry = fx.index.big;
    const bytes = fx.read('big');
    const digest = sha256(Buffer.concat([bytes, Buffer.from('yet another')]));
    const create = await api.call('POST', `/v1/pushes?digest=${digest}&size=${entry.size}`, encoded(manifestOf(entry, bytes)));
    assert.equal(create.status, 201);
    const loc = create.json.location;
    const blob = bodiesOf(entry, bytes).find((b) => b.path === 'workspace/blob-a.bin');
    // Every chunk is right, in the wrong order: sizes add up, the body does not.
    const { chunks, recipe } = cutBody(blob.body, 1 << 20);
    [recipe.chunks[0], recipe.chunks[1]] = [recipe.chunks[1], recipe.chunks[0]];
    const rs = await api.call('POST', `${loc}/recipes`, { body: { recipes: [recipe] } });
    assert.equal(rs.status, 200, JSON.stringify(rs.json));
    const conflict = await api.call('POST', `${loc}/recipes`, { body: { recipes: [cutBody(blob.body, 1 << 20).recipe] } });
    assert.deepEqual([conflict.status, code(conflict)], [409, 'recipe_conflict']);
    assert.equal((await api.call('PUT', `${loc}/parts/1`, { body: chunkBatch(chunks) })).status, 200);
    const others = bodiesOf(entry, bytes).filter((b) => b.path !== blob.path);
    const rest = others.filter((b) => b.size <= 262_144);
    for (const b of others.filter((x) => x.size > 262_144)) {
      const c = cutBody(b.body, 1 << 20);
      const more = await api.call('POST', `${loc}/recipes`, { body: { recipes: [c.recipe] } });
      assert.equal(more.status, 200, JSON.stringify(more.json));
      rest.push(...c.chunks.map((x) => ({ body: x })));
    }
    assert.equal((await api.call('PUT', `${loc}/parts/2`, { body: chunkBatch(rest.map((b) => b.body)) })).status, 200);
    const done = await api.call('POST', `${loc}/complete`);
    assert.deepEqual([done.status, code(done), done.json.error.path], [422, 'member_digest_mismatch', 'workspace/blob-a.bin']);
    assert.equal((await api.call('GET', packetPath(digest))).status, 404);
  });

  test('an aborted push and the refused ones lose their packs to the clean-up; stored packets keep theirs', { timeout: 120_000 }, async () => {
    const entry = fx.index.harness;
    const bytes = fx.read('harness');
    const r = await push(api, entry, bytes, { complete: false });
    assert.equal(r.create.status, 201);
    assert.equal((await api.call('DELETE', r.location)).status, 204);
    assert.equal((await api.call('DELETE', r.location)).status, 404);
    assert.equal((await api.call('POST', `${r.location}/complete`)).status, 404);
    // Packs of pushes that did not store a packet (this one, the refusals above).
    const orphans = edge.d1(`SELECT key FROM packs WHERE packet NOT IN (SELECT digest FROM packets)`).map((x) => x.key);
    assert.ok(orphans.length >= 3, JSON.stringify(orphans));
    const kept = edge.d1(`SELECT pack FROM pack_users WHERE owner = '${fx.index.edited.digest}'`).map((x) => x.pack);
    await runCleanUp();
    for (const key of orphans) {
      assert.equal(edge.r2Has(key), false, `${key} was collected`);
    }
    assert.deepEqual(edge.d1(`SELECT count(*) AS n FROM packs WHERE packet NOT IN (SELECT digest FROM packets)`), [{ n: 0 }]);
    assert.deepEqual(edge.d1('SELECT count(*) AS n FROM chunks WHERE pack NOT IN (SELECT key FROM packs)'), [{ n: 0 }], 'their chunks\' rows went too');
    assert.deepEqual(edge.d1('SELECT count(*) AS n FROM pushes'), [{ n: 0 }], 'open pushes older than the TTL are discarded');
    for (const key of kept) assert.equal(edge.r2Has(key), true, `${key} is used by a packet`);
    await assertReadsAsFile(fx.index.edited, fx.read('edited'));
  });

  test('deleting a chunked packet: its manifest and layout go at once, its packs when nothing uses them', { timeout: 120_000 }, async () => {
    const [base, edited] = [fx.index.base, fx.index.edited];
    const objects = storage(base.digest);
    const packs = edge.d1(`SELECT pack FROM pack_users WHERE owner = '${base.digest}'`).map((x) => x.pack);
    const shared = edge.d1(`SELECT pack FROM pack_users WHERE owner = '${edited.digest}'`).map((x) => x.pack);
    assert.ok(packs.some((p) => shared.includes(p)), 'the second push reuses the first one\'s packs');
    assert.equal((await api.call('DELETE', packetPath(base.digest))).status, 204);
    assert.equal(edge.r2Has(objects.layout_key), false);
    assert.equal(edge.r2Has(objects.manifest_key), false);
    await runCleanUp();
    for (const p of packs) assert.equal(edge.r2Has(p), shared.includes(p), p);
    await assertReadsAsFile(edited, fx.read('edited'));
  });
});

describe('concurrency', () => {
  test('concurrent pushes with overlapping content both succeed, and two of one packet store it once', { timeout: 240_000 }, async () => {
    const [base, edited] = [fx.index.base, fx.index.edited];
    // Neither is stored: the second is deleted (the first was, above).
    assert.equal((await api.call('DELETE', packetPath(edited.digest))).status, 204);
    assert.equal((await api.call('GET', packetPath(base.digest))).status, 404);
    const [a, b, c] = await Promise.all([
      push(api, base, fx.read('base'), { encoding: 'gzip' }),
      push(api, edited, fx.read('edited'), {}),
      push(api, base, fx.read('base'), {}),
    ]);
    assert.equal(b.complete?.status, 201, JSON.stringify([b.create.json, b.recipes?.json, b.parts?.map((p) => p.json), b.complete?.json]));
    const statuses = [a, c].map((r) => r.complete?.status ?? r.create.status).sort();
    assert.deepEqual(statuses, [200, 201], JSON.stringify([a, c].map((r) => r.complete?.json ?? r.create.json)));
    assert.deepEqual(edge.d1(`SELECT count(*) AS n FROM packets WHERE digest = '${base.digest}'`), [{ n: 1 }]);
    await assertReadsAsFile(base, fx.read('base'));
    await assertReadsAsFile(edited, fx.read('edited'));
  });
});
