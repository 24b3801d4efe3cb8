//! `GET /v1/search`: which packets hold a member path or a blob.

use alloc::string::String;
use alloc::vec::Vec;
use serde::{Deserialize, Serialize};

/// `GET /v1/search` 200: matching members across packets.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SearchResults {
    /// This page, in index order.
    pub matches: Vec<SearchMatch>,
    /// The `cursor` for the next page, `null` on the last page.
    pub next_cursor: Option<String>,
}

/// One of [`SearchResults::matches`]: a member of a stored packet.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SearchMatch {
    /// `sha256:<hex>` of the packet that holds it.
    pub digest: String,
    /// The member's path.
    pub path: String,
    /// `file`, `dir` or `symlink`.
    #[serde(rename = "type")]
    pub kind: String,
    /// Its body size in bytes.
    pub size: u64,
    /// `sha256:<hex>` of a file's bytes, `null` for others.
    pub sha256: Option<String>,
}
