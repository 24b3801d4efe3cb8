// Starts the real Worker with `wrangler dev --local` on 127.0.0.1 (fresh
// persisted R2/D1 state in a temporary directory, migrations applied) and
// reads that state back from its files (state.mjs), writing to it with
// wrangler's own CLI.
import { spawn, spawnSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';

import { readRows } from './state.mjs';
import { objectsOf } from './store.mjs';

export const ROOT = resolve(import.meta.dirname, '../..');
/** Cargo's target directory (CARGO_TARGET_DIR is honoured). */
export const TARGET = process.env.CARGO_TARGET_DIR ? resolve(process.env.CARGO_TARGET_DIR) : join(ROOT, 'target');
/** wrangler on node 22 (scripts/wrangler.sh). */
export const WRANGLER = join(ROOT, 'scripts/wrangler.sh');
/** A fresh bearer token named `id`: the name, then 24 random bytes in hex. */
export function newToken(id) {
  return `${id}-${randomBytes(24).toString('hex')}`;
}

/** The token with every scope (PILLBOX_TOKEN) of the test servers. */
export const TOKEN = newToken('e2e-token');

export function sha256(bytes) {
  return 'sha256:' + createHash('sha256').update(bytes).digest('hex');
}

function run(cmd, args, options = {}) {
  const r = spawnSync(cmd, args, { cwd: ROOT, encoding: 'utf8', maxBuffer: 1 << 26, ...options });
  if (r.status !== 0 && !options.allowFailure) {
    throw new Error(`${cmd} ${args.join(' ')} failed (${r.status}):\n${r.stdout}\n${r.stderr}`);
  }
  return r;
}

/** Builds the Worker once (scripts/worker-build.sh skips an up-to-date build). */
export function buildWorker() {
  run('bash', ['scripts/worker-build.sh']);
}

/** The release programs the tests run (target/release/). */
export const PILLBOX = join(TARGET, 'release/pillbox');
export const WORKER_FIXTURES = join(TARGET, 'release/examples/worker_fixtures');
export const PUSH_BODY = join(TARGET, 'release/examples/push_body');

let builtRelease = false;
/**
 * Builds the release programs once per test file (scripts/build-release.sh:
 * one cargo invocation for all of them, quick when they are up to date).
 */
export function buildRelease() {
  if (!builtRelease) run('bash', ['scripts/build-release.sh', '--quiet']);
  builtRelease = true;
}

/** Runs packet-core's worker_fixtures example (release) with `args`. */
export function workerFixtures(args, options = {}) {
  buildRelease();
  return run(WORKER_FIXTURES, args, options);
}

/**
 * Runs the Worker's push_body example (release; a reference client of /2
 * pushes) with `args`; `options.allowFailure` returns a failed run.
 */
export function pushBodyExample(args, options = {}) {
  buildRelease();
  return run(PUSH_BODY, args, options);
}

/** Generates the fixture packets into a fresh directory; returns it and index.json. */
export function fixtures() {
  const dir = mkdtempSync(join(tmpdir(), 'pillbox-e2e-fixtures-'));
  workerFixtures(['set', dir]);
  const index = JSON.parse(readFileSync(join(dir, 'index.json'), 'utf8'));
  const read = (name) => readFileSync(join(dir, `${name}.pkt`));
  return { dir, index, read };
}

/** What packet-core itself says about these bytes (the tests' oracle). */
export function coreVerdict(bytes, digest) {
  const dir = mkdtempSync(join(tmpdir(), 'pillbox-e2e-verdict-'));
  const file = join(dir, 'p.pkt');
  writeFileSync(file, bytes);
  const r = workerFixtures(['verify', file, digest]);
  return JSON.parse(r.stdout);
}

function freePort() {
  return new Promise((ok, fail) => {
    const s = createServer();
    s.once('error', fail);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => ok(port));
    });
  });
}

/**
 * The PILLBOX_TOKENS secret for `scopes` ({ id: [scope, …] }): each id gets
 * a fresh random token; the secret holds only its SHA-256. Returns
 * { secret, tokens: { id: token } }.
 */
export function scopedTokens(scopes) {
  const tokens = {};
  const entries = Object.entries(scopes).map(([id, list]) => {
    tokens[id] = newToken(id);
    return { id, sha256: createHash('sha256').update(tokens[id]).digest('hex'), scopes: list };
  });
  return { secret: JSON.stringify(entries), tokens };
}

/**
 * Starts `wrangler dev --local` with `vars` (wrangler.toml's [vars]
 * overridden) and PILLBOX_TOKEN (every scope) from an env file. Returns
 * { url, state, stop, r2Has, d1, objectsFor, tokens }.
 * `options.tokens` ({ id: [scope, …] }) also sets PILLBOX_TOKENS; the
 * answer's `tokens` maps each id to its token.
 * `options.testScheduled` passes `--test-scheduled` (GET /__scheduled?cron=…
 * then runs the Worker's scheduled handler); `options.state` reuses a state
 * directory.
 */
export async function startEdge(vars = {}, options = {}) {
  // `options.state`: an existing state directory (a store made earlier,
  // e.g. at an older schema: the migrations not yet applied are).
  const state = options.state ?? mkdtempSync(join(tmpdir(), 'pillbox-e2e-state-'));
  const envFile = join(state, 'test.env');
  const scoped = options.tokens ? scopedTokens(options.tokens) : { tokens: {} };
  // Single quotes: the env file keeps the JSON's double quotes as they are.
  writeFileSync(envFile, `PILLBOX_TOKEN=${TOKEN}\n${scoped.secret ? `PILLBOX_TOKENS='${scoped.secret}'\n` : ''}`);
  // wrangler.toml's [build] runs scripts/worker-build.sh once at start,
  // which finds the Worker built already (buildWorker).
  const common = ['--config', join(ROOT, 'wrangler.toml'), '--persist-to', state];
  run(WRANGLER, ['d1', 'migrations', 'apply', 'pillbox-index', '--local', ...common], { env: { ...process.env, CI: '1' } });
  const port = await freePort();
  const inspector = await freePort();
  const args = ['dev', '--local', '--ip', '127.0.0.1', '--port', String(port), '--inspector-port', String(inspector),
    ...common, '--env-file', envFile,
    '--show-interactive-dev-session=false', '--log-level', 'warn'];
  for (const [k, v] of Object.entries(vars)) args.push('--var', `${k}:${v}`);
  if (options.testScheduled) args.push('--test-scheduled');
  const child = spawn(WRANGLER, args, { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
  let log = '';
  child.stdout.on('data', (d) => { log += d; });
  child.stderr.on('data', (d) => { log += d; });
  const url = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 90_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`wrangler dev exited:\n${log}`);
    try {
      // One connection per probe (as `client`): a pooled one left idle
      // would be closed by the server under a later request.
      const r = await client(url, null).call('GET', '/v1', { auth: false });
      if (r.status === 200) break;
    } catch { /* not listening yet */ }
    if (Date.now() > deadline) { process.kill(-child.pid, 'SIGTERM'); throw new Error(`wrangler dev not ready in 90 s:\n${log}`); }
    await new Promise((ok) => setTimeout(ok, 250));
  }
  const stop = async () => {
    if (child.exitCode !== null) return;
    const exited = new Promise((ok) => child.once('exit', ok));
    try { process.kill(-child.pid, 'SIGTERM'); } catch { /* gone */ }
    await Promise.race([exited, new Promise((ok) => setTimeout(ok, 5000))]);
    if (child.exitCode === null) { try { process.kill(-child.pid, 'SIGKILL'); } catch { /* gone */ } }
  };
  /** True if R2 (its object index in the local state) holds `key`. */
  const r2Has = (key) => {
    let rows;
    try {
      rows = readRows(state, 'r2', `SELECT count(*) AS n FROM _mf_objects WHERE key = '${key.replaceAll("'", "''")}'`);
    } catch (e) {
      // No object was ever put: the bucket has no database yet.
      if (/expected one r2 database .* found 0/.test(e.message)) return false;
      throw e;
    }
    return rows[0].n > 0;
  };
  /**
   * Rows from D1: a read from the local state's files; a statement that
   * writes, through wrangler's CLI, as the running server shares the files
   * with it. While the server writes, the CLI can find the database locked
   * (SQLITE_BUSY); it is asked again, a few times, with a growing pause,
   * before the failure counts.
   */
  const d1 = (sql) => {
    if (/^\s*SELECT\b/i.test(sql)) return readRows(state, 'd1', sql);
    const args = ['d1', 'execute', 'pillbox-index', '--local', ...common, '--json', '--command', sql];
    for (let attempt = 0; ; attempt++) {
      const r = run(WRANGLER, args, { allowFailure: attempt < 4 });
      if (r.status === 0) return JSON.parse(r.stdout)[0].results;
      if (!/SQLITE_BUSY|database is locked/.test(`${r.stdout}${r.stderr}`)) run(WRANGLER, args);
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 250 * 2 ** attempt);
    }
  };
  /**
   * The R2 objects written for packet `digest` (its whole object, or the
   * packs of pushes of it) that exist: { key, users, unused_check }, where
   * `users` counts the stored packets and open pushes using it and
   * `unused_check` is 1 when the clean-up is to look at it.
   */
  const objectsFor = (digest) => objectsOf({ d1 }, digest).filter((r) => r2Has(r.key));
  /**
   * Runs the scheduled clean-up now (`--test-scheduled`), on a connection
   * of its own; throws unless it answers 200.
   */
  const scheduled = async () => {
    const r = await client(url, null).call('GET', `/__scheduled?cron=${encodeURIComponent('17 * * * *')}`, { auth: false });
    if (r.status !== 200) throw new Error(`the scheduled clean-up answered ${r.status}: ${r.bytes.toString('utf8').slice(0, 300)}`);
    return r;
  };
  return { url, state, stop, r2Has, d1, objectsFor, scheduled, tokens: scoped.tokens, pid: child.pid, log: () => log };
}

/**
 * A small HTTP client for the API (node:http, one connection per request:
 * no keep-alive races with the local server's idle timeout).
 */
export function client(url, token = TOKEN) {
  const call = (method, path, { body, headers = {}, auth = true } = {}) => new Promise((ok, fail) => {
    const h = { ...headers };
    if (auth && token) h.authorization = `Bearer ${token}`;
    let payload = body;
    if (body !== undefined && !(body instanceof Uint8Array) && typeof body !== 'string') {
      payload = JSON.stringify(body);
      h['content-type'] = 'application/json';
    }
    if (payload !== undefined) payload = Buffer.from(payload);
    h['content-length'] = String(payload ? payload.length : 0);
    const req = httpRequest(url + path, { method, headers: h, agent: false }, (res) => {
      const chunks = [];
      res.on('data', (c) => chunks.push(c));
      res.on('error', fail);
      res.on('end', () => {
        const bytes = Buffer.concat(chunks);
        const headers = new Headers();
        for (const [k, v] of Object.entries(res.headers)) headers.set(k, Array.isArray(v) ? v.join(', ') : v);
        let json;
        if ((headers.get('content-type') || '').includes('json') && bytes.length) json = JSON.parse(bytes.toString('utf8'));
        ok({ status: res.statusCode, headers, bytes, json });
      });
    });
    req.on('error', (e) => fail(new Error(`${method} ${path}: ${e.message}`)));
    req.end(payload);
  });
  return { call };
}
