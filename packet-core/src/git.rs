//! A git repository carried in a packet is live: its `.git/config` can
//! name programs that git runs on the restoring machine at the first
//! `git status`, `git diff` or `git fetch` there, and its executable hooks
//! run at the first commit (docs/session-packet.md §7.3). This module
//! finds them, for readers to report, and writes a configuration without
//! them, for an unpacker asked to neutralise them.
//!
//! ```
//! use packet_core::git;
//!
//! let config = b"[core]\n\tbare = false\n\tfsmonitor = ./x.sh\n[filter \"lfs\"]\n\tsmudge = git-lfs smudge %f\n";
//! let found = git::active_settings(config);
//! let keys: Vec<&str> = found.iter().map(|s| s.key.as_str()).collect();
//! assert_eq!(keys, ["core.fsmonitor", "filter.lfs.smudge"]);
//! assert_eq!(found[0].line, 3);
//! let (cleaned, removed) = git::neutralize(config);
//! assert_eq!(removed, found);
//! assert_eq!(cleaned, b"[core]\n\tbare = false\n[filter \"lfs\"]\n");
//! ```

use alloc::string::String;
use alloc::vec::Vec;

use serde::Serialize;

/// A setting that makes git run a program, as a reader reports it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ActiveSetting {
    /// Its key as git names it: section, subsection (as written) and name,
    /// lowercased where git ignores case (`core.fsmonitor`,
    /// `filter.lfs.smudge`).
    pub key: String,
    /// The line it starts on, counted from 1.
    pub line: u64,
    /// What it makes git do.
    pub why: &'static str,
}

/// Whether a path below its root is a repository's own configuration,
/// which git reads for every command run in the repository: `.git/config`,
/// a submodule's under `.git/modules/`, and per-worktree
/// `config.worktree` files. Components compare without case, as they do
/// on the file systems that ignore it.
pub fn is_repository_config(relative: &str) -> bool {
    // Every member of every packet comes here: the name decides for
    // nearly all of them, before anything is collected.
    let name = relative.rsplit('/').next().unwrap_or(relative);
    if !name.eq_ignore_ascii_case("config") && !name.eq_ignore_ascii_case("config.worktree") {
        return false;
    }
    let parts: Vec<&str> = relative.split('/').collect();
    let Some((_, dirs)) = parts.split_last() else {
        return false;
    };
    let Some(git) = dirs.iter().rposition(|c| c.eq_ignore_ascii_case(".git")) else {
        return false;
    };
    let inside = &dirs[git + 1..];
    let is = |c: &str, word: &str| c.eq_ignore_ascii_case(word);
    match inside {
        // .git/config, .git/config.worktree
        [] => true,
        // .git/worktrees/<name>/config.worktree
        [w, _] if is(w, "worktrees") => true,
        // .git/modules/<name>/config, and nested submodules'
        [m, .., _] if is(m, "modules") => true,
        _ => false,
    }
}

/// Whether a path below its root is a hook git runs in a repository: a
/// file in a `hooks` folder of a `.git` directory (the repository's own,
/// or a submodule's under `.git/modules/`), not a `.sample`. Git runs a
/// hook only if it is executable: the caller checks the mode.
pub fn is_hook(relative: &str) -> bool {
    let mut parts = relative.rsplit('/');
    let (Some(name), Some(folder)) = (parts.next(), parts.next()) else {
        return false;
    };
    folder.eq_ignore_ascii_case("hooks")
        && !name.to_ascii_lowercase().ends_with(".sample")
        && parts.any(|c| c.eq_ignore_ascii_case(".git"))
}

/// Every setting in a git configuration file's bytes that makes git run
/// a program (or read settings from another file), in file order.
pub fn active_settings(config: &[u8]) -> Vec<ActiveSetting> {
    entries(config)
        .into_iter()
        .filter_map(|e| {
            let why = dangerous(&e)?;
            Some(ActiveSetting {
                key: e.key(),
                line: e.first_line as u64 + 1,
                why,
            })
        })
        .collect()
}

/// The configuration without the settings [`active_settings`] finds:
/// their lines are left out (a section header that shares a line with
/// one is kept); every other byte is as it was.
pub fn neutralize(config: &[u8]) -> (Vec<u8>, Vec<ActiveSetting>) {
    let all = entries(config);
    let removed: Vec<(&Entry<'_>, &'static str)> = all
        .iter()
        .filter_map(|e| dangerous(e).map(|why| (e, why)))
        .collect();
    let mut out = Vec::with_capacity(config.len());
    for (index, line) in lines(config).enumerate() {
        match removed
            .iter()
            .find(|(e, _)| (e.first_line..=e.last_line).contains(&index))
        {
            None => out.extend_from_slice(line.with_end),
            Some((e, _)) => {
                if index == e.first_line {
                    if let Some(header) = e.header_on_line {
                        out.extend_from_slice(header);
                        out.push(b'\n');
                    }
                }
            }
        }
    }
    let settings = removed
        .into_iter()
        .map(|(e, why)| ActiveSetting {
            key: e.key(),
            line: e.first_line as u64 + 1,
            why,
        })
        .collect();
    (out, settings)
}

/// Why a setting is reported, or `None` when git runs nothing for it.
fn dangerous(e: &Entry<'_>) -> Option<&'static str> {
    let value = e.value.as_deref().unwrap_or(b"");
    let section = e.section.as_str();
    let name = e.name.as_str();
    let with_sub = e.subsection.is_some();
    Some(match (section, with_sub, name) {
        ("core", false, "fsmonitor") if !is_boolean(value) => {
            "runs this program at every git status and at most other commands"
        }
        ("core", false, "hookspath") => "runs the hooks in another folder",
        ("core", false, "sshcommand") => "runs this command instead of ssh at every fetch and push",
        ("core", false, "gitproxy") => "runs this program to connect at every git:// fetch",
        ("core", false, "askpass") => "runs this program to ask for a password",
        ("core", false, "pager") => "runs this program to page the output of log, diff and show",
        ("core", false, "editor") | ("sequence", false, "editor") => {
            "runs this program at every commit message or rebase edit"
        }
        ("diff", false, "external") => "runs this program for every git diff",
        ("diff", true, "textconv" | "command") => {
            "runs this program on files at git diff and log -p"
        }
        ("filter", true, "clean" | "smudge" | "process") => {
            "runs this program on files at checkout, add and status"
        }
        ("merge", true, "driver") => "runs this program at merges",
        ("credential", _, "helper") => {
            "runs this program at every fetch and push that needs a login"
        }
        ("gpg", _, "program") => "runs this program to sign or verify commits and tags",
        ("remote", true, "uploadpack" | "receivepack") => {
            "runs this program at fetch or push over a local or ssh remote"
        }
        ("pager", _, _) if !is_boolean(value) => "runs this program to page a command's output",
        ("difftool" | "mergetool", true, "cmd") => "runs this program at git difftool or mergetool",
        ("include", false, "path") | ("includeif", true, "path") => {
            "reads more settings, which may run programs, from another file"
        }
        _ => return None,
    })
}

/// git's boolean spellings (and an empty value): a `core.fsmonitor` or
/// `pager.<cmd>` that is a boolean names no program.
fn is_boolean(value: &[u8]) -> bool {
    let v = value.trim_ascii();
    ["true", "false", "yes", "no", "on", "off", "1", "0", ""]
        .iter()
        .any(|b| v.eq_ignore_ascii_case(b.as_bytes()))
}

/// One line and its end (the newline, if any).
struct Line<'a> {
    text: &'a [u8],
    with_end: &'a [u8],
}

fn lines(config: &[u8]) -> impl Iterator<Item = Line<'_>> {
    config
        .split_inclusive(|&b| b == b'\n')
        .map(|with_end| Line {
            text: with_end.strip_suffix(b"\n").unwrap_or(with_end),
            with_end,
        })
}

/// A `name = value` entry of a configuration file.
struct Entry<'a> {
    section: String,
    subsection: Option<String>,
    name: String,
    /// The value, continuation lines joined; `None` for a bare name (a
    /// boolean true).
    value: Option<Vec<u8>>,
    /// The lines it spans (0-based).
    first_line: usize,
    last_line: usize,
    /// A section header written on the same line before the entry.
    header_on_line: Option<&'a [u8]>,
}

impl Entry<'_> {
    fn key(&self) -> String {
        match &self.subsection {
            Some(sub) => alloc::format!("{}.{}.{}", self.section, sub, self.name),
            None => alloc::format!("{}.{}", self.section, self.name),
        }
    }
}

/// The entries of a configuration file, read as git reads it: sections
/// `[name]`, `[name "subsection"]` and `[name.subsection]`, names without
/// case, `#` and `;` comments, quoted values and `\` at a line's end
/// continuing the value. A line git would refuse is skipped.
fn entries(config: &[u8]) -> Vec<Entry<'_>> {
    let mut out = Vec::new();
    let mut section = String::new();
    let mut subsection: Option<String> = None;
    let all: Vec<Line<'_>> = lines(config).collect();
    let mut index = 0;
    while index < all.len() {
        let first_line = index;
        let mut text = trim_start(all[index].text);
        let mut header_on_line = None;
        if text.first() == Some(&b'[') {
            let Some(close) = header_end(text) else {
                index += 1;
                continue;
            };
            let (s, sub) = parse_header(&text[1..close]);
            section = s;
            subsection = sub;
            let line_start = all[index].text.len() - text.len();
            header_on_line = Some(&all[index].text[..line_start + close + 1]);
            text = trim_start(&text[close + 1..]);
        }
        index += 1;
        if text.is_empty() || text[0] == b'#' || text[0] == b';' {
            continue;
        }
        let name_len = text
            .iter()
            .take_while(|b| b.is_ascii_alphanumeric() || **b == b'-')
            .count();
        if name_len == 0 || !text[0].is_ascii_alphabetic() {
            continue;
        }
        let name = String::from_utf8_lossy(&text[..name_len]).to_ascii_lowercase();
        let rest = trim_start(&text[name_len..]);
        let value = if rest.first() == Some(&b'=') {
            let mut value = Vec::new();
            let mut piece = &rest[1..];
            loop {
                if !read_value(piece, &mut value) || index >= all.len() {
                    break;
                }
                piece = all[index].text;
                index += 1;
            }
            Some(value)
        } else {
            None
        };
        out.push(Entry {
            section: section.clone(),
            subsection: subsection.clone(),
            name,
            value,
            first_line,
            last_line: index - 1,
            header_on_line,
        });
    }
    out
}

fn trim_start(s: &[u8]) -> &[u8] {
    let n = s.iter().take_while(|b| b.is_ascii_whitespace()).count();
    &s[n..]
}

/// Where a section header's `]` is, outside the subsection's quotes.
fn header_end(text: &[u8]) -> Option<usize> {
    let mut quoted = false;
    let mut escaped = false;
    for (i, &b) in text.iter().enumerate() {
        match b {
            _ if escaped => escaped = false,
            b'\\' if quoted => escaped = true,
            b'"' => quoted = !quoted,
            b']' if !quoted => return Some(i),
            _ => {}
        }
    }
    None
}

/// `name`, `name "subsection"` or `name.subsection` (the old form, which
/// git lowercases).
fn parse_header(inside: &[u8]) -> (String, Option<String>) {
    let inside = inside.trim_ascii();
    if let Some(quote) = inside.iter().position(|&b| b == b'"') {
        let name = String::from_utf8_lossy(inside[..quote].trim_ascii()).to_ascii_lowercase();
        let mut sub = Vec::new();
        let mut escaped = false;
        for &b in &inside[quote + 1..] {
            match b {
                _ if escaped => {
                    sub.push(b);
                    escaped = false;
                }
                b'\\' => escaped = true,
                b'"' => break,
                _ => sub.push(b),
            }
        }
        return (name, Some(String::from_utf8_lossy(&sub).into_owned()));
    }
    let lower = String::from_utf8_lossy(inside).to_ascii_lowercase();
    match lower.split_once('.') {
        Some((name, sub)) => (String::from(name), Some(String::from(sub))),
        None => (lower, None),
    }
}

/// Appends one line's piece of a value; returns whether the value goes on
/// on the next line (a `\` at the end, outside quotes or inside them).
fn read_value(piece: &[u8], value: &mut Vec<u8>) -> bool {
    let mut quoted = false;
    let mut i = 0;
    while i < piece.len() {
        match piece[i] {
            b'\\' if i + 1 == piece.len() => return true,
            b'\\' => {
                i += 1;
                value.push(match piece[i] {
                    b'n' => b'\n',
                    b't' => b'\t',
                    b'b' => 8,
                    other => other,
                });
            }
            b'"' => quoted = !quoted,
            b'#' | b';' if !quoted => break,
            b => value.push(b),
        }
        i += 1;
    }
    // Trailing blanks outside quotes are not part of the value.
    while value.last().is_some_and(|b| *b == b' ' || *b == b'\t') && !quoted {
        value.pop();
    }
    if value.first().is_some_and(|b| *b == b' ' || *b == b'\t') {
        let n = value
            .iter()
            .take_while(|b| **b == b' ' || **b == b'\t')
            .count();
        value.drain(..n);
    }
    false
}

/// Each line of `config` with the URL credentials and authorization
/// headers the secret detector looks for: (0-based line, whether it is an
/// `extraheader`).
pub(crate) fn credential_lines(config: &[u8]) -> Vec<(usize, bool)> {
    let mut out = Vec::new();
    for e in entries(config) {
        let value = e.value.as_deref().unwrap_or(b"");
        if e.name == "extraheader" && e.section == "http" && authorization_with_credential(value) {
            out.push((e.first_line, true));
        }
    }
    for (index, line) in lines(config).enumerate() {
        if url_with_password(line.text) {
            out.push((index, false));
        }
    }
    out
}

/// `Authorization: <scheme> <credential>` with a credential of some
/// length, as `actions/checkout` and CI systems write it.
fn authorization_with_credential(value: &[u8]) -> bool {
    let v = value.trim_ascii();
    let Some(rest) = v
        .get(..14)
        .filter(|h| h.eq_ignore_ascii_case(b"authorization:"))
        .map(|_| v[14..].trim_ascii())
    else {
        return false;
    };
    let mut words = rest
        .split(|b| b.is_ascii_whitespace())
        .filter(|w| !w.is_empty());
    let (Some(scheme), Some(credential)) = (words.next(), words.next()) else {
        return false;
    };
    let known = [&b"basic"[..], b"bearer", b"token"]
        .iter()
        .any(|s| scheme.eq_ignore_ascii_case(s));
    known && credential.len() >= 8
}

/// Whether a line holds a URL whose user information has a password
/// (`scheme://user:password@host`), as a remote URL with a token does.
fn url_with_password(line: &[u8]) -> bool {
    let mut from = 0;
    while let Some(at) = find(&line[from..], b"://") {
        let start = from + at + 3;
        let authority_end = line[start..]
            .iter()
            .position(|&b| matches!(b, b'/' | b'"' | b'\'' | b' ' | b'\t' | b']' | b'?' | b'#'))
            .map_or(line.len(), |i| start + i);
        let authority = &line[start..authority_end];
        if let Some(at_sign) = authority.iter().rposition(|&b| b == b'@') {
            let userinfo = &authority[..at_sign];
            if let Some(colon) = userinfo.iter().position(|&b| b == b':') {
                if colon + 1 < userinfo.len() && at_sign + 1 < authority.len() {
                    return true;
                }
            }
        }
        from = start;
    }
    false
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(config: &str) -> Vec<(String, u64)> {
        active_settings(config.as_bytes())
            .into_iter()
            .map(|s| (s.key, s.line))
            .collect()
    }

    #[test]
    fn settings_that_run_programs_are_found_however_they_are_written() {
        let config = "[core]\n\trepositoryformatversion = 0\n\tfsmonitor = true\n\tFSMonitor = .git/fsm.sh\n\
[Core] sshCommand = ssh -o ProxyCommand=x\n\
[core]\n\thooksPath = tools/hooks\n\
[filter \"lfs\"]\n\tclean = git-lfs clean -- %f\n\tprocess = x\n\trequired = true\n\
[diff \"pdf\"]\n\ttextconv = pdftotext\n\
[diff]\n\texternal = difft\n\tcolorMoved = zebra\n\
[remote \"origin\"]\n\turl = https://example.invalid/r.git\n\tuploadpack = ./evil\n\
[credential]\n\thelper = !f() { cat; }; f\n\
[include]\n\tpath = ../shared.gitconfig\n\
[pager]\n\tlog = false\n\tdiff = delta\n\
[core.x]\n\teditor = not-core\n\
# [core] fsmonitor = commented out\n\
[core]\n\tpager = less \\\n\t-R\n";
        assert_eq!(
            keys(config),
            [
                ("core.fsmonitor".into(), 4),
                ("core.sshcommand".into(), 5),
                ("core.hookspath".into(), 7),
                ("filter.lfs.clean".into(), 9),
                ("filter.lfs.process".into(), 10),
                ("diff.pdf.textconv".into(), 13),
                ("diff.external".into(), 15),
                ("remote.origin.uploadpack".into(), 19),
                ("credential.helper".into(), 21),
                ("include.path".into(), 23),
                ("pager.diff".into(), 26),
                ("core.pager".into(), 31),
            ]
        );
    }

    #[test]
    fn neutralizing_leaves_every_other_byte() {
        let config = b"[core]\n\tbare = false\n\tpager = less \\\n\t\t-R\n\tautocrlf = input\n[core] editor = vim\n[user]\n\tname = A\n";
        let (out, removed) = neutralize(config);
        assert_eq!(
            out,
            b"[core]\n\tbare = false\n\tautocrlf = input\n[core]\n[user]\n\tname = A\n"
        );
        let keys: Vec<&str> = removed.iter().map(|s| s.key.as_str()).collect();
        assert_eq!(keys, ["core.pager", "core.editor"]);
        assert!(active_settings(&out).is_empty());
        // Nothing to remove: the bytes come back unchanged.
        let plain = b"[core]\n\tbare = false\n[remote \"o\"]\n\turl = x\n";
        assert_eq!(neutralize(plain).0, plain);
        let no_newline = b"[core]\n\tbare = false";
        assert_eq!(neutralize(no_newline).0, no_newline);
    }

    #[test]
    fn repository_config_and_hooks_by_path() {
        for p in [
            ".git/config",
            "sub/.git/config",
            ".GIT/CONFIG",
            ".git/modules/lib/config",
            ".git/modules/a/b/config",
            ".git/worktrees/w/config.worktree",
            ".git/config.worktree",
        ] {
            assert!(is_repository_config(p), "{p}");
        }
        for p in [
            "config",
            ".gitconfig",
            "src/config",
            ".git/hooks/config",
            "x.git/config",
        ] {
            assert!(!is_repository_config(p), "{p}");
        }
        for p in [
            ".git/hooks/pre-commit",
            "a/.git/hooks/post-checkout",
            ".git/modules/m/hooks/pre-push",
        ] {
            assert!(is_hook(p), "{p}");
        }
        for p in [
            ".git/hooks/pre-commit.sample",
            "hooks/pre-commit",
            ".githooks/pre-commit",
            ".git/hooks",
        ] {
            assert!(!is_hook(p), "{p}");
        }
    }

    #[test]
    fn credentials_in_urls_and_headers() {
        let config = b"[remote \"origin\"]\n\turl = https://x-access-token:abc123def@github.com/o/r.git\n\
[remote \"up\"]\n\turl = git@github.com:o/r.git\n\turl = https://user@host/r\n\
[http \"https://github.com/\"]\n\textraheader = AUTHORIZATION: basic eC1hY2Nlc3MtdG9rZW46Z2hz\n\
[http]\n\textraheader = X-Trace: 1\n[url \"https://u:p4ss@mirror/\"]\n\tinsteadOf = https://github.com/\n";
        assert_eq!(
            credential_lines(config),
            [(6, true), (1, false), (9, false)]
        );
    }
}
