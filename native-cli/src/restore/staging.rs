//! What a restore lands bodies in and scans them as: the staging folders'
//! names, the [`Tree`] of files bodies are written into (a fresh restore's
//! staging folders, a restore in place's), the member paths each body is
//! scanned as and the findings per member they give.

use std::fs::File;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::FileExt;
use std::path::PathBuf;

use packet_core::{scan_class, BodyFindings, Manifest};
use rustix::fs::{Mode, OFlags};

use crate::error::{CliError, Result};
use crate::remote::land::Sink;
use crate::walk::open_beneath;

/// 16 random hex digits for the staging folders' names.
pub fn token() -> String {
    let mut bytes = [0u8; 8];
    if let Ok(f) = File::open("/dev/urandom") {
        let _ = f.read_exact_at(&mut bytes, 0);
    }
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    let x = u64::from_be_bytes(bytes) ^ nanos ^ u64::from(std::process::id());
    format!("{x:016x}")
}

/// Per wanted body, the member paths to scan it as: one per scan class
/// among the members that have it (the same bytes of the same class hold
/// the same findings).
pub fn scans_of(manifest: &Manifest, members: &[Vec<usize>]) -> Vec<Vec<String>> {
    members
        .iter()
        .map(|ms| {
            let mut classes: Vec<u8> = Vec::new();
            let mut out = Vec::new();
            for &m in ms {
                let path = &manifest.members[m].path;
                let class = scan_class(path);
                if !classes.contains(&class) {
                    classes.push(class);
                    out.push(path.to_string());
                }
            }
            out
        })
        .collect()
}

/// Each member's body's findings, from each body's scans (`None` for a
/// member without a body).
pub fn by_member(
    manifest: &Manifest,
    members: &[Vec<usize>],
    scans: &[Vec<String>],
    found: &[Vec<BodyFindings>],
) -> Vec<Option<BodyFindings>> {
    let mut out = vec![None; manifest.members.len()];
    for (slot, ms) in members.iter().enumerate() {
        for &m in ms {
            let class = scan_class(&manifest.members[m].path);
            let k = scans[slot].iter().position(|p| scan_class(p) == class);
            out[m] = k.and_then(|k| found.get(slot)?.get(k).cloned());
        }
    }
    out
}

/// Staging folders as a sink: each body written into its files there,
/// which the layout created or which are created on the first write.
pub struct Tree {
    /// The folders (a fresh restore's: the workspace's staging folder, the
    /// harness's, a scratch folder).
    pub roots: Vec<OwnedFd>,
    /// Their paths, for messages.
    pub labels: Vec<PathBuf>,
    /// Per wanted body: (root, path below it) of each file.
    pub dests: Vec<Vec<(usize, String)>>,
    /// Per root, whether its files are created on the first write.
    pub create: Vec<bool>,
}

impl Tree {
    /// Opens a file below root `root`, never through a link.
    pub fn open(&self, root: usize, relative: &str, flags: OFlags) -> Result<File> {
        let flags = if self.create[root] {
            flags | OFlags::CREATE
        } else {
            flags
        };
        open_beneath(
            self.roots[root].as_fd(),
            relative,
            flags,
            Mode::from_raw_mode(0o600),
        )
        .map(File::from)
        .map_err(|e| CliError::io("open", self.labels[root].join(relative), e.into()))
    }
}

impl Sink for Tree {
    fn write(&self, body: usize, offset: u64, bytes: &[u8]) -> Result<()> {
        for (root, relative) in &self.dests[body] {
            let f = self.open(*root, relative, OFlags::WRONLY)?;
            f.write_all_at(bytes, offset)
                .map_err(|e| CliError::io("write", self.labels[*root].join(relative), e))?;
        }
        Ok(())
    }

    fn read_back(&self, body: usize, offset: u64, buf: &mut [u8]) -> Result<()> {
        let (root, relative) = &self.dests[body][0];
        let f = self.open(*root, relative, OFlags::RDONLY)?;
        f.read_exact_at(buf, offset)
            .map_err(|e| CliError::io("read", self.labels[*root].join(relative), e))
    }
}
