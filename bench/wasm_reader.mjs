// Throughput of packet-core's streaming Reader compiled to wasm, under node,
// against the software SHA-256 limit: the same sha2 crate, in the same wasm
// module, hashing the same bytes in the same process.
//
//   node bench/wasm_reader.mjs PKG_DIR PACKET [REPS]
//
// PKG_DIR holds packet-inspector-wasm built for wasm32-unknown-unknown
// (release) and bound with `wasm-bindgen --target nodejs` (bench/run.sh
// does both). The packet is read into memory first and fed in 1 MiB chunks,
// as the Worker feeds its reader; disk reads are not timed. One warm-up
// round, then REPS rounds of every configuration, interleaved.
//
// Configurations:
// - `sha256`: `PacketHasher` (packet-core's `Hasher`, i.e. sha2) over the
//   packet: one SHA-256 pass, the reference;
// - `reader`: `new Verifier(null)`: packet-core hashes every member body
//   and the whole packet (2 passes);
// - `reader, hashed elsewhere`: `Verifier.withExternalDigest(null)`, the
//   configuration of the inspector's verification thread and of the Worker
//   with PACKET_HASHER=platform: member bodies only (1 pass); the digest
//   handed to `finishWithDigest` is computed outside the timed region.
//
// Prints one JSON object on stdout.
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { resolve } from 'node:path';

const [pkgDir, file, repsArg = '3'] = process.argv.slice(2);
if (!pkgDir || !file) {
  console.error('usage: node bench/wasm_reader.mjs PKG_DIR PACKET [REPS]');
  process.exit(2);
}
const reps = Number(repsArg);
const wasm = createRequire(import.meta.url)(resolve(pkgDir, 'packet_inspector_wasm.js'));
const { PacketHasher, Verifier } = wasm;

const CHUNK = 1 << 20;
const bytes = readFileSync(file);
const size = bytes.length;
const chunks = [];
for (let at = 0; at < size; at += CHUNK) chunks.push(bytes.subarray(at, Math.min(size, at + CHUNK)));

function sha256() {
  const h = new PacketHasher();
  for (const c of chunks) h.update(c);
  return h.finish();
}

// Outside any timed region: the digest the 1-pass configuration is given.
const digest = sha256();

function reader() {
  const v = new Verifier(null);
  for (const c of chunks) v.push(c);
  const packet = v.finish();
  const report = packet.report();
  packet.free();
  if (report.digest !== digest) throw new Error(`reader digest ${report.digest}, sha256 ${digest}`);
  return report;
}

function readerHashedElsewhere() {
  const v = Verifier.withExternalDigest(null);
  for (const c of chunks) v.push(c);
  const packet = v.finishWithDigest(digest);
  const report = packet.report();
  packet.free();
  return report;
}

const configs = [
  { name: 'sha256', passes: 1, run: sha256 },
  { name: 'reader', passes: 2, run: reader },
  { name: 'reader, hashed elsewhere', passes: 1, run: readerHashedElsewhere },
];
const times = Object.fromEntries(configs.map((c) => [c.name, []]));
for (let round = 0; round <= reps; round++) {
  for (const c of configs) {
    const t0 = process.hrtime.bigint();
    c.run();
    const s = Number(process.hrtime.bigint() - t0) / 1e9;
    if (round > 0) times[c.name].push(s);
  }
}

const report = reader();
const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
};
const result = {
  packet: file,
  size,
  members: report.totals.members,
  file_bytes: report.totals.bytes,
  chunk_bytes: CHUNK,
  reps,
  node: process.version,
  configs: configs.map((c) => ({
    name: c.name,
    passes: c.passes,
    seconds: times[c.name],
    min_s: Math.min(...times[c.name]),
    median_s: median(times[c.name]),
    mb_per_s: size / 1e6 / Math.min(...times[c.name]),
  })),
};
console.log(JSON.stringify(result, null, 1));
