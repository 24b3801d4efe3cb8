//! `pillbox checkpoint unpack`: one read of the packet through packet-core's
//! [`Reader`](packet_core::Reader), which checks every header, member
//! digest and the packet digest as the bytes stream by, while a second
//! thread writes the members into staging folders created inside each
//! target. Only when the whole packet has verified are the staged entries
//! renamed into place. Any failure removes the staging folders (and the
//! targets this command created), leaving the targets as they were.

use std::borrow::Cow;
use std::fs::{self, File};
use std::io::Write;
use std::ops::Range;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};

use packet_core::{Digest, Event, Kind, ReaderOptions, VerifiedPacket};
use rustix::fs::{fchmod, mkdirat, openat, symlinkat, Mode, OFlags, CWD};
use serde::Serialize;
use tempfile::TempDir;

use crate::error::{CliError, Refused, Result};
use crate::harness::{self, opencode, RestorePlan};
use crate::packet_io::{self, Block, PacketSource};
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
    /// The OpenCode program that imports an OpenCode session (`None`: the
    /// export is verified, not imported).
    pub opencode: Option<PathBuf>,
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
    let mut created = Created::default();
    let result = place(source, request, progress, &mut created);
    progress.finish();
    match result {
        Ok(placed) => {
            let totals = placed.read.manifest.totals;
            Ok(UnpackReport {
                schema: "pillbox.checkpoint.unpack/1",
                digest: placed.read.digest.to_string(),
                digest_checked: request.expected.is_some(),
                size: placed.read.size,
                members: totals.members,
                totals,
                workspace: placed.workspace.display().to_string(),
                harness: placed.harness,
            })
        }
        Err(e) => {
            created.undo();
            Err(e)
        }
    }
}

/// A target must be absent or an empty directory.
fn check_target(target: &Path) -> Result<()> {
    match fs::metadata(target) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(CliError::io("inspect", target, e)),
        Ok(m) if !m.is_dir() => Err(Refused::TargetNotDirectory {
            target: target.to_path_buf(),
        }
        .into()),
        Ok(_) => {
            let mut entries = fs::read_dir(target).map_err(|e| CliError::io("list", target, e))?;
            if entries.next().is_some() {
                return Err(Refused::TargetNotEmpty {
                    target: target.to_path_buf(),
                }
                .into());
            }
            Ok(())
        }
    }
}

/// Where harness members go while the packet is read, and then for good.
struct HarnessTarget {
    prefix: String,
    staging: TempDir,
    plan: RestorePlan,
}

/// What [`place`] established.
struct Placed {
    read: VerifiedPacket,
    workspace: PathBuf,
    harness: Option<HarnessReport>,
}

/// Reads the packet once, verifying it as it streams while a second
/// thread writes its members into staging folders; moves the staged
/// entries into place only once the whole packet verified.
fn place(
    source: &dyn PacketSource,
    request: &UnpackRequest,
    progress: &Progress,
    created: &mut Created,
) -> Result<Placed> {
    created.dir_all(&request.into)?;
    let workspace =
        fs::canonicalize(&request.into).map_err(|e| CliError::io("open", &request.into, e))?;
    let ws_staging = staging_in(&workspace)?;
    let options = ReaderOptions {
        expected_digest: request.expected,
        ..ReaderOptions::default()
    };
    progress.phase("unpack", source.size_hint().unwrap_or(0));
    let mut harness_target: Option<HarnessTarget> = None;
    let (ops, queue) = mpsc::sync_channel::<Vec<Op>>(BATCHES);
    let stop = AtomicBool::new(false);
    let read = std::thread::scope(|scope| {
        let ws_root = ws_staging.path().to_path_buf();
        let stop = &stop;
        let writing = scope.spawn(move || -> Result<()> {
            let mut writer = StagingWriter::new(vec![("workspace/".to_owned(), ws_root)])?;
            for batch in queue {
                if stop.load(Ordering::Relaxed) {
                    break;
                }
                for op in batch {
                    writer.apply(op)?;
                }
            }
            Ok(())
        });
        // Operations go to the writing thread in batches: one per read
        // block at most (so that the reading thread never holds more than
        // the block it is parsing), and at most BATCH long.
        let mut batch: Vec<Op> = Vec::with_capacity(BATCH);
        let mut batch_block: *const Block = std::ptr::null();
        let flush = |batch: &mut Vec<Op>| {
            if batch.is_empty() {
                return Ok(());
            }
            let full = std::mem::replace(batch, Vec::with_capacity(BATCH));
            ops.send(full).map_err(|_| writer_stopped())
        };
        let read = packet_io::read_packet_blocks(source, options, progress, &mut |event, block| {
            if !std::ptr::eq(Arc::as_ptr(block), batch_block) || batch.len() >= BATCH {
                flush(&mut batch)?;
                batch_block = Arc::as_ptr(block);
            }
            let mut send = |op: Op| {
                batch.push(op);
                Ok::<(), CliError>(())
            };
            match event {
                Event::Manifest(m) => {
                    let Some(h) = &m.harness else {
                        return Ok(());
                    };
                    let home = match h.kind {
                        packet_core::HarnessKind::Codex => request.codex_home.as_deref(),
                        packet_core::HarnessKind::Claude => request.claude_config_dir.as_deref(),
                        packet_core::HarnessKind::Opencode => None,
                    };
                    let (plan, staging) = if let Some(home) = home {
                        created.dir_all(home)?;
                        let home =
                            fs::canonicalize(home).map_err(|e| CliError::io("open", home, e))?;
                        let plan =
                            harness::adapter(h.kind).restore_plan(&home, h, m, &workspace)?;
                        (plan, staging_in(&home)?)
                    } else if let (packet_core::HarnessKind::Opencode, Some(program)) =
                        (h.kind, &request.opencode)
                    {
                        // Before any byte is read: an OpenCode that cannot
                        // import the session is known now.
                        let local = opencode::version(program, &workspace)?;
                        opencode::check_not_older(program, &local, h.version.as_deref())?;
                        let staging = staging_in(&std::env::temp_dir())?;
                        let plan = harness::adapter(h.kind).restore_plan(
                            staging.path(),
                            h,
                            m,
                            &workspace,
                        )?;
                        (plan, staging)
                    } else {
                        return Ok(());
                    };
                    let target = HarnessTarget {
                        prefix: format!("{}/", h.kind.root()),
                        staging,
                        plan,
                    };
                    send(Op::Root(
                        target.prefix.clone(),
                        target.staging.path().to_path_buf(),
                    ))?;
                    harness_target = Some(target);
                    Ok(())
                }
                Event::MemberStart { member: e, .. } => send(Op::Start(Member {
                    path: e.path.clone(),
                    kind: e.kind,
                    mode: e.mode,
                    target: e.target.clone(),
                })),
                Event::Data(bytes) => send(match block.offset_of(bytes) {
                    Some(at) => Op::Data(Arc::clone(block), at..at + bytes.len()),
                    None => Op::Bytes(bytes.to_vec()),
                }),
                Event::MemberEnd { .. } => send(Op::End),
            }
        });
        let read = read.and_then(|r| flush(&mut batch).map(|()| r));
        drop(batch);
        drop(ops);
        if read.is_err() {
            stop.store(true, Ordering::Relaxed);
        }
        let written = writing.join().unwrap_or_else(|_| Err(writer_stopped()));
        match (read, written) {
            // The writer's own error explains why it stopped taking work.
            (Err(CliError::Refused(Refused::UnpackWriterStopped {})), Err(w)) => Err(w),
            (Err(e), _) => Err(e),
            (Ok(_), Err(w)) => Err(w),
            (Ok(read), Ok(())) => Ok(read),
        }
    })?;

    // Everything verified. An OpenCode session to import must not replace
    // another copy of it on this machine.
    let import = match (&harness_target, &request.opencode, &read.manifest.harness) {
        (Some(t), Some(program), Some(h)) => match &t.plan.import {
            Some(relative) => Some(opencode::PendingImport::prepare(
                program,
                &h.session_id,
                t.staging.path().join(relative),
                &workspace,
            )?),
            None => None,
        },
        _ => None,
    };
    // Move into place (then import), undoing the moves on failure.
    let mut moved: Vec<(PathBuf, PathBuf)> = Vec::new();
    let result = move_into_place(
        &ws_staging,
        &workspace,
        harness_target.as_ref(),
        created,
        &mut moved,
    )
    .and_then(|()| match (&import, &request.opencode) {
        (Some(i), Some(program)) if !i.already_there => i.run(program, &workspace),
        _ => Ok(()),
    });
    if let Err(e) = result {
        for (from, to) in moved.iter().rev() {
            let _ = fs::rename(to, from);
        }
        return Err(e);
    }
    let harness = read.manifest.harness.as_ref().map(|h| {
        let mut r = HarnessReport::of(h);
        r.restored = Some(harness_target.is_some());
        r.rollout_path = Some(
            harness_target
                .as_ref()
                .and_then(|t| t.plan.rollout_path.as_ref())
                .map(|p| p.display().to_string()),
        );
        if let Some(i) = &import {
            r.messages = Some(i.summary.message_ids.len() as u64);
            r.last_message = Some(i.summary.message_ids.last().cloned());
        }
        r
    });
    Ok(Placed {
        read,
        workspace,
        harness,
    })
}

/// The error the reading thread gets when the writing thread stopped
/// taking work (the writer's own error is reported instead).
fn writer_stopped() -> CliError {
    Refused::UnpackWriterStopped {}.into()
}

/// Batches of operations queued for the writing thread (each operation is
/// at most a few hundred bytes: member data travels as a shared read
/// block).
const BATCHES: usize = 16;

/// Operations in one batch, at most.
const BATCH: usize = 1024;

/// What the writing thread needs of a member.
struct Member {
    path: String,
    kind: Kind,
    mode: u32,
    target: Option<String>,
}

/// One step for the writing thread, in the packet's order.
enum Op {
    /// Members under this prefix go below this staging folder.
    Root(String, PathBuf),
    /// A member starts.
    Start(Member),
    /// Bytes of the current file, as a range of a read block.
    Data(Arc<Block>, Range<usize>),
    /// Bytes of the current file, copied.
    Bytes(Vec<u8>),
    /// The current member ends.
    End,
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
        return Err(Refused::TargetAppeared {
            target: to.to_path_buf(),
        }
        .into());
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
struct Root {
    prefix: String,
    path: PathBuf,
    fd: OwnedFd,
}

/// Writes members into staging folders. Never follows a symlink: every
/// parent is a folder this writer created (reached through a descriptor it
/// opened on it, or by a path made only of such folders), entries are
/// created new (`O_EXCL`, `O_NOFOLLOW`), and packet-core has already
/// refused members below symlinks. The packet's order puts every folder
/// right before its subtree, so the folders of the current path are a stack.
struct StagingWriter {
    roots: Vec<Root>,
    dirs: Vec<OpenDir>,
    /// The file being written and its staging path.
    current: Option<(File, PathBuf)>,
    /// The process's file creation mask: modes it would strip are set
    /// explicitly after creation.
    umask: u32,
}

impl StagingWriter {
    fn new(roots: Vec<(String, PathBuf)>) -> Result<StagingWriter> {
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

    /// The folder to create `member` in, as (descriptor, name relative to
    /// it, staging path of the member); `Ok(None)` when the member is not
    /// written.
    fn locate<'m>(
        &mut self,
        member: &'m str,
    ) -> Result<Option<(BorrowedFd<'_>, Cow<'m, Path>, PathBuf)>> {
        let Some(root) = self
            .roots
            .iter()
            .position(|r| member.starts_with(r.prefix.as_str()))
        else {
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
            return Err(Refused::ParentNotCreated {
                member: member.to_owned(),
            }
            .into());
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

    /// Adds a staging root (harness state, known once the manifest is read).
    fn add_root(&mut self, prefix: String, path: PathBuf) -> Result<()> {
        let fd = open_dir(CWD, &path).map_err(|e| CliError::io("open", &path, e))?;
        self.roots.push(Root { prefix, path, fd });
        Ok(())
    }

    fn apply(&mut self, op: Op) -> Result<()> {
        match op {
            Op::Root(prefix, path) => self.add_root(prefix, path),
            Op::Start(entry) => self.start(entry),
            Op::Data(block, range) => self.write(&block.bytes()[range]),
            Op::Bytes(bytes) => self.write(&bytes),
            Op::End => {
                self.current = None;
                Ok(())
            }
        }
    }

    fn write(&mut self, bytes: &[u8]) -> Result<()> {
        match &mut self.current {
            Some((f, path)) => f
                .write_all(bytes)
                .map_err(|e| CliError::io("write", &*path, e)),
            None => Ok(()),
        }
    }

    fn start(&mut self, entry: Member) -> Result<()> {
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
                mkdirat(at, &*name, mode).map_err(|e| CliError::io("create", &path, e.into()))?;
                let fd = open_dir(at, &name).map_err(|e| CliError::io("open", &path, e))?;
                if umask_strips {
                    fchmod(&fd, mode)
                        .map_err(|e| CliError::io("set permissions of", &path, e.into()))?;
                }
                let fd = (self.dirs.len() < MAX_OPEN_DIRS).then_some(fd);
                self.dirs.push(OpenDir {
                    member: entry.path,
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
                self.current = Some((File::from(fd), path));
            }
        }
        Ok(())
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
    use crate::packet_io::test_support::Bytes;
    use packet_core::in_memory::{build, Built, Source};
    use packet_core::Limits;

    fn packet(body: &[u8]) -> Built {
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

    fn unpack_bytes(
        bytes: Vec<u8>,
        into: PathBuf,
        expected: Option<Digest>,
    ) -> Result<UnpackReport> {
        let request = UnpackRequest {
            into,
            expected,
            codex_home: None,
            claude_config_dir: None,
            opencode: None,
        };
        unpack(&Bytes(bytes), &request, &Progress::new(true))
    }

    #[test]
    fn a_tampered_body_is_caught_and_nothing_is_left() {
        let good = packet(b"the original contents");
        let mut tampered = good.bytes.clone();
        let at = tampered.windows(8).position(|w| w == b"original").unwrap();
        tampered[at] = b'O';
        let t = tempfile::tempdir().unwrap();
        let err = unpack_bytes(tampered, t.path().join("ws"), None).unwrap_err();
        assert_eq!(err.code(), "member_digest_mismatch");
        assert_eq!(
            err.report().details.path.as_deref(),
            Some("workspace/data.txt")
        );
        assert!(
            !t.path().join("ws").exists(),
            "the target it created is removed"
        );
    }

    #[test]
    fn a_packet_with_another_digest_is_caught_after_its_members_were_staged() {
        let good = packet(b"one");
        let other = packet(b"two");
        let t = tempfile::tempdir().unwrap();
        let err = unpack_bytes(other.bytes, t.path().join("ws"), Some(good.digest)).unwrap_err();
        assert_eq!(err.code(), "packet_digest_mismatch");
        assert!(!t.path().join("ws").exists());
    }

    #[test]
    fn an_empty_existing_target_is_left_empty_on_failure() {
        let good = packet(b"abc");
        let t = tempfile::tempdir().unwrap();
        let err = unpack_bytes(
            packet(b"abd").bytes,
            t.path().to_path_buf(),
            Some(good.digest),
        );
        assert!(err.is_err());
        assert_eq!(fs::read_dir(t.path()).unwrap().count(), 0);
    }

    #[test]
    fn a_verified_packet_is_placed() {
        let good = packet(b"abc");
        let t = tempfile::tempdir().unwrap();
        let report = unpack_bytes(good.bytes, t.path().join("ws"), Some(good.digest)).unwrap();
        assert_eq!(report.digest, good.digest.to_string());
        assert_eq!(fs::read(t.path().join("ws/data.txt")).unwrap(), b"abc");
        assert_eq!(fs::read_dir(t.path().join("ws")).unwrap().count(), 1);
    }
}
