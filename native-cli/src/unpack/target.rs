//! The folders an unpack writes below: the targets, held open so that a
//! folder swapped for a link meanwhile is not written through; the staging
//! folders made inside them; and the folders this command created, removed
//! again if it fails.

use std::fs;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};

use rustix::fs::{mkdirat, openat, Mode, OFlags};

use crate::error::{CliError, Refused, Result};

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

pub(crate) fn dup(fd: &OwnedFd, path: &Path) -> Result<OwnedFd> {
    fd.try_clone().map_err(|e| CliError::io("open", path, e))
}

/// Opens a folder this writer just created, refusing anything else.
pub(crate) fn open_dir(at: BorrowedFd<'_>, path: &Path) -> std::io::Result<OwnedFd> {
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    Ok(openat(at, path, flags, Mode::empty())?)
}
