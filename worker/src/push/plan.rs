//! Where every body of a pushed packet comes from (docs/transfer.md,
//! "Delta push"), pure: a body a base holds (by sha256 and size) is reused;
//! a body the push uploaded as one frame was hashed as it arrived; a body
//! whose recipe's chunks are all at hand is to be hashed from them (from
//! where a base version of it ended, when its recipe starts by copying that
//! version's chunks); anything else is missing, and [`Plan::status`] says
//! what to send.

use std::collections::{HashMap, HashSet};

use packet_core::{Body, Digest};
use pillbox_wire::chunking::MAX_CHUNK;

use super::at_hand::AtHand;
use super::recipes::RecipeBook;
use crate::storage::chunk::ChunkRef;

/// Where a body comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Source {
    /// A base holds it: its chunks there.
    Base(Vec<ChunkRef>),
    /// The push uploaded it as one frame, hashed as it arrived.
    Arrived(ChunkRef),
    /// Its chunks are at hand; it is to be hashed from them.
    Hash(HashPlan),
    /// Something is missing.
    Missing,
}

/// A body to hash.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HashPlan {
    /// Its chunks, in order: the bytes it will be served from.
    pub chunks: Vec<ChunkRef>,
    /// When its first chunks are a base body's first ones: that body and
    /// how many, and the rest of that body's chunks (its tail, to compare
    /// with the new bytes that follow).
    pub grown_from: Option<GrownFrom>,
}

/// A base body the new body starts with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GrownFrom {
    /// The base body.
    pub base: Body,
    /// How many of its chunks the new body starts with.
    pub copied: usize,
    /// Its chunks after those.
    pub tail: Vec<ChunkRef>,
}

/// The push's plan: every distinct body and its source, in the order of
/// the members that first list them.
#[derive(Clone, Debug, Default)]
pub struct Plan {
    /// Each body and where it comes from.
    pub bodies: Vec<(Body, Source)>,
}

/// What a push still lacks.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Status {
    /// Bodies not at hand, in manifest order.
    pub missing: Vec<Digest>,
    /// Chunks of the recipes received that are not at hand, each once.
    pub missing_chunks: Vec<Digest>,
    /// Bytes still to send: missing bodies without a recipe, and missing
    /// chunks.
    pub missing_bytes: u64,
}

impl Plan {
    /// The plan of `bodies` (the packet's distinct bodies, in manifest
    /// order) over what is at hand and the recipes received.
    pub fn new(bodies: &[Body], at_hand: &AtHand, recipes: &RecipeBook) -> Plan {
        let mut plan = Plan::default();
        for &body in bodies {
            let name = (body.sha256, body.size);
            let source = if let Some(chunks) = at_hand.base_body(&body) {
                Source::Base(chunks.to_vec())
            } else if let Some(frame) = at_hand.frame(&name) {
                Source::Arrived(frame)
            } else if let Some(r) = recipes.get(&body) {
                let chunks: Option<Vec<ChunkRef>> =
                    r.chunks.iter().map(|c| at_hand.chunk(c)).collect();
                match chunks {
                    Some(chunks) => {
                        let grown_from = r.prefix.and_then(|(base, copied)| {
                            let all = at_hand.base_body(&base)?;
                            Some(GrownFrom {
                                base,
                                copied,
                                tail: all.get(copied..)?.to_vec(),
                            })
                        });
                        Source::Hash(HashPlan { chunks, grown_from })
                    }
                    None => Source::Missing,
                }
            } else if let Some(c) = (body.size <= u64::from(MAX_CHUNK))
                .then(|| at_hand.chunk(&name))
                .flatten()
            {
                // A chunk of a base (not a body of it) with the body's
                // name: read and hashed as the body it is.
                Source::Hash(HashPlan {
                    chunks: vec![c],
                    grown_from: None,
                })
            } else {
                Source::Missing
            };
            plan.bodies.push((body, source));
        }
        plan
    }

    /// Whether every body is at hand.
    pub fn is_complete(&self) -> bool {
        !self.bodies.iter().any(|(_, s)| *s == Source::Missing)
    }

    /// What is missing.
    pub fn status(&self, at_hand: &AtHand, recipes: &RecipeBook) -> Status {
        let mut status = Status::default();
        let mut seen = HashSet::new();
        for (body, source) in &self.bodies {
            if *source != Source::Missing {
                continue;
            }
            status.missing.push(body.sha256);
            match recipes.get(body) {
                None => status.missing_bytes += body.size,
                Some(r) => {
                    for c in &r.chunks {
                        if at_hand.chunk(c).is_none() && seen.insert(c.0) {
                            status.missing_chunks.push(c.0);
                            status.missing_bytes += c.1;
                        }
                    }
                }
            }
        }
        status
    }

    /// The chunks the push may upload, sha256 → size: the bodies no base
    /// holds that fit in one frame, and the chunks of their recipes no base
    /// holds. A chunk sent again (a part sent again) is still wanted.
    pub fn wanted(&self, at_hand: &AtHand, recipes: &RecipeBook) -> HashMap<Digest, u64> {
        let mut out = HashMap::new();
        for (body, source) in &self.bodies {
            if matches!(source, Source::Base(_)) {
                continue;
            }
            if body.size <= u64::from(MAX_CHUNK) {
                out.insert(body.sha256, body.size);
            }
            if let Some(r) = recipes.get(body) {
                for c in &r.chunks {
                    let in_base = at_hand.chunk(c).is_some() && at_hand.frame(c).is_none();
                    if !in_base {
                        out.insert(c.0, c.1);
                    }
                }
            }
        }
        out
    }
}
