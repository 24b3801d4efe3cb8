//! A delta push's logic (docs/transfer.md, "Delta push"), pure so that it
//! tests natively:
//!
//! - [`Bases`]: what the push may take from its bases, the only content the
//!   edge treats as present (the content-oracle rule: a push never learns
//!   whether the store holds anything outside packets it may read);
//! - [`Plan`]: the bodies the push must send, the recipes received for the
//!   large ones and the chunks it may upload (the R2 object
//!   `pushes/<id>/recipes`);
//! - [`Plan::status`]: what is still missing, given what the parts brought;
//! - [`assemble`]: the new packet's [`Layout`] from the bases and the
//!   parts, and which bodies `complete` must still hash.

use std::collections::{HashMap, HashSet};

use packet_core::{Digest, Manifest};
use pillbox_wire::{Recipe, RecipeChunk, Recipes};

use crate::binary::{Corrupt, In, Out};
use crate::layout::{has_body, ChunkRef, Layout, LayoutBuilder};
use crate::problem::Problem;

/// A body of at most this many bytes is one chunk named by its sha256;
/// a larger one is cut by the client and sent with a recipe.
pub const CHUNK_THRESHOLD: u64 = 256 << 10;
/// FastCDC's smallest chunk (all but a body's last).
pub const MIN_CHUNK: u64 = 64 << 10;
/// FastCDC's average chunk.
pub const AVG_CHUNK: u64 = 256 << 10;
/// The largest chunk (and frame).
pub const MAX_CHUNK: u64 = 1 << 20;

/// What a push's bases hold: every body by its sha256, and every chunk of
/// at most [`MAX_CHUNK`] bytes (a multi-chunk body's chunks, and bodies that
/// are one chunk).
#[derive(Default)]
pub struct Bases {
    packs: Vec<String>,
    pack_index: HashMap<String, u32>,
    refs: Vec<ChunkRef>,
    bodies: HashMap<Digest, (u32, u32)>,
    chunks: HashMap<Digest, ChunkRef>,
}

impl Bases {
    /// No bases.
    pub fn new() -> Bases {
        Bases::default()
    }

    /// Adds a base: a stored packet's manifest and layout.
    pub fn add(&mut self, manifest: &Manifest, layout: &Layout) {
        let map: Vec<u32> = layout.packs().iter().map(|p| self.intern(p)).collect();
        for (i, m) in manifest.members.iter().enumerate() {
            let Some(sha) = m.sha256().filter(|_| has_body(m)) else {
                continue;
            };
            if self.bodies.contains_key(&sha) {
                continue;
            }
            let start = self.refs.len() as u32;
            let chunks = layout.chunks(i);
            for c in chunks {
                let c = ChunkRef {
                    pack: map[c.pack as usize],
                    ..*c
                };
                self.refs.push(c);
                if c.size <= MAX_CHUNK {
                    self.chunks.entry(c.sha256).or_insert(c);
                }
            }
            self.bodies.insert(sha, (start, chunks.len() as u32));
        }
    }

    fn intern(&mut self, key: &str) -> u32 {
        if let Some(&i) = self.pack_index.get(key) {
            return i;
        }
        let i = self.packs.len() as u32;
        self.packs.push(key.to_string());
        self.pack_index.insert(key.to_string(), i);
        i
    }

    /// A body of the bases: its chunks (packs as [`Bases::pack_key`]).
    pub fn body(&self, sha: &Digest) -> Option<&[ChunkRef]> {
        self.bodies
            .get(sha)
            .map(|&(s, n)| &self.refs[s as usize..(s + n) as usize])
    }

    /// A chunk of the bases.
    pub fn chunk(&self, sha: &Digest) -> Option<&ChunkRef> {
        self.chunks.get(sha)
    }

    /// The key of pack `index`.
    pub fn pack_key(&self, index: u32) -> &str {
        &self.packs[index as usize]
    }

    /// Whether a body of `size` bytes named `sha` is in the bases (as a
    /// body, or as a chunk when it is small enough to be one).
    fn holds_body(&self, sha: &Digest, size: u64) -> bool {
        self.bodies.contains_key(sha) || (size <= MAX_CHUNK && self.chunks.contains_key(sha))
    }
}

/// A body the push must send.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MissingBody {
    /// Its sha256.
    pub sha256: Digest,
    /// Its size.
    pub size: u64,
}

/// One chunk of a recipe.
pub type Chunk = (Digest, u32);

/// A push's plan: its missing bodies, the recipes received and the chunks
/// it may upload.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Plan {
    missing: Vec<MissingBody>,
    recipes: Vec<(Digest, Vec<Chunk>)>,
    recipe_index: HashMap<Digest, usize>,
    /// Chunk → size: the missing small bodies and the recipe chunks no base
    /// holds.
    wanted: HashMap<Digest, u32>,
}

const PLAN_MAGIC: &[u8; 8] = b"PBPLAN01";
const PLAN_VERSION: u8 = 1;

/// What a push still lacks ([`Plan::status`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Status {
    /// Bodies not complete yet, in manifest order.
    pub missing: Vec<Digest>,
    /// Recipe chunks neither in a base nor uploaded, each once.
    pub missing_chunks: Vec<Digest>,
    /// The bytes still to send.
    pub missing_bytes: u64,
}

fn hex_digest(text: &str, what: &str) -> Result<Digest, Problem> {
    Digest::from_hex(text).map_err(|_| {
        recipe_invalid(format!(
            "{what} {text:?} is not a sha256 (64 lowercase hex digits)"
        ))
    })
}

fn recipe_invalid(message: String) -> Problem {
    Problem::new(
        422,
        "recipe_invalid",
        message,
        "send the body's chunks in order: each 1 byte to 1 MiB, their sizes adding up to the body's",
    )
}

impl Plan {
    /// The plan of a push of `manifest` over `bases`: every body of the
    /// manifest that the bases do not hold, each once, in manifest order.
    pub fn new(manifest: &Manifest, bases: &Bases) -> Plan {
        let mut plan = Plan::default();
        let mut seen = HashSet::new();
        for m in manifest.members.iter().filter(|m| has_body(m)) {
            let Some(sha) = m.sha256() else { continue };
            if !seen.insert(sha) || bases.holds_body(&sha, m.size()) {
                continue;
            }
            plan.missing.push(MissingBody {
                sha256: sha,
                size: m.size(),
            });
            if m.size() <= CHUNK_THRESHOLD {
                plan.wanted.insert(sha, m.size() as u32);
            }
        }
        plan
    }

    /// The bodies the bases do not hold.
    pub fn missing(&self) -> &[MissingBody] {
        &self.missing
    }

    /// The recipe received for `body`.
    pub fn recipe(&self, body: &Digest) -> Option<&[Chunk]> {
        self.recipe_index
            .get(body)
            .map(|&i| self.recipes[i].1.as_slice())
    }

    /// Every recipe received, in arrival order.
    pub fn recipes(&self) -> impl Iterator<Item = (&Digest, &[Chunk])> {
        self.recipes.iter().map(|(b, c)| (b, c.as_slice()))
    }

    /// The size a frame named `sha` must have, if the push may upload it.
    pub fn wanted(&self, sha: &Digest) -> Option<u32> {
        self.wanted.get(sha).copied()
    }

    /// Adds recipes (all or none): each must describe a large missing body
    /// and add up; one sent again must be identical. Returns this request's
    /// chunks that no base holds, each once, in order.
    pub fn add_recipes(&mut self, recipes: &Recipes, bases: &Bases) -> Result<Vec<Chunk>, Problem> {
        let sizes: HashMap<Digest, u64> = self.missing.iter().map(|b| (b.sha256, b.size)).collect();
        let mut checked: Vec<(Digest, Vec<Chunk>)> = Vec::new();
        for recipe in &recipes.recipes {
            let body = hex_digest(&recipe.sha256, "the recipe's body")?;
            let size = match sizes.get(&body) {
                Some(&s) if s > CHUNK_THRESHOLD => s,
                Some(_) => {
                    return Err(Problem::new(
                        422,
                        "recipe_not_needed",
                        format!("body {} is at most {CHUNK_THRESHOLD} bytes: it is one chunk, with no recipe", recipe.sha256),
                        "send it as one frame named by its sha256",
                    ))
                }
                None => {
                    return Err(Problem::new(
                        422,
                        "recipe_not_needed",
                        format!("body {} is not a missing body of this push", recipe.sha256),
                        "send recipes only for the push's `missing` bodies larger than chunking.threshold",
                    ))
                }
            };
            if recipe.size != size {
                return Err(recipe_invalid(format!(
                    "body {} has {size} bytes, the recipe says {}",
                    recipe.sha256, recipe.size
                )));
            }
            let most = size.div_ceil(MIN_CHUNK);
            if recipe.chunks.len() as u64 > most {
                return Err(recipe_invalid(format!(
                    "{} chunks for a body of {size} bytes: at most {most} (every chunk but the last has at least {MIN_CHUNK} bytes)",
                    recipe.chunks.len()
                )));
            }
            let mut chunks = Vec::with_capacity(recipe.chunks.len());
            let mut total = 0u64;
            for RecipeChunk { sha256, size } in &recipe.chunks {
                if *size == 0 || *size > MAX_CHUNK {
                    return Err(recipe_invalid(format!(
                        "chunk {sha256} has {size} bytes, a chunk has 1 to {MAX_CHUNK}"
                    )));
                }
                total += size;
                chunks.push((hex_digest(sha256, "chunk")?, *size as u32));
            }
            if total != size {
                return Err(recipe_invalid(format!(
                    "the chunks of body {} add up to {total} bytes, the body has {size}",
                    recipe.sha256
                )));
            }
            let earlier = self.recipe(&body).or_else(|| {
                checked
                    .iter()
                    .find(|(b, _)| *b == body)
                    .map(|(_, c)| c.as_slice())
            });
            match earlier {
                Some(c) if c == chunks.as_slice() => {}
                Some(_) => {
                    return Err(Problem::conflict(
                        "recipe_conflict",
                        format!("another recipe for body {} was received", recipe.sha256),
                        "send the recipe sent before (the same bytes always make the same chunks)",
                    ))
                }
                None => checked.push((body, chunks)),
            }
            for (sha, size) in checked.last().map(|(_, c)| c.as_slice()).unwrap_or(&[]) {
                if let Some(&other) = self.wanted.get(sha) {
                    if other != *size {
                        return Err(recipe_invalid(format!(
                            "chunk {} is said to have {size} bytes here and {other} elsewhere",
                            sha.hex()
                        )));
                    }
                }
            }
        }
        for (body, chunks) in checked {
            for &(sha, size) in &chunks {
                if bases.chunk(&sha).is_none() {
                    self.wanted.insert(sha, size);
                }
            }
            self.recipe_index.insert(body, self.recipes.len());
            self.recipes.push((body, chunks));
        }
        let mut seen = HashSet::new();
        let mut out = Vec::new();
        for recipe in &recipes.recipes {
            let Ok(body) = Digest::from_hex(&recipe.sha256) else {
                continue;
            };
            for &(sha, size) in self.recipe(&body).unwrap_or(&[]) {
                if bases.chunk(&sha).is_none() && seen.insert(sha) {
                    out.push((sha, size));
                }
            }
        }
        Ok(out)
    }

    /// What is still missing once the chunks in `uploaded` have arrived.
    pub fn status(&self, uploaded: &HashSet<Digest>) -> Status {
        let mut status = Status::default();
        let mut seen = HashSet::new();
        for body in &self.missing {
            if body.size <= CHUNK_THRESHOLD {
                if !uploaded.contains(&body.sha256) {
                    status.missing.push(body.sha256);
                    status.missing_bytes += body.size;
                }
                continue;
            }
            let Some(chunks) = self.recipe(&body.sha256) else {
                status.missing.push(body.sha256);
                status.missing_bytes += body.size;
                continue;
            };
            let mut complete = true;
            for &(sha, size) in chunks {
                if self.wanted.contains_key(&sha) && !uploaded.contains(&sha) {
                    complete = false;
                    if seen.insert(sha) {
                        status.missing_chunks.push(sha);
                        status.missing_bytes += u64::from(size);
                    }
                }
            }
            if !complete {
                status.missing.push(body.sha256);
            }
        }
        status
    }

    /// The object's bytes.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Out::new(PLAN_MAGIC, PLAN_VERSION);
        out.u32(self.missing.len() as u32);
        for b in &self.missing {
            out.digest(&b.sha256);
            out.u64(b.size);
        }
        out.u32(self.recipes.len() as u32);
        for (body, chunks) in &self.recipes {
            out.digest(body);
            out.u32(chunks.len() as u32);
            for (sha, size) in chunks {
                out.digest(sha);
                out.u32(*size);
            }
        }
        let mut wanted: Vec<(&Digest, &u32)> = self.wanted.iter().collect();
        wanted.sort();
        out.u32(wanted.len() as u32);
        for (sha, size) in wanted {
            out.digest(sha);
            out.u32(*size);
        }
        out.finish()
    }

    /// Reads a plan.
    pub fn decode(bytes: &[u8]) -> Result<Plan, Corrupt> {
        let mut r = In::new(bytes, PLAN_MAGIC, PLAN_VERSION, "push plan")?;
        let mut plan = Plan::default();
        for _ in 0..r.count(40)? {
            plan.missing.push(MissingBody {
                sha256: r.digest()?,
                size: r.u64()?,
            });
        }
        for _ in 0..r.count(36)? {
            let body = r.digest()?;
            let mut chunks = Vec::new();
            for _ in 0..r.count(36)? {
                chunks.push((r.digest()?, r.u32()?));
            }
            plan.recipe_index.insert(body, plan.recipes.len());
            plan.recipes.push((body, chunks));
        }
        for _ in 0..r.count(36)? {
            let sha = r.digest()?;
            plan.wanted.insert(sha, r.u32()?);
        }
        r.end()?;
        Ok(plan)
    }
}

/// Where an uploaded chunk lives.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Uploaded {
    /// The pack's key.
    pub pack: String,
    /// Its first byte in the pack.
    pub offset: u64,
    /// Its size.
    pub size: u64,
}

/// The new packet's layout, and the members whose bodies `complete` must
/// hash because nothing proved them yet (bodies of several chunks that no
/// base holds: each chunk was checked, their concatenation was not).
#[derive(Debug)]
pub struct Assembled {
    /// Where every body lies.
    pub layout: Layout,
    /// Indexes into `manifest.members`, ascending.
    pub prove: Vec<usize>,
}

/// Lays the packet of `manifest` out from its bases and the chunks the
/// push uploaded, or lists (hex) what is still missing: bodies without a
/// recipe or an upload, and chunks not uploaded.
pub fn assemble(
    manifest: &Manifest,
    bases: &Bases,
    plan: &Plan,
    uploaded: &HashMap<Digest, Uploaded>,
) -> Result<Assembled, Vec<Digest>> {
    let mut b = LayoutBuilder::new();
    let mut prove = Vec::new();
    let mut missing = Vec::new();
    let mut reported = HashSet::new();
    let mut lack = |sha: Digest, missing: &mut Vec<Digest>| {
        if reported.insert(sha) {
            missing.push(sha);
        }
    };
    for (i, m) in manifest.members.iter().enumerate() {
        let Some(sha) = m.sha256().filter(|_| has_body(m)) else {
            b.end_member();
            continue;
        };
        if let Some(chunks) = bases.body(&sha) {
            for c in chunks {
                let pack = b.pack(bases.pack_key(c.pack));
                b.push(ChunkRef { pack, ..*c });
            }
        } else if m.size() <= CHUNK_THRESHOLD {
            // One chunk, checked against its name when it arrived (or when
            // the base that holds it was stored).
            if let Some(u) = uploaded.get(&sha).filter(|u| u.size == m.size()) {
                let pack = b.pack(&u.pack);
                b.push(ChunkRef {
                    pack,
                    offset: u.offset,
                    size: u.size,
                    sha256: sha,
                });
            } else if let Some(c) = bases.chunk(&sha).filter(|c| c.size == m.size()) {
                let pack = b.pack(bases.pack_key(c.pack));
                b.push(ChunkRef { pack, ..*c });
            } else {
                lack(sha, &mut missing);
            }
        } else if let Some(chunks) = plan.recipe(&sha) {
            let mut complete = true;
            for &(c, size) in chunks {
                let at = uploaded
                    .get(&c)
                    .filter(|u| u.size == u64::from(size))
                    .map(|u| (b.pack(&u.pack), u.offset))
                    .or_else(|| {
                        bases
                            .chunk(&c)
                            .filter(|r| r.size == u64::from(size))
                            .map(|r| (b.pack(bases.pack_key(r.pack)), r.offset))
                    });
                match at {
                    Some((pack, offset)) => b.push(ChunkRef {
                        pack,
                        offset,
                        size: u64::from(size),
                        sha256: c,
                    }),
                    None => {
                        complete = false;
                        lack(c, &mut missing);
                    }
                }
            }
            if !complete {
                lack(sha, &mut missing);
            }
            if chunks.len() > 1 || chunks.first().map(|c| c.0) != Some(sha) {
                prove.push(i);
            }
        } else {
            lack(sha, &mut missing);
        }
        b.end_member();
    }
    if missing.is_empty() {
        Ok(Assembled {
            layout: b.finish(),
            prove,
        })
    } else {
        Err(missing)
    }
}

/// The recipes of a stored packet's bodies of several chunks, each body
/// once, in manifest order (`GET /v1/packets/{digest}/recipes`).
pub fn recipes_of(manifest: &Manifest, layout: &Layout) -> Recipes {
    let mut seen = HashSet::new();
    let mut recipes = Vec::new();
    for (i, m) in manifest.members.iter().enumerate() {
        let chunks = layout.chunks(i);
        let Some(sha) = m.sha256().filter(|_| chunks.len() > 1) else {
            continue;
        };
        if seen.insert(sha) {
            recipes.push(Recipe {
                sha256: sha.hex().to_string(),
                size: m.size(),
                chunks: chunks
                    .iter()
                    .map(|c| RecipeChunk {
                        sha256: c.sha256.hex().to_string(),
                        size: c.size,
                    })
                    .collect(),
            });
        }
    }
    Recipes { recipes }
}

/// Every chunk of a stored packet a client may fetch
/// (`POST /v1/packets/{digest}/chunks`): the chunks of bodies of several
/// chunks, and bodies of at most [`MAX_CHUNK`] bytes that are one chunk.
pub fn chunks_of(manifest: &Manifest, layout: &Layout) -> HashMap<Digest, ChunkRef> {
    let mut out = HashMap::new();
    for (i, m) in manifest.members.iter().enumerate() {
        if !has_body(m) {
            continue;
        }
        for c in layout.chunks(i) {
            if c.size <= MAX_CHUNK {
                out.entry(c.sha256).or_insert(*c);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use packet_core::offsets::Offsets;
    use packet_core::{Limits, Member};

    fn big(n: u8, size: u64) -> Vec<u8> {
        (0..size).map(|i| (i as u8).wrapping_mul(n)).collect()
    }

    struct Fixture {
        manifest: Manifest,
    }

    fn packet(files: &[(&str, Vec<u8>)]) -> Fixture {
        let mut members = vec![Member::dir("workspace")];
        for (path, body) in files {
            members.push(Member::file(
                *path,
                body.len() as u64,
                Digest::of(body),
                false,
            ));
        }
        Fixture {
            manifest: Manifest::build(members, None, vec![], &Limits::FORMAT).unwrap(),
        }
    }

    fn recipe(body: &[u8], cut: usize) -> Recipe {
        Recipe {
            sha256: Digest::of(body).hex().to_string(),
            size: body.len() as u64,
            chunks: body
                .chunks(cut)
                .map(|c| RecipeChunk {
                    sha256: Digest::of(c).hex().to_string(),
                    size: c.len() as u64,
                })
                .collect(),
        }
    }

    #[test]
    fn presence_is_what_the_bases_hold_and_nothing_else() {
        let old_big = big(3, 600_000);
        let base = packet(&[
            ("workspace/a", b"same".to_vec()),
            ("workspace/log", old_big.clone()),
        ]);
        let base_layout =
            Layout::whole("uploads/base", &base.manifest, &Offsets::of(&base.manifest));
        let mut bases = Bases::new();
        bases.add(&base.manifest, &base_layout);
        let mut grown = old_big.clone();
        grown.extend_from_slice(&big(5, 100_000));
        let new = packet(&[
            ("workspace/a", b"same".to_vec()),
            ("workspace/b", b"new".to_vec()),
            ("workspace/c", b"new".to_vec()),
            ("workspace/log", grown.clone()),
        ]);
        let plan = Plan::new(&new.manifest, &bases);
        // "a" is in the base; "b" and "c" are one body, listed once.
        assert_eq!(
            plan.missing(),
            [
                MissingBody {
                    sha256: Digest::of(b"new"),
                    size: 3
                },
                MissingBody {
                    sha256: Digest::of(&grown),
                    size: grown.len() as u64
                },
            ]
        );
        assert_eq!(plan.wanted(&Digest::of(b"new")), Some(3));
        assert_eq!(
            plan.wanted(&Digest::of(&grown)),
            None,
            "a large body goes up by recipe"
        );
        let none = HashSet::new();
        let status = plan.status(&none);
        assert_eq!(status.missing.len(), 2);
        assert_eq!(status.missing_bytes, 3 + grown.len() as u64);
        // Round trip.
        assert_eq!(Plan::decode(&plan.encode()).unwrap(), plan);
    }

    #[test]
    fn recipes_are_checked_and_their_chunks_become_wanted() {
        let body = big(7, 700_000);
        let f = packet(&[
            ("workspace/log", body.clone()),
            ("workspace/s", b"small".to_vec()),
        ]);
        let bases = Bases::new();
        let mut plan = Plan::new(&f.manifest, &bases);
        let good = recipe(&body, 300_000);
        let chunks = plan
            .add_recipes(
                &Recipes {
                    recipes: vec![good.clone()],
                },
                &bases,
            )
            .unwrap();
        assert_eq!(chunks.len(), 3);
        assert_eq!(plan.wanted(&chunks[0].0), Some(300_000));
        // The same recipe again is fine; another one conflicts.
        plan.add_recipes(
            &Recipes {
                recipes: vec![good.clone()],
            },
            &bases,
        )
        .unwrap();
        let other = recipe(&body, 200_000);
        let e = plan
            .add_recipes(
                &Recipes {
                    recipes: vec![other],
                },
                &bases,
            )
            .unwrap_err();
        assert_eq!((e.status, e.error.code()), (409, "recipe_conflict"));
        let refuse = |r: Recipe| {
            let mut p = Plan::new(&f.manifest, &bases);
            p.add_recipes(&Recipes { recipes: vec![r] }, &bases)
                .unwrap_err()
                .error
                .code()
                .to_string()
        };
        assert_eq!(refuse(recipe(b"small", 2)), "recipe_not_needed");
        assert_eq!(
            refuse(recipe(&big(9, 700_000), 300_000)),
            "recipe_not_needed"
        );
        let mut short = good.clone();
        short.chunks.pop();
        assert_eq!(refuse(short), "recipe_invalid");
        let mut empty_chunk = good.clone();
        empty_chunk.chunks[0].size = 0;
        assert_eq!(refuse(empty_chunk), "recipe_invalid", "a chunk of no bytes");
        let huge = packet(&[("workspace/huge", big(3, 1_100_000))]);
        let mut p = Plan::new(&huge.manifest, &bases);
        let one = recipe(&big(3, 1_100_000), 1_100_000);
        let e = p
            .add_recipes(&Recipes { recipes: vec![one] }, &bases)
            .unwrap_err();
        assert_eq!(e.error.code(), "recipe_invalid", "a chunk over 1 MiB");
        assert_eq!(
            refuse(recipe(&body, 1000)),
            "recipe_invalid",
            "too many chunks"
        );
        let mut bad_hex = good.clone();
        bad_hex.chunks[0].sha256 = "XYZ".into();
        assert_eq!(refuse(bad_hex), "recipe_invalid");
        // Status follows the uploads.
        let mut up: HashSet<Digest> = chunks.iter().take(2).map(|c| c.0).collect();
        let s = plan.status(&up);
        assert_eq!(s.missing_chunks, [chunks[2].0]);
        assert_eq!(s.missing_bytes, 100_000 + 5);
        up.insert(chunks[2].0);
        up.insert(Digest::of(b"small"));
        assert_eq!(plan.status(&up), Status::default());
        assert_eq!(Plan::decode(&plan.encode()).unwrap(), plan);
    }

    #[test]
    fn assembling_takes_bases_then_uploads_and_lists_what_is_missing() {
        let old = big(3, 600_000);
        let base = packet(&[
            ("workspace/keep", b"kept".to_vec()),
            ("workspace/log", old.clone()),
        ]);
        let mut bl = LayoutBuilder::new();
        let bp = bl.pack("packs/base");
        // The base's log in two chunks.
        bl.end_member();
        bl.push(ChunkRef {
            pack: bp,
            offset: 0,
            size: 4,
            sha256: Digest::of(b"kept"),
        });
        bl.end_member();
        bl.push(ChunkRef {
            pack: bp,
            offset: 4,
            size: 400_000,
            sha256: Digest::of(&old[..400_000]),
        });
        bl.push(ChunkRef {
            pack: bp,
            offset: 400_004,
            size: 200_000,
            sha256: Digest::of(&old[400_000..]),
        });
        bl.end_member();
        // Members are in manifest order: workspace, keep, log.
        let base_layout = bl.finish();
        Layout::decode(&base_layout.encode(), &base.manifest).unwrap();
        let mut bases = Bases::new();
        bases.add(&base.manifest, &base_layout);

        let mut grown = old.clone();
        grown.extend_from_slice(b"appended tail");
        let new = packet(&[
            ("workspace/keep", b"kept".to_vec()),
            ("workspace/log", grown.clone()),
            ("workspace/x", b"fresh".to_vec()),
        ]);
        let mut plan = Plan::new(&new.manifest, &bases);
        let r = Recipe {
            sha256: Digest::of(&grown).hex().to_string(),
            size: grown.len() as u64,
            chunks: vec![
                RecipeChunk {
                    sha256: Digest::of(&old[..400_000]).hex().to_string(),
                    size: 400_000,
                },
                RecipeChunk {
                    sha256: Digest::of(&grown[400_000..]).hex().to_string(),
                    size: (grown.len() - 400_000) as u64,
                },
            ],
        };
        let needed = plan
            .add_recipes(&Recipes { recipes: vec![r] }, &bases)
            .unwrap();
        assert_eq!(
            needed,
            [(
                Digest::of(&grown[400_000..]),
                (grown.len() - 400_000) as u32
            )],
            "the first chunk is in the base"
        );

        let mut uploaded = HashMap::new();
        let missing = assemble(&new.manifest, &bases, &plan, &uploaded).unwrap_err();
        assert_eq!(
            missing,
            [needed[0].0, Digest::of(&grown), Digest::of(b"fresh")]
        );
        uploaded.insert(
            needed[0].0,
            Uploaded {
                pack: "packs/new".into(),
                offset: 5,
                size: needed[0].1 as u64,
            },
        );
        uploaded.insert(
            Digest::of(b"fresh"),
            Uploaded {
                pack: "packs/new".into(),
                offset: 0,
                size: 5,
            },
        );
        let a = assemble(&new.manifest, &bases, &plan, &uploaded).unwrap();
        assert_eq!(a.layout.packs(), ["packs/base", "packs/new"]);
        assert_eq!(a.prove, [2], "the grown log is hashed at complete");
        assert_eq!(a.layout.chunks(1)[0].offset, 0);
        assert_eq!(a.layout.chunks(2).len(), 2);
        assert_eq!(a.layout.chunks(3)[0].pack, 1);
        let decoded = Layout::decode(&a.layout.encode(), &new.manifest).unwrap();
        assert_eq!(decoded, a.layout);
        // What a pull sees of it.
        let recipes = recipes_of(&new.manifest, &a.layout);
        assert_eq!(recipes.recipes.len(), 1);
        assert_eq!(recipes.recipes[0].chunks.len(), 2);
        let chunks = chunks_of(&new.manifest, &a.layout);
        assert_eq!(chunks.len(), 4);
        assert!(chunks.contains_key(&Digest::of(b"fresh")));
    }
}
