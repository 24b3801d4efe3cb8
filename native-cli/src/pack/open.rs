//! Opening a listed file to read it (below its walked folder, never through
//! a link, never blocking on a FIFO) and knowing it is still the file that
//! was hashed: its [`Stamp`], and the refusal of a file whose size changed.

use std::fs::File;
use std::io::{self, Read};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use packet_core::ErrorCode;
use rustix::fs::{Mode, OFlags, Stat};

use crate::error::{CliError, Result};
use crate::record::Identity;
use crate::walk::{open_file_in, FileSource};

/// What pass 1 saw of a file: its size as read and the identity and
/// change times of the inode it read. Pass 2 compares the file it reads
/// with this (see [`Stamp::check`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Stamp {
    pub(super) size: u64,
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
    pub(super) fn of(stat: &Stat, size: u64) -> Stamp {
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
    pub(super) fn identity(&self) -> Identity {
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
    pub(super) fn of_identity(id: &Identity) -> Stamp {
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
    pub(super) fn now(f: &File, display: &Path) -> Result<Stamp> {
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
    pub(super) fn check(&self, now: &Stamp, member: &str) -> Result<()> {
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
pub(super) fn stat_size(stat: &Stat) -> u64 {
    u64::try_from(stat.st_size).unwrap_or(0)
}

/// Opens files for reading relative to a descriptor of the last folder
/// used: files of one folder are neighbours in the packet's order, so each
/// folder is opened once per pass rather than once per file.
#[derive(Default)]
pub(super) struct Opener {
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
    pub(super) fn open(&mut self, source: &FileSource, member: &str) -> Result<(File, Stat)> {
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

/// The refusal of a file whose size changed while it was being packed
/// (`how`: "shrank" or "grew").
pub(super) fn changed_size(member: &str, how: &str) -> CliError {
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
pub(super) fn read_more(f: &mut File, buf: &mut [u8], path: &Path, member: &str) -> Result<usize> {
    loop {
        match f.read(buf) {
            Ok(0) => return Err(changed_size(member, "shrank")),
            Ok(n) => return Ok(n),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(CliError::io("read", path, e)),
        }
    }
}
