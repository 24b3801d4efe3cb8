// The Worker's module from the wasm cargo built: worker/build/index.js (the
// entry, bundled) and worker/build/index_bg.wasm. scripts/worker-build.sh
// runs it after `cargo build`:
//
//   node scripts/worker-bundle.mjs WASM OUT_DIR
//
// It makes what worker-build 0.8.7 makes for a crate on `worker` 0.8.7 (its
// module target, with panic recovery), step by step:
//  1. wasm-bindgen WASM --target module --out-name index --no-typescript
//     --experimental-reset-state-function --force-enable-abort-handler
//     (worker-build's release profile: names demangled, no debug glue, no
//     DWARF, wasm-opt off as worker/Cargo.toml says);
//  2. the wasm's `producers` section gains `sdk: workers-rs 0.8.7`;
//  3. worker/js/shim.js, worker-build's entry with this crate's handlers
//     and classes written out, is bundled with wasm-bindgen's glue by
//     esbuild (--format=esm --bundle --minify, `./index_bg.wasm` and
//     `cloudflare:*` and `node:*` external), its inline snippets included;
//  4. the glue's `import source` of the wasm becomes a plain `import`
//     (wrangler loads `*.wasm` as a compiled module).
// Before it bundles, it checks that the crate's `worker` and `wasm-bindgen`
// (Cargo.lock) are the versions the shim was written for, that the
// wasm-bindgen CLI is the library's version, and that the glue exports
// exactly the handlers and classes the shim wraps; tests/e2e/bundle.test.mjs
// checks the result.
import { spawnSync } from 'node:child_process';
import { copyFileSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

export const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
export const SHIM = join(ROOT, 'worker/js/shim.js');

/** The crate versions worker/js/shim.js was written for (worker-build 0.8.7's shim). */
export const SHIM_FOR = { worker: '0.8.7', 'wasm-bindgen': '0.2.130' };
/** What the producers section names as the SDK (worker-build's own version). */
export const SDK = { field: 'sdk', name: 'workers-rs', version: '0.8.7' };
/** wasm-bindgen's flags, as worker-build passes them for a release build. */
export const BINDGEN_FLAGS = ['--no-typescript', '--target', 'module', '--out-name', 'index',
  '--experimental-reset-state-function', '--force-enable-abort-handler'];
/** esbuild's, likewise. */
export const ESBUILD_FLAGS = ['--external:./index_bg.wasm', '--external:cloudflare:*', '--external:node:*', '--format=esm', '--bundle',
  './shim.js', '--outfile=index.js', '--allow-overwrite', '--minify'];
/** Glue exports the shim calls itself rather than wrapping as handlers. */
export const SYSTEM_FNS = ['__wbg_reset_state', '__worker_init_state'];
/** The handlers the shim passes `env` and `ctx` to (the runtime's events). */
const EVENT_HANDLERS = ['fetch', 'queue', 'scheduled', 'email', 'connect'];

class BundleError extends Error {}

/** `{ name: version }` of the [[package]] entries in Cargo.lock named in `names`. */
export function lockedVersions(names, lock = readFileSync(join(ROOT, 'Cargo.lock'), 'utf8')) {
  const found = {};
  for (const m of lock.matchAll(/^\[\[package\]\]\nname = "([^"]+)"\nversion = "([^"]+)"/gm)) {
    if (!names.includes(m[1])) continue;
    if (m[1] in found && found[m[1]] !== m[2]) throw new BundleError(`Cargo.lock holds two versions of ${m[1]} (${found[m[1]]}, ${m[2]}): the Worker takes one`);
    found[m[1]] = m[2];
  }
  return found;
}

/** Checks Cargo.lock against SHIM_FOR; throws what to do if they differ. */
export function checkVersions(lock) {
  const locked = lockedVersions(Object.keys(SHIM_FOR), lock);
  for (const [name, version] of Object.entries(SHIM_FOR)) {
    if (locked[name] !== version) {
      throw new BundleError(`Cargo.lock has ${name} ${locked[name] ?? '(none)'}, but worker/js/shim.js and scripts/worker-bundle.mjs follow worker-build for ${name} ${version}: ` +
        `compare the new worker-build's src/js/shim.js and main.rs with them, update both, then SHIM_FOR`);
    }
  }
  return locked;
}

/**
 * The `export` declarations of wasm-bindgen's glue, read as worker-build
 * reads them: { functions, classes } (names, in order).
 */
export function glueExports(glue) {
  const functions = [];
  const classes = [];
  for (const m of glue.matchAll(/(?:^|[\s;}])export\s+(async\s+function|function|class)\s+([A-Za-z_$][\w$]*)/g)) {
    (m[1] === 'class' ? classes : functions).push(m[2]);
  }
  for (const m of glue.matchAll(/(?:^|[\s;}])export\s*\{([^}]*)\}/g)) {
    for (const part of m[1].split(',')) {
      const as = /\bas\s+([A-Za-z_$][\w$]*)/.exec(part);
      if (as) functions.push(as[1]);
    }
  }
  return { functions, classes };
}

/** What worker/js/shim.js wraps: { handlers, classes }. */
export function shimWraps(shim = readFileSync(SHIM, 'utf8')) {
  const handlers = [...shim.matchAll(/^Entrypoint\.prototype\.([A-Za-z_$][\w$]*) = /gm)].map((m) => m[1]);
  const classes = [...shim.matchAll(/^export const ([A-Za-z_$][\w$]*) = new Proxy\(exports\.\1, classProxyHooks\);$/gm)].map((m) => m[1]);
  return { handlers, classes };
}

/**
 * Checks that the glue exports what the shim needs and nothing it would
 * leave out: the system functions, exactly its handlers, exactly its
 * classes. Throws what differs.
 */
export function checkGlue(glue, shim) {
  const exported = glueExports(glue);
  const wraps = shimWraps(shim);
  const missing = SYSTEM_FNS.filter((f) => !exported.functions.includes(f));
  if (missing.length) throw new BundleError(`wasm-bindgen's glue lacks ${missing.join(', ')}, which worker/js/shim.js calls: is the crate on worker ${SHIM_FOR.worker}?`);
  const handlers = exported.functions.filter((f) => !SYSTEM_FNS.includes(f));
  const same = (a, b) => a.length === b.length && [...a].sort().every((x, i) => x === [...b].sort()[i]);
  if (!same(handlers, wraps.handlers) || !same(exported.classes, wraps.classes)) {
    throw new BundleError(`the Worker's wasm exports the handlers [${handlers.join(', ')}] and classes [${exported.classes.join(', ')}], ` +
      `but worker/js/shim.js wraps [${wraps.handlers.join(', ')}] and [${wraps.classes.join(', ')}]: write the shim's handlers and class exports for what the crate exports ` +
      `(an event handler is \`Entrypoint.prototype.NAME = function NAME (arg) { return exports.NAME.call(this, arg, this.env, this.ctx); }\`, any other \`Entrypoint.prototype.NAME = exports.NAME;\`)`);
  }
  for (const h of handlers) {
    const expected = EVENT_HANDLERS.includes(h)
      ? `Entrypoint.prototype.${h} = function ${h} (arg) {\n  return exports.${h}.call(this, arg, this.env, this.ctx);\n}\n`
      : `Entrypoint.prototype.${h} = exports.${h};\n`;
    if (!shim.includes(expected)) throw new BundleError(`worker/js/shim.js wraps ${h} otherwise than worker-build does: write it as\n${expected}`);
  }
  return { handlers, classes: exported.classes };
}

// ---- wasm sections -----------------------------------------------------------

function leb(bytes, at) {
  let value = 0;
  let shift = 0;
  for (;;) {
    if (at.pos >= bytes.length) throw new BundleError('wasm: a LEB128 number runs past the end');
    const b = bytes[at.pos++];
    value += (b & 0x7f) * 2 ** shift;
    if ((b & 0x80) === 0) return value;
    shift += 7;
    if (shift > 35) throw new BundleError('wasm: a LEB128 number is too long');
  }
}

function encodeLeb(n) {
  const out = [];
  do {
    let b = n & 0x7f;
    n = Math.floor(n / 128);
    if (n) b |= 0x80;
    out.push(b);
  } while (n);
  return out;
}

function name(bytes, at) {
  const len = leb(bytes, at);
  const s = Buffer.from(bytes.subarray(at.pos, at.pos + len)).toString('utf8');
  at.pos += len;
  return s;
}

const encodeName = (s) => { const b = Buffer.from(s, 'utf8'); return [...encodeLeb(b.length), ...b]; };

/** The module's sections: { id, start, end, body, custom } (custom: its name). */
export function sections(bytes) {
  if (bytes.length < 8 || Buffer.from(bytes.subarray(0, 8)).compare(Buffer.from([0, 0x61, 0x73, 0x6d, 1, 0, 0, 0])) !== 0) {
    throw new BundleError('not a wasm module (version 1)');
  }
  const out = [];
  const at = { pos: 8 };
  while (at.pos < bytes.length) {
    const start = at.pos;
    const id = bytes[at.pos++];
    const len = leb(bytes, at);
    const body = at.pos;
    const end = body + len;
    if (end > bytes.length) throw new BundleError('wasm: a section runs past the end');
    const s = { id, start, end, body };
    if (id === 0) {
      const p = { pos: body };
      s.custom = name(bytes, p);
      s.content = p.pos;
    }
    out.push(s);
    at.pos = end;
  }
  return out;
}

/** The producers section's entries: [{ field, name, version }]. */
export function producers(bytes) {
  const s = sections(bytes).find((x) => x.custom === 'producers');
  if (!s) return [];
  const at = { pos: s.content };
  const entries = [];
  for (let fields = leb(bytes, at); fields > 0; fields--) {
    const field = name(bytes, at);
    for (let values = leb(bytes, at); values > 0; values--) entries.push({ field, name: name(bytes, at), version: name(bytes, at) });
  }
  if (at.pos !== s.end) throw new BundleError('wasm: the producers section is malformed');
  return entries;
}

/**
 * The module with `entry` added to its producers section (where worker-build
 * puts it: the section stays where it was, or is appended), unless an entry
 * of that field and name is there already.
 */
export function withProducer(bytes, entry) {
  const entries = producers(bytes);
  if (!entries.some((e) => e.field === entry.field && e.name === entry.name)) entries.push(entry);
  const fields = [...new Set(entries.map((e) => e.field))];
  const content = [...encodeLeb(fields.length)];
  for (const field of fields) {
    const values = entries.filter((e) => e.field === field);
    content.push(...encodeName(field), ...encodeLeb(values.length));
    for (const v of values) content.push(...encodeName(v.name), ...encodeName(v.version));
  }
  const payload = [...encodeName('producers'), ...content];
  const section = Buffer.from([0, ...encodeLeb(payload.length), ...payload]);
  const old = sections(bytes).find((x) => x.custom === 'producers');
  return old
    ? Buffer.concat([bytes.subarray(0, old.start), section, bytes.subarray(old.end)])
    : Buffer.concat([bytes, section]);
}

/** The module's imports and exports by name: { imports: [{ module, name, kind }], exports: [{ name, kind }] }. */
export function interfaceOf(bytes) {
  const kinds = ['function', 'table', 'memory', 'global', 'tag'];
  const all = sections(bytes);
  const imports = [];
  const exports = [];
  const valtype = (at) => {
    const t = bytes[at.pos++];
    // (ref null? heaptype): the heap type is a signed LEB128 (an abstract type or a type index).
    if (t === 0x63 || t === 0x64) leb(bytes, at);
  };
  const limits = (at) => {
    const flags = bytes[at.pos++];
    leb(bytes, at);
    if (flags & 1) leb(bytes, at);
  };
  const imp = all.find((s) => s.id === 2);
  if (imp) {
    const at = { pos: imp.body };
    for (let n = leb(bytes, at); n > 0; n--) {
      const module = name(bytes, at);
      const field = name(bytes, at);
      const kind = bytes[at.pos++];
      if (kind === 0) leb(bytes, at);
      else if (kind === 1) { valtype(at); limits(at); }
      else if (kind === 2) limits(at);
      else if (kind === 3) { valtype(at); at.pos++; }
      else if (kind === 4) { at.pos++; leb(bytes, at); }
      else throw new BundleError(`wasm: import ${module}.${field} has an unknown kind ${kind}`);
      imports.push({ module, name: field, kind: kinds[kind] });
    }
  }
  const exp = all.find((s) => s.id === 7);
  if (exp) {
    const at = { pos: exp.body };
    for (let n = leb(bytes, at); n > 0; n--) {
      const field = name(bytes, at);
      const kind = bytes[at.pos++];
      leb(bytes, at);
      exports.push({ name: field, kind: kinds[kind] ?? String(kind) });
    }
  }
  return { imports, exports };
}

// ---- the build -----------------------------------------------------------------

function run(cmd, args, options = {}) {
  const r = spawnSync(cmd, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], ...options });
  if (r.error) throw new BundleError(`${cmd}: ${r.error.message}`);
  if (r.status !== 0) throw new BundleError(`${cmd} ${args.join(' ')} failed (${r.status}):\n${r.stdout}${r.stderr}`);
  return r.stdout;
}

export function wasmBindgenBin() {
  return process.env.WASM_BINDGEN_BIN || 'wasm-bindgen';
}

export function esbuildBin() {
  return process.env.ESBUILD_BIN || join(ROOT, 'node_modules/@esbuild/linux-x64/bin/esbuild');
}

/** Runs wasm-bindgen on `wasm` into `dir` as worker-build does; returns the glue's text. */
export function bindgen(wasm, dir) {
  run(wasmBindgenBin(), [wasm, '--out-dir', dir, ...BINDGEN_FLAGS]);
  return readFileSync(join(dir, 'index.js'), 'utf8');
}

/** Checks the versions and the CLI; returns the locked versions. */
export function checkToolchain() {
  const locked = checkVersions();
  const cli = run(wasmBindgenBin(), ['--version']).trim();
  if (cli !== `wasm-bindgen ${locked['wasm-bindgen']}`) {
    throw new BundleError(`${wasmBindgenBin()} is "${cli}", but Cargo.lock has wasm-bindgen ${locked['wasm-bindgen']}: ` +
      `cargo install wasm-bindgen-cli --version ${locked['wasm-bindgen']} (bash scripts/setup.sh does)`);
  }
  return locked;
}

/** Builds OUT/index.js and OUT/index_bg.wasm from `wasm`. */
export function bundle(wasm, out) {
  checkToolchain();
  const shim = readFileSync(SHIM, 'utf8');
  mkdirSync(out, { recursive: true });
  const staging = join(out, `.staging-${process.pid}`);
  rmSync(staging, { recursive: true, force: true });
  mkdirSync(staging);
  try {
    const glue = bindgen(wasm, staging);
    checkGlue(glue, shim);
    const wasmOut = join(staging, 'index_bg.wasm');
    writeFileSync(wasmOut, withProducer(readFileSync(wasmOut), SDK));
    copyFileSync(SHIM, join(staging, 'shim.js'));
    const r = spawnSync(esbuildBin(), ESBUILD_FLAGS, { cwd: staging, encoding: 'utf8' });
    if (r.error || r.status !== 0) throw new BundleError(`esbuild (${esbuildBin()}) failed: ${r.error?.message ?? r.stderr}`);
    const index = join(staging, 'index.js');
    writeFileSync(index, readFileSync(index, 'utf8').replaceAll('import source ', 'import '));
    // The wasm first: a reader that sees the new index.js finds its module.
    renameSync(wasmOut, join(out, 'index_bg.wasm'));
    renameSync(index, join(out, 'index.js'));
  } finally {
    rmSync(staging, { recursive: true, force: true });
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const [wasm, out] = process.argv.slice(2);
  if (!wasm || !out) {
    console.error('usage: node scripts/worker-bundle.mjs WASM OUT_DIR');
    process.exit(2);
  }
  try {
    bundle(resolve(wasm), resolve(out));
  } catch (e) {
    if (!(e instanceof BundleError)) throw e;
    console.error(`worker-bundle: ${e.message}`);
    process.exit(1);
  }
}
