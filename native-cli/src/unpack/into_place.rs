//! Moving what a verified packet staged into place: the workspace's
//! entries into its target, the harness state to its destinations, each
//! with `RENAME_NOREPLACE` so that nothing that appeared meanwhile is
//! replaced, and each move remembered so that a failure moves them back.

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};

use rustix::fs::{renameat, renameat_with, statat, AtFlags, Mode, OFlags, RenameFlags, CWD};

use super::harness::HarnessTarget;
use super::target::{dup, Created, Staging, Target};
use crate::error::{CliError, Refused, Result};

/// An entry moved into place, and how to move it back.
pub(super) struct Moved {
    from_dir: OwnedFd,
    from: PathBuf,
    to_dir: OwnedFd,
    to: PathBuf,
}

impl Moved {
    pub(super) fn undo(&self) {
        let _ = renameat(&self.to_dir, &self.to, &self.from_dir, &self.from);
    }
}

/// Moves the workspace's staged entries into its target, then the
/// harness state to its destinations, recording each move in `moved`.
pub(super) fn move_into_place(
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

#[cfg(test)]
mod tests {
    use std::fs;

    use super::*;

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
}
