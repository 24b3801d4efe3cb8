#!/usr/bin/env bash
# A workspace of real packages, as their registries publish them, packed
# with pillbox's default secret policy: their docs and tests quote PEM
# headers, example keys and real test keys, and the pack must not be
# refused for them (0 false refusals expected).
#
#   bash bench/real_packages.sh [--small] [--pillbox BIN] [DIR]
#
# The full workspace: npm `next jest webpack eslint @babel/core react`,
# PyPI `requests cryptography paramiko boto3 google-auth pyjwt`
# (pip install --target) and the crates.io sources of `rustls ring ureq`
# (from the cargo registry, where a build of pillbox put them). --small
# (the CI sample): npm `react jsonwebtoken ssh2`, PyPI `requests pyjwt`,
# and the same crates. Prints one JSON object: what was packed, the
# secrets found and where (all in published packages), and whether the
# pack was refused.
set -euo pipefail
cd "$(dirname "$0")/.."
small= bin= dir=
while [ $# -gt 0 ]; do
  case "$1" in
    --small) small=1 ;;
    --pillbox) bin="$2"; shift ;;
    *) dir="$1" ;;
  esac
  shift
done
target="${CARGO_TARGET_DIR:-$PWD/target}"
[ -n "$bin" ] || { bash scripts/build-release.sh -q; bin="$target/release/pillbox"; }
[ -n "$dir" ] || dir=$(mktemp -d /tmp/pillbox-real-packages.XXXXXX)
ws="$dir/ws"
mkdir -p "$ws/js" "$ws/py" "$ws/crates"

if [ -n "$small" ]; then
  npm_pkgs="react@19.3.1 jsonwebtoken@9.0.3 ssh2@1.17.0"
  py_pkgs="requests==2.34.2 PyJWT==2.15.1"
else
  npm_pkgs="next@16.4.6 jest@30.5.2 webpack@5.113.0 eslint@10.15.0 @babel/core@7.29.16 react@19.3.1"
  py_pkgs="requests==2.34.2 cryptography==50.0.2 paramiko==5.1.0 boto3==1.44.8 google-auth==2.63.0 PyJWT==2.15.1"
fi
if [ ! -d "$ws/js/node_modules" ]; then
  echo '{"name":"real-packages","version":"1.0.0","private":true}' > "$ws/js/package.json"
  (cd "$ws/js" && npm install --no-audit --no-fund --ignore-scripts --loglevel=error $npm_pkgs >&2)
fi
if [ -z "$(ls -A "$ws/py")" ]; then
  python3 -m pip install --quiet --disable-pip-version-check --no-compile --target "$ws/py" $py_pkgs >&2
fi
registry="${CARGO_HOME:-$HOME/.cargo}/registry/src"
for crate in rustls ring ureq; do
  # The newest version of each the registry holds.
  src=$(ls -d "$registry"/*/"$crate"-[0-9]* 2>/dev/null | sort -V | tail -n 1 || true)
  if [ -z "$src" ]; then
    echo "no $crate sources in $registry: build pillbox first (cargo build)" >&2
    exit 1
  fi
  [ -d "$ws/crates/$(basename "$src")" ] || cp -R "$src" "$ws/crates/"
done

files=$(find "$ws" -type f | wc -l)
bytes=$(du -sb "$ws" | cut -f1)
start=$(date +%s.%N)
set +e
"$bin" checkpoint pack "$ws" -o "$dir/real.packet" --quiet > "$dir/pack.json"
status=$?
set -e
seconds=$(echo "$(date +%s.%N) - $start" | bc)
python3 - "$dir/pack.json" "$status" "$files" "$bytes" "$seconds" <<'EOF'
import json, sys
report = json.load(open(sys.argv[1]))
status, files, size, seconds = int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5])
refused = status != 0
found = report.get("secrets", [])
out = {
    "files": files,
    "bytes": size,
    "pack_seconds": round(seconds, 2),
    "refused": refused,
    # A refusal here is a false one: every file is a published package's.
    "false_refusals": len(report["message"].split(", ")) if refused else 0,
    "refusal": report if refused else None,
    "secrets_found": len(found),
    "secrets_by_action": {a: sum(1 for s in found if s["action"] == a) for a in sorted({s["action"] for s in found})},
    "secrets": [f'{s["path"]}:{s["line"]} {s["rule"]}' for s in found],
}
print(json.dumps(out))
sys.exit(1 if refused else 0)
EOF
