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
//   and the whole packet (2 passes) for a /1 packet, its packet.json only
//   (1 pass) for a /2 packet, which its manifest names;
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

// Outside any timed region: the digest the 1-pass configuration is given,
// and the packet's name by its format's rule. A /2 packet is named by the
// SHA-256 of its `packet.json` (the first member: its size is the octal
// field at offset 124 of the first header, its bytes start at 512); a /1
// packet by the SHA-256 of the whole file.
const digest = sha256();
const manifestSize = parseInt(bytes.subarray(124, 136).toString('latin1').replace(/[\0 ]+$/, ''), 8);
const manifestBytes = bytes.subarray(512, 512 + manifestSize);
const namedByManifest = manifestBytes.toString('utf8').includes('"pillbox.session-packet/2"');
const name = namedByManifest
  ? (() => {
      const h = new PacketHasher();
      h.update(manifestBytes);
      return h.finish();
    })()
  : digest;

function reader() {
  const v = new Verifier(null);
  for (const c of chunks) v.push(c);
  const packet = v.finish();
  const report = packet.report();
  packet.free();
  if (report.digest !== name) throw new Error(`reader digest ${report.digest}, expected ${name}`);
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
  // A /1 packet's reader hashes the bodies and the whole file; a /2
  // packet's reader hashes the bodies and its packet.json only.
  { name: 'reader', passes: namedByManifest ? 1 : 2, run: reader },
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
  named_by_manifest: namedByManifest,
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
