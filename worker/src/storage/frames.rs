//! A chunk's stored bytes and its raw bytes (docs/transfer.md, "Units"):
//! a zstd frame's shape is checked here (exactly one frame, no dictionary,
//! a window of at most [`pillbox_wire::chunking::ZSTD_MAX_WINDOW`] refused
//! before anything is allocated), then the runtime decodes it
//! ([`crate::platform`]) into exactly its raw size, never more; the
//! Worker's own chunks (layout streams) are compressed on their own (in
//! wasm, `ruzstd`) and kept compressed only when that pays, as a client
//! does.

use pillbox_wire::chunking::{keep_compressed, ZSTD_MAX_WINDOW};
use pillbox_wire::chunks::Encoding;
use pillbox_wire::ApiCode;

use crate::platform;

/// Why a stored frame does not give its raw bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FrameError {
    /// `chunk_frame_invalid` or `zstd_window_too_large`.
    pub code: ApiCode,
    /// What was found.
    pub message: String,
}

fn invalid(message: impl Into<String>) -> FrameError {
    FrameError {
        code: ApiCode::ChunkFrameInvalid,
        message: message.into(),
    }
}

/// Appends the `raw` bytes that `stored` (encoded `encoding`) holds to
/// `out`, or refuses: a zstd frame must be exactly one frame that decodes
/// to exactly `raw` bytes. At most `raw` bytes (and one zstd block) are
/// appended before a longer frame is refused.
pub fn decode_into(
    encoding: Encoding,
    raw: u64,
    stored: &[u8],
    out: &mut Vec<u8>,
) -> Result<(), FrameError> {
    match encoding {
        Encoding::Identity => {
            if stored.len() as u64 != raw {
                return Err(invalid(format!(
                    "{} stored bytes for a chunk of {raw}",
                    stored.len()
                )));
            }
            out.extend_from_slice(stored);
            Ok(())
        }
        Encoding::Zstd => decode_zstd(raw, stored, out),
    }
}

/// The zstd frame magic number, little-endian.
const ZSTD_MAGIC: [u8; 4] = [0x28, 0xb5, 0x2f, 0xfd];

/// What a zstd frame's header says, once the frame is known to be exactly
/// the stored bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Shape {
    /// The window it decodes with.
    window: u64,
    /// The content size it declares, if it does.
    content_size: Option<u64>,
}

/// Reads the header of the one zstd frame `stored` must be and walks its
/// blocks (RFC 8878, section 3.1.1), without decoding them: the window is
/// at most [`ZSTD_MAX_WINDOW`], no dictionary is named, and the frame ends
/// exactly where `stored` does. A skippable frame, a second frame, trailing
/// bytes or a cut block are refused here, whichever decoder runs next.
fn shape(stored: &[u8]) -> Result<Shape, FrameError> {
    let byte = |at: usize| -> Result<u8, FrameError> {
        stored
            .get(at)
            .copied()
            .ok_or_else(|| invalid(format!("the zstd frame is cut at byte {at}")))
    };
    let le = |at: usize, n: usize| -> Result<u64, FrameError> {
        (0..n).try_fold(0u64, |v, i| Ok(v | (u64::from(byte(at + i)?) << (8 * i))))
    };
    if stored.get(..4) != Some(&ZSTD_MAGIC[..]) {
        return Err(invalid("not a zstd frame: its magic number is not zstd's"));
    }
    let descriptor = byte(4)?;
    if descriptor & 0x08 != 0 {
        return Err(invalid(
            "not a zstd frame: a reserved bit of its header is set",
        ));
    }
    let single_segment = descriptor & 0x20 != 0;
    let checksum = descriptor & 0x04 != 0;
    let mut at = 5;
    let mut window = None;
    if !single_segment {
        let w = byte(at)?;
        at += 1;
        let log = 10 + u32::from(w >> 3);
        let base = 1u64 << log;
        window = Some(base + (base / 8) * u64::from(w & 7));
    }
    let dictionary_bytes = [0, 1, 2, 4][usize::from(descriptor & 3)];
    if le(at, dictionary_bytes)? != 0 {
        return Err(invalid("the zstd frame names a dictionary: none is used"));
    }
    at += dictionary_bytes;
    let size_bytes = match descriptor >> 6 {
        0 if single_segment => 1,
        0 => 0,
        1 => 2,
        2 => 4,
        _ => 8,
    };
    let content_size = match size_bytes {
        0 => None,
        2 => Some(le(at, 2)? + 256),
        n => Some(le(at, n)?),
    };
    at += size_bytes;
    let window = window.or(content_size).unwrap_or(0);
    if window > ZSTD_MAX_WINDOW {
        return Err(FrameError {
            code: ApiCode::ZstdWindowTooLarge,
            message: format!(
                "a zstd frame with a window of {window} bytes, at most {ZSTD_MAX_WINDOW} are accepted"
            ),
        });
    }
    loop {
        let header = le(at, 3)?;
        at += 3;
        let size = (header >> 3) as usize;
        at += match (header >> 1) & 3 {
            // Raw and compressed blocks hold their size; RLE one byte.
            0 | 2 => size,
            1 => 1,
            _ => return Err(invalid("a zstd block of the reserved type")),
        };
        if at > stored.len() {
            return Err(invalid(format!(
                "the zstd frame is cut at byte {}",
                stored.len()
            )));
        }
        if header & 1 == 1 {
            break;
        }
    }
    if checksum {
        at += 4;
    }
    match at.cmp(&stored.len()) {
        std::cmp::Ordering::Greater => Err(invalid(format!(
            "the zstd frame is cut at byte {}",
            stored.len()
        ))),
        std::cmp::Ordering::Less => Err(invalid(format!(
            "{} bytes follow the zstd frame",
            stored.len() - at
        ))),
        std::cmp::Ordering::Equal => Ok(Shape {
            window,
            content_size,
        }),
    }
}

fn decode_zstd(raw: u64, stored: &[u8], out: &mut Vec<u8>) -> Result<(), FrameError> {
    let shape = shape(stored)?;
    if let Some(declared) = shape.content_size.filter(|d| *d != raw) {
        return Err(invalid(format!(
            "a zstd frame of {declared} bytes for a chunk of {raw}"
        )));
    }
    let start = out.len();
    let decoded = platform::zstd_decode(stored, raw, out);
    if decoded.is_err() {
        out.truncate(start);
    }
    decoded.map_err(invalid)
}

/// A chunk the Worker writes itself, compressed on its own when that pays:
/// its encoding and stored bytes.
pub fn compress(raw: &[u8]) -> (Encoding, Vec<u8>) {
    let z = ruzstd::encoding::compress_to_vec(raw, ruzstd::encoding::CompressionLevel::Fastest);
    if keep_compressed(raw.len(), z.len()) && z.len() < raw.len() {
        (Encoding::Zstd, z)
    } else {
        (Encoding::Identity, raw.to_vec())
    }
}

// The reference implementation (the `zstd` crate) builds natively only.
#[cfg(all(test, not(target_arch = "wasm32")))]
mod tests {
    use super::*;

    fn text(n: usize) -> Vec<u8> {
        (0..n)
            .flat_map(|i| format!("line {} of the log\n", i % 311).into_bytes())
            .take(n)
            .collect()
    }

    fn decode(encoding: Encoding, raw: u64, stored: &[u8]) -> Result<Vec<u8>, FrameError> {
        let mut out = Vec::new();
        decode_into(encoding, raw, stored, &mut out).map(|()| out)
    }

    #[test]
    fn a_frame_gives_exactly_its_raw_bytes() {
        let data = text(700_000);
        let z = zstd::bulk::compress(&data, 3).unwrap();
        assert_eq!(decode(Encoding::Zstd, data.len() as u64, &z).unwrap(), data);
        // What the Worker compresses, it reads back.
        let (enc, stored) = compress(&data);
        assert_eq!(enc, Encoding::Zstd);
        assert!(stored.len() < data.len() / 3);
        assert_eq!(decode(enc, data.len() as u64, &stored).unwrap(), data);
        // Incompressible bytes are kept as they are.
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let noise: Vec<u8> = (0..50_000)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                (x >> 24) as u8
            })
            .collect();
        assert_eq!(compress(&noise), (Encoding::Identity, noise.clone()));
        assert_eq!(decode(Encoding::Identity, 50_000, &noise).unwrap(), noise);
    }

    #[test]
    fn a_frame_that_lies_about_its_size_or_shape_is_refused() {
        let data = text(300_000);
        let z = zstd::bulk::compress(&data, 3).unwrap();
        let code = |raw: u64, stored: &[u8]| {
            decode(Encoding::Zstd, raw, stored)
                .unwrap_err()
                .code
                .as_str()
        };
        // The frame header names its content size: another raw size is refused.
        assert_eq!(code(data.len() as u64 - 1, &z), "chunk_frame_invalid");
        assert_eq!(code(data.len() as u64 + 1, &z), "chunk_frame_invalid");
        // Without a content size in the header, the output is counted.
        let mut enc = zstd::stream::Encoder::new(Vec::new(), 3).unwrap();
        enc.include_contentsize(false).unwrap();
        std::io::Write::write_all(&mut enc, &data).unwrap();
        let unsized_frame = enc.finish().unwrap();
        assert_eq!(
            decode(Encoding::Zstd, data.len() as u64, &unsized_frame).unwrap(),
            data
        );
        assert_eq!(code(1000, &unsized_frame), "chunk_frame_invalid");
        assert_eq!(
            code(data.len() as u64 + 5, &unsized_frame),
            "chunk_frame_invalid"
        );
        // Two frames, trailing bytes, garbage, a cut frame.
        let mut two = z.clone();
        two.extend_from_slice(&z);
        assert_eq!(code(2 * data.len() as u64, &two), "chunk_frame_invalid");
        let mut trailing = z.clone();
        trailing.push(0);
        assert_eq!(code(data.len() as u64, &trailing), "chunk_frame_invalid");
        assert_eq!(code(10, b"not a zstd frame"), "chunk_frame_invalid");
        assert_eq!(
            code(data.len() as u64, &z[..z.len() - 3]),
            "chunk_frame_invalid"
        );
        assert_eq!(
            decode(Encoding::Identity, 3, b"abcd")
                .unwrap_err()
                .code
                .as_str(),
            "chunk_frame_invalid"
        );
        // A window over the limit is refused before it is allocated.
        let mut enc = zstd::stream::Encoder::new(Vec::new(), 3).unwrap();
        enc.include_contentsize(false).unwrap();
        enc.long_distance_matching(true).unwrap();
        enc.window_log(27).unwrap();
        std::io::Write::write_all(&mut enc, &data).unwrap();
        let wide = enc.finish().unwrap();
        assert_eq!(code(data.len() as u64, &wide), "zstd_window_too_large");
    }

    #[test]
    fn the_shape_is_read_from_headers_alone() {
        let data = text(400_000);
        // Checksummed, single-segment, several blocks: each is one frame
        // that ends where the bytes do.
        let mut enc = zstd::stream::Encoder::new(Vec::new(), 1).unwrap();
        enc.include_checksum(true).unwrap();
        std::io::Write::write_all(&mut enc, &data).unwrap();
        let summed = enc.finish().unwrap();
        assert_eq!(
            decode(Encoding::Zstd, data.len() as u64, &summed).unwrap(),
            data
        );
        let small = zstd::bulk::compress(&data[..300], 19).unwrap();
        assert_eq!(shape(&small).unwrap().content_size, Some(300));
        assert_eq!(shape(&small).unwrap().window, 300);
        let code = |stored: &[u8]| shape(stored).unwrap_err().code.as_str();
        // A skippable frame, a dictionary, a reserved bit, a reserved block.
        let mut skippable = vec![0x50, 0x2a, 0x4d, 0x18, 4, 0, 0, 0, 1, 2, 3, 4];
        assert_eq!(code(&skippable), "chunk_frame_invalid");
        skippable.extend_from_slice(&small);
        assert_eq!(code(&skippable), "chunk_frame_invalid");
        let dict = zstd::dict::from_samples(
            &[
                &data[..20_000],
                &data[20_000..40_000],
                &data[40_000..60_000],
                &data[60_000..80_000],
                &data[80_000..100_000],
                &data[100_000..120_000],
                &data[120_000..140_000],
                &data[140_000..160_000],
            ],
            4096,
        );
        if let Ok(dict) = dict {
            let with = zstd::bulk::Compressor::with_dictionary(3, &dict)
                .unwrap()
                .compress(&data[..5000])
                .unwrap();
            assert_eq!(code(&with), "chunk_frame_invalid");
        }
        let mut reserved = small.clone();
        reserved[4] |= 0x08;
        assert_eq!(code(&reserved), "chunk_frame_invalid");
        // Frames written by hand: one raw block of "abc"; the same block of
        // the reserved type; an RLE block.
        let hand = |block: [u8; 3], rest: &[u8]| {
            let mut f = vec![0x28, 0xb5, 0x2f, 0xfd, 0x20, 3];
            f.extend_from_slice(&block);
            f.extend_from_slice(rest);
            f
        };
        assert_eq!(
            decode(Encoding::Zstd, 3, &hand([25, 0, 0], b"abc")).unwrap(),
            b"abc"
        );
        assert_eq!(
            code(&hand([25 | 0b110, 0, 0], b"abc")),
            "chunk_frame_invalid"
        );
        assert_eq!(
            decode(Encoding::Zstd, 3, &hand([25 | 0b010, 0, 0], b"x")).unwrap(),
            b"xxx"
        );
        assert_eq!(
            code(&hand([25 | 0b010, 0, 0], b"xy")),
            "chunk_frame_invalid"
        );
        // Every cut of a frame is refused.
        for cut in (0..summed.len()).step_by(997).chain([summed.len() - 1]) {
            assert_eq!(code(&summed[..cut]), "chunk_frame_invalid", "cut at {cut}");
        }
    }

    #[test]
    fn a_bomb_is_stopped_a_block_past_its_raw_size() {
        let zeros = vec![0u8; 64 << 20];
        let mut enc = zstd::stream::Encoder::new(Vec::new(), 19).unwrap();
        enc.include_contentsize(false).unwrap();
        enc.window_log(20).unwrap();
        std::io::Write::write_all(&mut enc, &zeros).unwrap();
        let bomb = enc.finish().unwrap();
        let mut out = Vec::new();
        let e = decode_into(Encoding::Zstd, 1 << 20, &bomb, &mut out).unwrap_err();
        assert_eq!(e.code.as_str(), "chunk_frame_invalid");
        assert!(
            out.len() <= (1 << 20) + (128 << 10) + (1 << 20),
            "{}",
            out.len()
        );
    }
}
