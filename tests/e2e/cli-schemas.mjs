// The JSON objects the `pillbox` binary prints, checked against their
// schemas in proto/cli/ (Draft 2020-12, with Python's `jsonschema`, which
// scripts/setup.sh installs).
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';

import { ROOT } from './edge.mjs';

const PROGRAM = `
import json, pathlib, sys
import jsonschema, referencing
root = pathlib.Path(sys.argv[1])
resources = []
for f in root.glob("*.schema.json"):
    doc = json.loads(f.read_text(encoding="utf-8"))
    resources.append((f.name, referencing.Resource.from_contents(doc)))
registry = referencing.Registry().with_resources(resources)
failures = []
for item in json.load(sys.stdin):
    schema = json.loads((root / item["file"]).read_text(encoding="utf-8"))
    v = jsonschema.Draft202012Validator(schema, registry=registry)
    for e in v.iter_errors(item["value"]):
        failures.append(f'{item["file"]}: {e.message} in {json.dumps(item["value"])[:300]}')
print("\\n".join(failures))
sys.exit(1 if failures else 0)
`;

/** Asserts that every `{ file, value }` printed matches the schema `file` of proto/cli/. */
export function assertMatchSchemas(printed) {
  const r = spawnSync('python3', ['-c', PROGRAM, join(ROOT, 'proto/cli')], { input: JSON.stringify(printed), encoding: 'utf8' });
  assert.equal(r.status, 0, r.stdout + r.stderr);
}
