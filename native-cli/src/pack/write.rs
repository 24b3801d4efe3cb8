//! Pass 2 to standard output: packet-core's writer driven over the
//! manifest pass 1 built, each body streamed from its file into 1 MiB
//! blocks and checked, once read, against what pass 1 saw of it.

use std::io::Write;

use packet_core::{Digest, Kind, Manifest, Step, Writer, WriterOptions};

use super::hash::BodySource;
use super::open::{read_more, Opener, Stamp};
use crate::error::{CliError, Result};
use crate::packet_io::CHUNK;
use crate::progress::Progress;

/// Drives the writer and streams the packet into `sink` in 1 MiB blocks,
/// reading the files straight into the block being filled; returns the
/// packet digest the writer gives (the manifest's: a packet is named by it).
///
/// Bodies are not hashed again here (`verify_bodies: false`): each file's
/// stamp from pass 1 is checked on the open file after its bytes were read
/// ([`Stamp::check`]), which refuses a file that changed in between.
pub(super) fn write_packet<W: Write>(
    manifest: &Manifest,
    sources: &[BodySource],
    sink: W,
    progress: &Progress,
    label: &str,
) -> Result<Digest> {
    let mut out = Block {
        buf: vec![0u8; CHUNK],
        used: 0,
        sink,
        label,
    };
    let digest = produce(manifest, sources, progress, &mut out)?;
    out.flush()?;
    Ok(digest)
}

/// The block being filled and the sink it goes to.
struct Block<'a, W: Write> {
    buf: Vec<u8>,
    used: usize,
    sink: W,
    label: &'a str,
}

impl<W: Write> Block<'_, W> {
    /// Writes the block and empties it.
    fn send(&mut self) -> Result<()> {
        let used = std::mem::take(&mut self.used);
        self.sink
            .write_all(&self.buf[..used])
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
    out: &mut Block<'_, W>,
) -> Result<Digest> {
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
            if e.kind() == Kind::File {
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
                let display = source.source.display();
                let path = display.as_path();
                let (mut f, _) = opener.open(&source.source, &entry.path)?;
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
                source.stamp.check(&Stamp::now(&f, path)?, &entry.path)?;
            }
            Step::Done(digest) => {
                if source_of(manifest.members.len()).is_some() {
                    return Err(CliError::Bug("more source files than file members".into()));
                }
                return digest.ok_or_else(|| CliError::Bug("the writer named no digest".into()));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pack::hash::hash_all;
    use crate::walk::Planned;
    use packet_core::Limits;
    use std::fs;
    use std::io;
    use std::path::Path;

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
        let (entries, sources, _) = hash_all(planned, &Progress::new(true)).unwrap();
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
        // Refused as a change of the workspace (it was a generic I/O
        // error before the opened file was checked).
        assert_eq!(
            e.code(),
            "workspace_changed",
            "a file replaced by a symlink is not followed"
        );
    }
}
