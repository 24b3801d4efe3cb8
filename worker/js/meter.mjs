// What a request costs in D1 and R2 (docs/worker.md, "Costs"): the Worker's
// D1 and R2 bindings, seen through these wrappers, count every call the
// code makes through them, so no call site counts anything itself.
//
// - D1: each statement run (alone or in a batch) is a query, with the rows
//   its result's `meta` says it read and wrote and the time it took in the
//   database (`meta.duration`: what one database, which runs its queries
//   one at a time, spends on it); each round trip (a statement's run, a
//   batch, an exec) is a call.
// - R2: operations by the class Cloudflare bills them as (A: put, list,
//   multipart create / part / complete; B: get, head; deletes and aborts
//   are free), the bytes stored (the size of each object put or completed),
//   the bytes deleted and the bytes read.
//
// - Time: `wait_ms`, the wall time during which at least one D1 or R2 call
//   was in flight (a streamed put is left out: the Worker itself feeds its
//   body while it is pending). CPU time cannot be read inside the runtime;
//   a request's wall time less its waits is the closest measure.
//
// A meter counts one request (or one scheduled run); every meter also adds
// to the isolate's totals, which include what a request does after its
// answer's headers are sent (a streamed read). src/meter.rs turns both into
// the `Pillbox-Cost` header and `GET /v1/bench/costs`.

/** The counters, in the order src/cost.rs reads them. */
export const FIELDS = ['d1_calls', 'd1_queries', 'rows_read', 'rows_written', 'd1_ms', 'r2_class_a', 'r2_class_b',
  'r2_deletes', 'bytes_put', 'bytes_deleted', 'bytes_read', 'wait_ms'];

function blank() {
  const meter = {};
  for (const f of FIELDS) meter[f] = 0;
  // Calls in flight, and since when (not counters: not enumerable).
  Object.defineProperty(meter, 'inFlight', { value: 0, writable: true });
  Object.defineProperty(meter, 'since', { value: 0, writable: true });
  return meter;
}

const now = () => (globalThis.performance ? performance.now() : Date.now());

/** Runs `call` (a promise's maker), its time in flight counted as waiting. */
async function waited(meter, call) {
  if (meter.inFlight++ === 0) meter.since = now();
  try {
    return await call();
  } finally {
    if (--meter.inFlight === 0) add(meter, 'wait_ms', now() - meter.since);
  }
}

const totals = blank();
// Per table (the first table a statement names), for the isolate only.
const tables = {};

/** A fresh meter for one request. */
export function newMeter() {
  return blank();
}

/** The isolate's totals since it started (a copy). */
export function isolateTotals() {
  return { ...totals };
}

/** The isolate's D1 queries by table: { table: { queries, rows_read, rows_written, d1_ms } }. */
export function isolateTables() {
  return JSON.parse(JSON.stringify(tables));
}

/** The table a statement is about: the first it names outside parentheses (subqueries). */
export function tableOf(sql) {
  let outer = sql || '';
  for (let inner = outer.replace(/\([^()]*\)/g, ''); inner !== outer; inner = outer.replace(/\([^()]*\)/g, '')) outer = inner;
  const m = /\b(?:FROM|INTO|UPDATE)\s+([A-Za-z_][A-Za-z0-9_]*)/i.exec(outer);
  return m ? m[1] : 'other';
}

/** A meter's counters (a copy). */
export function readMeter(meter) {
  return { ...meter };
}

function add(meter, field, n) {
  const v = Number(n) || 0;
  meter[field] += v;
  totals[field] += v;
}

function counted(meter, result, sql) {
  add(meter, 'd1_queries', 1);
  const meta = (result && result.meta) || {};
  add(meter, 'rows_read', meta.rows_read);
  add(meter, 'rows_written', meta.rows_written);
  add(meter, 'd1_ms', meta.duration);
  const t = (tables[tableOf(sql)] ??= { queries: 0, rows_read: 0, rows_written: 0, d1_ms: 0 });
  t.queries += 1;
  t.rows_read += Number(meta.rows_read) || 0;
  t.rows_written += Number(meta.rows_written) || 0;
  t.d1_ms += Number(meta.duration) || 0;
  return result;
}

const REAL = Symbol('unmetered');
const SQL = Symbol('sql');

/** `target` with the methods in `wrapped` replaced; everything else as it is. */
function facade(target, wrapped, sql) {
  return new Proxy(target, {
    get(t, prop) {
      if (prop === REAL) return t;
      if (prop === SQL) return sql;
      if (Object.prototype.hasOwnProperty.call(wrapped, prop)) return wrapped[prop];
      const v = Reflect.get(t, prop, t);
      return typeof v === 'function' && prop !== 'constructor' ? v.bind(t) : v;
    },
  });
}

function statement(real, meter, sql) {
  return facade(real, {
    bind: (...values) => statement(real.bind(...values), meter, sql),
    async all() {
      add(meter, 'd1_calls', 1);
      return counted(meter, await waited(meter, () => real.all()), sql);
    },
    async run() {
      add(meter, 'd1_calls', 1);
      return counted(meter, await waited(meter, () => real.run()), sql);
    },
    // `first` answers no meta: it runs as `all` and answers as `first` does.
    async first(column) {
      add(meter, 'd1_calls', 1);
      const result = counted(meter, await waited(meter, () => real.all()), sql);
      const row = (result.results && result.results[0]) ?? null;
      if (column === undefined || column === null) return row;
      if (row === null) return null;
      if (!(column in row)) throw new Error(`D1_COLUMN_NOTFOUND: Column not found (${column})`);
      return row[column];
    },
    async raw(options) {
      add(meter, 'd1_calls', 1);
      add(meter, 'd1_queries', 1);
      return waited(meter, () => real.raw(options));
    },
  }, sql);
}

/** `db` (a D1Database) counting into `meter`. */
export function meterDatabase(db, meter) {
  return facade(db, {
    prepare: (sql) => statement(db.prepare(sql), meter, sql),
    async batch(statements) {
      add(meter, 'd1_calls', 1);
      const results = await waited(meter, () => db.batch(statements.map((s) => s[REAL] ?? s)));
      results.forEach((r, i) => counted(meter, r, statements[i][SQL]));
      return results;
    },
    async exec(sql) {
      add(meter, 'd1_calls', 1);
      const result = await waited(meter, () => db.exec(sql));
      add(meter, 'd1_queries', (result && result.count) || 1);
      add(meter, 'd1_ms', result && result.duration);
      return result;
    },
  });
}

function upload(real, meter) {
  return facade(real, {
    async uploadPart(number, value, options) {
      add(meter, 'r2_class_a', 1);
      return waited(meter, () => (options === undefined ? real.uploadPart(number, value) : real.uploadPart(number, value, options)));
    },
    async complete(parts) {
      add(meter, 'r2_class_a', 1);
      const object = await waited(meter, () => real.complete(parts));
      add(meter, 'bytes_put', object && object.size);
      return object;
    },
  });
}

/** The bytes a get's answer holds: its range, or the whole object. */
function bytesOf(object) {
  if (!object || !('body' in object)) return 0;
  const range = object.range;
  if (range && typeof range.length === 'number') return range.length;
  if (range && typeof range.offset === 'number') return object.size - range.offset;
  if (range && typeof range.suffix === 'number') return Math.min(range.suffix, object.size);
  return object.size;
}

/** `bucket` (an R2Bucket) counting into `meter`. */
export function meterBucket(bucket, meter) {
  return facade(bucket, {
    async head(key) {
      add(meter, 'r2_class_b', 1);
      return waited(meter, () => bucket.head(key));
    },
    async get(key, options) {
      add(meter, 'r2_class_b', 1);
      const object = await waited(meter, () => bucket.get(key, options));
      add(meter, 'bytes_read', bytesOf(object));
      return object;
    },
    async put(key, value, options) {
      add(meter, 'r2_class_a', 1);
      const streamed = value instanceof ReadableStream;
      const object = await (streamed ? bucket.put(key, value, options) : waited(meter, () => bucket.put(key, value, options)));
      add(meter, 'bytes_put', object && object.size);
      return object;
    },
    async list(options) {
      add(meter, 'r2_class_a', 1);
      return waited(meter, () => bucket.list(options));
    },
    async delete(keys) {
      // The bytes a delete frees: the meter asks their sizes itself (heads
      // it does not count: the code did not make them).
      const list = Array.isArray(keys) ? keys : [keys];
      const heads = await Promise.all(list.map((k) => bucket.head(k).catch(() => null)));
      add(meter, 'r2_deletes', list.length);
      add(meter, 'bytes_deleted', heads.reduce((n, h) => n + (h ? h.size : 0), 0));
      return waited(meter, () => bucket.delete(keys));
    },
    async createMultipartUpload(key, options) {
      add(meter, 'r2_class_a', 1);
      return upload(await waited(meter, () => bucket.createMultipartUpload(key, options)), meter);
    },
    resumeMultipartUpload: (key, id) => upload(bucket.resumeMultipartUpload(key, id), meter),
  });
}

/**
 * `env` with its D1 binding `database` and R2 binding `bucket` counting
 * into `meter`; every other binding and variable as it is.
 */
export function meterEnv(env, database, bucket, meter) {
  const own = {};
  if (env[database]) own[database] = meterDatabase(env[database], meter);
  if (env[bucket]) own[bucket] = meterBucket(env[bucket], meter);
  return new Proxy(env, {
    get(t, prop) {
      if (Object.prototype.hasOwnProperty.call(own, prop)) return own[prop];
      return Reflect.get(t, prop, t);
    },
  });
}
