#!/usr/bin/env bash
# Runs the benchmark suite and writes docs/benchmarks.md and the scaling
# plots. Arguments go to bench/run.py (e.g. --smoke, --reps 3).
#
# As root, benchmark data lives on a fresh tmpfs so that unpacking 100,000
# files and deleting them between runs does not slow the disk down for the
# runs that follow; otherwise under $BENCH_DATA or a temporary directory.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -q -p pillbox -p bench-baselines
data=${BENCH_DATA:-}
mounted=
if [ -z "$data" ]; then
  data=$(mktemp -d /tmp/pillbox-bench.XXXXXX)
  if [ "$(id -u)" = 0 ] && [ "${1:-}" != "--smoke" ] && mount -t tmpfs -o size=12g tmpfs "$data" 2>/dev/null; then
    mounted=1
  fi
fi
cleanup() { [ -n "$mounted" ] && umount "$data"; rm -rf "$data"; }
trap cleanup EXIT
python3 bench/run.py --data "$data" "$@"
