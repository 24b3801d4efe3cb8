// A scanner that refuses real projects is useless: a workspace of real
// packages installed from npm and PyPI and crate sources from the cargo
// registry (bench/real_packages.sh --small: react, jsonwebtoken and ssh2,
// whose tests ship 40 real private keys; requests and PyJWT; rustls, ring
// and ureq) must pack with the default secret policy, every key it holds
// reported as a published package's. The same key outside a package is
// refused. Downloads from the registries.
//
// Run: node --test tests/e2e/real-packages.test.mjs
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { copyFileSync, mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';

import { PILLBOX, ROOT, buildRelease } from './edge.mjs';


test('real packages pack with no false refusal; a published key outside its package is refused', { timeout: 600_000 }, () => {
  buildRelease();
  const dir = mkdtempSync(join(tmpdir(), 'pillbox-real-packages-'));
  const r = spawnSync('bash', ['bench/real_packages.sh', '--small', '--pillbox', PILLBOX, dir],
    { cwd: ROOT, encoding: 'utf8', maxBuffer: 1 << 26 });
  assert.equal(r.status, 0, `${r.stdout}\n${r.stderr}`);
  const out = JSON.parse(r.stdout.trim().split('\n').pop());
  assert.equal(out.refused, false, JSON.stringify(out.refusal));
  assert.equal(out.false_refusals, 0);
  assert.ok(out.files > 500, `${out.files} files`);
  // Their test keys were found, and packed as published packages'.
  assert.ok(out.secrets_found >= 10, JSON.stringify(out.secrets));
  assert.deepEqual(Object.keys(out.secrets_by_action), ['published']);
  const pack = JSON.parse(readFileSync(join(dir, 'pack.json'), 'utf8'));
  const key = pack.secrets.find((s) => s.path.includes('node_modules/ssh2/test/fixtures/'));
  assert.ok(key, 'ssh2 test keys are found');
  // The same bytes in the user's own tree are a leaked key.
  const ws = join(dir, 'ws');
  copyFileSync(join(ws, key.path.slice('workspace/'.length)), join(ws, 'id_deploy'));
  const refused = spawnSync(PILLBOX, ['checkpoint', 'pack', ws, '-o', join(dir, 'p2.packet'), '--quiet'], { encoding: 'utf8' });
  assert.equal(refused.status, 5, refused.stdout);
  const err = JSON.parse(refused.stdout);
  assert.equal(err.code, 'secret_in_workspace');
  assert.match(err.message, /workspace\/id_deploy:1 private-key/);
});
