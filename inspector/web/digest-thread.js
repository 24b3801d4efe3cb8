// The verification worker's side of the digest thread (digest-worker.js):
// chunks go over by transfer, at most MAX_IN_FLIGHT unacknowledged at a
// time, so a slower digest thread holds back reading instead of piling up
// the file in memory.
const MAX_IN_FLIGHT = 3;

let thread = null;
let unavailable = false;
const runs = new Map(); // id -> { inFlight, wake, done }

function threadOrNull() {
  if (thread || unavailable) return thread;
  try {
    thread = new Worker(new URL('./digest-worker.js', import.meta.url), { type: 'module' });
  } catch {
    unavailable = true; // no nested workers here: hash on this thread
    return null;
  }
  thread.onmessage = ({ data }) => {
    const run = runs.get(data.id);
    if (!run) return;
    if (data.type === 'ack') {
      run.inFlight--;
      run.wake?.();
      run.wake = null;
    } else if (data.type === 'digest') {
      runs.delete(data.id);
      run.done(data.digest);
    }
  };
  return thread;
}

export class DigestThread {
  // A digest run for verification `id`, or null to hash on this thread.
  static start(id) {
    const t = threadOrNull();
    if (!t) return null;
    runs.set(id, { inFlight: 0, wake: null, done: null });
    t.postMessage({ type: 'start', id });
    return new DigestThread(t, id);
  }

  constructor(t, id) {
    this.thread = t;
    this.id = id;
  }

  // Sends a chunk (the caller must not use it afterwards); resolves once
  // fewer than MAX_IN_FLIGHT chunks await hashing.
  async push(chunk) {
    const run = runs.get(this.id);
    run.inFlight++;
    this.thread.postMessage({ type: 'chunk', id: this.id, chunk }, [chunk.buffer]);
    while (run.inFlight >= MAX_IN_FLIGHT) await new Promise((wake) => { run.wake = wake; });
  }

  // The whole packet's digest, `sha256:<hex>`.
  finish() {
    return new Promise((done) => {
      runs.get(this.id).done = done;
      this.thread.postMessage({ type: 'finish', id: this.id });
    });
  }

  abort() {
    runs.delete(this.id);
    this.thread.postMessage({ type: 'abort', id: this.id });
  }
}
