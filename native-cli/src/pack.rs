//! `pillbox checkpoint pack`: the workspace (and harness state) is walked
//! first, on every core. Into a file (the usual case) the packet is laid
//! out in advance: each small file is then read once, on every core,
//! hashed and written at its place; each large file is hashed, then copied
//! while the whole packet is hashed (see `into_file`). To standard output,
//! which cannot seek, pass 1 hashes every file in parallel to build the
//! manifest, and pass 2 drives packet-core's [`Writer`], streaming each
//! file again and refusing a file that is not, unchanged, the one pass 1
//! hashed (its inode, size and change times; see `Stamp::check`), while a
//! second thread computes the packet digest.

mod into_file;

use std::fs::{self, File};
use std::io::{self, Read, Write};
use std::os::fd::OwnedFd;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex};

use packet_core::{
    Digest, ErrorCode, Hasher, Kind, Limits, Manifest, Member, Step, Writer, WriterOptions,
};
use rustix::fs::{openat, Mode, OFlags};
use serde::Serialize;

use crate::error::{CliError, Refused, Result};
use crate::harness::{self, LocateRequest};
use crate::packet_io::CHUNK;
use crate::progress::Progress;
use crate::remote::Bodies;
use crate::report::{ExclusionReport, HarnessReport, Totals};
use crate::walk::{walk_tree, Planned, Skipped, Walk, WalkOptions};

/// What to pack.
pub struct PackRequest {
    /// The workspace directory.
    pub workspace: PathBuf,
    /// The output file, or `-` for standard output.
    pub output: PathBuf,
    /// Harness state to carry: the adapter's kind, its home and the id.
    pub harness: Option<HarnessRequest>,
    /// Walk options.
    pub walk: WalkOptions,
}

/// Harness state to carry.
pub struct HarnessRequest {
    /// Which harness.
    pub kind: packet_core::HarnessKind,
    /// Its home; for OpenCode, which finds its own data, the `opencode`
    /// program that exports the session.
    pub home: PathBuf,
    /// Thread or session id.
    pub id: String,
    /// The model the caller expects the log to record.
    pub expect_model: Option<String>,
}

/// The `pillbox.checkpoint.pack/1` object.
#[derive(Debug, Serialize)]
pub struct PackReport {
    /// `pillbox.checkpoint.pack/1`.
    pub schema: &'static str,
    /// The packet digest, `sha256:<hex>`.
    pub digest: String,
    /// Packet size in bytes.
    pub size: u64,
    /// Members after `packet.json`.
    pub members: u64,
    /// Manifest totals.
    pub totals: Totals,
    /// Absolute path of the packet written, or `-` for standard output.
    pub output: String,
    /// Absolute path of the workspace packed.
    pub workspace: String,
    /// Harness state carried.
    pub harness: Option<HarnessReport>,
    /// Exclusion rules that applied, as recorded in the manifest.
    pub exclusions: Vec<ExclusionReport>,
    /// Credential files, special files and escaping symlinks left out.
    pub skipped: Vec<Skipped>,
}

/// What the walk found: the members to pack and what was left out.
struct Collected {
    workspace: PathBuf,
    planned: Vec<Planned>,
    harness: Option<packet_core::Harness>,
    harness_source: Option<PathBuf>,
    exclusions: Vec<packet_core::Exclusion>,
    skipped: Vec<Skipped>,
    /// A session log the harness printed (a temporary file), kept until the
    /// packet is written.
    _harness_scratch: Option<tempfile::TempPath>,
}

/// Walks the workspace and locates the harness state.
fn collect(request: &PackRequest) -> Result<Collected> {
    let workspace = fs::canonicalize(&request.workspace)
        .map_err(|e| CliError::io("open the workspace", &request.workspace, e))?;
    if !workspace.is_dir() {
        return Err(Refused::WorkspaceNotDirectory { workspace }.into());
    }
    let mut walk = Walk::default();
    walk_tree(
        &workspace,
        packet_core::path::WORKSPACE_ROOT,
        &request.walk,
        &mut walk,
    )?;
    let mut harness_descriptor = None;
    let mut harness_source = None;
    let mut harness_scratch = None;
    if let Some(h) = &request.harness {
        harness::check_id(h.kind, &h.id)?;
        let workspace_bytes = walk
            .planned
            .iter()
            .map(|p| match p {
                Planned::File { size, .. } => *size,
                _ => 0,
            })
            .sum();
        let located = harness::adapter(h.kind).locate(&LocateRequest {
            home: &h.home,
            id: &h.id,
            workspace: &workspace,
            expect_model: h.expect_model.as_deref(),
            walk: &request.walk,
            workspace_bytes,
        })?;
        walk.planned.extend(located.planned);
        for (k, v) in located.walk.exclusions {
            *walk.exclusions.entry(k).or_default() += v;
        }
        walk.skipped.extend(located.walk.skipped);
        harness_source = located.source_path;
        harness_descriptor = Some(located.harness);
        harness_scratch = located.scratch;
    }
    let planned = std::mem::take(&mut walk.planned);
    let exclusions = walk.exclusion_records();
    walk.skipped
        .sort_by(|a, b| packet_core::path::compare(&a.path, &b.path));
    Ok(Collected {
        workspace,
        planned,
        harness: harness_descriptor,
        harness_source,
        exclusions,
        skipped: walk.skipped,
        _harness_scratch: harness_scratch,
    })
}

/// Packs; returns the report.
pub fn pack(request: &PackRequest, progress: &Progress) -> Result<PackReport> {
    let c = collect(request)?;
    let (manifest, digest, output) = if request.output == Path::new("-") {
        let (entries, sources) = hash_all(&c.workspace, c.planned, progress)?;
        let manifest = Manifest::build(entries, c.harness, c.exclusions, &Limits::FORMAT)
            .map_err(CliError::Unpackable)?;
        progress.phase("write", manifest.totals.bytes);
        let stdout = io::stdout();
        let digest = write_packet(
            &manifest,
            &sources,
            stdout.lock(),
            progress,
            "standard output",
        )?;
        (manifest, digest, "-".to_owned())
    } else {
        into_file::pack_into_file(
            &c.workspace,
            c.planned,
            c.harness,
            c.exclusions,
            &request.output,
            progress,
            &mut || {},
        )?
    };
    progress.finish();
    Ok(report(
        &manifest,
        &digest,
        output,
        &c.workspace,
        c.harness_source.as_deref(),
        c.skipped,
    ))
}

fn report(
    manifest: &Manifest,
    digest: &Digest,
    output: String,
    workspace: &Path,
    harness_source: Option<&Path>,
    skipped: Vec<Skipped>,
) -> PackReport {
    PackReport {
        schema: "pillbox.checkpoint.pack/1",
        digest: digest.to_string(),
        size: manifest.packet_size(),
        members: manifest.totals.members,
        totals: manifest.totals,
        output,
        workspace: workspace.display().to_string(),
        harness: manifest
            .harness
            .as_ref()
            .map(|h| HarnessReport::packed(h, harness_source)),
        exclusions: manifest
            .exclusions
            .iter()
            .map(ExclusionReport::from)
            .collect(),
        skipped,
    }
}

/// A workspace packed in memory only: its manifest and digest (computed
/// as `pack -o -` does, every file read twice and checked unchanged in
/// between), the pack report (`output` is `-`), and where each body is.
pub struct Packed {
    /// The manifest.
    pub manifest: Manifest,
    /// The packet digest.
    pub digest: Digest,
    /// What `pack` would print.
    pub report: PackReport,
    /// Each file member's source.
    pub bodies: WorkspaceBodies,
}

/// Computes the packet `request` describes without writing it anywhere
/// (`save`): the bodies stay in the workspace, read again only for what
/// the store lacks.
pub fn pack_in_memory(request: &PackRequest, progress: &Progress) -> Result<Packed> {
    let c = collect(request)?;
    let (entries, sources) = hash_all(&c.workspace, c.planned, progress)?;
    let manifest = Manifest::build(entries, c.harness, c.exclusions, &Limits::FORMAT)
        .map_err(CliError::Unpackable)?;
    progress.phase("digest", manifest.packet_size());
    let digest = write_packet(&manifest, &sources, io::sink(), progress, "the digest")?;
    let report = report(
        &manifest,
        &digest,
        "-".to_owned(),
        &c.workspace,
        c.harness_source.as_deref(),
        c.skipped,
    );
    let mut by_member = vec![None; manifest.members.len()];
    let mut files = sources.into_iter();
    for (slot, m) in by_member.iter_mut().zip(&manifest.members) {
        if m.kind == Kind::File {
            *slot = files.next().map(|s| (s.path, m.path.clone()));
        }
    }
    Ok(Packed {
        manifest,
        digest,
        report,
        bodies: WorkspaceBodies { by_member },
    })
}

/// The bodies of a packet packed in memory, in the workspace's files.
pub struct WorkspaceBodies {
    /// Member index → (source file, member path).
    by_member: Vec<Option<(PathBuf, String)>>,
}

impl WorkspaceBodies {
    fn source(&self, index: usize) -> Result<&(PathBuf, String)> {
        self.by_member
            .get(index)
            .and_then(Option::as_ref)
            .ok_or_else(|| CliError::Bug(format!("member {index} has no source file")))
    }

    /// Opens a file without following a symlink that replaced it.
    fn open_file(&self, index: usize) -> Result<File> {
        use std::os::unix::fs::OpenOptionsExt;
        let (path, _) = self.source(index)?;
        fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW)
            .open(path)
            .map_err(|_| self.changed(index))
    }
}

impl Bodies for WorkspaceBodies {
    fn open(&self, index: usize) -> Result<Box<dyn Read + '_>> {
        Ok(Box::new(self.open_file(index)?))
    }

    fn read_at(&self, index: usize, offset: u64, buf: &mut [u8]) -> Result<()> {
        use std::os::unix::fs::FileExt;
        self.open_file(index)?
            .read_exact_at(buf, offset)
            .map_err(|_| self.changed(index))
    }

    fn changed(&self, index: usize) -> CliError {
        let member = self
            .by_member
            .get(index)
            .and_then(Option::as_ref)
            .map_or_else(String::new, |(_, m)| m.clone());
        Refused::WorkspaceChanged { member }.into()
    }

    fn label(&self, index: usize) -> PathBuf {
        self.source(index)
            .map_or_else(|_| PathBuf::from("the workspace"), |(p, _)| p.clone())
    }
}

/// What pass 1 saw of a file: its size as read and the identity and
/// change times of the inode it read. Pass 2 compares the file it reads
/// with this (see [`Stamp::check`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Stamp {
    size: u64,
    dev: u64,
    ino: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

impl Stamp {
    fn of(meta: &fs::Metadata, size: u64) -> Stamp {
        Stamp {
            size,
            dev: meta.dev(),
            ino: meta.ino(),
            mtime: (meta.mtime(), meta.mtime_nsec()),
            ctime: (meta.ctime(), meta.ctime_nsec()),
        }
    }

    /// Refuses a file that is not the one pass 1 hashed, unchanged: the
    /// same refusal the writer's own body check gives (a different size is
    /// `member_mismatch`, anything else `member_digest_mismatch`). Every
    /// write to a file moves its ctime, which no user can set back, so a
    /// file whose stamp still matches after it was read holds the bytes
    /// pass 1 hashed. Were that ever not so, the packet could not pass
    /// verification anywhere: its bytes would disagree with its manifest.
    fn check(&self, now: &Stamp, member: &str) -> Result<()> {
        if now == self {
            return Ok(());
        }
        let (code, message) = if now.size != self.size {
            (
                ErrorCode::MemberMismatch,
                "the file changed size after it was hashed",
            )
        } else {
            (
                ErrorCode::MemberDigestMismatch,
                "the file changed after it was hashed",
            )
        };
        Err(CliError::Unpackable(
            packet_core::Error::new(code, message).at_path(member),
        ))
    }
}

/// Where a file member's bytes come from, and what pass 1 saw of them.
struct BodySource {
    path: PathBuf,
    stamp: Stamp,
}

/// The size, stamp and digest of one file, or why it could not be read.
type HashResult = Result<(Stamp, Digest)>;

/// Hashes every planned file on all cores (streaming reads into one reused
/// 1 MiB buffer per thread); returns the manifest entries and, for each
/// file member in the packet's order, its source and stamp.
fn hash_all(
    workspace: &Path,
    mut planned: Vec<Planned>,
    progress: &Progress,
) -> Result<(Vec<Member>, Vec<BodySource>)> {
    // The packet's order, so that the files' sources line up with the
    // writer's bodies without a lookup table.
    crate::walk::sort_planned(&mut planned);
    let files: Vec<PathBuf> = planned
        .iter()
        .filter(|p| matches!(p, Planned::File { .. }))
        .map(|p| {
            p.source(workspace)
                .ok_or_else(stopped_after_earlier_failure)
        })
        .collect::<Result<_>>()?;
    if progress.is_shown() {
        let total: u64 = files
            .iter()
            .filter_map(|s| fs::symlink_metadata(s).ok())
            .map(|m| m.len())
            .sum();
        progress.phase("hash", total);
    }
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(files.len())
        .max(1);
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<HashResult>>> =
        Mutex::new((0..files.len()).map(|_| None).collect());
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| {
                let mut buf = vec![0u8; CHUNK];
                let mut opener = Opener::default();
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(source) = files.get(i) else {
                        break;
                    };
                    let r = hash_file(&mut opener, source, &mut buf, progress);
                    let failed = r.is_err();
                    if let Ok(mut all) = results.lock() {
                        all[i] = Some(r);
                    }
                    if failed {
                        // Stop handing out work; the first error is reported.
                        next.store(files.len(), Ordering::Relaxed);
                        break;
                    }
                }
            });
        }
    });
    let mut results = results.into_inner().unwrap_or_default().into_iter();
    let mut entries = Vec::with_capacity(planned.len());
    let mut sources = Vec::new();
    let mut files = files.into_iter();
    for p in planned {
        match p {
            Planned::Dir { member } => entries.push(Member::dir(member)),
            Planned::Symlink { member, target } => entries.push(Member::symlink(member, target)),
            Planned::File {
                member, executable, ..
            } => {
                let (stamp, digest) = match results.next().flatten() {
                    Some(r) => r?,
                    None => return Err(stopped_after_earlier_failure()),
                };
                let Some(path) = files.next() else {
                    return Err(stopped_after_earlier_failure());
                };
                entries.push(Member::file(member, stamp.size, digest, executable));
                sources.push(BodySource { path, stamp });
            }
        }
    }
    Ok((entries, sources))
}

fn stopped_after_earlier_failure() -> CliError {
    Refused::PackAfterEarlierFailure {}.into()
}

/// Opens files for reading relative to a descriptor of the last folder
/// used: files of one folder are neighbours in the packet's order, so each
/// folder's path is resolved once per pass rather than once per file.
#[derive(Default)]
struct Opener {
    dir: Option<(PathBuf, OwnedFd)>,
}

impl Opener {
    /// Opens `path` without following a symlink that replaced it, and
    /// without updating its access time where the caller owns the file.
    fn open(&mut self, path: &Path) -> io::Result<File> {
        let (Some(parent), Some(name)) = (path.parent(), path.file_name()) else {
            return Err(io::Error::from(io::ErrorKind::InvalidInput));
        };
        let fd = match &self.dir {
            // Byte equality: every path here is built the same way, and a
            // component-wise comparison would parse both each time.
            Some((dir, fd)) if dir.as_os_str() == parent.as_os_str() => fd,
            _ => {
                let flags = OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC;
                let fd = rustix::fs::open(parent, flags, Mode::empty())?;
                &self.dir.insert((parent.to_path_buf(), fd)).1
            }
        };
        let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let file = match openat(fd, name, flags | OFlags::NOATIME, Mode::empty()) {
            // O_NOATIME is refused on files owned by someone else.
            Err(rustix::io::Errno::PERM) => openat(fd, name, flags, Mode::empty())?,
            r => r?,
        };
        Ok(File::from(file))
    }
}

/// Reads a whole file into the hasher: one read for a file smaller than
/// the buffer (a short read of a regular file is its end).
fn hash_file(opener: &mut Opener, path: &Path, buf: &mut [u8], progress: &Progress) -> HashResult {
    let mut f = opener
        .open(path)
        .map_err(|e| CliError::io("read", path, e))?;
    let meta = f.metadata().map_err(|e| CliError::io("read", path, e))?;
    let mut hasher = Hasher::new();
    let mut size = 0u64;
    loop {
        let n = match f.read(buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(CliError::io("read", path, e)),
        };
        hasher.update(&buf[..n]);
        size += n as u64;
        progress.inc(n as u64);
        if n < buf.len() && size >= meta.len() {
            break;
        }
    }
    // Bytes that arrive after this read, or a short read cut short, leave
    // the size or ctime different in pass 2, which refuses the file.
    Ok((Stamp::of(&meta, size), hasher.finish()))
}

/// The refusal of a file whose size changed while it was being packed
/// (`how`: "shrank" or "grew").
fn changed_size(member: &str, how: &str) -> CliError {
    CliError::Unpackable(
        packet_core::Error::new(
            ErrorCode::MemberMismatch,
            format!("the file {how} while it was being packed"),
        )
        .at_path(member),
    )
}

/// Reads the next bytes of a body into `buf` (not empty): at least one.
/// The file's end, with bytes still expected, means it shrank.
fn read_more(f: &mut File, buf: &mut [u8], path: &Path, member: &str) -> Result<usize> {
    loop {
        match f.read(buf) {
            Ok(0) => return Err(changed_size(member, "shrank")),
            Ok(n) => return Ok(n),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(CliError::io("read", path, e)),
        }
    }
}

/// A full block shared with the hashing thread, and how many of its bytes are used.
type Block = (Arc<Vec<u8>>, usize);

/// Blocks in circulation: one being filled, the rest queued for or being
/// hashed on the other thread.
const BLOCKS: usize = 4;

/// Drives the writer and streams the packet into `sink`. This thread reads
/// the files into 1 MiB blocks and writes each full block; a second thread
/// hashes the same blocks (shared, not copied) for the packet digest.
///
/// Bodies are not hashed again here (`verify_bodies: false`): each file's
/// stamp from pass 1 is checked on the open file after its bytes were read
/// ([`Stamp::check`]), which refuses a file that changed in between.
fn write_packet<W: Write>(
    manifest: &Manifest,
    sources: &[BodySource],
    sink: W,
    progress: &Progress,
    label: &str,
) -> Result<Digest> {
    let (full_tx, full_rx) = mpsc::sync_channel::<Block>(BLOCKS);
    let (free_tx, free_rx) = mpsc::channel::<Arc<Vec<u8>>>();
    std::thread::scope(|scope| {
        let hasher = scope.spawn(move || {
            let mut hasher = Hasher::new();
            for (block, used) in full_rx {
                hasher.update(&block[..used]);
                let _ = free_tx.send(block);
            }
            hasher.finish()
        });
        let mut out = Blocks {
            buf: vec![0u8; CHUNK],
            used: 0,
            made: 1,
            full: full_tx,
            free: free_rx,
            sink,
            label,
        };
        let produced = produce(manifest, sources, progress, &mut out).and_then(|()| out.flush());
        drop(out);
        let digest = hasher.join();
        produced?;
        digest.map_err(|_| CliError::from(Refused::PackHashingStopped {}))
    })
}

/// The block being filled, the channels to the hashing thread and the sink.
struct Blocks<'a, W: Write> {
    buf: Vec<u8>,
    used: usize,
    /// Blocks allocated so far (at most [`BLOCKS`]).
    made: usize,
    full: mpsc::SyncSender<Block>,
    free: mpsc::Receiver<Arc<Vec<u8>>>,
    sink: W,
    label: &'a str,
}

impl<W: Write> Blocks<'_, W> {
    /// Hands the current block to the hashing thread, writes it, and takes
    /// an empty one.
    fn send(&mut self) -> Result<()> {
        if self.used == 0 {
            return Ok(());
        }
        let next = if self.made < BLOCKS {
            self.made += 1;
            vec![0u8; CHUNK]
        } else {
            self.free
                .recv()
                .ok()
                .and_then(|b| Arc::try_unwrap(b).ok())
                .unwrap_or_else(|| vec![0u8; CHUNK])
        };
        let block = Arc::new(std::mem::replace(&mut self.buf, next));
        let used = std::mem::take(&mut self.used);
        self.full
            .send((Arc::clone(&block), used))
            .map_err(|_| CliError::from(Refused::PackHashingStopped {}))?;
        self.sink
            .write_all(&block[..used])
            .map_err(|e| CliError::io("write", self.label, e))
    }

    fn put(&mut self, mut bytes: &[u8]) -> Result<()> {
        while !bytes.is_empty() {
            if self.used == self.buf.len() {
                self.send()?;
            }
            let n = bytes.len().min(self.buf.len() - self.used);
            self.buf[self.used..self.used + n].copy_from_slice(&bytes[..n]);
            self.used += n;
            bytes = &bytes[n..];
        }
        Ok(())
    }

    fn flush(&mut self) -> Result<()> {
        self.send()?;
        self.sink
            .flush()
            .map_err(|e| CliError::io("write", self.label, e))
    }
}

fn produce<W: Write>(
    manifest: &Manifest,
    sources: &[BodySource],
    progress: &Progress,
    out: &mut Blocks<'_, W>,
) -> Result<()> {
    let options = WriterOptions {
        packet_digest: false,
        verify_bodies: false,
    };
    let mut writer = Writer::with_options(manifest, options);
    // `sources` holds every file member in the packet's order; an empty
    // file has no body step, so skip the file members before `index`.
    let mut opener = Opener::default();
    let mut files = sources.iter();
    let mut skipped_to = 0;
    let mut source_of = |index: usize| {
        for e in manifest.members.get(skipped_to..index).unwrap_or_default() {
            if e.kind == Kind::File {
                files.next();
            }
        }
        skipped_to = index + 1;
        files.next()
    };
    loop {
        match writer.next().map_err(CliError::unpackable)? {
            Step::Bytes(bytes) => out.put(bytes)?,
            Step::Body { index, size, .. } => {
                let entry = &manifest.members[index];
                let Some(source) = source_of(index) else {
                    return Err(CliError::Bug(format!(
                        "no source file for the member {:?}",
                        entry.path
                    )));
                };
                let path = source.path.as_path();
                let mut f = opener
                    .open(path)
                    .map_err(|e| CliError::io("read", path, e))?;
                let mut remaining = size;
                while remaining > 0 {
                    if out.used == out.buf.len() {
                        out.send()?;
                    }
                    let space = &mut out.buf[out.used..];
                    let want = (space.len() as u64).min(remaining) as usize;
                    let n = read_more(&mut f, &mut space[..want], path, &entry.path)?;
                    writer.body(&space[..n]).map_err(CliError::unpackable)?;
                    out.used += n;
                    remaining -= n as u64;
                    progress.inc(n as u64);
                }
                // The open file must still be the one pass 1 hashed, as it
                // was then: same inode, size and change times.
                let meta = f.metadata().map_err(|e| CliError::io("read", path, e))?;
                source
                    .stamp
                    .check(&Stamp::of(&meta, meta.len()), &entry.path)?;
            }
            Step::Done(_) => break,
        }
    }
    if source_of(manifest.members.len()).is_some() {
        return Err(CliError::Bug("more source files than file members".into()));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Hashes a one-file workspace, lets `change` alter the file, then
    /// writes: the writer must refuse the changed file.
    fn write_after(change: impl FnOnce(&Path)) -> CliError {
        let t = tempfile::tempdir().unwrap();
        let file = t.path().join("f.txt");
        fs::write(&file, b"0123456789").unwrap();
        let planned = vec![
            Planned::Dir {
                member: "workspace".into(),
            },
            Planned::File {
                member: "workspace/f.txt".into(),
                source: Some(file.clone()),
                executable: false,
                size: 10,
            },
        ];
        let (entries, sources) = hash_all(t.path(), planned, &Progress::new(true)).unwrap();
        let manifest = Manifest::build(entries, None, vec![], &Limits::FORMAT).unwrap();
        change(&file);
        write_packet(
            &manifest,
            &sources,
            io::sink(),
            &Progress::new(true),
            "sink",
        )
        .unwrap_err()
    }

    #[test]
    fn a_file_changed_between_hashing_and_writing_is_refused() {
        let e = write_after(|f| fs::write(f, b"0123456780").unwrap());
        assert_eq!(e.code(), "member_digest_mismatch");
        assert_eq!(e.report().details.path.as_deref(), Some("workspace/f.txt"));
        assert_eq!(
            write_after(|f| fs::write(f, b"01234567890").unwrap()).code(),
            "member_mismatch"
        );
        assert_eq!(
            write_after(|f| fs::write(f, b"012").unwrap()).code(),
            "member_mismatch"
        );
        let e = write_after(|f| {
            fs::remove_file(f).unwrap();
            std::os::unix::fs::symlink("/etc/hostname", f).unwrap();
        });
        assert_eq!(
            e.code(),
            "io",
            "a file replaced by a symlink is not followed"
        );
    }
}
