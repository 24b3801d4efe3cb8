#!/usr/bin/env bash
# Writes .wrangler-prebuilt.toml at the repository root: wrangler.toml
# without its [build] table, for the runs of `wrangler dev` that build the
# Worker first (scripts/main.sh, the end-to-end tests, the benchmarks), and
# prints its path. With a [build] command, the wrangler pinned here runs the
# command again once its file watcher is ready, which reloads the Worker
# while it starts and now and then leaves "The Workers runtime failed to
# start" (workers-sdk issue 7934); a run with nothing to watch cannot race.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out="$root/.wrangler-prebuilt.toml"
tmp="$(mktemp "$out.XXXXXX")"
# Every line but the [build] table's (it ends at the next blank line).
awk '/^\[build\]$/ { skip = 1; next } skip && /^$/ { skip = 0; next } !skip' "$root/wrangler.toml" >"$tmp"
if grep -q '^\[build\]' "$tmp"; then
  echo "wrangler-prebuilt: could not remove [build] from wrangler.toml" >&2
  rm -f "$tmp"
  exit 1
fi
mv -f "$tmp" "$out"
echo "$out"
