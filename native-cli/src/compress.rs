//! How chunks travel (docs/transfer.md, "Units"): each chunk is compressed
//! on its own as one zstd frame (level and window from
//! `pillbox_wire::chunking`), and kept as it is when that does not save
//! 3 %: a chunk batch carries each frame as the store will keep and serve
//! it. A frame received has its shape checked from its headers by the
//! wire's rule ([`pillbox_wire::frames`], which the Worker applies to what
//! it is sent), then is decoded to exactly its raw size, never more,
//! before its bytes are hashed and used.

use std::borrow::Cow;

use packet_core::Digest;
use pillbox_wire::chunking::{keep_compressed, ZSTD_LEVEL, ZSTD_WINDOW_LOG};
use pillbox_wire::chunks::{Encoding, Frame};
use pillbox_wire::frames::{self, ShapeError};
use pillbox_wire::PartLimits;

use crate::error::{CliError, Result};

/// Whether a store whose parts take these limits accepts zstd frames.
pub fn store_takes_zstd(limits: &PartLimits) -> bool {
    limits.encodings.iter().any(|e| e == "zstd") && limits.zstd_max_window >= 1 << ZSTD_WINDOW_LOG
}

/// A chunk as it travels: its table entry and its stored bytes.
#[derive(Debug, PartialEq, Eq)]
pub struct Framed<'a> {
    /// The table entry.
    pub frame: Frame,
    /// The stored bytes: a zstd frame, or the chunk itself.
    pub stored: Cow<'a, [u8]>,
}

/// The frame of chunk `raw` (named `sha256`): compressed when `zstd_ok`
/// and that saves at least 3 %, else as it is.
pub fn frame(sha256: Digest, raw: &[u8], zstd_ok: bool) -> Result<Framed<'_>> {
    if zstd_ok {
        let mut c = zstd::bulk::Compressor::new(ZSTD_LEVEL).map_err(compressor_error)?;
        let compressed = c.compress(raw).map_err(compressor_error)?;
        if keep_compressed(raw.len(), compressed.len()) {
            return Ok(Framed {
                frame: Frame::zstd(sha256, raw.len() as u32, compressed.len() as u32),
                stored: Cow::Owned(compressed),
            });
        }
    }
    Ok(Framed {
        frame: Frame {
            sha256,
            raw_size: raw.len() as u32,
            stored_size: raw.len() as u32,
            encoding: Encoding::Identity,
        },
        stored: Cow::Borrowed(raw),
    })
}

/// A received frame's raw bytes, checked: decoded (a zstd frame must give
/// exactly its raw size), then hashed against its name.
#[cfg(test)]
pub fn unframe(frame: &Frame, stored: Vec<u8>) -> std::result::Result<Vec<u8>, String> {
    let mut u = Unframer::new()?;
    let raw = u.decode(frame, &stored)?.to_vec();
    if Digest::of(&raw) != frame.sha256 {
        return Err(format!("chunk {} does not hash to its name", frame.sha256));
    }
    Ok(raw)
}

/// Decodes received frames one after another with one zstd context, into
/// one buffer: what a thread that fetches many chunks keeps.
pub struct Unframer {
    zstd: zstd::bulk::Decompressor<'static>,
    raw: Vec<u8>,
}

impl Unframer {
    /// A decoder that refuses windows over 8 MiB.
    pub fn new() -> std::result::Result<Unframer, String> {
        let mut zstd = zstd::bulk::Decompressor::new().map_err(|e| e.to_string())?;
        zstd.set_parameter(zstd::zstd_safe::DParameter::WindowLogMax(ZSTD_WINDOW_LOG))
            .map_err(|e| e.to_string())?;
        Ok(Unframer {
            zstd,
            raw: Vec::new(),
        })
    }

    /// The raw bytes of a frame: its stored bytes for identity, else the
    /// zstd frame, once its shape is a chunk frame's
    /// ([`pillbox_wire::frames::check`]), decoded to exactly its raw size
    /// (never more). Not hashed: the caller checks them against the
    /// frame's name.
    pub fn decode<'a>(
        &'a mut self,
        frame: &Frame,
        stored: &'a [u8],
    ) -> std::result::Result<&'a [u8], String> {
        let raw_size = frame.raw_size as usize;
        let raw: &[u8] = match frame.encoding {
            Encoding::Identity => stored,
            Encoding::Zstd => {
                frames::check(u64::from(frame.raw_size), stored).map_err(|e| match e {
                    // As a frame decoded to another size is told.
                    ShapeError::SizeMismatch { declared, .. } => {
                        decoded_to(frame, declared as usize)
                    }
                    e => format!("chunk {} is not a chunk frame: {e}", frame.sha256),
                })?;
                self.raw.clear();
                self.raw.reserve(raw_size);
                self.zstd
                    .decompress_to_buffer(stored, &mut self.raw)
                    .map_err(|e| format!("chunk {} does not decode: {e}", frame.sha256))?;
                &self.raw
            }
        };
        if raw.len() != raw_size {
            return Err(decoded_to(frame, raw.len()));
        }
        Ok(raw)
    }
}

/// The refusal of a frame that decodes to `len` bytes, not its raw size.
fn decoded_to(frame: &Frame, len: usize) -> String {
    format!(
        "chunk {} decodes to {len} bytes, its table says {}",
        frame.sha256, frame.raw_size
    )
}

fn compressor_error(e: std::io::Error) -> CliError {
    CliError::Bug(format!("zstd refused its settings: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn noise(len: usize) -> Vec<u8> {
        let mut x = 0x2545_f491_4f6c_dd1du64;
        (0..len)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                (x >> 24) as u8
            })
            .collect()
    }

    #[test]
    fn compressible_chunks_travel_compressed_and_the_rest_as_they_are() {
        let text = b"fn main() { println!(\"hello\"); }\n".repeat(2_000);
        let d = Digest::of(&text);
        let f = frame(d, &text, true).unwrap();
        assert_eq!(f.frame.encoding, Encoding::Zstd);
        assert!(f.stored.len() < text.len() / 10);
        assert!(f.frame.stored_size_fits());
        assert_eq!(unframe(&f.frame, f.stored.into_owned()).unwrap(), text);
        let n = noise(200_000);
        let f = frame(Digest::of(&n), &n, true).unwrap();
        assert_eq!(f.frame.encoding, Encoding::Identity);
        assert_eq!(&f.stored[..], &n[..]);
        // A store that takes no zstd gets every chunk as it is.
        let f = frame(d, &text, false).unwrap();
        assert_eq!(f.frame, Frame::identity(&text));
    }

    #[test]
    fn a_frame_decodes_to_exactly_its_raw_size_and_name() {
        let text = vec![7u8; 100_000];
        let d = Digest::of(&text);
        let f = frame(d, &text, true).unwrap();
        let stored = f.stored.into_owned();
        // Claims fewer raw bytes than it holds: never decoded past them.
        let short = Frame::zstd(d, 50_000, f.frame.stored_size);
        assert!(unframe(&short, stored.clone()).is_err());
        let long = Frame::zstd(d, 200_000, f.frame.stored_size);
        assert!(unframe(&long, stored.clone())
            .unwrap_err()
            .contains("decodes to 100000"));
        let misnamed = Frame::zstd(Digest::of(b"x"), 100_000, f.frame.stored_size);
        assert!(unframe(&misnamed, stored.clone())
            .unwrap_err()
            .contains("does not hash"));
        assert!(unframe(&Frame::identity(b"abc"), b"abd".to_vec()).is_err());
        assert!(unframe(&f.frame, b"not zstd".to_vec()).is_err());
    }

    #[test]
    fn a_frame_of_another_shape_is_refused_before_it_is_decoded() {
        let text = b"fn main() { println!(\"hello\"); }\n".repeat(2_000);
        let d = Digest::of(&text);
        let f = frame(d, &text, true).unwrap();
        let raw = f.frame.raw_size;
        let good = f.stored.into_owned();
        let stored_as = |stored: &[u8]| Frame::zstd(d, raw, stored.len() as u32);
        assert_eq!(unframe(&stored_as(&good), good.clone()).unwrap(), text);
        // A skippable frame after it: libzstd would pass over it, a chunk
        // frame is one frame and nothing more.
        let mut skippable = good.clone();
        skippable.extend_from_slice(&[0x50, 0x2a, 0x4d, 0x18, 4, 0, 0, 0, 1, 2, 3, 4]);
        let e = unframe(&stored_as(&skippable), skippable).unwrap_err();
        assert!(e.contains("12 bytes follow the zstd frame"), "{e}");
        // A content size in its header other than the table's raw size:
        // told as a frame that decodes to another size is.
        let other = Frame::zstd(d, raw - 1, good.len() as u32);
        let e = unframe(&other, good.clone()).unwrap_err();
        assert!(
            e.ends_with(&format!(
                "decodes to {raw} bytes, its table says {}",
                raw - 1
            )),
            "{e}"
        );
        // A window over 8 MiB, refused by its header.
        let mut enc = zstd::stream::Encoder::new(Vec::new(), 3).unwrap();
        enc.include_contentsize(false).unwrap();
        enc.long_distance_matching(true).unwrap();
        enc.window_log(27).unwrap();
        std::io::Write::write_all(&mut enc, &text).unwrap();
        let wide = enc.finish().unwrap();
        let e = unframe(&stored_as(&wide), wide).unwrap_err();
        assert!(e.contains("a window of 134217728 bytes"), "{e}");
    }
}
