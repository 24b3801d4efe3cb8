// Raw HTTP for the hostile-client tests (tests/e2e/bodies.test.mjs,
// tests/e2e/hostile.test.mjs): one request sent exactly as built, bodies
// streamed in pieces so that 100 MB is never held, and decompression bombs
// built without compressing what they decode to.
import { request as httpRequest } from 'node:http';
import { constants, crc32, deflateRawSync } from 'node:zlib';

import { TOKEN } from './edge.mjs';

const MIB = 1 << 20;
/** No answer in this long fails a request (a generous bound, not a timing). */
const ANSWER_TIMEOUT = 120_000;

/**
 * gzip of `mib` MiB of zeros, built without compressing them: one deflate
 * segment of 1 MiB of zeros, flushed to a byte boundary, repeated (its
 * back-references reach only zeros, so every copy decodes the same). The
 * trailer's CRC is computed only for small bombs; a large bomb's is never
 * reached.
 */
export function gzipBomb(mib) {
  const segment = deflateRawSync(Buffer.alloc(MIB), { level: 9, finishFlush: constants.Z_SYNC_FLUSH });
  const trailer = Buffer.alloc(8);
  if (mib <= 16) {
    let crc = 0;
    for (let i = 0; i < mib; i++) crc = crc32(Buffer.alloc(MIB), crc);
    trailer.writeUInt32LE(crc >>> 0, 0);
    trailer.writeUInt32LE((mib * MIB) >>> 0, 4);
  }
  const head = Buffer.from([0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff]);
  // 0x03 0x00: a final, empty block of fixed Huffman codes.
  return Buffer.concat([head, ...Array(mib).fill(segment), Buffer.from([0x03, 0x00]), trailer]);
}

/**
 * zstd of `mib` MiB of zeros (RFC 8878): one frame, window 2^`windowLog`
 * (8 MiB unless said), no content size, blocks of 128 KiB each run-length
 * encoded (4 bytes each).
 */
export function zstdBomb(mib, windowLog = 23) {
  const blocks = mib * 8;
  const out = Buffer.alloc(6 + 4 * blocks);
  out.writeUInt32LE(0xfd2fb528, 0);
  out[4] = 0x00; // no content size, not single-segment, no checksum, no dictionary
  out[5] = (windowLog - 10) << 3;
  for (let i = 0; i < blocks; i++) {
    const last = i === blocks - 1 ? 1 : 0;
    const header = last | (1 << 1) | ((128 << 10) << 3); // RLE, 128 KiB
    out.writeUIntLE(header, 6 + 4 * i, 3);
    out[6 + 4 * i + 3] = 0;
  }
  return out;
}

/**
 * Sends one request to the store at `url` with `body` (bytes, or a `repeated` body streamed in
 * pieces), with a Content-Length unless `chunked`. Resolves with
 * { status, json, ms } or { error, ms }; never rejects.
 */
export function rawSend(url, method, path, { body, headers = {}, chunked = false, token = TOKEN } = {}) {
  return new Promise((ok) => {
    const started = performance.now();
    const h = { ...headers };
    if (token) h.authorization = `Bearer ${token}`;
    const total = body === undefined ? 0 : (body.total ?? body.length);
    if (!chunked) h['content-length'] = String(total);
    let settled = false;
    const settle = (r) => {
      if (settled) return;
      settled = true;
      ok({ ...r, ms: performance.now() - started });
    };
    const req = httpRequest(url + path, { method, headers: h, agent: false, timeout: ANSWER_TIMEOUT }, (res) => {
      const parts = [];
      res.on('data', (c) => parts.push(c));
      res.on('error', (e) => settle({ error: e.message, status: res.statusCode }));
      res.on('end', () => {
        const bytes = Buffer.concat(parts);
        let json;
        try { json = JSON.parse(bytes.toString('utf8')); } catch { /* not JSON */ }
        settle({ status: res.statusCode, json, headers: res.headers });
      });
    });
    req.on('timeout', () => req.destroy(new Error(`no answer in ${ANSWER_TIMEOUT} ms`)));
    req.on('error', (e) => settle({ error: e.message }));
    if (body === undefined) { req.end(); return; }
    if (!body.piece) {
      if (chunked) {
        // Several writes and no Content-Length: Transfer-Encoding: chunked.
        for (let at = 0; at < body.length; at += MIB) req.write(body.subarray(at, at + MIB));
        req.end();
      } else {
        req.end(body);
      }
      return;
    }
    let sent = 0;
    const pump = () => {
      while (sent < body.total && !req.destroyed) {
        const n = Math.min(body.piece.length, body.total - sent);
        sent += n;
        if (!req.write(n === body.piece.length ? body.piece : body.piece.subarray(0, n))) {
          req.once('drain', pump);
          return;
        }
      }
      req.end();
    };
    pump();
  });
}

