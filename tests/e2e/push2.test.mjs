// Pushes of format /2 packets against the real Worker (docs/transfer.md,
// "Delta push"): a push completed in the request that creates it, a push
// that needs parts, a session log that grew proven from where it ended,
// every refusal of the invariant typed and storing nothing, and the reads
// of what was stored (byte for byte what packet-core writes).
//
// Run: node --test --test-concurrency=1 tests/e2e/push2.test.mjs
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';

import { buildWorker, client, fixtures, pushBodyExample, startEdge } from './edge.mjs';
import { countsAbout, packetCount, packetStorage } from './store.mjs';
import {
  chunkBatch, cutsAndFrames, frameOf, manifestFirst, pushBody, readBatch, readRecipes, rawOf,
  recipesDocument, sha,
} from './wire.mjs';

let edge;
let api;
let fx;
const work = mkdtempSync(join(tmpdir(), 'pillbox-e2e-push2-'));

before(async () => {
  buildWorker();
  fx = fixtures();
  edge = await startEdge({ BENCH_ROUTES: '1' });
  api = client(edge.url);
}, { timeout: 600_000 });

after(async () => {
  await edge?.stop();
});

const hex = (digest) => digest.slice('sha256:'.length);
const pushPath = (entry, bases = []) =>
  `/v1/pushes?digest=${entry.digest}&size=${entry.size}${bases.map((b) => `&base=${b}`).join('')}`;
const post = (entry, body, bases) => api.call('POST', pushPath(entry, bases), { body, headers: { 'content-type': 'application/x-pillbox-push' } });

/** The reference client's body (what the CLI sends) for fixture `name` over `base`. */
function referenceBody(name, base) {
  const out = join(work, `${name}-over-${base ?? 'none'}.body`);
  const args = [join(fx.dir, `${name}.pkt`), out];
  if (base) args.push(join(fx.dir, `${base}.pkt`));
  const r = pushBodyExample(args);
  return { body: readFileSync(out), summary: JSON.parse(r.stdout) };
}

/** Pillbox-Timing as numbers. */
function timing(r) {
  return Object.fromEntries((r.headers.get('pillbox-timing') || '').split(';').filter(Boolean)
    .map((kv) => kv.split('=')).map(([k, v]) => [k, Number(v)]));
}

/** Nothing about `digest` is stored, indexed or left in R2. */
function assertNothingStored(digest) {
  const rows = countsAbout(edge, digest, { packets: 'packets', users: 'pack_users', pushes: 'pushes' });
  assert.deepEqual(rows, [{ packets: 0, users: 0, pushes: 0 }], 'D1 rows');
  assert.deepEqual(edge.objectsFor(digest), [], 'R2 objects');
}

async function assertServes(entry, bytes) {
  const path = `/v1/packets/${entry.digest}`;
  const got = await api.call('GET', path);
  assert.equal(got.status, 200);
  assert.ok(got.bytes.equals(bytes), 'GET is byte for byte what packet-core writes');
  assert.equal(got.headers.get('etag'), `"${entry.digest}"`);
  const head = await api.call('HEAD', path);
  assert.equal(head.headers.get('content-length'), String(entry.size));
  assert.equal((await api.call('GET', path, { headers: { 'if-none-match': `"${entry.digest}"` } })).status, 304);
  for (const [a, b] of [[0, 99], [700, 5000], [entry.size - 600, entry.size - 1]]) {
    const r = await api.call('GET', path, { headers: { range: `bytes=${a}-${b}` } });
    assert.deepEqual([r.status, r.headers.get('content-range')], [206, `bytes ${a}-${b}/${entry.size}`]);
    assert.ok(r.bytes.equals(bytes.subarray(a, b + 1)), `range ${a}-${b}`);
  }
  const manifest = await api.call('GET', `${path}/manifest`);
  assert.ok(manifest.bytes.equals(bytes.subarray(entry.manifest_offset, entry.manifest_offset + entry.manifest_len)));
  for (const m of entry.members.filter((x) => x.type === 'file')) {
    const r = await api.call('GET', `${path}/members/${m.path.split('/').map(encodeURIComponent).join('/')}`);
    assert.equal(r.status, 200, m.path);
    assert.ok(r.bytes.equals(bytes.subarray(m.data_offset, m.data_offset + m.size)), m.path);
    if (m.size > 10) {
      const cut = await api.call('GET', `${path}/members/${m.path}`, { headers: { range: 'bytes=3-9' } });
      assert.ok(cut.bytes.equals(bytes.subarray(m.data_offset + 3, m.data_offset + 10)), `${m.path} range`);
    }
  }
}

describe('a push completes in one request when everything is at hand', () => {
  test('a first push sends every chunk and is stored at once', async () => {
    const entry = fx.index.small;
    const bytes = fx.read('small');
    const sent = cutsAndFrames(entry, bytes);
    const r = await post(entry, pushBody(sent.recipes, manifestFirst(sent)));
    assert.equal(r.status, 201, JSON.stringify(r.json));
    assert.equal(r.json.digest, entry.digest);
    assert.equal(r.headers.get('location'), `/v1/packets/${entry.digest}`);
    assert.deepEqual(packetStorage(edge, entry.digest), [{ storage: 'packed' }]);
    await assertServes(entry, bytes);
    // Pushed again: stored already, nothing read.
    const again = await post(entry, Buffer.alloc(0));
    assert.deepEqual([again.status, again.json.created], [200, false]);
  });

  test('the reference client pushes the session packets over each other', async () => {
    const base = fx.index.base;
    const first = referenceBody('base');
    const r = await post(base, first.body);
    assert.equal(r.status, 201, JSON.stringify(r.json));
    await assertServes(base, fx.read('base'));
    // A turn: the session log grew, one file changed.
    const edited = fx.index.edited;
    const next = referenceBody('edited', 'base');
    assert.ok(next.summary.frame_bytes < 64 << 10, `${next.summary.frame_bytes} bytes of frames`);
    const r2 = await post(edited, next.body, [base.digest]);
    assert.equal(r2.status, 201, JSON.stringify(r2.json));
    await assertServes(edited, fx.read('edited'));
    // The log was proven from where the base's log ended: only the bytes
    // after it were hashed, and only its last chunk and the new chunks read.
    const oldLog = base.members.find((m) => m.path === 'workspace/logs/session.jsonl');
    const newLog = edited.members.find((m) => m.path === 'workspace/logs/session.jsonl');
    const t = timing(r2);
    assert.equal(t.hashed_bytes, newLog.size - oldLog.size, JSON.stringify(t));
    assert.ok(t.r2_read_bytes < (1 << 20) + 2 * (newLog.size - oldLog.size) + (256 << 10), JSON.stringify(t));
    // A pull with the base as base: the log's recipe copies the base's chunks.
    const recipes = await api.call('GET', `/v1/packets/${edited.digest}/recipes?base=${base.digest}`);
    assert.equal(recipes.headers.get('content-type'), 'application/x-pillbox-recipes');
    const doc = readRecipes(recipes.bytes);
    const log = doc.bodies.find((b) => b.size === newLog.size);
    assert.ok(log.runs[0].copy && log.runs[0].copy.first === 0, JSON.stringify(log.runs[0]));
    assert.equal(log.runs[0].copy.hex, hex(oldLog.sha256));
    // Every chunk named there, and the manifest's, is answered as stored.
    const names = [...doc.manifest.map((c) => c.hex), ...log.runs.filter((x) => x.chunk).map((x) => x.chunk.hex)];
    const chunks = await api.call('POST', `/v1/packets/${edited.digest}/chunks`, { body: { chunks: names } });
    assert.equal(chunks.status, 200);
    const frames = readBatch(chunks.bytes);
    assert.deepEqual(frames.map((f) => f.hex), names);
    for (const f of frames) assert.equal(sha(rawOf(f)).toString('hex'), f.hex);
    const json = Buffer.concat(frames.slice(0, doc.manifest.length).map(rawOf));
    assert.equal(`sha256:${sha(json).toString('hex')}`, edited.digest, 'the manifest from its chunks');
  });
});

describe('a push that lacks something stays open', () => {
  test('recipes, parts, then complete', async () => {
    const entry = fx.index.big;
    const bytes = fx.read('big');
    const all = cutsAndFrames(entry, bytes);
    const manifestNames = new Set(all.recipes.manifest.map((c) => c.sha256.toString('hex')));
    const manifestFrames = all.frames.filter((f) => manifestNames.has(f.sha256.toString('hex')));
    const bodyFrames = all.frames.filter((f) => !manifestNames.has(f.sha256.toString('hex')));
    // The create brings the manifest only: every body is missing.
    const r = await post(entry, pushBody({ manifest: all.recipes.manifest, bodies: [] }, manifestFrames));
    assert.equal(r.status, 202, JSON.stringify(r.json));
    assert.equal(r.headers.get('location'), r.json.location);
    const large = entry.members.filter((m) => m.type === 'file' && m.size > 256 << 10);
    assert.equal(r.json.missing.length, entry.members.filter((m) => m.type === 'file').length);
    assert.deepEqual(r.json.missing_chunks, []);
    // The recipes of the large bodies: their chunks are missing now.
    const rec = await api.call('POST', `${r.json.location}/recipes`, { body: recipesDocument({ bodies: all.recipes.bodies }) });
    assert.equal(rec.status, 200, JSON.stringify(rec.json));
    const chunkCount = all.recipes.bodies.reduce((n, b) => n + b.runs.length, 0);
    assert.equal(rec.json.missing_chunks.length, chunkCount);
    assert.equal(large.length, all.recipes.bodies.length);
    // Completing now is 409 with what is missing.
    const early = await api.call('POST', `${r.json.location}/complete`);
    assert.equal(early.status, 409);
    assert.equal(early.json.error.code, 'push_incomplete');
    // Two parts, then complete.
    const half = Math.ceil(bodyFrames.length / 2);
    for (const [n, frames] of [[1, bodyFrames.slice(0, half)], [2, bodyFrames.slice(half)]]) {
      const part = await api.call('PUT', `${r.json.location}/parts/${n}`, { body: chunkBatch(frames) });
      assert.equal(part.status, 200, JSON.stringify(part.json));
      assert.equal(part.json.frames, frames.length);
    }
    const state = await api.call('GET', r.json.location);
    assert.deepEqual([state.json.missing, state.json.missing_chunks, state.json.parts.length], [[], [], 2]);
    const done = await api.call('POST', `${r.json.location}/complete`);
    assert.equal(done.status, 201, JSON.stringify(done.json));
    assert.equal((await api.call('GET', r.json.location)).status, 404, 'the push is over');
    await assertServes(entry, bytes);
  });
});

/** A packet no other seed makes: { entry, bytes }. */
function fresh(seed) {
  const out = join(work, `fresh-${seed}`);
  pushBodyExample(['fresh', out, String(seed)]);
  return { entry: JSON.parse(readFileSync(`${out}.json`, 'utf8')), bytes: readFileSync(`${out}.pkt`) };
}

/** `entry`'s manifest with `edit` applied to its text: { json, digest }. */
function editedManifest(entry, bytes, edit) {
  const text = bytes.subarray(entry.manifest_offset, entry.manifest_offset + entry.manifest_len).toString();
  const json = Buffer.from(edit(text));
  return { json, digest: `sha256:${sha(json).toString('hex')}` };
}

describe('every refusal is typed and stores nothing', () => {
  test('a wrong digest is refused without the digest the store computed', async () => {
    const entry = fx.index.harness;
    const bytes = fx.read('harness');
    const sent = cutsAndFrames(entry, bytes);
    const wrong = `sha256:${'7'.repeat(64)}`;
    const r = await post({ ...entry, digest: wrong }, pushBody(sent.recipes, manifestFirst(sent)));
    assert.equal(r.status, 422);
    assert.equal(r.json.error.code, 'packet_digest_mismatch');
    assert.ok(!JSON.stringify(r.json).includes(hex(entry.digest)), 'the computed digest is not told');
    assertNothingStored(wrong);
    assertNothingStored(entry.digest);
  });

  test('two members with one sha256 and two sizes: digest_size_conflict', async () => {
    const { entry, bytes } = fresh(1);
    const a = entry.members.find((m) => m.path === 'workspace/a.txt');
    const c = entry.members.find((m) => m.path === 'workspace/c.txt');
    const { json, digest } = editedManifest(entry, bytes, (t) => t.replace(hex(c.sha256), hex(a.sha256)));
    const r = await post({ digest, size: entry.size }, pushBody({ manifest: [{ sha256: sha(json), size: json.length }] }, [frameOf(json)]));
    assert.equal(r.status, 422, JSON.stringify(r.json));
    assert.equal(r.json.error.code, 'digest_size_conflict');
    assertNothingStored(digest);
  });

  test('a /1 packet is taken only whole', async () => {
    const entry = fx.index['v1-small'];
    const bytes = fx.read('v1-small');
    const sent = cutsAndFrames(entry, bytes);
    const r = await post(entry, pushBody(sent.recipes, manifestFirst(sent)));
    assert.equal(r.status, 422, JSON.stringify(r.json));
    assert.equal(r.json.error.code, 'whole_upload_required');
    assertNothingStored(entry.digest);
  });

  test('a frame whose bytes are not its name', async () => {
    const entry = fx.index.many;
    const bytes = fx.read('many');
    const sent = cutsAndFrames(entry, bytes, { compress: false });
    const frames = manifestFirst(sent);
    const last = frames[frames.length - 1];
    frames[frames.length - 1] = { ...last, stored: Buffer.from(last.stored).fill(0x41) };
    const r = await post(entry, pushBody(sent.recipes, frames));
    assert.equal(r.status, 422);
    assert.equal(r.json.error.code, 'chunk_digest_mismatch');
    assertNothingStored(entry.digest);
  });

  test('a one-chunk recipe named after its body is still hashed', async () => {
    const { entry, bytes } = fresh(2);
    const blob = entry.members.find((m) => m.path === 'workspace/blob.bin');
    const name = Buffer.from(hex(blob.sha256), 'hex');
    const sent = cutsAndFrames(entry, bytes, { compress: false });
    sent.recipes.bodies = sent.recipes.bodies.filter((b) => !b.sha256.equals(name));
    sent.recipes.bodies.push({ sha256: name, size: blob.size, runs: [{ chunk: { sha256: name, size: blob.size } }] });
    const lie = Buffer.alloc(blob.size, 7);
    const frames = manifestFirst(sent).filter((f) => f.raw !== 256 << 10 && f.raw !== blob.size - (2 * 256 << 10));
    frames.push({ sha256: name, raw: lie.length, encoding: 0, stored: lie });
    const r = await post(entry, pushBody(sent.recipes, frames));
    assert.equal(r.status, 422, JSON.stringify(r.json));
    assert.equal(r.json.error.code, 'chunk_digest_mismatch');
    assertNothingStored(entry.digest);
  });

  test('chunks in the wrong order make a body that is refused', async () => {
    const { entry, bytes } = fresh(3);
    const sent = cutsAndFrames(entry, bytes);
    const log = sent.recipes.bodies.find((b) => b.size === 1_300_000);
    [log.runs[0], log.runs[1]] = [log.runs[1], log.runs[0]];
    const r = await post(entry, pushBody(sent.recipes, manifestFirst(sent)));
    assert.equal(r.status, 422, JSON.stringify(r.json));
    assert.equal(r.json.error.code, 'member_digest_mismatch');
    assert.equal(r.json.error.path, 'workspace/log.jsonl');
    assertNothingStored(entry.digest);
  });

  test('two recipes giving one chunk two sizes', async () => {
    const { entry, bytes } = fresh(4);
    const sent = cutsAndFrames(entry, bytes);
    const [one, two] = sent.recipes.bodies;
    const shared = one.runs[0].chunk;
    two.runs[0] = { chunk: { sha256: shared.sha256, size: shared.size - 1 } };
    two.runs[1] = { chunk: { ...two.runs[1].chunk, size: two.runs[1].chunk.size + 1 } };
    const r = await post(entry, pushBody(sent.recipes, manifestFirst(sent)));
    assert.equal(r.status, 422, JSON.stringify(r.json));
    assert.equal(r.json.error.code, 'recipe_invalid');
    assertNothingStored(entry.digest);
  });

  test('a body named like a base body but of another size is not taken from the base', async () => {
    // The base (small, stored) holds README.md's sha256 at 19 bytes; a
    // packet naming that sha256 at another size does not get the base's.
    const base = fx.index.small;
    const readme = base.members.find((m) => m.path === 'workspace/README.md');
    const { entry, bytes } = fresh(5);
    const c = entry.members.find((m) => m.path === 'workspace/c.txt');
    assert.notEqual(c.size, readme.size);
    const { json, digest } = editedManifest(entry, bytes, (t) => t.replace(hex(c.sha256), hex(readme.sha256)));
    const r = await post({ digest, size: entry.size }, pushBody({ manifest: [{ sha256: sha(json), size: json.length }] }, [frameOf(json)]), [base.digest]);
    assert.equal(r.status, 202, JSON.stringify(r.json));
    assert.ok(r.json.missing.includes(hex(readme.sha256)), 'missing, not reused');
    assert.equal((await api.call('DELETE', r.json.location)).status, 204);
    assert.deepEqual(packetCount(edge, digest), [{ n: 0 }]);
  });

  test('a chunk request is bounded before it is read', async () => {
    const r = await api.call('POST', `/v1/packets/${fx.index.small.digest}/chunks`, {
      body: Buffer.alloc(6 << 20, 0x20), headers: { 'content-type': 'application/json' },
    });
    assert.equal(r.status, 413);
    assert.equal(r.json.error.code, 'body_too_large');
  });
});

describe('a push body over the limit', () => {
  test('is refused by its Content-Length before it is read', async () => {
    const entry = { digest: `sha256:${'5'.repeat(64)}`, size: 4096 };
    // Over PUSH_PART_BYTES (64 MiB), the largest chunk table and 16 MiB of
    // recipes.
    const r = await post(entry, Buffer.alloc(90 << 20));
    assert.deepEqual([r.status, r.json.error.code], [413, 'push_too_large']);
  });
});

describe('packets uploaded whole', () => {
  test('a /2 packet and a /1 packet are taken whole and read back', async () => {
    for (const name of ['harness', 'v1-harness']) {
      const entry = fx.index[name];
      const bytes = fx.read(name);
      const r = await api.call('PUT', `/v1/packets/${entry.digest}`, { body: bytes });
      assert.equal(r.status, 201, `${name}: ${JSON.stringify(r.json)}`);
      await assertServes(entry, bytes);
    }
  });

  test('the edge cuts a whole packet\'s manifest as the CLI does', async () => {
    const out = join(work, 'ws-1500');
    pushBodyExample(['workspace', out, '1500', '0']);
    const entry = JSON.parse(readFileSync(`${out}.json`, 'utf8'));
    assert.ok(entry.manifest_len > 128 << 10, 'a manifest of several chunks');
    const put = await api.call('PUT', `/v1/packets/${entry.digest}`, { body: readFileSync(`${out}.pkt`) });
    assert.equal(put.status, 201, JSON.stringify(put.json));
    const recipes = readRecipes((await api.call('GET', `/v1/packets/${entry.digest}/recipes`)).bytes);
    const native = JSON.parse(pushBodyExample(['cuts', `${out}.pkt`]).stdout);
    assert.ok(native.length > 4);
    assert.deepEqual(recipes.manifest.map((c) => [c.hex, c.size]), native, 'FastCDC in wasm cuts as natively');
  });
});

