//! OpenCode fixtures: a stand-in `opencode` program whose "database" is a
//! folder of exports, one such folder per test machine, and the commands
//! the tests run with them (pack, unpack and restore-check; save and
//! restore against a store).

use std::fs;
use std::path::{Path, PathBuf};

use super::{chmod, pillbox, run, s, write, Run};

/// An OpenCode session id.
pub const OC_SESSION: &str = "ses_dceb97773ffeEbFZpPTlgwYItc";

/// A stand-in for `opencode` with the commands pack, unpack and restore
/// use. Its "database" is `$XDG_DATA_HOME/opencode/sessions/<id>.json`; it
/// records the environment and working directory it ran with. Its import
/// only adds, as OpenCode's own does: a session it holds keeps its info and
/// its messages, the file's other messages are added, and the export lists
/// them all in id order. `fail-imports` in the data folder holds how many of
/// the next imports fail.
pub const FAKE_OPENCODE: &str = r#"#!/bin/sh
data="${XDG_DATA_HOME:-$HOME/.local/share}/opencode"
mkdir -p "$data/sessions"
env > "$data/last-env"
pwd > "$data/last-cwd"
not_found() {
  printf '\033[91m\033[1mError: \033[0mSession not found: %s\n' "$1" >&2
  exit 1
}
case "$1" in
  --version) cat "$data/version" 2>/dev/null || echo 1.18.33 ;;
  export)
    [ -f "$data/sessions/$2.json" ] || not_found "$2"
    echo "Exporting session: $2" >&2
    cat "$data/sessions/$2.json" ;;
  import)
    failing=$(cat "$data/fail-imports" 2>/dev/null || echo 0)
    if [ "$failing" -gt 0 ]; then
      echo $((failing - 1)) > "$data/fail-imports"
      echo "Error: the import failed" >&2
      exit 1
    fi
    id=$(sed -n 's/.*"id": *"\(ses_[A-Za-z0-9]*\)".*/\1/p' "$2" | head -n 1)
    held="$data/sessions/$id.json"
    if [ -f "$held" ]; then
      awk '
        function id_of(line) {
          match(line, /"id": "[^"]*"/)
          return substr(line, RSTART + 7, RLENGTH - 8)
        }
        FNR == 1 { part = "info" }
        part == "messages" && /^  \]/ { part = "end" }
        part == "messages" && NF {
          line = $0
          sub(/,$/, "", line)
          id = id_of(line)
          if (!(id in message)) { message[id] = line; ids[++n] = id }
          next
        }
        FILENAME == ARGV[1] && part == "info" { info = info $0 "\n" }
        FILENAME == ARGV[1] && part == "end" { end = end $0 "\n" }
        part == "info" && /"messages": \[/ { part = "messages" }
        END {
          for (i = 2; i <= n; i++) {
            v = ids[i]
            for (j = i - 1; j >= 1 && ids[j] > v; j--) ids[j + 1] = ids[j]
            ids[j + 1] = v
          }
          printf "%s", info
          for (i = 1; i <= n; i++) printf "%s%s\n", message[ids[i]], (i < n ? "," : "")
          printf "%s", end
        }' "$held" "$2" > "$held.new"
      mv "$held.new" "$held"
    else
      cp "$2" "$held"
    fi
    pwd > "$data/import-cwd"
    echo "Imported session: $id" ;;
  session)
    [ "$2" = delete ] || { echo "unknown command session $2" >&2; exit 2; }
    [ -f "$data/sessions/$3.json" ] || not_found "$3"
    rm "$data/sessions/$3.json"
    echo "$3" >> "$data/deleted"
    printf '\033[92m\033[1mSession %s deleted\033[0m\n' "$3" >&2 ;;
  *) echo "unknown command $1" >&2; exit 2 ;;
esac
"#;

/// An export of OC_SESSION with one assistant message per id.
pub fn export_json(messages: &[&str]) -> String {
    let messages: Vec<String> = messages
        .iter()
        .map(|id| {
            format!(
                r#"    {{"info": {{"role": "assistant", "id": "{id}", "modelID": "mock-model", "providerID": "mock"}}, "parts": [{{"type": "text", "text": "tool output: OPENAI_API_KEY is set"}}]}}"#
            )
        })
        .collect();
    format!(
        "{{\n  \"info\": {{\n    \"id\": \"{OC_SESSION}\",\n    \"directory\": \"/old/ws\",\n    \"model\": {{\"id\": \"claude-sonnet-4-5\", \"providerID\": \"anthropic\"}},\n    \"version\": \"1.18.33\"\n  }},\n  \"messages\": [\n{}\n  ]\n}}\n",
        messages.join(",\n")
    )
}

/// One machine's OpenCode: a data folder for the stand-in, below the
/// machine's own folder.
pub struct OpencodeBox {
    /// Its `opencode` data folder.
    pub data: PathBuf,
    /// Its `$XDG_DATA_HOME`.
    pub xdg: PathBuf,
    /// The machine's folder (its pillbox state and cache are below).
    pub root: PathBuf,
}

impl OpencodeBox {
    /// This machine's copy of OC_SESSION, as the stand-in keeps it.
    pub fn session(&self) -> PathBuf {
        self.data
            .join("sessions")
            .join(format!("{OC_SESSION}.json"))
    }

    /// Makes this machine's copy of OC_SESSION hold `messages`.
    pub fn holds(&self, messages: &[&str]) {
        write(&self.session(), export_json(messages));
    }

    /// `pillbox checkpoint ARGS` on this machine: its OpenCode data, and
    /// its own state and cache folders.
    pub fn checkpoint(&self, args: &[&str]) -> Run {
        let mut cmd = pillbox();
        cmd.env("XDG_STATE_HOME", self.root.join("state"))
            .env("XDG_CACHE_HOME", self.root.join("cache"))
            .env_remove("PILLBOX_REMOTE")
            .arg("checkpoint")
            .args(args);
        with_box(&mut cmd, self)
    }
}

/// A machine's OpenCode data folder (as `$XDG_DATA_HOME`).
pub fn opencode_box(root: &Path, name: &str) -> OpencodeBox {
    let root = root.join(name);
    let xdg = root.join("xdg-data");
    let data = xdg.join("opencode");
    fs::create_dir_all(data.join("sessions")).unwrap();
    write(
        &data.join("auth.json"),
        r#"{"anthropic":{"type":"api","key":"sk-ant-never-packed"}}"#,
    );
    write(
        &data.join("opencode.db"),
        "SQLite format 3\0sessions and keys",
    );
    OpencodeBox { data, xdg, root }
}

/// Writes the stand-in `opencode` below `root`; returns its path.
pub fn fake_opencode(root: &Path) -> PathBuf {
    let p = root.join("bin/opencode");
    write(&p, FAKE_OPENCODE);
    chmod(&p, 0o755);
    p
}

/// Runs `cmd` with machine `b`'s OpenCode data and secrets in its
/// environment that must never reach `opencode`.
pub fn with_box(cmd: &mut assert_cmd::Command, b: &OpencodeBox) -> Run {
    run(cmd
        .env("XDG_DATA_HOME", &b.xdg)
        .env("ANTHROPIC_API_KEY", "sk-ant-env-secret")
        .env("OPENCODE_AUTH_CONTENT", "{\"k\":\"sk-inline\"}"))
}

/// `pillbox checkpoint ARGS` with machine `b`'s OpenCode data.
pub fn oc(args: &[&str], b: &OpencodeBox) -> Run {
    with_box(pillbox().arg("checkpoint").args(args), b)
}

/// `--harness opencode --session OC_SESSION --opencode-bin BIN`.
pub fn opencode_flags(bin: &Path) -> [&str; 6] {
    [
        "--harness",
        "opencode",
        "--session",
        OC_SESSION,
        "--opencode-bin",
        s(bin),
    ]
}

/// The ref OpenCode sessions are saved to and restored from.
pub const OC_REF: &str = "sessions/oc/latest";

/// The stand-in `opencode`, and the commands that run it on a machine.
pub struct Opencode {
    /// The program.
    pub bin: PathBuf,
}

impl Opencode {
    /// The stand-in, written below `root`.
    pub fn new(root: &Path) -> Opencode {
        Opencode {
            bin: fake_opencode(root),
        }
    }

    /// `pack WS -o PACKET` of OC_SESSION on machine `b`.
    pub fn pack(&self, b: &OpencodeBox, ws: &Path, packet: &Path) -> Run {
        let mut args = vec!["pack", s(ws), "-o", s(packet)];
        args.extend(opencode_flags(&self.bin));
        oc(&args, b)
    }

    /// `unpack PACKET --digest DIGEST --into INTO --opencode-import` on
    /// machine `b`.
    pub fn unpack(&self, b: &OpencodeBox, packet: &Path, digest: &str, into: &Path) -> Run {
        oc(
            &[
                "unpack",
                s(packet),
                "--digest",
                digest,
                "--into",
                s(into),
                "--opencode-import",
                "--opencode-bin",
                s(&self.bin),
            ],
            b,
        )
    }

    /// `restore-check --checkpoint CHECKPOINT` on machine `b`.
    pub fn restore_check(&self, b: &OpencodeBox, checkpoint: &Path) -> Run {
        oc(
            &[
                "restore-check",
                "--checkpoint",
                s(checkpoint),
                "--opencode-bin",
                s(&self.bin),
            ],
            b,
        )
    }

    /// `save WS` of OC_SESSION to OC_REF on `store` from machine `b`,
    /// which must succeed.
    pub fn save(&self, b: &OpencodeBox, store: &str, ws: &Path) {
        let mut args = vec!["save", s(ws), "--remote", store, "--ref", OC_REF, "--quiet"];
        args.extend(opencode_flags(&self.bin));
        let r = b.checkpoint(&args);
        assert_eq!(r.code, 0, "save: {}", String::from_utf8_lossy(&r.stdout));
    }

    /// `restore OC_REF --into WS --opencode-import EXTRA…` from `store` on
    /// machine `b`.
    pub fn restore(&self, b: &OpencodeBox, store: &str, ws: &Path, extra: &[&str]) -> Run {
        let mut args = vec![
            "restore",
            OC_REF,
            "--remote",
            store,
            "--into",
            s(ws),
            "--quiet",
            "--opencode-import",
            "--opencode-bin",
            s(&self.bin),
        ];
        args.extend_from_slice(extra);
        b.checkpoint(&args)
    }
}
