//! Walking the workspace: what each directory entry becomes (a member, an
//! exclusion, a skip or a refusal). The rules themselves come from
//! packet-core: member paths from `MemberPath::join_bytes`, credentials
//! from `exclude::credential_match`, user patterns from `exclude::glob_match`,
//! symlink containment from `path::resolve_symlink_target`.
//!
//! Every folder is listed through a descriptor opened below the root
//! ([`beneath`]), and checked to be the folder its parent listed, so the
//! walk never leaves the folder it was given, whatever is renamed or
//! replaced while it runs.

mod beneath;

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsStr;
use std::io::Read;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex};

use packet_core::{exclude, path, ErrorCode, Exclusion, Limits, MemberPath};
use rustix::fs::{statat, AtFlags, FileType};
use serde::Serialize;

pub use beneath::{open_beneath, open_file_in, FileId, Identity, WalkRoot};

use crate::error::{CliError, Refused, Result};

/// One member to pack, before its file (if any) is hashed.
#[derive(Debug, Clone)]
pub enum Planned {
    /// A directory.
    Dir {
        /// Member path.
        member: String,
    },
    /// A regular file a harness adapter found at `source` (always given).
    File {
        /// Member path.
        member: String,
        /// Where its bytes are.
        source: Option<PathBuf>,
        /// Whether the owner may execute it (mode 0755 rather than 0644).
        executable: bool,
        /// Its size when it was found.
        size: u64,
    },
    /// A regular file (hardlinks included) the walk listed below `root`,
    /// at the member's own path there (no second copy of every path is
    /// kept).
    Walked {
        /// Member path.
        member: String,
        /// The walked folder it lies in.
        root: Arc<WalkRoot>,
        /// Whether the owner may execute it (mode 0755 rather than 0644).
        executable: bool,
        /// Its size when it was listed.
        size: u64,
        /// The file that was listed: what is opened must be it.
        id: FileId,
        /// Its timestamps when it was listed.
        times: Times,
        /// Its `st_mode` when it was listed.
        mode: u32,
    },
    /// A symlink, packed as a link (never followed).
    Symlink {
        /// Member path.
        member: String,
        /// Its target, as written.
        target: String,
    },
}

/// When a file's bytes and its inode last changed, in nanoseconds since
/// the epoch (what a save compares with the workspace record).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Times {
    /// Last modification.
    pub mtime: i64,
    /// Last change of the inode.
    pub ctime: i64,
}

/// Where a file's bytes are read from.
#[derive(Debug, Clone)]
pub enum FileSource {
    /// A path a harness adapter found.
    Path(PathBuf),
    /// A file the walk listed, opened below its root.
    Beneath {
        /// The walked folder.
        root: Arc<WalkRoot>,
        /// The path below it.
        relative: String,
        /// The file that was listed.
        id: FileId,
    },
}

impl FileSource {
    /// The file's path, for messages.
    pub fn display(&self) -> PathBuf {
        match self {
            FileSource::Path(p) => p.clone(),
            FileSource::Beneath { root, relative, .. } => root.path().join(relative),
        }
    }
}

impl Planned {
    /// Where a file's bytes are.
    pub fn source(&self) -> Option<FileSource> {
        match self {
            Planned::File {
                source: Some(source),
                ..
            } => Some(FileSource::Path(source.clone())),
            Planned::Walked {
                member, root, id, ..
            } => walked_source(root, member, *id),
            _ => None,
        }
    }

    /// A walked file's stat identity as the walk saw it.
    pub fn identity(&self) -> Option<Identity> {
        match self {
            Planned::Walked {
                size,
                id,
                times,
                mode,
                ..
            } => Some(Identity {
                size: *size,
                mtime: times.mtime,
                ctime: times.ctime,
                ino: id.ino,
                dev: id.dev,
                mode: *mode,
            }),
            _ => None,
        }
    }

    /// The member path.
    pub fn member(&self) -> &str {
        match self {
            Planned::Dir { member }
            | Planned::File { member, .. }
            | Planned::Walked { member, .. }
            | Planned::Symlink { member, .. } => member,
        }
    }
}

/// The source of a file the walk listed below `root` as `member`.
pub fn walked_source(root: &Arc<WalkRoot>, member: &str, id: FileId) -> Option<FileSource> {
    root.relative(member).map(|relative| FileSource::Beneath {
        root: Arc::clone(root),
        relative: relative.to_owned(),
        id,
    })
}

/// Something left out of the packet that the report names one by one.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Skipped {
    /// The member path it would have had.
    pub path: String,
    /// The rule: a credential rule id, `special-file` or `escaping-symlink`.
    pub rule: String,
    /// Why.
    pub reason: String,
}

/// What a walk found.
#[derive(Debug, Default)]
pub struct Walk {
    /// Members to pack, in sorted runs (what each walking thread found,
    /// sorted); [`sort_planned`] puts them, with any added after, in
    /// packet order.
    pub planned: Vec<Planned>,
    /// (rule, pattern) -> count, for the manifest's exclusions.
    pub exclusions: BTreeMap<(String, String), u64>,
    /// Paths left out for a reason the user should see.
    pub skipped: Vec<Skipped>,
    /// Folders that hold published packages (installed from npm, PyPI or
    /// crates.io), by member path: secrets found below them are their
    /// authors' test fixtures and examples, reported but not refused.
    pub published: BTreeSet<String>,
}

impl Walk {
    /// Whether `member` lies in a folder of published packages.
    pub fn is_published(&self, member: &str) -> bool {
        let mut at = member;
        while let Some(parent) = path::parent(at) {
            if self.published.contains(parent) {
                return true;
            }
            at = parent;
        }
        false
    }

    /// The bytes of the files planned, as listed.
    pub fn listed_bytes(&self) -> u64 {
        self.planned
            .iter()
            .map(|p| match p {
                Planned::File { size, .. } | Planned::Walked { size, .. } => *size,
                _ => 0,
            })
            .sum()
    }

    /// The manifest's exclusion records.
    pub fn exclusion_records(&self) -> Vec<Exclusion> {
        self.exclusions
            .iter()
            .map(|((rule, pattern), matched)| Exclusion {
                matched: *matched,
                pattern: pattern.clone(),
                rule: rule.clone(),
            })
            .collect()
    }

    /// Counts one path left out by `rule` and `pattern`.
    pub fn exclude(&mut self, rule: &str, pattern: &str) {
        *self
            .exclusions
            .entry((rule.to_owned(), pattern.to_owned()))
            .or_default() += 1;
    }
}

/// How to walk.
#[derive(Debug, Clone, Default)]
pub struct WalkOptions {
    /// `--exclude` patterns, matched against the path relative to the root.
    pub excludes: Vec<String>,
    /// Skip (rather than refuse) symlinks that leave their root.
    pub skip_escaping_symlinks: bool,
}

/// Walks `dir` as the member subtree `root_member` (e.g. `workspace`, or
/// `harness/claude/<id>` for a sidecar folder). `root_member` itself is
/// planned as a directory. Relative paths for exclusion rules are taken
/// from the packet root (`workspace/` or `harness/`).
pub fn walk_tree(
    dir: &Path,
    root_member: &str,
    options: &WalkOptions,
    walk: &mut Walk,
) -> Result<()> {
    let root = Arc::new(WalkRoot::open(dir, root_member)?);
    let root_path = MemberPath::parse(root_member).map_err(CliError::Unpackable)?;
    walk.planned.push(Planned::Dir {
        member: root_member.to_owned(),
    });
    let queue = Queue {
        state: Mutex::new(QueueState {
            dirs: vec![Folder {
                relative: String::new(),
                member: root_path,
                id: root.id(),
                published: false,
            }],
            busy: 0,
            waiting: 0,
        }),
        ready: Condvar::new(),
    };
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get().min(4));
    // Folders are listed on every core; each thread keeps its own findings,
    // merged below (the planned members are sorted later anyway).
    let found: Vec<(Walk, Option<(String, CliError)>)> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                scope.spawn(|| {
                    let mut local = Walk::default();
                    let mut first_error: Option<(String, CliError)> = None;
                    while let Some(folder) = queue.next() {
                        let member_dir = folder.member.to_string();
                        match list_dir(&root, folder, options, &mut local) {
                            Ok(subdirs) => queue.done(subdirs),
                            Err(e) => {
                                queue.done(Vec::new());
                                if first_error
                                    .as_ref()
                                    .is_none_or(|(at, _)| path::compare(&member_dir, at).is_lt())
                                {
                                    first_error = Some((member_dir, e));
                                }
                            }
                        }
                    }
                    // Each thread sorts its own findings, so that putting
                    // the members in packet order only merges sorted runs
                    // (`sort_planned`, once every member is known).
                    local
                        .planned
                        .sort_unstable_by(|a, b| path::compare(a.member(), b.member()));
                    (local, first_error)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join().unwrap_or_else(|_| {
                    let e = CliError::from(Refused::PackWalkingStopped {});
                    (Walk::default(), Some((String::new(), e)))
                })
            })
            .collect()
    });
    // Every folder is listed even after a failure, so the error reported
    // (the one in the first folder, in packet order) does not depend on
    // timing.
    let mut first_error: Option<(String, CliError)> = None;
    walk.planned
        .reserve(found.iter().map(|(local, _)| local.planned.len()).sum());
    for (local, error) in found {
        walk.planned.extend(local.planned);
        for (k, v) in local.exclusions {
            *walk.exclusions.entry(k).or_default() += v;
        }
        walk.skipped.extend(local.skipped);
        walk.published.extend(local.published);
        if let Some((at, e)) = error {
            if first_error
                .as_ref()
                .is_none_or(|(first, _)| path::compare(&at, first).is_lt())
            {
                first_error = Some((at, e));
            }
        }
    }
    match first_error {
        Some((_, e)) => Err(e),
        None => Ok(()),
    }
}

/// Puts members in packet order. What the walk found comes in sorted runs
/// (one per walking thread, then members found elsewhere), so a stable
/// sort of their indices merges the runs in about one comparison a member;
/// the members are then moved into place along the permutation's cycles,
/// without a second copy of the list (a 250,000-member walk would need
/// megabytes more for one).
pub fn sort_planned(planned: &mut [Planned]) {
    let mut order: Vec<usize> = (0..planned.len()).collect();
    order.sort_by(|&a, &b| path::compare(planned[a].member(), planned[b].member()));
    // Position `i` takes the member at `order[i]`; `usize::MAX` marks a
    // position already filled.
    for start in 0..order.len() {
        let mut i = start;
        while order[i] != usize::MAX {
            let from = std::mem::replace(&mut order[i], usize::MAX);
            if from == start {
                break;
            }
            planned.swap(i, from);
            i = from;
        }
    }
}

/// Folders waiting to be listed, shared by the walking threads.
struct Queue {
    state: Mutex<QueueState>,
    ready: Condvar,
}

/// A folder to list: where it is below the root, its member path, the
/// folder its parent listed, and whether it lies in published packages.
struct Folder {
    relative: String,
    member: MemberPath,
    id: FileId,
    published: bool,
}

struct QueueState {
    dirs: Vec<Folder>,
    /// Folders being listed (which may add more).
    busy: usize,
    /// Threads waiting for a folder (woken only when there are any).
    waiting: usize,
}

impl Queue {
    /// The next folder to list; `None` once all are listed.
    fn next(&self) -> Option<Folder> {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        loop {
            if let Some(dir) = state.dirs.pop() {
                state.busy += 1;
                return Some(dir);
            }
            if state.busy == 0 {
                return None;
            }
            state.waiting += 1;
            state = self.ready.wait(state).unwrap_or_else(|p| p.into_inner());
            state.waiting -= 1;
        }
    }

    /// A folder was listed; `subdirs` are its folders to descend into.
    fn done(&self, subdirs: Vec<Folder>) {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let found = !subdirs.is_empty();
        state.dirs.extend(subdirs);
        state.busy -= 1;
        // Waiting threads have work now, or learn that there is none left.
        let wake = state.waiting > 0 && (found || state.busy == 0);
        drop(state);
        if wake {
            self.ready.notify_all();
        }
    }
}

/// Names that mark a folder of installed third-party packages: npm's,
/// and Python's in an interpreter or a virtual environment.
const PACKAGE_FOLDERS: &[&str] = &["node_modules", "site-packages", "dist-packages"];

/// Files `cargo package` writes into every crate it publishes (and so into
/// registry sources and `cargo vendor` trees).
const PUBLISHED_CRATE_MARKERS: &[&str] = &["Cargo.toml.orig", ".cargo_vcs_info.json"];

/// Whether a folder holds published packages, from its name and entries:
/// a package folder by name, a published crate, or a `pip install
/// --target` folder (packages beside their `*.dist-info` records). The
/// walked root itself never is: a user's own project is never exempt.
fn holds_published(relative: &str, name: &str, entries: &[(Vec<u8>, FileType)]) -> bool {
    if relative.is_empty() {
        return false;
    }
    PACKAGE_FOLDERS.contains(&name)
        || entries.iter().any(|(n, t)| {
            PUBLISHED_CRATE_MARKERS.iter().any(|m| n == m.as_bytes())
                || (*t == FileType::Directory && n.ends_with(b".dist-info"))
        })
}

/// Lists one folder, opened below the root and checked to be the one its
/// parent listed; returns its subfolders to descend into.
fn list_dir(
    root: &Arc<WalkRoot>,
    folder: Folder,
    options: &WalkOptions,
    walk: &mut Walk,
) -> Result<Vec<Folder>> {
    let fd = root.open_dir(&folder.relative, &folder.member, folder.id)?;
    let shown = || root.path().join(&folder.relative);
    let listing =
        rustix::fs::Dir::read_from(&fd).map_err(|e| CliError::io("list", shown(), e.into()))?;
    let mut entries: Vec<(Vec<u8>, FileType)> = Vec::new();
    for entry in listing {
        let entry = entry.map_err(|e| CliError::io("list", shown(), e.into()))?;
        let name = entry.file_name().to_bytes();
        if name == b"." || name == b".." {
            continue;
        }
        entries.push((name.to_vec(), entry.file_type()));
    }
    let name = path::file_name(&folder.member);
    let published = folder.published || holds_published(&folder.relative, name, &entries);
    if published && !folder.published {
        walk.published.insert(folder.member.to_string());
    }
    let mut subdirs = Vec::new();
    for (name, listed_type) in entries {
        let name = OsStr::from_bytes(&name);
        let member = folder
            .member
            .join_bytes(name.as_bytes())
            .map_err(CliError::Unpackable)?;
        // The type from the listing (no stat where the file system reports
        // it); files and folders are stat'ed relative to the open folder
        // for their mode, size and identity.
        let stat = match listed_type {
            FileType::Symlink | FileType::Fifo | FileType::Socket => None,
            FileType::CharacterDevice | FileType::BlockDevice => None,
            _ => Some(
                statat(&fd, name, AtFlags::SYMLINK_NOFOLLOW)
                    .map_err(|e| CliError::io("inspect", shown().join(name), e.into()))?,
            ),
        };
        let ft = stat.map_or(listed_type, |s| FileType::from_raw_mode(s.st_mode));
        let entry = Entry {
            root,
            dir: &fd,
            name,
            parent: &folder.relative,
            ft,
            stat,
        };
        if let Some(next) = visit(entry, member, published, options, walk)? {
            subdirs.push(next);
        }
    }
    Ok(subdirs)
}

/// A planned member's path, checked: the walk's own are, a harness
/// adapter's are checked here.
pub fn checked_path(member: String) -> Result<MemberPath> {
    MemberPath::try_from(member).map_err(CliError::Unpackable)
}

/// One entry of a folder being listed.
struct Entry<'a> {
    root: &'a Arc<WalkRoot>,
    /// The open folder it is in.
    dir: &'a OwnedFd,
    name: &'a OsStr,
    /// Its folder's path below the root.
    parent: &'a str,
    ft: FileType,
    /// Its stat, for files and folders.
    stat: Option<rustix::fs::Stat>,
}

impl Entry<'_> {
    /// Its path below the root.
    fn relative(&self) -> String {
        let name = self.name.to_string_lossy();
        if self.parent.is_empty() {
            name.into_owned()
        } else {
            format!("{}/{name}", self.parent)
        }
    }

    fn shown(&self) -> PathBuf {
        self.root.path().join(self.relative())
    }
}

/// Decides what one directory entry becomes; returns a directory to descend into.
fn visit(
    entry: Entry<'_>,
    member: MemberPath,
    published: bool,
    options: &WalkOptions,
    walk: &mut Walk,
) -> Result<Option<Folder>> {
    let relative = member.relative();
    let is_dir = entry.ft == FileType::Directory;
    // Credential files never enter a packet, whatever else applies.
    if !is_dir {
        if let Some((rule, pattern)) = exclude::credential_match(relative) {
            walk.exclude(rule.id, pattern);
            walk.skipped.push(Skipped {
                path: member.into_string(),
                rule: rule.id.to_owned(),
                reason: format!("credential file: {}", rule.why),
            });
            return Ok(None);
        }
    }
    if let Some(pattern) = options
        .excludes
        .iter()
        .find(|p| exclude::glob_match(p, relative))
    {
        walk.exclude("user", pattern);
        return Ok(None);
    }
    match (entry.ft, entry.stat) {
        (FileType::Directory, Some(stat)) => {
            walk.planned.push(Planned::Dir {
                member: member.to_string(),
            });
            Ok(Some(Folder {
                relative: entry.relative(),
                member,
                id: FileId::of(&stat),
                published,
            }))
        }
        (FileType::RegularFile, Some(stat)) => {
            if entry.name == OsStr::new(".git") {
                check_git_file(&entry, &member, stat)?;
            }
            let identity = Identity::of(&stat);
            walk.planned.push(Planned::Walked {
                member: member.into_string(),
                root: Arc::clone(entry.root),
                executable: stat.st_mode & 0o100 != 0,
                size: identity.size,
                id: FileId::of(&stat),
                times: Times {
                    mtime: identity.mtime,
                    ctime: identity.ctime,
                },
                mode: identity.mode,
            });
            Ok(None)
        }
        (FileType::Symlink, _) => {
            let target = rustix::fs::readlinkat(entry.dir, entry.name, Vec::new())
                .map_err(|e| CliError::io("read the link", entry.shown(), e.into()))?;
            let Ok(target) = target.into_string() else {
                return Err(CliError::Unpackable(
                    packet_core::Error::new(
                        ErrorCode::SymlinkTargetInvalid,
                        "the link's target is not valid UTF-8",
                    )
                    .at_path(member),
                ));
            };
            match path::resolve_symlink_target(&member, &target, Limits::FORMAT.max_path_bytes) {
                Ok(_) => {}
                Err(e)
                    if options.skip_escaping_symlinks
                        && matches!(
                            e.code(),
                            ErrorCode::SymlinkEscapes | ErrorCode::SymlinkAbsolute
                        ) =>
                {
                    walk.exclude("escaping-symlink", "--skip-escaping-symlinks");
                    walk.skipped.push(Skipped {
                        path: member.into_string(),
                        rule: "escaping-symlink".into(),
                        reason: format!("symlink to {target:?} points outside the packet root"),
                    });
                    return Ok(None);
                }
                Err(e) => return Err(CliError::Unpackable(e)),
            }
            walk.planned.push(Planned::Symlink {
                member: member.into_string(),
                target,
            });
            Ok(None)
        }
        (ft, _) => {
            let kind = match ft {
                FileType::Fifo => "fifo",
                FileType::Socket => "socket",
                FileType::BlockDevice => "block-device",
                FileType::CharacterDevice => "char-device",
                _ => "unknown-type",
            };
            walk.exclude("special-file", kind);
            walk.skipped.push(Skipped {
                path: member.into_string(),
                rule: "special-file".into(),
                reason: format!(
                    "{kind}: special files have no contents to carry and are never packed"
                ),
            });
            Ok(None)
        }
    }
}

/// A `.git` file names the real git directory (`gitdir: …`). A linked
/// worktree's points outside the workspace, so the packet could not be
/// restored as a working repository: refuse it. A submodule's relative
/// pointer that stays inside the workspace is fine.
fn check_git_file(entry: &Entry<'_>, member: &str, stat: rustix::fs::Stat) -> Result<()> {
    let mut text = String::new();
    let name = entry.name.to_string_lossy();
    let (f, _) = open_file_in(
        entry.dir.as_fd(),
        &name,
        member,
        Some(FileId::of(&stat)),
        &|| entry.shown(),
    )?;
    let _ = f.take(4096).read_to_string(&mut text);
    let gitdir = text
        .lines()
        .find_map(|l| l.strip_prefix("gitdir:"))
        .map(str::trim)
        .unwrap_or("");
    let mut depth = member.matches('/').count() as i64 - 1; // directories below workspace/
    let mut inside = !gitdir.is_empty() && !gitdir.starts_with('/');
    if inside {
        for c in gitdir.split('/') {
            match c {
                "" | "." => {}
                ".." => depth -= 1,
                _ => depth += 1,
            }
            if depth < 0 {
                inside = false;
                break;
            }
        }
    }
    if inside {
        return Ok(());
    }
    Err(Refused::GitDirOutsideWorkspace {
        member: member.to_owned(),
        gitdir: gitdir.to_owned(),
    }
    .into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    fn walk(dir: &Path, options: &WalkOptions) -> Result<Walk> {
        let mut w = Walk::default();
        walk_tree(dir, "workspace", options, &mut w)?;
        Ok(w)
    }

    #[test]
    fn sorting_planned_members_gives_packet_order_from_any_runs() {
        let names = [
            "workspace/b",
            "workspace/a.txt",
            "workspace/a/z",
            "workspace/a",
            "workspace/a0",
            "workspace/c/d",
            "workspace",
            "workspace/c",
            "workspace/a/b",
        ];
        let dir = |m: &str| Planned::Dir {
            member: m.to_owned(),
        };
        let mut expected: Vec<&str> = names.to_vec();
        expected.sort_by(|a, b| path::compare(a, b));
        // Every rotation and reversal: one run, two runs, many short runs.
        for cut in 0..names.len() {
            for reversed in [false, true] {
                let mut order = names.to_vec();
                order.rotate_left(cut);
                if reversed {
                    order.reverse();
                }
                let mut planned: Vec<Planned> = order.iter().map(|m| dir(m)).collect();
                sort_planned(&mut planned);
                let got: Vec<&str> = planned.iter().map(Planned::member).collect();
                assert_eq!(got, expected, "from {order:?}");
            }
        }
        let mut empty: Vec<Planned> = Vec::new();
        sort_planned(&mut empty);
        assert!(empty.is_empty());
        // Shuffles of a larger tree: every kind of permutation cycle.
        let mut names: Vec<String> = (0..300)
            .map(|i| {
                format!(
                    "workspace/d{}/{}{}",
                    i % 7,
                    ["a", "a.b", "a/b", "b0"][i % 4],
                    i
                )
            })
            .collect();
        names.push("workspace".into());
        let mut expected = names.clone();
        expected.sort_by(|a, b| path::compare(a, b));
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..50 {
            for i in (1..names.len()).rev() {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                names.swap(i, (state % (i as u64 + 1)) as usize);
            }
            let mut planned: Vec<Planned> = names.iter().map(|m| dir(m)).collect();
            sort_planned(&mut planned);
            let got: Vec<&str> = planned.iter().map(Planned::member).collect();
            assert_eq!(got, expected);
        }
    }

    #[test]
    fn credentials_are_excluded_before_user_patterns() {
        let t = tempfile::tempdir().unwrap();
        fs::write(t.path().join(".netrc"), "machine x").unwrap();
        fs::write(t.path().join("a.log"), "x").unwrap();
        let w = walk(
            t.path(),
            &WalkOptions {
                excludes: vec!["*".into()],
                ..Default::default()
            },
        )
        .unwrap();
        assert_eq!(
            w.exclusions.get(&("netrc".into(), "**/.netrc".into())),
            Some(&1)
        );
        assert_eq!(w.exclusions.get(&("user".into(), "*".into())), Some(&1));
        assert_eq!(w.planned.len(), 1);
    }

    #[test]
    fn worktree_git_file_is_refused_submodule_is_not() {
        let t = tempfile::tempdir().unwrap();
        fs::write(
            t.path().join(".git"),
            "gitdir: /elsewhere/.git/worktrees/x\n",
        )
        .unwrap();
        assert_eq!(
            walk(t.path(), &WalkOptions::default()).unwrap_err().code(),
            "git_dir_outside_workspace"
        );
        let t = tempfile::tempdir().unwrap();
        fs::create_dir(t.path().join("sub")).unwrap();
        fs::write(t.path().join("sub/.git"), "gitdir: ../.git/modules/sub\n").unwrap();
        assert!(walk(t.path(), &WalkOptions::default()).is_ok());
        fs::write(t.path().join("sub/.git"), "gitdir: ../../outside\n").unwrap();
        assert!(walk(t.path(), &WalkOptions::default()).is_err());
    }

    #[test]
    fn a_folder_is_listed_only_if_it_is_the_one_its_parent_listed() {
        let t = tempfile::tempdir().unwrap();
        let ws = t.path().join("ws");
        fs::create_dir_all(ws.join("d")).unwrap();
        fs::create_dir_all(t.path().join("outside")).unwrap();
        let root = WalkRoot::open(&ws, "workspace").unwrap();
        let listed = FileId::of(&statat(rustix::fs::CWD, ws.join("d"), AtFlags::empty()).unwrap());
        assert!(root.open_dir("d", "workspace/d", listed).is_ok());
        // Swapped for a link out of the workspace, then for another folder.
        fs::rename(ws.join("d"), t.path().join("old-d")).unwrap();
        std::os::unix::fs::symlink(t.path().join("outside"), ws.join("d")).unwrap();
        let e = root.open_dir("d", "workspace/d", listed).unwrap_err();
        assert_eq!(e.code(), "workspace_changed");
        fs::remove_file(ws.join("d")).unwrap();
        fs::create_dir(ws.join("d")).unwrap();
        let e = root.open_dir("d", "workspace/d", listed).unwrap_err();
        assert_eq!(e.code(), "workspace_changed");
        // A link higher up is not followed either.
        fs::create_dir_all(t.path().join("outside/e")).unwrap();
        fs::remove_dir(ws.join("d")).unwrap();
        std::os::unix::fs::symlink(t.path().join("outside"), ws.join("d")).unwrap();
        let e_id = FileId::of(
            &statat(
                rustix::fs::CWD,
                t.path().join("outside/e"),
                AtFlags::empty(),
            )
            .unwrap(),
        );
        let e = root.open_dir("d/e", "workspace/d/e", e_id).unwrap_err();
        assert_eq!(e.code(), "workspace_changed");
    }

    #[test]
    fn published_packages_are_recognised_by_their_folders() {
        let t = tempfile::tempdir().unwrap();
        for f in [
            "node_modules/a/index.js",
            "py/site-packages/b/__init__.py",
            "vendor/c-1.0/Cargo.toml.orig",
            "vendor/c-1.0/src/lib.rs",
            "deps/d-1.0.dist-info/RECORD",
            "deps/d/__init__.py",
            "src/node_modulesx/x.js",
        ] {
            let p = t.path().join(f);
            fs::create_dir_all(p.parent().unwrap()).unwrap();
            fs::write(p, b"x").unwrap();
        }
        // A workspace that is itself a published crate is still the user's.
        fs::write(t.path().join("Cargo.toml.orig"), b"").unwrap();
        let w = walk(t.path(), &WalkOptions::default()).unwrap();
        assert!(w.is_published("workspace/node_modules/a/index.js"));
        assert!(w.is_published("workspace/py/site-packages/b/__init__.py"));
        assert!(w.is_published("workspace/vendor/c-1.0/src/lib.rs"));
        assert!(w.is_published("workspace/deps/d/__init__.py"));
        assert!(!w.is_published("workspace/src/node_modulesx/x.js"));
        assert!(!w.is_published("workspace/Cargo.toml.orig"));
    }

    #[test]
    fn escaping_symlinks_refused_or_skipped() {
        let t = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink("../../etc/passwd", t.path().join("l")).unwrap();
        assert_eq!(
            walk(t.path(), &WalkOptions::default()).unwrap_err().code(),
            "symlink_escapes"
        );
        let w = walk(
            t.path(),
            &WalkOptions {
                skip_escaping_symlinks: true,
                ..Default::default()
            },
        )
        .unwrap();
        assert_eq!(w.skipped[0].rule, "escaping-symlink");
    }
}
