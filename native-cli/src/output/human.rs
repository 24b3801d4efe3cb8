//! The summaries a person reads on a terminal, drawn from the same JSON
//! object a program reads (`proto/cli/*.schema.json`), chosen by its
//! `schema`. A field a summary does not know is left out and a field it
//! expects but does not find is skipped, so reports can grow without
//! breaking their summary.

use std::fmt::Write as _;

use anstyle::{AnsiColor, Style};
use packet_core::path::Root;
use serde_json::Value;

use super::units::{bytes, count, seconds, short_digest};
use crate::error::ErrorReport;

/// How many entries of a list a summary shows before "… and N more".
const LIST_MAX: usize = 10;

const HEAD: Style = Style::new().bold();
const OK: Style = Style::new().fg_color(Some(anstyle::Color::Ansi(AnsiColor::Green)));
const WARN: Style = Style::new()
    .fg_color(Some(anstyle::Color::Ansi(AnsiColor::Yellow)))
    .bold();
const ERROR: Style = Style::new()
    .fg_color(Some(anstyle::Color::Ansi(AnsiColor::Red)))
    .bold();
const KEY: Style = Style::new().dimmed();
const ADD: Style = Style::new().fg_color(Some(anstyle::Color::Ansi(AnsiColor::Green)));
const DEL: Style = Style::new().fg_color(Some(anstyle::Color::Ansi(AnsiColor::Red)));

/// A summary: a headline, aligned `key  value` rows, lists and hints.
#[derive(Default)]
struct Summary {
    head: String,
    rows: Vec<(String, String)>,
    tail: Vec<String>,
}

impl Summary {
    fn new(mark: Style, head: String) -> Summary {
        Summary {
            head: format!("{mark}{head}{mark:#}"),
            ..Default::default()
        }
    }

    fn row(&mut self, key: &str, value: impl Into<String>) {
        self.rows.push((key.to_owned(), value.into()));
    }

    /// One row per item under `key`, at most [`LIST_MAX`].
    fn list(&mut self, key: &str, items: Vec<String>) {
        let n = items.len();
        for (i, item) in items.into_iter().take(LIST_MAX).enumerate() {
            self.row(if i == 0 { key } else { "" }, item);
        }
        if n > LIST_MAX {
            self.row(
                "",
                format!("… and {} more (--json lists them all)", n - LIST_MAX),
            );
        }
    }

    fn hint(&mut self, text: String) {
        self.tail.push(format!("{KEY}{text}{KEY:#}"));
    }

    fn warn(&mut self, text: String) {
        self.tail.push(format!("{WARN}warning{WARN:#}: {text}"));
    }

    fn render(self) -> String {
        let width = self.rows.iter().map(|(k, _)| k.len()).max().unwrap_or(0);
        let mut s = String::new();
        let _ = writeln!(s, "{}", self.head);
        for (k, v) in &self.rows {
            let _ = writeln!(s, "  {KEY}{k:<width$}{KEY:#}  {v}");
        }
        for t in &self.tail {
            let _ = writeln!(s, "{t}");
        }
        s
    }
}

// ---- reading the JSON -------------------------------------------------------

fn text<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v.get(key).and_then(Value::as_str)
}

fn num(v: &Value, key: &str) -> Option<u64> {
    v.get(key).and_then(Value::as_u64)
}

fn flag(v: &Value, key: &str) -> bool {
    v.get(key).and_then(Value::as_bool).unwrap_or(false)
}

fn items<'a>(v: &'a Value, key: &str) -> &'a [Value] {
    v.get(key)
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

/// A member path as the user wrote it: relative to the workspace.
fn member(path: &str) -> &str {
    Root::Workspace.below(path).unwrap_or(path)
}

fn digest_of(v: &Value) -> String {
    text(v, "digest").map(short_digest).unwrap_or_default()
}

/// `4 members: 2 files (18 B), 2 directories`.
fn contents(v: &Value) -> Option<String> {
    let t = v.get("totals")?;
    let mut parts = vec![format!(
        "{} ({})",
        count(num(t, "files")?, "file", "files"),
        bytes(num(t, "bytes").unwrap_or(0))
    )];
    for (key, one, many) in [
        ("directories", "directory", "directories"),
        ("symlinks", "symlink", "symlinks"),
    ] {
        match num(t, key) {
            Some(0) | None => {}
            Some(n) => parts.push(count(n, one, many)),
        }
    }
    Some(parts.join(", "))
}

/// `5.5 KiB packet, 4 members: 2 files (18 B), 2 directories`.
fn size_and_contents(v: &Value) -> String {
    let mut s = num(v, "size").map(bytes).unwrap_or_default();
    if let Some(c) = contents(v) {
        if !s.is_empty() {
            s.push_str(": ");
        }
        s.push_str(&c);
    }
    s
}

fn harness_row(s: &mut Summary, v: &Value) {
    let Some(h) = v.get("harness").filter(|h| h.is_object()) else {
        return;
    };
    let kind = text(h, "kind").unwrap_or("harness");
    let id_name = crate::harness::session_noun(kind);
    let mut line = format!("{kind} {id_name} {}", text(h, "thread_id").unwrap_or("?"));
    if let Some(m) = text(h, "model") {
        let _ = write!(line, ", model {m}");
    }
    match (
        h.get("restored").and_then(Value::as_bool),
        text(h, "rollout_path"),
    ) {
        (Some(true), Some(p)) => {
            let _ = write!(line, ", restored at {p}");
        }
        (Some(true), None) => line.push_str(", restored"),
        (Some(false), _) => line.push_str(", not restored (no harness home given)"),
        _ => {}
    }
    s.row("session", line);
}

/// What a reader found: secrets and git settings that run programs.
fn findings(s: &mut Summary, v: &Value) {
    let Some(f) = v.get("findings") else { return };
    let secrets: Vec<String> = items(f, "secrets")
        .iter()
        .map(|x| {
            let at = num(x, "line").map(|l| format!(":{l}")).unwrap_or_default();
            format!(
                "{}{at}  {}",
                member(text(x, "path").unwrap_or("?")),
                text(x, "rule").unwrap_or("?")
            )
        })
        .collect();
    if !secrets.is_empty() {
        s.list("secrets", secrets);
    }
    let git: Vec<String> = items(f, "git")
        .iter()
        .map(|x| {
            let at = num(x, "line").map(|l| format!(":{l}")).unwrap_or_default();
            format!(
                "{}{at}  {}",
                member(text(x, "path").unwrap_or("?")),
                text(x, "setting").unwrap_or("?")
            )
        })
        .collect();
    if !git.is_empty() {
        s.list("git runs", git);
    }
}

fn findings_warning(s: &mut Summary, v: &Value, unpacked: bool) {
    let Some(f) = v.get("findings") else { return };
    if !items(f, "secrets").is_empty() {
        s.warn("the packet holds secrets (listed above, never their values)".into());
    }
    if !items(f, "git").is_empty() && v.get("git").is_none_or(Value::is_null) {
        s.warn(if unpacked {
            "git settings or hooks in the restored workspace run programs: read them before running git there (or unpack with --neutralize-git)".into()
        } else {
            "git settings or hooks in the packet run programs: unpack with --neutralize-git to leave them out".into()
        });
    }
}

fn neutralized(s: &mut Summary, v: &Value) {
    let Some(g) = v.get("git").filter(|g| g.is_object()) else {
        return;
    };
    let removed: Vec<String> = items(g, "removed")
        .iter()
        .map(|x| {
            format!(
                "{}:{}  {}",
                member(text(x, "path").unwrap_or("?")),
                num(x, "line").unwrap_or(0),
                text(x, "setting").unwrap_or("?")
            )
        })
        .collect();
    if !removed.is_empty() {
        s.list("removed", removed);
    }
    let hooks: Vec<String> = items(g, "hooks_disabled")
        .iter()
        .filter_map(Value::as_str)
        .map(|h| format!("{}  (not executable)", member(h)))
        .collect();
    if !hooks.is_empty() {
        s.list("hooks", hooks);
    }
}

/// What pack and save left out: credential files, secrets, `--exclude`.
fn left_out(s: &mut Summary, v: &Value) {
    let skipped: Vec<String> = items(v, "skipped")
        .iter()
        .map(|x| {
            let why = text(x, "reason")
                .and_then(|r| r.split(':').next())
                .unwrap_or("left out");
            format!(
                "{}  {why} ({})",
                member(text(x, "path").unwrap_or("?")),
                text(x, "rule").unwrap_or("?")
            )
        })
        .collect();
    if !skipped.is_empty() {
        s.list("skipped", skipped);
    }
    let excluded: Vec<String> = items(v, "exclusions")
        .iter()
        .filter(|x| text(x, "rule") == Some("user"))
        .map(|x| {
            format!(
                "{}  ({})",
                text(x, "pattern").unwrap_or("?"),
                count(num(x, "matched").unwrap_or(0), "path", "paths")
            )
        })
        .collect();
    if !excluded.is_empty() {
        s.list("excluded", excluded);
    }
    let secrets: Vec<String> = items(v, "secrets")
        .iter()
        .map(|x| {
            let at = num(x, "line").map(|l| format!(":{l}")).unwrap_or_default();
            format!(
                "{}{at}  {} ({})",
                member(text(x, "path").unwrap_or("?")),
                text(x, "rule").unwrap_or("?"),
                text(x, "action").unwrap_or("?")
            )
        })
        .collect();
    if !secrets.is_empty() {
        s.list("secrets", secrets);
    }
}

fn file_or_stdout(path: &str) -> &str {
    if path == "-" {
        "standard output"
    } else {
        path
    }
}

// ---- one summary per report --------------------------------------------------

/// The summary of a report; empty for one a person needs no words for
/// (`cat`'s, after the member's bytes).
pub fn report(v: &Value) -> String {
    let schema = text(v, "schema").unwrap_or("");
    let name = schema
        .strip_prefix("pillbox.checkpoint.")
        .and_then(|s| s.rsplit_once('/'))
        .map_or("", |(n, _)| n);
    let summary = match name {
        "pack" => pack(v),
        "verify" => verify(v),
        "unpack" => unpack(v),
        "inspect" => return inspect(v),
        "cat" => return String::new(),
        "diff" => return diff(v),
        "restore-check" => restore_check(v),
        "push" => push(v),
        "pull" => pull(v),
        "save" => save(v),
        "restore" => restore(v),
        "refs" => return refs(v),
        "log" => return log(v),
        _ => return serde_json::to_string_pretty(v).unwrap_or_default() + "\n",
    };
    summary.render()
}

fn pack(v: &Value) -> Summary {
    let output = text(v, "output").unwrap_or("-");
    let mut s = Summary::new(
        OK,
        format!(
            "Packed {} into {}",
            text(v, "workspace").unwrap_or("the workspace"),
            file_or_stdout(output)
        ),
    );
    s.row("digest", digest_of(v));
    s.row("size", size_and_contents(v));
    harness_row(&mut s, v);
    left_out(&mut s, v);
    if let (Some(d), true) = (text(v, "digest"), output != "-") {
        s.hint(format!(
            "restore it with: pillbox checkpoint unpack {output} --digest {d} --into DIR"
        ));
    }
    s
}

fn verify(v: &Value) -> Summary {
    let mut s = Summary::new(OK, format!("Verified {}", digest_of(v)));
    s.row("size", size_and_contents(v));
    if let Some(f) = text(v, "format") {
        s.row("format", f);
    }
    s.row(
        "digest",
        if flag(v, "digest_checked") {
            "matches --digest".to_owned()
        } else {
            format!(
                "{} (pass --digest to check it against the one you expect)",
                text(v, "digest").unwrap_or("?")
            )
        },
    );
    harness_row(&mut s, v);
    findings(&mut s, v);
    findings_warning(&mut s, v, false);
    s
}

fn unpack(v: &Value) -> Summary {
    let mut s = Summary::new(
        OK,
        format!(
            "Unpacked {} into {}",
            digest_of(v),
            text(v, "workspace").unwrap_or("the target")
        ),
    );
    s.row("size", size_and_contents(v));
    harness_row(&mut s, v);
    findings(&mut s, v);
    neutralized(&mut s, v);
    findings_warning(&mut s, v, true);
    s
}

fn inspect(v: &Value) -> String {
    let mut s = Summary::new(HEAD, format!("Packet {}", digest_of(v)));
    s.row("size", size_and_contents(v));
    if let Some(f) = text(v, "format") {
        s.row("format", f);
    }
    harness_row(&mut s, v);
    let excluded: Vec<String> = items(v, "exclusions")
        .iter()
        .map(|x| {
            format!(
                "{}  {} ({})",
                text(x, "pattern").unwrap_or("?"),
                text(x, "rule").unwrap_or("?"),
                count(num(x, "matched").unwrap_or(0), "path", "paths")
            )
        })
        .collect();
    if !excluded.is_empty() {
        s.list("left out", excluded);
    }
    findings(&mut s, v);
    let mut out = s.render();
    let members = items(v, "members");
    let width = members
        .iter()
        .filter_map(|m| num(m, "size"))
        .map(|n| bytes(n).len())
        .max()
        .unwrap_or(0);
    for m in members {
        let path = text(m, "path").unwrap_or("?");
        let kind = text(m, "type").unwrap_or("file");
        let mode = text(m, "mode").unwrap_or("0644");
        let size = match kind {
            "file" => bytes(num(m, "size").unwrap_or(0)),
            _ => String::new(),
        };
        let name = match kind {
            "dir" => format!("{path}/"),
            "symlink" => format!("{path} -> {}", text(m, "target").unwrap_or("")),
            _ => path.to_owned(),
        };
        let _ = writeln!(out, "{} {size:>width$}  {name}", ls_mode(kind, mode));
    }
    out
}

/// `-rw-r--r--` from a member's type and octal mode.
fn ls_mode(kind: &str, mode: &str) -> String {
    let bits = u32::from_str_radix(mode, 8).unwrap_or(0);
    let mut s = String::with_capacity(10);
    s.push(match kind {
        "dir" => 'd',
        "symlink" => 'l',
        _ => '-',
    });
    for shift in [6, 3, 0] {
        let b = (bits >> shift) & 7;
        s.push(if b & 4 != 0 { 'r' } else { '-' });
        s.push(if b & 2 != 0 { 'w' } else { '-' });
        s.push(if b & 1 != 0 { 'x' } else { '-' });
    }
    s
}

fn diff(v: &Value) -> String {
    let side = |k: &str| {
        v.get(k).map_or_else(String::new, |x| {
            format!(
                "{} ({})",
                text(x, "packet").unwrap_or("?"),
                text(x, "digest").map(short_digest).unwrap_or_default()
            )
        })
    };
    let mut out = String::new();
    let _ = writeln!(out, "{HEAD}{} → {}{HEAD:#}", side("a"), side("b"));
    let line = |out: &mut String, style: Style, mark: char, m: &Value, what: String| {
        let _ = writeln!(
            out,
            "{style}{mark} {}{style:#}  {KEY}{what}{KEY:#}",
            member(text(m, "path").unwrap_or("?"))
        );
    };
    for m in items(v, "added") {
        line(&mut out, ADD, '+', m, entry(m));
    }
    for m in items(v, "removed") {
        line(&mut out, DEL, '-', m, entry(m));
    }
    for c in items(v, "changed") {
        let (a, b) = (
            c.get("a").unwrap_or(&Value::Null),
            c.get("b").unwrap_or(&Value::Null),
        );
        let what: Vec<String> = items(c, "fields")
            .iter()
            .filter_map(Value::as_str)
            .filter_map(|f| match f {
                "type" => Some(format!(
                    "{} → {}",
                    text(a, "type").unwrap_or("?"),
                    text(b, "type").unwrap_or("?")
                )),
                "mode" => Some(format!(
                    "mode {} → {}",
                    text(a, "mode").unwrap_or("?"),
                    text(b, "mode").unwrap_or("?")
                )),
                "size" => Some(format!(
                    "{} → {}",
                    bytes(num(a, "size").unwrap_or(0)),
                    bytes(num(b, "size").unwrap_or(0))
                )),
                "sha256" if !items(c, "fields").iter().any(|x| x == "size") => {
                    Some("contents".to_owned())
                }
                "target" => Some(format!(
                    "-> {} → {}",
                    text(a, "target").unwrap_or(""),
                    text(b, "target").unwrap_or("")
                )),
                _ => None,
            })
            .collect();
        line(&mut out, WARN, '~', c, what.join(", "));
    }
    if flag(v, "harness_changed") {
        let _ = writeln!(out, "~ the session (harness) changed");
    }
    if flag(v, "exclusions_changed") {
        let _ = writeln!(out, "~ what was left out when packing changed");
    }
    let (added, removed, changed) = (
        items(v, "added").len(),
        items(v, "removed").len(),
        items(v, "changed").len(),
    );
    if flag(v, "identical") {
        let _ = writeln!(out, "identical: same members, session and exclusions");
    } else {
        let _ = writeln!(out, "{added} added, {removed} removed, {changed} changed");
    }
    out
}

fn entry(m: &Value) -> String {
    match text(m, "type") {
        Some("dir") => "directory".to_owned(),
        Some("symlink") => format!("-> {}", text(m, "target").unwrap_or("")),
        _ => bytes(num(m, "size").unwrap_or(0)),
    }
}

fn restore_check(v: &Value) -> Summary {
    let kind = text(v, "harness").unwrap_or("harness");
    let id_name = crate::harness::session_noun(kind);
    let mut s = Summary::new(
        OK,
        format!(
            "The {kind} {id_name} {} can be resumed",
            text(v, "thread_id").unwrap_or("?")
        ),
    );
    if let Some(p) = text(v, "rollout_path") {
        s.row("log", p);
    }
    if let Some(m) = text(v, "model") {
        s.row("model", m);
    }
    let resume: Vec<String> = items(v, "resume")
        .iter()
        .filter_map(Value::as_str)
        .map(shell_word)
        .collect();
    if !resume.is_empty() {
        s.row("resume", resume.join(" "));
    }
    s
}

/// A word quoted for a POSIX shell when it needs it.
fn shell_word(w: &str) -> String {
    if !w.is_empty()
        && w.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_./=:@%+,".contains(&b))
    {
        w.to_owned()
    } else {
        format!("'{}'", w.replace('\'', r"'\''"))
    }
}

/// `ref sessions/x: created`, `moved from sha256:… to sha256:…`, `unchanged`.
fn ref_row(s: &mut Summary, r: &Value) {
    if !r.is_object() {
        return;
    }
    let name = text(r, "name").unwrap_or("?");
    let to = text(r, "digest").map(short_digest).unwrap_or_default();
    let what = if !flag(r, "moved") {
        format!("{name} unchanged (already {to})")
    } else {
        match text(r, "previous") {
            None => format!("{name} created at {to}"),
            Some(p) => format!("{name} moved {} → {to}", short_digest(p)),
        }
    };
    s.row("ref", what);
}

/// What a push sent: `12.0 KiB in 0.42 s (delta: 80 KiB reused)`.
fn sent_row(s: &mut Summary, v: &Value) {
    let mode = text(v, "mode").unwrap_or("?");
    if mode == "none" || !flag(v, "uploaded") && mode != "delta" {
        s.row("sent", "nothing: the store already holds this packet");
        return;
    }
    let mut line = format!("{} ({mode})", bytes(num(v, "bytes_sent").unwrap_or(0)));
    if let Some(t) = v.get("upload_seconds").and_then(Value::as_f64) {
        let _ = write!(line, " in {}", seconds(t));
    }
    if let Some(reused) = v.get("delta").and_then(|d| num(d, "reused_bytes")) {
        if reused > 0 {
            let _ = write!(line, ", {} already stored", bytes(reused));
        }
    }
    if let Some(p) = v.get("parts").filter(|p| p.is_object()) {
        let _ = write!(
            line,
            ", {} of {} parts",
            num(p, "sent").unwrap_or(0),
            num(p, "total").unwrap_or(0)
        );
    }
    if flag(v, "resumed") {
        line.push_str(", resumed");
    }
    s.row("sent", line);
}

/// What a pull received: `3.1 KiB in 0.2 s; 80 KiB from --base, 10 KiB cached`.
fn received_row(s: &mut Summary, v: &Value, time_key: &str) {
    let mut line = bytes(num(v, "bytes_received").unwrap_or(0));
    if let Some(m) = text(v, "mode") {
        let _ = write!(line, " ({m})");
    }
    if let Some(t) = v.get(time_key).and_then(Value::as_f64) {
        let _ = write!(line, " in {}", seconds(t));
    }
    if let Some(d) = v.get("delta").filter(|d| d.is_object()) {
        for (key, what) in [
            ("from_bases_bytes", "from --base packets"),
            ("from_cache_bytes", "from the cache"),
        ] {
            if let Some(n) = num(d, key).filter(|n| *n > 0) {
                let _ = write!(line, ", {} {what}", bytes(n));
            }
        }
    }
    s.row("received", line);
}

fn unusable_bases(s: &mut Summary, v: &Value) {
    let Some(d) = v.get("delta") else { return };
    for b in items(d, "bases") {
        if b.get("usable").and_then(Value::as_bool) == Some(false) {
            s.warn(format!(
                "--base {} was left out: {}",
                text(b, "path").unwrap_or("?"),
                text(b, "error").unwrap_or("not a packet")
            ));
        }
    }
}

fn push(v: &Value) -> Summary {
    let head = if flag(v, "uploaded") {
        format!(
            "Pushed {} to {}",
            digest_of(v),
            text(v, "remote").unwrap_or("the store")
        )
    } else {
        format!(
            "{} is stored at {}",
            digest_of(v),
            text(v, "remote").unwrap_or("the store")
        )
    };
    let mut s = Summary::new(OK, head);
    if let Some(n) = num(v, "size") {
        s.row("size", bytes(n));
    }
    sent_row(&mut s, v);
    ref_row(&mut s, v.get("ref").unwrap_or(&Value::Null));
    s
}

fn pull(v: &Value) -> Summary {
    let what = text(v, "ref").map_or_else(|| digest_of(v), str::to_owned);
    let mut s = Summary::new(
        OK,
        format!(
            "Pulled {what} into {}",
            file_or_stdout(text(v, "output").unwrap_or("-"))
        ),
    );
    s.row("digest", digest_of(v));
    s.row("size", size_and_contents(v));
    harness_row(&mut s, v);
    received_row(&mut s, v, "download_seconds");
    unusable_bases(&mut s, v);
    s
}

fn save(v: &Value) -> Summary {
    let r = v.get("ref").unwrap_or(&Value::Null);
    let mut s = Summary::new(
        OK,
        format!(
            "Saved {} as {}",
            text(v, "workspace").unwrap_or("the workspace"),
            text(r, "name").unwrap_or("a packet")
        ),
    );
    s.row("digest", digest_of(v));
    s.row("size", size_and_contents(v));
    harness_row(&mut s, v);
    sent_row(&mut s, v);
    ref_row(&mut s, r);
    if let Some(o) = text(v, "output") {
        s.row("file", o);
    }
    left_out(&mut s, v);
    s
}

fn restore(v: &Value) -> Summary {
    let what = text(v, "ref").map_or_else(|| digest_of(v), str::to_owned);
    let mut s = Summary::new(
        OK,
        format!(
            "Restored {what} into {}",
            text(v, "workspace").unwrap_or("the target")
        ),
    );
    s.row("digest", digest_of(v));
    s.row("size", size_and_contents(v));
    harness_row(&mut s, v);
    received_row(&mut s, v, "seconds");
    findings(&mut s, v);
    neutralized(&mut s, v);
    findings_warning(&mut s, v, true);
    unusable_bases(&mut s, v);
    s
}

fn refs(v: &Value) -> String {
    let listed = items(v, "refs");
    let prefix = text(v, "prefix").unwrap_or("");
    let under = if prefix.is_empty() {
        String::new()
    } else {
        format!(" under {prefix}")
    };
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{HEAD}{}{under} at {}{HEAD:#}",
        count(listed.len() as u64, "ref", "refs"),
        text(v, "remote").unwrap_or("the store")
    );
    let width = listed
        .iter()
        .filter_map(|r| text(r, "name"))
        .map(|n| n.chars().count())
        .max()
        .unwrap_or(0);
    for r in listed {
        let mut line = format!(
            "  {:<width$}  {}  {KEY}{}{KEY:#}",
            text(r, "name").unwrap_or("?"),
            text(r, "digest").map(short_digest).unwrap_or_default(),
            text(r, "updated").map(when).unwrap_or_default()
        );
        if let Some(n) = num(r, "size") {
            let _ = write!(line, "  {}", bytes(n));
        }
        let labels: Vec<&str> = items(r, "labels")
            .iter()
            .filter_map(Value::as_str)
            .collect();
        if !labels.is_empty() {
            let _ = write!(line, "  {}", labels.join(" "));
        }
        let _ = writeln!(out, "{line}");
    }
    if flag(v, "truncated") {
        let _ = writeln!(
            out,
            "{KEY}more refs match: narrow the prefix or raise --limit{KEY:#}"
        );
    }
    out
}

/// How many changed paths a log entry shows.
const LOG_PATHS: usize = 3;

fn log(v: &Value) -> String {
    let entries = items(v, "entries");
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{HEAD}{} at {}: {}, newest first{HEAD:#}",
        text(v, "ref").unwrap_or("the ref"),
        text(v, "remote").unwrap_or("the store"),
        count(entries.len() as u64, "packet", "packets"),
    );
    for (i, e) in entries.iter().enumerate() {
        let mut line = format!(
            "  {}  {KEY}{}{KEY:#}",
            text(e, "digest").map(short_digest).unwrap_or_default(),
            text(e, "at").map(when).unwrap_or_default(),
        );
        if let Some(by) = text(e, "by") {
            let _ = write!(line, "  by {by}");
        }
        match num(e, "size") {
            Some(n) if flag(e, "stored") => {
                let _ = write!(line, "  {}", bytes(n));
                if let Some(files) = e.get("totals").and_then(|t| num(t, "files")) {
                    let _ = write!(line, ", {}", count(files, "file", "files"));
                }
            }
            _ => {
                let _ = write!(line, "  {WARN}no longer stored{WARN:#}");
            }
        }
        let _ = writeln!(out, "{line}");
        let last = i + 1 == entries.len();
        match e.get("change").filter(|c| !c.is_null()) {
            Some(c) => {
                let signed = c.get("bytes").and_then(Value::as_i64).unwrap_or(0);
                let delta = if signed < 0 {
                    format!("-{}", bytes(signed.unsigned_abs()))
                } else {
                    format!("+{}", bytes(signed as u64))
                };
                let mut said = format!(
                    "{} added, {} removed, {} changed, {delta}",
                    num(c, "added").unwrap_or(0),
                    num(c, "removed").unwrap_or(0),
                    num(c, "changed").unwrap_or(0),
                );
                if flag(c, "harness_changed") {
                    said.push_str(", session log changed");
                }
                let _ = writeln!(out, "      {said}");
                let paths = items(c, "paths");
                for p in paths.iter().take(LOG_PATHS) {
                    let (mark, style) = match text(p, "change") {
                        Some("added") => ('+', ADD),
                        Some("removed") => ('-', DEL),
                        _ => ('~', KEY),
                    };
                    let _ = writeln!(
                        out,
                        "      {style}{mark}{style:#} {} {KEY}({}){KEY:#}",
                        member(text(p, "path").unwrap_or("?")),
                        bytes(num(p, "size").unwrap_or(0))
                    );
                }
                let listed = (num(c, "added").unwrap_or(0)
                    + num(c, "removed").unwrap_or(0)
                    + num(c, "changed").unwrap_or(0)) as usize;
                if listed > LOG_PATHS.min(paths.len()) {
                    let _ = writeln!(
                        out,
                        "      {KEY}… and {} more (--json lists the first {}){KEY:#}",
                        listed - LOG_PATHS.min(paths.len()),
                        paths.len()
                    );
                }
            }
            None if last && !flag(v, "truncated") => {
                let _ = writeln!(out, "      {KEY}the oldest move the store keeps{KEY:#}");
            }
            None => {}
        }
    }
    if flag(v, "truncated") {
        let _ = writeln!(
            out,
            "{KEY}older moves are kept: raise --limit (the store keeps the last {} of a ref){KEY:#}",
            num(v, "kept").unwrap_or(0)
        );
    }
    if let Some(f) = v.get("fetched") {
        let _ = writeln!(
            out,
            "{KEY}read {} in {} requests, {} received{KEY:#}",
            count(num(f, "manifests").unwrap_or(0), "manifest", "manifests"),
            num(f, "requests").unwrap_or(0),
            bytes(num(f, "bytes_received").unwrap_or(0)),
        );
    }
    out
}

/// `2026-12-01 23:40` from RFC 3339 (anything else unchanged).
fn when(t: &str) -> String {
    match (t.get(..10), t.get(11..16)) {
        (Some(day), Some(time)) if t.as_bytes().get(10) == Some(&b'T') => format!("{day} {time}"),
        _ => t.to_owned(),
    }
}

/// A failure for a person: what went wrong, the path, what to do.
pub fn error(r: &ErrorReport) -> String {
    let d = &r.details;
    let mut s = String::new();
    let _ = writeln!(s, "{ERROR}error{ERROR:#}: {}", d.message);
    match (&d.path, d.offset) {
        (Some(p), Some(o)) => {
            let _ = writeln!(s, "  {KEY}path{KEY:#}  {p} (at byte {o})");
        }
        (Some(p), None) => {
            let _ = writeln!(s, "  {KEY}path{KEY:#}  {p}");
        }
        (None, Some(o)) => {
            let _ = writeln!(s, "  {KEY}at{KEY:#}    byte {o}");
        }
        (None, None) => {}
    }
    let _ = writeln!(s, "  {KEY}help{KEY:#}  {}", d.advice);
    let _ = writeln!(s, "  {KEY}code{KEY:#}  {} (exit {})", r.code, r.exit_code);
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plain(s: &str) -> String {
        anstream::adapter::strip_str(s).to_string()
    }

    #[test]
    fn a_pack_summary_is_short_and_names_what_was_left_out() {
        let d = format!("sha256:{}", "ab".repeat(32));
        let v = serde_json::json!({
            "schema": "pillbox.checkpoint.pack/1",
            "digest": d, "size": 5632, "members": 4,
            "totals": {"bytes": 18, "directories": 2, "files": 2, "members": 4, "symlinks": 0},
            "output": "/tmp/a.tar", "workspace": "/tmp/ws", "harness": null,
            "exclusions": [{"rule": "env-file", "pattern": "**/.env", "matched": 1, "why": "long"}],
            "skipped": [{"path": "workspace/.env", "rule": "env-file", "reason": "credential file: environment files (long)"}],
            "secrets": [],
            "a_field_from_later": {"x": 1}
        });
        let text = plain(&report(&v));
        assert!(
            text.starts_with("Packed /tmp/ws into /tmp/a.tar\n"),
            "{text}"
        );
        assert!(text.contains("sha256:abababababab\n"), "{text}");
        assert!(
            text.contains("5.5 KiB: 2 files (18 B), 2 directories"),
            "{text}"
        );
        assert!(text.contains(".env  credential file (env-file)"), "{text}");
        assert_eq!(text.matches("environment files").count(), 0, "{text}");
        assert!(text.contains(&format!("--digest {d} --into DIR")), "{text}");
        assert!(text.lines().count() <= 6, "{text}");
    }

    #[test]
    fn cat_needs_no_words_and_unknown_reports_stay_readable() {
        assert_eq!(
            report(&serde_json::json!({"schema": "pillbox.checkpoint.cat/1"})),
            ""
        );
        let v = serde_json::json!({"schema": "pillbox.checkpoint.new/1", "n": 1});
        assert!(report(&v).contains("\"n\": 1"));
    }

    #[test]
    fn long_lists_are_cut() {
        let skipped: Vec<Value> = (0..25)
            .map(|i| serde_json::json!({"path": format!("workspace/{i}.pem"), "rule": "pem", "reason": "credential file: keys"}))
            .collect();
        let v = serde_json::json!({"schema": "pillbox.checkpoint.pack/1", "skipped": skipped});
        let text = plain(&report(&v));
        assert!(text.contains("… and 15 more"), "{text}");
    }

    #[test]
    fn findings_and_the_session_are_listed() {
        let v = serde_json::json!({
            "schema": "pillbox.checkpoint.unpack/1",
            "digest": format!("sha256:{}", "0".repeat(64)), "size": 10240,
            "totals": {"bytes": 100, "directories": 1, "files": 3, "members": 4, "symlinks": 0},
            "workspace": "/w",
            "harness": {"kind": "codex", "thread_id": "t-1", "model": "gpt-5.1-codex",
                "member": "harness/codex/x", "restored": true, "rollout_path": "/h/r.jsonl"},
            "findings": {
                "secrets": [{"path": "workspace/k.pem", "line": 1, "rule": "private-key"}],
                "git": [{"path": "workspace/.git/config", "line": 3, "setting": "core.fsmonitor", "why": "runs"}]
            },
            "git": null
        });
        let text = plain(&report(&v));
        assert!(
            text.contains(
                "session   codex thread t-1, model gpt-5.1-codex, restored at /h/r.jsonl"
            ),
            "{text}"
        );
        assert!(text.contains("secrets   k.pem:1  private-key"), "{text}");
        assert!(
            text.contains("git runs  .git/config:3  core.fsmonitor"),
            "{text}"
        );
        assert!(text.contains("warning: the packet holds secrets"), "{text}");
        assert!(text.contains("--neutralize-git"), "{text}");
    }

    #[test]
    fn an_error_says_what_where_and_what_to_do() {
        let e = crate::error::CliError::io(
            "open",
            "/x/p.tar",
            std::io::Error::from(std::io::ErrorKind::NotFound),
        );
        let text = plain(&error(&e.report()));
        assert!(text.starts_with("error: cannot open /x/p.tar"), "{text}");
        assert!(text.contains("\n  path  /x/p.tar\n"), "{text}");
        assert!(
            text.contains("\n  help  check that the path exists"),
            "{text}"
        );
        assert!(text.contains("\n  code  io (exit 4)"), "{text}");
    }

    #[test]
    fn resume_commands_are_quoted_for_a_shell() {
        assert_eq!(shell_word("codex"), "codex");
        assert_eq!(shell_word("a b"), "'a b'");
        assert_eq!(shell_word("it's"), r"'it'\''s'");
    }
}
