// A soak of the store (docs/worker.md, "Costs" and "Past one database"):
// N sessions at once against the real Worker under `wrangler dev --local`
// (tests/e2e/edge.mjs), each a workspace (a small node_modules-like tree
// all sessions share the contents of, a session log that grows, files of
// its own) doing T turns of
//
//   edit → `pillbox save --ref sessions/<n>/latest` → `pillbox restore`
//   into another folder (a fresh one, or in place over the last restore)
//
// with the scheduled clean-up run every few seconds throughout (open
// pushes older than a short UPLOAD_TTL_HOURS discarded, unused packs
// collected), new packets' small packs merged as the store merges them, and
// on the way:
//   - saves killed at a random moment and run again (an honest client that
//     crashed: its open push is left to the clean-up);
//   - two writers of one session racing compare-and-swap (`--expect-ref`
//     the same value): exactly one wins, the other gets `ref_conflict`,
//     reads the ref again and retries with the new value;
//   - packets two turns old deleted.
// After every turn: the ref names the packet just saved; the restore is the
// workspace, byte for byte (types, exec bits, link targets). After every
// round: every packet a ref names is served whole and verifies against its
// digest (`pillbox checkpoint verify`), and no pack a stored packet or an
// open push uses has lost its index row or its R2 object.
//
// Usage: node tests/soak/soak.mjs [--sessions 4] [--turns 6] [--seed 1]
//          [--dir DIR] [--json FILE] [--ttl-hours 0.01] [--clean-every-ms 3000]
// Prints the figures as one JSON object on stdout (progress on stderr);
// exits 1 if anything failed on the honest path.
import { spawn, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import {
  appendFileSync, chmodSync, cpSync, existsSync, lstatSync, mkdirSync, readFileSync, readdirSync, readlinkSync,
  rmSync, symlinkSync, unlinkSync, writeFileSync,
} from 'node:fs';
import { join } from 'node:path';

import { ROOT, TOKEN, buildRelease, buildWorker, client, startEdge, PILLBOX } from '../e2e/edge.mjs';
import { packsInUse } from '../e2e/state.mjs';

const args = process.argv.slice(2);
const opt = (name, fallback) => {
  const i = args.indexOf(`--${name}`);
  return i >= 0 ? args[i + 1] : fallback;
};
const SESSIONS = Number(opt('sessions', '4'));
const TURNS = Number(opt('turns', '6'));
const SEED = Number(opt('seed', '1'));
const DIR = opt('dir', `/tmp/pillbox-soak-${process.pid}`);
const JSON_OUT = opt('json', null);
const TTL_HOURS = opt('ttl-hours', '0.01');
const CLEAN_EVERY_MS = Number(opt('clean-every-ms', '3000'));
const log = (...a) => console.error('soak:', ...a);

// ---- a seeded PRNG (the same run for the same seed) ----------------------

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
const random = prng(SEED);
const pick = (n) => Math.floor(random() * n);

// ---- processes -----------------------------------------------------------

function env(home) {
  const e = { ...process.env, PILLBOX_TOKEN: TOKEN, XDG_STATE_HOME: join(home, 'state'), XDG_CACHE_HOME: join(home, 'cache') };
  for (const k of ['CODEX_HOME', 'CLAUDE_CONFIG_DIR', 'PILLBOX_REMOTE', 'PILLBOX_CACHE_MAX_BYTES']) delete e[k];
  return e;
}

/**
 * Runs `pillbox checkpoint ARGS --quiet` (asynchronously: the sessions run
 * at once); `killAfterMs` kills it with SIGKILL that long after it started.
 * Resolves { code, json, out, ms, killed }.
 */
function pillbox(argv, home, { killAfterMs } = {}) {
  return new Promise((ok) => {
    const start = performance.now();
    const child = spawn(PILLBOX, ['checkpoint', ...argv, '--quiet'], { env: env(home), stdio: ['ignore', 'pipe', 'pipe'] });
    const out = [];
    const err = [];
    child.stdout.on('data', (d) => out.push(d));
    child.stderr.on('data', (d) => err.push(d));
    let killed = false;
    const timer = killAfterMs === undefined ? null : setTimeout(() => { killed = child.exitCode === null; child.kill('SIGKILL'); }, killAfterMs);
    // A binary that cannot start is a failure of the turn, not a crash of
    // the run (which would leave the store running).
    child.on('error', (e) => ok({ code: -1, json: null, out: e.message, ms: performance.now() - start, killed: false }));
    child.on('close', (code) => {
      if (timer) clearTimeout(timer);
      const text = Buffer.concat(out).toString('utf8');
      let json = null;
      try { json = JSON.parse(text); } catch { /* killed, or not JSON */ }
      ok({ code, json, out: text + Buffer.concat(err).toString('utf8'), ms: performance.now() - start, killed });
    });
  });
}

// ---- workspaces ----------------------------------------------------------

const SHARED_PACKAGES = ['semver', 'yaml', 'ajv', 'ws', 'json-schema-traverse', 'fast-deep-equal'];

/** The tree every session starts from: packages from this repository's node_modules, a link, a large file. */
function sharedTree(into) {
  for (const p of SHARED_PACKAGES) {
    const from = join(ROOT, 'node_modules', p);
    if (existsSync(from)) cpSync(from, join(into, 'node_modules', p), { recursive: true, dereference: false });
  }
  mkdirSync(join(into, 'node_modules/.bin'), { recursive: true });
  if (existsSync(join(into, 'node_modules/semver/bin/semver.js'))) symlinkSync('../semver/bin/semver.js', join(into, 'node_modules/.bin/semver'));
  // A large body (several chunks): the same in every session.
  const big = Buffer.alloc(1_200_000);
  for (let i = 0; i < big.length; i += 32) createHash('sha256').update(`shared ${i}`).digest().copy(big, i);
  writeFileSync(join(into, 'node_modules/shared.bin'), big);
}

function sessionFiles(ws, n) {
  mkdirSync(join(ws, 'src'), { recursive: true });
  for (let f = 0; f < 8; f++) writeFileSync(join(ws, `src/m${f}.js`), `// session ${n} module ${f}\nexport const m${f} = ${n * 100 + f};\n`);
  writeFileSync(join(ws, 'run.sh'), `#!/bin/sh\necho session ${n}\n`);
  chmodSync(join(ws, 'run.sh'), 0o755);
  mkdirSync(join(ws, 'logs'), { recursive: true });
  // A log over 256 KiB that grows each turn (several chunks, appended to).
  writeFileSync(join(ws, 'logs/session.log'), Buffer.alloc(300_000, `session ${n} `));
}

/** One turn's edit: a module changed, the log grown, now and then a file added, removed or its exec bit flipped. */
function edit(ws, n, turn, who = 'a') {
  appendFileSync(join(ws, `src/m${turn % 8}.js`), `export const t${turn}${who} = ${turn};\n`);
  appendFileSync(join(ws, 'logs/session.log'), `turn ${turn} ${who} ${'x'.repeat(16_000)}\n`);
  const r = pick(4);
  if (r === 0) writeFileSync(join(ws, `src/new-${turn}-${who}.js`), `export const fresh = '${n}/${turn}/${who}';\n`);
  if (r === 1) {
    const victims = readdirSync(join(ws, 'src')).filter((f) => f.startsWith('new-'));
    if (victims.length) unlinkSync(join(ws, 'src', victims[pick(victims.length)]));
  }
  if (r === 2) chmodSync(join(ws, 'run.sh'), (lstatSync(join(ws, 'run.sh')).mode & 0o100) ? 0o644 : 0o755);
}

/** Every entry below `dir`: path → type, exec bit, sha256 or link target. */
function treeOf(dir) {
  const out = new Map();
  const walk = (rel) => {
    for (const name of readdirSync(join(dir, rel)).sort()) {
      const p = rel ? `${rel}/${name}` : name;
      const st = lstatSync(join(dir, p));
      if (st.isSymbolicLink()) out.set(p, `link ${readlinkSync(join(dir, p))}`);
      else if (st.isDirectory()) { out.set(p, 'dir'); walk(p); }
      else out.set(p, `file ${(st.mode & 0o100) ? 'x' : '-'} ${createHash('sha256').update(readFileSync(join(dir, p))).digest('hex')}`);
    }
  };
  walk('');
  return out;
}

function differences(a, b) {
  const diffs = [];
  for (const [p, v] of a) if (b.get(p) !== v) diffs.push(`${p}: ${v} ≠ ${b.get(p) ?? 'missing'}`);
  for (const p of b.keys()) if (!a.has(p)) diffs.push(`${p}: extra`);
  return diffs;
}

// ---- the run -------------------------------------------------------------

const figures = {
  sessions: SESSIONS, turns_per_session: TURNS, seed: SEED, ttl_hours: Number(TTL_HOURS),
  turns: 0, saves: 0, restores: { fresh: 0, in_place: 0 }, kills: 0, killed_then_rerun: 0,
  races: 0, race_conflicts: 0, retries: 0, deletes: 0, cleanups: 0, packets_verified: 0, packs_checked: 0,
  errors: [], save_ms: [], restore_ms: [],
};
const fail = (what) => { figures.errors.push(what); log('ERROR', what); };

function percentile(sorted, q) {
  if (!sorted.length) return null;
  return sorted[Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1)];
}

/** The pillbox binary, in release (quick when it is up to date). */
function buildCli() {
  const r = spawnSync('cargo', ['build', '--quiet', '--release', '--locked', '-p', 'pillbox'], { cwd: ROOT, encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`cargo build -p pillbox failed:\n${r.stderr}`);
}

async function main() {
  buildCli();
  buildRelease();
  buildWorker();
  rmSync(DIR, { recursive: true, force: true });
  mkdirSync(DIR, { recursive: true });
  const edge = await startEdge({ UPLOAD_TTL_HOURS: TTL_HOURS }, { testScheduled: true });
  const api = client(edge.url);
  const started = performance.now();
  let cleaning = true;
  const cleaner = (async () => {
    while (cleaning) {
      await new Promise((ok) => setTimeout(ok, CLEAN_EVERY_MS));
      if (!cleaning) break;
      try {
        await edge.scheduled();
        figures.cleanups += 1;
      } catch (e) {
        fail(`the clean-up: ${e.message}`);
      }
    }
  })();
  try {
    const shared = join(DIR, 'shared');
    sharedTree(shared);
    const sessions = [];
    for (let n = 0; n < SESSIONS; n++) {
      const root = join(DIR, `s${n}`);
      const s = { n, ref: `sessions/${n}/latest`, ws: join(root, 'ws'), twin: join(root, 'twin'), laptop: join(root, 'laptop'),
        laptop2: join(root, 'laptop2'), desk: join(root, 'desk'), inPlace: join(root, 'restored'), digests: [], fresh: 0,
        url: edge.url };
      cpSync(shared, s.ws, { recursive: true, verbatimSymlinks: true });
      sessionFiles(s.ws, n);
      sessions.push(s);
    }
    for (let turn = 0; turn < TURNS; turn++) {
      log(`round ${turn + 1}/${TURNS}`);
      await Promise.all(sessions.map((s) => oneTurn(s, turn, api)));
      await checkStore(sessions, api, edge);
    }
  } finally {
    cleaning = false;
    await cleaner;
    await edge.stop();
  }
  figures.seconds = (performance.now() - started) / 1000;
  const stats = (list) => {
    const sorted = [...list].sort((a, b) => a - b);
    return { count: sorted.length, p50_ms: Math.round(percentile(sorted, 0.5)), p95_ms: Math.round(percentile(sorted, 0.95)), p99_ms: Math.round(percentile(sorted, 0.99)) };
  };
  figures.save = stats(figures.save_ms);
  figures.restore = stats(figures.restore_ms);
  delete figures.save_ms;
  delete figures.restore_ms;
  figures.error_count = figures.errors.length;
  const text = JSON.stringify(figures, null, 2);
  if (JSON_OUT) writeFileSync(JSON_OUT, text + '\n');
  console.log(text);
  process.exitCode = figures.errors.length ? 1 : 0;
}

/** A save that must succeed; returns its JSON. */
async function save(s, ws, home, turn, extra = []) {
  const r = await pillbox(['save', ws, '--remote', s.url, '--ref', s.ref, ...extra], home);
  figures.saves += 1;
  if (r.code !== 0) { fail(`session ${s.n} turn ${turn}: save exited ${r.code}: ${r.out.slice(0, 600)}`); return null; }
  figures.save_ms.push(r.ms);
  return r.json;
}

async function oneTurn(s, turn, api) {
  figures.turns += 1;
  const current = async () => (await api.call('GET', `/v1/refs/${s.ref}`)).json?.digest ?? null;
  let saved;
  if (turn % 4 === 2 && turn > 0) {
    // Two writers of this session race compare-and-swap from the same value.
    figures.races += 1;
    rmSync(s.twin, { recursive: true, force: true });
    cpSync(s.ws, s.twin, { recursive: true, verbatimSymlinks: true });
    edit(s.ws, s.n, turn, 'a');
    edit(s.twin, s.n, turn, 'b');
    const held = await current();
    const expect = ['--expect-ref', held ?? 'absent'];
    const [a, b] = await Promise.all([
      pillbox(['save', s.ws, '--remote', s.url, '--ref', s.ref, ...expect], s.laptop),
      pillbox(['save', s.twin, '--remote', s.url, '--ref', s.ref, ...expect], s.laptop2),
    ]);
    figures.saves += 2;
    const won = [a, b].filter((r) => r.code === 0);
    const lost = [a, b].filter((r) => r.code !== 0);
    if (won.length !== 1 || lost.length !== 1 || lost[0].json?.code !== 'ref_conflict') {
      fail(`session ${s.n} turn ${turn}: a race of two writers ended ${a.code}/${b.code} (${a.json?.code ?? ''} ${b.json?.code ?? ''}): ${(lost[0] ?? a).out.slice(0, 400)}`);
      return;
    }
    figures.race_conflicts += 1;
    figures.save_ms.push(won[0].ms);
    s.digests.push(won[0].json.digest);
    // The loser reads the ref again and retries from what it holds now.
    const loserIsTwin = lost[0] === b;
    const now = await current();
    if (now !== won[0].json.digest) fail(`session ${s.n} turn ${turn}: the winner's packet is not the ref's`);
    figures.retries += 1;
    saved = await save(s, loserIsTwin ? s.twin : s.ws, loserIsTwin ? s.laptop2 : s.laptop, turn, ['--expect-ref', now]);
    if (loserIsTwin) {
      // The session goes on from the folder that saved last.
      [s.ws, s.twin] = [s.twin, s.ws];
      [s.laptop, s.laptop2] = [s.laptop2, s.laptop];
    }
  } else {
    edit(s.ws, s.n, turn);
    if (turn % 3 === 1) {
      // A save killed at a random moment, then run again.
      const killed = await pillbox(['save', s.ws, '--remote', s.url, '--ref', s.ref], s.laptop, { killAfterMs: 30 + pick(1500) });
      if (killed.killed) figures.kills += 1;
      else if (killed.code !== 0) fail(`session ${s.n} turn ${turn}: a save exited ${killed.code}: ${killed.out.slice(0, 400)}`);
      figures.killed_then_rerun += 1;
      figures.retries += 1;
    }
    saved = await save(s, s.ws, s.laptop, turn);
  }
  if (!saved) return;
  const digest = saved.digest;
  s.digests.push(digest);
  const held = await current();
  if (held !== digest) fail(`session ${s.n} turn ${turn}: the ref names ${held}, not the packet just saved (${digest})`);

  // Restore it: into a fresh folder, or in place over the last restore.
  const inPlace = turn % 2 === 1 && existsSync(s.inPlace);
  const into = inPlace ? s.inPlace : join(s.desk, `fresh-${s.fresh++}`);
  const flags = inPlace || pick(2) ? [] : ['--no-cache'];
  const r = await pillbox(['restore', s.ref, '--remote', s.url, '--into', into, ...flags], s.desk);
  if (r.code !== 0) { fail(`session ${s.n} turn ${turn}: restore (${inPlace ? 'in place' : 'fresh'}) exited ${r.code}: ${r.out.slice(0, 600)}`); return; }
  figures.restore_ms.push(r.ms);
  figures.restores[inPlace ? 'in_place' : 'fresh'] += 1;
  if (r.json.digest !== digest) fail(`session ${s.n} turn ${turn}: the restore brought ${r.json.digest}, not ${digest}`);
  const diffs = differences(treeOf(s.ws), treeOf(into));
  if (diffs.length) fail(`session ${s.n} turn ${turn}: the restore differs from the workspace: ${diffs.slice(0, 5).join('; ')}`);
  // A fresh folder is checked, then goes (the long run would fill the disk).
  if (!inPlace) rmSync(into, { recursive: true, force: true });
  if (!inPlace && !existsSync(s.inPlace)) {
    // The folder later turns restore in place over (left behind on the
    // turns between: the next restore there goes over older checkpoints).
    const again = await pillbox(['restore', s.ref, '--remote', s.url, '--into', s.inPlace], s.desk);
    if (again.code !== 0) fail(`session ${s.n} turn ${turn}: restore into ${s.inPlace} exited ${again.code}: ${again.out.slice(0, 400)}`);
    else { figures.restore_ms.push(again.ms); figures.restores.fresh += 1; }
  }

  // Packets two turns old go.
  while (s.digests.length > 2) {
    const old = s.digests.shift();
    if (s.digests.includes(old)) continue;
    const d = await api.call('DELETE', `/v1/packets/${old}`);
    if (d.status === 204) figures.deletes += 1;
    else if (d.status !== 404) fail(`session ${s.n} turn ${turn}: deleting ${old} answered ${d.status} ${JSON.stringify(d.json)}`);
  }
}

/** Every packet a ref names verifies whole; no pack in use lost its row or object. */
async function checkStore(sessions, api, edge) {
  const named = new Set();
  for (const s of sessions) {
    const r = await api.call('GET', `/v1/refs/${s.ref}`);
    if (r.status === 200) named.add(r.json.digest);
  }
  for (const digest of named) {
    const got = await api.call('GET', `/v1/packets/${digest}`);
    if (got.status !== 200) { fail(`packet ${digest}: GET answered ${got.status}`); continue; }
    const file = join(DIR, 'verify.pkt');
    writeFileSync(file, got.bytes);
    const v = spawnSync(PILLBOX, ['checkpoint', 'verify', file, '--digest', digest, '--quiet'], { encoding: 'utf8', env: env(join(DIR, 'verifier')) });
    if (v.status !== 0) fail(`packet ${digest}: served bytes do not verify: ${v.stdout}${v.stderr}`);
    else figures.packets_verified += 1;
  }
  const packs = packsInUse(edge.state);
  figures.packs_checked += packs.needed.length;
  if (!packs.needed.length) fail('no pack in use: the state files were not found');
  if (packs.noRow.length) fail(`packs in use without an index row: ${packs.noRow.join(', ')}`);
  if (packs.noObject.length) fail(`packs in use without an R2 object: ${packs.noObject.join(', ')}`);
}

main().catch((e) => {
  console.error(e);
  process.exitCode = 2;
});
