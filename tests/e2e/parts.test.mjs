// How a delta push cuts its parts (docs/transfer.md, "Delta push", step
// 4), with the real `pillbox` binary against the Worker under `wrangler
// dev --local` whose parts are 1 MiB as sent (`PUSH_PART_BYTES`; 64 MiB
// raw): a compressible body of 4 MiB goes in one part of its own instead
// of four, and an incompressible one of 3 MiB, larger than the limit once
// compressed, is cut again into ordinary parts numbered after the others.
// Both packets are stored with no retry and pull back byte for byte.
//
// Run: node --test tests/e2e/parts.test.mjs
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';

import { PILLBOX, TOKEN, buildRelease, buildWorker, startEdge } from './edge.mjs';
import { startProxy } from './proxy.mjs';

const MIB = 1 << 20;
const REF = 'sessions/parts/lone';

let edge;
let store;
let work;

before(async () => {
  buildRelease();
  buildWorker();
  work = mkdtempSync(join(tmpdir(), 'pillbox-e2e-parts-'));
  edge = await startEdge({ PUSH_PART_BYTES: String(MIB) });
  store = await startProxy(edge.url);
}, { timeout: 900_000 });

after(async () => {
  await store?.stop();
  await edge?.stop();
  if (work) rmSync(work, { recursive: true, force: true });
});

function pillbox(args) {
  const env = { ...process.env, PILLBOX_TOKEN: TOKEN, XDG_STATE_HOME: join(work, 'state'), XDG_CACHE_HOME: join(work, 'cache') };
  for (const k of ['CODEX_HOME', 'CLAUDE_CONFIG_DIR', 'PILLBOX_REMOTE']) delete env[k];
  const r = spawnSync(PILLBOX, ['checkpoint', ...args, '--quiet'], { encoding: 'utf8', env, maxBuffer: 1 << 26 });
  assert.equal(r.status, 0, `pillbox ${args.join(' ')}: ${r.stdout}${r.stderr}`);
  return JSON.parse(r.stdout);
}

/** The part numbers `PUT` since `mark` (the proxy's log), in order. */
async function partsSince(mark) {
  return (await store.log()).slice(mark)
    .filter((r) => r.method === 'PUT' && /\/parts\/\d+$/.test(r.path))
    .map((r) => ({ number: Number(/\/parts\/(\d+)$/.exec(r.path)[1]), status: r.status, bytes: r.body_bytes }));
}

/** Pushes workspace `ws` as packet `name` to REF; its report and the parts sent. */
async function push(ws, name) {
  const file = join(work, `${name}.tar`);
  pillbox(['pack', ws, '-o', file]);
  const mark = (await store.log()).length;
  const report = pillbox(['push', file, '--remote', store.url, '--ref', REF]);
  assert.equal(report.mode, 'delta');
  assert.equal(report.uploaded, true);
  assert.equal(report.retries, 0, 'no request was sent twice');
  const parts = await partsSince(mark);
  assert.equal(parts.length, report.delta.parts_sent);
  assert.ok(parts.every((p) => p.status === 200), JSON.stringify(parts));
  const out = join(work, `${name}-pulled.tar`);
  pillbox(['pull', REF, '--remote', store.url, '-o', out]);
  assert.ok(readFileSync(out).equals(readFileSync(file)), 'the packet pulls back byte for byte');
  return { report, parts };
}

test('a body larger than a part has a part of its own, cut again when it is larger than the limit once compressed', { timeout: 600_000 }, async () => {
  const ws = join(work, 'ws');
  mkdirSync(ws);
  writeFileSync(join(ws, 'a.txt'), 'a small file\n');
  // 4 MiB of lines that differ only in a number: a few hundred KB once
  // compressed.
  const text = "the agent read the file, ran the tests and wrote the next change to the workspace's log; ";
  const lines = [];
  for (let size = 0, i = 0; size < 4 * MIB; i += 1) {
    const line = `${i % 1000} ${text}${text}\n`;
    lines.push(line);
    size += line.length;
  }
  writeFileSync(join(ws, 'log.txt'), lines.join('').slice(0, 4 * MIB));
  const first = await push(ws, 'first');
  // Parts of 1 MiB raw would have carried the log in four or more.
  assert.ok(first.parts.length <= 2, `the log went in a part of its own: ${JSON.stringify(first.parts)}`);
  assert.ok(first.parts.some((p) => p.bytes < MIB && first.report.delta.chunk_bytes > 3 * MIB), JSON.stringify(first));

  // 3 MiB that do not compress: the part of its own would be 3 MiB as
  // sent, over the limit, so it goes in parts of at most 1 MiB.
  writeFileSync(join(ws, 'noise.bin'), randomBytes(3 * MIB));
  const second = await push(ws, 'second');
  assert.ok(second.parts.length >= 3, JSON.stringify(second.parts));
  assert.ok(second.parts.every((p) => p.bytes <= MIB + (12 + 41 * 64)), `every part within the limit: ${JSON.stringify(second.parts)}`);
  const numbers = second.parts.map((p) => p.number);
  assert.equal(new Set(numbers).size, numbers.length, `no part number twice: ${numbers}`);
});
