#!/usr/bin/env bash
# Runs every test of the project, after installing what a fresh machine
# lacks for them (scripts/setup.sh --for test: the main job's tools and the
# tests' own). Each step names itself; the first failure stops the run with
# a non-zero exit. At the end (or at the failure) a table gives each step's
# time.
#
#   bash scripts/test.sh            everything
#   FUZZ_SECONDS=0 bash scripts/test.sh   skip the bounded fuzz run
#
# Each crate is compiled once per profile and target: the lints and the
# tests' debug builds (`cargo test`; the wasm tests) in target/tests/, the
# release builds of the programs the end-to-end tests, the harness tests,
# the browser tests and the benchmarks run in target/ as always, all from
# one invocation (scripts/build-release.sh), plus the Worker and the
# inspector page for wasm32. Cargo locks a target directory for the whole
# of an invocation, so with two the release builds (and the fuzz targets'
# build and bounded run, in their own) go on in the background while the
# lints and the debug tests run: the machine's cores stay busy, and the
# steps that need the builds wait for them.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
target="${CARGO_TARGET_DIR:-$root/target}"
tests_target="$target/tests"

stage_names=()
stage_seconds=()
stage_cpu=()
stage=""
stage_started=""
stage_cpu_started=""
run_started=$EPOCHREALTIME

# CPU seconds (user + system) of every finished child process so far, into
# $cpu_now: the steps' CPU time, which other work on the machine changes
# less than their wall time. (`times` must run in this shell itself: in a
# pipe or $(…) it would report a subshell's.)
#
# A background job's CPU joins this shell's children's the moment bash
# reaps it, whichever step is running then; it is taken out again here
# (it has its own row), so $cpu_now counts the foreground steps only and
# $cpu_all everything.
times_file=$(mktemp)
read_cpu() {
  local counted
  # Until no job was reaped between `times` and the look at the jobs: then
  # every job in `times` is counted in $bg_reaped_cpu and no other.
  while :; do
    times >"$times_file"
    counted=$bg_reaped_cpu
    account_background
    [[ "$counted" == "$bg_reaped_cpu" ]] && break
  done
  cpu_all=$(awk 'NR == 2 {
    n = split($1 " " $2, t, " "); s = 0
    for (i = 1; i <= n; i++) { split(t[i], ms, "m"); s += ms[1] * 60 + ms[2] }
    printf "%.1f", s }' "$times_file")
  cpu_now=$(awk -v a="$cpu_all" -v b="$bg_reaped_cpu" 'BEGIN { printf "%.1f", a - b }')
}

# Closes the running step's timing.
close_stage() {
  if [[ -n "$stage" ]]; then
    read_cpu
    stage_names+=("$stage")
    stage_seconds+=("$(awk -v a="$stage_started" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }')")
    stage_cpu+=("$(awk -v a="$stage_cpu_started" -v b="$cpu_now" 'BEGIN { printf "%.1f", b - a }')")
    stage=""
  fi
}

step() {
  close_stage
  stage="$*"
  stage_started=$EPOCHREALTIME
  read_cpu
  stage_cpu_started=$cpu_now
  printf '\n==== %s\n' "$*"
}

# Background jobs: started with `background NAME COMMAND…`, their output in
# a log; `await NAME` waits for one, prints its log's tail (or all of it if
# it failed, and stops the run) and adds its own row to the table: its
# wall time from start to end, and its CPU, which is then not counted in the
# step that waited for it.
declare -A bg_pid bg_log bg_times bg_cpu_of
bg_reaped_cpu=0
# The CPU of the background jobs that have ended and been reaped (their
# times written, their process gone) and not yet counted, into
# $bg_reaped_cpu and each one's bg_cpu_of.
account_background() {
  local name
  for name in "${!bg_pid[@]}"; do
    [[ -z "${bg_cpu_of[$name]:-}" && -s "${bg_times[$name]}" ]] || continue
    kill -0 "${bg_pid[$name]}" 2>/dev/null && continue
    bg_cpu_of[$name]=$(awk 'NR == 3 {
      n = split($1 " " $2, t, " "); s = 0
      for (i = 1; i <= n; i++) { split(t[i], ms, "m"); s += ms[1] * 60 + ms[2] }
      printf "%.1f", s }' "${bg_times[$name]}")
    bg_reaped_cpu=$(awk -v a="$bg_reaped_cpu" -v c="${bg_cpu_of[$name]}" 'BEGIN { printf "%.1f", a + c }')
  done
}
background() {
  local name=$1
  shift
  bg_log[$name]=$(mktemp)
  bg_times[$name]=$(mktemp)
  # In a process group of its own (job control on for the `&`), so that a
  # run that stops early ends the job and everything it started.
  set -m
  (
    started=$EPOCHREALTIME
    status=0
    "$@" || status=$?
    # This subshell's `times`: the CPU of the job's processes.
    { echo "$started $EPOCHREALTIME"; times; } >"${bg_times[$name]}"
    exit $status
  ) >"${bg_log[$name]}" 2>&1 &
  bg_pid[$name]=$!
  set +m
  printf '(started in the background: %s)\n' "$name"
}
await() {
  local name=$1 status=0
  wait "${bg_pid[$name]}" || status=$?
  if [[ $status -ne 0 ]]; then
    cat "${bg_log[$name]}"
    printf '\n==== %s (in the background) failed (exit %d)\n' "$name" "$status"
    stage_names+=("$name (in the background)")
    stage_seconds+=("-")
    stage_cpu+=("-")
    exit "$status"
  fi
  tail -n "${2:-3}" "${bg_log[$name]}"
  # Reaped by the wait: its CPU, not the waiting step's, counted now if it
  # was not already.
  read_cpu
  bg_names+=("$name (in the background)")
  bg_seconds+=("$(awk 'NR == 1 { printf "%.1f", $2 - $1 }' "${bg_times[$name]}")")
  bg_cpu+=("${bg_cpu_of[$name]}")
  unset "bg_pid[$name]"
  rm -f "${bg_log[$name]}" "${bg_times[$name]}"
}
bg_names=()
bg_seconds=()
bg_cpu=()

# The table of step times, at the end of the run or where it stopped.
summary() {
  local status=$?
  local failed="$stage"
  close_stage
  printf '\n==== time per step (wall, and CPU of its processes; load average %s at the end)\n' "$(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null)"
  printf '%8s  %8s  %s\n' wall CPU step
  local i
  for i in "${!stage_names[@]}"; do
    local mark=""
    [[ $status -ne 0 && -n "$failed" && $i -eq $((${#stage_names[@]} - 1)) ]] && mark="  (failed)"
    printf '%6s s  %6s s  %s%s\n' "${stage_seconds[$i]}" "${stage_cpu[$i]}" "${stage_names[$i]}" "$mark"
  done
  for i in "${!bg_names[@]}"; do
    printf '%6s s  %6s s  %s\n' "${bg_seconds[$i]}" "${bg_cpu[$i]}" "${bg_names[$i]}"
  done
  local pid
  for pid in "${bg_pid[@]}"; do kill -- "-$pid" 2>/dev/null || true; done
  local total
  read_cpu
  total=$(awk -v a="$run_started" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }')
  if [[ $status -eq 0 ]]; then
    printf '%6s s  %6s s  total\n\nall tests passed in %.0f s\n' "$total" "$cpu_all" "$total"
  else
    printf '%6s s  %6s s  total, stopped by a failure (exit %d)\n' "$total" "$cpu_all" "$status"
  fi
  rm -f "$times_file"
}
trap summary EXIT

step "setup (scripts/setup.sh --for test)"
bash scripts/setup.sh --for test

step "format"
cargo fmt --all -- --check

# In the background from here, in target/ (or CARGO_TARGET_DIR): the
# release and wasm32 builds; in packet-core/fuzz/target: the fuzz targets'
# build and bounded run.
build_job="build: the Worker (wasm32), the inspector page (wasm32), the native programs in release"
background "$build_job" bash -c 'bash scripts/worker-build.sh && bash inspector/build.sh && bash scripts/build-release.sh'
fuzz_job="fuzzing, bounded (${FUZZ_SECONDS:-20} s a target)"
if [ "${FUZZ_SECONDS:-20}" != 0 ]; then
  background "$fuzz_job" bash scripts/fuzz.sh "${FUZZ_SECONDS:-20}"
fi

# Meanwhile the lints and the debug tests, in target/tests/.
export CARGO_TARGET_DIR="$tests_target"

step "lints (native crates)"
cargo clippy --all-targets --locked -- -D warnings

step "lints (the Worker, wasm32)"
cargo clippy -p pillbox-worker --target wasm32-unknown-unknown --all-targets --locked -- -D warnings

# For wasm32-unknown-unknown, the wasm tests below build packet-core.
step "packet-core builds with no std at all (wasm32v1-none)"
cargo build -p packet-core --target wasm32v1-none --locked

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

# From here on, the release builds.
export CARGO_TARGET_DIR="$target"

step "waiting for the release builds"
await "$build_job"

step "Worker bundles for deployment (wrangler deploy --dry-run)"
dry=$(mktemp -d)
bash scripts/wrangler.sh deploy --dry-run --outdir "$dry" >"$dry/log" 2>&1 || { cat "$dry/log"; exit 1; }
rm -rf "$dry"

step "end-to-end: the Worker on workerd (wrangler dev, local R2 + D1) with HTTP clients and the pillbox binary"
# Two files at a time: each starts its own wrangler dev (own port, own
# persisted state) and most of a file's time is waiting on it.
node --test --test-concurrency=2 tests/e2e/

step "harness state end to end: Codex, Claude Code and OpenCode (the real CLIs, offline against a mock model) carried between two homes"
PILLBOX_BIN="$target/release/pillbox" node --test --test-concurrency=1 tests/harness/

step "browser: the inspector in headless Chromium"
bash inspector/tests/run.sh

if [ "${FUZZ_SECONDS:-20}" != 0 ]; then
  step "waiting for the fuzzing"
  await "$fuzz_job" 3
fi

step "benchmark smoke runs (tiny workspaces, one repetition, no targets)"
bash bench/run.sh --smoke
# The transfer benchmark on small workspaces (this repository's own
# node_modules, a clone of it, a 16 MiB rollout), three saves; its figures
# are printed, not checked.
node bench/transfer.mjs --quick --node-modules node_modules --dir "${TMPDIR:-/tmp}/pillbox-transfer-smoke" >/dev/null
cat "${TMPDIR:-/tmp}/pillbox-transfer-smoke/transfer-quick.md"
