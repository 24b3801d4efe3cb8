//! `pillbox checkpoint pack`: the workspace (and harness state) is walked
//! first, on every core. Into a file (the usual case) the packet is laid
//! out in advance: each small file is then read once, on every core,
//! hashed and written at its place; each large file is hashed, then copied
//! into place (see `into_file`). To standard output, which cannot seek,
//! pass 1 hashes every file in parallel to build the manifest (see
//! `hash`), and pass 2 drives packet-core's [`Writer`](packet_core::Writer),
//! streaming each file again and refusing a file that is not, unchanged,
//! the one pass 1 hashed (its inode, size and change times; see `write`
//! and `open::Stamp::check`).
//!
//! A packet is named by the SHA-256 of its `packet.json`
//! (docs/session-packet.md §9): once every body is hashed, the manifest
//! gives the digest, and nothing else of the packet is hashed for it.
//!
//! Every body also goes through packet-core's secret detector in the pass
//! that already reads it (phase 1 into a file, pass 1 to standard output:
//! before any byte is written there); a secret refuses the pack or, with
//! `--secrets exclude`, leaves its file out (see `secrets`). Files are
//! opened below the walked folder, never through a link, and must be the
//! regular files the walk listed (see `open`); the packet's size limit is
//! checked from the listed sizes before any file is read.
//!
//! What is packed is first collected (`collect`); `save` packs in memory,
//! as to standard output, and leaves the bodies in the workspace
//! (`for_save`).

mod collect;
mod for_save;
mod git_history;
mod hash;
mod into_file;
mod open;
pub mod secrets;
mod write;

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use packet_core::secrets::Scanner;
use packet_core::{Digest, Kind, Limits, Manifest, Member};
use serde::Serialize;

use crate::error::{CliError, Refused, Result};
use crate::progress::Progress;
use crate::report::{ExclusionReport, HarnessReport, Totals};
use crate::walk::{Planned, Skipped, Walk, WalkOptions};
use collect::{collect, Collected};
pub use for_save::{pack_for_save, ForSave};
use hash::{hash_all_with, BodySource, HashOptions};
use secrets::{Found, LeftOut, SecretPolicy, SecretReport, SecretsMode};
use write::write_packet;

/// What to pack.
pub struct PackRequest {
    /// The workspace directory.
    pub workspace: PathBuf,
    /// The output file, or `-` for standard output.
    pub output: PathBuf,
    /// Harness state to carry: the adapter's kind, its home and the id.
    pub harness: Option<HarnessRequest>,
    /// Walk options.
    pub walk: WalkOptions,
    /// What a secret found in a file does.
    pub secrets: SecretPolicy,
}

/// Harness state to carry.
pub struct HarnessRequest {
    /// Which harness.
    pub kind: packet_core::HarnessKind,
    /// Its home; for OpenCode, which finds its own data, the `opencode`
    /// program that exports the session.
    pub home: PathBuf,
    /// Thread or session id.
    pub id: String,
    /// The model the caller expects the log to record.
    pub expect_model: Option<String>,
}

/// The `pillbox.checkpoint.pack/1` object.
#[derive(Debug, Serialize)]
pub struct PackReport {
    /// `pillbox.checkpoint.pack/1`.
    pub schema: &'static str,
    /// The packet's format id, which says what its digest is the SHA-256 of.
    pub format: &'static str,
    /// The packet digest, `sha256:<hex>`: the SHA-256 of its `packet.json`.
    pub digest: String,
    /// Packet size in bytes.
    pub size: u64,
    /// Members after `packet.json`.
    pub members: u64,
    /// Manifest totals.
    pub totals: Totals,
    /// Absolute path of the packet written, or `-` for standard output.
    pub output: String,
    /// Absolute path of the workspace packed.
    pub workspace: String,
    /// Harness state carried.
    pub harness: Option<HarnessReport>,
    /// Exclusion rules that applied, as recorded in the manifest.
    pub exclusions: Vec<ExclusionReport>,
    /// Credential files, special files, escaping symlinks and files with
    /// secrets left out.
    pub skipped: Vec<Skipped>,
    /// Secrets found by content in the files read: left out
    /// (`--secrets exclude`), or packed because `--allow-secret` allows
    /// them or they lie in published packages.
    pub secrets: Vec<SecretReport>,
}

/// The prefix of the temporary file pack writes beside its output.
pub const TEMPORARY_PREFIX: &str = ".pillbox-pack-";

/// Packs; returns the report.
pub fn pack(request: &PackRequest, progress: &Progress) -> Result<PackReport> {
    let mut collected = collect(request, None)?;
    let planned = std::mem::take(&mut collected.walk.planned);
    let harness_descriptor = collected.harness.take();
    let (walk, hidden) = (&collected.walk, &collected.hidden);
    let session_log = harness_descriptor.as_ref().map(|h| h.session_log.clone());
    let policy = &request.secrets;
    let mut left_out = LeftOut::default();
    let with_hidden = |mut found: Vec<Found>| {
        found.extend(hidden.iter().cloned());
        found
    };
    if let Some(parent) = request
        .output
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
    {
        if request.output != Path::new("-") && !parent.exists() {
            fs::create_dir_all(parent).map_err(|e| CliError::io("create the folder", parent, e))?;
        }
    }
    let (manifest, digest, output, found) = if request.output == Path::new("-") {
        let screened =
            hash_and_screen(planned, harness_descriptor, hidden, walk, policy, progress)?;
        let (manifest, sources, found) = (screened.manifest, screened.sources, screened.found);
        left_out = screened.left_out;
        progress.phase("write", manifest.totals.bytes);
        let stdout = io::stdout();
        let digest = write_packet(
            &manifest,
            &sources,
            stdout.lock(),
            progress,
            "standard output",
        )?;
        (manifest, digest, "-".to_owned(), found)
    } else {
        // A second attempt, without the files found holding secrets, is
        // only ever made with --secrets exclude: only then is the list kept.
        let again = (policy.mode == SecretsMode::Exclude).then(|| planned.clone());
        let scanner = Scanner::new();
        let attempt = |planned: Vec<Planned>, extra: &[packet_core::Exclusion]| {
            let mut exclusions = walk.exclusion_records();
            exclusions.extend(extra.iter().cloned());
            into_file::pack_into_file(
                planned,
                harness_descriptor.clone(),
                exclusions,
                &request.output,
                progress,
                &mut || {},
                &|found| {
                    secrets::blocking(found, policy, walk).is_empty()
                        && secrets::blocking(hidden, policy, walk).is_empty()
                },
                &scanner,
            )
        };
        match attempt(planned, &[])? {
            into_file::Packed::Kept(m, d, out, found) => (m, d, out, with_hidden(found)),
            into_file::Packed::Blocked(found) => {
                let found = with_hidden(found);
                let blocking = secrets::blocking(&found, policy, walk);
                left_out = secrets::decide(blocking, policy, session_log.as_deref())?;
                let planned: Vec<Planned> = again
                    .unwrap_or_default()
                    .into_iter()
                    .filter(|p| !left_out.members.contains(p.member()))
                    .collect();
                match attempt(planned, &left_out.exclusions)? {
                    into_file::Packed::Kept(m, d, out, found) => (m, d, out, with_hidden(found)),
                    // Files changed between the attempts: refuse what is
                    // there now.
                    into_file::Packed::Blocked(found) => {
                        let found = with_hidden(found);
                        let blocking = secrets::blocking(&found, policy, walk);
                        return Err(Refused::SecretsInWorkspace {
                            found: blocking
                                .iter()
                                .map(|f| format!("{}:{} {}", f.member, f.line, f.rule.id))
                                .collect(),
                        }
                        .into());
                    }
                }
            }
        }
    };
    progress.finish();
    Ok(collected.report(&manifest, &digest, output, &found, policy, left_out))
}

impl Collected {
    /// The pack report of a packet packed from what was collected.
    fn report(
        self,
        manifest: &Manifest,
        digest: &Digest,
        output: String,
        found: &[Found],
        policy: &SecretPolicy,
        left_out: LeftOut,
    ) -> PackReport {
        let Collected {
            workspace,
            mut walk,
            harness_source,
            history,
            ..
        } = self;
        let mut secret_reports = secrets::packed_reports(found, policy, &walk);
        secret_reports.extend(left_out.reports);
        secret_reports.extend(history);
        secret_reports
            .sort_by(|a, b| packet_core::path::compare(&a.path, &b.path).then(a.line.cmp(&b.line)));
        walk.skipped.extend(left_out.skipped);
        walk.skipped
            .sort_by(|a, b| packet_core::path::compare(&a.path, &b.path));
        PackReport {
            schema: "pillbox.checkpoint.pack/1",
            format: manifest.format.id(),
            digest: digest.to_string(),
            size: manifest.packet_size(),
            members: manifest.totals.members,
            totals: manifest.totals,
            output,
            workspace: workspace.display().to_string(),
            harness: manifest
                .harness
                .as_ref()
                .map(|h| HarnessReport::packed(h, harness_source.as_deref())),
            exclusions: manifest
                .exclusions
                .iter()
                .map(ExclusionReport::from)
                .collect(),
            skipped: walk.skipped,
            secrets: secret_reports,
        }
    }
}

/// What [`hash_and_screen`] found: the manifest to write, each file
/// member's source, every secret found, and what the policy left out.
struct Screened {
    manifest: Manifest,
    sources: Vec<BodySource>,
    found: Vec<Found>,
    left_out: LeftOut,
}

/// Hashes every planned member (every file read twice, checked unchanged
/// in between), holds what was found there and in `hidden` (the harness
/// state's findings) to the secrets policy, and builds the manifest: the
/// way of `pack -o -` and of `save`, which write nothing before the
/// digest is known.
fn hash_and_screen(
    planned: Vec<Planned>,
    harness: Option<packet_core::Harness>,
    hidden: &[Found],
    walk: &Walk,
    policy: &SecretPolicy,
    progress: &Progress,
) -> Result<Screened> {
    let options = HashOptions::default();
    hash_and_screen_with(planned, harness, hidden, walk, policy, progress, &options)
}

/// [`hash_and_screen`] with [`HashOptions`].
fn hash_and_screen_with(
    planned: Vec<Planned>,
    harness: Option<packet_core::Harness>,
    hidden: &[Found],
    walk: &Walk,
    policy: &SecretPolicy,
    progress: &Progress,
    options: &HashOptions<'_>,
) -> Result<Screened> {
    let session_log = harness.as_ref().map(|h| h.session_log.clone());
    let (entries, sources, mut found) = hash_all_with(planned, progress, options)?;
    found.extend(hidden.iter().cloned());
    let blocking = secrets::blocking(&found, policy, walk);
    let mut left_out = LeftOut::default();
    let (entries, sources) = if blocking.is_empty() {
        (entries, sources)
    } else {
        left_out = secrets::decide(blocking, policy, session_log.as_deref())?;
        leave_out(entries, sources, &left_out)
    };
    let mut exclusions = walk.exclusion_records();
    exclusions.extend(left_out.exclusions.iter().cloned());
    let manifest = Manifest::build(entries, harness, exclusions, &Limits::FORMAT)
        .map_err(CliError::Unpackable)?;
    Ok(Screened {
        manifest,
        sources,
        found,
        left_out,
    })
}

/// The entries and sources without the members `left_out` names.
fn leave_out(
    entries: Vec<Member>,
    sources: Vec<BodySource>,
    left_out: &LeftOut,
) -> (Vec<Member>, Vec<BodySource>) {
    let mut kept_sources = Vec::with_capacity(sources.len());
    let mut sources = sources.into_iter();
    let mut kept = Vec::with_capacity(entries.len());
    for e in entries {
        let source = (e.kind() == Kind::File).then(|| sources.next()).flatten();
        if left_out.members.contains(e.path.as_str()) {
            continue;
        }
        kept_sources.extend(source);
        kept.push(e);
    }
    (kept, kept_sources)
}

/// Test support: runs git with `args` in `ws`, with no user or system
/// configuration, and asserts that it succeeded.
#[cfg(test)]
pub(crate) fn git_in(ws: &Path, args: &[&str]) {
    let ok = std::process::Command::new("git")
        .args(["-c", "user.name=A", "-c", "user.email=a@example.com"])
        .args(args)
        .current_dir(ws)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .status()
        .unwrap()
        .success();
    assert!(ok, "git {args:?}");
}

/// Test support: makes `ws` a git repository whose first commit holds an
/// API key in `notes.txt` and whose second removes it, so the key lives
/// only in the history.
#[cfg(test)]
pub(crate) fn repository_with_a_key_in_history(ws: &Path) {
    let git = |args: &[&str]| git_in(ws, args);
    git(&["init", "-q"]);
    let key = format!(
        "sk-proj-{}T3BlbkFJ{}",
        "aB3dE5fG7hJ9kL1mN2pQ".repeat(2),
        "zY8xW6vU4tS2rQ0pO9nM".repeat(2)
    );
    fs::write(ws.join("notes.txt"), format!("{key}\n")).unwrap();
    git(&["add", "notes.txt"]);
    git(&["commit", "-q", "-m", "notes"]);
    fs::write(ws.join("notes.txt"), "none\n").unwrap();
    git(&["commit", "-q", "-a", "-m", "no notes"]);
}
