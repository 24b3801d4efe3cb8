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
//!
//! | module | holds |
//! |---|---|
//! | `target` | the targets and staging folders, held open; what this command created |
//! | `writer` | writing members into staging folders as the packet is read |
//! | `harness` | where a packet's harness state goes, decided before any body is read |
//! | `into_place` | moving what was staged into place, and back on failure |
//! | `report` | the `pillbox.checkpoint.unpack/1` object |

mod harness;
mod into_place;
mod report;
mod target;
mod writer;

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};

use packet_core::{Digest, Event, ReaderOptions, VerifiedPacket};

use crate::error::{CliError, Refused, Result};
use crate::harness::{Destination, Destinations, Diverged, PendingImport};
use crate::packet_io::{self, Block, PacketSource};
use crate::progress::Progress;
use crate::report::HarnessReport;

pub(crate) use harness::{
    confine_harness_symlinks, prepare_harness, prepare_import, HarnessTarget,
};
use into_place::{move_into_place, Moved};
pub use report::{GitNeutralized, RemovedSetting, UnpackReport};
pub(crate) use target::{Created, Staging, Target};
pub(crate) use writer::{
    check_git_config_size, Member, Op, Root, StagingWriter, DIR_MODE, PRIVATE_DIR_MODE,
    PRIVATE_FILE_MODE,
};

/// Where to unpack.
pub struct UnpackRequest {
    /// The workspace target (absent or empty).
    pub into: PathBuf,
    /// The digest the packet must have; `None` only with `--trust-unverified`.
    pub expected: Option<Digest>,
    /// Where each harness's state goes (a harness without a destination
    /// is verified, not restored).
    pub harness: Destinations,
    /// Write git repositories without the settings and hooks that run
    /// programs.
    pub neutralize_git: bool,
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
        Ok(placed) => Ok(UnpackReport::of(placed, request.expected.is_some())),
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

/// Moves what a verified packet staged into place (then hands a session
/// to a harness restored by its program), undoing the moves on failure.
pub(crate) fn finish_placing(
    read: VerifiedPacket,
    staged: Staged,
    created: &mut Created,
    git: Option<GitNeutralized>,
) -> Result<Placed> {
    let Staged {
        workspace: ws_staging,
        target,
        harness: harness_target,
        path: workspace,
    } = staged;
    // Everything verified. A session to import must not be mixed with a
    // copy of it on this machine that went its own way.
    let import = match (&harness_target, &read.manifest.harness) {
        (Some(t), Some(h)) => match (&t.to, &t.plan.import) {
            (Destination::Program { program, importer }, Some(relative)) => {
                Some(PendingImport::prepare(
                    (program, *importer),
                    h,
                    t.staging.path.join(relative),
                    &workspace,
                    Diverged::Refused,
                )?)
            }
            _ => None,
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
    .and_then(|()| match &import {
        Some(i) => i.run(&workspace),
        None => Ok(()),
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
            i.report(&mut r);
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
            harness: Destinations::default(),
            neutralize_git: false,
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
