#!/usr/bin/env bash
# Installs everything a fresh machine lacks to build and test the project.
# Idempotent: each step is skipped when its result is already there.
# Needs: the Rust toolchain (rustup), node 20 + npm, python 3.11, gcc, git.
set -euo pipefail
cd "$(dirname "$0")/.."

WASM_BINDGEN_VERSION=0.2.130
WORKER_BUILD_VERSION=0.8.7
CARGO_FUZZ_VERSION=0.13.2

step() { printf '\n== %s\n' "$*" >&2; }

step "rust targets and components"
installed_targets=$(rustup target list --installed)
for t in wasm32-unknown-unknown wasm32v1-none; do
  grep -qx "$t" <<<"$installed_targets" || rustup target add "$t"
done
rustup component list --installed | grep -q '^clippy' || rustup component add clippy
rustup component list --installed | grep -q '^rustfmt' || rustup component add rustfmt

step "wasm-bindgen-cli $WASM_BINDGEN_VERSION"
if ! wasm-bindgen --version 2>/dev/null | grep -q " $WASM_BINDGEN_VERSION"; then
  # No --locked: its lockfile pins a crate release the registry no longer serves.
  cargo install wasm-bindgen-cli --version "$WASM_BINDGEN_VERSION" --force
fi

step "worker-build $WORKER_BUILD_VERSION"
if ! worker-build --version 2>/dev/null | grep -q "$WORKER_BUILD_VERSION"; then
  cargo install worker-build --version "$WORKER_BUILD_VERSION" --locked --force
fi

step "cargo-fuzz $CARGO_FUZZ_VERSION"
if ! cargo fuzz --version 2>/dev/null | grep -q "$CARGO_FUZZ_VERSION"; then
  cargo install cargo-fuzz --version "$CARGO_FUZZ_VERSION" --locked --force
fi

step "Debian packages"
need_apt=()
command -v chromium >/dev/null || need_apt+=(chromium)
command -v chromedriver >/dev/null || need_apt+=(chromium-driver)
command -v hyperfine >/dev/null || need_apt+=(hyperfine)
[ -x /usr/bin/time ] || need_apt+=(time)
command -v tar >/dev/null || need_apt+=(tar)
if [ ${#need_apt[@]} -gt 0 ]; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

step "npm packages"
if [ -f package-lock.json ]; then
  if [ ! -d node_modules ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
    npm ci --no-audit --no-fund
  fi
fi

step "python packages"
python3 -c 'import jsonschema' 2>/dev/null || python3 -m pip install --quiet 'jsonschema==4.26.0'

echo "setup: done" >&2
