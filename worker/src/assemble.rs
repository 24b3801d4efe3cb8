//! A stored packet's bytes, streamed out of R2 along a [`Reads`] plan:
//! the format's bytes from packet-core, `packet.json` from the manifest's
//! bytes, bodies from R2 range reads. `GET` sends them; a push's `complete`
//! hashes them (the whole packet, and the bodies nothing proved yet) before
//! the packet becomes visible. Bytes read from R2 stay in the runtime's
//! buffers; only small pieces are gathered in wasm into larger writes, and
//! `complete` copies each body's pieces into wasm for packet-core's scan
//! (the findings a reader of the whole packet would report).

use std::collections::BTreeMap;

use js_sys::Uint8Array;
use packet_core::offsets::Offsets;
use packet_core::{BodyScan, Digest, Findings, Manifest};
use wasm_bindgen_futures::JsFuture;
use web_sys::WritableStreamDefaultWriter;
use worker::Bucket;

use crate::layout::Layout;
use crate::rebuild::{Reads, Segment};
use crate::store::{self, ChunkReader, PlatformHash, StoreError};
use crate::timing::{self, Stage};

/// Pieces smaller than this are gathered in wasm into one write.
const SMALL: u32 = 64 << 10;
/// How much is gathered before it is written.
const GATHER: usize = 256 << 10;

/// A stored packet, everything its bytes are made from but the bodies.
pub struct Packet<'a> {
    /// Its manifest.
    pub manifest: &'a Manifest,
    /// `packet.json`'s bytes.
    pub json: &'a [u8],
    /// Where its members lie.
    pub offsets: &'a Offsets,
    /// Where its bodies lie.
    pub layout: &'a Layout,
}

/// Why a packet's bytes could not be produced.
pub enum RebuildError {
    /// A pack the layout names is gone (or shorter than the layout says):
    /// its index in the layout's packs.
    MissingPack(u32),
    /// A body that was to be proved does not hash to its sha256: its
    /// member index.
    Body(usize),
    /// R2 or a stream failed.
    Store(StoreError),
}

impl From<StoreError> for RebuildError {
    fn from(e: StoreError) -> RebuildError {
        RebuildError::Store(e)
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

    async fn write(&self, chunk: &Uint8Array) -> Result<(), StoreError> {
        JsFuture::from(self.writer.write_with_chunk(chunk))
            .await
            .map(|_| ())
            .map_err(|e| store::js_error("writing the packet", e))
    }

    /// Bytes held in wasm.
    async fn bytes(&mut self, bytes: &[u8]) -> Result<(), StoreError> {
        self.gathered.extend_from_slice(bytes);
        if self.gathered.len() >= GATHER {
            self.flush().await?;
        }
        Ok(())
    }

    /// Bytes held by the runtime: small ones are gathered, large ones
    /// written as they are.
    async fn array(&mut self, chunk: &Uint8Array) -> Result<(), StoreError> {
        if chunk.length() < SMALL {
            let start = self.gathered.len();
            self.gathered.resize(start + chunk.length() as usize, 0);
            let since = timing::now();
            chunk.copy_to(&mut self.gathered[start..]);
            timing::add(Stage::Copy, since);
            if self.gathered.len() >= GATHER {
                self.flush().await?;
            }
            return Ok(());
        }
        self.flush().await?;
        self.write(chunk).await
    }

    /// Writes what is gathered.
    pub async fn flush(&mut self) -> Result<(), StoreError> {
        if self.gathered.is_empty() {
            return Ok(());
        }
        let array = Uint8Array::from(self.gathered.as_slice());
        self.gathered.clear();
        self.write(&array).await
    }
}

/// The bodies `complete` hashes as they pass, by member index; and every
/// body, scanned as a reader would for the stored packet's findings.
pub struct Provers {
    pending: BTreeMap<usize, (Option<PlatformHash>, u64)>,
    scan: BodyScan,
    /// A body's piece copied out of JavaScript for the scan.
    copied: Vec<u8>,
}

impl Provers {
    /// Hashes the bodies of these members.
    pub fn new(manifest: &Manifest, members: &[usize]) -> Provers {
        Provers {
            pending: members
                .iter()
                .map(|&i| (i, (None, manifest.members[i].size())))
                .collect(),
            scan: BodyScan::new(manifest),
            copied: Vec::new(),
        }
    }

    /// What the bodies that passed hold (packet-core's findings, as a
    /// reader of the whole packet reports them).
    pub fn findings(self, manifest: &Manifest) -> Findings {
        self.scan.finish(manifest)
    }

    async fn feed(
        &mut self,
        manifest: &Manifest,
        member: usize,
        chunk: &Uint8Array,
    ) -> Result<(), RebuildError> {
        self.copied.resize(chunk.length() as usize, 0);
        chunk.copy_to(&mut self.copied);
        self.scan.body(manifest, member, &self.copied);
        let Some((hash, left)) = self.pending.get_mut(&member) else {
            return Ok(());
        };
        if hash.is_none() {
            *hash = Some(PlatformHash::new()?);
        }
        if let Some(h) = hash.as_ref() {
            timing::timed(Stage::Hash, h.write_array(chunk)).await?;
        }
        *left = left.saturating_sub(u64::from(chunk.length()));
        if *left == 0 {
            if let Some((Some(h), _)) = self.pending.remove(&member) {
                let got = timing::timed(Stage::Hash, h.finish()).await?;
                if Some(got) != manifest.members[member].sha256() {
                    return Err(RebuildError::Body(member));
                }
            }
        }
        Ok(())
    }
}

/// The next piece of a read's source, at most `max` bytes.
async fn take(
    reader: &ChunkReader,
    leftover: &mut Option<Uint8Array>,
    max: u64,
) -> Result<Option<Uint8Array>, StoreError> {
    let chunk = match leftover.take() {
        Some(c) => c,
        None => match timing::timed(Stage::R2Read, reader.next()).await? {
            Some(c) => c,
            None => return Ok(None),
        },
    };
    let n = chunk.length();
    if u64::from(n) <= max {
        return Ok(Some(chunk));
    }
    let max = max as u32;
    *leftover = Some(chunk.subarray(max, n));
    Ok(Some(chunk.subarray(0, max)))
}

/// Streams packet bytes `range` of `packet` into `out`, feeding the bodies
/// `provers` holds through their hashes.
pub async fn stream(
    bucket: &Bucket,
    packet: &Packet<'_>,
    range: core::ops::Range<u64>,
    out: &mut Output,
    mut provers: Option<&mut Provers>,
) -> Result<(), RebuildError> {
    let mut fill = Vec::new();
    for read in Reads::new(packet.manifest, packet.offsets, packet.layout, range) {
        let reader = match &read.source {
            Some((pack, r)) => {
                let key = &packet.layout.packs()[*pack as usize];
                let opened =
                    timing::timed(Stage::R2Read, store::read_range(bucket, key, r.clone())).await?;
                match opened {
                    Some(reader) => Some((reader, *pack)),
                    None => return Err(RebuildError::MissingPack(*pack)),
                }
            }
            None => None,
        };
        let mut leftover = None;
        for segment in &read.segments {
            match segment {
                Segment::Fill(r) => {
                    fill.clear();
                    packet
                        .offsets
                        .write_fill(packet.manifest, r.clone(), &mut fill)
                        .map_err(|e| StoreError::Failed(format!("packet-core: {e}")))?;
                    out.bytes(&fill).await?;
                }
                Segment::Json(r) => {
                    let json = packet
                        .json
                        .get(r.start as usize..r.end as usize)
                        .ok_or_else(|| {
                            StoreError::Failed("the manifest is shorter than its offsets".into())
                        })?;
                    out.bytes(json).await?;
                }
                Segment::Stored { member, len } => {
                    let Some((reader, pack)) = &reader else {
                        return Err(StoreError::Failed("stored bytes with no source".into()).into());
                    };
                    let mut left = *len;
                    while left > 0 {
                        let Some(chunk) = take(reader, &mut leftover, left).await? else {
                            return Err(RebuildError::MissingPack(*pack));
                        };
                        left -= u64::from(chunk.length());
                        if let Some(p) = provers.as_deref_mut() {
                            p.feed(packet.manifest, *member, &chunk).await?;
                        }
                        out.array(&chunk).await?;
                    }
                }
            }
        }
        if let Some((reader, _)) = &reader {
            reader.cancel();
        }
    }
    out.flush().await?;
    Ok(())
}

/// Hashes the whole packet (and the bodies `provers` holds): the digest a
/// reader would find.
pub async fn digest(
    bucket: &Bucket,
    packet: &Packet<'_>,
    provers: &mut Provers,
) -> Result<Digest, RebuildError> {
    let hash = PlatformHash::new()?;
    let mut out = Output::new(hash.writer().clone());
    stream(
        bucket,
        packet,
        0..packet.offsets.size(),
        &mut out,
        Some(provers),
    )
    .await?;
    Ok(timing::timed(Stage::Hash, hash.finish()).await?)
}
