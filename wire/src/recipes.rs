//! Recipes (docs/transfer.md, "Units"): how `packet.json` and the large
//! bodies of a packet are cut into chunks, as binary sections that two
//! bodies share:
//!
//! - the recipes document (`application/x-pillbox-recipes`): `"PBRECIPE"`,
//!   the manifest's recipe, the body recipes. `GET
//!   /v1/packets/{digest}/recipes` answers one; `POST
//!   /v1/pushes/{id}/recipes` takes one (with no manifest chunks);
//! - the push body (`application/x-pillbox-push`, `POST /v1/pushes`):
//!   `"PBPUSH02"`, the same two sections, then a chunk batch
//!   ([`crate::chunks`]) with the frames the client believes the store lacks.
//!
//! ```text
//! manifest recipe   u32 n, n × (32-byte sha256, u32 size): its chunks in order
//! body recipes      u32 n, each: 32-byte body sha256, u64 size, u32 runs, runs:
//!   chunk run       u8 0, 32-byte sha256, u32 size
//!   copy run        u8 1, 32-byte base body sha256, u64 base body size, u32 first, u32 count
//! ```
//!
//! A copy run stands for chunks `first .. first + count` of that base
//! body's recipe as the store holds it (an appended log: "copy all but the
//! last chunk of the old log, then one or two new chunks"). Integers are
//! big-endian. The decoders read the sections as they stream in, and check
//! every count against the [`RecipeLimits`] before anything is allocated
//! for it; whether the chunks add up to the body and the copies name a base
//! body are the store's checks.
//!
//! ```
//! use packet_core::{Body, Digest};
//! use pillbox_wire::recipes::{BodyRecipe, ChunkName, RecipeLimits, Recipes, Run};
//!
//! let body = Body { sha256: Digest::of(b"log"), size: 300_000 };
//! let recipes = Recipes {
//!     manifest: vec![ChunkName { sha256: Digest::of(b"packet.json"), size: 900 }],
//!     bodies: vec![BodyRecipe {
//!         body,
//!         runs: vec![
//!             Run::Copy { body: Body { sha256: Digest::of(b"old log"), size: 250_000 }, first: 0, count: 2 },
//!             Run::Chunk(ChunkName { sha256: Digest::of(b"tail"), size: 100_000 }),
//!         ],
//!     }],
//! };
//! let bytes = recipes.encode();
//! assert_eq!(Recipes::decode(&bytes, RecipeLimits::DEFAULT)?, recipes);
//! # Ok::<(), pillbox_wire::binary::DecodeError>(())
//! ```

use alloc::vec::Vec;

use packet_core::{Body, Digest};

use crate::binary::{digest_at, u32_at, u64_at, DecodeError, DecodeErrorKind as K, Field};
use crate::chunking::MAX_CHUNK;
use crate::chunks::{self, BatchLimits, Decoded};

/// The media type of a recipes document.
pub const MEDIA_TYPE: &str = "application/x-pillbox-recipes";
/// The first 8 bytes of a recipes document.
pub const MAGIC: &[u8; 8] = b"PBRECIPE";
/// The media type of a push's create body.
pub const PUSH_MEDIA_TYPE: &str = "application/x-pillbox-push";
/// The first 8 bytes of a push's create body.
pub const PUSH_MAGIC: &[u8; 8] = b"PBPUSH02";

const CHUNK_BYTES: usize = 36;
const BODY_BYTES: usize = 44;
const COPY_BYTES: usize = 48;
/// The fewest bytes a run takes.
const RUN_MIN: usize = 1 + CHUNK_BYTES;

/// A chunk by its name and size.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ChunkName {
    /// The SHA-256 of its raw bytes.
    pub sha256: Digest,
    /// How many raw bytes it has (1 to 1 MiB).
    pub size: u32,
}

/// A stretch of a body's chunks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Run {
    /// One chunk.
    Chunk(ChunkName),
    /// Chunks `first .. first + count` of a base body's recipe.
    Copy {
        /// The base body.
        body: Body,
        /// Its first chunk copied.
        first: u32,
        /// How many chunks (at least one).
        count: u32,
    },
}

/// How one body is cut: its runs, whose chunks' concatenation is the body.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BodyRecipe {
    /// The body (the manifest's size and sha256).
    pub body: Body,
    /// Its chunks, in order, as runs.
    pub runs: Vec<Run>,
}

/// The recipe sections: the manifest's chunks and the body recipes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Recipes {
    /// `packet.json`'s chunks, in order (none: not given).
    pub manifest: Vec<ChunkName>,
    /// Recipes of bodies.
    pub bodies: Vec<BodyRecipe>,
}

/// What the recipe sections may hold. Every count is checked against its
/// limit, and against the bytes [`RecipeLimits::max_bytes`] leaves, before
/// anything is allocated for it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecipeLimits {
    /// The most bytes the sections take.
    pub max_bytes: u64,
    /// The most chunks in the manifest's recipe.
    pub max_manifest_chunks: u32,
    /// The most body recipes.
    pub max_bodies: u32,
    /// The most runs, over all body recipes.
    pub max_runs: u32,
}

impl RecipeLimits {
    /// 16 MiB of recipes; a manifest of 64 MiB in 4 KiB chunks; 65,536
    /// bodies; 500,000 runs.
    pub const DEFAULT: RecipeLimits = RecipeLimits {
        max_bytes: 16 << 20,
        max_manifest_chunks: ((64u64 << 20) / (4 << 10)) as u32 + 1,
        max_bodies: 65_536,
        max_runs: 500_000,
    };
}

fn err(kind: K, offset: u64, message: alloc::string::String) -> DecodeError {
    DecodeError::new(kind, offset, message)
}

impl Recipes {
    /// Appends the two sections.
    pub fn encode_sections(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&(self.manifest.len() as u32).to_be_bytes());
        for c in &self.manifest {
            put_chunk(c, out);
        }
        out.extend_from_slice(&(self.bodies.len() as u32).to_be_bytes());
        for b in &self.bodies {
            out.extend_from_slice(&b.body.sha256.0);
            out.extend_from_slice(&b.body.size.to_be_bytes());
            out.extend_from_slice(&(b.runs.len() as u32).to_be_bytes());
            for r in &b.runs {
                match r {
                    Run::Chunk(c) => {
                        out.push(0);
                        put_chunk(c, out);
                    }
                    Run::Copy { body, first, count } => {
                        out.push(1);
                        out.extend_from_slice(&body.sha256.0);
                        out.extend_from_slice(&body.size.to_be_bytes());
                        out.extend_from_slice(&first.to_be_bytes());
                        out.extend_from_slice(&count.to_be_bytes());
                    }
                }
            }
        }
    }

    /// The recipes document.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = MAGIC.to_vec();
        self.encode_sections(&mut out);
        out
    }

    /// A push's create body: these recipes, then `batch` (a chunk batch,
    /// [`chunks::encode`]).
    pub fn encode_push(&self, batch: &[u8]) -> Vec<u8> {
        let mut out = PUSH_MAGIC.to_vec();
        self.encode_sections(&mut out);
        out.extend_from_slice(batch);
        out
    }

    /// Reads a whole recipes document.
    pub fn decode(bytes: &[u8], limits: RecipeLimits) -> Result<Recipes, DecodeError> {
        let mut d = SectionDecoder::new(limits, MAGIC);
        let used = d.decode(bytes)?;
        if !d.is_done() {
            return Err(d.truncated());
        }
        if used < bytes.len() {
            return Err(err(
                K::RecipesTrailing,
                used as u64,
                alloc::format!("{} bytes follow the recipes", bytes.len() - used),
            ));
        }
        Ok(d.take())
    }
}

fn put_chunk(c: &ChunkName, out: &mut Vec<u8>) {
    out.extend_from_slice(&c.sha256.0);
    out.extend_from_slice(&c.size.to_be_bytes());
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Step {
    Magic,
    ManifestCount,
    ManifestChunk { left: u32 },
    BodiesCount,
    BodyHead { left: u32 },
    RunTag { bodies_left: u32, runs_left: u32 },
    RunChunk { bodies_left: u32, runs_left: u32 },
    RunCopy { bodies_left: u32, runs_left: u32 },
    Done,
}

/// Reads the recipe sections (after a magic) as they stream in.
#[derive(Debug)]
pub struct SectionDecoder {
    limits: RecipeLimits,
    magic: &'static [u8; 8],
    step: Step,
    field: Field,
    recipes: Recipes,
    runs: u64,
    offset: u64,
}

impl SectionDecoder {
    /// A decoder of sections that follow `magic`, within `limits`.
    pub fn new(limits: RecipeLimits, magic: &'static [u8; 8]) -> SectionDecoder {
        SectionDecoder {
            limits,
            magic,
            step: Step::Magic,
            field: Field::default(),
            recipes: Recipes::default(),
            runs: 0,
            offset: 0,
        }
    }

    /// Whether both sections are read.
    pub fn is_done(&self) -> bool {
        self.step == Step::Done
    }

    /// Bytes read so far.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// The recipes read (complete once [`SectionDecoder::is_done`]).
    pub fn recipes(&self) -> &Recipes {
        &self.recipes
    }

    /// Takes the recipes read.
    pub fn take(&mut self) -> Recipes {
        core::mem::take(&mut self.recipes)
    }

    fn truncated(&self) -> DecodeError {
        err(
            K::RecipesTruncated,
            self.offset,
            alloc::format!("the recipes end after {} bytes", self.offset),
        )
    }

    /// Checks a count of items of at least `item` bytes each against its
    /// limit and the bytes left.
    fn count(
        &self,
        n: u32,
        most: u64,
        item: usize,
        what: &str,
        at: u64,
    ) -> Result<(), DecodeError> {
        let left = self.limits.max_bytes.saturating_sub(self.offset);
        if u64::from(n) > most || u64::from(n).saturating_mul(item as u64) > left {
            return Err(err(
                K::RecipesCount,
                at,
                alloc::format!(
                    "{n} {what}: at most {most}, in at most {} bytes of recipes",
                    self.limits.max_bytes
                ),
            ));
        }
        Ok(())
    }

    /// Reads from `input`; returns how many bytes it used (all of them
    /// unless the sections ended inside `input`).
    pub fn decode(&mut self, input: &[u8]) -> Result<usize, DecodeError> {
        let mut used = 0;
        loop {
            let want = match self.step {
                Step::Done => return Ok(used),
                Step::Magic => 8,
                Step::ManifestCount | Step::BodiesCount => 4,
                Step::ManifestChunk { .. } | Step::RunChunk { .. } => CHUNK_BYTES,
                Step::BodyHead { .. } => BODY_BYTES,
                Step::RunTag { .. } => 1,
                Step::RunCopy { .. } => COPY_BYTES,
            };
            let at = self.offset - self.field.len() as u64;
            let (n, whole) = self.field.fill(&input[used..], want);
            used += n;
            self.offset += n as u64;
            let Some(f) = whole else { return Ok(used) };
            let mut copy = [0u8; COPY_BYTES];
            copy[..want].copy_from_slice(f);
            self.field.clear();
            if self.offset > self.limits.max_bytes {
                return Err(err(
                    K::RecipesCount,
                    at,
                    alloc::format!("the recipes take more than {} bytes", self.limits.max_bytes),
                ));
            }
            self.step = self.next(&copy[..want], at)?;
        }
    }

    /// The step after reading field `f` (read at `at`) in the current step.
    fn next(&mut self, f: &[u8], at: u64) -> Result<Step, DecodeError> {
        let chunk = |f: &[u8], at: u64| -> Result<ChunkName, DecodeError> {
            let size = u32_at(f, 32);
            if size == 0 || size > MAX_CHUNK {
                return Err(err(
                    K::RecipesSize,
                    at + 32,
                    alloc::format!("a chunk of {size} bytes: a chunk has 1 to {MAX_CHUNK}"),
                ));
            }
            Ok(ChunkName {
                sha256: digest_at(f, 0),
                size,
            })
        };
        Ok(match self.step {
            Step::Done => Step::Done,
            Step::Magic => {
                if f != self.magic {
                    return Err(err(
                        K::RecipesMagic,
                        at,
                        alloc::format!(
                            "the body does not start with {}",
                            core::str::from_utf8(self.magic).unwrap_or("its magic")
                        ),
                    ));
                }
                Step::ManifestCount
            }
            Step::ManifestCount => {
                let n = u32_at(f, 0);
                self.count(
                    n,
                    u64::from(self.limits.max_manifest_chunks),
                    CHUNK_BYTES,
                    "manifest chunks",
                    at,
                )?;
                self.recipes.manifest = Vec::with_capacity(n as usize);
                if n == 0 {
                    Step::BodiesCount
                } else {
                    Step::ManifestChunk { left: n }
                }
            }
            Step::ManifestChunk { left } => {
                self.recipes.manifest.push(chunk(f, at)?);
                if left == 1 {
                    Step::BodiesCount
                } else {
                    Step::ManifestChunk { left: left - 1 }
                }
            }
            Step::BodiesCount => {
                let n = u32_at(f, 0);
                self.count(
                    n,
                    u64::from(self.limits.max_bodies),
                    BODY_BYTES,
                    "body recipes",
                    at,
                )?;
                self.recipes.bodies = Vec::with_capacity(n as usize);
                if n == 0 {
                    Step::Done
                } else {
                    Step::BodyHead { left: n }
                }
            }
            Step::BodyHead { left } => {
                let body = Body {
                    sha256: digest_at(f, 0),
                    size: u64_at(f, 32),
                };
                if body.size == 0 {
                    return Err(err(
                        K::RecipesSize,
                        at + 32,
                        "a recipe for a body of 0 bytes".into(),
                    ));
                }
                let runs = u32_at(f, 40);
                let most = u64::from(self.limits.max_runs).saturating_sub(self.runs);
                self.count(runs, most, RUN_MIN, "runs", at + 40)?;
                self.runs += u64::from(runs);
                self.recipes.bodies.push(BodyRecipe {
                    body,
                    runs: Vec::with_capacity(runs as usize),
                });
                self.after_run(left, runs)
            }
            Step::RunTag {
                bodies_left,
                runs_left,
            } => match f[0] {
                0 => Step::RunChunk {
                    bodies_left,
                    runs_left,
                },
                1 => Step::RunCopy {
                    bodies_left,
                    runs_left,
                },
                other => {
                    return Err(err(
                        K::RecipesRun,
                        at,
                        alloc::format!("a run of kind {other}: a run is 0 (a chunk) or 1 (a copy)"),
                    ))
                }
            },
            Step::RunChunk {
                bodies_left,
                runs_left,
            } => {
                let c = chunk(f, at)?;
                self.push_run(Run::Chunk(c));
                self.after_run(bodies_left, runs_left - 1)
            }
            Step::RunCopy {
                bodies_left,
                runs_left,
            } => {
                let body = Body {
                    sha256: digest_at(f, 0),
                    size: u64_at(f, 32),
                };
                let (first, count) = (u32_at(f, 40), u32_at(f, 44));
                if count == 0 || body.size == 0 {
                    return Err(err(
                        K::RecipesSize,
                        at + 32,
                        "a copy of no chunks, or of a body of 0 bytes".into(),
                    ));
                }
                self.push_run(Run::Copy { body, first, count });
                self.after_run(bodies_left, runs_left - 1)
            }
        })
    }

    fn push_run(&mut self, run: Run) {
        if let Some(b) = self.recipes.bodies.last_mut() {
            b.runs.push(run);
        }
    }

    /// After a body's head or a run: the next run, body or the end.
    fn after_run(&self, bodies_left: u32, runs_left: u32) -> Step {
        if runs_left > 0 {
            Step::RunTag {
                bodies_left,
                runs_left,
            }
        } else if bodies_left > 1 {
            Step::BodyHead {
                left: bodies_left - 1,
            }
        } else {
            Step::Done
        }
    }
}

/// What a push's create body may hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PushLimits {
    /// The recipe sections.
    pub recipes: RecipeLimits,
    /// The chunk batch that follows.
    pub batch: BatchLimits,
}

impl PushLimits {
    /// The most bytes a create body within these limits has.
    pub const fn max_body_bytes(&self) -> u64 {
        self.recipes.max_bytes + self.batch.max_batch_bytes()
    }
}

/// What [`PushDecoder::decode`] found.
#[derive(Debug, PartialEq, Eq)]
pub enum PushDecoded<'a> {
    /// Every byte given went into the recipes: give it more.
    NeedInput,
    /// The recipes are complete ([`PushDecoder::recipes`]); the batch
    /// follows.
    Recipes,
    /// What the batch's decoder found ([`PushDecoder::batch`]).
    Batch(Decoded<'a>),
}

/// Reads a push's create body as it streams in: the recipe sections, then
/// the chunk batch. It holds the recipes and the batch's table.
#[derive(Debug)]
pub struct PushDecoder {
    head: SectionDecoder,
    batch: Option<chunks::Decoder>,
    limits: PushLimits,
}

impl PushDecoder {
    /// A decoder that refuses bodies beyond `limits`.
    pub fn new(limits: PushLimits) -> PushDecoder {
        PushDecoder {
            head: SectionDecoder::new(limits.recipes, PUSH_MAGIC),
            batch: None,
            limits,
        }
    }

    /// The recipes (complete once [`PushDecoded::Recipes`] was returned).
    pub fn recipes(&self) -> &Recipes {
        self.head.recipes()
    }

    /// Takes the recipes (after [`PushDecoded::Recipes`]).
    pub fn take_recipes(&mut self) -> Recipes {
        self.head.take()
    }

    /// The batch's decoder, once the recipes are read.
    pub fn batch(&self) -> Option<&chunks::Decoder> {
        self.batch.as_ref()
    }

    /// The batch's decoder, to take frame bytes without seeing them
    /// ([`chunks::Decoder::consume`]).
    pub fn batch_mut(&mut self) -> Option<&mut chunks::Decoder> {
        self.batch.as_mut()
    }

    /// Reads from `input`: what it found and how many bytes it used.
    pub fn decode<'a>(&mut self, input: &'a [u8]) -> Result<(PushDecoded<'a>, usize), DecodeError> {
        if let Some(batch) = &mut self.batch {
            let (d, used) = batch.decode(input)?;
            return Ok((PushDecoded::Batch(d), used));
        }
        let used = self.head.decode(input)?;
        if self.head.is_done() {
            self.batch = Some(chunks::Decoder::at(self.limits.batch, self.head.offset()));
            return Ok((PushDecoded::Recipes, used));
        }
        Ok((PushDecoded::NeedInput, used))
    }

    /// Checks that the body is complete (call it at the end of the input).
    pub fn finish(&self) -> Result<(), DecodeError> {
        match &self.batch {
            Some(b) => b.finish(),
            None => Err(self.head.truncated()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;

    fn d(n: u8) -> Digest {
        Digest::of(&[n])
    }

    fn sample() -> Recipes {
        Recipes {
            manifest: vec![
                ChunkName {
                    sha256: d(1),
                    size: 4096,
                },
                ChunkName {
                    sha256: d(2),
                    size: 17,
                },
            ],
            bodies: vec![
                BodyRecipe {
                    body: Body {
                        sha256: d(3),
                        size: 1 << 40,
                    },
                    runs: vec![
                        Run::Copy {
                            body: Body {
                                sha256: d(4),
                                size: 9,
                            },
                            first: 3,
                            count: 7,
                        },
                        Run::Chunk(ChunkName {
                            sha256: d(5),
                            size: 1 << 20,
                        }),
                    ],
                },
                BodyRecipe {
                    body: Body {
                        sha256: d(6),
                        size: 5,
                    },
                    runs: vec![],
                },
            ],
        }
    }

    #[test]
    fn a_document_round_trips_and_refuses_what_it_is_not() {
        let r = sample();
        let bytes = r.encode();
        assert_eq!(bytes.len(), 8 + 4 + 72 + 4 + (44 + 49 + 37) + 44);
        assert_eq!(Recipes::decode(&bytes, RecipeLimits::DEFAULT).unwrap(), r);
        let code = |b: &[u8], l| Recipes::decode(b, l).unwrap_err().code();
        assert_eq!(
            code(&bytes[..bytes.len() - 1], RecipeLimits::DEFAULT),
            "recipes_truncated"
        );
        let mut long = bytes.clone();
        long.push(0);
        assert_eq!(code(&long, RecipeLimits::DEFAULT), "recipes_trailing");
        assert_eq!(code(b"PBRECIPX", RecipeLimits::DEFAULT), "recipes_magic");
        let few = RecipeLimits {
            max_runs: 1,
            ..RecipeLimits::DEFAULT
        };
        assert_eq!(code(&bytes, few), "recipes_count");
        let small = RecipeLimits {
            max_bytes: 100,
            ..RecipeLimits::DEFAULT
        };
        assert_eq!(code(&bytes, small), "recipes_count");
        // The tag of the first run of the first body.
        let tag = 8 + 4 + 72 + 4 + 44;
        let mut bad = bytes.clone();
        bad[tag] = 2;
        let e = Recipes::decode(&bad, RecipeLimits::DEFAULT).unwrap_err();
        assert_eq!((e.code(), e.offset), ("recipes_run", tag as u64));
        let mut zero = bytes.clone();
        zero[8 + 4 + 32..8 + 4 + 36].fill(0);
        assert_eq!(code(&zero, RecipeLimits::DEFAULT), "recipes_size");
    }

    #[test]
    fn huge_counts_are_refused_before_anything_is_allocated() {
        for at in [8usize, 8 + 4] {
            let mut b = MAGIC.to_vec();
            b.extend_from_slice(&0u32.to_be_bytes());
            b.truncate(at);
            b.extend_from_slice(&u32::MAX.to_be_bytes());
            let e = Recipes::decode(&b, RecipeLimits::DEFAULT).unwrap_err();
            assert_eq!((e.code(), e.offset), ("recipes_count", at as u64));
        }
        let mut b = MAGIC.to_vec();
        b.extend_from_slice(&0u32.to_be_bytes());
        b.extend_from_slice(&1u32.to_be_bytes());
        b.extend_from_slice(&[7; 40]);
        b.extend_from_slice(&u32::MAX.to_be_bytes());
        assert_eq!(
            Recipes::decode(&b, RecipeLimits::DEFAULT)
                .unwrap_err()
                .code(),
            "recipes_count"
        );
    }

    #[test]
    fn a_push_body_is_recipes_then_a_batch() {
        let r = sample();
        let batch = chunks::encode_identity(&[b"abc", b"de"]);
        let body = r.encode_push(&batch);
        let limits = PushLimits {
            recipes: RecipeLimits::DEFAULT,
            batch: BatchLimits::DOWNLOAD,
        };
        for piece in [1, 3, 40, 1000] {
            let mut p = PushDecoder::new(limits);
            let mut frames: Vec<Vec<u8>> = Vec::new();
            let mut seen_recipes = false;
            for mut input in body.chunks(piece) {
                while !input.is_empty() {
                    let (found, used) = p.decode(input).unwrap();
                    input = &input[used..];
                    match found {
                        PushDecoded::Recipes => {
                            seen_recipes = true;
                            assert_eq!(p.recipes(), &r);
                        }
                        PushDecoded::Batch(Decoded::Table) => {
                            frames = vec![Vec::new(); p.batch().unwrap().table().len()]
                        }
                        PushDecoded::Batch(Decoded::Data { index, bytes, .. }) => {
                            frames[index].extend_from_slice(bytes)
                        }
                        _ => {}
                    }
                }
            }
            p.finish().unwrap();
            assert!(seen_recipes);
            assert_eq!(frames, [b"abc".to_vec(), b"de".to_vec()]);
        }
        let mut p = PushDecoder::new(limits);
        p.decode(&body[..body.len() - 1]).unwrap();
        assert_eq!(p.finish().unwrap_err().code(), "chunk_batch_truncated");
        let mut p = PushDecoder::new(limits);
        p.decode(&body[..10]).unwrap();
        assert_eq!(p.finish().unwrap_err().code(), "recipes_truncated");
        // A refusal in the batch counts offsets from the body's start.
        let mut bad = body.clone();
        let magic_at = body.len() - batch.len();
        bad[magic_at] = b'X';
        let mut p = PushDecoder::new(limits);
        let mut input = &bad[..];
        let e = loop {
            match p.decode(input) {
                Ok((_, used)) => input = &input[used..],
                Err(e) => break e,
            }
        };
        assert_eq!((e.code(), e.offset), ("chunk_batch_magic", magic_at as u64));
    }
}
