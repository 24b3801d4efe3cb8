//! Refs: names for packets, moved with compare-and-swap
//! (`/v1/refs`, `/v1/refs/{name}`).

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

/// `GET /v1/refs` 200: a page of refs in name order.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RefList {
    /// This page.
    pub refs: Vec<Ref>,
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
