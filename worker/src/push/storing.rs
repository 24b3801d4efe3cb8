//! How a verified pushed packet is written (docs/transfer.md, "Storage at
//! the edge"), pure: its layout is encoded and cut into chunks (the
//! manifest's CDC parameters), the chunks its base's layout already has are
//! reused, the others are compressed and go into the packet's own pack
//! with, when the packet would use too many small packs, copies of the
//! chunks it takes from them ([`crate::storage::compact`]); its root names
//! its pack table, its manifest's chunks and its layout's chunks. Unused
//! slots of the pack table are emptied, and the packet's own pack takes the
//! first empty one, so slots stay where they were.

use std::collections::HashMap;

use packet_core::Digest;
use pillbox_wire::chunking::MANIFEST;

use crate::storage::chunk::{ChunkRef, Name};
use crate::storage::compact::{self, Compaction};
use crate::storage::cut::cut;
use crate::storage::frames;
use crate::storage::layout::Layout;
use crate::storage::root::Root;

/// A packet about to be written.
#[cfg_attr(test, derive(Clone))]
pub struct Storing {
    layout: Layout,
    manifest: Vec<ChunkRef>,
    /// The slot of the packet's own pack.
    own: u32,
    compaction: Option<Compaction>,
    /// The layout chunks of the bases, by name.
    base_layout: HashMap<Name, ChunkRef>,
}

/// What to write.
#[derive(Debug)]
pub struct Laid {
    /// The root to keep in the packet's row.
    pub root: Root,
    /// The layout, with the final pack table.
    pub layout: Layout,
    /// The packet's own pack's bytes (empty: nothing to write).
    pub pack: Vec<u8>,
    /// Chunks copied by compaction (sha256, offset, stored size in the
    /// own pack): where later pushes find them.
    pub copied: Vec<(Digest, u64, u64)>,
    /// The slots compaction merged, as keys.
    pub merged: Vec<String>,
}

/// Why a packet could not be laid out: a copied chunk that does not hash
/// to its name (the copy is given up; the packet is stored without it).
#[derive(Debug)]
pub struct CopyFailed(pub String);

fn chunk_list(bytes: &[u8]) -> Vec<(Name, std::ops::Range<usize>)> {
    cut(bytes, &MANIFEST)
        .into_iter()
        .map(|r| ((Digest::of(&bytes[r.clone()]), r.len() as u64), r))
        .collect()
}

impl Storing {
    /// The packet whose bodies lie as `layout` says and whose manifest's
    /// chunks are `manifest` (slots of `layout`'s table), written into the
    /// pack `own_key`; `base_layout` finds its bases' layout chunks by name
    /// (slots of the same table).
    pub fn new(
        mut layout: Layout,
        manifest: Vec<ChunkRef>,
        own_key: &str,
        base_layout: HashMap<Name, ChunkRef>,
    ) -> Storing {
        // Slots the packet does not use are emptied before its own pack
        // takes one.
        let mut used = vec![false; layout.packs().len()];
        for c in layout.all_chunks().iter().chain(&manifest) {
            used[c.slot as usize] = true;
        }
        let reused: Vec<ChunkRef> = chunk_list(&layout.encode())
            .iter()
            .filter_map(|(n, _)| base_layout.get(n).copied())
            .collect();
        for c in &reused {
            if let Some(u) = used.get_mut(c.slot as usize) {
                *u = true;
            }
        }
        layout.packs_mut().keep_only(&used);
        let own = layout.packs_mut().slot(own_key);
        let refs: Vec<ChunkRef> = layout
            .all_chunks()
            .iter()
            .chain(&manifest)
            .chain(&reused)
            .copied()
            .collect();
        let compaction = compact::plan(&refs, &[own]);
        Storing {
            layout,
            manifest,
            own,
            compaction,
            base_layout,
        }
    }

    /// The range reads compaction needs (key, stored bytes), in order; the
    /// bytes read are given to [`Storing::finish`] in the same order.
    pub fn reads(&self) -> Vec<(String, std::ops::Range<u64>)> {
        self.compaction
            .as_ref()
            .map(|c| {
                c.reads
                    .iter()
                    .map(|(slot, r)| {
                        (
                            self.layout.packs().key(*slot).unwrap_or("").to_string(),
                            r.clone(),
                        )
                    })
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Gives up compaction: the packet keeps its packs.
    #[cfg(test)]
    pub fn without_compaction(mut self) -> Storing {
        self.compaction = None;
        self
    }

    /// Lays the packet out, with the bytes of [`Storing::reads`] (each
    /// copied chunk checked against its name).
    pub fn finish(self, read: &[Vec<u8>]) -> Result<Laid, CopyFailed> {
        let copies = match &self.compaction {
            None => None,
            Some(c) => Some(self.copy(c, read)?),
        };
        Ok(self.write(copies))
    }

    /// Lays the packet out with the bytes compaction read, or, when they
    /// could not be read (`Err`: why) or a copy does not hash to its name,
    /// without compaction: the packet then keeps the packs it had. Returns
    /// why compaction was skipped, if it was.
    pub fn lay_out(self, read: Result<Vec<Vec<u8>>, String>) -> (Laid, Option<String>) {
        let copies = read.and_then(|bytes| match &self.compaction {
            None => Ok(None),
            Some(c) => self
                .copy(c, &bytes)
                .map(Some)
                .map_err(|CopyFailed(why)| why),
        });
        match copies {
            Ok(copies) => (self.write(copies), None),
            // Without compaction nothing is copied, so nothing can fail.
            Err(why) => (self.write(None), Some(why)),
        }
    }

    /// The copies `c` makes from the bytes `read`, each checked against
    /// its name, and the layout and manifest pointing at them.
    fn copy(&self, c: &Compaction, read: &[Vec<u8>]) -> Result<Copies, CopyFailed> {
        let (layout, own) = (&self.layout, self.own);
        let mut pack = Vec::new();
        let mut rows = Vec::new();
        let mut raw = Vec::new();
        for p in &c.copies {
            let bytes = read
                .get(p.read)
                .and_then(|r| r.get(p.at as usize..(p.at + p.chunk.stored) as usize))
                .ok_or_else(|| CopyFailed("a pack is shorter than its chunks".into()))?;
            raw.clear();
            frames::decode_into(p.chunk.encoding, p.chunk.raw, bytes, &mut raw)
                .map_err(|e| CopyFailed(e.message))?;
            if Digest::of(&raw) != p.chunk.sha256 {
                return Err(CopyFailed(format!(
                    "a chunk of {} does not hash to its name",
                    layout.packs().key(p.chunk.slot).unwrap_or("")
                )));
            }
            rows.push((p.chunk.sha256, pack.len() as u64, p.chunk.stored));
            pack.extend_from_slice(bytes);
        }
        let merged = c
            .merged
            .iter()
            .filter_map(|s| layout.packs().key(*s).map(str::to_string))
            .collect();
        let mut b = crate::storage::layout::LayoutBuilder::new(layout.packs().clone());
        for i in 0..layout.members() {
            for r in layout.chunks(i) {
                b.push(c.relocate(r, own));
            }
            b.end_member();
        }
        let manifest: Vec<ChunkRef> = self.manifest.iter().map(|r| c.relocate(r, own)).collect();
        Ok(Copies {
            layout: b.finish(),
            manifest,
            by_name: c.copied(own),
            pack,
            rows,
            merged,
            merged_slots: c.merged.clone(),
        })
    }

    /// The packet written: with `copies` when compaction made them, its
    /// layout's chunks (its bases' where they have them), its own pack and
    /// its root.
    fn write(self, copies: Option<Copies>) -> Laid {
        let Storing {
            layout,
            manifest,
            own,
            base_layout,
            ..
        } = self;
        let Copies {
            layout,
            manifest,
            by_name: copied,
            mut pack,
            rows: copied_rows,
            merged,
            merged_slots,
        } = copies.unwrap_or(Copies {
            layout,
            manifest,
            by_name: HashMap::new(),
            pack: Vec::new(),
            rows: Vec::new(),
            merged: Vec::new(),
            merged_slots: Vec::new(),
        });
        let stream = layout.encode();
        let mut layout_chunks = Vec::new();
        for (name, range) in chunk_list(&stream) {
            let base = base_layout
                .get(&name)
                .filter(|c| !merged_slots.contains(&c.slot))
                .copied();
            let c = match base.or_else(|| copied.get(&name).copied()) {
                Some(c) => c,
                None => {
                    let (encoding, stored) = frames::compress(&stream[range]);
                    let c = ChunkRef {
                        sha256: name.0,
                        raw: name.1,
                        slot: own,
                        offset: pack.len() as u64,
                        stored: stored.len() as u64,
                        encoding,
                    };
                    pack.extend_from_slice(&stored);
                    c
                }
            };
            layout_chunks.push(c);
        }
        // The final table: only the slots the packet uses.
        let mut packs = layout.packs().clone();
        let mut used = vec![false; packs.len()];
        for c in layout
            .all_chunks()
            .iter()
            .chain(&manifest)
            .chain(&layout_chunks)
        {
            used[c.slot as usize] = true;
        }
        packs.keep_only(&used);
        let mut layout = layout;
        *layout.packs_mut() = packs.clone();
        Laid {
            root: Root {
                packs,
                manifest,
                layout: layout_chunks,
            },
            layout,
            pack,
            copied: copied_rows,
            merged,
        }
    }
}

/// What compaction copied into the packet's own pack.
struct Copies {
    /// The layout, its chunks copied pointing at the copies.
    layout: Layout,
    /// The manifest's chunks, likewise.
    manifest: Vec<ChunkRef>,
    /// The copied chunks by name, where they lie in the own pack.
    by_name: HashMap<Name, ChunkRef>,
    /// The own pack's bytes so far: the copies.
    pack: Vec<u8>,
    /// Each copy: sha256, offset and stored size in the own pack.
    rows: Vec<(Digest, u64, u64)>,
    /// The packs merged, as keys.
    merged: Vec<String>,
    /// The same, as slots.
    merged_slots: Vec<u32>,
}

#[cfg(all(test, not(target_arch = "wasm32")))]
mod tests {
    use super::*;

    use crate::storage::compact::MERGE_AT;
    use crate::storage::layout::LayoutBuilder;
    use crate::storage::packs::PackTable;

    /// A packet of one body whose chunks lie in [`MERGE_AT`] small packs,
    /// and those packs' bytes.
    fn scattered() -> (Storing, HashMap<String, Vec<u8>>) {
        let mut packs = PackTable::new();
        let mut bytes = HashMap::new();
        let mut chunks = Vec::new();
        for i in 0..MERGE_AT {
            let key = format!("packs/small-{i}");
            let chunk = format!("chunk {i} of a body in small packs\n").into_bytes();
            let slot = packs.slot(&key);
            chunks.push(ChunkRef::identity(
                Digest::of(&chunk),
                slot,
                0,
                chunk.len() as u64,
            ));
            bytes.insert(key, chunk);
        }
        let mut b = LayoutBuilder::new(packs);
        for c in chunks {
            b.push(c);
        }
        b.end_member();
        let storing = Storing::new(b.finish(), vec![], "packs/own", HashMap::new());
        (storing, bytes)
    }

    fn read(storing: &Storing, packs: &HashMap<String, Vec<u8>>) -> Vec<Vec<u8>> {
        storing
            .reads()
            .iter()
            .map(|(k, r)| packs[k][r.start as usize..r.end as usize].to_vec())
            .collect()
    }

    #[test]
    fn a_packet_of_small_packs_is_laid_out_with_copies_of_their_chunks() {
        let (storing, packs) = scattered();
        assert_eq!(storing.reads().len(), MERGE_AT);
        let (laid, skipped) = storing.clone().lay_out(Ok(read(&storing, &packs)));
        assert_eq!(skipped, None);
        assert_eq!(laid.merged.len(), MERGE_AT);
        assert_eq!(laid.copied.len(), MERGE_AT);
        assert_eq!(laid.root.packs.keys(), ["packs/own"]);
        let same = storing.finish(&read(&scattered().0, &packs)).unwrap();
        assert_eq!(laid.root.encode(), same.root.encode());
        assert_eq!(laid.pack, same.pack);
    }

    #[test]
    fn a_merge_that_cannot_be_made_leaves_the_packet_its_packs() {
        let (storing, packs) = scattered();
        let plain = storing.clone().without_compaction().finish(&[]).unwrap();
        assert!(plain.merged.is_empty() && plain.copied.is_empty());
        assert_eq!(plain.root.packs.keys().len(), MERGE_AT + 1);
        let same = |laid: &Laid| {
            assert_eq!(laid.root.encode(), plain.root.encode());
            assert_eq!(laid.pack, plain.pack);
            assert!(laid.merged.is_empty() && laid.copied.is_empty());
        };
        // A read failed.
        let (laid, skipped) = storing.clone().lay_out(Err("packs/small-3 is gone".into()));
        assert_eq!(skipped.as_deref(), Some("packs/small-3 is gone"));
        same(&laid);
        // A copy does not hash to its name.
        let mut bad = read(&storing, &packs);
        bad[2][0] ^= 1;
        let (laid, skipped) = storing.clone().lay_out(Ok(bad));
        assert!(skipped.unwrap().contains("does not hash to its name"));
        same(&laid);
        // A read shorter than its chunks.
        let mut short = read(&storing, &packs);
        short[5].pop();
        let (laid, skipped) = storing.lay_out(Ok(short));
        assert_eq!(
            skipped.as_deref(),
            Some("a pack is shorter than its chunks")
        );
        same(&laid);
    }
}
