//! What the push's unit tests build their cases from.

use packet_core::{Body, Digest};

/// A body named by the digest of `tag`.
pub fn body(tag: &str, size: u64) -> Body {
    Body {
        sha256: Digest::of(tag.as_bytes()),
        size,
    }
}
