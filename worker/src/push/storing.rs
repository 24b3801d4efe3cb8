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
#[derive(Clone)]
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

    /// Gives up compaction (a read failed): the packet keeps its packs.
    pub fn without_compaction(mut self) -> Storing {
        self.compaction = None;
        self
    }

    /// Lays the packet out, with the bytes of [`Storing::reads`] (each
    /// copied chunk checked against its name).
    pub fn finish(self, read: &[Vec<u8>]) -> Result<Laid, CopyFailed> {
        let Storing {
            layout,
            manifest,
            own,
            compaction,
            base_layout,
        } = self;
        let mut pack = Vec::new();
        let mut copied_rows = Vec::new();
        let mut merged = Vec::new();
        let (layout, manifest, copied) = match &compaction {
            None => (layout, manifest, HashMap::new()),
            Some(c) => {
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
                    copied_rows.push((p.chunk.sha256, pack.len() as u64, p.chunk.stored));
                    pack.extend_from_slice(bytes);
                }
                merged = c
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
                let manifest: Vec<ChunkRef> = manifest.iter().map(|r| c.relocate(r, own)).collect();
                (b.finish(), manifest, c.copied(own))
            }
        };
        let merged_slots: Vec<u32> = compaction
            .as_ref()
            .map(|c| c.merged.clone())
            .unwrap_or_default();
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
        Ok(Laid {
            root: Root {
                packs,
                manifest,
                layout: layout_chunks,
            },
            layout,
            pack,
            copied: copied_rows,
            merged,
        })
    }
}
