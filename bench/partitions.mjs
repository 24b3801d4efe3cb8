// The index past one database (docs/worker.md, "Past one database"): a
// small queueing model of saves against S session partitions and C chunk
// partitions, each a single-threaded database (D1 runs one query at a
// time), fed with what bench/costs.mjs measured for a save after a
// one-file edit: its D1 round trips and statements by table.
//
// Each of N sessions saves, thinks (exponential, mean --think-s), saves
// again. A save makes its round trips one after another (as the Worker
// does); a round trip goes to the session's partition (refs, packets,
// pushes, pack_users, …) or to one chunk partition (chunks, packs,
// body_ends; the few new chunks of a one-file save share one partition),
// waits for that database, holds it for its statements × the per-statement
// time, and pays --rtt-ms of network besides (not holding the database).
// The Worker's own time (hashing, R2) is left out: it runs in parallel
// isolates and does not queue.
//
// Usage: node bench/partitions.mjs [--costs docs/benchmarks-costs.json]
//          [--workspace node_modules] [--sessions 10000]
//          [--query-ms measured,1] [--rtt-ms 2] [--seconds 60] [--seed 1]
//          [--think-s 30,5,0]
//          [--md FILE]
// Prints a table (Markdown) per think time: partitions → saves/s (saves
// ending in the counted window), the busiest database's share of that
// window, and the save's time in the index, p50/p99 (with every session
// saving back to back, a saturated store's queue: N / throughput).
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

import { ROOT } from '../tests/e2e/edge.mjs';

const args = process.argv.slice(2);
const opt = (name, fallback) => {
  const i = args.indexOf(`--${name}`);
  return i >= 0 ? args[i + 1] : fallback;
};
const costs = JSON.parse(readFileSync(opt('costs', join(ROOT, 'docs/benchmarks-costs.json')), 'utf8'));
const wsName = opt('workspace', 'node_modules');
const SESSIONS = Number(opt('sessions', '10000'));
const THINKS = opt('think-s', '30,5,0').split(',').map(Number);
const QUERY_MS = opt('query-ms', 'measured,1').split(',');
const RTT_MS = Number(opt('rtt-ms', '2'));
const SECONDS = Number(opt('seconds', '60'));
const SEED = Number(opt('seed', '1'));
const PARTITIONS = [[1, 1], [2, 2], [4, 4], [8, 8], [16, 16], [32, 32], [64, 64]];
const CHUNK_TABLES = new Set(['chunks', 'packs', 'body_ends']);

const ws = costs.workspaces.find((w) => w.name === wsName);
if (!ws) throw new Error(`no workspace ${wsName} in the costs`);
const save = ws.ops.find((o) => o.name.startsWith('save, one file'));

/** The save's round trips: [{ kind: 'session' | 'chunk', statements }], in proportion to its statements by table. */
function roundTrips() {
  let session = 0;
  let chunk = 0;
  for (const [t, v] of Object.entries(save.tables)) (CHUNK_TABLES.has(t) ? (chunk += v.queries) : (session += v.queries));
  const total = session + chunk;
  const calls = save.d1_calls;
  const chunkCalls = chunk ? Math.max(1, Math.round(calls * chunk / total)) : 0;
  const sessionCalls = Math.max(1, calls - chunkCalls);
  const trips = [];
  for (let i = 0; i < sessionCalls; i++) trips.push({ kind: 'session', statements: session / sessionCalls });
  for (let i = 0; i < chunkCalls; i++) trips.push({ kind: 'chunk', statements: chunk / chunkCalls });
  // Session work first and last (the ref read, the ref's swap), chunk lookups between.
  return [trips[0], ...trips.filter((t) => t.kind === 'chunk'), ...trips.slice(1).filter((t) => t.kind === 'session')];
}

function prng(seed) {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6D2B79F5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** A binary heap of events by time. */
class Heap {
  constructor() { this.a = []; }
  push(e) {
    const a = this.a; a.push(e);
    for (let i = a.length - 1; i > 0;) { const p = (i - 1) >> 1; if (a[p].t <= a[i].t) break; [a[p], a[i]] = [a[i], a[p]]; i = p; }
  }
  pop() {
    const a = this.a; const top = a[0]; const last = a.pop();
    if (a.length) {
      a[0] = last;
      for (let i = 0; ;) {
        const l = 2 * i + 1; const r = l + 1; let m = i;
        if (l < a.length && a[l].t < a[m].t) m = l;
        if (r < a.length && a[r].t < a[m].t) m = r;
        if (m === i) break;
        [a[m], a[i]] = [a[i], a[m]]; i = m;
      }
    }
    return top;
  }
  get size() { return this.a.length; }
}

/** One run: { saves_per_s, busiest (share of time the busiest database worked), p50_ms, p99_ms }. */
function simulate({ S, C, thinkS, queryMs }) {
  const random = prng(SEED);
  const trips = roundTrips();
  const freeAt = { session: new Float64Array(S), chunk: new Float64Array(C) };
  const busy = { session: new Float64Array(S), chunk: new Float64Array(C) };
  const heap = new Heap();
  const think = () => (thinkS > 0 ? -Math.log(1 - random()) * thinkS * 1000 : 0);
  for (let n = 0; n < SESSIONS; n++) heap.push({ t: think(), n, step: 0, start: null, chunkPart: 0 });
  const end = SECONDS * 1000;
  const warm = end / 4;
  const latencies = [];
  let done = 0;
  while (heap.size) {
    const e = heap.pop();
    if (e.t > end) break;
    if (e.step === 0) { e.start = e.t; e.chunkPart = Math.floor(random() * C); }
    if (e.step === trips.length) {
      // Throughput: saves ending in the window; latency: of those.
      if (e.t >= warm) { latencies.push(e.t - e.start); done += 1; }
      heap.push({ t: e.t + think(), n: e.n, step: 0, start: null, chunkPart: 0 });
      continue;
    }
    const trip = trips[e.step];
    const db = trip.kind === 'session' ? e.n % S : e.chunkPart;
    const service = trip.statements * queryMs;
    const arrive = e.t + RTT_MS / 2;
    const begin = Math.max(arrive, freeAt[trip.kind][db]);
    freeAt[trip.kind][db] = begin + service;
    busy[trip.kind][db] += Math.max(0, Math.min(begin + service, end) - Math.max(begin, warm));
    heap.push({ t: begin + service + RTT_MS / 2, n: e.n, step: e.step + 1, start: e.start, chunkPart: e.chunkPart });
  }
  latencies.sort((a, b) => a - b);
  const q = (p) => latencies[Math.min(latencies.length - 1, Math.floor(p * latencies.length))] ?? null;
  const window = end - warm;
  const busiest = Math.max(...busy.session, ...busy.chunk) / window;
  return { saves_per_s: done / (window / 1000), busiest, p50_ms: q(0.5), p99_ms: q(0.99) };
}

/**
 * The most saves a second S session and C chunk partitions take, evenly
 * loaded: each kind's databases over its statements' time per save.
 */
function capacity(S, C, queryMs) {
  const per = { session: 0, chunk: 0 };
  for (const t of roundTrips()) per[t.kind] += t.statements * queryMs;
  return Math.min(per.session ? (S * 1000) / per.session : Infinity, per.chunk ? (C * 1000) / per.chunk : Infinity);
}

const measuredQueryMs = save.d1_ms / save.d1_queries;
const lines = [];
const trips = roundTrips();
lines.push(`Model input (${ws.name}, a save after a one-file edit, measured by bench/costs.mjs on ${costs.when.slice(0, 10)}): `
  + `${save.d1_calls} round trips, ${save.d1_queries} statements (${Object.entries(save.tables).map(([k, v]) => `${k} ${v.queries}`).join(', ')}), `
  + `${save.d1_ms.toFixed(1)} ms of database time (${measuredQueryMs.toFixed(3)} ms a statement); as round trips: `
  + trips.map((t) => `${t.kind} ${t.statements.toFixed(1)}`).join(' → ')
  + `; ${RTT_MS} ms of network per round trip; ${SESSIONS.toLocaleString('en')} sessions, ${SECONDS} s simulated (the first quarter not counted). `
  + 'Capacity is the bound of evenly loaded databases; the simulated rate is what ended in the window (an overloaded store is still filling its queues then, so it shows less).');
lines.push('');
for (const qm of QUERY_MS) {
  const queryMs = qm === 'measured' ? measuredQueryMs : Number(qm);
  for (const thinkS of THINKS) {
    const offered = thinkS > 0 ? `${Math.round(SESSIONS / thinkS).toLocaleString('en')} saves/s offered (a save every ${thinkS} s per session)` : 'every session saving back to back (the most the partitions take)';
    lines.push(`**${queryMs.toFixed(3)} ms a statement, ${offered}**`, '');
    lines.push('| session / chunk partitions | capacity (saves/s) | saves/s simulated | busiest database | save p50 (index only) | p99 |');
    lines.push('|---|---:|---:|---:|---:|---:|');
    for (const [S, C] of PARTITIONS) {
      const r = simulate({ S, C, thinkS, queryMs });
      lines.push(`| ${S} / ${C} | ${Math.round(capacity(S, C, queryMs)).toLocaleString('en')} | ${Math.round(r.saves_per_s).toLocaleString('en')} | ${(100 * r.busiest).toFixed(0)} % | ${r.p50_ms === null ? '—' : `${r.p50_ms.toFixed(0)} ms`} | ${r.p99_ms === null ? '—' : `${r.p99_ms.toFixed(0)} ms`} |`);
    }
    lines.push('');
  }
}
const md = lines.join('\n');
if (opt('md', null)) writeFileSync(opt('md'), md + '\n');
console.log(md);
