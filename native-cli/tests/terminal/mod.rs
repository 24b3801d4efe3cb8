//! Runs the binary on a pseudo-terminal, as a person at a terminal would:
//! util-linux `script` gives it a terminal on stdin, stdout and stderr
//! (all three the same terminal, so what it prints on either arrives
//! together, in order).
#![allow(dead_code)]

use std::path::Path;
use std::process::Command;

/// What a run on a terminal printed, without colour and with `\n` lines.
pub struct Screen {
    pub code: i32,
    /// The terminal's bytes as written (escape sequences kept).
    pub raw: String,
    /// The text as a person reads it: styles and the progress bar's
    /// redraws removed, `\r\n` turned into `\n`.
    pub text: String,
}

fn quote(w: &str) -> String {
    format!("'{}'", w.replace('\'', r"'\''"))
}

/// Runs `pillbox <args>` on a terminal in `dir`, with `env` set.
pub fn on_terminal(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Screen {
    let mut line = quote(env!("CARGO_BIN_EXE_pillbox"));
    for a in args {
        line.push(' ');
        line.push_str(&quote(a));
    }
    let mut cmd = Command::new("script");
    cmd.args(["-qec", &line, "/dev/null"])
        .current_dir(dir)
        .env_remove("NO_COLOR")
        .env_remove("CLICOLOR")
        .env_remove("CLICOLOR_FORCE")
        .env_remove("CODEX_HOME")
        .env_remove("CLAUDE_CONFIG_DIR")
        .env("TERM", "xterm-256color")
        .stdin(std::process::Stdio::null());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("run script (util-linux)");
    let raw = String::from_utf8_lossy(&out.stdout).into_owned();
    Screen {
        code: out.status.code().unwrap_or(-1),
        text: readable(&raw),
        raw,
    }
}

/// The text left once escape sequences are removed and each line shows
/// what was drawn last on it (a `\r` starts the line over).
pub fn readable(raw: &str) -> String {
    let mut plain = String::new();
    let mut chars = raw.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            if chars.peek() == Some(&'[') {
                chars.next();
                for d in chars.by_ref() {
                    if d.is_ascii_alphabetic() {
                        break;
                    }
                }
            }
            continue;
        }
        plain.push(c);
    }
    plain
        .split('\n')
        .map(|l| {
            let l = l.strip_suffix('\r').unwrap_or(l);
            l.rsplit('\r').next().unwrap_or("").trim_end().to_owned()
        })
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join("\n")
}
