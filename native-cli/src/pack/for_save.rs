//! A workspace packed in memory for `save`: the manifest, digest and
//! report `pack -o -` would make, and each body left in the workspace's
//! files, read again only for what the store lacks.

use std::collections::HashMap;
use std::fs::File;
use std::io::Read;
use std::path::PathBuf;

use packet_core::{Digest, Entry, Manifest};

use super::collect::collect;
use super::git_history::ScanCache;
use super::hash::HashOptions;
use super::open::Opener;
use super::{hash_and_screen_with, PackReport, PackRequest, Screened};
use crate::chunking::Piece;
use crate::error::{CliError, Refused, Result};
use crate::progress::Progress;
use crate::record::{FileEntry, KeptFinding, Record, Verdict};
use crate::remote::Bodies;
use crate::walk::FileSource;

/// A workspace packed for `save`: its manifest, exact `packet.json` and
/// digest (computed as `pack -o -` computes them, secrets handled as
/// `pack` handles them), the pack report (`output` is `-`), where each
/// body is, what the next workspace record keeps of each file, and what
/// reading the workspace cost.
pub struct ForSave {
    /// The manifest.
    pub manifest: Manifest,
    /// Its exact bytes.
    pub json: Vec<u8>,
    /// The packet digest (of `json`).
    pub digest: Digest,
    /// What `pack` would print.
    pub report: PackReport,
    /// Each file member's source.
    pub bodies: WorkspaceBodies,
    /// The chunks of the large files read, by body sha256.
    pub cuts: HashMap<Digest, Vec<Piece>>,
    /// Every file member as it was hashed (or vouched for), in packet
    /// order: the next record's files.
    pub files: Vec<FileEntry>,
    /// The git history scans' verdicts, for the next record.
    pub verdicts: Vec<Verdict>,
    /// Files opened and hashed.
    pub files_read: u64,
    /// Files taken from the record without being opened.
    pub files_reused: u64,
    /// Bytes hashed.
    pub bytes_hashed: u64,
    /// Seconds spent walking (and locating harness state), hashing, and
    /// building the manifest and its digest.
    pub seconds: (f64, f64, f64),
}

/// Computes the packet `request` describes for `save`, without writing it
/// anywhere: the bodies stay in the workspace, read again only for what
/// the store lacks (and checked by sha256 as they are). With the
/// workspace record `record`, a file it
/// vouches for (unchanged, not racy, screened under these rules) keeps its
/// sha256 and findings without being opened; every other file is read,
/// hashed and screened, and a large one cut into chunks in the same read.
pub fn pack_for_save(
    request: &PackRequest,
    record: Option<&Record>,
    progress: &Progress,
) -> Result<ForSave> {
    let started = std::time::Instant::now();
    let mut scans = ScanCache::new(record);
    let mut collected = collect(request, Some(&mut scans))?;
    let walked = started.elapsed().as_secs_f64();
    let planned = std::mem::take(&mut collected.walk.planned);
    let harness = collected.harness.take();
    let policy = &request.secrets;
    let options = HashOptions {
        record,
        cut_large: true,
    };
    let Screened {
        manifest,
        sources,
        found,
        left_out,
    } = hash_and_screen_with(
        planned,
        harness,
        &collected.hidden,
        &collected.walk,
        policy,
        progress,
        &options,
    )?;
    let hashed = started.elapsed().as_secs_f64() - walked;
    let json = manifest.to_canonical_json();
    let digest = Digest::of(&json);
    let mut by_member = vec![None; manifest.members.len()];
    let mut files = Vec::with_capacity(sources.len());
    let mut cuts = HashMap::new();
    let (mut files_read, mut files_reused, mut bytes_hashed) = (0, 0, 0);
    let mut sources = sources.into_iter();
    for (slot, m) in by_member.iter_mut().zip(&manifest.members) {
        let Entry::File { sha256, .. } = m.entry else {
            continue;
        };
        let Some(s) = sources.next() else {
            return Err(CliError::Bug("fewer sources than file members".into()));
        };
        if s.read {
            files_read += 1;
            bytes_hashed += s.stamp.size;
        } else {
            files_reused += 1;
        }
        files.push(FileEntry {
            member: m.path.to_string(),
            identity: s.stamp.identity(),
            sha256,
            findings: Some(s.findings.iter().map(KeptFinding::of).collect()),
        });
        if let Some(p) = s.pieces {
            cuts.insert(sha256, p);
        }
        *slot = Some((s.source, m.path.to_string()));
    }
    let harness_scratch = collected.harness_scratch.take();
    let report = collected.report(&manifest, &digest, "-".into(), &found, policy, left_out);
    let built = started.elapsed().as_secs_f64() - walked - hashed;
    Ok(ForSave {
        manifest,
        json,
        digest,
        report,
        bodies: WorkspaceBodies {
            by_member,
            _harness_scratch: harness_scratch,
        },
        cuts,
        files,
        verdicts: scans.verdicts,
        files_read,
        files_reused,
        bytes_hashed,
        seconds: (walked, hashed, built),
    })
}

/// The bodies of a packet packed in memory, in the workspace's files
/// (opened as pack opens them: below the walked folder, never through a
/// link).
pub struct WorkspaceBodies {
    /// Member index → (where its bytes are, member path).
    by_member: Vec<Option<(FileSource, String)>>,
    /// A session log the harness printed, read when its body is sent.
    _harness_scratch: Option<tempfile::TempPath>,
}

impl WorkspaceBodies {
    fn source(&self, index: usize) -> Result<&(FileSource, String)> {
        self.by_member
            .get(index)
            .and_then(Option::as_ref)
            .ok_or_else(|| CliError::Bug(format!("member {index} has no source file")))
    }

    fn open_file(&self, index: usize) -> Result<File> {
        let (source, member) = self.source(index)?;
        Opener::default()
            .open(source, member)
            .map(|(f, _)| f)
            .map_err(|_| self.changed(index))
    }
}

impl Bodies for WorkspaceBodies {
    fn open(&self, index: usize) -> Result<Box<dyn Read + '_>> {
        Ok(Box::new(self.open_file(index)?))
    }

    fn read_at(&self, index: usize, offset: u64, buf: &mut [u8]) -> Result<()> {
        use std::os::unix::fs::FileExt;
        self.open_file(index)?
            .read_exact_at(buf, offset)
            .map_err(|_| self.changed(index))
    }

    fn changed(&self, index: usize) -> CliError {
        let member = self
            .by_member
            .get(index)
            .and_then(Option::as_ref)
            .map_or_else(String::new, |(_, m)| m.clone());
        Refused::WorkspaceChanged {
            what: format!("{member} changed or went away while it was being saved"),
            member,
        }
        .into()
    }

    fn label(&self, index: usize) -> PathBuf {
        self.source(index)
            .map_or_else(|_| PathBuf::from("the workspace"), |(s, _)| s.display())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pack::repository_with_a_key_in_history;
    use crate::pack::secrets::{SecretPolicy, SecretsMode};
    use crate::walk::WalkOptions;
    use std::fs;

    #[test]
    fn save_s_in_memory_pack_screens_git_history_as_pack_does() {
        let t = tempfile::tempdir().unwrap();
        let ws = t.path().join("ws");
        fs::create_dir_all(&ws).unwrap();
        repository_with_a_key_in_history(&ws);
        let request = |mode| PackRequest {
            workspace: ws.clone(),
            output: PathBuf::from("-"),
            harness: None,
            walk: WalkOptions::default(),
            secrets: SecretPolicy {
                mode,
                allow: vec![],
            },
        };
        let e = pack_for_save(&request(SecretsMode::Refuse), None, &Progress::new(true))
            .err()
            .unwrap();
        assert_eq!(e.code(), "secret_in_git_history");
        let packed =
            pack_for_save(&request(SecretsMode::Exclude), None, &Progress::new(true)).unwrap();
        assert_eq!(packed.report.secrets.len(), 1);
        assert_eq!(packed.report.secrets[0].action, "excluded");
        let left_out = &packed.report.skipped[0].path;
        assert!(left_out.starts_with("workspace/.git/objects/"));
        assert!(!packed.manifest.members.iter().any(|m| &m.path == left_out));
    }
}
