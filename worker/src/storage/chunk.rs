//! Where a chunk lies: the one reference layouts, roots, bases and pushes
//! share. A chunk is named by the SHA-256 of its raw bytes and its raw
//! size; it is kept at an offset of a pack, as stored (compressed or not).

use core::ops::Range;

use packet_core::Digest;
use pillbox_wire::chunks::Encoding;

/// A chunk's name: the SHA-256 of its raw bytes and their number. Bases,
/// uploads and stored chunks are matched by both (one sha256 names one
/// size; a name alone proves nothing).
pub type Name = (Digest, u64);

/// Where the store holds a chunk already: its `chunks` row.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Held {
    /// The pack's key.
    pub pack: String,
    /// Its first stored byte there.
    pub offset: u64,
    /// Its stored size.
    pub stored: u64,
    /// How it is stored.
    pub encoding: Encoding,
}

/// A chunk a request stored in its pack, as its new `chunks` row: sha256,
/// raw size, offset, stored size, encoding.
pub type NewChunk = (Digest, u64, u64, u64, Encoding);

/// Where one chunk lies and what it holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ChunkRef {
    /// The SHA-256 of its raw bytes (a body's own when the body is one chunk).
    pub sha256: Digest,
    /// Its raw size.
    pub raw: u64,
    /// The pack it lies in: an index into the pack table in context.
    pub slot: u32,
    /// Its first stored byte in the pack.
    pub offset: u64,
    /// Its stored size.
    pub stored: u64,
    /// How it is stored.
    pub encoding: Encoding,
}

impl ChunkRef {
    /// A chunk stored as it is.
    pub fn identity(sha256: Digest, slot: u32, offset: u64, size: u64) -> ChunkRef {
        ChunkRef {
            sha256,
            raw: size,
            slot,
            offset,
            stored: size,
            encoding: Encoding::Identity,
        }
    }

    /// Its name.
    pub fn name(&self) -> Name {
        (self.sha256, self.raw)
    }

    /// Its stored bytes in its pack.
    pub fn range(&self) -> Range<u64> {
        self.offset..self.offset + self.stored
    }

    /// Whether its stored bytes are its raw bytes (any range of it is a
    /// range read).
    pub fn is_identity(&self) -> bool {
        self.encoding == Encoding::Identity
    }

    /// The same chunk in pack `slot`.
    pub fn in_slot(self, slot: u32) -> ChunkRef {
        ChunkRef { slot, ..self }
    }
}
