//! Delta push (docs/transfer.md, "Delta push"): the store is told the
//! packet's manifest and the packets it builds on (bases), answers with the
//! bodies it lacks; large ones are described by recipes, and only the
//! chunks it lacks go up, compressed, in parts uploaded side by side. The
//! store then rebuilds and verifies the packet before it becomes visible.
//! An interrupted push is recorded in the upload-state folder and
//! continued by the next push of the same packet.

use std::collections::{HashMap, HashSet};
use std::fs;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Mutex};

use packet_core::{Digest, Manifest};
use pillbox_wire::chunks::{self, BatchLimits, Frame};
use pillbox_wire::{MissingChunks, PartReceived, Push, Recipe, RecipeChunk, Recipes, Stored};
use serde::Serialize;

use super::bodies::Bodies;
use super::client::{parse_answer, status_error, Remote};
use super::upload_state::{lock_file, push_state_file, PushState, StateLock};
use super::{percent_encode, push_path};
use crate::chunking::{self, Piece, THRESHOLD};
use crate::compress::{self, Encoded};
use crate::error::{CliError, Refused, Result};
use crate::progress::Progress;

/// What to push.
pub struct DeltaRequest<'a> {
    /// The packet's manifest (verified).
    pub manifest: &'a Manifest,
    /// Its digest.
    pub digest: Digest,
    /// Its size.
    pub size: u64,
    /// Where its bodies are read from.
    pub bodies: &'a dyn Bodies,
    /// Stored packets it builds on.
    pub bases: Vec<Digest>,
    /// Labels for the stored packet.
    pub labels: &'a [String],
    /// The upload-state folder.
    pub state_dir: &'a Path,
}

/// What a delta push did (`delta` in `pillbox.checkpoint.push/1`).
#[derive(Debug, Default, Serialize)]
pub struct DeltaReport {
    /// The bases the store used.
    pub bases: Vec<String>,
    /// Bodies the store lacked.
    pub missing_bodies: u64,
    /// Their bytes.
    pub missing_bytes: u64,
    /// Chunks sent.
    pub chunks_sent: u64,
    /// Their bytes before compression.
    pub chunk_bytes: u64,
    /// Body bytes of the packet that were not sent: found in a base or
    /// sent earlier (whole bodies, and chunks of changed large bodies).
    pub reused_bytes: u64,
    /// Parts this run uploaded.
    pub parts_sent: u64,
    /// How the parts were encoded: `zstd` or `identity` for each part.
    pub compression: Vec<&'static str>,
}

/// How a delta push ended.
pub struct DeltaOutcome {
    /// True when this push stored the packet.
    pub created: bool,
    /// True when an interrupted push was continued.
    pub resumed: bool,
    /// The figures.
    pub report: DeltaReport,
}

/// Chunks asked about per `POST …/recipes` request.
const RECIPE_CHUNKS_PER_REQUEST: usize = 20_000;

/// Parts uploaded at once: compression and the store's writes overlap.
const PARALLEL_PARTS: usize = 3;

/// Rounds of "upload what is missing, complete" before giving up.
const ROUNDS: usize = 3;

/// Runs a delta push, taking turns with any other push of the same packet
/// on this machine.
pub fn delta_push(
    remote: &Remote,
    request: &DeltaRequest<'_>,
    progress: &Progress,
) -> Result<DeltaOutcome> {
    let state_path = push_state_file(request.state_dir, remote.base(), &request.digest);
    let lock_path = lock_file(request.state_dir, remote.base(), &request.digest);
    let lock = StateLock::acquire(&lock_path)?;
    let result = drive(remote, request, &state_path, progress);
    if result.is_ok() {
        let _ = fs::remove_file(&lock_path);
    }
    drop(lock);
    result
}

fn drive(
    remote: &Remote,
    request: &DeltaRequest<'_>,
    state_path: &Path,
    progress: &Progress,
) -> Result<DeltaOutcome> {
    let mut outcome = DeltaOutcome {
        created: false,
        resumed: false,
        report: DeltaReport::default(),
    };
    let saved = PushState::load(state_path, remote.base(), &request.digest, request.size);
    let mut session = match &saved {
        Some(s) => get_session(remote, &s.push_id)?,
        None => None,
    };
    outcome.resumed = session.is_some();
    if session.is_none() {
        match create(remote, request)? {
            Created::Stored => {
                let _ = fs::remove_file(state_path);
                return Ok(outcome);
            }
            Created::Session(s) => {
                PushState {
                    remote: remote.base().to_owned(),
                    digest: request.digest.to_string(),
                    size: request.size,
                    push_id: s.push_id.clone(),
                }
                .save(state_path)?;
                session = Some(*s);
            }
        }
    }
    let Some(mut session) = session else {
        return Err(CliError::Bug("no push session".into()));
    };
    chunking::check(&session.chunking)?;
    outcome.report.bases = session.bases_used.clone();
    outcome.report.missing_bodies = session.missing.len() as u64;
    outcome.report.missing_bytes = session.missing_bytes;
    let mut next_part = session
        .parts
        .iter()
        .map(|p| u32::from(p.number))
        .max()
        .unwrap_or(0)
        + 1;
    for _round in 0..ROUNDS {
        let items = plan(remote, request, &session, progress)?;
        let sent = upload(remote, request, &session, &items, &mut next_part, progress)?;
        outcome.report.chunks_sent += sent.chunks;
        outcome.report.chunk_bytes += sent.bytes;
        outcome.report.parts_sent += sent.encodings.len() as u64;
        outcome.report.compression.extend(sent.encodings);
        match complete(remote, &session)? {
            Completed::Stored(created) => {
                outcome.created = created;
                let unique: u64 = unique_body_bytes(request.manifest);
                outcome.report.reused_bytes = unique.saturating_sub(outcome.report.chunk_bytes);
                let _ = fs::remove_file(state_path);
                return Ok(outcome);
            }
            Completed::Incomplete => match get_session(remote, &session.push_id)? {
                Some(s) => session = s,
                None => {
                    return Err(Refused::UploadIncomplete {
                        upload: session.push_id.clone(),
                    }
                    .into())
                }
            },
            Completed::Refused(e) => {
                let _ = fs::remove_file(state_path);
                return Err(e);
            }
        }
    }
    Err(Refused::UploadIncomplete {
        upload: session.push_id.clone(),
    }
    .into())
}

/// The bytes of the packet's distinct bodies.
fn unique_body_bytes(manifest: &Manifest) -> u64 {
    let mut seen = HashSet::new();
    manifest
        .members
        .iter()
        .filter_map(|m| m.sha256().filter(|_| m.size() > 0).map(|d| (d, m.size())))
        .filter(|(d, _)| seen.insert(*d))
        .map(|(_, s)| s)
        .sum()
}

enum Created {
    Stored,
    Session(Box<Push>),
}

/// `POST /v1/pushes?…` with the manifest, compressed.
fn create(remote: &Remote, request: &DeltaRequest<'_>) -> Result<Created> {
    let mut query = format!("digest={}&size={}", request.digest, request.size);
    for b in &request.bases {
        query.push_str(&format!("&base={b}"));
    }
    for l in request.labels {
        query.push_str(&format!("&label={}", percent_encode(l)));
    }
    let path = format!("/v1/pushes?{query}");
    let what = "POST /v1/pushes";
    let json = request.manifest.to_canonical_json();
    let body = compress::zstd(&json)?;
    let r = remote.send_bytes(
        what,
        "POST",
        &path,
        "application/json",
        &body,
        &[("content-encoding", "zstd".to_owned())],
    )?;
    match r.status().as_u16() {
        200 => {
            let bytes = remote.read_body(what, r, 1 << 20)?;
            let _: Stored = parse_answer(what, &bytes)?;
            Ok(Created::Stored)
        }
        201 => {
            let bytes = remote.read_body(what, r, 64 << 20)?;
            Ok(Created::Session(Box::new(parse_answer(what, &bytes)?)))
        }
        _ => Err(status_error(what, r)),
    }
}

/// `GET /v1/pushes/{id}`: the push as the store has it, `None` when it
/// no longer does (finished, aborted or expired).
fn get_session(remote: &Remote, id: &str) -> Result<Option<Push>> {
    let path = push_path(id);
    let what = format!("GET {path}");
    let r = remote.get(&what, &path)?;
    match r.status().as_u16() {
        200 => {
            let bytes = remote.read_body(&what, r, 64 << 20)?;
            parse_answer(&what, &bytes).map(Some)
        }
        404 => Ok(None),
        _ => Err(status_error(&what, r)),
    }
}

/// A chunk to send: where its bytes are (member `index`'s body, from
/// `offset`), its size and name.
#[derive(Clone, Copy, Debug)]
struct Item {
    index: usize,
    offset: u64,
    size: u32,
    sha256: Digest,
}

/// The chunks the store lacks, in the packet's order, each once: small
/// missing bodies whole, and the missing chunks of large ones (whose
/// recipes are computed here and sent first).
fn plan(
    remote: &Remote,
    request: &DeltaRequest<'_>,
    session: &Push,
    progress: &Progress,
) -> Result<Vec<Item>> {
    let missing: HashSet<Digest> = session
        .missing
        .iter()
        .map(|h| Digest::from_hex(h))
        .collect::<std::result::Result<_, _>>()
        .map_err(|e| super::client::bad_answer("the push's missing bodies", e.message()))?;
    let mut bodies: Vec<(usize, Digest, u64)> = Vec::new();
    let mut seen = HashSet::new();
    for (index, m) in request.manifest.members.iter().enumerate() {
        if let Some(d) = m.sha256() {
            if m.size() > 0 && missing.contains(&d) && seen.insert(d) {
                bodies.push((index, d, m.size()));
            }
        }
    }
    let large: Vec<(usize, Digest, u64)> = bodies
        .iter()
        .copied()
        .filter(|(_, _, s)| *s > THRESHOLD)
        .collect();
    progress.phase("chunk", large.iter().map(|(_, _, s)| s).sum());
    let recipes = cut_all(request.bodies, &large, progress)?;
    let missing_chunks = send_recipes(remote, session, &recipes)?;
    let mut items = Vec::new();
    let mut scheduled = HashSet::new();
    let mut recipes: HashMap<Digest, Vec<Piece>> = recipes.into_iter().collect();
    for (index, sha, size) in bodies {
        if size <= THRESHOLD {
            if scheduled.insert(sha) {
                items.push(Item {
                    index,
                    offset: 0,
                    size: size as u32,
                    sha256: sha,
                });
            }
            continue;
        }
        for p in recipes.remove(&sha).unwrap_or_default() {
            if missing_chunks.contains(&p.sha256) && scheduled.insert(p.sha256) {
                items.push(Item {
                    index,
                    offset: p.offset,
                    size: p.size,
                    sha256: p.sha256,
                });
            }
        }
    }
    // Chunks the store asked for that no recipe here has cannot be sent.
    Ok(items)
}

/// Cuts each large body into chunks, on every core; each must hash to the
/// manifest's sha256.
fn cut_all(
    bodies: &dyn Bodies,
    large: &[(usize, Digest, u64)],
    progress: &Progress,
) -> Result<Vec<(Digest, Vec<Piece>)>> {
    let next = std::sync::atomic::AtomicUsize::new(0);
    let results: Mutex<Vec<Option<Result<Vec<Piece>>>>> =
        Mutex::new((0..large.len()).map(|_| None).collect());
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(large.len())
        .max(1);
    let stop = AtomicBool::new(false);
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(&(index, sha, size)) = large.get(i) else {
                    break;
                };
                if stop.load(Ordering::Relaxed) {
                    break;
                }
                let r = bodies.open(index).and_then(|reader| {
                    let cut = chunking::cut(reader, &bodies.label(index), |p, _| {
                        progress.inc(u64::from(p.size));
                        Ok(())
                    })?;
                    if cut.body != sha || cut.size != size {
                        return Err(bodies.changed(index));
                    }
                    Ok(cut.pieces)
                });
                if r.is_err() {
                    stop.store(true, Ordering::Relaxed);
                }
                if let Ok(mut all) = results.lock() {
                    all[i] = Some(r);
                }
            });
        }
    });
    let results = results
        .into_inner()
        .map_err(|_| CliError::Bug("a chunking thread stopped".into()))?;
    let mut out = Vec::with_capacity(large.len());
    for (r, &(_, sha, _)) in results.into_iter().zip(large) {
        match r {
            Some(pieces) => out.push((sha, pieces?)),
            None => continue,
        }
    }
    if out.len() != large.len() {
        return Err(CliError::Bug("a body was not cut".into()));
    }
    Ok(out)
}

/// `POST /v1/pushes/{id}/recipes`, in requests of bounded size; returns
/// the chunks the store lacks.
fn send_recipes(
    remote: &Remote,
    session: &Push,
    recipes: &[(Digest, Vec<Piece>)],
) -> Result<HashSet<Digest>> {
    let path = format!("{}/recipes", push_path(&session.push_id));
    let what = format!("POST {path}");
    let mut missing = HashSet::new();
    let mut batch: Vec<Recipe> = Vec::new();
    let mut in_batch = 0;
    let mut flush = |batch: &mut Vec<Recipe>| -> Result<()> {
        if batch.is_empty() {
            return Ok(());
        }
        let body = Recipes {
            recipes: std::mem::take(batch),
        };
        let json = serde_json::to_vec(&body).unwrap_or_default();
        let r = remote.send_bytes(&what, "POST", &path, "application/json", &json, &[])?;
        if r.status().as_u16() != 200 {
            return Err(status_error(&what, r));
        }
        let bytes = remote.read_body(&what, r, 64 << 20)?;
        let answer: MissingChunks = parse_answer(&what, &bytes)?;
        for h in answer.missing_chunks {
            let d =
                Digest::from_hex(&h).map_err(|e| super::client::bad_answer(&what, e.message()))?;
            missing.insert(d);
        }
        Ok(())
    };
    for (sha, pieces) in recipes {
        batch.push(Recipe {
            sha256: sha.hex().to_string(),
            size: pieces.iter().map(|p| u64::from(p.size)).sum(),
            chunks: pieces
                .iter()
                .map(|p| RecipeChunk {
                    sha256: p.sha256.hex().to_string(),
                    size: p.size.into(),
                })
                .collect(),
        });
        in_batch += pieces.len();
        if in_batch >= RECIPE_CHUNKS_PER_REQUEST {
            flush(&mut batch)?;
            in_batch = 0;
        }
    }
    flush(&mut batch)?;
    Ok(missing)
}

/// What the parts carried.
struct Sent {
    chunks: u64,
    bytes: u64,
    encodings: Vec<&'static str>,
}

/// Groups `items` into parts within the store's limits, in order.
fn parts_of(items: &[Item], limits: &pillbox_wire::PartLimits) -> Vec<std::ops::Range<usize>> {
    let max_bytes = limits.max_bytes.min(compress::PART_TARGET);
    let max_frames = (limits.max_frames as usize).min(BatchLimits::MAX_FRAMES as usize);
    let mut parts = Vec::new();
    let mut start = 0;
    let mut bytes = chunks::HEAD_BYTES as u64;
    for (i, item) in items.iter().enumerate() {
        let more = chunks::ENTRY_BYTES as u64 + u64::from(item.size);
        if i > start && (bytes + more > max_bytes || i - start >= max_frames) {
            parts.push(start..i);
            start = i;
            bytes = chunks::HEAD_BYTES as u64;
        }
        bytes += more;
    }
    if start < items.len() {
        parts.push(start..items.len());
    }
    parts
}

/// Uploads the items in parts, [`PARALLEL_PARTS`] at a time.
fn upload(
    remote: &Remote,
    request: &DeltaRequest<'_>,
    session: &Push,
    items: &[Item],
    next_part: &mut u32,
    progress: &Progress,
) -> Result<Sent> {
    let parts = parts_of(items, &session.part_limits);
    progress.phase("upload", items.iter().map(|i| u64::from(i.size)).sum());
    let first = *next_part;
    *next_part += parts.len() as u32;
    let (jobs_tx, jobs_rx) = mpsc::channel::<(u32, std::ops::Range<usize>)>();
    for (n, range) in parts.iter().enumerate() {
        let _ = jobs_tx.send((first + n as u32, range.clone()));
    }
    drop(jobs_tx);
    let jobs = Mutex::new(jobs_rx);
    let stop = AtomicBool::new(false);
    let failure: Mutex<Option<CliError>> = Mutex::new(None);
    let encodings: Mutex<Vec<(u32, &'static str)>> = Mutex::new(Vec::new());
    let sent_bytes = AtomicU64::new(0);
    std::thread::scope(|scope| {
        for _ in 0..PARALLEL_PARTS.min(parts.len()) {
            scope.spawn(|| loop {
                if stop.load(Ordering::Relaxed) {
                    break;
                }
                let job = jobs.lock().ok().and_then(|j| j.recv().ok());
                let Some((number, range)) = job else {
                    break;
                };
                let part = &items[range];
                match send_part(remote, request, session, number, part) {
                    Ok(encoding) => {
                        let n: u64 = part.iter().map(|i| u64::from(i.size)).sum();
                        sent_bytes.fetch_add(n, Ordering::Relaxed);
                        progress.inc(n);
                        if let Ok(mut e) = encodings.lock() {
                            e.push((number, encoding));
                        }
                    }
                    Err(e) => {
                        stop.store(true, Ordering::Relaxed);
                        if let Ok(mut f) = failure.lock() {
                            f.get_or_insert(e);
                        }
                        break;
                    }
                }
            });
        }
    });
    if let Some(e) = failure.into_inner().ok().flatten() {
        return Err(e);
    }
    let mut encodings = encodings.into_inner().unwrap_or_default();
    encodings.sort_unstable();
    Ok(Sent {
        chunks: items.len() as u64,
        bytes: sent_bytes.into_inner(),
        encodings: encodings.into_iter().map(|(_, e)| e).collect(),
    })
}

/// Reads one part's chunks (each checked against its name), encodes the
/// batch, compresses it when that pays and `PUT`s it.
fn send_part(
    remote: &Remote,
    request: &DeltaRequest<'_>,
    session: &Push,
    number: u32,
    part: &[Item],
) -> Result<&'static str> {
    let frames: Vec<Frame> = part
        .iter()
        .map(|i| Frame {
            sha256: i.sha256,
            size: i.size,
        })
        .collect();
    let mut batch = Vec::new();
    chunks::encode_table(&frames, &mut batch);
    for item in part {
        let at = batch.len();
        batch.resize(at + item.size as usize, 0);
        request
            .bodies
            .read_at(item.index, item.offset, &mut batch[at..])?;
        if Digest::of(&batch[at..]) != item.sha256 {
            return Err(request.bodies.changed(item.index));
        }
    }
    let encoded = compress::part(batch, compress::store_takes_zstd(&session.part_limits))?;
    let (body, encoding) = match &encoded {
        Encoded::Zstd(b) => (b, "zstd"),
        Encoded::Identity(b) => (b, "identity"),
    };
    let path = format!("{}/parts/{number}", push_path(&session.push_id));
    let what = format!("PUT {path}");
    let r = remote.send_bytes(
        &what,
        "PUT",
        &path,
        chunks::MEDIA_TYPE,
        body,
        &[("content-encoding", encoding.to_owned())],
    )?;
    if r.status().as_u16() != 200 {
        return Err(status_error(&what, r));
    }
    let bytes = remote.read_body(&what, r, 1 << 20)?;
    let answer: PartReceived = parse_answer(&what, &bytes)?;
    if u32::from(answer.number) != number || answer.frames as usize != part.len() {
        return Err(super::client::bad_answer(
            &what,
            &format!("part {} with {} frames", answer.number, answer.frames),
        ));
    }
    Ok(encoding)
}

enum Completed {
    /// Stored: by this push (true) or before it (false).
    Stored(bool),
    /// The store still lacks some bodies or chunks.
    Incomplete,
    /// The store refused the packet and dropped the push.
    Refused(CliError),
}

/// `POST /v1/pushes/{id}/complete`: the store rebuilds and verifies the
/// packet, which can take long.
fn complete(remote: &Remote, session: &Push) -> Result<Completed> {
    let path = format!("{}/complete", push_path(&session.push_id));
    let what = format!("POST {path}");
    let r = remote.send_bytes(&what, "POST", &path, "application/json", b"null", &[])?;
    match r.status().as_u16() {
        s @ (200 | 201) => {
            let bytes = remote.read_body(&what, r, 1 << 20)?;
            let _: Stored = parse_answer(&what, &bytes)?;
            Ok(Completed::Stored(s == 201))
        }
        409 => Ok(Completed::Incomplete),
        422 => Ok(Completed::Refused(status_error(&what, r))),
        // A retried complete whose first attempt succeeded finds the push
        // gone: the packet is there.
        404 if super::push::is_stored(remote, &session_digest(session)?)? => {
            Ok(Completed::Stored(false))
        }
        _ => Err(status_error(&what, r)),
    }
}

fn session_digest(session: &Push) -> Result<Digest> {
    session
        .digest
        .parse::<Digest>()
        .map_err(|e| super::client::bad_answer("the push session", e.message()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use pillbox_wire::PartLimits;

    fn item(size: u32) -> Item {
        Item {
            index: 0,
            offset: 0,
            size,
            sha256: Digest::of(&size.to_be_bytes()),
        }
    }

    #[test]
    fn parts_respect_the_byte_and_frame_limits() {
        let items: Vec<Item> = (0..10).map(|_| item(1000)).collect();
        let limits = PartLimits {
            max_bytes: (chunks::HEAD_BYTES + 3 * (chunks::ENTRY_BYTES + 1000)) as u64,
            max_frames: 100,
            encodings: vec!["identity".into()],
            zstd_max_window: 0,
        };
        assert_eq!(parts_of(&items, &limits), vec![0..3, 3..6, 6..9, 9..10]);
        let frames = PartLimits {
            max_bytes: 1 << 30,
            max_frames: 4,
            encodings: vec!["identity".into()],
            zstd_max_window: 0,
        };
        assert_eq!(parts_of(&items, &frames), vec![0..4, 4..8, 8..10]);
        // A chunk larger than the limit still goes, alone.
        let big = vec![item(10), item(5000), item(10)];
        let small = PartLimits {
            max_bytes: 1000,
            max_frames: 100,
            encodings: vec!["identity".into()],
            zstd_max_window: 0,
        };
        assert_eq!(parts_of(&big, &small), vec![0..1, 1..2, 2..3]);
        assert!(parts_of(&[], &small).is_empty());
    }

    #[test]
    fn a_workspace_file_changed_after_it_was_hashed_is_refused_not_sent() {
        let t = tempfile::tempdir().unwrap();
        let big: Vec<u8> = (0..600_000u32).map(|i| (i * 7 % 251) as u8).collect();
        std::fs::write(t.path().join("big.bin"), &big).unwrap();
        let request = crate::pack::PackRequest {
            workspace: t.path().to_path_buf(),
            output: "-".into(),
            harness: None,
            walk: Default::default(),
            secrets: Default::default(),
        };
        let packed = crate::pack::pack_in_memory(&request, &Progress::new(true)).unwrap();
        let (index, member) = packed.manifest.find("workspace/big.bin").unwrap();
        let large = [(index, member.sha256().unwrap(), member.size())];
        assert!(cut_all(&packed.bodies, &large, &Progress::new(true)).is_ok());
        let mut changed = big.clone();
        changed[300_000] ^= 1;
        std::fs::write(t.path().join("big.bin"), &changed).unwrap();
        let e = cut_all(&packed.bodies, &large, &Progress::new(true)).unwrap_err();
        assert_eq!(e.code(), "workspace_changed");
        assert!(
            e.report()
                .details
                .message
                .starts_with("workspace/big.bin changed or went away while it was being saved"),
            "{}",
            e.report().details.message
        );
        assert_eq!(
            e.report().details.path.as_deref(),
            Some("workspace/big.bin")
        );
    }

    #[test]
    fn unique_bodies_are_counted_once() {
        use packet_core::{Limits, Member};
        let d = Digest::of(b"abc");
        let m = Manifest::build(
            vec![
                Member::dir("workspace"),
                Member::file("workspace/a", 3, d, false),
                Member::file("workspace/b", 3, d, false),
                Member::file("workspace/c", 0, Digest::EMPTY, false),
            ],
            None,
            vec![],
            &Limits::FORMAT,
        )
        .unwrap();
        assert_eq!(unique_body_bytes(&m), 3);
    }
}
