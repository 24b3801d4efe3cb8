#!/usr/bin/env bash
# Runs every fuzz target of packet-core for a bounded time and records
# executions and findings.
#
#   scripts/fuzz.sh SECONDS          # each target runs SECONDS seconds
#
# Targets (packet-core/fuzz/fuzz_targets): reader (arbitrary bytes and
# block-level mutations of the golden vectors), reader_structured (a
# structure-aware mutator that rewrites member sets and re-encodes them),
# paths (the path rules). Seeds: the golden vectors and the adversarial
# corpus. Stable toolchain, no sanitizer: packet-core has no unsafe code.
#
# The targets are built by cargo itself with the instrumentation flags
# `cargo fuzz build -s none` (cargo-fuzz 0.13) passes, and run as libFuzzer
# binaries with the arguments `cargo fuzz run` gives them, so a bounded run
# needs no cargo-fuzz (only a C++ compiler, for libfuzzer-sys). To work on a
# finding, cargo-fuzz is the tool (packet-core/fuzz/README.md).
#
# Prints one line per target (executions, new crash artifacts) and writes
# the same to packet-core/fuzz/target/fuzz-summary.txt. Exits 1 if any
# target found a crash: its input is in packet-core/fuzz/artifacts/<target>/.
set -euo pipefail

seconds="${1:?usage: scripts/fuzz.sh SECONDS}"
repo="$(cd "$(dirname "$0")/.." && pwd)"
fuzz="$repo/packet-core/fuzz"
cd "$fuzz"

mkdir -p corpus/reader corpus/reader_structured corpus/paths target
for target in reader reader_structured; do
  cp "$repo"/tests/vectors/packets/*.packet "corpus/$target/"
  find "$repo/tests/adversarial/packets" -name '*.packet' -size -256k -exec cp {} "corpus/$target/" \;
done
printf 'workspace/a/b\xffc/../d' >corpus/paths/seed-1
printf 'harness/codex/l\xff../../workspace' >corpus/paths/seed-2
printf 'workspace/caf\xc3\xa9\xffcafe\xcc\x81' >corpus/paths/seed-3
printf 'workspace/\xe2\x84\xaa\xffk' >corpus/paths/seed-4

# As `cargo fuzz build -s none`: release with line tables, one codegen
# unit, libFuzzer's coverage counters and comparison tracing (sancov),
# `cfg(fuzzing)` and debug assertions; --target keeps the flags off build
# scripts.
triple=$(rustc -vV | sed -n 's/^host: //p')
export RUSTFLAGS="-Cpasses=sancov-module -Cllvm-args=-sanitizer-coverage-level=4 \
-Cllvm-args=-sanitizer-coverage-inline-8bit-counters -Cllvm-args=-sanitizer-coverage-pc-table \
-Cllvm-args=-sanitizer-coverage-trace-compares --cfg fuzzing -Cllvm-args=-simplifycfg-branch-fold-threshold=0 \
-Cllvm-args=-sanitizer-coverage-stack-depth -Cdebug-assertions -Ccodegen-units=1"
# Their own target directory, whatever CARGO_TARGET_DIR says: these flags
# build nothing another build could share.
CARGO_PROFILE_RELEASE_DEBUG=line-tables-only CARGO_TARGET_DIR="$fuzz/target" \
  cargo build --release --locked --target "$triple" --bins -q
bin="$fuzz/target/$triple/release"

summary="$fuzz/target/fuzz-summary.txt"
: >"$summary"
status=0
for target in reader reader_structured paths; do
  mkdir -p "artifacts/$target"
  before=$(find "artifacts/$target" -type f | wc -l)
  log="$fuzz/target/fuzz-$target.log"
  # -max_len: room for the largest seed and for mutations that grow it.
  if ! "$bin/$target" -artifact_prefix="$fuzz/artifacts/$target/" "corpus/$target" \
      -max_total_time="$seconds" -print_final_stats=1 -max_len=262144 \
      -timeout=10 -rss_limit_mb=2048 >"$log" 2>&1; then
    status=1
  fi
  runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -1 || true)
  after=$(find "artifacts/$target" -type f | wc -l)
  line="$target: ${runs:-0} executions in ${seconds}s, $((after - before)) new crash artifacts, corpus $(find "corpus/$target" -type f | wc -l) inputs"
  echo "$line" | tee -a "$summary"
  if [ "$after" -gt "$before" ]; then
    status=1
    ls -t "artifacts/$target" | head -n "$((after - before))"
    tail -n 40 "$log"
  fi
done
exit "$status"
