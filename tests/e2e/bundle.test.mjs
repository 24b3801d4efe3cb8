// The Worker's module as scripts/worker-bundle.mjs builds it (worker-build
// 0.8.7's output, made without worker-build): the crate versions its entry
// (worker/js/shim.js) was written for are the ones in Cargo.lock, the glue
// wasm-bindgen writes for the built wasm exports exactly what the entry
// wraps, and the bundle's module, imports and exports fit together. A new
// `worker` or wasm-bindgen, or a new handler or exported class in the
// crate, fails here until the entry follows. Also: wrangler.toml's
// compatibility date is one the bundled workerd runs.
//
// Run: node --test tests/e2e/bundle.test.mjs
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';

import { ROOT, TARGET, buildWorker } from './edge.mjs';
import {
  SDK, SHIM, SHIM_FOR, SYSTEM_FNS, bindgen, checkGlue, checkToolchain, checkVersions, interfaceOf, lockedVersions, producers, shimWraps,
} from '../../scripts/worker-bundle.mjs';

const BUILD = join(ROOT, 'worker/build');
/** The runtime's modules the Worker calls (worker/src/platform.rs), and what it calls of them. */
const RUNTIME = ['node:crypto', 'node:zlib'];
const RUNTIME_FNS = ['createHash', 'update', 'digest', 'zstdDecompressSync', 'constants'];
let work;
let glue;

before(() => {
  buildWorker();
  work = mkdtempSync(join(tmpdir(), 'pillbox-e2e-bundle-'));
  glue = bindgen(join(TARGET, 'wasm32-unknown-unknown/release/pillbox_worker.wasm'), work);
});

after(() => {
  if (work) rmSync(work, { recursive: true, force: true });
});

test('Cargo.lock has the worker and wasm-bindgen the entry was written for, and the wasm-bindgen CLI is that version', () => {
  assert.deepEqual(lockedVersions(Object.keys(SHIM_FOR)), SHIM_FOR);
  assert.doesNotThrow(() => checkToolchain());
  const lock = readFileSync(join(ROOT, 'Cargo.lock'), 'utf8');
  const bumped = lock.replace(/^(name = "worker"\nversion = )"[^"]+"/m, '$1"0.9.0"');
  assert.notEqual(bumped, lock);
  assert.throws(() => checkVersions(bumped), /worker 0\.9\.0.*worker 0\.8\.7/);
});

test('the glue for the built wasm exports the system functions, and exactly the handlers and classes the entry wraps', () => {
  const shim = readFileSync(SHIM, 'utf8');
  const wraps = shimWraps(shim);
  assert.deepEqual([...wraps.handlers].sort(), ['fetch', 'scheduled']);
  assert.ok(wraps.classes.length > 0);
  assert.deepEqual(checkGlue(glue, shim), { handlers: wraps.handlers, classes: wraps.classes });
  // A handler or class the entry does not wrap, one it wraps that the crate
  // no longer exports, or a system function gone: each is refused.
  assert.throws(() => checkGlue(`${glue}\nexport function queue(batch, env, ctx) {}\n`, shim), /queue/);
  assert.throws(() => checkGlue(`${glue}\nexport class Counter {}\n`, shim), /Counter/);
  assert.throws(() => checkGlue(glue.replace(/^export function scheduled\(/m, 'function scheduled('), shim), /scheduled/);
  assert.throws(() => checkGlue(glue.replace(/^export function __worker_init_state\(/m, 'function __worker_init_state('), shim), /__worker_init_state/);
  assert.throws(() => checkGlue(glue, shim.replace('return exports.fetch.call(this, arg, this.env, this.ctx);', 'return exports.fetch(arg);')), /fetch/);
});

test('the built wasm: its imports are what the glue provides, its exports what the glue and the entry call, its producers name the SDK', () => {
  const wasm = readFileSync(join(BUILD, 'index_bg.wasm'));
  const js = readFileSync(join(BUILD, 'index.js'), 'utf8');
  const { imports, exports } = interfaceOf(wasm);
  assert.ok(imports.length > 0);
  // wasm-bindgen's glue, and the crate's own JS modules (worker/js/, named
  // by `#[wasm_bindgen(module = …)]`), which it imports from directly.
  const own = (m) => /^\.\/snippets\/pillbox-worker-[0-9a-f]+\/js\/([\w.-]+\.m?js)$/.exec(m)?.[1];
  const modules = [...new Set(imports.map((i) => i.module))];
  assert.ok(modules.includes('./index_bg.js'));
  for (const m of modules.filter((m) => m !== './index_bg.js' && !RUNTIME.includes(m))) {
    assert.ok(own(m) && existsSync(join(ROOT, 'worker/js', own(m))), `the wasm imports only the glue, the crate's own modules and the runtime's ${RUNTIME}, not ${m}`);
  }
  for (const i of imports) {
    const file = own(i.module);
    if (RUNTIME.includes(i.module)) assert.ok(RUNTIME_FNS.includes(i.name), `${i.module} gives ${i.name}`);
    else if (file) assert.match(readFileSync(join(ROOT, 'worker/js', file), 'utf8'), new RegExp(`export function ${i.name}\\b`), `worker/js/${file} exports ${i.name}`);
    else assert.ok(js.includes(`${i.name}:`), `the bundle provides the import ${i.name}`);
  }
  const names = new Set(exports.filter((e) => e.kind === 'function').map((e) => e.name));
  for (const f of [...shimWraps().handlers, '__worker_init_state', '__wbindgen_start']) assert.ok(names.has(f), `the wasm exports ${f}`);
  assert.ok(exports.some((e) => e.name === 'memory' && e.kind === 'memory'));
  assert.ok(producers(wasm).some((p) => p.field === SDK.field && p.name === SDK.name && p.version === SDK.version), 'producers: sdk workers-rs');
  assert.ok(SYSTEM_FNS.every((f) => glue.includes(`export function ${f}`)));
});

test('the bundle imports only the runtime (its node:crypto and node:zlib, which wrangler.toml\'s nodejs_compat gives) and its wasm (as a compiled module), and exports the entry and the classes', () => {
  const js = readFileSync(join(BUILD, 'index.js'), 'utf8');
  assert.ok(!js.includes('import source '), 'the wasm is a plain import');
  const from = [...js.matchAll(/import\s*(?:\{[^}]*\}|\*\s*as\s*[A-Za-z_$][\w$]*|[A-Za-z_$][\w$]*)\s*from\s*"([^"]+)"/g)].map((m) => m[1]);
  // The runtime's modules are imported by the glue or, for a call that
  // needs no glue, by the wasm itself: between them, both.
  const direct = interfaceOf(readFileSync(join(BUILD, 'index_bg.wasm'))).imports.map((i) => i.module).filter((m) => RUNTIME.includes(m));
  const runtime = [...new Set([...from, ...direct])].filter((m) => RUNTIME.includes(m)).sort();
  assert.deepEqual(runtime, RUNTIME);
  assert.deepEqual([...new Set(from)].filter((m) => !RUNTIME.includes(m)).sort(), ['./index_bg.wasm', 'cloudflare:workers']);
  const toml = readFileSync(join(ROOT, 'wrangler.toml'), 'utf8');
  assert.match(toml, /^compatibility_flags = \["nodejs_compat"\]$/m, 'wrangler.toml turns on nodejs_compat');
  const inspector = readFileSync(join(ROOT, 'inspector/tests/edge.mjs'), 'utf8');
  assert.ok(inspector.includes("compatibilityFlags: ['nodejs_compat']"), 'inspector/tests/edge.mjs runs the Worker with the same flag');
  const tail = /export\s*\{([^}]*)\}\s*;?\s*$/.exec(js);
  assert.ok(tail, 'one export list at the end');
  const exported = tail[1].split(',').map((p) => p.trim().split(/\s+as\s+/).pop());
  assert.deepEqual(exported.sort(), ['default', ...shimWraps().classes].sort());
});

test('wrangler.toml\'s compatibility_date is one the bundled workerd supports, and the inspector tests run the Worker at the same date', () => {
  const date = /^compatibility_date = "(\d{4}-\d{2}-\d{2})"$/m.exec(readFileSync(join(ROOT, 'wrangler.toml'), 'utf8'))?.[1];
  assert.ok(date, 'wrangler.toml names a compatibility_date');
  // workerd's version is 1.YYYYMMDD.N: the newest date it supports.
  const { version } = JSON.parse(readFileSync(join(ROOT, 'node_modules/workerd/package.json'), 'utf8'));
  const m = /^1\.(\d{4})(\d{2})(\d{2})\.\d+$/.exec(version);
  assert.ok(m, `workerd ${version}`);
  assert.ok(date <= `${m[1]}-${m[2]}-${m[3]}`, `compatibility_date ${date} is past workerd ${version}`);
  const inspector = readFileSync(join(ROOT, 'inspector/tests/edge.mjs'), 'utf8');
  assert.ok(inspector.includes(`compatibilityDate: '${date}'`), 'inspector/tests/edge.mjs uses wrangler.toml\'s date');
});
