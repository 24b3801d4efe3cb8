//! Secrets in what a workspace's git repositories hold and their remotes
//! do not (docs/cli.md, "Secrets in git history"). A file deleted from the
//! workspace is still a blob in `.git/objects`, compressed, so the content
//! scan of the packed files never sees it; after unpack, `git show` prints
//! it. History the remotes already have is no new exposure; a commit that
//! was never pushed is.
//!
//! For each repository the walk found (a folder holding `HEAD`, `objects`
//! and `refs`), the local roots are every ref outside `refs/remotes/`
//! (branches, tags, the stash, notes...), `HEAD`, the `*_HEAD` files,
//! every reflog entry and the index, its linked worktrees' too. Commits
//! they reach that no remote-tracking ref reaches are walked oldest first,
//! and every blob their trees hold that the remote side does not is
//! inflated once and run through packet-core's detector, with the path it
//! had in its tree and the commit that introduced it. Objects stored loose
//! or in a cruft pack that nothing reached are scanned too. The remote
//! side is marked by reading trees only, never its blobs: those of the
//! commits where local history leaves remote history and of the local
//! tips a remote has (and, when loose objects need them, of the
//! remote-tracking tips). A finding is then checked against everything
//! the remotes reach (walked only then): there, it is reported and packs.
//!
//! The work is bounded ([`MAX_OBJECTS`], [`MAX_BYTES`]); a repository
//! that cannot be read (corrupt, a link or a special file where git reads,
//! a format this reader does not know) or that passes a bound is refused,
//! never half-scanned.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use gix::hash::ObjectId;
use gix::hashtable::HashSet;
use gix::objs::Kind as ObjectKind;
use gix::prelude::{Find, Header};
use packet_core::exclude;
use packet_core::path::Root;
use packet_core::secrets::{Finding, Scanner, SecretRule};

use super::secrets::{GitObject, SecretPolicy, SecretReport, SecretsMode};
use crate::error::{CliError, Refused, Result};
use crate::record::{Record, Verdict, RACY_MARGIN_NS};
use crate::walk::{Planned, Skipped, Walk};
use packet_core::Digest;

/// Objects read (commits walked, trees and blobs inflated, headers
/// looked up) per repository before the scan stops.
pub const MAX_OBJECTS: u64 = 4_000_000;

/// Bytes inflated per repository before the scan stops: four times the
/// packet's limit, which bounds what its `.git` can hold compressed.
pub const MAX_BYTES: u64 = 4 << 30;

/// The rule of a repository left out whole (`--secrets exclude`) because
/// it could not be scanned.
pub const UNREADABLE_RULE: &str = "git-history-unreadable";

/// One secret in a repository's objects.
#[derive(Clone, Debug)]
struct Hit {
    object: ObjectId,
    kind: ObjectKind,
    origin: Origin,
    line: u64,
    rule: &'static SecretRule,
    /// Whether a remote-tracking ref reaches the object.
    on_remote: bool,
}

/// Where an object with a secret was found.
#[derive(Clone, Debug)]
enum Origin {
    /// At `path` in the tree of `commit`, the first local commit that has it.
    Commit { commit: ObjectId, path: String },
    /// A commit's or tag's own text (its message).
    Message,
    /// Staged at `path` in an index.
    Index { path: String },
    /// At `path` in a tree a tag names.
    Tree { path: String },
    /// Reached by nothing (a loose object or a cruft pack's).
    Unreachable,
}

impl Hit {
    fn path(&self) -> Option<&str> {
        match &self.origin {
            Origin::Commit { path, .. } | Origin::Index { path } | Origin::Tree { path } => {
                Some(path)
            }
            Origin::Message | Origin::Unreachable => None,
        }
    }

    fn commit(&self) -> Option<ObjectId> {
        match &self.origin {
            Origin::Commit { commit, .. } => Some(*commit),
            Origin::Message if self.kind == ObjectKind::Commit => Some(self.object),
            _ => None,
        }
    }

    /// `<commit>:<path>:<line> <rule>`, as git names a file in a commit
    /// (never the value).
    fn listed(&self, repository: &str) -> String {
        let short = |id: &ObjectId| id.to_hex_with_len(12).to_string();
        let at = match &self.origin {
            Origin::Commit { commit, path } => format!("{}:{path}", short(commit)),
            Origin::Index { path } => format!("index:{path}"),
            Origin::Tree { path } => format!("tagged tree:{path}"),
            Origin::Message => format!("{} {} message", self.kind, short(&self.object)),
            Origin::Unreachable => format!("unreachable {} {}", self.kind, short(&self.object)),
        };
        format!("{repository} {at}:{} {}", self.line, self.rule.id)
    }

    fn report(&self, repository: &str, action: &'static str) -> SecretReport {
        SecretReport {
            path: repository.to_owned(),
            line: self.line,
            rule: self.rule.id,
            action,
            git: Some(GitObject {
                commit: self.commit().map(|c| c.to_hex_with_len(12).to_string()),
                path: self.path().map(str::to_owned),
                object: self.object.to_string(),
                kind: self.kind.as_bytes().iter().map(|&b| b as char).collect(),
            }),
        }
    }
}

/// A repository the walk found, and what it packs of it.
struct GitDir {
    /// Its member path (`workspace/.git`).
    member: String,
    /// Where it is.
    path: PathBuf,
    /// Loose objects packed: id → member.
    loose: BTreeMap<ObjectId, String>,
    /// Indexes of cruft packs (unreachable objects only).
    cruft: Vec<PathBuf>,
    /// Indexes of every pack.
    packs: Vec<PathBuf>,
    /// Every pack's data file.
    pack_data: Vec<PathBuf>,
    /// Reflogs, `*_HEAD` files, worktree `HEAD` files: their ids are roots.
    root_files: Vec<PathBuf>,
    /// `FETCH_HEAD` and remote-tracking reflogs: what a remote had.
    remote_files: Vec<PathBuf>,
    /// Index files (the repository's and its worktrees').
    indexes: Vec<PathBuf>,
    /// Why it cannot be read safely, if so.
    unsafe_entry: Option<String>,
}

/// Scans every repository the walk found and holds what it finds to the
/// policy: refuses, or (`--secrets exclude`) leaves out of `walk` the
/// loose objects holding the secrets, or the repository when a secret is
/// packed or it could not be scanned. Returns the report's entries.
pub fn screen(
    workspace: &Path,
    walk: &mut Walk,
    policy: &SecretPolicy,
    mut cache: Option<&mut ScanCache<'_>>,
) -> Result<Vec<SecretReport>> {
    let dirs = git_dirs(workspace, walk);
    if dirs.is_empty() {
        return Ok(Vec::new());
    }
    // Past the packet's size the pack is refused before any file is
    // read; the history is not read either.
    if walk.listed_bytes() > packet_core::Limits::FORMAT.max_packet_bytes {
        return Ok(Vec::new());
    }
    let scanner = Scanner::new();
    let mut reports = Vec::new();
    let mut blocking: Vec<String> = Vec::new();
    let mut drop_members: Vec<(String, String, &'static str, String)> = Vec::new();
    for dir in &dirs {
        let key = cache.as_ref().map(|_| repository_key(dir, walk));
        let cached = match (&cache, &key) {
            (Some(c), Some((key, newest))) => c.find(key, *newest),
            _ => None,
        };
        let scanned = match cached {
            Some(hits) => Ok(hits),
            None => scan(dir, &scanner),
        };
        if let (Some(c), Some((key, _)), Ok(hits)) = (cache.as_mut(), &key, &scanned) {
            c.keep(*key, hits);
        }
        let hits = match scanned {
            Ok(hits) => hits,
            Err(why) => {
                if policy.mode == SecretsMode::Refuse {
                    return Err(why.refusal(&dir.member));
                }
                drop_members.push((
                    dir.member.clone(),
                    relative(&dir.member),
                    UNREADABLE_RULE,
                    format!("the git history could not be scanned for secrets ({}): the workspace travels without this repository", why.message()),
                ));
                continue;
            }
        };
        let mut stops: Vec<&Hit> = Vec::new();
        for hit in &hits {
            match exempt(hit, policy) {
                Some(action) => reports.push(hit.report(&dir.member, action)),
                None => stops.push(hit),
            }
        }
        if stops.is_empty() {
            continue;
        }
        if policy.mode == SecretsMode::Refuse {
            blocking.extend(stops.iter().map(|h| h.listed(&dir.member)));
            continue;
        }
        // Loose blobs can be left out alone: the repository keeps working
        // (status, log, every other object). A packed one, or a commit's
        // or tag's text, cannot: the repository is left out.
        // (A loose object may be packed as well: then leaving the file out
        // would not leave the secret out.)
        let packs = pack_indexes(dir);
        let loose: Option<Vec<&String>> = stops
            .iter()
            .map(|h| {
                let alone = h.kind == ObjectKind::Blob
                    && packs
                        .as_ref()
                        .is_some_and(|p| p.iter().all(|idx| idx.lookup(h.object).is_none()));
                alone.then(|| dir.loose.get(&h.object)).flatten()
            })
            .collect();
        match loose {
            Some(members) => {
                for (hit, member) in stops.iter().zip(members) {
                    drop_members.push((
                        member.clone(),
                        relative(member),
                        hit.rule.id,
                        format!(
                            "holds {} (line {}) of {}, which no remote has: left out, git reports the object missing",
                            hit.rule.what,
                            hit.line,
                            where_found(hit)
                        ),
                    ));
                }
            }
            None => {
                let first = stops
                    .iter()
                    .find(|h| h.kind != ObjectKind::Blob || !dir.loose.contains_key(&h.object))
                    .unwrap_or(&stops[0]);
                let stored = if first.kind == ObjectKind::Blob {
                    "in a pack"
                } else {
                    "in a commit's or tag's own text"
                };
                for hit in &stops {
                    drop_members.push((
                        dir.member.clone(),
                        relative(&dir.member),
                        hit.rule.id,
                        format!(
                            "its history holds {} (line {}) of {}, which no remote has, {stored}: the workspace travels without this repository",
                            first.rule.what,
                            first.line,
                            where_found(first)
                        ),
                    ));
                }
            }
        }
        reports.extend(stops.iter().map(|h| h.report(&dir.member, "excluded")));
    }
    if !blocking.is_empty() {
        return Err(Refused::SecretsInGitHistory { found: blocking }.into());
    }
    leave_out(walk, drop_members);
    Ok(reports)
}

/// Earlier scans' findings, kept in the workspace record by what they
/// read: a repository none of whose files changed (each with the stat
/// identity it had, none stamped near the start of the save that scanned
/// it) is not scanned again.
pub struct ScanCache<'r> {
    record: Option<&'r Record>,
    /// The verdicts of this pack, for the next record.
    pub verdicts: Vec<Verdict>,
}

impl<'r> ScanCache<'r> {
    /// A cache of `record`'s verdicts (none without a record).
    pub fn new(record: Option<&'r Record>) -> ScanCache<'r> {
        ScanCache {
            record,
            verdicts: Vec::new(),
        }
    }

    /// The record's hits for `key`, when its files' newest stamp is
    /// `newest` and that is not racy for the record.
    fn find(&self, key: &Digest, newest: i64) -> Option<Vec<Hit>> {
        let record = self.record?;
        let settled = newest < record.started.saturating_sub(RACY_MARGIN_NS);
        if !settled || !record.same_rules() {
            return None;
        }
        decode_hits(record.verdict(key)?)
    }

    fn keep(&mut self, key: Digest, hits: &[Hit]) {
        self.verdicts.push(Verdict {
            key,
            value: encode_hits(hits),
        });
    }
}

/// What a repository's scan read, digested: every member below its git
/// folder with its stat identity (a link's target), in member order; and
/// the newest timestamp among them.
fn repository_key(dir: &GitDir, walk: &Walk) -> (Digest, i64) {
    let below = format!("{}/", dir.member);
    let mut entries: Vec<(&str, String)> = Vec::new();
    let mut newest = i64::MIN;
    for p in &walk.planned {
        let m = p.member();
        if !m.starts_with(&below) {
            continue;
        }
        let what = match (p, p.identity()) {
            (_, Some(id)) => {
                newest = newest.max(id.mtime).max(id.ctime);
                format!("{id:?}")
            }
            (Planned::Symlink { target, .. }, _) => format!("link {target}"),
            (Planned::Dir { .. }, _) => "dir".to_owned(),
            _ => "file".to_owned(),
        };
        entries.push((m, what));
    }
    entries.sort_by(|a, b| packet_core::path::compare(a.0, b.0));
    let mut h = packet_core::Hasher::new();
    h.update(b"git history scan 1\n");
    h.update(dir.member.as_bytes());
    for (m, what) in &entries {
        h.update(format!("\n{m}\0{what}").as_bytes());
    }
    (h.finish(), newest)
}

/// Hits as a verdict's bytes: one line each, tab-separated.
fn encode_hits(hits: &[Hit]) -> Vec<u8> {
    let mut out = String::new();
    for h in hits {
        let kind = String::from_utf8_lossy(h.kind.as_bytes()).into_owned();
        let origin = match &h.origin {
            Origin::Commit { commit, path } => format!("commit\t{commit}\t{path}"),
            Origin::Message => "message\t\t".to_owned(),
            Origin::Index { path } => format!("index\t\t{path}"),
            Origin::Tree { path } => format!("tree\t\t{path}"),
            Origin::Unreachable => "unreachable\t\t".to_owned(),
        };
        out.push_str(&format!(
            "{}\t{kind}\t{origin}\t{}\t{}\t{}\n",
            h.object,
            h.line,
            h.rule.id,
            u8::from(h.on_remote)
        ));
    }
    out.into_bytes()
}

/// The hits of a verdict; `None` for anything this binary cannot read
/// back (then the repository is scanned).
fn decode_hits(bytes: &[u8]) -> Option<Vec<Hit>> {
    let text = std::str::from_utf8(bytes).ok()?;
    let mut hits = Vec::new();
    for line in text.lines() {
        let f: Vec<&str> = line.split('\t').collect();
        let [object, kind, origin, commit, path, number, rule, on_remote] = f[..] else {
            return None;
        };
        let object = ObjectId::from_hex(object.as_bytes()).ok()?;
        let origin = match origin {
            "commit" => Origin::Commit {
                commit: ObjectId::from_hex(commit.as_bytes()).ok()?,
                path: path.to_owned(),
            },
            "message" => Origin::Message,
            "index" => Origin::Index {
                path: path.to_owned(),
            },
            "tree" => Origin::Tree {
                path: path.to_owned(),
            },
            "unreachable" => Origin::Unreachable,
            _ => return None,
        };
        hits.push(Hit {
            object,
            kind: ObjectKind::from_bytes(kind.as_bytes()).ok()?,
            origin,
            line: number.parse().ok()?,
            rule: packet_core::secrets::SECRET_RULES
                .iter()
                .find(|r| r.id == rule)
                .copied()?,
            on_remote: on_remote == "1",
        });
    }
    Some(hits)
}

/// Removes from the walk each member (with what lies below it), recording
/// each rule and pattern once per member and the first reason given.
fn leave_out(walk: &mut Walk, drop: Vec<(String, String, &'static str, String)>) {
    if drop.is_empty() {
        return;
    }
    let mut shown: BTreeMap<String, ()> = BTreeMap::new();
    let mut recorded: BTreeMap<(String, &'static str), ()> = BTreeMap::new();
    for (member, pattern, rule, reason) in &drop {
        if recorded.insert((member.clone(), rule), ()).is_none() {
            walk.exclude(rule, pattern);
        }
        if shown.insert(member.clone(), ()).is_none() {
            walk.skipped.push(Skipped {
                path: member.clone(),
                rule: (*rule).to_owned(),
                reason: reason.clone(),
            });
        }
    }
    walk.planned.retain(|p| {
        let m = p.member();
        !shown.keys().any(|d| {
            m == d
                || (m.len() > d.len() && m.starts_with(d.as_str()) && m.as_bytes()[d.len()] == b'/')
        })
    });
}

/// The pack indexes of a repository (an index that does not decode
/// counts as none: the repository is then left out whole).
fn pack_indexes(dir: &GitDir) -> Option<Vec<gix::odb::pack::index::File>> {
    dir.packs
        .iter()
        .map(|p| gix::odb::pack::index::File::at(p, gix::hash::Kind::Sha1).ok())
        .collect()
}

/// The path below the root, as exclusion records name it.
fn relative(member: &str) -> String {
    member.split_once('/').map_or("", |(_, r)| r).to_owned()
}

fn where_found(hit: &Hit) -> String {
    match &hit.origin {
        Origin::Commit { commit, path } => {
            format!("{path} in commit {}", commit.to_hex_with_len(12))
        }
        Origin::Index { path } => format!("{path} in the index"),
        Origin::Tree { path } => format!("{path} in a tagged tree"),
        Origin::Message => format!("{} {}'s message", hit.kind, hit.object.to_hex_with_len(12)),
        Origin::Unreachable => format!(
            "the unreachable {} {}",
            hit.kind,
            hit.object.to_hex_with_len(12)
        ),
    }
}

/// Why a secret in history does not stop the pack, if it does not.
fn exempt(hit: &Hit, policy: &SecretPolicy) -> Option<&'static str> {
    if hit.on_remote {
        return Some("on-remote");
    }
    let path = hit.path()?;
    if policy.allow.iter().any(|g| exclude::glob_match(g, path)) {
        return Some("allowed");
    }
    let published = path
        .split('/')
        .any(|c| matches!(c, "node_modules" | "site-packages" | "dist-packages"));
    published.then_some("published")
}

/// The repositories among the walked folders: a folder holding a `HEAD`
/// file and `objects` and `refs` folders, as git recognises one. One pass
/// over the members, each looked at by its last components only (a
/// workspace of 250,000 files and no repository pays next to nothing).
fn git_dirs(workspace: &Path, walk: &Walk) -> Vec<GitDir> {
    let parent = |m: &str| m.rsplit_once('/').map(|(p, _)| p.to_owned());
    let mut heads: Vec<String> = Vec::new();
    let mut folders: std::collections::HashSet<String> = std::collections::HashSet::new();
    for p in &walk.planned {
        let m = p.member();
        let name = m.rsplit('/').next().unwrap_or(m);
        match p {
            Planned::Walked { .. } | Planned::Symlink { .. } if name == "HEAD" => {
                heads.extend(parent(m));
            }
            Planned::Dir { .. } if name == "objects" || name == "refs" => {
                folders.insert(m.to_owned());
            }
            _ => {}
        }
    }
    let mut found: BTreeMap<String, GitDir> = BTreeMap::new();
    for d in heads {
        let Some(rel) = Root::Workspace.below(&d) else {
            continue;
        };
        if folders.contains(&format!("{d}/objects")) && folders.contains(&format!("{d}/refs")) {
            let path = workspace.join(rel);
            found.insert(
                d.clone(),
                GitDir {
                    member: d,
                    path,
                    loose: BTreeMap::new(),
                    cruft: Vec::new(),
                    packs: Vec::new(),
                    pack_data: Vec::new(),
                    root_files: Vec::new(),
                    remote_files: Vec::new(),
                    indexes: Vec::new(),
                    unsafe_entry: None,
                },
            );
        }
    }
    if found.is_empty() {
        return Vec::new();
    }
    let specials = walk
        .skipped
        .iter()
        .filter(|s| s.rule == "special-file")
        .map(|s| (s.path.as_str(), None));
    let members = walk.planned.iter().map(|p| (p.member(), Some(p)));
    for (m, planned) in members.chain(specials) {
        // The nearest repository above: git's files lie at most a few
        // folders below it, and a repository nested in another's files
        // is one git never uses.
        let Some((dir, inner)) = owner(&found, m) else {
            continue;
        };
        let dir = found
            .get_mut(&dir)
            .unwrap_or_else(|| unreachable!("owner found it"));
        match planned {
            Some(Planned::Walked { .. }) => classify(dir, m, &inner),
            Some(Planned::Dir { .. }) => {}
            // A link or a special file where git reads would be followed
            // or waited on: such a repository is not read.
            _ if read_by_git(&inner) => {
                dir.unsafe_entry.get_or_insert_with(|| {
                    format!("{m} is a link or a special file, where git reads")
                });
            }
            _ => {}
        }
    }
    found.into_values().collect()
}

/// The repository `member` lies in, and its path there.
fn owner(found: &BTreeMap<String, GitDir>, member: &str) -> Option<(String, String)> {
    let mut at = member;
    while let Some((parent, _)) = at.rsplit_once('/') {
        if found.contains_key(parent) {
            return Some((parent.to_owned(), member[parent.len() + 1..].to_owned()));
        }
        at = parent;
    }
    None
}

/// Notes what a regular file of a repository is to the scan.
fn classify(dir: &mut GitDir, member: &str, inner: &str) {
    let file = dir.path.join(inner);
    let parts: Vec<&str> = inner.split('/').collect();
    match parts.as_slice() {
        ["objects", fan, rest] if fan.len() == 2 && rest.len() == 38 => {
            if let Ok(id) = ObjectId::from_hex(format!("{fan}{rest}").as_bytes()) {
                dir.loose.insert(id, member.to_owned());
            }
        }
        ["objects", "pack", name] if name.ends_with(".idx") => dir.packs.push(file),
        ["objects", "pack", name] if name.ends_with(".pack") => dir.pack_data.push(file),
        ["objects", "pack", name] if name.ends_with(".mtimes") => {
            let idx = format!("{}.idx", name.trim_end_matches(".mtimes"));
            dir.cruft.push(dir.path.join("objects/pack").join(idx));
        }
        ["index"] | ["worktrees", _, "index"] => dir.indexes.push(file),
        ["FETCH_HEAD"] | ["worktrees", _, "FETCH_HEAD"] => dir.remote_files.push(file),
        ["logs", "refs", "remotes", ..] => dir.remote_files.push(file),
        ["logs", ..] | ["worktrees", _, "logs", ..] => dir.root_files.push(file),
        [name] | ["worktrees", _, name] if name.ends_with("HEAD") => dir.root_files.push(file),
        _ => {}
    }
}

/// Whether git reads the file at this path below a git directory (the
/// hooks, `info/` and a submodule's own folder aside).
fn read_by_git(inner: &str) -> bool {
    let first = inner.split('/').next().unwrap_or(inner);
    matches!(
        first,
        "HEAD"
            | "config"
            | "commondir"
            | "packed-refs"
            | "index"
            | "shallow"
            | "refs"
            | "logs"
            | "objects"
            | "worktrees"
    ) || first.ends_with("_HEAD")
}

/// Why a repository could not be scanned.
#[derive(Debug)]
enum Unscannable {
    /// Git could not read it.
    Unreadable(String),
    /// It holds more than the scan reads.
    TooLarge(&'static str),
}

impl Unscannable {
    fn message(&self) -> String {
        match self {
            Unscannable::Unreadable(why) => why.clone(),
            Unscannable::TooLarge(what) => format!("more than {what}"),
        }
    }

    fn refusal(self, repository: &str) -> CliError {
        let repository = repository.to_owned();
        match self {
            Unscannable::Unreadable(why) => {
                Refused::GitHistoryUnreadable { repository, why }.into()
            }
            Unscannable::TooLarge(what) => Refused::GitHistoryTooLarge { repository, what }.into(),
        }
    }
}

fn unreadable(what: &str, e: impl std::fmt::Display) -> Unscannable {
    Unscannable::Unreadable(format!("{what}: {e}"))
}

/// What the scan has left to spend.
struct Budget {
    objects: u64,
    bytes: u64,
}

impl Budget {
    fn object(&mut self) -> Result<(), Unscannable> {
        self.objects = self
            .objects
            .checked_sub(1)
            .ok_or(Unscannable::TooLarge("4,000,000 objects"))?;
        Ok(())
    }

    fn bytes(&mut self, n: u64) -> Result<(), Unscannable> {
        self.bytes = self
            .bytes
            .checked_sub(n)
            .ok_or(Unscannable::TooLarge("4 GiB of objects"))?;
        Ok(())
    }
}

/// One repository's scan.
struct Scan<'a> {
    repo: gix::Repository,
    scanner: &'a Scanner,
    budget: Budget,
    /// Trees and blobs the remote side holds.
    remote: HashSet<ObjectId>,
    /// Objects already looked at.
    seen: HashSet<ObjectId>,
    buf: Vec<u8>,
    hits: Vec<Hit>,
}

fn scan(dir: &GitDir, scanner: &Scanner) -> Result<Vec<Hit>, Unscannable> {
    if let Some(why) = &dir.unsafe_entry {
        return Err(Unscannable::Unreadable(why.clone()));
    }
    // A pack whose index does not read is one git (and this scan) cannot
    // see into, though its bytes travel and `git index-pack` reads them.
    for data in &dir.pack_data {
        let idx = data.with_extension("idx");
        if let Err(e) = gix::odb::pack::index::File::at(&idx, gix::hash::Kind::Sha1) {
            return Err(Unscannable::Unreadable(format!(
                "{} has no index that reads ({e}): rebuild it with `git index-pack` or remove the pack",
                data.display()
            )));
        }
    }
    let options = gix::open::Options::isolated()
        .open_path_as_is(true)
        .config_overrides([
            // Untrusted sizes in objects and the index allocate no more
            // than the scan would read.
            format!("gitoxide.objects.allocLimit={}", MAX_BYTES),
            "core.deltaBaseCacheLimit=96m".to_owned(),
        ]);
    let mut repo =
        gix::open_opts(&dir.path, options).map_err(|e| unreadable("cannot open it", e))?;
    repo.object_cache_size(0);
    let mut scan = Scan {
        repo,
        scanner,
        budget: Budget {
            objects: MAX_OBJECTS,
            bytes: MAX_BYTES,
        },
        remote: HashSet::default(),
        seen: HashSet::default(),
        buf: Vec::new(),
        hits: Vec::new(),
    };
    scan.run(dir)?;
    Ok(scan.hits)
}

impl Scan<'_> {
    fn run(&mut self, dir: &GitDir) -> Result<(), Unscannable> {
        let (mut local, mut hidden): (Vec<ObjectId>, Vec<ObjectId>) = (Vec::new(), Vec::new());
        let references = self
            .repo
            .references()
            .map_err(|e| unreadable("cannot read its refs", e))?;
        let all = references
            .all()
            .map_err(|e| unreadable("cannot read its refs", e))?;
        for r in all {
            let r = r.map_err(|e| unreadable("cannot read a ref", e))?;
            let Some(id) = r.target().try_id().map(ToOwned::to_owned) else {
                continue;
            };
            if r.name().as_bstr().starts_with(b"refs/remotes/") {
                hidden.push(id);
            } else {
                local.push(id);
            }
        }
        for file in &dir.root_files {
            local.extend(ids_in(file)?);
        }
        for file in &dir.remote_files {
            hidden.extend(ids_in(file)?);
        }
        // Tags are peeled here: their text is scanned, their targets walked.
        let mut commits = Vec::new();
        let mut trees = Vec::new();
        let mut blobs = Vec::new();
        // Commits a ref or reflog names itself, not only through a tag.
        let mut named: HashSet<ObjectId> = HashSet::default();
        let mut queue: Vec<(ObjectId, bool)> = local.into_iter().map(|id| (id, true)).collect();
        while let Some((id, direct)) = queue.pop() {
            let Some(kind) = self.kind(id)? else { continue };
            match kind {
                ObjectKind::Commit => {
                    if direct {
                        named.insert(id);
                    }
                    commits.push(id);
                }
                ObjectKind::Tree => trees.push(id),
                ObjectKind::Blob => blobs.push(id),
                ObjectKind::Tag => {
                    if self.seen.insert(id) {
                        self.read(id)?;
                        let target =
                            gix::objs::TagRefIter::from_bytes(&self.buf, self.repo.object_hash())
                                .target_id()
                                .map_err(|e| unreadable("a tag does not decode", e))?;
                        self.scan_buffer(id, ObjectKind::Tag, Origin::Message, "");
                        queue.push((target, false));
                    }
                }
            }
        }
        let hidden: Vec<ObjectId> = hidden
            .into_iter()
            .filter(|id| matches!(self.kind(*id), Ok(Some(ObjectKind::Commit))))
            .collect();
        commits.sort();
        commits.dedup();
        let local_only = self.local_only(&commits, &hidden)?;
        // The remote side: the trees of the commits where local history
        // leaves remote history (and, below, of the remote-tracking tips).
        let local_set: HashSet<ObjectId> = local_only.iter().copied().collect();
        let mut edge: Vec<ObjectId> = Vec::new();
        for &c in &local_only {
            self.read(c)?;
            let parents: Vec<ObjectId> =
                gix::objs::CommitRefIter::from_bytes(&self.buf, self.repo.object_hash())
                    .parent_ids()
                    .collect();
            edge.extend(parents.into_iter().filter(|p| !local_set.contains(p)));
        }
        // Remote-held local tips (HEAD, branches, reflogs; not tags, which
        // reach far back and matter to nothing below): the index and the
        // loose objects are mostly theirs.
        for c in commits
            .iter()
            .filter(|c| !local_set.contains(*c) && named.contains(*c))
        {
            edge.push(*c);
        }
        edge.sort();
        edge.dedup();
        for c in edge {
            if let Some(tree) = self.tree_of(c)? {
                self.mark_remote(tree)?;
            }
        }
        // Oldest first, so that a blob is attributed to the commit that
        // brought it.
        for &c in local_only.iter().rev() {
            self.scan_commit(c)?;
        }
        for t in trees {
            self.scan_tree(t, None)?;
        }
        for b in blobs {
            self.scan_blob(b, Origin::Unreachable)?;
        }
        for index in &dir.indexes {
            self.scan_index(index)?;
        }
        // What nothing reached: loose objects and cruft packs. Fetched
        // objects are often loose: the remote-tracking tips' trees are
        // marked first, only then (a fresh clone has none of these).
        let mut stray: Vec<ObjectId> = dir.loose.keys().copied().collect();
        for idx in &dir.cruft {
            let file = gix::odb::pack::index::File::at(idx, self.repo.object_hash())
                .map_err(|e| unreadable("a cruft pack's index does not decode", e))?;
            stray.extend(file.iter().map(|e| e.oid));
        }
        stray.retain(|id| !self.seen.contains(id) && !self.remote.contains(id));
        if !stray.is_empty() {
            for &c in &hidden {
                if let Some(tree) = self.tree_of(c)? {
                    self.mark_remote(tree)?;
                }
            }
            stray.retain(|id| !self.remote.contains(id));
        }
        let (mut stray_commits, mut stray_blobs) = (Vec::new(), Vec::new());
        for id in stray {
            match self.kind(id)? {
                Some(ObjectKind::Commit) => stray_commits.push(id),
                Some(ObjectKind::Blob) => stray_blobs.push(id),
                Some(ObjectKind::Tag) if self.seen.insert(id) => {
                    self.read(id)?;
                    self.scan_buffer(id, ObjectKind::Tag, Origin::Message, "");
                }
                _ => {}
            }
        }
        // Loose commits no local root reaches (a branch deleted, a clone
        // from a local path, which copies the origin's loose objects):
        // those the remotes lack are scanned as commits, the others'
        // trees are the remote side.
        if !stray_commits.is_empty() {
            let theirs = self.local_only(&stray_commits, &hidden)?;
            let theirs_set: HashSet<ObjectId> = theirs.iter().copied().collect();
            for &c in stray_commits.iter().filter(|c| !theirs_set.contains(*c)) {
                if let Some(tree) = self.tree_of(c)? {
                    self.mark_remote(tree)?;
                }
            }
            for &c in theirs.iter().rev() {
                self.scan_commit(c)?;
            }
        }
        for id in stray_blobs {
            self.scan_blob(id, Origin::Unreachable)?;
        }
        if !self.hits.is_empty() {
            match self.settle_on_remote(&hidden) {
                // A remote history too large to walk in full: the findings
                // stand as local ones, named, rather than the scan as
                // unfinished.
                Err(Unscannable::TooLarge(_)) => {}
                settled => settled?,
            }
        }
        Ok(())
    }

    /// The commits `tips` reach that `hidden` do not, newest first.
    fn local_only(
        &mut self,
        tips: &[ObjectId],
        hidden: &[ObjectId],
    ) -> Result<Vec<ObjectId>, Unscannable> {
        if tips.is_empty() {
            return Ok(Vec::new());
        }
        let walk = self
            .repo
            .rev_walk(tips.iter().copied())
            .with_hidden(hidden.iter().copied())
            .sorting(gix::revision::walk::Sorting::ByCommitTime(
                Default::default(),
            ))
            .all()
            .map_err(|e| unreadable("cannot walk its commits", e))?;
        let mut out = Vec::new();
        for info in walk {
            let info = info.map_err(|e| unreadable("cannot walk its commits", e))?;
            self.budget.object()?;
            out.push(info.id);
        }
        Ok(out)
    }

    /// Marks a tree of the remote side and everything below it (blobs by
    /// id only).
    fn mark_remote(&mut self, tree: ObjectId) -> Result<(), Unscannable> {
        let mut stack = vec![tree];
        while let Some(t) = stack.pop() {
            if !self.remote.insert(t) {
                continue;
            }
            if !self.read_if_present(t)? {
                continue;
            }
            for entry in gix::objs::TreeRefIter::from_bytes(&self.buf, self.repo.object_hash()) {
                let entry = entry.map_err(|e| unreadable("a tree does not decode", e))?;
                if entry.mode.is_tree() {
                    if !self.remote.contains(entry.oid) {
                        stack.push(entry.oid.to_owned());
                    }
                } else if entry.mode.is_blob_or_symlink() {
                    self.remote.insert(entry.oid.to_owned());
                }
            }
        }
        Ok(())
    }

    /// Marks everything the remote-tracking refs reach, then tells each
    /// hit whether it lies there.
    fn settle_on_remote(&mut self, hidden: &[ObjectId]) -> Result<(), Unscannable> {
        if hidden.is_empty() {
            return Ok(());
        }
        let walk = self
            .repo
            .rev_walk(hidden.iter().copied())
            .all()
            .map_err(|e| unreadable("cannot walk its commits", e))?;
        let mut reached: HashSet<ObjectId> = HashSet::default();
        let mut commits = Vec::new();
        for info in walk {
            let info = info.map_err(|e| unreadable("cannot walk its commits", e))?;
            self.budget.object()?;
            commits.push(info.id);
        }
        for c in commits {
            reached.insert(c);
            if let Some(tree) = self.tree_of(c)? {
                self.mark_remote(tree)?;
            }
        }
        // A commit the remote has is not local history, whatever the walk
        // of local commits let through (it trusts commit times, as git's
        // does: a parent stamped later than its child, as skewed clocks
        // stamp them, can slip past the remote's side): what was found
        // first in its tree is the remote's, and no finding.
        self.hits.retain(|hit| match &hit.origin {
            Origin::Commit { commit, .. } => !reached.contains(commit),
            _ => true,
        });
        for hit in &mut self.hits {
            hit.on_remote = self.remote.contains(&hit.object) || reached.contains(&hit.object);
        }
        Ok(())
    }

    fn scan_commit(&mut self, c: ObjectId) -> Result<(), Unscannable> {
        if !self.seen.insert(c) || !self.read_if_present(c)? {
            return Ok(());
        }
        let tree = gix::objs::CommitRefIter::from_bytes(&self.buf, self.repo.object_hash())
            .tree_id()
            .map_err(|e| unreadable("a commit does not decode", e))?;
        self.scan_buffer(c, ObjectKind::Commit, Origin::Message, "");
        self.scan_tree(tree, Some(c))
    }

    /// Scans every blob below `tree` that the remote side lacks.
    fn scan_tree(&mut self, tree: ObjectId, commit: Option<ObjectId>) -> Result<(), Unscannable> {
        let mut stack = vec![(tree, String::new())];
        let mut blobs = Vec::new();
        while let Some((t, prefix)) = stack.pop() {
            if self.remote.contains(&t) || !self.seen.insert(t) || !self.read_if_present(t)? {
                continue;
            }
            for entry in gix::objs::TreeRefIter::from_bytes(&self.buf, self.repo.object_hash()) {
                let entry = entry.map_err(|e| unreadable("a tree does not decode", e))?;
                let id = entry.oid.to_owned();
                if self.remote.contains(&id) || self.seen.contains(&id) {
                    continue;
                }
                let path = format!("{prefix}{}", String::from_utf8_lossy(entry.filename));
                if entry.mode.is_tree() {
                    stack.push((id, format!("{path}/")));
                } else if entry.mode.is_blob_or_symlink() {
                    blobs.push((id, path));
                }
            }
            for (id, path) in blobs.drain(..) {
                let origin = match commit {
                    Some(commit) => Origin::Commit { commit, path },
                    None => Origin::Tree { path },
                };
                self.scan_blob(id, origin)?;
            }
        }
        Ok(())
    }

    fn scan_index(&mut self, path: &Path) -> Result<(), Unscannable> {
        let options = gix::index::decode::Options {
            alloc_limit_bytes: Some(MAX_BYTES as usize),
            ..Default::default()
        };
        let index = gix::index::File::at(path, self.repo.object_hash(), false, options)
            .map_err(|e| unreadable("its index does not decode", e))?;
        for entry in index.entries() {
            if entry.mode.is_submodule()
                || self.remote.contains(&entry.id)
                || self.seen.contains(&entry.id)
            {
                continue;
            }
            let path = String::from_utf8_lossy(entry.path(&index)).into_owned();
            self.scan_blob(entry.id, Origin::Index { path })?;
        }
        Ok(())
    }

    fn scan_blob(&mut self, id: ObjectId, origin: Origin) -> Result<(), Unscannable> {
        if self.remote.contains(&id) || !self.seen.insert(id) || !self.read_if_present(id)? {
            return Ok(());
        }
        let path = match &origin {
            Origin::Commit { path, .. } | Origin::Index { path } | Origin::Tree { path } => {
                path.clone()
            }
            _ => String::new(),
        };
        self.scan_buffer(id, ObjectKind::Blob, origin, &path);
        Ok(())
    }

    /// Runs the detector over the object just read.
    fn scan_buffer(&mut self, id: ObjectId, kind: ObjectKind, origin: Origin, path: &str) {
        let findings: Vec<Finding> = self.scanner.scan(path, &self.buf);
        self.hits.extend(findings.into_iter().map(|f| Hit {
            object: id,
            kind,
            origin: origin.clone(),
            line: f.line,
            rule: f.rule,
            on_remote: false,
        }));
    }

    fn tree_of(&mut self, commit: ObjectId) -> Result<Option<ObjectId>, Unscannable> {
        if !self.read_if_present(commit)? {
            return Ok(None);
        }
        gix::objs::CommitRefIter::from_bytes(&self.buf, self.repo.object_hash())
            .tree_id()
            .map(Some)
            .map_err(|e| unreadable("a commit does not decode", e))
    }

    /// The kind of an object, if the repository has it.
    fn kind(&mut self, id: ObjectId) -> Result<Option<ObjectKind>, Unscannable> {
        self.budget.object()?;
        let header = self
            .repo
            .objects
            .try_header(&id)
            .map_err(|e| unreadable(&format!("object {id} cannot be read"), e))?;
        Ok(header.map(|h| h.kind()))
    }

    fn read(&mut self, id: ObjectId) -> Result<(), Unscannable> {
        if self.read_if_present(id)? {
            Ok(())
        } else {
            Err(Unscannable::Unreadable(format!("object {id} is missing")))
        }
    }

    /// Reads an object into the buffer, within the budget; false if the
    /// repository lacks it (a shallow or partial clone's, or one git would
    /// report missing: nothing that could travel).
    fn read_if_present(&mut self, id: ObjectId) -> Result<bool, Unscannable> {
        self.budget.object()?;
        let what = || format!("object {id} cannot be read");
        let Some(header) = self
            .repo
            .objects
            .try_header(&id)
            .map_err(|e| unreadable(&what(), e))?
        else {
            return Ok(false);
        };
        self.budget.bytes(header.size())?;
        let found = self
            .repo
            .objects
            .try_find(&id, &mut self.buf)
            .map_err(|e| unreadable(&what(), e))?;
        Ok(found.is_some())
    }
}

/// The object ids at the start of each line of a reflog or a `*_HEAD`
/// file (a reflog line holds the old and the new id).
fn ids_in(path: &Path) -> Result<Vec<ObjectId>, Unscannable> {
    let text = std::fs::read(path)
        .map_err(|e| unreadable(&format!("cannot read {}", path.display()), e))?;
    let mut out = Vec::new();
    for line in text.split(|&b| b == b'\n') {
        for word in line.split(|&b| b == b' ' || b == b'\t').take(2) {
            if word.len() == 40 {
                if let Ok(id) = ObjectId::from_hex(word) {
                    if !id.is_null() {
                        out.push(id);
                    }
                }
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leaving_a_git_directory_out_keeps_its_neighbours() {
        let mut walk = Walk::default();
        for m in [
            "workspace",
            "workspace/.git",
            "workspace/.git/HEAD",
            "workspace/.github",
            "workspace/.github/ci.yml",
            "workspace/.gitignore",
        ] {
            walk.planned.push(Planned::Dir { member: m.into() });
        }
        leave_out(
            &mut walk,
            vec![(
                "workspace/.git".into(),
                ".git".into(),
                "openai-api-key",
                "why".into(),
            )],
        );
        let kept: Vec<&str> = walk.planned.iter().map(Planned::member).collect();
        assert_eq!(
            kept,
            [
                "workspace",
                "workspace/.github",
                "workspace/.github/ci.yml",
                "workspace/.gitignore"
            ]
        );
        assert_eq!(walk.skipped.len(), 1);
        assert_eq!(walk.exclusion_records()[0].pattern, ".git");
    }

    #[test]
    fn ids_are_read_from_reflogs_and_head_files() {
        let t = tempfile::tempdir().unwrap();
        let a = "1".repeat(40);
        let b = "2".repeat(40);
        let log = t.path().join("HEAD");
        std::fs::write(
            &log,
            format!(
                "{} {a} A <a@x> 1 +0000\tclone\n{a} {b} A <a@x> 2 +0000\tcommit: x {b}\n",
                "0".repeat(40)
            ),
        )
        .unwrap();
        let ids: Vec<String> = ids_in(&log)
            .unwrap()
            .iter()
            .map(ToString::to_string)
            .collect();
        // The null id of a first entry is no object; an id in a message is
        // not read.
        assert_eq!(ids, [a.clone(), a.clone(), b.clone()]);
        std::fs::write(&log, format!("{b}\t\tbranch 'main' of /x\n")).unwrap();
        assert_eq!(ids_in(&log).unwrap().len(), 1);
    }

    #[test]
    fn the_budget_stops_the_scan_at_its_bounds() {
        let mut budget = Budget {
            objects: 2,
            bytes: 10,
        };
        assert!(budget.object().is_ok() && budget.object().is_ok());
        assert!(matches!(budget.object(), Err(Unscannable::TooLarge(_))));
        assert!(budget.bytes(10).is_ok());
        assert!(matches!(budget.bytes(1), Err(Unscannable::TooLarge(_))));
    }

    #[test]
    fn what_git_reads_below_its_directory() {
        for p in [
            "HEAD",
            "config",
            "packed-refs",
            "refs/heads/main",
            "objects/pack/x.pack",
            "ORIG_HEAD",
            "worktrees/a/HEAD",
        ] {
            assert!(read_by_git(p), "{p}");
        }
        for p in [
            "hooks/pre-commit",
            "info/exclude",
            "description",
            "modules/lib/HEAD",
            "lfs/objects/x",
        ] {
            assert!(!read_by_git(p), "{p}");
        }
    }
}
