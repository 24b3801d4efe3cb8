//! Packing into a file, reading each small file once.
//!
//! Every member's size is known from the walk and every sha256 is written
//! as 64 hex digits, so the manifest's length, and with it every member's
//! offset, is known before any file is read. packet-core's [`Writer`],
//! driven over the manifest with placeholder digests (bodies not fed),
//! gives every header and offset.
//!
//! Phase 1, on every core: each small file is read once, hashed, and
//! written with its neighbours' headers at their offsets in a temporary
//! file beside the output; each large file is only hashed (its stamp is
//! kept). The manifest, now complete, is written at the start.
//!
//! Phase 2: one thread goes through the packet in order, reading back what
//! phase 1 wrote and copying each large file into place (refusing one that
//! is not, unchanged, the file phase 1 hashed: see `Stamp::check`), while
//! this thread hashes the same blocks for the packet digest. The whole
//! packet digest cannot start before the manifest is known, and the
//! manifest needs every member's digest: the copying of large files is
//! what overlaps with it.
//!
//! The bytes are those the streaming writer produces (tests compare the
//! two).

use std::collections::BTreeMap;
use std::fs::{self, File};
use std::io::{self, Read};
use std::os::unix::fs::{FileExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Mutex};

use packet_core::canonical::Sink;
use packet_core::writer::write_manifest_member;
use packet_core::{
    Digest, Entry, ErrorCode, Exclusion, Harness, Hasher, Kind, Limits, Manifest, Step, Writer,
    WriterOptions,
};

use super::{changed_size, hash_file, read_more, Opener, Stamp};
use crate::error::{CliError, Result};
use crate::packet_io::CHUNK;
use crate::progress::Progress;
use crate::walk::{workspace_source, Planned};

/// Blocks phase 2 reads and hashes: small enough that a block read on one
/// core is still in cache when the other hashes it.
const PHASE2_BLOCK: usize = 128 << 10;

/// Bodies up to this size are read into their job's buffer and written
/// with the headers around them; larger ones are streamed on their own.
const SMALL: u64 = 256 << 10;

/// A run of packet bytes is handed to a worker once it holds this much.
const RUN_BYTES: usize = 512 << 10;

/// Stands for a digest not computed yet: it is written with the same
/// number of characters as any other, so the layout does not move.
const PLACEHOLDER: Digest = Digest([0; 32]);

/// Where each file member's bytes are: below the workspace, at the
/// member's own path (not stored, so that a large workspace does not keep
/// a second copy of every path), or, for harness files, recorded by member
/// index.
struct Sources {
    workspace: PathBuf,
    elsewhere: BTreeMap<usize, PathBuf>,
}

impl Sources {
    /// The source of file member `index`.
    fn of(&self, manifest: &Manifest, index: usize) -> Option<PathBuf> {
        if let Some(p) = self.elsewhere.get(&index) {
            return Some(p.clone());
        }
        let entry = manifest.members.get(index)?;
        if entry.kind != Kind::File {
            return None;
        }
        workspace_source(&self.workspace, &entry.path)
    }
}

/// A body to read from `source` into the packet.
#[derive(Clone)]
struct Slot {
    /// Member index.
    index: usize,
    source: PathBuf,
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

/// A stretch of the packet, for phase 2.
enum Region {
    /// Bytes phase 1 wrote: `start..end`.
    Written(u64, u64),
    /// A large body, copied from its source.
    Large(Slot),
}

/// What phase 1 learnt of one body.
struct Hashed {
    index: usize,
    digest: Digest,
    /// For a large body: what it was when hashed.
    stamp: Option<Stamp>,
}

/// What the workers established: every body's digest, and the failure
/// with the lowest member index (so the error does not depend on timing).
struct Outcome {
    digests: Vec<Option<Digest>>,
    stamps: BTreeMap<usize, Stamp>,
    failure: Option<(usize, CliError)>,
}

impl Outcome {
    fn fail(&mut self, index: usize, error: CliError) {
        if self.failure.as_ref().is_none_or(|(i, _)| index < *i) {
            self.failure = Some((index, error));
        }
    }
}

/// Packs `planned` into `output` (through a temporary file renamed into
/// place); returns the manifest, the packet digest and the output's
/// absolute path.
pub fn pack_to_file(
    workspace: &Path,
    planned: Vec<Planned>,
    harness: Option<Harness>,
    exclusions: Vec<Exclusion>,
    output: &Path,
    progress: &Progress,
) -> Result<(Manifest, Digest, String)> {
    pack_with(
        workspace,
        planned,
        harness,
        exclusions,
        output,
        progress,
        &mut || {},
    )
}

/// [`pack_to_file`], calling `between` after phase 1 (tests change files there).
fn pack_with(
    workspace: &Path,
    mut planned: Vec<Planned>,
    harness: Option<Harness>,
    exclusions: Vec<Exclusion>,
    output: &Path,
    progress: &Progress,
    between: &mut dyn FnMut(),
) -> Result<(Manifest, Digest, String)> {
    // Member paths are unique: an unstable sort gives the same order.
    planned.sort_unstable_by(|a, b| packet_core::path::compare(a.member(), b.member()));
    let mut sources = Sources {
        workspace: workspace.to_path_buf(),
        elsewhere: BTreeMap::new(),
    };
    let mut entries = Vec::with_capacity(planned.len());
    for (index, p) in planned.into_iter().enumerate() {
        match p {
            Planned::Dir { member } => entries.push(Entry::dir(member)),
            Planned::Symlink { member, target } => entries.push(Entry::symlink(member, target)),
            Planned::File {
                member,
                source,
                executable,
                size,
            } => {
                let digest = if size == 0 {
                    Digest::EMPTY
                } else {
                    PLACEHOLDER
                };
                if let Some(source) = source {
                    sources.elsewhere.insert(index, source);
                }
                entries.push(Entry::file(member, size, digest, executable));
            }
        }
    }
    let walked = entries.len();
    let mut manifest = Manifest::build(entries, harness, exclusions, &Limits::FORMAT)
        .map_err(CliError::Unpackable)?;
    if manifest.members.len() != walked {
        return Err(usage("the manifest does not list the members walked"));
    }
    let options = WriterOptions {
        packet_digest: false,
        verify_bodies: false,
    };
    let head = Writer::after_manifest(&manifest, options).offset();

    let dir = match output.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let tmp = tempfile::Builder::new()
        .prefix(".pillbox-pack-")
        .tempfile_in(&dir)
        .map_err(|e| CliError::io("create a temporary file in", &dir, e))?;
    let out = tmp.as_file();
    let out_path = tmp.path();

    progress.phase("pack", manifest.totals.bytes);
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let (jobs_tx, jobs_rx) = mpsc::sync_channel::<Job>(2 * threads);
    let jobs_rx = Mutex::new(jobs_rx);
    let stop = AtomicBool::new(false);
    let outcome = Mutex::new(Outcome {
        digests: vec![None; manifest.members.len()],
        stamps: Default::default(),
        failure: None,
    });
    let laid_out = std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| {
                let mut worker = Worker {
                    manifest: &manifest,
                    out,
                    out_path,
                    progress,
                    opener: Opener::default(),
                    scratch: Vec::new(),
                    buf: Vec::new(),
                };
                loop {
                    let job = match jobs_rx.lock() {
                        Ok(rx) => rx.recv(),
                        Err(_) => return,
                    };
                    let Ok(job) = job else {
                        return;
                    };
                    if stop.load(Ordering::Relaxed) {
                        continue;
                    }
                    match worker.run(job) {
                        Ok(hashed) => {
                            if let Ok(mut o) = outcome.lock() {
                                for h in hashed {
                                    o.digests[h.index] = Some(h.digest);
                                    if let Some(stamp) = h.stamp {
                                        o.stamps.insert(h.index, stamp);
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
            });
        }
        let laid_out = lay_out(&manifest, &sources, head, &jobs_tx, &stop);
        drop(jobs_tx);
        laid_out
    });
    let outcome = outcome
        .into_inner()
        .map_err(|_| usage("a packing thread stopped unexpectedly"))?;
    if let Some((_, e)) = outcome.failure {
        return Err(e);
    }
    let regions = laid_out?;

    for (entry, digest) in manifest.members.iter_mut().zip(outcome.digests) {
        if entry.kind != Kind::File || entry.size == 0 {
            continue;
        }
        entry.sha256 = Some(digest.ok_or_else(|| usage("a file was not read"))?);
    }
    // The manifest, now with every digest, in front of the members,
    // streamed into the file rather than held in memory.
    let mut head_out = FileSink {
        file: out,
        at: 0,
        buf: Vec::with_capacity(CHUNK),
        error: None,
    };
    let written = write_manifest_member(&manifest, &mut head_out);
    head_out.flush();
    if let Some(e) = head_out.error {
        return Err(CliError::io("write", out_path, e));
    }
    if written != head {
        return Err(usage("the manifest changed length once digested"));
    }

    between();
    progress.phase("write", manifest.packet_size());
    let digest = copy_and_hash(
        &manifest,
        &regions,
        &outcome.stamps,
        out,
        out_path,
        progress,
    )?;
    out.set_permissions(fs::Permissions::from_mode(0o644))
        .map_err(|e| CliError::io("set permissions of", out_path, e))?;
    tmp.persist(output)
        .map_err(|e| CliError::io("rename into place", output, e.error))?;
    let abs = fs::canonicalize(output).map_err(|e| CliError::io("open", output, e))?;
    Ok((manifest, digest, abs.display().to_string()))
}

fn usage(message: &str) -> CliError {
    CliError::Unpackable(packet_core::Error::new(ErrorCode::Usage, message))
}

/// Writes into a file from offset 0 on, through a 1 MiB buffer; the first
/// error is kept (a [`Sink`] cannot fail) and later writes are dropped.
struct FileSink<'a> {
    file: &'a File,
    at: u64,
    buf: Vec<u8>,
    error: Option<io::Error>,
}

impl FileSink<'_> {
    fn flush(&mut self) {
        if self.error.is_none() && !self.buf.is_empty() {
            match self.file.write_all_at(&self.buf, self.at) {
                Ok(()) => self.at += self.buf.len() as u64,
                Err(e) => self.error = Some(e),
            }
        }
        self.buf.clear();
    }
}

impl Sink for FileSink<'_> {
    fn put(&mut self, bytes: &[u8]) {
        if self.buf.len() + bytes.len() > CHUNK {
            self.flush();
        }
        if bytes.len() > CHUNK {
            self.buf.extend_from_slice(bytes);
            self.flush();
        } else {
            self.buf.extend_from_slice(bytes);
        }
    }
}

/// Adds `start..end`, written in phase 1, to the regions.
fn written(start: u64, end: u64, regions: &mut Vec<Region>) {
    if start == end {
        return;
    }
    match regions.last_mut() {
        Some(Region::Written(_, last)) if *last == start => *last = end,
        _ => regions.push(Region::Written(start, end)),
    }
}

/// Drives the writer over the manifest with placeholder digests and hands
/// the workers the packet in runs of about [`RUN_BYTES`] (from the first
/// member on), and each large body on its own; returns the packet's
/// regions in order, for phase 2.
fn lay_out(
    manifest: &Manifest,
    sources: &Sources,
    head: u64,
    jobs: &mpsc::SyncSender<Job>,
    stop: &AtomicBool,
) -> Result<Vec<Region>> {
    let mut regions = vec![Region::Written(0, head)];
    static ZEROS: [u8; 64 << 10] = [0; 64 << 10];
    let send = |job: Job| {
        jobs.send(job)
            .map_err(|_| usage("the packing threads stopped unexpectedly"))
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
            return Ok(regions);
        }
        let Job::Run { bytes, slots, .. } = &mut run else {
            return Err(usage("the layout lost its run"));
        };
        match writer.next().map_err(CliError::Unpackable)? {
            Step::Bytes(b) => bytes.extend_from_slice(b),
            Step::Body {
                index,
                size,
                offset,
            } => {
                let source = sources
                    .of(manifest, index)
                    .ok_or_else(|| usage("no source file for this member"))?;
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
                    if let Job::Run { offset, bytes, .. } = &full {
                        written(*offset, *offset + bytes.len() as u64, &mut regions);
                    }
                    send(full)?;
                    let slot = Slot {
                        index,
                        source,
                        at: offset,
                        size,
                    };
                    regions.push(Region::Large(slot.clone()));
                    send(Job::Large(slot))?;
                }
                let mut left = size;
                while left > 0 {
                    let n = left.min(ZEROS.len() as u64) as usize;
                    writer.body(&ZEROS[..n]).map_err(CliError::Unpackable)?;
                    left -= n as u64;
                }
            }
            Step::Done(_) => break,
        }
        if let Job::Run { offset, bytes, .. } = &run {
            if bytes.len() >= RUN_BYTES {
                written(*offset, *offset + bytes.len() as u64, &mut regions);
                let full = std::mem::replace(&mut run, new_run(writer.offset()));
                send(full)?;
            }
        }
    }
    if let Job::Run { offset, bytes, .. } = &run {
        written(*offset, *offset + bytes.len() as u64, &mut regions);
    }
    send(run)?;
    Ok(regions)
}

/// A worker thread's state.
struct Worker<'a> {
    manifest: &'a Manifest,
    out: &'a File,
    out_path: &'a Path,
    progress: &'a Progress,
    opener: Opener,
    /// Where small files are read (one byte longer than the file).
    scratch: Vec<u8>,
    /// The buffer large files are hashed through.
    buf: Vec<u8>,
}

/// A failure and the member it concerns (for ordering failures).
type Failure = Box<(usize, CliError)>;

impl Worker<'_> {
    fn run(&mut self, job: Job) -> std::result::Result<Vec<Hashed>, Failure> {
        match job {
            Job::Run {
                offset,
                mut bytes,
                slots,
            } => {
                let mut digests = Vec::with_capacity(slots.len());
                for slot in &slots {
                    let body = &mut bytes[slot.at as usize..(slot.at + slot.size) as usize];
                    let digest = self
                        .read_small(slot, body)
                        .map_err(|e| Box::new((slot.index, e)))?;
                    digests.push(Hashed {
                        index: slot.index,
                        digest,
                        stamp: None,
                    });
                }
                let first = slots.first().map_or(usize::MAX, |s| s.index);
                self.out
                    .write_all_at(&bytes, offset)
                    .map_err(|e| Box::new((first, CliError::io("write", self.out_path, e))))?;
                Ok(digests)
            }
            Job::Large(slot) => {
                let (digest, stamp) = self
                    .hash_large(&slot)
                    .map_err(|e| Box::new((slot.index, e)))?;
                Ok(vec![Hashed {
                    index: slot.index,
                    digest,
                    stamp: Some(stamp),
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

    /// Reads a whole small file into `body`, its place in the run.
    fn read_small(&mut self, slot: &Slot, body: &mut [u8]) -> Result<Digest> {
        let path = slot.source.as_path();
        let mut f = self
            .opener
            .open(path)
            .map_err(|e| CliError::io("read", path, e))?;
        // One byte more than the file should hold: a read that stops short
        // of it is the file's end (a regular file reads short only there),
        // so a file that grew is seen without another system call.
        self.scratch.resize(body.len() + 1, 0);
        let mut filled = 0;
        let ended = loop {
            match f.read(&mut self.scratch[filled..]) {
                Ok(0) => break true,
                Ok(n) => {
                    filled += n;
                    if filled == self.scratch.len() {
                        break false;
                    }
                    if filled == body.len() {
                        break true;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(CliError::io("read", path, e)),
            }
        };
        if !ended {
            return Err(self.changed(slot.index, "grew"));
        }
        if filled < body.len() {
            return Err(self.changed(slot.index, "shrank"));
        }
        body.copy_from_slice(&self.scratch[..filled]);
        self.progress.inc(slot.size);
        Ok(Digest::of(body))
    }

    /// Hashes a large file; returns its digest and what it was then.
    fn hash_large(&mut self, slot: &Slot) -> Result<(Digest, Stamp)> {
        if self.buf.is_empty() {
            self.buf = vec![0u8; CHUNK];
        }
        let (stamp, digest) =
            hash_file(&mut self.opener, &slot.source, &mut self.buf, self.progress)?;
        // Its size is in the layout already.
        match stamp.size.cmp(&slot.size) {
            std::cmp::Ordering::Equal => Ok((digest, stamp)),
            std::cmp::Ordering::Less => Err(self.changed(slot.index, "shrank")),
            std::cmp::Ordering::Greater => Err(self.changed(slot.index, "grew")),
        }
    }

    fn changed(&self, index: usize, how: &str) -> CliError {
        changed_size(self.member(index), how)
    }
}

/// Phase 2: the packet's bytes in order, read back from the file or (for
/// large bodies) copied from their sources, hashed on this thread while a
/// second one reads and copies.
fn copy_and_hash(
    manifest: &Manifest,
    regions: &[Region],
    stamps: &BTreeMap<usize, Stamp>,
    out: &File,
    out_path: &Path,
    progress: &Progress,
) -> Result<Digest> {
    const BUFFERS: usize = 4;
    let (full_tx, full_rx) = mpsc::sync_channel::<(Vec<u8>, usize)>(BUFFERS);
    let (free_tx, free_rx) = mpsc::channel::<Vec<u8>>();
    for _ in 0..BUFFERS {
        let _ = free_tx.send(vec![0u8; PHASE2_BLOCK]);
    }
    std::thread::scope(|scope| {
        let copier = scope.spawn(move || -> Result<()> {
            let mut opener = Opener::default();
            for region in regions {
                match region {
                    Region::Written(start, end) => {
                        let mut at = *start;
                        while at < *end {
                            let Ok(mut buf) = free_rx.recv() else {
                                return Ok(());
                            };
                            let n = (*end - at).min(PHASE2_BLOCK as u64) as usize;
                            out.read_exact_at(&mut buf[..n], at)
                                .map_err(|e| CliError::io("read back", out_path, e))?;
                            at += n as u64;
                            if full_tx.send((buf, n)).is_err() {
                                return Ok(());
                            }
                        }
                    }
                    Region::Large(slot) => {
                        let member = manifest
                            .members
                            .get(slot.index)
                            .map_or("", |e| e.path.as_str());
                        let path = slot.source.as_path();
                        let mut f = opener
                            .open(path)
                            .map_err(|e| CliError::io("read", path, e))?;
                        let mut done = 0u64;
                        while done < slot.size {
                            let Ok(mut buf) = free_rx.recv() else {
                                return Ok(());
                            };
                            let want = (slot.size - done).min(PHASE2_BLOCK as u64) as usize;
                            let n = read_more(&mut f, &mut buf[..want], path, member)?;
                            out.write_all_at(&buf[..n], slot.at + done)
                                .map_err(|e| CliError::io("write", out_path, e))?;
                            done += n as u64;
                            progress.inc(n as u64);
                            if full_tx.send((buf, n)).is_err() {
                                return Ok(());
                            }
                        }
                        // The open file must still be the one phase 1
                        // hashed, as it was then.
                        let meta = f.metadata().map_err(|e| CliError::io("read", path, e))?;
                        let stamp = stamps
                            .get(&slot.index)
                            .ok_or_else(|| usage("a large file was not hashed"))?;
                        stamp.check(&Stamp::of(&meta, meta.len()), member)?;
                    }
                }
            }
            Ok(())
        });
        let mut hasher = Hasher::new();
        for (buf, used) in full_rx {
            hasher.update(&buf[..used]);
            let _ = free_tx.send(buf);
        }
        copier
            .join()
            .unwrap_or_else(|_| Err(usage("the copying thread stopped unexpectedly")))?;
        Ok(hasher.finish())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn planned_file(name: &str, size: u64) -> Planned {
        Planned::File {
            member: format!("workspace/{name}"),
            source: None,
            executable: false,
            size,
        }
    }

    /// Packs a workspace of one small and one large file, letting
    /// `change` alter the files between the phases.
    fn pack_changing(change: &dyn Fn(&Path)) -> Result<(Manifest, Digest, Vec<u8>)> {
        let t = tempfile::tempdir().unwrap();
        let big = vec![7u8; (SMALL + 1) as usize];
        fs::write(t.path().join("big.bin"), &big).unwrap();
        fs::write(t.path().join("small.txt"), b"small").unwrap();
        let planned = vec![
            Planned::Dir {
                member: "workspace".into(),
            },
            planned_file("big.bin", SMALL + 1),
            planned_file("small.txt", 5),
        ];
        let dir = t.path().to_path_buf();
        pack_with(
            t.path(),
            planned,
            None,
            vec![],
            &t.path().join("p.tar"),
            &Progress::new(true),
            &mut || change(&dir),
        )
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
        assert_eq!(e.report().path.as_deref(), Some("workspace/big.bin"));
        let e = pack_changing(&|d| {
            fs::write(d.join("big.bin"), b"short").unwrap();
        })
        .unwrap_err();
        assert_eq!(e.code(), "member_mismatch");
    }

    #[test]
    fn a_small_file_changed_after_it_was_read_does_not_matter() {
        // Its bytes were hashed and written together in phase 1.
        let (manifest, digest, bytes) = pack_changing(&|d| {
            fs::write(d.join("small.txt"), b"SMALL").unwrap();
        })
        .unwrap();
        assert_eq!(Digest::of(&bytes), digest);
        let small = manifest.find("workspace/small.txt").unwrap().1;
        assert_eq!(small.sha256, Some(Digest::of(b"small")));
    }
}
