//! `pillbox checkpoint save`: pack and push in one step, leaving no packet
//! file behind (unless `-o`), at the cost of what changed.
//!
//! Under the workspace record's lock (`record`), the last checkpoint
//! saved or restored in the workspace is read first: a file whose stat
//! identity is the recorded one, stamped well before that save started,
//! keeps its sha256 (and its screening, under the same rules) without
//! being opened; every other file is read, hashed, screened, and cut into
//! chunks if large, in one read. When the ref still points at the
//! record's packet, the push knows exactly which chunks of `packet.json`
//! and which bodies are new and sends them in one request when they fit.
//! Bodies the store lacks are read again from the workspace, each checked
//! against the sha256 it was packed with (a file that changed meanwhile
//! is refused: "the workspace changed while saving: save again"). Once
//! the ref moved, the next record is written.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::time::Instant;

use packet_core::{Body, Digest};
use serde::Serialize;

use crate::chunking::{self, Piece, BODIES, MANIFEST};
use crate::error::{CliError, Result};
use crate::pack::{self, PackRequest};
use crate::progress::Progress;
use crate::record::{self, BodyChunks, Held, Record};
use crate::remote::{self, KnownBase, PushDeltaReport, PushRequest, Remote, Verified};
use crate::report::{ExclusionReport, HarnessReport, Totals};
use crate::walk::{FileId, Skipped};

/// The `pillbox.checkpoint.save/1` object: what `pack` and `push` print,
/// in one.
#[derive(Debug, Serialize)]
pub struct SaveReport {
    /// `pillbox.checkpoint.save/1`.
    pub schema: &'static str,
    /// The packet digest.
    pub digest: String,
    /// Its size.
    pub size: u64,
    /// Members after `packet.json`.
    pub members: u64,
    /// Manifest totals.
    pub totals: Totals,
    /// The packet file written with `-o`, else `null`.
    pub output: Option<String>,
    /// The workspace saved.
    pub workspace: String,
    /// Harness state carried.
    pub harness: Option<HarnessReport>,
    /// Exclusion rules that applied.
    pub exclusions: Vec<ExclusionReport>,
    /// What was left out.
    pub skipped: Vec<Skipped>,
    /// Secrets found by content and left out or packed, as `pack`
    /// reports them.
    pub secrets: Vec<crate::pack::secrets::SecretReport>,
    /// The store's base URL.
    pub remote: String,
    /// True when this run stored the packet.
    pub uploaded: bool,
    /// `delta`, `single`, `multipart` or `none`.
    pub mode: &'static str,
    /// Multipart only.
    pub parts: Option<remote::PartsReport>,
    /// True when an interrupted push was continued.
    pub resumed: bool,
    /// Bytes of the request bodies that carried the packet.
    pub bytes_sent: u64,
    /// Requests sent again after a transient failure.
    pub retries: u32,
    /// Wall time of the upload, in seconds.
    pub upload_seconds: f64,
    /// The ref moved.
    #[serde(rename = "ref")]
    pub ref_moved: Option<remote::RefReport>,
    /// Delta push only: what was reused and what was sent.
    pub delta: Option<PushDeltaReport>,
    /// Files opened and hashed.
    pub files_read: u64,
    /// Files the workspace record vouched for, not opened.
    pub files_reused: u64,
    /// Bytes read and hashed.
    pub bytes_hashed: u64,
    /// The workspace record written, or `null`.
    pub record: Option<String>,
    /// Where the time went.
    pub seconds: SaveSeconds,
}

/// `seconds` in `pillbox.checkpoint.save/1`.
#[derive(Debug, Default, Serialize)]
pub struct SaveSeconds {
    /// Reading the workspace record.
    pub record_load: f64,
    /// Walking the workspace and locating harness state.
    pub walk: f64,
    /// Reading, hashing, screening and cutting the files read.
    pub hash: f64,
    /// Building `packet.json` and its digest.
    pub manifest: f64,
    /// The requests to the store (the push and the ref).
    pub push: f64,
    /// Writing the next workspace record.
    pub record_write: f64,
    /// The whole save.
    pub total: f64,
}

/// `save`: packs `pack_request` (into `output` when given, else nowhere)
/// and pushes it.
pub fn save(
    store: &Remote,
    pack_request: PackRequest,
    output: Option<PathBuf>,
    push_request: PushRequest,
    progress: &Progress,
) -> Result<SaveReport> {
    let started = Instant::now();
    let (pack_report, pushed) = match output {
        Some(file) => {
            let request = PackRequest {
                output: file.clone(),
                ..pack_request
            };
            let packed = pack::pack(&request, progress)?;
            let push = PushRequest {
                packet: file,
                ..push_request
            };
            let pushed = remote::push(store, &push, progress)?;
            (packed, pushed)
        }
        None if push_request.whole || !remote::takes_delta(store)? => {
            // The whole packet goes up: it needs a file, removed after.
            let dir = tempfile::Builder::new()
                .prefix(".pillbox-save-")
                .tempdir()
                .map_err(|e| CliError::io("create a folder in", std::env::temp_dir(), e))?;
            let file = dir.path().join("packet.tar");
            let request = PackRequest {
                output: file.clone(),
                ..pack_request
            };
            let mut packed = pack::pack(&request, progress)?;
            packed.output = "-".to_owned();
            let push = PushRequest {
                packet: file,
                ..push_request
            };
            let pushed = remote::push(store, &push, progress)?;
            (packed, pushed)
        }
        None => return save_by_delta(store, pack_request, push_request, progress, started),
    };
    // Every file was read into the packet file.
    let (files, bytes) = (pack_report.totals.files, pack_report.totals.bytes);
    let seconds = SaveSeconds {
        push: pushed.upload_seconds,
        total: started.elapsed().as_secs_f64(),
        ..SaveSeconds::default()
    };
    Ok(report(
        pack_report,
        pushed,
        (files, 0, bytes),
        None,
        seconds,
    ))
}

/// `save` with no packet file: the workspace record, then a delta push.
fn save_by_delta(
    store: &Remote,
    pack_request: PackRequest,
    push_request: PushRequest,
    progress: &Progress,
    started: Instant,
) -> Result<SaveReport> {
    let workspace = std::fs::canonicalize(&pack_request.workspace)
        .map_err(|e| CliError::io("open the workspace", &pack_request.workspace, e))?;
    let root = std::fs::metadata(&workspace)
        .map(|m| {
            use std::os::unix::fs::MetadataExt;
            FileId {
                dev: m.dev(),
                ino: m.ino(),
            }
        })
        .map_err(|e| CliError::io("open the workspace", &workspace, e))?;
    let mut seconds = SaveSeconds::default();
    let held = Held::acquire(&record::default_dir()?, &workspace)?;
    // Taken before anything is stat'ed: a file stamped after this is racy
    // for the next save.
    let save_started = record::now_ns();
    let prior = held.load(root);
    seconds.record_load = started.elapsed().as_secs_f64();
    let harness_homes: Vec<(String, PathBuf)> = pack_request
        .harness
        .iter()
        .map(|h| (h.kind.as_str().to_owned(), h.home.clone()))
        .collect();
    let mut packed = pack::pack_for_save(&pack_request, prior.as_ref(), progress)?;
    (seconds.walk, seconds.hash, seconds.manifest) = packed.seconds;
    if let Some(r) = &prior {
        keep_grown_chunks(&mut packed, r)?;
    }
    let known = prior.as_ref().map(known_base);
    let packet = Verified {
        manifest: &packed.manifest,
        json: Some(&packed.json),
        digest: packed.digest,
        size: packed.manifest.packet_size(),
        file: None,
        bodies: &packed.bodies,
        cuts: Some(&packed.cuts),
        known: known.as_ref(),
    };
    let pushing = Instant::now();
    let pushed = remote::push_verified(store, &push_request, &packet, progress)?;
    seconds.push = pushing.elapsed().as_secs_f64();
    let writing = Instant::now();
    let next = Record {
        workspace,
        root,
        store: store.base().to_owned(),
        ref_name: push_request.ref_name.clone(),
        digest: packed.digest,
        recipes: recipes_of(&packed.manifest, &packed.cuts, prior.as_ref()),
        json: packed.json,
        harness_homes,
        started: save_started,
        rules: record::rules_fingerprint(),
        files: packed.files,
        verdicts: packed.verdicts,
    };
    // The checkpoint is saved and the ref moved: a record that cannot be
    // written only makes the next save read everything again.
    let written = held
        .write(&next)
        .ok()
        .map(|()| held.path().display().to_string());
    seconds.record_write = writing.elapsed().as_secs_f64();
    seconds.total = started.elapsed().as_secs_f64();
    let counts = (packed.files_read, packed.files_reused, packed.bytes_hashed);
    Ok(report(packed.report, pushed, counts, written, seconds))
}

/// The most bytes of a grown body read again to cut what follows its old
/// chunks (past this, its own cut is used).
const GROWN_TAIL_BYTES: u64 = 16 << 20;

/// Large bodies that grew from the body the record has at their path (a
/// session log that gained a turn) keep that body's chunks: only what
/// follows them is cut and sent ([`chunking::grown`]).
fn keep_grown_chunks(packed: &mut pack::ForSave, prior: &Record) -> Result<()> {
    use crate::remote::Bodies;
    let mut grown = Vec::new();
    for (index, m) in packed.manifest.members.iter().enumerate() {
        let Some(body) = m.body() else { continue };
        let (Some(pieces), Some(before)) = (packed.cuts.get(&body.sha256), prior.file(&m.path))
        else {
            continue;
        };
        let old = Body {
            sha256: before.sha256,
            size: before.identity.size,
        };
        let Some(old_chunks) = prior.recipe(&old) else {
            continue;
        };
        let shared = chunking::shared_chunks(old_chunks, pieces);
        let Some(start) = pieces.get(shared).map(|p| p.offset) else {
            continue;
        };
        if old.size >= body.size || body.size - start > GROWN_TAIL_BYTES {
            continue;
        }
        let mut tail = vec![0u8; (body.size - start) as usize];
        packed.bodies.read_at(index, start, &mut tail)?;
        if let Some(g) = chunking::grown(old_chunks, pieces, &tail, &BODIES) {
            grown.push((body.sha256, g));
        }
    }
    for (sha, pieces) in grown {
        packed.cuts.insert(sha, pieces);
    }
    Ok(())
}

/// What the record's packet holds, as the push needs it.
fn known_base(r: &Record) -> KnownBase {
    let manifest = chunking::cut_bytes(&r.json, &MANIFEST)
        .iter()
        .map(Piece::name)
        .collect();
    let mut bodies = HashSet::new();
    let mut large = HashMap::new();
    for e in &r.files {
        let body = Body {
            sha256: e.sha256,
            size: e.identity.size,
        };
        if body.size == 0 {
            continue;
        }
        bodies.insert(body);
        if !BODIES.is_one_chunk(body.size) {
            if let Some(chunks) = r.recipe(&body) {
                large.insert(e.member.clone(), (body, chunks.to_vec()));
            }
        }
    }
    KnownBase {
        digest: r.digest,
        manifest,
        bodies,
        large,
    }
}

/// The chunks of the packet's large bodies as the store now holds them:
/// those cut in this save, and those the last record knew.
fn recipes_of(
    manifest: &packet_core::Manifest,
    cuts: &HashMap<Digest, Vec<Piece>>,
    prior: Option<&Record>,
) -> Vec<BodyChunks> {
    let mut out = Vec::new();
    let mut seen = HashSet::new();
    for body in manifest.members.iter().filter_map(|m| m.body()) {
        if BODIES.is_one_chunk(body.size) || !seen.insert(body) {
            continue;
        }
        let chunks = match cuts.get(&body.sha256) {
            Some(p) => p.iter().map(Piece::name).collect(),
            None => match prior.and_then(|r| r.recipe(&body)) {
                Some(c) => c.to_vec(),
                None => continue,
            },
        };
        out.push(BodyChunks { body, chunks });
    }
    out.sort_by_key(|a| a.body);
    out
}

fn report(
    pack_report: pack::PackReport,
    pushed: remote::PushReport,
    (files_read, files_reused, bytes_hashed): (u64, u64, u64),
    record: Option<String>,
    seconds: SaveSeconds,
) -> SaveReport {
    SaveReport {
        schema: "pillbox.checkpoint.save/1",
        digest: pack_report.digest,
        size: pack_report.size,
        members: pack_report.members,
        totals: pack_report.totals,
        output: (pack_report.output != "-").then_some(pack_report.output),
        workspace: pack_report.workspace,
        harness: pack_report.harness,
        exclusions: pack_report.exclusions,
        skipped: pack_report.skipped,
        secrets: pack_report.secrets,
        remote: pushed.remote,
        uploaded: pushed.uploaded,
        mode: pushed.mode,
        parts: pushed.parts,
        resumed: pushed.resumed,
        bytes_sent: pushed.bytes_sent,
        retries: pushed.retries,
        upload_seconds: pushed.upload_seconds,
        ref_moved: pushed.ref_moved,
        delta: pushed.delta,
        files_read,
        files_reused,
        bytes_hashed,
        record,
        seconds,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;
    use std::io::Write;
    use std::os::unix::fs::PermissionsExt;
    use std::path::Path;

    use crate::pack::ForSave;

    fn request(ws: &Path) -> PackRequest {
        PackRequest {
            workspace: ws.to_path_buf(),
            output: "-".into(),
            harness: None,
            walk: Default::default(),
            secrets: Default::default(),
        }
    }

    fn saved(ws: &Path, record: Option<&Record>) -> ForSave {
        pack::pack_for_save(&request(ws), record, &Progress::new(true)).unwrap()
    }

    /// The record a save of `packed` would leave, as if it had started at
    /// `started`.
    fn record_of(packed: &ForSave, started: i64) -> Record {
        let mut r = Record {
            workspace: PathBuf::from("/w"),
            root: FileId { dev: 0, ino: 0 },
            store: "http://store".into(),
            ref_name: None,
            digest: packed.digest,
            json: packed.json.clone(),
            harness_homes: vec![],
            started,
            rules: record::rules_fingerprint(),
            files: packed.files.clone(),
            recipes: recipes_of(&packed.manifest, &packed.cuts, None),
            verdicts: vec![],
        };
        r.sort();
        r
    }

    /// Long enough after every file's timestamps that none is racy.
    fn later() -> i64 {
        record::now_ns() + 3 * record::RACY_MARGIN_NS
    }

    fn sha_of(packed: &ForSave, member: &str) -> Option<Digest> {
        packed.manifest.find(member).and_then(|(_, m)| m.sha256())
    }

    fn workspace() -> (tempfile::TempDir, PathBuf) {
        let t = tempfile::tempdir().unwrap();
        let ws = t.path().join("ws");
        for i in 0..20 {
            let p = ws.join(format!("d{}/f{i}.txt", i % 3));
            fs::create_dir_all(p.parent().unwrap()).unwrap();
            fs::write(p, format!("file {i}\n")).unwrap();
        }
        fs::write(ws.join("f.txt"), b"0123456789").unwrap();
        (t, ws)
    }

    #[test]
    fn unchanged_files_are_not_read_and_a_changed_one_is() {
        let (_t, ws) = workspace();
        let first = saved(&ws, None);
        assert_eq!((first.files_read, first.files_reused), (21, 0));
        let r = record_of(&first, later());
        let same = saved(&ws, Some(&r));
        assert_eq!(
            (same.files_read, same.files_reused, same.bytes_hashed),
            (0, 21, 0)
        );
        assert_eq!(same.digest, first.digest);
        fs::write(ws.join("d1/f1.txt"), b"edited\n").unwrap();
        let edited = saved(&ws, Some(&r));
        assert_eq!((edited.files_read, edited.files_reused), (1, 20));
        assert_eq!(edited.bytes_hashed, 7);
        assert_eq!(
            sha_of(&edited, "workspace/d1/f1.txt"),
            Some(Digest::of(b"edited\n"))
        );
    }

    #[test]
    fn a_file_rewritten_within_the_timestamp_tick_of_the_save_is_read_again() {
        let (_t, ws) = workspace();
        let first = saved(&ws, None);
        fs::write(ws.join("f.txt"), b"9876543210").unwrap();
        // As if the rewrite had left every timestamp as it was: the record
        // holds the file's identity now with the old digest.
        let now = saved(&ws, None);
        let entry = |p: &ForSave| {
            p.files
                .iter()
                .find(|e| e.member == "workspace/f.txt")
                .unwrap()
                .clone()
        };
        let mut r = record_of(&first, later());
        let at = r
            .files
            .iter()
            .position(|e| e.member == "workspace/f.txt")
            .unwrap();
        r.files[at].identity = entry(&now).identity;
        assert_eq!(r.files[at].sha256, Digest::of(b"0123456789"));
        // Had the record started well after the rewrite, its word would be
        // taken: which is why a file stamped near the start is not.
        let trusted = saved(&ws, Some(&r));
        assert_eq!(
            sha_of(&trusted, "workspace/f.txt"),
            Some(Digest::of(b"0123456789"))
        );
        // The save that recorded it started within the margin of the
        // file's stamps: racy, read again.
        r.started = entry(&now).identity.ctime + 1_000_000;
        let again = saved(&ws, Some(&r));
        assert_eq!(
            sha_of(&again, "workspace/f.txt"),
            Some(Digest::of(b"9876543210"))
        );
    }

    #[test]
    fn a_rewrite_with_its_mtime_restored_is_seen_by_its_ctime() {
        let (_t, ws) = workspace();
        let f = ws.join("f.txt");
        let first = saved(&ws, None);
        let r = record_of(&first, later());
        let before = fs::metadata(&f).unwrap();
        fs::write(&f, b"9876543210").unwrap();
        let times = fs::FileTimes::new()
            .set_modified(before.modified().unwrap())
            .set_accessed(before.accessed().unwrap());
        fs::File::options()
            .write(true)
            .open(&f)
            .unwrap()
            .set_times(times)
            .unwrap();
        let after = fs::metadata(&f).unwrap();
        assert_eq!(after.modified().unwrap(), before.modified().unwrap());
        assert_eq!(after.len(), before.len());
        let again = saved(&ws, Some(&r));
        assert_eq!(again.files_read, 1);
        assert_eq!(
            sha_of(&again, "workspace/f.txt"),
            Some(Digest::of(b"9876543210"))
        );
    }

    #[test]
    fn replaced_chmodded_linked_deleted_and_new_files_are_each_seen() {
        let (t, ws) = workspace();
        let first = saved(&ws, None);
        let r = record_of(&first, later());
        // Replaced by another file with the same size and mtime: a new inode.
        let f = ws.join("f.txt");
        let other = t.path().join("other.txt");
        fs::write(&other, b"abcdefghij").unwrap();
        let mtime = fs::metadata(&f).unwrap().modified().unwrap();
        fs::File::options()
            .write(true)
            .open(&other)
            .unwrap()
            .set_times(fs::FileTimes::new().set_modified(mtime))
            .unwrap();
        fs::rename(&other, &f).unwrap();
        // chmod +x: same bytes, a new mode.
        let x = ws.join("d0/f0.txt");
        fs::set_permissions(&x, fs::Permissions::from_mode(0o755)).unwrap();
        // A file turned into a symlink, one deleted, one new.
        fs::remove_file(ws.join("d1/f1.txt")).unwrap();
        std::os::unix::fs::symlink("f4.txt", ws.join("d1/f1.txt")).unwrap();
        fs::remove_file(ws.join("d2/f2.txt")).unwrap();
        fs::write(ws.join("new.txt"), b"new").unwrap();
        let now = saved(&ws, Some(&r));
        assert_eq!(
            sha_of(&now, "workspace/f.txt"),
            Some(Digest::of(b"abcdefghij"))
        );
        let (_, m) = now.manifest.find("workspace/d0/f0.txt").unwrap();
        assert_eq!(m.mode(), packet_core::Mode::EXECUTABLE);
        let (_, link) = now.manifest.find("workspace/d1/f1.txt").unwrap();
        assert_eq!(link.target(), Some("f4.txt"));
        assert!(now.manifest.find("workspace/d2/f2.txt").is_none());
        assert_eq!(sha_of(&now, "workspace/new.txt"), Some(Digest::of(b"new")));
        // Read: the replaced file, the chmodded one, the new one.
        assert_eq!(now.files_read, 3);
        assert_eq!(now.files_reused, 21 - 2 - 2);
    }

    #[test]
    fn a_record_made_under_other_rules_screens_every_file_again() {
        let (_t, ws) = workspace();
        let first = saved(&ws, None);
        let mut r = record_of(&first, later());
        r.rules = Digest::of(b"the rules of another pillbox");
        let again = saved(&ws, Some(&r));
        assert_eq!((again.files_read, again.files_reused), (21, 0));
        assert_eq!(again.digest, first.digest);
    }

    #[test]
    fn a_large_file_is_cut_as_it_is_read_and_its_chunks_kept() {
        let (_t, ws) = workspace();
        let big: Vec<u8> = (0..3_000_000u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8)
            .collect();
        fs::write(ws.join("big.bin"), &big).unwrap();
        let first = saved(&ws, None);
        let sha = Digest::of(&big);
        let pieces = &first.cuts[&sha];
        let cut = chunking::cut_bytes(&big, &BODIES);
        assert_eq!(pieces, &cut);
        let r = record_of(&first, later());
        let body = Body {
            sha256: sha,
            size: big.len() as u64,
        };
        assert_eq!(r.recipe(&body).unwrap().len(), cut.len());
        let known = known_base(&r);
        assert_eq!(known.large["workspace/big.bin"].1.len(), cut.len());
        assert_eq!(
            known.manifest,
            chunking::cut_bytes(&first.json, &MANIFEST)
                .iter()
                .map(Piece::name)
                .collect::<Vec<_>>()
        );
        // Reused, its chunks come from the record.
        let again = saved(&ws, Some(&r));
        assert!(again.cuts.is_empty());
        assert_eq!(
            recipes_of(&again.manifest, &again.cuts, Some(&r)),
            r.recipes
        );
    }

    #[test]
    fn an_unchanged_repository_s_history_is_not_scanned_again() {
        use crate::pack::secrets::{SecretPolicy, SecretsMode};
        let (_t, ws) = workspace();
        crate::pack::repository_with_a_key_in_history(&ws);
        let git = |args: &[&str]| crate::pack::git_in(&ws, args);
        let policy = |mode| PackRequest {
            secrets: SecretPolicy {
                mode,
                allow: vec![],
            },
            ..request(&ws)
        };
        let refuse = policy(SecretsMode::Refuse);
        let save =
            |record: Option<&Record>| pack::pack_for_save(&refuse, record, &Progress::new(true));
        assert_eq!(save(None).err().unwrap().code(), "secret_in_git_history");
        let excluded =
            pack::pack_for_save(&policy(SecretsMode::Exclude), None, &Progress::new(true)).unwrap();
        assert_eq!(excluded.verdicts.len(), 1);
        assert!(!excluded.verdicts[0].value.is_empty());
        // A record whose verdict says the history is clean: taken as it is
        // while nothing in the repository changed (so it was not scanned).
        let mut r = record_of(&excluded, later());
        r.verdicts = excluded.verdicts.clone();
        r.verdicts[0].value.clear();
        let trusted = save(Some(&r)).unwrap();
        assert_eq!(trusted.verdicts[0].value, Vec::<u8>::new());
        // Its verdict kept as found, the record refuses as a scan does.
        r.verdicts = excluded.verdicts.clone();
        assert_eq!(
            save(Some(&r)).err().unwrap().code(),
            "secret_in_git_history"
        );
        // Stamped near the record's start: scanned again.
        r.verdicts[0].value.clear();
        r.started = record::now_ns();
        assert_eq!(
            save(Some(&r)).err().unwrap().code(),
            "secret_in_git_history"
        );
        // A changed repository: another key, scanned again.
        r.started = later();
        git(&["commit", "-q", "--allow-empty", "-m", "more"]);
        assert_eq!(
            save(Some(&r)).err().unwrap().code(),
            "secret_in_git_history"
        );
    }

    #[test]
    fn a_grown_log_keeps_its_recorded_chunks_and_only_its_tail_is_new() {
        let (_t, ws) = workspace();
        let line = |i: u32| {
            format!(
                "{{\"turn\":{i},\"text\":\"{}\"}}\n",
                i.wrapping_mul(2_654_435_761)
            )
        };
        let log: String = (0..120_000).map(line).collect();
        fs::write(ws.join("log.jsonl"), &log).unwrap();
        let first = saved(&ws, None);
        let r = record_of(&first, later());
        let old_body = Body {
            sha256: Digest::of(log.as_bytes()),
            size: log.len() as u64,
        };
        let old = r.recipe(&old_body).unwrap().to_vec();
        assert!(old.len() > 3);
        let turn: String = (120_000..120_400).map(line).collect();
        fs::OpenOptions::new()
            .append(true)
            .open(ws.join("log.jsonl"))
            .unwrap()
            .write_all(turn.as_bytes())
            .unwrap();
        let mut second = saved(&ws, Some(&r));
        assert_eq!(second.files_read, 1);
        keep_grown_chunks(&mut second, &r).unwrap();
        let sha = sha_of(&second, "workspace/log.jsonl").unwrap();
        let pieces = &second.cuts[&sha];
        let kept = pieces
            .iter()
            .zip(&old)
            .take_while(|(p, c)| p.name() == **c)
            .count();
        assert!(
            kept >= old.len() - 1,
            "{kept} of {} old chunks kept",
            old.len()
        );
        let new_bytes: u64 = pieces[kept..].iter().map(|p| u64::from(p.size)).sum();
        assert!(
            new_bytes <= u64::from(BODIES.min) + turn.len() as u64,
            "{new_bytes}"
        );
        assert_eq!(
            pieces.iter().map(|p| u64::from(p.size)).sum::<u64>(),
            (log.len() + turn.len()) as u64
        );
        // The next turn keeps the chunks this save recorded, the kept old
        // last one among them.
        let recorded: Vec<_> = pieces.iter().map(Piece::name).collect();
        let r2 = record_of(&second, later());
        let turn2: String = (120_400..120_800).map(line).collect();
        fs::OpenOptions::new()
            .append(true)
            .open(ws.join("log.jsonl"))
            .unwrap()
            .write_all(turn2.as_bytes())
            .unwrap();
        let mut third = saved(&ws, Some(&r2));
        keep_grown_chunks(&mut third, &r2).unwrap();
        let sha = sha_of(&third, "workspace/log.jsonl").unwrap();
        let pieces = &third.cuts[&sha];
        let kept = pieces
            .iter()
            .zip(&recorded)
            .take_while(|(p, c)| p.name() == **c)
            .count();
        assert!(
            kept >= recorded.len() - 1,
            "{kept} of {} kept",
            recorded.len()
        );
        let new_bytes: u64 = pieces[kept..].iter().map(|p| u64::from(p.size)).sum();
        assert!(
            new_bytes <= u64::from(BODIES.min) + turn2.len() as u64,
            "{new_bytes}"
        );
    }
}
