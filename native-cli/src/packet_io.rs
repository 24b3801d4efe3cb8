//! Reading packets: where the bytes come from (a file, reopened for each
//! pass, or standard input spooled to a temporary file) and the loop that
//! drives packet-core's [`Reader`] over them in 1 MiB chunks.

use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use std::sync::{mpsc, Arc};

use packet_core::{Event, Hasher, Limits, Reader, ReaderOptions, VerifiedPacket};

use crate::error::{CliError, Refused, Result};
use crate::progress::Progress;

/// Size of every read and write buffer.
pub const CHUNK: usize = 1 << 20;

/// Something that can hand out the packet's bytes from the start, once per
/// pass. Each call must read the packet afresh: a file is reopened, so a
/// file replaced between two passes is read as it is now.
pub trait PacketSource {
    /// A reader positioned at the packet's first byte.
    fn open_packet(&self) -> Result<Box<dyn Read + '_>>;
    /// How to name the packet in errors and reports.
    fn label(&self) -> String;
    /// The packet's size when known before reading.
    fn size_hint(&self) -> Option<u64>;
}

/// A packet given on the command line.
pub enum PacketInput {
    /// A regular file, reopened by path for each pass.
    File(PathBuf),
    /// Standard input, or a pipe or device named on the command line,
    /// copied to an unnamed temporary file first so it can be read twice.
    Spooled {
        /// What was spooled.
        label: String,
        /// The temporary file (deleted when dropped).
        file: File,
        /// Bytes spooled.
        size: u64,
    },
}

impl PacketInput {
    /// Opens `-` (standard input) or a path. Non-regular files (pipes,
    /// `/dev/fd/N`, devices) are spooled like standard input.
    pub fn open(arg: &Path) -> Result<PacketInput> {
        if arg == Path::new("-") {
            return Self::spool("-", io::stdin().lock());
        }
        let meta = std::fs::metadata(arg).map_err(|e| CliError::io("open", arg, e))?;
        if meta.is_file() {
            return Ok(PacketInput::File(arg.to_path_buf()));
        }
        if meta.is_dir() {
            return Err(Refused::NotAPacket {
                arg: arg.to_path_buf(),
            }
            .into());
        }
        let f = File::open(arg).map_err(|e| CliError::io("open", arg, e))?;
        Self::spool(&arg.display().to_string(), f)
    }

    /// Copies a stream into an unnamed temporary file, at most one byte
    /// more than the format's largest packet (the reader then refuses it
    /// for its size, and the disk is not filled by an endless stream).
    fn spool(label: &str, mut input: impl Read) -> Result<PacketInput> {
        let tmp_dir = std::env::temp_dir();
        let mut file = tempfile::tempfile()
            .map_err(|e| CliError::io("create a spool file in", &tmp_dir, e))?;
        let cap = Limits::FORMAT.max_packet_bytes + 1;
        let mut limited = (&mut input).take(cap);
        let mut buf = vec![0u8; CHUNK];
        let mut size = 0u64;
        loop {
            let n = match limited.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(CliError::io("read", label, e)),
            };
            file.write_all(&buf[..n])
                .map_err(|e| CliError::io("write the spool file in", &tmp_dir, e))?;
            size += n as u64;
        }
        Ok(PacketInput::Spooled {
            label: label.to_owned(),
            file,
            size,
        })
    }
}

impl PacketSource for PacketInput {
    fn open_packet(&self) -> Result<Box<dyn Read + '_>> {
        match self {
            PacketInput::File(path) => {
                let f = File::open(path).map_err(|e| CliError::io("open", path, e))?;
                Ok(Box::new(f))
            }
            PacketInput::Spooled { file, label, .. } => {
                let mut f = file
                    .try_clone()
                    .map_err(|e| CliError::io("reopen", label, e))?;
                f.seek(SeekFrom::Start(0))
                    .map_err(|e| CliError::io("rewind", label, e))?;
                Ok(Box::new(f))
            }
        }
    }

    fn label(&self) -> String {
        match self {
            PacketInput::File(p) => p.display().to_string(),
            PacketInput::Spooled { label, .. } => label.clone(),
        }
    }

    fn size_hint(&self) -> Option<u64> {
        match self {
            PacketInput::File(p) => std::fs::metadata(p).ok().map(|m| m.len()),
            PacketInput::Spooled { size, .. } => Some(*size),
        }
    }
}

/// A block of packet bytes read from the source, shared (not copied) by
/// the thread that parses it, the thread that hashes a /1 packet whole and
/// any consumer of member data (unpack's writing thread). When the last
/// holder drops it, its buffer goes back to the reading loop for reuse, so
/// at most [`BLOCKS`] buffers ever exist.
pub struct Block {
    data: Vec<u8>,
    len: usize,
    home: mpsc::Sender<Vec<u8>>,
}

impl Block {
    /// The bytes read into this block.
    pub fn bytes(&self) -> &[u8] {
        &self.data[..self.len]
    }

    /// Where `part` (a slice of [`Block::bytes`]) starts in this block, or
    /// `None` if it is not part of it.
    pub fn offset_of(&self, part: &[u8]) -> Option<usize> {
        let start = (part.as_ptr() as usize).checked_sub(self.data.as_ptr() as usize)?;
        (start + part.len() <= self.len).then_some(start)
    }
}

impl Drop for Block {
    fn drop(&mut self) {
        let _ = self.home.send(std::mem::take(&mut self.data));
    }
}

/// The callback of [`read_packet_blocks`]: each event with the block its
/// bytes come from.
pub type BlockEvents<'a> = dyn FnMut(Event<'_>, &Arc<Block>) -> Result<()> + 'a;

/// Read buffers in circulation: one being parsed, the rest queued for or
/// being hashed or written on other threads.
pub const BLOCKS: usize = 8;

/// Reads one pass over a packet with a fresh [`Reader`], calling `on_event`
/// for every event.
///
/// The reader checks the members (and hashes every body) on this thread. A
/// /2 packet is named by its `packet.json`, which the reader checks before
/// any other member: nothing else is hashed. A /1 packet is named by the
/// whole file, which a second thread hashes from the same 1 MiB blocks
/// once `packet.json` shows the version (the blocks before are hashed
/// here); the reader's finish compares it with the expected digest.
pub fn read_packet(
    source: &dyn PacketSource,
    options: ReaderOptions,
    progress: &Progress,
    on_event: &mut dyn FnMut(Event<'_>) -> Result<()>,
) -> Result<VerifiedPacket> {
    read_packet_blocks(source, options, progress, &mut |e, _| on_event(e))
}

/// Who hashes the whole packet, for a /1 packet's name.
enum WholeHash {
    /// Not known yet: `packet.json` is still being read. The blocks so far
    /// are hashed on the reading thread.
    Undecided(Hasher),
    /// A /1 packet: the hashing thread takes every block.
    Elsewhere(mpsc::SyncSender<Arc<Block>>),
    /// A /2 packet, or the reading is over.
    Unneeded,
}

/// [`read_packet`], also handing `on_event` the block an event's bytes
/// come from, so that a [`Event::Data`] slice can be passed on to another
/// thread without a copy (see [`Block::offset_of`]).
pub fn read_packet_blocks(
    source: &dyn PacketSource,
    options: ReaderOptions,
    progress: &Progress,
    on_event: &mut BlockEvents<'_>,
) -> Result<VerifiedPacket> {
    let mut input = source.open_packet()?;
    let mut reader = Reader::hashed_elsewhere(options);
    let (free_tx, free_rx) = mpsc::channel::<Vec<u8>>();
    let hashing_stopped = || CliError::from(Refused::ReadHashingStopped {});
    std::thread::scope(|scope| {
        let mut whole = WholeHash::Undecided(Hasher::new());
        let mut hasher = None;
        let mut made = 0;
        let read = (|| -> Result<()> {
            loop {
                let mut data = if made < BLOCKS {
                    made += 1;
                    vec![0u8; CHUNK]
                } else {
                    free_rx.recv().map_err(|_| hashing_stopped())?
                };
                let n = loop {
                    match input.read(&mut data) {
                        Ok(n) => break n,
                        Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                        Err(e) => return Err(CliError::io("read", source.label(), e)),
                    }
                };
                if n == 0 {
                    return Ok(());
                }
                let block = Arc::new(Block {
                    data,
                    len: n,
                    home: free_tx.clone(),
                });
                progress.inc(n as u64);
                match &mut whole {
                    WholeHash::Undecided(h) => h.update(block.bytes()),
                    WholeHash::Elsewhere(to) => {
                        to.send(Arc::clone(&block)).map_err(|_| hashing_stopped())?
                    }
                    WholeHash::Unneeded => {}
                }
                reader.feed_with(block.bytes(), |event| on_event(event, &block))?;
                whole = match std::mem::replace(&mut whole, WholeHash::Unneeded) {
                    WholeHash::Undecided(h) => match reader.whole_hash_needed() {
                        None => WholeHash::Undecided(h),
                        Some(false) => WholeHash::Unneeded,
                        Some(true) => {
                            let (to, blocks) = mpsc::sync_channel::<Arc<Block>>(BLOCKS);
                            hasher = Some(scope.spawn(move || {
                                let mut h = h;
                                for block in blocks {
                                    h.update(block.bytes());
                                }
                                h.finish()
                            }));
                            WholeHash::Elsewhere(to)
                        }
                    },
                    decided => decided,
                };
            }
        })();
        // Ends the hashing thread's input.
        drop(whole);
        let digest = hasher.map(|h| h.join());
        read?;
        let digest = digest.transpose().map_err(|_| hashing_stopped())?;
        Ok(reader.finish_with_digest(digest)?)
    })
}

/// Verifies a whole packet without writing anything.
pub fn verify(
    source: &dyn PacketSource,
    expected: Option<packet_core::Digest>,
    progress: &Progress,
) -> Result<VerifiedPacket> {
    let options = ReaderOptions {
        expected_digest: expected,
        ..ReaderOptions::default()
    };
    progress.phase("verify", source.size_hint().unwrap_or(0));
    read_packet(source, options, progress, &mut |_| Ok(()))
}

#[cfg(test)]
pub(crate) mod test_support {
    use super::*;

    /// Bytes in memory as a packet source.
    pub struct Bytes(pub Vec<u8>);

    impl PacketSource for Bytes {
        fn open_packet(&self) -> Result<Box<dyn Read + '_>> {
            Ok(Box::new(&self.0[..]))
        }
        fn label(&self) -> String {
            "memory".into()
        }
        fn size_hint(&self) -> Option<u64> {
            Some(self.0.len() as u64)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::test_support::Bytes;
    use super::*;

    #[test]
    fn reads_every_member_end_even_at_the_last_byte() {
        let packet = packet_core::in_memory::sample_packet();
        let mut ends = 0;
        let read = read_packet(
            &Bytes(packet),
            ReaderOptions::default(),
            &Progress::new(true),
            &mut |e| {
                if let Event::MemberEnd { .. } = e {
                    ends += 1;
                }
                Ok(())
            },
        )
        .unwrap();
        assert_eq!(ends, read.manifest.members.len());
    }

    /// A packet of `format` with a body of several read blocks and, with
    /// `members`, that many more files: enough makes its packet.json
    /// longer than a block.
    fn built(format: packet_core::Format, members: usize) -> packet_core::in_memory::Built {
        use packet_core::in_memory::{build_as, Source};
        let mut sources = vec![
            Source::Dir {
                path: "workspace".into(),
            },
            Source::File {
                path: "workspace/big.bin".into(),
                contents: (0..2 * CHUNK + 11).map(|i| (i % 251) as u8).collect(),
                executable: false,
            },
        ];
        for i in 0..members {
            sources.push(Source::File {
                path: format!("workspace/{i:05}-{}", "x".repeat(100)),
                contents: vec![],
                executable: false,
            });
        }
        build_as(format, &sources, None, vec![], &Limits::FORMAT).unwrap()
    }

    #[test]
    fn a_packet_is_named_by_its_versions_rule_however_long_its_manifest() {
        use packet_core::{Digest, Format};
        for members in [0, 5000] {
            for format in Format::ALL {
                let b = built(format, members);
                let whole = Digest::of(&b.bytes);
                let manifest = b.manifest.json_digest();
                assert_eq!(members > 0, b.manifest.canonical_len() > CHUNK as u64);
                let (name, not_name) = match format {
                    Format::V1 => (whole, manifest),
                    Format::V2 => (manifest, whole),
                };
                let what = format!("{format:?} with {members} more members");
                let source = Bytes(b.bytes);
                let read = verify(&source, Some(name), &Progress::new(true)).unwrap();
                assert_eq!(read.digest, name, "{what}");
                let read = verify(&source, None, &Progress::new(true)).unwrap();
                assert_eq!(read.digest, name, "{what}");
                let err = verify(&source, Some(not_name), &Progress::new(true))
                    .err()
                    .unwrap();
                assert_eq!(err.code(), "packet_digest_mismatch", "{what}");
            }
        }
    }

    #[test]
    fn a_truncated_packet_is_refused() {
        let mut packet = packet_core::in_memory::sample_packet();
        packet.truncate(packet.len() - 600);
        let err = verify(&Bytes(packet), None, &Progress::new(true))
            .err()
            .unwrap();
        assert_eq!(err.code(), "truncated");
    }
}
