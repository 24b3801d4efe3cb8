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
