//! Fetching a packet's chunks and byte ranges from the store (docs/transfer.md,
//! "Delta pull"): `POST /v1/packets/{digest}/chunks` for each batch a plan
//! lists, several requests in flight, every answer a `PBCHUNK2` batch of
//! the frames asked for, in order, each decoded (a zstd frame to exactly
//! its raw size) on the thread that received it and handed on; and `GET
//! /v1/packets/{digest}` with `Range` for bytes that have no chunk of their
//! own to ask for. A connection lost mid-answer asks again for what did not
//! arrive, with the client's backoff.
//!
//! What is handed on is decoded, not yet hashed: the consumer hashes every
//! chunk against its name (once, with whatever else it proves by the same
//! bytes) before it uses a byte of it.

use std::io::{self, Read};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

use pillbox_wire::chunks::{BatchLimits as WireLimits, Decoded, Decoder};
use pillbox_wire::recipes::ChunkName;
use pillbox_wire::ChunkRequest;

use super::client::{bad_answer, status_error, unreachable_error, Remote};
use super::pull_plan::Batch;
use crate::compress::Unframer;
use crate::error::{CliError, Refused, Result};
use crate::packet_io::CHUNK;

/// Requests in flight at once: enough to keep the store, the wire and
/// this machine's cores busy together.
pub const IN_FLIGHT: usize = 4;

/// What the fetches cost.
#[derive(Debug, Default)]
pub struct Fetched {
    /// Chunks received.
    pub chunks: AtomicU64,
    /// Their raw bytes.
    pub bytes: AtomicU64,
    /// Requests sent (chunk batches and ranges).
    pub requests: AtomicU64,
    /// Bytes read by `Range`.
    pub range_bytes: AtomicU64,
}

/// Fetches from one packet.
pub struct Fetcher<'a> {
    remote: &'a Remote,
    /// `/v1/packets/<digest>`.
    packet: String,
    /// What it cost so far.
    pub fetched: Fetched,
}

/// What a consumer does with one decoded chunk.
pub type Each<'e> = dyn Fn(ChunkName, &[u8]) -> Result<()> + Sync + 'e;

impl<'a> Fetcher<'a> {
    /// Fetches from the packet at `packet` (`/v1/packets/<digest>`).
    pub fn new(remote: &'a Remote, packet: String) -> Fetcher<'a> {
        Fetcher {
            remote,
            packet,
            fetched: Fetched::default(),
        }
    }

    /// The store.
    pub fn remote(&self) -> &'a Remote {
        self.remote
    }

    /// Fetches every batch, `in_flight` requests at once, handing each
    /// chunk to `each` on the thread that received it. Stops at the first
    /// error (and when `stop` is set by someone else).
    pub fn batches(
        &self,
        batches: &[Batch],
        in_flight: usize,
        stop: &AtomicBool,
        each: &Each<'_>,
    ) -> Result<()> {
        let next = AtomicUsize::new(0);
        let threads = in_flight.clamp(1, batches.len().max(1));
        let run = || -> Result<()> {
            let mut unframer = Unframer::new().map_err(CliError::Bug)?;
            loop {
                if stop.load(Ordering::Relaxed) {
                    return Ok(());
                }
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(batch) = batches.get(i) else {
                    return Ok(());
                };
                if let Err(e) = self.batch(&batch.chunks, &mut unframer, stop, each) {
                    stop.store(true, Ordering::Relaxed);
                    return Err(e);
                }
            }
        };
        if threads == 1 {
            return run();
        }
        std::thread::scope(|scope| {
            let handles: Vec<_> = (0..threads).map(|_| scope.spawn(run)).collect();
            let mut first = Ok(());
            for h in handles {
                let r = h
                    .join()
                    .unwrap_or_else(|_| Err(CliError::Bug("a fetching thread panicked".into())));
                if first.is_ok() {
                    first = r;
                }
            }
            first
        })
    }

    /// One batch: asks for `wanted`, and again for what a lost connection
    /// left out.
    fn batch(
        &self,
        wanted: &[ChunkName],
        unframer: &mut Unframer,
        stop: &AtomicBool,
        each: &Each<'_>,
    ) -> Result<()> {
        let path = format!("{}/chunks", self.packet);
        let what = format!("POST {path}");
        let mut attempt = 1;
        let mut left = wanted;
        while !left.is_empty() {
            let body = ChunkRequest {
                chunks: left.iter().map(|c| c.sha256.hex().to_string()).collect(),
            };
            let json = serde_json::to_vec(&body).unwrap_or_default();
            self.fetched.requests.fetch_add(1, Ordering::Relaxed);
            let r = self
                .remote
                .send_bytes(&what, "POST", &path, "application/json", &json, &[])?;
            if r.status().as_u16() != 200 {
                return Err(status_error(&what, r));
            }
            let mut received = 0;
            let outcome = read_batch(
                self.remote.body_reader(r),
                left,
                unframer,
                stop,
                &mut |c, raw| {
                    each(c, raw)?;
                    received += 1;
                    self.fetched.chunks.fetch_add(1, Ordering::Relaxed);
                    self.fetched
                        .bytes
                        .fetch_add(u64::from(c.size), Ordering::Relaxed);
                    Ok(())
                },
            );
            left = &left[received..];
            match outcome {
                Ok(()) if left.is_empty() || stop.load(Ordering::Relaxed) => return Ok(()),
                Ok(()) => {
                    return Err(Refused::ChunkNotServed {
                        sha256: left[0].sha256.hex().to_string(),
                    }
                    .into())
                }
                Err(BatchRead::Refused(e)) => return Err(e),
                Err(BatchRead::Lost(e)) => match self.remote.retry().delay_after(attempt) {
                    Some(delay) => {
                        std::thread::sleep(delay);
                        self.remote.traffic().add_retry();
                        attempt += 1;
                    }
                    None => return Err(unreachable_error(&what, self.remote.base(), &e)),
                },
            }
        }
        Ok(())
    }

    /// `GET` of the packet's bytes `start..end`, handed to `each` as they
    /// arrive (in order, from `start`).
    pub fn range(
        &self,
        start: u64,
        end: u64,
        each: &mut dyn FnMut(&[u8]) -> Result<()>,
    ) -> Result<()> {
        if start >= end {
            return Ok(());
        }
        let what = format!("GET {} (bytes {start}-{})", self.packet, end - 1);
        let mut at = start;
        let mut attempt = 1;
        while at < end {
            self.fetched.requests.fetch_add(1, Ordering::Relaxed);
            let r = self.remote.get_range(&what, &self.packet, at, end - 1)?;
            if r.status().as_u16() != 206 {
                return Err(status_error(&what, r));
            }
            let expected = format!("bytes {at}-{}/", end - 1);
            let range_ok = r
                .headers()
                .get("content-range")
                .and_then(|v| v.to_str().ok())
                .is_some_and(|v| v.starts_with(&expected));
            if !range_ok {
                return Err(bad_answer(&what, "not the range asked for"));
            }
            let mut body = self.remote.body_reader(r).take(end - at);
            let mut buf = vec![0u8; CHUNK.min((end - at) as usize)];
            let lost = loop {
                match body.read(&mut buf) {
                    Ok(0) => break None,
                    Ok(n) => {
                        each(&buf[..n])?;
                        at += n as u64;
                        self.fetched
                            .range_bytes
                            .fetch_add(n as u64, Ordering::Relaxed);
                    }
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(e) => break Some(e.to_string()),
                }
            };
            if at == end {
                return Ok(());
            }
            let reason = lost.unwrap_or_else(|| "the answer ended early".into());
            match self.remote.retry().delay_after(attempt) {
                Some(delay) => {
                    std::thread::sleep(delay);
                    self.remote.traffic().add_retry();
                    attempt += 1;
                }
                None => return Err(unreachable_error(&what, self.remote.base(), &reason)),
            }
        }
        Ok(())
    }
}

enum BatchRead {
    /// The store's answer is not the batch asked for, or a chunk was
    /// refused.
    Refused(CliError),
    /// The connection was lost: what arrived was handed on.
    Lost(String),
}

/// Reads a chunk batch answer, handing each frame, decoded, to `each`. The
/// frames must be `wanted`, in order.
fn read_batch(
    mut body: Box<dyn Read + Send + '_>,
    wanted: &[ChunkName],
    unframer: &mut Unframer,
    stop: &AtomicBool,
    each: &mut dyn FnMut(ChunkName, &[u8]) -> Result<()>,
) -> std::result::Result<(), BatchRead> {
    let what = "the chunks answer";
    let mut decoder = Decoder::new(WireLimits::DOWNLOAD);
    let mut frame: Vec<u8> = Vec::new();
    let mut buf = vec![0u8; 256 << 10];
    loop {
        if stop.load(Ordering::Relaxed) {
            return Ok(());
        }
        let n = match body.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(BatchRead::Lost(e.to_string())),
        };
        let mut input = &buf[..n];
        loop {
            let (decoded, used) = decoder
                .decode(input)
                .map_err(|e| BatchRead::Refused(bad_answer(what, &e.to_string())))?;
            input = &input[used..];
            match decoded {
                Decoded::NeedInput | Decoded::Done => break,
                Decoded::Table => {
                    let t = decoder.table();
                    let same = t.len() == wanted.len()
                        && t.iter()
                            .zip(wanted)
                            .all(|(f, w)| f.sha256 == w.sha256 && f.raw_size == w.size);
                    if !same {
                        return Err(BatchRead::Refused(bad_answer(
                            what,
                            "not the chunks asked for, in order",
                        )));
                    }
                }
                Decoded::Data { index, bytes, last } => {
                    let entry = decoder.table()[index];
                    // A whole frame in the buffer is decoded where it lies.
                    let stored: &[u8] = if frame.is_empty() && last {
                        bytes
                    } else {
                        frame.extend_from_slice(bytes);
                        if !last {
                            continue;
                        }
                        &frame
                    };
                    let raw = unframer
                        .decode(&entry, stored)
                        .map_err(|e| BatchRead::Refused(bad_answer(what, &e)))?;
                    each(wanted[index], raw).map_err(BatchRead::Refused)?;
                    frame.clear();
                }
            }
            if input.is_empty() {
                break;
            }
        }
    }
    decoder.finish().map_err(|e| BatchRead::Lost(e.to_string()))
}
