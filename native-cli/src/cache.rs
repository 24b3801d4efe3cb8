//! The local chunk cache (docs/cli.md, "cache"): chunks a pull fetched,
//! kept so that the next pull on this machine fetches only what changed.
//!
//! `<dir>/chunks/<id>.pack` holds chunks back to back; `<id>.idx` lists
//! them (sha256, offset, size). A pack is written to a temporary file and
//! renamed into place, then its index likewise: a pack is visible only
//! once complete, and never changes after. A pack's index file's
//! modification time is when a pull last used it; eviction removes the
//! least recently used packs until the cache is within its bound, under a
//! lock only evictions take. A pull opens every pack it will read before
//! it starts, so an eviction by another pull cannot take bytes from under
//! it (an unlinked file stays readable while open), and every chunk read
//! is checked against its sha256: a damaged pack is a miss, not an error.

use std::collections::{HashMap, HashSet};
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use packet_core::Digest;

use crate::error::{CliError, Result};

/// The environment variable bounding the cache, in bytes.
pub const MAX_BYTES_ENV: &str = "PILLBOX_CACHE_MAX_BYTES";

/// The default bound: 4 GiB.
pub const DEFAULT_MAX_BYTES: u64 = 4 << 30;

/// The first bytes of an index file.
const INDEX_MAGIC: &[u8; 8] = b"PBCIDX1\n";

/// One index entry: sha256, offset (u64) and size (u32), big-endian.
const ENTRY: usize = 44;

/// Temporary files older than this are left by a pull that died.
const STALE: Duration = Duration::from_secs(3600);

/// The default cache folder: `$XDG_CACHE_HOME/pillbox`, else
/// `$HOME/.cache/pillbox`.
pub fn default_dir() -> Result<PathBuf> {
    let base = match std::env::var_os("XDG_CACHE_HOME").filter(|v| !v.is_empty()) {
        Some(d) => PathBuf::from(d),
        None => match std::env::var_os("HOME").filter(|v| !v.is_empty()) {
            Some(h) => PathBuf::from(h).join(".cache"),
            None => {
                return Err(CliError::Usage(
                    "neither XDG_CACHE_HOME nor HOME is set: pass --cache-dir or --no-cache".into(),
                ))
            }
        },
    };
    Ok(base.join("pillbox"))
}

/// The bound from `$PILLBOX_CACHE_MAX_BYTES`, else the default.
pub fn max_bytes_from_env() -> Result<u64> {
    match std::env::var(MAX_BYTES_ENV) {
        Ok(v) => v
            .trim()
            .parse()
            .map_err(|_| CliError::Usage(format!("{MAX_BYTES_ENV}={v:?}: give a number of bytes"))),
        Err(_) => Ok(DEFAULT_MAX_BYTES),
    }
}

/// Where a chunk is: which open pack, at what offset, how long.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Location {
    pack: usize,
    offset: u64,
    size: u64,
}

impl Location {
    /// Which of this pull's open packs holds it.
    pub fn pack(&self) -> usize {
        self.pack
    }

    /// Its offset in that pack.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// Its size.
    pub fn size(&self) -> u64 {
        self.size
    }
}

/// A pack this pull has open.
struct OpenPack {
    index_path: PathBuf,
    file: File,
}

/// The cache as one pull sees it: the packs it opened, and where the
/// chunks it asked for are.
pub struct Cache {
    dir: PathBuf,
    max_bytes: u64,
    packs: Vec<OpenPack>,
    /// Packs this pull read from or wrote, to mark as just used.
    used: HashSet<usize>,
}

impl Cache {
    /// The cache in `dir` (created if missing), bounded to `max_bytes`.
    pub fn open(dir: &Path, max_bytes: u64) -> Result<Cache> {
        let chunks = dir.join("chunks");
        fs::create_dir_all(&chunks).map_err(|e| CliError::io("create", &chunks, e))?;
        Ok(Cache {
            dir: dir.to_path_buf(),
            max_bytes,
            packs: Vec::new(),
            used: HashSet::new(),
        })
    }

    fn chunks_dir(&self) -> PathBuf {
        self.dir.join("chunks")
    }

    /// Finds the `wanted` chunks among the cache's packs, opening the
    /// packs that hold any (and keeping them open, so that no eviction
    /// can take them away). A damaged or vanished index is skipped.
    pub fn find(&mut self, wanted: &HashSet<Digest>) -> HashMap<Digest, Location> {
        let mut found = HashMap::new();
        if wanted.is_empty() {
            return found;
        }
        let Ok(entries) = fs::read_dir(self.chunks_dir()) else {
            return found;
        };
        for entry in entries.flatten() {
            let index_path = entry.path();
            if index_path.extension().and_then(|e| e.to_str()) != Some("idx") {
                continue;
            }
            let Ok(index) = fs::read(&index_path) else {
                continue;
            };
            let Some(listed) = parse_index(&index) else {
                continue;
            };
            let hits: Vec<_> = listed
                .into_iter()
                .filter(|(d, _, _)| wanted.contains(d) && !found.contains_key(d))
                .collect();
            if hits.is_empty() {
                continue;
            }
            let Ok(file) = File::open(index_path.with_extension("pack")) else {
                continue;
            };
            let pack = self.packs.len();
            self.packs.push(OpenPack { index_path, file });
            for (d, offset, size) in hits {
                found.insert(
                    d,
                    Location {
                        pack,
                        offset,
                        size: u64::from(size),
                    },
                );
            }
        }
        found
    }

    /// The chunk at `at`, if its bytes hash to `sha256`.
    #[cfg(test)]
    pub fn read(&mut self, at: &Location, sha256: &Digest) -> Option<Vec<u8>> {
        let pack = self.packs.get(at.pack)?;
        if at.size > u64::from(pillbox_wire::chunking::MAX_CHUNK) {
            return None;
        }
        let mut buf = vec![0u8; at.size as usize];
        pack.file.read_exact_at(&mut buf, at.offset).ok()?;
        if Digest::of(&buf) != *sha256 {
            return None;
        }
        self.used.insert(at.pack);
        Some(buf)
    }

    /// The open pack file holding `at` (for a body checked already and
    /// streamed in blocks), and the offset there.
    pub fn file_of(&self, at: &Location) -> (io::Result<File>, u64) {
        let file = match self.packs.get(at.pack) {
            Some(p) => p.file.try_clone(),
            None => Err(io::Error::from(io::ErrorKind::NotFound)),
        };
        (file, at.offset)
    }

    /// Marks the pack holding `at` as read by this pull (for a caller that
    /// reads it itself, through [`Cache::file_of`]).
    pub fn mark_used(&mut self, at: &Location) {
        self.used.insert(at.pack);
    }

    /// A new pack to write fetched chunks into.
    pub fn new_pack(&self) -> Result<PackWriter> {
        let dir = self.chunks_dir();
        let tmp = tempfile::Builder::new()
            .prefix(".tmp-")
            .suffix(".pack")
            .tempfile_in(&dir)
            .map_err(|e| CliError::io("create a file in", &dir, e))?;
        Ok(PackWriter {
            tmp,
            entries: Vec::new(),
            at: 0,
        })
    }

    /// Renames a written pack and its index into place and adds it to the
    /// packs this pull has open; returns where its chunks are.
    pub fn keep(&mut self, writer: PackWriter) -> Result<Vec<(Digest, Location)>> {
        let dir = self.chunks_dir();
        let id = random_id();
        let pack_path = dir.join(format!("{id}.pack"));
        let index_path = dir.join(format!("{id}.idx"));
        let PackWriter { tmp, entries, .. } = writer;
        let tmp_path = tmp.path().to_path_buf();
        tmp.as_file()
            .sync_data()
            .map_err(|e| CliError::io("write", &tmp_path, e))?;
        let file = tmp
            .persist(&pack_path)
            .map_err(|e| CliError::io("rename into", &pack_path, e.error))?;
        let mut index = Vec::with_capacity(8 + ENTRY * entries.len());
        index.extend_from_slice(INDEX_MAGIC);
        for (d, offset, size) in &entries {
            // A whole body too large for an entry is kept unlisted.
            let Ok(size) = u32::try_from(*size) else {
                continue;
            };
            index.extend_from_slice(&d.0);
            index.extend_from_slice(&offset.to_be_bytes());
            index.extend_from_slice(&size.to_be_bytes());
        }
        let mut itmp = tempfile::Builder::new()
            .prefix(".tmp-")
            .suffix(".idx")
            .tempfile_in(&dir)
            .map_err(|e| CliError::io("create a file in", &dir, e))?;
        itmp.write_all(&index)
            .map_err(|e| CliError::io("write", itmp.path(), e))?;
        itmp.persist(&index_path)
            .map_err(|e| CliError::io("rename into", &index_path, e.error))?;
        let pack = self.packs.len();
        self.packs.push(OpenPack { index_path, file });
        self.used.insert(pack);
        Ok(entries
            .into_iter()
            .map(|(d, offset, size)| (d, Location { pack, offset, size }))
            .collect())
    }

    /// Marks the packs this pull used as just used, then evicts the least
    /// recently used packs until the cache is within its bound.
    pub fn finish(&mut self) -> Result<Eviction> {
        let now = SystemTime::now();
        for &i in &self.used {
            if let Some(p) = self.packs.get(i) {
                // A pack evicted meanwhile has no index any more: fine.
                if let Ok(f) = OpenOptions::new().write(true).open(&p.index_path) {
                    let _ = f.set_modified(now);
                }
            }
        }
        self.used.clear();
        evict(&self.dir, self.max_bytes)
    }
}

/// Chunks being written into a new pack.
pub struct PackWriter {
    tmp: tempfile::NamedTempFile,
    entries: Vec<(Digest, u64, u64)>,
    at: u64,
}

impl PackWriter {
    /// Appends a chunk (its bytes already checked against `sha256`).
    pub fn add(&mut self, sha256: Digest, bytes: &[u8]) -> Result<()> {
        let at = self.at;
        self.append(bytes)?;
        self.name(sha256, at, bytes.len() as u64);
        Ok(())
    }

    /// Appends bytes that [`PackWriter::name`] names once complete.
    pub fn append(&mut self, bytes: &[u8]) -> Result<()> {
        let path = self.tmp.path().to_path_buf();
        self.tmp
            .as_file()
            .write_all_at(bytes, self.at)
            .map_err(|e| CliError::io("write", &path, e))?;
        self.at += bytes.len() as u64;
        Ok(())
    }

    /// Records that the `size` bytes at `offset` hash to `sha256`.
    pub fn name(&mut self, sha256: Digest, offset: u64, size: u64) {
        self.entries.push((sha256, offset, size));
    }

    /// Bytes written so far.
    pub fn len(&self) -> u64 {
        self.at
    }
}

/// What an eviction removed.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Eviction {
    /// Packs removed.
    pub packs: u64,
    /// Their bytes.
    pub bytes: u64,
    /// What the cache holds after.
    pub kept_bytes: u64,
}

/// Removes the least recently used packs of the cache in `dir` until it
/// holds at most `max_bytes`, and temporary files a dead pull left. Two
/// evictions take turns (a lock file); pulls reading the cache need no
/// lock.
pub fn evict(dir: &Path, max_bytes: u64) -> Result<Eviction> {
    let chunks = dir.join("chunks");
    let lock_path = dir.join("evict.lock");
    let lock = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .map_err(|e| CliError::io("open", &lock_path, e))?;
    rustix::fs::flock(&lock, rustix::fs::FlockOperation::LockExclusive)
        .map_err(|e| CliError::io("lock", &lock_path, e.into()))?;
    let mut packs: Vec<(SystemTime, u64, PathBuf)> = Vec::new();
    let entries = match fs::read_dir(&chunks) {
        Ok(e) => e,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Eviction::default()),
        Err(e) => return Err(CliError::io("list", &chunks, e)),
    };
    let now = SystemTime::now();
    for entry in entries.flatten() {
        let path = entry.path();
        let Ok(meta) = entry.metadata() else { continue };
        let name = entry.file_name();
        let name = name.to_string_lossy();
        let age = now
            .duration_since(meta.modified().unwrap_or(now))
            .unwrap_or_default();
        if name.starts_with(".tmp-") {
            if age > STALE {
                let _ = fs::remove_file(&path);
            }
            continue;
        }
        match path.extension().and_then(|e| e.to_str()) {
            Some("idx") => {
                let pack_len = fs::metadata(path.with_extension("pack")).map_or(0, |m| m.len());
                packs.push((meta.modified().unwrap_or(now), pack_len + meta.len(), path));
            }
            // A pack whose index never landed (a pull died between the two
            // renames).
            Some("pack") if !path.with_extension("idx").exists() && age > STALE => {
                let _ = fs::remove_file(&path);
            }
            _ => {}
        }
    }
    packs.sort();
    let mut total: u64 = packs.iter().map(|p| p.1).sum();
    let mut out = Eviction::default();
    for (_, size, index) in packs {
        if total <= max_bytes {
            break;
        }
        // The index first: no pull finds the pack once it is gone.
        if fs::remove_file(&index).is_ok() {
            let _ = fs::remove_file(index.with_extension("pack"));
            total -= size;
            out.packs += 1;
            out.bytes += size;
        }
    }
    out.kept_bytes = total;
    drop(lock);
    Ok(out)
}

fn parse_index(bytes: &[u8]) -> Option<Vec<(Digest, u64, u32)>> {
    let body = bytes.strip_prefix(INDEX_MAGIC.as_slice())?;
    if body.len() % ENTRY != 0 {
        return None;
    }
    Some(
        body.chunks_exact(ENTRY)
            .map(|e| {
                let mut d = [0u8; 32];
                d.copy_from_slice(&e[..32]);
                let mut o = [0u8; 8];
                o.copy_from_slice(&e[32..40]);
                let mut s = [0u8; 4];
                s.copy_from_slice(&e[40..44]);
                (Digest(d), u64::from_be_bytes(o), u32::from_be_bytes(s))
            })
            .collect(),
    )
}

/// 32 random hex digits (from the OS), naming a pack.
fn random_id() -> String {
    let mut bytes = [0u8; 16];
    if File::open("/dev/urandom")
        .and_then(|f| f.read_exact_at(&mut bytes, 0))
        .is_err()
    {
        // Unique enough without randomness: the time and the process.
        let t = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap_or_default();
        bytes[..8].copy_from_slice(&t.as_nanos().to_le_bytes()[..8]);
        bytes[8..12].copy_from_slice(&std::process::id().to_le_bytes());
    }
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunk(n: u32, len: usize) -> (Digest, Vec<u8>) {
        let bytes: Vec<u8> = (0..len).map(|i| (i as u32 ^ n) as u8).collect();
        (Digest::of(&bytes), bytes)
    }

    fn put(cache: &mut Cache, chunks: &[(Digest, Vec<u8>)]) {
        let mut w = cache.new_pack().unwrap();
        for (d, b) in chunks {
            w.add(*d, b).unwrap();
        }
        cache.keep(w).unwrap();
    }

    fn set(chunks: &[(Digest, Vec<u8>)]) -> HashSet<Digest> {
        chunks.iter().map(|c| c.0).collect()
    }

    #[test]
    fn chunks_kept_are_found_and_checked() {
        let t = tempfile::tempdir().unwrap();
        let a = [chunk(1, 1000), chunk(2, 5000)];
        let mut cache = Cache::open(t.path(), u64::MAX).unwrap();
        put(&mut cache, &a);
        cache.finish().unwrap();
        let mut next = Cache::open(t.path(), u64::MAX).unwrap();
        let mut wanted = set(&a);
        wanted.insert(chunk(3, 10).0);
        let found = next.find(&wanted);
        assert_eq!(found.len(), 2);
        for (d, b) in &a {
            assert_eq!(next.read(&found[d], d).as_deref(), Some(&b[..]));
        }
        // A damaged pack is a miss.
        let pack = fs::read_dir(t.path().join("chunks"))
            .unwrap()
            .flatten()
            .find(|e| e.path().extension().is_some_and(|x| x == "pack"))
            .unwrap()
            .path();
        let mut bytes = fs::read(&pack).unwrap();
        bytes[10] ^= 1;
        fs::write(&pack, bytes).unwrap();
        let mut third = Cache::open(t.path(), u64::MAX).unwrap();
        let found = third.find(&set(&a));
        assert_eq!(third.read(&found[&a[0].0], &a[0].0), None);
        assert!(third.read(&found[&a[1].0], &a[1].0).is_some());
    }

    #[test]
    fn eviction_removes_the_least_recently_used_packs() {
        let t = tempfile::tempdir().unwrap();
        let old = [chunk(1, 4000)];
        let used = [chunk(2, 4000)];
        let new = [chunk(3, 4000)];
        let mut cache = Cache::open(t.path(), u64::MAX).unwrap();
        put(&mut cache, &old);
        put(&mut cache, &used);
        cache.finish().unwrap();
        // Age both, then use one of them: it becomes the most recent.
        for e in fs::read_dir(t.path().join("chunks")).unwrap().flatten() {
            let f = OpenOptions::new().write(true).open(e.path()).unwrap();
            f.set_modified(SystemTime::now() - Duration::from_secs(600))
                .unwrap();
        }
        let mut c = Cache::open(t.path(), u64::MAX).unwrap();
        let found = c.find(&set(&used));
        assert!(c.read(&found[&used[0].0], &used[0].0).is_some());
        c.finish().unwrap();
        let mut c = Cache::open(t.path(), 2 * (4000 + 8 + 44)).unwrap();
        put(&mut c, &new);
        let evicted = c.finish().unwrap();
        assert_eq!(evicted.packs, 1);
        let mut check = Cache::open(t.path(), u64::MAX).unwrap();
        assert!(check.find(&set(&old)).is_empty(), "the oldest went");
        assert_eq!(check.find(&set(&used)).len(), 1);
        assert_eq!(check.find(&set(&new)).len(), 1);
    }

    #[test]
    fn a_pull_keeps_reading_a_pack_another_evicts() {
        let t = tempfile::tempdir().unwrap();
        let a = [chunk(7, 3000)];
        let mut c = Cache::open(t.path(), u64::MAX).unwrap();
        put(&mut c, &a);
        c.finish().unwrap();
        let mut reader = Cache::open(t.path(), u64::MAX).unwrap();
        let found = reader.find(&set(&a));
        // Another pull evicts everything meanwhile.
        let e = evict(t.path(), 0).unwrap();
        assert_eq!(e.packs, 1);
        assert_eq!(
            reader.read(&found[&a[0].0], &a[0].0).as_deref(),
            Some(&a[0].1[..])
        );
        let mut later = Cache::open(t.path(), u64::MAX).unwrap();
        assert!(later.find(&set(&a)).is_empty());
    }

    #[test]
    fn concurrent_writers_and_evictions_never_serve_wrong_bytes() {
        let t = tempfile::tempdir().unwrap();
        let dir = t.path().to_path_buf();
        std::thread::scope(|s| {
            for w in 0..4u32 {
                let dir = dir.clone();
                s.spawn(move || {
                    for round in 0..20u32 {
                        let mine: Vec<_> = (0..5)
                            .map(|i| chunk(w * 1000 + round * 10 + i, 2000))
                            .collect();
                        let mut c = Cache::open(&dir, 30_000).unwrap();
                        put(&mut c, &mine);
                        // Everything found must read back right, whoever
                        // evicts meanwhile.
                        let mut r = Cache::open(&dir, 30_000).unwrap();
                        let found = r.find(&set(&mine));
                        for (d, at) in &found {
                            let b = r.read(at, d).expect("an open pack stays readable");
                            assert_eq!(Digest::of(&b), *d);
                        }
                        c.finish().unwrap();
                    }
                });
            }
        });
        let left: u64 = fs::read_dir(dir.join("chunks"))
            .unwrap()
            .flatten()
            .filter(|e| !e.file_name().to_string_lossy().starts_with(".tmp-"))
            .map(|e| e.metadata().unwrap().len())
            .sum();
        assert!(left <= 30_000, "{left} bytes left");
    }

    #[test]
    fn an_index_that_is_not_one_is_skipped() {
        assert_eq!(parse_index(b"nonsense"), None);
        assert_eq!(parse_index(b"PBCIDX1\nshort"), None);
        assert_eq!(parse_index(b"PBCIDX1\n"), Some(vec![]));
    }
}
