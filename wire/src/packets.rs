//! Stored packets: the listing, the answer to every request that
//! stores one (`PUT /v1/packets/{digest}`, and the multipart upload's
//! create and complete when the packet is there already or now), and the
//! digests that start with a prefix (`GET /v1/digests/{prefix}`).

use alloc::string::String;
use alloc::vec::Vec;
use serde::{Deserialize, Serialize};

/// What every answer about a stored packet says of it: the fields the
/// document's `Packet` and `Stored` schemas share.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PacketFacts {
    /// `sha256:<hex>` of the whole packet.
    pub digest: String,
    /// The packet's size in bytes.
    pub size: u64,
    /// Members after `packet.json`.
    pub members: u64,
    /// The sum of the file members' sizes.
    pub file_bytes: u64,
    /// The agent harness state the packet carries, `null` for none.
    pub harness: Option<Harness>,
    /// The packet's labels, sorted.
    pub labels: Vec<String>,
}

/// [`PacketFacts::harness`] (schema `Harness`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Harness {
    /// `codex`, `claude` or `opencode`.
    pub kind: String,
    /// The harness thread (session) id.
    pub thread_id: String,
    /// The model the session used, `null` if the packet does not say.
    pub model: Option<String>,
}

/// One item of `GET /v1/packets` (schema `Packet`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Packet {
    /// Digest, size, members, harness, labels.
    #[serde(flatten)]
    pub facts: PacketFacts,
    /// When the store first stored it (RFC 3339, UTC).
    pub created: String,
}

/// `GET /v1/packets` 200: a page of packets, newest first.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PacketList {
    /// This page.
    pub packets: Vec<Packet>,
    /// The `cursor` for the next page, `null` on the last page.
    pub next_cursor: Option<String>,
}

/// The packet is stored (schema `Stored`): `PUT /v1/packets/{digest}` 201
/// or 200, `POST /v1/uploads` 200, `POST /v1/uploads/{id}/complete` 201
/// or 200.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stored {
    /// Digest, size, members, harness, labels.
    #[serde(flatten)]
    pub facts: PacketFacts,
    /// True if this request stored it (201), false if it was there (200).
    pub created: bool,
    /// When the store first stored it (RFC 3339, UTC).
    pub created_at: String,
}

/// `GET /v1/digests/{prefix}` 200 (schema `DigestMatches`): the stored
/// packets whose digest starts with a prefix, in digest order.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DigestMatches {
    /// The prefix asked for, as `sha256:<hex>`.
    pub prefix: String,
    /// `sha256:<hex>` of each match, at most `limit`.
    pub digests: Vec<String>,
    /// True when more packets match than `digests` lists.
    pub truncated: bool,
}

/// The start of a digest naming a stored packet (`GET /v1/digests/{prefix}`):
/// packet-core's, the one reader of the `sha256:` text.
pub use packet_core::DigestPrefix;
