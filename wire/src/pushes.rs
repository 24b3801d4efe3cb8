//! The JSON bodies of delta pushes (`/v1/pushes/…`) and of the chunk
//! request a delta pull makes (`POST /v1/packets/{digest}/chunks`);
//! docs/transfer.md. The recipes and the chunks themselves are binary
//! ([`crate::recipes`], [`crate::chunks`]). A body's or a chunk's SHA-256
//! is 64 lowercase hex digits, as in `packet.json`; a packet's digest is
//! `sha256:<hex>`.

use alloc::string::String;
use alloc::vec::Vec;
use serde::{Deserialize, Serialize};

/// A push in progress (schema `Push`): `POST /v1/pushes` 201 and
/// `GET /v1/pushes/{id}` 200.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Push {
    /// 32 lowercase hex digits.
    pub push_id: String,
    /// `/v1/pushes/{push_id}`.
    pub location: String,
    /// `sha256:<hex>` the packet will have.
    pub digest: String,
    /// Its size in bytes.
    pub size: u64,
    /// The bases named that are stored (`sha256:<hex>`), in the order
    /// given; the others were ignored.
    pub bases_used: Vec<String>,
    /// The bodies neither in a base nor proven yet (hex), each once, in
    /// manifest order. A body larger than the bodies' threshold
    /// ([`Chunking::bodies`]) goes up by recipe.
    pub missing: Vec<String>,
    /// The chunks of the recipes received that are neither in a base nor
    /// uploaded yet (hex), each once, in recipe order.
    pub missing_chunks: Vec<String>,
    /// The bytes still to upload: the missing small bodies, the missing
    /// chunks, and the large bodies that have no recipe yet.
    pub missing_bytes: u64,
    /// The parts received, by number.
    pub parts: Vec<PushPart>,
    /// What one part may hold.
    pub part_limits: PartLimits,
    /// How the store expects bodies and `packet.json` to be cut.
    pub chunking: Chunking,
}

/// [`Push::part_limits`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartLimits {
    /// The most bytes of frames one part's batch may carry, as sent.
    pub max_bytes: u64,
    /// The most bytes those frames may decode to.
    pub max_raw_bytes: u64,
    /// The most frames one part may carry.
    pub max_frames: u32,
    /// The frame encodings a part may use: `identity`, `zstd`.
    pub encodings: Vec<String>,
    /// The largest zstd window a frame may use, in bytes.
    pub zstd_max_window: u64,
}

/// [`Push::chunking`]: how bodies and `packet.json` are cut and chunks
/// compressed (the table of [`crate::chunking`]). A client that cuts
/// otherwise shares nothing with the store.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Chunking {
    /// Always `fastcdc-v2020`.
    pub algorithm: String,
    /// How file bodies are cut.
    pub bodies: CdcSizes,
    /// How `packet.json` is cut.
    pub manifest: CdcSizes,
    /// The zstd level each chunk is compressed at.
    pub zstd_level: i32,
    /// The largest zstd window a chunk may use, in bytes.
    pub zstd_max_window: u64,
    /// A chunk is kept compressed only when that saves at least this many
    /// percent of it.
    pub min_saving_percent: u64,
}

impl Chunking {
    /// The table this crate states.
    pub fn ours() -> Chunking {
        use crate::chunking as c;
        Chunking {
            algorithm: c::ALGORITHM.into(),
            bodies: CdcSizes::of(&c::BODIES),
            manifest: CdcSizes::of(&c::MANIFEST),
            zstd_level: c::ZSTD_LEVEL,
            zstd_max_window: c::ZSTD_MAX_WINDOW,
            min_saving_percent: c::MIN_SAVING_PERCENT,
        }
    }
}

/// [`Chunking::bodies`], [`Chunking::manifest`]: FastCDC's sizes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CdcSizes {
    /// Bytes up to this length are one chunk; longer ones are cut.
    pub threshold: u64,
    /// Smallest chunk.
    pub min: u64,
    /// Average chunk.
    pub avg: u64,
    /// Largest chunk.
    pub max: u64,
}

impl CdcSizes {
    /// The sizes of `cdc`.
    pub fn of(cdc: &crate::chunking::Cdc) -> CdcSizes {
        CdcSizes {
            threshold: cdc.one_chunk_up_to.into(),
            min: cdc.min.into(),
            avg: cdc.avg.into(),
            max: cdc.max.into(),
        }
    }
}

/// One of [`Push::parts`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PushPart {
    /// 1-based.
    pub number: u16,
    /// Frames it carried.
    pub frames: u32,
    /// Bytes of frames it carried, as sent.
    pub bytes: u64,
    /// Of those, the bytes the store did not hold yet and kept.
    pub stored_bytes: u64,
}

/// `PUT /v1/pushes/{id}/parts/{n}` 200: the part is received.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartReceived {
    /// The push it belongs to.
    pub push_id: String,
    /// Its number.
    pub number: u16,
    /// Frames it carried.
    pub frames: u32,
    /// Bytes of frames it carried, as sent.
    pub bytes: u64,
    /// Of those, the bytes the store did not hold yet and kept.
    pub stored_bytes: u64,
}

/// `POST /v1/pushes/{id}/recipes` 200: what the recipes need uploaded.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MissingChunks {
    /// The chunks of these recipes that are neither in a base nor uploaded
    /// yet (hex), each once, in recipe order.
    pub missing_chunks: Vec<String>,
    /// Their bytes.
    pub missing_bytes: u64,
}

/// `POST /v1/packets/{digest}/chunks` request: the chunks wanted, answered
/// as a chunk batch in this order, each frame as the store keeps it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChunkRequest {
    /// Hex SHA-256s of chunks of that packet: chunks of its bodies and
    /// of its `packet.json`.
    pub chunks: Vec<String>,
}
