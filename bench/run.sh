#!/usr/bin/env bash
# Runs the benchmark suite and writes docs/benchmarks.md and the scaling
# plots. Arguments go to bench/run.py (e.g. --smoke, --reps 3, --skip-worker).
#
# Builds what the parts that run need: the CLI, the baselines and the
# fixture generators (scripts/build-release.sh, one cargo invocation); for
# the wasm parts packet-inspector-wasm for wasm32 bound for node, the
# inspector page (inspector/build.sh) and the Worker
# (scripts/worker-build.sh). CARGO_TARGET_DIR is honoured.
#
# As root, benchmark data lives on a fresh tmpfs so that unpacking 100,000
# files and deleting them between runs does not slow the disk down for the
# runs that follow; otherwise under $BENCH_DATA or a temporary directory.
set -euo pipefail
cd "$(dirname "$0")/.."
target="${CARGO_TARGET_DIR:-$PWD/target}"
smoke= only_edge= skip_wasm= skip_browser= skip_worker=
for a in "$@"; do
  case "$a" in
    --smoke) smoke=1 ;;
    --only-edge) only_edge=1 ;;
    --skip-wasm-node) skip_wasm=1 ;;
    --skip-browser) skip_browser=1 ;;
    --skip-worker) skip_worker=1 ;;
  esac
done
# The smoke run measures only the wasm reader under node among the wasm parts.
[ -n "$smoke" ] && skip_browser=1 skip_worker=1

bash scripts/build-release.sh -q
if [ -z "$skip_wasm" ]; then
  # The build inspector/build.sh makes, bound for node instead of the web.
  cargo build --release -q --target wasm32-unknown-unknown -p packet-inspector-wasm
  wasm-bindgen --target nodejs --out-dir "$target/bench-wasm-node" \
    "$target/wasm32-unknown-unknown/release/packet_inspector_wasm.wasm"
fi
[ -n "$skip_browser" ] || bash inspector/build.sh >&2
if [ -z "$skip_worker" ]; then
  bash scripts/worker-build.sh >&2
fi

data=${BENCH_DATA:-}
mounted=
if [ -z "$data" ]; then
  data=$(mktemp -d /tmp/pillbox-bench.XXXXXX)
  if [ "$(id -u)" = 0 ] && [ -z "$smoke" ] && mount -t tmpfs -o size=12g tmpfs "$data" 2>/dev/null; then
    mounted=1
  fi
fi
cleanup() { [ -n "$mounted" ] && umount "$data"; rm -rf "$data"; }
trap cleanup EXIT
python3 bench/run.py --data "$data" "$@"
