//! Delta pull (docs/transfer.md, "Delta pull"): the packet is rebuilt on
//! this machine from its manifest, with every body taken from where it
//! already is — a `--base` packet file (read at the offsets its manifest
//! gives), the local chunk cache — and the rest fetched as chunks, in
//! batches. Every piece is checked against its sha256 as it is read, and
//! the rebuilt packet against the digest asked for.
//!
//! [`plan`] decides where each body's bytes come from and fetches what is
//! missing into the cache; [`Rebuilt`] then streams the packet's bytes
//! (packet-core's writer over the manifest), to a file (`pull`) or
//! straight into unpack's reader (`restore`).

use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::io::{self, Read};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use packet_core::offsets::Offsets;
use packet_core::{Digest, Event, Hasher, Limits, Manifest, Reader, ReaderOptions};
use packet_core::{Step, Writer, WriterOptions};
use pillbox_wire::chunking::MAX_CHUNK;
use pillbox_wire::chunks::{BatchLimits, Decoded, Decoder};
use pillbox_wire::recipes::{RecipeLimits, Recipes, Run};
use pillbox_wire::ChunkRequest;
use serde::Serialize;

use super::bodies::RangeReader;
use super::client::{bad_answer, status_error, Remote};
use super::packet_path;
use crate::cache::{Cache, Location, PackWriter};
use crate::chunking::{self, BODIES};
use crate::compress;
use crate::error::{CliError, Refused, Result};
use crate::packet_io::{PacketSource, CHUNK};
use crate::progress::Progress;

/// Chunks asked for in one `POST …/chunks` (the store's limit is 65,536).
const CHUNKS_PER_REQUEST: usize = 16_384;

/// Chunk bytes asked for in one request (the store's limit is 64 MiB).
const BYTES_PER_REQUEST: u64 = 32 << 20;

/// A base packet named with `--base`, as the report shows it.
#[derive(Debug, Serialize)]
pub struct BaseReport {
    /// The file.
    pub path: String,
    /// Whether it could be read as a packet (if not, `error` says why and
    /// it was left out).
    pub usable: bool,
    /// Body bytes taken from it.
    pub used_bytes: u64,
    /// Why it was left out.
    pub error: Option<String>,
}

/// Where a delta pull's bytes came from (`delta` in
/// `pillbox.checkpoint.pull/1` and `pillbox.checkpoint.restore/1`).
#[derive(Debug, Default, Serialize)]
pub struct DeltaPullReport {
    /// The `--base` packets.
    pub bases: Vec<BaseReport>,
    /// Body bytes taken from the bases.
    pub from_bases_bytes: u64,
    /// Body bytes taken from the cache.
    pub from_cache_bytes: u64,
    /// Chunk bytes fetched from the store (before any compression on the wire).
    pub fetched_bytes: u64,
    /// Chunks fetched.
    pub chunks_fetched: u64,
    /// Requests for chunks (and, for a body the store has no recipe for, byte ranges).
    pub fetch_requests: u64,
    /// The cache folder, or `null` with `--no-cache`.
    pub cache: Option<String>,
    /// Bytes the cache evicted after this pull.
    pub evicted_bytes: u64,
}

/// A base packet open for reading.
struct Base {
    path: PathBuf,
    file: File,
    /// Its entry in the report.
    report: usize,
}

/// Where a piece of a body is.
#[derive(Clone, Debug)]
enum Place {
    /// In base `base`'s file at this offset.
    Base { base: usize, offset: u64 },
    /// In the cache.
    Cache(Location),
    /// In a pack this pull fetched.
    Fetched(Location),
    /// Not here: to fetch.
    Remote,
}

/// A piece of a body: a chunk (checked as it is read), or a whole large
/// body with no recipe, checked before the rebuild and streamed.
#[derive(Clone, Debug)]
struct Piece {
    sha256: Digest,
    size: u64,
    place: Place,
    /// A whole body already verified at `place` (read in blocks, not held).
    verified: bool,
    /// A body over 1 MiB the store has no recipe for (a packet it keeps
    /// whole): one piece, read by range.
    unchunked: bool,
}

/// Every body's pieces, by body sha256.
pub struct Plan {
    manifest: Manifest,
    pieces: HashMap<Digest, Vec<Piece>>,
    bases: Vec<Base>,
    cache: RefCell<Cache>,
    report: RefCell<DeltaPullReport>,
    /// `/v1/packets/<digest>`.
    path: String,
    /// Why the rebuild stopped, when it did (a reader sees an I/O error).
    failure: RefCell<Option<CliError>>,
}

/// Reads a base's manifest (the start of the file, through packet-core's
/// reader) and where each body is in it.
fn open_base(path: &Path) -> std::result::Result<(Base, Manifest, Vec<u64>), String> {
    let mut file = File::open(path).map_err(|e| e.to_string())?;
    let mut reader = Reader::new(ReaderOptions::default());
    let mut buf = vec![0u8; CHUNK];
    let mut manifest = None;
    while manifest.is_none() {
        let n = match file.read(&mut buf) {
            Ok(0) => return Err("it ends before its packet.json does".into()),
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e.to_string()),
        };
        reader
            .feed_with(&buf[..n], |e| {
                if let Event::Manifest(m) = e {
                    manifest = Some(m.clone());
                }
                Ok::<(), packet_core::Error>(())
            })
            .map_err(|e| format!("{} ({})", e.message(), e.code().as_str()))?;
    }
    let manifest = manifest.ok_or("no packet.json")?;
    let len = file.metadata().map_err(|e| e.to_string())?.len();
    if len != manifest.packet_size() {
        return Err(format!(
            "it is {len} bytes, its manifest says {}",
            manifest.packet_size()
        ));
    }
    let offsets = Offsets::of(&manifest).data_offsets().to_vec();
    Ok((
        Base {
            path: path.to_path_buf(),
            file,
            report: 0,
        },
        manifest,
        offsets,
    ))
}

/// `GET /v1/packets/{digest}/manifest`: the packet's manifest, parsed and
/// checked by packet-core.
fn fetch_manifest(remote: &Remote, digest: &Digest) -> Result<Manifest> {
    let path = format!("{}/manifest", packet_path(digest));
    let what = format!("GET {path}");
    let r = remote.get_compressible(&what, &path)?;
    if r.status().as_u16() != 200 {
        return Err(status_error(&what, r));
    }
    let bytes = remote.read_body(&what, r, Limits::FORMAT.max_manifest_bytes)?;
    Manifest::parse(&bytes, &Limits::FORMAT).map_err(CliError::Packet)
}

/// `GET /v1/packets/{digest}/recipes` (binary, no base: every run names a
/// chunk): body sha256 → its chunks.
fn fetch_recipes(remote: &Remote, digest: &Digest) -> Result<HashMap<Digest, Vec<(Digest, u32)>>> {
    let path = format!("{}/recipes", packet_path(digest));
    let what = format!("GET {path}");
    let r = remote.get(&what, &path)?;
    if r.status().as_u16() != 200 {
        return Err(status_error(&what, r));
    }
    let limits = RecipeLimits::DEFAULT;
    let bytes = remote.read_body(&what, r, limits.max_bytes)?;
    let recipes = Recipes::decode(&bytes, limits).map_err(|e| bad_answer(&what, &e.to_string()))?;
    let mut out = HashMap::new();
    for r in recipes.bodies {
        let mut chunks = Vec::with_capacity(r.runs.len());
        for run in &r.runs {
            match run {
                Run::Chunk(c) => chunks.push((c.sha256, c.size)),
                Run::Copy { .. } => {
                    return Err(bad_answer(
                        &what,
                        &format!("the recipe of {} copies a base no one named", r.body.sha256),
                    ))
                }
            }
        }
        let total: u64 = chunks.iter().map(|(_, s)| u64::from(*s)).sum();
        if total != r.body.size {
            return Err(bad_answer(
                &what,
                &format!("the recipe of {} does not add up", r.body.sha256),
            ));
        }
        out.insert(r.body.sha256, chunks);
    }
    Ok(out)
}

/// Plans a delta pull of `digest`: the manifest, where each body's bytes
/// are, and the missing chunks fetched into `cache`.
pub fn plan(
    remote: &Remote,
    digest: &Digest,
    base_paths: &[PathBuf],
    mut cache: Cache,
    cache_dir: Option<&Path>,
    progress: &Progress,
) -> Result<Plan> {
    let manifest = fetch_manifest(remote, digest)?;
    let mut report = DeltaPullReport {
        cache: cache_dir.map(|d| d.display().to_string()),
        ..DeltaPullReport::default()
    };
    // The bases: every body each holds, and where.
    let mut bases = Vec::new();
    let mut in_base: HashMap<Digest, (usize, u64)> = HashMap::new();
    let mut base_large: Vec<(usize, String, u64, u64)> = Vec::new();
    for path in base_paths {
        match open_base(path) {
            Ok((mut base, m, offsets)) => {
                let b = bases.len();
                base.report = report.bases.len();
                for (member, &at) in m.members.iter().zip(&offsets) {
                    if let Some(d) = member.sha256().filter(|_| member.size() > 0) {
                        in_base.entry(d).or_insert((b, at));
                        if !BODIES.is_one_chunk(member.size()) {
                            base_large.push((b, member.path.clone(), at, member.size()));
                        }
                    }
                }
                bases.push(base);
                report.bases.push(BaseReport {
                    path: path.display().to_string(),
                    usable: true,
                    used_bytes: 0,
                    error: None,
                });
            }
            Err(reason) => report.bases.push(BaseReport {
                path: path.display().to_string(),
                usable: false,
                used_bytes: 0,
                error: Some(reason),
            }),
        }
    }
    // The distinct bodies, in packet order.
    let mut bodies: Vec<(Digest, u64, String)> = Vec::new();
    let mut seen = HashSet::new();
    for m in &manifest.members {
        if let Some(d) = m.sha256().filter(|_| m.size() > 0) {
            if seen.insert(d) {
                bodies.push((d, m.size(), m.path.clone()));
            }
        }
    }
    let recipes = if bodies.iter().any(|(_, s, _)| !BODIES.is_one_chunk(*s)) {
        fetch_recipes(remote, digest)?
    } else {
        HashMap::new()
    };
    // First the pieces as chunks (or whole bodies), with the places known
    // without reading anything.
    let mut pieces: HashMap<Digest, Vec<Piece>> = HashMap::new();
    for (sha, size, _) in &bodies {
        let base = in_base.get(sha).copied();
        let list = match recipes.get(sha) {
            Some(chunks) => {
                let mut at = 0u64;
                chunks
                    .iter()
                    .map(|&(c, s)| {
                        let place = match base {
                            Some((b, offset)) => Place::Base {
                                base: b,
                                offset: offset + at,
                            },
                            None => Place::Remote,
                        };
                        at += u64::from(s);
                        Piece {
                            sha256: c,
                            size: u64::from(s),
                            place,
                            verified: false,
                            unchunked: false,
                        }
                    })
                    .collect()
            }
            None => vec![Piece {
                sha256: *sha,
                size: *size,
                place: match base {
                    Some((b, offset)) => Place::Base { base: b, offset },
                    None => Place::Remote,
                },
                // A body without a recipe is one chunk when it can be (at
                // most 1 MiB); a larger one (a packet the store keeps
                // whole) is checked whole, below, or fetched by range.
                verified: false,
                unchunked: *size > u64::from(MAX_CHUNK),
            }],
        };
        pieces.insert(*sha, list);
    }
    // Chunks of large bodies that changed: cut the base's file of the same
    // path, whose unchanged stretches give the same chunks.
    let wanted_large: HashSet<&str> = bodies
        .iter()
        .filter(|(sha, s, _)| {
            !BODIES.is_one_chunk(*s)
                && recipes.contains_key(sha)
                && pieces[sha].iter().any(|p| matches!(p.place, Place::Remote))
        })
        .map(|(_, _, p)| p.as_str())
        .collect();
    let mut cut_chunks: HashMap<Digest, (usize, u64)> = HashMap::new();
    for (b, path, at, size) in &base_large {
        if !wanted_large.contains(path.as_str()) {
            continue;
        }
        let reader = RangeReader {
            file: &bases[*b].file,
            at: *at,
            end: at + size,
        };
        if let Ok(cut) = chunking::cut(reader, &BODIES, &bases[*b].path, |_, _| Ok(())) {
            for p in cut.pieces {
                cut_chunks.entry(p.sha256).or_insert((*b, at + p.offset));
            }
        }
    }
    for list in pieces.values_mut() {
        for p in list.iter_mut() {
            if matches!(p.place, Place::Remote) {
                if let Some(&(base, offset)) = cut_chunks.get(&p.sha256) {
                    p.place = Place::Base { base, offset };
                }
            }
        }
    }
    // Then the cache, for what is still remote.
    let still: HashSet<Digest> = pieces
        .values()
        .flatten()
        .filter(|p| matches!(p.place, Place::Remote) && !p.unchunked)
        .map(|p| p.sha256)
        .collect();
    let found = cache.find(&still);
    for list in pieces.values_mut() {
        for p in list.iter_mut() {
            if matches!(p.place, Place::Remote) {
                if let Some(at) = found.get(&p.sha256) {
                    p.place = Place::Cache(*at);
                }
            }
        }
    }
    let mut plan = Plan {
        manifest,
        pieces,
        bases,
        cache: RefCell::new(cache),
        report: RefCell::new(report),
        path: packet_path(digest),
        failure: RefCell::new(None),
    };
    plan.check_whole_bodies(remote, progress)?;
    plan.fetch_missing(remote, progress)?;
    Ok(plan)
}

impl Plan {
    /// The manifest (from the store, checked by packet-core).
    pub fn manifest(&self) -> &Manifest {
        &self.manifest
    }

    /// The figures, once the rebuild is done.
    pub fn into_report(self) -> Result<DeltaPullReport> {
        let mut report = self.report.into_inner();
        let evicted = self.cache.into_inner().finish()?;
        report.evicted_bytes = evicted.bytes;
        Ok(report)
    }

    /// Large bodies without a recipe (a packet the store keeps whole) are
    /// one piece: hashed in the base now (a body that does not hash right
    /// is fetched instead), or fetched by range into the cache folder.
    fn check_whole_bodies(&mut self, remote: &Remote, progress: &Progress) -> Result<()> {
        let offsets = Offsets::of(&self.manifest);
        let mut body_at: HashMap<Digest, u64> = HashMap::new();
        for (m, &at) in self.manifest.members.iter().zip(offsets.data_offsets()) {
            if let Some(d) = m.sha256() {
                body_at.entry(d).or_insert(at);
            }
        }
        for list in self.pieces.values_mut() {
            let [p] = list.as_mut_slice() else { continue };
            if !p.unchunked {
                continue;
            }
            if let Place::Base { base, offset } = p.place {
                let b = &self.bases[base];
                if hash_range(&b.file, offset, p.size).ok() == Some(p.sha256) {
                    p.verified = true;
                    continue;
                }
                p.place = Place::Remote;
            }
            if matches!(p.place, Place::Remote) {
                let at = body_at.get(&p.sha256).copied().unwrap_or(0);
                let loc = fetch_range(
                    remote,
                    &self.path,
                    &mut self.cache.borrow_mut(),
                    at,
                    p.size,
                    &p.sha256,
                    progress,
                )?;
                let mut r = self.report.borrow_mut();
                r.fetch_requests += 1;
                r.fetched_bytes += p.size;
                p.place = Place::Fetched(loc);
                p.verified = true;
            }
        }
        Ok(())
    }

    /// Fetches every chunk still remote, in batches, into new cache packs.
    fn fetch_missing(&mut self, remote: &Remote, progress: &Progress) -> Result<()> {
        let mut order: Vec<(Digest, u64)> = Vec::new();
        let mut seen = HashSet::new();
        // Packet order: the bodies as the manifest lists them.
        for m in &self.manifest.members {
            let Some(list) = m.sha256().and_then(|d| self.pieces.get(&d)) else {
                continue;
            };
            for p in list {
                if matches!(p.place, Place::Remote) && seen.insert(p.sha256) {
                    order.push((p.sha256, p.size));
                }
            }
        }
        progress.phase("fetch", order.iter().map(|(_, s)| s).sum());
        let mut fetched: HashMap<Digest, Location> = HashMap::new();
        let mut start = 0;
        while start < order.len() {
            let mut end = start;
            let mut bytes = 0;
            while end < order.len()
                && end - start < CHUNKS_PER_REQUEST
                && (end == start || bytes + order[end].1 <= BYTES_PER_REQUEST)
            {
                bytes += order[end].1;
                end += 1;
            }
            let batch: Vec<Digest> = order[start..end].iter().map(|(d, _)| *d).collect();
            let got = fetch_chunks(
                remote,
                &self.path,
                &mut self.cache.borrow_mut(),
                &batch,
                progress,
            )?;
            {
                let mut r = self.report.borrow_mut();
                r.chunks_fetched += batch.len() as u64;
                r.fetched_bytes += bytes;
                r.fetch_requests += got.requests;
            }
            fetched.extend(got.locations);
            start = end;
        }
        for list in self.pieces.values_mut() {
            for p in list.iter_mut() {
                if matches!(p.place, Place::Remote) {
                    match fetched.get(&p.sha256) {
                        Some(at) => p.place = Place::Fetched(*at),
                        None => {
                            return Err(Refused::ChunkNotServed {
                                sha256: p.sha256.hex().to_string(),
                            }
                            .into())
                        }
                    }
                }
            }
        }
        Ok(())
    }
}

/// The sha256 of `len` bytes of `file` from `offset`.
fn hash_range(file: &File, offset: u64, len: u64) -> io::Result<Digest> {
    let mut h = Hasher::new();
    let mut buf = vec![0u8; CHUNK];
    let mut done = 0;
    while done < len {
        let n = (len - done).min(CHUNK as u64) as usize;
        file.read_exact_at(&mut buf[..n], offset + done)?;
        h.update(&buf[..n]);
        done += n as u64;
    }
    Ok(h.finish())
}

struct Fetched {
    locations: HashMap<Digest, Location>,
    requests: u64,
}

/// `POST /v1/packets/{digest}/chunks` for `wanted` (each frame decoded,
/// bounded by its raw size, and hashed against its name), into a new
/// cache pack; a connection lost mid-answer asks again for the chunks not
/// yet received.
fn fetch_chunks(
    remote: &Remote,
    packet: &str,
    cache: &mut Cache,
    wanted: &[Digest],
    progress: &Progress,
) -> Result<Fetched> {
    let path = format!("{packet}/chunks");
    let what = format!("POST {path}");
    let mut locations = HashMap::new();
    let mut requests = 0;
    let mut attempt = 1;
    let mut left: Vec<Digest> = wanted.to_vec();
    while !left.is_empty() {
        let body = ChunkRequest {
            chunks: left.iter().map(|d| d.hex().to_string()).collect(),
        };
        let json = serde_json::to_vec(&body).unwrap_or_default();
        requests += 1;
        let r = remote.send_bytes(&what, "POST", &path, "application/json", &json, &[])?;
        if r.status().as_u16() != 200 {
            return Err(status_error(&what, r));
        }
        let mut pack = cache.new_pack()?;
        let outcome = read_batch(remote.body_reader(r), &left, &mut pack, progress);
        let got = cache.keep(pack)?;
        let received: HashSet<Digest> = got.iter().map(|(d, _)| *d).collect();
        locations.extend(got);
        left.retain(|d| !received.contains(d));
        match outcome {
            Ok(()) if left.is_empty() => break,
            Ok(()) => {
                return Err(Refused::ChunkNotServed {
                    sha256: left[0].hex().to_string(),
                }
                .into())
            }
            Err(BatchRead::Refused(e)) => return Err(e),
            Err(BatchRead::Lost(e)) => match remote.retry().delay_after(attempt) {
                Some(delay) => {
                    std::thread::sleep(delay);
                    remote.traffic().add_retry();
                    attempt += 1;
                }
                None => return Err(super::client::unreachable_error(&what, remote.base(), &e)),
            },
        }
    }
    Ok(Fetched {
        locations,
        requests,
    })
}

enum BatchRead {
    /// The store's answer is not the batch asked for.
    Refused(CliError),
    /// The connection was lost: what arrived is kept.
    Lost(String),
}

/// Reads a chunk batch answer, writing each complete frame, decoded and
/// checked, into `pack`. The frames must be `wanted`, in order.
fn read_batch(
    mut body: Box<dyn Read + Send + '_>,
    wanted: &[Digest],
    pack: &mut PackWriter,
    progress: &Progress,
) -> std::result::Result<(), BatchRead> {
    let what = "the chunks answer";
    let mut decoder = Decoder::new(BatchLimits::DOWNLOAD);
    let mut frame: Vec<u8> = Vec::new();
    let mut buf = vec![0u8; 256 << 10];
    loop {
        let n = match body.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(BatchRead::Lost(e.to_string())),
        };
        let mut input = &buf[..n];
        loop {
            let (decoded, used) = decoder
                .decode(input)
                .map_err(|e| BatchRead::Refused(bad_answer(what, &e.to_string())))?;
            input = &input[used..];
            match decoded {
                Decoded::NeedInput | Decoded::Done => break,
                Decoded::Table => {
                    let t = decoder.table();
                    if t.len() != wanted.len() || t.iter().zip(wanted).any(|(f, w)| f.sha256 != *w)
                    {
                        return Err(BatchRead::Refused(bad_answer(
                            what,
                            "not the chunks asked for, in order",
                        )));
                    }
                }
                Decoded::Data { index, bytes, last } => {
                    frame.extend_from_slice(bytes);
                    if last {
                        // The store names each frame; decoded, its bytes
                        // must be exactly its raw size and hash to its name.
                        let entry = decoder.table()[index];
                        let raw = compress::unframe(&entry, std::mem::take(&mut frame))
                            .map_err(|e| BatchRead::Refused(bad_answer(what, &e)))?;
                        pack.add(wanted[index], &raw).map_err(BatchRead::Refused)?;
                        progress.inc(raw.len() as u64);
                    }
                }
            }
            if input.is_empty() {
                break;
            }
        }
    }
    decoder.finish().map_err(|e| BatchRead::Lost(e.to_string()))
}

/// A body with no recipe, fetched by `Range` from the whole packet into a
/// new cache pack (hashed as it arrives).
fn fetch_range(
    remote: &Remote,
    packet: &str,
    cache: &mut Cache,
    offset: u64,
    size: u64,
    sha256: &Digest,
    progress: &Progress,
) -> Result<Location> {
    let what = format!("GET {packet} (a body's bytes)");
    let end = offset + size - 1;
    let r = remote.get_range(&what, packet, offset, end)?;
    if r.status().as_u16() != 206 {
        return Err(status_error(&what, r));
    }
    let mut pack = cache.new_pack()?;
    let mut body = remote.body_reader(r);
    let mut h = Hasher::new();
    let mut buf = vec![0u8; CHUNK];
    loop {
        let n = body
            .read(&mut buf)
            .map_err(|e| super::client::unreachable_error(&what, remote.base(), &e.to_string()))?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
        pack.append(&buf[..n])?;
        progress.inc(n as u64);
    }
    if pack.len() != size || h.finish() != *sha256 {
        return Err(bad_answer(
            &what,
            "the body's bytes do not hash to its sha256",
        ));
    }
    pack.name(*sha256, 0, size);
    let kept = cache.keep(pack)?;
    kept.into_iter()
        .map(|(_, at)| at)
        .next()
        .ok_or_else(|| CliError::Bug("a kept pack lost its body".into()))
}

/// The packet's bytes, rebuilt from a [`Plan`] by packet-core's writer.
pub struct Rebuilt<'p> {
    plan: &'p Plan,
    remote: &'p Remote,
    writer: Writer<'p>,
    out: Vec<u8>,
    at: usize,
    done: Option<Option<Digest>>,
}

impl<'p> Rebuilt<'p> {
    /// A stream of the packet's bytes. With `hash`, the writer hashes the
    /// packet (see [`Rebuilt::digest`]); unpack's reader hashes it itself.
    pub fn new(plan: &'p Plan, remote: &'p Remote, hash: bool) -> Rebuilt<'p> {
        let writer = Writer::with_options(
            &plan.manifest,
            WriterOptions {
                packet_digest: hash,
                // Every piece is checked against its sha256 as it is read.
                verify_bodies: false,
            },
        );
        Rebuilt {
            plan,
            remote,
            writer,
            out: Vec::with_capacity(2 * CHUNK),
            at: 0,
            done: None,
        }
    }

    /// The packet's digest once every byte was read (with `hash`).
    pub fn digest(&self) -> Option<Digest> {
        self.done.flatten()
    }

    /// Refills `out` with the next bytes of the packet.
    fn refill(&mut self) -> Result<()> {
        self.out.clear();
        self.at = 0;
        while self.out.len() < CHUNK && self.done.is_none() {
            match self.writer.next().map_err(CliError::unpackable)? {
                Step::Bytes(b) => self.out.extend_from_slice(b),
                Step::Body { index, .. } => {
                    let sha = self.plan.manifest.members[index]
                        .sha256()
                        .ok_or_else(|| CliError::Bug("a body without a sha256".into()))?;
                    let pieces = self
                        .plan
                        .pieces
                        .get(&sha)
                        .ok_or_else(|| CliError::Bug("a body with no plan".into()))?;
                    for p in pieces {
                        self.emit(p)?;
                    }
                }
                Step::Done(d) => self.done = Some(d),
            }
        }
        Ok(())
    }

    /// Appends one piece's bytes, checked, to `out` and the writer.
    fn emit(&mut self, p: &Piece) -> Result<()> {
        if p.verified {
            return self.stream_verified(p);
        }
        let bytes = self.read_checked(p)?;
        self.writer.body(&bytes).map_err(CliError::unpackable)?;
        self.out.extend_from_slice(&bytes);
        Ok(())
    }

    /// A chunk's bytes from its place, checked; a place whose bytes do not
    /// hash right is passed over for the store.
    fn read_checked(&mut self, p: &Piece) -> Result<Vec<u8>> {
        let plan = self.plan;
        let local = match &p.place {
            Place::Base { base, offset } => {
                let mut buf = vec![0u8; p.size as usize];
                let b = &plan.bases[*base];
                let ok =
                    b.file.read_exact_at(&mut buf, *offset).is_ok() && Digest::of(&buf) == p.sha256;
                if ok {
                    plan.report.borrow_mut().bases[base_report_index(plan, *base)].used_bytes +=
                        p.size;
                    plan.report.borrow_mut().from_bases_bytes += p.size;
                }
                ok.then_some(buf)
            }
            Place::Cache(at) => {
                let got = plan.cache.borrow_mut().read(at, &p.sha256);
                if got.is_some() {
                    plan.report.borrow_mut().from_cache_bytes += p.size;
                }
                got
            }
            Place::Fetched(at) => plan.cache.borrow_mut().read(at, &p.sha256),
            Place::Remote => None,
        };
        if let Some(bytes) = local {
            return Ok(bytes);
        }
        // Not as recorded: fetch this one chunk now.
        let got = fetch_chunks(
            self.remote,
            &plan.path,
            &mut plan.cache.borrow_mut(),
            &[p.sha256],
            &Progress::new(true),
        )?;
        {
            let mut r = plan.report.borrow_mut();
            r.chunks_fetched += 1;
            r.fetched_bytes += p.size;
            r.fetch_requests += got.requests;
        }
        let at = got
            .locations
            .get(&p.sha256)
            .copied()
            .ok_or_else(|| Refused::ChunkNotServed {
                sha256: p.sha256.hex().to_string(),
            })?;
        plan.cache.borrow_mut().read(&at, &p.sha256).ok_or_else(|| {
            Refused::ChunkNotServed {
                sha256: p.sha256.hex().to_string(),
            }
            .into()
        })
    }

    /// A whole body verified before the rebuild, streamed in blocks.
    fn stream_verified(&mut self, p: &Piece) -> Result<()> {
        let plan = self.plan;
        let (file, offset, label) = match &p.place {
            Place::Base { base, offset } => {
                let b = &plan.bases[*base];
                plan.report.borrow_mut().bases[base_report_index(plan, *base)].used_bytes += p.size;
                plan.report.borrow_mut().from_bases_bytes += p.size;
                (b.file.try_clone(), *offset, b.path.clone())
            }
            Place::Cache(at) | Place::Fetched(at) => {
                if matches!(p.place, Place::Cache(_)) {
                    plan.report.borrow_mut().from_cache_bytes += p.size;
                }
                let cache = plan.cache.borrow();
                let (f, o) = cache.file_of(at);
                (f, o, PathBuf::from("the chunk cache"))
            }
            Place::Remote => return Err(CliError::Bug("a verified body with no place".into())),
        };
        let file = file.map_err(|e| CliError::io("reopen", &label, e))?;
        let mut done = 0u64;
        let mut buf = vec![0u8; CHUNK];
        while done < p.size {
            let n = (p.size - done).min(CHUNK as u64) as usize;
            file.read_exact_at(&mut buf[..n], offset + done)
                .map_err(|e| CliError::io("read", &label, e))?;
            self.writer.body(&buf[..n]).map_err(CliError::unpackable)?;
            self.out.extend_from_slice(&buf[..n]);
            done += n as u64;
        }
        Ok(())
    }
}

/// The report entry of base `base`.
fn base_report_index(plan: &Plan, base: usize) -> usize {
    plan.bases[base].report
}

impl Read for Rebuilt<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.at == self.out.len() {
            if self.done.is_some() {
                return Ok(0);
            }
            if let Err(e) = self.refill() {
                let message = e.report().details.message.into_owned();
                *self.plan.failure.borrow_mut() = Some(e);
                return Err(io::Error::other(message));
            }
        }
        let n = buf.len().min(self.out.len() - self.at);
        buf[..n].copy_from_slice(&self.out[self.at..self.at + n]);
        self.at += n;
        Ok(n)
    }
}

/// A plan as unpack's packet source: the packet streams straight from the
/// rebuild into unpack's reader, which verifies it as usual.
pub struct RebuiltSource<'p> {
    plan: &'p Plan,
    remote: &'p Remote,
    opened: std::cell::Cell<bool>,
}

impl<'p> RebuiltSource<'p> {
    /// The packet `plan` rebuilds.
    pub fn new(plan: &'p Plan, remote: &'p Remote) -> RebuiltSource<'p> {
        RebuiltSource {
            plan,
            remote,
            opened: std::cell::Cell::new(false),
        }
    }
}

impl PacketSource for RebuiltSource<'_> {
    fn open_packet(&self) -> Result<Box<dyn Read + '_>> {
        if self.opened.replace(true) {
            return Err(Refused::DownloadReadTwice {}.into());
        }
        Ok(Box::new(Rebuilt::new(self.plan, self.remote, false)))
    }

    fn label(&self) -> String {
        format!("{}{}", self.remote.base(), self.plan.path)
    }

    fn size_hint(&self) -> Option<u64> {
        Some(self.plan.manifest.packet_size())
    }
}

impl Plan {
    /// The error that stopped a rebuild, which its reader saw only as an
    /// I/O error.
    pub fn take_failure(&self) -> Option<CliError> {
        self.failure.borrow_mut().take()
    }
}
