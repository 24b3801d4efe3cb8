//! Where a delta push reads the bodies it sends: a packet file (`push`),
//! at the offsets its manifest gives, or the workspace itself (`save`).
//! Every byte read is checked against the sha256 the manifest (or a
//! recipe) records before it is sent, so a source that changed after it
//! was hashed is refused, never sent.

use std::fs::File;
use std::io::Read;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use crate::error::{CliError, Refused, Result};

/// The bodies of a packet's file members, by member index.
pub trait Bodies: Sync {
    /// A reader of member `index`'s whole body.
    fn open(&self, index: usize) -> Result<Box<dyn Read + '_>>;
    /// Fills `buf` with member `index`'s body bytes from `offset` on.
    fn read_at(&self, index: usize, offset: u64, buf: &mut [u8]) -> Result<()>;
    /// The refusal for a body whose bytes are not the ones recorded.
    fn changed(&self, index: usize) -> CliError;
    /// The file the body of member `index` is read from, for messages.
    fn label(&self, index: usize) -> PathBuf;
}

/// The bodies inside a packet file, at the data offsets of its members.
pub struct PacketBodies {
    path: PathBuf,
    file: File,
    data_offsets: Vec<u64>,
    sizes: Vec<u64>,
}

impl PacketBodies {
    /// The packet at `path`; `data_offsets` and `sizes` by member index.
    pub fn open(path: &Path, data_offsets: Vec<u64>, sizes: Vec<u64>) -> Result<PacketBodies> {
        let file = File::open(path).map_err(|e| CliError::io("open", path, e))?;
        Ok(PacketBodies {
            path: path.to_path_buf(),
            file,
            data_offsets,
            sizes,
        })
    }

    fn at(&self, index: usize) -> Result<(u64, u64)> {
        match (self.data_offsets.get(index), self.sizes.get(index)) {
            (Some(&o), Some(&s)) => Ok((o, s)),
            _ => Err(CliError::Bug(format!("no member {index} in the packet"))),
        }
    }
}

/// Reads `at..end` of a file with positioned reads.
pub struct RangeReader<'a> {
    /// The file.
    pub file: &'a File,
    /// The next byte to read.
    pub at: u64,
    /// Where to stop.
    pub end: u64,
}

impl Read for RangeReader<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let want = (self.end - self.at).min(buf.len() as u64) as usize;
        if want == 0 {
            return Ok(0);
        }
        let n = self.file.read_at(&mut buf[..want], self.at)?;
        self.at += n as u64;
        Ok(n)
    }
}

impl Bodies for PacketBodies {
    fn open(&self, index: usize) -> Result<Box<dyn Read + '_>> {
        let (offset, size) = self.at(index)?;
        // Positioned reads: bodies are read on several threads at once,
        // and cloned descriptors would share one file offset.
        Ok(Box::new(RangeReader {
            file: &self.file,
            at: offset,
            end: offset + size,
        }))
    }

    fn read_at(&self, index: usize, offset: u64, buf: &mut [u8]) -> Result<()> {
        let (start, size) = self.at(index)?;
        if offset + buf.len() as u64 > size {
            return Err(self.changed(index));
        }
        self.file
            .read_exact_at(buf, start + offset)
            .map_err(|e| CliError::io("read", &self.path, e))
    }

    fn changed(&self, _index: usize) -> CliError {
        Refused::PacketChanged {
            path: self.path.clone(),
        }
        .into()
    }

    fn label(&self, _index: usize) -> PathBuf {
        self.path.clone()
    }
}
