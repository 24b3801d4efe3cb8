//! What pack does with the secrets packet-core's detector finds in the
//! files it reads (docs/cli.md, "Secrets"): refuse the pack (the default),
//! or leave those files out and record them (`--secrets exclude`). Files
//! matching `--allow-secret` and files inside published packages
//! (`node_modules/`, `site-packages/`, a published crate...) are packed and
//! reported: their keys are their authors' test fixtures.

use std::collections::{BTreeMap, BTreeSet};

use packet_core::secrets::{Finding, SecretRule, SECRET_RULES};
use packet_core::{exclude, Exclusion};
use serde::Serialize;

use crate::error::{CliError, Refused};
use crate::walk::{Skipped, Walk};

/// What to do with a file that holds a secret.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum SecretsMode {
    /// Refuse the pack, naming every secret's file, line and rule.
    #[default]
    Refuse,
    /// Leave the files out and record them in the manifest's exclusions.
    Exclude,
}

/// The options that decide what a secret does to the pack.
#[derive(Clone, Debug, Default)]
pub struct SecretPolicy {
    /// Refuse or exclude.
    pub mode: SecretsMode,
    /// `--allow-secret` globs, relative to the root (as `--exclude`).
    pub allow: Vec<String>,
}

/// A secret in a file being packed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Found {
    /// The member the file would be.
    pub member: String,
    /// Its line.
    pub line: u64,
    /// The detector rule.
    pub rule: &'static SecretRule,
}

impl Found {
    /// Each finding of a file.
    pub fn of(member: &str, findings: Vec<Finding>) -> impl Iterator<Item = Found> + '_ {
        findings.into_iter().map(move |f| Found {
            member: member.to_owned(),
            line: f.line,
            rule: f.rule,
        })
    }
}

/// One secret as the pack report shows it.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct SecretReport {
    /// The member.
    pub path: String,
    /// The line.
    pub line: u64,
    /// The detector rule.
    pub rule: &'static str,
    /// `excluded` (left out, `--secrets exclude`), `allowed`
    /// (`--allow-secret`), `published` (inside published packages) or,
    /// in git history, `on-remote` (a remote-tracking ref reaches it).
    pub action: &'static str,
    /// For a secret in git history (`path` is then the repository's git
    /// directory): the object that holds it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub git: Option<GitObject>,
}

/// The git object a secret in history lies in.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct GitObject {
    /// The commit whose tree first holds it (12 hex digits), or the
    /// commit whose message holds it; `null` for a staged or unreachable
    /// object.
    pub commit: Option<String>,
    /// Its path in that tree or in the index; `null` for a message or an
    /// unreachable object.
    pub path: Option<String>,
    /// The object's id.
    pub object: String,
    /// `blob`, `commit` or `tag`.
    pub kind: String,
}

/// Why a secret does not stop the pack, if it does not.
fn exempt(found: &Found, policy: &SecretPolicy, walk: &Walk) -> Option<&'static str> {
    let relative = found.member.split_once('/').map_or("", |(_, r)| r);
    if policy
        .allow
        .iter()
        .any(|g| exclude::glob_match(g, relative))
    {
        return Some("allowed");
    }
    walk.is_published(&found.member).then_some("published")
}

/// The secrets that stop the pack as it is: those neither allowed nor
/// published.
pub fn blocking(found: &[Found], policy: &SecretPolicy, walk: &Walk) -> Vec<Found> {
    found
        .iter()
        .filter(|f| exempt(f, policy, walk).is_none())
        .cloned()
        .collect()
}

/// The report of the secrets that were packed (allowed, published).
pub fn packed_reports(found: &[Found], policy: &SecretPolicy, walk: &Walk) -> Vec<SecretReport> {
    found
        .iter()
        .filter_map(|f| {
            exempt(f, policy, walk).map(|action| SecretReport {
                path: f.member.clone(),
                line: f.line,
                rule: f.rule.id,
                action,
                git: None,
            })
        })
        .collect()
}

/// Files left out for their secrets: the members, their exclusion records
/// (rule and the path below the root, one per rule and file) and the
/// report's entries.
#[derive(Debug, Default)]
pub struct LeftOut {
    /// The members left out.
    pub members: BTreeSet<String>,
    /// For the manifest.
    pub exclusions: Vec<Exclusion>,
    /// For the report's `skipped`.
    pub skipped: Vec<Skipped>,
    /// For the report's `secrets`.
    pub reports: Vec<SecretReport>,
}

/// Decides on the secrets that stop the pack: the refusal, or (with
/// `--secrets exclude`) the files to leave out. The session log cannot be
/// left out: the packet would carry a session without its log.
pub fn decide(
    blocking: Vec<Found>,
    policy: &SecretPolicy,
    session_log: Option<&str>,
) -> Result<LeftOut, CliError> {
    if policy.mode == SecretsMode::Refuse {
        return Err(Refused::SecretsInWorkspace {
            found: blocking.iter().map(listed).collect(),
        }
        .into());
    }
    if let Some(log) = blocking
        .iter()
        .find(|f| Some(f.member.as_str()) == session_log)
    {
        return Err(Refused::SecretInSessionLog {
            member: log.member.clone(),
            found: blocking
                .iter()
                .filter(|f| f.member == log.member)
                .map(listed)
                .collect(),
        }
        .into());
    }
    let mut out = LeftOut::default();
    let mut records: BTreeMap<(&'static str, String), ()> = BTreeMap::new();
    for f in &blocking {
        let relative = f.member.split_once('/').map_or("", |(_, r)| r).to_owned();
        records.insert((f.rule.id, relative), ());
        if out.members.insert(f.member.clone()) {
            out.skipped.push(Skipped {
                path: f.member.clone(),
                rule: f.rule.id.to_owned(),
                reason: format!("holds {} (line {})", f.rule.what, f.line),
            });
        }
        out.reports.push(SecretReport {
            path: f.member.clone(),
            line: f.line,
            rule: f.rule.id,
            action: "excluded",
            git: None,
        });
    }
    out.exclusions = records
        .into_keys()
        .map(|(rule, pattern)| Exclusion {
            matched: 1,
            pattern,
            rule: rule.to_owned(),
        })
        .collect();
    Ok(out)
}

/// `path:line rule`, as the refusal lists a secret (never its value).
fn listed(f: &Found) -> String {
    format!("{}:{} {}", f.member, f.line, f.rule.id)
}

/// What a detector rule finds, for a report's `why`.
pub fn rule_what(id: &str) -> Option<&'static str> {
    SECRET_RULES.iter().find(|r| r.id == id).map(|r| r.what)
}
