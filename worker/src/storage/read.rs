//! Bytes out of R2 (docs/transfer.md, "Reads"): a stored packet's bytes,
//! any range, along a [`Reads`] plan (the format's bytes from packet-core,
//! `packet.json` from the manifest's bytes, bodies from range reads of
//! their packs); whole chunks decoded to their raw bytes (proving a body,
//! loading a manifest or a layout); chunks as stored (a chunk answer).
//! Bytes of chunks stored as they are stay in the runtime's buffers; a
//! zstd chunk is copied into wasm and decoded there, and small pieces are
//! gathered into larger writes.

use js_sys::Uint8Array;
use wasm_bindgen_futures::JsFuture;
use web_sys::WritableStreamDefaultWriter;
use worker::Bucket;

use super::chunk::ChunkRef;
use super::frames;
use super::packs::PackTable;
use super::rebuild::{runs, Reads, Segment};
use super::stored::Stored;
use super::stream::{self, ChunkReader, StoreError};
use crate::problem::Problem;
use crate::timing::{self, Counter, Stage};

/// Pieces smaller than this are gathered in wasm into one write.
const SMALL: u32 = 64 << 10;
/// How much is gathered before it is written.
const GATHER: usize = 256 << 10;
/// The most stored bytes one range read of whole chunks covers.
const RUN: u64 = 8 << 20;

/// Why bytes could not be read.
#[derive(Debug)]
pub enum ReadError {
    /// An object the store names is gone or shorter than it should be.
    Missing(String),
    /// A stored chunk does not decode (the store is damaged).
    Corrupt(String),
    /// R2 or a stream failed.
    Store(String),
}

impl From<StoreError> for ReadError {
    fn from(e: StoreError) -> ReadError {
        match e {
            StoreError::Refused(e) => ReadError::Corrupt(e.to_string()),
            StoreError::Failed(m) => ReadError::Store(m),
        }
    }
}

impl ReadError {
    /// As a 500.
    pub fn problem(&self) -> Problem {
        Problem::internal(match self {
            ReadError::Missing(k) => {
                format!("{k} is missing from R2 or shorter than the index says")
            }
            ReadError::Corrupt(m) => format!("a stored chunk is damaged: {m}"),
            ReadError::Store(m) => m.clone(),
        })
    }
}

/// Where the bytes go: a stream's writer, with small pieces gathered.
pub struct Output {
    writer: WritableStreamDefaultWriter,
    gathered: Vec<u8>,
}

impl Output {
    /// Writes to `writer`.
    pub fn new(writer: WritableStreamDefaultWriter) -> Output {
        Output {
            writer,
            gathered: Vec::with_capacity(GATHER),
        }
    }

    async fn write(&self, chunk: &Uint8Array) -> Result<(), ReadError> {
        JsFuture::from(self.writer.write_with_chunk(chunk))
            .await
            .map(|_| ())
            .map_err(|e| ReadError::Store(format!("writing the answer: {}", stream::js_text(&e))))
    }

    /// Bytes held in wasm.
    pub async fn bytes(&mut self, bytes: &[u8]) -> Result<(), ReadError> {
        self.gathered.extend_from_slice(bytes);
        if self.gathered.len() >= GATHER {
            self.flush().await?;
        }
        Ok(())
    }

    /// Bytes held by the runtime: small ones are gathered, large ones
    /// written as they are.
    pub async fn array(&mut self, chunk: &Uint8Array) -> Result<(), ReadError> {
        if chunk.length() < SMALL {
            let start = self.gathered.len();
            self.gathered.resize(start + chunk.length() as usize, 0);
            chunk.copy_to(&mut self.gathered[start..]);
            if self.gathered.len() >= GATHER {
                self.flush().await?;
            }
            return Ok(());
        }
        self.flush().await?;
        self.write(chunk).await
    }

    /// Writes what is gathered.
    pub async fn flush(&mut self) -> Result<(), ReadError> {
        if self.gathered.is_empty() {
            return Ok(());
        }
        let array = Uint8Array::from(self.gathered.as_slice());
        self.gathered.clear();
        self.write(&array).await
    }
}

/// A range read of `key`, as a reader of runtime chunks.
async fn open(
    bucket: &Bucket,
    key: &str,
    range: core::ops::Range<u64>,
) -> Result<Reader, ReadError> {
    timing::count(Counter::R2Read, range.end - range.start);
    let reader = timing::timed(Stage::R2Read, stream::read_range(bucket, key, range))
        .await?
        .ok_or_else(|| ReadError::Missing(key.to_string()))?;
    Ok(Reader {
        reader,
        leftover: None,
        key: key.to_string(),
    })
}

/// The chunks of one range read, taken as needed.
struct Reader {
    reader: ChunkReader,
    leftover: Option<Uint8Array>,
    key: String,
}

impl Reader {
    /// The next piece, at most `max` bytes.
    async fn take(&mut self, max: u64) -> Result<Uint8Array, ReadError> {
        let chunk = match self.leftover.take() {
            Some(c) => c,
            None => timing::timed(Stage::R2Read, self.reader.next())
                .await?
                .ok_or_else(|| ReadError::Missing(self.key.clone()))?,
        };
        let n = chunk.length();
        if u64::from(n) <= max {
            return Ok(chunk);
        }
        let max = max as u32;
        self.leftover = Some(chunk.subarray(max, n));
        Ok(chunk.subarray(0, max))
    }

    /// The next `len` bytes, copied into `out`.
    async fn copy(&mut self, len: u64, out: &mut Vec<u8>) -> Result<(), ReadError> {
        let mut left = len;
        while left > 0 {
            let piece = self.take(left).await?;
            let start = out.len();
            out.resize(start + piece.length() as usize, 0);
            piece.copy_to(&mut out[start..]);
            left -= u64::from(piece.length());
        }
        Ok(())
    }

    fn cancel(&self) {
        self.reader.cancel();
    }
}

fn decode(c: &ChunkRef, stored: &[u8], raw: &mut Vec<u8>) -> Result<(), ReadError> {
    raw.clear();
    let since = timing::now();
    let r = frames::decode_into(c.encoding, c.raw, stored, raw)
        .map_err(|e| ReadError::Corrupt(e.message));
    timing::add(Stage::Decode, since);
    r
}

/// The raw bytes of `chunks` (slots of `packs`), in order:
/// `each(index, raw)`, once per zstd chunk (at most 1 MiB) and in pieces
/// of at most 1 MiB for a chunk stored as it is (a body of a packet stored
/// whole may be one chunk of any size). Runs of chunks back to back in one
/// pack are one range read.
pub async fn raw_chunks<E: From<ReadError>>(
    bucket: &Bucket,
    packs: &PackTable,
    chunks: &[ChunkRef],
    mut each: impl FnMut(usize, &[u8]) -> Result<(), E>,
) -> Result<(), E> {
    let mut index = 0;
    let mut stored = Vec::new();
    let mut raw = Vec::new();
    for (slot, range, list) in runs(chunks, RUN) {
        let key = packs
            .key(slot)
            .ok_or_else(|| ReadError::Corrupt(format!("a chunk in empty slot {slot}")))?;
        let mut reader = open(bucket, key, range).await?;
        for c in &list {
            if c.is_identity() {
                let mut left = c.stored;
                while left > 0 {
                    stored.clear();
                    reader.copy(left.min(1 << 20), &mut stored).await?;
                    left -= stored.len() as u64;
                    each(index, &stored)?;
                }
            } else {
                stored.clear();
                reader.copy(c.stored, &mut stored).await?;
                decode(c, &stored, &mut raw)?;
                each(index, &raw)?;
            }
            index += 1;
        }
        reader.cancel();
    }
    Ok(())
}

/// Writes `chunks` as stored (a chunk answer's frames), back to back.
pub async fn stored_chunks(
    bucket: &Bucket,
    packs: &PackTable,
    chunks: &[ChunkRef],
    out: &mut Output,
) -> Result<(), ReadError> {
    for (slot, range, _) in runs(chunks, RUN) {
        let key = packs
            .key(slot)
            .ok_or_else(|| ReadError::Corrupt(format!("a chunk in empty slot {slot}")))?;
        let len = range.end - range.start;
        let mut reader = open(bucket, key, range).await?;
        let mut left = len;
        while left > 0 {
            let piece = reader.take(left).await?;
            left -= u64::from(piece.length());
            out.array(&piece).await?;
        }
        reader.cancel();
    }
    out.flush().await
}

/// Streams packet bytes `range` of `packet` into `out`.
pub async fn packet_range(
    bucket: &Bucket,
    packet: &Stored,
    range: core::ops::Range<u64>,
    out: &mut Output,
) -> Result<(), ReadError> {
    let mut fill = Vec::new();
    let mut stored = Vec::new();
    let mut raw = Vec::new();
    for read in Reads::new(&packet.manifest, &packet.offsets, &packet.layout, range) {
        let read = read.map_err(|u| {
            ReadError::Corrupt(format!(
                "the layout gives no chunk for byte {} of the body of {}",
                u.at, packet.manifest.members[u.member].path
            ))
        })?;
        let mut reader = match &read.source {
            Some((slot, r)) => {
                let key =
                    packet.layout.packs().key(*slot).ok_or_else(|| {
                        ReadError::Corrupt(format!("a chunk in empty slot {slot}"))
                    })?;
                Some(open(bucket, key, r.clone()).await?)
            }
            None => None,
        };
        for segment in &read.segments {
            match segment {
                Segment::Fill(r) => {
                    fill.clear();
                    packet
                        .offsets
                        .write_fill(&packet.manifest, r.clone(), &mut fill)
                        .map_err(|e| ReadError::Corrupt(format!("packet-core: {e}")))?;
                    out.bytes(&fill).await?;
                }
                Segment::Json(r) => {
                    let json = packet
                        .json
                        .get(r.start as usize..r.end as usize)
                        .ok_or_else(|| {
                            ReadError::Corrupt("the manifest is shorter than its offsets".into())
                        })?;
                    out.bytes(json).await?;
                }
                Segment::Stored { len, .. } => {
                    let reader = reader
                        .as_mut()
                        .ok_or_else(|| ReadError::Corrupt("stored bytes with no source".into()))?;
                    let mut left = *len;
                    while left > 0 {
                        let piece = reader.take(left).await?;
                        left -= u64::from(piece.length());
                        out.array(&piece).await?;
                    }
                }
                Segment::Frame {
                    chunk, skip, take, ..
                } => {
                    let reader = reader
                        .as_mut()
                        .ok_or_else(|| ReadError::Corrupt("stored bytes with no source".into()))?;
                    stored.clear();
                    reader.copy(chunk.stored, &mut stored).await?;
                    decode(chunk, &stored, &mut raw)?;
                    out.bytes(&raw[*skip as usize..(*skip + *take) as usize])
                        .await?;
                }
            }
        }
        if let Some(r) = &reader {
            r.cancel();
        }
    }
    out.flush().await
}
