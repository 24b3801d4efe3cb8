#!/usr/bin/env bash
# Runs every test of the project, after installing what a fresh machine
# lacks for them (scripts/setup.sh --for test: the main job's tools and the
# tests' own). Each step names itself; the first failure stops the run with
# a non-zero exit.
#
#   bash scripts/test.sh            everything
#   FUZZ_SECONDS=0 bash scripts/test.sh   skip the bounded fuzz run
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

step() { printf '\n==== %s\n' "$*"; }
started=$(date +%s)

bash scripts/setup.sh --for test

step "format"
cargo fmt --all -- --check

step "lints (native crates)"
cargo clippy --all-targets --locked -- -D warnings

step "lints (the Worker, wasm32)"
cargo clippy -p pillbox-worker --target wasm32-unknown-unknown --all-targets --locked -- -D warnings

step "packet-core builds with no std at all (wasm32v1-none) and for wasm32-unknown-unknown"
cargo build -p packet-core --target wasm32v1-none --locked
cargo build -p packet-core --target wasm32-unknown-unknown --locked

# The native tests include the schema check of every vector's manifest and
# the check that the adversarial corpus is what its generator writes.
step "native tests: core, vectors, CLI, inspector bindings, Worker logic"
cargo test --locked
cargo test -p pillbox-worker --locked

step "the API document: strict YAML, openapi-spec-validator, Redocly's lint, a TypeScript client generated from it compiles"
node --test tests/openapi/

step "wasm tests under node: vectors, refusals, adversarial corpus, inspector bindings"
export CARGO_TARGET_WASM32_UNKNOWN_UNKNOWN_RUNNER=wasm-bindgen-test-runner
cargo test -p packet-core --target wasm32-unknown-unknown --locked --test vectors --test refusals --test adversarial_wasm
cargo test -p packet-inspector-wasm --target wasm32-unknown-unknown --locked
unset CARGO_TARGET_WASM32_UNKNOWN_UNKNOWN_RUNNER

step "Worker bundles for deployment (wrangler deploy --dry-run)"
bash scripts/worker-build.sh
dry=$(mktemp -d)
npx --no-install wrangler deploy --dry-run --outdir "$dry" >"$dry/log" 2>&1 || { cat "$dry/log"; exit 1; }
rm -rf "$dry"

step "end-to-end: the Worker on workerd (wrangler dev, local R2 + D1) with HTTP clients and the pillbox binary"
cargo build --locked -p pillbox
node --test --test-concurrency=1 tests/e2e/

step "harness state end to end: Codex, Claude Code and OpenCode (the real CLIs, offline against a mock model) carried between two homes"
node --test --test-concurrency=1 tests/harness/

step "browser: the inspector in headless Chromium"
bash inspector/tests/run.sh

step "fuzzing, bounded"
if [ "${FUZZ_SECONDS:-20}" != 0 ]; then
  bash scripts/fuzz.sh "${FUZZ_SECONDS:-20}"
fi

step "benchmark smoke runs (tiny workspaces, one repetition, no targets)"
bash bench/run.sh --smoke
# The transfer benchmark on small workspaces (this repository's own
# node_modules, a clone of it, a 16 MiB rollout), three saves; its figures
# are printed, not checked.
node bench/transfer.mjs --quick --node-modules node_modules --dir "${TMPDIR:-/tmp}/pillbox-transfer-smoke" >/dev/null
cat "${TMPDIR:-/tmp}/pillbox-transfer-smoke/transfer-quick.md"

printf '\nall tests passed in %d s\n' $(( $(date +%s) - started ))
