//! Compaction of a new packet's small packs (docs/transfer.md, "Packs per
//! packet"), pure so that it tests natively.
//!
//! Each push writes the chunks it brings into packs of its own, so a packet
//! saved after many small turns would take its bodies from one more pack
//! per turn: more R2 reads for a whole read of it, and one more
//! `pack_users` row per turn, without bound. When a packet about to be
//! stored would use at least [`MERGE_AT`] packs from which it takes less
//! than [`SMALL_USE`] bytes each, `complete` copies the chunks it takes
//! from those packs into one new pack, checked by their sha256 as they are
//! copied, and stores the packet with the layout [`Compaction::relayout`]
//! gives. The packs it merged stay as long as older packets use them. The
//! packs a packet uses are then bounded by its size (its large packs) plus
//! [`MERGE_AT`], whatever the number of saves before it; a byte is copied
//! again only while the pack holding it is small, so the copies of any
//! stored packet add at most [`SMALL_USE`] bytes beside it.

use std::collections::HashMap;
use std::ops::Range;

use packet_core::Digest;

use crate::layout::{ChunkRef, Layout, LayoutBuilder};

/// A pack from which a packet takes fewer bytes than this is small.
pub const SMALL_USE: u64 = 1 << 20;
/// A packet that would use this many small packs has them merged.
pub const MERGE_AT: usize = 8;
/// Chunks of one pack this close together are read in one range read.
const GAP: u64 = 64 << 10;

/// One chunk to copy into the new pack.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Piece {
    /// Index into [`Compaction::reads`].
    pub read: usize,
    /// Its first byte within that read.
    pub at: u64,
    /// Its size.
    pub size: u64,
    /// Its sha256, checked as it is copied.
    pub sha256: Digest,
}

/// The merge of a layout's small packs into one new pack.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Compaction {
    /// Range reads of the small packs (key, bytes), in order.
    pub reads: Vec<(String, Range<u64>)>,
    /// The chunks, in the new pack's order (each once, back to back).
    pub copies: Vec<Piece>,
    /// The new pack's size.
    pub size: u64,
    /// The packs merged, as keys.
    pub merged: Vec<String>,
    /// (pack index in the old layout, offset, size) → offset in the new pack.
    moved: HashMap<(u32, u64, u64), u64>,
}

/// The compaction `layout` calls for, if any: its small packs when there
/// are at least [`MERGE_AT`] of them.
pub fn plan(layout: &Layout) -> Option<Compaction> {
    // Each distinct (pack, offset, size) once: a body used twice is stored once.
    let mut distinct: Vec<(u32, u64, u64, Digest)> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    let mut used = vec![0u64; layout.packs().len()];
    for i in 0..layout.members() {
        for c in layout.chunks(i) {
            if seen.insert((c.pack, c.offset, c.size)) {
                used[c.pack as usize] += c.size;
                distinct.push((c.pack, c.offset, c.size, c.sha256));
            }
        }
    }
    let small: Vec<bool> = used.iter().map(|&u| u < SMALL_USE).collect();
    let count = small.iter().filter(|&&s| s).count();
    if count < MERGE_AT {
        return None;
    }
    distinct.retain(|c| small[c.0 as usize]);
    distinct.sort_by_key(|c| (c.0, c.1, c.2));
    let mut c = Compaction {
        reads: Vec::new(),
        copies: Vec::new(),
        size: 0,
        merged: (0..layout.packs().len())
            .filter(|&p| small[p])
            .map(|p| layout.packs()[p].clone())
            .collect(),
        moved: HashMap::new(),
    };
    let mut current: Option<(u32, Range<u64>)> = None;
    for (pack, offset, size, sha256) in distinct {
        let end = offset + size;
        let extends = matches!(&current, Some((p, r)) if *p == pack && offset <= r.end + GAP);
        if extends {
            if let Some((_, r)) = &mut current {
                r.end = r.end.max(end);
            }
        } else {
            if let Some((p, r)) = current.take() {
                c.reads.push((layout.packs()[p as usize].clone(), r));
            }
            current = Some((pack, offset..end));
        }
        let start = current.as_ref().map_or(offset, |(_, r)| r.start);
        c.copies.push(Piece {
            read: c.reads.len(),
            at: offset - start,
            size,
            sha256,
        });
        c.moved.insert((pack, offset, size), c.size);
        c.size += size;
    }
    if let Some((p, r)) = current {
        c.reads.push((layout.packs()[p as usize].clone(), r));
    }
    Some(c)
}

impl Compaction {
    /// `layout` with the merged packs' chunks in the new pack `key`.
    pub fn relayout(&self, layout: &Layout, key: &str) -> Layout {
        let mut b = LayoutBuilder::new();
        for i in 0..layout.members() {
            for c in layout.chunks(i) {
                let (pack, offset) = match self.moved.get(&(c.pack, c.offset, c.size)) {
                    Some(&at) => (b.pack(key), at),
                    None => (b.pack(&layout.packs()[c.pack as usize]), c.offset),
                };
                b.push(ChunkRef { pack, offset, ..*c });
            }
            b.end_member();
        }
        b.finish()
    }

    /// The new pack's chunks as (sha256, offset, size): the rows that say
    /// where a copy of each lies.
    pub fn chunks(&self) -> Vec<(Digest, u64, u64)> {
        let mut at = 0;
        self.copies
            .iter()
            .map(|c| {
                let row = (c.sha256, at, c.size);
                at += c.size;
                row
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A layout of one member per chunk: `(pack, offset, size, seed)`.
    fn layout(chunks: &[(&str, u64, u64, u8)]) -> Layout {
        let mut b = LayoutBuilder::new();
        for &(pack, offset, size, seed) in chunks {
            let pack = b.pack(pack);
            b.push(ChunkRef {
                pack,
                offset,
                size,
                sha256: Digest::of(&[seed]),
            });
            b.end_member();
        }
        b.finish()
    }

    #[test]
    fn fewer_small_packs_than_the_threshold_are_left_alone() {
        let keys: Vec<String> = (0..MERGE_AT - 1).map(|i| format!("packs/s{i}")).collect();
        let mut chunks = vec![("packs/big", 0, 32 << 20, 0u8)];
        for (i, k) in keys.iter().enumerate() {
            chunks.push((k.as_str(), 0, 1000, i as u8 + 1));
        }
        assert!(plan(&layout(&chunks)).is_none());
    }

    #[test]
    fn small_packs_are_merged_and_large_ones_kept() {
        let keys: Vec<String> = (0..MERGE_AT).map(|i| format!("packs/s{i}")).collect();
        let mut chunks = vec![("packs/big", 0, 2 << 20, 0u8)];
        for (i, k) in keys.iter().enumerate() {
            chunks.push((k.as_str(), 100, 10, i as u8 + 1));
        }
        // Two chunks of one small pack, close together: one read.
        chunks.push(("packs/s0", 200, 5, 50));
        // A chunk used twice is copied once.
        chunks.push(("packs/s1", 100, 10, 2));
        // Far from the others in its pack: a read of its own.
        chunks.push(("packs/s2", 100 + GAP + 1000, 7, 51));
        let old = layout(&chunks);
        let c = plan(&old).expect("eight small packs");
        assert_eq!(c.merged, keys);
        assert_eq!(c.size, 10 * MERGE_AT as u64 + 5 + 7);
        assert_eq!(c.reads[0], ("packs/s0".to_string(), 100..205));
        assert_eq!(c.reads[1], ("packs/s1".to_string(), 100..110));
        assert_eq!(c.reads[2], ("packs/s2".to_string(), 100..110));
        assert_eq!(
            c.reads[3],
            ("packs/s2".to_string(), 100 + GAP + 1000..100 + GAP + 1007)
        );
        assert_eq!(c.reads.len(), MERGE_AT + 1);
        assert_eq!(
            c.copies[1],
            Piece {
                read: 0,
                at: 100,
                size: 5,
                sha256: Digest::of(&[50])
            }
        );
        let new = c.relayout(&old, "packs/merged");
        assert_eq!(new.packs(), ["packs/big", "packs/merged"]);
        assert_eq!(new.members(), old.members());
        // Every member keeps its bytes: same chunks, sizes and names, and
        // each merged chunk is where the copies put it.
        let rows = c.chunks();
        for i in 0..old.members() {
            let (a, b) = (old.chunks(i)[0], new.chunks(i)[0]);
            assert_eq!((a.size, a.sha256), (b.size, b.sha256));
            if new.packs()[b.pack as usize] == "packs/merged" {
                assert!(rows.contains(&(b.sha256, b.offset, b.size)), "member {i}");
            } else {
                assert_eq!(
                    (a.offset, old.packs()[a.pack as usize].as_str()),
                    (b.offset, "packs/big")
                );
            }
        }
        assert_eq!(rows.len(), c.copies.len());
        assert_eq!(rows.last().map(|r| r.1 + r.2), Some(c.size));
        // The result needs no compaction: one small pack.
        assert!(plan(&new).is_none());
    }

    #[test]
    fn a_pack_a_packet_takes_a_megabyte_from_is_not_small() {
        let keys: Vec<String> = (0..MERGE_AT).map(|i| format!("packs/s{i}")).collect();
        let mut chunks = Vec::new();
        for (i, k) in keys.iter().enumerate() {
            // Seven tiny packs and one the packet takes 1 MiB from.
            let size = if i == 0 { SMALL_USE } else { 10 };
            chunks.push((k.as_str(), 0, size, i as u8));
        }
        assert!(plan(&layout(&chunks)).is_none());
    }
}
