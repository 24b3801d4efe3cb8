//! Cutting bodies into chunks (docs/transfer.md, "Units"): a body of at
//! most [`THRESHOLD`] bytes is one chunk named by its own sha256; a larger
//! one is cut with FastCDC (the `fastcdc` crate's 2020 algorithm, its
//! default normalisation, no seed) into chunks of 64 KiB to 1 MiB, about
//! 256 KiB on average. The same bytes give the same chunks on every
//! client, so a file that grew at its end shares every chunk but the last
//! few with the file it was.

use std::io::{self, Read};
use std::path::Path;

use fastcdc::v2020::{self, Normalization};
use packet_core::{Digest, Hasher};
use pillbox_wire::Chunking;

use crate::error::{CliError, Refused, Result};

/// The largest body sent as one chunk.
pub const THRESHOLD: u64 = 256 << 10;
/// The smallest chunk FastCDC cuts (a body's last chunk may be shorter).
pub const MIN_SIZE: u32 = 64 << 10;
/// The average chunk it aims for.
pub const AVG_SIZE: u32 = 256 << 10;
/// The largest chunk.
pub const MAX_SIZE: u32 = 1 << 20;
/// The algorithm's name on the wire.
pub const ALGORITHM: &str = "fastcdc-v2020";

/// The chunking this client does, as a store describes it.
pub fn ours() -> Chunking {
    Chunking {
        algorithm: ALGORITHM.to_owned(),
        threshold: THRESHOLD,
        min: MIN_SIZE.into(),
        avg: AVG_SIZE.into(),
        max: MAX_SIZE.into(),
    }
}

/// Refuses a store that expects bodies cut another way: its recipes would
/// not match ours, so nothing could be reused.
pub fn check(theirs: &Chunking) -> Result<()> {
    if *theirs == ours() {
        return Ok(());
    }
    Err(Refused::ChunkingMismatch {
        theirs: format!(
            "{} threshold {} min {} avg {} max {}",
            theirs.algorithm, theirs.threshold, theirs.min, theirs.avg, theirs.max
        ),
    }
    .into())
}

/// One chunk of a body: where it starts in the body, its size and sha256.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Piece {
    /// Offset in the body.
    pub offset: u64,
    /// Size in bytes.
    pub size: u32,
    /// Its sha256.
    pub sha256: Digest,
}

/// A large body cut into chunks, with the sha256 of the whole.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cut {
    /// The chunks, in order.
    pub pieces: Vec<Piece>,
    /// The sha256 of all of the bytes read.
    pub body: Digest,
    /// How many bytes were read.
    pub size: u64,
}

/// Cuts everything `source` yields into chunks, hashing each chunk and the
/// whole; `on_chunk` sees each chunk's bytes (to keep or send them).
///
/// The buffer always holds at least [`MAX_SIZE`] bytes ahead of the cut
/// point (or the rest of the input), which is what FastCDC over the whole
/// body in memory sees, so the cuts are the same.
pub fn cut(
    mut source: impl Read,
    label: &Path,
    mut on_chunk: impl FnMut(&Piece, &[u8]) -> Result<()>,
) -> Result<Cut> {
    let (mask_s, mask_l) = v2020::select_masks(AVG_SIZE as usize, Normalization::Level1);
    let max = MAX_SIZE as usize;
    let mut buf = vec![0u8; 4 * max];
    let (mut start, mut end, mut eof) = (0usize, 0usize, false);
    let mut whole = Hasher::new();
    let mut pieces = Vec::new();
    let mut offset = 0u64;
    loop {
        if !eof && end - start < max {
            buf.copy_within(start..end, 0);
            end -= start;
            start = 0;
            while !eof && end < buf.len() {
                match source.read(&mut buf[end..]) {
                    Ok(0) => eof = true,
                    Ok(n) => end += n,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) => return Err(CliError::io("read", label, e)),
                }
            }
        }
        if start == end {
            break;
        }
        let (_, n) = v2020::cut(
            &buf[start..end],
            MIN_SIZE as usize,
            AVG_SIZE as usize,
            max,
            mask_s,
            mask_l,
            mask_s << 1,
            mask_l << 1,
        );
        let bytes = &buf[start..start + n];
        whole.update(bytes);
        let piece = Piece {
            offset,
            size: n as u32,
            sha256: Digest::of(bytes),
        };
        on_chunk(&piece, bytes)?;
        pieces.push(piece);
        offset += n as u64;
        start += n;
    }
    Ok(Cut {
        pieces,
        body: whole.finish(),
        size: offset,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Bytes that look like text with repeats, seeded.
    fn sample(len: usize, seed: u64) -> Vec<u8> {
        let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
        (0..len)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                (x % 251) as u8
            })
            .collect()
    }

    fn cut_all(bytes: &[u8]) -> Cut {
        cut(bytes, Path::new("t"), |_, _| Ok(())).unwrap()
    }

    /// Feeds the reader in small, uneven reads.
    struct Trickle<'a>(&'a [u8], usize);
    impl Read for Trickle<'_> {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            self.1 = self.1 % 7919 + 1;
            let n = self.1.min(buf.len()).min(self.0.len());
            buf[..n].copy_from_slice(&self.0[..n]);
            self.0 = &self.0[n..];
            Ok(n)
        }
    }

    #[test]
    fn the_cuts_are_fastcdc_v2020_over_the_whole_body() {
        for (len, seed) in [
            (0, 1),
            (1000, 2),
            (300 << 10, 3),
            (5 << 20, 4),
            (9 << 20, 5),
        ] {
            let bytes = sample(len, seed);
            let expected: Vec<(u64, u32)> = v2020::FastCDC::new(
                &bytes,
                MIN_SIZE as usize,
                AVG_SIZE as usize,
                MAX_SIZE as usize,
            )
            .map(|c| (c.offset as u64, c.length as u32))
            .collect();
            let got = cut(Trickle(&bytes, 0), Path::new("t"), |_, _| Ok(())).unwrap();
            let pieces: Vec<(u64, u32)> = got.pieces.iter().map(|p| (p.offset, p.size)).collect();
            assert_eq!(pieces, expected, "{len} bytes");
            assert_eq!(got.body, Digest::of(&bytes));
            assert_eq!(got.size, len as u64);
            for p in &got.pieces {
                let at = p.offset as usize;
                assert_eq!(p.sha256, Digest::of(&bytes[at..at + p.size as usize]));
                assert!(p.size <= MAX_SIZE);
            }
        }
    }

    #[test]
    fn the_same_bytes_give_the_same_recipe() {
        let bytes = sample(6 << 20, 9);
        assert_eq!(cut_all(&bytes), cut_all(&bytes.clone()));
    }

    #[test]
    fn an_append_changes_only_the_last_chunks() {
        let before = sample(8 << 20, 11);
        let mut after = before.clone();
        after.extend_from_slice(&sample(100 << 10, 12));
        let (a, b) = (cut_all(&before), cut_all(&after));
        assert!(a.pieces.len() > 10);
        // Every chunk but the last of the old body is a chunk of the new one,
        // at the same place.
        let kept = a.pieces.len() - 1;
        assert_eq!(a.pieces[..kept], b.pieces[..kept]);
        assert!(b.pieces.len() <= a.pieces.len() + 2);
    }

    #[test]
    fn an_insertion_in_the_middle_changes_only_nearby_chunks() {
        let before = sample(8 << 20, 21);
        let mut after = before.clone();
        after.splice(4 << 20..4 << 20, sample(1000, 22));
        let old: std::collections::HashSet<Digest> =
            cut_all(&before).pieces.iter().map(|p| p.sha256).collect();
        let new = cut_all(&after).pieces;
        let changed = new.iter().filter(|p| !old.contains(&p.sha256)).count();
        assert!(changed <= 3, "{changed} of {} chunks changed", new.len());
    }

    #[test]
    fn a_store_that_chunks_otherwise_is_refused() {
        assert!(check(&ours()).is_ok());
        let other = Chunking {
            avg: 128 << 10,
            ..ours()
        };
        assert_eq!(check(&other).unwrap_err().code(), "chunking_mismatch");
    }
}
