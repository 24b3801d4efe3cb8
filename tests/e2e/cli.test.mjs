// End-to-end tests of `pillbox checkpoint push` and `pull` on the
// whole-packet paths (`--whole`: one PUT or a multipart upload, one
// download): the real `pillbox` binary (release build) against the real
// Worker under `wrangler dev --local` on 127.0.0.1, with small upload
// limits so that multipart uploads happen with packets of a few tens of
// MiB. Delta transfer has its own tests (delta.test.mjs).
//
// Run: node --test tests/e2e/cli.test.mjs
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import {
  chmodSync, existsSync, lstatSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, readlinkSync, rmSync, symlinkSync, writeFileSync,
} from 'node:fs';
import { createServer } from 'node:http';
import { tmpdir } from 'node:os';
import { dirname, join, relative } from 'node:path';
import { after, before, describe, test } from 'node:test';

import { assertMatchSchemas } from './cli-schemas.mjs';
import { PILLBOX, TOKEN, buildRelease, buildWorker, client, sha256, startEdge } from './edge.mjs';
import { countsAbout, packetObject, refCount } from './store.mjs';

const MIB = 1 << 20;
const LIMITS = {
  MAX_SINGLE_UPLOAD_BYTES: String(8 * MIB),
  PART_SIZE_BYTES: String(5 * MIB),
  MAX_MEMBERS: '300',
};
const THREAD = '0199a213-81c0-7800-8aa1-bbab2a035a53';

let edge;
let api;
let work;

before(async () => {
  buildWorker();
  buildRelease();
  work = mkdtempSync(join(tmpdir(), 'pillbox-e2e-cli-'));
  edge = await startEdge(LIMITS, { tokens: { sandbox: ['read', 'push', 'refs:sessions/x/'] } });
  api = client(edge.url);
}, { timeout: 900_000 });

after(async () => {
  await edge?.stop();
  if (work) rmSync(work, { recursive: true, force: true });
});

// ---- helpers --------------------------------------------------------------

let dirs = 0;
/** A fresh, absent path under the test's work folder. */
function fresh(name) {
  dirs += 1;
  return join(work, `${dirs}-${name}`);
}

function env(extra = {}) {
  const e = { ...process.env, PILLBOX_TOKEN: TOKEN, XDG_STATE_HOME: join(work, 'state'), ...extra };
  delete e.CODEX_HOME;
  delete e.CLAUDE_CONFIG_DIR;
  delete e.PILLBOX_REMOTE;
  for (const [k, v] of Object.entries(extra)) if (v === undefined) delete e[k];
  return e;
}

const SCHEMA_FILES = {
  'pillbox.checkpoint.push/1': 'push-1.schema.json',
  'pillbox.checkpoint.pull/1': 'pull-1.schema.json',
  'pillbox.checkpoint.refs/1': 'refs-1.schema.json',
  'pillbox.checkpoint.log/1': 'log-1.schema.json',
  'pillbox.error/1': 'error-1.schema.json',
};
/** Every push, pull, refs, log and error object printed, checked against proto/cli/ at the end. */
const printed = [];

function record(json) {
  const file = json && SCHEMA_FILES[json.schema];
  if (file) printed.push({ file, value: json });
}

/** Runs `pillbox checkpoint ...args` and parses its one JSON object. */
function pillbox(args, { extraEnv = {}, jsonOn = 'stdout' } = {}) {
  const r = spawnSync(PILLBOX, ['checkpoint', ...args], { encoding: 'buffer', env: env(extraEnv), maxBuffer: 1 << 28 });
  const text = (jsonOn === 'stdout' ? r.stdout : r.stderr).toString('utf8').trim();
  let json;
  try { json = JSON.parse(text); } catch { json = undefined; }
  record(json);
  return { code: r.status, json, stdout: r.stdout, stderr: r.stderr.toString('utf8') };
}

/**
 * Like `pillbox`, without blocking the event loop (for tests whose HTTP
 * server runs in this process).
 */
function pillboxAsync(args, { jsonOn = 'stdout' } = {}) {
  return new Promise((ok) => {
    const child = spawn(PILLBOX, ['checkpoint', ...args], { env: env(), stdio: ['ignore', 'pipe', 'pipe'] });
    const out = [];
    const err = [];
    child.stdout.on('data', (d) => out.push(d));
    child.stderr.on('data', (d) => err.push(d));
    child.once('close', (code) => {
      const stdout = Buffer.concat(out);
      const stderr = Buffer.concat(err);
      let json;
      try { json = JSON.parse((jsonOn === 'stdout' ? stdout : stderr).toString('utf8').trim()); } catch { json = undefined; }
      record(json);
      ok({ code, json, stdout, stderr: stderr.toString('utf8') });
    });
  });
}

function ok(args, options) {
  const r = pillbox(args, options);
  assert.equal(r.code, 0, `pillbox checkpoint ${args.join(' ')}: ${r.stdout}${r.stderr}`);
  return r.json;
}

function write(path, contents, mode) {
  mkdirSync(dirname(path), { recursive: true });
  writeFileSync(path, contents);
  if (mode) chmodSync(path, mode);
}

/** A workspace with nested files, an executable, symlinks, an empty dir, a UTF-8 name and `extra` random bytes. */
function sampleWorkspace(root, { extra = 0, tag = '' } = {}) {
  write(join(root, 'README.md'), `# project ${tag}\n`);
  write(join(root, 'src/main.rs'), 'fn main() {}\n');
  write(join(root, 'src/lib/deep/mod.rs'), 'pub fn x() {}\n');
  write(join(root, 'bin/run.sh'), '#!/bin/sh\necho run\n', 0o755);
  write(join(root, 'docs/naïve file.txt'), 'unicode name\n');
  write(join(root, 'empty-file'), '');
  write(join(root, 'data.bin'), Buffer.from(Array.from({ length: 300_000 }, (_, i) => i % 251)));
  mkdirSync(join(root, 'empty-dir/nested-empty'), { recursive: true });
  symlinkSync('src/main.rs', join(root, 'main-link'));
  symlinkSync('../src', join(root, 'docs/src-link'));
  if (extra > 0) write(join(root, 'blobs/random.bin'), randomBytes(extra));
}

/** A Codex home with a rollout for THREAD, an auth.json and a state database that are never packed. */
function codexHome(home, cwd) {
  write(join(home, 'auth.json'), '{"OPENAI_API_KEY":"sk-never-packed"}');
  write(join(home, 'state_5.sqlite'), 'SQLite format 3\0');
  write(join(home, 'config.toml'), 'model = "gpt-test"\nmodel_provider = "mock"\n');
  const rollout = join(home, `sessions/2026/11/30/rollout-2026-11-30T01-02-03-${THREAD}.jsonl`);
  write(rollout, [
    JSON.stringify({ timestamp: '2026-11-30T01:02:03.456Z', type: 'session_meta', payload: { id: THREAD, session_id: THREAD, cwd, originator: 'codex_exec', cli_version: '0.171.0', model_provider: 'mock' } }),
    JSON.stringify({ timestamp: '2026-11-30T01:02:03.500Z', type: 'response_item', payload: { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'hello' }] } }),
    JSON.stringify({ timestamp: '2026-11-30T01:02:03.510Z', type: 'turn_context', payload: { cwd, approval_policy: 'never', model: 'gpt-test' } }),
  ].join('\n') + '\n');
  return rollout;
}

/** Every path under `root`: type, exec bit, contents hash or link target. */
function snapshot(root) {
  const out = {};
  const walk = (dir) => {
    for (const name of readdirSync(dir).sort()) {
      const path = join(dir, name);
      const rel = relative(root, path);
      const st = lstatSync(path);
      if (st.isSymbolicLink()) out[rel] = `link ${readlinkSync(path)}`;
      else if (st.isDirectory()) { out[rel] = 'dir'; walk(path); }
      else out[rel] = `file ${(st.mode & 0o100) ? 'x' : '-'} ${sha256(readFileSync(path))}`;
    }
  };
  walk(root);
  return out;
}

/** Packs a fresh sample workspace; returns { ws, packet, digest, size, report }. */
function packSample(name, options = {}) {
  const ws = fresh(`${name}-ws`);
  sampleWorkspace(ws, { tag: name, ...options });
  const packet = fresh(`${name}.tar`);
  const args = ['pack', ws, '-o', packet, '--quiet'];
  if (options.codexHome) args.push('--harness', 'codex', '--thread', THREAD, '--codex-home', options.codexHome);
  const report = ok(args);
  return { ws, packet, digest: report.digest, size: report.size, report };
}

function push(packet, extra = [], options) {
  return pillbox(['push', packet, '--remote', edge.url, '--quiet', '--whole', ...extra], options);
}

function pull(target, output, extra = [], options) {
  return pillbox(['pull', target, '--remote', edge.url, '-o', output, '--quiet', '--whole', ...extra], options);
}

function storedCopies(digest) {
  return countsAbout(edge, digest, ['packets', 'uploads'])[0];
}

const sleep = (ms) => new Promise((ok) => setTimeout(ok, ms));

// ---- tests ------------------------------------------------------------------

describe('push and pull', () => {
  test('pack, push --ref, list, pull by ref, unpack: the tree comes back', async () => {
    const home = fresh('codex-home');
    const wsPath = fresh('roundtrip-ws');
    codexHome(home, wsPath);
    mkdirSync(wsPath);
    sampleWorkspace(wsPath, { tag: 'roundtrip' });
    const packet = fresh('roundtrip.tar');
    const packed = ok(['pack', wsPath, '-o', packet, '--quiet', '--harness', 'codex', '--thread', THREAD, '--codex-home', home]);

    const pushed = push(packet, ['--ref', 'sessions/e2e/roundtrip', '--label', 'host=e2e']);
    assert.equal(pushed.code, 0, pushed.stderr + pushed.stdout);
    const p = pushed.json;
    assert.equal(p.schema, 'pillbox.checkpoint.push/1');
    assert.equal(p.digest, packed.digest);
    assert.equal(p.size, packed.size);
    assert.equal(p.remote, edge.url);
    assert.deepEqual([p.uploaded, p.mode, p.parts, p.resumed, p.bytes_sent], [true, 'single', null, false, packed.size]);
    assert.deepEqual(p.ref, { name: 'sessions/e2e/roundtrip', previous: null, digest: packed.digest, moved: true });
    assert.ok(!pushed.stdout.includes(TOKEN) && !pushed.stderr.includes(TOKEN), 'the token is never printed');

    // The store lists it, with the harness and the label.
    const list = await api.call('GET', '/v1/packets?label=host=e2e');
    assert.equal(list.status, 200);
    const listed = list.json.packets.find((x) => x.digest === packed.digest);
    assert.ok(listed, JSON.stringify(list.json));
    assert.equal(listed.size, packed.size);
    assert.equal(listed.harness.thread_id, THREAD);
    const ref = await api.call('GET', '/v1/refs/sessions/e2e/roundtrip');
    assert.equal(ref.json.digest, packed.digest);

    // A second push sends nothing and leaves the ref alone.
    const again = push(packet, ['--ref', 'sessions/e2e/roundtrip']);
    assert.equal(again.code, 0);
    assert.deepEqual([again.json.uploaded, again.json.mode, again.json.bytes_sent, again.json.ref.moved], [false, 'none', 0, false]);

    // Pull by ref into a fresh folder: the same bytes.
    const outDir = fresh('pulled');
    mkdirSync(outDir);
    const out = join(outDir, 'p.tar');
    const pulled = pull('sessions/e2e/roundtrip', out);
    assert.equal(pulled.code, 0, pulled.stderr + pulled.stdout);
    assert.equal(pulled.json.schema, 'pillbox.checkpoint.pull/1');
    assert.deepEqual([pulled.json.digest, pulled.json.size, pulled.json.ref, pulled.json.output],
      [packed.digest, packed.size, 'sessions/e2e/roundtrip', out]);
    assert.equal(pulled.json.harness.thread_id, THREAD);
    assert.deepEqual(readdirSync(outDir), ['p.tar'], 'no temporary file is left');
    assert.ok(readFileSync(out).equals(readFileSync(packet)));

    // Unpack into a fresh workspace and Codex home: the same tree, the rollout, no credentials.
    const restored = fresh('restored');
    const newHome = fresh('restored-home');
    const u = ok(['unpack', out, '--digest', packed.digest, '--into', restored, '--codex-home', newHome, '--quiet']);
    assert.deepEqual(snapshot(restored), snapshot(wsPath));
    assert.equal(u.harness.restored, true);
    const rolloutRel = `sessions/2026/11/30/rollout-2026-11-30T01-02-03-${THREAD}.jsonl`;
    assert.ok(readFileSync(join(newHome, rolloutRel)).equals(readFileSync(join(home, rolloutRel))));
    assert.equal(existsSync(join(newHome, 'auth.json')), false);
    assert.equal(existsSync(join(newHome, 'state_5.sqlite')), false);

    // -o - writes the verified packet to stdout and the JSON to stderr.
    const toStdout = pillbox(['pull', packed.digest, '--remote', edge.url, '-o', '-', '--quiet', '--whole'], { jsonOn: 'stderr' });
    assert.equal(toStdout.code, 0, toStdout.stderr);
    assert.ok(toStdout.stdout.equals(readFileSync(packet)));
    assert.equal(toStdout.json.output, '-');
  });

  test('a member read by range equals `pillbox checkpoint cat`', async () => {
    const s = packSample('member');
    assert.equal(push(s.packet).code, 0);
    const cat = spawnSync(PILLBOX, ['checkpoint', 'cat', s.packet, 'workspace/data.bin', '--digest', s.digest, '--quiet'],
      { encoding: 'buffer', env: env(), maxBuffer: 1 << 26 });
    assert.equal(cat.status, 0, cat.stderr.toString());
    const report = JSON.parse(cat.stderr.toString());
    const whole = await api.call('GET', `/v1/packets/${s.digest}/members/workspace/data.bin`);
    assert.equal(whole.status, 200);
    assert.ok(whole.bytes.equals(cat.stdout));
    assert.equal(whole.headers.get('pillbox-member-sha256'), `sha256:${report.sha256}`);
    for (const [start, end] of [[0, 0], [1000, 65535], [299_000, 299_999]]) {
      const part = await api.call('GET', `/v1/packets/${s.digest}/members/workspace/data.bin`, { headers: { range: `bytes=${start}-${end}` } });
      assert.equal(part.status, 206);
      assert.equal(part.headers.get('content-range'), `bytes ${start}-${end}/300000`);
      assert.ok(part.bytes.equals(cat.stdout.subarray(start, end + 1)), `bytes ${start}-${end}`);
    }
    const encoded = await api.call('GET', `/v1/packets/${s.digest}/members/workspace/docs/${encodeURIComponent('naïve file.txt')}`);
    const catUtf8 = spawnSync(PILLBOX, ['checkpoint', 'cat', s.packet, 'workspace/docs/naïve file.txt', '--quiet'], { encoding: 'buffer', env: env() });
    assert.ok(encoded.bytes.equals(catUtf8.stdout));
  });

  test('a ref moves by compare-and-swap: a stale expectation is refused with ref_conflict', async () => {
    const a = packSample('cas-a');
    const b = packSample('cas-b');
    const c = packSample('cas-c');
    const name = 'sessions/e2e/cas';
    const first = push(a.packet, ['--ref', name, '--expect-ref', 'absent']);
    assert.equal(first.code, 0, first.stdout.toString());
    assert.deepEqual(first.json.ref, { name, previous: null, digest: a.digest, moved: true });

    // Two clients both saw A; the first to push wins.
    const one = push(b.packet, ['--ref', name, '--expect-ref', a.digest]);
    assert.equal(one.code, 0, one.stdout.toString());
    assert.deepEqual(one.json.ref, { name, previous: a.digest, digest: b.digest, moved: true });
    const two = push(c.packet, ['--ref', name, '--expect-ref', a.digest]);
    assert.equal(two.code, 5, two.stdout.toString());
    assert.equal(two.json.schema, 'pillbox.error/1');
    assert.equal(two.json.code, 'ref_conflict');
    assert.equal(two.json.exit_code, 5);
    assert.ok(two.json.message.includes(b.digest), two.json.message);
    assert.ok(two.json.advice.length > 0);
    // The packet itself was stored; only the ref did not move.
    assert.equal(two.json.code, 'ref_conflict');
    assert.equal((await api.call('HEAD', `/v1/packets/${c.digest}`)).status, 200);
    assert.equal((await api.call('GET', `/v1/refs/${name}`)).json.digest, b.digest);

    // Creating a ref that exists is a conflict too.
    const create = push(c.packet, ['--ref', name, '--expect-ref', 'absent']);
    assert.equal(create.code, 5);
    assert.equal(create.json.code, 'ref_conflict');
    // Without --expect-ref the push reads the ref and moves it.
    const moved = push(c.packet, ['--ref', name]);
    assert.equal(moved.code, 0);
    assert.deepEqual(moved.json.ref, { name, previous: b.digest, digest: c.digest, moved: true });
  });

  test('log shows what the ref named and what changed; refs gives sizes and labels; a digest prefix pulls', () => {
    const a = packSample('log-a');
    writeFileSync(join(a.ws, 'added.txt'), 'a new file\n');
    const bPacket = fresh('log-b.tar');
    const packed = ok(['pack', a.ws, '-o', bPacket, '--quiet']);
    const b = { packet: bPacket, digest: packed.digest, size: packed.size };
    const name = 'sessions/e2e/log';
    assert.equal(push(a.packet, ['--ref', name, '--label', 'step=1']).code, 0);
    assert.equal(push(b.packet, ['--ref', name, '--label', 'step=2']).code, 0);
    const remote = ['--remote', edge.url, '--quiet'];
    const log = pillbox(['log', name, ...remote, '--cache-dir', fresh('log-cache')]);
    assert.equal(log.code, 0, log.stdout.toString());
    assert.deepEqual(log.json.entries.map((e) => [e.digest, e.by, e.stored, e.manifest_checked]),
      [[b.digest, 'PILLBOX_TOKEN', true, true], [a.digest, 'PILLBOX_TOKEN', true, true]]);
    assert.deepEqual([log.json.entries[0].change.added, log.json.entries[0].change.paths.map((p) => p.path)], [1, ['workspace/added.txt']]);
    assert.equal(log.json.entries[1].change, null);
    assert.deepEqual([log.json.kept, log.json.truncated, log.json.fetched.manifests], [100, false, 2]);
    const refs = pillbox(['refs', 'sessions/e2e/log', ...remote]);
    assert.deepEqual(refs.json.refs.map((r) => [r.name, r.digest, r.size, r.labels]), [[name, b.digest, b.size, ['step=2']]]);
    const out = join(fresh('by-prefix'), 'p.tar');
    mkdirSync(dirname(out));
    const pulled = pillbox(['pull', a.digest.slice(0, 19), ...remote, '-o', out]);
    assert.equal(pulled.code, 0, pulled.stdout.toString());
    assert.equal(pulled.json.digest, a.digest);
    const unknown = pillbox(['pull', `sha256:${a.digest[7] === 'f' ? '00000000' : 'ffffffff'}`, ...remote, '-o', out]);
    assert.deepEqual([unknown.code, unknown.json.code], [5, 'digest_unknown']);
  });

  test('a multipart upload killed after some parts resumes and sends only the rest', async () => {
    const s = packSample('resume', { extra: 48 * MIB });
    const state = fresh('resume-state');
    const child = spawn(PILLBOX, ['checkpoint', 'push', s.packet, '--remote', edge.url, '--quiet', '--whole'],
      { env: env({ XDG_STATE_HOME: state }), stdio: ['ignore', 'pipe', 'pipe'] });
    let stdoutOfKilled = '';
    child.stdout.on('data', (d) => { stdoutOfKilled += d; });
    // 'close', not 'exit': only then has all of the child's output been read.
    let exited = false;
    child.once('close', () => { exited = true; });
    const uploads = join(state, 'pillbox/uploads');
    let id;
    let receivedAtKill = 0;
    const deadline = Date.now() + 120_000;
    while (Date.now() < deadline && !exited) {
      const file = existsSync(uploads) && readdirSync(uploads).find((f) => f.endsWith('.json'));
      if (file) {
        id = JSON.parse(readFileSync(join(uploads, file), 'utf8')).upload_id;
        const got = await api.call('GET', `/v1/uploads/${id}`);
        if (got.status === 200 && got.json.received.length >= 1) {
          child.kill('SIGKILL');
          receivedAtKill = got.json.received.length;
          break;
        }
      }
      await sleep(20);
    }
    await new Promise((ok) => (exited ? ok() : child.once('close', ok)));
    assert.ok(id, 'the push recorded its upload');
    assert.ok(receivedAtKill >= 1, 'killed after at least one part');
    const view = await api.call('GET', `/v1/uploads/${id}`);
    assert.equal(view.status, 200, 'the upload is still open after the kill');
    assert.equal((await api.call('HEAD', `/v1/packets/${s.digest}`)).status, 404);
    const total = view.json.parts;
    const before = view.json.received.length;
    assert.ok(total >= 9 && before < total, `${before}/${total}`);

    const resumed = push(s.packet, [], { extraEnv: { XDG_STATE_HOME: state } });
    assert.equal(resumed.code, 0, resumed.stdout.toString() + resumed.stderr);
    const r = resumed.json;
    assert.ok(stdoutOfKilled === '', 'the killed push printed nothing');
    assert.deepEqual([r.uploaded, r.mode, r.resumed], [true, 'multipart', true]);
    assert.equal(r.parts.total, total);
    // Only the missing parts are sent. The part in flight at the kill may
    // still be stored after `view` was read (its body had arrived: the
    // store finishes the request), and is then not missing either.
    assert.ok(r.parts.sent === total - before || r.parts.sent === total - before - 1,
      `only the missing parts are sent: ${r.parts.sent} of ${total}, ${before} stored before`);
    assert.ok(r.parts.sent < total);
    assert.equal(r.parts.part_size, 5 * MIB);
    assert.deepEqual(readdirSync(uploads), [], 'the state file is removed once the upload completes');
    assert.deepEqual(storedCopies(s.digest), { packets: 1, uploads: 0 });

    const out = fresh('resume-pulled.tar');
    const pulled = pull(s.digest, out);
    assert.equal(pulled.code, 0, pulled.stderr);
    assert.ok(readFileSync(out).equals(readFileSync(s.packet)));
  });

  test('the same packet pushed by four clients at once is stored once', async () => {
    const s = packSample('concurrent', { extra: 12 * MIB });
    const runs = await Promise.all([1, 2, 3, 4].map((n) => new Promise((ok) => {
      const child = spawn(PILLBOX, ['checkpoint', 'push', s.packet, '--remote', edge.url, '--quiet', '--whole', '--ref', `sessions/e2e/client-${n}`],
        { env: env({ XDG_STATE_HOME: fresh(`client-${n}-state`) }), stdio: ['ignore', 'pipe', 'pipe'] });
      let out = '';
      let err = '';
      child.stdout.on('data', (d) => { out += d; });
      child.stderr.on('data', (d) => { err += d; });
      // 'exit' can come before the last of stdout is read; 'close' comes after.
      child.once('close', (code) => ok({ code, out, err }));
    })));
    for (const r of runs) {
      assert.equal(r.code, 0, r.out + r.err);
      const j = JSON.parse(r.out);
      record(j);
      assert.equal(j.digest, s.digest);
      assert.equal(j.ref.digest, s.digest);
    }
    assert.ok(runs.some((r) => JSON.parse(r.out).uploaded), 'one client stored it');
    assert.deepEqual(storedCopies(s.digest), { packets: 1, uploads: 0 });
    const [row] = packetObject(edge, s.digest);
    assert.equal(row.member_count, s.report.members);
    assert.equal(edge.r2Has(row.object_key), true);
    const out = fresh('concurrent-pulled.tar');
    assert.equal(pull(s.digest, out).code, 0);
    assert.ok(readFileSync(out).equals(readFileSync(s.packet)));
  });
});

describe('refusals', () => {
  test('a packet the store refuses keeps packet-core\'s code (exit 3)', () => {
    const ws = fresh('too-many-ws');
    for (let i = 0; i < 320; i += 1) write(join(ws, `f/${String(i).padStart(4, '0')}.txt`), `${i}\n`);
    const packet = fresh('too-many.tar');
    const packed = ok(['pack', ws, '-o', packet, '--quiet']);
    const r = push(packet);
    assert.equal(r.code, 3, r.stdout.toString());
    assert.equal(r.json.schema, 'pillbox.error/1');
    assert.equal(r.json.code, 'limit_members');
    assert.equal(r.json.exit_code, 3);
    assert.deepEqual(storedCopies(packed.digest), { packets: 0, uploads: 0 });
  });

  test('a damaged packet is refused locally and nothing is sent', async () => {
    const s = packSample('damaged');
    const bytes = readFileSync(s.packet);
    bytes[bytes.length - 1024 * 3] ^= 1;
    const damaged = fresh('damaged.tar');
    writeFileSync(damaged, bytes);
    const r = push(damaged);
    assert.equal(r.code, 3);
    assert.equal(r.json.schema, 'pillbox.error/1');
    assert.ok(r.json.code.length > 0);
    assert.equal((await api.call('HEAD', `/v1/packets/${sha256(bytes)}`)).status, 404);
  });

  test('without the token the store refuses the upload', () => {
    const s = packSample('no-token');
    const r = push(s.packet, [], { extraEnv: { PILLBOX_TOKEN: undefined } });
    assert.equal(r.code, 5);
    assert.equal(r.json.code, 'unauthorized');
    const wrong = push(s.packet, [], { extraEnv: { PILLBOX_TOKEN: 'not-the-token' } });
    assert.equal(wrong.code, 5);
    assert.equal(wrong.json.code, 'forbidden');
    assert.ok(!wrong.stdout.includes('not-the-token'));
    // --token-file works instead of the variable.
    const tokenFile = fresh('token');
    writeFileSync(tokenFile, `${TOKEN}\n`);
    const withFile = push(s.packet, ['--token-file', tokenFile], { extraEnv: { PILLBOX_TOKEN: undefined } });
    assert.equal(withFile.code, 0, withFile.stdout.toString());
  });

  test('a sandbox\'s read+push+refs:sessions/x/ token pushes, checkpoints its own session and pulls; other refs are refused', () => {
    const sandbox = { PILLBOX_TOKEN: edge.tokens.sandbox };
    const s = packSample('sandbox');
    const pushed = push(s.packet, ['--ref', 'sessions/x/latest'], { extraEnv: sandbox });
    assert.equal(pushed.code, 0, pushed.stdout.toString() + pushed.stderr);
    assert.deepEqual(pushed.json.ref, { name: 'sessions/x/latest', previous: null, digest: s.digest, moved: true });
    assert.ok(!pushed.stdout.includes(edge.tokens.sandbox) && !pushed.stderr.includes(edge.tokens.sandbox));
    const out = join(fresh('sandbox-pulled'));
    const pulled = pull('sessions/x/latest', out, [], { extraEnv: sandbox });
    assert.equal(pulled.code, 0, pulled.stdout.toString() + pulled.stderr);
    assert.ok(readFileSync(out).equals(readFileSync(s.packet)));
    // Another session's ref: the packet is stored, the ref is refused.
    const t = packSample('sandbox-other');
    const other = push(t.packet, ['--ref', 'sessions/y/latest'], { extraEnv: sandbox });
    assert.equal(other.code, 5, other.stdout.toString());
    assert.equal(other.json.code, 'scope_missing');
    assert.ok(other.json.message.includes('sessions/y/latest'), other.json.message);
    assert.deepEqual(refCount(edge, 'sessions/y/latest'), [{ n: 0 }]);
  });

  test('pulling what the store does not hold writes nothing', () => {
    const dir = fresh('pull-missing');
    mkdirSync(dir);
    const missing = sha256(Buffer.from('no such packet'));
    const r = pull(missing, join(dir, 'p.tar'));
    assert.equal(r.code, 5);
    assert.equal(r.json.code, 'not_found');
    const byRef = pull('sessions/e2e/none', join(dir, 'p.tar'));
    assert.equal(byRef.code, 5);
    assert.equal(byRef.json.code, 'not_found');
    assert.deepEqual(readdirSync(dir), []);
    const bad = pillbox(['pull', 'x', '--remote', 'ftp://nowhere', '-o', join(dir, 'p.tar')]);
    assert.equal(bad.code, 2);
    assert.equal(bad.json.code, 'usage');
  });

  test('a store that cannot be reached is exit 4, after bounded retries', () => {
    const dir = fresh('unreachable');
    mkdirSync(dir);
    const started = Date.now();
    const r = pillbox(['pull', sha256(Buffer.from('x')), '--remote', 'http://127.0.0.1:9', '-o', join(dir, 'p.tar'), '--quiet']);
    assert.equal(r.code, 4, r.stdout.toString());
    assert.equal(r.json.code, 'remote_unreachable');
    assert.ok(Date.now() - started < 30_000);
    assert.deepEqual(readdirSync(dir), []);
  });
});

/**
 * A stand-in store on 127.0.0.1 that serves `bytes` as the packet `digest`
 * and misbehaves as `mode` says: `flip` alters one byte in flight, `drop`
 * cuts the first response in the middle (later requests honour Range).
 */
async function misbehavingStore(bytes, mode) {
  const requests = [];
  const server = createServer((req, res) => {
    requests.push({ method: req.method, url: req.url, range: req.headers.range ?? null });
    if (!req.url.startsWith('/v1/packets/')) { res.writeHead(404).end(); return; }
    const m = /^bytes=(\d+)-$/.exec(req.headers.range ?? '');
    const start = m ? Number(m[1]) : 0;
    const headers = { 'content-type': 'application/x-tar', 'content-length': String(bytes.length - start), 'accept-ranges': 'bytes' };
    if (m) headers['content-range'] = `bytes ${start}-${bytes.length - 1}/${bytes.length}`;
    res.writeHead(m ? 206 : 200, headers);
    const body = Buffer.from(bytes.subarray(start));
    if (mode === 'flip') body[Math.floor(body.length / 2)] ^= 1;
    if (mode === 'drop' && requests.length === 1) {
      res.write(body.subarray(0, Math.floor(body.length / 2)), () => res.socket.destroy());
      return;
    }
    res.end(body);
  });
  await new Promise((ok) => server.listen(0, '127.0.0.1', ok));
  const url = `http://127.0.0.1:${server.address().port}`;
  return { url, requests, close: () => new Promise((ok) => server.close(ok)) };
}

describe('pull verifies while it downloads', () => {
  test('altered bytes are refused and nothing is written', async () => {
    const s = packSample('altered', { extra: 3 * MIB });
    const store = await misbehavingStore(readFileSync(s.packet), 'flip');
    try {
      const dir = fresh('altered-out');
      mkdirSync(dir);
      const r = await pillboxAsync(['pull', s.digest, '--remote', store.url, '-o', join(dir, 'p.tar'), '--quiet', '--whole']);
      assert.equal(r.code, 3, r.stdout.toString());
      assert.equal(r.json.schema, 'pillbox.error/1');
      assert.match(r.json.code, /digest_mismatch|header_checksum/);
      assert.deepEqual(readdirSync(dir), [], 'no file and no temporary file');
      const toStdout = await pillboxAsync(['pull', s.digest, '--remote', store.url, '-o', '-', '--quiet', '--whole'], { jsonOn: 'stderr' });
      assert.equal(toStdout.code, 3);
      assert.equal(toStdout.stdout.length, 0, 'no byte reaches stdout');
    } finally {
      await store.close();
    }
  });

  test('a dropped connection is continued with Range', async () => {
    const s = packSample('dropped', { extra: 3 * MIB });
    const store = await misbehavingStore(readFileSync(s.packet), 'drop');
    try {
      const out = fresh('dropped.tar');
      const r = await pillboxAsync(['pull', s.digest, '--remote', store.url, '-o', out, '--quiet', '--whole']);
      assert.equal(r.code, 0, r.stdout.toString() + r.stderr);
      assert.equal(r.json.resumed, 1);
      assert.equal(store.requests.length, 2);
      assert.equal(store.requests[0].range, null);
      const from = Number(/^bytes=(\d+)-$/.exec(store.requests[1].range)[1]);
      assert.ok(from > 0 && from < s.size, store.requests[1].range);
      assert.ok(readFileSync(out).equals(readFileSync(s.packet)));
    } finally {
      await store.close();
    }
  });
});

test('every push, pull, refs, log and error object matches its schema in proto/cli/', () => {
  assert.ok(printed.length >= 20, `${printed.length} objects`);
  for (const schema of new Set(Object.values(SCHEMA_FILES))) {
    assert.ok(printed.some((p) => p.file === schema), `no ${schema} object was printed`);
  }
  assertMatchSchemas(printed);
});
