//! The workspace record (docs/cli.md, "The workspace record"): the last
//! checkpoint saved or restored in a workspace, and what each of its files
//! was when it was hashed or written, so that the next `save` reads only
//! what changed and knows exactly what the store lacks.
//!
//! One file per workspace under `$XDG_STATE_HOME/pillbox/workspaces/`
//! (else `~/.local/state/pillbox/workspaces/`), outside the workspace:
//! nothing of it enters a packet, and a restore into the folder never
//! meets it. It is named by the SHA-256 of the workspace's canonical path
//! and holds the root's device and inode, so a different folder at the
//! same path is not taken for it. [`Held`] is the exclusive lock (flock)
//! a save or a restore holds from before it reads the record until after
//! it wrote the next one; the file is written to a temporary file and
//! renamed over the last one.
//!
//! What may be trusted: a file whose stat identity ([`Identity`]: size,
//! mtime and ctime in nanoseconds, inode, device, mode) is what the record
//! holds, and whose timestamps are older than the record's start by
//! [`RACY_MARGIN`], has the recorded sha256 (and, under the same detector
//! rules, [`rules_fingerprint`], the recorded findings). Any write to a
//! file moves its ctime to the current time, and no user can set a ctime
//! back: a file rewritten with its mtime restored is seen as changed. A
//! record that is unreadable, damaged (its checksum), of another version,
//! or of another folder is ignored and replaced, never trusted.

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use packet_core::secrets::{Finding, SECRET_RULES};
use packet_core::{Body, Digest, Hasher};
use pillbox_wire::recipes::ChunkName;

use crate::error::{CliError, Result};
use crate::walk::FileId;
pub use crate::walk::Identity;

/// The first bytes of a record file.
const MAGIC: &[u8; 8] = b"PBWSREC1";

/// Files whose mtime or ctime is this close to the record's start (or
/// after it) are hashed again on the next save ("racy" entries). A file
/// system stamps files from a coarse clock (the kernel's tick, a few
/// milliseconds), some keep only whole seconds or two (FAT's mtime), and a
/// network file system stamps them with its server's clock: a file
/// rewritten just after it was hashed can keep the very timestamps it had.
/// Anything stamped within 2 s of the start is therefore not taken on
/// trust; older files cannot have been written after the hash without a
/// ctime later than the start.
pub const RACY_MARGIN_NS: i64 = 2_000_000_000;

impl Identity {
    /// Whether either timestamp is within [`RACY_MARGIN_NS`] of `started`
    /// or after it: the file may have changed since it was hashed without
    /// its timestamps showing it.
    pub fn is_racy(&self, started: i64) -> bool {
        let edge = started.saturating_sub(RACY_MARGIN_NS);
        self.mtime >= edge || self.ctime >= edge
    }
}

/// Nanoseconds since the Unix epoch, now.
pub fn now_ns() -> i64 {
    match SystemTime::now().duration_since(UNIX_EPOCH) {
        Ok(d) => i64::try_from(d.as_nanos()).unwrap_or(i64::MAX),
        Err(_) => 0,
    }
}

/// The folder of workspace records: `$XDG_STATE_HOME/pillbox/workspaces`,
/// else `$HOME/.local/state/pillbox/workspaces`.
pub fn default_dir() -> Result<PathBuf> {
    let base = match std::env::var_os("XDG_STATE_HOME").filter(|v| !v.is_empty()) {
        Some(d) => PathBuf::from(d),
        None => match std::env::var_os("HOME").filter(|v| !v.is_empty()) {
            Some(h) => PathBuf::from(h).join(".local/state"),
            None => {
                return Err(CliError::Usage(
                    "neither XDG_STATE_HOME nor HOME is set: cannot keep the workspace record"
                        .into(),
                ))
            }
        },
    };
    Ok(base.join("pillbox/workspaces"))
}

/// The detector and exclusion rules of this binary, as one digest: a
/// record written under other rules keeps its digests but not its
/// findings (every file is screened again). The detector's code changes
/// only with the version, which is part of it.
pub fn rules_fingerprint() -> Digest {
    let mut h = Hasher::new();
    h.update(b"pillbox screening\n");
    h.update(env!("CARGO_PKG_VERSION").as_bytes());
    for r in SECRET_RULES {
        h.update(format!("\nsecret {} {}", r.id, r.what).as_bytes());
    }
    for r in packet_core::exclude::CREDENTIAL_RULES {
        h.update(format!("\ncredential {r:?}").as_bytes());
    }
    h.finish()
}

/// One secret the detector found in a file, as the record keeps it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeptFinding {
    /// The line.
    pub line: u64,
    /// The rule's id.
    pub rule: String,
}

impl KeptFinding {
    /// As the record keeps `f`.
    pub fn of(f: &Finding) -> KeptFinding {
        KeptFinding {
            line: f.line,
            rule: f.rule.id.to_owned(),
        }
    }

    /// The finding again (`None`: a rule this binary does not have).
    pub fn finding(&self) -> Option<Finding> {
        SECRET_RULES
            .iter()
            .find(|r| r.id == self.rule)
            .map(|rule| Finding {
                rule,
                line: self.line,
            })
    }
}

/// One file member of the record's checkpoint.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileEntry {
    /// Its member path.
    pub member: String,
    /// The file as it was hashed or written.
    pub identity: Identity,
    /// The sha256 of its bytes then.
    pub sha256: Digest,
    /// What the detector found in it, when it was screened (`None`: not
    /// screened, e.g. written by a restore).
    pub findings: Option<Vec<KeptFinding>>,
}

/// A large body's chunks as the store holds them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BodyChunks {
    /// The body.
    pub body: Body,
    /// Its chunks, in order.
    pub chunks: Vec<ChunkName>,
}

/// A cached verdict of a costly scan (the git history of a repository),
/// valid while whatever `key` digests is unchanged.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Verdict {
    /// What the verdict depends on, digested.
    pub key: Digest,
    /// The verdict, in its producer's encoding.
    pub value: Vec<u8>,
}

/// The last checkpoint saved or restored in a workspace.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    /// The workspace's canonical path.
    pub workspace: PathBuf,
    /// Its root folder's device and inode.
    pub root: FileId,
    /// The store's base URL.
    pub store: String,
    /// The ref saved to or restored from, if any.
    pub ref_name: Option<String>,
    /// The checkpoint.
    pub digest: Digest,
    /// Its exact `packet.json`.
    pub json: Vec<u8>,
    /// The harness homes used (kind, folder).
    pub harness_homes: Vec<(String, PathBuf)>,
    /// When the save or restore that wrote it started, ns since the epoch.
    pub started: i64,
    /// The rules the findings were made under ([`rules_fingerprint`]).
    pub rules: Digest,
    /// Every file member of the checkpoint, in packet order.
    pub files: Vec<FileEntry>,
    /// The large bodies' chunks, where known.
    pub recipes: Vec<BodyChunks>,
    /// Cached verdicts.
    pub verdicts: Vec<Verdict>,
}

/// What [`Record::check`] says of a file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Seen<'r> {
    /// Unchanged since the record: its sha256 (and findings) hold.
    Unchanged(&'r FileEntry),
    /// Its identity is the recorded one, but it was stamped too close to
    /// the record's start to be sure: hash it.
    Racy(&'r FileEntry),
    /// Changed since (another identity): hash it.
    Changed(&'r FileEntry),
    /// Not in the record: hash it.
    New,
}

/// Lookups in packet order ([`Record::in_order`]).
pub struct InOrder<'r> {
    record: &'r Record,
    at: usize,
}

impl<'r> InOrder<'r> {
    /// What the record says of `member`, whose file is `now`; `member`
    /// comes after the one asked about before (else it is looked up
    /// anew).
    pub fn check(&mut self, member: &str, now: &Identity) -> Seen<'r> {
        let files = &self.record.files;
        let back = self
            .at
            .checked_sub(1)
            .and_then(|i| files.get(i))
            .is_some_and(|e| packet_core::path::compare(&e.member, member).is_gt());
        if back {
            return self.record.check(member, now);
        }
        while self
            .at
            .lt(&files.len())
            .then(|| packet_core::path::compare(&files[self.at].member, member))
            .is_some_and(|o| o.is_lt())
        {
            self.at += 1;
        }
        let entry = files.get(self.at).filter(|e| e.member == member);
        if entry.is_some() {
            self.at += 1;
        }
        self.record.seen(entry, now)
    }
}

/// How a folder differs from its record ([`Record::compare`]): indices
/// into the list compared, and the record's files that are gone.
// What an in-place restore asks of the record before it fetches anything.
#[allow(dead_code)]
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Comparison {
    /// Unchanged files.
    pub unchanged: Vec<usize>,
    /// Files with the recorded identity but stamped too close to the
    /// record's start: to hash.
    pub racy: Vec<usize>,
    /// Files whose identity changed: to hash.
    pub changed: Vec<usize>,
    /// Files the record does not have.
    pub added: Vec<usize>,
    /// The record's files not in the list (member paths).
    pub removed: Vec<String>,
}

impl Record {
    /// What the record says of `member`, whose file is `now`.
    pub fn check(&self, member: &str, now: &Identity) -> Seen<'_> {
        self.seen(self.file(member), now)
    }

    fn seen<'r>(&'r self, entry: Option<&'r FileEntry>, now: &Identity) -> Seen<'r> {
        match entry {
            None => Seen::New,
            Some(e) if e.identity != *now => Seen::Changed(e),
            Some(e) if now.is_racy(self.started) => Seen::Racy(e),
            Some(e) => Seen::Unchanged(e),
        }
    }

    /// [`Record::check`] for files asked about in packet order: each
    /// lookup goes on from the last (one pass over the record for a whole
    /// walk).
    pub fn in_order(&self) -> InOrder<'_> {
        InOrder {
            record: self,
            at: 0,
        }
    }

    /// The record's entry for `member`.
    pub fn file(&self, member: &str) -> Option<&FileEntry> {
        self.files
            .binary_search_by(|e| packet_core::path::compare(&e.member, member))
            .ok()
            .map(|i| &self.files[i])
    }

    /// Compares a folder's files (member path and identity, any order)
    /// with the record: what an in-place restore needs before it fetches
    /// anything.
    #[allow(dead_code)]
    pub fn compare(&self, files: &[(String, Identity)]) -> Comparison {
        let mut out = Comparison::default();
        let mut present = std::collections::HashSet::new();
        for (i, (member, identity)) in files.iter().enumerate() {
            match self.check(member, identity) {
                Seen::Unchanged(_) => out.unchanged.push(i),
                Seen::Racy(_) => out.racy.push(i),
                Seen::Changed(_) => out.changed.push(i),
                Seen::New => out.added.push(i),
            }
            present.insert(member.as_str());
        }
        out.removed = self
            .files
            .iter()
            .filter(|e| !present.contains(e.member.as_str()))
            .map(|e| e.member.clone())
            .collect();
        out
    }

    /// Whether findings recorded under its rules hold for this binary.
    pub fn same_rules(&self) -> bool {
        self.rules == rules_fingerprint()
    }

    /// The chunks of large body `body`, if known.
    pub fn recipe(&self, body: &Body) -> Option<&[ChunkName]> {
        self.recipes
            .binary_search_by(|r| r.body.cmp(body))
            .ok()
            .map(|i| &self.recipes[i].chunks[..])
    }

    /// A cached verdict.
    pub fn verdict(&self, key: &Digest) -> Option<&[u8]> {
        self.verdicts
            .iter()
            .find(|v| v.key == *key)
            .map(|v| &v.value[..])
    }

    /// Puts the lists in the order lookups expect (files by member path,
    /// recipes by body).
    pub fn sort(&mut self) {
        self.files
            .sort_by(|a, b| packet_core::path::compare(&a.member, &b.member));
        self.recipes.sort_by_key(|a| a.body);
        self.recipes.dedup_by(|a, b| a.body == b.body);
    }

    fn encode(&self) -> Vec<u8> {
        let mut w = Out::default();
        w.bytes(self.workspace.as_os_str().as_encoded_bytes());
        w.u64(self.root.dev);
        w.u64(self.root.ino);
        w.bytes(self.store.as_bytes());
        w.opt(self.ref_name.as_deref());
        w.raw(&self.digest.0);
        w.bytes(&self.json);
        w.u32(self.harness_homes.len() as u32);
        for (kind, home) in &self.harness_homes {
            w.bytes(kind.as_bytes());
            w.bytes(home.as_os_str().as_encoded_bytes());
        }
        w.i64(self.started);
        w.raw(&self.rules.0);
        w.u32(self.files.len() as u32);
        let mut previous: &[u8] = b"";
        for e in &self.files {
            // Paths in packet order share long prefixes: each is kept as
            // the length it shares with the one before and the rest.
            let path = e.member.as_bytes();
            let shared = previous
                .iter()
                .zip(path)
                .take_while(|(a, b)| a == b)
                .count();
            w.u32(shared as u32);
            w.bytes(&path[shared..]);
            previous = path;
            let id = &e.identity;
            w.u64(id.size);
            w.i64(id.mtime);
            w.i64(id.ctime);
            w.u64(id.ino);
            w.u64(id.dev);
            w.u32(id.mode);
            w.raw(&e.sha256.0);
            match &e.findings {
                None => w.u32(u32::MAX),
                Some(list) => {
                    w.u32(list.len() as u32);
                    for f in list {
                        w.u64(f.line);
                        w.bytes(f.rule.as_bytes());
                    }
                }
            }
        }
        w.u32(self.recipes.len() as u32);
        for r in &self.recipes {
            w.raw(&r.body.sha256.0);
            w.u64(r.body.size);
            w.u32(r.chunks.len() as u32);
            for c in &r.chunks {
                w.raw(&c.sha256.0);
                w.u32(c.size);
            }
        }
        w.u32(self.verdicts.len() as u32);
        for v in &self.verdicts {
            w.raw(&v.key.0);
            w.bytes(&v.value);
        }
        w.0
    }

    fn decode(bytes: &[u8]) -> Option<Record> {
        let mut r = In(bytes);
        let workspace = PathBuf::from(r.string()?);
        let root = FileId {
            dev: r.u64()?,
            ino: r.u64()?,
        };
        let store = r.string()?;
        let ref_name = r.opt()?;
        let digest = r.digest()?;
        let json = r.bytes()?.to_vec();
        let homes = r.u32()?;
        let mut harness_homes = Vec::new();
        for _ in 0..homes {
            harness_homes.push((r.string()?, PathBuf::from(r.string()?)));
        }
        let started = r.i64()?;
        let rules = r.digest()?;
        let n = r.u32()? as usize;
        // Each entry takes at least 80 bytes: a count past what is left is
        // a damaged record, not an allocation.
        if n > r.0.len() / 80 + 1 {
            return None;
        }
        let mut files = Vec::with_capacity(n);
        let mut previous: Vec<u8> = Vec::new();
        for _ in 0..n {
            let shared = r.u32()? as usize;
            let rest = r.bytes()?;
            let mut path = previous.get(..shared)?.to_vec();
            path.extend_from_slice(rest);
            let member = String::from_utf8(path.clone()).ok()?;
            previous = path;
            let identity = Identity {
                size: r.u64()?,
                mtime: r.i64()?,
                ctime: r.i64()?,
                ino: r.u64()?,
                dev: r.u64()?,
                mode: r.u32()?,
            };
            let sha256 = r.digest()?;
            let count = r.u32()?;
            let findings = if count == u32::MAX {
                None
            } else {
                let mut list = Vec::new();
                for _ in 0..count {
                    list.push(KeptFinding {
                        line: r.u64()?,
                        rule: r.string()?,
                    });
                }
                Some(list)
            };
            files.push(FileEntry {
                member,
                identity,
                sha256,
                findings,
            });
        }
        let n = r.u32()?;
        let mut recipes = Vec::new();
        for _ in 0..n {
            let body = Body {
                sha256: r.digest()?,
                size: r.u64()?,
            };
            let count = r.u32()? as usize;
            if count > r.0.len() / 36 {
                return None;
            }
            let mut chunks = Vec::with_capacity(count);
            for _ in 0..count {
                chunks.push(ChunkName {
                    sha256: r.digest()?,
                    size: r.u32()?,
                });
            }
            recipes.push(BodyChunks { body, chunks });
        }
        let n = r.u32()?;
        let mut verdicts = Vec::new();
        for _ in 0..n {
            verdicts.push(Verdict {
                key: r.digest()?,
                value: r.bytes()?.to_vec(),
            });
        }
        if !r.0.is_empty() {
            return None;
        }
        let mut record = Record {
            workspace,
            root,
            store,
            ref_name,
            digest,
            json,
            harness_homes,
            started,
            rules,
            files,
            recipes,
            verdicts,
        };
        record.sort();
        Some(record)
    }
}

/// The record file of the workspace whose canonical path is `workspace`.
fn record_path(dir: &Path, workspace: &Path) -> PathBuf {
    let key = Digest::of(workspace.as_os_str().as_encoded_bytes());
    dir.join(format!("{}.record", &key.hex().to_string()[..32]))
}

/// The workspace's record lock, held: a save or restore holds it from
/// before it loads the record until it wrote the next one (the process
/// ending releases it).
pub struct Held {
    path: PathBuf,
    workspace: PathBuf,
    _lock: File,
}

impl Held {
    /// Waits for the lock of the workspace whose canonical path is
    /// `workspace`, records kept in `dir`.
    pub fn acquire(dir: &Path, workspace: &Path) -> Result<Held> {
        fs::create_dir_all(dir).map_err(|e| CliError::io("create", dir, e))?;
        let path = record_path(dir, workspace);
        let lock_path = path.with_extension("lock");
        let f = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
            .map_err(|e| CliError::io("open", &lock_path, e))?;
        rustix::fs::flock(&f, rustix::fs::FlockOperation::LockExclusive)
            .map_err(|e| CliError::io("lock", &lock_path, e.into()))?;
        Ok(Held {
            path,
            workspace: workspace.to_path_buf(),
            _lock: f,
        })
    }

    /// The record file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The record of this workspace, if there is a sound one for the
    /// folder whose root is `root` now; anything else is `None` (and is
    /// replaced by the next [`Held::write`]).
    pub fn load(&self, root: FileId) -> Option<Record> {
        let bytes = fs::read(&self.path).ok()?;
        let record = decode_file(&bytes)?;
        (record.workspace == self.workspace && record.root == root).then_some(record)
    }

    /// Writes `record` in place of the last one, atomically.
    pub fn write(&self, record: &Record) -> Result<()> {
        let bytes = encode_file(record)?;
        let dir = self.path.parent().unwrap_or(Path::new("."));
        let mut tmp = tempfile::Builder::new()
            .prefix(".record-")
            .tempfile_in(dir)
            .map_err(|e| CliError::io("create a file in", dir, e))?;
        let tmp_path = tmp.path().to_path_buf();
        tmp.write_all(&bytes)
            .map_err(|e| CliError::io("write", &tmp_path, e))?;
        tmp.persist(&self.path)
            .map_err(|e| CliError::io("rename into", &self.path, e.error))?;
        Ok(())
    }
}

/// The file's bytes: magic, the SHA-256 of the compressed payload, the
/// payload (zstd).
fn encode_file(record: &Record) -> Result<Vec<u8>> {
    let payload = record.encode();
    let compressed = zstd::bulk::compress(&payload, 1)
        .map_err(|e| CliError::Bug(format!("zstd refused the workspace record: {e}")))?;
    let mut out = Vec::with_capacity(8 + 8 + 32 + compressed.len());
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&(payload.len() as u64).to_be_bytes());
    out.extend_from_slice(&Digest::of(&compressed).0);
    out.extend_from_slice(&compressed);
    Ok(out)
}

/// The most a record's payload may take (a 16 GiB packet of 250,000
/// members has a manifest of at most 64 MiB).
const MAX_PAYLOAD: u64 = 1 << 30;

fn decode_file(bytes: &[u8]) -> Option<Record> {
    let rest = bytes.strip_prefix(MAGIC)?;
    let (len, rest) = rest.split_at_checked(8)?;
    let len = u64::from_be_bytes(len.try_into().ok()?);
    let (sum, compressed) = rest.split_at_checked(32)?;
    if len > MAX_PAYLOAD || Digest::of(compressed).0[..] != *sum {
        return None;
    }
    let payload = zstd::bulk::decompress(compressed, len as usize).ok()?;
    if payload.len() as u64 != len {
        return None;
    }
    Record::decode(&payload)
}

/// A record's fields as written.
#[derive(Default)]
struct Out(Vec<u8>);

impl Out {
    fn raw(&mut self, b: &[u8]) {
        self.0.extend_from_slice(b);
    }
    fn u32(&mut self, v: u32) {
        self.raw(&v.to_be_bytes());
    }
    fn u64(&mut self, v: u64) {
        self.raw(&v.to_be_bytes());
    }
    fn i64(&mut self, v: i64) {
        self.raw(&v.to_be_bytes());
    }
    fn bytes(&mut self, b: &[u8]) {
        self.u32(b.len() as u32);
        self.raw(b);
    }
    fn opt(&mut self, s: Option<&str>) {
        match s {
            None => self.u32(u32::MAX),
            Some(s) => self.bytes(s.as_bytes()),
        }
    }
}

/// A record's fields as read: every read checks what is left.
struct In<'a>(&'a [u8]);

impl<'a> In<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let (a, b) = self.0.split_at_checked(n)?;
        self.0 = b;
        Some(a)
    }
    fn u32(&mut self) -> Option<u32> {
        Some(u32::from_be_bytes(self.take(4)?.try_into().ok()?))
    }
    fn u64(&mut self) -> Option<u64> {
        Some(u64::from_be_bytes(self.take(8)?.try_into().ok()?))
    }
    fn i64(&mut self) -> Option<i64> {
        Some(i64::from_be_bytes(self.take(8)?.try_into().ok()?))
    }
    fn digest(&mut self) -> Option<Digest> {
        Some(Digest(self.take(32)?.try_into().ok()?))
    }
    fn bytes(&mut self) -> Option<&'a [u8]> {
        let n = self.u32()? as usize;
        self.take(n)
    }
    fn string(&mut self) -> Option<String> {
        String::from_utf8(self.bytes()?.to_vec()).ok()
    }
    fn opt(&mut self) -> Option<Option<String>> {
        let n = self.u32()?;
        if n == u32::MAX {
            return Some(None);
        }
        Some(Some(
            String::from_utf8(self.take(n as usize)?.to_vec()).ok()?,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn identity(size: u64, mtime: i64, ctime: i64) -> Identity {
        Identity {
            size,
            mtime,
            ctime,
            ino: 7,
            dev: 1,
            mode: 0o100644,
        }
    }

    fn sample() -> Record {
        let mut r = Record {
            workspace: PathBuf::from("/w/ork space"),
            root: FileId { dev: 1, ino: 2 },
            store: "http://127.0.0.1:8787".into(),
            ref_name: Some("sessions/a/latest".into()),
            digest: Digest::of(b"packet.json"),
            json: b"{\"format\":\"x\"}".to_vec(),
            harness_homes: vec![("codex".into(), PathBuf::from("/h/.codex"))],
            started: 1_000_000_000_000,
            rules: rules_fingerprint(),
            files: vec![
                FileEntry {
                    member: "workspace/src/b.rs".into(),
                    identity: identity(3, 10, 11),
                    sha256: Digest::of(b"b"),
                    findings: Some(vec![]),
                },
                FileEntry {
                    member: "workspace/src/a.rs".into(),
                    identity: identity(5, 12, 13),
                    sha256: Digest::of(b"a"),
                    findings: Some(vec![KeptFinding {
                        line: 3,
                        rule: "github-token".into(),
                    }]),
                },
                FileEntry {
                    member: "workspace/z".into(),
                    identity: identity(0, 1, 1),
                    sha256: Digest::EMPTY,
                    findings: None,
                },
            ],
            recipes: vec![BodyChunks {
                body: Body {
                    sha256: Digest::of(b"large"),
                    size: 300_000,
                },
                chunks: vec![ChunkName {
                    sha256: Digest::of(b"c"),
                    size: 300_000,
                }],
            }],
            verdicts: vec![Verdict {
                key: Digest::of(b"repo"),
                value: b"clean".to_vec(),
            }],
        };
        r.sort();
        r
    }

    #[test]
    fn a_record_round_trips_and_a_damaged_one_is_ignored() {
        let t = tempfile::tempdir().unwrap();
        let r = sample();
        let held = Held::acquire(t.path(), &r.workspace).unwrap();
        assert_eq!(held.load(r.root), None);
        held.write(&r).unwrap();
        assert_eq!(held.load(r.root), Some(r.clone()));
        // Another folder at the same path (another root inode) is not it.
        assert_eq!(held.load(FileId { dev: 1, ino: 3 }), None);
        let bytes = fs::read(held.path()).unwrap();
        for at in [0, 9, 20, bytes.len() - 1] {
            let mut bad = bytes.clone();
            bad[at] ^= 1;
            fs::write(held.path(), &bad).unwrap();
            assert_eq!(held.load(r.root), None, "byte {at} flipped");
        }
        fs::write(held.path(), &bytes[..bytes.len() - 1]).unwrap();
        assert_eq!(held.load(r.root), None);
        fs::write(held.path(), b"").unwrap();
        assert_eq!(held.load(r.root), None);
        // The record of another path is another file.
        let other = Held::acquire(t.path(), Path::new("/elsewhere"));
        assert_ne!(other.unwrap().path(), held.path());
        assert_eq!(
            r.file("workspace/src/a.rs").unwrap().sha256,
            Digest::of(b"a")
        );
        assert_eq!(
            r.files[0].findings.as_ref().unwrap()[0]
                .finding()
                .unwrap()
                .rule
                .id,
            "github-token"
        );
        assert_eq!(r.verdict(&Digest::of(b"repo")), Some(&b"clean"[..]));
    }

    #[test]
    fn a_payload_that_lies_about_its_counts_is_refused_without_allocating() {
        let mut r = sample();
        r.files.clear();
        let mut payload = r.encode();
        assert!(Record::decode(&payload).is_some());
        // The file count follows the rules' fingerprint: make it huge.
        let rules = r.rules.0;
        let at = payload.windows(32).position(|w| w == rules).unwrap() + 32;
        payload[at..at + 4].copy_from_slice(&u32::MAX.to_be_bytes());
        assert_eq!(Record::decode(&payload), None);
    }

    #[test]
    fn only_an_unchanged_file_stamped_well_before_the_start_is_trusted() {
        let r = sample();
        let a = r.file("workspace/src/a.rs").unwrap();
        let same = a.identity;
        assert!(matches!(r.check(&a.member, &same), Seen::Unchanged(_)));
        for changed in [
            Identity { size: 6, ..same },
            Identity { mtime: 99, ..same },
            // Rewritten, then `touch -d` set the mtime back: the ctime moved.
            Identity { ctime: 14, ..same },
            Identity { ino: 8, ..same },
            Identity { dev: 2, ..same },
            Identity {
                mode: 0o100755,
                ..same
            },
        ] {
            assert!(
                matches!(r.check(&a.member, &changed), Seen::Changed(_)),
                "{changed:?}"
            );
        }
        // Stamped within the margin of the record's start: not trusted.
        let mut near = r.clone();
        near.started = same.ctime + RACY_MARGIN_NS;
        assert!(matches!(near.check(&a.member, &same), Seen::Racy(_)));
        near.started = same.mtime.max(same.ctime) + RACY_MARGIN_NS + 1;
        assert!(matches!(near.check(&a.member, &same), Seen::Unchanged(_)));
        assert_eq!(r.check("workspace/new", &same), Seen::New);
        // In packet order, one pass; out of order, looked up anew.
        let mut order = r.in_order();
        for e in &r.files {
            assert!(matches!(
                order.check(&e.member, &e.identity),
                Seen::Unchanged(_)
            ));
        }
        assert!(matches!(
            order.check("workspace/src/a.rs", &same),
            Seen::Unchanged(_)
        ));
        assert_eq!(order.check("workspace/zz", &same), Seen::New);
        let cmp = r.compare(&[
            ("workspace/src/a.rs".into(), same),
            ("workspace/new".into(), same),
            ("workspace/src/b.rs".into(), Identity { size: 1, ..same }),
        ]);
        assert_eq!(
            cmp,
            Comparison {
                unchanged: vec![0],
                racy: vec![],
                changed: vec![2],
                added: vec![1],
                removed: vec!["workspace/z".into()],
            }
        );
    }

    #[test]
    fn the_rules_fingerprint_is_stable_within_a_binary() {
        assert_eq!(rules_fingerprint(), rules_fingerprint());
        assert!(sample().same_rules());
        let mut r = sample();
        r.rules = Digest::of(b"another pillbox");
        assert!(!r.same_rules());
    }
}
