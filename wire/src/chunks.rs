//! The chunk batch (`application/x-pillbox-chunks`, docs/transfer.md,
//! "Units"): chunks named by their SHA-256, each compressed on its own, back
//! to back after a table that lists them. The body of a push part, the end
//! of a push's create body, and the answer to
//! `POST /v1/packets/{digest}/chunks` (frames sent as the store keeps them).
//!
//! ```text
//! "PBCHUNK2"  u32 count
//! count × (32-byte sha256, u32 raw size, u32 stored size, u8 encoding)
//! the frames' stored bytes, in table order
//! ```
//!
//! Integers are big-endian. `encoding` is 0 (identity: stored size = raw
//! size) or 1 (one zstd frame: 1 ≤ stored size < raw size, and decoding it
//! gives exactly the raw size). At most 65,536 frames of at most 1 MiB raw.
//!
//! [`encode`] writes a batch; [`Decoder`] reads one as it streams in, in
//! pieces of any size, holding only the table; it checks the shape and the
//! [`BatchLimits`] before a frame's bytes are seen. Decompressing a zstd
//! frame (to exactly its raw size, never more) and hashing the raw bytes
//! against the name are the consumer's checks: it sees every byte.
//!
//! ```
//! use pillbox_wire::chunks::{encode, BatchLimits, Decoded, Decoder, Frame};
//!
//! let batch = encode(&[(Frame::identity(b"first chunk"), &b"first chunk"[..]), (Frame::identity(b"second"), &b"second"[..])]);
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
//! # Ok::<(), pillbox_wire::binary::DecodeError>(())
//! ```

use alloc::vec::Vec;

use packet_core::Digest;

use crate::binary::{digest_at, u32_at, DecodeError, DecodeErrorKind as K, Field};
use crate::chunking::MAX_CHUNK;

/// The media type of a chunk batch.
pub const MEDIA_TYPE: &str = "application/x-pillbox-chunks";
/// The first 8 bytes of every batch.
pub const MAGIC: &[u8; 8] = b"PBCHUNK2";
/// Bytes of one table entry: sha256, raw size, stored size, encoding.
pub const ENTRY_BYTES: usize = 41;
/// Bytes before the table: the magic and the frame count.
pub const HEAD_BYTES: usize = 12;

/// How a frame's bytes are stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Encoding {
    /// As they are.
    Identity,
    /// One zstd frame.
    Zstd,
}

impl Encoding {
    /// Its byte in the table.
    pub const fn byte(self) -> u8 {
        match self {
            Encoding::Identity => 0,
            Encoding::Zstd => 1,
        }
    }

    /// The encoding of a table byte.
    pub const fn from_byte(b: u8) -> Option<Encoding> {
        match b {
            0 => Some(Encoding::Identity),
            1 => Some(Encoding::Zstd),
            _ => None,
        }
    }
}

/// One frame as the table lists it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Frame {
    /// The SHA-256 its raw bytes must have.
    pub sha256: Digest,
    /// How many raw bytes it has (1 to 1 MiB).
    pub raw_size: u32,
    /// How many bytes it has as sent and stored.
    pub stored_size: u32,
    /// How those are encoded.
    pub encoding: Encoding,
}

impl Frame {
    /// A frame of `bytes` as they are.
    pub fn identity(bytes: &[u8]) -> Frame {
        Frame {
            sha256: Digest::of(bytes),
            raw_size: bytes.len() as u32,
            stored_size: bytes.len() as u32,
            encoding: Encoding::Identity,
        }
    }

    /// A frame of `raw` bytes named `sha256`, stored as a zstd frame of
    /// `stored` bytes.
    pub fn zstd(sha256: Digest, raw: u32, stored: u32) -> Frame {
        Frame {
            sha256,
            raw_size: raw,
            stored_size: stored,
            encoding: Encoding::Zstd,
        }
    }

    /// Whether the stored size fits the encoding.
    pub const fn stored_size_fits(&self) -> bool {
        match self.encoding {
            Encoding::Identity => self.stored_size == self.raw_size,
            Encoding::Zstd => self.stored_size >= 1 && self.stored_size < self.raw_size,
        }
    }
}

/// What a batch may hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BatchLimits {
    /// Most frames.
    pub max_frames: u32,
    /// Largest frame, raw bytes.
    pub max_frame_bytes: u32,
    /// Largest sum of the frames' stored sizes (what travels).
    pub max_stored_bytes: u64,
    /// Largest sum of the frames' raw sizes (what decoding produces).
    pub max_raw_bytes: u64,
}

impl BatchLimits {
    /// The format's limit on frames: 65,536.
    pub const MAX_FRAMES: u32 = 65_536;
    /// The format's largest frame: 1 MiB raw.
    pub const MAX_FRAME_BYTES: u32 = MAX_CHUNK;

    /// A download (`POST /v1/packets/{digest}/chunks`): 65,536 frames of
    /// 1 MiB, 64 MiB in all, stored or raw.
    pub const DOWNLOAD: BatchLimits = BatchLimits {
        max_frames: Self::MAX_FRAMES,
        max_frame_bytes: Self::MAX_FRAME_BYTES,
        max_stored_bytes: 64 << 20,
        max_raw_bytes: 64 << 20,
    };

    /// The format's frame limits with at most `stored` bytes as sent and
    /// `raw` bytes once decoded (a push part, a push's create body).
    pub const fn upload(stored: u64, raw: u64) -> BatchLimits {
        BatchLimits {
            max_stored_bytes: stored,
            max_raw_bytes: raw,
            ..Self::DOWNLOAD
        }
    }

    /// The most bytes a batch within these limits has, table included.
    pub const fn max_batch_bytes(&self) -> u64 {
        HEAD_BYTES as u64 + ENTRY_BYTES as u64 * self.max_frames as u64 + self.max_stored_bytes
    }
}

fn err(kind: K, offset: u64, message: alloc::string::String) -> DecodeError {
    DecodeError::new(kind, offset, message)
}

/// Appends a batch's head and table for `frames` to `out`; the frames'
/// stored bytes follow, in the same order.
pub fn encode_table(frames: &[Frame], out: &mut Vec<u8>) {
    out.reserve(HEAD_BYTES + ENTRY_BYTES * frames.len());
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&(frames.len() as u32).to_be_bytes());
    for f in frames {
        out.extend_from_slice(&f.sha256.0);
        out.extend_from_slice(&f.raw_size.to_be_bytes());
        out.extend_from_slice(&f.stored_size.to_be_bytes());
        out.push(f.encoding.byte());
    }
}

/// A whole batch: each frame and its stored bytes.
pub fn encode(frames: &[(Frame, &[u8])]) -> Vec<u8> {
    let table: Vec<Frame> = frames.iter().map(|(f, _)| *f).collect();
    let mut out = Vec::new();
    encode_table(&table, &mut out);
    for (_, bytes) in frames {
        out.extend_from_slice(bytes);
    }
    out
}

/// A whole batch of these chunks, each as it is (identity).
pub fn encode_identity(chunks: &[&[u8]]) -> Vec<u8> {
    let frames: Vec<(Frame, &[u8])> = chunks.iter().map(|c| (Frame::identity(c), *c)).collect();
    encode(&frames)
}

/// What [`Decoder::decode`] found.
#[derive(Debug, PartialEq, Eq)]
pub enum Decoded<'a> {
    /// It took every byte it was given into the head or the table: give
    /// it more.
    NeedInput,
    /// The table is complete: [`Decoder::table`] lists the frames.
    Table,
    /// Stored bytes of frame `index`, in order; `last` when they end it.
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
/// [`Decoder::finish`] at the end of the input). It holds the table (41
/// bytes a frame as read, a few more as [`Frame`]s) and one field.
#[derive(Debug)]
pub struct Decoder {
    limits: BatchLimits,
    state: State,
    field: Field,
    count: u32,
    table: Vec<Frame>,
    /// The frame being read and how many of its stored bytes are to come.
    frame: usize,
    remaining: u32,
    stored: u64,
    raw: u64,
    offset: u64,
    /// Where this batch starts in the body it is part of.
    base: u64,
}

impl Decoder {
    /// A decoder that refuses batches beyond `limits`.
    pub fn new(limits: BatchLimits) -> Decoder {
        Decoder::at(limits, 0)
    }

    /// A decoder of a batch that starts `base` bytes into a larger body
    /// (a push's create body): offsets in refusals count from the body.
    pub fn at(limits: BatchLimits, base: u64) -> Decoder {
        Decoder {
            limits,
            state: State::Head,
            field: Field::default(),
            count: 0,
            table: Vec::new(),
            frame: 0,
            remaining: 0,
            stored: 0,
            raw: 0,
            offset: base,
            base,
        }
    }

    /// The frames, once [`Decoded::Table`] was returned (empty before).
    pub fn table(&self) -> &[Frame] {
        &self.table
    }

    /// Whether the table is complete.
    pub fn has_table(&self) -> bool {
        matches!(self.state, State::Frames | State::Done)
    }

    /// The sum of the frames' stored sizes, once the table is complete.
    pub fn stored_bytes(&self) -> u64 {
        self.stored
    }

    /// The sum of the frames' raw sizes, once the table is complete.
    pub fn raw_bytes(&self) -> u64 {
        self.raw
    }

    /// Bytes read so far (from the start of the body it is part of).
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// Reads from `input`: what it found, and how many bytes of `input` it
    /// used (call again with the rest). Every byte of a batch is used
    /// exactly once; an empty `input` returns [`Decoded::NeedInput`] (or
    /// [`Decoded::Done`] after the last frame).
    pub fn decode<'a>(&mut self, input: &'a [u8]) -> Result<(Decoded<'a>, usize), DecodeError> {
        match self.state {
            State::Head => {
                let at = self.offset - self.field.len() as u64;
                let (used, whole) = self.field.fill(input, HEAD_BYTES);
                self.offset += used as u64;
                let Some(head) = whole else {
                    return Ok((Decoded::NeedInput, used));
                };
                if &head[..8] != MAGIC {
                    return Err(err(
                        K::BatchMagic,
                        at,
                        "the batch does not start with PBCHUNK2".into(),
                    ));
                }
                let count = u32_at(head, 8);
                self.field.clear();
                if count > self.limits.max_frames {
                    return Err(err(
                        K::BatchFrames,
                        at + 8,
                        alloc::format!(
                            "{count} frames, at most {} are allowed",
                            self.limits.max_frames
                        ),
                    ));
                }
                self.count = count;
                // Bounded by the limit just checked (41 bytes a frame as read).
                self.table = Vec::with_capacity(count as usize);
                if count == 0 {
                    self.state = State::Done;
                    return Ok((Decoded::Table, used));
                }
                self.state = State::Table;
                let (decoded, more) = self.decode(&input[used..])?;
                Ok((decoded, used + more))
            }
            State::Table => {
                let mut used = 0;
                while (self.table.len() as u32) < self.count {
                    let at = self.offset - self.field.len() as u64;
                    let (n, whole) = self.field.fill(&input[used..], ENTRY_BYTES);
                    used += n;
                    self.offset += n as u64;
                    let Some(e) = whole else {
                        return Ok((Decoded::NeedInput, used));
                    };
                    let i = self.table.len();
                    let sha256 = digest_at(e, 0);
                    let (raw_size, stored_size) = (u32_at(e, 32), u32_at(e, 36));
                    let Some(encoding) = Encoding::from_byte(e[40]) else {
                        return Err(err(
                            K::BatchEncoding,
                            at + 40,
                            alloc::format!(
                                "frame {i} has encoding {}, a frame is 0 (identity) or 1 (zstd)",
                                e[40]
                            ),
                        ));
                    };
                    self.field.clear();
                    let frame = Frame {
                        sha256,
                        raw_size,
                        stored_size,
                        encoding,
                    };
                    if raw_size == 0 || raw_size > self.limits.max_frame_bytes {
                        return Err(err(
                            K::BatchFrameSize,
                            at + 32,
                            alloc::format!(
                                "frame {i} has {raw_size} bytes, a frame has 1 to {}",
                                self.limits.max_frame_bytes
                            ),
                        ));
                    }
                    if !frame.stored_size_fits() {
                        return Err(err(
                            K::BatchStoredSize,
                            at + 36,
                            alloc::format!(
                                "frame {i} is {stored_size} bytes as stored for {raw_size} raw bytes: identity frames are stored as they are, zstd frames are smaller than their raw bytes"
                            ),
                        ));
                    }
                    self.stored += u64::from(stored_size);
                    self.raw += u64::from(raw_size);
                    if self.stored > self.limits.max_stored_bytes
                        || self.raw > self.limits.max_raw_bytes
                    {
                        return Err(err(
                            K::BatchSize,
                            at + 32,
                            alloc::format!(
                                "the frames add up to more than {} bytes as stored or {} raw",
                                self.limits.max_stored_bytes,
                                self.limits.max_raw_bytes
                            ),
                        ));
                    }
                    self.table.push(frame);
                }
                self.state = State::Frames;
                self.frame = 0;
                self.remaining = self.table[0].stored_size;
                Ok((Decoded::Table, used))
            }
            State::Frames => {
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
                    Err(err(
                        K::BatchTrailing,
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
            State::Head => HEAD_BYTES - self.field.len(),
            State::Table => {
                (self.count as usize - self.table.len()) * ENTRY_BYTES - self.field.len()
            }
            State::Frames | State::Done => 0,
        }
    }

    /// Inside the frames: the frame being read and how many of its stored
    /// bytes are still to come.
    pub fn pending_frame(&self) -> Option<(usize, u32)> {
        match self.state {
            State::Frames => Some((self.frame, self.remaining)),
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
                Some(next) => self.remaining = next.stored_size,
                None => self.state = State::Done,
            }
        }
        (index, last)
    }

    /// Checks that the batch is complete (call it at the end of the input).
    pub fn finish(&self) -> Result<(), DecodeError> {
        match self.state {
            State::Done => Ok(()),
            State::Head | State::Table | State::Frames => Err(err(
                K::BatchTruncated,
                self.offset,
                alloc::format!(
                    "the batch ends after {} bytes, inside its {}",
                    self.offset - self.base,
                    match self.state {
                        State::Frames => "frames",
                        _ => "table",
                    }
                ),
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;

    /// Decodes `batch` fed in pieces of `piece` bytes.
    fn decode(
        batch: &[u8],
        piece: usize,
        limits: BatchLimits,
    ) -> Result<Vec<Vec<u8>>, DecodeError> {
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
                        assert_eq!(
                            last,
                            frames[index].len() == d.table()[index].stored_size as usize
                        );
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
        let zstd = Frame::zstd(Digest::of(b"x"), 5000, 3);
        let batch = encode(&[
            (Frame::identity(chunks[0]), chunks[0]),
            (Frame::identity(chunks[1]), chunks[1]),
            (zstd, b"zst"),
            (Frame::identity(chunks[2]), chunks[2]),
        ]);
        assert_eq!(batch.len(), HEAD_BYTES + 4 * ENTRY_BYTES + 1011);
        for piece in [1, 2, 11, 12, 13, 52, 53, 54, 500, 5000] {
            let frames = decode(&batch, piece, BatchLimits::DOWNLOAD).unwrap();
            assert_eq!(
                frames,
                [chunks[0], chunks[1], b"zst", chunks[2]].map(<[u8]>::to_vec),
                "{piece}"
            );
        }
        let mut d = Decoder::new(BatchLimits::DOWNLOAD);
        d.decode(&batch).unwrap();
        assert_eq!(d.table()[2], zstd);
        assert_eq!((d.stored_bytes(), d.raw_bytes()), (1011, 1008 + 5000));
        assert_eq!(
            decode(&encode_identity(&[]), 3, BatchLimits::DOWNLOAD).unwrap(),
            Vec::<Vec<u8>>::new()
        );
    }

    #[test]
    fn refusals_name_their_code_and_offset() {
        let batch = encode_identity(&[b"abc", b"defg"]);
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
        magic[7] = b'1';
        let e = code(&magic, BatchLimits::DOWNLOAD);
        assert_eq!((e.code(), e.offset), ("chunk_batch_magic", 0));
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
            code(&batch, BatchLimits::upload(6, 100)).code(),
            "chunk_batch_size"
        );
        assert_eq!(
            code(&batch, BatchLimits::upload(100, 6)).code(),
            "chunk_batch_size"
        );
        let table = |frame: Frame| {
            let mut t = Vec::new();
            encode_table(&[frame], &mut t);
            t
        };
        let empty = table(Frame::identity(b""));
        assert_eq!(
            code(&empty, BatchLimits::DOWNLOAD).code(),
            "chunk_batch_frame_size"
        );
        let mut lying = Frame::identity(b"abcd");
        lying.stored_size = 3;
        assert_eq!(
            code(&table(lying), BatchLimits::DOWNLOAD).code(),
            "chunk_batch_stored_size"
        );
        for stored in [0, 10, 11] {
            let z = Frame::zstd(Digest::EMPTY, 10, stored);
            assert_eq!(
                code(&table(z), BatchLimits::DOWNLOAD).code(),
                "chunk_batch_stored_size",
                "{stored}"
            );
        }
        let mut unknown = table(Frame::identity(b"abcd"));
        unknown[HEAD_BYTES + 40] = 2;
        let e = code(&unknown, BatchLimits::DOWNLOAD);
        assert_eq!(
            (e.code(), e.offset),
            ("chunk_batch_encoding", (HEAD_BYTES + 40) as u64)
        );
    }

    #[test]
    fn the_table_is_bounded_before_it_is_allocated() {
        let mut head = MAGIC.to_vec();
        head.extend_from_slice(&u32::MAX.to_be_bytes());
        let mut d = Decoder::new(BatchLimits::DOWNLOAD);
        assert_eq!(d.decode(&head).unwrap_err().code(), "chunk_batch_frames");
        assert_eq!(d.table().len(), 0);
    }
}
