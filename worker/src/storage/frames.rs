//! A chunk's stored bytes and its raw bytes (docs/transfer.md, "Units"):
//! a zstd frame's shape is checked first, from its headers, by
//! [`pillbox_wire::frames`] as the CLI checks it (exactly one frame, no
//! dictionary, a window of at most
//! [`pillbox_wire::chunking::ZSTD_MAX_WINDOW`] refused before anything is
//! allocated), then the runtime decodes it ([`crate::platform`]) into
//! exactly its raw size, never more; the Worker's own chunks (layout
//! streams) are compressed on their own (in wasm, `ruzstd`) and kept
//! compressed only when that pays, as a client does.

use pillbox_wire::chunking::keep_compressed;
use pillbox_wire::chunks::Encoding;
use pillbox_wire::frames::{self, ShapeError};
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

impl From<ShapeError> for FrameError {
    fn from(e: ShapeError) -> FrameError {
        FrameError {
            code: e.api_code(),
            message: e.to_string(),
        }
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

fn decode_zstd(raw: u64, stored: &[u8], out: &mut Vec<u8>) -> Result<(), FrameError> {
    frames::check(raw, stored)?;
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
    fn frames_of_every_shape_the_headers_allow_decode() {
        let data = text(400_000);
        // Checksummed, single-segment, several blocks: each is one frame
        // that ends where the bytes do (its shape: pillbox_wire::frames).
        let mut enc = zstd::stream::Encoder::new(Vec::new(), 1).unwrap();
        enc.include_checksum(true).unwrap();
        std::io::Write::write_all(&mut enc, &data).unwrap();
        let summed = enc.finish().unwrap();
        assert_eq!(
            decode(Encoding::Zstd, data.len() as u64, &summed).unwrap(),
            data
        );
        // Frames written by hand: one raw block of "abc"; an RLE block.
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
            decode(Encoding::Zstd, 3, &hand([25 | 0b010, 0, 0], b"x")).unwrap(),
            b"xxx"
        );
        // A frame of the reserved block type is refused before decoding.
        assert_eq!(
            decode(Encoding::Zstd, 3, &hand([25 | 0b110, 0, 0], b"abc"))
                .unwrap_err()
                .code
                .as_str(),
            "chunk_frame_invalid"
        );
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
