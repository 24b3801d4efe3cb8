//! The recipes a push received (docs/transfer.md, "Delta push"), checked
//! and resolved into the chunks each large body is made of. A recipe is
//! taken whole or not at all: its body is a large body of the packet no
//! base holds, its runs add up to the body, a copy names chunks a base body
//! has (each at most 1 MiB), one sha256 names one size across the packet,
//! the recipes and the bases, and a recipe sent again is the same.

use pillbox_wire::ApiCode;
use std::collections::{HashMap, HashSet};

use packet_core::{Body, Digest};
use pillbox_wire::chunking::{BODIES, MAX_CHUNK};
use pillbox_wire::recipes::{BodyRecipe, Recipes, Run};

use super::at_hand::AtHand;
use crate::problem::Problem;
use crate::storage::chunk::Name;

/// Recipes sent to a push that is open name no chunk of packet.json: the
/// push has its manifest (422 `recipe_not_needed`).
pub fn bodies_only(recipes: &Recipes) -> Result<(), Problem> {
    if recipes.manifest.is_empty() {
        return Ok(());
    }
    Err(not_needed(
        "these recipes name chunks of packet.json: the push has its manifest".into(),
        "send only body recipes (an empty manifest recipe)",
    ))
}

/// A recipe, resolved against the bases.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Resolved {
    /// The recipe as received.
    pub recipe: BodyRecipe,
    /// Its chunks, in order.
    pub chunks: Vec<Name>,
    /// When its first run copies a base body's chunks from the first one:
    /// that body and how many chunks.
    pub prefix: Option<(Body, usize)>,
}

fn invalid(message: String) -> Problem {
    Problem::new(
        ApiCode::RecipeInvalid,
        message,
        "send the body's chunks in order: each 1 byte to 1 MiB, their sizes adding up to the body's, copies of chunks a base body has",
    )
}

fn not_needed(message: String, advice: &str) -> Problem {
    Problem::new(ApiCode::RecipeNotNeeded, message, advice)
}

/// Resolves one recipe against the bases.
pub fn resolve(recipe: &BodyRecipe, at_hand: &AtHand) -> Result<Resolved, Problem> {
    let body = recipe.body;
    let hex = body.sha256.hex();
    let most = BODIES.most_chunks(body.size);
    let mut count = 0u64;
    for run in &recipe.runs {
        count = count.saturating_add(match run {
            Run::Chunk(_) => 1,
            Run::Copy { count, .. } => u64::from(*count),
        });
    }
    if count > most {
        return Err(invalid(format!(
            "{count} chunks for body {hex} of {} bytes: at most {most} (every chunk but the last has at least {} bytes)",
            body.size, BODIES.min
        )));
    }
    let mut chunks = Vec::with_capacity(count as usize);
    let mut prefix = None;
    for (i, run) in recipe.runs.iter().enumerate() {
        match *run {
            Run::Chunk(c) => chunks.push((c.sha256, u64::from(c.size))),
            Run::Copy {
                body: from,
                first,
                count,
            } => {
                let Some(source) = at_hand.base_body(&from) else {
                    return Err(invalid(format!(
                        "body {hex} copies chunks of {}, which no base of this push holds",
                        from.sha256.hex()
                    )));
                };
                let (first, count) = (first as usize, count as usize);
                let Some(copied) = source.get(first..first.saturating_add(count)) else {
                    return Err(invalid(format!(
                        "body {hex} copies chunks {first}..{} of {}, which has {}",
                        first.saturating_add(count),
                        from.sha256.hex(),
                        source.len()
                    )));
                };
                if let Some(big) = copied.iter().find(|c| c.raw > u64::from(MAX_CHUNK)) {
                    return Err(invalid(format!(
                        "body {hex} copies a piece of {} bytes of {}, stored in one piece: send its chunks",
                        big.raw,
                        from.sha256.hex()
                    )));
                }
                if i == 0 && first == 0 {
                    prefix = Some((from, count));
                }
                chunks.extend(copied.iter().map(|c| c.name()));
            }
        }
    }
    let total: u64 = chunks.iter().map(|c| c.1).sum();
    if total != body.size {
        return Err(invalid(format!(
            "the chunks of body {hex} add up to {total} bytes, the body has {}",
            body.size
        )));
    }
    Ok(Resolved {
        recipe: recipe.clone(),
        chunks,
        prefix,
    })
}

/// The recipes of one push, by body.
#[derive(Clone, Debug, Default)]
pub struct RecipeBook {
    order: Vec<Body>,
    recipes: HashMap<Body, Resolved>,
}

impl RecipeBook {
    /// No recipe.
    pub fn new() -> RecipeBook {
        RecipeBook::default()
    }

    /// The recipe of `body`.
    pub fn get(&self, body: &Body) -> Option<&Resolved> {
        self.recipes.get(body)
    }

    /// Every recipe as received, in arrival order.
    pub fn received(&self) -> Vec<BodyRecipe> {
        self.order
            .iter()
            .map(|b| self.recipes[b].recipe.clone())
            .collect()
    }

    /// How many recipes.
    pub fn len(&self) -> usize {
        self.order.len()
    }

    /// Whether there is none.
    pub fn is_empty(&self) -> bool {
        self.order.is_empty()
    }

    /// Adds the recipes a push kept, each that still holds: one whose copies
    /// name a base body no longer at hand (its base deleted, its packs
    /// collected) is dropped, and its body is missing with no recipe, so
    /// the push asks for it again.
    pub fn add_kept(&mut self, recipes: &[BodyRecipe], bodies: &[Body], at_hand: &AtHand) {
        let mut known = Known::new(self, bodies);
        for r in recipes {
            if let Ok(Some(resolved)) = self.check(r, &known, &[], at_hand) {
                known.learn(&resolved);
                self.insert(resolved);
            }
        }
    }

    /// Adds recipes, all or none. `bodies` are the packet's distinct bodies
    /// (one size per sha256: packet-core checked it); a recipe must be for
    /// one no base holds and larger than one chunk. Returns the bodies
    /// added (or already there), in order.
    pub fn add(
        &mut self,
        recipes: &[BodyRecipe],
        bodies: &[Body],
        at_hand: &AtHand,
    ) -> Result<Vec<Body>, Problem> {
        let mut known = Known::new(self, bodies);
        let mut added: Vec<Resolved> = Vec::new();
        let mut named = Vec::new();
        for recipe in recipes {
            if let Some(resolved) = self.check(recipe, &known, &added, at_hand)? {
                known.learn(&resolved);
                added.push(resolved);
            }
            named.push(recipe.body);
        }
        for r in added {
            self.insert(r);
        }
        Ok(named)
    }

    /// The chunks of the recipes of `bodies` that are not at hand, each
    /// once, in order: what a client that sent those recipes is to send.
    pub fn lacking(&self, bodies: &[Body], at_hand: &AtHand) -> Vec<Name> {
        let mut seen = HashSet::new();
        let mut missing = Vec::new();
        for b in bodies {
            if let Some(r) = self.get(b) {
                for c in &r.chunks {
                    if at_hand.chunk(c).is_none() && seen.insert(c.0) {
                        missing.push(*c);
                    }
                }
            }
        }
        missing
    }

    fn insert(&mut self, r: Resolved) {
        self.order.push(r.recipe.body);
        self.recipes.insert(r.recipe.body, r);
    }

    /// `recipe` checked against the packet's bodies and the chunk sizes
    /// `known` has, this book and the recipes `added` before it: resolved,
    /// or none when the same recipe was received already.
    fn check(
        &self,
        recipe: &BodyRecipe,
        known: &Known,
        added: &[Resolved],
        at_hand: &AtHand,
    ) -> Result<Option<Resolved>, Problem> {
        let body = recipe.body;
        let hex = body.sha256.hex();
        if !known.bodies.contains(&body) {
            return Err(not_needed(
                format!(
                    "body {hex} of {} bytes is not a body of this packet",
                    body.size
                ),
                "send recipes only for the push's missing bodies larger than the bodies' threshold",
            ));
        }
        if BODIES.is_one_chunk(body.size) {
            return Err(not_needed(
                format!(
                    "body {hex} has {} bytes: it is one chunk, with no recipe",
                    body.size
                ),
                "send it as one frame named by its sha256",
            ));
        }
        if at_hand.base_body(&body).is_some() {
            return Err(not_needed(
                format!("body {hex} is in a base of this push: nothing to send"),
                "send recipes only for the push's missing bodies",
            ));
        }
        let resolved = resolve(recipe, at_hand)?;
        let earlier = self
            .recipes
            .get(&body)
            .or_else(|| added.iter().find(|r| r.recipe.body == body));
        match earlier {
            Some(r) if r.chunks == resolved.chunks => return Ok(None),
            Some(_) => {
                return Err(Problem::new(
                    ApiCode::RecipeConflict,
                    format!("another recipe for body {hex} was received"),
                    "send the recipe sent before (the same bytes always make the same chunks)",
                ))
            }
            None => {}
        }
        // Its own chunks too: one sha256 named twice in it with two sizes.
        let mut own: HashMap<Digest, u64> = HashMap::new();
        for &(sha, size) in &resolved.chunks {
            let other = own
                .get(&sha)
                .or_else(|| known.sizes.get(&sha))
                .copied()
                .or_else(|| at_hand.base_size(&sha));
            if let Some(s) = other.filter(|s| *s != size) {
                return Err(invalid(format!(
                    "chunk {} is said to have {size} bytes in the recipe of body {hex}, and {s} elsewhere",
                    sha.hex()
                )));
            }
            own.insert(sha, size);
        }
        Ok(Some(resolved))
    }
}

/// What recipes are checked against: the packet's bodies, and the size of
/// every sha256 a body or a recipe's chunk has.
struct Known {
    bodies: HashSet<Body>,
    sizes: HashMap<Digest, u64>,
}

impl Known {
    fn new(book: &RecipeBook, bodies: &[Body]) -> Known {
        let mut sizes: HashMap<Digest, u64> = bodies.iter().map(|b| (b.sha256, b.size)).collect();
        for r in book.recipes.values() {
            for c in &r.chunks {
                sizes.entry(c.0).or_insert(c.1);
            }
        }
        Known {
            bodies: bodies.iter().copied().collect(),
            sizes,
        }
    }

    fn learn(&mut self, r: &Resolved) {
        for &(sha, size) in &r.chunks {
            self.sizes.insert(sha, size);
        }
    }
}

#[cfg(all(test, not(target_arch = "wasm32")))]
mod tests {
    use super::*;

    use pillbox_wire::recipes::ChunkName;

    use super::super::fixtures::body;
    use crate::storage::chunk::ChunkRef;

    fn chunk(tag: &str, size: u32) -> ChunkName {
        ChunkName {
            sha256: Digest::of(tag.as_bytes()),
            size,
        }
    }

    fn name(c: ChunkName) -> Name {
        (c.sha256, u64::from(c.size))
    }

    #[test]
    fn recipes_sent_to_an_open_push_name_no_chunk_of_packet_json() {
        assert!(bodies_only(&Recipes::default()).is_ok());
        let with_manifest = Recipes {
            manifest: vec![chunk("json", 10)],
            bodies: vec![],
        };
        let p = bodies_only(&with_manifest).unwrap_err();
        assert_eq!((p.status, p.error.code()), (422, "recipe_not_needed"));
    }

    #[test]
    fn the_chunks_recipes_lack_are_those_not_at_hand_each_once() {
        let (one, two, three) = (
            chunk("1", 200_000),
            chunk("2", 100_000),
            chunk("3", 200_000),
        );
        let large = body("large", 300_000);
        let other = body("other", 300_000);
        let mut at_hand = AtHand::new();
        at_hand.add_frame("packs/push", ChunkRef::identity(one.sha256, 0, 0, 200_000));
        let mut book = RecipeBook::new();
        let recipes = [
            BodyRecipe {
                body: large,
                runs: vec![Run::Chunk(one), Run::Chunk(two)],
            },
            BodyRecipe {
                body: other,
                runs: vec![Run::Chunk(two), Run::Chunk(three)],
            },
        ];
        let named = book.add(&recipes, &[large, other], &at_hand).unwrap();
        assert_eq!(named, [large, other]);
        assert_eq!(book.lacking(&named, &at_hand), [name(two), name(three)]);
        assert_eq!(book.lacking(&[other], &at_hand), [name(two), name(three)]);
        assert_eq!(book.lacking(&[large], &at_hand), [name(two)]);
        // A body with no recipe lacks nothing the recipes could name.
        let small = body("small", 10);
        assert!(book.lacking(&[small], &at_hand).is_empty());
    }
}
