//! What a folder holds now, against the checkpoint its workspace record
//! says it holds (docs/cli.md, "What counts as a local change"). Every
//! entry is listed below the folder's descriptor (never through a link);
//! each is matched against the recorded checkpoint's member at its path
//! and, after an interrupted restore, the journal's checkpoint's. A file
//! whose stat identity is the recorded one, stamped well before the
//! record's start, has its recorded sha256; any other is read and hashed.
//! What matches is known (and can be kept, or read from); what does not is
//! a local change: edited, a mode or type changed, added, or removed. An
//! entry the checkpoint's own rules would leave out of a packet (a
//! credential file, a special file, a path its `--exclude` patterns
//! match) is not the checkpoint's to judge: it is kept as it is.

use std::collections::{HashMap, HashSet};
use std::ffi::OsStr;
use std::fs::File;
use std::io::Read;
use std::os::fd::{BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Condvar, Mutex};

use packet_core::path::{self as member_path, Root};
use packet_core::{exclude, Digest, Entry, Hasher, Limits, Manifest};
use rustix::fs::{openat, statat, AtFlags, FileType, Mode, OFlags};

use crate::change::{Change, ChangeKind};
use crate::error::{CliError, Result};
use crate::record::{Identity, Record, Seen};
use crate::walk::open_beneath;

/// What a path holds, proven equal to a checkpoint's member there.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Known {
    /// The member's entry.
    pub entry: Entry,
    /// A file's stat identity now.
    pub identity: Option<Identity>,
}

/// An entry found on disk.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Found {
    /// Its type.
    pub kind: FileType,
    /// Its stat identity (files).
    pub identity: Identity,
    /// A symlink's target.
    pub target: Option<String>,
}

/// What the scan found.
#[derive(Debug, Default)]
pub struct Scan {
    /// Paths (member paths) whose entry is a checkpoint's, and which.
    pub known: HashMap<String, Known>,
    /// Every entry found on disk, by member path (the workspace's), kept or
    /// not.
    pub found: HashMap<String, Found>,
    /// The local changes.
    pub changes: Vec<Change>,
    /// Entries no checkpoint would carry (left as they are).
    pub kept: Vec<String>,
    /// Files read and hashed.
    pub hashed: u64,
}

/// The checkpoints a folder may hold, member by member.
pub struct Expected<'a> {
    /// The recorded checkpoint's manifest (none: the folder held nothing
    /// recorded, as when a fresh restore was interrupted).
    pub old: Option<&'a Manifest>,
    /// The destinations of interrupted restores since.
    pub pending: Vec<&'a Manifest>,
    /// The record (identities of the recorded files).
    pub record: Option<&'a Record>,
}

impl Expected<'_> {
    fn all(&self) -> impl Iterator<Item = &Manifest> {
        self.old.into_iter().chain(self.pending.iter().copied())
    }

    fn members(&self, path: &str) -> Vec<&Entry> {
        let mut out = Vec::new();
        for m in self.all() {
            if let Some((_, member)) = m.find(path) {
                out.push(&member.entry);
            }
        }
        out
    }

    /// Whether a path no checkpoint has (`member`, with a symlink's
    /// `target`) would be left out of a packet by the recorded
    /// checkpoint's rules.
    fn left_out(&self, member: &str, kind: FileType, target: Option<&str>) -> bool {
        let relative = below_workspace(member);
        if !matches!(
            kind,
            FileType::Directory | FileType::RegularFile | FileType::Symlink
        ) {
            return true;
        }
        if kind != FileType::Directory && exclude::credential_match(relative).is_some() {
            return true;
        }
        for m in self.all() {
            for e in &m.exclusions {
                match e.rule.as_str() {
                    "special-file" => {}
                    "escaping-symlink" => {
                        if kind == FileType::Symlink && target.is_some_and(|t| escapes(member, t)) {
                            return true;
                        }
                    }
                    _ => {
                        if exclude::glob_match(&e.pattern, relative) {
                            return true;
                        }
                    }
                }
            }
        }
        false
    }
}

/// Whether the link `member` to `target` points out of the workspace.
fn escapes(member: &str, target: &str) -> bool {
    member_path::resolve_symlink_target(member, target, Limits::FORMAT.max_path_bytes).is_err()
}

/// The path below the workspace of a member this scan named: every one
/// is the workspace's.
fn below_workspace(member: &str) -> &str {
    Root::Workspace.below(member).unwrap_or_default()
}

/// Scans the workspace below `root` (its path `shown`), leaving out the
/// folder's own staging folders named in `skip`. Two walkers list its
/// folders, each taking the next folder either found.
pub fn scan_workspace(
    root: BorrowedFd<'_>,
    shown: &Path,
    expected: &Expected<'_>,
    skip: &HashSet<PathBuf>,
) -> Result<Scan> {
    let folders = Folders::new(dup_dir(root, shown)?);
    let walk = || -> Result<Partial> {
        let mut part = Partial::default();
        while let Some((dir, relative_dir)) = folders.next() {
            let mut subdirs = Vec::new();
            let listed = list_folder(
                &dir,
                &relative_dir,
                shown,
                expected,
                skip,
                &mut part,
                &mut subdirs,
            );
            folders.done(subdirs);
            if let Err(e) = listed {
                folders.fail();
                return Err(e);
            }
        }
        Ok(part)
    };
    let (a, b) = std::thread::scope(|scope| {
        let other = scope.spawn(walk);
        let mine = walk();
        let theirs = other
            .join()
            .unwrap_or_else(|_| Err(CliError::Bug("a scanning thread panicked".into())));
        (mine, theirs)
    });
    let (a, b) = (a?, b?);
    let mut scan = a.scan;
    scan.known.extend(b.scan.known);
    scan.found.extend(b.scan.found);
    scan.changes.extend(b.scan.changes);
    scan.kept.extend(b.scan.kept);
    // In one order whichever walker found them.
    scan.kept.sort();
    let mut reading = a.reading;
    reading.extend(b.reading);
    scan.hashed = reading.len() as u64;
    let hashes = hash_files(root, shown, &reading)?;
    for ((member, identity), sha) in reading.into_iter().zip(hashes) {
        match sha {
            Some(sha) => judge_file(&mut scan, expected, shown, &member, identity, sha, false),
            // It went while being read: a change the next look settles.
            None => scan.changes.push(Change {
                path: shown.join(below_workspace(&member)).display().to_string(),
                change: ChangeKind::Edited,
            }),
        }
    }
    // The checkpoints' members that are gone.
    let mut seen = HashSet::new();
    for m in expected.all() {
        for member in &m.members {
            let Some(relative) = Root::Workspace.below(&member.path) else {
                continue;
            };
            if !scan.found.contains_key(member.path.as_str()) && seen.insert(member.path.clone()) {
                // After an interrupted restore, a member may be missing
                // because it was being replaced or removed: nothing of it
                // is lost (the restore writes it again or did not want it).
                if expected.pending.is_empty() {
                    scan.changes.push(Change {
                        path: shown.join(relative).display().to_string(),
                        change: ChangeKind::Removed,
                    });
                }
            }
        }
    }
    scan.changes.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(scan)
}

/// What one walker found: a part of the scan, and the files it must read.
#[derive(Default)]
struct Partial {
    scan: Scan,
    /// Files the record does not vouch for.
    reading: Vec<(String, Identity)>,
}

impl Partial {
    /// A file where a checkpoint has one: the record's word where it
    /// holds, else it is to be read.
    fn file(&mut self, expected: &Expected<'_>, shown: &Path, member: String, identity: Identity) {
        let recorded = expected
            .record
            .and_then(|r| match r.check(&member, &identity) {
                Seen::Unchanged(e) => Some(e.sha256),
                _ => None,
            });
        match recorded {
            Some(sha) => judge_file(
                &mut self.scan,
                expected,
                shown,
                &member,
                identity,
                sha,
                true,
            ),
            None => self.reading.push((member, identity)),
        }
    }
}

/// The folders still to list, shared by the walkers: listing one adds its
/// subfolders; the walk is over when none is left and no walker is
/// listing one, or when one failed.
struct Folders {
    /// Folders to list (descriptor, relative path), and how many walkers
    /// are listing one.
    state: Mutex<(Vec<(OwnedFd, String)>, usize)>,
    more: Condvar,
    failed: AtomicBool,
}

impl Folders {
    fn new(root: OwnedFd) -> Folders {
        Folders {
            state: Mutex::new((vec![(root, String::new())], 0)),
            more: Condvar::new(),
            failed: AtomicBool::new(false),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, (Vec<(OwnedFd, String)>, usize)> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The next folder to list, once there is one; `None` when the walk is
    /// over.
    fn next(&self) -> Option<(OwnedFd, String)> {
        let mut state = self.lock();
        loop {
            if self.failed.load(Ordering::Relaxed) {
                return None;
            }
            if let Some(folder) = state.0.pop() {
                state.1 += 1;
                return Some(folder);
            }
            if state.1 == 0 {
                return None;
            }
            state = self
                .more
                .wait(state)
                .unwrap_or_else(std::sync::PoisonError::into_inner);
        }
    }

    /// A folder listed, with the subfolders it holds.
    fn done(&self, subfolders: Vec<(OwnedFd, String)>) {
        let mut state = self.lock();
        state.0.extend(subfolders);
        state.1 -= 1;
        drop(state);
        self.more.notify_all();
    }

    fn fail(&self) {
        // Under the lock, so that no walker misses the news while it is
        // about to wait.
        let _state = self.lock();
        self.failed.store(true, Ordering::Relaxed);
        self.more.notify_all();
    }
}

/// Lists one folder of the workspace into `part`; its subfolders, open,
/// go to `subdirs`.
fn list_folder(
    dir: &OwnedFd,
    relative_dir: &str,
    shown: &Path,
    expected: &Expected<'_>,
    skip: &HashSet<PathBuf>,
    part: &mut Partial,
    subdirs: &mut Vec<(OwnedFd, String)>,
) -> Result<()> {
    let listing = rustix::fs::Dir::read_from(dir)
        .map_err(|e| CliError::io("list", shown.join(relative_dir), e.into()))?;
    for entry in listing {
        let entry = entry.map_err(|e| CliError::io("list", shown.join(relative_dir), e.into()))?;
        let name_bytes = entry.file_name().to_bytes();
        if name_bytes == b"." || name_bytes == b".." {
            continue;
        }
        let name = OsStr::from_bytes(name_bytes);
        let Some(name_str) = name.to_str() else {
            // Not a path a packet can hold: a local change.
            part.scan.changes.push(Change {
                path: shown.join(relative_dir).join(name).display().to_string(),
                change: ChangeKind::Added,
            });
            continue;
        };
        let relative = if relative_dir.is_empty() {
            name_str.to_owned()
        } else {
            format!("{relative_dir}/{name_str}")
        };
        if relative_dir.is_empty() && skip.contains(&shown.join(name_str)) {
            continue;
        }
        let stat = statat(dir, name, AtFlags::SYMLINK_NOFOLLOW)
            .map_err(|e| CliError::io("inspect", shown.join(&relative), e.into()))?;
        let kind = FileType::from_raw_mode(stat.st_mode);
        let member = Root::Workspace.member_path(&relative);
        let candidates = expected.members(&member);
        let identity = Identity::of(&stat);
        let target = match kind {
            FileType::Symlink => rustix::fs::readlinkat(dir, name, Vec::new())
                .ok()
                .and_then(|t| t.into_string().ok()),
            _ => None,
        };
        part.scan.found.insert(
            member.clone(),
            Found {
                kind,
                identity,
                target: target.clone(),
            },
        );
        let shown_path = || shown.join(&relative).display().to_string();
        if candidates.is_empty() {
            if expected.left_out(&member, kind, target.as_deref()) {
                part.scan.kept.push(member);
                continue;
            }
            part.scan.changes.push(Change {
                path: shown_path(),
                change: ChangeKind::Added,
            });
        } else {
            match kind {
                FileType::Directory => {
                    if candidates.iter().any(|e| matches!(e, Entry::Dir)) {
                        part.scan.known.insert(
                            member.clone(),
                            Known {
                                entry: Entry::Dir,
                                identity: None,
                            },
                        );
                    } else {
                        part.scan.changes.push(Change {
                            path: shown_path(),
                            change: ChangeKind::Type,
                        });
                    }
                }
                FileType::Symlink => {
                    let same = candidates.iter().find(
                        |e| matches!(e, Entry::Symlink { target: t } if Some(t) == target.as_ref()),
                    );
                    match same {
                        Some(e) => {
                            part.scan.known.insert(
                                member.clone(),
                                Known {
                                    entry: (*e).clone(),
                                    identity: None,
                                },
                            );
                        }
                        None => {
                            let change = if candidates
                                .iter()
                                .any(|e| matches!(e, Entry::Symlink { .. }))
                            {
                                ChangeKind::Edited
                            } else {
                                ChangeKind::Type
                            };
                            part.scan.changes.push(Change {
                                path: shown_path(),
                                change,
                            });
                        }
                    }
                }
                FileType::RegularFile => {
                    if candidates.iter().any(|e| matches!(e, Entry::File { .. })) {
                        part.file(expected, shown, member.clone(), identity);
                    } else {
                        part.scan.changes.push(Change {
                            path: shown_path(),
                            change: ChangeKind::Type,
                        });
                    }
                }
                _ => part.scan.changes.push(Change {
                    path: shown_path(),
                    change: ChangeKind::Type,
                }),
            }
        }
        if kind == FileType::Directory {
            let fd = openat(
                dir,
                name,
                OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                Mode::empty(),
            )
            .map_err(|e| CliError::io("open", shown.join(&relative), e.into()))?;
            subdirs.push((fd, relative));
        }
    }
    Ok(())
}

/// Settles a file whose content is `sha`: hashed now, or `vouched` by
/// the record (which then vouches for its mode too: the file is the
/// member it was recorded as, such as a hook `--neutralize-git` wrote
/// without its exec bit).
fn judge_file(
    scan: &mut Scan,
    expected: &Expected<'_>,
    shown: &Path,
    member: &str,
    identity: Identity,
    sha: Digest,
    vouched: bool,
) {
    let executable = identity.mode & 0o100 != 0;
    let candidates = expected.members(member);
    let same = candidates.iter().find(|e| {
        matches!(e, Entry::File { size, sha256, executable: x } if *sha256 == sha && (vouched || (*size == identity.size && *x == executable)))
    });
    if let Some(e) = same {
        scan.known.insert(
            member.to_owned(),
            Known {
                entry: (*e).clone(),
                identity: Some(identity),
            },
        );
        return;
    }
    let same_bytes = candidates.iter().any(
        |e| matches!(e, Entry::File { size, sha256, .. } if *size == identity.size && *sha256 == sha),
    );
    let relative = below_workspace(member);
    scan.changes.push(Change {
        path: shown.join(relative).display().to_string(),
        change: if same_bytes {
            ChangeKind::Mode
        } else {
            ChangeKind::Edited
        },
    });
}

/// The sha256 of each file (`None`: it could not be read as the file it
/// was), read below `root` on two threads.
fn hash_files(
    root: BorrowedFd<'_>,
    shown: &Path,
    files: &[(String, Identity)],
) -> Result<Vec<Option<Digest>>> {
    let hash_one = |(member, identity): &(String, Identity)| -> Result<Option<Digest>> {
        let relative = below_workspace(member);
        let fd = match open_beneath(
            root,
            relative,
            OFlags::RDONLY | OFlags::NONBLOCK | OFlags::NOCTTY,
            Mode::empty(),
        ) {
            Ok(fd) => fd,
            Err(rustix::io::Errno::NOENT | rustix::io::Errno::LOOP) => return Ok(None),
            Err(e) => return Err(CliError::io("read", shown.join(relative), e.into())),
        };
        hash_open(File::from(fd), identity, &shown.join(relative))
    };
    if files.len() < 64 {
        return files.iter().map(hash_one).collect();
    }
    let half = files.len() / 2;
    let (a, b) = files.split_at(half);
    std::thread::scope(|scope| {
        let other = scope.spawn(|| a.iter().map(hash_one).collect::<Result<Vec<_>>>());
        let mine = b.iter().map(hash_one).collect::<Result<Vec<_>>>()?;
        let mut out = other
            .join()
            .unwrap_or_else(|_| Err(CliError::Bug("a hashing thread panicked".into())))?;
        out.extend(mine);
        Ok(out)
    })
}

/// Hashes an open file that must be the one `identity` describes.
pub fn hash_open(mut f: File, identity: &Identity, shown: &Path) -> Result<Option<Digest>> {
    let stat = rustix::fs::fstat(&f).map_err(|e| CliError::io("read", shown, e.into()))?;
    if Identity::of(&stat).ino != identity.ino || Identity::of(&stat).size != identity.size {
        return Ok(None);
    }
    let mut h = Hasher::new();
    let mut buf = vec![0u8; crate::packet_io::CHUNK.min(identity.size.max(1) as usize)];
    let mut total = 0u64;
    loop {
        let n = match f.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(CliError::io("read", shown, e)),
        };
        h.update(&buf[..n]);
        total += n as u64;
    }
    Ok((total == identity.size).then(|| h.finish()))
}

fn dup_dir(root: BorrowedFd<'_>, shown: &Path) -> Result<OwnedFd> {
    openat(
        root,
        ".",
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| CliError::io("open", shown, e.into()))
}

/// A harness destination: the checkpoints' member there and the file on
/// this machine.
pub struct HarnessPlace<'a> {
    /// The member path.
    pub member: &'a str,
    /// Where it is on this machine.
    pub destination: PathBuf,
}

/// Scans harness destinations (outside the workspace): each must be
/// absent, or what a checkpoint's member there is.
pub fn scan_harness(
    places: &[HarnessPlace<'_>],
    expected: &Expected<'_>,
    scan: &mut Scan,
) -> Result<()> {
    for p in places {
        let candidates = expected.members(p.member);
        let shown = p.destination.display().to_string();
        let stat = match statat(rustix::fs::CWD, &p.destination, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(s) => s,
            Err(rustix::io::Errno::NOENT) => {
                // A recorded harness file that is gone: its session's log
                // on this machine went away since.
                let recorded = expected.old.and_then(|m| m.find(p.member)).is_some();
                if recorded && expected.pending.is_empty() {
                    scan.changes.push(Change {
                        path: shown,
                        change: ChangeKind::Removed,
                    });
                }
                continue;
            }
            Err(e) => return Err(CliError::io("inspect", &p.destination, e.into())),
        };
        let kind = FileType::from_raw_mode(stat.st_mode);
        let identity = Identity::of(&stat);
        scan.found.insert(
            p.member.to_owned(),
            Found {
                kind,
                identity,
                target: None,
            },
        );
        let entry = match kind {
            FileType::Directory => candidates
                .iter()
                .find(|e| matches!(e, Entry::Dir))
                .map(|e| (*e).clone()),
            FileType::RegularFile => {
                let recorded = expected
                    .record
                    .and_then(|r| match r.check(p.member, &identity) {
                        Seen::Unchanged(e) => Some(e.sha256),
                        _ => None,
                    });
                let sha = match recorded {
                    Some(s) => Some(s),
                    None => {
                        scan.hashed += 1;
                        let f = rustix::fs::open(
                            &p.destination,
                            OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC,
                            Mode::empty(),
                        )
                        .map_err(|e| CliError::io("read", &p.destination, e.into()))?;
                        hash_open(File::from(f), &identity, &p.destination)?
                    }
                };
                // Harness state is written private: only its bytes count.
                candidates
                    .iter()
                    .find(|e| matches!(e, Entry::File { size, sha256, .. } if *size == identity.size && Some(*sha256) == sha))
                    .map(|e| (*e).clone())
            }
            FileType::Symlink => {
                let target = rustix::fs::readlinkat(rustix::fs::CWD, &p.destination, Vec::new())
                    .ok()
                    .and_then(|t| t.into_string().ok());
                candidates
                    .iter()
                    .find(
                        |e| matches!(e, Entry::Symlink { target: t } if Some(t) == target.as_ref()),
                    )
                    .map(|e| (*e).clone())
            }
            _ => None,
        };
        match entry {
            Some(entry) => {
                scan.known.insert(
                    p.member.to_owned(),
                    Known {
                        entry,
                        identity: Some(identity),
                    },
                );
            }
            None => scan.changes.push(Change {
                path: shown,
                change: if candidates.is_empty() {
                    ChangeKind::Added
                } else {
                    ChangeKind::Edited
                },
            }),
        }
    }
    Ok(())
}
