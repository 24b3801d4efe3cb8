//! Packing straight into a file, in two phases, reading each small file
//! once.
//!
//! Every member's size is known from the walk and every sha256 is written
//! as 64 hex digits, so the manifest's length, and with it every member's
//! offset, is known before any file is read. packet-core's [`Writer`],
//! driven over the manifest with placeholder digests (bodies not fed),
//! gives every header and offset.
//!
//! Phase 1, on every core: each small file is read once, straight into its
//! place among its neighbours' headers, hashed, run through packet-core's
//! secret detector, and written at its offset in a temporary file beside
//! the output; each large file is hashed and run through the detector in
//! the same read (its stamp is kept). The manifest's rules are checked
//! meanwhile on a thread of their own ([`Manifest::assemble`], then
//! [`Manifest::validate`]): a packet that breaks one is never kept. Nor is
//! a packet holding a secret the caller does not accept
//! ([`Packed::Blocked`]), which is known before phase 2 starts.
//!
//! Phase 2: the manifest, now complete, is written at the start, and each
//! large file is copied into place, refusing one that is not, unchanged,
//! the file phase 1 hashed (see `Stamp::check`). A packet is named by its
//! manifest (docs/session-packet.md §9), which lists every body's digest
//! and determines every other byte: nothing else is hashed.
//!
//! [`pack_into_file`] runs the steps in order: [`members_to_lay_out`],
//! [`phase_one`], [`fill_in_digests`], [`phase_two`], [`keep_as`]. The
//! bytes are those the streaming writer produces (tests compare the two).

use std::collections::BTreeMap;
use std::fs::{self, File};
use std::io::{self, Read};
use std::os::unix::fs::{FileExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex};

use packet_core::secrets::{Finding, Scanner};
use packet_core::{
    write_manifest_member, Digest, Exclusion, Harness, Kind, Limits, Manifest, Member, Sink, Step,
    Writer, WriterOptions,
};
use tempfile::NamedTempFile;

use super::hash::{hash_file, ToHash};
use super::open::{changed_size, read_more, Opener, Stamp};
use super::secrets::Found;
use crate::error::{CliError, Result};
use crate::packet_io::CHUNK;
use crate::progress::Progress;
use crate::walk::{
    checked_path, sort_planned, walked_source, FileId, FileSource, Planned, WalkRoot,
};

/// Bodies up to this size are read into their job's buffer and written
/// with the headers around them; larger ones are streamed on their own.
const SMALL: u64 = 256 << 10;

/// A run of packet bytes is handed to a worker once it holds this much.
const RUN_BYTES: usize = 512 << 10;

/// `packet.json` is written in blocks of this size.
const MANIFEST_BLOCK: usize = 128 << 10;

/// Stands for member `index`'s digest until it is computed. It is written
/// with the same number of characters as any other, so the layout does not
/// move, and it differs from every other member's, so the rule that one
/// sha256 names one size, checked meanwhile, holds of the placeholders.
/// It holds of the digests that replace them too: each is the SHA-256 of
/// exactly the size listed (two sizes sharing one would be a collision).
fn placeholder(index: usize) -> Digest {
    let mut bytes = [0u8; 32];
    bytes[24..].copy_from_slice(&(index as u64 + 1).to_be_bytes());
    Digest(bytes)
}

/// Where each file member's bytes are: files walked below the workspace
/// at the member's own path there (not stored, so that a large workspace
/// does not keep a second copy of every path; only the identity the walk
/// listed is), any other by member index.
struct Sources {
    workspace: Option<Arc<WalkRoot>>,
    ids: Vec<Option<FileId>>,
    elsewhere: BTreeMap<usize, FileSource>,
}

impl Sources {
    /// The source of file member `index`.
    fn of(&self, manifest: &Manifest, index: usize) -> Option<FileSource> {
        if let Some(s) = self.elsewhere.get(&index) {
            return Some(s.clone());
        }
        let entry = manifest.members.get(index)?;
        if entry.kind() != Kind::File {
            return None;
        }
        walked_source(
            self.workspace.as_ref()?,
            &entry.path,
            (*self.ids.get(index)?)?,
        )
    }
}

/// A body to read from `source` into the packet.
#[derive(Clone)]
struct Slot {
    /// Member index.
    index: usize,
    source: FileSource,
    /// Where the body starts: in the run's bytes, or in the packet.
    at: u64,
    size: u64,
}

/// Work for a worker thread.
enum Job {
    /// Packet bytes from `offset` on (headers, padding and room for the
    /// small bodies in `slots`).
    Run {
        offset: u64,
        bytes: Vec<u8>,
        slots: Vec<Slot>,
    },
    /// One large body, hashed in phase 1 and copied in phase 2.
    Large(Slot),
}

/// What phase 1 learnt of one body.
struct Hashed {
    index: usize,
    digest: Digest,
    /// For a large body: what it was when hashed.
    stamp: Option<Stamp>,
    /// The secrets the detector found in it.
    secrets: Vec<Finding>,
}

/// What the workers established: every body's digest and secrets, and the
/// failure with the lowest member index (so the error does not depend on
/// timing).
struct Outcome {
    digests: Vec<Option<Digest>>,
    stamps: BTreeMap<usize, Stamp>,
    secrets: BTreeMap<usize, Vec<Finding>>,
    failure: Option<(usize, CliError)>,
}

impl Outcome {
    fn fail(&mut self, index: usize, error: CliError) {
        if self.failure.as_ref().is_none_or(|(i, _)| index < *i) {
            self.failure = Some((index, error));
        }
    }
}

/// How a pack into a file ended.
// Made once per pack: the size of the larger variant does not matter.
#[allow(clippy::large_enum_variant)]
pub enum Packed {
    /// The packet is at the output: its manifest, digest, absolute path,
    /// and the secrets found (which `accept` let through).
    Kept(Manifest, Digest, String, Vec<Found>),
    /// Secrets were found that `accept` did not let through: nothing was
    /// kept.
    Blocked(Vec<Found>),
}

/// Packs `planned` into `output` (through a temporary file renamed into
/// place), unless the secrets found in its files are ones `accept` refuses.
/// `between_phases` runs after phase 1 (packing passes a no-op; tests
/// change files there).
#[allow(clippy::too_many_arguments)]
pub fn pack_into_file(
    planned: Vec<Planned>,
    harness: Option<Harness>,
    exclusions: Vec<Exclusion>,
    output: &Path,
    progress: &Progress,
    between_phases: &mut dyn FnMut(),
    accept: &dyn Fn(&[Found]) -> bool,
    scanner: &Scanner,
) -> Result<Packed> {
    let (members, sources) = members_to_lay_out(planned)?;
    let walked = members.len();
    // Checked on a thread of its own while phase 1 runs: nothing is kept
    // unless the manifest passes. The limits follow from the listed sizes:
    // they are checked before any file is read.
    let mut manifest = Manifest::assemble(members, harness, exclusions);
    if manifest.members.len() != walked {
        return Err(bug("the manifest does not list the members walked"));
    }
    manifest
        .check_limits(&Limits::FORMAT)
        .map_err(CliError::Unpackable)?;
    let tmp = temporary_file_beside(output)?;
    let (out, out_path) = (tmp.as_file(), tmp.path());
    progress.phase("pack", manifest.totals.bytes);
    let read = phase_one(&manifest, &sources, scanner, out, out_path, progress)?;
    if !accept(&read.found) {
        return Ok(Packed::Blocked(read.found));
    }
    fill_in_digests(&mut manifest, read.digests)?;
    between_phases();
    progress.phase("write", read.large.iter().map(|s| s.size).sum());
    phase_two(
        &manifest,
        read.manifest_end,
        &read.large,
        &read.stamps,
        out,
        out_path,
        progress,
    )?;
    let digest = manifest.json_digest();
    let output = keep_as(tmp, output)?;
    Ok(Packed::Kept(manifest, digest, output, read.found))
}

/// The members in the packet's order, each file with its walked size and a
/// placeholder digest (an empty file's is known), and where each file's
/// bytes are.
fn members_to_lay_out(mut planned: Vec<Planned>) -> Result<(Vec<Member>, Sources)> {
    // Runs walked apart (the workspace, harness files) come sorted, and
    // are merged.
    sort_planned(&mut planned);
    let mut sources = Sources {
        workspace: None,
        ids: Vec::with_capacity(planned.len()),
        elsewhere: BTreeMap::new(),
    };
    let mut members = Vec::with_capacity(planned.len());
    let digest_for = |index: usize, size: u64| {
        if size == 0 {
            Digest::EMPTY
        } else {
            placeholder(index)
        }
    };
    for (index, p) in planned.into_iter().enumerate() {
        let mut id = None;
        match p {
            Planned::Dir { member } => members.push(Member::dir(checked_path(member)?)),
            Planned::Symlink { member, target } => {
                members.push(Member::symlink(checked_path(member)?, target));
            }
            Planned::File {
                member,
                source,
                executable,
                size,
            } => {
                let source = source.ok_or_else(|| bug("a harness file without a source"))?;
                sources.elsewhere.insert(index, FileSource::Path(source));
                let digest = digest_for(index, size);
                members.push(Member::file(
                    checked_path(member)?,
                    size,
                    digest,
                    executable,
                ));
            }
            Planned::Walked {
                member,
                root,
                executable,
                size,
                id: listed,
                ..
            } => {
                if root.member() == packet_core::path::WORKSPACE_ROOT {
                    id = Some(listed);
                    sources.workspace.get_or_insert(root);
                } else {
                    let source = walked_source(&root, &member, listed)
                        .ok_or_else(|| bug("a walked file outside its root"))?;
                    sources.elsewhere.insert(index, source);
                }
                let digest = digest_for(index, size);
                members.push(Member::file(
                    checked_path(member)?,
                    size,
                    digest,
                    executable,
                ));
            }
        }
        sources.ids.push(id);
    }
    Ok((members, sources))
}

/// A temporary file in `output`'s folder (so that renaming it into place
/// replaces the output at once), kept by [`keep_as`] once the packet is
/// complete and removed if anything fails before.
fn temporary_file_beside(output: &Path) -> Result<NamedTempFile> {
    let dir = match output.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    tempfile::Builder::new()
        .prefix(super::TEMPORARY_PREFIX)
        .tempfile_in(&dir)
        .map_err(|e| CliError::io("create a temporary file in", &dir, e))
}

/// What phase 1 leaves for phase 2.
struct PhaseOne {
    /// Where the `packet.json` member ends: the first member's offset.
    manifest_end: u64,
    /// Every large body, in order.
    large: Vec<Slot>,
    /// Every body's digest, by member index.
    digests: Vec<Option<Digest>>,
    /// What each large file was when it was hashed.
    stamps: BTreeMap<usize, Stamp>,
    /// The secrets found, in the packet's order.
    found: Vec<Found>,
}

/// Phase 1, on every core: the layout goes out in jobs (small files read
/// into their place and written, large files hashed; every body scanned
/// for secrets) while the manifest's rules are checked. A rule the members
/// break is reported first, then a file that could not be read.
fn phase_one(
    manifest: &Manifest,
    sources: &Sources,
    scanner: &Scanner,
    out: &File,
    out_path: &Path,
    progress: &Progress,
) -> Result<PhaseOne> {
    let head = Writer::after_manifest(manifest, WriterOptions::default()).offset();
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let (jobs_tx, jobs_rx) = mpsc::sync_channel::<Job>(2 * threads);
    let jobs_rx = Mutex::new(jobs_rx);
    let stop = AtomicBool::new(false);
    let outcome = Mutex::new(Outcome {
        digests: vec![None; manifest.members.len()],
        stamps: Default::default(),
        secrets: Default::default(),
        failure: None,
    });
    let (laid_out, validated) = std::thread::scope(|scope| {
        let validation = scope.spawn(|| {
            let validated = manifest.validate(&Limits::FORMAT);
            if validated.is_err() {
                stop.store(true, Ordering::Relaxed);
            }
            validated
        });
        for _ in 0..threads {
            scope.spawn(|| {
                let mut worker = Worker {
                    manifest,
                    scanner,
                    out,
                    out_path,
                    progress,
                    opener: Opener::default(),
                    buf: Vec::new(),
                };
                worker.take_jobs(&jobs_rx, &stop, &outcome);
            });
        }
        let laid_out = lay_out(manifest, sources, head, &jobs_tx, &stop);
        drop(jobs_tx);
        let validated = validation
            .join()
            .map_err(|_| bug("the manifest check stopped unexpectedly"));
        (laid_out, validated)
    });
    validated?.map_err(CliError::Unpackable)?;
    let outcome = outcome
        .into_inner()
        .map_err(|_| bug("a packing thread stopped unexpectedly"))?;
    if let Some((_, e)) = outcome.failure {
        return Err(e);
    }
    let large = laid_out?;
    let found = outcome
        .secrets
        .into_iter()
        .flat_map(|(index, secrets)| {
            let member = manifest.members.get(index).map_or("", |m| m.path.as_str());
            Found::of(member, secrets)
        })
        .collect();
    Ok(PhaseOne {
        manifest_end: head,
        large,
        digests: outcome.digests,
        stamps: outcome.stamps,
        found,
    })
}

/// Puts phase 1's digests in place of the placeholders.
fn fill_in_digests(manifest: &mut Manifest, digests: Vec<Option<Digest>>) -> Result<()> {
    for (member, digest) in manifest.members.iter_mut().zip(digests) {
        if let packet_core::Entry::File { size, sha256, .. } = &mut member.entry {
            if *size > 0 {
                *sha256 = digest.ok_or_else(|| bug("a file was not read"))?;
            }
        }
    }
    Ok(())
}

/// Renames the complete packet into place (mode 0644); returns its
/// absolute path.
fn keep_as(tmp: NamedTempFile, output: &Path) -> Result<String> {
    tmp.as_file()
        .set_permissions(fs::Permissions::from_mode(0o644))
        .map_err(|e| CliError::io("set permissions of", tmp.path(), e))?;
    tmp.persist(output)
        .map_err(|e| CliError::io("rename into place", output, e.error))?;
    let abs = fs::canonicalize(output).map_err(|e| CliError::io("open", output, e))?;
    Ok(abs.display().to_string())
}

/// A state this module's own code rules out.
fn bug(message: &str) -> CliError {
    CliError::Bug(message.into())
}

/// Drives the writer over the manifest with placeholder digests and hands
/// the workers the packet in runs of about [`RUN_BYTES`] (from the first
/// member on), and each large body on its own; returns the large bodies
/// in order, for phase 2.
fn lay_out(
    manifest: &Manifest,
    sources: &Sources,
    head: u64,
    jobs: &mpsc::SyncSender<Job>,
    stop: &AtomicBool,
) -> Result<Vec<Slot>> {
    let mut large = Vec::new();
    static ZEROS: [u8; 64 << 10] = [0; 64 << 10];
    let send = |job: Job| {
        jobs.send(job)
            .map_err(|_| bug("the packing threads stopped unexpectedly"))
    };
    let new_run = |offset: u64| Job::Run {
        offset,
        bytes: Vec::with_capacity(RUN_BYTES + (16 << 10)),
        slots: Vec::new(),
    };
    // packet.json comes first and is written last.
    let mut writer = Writer::after_manifest(
        manifest,
        WriterOptions {
            packet_digest: false,
            verify_bodies: false,
        },
    );
    let mut run = new_run(head);
    loop {
        if stop.load(Ordering::Relaxed) {
            return Ok(large);
        }
        let Job::Run { bytes, slots, .. } = &mut run else {
            return Err(bug("the layout lost its run"));
        };
        match writer.next().map_err(CliError::unpackable)? {
            Step::Bytes(b) => bytes.extend_from_slice(b),
            Step::Body {
                index,
                size,
                offset,
            } => {
                let source = sources
                    .of(manifest, index)
                    .ok_or_else(|| bug("no source file for this member"))?;
                if size <= SMALL {
                    let at = bytes.len();
                    bytes.resize(at + size as usize, 0);
                    slots.push(Slot {
                        index,
                        source,
                        at: at as u64,
                        size,
                    });
                } else {
                    let full = std::mem::replace(&mut run, new_run(offset + size));
                    send(full)?;
                    let slot = Slot {
                        index,
                        source,
                        at: offset,
                        size,
                    };
                    large.push(slot.clone());
                    send(Job::Large(slot))?;
                }
                let mut left = size;
                while left > 0 {
                    let n = left.min(ZEROS.len() as u64) as usize;
                    writer.body(&ZEROS[..n]).map_err(CliError::unpackable)?;
                    left -= n as u64;
                }
            }
            Step::Done(_) => break,
        }
        if let Job::Run { bytes, .. } = &run {
            if bytes.len() >= RUN_BYTES {
                let full = std::mem::replace(&mut run, new_run(writer.offset()));
                send(full)?;
            }
        }
    }
    send(run)?;
    Ok(large)
}

/// A worker thread's state.
struct Worker<'a> {
    manifest: &'a Manifest,
    scanner: &'a Scanner,
    out: &'a File,
    out_path: &'a Path,
    progress: &'a Progress,
    opener: Opener,
    /// The buffer large files are hashed through.
    buf: Vec<u8>,
}

/// A failure and the member it concerns (for ordering failures).
type Failure = Box<(usize, CliError)>;

impl Worker<'_> {
    /// Takes jobs until there are none left, recording what each hashed or
    /// the failure; after a failure (or a broken rule) the rest are skipped.
    fn take_jobs(
        &mut self,
        jobs: &Mutex<mpsc::Receiver<Job>>,
        stop: &AtomicBool,
        outcome: &Mutex<Outcome>,
    ) {
        loop {
            let job = match jobs.lock() {
                Ok(rx) => rx.recv(),
                Err(_) => return,
            };
            let Ok(job) = job else {
                return;
            };
            if stop.load(Ordering::Relaxed) {
                continue;
            }
            match self.do_job(job) {
                Ok(hashed) => {
                    if let Ok(mut o) = outcome.lock() {
                        for h in hashed {
                            o.digests[h.index] = Some(h.digest);
                            if let Some(stamp) = h.stamp {
                                o.stamps.insert(h.index, stamp);
                            }
                            if !h.secrets.is_empty() {
                                o.secrets.insert(h.index, h.secrets);
                            }
                        }
                    }
                }
                Err(failure) => {
                    let (index, e) = *failure;
                    stop.store(true, Ordering::Relaxed);
                    if let Ok(mut o) = outcome.lock() {
                        o.fail(index, e);
                    }
                }
            }
        }
    }

    fn do_job(&mut self, job: Job) -> std::result::Result<Vec<Hashed>, Failure> {
        match job {
            Job::Run {
                offset,
                mut bytes,
                slots,
            } => {
                let mut hashed = Vec::with_capacity(slots.len());
                // Every body has a byte after it (the last one, this one).
                bytes.push(0);
                for slot in &slots {
                    let window = &mut bytes[slot.at as usize..=(slot.at + slot.size) as usize];
                    let digest = self
                        .read_small(slot, window)
                        .map_err(|e| Box::new((slot.index, e)))?;
                    let body = &window[..slot.size as usize];
                    let secrets = self.scanner.scan(relative(self.member(slot.index)), body);
                    hashed.push(Hashed {
                        index: slot.index,
                        digest,
                        stamp: None,
                        secrets,
                    });
                }
                bytes.pop();
                let first = slots.first().map_or(usize::MAX, |s| s.index);
                self.out
                    .write_all_at(&bytes, offset)
                    .map_err(|e| Box::new((first, CliError::io("write", self.out_path, e))))?;
                Ok(hashed)
            }
            Job::Large(slot) => {
                let (digest, stamp, secrets) = self
                    .hash_large(&slot)
                    .map_err(|e| Box::new((slot.index, e)))?;
                Ok(vec![Hashed {
                    index: slot.index,
                    digest,
                    stamp: Some(stamp),
                    secrets,
                }])
            }
        }
    }

    fn member(&self, index: usize) -> &str {
        self.manifest
            .members
            .get(index)
            .map_or("", |e| e.path.as_str())
    }

    /// Reads a whole small file into its place in the run. `window` is
    /// that place and the byte after it, which only a file that grew fills
    /// (failing the pack): a read that stops short of it is the file's end
    /// (a regular file reads short only there), so a file that grew is
    /// seen without another system call.
    fn read_small(&mut self, slot: &Slot, window: &mut [u8]) -> Result<Digest> {
        let manifest = self.manifest;
        let member = manifest
            .members
            .get(slot.index)
            .map_or("", |e| e.path.as_str());
        let (mut f, _) = self.opener.open(&slot.source, member)?;
        let size = window.len() - 1;
        let mut filled = 0;
        let ended = loop {
            match f.read(&mut window[filled..]) {
                Ok(0) => break true,
                Ok(n) => {
                    filled += n;
                    if filled > size {
                        break false;
                    }
                    if filled == size {
                        break true;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(CliError::io("read", slot.source.display(), e)),
            }
        };
        if !ended {
            return Err(self.changed(slot.index, "grew"));
        }
        if filled < size {
            return Err(self.changed(slot.index, "shrank"));
        }
        self.progress.inc(slot.size);
        Ok(Digest::of(&window[..size]))
    }

    /// Hashes a large file and looks for secrets in the same read; returns
    /// its digest, what it was then, and the secrets.
    fn hash_large(&mut self, slot: &Slot) -> Result<(Digest, Stamp, Vec<Finding>)> {
        if self.buf.is_empty() {
            self.buf = vec![0u8; CHUNK];
        }
        let file = ToHash {
            member: self.member(slot.index).to_owned(),
            source: slot.source.clone(),
            size: slot.size,
        };
        let mut detector = self.scanner.detector(relative(&file.member));
        let (stamp, digest) = hash_file(
            &mut self.opener,
            &file,
            &mut self.buf,
            self.progress,
            Some(&mut detector),
        )?;
        // Its size is in the layout already.
        match stamp.size.cmp(&slot.size) {
            std::cmp::Ordering::Equal => Ok((digest, stamp, detector.finish())),
            std::cmp::Ordering::Less => Err(self.changed(slot.index, "shrank")),
            std::cmp::Ordering::Greater => Err(self.changed(slot.index, "grew")),
        }
    }

    fn changed(&self, index: usize, how: &str) -> CliError {
        changed_size(self.member(index), how)
    }
}

/// A member's path below its root, as the secret detector takes it.
fn relative(member: &str) -> &str {
    member.split_once('/').map_or("", |(_, rest)| rest)
}

/// Writes what it is given at the packet's start and on, in blocks of
/// [`MANIFEST_BLOCK`]. The first error is kept (a [`Sink`] cannot fail) and later
/// bytes are dropped.
struct WriteFromStart<'a> {
    out: &'a File,
    at: u64,
    block: Vec<u8>,
    error: Option<io::Error>,
}

impl WriteFromStart<'_> {
    /// Writes the block being filled.
    fn flush(&mut self) {
        if self.error.is_none() && !self.block.is_empty() {
            match self.out.write_all_at(&self.block, self.at) {
                Ok(()) => self.at += self.block.len() as u64,
                Err(e) => self.error = Some(e),
            }
        }
        self.block.clear();
    }
}

impl Sink for WriteFromStart<'_> {
    fn put(&mut self, mut bytes: &[u8]) {
        while !bytes.is_empty() {
            let n = bytes.len().min(MANIFEST_BLOCK - self.block.len());
            self.block.extend_from_slice(&bytes[..n]);
            bytes = &bytes[n..];
            if self.block.len() == MANIFEST_BLOCK {
                self.flush();
            }
        }
    }
}

/// Phase 2: the `packet.json` member, now complete, written at the start
/// (`0..manifest_end`), then each large body copied from its source, which
/// must still be, unchanged, the file phase 1 hashed. On one thread: the
/// writes into one file take its lock in turn, so more would not copy
/// faster.
fn phase_two(
    manifest: &Manifest,
    manifest_end: u64,
    large: &[Slot],
    stamps: &BTreeMap<usize, Stamp>,
    out: &File,
    out_path: &Path,
    progress: &Progress,
) -> Result<()> {
    let mut sink = WriteFromStart {
        out,
        at: 0,
        block: Vec::with_capacity(MANIFEST_BLOCK),
        error: None,
    };
    let written = write_manifest_member(manifest, &mut sink);
    sink.flush();
    if let Some(e) = sink.error {
        return Err(CliError::io("write", out_path, e));
    }
    if written != manifest_end {
        return Err(bug("the manifest changed length once digested"));
    }
    let mut opener = Opener::default();
    let mut buf = vec![0u8; CHUNK];
    for slot in large {
        let member = manifest
            .members
            .get(slot.index)
            .map_or("", |e| e.path.as_str());
        let display = slot.source.display();
        let path = display.as_path();
        let (mut f, _) = opener.open(&slot.source, member)?;
        let mut done = 0u64;
        while done < slot.size {
            let want = (slot.size - done).min(CHUNK as u64) as usize;
            let n = read_more(&mut f, &mut buf[..want], path, member)?;
            out.write_all_at(&buf[..n], slot.at + done)
                .map_err(|e| CliError::io("write", out_path, e))?;
            done += n as u64;
            progress.inc(n as u64);
        }
        // The open file must still be the one phase 1 hashed, as it was
        // then.
        let stamp = stamps
            .get(&slot.index)
            .ok_or_else(|| bug("a large file was not hashed"))?;
        stamp.check(&Stamp::now(&f, path)?, member)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt;

    /// The workspace `dir` as a walk opens it.
    fn root(dir: &Path) -> Arc<WalkRoot> {
        Arc::new(WalkRoot::open(dir, "workspace").unwrap())
    }

    /// A file of the workspace as the walk lists it, with `size` as the
    /// size the walk saw.
    fn planned_file(root: &Arc<WalkRoot>, name: &str, size: u64) -> Planned {
        let meta = fs::symlink_metadata(root.path().join(name)).unwrap();
        Planned::Walked {
            member: format!("workspace/{name}"),
            root: Arc::clone(root),
            executable: false,
            size,
            id: FileId {
                dev: meta.dev(),
                ino: meta.ino(),
            },
            times: crate::walk::Times {
                mtime: meta.mtime() * 1_000_000_000 + meta.mtime_nsec(),
                ctime: meta.ctime() * 1_000_000_000 + meta.ctime_nsec(),
            },
            mode: meta.mode(),
        }
    }

    /// Packs with no secret policy in the way.
    fn pack_plainly(
        planned: Vec<Planned>,
        output: &Path,
        between_phases: &mut dyn FnMut(),
    ) -> Result<(Manifest, Digest, String)> {
        match pack_into_file(
            planned,
            None,
            vec![],
            output,
            &Progress::new(true),
            between_phases,
            &|_| true,
            &Scanner::new(),
        )? {
            Packed::Kept(m, d, output, _) => Ok((m, d, output)),
            Packed::Blocked(_) => unreachable!("every secret is accepted"),
        }
    }

    /// Packs a workspace of one small and one large file, letting
    /// `change` alter the files between the phases.
    fn pack_changing(change: &dyn Fn(&Path)) -> Result<(Manifest, Digest, Vec<u8>)> {
        let t = tempfile::tempdir().unwrap();
        let big = vec![7u8; (SMALL + 1) as usize];
        fs::write(t.path().join("big.bin"), &big).unwrap();
        fs::write(t.path().join("small.txt"), b"small").unwrap();
        let ws = root(t.path());
        let planned = vec![
            Planned::Dir {
                member: "workspace".into(),
            },
            planned_file(&ws, "big.bin", SMALL + 1),
            planned_file(&ws, "small.txt", 5),
        ];
        let dir = t.path().to_path_buf();
        pack_plainly(planned, &t.path().join("p.tar"), &mut || change(&dir))
            .map(|(m, d, output)| (m, d, fs::read(output).unwrap()))
    }

    #[test]
    fn a_large_file_changed_between_the_phases_is_refused() {
        let e = pack_changing(&|d| {
            let mut big = fs::read(d.join("big.bin")).unwrap();
            big[SMALL as usize] = 8;
            fs::write(d.join("big.bin"), big).unwrap();
        })
        .unwrap_err();
        assert_eq!(e.code(), "member_digest_mismatch");
        assert_eq!(
            e.report().details.path.as_deref(),
            Some("workspace/big.bin")
        );
        let e = pack_changing(&|d| {
            fs::write(d.join("big.bin"), b"short").unwrap();
        })
        .unwrap_err();
        assert_eq!(e.code(), "member_mismatch");
    }

    /// A file to pack: its name, its bytes on disk, the size the walk saw.
    type Listed = (&'static str, Vec<u8>, u64);

    /// Packs `files` into a fresh folder; returns the result and what the
    /// folder holds after.
    fn pack_listed(files: &[Listed]) -> (Result<Digest>, Vec<String>) {
        let t = tempfile::tempdir().unwrap();
        let ws = t.path().join("ws");
        fs::create_dir(&ws).unwrap();
        let mut planned = vec![Planned::Dir {
            member: "workspace".into(),
        }];
        let walked = root(&ws);
        for (name, bytes, listed) in files {
            fs::write(ws.join(name), bytes).unwrap();
            planned.push(planned_file(&walked, name, *listed));
        }
        let packed =
            pack_plainly(planned, &t.path().join("p.tar"), &mut || {}).map(|(_, digest, _)| digest);
        let mut left: Vec<String> = fs::read_dir(t.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        (packed, left)
    }

    #[test]
    fn a_small_file_that_changed_size_since_the_walk_is_refused() {
        // Small files are read straight into their place in the run; the
        // byte after each (padding, the next header, or the run's end) is
        // where growth shows.
        let cases: [(&[Listed], &str, &str); 4] = [
            (
                &[("a.txt", b"12345".to_vec(), 3)],
                "workspace/a.txt",
                "grew",
            ),
            (
                &[("a.txt", b"12345".to_vec(), 9)],
                "workspace/a.txt",
                "shrank",
            ),
            // A whole number of blocks: the next header follows at once.
            (
                &[("a.bin", vec![1; 513], 512), ("b.txt", b"b".to_vec(), 1)],
                "workspace/a.bin",
                "grew",
            ),
            // The last body of the packet: the byte after it is the run's end.
            (
                &[("a.txt", b"a".to_vec(), 1), ("b.bin", vec![2; 1025], 1024)],
                "workspace/b.bin",
                "grew",
            ),
        ];
        for (files, path, how) in cases {
            let (packed, left) = pack_listed(files);
            let e = packed.unwrap_err();
            assert_eq!(e.code(), "member_mismatch", "{path}");
            assert_eq!(e.report().details.path.as_deref(), Some(path));
            assert!(
                e.report().details.message.contains(how),
                "{}",
                e.report().details.message
            );
            // Neither the packet nor its temporary file is left behind.
            assert_eq!(left, ["ws"], "{path}");
        }
        // Sizes as listed: packed, with every body in place.
        let (packed, _) = pack_listed(&[
            ("a.bin", vec![1; 512], 512),
            ("b.txt", b"b".to_vec(), 1),
            ("c.bin", vec![3; 1024], 1024),
        ]);
        assert!(packed.is_ok());
    }

    #[test]
    fn a_small_file_changed_after_it_was_read_does_not_matter() {
        // Its bytes were hashed and written together in phase 1.
        let (manifest, digest, bytes) = pack_changing(&|d| {
            fs::write(d.join("small.txt"), b"SMALL").unwrap();
        })
        .unwrap();
        // The packet is named by its packet.json, as written.
        let json = manifest.to_canonical_json();
        assert_eq!(&bytes[512..512 + json.len()], &json[..]);
        assert_eq!(Digest::of(&json), digest);
        let small = manifest.find("workspace/small.txt").unwrap().1;
        assert_eq!(small.sha256(), Some(Digest::of(b"small")));
    }
}
