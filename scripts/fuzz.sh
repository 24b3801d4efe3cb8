#!/usr/bin/env bash
# Runs every cargo-fuzz target of packet-core for a bounded time and
# records executions and findings.
#
#   scripts/fuzz.sh SECONDS          # each target runs SECONDS seconds
#
# Targets (packet-core/fuzz/fuzz_targets): reader (arbitrary bytes and
# block-level mutations of the golden vectors), reader_structured (a
# structure-aware mutator that rewrites member sets and re-encodes them),
# paths (the path rules). Seeds: the golden vectors and the adversarial
# corpus. Stable toolchain, no sanitizer (`-s none`): packet-core has no
# unsafe code. Needs cargo-fuzz 0.13.2 and a C++ compiler (see
# packet-core/fuzz/README.md).
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

cargo +stable fuzz build -s none >/dev/null 2>&1 || cargo +stable fuzz build -s none

summary="$fuzz/target/fuzz-summary.txt"
: >"$summary"
status=0
for target in reader reader_structured paths; do
  mkdir -p "artifacts/$target"
  before=$(find "artifacts/$target" -type f | wc -l)
  log="$fuzz/target/fuzz-$target.log"
  # -max_len: room for the largest seed and for mutations that grow it.
  if ! cargo +stable fuzz run -s none "$target" "corpus/$target" -- \
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
