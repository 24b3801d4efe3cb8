//! The chunk batch (`application/x-pillbox-chunks`, docs/transfer.md): the
//! body of `PUT /v1/pushes/{id}/parts/{n}` and of the answer to
//! `POST /v1/packets/{digest}/chunks`. Chunks named by their SHA-256, back
//! to back, after a table that lists them:
//!
//! ```text
//! "PBCHUNK1"  u32 count  count × (32-byte sha256, u32 size)  the frames' bytes, in table order
//! ```
//!
//! Integers are big-endian. [`encode`] writes a batch; [`Decoder`] reads one
//! as it streams in, in pieces of any size, holding only the table. The
//! decoder checks the shape and the [`BatchLimits`]; whether each frame's
//! bytes hash to its name is the caller's check (it sees every byte).
//!
//! ```
//! use pillbox_wire::chunks::{encode, BatchLimits, Decoded, Decoder};
//!
//! let batch = encode(&[b"first chunk", b"second"]);
//! let mut decoder = Decoder::new(BatchLimits::DOWNLOAD);
//! let (mut frames, mut input) = (vec![Vec::new(); 2], &batch[..]);
//! loop {
//!     let (decoded, used) = decoder.decode(input)?;
//!     input = &input[used..];
//!     match decoded {
//!         Decoded::Table => assert_eq!(decoder.table().len(), 2),
//!         Decoded::Data { index, bytes, .. } => frames[index].extend_from_slice(bytes),
//!         Decoded::NeedInput => unreachable!("the whole batch is here"),
//!         Decoded::Done => break,
//!     }
//! }
//! decoder.finish()?;
//! assert_eq!(frames, [b"first chunk".to_vec(), b"second".to_vec()]);
//! # Ok::<(), pillbox_wire::chunks::BatchError>(())
//! ```

use alloc::string::String;
use alloc::vec::Vec;
use core::fmt;

use packet_core::Digest;

/// The media type of a chunk batch.
pub const MEDIA_TYPE: &str = "application/x-pillbox-chunks";
/// The first 8 bytes of every batch.
pub const MAGIC: &[u8; 8] = b"PBCHUNK1";
/// Bytes of one table entry: a SHA-256 and a size.
pub const ENTRY_BYTES: usize = 36;
/// Bytes before the table: the magic and the frame count.
pub const HEAD_BYTES: usize = 12;

/// One frame as the table lists it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Frame {
    /// The SHA-256 its bytes must have.
    pub sha256: Digest,
    /// How many bytes it has (at least one).
    pub size: u32,
}

/// What a batch may hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BatchLimits {
    /// Most frames.
    pub max_frames: u32,
    /// Largest frame, in bytes.
    pub max_frame_bytes: u32,
    /// Largest sum of the frames' sizes.
    pub max_bytes: u64,
}

impl BatchLimits {
    /// The format's limits: 65,536 frames of at most 1 MiB.
    pub const MAX_FRAMES: u32 = 65_536;
    /// The format's largest frame: 1 MiB.
    pub const MAX_FRAME_BYTES: u32 = 1 << 20;

    /// A download (`POST /v1/packets/{digest}/chunks`): 65,536 frames,
    /// 1 MiB each, 64 MiB in all.
    pub const DOWNLOAD: BatchLimits = BatchLimits {
        max_frames: Self::MAX_FRAMES,
        max_frame_bytes: Self::MAX_FRAME_BYTES,
        max_bytes: 64 << 20,
    };

    /// The format's limits with at most `max_bytes` of frames (a push part).
    pub const fn with_max_bytes(max_bytes: u64) -> BatchLimits {
        BatchLimits {
            max_bytes,
            ..Self::DOWNLOAD
        }
    }
}

/// Why a batch was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BatchErrorKind {
    /// It does not start with [`MAGIC`].
    Magic,
    /// More frames than the limit.
    Frames,
    /// A frame is empty or over the size limit.
    FrameSize,
    /// The frames add up to more than the limit.
    Size,
    /// It ended before the table or a frame did.
    Truncated,
    /// Bytes follow the last frame.
    Trailing,
}

impl BatchErrorKind {
    /// The stable code the API and the CLI show.
    pub const fn code(self) -> &'static str {
        match self {
            BatchErrorKind::Magic => "chunk_batch_magic",
            BatchErrorKind::Frames => "chunk_batch_frames",
            BatchErrorKind::FrameSize => "chunk_batch_frame_size",
            BatchErrorKind::Size => "chunk_batch_size",
            BatchErrorKind::Truncated => "chunk_batch_truncated",
            BatchErrorKind::Trailing => "chunk_batch_trailing",
        }
    }
}

/// A refused batch: what is wrong, at which byte of the (decoded) batch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BatchError {
    /// What is wrong.
    pub kind: BatchErrorKind,
    /// The offset in the batch where it was found.
    pub offset: u64,
    /// What was found, for a person.
    pub message: String,
}

impl BatchError {
    fn new(kind: BatchErrorKind, offset: u64, message: String) -> BatchError {
        BatchError {
            kind,
            offset,
            message,
        }
    }

    /// The stable code.
    pub fn code(&self) -> &'static str {
        self.kind.code()
    }
}

impl fmt::Display for BatchError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} at byte {}: {}",
            self.code(),
            self.offset,
            self.message
        )
    }
}

impl core::error::Error for BatchError {}

/// Appends a batch's head and table for `frames` to `out`; the frames'
/// bytes follow, in the same order.
pub fn encode_table(frames: &[Frame], out: &mut Vec<u8>) {
    out.reserve(HEAD_BYTES + ENTRY_BYTES * frames.len());
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&(frames.len() as u32).to_be_bytes());
    for f in frames {
        out.extend_from_slice(&f.sha256.0);
        out.extend_from_slice(&f.size.to_be_bytes());
    }
}

/// A whole batch of these chunks, named by their SHA-256.
pub fn encode(chunks: &[&[u8]]) -> Vec<u8> {
    let frames: Vec<Frame> = chunks
        .iter()
        .map(|c| Frame {
            sha256: Digest::of(c),
            size: c.len() as u32,
        })
        .collect();
    let mut out = Vec::new();
    encode_table(&frames, &mut out);
    for c in chunks {
        out.extend_from_slice(c);
    }
    out
}

/// What [`Decoder::decode`] found.
#[derive(Debug, PartialEq, Eq)]
pub enum Decoded<'a> {
    /// It took every byte it was given into the head or the table: give
    /// it more.
    NeedInput,
    /// The table is complete: [`Decoder::table`] lists the frames.
    Table,
    /// Bytes of frame `index`, in order; `last` when they end it.
    Data {
        /// Index into [`Decoder::table`].
        index: usize,
        /// The bytes (part of the input).
        bytes: &'a [u8],
        /// Whether they end the frame.
        last: bool,
    },
    /// Every frame is complete. Any byte after this is refused.
    Done,
}

#[derive(Debug)]
enum State {
    Head,
    Table,
    Frames,
    Done,
}

/// Reads a batch as it streams in ([`Decoder::decode`], then
/// [`Decoder::finish`] at the end of the input).
#[derive(Debug)]
pub struct Decoder {
    limits: BatchLimits,
    state: State,
    /// The head or the table entry being read.
    partial: Vec<u8>,
    count: u32,
    table: Vec<Frame>,
    /// The frame being read and how many of its bytes are still to come.
    frame: usize,
    remaining: u32,
    total: u64,
    offset: u64,
}

impl Decoder {
    /// A decoder that refuses batches beyond `limits`.
    pub fn new(limits: BatchLimits) -> Decoder {
        Decoder {
            limits,
            state: State::Head,
            partial: Vec::with_capacity(ENTRY_BYTES),
            count: 0,
            table: Vec::new(),
            frame: 0,
            remaining: 0,
            total: 0,
            offset: 0,
        }
    }

    /// The frames, once [`Decoded::Table`] was returned (empty before).
    pub fn table(&self) -> &[Frame] {
        &self.table
    }

    /// The sum of the frames' sizes, once the table is complete.
    pub fn frame_bytes(&self) -> u64 {
        self.total
    }

    /// Bytes of the batch read so far.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// Reads from `input`: what it found, and how many bytes of `input` it
    /// used (call again with the rest). Every byte of a batch is used
    /// exactly once; an empty `input` returns [`Decoded::NeedInput`] (or
    /// [`Decoded::Done`] after the last frame).
    pub fn decode<'a>(&mut self, input: &'a [u8]) -> Result<(Decoded<'a>, usize), BatchError> {
        match self.state {
            State::Head => {
                let used = self.fill(input, HEAD_BYTES);
                if self.partial.len() < HEAD_BYTES {
                    return Ok((Decoded::NeedInput, used));
                }
                if &self.partial[..8] != MAGIC {
                    return Err(BatchError::new(
                        BatchErrorKind::Magic,
                        0,
                        "the body does not start with PBCHUNK1".into(),
                    ));
                }
                let count = u32::from_be_bytes([
                    self.partial[8],
                    self.partial[9],
                    self.partial[10],
                    self.partial[11],
                ]);
                if count > self.limits.max_frames {
                    return Err(BatchError::new(
                        BatchErrorKind::Frames,
                        8,
                        alloc::format!(
                            "{count} frames, at most {} are allowed",
                            self.limits.max_frames
                        ),
                    ));
                }
                self.count = count;
                self.partial.clear();
                self.table = Vec::with_capacity(count as usize);
                self.state = State::Table;
                if count == 0 {
                    self.state = State::Frames;
                    return Ok((Decoded::Table, used));
                }
                let (decoded, more) = self.decode(&input[used..])?;
                Ok((decoded, used + more))
            }
            State::Table => {
                let mut used = 0;
                while (self.table.len() as u32) < self.count {
                    let n = self.fill(&input[used..], ENTRY_BYTES);
                    used += n;
                    if self.partial.len() < ENTRY_BYTES {
                        return Ok((Decoded::NeedInput, used));
                    }
                    let mut sha = [0u8; 32];
                    sha.copy_from_slice(&self.partial[..32]);
                    let size = u32::from_be_bytes([
                        self.partial[32],
                        self.partial[33],
                        self.partial[34],
                        self.partial[35],
                    ]);
                    self.partial.clear();
                    let at = self.offset - 4;
                    if size == 0 || size > self.limits.max_frame_bytes {
                        return Err(BatchError::new(
                            BatchErrorKind::FrameSize,
                            at,
                            alloc::format!(
                                "frame {} has {size} bytes, a frame has 1 to {}",
                                self.table.len(),
                                self.limits.max_frame_bytes
                            ),
                        ));
                    }
                    self.total += u64::from(size);
                    if self.total > self.limits.max_bytes {
                        return Err(BatchError::new(
                            BatchErrorKind::Size,
                            at,
                            alloc::format!(
                                "the frames add up to more than {} bytes",
                                self.limits.max_bytes
                            ),
                        ));
                    }
                    self.table.push(Frame {
                        sha256: Digest(sha),
                        size,
                    });
                }
                self.state = State::Frames;
                self.frame = 0;
                self.remaining = self.table[0].size;
                Ok((Decoded::Table, used))
            }
            State::Frames => {
                if self.frame >= self.table.len() {
                    self.state = State::Done;
                    return self.decode(input);
                }
                if input.is_empty() {
                    return Ok((Decoded::NeedInput, 0));
                }
                let n = input.len().min(self.remaining as usize);
                let (index, last) = self.advance(n as u32);
                Ok((
                    Decoded::Data {
                        index,
                        bytes: &input[..n],
                        last,
                    },
                    n,
                ))
            }
            State::Done => {
                if input.is_empty() {
                    Ok((Decoded::Done, 0))
                } else {
                    Err(BatchError::new(
                        BatchErrorKind::Trailing,
                        self.offset,
                        alloc::format!("{} or more bytes follow the last frame", input.len()),
                    ))
                }
            }
        }
    }

    /// How many more bytes the head and the table need (0 once the frames
    /// start): a caller that keeps the frames' bytes elsewhere copies only
    /// these into [`Decoder::decode`].
    pub fn table_bytes_wanted(&self) -> usize {
        match self.state {
            State::Head => HEAD_BYTES - self.partial.len(),
            State::Table => {
                (self.count as usize - self.table.len()) * ENTRY_BYTES - self.partial.len()
            }
            State::Frames | State::Done => 0,
        }
    }

    /// Inside the frames: the frame being read and how many of its bytes
    /// are still to come.
    pub fn pending_frame(&self) -> Option<(usize, u32)> {
        match self.state {
            State::Frames if self.frame < self.table.len() => Some((self.frame, self.remaining)),
            _ => None,
        }
    }

    /// Takes the next `n` bytes of the pending frame without seeing them
    /// (the caller holds them, e.g. in a JavaScript buffer); returns whether
    /// they end it. `None`, and nothing taken, when no frame is pending or
    /// `n` is 0 or more than it has left.
    pub fn consume(&mut self, n: u32) -> Option<bool> {
        match self.pending_frame() {
            Some((_, left)) if n > 0 && n <= left => Some(self.advance(n).1),
            _ => None,
        }
    }

    /// Moves `n` bytes (at most what is left) into the pending frame.
    fn advance(&mut self, n: u32) -> (usize, bool) {
        let index = self.frame;
        self.remaining -= n;
        self.offset += u64::from(n);
        let last = self.remaining == 0;
        if last {
            self.frame += 1;
            match self.table.get(self.frame) {
                Some(next) => self.remaining = next.size,
                None => self.state = State::Done,
            }
        }
        (index, last)
    }

    /// Checks that the batch is complete (call it at the end of the input).
    pub fn finish(&self) -> Result<(), BatchError> {
        let complete = match self.state {
            State::Done => true,
            State::Frames => self.frame >= self.table.len(),
            State::Head | State::Table => false,
        };
        if complete {
            Ok(())
        } else {
            Err(BatchError::new(
                BatchErrorKind::Truncated,
                self.offset,
                alloc::format!(
                    "the batch ends after {} bytes, inside its {}",
                    self.offset,
                    match self.state {
                        State::Frames => "frames",
                        _ => "table",
                    }
                ),
            ))
        }
    }

    /// Moves bytes of `input` into `partial` until it holds `want`.
    fn fill(&mut self, input: &[u8], want: usize) -> usize {
        let n = input.len().min(want - self.partial.len());
        self.partial.extend_from_slice(&input[..n]);
        self.offset += n as u64;
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;

    /// Decodes `batch` fed in pieces of `piece` bytes.
    fn decode(batch: &[u8], piece: usize, limits: BatchLimits) -> Result<Vec<Vec<u8>>, BatchError> {
        let mut d = Decoder::new(limits);
        let mut frames: Vec<Vec<u8>> = Vec::new();
        for mut input in batch.chunks(piece.max(1)) {
            loop {
                let (decoded, used) = d.decode(input)?;
                input = &input[used..];
                match decoded {
                    Decoded::Table => frames = vec![Vec::new(); d.table().len()],
                    Decoded::Data { index, bytes, last } => {
                        frames[index].extend_from_slice(bytes);
                        assert_eq!(last, frames[index].len() == d.table()[index].size as usize);
                    }
                    Decoded::NeedInput | Decoded::Done => {}
                }
                if input.is_empty() {
                    break;
                }
            }
        }
        d.finish()?;
        Ok(frames)
    }

    #[test]
    fn round_trips_in_pieces_of_any_size() {
        let chunks: [&[u8]; 3] = [b"a", &[9u8; 1000], b"the end"];
        let batch = encode(&chunks);
        assert_eq!(batch.len(), HEAD_BYTES + 3 * ENTRY_BYTES + 1008);
        for piece in [1, 2, 11, 12, 13, 47, 48, 49, 500, 5000] {
            let frames = decode(&batch, piece, BatchLimits::DOWNLOAD).unwrap();
            assert_eq!(frames, chunks.map(<[u8]>::to_vec), "{piece}");
        }
        assert_eq!(
            decode(&encode(&[]), 3, BatchLimits::DOWNLOAD).unwrap(),
            Vec::<Vec<u8>>::new()
        );
    }

    #[test]
    fn refusals_name_their_code_and_offset() {
        let batch = encode(&[b"abc", b"defg"]);
        let code = |bytes: &[u8], limits| decode(bytes, 7, limits).unwrap_err();
        let e = code(&batch[..batch.len() - 1], BatchLimits::DOWNLOAD);
        assert_eq!(
            (e.code(), e.offset),
            ("chunk_batch_truncated", batch.len() as u64 - 1)
        );
        assert_eq!(
            code(&batch[..20], BatchLimits::DOWNLOAD).code(),
            "chunk_batch_truncated"
        );
        let mut long = batch.clone();
        long.push(0);
        assert_eq!(
            code(&long, BatchLimits::DOWNLOAD).code(),
            "chunk_batch_trailing"
        );
        let mut magic = batch.clone();
        magic[7] = b'2';
        assert_eq!(
            code(&magic, BatchLimits::DOWNLOAD).code(),
            "chunk_batch_magic"
        );
        let few = BatchLimits {
            max_frames: 1,
            ..BatchLimits::DOWNLOAD
        };
        assert_eq!(code(&batch, few).code(), "chunk_batch_frames");
        let small = BatchLimits {
            max_frame_bytes: 3,
            ..BatchLimits::DOWNLOAD
        };
        let e = code(&batch, small);
        assert_eq!(
            (e.code(), e.offset),
            (
                "chunk_batch_frame_size",
                (HEAD_BYTES + ENTRY_BYTES + 32) as u64
            )
        );
        assert_eq!(
            code(&batch, BatchLimits::with_max_bytes(6)).code(),
            "chunk_batch_size"
        );
        let mut empty = Vec::new();
        encode_table(
            &[Frame {
                sha256: Digest::EMPTY,
                size: 0,
            }],
            &mut empty,
        );
        assert_eq!(
            code(&empty, BatchLimits::DOWNLOAD).code(),
            "chunk_batch_frame_size"
        );
    }
}
