//! A stored packet's layout (docs/transfer.md, "Storage"): the packs it
//! uses and, for each member in manifest order, where its body's bytes
//! lie, as chunk references `(pack, offset, size, sha256)`. A chunked
//! packet's layout is an R2 object (`layouts/…`, [`Layout::encode`]); a
//! packet stored whole is its own single pack, and its layout
//! ([`Layout::whole`]) is computed from the manifest, never written.
//!
//! Encoding (big-endian): `"PBLAYOUT"`, version 1, `u32` pack count, each
//! pack key as `u16` length + UTF-8, `u32` member count, then per member a
//! `u32` chunk count and per chunk `u32 pack, u64 offset, u64 size` and,
//! when the body has several chunks, the chunk's 32-byte SHA-256 (a body of
//! one chunk is named by its own sha256 in the manifest).

use std::collections::HashMap;

use packet_core::offsets::Offsets;
use packet_core::{Digest, Kind, Manifest, Member};

use crate::binary::{Corrupt, In, Out};

const MAGIC: &[u8; 8] = b"PBLAYOUT";
const VERSION: u8 = 1;

/// Where one chunk of a body lies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChunkRef {
    /// Index into [`Layout::packs`].
    pub pack: u32,
    /// Its first byte in the pack.
    pub offset: u64,
    /// Its size.
    pub size: u64,
    /// Its SHA-256 (the body's own when the body is one chunk).
    pub sha256: Digest,
}

/// Whether a member has body bytes in the packet.
pub fn has_body(member: &Member) -> bool {
    member.kind() == Kind::File && member.size() > 0
}

/// A stored packet's layout.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Layout {
    packs: Vec<String>,
    /// Member `i`'s chunks are `chunks[starts[i]..starts[i + 1]]`.
    starts: Vec<u32>,
    chunks: Vec<ChunkRef>,
}

impl Layout {
    /// The layout of a packet stored whole under `key`: each body is one
    /// reference, at its data offset.
    pub fn whole(key: &str, manifest: &Manifest, offsets: &Offsets) -> Layout {
        let mut b = LayoutBuilder::new();
        let pack = b.pack(key);
        for (i, m) in manifest.members.iter().enumerate() {
            if has_body(m) {
                b.push(ChunkRef {
                    pack,
                    offset: offsets.data_offsets()[i],
                    size: m.size(),
                    sha256: m.sha256().unwrap_or(Digest::EMPTY),
                });
            }
            b.end_member();
        }
        b.finish()
    }

    /// The pack keys, by index.
    pub fn packs(&self) -> &[String] {
        &self.packs
    }

    /// Member `index`'s chunks, in order (none for a member without a body).
    pub fn chunks(&self, index: usize) -> &[ChunkRef] {
        match (self.starts.get(index), self.starts.get(index + 1)) {
            (Some(&a), Some(&b)) => &self.chunks[a as usize..b as usize],
            _ => &[],
        }
    }

    /// How many members it describes.
    pub fn members(&self) -> usize {
        self.starts.len().saturating_sub(1)
    }

    /// Bytes of memory it takes, roughly (for the isolate's cache).
    pub fn weight(&self) -> usize {
        self.chunks.len() * core::mem::size_of::<ChunkRef>()
            + self.starts.len() * 4
            + self.packs.iter().map(|p| p.len() + 24).sum::<usize>()
    }

    /// The object's bytes.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Out::new(MAGIC, VERSION);
        out.u32(self.packs.len() as u32);
        for p in &self.packs {
            out.text(p);
        }
        out.u32(self.members() as u32);
        for i in 0..self.members() {
            let chunks = self.chunks(i);
            out.u32(chunks.len() as u32);
            for c in chunks {
                out.u32(c.pack);
                out.u64(c.offset);
                out.u64(c.size);
                if chunks.len() > 1 {
                    out.digest(&c.sha256);
                }
            }
        }
        out.finish()
    }

    /// Reads a layout object written for `manifest`, checking that it
    /// describes exactly its bodies.
    pub fn decode(bytes: &[u8], manifest: &Manifest) -> Result<Layout, Corrupt> {
        let mut r = In::new(bytes, MAGIC, VERSION, "layout")?;
        let mut b = LayoutBuilder::new();
        let packs = r.count(2)?;
        for _ in 0..packs {
            let key = r.text()?;
            b.pack(&key);
        }
        if b.packs.len() != packs {
            return Err(Corrupt::new("a layout names a pack twice"));
        }
        if r.count(4)? != manifest.members.len() {
            return Err(Corrupt::new("a layout for another member count"));
        }
        for m in &manifest.members {
            let n = r.count(20)?;
            let mut total = 0u64;
            for _ in 0..n {
                let pack = r.u32()?;
                let offset = r.u64()?;
                let size = r.u64()?;
                let sha256 = if n > 1 {
                    r.digest()?
                } else {
                    m.sha256().unwrap_or(Digest::EMPTY)
                };
                if pack as usize >= packs || size == 0 {
                    return Err(Corrupt::new(format!(
                        "a bad chunk reference for {}",
                        m.path
                    )));
                }
                total = total.saturating_add(size);
                b.push(ChunkRef {
                    pack,
                    offset,
                    size,
                    sha256,
                });
            }
            if total != if has_body(m) { m.size() } else { 0 } || (has_body(m) && n == 0) {
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

/// Builds a [`Layout`] member by member, interning pack keys.
#[derive(Default)]
pub struct LayoutBuilder {
    packs: Vec<String>,
    index: HashMap<String, u32>,
    starts: Vec<u32>,
    chunks: Vec<ChunkRef>,
}

impl LayoutBuilder {
    /// An empty layout.
    pub fn new() -> LayoutBuilder {
        LayoutBuilder {
            starts: vec![0],
            ..Default::default()
        }
    }

    /// The index of the pack `key`, added if new.
    pub fn pack(&mut self, key: &str) -> u32 {
        if let Some(&i) = self.index.get(key) {
            return i;
        }
        let i = self.packs.len() as u32;
        self.packs.push(key.to_string());
        self.index.insert(key.to_string(), i);
        i
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

    #[test]
    fn a_whole_packets_bodies_are_at_their_data_offsets() {
        let m = manifest();
        let o = Offsets::of(&m);
        let l = Layout::whole("uploads/x", &m, &o);
        assert_eq!(l.packs(), ["uploads/x"]);
        assert_eq!(l.members(), 4);
        assert!(l.chunks(0).is_empty() && l.chunks(3).is_empty());
        assert_eq!(
            l.chunks(1),
            [ChunkRef {
                pack: 0,
                offset: o.data_offset(1).unwrap(),
                size: 3,
                sha256: Digest::of(b"abc")
            }]
        );
        assert_eq!(Layout::decode(&l.encode(), &m).unwrap(), l);
    }

    #[test]
    fn a_chunked_layout_round_trips_and_must_match_its_manifest() {
        let m = manifest();
        let mut b = LayoutBuilder::new();
        let p = b.pack("packs/1");
        let q = b.pack("packs/2");
        assert_eq!(b.pack("packs/1"), p);
        b.end_member();
        b.push(ChunkRef {
            pack: q,
            offset: 9,
            size: 3,
            sha256: Digest::of(b"abc"),
        });
        b.end_member();
        for (i, size) in [(0u64, 100u64), (100, 200)] {
            b.push(ChunkRef {
                pack: p,
                offset: i,
                size,
                sha256: Digest::of(&[1u8; 1][..]),
            });
        }
        b.end_member();
        b.end_member();
        let l = b.finish();
        let bytes = l.encode();
        assert_eq!(Layout::decode(&bytes, &m).unwrap(), l);
        // Another manifest, a cut object, a byte more: corrupt, no panic.
        let mut other = m.clone();
        other.members.pop();
        assert!(Layout::decode(&bytes, &other).is_err());
        assert!(Layout::decode(&bytes[..bytes.len() - 1], &m).is_err());
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(Layout::decode(&longer, &m).is_err());
        let mut bigger = m.clone();
        if let packet_core::Entry::File { size, .. } = &mut bigger.members[2].entry {
            *size = 301;
        }
        assert!(Layout::decode(&bytes, &bigger).is_err());
    }
}
