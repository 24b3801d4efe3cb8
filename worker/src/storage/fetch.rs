//! What a chunk answer sends (`POST /v1/packets/{digest}/chunks`,
//! docs/transfer.md "Recipes and chunks"), pure: the chunks asked for,
//! each one a client may fetch by name from the packet
//! ([`super::stored::Stored::fetchable`]), within the answer's bounds, in
//! the order asked, and the chunk batch's table that heads the answer.

use std::collections::HashMap;

use packet_core::Digest;
use pillbox_wire::chunks::{encode_table, BatchLimits, Frame, ENTRY_BYTES, HEAD_BYTES};
use pillbox_wire::ApiCode;

use super::chunk::ChunkRef;
use crate::problem::Problem;

/// Most bytes (as stored) one chunk answer carries.
pub const MAX_CHUNK_BYTES: u64 = 64 << 20;

/// A chunk answer: its chunks, its table and its length.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChunkAnswer {
    /// The chunks asked for, in order, where they lie.
    pub chunks: Vec<ChunkRef>,
    /// The chunk batch's table (its head and one entry per chunk).
    pub table: Vec<u8>,
    /// The answer's bytes: the table and every chunk as stored.
    pub length: u64,
}

/// 413 `chunks_too_many`.
fn too_many() -> Problem {
    Problem::new(
        ApiCode::ChunksTooMany,
        "ask for at most 65,536 chunks and 64 MiB per request",
        "split the request",
    )
}

/// Checks how many chunks a request names, before the packet is read.
pub fn check_count(asked: usize) -> Result<(), Problem> {
    if asked > BatchLimits::MAX_FRAMES as usize {
        return Err(too_many());
    }
    Ok(())
}

/// The answer to `asked` (hex SHA-256s) among `fetchable`, the chunks of
/// the packet `digest` a client may fetch: 400 `chunk_unknown` for the
/// first that is none of them, 413 `chunks_too_many` when they add up to
/// more than [`MAX_CHUNK_BYTES`].
pub fn answer(
    fetchable: &HashMap<Digest, ChunkRef>,
    asked: &[String],
    digest: &Digest,
) -> Result<ChunkAnswer, Problem> {
    let mut chunks: Vec<ChunkRef> = Vec::with_capacity(asked.len());
    let mut total = 0u64;
    for hex in asked {
        let found = Digest::from_hex(hex)
            .ok()
            .and_then(|d| fetchable.get(&d))
            .ok_or_else(|| {
                Problem::bad_request(
                    ApiCode::ChunkUnknown,
                    format!("{hex:?} is not a chunk of packet {digest} (GET its recipes; a body of at most 1 MiB is one chunk)"),
                )
            })?;
        total += found.stored;
        chunks.push(*found);
    }
    if total > MAX_CHUNK_BYTES {
        return Err(too_many());
    }
    let frames: Vec<Frame> = chunks
        .iter()
        .map(|c| Frame {
            sha256: c.sha256,
            raw_size: c.raw as u32,
            stored_size: c.stored as u32,
            encoding: c.encoding,
        })
        .collect();
    let mut table = Vec::with_capacity(HEAD_BYTES + ENTRY_BYTES * frames.len());
    encode_table(&frames, &mut table);
    let length = table.len() as u64 + total;
    Ok(ChunkAnswer {
        chunks,
        table,
        length,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use pillbox_wire::chunks::Encoding;

    fn chunk(tag: &str, offset: u64, stored: u64) -> ChunkRef {
        ChunkRef {
            encoding: Encoding::Zstd,
            stored,
            ..ChunkRef::identity(Digest::of(tag.as_bytes()), 0, offset, 1 << 20)
        }
    }

    fn fetchable(chunks: &[ChunkRef]) -> HashMap<Digest, ChunkRef> {
        chunks.iter().map(|c| (c.sha256, *c)).collect()
    }

    fn hex(c: &ChunkRef) -> String {
        c.sha256.hex().to_string()
    }

    #[test]
    fn the_chunks_asked_for_are_sent_in_order_after_their_table() {
        let (a, b) = (chunk("a", 0, 300), chunk("b", 300, 200));
        let packet = Digest::of(b"packet");
        let answer = answer(&fetchable(&[a, b]), &[hex(&b), hex(&a), hex(&b)], &packet).unwrap();
        assert_eq!(answer.chunks, [b, a, b]);
        assert_eq!(answer.table.len(), HEAD_BYTES + 3 * ENTRY_BYTES);
        assert_eq!(answer.length, answer.table.len() as u64 + 700);
        let mut table = Vec::new();
        let frame = |c: &ChunkRef| Frame {
            sha256: c.sha256,
            raw_size: 1 << 20,
            stored_size: c.stored as u32,
            encoding: Encoding::Zstd,
        };
        encode_table(&[frame(&b), frame(&a), frame(&b)], &mut table);
        assert_eq!(answer.table, table);
    }

    #[test]
    fn a_chunk_the_packet_does_not_offer_is_refused_by_name() {
        let a = chunk("a", 0, 300);
        let packet = Digest::of(b"packet");
        for asked in [
            "not hex".to_string(),
            Digest::of(b"other").hex().to_string(),
        ] {
            let err = answer(&fetchable(&[a]), &[hex(&a), asked.clone()], &packet).unwrap_err();
            assert_eq!((err.status, err.error.code()), (400, "chunk_unknown"));
            assert!(err
                .error
                .refusal
                .details
                .message
                .starts_with(&format!("{asked:?}")));
        }
    }

    #[test]
    fn an_answer_holds_at_most_65536_chunks_and_64_mib() {
        assert_eq!(check_count(65_536), Ok(()));
        assert_eq!(
            check_count(65_537).unwrap_err().error.code(),
            "chunks_too_many"
        );
        let (a, b) = (chunk("a", 0, 32 << 20), chunk("b", 32 << 20, 32 << 20));
        let packet = Digest::of(b"packet");
        assert!(answer(&fetchable(&[a, b]), &[hex(&a), hex(&b)], &packet).is_ok());
        let c = chunk("c", 64 << 20, 1);
        let err = answer(
            &fetchable(&[a, b, c]),
            &[hex(&a), hex(&b), hex(&c)],
            &packet,
        )
        .unwrap_err();
        assert_eq!(err.error.code(), "chunks_too_many");
    }
}
