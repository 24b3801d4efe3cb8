//! `pillbox checkpoint unpack`: one read of the packet through packet-core's
//! [`Reader`](packet_core::Reader), which checks every header, member
//! digest and the packet digest as the bytes stream by, while a second
//! thread writes the members into staging folders created inside each
//! target. Only when the whole packet has verified are the staged entries
//! renamed into place. Any failure removes the staging folders (and the
//! targets this command created), leaving the targets as they were.
//!
//! The restore cannot be turned against its host: the workspace target is
//! opened without following a link (a symlinked target is refused) and
//! everything is created below that descriptor; entries move into place
//! with `RENAME_NOREPLACE`; the workspace's modes honour the umask and the
//! harness state is private (files 0600, folders 0700); a harness symlink
//! must stay inside the session folder it is restored as. What the packet
//! holds that would act on the host (secrets, git settings that run
//! programs, executable hooks) is reported, and `--neutralize-git` writes
//! the repositories without those settings and hooks.

use std::borrow::Cow;
use std::fs::{self, File};
use std::io::Write;
use std::ops::Range;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};

use packet_core::{git, Digest, Event, Findings, Kind, Limits, ReaderOptions, VerifiedPacket};
use rustix::fs::{
    mkdirat, openat, renameat, renameat_with, statat, symlinkat, AtFlags, Mode, OFlags,
    RenameFlags, CWD,
};
use serde::Serialize;

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
    /// Write git repositories without the settings and hooks that run
    /// programs.
    pub neutralize_git: bool,
    /// The OpenCode program that imports an OpenCode session (`None`: the
    /// export is verified, not imported).
    pub opencode: Option<PathBuf>,
}

/// The `pillbox.checkpoint.unpack/1` object.
#[derive(Debug, Serialize)]
pub struct UnpackReport {
    /// `pillbox.checkpoint.unpack/1`.
    pub schema: &'static str,
    /// The packet's format id, which says what its digest is the SHA-256 of.
    pub format: &'static str,
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
    /// What the packet holds that a person should know before using the
    /// restored workspace (packet-core's report).
    pub findings: Findings,
    /// What `--neutralize-git` changed (`null` without it).
    pub git: Option<GitNeutralized>,
}

/// What `--neutralize-git` changed in the restored workspace: every byte
/// else is the packet's.
#[derive(Debug, Default, Serialize)]
pub struct GitNeutralized {
    /// Settings left out of restored git configuration files.
    pub removed: Vec<RemovedSetting>,
    /// Hooks restored without their exec bit (mode 0644), by member path.
    pub hooks_disabled: Vec<String>,
}

/// A setting left out of a restored git configuration file.
#[derive(Debug, Serialize)]
pub struct RemovedSetting {
    /// The configuration file's member path.
    pub path: String,
    /// The line it was on in the packet's file.
    pub line: u64,
    /// Its key.
    pub setting: String,
}

/// Folders this command created, removed again if it fails.
#[derive(Default)]
pub(crate) struct Created(Vec<PathBuf>);

impl Created {
    /// Creates `dir` and its missing parents, remembering each.
    pub(crate) fn dir_all(&mut self, dir: &Path) -> Result<()> {
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
    pub(crate) fn undo(&mut self) {
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
                format: placed.read.manifest.format.id(),
                digest: placed.read.digest.to_string(),
                digest_checked: request.expected.is_some(),
                size: placed.read.size,
                members: totals.members,
                totals,
                workspace: placed.workspace.display().to_string(),
                harness: placed.harness,
                findings: placed.read.findings,
                git: placed.git,
            })
        }
        Err(e) => {
            created.undo();
            Err(e)
        }
    }
}

/// A target must be absent or an empty directory, and not a symlink
/// (which would make the restore write wherever it points).
pub(crate) fn check_target(target: &Path) -> Result<()> {
    match fs::symlink_metadata(target) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(CliError::io("inspect", target, e)),
        Ok(m) if m.file_type().is_symlink() => Err(Refused::TargetIsSymlink {
            target: target.to_path_buf(),
        }
        .into()),
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

/// A folder restored entries go below, held open: they are created and
/// moved through this descriptor, so a folder swapped for a link while
/// unpacking is not written through.
pub(crate) struct Target {
    pub(crate) fd: OwnedFd,
    pub(crate) path: PathBuf,
}

impl Target {
    /// Opens the workspace target, refusing a symlink.
    pub(crate) fn workspace(path: &Path) -> Result<Target> {
        let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let fd = rustix::fs::open(path, flags, Mode::empty()).map_err(|e| match e {
            rustix::io::Errno::LOOP | rustix::io::Errno::NOTDIR => {
                CliError::from(Refused::TargetIsSymlink {
                    target: path.to_path_buf(),
                })
            }
            e => CliError::io("open", path, e.into()),
        })?;
        Ok(Target {
            fd,
            path: path.to_path_buf(),
        })
    }

    /// Opens a harness home (which may be a link the user keeps, such as
    /// `~/.codex` pointing at another disk).
    pub(crate) fn harness_home(path: &Path) -> Result<Target> {
        let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
        let fd = rustix::fs::open(path, flags, Mode::empty())
            .map_err(|e| CliError::io("open", path, e.into()))?;
        Ok(Target {
            fd,
            path: path.to_path_buf(),
        })
    }
}

/// A staging folder made in a target (mode 0700), removed with what is
/// left in it when dropped.
pub(crate) struct Staging {
    pub(crate) fd: OwnedFd,
    pub(crate) path: PathBuf,
}

impl Staging {
    pub(crate) fn create(target: &Target) -> Result<Staging> {
        // A name no packet entry is likely to have: the process id, the
        // time and a counter.
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        for n in 0u32..100 {
            let name = format!(
                ".pillbox-unpack-{:x}{:08x}{n:02}",
                std::process::id(),
                nanos.wrapping_mul(2_654_435_761).wrapping_add(n)
            );
            match Staging::create_named(target, &name) {
                Err(CliError::Io { source, .. })
                    if source.kind() == std::io::ErrorKind::AlreadyExists =>
                {
                    continue
                }
                r => return r,
            }
        }
        Err(CliError::io(
            "create a staging folder in",
            &target.path,
            std::io::Error::from(std::io::ErrorKind::AlreadyExists),
        ))
    }

    /// A staging folder of the name given (a name a journal recorded first).
    pub(crate) fn create_named(target: &Target, name: &str) -> Result<Staging> {
        mkdirat(&target.fd, name, Mode::from_raw_mode(0o700))
            .map_err(|e| CliError::io("create a staging folder in", &target.path, e.into()))?;
        let path = target.path.join(name);
        let fd = open_dir(target.fd.as_fd(), Path::new(name))
            .map_err(|e| CliError::io("open", &path, e))?;
        Ok(Staging { fd, path })
    }
}

impl Drop for Staging {
    fn drop(&mut self) {
        // std's remove_dir_all does not follow symlinks inside.
        let _ = fs::remove_dir_all(&self.path);
    }
}

/// Where harness members go while the packet is read, and then for good.
pub(crate) struct HarnessTarget {
    pub(crate) staging: Staging,
    pub(crate) plan: RestorePlan,
}

/// What [`place`] established.
pub(crate) struct Placed {
    pub(crate) read: VerifiedPacket,
    pub(crate) workspace: PathBuf,
    pub(crate) harness: Option<HarnessReport>,
    pub(crate) git: Option<GitNeutralized>,
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
    let target = Target::workspace(&request.into)?;
    let workspace =
        fs::canonicalize(&request.into).map_err(|e| CliError::io("open", &request.into, e))?;
    let ws_staging = Staging::create(&target)?;
    let options = ReaderOptions {
        expected_digest: request.expected,
        ..ReaderOptions::default()
    };
    progress.phase("unpack", source.size_hint().unwrap_or(0));
    let mut harness_target: Option<HarnessTarget> = None;
    let (ops, queue) = mpsc::sync_channel::<Vec<Op>>(BATCHES);
    let stop = AtomicBool::new(false);
    let ws_root = Root::new(packet_core::path::WORKSPACE_ROOT, &ws_staging, false)?;
    let neutralize = request.neutralize_git;
    let (read, git) = std::thread::scope(|scope| {
        let stop = &stop;
        let writing = scope.spawn(move || -> Result<GitNeutralized> {
            let mut writer = StagingWriter::new(vec![ws_root], neutralize);
            for batch in queue {
                if stop.load(Ordering::Relaxed) {
                    break;
                }
                for op in batch {
                    writer.apply(op)?;
                }
            }
            Ok(writer.neutralized)
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
                    let Some(t) = prepare_harness(m, request, created, &workspace)? else {
                        return Ok(());
                    };
                    let kind = m.harness.as_ref().map(|h| h.kind);
                    if let Some(kind) = kind {
                        send(Op::Root(Root::new(kind.root(), &t.staging, true)?))?;
                    }
                    harness_target = Some(t);
                    Ok(())
                }
                Event::MemberStart { member: e, .. } => send(Op::Start(Member {
                    path: e.path.to_string(),
                    kind: e.kind(),
                    mode: e.mode().bits(),
                    size: e.size(),
                    target: e.target().map(str::to_owned),
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
            (Ok(read), Ok(git)) => Ok((read, git)),
        }
    })?;

    let git = neutralize.then_some(git);
    finish_placing(
        read,
        Staged {
            workspace: ws_staging,
            target,
            harness: harness_target,
            path: workspace,
        },
        request,
        created,
        git,
    )
}

/// What a verified packet left to move into place.
pub(crate) struct Staged {
    /// The workspace's staging folder (its entries go into `target`).
    pub workspace: Staging,
    /// The workspace target, held open.
    pub target: Target,
    /// The harness state's staging folder and plan, if restored.
    pub harness: Option<HarnessTarget>,
    /// The workspace's real absolute path.
    pub path: PathBuf,
}

/// Moves what a verified packet staged into place (then imports an
/// OpenCode session), undoing the moves on failure.
pub(crate) fn finish_placing(
    read: VerifiedPacket,
    staged: Staged,
    request: &UnpackRequest,
    created: &mut Created,
    git: Option<GitNeutralized>,
) -> Result<Placed> {
    let Staged {
        workspace: ws_staging,
        target,
        harness: harness_target,
        path: workspace,
    } = staged;
    // Everything verified. An OpenCode session to import must not replace
    // another copy of it on this machine.
    let import = match (&harness_target, &request.opencode, &read.manifest.harness) {
        (Some(t), Some(program), Some(h)) => match &t.plan.import {
            Some(relative) => Some(opencode::PendingImport::prepare(
                program,
                &h.session_id,
                t.staging.path.join(relative),
                &workspace,
            )?),
            None => None,
        },
        _ => None,
    };
    // Move into place (then import), undoing the moves on failure.
    let mut moved: Vec<Moved> = Vec::new();
    let result = move_into_place(
        &ws_staging,
        &target,
        harness_target.as_ref(),
        created,
        &mut moved,
    )
    .and_then(|()| match (&import, &request.opencode) {
        (Some(i), Some(program)) if !i.already_there => i.run(program, &workspace),
        _ => Ok(()),
    });
    if let Err(e) = result {
        for m in moved.iter().rev() {
            m.undo();
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
        git,
    })
}

/// Where a packet's harness state goes, decided from its manifest before
/// any body is read (`None`: not restored): the home is created if
/// missing, the destinations must not exist, and a staging folder is made
/// in the home (an OpenCode export is staged in the temporary folder).
pub(crate) fn prepare_harness(
    m: &packet_core::Manifest,
    request: &UnpackRequest,
    created: &mut Created,
    workspace: &Path,
) -> Result<Option<HarnessTarget>> {
    let Some(h) = &m.harness else {
        return Ok(None);
    };
    let home = match h.kind {
        packet_core::HarnessKind::Codex => request.codex_home.as_deref(),
        packet_core::HarnessKind::Claude => request.claude_config_dir.as_deref(),
        packet_core::HarnessKind::Opencode => None,
    };
    let (plan, staging) = if let Some(home) = home {
        created.dir_all(home)?;
        let home = fs::canonicalize(home).map_err(|e| CliError::io("open", home, e))?;
        let plan = harness::adapter(h.kind).restore_plan(&home, h, m, workspace)?;
        plan.refuse_existing()?;
        (plan, Staging::create(&Target::harness_home(&home)?)?)
    } else if let (packet_core::HarnessKind::Opencode, Some(program)) = (h.kind, &request.opencode)
    {
        // Before any byte is read: an OpenCode that cannot import the
        // session is known now.
        let local = opencode::version(program, workspace)?;
        opencode::check_not_older(program, &local, h.version.as_deref())?;
        let staging = Staging::create(&Target::harness_home(&std::env::temp_dir())?)?;
        let plan = harness::adapter(h.kind).restore_plan(&staging.path, h, m, workspace)?;
        (plan, staging)
    } else {
        return Ok(None);
    };
    confine_harness_symlinks(m, h.kind, &plan)?;
    Ok(Some(HarnessTarget { staging, plan }))
}

/// Refuses a harness symlink that would point out of the folder it is
/// restored as: packet-core keeps every link inside `harness/`, but
/// `harness/` is not one folder on the host; a session's folder moves on
/// its own into the harness home, where `..` leads to other sessions.
pub(crate) fn confine_harness_symlinks(
    manifest: &packet_core::Manifest,
    kind: packet_core::HarnessKind,
    plan: &RestorePlan,
) -> Result<()> {
    for m in manifest
        .members
        .iter()
        .filter(|m| m.kind() == Kind::Symlink)
    {
        let Some(relative) = kind.relative_path(&m.path) else {
            continue;
        };
        let Some(moved) = plan.moves.iter().find(|mv| {
            relative == mv.relative
                || relative
                    .strip_prefix(mv.relative.as_str())
                    .is_some_and(|rest| rest.starts_with('/'))
        }) else {
            // Not restored at all.
            continue;
        };
        let folder = kind.member_path(&moved.relative);
        let inside = |p: &str| {
            p == folder
                || p.strip_prefix(folder.as_str())
                    .is_some_and(|rest| rest.starts_with('/'))
        };
        let target = m.target().unwrap_or("");
        let resolved = packet_core::path::resolve_symlink_target(
            &m.path,
            target,
            Limits::FORMAT.max_path_bytes,
        )?;
        if !inside(&resolved.resolved) || !resolved.through.iter().all(|t| inside(t)) {
            return Err(Refused::HarnessSymlinkEscapes {
                member: m.path.to_string(),
                target: target.to_owned(),
            }
            .into());
        }
    }
    Ok(())
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
pub(crate) struct Member {
    pub(crate) path: String,
    pub(crate) kind: Kind,
    pub(crate) mode: u32,
    pub(crate) size: u64,
    pub(crate) target: Option<String>,
}

/// One step for the writing thread, in the packet's order.
pub(crate) enum Op {
    /// Members under this root's prefix go below its staging folder.
    Root(Root),
    /// A member starts.
    Start(Member),
    /// Bytes of the current file, as a range of a read block.
    Data(Arc<Block>, Range<usize>),
    /// Bytes of the current file, copied.
    Bytes(Vec<u8>),
    /// The current member ends.
    End,
}

/// An entry moved into place, and how to move it back.
struct Moved {
    from_dir: OwnedFd,
    from: PathBuf,
    to_dir: OwnedFd,
    to: PathBuf,
}

impl Moved {
    fn undo(&self) {
        let _ = renameat(&self.to_dir, &self.to, &self.from_dir, &self.from);
    }
}

fn move_into_place(
    ws_staging: &Staging,
    target: &Target,
    harness: Option<&HarnessTarget>,
    created: &mut Created,
    moved: &mut Vec<Moved>,
) -> Result<()> {
    let listing = rustix::fs::Dir::read_from(&ws_staging.fd)
        .map_err(|e| CliError::io("list", &ws_staging.path, e.into()))?;
    for entry in listing {
        let entry = entry.map_err(|e| CliError::io("list", &ws_staging.path, e.into()))?;
        let name = entry.file_name().to_bytes();
        if name == b"." || name == b".." {
            continue;
        }
        let name =
            PathBuf::from(<std::ffi::OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(name));
        rename_new(
            ws_staging.fd.as_fd(),
            &name,
            target.fd.as_fd(),
            &name,
            &target.path.join(&name),
        )?;
        moved.push(Moved {
            from_dir: dup(&ws_staging.fd, &ws_staging.path)?,
            from: name.clone(),
            to_dir: dup(&target.fd, &target.path)?,
            to: name,
        });
    }
    if let Some(t) = harness {
        for m in &t.plan.moves {
            if let Some(parent) = m.destination.parent() {
                created.dir_all(parent)?;
            }
            let from = PathBuf::from(&m.relative);
            rename_new(
                t.staging.fd.as_fd(),
                &from,
                CWD,
                &m.destination,
                &m.destination,
            )?;
            let cwd = rustix::fs::open(
                ".",
                OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
                Mode::empty(),
            )
            .map_err(|e| CliError::io("open", ".", e.into()))?;
            moved.push(Moved {
                from_dir: dup(&t.staging.fd, &t.staging.path)?,
                from,
                to_dir: cwd,
                to: m.destination.clone(),
            });
        }
    }
    Ok(())
}

pub(crate) fn dup(fd: &OwnedFd, path: &Path) -> Result<OwnedFd> {
    fd.try_clone().map_err(|e| CliError::io("open", path, e))
}

/// Renames, refusing to replace anything that appeared meanwhile: with
/// `RENAME_NOREPLACE`, or, on a file system without it, after a check.
pub(crate) fn rename_new(
    from_dir: BorrowedFd<'_>,
    from: &Path,
    to_dir: BorrowedFd<'_>,
    to: &Path,
    shown: &Path,
) -> Result<()> {
    let appeared = || {
        CliError::from(Refused::TargetAppeared {
            target: shown.to_path_buf(),
        })
    };
    match renameat_with(from_dir, from, to_dir, to, RenameFlags::NOREPLACE) {
        Ok(()) => Ok(()),
        Err(rustix::io::Errno::EXIST) => Err(appeared()),
        Err(rustix::io::Errno::INVAL | rustix::io::Errno::NOSYS) => {
            if statat(to_dir, to, AtFlags::SYMLINK_NOFOLLOW).is_ok() {
                return Err(appeared());
            }
            renameat(from_dir, from, to_dir, to)
                .map_err(|e| CliError::io("move into place", shown, e.into()))
        }
        Err(e) => Err(CliError::io("move into place", shown, e.into())),
    }
}

/// Folders kept open (as descriptors) along the current path; deeper
/// folders are reached by path, so a deep packet cannot exhaust descriptors.
const MAX_OPEN_DIRS: usize = 128;

/// The mode of every workspace folder unpacked, before the umask.
pub(crate) const DIR_MODE: u32 = 0o755;

/// Harness state is a session's private log: files 0600, folders 0700.
pub(crate) const PRIVATE_FILE_MODE: u32 = 0o600;
pub(crate) const PRIVATE_DIR_MODE: u32 = 0o700;

/// The largest git configuration file `--neutralize-git` rewrites.
pub const GIT_CONFIG_MAX: u64 = 16 << 20;

/// A folder this writer created, on the current path.
struct OpenDir {
    /// Its member path.
    member: String,
    /// Its staging path (for messages, and to reach it without `fd`).
    path: PathBuf,
    fd: Option<OwnedFd>,
}

/// A staging root: members under `prefix` go below its folder.
pub(crate) struct Root {
    /// `workspace/` or `harness/<kind>/`.
    prefix: String,
    path: PathBuf,
    fd: OwnedFd,
    /// Harness state: written private.
    private: bool,
}

impl Root {
    pub(crate) fn new(member: &str, staging: &Staging, private: bool) -> Result<Root> {
        Ok(Root {
            prefix: format!("{member}/"),
            path: staging.path.clone(),
            fd: dup(&staging.fd, &staging.path)?,
            private,
        })
    }
}

/// Where a member is created: the folder's descriptor, the name relative
/// to it, the member's staging path (for messages), and whether it is
/// private harness state.
struct Place<'a, 'm> {
    at: BorrowedFd<'a>,
    name: Cow<'m, Path>,
    path: PathBuf,
    private: bool,
}

/// The file being written: where, and, for a git configuration file to
/// neutralise, its bytes until it ends.
struct Current {
    file: File,
    path: PathBuf,
    member: String,
    config: Option<Vec<u8>>,
}

/// Writes members into staging folders. Never follows a symlink: every
/// parent is a folder this writer created (reached through a descriptor it
/// opened on it, or by a path made only of such folders), entries are
/// created new (`O_EXCL`, `O_NOFOLLOW`), and packet-core has already
/// refused members below symlinks. The packet's order puts every folder
/// right before its subtree, so the folders of the current path are a stack.
pub(crate) struct StagingWriter {
    roots: Vec<Root>,
    dirs: Vec<OpenDir>,
    current: Option<Current>,
    /// The process's file creation mask: workspace modes honour it, but a
    /// folder always keeps its owner's bits, or nothing could be restored
    /// inside it.
    umask: u32,
    neutralize: bool,
    pub(crate) neutralized: GitNeutralized,
}

impl StagingWriter {
    pub(crate) fn new(roots: Vec<Root>, neutralize: bool) -> StagingWriter {
        // umask(2) can only be read by setting it: set it back at once.
        let umask = rustix::process::umask(Mode::empty());
        rustix::process::umask(umask);
        StagingWriter {
            roots,
            dirs: Vec::new(),
            current: None,
            umask: umask.bits(),
            neutralize,
            neutralized: GitNeutralized::default(),
        }
    }

    /// The folder to create `member` in; `Ok(None)` when the member is not
    /// written.
    fn locate<'m>(&mut self, member: &'m str) -> Result<Option<Place<'_, 'm>>> {
        let Some(root) = self
            .roots
            .iter()
            .position(|r| member.starts_with(r.prefix.as_str()))
        else {
            return Ok(None);
        };
        let private = self.roots[root].private;
        let rest = &member[self.roots[root].prefix.len()..];
        let (parent, name) = match rest.rsplit_once('/') {
            Some((_, name)) => (Some(&member[..member.len() - name.len() - 1]), name),
            None => (None, rest),
        };
        let Some(parent) = parent else {
            let r = &self.roots[root];
            return Ok(Some(Place {
                at: r.fd.as_fd(),
                name: Cow::Borrowed(Path::new(name)),
                path: r.path.join(name),
                private,
            }));
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
            Some(fd) => Place {
                at: fd.as_fd(),
                name: Cow::Borrowed(Path::new(name)),
                path,
                private,
            },
            None => Place {
                at: CWD,
                name: Cow::Owned(path.clone()),
                path,
                private,
            },
        }))
    }

    pub(crate) fn apply(&mut self, op: Op) -> Result<()> {
        match op {
            Op::Root(root) => {
                self.roots.push(root);
                Ok(())
            }
            Op::Start(entry) => self.start(entry),
            Op::Data(block, range) => self.write(&block.bytes()[range]),
            Op::Bytes(bytes) => self.write(&bytes),
            Op::End => self.end(),
        }
    }

    fn write(&mut self, bytes: &[u8]) -> Result<()> {
        match &mut self.current {
            Some(Current {
                config: Some(config),
                ..
            }) => {
                config.extend_from_slice(bytes);
                Ok(())
            }
            Some(Current { file, path, .. }) => file
                .write_all(bytes)
                .map_err(|e| CliError::io("write", &*path, e)),
            None => Ok(()),
        }
    }

    /// Ends the current file; a git configuration file to neutralise is
    /// written now, without the settings that run programs.
    fn end(&mut self) -> Result<()> {
        let Some(mut current) = self.current.take() else {
            return Ok(());
        };
        if let Some(config) = current.config.take() {
            let (cleaned, removed) = git::neutralize(&config);
            for s in removed {
                self.neutralized.removed.push(RemovedSetting {
                    path: current.member.clone(),
                    line: s.line,
                    setting: s.key,
                });
            }
            current
                .file
                .write_all(&cleaned)
                .map_err(|e| CliError::io("write", &current.path, e))?;
        }
        Ok(())
    }

    fn start(&mut self, entry: Member) -> Result<()> {
        let umask = self.umask;
        let neutralize = self.neutralize;
        let Some(Place {
            at,
            name,
            path,
            private,
        }) = self.locate(&entry.path)?
        else {
            return Ok(());
        };
        let relative = entry.path.split_once('/').map_or("", |(_, r)| r);
        match entry.kind {
            Kind::Dir => {
                let mode = if private { PRIVATE_DIR_MODE } else { DIR_MODE };
                mkdirat(at, &*name, Mode::from_raw_mode(mode))
                    .map_err(|e| CliError::io("create", &path, e.into()))?;
                let fd = open_dir(at, &name).map_err(|e| CliError::io("open", &path, e))?;
                if umask & 0o700 != 0 {
                    // The owner must be able to restore into it.
                    let kept = (mode & !umask) | 0o700;
                    rustix::fs::fchmod(&fd, Mode::from_raw_mode(kept))
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
                let in_workspace = !private;
                let hook = in_workspace
                    && neutralize
                    && entry.mode == packet_core::Mode::EXECUTABLE.bits()
                    && git::is_hook(relative);
                let config = in_workspace && neutralize && git::is_repository_config(relative);
                if config && entry.size > GIT_CONFIG_MAX {
                    return Err(Refused::GitConfigTooLarge { member: entry.path }.into());
                }
                let mode = if private {
                    PRIVATE_FILE_MODE
                } else if hook {
                    0o644
                } else {
                    entry.mode
                };
                let flags = OFlags::WRONLY
                    | OFlags::CREATE
                    | OFlags::EXCL
                    | OFlags::NOFOLLOW
                    | OFlags::CLOEXEC;
                let fd = openat(at, &*name, flags, Mode::from_raw_mode(mode))
                    .map_err(|e| CliError::io("create", &path, e.into()))?;
                if hook {
                    self.neutralized.hooks_disabled.push(entry.path.clone());
                }
                self.current = Some(Current {
                    file: File::from(fd),
                    path,
                    member: entry.path,
                    config: config.then(|| Vec::with_capacity(entry.size as usize)),
                });
            }
        }
        Ok(())
    }
}

/// Opens a folder this writer just created, refusing anything else.
pub(crate) fn open_dir(at: BorrowedFd<'_>, path: &Path) -> std::io::Result<OwnedFd> {
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
            neutralize_git: false,
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
    fn moving_into_place_never_replaces_what_appeared() {
        let t = tempfile::tempdir().unwrap();
        let dir =
            rustix::fs::open(t.path(), OFlags::PATH | OFlags::DIRECTORY, Mode::empty()).unwrap();
        fs::write(t.path().join("staged"), b"ours").unwrap();
        fs::write(t.path().join("there"), b"theirs").unwrap();
        let e = rename_new(
            dir.as_fd(),
            Path::new("staged"),
            dir.as_fd(),
            Path::new("there"),
            &t.path().join("there"),
        )
        .unwrap_err();
        assert_eq!(e.code(), "target_not_empty");
        assert_eq!(fs::read(t.path().join("there")).unwrap(), b"theirs");
        std::os::unix::fs::symlink("/etc", t.path().join("link")).unwrap();
        let e = rename_new(
            dir.as_fd(),
            Path::new("staged"),
            dir.as_fd(),
            Path::new("link"),
            &t.path().join("link"),
        )
        .unwrap_err();
        assert_eq!(e.code(), "target_not_empty");
        rename_new(
            dir.as_fd(),
            Path::new("staged"),
            dir.as_fd(),
            Path::new("new"),
            &t.path().join("new"),
        )
        .unwrap();
        assert_eq!(fs::read(t.path().join("new")).unwrap(), b"ours");
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
