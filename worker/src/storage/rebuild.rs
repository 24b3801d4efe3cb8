//! How to produce any byte range of a stored packet (docs/transfer.md,
//! "Reads"), pure: packet-core's [`Offsets`] cut the range into the
//! format's bytes, `packet.json` and bodies; the [`Layout`] says where each
//! body's chunks lie; [`Reads`] groups the result into R2 range reads, one
//! per run of chunks that lie back to back in one pack (consecutive bodies
//! included, with the headers and padding between them interleaved). A
//! chunk stored as it is can be read in part; a zstd chunk is read whole,
//! decoded, and the bytes asked for taken from it. [`runs`] groups a list
//! of whole chunks the same way (a body being proven, a chunk answer).

use core::ops::Range;

use packet_core::offsets::{Offsets, Piece, Pieces};
use packet_core::Manifest;

use super::chunk::ChunkRef;
use super::layout::Layout;

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
    /// The next `len` bytes of the read's source, as they are: part of
    /// member `member`'s body.
    Stored {
        /// Index into `manifest.members`.
        member: usize,
        /// Bytes.
        len: u64,
    },
    /// The next `stored` bytes of the read's source are a zstd chunk of
    /// `raw` bytes; its raw bytes `skip .. skip + take` are output.
    Frame {
        /// Index into `manifest.members`.
        member: usize,
        /// The chunk.
        chunk: ChunkRef,
        /// Raw bytes skipped.
        skip: u64,
        /// Raw bytes output.
        take: u64,
    },
}

/// One R2 range read (or none, for a stretch of format bytes only) and the
/// output it makes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Read {
    /// The pack (a slot of the layout's pack table) and the byte range read
    /// from it; `None` when no stored byte is needed.
    pub source: Option<(u32, Range<u64>)>,
    /// The output, in order; the stored bytes the segments take add up to
    /// the source's length.
    pub segments: Vec<Segment>,
}

impl Read {
    fn empty() -> Read {
        Read {
            source: None,
            segments: Vec::new(),
        }
    }
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

/// A body byte the layout gives no chunk for: the range is refused, not
/// answered without it (a layout never drops bytes).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Uncovered {
    /// Index into `manifest.members`.
    pub member: usize,
    /// The body offset with no chunk.
    pub at: u64,
}

/// The reads that produce a byte range of a packet, in order; an
/// [`Uncovered`] byte ends them.
pub struct Reads<'a> {
    pieces: Pieces<'a>,
    layout: &'a Layout,
    /// A body piece being cut into chunk references.
    body: Option<BodyCursor>,
    current: Read,
    refused: bool,
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
            current: Read::empty(),
            refused: false,
        }
    }

    /// Adds stored bytes `slot[from..from + len]` making `segment`; returns
    /// the finished read if they do not continue the current one.
    fn stored(&mut self, slot: u32, from: u64, len: u64, segment: Segment) -> Option<Read> {
        let continues = matches!(
            &self.current.source,
            Some((p, r)) if *p == slot && r.end == from
        );
        let full = self.current.segments.len() >= MAX_SEGMENTS;
        let done = if (continues || self.current.source.is_none()) && !full {
            None
        } else {
            Some(core::mem::replace(&mut self.current, Read::empty()))
        };
        match &mut self.current.source {
            Some((_, r)) => r.end += len,
            None => self.current.source = Some((slot, from..from + len)),
        }
        self.current.segments.push(segment);
        done
    }

    fn other(&mut self, segment: Segment) -> Option<Read> {
        let done = (self.current.segments.len() >= MAX_SEGMENTS)
            .then(|| core::mem::replace(&mut self.current, Read::empty()));
        self.current.segments.push(segment);
        done
    }
}

impl Iterator for Reads<'_> {
    type Item = Result<Read, Uncovered>;

    fn next(&mut self) -> Option<Result<Read, Uncovered>> {
        if self.refused {
            return None;
        }
        self.next_read()
    }
}

impl Reads<'_> {
    fn next_read(&mut self) -> Option<Result<Read, Uncovered>> {
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
                    // was read; should a body still lack bytes, the read
                    // is refused rather than answered short.
                    self.refused = true;
                    return Some(Err(Uncovered { member, at }));
                };
                let take = (chunk_start + c.raw).min(end) - at;
                let next = at + take;
                if next < end {
                    self.body = Some(BodyCursor {
                        member,
                        chunk: chunk + 1,
                        chunk_start: chunk_start + c.raw,
                        at: next,
                        end,
                    });
                }
                let skip = at - chunk_start;
                let done = if c.is_identity() {
                    self.stored(
                        c.slot,
                        c.offset + skip,
                        take,
                        Segment::Stored { member, len: take },
                    )
                } else {
                    self.stored(
                        c.slot,
                        c.offset,
                        c.stored,
                        Segment::Frame {
                            member,
                            chunk: c,
                            skip,
                            take,
                        },
                    )
                };
                if done.is_some() {
                    return done.map(Ok);
                }
                continue;
            }
            let done = match self.pieces.next() {
                Some(Piece::Body { index, range }) => {
                    // The chunk that holds the piece's first byte.
                    let (mut chunk, mut chunk_start) = (0, 0u64);
                    for c in self.layout.chunks(index) {
                        if range.start < chunk_start + c.raw {
                            break;
                        }
                        chunk += 1;
                        chunk_start += c.raw;
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
                    return Some(Ok(core::mem::replace(&mut self.current, Read::empty())));
                }
            };
            if done.is_some() {
                return done.map(Ok);
            }
        }
    }
}

/// Whole chunks grouped into range reads: each run of chunks lying back to
/// back in one slot (in the order given) is one read of `(slot, range)`,
/// listing its chunks. At most `max_run` stored bytes per read.
pub fn runs(chunks: &[ChunkRef], max_run: u64) -> Vec<(u32, Range<u64>, Vec<ChunkRef>)> {
    let mut out: Vec<(u32, Range<u64>, Vec<ChunkRef>)> = Vec::new();
    for c in chunks {
        if let Some((slot, r, list)) = out.last_mut() {
            if *slot == c.slot && r.end == c.offset && r.end - r.start + c.stored <= max_run {
                r.end += c.stored;
                list.push(*c);
                continue;
            }
        }
        out.push((c.slot, c.range(), vec![*c]));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::frames;
    use crate::storage::layout::LayoutBuilder;
    use crate::storage::packs::PackTable;
    use packet_core::in_memory::{build, Source};
    use packet_core::{Digest, Limits};
    use pillbox_wire::chunks::Encoding;

    /// Rebuilds `range` from `reads`, reading packs from `packs`.
    pub(crate) fn rebuild(
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
            let read = read.unwrap();
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
                    Segment::Frame {
                        chunk, skip, take, ..
                    } => {
                        let mut raw = Vec::new();
                        frames::decode_into(
                            chunk.encoding,
                            chunk.raw,
                            &source[..chunk.stored as usize],
                            &mut raw,
                        )
                        .unwrap();
                        out.extend_from_slice(&raw[*skip as usize..(*skip + *take) as usize]);
                        source = &source[chunk.stored as usize..];
                    }
                }
            }
            assert!(source.is_empty(), "a read's source is used up exactly");
        }
        (out, reads)
    }

    #[test]
    fn any_range_of_a_packet_rebuilds_from_plain_and_compressed_chunks() {
        let text: Vec<u8> = (0..6000u32)
            .flat_map(|i| format!("{} ", i % 17).into_bytes())
            .take(6000)
            .collect();
        let bodies: Vec<Vec<u8>> = vec![b"alpha".to_vec(), text.clone(), b"omega!".to_vec()];
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
        // Pack 0 holds a, b's first 1000 bytes and b's next 3000 as a zstd
        // frame, back to back; pack 1 holds the rest of b and z.
        let (enc, z) = frames::compress(&text[1000..4000]);
        assert_eq!(enc, Encoding::Zstd);
        let mut pack0 = Vec::new();
        pack0.extend_from_slice(&bodies[0]);
        pack0.extend_from_slice(&text[..1000]);
        pack0.extend_from_slice(&z);
        let mut pack1 = text[4000..].to_vec();
        pack1.extend_from_slice(&bodies[2]);
        let mut t = PackTable::new();
        let p0 = t.slot("packs/0");
        let p1 = t.slot("packs/1");
        let mut b = LayoutBuilder::new(t);
        let sha = |b: &[u8]| Digest::of(b);
        for member in &m.members {
            match member.path.as_str() {
                "workspace/a" => b.push(ChunkRef::identity(sha(&bodies[0]), p0, 0, 5)),
                "workspace/b" => {
                    b.push(ChunkRef::identity(sha(&text[..1000]), p0, 5, 1000));
                    b.push(ChunkRef {
                        sha256: sha(&text[1000..4000]),
                        raw: 3000,
                        slot: p0,
                        offset: 1005,
                        stored: z.len() as u64,
                        encoding: Encoding::Zstd,
                    });
                    b.push(ChunkRef::identity(sha(&text[4000..]), p1, 0, 2000));
                }
                "workspace/z" => b.push(ChunkRef::identity(sha(&bodies[2]), p1, 2000, 6)),
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
            "a, b's start from pack 0, b's end and z from pack 1"
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

        // A layout that lacks b's last chunk: a range reaching into the
        // bytes it lacks is refused, never answered without them.
        let mut short = LayoutBuilder::new(layout.packs().clone());
        for (i, member) in m.members.iter().enumerate() {
            let chunks = layout.chunks(i);
            let keep = if member.path == "workspace/b" {
                &chunks[..2]
            } else {
                chunks
            };
            for c in keep {
                short.push(*c);
            }
            short.end_member();
        }
        let short = short.finish();
        let b = m
            .members
            .iter()
            .position(|x| x.path == "workspace/b")
            .unwrap();
        let b_start = o.data_offsets()[b];
        let refused: Vec<_> = Reads::new(m, &o, &short, 0..size).collect();
        assert_eq!(
            refused.last(),
            Some(&Err(Uncovered {
                member: b,
                at: 4000
            })),
            "the first byte with no chunk ends the reads"
        );
        let before: Vec<_> = Reads::new(m, &o, &short, 0..b_start + 4000).collect();
        assert!(
            before.iter().all(Result::is_ok),
            "bytes the layout has are read"
        );
    }

    #[test]
    fn runs_group_back_to_back_chunks_of_one_pack() {
        let c = |slot, offset, stored| ChunkRef::identity(Digest::EMPTY, slot, offset, stored);
        let list = [
            c(0, 0, 10),
            c(0, 10, 5),
            c(1, 15, 5),
            c(0, 15, 1),
            c(0, 100, 1),
        ];
        let r = runs(&list, 1 << 20);
        let shape: Vec<(u32, Range<u64>, usize)> =
            r.iter().map(|(s, r, l)| (*s, r.clone(), l.len())).collect();
        assert_eq!(
            shape,
            [
                (0, 0..15, 2),
                (1, 15..20, 1),
                (0, 15..16, 1),
                (0, 100..101, 1)
            ]
        );
        assert_eq!(runs(&list[..2], 12).len(), 2, "a run is bounded");
    }
}
