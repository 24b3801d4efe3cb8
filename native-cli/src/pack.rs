//! `pillbox checkpoint pack`: pass 1 walks the workspace (and harness
//! state) and hashes every file in parallel, streaming, to build the
//! manifest; pass 2 drives packet-core's [`Writer`], streaming each file
//! again (the writer re-hashes it and refuses a file that changed).

use std::collections::HashMap;
use std::fs::{self, File};
use std::io::{self, Read, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Mutex};

use packet_core::{
    Digest, Entry, ErrorCode, Hasher, Limits, Manifest, Step, Writer, WriterOptions,
};
use serde::Serialize;

use crate::error::{CliError, Result};
use crate::harness::{self, LocateRequest};
use crate::packet_io::CHUNK;
use crate::progress::Progress;
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
    /// Its home.
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

/// Packs; returns the report.
pub fn pack(request: &PackRequest, progress: &Progress) -> Result<PackReport> {
    let workspace = fs::canonicalize(&request.workspace)
        .map_err(|e| CliError::io("open the workspace", &request.workspace, e))?;
    if !workspace.is_dir() {
        return Err(CliError::refused(
            "workspace_not_directory",
            Some(&workspace),
            format!("{} is not a directory", workspace.display()),
            "name the workspace directory to pack",
        ));
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
    if let Some(h) = &request.harness {
        let what = match h.kind {
            packet_core::HarnessKind::Codex => "thread id",
            packet_core::HarnessKind::Claude => "session id",
        };
        harness::check_id(&h.id, what)?;
        let located = harness::adapter(h.kind).locate(&LocateRequest {
            home: &h.home,
            id: &h.id,
            workspace: &workspace,
            expect_model: h.expect_model.as_deref(),
            walk: &request.walk,
        })?;
        walk.planned.extend(located.planned);
        for (k, v) in located.walk.exclusions {
            *walk.exclusions.entry(k).or_default() += v;
        }
        walk.skipped.extend(located.walk.skipped);
        harness_source = Some(located.source_path);
        harness_descriptor = Some(located.harness);
    }

    let (entries, sources) = hash_all(std::mem::take(&mut walk.planned), progress)?;
    let manifest = Manifest::build(
        entries,
        harness_descriptor,
        walk.exclusion_records(),
        &Limits::FORMAT,
    )
    .map_err(CliError::Unpackable)?;
    let body_sources: Vec<Option<PathBuf>> = {
        let mut by_member = sources;
        manifest
            .members
            .iter()
            .map(|e| by_member.remove(&e.path))
            .collect()
    };

    let size = manifest.packet_size();
    progress.phase("write", manifest.totals.bytes);
    let (digest, output) = if request.output == Path::new("-") {
        let stdout = io::stdout();
        let digest = write_packet(
            &manifest,
            &body_sources,
            stdout,
            progress,
            "standard output",
        )?;
        (digest, "-".to_owned())
    } else {
        write_to_file(&manifest, &body_sources, &request.output, progress)?
    };
    progress.finish();
    walk.skipped
        .sort_by(|a, b| packet_core::path::compare(&a.path, &b.path));
    Ok(PackReport {
        schema: "pillbox.checkpoint.pack/1",
        digest: digest.to_string(),
        size,
        members: manifest.totals.members,
        totals: manifest.totals,
        output,
        workspace: workspace.display().to_string(),
        harness: manifest
            .harness
            .as_ref()
            .map(|h| HarnessReport::packed(h, harness_source.as_deref())),
        exclusions: manifest
            .exclusions
            .iter()
            .map(ExclusionReport::from)
            .collect(),
        skipped: walk.skipped,
    })
}

/// The size and digest of one file, or why it could not be read.
type HashResult = Result<(u64, Digest)>;

/// Hashes every planned file on all cores (1 MiB streaming reads per file);
/// returns the manifest entries and each file member's source path.
fn hash_all(
    planned: Vec<Planned>,
    progress: &Progress,
) -> Result<(Vec<Entry>, HashMap<String, PathBuf>)> {
    let files: Vec<(&str, &Path)> = planned
        .iter()
        .filter_map(|p| match p {
            Planned::File { member, source, .. } => Some((member.as_str(), source.as_path())),
            _ => None,
        })
        .collect();
    let total: u64 = files
        .iter()
        .filter_map(|(_, s)| fs::symlink_metadata(s).ok())
        .map(|m| m.len())
        .sum();
    progress.phase("hash", total);
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
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some((_, source)) = files.get(i) else {
                        break;
                    };
                    let r = hash_file(source, &mut buf, progress);
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
    let mut sources = HashMap::with_capacity(files.len());
    for p in planned {
        match p {
            Planned::Dir { member } => entries.push(Entry::dir(member)),
            Planned::Symlink { member, target } => entries.push(Entry::symlink(member, target)),
            Planned::File {
                member,
                source,
                executable,
            } => {
                let (size, digest) = match results.next().flatten() {
                    Some(r) => r?,
                    None => return Err(first_error_or_usage()),
                };
                entries.push(Entry::file(member.clone(), size, digest, executable));
                sources.insert(member, source);
            }
        }
    }
    Ok((entries, sources))
}

fn first_error_or_usage() -> CliError {
    CliError::refused(
        "pack_interrupted",
        None,
        "hashing stopped after an earlier failure",
        "fix the error reported for the file above and pack again",
    )
}

/// Opens a file without following a symlink that replaced it.
fn open_nofollow(path: &Path) -> io::Result<File> {
    fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
}

fn hash_file(path: &Path, buf: &mut [u8], progress: &Progress) -> Result<(u64, Digest)> {
    let mut f = open_nofollow(path).map_err(|e| CliError::io("read", path, e))?;
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
    }
    Ok((size, hasher.finish()))
}

/// Writes to a temporary file beside `output`, then renames it into place,
/// so the path never holds a partial packet. No fsync: every reader checks
/// the packet's digest, so a packet cut short by a crash is refused, not
/// trusted.
fn write_to_file(
    manifest: &Manifest,
    sources: &[Option<PathBuf>],
    output: &Path,
    progress: &Progress,
) -> Result<(Digest, String)> {
    let dir = match output.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let tmp = tempfile::Builder::new()
        .prefix(".pillbox-pack-")
        .tempfile_in(&dir)
        .map_err(|e| CliError::io("create a temporary file in", &dir, e))?;
    let file = tmp
        .as_file()
        .try_clone()
        .map_err(|e| CliError::io("write", tmp.path(), e))?;
    let digest = write_packet(
        manifest,
        sources,
        file,
        progress,
        &output.display().to_string(),
    )?;
    let f = tmp.as_file();
    f.set_permissions(fs::Permissions::from_mode(0o644))
        .map_err(|e| CliError::io("set permissions of", tmp.path(), e))?;
    tmp.persist(output)
        .map_err(|e| CliError::io("rename into place", output, e.error))?;
    let abs = fs::canonicalize(output).map_err(|e| CliError::io("open", output, e))?;
    Ok((digest, abs.display().to_string()))
}

/// A full-size buffer and how many of its bytes are used.
type Block = (Vec<u8>, usize);

/// Why the producing side stopped.
enum Stop {
    /// A failure to report.
    Failed(CliError),
    /// The output thread stopped; its own error explains why.
    OutputStopped,
}

impl From<CliError> for Stop {
    fn from(e: CliError) -> Self {
        Stop::Failed(e)
    }
}

/// Drives the writer and streams the packet into `sink`. This thread reads
/// the files and feeds them to the writer (which re-hashes every body);
/// a second thread hashes the packet and writes it, in 1 MiB blocks that
/// travel between the two without being copied.
fn write_packet<W: Write + Send>(
    manifest: &Manifest,
    sources: &[Option<PathBuf>],
    sink: W,
    progress: &Progress,
    label: &str,
) -> Result<Digest> {
    let (full_tx, full_rx) = mpsc::sync_channel::<Block>(2);
    let (free_tx, free_rx) = mpsc::channel::<Vec<u8>>();
    for _ in 0..3 {
        let _ = free_tx.send(vec![0u8; CHUNK]);
    }
    std::thread::scope(|scope| {
        let output = scope.spawn(move || -> io::Result<Digest> {
            let mut sink = sink;
            let mut hasher = Hasher::new();
            for (buf, used) in full_rx {
                hasher.update(&buf[..used]);
                sink.write_all(&buf[..used])?;
                let _ = free_tx.send(buf);
            }
            sink.flush()?;
            Ok(hasher.finish())
        });
        let produced = produce(manifest, sources, progress, full_tx, &free_rx);
        let written = output.join();
        match (produced, written) {
            (Err(Stop::Failed(e)), _) => Err(e),
            (_, Ok(Err(e))) => Err(CliError::io("write", label, e)),
            (Ok(()), Ok(Ok(digest))) => Ok(digest),
            _ => Err(CliError::refused(
                "pack_interrupted",
                None,
                "the output thread stopped unexpectedly",
                "pack again; if it persists, report this bug",
            )),
        }
    })
}

/// The block being filled, and the channels to the output thread.
struct Blocks<'a> {
    buf: Vec<u8>,
    used: usize,
    full: mpsc::SyncSender<Block>,
    free: &'a mpsc::Receiver<Vec<u8>>,
}

impl Blocks<'_> {
    /// Hands the current block to the output thread and takes an empty one.
    fn send(&mut self) -> Result<(), Stop> {
        if self.used == 0 {
            return Ok(());
        }
        let next = self.free.recv().map_err(|_| Stop::OutputStopped)?;
        let full = std::mem::replace(&mut self.buf, next);
        self.full
            .send((full, self.used))
            .map_err(|_| Stop::OutputStopped)?;
        self.used = 0;
        Ok(())
    }

    fn put(&mut self, mut bytes: &[u8]) -> Result<(), Stop> {
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
}

fn produce(
    manifest: &Manifest,
    sources: &[Option<PathBuf>],
    progress: &Progress,
    full: mpsc::SyncSender<Block>,
    free: &mpsc::Receiver<Vec<u8>>,
) -> Result<(), Stop> {
    let first = free.recv().map_err(|_| Stop::OutputStopped)?;
    let mut out = Blocks {
        buf: first,
        used: 0,
        full,
        free,
    };
    let options = WriterOptions {
        packet_digest: false,
        verify_bodies: true,
    };
    let mut writer = Writer::with_options(manifest, options);
    loop {
        match writer.next().map_err(CliError::Unpackable)? {
            Step::Bytes(bytes) => out.put(bytes)?,
            Step::Body { index, size, .. } => {
                let entry = &manifest.members[index];
                let Some(source) = sources.get(index).and_then(Option::as_ref) else {
                    return Err(CliError::Unpackable(
                        packet_core::Error::new(ErrorCode::Usage, "no source file for this member")
                            .at_path(&entry.path),
                    )
                    .into());
                };
                let mut f = open_nofollow(source).map_err(|e| CliError::io("read", source, e))?;
                let mut remaining = size;
                while remaining > 0 {
                    if out.used == out.buf.len() {
                        out.send()?;
                    }
                    let space = &mut out.buf[out.used..];
                    let want = (space.len() as u64).min(remaining) as usize;
                    let n = match f.read(&mut space[..want]) {
                        Ok(n) => n,
                        Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                        Err(e) => return Err(CliError::io("read", source, e).into()),
                    };
                    if n == 0 {
                        return Err(CliError::Unpackable(
                            packet_core::Error::new(
                                ErrorCode::MemberMismatch,
                                "the file shrank while it was being packed",
                            )
                            .at_path(&entry.path),
                        )
                        .into());
                    }
                    writer.body(&space[..n]).map_err(CliError::Unpackable)?;
                    out.used += n;
                    remaining -= n as u64;
                    progress.inc(n as u64);
                }
                // One byte more means the file grew: the writer refuses it.
                let mut probe = [0u8; 1];
                let n = f
                    .read(&mut probe)
                    .map_err(|e| CliError::io("read", source, e))?;
                if n > 0 {
                    writer.body(&probe).map_err(CliError::Unpackable)?;
                }
            }
            Step::Done(_) => break,
        }
    }
    out.send()
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
                source: file.clone(),
                executable: false,
            },
        ];
        let (entries, mut sources) = hash_all(planned, &Progress::new(true)).unwrap();
        let manifest = Manifest::build(entries, None, vec![], &Limits::FORMAT).unwrap();
        let body_sources: Vec<Option<PathBuf>> = manifest
            .members
            .iter()
            .map(|e| sources.remove(&e.path))
            .collect();
        change(&file);
        write_packet(
            &manifest,
            &body_sources,
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
        assert_eq!(e.report().path.as_deref(), Some("workspace/f.txt"));
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
