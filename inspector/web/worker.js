// The verification worker: owns the wasm module, the packets' sources (a
// File or an edge URL) and the verified Packet handles. Every byte shown by
// the page passed through packet-core here first.
import init, { Verifier, comparePackets, lineDiff, classify } from './pkg/packet_inspector_wasm.js';
import { DigestThread } from './digest-thread.js';
import { refusal } from './refusal.js';

const CHUNK = 4 << 20;
// What a preview or a diff holds of one member (the rest is only hashed).
const HEAD_BYTES = 4 << 20;
// What the content sniffing looks at.
const SNIFF_BYTES = 8192;
const ready = init();
const sessions = new Map(); // id -> { packet, source, cancelled }
const refusedUrls = new Set();

self.onmessage = async ({ data }) => {
  await ready;
  try {
    switch (data.type) {
      case 'open': return await open(data);
      case 'cancel': { const s = sessions.get(data.id); if (s) s.cancelled = true; return; }
      case 'close': return close(data.id);
      case 'member': return await member(data);
      case 'compare': return compare(data);
      case 'diff': return await diff(data);
    }
  } catch (err) {
    post({ type: 'error', id: data.id, request: data.request, error: asRefusal(err) });
  }
};

ready.then(() => {
  post({ type: 'ready' });
  DigestThread.prepare();
}, (err) => post({ type: 'error', error: asRefusal(err) }));

function post(message, transfer = []) { self.postMessage(message, transfer); }

// A refusal from the wasm side is a plain {code, path, offset, message,
// advice}; anything else (an I/O error) is wrapped in the same shape.
function asRefusal(err) {
  if (err && typeof err === 'object' && typeof err.code === 'string' && 'advice' in err) return err;
  return refusal('io', String(err && err.message || err),
                 'the packet could not be read: check the file or the connection and try again');
}

function close(id) {
  const s = sessions.get(id);
  if (s) { s.cancelled = true; s.packet?.free(); sessions.delete(id); }
}

// Chunks of a source, about CHUNK bytes each: a File's stream (faster to
// read in Chromium than slices) or an edge response, small pieces gathered
// so the wasm boundary and the digest thread see few, large chunks. Only
// one gathered chunk is held at a time.
async function* chunksOf(source) {
  const reader = (source.kind === 'file' ? source.file.stream() : source.body).getReader();
  let buffer = new Uint8Array(CHUNK);
  let filled = 0;
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      let piece = value;
      if (filled === 0 && piece.length >= CHUNK) { yield piece; continue; }
      while (piece.length > 0) {
        const n = Math.min(piece.length, CHUNK - filled);
        buffer.set(piece.subarray(0, n), filled);
        filled += n;
        piece = piece.subarray(n);
        if (filled === CHUNK) {
          yield buffer;
          buffer = new Uint8Array(CHUNK); // the last one was handed over
          filled = 0;
        }
      }
    }
    if (filled > 0) yield buffer.subarray(0, filled);
  } finally {
    // Stops reading when verification stops early (refusal, cancel).
    reader.cancel().catch(() => {});
  }
}

async function open({ id, source, expectedDigest }) {
  close(id);
  const session = { packet: null, source, cancelled: false };
  sessions.set(id, session);
  const started = performance.now();
  let total = source.kind === 'file' ? source.file.size : null;
  if (source.kind === 'url') {
    // A packet is content-addressed, so the HTTP cache may keep it; after a
    // refusal, ask the edge again rather than re-read a bad cached copy.
    const cache = refusedUrls.has(source.url) ? 'reload' : 'default';
    const response = await fetch(source.url, { headers: { accept: 'application/octet-stream' }, cache });
    if (!response.ok) throw await httpRefusal(response);
    const length = Number(response.headers.get('content-length'));
    total = Number.isFinite(length) && length > 0 ? length : null;
    source.body = response.body;
  }
  // A /1 packet is named by the SHA-256 of its whole file, computed on a
  // second thread when one can be started (packet-core then skips it here
  // and checks the result at the end); a /2 packet is named by its
  // packet.json, which packet-core checks as soon as it is read, so the
  // second thread stops once the verifier says so.
  let digests = DigestThread.start(id);
  const verifier = digests ? Verifier.withExternalDigest(expectedDigest ?? null) : new Verifier(expectedDigest ?? null);
  let lastPost = 0;
  let wholeNotNeeded = false;
  try {
    for await (const chunk of chunksOf(source)) {
      if (session.cancelled) {
        verifier.free();
        digests?.abort();
        sessions.delete(id);
        post({ type: 'cancelled', id });
        return;
      }
      const progress = verifier.push(chunk);
      if (digests && verifier.wholeHashNeeded === false) {
        digests.abort();
        digests = null;
        wholeNotNeeded = true;
      }
      if (digests) await digests.push(chunk); // hands the chunk over (transferred)
      const now = performance.now();
      if (now - lastPost > 50) { lastPost = now; post({ type: 'progress', id, progress, total }); }
    }
  } catch (err) {
    digests?.abort();
    verifier.free();
    sessions.delete(id);
    delete source.body;
    if (source.kind === 'url') refusedUrls.add(source.url);
    post({ type: 'refused', id, refusal: asRefusal(err), seconds: (performance.now() - started) / 1000 });
    return;
  }
  delete source.body;
  let packet;
  try {
    packet = digests
      ? verifier.finishWithDigest(await digests.finish())
      : wholeNotNeeded ? verifier.finishWithDigest(null) : verifier.finish();
  } catch (err) {
    sessions.delete(id);
    if (source.kind === 'url') refusedUrls.add(source.url);
    post({ type: 'refused', id, refusal: asRefusal(err), seconds: (performance.now() - started) / 1000 });
    return;
  }
  session.packet = packet;
  post({ type: 'verified', id, report: packet.report(), seconds: (performance.now() - started) / 1000 });
}

async function httpRefusal(response) {
  let body = null;
  try { body = await response.json(); } catch { /* not JSON */ }
  const e = body && (body.error || body);
  if (e && typeof e.code === 'string') {
    return refusal(e.code, e.message || '', e.advice || `the edge answered ${response.status}`,
                   { path: e.path ?? null, offset: e.offset ?? null });
  }
  return refusal('http_' + response.status, `the edge answered ${response.status} ${response.statusText}`,
                 'check the digest or ref, and that the edge is reachable');
}

// Reads one file member back (a File slice, or the edge's member read) and
// re-hashes it against the manifest; only then are its bytes handed over:
// the first HEAD_BYTES for text and hex previews, and the whole body as a
// Blob (which the browser may keep on disk) for images and downloads.
async function readMember(session, index) {
  const info = session.packet.member(index);
  if (!info || info.type !== 'file') throw new Error('not a file member');
  const check = session.packet.checkMember(index);
  const parts = [];
  const head = new Uint8Array(Math.min(info.size, HEAD_BYTES));
  let at = 0;
  let url = null;
  let finishing = false;
  const take = (chunk) => {
    check.push(chunk); // throws if more bytes arrive than the manifest declares
    if (at < head.length) head.set(chunk.subarray(0, head.length - at), at);
    at += chunk.length;
    parts.push(chunk);
  };
  try {
    const { source } = session;
    if (source.kind === 'file') {
      for (let off = 0; off < info.size; off += CHUNK) {
        const end = Math.min(off + CHUNK, info.size);
        take(new Uint8Array(await source.file.slice(info.dataOffset + off, info.dataOffset + end).arrayBuffer()));
      }
    } else {
      url = memberUrl(source.memberUrl, info);
      const response = await fetch(url, { cache: refusedUrls.has(url) ? 'reload' : 'default' });
      if (!response.ok) throw await httpRefusal(response);
      const reader = response.body.getReader();
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        take(value);
      }
    }
    finishing = true;
    check.finish(); // consumes the check; throws member_digest_mismatch
  } catch (err) {
    if (!finishing) check.free();
    if (url) refusedUrls.add(url);
    throw err;
  }
  return { info, head, blob: new Blob(parts) };
}

// `{path}` in the template becomes the member path (each component
// URL-encoded), `{index}` its index in the manifest.
function memberUrl(template, info) {
  const path = info.path.split('/').map(encodeURIComponent).join('/');
  return template.replaceAll('{path}', path).replaceAll('{index}', String(info.index));
}

async function member({ id, request, index }) {
  const session = sessions.get(id);
  if (!session?.packet) throw new Error('the packet is not open');
  const { info, head, blob } = await readMember(session, index);
  const kind = classify(head.subarray(0, SNIFF_BYTES));
  post({ type: 'member', id, request, index, info, kind, head: head.buffer, blob }, [head.buffer]);
}

function compare({ id, request, a, b }) {
  const pa = sessions.get(a)?.packet;
  const pb = sessions.get(b)?.packet;
  if (!pa || !pb) throw new Error('both packets must be open and verified');
  post({ type: 'compared', id, request, result: comparePackets(pa, pb) });
}

async function diff({ id, request, a, b, path }) {
  const sides = [sessions.get(a), sessions.get(b)].map((s) => ({ session: s, index: s?.packet?.indexOf(path) }));
  if (sides.some((s) => s.index === undefined)) throw new Error(`${path} is not in both packets`);
  const [old, now] = await Promise.all(sides.map((s) => readMember(s.session, s.index)));
  const kinds = [old, now].map((m) => classify(m.head.subarray(0, SNIFF_BYTES)));
  let result = null;
  if (kinds.every((k) => k === 'text')) {
    // Bodies longer than the head are beyond what a line diff here shows.
    const whole = old.head.length === old.info.size && now.head.length === now.info.size;
    result = whole ? lineDiff(old.head, now.head) : { hunks: [], inserted: 0, deleted: 0, tooLarge: true };
  }
  post({ type: 'diffed', id, request, path, kinds, result });
}
