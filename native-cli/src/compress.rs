//! How the CLI compresses what it sends (docs/transfer.md, "Compression"):
//! each delta push part is one zstd frame (level [`ZSTD_LEVEL`], a window
//! of at most 8 MiB as HTTP's `zstd` content coding requires), sent as it
//! is (`identity`) when compression does not pay, as for chunks that are
//! compressed already.

use crate::error::{CliError, Result};

/// The zstd level of parts and manifests.
pub const ZSTD_LEVEL: i32 = 3;

/// log2 of the zstd window: 8 MiB, the most a `Content-Encoding: zstd`
/// decoder must accept (RFC 9659).
pub const WINDOW_LOG: u32 = 23;

/// The most chunk batch bytes one part carries (the store may allow more).
pub const PART_TARGET: u64 = 32 << 20;

/// A part sent compressed only when that saves at least this share of it.
const WORTH_IT: f64 = 0.97;

/// A part's body as sent.
#[derive(Debug, PartialEq, Eq)]
pub enum Encoded {
    /// `Content-Encoding: zstd`.
    Zstd(Vec<u8>),
    /// Sent as it is.
    Identity(Vec<u8>),
}

/// `bytes` as one zstd frame.
pub fn zstd(bytes: &[u8]) -> Result<Vec<u8>> {
    let mut c = zstd::bulk::Compressor::new(ZSTD_LEVEL).map_err(compressor_error)?;
    c.set_parameter(zstd::zstd_safe::CParameter::WindowLog(WINDOW_LOG))
        .map_err(compressor_error)?;
    c.compress(bytes).map_err(compressor_error)
}

/// Whether a store whose parts take these limits accepts our zstd parts.
pub fn store_takes_zstd(limits: &pillbox_wire::PartLimits) -> bool {
    limits.encodings.iter().any(|e| e == "zstd") && limits.zstd_max_window >= 1 << WINDOW_LOG
}

/// A part's chunk batch, compressed when that pays and the store takes zstd.
pub fn part(batch: Vec<u8>, zstd_ok: bool) -> Result<Encoded> {
    if !zstd_ok {
        return Ok(Encoded::Identity(batch));
    }
    let compressed = zstd(&batch)?;
    if (compressed.len() as f64) < batch.len() as f64 * WORTH_IT {
        Ok(Encoded::Zstd(compressed))
    } else {
        Ok(Encoded::Identity(batch))
    }
}

fn compressor_error(e: std::io::Error) -> CliError {
    CliError::Bug(format!("zstd refused its settings: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compressible_parts_are_compressed_and_the_rest_sent_as_is() {
        let text = b"fn main() { println!(\"hello\"); }\n".repeat(10_000);
        let Encoded::Zstd(z) = part(text.clone(), true).unwrap() else {
            panic!("text compresses");
        };
        assert!(z.len() < text.len() / 10);
        assert_eq!(zstd::decode_all(&z[..]).unwrap(), text);
        // Bytes that do not compress (a xorshift stream) go as they are.
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let noise: Vec<u8> = (0..200_000)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                (x >> 24) as u8
            })
            .collect();
        assert_eq!(
            part(noise.clone(), true).unwrap(),
            Encoded::Identity(noise.clone())
        );
        // A store that does not take zstd gets every part as it is.
        assert_eq!(part(text.clone(), false).unwrap(), Encoded::Identity(text));
    }

    #[test]
    fn the_window_is_at_most_8_mib() {
        let z = zstd(&vec![1u8; 20 << 20]).unwrap();
        let mut d = zstd::stream::read::Decoder::new(&z[..]).unwrap();
        d.window_log_max(WINDOW_LOG).unwrap();
        let mut out = Vec::new();
        std::io::Read::read_to_end(&mut d, &mut out).unwrap();
        assert_eq!(out.len(), 20 << 20);
    }
}
