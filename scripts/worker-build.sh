#!/usr/bin/env bash
# Builds the pillbox Worker into worker/build/ (index.js + index_bg.wasm)
# for wrangler, which runs it as the [build] command; run it by hand to
# build ahead. The crate is compiled to wasm32 by cargo, then
# scripts/worker-bundle.mjs runs wasm-bindgen and bundles the glue with the
# checked-in entry worker/js/shim.js by esbuild: the same files worker-build
# 0.8.7 makes (docs/worker.md, "Build, run, test"), without compiling it.
#
# Nothing is downloaded: wasm-bindgen is the installed wasm-bindgen-cli
# (same version as the wasm-bindgen pinned in Cargo.lock), esbuild comes from
# node_modules, and wasm-opt is not run (worker/Cargo.toml).
#
# Skips the build when worker/build is newer than every source it depends
# on; PILLBOX_WORKER_FORCE_BUILD=1 builds anyway.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

# The inspector's static files are built elsewhere; wrangler only needs the
# directory to exist.
mkdir -p inspector/dist

out=worker/build
wasm="${CARGO_TARGET_DIR:-$root/target}/wasm32-unknown-unknown/release/pillbox_worker.wasm"
# Up to date: both files there, newer than every source, and the wasm cargo
# built them from still there (tests/e2e/bundle.test.mjs reads it).
if [[ -z "${PILLBOX_WORKER_FORCE_BUILD:-}" && -f "$out/index.js" && -f "$out/index_bg.wasm" && -f "$wasm" ]] &&
  [[ -z "$(find worker/src worker/js worker/Cargo.toml wire/src wire/Cargo.toml packet-core/src packet-core/Cargo.toml \
    Cargo.lock scripts/worker-build.sh scripts/worker-bundle.mjs -newer "$out/index.js" -print -quit)" ]]; then
  echo "worker-build: $out/index.js is up to date"
  exit 0
fi

esbuild="$root/node_modules/@esbuild/linux-x64/bin/esbuild"
if [[ -z "${ESBUILD_BIN:-}" && ! -x "$esbuild" ]]; then
  echo "worker-build: $esbuild is missing: run \`npm ci\` at the repository root" >&2
  exit 1
fi
if [[ -z "${WASM_BINDGEN_BIN:-}" ]] && ! command -v wasm-bindgen >/dev/null; then
  echo "worker-build: wasm-bindgen is missing: bash scripts/setup.sh --for main (it installs the wasm-bindgen-cli of Cargo.lock's wasm-bindgen)" >&2
  exit 1
fi

# WASM_BINDGEN_USE_JS_SYS: wasm-bindgen's macros expand async exports with
# js-sys's futures, as worker-build has them do. Cargo does not track it,
# so every build of the Worker sets it.
WASM_BINDGEN_USE_JS_SYS=1 cargo build --lib --release --target wasm32-unknown-unknown -p pillbox-worker --locked
node scripts/worker-bundle.mjs "$wasm" "$out"
echo "worker-build: built $out/index.js and $out/index_bg.wasm"
