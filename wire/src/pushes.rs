//! Delta transfer (docs/transfer.md): pushes that send only what the store
//! lacks (`/v1/pushes`, its recipes, parts and `complete`), and the reads a
//! delta pull makes (`GET /v1/packets/{digest}/recipes`,
//! `POST /v1/packets/{digest}/chunks`).
//!
//! Digests of packets are `sha256:<hex>`; the sha256s of bodies and chunks,
//! sent by the thousand, are bare lowercase hex.

use alloc::string::String;
use alloc::vec::Vec;
use serde::{Deserialize, Serialize};

/// The word [`crate::Info::transfer`] lists when the store takes delta
/// pushes and serves recipes and chunks.
pub const TRANSFER_DELTA: &str = "delta";

/// The word [`crate::Info::transfer`] lists for the whole-packet paths.
pub const TRANSFER_WHOLE: &str = "whole";

/// How bodies are cut into chunks (docs/transfer.md, "Units"): a client
/// checks that it chunks the way the store expects.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Chunking {
    /// `fastcdc-v2020`: the `fastcdc` crate's 2020 algorithm, its default
    /// normalisation, no seed.
    pub algorithm: String,
    /// A body of at most this many bytes is one chunk named by the body's
    /// sha256; a larger one is sent by recipe.
    pub threshold: u64,
    /// The smallest chunk the chunker cuts (but a body's last).
    pub min_size: u32,
    /// The average it aims for.
    pub avg_size: u32,
    /// The largest chunk.
    pub max_size: u32,
}

/// What one part upload may hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartLimits {
    /// The longest chunk batch, after its content encoding is undone.
    pub max_bytes: u64,
    /// The most frames in one batch.
    pub max_frames: u32,
}

/// A part the store holds ([`PushSession::received`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PushPart {
    /// Its number, from 1.
    pub number: u32,
    /// Frames it carried.
    pub frames: u32,
    /// Chunk bytes it carried (decoded).
    pub bytes: u64,
}

/// A push in progress: `POST /v1/pushes` 201 and `GET /v1/pushes/{id}` 200.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PushSession {
    /// 32 lowercase hex digits.
    pub push_id: String,
    /// `/v1/pushes/{push_id}`.
    pub location: String,
    /// `sha256:<hex>` of the packet to be stored.
    pub digest: String,
    /// Its size in bytes.
    pub size: u64,
    /// The bases the store uses, `sha256:<hex>` (those it does not hold are left out).
    pub bases_used: Vec<String>,
    /// The bodies neither in a base nor uploaded yet, each once, in the
    /// manifest's order (hex).
    pub missing: Vec<String>,
    /// Their bytes.
    pub missing_bytes: u64,
    /// The chunks of the recipes received that are not uploaded yet (hex).
    #[serde(default)]
    pub missing_chunks: Vec<String>,
    /// The parts received so far.
    #[serde(default)]
    pub received: Vec<PushPart>,
    /// What one part may hold.
    pub part_limits: PartLimits,
    /// How the store expects bodies to be cut.
    pub chunking: Chunking,
}

/// One chunk of a [`Recipe`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RecipeChunk {
    /// Hex sha256 of the chunk.
    pub sha256: String,
    /// Its size in bytes.
    pub size: u32,
}

/// A large body as the ordered chunks whose concatenation it is.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Recipe {
    /// Hex sha256 of the whole body.
    pub sha256: String,
    /// Its size in bytes.
    pub size: u64,
    /// Its chunks, in order.
    pub chunks: Vec<RecipeChunk>,
}

/// `POST /v1/pushes/{id}/recipes` request, and
/// `GET /v1/packets/{digest}/recipes` 200.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Recipes {
    /// One per large body.
    pub recipes: Vec<Recipe>,
}

/// `POST /v1/pushes/{id}/recipes` 200: what of those recipes the store lacks.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MissingChunks {
    /// Chunks neither in a base nor uploaded yet (hex), each once.
    pub missing_chunks: Vec<String>,
    /// Their bytes.
    pub missing_bytes: u64,
}

/// `PUT /v1/pushes/{id}/parts/{n}` 200.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartReceived {
    /// The push.
    pub push_id: String,
    /// The part's number.
    pub number: u32,
    /// Frames it carried.
    pub frames: u32,
    /// Chunk bytes it carried.
    pub bytes: u64,
    /// Of those, the bytes the store did not hold yet and wrote.
    pub stored_bytes: u64,
}

/// `POST /v1/packets/{digest}/chunks` request: the chunks wanted (hex),
/// answered as a chunk batch in this order.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChunkRequest {
    /// Hex sha256s, each a chunk of that packet.
    pub chunks: Vec<String>,
}
