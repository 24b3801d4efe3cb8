// The storage migrations (worker/migrations/0002_chunks.sql, then
// 0003_packed.sql, and 0004_ref_history.sql): a store made at the first
// schema, with /1 packets in it as the first Worker stored them (bytes at
// packets/sha256/<hex> in R2, rows in packets, members and labels in D1),
// then moved to the second schema with a packet pushed as the second
// Worker pushed them (a pack, a manifest object and a layout object), is
// migrated in place and then answers every read as it did: the packet,
// its ranges, its manifest, its members, the listing, the search, refs
// (each with a history holding the packet it names); and its packets
// serve as bases for a /2 push.
//
// Run: node --test --test-concurrency=1 tests/e2e/migration.test.mjs
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';

import { ROOT, WRANGLER, buildWorker, client, fixtures, sha256, startEdge } from './edge.mjs';
import { packetsInOrder, schemaObjectCount, tableCounts } from './store.mjs';
import { bodiesOf, cutsAndFrames, manifestFirst, manifestOf, pushBody, readBatch, readRecipes, rawOf, sha } from './wire.mjs';

const OLD = ['v1-small', 'v1-harness', 'v1-big'];
/** Pushed at the second schema: stored as chunks, its layout an object. */
const PUSHED = 'v1-base';
const THREAD = '0199a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b';

let edge;
let api;
let fx;

function wrangler(args, options = {}) {
  const r = spawnSync(WRANGLER, args, { cwd: ROOT, encoding: 'utf8', maxBuffer: 1 << 26, env: { ...process.env, CI: '1' }, ...options });
  assert.equal(r.status, 0, `wrangler ${args.join(' ')}:\n${r.stdout}\n${r.stderr}`);
  return r;
}

const quote = (v) => (v === null || v === undefined ? 'NULL' : typeof v === 'number' ? String(v) : `'${String(v).replace(/'/g, "''")}'`);

/** The rows the old Worker's index wrote for a verified packet before 0002 (the index is now worker/src/storage/index/). */
function oldRows(entry, labels, created) {
  const harness = entry.harness;
  const files = entry.members.filter((m) => m.type === 'file');
  const statements = [
    `INSERT INTO packets (digest, size, member_count, file_bytes, harness_kind, thread_id, model, manifest_offset, manifest_size, created) VALUES (${[
      entry.digest, entry.size, entry.members.length, files.reduce((n, m) => n + m.size, 0),
      harness?.kind ?? null, harness?.thread_id ?? null, harness ? 'gpt-5-codex' : null,
      entry.manifest_offset, entry.manifest_len, created].map(quote).join(', ')})`,
    ...labels.map((l) => `INSERT INTO labels (digest, label) VALUES (${quote(entry.digest)}, ${quote(l)})`),
  ];
  entry.members.forEach((m, i) => {
    // The index does not carry modes and targets; the old rows had them, nothing reads them.
    const mode = m.type === 'dir' ? 493 : m.type === 'symlink' ? 511 : 420;
    statements.push(`INSERT INTO members (digest, idx, path, type, mode, size, sha256, target, data_offset) VALUES (${[
      entry.digest, i, m.path, m.type, mode, m.size, m.sha256 ? m.sha256.slice(7) : null, null, m.data_offset].map(quote).join(', ')})`);
  });
  return statements;
}

/** A config for the store at an older schema: `migrations` only. */
function oldConfig(migrations) {
  const dir = mkdtempSync(join(tmpdir(), 'pillbox-e2e-old-config-'));
  mkdirSync(join(dir, 'migrations'));
  for (const m of migrations) copyFileSync(join(ROOT, 'worker/migrations', m), join(dir, 'migrations', m));
  const config = readFileSync(join(ROOT, 'wrangler.toml'), 'utf8')
    .replace(/^main = .*$/m, `main = "${join(ROOT, 'worker/build/index.js')}"`)
    .replace(/^migrations_dir = .*$/m, 'migrations_dir = "migrations"')
    .replace(/^\[build\][\s\S]*?\n\n/m, '')
    .replace(/^directory = .*$/m, `directory = "${join(ROOT, 'inspector/dist')}"`);
  writeFileSync(join(dir, 'wrangler.toml'), config);
  return join(dir, 'wrangler.toml');
}

/** A PBLAYOUT version 1 object, as the second Worker wrote them: one pack. */
function layoutV1(entry, pack, refs) {
  const parts = [Buffer.from('PBLAYOUT'), Buffer.from([1])];
  const u32 = (n) => { const b = Buffer.alloc(4); b.writeUInt32BE(n); return b; };
  const u64 = (n) => { const b = Buffer.alloc(8); b.writeBigUInt64BE(BigInt(n)); return b; };
  const key = Buffer.from(pack);
  parts.push(u32(1), Buffer.from([key.length >> 8, key.length & 255]), key, u32(entry.members.length));
  for (const m of entry.members) {
    const chunks = refs.get(m.path) || [];
    parts.push(u32(chunks.length));
    for (const c of chunks) {
      parts.push(u32(0), u64(c.offset), u64(c.size));
      if (chunks.length > 1) parts.push(c.sha256);
    }
  }
  return Buffer.concat(parts);
}

before(async () => {
  buildWorker();
  fx = fixtures();
  const state = mkdtempSync(join(tmpdir(), 'pillbox-e2e-old-state-'));
  // The first schema: packets stored whole.
  const first = ['--config', oldConfig(['0001_index.sql']), '--persist-to', state];
  wrangler(['d1', 'migrations', 'apply', 'pillbox-index', '--local', ...first]);
  const sql = [];
  OLD.forEach((name, i) => {
    const entry = fx.index[name];
    wrangler(['r2', 'object', 'put', `pillbox-packets/packets/sha256/${entry.digest.slice(7)}`, '--file', join(fx.dir, `${name}.pkt`), '--local', ...first]);
    sql.push(...oldRows(entry, [`old=${name}`], `2026-11-0${i + 1}T09:00:00.000Z`));
  });
  sql.push(`INSERT INTO refs (name, digest, updated) VALUES ('sessions/old/latest', ${quote(fx.index['v1-harness'].digest)}, '2026-11-03T09:00:00.000Z')`);
  const file = join(state, 'rows.sql');
  writeFileSync(file, sql.join(';\n') + ';\n');
  wrangler(['d1', 'execute', 'pillbox-index', '--local', ...first, '--file', file]);
  // The second schema: a packet pushed as chunks, its bodies in a pack
  // (the session log in chunks of 1 MiB), its manifest and layout objects.
  const second = ['--config', oldConfig(['0001_index.sql', '0002_chunks.sql']), '--persist-to', state];
  wrangler(['d1', 'migrations', 'apply', 'pillbox-index', '--local', ...second]);
  const entry = fx.index[PUSHED];
  const bytes = fx.read(PUSHED);
  const packKey = 'packs/0123456789abcdef0123456789abcdef';
  const refs = new Map();
  const pack = [];
  let at = 0;
  for (const b of bodiesOf(entry, bytes)) {
    const pieces = [];
    for (let k = 0; k < b.size; k += 1 << 20) pieces.push(b.body.subarray(k, Math.min(k + (1 << 20), b.size)));
    refs.set(b.path, pieces.map((p) => { const c = { offset: at, size: p.length, sha256: sha(p) }; at += p.length; pack.push(p); return c; }));
  }
  const put = (key, content) => {
    const f = join(state, 'object.bin');
    writeFileSync(f, content);
    wrangler(['r2', 'object', 'put', `pillbox-packets/${key}`, '--file', f, '--local', ...second]);
  };
  const [layoutKey, manifestKey] = [`layouts/sha256/${entry.digest.slice(7)}/p1`, `manifests/sha256/${entry.digest.slice(7)}/p1`];
  put(packKey, Buffer.concat(pack));
  put(layoutKey, layoutV1(entry, packKey, refs));
  put(manifestKey, manifestOf(entry, bytes));
  const files = entry.members.filter((m) => m.type === 'file');
  const pushed = [
    `INSERT INTO packets (digest, size, member_count, file_bytes, harness_kind, thread_id, model, manifest_offset, manifest_size, created, storage, layout_key, manifest_key) VALUES (${[
      entry.digest, entry.size, entry.members.length, files.reduce((n, m) => n + m.size, 0), null, null, null,
      entry.manifest_offset, entry.manifest_len, '2026-11-04T09:00:00.000Z', 'chunked', layoutKey, manifestKey].map(quote).join(', ')})`,
    `INSERT INTO packs (key, size, chunks, packet, created, unused_check) VALUES (${[packKey, at, pack.length, entry.digest, '2026-11-04T09:00:00.000Z', 0].map(quote).join(', ')})`,
    `INSERT INTO pack_users (pack, owner) VALUES (${quote(packKey)}, ${quote(entry.digest)})`,
    `INSERT INTO labels (digest, label) VALUES (${quote(entry.digest)}, 'old=${PUSHED}')`,
  ];
  writeFileSync(file, pushed.join(';\n') + ';\n');
  wrangler(['d1', 'execute', 'pillbox-index', '--local', ...second, '--file', file]);
  // The current Worker on that state: 0003 is applied first.
  edge = await startEdge({ BENCH_ROUTES: '1' }, { state });
  api = client(edge.url);
}, { timeout: 600_000 });

after(async () => {
  await edge?.stop();
});

test('the migrations keep every packet and drop the per-member index', () => {
  const rows = packetsInOrder(edge);
  assert.deepEqual(rows, [
    ...OLD.map((n) => ({ digest: fx.index[n].digest, storage: 'whole', object_key: `packets/sha256/${fx.index[n].digest.slice(7)}`, findings_kept: 0 })),
    { digest: fx.index[PUSHED].digest, storage: 'chunked', object_key: null, findings_kept: 0 },
  ]);
  assert.deepEqual(schemaObjectCount(edge, 'members'), [{ n: 0 }]);
  assert.deepEqual(tableCounts(edge, { n: 'pack_users' }), [{ n: OLD.length + 1 }], 'each packet uses its own objects');
});

test('every read answers as before the migrations', async () => {
  for (const name of [...OLD, PUSHED]) {
    const entry = fx.index[name];
    const bytes = fx.read(name);
    const path = `/v1/packets/${entry.digest}`;
    const whole = await api.call('GET', path);
    assert.equal(whole.status, 200);
    assert.ok(whole.bytes.equals(bytes), name);
    assert.equal(whole.headers.get('etag'), `"${entry.digest}"`);
    const head = await api.call('HEAD', path);
    assert.equal(head.headers.get('content-length'), String(entry.size));
    assert.equal((await api.call('GET', path, { headers: { 'if-none-match': `"${entry.digest}"` } })).status, 304);
    const range = await api.call('GET', path, { headers: { range: 'bytes=100-5000' } });
    assert.deepEqual([range.status, range.headers.get('content-range')], [206, `bytes 100-5000/${entry.size}`]);
    assert.ok(range.bytes.equals(bytes.subarray(100, 5001)));
    const manifest = await api.call('GET', `${path}/manifest`);
    assert.ok(manifest.bytes.equals(manifestOf(entry, bytes)), `${name} manifest`);
    for (const b of bodiesOf(entry, bytes)) {
      const r = await api.call('GET', `${path}/members/${b.path.split('/').map(encodeURIComponent).join('/')}`);
      assert.equal(r.status, 200, b.path);
      assert.ok(r.bytes.equals(b.body), b.path);
      assert.equal(r.headers.get('pillbox-member-sha256'), `sha256:${b.hex}`);
      const cut = await api.call('GET', `${path}/members/${b.path}`, { headers: { range: 'bytes=1-' } });
      assert.ok(cut.bytes.equals(b.body.subarray(1)), b.path);
    }
  }
  const all = [...OLD, PUSHED];
  const list = await api.call('GET', '/v1/packets');
  assert.deepEqual(list.json.packets.map((p) => [p.digest, p.labels, p.created]), [...all].reverse().map((n, i) => [
    fx.index[n].digest, [`old=${n}`], `2026-11-0${all.length - i}T09:00:00.000Z`]));
  assert.deepEqual(list.json.packets.find((p) => p.digest === fx.index['v1-harness'].digest).harness,
    { kind: 'codex', thread_id: THREAD, model: 'gpt-5-codex' });
  const readme = await api.call('GET', '/v1/search?path=workspace/README.md');
  assert.deepEqual(readme.json.matches.map((m) => m.digest), [fx.index['v1-small'].digest, fx.index['v1-big'].digest, fx.index[PUSHED].digest]);
  const main = fx.index['v1-small'].members.find((m) => m.path === 'workspace/src/main.rs');
  const bySha = await api.call('GET', `/v1/search?sha256=${main.sha256}`);
  assert.deepEqual(bySha.json.matches, [{ digest: fx.index['v1-small'].digest, path: main.path, type: 'file', size: main.size, sha256: main.sha256 }]);
  const ref = await api.call('GET', '/v1/refs/sessions/old/latest');
  assert.equal(ref.json.digest, fx.index['v1-harness'].digest);
  // 0004: the ref's history starts with the packet it named, by no known token.
  const history = await api.call('GET', '/v1/ref-history/sessions/old/latest');
  assert.deepEqual(history.json.moves, [{ digest: fx.index['v1-harness'].digest, at: '2026-11-03T09:00:00.000Z', by: null }]);
  assert.equal(sha256((await api.call('GET', `/v1/packets/${ref.json.digest}`)).bytes), fx.index['v1-harness'].digest);
  // The pushed packet's recipes and chunks, as a delta pull reads them.
  const pushed = fx.index[PUSHED];
  const doc = readRecipes((await api.call('GET', `/v1/packets/${pushed.digest}/recipes`)).bytes);
  const log = pushed.members.find((m) => m.path === 'workspace/logs/session.jsonl');
  assert.deepEqual(doc.bodies.map((b) => [b.hex, b.size, b.runs.length]), [[log.sha256.slice(7), log.size, Math.ceil(log.size / (1 << 20))]]);
  const names = doc.bodies[0].runs.map((r) => r.chunk.hex);
  const answer = await api.call("POST", `/v1/packets/${pushed.digest}/chunks`, { body: { chunks: names } });
  assert.equal(answer.status, 200, JSON.stringify(answer.json));
  const frames = readBatch(answer.bytes);
  const body = fx.read(PUSHED).subarray(log.data_offset, log.data_offset + log.size);
  assert.ok(Buffer.concat(frames.map(rawOf)).equals(body));
});

test('old packets are bases for a /2 push', async () => {
  // The /2 edition of v1-base's packet: every body is in the old pushed
  // packet (whose manifest is a /1 one), only packet.json goes up. Its
  // bodies' findings were not kept then: they are read and screened once.
  const entry = fx.index.base;
  const bodies = new Set(bodiesOf(fx.index[PUSHED], fx.read(PUSHED)).map((b) => `${b.hex}/${b.size}`));
  const sent = cutsAndFrames(entry, fx.read('base'), { have: (hex, size) => bodies.has(`${hex}/${size}`) });
  assert.equal(sent.recipes.bodies.length, 0);
  const r = await api.call('POST', `/v1/pushes?digest=${entry.digest}&size=${entry.size}&base=${fx.index[PUSHED].digest}`,
    { body: pushBody(sent.recipes, manifestFirst(sent)), headers: { 'content-type': 'application/x-pillbox-push' } });
  assert.equal(r.status, 201, JSON.stringify(r.json));
  const got = await api.call('GET', `/v1/packets/${entry.digest}`);
  assert.ok(got.bytes.equals(fx.read('base')));
  assert.equal(sha(got.bytes.subarray(entry.manifest_offset, entry.manifest_offset + entry.manifest_len)).toString('hex'), entry.digest.slice(7));
  // A whole /1 packet is a base too: small's bodies from v1-small.
  const small = fx.index.small;
  const have = new Set(bodiesOf(fx.index['v1-small'], fx.read('v1-small')).map((b) => `${b.hex}/${b.size}`));
  const s2 = cutsAndFrames(small, fx.read('small'), { have: (hex, size) => have.has(`${hex}/${size}`) });
  const r2 = await api.call('POST', `/v1/pushes?digest=${small.digest}&size=${small.size}&base=${fx.index['v1-small'].digest}`,
    { body: pushBody(s2.recipes, manifestFirst(s2)), headers: { 'content-type': 'application/x-pillbox-push' } });
  assert.equal(r2.status, 201, JSON.stringify(r2.json));
  assert.ok((await api.call('GET', `/v1/packets/${small.digest}`)).bytes.equals(fx.read('small')));
});
