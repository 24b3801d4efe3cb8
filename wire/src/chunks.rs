//! The chunk batch (`application/x-pillbox-chunks`, docs/transfer.md, "The
//! chunk batch"): chunks sent back to back, named by their SHA-256. Part
//! uploads of a delta push carry one, and so do the answers to
//! `POST /v1/packets/{digest}/chunks`.
//!
//! ```text
//! "PBCHUNK1"  u32 count  count × (32-byte sha256, u32 size)  the frames' bytes in table order
//! ```
//!
//! Big-endian. The encoder writes the head (magic, count and frame table);
//! the caller writes the frames' bytes after it, in table order, from
//! wherever they are. The [`Decoder`] is a push parser: feed it the bytes
//! in pieces of any size as they arrive; it reports the table once it is
//! complete, then each frame's bytes, and checks (unless told not to) that
//! every frame hashes to its name before it reports the frame's end. It
//! never holds more than one table entry of input.
//!
//! ```
//! use packet_core::Digest;
//! use pillbox_wire::chunks::{self, BatchLimits, Decoder, Event, Frame};
//!
//! let (a, b) = (b"first chunk".as_slice(), b"second".as_slice());
//! let frames = [Frame::of(a), Frame::of(b)];
//! let mut batch = chunks::encode_head(&frames);
//! batch.extend_from_slice(a);
//! batch.extend_from_slice(b);
//! assert_eq!(batch.len() as u64, chunks::batch_len(&frames));
//!
//! let mut decoder = Decoder::new(BatchLimits::PART);
//! let mut got: Vec<Vec<u8>> = Vec::new();
//! for piece in batch.chunks(5) {
//!     decoder.feed(piece, |event| {
//!         match event {
//!             Event::Table(table) => assert_eq!(table, &frames),
//!             Event::FrameStart { .. } => got.push(Vec::new()),
//!             Event::Data { bytes, .. } => got.last_mut().unwrap().extend_from_slice(bytes),
//!             Event::FrameEnd { index } => assert_eq!(Digest::of(&got[index]), frames[index].sha256),
//!         }
//!         Ok::<(), chunks::BatchError>(())
//!     })?;
//! }
//! decoder.finish()?;
//! assert_eq!(got, [a, b]);
//! # Ok::<(), chunks::BatchError>(())
//! ```

use alloc::vec::Vec;
use core::fmt;

use packet_core::{Digest, Hasher};

/// The media type of a chunk batch.
pub const CONTENT_TYPE: &str = "application/x-pillbox-chunks";

/// The first eight bytes of every batch.
pub const MAGIC: [u8; 8] = *b"PBCHUNK1";

/// Bytes before the frame table: the magic and the count.
pub const HEAD_BYTES: u64 = 12;

/// Bytes of one frame table entry: the sha256 and the size.
pub const ENTRY_BYTES: u64 = 36;

/// The most frames a batch may hold.
pub const MAX_FRAMES: u32 = 65_536;

/// The largest frame: a chunk is at most 1 MiB (docs/transfer.md, "Units";
/// a body of at most 256 KiB is one chunk, so it fits too).
pub const MAX_FRAME_BYTES: u32 = 1 << 20;

/// One frame table entry: a chunk's name and size.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Frame {
    /// The SHA-256 of the frame's bytes.
    pub sha256: Digest,
    /// Its size in bytes.
    pub size: u32,
}

impl Frame {
    /// The entry for `bytes`. Panics on more than `u32::MAX` bytes, which
    /// no chunk has (a caller builds frames of at most [`MAX_FRAME_BYTES`]).
    pub fn of(bytes: &[u8]) -> Frame {
        Frame {
            sha256: Digest::of(bytes),
            size: u32::try_from(bytes.len()).unwrap_or(u32::MAX),
        }
    }
}

/// The length of a batch of `frames`: head, table and bytes.
pub fn batch_len(frames: &[Frame]) -> u64 {
    head_len(frames.len()) + frames.iter().map(|f| u64::from(f.size)).sum::<u64>()
}

/// The length of the head (magic, count and table) for `count` frames.
pub fn head_len(count: usize) -> u64 {
    HEAD_BYTES + ENTRY_BYTES * count as u64
}

/// The head of a batch of `frames`: magic, count and frame table. The
/// frames' bytes follow, in the same order.
pub fn encode_head(frames: &[Frame]) -> Vec<u8> {
    let mut out = Vec::with_capacity(head_len(frames.len()) as usize);
    out.extend_from_slice(&MAGIC);
    out.extend_from_slice(&(frames.len() as u32).to_be_bytes());
    for f in frames {
        out.extend_from_slice(&f.sha256.0);
        out.extend_from_slice(&f.size.to_be_bytes());
    }
    out
}

/// What a [`Decoder`] accepts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BatchLimits {
    /// The most frames.
    pub max_frames: u32,
    /// The largest frame.
    pub max_frame_bytes: u32,
    /// The longest batch, head included.
    pub max_batch_bytes: u64,
}

impl BatchLimits {
    /// A part upload's default limits: 32 MiB of batch.
    pub const PART: BatchLimits = BatchLimits {
        max_frames: MAX_FRAMES,
        max_frame_bytes: MAX_FRAME_BYTES,
        max_batch_bytes: 32 << 20,
    };

    /// An answer to `POST /v1/packets/{digest}/chunks`: up to 64 MiB of
    /// chunk bytes, plus the longest head.
    pub const DOWNLOAD: BatchLimits = BatchLimits {
        max_frames: MAX_FRAMES,
        max_frame_bytes: MAX_FRAME_BYTES,
        max_batch_bytes: (64 << 20) + HEAD_BYTES + ENTRY_BYTES * MAX_FRAMES as u64,
    };
}

/// Why a batch was refused, with a stable code.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BatchErrorCode {
    /// The batch does not start with [`MAGIC`].
    Magic,
    /// More frames than the limit.
    TooManyFrames,
    /// A frame larger than the limit.
    FrameTooLarge,
    /// The batch is longer than the limit.
    TooLarge,
    /// The bytes ended before the last frame did.
    Truncated,
    /// Bytes after the last frame.
    Trailing,
    /// A frame's bytes do not hash to its name.
    DigestMismatch,
}

impl BatchErrorCode {
    /// The stable snake_case code.
    pub const fn as_str(self) -> &'static str {
        match self {
            BatchErrorCode::Magic => "chunks_magic",
            BatchErrorCode::TooManyFrames => "chunks_too_many",
            BatchErrorCode::FrameTooLarge => "chunk_too_large",
            BatchErrorCode::TooLarge => "chunks_too_large",
            BatchErrorCode::Truncated => "chunks_truncated",
            BatchErrorCode::Trailing => "chunks_trailing",
            BatchErrorCode::DigestMismatch => "chunk_digest_mismatch",
        }
    }
}

/// A refused batch: the code, the frame involved (table index) and the
/// byte offset in the batch where the decoder stopped.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BatchError {
    /// What is wrong.
    pub code: BatchErrorCode,
    /// The frame involved, if one is.
    pub frame: Option<usize>,
    /// The offset in the batch.
    pub offset: u64,
}

impl fmt::Display for BatchError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let what = match self.code {
            BatchErrorCode::Magic => "the batch does not start with PBCHUNK1",
            BatchErrorCode::TooManyFrames => "the batch holds more frames than allowed",
            BatchErrorCode::FrameTooLarge => "a frame is larger than allowed",
            BatchErrorCode::TooLarge => "the batch is longer than allowed",
            BatchErrorCode::Truncated => "the batch ends inside its table or a frame",
            BatchErrorCode::Trailing => "bytes follow the last frame",
            BatchErrorCode::DigestMismatch => "a frame's bytes do not hash to its name",
        };
        write!(f, "{what} (at byte {}", self.offset)?;
        if let Some(i) = self.frame {
            write!(f, ", frame {i}")?;
        }
        f.write_str(")")
    }
}

/// What the decoder found.
#[derive(Debug, PartialEq, Eq)]
pub enum Event<'a> {
    /// The frame table, once complete (before any frame's bytes).
    Table(&'a [Frame]),
    /// Frame `index` starts (reported for empty frames too).
    FrameStart {
        /// Its index in the table.
        index: usize,
    },
    /// A piece of frame `index`'s bytes, borrowed from the input.
    Data {
        /// Its index in the table.
        index: usize,
        /// The bytes.
        bytes: &'a [u8],
    },
    /// Frame `index` is complete (and hashed to its name, when checked).
    FrameEnd {
        /// Its index in the table.
        index: usize,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// Reading the magic and the count.
    Head,
    /// Reading table entries.
    Table,
    /// Inside frame `index`, `left` bytes to go.
    Frame { index: usize, left: u32 },
    /// Every frame read.
    Done,
}

/// The streaming decoder. See the module docs for the loop that drives it.
pub struct Decoder {
    limits: BatchLimits,
    verify: bool,
    state: State,
    /// The head or table entry being read.
    pending: [u8; ENTRY_BYTES as usize],
    filled: usize,
    count: u32,
    table: Vec<Frame>,
    hasher: Option<Hasher>,
    offset: u64,
}

impl Decoder {
    /// A decoder that checks every frame's sha256.
    pub fn new(limits: BatchLimits) -> Decoder {
        Decoder {
            limits,
            verify: true,
            state: State::Head,
            pending: [0; ENTRY_BYTES as usize],
            filled: 0,
            count: 0,
            table: Vec::new(),
            hasher: None,
            offset: 0,
        }
    }

    /// A decoder that leaves the frames' sha256 to its caller (who hashes
    /// them some faster way); every other check still runs.
    pub fn without_digests(limits: BatchLimits) -> Decoder {
        Decoder {
            verify: false,
            ..Decoder::new(limits)
        }
    }

    /// The frame table, once [`Event::Table`] has been reported.
    pub fn table(&self) -> &[Frame] {
        &self.table
    }

    /// Bytes consumed so far.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    fn error(&self, code: BatchErrorCode, frame: Option<usize>) -> BatchError {
        BatchError {
            code,
            frame,
            offset: self.offset,
        }
    }

    /// Consumes all of `input`, reporting what it completes.
    pub fn feed<E: From<BatchError>>(
        &mut self,
        mut input: &[u8],
        mut on_event: impl FnMut(Event<'_>) -> Result<(), E>,
    ) -> Result<(), E> {
        while !input.is_empty() || self.zero_length_frame_pending() {
            match self.state {
                State::Head | State::Table => {
                    let want = if self.state == State::Head {
                        HEAD_BYTES as usize
                    } else {
                        ENTRY_BYTES as usize
                    };
                    let n = (want - self.filled).min(input.len());
                    self.pending[self.filled..self.filled + n].copy_from_slice(&input[..n]);
                    self.filled += n;
                    self.offset += n as u64;
                    input = &input[n..];
                    if self.filled == want {
                        self.filled = 0;
                        self.entry_complete(&mut on_event)?;
                    }
                }
                State::Frame { index, left } => {
                    if left == 0 {
                        self.end_frame(index, &mut on_event)?;
                        continue;
                    }
                    let n = (left as usize).min(input.len());
                    let (bytes, rest) = input.split_at(n);
                    if let Some(h) = &mut self.hasher {
                        h.update(bytes);
                    }
                    self.offset += n as u64;
                    self.state = State::Frame {
                        index,
                        left: left - n as u32,
                    };
                    input = rest;
                    on_event(Event::Data { index, bytes })?;
                    if left as usize == n {
                        self.end_frame(index, &mut on_event)?;
                    }
                }
                State::Done => {
                    return Err(self.error(BatchErrorCode::Trailing, None).into());
                }
            }
        }
        Ok(())
    }

    /// An empty frame (or several) ends without needing input.
    fn zero_length_frame_pending(&self) -> bool {
        matches!(self.state, State::Frame { left: 0, .. })
    }

    fn entry_complete<E: From<BatchError>>(
        &mut self,
        on_event: &mut impl FnMut(Event<'_>) -> Result<(), E>,
    ) -> Result<(), E> {
        if self.state == State::Head {
            if self.pending[..8] != MAGIC {
                return Err(self.error(BatchErrorCode::Magic, None).into());
            }
            let count = u32::from_be_bytes([
                self.pending[8],
                self.pending[9],
                self.pending[10],
                self.pending[11],
            ]);
            if count > self.limits.max_frames {
                return Err(self.error(BatchErrorCode::TooManyFrames, None).into());
            }
            if head_len(count as usize) > self.limits.max_batch_bytes {
                return Err(self.error(BatchErrorCode::TooLarge, None).into());
            }
            self.count = count;
            self.table = Vec::with_capacity(count as usize);
            self.state = State::Table;
        } else {
            let mut sha = [0u8; 32];
            sha.copy_from_slice(&self.pending[..32]);
            let size = u32::from_be_bytes([
                self.pending[32],
                self.pending[33],
                self.pending[34],
                self.pending[35],
            ]);
            let index = self.table.len();
            if size > self.limits.max_frame_bytes {
                return Err(self
                    .error(BatchErrorCode::FrameTooLarge, Some(index))
                    .into());
            }
            self.table.push(Frame {
                sha256: Digest(sha),
                size,
            });
        }
        if self.state == State::Table && self.table.len() == self.count as usize {
            if batch_len(&self.table) > self.limits.max_batch_bytes {
                return Err(self.error(BatchErrorCode::TooLarge, None).into());
            }
            on_event(Event::Table(&self.table))?;
            self.start_frame(0, on_event)?;
        }
        Ok(())
    }

    fn start_frame<E: From<BatchError>>(
        &mut self,
        index: usize,
        on_event: &mut impl FnMut(Event<'_>) -> Result<(), E>,
    ) -> Result<(), E> {
        match self.table.get(index) {
            Some(f) => {
                self.state = State::Frame {
                    index,
                    left: f.size,
                };
                self.hasher = self.verify.then(Hasher::new);
                on_event(Event::FrameStart { index })
            }
            None => {
                self.state = State::Done;
                Ok(())
            }
        }
    }

    fn end_frame<E: From<BatchError>>(
        &mut self,
        index: usize,
        on_event: &mut impl FnMut(Event<'_>) -> Result<(), E>,
    ) -> Result<(), E> {
        if let Some(h) = self.hasher.take() {
            if h.finish() != self.table[index].sha256 {
                return Err(self
                    .error(BatchErrorCode::DigestMismatch, Some(index))
                    .into());
            }
        }
        on_event(Event::FrameEnd { index })?;
        self.start_frame(index + 1, on_event)
    }

    /// Ends the input: every frame must be complete.
    pub fn finish(&self) -> Result<(), BatchError> {
        match self.state {
            State::Done => Ok(()),
            State::Frame { index, .. } => Err(self.error(BatchErrorCode::Truncated, Some(index))),
            _ => Err(self.error(BatchErrorCode::Truncated, None)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;

    fn batch(chunks: &[&[u8]]) -> (Vec<Frame>, Vec<u8>) {
        let frames: Vec<Frame> = chunks.iter().map(|c| Frame::of(c)).collect();
        let mut out = encode_head(&frames);
        for c in chunks {
            out.extend_from_slice(c);
        }
        (frames, out)
    }

    /// Decodes `bytes` fed in pieces of `step`; returns the frames' bytes.
    fn decode(bytes: &[u8], step: usize, limits: BatchLimits) -> Result<Vec<Vec<u8>>, BatchError> {
        let mut d = Decoder::new(limits);
        let mut got: Vec<Vec<u8>> = Vec::new();
        let mut ended = 0;
        for piece in bytes.chunks(step.max(1)) {
            d.feed(piece, |e| {
                match e {
                    Event::Table(t) => assert_eq!(t.len(), d_count(bytes)),
                    Event::FrameStart { index } => {
                        assert_eq!(index, got.len());
                        got.push(Vec::new());
                    }
                    Event::Data { index, bytes } => got[index].extend_from_slice(bytes),
                    Event::FrameEnd { index } => {
                        assert_eq!(index, ended);
                        ended += 1;
                    }
                }
                Ok::<(), BatchError>(())
            })?;
        }
        if bytes.is_empty() {
            d.feed(&[], |_| Ok::<(), BatchError>(()))?;
        }
        d.finish()?;
        assert_eq!(ended, got.len());
        Ok(got)
    }

    fn d_count(bytes: &[u8]) -> usize {
        u32::from_be_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]) as usize
    }

    #[test]
    fn round_trips_in_pieces_of_any_size() {
        let big = vec![7u8; 5000];
        let chunks: [&[u8]; 5] = [b"one", b"", b"three", &big, b""];
        let (frames, bytes) = batch(&chunks);
        assert_eq!(bytes.len() as u64, batch_len(&frames));
        for step in [1, 2, 7, 35, 36, 37, 100, 4096, bytes.len()] {
            let got = decode(&bytes, step, BatchLimits::PART).unwrap();
            assert_eq!(got, chunks.to_vec(), "step {step}");
        }
    }

    #[test]
    fn an_empty_batch_is_valid() {
        let (_, bytes) = batch(&[]);
        assert_eq!(bytes.len(), 12);
        assert_eq!(decode(&bytes, 3, BatchLimits::PART).unwrap().len(), 0);
    }

    #[test]
    fn refusals_have_their_codes() {
        let (_, good) = batch(&[b"abc", b"defg"]);
        let code = |bytes: &[u8], limits| decode(bytes, 5, limits).unwrap_err().code;
        let mut magic = good.clone();
        magic[0] = b'X';
        assert_eq!(code(&magic, BatchLimits::PART), BatchErrorCode::Magic);
        assert_eq!(
            code(&good[..good.len() - 1], BatchLimits::PART),
            BatchErrorCode::Truncated
        );
        assert_eq!(
            code(&good[..20], BatchLimits::PART),
            BatchErrorCode::Truncated
        );
        let mut trailing = good.clone();
        trailing.push(0);
        assert_eq!(code(&trailing, BatchLimits::PART), BatchErrorCode::Trailing);
        let mut flipped = good.clone();
        let last = flipped.len() - 1;
        flipped[last] ^= 1;
        let e = decode(&flipped, 5, BatchLimits::PART).unwrap_err();
        assert_eq!((e.code, e.frame), (BatchErrorCode::DigestMismatch, Some(1)));
        let few = BatchLimits {
            max_frames: 1,
            ..BatchLimits::PART
        };
        assert_eq!(code(&good, few), BatchErrorCode::TooManyFrames);
        let small_frames = BatchLimits {
            max_frame_bytes: 3,
            ..BatchLimits::PART
        };
        let e = decode(&good, 5, small_frames).unwrap_err();
        assert_eq!((e.code, e.frame), (BatchErrorCode::FrameTooLarge, Some(1)));
        let short = BatchLimits {
            max_batch_bytes: good.len() as u64 - 1,
            ..BatchLimits::PART
        };
        assert_eq!(code(&good, short), BatchErrorCode::TooLarge);
        let exact = BatchLimits {
            max_batch_bytes: good.len() as u64,
            ..BatchLimits::PART
        };
        assert!(decode(&good, 5, exact).is_ok());
        // A count the limit allows but whose table alone is too long.
        let mut huge = MAGIC.to_vec();
        huge.extend_from_slice(&60_000u32.to_be_bytes());
        let tight = BatchLimits {
            max_batch_bytes: 1000,
            ..BatchLimits::PART
        };
        assert_eq!(code(&huge, tight), BatchErrorCode::TooLarge);
    }

    #[test]
    fn without_digests_the_caller_hashes() {
        let (_, mut bytes) = batch(&[b"abc"]);
        let last = bytes.len() - 1;
        bytes[last] ^= 1;
        let mut d = Decoder::without_digests(BatchLimits::PART);
        d.feed(&bytes, |_| Ok::<(), BatchError>(())).unwrap();
        d.finish().unwrap();
    }

    #[test]
    fn the_callers_error_stops_the_decoder() {
        let (_, bytes) = batch(&[b"abc"]);
        let mut d = Decoder::new(BatchLimits::PART);
        #[derive(Debug, PartialEq)]
        enum Mine {
            Stop,
            Batch(BatchError),
        }
        impl From<BatchError> for Mine {
            fn from(e: BatchError) -> Self {
                Mine::Batch(e)
            }
        }
        let r = d.feed(&bytes, |e| match e {
            Event::Data { .. } => Err(Mine::Stop),
            _ => Ok(()),
        });
        assert_eq!(r, Err(Mine::Stop));
    }

    #[test]
    fn errors_name_their_code() {
        let e = BatchError {
            code: BatchErrorCode::DigestMismatch,
            frame: Some(3),
            offset: 99,
        };
        assert_eq!(e.code.as_str(), "chunk_digest_mismatch");
        assert_eq!(
            alloc::format!("{e}"),
            "a frame's bytes do not hash to its name (at byte 99, frame 3)"
        );
    }
}
