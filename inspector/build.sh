#!/usr/bin/env bash
# Builds the inspector page into inspector/dist/: packet-core compiled to
# wasm with its bindings, plus the static page. The Worker serves dist/ as
# static assets; any static file server (or none: file picker only) works too.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/.." && pwd)"
dist="$here/dist"

cd "$root"
cargo build --release --target wasm32-unknown-unknown -p packet-inspector-wasm
wasm="${CARGO_TARGET_DIR:-$root/target}/wasm32-unknown-unknown/release/packet_inspector_wasm.wasm"

rm -rf "$dist"
mkdir -p "$dist/pkg"
wasm-bindgen --target web --no-typescript --remove-name-section --remove-producers-section --out-dir "$dist/pkg" "$wasm"
cp "$here"/web/*.html "$here"/web/*.css "$here"/web/*.js "$here"/web/*.svg "$dist/"
echo "inspector: built $(du -sh "$dist" | cut -f1) into ${dist#"$root"/}"
