//! What the binary bodies ([`crate::chunks`], [`crate::recipes`]) share:
//! one table of refusals with their codes (in [`ApiCode`]), and the reading of
//! fixed-size big-endian fields from input that arrives in pieces.

use alloc::string::String;
use alloc::vec::Vec;
use core::fmt;

use crate::codes::ApiCode;

macro_rules! decode_errors {
    ($($(#[$doc:meta])* $kind:ident => $code:ident,)*) => {
        /// Why a binary body was refused.
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        pub enum DecodeErrorKind {
            $($(#[$doc])* $kind,)*
        }

        impl DecodeErrorKind {
            /// Every kind, in the table's order.
            pub const ALL: &'static [DecodeErrorKind] = &[$(DecodeErrorKind::$kind,)*];

            /// The API's code for it.
            pub const fn api_code(self) -> ApiCode {
                match self {
                    $(DecodeErrorKind::$kind => ApiCode::$code,)*
                }
            }

            /// The stable code the API and the CLI show.
            pub const fn code(self) -> &'static str {
                self.api_code().as_str()
            }
        }
    };
}

decode_errors! {
    /// A chunk batch does not start with `PBCHUNK2`.
    BatchMagic => ChunkBatchMagic,
    /// More frames than the limit.
    BatchFrames => ChunkBatchFrames,
    /// A frame's raw size is 0 or over the limit.
    BatchFrameSize => ChunkBatchFrameSize,
    /// A frame's encoding is not one the format names.
    BatchEncoding => ChunkBatchEncoding,
    /// A frame's stored size does not fit its encoding (identity: the raw
    /// size; zstd: 1 to the raw size less one).
    BatchStoredSize => ChunkBatchStoredSize,
    /// The frames add up to more bytes (stored or raw) than the limit.
    BatchSize => ChunkBatchSize,
    /// The batch ended before its table or a frame did.
    BatchTruncated => ChunkBatchTruncated,
    /// Bytes follow the last frame.
    BatchTrailing => ChunkBatchTrailing,
    /// A recipes document or a push body does not start with its magic.
    RecipesMagic => RecipesMagic,
    /// A count of chunks, bodies or runs over its limit (or more than the
    /// bytes allowed could hold).
    RecipesCount => RecipesCount,
    /// A chunk of 0 bytes or over the largest chunk, a body of 0 bytes, or
    /// a copy of no chunks.
    RecipesSize => RecipesSize,
    /// A run whose kind is neither a chunk nor a copy.
    RecipesRun => RecipesRun,
    /// The recipes ended early.
    RecipesTruncated => RecipesTruncated,
    /// Bytes follow the end of a recipes document.
    RecipesTrailing => RecipesTrailing,
}

/// A refused binary body: what is wrong, at which byte.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DecodeError {
    /// What is wrong.
    pub kind: DecodeErrorKind,
    /// The offset in the body where it was found.
    pub offset: u64,
    /// What was found, for a person.
    pub message: String,
}

impl DecodeError {
    /// A refusal of `kind` at `offset`.
    pub fn new(kind: DecodeErrorKind, offset: u64, message: String) -> DecodeError {
        DecodeError {
            kind,
            offset,
            message,
        }
    }

    /// The stable code.
    pub fn code(&self) -> &'static str {
        self.kind.code()
    }
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} at byte {}: {}",
            self.code(),
            self.offset,
            self.message
        )
    }
}

impl core::error::Error for DecodeError {}

/// Gathers one fixed-size field from input that comes in pieces.
#[derive(Debug, Default)]
pub(crate) struct Field {
    bytes: Vec<u8>,
}

impl Field {
    /// Takes bytes of `input` until the field holds `want`; returns how many
    /// it took and the field once it is whole.
    pub(crate) fn fill<'a>(&'a mut self, input: &[u8], want: usize) -> (usize, Option<&'a [u8]>) {
        let n = input.len().min(want.saturating_sub(self.bytes.len()));
        self.bytes.extend_from_slice(&input[..n]);
        if self.bytes.len() >= want {
            (n, Some(&self.bytes[..want]))
        } else {
            (n, None)
        }
    }

    /// Forgets the field (the next one starts).
    pub(crate) fn clear(&mut self) {
        self.bytes.clear();
    }

    /// Bytes gathered so far.
    pub(crate) fn len(&self) -> usize {
        self.bytes.len()
    }
}

pub(crate) fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

pub(crate) fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    u64::from_be_bytes(a)
}

pub(crate) fn digest_at(b: &[u8], at: usize) -> packet_core::Digest {
    let mut a = [0u8; 32];
    a.copy_from_slice(&b[at..at + 32]);
    packet_core::Digest(a)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_is_distinct() {
        let mut codes: Vec<&str> = DecodeErrorKind::ALL.iter().map(|k| k.code()).collect();
        codes.sort_unstable();
        let n = codes.len();
        codes.dedup();
        assert_eq!(codes.len(), n);
    }

    #[test]
    fn a_field_fills_across_pieces() {
        let mut f = Field::default();
        assert_eq!(f.fill(b"ab", 4), (2, None));
        let (n, whole) = f.fill(b"cdef", 4);
        assert_eq!((n, whole), (2, Some(&b"abcd"[..])));
        f.clear();
        assert_eq!(f.len(), 0);
    }
}
