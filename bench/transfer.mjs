// Transfer benchmarks (docs/benchmarks.md, "Transfer"): the real `pillbox`
// binary (release build) against the local Worker under `wrangler dev
// --local` with BENCH_ROUTES=1, on three workspaces built from real data:
//   node_modules  `npm install --no-save --ignore-scripts` of next, jest,
//                 webpack, eslint, @babel/core, react, react-dom, and a
//                 small src/ (or --node-modules DIR, copied with hard links);
//   repo          `git clone --no-local` of this checkout: sources, .git,
//                 real history and packfiles (packed with --secrets
//                 exclude: the test corpus holds fake credentials);
//   rollout       a small src/ and a Codex rollout of --rollout-mib MiB
//                 from bench/genrollout.py, packed as harness state.
// For each, in one run and with the store emptied in between:
//   1. the first push (`push --ref`) against the baseline: the same packet
//      bytes through the same Worker into R2 unverified (POST
//      /v1/bench/baseline, parts of 32 MiB);
//   2. the second push after a one-file edit (a turn appended to the rollout);
//   3. --checkpoints successive `save --ref` with one or two files changed
//      per turn (and a turn appended to the rollout): R2 bytes and D1 rows;
//   4. a pull of the second packet on a fresh host with the first packet
//      file as --base, compared byte for byte;
//   5. the edge's verification throughput: the first packet pushed as /2
//      by the simple client of tests/e2e/wire.mjs (what bench/edge.mjs
//      measures), against the same baseline;
//   6. save and restore against pack + push and pull + unpack, each for one
//      turn, the restoring host keeping its chunk cache.
// Every request goes through the recording proxy of tests/e2e/proxy.mjs
// (the baseline's too), which keeps each answer's Pillbox-Timing header:
// where the Worker's time went, per command.
//
// Usage: node bench/transfer.mjs [--quick] [--dir DIR] [--node-modules DIR]
//          [--rollout-mib N] [--checkpoints N] [--only node_modules,repo,rollout]
//          [--json FILE] [--md FILE] [--write-doc] [--from-json FILE]
// Prints one JSON object on stdout (progress on stderr); writes it to
// --json (default DIR/transfer.json) and the section for docs/benchmarks.md
// to --md (DIR/transfer.md). --write-doc also puts that section into
// docs/benchmarks.md (replacing its "Transfer" section) and the JSON into
// docs/benchmarks-transfer.json; --from-json FILE makes them from a run
// measured earlier instead of measuring.
import { spawnSync } from 'node:child_process';
import { appendFileSync, existsSync, mkdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, release, totalmem } from 'node:os';
import { join } from 'node:path';

import { ROOT, TARGET, TOKEN, buildWorker, client, startEdge } from '../tests/e2e/edge.mjs';
import { startProxy } from '../tests/e2e/proxy.mjs';
import { ROLLOUT_MEMBER, THREAD, placeRollout } from './rollout.mjs';
import { pushPacket } from '../tests/e2e/wire.mjs';

const args = process.argv.slice(2);
const opt = (name, fallback) => {
  const i = args.indexOf(`--${name}`);
  return i >= 0 ? args[i + 1] : fallback;
};
const quick = args.includes('--quick');
const MIB = 1 << 20;
const PART = 32 * MIB;
// worker/src/compact.rs: a packet that would use this many small packs has them merged.
const MERGE_AT = 8;
const dir = opt('dir', '/tmp/pillbox-transfer-bench');
const nodeModulesFrom = opt('node-modules', null);
const rolloutMib = Number(opt('rollout-mib', quick ? '16' : '200'));
const checkpoints = Number(opt('checkpoints', quick ? '3' : '20'));
const only = opt('only', 'node_modules,repo,rollout').split(',');
const jsonOut = opt('json', join(dir, quick ? 'transfer-quick.json' : 'transfer.json'));
const mdOut = opt('md', join(dir, quick ? 'transfer-quick.md' : 'transfer.md'));
const PILLBOX = join(TARGET, 'release/pillbox');
const FIXTURES = join(TARGET, 'release/examples/worker_fixtures');
const NPM_PACKAGES = ['next', 'jest', 'webpack', 'eslint', '@babel/core', 'react', 'react-dom'];
// --quick: those of these packages that the node_modules holds (those of
// this repository's own node_modules among them).
const QUICK_PACKAGES = ['react', 'react-dom', 'scheduler', 'ajv', 'semver', 'yaml', 'ws'];
const log = (...a) => console.error('transfer bench:', ...a);
const work = join(dir, quick ? 'work-quick' : 'work');

function run(cmd, argv, options = {}) {
  const r = spawnSync(cmd, argv, { cwd: ROOT, encoding: 'utf8', maxBuffer: 1 << 28, ...options });
  if (r.status !== 0) throw new Error(`${cmd} ${argv.join(' ')} failed (${r.status}):\n${r.stdout}\n${r.stderr}`);
  return r;
}

// ---- the local state ------------------------------------------------------

// Reads the local D1 and R2 state that the running server writes (SQLite
// files under the state directory), read-only: row counts of every table,
// R2 objects and bytes by key prefix, and the answer to one query.
const STATE_READER = `
import glob, json, sqlite3, sys
state, sql = sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else None
out = {"d1": {}, "r2": {}, "rows": None}
def tables(db):
    return [t for (t,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
for f in sorted(glob.glob(state + "/v3/d1/**/*.sqlite", recursive=True)):
    db = sqlite3.connect(f"file:{f}?mode=ro", uri=True)
    names = tables(db)
    if "packets" not in names:
        continue
    for t in names:
        if t.startswith(("sqlite_", "_cf_")) or t == "d1_migrations":
            continue
        out["d1"][t] = db.execute(f'SELECT count(*) FROM "{t}"').fetchone()[0]
    if sql:
        db.row_factory = sqlite3.Row
        out["rows"] = [dict(r) for r in db.execute(sql)]
for f in sorted(glob.glob(state + "/v3/r2/**/*.sqlite", recursive=True)):
    db = sqlite3.connect(f"file:{f}?mode=ro", uri=True)
    if "_mf_objects" not in tables(db):
        continue
    for key, size in db.execute("SELECT key, size FROM _mf_objects"):
        p = out["r2"].setdefault(key.split("/")[0], {"objects": 0, "bytes": 0})
        p["objects"] += 1
        p["bytes"] += size
print(json.dumps(out))
`;

function readState(state, sql) {
  for (let attempt = 0; ; attempt++) {
    const r = spawnSync('python3', ['-c', STATE_READER, state, ...(sql ? [sql] : [])], { encoding: 'utf8', maxBuffer: 1 << 26 });
    if (r.status === 0) return JSON.parse(r.stdout);
    // A busy database (the server writing) is asked again.
    if (attempt >= 5) throw new Error(`reading the local state failed: ${r.stderr}`);
    Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 300);
  }
}

/** R2 bytes and objects, the benchmark baseline's own objects (bench/) left out. */
function r2Stored(r2) {
  let bytes = 0;
  let objects = 0;
  const by = {};
  for (const [prefix, v] of Object.entries(r2)) {
    if (prefix === 'bench') continue;
    bytes += v.bytes;
    objects += v.objects;
    by[prefix] = v;
  }
  return { bytes, objects, by_prefix: by };
}

const sum = (o) => Object.values(o).reduce((n, v) => n + v, 0);

// ---- the commands ---------------------------------------------------------

let hosts = 0;
/** A machine: its own state and cache folders. */
function host(name) {
  hosts += 1;
  return { XDG_STATE_HOME: join(work, `host-${hosts}-${name}/state`), XDG_CACHE_HOME: join(work, `host-${hosts}-${name}/cache`) };
}

function env(extra) {
  const e = { ...process.env, PILLBOX_TOKEN: TOKEN, ...extra };
  for (const k of ['CODEX_HOME', 'CLAUDE_CONFIG_DIR', 'PILLBOX_REMOTE', 'PILLBOX_CACHE_MAX_BYTES']) delete e[k];
  return e;
}

let proxy;
/** The proxy's log, asked on a fresh connection (no keep-alive race with its idle timeout). */
async function proxyLog() {
  for (let attempt = 0; ; attempt++) {
    try {
      const r = await client(proxy.url).call('GET', '/__proxy/log', { auth: false });
      return r.json;
    } catch (e) {
      if (attempt >= 2) throw e;
    }
  }
}
/**
 * Runs `pillbox checkpoint ARGS --quiet`; returns its JSON, its wall time
 * and the requests it made (from the proxy's log).
 */
async function pillbox(argv, extraEnv = {}) {
  const mark = (await proxyLog()).length;
  const t = performance.timeOrigin + performance.now();
  const r = spawnSync(PILLBOX, ['checkpoint', ...argv, '--quiet'], { encoding: 'utf8', env: env(extraEnv), maxBuffer: 1 << 28 });
  const end = performance.timeOrigin + performance.now();
  if (r.status !== 0) throw new Error(`pillbox checkpoint ${argv.join(' ')} failed (${r.status}):\n${r.stdout}\n${r.stderr}`);
  const requests = (await proxyLog()).slice(mark);
  return { json: JSON.parse(r.stdout), wall_s: (end - t) / 1000, requests, phases: phases(t, end, requests) };
}

/**
 * Where a command's wall time went, from the requests' times: before the
 * first request (reading, hashing), in requests, between requests (the
 * client's own work, and waits), after the last (writing, renaming).
 */
function phases(start, end, requests) {
  if (!requests.length) return { before_first_s: (end - start) / 1000, requests_s: 0, between_s: 0, longest_gap_s: 0, longest_gap_before: null, after_last_s: 0 };
  const sorted = [...requests].sort((x, y) => x.start - y.start);
  let between = 0;
  let longest = 0;
  let before = null;
  let busyUntil = sorted[0].start;
  let inRequests = 0;
  for (const e of sorted) {
    const gap = e.start - busyUntil;
    if (gap > 0) {
      between += gap;
      if (gap > longest) { longest = gap; before = routeOf(e); }
    }
    inRequests += Math.max(0, e.end - Math.max(e.start, busyUntil));
    busyUntil = Math.max(busyUntil, e.end);
  }
  const r3 = (x) => Math.round(x) / 1000;
  return {
    before_first_s: r3(sorted[0].start - start), requests_s: r3(inRequests), between_s: r3(between),
    longest_gap_s: r3(longest), longest_gap_before: before, after_last_s: r3(end - busyUntil),
  };
}

/** A route with its ids and digests replaced: `PUT /v1/pushes/{}/parts/{n}`. */
const routeOf = (e) => `${e.method} ${e.path.replace(/sha256:[0-9a-f]{64}|[0-9a-f]{32,64}/g, '{}').replace(/\/parts\/\d+/, '/parts/{n}')}`;

/** The Worker's timers summed over requests, and the requests by route. */
function whereTimeGoes(requests) {
  const worker = {};
  const routes = {};
  for (const e of requests) {
    for (const part of (e.timing ?? '').split(';').filter(Boolean)) {
      const [k, v] = part.split('=');
      worker[k] = k === 'wasm_memory' ? Math.max(worker[k] ?? 0, Number(v)) : (worker[k] ?? 0) + Number(v);
    }
    const r = (routes[routeOf(e)] ??= { requests: 0, ms: 0, body_bytes: 0, worker_ms: {} });
    r.requests += 1;
    r.ms += e.ms;
    r.body_bytes += e.body_bytes;
    for (const part of (e.timing ?? '').split(';').filter(Boolean)) {
      const [k, v] = part.split('=');
      if (k !== 'wasm_memory') r.worker_ms[k] = (r.worker_ms[k] ?? 0) + Number(v);
    }
  }
  for (const k of Object.keys(worker)) if (k !== 'wasm_memory') worker[k] = Math.round(worker[k]);
  for (const r of Object.values(routes)) {
    r.ms = Math.round(r.ms);
    for (const k of Object.keys(r.worker_ms)) r.worker_ms[k] = Math.round(r.worker_ms[k]);
  }
  return { worker_ms: worker, routes };
}

const sleep = (ms) => new Promise((ok) => setTimeout(ok, ms));

// ---- the workspaces -------------------------------------------------------

function write(path, text) {
  mkdirSync(join(path, '..'), { recursive: true });
  writeFileSync(path, text);
}

/** A small src/ of `n` JavaScript modules (about 2 KB each). */
function sources(root, n) {
  for (let i = 0; i < n; i++) {
    let body = `// Module ${i}.\nimport { helper } from './m${(i + 1) % n}.js';\n\n`;
    for (let k = 0; k < 40; k++) body += `export const value_${i}_${k} = (x) => helper(x * ${(i * 7919 + k * 104729) % 65521}) + ${k};\n`;
    write(join(root, `src/m${i}.js`), body);
  }
  write(join(root, 'package.json'), JSON.stringify({ name: 'bench-app', private: true, type: 'module' }, null, 2) + '\n');
}

/** A node_modules folder: --node-modules, else installed once under DIR/npm. */
function nodeModules() {
  if (nodeModulesFrom) return nodeModulesFrom;
  const project = join(dir, 'npm');
  const nm = join(project, 'node_modules');
  if (!existsSync(join(project, 'installed'))) {
    log(`npm install ${NPM_PACKAGES.join(' ')} into ${project}`);
    rmSync(project, { recursive: true, force: true });
    mkdirSync(project, { recursive: true });
    writeFileSync(join(project, 'package.json'), '{"name":"bench-npm","private":true}\n');
    run('npm', ['install', '--no-save', '--ignore-scripts', '--no-audit', '--no-fund', ...NPM_PACKAGES], { cwd: project, stdio: ['ignore', 'ignore', 'inherit'] });
    writeFileSync(join(project, 'installed'), '');
  }
  return nm;
}

/** Copies a tree, with hard links when the file system allows (nothing edits it). */
function copyTree(from, to) {
  mkdirSync(join(to, '..'), { recursive: true });
  if (spawnSync('cp', ['-al', from, to]).status !== 0) {
    rmSync(to, { recursive: true, force: true });
    run('cp', ['-a', from, to]);
  }
}

/** One Codex turn (about 16 KB): the lines a rollout gains when a turn ends. */
function rolloutTurn(turn) {
  const stamp = `2026-12-01T${String(10 + Math.floor(turn / 60) % 14).padStart(2, '0')}:${String(turn % 60).padStart(2, '0')}:00.000Z`;
  const line = (type, payload) => JSON.stringify({ timestamp: stamp, type, payload }) + '\n';
  const excerpt = readFileSync(join(ROOT, 'docs/transfer.md'), 'utf8').slice((turn * 997) % 4000, (turn * 997) % 4000 + 12000);
  const call = `call_bench_${turn}`;
  return line('response_item', { type: 'message', role: 'user', content: [{ type: 'input_text', text: `Turn ${turn}: go on.` }] })
    + line('response_item', { type: 'function_call', name: 'shell', call_id: call, arguments: JSON.stringify({ command: ['bash', '-lc', 'sed -n 1,200p docs/transfer.md'] }) })
    + line('response_item', { type: 'function_call_output', call_id: call, output: JSON.stringify({ output: excerpt, metadata: { exit_code: 0 } }) })
    + line('response_item', { type: 'message', role: 'assistant', content: [{ type: 'output_text', text: `Turn ${turn} done.` }] });
}

/**
 * The workspaces: { name, path, packFlags, restoreFlags(home), edit(turn, files) }.
 * `edit` changes `files` files (and appends a turn to the rollout).
 */
function workspaces() {
  const list = [];
  if (only.includes('node_modules')) {
    const path = join(work, 'node_modules-ws');
    const nm = nodeModules();
    if (quick) {
      for (const p of QUICK_PACKAGES) if (existsSync(join(nm, p))) copyTree(join(nm, p), join(path, 'node_modules', p));
    } else {
      copyTree(nm, join(path, 'node_modules'));
    }
    sources(path, 20);
    list.push({
      name: 'node_modules', path, packFlags: [], restoreFlags: () => [],
      edit: (turn, files) => {
        for (let f = 0; f < files; f++) appendFileSync(join(path, `src/m${(turn * 3 + f) % 20}.js`), `export const turn_${turn}_${f} = ${turn};\n`);
      },
    });
  }
  if (only.includes('repo')) {
    const path = join(work, 'repo-ws');
    run('git', ['clone', '--quiet', '--no-local', ROOT, path]);
    const files = run('git', ['ls-files', '*.rs'], { cwd: path }).stdout.trim().split('\n').sort();
    list.push({
      name: 'repo', path, packFlags: ['--secrets', 'exclude'], restoreFlags: () => [],
      edit: (turn, n) => {
        for (let f = 0; f < n; f++) appendFileSync(join(path, files[(turn * 5 + f) % files.length]), `// turn ${turn}\n`);
      },
    });
  }
  if (only.includes('rollout')) {
    const path = join(work, 'rollout-ws');
    const home = join(work, 'rollout-codex-home');
    const rollout = placeRollout(dir, rolloutMib, home, log);
    sources(path, 20);
    list.push({
      name: 'rollout', path, rolloutMember: ROLLOUT_MEMBER,
      packFlags: ['--harness', 'codex', '--thread', THREAD, '--codex-home', home],
      restoreFlags: (into) => ['--codex-home', `${into}-codex-home`],
      edit: (turn, files) => {
        appendFileSync(rollout, rolloutTurn(turn));
        for (let f = 0; f < files; f++) appendFileSync(join(path, `src/m${(turn * 3 + f) % 20}.js`), `export const turn_${turn}_${f} = ${turn};\n`);
      },
    });
  }
  return list;
}

// ---- one workspace --------------------------------------------------------

let edge;
let api;

async function baseline(bytes) {
  const t = performance.now();
  const mark = (await proxyLog()).length;
  for (let at = 0; at < bytes.length; at += PART) {
    const r = await api.call('POST', '/v1/bench/baseline', { body: bytes.subarray(at, Math.min(at + PART, bytes.length)) });
    if (r.status >= 300) throw new Error(`baseline: ${r.status} ${r.bytes.toString('utf8').slice(0, 300)}`);
  }
  const wall = (performance.now() - t) / 1000;
  return { wall_s: wall, mb_per_s: bytes.length / 1e6 / wall, ...whereTimeGoes((await proxyLog()).slice(mark)) };
}

/** Deletes the refs and packets, runs the clean-up; the store must then hold nothing. */
async function emptyStore(refs, digests) {
  for (const [name, digest] of refs) {
    const r = await api.call('DELETE', `/v1/refs/${name}`, { headers: { 'if-match': `"${digest}"` } });
    if (r.status >= 300 && r.status !== 404) throw new Error(`DELETE ref ${name}: ${r.status} ${r.bytes}`);
  }
  for (const d of new Set(digests)) {
    const r = await api.call('DELETE', `/v1/packets/${d}`);
    if (r.status >= 300 && r.status !== 404) throw new Error(`DELETE ${d}: ${r.status} ${r.bytes}`);
  }
  await edge.scheduled();
  const s = readState(edge.state);
  if (s.d1.packs !== 0 || s.d1.chunks !== 0 || s.d1.packets !== 0) throw new Error(`the store is not empty: ${JSON.stringify(s)}`);
  return s;
}

async function manifestOf(digest) {
  const r = await api.call('GET', `/v1/packets/${digest}/manifest`);
  if (r.status !== 200) throw new Error(`manifest of ${digest}: ${r.status}`);
  return { bytes: r.bytes.length, json: JSON.parse(r.bytes.toString('utf8')) };
}

async function bench(ws) {
  const out = { name: ws.name };
  const laptop = host(`${ws.name}-laptop`);
  const ref = `bench/${ws.name}/latest`;
  const packets = [];
  const pkt = (n) => join(work, `${ws.name}-${n}.pkt`);
  const pack = async (file) => {
    const r = await pillbox(['pack', ws.path, '-o', file, ...ws.packFlags]);
    return { ...r.json, wall_s: r.wall_s };
  };

  // The first packet, its baseline, and the edge's own throughput (5).
  log(`${ws.name}: pack`);
  const p0 = await pack(pkt(0));
  const bytes0 = readFileSync(pkt(0));
  const described = run(FIXTURES, ['describe', pkt(0)], { maxBuffer: 1 << 30 });
  const entry = JSON.parse(described.stdout);
  out.packet = { bytes: p0.size, members: p0.members, files: p0.totals.files, file_bytes: p0.totals.bytes, manifest_bytes: entry.manifest_len, pack_s: p0.wall_s };
  log(`${ws.name}: ${p0.size} bytes, ${p0.members} members; baseline`);
  out.baseline = await baseline(bytes0);
  log(`${ws.name}: baseline ${out.baseline.wall_s.toFixed(1)} s; the edge push (node client)`);
  {
    const mark = (await proxyLog()).length;
    const t = performance.now();
    const r = await pushPacket(api, entry, bytes0, { partBytes: PART });
    const wall = (performance.now() - t) / 1000;
    if (r.complete?.status !== 201) throw new Error(`the edge push: ${JSON.stringify((r.complete ?? r.create).json)}`);
    out.edge_push = { wall_s: wall, mb_per_s: p0.size / 1e6 / wall, sent: r.sent, ...whereTimeGoes((await proxyLog()).slice(mark)) };
    out.edge_push.ratio_to_baseline = out.edge_push.mb_per_s / out.baseline.mb_per_s;
  }
  const empty = await emptyStore([], [p0.digest]);

  // 1. The first push.
  log(`${ws.name}: first push`);
  const first = await pillbox(['push', pkt(0), '--remote', proxy.url, '--ref', ref], laptop);
  packets.push(p0.digest);
  // The packs the first packet uses: its large ones stay in every later
  // packet; small ones are merged (worker/src/compact.rs, MERGE_AT).
  const firstPacks = readState(edge.state, `SELECT count(*) AS n FROM pack_users WHERE owner = '${p0.digest}'`).rows[0].n;
  out.first_push = {
    wall_s: first.wall_s, upload_s: first.json.upload_seconds, bytes_sent: first.json.bytes_sent,
    wire_ratio: first.json.bytes_sent / p0.size, ratio_to_baseline: first.wall_s / out.baseline.wall_s,
    delta: first.json.delta, phases: first.phases, ...whereTimeGoes(first.requests),
  };

  // 2. The second push after a one-file edit; 4. its pull with the first as --base.
  log(`${ws.name}: second push`);
  ws.edit(0, 1);
  const p1 = await pack(pkt(1));
  const second = await pillbox(['push', pkt(1), '--remote', proxy.url, '--ref', ref], laptop);
  packets.push(p1.digest);
  const m1 = (await manifestOf(p1.digest)).bytes;
  const bound1 = 0.01 * p1.size + m1;
  out.second_push = {
    wall_s: second.wall_s, upload_s: second.json.upload_seconds, bytes_sent: second.json.bytes_sent, packet_bytes: p1.size,
    manifest_bytes: m1, bound_bytes: Math.round(bound1), delta: second.json.delta, phases: second.phases, ...whereTimeGoes(second.requests),
  };
  log(`${ws.name}: pull with --base`);
  const pulled = join(work, `${ws.name}-1-pulled.pkt`);
  const pull = await pillbox(['pull', p1.digest, '--remote', proxy.url, '-o', pulled, '--base', pkt(0), '--no-cache'], host(`${ws.name}-puller`));
  out.pull = {
    wall_s: pull.wall_s, bytes_received: pull.json.bytes_received, bound_bytes: Math.round(bound1),
    identical: spawnSync('cmp', ['-s', pulled, pkt(1)]).status === 0, delta: pull.json.delta, phases: pull.phases, ...whereTimeGoes(pull.requests),
  };
  rmSync(pulled);

  // 3. Successive checkpoints.
  log(`${ws.name}: ${checkpoints} checkpoints`);
  const turns = [];
  let rows = readState(edge.state).d1;
  for (let turn = 1; turn <= checkpoints; turn++) {
    ws.edit(turn, turn % 2 ? 1 : 2);
    const s = await pillbox(['save', ws.path, '--remote', proxy.url, '--ref', ref, ...ws.packFlags], laptop);
    packets.push(s.json.digest);
    const now = readState(edge.state).d1;
    const added = Object.fromEntries(Object.keys(now).map((t) => [t, now[t] - (rows[t] ?? 0)]));
    rows = now;
    turns.push({ wall_s: s.wall_s, bytes_sent: s.json.bytes_sent, chunks_sent: s.json.delta?.chunks_sent, rows_added: added, phases: s.phases, routes: whereTimeGoes(s.requests).routes });
  }
  const state = readState(edge.state);
  const stored = r2Stored(state.r2);
  // Unique content: every distinct body once, the rollout (only ever
  // appended to) once at its final size, and every packet's manifest.
  const bodies = new Map();
  const appendOnly = new Map();
  let manifests = 0;
  for (const d of packets) {
    const m = await manifestOf(d);
    manifests += m.bytes;
    for (const member of m.json.members) {
      if (member.type !== 'file' || !member.size) continue;
      if (member.path === ws.rolloutMember) appendOnly.set(member.path, Math.max(appendOnly.get(member.path) ?? 0, member.size));
      else bodies.set(member.sha256, member.size);
    }
  }
  const bodyBytes = sum(Object.fromEntries(bodies)) + sum(Object.fromEntries(appendOnly));
  const chunksSent = [first, second].reduce((n, r) => n + (r.json.delta?.chunks_sent ?? 0), 0) + turns.reduce((n, t) => n + (t.chunks_sent ?? 0), 0);
  const perPacket = turns.map((t) => sum(t.rows_added) - (t.rows_added.chunks ?? 0));
  out.checkpoints = {
    count: checkpoints, packets: packets.length,
    save_wall_s: { min: Math.min(...turns.map((t) => t.wall_s)), median: [...turns.map((t) => t.wall_s)].sort((x, y) => x - y)[Math.floor((turns.length - 1) / 2)], max: Math.max(...turns.map((t) => t.wall_s)) },
    save_bytes_sent: { min: Math.min(...turns.map((t) => t.bytes_sent)), max: Math.max(...turns.map((t) => t.bytes_sent)), total: sum(turns.map((t) => t.bytes_sent)) },
    r2_bytes: stored.bytes, r2_objects: stored.objects, r2_by_prefix: stored.by_prefix, r2_before: r2Stored(empty.r2).bytes,
    unique_body_bytes: bodyBytes, manifest_bytes: manifests, unique_content_bytes: bodyBytes + manifests,
    r2_ratio: stored.bytes / (bodyBytes + manifests), r2_ratio_bodies_only: stored.bytes / bodyBytes,
    d1_rows: state.d1, d1_rows_total: sum(state.d1), unique_bodies: bodies.size + appendOnly.size, chunks_sent: chunksSent,
    // A packet row, its push's pack and a merged one, and the packs it
    // uses: the first packet's plus fewer than MERGE_AT small ones.
    d1_rows_per_packet: { min: Math.min(...perPacket), max: Math.max(...perPacket), bound: 3 + firstPacks + MERGE_AT - 1, first_packet_packs: firstPacks },
    turns,
  };
  out.checkpoints.packs_bytes = readState(edge.state, 'SELECT coalesce(sum(size), 0) AS bytes FROM packs').rows[0].bytes;

  // 6. save and restore against pack + push and pull + unpack, one turn each.
  log(`${ws.name}: save and restore against the four commands`);
  const desk = host(`${ws.name}-desk`);
  const warm = join(work, `${ws.name}-desk-0`);
  const first_restore = await pillbox(['restore', ref, '--remote', proxy.url, '--into', warm, ...ws.restoreFlags(warm)], desk);
  ws.edit(checkpoints + 1, 1);
  const a = await pack(pkt('a'));
  const pushA = await pillbox(['push', pkt('a'), '--remote', proxy.url, '--ref', ref], laptop);
  packets.push(a.digest);
  const pulledA = join(work, `${ws.name}-a-pulled.pkt`);
  const pullA = await pillbox(['pull', ref, '--remote', proxy.url, '-o', pulledA], desk);
  const intoA = join(work, `${ws.name}-desk-a`);
  const unpackA = await pillbox(['unpack', pulledA, '--digest', a.digest, '--into', intoA, ...ws.restoreFlags(intoA)]);
  ws.edit(checkpoints + 2, 1);
  const save = await pillbox(['save', ws.path, '--remote', proxy.url, '--ref', ref, ...ws.packFlags], laptop);
  packets.push(save.json.digest);
  const intoB = join(work, `${ws.name}-desk-b`);
  const restore = await pillbox(['restore', ref, '--remote', proxy.url, '--into', intoB, ...ws.restoreFlags(intoB)], desk);
  if (restore.json.digest !== save.json.digest) throw new Error('the restore did not restore the saved packet');
  out.save_restore = {
    first_restore_s: first_restore.wall_s,
    pack_s: a.wall_s, push_s: pushA.wall_s, pull_s: pullA.wall_s, unpack_s: unpackA.wall_s,
    save_s: save.wall_s, restore_s: restore.wall_s,
    save_ratio: save.wall_s / (a.wall_s + pushA.wall_s), restore_ratio: restore.wall_s / (pullA.wall_s + unpackA.wall_s),
    push_bytes_sent: pushA.json.bytes_sent, save_bytes_sent: save.json.bytes_sent,
    pull_bytes_received: pullA.json.bytes_received, restore_bytes_received: restore.json.bytes_received,
  };
  for (const d of [warm, intoA, `${intoA}-codex-home`, intoB, `${intoB}-codex-home`, `${warm}-codex-home`, pulledA]) rmSync(d, { recursive: true, force: true });

  await sleep(1000);
  await emptyStore([[ref, save.json.digest]], packets);
  for (const n of [0, 1, 'a']) rmSync(pkt(n), { force: true });
  return out;
}

// ---- targets and the table ------------------------------------------------

const mb = (n) => `${(n / 1e6).toFixed(n < 1e7 ? 2 : 1)} MB`;
const kb = (n) => (n < 1e6 ? `${(n / 1e3).toFixed(1)} kB` : mb(n));
const s = (x) => `${x.toFixed(2)} s`;
const pass = (ok) => (ok ? 'pass' : '**fail**');

/** [figure, target, [cell per workspace], [met per workspace | null]]. */
function rows(list) {
  const each = (f) => list.map(f);
  return [
    ['packet: bytes, members (files)', '', each((w) => `${mb(w.packet.bytes)}, ${w.packet.members} (${w.packet.files})`), null],
    ['packet: manifest (packet.json)', '', each((w) => kb(w.packet.manifest_bytes)), null],
    ['baseline: the packet into R2 unverified', '', each((w) => `${s(w.baseline.wall_s)} (${w.baseline.mb_per_s.toFixed(1)} MB/s)`), null],
    ['1. first push: wire bytes / packet', 'reported', each((w) => `${mb(w.first_push.bytes_sent)} / ${mb(w.packet.bytes)} = ${w.first_push.wire_ratio.toFixed(3)}`), null],
    ['1. first push: wall time / baseline', 'reported', each((w) => `${s(w.first_push.wall_s)} / ${s(w.baseline.wall_s)} = ${w.first_push.ratio_to_baseline.toFixed(2)}×`), null],
    ['2. second push (one file edited): wire bytes', '≤ 1% of the packet + manifest', each((w) => `${kb(w.second_push.bytes_sent)} ≤ ${kb(w.second_push.bound_bytes)}`), each((w) => w.second_push.bytes_sent <= w.second_push.bound_bytes)],
    ['2. second push: wall time', '≤ 2 s', each((w) => s(w.second_push.wall_s)), each((w) => w.second_push.wall_s <= 2)],
    [`3. ${list[0]?.checkpoints.count} saves: R2 bytes / unique content (bodies + manifests)`, '≤ 1.2×', each((w) => `${mb(w.checkpoints.r2_bytes)} / ${mb(w.checkpoints.unique_content_bytes)} = ${w.checkpoints.r2_ratio.toFixed(3)}×`), each((w) => w.checkpoints.r2_ratio <= 1.2)],
    ['3. R2 bytes / unique body bytes (manifests not counted)', 'reported', each((w) => `${w.checkpoints.r2_ratio_bodies_only.toFixed(3)}×`), null],
    ['3. D1 rows: all tables / chunk rows / unique bodies', 'chunk rows = chunks sent', each((w) => `${w.checkpoints.d1_rows_total} / ${w.checkpoints.d1_rows.chunks} / ${w.checkpoints.unique_bodies} (chunks sent: ${w.checkpoints.chunks_sent})`), each((w) => w.checkpoints.d1_rows.chunks <= w.checkpoints.chunks_sent)],
    ['3. D1 rows added per save besides chunk rows (min–max)', '≤ a constant per packet: 3 + the first packet\'s packs + 7', each((w) => `${w.checkpoints.d1_rows_per_packet.min}–${w.checkpoints.d1_rows_per_packet.max} ≤ ${w.checkpoints.d1_rows_per_packet.bound}`), each((w) => w.checkpoints.d1_rows_per_packet.max <= w.checkpoints.d1_rows_per_packet.bound)],
    ['3. save: wall time (median, max) and wire bytes (max)', 'reported', each((w) => `${s(w.checkpoints.save_wall_s.median)}, ${s(w.checkpoints.save_wall_s.max)}; ${kb(w.checkpoints.save_bytes_sent.max)}`), null],
    ['4. pull with the first packet as --base: wire bytes', '≤ 1% of the packet + manifest', each((w) => `${kb(w.pull.bytes_received)} ≤ ${kb(w.pull.bound_bytes)}`), each((w) => w.pull.bytes_received <= w.pull.bound_bytes)],
    ['4. pulled packet identical (cmp)', 'identical', each((w) => (w.pull.identical ? 'identical' : 'differs')), each((w) => w.pull.identical)],
    ['5. edge verification throughput / baseline', '≥ 0.5', each((w) => `${w.edge_push.mb_per_s.toFixed(1)} / ${w.baseline.mb_per_s.toFixed(1)} MB/s = ${w.edge_push.ratio_to_baseline.toFixed(2)}`), each((w) => w.edge_push.ratio_to_baseline >= 0.5)],
    ['6. save / (pack + push), one turn', 'reported', each((w) => `${s(w.save_restore.save_s)} / (${s(w.save_restore.pack_s)} + ${s(w.save_restore.push_s)}) = ${w.save_restore.save_ratio.toFixed(2)}×`), null],
    ['6. restore / (pull + unpack), one turn, cache kept', 'reported', each((w) => `${s(w.save_restore.restore_s)} / (${s(w.save_restore.pull_s)} + ${s(w.save_restore.unpack_s)}) = ${w.save_restore.restore_ratio.toFixed(2)}×`), null],
    ['6. first restore on a new host (everything fetched)', 'reported', each((w) => s(w.save_restore.first_restore_s)), null],
  ];
}

function table(results) {
  const list = results.workspaces;
  const head = `| figure | target | ${list.map((w) => w.name).join(' | ')} |\n|---|---|${list.map(() => '---|').join('')}\n`;
  return head + rows(list).map(([figure, target, cells, met]) =>
    `| ${figure} | ${target || '—'} | ${cells.map((c, i) => (met ? `${c} ${pass(met[i])}` : c)).join(' | ')} |`).join('\n') + '\n';
}

// ---- the section in docs/benchmarks.md ----------------------------------

const ms = (x) => (x >= 1000 ? `${(x / 1000).toFixed(2)} s` : `${Math.round(x)} ms`);

/** A request series' Worker stages, largest first, and what the stages leave out. */
function stagesText(worker) {
  const { total = 0, wasm_memory: _, ...stages } = worker;
  const named = Object.entries(stages).filter(([, v]) => v >= 1).sort((x, y) => y[1] - x[1]);
  const other = total - named.reduce((n, [, v]) => n + v, 0);
  return `${named.map(([k, v]) => `${k} ${ms(v)}`).join(', ')}${other >= 1 ? `, other ${ms(other)}` : ''} (Worker total ${ms(total)})`;
}

function phasesText(p) {
  let t = `before the first request ${s(p.before_first_s)}, in requests ${s(p.requests_s)}, between requests ${s(p.between_s)}`;
  if (p.longest_gap_s >= 1) t += ` (${s(p.longest_gap_s)} before \`${p.longest_gap_before}\`)`;
  return `${t}, after the last ${s(Math.max(0, p.after_last_s))}`;
}

const routeText = (routes, name) => {
  const r = routes[name];
  return r ? `\`${name}\` ×${r.requests} ${ms(r.ms)}: ${stagesText(r.worker_ms)}` : null;
};

function docSection(results) {
  const m = results.machine;
  const list = results.workspaces;
  const out = [];
  const n = results.checkpoints;
  out.push('## Transfer', '',
    '`node bench/transfer.mjs` (after `bash scripts/build-release.sh` and `bash scripts/worker-build.sh`, which the',
    'script runs itself): the real `pillbox` binary against the Worker under `wrangler dev --local` (workerd, local R2',
    'and D1) with `BENCH_ROUTES=1`, every request through the recording proxy of `tests/e2e/proxy.mjs`, which keeps',
    'each answer\'s `Pillbox-Timing` (the Worker\'s own timers) and when each request started and ended. One run,',
    'the store emptied between workspaces (refs and packets deleted, then the scheduled clean-up). The workspaces:',
    '',
    '- **node_modules**: `npm install --no-save --ignore-scripts` of next, jest, webpack, eslint, @babel/core, react and',
    `  react-dom${results.node_modules_from ? ' (here an install made so earlier, given with `--node-modules`)' : ''}, and a \`src/\` of 20 small modules;`,
    '- **repo**: `git clone --no-local` of this repository (sources, `.git` with its real history and packfiles), packed',
    '  with `--secrets exclude` (the adversarial corpus holds fake credentials);',
    `- **rollout**: the same small \`src/\` and a ${results.rollout_mib} MiB Codex rollout from \`bench/genrollout.py\`, packed as`,
    '  harness state (`--harness codex --thread … --codex-home …`).',
    '',
    'A one-file edit appends a line to one source file; a rollout turn appends about 16 KB (four lines: a user',
    'message, a shell call, its output, the answer). The figures, per workspace:',
    '',
    '1. the first `push --ref` of the packet (wall time of the command, which verifies the packet first) against the',
    '   baseline: the same bytes through the same Worker into R2, unverified (`POST /v1/bench/baseline`, parts of 32 MiB);',
    '2. a second `push --ref` after a one-file edit (and a rollout turn), against 1% of the packet plus its',
    '   `packet.json`;',
    `3. ${n} successive \`save --ref\`, one or two files changed per turn (and a rollout turn): R2 bytes (every object`,
    '   but the baseline\'s, from the local R2 state) against the unique content: every distinct body once, the rollout',
    '   (only ever appended to) once at its final size, and every packet\'s `packet.json`; D1 rows of every table;',
    '4. a `pull` of the second packet on a fresh host, `--no-cache`, with the first packet file as `--base`, compared',
    '   with `cmp`;',
    '5. the edge alone: the first packet pushed as /2 by the simple client of `tests/e2e/wire.mjs` (fixed 256 KiB',
    '   cuts, zstd frames, one part at a time), its throughput against the baseline\'s;',
    '6. `save` against `pack` + `push`, and `restore` against `pull` + `unpack`, one turn each, on a restoring host that',
    '   keeps its chunk cache (it restored the previous turn first).',
    '',
    `Machine: Linux ${m.kernel}, ${m.cores} cores (${m.cpu}), ${m.ram_gib} GiB RAM, node ${m.node}, shared with other`,
    `builds. Date: ${results.date.slice(0, 16).replace('T', ' ')} UTC; ${Math.round(results.seconds)} s. Load average (1 min) at the start: ${m.load_start.toFixed(2)}, at the end: ${m.load_end.toFixed(2)}.`,
    `Rerun: \`node bench/transfer.mjs [--node-modules DIR] [--dir DIR] --write-doc\` (workspaces cached under \`--dir\`,`,
    'default `/tmp/pillbox-transfer-bench`; `--quick` for small workspaces and 3 saves). The measured run is',
    '`docs/benchmarks-transfer.json`.',
    '', results.table);

  out.push('### Where the time and bytes go', '');
  for (const w of list) {
    out.push(`**${w.name}** (${mb(w.packet.bytes)}, ${w.packet.members} members, \`packet.json\` ${kb(w.packet.manifest_bytes)}):`, '');
    const p2 = w.second_push;
    out.push(`- second push, ${s(p2.wall_s)}: ${phasesText(p2.phases)}. ${routeText(p2.routes, 'POST /v1/pushes/{}/complete')}. `
      + `Sent ${kb(p2.bytes_sent)}: the compressed \`packet.json\` ${kb(p2.routes['POST /v1/pushes']?.body_bytes ?? 0)}, `
      + `recipes ${kb(p2.routes['POST /v1/pushes/{}/recipes']?.body_bytes ?? 0)}, parts ${kb(p2.routes['PUT /v1/pushes/{}/parts/{n}']?.body_bytes ?? 0)} `
      + `(${p2.delta.missing_bodies} bodies missing, ${p2.delta.chunks_sent} chunks, ${kb(p2.delta.chunk_bytes)} before compression).`);
    const p1 = w.first_push;
    out.push(`- first push, ${s(p1.wall_s)}: ${phasesText(p1.phases)}. ${routeText(p1.routes, 'PUT /v1/pushes/{}/parts/{n}')} (summed: three parts at a time); ${routeText(p1.routes, 'POST /v1/pushes/{}/complete')}.`);
    out.push(`- baseline, ${s(w.baseline.wall_s)}: ${routeText(w.baseline.routes, 'POST /v1/bench/baseline')}. `
      + `The edge push, ${s(w.edge_push.wall_s)}: ${routeText(w.edge_push.routes, 'PUT /v1/pushes/{}/parts/{n}')} (one part at a time); ${routeText(w.edge_push.routes, 'POST /v1/pushes/{}/complete')}.`);
    const c = w.checkpoints;
    const users = c.turns.map((t) => t.rows_added.pack_users);
    out.push(`- after ${c.packets} packets: R2 ${Object.entries(c.r2_by_prefix).map(([k, v]) => `${k}/ ${mb(v.bytes)} (${v.objects})`).join(', ')}; `
      + `unique bodies ${mb(c.unique_body_bytes)}, \`packet.json\`s ${mb(c.manifest_bytes)}. `
      + `D1 rows: ${Object.entries(c.d1_rows).filter(([, v]) => v).map(([k, v]) => `${k} ${v}`).join(', ')}. `
      + `Rows added by each save: packets 1, packs ${Math.min(...c.turns.map((t) => t.rows_added.packs))}–${Math.max(...c.turns.map((t) => t.rows_added.packs))}, chunks ${Math.min(...c.turns.map((t) => t.rows_added.chunks))}–${Math.max(...c.turns.map((t) => t.rows_added.chunks))}, pack_users ${users.join(', ')}.`);
    const sv = c.turns.map((t) => t.phases);
    const med = (f) => [...sv.map(f)].sort((x, y) => x - y)[Math.floor((sv.length - 1) / 2)];
    out.push(`- saves (medians): before the first request ${s(med((p) => p.before_first_s))}, in requests ${s(med((p) => p.requests_s))}, between requests ${s(med((p) => p.between_s))}; `
      + `longest pause between requests over all saves ${s(Math.max(...sv.map((p) => p.longest_gap_s)))}.`);
    out.push('');
  }
  return out.join('\n');
}

/** Replaces the "## Transfer" section of docs/benchmarks.md (up to the next "## "), or appends it. */
function writeDoc(section) {
  const file = join(ROOT, 'docs/benchmarks.md');
  const doc = readFileSync(file, 'utf8');
  const at = doc.indexOf('\n## Transfer\n');
  let next = at < 0 ? -1 : doc.indexOf('\n## ', at + 1);
  const before = at < 0 ? doc.replace(/\n*$/, '\n') : doc.slice(0, at + 1);
  const after = next < 0 ? '' : doc.slice(next + 1);
  // The "### Findings" that people wrote about the figures stay (to be
  // read again against the new ones).
  const old = at < 0 ? '' : doc.slice(at + 1, next < 0 ? doc.length : next + 1);
  const findings = old.indexOf('### Findings\n');
  const kept = findings < 0 ? '' : `\n${old.slice(findings).replace(/\n*$/, '\n')}`;
  writeFileSync(file, `${before}\n${section.replace(/\n*$/, '\n')}${kept}${after ? `\n${after}` : ''}`);
  log(`wrote the Transfer section of ${file}`);
}

// ---- the run --------------------------------------------------------------

const fromJson = opt('from-json', null);
let results;
if (fromJson) {
  results = JSON.parse(readFileSync(fromJson, 'utf8'));
} else {
  results = await measureAll();
  writeFileSync(jsonOut, JSON.stringify(results, null, 1) + '\n');
  log(`${results.seconds.toFixed(0)} s; wrote ${jsonOut}`);
}
results.targets = rows(results.workspaces).filter((r) => r[3]).map(([figure, target, , met]) => ({ figure, target, met: Object.fromEntries(results.workspaces.map((w, i) => [w.name, met[i]])) }));
results.table = table(results);
writeFileSync(mdOut, `${docSection(results)}\n`);
log(`wrote ${mdOut}`);
if (args.includes('--write-doc')) {
  writeDoc(docSection(results));
  writeFileSync(join(ROOT, 'docs/benchmarks-transfer.json'), JSON.stringify(results, null, 1) + '\n');
}
if (!fromJson) console.log(JSON.stringify(results, null, 1));

async function measureAll() {
  mkdirSync(dir, { recursive: true });
  rmSync(work, { recursive: true, force: true });
  mkdirSync(work, { recursive: true });
  const started = new Date();
  const load0 = loadavg()[0];
  log('building (release)');
  run('bash', ['scripts/build-release.sh', '--quiet']);
  buildWorker();
  const list = workspaces();
  edge = await startEdge({
    BENCH_ROUTES: '1', MAX_SINGLE_UPLOAD_BYTES: String(64 * MIB), PART_SIZE_BYTES: String(PART), PUSH_PART_BYTES: String(PART), UPLOAD_TTL_HOURS: '0',
  }, { testScheduled: true });
  const out = {
    quick, checkpoints, rollout_mib: rolloutMib, node_modules_from: nodeModulesFrom, date: started.toISOString(),
    machine: { kernel: release(), cores: cpus().length, cpu: cpus()[0]?.model, ram_gib: Math.round(totalmem() / 2 ** 30), node: process.version, load_start: load0 },
    workspaces: [],
  };
  try {
    proxy = await startProxy(edge.url);
    api = client(proxy.url);
    // Warm the isolate and the local stores once.
    await api.call('POST', '/v1/bench/baseline', { body: Buffer.alloc(MIB) });
    for (const ws of list) out.workspaces.push(await bench(ws));
  } finally {
    await proxy?.stop();
    await edge.stop();
  }
  rmSync(work, { recursive: true, force: true });
  out.machine.load_end = loadavg()[0];
  out.seconds = (Date.now() - started.getTime()) / 1000;
  return out;
}
