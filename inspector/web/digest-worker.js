// The digest thread: hashes the whole packet while the verification worker
// checks its structure and members, so the two SHA-256 passes a packet
// needs run on two cores. Acknowledges each chunk so the sender can keep
// the number of chunks in flight (and the memory they hold) bounded.
import init, { PacketHasher } from './pkg/packet_inspector_wasm.js';

const ready = init();
const hashers = new Map(); // verification id -> PacketHasher

self.onmessage = async ({ data }) => {
  await ready;
  switch (data.type) {
    case 'start':
      hashers.get(data.id)?.free();
      hashers.set(data.id, new PacketHasher());
      return;
    case 'chunk':
      hashers.get(data.id)?.update(data.chunk);
      self.postMessage({ type: 'ack', id: data.id, bytes: data.chunk.byteLength });
      return;
    case 'finish': {
      const hasher = hashers.get(data.id);
      hashers.delete(data.id);
      self.postMessage({ type: 'digest', id: data.id, digest: hasher ? hasher.finish() : null });
      return;
    }
    case 'abort':
      hashers.get(data.id)?.free();
      hashers.delete(data.id);
  }
};
