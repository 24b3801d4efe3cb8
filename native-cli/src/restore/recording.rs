//! What a restore leaves in the workspace record (docs/cli.md, "The
//! workspace record"): the checkpoint it restored, and each file as it was
//! written or found, so that the next restore goes in place and the next
//! save reads only what changed. The record's lock is held from before the
//! folder is looked at until the next record is written; the journal
//! (`journal`) says what an interrupted restore may have left meanwhile.

use std::collections::HashMap;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};

use packet_core::{Body, BodyFindings, Digest, Manifest};
use pillbox_wire::recipes::ChunkName;
use rustix::fs::{statat, AtFlags, Mode, OFlags};

use super::journal::Journal;
use crate::chunking::BODIES;
use crate::error::Result;
use crate::record::{self, BodyChunks, FileEntry, Held, Identity, KeptFinding, Record, Verdict};
use crate::walk::{open_beneath, FileId};

/// A workspace's record, held: its lock, and where its journal goes.
pub struct Recorder {
    /// The lock.
    pub held: Held,
    /// The workspace's canonical path.
    pub workspace: PathBuf,
    /// Its root folder.
    pub root: FileId,
}

impl Recorder {
    /// Takes the record lock of the workspace at `workspace` (canonical),
    /// whose root folder is `root`.
    pub fn acquire(workspace: &Path, root: FileId) -> Result<Recorder> {
        let held = Held::acquire(&record::default_dir()?, workspace)?;
        Ok(Recorder {
            held,
            workspace: workspace.to_path_buf(),
            root,
        })
    }

    /// The record, if a sound one is there for this folder.
    pub fn load(&self) -> Option<Record> {
        self.held.load(self.root)
    }

    /// The journal's file.
    pub fn journal_path(&self) -> PathBuf {
        Journal::path_of(self.held.path())
    }

    /// The journal an interrupted restore left, if any.
    pub fn journal(&self) -> Option<Journal> {
        Journal::load(&self.journal_path())
    }

    /// Writes the journal.
    pub fn write_journal(&self, j: &Journal) -> Result<()> {
        j.write(&self.journal_path())
    }

    /// Writes the next record, then removes the journal: the restore is
    /// done.
    pub fn finish(&self, next: &Record) -> Result<()> {
        self.held.write(next)?;
        Journal::remove(&self.journal_path())
    }

    /// Removes the journal of a restore that changed nothing.
    pub fn abandon(&self) {
        let _ = Journal::remove(&self.journal_path());
    }
}

/// What the next record holds besides its files.
pub struct Checkpoint<'a> {
    /// The store's base URL.
    pub store: &'a str,
    /// The ref restored from, if any.
    pub ref_name: Option<&'a str>,
    /// The packet.
    pub digest: Digest,
    /// Its `packet.json`.
    pub json: &'a [u8],
    /// Its manifest.
    pub manifest: &'a Manifest,
    /// The large bodies' chunks (the store's recipes).
    pub recipes: &'a HashMap<Body, Vec<ChunkName>>,
    /// The harness homes the session state went to.
    pub harness_homes: Vec<(String, PathBuf)>,
    /// When the restore started (before it looked at any file).
    pub started: i64,
    /// Verdicts an earlier record kept, still valid by their keys.
    pub verdicts: Vec<Verdict>,
}

/// A file entry: the member, the file's identity, its findings.
pub fn entry(
    member: &str,
    identity: Identity,
    sha256: Digest,
    found: Option<&BodyFindings>,
) -> FileEntry {
    FileEntry {
        member: member.to_owned(),
        identity,
        sha256,
        findings: found.map(|f| {
            f.secrets
                .iter()
                .map(|&(line, rule)| KeptFinding {
                    line,
                    rule: rule.to_owned(),
                })
                .collect()
        }),
    }
}

/// The next record: the checkpoint and `files`.
pub fn record_of(r: &Recorder, c: Checkpoint<'_>, files: Vec<FileEntry>) -> Record {
    let mut recipes = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for body in c.manifest.members.iter().filter_map(|m| m.body()) {
        if BODIES.is_one_chunk(body.size) || !seen.insert(body) {
            continue;
        }
        if let Some(chunks) = c.recipes.get(&body) {
            recipes.push(BodyChunks {
                body,
                chunks: chunks.clone(),
            });
        }
    }
    let mut record = Record {
        workspace: r.workspace.clone(),
        root: r.root,
        store: c.store.to_owned(),
        ref_name: c.ref_name.map(str::to_owned),
        digest: c.digest,
        json: c.json.to_vec(),
        harness_homes: c.harness_homes,
        started: c.started,
        rules: record::rules_fingerprint(),
        files,
        recipes,
        verdicts: c.verdicts,
    };
    record.sort();
    record
}

/// Stats files below one folder's descriptor, keeping the last parent
/// open (siblings come together in packet order).
pub struct Stats<'a> {
    root: BorrowedFd<'a>,
    parent: Option<(String, OwnedFd)>,
}

impl<'a> Stats<'a> {
    /// Stats below `root`.
    pub fn new(root: BorrowedFd<'a>) -> Stats<'a> {
        Stats { root, parent: None }
    }

    /// The identity of the file at `relative` (not following a link).
    pub fn identity(&mut self, relative: &str) -> Option<Identity> {
        let (dir, name) = match relative.rsplit_once('/') {
            Some((d, n)) => (d, n),
            None => ("", relative),
        };
        if dir.is_empty() {
            return statat(self.root, name, AtFlags::SYMLINK_NOFOLLOW)
                .ok()
                .map(|s| Identity::of(&s));
        }
        if self.parent.as_ref().map(|(d, _)| d.as_str()) != Some(dir) {
            let fd = open_beneath(
                self.root,
                dir,
                OFlags::PATH | OFlags::DIRECTORY,
                Mode::empty(),
            )
            .ok()?;
            self.parent = Some((dir.to_owned(), fd));
        }
        let (_, fd) = self.parent.as_ref()?;
        statat(fd.as_fd(), name, AtFlags::SYMLINK_NOFOLLOW)
            .ok()
            .map(|s| Identity::of(&s))
    }
}

/// The identity of the file at `path` (not following a last link).
pub fn identity_at(path: &Path) -> Option<Identity> {
    statat(rustix::fs::CWD, path, AtFlags::SYMLINK_NOFOLLOW)
        .ok()
        .map(|s| Identity::of(&s))
}
