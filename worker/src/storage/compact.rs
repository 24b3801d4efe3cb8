//! Bounding the packs a packet uses (docs/transfer.md, "Packs per
//! packet"), pure. Each push writes the chunks it brings into packs of its
//! own, and later packets keep using them: a packet saved after many small
//! turns would take its chunks (bodies, `packet.json`, its layout) from one
//! more pack per turn, costing one more R2 read for a whole read of it and
//! one more `pack_users` row per packet, without bound. When a packet about
//! to be stored would use at least [`MERGE_AT`] packs from which it takes
//! less than [`SMALL_USE`] stored bytes each, the chunks it takes from those
//! packs are copied into the packet's own new pack, checked by their
//! sha256 as they are copied, and the packet is stored with references
//! to the copies ([`Compaction::relocate`]). The packs it merged stay as
//! long as older packets use them. A chunk is copied again only while the
//! pack holding it is small, so the copies of any stored packet add at most
//! about [`SMALL_USE`] bytes beside it.
//!
//! The copies are held in the Worker's memory until the new pack is written,
//! so one packet copies at most [`MAX_COPY`] bytes: when its small packs
//! hold more (a packet of thousands of highly compressible parts), the
//! smallest are merged up to that budget, and the packets stored after it
//! merge the rest (its new pack is not small).

use std::collections::{HashMap, HashSet};
use std::ops::Range;

use super::chunk::{ChunkRef, Name};

/// A pack from which a packet takes fewer stored bytes than this is small.
pub const SMALL_USE: u64 = 1 << 20;
/// A packet that would use this many small packs has them merged.
pub const MERGE_AT: usize = 8;
/// Most stored bytes one packet copies: the reads and the new pack are
/// both in memory while it is stored.
pub const MAX_COPY: u64 = 8 << 20;
/// Chunks of one pack this close together are read in one range read.
const GAP: u64 = 64 << 10;

/// One chunk to copy into the new pack.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Piece {
    /// Index into [`Compaction::reads`].
    pub read: usize,
    /// Its first stored byte within that read.
    pub at: u64,
    /// The chunk as it is now.
    pub chunk: ChunkRef,
}

/// The merge of a packet's small packs into its new pack.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Compaction {
    /// Range reads of the small packs (slot, stored bytes), in order.
    pub reads: Vec<(u32, Range<u64>)>,
    /// The chunks, in the new pack's order (each once, back to back from
    /// its start).
    pub copies: Vec<Piece>,
    /// Bytes the copies take.
    pub size: u64,
    /// The slots merged.
    pub merged: Vec<u32>,
    /// (slot, offset, stored) → offset in the new pack.
    moved: HashMap<(u32, u64, u64), u64>,
}

/// The compaction `refs` (every chunk reference of the packet about to be
/// stored) call for, if any: their small packs, when there are at least
/// [`MERGE_AT`] of them. Slots in `exclude` (the packet's own new pack) are
/// never merged.
pub fn plan(refs: &[ChunkRef], exclude: &[u32]) -> Option<Compaction> {
    // Each distinct stored chunk once: a chunk used twice is stored once.
    let mut seen = HashSet::new();
    let mut distinct: Vec<ChunkRef> = Vec::new();
    let mut used: HashMap<u32, u64> = HashMap::new();
    for c in refs {
        if seen.insert((c.slot, c.offset, c.stored)) {
            *used.entry(c.slot).or_default() += c.stored;
            distinct.push(*c);
        }
    }
    let mut small: Vec<(u64, u32)> = used
        .iter()
        .filter(|(s, u)| **u < SMALL_USE && !exclude.contains(s))
        .map(|(s, u)| (*u, *s))
        .collect();
    if small.len() < MERGE_AT {
        return None;
    }
    // The smallest first, within the budget: the most packs merged for the
    // bytes copied.
    small.sort_unstable();
    let mut budget = MAX_COPY;
    let mut merged: Vec<u32> = Vec::new();
    for (u, s) in small {
        if u > budget {
            break;
        }
        budget -= u;
        merged.push(s);
    }
    if merged.len() < 2 {
        return None;
    }
    merged.sort_unstable();
    distinct.retain(|c| merged.binary_search(&c.slot).is_ok());
    distinct.sort_by_key(|c| (c.slot, c.offset, c.stored));
    let mut out = Compaction {
        reads: Vec::new(),
        copies: Vec::new(),
        size: 0,
        merged,
        moved: HashMap::new(),
    };
    let mut current: Option<(u32, Range<u64>)> = None;
    for c in distinct {
        let end = c.offset + c.stored;
        let extends = matches!(&current, Some((s, r)) if *s == c.slot && c.offset <= r.end + GAP);
        if extends {
            if let Some((_, r)) = &mut current {
                r.end = r.end.max(end);
            }
        } else {
            if let Some(read) = current.take() {
                out.reads.push(read);
            }
            current = Some((c.slot, c.offset..end));
        }
        let start = current.as_ref().map_or(c.offset, |(_, r)| r.start);
        out.copies.push(Piece {
            read: out.reads.len(),
            at: c.offset - start,
            chunk: c,
        });
        out.moved.insert((c.slot, c.offset, c.stored), out.size);
        out.size += c.stored;
    }
    if let Some(read) = current {
        out.reads.push(read);
    }
    Some(out)
}

impl Compaction {
    /// `c` where it lies once the copies are in pack `slot`.
    pub fn relocate(&self, c: &ChunkRef, slot: u32) -> ChunkRef {
        match self.moved.get(&(c.slot, c.offset, c.stored)) {
            Some(&offset) => ChunkRef { slot, offset, ..*c },
            None => *c,
        }
    }

    /// The copied chunks by name, where they lie in the new pack.
    pub fn copied(&self, slot: u32) -> HashMap<Name, ChunkRef> {
        self.copies
            .iter()
            .map(|p| (p.chunk.name(), self.relocate(&p.chunk, slot)))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use packet_core::Digest;

    fn c(slot: u32, offset: u64, stored: u64, seed: u8) -> ChunkRef {
        ChunkRef::identity(Digest::of(&[seed]), slot, offset, stored)
    }

    #[test]
    fn fewer_small_packs_than_the_threshold_are_left_alone() {
        let mut refs = vec![c(0, 0, 32 << 20, 0)];
        for s in 1..MERGE_AT as u32 {
            refs.push(c(s, 0, 1000, s as u8));
        }
        assert!(plan(&refs, &[]).is_none());
        refs.push(c(MERGE_AT as u32, 0, 10, 99));
        assert!(plan(&refs, &[]).is_some());
        assert!(
            plan(&refs, &[MERGE_AT as u32]).is_none(),
            "the new pack is not merged"
        );
    }

    #[test]
    fn small_packs_are_merged_and_large_ones_kept() {
        let mut refs = vec![c(0, 0, 2 << 20, 0)];
        for s in 1..=MERGE_AT as u32 {
            refs.push(c(s, 100, 10, s as u8));
        }
        // Two chunks of one small pack, close together: one read.
        refs.push(c(1, 200, 5, 50));
        // A chunk used twice is copied once.
        refs.push(c(2, 100, 10, 2));
        // Far from the others in its pack: a read of its own.
        refs.push(c(3, 100 + GAP + 1000, 7, 51));
        let p = plan(&refs, &[]).expect("eight small packs");
        assert_eq!(p.merged, (1..=MERGE_AT as u32).collect::<Vec<_>>());
        assert_eq!(p.size, 10 * MERGE_AT as u64 + 5 + 7);
        assert_eq!(p.reads[0], (1, 100..205));
        assert_eq!(p.reads[1], (2, 100..110));
        assert_eq!(p.reads[2], (3, 100..110));
        assert_eq!(p.reads[3], (3, 100 + GAP + 1000..100 + GAP + 1007));
        assert_eq!(p.reads.len(), MERGE_AT + 1);
        assert_eq!(p.copies[1].at, 100);
        // Every reference keeps its bytes: same name and size, and each
        // merged one lies where the copies put it, back to back.
        let new = 9;
        let mut ends = Vec::new();
        for r in &refs {
            let moved = p.relocate(r, new);
            assert_eq!(
                (moved.sha256, moved.raw, moved.stored),
                (r.sha256, r.raw, r.stored)
            );
            if r.slot == 0 {
                assert_eq!(moved, *r);
            } else {
                assert_eq!(moved.slot, new);
                ends.push(moved.offset + moved.stored);
            }
        }
        assert_eq!(ends.iter().max(), Some(&p.size));
        assert_eq!(p.copied(new).len(), p.copies.len());
    }

    #[test]
    fn a_pack_a_packet_takes_a_megabyte_from_is_not_small() {
        let mut refs = Vec::new();
        for s in 0..MERGE_AT as u32 {
            let size = if s == 0 { SMALL_USE } else { 10 };
            refs.push(c(s, 0, size, s as u8));
        }
        assert!(plan(&refs, &[]).is_none());
    }

    #[test]
    fn a_packet_copies_at_most_the_budget_smallest_packs_first() {
        // Forty small packs of 900 kB: more than MAX_COPY together.
        let mut refs = vec![c(0, 0, 2 << 20, 0)];
        for s in 1..=40u32 {
            refs.push(c(s, 0, 900_000 + u64::from(s), s as u8));
        }
        let p = plan(&refs, &[]).expect("forty small packs");
        assert!(p.size <= MAX_COPY, "{} bytes copied", p.size);
        let n = p.merged.len();
        assert!((MERGE_AT..40).contains(&n), "{n} packs merged");
        // The smallest ones: slots 1..=n.
        assert_eq!(p.merged, (1..=n as u32).collect::<Vec<_>>());
        assert!(
            p.size + 900_000 + n as u64 + 1 > MAX_COPY,
            "the budget is used"
        );
    }
}
