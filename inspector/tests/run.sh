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
cargo run --quiet --release -p packet-inspector-wasm --example fixtures -- inspector/tests/out/packets --big 24
node --test --test-concurrency=1 inspector/tests/inspector.test.mjs inspector/tests/edge.test.mjs
