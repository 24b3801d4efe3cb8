// The binary bodies of format /2 pushes and pulls (docs/transfer.md,
// "Units"), encoded and decoded in JavaScript for the end-to-end tests, so
// that a test can send exactly the bytes it means, lies included:
// PBCHUNK2 chunk batches, the recipe sections, PBRECIPE documents and
// PBPUSH02 push bodies. Frames are zstd-compressed by the `zstd` command
// when this machine has one, else sent as they are. `cutsAndFrames` is a
// simple client (fixed-size cuts: the store does not check where a client
// cuts, only that the chunks make the bytes).
import { createHash } from 'node:crypto';
import { spawnSync } from 'node:child_process';

export const MIB = 1 << 20;
export const BODY_THRESHOLD = 256 << 10;
export const MANIFEST_THRESHOLD = 64 << 10;

export const sha = (bytes) => createHash('sha256').update(bytes).digest();
const hexOf = (b) => Buffer.from(b).toString('hex');

const u32 = (n) => { const b = Buffer.alloc(4); b.writeUInt32BE(n); return b; };
const u64 = (n) => { const b = Buffer.alloc(8); b.writeBigUInt64BE(BigInt(n)); return b; };

let zstdOk;
/** `raw` as one zstd frame (level 3), or null when there is no zstd here. */
export function zstd(raw) {
  if (zstdOk === false) return null;
  const r = spawnSync('zstd', ['-3', '-q', '-c', '--no-check'], { input: raw, maxBuffer: 1 << 28 });
  zstdOk = r.status === 0;
  return zstdOk ? r.stdout : null;
}

/** A frame of `raw`: zstd when that saves 3 %, else as it is. */
export function frameOf(raw, { compress = true } = {}) {
  const name = sha(raw);
  // Small frames rarely shrink by 3 %: not worth a process each.
  const z = compress && raw.length >= 2048 ? zstd(raw) : null;
  if (z && z.length * 100 <= raw.length * 97 && z.length < raw.length) {
    return { sha256: name, raw: raw.length, encoding: 1, stored: z };
  }
  return { sha256: name, raw: raw.length, encoding: 0, stored: Buffer.from(raw) };
}

/** A PBCHUNK2 batch of frames ({ sha256, raw, encoding, stored, storedSize? }). */
export function chunkBatch(frames) {
  const parts = [Buffer.from('PBCHUNK2'), u32(frames.length)];
  for (const f of frames) {
    parts.push(Buffer.from(f.sha256), u32(f.raw), u32(f.storedSize ?? f.stored.length), Buffer.from([f.encoding]));
  }
  for (const f of frames) parts.push(Buffer.from(f.stored));
  return Buffer.concat(parts);
}

/**
 * The recipe sections: `manifest` [{ sha256, size }], `bodies`
 * [{ sha256, size, runs: [{ chunk: { sha256, size } } | { copy: { sha256, size, first, count } }] }].
 */
export function recipeSections({ manifest = [], bodies = [] }) {
  const parts = [u32(manifest.length)];
  for (const c of manifest) parts.push(Buffer.from(c.sha256), u32(c.size));
  parts.push(u32(bodies.length));
  for (const b of bodies) {
    parts.push(Buffer.from(b.sha256), u64(b.size), u32(b.runs.length));
    for (const r of b.runs) {
      if (r.chunk) parts.push(Buffer.from([0]), Buffer.from(r.chunk.sha256), u32(r.chunk.size));
      else parts.push(Buffer.from([1]), Buffer.from(r.copy.sha256), u64(r.copy.size), u32(r.copy.first), u32(r.copy.count));
    }
  }
  return Buffer.concat(parts);
}

/** A PBRECIPE document. */
export const recipesDocument = (recipes) => Buffer.concat([Buffer.from('PBRECIPE'), recipeSections(recipes)]);

/** A PBPUSH02 body. */
export const pushBody = (recipes, frames) =>
  Buffer.concat([Buffer.from('PBPUSH02'), recipeSections(recipes), chunkBatch(frames)]);

/** Reads a PBRECIPE document: { manifest: [{hex, size}], bodies: [{hex, size, runs}] }. */
export function readRecipes(bytes) {
  let at = 0;
  const take = (n) => { const b = bytes.subarray(at, at + n); if (b.length < n) throw new Error('recipes end early'); at += n; return b; };
  if (take(8).toString() !== 'PBRECIPE') throw new Error('not a recipes document');
  const manifest = [];
  for (let n = take(4).readUInt32BE(); n > 0; n--) manifest.push({ hex: hexOf(take(32)), size: take(4).readUInt32BE() });
  const bodies = [];
  for (let n = take(4).readUInt32BE(); n > 0; n--) {
    const b = { hex: hexOf(take(32)), size: Number(take(8).readBigUInt64BE()), runs: [] };
    for (let r = take(4).readUInt32BE(); r > 0; r--) {
      const tag = take(1)[0];
      if (tag === 0) b.runs.push({ chunk: { hex: hexOf(take(32)), size: take(4).readUInt32BE() } });
      else b.runs.push({ copy: { hex: hexOf(take(32)), size: Number(take(8).readBigUInt64BE()), first: take(4).readUInt32BE(), count: take(4).readUInt32BE() } });
    }
    bodies.push(b);
  }
  if (at !== bytes.length) throw new Error('bytes follow the recipes');
  return { manifest, bodies };
}

/** Reads a PBCHUNK2 batch: [{ hex, raw, stored, encoding, bytes }]. */
export function readBatch(bytes) {
  if (bytes.subarray(0, 8).toString() !== 'PBCHUNK2') throw new Error('not a chunk batch');
  const n = bytes.readUInt32BE(8);
  const table = [];
  let at = 12;
  for (let i = 0; i < n; i++) {
    table.push({ hex: hexOf(bytes.subarray(at, at + 32)), raw: bytes.readUInt32BE(at + 32), stored: bytes.readUInt32BE(at + 36), encoding: bytes[at + 40] });
    at += 41;
  }
  for (const f of table) { f.bytes = bytes.subarray(at, at + f.stored); at += f.stored; }
  if (at !== bytes.length) throw new Error('bytes follow the last frame');
  return table;
}

/** Decodes a frame's stored bytes (zstd by the `zstd` command). */
export function rawOf(frame) {
  if (frame.encoding === 0) return Buffer.from(frame.bytes);
  const r = spawnSync('zstd', ['-d', '-q', '-c'], { input: frame.bytes, maxBuffer: 1 << 28 });
  if (r.status !== 0) throw new Error('zstd -d failed');
  return r.stdout;
}

/** A fixture packet's file bodies: { path, hex, size, body }, in manifest order. */
export function bodiesOf(entry, bytes) {
  return entry.members
    .filter((m) => m.type === 'file' && m.size > 0)
    .map((m) => ({ path: m.path, hex: m.sha256.slice(7), size: m.size, body: bytes.subarray(m.data_offset, m.data_offset + m.size) }));
}

/** The manifest's bytes in a fixture packet. */
export const manifestOf = (entry, bytes) => bytes.subarray(entry.manifest_offset, entry.manifest_offset + entry.manifest_len);

/** Fixed cuts of `bytes` into pieces of `size` (the last shorter). */
export function fixedCuts(bytes, size) {
  const out = [];
  for (let at = 0; at < bytes.length; at += size) out.push(bytes.subarray(at, Math.min(at + size, bytes.length)));
  return out;
}

/**
 * What a simple client sends for the packet `bytes` (described by `entry`,
 * an index.json entry of the fixtures): the manifest cut every 16 KiB, every
 * body no `have` holds (`have(hex, size)`), large ones cut every 256 KiB
 * with a recipe. Returns { recipes, frames }.
 */
export function cutsAndFrames(entry, bytes, { have = () => false, compress = true } = {}) {
  const json = bytes.subarray(entry.manifest_offset, entry.manifest_offset + entry.manifest_len);
  const manifest = [];
  const frames = [];
  const sent = new Set();
  const send = (raw) => {
    const key = `${sha(raw).toString('hex')}/${raw.length}`;
    if (sent.has(key)) return;
    sent.add(key);
    frames.push(frameOf(raw, { compress }));
  };
  for (const piece of json.length <= MANIFEST_THRESHOLD ? [json] : fixedCuts(json, 16 << 10)) {
    manifest.push({ sha256: sha(piece), size: piece.length });
    if (!have(sha(piece).toString('hex'), piece.length)) send(piece);
  }
  const bodies = [];
  const seen = new Set();
  for (const m of entry.members) {
    if (m.type !== 'file' || m.size === 0) continue;
    const hex = m.sha256.slice('sha256:'.length);
    if (seen.has(hex) || have(hex, m.size)) continue;
    seen.add(hex);
    const body = bytes.subarray(m.data_offset, m.data_offset + m.size);
    if (m.size <= BODY_THRESHOLD) { send(body); continue; }
    const runs = [];
    for (const piece of fixedCuts(body, 256 << 10)) {
      runs.push({ chunk: { sha256: sha(piece), size: piece.length } });
      send(piece);
    }
    bodies.push({ sha256: Buffer.from(hex, 'hex'), size: m.size, runs });
  }
  return { recipes: { manifest, bodies }, frames };
}

/** The manifest's frames first, as the store takes them. */
export function manifestFirst({ recipes, frames }) {
  const names = new Set(recipes.manifest.map((c) => `${Buffer.from(c.sha256).toString('hex')}/${c.size}`));
  const isManifest = (f) => names.has(`${Buffer.from(f.sha256).toString('hex')}/${f.raw}`);
  return [...frames.filter(isManifest), ...frames.filter((f) => !isManifest(f))];
}

/**
 * A whole /2 push of the packet `bytes` (described by `entry`) by the
 * simple client above: the recipes and the manifest's frames in the
 * request that opens it, every body the `bases` (index.json entries) do
 * not hold in parts of at most `partBytes` stored bytes, one at a time,
 * then complete. Returns { create, parts, complete, sent } (`sent`: the
 * request bytes).
 */
export async function pushPacket(api, entry, bytes, { bases = [], partBytes = 32 * MIB } = {}) {
  const held = new Set(bases.flatMap((b) => b.members.filter((m) => m.type === 'file').map((m) => `${m.sha256.slice(7)}/${m.size}`)));
  const all = cutsAndFrames(entry, bytes, { have: (hex, size) => held.has(`${hex}/${size}`) });
  const names = new Set(all.recipes.manifest.map((c) => c.sha256.toString('hex')));
  const isManifest = (f) => names.has(f.sha256.toString('hex'));
  const first = pushBody(all.recipes, all.frames.filter(isManifest));
  let sent = first.length;
  const query = [`digest=${entry.digest}`, `size=${entry.size}`, ...bases.map((b) => `base=${b.digest}`)].join('&');
  const create = await api.call('POST', `/v1/pushes?${query}`, { body: first, headers: { 'content-type': 'application/x-pillbox-push' } });
  if (create.status === 201) return { create, parts: [], complete: create, sent };
  if (create.status !== 202) return { create, parts: [], sent };
  const location = create.json.location;
  const rest = all.frames.filter((f) => !isManifest(f));
  const parts = [];
  for (let at = 0; at < rest.length;) {
    const batch = [];
    let size = 0;
    while (at < rest.length && (batch.length === 0 || size + rest[at].stored.length <= partBytes)) {
      size += rest[at].stored.length;
      batch.push(rest[at++]);
    }
    const body = chunkBatch(batch);
    sent += body.length;
    parts.push(await api.call('PUT', `${location}/parts/${parts.length + 1}`, { body, headers: { 'content-type': 'application/x-pillbox-chunks' } }));
  }
  const complete = await api.call('POST', `${location}/complete`, { headers: { connection: 'close' } });
  return { create, parts, complete, sent };
}
