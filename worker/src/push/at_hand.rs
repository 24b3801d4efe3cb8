//! What a push may use (docs/transfer.md, "What a push can learn"): the
//! bodies and chunks of the bases it names (when its caller may read them)
//! and the frames it uploaded itself, nothing else. Everything is matched
//! by name and size. Slots are those of one pack table, which starts as the
//! first base's (so the new packet's layout keeps its base's slots) and
//! takes every other base's packs and the push's own.

use std::collections::HashMap;
use std::ops::Range;
use std::rc::Rc;

use packet_core::{Body, BodyFindings, Digest};
use pillbox_wire::chunking::MAX_CHUNK;

use crate::storage::chunk::{ChunkRef, Name};
use crate::storage::findings::BodyClass;
use crate::storage::packs::PackTable;
use crate::storage::stored::{Form, Stored};

/// Bases and uploads, by name.
#[derive(Default)]
pub struct AtHand {
    /// The pack table every reference here indexes.
    pub packs: PackTable,
    bases: Vec<Rc<Stored>>,
    bodies: HashMap<Body, Vec<ChunkRef>>,
    chunks: HashMap<Name, ChunkRef>,
    /// A base's manifest chunk: the base and the chunk's bytes in its JSON.
    manifest_chunks: HashMap<Name, (usize, Range<usize>)>,
    layout_chunks: HashMap<Name, ChunkRef>,
    /// Findings of bodies of bases that kept them.
    findings: HashMap<BodyClass, BodyFindings>,
    /// The size each sha256 of the bases names.
    sizes: HashMap<Digest, u64>,
    frames: HashMap<Name, ChunkRef>,
}

impl AtHand {
    /// Nothing at hand.
    pub fn new() -> AtHand {
        AtHand::default()
    }

    /// Adds a base.
    pub fn add_base(&mut self, base: Rc<Stored>) {
        let table = base.layout.packs();
        if self.bases.is_empty() {
            // The new packet's slots start as its first base's.
            self.packs = table.clone();
        }
        let map: Vec<u32> = table
            .slots()
            .iter()
            .map(|k| k.as_deref().map_or(u32::MAX, |k| self.packs.slot(k)))
            .collect();
        let local = |c: &ChunkRef| c.in_slot(map[c.slot as usize]);
        let index = self.bases.len();
        for (i, m) in base.manifest.members.iter().enumerate() {
            let Some(body) = m.body() else { continue };
            self.sizes.insert(body.sha256, body.size);
            let chunks: Vec<ChunkRef> = base.layout.chunks(i).iter().map(local).collect();
            for c in &chunks {
                if c.raw <= u64::from(MAX_CHUNK) {
                    self.chunks.entry(c.name()).or_insert(*c);
                }
                self.sizes.insert(c.sha256, c.raw);
            }
            self.bodies.entry(body).or_insert(chunks);
        }
        // A packet pushed before format /2 keeps its manifest in an object
        // of its own, which goes with it when it is deleted: its chunks are
        // not a new packet's.
        let manifest_chunks: &[ChunkRef] = match base.form {
            Form::PushedV1 => &[],
            Form::Whole | Form::Packed => &base.manifest_chunks,
        };
        let mut at = 0usize;
        for c in manifest_chunks {
            let range = at..at + c.raw as usize;
            at = range.end;
            self.manifest_chunks
                .entry(c.name())
                .or_insert((index, range));
            self.chunks.entry(c.name()).or_insert(local(c));
            self.sizes.insert(c.sha256, c.raw);
        }
        for c in &base.layout_chunks {
            self.layout_chunks.entry(c.name()).or_insert(local(c));
        }
        if let Some(kept) = &base.findings {
            for (k, v) in kept.by_body(&base.manifest) {
                self.findings.entry(k).or_insert(v);
            }
        }
        self.bases.push(base);
    }

    /// Adds a frame the push uploaded, kept in the pack `key`.
    pub fn add_frame(&mut self, key: &str, chunk: ChunkRef) {
        let slot = self.packs.slot(key);
        self.frames
            .entry(chunk.name())
            .or_insert(chunk.in_slot(slot));
    }

    /// Forgets everything that lies in the packs `gone` (collected by the
    /// clean-up, or merged away, since they were found): bodies with a
    /// chunk there, chunks and frames there. What is forgotten is missing,
    /// and the push says so (docs/transfer.md, "A push knows what it
    /// lacks").
    pub fn forget_packs(&mut self, gone: &[String]) {
        let slots: Vec<u32> = gone.iter().filter_map(|k| self.packs.find(k)).collect();
        if slots.is_empty() {
            return;
        }
        let here = |c: &ChunkRef| !slots.contains(&c.slot);
        self.bodies.retain(|_, chunks| chunks.iter().all(here));
        self.chunks.retain(|_, c| here(c));
        self.frames.retain(|_, c| here(c));
        self.layout_chunks.retain(|_, c| here(c));
    }

    /// The bases, in the order given.
    pub fn bases(&self) -> &[Rc<Stored>] {
        &self.bases
    }

    /// A body a base holds: its chunks.
    pub fn base_body(&self, body: &Body) -> Option<&[ChunkRef]> {
        self.bodies.get(body).map(Vec::as_slice)
    }

    /// A chunk at hand: uploaded by the push, else in a base.
    pub fn chunk(&self, name: &Name) -> Option<ChunkRef> {
        self.frames
            .get(name)
            .or_else(|| self.chunks.get(name))
            .copied()
    }

    /// A chunk this push uploaded.
    pub fn frame(&self, name: &Name) -> Option<ChunkRef> {
        self.frames.get(name).copied()
    }

    /// The bytes of a base's manifest chunk.
    pub fn manifest_bytes(&self, name: &Name) -> Option<&[u8]> {
        let (base, range) = self.manifest_chunks.get(name)?;
        self.bases[*base].json.get(range.clone())
    }

    /// A chunk of a base's layout stream.
    pub fn layout_chunk(&self, name: &Name) -> Option<ChunkRef> {
        self.layout_chunks.get(name).copied()
    }

    /// Every chunk of the bases' layout streams, by name.
    pub fn layout_chunks(&self) -> HashMap<Name, ChunkRef> {
        self.layout_chunks.clone()
    }

    /// What a base body holds for members of `class`, when a base kept it.
    pub fn findings(&self, body: Body, class: u8) -> Option<&BodyFindings> {
        self.findings.get(&(body, class))
    }

    /// The size a base names for `sha256`, if any.
    pub fn base_size(&self, sha256: &Digest) -> Option<u64> {
        self.sizes.get(sha256).copied()
    }
}
