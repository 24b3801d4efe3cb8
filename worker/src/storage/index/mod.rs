//! The D1 index, one file per table: every statement with named
//! parameters ([`crate::storage::sql`]) next to the rows it reads or
//! writes. The rows, and the answers built from them, are pure and tested
//! natively; the statements build for wasm32 only.
//!
//! | module | table |
//! |---|---|
//! | [`packets`] | `packets`, `labels`: stored packets, how their bytes are kept, their labels |
//! | [`uploads`] | `uploads`, `upload_parts`: multipart uploads in progress, and completing one |
//! | [`pushes`] | `pushes`, `push_parts`, and storing a pushed packet |
//! | [`refs`] | `refs`, `ref_history`: names for packets, and the packets each has named |
//! | `packs` | `packs`, `pack_users`: the R2 objects holding chunks, who uses them, collecting those no one uses (wasm) |
//! | `chunks` | `chunks`: one row per unique chunk, a hint for not storing it again (wasm) |
//! | `ends` | `body_ends`: the end state of bodies of several chunks (wasm) |
//! | `statement` | a statement with named parameters, its values, conditions put together at run time, batches, the time and fresh ids (wasm) |

pub mod packets;
pub mod pushes;
pub mod refs;
pub mod uploads;

#[cfg(target_arch = "wasm32")]
pub mod chunks;
#[cfg(target_arch = "wasm32")]
pub mod ends;
#[cfg(target_arch = "wasm32")]
pub mod packs;
#[cfg(target_arch = "wasm32")]
mod statement;

#[cfg(target_arch = "wasm32")]
pub use statement::*;

/// Bytes from a `hex(…)` column.
pub fn unhex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
        .collect()
}

/// What the tests of the rows' answers share.
#[cfg(test)]
mod fixtures {
    /// A packet's digest.
    pub const D: &str = "sha256:0000000000000000000000000000000000000000000000000000000000000abc";
    /// A time.
    pub const T: &str = "2026-12-01T09:00:00.000Z";

    /// `value` as JSON.
    pub fn json_of(value: impl serde::Serialize) -> serde_json::Value {
        serde_json::to_value(value).unwrap()
    }
}
