//! A zstd decoder for push parts that arrive as they stream, in wasm, in
//! bounded memory (the runtime decodes gzip, not zstd). `ruzstd` decodes
//! the blocks; this module cuts the input into frames and blocks itself
//! (RFC 8878 §3.1) so that each step decodes exactly one block (at most
//! 128 KiB of output) whatever the ratio, and refuses a window larger than
//! the limit before allocating it. Decoded bytes wait in the decoder's
//! window until they are no longer referenced or the frame ends, so the
//! memory held is the window plus one block.

use ruzstd::decoding::errors::FrameDecoderError;
use ruzstd::decoding::{BlockDecodingStrategy, FrameDecoder};

/// The largest block content zstd allows.
const MAX_BLOCK: usize = 128 << 10;
const FRAME_MAGIC: u32 = 0xFD2F_B528;

/// Why a part's zstd stream was refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ZstdError {
    /// `encoding_invalid` or `zstd_window_too_large`.
    pub code: &'static str,
    /// What was found.
    pub message: String,
}

fn invalid(message: impl Into<String>) -> ZstdError {
    ZstdError {
        code: "encoding_invalid",
        message: message.into(),
    }
}

enum State {
    /// Before a frame (or at the end of the input).
    Between,
    /// Inside a frame's blocks; whether a checksum follows the last one.
    Blocks { checksum: bool },
    /// Inside a skippable frame, this many bytes to go.
    Skip(u64),
}

/// A streaming zstd decoder.
pub struct ZstdStream {
    decoder: FrameDecoder,
    max_window: u64,
    input: Vec<u8>,
    at: usize,
    state: State,
}

impl ZstdStream {
    /// A decoder that refuses windows over `max_window` bytes.
    pub fn new(max_window: u64) -> ZstdStream {
        let mut decoder = FrameDecoder::new();
        decoder.set_max_window_size(max_window);
        ZstdStream {
            decoder,
            max_window,
            input: Vec::new(),
            at: 0,
            state: State::Between,
        }
    }

    /// Adds compressed bytes.
    pub fn feed(&mut self, input: &[u8]) {
        if self.at > 0 {
            self.input.drain(..self.at);
            self.at = 0;
        }
        self.input.extend_from_slice(input);
    }

    fn pending(&self) -> &[u8] {
        &self.input[self.at..]
    }

    /// Decodes what the input fed so far holds, appending to `out` until it
    /// holds at least `max_out` bytes. Returns whether it appended anything
    /// (call again until it does not, then feed more).
    pub fn decode(&mut self, out: &mut Vec<u8>, max_out: usize) -> Result<bool, ZstdError> {
        let before = out.len();
        while out.len() < max_out {
            if !self.step(out)? {
                break;
            }
        }
        Ok(out.len() > before)
    }

    /// One frame header, block, checksum or skip; false if the input does
    /// not hold a whole one yet.
    fn step(&mut self, out: &mut Vec<u8>) -> Result<bool, ZstdError> {
        match self.state {
            State::Between => {
                let p = &self.input[self.at..];
                if p.len() < 4 {
                    return Ok(false);
                }
                let magic = u32::from_le_bytes([p[0], p[1], p[2], p[3]]);
                if magic & 0xFFFF_FFF0 == 0x184D_2A50 {
                    if p.len() < 8 {
                        return Ok(false);
                    }
                    let size = u32::from_le_bytes([p[4], p[5], p[6], p[7]]);
                    self.at += 8;
                    self.state = State::Skip(u64::from(size));
                    return Ok(true);
                }
                if magic != FRAME_MAGIC {
                    return Err(invalid("the body is not zstd (no frame magic)"));
                }
                let Some(&descriptor) = p.get(4) else {
                    return Ok(false);
                };
                let single = descriptor & 0x20 != 0;
                let dict = [0, 1, 2, 4][(descriptor & 3) as usize];
                let fcs = match descriptor >> 6 {
                    0 => usize::from(single),
                    1 => 2,
                    2 => 4,
                    _ => 8,
                };
                let len = 5 + usize::from(!single) + dict + fcs;
                if p.len() < len {
                    return Ok(false);
                }
                let mut header = &p[..len];
                self.decoder.init(&mut header).map_err(|e| match e {
                    FrameDecoderError::WindowSizeTooBig { requested, .. } => ZstdError {
                        code: "zstd_window_too_large",
                        message: format!(
                            "the zstd window is {requested} bytes, at most {} are accepted",
                            self.max_window
                        ),
                    },
                    other => invalid(format!("a zstd frame header: {other}")),
                })?;
                self.at += len;
                self.state = State::Blocks {
                    checksum: descriptor & 0x04 != 0,
                };
                Ok(true)
            }
            State::Skip(left) => {
                let n = (self.pending().len() as u64).min(left);
                if n == 0 && left > 0 {
                    return Ok(false);
                }
                self.at += n as usize;
                self.state = if left == n {
                    State::Between
                } else {
                    State::Skip(left - n)
                };
                Ok(true)
            }
            State::Blocks { checksum } => {
                let p = &self.input[self.at..];
                if p.len() < 3 {
                    return Ok(false);
                }
                let header = u32::from_le_bytes([p[0], p[1], p[2], 0]);
                let last = header & 1 == 1;
                let kind = (header >> 1) & 3;
                let size = (header >> 3) as usize;
                let content = match kind {
                    0 | 2 => size,
                    1 => 1,
                    _ => return Err(invalid("a zstd block of the reserved type")),
                };
                if size > MAX_BLOCK {
                    return Err(invalid("a zstd block larger than 128 KiB"));
                }
                let whole = 3 + content + if last && checksum { 4 } else { 0 };
                if p.len() < whole {
                    return Ok(false);
                }
                let mut block = &p[..whole];
                self.decoder
                    .decode_blocks(&mut block, BlockDecodingStrategy::UptoBlocks(1))
                    .map_err(|e| invalid(format!("a zstd block: {e}")))?;
                self.at += whole;
                if last {
                    if let Some(all) = self.decoder.collect() {
                        out.extend_from_slice(&all);
                    }
                    self.state = State::Between;
                } else {
                    self.decoder
                        .collect_to_writer(&mut *out)
                        .map_err(|e| invalid(format!("zstd output: {e:?}")))?;
                }
                Ok(true)
            }
        }
    }

    /// Checks that the input ended between frames.
    pub fn finish(&self) -> Result<(), ZstdError> {
        match self.state {
            State::Between if self.pending().is_empty() => Ok(()),
            _ => Err(invalid("the zstd stream ends inside a frame")),
        }
    }
}

// The reference implementation (the `zstd` crate) builds natively only.
#[cfg(all(test, not(target_arch = "wasm32")))]
mod tests {
    use super::*;

    fn decode_all(compressed: &[u8], piece: usize) -> Result<Vec<u8>, ZstdError> {
        let mut z = ZstdStream::new(8 << 20);
        let mut out = Vec::new();
        let mut step = Vec::new();
        for input in compressed.chunks(piece) {
            z.feed(input);
            while z.decode(&mut step, 4096)? {
                out.extend_from_slice(&step);
                step.clear();
            }
        }
        z.finish()?;
        Ok(out)
    }

    fn sample() -> Vec<u8> {
        let mut v = Vec::new();
        for i in 0..20_000u32 {
            v.extend_from_slice(
                format!(
                    "{{\"line\":{i},\"text\":\"some session text {}\"}}\n",
                    i % 97
                )
                .as_bytes(),
            );
        }
        v.extend(std::iter::repeat_n(7u8, 600_000));
        v
    }

    #[test]
    fn decodes_what_zstd_writes_in_pieces_of_any_size() {
        let data = sample();
        for level in [1, 3, 19] {
            let compressed = zstd::bulk::compress(&data, level).unwrap();
            for piece in [1, 7, 4096, 1 << 20] {
                assert!(
                    decode_all(&compressed, piece).unwrap() == data,
                    "level {level}, piece {piece}"
                );
            }
        }
        // Two frames, a checksum, a skippable frame between them.
        let mut enc = zstd::stream::Encoder::new(Vec::new(), 3).unwrap();
        enc.include_checksum(true).unwrap();
        std::io::Write::write_all(&mut enc, &data[..1000]).unwrap();
        let mut two = enc.finish().unwrap();
        two.extend_from_slice(&[0x50, 0x2A, 0x4D, 0x18, 3, 0, 0, 0, 1, 2, 3]);
        two.extend_from_slice(&zstd::bulk::compress(&data[1000..], 1).unwrap());
        assert!(decode_all(&two, 5).unwrap() == data);
    }

    #[test]
    fn refuses_large_windows_garbage_and_cut_streams() {
        let data = sample();
        let mut enc = zstd::stream::Encoder::new(Vec::new(), 3).unwrap();
        enc.long_distance_matching(true).unwrap();
        enc.window_log(27).unwrap();
        std::io::Write::write_all(&mut enc, &data).unwrap();
        let long = enc.finish().unwrap();
        assert_eq!(
            decode_all(&long, 4096).unwrap_err().code,
            "zstd_window_too_large"
        );
        assert_eq!(
            decode_all(b"not zstd at all", 4).unwrap_err().code,
            "encoding_invalid"
        );
        let ok = zstd::bulk::compress(&data, 3).unwrap();
        assert_eq!(
            decode_all(&ok[..ok.len() - 2], 100).unwrap_err().code,
            "encoding_invalid"
        );
        let mut flipped = ok.clone();
        let i = flipped.len() / 2;
        flipped[i] ^= 0x55;
        // A corrupt block is refused or decodes to other bytes (the frames'
        // hashes catch that); it never panics.
        if let Ok(out) = decode_all(&flipped, 999) {
            assert!(out != data);
        }
    }

    #[test]
    fn a_highly_compressible_block_run_is_decoded_a_bounded_step_at_a_time() {
        let zeros = vec![0u8; 16 << 20];
        let compressed = zstd::bulk::compress(&zeros, 19).unwrap();
        assert!(compressed.len() < 4096);
        let mut z = ZstdStream::new(8 << 20);
        z.feed(&compressed);
        let mut out = Vec::new();
        let mut total = 0;
        let mut largest = 0;
        while z.decode(&mut out, 1 << 20).unwrap() {
            largest = largest.max(out.len());
            total += out.len();
            out.clear();
        }
        z.finish().unwrap();
        assert_eq!(total, 16 << 20);
        // One step adds at most a block past the target, or the window at
        // the frame's end.
        assert!(largest <= (8 << 20) + MAX_BLOCK + (1 << 20), "{largest}");
    }
}
