// The adversarial corpus (tests/adversarial/cases.json) for the Worker's
// end-to-end tests: every case with its bytes (gzip-stored cases
// decompressed) and the digest to upload it under.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { gunzipSync } from 'node:zlib';

import { ROOT, sha256 } from './edge.mjs';

const DIR = join(ROOT, 'tests/adversarial');

/** [{id, group, expect, bytes, digest}] in the table's order. */
export function corpusCases() {
  const table = JSON.parse(readFileSync(join(DIR, 'cases.json'), 'utf8'));
  return table.cases.map((c) => {
    const stored = readFileSync(join(DIR, c.file));
    const bytes = c.file.endsWith('.gz') ? gunzipSync(stored) : stored;
    if (sha256(bytes) !== `sha256:${c.sha256}`) throw new Error(`${c.id}: bytes differ from cases.json`);
    return { ...c, bytes, digest: c.expected_digest ?? c.digest };
  });
}

/** The golden vectors: [{name, bytes, digest}]. */
export function vectorPackets() {
  const digests = JSON.parse(readFileSync(join(ROOT, 'tests/vectors/digests.json'), 'utf8'));
  return Object.entries(digests).map(([name, digest]) => ({
    name,
    digest,
    bytes: readFileSync(join(ROOT, `tests/vectors/packets/${name}.packet`)),
  }));
}
