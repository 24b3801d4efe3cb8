// The storage migration (worker/migrations/0002_chunks.sql): a store made
// at the old schema, with packets in it as the old Worker stored them
// (bytes at packets/sha256/<hex> in R2, rows in packets, members and labels
// in D1), is migrated in place and then answers every read as it did: the
// packet, its ranges, its manifest, its members, the listing, the search,
// refs; and its packets serve as bases for a delta push.
//
// Run: node --test --test-concurrency=1 tests/e2e/migration.test.mjs
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';

import { ROOT, WRANGLER, buildWorker, client, fixtures, sha256, startEdge } from './edge.mjs';
import { bodiesOf, manifestOf, push } from './transfer.mjs';

const OLD = ['small', 'harness', 'big'];
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

/** The rows the old Worker's index wrote for a verified packet (worker/src/index.rs before 0002). */
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

before(async () => {
  buildWorker();
  fx = fixtures();
  // A store at the old schema: a config whose migrations are 0001 only.
  const state = mkdtempSync(join(tmpdir(), 'pillbox-e2e-old-state-'));
  const old = mkdtempSync(join(tmpdir(), 'pillbox-e2e-old-config-'));
  mkdirSync(join(old, 'migrations'));
  copyFileSync(join(ROOT, 'worker/migrations/0001_index.sql'), join(old, 'migrations/0001_index.sql'));
  const config = readFileSync(join(ROOT, 'wrangler.toml'), 'utf8')
    .replace(/^main = .*$/m, `main = "${join(ROOT, 'worker/build/index.js')}"`)
    .replace(/^migrations_dir = .*$/m, 'migrations_dir = "migrations"')
    .replace(/^\[build\][\s\S]*?\n\n/m, '')
    .replace(/^directory = .*$/m, `directory = "${join(ROOT, 'inspector/dist')}"`);
  writeFileSync(join(old, 'wrangler.toml'), config);
  const common = ['--config', join(old, 'wrangler.toml'), '--persist-to', state];
  wrangler(['d1', 'migrations', 'apply', 'pillbox-index', '--local', ...common]);
  const sql = [];
  OLD.forEach((name, i) => {
    const entry = fx.index[name];
    wrangler(['r2', 'object', 'put', `pillbox-packets/packets/sha256/${entry.digest.slice(7)}`, '--file', join(fx.dir, `${name}.pkt`), '--local', ...common]);
    sql.push(...oldRows(entry, [`old=${name}`], `2026-11-0${i + 1}T09:00:00.000Z`));
  });
  sql.push(`INSERT INTO refs (name, digest, updated) VALUES ('sessions/old/latest', ${quote(fx.index.harness.digest)}, '2026-11-03T09:00:00.000Z')`);
  const file = join(old, 'rows.sql');
  writeFileSync(file, sql.join(';\n') + ';\n');
  wrangler(['d1', 'execute', 'pillbox-index', '--local', ...common, '--file', file]);
  // The current Worker on that state: 0002 is applied first.
  edge = await startEdge({}, { state });
  api = client(edge.url);
}, { timeout: 600_000 });

after(async () => {
  await edge?.stop();
});

test('the migration keeps every packet and drops the per-member index', () => {
  const rows = edge.d1('SELECT digest, storage, object_key FROM packets ORDER BY seq');
  assert.deepEqual(rows, OLD.map((n) => ({
    digest: fx.index[n].digest, storage: 'whole', object_key: `packets/sha256/${fx.index[n].digest.slice(7)}`,
  })));
  assert.deepEqual(edge.d1("SELECT count(*) AS n FROM sqlite_master WHERE name = 'members'"), [{ n: 0 }]);
  assert.deepEqual(edge.d1('SELECT count(*) AS n FROM pack_users'), [{ n: OLD.length }], 'each packet uses its own object');
});

test('every read answers as before the migration', async () => {
  for (const name of OLD) {
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
  const list = await api.call('GET', '/v1/packets');
  assert.deepEqual(list.json.packets.map((p) => [p.digest, p.labels, p.created]), [...OLD].reverse().map((n, i) => [
    fx.index[n].digest, [`old=${n}`], `2026-11-0${OLD.length - i}T09:00:00.000Z`]));
  assert.deepEqual(list.json.packets.find((p) => p.digest === fx.index.harness.digest).harness,
    { kind: 'codex', thread_id: THREAD, model: 'gpt-5-codex' });
  const readme = await api.call('GET', '/v1/search?path=workspace/README.md');
  assert.deepEqual(readme.json.matches.map((m) => m.digest), [fx.index.small.digest, fx.index.big.digest]);
  const main = fx.index.small.members.find((m) => m.path === 'workspace/src/main.rs');
  const bySha = await api.call('GET', `/v1/search?sha256=${main.sha256}`);
  assert.deepEqual(bySha.json.matches, [{ digest: fx.index.small.digest, path: main.path, type: 'file', size: main.size, sha256: main.sha256 }]);
  const ref = await api.call('GET', '/v1/refs/sessions/old/latest');
  assert.equal(ref.json.digest, fx.index.harness.digest);
  assert.equal(sha256((await api.call('GET', `/v1/packets/${ref.json.digest}`)).bytes), fx.index.harness.digest);
});

test('an old packet is a base for a delta push', async () => {
  // `many` shares nothing with them; `small` pushed again is stored already.
  const again = await push(api, fx.index.small, fx.read('small'), { bases: [fx.index.small.digest] });
  assert.deepEqual([again.create.status, again.create.json.created], [200, false]);
  const big = fx.index.big;
  const digest = sha256(Buffer.from('not big'));
  const r = await api.call('POST', `/v1/pushes?digest=${digest}&size=${big.size}&base=${big.digest}`,
    { body: manifestOf(big, fx.read('big')), headers: { 'content-type': 'application/json' } });
  assert.equal(r.status, 201, JSON.stringify(r.json));
  assert.deepEqual([r.json.bases_used, r.json.missing], [[big.digest], []], 'every body is in the old packet');
  assert.equal((await api.call('DELETE', r.json.location)).status, 204);
});
