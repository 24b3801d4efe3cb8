//! Delta push (docs/transfer.md, "Delta push"): a /2 packet goes up as
//! the chunks of its `packet.json` and the bodies its bases lack.
//!
//! `POST /v1/pushes` carries a `PBPUSH02` body: the manifest's recipe (its
//! chunks, cut by `MANIFEST`), the recipes of large bodies sent, and a
//! chunk batch of the frames the client believes the store lacks. When
//! this machine knows what the base holds (the workspace record of the
//! packet the ref points at, [`KnownBase`]), that is every new manifest
//! chunk, every new small body and every new chunk of a changed large body
//! (whose recipe copies the base body's chunks it shares): the store
//! proves everything from it and stores the packet in that one request
//! (201). Otherwise, or when the change is too large for one request, the
//! push stays open (202) and says what it lacks: recipes of large bodies
//! go to `POST …/recipes`, the chunks to `PUT …/parts/{n}` side by side,
//! and `POST …/complete` stores the packet. An interrupted push is
//! recorded in the upload-state folder and continued by the next push of
//! the same packet.

use std::collections::{HashMap, HashSet};
use std::fs;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{mpsc, Mutex};

use packet_core::{Body, Digest, Manifest};
use pillbox_wire::chunks::{self, BatchLimits};
use pillbox_wire::recipes::{self as wire_recipes, BodyRecipe, ChunkName, Recipes, Run};
use pillbox_wire::{ApiCode, ErrorBody, MissingChunks, PartReceived, Push, Stored};
use serde::Serialize;

use super::bodies::Bodies;
use super::client::{bad_answer, parse_answer, status_error, Remote};
use super::upload_state::{lock_file, push_state_file, PushState, StateLock};
use super::{percent_encode, push_path};
use crate::chunking::{self, Piece, BODIES, MANIFEST};
use crate::compress::{self, Framed};
use crate::error::{CliError, Refused, Result};
use crate::progress::Progress;

/// What to push.
pub struct DeltaRequest<'a> {
    /// The packet's manifest (verified).
    pub manifest: &'a Manifest,
    /// Its exact `packet.json` bytes.
    pub json: &'a [u8],
    /// Its digest.
    pub digest: Digest,
    /// Its size.
    pub size: u64,
    /// Where its bodies are read from.
    pub bodies: &'a dyn Bodies,
    /// Large bodies already cut (by body sha256): not read again to cut.
    pub cuts: &'a HashMap<Digest, Vec<Piece>>,
    /// Stored packets it builds on.
    pub bases: Vec<Digest>,
    /// What this machine knows the first base holds, if it does.
    pub known: Option<&'a KnownBase>,
    /// Labels for the stored packet.
    pub labels: &'a [String],
    /// The upload-state folder.
    pub state_dir: &'a Path,
}

/// What a stored packet the push builds on holds, as this machine knows it
/// (from the workspace record of the last checkpoint saved or restored):
/// enough to tell, without asking, which chunks a new packet adds.
#[derive(Debug)]
pub struct KnownBase {
    /// The base packet.
    pub digest: Digest,
    /// Its `packet.json`'s chunks.
    pub manifest: Vec<ChunkName>,
    /// Every body it holds.
    pub bodies: HashSet<Body>,
    /// Its large bodies' chunks as the store holds them, by member path.
    pub large: HashMap<String, (Body, Vec<ChunkName>)>,
}

impl KnownBase {
    /// Every chunk the base holds that this machine knows of.
    fn chunks(&self) -> HashSet<ChunkName> {
        let mut out: HashSet<ChunkName> = self.manifest.iter().copied().collect();
        for b in &self.bodies {
            if BODIES.is_one_chunk(b.size) {
                out.insert(ChunkName {
                    sha256: b.sha256,
                    size: b.size as u32,
                });
            }
        }
        for (_, chunks) in self.large.values() {
            out.extend(chunks.iter().copied());
        }
        out
    }
}

/// What a delta push did (`delta` in `pillbox.checkpoint.push/1`).
#[derive(Debug, Default, Serialize)]
pub struct DeltaReport {
    /// The bases the store used (when the create stored the packet: the
    /// bases named).
    pub bases: Vec<String>,
    /// Bodies the store lacked after the push was created (0 when it was
    /// completed at once).
    pub missing_bodies: u64,
    /// Their bytes.
    pub missing_bytes: u64,
    /// Chunks sent (manifest chunks and body chunks).
    pub chunks_sent: u64,
    /// Their bytes before compression.
    pub chunk_bytes: u64,
    /// Their bytes as sent (each chunk compressed on its own).
    pub frame_bytes: u64,
    /// Body bytes of the packet that were not sent: found in a base or
    /// sent earlier (whole bodies, and chunks of changed large bodies).
    pub reused_bytes: u64,
    /// Parts this run uploaded.
    pub parts_sent: u64,
    /// Requests of the push: creates, recipes, parts and completes.
    pub requests: u64,
    /// True when the push was created and completed in one request.
    pub one_request: bool,
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

/// Frame bytes (as sent) a create carries beyond the manifest's chunks:
/// past this, the rest goes in parts, several at once.
const CREATE_FRAME_BYTES: u64 = 8 << 20;

/// Raw bytes of the frames a create carries, manifest chunks included.
const CREATE_RAW_BYTES: u64 = 32 << 20;

/// Creates sent again with the manifest chunks the store named missing.
const CREATE_ATTEMPTS: usize = 3;

/// Chunks described per `POST …/recipes` request.
const RECIPE_CHUNKS_PER_REQUEST: usize = 100_000;

/// Parts uploaded at once: compression and the store's writes overlap.
const PARALLEL_PARTS: usize = 3;

/// The most raw chunk bytes one part carries (the store may allow more).
const PART_TARGET: u64 = 32 << 20;

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
    let result = Push2::new(remote, request, progress).drive(&state_path);
    if result.is_ok() {
        let _ = fs::remove_file(&lock_path);
    }
    drop(lock);
    result
}

/// A distinct body of the packet: the first member that has it.
#[derive(Clone, Debug)]
struct PacketBody {
    index: usize,
    path: String,
    body: Body,
}

/// One push being driven.
struct Push2<'r> {
    remote: &'r Remote,
    request: &'r DeltaRequest<'r>,
    progress: &'r Progress,
    /// `packet.json`'s chunks.
    manifest_pieces: Vec<Piece>,
    /// The packet's distinct bodies, in manifest order.
    bodies: Vec<PacketBody>,
    /// Large bodies cut in this run.
    cut_here: HashMap<Digest, Vec<Piece>>,
    /// Large bodies whose recipe the store received in this run.
    described: HashSet<Digest>,
    report: DeltaReport,
}

/// A chunk to send: where its bytes are (member `index`'s body from
/// `offset`, or `packet.json` when `index` is `None`), its size and name.
#[derive(Clone, Copy, Debug)]
struct Item {
    index: Option<usize>,
    offset: u64,
    size: u32,
    sha256: Digest,
}

/// What a create answered.
enum Created {
    /// Stored: by this request (true) or before it (false).
    Stored(bool),
    /// The push is open: send what it lacks.
    Open(Box<Push>),
}

impl<'r> Push2<'r> {
    fn new(remote: &'r Remote, request: &'r DeltaRequest<'r>, progress: &'r Progress) -> Self {
        let mut seen = HashSet::new();
        let bodies = request
            .manifest
            .members
            .iter()
            .enumerate()
            .filter_map(|(index, m)| {
                let body = m.body()?;
                seen.insert(body).then(|| PacketBody {
                    index,
                    path: m.path.to_string(),
                    body,
                })
            })
            .collect();
        Push2 {
            remote,
            request,
            progress,
            manifest_pieces: chunking::cut_bytes(request.json, &MANIFEST),
            bodies,
            cut_here: HashMap::new(),
            described: HashSet::new(),
            report: DeltaReport::default(),
        }
    }

    fn drive(mut self, state_path: &Path) -> Result<DeltaOutcome> {
        let request = self.request;
        let saved = PushState::load(
            state_path,
            self.remote.base(),
            &request.digest,
            request.size,
        );
        let mut session = match &saved {
            Some(s) => get_session(self.remote, &s.push_id)?,
            None => None,
        };
        let resumed = session.is_some();
        if session.is_none() {
            match self.create()? {
                Created::Stored(created) => {
                    let _ = fs::remove_file(state_path);
                    self.report.one_request = created;
                    if created {
                        // Stored from what the bases held and what was sent.
                        self.report.bases = request.bases.iter().map(|b| b.to_string()).collect();
                    }
                    self.finish_report();
                    return Ok(DeltaOutcome {
                        created,
                        resumed,
                        report: self.report,
                    });
                }
                Created::Open(s) => {
                    PushState {
                        remote: self.remote.base().to_owned(),
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
        self.report.bases = session.bases_used.clone();
        self.report.missing_bodies = session.missing.len() as u64;
        self.report.missing_bytes = session.missing_bytes;
        let mut next_part = session
            .parts
            .iter()
            .map(|p| u32::from(p.number))
            .max()
            .unwrap_or(0)
            + 1;
        for _round in 0..ROUNDS {
            let items = self.plan(&session)?;
            self.upload(&session, &items, &mut next_part)?;
            match self.complete(&session)? {
                Completed::Stored(created) => {
                    let _ = fs::remove_file(state_path);
                    self.finish_report();
                    return Ok(DeltaOutcome {
                        created,
                        resumed,
                        report: self.report,
                    });
                }
                Completed::Incomplete => match get_session(self.remote, &session.push_id)? {
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

    fn finish_report(&mut self) {
        let unique: u64 = self.bodies.iter().map(|b| b.body.size).sum();
        self.report.reused_bytes = unique.saturating_sub(self.report.chunk_bytes);
    }

    /// The chunks of a large body: cut before the push, in this run, or
    /// now (read from its source, which must hash to the manifest's
    /// sha256).
    fn pieces(&mut self, b: &PacketBody) -> Result<Vec<Piece>> {
        if let Some(p) = self
            .request
            .cuts
            .get(&b.body.sha256)
            .or_else(|| self.cut_here.get(&b.body.sha256))
        {
            return Ok(p.clone());
        }
        let cut = cut_all(
            self.request.bodies,
            &[(b.index, b.body.sha256, b.body.size)],
            self.progress,
        )?;
        let pieces = cut.into_iter().next().map(|(_, p)| p).unwrap_or_default();
        self.cut_here.insert(b.body.sha256, pieces.clone());
        Ok(pieces)
    }

    /// `packet.json`'s recipe.
    fn manifest_recipe(&self) -> Vec<ChunkName> {
        self.manifest_pieces.iter().map(Piece::name).collect()
    }

    /// The create, sent again (at most [`CREATE_ATTEMPTS`] times) with the
    /// manifest chunks the store says it lacks.
    fn create(&mut self) -> Result<Created> {
        let offer = self.offer()?;
        let mut manifest_frames: HashSet<Digest> = offer.manifest.iter().copied().collect();
        let mut query = format!("digest={}&size={}", self.request.digest, self.request.size);
        for b in &self.request.bases {
            query.push_str(&format!("&base={b}"));
        }
        for l in self.request.labels {
            query.push_str(&format!("&label={}", percent_encode(l)));
        }
        let path = format!("/v1/pushes?{query}");
        let what = "POST /v1/pushes";
        let mut recipes = Recipes {
            manifest: self.manifest_recipe(),
            bodies: offer.recipes.clone(),
        };
        let mut body_items = offer.items.clone();
        for _attempt in 0..CREATE_ATTEMPTS {
            // Each chunk once (packet.json may repeat one), the manifest's
            // first.
            let mut once = HashSet::new();
            let items: Vec<Item> = self
                .manifest_pieces
                .iter()
                .filter(|p| manifest_frames.contains(&p.sha256))
                .map(|p| Item {
                    index: None,
                    offset: p.offset,
                    size: p.size,
                    sha256: p.sha256,
                })
                .chain(body_items.iter().copied())
                .filter(|i| once.insert(i.sha256))
                .collect();
            let Some((batch, sent)) = self.batch(&items, true, None)? else {
                return Err(unlimited_batch_stopped());
            };
            let body = recipes.encode_push(&batch);
            self.report.requests += 1;
            let r = self.remote.send_bytes(
                what,
                "POST",
                &path,
                wire_recipes::PUSH_MEDIA_TYPE,
                &body,
                &[],
            )?;
            let status = r.status().as_u16();
            match status {
                200 | 201 => {
                    let bytes = self.remote.read_body(what, r, 1 << 20)?;
                    let stored: Stored = parse_answer(what, &bytes)?;
                    if status == 201 {
                        self.count_sent(&sent);
                        self.described
                            .extend(offer.recipes.iter().map(|r| r.body.sha256));
                    }
                    return Ok(Created::Stored(status == 201 && stored.created));
                }
                202 => {
                    let bytes = self.remote.read_body(what, r, 64 << 20)?;
                    let session: Push = parse_answer(what, &bytes)?;
                    self.count_sent(&sent);
                    self.described
                        .extend(offer.recipes.iter().map(|r| r.body.sha256));
                    return Ok(Created::Open(Box::new(session)));
                }
                // A store that holds more or other than this machine knows
                // of the base refuses chunks it does not need, or what the
                // copies make of its chunks: the create goes again with the
                // manifest's chunks and every body chunk named, no body
                // frame (a refusal of anything else comes back the same).
                422 if recipes.bodies != offer.plain || !body_items.is_empty() => {
                    recipes.bodies = offer.plain.clone();
                    body_items.clear();
                }
                409 => {
                    let bytes = self.remote.read_body(what, r, 64 << 20)?;
                    let problem = serde_json::from_slice::<ErrorBody>(&bytes)
                        .map_err(|e| {
                            bad_answer(what, &format!("a 409 that is not a refusal: {e}"))
                        })?
                        .error;
                    let lacking = match (&problem.missing, problem.api_code()) {
                        (Some(m), Some(ApiCode::ManifestIncomplete)) => m,
                        _ => return Err(refusal(what, 409, problem)),
                    };
                    let before = manifest_frames.len();
                    for h in lacking {
                        let d = Digest::from_hex(h).map_err(|e| bad_answer(what, e.message()))?;
                        if self.manifest_pieces.iter().any(|p| p.sha256 == d) {
                            manifest_frames.insert(d);
                        }
                    }
                    if manifest_frames.len() == before {
                        // It lacks chunks it was sent, or that are not ours.
                        return Err(refusal(what, 409, problem));
                    }
                }
                _ => return Err(status_error(what, r)),
            }
        }
        Err(bad_answer(
            what,
            "the store still lacks chunks of packet.json after they were sent",
        ))
    }

    /// What the create carries besides the manifest's recipe: the manifest
    /// chunks the bases lack as far as this machine knows, and, when it
    /// knows what the base holds, every new body's chunks (while they fit)
    /// and the recipes of new large bodies.
    fn offer(&mut self) -> Result<Offer> {
        // Only the record's packet as the one base: another base may hold
        // what is new here, and the store would refuse it sent again.
        let known = self
            .request
            .known
            .filter(|k| self.request.bases[..] == [k.digest]);
        let Some(known) = known else {
            // Nothing known of the bases: send every chunk of packet.json
            // when there are none; else none, and the store names the
            // ones it lacks.
            let manifest = if self.request.bases.is_empty() {
                self.manifest_pieces.iter().map(|p| p.sha256).collect()
            } else {
                Vec::new()
            };
            return Ok(Offer {
                manifest,
                ..Offer::default()
            });
        };
        let have = known.chunks();
        let mut offer = Offer {
            manifest: self
                .manifest_pieces
                .iter()
                .filter(|p| !have.contains(&p.name()))
                .map(|p| p.sha256)
                .collect(),
            ..Offer::default()
        };
        let mut scheduled: HashSet<Digest> = HashSet::new();
        let (mut frame_bytes, mut raw_bytes) = (0u64, 0u64);
        let mut fits = true;
        let new: Vec<PacketBody> = self
            .bodies
            .iter()
            .filter(|b| !known.bodies.contains(&b.body))
            .cloned()
            .collect();
        for b in &new {
            let mut add = |item: Item, offer: &mut Offer| {
                raw_bytes += u64::from(item.size);
                // Sizes as sent are not known before compression: count raw
                // bytes against both bounds.
                frame_bytes += u64::from(item.size);
                if frame_bytes > CREATE_FRAME_BYTES || raw_bytes > CREATE_RAW_BYTES {
                    fits = false;
                }
                if fits {
                    offer.items.push(item);
                }
            };
            if BODIES.is_one_chunk(b.body.size) {
                if scheduled.insert(b.body.sha256) {
                    add(
                        Item {
                            index: Some(b.index),
                            offset: 0,
                            size: b.body.size as u32,
                            sha256: b.body.sha256,
                        },
                        &mut offer,
                    );
                }
                continue;
            }
            let pieces = self.pieces(b)?;
            let base = known.large.get(&b.path);
            offer.recipes.push(recipe_of(b.body, &pieces, base));
            offer.plain.push(recipe_of(b.body, &pieces, None));
            for p in &pieces {
                if !have.contains(&p.name()) && scheduled.insert(p.sha256) {
                    add(
                        Item {
                            index: Some(b.index),
                            offset: p.offset,
                            size: p.size,
                            sha256: p.sha256,
                        },
                        &mut offer,
                    );
                }
            }
        }
        if !fits {
            offer.items.clear();
        }
        Ok(offer)
    }

    /// Reads `items` (each checked against its name), frames each and
    /// encodes the batch; returns it and what it carries. Given a `limit`,
    /// none as soon as the frames come to more than `limit` bytes as sent
    /// (what is held stays within the limit and one frame); without one,
    /// always the batch.
    fn batch(
        &self,
        items: &[Item],
        zstd_ok: bool,
        limit: Option<u64>,
    ) -> Result<Option<(Vec<u8>, Sent)>> {
        let mut frames = Vec::with_capacity(items.len());
        let mut stored: Vec<Vec<u8>> = Vec::with_capacity(items.len());
        let mut sent = Sent::default();
        for item in items {
            let raw = self.read_item(item)?;
            let Framed { frame, stored: s } = compress::frame(item.sha256, &raw, zstd_ok)?;
            sent.chunks += 1;
            sent.raw += u64::from(frame.raw_size);
            sent.stored += u64::from(frame.stored_size);
            if limit.is_some_and(|limit| sent.stored > limit) {
                return Ok(None);
            }
            frames.push(frame);
            stored.push(s.into_owned());
        }
        let mut batch = Vec::with_capacity(
            chunks::HEAD_BYTES + chunks::ENTRY_BYTES * frames.len() + sent.stored as usize,
        );
        chunks::encode_table(&frames, &mut batch);
        for s in &stored {
            batch.extend_from_slice(s);
        }
        Ok(Some((batch, sent)))
    }

    /// A chunk's bytes, checked against its name.
    fn read_item(&self, item: &Item) -> Result<Vec<u8>> {
        let mut buf = vec![0u8; item.size as usize];
        match item.index {
            None => {
                let at = item.offset as usize;
                let bytes =
                    self.request.json.get(at..at + buf.len()).ok_or_else(|| {
                        CliError::Bug("a chunk past the end of packet.json".into())
                    })?;
                buf.copy_from_slice(bytes);
            }
            Some(index) => {
                self.request.bodies.read_at(index, item.offset, &mut buf)?;
                if Digest::of(&buf) != item.sha256 {
                    return Err(self.request.bodies.changed(index));
                }
            }
        }
        Ok(buf)
    }

    fn count_sent(&mut self, sent: &Sent) {
        self.report.chunks_sent += sent.chunks;
        self.report.chunk_bytes += sent.raw;
        self.report.frame_bytes += sent.stored;
    }

    /// The chunks the store lacks, in the packet's order, each once: the
    /// chunks of packet.json it names, small missing bodies whole, and the
    /// missing chunks of large ones (whose
    /// recipes are sent first, unless the store has them from this run).
    fn plan(&mut self, session: &Push) -> Result<Vec<Item>> {
        let hexes = |list: &[String], what: &str| -> Result<HashSet<Digest>> {
            list.iter()
                .map(|h| Digest::from_hex(h))
                .collect::<std::result::Result<_, _>>()
                .map_err(|e| bad_answer(what, e.message()))
        };
        let missing = hexes(&session.missing, "the push's missing bodies")?;
        let mut missing_chunks = hexes(&session.missing_chunks, "the push's missing chunks")?;
        let wanted: Vec<PacketBody> = self
            .bodies
            .iter()
            .filter(|b| missing.contains(&b.body.sha256))
            .cloned()
            .collect();
        let large: Vec<(usize, Digest, u64)> = wanted
            .iter()
            .filter(|b| {
                !BODIES.is_one_chunk(b.body.size)
                    && !self.request.cuts.contains_key(&b.body.sha256)
                    && !self.cut_here.contains_key(&b.body.sha256)
            })
            .map(|b| (b.index, b.body.sha256, b.body.size))
            .collect();
        self.progress
            .phase("chunk", large.iter().map(|(_, _, s)| s).sum());
        for (sha, pieces) in cut_all(self.request.bodies, &large, self.progress)? {
            self.cut_here.insert(sha, pieces);
        }
        let known = self
            .request
            .known
            .filter(|k| session.bases_used.first() == Some(&k.digest.to_string()));
        let mut undescribed = Vec::new();
        for b in &wanted {
            if !BODIES.is_one_chunk(b.body.size) && !self.described.contains(&b.body.sha256) {
                let pieces = self.pieces(b)?;
                let base = known.and_then(|k| k.large.get(&b.path));
                undescribed.push(recipe_of(b.body, &pieces, base));
            }
        }
        missing_chunks.extend(self.send_recipes(session, &undescribed)?);
        let mut items = Vec::new();
        let mut scheduled = HashSet::new();
        // Chunks of packet.json the store lost (a pack it held them in was
        // collected while the push was open) are sent again too.
        for p in &self.manifest_pieces {
            if missing_chunks.contains(&p.sha256) && scheduled.insert(p.sha256) {
                items.push(Item {
                    index: None,
                    offset: p.offset,
                    size: p.size,
                    sha256: p.sha256,
                });
            }
        }
        for b in &wanted {
            if BODIES.is_one_chunk(b.body.size) {
                if scheduled.insert(b.body.sha256) {
                    items.push(Item {
                        index: Some(b.index),
                        offset: 0,
                        size: b.body.size as u32,
                        sha256: b.body.sha256,
                    });
                }
                continue;
            }
            for p in self.pieces(b)? {
                if missing_chunks.contains(&p.sha256) && scheduled.insert(p.sha256) {
                    items.push(Item {
                        index: Some(b.index),
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

    /// `POST /v1/pushes/{id}/recipes`, in requests of bounded size; returns
    /// the chunks the store lacks.
    fn send_recipes(&mut self, session: &Push, recipes: &[BodyRecipe]) -> Result<HashSet<Digest>> {
        let path = format!("{}/recipes", push_path(&session.push_id));
        let what = format!("POST {path}");
        let mut missing = HashSet::new();
        let mut start = 0;
        while start < recipes.len() {
            let mut end = start;
            let mut runs = 0;
            while end < recipes.len() && (end == start || runs < RECIPE_CHUNKS_PER_REQUEST) {
                runs += recipes[end].runs.len();
                end += 1;
            }
            let doc = Recipes {
                manifest: Vec::new(),
                bodies: recipes[start..end].to_vec(),
            }
            .encode();
            self.report.requests += 1;
            let r = self.remote.send_bytes(
                &what,
                "POST",
                &path,
                wire_recipes::MEDIA_TYPE,
                &doc,
                &[],
            )?;
            if r.status().as_u16() != 200 {
                return Err(status_error(&what, r));
            }
            let bytes = self.remote.read_body(&what, r, 64 << 20)?;
            let answer: MissingChunks = parse_answer(&what, &bytes)?;
            for h in answer.missing_chunks {
                missing.insert(Digest::from_hex(&h).map_err(|e| bad_answer(&what, e.message()))?);
            }
            self.described
                .extend(recipes[start..end].iter().map(|r| r.body.sha256));
            start = end;
        }
        Ok(missing)
    }

    /// Uploads the items in parts, [`PARALLEL_PARTS`] at a time.
    fn upload(&mut self, session: &Push, items: &[Item], next_part: &mut u32) -> Result<()> {
        let parts = parts_of(items, &session.part_limits, true);
        self.progress
            .phase("upload", items.iter().map(|i| u64::from(i.size)).sum());
        let first = *next_part;
        // Numbers for the parts a lone body's part is cut into again.
        let spare = AtomicU32::new(first + parts.len() as u32);
        let (jobs_tx, jobs_rx) = mpsc::channel::<(u32, std::ops::Range<usize>)>();
        for (n, range) in parts.iter().enumerate() {
            let _ = jobs_tx.send((first + n as u32, range.clone()));
        }
        drop(jobs_tx);
        let jobs = Mutex::new(jobs_rx);
        let stop = AtomicBool::new(false);
        let failure: Mutex<Option<CliError>> = Mutex::new(None);
        let (chunks_sent, raw, stored, sent_parts) = (
            AtomicU64::new(0),
            AtomicU64::new(0),
            AtomicU64::new(0),
            AtomicU64::new(0),
        );
        let zstd_ok = compress::store_takes_zstd(&session.part_limits);
        let this = &*self;
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
                    match this.send_part(session, number, part, zstd_ok, &spare) {
                        Ok(sent) => {
                            chunks_sent.fetch_add(sent.chunks, Ordering::Relaxed);
                            raw.fetch_add(sent.raw, Ordering::Relaxed);
                            stored.fetch_add(sent.stored, Ordering::Relaxed);
                            sent_parts.fetch_add(sent.parts, Ordering::Relaxed);
                            this.progress.inc(sent.raw);
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
        *next_part = spare.into_inner();
        let n = sent_parts.into_inner();
        self.report.parts_sent += n;
        self.report.requests += n;
        self.count_sent(&Sent {
            chunks: chunks_sent.into_inner(),
            raw: raw.into_inner(),
            stored: stored.into_inner(),
            parts: n,
        });
        match failure.into_inner().ok().flatten() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// Reads one part's chunks (each checked against its name), frames
    /// each and `PUT`s the batch. A lone body's part larger than the
    /// store's limit once compressed is cut again and sent as parts
    /// numbered from `spare`.
    fn send_part(
        &self,
        session: &Push,
        number: u32,
        part: &[Item],
        zstd_ok: bool,
        spare: &AtomicU32,
    ) -> Result<Sent> {
        let limit = session.part_limits.max_bytes;
        let Some((batch, sent)) = self.batch(part, zstd_ok, Some(limit))? else {
            let mut all = Sent::default();
            for range in parts_of(part, &session.part_limits, false) {
                let n = spare.fetch_add(1, Ordering::Relaxed);
                let Some((batch, sent)) = self.batch(&part[range.clone()], zstd_ok, None)? else {
                    return Err(unlimited_batch_stopped());
                };
                self.put_part(session, n, &part[range], &batch)?;
                all.chunks += sent.chunks;
                all.raw += sent.raw;
                all.stored += sent.stored;
                all.parts += 1;
            }
            return Ok(all);
        };
        self.put_part(session, number, part, &batch)?;
        Ok(Sent { parts: 1, ..sent })
    }

    /// `PUT`s one part's batch.
    fn put_part(&self, session: &Push, number: u32, part: &[Item], batch: &[u8]) -> Result<()> {
        let path = format!("{}/parts/{number}", push_path(&session.push_id));
        let what = format!("PUT {path}");
        let r = self
            .remote
            .send_bytes(&what, "PUT", &path, chunks::MEDIA_TYPE, batch, &[])?;
        if r.status().as_u16() != 200 {
            return Err(status_error(&what, r));
        }
        let bytes = self.remote.read_body(&what, r, 1 << 20)?;
        let answer: PartReceived = parse_answer(&what, &bytes)?;
        if u32::from(answer.number) != number || answer.frames as usize != part.len() {
            return Err(bad_answer(
                &what,
                &format!("part {} with {} frames", answer.number, answer.frames),
            ));
        }
        Ok(())
    }

    /// `POST /v1/pushes/{id}/complete`: the store proves what is not
    /// proven yet and stores the packet, which can take long.
    fn complete(&mut self, session: &Push) -> Result<Completed> {
        let path = format!("{}/complete", push_path(&session.push_id));
        let what = format!("POST {path}");
        self.report.requests += 1;
        let r = self
            .remote
            .send_bytes(&what, "POST", &path, "application/json", b"null", &[])?;
        match r.status().as_u16() {
            s @ (200 | 201) => {
                let bytes = self.remote.read_body(&what, r, 1 << 20)?;
                let _: Stored = parse_answer(&what, &bytes)?;
                Ok(Completed::Stored(s == 201))
            }
            409 => Ok(Completed::Incomplete),
            422 => Ok(Completed::Refused(status_error(&what, r))),
            // A retried complete whose first attempt succeeded finds the
            // push gone: the packet is there.
            404 if super::client::is_stored(self.remote, &self.request.digest)? => {
                Ok(Completed::Stored(false))
            }
            _ => Err(status_error(&what, r)),
        }
    }
}

/// What a create carries: the manifest chunks to send (by sha256), body
/// chunks, and body recipes (with copy runs, and with every chunk named).
#[derive(Default)]
struct Offer {
    manifest: Vec<Digest>,
    items: Vec<Item>,
    recipes: Vec<BodyRecipe>,
    plain: Vec<BodyRecipe>,
}

/// What a batch carried.
#[derive(Default)]
struct Sent {
    chunks: u64,
    raw: u64,
    stored: u64,
    /// Parts (`PUT`s) it took.
    parts: u64,
}

/// A large body's recipe: runs of chunks it shares, in order, with the
/// base body at its path are copies of that body's chunks (an appended log
/// copies all but the old last chunk); every other chunk is named.
fn recipe_of(body: Body, pieces: &[Piece], base: Option<&(Body, Vec<ChunkName>)>) -> BodyRecipe {
    let mut runs = Vec::new();
    let positions: HashMap<ChunkName, usize> = base
        .map(|(_, chunks)| {
            let mut m = HashMap::with_capacity(chunks.len());
            for (i, c) in chunks.iter().enumerate() {
                m.entry(*c).or_insert(i);
            }
            m
        })
        .unwrap_or_default();
    let mut i = 0;
    while i < pieces.len() {
        let name = pieces[i].name();
        if let (Some(&j), Some((base_body, chunks))) = (positions.get(&name), base) {
            let mut n = 1;
            while i + n < pieces.len()
                && j + n < chunks.len()
                && pieces[i + n].name() == chunks[j + n]
            {
                n += 1;
            }
            if n >= 2 {
                runs.push(Run::Copy {
                    body: *base_body,
                    first: j as u32,
                    count: n as u32,
                });
                i += n;
                continue;
            }
        }
        runs.push(Run::Chunk(name));
        i += 1;
    }
    BodyRecipe { body, runs }
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

/// The error of a refusal already read, in the CLI's terms.
fn refusal(what: &str, status: u16, problem: pillbox_wire::Problem) -> CliError {
    super::refusal::refusal(what, status, Some(problem))
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
                    let cut = chunking::cut(reader, &BODIES, &bodies.label(index), |p, _| {
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

/// [`Push2::batch`] stopped a batch it was given no limit for.
fn unlimited_batch_stopped() -> CliError {
    CliError::Bug("a batch with no limit was stopped".into())
}

/// Groups `items` into parts within the store's limits, in order. Sizes
/// as sent are known only once compressed: raw sizes count against the
/// limit on bytes as sent too (a frame is never larger than its chunk). A
/// large body's chunks are not split between parts when the part has
/// other items before them: the part that carries them all, in order, has
/// the body proven as they arrive, and `complete` reads none of it back.
/// With `lone`, a body too large for one such part starts a part of its
/// own that may hold up to the store's raw limit of its chunks, to be cut
/// again ([`parts_of`] without `lone`) if they are larger than the limit
/// once compressed.
fn parts_of(
    items: &[Item],
    limits: &pillbox_wire::PartLimits,
    lone: bool,
) -> Vec<std::ops::Range<usize>> {
    let max_bytes = limits.max_bytes.min(limits.max_raw_bytes).min(PART_TARGET);
    let lone_bytes = limits.max_raw_bytes.max(max_bytes);
    let max_frames = (limits.max_frames as usize).min(BatchLimits::MAX_FRAMES as usize);
    let mut parts = Vec::new();
    let mut start = 0;
    let mut bytes = chunks::HEAD_BYTES as u64;
    // Whether the part so far is one large body's chunks from its first.
    let mut alone = false;
    let mut i = 0;
    while i < items.len() {
        let more = chunks::ENTRY_BYTES as u64 + u64::from(items[i].size);
        if i == start {
            alone = lone && items[i].index.is_some() && items[i].offset == 0;
        } else {
            alone = alone && items[i].index == items[start].index;
        }
        let cap = if alone { lone_bytes } else { max_bytes };
        if i > start && (bytes + more > cap || i - start >= max_frames) {
            let mut cut = i;
            let body = items[i].index;
            if body.is_some() && items[i].offset > 0 {
                while cut > start && items[cut - 1].index == body {
                    cut -= 1;
                }
                if cut == start {
                    cut = i;
                }
            }
            parts.push(start..cut);
            start = cut;
            i = cut;
            bytes = chunks::HEAD_BYTES as u64;
            continue;
        }
        bytes += more;
        i += 1;
    }
    if start < items.len() {
        parts.push(start..items.len());
    }
    parts
}

enum Completed {
    /// Stored: by this push (true) or before it (false).
    Stored(bool),
    /// The store still lacks some bodies or chunks.
    Incomplete,
    /// The store refused the packet and dropped the push.
    Refused(CliError),
}

#[cfg(test)]
mod tests {
    use super::*;
    use pillbox_wire::PartLimits;

    fn item(size: u32) -> Item {
        Item {
            index: Some(0),
            offset: 0,
            size,
            sha256: Digest::of(&size.to_be_bytes()),
        }
    }

    fn limits(max_bytes: u64, max_frames: u32) -> PartLimits {
        PartLimits {
            max_bytes,
            max_raw_bytes: max_bytes,
            max_frames,
            encodings: vec!["identity".into(), "zstd".into()],
            zstd_max_window: 8 << 20,
        }
    }

    #[test]
    fn parts_respect_the_byte_and_frame_limits() {
        let items: Vec<Item> = (0..10).map(|_| item(1000)).collect();
        let three = (chunks::HEAD_BYTES + 3 * (chunks::ENTRY_BYTES + 1000)) as u64;
        assert_eq!(
            parts_of(&items, &limits(three, 100), true),
            vec![0..3, 3..6, 6..9, 9..10]
        );
        assert_eq!(
            parts_of(&items, &limits(1 << 30, 4), true),
            vec![0..4, 4..8, 8..10]
        );
        // A chunk larger than the limit still goes, alone.
        let big = vec![item(10), item(5000), item(10)];
        assert_eq!(
            parts_of(&big, &limits(1000, 100), true),
            vec![0..1, 1..2, 2..3]
        );
        assert!(parts_of(&[], &limits(1000, 100), true).is_empty());
    }

    #[test]
    fn a_large_bodys_chunks_stay_in_one_part_when_they_can() {
        let piece = |index: usize, offset: u64| Item {
            index: Some(index),
            offset,
            size: 1000,
            sha256: Digest::of(&(index as u64 * 7 + offset).to_be_bytes()),
        };
        // Two small bodies, a body of three chunks, one more small body.
        let items = vec![
            piece(0, 0),
            piece(1, 0),
            piece(2, 0),
            piece(2, 1000),
            piece(2, 2000),
            piece(3, 0),
        ];
        let four = (chunks::HEAD_BYTES + 4 * (chunks::ENTRY_BYTES + 1000)) as u64;
        assert_eq!(parts_of(&items, &limits(four, 100), true), vec![0..2, 2..6]);
        // A body larger than a part is split where it must be.
        let two = (chunks::HEAD_BYTES + 2 * (chunks::ENTRY_BYTES + 1000)) as u64;
        assert_eq!(
            parts_of(&items, &limits(two, 100), true),
            vec![0..2, 2..4, 4..6]
        );
    }

    #[test]
    fn a_body_larger_than_a_part_has_a_part_of_its_own_up_to_the_raw_limit() {
        let piece = |index: usize, offset: u64| Item {
            index: Some(index),
            offset,
            size: 1000,
            sha256: Digest::of(&(index as u64 * 7 + offset).to_be_bytes()),
        };
        // A small body, a body of six chunks, one more small body.
        let mut items = vec![piece(0, 0)];
        items.extend((0..6).map(|k| piece(1, k * 1000)));
        items.push(piece(2, 0));
        let entries = |n: usize| (chunks::HEAD_BYTES + n * (chunks::ENTRY_BYTES + 1000)) as u64;
        let mut l = limits(entries(2), 100);
        // Raw bytes may be twice those sent: the body's six chunks fit in
        // two parts of four raw chunks' worth, each its own.
        l.max_raw_bytes = entries(4);
        assert_eq!(parts_of(&items, &l, true), vec![0..1, 1..5, 5..7, 7..8]);
        // Cut again as an ordinary part, each is within the bytes sent.
        assert_eq!(parts_of(&items[1..5], &l, false), vec![0..2, 2..4]);
        assert_eq!(
            parts_of(&items, &l, false),
            vec![0..1, 1..3, 3..5, 5..7, 7..8]
        );
        // A body that does not start the part is not given one of its own
        // mid-way: it starts the next.
        let mut mid = vec![piece(0, 0)];
        mid.extend((0..3).map(|k| piece(1, k * 1000)));
        assert_eq!(parts_of(&mid, &l, true), vec![0..1, 1..4]);
        // The frame limit holds.
        assert_eq!(
            parts_of(&items[1..7], &limits(1 << 30, 4), true),
            vec![0..4, 4..6]
        );
    }

    fn name(n: u32) -> ChunkName {
        ChunkName {
            sha256: Digest::of(&n.to_be_bytes()),
            size: 100_000 + n,
        }
    }

    fn piece(n: u32) -> Piece {
        let c = name(n);
        Piece {
            offset: 0,
            size: c.size,
            sha256: c.sha256,
        }
    }

    #[test]
    fn an_appended_log_copies_all_but_the_last_chunk_of_the_old_one() {
        let old = Body {
            sha256: Digest::of(b"old"),
            size: 1,
        };
        let new = Body {
            sha256: Digest::of(b"new"),
            size: 2,
        };
        let base = (old, (0..10).map(name).collect::<Vec<_>>());
        let pieces: Vec<Piece> = (0..9).chain([20, 21]).map(piece).collect();
        let r = recipe_of(new, &pieces, Some(&base));
        assert_eq!(
            r.runs,
            vec![
                Run::Copy {
                    body: old,
                    first: 0,
                    count: 9
                },
                Run::Chunk(name(20)),
                Run::Chunk(name(21)),
            ]
        );
        // A chunk shared alone is named, not copied; a stretch from the
        // middle is copied from where it is.
        let pieces: Vec<Piece> = [30, 4, 31, 6, 7, 8].into_iter().map(piece).collect();
        let r = recipe_of(new, &pieces, Some(&base));
        assert_eq!(
            r.runs,
            vec![
                Run::Chunk(name(30)),
                Run::Chunk(name(4)),
                Run::Chunk(name(31)),
                Run::Copy {
                    body: old,
                    first: 6,
                    count: 3
                },
            ]
        );
        let plain = recipe_of(new, &pieces, None);
        assert!(plain.runs.iter().all(|r| matches!(r, Run::Chunk(_))));
        assert_eq!(plain.runs.len(), 6);
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
        let packed = crate::pack::pack_for_save(&request, None, &Progress::new(true)).unwrap();
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
}
