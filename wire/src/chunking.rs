//! The chunking table (docs/transfer.md, "Units"): how bodies and
//! `packet.json` are cut into chunks, and how each chunk is compressed on
//! its own. Stated once, here; the cutting itself is each consumer's (the
//! CLI and the Worker both run the `fastcdc` crate's `v2020` over these
//! parameters, its default normalisation, no seed), so the same bytes give
//! the same chunks on every client and at the edge.
//!
//! ```
//! use pillbox_wire::chunking::{self, BODIES, MANIFEST};
//!
//! assert!(BODIES.is_one_chunk(256 << 10));
//! assert!(!BODIES.is_one_chunk((256 << 10) + 1));
//! assert!(MANIFEST.is_one_chunk(64 << 10));
//! // A chunk is kept compressed only when that saves at least 3 %.
//! assert!(chunking::keep_compressed(1000, 970));
//! assert!(!chunking::keep_compressed(1000, 971));
//! ```

/// The content-defined chunking every consumer runs.
pub const ALGORITHM: &str = "fastcdc-v2020";

/// How one kind of bytes is cut: bytes of at most [`Cdc::one_chunk_up_to`]
/// are one chunk (named by their own sha256); longer ones are cut by
/// FastCDC with these sizes (the last chunk may be shorter than `min`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cdc {
    /// Bytes up to this length are one chunk, not cut.
    pub one_chunk_up_to: u32,
    /// FastCDC's smallest chunk.
    pub min: u32,
    /// FastCDC's average chunk.
    pub avg: u32,
    /// FastCDC's largest chunk.
    pub max: u32,
}

impl Cdc {
    /// Whether `len` bytes are one chunk rather than cut.
    pub const fn is_one_chunk(&self, len: u64) -> bool {
        len <= self.one_chunk_up_to as u64
    }

    /// The largest chunk these bytes can have: `max`, or the bytes
    /// themselves when they are one chunk.
    pub const fn largest_chunk(&self) -> u32 {
        if self.one_chunk_up_to > self.max {
            self.one_chunk_up_to
        } else {
            self.max
        }
    }

    /// The most chunks `len` bytes can be cut into: every chunk but the
    /// last has at least `min` bytes.
    pub const fn most_chunks(&self, len: u64) -> u64 {
        if len == 0 {
            0
        } else if self.is_one_chunk(len) {
            1
        } else {
            len.div_ceil(self.min as u64)
        }
    }
}

/// File bodies: one chunk up to 256 KiB; cut at 64 KiB / 256 KiB / 1 MiB.
pub const BODIES: Cdc = Cdc {
    one_chunk_up_to: 256 << 10,
    min: 64 << 10,
    avg: 256 << 10,
    max: 1 << 20,
};

/// `packet.json`: one chunk up to 64 KiB; cut at 4 KiB / 16 KiB / 64 KiB,
/// so that a change to one member touches one or two chunks.
pub const MANIFEST: Cdc = Cdc {
    one_chunk_up_to: 64 << 10,
    min: 4 << 10,
    avg: 16 << 10,
    max: 64 << 10,
};

/// The largest chunk of any kind: the largest frame of a chunk batch.
pub const MAX_CHUNK: u32 = BODIES.largest_chunk();

/// Each chunk is compressed on its own as one zstd frame at this level.
pub const ZSTD_LEVEL: i32 = 3;
/// log2 of the largest zstd window a frame may use: 8 MiB (RFC 9659's
/// bound for HTTP, and what the edge's decoder allocates at most).
pub const ZSTD_WINDOW_LOG: u32 = 23;
/// The largest zstd window a frame may use, in bytes.
pub const ZSTD_MAX_WINDOW: u64 = 1 << ZSTD_WINDOW_LOG;
/// A chunk is kept compressed only when compression saves at least this
/// share of it, in percent; otherwise it travels and is stored as it is.
pub const MIN_SAVING_PERCENT: u64 = 3;

/// Whether a chunk of `raw` bytes that compressed to `compressed` bytes is
/// kept compressed: when that saves at least [`MIN_SAVING_PERCENT`].
pub const fn keep_compressed(raw: usize, compressed: usize) -> bool {
    compressed > 0 && (compressed as u64) * 100 <= (raw as u64) * (100 - MIN_SAVING_PERCENT)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_is_what_the_format_says() {
        assert_eq!(MAX_CHUNK, 1 << 20);
        assert_eq!(MANIFEST.largest_chunk(), 64 << 10);
        assert_eq!(BODIES.most_chunks(0), 0);
        assert_eq!(BODIES.most_chunks(10), 1);
        assert_eq!(BODIES.most_chunks((256 << 10) + 1), 5);
        assert_eq!(MANIFEST.most_chunks(1 << 20), 256);
        assert!(!keep_compressed(100, 0));
        assert!(keep_compressed(100, 97));
        assert!(!keep_compressed(100, 98));
    }
}
