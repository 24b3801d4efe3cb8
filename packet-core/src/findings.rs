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
            if m.kind == Kind::Dir {
                continue;
            }
            let relative = m.relative_path();
            if let Some(rule) = credential_rule(relative) {
                if rule.in_packet == InPacket::Reported {
                    self.findings.secrets.push(SecretFinding {
                        path: m.path.clone(),
                        line: None,
                        rule: rule.id,
                    });
                }
            }
            if m.kind == Kind::File && m.mode == 0o755 && git::is_hook(relative) {
                self.findings.git.push(GitFinding {
                    path: m.path.clone(),
                    line: None,
                    setting: String::from("hook"),
                    why: HOOK_WHY,
                });
            }
        }
    }

    pub(crate) fn start(&mut self, member: &Member) {
        self.current = (member.kind == Kind::File).then(|| {
            let relative = member.relative_path();
            Current {
                path: member.path.clone(),
                size: member.size,
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
                let body = &built.bytes[at..at + m.size as usize];
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
    }
}
