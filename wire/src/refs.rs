//! Refs: names for packets, moved with compare-and-swap
//! (`/v1/refs`, `/v1/refs/{name}`), and the packets each has named
//! (`/v1/ref-history/{name}`).

use alloc::string::String;
use alloc::vec::Vec;
use serde::{Deserialize, Serialize};

/// A ref (schema `Ref`): `GET /v1/refs/{name}` 200 and the items of
/// `GET /v1/refs`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ref {
    /// Its name, e.g. `sessions/demo/latest`.
    pub name: String,
    /// `sha256:<hex>` of the packet it names.
    pub digest: String,
    /// When it last changed (RFC 3339, UTC).
    pub updated: String,
}

/// One item of `GET /v1/refs` (schema `ListedRef`): the ref and what
/// the index knows of the packet it names. A client that reads a [`Ref`]
/// from it ignores the rest.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ListedRef {
    /// Name, digest, when it last changed.
    #[serde(flatten)]
    pub now: Ref,
    /// The packet's size in bytes; `null` if the packet is not stored (a
    /// ref left naming a packet deleted at the same moment it was moved).
    pub size: Option<u64>,
    /// The packet's labels, sorted.
    pub labels: Vec<String>,
}

/// `GET /v1/refs` 200: a page of refs in name order.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RefList {
    /// This page.
    pub refs: Vec<ListedRef>,
    /// The last name of this page, to pass as `cursor`; `null` on the
    /// last page.
    pub next_cursor: Option<String>,
}

/// `PUT /v1/refs/{name}` request: the packet the ref is to name.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PutRef {
    /// `sha256:<hex>` of a stored packet.
    pub digest: String,
}

/// `PUT /v1/refs/{name}` 201 (created) or 200 (moved), schema `RefChange`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RefChange {
    /// The ref after the change.
    #[serde(flatten)]
    pub now: Ref,
    /// The digest it held before, `null` when it was created.
    pub previous: Option<String>,
}

/// One of [`RefHistory::moves`] (schema `RefMove`): a packet the ref
/// named from `at` on.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RefMove {
    /// `sha256:<hex>` of the packet.
    pub digest: String,
    /// When the ref was created or moved to it (RFC 3339, UTC).
    pub at: String,
    /// The id of the token that made the move (its `PILLBOX_TOKENS` entry's
    /// `id`, `PILLBOX_TOKEN` for the single token; never the token or its
    /// scopes), `null` for a move the store recorded without one (a ref
    /// that existed before the store kept history).
    pub by: Option<String>,
}

/// `GET /v1/ref-history/{name}` 200: the packets a ref has named, newest
/// first: its creation and each move, the last [`RefHistory::kept`] of
/// them.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RefHistory {
    /// The ref's name.
    pub name: String,
    /// This page, newest first; the first is the packet the ref names now.
    pub moves: Vec<RefMove>,
    /// The `cursor` for the next (older) page, `null` on the last page.
    pub next_cursor: Option<String>,
    /// How many moves the store keeps per ref (older ones are dropped as
    /// new ones are recorded).
    pub kept: u32,
}
