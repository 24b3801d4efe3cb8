//! Multipart uploads: `POST /v1/uploads`, `GET /v1/uploads/{id}`,
//! `PUT /v1/uploads/{id}/parts/{number}` (docs/worker.md, "Multipart
//! uploads").

use alloc::string::String;
use alloc::vec::Vec;
use serde::{Deserialize, Serialize};

/// `POST /v1/uploads` request: the packet to come.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CreateUpload {
    /// `sha256:<hex>` the assembled packet must have.
    pub digest: String,
    /// Its size in bytes.
    pub size: u64,
    /// Every part's size but the last's; the store's default if left out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub part_size: Option<u64>,
    /// Labels to attach once the packet is stored.
    #[serde(default)]
    pub labels: Vec<String>,
}

/// An upload in progress (schema `Upload`): `POST /v1/uploads` 201 and
/// `GET /v1/uploads/{id}` 200.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Upload {
    /// 32 lowercase hex digits.
    pub upload_id: String,
    /// `/v1/uploads/{upload_id}`.
    pub location: String,
    /// `sha256:<hex>` the assembled packet must have.
    pub digest: String,
    /// The packet's size in bytes.
    pub size: u64,
    /// Every part's size but the last's.
    pub part_size: u64,
    /// How many parts make the packet.
    pub parts: u64,
    /// The parts the store holds, by number.
    pub received: Vec<ReceivedPart>,
    /// The part numbers still to send, ascending.
    pub missing: Vec<u16>,
}

/// One of [`Upload::received`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReceivedPart {
    /// 1-based.
    pub number: u16,
    /// Its size in bytes.
    pub size: u64,
}

/// `PUT /v1/uploads/{id}/parts/{number}` 200: the part is stored.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartStored {
    /// The upload it belongs to.
    pub upload_id: String,
    /// Its number, 1-based.
    pub number: u16,
    /// Its size in bytes.
    pub size: u64,
}
