// End-to-end tests of delta transfer in the CLI (docs/transfer.md):
// push, pull, save and restore with the real `pillbox` binary (release
// build) against the Worker under `wrangler dev --local`, through the
// recording proxy of tests/e2e/proxy.mjs (what each request carried, and
// connections dropped on purpose).
//
// Run: node --test tests/e2e/delta.test.mjs
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import {
  appendFileSync, existsSync, lstatSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, readlinkSync, rmSync, writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, relative } from 'node:path';
import { after, before, describe, test } from 'node:test';

import { assertMatchSchemas } from './cli-schemas.mjs';
import { PILLBOX, TOKEN, buildRelease, buildWorker, client, sha256, startEdge } from './edge.mjs';
import { startProxy } from './proxy.mjs';
import { chunkCount, packsOfPacket, packsWrittenForAndUsed } from './store.mjs';

const MIB = 1 << 20;
const THREAD = '0199a213-81c0-7800-8aa1-bbab2a035a53';

let edge;
let store;
let work;

before(async () => {
  buildRelease();
  buildWorker();
  work = mkdtempSync(join(tmpdir(), 'pillbox-e2e-delta-'));
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

/** A host: its own state and cache folders. */
function host(name) {
  return { XDG_STATE_HOME: fresh(`${name}-state`), XDG_CACHE_HOME: fresh(`${name}-cache`) };
}

function env(extra = {}) {
  const e = { ...process.env, PILLBOX_TOKEN: TOKEN };
  delete e.CODEX_HOME;
  delete e.CLAUDE_CONFIG_DIR;
  delete e.PILLBOX_REMOTE;
  delete e.PILLBOX_CACHE_MAX_BYTES;
  Object.assign(e, extra);
  for (const [k, v] of Object.entries(extra)) if (v === undefined) delete e[k];
  return e;
}

const SCHEMA_FILES = {
  'pillbox.checkpoint.push/1': 'push-1.schema.json',
  'pillbox.checkpoint.pull/1': 'pull-1.schema.json',
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

function pillboxAsync(args, extraEnv = {}) {
  return new Promise((ok) => {
    const child = spawn(PILLBOX, ['checkpoint', ...args, '--quiet'], { env: env(extraEnv), stdio: ['ignore', 'pipe', 'pipe'] });
    const out = [];
    const err = [];
    child.stdout.on('data', (d) => out.push(d));
    child.stderr.on('data', (d) => err.push(d));
    child.once('close', (code) => {
      const stdout = Buffer.concat(out).toString('utf8');
      ok({ code, json: parse(stdout), out: stdout + Buffer.concat(err).toString('utf8') });
    });
  });
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

/** Text that compresses like source code. */
function text(lines, seed) {
  let out = '';
  for (let i = 0; i < lines; i += 1) out += `fn item_${seed}_${i}(x: u64) -> u64 { x.wrapping_mul(${(i * 2654435761) % 1000003}) }\n`;
  return out;
}

/** A GitHub token of the real format (its last six characters are the CRC-32 of the rest, in base 62). */
function githubToken() {
  const body = 'pillboxTestToken0123456789abcd';
  let crc = ~0;
  for (const b of Buffer.from(body)) {
    crc ^= b;
    for (let k = 0; k < 8; k += 1) crc = (crc >>> 1) ^ (0xedb88320 & -(crc & 1));
  }
  let n = (~crc) >>> 0;
  const digits = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';
  let sum = '';
  for (let i = 0; i < 6; i += 1) { sum = digits[n % 62] + sum; n = Math.floor(n / 62); }
  return `ghp_${body}${sum}`;
}

/** Seeded incompressible bytes (xorshift), the same on every run. */
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

/**
 * A workspace: small sources, a 3 MiB incompressible blob, a 6 MiB log,
 * and bodies just over the 256 KiB chunk threshold (large bodies that
 * FastCDC may leave as one chunk).
 */
function workspace(root) {
  for (let i = 0; i < 40; i += 1) write(join(root, `src/m${i % 4}/f${i}.rs`), text(30, i));
  for (let i = 1; i <= 3; i += 1) write(join(root, `assets/mid-${i}.bin`), noise(300 * 1024, i));
  write(join(root, 'assets/blob.bin'), randomBytes(3 * MIB));
  write(join(root, 'logs/session.jsonl'), text(80_000, 'log'));
  write(join(root, 'README.md'), '# delta\n');
}

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

const remote = () => ['--remote', store.url];

/** The store's request log since `mark` entries. */
async function requestsSince(mark) {
  return (await store.log()).slice(mark);
}

// ---- tests ------------------------------------------------------------------

describe('delta push', () => {
  test('a second push sends only what changed, and the packet comes back whole', async () => {
    const ws = fresh('ws');
    workspace(ws);
    const a = fresh('a.tar');
    ok(['pack', ws, '-o', a]);
    const h = host('pusher');
    const first = ok(['push', a, ...remote(), '--ref', 'sessions/delta/push'], h);
    assert.equal(first.mode, 'delta');
    assert.equal(first.uploaded, true);
    assert.equal(first.retries, 0);
    assert.deepEqual(first.delta.bases, []);
    // Compressed: the text shrinks, the random blob does not.
    assert.ok(first.bytes_sent < first.size * 0.6, `${first.bytes_sent} of ${first.size}`);
    assert.ok(first.bytes_sent > 3 * MIB);

    appendFileSync(join(ws, 'logs/session.jsonl'), 'one more turn\n');
    write(join(ws, 'src/m0/f0.rs'), 'fn changed() {}\n');
    const b = fresh('b.tar');
    ok(['pack', ws, '-o', b]);
    const mark = (await store.log()).length;
    const second = ok(['push', b, ...remote(), '--ref', 'sessions/delta/push'], h);
    assert.equal(second.mode, 'delta');
    assert.deepEqual(second.delta.bases, [first.digest], 'the ref\'s packet is the base');
    assert.equal(second.delta.missing_bodies, 2);
    // The appended log sends its last chunk or two, not 6 MiB.
    assert.ok(second.delta.chunk_bytes < 2.5 * MIB, `${second.delta.chunk_bytes}`);
    assert.ok(second.delta.reused_bytes > 6 * MIB);
    assert.ok(second.bytes_sent < 300_000, `${second.bytes_sent} bytes sent`);
    const sent = await requestsSince(mark);
    const wire = sent.filter((r) => r.method !== 'GET' && r.method !== 'HEAD' && !r.path.startsWith('/v1/refs'))
      .reduce((n, r) => n + r.body_bytes, 0);
    assert.equal(second.bytes_sent, wire, 'bytes_sent is what the store received');
    const complete = sent.find((r) => r.path.endsWith('/complete'));
    assert.equal(complete.status, 201);

    // A third push of the same packet sends nothing.
    const again = ok(['push', b, ...remote(), '--ref', 'sessions/delta/push'], h);
    assert.deepEqual([again.mode, again.uploaded, again.bytes_sent], ['none', false, 0]);

    const out = fresh('b-pulled.tar');
    const pulled = ok(['pull', 'sessions/delta/push', ...remote(), '-o', out], host('reader'));
    assert.equal(pulled.mode, 'delta');
    assert.ok(readFileSync(out).equals(readFileSync(b)));
  });

  test('--base names a stored packet to build on; without one nothing is reused', async () => {
    const ws = fresh('base-ws');
    workspace(ws);
    const a = fresh('base-a.tar');
    const pa = ok(['pack', ws, '-o', a]);
    ok(['push', a, ...remote()], host('base-1'));
    write(join(ws, 'README.md'), '# changed\n');
    const b = fresh('base-b.tar');
    ok(['pack', ws, '-o', b]);
    const pushed = ok(['push', b, ...remote(), '--base', pa.digest], host('base-2'));
    assert.deepEqual(pushed.delta.bases, [pa.digest]);
    assert.equal(pushed.delta.missing_bodies, 1);
    assert.ok(pushed.bytes_sent < 20_000, `${pushed.bytes_sent}`);
    // Without a base, nothing is reused: presence is from the bases only.
    write(join(ws, 'README.md'), '# changed again\n');
    const c = fresh('base-c.tar');
    ok(['pack', ws, '-o', c]);
    const alone = ok(['push', c, ...remote()], host('base-3'));
    assert.equal(alone.delta.reused_bytes, 0);
    assert.ok(alone.bytes_sent > 3 * MIB);
    const bad = pillbox(['push', c, ...remote(), '--base', 'sha256:12'], host('base-4'));
    assert.equal(bad.code, 2);
    assert.equal(bad.json.code, 'usage');
  });

  test('a lost connection is retried and counted; a push that gives up resumes where it stopped', async () => {
    const ws = fresh('retry-ws');
    workspace(ws);
    const a = fresh('retry.tar');
    ok(['pack', ws, '-o', a]);
    const h = host('retry');
    await store.fail('/parts/1', 1);
    const retried = ok(['push', a, ...remote()], h);
    assert.equal(retried.retries, 1);
    assert.equal(retried.uploaded, true);

    write(join(ws, 'assets/blob.bin'), randomBytes(3 * MIB));
    const b = fresh('resume.tar');
    ok(['pack', ws, '-o', b]);
    // Every attempt at `complete` fails: the push gives up after its retries.
    await store.fail('/complete', 5);
    const failed = pillbox(['push', b, ...remote()], h);
    assert.equal(failed.code, 4, failed.out);
    assert.equal(failed.json.code, 'remote_unreachable');
    const states = readdirSync(join(h.XDG_STATE_HOME, 'pillbox/uploads')).filter((f) => f.endsWith('.push.json'));
    assert.equal(states.length, 1, 'the push is recorded');
    const resumed = ok(['push', b, ...remote()], h);
    assert.equal(resumed.resumed, true);
    assert.equal(resumed.uploaded, true);
    assert.equal(resumed.delta.parts_sent, 0, 'every chunk was there already');
    assert.deepEqual(readdirSync(join(h.XDG_STATE_HOME, 'pillbox/uploads')).filter((f) => f.endsWith('.json')), []);
    const out = fresh('resume-pulled.tar');
    ok(['pull', resumed.digest, ...remote(), '-o', out, '--no-cache']);
    assert.ok(readFileSync(out).equals(readFileSync(b)));
  });
});

describe('delta pull', () => {
  test('the chunks of packet.json a --base packet holds are not fetched', async () => {
    // 3,000 small files: a packet.json of many chunks, one of which a
    // one-file edit changes.
    const ws = fresh('many-ws');
    for (let i = 0; i < 3000; i += 1) {
      mkdirSync(join(ws, `d${i % 30}`), { recursive: true });
      writeFileSync(join(ws, `d${i % 30}/file-${i}.txt`), `file ${i}\n`);
    }
    const a = fresh('many-a.tar');
    ok(['pack', ws, '-o', a]);
    ok(['push', a, ...remote(), '--ref', 'sessions/delta/many'], host('many-pusher'));
    writeFileSync(join(ws, 'd7/file-1507.txt'), 'edited\n');
    const b = fresh('many-b.tar');
    const pb = ok(['pack', ws, '-o', b]);
    ok(['push', b, ...remote(), '--ref', 'sessions/delta/many'], host('many-pusher'));
    const manifest = (await client(store.url).call('GET', `/v1/packets/${pb.digest}/manifest`)).bytes.length;
    assert.ok(manifest > 256 * 1024, `packet.json is ${manifest} bytes`);

    const without = ok(['pull', pb.digest, ...remote(), '-o', fresh('many-whole.tar'), '--no-cache']);
    const out = fresh('many-pulled.tar');
    const r = ok(['pull', pb.digest, ...remote(), '-o', out, '--base', a, '--no-cache']);
    assert.ok(readFileSync(out).equals(readFileSync(b)));
    assert.equal(r.delta.fetched_bytes, 'edited\n'.length);
    assert.ok(r.bytes_received * 8 < without.bytes_received, `${r.bytes_received} received with --base, ${without.bytes_received} without`);
  });

  test('bodies come from --base packets, then the cache; only the rest is fetched', async () => {
    const ws = fresh('pull-ws');
    workspace(ws);
    const a = fresh('pull-a.tar');
    const pa = ok(['pack', ws, '-o', a]);
    ok(['push', a, ...remote(), '--ref', 'sessions/delta/pull'], host('pull-pusher'));
    appendFileSync(join(ws, 'logs/session.jsonl'), text(100, 'more'));
    const b = fresh('pull-b.tar');
    const pb = ok(['pack', ws, '-o', b]);
    ok(['push', b, ...remote(), '--ref', 'sessions/delta/pull'], host('pull-pusher'));

    // A fresh host with the old packet file: bodies from it.
    const notPacket = fresh('not-a-packet.tar');
    writeFileSync(notPacket, 'not a packet');
    const out = fresh('pulled-b.tar');
    const r = ok(['pull', 'sessions/delta/pull', ...remote(), '-o', out, '--base', a, '--base', notPacket, '--no-cache']);
    assert.ok(readFileSync(out).equals(readFileSync(b)));
    assert.equal(r.digest, pb.digest);
    assert.equal(r.delta.cache, null);
    assert.deepEqual(r.delta.bases.map((x) => x.usable), [true, false]);
    assert.ok(r.delta.bases[1].error.length > 0);
    assert.equal(r.delta.from_bases_bytes + r.delta.fetched_bytes, pb.totals.bytes, 'every body byte is accounted for');
    assert.ok(r.delta.fetched_bytes < pb.totals.bytes / 10, JSON.stringify(r.delta));
    assert.ok(r.bytes_received < 1 * MIB, `${r.bytes_received}`);

    // A host that pulls repeatedly needs no --base: the cache has it.
    const h = host('puller');
    const first = ok(['pull', pa.digest, ...remote(), '-o', fresh('p1.tar')], h);
    assert.equal(first.delta.from_cache_bytes, 0);
    assert.ok(first.bytes_received > 3 * MIB);
    const second = ok(['pull', pb.digest, ...remote(), '-o', fresh('p2.tar')], h);
    assert.equal(second.delta.from_cache_bytes + second.delta.fetched_bytes, pb.totals.bytes);
    assert.ok(second.delta.fetched_bytes < pb.totals.bytes / 10, JSON.stringify(second.delta));
    assert.ok(second.bytes_received < 1 * MIB, `${second.bytes_received}`);
    // A damaged cache is passed over: the chunks are fetched again.
    const chunks = join(h.XDG_CACHE_HOME, 'pillbox/chunks');
    for (const f of readdirSync(chunks).filter((n) => n.endsWith('.pack'))) {
      const p = join(chunks, f);
      const bytes = readFileSync(p);
      for (let i = 0; i < bytes.length; i += 1) bytes[i] ^= 0xff;
      writeFileSync(p, bytes);
    }
    const damaged = fresh('p3.tar');
    const third = ok(['pull', pb.digest, ...remote(), '-o', damaged], h);
    assert.ok(readFileSync(damaged).equals(readFileSync(b)));
    assert.equal(third.delta.from_cache_bytes, 0);
    // --whole downloads the packet as it is.
    const whole = ok(['pull', pb.digest, ...remote(), '-o', fresh('p4.tar'), '--whole'], h);
    assert.equal(whole.mode, 'whole');
    assert.equal(whole.delta, null);
    assert.equal(whole.bytes_received, pb.size);
  });

  test('two pulls at once, and a pull while another evicts, share one cache safely', async () => {
    const ws = fresh('conc-ws');
    workspace(ws);
    const a = fresh('conc.tar');
    const pa = ok(['pack', ws, '-o', a]);
    ok(['push', a, ...remote()], host('conc-pusher'));
    const cacheHome = fresh('shared-cache');
    for (let round = 0; round < 3; round += 1) {
      const outs = [fresh('c1.tar'), fresh('c2.tar'), fresh('c3.tar')];
      const runs = await Promise.all([
        pillboxAsync(['pull', pa.digest, ...remote(), '-o', outs[0]], { XDG_CACHE_HOME: cacheHome }),
        pillboxAsync(['pull', pa.digest, ...remote(), '-o', outs[1]], { XDG_CACHE_HOME: cacheHome }),
        // This one keeps the cache at one byte: it evicts everything when done.
        pillboxAsync(['pull', pa.digest, ...remote(), '-o', outs[2]], { XDG_CACHE_HOME: cacheHome, PILLBOX_CACHE_MAX_BYTES: '1' }),
      ]);
      for (const [i, r] of runs.entries()) {
        assert.equal(r.code, 0, r.out);
        assert.ok(readFileSync(outs[i]).equals(readFileSync(a)), `round ${round}, pull ${i}`);
      }
    }
    const evicting = ok(['pull', pa.digest, ...remote(), '-o', fresh('c4.tar')], { XDG_CACHE_HOME: cacheHome, PILLBOX_CACHE_MAX_BYTES: '1' });
    assert.ok(evicting.delta.evicted_bytes > 0);
    const chunks = join(cacheHome, 'pillbox/chunks');
    assert.deepEqual(readdirSync(chunks).filter((n) => !n.startsWith('.')), [], 'the bound holds');
  });
});

describe('save and restore', () => {
  test('save after every turn sends only the turn; restore brings back the workspace and the rollout', async () => {
    const ws = fresh('turns-ws');
    workspace(ws);
    const home = fresh('codex-home');
    const rollout = join(home, `sessions/2026/11/30/rollout-2026-11-30T01-02-03-${THREAD}.jsonl`);
    write(join(home, 'auth.json'), '{"OPENAI_API_KEY":"sk-never-packed"}');
    const meta = { timestamp: '2026-11-30T01:02:03.456Z', type: 'session_meta', payload: { id: THREAD, cwd: ws, originator: 'codex_exec', cli_version: '0.171.0' } };
    write(rollout, JSON.stringify(meta) + '\n' + text(20_000, 'turn0').split('\n').map((l) => JSON.stringify({ type: 'response_item', payload: { text: l } })).join('\n') + '\n');
    const harness = ['--harness', 'codex', '--thread', THREAD, '--codex-home', home];
    const laptop = host('laptop');
    const ref = 'sessions/delta/turns';
    const s1 = ok(['save', ws, ...remote(), '--ref', ref, ...harness], laptop);
    assert.equal(s1.schema, 'pillbox.checkpoint.save/1');
    assert.equal(s1.output, null);
    assert.equal(s1.mode, 'delta');
    assert.equal(s1.harness.thread_id, THREAD);
    assert.equal(s1.ref.moved, true);
    assert.deepEqual(readdirSync(work).filter((n) => n.endsWith('.tar') && n.includes('turns')), [], 'no packet file');

    // A turn: the rollout grows, one file changes.
    appendFileSync(rollout, JSON.stringify({ type: 'response_item', payload: { text: 'turn 1' } }) + '\n');
    write(join(ws, 'src/m1/f1.rs'), 'fn turn_one() {}\n');
    const s2 = ok(['save', ws, ...remote(), '--ref', ref, ...harness], laptop);
    assert.deepEqual(s2.delta.bases, [s1.digest]);
    assert.ok(s2.bytes_sent < 300_000, `${s2.bytes_sent}`);
    assert.equal(s2.ref.previous, s1.digest);

    // Another machine restores; then the next turn costs only the turn.
    const desk = host('desk');
    const into = fresh('restored');
    const newHome = fresh('restored-home');
    const r1 = ok(['restore', ref, ...remote(), '--into', into, '--codex-home', newHome], desk);
    assert.equal(r1.schema, 'pillbox.checkpoint.restore/1');
    assert.equal(r1.digest, s2.digest);
    assert.equal(r1.digest_checked, true);
    assert.equal(r1.harness.restored, true);
    assert.deepEqual(snapshot(into), snapshot(ws));
    assert.ok(readFileSync(join(newHome, relative(home, rollout))).equals(readFileSync(rollout)));
    assert.equal(existsSync(join(newHome, 'auth.json')), false);

    appendFileSync(rollout, JSON.stringify({ type: 'response_item', payload: { text: 'turn 2' } }) + '\n');
    const s3 = ok(['save', ws, ...remote(), '--ref', ref, ...harness, '-o', fresh('turn2.tar')], laptop);
    assert.ok(existsSync(s3.output));
    const into2 = fresh('restored-2');
    const r2 = ok(['restore', ref, ...remote(), '--into', into2, '--codex-home', fresh('home-2')], desk);
    assert.equal(r2.delta.from_cache_bytes + r2.delta.fetched_bytes, r2.totals.bytes);
    assert.ok(r2.delta.fetched_bytes < r2.totals.bytes / 10, JSON.stringify(r2.delta));
    assert.ok(r2.bytes_received < 300_000, `${r2.bytes_received}`);
    assert.deepEqual(snapshot(into2), snapshot(ws));

    // A credential found by content stops the save before anything is sent.
    write(join(ws, 'notes/deploy.txt'), `GITHUB_TOKEN=${githubToken()}\n`);
    const marked = (await store.log()).length;
    const leaked = pillbox(['save', ws, ...remote(), '--ref', ref, ...harness], laptop);
    assert.equal(leaked.code, 5, leaked.out);
    assert.equal(leaked.json.code, 'secret_in_workspace');
    assert.equal(leaked.json.path, 'workspace/notes/deploy.txt');
    assert.ok(!leaked.out.includes(githubToken()), 'the token is never printed');
    const afterLeak = (await store.log()).slice(marked);
    assert.deepEqual(afterLeak.filter((r) => r.method !== 'GET' && r.method !== 'HEAD'), [], 'nothing was sent');
    rmSync(join(ws, 'notes'), { recursive: true });

    // A restore that cannot finish leaves the target as it was.
    const full = fresh('not-empty');
    write(join(full, 'keep.txt'), 'mine');
    const refused = pillbox(['restore', ref, ...remote(), '--into', full], desk);
    assert.equal(refused.code, 5);
    assert.equal(refused.json.code, 'target_not_empty');
    assert.deepEqual(readdirSync(full), ['keep.txt']);
  });
});

describe('many turns', () => {
  // worker/src/compact.rs: a packet that would take its bodies from
  // MERGE_AT small packs has them merged into one as it is stored.
  const MERGE_AT = 8;

  test('a packet saved after many small turns takes its bodies from a bounded number of packs, and reads back whole', { timeout: 300_000 }, async () => {
    const ws = fresh('many-ws');
    for (let i = 0; i < 12; i += 1) write(join(ws, `src/f${i}.rs`), text(40, `many${i}`));
    const h = host('many');
    const ref = 'sessions/delta/many';
    const saves = [];
    for (let turn = 0; turn < 2 * MERGE_AT + 2; turn += 1) {
      // Each turn adds a file of its own: every earlier pack stays in use.
      write(join(ws, `turns/t${turn}.rs`), text(20, `turn${turn}`));
      const s = ok(['save', ws, ...remote(), '--ref', ref], h);
      saves.push({ digest: s.digest, packs: packsOfPacket(edge, s.digest), sent: s.bytes_sent });
    }
    const counts = saves.map((s) => s.packs.length);
    // A one-request save stores its turn's frames in one pack and its
    // layout in another, its own: without merging, the n-th packet (from 0)
    // would use n + 2 packs. A packet that would take its bodies from
    // MERGE_AT small packs has them merged, so none uses more than
    // MERGE_AT - 1 of them besides its own.
    assert.equal(counts[MERGE_AT - 2], MERGE_AT, JSON.stringify(counts));
    assert.ok(Math.max(...counts) <= MERGE_AT, JSON.stringify(counts));
    assert.ok(counts.at(-1) < counts.length / 2, JSON.stringify(counts));
    // A merge is the store's work: the client sent only its turn.
    assert.ok(Math.max(...saves.slice(1).map((s) => s.sent)) < 20_000, JSON.stringify(saves.map((s) => s.sent)));
    // The latest merged pack holds its chunks' rows (the dedup hints follow
    // the copy that later packets use).
    const last = saves[2 * MERGE_AT - 2].digest;
    assert.equal(counts[2 * MERGE_AT - 2], 1, JSON.stringify(counts));
    const merged = packsWrittenForAndUsed(edge, last)[0];
    assert.ok(merged.chunks > MERGE_AT, JSON.stringify(merged));
    assert.deepEqual(chunkCount(edge, merged.key), [{ n: merged.chunks }]);
    // Every packet of the series reads back as pack writes it: the merged
    // ones from their new pack, the older ones from theirs.
    const local = fresh('many-last.tar');
    const packed = ok(['pack', ws, '-o', local]);
    assert.equal(packed.digest, saves.at(-1).digest);
    for (const s of [saves[MERGE_AT - 2], saves[MERGE_AT - 1], saves.at(-1)]) {
      const out = fresh('many-pulled.tar');
      const pulled = ok(['pull', s.digest, ...remote(), '-o', out, '--no-cache'], host('many-reader'));
      assert.equal(pulled.digest, s.digest);
      const whole = await client(edge.url).call('GET', `/v1/packets/${s.digest}`);
      assert.equal(whole.status, 200);
      assert.ok(whole.bytes.equals(readFileSync(out)), 'GET and pull agree');
    }
    const pulledLast = fresh('many-last-pulled.tar');
    ok(['pull', ref, ...remote(), '-o', pulledLast, '--no-cache'], host('many-reader-2'));
    assert.ok(readFileSync(pulledLast).equals(readFileSync(local)));
    const into = fresh('many-restored');
    ok(['restore', ref, ...remote(), '--into', into], host('many-desk'));
    assert.deepEqual(snapshot(into), snapshot(ws));
  });
});

test('every push, pull, save, restore and error object matches its schema in proto/cli/', () => {
  for (const schema of ['save-1.schema.json', 'restore-1.schema.json', 'push-1.schema.json', 'pull-1.schema.json']) {
    assert.ok(printed.some((p) => p.file === schema), `no ${schema} object was printed`);
  }
  assertMatchSchemas(printed);
});
