// End-to-end tests of a save that costs the change (docs/cli.md, "save"
// and "The workspace record"): the real `pillbox` binary (release build)
// against the Worker under `wrangler dev --local`, through the recording
// proxy of tests/e2e/proxy.mjs. A second save after a one-file edit reads
// one file and sends the changed chunk and the changed chunks of
// packet.json in one request; a grown session log sends its tail; what the
// store holds is what `pack` makes of the workspace.
//
// Run: node --test tests/e2e/save.test.mjs
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { appendFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { after, before, describe, test } from 'node:test';

import { assertMatchSchemas } from './cli-schemas.mjs';
import { ROOT, TARGET, TOKEN, buildWorker, startEdge } from './edge.mjs';
import { startProxy } from './proxy.mjs';

const PILLBOX = join(TARGET, 'release/pillbox');
const THREAD = '0199a213-81c0-7800-8aa1-bbab2a035a53';
// Files stamped within 2 s of a save's start are read again by the next
// save: a workspace is left this long after it is written.
const SETTLED_MS = 2_100;

let edge;
let store;
let work;
const printed = [];

before(async () => {
  const b = spawnSync('cargo', ['build', '--quiet', '--release', '-p', 'pillbox'], { cwd: ROOT, encoding: 'utf8' });
  if (b.status !== 0) throw new Error(`cargo build failed:\n${b.stderr}`);
  buildWorker();
  work = mkdtempSync(join(tmpdir(), 'pillbox-e2e-save-'));
  edge = await startEdge();
  store = await startProxy(edge.url);
}, { timeout: 900_000 });

after(async () => {
  await store?.stop();
  await edge?.stop();
  if (work) rmSync(work, { recursive: true, force: true });
});

const settle = () => new Promise((ok) => setTimeout(ok, SETTLED_MS));

function env(extra) {
  const e = { ...process.env, PILLBOX_TOKEN: TOKEN };
  for (const k of ['CODEX_HOME', 'CLAUDE_CONFIG_DIR', 'PILLBOX_REMOTE', 'PILLBOX_CACHE_MAX_BYTES']) delete e[k];
  return Object.assign(e, extra);
}

function pillbox(args, extra = {}) {
  const r = spawnSync(PILLBOX, ['checkpoint', ...args, '--quiet'], { encoding: 'buffer', env: env(extra), maxBuffer: 1 << 30 });
  return { code: r.status, stdout: r.stdout, out: r.stdout.toString('utf8') + r.stderr.toString('utf8') };
}

function ok(args, extra, schema) {
  const r = pillbox(args, extra);
  assert.equal(r.code, 0, `pillbox checkpoint ${args.join(' ')}: ${r.out}`);
  const json = JSON.parse(r.stdout.toString('utf8'));
  if (schema) printed.push({ file: schema, value: json });
  return json;
}

function write(path, contents) {
  mkdirSync(dirname(path), { recursive: true });
  writeFileSync(path, contents);
}

/** `pack -o -`'s bytes. */
function packed(ws, flags = []) {
  const r = pillbox(['pack', ws, '-o', '-', ...flags]);
  assert.equal(r.code, 0, r.out);
  return r.stdout;
}

let dirs = 0;
function fresh(name) {
  dirs += 1;
  return join(work, `${dirs}-${name}`);
}

describe('save costs the change', () => {
  test('a one-file edit of 20,000 files reads one file and sends one request of at most 32 KiB', { timeout: 600_000 }, async (t) => {
    const ws = fresh('ws');
    for (let i = 0; i < 20_000; i += 1) {
      write(join(ws, `node_modules/pkg${i % 400}/lib/m${i % 7}/file${i}.js`), `module.exports = function f${i}() { return ${i}; };\n`);
    }
    await settle();
    const host = { XDG_STATE_HOME: fresh('state'), XDG_CACHE_HOME: fresh('cache') };
    const ref = 'sessions/save/files';
    const remote = ['--remote', store.url, '--ref', ref];
    const first = ok(['save', ws, ...remote], host, 'save-1.schema.json');
    assert.equal(first.files_read, 20_000);
    assert.equal(first.files_reused, 0);
    write(join(ws, 'node_modules/pkg3/lib/m3/file3.js'), "module.exports = 'edited';\n");
    const mark = (await store.log()).length;
    const second = ok(['save', ws, ...remote], host, 'save-1.schema.json');
    assert.equal(second.files_read, 1, JSON.stringify(second));
    assert.equal(second.files_reused, 19_999);
    assert.equal(second.mode, 'delta');
    assert.equal(second.delta.one_request, true, JSON.stringify(second.delta));
    assert.ok(second.bytes_sent <= 32 * 1024, `${second.bytes_sent} bytes sent`);
    t.diagnostic(`first save ${first.seconds.total.toFixed(2)} s, ${first.bytes_sent} bytes sent; second ${second.seconds.total.toFixed(2)} s, ${second.bytes_sent} bytes sent`);
    const pushes = (await store.log()).slice(mark).filter((r) => r.path.startsWith('/v1/pushes'));
    assert.deepEqual(pushes.map((r) => [r.method, r.path, r.status]), [['POST', '/v1/pushes', 201]]);
    // What the store holds is what pack makes of the workspace.
    const out = fresh('pulled.tar');
    ok(['pull', ref, '--remote', store.url, '-o', out, '--no-cache'], host, 'pull-1.schema.json');
    assert.ok(readFileSync(out).equals(packed(ws)), 'the stored packet is the one pack makes');
    const into = fresh('restored');
    const restored = ok(['restore', ref, '--remote', store.url, '--into', into, '--no-cache'], { XDG_STATE_HOME: fresh('state-b') }, 'restore-1.schema.json');
    assert.equal(restored.digest, second.digest);
    assert.equal(readFileSync(join(into, 'node_modules/pkg3/lib/m3/file3.js'), 'utf8'), "module.exports = 'edited';\n");
  });

  test('a turn appended to the session log sends at most 64 KiB', { timeout: 600_000 }, async (t) => {
    const ws = fresh('rollout-ws');
    for (let i = 0; i < 50; i += 1) write(join(ws, `src/f${i}.rs`), `fn f${i}() {}\n`);
    const home = fresh('codex-home');
    const rollout = join(home, `sessions/2026/11/30/rollout-2026-11-30T01-02-03-${THREAD}.jsonl`);
    mkdirSync(dirname(rollout), { recursive: true });
    const g = spawnSync('python3', [join(ROOT, 'bench/genrollout.py'), rollout, '32'], { encoding: 'utf8' });
    assert.equal(g.status, 0, g.stderr);
    await settle();
    const harness = ['--harness', 'codex', '--thread', THREAD, '--codex-home', home];
    const host = { XDG_STATE_HOME: fresh('state'), XDG_CACHE_HOME: fresh('cache') };
    const remote = ['--remote', store.url, '--ref', 'sessions/save/rollout'];
    ok(['save', ws, ...remote, ...harness], host, 'save-1.schema.json');
    const excerpt = readFileSync(join(ROOT, 'docs/transfer.md'), 'utf8').slice(0, 12_000);
    const line = (type, payload) => JSON.stringify({ timestamp: '2026-12-01T10:00:00.000Z', type, payload }) + '\n';
    appendFileSync(rollout, line('response_item', { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'go on' }] })
      + line('response_item', { type: 'function_call_output', call_id: 'c1', output: JSON.stringify({ output: excerpt }) })
      + line('response_item', { type: 'message', role: 'assistant', content: [{ type: 'output_text', text: 'done' }] }));
    const turn = ok(['save', ws, ...remote, ...harness], host, 'save-1.schema.json');
    assert.equal(turn.files_read, 1, JSON.stringify(turn));
    assert.equal(turn.delta.one_request, true, JSON.stringify(turn.delta));
    assert.ok(turn.bytes_sent <= 64 * 1024, `${turn.bytes_sent} bytes sent`);
    t.diagnostic(`a turn: ${turn.seconds.total.toFixed(2)} s, ${turn.bytes_sent} bytes sent`);
    const out = fresh('rollout.tar');
    ok(['pull', 'sessions/save/rollout', '--remote', store.url, '-o', out, '--no-cache'], host, 'pull-1.schema.json');
    assert.ok(readFileSync(out).equals(packed(ws, harness)));
  });
});

test('every object printed matches its schema in proto/cli/', () => {
  assertMatchSchemas(printed);
});
