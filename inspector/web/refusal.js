// The refusal shape every failure takes on the page: packet-core's
// `{code, path, offset, message, advice}` (packet_core::Refusal), built
// here for the failures the page meets outside the wasm module (the edge
// unreachable, an HTTP error, a file that cannot be read).
export function refusal(code, message, advice, { path = null, offset = null } = {}) {
  return { code, path, offset, message, advice };
}
