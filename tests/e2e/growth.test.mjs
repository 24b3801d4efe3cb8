// What one save costs the store (docs/transfer.md, "Storage at the
// edge"): a workspace like a node_modules install (about 21,000 members) is
// uploaded whole, then saved again and again after one-file edits, each
// save pushed over the one before it as the CLI pushes it (the reference
// client). For every save: the bytes R2 grows by (the local store's blobs)
// and the bytes of the D1 rows (and index entries) it adds, the edge's
// time, and what the edge read and hashed. A one-file save must grow R2 +
// D1 by at most 64 KiB, and a packet's packs stay bounded.
//
// Run: node --test --test-concurrency=1 tests/e2e/growth.test.mjs
// (PILLBOX_GROWTH_MEMBERS, PILLBOX_GROWTH_SAVES to change the workload.)
import assert from 'node:assert/strict';
import { mkdtempSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';

import { buildWorker, client, pushBodyExample, startEdge } from './edge.mjs';
import { countsAbout, storedBytes } from './store.mjs';

const MEMBERS = Number(process.env.PILLBOX_GROWTH_MEMBERS || 21_000);
const SAVES = Number(process.env.PILLBOX_GROWTH_SAVES || 9);
const LIMIT = 64 << 10;

let edge;
let api;
const work = mkdtempSync(join(tmpdir(), 'pillbox-e2e-growth-'));

before(async () => {
  buildWorker();
  edge = await startEdge({ BENCH_ROUTES: '1', MAX_SINGLE_UPLOAD_BYTES: String(256 << 20) });
  api = client(edge.url);
}, { timeout: 600_000 });

after(async () => {
  await edge?.stop();
});

function example(args) {
  return JSON.parse(pushBodyExample(args).stdout);
}

/** The workspace after `turn` one-file edits: { entry, file }. */
function workspace(turn) {
  const out = join(work, `ws-${turn}`);
  example(['workspace', out, String(MEMBERS), String(turn)]);
  return { entry: JSON.parse(readFileSync(`${out}.json`, 'utf8')), file: `${out}.pkt` };
}

/** Bytes of the local R2 store's blobs. */
function r2Bytes() {
  const dir = join(edge.state, 'v3/r2/pillbox-packets/blobs');
  return readdirSync(dir).reduce((n, f) => n + statSync(join(dir, f)).size, 0);
}

function timing(r) {
  return Object.fromEntries((r.headers.get('pillbox-timing') || '').split(';').filter(Boolean)
    .map((kv) => kv.split('=')).map(([k, v]) => [k, Number(v)]));
}

test(`a one-file save of a ${MEMBERS}-member workspace grows R2 + D1 by at most 64 KiB`, { timeout: 1_800_000 }, async () => {
  let prev = workspace(0);
  const put = await api.call('PUT', `/v1/packets/${prev.entry.digest}`, { body: readFileSync(prev.file) });
  assert.equal(put.status, 201, JSON.stringify(put.json));
  const rows = [];
  for (let turn = 1; turn <= SAVES; turn++) {
    const next = workspace(turn);
    const out = join(work, `push-${turn}.body`);
    const sent = example([next.file, out, prev.file]);
    const [r2Before, d1Before] = [r2Bytes(), storedBytes(edge)];
    const started = performance.now();
    const r = await api.call('POST', `/v1/pushes?digest=${next.entry.digest}&size=${next.entry.size}&base=${prev.entry.digest}`,
      { body: readFileSync(out), headers: { 'content-type': 'application/x-pillbox-push' } });
    const wall = performance.now() - started;
    assert.equal(r.status, 201, JSON.stringify(r.json));
    const t = timing(r);
    const row = {
      turn, sent: sent.body_bytes, frames: sent.frames,
      r2: r2Bytes() - r2Before, d1: storedBytes(edge) - d1Before,
      wall_ms: Math.round(wall), edge_ms: t.total, r2_read: t.r2_read_bytes, hashed: t.hashed_bytes, written: t.r2_write_bytes,
      packs: countsAbout(edge, next.entry.digest, { n: 'pack_users' })[0].n,
      stages_ms: { d1: t.d1, r2_write: t.r2_write, body: t.body, hash: t.hash, decode: t.decode },
    };
    rows.push(row);
    console.log(JSON.stringify(row));
    prev = next;
  }
  // The first save over the whole upload stores the manifest as chunks and
  // the layout for the first time; every save after it costs what changed.
  const steady = rows.slice(1);
  for (const row of steady) {
    assert.ok(row.r2 + row.d1 <= LIMIT, `save ${row.turn}: R2 ${row.r2} + D1 ${row.d1} bytes`);
    assert.ok(row.packs <= 1 + 8 + 1, `save ${row.turn}: ${row.packs} packs`);
  }
  const total = (k) => steady.reduce((n, r) => n + r[k], 0);
  console.log(JSON.stringify({
    members: MEMBERS, manifest_bytes: prev.entry.manifest_len, saves: steady.length,
    mean_r2: Math.round(total('r2') / steady.length), mean_d1: Math.round(total('d1') / steady.length),
    max_growth: Math.max(...steady.map((r) => r.r2 + r.d1)),
    median_edge_ms: steady.map((r) => r.edge_ms).sort((a, b) => a - b)[Math.floor(steady.length / 2)],
  }));
});
