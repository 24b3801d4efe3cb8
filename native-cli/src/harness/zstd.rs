//! Reading a zstd-compressed session log as a stream (Codex rewrites idle
//! rollouts as `rollout-…-<thread>.jsonl.zst`): the decoder holds one
//! window, never the whole file, so a reader can stop after the lines it
//! needs.

use std::io::{self, BufRead, Read};
use std::path::Path;

use ruzstd::decoding::{FrameDecoder, StreamingDecoder};

/// The largest window a frame may ask for: zstd's own default limit for
/// decoders (`ZSTD_WINDOWLOG_LIMIT_DEFAULT`, 2^27 bytes), which every
/// frame its default settings write stays within.
const MAX_WINDOW: u64 = 128 << 20;

/// Whether `path` names a zstd-compressed file (`*.zst`).
pub fn is_compressed(path: &Path) -> bool {
    path.extension().is_some_and(|e| e == "zst")
}

/// The decompressed bytes of a zstd stream: one frame after another, as
/// the format allows (`zstd` concatenates the frames of its inputs).
pub struct Frames<R: BufRead> {
    source: Option<R>,
    frame: Option<StreamingDecoder<R, FrameDecoder>>,
}

impl<R: BufRead> Frames<R> {
    /// Reads the frames of `source`.
    pub fn new(source: R) -> Frames<R> {
        Frames {
            source: Some(source),
            frame: None,
        }
    }
}

fn invalid(e: impl std::fmt::Display) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, format!("not zstd data: {e}"))
}

impl<R: BufRead> Read for Frames<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        loop {
            if let Some(frame) = &mut self.frame {
                // The decoder reports corrupt data as `Other`; the file's
                // own read errors keep their kind.
                let n = frame.read(buf).map_err(|e| match e.kind() {
                    io::ErrorKind::Other => invalid(e),
                    _ => e,
                })?;
                if n > 0 {
                    return Ok(n);
                }
                // The frame ended: another may follow.
                let Some(frame) = self.frame.take() else {
                    return Ok(0);
                };
                self.source = Some(frame.into_inner());
            }
            let Some(mut source) = self.source.take() else {
                return Ok(0);
            };
            if source.fill_buf()?.is_empty() {
                return Ok(0);
            }
            let mut decoder = FrameDecoder::new();
            decoder.set_max_window_size(MAX_WINDOW);
            let frame = StreamingDecoder::new_with_decoder(source, decoder).map_err(invalid)?;
            self.frame = Some(frame);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ruzstd::encoding::{compress_to_vec, CompressionLevel};

    #[test]
    fn concatenated_frames_read_as_one_stream() {
        let mut data = compress_to_vec(&b"first line\n"[..], CompressionLevel::Fastest);
        data.extend(compress_to_vec(
            &b"second line\n"[..],
            CompressionLevel::Fastest,
        ));
        let mut out = String::new();
        Frames::new(&data[..]).read_to_string(&mut out).unwrap();
        assert_eq!(out, "first line\nsecond line\n");
    }

    #[test]
    fn bytes_that_are_not_zstd_are_an_error() {
        let mut out = Vec::new();
        let e = Frames::new(&b"{\"type\":\"session_meta\"}\n"[..])
            .read_to_end(&mut out)
            .unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidData);
        assert!(Frames::new(&b""[..]).read_to_end(&mut out).is_ok());
    }

    #[test]
    fn only_zst_names_are_compressed() {
        assert!(is_compressed(Path::new("a/rollout-x.jsonl.zst")));
        assert!(!is_compressed(Path::new("a/rollout-x.jsonl")));
    }
}
