"""Validates manifests against one version's schema,
proto/pillbox/session-packet-2.schema.json (or -1 for /1 manifests).

    python3 check_schema.py SCHEMA DIR

Every `valid-*.json` in DIR must validate and every `invalid-*.json` must
not. Prints one line per file and exits non-zero on any disagreement.
Needs the `jsonschema` package (PyPI), 4.18 or newer for draft 2020-12.
"""

import json
import pathlib
import sys

import jsonschema


def main() -> int:
    schema_path, folder = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
    schema = json.loads(schema_path.read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator.check_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)
    failures = 0
    files = sorted(folder.glob("*.json"))
    if not files:
        print(f"no manifests in {folder}")
        return 1
    for path in files:
        instance = json.loads(path.read_bytes())
        errors = [e.message for e in validator.iter_errors(instance)]
        expect_valid = path.name.startswith("valid-")
        ok = (not errors) if expect_valid else bool(errors)
        verdict = "ok" if ok else "WRONG"
        detail = errors[0][:160] if errors else "valid"
        print(f"{verdict} {path.name}: {detail}")
        failures += not ok
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
