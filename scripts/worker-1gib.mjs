// Measures the local Worker verifying a large packet uploaded in parts:
// wall time of the parts and of the verification (the complete call), CPU
// time of the workerd process during verification, workerd's peak RSS (the
// whole process: it also runs the local R2 and D1 simulators) and the
// Worker's own wasm linear memory after verifying (the
// Pillbox-Wasm-Memory-Bytes header; linear memory never shrinks, so this is
// the instance's peak).
//
// Usage: node scripts/worker-1gib.mjs PACKET [PACKET_HASHER]
// (scripts/worker-1gib.sh generates the packet and calls this.)
import { createHash } from 'node:crypto';
import { openSync, readSync, readFileSync, readdirSync, statSync, closeSync } from 'node:fs';

import { client, startEdge } from '../tests/e2e/edge.mjs';

const [file, hasher = 'platform'] = process.argv.slice(2);
const size = statSync(file).size;
const PART = 32 << 20;

function sha256File(path) {
  const h = createHash('sha256');
  const fd = openSync(path, 'r');
  const buf = Buffer.alloc(8 << 20);
  for (;;) {
    const n = readSync(fd, buf, 0, buf.length, null);
    if (n === 0) break;
    h.update(buf.subarray(0, n));
  }
  closeSync(fd);
  return 'sha256:' + h.digest('hex');
}

function readPart(n) {
  const fd = openSync(file, 'r');
  const len = Math.min(PART, size - (n - 1) * PART);
  const buf = Buffer.alloc(len);
  readSync(fd, buf, 0, len, (n - 1) * PART);
  closeSync(fd);
  return buf;
}

/** workerd processes (comm "workerd") started after `since`. */
function workerdPids() {
  return readdirSync('/proc').filter((d) => /^\d+$/.test(d)).filter((pid) => {
    try { return readFileSync(`/proc/${pid}/comm`, 'utf8').trim() === 'workerd'; } catch { return false; }
  });
}

function cpuSeconds(pid) {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) / 100; // utime + stime, in clock ticks of 1/100 s
}

function status(pid, key) {
  const line = readFileSync(`/proc/${pid}/status`, 'utf8').split('\n').find((l) => l.startsWith(key));
  return Number(line.split(/\s+/)[1]) * 1024;
}

const digest = sha256File(file);
const before = new Set(workerdPids());
const edge = await startEdge({ PACKET_HASHER: hasher, MAX_SINGLE_UPLOAD_BYTES: String(64 << 20), PART_SIZE_BYTES: String(PART) });
// wrangler starts two workerd processes: a proxy and the runtime that
// runs the Worker (the one with an inspector address).
const parentOf = (p) => Number(readFileSync(`/proc/${p}/status`, 'utf8').match(/^PPid:\s+(\d+)/m)[1]);
const descends = (p) => { for (let q = Number(p); q > 1; q = parentOf(q)) if (q === edge.pid) return true; return false; };
const mine = workerdPids().filter((p) => !before.has(p) && descends(p)).filter((p) =>
  readFileSync(`/proc/${p}/cmdline`, 'utf8').includes('--inspector-addr'));
if (mine.length !== 1) {
  await edge.stop();
  throw new Error(`expected one new workerd runtime process, found ${mine}`);
}
const pid = mine[0];
const api = client(edge.url);
let peak = 0;
const sampler = setInterval(() => { try { peak = Math.max(peak, status(pid, 'VmRSS:')); } catch { /* gone */ } }, 100);
try {
  const rssIdle = status(pid, 'VmRSS:');
  const created = await api.call('POST', '/v1/uploads', { body: { digest, size, part_size: PART } });
  if (created.status !== 201) throw new Error(JSON.stringify(created.json));
  const parts = created.json.parts;
  const t0 = performance.now();
  for (let n = 1; n <= parts; n++) {
    const r = await api.call('PUT', `${created.json.location}/parts/${n}`, { body: readPart(n) });
    if (r.status !== 200) throw new Error(`part ${n}: ${r.status} ${r.bytes}`);
  }
  const tParts = performance.now() - t0;
  const peakAfterParts = peak;
  peak = 0;
  const cpu0 = cpuSeconds(pid);
  const t1 = performance.now();
  const done = await api.call('POST', `${created.json.location}/complete`);
  const tVerify = performance.now() - t1;
  const cpu = cpuSeconds(pid) - cpu0;
  if (done.status !== 201) throw new Error(`complete: ${done.status} ${done.bytes}`);
  const peakVerify = peak;
  const result = {
    packet: file,
    size,
    members: done.json.members,
    hasher,
    part_size: PART,
    parts,
    upload_parts_s: +(tParts / 1000).toFixed(2),
    verify_wall_s: +(tVerify / 1000).toFixed(2),
    verify_workerd_cpu_s: +cpu.toFixed(2),
    verify_mb_per_s: +((size / 1e6) / (tVerify / 1000)).toFixed(1),
    workerd_rss_idle_mib: +(rssIdle / 1048576).toFixed(1),
    workerd_rss_peak_parts_mib: +(peakAfterParts / 1048576).toFixed(1),
    workerd_rss_peak_verify_mib: +(peakVerify / 1048576).toFixed(1),
    workerd_vmhwm_mib: +(status(pid, 'VmHWM:') / 1048576).toFixed(1),
    wasm_memory_bytes: Number(done.headers.get('pillbox-wasm-memory-bytes')),
    wasm_memory_mib: +(Number(done.headers.get('pillbox-wasm-memory-bytes')) / 1048576).toFixed(1),
  };
  console.log(JSON.stringify(result, null, 2));
} finally {
  clearInterval(sampler);
  await edge.stop();
}
