//! Delta pull (docs/transfer.md, "Delta pull"): a packet made on this
//! machine from what it already holds — a `--base` packet file, the chunk
//! cache, for a restore the workspace itself — and the chunks it lacks,
//! fetched several requests at once.
//!
//! [`DeltaPull::describe`] learns what the packet is made of (`parts`: its
//! `packet.json`, checked against a /2 packet's name, and its large bodies'
//! chunk lists); the caller says what this machine holds
//! ([`DeltaPull::add_bases`], [`DeltaPull::add_cache`], or its own places
//! in [`DeltaPull::local`]): these open and read the files, and what the
//! files give is decided from data alone in `pull_local`;
//! [`DeltaPull::plan`] asks `pull_plan` where each body comes from;
//! [`DeltaPull::land`] carries the plan out into the caller's sink
//! (`land`), and [`DeltaPull::verify`] is the gate: a /2
//! packet is accepted only by packet-core's [`Assembly`], once every body
//! is proven. [`pull_into_file`] writes the packet file this way.

use std::collections::HashMap;
use std::fs::File;
use std::io::{self, Read};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use packet_core::assembled::Assembly;
use packet_core::offsets::{Offsets, Piece as PacketPiece};
use packet_core::{
    Body, Digest, Event, Findings, Limits, Manifest, Reader, ReaderOptions, VerifiedPacket,
};
use pillbox_wire::recipes::ChunkName;
use serde::Serialize;

use super::bodies::RangeReader;
use super::fetch::Fetcher;
use super::land::{self, Landed, Sink, Source};
use super::packet_path;
use super::parts::{self, cache_chunks, KnownBase, Parts};
pub use super::pull_local::{Bodies, Local, SourceKind};
use super::pull_plan::{self, BatchLimits, Plan};
use super::Remote;
use crate::cache::{Cache, PackWriter};
use crate::chunking::{self, BODIES};
use crate::error::{CliError, Result};
use crate::packet_io::{self, CHUNK};
use crate::progress::Progress;

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
    /// Body bytes taken from the workspace being restored over (and its
    /// harness files).
    pub from_workspace_bytes: u64,
    /// Body bytes fetched from the store, as chunks or by `Range` (raw:
    /// before any compression on the wire; `packet.json`'s own chunks are
    /// not counted).
    pub fetched_bytes: u64,
    /// Body chunks fetched.
    pub chunks_fetched: u64,
    /// Of `fetched_bytes`, those read by `Range`: the new end of a log that
    /// grew, a body the store keeps whole.
    pub range_bytes: u64,
    /// Requests for chunks and byte ranges.
    pub fetch_requests: u64,
    /// The cache folder, or `null` with `--no-cache`.
    pub cache: Option<String>,
    /// Bytes the cache evicted after this pull.
    pub evicted_bytes: u64,
}

/// A delta pull being planned and carried out.
pub struct DeltaPull<'r> {
    fetcher: Fetcher<'r>,
    digest: Digest,
    /// `packet.json` and the recipes.
    pub parts: Parts,
    /// The manifest (checked by packet-core; for a /2 packet, against its
    /// name).
    pub manifest: Manifest,
    /// The /2 packet's verification in progress (`None` for /1).
    assembly: Option<Assembly>,
    /// The bodies.
    pub bodies: Bodies,
    /// What this machine holds.
    pub local: Local,
    cache: Option<Mutex<Cache>>,
    report: DeltaPullReport,
    /// Chunks and raw bytes of `packet.json` fetched.
    manifest_fetched: (u64, u64),
}

impl<'r> DeltaPull<'r> {
    /// Learns what packet `digest` is made of. `base` is the packet this
    /// machine last had (its manifest chunks are not fetched again);
    /// `cache` is the chunk cache, if any, and its folder.
    pub fn describe(
        remote: &'r Remote,
        digest: Digest,
        base: Option<&KnownBase<'_>>,
        cache: Option<(Cache, Option<PathBuf>)>,
    ) -> Result<DeltaPull<'r>> {
        let fetcher = Fetcher::new(remote, packet_path(&digest));
        let (cache, cache_dir) = match cache {
            Some((c, dir)) => (Some(Mutex::new(c)), dir),
            None => (None, None),
        };
        let parts = parts::fetch(&fetcher, &digest, base, cache.as_ref())?;
        let manifest_fetched = {
            use std::sync::atomic::Ordering::Relaxed;
            (
                fetcher.fetched.chunks.load(Relaxed),
                fetcher.fetched.bytes.load(Relaxed),
            )
        };
        let (manifest, assembly) = describe_manifest(&parts, digest)?;
        let bodies = Bodies::of(&manifest, &parts.recipes);
        let mut local = Local::default();
        if let Some(b) = base {
            // Its packet.json's bytes are a source of body chunks too (a
            // manifest chunk is never a body, but costs nothing to list).
            local.add(Source::Bytes(b.json.to_vec()), SourceKind::Manifest);
        }
        Ok(DeltaPull {
            fetcher,
            digest,
            parts,
            manifest,
            assembly,
            bodies,
            local,
            cache,
            report: DeltaPullReport {
                cache: cache_dir.map(|d| d.display().to_string()),
                ..DeltaPullReport::default()
            },
            manifest_fetched,
        })
    }

    /// Whether the packet is /2 (verified by [`DeltaPull::verify`]) rather
    /// than /1 (whose file must be read whole by packet-core's reader).
    pub fn is_assembled(&self) -> bool {
        self.assembly.is_some()
    }

    /// Bodies held whole and chunks of earlier versions in `--base` packet
    /// files (read at the offsets their own manifests give; a large body
    /// that changed is matched chunk by chunk against the body at the same
    /// path, cut the same way). A file that is not a packet is reported
    /// and left out.
    pub fn add_bases(&mut self, paths: &[PathBuf]) {
        for path in paths {
            let n = self.report.bases.len();
            match open_base(path) {
                Ok((file, m, offsets)) => {
                    let cuts_file = file.try_clone();
                    let source = self.local.add(Source::File(file), SourceKind::Base(n));
                    let versions = self.bodies.take_base(
                        &self.manifest,
                        &m,
                        &offsets,
                        source,
                        &mut self.local.held,
                    );
                    // The chunks of each earlier version, cut as the
                    // store cuts bodies.
                    for version in versions {
                        let Ok(f) = cuts_file.as_ref() else { continue };
                        let reader = RangeReader {
                            file: f,
                            at: version.at.offset,
                            end: version.at.offset + version.len,
                        };
                        if let Ok(cut) = chunking::cut(reader, &BODIES, path, |_, _| Ok(())) {
                            for p in cut.pieces {
                                self.local
                                    .held
                                    .chunks
                                    .entry(p.name())
                                    .or_insert(version.at.plus(p.offset));
                            }
                        }
                    }
                    self.report.bases.push(BaseReport {
                        path: path.display().to_string(),
                        usable: true,
                        used_bytes: 0,
                        error: None,
                    });
                }
                Err(reason) => self.report.bases.push(BaseReport {
                    path: path.display().to_string(),
                    usable: false,
                    used_bytes: 0,
                    error: Some(reason),
                }),
            }
        }
    }

    /// The chunks the cache holds, of those not held here yet.
    pub fn add_cache(&mut self) {
        let Some(cache) = &self.cache else { return };
        let names = self.bodies.unheld_chunks(&self.local.held);
        cache_chunks(cache, &names, &mut self.local);
    }

    /// Where each body comes from.
    pub fn plan(&self) -> Plan {
        pull_plan::plan(&self.bodies.wanted, &self.local.held, BatchLimits::DEFAULT)
    }

    /// Carries `plan` out into `sink`; `scan` as [`land::Job::scan`].
    /// Fetched chunks are also kept in the cache, when there is one.
    pub fn land(
        &self,
        plan: &Plan,
        sink: &dyn Sink,
        scan: Option<&[Vec<String>]>,
        progress: &Progress,
    ) -> Result<Landed> {
        let pack: Option<Mutex<PackWriter>> = match &self.cache {
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
        progress.phase(
            "fetch",
            self.bodies.wanted.iter().map(|w| w.body.size).sum(),
        );
        let job = land::Job {
            wanted: &self.bodies.wanted,
            plan,
            sources: &self.local.sources,
            fetcher: &self.fetcher,
            packet_offsets: &self.bodies.offsets,
            scan,
            sink,
            keep: Some(&keep),
            progress,
        };
        let landed = land::land(&job)?;
        if let (Some(pack), Some(cache)) = (pack, &self.cache) {
            let pack = pack
                .into_inner()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            if pack.len() > 0 {
                cache
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .keep(pack)?;
            }
        }
        Ok(landed)
    }

    /// The gate of a /2 packet: every body's proof given to packet-core's
    /// [`Assembly`], which accepts the packet only when each is proven:
    /// those `landed` hashed, and `stored`, bodies this machine's own
    /// store (a workspace its record vouches for, files hashed before)
    /// proved. `None` for a /1 packet (read whole by the caller).
    pub fn verify(
        &mut self,
        landed: &Landed,
        stored: &[Body],
        findings: Findings,
    ) -> Result<Option<VerifiedPacket>> {
        let Some(mut assembly) = self.assembly.take() else {
            return Ok(None);
        };
        for p in &landed.proofs {
            assembly.prove(*p);
        }
        for b in stored {
            assembly.prove(packet_core::assembled::Proof::stored(*b));
        }
        assembly
            .finish(findings)
            .map(Some)
            .map_err(CliError::Packet)
    }

    /// The report, with what `landed` read from where; the cache marks
    /// what it served as used and evicts.
    pub fn finish(mut self, landed: &Landed) -> Result<DeltaPullReport> {
        let tally = self.local.tally(&landed.read_from);
        for (b, bytes) in tally.bases {
            self.report.from_bases_bytes += bytes;
            if let Some(r) = self.report.bases.get_mut(b) {
                r.used_bytes += bytes;
            }
        }
        self.report.from_cache_bytes += tally.cache;
        self.report.from_workspace_bytes += tally.workspace;
        let fetched = &self.fetcher.fetched;
        use std::sync::atomic::Ordering::Relaxed;
        // Body bytes: packet.json's chunks are not counted, a range is.
        let (manifest_chunks, manifest_bytes) = self.manifest_fetched;
        self.report.range_bytes = fetched.range_bytes.load(Relaxed);
        self.report.fetched_bytes =
            fetched.bytes.load(Relaxed) - manifest_bytes + self.report.range_bytes;
        self.report.chunks_fetched = fetched.chunks.load(Relaxed) - manifest_chunks;
        self.report.fetch_requests = fetched.requests.load(Relaxed);
        if let Some(cache) = self.cache.take() {
            let mut cache = cache
                .into_inner()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            self.report.evicted_bytes = cache.finish()?.bytes;
        }
        Ok(self.report)
    }
}

/// The manifest of `parts`: a /2 packet's checked by packet-core's
/// [`Assembly`] against its name; a /1 packet's parsed (its file is read
/// whole, the digest with it).
pub(super) fn describe_manifest(
    parts: &Parts,
    digest: Digest,
) -> Result<(Manifest, Option<Assembly>)> {
    match Assembly::new(&parts.json, Some(digest), &Limits::FORMAT) {
        Ok(a) => Ok((a.manifest().clone(), Some(a))),
        Err(e) => {
            let manifest =
                Manifest::parse(&parts.json, &Limits::FORMAT).map_err(CliError::Packet)?;
            if manifest.format.named_by_manifest() || parts.json_checked {
                return Err(CliError::Packet(e));
            }
            Ok((manifest, None))
        }
    }
}

/// Reads a base's manifest (the start of the file, through packet-core's
/// reader) and where each body is in it.
fn open_base(path: &Path) -> std::result::Result<(File, Manifest, Vec<u64>), String> {
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
    Ok((file, manifest, offsets))
}

/// A packet file being written: each body at the data offsets of the
/// members that have it.
struct PacketFile<'f> {
    file: &'f File,
    label: &'f Path,
    /// Per wanted body, its members' data offsets.
    offsets: Vec<Vec<u64>>,
}

impl Sink for PacketFile<'_> {
    fn write(&self, body: usize, offset: u64, bytes: &[u8]) -> Result<()> {
        for &at in &self.offsets[body] {
            self.file
                .write_all_at(bytes, at + offset)
                .map_err(|e| CliError::io("write", self.label, e))?;
        }
        Ok(())
    }

    fn read_back(&self, body: usize, offset: u64, buf: &mut [u8]) -> Result<()> {
        self.file
            .read_exact_at(buf, self.offsets[body][0] + offset)
            .map_err(|e| CliError::io("read", self.label, e))
    }
}

/// Writes the bytes of `manifest`'s packet that are not bodies (headers,
/// `packet.json`, padding, the end marker) into `file`.
fn write_format_bytes(manifest: &Manifest, json: &[u8], file: &File, label: &Path) -> Result<()> {
    let offsets = Offsets::of(manifest);
    file.set_len(offsets.size())
        .map_err(|e| CliError::io("write", label, e))?;
    let mut buf = Vec::with_capacity(CHUNK);
    let mut buf_at = 0u64;
    let flush = |buf: &mut Vec<u8>, at: u64| -> Result<()> {
        if !buf.is_empty() {
            file.write_all_at(buf, at)
                .map_err(|e| CliError::io("write", label, e))?;
            buf.clear();
        }
        Ok(())
    };
    let mut at = 0u64;
    for piece in offsets.pieces(manifest, 0..offsets.size()) {
        let len = piece.len();
        match piece {
            PacketPiece::Fill(range) => {
                if buf.is_empty() {
                    buf_at = range.start;
                }
                offsets
                    .write_fill(manifest, range, &mut buf)
                    .map_err(|m| CliError::Bug(m.to_string()))?;
            }
            PacketPiece::Manifest(range) => {
                if buf.is_empty() {
                    buf_at = at;
                }
                buf.extend_from_slice(&json[range.start as usize..range.end as usize]);
            }
            PacketPiece::Body { .. } => flush(&mut buf, buf_at)?,
        }
        at += len;
        if buf.len() >= CHUNK {
            flush(&mut buf, buf_at)?;
        }
    }
    flush(&mut buf, buf_at)
}

/// A delta pull of `digest` into `file` (a new, empty file): the packet's
/// bytes, each body written where its members' data offsets say, then
/// verified — a /2 packet by its manifest and every body's proof as it
/// was written, a /1 packet by reading the file whole.
pub fn pull_into_file(
    remote: &Remote,
    digest: Digest,
    bases: &[PathBuf],
    cache: Option<(Cache, Option<PathBuf>)>,
    file: &File,
    label: &Path,
    progress: &Progress,
) -> Result<(Manifest, DeltaPullReport)> {
    let json = base_json(bases);
    let no_recipes = HashMap::new();
    let base = json.as_deref().map(|json| KnownBase {
        digest: None,
        json,
        recipes: &no_recipes,
    });
    let pull = DeltaPull::describe(remote, digest, base.as_ref(), cache)?;
    write_packet(pull, bases, file, label, progress)
}

/// `packet.json` of the first of `bases` that is a packet: the chunks of
/// the new `packet.json` it shares (all but those around what changed)
/// are not fetched.
pub fn base_json(bases: &[PathBuf]) -> Option<Vec<u8>> {
    bases.iter().find_map(|path| {
        let (file, manifest, _) = open_base(path).ok()?;
        let range = Offsets::of(&manifest).manifest_range();
        let mut json = vec![0u8; usize::try_from(range.end - range.start).ok()?];
        file.read_exact_at(&mut json, range.start).ok()?;
        Some(json)
    })
}

/// [`pull_into_file`] of a packet described already.
pub fn write_packet(
    mut pull: DeltaPull<'_>,
    bases: &[PathBuf],
    file: &File,
    label: &Path,
    progress: &Progress,
) -> Result<(Manifest, DeltaPullReport)> {
    let digest = pull.digest;
    pull.add_bases(bases);
    pull.add_cache();
    let plan = pull.plan();
    write_format_bytes(&pull.manifest, &pull.parts.json, file, label)?;
    let offsets = Offsets::of(&pull.manifest);
    let sink = PacketFile {
        file,
        label,
        offsets: pull
            .bodies
            .members
            .iter()
            .map(|ms| ms.iter().map(|&m| offsets.data_offsets()[m]).collect())
            .collect(),
    };
    let landed = pull.land(&plan, &sink, None, progress)?;
    if pull.verify(&landed, &[], Findings::default())?.is_none() {
        // A /1 packet is named by its whole file: read it whole.
        let options = ReaderOptions {
            expected_digest: Some(digest),
            ..ReaderOptions::default()
        };
        let reopened = file
            .try_clone()
            .map_err(|e| CliError::io("reopen", label, e))?;
        let source = WrittenFile {
            file: reopened,
            label: label.to_path_buf(),
        };
        progress.phase("verify", pull.manifest.packet_size());
        packet_io::read_packet(&source, options, progress, &mut |_| Ok(()))?;
    }
    let manifest = pull.manifest.clone();
    let report = pull.finish(&landed)?;
    Ok((manifest, report))
}

/// A packet file just written, read again from its start.
struct WrittenFile {
    file: File,
    label: PathBuf,
}

impl packet_io::PacketSource for WrittenFile {
    fn open_packet(&self) -> Result<Box<dyn Read + '_>> {
        Ok(Box::new(RangeReader {
            file: &self.file,
            at: 0,
            end: self.file.metadata().map(|m| m.len()).unwrap_or(0),
        }))
    }

    fn label(&self) -> String {
        self.label.display().to_string()
    }

    fn size_hint(&self) -> Option<u64> {
        self.file.metadata().ok().map(|m| m.len())
    }
}
