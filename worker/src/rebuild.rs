//! How to produce any byte range of a stored packet (docs/transfer.md,
//! "Reads"): packet-core's [`Offsets`] cut the range into the format's
//! bytes, `packet.json` and bodies; the [`Layout`] says where each body's
//! chunks lie; [`Reads`] groups the result into R2 range reads, one per
//! run of chunks that lie back to back in one pack (consecutive bodies
//! included, with the headers and padding between them interleaved), so a
//! packet whose bodies were uploaded in order costs a few reads, not one
//! per member. Pure: the Worker's reader follows the plan.

use core::ops::Range;

use packet_core::offsets::{Offsets, Piece, Pieces};
use packet_core::Manifest;

use crate::layout::Layout;

/// Most segments in one [`Read`]: a new read continues where it stopped,
/// so a packet of many small members never needs one huge plan.
const MAX_SEGMENTS: usize = 4096;

/// One stretch of output.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Segment {
    /// The format's bytes at these packet offsets
    /// ([`Offsets::write_fill`]).
    Fill(Range<u64>),
    /// `packet.json`'s bytes at these offsets of the JSON.
    Json(Range<u64>),
    /// The next `len` bytes of the read's source: part of member
    /// `member`'s body.
    Stored {
        /// Index into `manifest.members`.
        member: usize,
        /// Bytes.
        len: u64,
    },
}

/// One R2 range read (or none, for a stretch of format bytes only) and the
/// output it makes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Read {
    /// The pack (an index into [`Layout::packs`]) and the byte range read
    /// from it; `None` when no stored byte is needed.
    pub source: Option<(u32, Range<u64>)>,
    /// The output, in order; the [`Segment::Stored`] ones add up to the
    /// source's length.
    pub segments: Vec<Segment>,
}

/// Where [`Reads`] is in a body piece.
#[derive(Clone, Copy)]
struct BodyCursor {
    member: usize,
    /// The chunk that holds `at`, and where it starts in the body.
    chunk: usize,
    chunk_start: u64,
    at: u64,
    end: u64,
}

/// The reads that produce a byte range of a packet, in order.
pub struct Reads<'a> {
    pieces: Pieces<'a>,
    layout: &'a Layout,
    /// A body piece being cut into chunk references.
    body: Option<BodyCursor>,
    current: Read,
}

impl<'a> Reads<'a> {
    /// The reads for packet bytes `range` (clamped to the packet).
    pub fn new(
        manifest: &'a Manifest,
        offsets: &'a Offsets,
        layout: &'a Layout,
        range: Range<u64>,
    ) -> Reads<'a> {
        Reads {
            pieces: offsets.pieces(manifest, range),
            layout,
            body: None,
            current: Read {
                source: None,
                segments: Vec::new(),
            },
        }
    }

    /// Adds stored bytes `pack[offset..offset + len]` of `member`; returns
    /// the finished read if they do not continue the current one.
    fn stored(&mut self, member: usize, pack: u32, offset: u64, len: u64) -> Option<Read> {
        let continues = matches!(
            &self.current.source,
            Some((p, r)) if *p == pack && r.end == offset
        );
        let full = self.current.segments.len() >= MAX_SEGMENTS;
        // A new read unless these bytes continue this one's source (or this
        // one has none yet), or it is full.
        let done = if (continues || self.current.source.is_none()) && !full {
            None
        } else {
            Some(core::mem::replace(
                &mut self.current,
                Read {
                    source: None,
                    segments: Vec::new(),
                },
            ))
        };
        match &mut self.current.source {
            Some((_, r)) => r.end += len,
            None => self.current.source = Some((pack, offset..offset + len)),
        }
        self.current.segments.push(Segment::Stored { member, len });
        done
    }

    fn other(&mut self, segment: Segment) -> Option<Read> {
        let done = (self.current.segments.len() >= MAX_SEGMENTS).then(|| {
            core::mem::replace(
                &mut self.current,
                Read {
                    source: None,
                    segments: Vec::new(),
                },
            )
        });
        self.current.segments.push(segment);
        done
    }
}

impl Iterator for Reads<'_> {
    type Item = Read;

    fn next(&mut self) -> Option<Read> {
        loop {
            if let Some(cursor) = self.body.take() {
                let BodyCursor {
                    member,
                    chunk,
                    chunk_start,
                    at,
                    end,
                } = cursor;
                let Some(c) = self.layout.chunks(member).get(chunk).copied() else {
                    // The layout was checked against the manifest when it
                    // was read; a body it does not cover ends the plan.
                    continue;
                };
                let take = (chunk_start + c.size).min(end) - at;
                let next = at + take;
                if next < end {
                    self.body = Some(BodyCursor {
                        member,
                        chunk: chunk + 1,
                        chunk_start: chunk_start + c.size,
                        at: next,
                        end,
                    });
                }
                if let Some(done) = self.stored(member, c.pack, c.offset + (at - chunk_start), take)
                {
                    return Some(done);
                }
                continue;
            }
            let done = match self.pieces.next() {
                Some(Piece::Body { index, range }) => {
                    // The chunk that holds the piece's first byte.
                    let (mut chunk, mut chunk_start) = (0, 0u64);
                    for c in self.layout.chunks(index) {
                        if range.start < chunk_start + c.size {
                            break;
                        }
                        chunk += 1;
                        chunk_start += c.size;
                    }
                    self.body = Some(BodyCursor {
                        member: index,
                        chunk,
                        chunk_start,
                        at: range.start,
                        end: range.end,
                    });
                    None
                }
                Some(Piece::Fill(r)) => self.other(Segment::Fill(r)),
                Some(Piece::Manifest(r)) => self.other(Segment::Json(r)),
                None => {
                    if self.current.segments.is_empty() {
                        return None;
                    }
                    return Some(core::mem::replace(
                        &mut self.current,
                        Read {
                            source: None,
                            segments: Vec::new(),
                        },
                    ));
                }
            };
            if done.is_some() {
                return done;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::{ChunkRef, LayoutBuilder};
    use packet_core::in_memory::{build, Source};
    use packet_core::{Digest, Limits};

    /// Rebuilds `range` from `reads`, reading packs from `packs`.
    fn rebuild(
        manifest: &Manifest,
        offsets: &Offsets,
        layout: &Layout,
        packs: &[Vec<u8>],
        range: Range<u64>,
    ) -> (Vec<u8>, usize) {
        let json = manifest.to_canonical_json();
        let mut out = Vec::new();
        let mut reads = 0;
        for read in Reads::new(manifest, offsets, layout, range) {
            let mut source: &[u8] = match &read.source {
                Some((p, r)) => {
                    reads += 1;
                    &packs[*p as usize][r.start as usize..r.end as usize]
                }
                None => &[],
            };
            for s in &read.segments {
                match s {
                    Segment::Fill(r) => offsets.write_fill(manifest, r.clone(), &mut out).unwrap(),
                    Segment::Json(r) => {
                        out.extend_from_slice(&json[r.start as usize..r.end as usize])
                    }
                    Segment::Stored { len, .. } => {
                        out.extend_from_slice(&source[..*len as usize]);
                        source = &source[*len as usize..];
                    }
                }
            }
            assert!(source.is_empty(), "a read's source is used up exactly");
        }
        (out, reads)
    }

    #[test]
    fn any_range_of_a_chunked_packet_rebuilds_and_back_to_back_chunks_are_one_read() {
        let bodies: Vec<Vec<u8>> = vec![
            b"alpha".to_vec(),
            (0..3000u32).map(|i| i as u8).collect(),
            b"omega!".to_vec(),
        ];
        let sources = vec![
            Source::Dir {
                path: "workspace".into(),
            },
            Source::File {
                path: "workspace/a".into(),
                contents: bodies[0].clone(),
                executable: false,
            },
            Source::File {
                path: "workspace/b".into(),
                contents: bodies[1].clone(),
                executable: false,
            },
            Source::Dir {
                path: "workspace/d".into(),
            },
            Source::File {
                path: "workspace/z".into(),
                contents: bodies[2].clone(),
                executable: false,
            },
        ];
        let built = build(&sources, None, vec![], &Limits::FORMAT).unwrap();
        let m = &built.manifest;
        let o = Offsets::of(m);
        // Pack 0 holds a, b's first 1000 bytes and z back to back; pack 1
        // holds the rest of b.
        let mut pack0 = Vec::new();
        pack0.extend_from_slice(&bodies[0]);
        pack0.extend_from_slice(&bodies[1][..1000]);
        let mut pack1 = bodies[1][1000..].to_vec();
        pack1.extend_from_slice(&bodies[2]);
        let mut b = LayoutBuilder::new();
        let p0 = b.pack("packs/0");
        let p1 = b.pack("packs/1");
        let sha = |b: &[u8]| Digest::of(b);
        for member in &m.members {
            match member.path.as_str() {
                "workspace/a" => b.push(ChunkRef {
                    pack: p0,
                    offset: 0,
                    size: 5,
                    sha256: sha(&bodies[0]),
                }),
                "workspace/b" => {
                    b.push(ChunkRef {
                        pack: p0,
                        offset: 5,
                        size: 1000,
                        sha256: sha(&bodies[1][..1000]),
                    });
                    b.push(ChunkRef {
                        pack: p1,
                        offset: 0,
                        size: 2000,
                        sha256: sha(&bodies[1][1000..]),
                    });
                }
                "workspace/z" => b.push(ChunkRef {
                    pack: p1,
                    offset: 2000,
                    size: 6,
                    sha256: sha(&bodies[2]),
                }),
                _ => {}
            }
            b.end_member();
        }
        let layout = b.finish();
        let packs = vec![pack0, pack1];
        let (whole, reads) = rebuild(m, &o, &layout, &packs, 0..o.size());
        assert!(whole == built.bytes);
        assert_eq!(
            reads, 2,
            "a+b's start from pack 0, b's end and z from pack 1"
        );
        let size = o.size();
        for start in (0..size).step_by(97) {
            for len in [1, 5, 511, 512, 513, 2048, 5000] {
                let r = start..(start + len).min(size);
                let (part, _) = rebuild(m, &o, &layout, &packs, r.clone());
                assert!(
                    part == built.bytes[r.start as usize..r.end as usize],
                    "{r:?}"
                );
            }
        }
        // A whole packet's layout reads the object where the body lies.
        let whole_layout = Layout::whole("uploads/w", m, &o);
        let (again, reads) = rebuild(
            m,
            &o,
            &whole_layout,
            std::slice::from_ref(&built.bytes),
            0..size,
        );
        assert!(again == built.bytes);
        assert_eq!(
            reads, 3,
            "bodies of a whole packet are not back to back: headers lie between"
        );
    }
}
