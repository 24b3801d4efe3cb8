//! `pillbox checkpoint pack`: the workspace (and harness state) is walked
//! first, on every core. Into a file (the usual case) the packet is laid
//! out in advance: each small file is then read once, on every core,
//! hashed and written at its place; each large file is hashed, then copied
//! into place (see `into_file`). To standard output, which cannot seek,
//! pass 1 hashes every file in parallel to build the manifest, and pass 2
//! drives packet-core's [`Writer`], streaming each file again and refusing
//! a file that is not, unchanged, the one pass 1 hashed (its inode, size
//! and change times; see `Stamp::check`).
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
//! regular files the walk listed; the packet's size limit is checked from
//! the listed sizes before any file is read.

mod git_history;
mod into_file;

use git_history::ScanCache;
pub mod secrets;

use std::collections::HashMap;
use std::fs::{self, File};
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use packet_core::secrets::{Detector, Finding, Scanner};
use packet_core::{
    Digest, Entry, ErrorCode, Hasher, Kind, Limits, Manifest, Member, Step, Writer, WriterOptions,
};
use rustix::fs::{Mode, OFlags, Stat};
use serde::Serialize;

use crate::chunking::{self, Piece, BODIES};
use crate::error::{CliError, Refused, Result};
use crate::harness::{self, LocateRequest};
use crate::packet_io::CHUNK;
use crate::progress::Progress;
use crate::record::{FileEntry, Identity, InOrder, KeptFinding, Record, Seen, Verdict};
use crate::remote::Bodies;
use crate::report::{ExclusionReport, HarnessReport, Totals};
use crate::walk::{open_file_in, walk_tree, FileSource, Planned, Skipped, Walk, WalkOptions};
use secrets::{Found, LeftOut, SecretPolicy, SecretReport, SecretsMode};

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

/// What the walk and the harness adapter found, before anything is hashed.
struct Collected {
    workspace: PathBuf,
    walk: Walk,
    harness: Option<packet_core::Harness>,
    harness_source: Option<PathBuf>,
    /// Secrets the adapter found in what the packet's bytes hide.
    hidden: Vec<Found>,
    /// Secrets found in git history and packed (or left out, already
    /// taken from the walk), for the report.
    history: Vec<SecretReport>,
    /// A session log the harness printed (a temporary file), kept until the
    /// packet is written.
    _harness_scratch: Option<tempfile::TempPath>,
}

/// The prefix of the temporary file pack writes beside its output.
pub const TEMPORARY_PREFIX: &str = ".pillbox-pack-";

/// A packet written into the workspace being packed (`pack . -o
/// ./self.tar`) is never packed into itself: the walk drops the output
/// file (an earlier packet by that name) and any temporary file pack
/// writes beside it, and the report says so (`skipped`, rule
/// `pack-output`).
fn leave_out_the_output(workspace: &Path, output: &Path, walk: &mut Walk) {
    if output == Path::new("-") {
        return;
    }
    let (Some(parent), Some(name)) = (output.parent(), output.file_name()) else {
        return;
    };
    let parent = if parent.as_os_str().is_empty() {
        Path::new(".")
    } else {
        parent
    };
    let Ok(dir) = fs::canonicalize(parent) else {
        return;
    };
    let Ok(relative) = dir.strip_prefix(workspace) else {
        return;
    };
    let Some(relative) = relative.to_str() else {
        return;
    };
    let Some(name) = name.to_str() else { return };
    let folder = if relative.is_empty() {
        packet_core::path::WORKSPACE_ROOT.to_owned()
    } else {
        format!("{}/{relative}", packet_core::path::WORKSPACE_ROOT)
    };
    let output_member = format!("{folder}/{name}");
    let temporary = format!("{folder}/{TEMPORARY_PREFIX}");
    let mut dropped = Vec::new();
    walk.planned.retain(|p| {
        let m = p.member();
        let is_file = matches!(p, Planned::Walked { .. });
        let ours = is_file
            && (m == output_member
                || m.strip_prefix(&temporary)
                    .is_some_and(|rest| !rest.contains('/')));
        if ours {
            dropped.push(m.to_owned());
        }
        !ours
    });
    for path in dropped {
        let reason = if path == output_member {
            "the packet this pack writes (-o): never packed into itself"
        } else {
            "a temporary file of pack: never packed"
        };
        walk.skipped.push(Skipped {
            path,
            rule: "pack-output".into(),
            reason: reason.into(),
        });
    }
}

/// Walks the workspace, screens its git history (with the verdicts of
/// `scans`, if given), and locates the harness state.
fn collect(request: &PackRequest, scans: Option<&mut ScanCache<'_>>) -> Result<Collected> {
    let workspace = fs::canonicalize(&request.workspace)
        .map_err(|e| CliError::io("open the workspace", &request.workspace, e))?;
    if !workspace.is_dir() {
        return Err(Refused::WorkspaceNotDirectory { workspace }.into());
    }
    let mut walk = Walk::default();
    walk_tree(
        &workspace,
        packet_core::path::WORKSPACE_ROOT,
        &request.walk,
        &mut walk,
    )?;
    leave_out_the_output(&workspace, &request.output, &mut walk);
    // Before anything is hashed: what it leaves out is left out of the walk.
    let history = git_history::screen(&workspace, &mut walk, &request.secrets, scans)?;
    let mut harness_descriptor = None;
    let mut harness_source = None;
    let mut harness_scratch = None;
    let mut hidden: Vec<Found> = Vec::new();
    if let Some(h) = &request.harness {
        harness::check_id(h.kind, &h.id)?;
        let workspace_bytes = walk.listed_bytes();
        let located = harness::adapter(h.kind).locate(&LocateRequest {
            home: &h.home,
            id: &h.id,
            workspace: &workspace,
            expect_model: h.expect_model.as_deref(),
            walk: &request.walk,
            workspace_bytes,
        })?;
        walk.planned.extend(located.planned);
        for (k, v) in located.walk.exclusions {
            *walk.exclusions.entry(k).or_default() += v;
        }
        walk.skipped.extend(located.walk.skipped);
        harness_source = located.source_path;
        harness_descriptor = Some(located.harness);
        harness_scratch = located.scratch;
        hidden = located.secrets;
    }
    Ok(Collected {
        workspace,
        walk,
        harness: harness_descriptor,
        harness_source,
        hidden,
        history,
        _harness_scratch: harness_scratch,
    })
}

/// Packs; returns the report.
pub fn pack(request: &PackRequest, progress: &Progress) -> Result<PackReport> {
    let Collected {
        workspace,
        mut walk,
        harness: harness_descriptor,
        harness_source,
        hidden,
        history,
        _harness_scratch,
    } = collect(request, None)?;
    let planned = std::mem::take(&mut walk.planned);
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
        let screened = hash_and_screen(
            planned,
            harness_descriptor,
            &hidden,
            &walk,
            policy,
            progress,
        )?;
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
                    secrets::blocking(found, policy, &walk).is_empty()
                        && secrets::blocking(&hidden, policy, &walk).is_empty()
                },
                &scanner,
            )
        };
        match attempt(planned, &[])? {
            into_file::Packed::Kept(m, d, out, found) => (m, d, out, with_hidden(found)),
            into_file::Packed::Blocked(found) => {
                let found = with_hidden(found);
                let blocking = secrets::blocking(&found, policy, &walk);
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
                        let blocking = secrets::blocking(&found, policy, &walk);
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
    Ok(report(
        &manifest,
        &digest,
        output,
        &workspace,
        harness_source.as_deref(),
        walk,
        &found,
        policy,
        left_out,
        history,
    ))
}

/// The pack report of a packet packed from `walk`.
#[allow(clippy::too_many_arguments)]
fn report(
    manifest: &Manifest,
    digest: &Digest,
    output: String,
    workspace: &Path,
    harness_source: Option<&Path>,
    mut walk: Walk,
    found: &[Found],
    policy: &SecretPolicy,
    left_out: LeftOut,
    history: Vec<SecretReport>,
) -> PackReport {
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
            .map(|h| HarnessReport::packed(h, harness_source)),
        exclusions: manifest
            .exclusions
            .iter()
            .map(ExclusionReport::from)
            .collect(),
        skipped: walk.skipped,
        secrets: secret_reports,
    }
}

/// A workspace packed for `save`: its manifest, exact `packet.json` and
/// digest (computed as `pack -o -` computes them, secrets handled as
/// `pack` handles them), the pack report (`output` is `-`), where each
/// body is, what the next workspace record keeps of each file, and what
/// reading the workspace cost.
pub struct ForSave {
    /// The manifest.
    pub manifest: Manifest,
    /// Its exact bytes.
    pub json: Vec<u8>,
    /// The packet digest (of `json`).
    pub digest: Digest,
    /// What `pack` would print.
    pub report: PackReport,
    /// Each file member's source.
    pub bodies: WorkspaceBodies,
    /// The chunks of the large files read, by body sha256.
    pub cuts: HashMap<Digest, Vec<Piece>>,
    /// Every file member as it was hashed (or vouched for), in packet
    /// order: the next record's files.
    pub files: Vec<FileEntry>,
    /// The git history scans' verdicts, for the next record.
    pub verdicts: Vec<Verdict>,
    /// Files opened and hashed.
    pub files_read: u64,
    /// Files taken from the record without being opened.
    pub files_reused: u64,
    /// Bytes hashed.
    pub bytes_hashed: u64,
    /// Seconds spent walking (and locating harness state), hashing, and
    /// building the manifest and its digest.
    pub seconds: (f64, f64, f64),
}

/// Computes the packet `request` describes for `save`, without writing it
/// anywhere: the bodies stay in the workspace, read again only for what
/// the store lacks (and checked by sha256 as they are). With the
/// workspace record `record`, a file it
/// vouches for (unchanged, not racy, screened under these rules) keeps its
/// sha256 and findings without being opened; every other file is read,
/// hashed and screened, and a large one cut into chunks in the same read.
pub fn pack_for_save(
    request: &PackRequest,
    record: Option<&Record>,
    progress: &Progress,
) -> Result<ForSave> {
    let started = std::time::Instant::now();
    let mut scans = ScanCache::new(record);
    let Collected {
        workspace,
        mut walk,
        harness,
        harness_source,
        hidden,
        history,
        _harness_scratch,
    } = collect(request, Some(&mut scans))?;
    let walked = started.elapsed().as_secs_f64();
    let planned = std::mem::take(&mut walk.planned);
    let policy = &request.secrets;
    let options = HashOptions {
        record,
        cut_large: true,
    };
    let Screened {
        manifest,
        sources,
        found,
        left_out,
    } = hash_and_screen_with(planned, harness, &hidden, &walk, policy, progress, &options)?;
    let hashed = started.elapsed().as_secs_f64() - walked;
    let json = manifest.to_canonical_json();
    let digest = Digest::of(&json);
    let mut by_member = vec![None; manifest.members.len()];
    let mut files = Vec::with_capacity(sources.len());
    let mut cuts = HashMap::new();
    let (mut files_read, mut files_reused, mut bytes_hashed) = (0, 0, 0);
    let mut sources = sources.into_iter();
    for (slot, m) in by_member.iter_mut().zip(&manifest.members) {
        let Entry::File { sha256, .. } = m.entry else {
            continue;
        };
        let Some(s) = sources.next() else {
            return Err(CliError::Bug("fewer sources than file members".into()));
        };
        if s.read {
            files_read += 1;
            bytes_hashed += s.stamp.size;
        } else {
            files_reused += 1;
        }
        files.push(FileEntry {
            member: m.path.clone(),
            identity: s.stamp.identity(),
            sha256,
            findings: Some(s.findings.iter().map(KeptFinding::of).collect()),
        });
        if let Some(p) = s.pieces {
            cuts.insert(sha256, p);
        }
        *slot = Some((s.source, m.path.clone()));
    }
    let report = report(
        &manifest,
        &digest,
        "-".to_owned(),
        &workspace,
        harness_source.as_deref(),
        walk,
        &found,
        policy,
        left_out,
        history,
    );
    let built = started.elapsed().as_secs_f64() - walked - hashed;
    Ok(ForSave {
        manifest,
        json,
        digest,
        report,
        bodies: WorkspaceBodies {
            by_member,
            _harness_scratch,
        },
        cuts,
        files,
        verdicts: scans.verdicts,
        files_read,
        files_reused,
        bytes_hashed,
        seconds: (walked, hashed, built),
    })
}

/// The bodies of a packet packed in memory, in the workspace's files
/// (opened as pack opens them: below the walked folder, never through a
/// link).
pub struct WorkspaceBodies {
    /// Member index → (where its bytes are, member path).
    by_member: Vec<Option<(FileSource, String)>>,
    /// A session log the harness printed, read when its body is sent.
    _harness_scratch: Option<tempfile::TempPath>,
}

impl WorkspaceBodies {
    fn source(&self, index: usize) -> Result<&(FileSource, String)> {
        self.by_member
            .get(index)
            .and_then(Option::as_ref)
            .ok_or_else(|| CliError::Bug(format!("member {index} has no source file")))
    }

    fn open_file(&self, index: usize) -> Result<File> {
        let (source, member) = self.source(index)?;
        Opener::default()
            .open(source, member)
            .map(|(f, _)| f)
            .map_err(|_| self.changed(index))
    }
}

impl Bodies for WorkspaceBodies {
    fn open(&self, index: usize) -> Result<Box<dyn Read + '_>> {
        Ok(Box::new(self.open_file(index)?))
    }

    fn read_at(&self, index: usize, offset: u64, buf: &mut [u8]) -> Result<()> {
        use std::os::unix::fs::FileExt;
        self.open_file(index)?
            .read_exact_at(buf, offset)
            .map_err(|_| self.changed(index))
    }

    fn changed(&self, index: usize) -> CliError {
        let member = self
            .by_member
            .get(index)
            .and_then(Option::as_ref)
            .map_or_else(String::new, |(_, m)| m.clone());
        Refused::WorkspaceChanged {
            what: format!("{member} changed or went away while it was being saved"),
            member,
        }
        .into()
    }

    fn label(&self, index: usize) -> PathBuf {
        self.source(index)
            .map_or_else(|_| PathBuf::from("the workspace"), |(s, _)| s.display())
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
        if left_out.members.contains(&e.path) {
            continue;
        }
        kept_sources.extend(source);
        kept.push(e);
    }
    (kept, kept_sources)
}

/// What pass 1 saw of a file: its size as read and the identity and
/// change times of the inode it read. Pass 2 compares the file it reads
/// with this (see [`Stamp::check`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Stamp {
    size: u64,
    dev: u64,
    ino: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
    mode: u32,
}

impl Stamp {
    // The stat fields' types differ across architectures: the conversions
    // are identities only on some.
    #[allow(clippy::useless_conversion, clippy::unnecessary_cast)]
    fn of(stat: &Stat, size: u64) -> Stamp {
        let nsec = |n| i64::try_from(u64::from(n)).unwrap_or(0);
        Stamp {
            size,
            dev: u64::from(stat.st_dev),
            ino: u64::from(stat.st_ino),
            mtime: (i64::from(stat.st_mtime), nsec(stat.st_mtime_nsec)),
            ctime: (i64::from(stat.st_ctime), nsec(stat.st_ctime_nsec)),
            mode: stat.st_mode as u32,
        }
    }

    /// The file as the workspace record keeps it.
    fn identity(&self) -> Identity {
        let ns = |(s, n): (i64, i64)| s.saturating_mul(1_000_000_000).saturating_add(n);
        Identity {
            size: self.size,
            mtime: ns(self.mtime),
            ctime: ns(self.ctime),
            ino: self.ino,
            dev: self.dev,
            mode: self.mode,
        }
    }

    /// The stamp of a file the record holds as `id`.
    fn of_identity(id: &Identity) -> Stamp {
        let split = |ns: i64| (ns.div_euclid(1_000_000_000), ns.rem_euclid(1_000_000_000));
        Stamp {
            size: id.size,
            dev: id.dev,
            ino: id.ino,
            mtime: split(id.mtime),
            ctime: split(id.ctime),
            mode: id.mode,
        }
    }

    /// The stamp of an open file now.
    fn now(f: &File, display: &Path) -> Result<Stamp> {
        let stat = rustix::fs::fstat(f).map_err(|e| CliError::io("read", display, e.into()))?;
        Ok(Stamp::of(&stat, stat_size(&stat)))
    }

    /// Refuses a file that is not the one pass 1 hashed, unchanged: the
    /// same refusal the writer's own body check gives (a different size is
    /// `member_mismatch`, anything else `member_digest_mismatch`). Every
    /// write to a file moves its ctime, which no user can set back, so a
    /// file whose stamp still matches after it was read holds the bytes
    /// pass 1 hashed. Were that ever not so, the packet could not pass
    /// verification anywhere: its bytes would disagree with its manifest.
    fn check(&self, now: &Stamp, member: &str) -> Result<()> {
        if now == self {
            return Ok(());
        }
        let (code, message) = if now.size != self.size {
            (
                ErrorCode::MemberMismatch,
                "the file changed size after it was hashed",
            )
        } else {
            (
                ErrorCode::MemberDigestMismatch,
                "the file changed after it was hashed",
            )
        };
        Err(CliError::Unpackable(
            packet_core::Error::new(code, message).at_path(member),
        ))
    }
}

/// A file's size in a stat.
fn stat_size(stat: &Stat) -> u64 {
    u64::try_from(stat.st_size).unwrap_or(0)
}

/// Where a file member's bytes come from, and what pass 1 saw of them.
struct BodySource {
    source: FileSource,
    stamp: Stamp,
    /// What the detector found in it.
    findings: Vec<Finding>,
    /// Its chunks, when it is large and was cut as it was read.
    pieces: Option<Vec<Piece>>,
    /// False when the workspace record vouched for it and it was not read.
    read: bool,
}

/// What pass 1 learnt of one file.
struct FileHashed {
    stamp: Stamp,
    digest: Digest,
    findings: Vec<Finding>,
    pieces: Option<Vec<Piece>>,
    read: bool,
}

/// One file's [`FileHashed`], or why it could not be read.
type HashResult = Result<FileHashed>;

/// How pass 1 goes about the files (`save`; `pack` reads every file).
#[derive(Default)]
pub struct HashOptions<'a> {
    /// The workspace record: a file it vouches for is not read.
    pub record: Option<&'a Record>,
    /// Cut large files into chunks as they are read.
    pub cut_large: bool,
}

/// What the record vouches for of `file` (listed by the walk as
/// `planned`, asked in packet order): its digest and findings, when its
/// identity is the recorded one, it is not racy, and the findings were
/// made under this binary's rules.
fn vouched(
    record: &mut InOrder<'_>,
    same_rules: bool,
    planned: &Planned,
    file: &ToHash,
) -> Option<FileHashed> {
    if !same_rules {
        return None;
    }
    let identity = match planned.identity() {
        Some(id) => id,
        // A harness adapter's file: its stat now, not following a link.
        None => match &file.source {
            FileSource::Path(path) => {
                let stat = rustix::fs::statat(
                    rustix::fs::CWD,
                    path,
                    rustix::fs::AtFlags::SYMLINK_NOFOLLOW,
                )
                .ok()?;
                if rustix::fs::FileType::from_raw_mode(stat.st_mode)
                    != rustix::fs::FileType::RegularFile
                {
                    return None;
                }
                let id = Identity::of(&stat);
                (id.size == file.size).then_some(id)?
            }
            FileSource::Beneath { .. } => return None,
        },
    };
    let entry = match record.check(&file.member, &identity) {
        Seen::Unchanged(e) => e,
        Seen::Racy(_) | Seen::Changed(_) | Seen::New => return None,
    };
    let findings = entry
        .findings
        .as_ref()?
        .iter()
        .map(KeptFinding::finding)
        .collect::<Option<Vec<Finding>>>()?;
    Some(FileHashed {
        stamp: Stamp::of_identity(&identity),
        digest: entry.sha256,
        findings,
        pieces: None,
        read: false,
    })
}

/// A file to hash: its member path, where its bytes are, and its listed size.
struct ToHash {
    member: String,
    source: FileSource,
    size: u64,
}

/// The members a planned list makes before any file is read: files with
/// their listed sizes and a placeholder digest, for the limits.
fn listed_members(planned: &[Planned]) -> Vec<Member> {
    planned
        .iter()
        .map(|p| match p {
            Planned::Dir { member } => Member::dir(member.as_str()),
            Planned::Symlink { member, target } => {
                Member::symlink(member.as_str(), target.as_str())
            }
            Planned::File {
                member,
                executable,
                size,
                ..
            }
            | Planned::Walked {
                member,
                executable,
                size,
                ..
            } => Member::file(member.as_str(), *size, Digest([0; 32]), *executable),
        })
        .collect()
}

/// Hashes every planned file on all cores (streaming reads into one reused
/// 1 MiB buffer per thread), and looks for secrets in the same reads;
/// returns the manifest entries, for each file member in the packet's
/// order its source and stamp, and the secrets found. The packet's limits
/// are checked on the listed sizes first.
#[cfg(test)]
fn hash_all(
    planned: Vec<Planned>,
    progress: &Progress,
) -> Result<(Vec<Member>, Vec<BodySource>, Vec<Found>)> {
    hash_all_with(planned, progress, &HashOptions::default())
}

/// [`hash_all`], with a workspace record whose unchanged files are not
/// read, and large files cut into chunks in the same read.
fn hash_all_with(
    mut planned: Vec<Planned>,
    progress: &Progress,
    options: &HashOptions<'_>,
) -> Result<(Vec<Member>, Vec<BodySource>, Vec<Found>)> {
    // The packet's order, so that the files' sources line up with the
    // writer's bodies without a lookup table.
    crate::walk::sort_planned(&mut planned);
    Manifest::assemble(listed_members(&planned), None, vec![])
        .check_limits(&Limits::FORMAT)
        .map_err(CliError::Unpackable)?;
    let files: Vec<ToHash> = planned
        .iter()
        .filter(|p| matches!(p, Planned::File { .. } | Planned::Walked { .. }))
        .map(|p| {
            let size = match p {
                Planned::File { size, .. } | Planned::Walked { size, .. } => *size,
                _ => 0,
            };
            Ok(ToHash {
                member: p.member().to_owned(),
                source: p.source().ok_or_else(|| {
                    CliError::Bug(format!("no source for the file {:?}", p.member()))
                })?,
                size,
            })
        })
        .collect::<Result<_>>()?;
    let mut known: Vec<Option<FileHashed>> = match options.record {
        Some(record) => {
            let same_rules = record.same_rules();
            let mut order = record.in_order();
            let listed = planned
                .iter()
                .filter(|p| matches!(p, Planned::File { .. } | Planned::Walked { .. }));
            listed
                .zip(&files)
                .map(|(p, f)| vouched(&mut order, same_rules, p, f))
                .collect()
        }
        None => Vec::new(),
    };
    known.resize_with(files.len(), || None);
    if progress.is_shown() {
        progress.phase(
            "hash",
            files
                .iter()
                .zip(&known)
                .filter(|(_, k)| k.is_none())
                .map(|(f, _)| f.size)
                .sum(),
        );
    }
    let known: Vec<Mutex<Option<FileHashed>>> = known.into_iter().map(Mutex::new).collect();
    let scanner = Scanner::new();
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(files.len())
        .max(1);
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<HashResult>>> =
        Mutex::new((0..files.len()).map(|_| None).collect());
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| {
                let mut buf = vec![0u8; CHUNK];
                let mut opener = Opener::default();
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(file) = files.get(i) else {
                        break;
                    };
                    if let Some(k) = known[i].lock().ok().and_then(|mut k| k.take()) {
                        if let Ok(mut all) = results.lock() {
                            all[i] = Some(Ok(k));
                        }
                        continue;
                    }
                    let relative = file.member.split_once('/').map_or("", |(_, r)| r);
                    let mut detector = scanner.detector(relative);
                    let r = if options.cut_large && !BODIES.is_one_chunk(file.size) {
                        hash_and_cut_file(&mut opener, file, progress, &mut detector)
                            .map(|(stamp, digest, pieces)| (stamp, digest, Some(pieces)))
                    } else {
                        hash_file(&mut opener, file, &mut buf, progress, Some(&mut detector))
                            .map(|(stamp, digest)| (stamp, digest, None))
                    }
                    .map(|(stamp, digest, pieces)| FileHashed {
                        stamp,
                        digest,
                        findings: detector.finish(),
                        pieces,
                        read: true,
                    });
                    let failed = r.is_err();
                    if let Ok(mut all) = results.lock() {
                        all[i] = Some(r);
                    }
                    if failed {
                        // Stop handing out work; the first error is reported.
                        next.store(files.len(), Ordering::Relaxed);
                        break;
                    }
                }
            });
        }
    });
    let mut results = results.into_inner().unwrap_or_default().into_iter();
    let mut entries = Vec::with_capacity(planned.len());
    let mut sources = Vec::new();
    let mut found = Vec::new();
    let mut files = files.into_iter();
    for p in planned {
        match p {
            Planned::Dir { member } => entries.push(Member::dir(member)),
            Planned::Symlink { member, target } => entries.push(Member::symlink(member, target)),
            Planned::File {
                member, executable, ..
            }
            | Planned::Walked {
                member, executable, ..
            } => {
                let hashed = match results.next().flatten() {
                    Some(r) => r?,
                    None => return Err(stopped_after_earlier_failure()),
                };
                let Some(file) = files.next() else {
                    return Err(stopped_after_earlier_failure());
                };
                found.extend(Found::of(&member, hashed.findings.clone()));
                entries.push(Member::file(
                    member,
                    hashed.stamp.size,
                    hashed.digest,
                    executable,
                ));
                sources.push(BodySource {
                    source: file.source,
                    stamp: hashed.stamp,
                    findings: hashed.findings,
                    pieces: hashed.pieces,
                    read: hashed.read,
                });
            }
        }
    }
    Ok((entries, sources, found))
}

fn stopped_after_earlier_failure() -> CliError {
    Refused::PackAfterEarlierFailure {}.into()
}

/// Opens files for reading relative to a descriptor of the last folder
/// used: files of one folder are neighbours in the packet's order, so each
/// folder is opened once per pass rather than once per file.
#[derive(Default)]
struct Opener {
    dir: Option<(DirKey, OwnedFd)>,
}

/// Which folder a cached descriptor is.
#[derive(PartialEq, Eq)]
enum DirKey {
    /// A folder named by path (a harness adapter's file).
    Path(PathBuf),
    /// A folder below a walked root, by its path there.
    Beneath(*const crate::walk::WalkRoot, String),
}

impl Opener {
    /// Opens a file for reading: a walked file below its root, never
    /// through a link, checked to be the regular file the walk listed; an
    /// adapter's file by its path, never through a link in its last
    /// component, and checked to be a regular file. Never blocks on a FIFO.
    fn open(&mut self, source: &FileSource, member: &str) -> Result<(File, Stat)> {
        match source {
            FileSource::Path(path) => {
                let (Some(parent), Some(name)) = (path.parent(), path.file_name()) else {
                    return Err(CliError::io(
                        "read",
                        path,
                        io::Error::from(io::ErrorKind::InvalidInput),
                    ));
                };
                let cached = matches!(&self.dir, Some((DirKey::Path(p), _)) if p == parent);
                if !cached {
                    let flags = OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC;
                    let fd = rustix::fs::open(parent, flags, Mode::empty())
                        .map_err(|e| CliError::io("read", path, e.into()))?;
                    self.dir = Some((DirKey::Path(parent.to_path_buf()), fd));
                }
                let fd = self.cached()?;
                open_file_in(fd, &name.to_string_lossy(), member, None, &|| path.clone())
            }
            FileSource::Beneath { root, relative, id } => {
                let (parent, name) = relative.rsplit_once('/').unwrap_or(("", relative));
                let cached = matches!(
                    &self.dir,
                    Some((DirKey::Beneath(r, p), _)) if std::ptr::eq(*r, Arc::as_ptr(root)) && p == parent
                );
                if !cached {
                    let fd = root.open_parent(relative).map_err(|e| {
                        match rustix::io::Errno::from_io_error(&e) {
                            Some(errno) => root.changed_or_io(member, "read", relative, errno),
                            None => CliError::io("read", root.path().join(relative), e),
                        }
                    })?;
                    self.dir = Some((DirKey::Beneath(Arc::as_ptr(root), parent.to_owned()), fd));
                }
                let fd = self.cached()?;
                open_file_in(fd, name, member, Some(*id), &|| root.path().join(relative))
            }
        }
    }

    /// The descriptor of the folder last opened.
    fn cached(&self) -> Result<BorrowedFd<'_>> {
        match &self.dir {
            Some((_, fd)) => Ok(fd.as_fd()),
            None => Err(CliError::Bug("the folder just opened is gone".into())),
        }
    }
}

/// Reads a whole file into the hasher (and `detector`), at most one byte
/// more than its listed size: a file that grew is refused without being
/// read to its end (a sparse file of terabytes is not hashed in full). One
/// read for a file smaller than the buffer (a short read of a regular file
/// is its end).
fn hash_file(
    opener: &mut Opener,
    file: &ToHash,
    buf: &mut [u8],
    progress: &Progress,
    mut detector: Option<&mut Detector>,
) -> Result<(Stamp, Digest)> {
    let (mut f, stat) = opener.open(&file.source, &file.member)?;
    let mut hasher = Hasher::new();
    let mut size = 0u64;
    let listed = stat_size(&stat);
    loop {
        let want = (file.size + 1 - size).min(buf.len() as u64) as usize;
        let n = match f.read(&mut buf[..want]) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(CliError::io("read", file.source.display(), e)),
        };
        size += n as u64;
        if size > file.size {
            return Err(changed_size(&file.member, "grew"));
        }
        hasher.update(&buf[..n]);
        if let Some(d) = detector.as_deref_mut() {
            d.feed(&buf[..n]);
        }
        progress.inc(n as u64);
        if n < want && size >= listed {
            break;
        }
    }
    // Bytes that arrive after this read, or a short read cut short, leave
    // the size or ctime different in pass 2, which refuses the file.
    Ok((Stamp::of(&stat, size), hasher.finish()))
}

/// [`hash_file`] for a large file, cut into chunks in the same read (by
/// `BODIES`): its stamp, digest and chunks.
fn hash_and_cut_file(
    opener: &mut Opener,
    file: &ToHash,
    progress: &Progress,
    detector: &mut Detector,
) -> Result<(Stamp, Digest, Vec<Piece>)> {
    let (f, stat) = opener.open(&file.source, &file.member)?;
    // At most one byte more than its listed size: a file that grew is
    // refused without being read to its end.
    let bounded = f.take(file.size + 1);
    let cut = chunking::cut(bounded, &BODIES, &file.source.display(), |_, bytes| {
        detector.feed(bytes);
        progress.inc(bytes.len() as u64);
        Ok(())
    })?;
    if cut.size > file.size {
        return Err(changed_size(&file.member, "grew"));
    }
    Ok((Stamp::of(&stat, cut.size), cut.body, cut.pieces))
}

/// The refusal of a file whose size changed while it was being packed
/// (`how`: "shrank" or "grew").
fn changed_size(member: &str, how: &str) -> CliError {
    CliError::Unpackable(
        packet_core::Error::new(
            ErrorCode::MemberMismatch,
            format!("the file {how} while it was being packed"),
        )
        .at_path(member),
    )
}

/// Reads the next bytes of a body into `buf` (not empty): at least one.
/// The file's end, with bytes still expected, means it shrank.
fn read_more(f: &mut File, buf: &mut [u8], path: &Path, member: &str) -> Result<usize> {
    loop {
        match f.read(buf) {
            Ok(0) => return Err(changed_size(member, "shrank")),
            Ok(n) => return Ok(n),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(CliError::io("read", path, e)),
        }
    }
}

/// Drives the writer and streams the packet into `sink` in 1 MiB blocks,
/// reading the files straight into the block being filled; returns the
/// packet digest the writer gives (the manifest's: a packet is named by it).
///
/// Bodies are not hashed again here (`verify_bodies: false`): each file's
/// stamp from pass 1 is checked on the open file after its bytes were read
/// ([`Stamp::check`]), which refuses a file that changed in between.
fn write_packet<W: Write>(
    manifest: &Manifest,
    sources: &[BodySource],
    sink: W,
    progress: &Progress,
    label: &str,
) -> Result<Digest> {
    let mut out = Block {
        buf: vec![0u8; CHUNK],
        used: 0,
        sink,
        label,
    };
    let digest = produce(manifest, sources, progress, &mut out)?;
    out.flush()?;
    Ok(digest)
}

/// The block being filled and the sink it goes to.
struct Block<'a, W: Write> {
    buf: Vec<u8>,
    used: usize,
    sink: W,
    label: &'a str,
}

impl<W: Write> Block<'_, W> {
    /// Writes the block and empties it.
    fn send(&mut self) -> Result<()> {
        let used = std::mem::take(&mut self.used);
        self.sink
            .write_all(&self.buf[..used])
            .map_err(|e| CliError::io("write", self.label, e))
    }

    fn put(&mut self, mut bytes: &[u8]) -> Result<()> {
        while !bytes.is_empty() {
            if self.used == self.buf.len() {
                self.send()?;
            }
            let n = bytes.len().min(self.buf.len() - self.used);
            self.buf[self.used..self.used + n].copy_from_slice(&bytes[..n]);
            self.used += n;
            bytes = &bytes[n..];
        }
        Ok(())
    }

    fn flush(&mut self) -> Result<()> {
        self.send()?;
        self.sink
            .flush()
            .map_err(|e| CliError::io("write", self.label, e))
    }
}

fn produce<W: Write>(
    manifest: &Manifest,
    sources: &[BodySource],
    progress: &Progress,
    out: &mut Block<'_, W>,
) -> Result<Digest> {
    let options = WriterOptions {
        packet_digest: false,
        verify_bodies: false,
    };
    let mut writer = Writer::with_options(manifest, options);
    // `sources` holds every file member in the packet's order; an empty
    // file has no body step, so skip the file members before `index`.
    let mut opener = Opener::default();
    let mut files = sources.iter();
    let mut skipped_to = 0;
    let mut source_of = |index: usize| {
        for e in manifest.members.get(skipped_to..index).unwrap_or_default() {
            if e.kind() == Kind::File {
                files.next();
            }
        }
        skipped_to = index + 1;
        files.next()
    };
    loop {
        match writer.next().map_err(CliError::unpackable)? {
            Step::Bytes(bytes) => out.put(bytes)?,
            Step::Body { index, size, .. } => {
                let entry = &manifest.members[index];
                let Some(source) = source_of(index) else {
                    return Err(CliError::Bug(format!(
                        "no source file for the member {:?}",
                        entry.path
                    )));
                };
                let display = source.source.display();
                let path = display.as_path();
                let (mut f, _) = opener.open(&source.source, &entry.path)?;
                let mut remaining = size;
                while remaining > 0 {
                    if out.used == out.buf.len() {
                        out.send()?;
                    }
                    let space = &mut out.buf[out.used..];
                    let want = (space.len() as u64).min(remaining) as usize;
                    let n = read_more(&mut f, &mut space[..want], path, &entry.path)?;
                    writer.body(&space[..n]).map_err(CliError::unpackable)?;
                    out.used += n;
                    remaining -= n as u64;
                    progress.inc(n as u64);
                }
                // The open file must still be the one pass 1 hashed, as it
                // was then: same inode, size and change times.
                source.stamp.check(&Stamp::now(&f, path)?, &entry.path)?;
            }
            Step::Done(digest) => {
                if source_of(manifest.members.len()).is_some() {
                    return Err(CliError::Bug("more source files than file members".into()));
                }
                return digest.ok_or_else(|| CliError::Bug("the writer named no digest".into()));
            }
        }
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;
    use std::sync::mpsc;
    use std::time::Duration;

    /// Walks `ws` as pack does.
    fn walked(ws: &Path) -> Vec<Planned> {
        let mut walk = Walk::default();
        walk_tree(ws, "workspace", &WalkOptions::default(), &mut walk).unwrap();
        walk.planned
    }

    /// Packs what was walked into a file, no secret in the way.
    fn pack_walked(planned: Vec<Planned>, out: &Path) -> Result<Manifest> {
        match into_file::pack_into_file(
            planned,
            None,
            vec![],
            out,
            &Progress::new(true),
            &mut || {},
            &|_| true,
            &Scanner::new(),
        )? {
            into_file::Packed::Kept(m, ..) => Ok(m),
            into_file::Packed::Blocked(_) => unreachable!("every secret is accepted"),
        }
    }

    /// Runs `f` on a thread and fails the test if it takes longer than a
    /// few seconds (instead of hanging on a FIFO).
    fn within_seconds<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(f());
        });
        rx.recv_timeout(Duration::from_secs(20))
            .expect("pack blocked instead of refusing")
    }

    /// A workspace with `d/file.txt`, walked, then `d` replaced by a
    /// symlink to a folder outside holding a file of the same name (as
    /// `~/.codex` holds `auth.json`).
    fn swapped_folder() -> (tempfile::TempDir, Vec<Planned>) {
        let t = tempfile::tempdir().unwrap();
        let ws = t.path().join("ws");
        fs::create_dir_all(ws.join("d")).unwrap();
        fs::write(ws.join("d/file.txt"), b"mine").unwrap();
        fs::create_dir_all(t.path().join("outside")).unwrap();
        fs::write(t.path().join("outside/file.txt"), b"SECRET-OUTSIDE").unwrap();
        let planned = walked(&ws);
        fs::rename(ws.join("d"), t.path().join("moved")).unwrap();
        symlink(t.path().join("outside"), ws.join("d")).unwrap();
        (t, planned)
    }

    #[test]
    fn save_s_in_memory_pack_screens_git_history_as_pack_does() {
        let t = tempfile::tempdir().unwrap();
        let ws = t.path().join("ws");
        fs::create_dir_all(&ws).unwrap();
        repository_with_a_key_in_history(&ws);
        let request = |mode| PackRequest {
            workspace: ws.clone(),
            output: PathBuf::from("-"),
            harness: None,
            walk: WalkOptions::default(),
            secrets: SecretPolicy {
                mode,
                allow: vec![],
            },
        };
        let e = pack_for_save(&request(SecretsMode::Refuse), None, &Progress::new(true))
            .err()
            .unwrap();
        assert_eq!(e.code(), "secret_in_git_history");
        let packed =
            pack_for_save(&request(SecretsMode::Exclude), None, &Progress::new(true)).unwrap();
        assert_eq!(packed.report.secrets.len(), 1);
        assert_eq!(packed.report.secrets[0].action, "excluded");
        let left_out = &packed.report.skipped[0].path;
        assert!(left_out.starts_with("workspace/.git/objects/"));
        assert!(!packed.manifest.members.iter().any(|m| &m.path == left_out));
    }

    #[test]
    fn a_folder_swapped_for_a_symlink_after_the_walk_is_never_followed() {
        let (t, planned) = swapped_folder();
        let out = t.path().join("p.tar");
        let e = pack_walked(planned, &out).unwrap_err();
        assert_eq!(e.code(), "workspace_changed", "{:?}", e.report());
        assert_eq!(
            e.report().details.path.as_deref(),
            Some("workspace/d/file.txt")
        );
        assert!(!out.exists());
        // To standard output, the first pass refuses it the same way.
        let (_t, planned) = swapped_folder();
        let e = hash_all(planned, &Progress::new(true)).err().unwrap();
        assert_eq!(e.code(), "workspace_changed");
    }

    #[test]
    fn a_folder_swapped_for_another_real_folder_is_refused() {
        let t = tempfile::tempdir().unwrap();
        let ws = t.path().join("ws");
        fs::create_dir_all(ws.join("d")).unwrap();
        fs::write(ws.join("d/file.txt"), b"mine").unwrap();
        let planned = walked(&ws);
        fs::rename(ws.join("d"), t.path().join("moved")).unwrap();
        fs::create_dir_all(ws.join("d")).unwrap();
        fs::write(ws.join("d/file.txt"), b"another").unwrap();
        let e = pack_walked(planned, &t.path().join("p.tar")).unwrap_err();
        assert_eq!(e.code(), "workspace_changed");
    }

    #[test]
    fn a_file_swapped_for_a_fifo_is_refused_without_blocking() {
        for stdout in [false, true] {
            let t = tempfile::tempdir().unwrap();
            let ws = t.path().join("ws");
            fs::create_dir_all(&ws).unwrap();
            fs::write(ws.join("a.txt"), b"a").unwrap();
            let planned = walked(&ws);
            fs::remove_file(ws.join("a.txt")).unwrap();
            rustix::fs::mknodat(
                rustix::fs::CWD,
                ws.join("a.txt"),
                rustix::fs::FileType::Fifo,
                Mode::from_raw_mode(0o644),
                0,
            )
            .unwrap();
            let out = t.path().join("p.tar");
            let e = within_seconds(move || {
                if stdout {
                    hash_all(planned, &Progress::new(true)).err().unwrap()
                } else {
                    pack_walked(planned, &out).unwrap_err()
                }
            });
            assert_eq!(e.code(), "workspace_changed", "to stdout: {stdout}");
        }
    }

    #[test]
    fn a_sparse_file_past_the_limit_is_refused_before_it_is_read() {
        for stdout in [false, true] {
            let t = tempfile::tempdir().unwrap();
            let ws = t.path().join("ws");
            fs::create_dir_all(&ws).unwrap();
            // 4 TiB of holes: hashing it would take hours.
            let f = File::create(ws.join("sparse.img")).unwrap();
            f.set_len(4 << 40).unwrap();
            let planned = walked(&ws);
            let out = t.path().join("p.tar");
            let e = within_seconds(move || {
                if stdout {
                    hash_all(planned, &Progress::new(true)).err().unwrap()
                } else {
                    pack_walked(planned, &out).unwrap_err()
                }
            });
            assert_eq!(e.code(), "limit_size", "to stdout: {stdout}");
        }
    }

    #[test]
    fn a_file_that_grew_after_the_walk_is_read_no_further_than_a_byte_past_its_size() {
        let t = tempfile::tempdir().unwrap();
        let ws = t.path().join("ws");
        fs::create_dir_all(&ws).unwrap();
        fs::write(ws.join("log.txt"), b"short").unwrap();
        let planned = walked(&ws);
        // Grown to 4 TiB (sparse) after the walk, in place.
        let f = fs::OpenOptions::new()
            .write(true)
            .open(ws.join("log.txt"))
            .unwrap();
        f.set_len(4 << 40).unwrap();
        let e = within_seconds(move || hash_all(planned, &Progress::new(true)).err().unwrap());
        assert_eq!(e.code(), "member_mismatch");
        assert!(e.report().details.message.contains("grew"));
    }

    /// Hashes a one-file workspace, lets `change` alter the file, then
    /// writes: the writer must refuse the changed file.
    fn write_after(change: impl FnOnce(&Path)) -> CliError {
        let t = tempfile::tempdir().unwrap();
        let file = t.path().join("f.txt");
        fs::write(&file, b"0123456789").unwrap();
        let planned = vec![
            Planned::Dir {
                member: "workspace".into(),
            },
            Planned::File {
                member: "workspace/f.txt".into(),
                source: Some(file.clone()),
                executable: false,
                size: 10,
            },
        ];
        let (entries, sources, _) = hash_all(planned, &Progress::new(true)).unwrap();
        let manifest = Manifest::build(entries, None, vec![], &Limits::FORMAT).unwrap();
        change(&file);
        write_packet(
            &manifest,
            &sources,
            io::sink(),
            &Progress::new(true),
            "sink",
        )
        .unwrap_err()
    }

    #[test]
    fn a_file_changed_between_hashing_and_writing_is_refused() {
        let e = write_after(|f| fs::write(f, b"0123456780").unwrap());
        assert_eq!(e.code(), "member_digest_mismatch");
        assert_eq!(e.report().details.path.as_deref(), Some("workspace/f.txt"));
        assert_eq!(
            write_after(|f| fs::write(f, b"01234567890").unwrap()).code(),
            "member_mismatch"
        );
        assert_eq!(
            write_after(|f| fs::write(f, b"012").unwrap()).code(),
            "member_mismatch"
        );
        let e = write_after(|f| {
            fs::remove_file(f).unwrap();
            std::os::unix::fs::symlink("/etc/hostname", f).unwrap();
        });
        // Refused as a change of the workspace (it was a generic I/O
        // error before the opened file was checked).
        assert_eq!(
            e.code(),
            "workspace_changed",
            "a file replaced by a symlink is not followed"
        );
    }
}
