// A delta-push client for the end-to-end tests and the edge benchmark,
// written from docs/transfer.md with node's own tools (an independent
// implementation of the chunk batch): bodies from a packet file at the
// offsets its fixture index gives, large bodies cut in fixed 256 KiB chunks
// (the edge checks recipes, it never chunks; the CLI cuts with FastCDC),
// parts sent as they are, gzip- or zstd-compressed.
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { gzipSync } from 'node:zlib';

export const THRESHOLD = 256 * 1024;
export const CUT = 256 * 1024;

export const hexOf = (bytes) => createHash('sha256').update(bytes).digest('hex');

/** A fixture packet's file bodies: { path, hex, size, body }, in manifest order. */
export function bodiesOf(entry, bytes) {
  return entry.members
    .filter((m) => m.type === 'file' && m.size > 0)
    .map((m) => ({ path: m.path, hex: m.sha256.slice(7), size: m.size, body: bytes.subarray(m.data_offset, m.data_offset + m.size) }));
}

/** The manifest's bytes in a fixture packet. */
export const manifestOf = (entry, bytes) => bytes.subarray(entry.manifest_offset, entry.manifest_offset + entry.manifest_len);

/** A body cut into chunks of `cut` bytes: { chunks: [Buffer], recipe }. */
export function cutBody(body, cut = CUT) {
  const chunks = [];
  for (let at = 0; at < body.length; at += cut) chunks.push(body.subarray(at, Math.min(at + cut, body.length)));
  return {
    chunks,
    recipe: { sha256: hexOf(body), size: body.length, chunks: chunks.map((c) => ({ sha256: hexOf(c), size: c.length })) },
  };
}

/** A chunk batch (application/x-pillbox-chunks) of these chunks. */
export function chunkBatch(chunks, names = chunks.map((c) => hexOf(c))) {
  const head = Buffer.alloc(12 + 36 * chunks.length);
  head.write('PBCHUNK1', 0, 'latin1');
  head.writeUInt32BE(chunks.length, 8);
  chunks.forEach((c, i) => {
    Buffer.from(names[i], 'hex').copy(head, 12 + 36 * i);
    head.writeUInt32BE(c.length, 12 + 36 * i + 32);
  });
  return Buffer.concat([head, ...chunks]);
}

/** Reads a chunk batch back: [{ hex, bytes }]. */
export function readBatch(bytes) {
  if (bytes.subarray(0, 8).toString('latin1') !== 'PBCHUNK1') throw new Error('not a chunk batch');
  const n = bytes.readUInt32BE(8);
  let at = 12 + 36 * n;
  const out = [];
  for (let i = 0; i < n; i++) {
    const hex = bytes.subarray(12 + 36 * i, 12 + 36 * i + 32).toString('hex');
    const size = bytes.readUInt32BE(12 + 36 * i + 32);
    out.push({ hex, bytes: bytes.subarray(at, at + size) });
    at += size;
  }
  if (at !== bytes.length) throw new Error(`the batch has ${bytes.length - at} bytes after its frames`);
  return out;
}

/** `bytes` in a Content-Encoding: identity, gzip or zstd (the zstd command). */
export function encode(bytes, encoding = 'identity', level = 3) {
  if (encoding === 'gzip') return gzipSync(bytes, { level: 1 });
  if (encoding === 'zstd') {
    const r = spawnSync('zstd', [`-${level}`, '-c', '-q'], { input: bytes, maxBuffer: 1 << 30 });
    if (r.status !== 0) throw new Error(`zstd failed: ${r.stderr}`);
    return r.stdout;
  }
  return bytes;
}

/** Sends a request body in an encoding; `body` may be JSON-able. */
export function encoded(body, encoding, contentType = 'application/json') {
  const raw = Buffer.isBuffer(body) || body instanceof Uint8Array ? Buffer.from(body) : Buffer.from(JSON.stringify(body));
  const headers = { 'content-type': contentType };
  if (encoding && encoding !== 'identity') headers['content-encoding'] = encoding;
  return { body: encode(raw, encoding), headers };
}

/**
 * Pushes a fixture packet: create (with `bases`), recipes for the large
 * missing bodies, parts of at most `partBytes` of missing chunks, then
 * complete. Returns every answer and the request bytes sent.
 */
export async function push(api, entry, bytes, { bases = [], labels = [], encoding = 'identity', partBytes = 8 << 20, complete = true } = {}) {
  const query = [`digest=${entry.digest}`, `size=${entry.size}`, ...bases.map((b) => `base=${b}`), ...labels.map((l) => `label=${encodeURIComponent(l)}`)];
  const manifest = encoded(manifestOf(entry, bytes), encoding);
  let sent = manifest.body.length;
  const create = await api.call('POST', `/v1/pushes?${query.join('&')}`, manifest);
  if (create.status !== 201) return { create, sent };
  const location = create.json.location;
  const bodies = new Map(bodiesOf(entry, bytes).map((b) => [b.hex, b]));
  const wanted = new Map();
  const recipes = [];
  for (const hex of create.json.missing) {
    const b = bodies.get(hex);
    if (b.size <= THRESHOLD) {
      wanted.set(hex, b.body);
    } else {
      const { chunks, recipe } = cutBody(b.body);
      recipes.push(recipe);
      chunks.forEach((c, i) => wanted.set(recipe.chunks[i].sha256, c));
    }
  }
  let recipesAnswer;
  if (recipes.length) {
    const r = encoded({ recipes }, encoding === 'zstd' ? 'gzip' : encoding);
    sent += r.body.length;
    recipesAnswer = await api.call('POST', `${location}/recipes`, r);
    if (recipesAnswer.status !== 200) return { create, recipes: recipesAnswer, sent };
  }
  const missingChunks = [
    ...create.json.missing.filter((h) => bodies.get(h).size <= THRESHOLD),
    ...(recipesAnswer?.json.missing_chunks ?? []),
  ];
  const parts = [];
  let batch = [];
  let batchBytes = 0;
  const flush = async () => {
    if (!batch.length) return;
    const part = encoded(chunkBatch(batch.map((h) => wanted.get(h)), batch), encoding, 'application/x-pillbox-chunks');
    sent += part.body.length;
    parts.push(await api.call('PUT', `${location}/parts/${parts.length + 1}`, part));
    batch = [];
    batchBytes = 0;
  };
  for (const hex of missingChunks) {
    const size = wanted.get(hex).length;
    if (batchBytes + size > partBytes) await flush();
    batch.push(hex);
    batchBytes += size;
  }
  await flush();
  if (!complete) return { create, recipes: recipesAnswer, parts, sent, location };
  const done = await api.call('POST', `${location}/complete`, { headers: { connection: 'close' } });
  return { create, recipes: recipesAnswer, parts, complete: done, sent, location };
}
