// What requests cost (docs/worker.md, "Costs"): worker/js/meter.mjs against
// fake bindings (every call counted once, by class, with the rows D1's meta
// reports), its counters the same list as src/cost.rs, and the real Worker
// under wrangler dev with BENCH_ROUTES=1: a push's `Pillbox-Cost` header
// counts what the push wrote, and GET /v1/bench/costs sums every request.
//
// Run: node --test --test-concurrency=1 tests/e2e/cost.test.mjs
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';

import { FIELDS, isolateTotals, meterBucket, meterDatabase, meterEnv, newMeter, readMeter, tableOf } from '../../worker/js/meter.mjs';
import { ROOT, buildWorker, client, fixtures, pushBodyExample, startEdge } from './edge.mjs';
import { countsAbout } from './store.mjs';

/** A D1 binding that answers every statement with `meta` rows of its own. */
function fakeDatabase() {
  const ran = [];
  const result = (sql) => ({ results: [{ n: 1, sql }], success: true, meta: { rows_read: 3, rows_written: sql.startsWith('INSERT') ? 2 : 0, duration: 0.5 } });
  class Statement {
    constructor(sql, values = []) { this.sql = sql; this.values = values; }
    bind(...values) { return new Statement(this.sql, values); }
    async all() { ran.push(this.sql); return result(this.sql); }
    async run() { ran.push(this.sql); return result(this.sql); }
    async first(column) { ran.push(this.sql); const row = result(this.sql).results[0]; return column ? row[column] : row; }
    async raw() { ran.push(this.sql); return [[1]]; }
  }
  class D1Database {
    prepare(sql) { return new Statement(sql); }
    async batch(statements) {
      for (const s of statements) assert.ok(s instanceof Statement, 'a batch gets the real statements');
      return statements.map((s) => { ran.push(s.sql); return result(s.sql); });
    }
    async exec() { return { count: 2, duration: 0.1 }; }
  }
  return { db: new D1Database(), ran };
}

/** An R2 binding holding objects in a Map. */
function fakeBucket() {
  const objects = new Map();
  const object = (key) => ({ key, size: objects.get(key).length });
  class R2Bucket {
    async head(key) { return objects.has(key) ? object(key) : null; }
    async get(key, options) {
      if (!objects.has(key)) return null;
      const range = options?.range;
      return { ...object(key), body: 'stream', range: range ? { offset: range.offset, length: range.length } : undefined };
    }
    async put(key, value) { objects.set(key, Buffer.from(value)); return object(key); }
    async delete(keys) { for (const k of [keys].flat()) objects.delete(k); }
    async list() { return { objects: [...objects.keys()].map(object) }; }
    async createMultipartUpload(key) { return this.resumeMultipartUpload(key, 'u1'); }
    resumeMultipartUpload(key, uploadId) {
      const parts = [];
      return {
        key, uploadId,
        async uploadPart(n, value) { parts[n - 1] = Buffer.from(value); return { partNumber: n, etag: `e${n}` }; },
        async complete() { objects.set(key, Buffer.concat(parts)); return object(key); },
        async abort() {},
      };
    }
  }
  return new R2Bucket();
}

test('the meter counts D1 statements, round trips and rows, and hands batches the real statements', async () => {
  const { db, ran } = fakeDatabase();
  const meter = newMeter();
  const d1 = meterDatabase(db, meter);
  assert.equal(d1.constructor.name, 'D1Database', 'the binding still looks like one (workers-rs checks its name)');
  await d1.prepare('SELECT 1').bind(1).all();
  assert.equal((await d1.prepare('SELECT n').first('n')), 1);
  assert.equal((await d1.prepare('SELECT n').first()).n, 1);
  assert.equal(await d1.prepare('SELECT x').first().then((r) => r.x), undefined);
  await assert.rejects(d1.prepare('SELECT 1').first('missing'), /D1_COLUMN_NOTFOUND/);
  await d1.batch([d1.prepare('INSERT a').bind(1), d1.prepare('INSERT b'), d1.prepare('SELECT c')]);
  await d1.exec('CREATE TABLE t (a); CREATE TABLE u (b)');
  const m = readMeter(meter);
  assert.equal(ran.length, 8);
  assert.equal(m.d1_calls, 7, 'five statements run alone, one batch, one exec');
  assert.equal(m.d1_queries, 10, 'eight statements and the exec\'s two');
  assert.equal(m.rows_read, 8 * 3);
  assert.equal(m.rows_written, 2 * 2);
  assert.equal(m.d1_ms, 8 * 0.5 + 0.1);
  assert.ok(m.wait_ms >= 0);
});

test('the meter counts R2 operations by class and the bytes put, read and deleted', async () => {
  const meter = newMeter();
  const before = isolateTotals();
  const r2 = meterBucket(fakeBucket(), meter);
  assert.equal(r2.constructor.name, 'R2Bucket');
  await r2.put('a', 'hello world');
  assert.equal((await r2.get('a', { range: { offset: 2, length: 4 } })).size, 11);
  await r2.get('a');
  await r2.get('missing');
  await r2.head('a');
  await r2.list();
  const up = await r2.createMultipartUpload('b');
  await up.uploadPart(1, 'xyz');
  await up.uploadPart(2, 'zy');
  await up.complete([]);
  const resumed = r2.resumeMultipartUpload('b', 'u1');
  assert.equal(resumed.uploadId, 'u1', 'properties of an upload read through');
  await r2.delete('a');
  await r2.delete(['b', 'gone']);
  const m = readMeter(meter);
  assert.deepEqual(
    [m.r2_class_a, m.r2_class_b, m.r2_deletes, m.bytes_put, m.bytes_read, m.bytes_deleted],
    [1 + 1 + 1 + 2 + 1, 3 + 1, 3, 11 + 5, 4 + 11, 11 + 5],
  );
  const after = isolateTotals();
  assert.equal(after.r2_class_a - before.r2_class_a, m.r2_class_a, 'every meter adds to the isolate\'s totals');
  assert.equal(after.bytes_put - before.bytes_put, m.bytes_put);
});

test('a statement is counted for the table it is about, not a subquery\'s', () => {
  assert.equal(tableOf('SELECT p.digest, (SELECT group_concat(l.label) FROM labels l WHERE l.digest = p.digest) AS labels FROM packets p'), 'packets');
  assert.equal(tableOf('INSERT OR IGNORE INTO labels (digest, label) SELECT ?1, ?2 WHERE EXISTS (SELECT 1 FROM packets WHERE digest = ?1)'), 'labels');
  assert.equal(tableOf('DELETE FROM packs WHERE key = ?1 AND NOT EXISTS (SELECT 1 FROM pack_users WHERE pack = ?1) RETURNING key'), 'packs');
  assert.equal(tableOf('UPDATE refs SET digest = ?1 WHERE name = ?2'), 'refs');
  assert.equal(tableOf('SELECT lower(hex(randomblob(16))) AS id'), 'other');
});

test('a metered env wraps only the two bindings it names', () => {
  const { db } = fakeDatabase();
  const env = { INDEX: db, PACKETS: fakeBucket(), BENCH_ROUTES: '1' };
  const metered = meterEnv(env, 'INDEX', 'PACKETS', newMeter());
  assert.notEqual(metered.INDEX, env.INDEX);
  assert.notEqual(metered.PACKETS, env.PACKETS);
  assert.equal(metered.BENCH_ROUTES, '1');
  assert.equal(metered.OTHER, undefined);
});

test('the meter and src/cost.rs name the same counters', () => {
  const rust = readFileSync(join(ROOT, 'worker/src/cost.rs'), 'utf8');
  const table = rust.slice(rust.indexOf('pub const FIELDS'), rust.indexOf('];', rust.indexOf('pub const FIELDS')));
  const names = [...table.matchAll(/(?:count\(|name: )"([a-z0-9_]+)"/g)].map((m) => m[1]);
  assert.deepEqual(names, FIELDS);
  // The header's keys, as proto/openapi.yaml lists them, in order.
  const keys = [...table.matchAll(/(?:count\("[a-z0-9_]+", |key: )"([a-z0-9]+)"/g)].map((m) => m[1]);
  assert.equal(keys.length, FIELDS.length);
  const doc = readFileSync(join(ROOT, 'proto/openapi.yaml'), 'utf8');
  const example = /`(d1=[^`]+)`/.exec(doc.slice(doc.indexOf('    Cost:')))[1];
  assert.deepEqual(example.split(';').map((kv) => kv.split('=')[0]), [...keys, 'ms']);
});

/** `Pillbox-Cost` as numbers. */
export function costOf(headers) {
  return Object.fromEntries((headers.get('pillbox-cost') || '').split(';').filter(Boolean)
    .map((kv) => { const [k, v] = kv.split('='); return [k, Number(v)]; }));
}

let edge;
let api;
let fx;
const work = mkdtempSync(join(tmpdir(), 'pillbox-e2e-cost-'));

before(async () => {
  buildWorker();
  fx = fixtures();
  edge = await startEdge({ BENCH_ROUTES: '1' });
  api = client(edge.url);
}, { timeout: 600_000 });

after(async () => {
  await edge?.stop();
});

test('a push answers what it cost, and the isolate\'s totals sum every request', { timeout: 600_000 }, async (t) => {
  const totals = async () => (await api.call('GET', '/v1/bench/costs')).json.isolate;
  const start = await totals();
  const base = fx.index.base;
  const out = join(work, 'base.body');
  pushBodyExample([join(fx.dir, 'base.pkt'), out]);
  const pushed = await api.call('POST', `/v1/pushes?digest=${base.digest}&size=${base.size}`,
    { body: readFileSync(out), headers: { 'content-type': 'application/x-pillbox-push' } });
  assert.equal(pushed.status, 201, JSON.stringify(pushed.json));
  const cost = costOf(pushed.headers);
  t.diagnostic(`push: Pillbox-Cost ${pushed.headers.get('pillbox-cost')}`);
  assert.ok(cost.d1q >= cost.d1 && cost.d1 > 0, JSON.stringify(cost));
  assert.ok(cost.rw > 0, 'the packet is indexed');
  assert.ok(cost.r2a >= 1 && cost.put > 0, 'its pack is stored');
  const packs = countsAbout(edge, base.digest, { n: 'packs' })[0].n;
  assert.ok(cost.r2a >= packs, `${cost.r2a} puts for ${packs} packs`);
  const got = await api.call('GET', `/v1/packets/${base.digest}`);
  assert.equal(got.status, 200);
  assert.ok(costOf(got.headers).d1q > 0);
  // Wait for the streamed answer's reads to be counted: the totals only grow.
  const end = await totals();
  assert.ok(end.r2_class_b - start.r2_class_b >= 1, 'the GET read R2');
  assert.ok(end.bytes_read - start.bytes_read > 0);
  assert.ok(end.d1_queries - start.d1_queries >= cost.d1q + costOf(got.headers).d1q);
  assert.equal(end.bytes_put - start.bytes_put, cost.put, 'nothing else stored anything');
  t.diagnostic(`totals: ${JSON.stringify(end)}`);
  assert.equal((await client(edge.url, null).call('GET', '/v1/bench/costs')).status, 401, 'it needs a token');
});
