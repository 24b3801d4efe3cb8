#!/usr/bin/env bash
# The whole path once, on this machine: install what is missing, build the
# CLI, the Worker and the inspector page, start the packet store locally
# (wrangler dev on 127.0.0.1:8787, state persisted under .state/), pack a
# sample workspace with a Codex session, push it under the ref
# sessions/demo/latest, pull it back by that ref, unpack it into a fresh
# workspace and Codex home, and check that the tree came back unchanged.
# Then one more agent turn the way a host runs it: `save` after an edit
# (only what changed goes up) and `restore` into another fresh workspace
# (only what changed comes down). Then it prints the inspector's URL for the packet; the store keeps running
# so that the URL opens (the script says how to stop it).
#
#   bash scripts/main.sh          # leaves the store running for the inspector
#   bash scripts/main.sh --stop   # stops it at the end (the URL then needs it
#                                 # started again)
#
# Installs only what this needs (scripts/setup.sh --for main); the tests'
# tools come with scripts/test.sh.
#
# Running it again reuses the persisted state: the packet is the same (the
# sample is generated identically), so the push sends nothing and the ref
# stays where it is. The write token lives in .dev.vars (generated once,
# never printed; git ignores the file).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

keep_running=1
for arg in "$@"; do
  case "$arg" in
    --stop) keep_running=0 ;;
    --keep-running) keep_running=1 ;; # the default; still accepted
    -h | --help)
      sed -n '2,21p' "$0" | sed 's/^# \{0,1\}//'
      exit 0
      ;;
    *)
      echo "main: unknown argument $arg (use --stop or --help)" >&2
      exit 2
      ;;
  esac
done

port=8787
remote="http://127.0.0.1:$port"
ref=sessions/demo/latest
thread=0199a213-81c0-7800-8aa1-bbab2a035a53
model=gpt-5.1-codex
# wrangler on node 22 (scripts/wrangler.sh)
wrangler="$root/scripts/wrangler.sh"
pillbox="${CARGO_TARGET_DIR:-$root/target}/release/pillbox"

step() { printf '\n== %s\n' "$*" >&2; }

step "setup (what the main job needs; skipped when present)"
bash scripts/setup.sh --for main

step "build: pillbox CLI (release)"
cargo build --release -p pillbox

step "build: Worker"
bash scripts/worker-build.sh

step "build: inspector page"
bash inspector/build.sh

wrangler_version="$("$wrangler" --version 2>/dev/null | grep -Eo '[0-9]+\.[0-9]+\.[0-9]+' | head -1)"
state="$root/.state/wrangler-$wrangler_version"
mkdir -p "$state"

# The write token: generated once into .dev.vars (wrangler dev reads it).
if ! grep -qs '^PILLBOX_TOKEN=' .dev.vars; then
  umask 077
  printf 'PILLBOX_TOKEN=%s\n' "$(od -An -N32 -tx1 /dev/urandom | tr -d ' \n')" >>.dev.vars
  umask 022
  echo "main: wrote a new write token to .dev.vars" >&2
fi
PILLBOX_TOKEN="$(sed -n 's/^PILLBOX_TOKEN=//p' .dev.vars | head -1)"
export PILLBOX_TOKEN

store_is_up() {
  curl -sf --max-time 2 "$remote/v1" 2>/dev/null | grep -q '"service":"pillbox"'
}

server_pid=""
stop_server() {
  if [[ -n "$server_pid" ]] && kill -0 "$server_pid" 2>/dev/null; then
    kill -TERM -- "-$server_pid" 2>/dev/null || true
    for _ in $(seq 50); do
      kill -0 "$server_pid" 2>/dev/null || break
      sleep 0.1
    done
    kill -KILL -- "-$server_pid" 2>/dev/null || true
  fi
}

step "packet store: wrangler dev on $remote (state in ${state#"$root"/})"
# wrangler.toml's [build] runs scripts/worker-build.sh once at start, which
# finds the Worker built above.
config="$root/wrangler.toml"
CI=1 "$wrangler" d1 migrations apply pillbox-index --local --config "$config" --persist-to "$state" >"$state/migrations.log" 2>&1 ||
  { cat "$state/migrations.log" >&2; exit 1; }
if store_is_up; then
  echo "main: a pillbox store already answers on $remote; using it (and leaving it running)" >&2
else
  # Its own process group, so that stopping it stops workerd too.
  # READ_ACCESS=public: this local store (127.0.0.1 only) answers reads
  # without a token, so that the inspector URL opens in a browser; writes,
  # listing and search still need the token. A deployed store keeps the
  # default, reads by token (docs/worker.md, "Access").
  setsid "$wrangler" dev --local --config "$config" --ip 127.0.0.1 --port "$port" --persist-to "$state" \
    --var READ_ACCESS:public \
    --show-interactive-dev-session=false --log-level warn \
    >"$state/wrangler.log" 2>&1 </dev/null &
  server_pid=$!
  # Stopped if anything below fails; left running at the end unless --stop.
  trap stop_server EXIT
  for _ in $(seq 600); do
    store_is_up && break
    if ! kill -0 "$server_pid" 2>/dev/null; then
      echo "main: wrangler dev exited; its log:" >&2
      cat "$state/wrangler.log" >&2
      exit 1
    fi
    sleep 0.2
  done
  store_is_up || { echo "main: the store did not answer within 120 s; see $state/wrangler.log" >&2; exit 1; }
fi

step "sample: a workspace and a Codex home (with an auth.json that is never packed)"
demo="$root/.state/demo"
ws="$demo/workspace"
codex_home="$demo/codex-home"
# Generated identically on every run, so the packet (and its digest) is too.
rm -rf "$demo"
mkdir -p "$ws/src/lib" "$ws/bin" "$ws/docs" "$ws/empty-dir"
printf '# demo project\n\nA small workspace carried between machines.\n' >"$ws/README.md"
printf 'fn main() {\n    println!("hello from the demo");\n}\n' >"$ws/src/main.rs"
printf 'pub fn answer() -> u32 {\n    42\n}\n' >"$ws/src/lib/mod.rs"
printf '#!/bin/sh\nexec cargo run --release "$@"\n' >"$ws/bin/run.sh"
chmod 755 "$ws/bin/run.sh"
printf 'notes with a UTF-8 name\n' >"$ws/docs/notes-é.txt"
ln -s src/main.rs "$ws/main-link"
seq 1 200000 >"$ws/docs/numbers.txt"
day=2026/11/30
rollout="$codex_home/sessions/$day/rollout-2026-11-30T01-02-03-$thread.jsonl"
mkdir -p "$(dirname "$rollout")"
cat >"$rollout" <<EOF
{"timestamp":"2026-11-30T01:02:03.456Z","type":"session_meta","payload":{"id":"$thread","session_id":"$thread","timestamp":"2026-11-30T01:02:03.400Z","cwd":"$ws","originator":"codex_exec","cli_version":"0.171.0","instructions":null,"model_provider":"openai"}}
{"timestamp":"2026-11-30T01:02:03.500Z","type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"add an answer() function"}]}}
{"timestamp":"2026-11-30T01:02:03.510Z","type":"turn_context","payload":{"cwd":"$ws","approval_policy":"never","sandbox_policy":{"type":"workspace-write"},"model":"$model","summary":"auto"}}
{"timestamp":"2026-11-30T01:02:04.000Z","type":"event_msg","payload":{"type":"agent_message","message":"Added src/lib/mod.rs with answer()."}}
EOF
printf '{"OPENAI_API_KEY":"sk-demo-never-packed"}\n' >"$codex_home/auth.json"
printf 'model = "%s"\n' "$model" >"$codex_home/config.toml"

run_dir="$(mktemp -d "${TMPDIR:-/tmp}/pillbox-main-XXXXXX")"
packet="$run_dir/demo.tar"
json() { python3 -c 'import json,sys; v=json.load(sys.stdin)
for k in sys.argv[1].split("."): v = v[k] if not isinstance(v, list) else v[int(k)]
print("null" if v is None else v)' "$1"; }

step "pack"
"$pillbox" checkpoint pack "$ws" -o "$packet" --harness codex --thread "$thread" --codex-home "$codex_home" --quiet >"$run_dir/pack.json"
digest="$(json digest <"$run_dir/pack.json")"
size="$(json size <"$run_dir/pack.json")"
if grep -q 'auth.json' <(tar -tf "$packet"); then
  echo "main: auth.json was packed" >&2
  exit 1
fi

step "push --ref $ref"
"$pillbox" checkpoint push "$packet" --remote "$remote" --ref "$ref" >"$run_dir/push.json"

step "pull $ref into a fresh directory"
pulled="$run_dir/pulled/demo.tar"
mkdir -p "$(dirname "$pulled")"
"$pillbox" checkpoint pull "$ref" --remote "$remote" -o "$pulled" >"$run_dir/pull.json"
[[ "$(json digest <"$run_dir/pull.json")" == "$digest" ]] || { echo "main: pulled a different packet" >&2; exit 1; }
cmp -s "$packet" "$pulled" || { echo "main: the pulled bytes differ" >&2; exit 1; }

step "unpack into a fresh workspace and Codex home"
restored="$run_dir/restored/workspace"
restored_home="$run_dir/restored/codex-home"
"$pillbox" checkpoint unpack "$pulled" --digest "$digest" --into "$restored" --codex-home "$restored_home" --quiet >"$run_dir/unpack.json"

step "check: the tree came back"
diff -r --no-dereference "$ws" "$restored"
[[ "$(stat -c %a "$restored/bin/run.sh")" == 755 ]] || { echo "main: run.sh lost its exec bit" >&2; exit 1; }
cmp -s "$rollout" "$restored_home/sessions/$day/$(basename "$rollout")" || { echo "main: the rollout differs" >&2; exit 1; }
[[ ! -e "$restored_home/auth.json" ]] || { echo "main: auth.json travelled" >&2; exit 1; }
"$pillbox" checkpoint restore-check --checkpoint "$run_dir/unpack.json" >"$run_dir/restore-check.json"

step "one more turn: save after an edit, restore on a fresh machine"
printf 'pub fn answer() -> u32 {\n    42\n}\n\npub fn question() -> &'"'"'static str {\n    "six by nine"\n}\n' >"$ws/src/lib/mod.rs"
printf '{"timestamp":"2026-11-30T01:02:05.000Z","type":"event_msg","payload":{"type":"agent_message","message":"Added question()."}}\n' >>"$rollout"
# Each host its own state and cache folders; the restoring one has the packet
# it pulled before (--base), so only the turn comes down.
XDG_STATE_HOME="$run_dir/laptop/state" XDG_CACHE_HOME="$run_dir/laptop/cache" \
  "$pillbox" checkpoint save "$ws" --remote "$remote" --ref "$ref" \
  --harness codex --thread "$thread" --codex-home "$codex_home" --quiet >"$run_dir/save.json"
turn_restored="$run_dir/turn/workspace"
turn_home="$run_dir/turn/codex-home"
XDG_STATE_HOME="$run_dir/desk/state" XDG_CACHE_HOME="$run_dir/desk/cache" \
  "$pillbox" checkpoint restore "$ref" --remote "$remote" --into "$turn_restored" \
  --codex-home "$turn_home" --base "$pulled" --quiet >"$run_dir/restore.json"
[[ "$(json digest <"$run_dir/restore.json")" == "$(json digest <"$run_dir/save.json")" ]] ||
  { echo "main: restored a different packet than was saved" >&2; exit 1; }
diff -r --no-dereference "$ws" "$turn_restored"
cmp -s "$rollout" "$turn_home/sessions/$day/$(basename "$rollout")" || { echo "main: the saved rollout differs" >&2; exit 1; }

uploaded="$(json uploaded <"$run_dir/push.json")"
mode="$(json mode <"$run_dir/push.json")"
previous="$(json ref.previous <"$run_dir/push.json")"
moved="$(json ref.moved <"$run_dir/push.json")"
push_s="$(printf '%.2f' "$(json upload_seconds <"$run_dir/push.json")")"
pull_s="$(printf '%.2f' "$(json download_seconds <"$run_dir/pull.json")")"
members="$(json members <"$run_dir/pull.json")"

cat <<EOF

pillbox: round trip OK
  packet     $digest ($size bytes, $members members, Codex thread $thread, model $model)
  push       $( [[ $uploaded == True ]] && echo "uploaded ($mode)" || echo "already stored: nothing sent" ) in $push_s s
  ref        $ref -> $digest $( if [[ $moved != True ]]; then echo "(unchanged)"; elif [[ $previous == null ]]; then echo "(created)"; else echo "(moved from $previous)"; fi )
  pull       verified while downloading in $pull_s s, identical bytes
  unpack     workspace and Codex rollout restored under $run_dir/restored (no auth.json)
  save       one more turn: $(json bytes_sent <"$run_dir/save.json") bytes sent for a $(json size <"$run_dir/save.json")-byte packet ($(json mode <"$run_dir/save.json"))
  restore    $(json bytes_received <"$run_dir/restore.json") bytes received, verified and unpacked under $run_dir/turn
EOF

inspector="$remote/?open=$digest"
restart="bash scripts/wrangler.sh dev --local --ip 127.0.0.1 --port $port --persist-to ${state#"$root"/} --var READ_ACCESS:public"
if [[ -z "$server_pid" ]]; then
  cat <<EOF
  inspector  $inspector

The store was already running before this run and is left as it was.
EOF
elif [[ $keep_running -eq 1 ]]; then
  trap - EXIT
  cat <<EOF
  inspector  $inspector

The store keeps running, so the inspector URL opens (process group $server_pid;
log: ${state#"$root"/}/wrangler.log). Stop it with:
  kill -TERM -- -$server_pid
EOF
else
  stop_server
  trap - EXIT
  cat <<EOF
  inspector  $inspector (once the store runs again)

The store is stopped (--stop). The inspector URL needs it running: start it
again, with the same state, with
  $restart
or run bash scripts/main.sh without --stop.
EOF
fi
