//! Delta pushes (`/v1/pushes/…`) and the reads a delta pull makes
//! (`GET /v1/packets/{digest}/recipes`, `POST /v1/packets/{digest}/chunks`);
//! docs/transfer.md. A body's or a chunk's SHA-256 is 64 lowercase hex
//! digits, as in `packet.json` (lists of thousands are sent); a packet's
//! digest is `sha256:<hex>`.

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
    /// The bodies neither in a base nor uploaded yet (hex), each once, in
    /// manifest order. A body larger than [`Chunking::threshold`] goes up
    /// by recipe.
    pub missing: Vec<String>,
    /// The chunks of the recipes received that are neither in a base nor
    /// uploaded yet (hex), each once.
    pub missing_chunks: Vec<String>,
    /// The bytes still to upload: the missing small bodies, the missing
    /// chunks, and the large bodies that have no recipe yet.
    pub missing_bytes: u64,
    /// The parts received, by number.
    pub parts: Vec<PushPart>,
    /// What one part may hold.
    pub part_limits: PartLimits,
    /// How the store expects large bodies to be cut.
    pub chunking: Chunking,
}

/// [`Push::part_limits`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartLimits {
    /// The most bytes of frames one part's batch may carry (decoded).
    pub max_bytes: u64,
    /// The most frames one part may carry.
    pub max_frames: u32,
    /// The `Content-Encoding`s a part may have: `identity`, `gzip`, `zstd`.
    pub encodings: Vec<String>,
    /// The largest zstd window a part may use, in bytes.
    pub zstd_max_window: u64,
}

/// [`Push::chunking`]: FastCDC (the `fastcdc` crate's `v2020`) with these
/// sizes, no other normalisation or seed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Chunking {
    /// Always `fastcdc-v2020`.
    pub algorithm: String,
    /// Bodies of at most this many bytes are one chunk; larger ones are
    /// cut and sent with a recipe.
    pub threshold: u64,
    /// Smallest chunk.
    pub min: u64,
    /// Average chunk.
    pub avg: u64,
    /// Largest chunk.
    pub max: u64,
}

/// One of [`Push::parts`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PushPart {
    /// 1-based.
    pub number: u16,
    /// Frames it carried.
    pub frames: u32,
    /// Bytes of frames it carried (decoded).
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
    /// Bytes of frames it carried (decoded).
    pub bytes: u64,
    /// Of those, the bytes the store did not hold yet and kept.
    pub stored_bytes: u64,
}

/// A chunk of a recipe.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RecipeChunk {
    /// Hex SHA-256 of its bytes.
    pub sha256: String,
    /// Its size, 1 byte to 1 MiB.
    pub size: u64,
}

/// How a large body is cut: its chunks, whose concatenation is the body.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Recipe {
    /// Hex SHA-256 of the body (the manifest's `sha256`).
    pub sha256: String,
    /// The body's size.
    pub size: u64,
    /// Its chunks, in order.
    pub chunks: Vec<RecipeChunk>,
}

/// `POST /v1/pushes/{id}/recipes` request and
/// `GET /v1/packets/{digest}/recipes` 200: recipes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Recipes {
    /// The recipes.
    pub recipes: Vec<Recipe>,
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
/// as a chunk batch in this order.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChunkRequest {
    /// Hex SHA-256s of chunks of that packet.
    pub chunks: Vec<String>,
    /// `gzip`: the answer is gzip-compressed (`Content-Encoding: gzip`).
    /// Asked here, not by `Accept-Encoding`, which the edge rewrites for
    /// every request it passes to a Worker. Absent or `null`: as it is.
    #[serde(default)]
    pub encoding: Option<String>,
}
