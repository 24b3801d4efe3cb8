//! Cutting bodies and `packet.json` into chunks (docs/transfer.md,
//! "Units"), by the one table in `pillbox_wire::chunking`: bytes of at most
//! [`Cdc::one_chunk_up_to`] are one chunk named by their own sha256; longer
//! ones are cut with FastCDC (the `fastcdc` crate's 2020 algorithm, its
//! default normalisation, no seed). The same bytes give the same chunks on
//! every client and at the edge, so a file that grew at its end shares
//! every chunk but the last few with the file it was, and a manifest that
//! changed in one member shares all but one or two of its chunks.

use std::io::{self, Read};
use std::path::Path;

use fastcdc::v2020::{self, Normalization};
use packet_core::{Digest, Hasher};
use pillbox_wire::chunking::Cdc;
use pillbox_wire::recipes::ChunkName;
use pillbox_wire::Chunking;

use crate::error::{CliError, Refused, Result};

pub use pillbox_wire::chunking::{BODIES, MANIFEST};

/// Refuses a store that cuts or compresses otherwise than this client: its
/// recipes would not match ours, so nothing could be reused.
pub fn check(theirs: &Chunking) -> Result<()> {
    if *theirs == Chunking::ours() {
        return Ok(());
    }
    Err(Refused::ChunkingMismatch {
        theirs: describe(theirs),
        ours: describe(&Chunking::ours()),
    }
    .into())
}

/// How a chunking table reads in a message.
pub fn describe(c: &Chunking) -> String {
    format!(
        "{} bodies {}/{}/{}/{} manifest {}/{}/{}/{} zstd {} window {} saving {}%",
        c.algorithm,
        c.bodies.threshold,
        c.bodies.min,
        c.bodies.avg,
        c.bodies.max,
        c.manifest.threshold,
        c.manifest.min,
        c.manifest.avg,
        c.manifest.max,
        c.zstd_level,
        c.zstd_max_window,
        c.min_saving_percent
    )
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

impl Piece {
    /// The chunk's name and size, as recipes list it.
    pub fn name(&self) -> ChunkName {
        ChunkName {
            sha256: self.sha256,
            size: self.size,
        }
    }
}

/// Bytes cut into chunks, with the sha256 of the whole.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cut {
    /// The chunks, in order.
    pub pieces: Vec<Piece>,
    /// The sha256 of all of the bytes read.
    pub body: Digest,
    /// How many bytes were read.
    pub size: u64,
}

/// The chunks of bytes held in memory (`packet.json`).
pub fn cut_bytes(bytes: &[u8], cdc: &Cdc) -> Vec<Piece> {
    if bytes.is_empty() {
        return Vec::new();
    }
    if cdc.is_one_chunk(bytes.len() as u64) {
        return vec![Piece {
            offset: 0,
            size: bytes.len() as u32,
            sha256: Digest::of(bytes),
        }];
    }
    v2020::FastCDC::new(bytes, cdc.min as usize, cdc.avg as usize, cdc.max as usize)
        .map(|c| Piece {
            offset: c.offset as u64,
            size: c.length as u32,
            sha256: Digest::of(&bytes[c.offset..c.offset + c.length]),
        })
        .collect()
}

/// How many first chunks a grown body's own cut `new` shares with the
/// chunks `old` of the body it grew from, short of the old last one. The
/// grown body's bytes from `new[k].offset` on are what [`grown`] reads:
/// when the old chunks were themselves kept from a growth (their last old
/// one ended where that body ended, not where the content would cut), the
/// body's own cut parts from them there, a chunk or two before its end.
pub fn shared_chunks(old: &[ChunkName], new: &[Piece]) -> usize {
    new.iter()
        .zip(&old[..old.len().saturating_sub(1)])
        .take_while(|(p, c)| p.name() == **c)
        .count()
}

/// The chunks of a body that grew from a body whose chunks were `old`: the
/// old chunks as they are, but the last one when it is shorter than
/// `cdc.min` (it is cut again with what follows), then the new bytes cut
/// by FastCDC. A session log that gains a turn then sends the turn (and at
/// most `min` bytes before it), not the old log's last chunk of up to
/// `max`, turn after turn; every chunk but the last still has at least
/// `min` bytes, so the count stays within the format's bound.
///
/// `new` is the body's own cut and `tail` its bytes from where its chunk
/// [`shared_chunks`] starts to its end (checked against `new`); the old
/// chunks from there on are checked against `tail`. `None` when the body
/// does not start with the old one's bytes.
pub fn grown(old: &[ChunkName], new: &[Piece], tail: &[u8], cdc: &Cdc) -> Option<Vec<Piece>> {
    let n = old.len();
    if n == 0 {
        return None;
    }
    let k = shared_chunks(old, new);
    let start = new.get(k)?.offset;
    let mut at = 0usize;
    for p in &new[k..] {
        let bytes = tail.get(at..at + p.size as usize)?;
        if Digest::of(bytes) != p.sha256 {
            return None;
        }
        at += p.size as usize;
    }
    let old_end: usize = old[k..].iter().map(|c| c.size as usize).sum();
    if at != tail.len() || tail.len() <= old_end {
        return None;
    }
    let mut out = new[..k].to_vec();
    let mut from = 0usize;
    for (i, c) in old[k..].iter().enumerate() {
        let bytes = tail.get(from..from + c.size as usize)?;
        if Digest::of(bytes) != c.sha256 {
            return None;
        }
        if k + i == n - 1 && c.size < cdc.min {
            break;
        }
        out.push(Piece {
            offset: start + from as u64,
            size: c.size,
            sha256: c.sha256,
        });
        from += c.size as usize;
    }
    for p in cut_bytes(&tail[from..], cdc) {
        out.push(Piece {
            offset: start + from as u64 + p.offset,
            ..p
        });
    }
    Some(out)
}

/// Cuts everything `source` yields into chunks by `cdc`, hashing each
/// chunk and the whole; `on_chunk` sees each chunk's bytes in order (to
/// keep, send or screen them).
///
/// The buffer always holds at least `max` bytes ahead of the cut point (or
/// the rest of the input), which is what FastCDC over the whole input in
/// memory sees, so the cuts are the same. Input of at most
/// `one_chunk_up_to` bytes is one chunk.
pub fn cut(
    mut source: impl Read,
    cdc: &Cdc,
    label: &Path,
    mut on_chunk: impl FnMut(&Piece, &[u8]) -> Result<()>,
) -> Result<Cut> {
    let (mask_s, mask_l) = v2020::select_masks(cdc.avg as usize, Normalization::Level1);
    let max = cdc.max as usize;
    let window = (cdc.one_chunk_up_to as usize + 1).max(max);
    let mut buf = vec![0u8; 4 * window];
    let (mut start, mut end, mut eof) = (0usize, 0usize, false);
    let mut whole = Hasher::new();
    let mut pieces = Vec::new();
    let mut offset = 0u64;
    let mut first = true;
    loop {
        if !eof && end - start < window {
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
        let n = if first && eof && cdc.is_one_chunk((end - start) as u64) {
            end - start
        } else {
            v2020::cut(
                &buf[start..end],
                cdc.min as usize,
                cdc.avg as usize,
                max,
                mask_s,
                mask_l,
                mask_s << 1,
                mask_l << 1,
            )
            .1
        };
        first = false;
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
        cut(bytes, &BODIES, Path::new("t"), |_, _| Ok(())).unwrap()
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
    fn the_cuts_are_fastcdc_v2020_over_the_whole_input() {
        for cdc in [BODIES, MANIFEST] {
            for (len, seed) in [
                (0, 1),
                (1000, 2),
                (cdc.one_chunk_up_to as usize, 3),
                (cdc.one_chunk_up_to as usize + 1, 3),
                (300 << 10, 3),
                (5 << 20, 4),
                (9 << 20, 5),
            ] {
                let bytes = sample(len, seed);
                let expected: Vec<(u64, u32)> = if cdc.is_one_chunk(len as u64) {
                    (len > 0).then_some((0, len as u32)).into_iter().collect()
                } else {
                    v2020::FastCDC::new(
                        &bytes,
                        cdc.min as usize,
                        cdc.avg as usize,
                        cdc.max as usize,
                    )
                    .map(|c| (c.offset as u64, c.length as u32))
                    .collect()
                };
                let got = cut(Trickle(&bytes, 0), &cdc, Path::new("t"), |_, _| Ok(())).unwrap();
                let pieces: Vec<(u64, u32)> =
                    got.pieces.iter().map(|p| (p.offset, p.size)).collect();
                assert_eq!(pieces, expected, "{len} bytes");
                assert_eq!(got.pieces, cut_bytes(&bytes, &cdc), "{len} bytes");
                assert_eq!(got.body, Digest::of(&bytes));
                assert_eq!(got.size, len as u64);
                for p in &got.pieces {
                    let at = p.offset as usize;
                    assert_eq!(p.sha256, Digest::of(&bytes[at..at + p.size as usize]));
                    assert!(p.size <= cdc.largest_chunk());
                }
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
        for cdc in [BODIES, MANIFEST] {
            let before = sample(8 << 20, 21);
            let mut after = before.clone();
            after.splice(4 << 20..4 << 20, sample(100, 22));
            let old: std::collections::HashSet<Digest> =
                cut_bytes(&before, &cdc).iter().map(|p| p.sha256).collect();
            let new = cut_bytes(&after, &cdc);
            let changed = new.iter().filter(|p| !old.contains(&p.sha256)).count();
            assert!(changed <= 3, "{changed} of {} chunks changed", new.len());
        }
    }

    #[test]
    fn a_grown_body_keeps_its_old_chunks_and_cuts_only_what_follows() {
        let names = |p: &[Piece]| p.iter().map(Piece::name).collect::<Vec<_>>();
        for (len, seed) in [(8 << 20, 31), (9 << 20, 32), (300 << 10, 33)] {
            let before = sample(len, seed);
            let old = cut_bytes(&before, &BODIES);
            let mut after = before.clone();
            after.extend_from_slice(&sample(16 << 10, seed + 100));
            let new = cut_bytes(&after, &BODIES);
            let n = old.len();
            let start = new[n - 1].offset as usize;
            let g = grown(&names(&old), &new, &after[start..], &BODIES).unwrap();
            // The same bytes, chunk by chunk.
            let mut at = 0u64;
            for p in &g {
                assert_eq!(p.offset, at);
                let range = p.offset as usize..(p.offset + u64::from(p.size)) as usize;
                assert_eq!(p.sha256, Digest::of(&after[range]));
                at += u64::from(p.size);
            }
            assert_eq!(at, after.len() as u64);
            // The old chunks are kept; only a short old last one is cut again.
            let last = old[n - 1];
            let kept = if last.size >= BODIES.min { n } else { n - 1 };
            assert_eq!(names(&g[..kept]), names(&old[..kept]));
            let sent: u64 = g[kept..].iter().map(|p| u64::from(p.size)).sum();
            assert!(sent < u64::from(BODIES.min) + (16 << 10), "{sent}");
            assert!(g[..g.len() - 1].iter().all(|p| p.size >= BODIES.min));
            // Not a growth: bytes changed inside the old body.
            let mut edited = after.clone();
            edited[start] ^= 1;
            let new_edited = cut_bytes(&edited, &BODIES);
            let s2 = new_edited.get(n - 1).map_or(0, |p| p.offset as usize);
            assert!(grown(&names(&old), &new_edited, &edited[s2..], &BODIES).is_none());
            // A tail that is not the body's is refused too.
            assert!(grown(&names(&old), &new, &before[start..], &BODIES).is_none());
            // It grows again: the chunks kept the first time (whose last old
            // one ends where the old body did, not where its content
            // would cut) are kept again; only the new turn is cut.
            let mut again = after.clone();
            again.extend_from_slice(&sample(16 << 10, seed + 200));
            let new_again = cut_bytes(&again, &BODIES);
            let k = shared_chunks(&names(&g), &new_again);
            let s3 = new_again[k].offset as usize;
            let g2 = grown(&names(&g), &new_again, &again[s3..], &BODIES).unwrap();
            let kept2 = if g[g.len() - 1].size >= BODIES.min {
                g.len()
            } else {
                g.len() - 1
            };
            assert_eq!(names(&g2[..kept2]), names(&g[..kept2]));
            let sent2: u64 = g2[kept2..].iter().map(|p| u64::from(p.size)).sum();
            assert!(sent2 < u64::from(BODIES.min) + (16 << 10), "{sent2}");
            let mut at = 0u64;
            for p in &g2 {
                assert_eq!(p.offset, at);
                let range = p.offset as usize..(p.offset + u64::from(p.size)) as usize;
                assert_eq!(p.sha256, Digest::of(&again[range]));
                at += u64::from(p.size);
            }
            assert_eq!(at, again.len() as u64);
        }
    }

    #[test]
    fn a_store_that_chunks_otherwise_is_refused() {
        assert!(check(&Chunking::ours()).is_ok());
        let mut other = Chunking::ours();
        other.bodies.avg = 128 << 10;
        assert_eq!(check(&other).unwrap_err().code(), "chunking_mismatch");
        let mut other = Chunking::ours();
        other.zstd_level = 19;
        assert_eq!(check(&other).unwrap_err().code(), "chunking_mismatch");
    }
}
