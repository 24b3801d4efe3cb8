//! A packet's parts as the store describes them (docs/transfer.md,
//! "Recipes and chunks"): `packet.json`'s exact bytes and the chunk list of
//! each body of several chunks. `GET /v1/packets/{digest}/recipes`, with
//! `?base=` the packet this machine last had, answers both recipes; the
//! manifest's chunks this machine already holds (those of the base's own
//! `packet.json`, the cache's) are read here and only the rest fetched,
//! and copy runs are resolved against the base's chunk lists. A /2
//! packet's `packet.json` is then checked against its name by landing it
//! as a body whose sha256 is the packet digest.

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;

use packet_core::{Body, Digest, Limits};
use pillbox_wire::recipes::{ChunkName, RecipeLimits, Recipes, Run};

use super::client::{bad_answer, status_error, Remote};
use super::fetch::Fetcher;
use super::land::{self, Sink, Source};
use super::pull_local::{Local, SourceKind};
use super::pull_plan::{self, At, BatchLimits, Cut, Wanted};
use crate::cache::Cache;
use crate::chunking::{self, MANIFEST};
use crate::error::{CliError, Result};
use crate::progress::Progress;

/// The packet this machine last had, as far as describing a new one goes.
pub struct KnownBase<'a> {
    /// Its digest, named as `?base=` when the chunk lists of its large
    /// bodies are known here (`None`: a packet file given as a base, whose
    /// `packet.json` alone is of use).
    pub digest: Option<Digest>,
    /// Its `packet.json`.
    pub json: &'a [u8],
    /// The chunk lists of its large bodies, where known.
    pub recipes: &'a HashMap<Body, Vec<ChunkName>>,
}

/// `packet.json` and the large bodies' chunk lists.
pub struct Parts {
    /// `packet.json`'s exact bytes: for a /2 packet, checked against its
    /// digest; a /1 packet's are as the store sent them (its reader checks
    /// them with the whole file).
    pub json: Vec<u8>,
    /// Whether `json` was checked against the packet digest (a /2
    /// packet's name).
    pub json_checked: bool,
    /// Body → its chunks, for every body the store keeps in several.
    pub recipes: HashMap<Body, Vec<ChunkName>>,
}

/// Fetches what packet `digest` is made of.
pub fn fetch(
    fetcher: &Fetcher<'_>,
    digest: &Digest,
    base: Option<&KnownBase<'_>>,
    cache: Option<&Mutex<Cache>>,
) -> Result<Parts> {
    let remote = fetcher.remote();
    let mut recipes = get_recipes(remote, digest, base.and_then(|b| b.digest))?;
    let empty = HashMap::new();
    let known = base.map_or(&empty, |b| b.recipes);
    let bodies = match resolve(&recipes, known) {
        Ok(b) => b,
        // A copy of a base body whose chunks are not known here: the full
        // lists instead.
        Err(Unresolved::Copy) => {
            recipes = get_recipes(remote, digest, None)?;
            resolve(&recipes, known)
                .map_err(|e| bad_answer(&recipes_what(digest), &e.to_string()))?
        }
        Err(e) => return Err(bad_answer(&recipes_what(digest), &e.to_string())),
    };
    if recipes.manifest.is_empty() {
        let json = get_manifest(remote, digest)?;
        return Ok(Parts {
            json_checked: false,
            json,
            recipes: bodies,
        });
    }
    let size: u64 = recipes.manifest.iter().map(|c| u64::from(c.size)).sum();
    if size > Limits::FORMAT.max_manifest_bytes {
        return Err(bad_answer(
            &recipes_what(digest),
            "packet.json's chunks add up to more than the format's limit",
        ));
    }
    // The chunks of packet.json held here: the base's, then the cache's.
    let mut local = Local::default();
    if let Some(b) = base {
        let source = local.add(Source::Bytes(b.json.to_vec()), SourceKind::Manifest);
        for p in chunking::cut_bytes(b.json, &MANIFEST) {
            local.held.chunks.insert(
                p.name(),
                At {
                    source,
                    offset: p.offset,
                },
            );
        }
    }
    if let Some(cache) = cache {
        let names: Vec<ChunkName> = recipes
            .manifest
            .iter()
            .filter(|c| !local.held.chunks.contains_key(c))
            .copied()
            .collect();
        cache_chunks(cache, &names, &mut local);
    }
    let wanted = [Wanted {
        body: Body {
            sha256: *digest,
            size,
        },
        cut: Cut::Chunks(recipes.manifest.clone()),
        earlier: None,
    }];
    let plan = pull_plan::plan(&wanted, &local.held, BatchLimits::DEFAULT);
    let sink = Memory(Mutex::new(vec![0u8; size as usize]));
    let progress = Progress::new(true);
    // The chunks fetched are kept in the cache, as a body's are.
    let pack = match cache {
        Some(c) if plan.totals.fetch_chunks > 0 => Some(Mutex::new(
            c.lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .new_pack()?,
        )),
        _ => None,
    };
    let keep = |c: ChunkName, raw: &[u8]| -> Result<()> {
        match &pack {
            Some(p) => p
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .add(c.sha256, raw),
            None => Ok(()),
        }
    };
    let job = land::Job {
        wanted: &wanted,
        plan: &plan,
        sources: &local.sources,
        fetcher,
        packet_offsets: &[0],
        scan: None,
        sink: &sink,
        keep: Some(&keep),
        progress: &progress,
    };
    // packet.json is landed as a body named by the packet digest: its
    // bytes are checked against the packet's name as they come together.
    land::land(&job).map_err(|e| match e {
        CliError::Packet(_) => CliError::Packet(packet_core::Error::new(
            packet_core::ErrorCode::PacketDigestMismatch,
            format!("packet.json as the store's chunks make it does not hash to {digest}"),
        )),
        e => e,
    })?;
    if let (Some(pack), Some(cache)) = (pack, cache) {
        let pack = pack
            .into_inner()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        cache
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .keep(pack)?;
    }
    Ok(Parts {
        json: sink.0.into_inner().unwrap_or_default(),
        json_checked: true,
        recipes: bodies,
    })
}

fn recipes_what(digest: &Digest) -> String {
    format!("GET {}/recipes", super::packet_path(digest))
}

/// `GET …/recipes[?base=…]`, decoded.
fn get_recipes(remote: &Remote, digest: &Digest, base: Option<Digest>) -> Result<Recipes> {
    let mut path = format!("{}/recipes", super::packet_path(digest));
    if let Some(b) = base {
        path.push_str(&format!("?base={b}"));
    }
    let what = format!("GET {path}");
    let r = remote.get(&what, &path)?;
    if r.status().as_u16() != 200 {
        return Err(status_error(&what, r));
    }
    let limits = RecipeLimits::DEFAULT;
    let bytes = remote.read_body(&what, r, limits.max_bytes)?;
    Recipes::decode(&bytes, limits).map_err(|e| bad_answer(&what, &e.to_string()))
}

/// `GET /v1/packets/{digest}/manifest`: `packet.json` as the store keeps it.
fn get_manifest(remote: &Remote, digest: &Digest) -> Result<Vec<u8>> {
    let path = format!("{}/manifest", super::packet_path(digest));
    let what = format!("GET {path}");
    let r = remote.get_compressible(&what, &path)?;
    if r.status().as_u16() != 200 {
        return Err(status_error(&what, r));
    }
    remote.read_body(&what, r, Limits::FORMAT.max_manifest_bytes)
}

/// Why the body recipes do not resolve.
#[derive(Debug, PartialEq, Eq)]
enum Unresolved {
    /// A copy of a base body whose chunks are not known here.
    Copy,
    /// A copy past the end of the base body's chunks.
    Range(Digest),
    /// The chunks do not add up to the body.
    Size(Digest),
}

impl std::fmt::Display for Unresolved {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Unresolved::Copy => f.write_str("a recipe copies a base body whose chunks are unknown"),
            Unresolved::Range(d) => {
                write!(f, "the recipe of {d} copies chunks its base body lacks")
            }
            Unresolved::Size(d) => write!(f, "the recipe of {d} does not add up to its size"),
        }
    }
}

/// Every body recipe as a chunk list, copy runs taken from `known`.
fn resolve(
    recipes: &Recipes,
    known: &HashMap<Body, Vec<ChunkName>>,
) -> std::result::Result<HashMap<Body, Vec<ChunkName>>, Unresolved> {
    let mut out = HashMap::with_capacity(recipes.bodies.len());
    for r in &recipes.bodies {
        let mut chunks = Vec::with_capacity(r.runs.len());
        for run in &r.runs {
            match run {
                Run::Chunk(c) => chunks.push(*c),
                Run::Copy { body, first, count } => {
                    let list = known.get(body).ok_or(Unresolved::Copy)?;
                    let (first, count) = (*first as usize, *count as usize);
                    let part = first
                        .checked_add(count)
                        .and_then(|end| list.get(first..end))
                        .ok_or(Unresolved::Range(r.body.sha256))?;
                    chunks.extend_from_slice(part);
                }
            }
        }
        let total: u64 = chunks.iter().map(|c| u64::from(c.size)).sum();
        if total != r.body.size || chunks.is_empty() {
            return Err(Unresolved::Size(r.body.sha256));
        }
        out.insert(r.body, chunks);
    }
    Ok(out)
}

/// A body landed in memory.
struct Memory(Mutex<Vec<u8>>);

impl Sink for Memory {
    fn write(&self, _body: usize, offset: u64, bytes: &[u8]) -> Result<()> {
        let mut m = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let at = offset as usize;
        m.get_mut(at..at + bytes.len())
            .ok_or_else(|| CliError::Bug("a write past packet.json's end".into()))?
            .copy_from_slice(bytes);
        Ok(())
    }

    fn read_back(&self, _body: usize, offset: u64, buf: &mut [u8]) -> Result<()> {
        let m = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let at = offset as usize;
        buf.copy_from_slice(
            m.get(at..at + buf.len())
                .ok_or_else(|| CliError::Bug("a read past packet.json's end".into()))?,
        );
        Ok(())
    }
}

/// Adds the chunks of `names` the cache holds to `local`, one source per
/// pack (each pack opened, so that no eviction takes it meanwhile).
pub fn cache_chunks(cache: &Mutex<Cache>, names: &[ChunkName], local: &mut Local) {
    let by_sha: HashMap<Digest, ChunkName> = names.iter().map(|c| (c.sha256, *c)).collect();
    let want: HashSet<Digest> = by_sha.keys().copied().collect();
    let mut cache = cache
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let found = cache.find(&want);
    let mut packs: HashMap<usize, usize> = HashMap::new();
    for (sha, at) in found {
        let Some(&name) = by_sha.get(&sha) else {
            continue;
        };
        if at.size() != u64::from(name.size) {
            continue;
        }
        let source = match packs.get(&at.pack()) {
            Some(&s) => s,
            None => {
                let (file, _) = cache.file_of(&at);
                let Ok(file) = file else { continue };
                let s = local.add(Source::File(file), SourceKind::Cache);
                cache.mark_used(&at);
                packs.insert(at.pack(), s);
                s
            }
        };
        local.held.chunks.insert(
            name,
            At {
                source,
                offset: at.offset(),
            },
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pillbox_wire::recipes::BodyRecipe;

    fn name(tag: &str, size: u32) -> ChunkName {
        ChunkName {
            sha256: Digest::of(tag.as_bytes()),
            size,
        }
    }

    #[test]
    fn copy_runs_resolve_against_the_base_bodies_chunks() {
        let old = Body {
            sha256: Digest::of(b"old"),
            size: 900,
        };
        let new = Body {
            sha256: Digest::of(b"new"),
            size: 1000,
        };
        let old_chunks = vec![name("a", 300), name("b", 300), name("c", 300)];
        let recipes = Recipes {
            manifest: vec![],
            bodies: vec![BodyRecipe {
                body: new,
                runs: vec![
                    Run::Copy {
                        body: old,
                        first: 0,
                        count: 2,
                    },
                    Run::Chunk(name("d", 400)),
                ],
            }],
        };
        let known: HashMap<Body, Vec<ChunkName>> = [(old, old_chunks)].into();
        let got = resolve(&recipes, &known).unwrap();
        assert_eq!(
            got[&new],
            vec![name("a", 300), name("b", 300), name("d", 400)]
        );
        assert_eq!(resolve(&recipes, &HashMap::new()), Err(Unresolved::Copy));
        let mut past = recipes.clone();
        past.bodies[0].runs[0] = Run::Copy {
            body: old,
            first: 2,
            count: 2,
        };
        assert_eq!(resolve(&past, &known), Err(Unresolved::Range(new.sha256)));
        let mut short = recipes;
        short.bodies[0].runs.pop();
        assert_eq!(resolve(&short, &known), Err(Unresolved::Size(new.sha256)));
    }
}
