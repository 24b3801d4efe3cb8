//! `pillbox checkpoint unpack`: pass 1 verifies the whole packet (digest
//! included) and writes nothing; pass 2 reads it again with a fresh reader
//! that expects the same digest, writing members into staging folders
//! created inside each target; only when pass 2 has verified everything are
//! the staged files renamed into place. Any failure removes the staging
//! folders (and targets this command created), leaving the targets as they were.

use std::borrow::Cow;
use std::fs::{self, File};
use std::io::{Read, Write};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};

use packet_core::{Digest, Event, Kind, Manifest, ReaderOptions};
use rustix::fs::{fchmod, mkdirat, openat, symlinkat, Mode, OFlags, CWD};
use serde::Serialize;
use tempfile::TempDir;

use crate::error::{CliError, Result};
use crate::harness::{self, RestorePlan};
use crate::packet_io::{self, PacketSource};
use crate::progress::Progress;
use crate::report::{HarnessReport, Totals};

/// Where to unpack.
pub struct UnpackRequest {
    /// The workspace target (absent or empty).
    pub into: PathBuf,
    /// The digest the packet must have; `None` only with `--trust-unverified`.
    pub expected: Option<Digest>,
    /// Where to restore a Codex rollout.
    pub codex_home: Option<PathBuf>,
    /// Where to restore a Claude Code transcript.
    pub claude_config_dir: Option<PathBuf>,
}

/// The `pillbox.checkpoint.unpack/1` object.
#[derive(Debug, Serialize)]
pub struct UnpackReport {
    /// `pillbox.checkpoint.unpack/1`.
    pub schema: &'static str,
    /// The packet digest.
    pub digest: String,
    /// Whether the digest was checked against `--digest` (false with `--trust-unverified`).
    pub digest_checked: bool,
    /// Packet size in bytes.
    pub size: u64,
    /// Members after `packet.json`.
    pub members: u64,
    /// Manifest totals.
    pub totals: Totals,
    /// Absolute path of the restored workspace.
    pub workspace: String,
    /// Harness state in the packet and where it was restored.
    pub harness: Option<HarnessReport>,
}

/// Folders this command created, removed again if it fails.
#[derive(Default)]
struct Created(Vec<PathBuf>);

impl Created {
    /// Creates `dir` and its missing parents, remembering each.
    fn dir_all(&mut self, dir: &Path) -> Result<()> {
        let mut missing = Vec::new();
        let mut at = Some(dir);
        while let Some(p) = at {
            if p.as_os_str().is_empty() || fs::symlink_metadata(p).is_ok() {
                break;
            }
            missing.push(p.to_path_buf());
            at = p.parent();
        }
        for p in missing.into_iter().rev() {
            fs::create_dir(&p).map_err(|e| CliError::io("create", &p, e))?;
            self.0.push(p);
        }
        Ok(())
    }

    /// Removes what was created, deepest first (only if still empty).
    fn undo(&mut self) {
        for p in self.0.drain(..).rev() {
            let _ = fs::remove_dir(p);
        }
    }
}

/// Unpacks; returns the report.
pub fn unpack(
    source: &dyn PacketSource,
    request: &UnpackRequest,
    progress: &Progress,
) -> Result<UnpackReport> {
    check_target(&request.into)?;
    let first = packet_io::verify(source, request.expected, progress)?;
    let digest = first.verified.digest.ok_or_else(|| {
        CliError::Packet(packet_core::Error::new(
            packet_core::ErrorCode::Usage,
            "the reader computed no digest",
        ))
    })?;
    let (size, totals) = (first.verified.size, first.manifest.totals);
    let mut created = Created::default();
    let result = place(
        source,
        request,
        first.manifest,
        digest,
        progress,
        &mut created,
    );
    match result {
        Ok((workspace, harness)) => {
            progress.finish();
            Ok(UnpackReport {
                schema: "pillbox.checkpoint.unpack/1",
                digest: digest.to_string(),
                digest_checked: request.expected.is_some(),
                size,
                members: totals.members,
                totals,
                workspace: workspace.display().to_string(),
                harness,
            })
        }
        Err(e) => {
            created.undo();
            progress.finish();
            Err(e)
        }
    }
}

/// A target must be absent or an empty directory.
fn check_target(target: &Path) -> Result<()> {
    match fs::metadata(target) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(CliError::io("inspect", target, e)),
        Ok(m) if !m.is_dir() => Err(CliError::refused(
            "target_not_directory",
            Some(target),
            format!("{} exists and is not a directory", target.display()),
            "unpack into an empty or absent directory",
        )),
        Ok(_) => {
            let mut entries = fs::read_dir(target).map_err(|e| CliError::io("list", target, e))?;
            if entries.next().is_some() {
                return Err(CliError::refused(
                    "target_not_empty",
                    Some(target),
                    format!(
                        "{} is not empty; unpack never overwrites or merges",
                        target.display()
                    ),
                    "unpack into an empty or absent directory",
                ));
            }
            Ok(())
        }
    }
}

/// Where harness members go during pass 2, and then for good.
struct HarnessTarget {
    prefix: String,
    staging: TempDir,
    plan: RestorePlan,
}

/// Takes the manifest pass 1 verified by value: it is dropped before pass 2,
/// whose reader parses its own, so that only one is held at a time.
fn place(
    source: &dyn PacketSource,
    request: &UnpackRequest,
    manifest: Manifest,
    digest: Digest,
    progress: &Progress,
    created: &mut Created,
) -> Result<(PathBuf, Option<HarnessReport>)> {
    created.dir_all(&request.into)?;
    let workspace =
        fs::canonicalize(&request.into).map_err(|e| CliError::io("open", &request.into, e))?;
    let ws_staging = staging_in(&workspace)?;

    let mut harness_target = None;
    if let Some(h) = &manifest.harness {
        let home = match h.kind {
            packet_core::HarnessKind::Codex => request.codex_home.as_deref(),
            packet_core::HarnessKind::Claude => request.claude_config_dir.as_deref(),
        };
        if let Some(home) = home {
            created.dir_all(home)?;
            let home = fs::canonicalize(home).map_err(|e| CliError::io("open", home, e))?;
            let plan = harness::adapter(h.kind).restore_plan(&home, h, &manifest, &workspace)?;
            harness_target = Some(HarnessTarget {
                prefix: format!("harness/{}/", h.kind.as_str()),
                staging: staging_in(&home)?,
                plan,
            });
        }
    }

    // Pass 2: a fresh read that must hash to the digest pass 1 saw. Pass 1
    // checked every member's sha256, so a read with the same packet digest
    // holds the same bodies: they are not hashed again, and nothing staged
    // is moved into place before this read's digest matched.
    let options = ReaderOptions {
        expected_digest: Some(digest),
        skip_member_digests: true,
        ..ReaderOptions::default()
    };
    progress.phase("unpack", source.size_hint().unwrap_or(0));
    let mut roots = vec![("workspace/", ws_staging.path().to_path_buf())];
    if let Some(t) = &harness_target {
        roots.push((t.prefix.as_str(), t.staging.path().to_path_buf()));
    }
    let harness_descriptor = manifest.harness.clone();
    drop(manifest);
    let mut writer = StagingWriter::new(roots)?;
    packet_io::read_packet_explained(
        source,
        options,
        progress,
        &mut |m, event| writer.on_event(m, event),
        &mut |m, e| explain_second_pass_mismatch(e, m, &ws_staging, harness_target.as_ref()),
    )?;
    drop(writer);

    // Everything matched: move into place, undoing the moves on failure.
    let mut moved: Vec<(PathBuf, PathBuf)> = Vec::new();
    let result = move_into_place(
        &ws_staging,
        &workspace,
        harness_target.as_ref(),
        created,
        &mut moved,
    );
    if let Err(e) = result {
        for (from, to) in moved.iter().rev() {
            let _ = fs::rename(to, from);
        }
        return Err(e);
    }
    let harness = harness_descriptor.as_ref().map(|h| {
        let mut r = HarnessReport::of(h);
        r.restored = Some(harness_target.is_some());
        r.rollout_path = Some(
            harness_target
                .as_ref()
                .map(|t| t.plan.rollout_path.display().to_string()),
        );
        r
    });
    Ok((workspace, harness))
}

/// Pass 2 hashes only the whole packet. When it fails (its digest differs
/// from the one pass 1 verified, or a later header is damaged), the packet
/// changed in between: name the first member whose staged bytes (the bytes
/// pass 2 read, fully written) disagree with the sha256 in pass 2's
/// manifest, as a check of member digests in pass 2 would have.
fn explain_second_pass_mismatch(
    error: CliError,
    manifest: &Manifest,
    ws_staging: &TempDir,
    harness: Option<&HarnessTarget>,
) -> CliError {
    if !matches!(error, CliError::Packet(_)) {
        return error;
    }
    let mut roots = vec![("workspace/", ws_staging.path())];
    if let Some(t) = harness {
        roots.push((t.prefix.as_str(), t.staging.path()));
    }
    let mut buf = vec![0u8; packet_io::CHUNK];
    for entry in manifest.members.iter().filter(|e| e.kind == Kind::File) {
        let (Some(expected), Some(staged)) = (
            entry.sha256,
            roots
                .iter()
                .find_map(|(prefix, root)| entry.path.strip_prefix(prefix).map(|r| root.join(r))),
        ) else {
            continue;
        };
        let Ok(mut f) = File::open(&staged) else {
            continue;
        };
        // A member cut short by the failure is not evidence.
        if f.metadata().map_or(true, |m| m.len() != entry.size) {
            continue;
        }
        let mut hasher = packet_core::Hasher::new();
        let read_whole = loop {
            match f.read(&mut buf) {
                Ok(0) => break true,
                Ok(n) => hasher.update(&buf[..n]),
                Err(_) => break false,
            }
        };
        if read_whole && hasher.finish() != expected {
            return CliError::Packet(
                packet_core::Error::new(
                    packet_core::ErrorCode::MemberDigestMismatch,
                    "the packet changed after it was verified: this member's bytes no longer match its sha256",
                )
                .at_path(&entry.path),
            );
        }
    }
    error
}

fn staging_in(dir: &Path) -> Result<TempDir> {
    tempfile::Builder::new()
        .prefix(".pillbox-unpack-")
        .tempdir_in(dir)
        .map_err(|e| CliError::io("create a staging folder in", dir, e))
}

fn move_into_place(
    ws_staging: &TempDir,
    workspace: &Path,
    harness: Option<&HarnessTarget>,
    created: &mut Created,
    moved: &mut Vec<(PathBuf, PathBuf)>,
) -> Result<()> {
    let entries =
        fs::read_dir(ws_staging.path()).map_err(|e| CliError::io("list", ws_staging.path(), e))?;
    for entry in entries {
        let entry = entry.map_err(|e| CliError::io("list", ws_staging.path(), e))?;
        let to = workspace.join(entry.file_name());
        rename_new(&entry.path(), &to)?;
        moved.push((entry.path(), to));
    }
    if let Some(t) = harness {
        for m in &t.plan.moves {
            let from = t.staging.path().join(&m.relative);
            if let Some(parent) = m.destination.parent() {
                created.dir_all(parent)?;
            }
            rename_new(&from, &m.destination)?;
            moved.push((from, m.destination.clone()));
        }
    }
    Ok(())
}

/// Renames, refusing to replace anything that appeared meanwhile.
fn rename_new(from: &Path, to: &Path) -> Result<()> {
    if fs::symlink_metadata(to).is_ok() {
        return Err(CliError::refused(
            "target_not_empty",
            Some(to),
            format!("{} appeared while unpacking", to.display()),
            "make sure nothing else writes to the target, then unpack again",
        ));
    }
    fs::rename(from, to).map_err(|e| CliError::io("move into place", to, e))
}

/// Folders kept open (as descriptors) along the current path; deeper
/// folders are reached by path, so a deep packet cannot exhaust descriptors.
const MAX_OPEN_DIRS: usize = 128;

/// The mode of every folder unpacked.
const DIR_MODE: u32 = 0o755;

/// A folder this writer created, on the current path.
struct OpenDir {
    /// Its member path.
    member: String,
    /// Its staging path (for messages, and to reach it without `fd`).
    path: PathBuf,
    fd: Option<OwnedFd>,
}

/// A staging root: members under `prefix` go below `path`.
struct Root<'a> {
    prefix: &'a str,
    path: PathBuf,
    fd: OwnedFd,
}

/// Writes members into staging folders. Never follows a symlink: every
/// parent is a folder this writer created (reached through a descriptor it
/// opened on it, or by a path made only of such folders), entries are
/// created new (`O_EXCL`, `O_NOFOLLOW`), and packet-core has already
/// refused members below symlinks. The packet's order puts every folder
/// right before its subtree, so the folders of the current path are a stack.
struct StagingWriter<'a> {
    roots: Vec<Root<'a>>,
    dirs: Vec<OpenDir>,
    /// The file being written and its member index.
    current: Option<(File, usize)>,
    /// The process's file creation mask: modes it would strip are set
    /// explicitly after creation.
    umask: u32,
}

impl<'a> StagingWriter<'a> {
    fn new(roots: Vec<(&'a str, PathBuf)>) -> Result<StagingWriter<'a>> {
        let roots = roots
            .into_iter()
            .map(|(prefix, path)| {
                let fd = open_dir(CWD, &path).map_err(|e| CliError::io("open", &path, e))?;
                Ok(Root { prefix, path, fd })
            })
            .collect::<Result<_>>()?;
        // umask(2) can only be read by setting it: set it back at once.
        let umask = rustix::process::umask(Mode::empty());
        rustix::process::umask(umask);
        Ok(StagingWriter {
            roots,
            dirs: Vec::new(),
            current: None,
            umask: umask.bits(),
        })
    }

    /// The staging path of a member, or `None` for roots and harness
    /// members that are not restored.
    fn staging_path(&self, member: &str) -> Option<PathBuf> {
        self.roots
            .iter()
            .find_map(|r| member.strip_prefix(r.prefix).map(|rest| r.path.join(rest)))
    }

    /// The folder to create `member` in, as (descriptor, name relative to
    /// it, staging path of the member); `Ok(None)` when the member is not
    /// written.
    fn locate<'m>(
        &mut self,
        member: &'m str,
    ) -> Result<Option<(BorrowedFd<'_>, Cow<'m, Path>, PathBuf)>> {
        let Some(root) = self.roots.iter().position(|r| member.starts_with(r.prefix)) else {
            return Ok(None);
        };
        let rest = &member[self.roots[root].prefix.len()..];
        let (parent, name) = match rest.rsplit_once('/') {
            Some((_, name)) => (Some(&member[..member.len() - name.len() - 1]), name),
            None => (None, rest),
        };
        let Some(parent) = parent else {
            let r = &self.roots[root];
            return Ok(Some((
                r.fd.as_fd(),
                Cow::Borrowed(Path::new(name)),
                r.path.join(name),
            )));
        };
        while self.dirs.last().is_some_and(|d| d.member != parent) {
            self.dirs.pop();
        }
        let Some(dir) = self.dirs.last() else {
            return Err(CliError::refused(
                "unpack_parent_missing",
                Some(Path::new(member)),
                "the member's parent folder was not created by this unpack",
                "the packet is malformed: repack it from the source workspace",
            ));
        };
        let path = dir.path.join(name);
        Ok(Some(match &dir.fd {
            Some(fd) => (fd.as_fd(), Cow::Borrowed(Path::new(name)), path),
            None => (CWD, Cow::Owned(path.clone()), path),
        }))
    }

    /// The bits of `mode` the umask would strip at creation.
    fn stripped(&self, mode: u32) -> bool {
        mode & self.umask != 0
    }

    fn on_event(&mut self, manifest: &Manifest, event: Event<'_>) -> Result<()> {
        match event {
            Event::Manifest => Ok(()),
            Event::MemberStart { index, .. } => {
                let entry = &manifest.members[index];
                let umask_strips = self.stripped(match entry.kind {
                    Kind::Dir => DIR_MODE,
                    _ => entry.mode,
                });
                let Some((at, name, path)) = self.locate(&entry.path)? else {
                    return Ok(());
                };
                match entry.kind {
                    Kind::Dir => {
                        let mode = Mode::from_raw_mode(DIR_MODE);
                        mkdirat(at, &*name, mode)
                            .map_err(|e| CliError::io("create", &path, e.into()))?;
                        let fd = open_dir(at, &name).map_err(|e| CliError::io("open", &path, e))?;
                        if umask_strips {
                            fchmod(&fd, mode)
                                .map_err(|e| CliError::io("set permissions of", &path, e.into()))?;
                        }
                        let fd = (self.dirs.len() < MAX_OPEN_DIRS).then_some(fd);
                        self.dirs.push(OpenDir {
                            member: entry.path.clone(),
                            path,
                            fd,
                        });
                    }
                    Kind::Symlink => {
                        let target = entry.target.as_deref().unwrap_or("");
                        symlinkat(target, at, &*name)
                            .map_err(|e| CliError::io("create the symlink", &path, e.into()))?;
                    }
                    Kind::File => {
                        let mode = Mode::from_raw_mode(entry.mode);
                        let flags = OFlags::WRONLY
                            | OFlags::CREATE
                            | OFlags::EXCL
                            | OFlags::NOFOLLOW
                            | OFlags::CLOEXEC;
                        let fd = openat(at, &*name, flags, mode)
                            .map_err(|e| CliError::io("create", &path, e.into()))?;
                        if umask_strips {
                            fchmod(&fd, mode)
                                .map_err(|e| CliError::io("set permissions of", &path, e.into()))?;
                        }
                        self.current = Some((File::from(fd), index));
                    }
                }
                Ok(())
            }
            Event::Data(bytes) => {
                let Some((f, index)) = &mut self.current else {
                    return Ok(());
                };
                let index = *index;
                f.write_all(bytes).map_err(|e| {
                    let member = &manifest.members[index].path;
                    CliError::io("write", self.staging_path(member).unwrap_or_default(), e)
                })
            }
            Event::MemberEnd { .. } => {
                self.current = None;
                Ok(())
            }
        }
    }
}

/// Opens a folder this writer just created, refusing anything else.
fn open_dir(at: BorrowedFd<'_>, path: &Path) -> std::io::Result<OwnedFd> {
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    Ok(openat(at, path, flags, Mode::empty())?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use packet_core::build::{build, Source};
    use packet_core::Limits;
    use std::cell::Cell;
    use std::io::Read;

    fn packet(body: &[u8]) -> packet_core::build::Built {
        build(
            &[
                Source::Dir {
                    path: "workspace".into(),
                },
                Source::File {
                    path: "workspace/data.txt".into(),
                    contents: body.to_vec(),
                    executable: false,
                },
            ],
            None,
            vec![],
            &Limits::FORMAT,
        )
        .unwrap()
    }

    /// A source whose second read differs from its first, as a file
    /// rewritten between the two passes would.
    struct ChangesAfterFirstPass {
        first: Vec<u8>,
        second: Vec<u8>,
        opened: Cell<u32>,
    }

    impl PacketSource for ChangesAfterFirstPass {
        fn open_packet(&self) -> Result<Box<dyn Read + '_>> {
            let n = self.opened.get();
            self.opened.set(n + 1);
            Ok(Box::new(if n == 0 {
                &self.first[..]
            } else {
                &self.second[..]
            }))
        }
        fn label(&self) -> String {
            "changing".into()
        }
        fn size_hint(&self) -> Option<u64> {
            None
        }
    }

    fn unpack_changing(
        first: Vec<u8>,
        second: Vec<u8>,
        expected: Option<Digest>,
    ) -> (CliError, tempfile::TempDir) {
        let t = tempfile::tempdir().unwrap();
        let source = ChangesAfterFirstPass {
            first,
            second,
            opened: Cell::new(0),
        };
        let request = UnpackRequest {
            into: t.path().join("ws"),
            expected,
            codex_home: None,
            claude_config_dir: None,
        };
        let err = unpack(&source, &request, &Progress::new(true)).unwrap_err();
        assert_eq!(source.opened.get(), 2, "both passes ran");
        (err, t)
    }

    #[test]
    fn a_body_tampered_after_the_first_pass_is_caught_and_nothing_is_left() {
        let good = packet(b"the original contents");
        let mut tampered = good.bytes.clone();
        let at = tampered.windows(8).position(|w| w == b"original").unwrap();
        tampered[at] = b'O';
        let (err, t) = unpack_changing(good.bytes, tampered, Some(good.digest));
        assert_eq!(err.code(), "member_digest_mismatch");
        assert_eq!(err.report().path.as_deref(), Some("workspace/data.txt"));
        assert!(
            !t.path().join("ws").exists(),
            "the target it created is removed"
        );
    }

    #[test]
    fn a_packet_swapped_after_the_first_pass_is_caught_even_without_a_digest() {
        let good = packet(b"one");
        let other = packet(b"two");
        let (err, t) = unpack_changing(good.bytes, other.bytes, None);
        assert_eq!(err.code(), "packet_digest_mismatch");
        assert!(!t.path().join("ws").exists());
    }

    #[test]
    fn an_empty_existing_target_is_left_empty_on_failure() {
        let good = packet(b"abc");
        let t = tempfile::tempdir().unwrap();
        let source = ChangesAfterFirstPass {
            first: good.bytes.clone(),
            second: packet(b"abd").bytes,
            opened: Cell::new(0),
        };
        let request = UnpackRequest {
            into: t.path().to_path_buf(),
            expected: Some(good.digest),
            codex_home: None,
            claude_config_dir: None,
        };
        assert!(unpack(&source, &request, &Progress::new(true)).is_err());
        assert_eq!(fs::read_dir(t.path()).unwrap().count(), 0);
    }
}
