//! A stored packet's layout (docs/transfer.md, "Storage at the edge"): for
//! each member in manifest order, where its body's chunks lie, as
//! [`ChunkRef`]s into the packet's [`PackTable`]. Three forms are read:
//!
//! - a packet stored whole is its own single pack: its layout
//!   ([`Layout::whole`]) follows from the manifest, never written;
//! - a packet pushed before format /2 has a layout object (`PBLAYOUT`
//!   version 1, [`Layout::decode_v1`]): chunks stored as they are;
//! - a packet stored by a /2 push has a layout stream ([`Layout::encode`],
//!   `PBLAYOUT` version 2), which is itself cut into chunks (the manifest's
//!   CDC parameters) and kept in packs, named by the packet's root. Its
//!   entries are small and change only where a body changed: slots are
//!   stable ([`PackTable`]), offsets are written as the difference from the
//!   end of the previous chunk in the same slot, and a body of one chunk
//!   is named by the manifest (its sha256 and size are not repeated).
//!
//! Version 2, after `"PBLAYOUT"` and the version byte: varint member count,
//! then per member a varint chunk count (0 for a member without a body)
//! and per chunk: for a body of several chunks its 32-byte SHA-256 and
//! varint raw size, then varint slot, signed varint offset difference and
//! varint stored size (0: stored as it is; else a zstd frame of that many
//! bytes).

use std::collections::HashMap;

use packet_core::offsets::Offsets;
use packet_core::{Digest, Manifest, Member};
use pillbox_wire::chunks::Encoding;

use super::chunk::ChunkRef;
use super::packs::PackTable;
use crate::binary::{Corrupt, In, Out};

const MAGIC: &[u8; 8] = b"PBLAYOUT";

/// Whether a member has body bytes in the packet.
pub fn has_body(member: &Member) -> bool {
    member.body().is_some()
}

/// A stored packet's layout.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Layout {
    packs: PackTable,
    /// Member `i`'s chunks are `chunks[starts[i]..starts[i + 1]]`.
    starts: Vec<u32>,
    chunks: Vec<ChunkRef>,
}

/// The offsets written as differences: the end of the last chunk seen in
/// each slot.
#[derive(Default)]
pub struct Deltas(HashMap<u32, u64>);

impl Deltas {
    /// Writes `c`'s location.
    pub fn put(&mut self, out: &mut Out, c: &ChunkRef) {
        let expected = self.0.get(&c.slot).copied().unwrap_or(0);
        out.varint(u64::from(c.slot));
        out.svarint(c.offset as i64 - expected as i64);
        out.varint(match c.encoding {
            Encoding::Identity => 0,
            Encoding::Zstd => c.stored,
        });
        self.0.insert(c.slot, c.offset + c.stored);
    }

    /// Reads a location of a chunk of `raw` bytes named `sha256`, checked
    /// against `packs`.
    pub fn get(
        &mut self,
        r: &mut In<'_>,
        packs: &PackTable,
        sha256: Digest,
        raw: u64,
    ) -> Result<ChunkRef, Corrupt> {
        let slot = u32::try_from(r.varint()?).map_err(|_| Corrupt::new("a slot over 32 bits"))?;
        if packs.key(slot).is_none() {
            return Err(Corrupt::new(format!("a chunk in empty slot {slot}")));
        }
        let expected = self.0.get(&slot).copied().unwrap_or(0);
        let offset = expected
            .checked_add_signed(r.svarint()?)
            .ok_or_else(|| Corrupt::new("a chunk before its pack's start"))?;
        let es = r.varint()?;
        let (stored, encoding) = match es {
            0 => (raw, Encoding::Identity),
            s if s < raw => (s, Encoding::Zstd),
            s => {
                return Err(Corrupt::new(format!(
                    "a zstd chunk of {s} bytes for {raw} raw bytes"
                )))
            }
        };
        if raw == 0 {
            return Err(Corrupt::new("a chunk of no bytes"));
        }
        self.0.insert(slot, offset + stored);
        Ok(ChunkRef {
            sha256,
            raw,
            slot,
            offset,
            stored,
            encoding,
        })
    }
}

impl Layout {
    /// The layout of a packet stored whole under `key`: each body is one
    /// chunk, at its data offset.
    pub fn whole(key: &str, manifest: &Manifest, offsets: &Offsets) -> Layout {
        let mut b = LayoutBuilder::new(PackTable::new());
        let slot = b.packs.slot(key);
        for (i, m) in manifest.members.iter().enumerate() {
            if let Some(body) = m.body() {
                b.push(ChunkRef::identity(
                    body.sha256,
                    slot,
                    offsets.data_offsets()[i],
                    body.size,
                ));
            }
            b.end_member();
        }
        b.finish()
    }

    /// The pack table.
    pub fn packs(&self) -> &PackTable {
        &self.packs
    }

    /// The pack table, to add slots to (a whole read of another object).
    pub fn packs_mut(&mut self) -> &mut PackTable {
        &mut self.packs
    }

    /// Member `index`'s chunks, in order (none for a member without a body).
    pub fn chunks(&self, index: usize) -> &[ChunkRef] {
        match (self.starts.get(index), self.starts.get(index + 1)) {
            (Some(&a), Some(&b)) => &self.chunks[a as usize..b as usize],
            _ => &[],
        }
    }

    /// Every chunk reference, member by member.
    pub fn all_chunks(&self) -> &[ChunkRef] {
        &self.chunks
    }

    /// How many members it describes.
    pub fn members(&self) -> usize {
        self.starts.len().saturating_sub(1)
    }

    /// Bytes of memory it takes, roughly (for the isolate's cache).
    pub fn weight(&self) -> usize {
        self.chunks.len() * core::mem::size_of::<ChunkRef>()
            + self.starts.len() * 4
            + self
                .packs
                .slots()
                .iter()
                .map(|p| p.as_ref().map_or(8, |k| k.len() + 32))
                .sum::<usize>()
    }

    /// The layout stream (version 2); the pack table is the root's.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Out::new(MAGIC, 2);
        out.varint(self.members() as u64);
        let mut deltas = Deltas::default();
        for i in 0..self.members() {
            let chunks = self.chunks(i);
            out.varint(chunks.len() as u64);
            for c in chunks {
                if chunks.len() > 1 {
                    out.digest(&c.sha256);
                    out.varint(c.raw);
                }
                deltas.put(&mut out, c);
            }
        }
        out.finish()
    }

    /// Reads a layout stream (version 2) written for `manifest` with the
    /// root's `packs`, checking that it describes exactly its bodies.
    pub fn decode(bytes: &[u8], manifest: &Manifest, packs: PackTable) -> Result<Layout, Corrupt> {
        let mut r = In::new(bytes, MAGIC, 2, "layout")?;
        if r.varint()? != manifest.members.len() as u64 {
            return Err(Corrupt::new("a layout for another member count"));
        }
        let mut b = LayoutBuilder::new(packs);
        let mut deltas = Deltas::default();
        for m in &manifest.members {
            let n = r.varint_count(3)?;
            let body = m.body();
            match (body, n) {
                (None, 0) => {}
                (Some(body), 1) => {
                    let c = deltas.get(&mut r, &b.packs, body.sha256, body.size)?;
                    b.push(c);
                }
                (Some(body), n) if n > 1 => {
                    let mut total = 0u64;
                    for _ in 0..n {
                        let sha = r.digest()?;
                        let raw = r.varint()?;
                        total = total.saturating_add(raw);
                        let c = deltas.get(&mut r, &b.packs, sha, raw)?;
                        b.push(c);
                    }
                    if total != body.size {
                        return Err(Corrupt::new(format!(
                            "the layout's chunks for {} do not add up to its size",
                            m.path
                        )));
                    }
                }
                _ => {
                    return Err(Corrupt::new(format!(
                        "the layout gives {} {n} chunks",
                        m.path
                    )))
                }
            }
            b.end_member();
        }
        r.end()?;
        Ok(b.finish())
    }

    /// Reads a layout object of a packet pushed before format /2 (its
    /// version 1) written for `manifest`, checking that it describes
    /// exactly its bodies.
    pub fn decode_v1(bytes: &[u8], manifest: &Manifest) -> Result<Layout, Corrupt> {
        let mut r = In::new(bytes, MAGIC, 1, "layout")?;
        let count = r.count(2)?;
        let mut slots = Vec::with_capacity(count);
        for _ in 0..count {
            slots.push(Some(r.text()?));
        }
        let packs = PackTable::from_slots(slots)
            .ok_or_else(|| Corrupt::new("a layout names a pack twice"))?;
        if r.count(4)? != manifest.members.len() {
            return Err(Corrupt::new("a layout for another member count"));
        }
        let mut b = LayoutBuilder::new(packs);
        for m in &manifest.members {
            let n = r.count(20)?;
            let mut total = 0u64;
            for _ in 0..n {
                let slot = r.u32()?;
                let offset = r.u64()?;
                let size = r.u64()?;
                let sha256 = if n > 1 {
                    r.digest()?
                } else {
                    m.sha256().unwrap_or(Digest::EMPTY)
                };
                if slot as usize >= count || size == 0 {
                    return Err(Corrupt::new(format!(
                        "a bad chunk reference for {}",
                        m.path
                    )));
                }
                total = total.saturating_add(size);
                b.push(ChunkRef::identity(sha256, slot, offset, size));
            }
            if total != m.size() || (has_body(m) != (n > 0)) {
                return Err(Corrupt::new(format!(
                    "the layout's chunks for {} do not add up to its size",
                    m.path
                )));
            }
            b.end_member();
        }
        r.end()?;
        Ok(b.finish())
    }
}

/// Builds a [`Layout`] member by member.
pub struct LayoutBuilder {
    /// The pack table the chunks' slots index.
    pub packs: PackTable,
    starts: Vec<u32>,
    chunks: Vec<ChunkRef>,
}

impl LayoutBuilder {
    /// An empty layout over `packs`.
    pub fn new(packs: PackTable) -> LayoutBuilder {
        LayoutBuilder {
            packs,
            starts: vec![0],
            chunks: Vec::new(),
        }
    }

    /// Adds a chunk to the current member.
    pub fn push(&mut self, chunk: ChunkRef) {
        self.chunks.push(chunk);
    }

    /// Ends the current member (call it once per member, bodies or not).
    pub fn end_member(&mut self) {
        self.starts.push(self.chunks.len() as u32);
    }

    /// The layout.
    pub fn finish(self) -> Layout {
        Layout {
            packs: self.packs,
            starts: self.starts,
            chunks: self.chunks,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use packet_core::Limits;

    fn manifest() -> Manifest {
        Manifest::build(
            vec![
                Member::dir("workspace"),
                Member::file("workspace/a", 3, Digest::of(b"abc"), false),
                Member::file("workspace/big", 300, Digest::of(&[1u8; 300]), false),
                Member::file("workspace/empty", 0, Digest::EMPTY, false),
            ],
            None,
            vec![],
            &Limits::FORMAT,
        )
        .unwrap()
    }

    fn two_packs() -> PackTable {
        let mut t = PackTable::new();
        t.slot("packs/1");
        t.slot("packs/2");
        t
    }

    fn sample() -> Layout {
        let mut b = LayoutBuilder::new(two_packs());
        b.end_member();
        b.push(ChunkRef::identity(Digest::of(b"abc"), 1, 9, 3));
        b.end_member();
        b.push(ChunkRef::identity(Digest::of(b"x"), 0, 0, 100));
        b.push(ChunkRef {
            sha256: Digest::of(b"y"),
            raw: 200,
            slot: 1,
            offset: 12,
            stored: 17,
            encoding: Encoding::Zstd,
        });
        b.end_member();
        b.end_member();
        b.finish()
    }

    #[test]
    fn a_whole_packets_bodies_are_at_their_data_offsets() {
        let m = manifest();
        let o = Offsets::of(&m);
        let l = Layout::whole("uploads/x", &m, &o);
        assert_eq!(l.packs().keys(), ["uploads/x"]);
        assert_eq!(l.members(), 4);
        assert!(l.chunks(0).is_empty() && l.chunks(3).is_empty());
        assert_eq!(
            l.chunks(1),
            [ChunkRef::identity(
                Digest::of(b"abc"),
                0,
                o.data_offset(1).unwrap(),
                3
            )]
        );
        let again = Layout::decode(&l.encode(), &m, l.packs().clone()).unwrap();
        assert_eq!(again, l);
    }

    #[test]
    fn a_layout_round_trips_and_must_match_its_manifest() {
        let m = manifest();
        let l = sample();
        let bytes = l.encode();
        assert_eq!(Layout::decode(&bytes, &m, two_packs()).unwrap(), l);
        // Another manifest, a cut stream, a byte more, an empty slot:
        // corrupt, no panic.
        let mut other = m.clone();
        other.members.pop();
        assert!(Layout::decode(&bytes, &other, two_packs()).is_err());
        assert!(Layout::decode(&bytes[..bytes.len() - 1], &m, two_packs()).is_err());
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(Layout::decode(&longer, &m, two_packs()).is_err());
        let mut bigger = m.clone();
        if let packet_core::Entry::File { size, .. } = &mut bigger.members[2].entry {
            *size = 301;
        }
        assert!(Layout::decode(&bytes, &bigger, two_packs()).is_err());
        let mut holed = two_packs();
        holed.keep_only(&[true, false]);
        assert!(Layout::decode(&bytes, &m, holed).is_err());
        for cut in 0..bytes.len() {
            let _ = Layout::decode(&bytes[..cut], &m, two_packs());
        }
    }

    #[test]
    fn an_unchanged_body_keeps_its_bytes_in_the_stream() {
        // Back-to-back bodies in one slot take a byte each for their
        // offsets; moving one body changes its entry and the next one's.
        let members: Vec<Member> = std::iter::once(Member::dir("workspace"))
            .chain((0..200).map(|i| {
                Member::file(
                    packet_core::MemberPath::parse(&format!("workspace/f{i:03}")).unwrap(),
                    10,
                    Digest::of(&[i as u8, 1]),
                    false,
                )
            }))
            .collect();
        let m = Manifest::build(members, None, vec![], &Limits::FORMAT).unwrap();
        let layout = |moved: Option<usize>| {
            let mut t = PackTable::new();
            t.slot("packs/first");
            t.slot("packs/new");
            let mut b = LayoutBuilder::new(t);
            b.end_member();
            for (i, member) in m.members.iter().enumerate().skip(1) {
                let body = member.body().unwrap();
                let c = if moved == Some(i) {
                    ChunkRef::identity(body.sha256, 1, 0, 10)
                } else {
                    ChunkRef::identity(body.sha256, 0, 10 * i as u64, 10)
                };
                b.push(c);
                b.end_member();
            }
            b.finish().encode()
        };
        let (before, after) = (layout(None), layout(Some(100)));
        assert!(before.len() < 200 * 5, "{} bytes", before.len());
        let differ = before.iter().zip(&after).filter(|(a, b)| a != b).count();
        assert!(differ <= 8, "{differ} bytes differ");
    }

    #[test]
    fn a_layout_object_of_version_1_is_read() {
        let m = manifest();
        let mut out = Out::new(MAGIC, 1);
        out.u32(1);
        out.text("packs/old");
        out.u32(4);
        out.u32(0);
        out.u32(1);
        out.u32(0);
        out.u64(5);
        out.u64(3);
        out.u32(2);
        for (off, size, seed) in [(8u64, 100u64, b"x"), (108, 200, b"y")] {
            out.u32(0);
            out.u64(off);
            out.u64(size);
            out.digest(&Digest::of(seed));
        }
        out.u32(0);
        let l = Layout::decode_v1(&out.finish(), &m).unwrap();
        assert_eq!(l.packs().keys(), ["packs/old"]);
        assert_eq!(
            l.chunks(1),
            [ChunkRef::identity(Digest::of(b"abc"), 0, 5, 3)]
        );
        assert_eq!(
            l.chunks(2)[1],
            ChunkRef::identity(Digest::of(b"y"), 0, 108, 200)
        );
    }
}
