//! Opening what the walk found without leaving the folder it walked: every
//! folder and file is opened below the root's descriptor, never through a
//! symlink (`openat2` with `RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS` where
//! the kernel has it, else one `openat` with `O_NOFOLLOW | O_DIRECTORY` per
//! component), and what was opened is checked against what the walk
//! listed: its device and inode, and for a file that it is a regular file.
//! A folder swapped for a symlink to `~/.codex` between the listing and the
//! read, or a file swapped for a FIFO, is refused, not followed or waited
//! on.

use std::fs::File;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use rustix::fs::{openat, openat2, FileType, Mode, OFlags, ResolveFlags, Stat};

use crate::error::{CliError, Refused, Result};

/// A file as a stat sees it: what the record of a pack or restore compares.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Identity {
    /// Size in bytes.
    pub size: u64,
    /// Last modification, ns since the epoch.
    pub mtime: i64,
    /// Last change of the inode (any write, chmod, rename…), ns.
    pub ctime: i64,
    /// Inode.
    pub ino: u64,
    /// Device.
    pub dev: u64,
    /// `st_mode` (type and permission bits).
    pub mode: u32,
}

impl Identity {
    /// The identity in a stat.
    // The stat fields' types differ across architectures: the conversions
    // are identities only on some.
    #[allow(clippy::useless_conversion, clippy::unnecessary_cast)]
    pub fn of(stat: &Stat) -> Identity {
        let ns = |s: i64, n: i64| s.saturating_mul(1_000_000_000).saturating_add(n);
        Identity {
            size: u64::try_from(stat.st_size).unwrap_or(0),
            mtime: ns(
                i64::from(stat.st_mtime),
                i64::try_from(u64::from(stat.st_mtime_nsec)).unwrap_or(0),
            ),
            ctime: ns(
                i64::from(stat.st_ctime),
                i64::try_from(u64::from(stat.st_ctime_nsec)).unwrap_or(0),
            ),
            ino: u64::from(stat.st_ino),
            dev: u64::from(stat.st_dev),
            mode: stat.st_mode as u32,
        }
    }
}

/// A file or folder as the walk listed it: where it is on disk.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FileId {
    /// Device.
    pub dev: u64,
    /// Inode.
    pub ino: u64,
}

impl FileId {
    /// The identity in a stat.
    pub fn of(stat: &Stat) -> FileId {
        FileId {
            dev: stat.st_dev,
            ino: stat.st_ino,
        }
    }
}

/// A walked folder, held open: everything below it is reached through this
/// descriptor.
#[derive(Debug)]
pub struct WalkRoot {
    fd: OwnedFd,
    /// Its path, for messages.
    path: PathBuf,
    /// The member path it is packed as (`workspace`, or a harness folder).
    member: String,
    id: FileId,
}

/// Whether `openat2` is known to be missing (kernels before 5.6, or a
/// sandbox that filters it): then folders are opened one component at a
/// time.
static NO_OPENAT2: AtomicBool = AtomicBool::new(false);

impl WalkRoot {
    /// Opens `path` (the folder the user named; links on the way to it are
    /// the user's) as the root packed as `member`.
    pub fn open(path: &Path, member: &str) -> Result<WalkRoot> {
        let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
        let fd = rustix::fs::open(path, flags, Mode::empty())
            .map_err(|e| CliError::io("open", path, e.into()))?;
        let stat = rustix::fs::fstat(&fd).map_err(|e| CliError::io("inspect", path, e.into()))?;
        Ok(WalkRoot {
            fd,
            path: path.to_path_buf(),
            member: member.to_owned(),
            id: FileId::of(&stat),
        })
    }

    /// The member path it is packed as.
    pub fn member(&self) -> &str {
        &self.member
    }

    /// Its path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The root's own identity.
    pub fn id(&self) -> FileId {
        self.id
    }

    /// The path below the root of one of its members (`""` for the root).
    pub fn relative<'m>(&self, member: &'m str) -> Option<&'m str> {
        if member == self.member {
            return Some("");
        }
        member
            .strip_prefix(self.member.as_str())
            .and_then(|rest| rest.strip_prefix('/'))
    }

    /// The folder at `relative` below the root (`""` for the root),
    /// opened beneath it without following any symlink, and checked to be
    /// the folder the walk listed (`expected`).
    pub fn open_dir(&self, relative: &str, member: &str, expected: FileId) -> Result<OwnedFd> {
        let fd = if relative.is_empty() {
            let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
            openat(&self.fd, ".", flags, Mode::empty())
        } else {
            beneath(
                self.fd.as_fd(),
                relative,
                OFlags::RDONLY | OFlags::DIRECTORY,
            )
        }
        .map_err(|e| self.changed_or_io(member, "open", relative, e))?;
        let stat = rustix::fs::fstat(&fd)
            .map_err(|e| CliError::io("inspect", self.path.join(relative), e.into()))?;
        if FileId::of(&stat) != expected {
            return Err(changed(
                member,
                "the folder was replaced while it was being packed",
            ));
        }
        Ok(fd)
    }

    /// The folder holding `relative`, for [`open_file_in`].
    pub fn open_parent(&self, relative: &str) -> io::Result<OwnedFd> {
        match relative.rsplit_once('/') {
            None => openat(
                &self.fd,
                ".",
                OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
                Mode::empty(),
            )
            .map_err(Into::into),
            Some((parent, _)) => beneath(self.fd.as_fd(), parent, OFlags::PATH | OFlags::DIRECTORY)
                .map_err(Into::into),
        }
    }

    /// An error opening something below the root: a symlink or a missing
    /// folder on the way means the tree changed since it was listed.
    pub fn changed_or_io(
        &self,
        member: &str,
        op: &'static str,
        relative: &str,
        e: rustix::io::Errno,
    ) -> CliError {
        match e {
            rustix::io::Errno::LOOP | rustix::io::Errno::XDEV | rustix::io::Errno::NOTDIR => {
                changed(
                    member,
                    "a folder on its path was replaced by a symlink or a file",
                )
            }
            rustix::io::Errno::NOENT => changed(member, "it or a folder on its path disappeared"),
            e => CliError::io(op, self.path.join(relative), e.into()),
        }
    }
}

/// Opens `relative` below `root` without following any symlink: `openat2`
/// confined beneath the root, or, without it, each folder with
/// `O_NOFOLLOW | O_DIRECTORY` in turn.
fn beneath(root: BorrowedFd<'_>, relative: &str, flags: OFlags) -> rustix::io::Result<OwnedFd> {
    open_beneath(root, relative, flags, Mode::empty())
}

/// Opens (or with `O_CREAT`, creates with `mode`) `relative` below `root`
/// without following any symlink, as [`WalkRoot`]'s own opens do.
pub fn open_beneath(
    root: BorrowedFd<'_>,
    relative: &str,
    flags: OFlags,
    mode: Mode,
) -> rustix::io::Result<OwnedFd> {
    let flags = flags | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    // openat2 takes a mode only with O_CREAT.
    let mode = if flags.contains(OFlags::CREATE) {
        mode
    } else {
        Mode::empty()
    };
    if !NO_OPENAT2.load(Ordering::Relaxed) {
        let resolve =
            ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS;
        match openat2(root, relative, flags, mode, resolve) {
            Err(rustix::io::Errno::NOSYS | rustix::io::Errno::PERM) => {
                NO_OPENAT2.store(true, Ordering::Relaxed);
            }
            // openat2 refuses `..` and links itself; an EAGAIN is a rename
            // racing the lookup: the component walk decides.
            Err(rustix::io::Errno::AGAIN) => {}
            r => return r,
        }
    }
    let mut parts = relative.split('/').peekable();
    let mut dir: Option<OwnedFd> = None;
    while let Some(part) = parts.next() {
        if part.is_empty() || part == "." || part == ".." {
            return Err(rustix::io::Errno::XDEV);
        }
        let at = dir.as_ref().map_or(root, |d| d.as_fd());
        let (step, mode) = if parts.peek().is_some() {
            (
                OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                Mode::empty(),
            )
        } else {
            (flags, mode)
        };
        dir = Some(openat(at, part, step, mode)?);
    }
    dir.ok_or(rustix::io::Errno::INVAL)
}

/// Opens the file `name` in `dir` for reading: never through a symlink,
/// never blocking (a FIFO put in its place opens at once), without
/// updating its access time where the caller owns it. Refuses anything
/// but the regular file the walk listed (`expected`, when known).
pub fn open_file_in(
    dir: BorrowedFd<'_>,
    name: &str,
    member: &str,
    expected: Option<FileId>,
    display: &dyn Fn() -> PathBuf,
) -> Result<(File, Stat)> {
    let flags =
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC;
    let fd = match openat(dir, name, flags | OFlags::NOATIME, Mode::empty()) {
        // O_NOATIME is refused on files owned by someone else.
        Err(rustix::io::Errno::PERM) => openat(dir, name, flags, Mode::empty()),
        r => r,
    }
    .map_err(|e| match e {
        rustix::io::Errno::LOOP => changed(member, "the file was replaced by a symlink"),
        rustix::io::Errno::NOENT => changed(member, "the file disappeared"),
        e => CliError::io("read", display(), e.into()),
    })?;
    let stat = rustix::fs::fstat(&fd).map_err(|e| CliError::io("read", display(), e.into()))?;
    if FileType::from_raw_mode(stat.st_mode) != FileType::RegularFile {
        return Err(changed(
            member,
            "the file was replaced by something that is not a regular file",
        ));
    }
    if expected.is_some_and(|id| id != FileId::of(&stat)) {
        return Err(changed(member, "the file was replaced by another one"));
    }
    Ok((File::from(fd), stat))
}

/// The refusal of a tree that changed under the pack.
pub fn changed(member: &str, what: &str) -> CliError {
    Refused::WorkspaceChanged {
        member: member.to_owned(),
        what: what.to_owned(),
    }
    .into()
}
