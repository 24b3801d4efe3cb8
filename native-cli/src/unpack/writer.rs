//! Writing members into staging folders as the packet is read: one step
//! ([`Op`]) at a time, in the packet's order, below descriptors of folders
//! this writer created, never following a link; the workspace's modes
//! honour the umask, harness state is private, and `--neutralize-git`
//! writes git configuration files without the settings that run programs
//! and hooks without their exec bit.

use std::borrow::Cow;
use std::fs::File;
use std::io::Write;
use std::ops::Range;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use packet_core::{git, Kind};
use rustix::fs::{mkdirat, openat, symlinkat, Mode, OFlags, CWD};

use super::report::{GitNeutralized, RemovedSetting};
use super::target::{dup, open_dir, Staging};
use crate::error::{CliError, Refused, Result};
use crate::packet_io::Block;

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

/// Folders kept open (as descriptors) along the current path; deeper
/// folders are reached by path, so a deep packet cannot exhaust descriptors.
const MAX_OPEN_DIRS: usize = 128;

/// The mode of every workspace folder unpacked, before the umask.
pub(crate) const DIR_MODE: u32 = 0o755;

/// Harness state is a session's private log: files 0600, folders 0700.
pub(crate) const PRIVATE_FILE_MODE: u32 = 0o600;
pub(crate) const PRIVATE_DIR_MODE: u32 = 0o700;

/// The largest git configuration file `--neutralize-git` rewrites.
const GIT_CONFIG_MAX: u64 = 16 << 20;

/// Refuses a git configuration file `--neutralize-git` would not rewrite:
/// one larger than [`GIT_CONFIG_MAX`].
pub fn check_git_config_size(member: &str, size: u64) -> Result<()> {
    if size <= GIT_CONFIG_MAX {
        return Ok(());
    }
    Err(Refused::GitConfigTooLarge {
        member: member.to_owned(),
        limit: GIT_CONFIG_MAX,
    }
    .into())
}

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
                // The workspace's files, what --neutralize-git looks at
                // (harness state is restored private).
                let in_workspace = if private {
                    None
                } else {
                    packet_core::path::Root::Workspace.below(&entry.path)
                };
                let hook = neutralize
                    && entry.mode == packet_core::Mode::EXECUTABLE.bits()
                    && in_workspace.is_some_and(git::is_hook);
                let config = neutralize && in_workspace.is_some_and(git::is_repository_config);
                if config {
                    check_git_config_size(&entry.path, entry.size)?;
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
