// The Codex rollout the benchmarks save as harness state: generated once
// per size by bench/genrollout.py (kept in the benchmark's folder) and
// copied into a Codex home at the dated path the Codex adapter reads.
import { spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, renameSync } from 'node:fs';
import { dirname, join } from 'node:path';

/** The thread id every benchmark's rollout belongs to. */
export const THREAD = '0199a213-81c0-7800-8aa1-bbab2a035a53';

/** The rollout's path inside a Codex home. */
export const ROLLOUT_PATH = `sessions/2026/11/30/rollout-2026-11-30T01-02-03-${THREAD}.jsonl`;

/** Its member path in a packet (`harness/codex/` + ROLLOUT_PATH). */
export const ROLLOUT_MEMBER = `harness/codex/${ROLLOUT_PATH}`;

/**
 * A `mib` MiB rollout (generated into `cacheDir` if not there yet) copied
 * into the Codex home `home`; returns the copy's path. `log` reports a
 * generation.
 */
export function placeRollout(cacheDir, mib, home, log = () => {}) {
  const generated = join(cacheDir, `rollout-${mib}.jsonl`);
  if (!existsSync(generated)) {
    log(`generating a ${mib} MiB rollout`);
    mkdirSync(cacheDir, { recursive: true });
    const r = spawnSync('python3', [join(import.meta.dirname, 'genrollout.py'), `${generated}.tmp`, String(mib)], { stdio: ['ignore', 'ignore', 'inherit'] });
    if (r.status !== 0) throw new Error(`bench/genrollout.py failed (${r.status})`);
    renameSync(`${generated}.tmp`, generated);
  }
  const rollout = join(home, ROLLOUT_PATH);
  mkdirSync(dirname(rollout), { recursive: true });
  cpSync(generated, rollout);
  return rollout;
}
