#!/usr/bin/env bash
# Measures the local Worker verifying a ~1 GiB packet uploaded in parts
# (720 files of 1 MiB and 3 of 100 MiB, incompressible). Prints wall time,
# workerd CPU time, workerd's peak RSS and the Worker's own wasm linear
# memory (Pillbox-Wasm-Memory-Bytes) as JSON on stdout (everything else goes
# to stderr). Needs ~4 GiB free in $TMPDIR, which holds the packet (unless
# PILLBOX_1GIB_PACKET names it) and the local R2/D1 state. bench/run.sh
# runs it as part of the benchmark suite.
#
#   bash scripts/worker-1gib.sh [platform|core]   (where the packet digest is hashed)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
bash scripts/worker-build.sh >&2
bash scripts/build-release.sh --quiet
packet="${PILLBOX_1GIB_PACKET:-${TMPDIR:-/tmp}/pillbox-1gib.pkt}"
if [[ ! -f "$packet" ]]; then
  echo "generating $packet" >&2
  "${CARGO_TARGET_DIR:-target}/release/examples/worker_fixtures" large "$packet" 720 3 >&2
fi
exec node scripts/worker-1gib.mjs "$packet" "${1:-platform}"
