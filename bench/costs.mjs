// What each operation costs at the edge (docs/benchmarks.md, "Costs"): the
// real `pillbox` binary (release) against the local Worker under `wrangler
// dev --local` with BENCH_ROUTES=1, through the recording proxy of
// tests/e2e/proxy.mjs (requests, their wall time, their Pillbox-Timing),
// with the Worker's own counters (GET /v1/bench/costs: D1 round trips,
// statements, rows read and written and the time the database spent; R2
// class A and B operations, bytes stored, deleted and read; time waiting on
// D1 or R2) taken before and after each operation:
//   save (first), save (after a one-file edit), restore fresh (a new host,
//   no cache), restore in place (after another one-file edit), pull (a new
//   host, no cache), GET of the packet, GET of one member, the clean-up
//   (the two older packets deleted, then the scheduled run).
// Workspaces: node_modules (a copy of --node-modules DIR, e.g. a real npm
// install, plus a small src/) and rollout (a small src/ and a Codex
// rollout of --rollout-mib MiB from bench/genrollout.py, as harness state).
// Cloudflare's published prices turn the counts into dollars
// (bench/prices.mjs); docs/benchmarks.md explains the model.
//
// Usage: node bench/costs.mjs [--dir DIR] [--node-modules DIR] [--rollout-mib N]
//          [--only node_modules,rollout] [--json FILE] [--md FILE] [--write-doc]
//          [--from-json FILE] [--quick]
// --quick: this repository's node_modules and a 16 MiB rollout. Prints the
// JSON on stdout; --write-doc puts the section into docs/benchmarks.md
// ("Costs") and the JSON into docs/benchmarks-costs.json.
import { spawnSync } from 'node:child_process';
import { appendFileSync, cpSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, loadavg } from 'node:os';
import { join } from 'node:path';

import { ROOT, TOKEN, buildRelease, buildWorker, client, startEdge, PILLBOX } from '../tests/e2e/edge.mjs';
import { startProxy } from '../tests/e2e/proxy.mjs';
import { ROLLOUT_MEMBER, THREAD, placeRollout } from './rollout.mjs';
import { stateQuery } from '../tests/e2e/state.mjs';
import { PRICES, dollars } from './prices.mjs';

const args = process.argv.slice(2);
const opt = (name, fallback) => {
  const i = args.indexOf(`--${name}`);
  return i >= 0 ? args[i + 1] : fallback;
};
const quick = args.includes('--quick');
const dir = opt('dir', '/tmp/pillbox-costs-bench');
const nodeModulesFrom = opt('node-modules', quick ? ROOT : null);
const rolloutMib = Number(opt('rollout-mib', quick ? '16' : '200'));
const only = opt('only', 'node_modules,rollout').split(',');
const jsonOut = opt('json', join(dir, 'costs.json'));
const mdOut = opt('md', join(dir, 'costs.md'));
const log = (...a) => console.error('costs bench:', ...a);
const work = join(dir, 'work');

function run(cmd, argv, options = {}) {
  const r = spawnSync(cmd, argv, { cwd: ROOT, encoding: 'utf8', maxBuffer: 1 << 28, ...options });
  if (r.status !== 0) throw new Error(`${cmd} ${argv.join(' ')} failed (${r.status}):\n${r.stdout}\n${r.stderr}`);
  return r;
}

let hosts = 0;
function host(name) {
  hosts += 1;
  return { XDG_STATE_HOME: join(work, `host-${hosts}-${name}/state`), XDG_CACHE_HOME: join(work, `host-${hosts}-${name}/cache`) };
}

function env(extra) {
  const e = { ...process.env, PILLBOX_TOKEN: TOKEN, ...extra };
  for (const k of ['CODEX_HOME', 'CLAUDE_CONFIG_DIR', 'PILLBOX_REMOTE', 'PILLBOX_CACHE_MAX_BYTES']) delete e[k];
  return e;
}

let edge;
let proxy;
let api;

async function totals() {
  const r = await api.call('GET', '/v1/bench/costs');
  if (r.status !== 200) throw new Error(`GET /v1/bench/costs answered ${r.status}: is BENCH_ROUTES on?`);
  return r.json;
}

/** Numbers of a `key=value;…` header (Pillbox-Timing, Pillbox-Cost). */
function timingOf(header) {
  return Object.fromEntries((header || '').split(';').filter(Boolean).map((kv) => { const [k, v] = kv.split('='); return [k, Number(v)]; }));
}

function d1Bytes() {
  return stateQuery(edge.state, 'd1', []).bytes;
}

/**
 * Measures `work` (an async function making requests through the proxy):
 * the Worker's counters' differences, the requests, wall times.
 */
async function measure(name, work) {
  const before = await totals();
  const d1Before = d1Bytes();
  const mark = (await proxy.log()).length;
  const t0 = performance.now();
  const result = await work();
  const wall = performance.now() - t0;
  const after = await totals();
  const requests = (await proxy.log()).slice(mark).filter((e) => !e.path.startsWith('/__'));
  const counts = {};
  for (const [k, v] of Object.entries(after.isolate)) counts[k] = Math.round((v - before.isolate[k]) * 10) / 10;
  const tables = {};
  for (const [t, v] of Object.entries(after.tables)) {
    const b = before.tables[t] ?? { queries: 0, rows_read: 0, rows_written: 0, d1_ms: 0 };
    if (v.queries - b.queries) tables[t] = { queries: v.queries - b.queries, rows_read: v.rows_read - b.rows_read, rows_written: v.rows_written - b.rows_written };
  }
  const extra = result?.requests ?? [];
  // CPU time is not readable in the runtime: each request's wall time less
  // its own waits on D1 and R2 (its Pillbox-Cost, counted per request, so
  // requests in flight at once do not mix) is the stand-in, an upper bound:
  // reading the request body, streaming the answer and local workerd's own
  // overhead are in it. A scheduled run counts its whole wall time.
  const busyMs = requests.reduce((n, e) => n + Math.max(0, e.ms - (timingOf(e.cost).wait || 0)), 0)
    + extra.reduce((n, e) => n + e.ms, 0);
  const out = {
    name, wall_s: wall / 1000, requests: requests.length + extra.length, ...counts,
    busy_ms: Math.round(busyMs), d1_bytes_grown: d1Bytes() - d1Before, tables,
    r2_bytes_grown: counts.bytes_put - counts.bytes_deleted,
  };
  out.dollars_per_1000 = dollars(out) * 1000;
  log(`${name}: ${out.requests} requests, ${out.d1_queries} D1 statements (${out.rows_read} rows read, ${out.rows_written} written), `
    + `${out.r2_class_a} class A, ${out.r2_class_b} class B, ${out.bytes_put} bytes put, busy ${out.busy_ms} ms`);
  return { out, result };
}

async function pillbox(argv, hostEnv) {
  const r = spawnSync(PILLBOX, ['checkpoint', ...argv, '--quiet'], { encoding: 'utf8', env: env(hostEnv), maxBuffer: 1 << 28 });
  if (r.status !== 0) throw new Error(`pillbox checkpoint ${argv.join(' ')} failed (${r.status}):\n${r.stdout}\n${r.stderr}`);
  return JSON.parse(r.stdout);
}

function sources(path, n) {
  mkdirSync(join(path, 'src'), { recursive: true });
  for (let i = 0; i < n; i++) writeFileSync(join(path, `src/m${i}.js`), `export const m${i} = ${i};\n`.repeat(20));
}

function rolloutTurn(turn) {
  const line = (type, payload) => JSON.stringify({ timestamp: new Date(Date.UTC(2026, 10, 30, 2, 0, turn)).toISOString(), type, payload }) + '\n';
  const excerpt = readFileSync(join(ROOT, 'docs/transfer.md'), 'utf8').slice(0, 14_000);
  return line('response_item', { type: 'message', role: 'user', content: [{ type: 'input_text', text: `Turn ${turn}: go on.` }] })
    + line('response_item', { type: 'function_call_output', call_id: `call_${turn}`, output: JSON.stringify({ output: excerpt, metadata: { exit_code: 0 } }) })
    + line('response_item', { type: 'message', role: 'assistant', content: [{ type: 'output_text', text: `Turn ${turn} done.` }] });
}

function workspaces() {
  const list = [];
  if (only.includes('node_modules')) {
    if (!nodeModulesFrom) throw new Error('--node-modules DIR (a folder holding node_modules/) is needed');
    const path = join(work, 'node_modules-ws');
    log(`copying ${nodeModulesFrom}/node_modules`);
    cpSync(join(nodeModulesFrom, 'node_modules'), join(path, 'node_modules'), { recursive: true, verbatimSymlinks: true });
    sources(path, 20);
    list.push({
      name: 'node_modules', path, packFlags: [], restoreFlags: () => [], member: 'src/m0.js',
      edit: (turn) => appendFileSync(join(path, `src/m${turn % 20}.js`), `export const turn_${turn} = ${turn};\n`),
    });
  }
  if (only.includes('rollout')) {
    const path = join(work, 'rollout-ws');
    const home = join(work, 'rollout-codex-home');
    const rollout = placeRollout(dir, rolloutMib, home, log);
    sources(path, 20);
    list.push({
      name: 'rollout', path, member: 'src/m0.js',
      packFlags: ['--harness', 'codex', '--thread', THREAD, '--codex-home', home],
      restoreFlags: (into) => ['--codex-home', `${into}-codex-home`],
      // A turn appends about 16 KB to the rollout and edits one file.
      edit: (turn) => {
        appendFileSync(rollout, rolloutTurn(turn));
        appendFileSync(join(path, `src/m${turn % 20}.js`), `export const turn_${turn} = ${turn};\n`);
      },
    });
  }
  return list;
}

async function one(ws) {
  const ref = `costs/${ws.name}/latest`;
  const laptop = host(`${ws.name}-laptop`);
  const desk = host(`${ws.name}-desk`);
  const ops = [];
  const digests = [];
  const save = async () => {
    const s = await pillbox(['save', ws.path, '--remote', proxy.url, '--ref', ref, ...ws.packFlags], laptop);
    digests.push(s.digest);
    return s;
  };
  const first = await measure('save, first', save);
  ops.push(first.out);
  ws.edit(1);
  ops.push((await measure('save, one file edited', save)).out);
  const into = join(work, `${ws.name}-restored`);
  ops.push((await measure('restore, fresh (new host, no cache)',
    () => pillbox(['restore', ref, '--remote', proxy.url, '--into', into, '--no-cache', ...ws.restoreFlags(into)], desk))).out);
  ws.edit(2);
  await save();
  ops.push((await measure('restore in place (after one file edited)',
    () => pillbox(['restore', ref, '--remote', proxy.url, '--into', into, ...ws.restoreFlags(into)], desk))).out);
  const pulled = join(work, `${ws.name}.pkt`);
  ops.push((await measure('pull (new host, no cache)',
    () => pillbox(['pull', ref, '--remote', proxy.url, '-o', pulled, '--no-cache'], host(`${ws.name}-puller`)))).out);
  rmSync(pulled, { force: true });
  const last = digests[digests.length - 1];
  const via = client(proxy.url);
  ops.push((await measure('GET of the packet', async () => {
    const r = await via.call('GET', `/v1/packets/${last}`);
    if (r.status !== 200) throw new Error(`GET answered ${r.status}`);
  })).out);
  ops.push((await measure('GET of one member', async () => {
    const r = await via.call('GET', `/v1/packets/${last}/members/workspace/${ws.member}`);
    if (r.status !== 200) throw new Error(`GET of a member answered ${r.status}`);
  })).out);
  ops.push((await measure('clean-up (two packets deleted, then the scheduled run)', async () => {
    for (const d of digests.slice(0, -1)) {
      const r = await via.call('DELETE', `/v1/packets/${d}`);
      if (r.status !== 204) throw new Error(`DELETE answered ${r.status}`);
    }
    const t = performance.now();
    await edge.scheduled();
    return { requests: [{ ms: performance.now() - t }] };
  })).out);
  // What is left, for the next workspace's run to start from nothing.
  await via.call('DELETE', `/v1/refs/${ref}`);
  await via.call('DELETE', `/v1/packets/${last}`);
  await edge.scheduled();
  const manifest = await client(edge.url).call('GET', `/v1/packets/${last}/manifest`);
  return { name: ws.name, packet_bytes: first.result.size, members: first.result.members, ops, manifest_status: manifest.status };
}

async function measureAll() {
  rmSync(work, { recursive: true, force: true });
  mkdirSync(work, { recursive: true });
  run('cargo', ['build', '--quiet', '--release', '--locked', '-p', 'pillbox']);
  buildRelease();
  buildWorker();
  edge = await startEdge({ BENCH_ROUTES: '1', UPLOAD_TTL_HOURS: '0' }, { testScheduled: true });
  proxy = await startProxy(edge.url);
  api = client(edge.url);
  const results = [];
  try {
    for (const ws of workspaces()) {
      log(`${ws.name}`);
      results.push(await one(ws));
    }
  } finally {
    await proxy.stop();
    await edge.stop();
  }
  return {
    when: new Date().toISOString(), machine: { cores: cpus().length, load: loadavg().map((x) => x.toFixed(1)) },
    node_modules_from: nodeModulesFrom, rollout_mib: rolloutMib, prices: PRICES, workspaces: results,
  };
}

// ---- the section ----------------------------------------------------------

const mb = (n) => `${(n / 1e6).toFixed(1)} MB`;
const usd = (n) => (n < 0.01 ? `$${n.toFixed(4)}` : `$${n.toFixed(2)}`);

/** 1,000 checkpoints: the first save and 999 one-file saves, every packet kept a month. */
export function thousand(w) {
  const [first, edit] = w.ops;
  const ops = dollars(first) + 999 * dollars(edit);
  const r2 = first.r2_bytes_grown + 999 * edit.r2_bytes_grown;
  const d1 = first.d1_bytes_grown + 999 * edit.d1_bytes_grown;
  const storage = (r2 / 1e9) * PRICES.r2_gb_month + (d1 / 1e9) * PRICES.d1_gb_month;
  return { ops, r2, d1, storage, total: ops + storage };
}

/** Saves per second one D1 database can take (it runs one query at a time). */
export function savesPerSecond(edit) {
  const measured = edit.d1_ms > 0 ? 1000 / edit.d1_ms : null;
  return { measured, at_1ms: 1000 / edit.d1_queries, per_query_ms: edit.d1_ms / edit.d1_queries };
}

function section(data) {
  const lines = [];
  lines.push('## Costs', '');
  lines.push('What each operation costs at the edge, counted by the Worker itself (docs/worker.md, "Costs"): the `pillbox` binary');
  lines.push('(release) against `wrangler dev --local` with `BENCH_ROUTES=1`, the Worker\'s counters (`GET /v1/bench/costs`)');
  lines.push('read before and after each operation, requests counted by the recording proxy. `busy` stands in for CPU time, which');
  lines.push('the runtime does not expose: each request\'s wall time less its own waits on D1 and R2 (an upper bound: reading the');
  lines.push('request body, streaming the answer and local workerd\'s overhead are in it). Priced as CPU time it is most of a');
  lines.push('read\'s (small) price, whose figure is then an upper bound; a save\'s price is mostly the D1 rows it writes. Measured');
  lines.push(`${data.when.slice(0, 10)} on ${data.machine.cores} shared cores (load ${data.machine.load.join(' ')}), workspaces on tmpfs:`);
  lines.push(`\`node bench/costs.mjs --node-modules ${data.node_modules_from} --rollout-mib ${data.rollout_mib} --dir /tmp/c22/costs --write-doc\`.`);
  lines.push('');
  for (const w of data.workspaces) {
    lines.push(`### ${w.name} (${mb(w.packet_bytes)} packet, ${w.members.toLocaleString('en')} members)`, '');
    lines.push('| operation | requests | D1 calls / statements | rows read | rows written | D1 ms | R2 class A | R2 class B | R2 bytes stored (net) | D1 bytes grown | busy ms | $ per 1,000 |');
    lines.push('|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|');
    for (const o of w.ops) {
      lines.push(`| ${o.name} | ${o.requests} | ${o.d1_calls} / ${o.d1_queries} | ${o.rows_read.toLocaleString('en')} | ${o.rows_written.toLocaleString('en')} | ${o.d1_ms.toFixed(1)} | ${o.r2_class_a} | ${o.r2_class_b} | ${o.r2_bytes_grown.toLocaleString('en')} | ${o.d1_bytes_grown.toLocaleString('en')} | ${o.busy_ms} | ${usd(o.dollars_per_1000)} |`);
    }
    const t = thousand(w);
    const sps = savesPerSecond(w.ops[1]);
    lines.push('');
    lines.push(`- **1,000 checkpoints** (the first save, then 999 saves of a one-file edit${w.name === 'rollout' ? ' and a 16 KB turn' : ''}), every packet kept for a month:`
      + ` operations ${usd(t.ops)}, R2 ${mb(t.r2)} and D1 ${mb(t.d1)} stored = ${usd(t.storage)} a month; ${usd(t.total)} in all.`);
    lines.push(`- **Saves per second one D1 database takes** (one query at a time): the one-file save runs ${w.ops[1].d1_queries} statements in ${w.ops[1].d1_calls} round trips`
      + ` taking ${w.ops[1].d1_ms.toFixed(1)} ms of database time here (${sps.per_query_ms.toFixed(2)} ms a statement): ${sps.measured ? Math.round(sps.measured) : '—'} saves/s;`
      + ` at Cloudflare's guide of 1 ms a query, ${Math.round(sps.at_1ms)} saves/s.`);
    const tables = Object.entries(w.ops[1].tables).map(([k, v]) => `${k} ${v.queries}`).join(', ');
    lines.push(`- The one-file save's statements by table: ${tables}.`);
    lines.push('');
  }
  lines.push('Prices (Workers Paid, marginal, without the included allowances or the $5 a month): requests $0.30 a million,');
  lines.push('CPU $0.02 a million ms (developers.cloudflare.com/workers/platform/pricing); D1 rows read $0.001 and rows written $1.00');
  lines.push('a million, storage $0.75 a GB-month (developers.cloudflare.com/d1/platform/pricing); R2 class A $4.50 and class B $0.36 a');
  lines.push('million, storage $0.015 a GB-month, deletes free (developers.cloudflare.com/r2/pricing). Limits that bound the design:');
  lines.push('a D1 database holds at most 10 GB and a Worker invocation makes at most 1,000 D1 queries (developers.cloudflare.com/d1/platform/limits);');
  lines.push('each D1 database is single-threaded and runs its queries one at a time, so its throughput is the inverse of its');
  lines.push('queries\' duration ("If your average query takes 1 ms, you can run approximately 1,000 queries per second", the same page).');
  lines.push('The local D1 is the same SQLite; its `meta.duration` is the statement\'s time in the database, without the network,');
  lines.push('in whole milliseconds here (a save of a few statements may read 0): a small save\'s database time is coarse.');
  lines.push('');
  return lines.join('\n');
}

const data = opt('from-json', null) ? JSON.parse(readFileSync(opt('from-json'), 'utf8')) : await measureAll();
mkdirSync(dir, { recursive: true });
writeFileSync(jsonOut, JSON.stringify(data, null, 2) + '\n');
const md = section(data);
writeFileSync(mdOut, md);
if (args.includes('--write-doc')) {
  const doc = join(ROOT, 'docs/benchmarks.md');
  const text = readFileSync(doc, 'utf8');
  const start = text.indexOf('\n## Costs\n');
  let next = start >= 0 ? text.indexOf('\n## ', start + 1) : -1;
  const updated = start < 0 ? `${text.trimEnd()}\n\n${md}` : `${text.slice(0, start + 1)}${md}${next >= 0 ? text.slice(next) : ''}`;
  writeFileSync(doc, updated);
  writeFileSync(join(ROOT, 'docs/benchmarks-costs.json'), JSON.stringify(data, null, 2) + '\n');
}
console.log(JSON.stringify(data, null, 2));
