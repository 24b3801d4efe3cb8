//! The restore journal (docs/cli.md, "What a crash leaves"): kept beside
//! the workspace record, under its lock, while a restore changes a
//! folder. Before its first staging folder is made, a restore writes the
//! folders it will stage in; before its first change to the workspace, the
//! checkpoint it goes to (its digest and exact `packet.json`). A restore
//! that finds a journal knows what an interrupted one may have left: its
//! staging folders, which it removes, and members as either the recorded
//! checkpoint or the journal's have them, which it accepts, then finishes
//! the job. The journal is removed once the next record is written.
//!
//! The file: `PBRJRNL1`, the SHA-256 of the rest, then the staging folders
//! (u32 count, each u32 length and the path) and the destinations (u32
//! count, each the 32-byte digest, then `packet.json`'s u64 length, u32
//! compressed length and its zstd frame). Written to a temporary file,
//! synced, and renamed into place.

use std::fs::{self, File};
use std::io::Write;
use std::path::{Path, PathBuf};

use packet_core::Digest;

use crate::error::{CliError, Result};

const MAGIC: &[u8; 8] = b"PBRJRNL1";

/// The most a journal's `packet.json` may take once decompressed.
const MAX_JSON: u64 = 1 << 30;

/// What an interrupted restore may have left.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Journal {
    /// Folders it staged in (absolute paths).
    pub staging: Vec<PathBuf>,
    /// The checkpoints interrupted restores were changing the folder into
    /// since the record was written, the latest last: members may be as
    /// any of them has them.
    pub toward: Vec<Toward>,
}

/// The checkpoint a restore goes to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Toward {
    /// Its digest.
    pub digest: Digest,
    /// Its `packet.json`.
    pub json: Vec<u8>,
}

impl Journal {
    /// The journal file of the workspace record at `record`.
    pub fn path_of(record: &Path) -> PathBuf {
        record.with_extension("restoring")
    }

    /// The journal at `path`, if there is a sound one (a damaged journal
    /// is none: what it would say cannot be known, so nothing is taken on
    /// its word).
    pub fn load(path: &Path) -> Option<Journal> {
        let bytes = fs::read(path).ok()?;
        decode(&bytes)
    }

    /// Writes it in place of the last one, synced before the rename.
    pub fn write(&self, path: &Path) -> Result<()> {
        let bytes = encode(self)?;
        let dir = path.parent().unwrap_or(Path::new("."));
        let mut tmp = tempfile::Builder::new()
            .prefix(".restoring-")
            .tempfile_in(dir)
            .map_err(|e| CliError::io("create a file in", dir, e))?;
        let tmp_path = tmp.path().to_path_buf();
        tmp.write_all(&bytes)
            .and_then(|()| tmp.as_file().sync_all())
            .map_err(|e| CliError::io("write", &tmp_path, e))?;
        tmp.persist(path)
            .map_err(|e| CliError::io("rename into", path, e.error))?;
        sync_dir(dir);
        Ok(())
    }

    /// Removes the journal at `path` (the restore it describes is done).
    pub fn remove(path: &Path) -> Result<()> {
        match fs::remove_file(path) {
            Ok(()) => {
                sync_dir(path.parent().unwrap_or(Path::new(".")));
                Ok(())
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(CliError::io("remove", path, e)),
        }
    }
}

/// Makes a rename or removal in `dir` durable (best effort).
fn sync_dir(dir: &Path) {
    if let Ok(d) = File::open(dir) {
        let _ = d.sync_all();
    }
}

fn encode(j: &Journal) -> Result<Vec<u8>> {
    let mut body = Vec::new();
    body.extend_from_slice(&(j.staging.len() as u32).to_be_bytes());
    for p in &j.staging {
        let b = p.as_os_str().as_encoded_bytes();
        body.extend_from_slice(&(b.len() as u32).to_be_bytes());
        body.extend_from_slice(b);
    }
    body.extend_from_slice(&(j.toward.len() as u32).to_be_bytes());
    for t in &j.toward {
        body.extend_from_slice(&t.digest.0);
        let z = zstd::bulk::compress(&t.json, 1)
            .map_err(|e| CliError::Bug(format!("zstd refused the journal: {e}")))?;
        body.extend_from_slice(&(t.json.len() as u64).to_be_bytes());
        body.extend_from_slice(&(z.len() as u32).to_be_bytes());
        body.extend_from_slice(&z);
    }
    let mut out = Vec::with_capacity(8 + 32 + body.len());
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&Digest::of(&body).0);
    out.extend_from_slice(&body);
    Ok(out)
}

fn decode(bytes: &[u8]) -> Option<Journal> {
    let rest = bytes.strip_prefix(MAGIC)?;
    let (sum, body) = rest.split_at_checked(32)?;
    if Digest::of(body).0[..] != *sum {
        return None;
    }
    let mut r = body;
    let mut take = |n: usize| -> Option<&[u8]> {
        let (a, b) = r.split_at_checked(n)?;
        r = b;
        Some(a)
    };
    let count = u32::from_be_bytes(take(4)?.try_into().ok()?) as usize;
    let mut staging = Vec::new();
    for _ in 0..count.min(64) {
        let n = u32::from_be_bytes(take(4)?.try_into().ok()?) as usize;
        let p = std::str::from_utf8(take(n)?).ok()?;
        staging.push(PathBuf::from(p));
    }
    if count > 64 {
        return None;
    }
    let count = u32::from_be_bytes(take(4)?.try_into().ok()?) as usize;
    if count > 64 {
        return None;
    }
    let mut toward = Vec::new();
    for _ in 0..count {
        let digest = Digest(take(32)?.try_into().ok()?);
        let len = u64::from_be_bytes(take(8)?.try_into().ok()?);
        let zlen = u32::from_be_bytes(take(4)?.try_into().ok()?) as usize;
        if len > MAX_JSON {
            return None;
        }
        let json = zstd::bulk::decompress(take(zlen)?, len as usize).ok()?;
        if json.len() as u64 != len {
            return None;
        }
        toward.push(Toward { digest, json });
    }
    r.is_empty().then_some(Journal { staging, toward })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_journal_round_trips_and_a_damaged_one_says_nothing() {
        let t = tempfile::tempdir().unwrap();
        let path = Journal::path_of(&t.path().join("abc.record"));
        assert_eq!(Journal::load(&path), None);
        let j = Journal {
            staging: vec![
                PathBuf::from("/w/.pillbox-restore-1"),
                PathBuf::from("/h/.pillbox-unpack-2"),
            ],
            toward: vec![
                Toward {
                    digest: Digest::of(b"packet.json"),
                    json: b"{\"format\":\"pillbox.session-packet/2\"}".repeat(100),
                },
                Toward {
                    digest: Digest::of(b"another"),
                    json: b"{}".to_vec(),
                },
            ],
        };
        j.write(&path).unwrap();
        assert_eq!(Journal::load(&path), Some(j.clone()));
        let bytes = fs::read(&path).unwrap();
        for at in [0, 8, 45, bytes.len() - 1] {
            let mut bad = bytes.clone();
            bad[at] ^= 1;
            fs::write(&path, &bad).unwrap();
            assert_eq!(Journal::load(&path), None, "byte {at}");
        }
        let early = Journal {
            staging: j.staging.clone(),
            toward: Vec::new(),
        };
        early.write(&path).unwrap();
        assert_eq!(Journal::load(&path), Some(early));
        Journal::remove(&path).unwrap();
        assert_eq!(Journal::load(&path), None);
        Journal::remove(&path).unwrap();
    }
}
