// Restore benchmark (docs/benchmarks.md, "Restore"): the release `pillbox`
// against the local Worker under `wrangler dev --local`, with restic in
// the same run as the yardstick, on the folder given (a tmpfs: see
// docs/benchmarks.md for the mount).
//
//   1. a fresh restore (--no-cache) of a real workspace against `pull
//      --whole` + `unpack` of the same packet, and against restic's
//      fresh restore of a snapshot of the same folder;
//   2. a restore over the previous checkpoint after a one-file edit, one
//      deletion and one new file (in place): forth (the new checkpoint over
//      the old) and back (the old over the new: the deleted file's bytes
//      come back), each against `restic restore` of the same snapshot onto
//      its restore of the other; the first restore over a folder a fresh
//      restore left (whose files are all hashed, being stamped after that
//      restore's start) apart from the rest;
//   3. a workspace with a Codex rollout of --rollout-mib MiB: a turn that
//      appended 16 KB, restored over the previous turn: bytes received.
//
// The series run interleaved, --reps times; each figure is the median.
// Usage: node bench/restore.mjs --workspace DIR --dir TMPFS_DIR [--reps N] [--rollout-mib N]
// Prints one JSON object on stdout (progress on stderr).
import { spawnSync } from 'node:child_process';
import { appendFileSync, cpSync, mkdirSync, readFileSync, rmSync, unlinkSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, release, totalmem } from 'node:os';
import { join } from 'node:path';

import { ROOT, TARGET, TOKEN, buildRelease, buildWorker, startEdge } from '../tests/e2e/edge.mjs';
import { startProxy } from '../tests/e2e/proxy.mjs';
import { THREAD, placeRollout } from './rollout.mjs';

const args = process.argv.slice(2);
const opt = (name, fallback) => {
  const i = args.indexOf(`--${name}`);
  return i >= 0 ? args[i + 1] : fallback;
};
const source = opt('workspace', null);
const dir = opt('dir', null);
if (!source || !dir) throw new Error('usage: node bench/restore.mjs --workspace DIR --dir TMPFS_DIR [--reps N] [--rollout-mib N]');
const reps = Number(opt('reps', '3'));
const rolloutMib = Number(opt('rollout-mib', '200'));
const PILLBOX = join(TARGET, 'release/pillbox');
const log = (...a) => console.error('restore bench:', ...a);
const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};

function run(cmd, argv, options = {}) {
  const started = process.hrtime.bigint();
  const r = spawnSync(cmd, argv, { cwd: ROOT, encoding: 'utf8', maxBuffer: 1 << 28, ...options });
  const seconds = Number(process.hrtime.bigint() - started) / 1e9;
  if (r.status !== 0 && !options.allowFailure) throw new Error(`${cmd} ${argv.join(' ')} failed (${r.status}):\n${r.stdout}\n${r.stderr}`);
  return { ...r, seconds };
}

let hosts = 0;
function host(name) {
  hosts += 1;
  const h = join(dir, `host-${hosts}-${name}`);
  return { XDG_STATE_HOME: join(h, 'state'), XDG_CACHE_HOME: join(h, 'cache') };
}

function pillbox(argv, extraEnv) {
  const env = { ...process.env, PILLBOX_TOKEN: TOKEN, ...extraEnv };
  for (const k of ['CODEX_HOME', 'PILLBOX_REMOTE', 'PILLBOX_CACHE_MAX_BYTES']) delete env[k];
  const r = run(PILLBOX, ['checkpoint', ...argv, '--quiet'], { env });
  const out = argv[0] === 'pull' && argv.includes('-') ? r.stderr : r.stdout;
  return { json: JSON.parse(out.trim()), seconds: r.seconds };
}

const RESTIC_ENV = { ...process.env, RESTIC_PASSWORD: 'bench', RESTIC_CACHE_DIR: join(dir, 'restic-cache') };
function restic(argv, options = {}) {
  return run('restic', ['--repo', join(dir, 'restic-repo'), '--quiet', ...argv], { env: RESTIC_ENV, ...options });
}

/**
 * restic 0.14 restoring over its previous restore: it rewrites every file,
 * and reports each symlink already there as an error (exit 1) while going
 * on; the time is what it took all the same.
 */
function resticOver(snapshot, target) {
  const r = restic(['restore', snapshot, '--target', target], { allowFailure: true });
  const errors = (r.stderr.match(/^ignoring error/gm) ?? []).length;
  const other = r.stderr.split('\n').filter((l) => l.startsWith('ignoring error') && !l.includes('file exists')).length;
  if (r.status !== 0 && (errors === 0 || other > 0)) throw new Error(`restic restore failed:\n${r.stderr}`);
  return { seconds: r.seconds, errors };
}

let n = 0;
const fresh = (name) => join(dir, `${(n += 1)}-${name}`);

async function main() {
  mkdirSync(dir, { recursive: true });
  buildWorker();
  buildRelease();
  mkdirSync(join(dir, 'edge-state'), { recursive: true });
  const edge = await startEdge({}, { state: join(dir, 'edge-state') });
  const store = await startProxy(edge.url);
  const remote = ['--remote', store.url];
  const out = {
    machine: { kernel: release(), cores: cpus().length, cpu: cpus()[0]?.model, ram_gib: Math.round(totalmem() / 2 ** 30), node: process.version, restic: run('restic', ['version']).stdout.trim() },
    date: new Date().toISOString(),
    load_average_start: loadavg(),
    reps,
  };
  try {
    // ---- the workspace and its first checkpoint --------------------------
    const ws = join(dir, 'a-ws');
    log(`copying ${source}`);
    cpSync(source, ws, { recursive: true, verbatimSymlinks: true });
    const laptop = host('laptop');
    const ref = 'sessions/bench/restore';
    const s1 = pillbox(['save', ws, ...remote, '--ref', ref], laptop).json;
    out.workspace = { members: s1.members, bytes: s1.totals.bytes, size: s1.size };
    restic(['init']);
    const wsReal = ws;
    restic(['backup', wsReal]);

    // ---- 1. fresh restores -------------------------------------------------
    const series = { restore: [], pull_whole: [], unpack: [], pull_plus_unpack: [], restic: [], restore_bytes: [], pull_bytes: [] };
    for (let i = 0; i < reps; i += 1) {
      log(`fresh restore ${i + 1}/${reps}`);
      const into = fresh('fresh');
      const r = pillbox(['restore', ref, ...remote, '--into', into, '--no-cache'], host('fresh'));
      series.restore.push(r.seconds);
      series.restore_bytes.push(r.json.bytes_received);
      rmSync(into, { recursive: true, force: true });

      const file = fresh('whole.tar');
      const p = pillbox(['pull', ref, ...remote, '-o', file, '--whole', '--no-cache'], host('pull'));
      const u = pillbox(['unpack', file, '--digest', p.json.digest, '--into', fresh('unpacked')], {});
      series.pull_whole.push(p.seconds);
      series.unpack.push(u.seconds);
      series.pull_plus_unpack.push(p.seconds + u.seconds);
      series.pull_bytes.push(p.json.bytes_received);
      rmSync(file, { force: true });

      const target = fresh('restic-fresh');
      series.restic.push(restic(['restore', 'latest', '--target', target]).seconds);
      rmSync(target, { recursive: true, force: true });
    }
    out.fresh = {
      restore_s: median(series.restore),
      pull_whole_s: median(series.pull_whole),
      unpack_s: median(series.unpack),
      pull_whole_plus_unpack_s: median(series.pull_plus_unpack),
      restic_s: median(series.restic),
      restore_bytes_received: median(series.restore_bytes),
      pull_whole_bytes_received: median(series.pull_bytes),
      ratio_to_pull_whole_plus_unpack: median(series.restore) / median(series.pull_plus_unpack),
      series,
    };

    // ---- 2. in place -------------------------------------------------------
    // Checkpoint 2: an edit, a deletion, a new file.
    const edited = join(ws, 'package.json');
    const deleted = join(ws, 'node_modules/.package-lock.json');
    const added = join(ws, 'notes/turn.md');
    const v1 = readFileSync(edited);
    const gone = readFileSync(deleted);
    writeFileSync(edited, Buffer.concat([v1, Buffer.from('\n')]));
    unlinkSync(deleted);
    mkdirSync(join(ws, 'notes'), { recursive: true });
    writeFileSync(added, '# the next turn\n');
    const s2 = pillbox(['save', ws, ...remote, '--ref', `${ref}-2`], laptop).json;
    restic(['backup', wsReal]);
    const snapshots = JSON.parse(restic(['snapshots', '--json']).stdout).map((s) => s.short_id);
    const digests = [s1.digest, s2.digest];

    // A desk that restored checkpoint 1 fresh, then goes forth (to
    // checkpoint 2: the edit, the deletion, the new file) and back (to
    // checkpoint 1: the deleted file's bytes come back too).
    const desk = host('desk');
    const into = fresh('desk-ws');
    pillbox(['restore', digests[0], ...remote, '--into', into, '--no-cache'], desk);
    const first = pillbox(['restore', digests[1], ...remote, '--into', into, '--no-cache'], desk);
    out.in_place_first_over_a_fresh_restore = { seconds: first.seconds, bytes_received: first.json.bytes_received, written: first.json.written, removed: first.json.removed };
    pillbox(['restore', digests[0], ...remote, '--into', into, '--no-cache'], desk);
    const resticTarget = fresh('restic-desk');
    restic(['restore', snapshots[0], '--target', resticTarget]);
    writeFileSync(join(dir, 'partial.json'), JSON.stringify(out, null, 1));
    const directions = { forth: 1, back: 0 };
    const place = {};
    for (const name of Object.keys(directions)) place[name] = { restore: [], bytes: [], fetched: [], written: [], removed: [], restic: [] };
    for (let i = 0; i < reps; i += 1) {
      for (const [name, k] of Object.entries(directions)) {
        log(`in place ${name} ${i + 1}/${reps}`);
        const r = pillbox(['restore', digests[k], ...remote, '--into', into, '--no-cache'], desk);
        const p = place[name];
        p.restore.push(r.seconds);
        p.bytes.push(r.json.bytes_received);
        p.fetched.push(r.json.delta.fetched_bytes);
        p.written.push(r.json.written);
        p.removed.push(r.json.removed);
        const over = resticOver(snapshots[k], resticTarget);
        p.restic.push(over.seconds);
        p.restic_symlink_errors = over.errors;
      }
    }
    out.in_place = {};
    for (const [name, p] of Object.entries(place)) {
      out.in_place[name] = {
        restore_s: median(p.restore),
        bytes_received: median(p.bytes),
        body_bytes_fetched: median(p.fetched),
        restic_over_previous_s: median(p.restic),
        ratio_to_restic: median(p.restore) / median(p.restic),
        series: p,
      };
    }
    // Over the folder a save left: the laptop goes back to checkpoint 1.
    writeFileSync(edited, v1);
    writeFileSync(deleted, gone);
    rmSync(join(ws, 'notes'), { recursive: true });
    const overSaved = pillbox(['restore', digests[0], ...remote, '--into', ws, '--no-cache', '--discard-local'], laptop);
    out.in_place_over_a_saved_folder = { seconds: overSaved.seconds, bytes_received: overSaved.json.bytes_received };
    rmSync(into, { recursive: true, force: true });
    rmSync(resticTarget, { recursive: true, force: true });

    // ---- 3. a rollout that grew ---------------------------------------------
    const rws = join(dir, 'rollout-ws');
    const home = join(dir, 'rollout-home');
    const rollout = placeRollout(dir, rolloutMib, home);
    cpSync(join(ROOT, 'native-cli/src'), join(rws, 'src'), { recursive: true });
    const harness = ['--harness', 'codex', '--thread', THREAD, '--codex-home', home];
    const rref = 'sessions/bench/rollout';
    pillbox(['save', rws, ...remote, '--ref', rref, ...harness], laptop);
    const rdesk = host('rollout-desk');
    const rinto = fresh('rollout-desk-ws');
    const rhome = fresh('rollout-desk-home');
    pillbox(['restore', rref, ...remote, '--into', rinto, '--codex-home', rhome, '--no-cache'], rdesk);
    const turns = { seconds: [], bytes: [] };
    for (let i = 0; i < reps; i += 1) {
      appendFileSync(rollout, turn(i));
      pillbox(['save', rws, ...remote, '--ref', rref, ...harness], laptop);
      const r = pillbox(['restore', rref, ...remote, '--into', rinto, '--codex-home', rhome, '--no-cache'], rdesk);
      turns.seconds.push(r.seconds);
      turns.bytes.push(r.json.bytes_received);
    }
    out.rollout = { mib: rolloutMib, turn_bytes: turn(0).length, restore_s: median(turns.seconds), bytes_received: median(turns.bytes), series: turns };
  } finally {
    await store.stop();
    await edge.stop();
  }
  out.load_average_end = loadavg();
  console.log(JSON.stringify(out, null, 1));
}

/** About 16 KB of a Codex turn. */
function turn(i) {
  const line = (type, payload) => JSON.stringify({ timestamp: `2026-12-01T10:00:${String(i % 60).padStart(2, '0')}.000Z`, type, payload }) + '\n';
  const excerpt = readFileSync(join(ROOT, 'docs/transfer.md'), 'utf8').slice(i * 500, i * 500 + 15_000);
  return line('response_item', { type: 'message', role: 'user', content: [{ type: 'input_text', text: `Turn ${i}` }] })
    + line('response_item', { type: 'function_call_output', call_id: `call_${i}`, output: excerpt })
    + line('response_item', { type: 'message', role: 'assistant', content: [{ type: 'output_text', text: 'done' }] });
}

await main();
