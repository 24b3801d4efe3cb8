// Edge throughput (docs/benchmarks.md, "Transfer", item 5 measures the same with bench/transfer.mjs): the local
// Worker under `wrangler dev --local` with BENCH_ROUTES=1, in one run:
//   (a) the baseline: the packet's bytes streamed through the Worker into
//       R2 unverified (POST /v1/bench/baseline, in parts of 32 MiB);
//   (b) a first /2 push of the same packet (tests/e2e/wire.mjs's simple
//       client: the request that opens it with the recipes and the
//       manifest's frames, parts of 32 MiB of zstd frames, complete),
//       nothing in the store to reuse;
//   (c) the same packet by the whole-packet multipart upload and complete;
//   (d) a second delta push after a one-file edit, based on (b)'s packet;
//   (e) a GET of (b)'s chunked packet, rebuilt from its packs, and for
//       comparison (f) a GET of (c)'s whole packet, one R2 object.
// Every request's Pillbox-Timing header (the Worker's own timers, on only
// with BENCH_ROUTES) is summed per series: where the time goes. The series
// run interleaved, --reps times (a b e d c f, a b e d c f, ...), the store
// emptied between repetitions by the scheduled clean-up (UPLOAD_TTL_HOURS=0),
// so that every first push finds nothing to reuse; the figures are each
// series' median.
//
// Usage: node bench/edge.mjs [--mib N] [--reps N] [--content noise|text]
//          [--frame-hasher auto|core|platform] [--dir DIR]
// Prints one JSON object on stdout (progress on stderr).
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { ROOT, TARGET, buildWorker, client, startEdge } from '../tests/e2e/edge.mjs';
import { pushPacket } from '../tests/e2e/wire.mjs';

const args = process.argv.slice(2);
const opt = (name, fallback) => {
  const i = args.indexOf(`--${name}`);
  return i >= 0 ? args[i + 1] : fallback;
};
const MIB = 1 << 20;
const mib = Number(opt('mib', '256'));
const reps = Number(opt('reps', '3'));
const content = opt('content', 'noise');
const frameHasher = opt('frame-hasher', 'auto');
const dir = opt('dir', join(tmpdir(), 'pillbox-edge-bench'));
const PART = 32 * MIB;
const log = (...a) => console.error('edge bench:', ...a);

mkdirSync(dir, { recursive: true });
const fixtures = join(TARGET, 'release/examples/worker_fixtures');
function packet(name, edited) {
  const file = join(dir, `${name}-${content}-${mib}.pkt`);
  const index = `${file}.json`;
  if (!existsSync(index)) {
    log(`generating ${file}`);
    const r = spawnSync(fixtures, ['large', file, String(mib), '0', String(edited), content], { stdio: ['ignore', 'ignore', 'inherit'] });
    if (r.status !== 0) throw new Error('worker_fixtures large failed');
    const d = spawnSync(fixtures, ['describe', file], { encoding: 'utf8', maxBuffer: 1 << 28 });
    if (d.status !== 0) throw new Error(`worker_fixtures describe failed: ${d.stderr}`);
    writeFileSync(index, d.stdout);
  }
  return { bytes: readFileSync(file), entry: JSON.parse(readFileSync(index, 'utf8')) };
}

/** An API client that times every call and sums the Worker's timers. */
function timed(api) {
  const series = { requests: 0, wall_ms: 0, worker: {} };
  const call = async (...a) => {
    const t = performance.now();
    const r = await api.call(...a);
    series.wall_ms += performance.now() - t;
    series.requests += 1;
    for (const part of (r.headers.get('pillbox-timing') ?? '').split(';').filter(Boolean)) {
      const [k, v] = part.split('=');
      // Times add up; the wasm memory is a peak.
      series.worker[k] = k === 'wasm_memory' ? Math.max(series.worker[k] ?? 0, Number(v)) : (series.worker[k] ?? 0) + Number(v);
    }
    if (r.status >= 400) throw new Error(`${a[0]} ${a[1]}: ${r.status} ${r.bytes.toString('utf8').slice(0, 300)}`);
    return r;
  };
  return { api: { call }, series };
}

const finish = (s, bytes) => ({ ...s, bytes, mb_per_s: bytes / 1e6 / (s.wall_ms / 1000),
  worker: Object.fromEntries(Object.entries(s.worker).map(([k, v]) => [k, k === 'wasm_memory' ? v : Math.round(v)])) });

/** workerd's CPU seconds (all its processes): the isolate, R2 and D1 simulators alike. */
function workerdCpu() {
  let total = 0;
  for (const pid of readdirSync('/proc').filter((d) => /^\d+$/.test(d))) {
    try {
      if (readFileSync(`/proc/${pid}/comm`, 'utf8').trim() !== 'workerd') continue;
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      total += (Number(f[11]) + Number(f[12])) / 100;
    } catch { /* gone */ }
  }
  return total;
}

async function measure(name, fn, bytes) {
  const cpu = workerdCpu();
  const out = await fn();
  const r = finish(out.series, bytes);
  r.workerd_cpu_s = Math.round((workerdCpu() - cpu) * 10) / 10;
  log(`${name}: ${(r.wall_ms / 1000).toFixed(1)} s, ${r.mb_per_s.toFixed(1)} MB/s`, JSON.stringify(r.worker));
  return { ...r, ...out.extra };
}

buildWorker();
const base = packet('base', 0);
const edited = packet('edited', 1);
const edge = await startEdge({
  BENCH_ROUTES: '1', FRAME_HASHER: frameHasher, MAX_SINGLE_UPLOAD_BYTES: String(64 * MIB),
  PART_SIZE_BYTES: String(PART), PUSH_PART_BYTES: String(PART), UPLOAD_TTL_HOURS: '0',
}, { testScheduled: true });
const plain = client(edge.url);
const runs = {};
const record = (name, r) => { (runs[name] ??= []).push(r); };

async function emptyStore() {
  for (const d of [base.entry.digest, edited.entry.digest]) await plain.call('DELETE', `/v1/packets/${d}`);
  await edge.scheduled();
  const left = edge.d1('SELECT (SELECT count(*) FROM packs) AS packs, (SELECT count(*) FROM chunks) AS chunks');
  if (left[0].packs !== 0 || left[0].chunks !== 0) throw new Error(`the store is not empty: ${JSON.stringify(left)}`);
}

const getSeries = (name, label) => measure(label, async () => {
  const t = timed(plain);
  const r = await t.api.call('GET', `/v1/packets/${base.entry.digest}`);
  if (!r.bytes.equals(base.bytes)) throw new Error(`${label}: the bytes differ from the packet pushed`);
  return { series: t.series };
}, base.entry.size);

try {
  // Warm the isolate and the local stores once.
  await plain.call('POST', '/v1/bench/baseline', { body: base.bytes.subarray(0, MIB) });
  for (let rep = 1; rep <= reps; rep++) {
    log(`repetition ${rep} of ${reps}`);
    record('baseline', await measure('(a) baseline', async () => {
      const t = timed(plain);
      for (let at = 0; at < base.bytes.length; at += PART) {
        await t.api.call('POST', '/v1/bench/baseline', { body: base.bytes.subarray(at, Math.min(at + PART, base.bytes.length)) });
      }
      return { series: t.series };
    }, base.entry.size));
    record('push_first', await measure('(b) first delta push', async () => {
      const t = timed(plain);
      const r = await pushPacket(t.api, base.entry, base.bytes, { partBytes: PART });
      if (r.complete?.status !== 201) throw new Error(`(b): ${JSON.stringify((r.complete ?? r.create).json)}`);
      return { series: t.series, extra: { sent: r.sent, stored: r.parts.reduce((n, p) => n + p.json.stored_bytes, 0), parts: r.parts.length } };
    }, base.entry.size));
    record('get_chunked', await getSeries('get_chunked', '(e) GET of the chunked packet'));
    record('push_second', await measure('(d) second push after a one-file edit', async () => {
      const t = timed(plain);
      const r = await pushPacket(t.api, edited.entry, edited.bytes, { partBytes: PART, bases: [base.entry] });
      if (r.complete?.status !== 201) throw new Error(`(d): ${JSON.stringify((r.complete ?? r.create).json)}`);
      return { series: t.series, extra: { sent: r.sent, parts: r.parts.length } };
    }, edited.entry.size));
    await emptyStore();
    record('multipart', await measure('(c) multipart upload + complete', async () => {
      const t = timed(plain);
      const up = await t.api.call('POST', '/v1/uploads', { body: { digest: base.entry.digest, size: base.entry.size, part_size: PART } });
      for (let n = 1; n <= up.json.parts; n++) {
        await t.api.call('PUT', `${up.json.location}/parts/${n}`, { body: base.bytes.subarray((n - 1) * PART, Math.min(n * PART, base.bytes.length)) });
      }
      await t.api.call('POST', `${up.json.location}/complete`, { headers: { connection: 'close' } });
      return { series: t.series };
    }, base.entry.size));
    record('get_whole', await getSeries('get_whole', '(f) GET of the whole packet'));
    await emptyStore();
  }
} finally {
  await edge.stop();
}

/** The repetition with the median wall time. */
const median = (list) => [...list].sort((x, y) => x.wall_ms - y.wall_ms)[Math.floor((list.length - 1) / 2)];
const results = { mib, reps, content, frame_hasher: frameHasher, packet_bytes: base.entry.size };
for (const [name, list] of Object.entries(runs)) {
  results[name] = { ...median(list), runs_mb_per_s: list.map((r) => Math.round(r.mb_per_s * 10) / 10) };
}
results.ratio_push_to_baseline = results.push_first.mb_per_s / results.baseline.mb_per_s;
results.ratio_multipart_to_baseline = results.multipart.mb_per_s / results.baseline.mb_per_s;
console.log(JSON.stringify(results, null, 1));
