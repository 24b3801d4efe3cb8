// Harness state end to end, with the real agent CLIs from npm (pinned in
// this folder's package.json) running offline against the mock model
// server: for each harness, a turn on "box A" (its own home, the workspace
// at path A), `pillbox checkpoint pack`, `unpack` on "box B" (a fresh home,
// the workspace at another path B), a resumed turn there, and a check that
// the model received the first turn in the resumed request's history.
// OpenCode's restore in place with --discard-local runs against the Worker
// under `wrangler dev --local` (tests/e2e/edge.mjs), as a store.
//
// Run: cargo build -p pillbox && node --test --test-concurrency=1 tests/harness/
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, test } from 'node:test';

import { TOKEN, buildWorker, startEdge } from '../e2e/edge.mjs';
import { answer, startMockModel } from './mock-model.mjs';

const here = dirname(fileURLToPath(import.meta.url));
const root = join(here, '..', '..');
const pillbox = process.env.PILLBOX_BIN ?? join(root, 'target', 'debug', 'pillbox');
const modules = join(here, 'node_modules');
// The platform packages' own binaries (the wrappers' postinstall steps are
// not needed); Codex through its node wrapper, which adds its helpers to PATH.
const CODEX = join(modules, '.bin', 'codex');
const CLAUDE = join(modules, '@anthropic-ai', 'claude-code-linux-x64', 'claude');
const OPENCODE = join(modules, 'opencode-linux-x64', 'bin', 'opencode');

let model;
let scratch;

before(async () => {
  for (const [name, path] of [['pillbox', pillbox], ['codex', CODEX], ['claude', CLAUDE], ['opencode', OPENCODE]]) {
    assert.ok(existsSync(path), `${name} is not at ${path} (cargo build -p pillbox; npm ci in tests/harness)`);
  }
  model = await startMockModel();
  scratch = mkdtempSync(join(tmpdir(), 'pillbox-harness-'));
});

after(async () => {
  await model?.close();
  if (scratch) rmSync(scratch, { recursive: true, force: true });
});

/**
 * Runs a program (asynchronously: the mock model answers in this process);
 * fails the test with its output unless it exits 0 within 180 s.
 */
function run(program, args, { cwd, env, allowFailure = false } = {}) {
  return new Promise((resolve, reject) => {
    const child = spawn(program, args, {
      cwd,
      env: { PATH: process.env.PATH, LANG: 'C.UTF-8', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const out = [];
    const err = [];
    child.stdout.on('data', (c) => out.push(c));
    child.stderr.on('data', (c) => err.push(c));
    const timer = setTimeout(() => child.kill('SIGKILL'), 180_000);
    child.on('error', (e) => {
      clearTimeout(timer);
      reject(e);
    });
    child.on('close', (status, signal) => {
      clearTimeout(timer);
      const r = { status, signal, stdout: Buffer.concat(out).toString('utf8'), stderr: Buffer.concat(err).toString('utf8') };
      if (!allowFailure && status !== 0) {
        reject(new assert.AssertionError({
          message: `${program} ${args.join(' ')} exited ${status} ${signal ?? ''}\nstdout: ${r.stdout}\nstderr: ${r.stderr}`,
        }));
        return;
      }
      resolve(r);
    });
  });
}

/** `pillbox checkpoint …`: its one JSON object. */
async function checkpoint(args, env, { allowFailure = false } = {}) {
  const r = await run(pillbox, ['checkpoint', ...args], { env, allowFailure });
  return JSON.parse(r.stdout.trim());
}

/** A fresh folder under the test's scratch folder. */
function dir(...parts) {
  const p = join(scratch, ...parts);
  mkdirSync(p, { recursive: true });
  return p;
}

/** A workspace with a file in it. */
function workspace(...parts) {
  const ws = dir(...parts);
  writeFileSync(join(ws, 'notes.txt'), 'a workspace file\n');
  return ws;
}

/** Packs `ws` with harness flags; unpacks on box B; returns both reports. */
async function carry(ws, harnessArgs, unpackArgs, envA, envB, into) {
  const packet = join(scratch, `${Math.random().toString(36).slice(2)}.tar`);
  const packed = await checkpoint(['pack', ws, '-o', packet, ...harnessArgs], envA);
  assert.equal(packed.schema, 'pillbox.checkpoint.pack/1');
  const bytes = readFileSync(packet);
  for (const secret of ['sk-mock-never-packed', 'sk-ant-never-packed']) {
    assert.ok(!bytes.includes(secret), `the packet holds ${secret}`);
  }
  const unpacked = await checkpoint(['unpack', packet, '--digest', packed.digest, '--into', into, ...unpackArgs], envB);
  assert.equal(readFileSync(join(into, 'notes.txt'), 'utf8'), 'a workspace file\n');
  return { packed, unpacked, packet };
}

/**
 * The request of the resumed turn (the last one that carries `second`)
 * holds the first turn: its prompt and the model's answer to it (one of
 * `said`: a harness may also have asked for a title with the prompt).
 */
function assertResumedWithHistory(requests, first, said, second) {
  const resumed = requests.filter((r) => JSON.stringify(r.body).includes(second));
  assert.ok(resumed.length > 0, `no request carried ${JSON.stringify(second)}: ${JSON.stringify(requests).slice(0, 2000)}`);
  const history = JSON.stringify(resumed.at(-1).body);
  assert.ok(history.includes(first), `the resumed request lacks the first prompt: ${history.slice(0, 3000)}`);
  assert.ok(said.some((a) => history.includes(a)), `the resumed request lacks the first answer (${said}): ${history.slice(0, 3000)}`);
}

/** The answers the model gave to the requests that carried `prompt`. */
function answersTo(prompt) {
  const said = model.requests.filter((r) => JSON.stringify(r.body).includes(prompt)).map((r) => answer(r.n));
  assert.ok(said.length > 0, `the model never saw ${prompt}`);
  return said;
}

function files(folder) {
  return readdirSync(folder, { recursive: true }).map(String);
}

describe('Codex CLI 0.171.0', () => {
  const codexHome = (box) => {
    const home = dir(box, 'codex-home');
    writeFileSync(join(home, 'config.toml'), `model = "mock-model"
model_provider = "mock"
[model_providers.mock]
name = "Mock"
base_url = "${model.url}/v1"
wire_api = "responses"
env_key = "MOCK_API_KEY"
`);
    return home;
  };
  const env = (box, home) => ({ HOME: dir(box, 'home'), CODEX_HOME: home, MOCK_API_KEY: 'dummy' });

  async function firstTurn(box, prompt) {
    const home = codexHome(box);
    const ws = workspace(box, 'work', 'project');
    const out = await run(CODEX, ['exec', '--json', '--skip-git-repo-check', '-s', 'read-only', prompt], { cwd: ws, env: env(box, home) });
    const thread = JSON.parse(out.stdout.split('\n')[0]).thread_id;
    assert.match(thread, /^[0-9a-f-]{36}$/);
    return { home, ws, thread, said: answersTo(prompt) };
  }

  async function resumeOnB(box, carried, thread, first, said) {
    const second = `second codex turn ${box}`;
    model.clear();
    await run(CODEX, ['exec', '--json', '--skip-git-repo-check', '-s', 'read-only', 'resume', thread, second], {
      cwd: carried.into,
      env: env(box, carried.home),
    });
    assertResumedWithHistory(model.requests, first, said, second);
  }

  test('a rollout resumes in a fresh CODEX_HOME with the workspace elsewhere', async () => {
    const first = 'first codex turn';
    const a = await firstTurn('codex-a', first);
    const homeB = codexHome('codex-b');
    const into = join(dir('codex-b', 'elsewhere'), 'ws');
    const { packed, unpacked } = await carry(a.ws, ['--harness', 'codex', '--thread', a.thread, '--codex-home', a.home],
      ['--codex-home', homeB], env('codex-a', a.home), env('codex-b', homeB), into);
    assert.equal(packed.harness.model, 'mock-model');
    assert.ok(unpacked.harness.rollout_path.startsWith(homeB));
    assert.ok(!files(homeB).some((f) => f.endsWith('.sqlite') || f.endsWith('auth.json')));
    await resumeOnB('codex-b', { into, home: homeB }, a.thread, first, a.said);
  });

  test('a compressed rollout (.jsonl.zst) is carried and resumes', async () => {
    const first = 'first codex turn, compressed later';
    const a = await firstTurn('codex-za', first);
    const rollout = files(a.home).find((f) => f.includes(a.thread) && f.endsWith('.jsonl'));
    await run('zstd', ['-q', '--rm', join(a.home, rollout)]);
    const homeB = codexHome('codex-zb');
    const into = join(dir('codex-zb', 'other'), 'ws');
    const { packed, unpacked } = await carry(a.ws, ['--harness', 'codex', '--thread', a.thread, '--codex-home', a.home],
      ['--codex-home', homeB], env('codex-za', a.home), env('codex-zb', homeB), into);
    assert.ok(packed.harness.member.endsWith('.jsonl.zst'));
    assert.equal(packed.harness.model, 'mock-model');
    assert.ok(unpacked.harness.rollout_path.endsWith('.jsonl.zst'));
    await resumeOnB('codex-zb', { into, home: homeB }, a.thread, first, a.said);
  });
});

describe('Claude Code 2.1.197', () => {
  const env = (box) => ({
    HOME: dir(box, 'home'),
    CLAUDE_CONFIG_DIR: dir(box, 'claude-config'),
    ANTHROPIC_BASE_URL: model.url,
    ANTHROPIC_API_KEY: 'dummy',
    DISABLE_AUTOUPDATER: '1',
    CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1',
    DISABLE_TELEMETRY: '1',
    DISABLE_ERROR_REPORTING: '1',
  });
  // Nine levels of 24-character folder names: the project folder name
  // passes Claude Code's 200 characters and gets its hashed suffix.
  const long = (...parts) => join(...parts, ...Array.from({ length: 9 }, (_, i) => `level_${i}_long_folder_nam`));

  async function roundTrip(box, wsParts, intoParts) {
    const first = `first claude turn ${box}`;
    const envA = env(`${box}-a`);
    const ws = workspace(...wsParts);
    const out = await run(CLAUDE, ['-p', first, '--output-format', 'json'], { cwd: ws, env: envA });
    const session = JSON.parse(out.stdout).session_id;
    const said = answersTo(first);
    const envB = env(`${box}-b`);
    const into = join(dir(...intoParts.slice(0, -1)), intoParts.at(-1));
    const { unpacked } = await carry(ws, ['--harness', 'claude', '--session', session, '--claude-config-dir', envA.CLAUDE_CONFIG_DIR],
      ['--claude-config-dir', envB.CLAUDE_CONFIG_DIR], envA, envB, into);
    assert.equal(unpacked.harness.restored, true);
    const second = `second claude turn ${box}`;
    model.clear();
    await run(CLAUDE, ['-p', '--resume', session, second, '--output-format', 'json'], { cwd: into, env: envB });
    assertResumedWithHistory(model.requests, first, said, second);
    return { ws, into, envA, envB };
  }

  test('a transcript resumes from the new workspace path in a fresh config dir', async () => {
    await roundTrip('claude', ['claude-a', 'work', 'project'], ['claude-b', 'moved', 'ws2']);
  });

  test('workspace paths past 200 characters: found under and restored to the hashed folder name', async () => {
    const { ws, into, envA, envB } = await roundTrip('claude-long', [long('claude-long-a', 'w')], [long('claude-long-b', 'x')]);
    // The folders the real binary made (box A) and pillbox made (box B)
    // both carry the hashed suffix.
    for (const [config, path] of [[envA.CLAUDE_CONFIG_DIR, ws], [envB.CLAUDE_CONFIG_DIR, into]]) {
      const folders = readdirSync(join(config, 'projects'));
      const plain = path.replace(/[^a-zA-Z0-9]/g, '-');
      assert.ok(plain.length > 200, `${path} is not long enough for the test`);
      assert.ok(folders.some((f) => f.startsWith(`${plain.slice(0, 200)}-`)), `${folders}`);
    }
  });
});

describe('OpenCode 1.18.33', () => {
  const box = (name) => {
    const home = dir(name, 'home');
    mkdirSync(join(home, '.config', 'opencode'), { recursive: true });
    writeFileSync(join(home, '.config', 'opencode', 'opencode.json'), JSON.stringify({
      provider: {
        mock: {
          npm: '@ai-sdk/anthropic',
          name: 'Mock',
          options: { baseURL: `${model.url}/v1`, apiKey: 'sk-mock-never-packed' },
          models: { 'mock-model': { name: 'mock' } },
        },
      },
      model: 'mock/mock-model',
      autoupdate: false,
      share: 'disabled',
    }));
    return { HOME: home, ANTHROPIC_API_KEY: 'sk-ant-never-packed' };
  };

  test('a session exported on box A is imported on box B and continues there', async () => {
    const envA = box('opencode-a');
    const ws = workspace('opencode-a', 'work', 'project');
    const first = 'first opencode turn';
    await run(OPENCODE, ['run', first], { cwd: ws, env: envA });
    const said = answersTo(first);
    const sessions = JSON.parse((await run(OPENCODE, ['session', 'list', '--format', 'json'], { cwd: ws, env: envA })).stdout);
    assert.equal(sessions.length, 1);
    const session = sessions[0].id;
    // Credentials beside the database, which must stay behind.
    const data = join(envA.HOME, '.local', 'share', 'opencode');
    assert.ok(existsSync(join(data, 'opencode.db')));
    writeFileSync(join(data, 'auth.json'), JSON.stringify({ anthropic: { type: 'api', key: 'sk-ant-never-packed' } }));

    const envB = box('opencode-b');
    const into = join(dir('opencode-b', 'somewhere', 'else'), 'ws2');
    const { packed, unpacked, packet } = await carry(ws,
      ['--harness', 'opencode', '--session', session, '--opencode-bin', OPENCODE],
      ['--opencode-import', '--opencode-bin', OPENCODE], envA, envB, into);
    assert.deepEqual(
      [packed.harness.kind, packed.harness.model, packed.harness.provider, packed.harness.version],
      ['opencode', 'mock-model', 'mock', '1.18.33'],
    );
    assert.equal(unpacked.harness.restored, true);
    assert.equal(unpacked.harness.rollout_path, null);
    assert.ok(unpacked.harness.messages >= 2);

    const cp = join(scratch, 'opencode-checkpoint.json');
    writeFileSync(cp, JSON.stringify(unpacked));
    const checked = JSON.parse((await run(pillbox, ['checkpoint', 'restore-check', '--checkpoint', cp, '--opencode-bin', OPENCODE],
      { env: envB })).stdout);
    assert.deepEqual(checked.resume, ['opencode', 'run', '--session', session]);

    const listed = JSON.parse((await run(OPENCODE, ['session', 'list', '--format', 'json'], { cwd: into, env: envB })).stdout);
    assert.equal(listed.find((s) => s.id === session)?.directory, into);
    const second = 'second opencode turn';
    model.clear();
    await run(OPENCODE, ['run', '--session', session, second], { cwd: into, env: envB });
    assertResumedWithHistory(model.requests, first, said, second);

    // Box B's copy has moved on (the resumed turn): importing the packet
    // again would mix its messages with the packet's, so unpack refuses and
    // writes nothing.
    const clash = join(scratch, 'opencode-b', 'clash');
    const refused = await checkpoint(['unpack', packet, '--digest', packed.digest, '--into', clash, '--opencode-import',
      '--opencode-bin', OPENCODE], envB, { allowFailure: true });
    assert.equal(refused.code, 'opencode_session_conflict');
    assert.ok(!existsSync(clash));
    // restore-check still accepts it: the copy holds the packet's messages.
    await run(pillbox, ['checkpoint', 'restore-check', '--checkpoint', cp, '--opencode-bin', OPENCODE], { env: envB });
  });

  test('restore in place with --discard-local gives the checkpoint\'s session exactly, not a mix with the copy here', async () => {
    buildWorker();
    const edge = await startEdge();
    try {
      const remote = ['--remote', edge.url];
      const flags = ['--opencode-bin', OPENCODE];
      const pillboxEnv = (env) => ({ ...env, PILLBOX_TOKEN: TOKEN });
      const ref = 'sessions/opencode/discard';
      const messages = async (env, cwd, session) => JSON.parse((await run(OPENCODE, ['export', session], { cwd, env })).stdout)
        .messages.map((m) => m.info.id);

      // Box A: a turn, saved.
      const envA = box('discard-a');
      const wsA = workspace('discard-a', 'work', 'project');
      const first = 'first turn before the discard';
      await run(OPENCODE, ['run', first], { cwd: wsA, env: envA });
      const session = JSON.parse((await run(OPENCODE, ['session', 'list', '--format', 'json'], { cwd: wsA, env: envA })).stdout)[0].id;
      await checkpoint(['save', wsA, ...remote, '--ref', ref, '--harness', 'opencode', '--session', session, ...flags],
        pillboxEnv(envA));

      // Box B: restored, a turn of its own, saved.
      const envB = box('discard-b');
      const wsB = join(dir('discard-b', 'elsewhere'), 'ws');
      await checkpoint(['restore', ref, ...remote, '--into', wsB, '--opencode-import', ...flags], pillboxEnv(envB));
      const onB = 'second turn, on box B';
      await run(OPENCODE, ['run', '--session', session, onB], { cwd: wsB, env: envB });
      await checkpoint(['save', wsB, ...remote, '--ref', ref, '--harness', 'opencode', '--session', session, ...flags],
        pillboxEnv(envB));
      const saved = await messages(envB, wsB, session);

      // Box A went its own way meanwhile.
      const onA = 'second turn, on box A';
      await run(OPENCODE, ['run', '--session', session, onA], { cwd: wsA, env: envA });
      const own = await messages(envA, wsA, session);
      assert.ok(own.some((id) => !saved.includes(id)), 'box A\'s copy did not go its own way');

      // Refused without --discard-local, the copy left as it was.
      const restore = ['restore', ref, ...remote, '--into', wsA, '--opencode-import', ...flags];
      const refused = await checkpoint(restore, pillboxEnv(envA), { allowFailure: true });
      assert.equal(refused.code, 'opencode_session_conflict');
      assert.deepEqual(await messages(envA, wsA, session), own);

      // With it: the checkpoint's messages, exactly (an import alone would
      // leave box A's beside them).
      const restored = await checkpoint([...restore, '--discard-local'], pillboxEnv(envA));
      assert.equal(restored.harness.messages, saved.length);
      assert.deepEqual(await messages(envA, wsA, session), saved);

      // The next turn on A continues box B's conversation, not box A's.
      const third = 'third turn, after the discard';
      model.clear();
      await run(OPENCODE, ['run', '--session', session, third], { cwd: wsA, env: envA });
      const resumed = model.requests.filter((r) => JSON.stringify(r.body).includes(third));
      assert.ok(resumed.length > 0, 'no request carried the third turn');
      const history = JSON.stringify(resumed.at(-1).body);
      assert.ok(history.includes(first) && history.includes(onB), `the history lacks box B's turns: ${history.slice(0, 3000)}`);
      assert.ok(!history.includes(onA), `the history still holds box A's own turn: ${history.slice(0, 3000)}`);
    } finally {
      await edge.stop();
    }
  });
});
