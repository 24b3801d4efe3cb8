#!/usr/bin/env bash
# Builds, in release, the native programs the tests and benchmarks run:
# the pillbox CLI, the benchmark baselines, the fixture generators
# (packet-core's worker_fixtures, packet-inspector-wasm's fixtures) and the
# Worker's reference push client (push_body), in one cargo invocation. Cargo resolves features per invocation, so building
# these separately (or with `cargo run` of an example, which adds the
# dev-dependencies) compiles many shared crates twice; every test and
# benchmark calls this instead and runs the programs from
# target/release/ (CARGO_TARGET_DIR is honoured). Quick when they are up
# to date.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
exec cargo build --release --locked "$@" \
  -p pillbox -p bench-baselines -p packet-core -p packet-inspector-wasm -p pillbox-worker \
  --bins --example worker_fixtures --example fixtures --example push_body
