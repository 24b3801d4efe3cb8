//! Pass 1 of a packet built before it is written (`pack -o -`, `save`):
//! every listed file hashed on all cores and screened for secrets in the
//! same read, or vouched for by the workspace record without being opened.

use std::io::{self, Read};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use packet_core::secrets::{Detector, Finding, Scanner};
use packet_core::{Digest, Hasher, Limits, Manifest, Member};

use super::open::{changed_size, stat_size, Opener, Stamp};
use super::secrets::Found;
use crate::chunking::{self, Piece, BODIES};
use crate::error::{CliError, Refused, Result};
use crate::packet_io::CHUNK;
use crate::progress::Progress;
use crate::record::{Identity, InOrder, KeptFinding, Record, Seen};
use crate::walk::{checked_path, FileSource, Planned};

/// Where a file member's bytes come from, and what pass 1 saw of them.
pub(super) struct BodySource {
    pub(super) source: FileSource,
    pub(super) stamp: Stamp,
    /// What the detector found in it.
    pub(super) findings: Vec<Finding>,
    /// Its chunks, when it is large and was cut as it was read.
    pub(super) pieces: Option<Vec<Piece>>,
    /// False when the workspace record vouched for it and it was not read.
    pub(super) read: bool,
}

/// What pass 1 learnt of one file.
struct FileHashed {
    stamp: Stamp,
    digest: Digest,
    findings: Vec<Finding>,
    pieces: Option<Vec<Piece>>,
    read: bool,
}

/// One file's [`FileHashed`], or why it could not be read.
type HashResult = Result<FileHashed>;

/// How pass 1 goes about the files (`save`; `pack` reads every file).
#[derive(Default)]
pub(super) struct HashOptions<'a> {
    /// The workspace record: a file it vouches for is not read.
    pub(super) record: Option<&'a Record>,
    /// Cut large files into chunks as they are read.
    pub(super) cut_large: bool,
}

/// What the record vouches for of `file` (listed by the walk as
/// `planned`, asked in packet order): its digest and findings, when its
/// identity is the recorded one, it is not racy, and the findings were
/// made under this binary's rules.
fn vouched(
    record: &mut InOrder<'_>,
    same_rules: bool,
    planned: &Planned,
    file: &ToHash,
) -> Option<FileHashed> {
    if !same_rules {
        return None;
    }
    let identity = match planned.identity() {
        Some(id) => id,
        // A harness adapter's file: its stat now, not following a link.
        None => match &file.source {
            FileSource::Path(path) => {
                let stat = rustix::fs::statat(
                    rustix::fs::CWD,
                    path,
                    rustix::fs::AtFlags::SYMLINK_NOFOLLOW,
                )
                .ok()?;
                if rustix::fs::FileType::from_raw_mode(stat.st_mode)
                    != rustix::fs::FileType::RegularFile
                {
                    return None;
                }
                let id = Identity::of(&stat);
                (id.size == file.size).then_some(id)?
            }
            FileSource::Beneath { .. } => return None,
        },
    };
    let entry = match record.check(&file.member, &identity) {
        Seen::Unchanged(e) => e,
        Seen::Racy(_) | Seen::Changed(_) | Seen::New => return None,
    };
    let findings = entry
        .findings
        .as_ref()?
        .iter()
        .map(KeptFinding::finding)
        .collect::<Option<Vec<Finding>>>()?;
    Some(FileHashed {
        stamp: Stamp::of_identity(&identity),
        digest: entry.sha256,
        findings,
        pieces: None,
        read: false,
    })
}

/// A file to hash: its member path, where its bytes are, and its listed size.
pub(super) struct ToHash {
    pub(super) member: String,
    pub(super) source: FileSource,
    pub(super) size: u64,
}

/// The members a planned list makes before any file is read: files with
/// their listed sizes and a placeholder digest, for the limits.
fn listed_members(planned: &[Planned]) -> Result<Vec<Member>> {
    planned
        .iter()
        .map(|p| {
            let path = checked_path(p.member().to_owned())?;
            Ok(match p {
                Planned::Dir { .. } => Member::dir(path),
                Planned::Symlink { target, .. } => Member::symlink(path, target.as_str()),
                Planned::File {
                    executable, size, ..
                }
                | Planned::Walked {
                    executable, size, ..
                } => Member::file(path, *size, Digest([0; 32]), *executable),
            })
        })
        .collect()
}

/// Hashes every planned file on all cores (streaming reads into one reused
/// 1 MiB buffer per thread), and looks for secrets in the same reads;
/// returns the manifest entries, for each file member in the packet's
/// order its source and stamp, and the secrets found. The packet's limits
/// are checked on the listed sizes first.
#[cfg(test)]
pub(super) fn hash_all(
    planned: Vec<Planned>,
    progress: &Progress,
) -> Result<(Vec<Member>, Vec<BodySource>, Vec<Found>)> {
    hash_all_with(planned, progress, &HashOptions::default())
}

/// [`hash_all`], with a workspace record whose unchanged files are not
/// read, and large files cut into chunks in the same read.
pub(super) fn hash_all_with(
    mut planned: Vec<Planned>,
    progress: &Progress,
    options: &HashOptions<'_>,
) -> Result<(Vec<Member>, Vec<BodySource>, Vec<Found>)> {
    // The packet's order, so that the files' sources line up with the
    // writer's bodies without a lookup table.
    crate::walk::sort_planned(&mut planned);
    Manifest::assemble(listed_members(&planned)?, None, vec![])
        .check_limits(&Limits::FORMAT)
        .map_err(CliError::Unpackable)?;
    let files: Vec<ToHash> = planned
        .iter()
        .filter(|p| matches!(p, Planned::File { .. } | Planned::Walked { .. }))
        .map(|p| {
            let size = match p {
                Planned::File { size, .. } | Planned::Walked { size, .. } => *size,
                _ => 0,
            };
            Ok(ToHash {
                member: p.member().to_owned(),
                source: p.source().ok_or_else(|| {
                    CliError::Bug(format!("no source for the file {:?}", p.member()))
                })?,
                size,
            })
        })
        .collect::<Result<_>>()?;
    let mut known: Vec<Option<FileHashed>> = match options.record {
        Some(record) => {
            let same_rules = record.same_rules();
            let mut order = record.in_order();
            let listed = planned
                .iter()
                .filter(|p| matches!(p, Planned::File { .. } | Planned::Walked { .. }));
            listed
                .zip(&files)
                .map(|(p, f)| vouched(&mut order, same_rules, p, f))
                .collect()
        }
        None => Vec::new(),
    };
    known.resize_with(files.len(), || None);
    if progress.is_shown() {
        progress.phase(
            "hash",
            files
                .iter()
                .zip(&known)
                .filter(|(_, k)| k.is_none())
                .map(|(f, _)| f.size)
                .sum(),
        );
    }
    let known: Vec<Mutex<Option<FileHashed>>> = known.into_iter().map(Mutex::new).collect();
    let scanner = Scanner::new();
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
                    let Some(file) = files.get(i) else {
                        break;
                    };
                    if let Some(k) = known[i].lock().ok().and_then(|mut k| k.take()) {
                        if let Ok(mut all) = results.lock() {
                            all[i] = Some(Ok(k));
                        }
                        continue;
                    }
                    let relative = file.member.split_once('/').map_or("", |(_, r)| r);
                    let mut detector = scanner.detector(relative);
                    let r = if options.cut_large && !BODIES.is_one_chunk(file.size) {
                        hash_and_cut_file(&mut opener, file, progress, &mut detector)
                            .map(|(stamp, digest, pieces)| (stamp, digest, Some(pieces)))
                    } else {
                        hash_file(&mut opener, file, &mut buf, progress, Some(&mut detector))
                            .map(|(stamp, digest)| (stamp, digest, None))
                    }
                    .map(|(stamp, digest, pieces)| FileHashed {
                        stamp,
                        digest,
                        findings: detector.finish(),
                        pieces,
                        read: true,
                    });
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
    let mut found = Vec::new();
    let mut files = files.into_iter();
    for p in planned {
        match p {
            Planned::Dir { member } => entries.push(Member::dir(checked_path(member)?)),
            Planned::Symlink { member, target } => {
                entries.push(Member::symlink(checked_path(member)?, target));
            }
            Planned::File {
                member, executable, ..
            }
            | Planned::Walked {
                member, executable, ..
            } => {
                let hashed = match results.next().flatten() {
                    Some(r) => r?,
                    None => return Err(stopped_after_earlier_failure()),
                };
                let Some(file) = files.next() else {
                    return Err(stopped_after_earlier_failure());
                };
                found.extend(Found::of(&member, hashed.findings.clone()));
                entries.push(Member::file(
                    checked_path(member)?,
                    hashed.stamp.size,
                    hashed.digest,
                    executable,
                ));
                sources.push(BodySource {
                    source: file.source,
                    stamp: hashed.stamp,
                    findings: hashed.findings,
                    pieces: hashed.pieces,
                    read: hashed.read,
                });
            }
        }
    }
    Ok((entries, sources, found))
}

fn stopped_after_earlier_failure() -> CliError {
    Refused::PackAfterEarlierFailure {}.into()
}

/// Reads a whole file into the hasher (and `detector`), at most one byte
/// more than its listed size: a file that grew is refused without being
/// read to its end (a sparse file of terabytes is not hashed in full). One
/// read for a file smaller than the buffer (a short read of a regular file
/// is its end).
pub(super) fn hash_file(
    opener: &mut Opener,
    file: &ToHash,
    buf: &mut [u8],
    progress: &Progress,
    mut detector: Option<&mut Detector>,
) -> Result<(Stamp, Digest)> {
    let (mut f, stat) = opener.open(&file.source, &file.member)?;
    let mut hasher = Hasher::new();
    let mut size = 0u64;
    let listed = stat_size(&stat);
    loop {
        let want = (file.size + 1 - size).min(buf.len() as u64) as usize;
        let n = match f.read(&mut buf[..want]) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(CliError::io("read", file.source.display(), e)),
        };
        size += n as u64;
        if size > file.size {
            return Err(changed_size(&file.member, "grew"));
        }
        hasher.update(&buf[..n]);
        if let Some(d) = detector.as_deref_mut() {
            d.feed(&buf[..n]);
        }
        progress.inc(n as u64);
        if n < want && size >= listed {
            break;
        }
    }
    // Bytes that arrive after this read, or a short read cut short, leave
    // the size or ctime different in pass 2, which refuses the file.
    Ok((Stamp::of(&stat, size), hasher.finish()))
}

/// [`hash_file`] for a large file, cut into chunks in the same read (by
/// `BODIES`): its stamp, digest and chunks.
fn hash_and_cut_file(
    opener: &mut Opener,
    file: &ToHash,
    progress: &Progress,
    detector: &mut Detector,
) -> Result<(Stamp, Digest, Vec<Piece>)> {
    let (f, stat) = opener.open(&file.source, &file.member)?;
    // At most one byte more than its listed size: a file that grew is
    // refused without being read to its end.
    let bounded = f.take(file.size + 1);
    let cut = chunking::cut(bounded, &BODIES, &file.source.display(), |_, bytes| {
        detector.feed(bytes);
        progress.inc(bytes.len() as u64);
        Ok(())
    })?;
    if cut.size > file.size {
        return Err(changed_size(&file.member, "grew"));
    }
    Ok((Stamp::of(&stat, cut.size), cut.body, cut.pieces))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pack::into_file;
    use crate::walk::{walk_tree, Walk, WalkOptions};
    use rustix::fs::Mode;
    use std::fs::{self, File};
    use std::os::unix::fs::symlink;
    use std::path::{Path, PathBuf};
    use std::sync::mpsc;
    use std::time::Duration;

    /// Walks `ws` as pack does.
    fn walked(ws: &Path) -> Vec<Planned> {
        let mut walk = Walk::default();
        walk_tree(ws, "workspace", &WalkOptions::default(), &mut walk).unwrap();
        walk.planned
    }

    /// Packs what was walked into a file, no secret in the way.
    fn pack_walked(planned: Vec<Planned>, out: &Path) -> Result<Manifest> {
        match into_file::pack_into_file(
            planned,
            None,
            vec![],
            out,
            &Progress::new(true),
            &mut || {},
            &|_| true,
            &Scanner::new(),
        )? {
            into_file::Packed::Kept(m, ..) => Ok(m),
            into_file::Packed::Blocked(_) => unreachable!("every secret is accepted"),
        }
    }

    /// Runs `f` on a thread and fails the test if it takes longer than a
    /// few seconds (instead of hanging on a FIFO).
    fn within_seconds<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(f());
        });
        rx.recv_timeout(Duration::from_secs(20))
            .expect("pack blocked instead of refusing")
    }

    /// Why `planned` is refused to standard output (pass 1) or into `out`,
    /// within a few seconds.
    fn refusal(planned: Vec<Planned>, out: PathBuf, stdout: bool) -> CliError {
        within_seconds(move || {
            if stdout {
                hash_all(planned, &Progress::new(true)).err().unwrap()
            } else {
                pack_walked(planned, &out).unwrap_err()
            }
        })
    }

    /// A workspace with `d/file.txt`, walked, then `d` replaced by a
    /// symlink to a folder outside holding a file of the same name (as
    /// `~/.codex` holds `auth.json`).
    fn swapped_folder() -> (tempfile::TempDir, Vec<Planned>) {
        let t = tempfile::tempdir().unwrap();
        let ws = t.path().join("ws");
        fs::create_dir_all(ws.join("d")).unwrap();
        fs::write(ws.join("d/file.txt"), b"mine").unwrap();
        fs::create_dir_all(t.path().join("outside")).unwrap();
        fs::write(t.path().join("outside/file.txt"), b"SECRET-OUTSIDE").unwrap();
        let planned = walked(&ws);
        fs::rename(ws.join("d"), t.path().join("moved")).unwrap();
        symlink(t.path().join("outside"), ws.join("d")).unwrap();
        (t, planned)
    }

    #[test]
    fn a_folder_swapped_for_a_symlink_after_the_walk_is_never_followed() {
        let (t, planned) = swapped_folder();
        let out = t.path().join("p.tar");
        let e = pack_walked(planned, &out).unwrap_err();
        assert_eq!(e.code(), "workspace_changed", "{:?}", e.report());
        assert_eq!(
            e.report().details.path.as_deref(),
            Some("workspace/d/file.txt")
        );
        assert!(!out.exists());
        // To standard output, the first pass refuses it the same way.
        let (_t, planned) = swapped_folder();
        let e = hash_all(planned, &Progress::new(true)).err().unwrap();
        assert_eq!(e.code(), "workspace_changed");
    }

    #[test]
    fn a_folder_swapped_for_another_real_folder_is_refused() {
        let t = tempfile::tempdir().unwrap();
        let ws = t.path().join("ws");
        fs::create_dir_all(ws.join("d")).unwrap();
        fs::write(ws.join("d/file.txt"), b"mine").unwrap();
        let planned = walked(&ws);
        fs::rename(ws.join("d"), t.path().join("moved")).unwrap();
        fs::create_dir_all(ws.join("d")).unwrap();
        fs::write(ws.join("d/file.txt"), b"another").unwrap();
        let e = pack_walked(planned, &t.path().join("p.tar")).unwrap_err();
        assert_eq!(e.code(), "workspace_changed");
    }

    #[test]
    fn a_file_swapped_for_a_fifo_is_refused_without_blocking() {
        for stdout in [false, true] {
            let t = tempfile::tempdir().unwrap();
            let ws = t.path().join("ws");
            fs::create_dir_all(&ws).unwrap();
            fs::write(ws.join("a.txt"), b"a").unwrap();
            let planned = walked(&ws);
            fs::remove_file(ws.join("a.txt")).unwrap();
            rustix::fs::mknodat(
                rustix::fs::CWD,
                ws.join("a.txt"),
                rustix::fs::FileType::Fifo,
                Mode::from_raw_mode(0o644),
                0,
            )
            .unwrap();
            let e = refusal(planned, t.path().join("p.tar"), stdout);
            assert_eq!(e.code(), "workspace_changed", "to stdout: {stdout}");
        }
    }

    #[test]
    fn a_sparse_file_past_the_limit_is_refused_before_it_is_read() {
        for stdout in [false, true] {
            let t = tempfile::tempdir().unwrap();
            let ws = t.path().join("ws");
            fs::create_dir_all(&ws).unwrap();
            // 4 TiB of holes: hashing it would take hours.
            let f = File::create(ws.join("sparse.img")).unwrap();
            f.set_len(4 << 40).unwrap();
            let planned = walked(&ws);
            let e = refusal(planned, t.path().join("p.tar"), stdout);
            assert_eq!(e.code(), "limit_size", "to stdout: {stdout}");
        }
    }

    #[test]
    fn a_file_that_grew_after_the_walk_is_read_no_further_than_a_byte_past_its_size() {
        let t = tempfile::tempdir().unwrap();
        let ws = t.path().join("ws");
        fs::create_dir_all(&ws).unwrap();
        fs::write(ws.join("log.txt"), b"short").unwrap();
        let planned = walked(&ws);
        // Grown to 4 TiB (sparse) after the walk, in place.
        let f = fs::OpenOptions::new()
            .write(true)
            .open(ws.join("log.txt"))
            .unwrap();
        f.set_len(4 << 40).unwrap();
        let e = within_seconds(move || hash_all(planned, &Progress::new(true)).err().unwrap());
        assert_eq!(e.code(), "member_mismatch");
        assert!(e.report().details.message.contains("grew"));
    }
}
