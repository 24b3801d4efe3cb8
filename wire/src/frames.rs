//! A chunk frame's shape (docs/transfer.md, "Units"): a chunk that travels
//! compressed is exactly one zstd frame (RFC 8878, section 3.1.1) that
//! names no dictionary, sets no reserved bit and has no block of the
//! reserved type, decodes with a window of at most [`ZSTD_MAX_WINDOW`],
//! declares no content size but the chunk's, and ends exactly where its
//! stored bytes do. All of it is read from the frame's headers, without
//! decoding a block, before any decoder runs: the Worker checks every
//! frame it is sent here, and the CLI every frame it receives.
//!
//! ```
//! use pillbox_wire::frames;
//!
//! // One raw block of "abc", in a single-segment frame that says so.
//! let frame = [0x28, 0xb5, 0x2f, 0xfd, 0x20, 3, 25, 0, 0, b'a', b'b', b'c'];
//! assert_eq!(frames::check(3, &frame).unwrap().content_size, Some(3));
//! assert_eq!(frames::check(4, &frame).unwrap_err().code(), "chunk_frame_invalid");
//! let mut longer = frame.to_vec();
//! longer.push(0);
//! assert_eq!(frames::shape(&longer).unwrap_err().code(), "chunk_frame_invalid");
//! ```

use alloc::format;
use alloc::string::String;
use core::cmp::Ordering;
use core::fmt;

use crate::chunking::ZSTD_MAX_WINDOW;
use crate::codes::ApiCode;

/// The zstd frame magic number, little-endian.
const ZSTD_MAGIC: [u8; 4] = [0x28, 0xb5, 0x2f, 0xfd];

/// What a zstd frame's header says, once the frame is known to be exactly
/// the stored bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shape {
    /// The window it decodes with.
    pub window: u64,
    /// The content size it declares, if it does.
    pub content_size: Option<u64>,
}

/// Why stored bytes are not a chunk's zstd frame.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ShapeError {
    /// Not one zstd frame of the allowed shape: what was found.
    Invalid(String),
    /// A frame whose header declares another content size than the
    /// chunk's raw size.
    SizeMismatch {
        /// The content size its header declares.
        declared: u64,
        /// The chunk's raw size.
        raw: u64,
    },
    /// A window larger than [`ZSTD_MAX_WINDOW`], refused before anything
    /// is allocated for it.
    WindowTooLarge {
        /// The window the frame asks for, in bytes.
        window: u64,
    },
}

impl ShapeError {
    /// The API's code for it: `chunk_frame_invalid` or
    /// `zstd_window_too_large`.
    pub const fn api_code(&self) -> ApiCode {
        match self {
            ShapeError::Invalid(_) | ShapeError::SizeMismatch { .. } => ApiCode::ChunkFrameInvalid,
            ShapeError::WindowTooLarge { .. } => ApiCode::ZstdWindowTooLarge,
        }
    }

    /// The stable code the API and the CLI show.
    pub const fn code(&self) -> &'static str {
        self.api_code().as_str()
    }
}

impl fmt::Display for ShapeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ShapeError::Invalid(message) => f.write_str(message),
            ShapeError::SizeMismatch { declared, raw } => {
                write!(f, "a zstd frame of {declared} bytes for a chunk of {raw}")
            }
            ShapeError::WindowTooLarge { window } => write!(
                f,
                "a zstd frame with a window of {window} bytes, at most {ZSTD_MAX_WINDOW} are accepted"
            ),
        }
    }
}

fn invalid(message: impl Into<String>) -> ShapeError {
    ShapeError::Invalid(message.into())
}

fn cut_at(at: usize) -> ShapeError {
    invalid(format!("the zstd frame is cut at byte {at}"))
}

/// The shape of the zstd frame the stored bytes of a chunk of `raw` bytes
/// must be: [`shape`], and a declared content size, if any, of exactly
/// `raw`.
pub fn check(raw: u64, stored: &[u8]) -> Result<Shape, ShapeError> {
    let shape = shape(stored)?;
    if let Some(declared) = shape.content_size.filter(|d| *d != raw) {
        return Err(ShapeError::SizeMismatch { declared, raw });
    }
    Ok(shape)
}

/// Reads the header of the one zstd frame `stored` must be and walks its
/// blocks (RFC 8878, section 3.1.1), without decoding them: the window is
/// at most [`ZSTD_MAX_WINDOW`], no dictionary is named, and the frame ends
/// exactly where `stored` does. A skippable frame, a second frame, trailing
/// bytes or a cut block are refused here, whichever decoder runs next.
pub fn shape(stored: &[u8]) -> Result<Shape, ShapeError> {
    let byte =
        |at: usize| -> Result<u8, ShapeError> { stored.get(at).copied().ok_or_else(|| cut_at(at)) };
    let le = |at: usize, n: usize| -> Result<u64, ShapeError> {
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
        return Err(ShapeError::WindowTooLarge { window });
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
            return Err(cut_at(stored.len()));
        }
        if header & 1 == 1 {
            break;
        }
    }
    if checksum {
        at += 4;
    }
    match at.cmp(&stored.len()) {
        Ordering::Greater => Err(cut_at(stored.len())),
        Ordering::Less => Err(invalid(format!(
            "{} bytes follow the zstd frame",
            stored.len() - at
        ))),
        Ordering::Equal => Ok(Shape {
            window,
            content_size,
        }),
    }
}

#[cfg(test)]
mod tests {
    extern crate std;

    use super::*;
    use alloc::string::ToString;
    use alloc::vec;
    use alloc::vec::Vec;

    fn text(n: usize) -> Vec<u8> {
        (0..n)
            .flat_map(|i| format!("line {} of the log\n", i % 311).into_bytes())
            .take(n)
            .collect()
    }

    fn code(stored: &[u8]) -> &'static str {
        shape(stored).unwrap_err().code()
    }

    /// `data` as the reference encoder's streaming API writes it, with a
    /// checksum: several blocks in one frame.
    fn checksummed(data: &[u8]) -> Vec<u8> {
        let mut enc = zstd::stream::Encoder::new(Vec::new(), 1).unwrap();
        enc.include_checksum(true).unwrap();
        std::io::Write::write_all(&mut enc, data).unwrap();
        enc.finish().unwrap()
    }

    /// A single-segment frame of 3 bytes, one block, written by hand.
    fn hand(block: [u8; 3], rest: &[u8]) -> Vec<u8> {
        let mut f = vec![0x28, 0xb5, 0x2f, 0xfd, 0x20, 3];
        f.extend_from_slice(&block);
        f.extend_from_slice(rest);
        f
    }

    #[test]
    fn the_shape_is_read_from_headers_alone() {
        let data = text(400_000);
        // Checksummed, single-segment, several blocks: each is one frame
        // that ends where the bytes do.
        let summed = checksummed(&data);
        assert!(check(data.len() as u64, &summed).is_ok());
        let small = zstd::bulk::compress(&data[..300], 19).unwrap();
        assert_eq!(shape(&small).unwrap().content_size, Some(300));
        assert_eq!(shape(&small).unwrap().window, 300);
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
        // the reserved type; an RLE block, which holds one byte.
        assert_eq!(
            shape(&hand([25, 0, 0], b"abc")).unwrap(),
            Shape {
                window: 3,
                content_size: Some(3)
            }
        );
        assert_eq!(
            code(&hand([25 | 0b110, 0, 0], b"abc")),
            "chunk_frame_invalid"
        );
        assert!(shape(&hand([25 | 0b010, 0, 0], b"x")).is_ok());
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
    fn a_frame_is_one_frame_of_its_chunk_and_nothing_more() {
        let data = text(300_000);
        let z = zstd::bulk::compress(&data, 3).unwrap();
        let raw = data.len() as u64;
        assert_eq!(check(raw, &z).unwrap().content_size, Some(raw));
        // The header names its content size: another raw size is refused.
        for other in [raw - 1, raw + 1] {
            let e = check(other, &z).unwrap_err();
            assert_eq!(e.code(), "chunk_frame_invalid");
            assert_eq!(
                e,
                ShapeError::SizeMismatch {
                    declared: raw,
                    raw: other
                }
            );
            assert_eq!(
                e.to_string(),
                format!("a zstd frame of {raw} bytes for a chunk of {other}")
            );
        }
        // Without a content size, any raw size passes the headers (the
        // decoder counts the output).
        let mut enc = zstd::stream::Encoder::new(Vec::new(), 3).unwrap();
        enc.include_contentsize(false).unwrap();
        std::io::Write::write_all(&mut enc, &data).unwrap();
        let unsized_frame = enc.finish().unwrap();
        assert_eq!(check(1000, &unsized_frame).unwrap().content_size, None);
        // Two frames, trailing bytes, garbage, a cut frame.
        let mut two = z.clone();
        two.extend_from_slice(&z);
        assert_eq!(
            shape(&two).unwrap_err().to_string(),
            format!("{} bytes follow the zstd frame", z.len())
        );
        let mut trailing = z.clone();
        trailing.push(0);
        assert_eq!(code(&trailing), "chunk_frame_invalid");
        assert_eq!(code(b"not a zstd frame"), "chunk_frame_invalid");
        assert_eq!(code(&z[..z.len() - 3]), "chunk_frame_invalid");
        assert_eq!(code(&[]), "chunk_frame_invalid");
        assert_eq!(code(&z[..4]), "chunk_frame_invalid");
    }

    #[test]
    fn a_window_over_the_limit_is_refused_by_its_header() {
        let data = text(300_000);
        let mut enc = zstd::stream::Encoder::new(Vec::new(), 3).unwrap();
        enc.include_contentsize(false).unwrap();
        enc.long_distance_matching(true).unwrap();
        enc.window_log(27).unwrap();
        std::io::Write::write_all(&mut enc, &data).unwrap();
        let wide = enc.finish().unwrap();
        let e = shape(&wide).unwrap_err();
        assert_eq!(e.code(), "zstd_window_too_large");
        assert_eq!(e, ShapeError::WindowTooLarge { window: 1 << 27 });
        // The window descriptor by hand: 8 MiB passes, one step more not.
        let frame = |w: u8| {
            let mut f = vec![0x28, 0xb5, 0x2f, 0xfd, 0x00, w];
            f.extend_from_slice(&[1, 0, 0]);
            f
        };
        assert_eq!(shape(&frame(13 << 3)).unwrap().window, ZSTD_MAX_WINDOW);
        assert_eq!(
            shape(&frame((13 << 3) | 1)).unwrap_err().code(),
            "zstd_window_too_large"
        );
        // A single-segment frame's window is its content size.
        let mut big = vec![0x28, 0xb5, 0x2f, 0xfd, 0xa0];
        big.extend_from_slice(&((ZSTD_MAX_WINDOW + 1) as u32).to_le_bytes());
        assert_eq!(
            shape(&big).unwrap_err(),
            ShapeError::WindowTooLarge {
                window: ZSTD_MAX_WINDOW + 1
            }
        );
    }
}
