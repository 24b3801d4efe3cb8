// The verification worker's side of the digest thread (digest-worker.js):
// chunks go over by transfer, at most MAX_IN_FLIGHT_BYTES unacknowledged at
// a time, so a slower digest thread holds back reading instead of piling up
// the file in memory.
const MAX_IN_FLIGHT_BYTES = 12 << 20;

let thread = null;
let unavailable = false;
let broken = false;
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
      run.inFlight -= data.bytes;
      run.wake?.();
      run.wake = null;
    } else if (data.type === 'digest') {
      runs.delete(data.id);
      run.done(data.digest);
    }
  };
  // A digest thread that fails (its wasm would not load) ends every run.
  thread.onerror = () => {
    broken = true;
    for (const run of runs.values()) { run.wake?.(); run.done?.(null); }
    runs.clear();
  };
  return thread;
}

export class DigestThread {
  // Starts the thread ahead of the first packet, so its wasm compiles while
  // the page waits for a file rather than during the first verification.
  static prepare() {
    threadOrNull();
  }

  // A digest run for verification `id`, or null to hash on this thread.
  static start(id) {
    const t = broken ? null : threadOrNull();
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
  // fewer than MAX_IN_FLIGHT_BYTES await hashing.
  async push(chunk) {
    const run = runs.get(this.id);
    run.inFlight += chunk.byteLength;
    this.thread.postMessage({ type: 'chunk', id: this.id, chunk }, [chunk.buffer]);
    while (run.inFlight >= MAX_IN_FLIGHT_BYTES && !broken) await new Promise((wake) => { run.wake = wake; });
    if (broken) throw new Error('the digest thread stopped: reload the page');
  }

  // The whole packet's digest, `sha256:<hex>`.
  async finish() {
    const digest = await new Promise((done) => {
      const run = runs.get(this.id);
      if (!run) { done(null); return; }
      run.done = done;
      this.thread.postMessage({ type: 'finish', id: this.id });
    });
    if (!digest) throw new Error('the digest thread stopped: reload the page');
    return digest;
  }

  abort() {
    runs.delete(this.id);
    this.thread.postMessage({ type: 'abort', id: this.id });
  }
}
