// End-to-end tests of restore over a checkpoint a folder holds
// (docs/cli.md, "restore"): the real `pillbox` binary (release build)
// against the Worker under `wrangler dev --local`, through the recording
// proxy of tests/e2e/proxy.mjs (what each request carried). A restore in
// place writes only what changed and keeps every other file (inode and
// mtime); a folder changed since its checkpoint is refused before
// anything is fetched; a restore killed at any moment finishes when run
// again; a folder of no checkpoint is refused before any chunk is asked for.
//
// Run: node --test tests/e2e/restore.test.mjs
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import {
  appendFileSync, chmodSync, lstatSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, readlinkSync, rmSync,
  symlinkSync, unlinkSync, writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, relative } from 'node:path';
import { after, before, describe, test } from 'node:test';

import { assertMatchSchemas } from './cli-schemas.mjs';
import { TARGET, TOKEN, buildWorker, sha256, startEdge } from './edge.mjs';
import { startProxy } from './proxy.mjs';

const PILLBOX = join(TARGET, 'release/pillbox');
const THREAD = '0199a213-81c0-7800-8aa1-bbab2a035a53';
const KIB = 1024;

let edge;
let store;
let work;

before(async () => {
  const b = spawnSync('cargo', ['build', '--quiet', '--release', '-p', 'pillbox'], { encoding: 'utf8' });
  if (b.status !== 0) throw new Error(`cargo build failed:\n${b.stderr}`);
  buildWorker();
  work = mkdtempSync(join(tmpdir(), 'pillbox-e2e-restore-'));
  edge = await startEdge();
  store = await startProxy(edge.url);
}, { timeout: 900_000 });

after(async () => {
  await store?.stop();
  await edge?.stop();
  if (work) rmSync(work, { recursive: true, force: true });
});

// ---- helpers --------------------------------------------------------------

let dirs = 0;
function fresh(name) {
  dirs += 1;
  return join(work, `${dirs}-${name}`);
}

/** A host: its own state (workspace records) and cache folders. */
function host(name) {
  return { XDG_STATE_HOME: fresh(`${name}-state`), XDG_CACHE_HOME: fresh(`${name}-cache`) };
}

function env(extra = {}) {
  const e = { ...process.env, PILLBOX_TOKEN: TOKEN };
  for (const k of ['CODEX_HOME', 'CLAUDE_CONFIG_DIR', 'PILLBOX_REMOTE', 'PILLBOX_CACHE_MAX_BYTES']) delete e[k];
  return Object.assign(e, extra);
}

const SCHEMA_FILES = {
  'pillbox.checkpoint.save/1': 'save-1.schema.json',
  'pillbox.checkpoint.restore/1': 'restore-1.schema.json',
  'pillbox.error/1': 'error-1.schema.json',
};
const printed = [];

function parse(text) {
  let json;
  try { json = JSON.parse(text.trim()); } catch { json = undefined; }
  const file = json && SCHEMA_FILES[json.schema];
  if (file) printed.push({ file, value: json });
  return json;
}

function pillbox(args, extraEnv = {}) {
  const r = spawnSync(PILLBOX, ['checkpoint', ...args, '--quiet'], { encoding: 'buffer', env: env(extraEnv), maxBuffer: 1 << 28 });
  return { code: r.status, json: parse(r.stdout.toString('utf8')), out: r.stdout.toString('utf8') + r.stderr.toString('utf8') };
}

function ok(args, extraEnv) {
  const r = pillbox(args, extraEnv);
  assert.equal(r.code, 0, `pillbox checkpoint ${args.join(' ')}: ${r.out}`);
  return r.json;
}

function write(path, contents) {
  mkdirSync(dirname(path), { recursive: true });
  writeFileSync(path, contents);
}

function text(lines, seed) {
  let out = '';
  for (let i = 0; i < lines; i += 1) out += `fn item_${seed}_${i}(x: u64) -> u64 { x.wrapping_mul(${(i * 2654435761) % 1000003}) }\n`;
  return out;
}

function noise(length, seed) {
  const out = Buffer.alloc(length);
  let x = (seed * 2654435761) >>> 0 || 1;
  for (let i = 0; i < length; i += 1) {
    x ^= x << 13; x >>>= 0;
    x ^= x >>> 17;
    x ^= x << 5; x >>>= 0;
    out[i] = x & 0xff;
  }
  return out;
}

/** A workspace of many small files, a large incompressible one, a link. */
function workspace(root) {
  for (let i = 0; i < 400; i += 1) write(join(root, `pkg${i % 20}/lib/f${i}.js`), text(3 + (i % 11), i));
  write(join(root, 'assets/blob.bin'), noise(2 << 20, 3));
  write(join(root, 'bin/run.sh'), '#!/bin/sh\necho run\n');
  chmodSync(join(root, 'bin/run.sh'), 0o755);
  write(join(root, 'README.md'), '# restore\n');
  symlinkSync('README.md', join(root, 'readme-link'));
}

/** Every path: type, exec bit and sha256 (or link target). */
function snapshot(root) {
  const out = {};
  const walk = (dir) => {
    for (const name of readdirSync(dir).sort()) {
      const path = join(dir, name);
      const st = lstatSync(path);
      const rel = relative(root, path);
      if (st.isSymbolicLink()) out[rel] = `link ${readlinkSync(path)}`;
      else if (st.isDirectory()) { out[rel] = 'dir'; walk(path); }
      else out[rel] = `file ${(st.mode & 0o100) ? 'x' : '-'} ${sha256(readFileSync(path))}`;
    }
  };
  walk(root);
  return out;
}

/**
 * Every path with its bytes' sha256 (or link target), inode, mtime and
 * mode; a folder's inode only (an entry renamed into it moves its mtime).
 */
function stamps(root) {
  const out = {};
  const walk = (dir) => {
    for (const name of readdirSync(dir).sort()) {
      const path = join(dir, name);
      const st = lstatSync(path, { bigint: true });
      const rel = relative(root, path);
      if (st.isDirectory()) {
        out[rel] = `dir ino ${st.ino}`;
        walk(path);
        continue;
      }
      const what = st.isSymbolicLink() ? `link ${readlinkSync(path)}` : sha256(readFileSync(path));
      out[rel] = `${what} ino ${st.ino} mtime ${st.mtimeNs} mode ${st.mode.toString(8)}`;
    }
  };
  walk(root);
  return out;
}

/** The paths whose stamps differ. */
function differing(a, b) {
  return [...new Set([...Object.keys(a), ...Object.keys(b)])].filter((k) => a[k] !== b[k]).sort();
}

const remote = () => ['--remote', store.url];

async function requestsSince(mark) {
  return (await store.log()).slice(mark);
}

/** The digest `pack` gives a folder: what the checkpoint is, byte for byte. */
function packedDigest(ws) {
  const r = spawnSync(PILLBOX, ['checkpoint', 'pack', ws, '-o', '-', '--quiet'], { env: env(), maxBuffer: 1 << 30 });
  assert.equal(r.status, 0, r.stderr.toString());
  return JSON.parse(r.stderr.toString()).digest;
}

// ---- tests ------------------------------------------------------------------

describe('restore in place', () => {
  test('writes only what changed: an edit, a deletion, a new file, a mode change, a file that became a link and back', async () => {
    const ws = fresh('ws');
    workspace(ws);
    const ref = 'sessions/restore/edits';
    const laptop = host('laptop');
    ok(['save', ws, ...remote(), '--ref', ref], laptop);
    const desk = host('desk');
    const into = fresh('desk-ws');
    const first = ok(['restore', ref, ...remote(), '--into', into, '--no-cache'], desk);
    assert.equal(first.written, first.members);
    assert.deepEqual(snapshot(into), snapshot(ws));

    // A one-file edit: at most 64 KiB comes back.
    write(join(ws, 'pkg3/lib/f3.js'), 'module.exports = 3;\n');
    const s2 = ok(['save', ws, ...remote(), '--ref', ref], laptop);
    let before = stamps(into);
    let mark = (await store.log()).length;
    const r2 = ok(['restore', ref, ...remote(), '--into', into, '--no-cache'], desk);
    assert.equal(r2.digest, s2.digest);
    assert.deepEqual(snapshot(into), snapshot(ws));
    assert.deepEqual(differing(before, stamps(into)), ['pkg3/lib/f3.js'], 'every other file keeps its inode and mtime');
    assert.equal(r2.written, 1);
    assert.equal(r2.removed, 0);
    assert.equal(r2.unchanged, r2.members - 1);
    assert.ok(r2.bytes_received <= 64 * KIB, `${r2.bytes_received} bytes received`);
    const wire = (await requestsSince(mark)).filter((r) => r.method === 'GET' && /^\/v1\/packets\/[^/]+$/.test(r.path));
    assert.deepEqual(wire, [], 'no whole packet is read');

    // A deletion, a new file, a mode change, a file that became a link.
    unlinkSync(join(ws, 'pkg4/lib/f4.js'));
    write(join(ws, 'pkg5/new.js'), 'new\n');
    chmodSync(join(ws, 'README.md'), 0o755);
    unlinkSync(join(ws, 'pkg6/lib/f6.js'));
    symlinkSync('../../README.md', join(ws, 'pkg6/lib/f6.js'));
    ok(['save', ws, ...remote(), '--ref', ref], laptop);
    before = stamps(into);
    const r3 = ok(['restore', ref, ...remote(), '--into', into, '--no-cache'], desk);
    assert.deepEqual(snapshot(into), snapshot(ws));
    assert.deepEqual(differing(before, stamps(into)), ['README.md', 'pkg4/lib/f4.js', 'pkg5/new.js', 'pkg6/lib/f6.js']);
    // The exec bit changed on the same file.
    assert.equal(before['README.md'].split(' mode ')[0], stamps(into)['README.md'].split(' mode ')[0]);
    assert.equal(r3.removed, 1);

    // And back: the link is a file again.
    unlinkSync(join(ws, 'pkg6/lib/f6.js'));
    write(join(ws, 'pkg6/lib/f6.js'), text(5, 6));
    ok(['save', ws, ...remote(), '--ref', ref], laptop);
    mark = (await store.log()).length;
    ok(['restore', ref, ...remote(), '--into', into, '--no-cache'], desk);
    assert.deepEqual(snapshot(into), snapshot(ws));
    assert.equal(packedDigest(into), packedDigest(ws));
  });

  test('harness state is updated the same way: a Codex rollout that grew', async () => {
    const ws = fresh('codex-ws');
    workspace(ws);
    const home = fresh('codex-home');
    const rollout = join(home, `sessions/2026/11/30/rollout-2026-11-30T01-02-03-${THREAD}.jsonl`);
    const meta = { timestamp: '2026-11-30T01:02:03.456Z', type: 'session_meta', payload: { id: THREAD, cwd: ws, originator: 'codex_exec', cli_version: '0.171.0' } };
    const line = (l) => JSON.stringify({ type: 'response_item', payload: { text: l } });
    write(rollout, JSON.stringify(meta) + '\n' + text(40_000, 'turn0').split('\n').map(line).join('\n') + '\n');
    const harness = ['--harness', 'codex', '--thread', THREAD, '--codex-home', home];
    const ref = 'sessions/restore/codex';
    const laptop = host('codex-laptop');
    ok(['save', ws, ...remote(), '--ref', ref, ...harness], laptop);
    const desk = host('codex-desk');
    const into = fresh('codex-desk-ws');
    const deskHome = fresh('codex-desk-home');
    ok(['restore', ref, ...remote(), '--into', into, '--codex-home', deskHome, '--no-cache'], desk);
    const restoredRollout = join(deskHome, relative(home, rollout));
    assert.ok(readFileSync(restoredRollout).equals(readFileSync(rollout)));

    // A turn: the rollout grows by 16 KB.
    appendFileSync(rollout, text(200, 'turn1').split('\n').map(line).join('\n') + '\n');
    ok(['save', ws, ...remote(), '--ref', ref, ...harness], laptop);
    const before = stamps(into);
    const r = ok(['restore', ref, ...remote(), '--into', into, '--codex-home', deskHome, '--no-cache'], desk);
    assert.ok(readFileSync(restoredRollout).equals(readFileSync(rollout)));
    assert.deepEqual(differing(before, stamps(into)), []);
    assert.equal(r.written, 1);
    assert.equal(r.harness.restored, true);
    assert.ok(r.bytes_received <= 64 * KIB, `${r.bytes_received} bytes received: ${JSON.stringify(r.delta)}`);
    assert.ok(r.delta.from_workspace_bytes > 0, JSON.stringify(r.delta));
    assert.equal(lstatSync(restoredRollout).mode & 0o777, 0o600);
  });

  test('a local change refuses before anything changes or is fetched; --discard-local overwrites it', async () => {
    const ws = fresh('local-ws');
    workspace(ws);
    const ref = 'sessions/restore/local';
    const laptop = host('local-laptop');
    ok(['save', ws, ...remote(), '--ref', ref], laptop);
    const desk = host('local-desk');
    const into = fresh('local-desk-ws');
    ok(['restore', ref, ...remote(), '--into', into], desk);
    write(join(ws, 'pkg1/lib/f1.js'), 'elsewhere\n');
    ok(['save', ws, ...remote(), '--ref', ref], laptop);

    // Work here that no checkpoint has.
    write(join(into, 'pkg2/lib/f2.js'), 'edited here\n');
    write(join(into, 'mine.txt'), 'new here\n');
    unlinkSync(join(into, 'pkg7/lib/f7.js'));
    const before = stamps(into);
    const mark = (await store.log()).length;
    const refused = pillbox(['restore', ref, ...remote(), '--into', into], desk);
    assert.equal(refused.code, 5, refused.out);
    assert.equal(refused.json.code, 'local_changes');
    assert.equal(refused.json.paths_count, 3);
    assert.deepEqual(refused.json.paths.map((p) => [relative(into, p.path), p.change]).sort(), [
      ['mine.txt', 'added'], ['pkg2/lib/f2.js', 'edited'], ['pkg7/lib/f7.js', 'removed'],
    ]);
    assert.deepEqual(stamps(into), before, 'nothing changed: bytes, inodes, mtimes');
    const asked = await requestsSince(mark);
    assert.deepEqual(asked.filter((r) => r.path.endsWith('/chunks') || r.path.endsWith('/recipes')), [], 'nothing was fetched');

    const r = ok(['restore', ref, ...remote(), '--into', into, '--discard-local'], desk);
    assert.deepEqual(snapshot(into), snapshot(ws), JSON.stringify(r));
  });

  test('a restore killed at random points finishes when run again, as pack sees the checkpoint', { timeout: 600_000 }, async () => {
    const ws = fresh('kill-ws');
    workspace(ws);
    const ref = 'sessions/restore/kill';
    const laptop = host('kill-laptop');
    ok(['save', ws, ...remote(), '--ref', ref], laptop);
    const desk = host('kill-desk');
    const into = fresh('kill-desk-ws');
    ok(['restore', ref, ...remote(), '--into', into], desk);
    // Many changes at once.
    for (let i = 0; i < 400; i += 1) {
      const p = join(ws, `pkg${i % 20}/lib/f${i}.js`);
      if (i % 3 === 0) write(p, `changed ${i}\n`);
      else if (i % 3 === 1) unlinkSync(p);
    }
    rmSync(join(ws, 'pkg19'), { recursive: true });
    write(join(ws, 'pkg19'), 'a folder became a file\n');
    write(join(ws, 'assets/blob.bin'), noise(2 << 20, 4));
    const saved = ok(['save', ws, ...remote(), '--ref', ref], laptop);
    const want = snapshot(ws);
    let killed = 0;
    for (let round = 0; round < 30; round += 1) {
      const child = spawn(PILLBOX, ['checkpoint', 'restore', ref, ...remote(), '--into', into, '--quiet', '--no-cache'], { env: env(desk), stdio: 'ignore' });
      const delay = 5 + ((round * 2654435761) % 400);
      const code = await new Promise((done) => {
        const timer = setTimeout(() => child.kill('SIGKILL'), delay);
        child.once('exit', (c, signal) => { clearTimeout(timer); done(signal ? -1 : c); });
      });
      if (code === -1) killed += 1;
      if (code === 0) break;
    }
    const r = ok(['restore', ref, ...remote(), '--into', into], desk);
    assert.equal(r.digest, saved.digest);
    assert.deepEqual(snapshot(into), want);
    assert.equal(packedDigest(into), saved.digest, 'pack of the folder is the checkpoint');
    assert.ok(killed > 0, 'some restore was killed');
  });

  test('a folder of no checkpoint is refused before any chunk is asked for', async () => {
    const ws = fresh('foreign-ws');
    workspace(ws);
    const ref = 'sessions/restore/foreign';
    ok(['save', ws, ...remote(), '--ref', ref], host('foreign-laptop'));
    const into = fresh('foreign');
    write(join(into, 'keep.txt'), 'mine');
    const mark = (await store.log()).length;
    const refused = pillbox(['restore', ref, ...remote(), '--into', into], host('foreign-desk'));
    assert.equal(refused.code, 5, refused.out);
    assert.equal(refused.json.code, 'target_not_empty');
    assert.deepEqual(readdirSync(into), ['keep.txt']);
    assert.deepEqual(await requestsSince(mark), [], 'no request at all');
  });
});

test('every restore and error object matches its schema in proto/cli/', () => {
  assertMatchSchemas(printed);
});
