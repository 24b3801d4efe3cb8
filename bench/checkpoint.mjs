// Checkpoint benchmark against restic (docs/benchmarks.md, "Checkpoints
// against restic"): the release `pillbox save` against the local Worker
// under `wrangler dev --local`, and `restic backup` (0.14, a local
// repository) of the same folder, interleaved in the same run, on the
// folder given (a tmpfs; the Worker's persisted R2/D1 state and restic's
// repository and cache live there too).
//
// Three series, each with a fresh store and a fresh restic repository:
//   node_modules  a copy (cp -a) of --workspace (a real `npm install`);
//   copies        a folder holding --copies copies of it;
//   rollout       a small src/ and a Codex rollout of --rollout-mib MiB
//                 (bench/genrollout.py), saved as harness state; a turn
//                 appends about 16 KB.
// For each: the first save and the first backup (--first-reps times, each
// with a fresh store and repository), then --reps one-file edits (a turn),
// each followed by `save --ref` and `restic backup` (their order swapped
// from one edit to the next). Measured per save: wall time, the bytes of
// every request body (the recording proxy of tests/e2e/proxy.mjs), the
// save report's `seconds`, the Worker's Pillbox-Timing per route, and the
// bytes the store grew by (R2 objects, and D1 rows and index entries as
// the bytes of their values); per backup: wall time and the bytes the
// repository grew by. After the last edit of the node_modules series, the
// packet is pulled on a fresh host with the previous packet file as
// --base and compared with `pack`'s file.
//
// Usage: node bench/checkpoint.mjs --workspace DIR --dir TMPFS_DIR
//          [--reps N] [--first-reps N] [--copies N] [--rollout-mib N]
//          [--only node_modules,copies,rollout] [--json FILE] [--write-doc]
//          [--from-json FILE]
// Prints the table on stderr and the JSON on stdout (and into --json,
// default DIR/checkpoint.json). --write-doc puts the section into
// docs/benchmarks.md and the JSON into docs/benchmarks-checkpoint.json;
// --from-json FILE makes them from a run measured earlier.
import { spawnSync } from 'node:child_process';
import { appendFileSync, cpSync, lstatSync, mkdirSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, release, totalmem } from 'node:os';
import { join } from 'node:path';

import { ROOT, TARGET, TOKEN, buildRelease, buildWorker, client, startEdge } from '../tests/e2e/edge.mjs';
import { startProxy } from '../tests/e2e/proxy.mjs';
import { THREAD, placeRollout } from './rollout.mjs';

const args = process.argv.slice(2);
const opt = (name, fallback) => {
  const i = args.indexOf(`--${name}`);
  return i >= 0 ? args[i + 1] : fallback;
};
const source = opt('workspace', null);
const dir = opt('dir', null);
const fromJson = opt('from-json', null);
if (!fromJson && (!source || !dir)) {
  throw new Error('usage: node bench/checkpoint.mjs --workspace DIR --dir TMPFS_DIR [--reps N] [--first-reps N] [--copies N] [--rollout-mib N] [--only …] [--write-doc]');
}
const reps = Number(opt('reps', '5'));
const firstReps = Number(opt('first-reps', '1'));
const copies = Number(opt('copies', '4'));
const rolloutMib = Number(opt('rollout-mib', '200'));
const only = opt('only', 'node_modules,copies,rollout').split(',');
const PILLBOX = join(TARGET, 'release/pillbox');
const KIB = 1024;
const MAX_PACKET_BYTES = 4 * 2 ** 30;
const log = (...a) => console.error('checkpoint bench:', ...a);
const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};

function run(cmd, argv, options = {}) {
  const started = process.hrtime.bigint();
  const r = spawnSync(cmd, argv, { cwd: ROOT, encoding: 'utf8', maxBuffer: 1 << 28, ...options });
  const seconds = Number(process.hrtime.bigint() - started) / 1e9;
  if (r.status !== 0) throw new Error(`${cmd} ${argv.join(' ')} failed (${r.status}):\n${r.stdout}\n${r.stderr}`);
  return { ...r, seconds };
}

// ---- the store's size -------------------------------------------------------

// The local R2 and D1 state the running server writes (SQLite files under
// the state directory), read-only: R2 object bytes, and D1's bytes as the
// bytes of every value of every row and index entry (integers as their
// decimal text), of every table the store keeps.
const STORE_SIZE = `
import glob, json, sqlite3, sys
state = sys.argv[1]
out = {"r2": 0, "r2_objects": 0, "d1": 0, "d1_rows": {}}
def names(db, kind):
    return [n for (n,) in db.execute("SELECT name FROM sqlite_master WHERE type = ?", (kind,))]
def size(cols):
    return " + ".join(f'coalesce(length(CAST("{c}" AS BLOB)), 0)' for c in cols) or "0"
for f in sorted(glob.glob(state + "/v3/d1/**/*.sqlite", recursive=True)):
    db = sqlite3.connect(f"file:{f}?mode=ro", uri=True)
    tables = [t for t in names(db, "table") if not t.startswith(("sqlite_", "_cf_")) and t != "d1_migrations"]
    if "packets" not in tables:
        continue
    for t in tables:
        cols = [r[1] for r in db.execute(f'PRAGMA table_info("{t}")')]
        n, b = db.execute(f'SELECT count(*), coalesce(sum({size(cols)}), 0) FROM "{t}"').fetchone()
        out["d1_rows"][t] = n
        out["d1"] += b
        for (i,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = ?", (t,)):
            icols = [r[2] for r in db.execute(f'PRAGMA index_info("{i}")') if r[2]]
            out["d1"] += db.execute(f'SELECT coalesce(sum({size(icols)}), 0) FROM "{t}"').fetchone()[0]
for f in sorted(glob.glob(state + "/v3/r2/**/*.sqlite", recursive=True)):
    db = sqlite3.connect(f"file:{f}?mode=ro", uri=True)
    if "_mf_objects" not in names(db, "table"):
        continue
    for key, n in db.execute("SELECT key, size FROM _mf_objects"):
        out["r2"] += n
        out["r2_objects"] += 1
print(json.dumps(out))
`;

function storeSize(state) {
  for (let attempt = 0; ; attempt++) {
    const r = spawnSync('python3', ['-c', STORE_SIZE, state], { encoding: 'utf8' });
    if (r.status === 0) return JSON.parse(r.stdout);
    // A busy database (the server writing) is asked again.
    if (attempt >= 5) throw new Error(`reading the local state failed: ${r.stderr}`);
    Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 200);
  }
}

/** Bytes of the files under `path` (restic's repository). */
function treeBytes(path) {
  let n = 0;
  for (const e of readdirSync(path, { withFileTypes: true })) {
    const p = join(path, e.name);
    if (e.isDirectory()) n += treeBytes(p);
    else if (e.isFile()) n += lstatSync(p).size;
  }
  return n;
}

// ---- the commands -----------------------------------------------------------

let hosts = 0;
/** A machine: its own state (the workspace record) and cache folders. */
function host(name) {
  hosts += 1;
  const h = join(dir, `host-${hosts}-${name}`);
  return { XDG_STATE_HOME: join(h, 'state'), XDG_CACHE_HOME: join(h, 'cache') };
}

/** The Worker, the recording proxy in front of it, and an API client. */
async function startStore(name) {
  const state = join(dir, `edge-${name}`);
  rmSync(state, { recursive: true, force: true });
  mkdirSync(state, { recursive: true });
  // wrangler.toml's limits, but for the packet size: the copies series
  // makes a packet of about 1.8 GB (the format allows 8 GiB).
  const edge = await startEdge({ BENCH_ROUTES: '1', MAX_PACKET_BYTES: String(MAX_PACKET_BYTES) }, { state });
  const proxy = await startProxy(edge.url);
  const store = { edge, proxy, state, api: client(edge.url) };
  // The proxy's log, asked on a fresh connection each time (no keep-alive
  // race with its idle timeout).
  store.log = async () => {
    for (let attempt = 0; ; attempt++) {
      try {
        return (await client(proxy.url).call('GET', '/__proxy/log', { auth: false })).json;
      } catch (e) {
        if (attempt >= 2) throw e;
      }
    }
  };
  store.stop = async () => {
    await proxy.stop();
    await edge.stop();
    rmSync(state, { recursive: true, force: true });
  };
  return store;
}

/**
 * `pillbox ARGV --quiet` (save at the top level, the rest under
 * checkpoint) against `store`: its JSON, wall time and the requests it
 * made (from the proxy's log).
 */
async function pillbox(store, argv, env) {
  const mark = (await store.log()).length;
  const e = { ...process.env, PILLBOX_TOKEN: TOKEN, ...env };
  for (const k of ['CODEX_HOME', 'CLAUDE_CONFIG_DIR', 'PILLBOX_REMOTE', 'PILLBOX_CACHE_MAX_BYTES']) delete e[k];
  const cmd = argv[0] === 'save' ? argv : ['checkpoint', ...argv];
  const r = run(PILLBOX, [...cmd, '--quiet'], { env: e });
  const requests = (await store.log()).slice(mark);
  return { json: JSON.parse(r.stdout), seconds: r.seconds, requests };
}

/** restic against the repository `repo` (its cache on the tmpfs too). */
function restic(repo, argv) {
  const env = { ...process.env, RESTIC_PASSWORD: 'bench', RESTIC_CACHE_DIR: join(dir, 'restic-cache') };
  return run('restic', ['--repo', repo, '--quiet', ...argv], { env });
}

/** The Worker's timers summed over `requests`, by route. */
function workerTiming(requests) {
  const routes = {};
  for (const e of requests) {
    const route = `${e.method} ${e.path.replace(/sha256:[0-9a-f]{64}|[0-9a-f]{32,64}/g, '{}').replace(/\/parts\/\d+/, '/parts/{n}')}`;
    const r = (routes[route] ??= { requests: 0, ms: 0, body_bytes: 0, worker: {} });
    r.requests += 1;
    r.ms += e.ms;
    r.body_bytes += e.body_bytes;
    for (const part of (e.timing ?? '').split(';').filter(Boolean)) {
      const [k, v] = part.split('=');
      r.worker[k] = k === 'wasm_memory' ? Math.max(r.worker[k] ?? 0, Number(v)) : (r.worker[k] ?? 0) + Number(v);
    }
  }
  return routes;
}

const sentBytes = (requests) => requests.reduce((n, e) => n + e.body_bytes, 0);

/** Distinct bodies of a stored packet: their count and bytes, and packet.json's bytes. */
async function uniqueContent(store, digest) {
  const r = await store.api.call('GET', `/v1/packets/${digest}/manifest`);
  if (r.status !== 200) throw new Error(`manifest of ${digest}: ${r.status}`);
  const bodies = new Map();
  for (const m of JSON.parse(r.bytes.toString('utf8')).members) if (m.type === 'file' && m.size) bodies.set(m.sha256, m.size);
  let bytes = 0;
  for (const n of bodies.values()) bytes += n;
  return { bodies: bodies.size, body_bytes: bytes, manifest_bytes: r.bytes.length, bytes: bytes + r.bytes.length };
}

// ---- one series ---------------------------------------------------------------

/**
 * `ws`: { name, paths (what restic backs up), root (what pillbox saves),
 * flags, edit(turn), pull (compare a pull with --base) }.
 */
async function series(ws) {
  const out = { name: ws.name, first: [], second: [] };
  const ref = `bench/${ws.key}`;
  const repo = join(dir, `restic-${ws.key}`);
  let store;
  try {
    await measureSeries(ws, out, ref, repo, (s) => { store = s; });
  } finally {
    await store?.stop();
    rmSync(repo, { recursive: true, force: true });
  }
  summarize(out);
  return out;
}

async function measureSeries(ws, out, ref, repo, started) {
  let store;
  let laptop;
  // ---- the first save and backup ----
  for (let i = 0; i < firstReps; i++) {
    await store?.stop();
    store = await startStore(ws.key);
    started(store);
    laptop = host(`${ws.key}-laptop`);
    rmSync(repo, { recursive: true, force: true });
    rmSync(join(dir, 'restic-cache'), { recursive: true, force: true });
    restic(repo, ['init']);
    const empty = storeSize(store.state);
    const repoEmpty = treeBytes(repo);
    const rep = {};
    const doSave = async () => {
      log(`${ws.name}: first save`);
      const s = await pillbox(store, ['save', ws.root, '--remote', store.proxy.url, '--ref', ref, ...ws.flags], laptop);
      const size = storeSize(store.state);
      rep.save = {
        wall_s: s.seconds, digest: s.json.digest, size: s.json.size, members: s.json.members, files_read: s.json.files_read,
        bytes_hashed: s.json.bytes_hashed, bytes_sent: sentBytes(s.requests), report_bytes_sent: s.json.bytes_sent,
        seconds: s.json.seconds, r2_bytes: size.r2 - empty.r2, d1_bytes: size.d1 - empty.d1, d1_rows: size.d1_rows, routes: workerTiming(s.requests),
      };
    };
    const doBackup = () => {
      log(`${ws.name}: first backup`);
      const r = restic(repo, ['backup', ...ws.paths]);
      rep.restic = { wall_s: r.seconds, repo_bytes: treeBytes(repo) - repoEmpty };
    };
    if (i % 2) { doBackup(); await doSave(); } else { await doSave(); doBackup(); }
    rep.unique = await uniqueContent(store, rep.save.digest);
    out.first.push(rep);
  }
  out.packet = { size: out.first[0].save.size, members: out.first[0].save.members, ...out.first.at(-1).unique };

  // ---- one edit (turn) at a time, then a save and a backup ----
  let previous = out.first.at(-1).save.digest;
  for (let turn = 1; turn <= reps; turn++) {
    const last = turn === reps;
    const prevPacket = join(dir, `${ws.key}-prev.pkt`);
    if (last && ws.pull) await pillbox(store, ['pack', ws.root, '-o', prevPacket, ...ws.flags], {});
    ws.edit(turn);
    const rep = { turn };
    const doSave = async () => {
      const before = storeSize(store.state);
      const s = await pillbox(store, ['save', ws.root, '--remote', store.proxy.url, '--ref', ref, ...ws.flags], laptop);
      const after = storeSize(store.state);
      rep.save = {
        wall_s: s.seconds, digest: s.json.digest, files_read: s.json.files_read, files_reused: s.json.files_reused,
        bytes_hashed: s.json.bytes_hashed, bytes_sent: sentBytes(s.requests), report_bytes_sent: s.json.bytes_sent,
        requests: s.requests.length, mode: s.json.mode, seconds: s.json.seconds, r2_growth: after.r2 - before.r2, d1_growth: after.d1 - before.d1,
        routes: workerTiming(s.requests),
      };
    };
    const doBackup = () => {
      const before = treeBytes(repo);
      const r = restic(repo, ['backup', ...ws.paths]);
      rep.restic = { wall_s: r.seconds, repo_growth: treeBytes(repo) - before };
    };
    if (turn % 2) { await doSave(); doBackup(); } else { doBackup(); await doSave(); }
    log(`${ws.name}: turn ${turn}: save ${rep.save.wall_s.toFixed(2)} s (${rep.save.files_read} read, ${rep.save.bytes_sent} B sent, +${rep.save.r2_growth + rep.save.d1_growth} B), restic ${rep.restic.wall_s.toFixed(2)} s`);
    if (last && ws.pull) {
      const packet = join(dir, `${ws.key}-cur.pkt`);
      const pulled = join(dir, `${ws.key}-pulled.pkt`);
      const p = await pillbox(store, ['pack', ws.root, '-o', packet, ...ws.flags], {});
      if (p.json.digest !== rep.save.digest) throw new Error(`pack gave ${p.json.digest}, the save ${rep.save.digest}`);
      const r = await pillbox(store, ['pull', rep.save.digest, '--remote', store.proxy.url, '-o', pulled, '--base', prevPacket, '--no-cache'], host(`${ws.key}-puller`));
      out.pull = {
        wall_s: r.seconds, bytes_received: r.json.bytes_received, base: previous,
        identical: spawnSync('cmp', ['-s', pulled, packet]).status === 0, routes: workerTiming(r.requests),
      };
      for (const f of [packet, pulled, prevPacket]) rmSync(f, { force: true });
    }
    previous = rep.save.digest;
    out.second.push(rep);
  }
}

/** Medians and ratios of a series. */
function summarize(out) {
  const f = out.first;
  const sv = out.second;
  const m = (xs) => median(xs);
  out.summary = {
    first_save_s: m(f.map((r) => r.save.wall_s)),
    first_backup_s: m(f.map((r) => r.restic.wall_s)),
    first_r2_bytes: m(f.map((r) => r.save.r2_bytes)),
    first_d1_bytes: m(f.map((r) => r.save.d1_bytes)),
    first_restic_repo_bytes: m(f.map((r) => r.restic.repo_bytes)),
    first_bytes_sent: m(f.map((r) => r.save.bytes_sent)),
    second_save_s: m(sv.map((r) => r.save.wall_s)),
    second_backup_s: m(sv.map((r) => r.restic.wall_s)),
    second_bytes_sent: m(sv.map((r) => r.save.bytes_sent)),
    second_bytes_sent_max: Math.max(...sv.map((r) => r.save.bytes_sent)),
    second_growth: m(sv.map((r) => r.save.r2_growth + r.save.d1_growth)),
    second_growth_max: Math.max(...sv.map((r) => r.save.r2_growth + r.save.d1_growth)),
    second_r2_growth: m(sv.map((r) => r.save.r2_growth)),
    second_d1_growth: m(sv.map((r) => r.save.d1_growth)),
    second_restic_growth: m(sv.map((r) => r.restic.repo_growth)),
    second_seconds: Object.fromEntries(Object.keys(sv[0].save.seconds).map((k) => [k, m(sv.map((r) => r.save.seconds[k]))])),
  };
  const s = out.summary;
  s.first_ratio = s.first_save_s / s.first_backup_s;
  s.first_r2_ratio = s.first_r2_bytes / out.packet.bytes;
  s.second_ratio = s.second_save_s / s.second_backup_s;
  log(`${out.name}: first ${s.first_save_s.toFixed(2)} s / restic ${s.first_backup_s.toFixed(2)} s = ${s.first_ratio.toFixed(2)}×; `
    + `second ${s.second_save_s.toFixed(2)} s / restic ${s.second_backup_s.toFixed(2)} s = ${s.second_ratio.toFixed(2)}×`);
}

// ---- the workspaces -----------------------------------------------------------

/** A one-file edit: package.json gains a field naming the turn. */
function editPackageJson(file, turn) {
  const j = JSON.parse(readFileSync(file, 'utf8'));
  j.turn = turn;
  writeFileSync(file, JSON.stringify(j, null, 2) + '\n');
}

/** About 16 KB of a Codex turn: a user message, a shell call's output, the answer. */
function rolloutTurn(i) {
  const line = (type, payload) => JSON.stringify({ timestamp: `2026-12-01T10:${String(Math.floor(i / 60) % 60).padStart(2, '0')}:${String(i % 60).padStart(2, '0')}.000Z`, type, payload }) + '\n';
  const excerpt = readFileSync(join(ROOT, 'docs/transfer.md'), 'utf8').slice(i * 500, i * 500 + 15_500);
  return line('response_item', { type: 'message', role: 'user', content: [{ type: 'input_text', text: `Turn ${i}` }] })
    + line('response_item', { type: 'function_call_output', call_id: `call_${i}`, output: excerpt })
    + line('response_item', { type: 'message', role: 'assistant', content: [{ type: 'output_text', text: 'done' }] });
}

const copy = (from, to) => {
  mkdirSync(join(to, '..'), { recursive: true });
  run('cp', ['-a', from, to]);
};

function nodeModulesSeries() {
  const root = join(dir, 'nm');
  rmSync(root, { recursive: true, force: true });
  log(`copying ${source}`);
  copy(source, root);
  return { name: 'node_modules', key: 'node_modules', root, paths: [root], flags: [], pull: true, edit: (t) => editPackageJson(join(root, 'package.json'), t), done: () => rmSync(root, { recursive: true, force: true }) };
}

function copiesSeries() {
  const root = join(dir, `nm-x${copies}`);
  rmSync(root, { recursive: true, force: true });
  log(`copying ${source} ${copies} times`);
  for (let i = 1; i <= copies; i++) copy(source, join(root, `copy-${i}`));
  return { name: `node_modules ×${copies}`, key: `node_modules-x${copies}`, root, paths: [root], flags: [], edit: (t) => editPackageJson(join(root, 'copy-1/package.json'), t), done: () => rmSync(root, { recursive: true, force: true }) };
}

function rolloutSeries() {
  const root = join(dir, 'rollout-ws');
  const home = join(dir, 'rollout-home');
  rmSync(root, { recursive: true, force: true });
  rmSync(home, { recursive: true, force: true });
  const rollout = placeRollout(dir, rolloutMib, home, log);
  cpSync(join(ROOT, 'native-cli/src'), join(root, 'src'), { recursive: true });
  return {
    name: `rollout ${rolloutMib} MiB`, key: 'rollout', root, paths: [root, home], flags: ['--harness', 'codex', '--thread', THREAD, '--codex-home', home],
    edit: (t) => appendFileSync(rollout, rolloutTurn(t)),
    done: () => { rmSync(root, { recursive: true, force: true }); rmSync(home, { recursive: true, force: true }); },
  };
}

// ---- the table and the section --------------------------------------------------

const kib = (n) => `${(n / KIB).toFixed(1)} KiB`;
const mb = (n) => `${(n / 1e6).toFixed(1)} MB`;
const sec = (x) => `${x.toFixed(2)} s`;
const verdict = (ok) => (ok ? 'pass' : '**miss**');

/** [workspace, figure, pillbox, restic, ratio, target, met]. */
function rows(results) {
  const out = [];
  for (const w of results.series) {
    const s = w.summary;
    const nm = w.name === 'node_modules';
    const rollout = w.name.startsWith('rollout');
    const n = w.first.length;
    out.push([w.name, `first save / first backup${n > 1 ? ` (median of ${n})` : ''}`, sec(s.first_save_s), sec(s.first_backup_s), `${s.first_ratio.toFixed(2)}×`,
      rollout ? '—' : '≤ 2×', rollout ? null : s.first_ratio <= 2]);
    out.push([w.name, 'first: R2 bytes / unique content (bodies + packet.json)', `${mb(s.first_r2_bytes)} / ${mb(w.packet.bytes)}`, `repo ${mb(s.first_restic_repo_bytes)}`,
      `${s.first_r2_ratio.toFixed(2)}×`, rollout ? '—' : '≤ 0.5×', rollout ? null : s.first_r2_ratio <= 0.5]);
    out.push([w.name, 'first: bytes sent; D1 bytes', `${mb(s.first_bytes_sent)}; ${kib(s.first_d1_bytes)}`, '—', '—', '—', null]);
    const what = rollout ? 'a 16 KB turn' : 'a one-file edit';
    out.push([w.name, `second save / second backup after ${what} (median of ${w.second.length})`, sec(s.second_save_s), sec(s.second_backup_s), `${s.second_ratio.toFixed(2)}×`,
      rollout ? '—' : `≤ 0.5×${nm ? ', ≤ 1.0 s' : ''}`, rollout ? null : s.second_ratio <= 0.5 && (!nm || s.second_save_s <= 1.0)]);
    out.push([w.name, 'second: bytes sent (median, max)', `${kib(s.second_bytes_sent)}, ${kib(s.second_bytes_sent_max)}`, '—', '—',
      rollout ? '≤ 64 KiB' : nm ? '≤ 32 KiB' : '—', rollout ? s.second_bytes_sent_max <= 64 * KIB : nm ? s.second_bytes_sent_max <= 32 * KIB : null]);
    out.push([w.name, 'second: store growth R2 + D1 (median, max); restic repo growth (median)', `${kib(s.second_r2_growth)} + ${kib(s.second_d1_growth)}, max ${kib(s.second_growth_max)}`,
      kib(s.second_restic_growth), `${(s.second_growth / s.second_restic_growth).toFixed(2)}×`, nm ? '≤ 64 KiB' : '—', nm ? s.second_growth_max <= 64 * KIB : null]);
    if (w.pull) {
      out.push([w.name, 'pull with the previous packet as --base: received; identical to pack\'s', `${kib(w.pull.bytes_received)}; ${w.pull.identical ? 'identical' : 'differs'} (${sec(w.pull.wall_s)})`,
        '—', '—', '≤ 64 KiB, identical', w.pull.bytes_received <= 64 * KIB && w.pull.identical]);
    }
  }
  return out;
}

function table(results) {
  return '| workspace | figure | pillbox | restic | ratio | target |\n|---|---|---|---|---|---|\n'
    + rows(results).map(([w, f, p, r, ratio, target, met]) => `| ${w} | ${f} | ${p} | ${r} | ${ratio} | ${target}${met === null ? '' : ` ${verdict(met)}`} |`).join('\n') + '\n';
}

const ms = (x) => (x >= 1000 ? `${(x / 1000).toFixed(2)} s` : `${Math.round(x)} ms`);

/** Where a save's time went: the client's phases, then the Worker's timers by route (medians). */
function whereText(w) {
  const s = w.summary.second_seconds;
  const client = ['record_load', 'walk', 'hash', 'manifest', 'push', 'record_write'].map((k) => `${k.replace('_', ' ')} ${ms(1000 * s[k])}`).join(', ');
  const routes = {};
  for (const r of w.second) {
    for (const [route, v] of Object.entries(r.save.routes)) {
      const e = (routes[route] ??= { ms: [], worker: {} });
      e.ms.push(v.ms);
      for (const [k, t] of Object.entries(v.worker)) (e.worker[k] ??= []).push(t);
    }
  }
  const edge = Object.entries(routes).map(([route, e]) => {
    const timers = Object.entries(e.worker).filter(([k]) => !['total', 'wasm_memory'].includes(k) && !k.endsWith('_bytes') && !k.endsWith('_count'))
      .map(([k, v]) => [k, median(v)]).filter(([, v]) => v >= 1).sort((a, b) => b[1] - a[1]);
    const total = e.worker.total ? `, Worker total ${ms(median(e.worker.total))}` : '';
    return `\`${route}\` ${ms(median(e.ms))}${timers.length ? ` (${timers.map(([k, v]) => `${k} ${ms(v)}`).join(', ')}${total})` : total ? ` (${total.slice(2)})` : ''}`;
  });
  const f = w.first.at(-1).save;
  return `- **${w.name}** (${w.packet.members} members, ${mb(w.packet.size)} packet, packet.json ${kib(w.packet.manifest_bytes)}): `
    + `second save ${ms(1000 * s.total)}: ${client}. Files read per save: ${median(w.second.map((r) => r.save.files_read))}${w.second[0].save.files_read > median(w.second.map((r) => r.save.files_read)) ? ` (the first save after the first one: ${w.second[0].save.files_read}, the files stamped within 2 s of its start being racy)` : ''}. `
    + `Requests: ${edge.join('; ')}. `
    + `First save ${ms(1000 * f.seconds.total)}: ${['walk', 'hash', 'manifest', 'push'].map((k) => `${k} ${ms(1000 * f.seconds[k])}`).join(', ')}.`;
}

function docSection(results) {
  const m = results.machine;
  return ['## Checkpoints against restic', '',
    '`node bench/checkpoint.mjs --workspace DIR --dir TMPFS_DIR --write-doc` (bench/README.md): the release `pillbox',
    'save` against the Worker under `wrangler dev --local` (its persisted R2/D1 state on the tmpfs), every request',
    'through the recording proxy of `tests/e2e/proxy.mjs` (wrangler.toml\'s settings but `MAX_PACKET_BYTES` 4 GiB and',
    '`BENCH_ROUTES=1`), and restic 0.14 `backup` of the same folder into a local',
    'repository on the same tmpfs (`restic init` defaults: repository v2, compression auto; its cache on the tmpfs,',
    '`RESTIC_CACHE_DIR`), run alternately in the same run. Each series starts from a fresh store and a fresh repository:',
    '',
    `- **node_modules**: a copy (\`cp -a\`) of a real \`npm install\` (${results.source_files} files);`,
    `- **node_modules ×${results.copies}**: a folder of ${results.copies} such copies;`,
    `- **rollout**: a small \`src/\` and a ${results.rollout_mib} MiB Codex rollout (\`bench/genrollout.py\`), saved as harness state.`,
    '',
    'A one-file edit rewrites `package.json` (of the first copy) with a field naming the turn; a rollout turn appends',
    'about 16 KB. The first save and backup, then one edit at a time followed by a `save --ref` and a `restic backup`;',
    'figures are medians over the edits. Store growth: R2 object bytes and D1\'s bytes (every value of every row and',
    'index entry, integers as decimal text), from the local state; restic\'s: the repository\'s file bytes.',
    '',
    `Machine: Linux ${m.kernel}, ${m.cores} cores (${m.cpu}), ${m.ram_gib} GiB RAM, node ${m.node}, shared with other`,
    `engineers' builds. Date: ${results.date.slice(0, 16).replace('T', ' ')} UTC; ${Math.round(results.seconds)} s. Load average (1, 5, 15 min) at the start: ${m.load_start.map((x) => x.toFixed(2)).join(', ')}; at the end: ${m.load_end.map((x) => x.toFixed(2)).join(', ')}.`,
    `Command: \`${results.command}\`. The run: \`docs/benchmarks-checkpoint.json\`.`,
    '', table(results),
    '### Where the time goes', '',
    'The save report\'s `seconds` (medians over the edits) and the Worker\'s `Pillbox-Timing` per request (medians):', '',
    ...results.series.map(whereText), ''].join('\n');
}

/** Replaces the "## Checkpoints against restic" section of docs/benchmarks.md (up to the next "## "), or appends it. */
function writeDoc(section) {
  const file = join(ROOT, 'docs/benchmarks.md');
  const doc = readFileSync(file, 'utf8');
  const head = '\n## Checkpoints against restic\n';
  const at = doc.indexOf(head);
  const next = at < 0 ? -1 : doc.indexOf('\n## ', at + 1);
  const before = at < 0 ? doc.replace(/\n*$/, '\n') : doc.slice(0, at + 1);
  const old = at < 0 ? '' : doc.slice(at + 1, next < 0 ? doc.length : next + 1);
  // The findings people wrote about the figures stay.
  const findings = old.indexOf('### Findings\n');
  const kept = findings < 0 ? '' : `\n${old.slice(findings).replace(/\n*$/, '\n')}`;
  const after = next < 0 ? '' : `\n${doc.slice(next + 1)}`;
  writeFileSync(file, `${before}\n${section.replace(/\n*$/, '\n')}${kept}${after}`);
  log(`wrote the section of ${file}`);
}

// ---- the run ------------------------------------------------------------------

async function measure() {
  mkdirSync(dir, { recursive: true });
  const started = new Date();
  const load = loadavg();
  log('building (release) and the Worker');
  buildRelease();
  buildWorker();
  const results = {
    date: started.toISOString(), reps, first_reps: firstReps, copies, rollout_mib: rolloutMib, source,
    source_files: run('find', [source, '-type', 'f']).stdout.split('\n').filter(Boolean).length,
    command: `node bench/checkpoint.mjs ${args.filter((a) => a !== '--write-doc').join(' ')}`,
    restic: run('restic', ['version']).stdout.trim(),
    machine: { kernel: release(), cores: cpus().length, cpu: cpus()[0]?.model, ram_gib: Math.round(totalmem() / 2 ** 30), node: process.version, load_start: load },
    series: [],
  };
  const makers = { node_modules: nodeModulesSeries, copies: copiesSeries, rollout: rolloutSeries };
  for (const name of only) {
    const ws = makers[name]();
    try {
      results.series.push(await series(ws));
    } finally {
      ws.done();
    }
    writeFileSync(join(dir, 'checkpoint-partial.json'), JSON.stringify(results, null, 1));
  }
  results.machine.load_end = loadavg();
  results.seconds = (Date.now() - started.getTime()) / 1000;
  return results;
}

const results = fromJson ? JSON.parse(readFileSync(fromJson, 'utf8')) : await measure();
results.table = table(results);
if (!fromJson) writeFileSync(opt('json', join(dir, 'checkpoint.json')), JSON.stringify(results, null, 1) + '\n');
console.error(results.table);
for (const w of results.series) console.error(whereText(w));
if (args.includes('--write-doc')) {
  writeDoc(docSection(results));
  writeFileSync(join(ROOT, 'docs/benchmarks-checkpoint.json'), JSON.stringify(results, null, 1) + '\n');
}
if (!fromJson) console.log(JSON.stringify(results, null, 1));
