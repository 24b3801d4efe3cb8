//! `GET /v1`: what a client reads before it uploads.

use alloc::string::String;
use alloc::vec::Vec;
use serde::{Deserialize, Serialize};

/// The `service` every pillbox store names.
pub const SERVICE: &str = "pillbox";
/// The API's version, `api` in [`Info`] (the `/v1` of every path).
pub const API_VERSION: u32 = 1;

/// `GET /v1` 200 (schema `Info`): the store's limits and settings. A
/// client picks a single upload or a multipart upload from them.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Info {
    /// Always [`SERVICE`].
    pub service: String,
    /// Always [`API_VERSION`].
    pub api: u32,
    /// The packet format the store takes (`pillbox.session-packet/1`).
    pub format: String,
    /// The largest packet the store keeps, in bytes.
    pub max_packet_bytes: u64,
    /// The most members a packet may have.
    pub max_members: u64,
    /// The largest body one `PUT /v1/packets/{digest}` takes; larger
    /// packets go through `POST /v1/uploads`.
    pub max_single_upload_bytes: u64,
    /// The part sizes a multipart upload may ask for.
    pub part_size: PartSizes,
    /// Whether reads need the token.
    pub read_access: ReadAccess,
    /// How packets can be sent: `whole` (`PUT /v1/packets/{digest}`,
    /// `/v1/uploads`) and `delta` (`/v1/pushes`). Empty from a store that
    /// predates the field: whole only.
    #[serde(default)]
    pub transfer: Vec<String>,
}

/// [`Info::transfer`]: whole packets, in one request or in parts.
pub const TRANSFER_WHOLE: &str = "whole";
/// [`Info::transfer`]: delta pushes and pulls (docs/transfer.md).
pub const TRANSFER_DELTA: &str = "delta";

/// [`Info::part_size`]: every part's size but the last's, in bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartSizes {
    /// What the store picks when the client asks for none.
    pub default: u64,
    /// The smallest it accepts.
    pub min: u64,
    /// The largest it accepts.
    pub max: u64,
}

/// Who may read from the store ([`Info::read_access`], and the Worker's
/// `READ_ACCESS` setting, which takes the same words).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ReadAccess {
    /// `public`: anyone may read.
    Public,
    /// `token`: reads need the token too.
    Token,
}
