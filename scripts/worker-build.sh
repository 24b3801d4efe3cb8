#!/usr/bin/env bash
# Builds the pillbox Worker into worker/build/ (wasm + JS shim) for wrangler.
# wrangler runs it as the [build] command; run it by hand to build ahead.
#
# Nothing is downloaded: wasm-bindgen is the installed wasm-bindgen-cli
# (same version as the wasm-bindgen pinned in Cargo.lock), esbuild comes from
# node_modules, and wasm-opt is skipped (--no-opt).
#
# Skips the build when worker/build is newer than every source it depends
# on; PILLBOX_WORKER_FORCE_BUILD=1 builds anyway.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

# The inspector's static files are built elsewhere; wrangler only needs the
# directory to exist.
mkdir -p inspector/dist

out=worker/build/index.js
if [[ -z "${PILLBOX_WORKER_FORCE_BUILD:-}" && -f "$out" ]] &&
  [[ -z "$(find worker/src worker/Cargo.toml wire/src wire/Cargo.toml packet-core/src packet-core/Cargo.toml Cargo.lock -newer "$out" -print -quit)" ]]; then
  echo "worker-build: $out is up to date"
  exit 0
fi

esbuild="$root/node_modules/@esbuild/linux-x64/bin/esbuild"
if [[ ! -x "$esbuild" ]]; then
  echo "worker-build: $esbuild is missing: run \`npm ci\` at the repository root" >&2
  exit 1
fi
bindgen="${WASM_BINDGEN_BIN:-$(command -v wasm-bindgen || true)}"
if [[ -z "$bindgen" ]]; then
  echo "worker-build: wasm-bindgen is missing: cargo install wasm-bindgen-cli --version 0.2.130" >&2
  exit 1
fi

export WASM_BINDGEN_BIN="$bindgen"
export ESBUILD_BIN="${ESBUILD_BIN:-$esbuild}"
cd worker
exec worker-build --release --no-opt
