// The edge API (proto/openapi.yaml), as the page uses it: resolve a ref to a
// digest, stream the packet by digest, read one member. The page is served
// by the Worker, so the API is on the same origin.

import init, { isDigest } from './pkg/packet_inspector_wasm.js';
import { refusal } from './refusal.js';

// What a digest is, is packet-core's rule, asked through the bindings: they
// load here on first use (the packets themselves are read in the workers).
let bindings = null;
async function digestRule() {
  try {
    await (bindings ??= init());
  } catch (err) {
    bindings = null;
    throw refusal('io', `the page's packet-core bindings could not be loaded: ${err.message}`,
                  'reload the page');
  }
  return isDigest;
}

const enc = (s) => encodeURIComponent(s);

// Resolves what the person typed: a digest as is, anything else as a ref
// name through `GET /v1/refs/{name}`.
export async function resolve(input) {
  const isDigest = await digestRule();
  const text = input.trim();
  if (isDigest(text)) return { digest: text, ref: null };
  let response;
  try {
    response = await fetch(`/v1/refs/${text.split('/').map(enc).join('/')}`, { headers: { accept: 'application/json' } });
  } catch (err) {
    throw refusal('io', `the edge could not be reached: ${err.message}`,
                  'check the connection; a page opened from disk can only open local files');
  }
  let body = null;
  try { body = await response.json(); } catch { /* not JSON */ }
  if (!response.ok) {
    const e = body?.error ?? {};
    throw refusal(e.code ?? `http_${response.status}`,
                  e.message ?? `the edge answered ${response.status} for ref ${text}`,
                  e.advice ?? 'check the ref name, or open the packet by its digest');
  }
  const digest = body?.digest ?? body?.ref?.digest;
  if (typeof digest !== 'string' || !isDigest(digest)) {
    throw refusal('edge_answer', `the edge's answer for ref ${text} holds no digest`,
                  'the edge and this page disagree on the API: reload the page');
  }
  return { digest, ref: text };
}

// The source the verification worker streams: the whole packet, checked
// against the digest it was asked for; members read back one at a time.
export function sourceFor(digest) {
  return {
    kind: 'url',
    url: `/v1/packets/${digest}`,
    memberUrl: `/v1/packets/${digest}/members/{path}`,
  };
}
