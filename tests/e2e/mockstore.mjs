// Starts the stand-in store (native-cli/examples/mock_store.rs) that
// serves the delta transfer routes of docs/transfer.md until the Worker
// does; returns { url, log, fail, stop }.
import { spawn, spawnSync } from 'node:child_process';
import { join } from 'node:path';

import { ROOT, TARGET, TOKEN } from './edge.mjs';

export function buildMockStore() {
  const b = spawnSync('cargo', ['build', '--quiet', '--release', '-p', 'pillbox', '--example', 'mock_store'], { cwd: ROOT, encoding: 'utf8' });
  if (b.status !== 0) throw new Error(`cargo build of the mock store failed:\n${b.stderr}`);
}

export async function startMockStore(args = []) {
  const child = spawn(join(TARGET, 'release/examples/mock_store'), ['--token', TOKEN, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  const url = await new Promise((ok, fail) => {
    const timer = setTimeout(() => fail(new Error(`the mock store did not start:\n${out}`)), 10_000);
    child.stdout.on('data', (d) => {
      out += d;
      const m = /listening on (http:\/\/\S+)/.exec(out);
      if (m) { clearTimeout(timer); ok(m[1]); }
    });
    child.stderr.on('data', (d) => { out += d; });
    child.once('exit', (code) => fail(new Error(`the mock store exited (${code}):\n${out}`)));
  });
  child.removeAllListeners('exit');
  const log = async () => (await fetch(`${url}/__mock/log`)).json();
  const fail = async (path, times = 1) => {
    const r = await fetch(`${url}/__mock/fail?path=${encodeURIComponent(path)}&times=${times}`, { method: 'POST' });
    if (r.status !== 204) throw new Error(`fail hook: ${r.status}`);
  };
  const stop = () => new Promise((ok) => {
    if (child.exitCode !== null) { ok(); return; }
    child.once('exit', ok);
    child.kill('SIGTERM');
  });
  return { url, log, fail, stop };
}
