//! A push part streamed in (docs/transfer.md, "Parts"): the body is
//! decoded as it arrives, within its caps ([`crate::body`]), read as a
//! chunk batch by pillbox-wire's decoder, every frame checked against the
//! push's plan and hashed, and the chunks the store does not hold yet
//! written into one new pack. Only the batch's table and zstd's window are
//! held in wasm; frame bytes stay in the runtime's buffers and go to R2
//! and to the hash from there. The pack's last bytes are handed to R2 only
//! once every frame is verified; a refusal aborts the put, so a refused
//! part stores nothing.

use std::collections::HashSet;

use js_sys::Uint8Array;
use packet_core::{Digest, Hasher};
use pillbox_wire::chunks::{BatchLimits, Decoded, Decoder, Frame};
use wasm_bindgen_futures::JsFuture;
use worker::{Bucket, D1Database, Data};

use crate::body::Body;
use crate::config::FrameHasher;
use crate::index;
use crate::parts::{FrameAt, PartRecord};
use crate::plan::Plan;
use crate::problem::Problem;
use crate::store::{self, FixedPut, PlatformHash, StoreError};
use crate::timing::{self, Stage};

/// Frames at most this large are hashed in wasm (a round trip to the
/// runtime's hash costs more than hashing a few KiB); larger ones by the
/// runtime, without copying them into wasm.
const HASH_IN_WASM: u32 = 16 << 10;

/// A chunk written into a pack: its sha256, offset and size.
pub type StoredChunk = (Digest, u64, u64);

/// What a received part stored.
pub struct Ingested {
    /// Where each frame's chunk lives.
    pub record: PartRecord,
    /// The pack written (if any frame was new) and its chunks as
    /// (sha256, offset, size).
    pub pack: Option<(String, Vec<StoredChunk>)>,
    /// Frames carried.
    pub frames: u32,
    /// Bytes of frames carried.
    pub bytes: u64,
    /// Bytes stored.
    pub stored_bytes: u64,
}

fn refused(code: &str, message: String) -> Problem {
    Problem::new(
        422,
        code,
        message,
        "send a chunk batch (docs/transfer.md) of chunks this push needs, each named by the sha256 of its bytes; GET the push to see them",
    )
}

fn failed(e: StoreError) -> Problem {
    match e {
        StoreError::Refused(e) => Problem::from_packet_error(&e),
        StoreError::Failed(m) => Problem::internal(m),
    }
}

/// Reads the batch's head and table; returns the frames and the decoded
/// bytes after the table.
async fn read_table(
    body: &mut Body,
    decoder: &mut Decoder,
) -> Result<(Vec<Frame>, Option<Uint8Array>), Problem> {
    let mut table = Vec::new();
    loop {
        let Some(chunk) = body.next().await? else {
            decoder.finish().map_err(|e| refused(e.code(), e.message))?;
            return Ok((decoder.table().to_vec(), None));
        };
        let mut used = 0u32;
        while used < chunk.length() {
            let want = decoder.table_bytes_wanted() as u32;
            if want == 0 {
                break;
            }
            let n = want.min(chunk.length() - used);
            table.resize(n as usize, 0);
            chunk.subarray(used, used + n).copy_to(&mut table);
            used += n;
            let (decoded, _) = decoder
                .decode(&table)
                .map_err(|e| refused(e.code(), e.message))?;
            if decoded == Decoded::Table {
                let rest = (used < chunk.length()).then(|| chunk.subarray(used, chunk.length()));
                return Ok((decoder.table().to_vec(), rest));
            }
        }
    }
}

/// Checks the table against the plan: every frame a chunk the push may
/// upload, with its size, once.
fn check_table(frames: &[Frame], plan: &Plan) -> Result<(), Problem> {
    let mut seen = HashSet::new();
    for (i, f) in frames.iter().enumerate() {
        match plan.wanted(&f.sha256) {
            None => {
                return Err(refused(
                    "chunk_not_needed",
                    format!(
                        "frame {i} ({}) is not a chunk this push needs",
                        f.sha256.hex()
                    ),
                ))
            }
            Some(size) if size != f.size => {
                return Err(refused(
                    "chunk_size_mismatch",
                    format!(
                        "frame {i} ({}) has {} bytes, the chunk has {size}",
                        f.sha256.hex(),
                        f.size
                    ),
                ))
            }
            Some(_) => {}
        }
        if !seen.insert(f.sha256) {
            return Err(refused(
                "chunk_not_needed",
                format!("frame {i} ({}) is sent twice in this part", f.sha256.hex()),
            ));
        }
    }
    Ok(())
}

/// One frame's hash, in wasm or by the runtime.
enum FrameHash {
    Wasm(Hasher),
    /// The runtime's hash and its last write: writes are queued without
    /// waiting (the stream keeps them in order), the digest waits for all.
    Platform(PlatformHash, Option<JsFuture>),
}

impl FrameHash {
    fn new(size: u32, hasher: FrameHasher) -> Result<FrameHash, Problem> {
        let in_wasm = match hasher {
            FrameHasher::Auto => size <= HASH_IN_WASM,
            FrameHasher::Core => true,
            FrameHasher::Platform => false,
        };
        Ok(if in_wasm {
            FrameHash::Wasm(Hasher::new())
        } else {
            FrameHash::Platform(PlatformHash::new().map_err(failed)?, None)
        })
    }

    fn write(&mut self, piece: &Uint8Array, scratch: &mut Vec<u8>) {
        let since = timing::now();
        match self {
            FrameHash::Wasm(h) => {
                scratch.resize(piece.length() as usize, 0);
                piece.copy_to(scratch);
                h.update(scratch);
            }
            FrameHash::Platform(h, last) => {
                *last = Some(JsFuture::from(h.writer().write_with_chunk(piece)));
            }
        }
        timing::add(Stage::Hash, since);
    }

    async fn finish(self) -> Result<Digest, Problem> {
        let since = timing::now();
        let d = match self {
            FrameHash::Wasm(h) => h.finish(),
            FrameHash::Platform(h, last) => {
                if let Some(last) = last {
                    last.await
                        .map_err(|e| failed(store::js_error("hashing a frame", e)))?;
                }
                h.finish().await.map_err(failed)?
            }
        };
        timing::add(Stage::Hash, since);
        Ok(d)
    }
}

/// The new pack's writes: runs of new frames' bytes as large as the input
/// chunks allow, one write in flight while the next run is hashed, and the
/// last run held back until every frame is verified.
struct PackWrites<'a> {
    sink: &'a FixedPut,
    held: Option<Uint8Array>,
    in_flight: Option<JsFuture>,
}

impl PackWrites<'_> {
    async fn settle(&mut self) -> Result<(), Problem> {
        if let Some(write) = self.in_flight.take() {
            timing::timed(Stage::R2Write, write)
                .await
                .map_err(|e| failed(store::js_error("storing the pack", e)))?;
        }
        Ok(())
    }

    /// Queues a run; the one before it is written.
    async fn run(&mut self, run: Uint8Array) -> Result<(), Problem> {
        if let Some(previous) = self.held.replace(run) {
            self.settle().await?;
            self.in_flight = Some(JsFuture::from(self.sink.writer.write_with_chunk(&previous)));
        }
        Ok(())
    }

    /// Writes the held run and closes the pack: call once every frame is
    /// verified.
    async fn finish(mut self) -> Result<(), Problem> {
        self.settle().await?;
        if let Some(last) = self.held.take() {
            timing::timed(Stage::R2Write, self.sink.write(&last))
                .await
                .map_err(failed)?;
        }
        timing::timed(Stage::R2Write, self.sink.close())
            .await
            .map_err(failed)
    }
}

/// Streams the frames: hashes each, writes the new ones to `sink`.
async fn pump_frames(
    body: &mut Body,
    decoder: &mut Decoder,
    frames: &[Frame],
    new: &[bool],
    mut first: Option<Uint8Array>,
    sink: Option<&FixedPut>,
    hasher: FrameHasher,
) -> Result<(), Problem> {
    let mut scratch = Vec::new();
    let mut hash: Option<FrameHash> = None;
    let mut pack = sink.map(|sink| PackWrites {
        sink,
        held: None,
        in_flight: None,
    });
    loop {
        let chunk = match first.take() {
            Some(c) => c,
            None => match body.next().await? {
                Some(c) => c,
                None => break,
            },
        };
        let mut at = 0u32;
        // The run of new frames' bytes in this chunk not yet queued.
        let mut run: Option<(u32, u32)> = None;
        while at < chunk.length() {
            let Some((index, left)) = decoder.pending_frame() else {
                return Err(refused(
                    "chunk_batch_trailing",
                    format!("bytes follow the last frame, at byte {}", decoder.offset()),
                ));
            };
            let n = left.min(chunk.length() - at);
            let piece = chunk.subarray(at, at + n);
            let last = decoder.consume(n).unwrap_or(true);
            if hash.is_none() {
                hash = Some(FrameHash::new(frames[index].size, hasher)?);
            }
            if let Some(h) = hash.as_mut() {
                h.write(&piece, &mut scratch);
            }
            if new[index] {
                run = Some(match run {
                    Some((start, _)) => (start, at + n),
                    None => (at, at + n),
                });
            } else if let (Some(p), Some((a, b))) = (pack.as_mut(), run.take()) {
                p.run(chunk.subarray(a, b)).await?;
            }
            at += n;
            if last {
                let got = match hash.take() {
                    Some(h) => h.finish().await?,
                    None => Digest::EMPTY,
                };
                if got != frames[index].sha256 {
                    return Err(refused(
                        "chunk_digest_mismatch",
                        format!(
                            "frame {index} is named {} but its bytes hash to {}",
                            frames[index].sha256.hex(),
                            got.hex()
                        ),
                    ));
                }
            }
        }
        if let (Some(p), Some((a, b))) = (pack.as_mut(), run.take()) {
            p.run(chunk.subarray(a, b)).await?;
        }
    }
    decoder.finish().map_err(|e| refused(e.code(), e.message))?;
    if let Some(p) = pack {
        p.finish().await?;
    }
    Ok(())
}

/// Where a part goes and what it may hold.
pub struct Target<'a> {
    /// The push's plan (what it may upload).
    pub plan: &'a Plan,
    /// The most bytes of frames.
    pub max_bytes: u64,
    /// The pack it writes (its row recorded first).
    pub pack_key: &'a str,
    /// The packet the push is for.
    pub digest: &'a str,
    /// Where the frames are hashed.
    pub hasher: FrameHasher,
}

/// Receives one part: decodes and checks `body` against the plan, writes
/// the chunks the store lacks into the target's pack. On a refusal nothing
/// is stored and the body is stopped: no more of it is decoded.
pub async fn ingest(
    bucket: &Bucket,
    db: &D1Database,
    mut body: Body,
    target: &Target<'_>,
) -> Result<Ingested, Problem> {
    let mut decoder = Decoder::new(BatchLimits::with_max_bytes(target.max_bytes));
    let result = ingest_from(bucket, db, &mut body, &mut decoder, target).await;
    if result.is_err() {
        body.stop().await;
    }
    result
}

async fn ingest_from(
    bucket: &Bucket,
    db: &D1Database,
    body: &mut Body,
    decoder: &mut Decoder,
    target: &Target<'_>,
) -> Result<Ingested, Problem> {
    let Target {
        plan,
        pack_key,
        digest,
        ..
    } = *target;
    let (frames, first) = read_table(body, decoder).await?;
    check_table(&frames, plan)?;
    let shas: Vec<Digest> = frames.iter().map(|f| f.sha256).collect();
    let held = timing::timed(Stage::D1, index::find_chunks(db, &shas))
        .await
        .map_err(|e| Problem::internal(e.to_string()))?;
    let new: Vec<bool> = frames
        .iter()
        .map(|f| !held.contains_key(&f.sha256))
        .collect();
    let mut record = PartRecord::default();
    let mut stored = Vec::new();
    let mut offset = 0u64;
    for (f, is_new) in frames.iter().zip(&new) {
        let (pack, at) = if *is_new {
            stored.push((f.sha256, offset, u64::from(f.size)));
            offset += u64::from(f.size);
            (pack_key.to_string(), offset - u64::from(f.size))
        } else {
            let (pack, at, _) = &held[&f.sha256];
            (pack.clone(), *at)
        };
        let pack = record.pack(&pack);
        record.frames.push(FrameAt {
            sha256: f.sha256,
            pack,
            offset: at,
            size: f.size,
        });
    }
    let pack_size = offset;
    let bytes: u64 = frames.iter().map(|f| u64::from(f.size)).sum();
    if pack_size == 0 {
        pump_frames(body, decoder, &frames, &new, first, None, target.hasher).await?;
    } else {
        timing::timed(
            Stage::D1,
            index::insert_pack(db, pack_key, pack_size, stored.len() as u64, digest),
        )
        .await
        .map_err(|e| Problem::internal(e.to_string()))?;
        let sink = FixedPut::new(pack_size).map_err(failed)?;
        let put = bucket
            .put(pack_key, Data::ReadableStream(sink.readable.clone()))
            .execute();
        let pump = async {
            let pumped = pump_frames(
                body,
                decoder,
                &frames,
                &new,
                first,
                Some(&sink),
                target.hasher,
            )
            .await;
            if pumped.is_err() {
                sink.abort("part refused").await;
            }
            pumped
        };
        let (put, pumped) = futures_util::future::join(put, pump).await;
        if let Err(p) = pumped {
            let _ = index::forget_pack(db, pack_key).await;
            return Err(p);
        }
        put.map_err(|e| Problem::internal(format!("storing the pack: {e}")))?;
    }
    Ok(Ingested {
        record,
        pack: (pack_size > 0).then(|| (pack_key.to_string(), stored)),
        frames: frames.len() as u32,
        bytes,
        stored_bytes: pack_size,
    })
}
