//! Where every byte of a packet lies, from its manifest alone: each
//! member's header and body offsets, and the bytes the format itself
//! writes between the bodies (headers, padding, the end marker), for any
//! byte range. A consumer that keeps bodies elsewhere (the edge's packs, a
//! client reading bodies out of an older packet file) rebuilds any range of
//! a packet from these, byte for byte what the [`Writer`](crate::Writer)
//! writes.
//!
//! ```
//! use packet_core::in_memory::{build, Source};
//! use packet_core::offsets::{Offsets, Piece};
//! use packet_core::Limits;
//!
//! let built = build(
//!     &[
//!         Source::Dir { path: "workspace".into() },
//!         Source::File { path: "workspace/a.txt".into(), contents: b"hi".to_vec(), executable: false },
//!     ],
//!     None,
//!     vec![],
//!     &Limits::FORMAT,
//! )?;
//! let offsets = Offsets::of(&built.manifest);
//! assert_eq!(offsets.size(), built.bytes.len() as u64);
//!
//! // Rebuild the whole packet from the manifest and the one body.
//! let json = built.manifest.to_canonical_json();
//! let mut rebuilt = Vec::new();
//! for piece in offsets.pieces(&built.manifest, 0..offsets.size()) {
//!     match piece {
//!         Piece::Fill(range) => offsets.write_fill(&built.manifest, range, &mut rebuilt)?,
//!         Piece::Manifest(range) => rebuilt.extend_from_slice(&json[range.start as usize..range.end as usize]),
//!         Piece::Body { index, range } => {
//!             assert_eq!(built.manifest.members[index].path, "workspace/a.txt");
//!             rebuilt.extend_from_slice(&b"hi"[range.start as usize..range.end as usize]);
//!         }
//!     }
//! }
//! assert_eq!(rebuilt, built.bytes);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use alloc::vec::Vec;
use core::ops::Range;

use crate::error::Misuse;
use crate::header::{self, HeaderSpec, Kind, BLOCK};
use crate::manifest::{Manifest, Member};

/// The offsets of a packet's parts, computed from its manifest.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Offsets {
    manifest_len: u64,
    /// `headers[i]`: where member `i`'s header (its PAX header first, if
    /// it has one) starts.
    headers: Vec<u64>,
    /// `data[i]`: where member `i`'s body starts (for a member without a
    /// body, where it would: right after its header).
    data: Vec<u64>,
    size: u64,
}

/// A stretch of a packet's bytes, named by where those bytes come from.
/// [`Offsets::pieces`] cuts a range into them, in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Piece {
    /// Bytes the format writes itself (headers, padding, the end marker),
    /// at these packet offsets: [`Offsets::write_fill`] produces them.
    Fill(Range<u64>),
    /// Bytes of `packet.json`'s canonical JSON, at these offsets within
    /// the JSON ([`Manifest::to_canonical_json`], or the stored bytes).
    Manifest(Range<u64>),
    /// Bytes of the body of `manifest.members[index]`, at these offsets
    /// within the body.
    Body {
        /// Index into `manifest.members`.
        index: usize,
        /// Offsets within the body.
        range: Range<u64>,
    },
}

impl Piece {
    /// How many bytes it covers.
    pub fn len(&self) -> u64 {
        let r = match self {
            Piece::Fill(r) | Piece::Manifest(r) | Piece::Body { range: r, .. } => r,
        };
        r.end - r.start
    }

    /// Whether it covers no bytes (never, for a piece from [`Offsets::pieces`]).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The header bytes the format writes for `member` (its PAX header and
/// body first when it needs one): what precedes its body in a packet.
pub fn header_bytes(member: &Member) -> Vec<u8> {
    let mut out = Vec::with_capacity(BLOCK);
    header::encode(&member.header_spec(), &mut out);
    out
}

fn has_body(member: &Member) -> bool {
    member.kind() == Kind::File && member.size() > 0
}

impl Offsets {
    /// The offsets of the packet `manifest` describes.
    pub fn of(manifest: &Manifest) -> Offsets {
        let manifest_len = manifest.canonical_len();
        let mut at = header::encoded_len(&HeaderSpec::manifest(manifest_len))
            .saturating_add(header::padded(manifest_len));
        let mut headers = Vec::with_capacity(manifest.members.len());
        let mut data = Vec::with_capacity(manifest.members.len());
        for m in &manifest.members {
            headers.push(at);
            at = at.saturating_add(header::encoded_len(&m.header_spec()));
            data.push(at);
            at = at.saturating_add(header::padded(m.size()));
        }
        Offsets {
            manifest_len,
            headers,
            data,
            size: at.saturating_add(2 * BLOCK as u64),
        }
    }

    /// The packet's size in bytes (what [`Manifest::packet_size`] says).
    pub fn size(&self) -> u64 {
        self.size
    }

    /// Where `packet.json`'s JSON lies in the packet.
    pub fn manifest_range(&self) -> Range<u64> {
        BLOCK as u64..BLOCK as u64 + self.manifest_len
    }

    /// Where member `index`'s header starts, if there is such a member.
    pub fn header_offset(&self, index: usize) -> Option<u64> {
        self.headers.get(index).copied()
    }

    /// Where member `index`'s body starts (for a member without a body,
    /// where it would), if there is such a member.
    pub fn data_offset(&self, index: usize) -> Option<u64> {
        self.data.get(index).copied()
    }

    /// Every member's data offset, in manifest order: the
    /// [`VerifiedPacket::data_offsets`](crate::VerifiedPacket::data_offsets)
    /// a reader finds.
    pub fn data_offsets(&self) -> &[u64] {
        &self.data
    }

    /// Where the first body of member `from` or a later one starts (the
    /// packet's end if none has one): the end of the format bytes before it.
    fn next_data(&self, manifest: &Manifest, from: usize) -> u64 {
        manifest.members[from.min(manifest.members.len())..]
            .iter()
            .zip(&self.data[from.min(self.data.len())..])
            .find(|(m, _)| has_body(m))
            .map_or(self.size, |(_, &d)| d)
    }

    /// The member whose header, body or padding holds packet offset `at`
    /// (past `packet.json`'s padding), by binary search.
    fn member_at(&self, at: u64) -> Option<usize> {
        match self.headers.partition_point(|&h| h <= at) {
            0 => None,
            n => Some(n - 1),
        }
    }

    /// Cuts the packet bytes `range` (clamped to the packet) into pieces,
    /// in order; consecutive format bytes are one [`Piece::Fill`].
    pub fn pieces<'a>(&'a self, manifest: &'a Manifest, range: Range<u64>) -> Pieces<'a> {
        Pieces {
            offsets: self,
            manifest,
            at: range.start.min(self.size),
            end: range.end.min(self.size),
        }
    }

    /// Appends the format's bytes at packet offsets `range` (headers,
    /// padding, the end marker), exactly as the [`Writer`](crate::Writer)
    /// writes them. A range that reaches into `packet.json`'s JSON or a
    /// body is a [`Misuse`]: those bytes are the caller's.
    pub fn write_fill(
        &self,
        manifest: &Manifest,
        range: Range<u64>,
        out: &mut Vec<u8>,
    ) -> Result<(), Misuse> {
        if range.end > self.size || range.start > range.end {
            return Err(Misuse::new(alloc::format!(
                "bytes {}..{} are not inside a packet of {} bytes",
                range.start,
                range.end,
                self.size
            )));
        }
        let json = self.manifest_range();
        let mut at = range.start;
        let mut scratch = Vec::new();
        while at < range.end {
            // The stretch that holds `at`: its bytes start at `from`, end at
            // `to`; `header` is set when they are a header's encoding.
            let (from, to, header): (u64, u64, Option<&Member>) = if at < json.start {
                (0, json.start, None)
            } else if at < json.end {
                return Err(Misuse::new(alloc::format!(
                    "offset {at} is inside packet.json, not bytes the format writes"
                )));
            } else {
                match self.member_at(at) {
                    None => (
                        json.end,
                        self.headers.first().copied().unwrap_or(self.size),
                        None,
                    ),
                    Some(i) => {
                        let member = &manifest.members[i];
                        let (h, d) = (self.headers[i], self.data[i]);
                        if at < d {
                            (h, d, Some(member))
                        } else if at < d + member.size() {
                            return Err(Misuse::new(alloc::format!(
                                "offset {at} is inside a member's body, not bytes the format writes"
                            ))
                            .at_path(&member.path));
                        } else {
                            let next = self.headers.get(i + 1).copied().unwrap_or(self.size);
                            (d + member.size(), next, None)
                        }
                    }
                }
            };
            let take = to.min(range.end);
            match (from, header) {
                (0, None) => {
                    scratch.clear();
                    header::encode(&HeaderSpec::manifest(self.manifest_len), &mut scratch);
                    out.extend_from_slice(&scratch[at as usize..take as usize]);
                }
                (h, Some(member)) => {
                    scratch.clear();
                    header::encode(&member.header_spec(), &mut scratch);
                    out.extend_from_slice(&scratch[(at - h) as usize..(take - h) as usize]);
                }
                // Padding and the end marker.
                _ => out.resize(out.len() + (take - at) as usize, 0),
            }
            at = take;
        }
        Ok(())
    }
}

/// The pieces of a byte range ([`Offsets::pieces`]).
pub struct Pieces<'a> {
    offsets: &'a Offsets,
    manifest: &'a Manifest,
    at: u64,
    end: u64,
}

impl Iterator for Pieces<'_> {
    type Item = Piece;

    fn next(&mut self) -> Option<Piece> {
        if self.at >= self.end {
            return None;
        }
        let o = self.offsets;
        let at = self.at;
        let json = o.manifest_range();
        let piece = if at < json.start {
            Piece::Fill(at..json.start.min(self.end))
        } else if at < json.end {
            Piece::Manifest(at - json.start..json.end.min(self.end) - json.start)
        } else {
            match o.member_at(at) {
                None => Piece::Fill(at..o.next_data(self.manifest, 0).min(self.end)),
                Some(i) => {
                    let member = &self.manifest.members[i];
                    let d = o.data[i];
                    if at >= d && at < d + member.size() && has_body(member) {
                        Piece::Body {
                            index: i,
                            range: at - d..(d + member.size()).min(self.end) - d,
                        }
                    } else {
                        // A header, padding or the end marker: up to the
                        // next body (this member's, if `at` is in its header).
                        let next = if at < d && has_body(member) {
                            d
                        } else {
                            o.next_data(self.manifest, i + 1)
                        };
                        Piece::Fill(at..next.min(self.end))
                    }
                }
            }
        };
        self.at += piece.len();
        Some(piece)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::digest::Digest;
    use crate::limits::Limits;
    use alloc::vec;

    fn manifest() -> Manifest {
        Manifest::build(
            vec![
                Member::dir("workspace"),
                Member::file("workspace/a", 3, Digest::of(b"abc"), false),
                Member::file("workspace/empty", 0, Digest::EMPTY, false),
                Member::dir("workspace/d"),
                Member::file("workspace/z", 600, Digest::of(&[7u8; 600]), true),
            ],
            None,
            vec![],
            &Limits::FORMAT,
        )
        .unwrap()
    }

    #[test]
    fn consecutive_format_bytes_are_one_fill_and_ranges_are_clamped() {
        let m = manifest();
        let o = Offsets::of(&m);
        let pieces: Vec<Piece> = o.pieces(&m, 0..u64::MAX).collect();
        let json = o.manifest_range();
        assert_eq!(pieces[0], Piece::Fill(0..512));
        assert_eq!(pieces[1], Piece::Manifest(0..json.end - json.start));
        // packet.json's padding and the first two headers.
        assert_eq!(pieces[2], Piece::Fill(json.end..o.data_offset(1).unwrap()));
        assert_eq!(
            pieces[3],
            Piece::Body {
                index: 1,
                range: 0..3
            }
        );
        // a's padding, the empty file's and d's headers, z's header.
        assert_eq!(
            pieces[4],
            Piece::Fill(o.data_offset(1).unwrap() + 3..o.data_offset(4).unwrap())
        );
        assert_eq!(
            pieces[5],
            Piece::Body {
                index: 4,
                range: 0..600
            }
        );
        assert_eq!(
            pieces[6],
            Piece::Fill(o.data_offset(4).unwrap() + 600..o.size())
        );
        assert_eq!(pieces.len(), 7);
        assert_eq!(pieces.iter().map(Piece::len).sum::<u64>(), o.size());
        assert_eq!(o.size(), m.packet_size());
    }

    #[test]
    fn fill_refuses_the_callers_bytes() {
        let m = manifest();
        let o = Offsets::of(&m);
        let mut out = Vec::new();
        let json = o.manifest_range();
        assert!(o
            .write_fill(&m, json.start..json.start + 1, &mut out)
            .is_err());
        let d = o.data_offset(4).unwrap();
        let e = o.write_fill(&m, d + 10..d + 11, &mut out).unwrap_err();
        assert_eq!(e.path(), Some("workspace/z"));
        assert!(o.write_fill(&m, 0..o.size() + 1, &mut out).is_err());
        o.write_fill(&m, d + 600..o.size(), &mut out).unwrap();
        assert!(out.iter().all(|&b| b == 0));
        assert_eq!(out.len() as u64, o.size() - d - 600);
    }
}
