// Memory benchmark (docs/benchmarks.md, "Memory at the packet limit"): the
// peak resident memory of each release `pillbox` command, and the Worker's
// wasm memory under `wrangler dev --local` (BENCH_ROUTES=1), for
// workspaces of about 1, 4 and 16 GiB (the format's packet limit is
// 16 GiB). Bounded memory shows as a ratio to the smallest size near 1.
//
// A workspace is four sparse files of a quarter of the size each (holes
// cost nothing on a tmpfs), each with 4 KiB of random bytes every
// --step-mib MiB (so the store receives and proves one distinct chunk per
// step; the holes are one zero chunk, deduplicated), and --small files of
// a few KiB of text. Per size, in order:
//   pack      `pack -o -` into `dd conv=sparse` (the packet file sparse
//             on the tmpfs too)
//   verify    that packet file
//   unpack    it into --disk (real bytes), deleted after
//   save      into a fresh local store; `save (second)` after an edit
//             (one small file changed, one added, 4 KiB of a large file)
//   restore   fresh (--no-cache, the first checkpoint) into --disk, then
//             in place (the second checkpoint over it), deleted after
// Each command runs under /usr/bin/time (its maximum resident set size);
// the Worker's figure is the largest `wasm_memory` its Pillbox-Timing
// headers reported (a fresh Worker per size: linear memory only grows), and
// workerd's processes' VmHWM after the size's run.
//
// With --inspector, the inspector page (inspector/dist, built by
// inspector/build.sh) verifies each packet file in headless Chromium too:
// its renderer process's VmHWM and the page's JS heap. --only inspector
// measures pack, verify and the inspector alone; --only edge save and
// restore alone.
//
// Usage: node bench/memory.mjs --dir TMPFS_DIR [--disk DIR] [--sizes 1,4,16]
//        [--step-mib N] [--small N] [--inspector] [--only inspector|edge]
//        [--write-doc] [--from-json FILE] [--merge-inspector FILE]
//        [--merge-worker FILE]
// A quick look: --sizes 0.0625,0.25. Prints the JSON on stdout.
import { spawnSync } from 'node:child_process';
import { appendFileSync, closeSync, existsSync, ftruncateSync, mkdirSync, mkdtempSync, openSync, readdirSync, readFileSync, rmSync, statfsSync, writeFileSync, writeSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { cpus, loadavg, release, totalmem } from 'node:os';
import { join } from 'node:path';

import { ROOT, TARGET, TOKEN, buildRelease, buildWorker, client, startEdge } from '../tests/e2e/edge.mjs';
import { startProxy } from '../tests/e2e/proxy.mjs';

const args = process.argv.slice(2);
const opt = (name, fallback) => {
  const i = args.indexOf(`--${name}`);
  return i >= 0 ? args[i + 1] : fallback;
};
const MIB = 2 ** 20;
const GIB = 2 ** 30;
const PILLBOX = join(TARGET, 'release/pillbox');
const TIME = '/usr/bin/time';
const log = (...a) => console.error('memory bench:', ...a);
/** Disk space left free at all times (bytes). */
const KEEP_FREE = 5 * GIB;

const q = (s) => `'${String(s).replace(/'/g, `'\\''`)}'`;

/**
 * Runs `pillbox checkpoint ARGV` under /usr/bin/time; `pipe` (a shell
 * command) takes its stdout. Returns { rss_mib, seconds, json }.
 */
function pillbox(dir, argv, extraEnv = {}, pipe = null) {
  const rss = join(dir, 'rss');
  const report = join(dir, 'report.json');
  const env = { PILLBOX_TOKEN: TOKEN, ...extraEnv };
  const cmd = `${TIME} -f %M -o ${q(rss)} ${q(PILLBOX)} checkpoint ${argv.map(q).join(' ')} --quiet`;
  const started = process.hrtime.bigint();
  const script = pipe ? `${cmd} --report ${q(report)} | ${pipe}` : `${cmd} > ${q(report)}`;
  const clean = { ...process.env };
  for (const k of ['CODEX_HOME', 'PILLBOX_REMOTE', 'PILLBOX_CACHE_MAX_BYTES']) delete clean[k];
  const r = spawnSync('bash', ['-c', `set -o pipefail; ${script}`], { cwd: ROOT, encoding: 'utf8', env: { ...clean, ...env } });
  const seconds = Number(process.hrtime.bigint() - started) / 1e9;
  if (r.status !== 0) throw new Error(`pillbox ${argv.join(' ')} failed (${r.status}):\n${r.stderr}\n${readFileSync(report, 'utf8').slice(0, 2000)}`);
  const kib = Number(readFileSync(rss, 'utf8').trim().split('\n').pop());
  return { rss_mib: kib / 1024, seconds, json: JSON.parse(readFileSync(report, 'utf8').trim()) };
}

/** A deterministic pseudo-random stream (xorshift32) for the small files' text. */
function prng(seed) {
  let x = seed >>> 0 || 1;
  return () => {
    x ^= x << 13; x >>>= 0; x ^= x >>> 17; x ^= x << 5; x >>>= 0;
    return x;
  };
}
const WORDS = 'the packet store verifies every member chunk before it lands and a restore writes only what changed since the checkpoint'.split(' ');

/** Makes the workspace of `bytes` bytes (sparse) at `ws`. */
function makeWorkspace(ws, bytes, stepMib, small) {
  const rand = prng(0x9e3779b9);
  let smallBytes = 0;
  for (let i = 0; i < small; i += 1) {
    const d = join(ws, 'src', `m${i % 50}`);
    if (i < 50) mkdirSync(d, { recursive: true });
    const n = 200 + (rand() % 900);
    const text = Array.from({ length: n }, () => WORDS[rand() % WORDS.length]).join(' ') + `\n// ${i}\n`;
    writeFileSync(join(d, `f${i}.txt`), text);
    smallBytes += Buffer.byteLength(text);
  }
  mkdirSync(join(ws, 'data'), { recursive: true });
  // 8 MiB left for the members' headers and packet.json: the packet of the
  // largest size stays within the format's 16 GiB.
  const per = Math.floor((bytes - smallBytes - 8 * MIB) / 4 / MIB) * MIB;
  if (per > 8 * GIB - 1) throw new Error('a member is at most 8 GiB - 1');
  for (let i = 0; i < 4; i += 1) {
    const fd = openSync(join(ws, 'data', `big-${i}.img`), 'w');
    ftruncateSync(fd, per);
    for (let off = 0; off + 4096 <= per; off += stepMib * MIB) writeSync(fd, randomBytes(4096), 0, 4096, off);
    closeSync(fd);
  }
  return { bytes: smallBytes + 4 * per, large_files: 4, large_file_bytes: per, small_files: small, small_bytes: smallBytes };
}

/** One small file changed, one added, 4 KiB in the middle of a large file. */
function editWorkspace(ws, per) {
  appendFileSync(join(ws, 'src/m0/f0.txt'), 'one more line\n');
  writeFileSync(join(ws, 'src/m0/new.txt'), 'a new file of the next turn\n');
  const fd = openSync(join(ws, 'data/big-1.img'), 'r+');
  writeSync(fd, randomBytes(4096), 0, 4096, Math.floor(per / 2 / MIB) * MIB + 8192);
  closeSync(fd);
}

function freeBytes(path) {
  const s = statfsSync(path);
  return s.bavail * s.bsize;
}

/** The most wasm memory the Worker reported in the proxy's log entries from `from` on. */
function wasmPeak(entries, from) {
  let peak = 0;
  for (const e of entries.slice(from)) {
    for (const part of (e.timing ?? '').split(';')) {
      const [k, v] = part.split('=');
      if (k === 'wasm_memory') peak = Math.max(peak, Number(v));
    }
  }
  return peak;
}

/**
 * The peak resident memory (VmHWM), MiB, of the workerd processes of the
 * process group `pgid` (this run's `wrangler dev`, not another one on the
 * machine): the largest and the sum.
 */
function workerdHwm(pgid) {
  const hwm = [];
  for (const pid of readdirSync('/proc').filter((d) => /^\d+$/.test(d))) {
    try {
      if (readFileSync(`/proc/${pid}/comm`, 'utf8').trim() !== 'workerd') continue;
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      if (Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[2]) !== pgid) continue;
      const m = /VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
      if (m) hwm.push(Number(m[1]) / 1024);
    } catch { /* gone */ }
  }
  return { max_mib: Math.max(0, ...hwm), sum_mib: hwm.reduce((a, b) => a + b, 0), processes: hwm.length, scope: 'process group' };
}

async function measureSize(gib, dir, disk, stepMib, small, inspector, only) {
  const at = join(dir, `size-${gib}`);
  rmSync(at, { recursive: true, force: true });
  mkdirSync(at, { recursive: true });
  const ws = join(at, 'ws');
  log(`${gib} GiB: making the workspace`);
  const shape = makeWorkspace(ws, Math.round(gib * GIB), stepMib, small);
  const out = { gib, workspace: shape, commands: {}, skipped: {} };
  const note = (name, r) => {
    out.commands[name] = { rss_mib: Math.round(r.rss_mib * 10) / 10, seconds: Math.round(r.seconds * 10) / 10, ...(r.wasm ? { worker_wasm_mib: r.wasm / MIB } : {}) };
    log(`${gib} GiB ${name}: ${r.rss_mib.toFixed(1)} MiB, ${r.seconds.toFixed(1)} s${r.wasm ? `, Worker wasm ${(r.wasm / MIB).toFixed(1)} MiB` : ''}`);
  };
  const roomFor = (name, bytes) => {
    const free = freeBytes(disk);
    if (free - bytes >= KEEP_FREE) return true;
    out.skipped[name] = `the disk has ${(free / GIB).toFixed(1)} GiB free; ${(bytes / GIB).toFixed(1)} GiB more would leave less than ${KEEP_FREE / GIB} GiB`;
    log(`${gib} GiB ${name}: skipped (${out.skipped[name]})`);
    return false;
  };

  // pack, verify, unpack
  if (only !== 'edge') {
    const tar = join(at, 'packet.tar');
    const pack = pillbox(at, ['pack', ws, '-o', '-'], {}, `dd of=${q(tar)} conv=sparse bs=4096 status=none`);
    note('pack', pack);
    out.packet = { size: pack.json.size, members: pack.json.members, digest: pack.json.digest };
    note('verify', pillbox(at, ['verify', tar, '--digest', pack.json.digest]));
    if (inspector) {
      out.inspector = await inspectorMemory(tar);
      log(`${gib} GiB inspector: renderer ${out.inspector.renderer_hwm_mib} MiB, JS heap ${out.inspector.js_heap_used_mib} MiB, ${out.inspector.seconds} s`);
    }
    if (only === 'inspector') {
      rmSync(at, { recursive: true, force: true });
      return out;
    }
    if (roomFor('unpack', shape.bytes)) {
      const into = mkdtempSync(join(disk, 'pillbox-mem-unpack-'));
      rmSync(into, { recursive: true });
      try {
        note('unpack', pillbox(at, ['unpack', tar, '--digest', pack.json.digest, '--into', into]));
      } finally {
        rmSync(into, { recursive: true, force: true });
      }
    }
    rmSync(tar, { force: true });
  }

  // save, restore: a fresh Worker per size
  const state = join(at, 'edge-state');
  mkdirSync(state, { recursive: true });
  const edge = await startEdge({ BENCH_ROUTES: '1', MAX_PACKET_BYTES: String(16 * GIB) }, { state });
  const store = await startProxy(edge.url);
  const remote = ['--remote', store.url];
  const laptop = { XDG_STATE_HOME: join(at, 'laptop/state'), XDG_CACHE_HOME: join(at, 'laptop/cache') };
  const desk = { XDG_STATE_HOME: join(at, 'desk/state'), XDG_CACHE_HOME: join(at, 'desk/cache') };
  const ref = 'sessions/bench/memory';
  // The proxy's log read on a connection of its own (a pooled one may have
  // been closed by the proxy's keep-alive timeout during a long command).
  const proxyLog = async () => (await client(store.url).call('GET', '/__proxy/log', { auth: false })).json;
  const withWasm = async (fn) => {
    const from = (await proxyLog()).length;
    const r = fn();
    r.wasm = wasmPeak(await proxyLog(), from);
    return r;
  };
  try {
    const s1 = await withWasm(() => pillbox(at, ['save', ws, ...remote, '--ref', ref], laptop));
    note('save', s1);
    out.packet ??= { size: s1.json.size, members: s1.json.members, digest: s1.json.digest };
    out.save = { digest: s1.json.digest, delta: s1.json.delta ?? null };
    editWorkspace(ws, shape.large_file_bytes);
    const s2 = await withWasm(() => pillbox(at, ['save', ws, ...remote, '--ref', ref], laptop));
    note('save (second)', s2);
    if (roomFor('restore (fresh)', shape.bytes)) {
      const into = mkdtempSync(join(disk, 'pillbox-mem-restore-'));
      rmSync(into, { recursive: true });
      try {
        note('restore (fresh)', await withWasm(() => pillbox(at, ['restore', s1.json.digest, ...remote, '--into', into, '--no-cache'], desk)));
        const inPlace = await withWasm(() => pillbox(at, ['restore', s2.json.digest, ...remote, '--into', into, '--no-cache'], desk));
        note('restore (in place)', inPlace);
        out.restore_in_place = { bytes_received: inPlace.json.bytes_received, written: inPlace.json.written, removed: inPlace.json.removed };
      } finally {
        rmSync(into, { recursive: true, force: true });
      }
    }
    out.worker = { wasm_mib: wasmPeak(await proxyLog(), 0) / MIB, workerd_hwm: workerdHwm(edge.pid) };
    log(`${gib} GiB Worker: wasm ${out.worker.wasm_mib} MiB, workerd VmHWM ${out.worker.workerd_hwm.max_mib.toFixed(0)} MiB (largest process)`);
  } finally {
    await store.stop();
    await edge.stop();
    rmSync(at, { recursive: true, force: true });
  }
  return out;
}

/** Chromium's renderer processes' peak resident memory (VmHWM), MiB: the largest. */
function rendererHwm() {
  let peak = 0;
  for (const pid of readdirSync('/proc').filter((d) => /^\d+$/.test(d))) {
    try {
      const cmd = readFileSync(`/proc/${pid}/cmdline`, 'utf8');
      if (!cmd.includes('--type=renderer')) continue;
      const m = /VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
      if (m) peak = Math.max(peak, Number(m[1]) / 1024);
    } catch { /* gone */ }
  }
  return peak;
}

/**
 * The inspector page (inspector/dist in headless Chromium, a fresh browser)
 * verifying the packet file `tar` chosen with its file input: the renderer
 * process's VmHWM (the page, its verification worker and its wasm memory),
 * and the page's JS heap (CDP Performance.getMetrics) once it is done.
 */
async function inspectorMemory(tar) {
  const { serve } = await import('../inspector/tests/server.mjs');
  const { launch, openPage } = await import('../inspector/tests/browser.mjs');
  const server = await serve(join(ROOT, 'inspector/dist'));
  const chromium = await launch();
  try {
    const { page } = await openPage(chromium.browser, server.url);
    const before = rendererHwm();
    const started = process.hrtime.bigint();
    await page.setInputFiles('#file-a', tar);
    await page.waitForSelector('#banner[data-verdict]', { timeout: 3_600_000 });
    const seconds = Number(process.hrtime.bigint() - started) / 1e9;
    const verdict = await page.getAttribute('#banner', 'data-verdict');
    if (verdict !== 'verified') throw new Error(`the inspector found the packet ${verdict}`);
    const cdp = await page.context().newCDPSession(page);
    await cdp.send('Performance.enable');
    const metrics = Object.fromEntries((await cdp.send('Performance.getMetrics')).metrics.map((m) => [m.name, m.value]));
    return {
      renderer_hwm_mib: Math.round(rendererHwm() * 10) / 10,
      renderer_hwm_before_mib: Math.round(before * 10) / 10,
      js_heap_used_mib: Math.round((metrics.JSHeapUsedSize / MIB) * 10) / 10,
      js_heap_total_mib: Math.round((metrics.JSHeapTotalSize / MIB) * 10) / 10,
      seconds: Math.round(seconds * 10) / 10,
    };
  } finally {
    await chromium.close();
    await server.close();
  }
}

const COMMANDS = ['pack', 'verify', 'unpack', 'save', 'save (second)', 'restore (fresh)', 'restore (in place)'];

function docSection(results) {
  const sizes = results.sizes;
  const base = sizes[0];
  const cell = (v, b) => (v === undefined ? 'not run' : `${v.toFixed(1)} (${b ? (v / b).toFixed(2) : '-'}x)`);
  const head = `| peak | ${sizes.map((s) => `${(s.packet.size / GIB).toFixed(2)} GiB`).join(' | ')} |`;
  const rows = COMMANDS.map((c) => `| \`${c}\` RSS, MiB | ${sizes.map((s) => cell(s.commands[c]?.rss_mib, base.commands[c]?.rss_mib)).join(' | ')} |`);
  rows.push(`| Worker wasm memory, MiB | ${sizes.map((s) => cell(s.worker?.wasm_mib, base.worker?.wasm_mib)).join(' | ')} |`);
  if (results.worker_argv) {
    rows.push(`| Worker wasm memory, second run (below), MiB | ${sizes.map((s) => cell(s.worker_second_run?.wasm_mib, base.worker_second_run?.wasm_mib)).join(' | ')} |`);
  }
  // Only figures scoped to the run's own wrangler (process group).
  if (sizes.every((s) => s.worker?.workerd_hwm?.scope)) {
    rows.push(`| workerd VmHWM (largest process), MiB | ${sizes.map((s) => cell(s.worker.workerd_hwm.max_mib, base.worker.workerd_hwm.max_mib)).join(' | ')} |`);
  }
  if (sizes.some((s) => s.inspector)) {
    rows.push(`| inspector: Chromium renderer VmHWM, MiB | ${sizes.map((s) => cell(s.inspector?.renderer_hwm_mib, base.inspector?.renderer_hwm_mib)).join(' | ')} |`);
    rows.push(`| inspector: page JS heap used after, MiB | ${sizes.map((s) => cell(s.inspector?.js_heap_used_mib, base.inspector?.js_heap_used_mib)).join(' | ')} |`);
  }
  const secs = COMMANDS.map((c) => `| \`${c}\` | ${sizes.map((s) => (s.commands[c] ? `${s.commands[c].seconds.toFixed(1)}` : '-')).join(' | ')} |`);
  const skipped = sizes.flatMap((s) => Object.entries(s.skipped).map(([c, why]) => `- ${s.gib} GiB \`${c}\`: not run, ${why}.`));
  const m = results.machine;
  return [
    '## Memory at the packet limit',
    '',
    `\`node bench/memory.mjs ${results.argv}\` (bench/README.md): the peak resident memory of each release`,
    '`pillbox` command (`/usr/bin/time -f %M`) and the local Worker\'s wasm memory (`wasm_memory` in its',
    '`Pillbox-Timing` header, BENCH_ROUTES=1; a fresh Worker per size, as linear memory only grows) for workspaces',
    `of four sparse files of a quarter of the size each, with 4 KiB of random bytes every ${results.step_mib} MiB (one distinct`,
    `chunk the store receives and proves per step), and ${sizes[0].workspace.small_files} small text files. In brackets: the ratio to the`,
    'smallest size; bounded memory keeps it near 1 while the packet grows 16-fold. The packet file lies sparse on a',
    'tmpfs (`pack -o -` into `dd conv=sparse`); `unpack` and the restores write real bytes to the disk, into a',
    'temporary folder deleted after each.',
    ...(sizes.some((s) => s.inspector) ? [
      '',
      'The inspector: inspector/dist in headless Chromium (a fresh browser per size) verifying the same packet file',
      'chosen with its file input; the renderer process\'s VmHWM (the page, its verification worker, their JS heaps',
      'and wasm memory) and the page\'s JS heap after the verdict (CDP `Performance.getMetrics`)' +
        (results.inspector_argv ? `, measured by \`node bench/memory.mjs ${results.inspector_argv}\` beside the run above.` : '.'),
    ] : []),
    '',
    head,
    `|---|${sizes.map(() => '---|').join('')}`,
    ...rows,
    '',
    'Seconds per command:',
    '',
    `| command | ${sizes.map((s) => `${s.gib} GiB`).join(' | ')} |`,
    `|---|${sizes.map(() => '---|').join('')}`,
    ...secs,
    ...(sizes.some((s) => s.inspector) ? [`| inspector verification | ${sizes.map((s) => (s.inspector ? s.inspector.seconds.toFixed(1) : '-')).join(' | ')} |`] : []),
    '',
    ...(skipped.length ? [...skipped, ''] : []),
    `Machine: ${m.cpu}, ${m.cores} cores shared with other builds, ${m.ram_gib} GiB RAM, Linux ${m.kernel}, node ${m.node}.`,
    `Date: ${results.date.slice(0, 16).replace('T', ' ')} UTC; ${Math.round(results.seconds)} s. Load average (1, 5, 15 min) at the start:`,
    `${results.load_average_start.map((x) => x.toFixed(2)).join(', ')}; at the end: ${results.load_average_end.map((x) => x.toFixed(2)).join(', ')}. The JSON: docs/benchmarks-memory.json.`,
    '',
  ].join('\n');
}

/** Replaces the section of docs/benchmarks.md (up to the next "## "), or appends it. */
function writeDoc(section) {
  const file = join(ROOT, 'docs/benchmarks.md');
  const doc = readFileSync(file, 'utf8');
  const title = '## Memory at the packet limit';
  const at = doc.indexOf(`\n${title}\n`);
  const before = at < 0 ? doc.replace(/\n*$/, '\n') : doc.slice(0, at + 1);
  const rest = at < 0 ? '' : doc.slice(at + 1 + title.length);
  const next = rest.indexOf('\n## ');
  const old = at < 0 ? '' : rest.slice(0, next < 0 ? rest.length : next);
  const findings = old.indexOf('\n### Findings');
  const kept = findings < 0 ? '' : `\n${old.slice(findings).replace(/^\n+/, '').replace(/\n*$/, '\n')}`;
  const after = next < 0 ? '' : rest.slice(next);
  writeFileSync(file, `${before}\n${section.replace(/\n*$/, '\n')}${kept}${after}`);
}

async function main() {
  const fromJson = opt('from-json', null);
  let results;
  if (fromJson) {
    results = JSON.parse(readFileSync(fromJson, 'utf8'));
  } else {
    const dir = opt('dir', null);
    if (!dir) throw new Error('usage: node bench/memory.mjs --dir TMPFS_DIR [--disk DIR] [--sizes 1,4,16] [--step-mib N] [--small N] [--write-doc]');
    const disk = opt('disk', '/var/tmp');
    const sizes = opt('sizes', '1,4,16').split(',').map(Number);
    const stepMib = Number(opt('step-mib', '2'));
    const small = Number(opt('small', '3000'));
    const inspector = args.includes('--inspector') || opt('only', '') === 'inspector';
    const only = opt('only', null);
    if (inspector && !existsSync(join(ROOT, 'inspector/dist/index.html'))) throw new Error('build the inspector first: bash inspector/build.sh');
    spawnSync(TIME, ['true']).status === 0 || (() => { throw new Error(`${TIME} is needed (apt-get install time)`); })();
    mkdirSync(dir, { recursive: true });
    mkdirSync(disk, { recursive: true });
    buildWorker();
    buildRelease();
    const started = Date.now();
    results = {
      machine: { kernel: release(), cores: cpus().length, cpu: cpus()[0]?.model, ram_gib: Math.round(totalmem() / GIB), node: process.version },
      date: new Date().toISOString(),
      argv: args.filter((a) => a !== '--write-doc').join(' '),
      step_mib: stepMib,
      load_average_start: loadavg(),
      sizes: [],
    };
    for (const gib of sizes) {
      results.sizes.push(await measureSize(gib, dir, disk, stepMib, small, inspector, only));
      writeFileSync(join(dir, 'memory.json'), JSON.stringify(results, null, 1));
    }
    results.load_average_end = loadavg();
    results.seconds = (Date.now() - started) / 1000;
    writeFileSync(join(dir, 'memory.json'), JSON.stringify(results, null, 1));
  }
  // --merge-inspector FILE: the inspector figures of a run with --only
  // inspector, into these results.
  const merge = opt('merge-inspector', null);
  if (merge) {
    const other = JSON.parse(readFileSync(merge, 'utf8'));
    for (const s of results.sizes) {
      const o = other.sizes.find((x) => x.gib === s.gib);
      if (o?.inspector) s.inspector = o.inspector;
    }
    results.inspector_argv = other.argv;
  }
  // --merge-worker FILE: the Worker's figures of a run with --only edge
  // (after a change to the Worker), beside these.
  const mergeWorker = opt('merge-worker', null);
  if (mergeWorker) {
    const other = JSON.parse(readFileSync(mergeWorker, 'utf8'));
    for (const s of results.sizes) {
      const o = other.sizes.find((x) => x.gib === s.gib);
      if (o?.worker) s.worker_second_run = { ...o.worker, save_wasm_mib: o.commands.save?.worker_wasm_mib };
    }
    results.worker_argv = other.argv;
  }
  if (args.includes('--write-doc')) {
    writeDoc(docSection(results));
    writeFileSync(join(ROOT, 'docs/benchmarks-memory.json'), `${JSON.stringify(results, null, 1)}\n`);
  }
  console.log(JSON.stringify(results, null, 1));
}

await main();
