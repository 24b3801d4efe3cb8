// The soak's short run (tests/soak/soak.mjs, in a process of its own): 4
// sessions × 6 turns at once against wrangler dev, with the clean-up run
// throughout, saves killed and run again, writers racing compare-and-swap
// and old packets deleted. Nothing may fail on the honest path; its
// figures are printed. The long run: node tests/soak/soak.mjs --sessions 16
// --turns 50 (docs/benchmarks.md, "Soak").
//
// Run: node --test --test-concurrency=1 tests/e2e/soak.test.mjs
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';

import { ROOT } from './edge.mjs';

test('4 sessions × 6 turns: every save lands, every restore is the workspace, nothing in use is collected', { timeout: 1_200_000 }, (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'pillbox-e2e-soak-'));
  const json = join(dir, 'soak.json');
  try {
    const r = spawnSync(process.execPath, [join(ROOT, 'tests/soak/soak.mjs'), '--sessions', '4', '--turns', '6', '--dir', join(dir, 'run'), '--json', json],
      { cwd: ROOT, encoding: 'utf8', maxBuffer: 1 << 26 });
    assert.equal(r.status, 0, `the soak failed (${r.status}):\n${r.stdout}\n${r.stderr.slice(-4000)}`);
    const figures = JSON.parse(readFileSync(json, 'utf8'));
    console.log(`soak (4 × 6): ${JSON.stringify(figures)}`);
    t.diagnostic(`soak: ${figures.turns} turns, ${figures.error_count} errors, ${figures.retries} retries `
      + `(${figures.kills} saves killed, ${figures.race_conflicts} races lost), ${figures.deletes} packets deleted, ${figures.cleanups} clean-ups; `
      + `save p50/p95/p99 ${figures.save.p50_ms}/${figures.save.p95_ms}/${figures.save.p99_ms} ms, `
      + `restore ${figures.restore.p50_ms}/${figures.restore.p95_ms}/${figures.restore.p99_ms} ms`);
    assert.equal(figures.error_count, 0, figures.errors.join('\n'));
    assert.equal(figures.turns, 4 * 6);
    assert.equal(figures.race_conflicts, figures.races, 'every race had one winner and one ref_conflict');
    assert.ok(figures.races > 0 && figures.killed_then_rerun > 0 && figures.deletes > 0 && figures.cleanups > 0, 'every disturbance happened');
    assert.ok(figures.packets_verified >= 4 * 6, 'every round verified what the refs name');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
