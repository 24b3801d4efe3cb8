//! What a reader reports about a packet it accepts (docs/session-packet.md
//! §7.4): secrets found by content, files a reported credential rule
//! names, and git settings and hooks that would run programs on the
//! restoring machine. A report, not a refusal: the packet's verdict is the
//! format's, and a packet another tool wrote is flagged, never rejected,
//! for what it holds.

use alloc::string::String;
use alloc::vec::Vec;

use serde::Serialize;

use crate::exclude::{credential_rule, InPacket};
use crate::git;
use crate::header::Kind;
use crate::manifest::{Manifest, Member};
use crate::path;
use crate::secrets::{Detector, Scanner};

/// Everything a reader found. Serialised as the CLI, the Worker and the
/// page show it: `{"secrets": [...], "git": [...]}`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Findings {
    /// Secrets, in member order, then by line.
    pub secrets: Vec<SecretFinding>,
    /// Git settings and hooks that run programs, in member order.
    pub git: Vec<GitFinding>,
}

impl Findings {
    /// Whether nothing was found.
    pub fn is_empty(&self) -> bool {
        self.secrets.is_empty() && self.git.is_empty()
    }
}

/// A secret in a member, never its value.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SecretFinding {
    /// The member.
    pub path: String,
    /// The line the secret is on, or `None` when the file's name is the
    /// finding (a reported credential rule).
    pub line: Option<u64>,
    /// A detector rule id (`secrets::SECRET_RULES`) or a credential rule id.
    pub rule: &'static str,
}

/// A git setting or hook that makes git run a program.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct GitFinding {
    /// The member: a configuration file, or the hook.
    pub path: String,
    /// The setting's line; `None` for a hook.
    pub line: Option<u64>,
    /// The setting's key (`core.fsmonitor`), or `hook` for a hook.
    pub setting: String,
    /// What it makes git do.
    pub why: &'static str,
}

/// What a hook makes git do.
pub const HOOK_WHY: &str = "git runs this executable hook at the operation it is named for";

/// The largest repository configuration file parsed for settings (git's
/// own are a few kilobytes).
const CONFIG_MAX: usize = 1 << 20;

/// What a [`crate::Reader`] reports, for a packet whose bodies are not read
/// as one stream: a consumer that rebuilds a verified packet from bodies it
/// stored (the Worker completing a delta push) feeds each member's body by
/// index, in member order, and gets the same findings.
#[derive(Debug)]
pub struct BodyScan {
    collector: Collector,
    /// The first member not yet started.
    next: usize,
    /// Whether member `next - 1` is being fed.
    open: bool,
}

impl BodyScan {
    /// Starts with what the manifest alone shows (credential names, hooks).
    pub fn new(manifest: &Manifest) -> BodyScan {
        let mut collector = Collector::new();
        collector.manifest(manifest);
        BodyScan {
            collector,
            next: 0,
            open: false,
        }
    }

    /// The next bytes of member `index`'s body (an index into
    /// `manifest.members`, the manifest given to [`BodyScan::new`]).
    /// Members come in order; bytes of a member before the current one,
    /// or past the manifest, are ignored.
    pub fn body(&mut self, manifest: &Manifest, index: usize, bytes: &[u8]) {
        let current = self.open && index + 1 == self.next;
        if !current {
            let Some(member) = manifest.members.get(index) else {
                return;
            };
            if index < self.next {
                return;
            }
            self.reach(manifest, index);
            self.collector.start(member);
            self.next = index + 1;
            self.open = true;
        }
        self.collector.data(bytes);
    }

    /// Ends the member being fed and passes every member before `index`
    /// (those without a body to feed, such as empty files and folders).
    fn reach(&mut self, manifest: &Manifest, index: usize) {
        if core::mem::take(&mut self.open) {
            self.collector.end();
        }
        for m in manifest.members.get(self.next..index).unwrap_or_default() {
            self.collector.start(m);
            self.collector.end();
        }
        self.next = self.next.max(index);
    }

    /// The findings, in member order, then by line.
    pub fn finish(mut self, manifest: &Manifest) -> Findings {
        self.reach(manifest, manifest.members.len());
        self.collector.finish()
    }
}

/// What one body holds, found by scanning its bytes alone: secrets by
/// line and, for a repository configuration file, the git settings that
/// run programs. Bodies with the same bytes and the same
/// [`scan_class`] have the same findings, so a consumer that keeps bodies
/// by their digest scans each once and keeps its findings beside it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BodyFindings {
    /// `(line, rule id)` of each secret, by line.
    pub secrets: Vec<(u64, &'static str)>,
    /// `(line, setting, why)` of each git setting, by line.
    pub git: Vec<(u64, String, &'static str)>,
}

impl BodyFindings {
    /// Whether nothing was found.
    pub fn is_empty(&self) -> bool {
        self.secrets.is_empty() && self.git.is_empty()
    }
}

/// What a body's findings depend on besides its bytes: `0` for an
/// ordinary file, `1` for a git configuration file that is not a
/// repository's, `3` for a repository configuration file (credential
/// rules for git URLs, and the settings that run programs).
pub fn scan_class(member_path: &str) -> u8 {
    let relative = member_path.split_once('/').map_or("", |(_, rest)| rest);
    u8::from(crate::secrets::is_git_config(relative))
        | (u8::from(git::is_repository_config(relative)) << 1)
}

/// Scans one body as it comes, in pieces of any size, for
/// [`BodyFindings`]. Its state can be kept and resumed
/// ([`BodyScanner::snapshot`]), so a body that grew is scanned only from
/// where its earlier version ended.
#[derive(Debug)]
pub struct BodyScanner {
    detector: Detector,
    config: Option<Vec<u8>>,
}

impl BodyScanner {
    /// A scanner for the body of the member at `member_path`.
    pub fn new(scanner: &Scanner, member_path: &str) -> BodyScanner {
        let relative = member_path.split_once('/').map_or("", |(_, rest)| rest);
        BodyScanner {
            detector: scanner.detector(relative),
            config: git::is_repository_config(relative).then(Vec::new),
        }
    }

    /// A scanner in the state `snapshot` recorded, for a member of the same
    /// [`scan_class`]; `None` if it is not such a snapshot.
    pub fn resume(scanner: &Scanner, member_path: &str, snapshot: &[u8]) -> Option<BodyScanner> {
        let relative = member_path.split_once('/').map_or("", |(_, rest)| rest);
        let (config, detector) = match snapshot.split_first()? {
            (0, rest) => (None, rest),
            (1, rest) => {
                let n = u32::from_be_bytes(rest.get(..4)?.try_into().ok()?) as usize;
                (Some(rest.get(4..4 + n)?.to_vec()), rest.get(4 + n..)?)
            }
            _ => return None,
        };
        if config.is_some() != git::is_repository_config(relative) {
            return None;
        }
        Some(BodyScanner {
            detector: scanner.resume(relative, detector)?,
            config,
        })
    }

    /// The next bytes of the body.
    pub fn feed(&mut self, bytes: &[u8]) {
        self.detector.feed(bytes);
        if let Some(config) = &mut self.config {
            if config.len() + bytes.len() <= CONFIG_MAX {
                config.extend_from_slice(bytes);
            } else {
                self.config = None;
            }
        }
    }

    /// Its state after the bytes so far.
    pub fn snapshot(&self) -> Vec<u8> {
        let mut out = Vec::new();
        match &self.config {
            Some(config) => {
                out.push(1);
                out.extend_from_slice(&(config.len() as u32).to_be_bytes());
                out.extend_from_slice(config);
            }
            None => out.push(0),
        }
        out.extend_from_slice(&self.detector.snapshot());
        out
    }

    /// What the body holds.
    pub fn finish(self) -> BodyFindings {
        let secrets = self
            .detector
            .finish()
            .into_iter()
            .map(|f| (f.line, f.rule.id))
            .collect();
        let git = self
            .config
            .map(|c| {
                git::active_settings(&c)
                    .into_iter()
                    .map(|s| (s.line, s.key, s.why))
                    .collect()
            })
            .unwrap_or_default();
        BodyFindings { secrets, git }
    }
}

impl Findings {
    /// A packet's findings from its manifest and its bodies' findings, for
    /// a consumer that scanned bodies one by one ([`BodyScanner`]) or kept
    /// their findings: `body(i)` gives those of member `i`'s body (`None`
    /// for a member without one, or whose body holds nothing). The same
    /// findings a [`Reader`](crate::Reader) reports for the packet.
    pub fn assemble(
        manifest: &Manifest,
        mut body: impl FnMut(usize) -> Option<BodyFindings>,
    ) -> Findings {
        let mut collector = Collector::new();
        collector.manifest(manifest);
        for (i, m) in manifest.members.iter().enumerate() {
            let Some(found) = body(i) else { continue };
            for (line, rule) in found.secrets {
                collector.findings.secrets.push(SecretFinding {
                    path: String::from(&m.path),
                    line: Some(line),
                    rule,
                });
            }
            for (line, setting, why) in found.git {
                collector.findings.git.push(GitFinding {
                    path: String::from(&m.path),
                    line: Some(line),
                    setting,
                    why,
                });
            }
        }
        collector.finish()
    }

    /// What the body of the member at `path` holds, as these findings
    /// report it: the inverse of [`Findings::assemble`], for keeping a
    /// packet's findings by body.
    pub fn of_body(&self, path: &str) -> BodyFindings {
        BodyFindings {
            secrets: self
                .secrets
                .iter()
                .filter(|f| f.path == path)
                .filter_map(|f| Some((f.line?, f.rule)))
                .collect(),
            git: self
                .git
                .iter()
                .filter(|f| f.path == path)
                .filter_map(|f| Some((f.line?, f.setting.clone(), f.why)))
                .collect(),
        }
    }
}

/// Collects the findings while a reader reads: fed the reader's own
/// events, so every body is looked at in the same pass that hashes it.
#[derive(Debug)]
pub(crate) struct Collector {
    scanner: Scanner,
    findings: Findings,
    /// The file member being read, its detector, and its bytes if it is a
    /// repository configuration file.
    current: Option<Current>,
}

#[derive(Debug)]
struct Current {
    path: String,
    size: u64,
    fed: u64,
    /// Made when the body comes in more than one piece; a body that comes
    /// whole is scanned at once.
    detector: Option<Detector>,
    config: Option<Vec<u8>>,
}

impl Collector {
    pub(crate) fn new() -> Collector {
        Collector {
            scanner: Scanner::new(),
            findings: Findings::default(),
            current: None,
        }
    }

    /// The findings the manifest alone shows: files a reported credential
    /// rule names, and executable hooks.
    pub(crate) fn manifest(&mut self, manifest: &Manifest) {
        for m in &manifest.members {
            if m.kind() == Kind::Dir {
                continue;
            }
            let relative = m.relative_path();
            if let Some(rule) = credential_rule(relative) {
                if rule.in_packet == InPacket::Reported {
                    self.findings.secrets.push(SecretFinding {
                        path: String::from(&m.path),
                        line: None,
                        rule: rule.id,
                    });
                }
            }
            if m.kind() == Kind::File && m.mode().is_executable() && git::is_hook(relative) {
                self.findings.git.push(GitFinding {
                    path: String::from(&m.path),
                    line: None,
                    setting: String::from("hook"),
                    why: HOOK_WHY,
                });
            }
        }
    }

    pub(crate) fn start(&mut self, member: &Member) {
        self.current = (member.kind() == Kind::File).then(|| {
            let relative = member.relative_path();
            Current {
                path: String::from(&member.path),
                size: member.size(),
                fed: 0,
                detector: None,
                config: git::is_repository_config(relative).then(Vec::new),
            }
        });
    }

    pub(crate) fn data(&mut self, bytes: &[u8]) {
        let Some(current) = &mut self.current else {
            return;
        };
        let relative = current.path.split_once('/').map_or("", |(_, rest)| rest);
        if current.fed == 0 && bytes.len() as u64 == current.size {
            let found = self.scanner.scan(relative, bytes);
            Self::secrets(&mut self.findings, &current.path, found);
        } else {
            current
                .detector
                .get_or_insert_with(|| self.scanner.detector(relative))
                .feed(bytes);
        }
        current.fed += bytes.len() as u64;
        if let Some(config) = &mut current.config {
            if config.len() + bytes.len() <= CONFIG_MAX {
                config.extend_from_slice(bytes);
            } else {
                // Too large to be git's: not parsed.
                current.config = None;
            }
        }
    }

    pub(crate) fn end(&mut self) {
        let Some(current) = self.current.take() else {
            return;
        };
        if let Some(detector) = current.detector {
            Self::secrets(&mut self.findings, &current.path, detector.finish());
        }
        if let Some(config) = current.config {
            for s in git::active_settings(&config) {
                self.findings.git.push(GitFinding {
                    path: current.path.clone(),
                    line: Some(s.line),
                    setting: s.key,
                    why: s.why,
                });
            }
        }
    }

    fn secrets(findings: &mut Findings, path: &str, found: Vec<crate::secrets::Finding>) {
        for f in found {
            findings.secrets.push(SecretFinding {
                path: String::from(path),
                line: Some(f.line),
                rule: f.rule.id,
            });
        }
    }

    /// The findings, in member order, then by line.
    pub(crate) fn finish(mut self) -> Findings {
        let order = |a: &str, b: &str| path::compare(a, b);
        self.findings
            .secrets
            .sort_by(|a, b| order(&a.path, &b.path).then(a.line.cmp(&b.line)));
        self.findings
            .git
            .sort_by(|a, b| order(&a.path, &b.path).then(a.line.cmp(&b.line)));
        self.findings
    }
}

#[cfg(test)]
mod tests {
    use alloc::format;
    use alloc::vec;

    use super::*;
    use crate::in_memory::{build, Source};
    use crate::limits::Limits;
    use crate::reader::{self, ReaderOptions};

    fn file(path: &str, contents: &[u8], executable: bool) -> Source {
        Source::File {
            path: path.into(),
            contents: contents.to_vec(),
            executable,
        }
    }

    #[test]
    fn bodies_fed_by_index_find_what_the_reader_finds() {
        let mut sources = vec![
            Source::Dir {
                path: "workspace".into(),
            },
            file("workspace/.env", b"", false),
            Source::Dir {
                path: "workspace/.git".into(),
            },
            file(
                "workspace/.git/config",
                b"[core]\n\tfsmonitor = ./watch\n",
                false,
            ),
            Source::Dir {
                path: "workspace/.git/hooks".into(),
            },
            file("workspace/.git/hooks/pre-commit", b"#!/bin/sh\n", true),
            file("workspace/empty.txt", b"", false),
        ];
        let samples = crate::secrets::tests::samples();
        for (i, (_, sample)) in samples.iter().enumerate() {
            let body = format!("line one\nline two\n{sample}");
            sources.push(file(
                &format!("workspace/s{i:02}.txt"),
                body.as_bytes(),
                false,
            ));
        }
        let built = build(&sources, None, vec![], &Limits::FORMAT).unwrap();
        let read = reader::verify(&built.bytes, ReaderOptions::default()).unwrap();
        let found = &read.findings;
        assert_eq!(found.secrets.len(), samples.len() + 1, "{found:?}");
        assert!(found
            .secrets
            .iter()
            .any(|f| f.path == "workspace/.env" && f.line.is_none()));
        for (i, (rule, _)) in samples.iter().enumerate() {
            let path = format!("workspace/s{i:02}.txt");
            assert!(
                found
                    .secrets
                    .iter()
                    .any(|f| f.path == path && f.rule == *rule),
                "{rule} in {path}: {found:?}"
            );
        }
        assert_eq!(found.git.len(), 2, "{found:?}");

        let manifest = &read.manifest;
        for piece in [1, 5, 64, 4096, usize::MAX] {
            let mut scan = BodyScan::new(manifest);
            for (i, m) in manifest.members.iter().enumerate() {
                let at = read.data_offsets[i] as usize;
                let body = &built.bytes[at..at + m.size() as usize];
                for chunk in body.chunks(piece.min(body.len().max(1))) {
                    scan.body(manifest, i, chunk);
                }
            }
            // A member past the manifest, or before the current one, is
            // not the packet's.
            scan.body(manifest, 0, b"GITHUB_TOKEN=x");
            scan.body(manifest, manifest.members.len(), b"x");
            assert_eq!(&scan.finish(manifest), found, "pieces of {piece}");
        }

        // Body by body, each scanned on its own, stopped anywhere and
        // resumed from its snapshot: the same findings, assembled.
        let scanner = Scanner::new();
        for cut in [0usize, 1, 9, 17, 40, usize::MAX] {
            let mut bodies: Vec<Option<BodyFindings>> = Vec::new();
            for (i, m) in manifest.members.iter().enumerate() {
                let Some(b) = m.body() else {
                    bodies.push(None);
                    continue;
                };
                let at = read.data_offsets[i] as usize;
                let body = &built.bytes[at..at + b.size as usize];
                let cut = cut.min(body.len());
                let mut first = BodyScanner::new(&scanner, &m.path);
                for piece in body[..cut].chunks(3) {
                    first.feed(piece);
                }
                let snapshot = first.snapshot();
                let mut resumed = BodyScanner::resume(&scanner, &m.path, &snapshot).unwrap();
                resumed.feed(&body[cut..]);
                let got = resumed.finish();
                assert_eq!(got, found.of_body(&m.path), "{} cut at {cut}", m.path);
                bodies.push(Some(got));
            }
            let assembled = Findings::assemble(manifest, |i| bodies[i].clone());
            assert_eq!(&assembled, found, "cut at {cut}");
        }
        // A snapshot is refused for a member of another class, and garbage
        // is no snapshot.
        let config = BodyScanner::new(&scanner, "workspace/.git/config").snapshot();
        assert!(BodyScanner::resume(&scanner, "workspace/a.txt", &config).is_none());
        assert!(BodyScanner::resume(&scanner, "workspace/a.txt", b"\0\x09").is_none());
        assert_eq!(scan_class("workspace/a.txt"), 0);
        assert_eq!(scan_class("workspace/.git/config"), 3);
    }
}
