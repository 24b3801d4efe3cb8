//! Where a push records an interrupted multipart upload ([`UploadState`]),
//! and the lock ([`StateLock`]) that makes two pushes of the same packet
//! on one machine take turns.

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use packet_core::Digest;
use serde::{Deserialize, Serialize};

use crate::error::{CliError, Result};

/// An interrupted multipart upload, recorded so the next push of the same
/// packet to the same store continues it
/// (`$XDG_STATE_HOME/pillbox/uploads/<hex>-<remote>.json`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct UploadState {
    /// The store's base URL.
    pub remote: String,
    /// The packet.
    pub digest: String,
    /// Its size.
    pub size: u64,
    /// The store's upload id.
    pub upload_id: String,
    /// The upload's part size.
    pub part_size: u64,
}

/// The folder for upload state: `$XDG_STATE_HOME/pillbox/uploads`, else
/// `$HOME/.local/state/pillbox/uploads`.
pub fn default_state_dir() -> Result<PathBuf> {
    let base = match std::env::var_os("XDG_STATE_HOME").filter(|v| !v.is_empty()) {
        Some(d) => PathBuf::from(d),
        None => match std::env::var_os("HOME").filter(|v| !v.is_empty()) {
            Some(h) => PathBuf::from(h).join(".local/state"),
            None => {
                return Err(CliError::Usage(
                    "neither XDG_STATE_HOME nor HOME is set: cannot record upload state".into(),
                ))
            }
        },
    };
    Ok(base.join("pillbox/uploads"))
}

/// The state file for `digest` pushed to `remote`.
pub fn state_file(dir: &Path, remote: &str, digest: &Digest) -> PathBuf {
    let remote_hash = Digest::of(remote.as_bytes()).hex().to_string();
    dir.join(format!("{}-{}.json", digest.hex(), &remote_hash[..16]))
}

/// The lock file two pushes of `digest` to `remote` take turns on (one
/// lock for both kinds of upload).
pub fn lock_file(dir: &Path, remote: &str, digest: &Digest) -> PathBuf {
    state_file(dir, remote, digest).with_extension("lock")
}

/// An interrupted delta push, recorded so the next push of the same
/// packet to the same store continues it
/// (`…/uploads/<hex>-<remote>.push.json`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PushState {
    /// The store's base URL.
    pub remote: String,
    /// The packet.
    pub digest: String,
    /// Its size.
    pub size: u64,
    /// The store's push id.
    pub push_id: String,
}

/// The delta push state file for `digest` pushed to `remote`.
pub fn push_state_file(dir: &Path, remote: &str, digest: &Digest) -> PathBuf {
    state_file(dir, remote, digest).with_extension("push.json")
}

impl PushState {
    /// Reads a state file; a missing, unreadable or foreign one is `None`.
    pub fn load(path: &Path, remote: &str, digest: &Digest, size: u64) -> Option<PushState> {
        let bytes = fs::read(path).ok()?;
        let state: PushState = serde_json::from_slice(&bytes).ok()?;
        (state.remote == remote && state.digest == digest.to_string() && state.size == size)
            .then_some(state)
    }

    /// Writes the state file atomically.
    pub fn save(&self, path: &Path) -> Result<()> {
        save_json(self, path)
    }
}

impl UploadState {
    /// Reads a state file; a missing, unreadable or foreign one is `None`.
    pub fn load(path: &Path, remote: &str, digest: &Digest, size: u64) -> Option<UploadState> {
        let bytes = fs::read(path).ok()?;
        let state: UploadState = serde_json::from_slice(&bytes).ok()?;
        (state.remote == remote && state.digest == digest.to_string() && state.size == size)
            .then_some(state)
    }

    /// Writes the state file atomically (temporary file, then rename).
    pub fn save(&self, path: &Path) -> Result<()> {
        save_json(self, path)
    }
}

/// Writes `value` as JSON to `path` atomically (temporary file, then rename).
fn save_json<T: Serialize>(value: &T, path: &Path) -> Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    fs::create_dir_all(dir).map_err(|e| CliError::io("create", dir, e))?;
    let mut tmp = tempfile::Builder::new()
        .prefix(".upload-")
        .tempfile_in(dir)
        .map_err(|e| CliError::io("create a file in", dir, e))?;
    let text = serde_json::to_vec_pretty(value).unwrap_or_default();
    let tmp_path = tmp.path().to_path_buf();
    tmp.write_all(&text)
        .map_err(|e| CliError::io("write", &tmp_path, e))?;
    tmp.persist(path)
        .map_err(|e| CliError::io("rename into", path, e.error))?;
    Ok(())
}

/// An exclusive lock on a file, released when dropped (the process dying
/// releases it too): two pushes of the same packet on one machine take
/// turns instead of driving the same upload at once.
pub(super) struct StateLock(File);

impl StateLock {
    /// Waits for the lock on `path` (created if missing) and takes it.
    pub(super) fn acquire(path: &Path) -> Result<StateLock> {
        let dir = path.parent().unwrap_or(Path::new("."));
        fs::create_dir_all(dir).map_err(|e| CliError::io("create", dir, e))?;
        let f = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(path)
            .map_err(|e| CliError::io("open", path, e))?;
        rustix::fs::flock(&f, rustix::fs::FlockOperation::LockExclusive)
            .map_err(|e| CliError::io("lock", path, e.into()))?;
        Ok(StateLock(f))
    }
}

impl Drop for StateLock {
    fn drop(&mut self) {
        let _ = rustix::fs::flock(&self.0, rustix::fs::FlockOperation::Unlock);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn upload_state_round_trips_and_ignores_foreign_files() {
        let dir = tempfile::tempdir().unwrap();
        let d = Digest::of(b"packet");
        let path = state_file(dir.path(), "http://a", &d);
        assert_ne!(path, state_file(dir.path(), "http://b", &d));
        assert!(path
            .file_name()
            .unwrap()
            .to_str()
            .unwrap()
            .starts_with(&d.hex().to_string()));
        assert_eq!(UploadState::load(&path, "http://a", &d, 10), None);
        let state = UploadState {
            remote: "http://a".into(),
            digest: d.to_string(),
            size: 10,
            upload_id: "0123456789abcdef0123456789abcdef".into(),
            part_size: 5 << 20,
        };
        state.save(&path).unwrap();
        assert_eq!(UploadState::load(&path, "http://a", &d, 10), Some(state));
        assert_eq!(UploadState::load(&path, "http://b", &d, 10), None);
        assert_eq!(UploadState::load(&path, "http://a", &d, 11), None);
        fs::write(&path, "not json").unwrap();
        assert_eq!(UploadState::load(&path, "http://a", &d, 10), None);
    }
}
