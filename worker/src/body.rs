//! A request body read as it arrives, held to its [`Caps`] (docs/transfer.md,
//! "Decoding limits"): the one reader of every route's body. A declared
//! `Content-Length` is checked before any byte is read; the bytes are
//! counted as they arrive, and the body is refused the moment the count
//! passes its cap. Bodies are taken as sent (`Content-Encoding: identity`,
//! [`crate::encoding`]); the frames a push carries are decoded one by one
//! by `ingest`, within the batch's limits.
//!
//! On a refusal, by the body or by whatever reads it ([`Body::stop`]),
//! nothing more of it is read into wasm or decoded: the rest is read and
//! dropped as sent, or cancelled ([`caps::rest`]).

use js_sys::Uint8Array;
use pillbox_wire::ApiCode;
use web_sys::ReadableStream;

use crate::caps::{self, Caps, Meter, Rest};
use crate::problem::Problem;
use crate::storage::stream::{ChunkReader, StoreError};
use crate::timing::{self, Stage};

fn unreadable(e: StoreError) -> Problem {
    match e {
        StoreError::Refused(e) => Problem::from_packet_error(&e),
        StoreError::Failed(m) => Problem::bad_request(
            ApiCode::BodyInvalid,
            format!("the body could not be read: {m}"),
        ),
    }
}

/// Drains or cancels a body nobody read (an answer given before it was
/// needed), as [`caps::rest`] says from its declared length
/// ([`ChunkReader::drop_rest`]).
pub async fn discard(stream: &ReadableStream, length: Option<u64>) {
    discard_stream(stream, caps::rest(length, 0)).await;
}

async fn discard_stream(stream: &ReadableStream, rest: Rest) {
    if stream.locked() {
        return;
    }
    if let Ok(reader) = ChunkReader::new(stream) {
        reader.drop_rest(rest).await;
    }
}

/// A request body, read in runtime chunks as it arrives, held to its caps,
/// with one chunk put back for the next read.
pub struct Body {
    stream: Option<ReadableStream>,
    reader: Option<ChunkReader>,
    length: Option<u64>,
    meter: Meter,
    back: Option<Uint8Array>,
    ended: bool,
    stopped: bool,
}

impl Body {
    /// The body `stream` (none: empty) of `length` bytes if declared:
    /// refused at once if `length` is over the caps. Nothing is read yet.
    pub fn open(
        stream: Option<ReadableStream>,
        length: Option<u64>,
        caps: Caps,
    ) -> Result<Body, Problem> {
        let meter = Meter::new(caps);
        if let Some(length) = length {
            meter.declared(length)?;
        }
        Ok(Body {
            stream,
            reader: None,
            length,
            meter,
            back: None,
            ended: false,
            stopped: false,
        })
    }

    /// Whether the request came with no body at all.
    pub fn is_absent(&self) -> bool {
        self.stream.is_none()
    }

    /// The next bytes, as a runtime buffer; `None` at the end. On a
    /// refusal the body is stopped ([`Body::stop`]).
    pub async fn next(&mut self) -> Result<Option<Uint8Array>, Problem> {
        if let Some(chunk) = self.back.take() {
            return Ok(Some(chunk));
        }
        if self.stopped {
            return Ok(None);
        }
        let got = self.read().await;
        if got.is_err() {
            self.stop().await;
        }
        got
    }

    async fn read(&mut self) -> Result<Option<Uint8Array>, Problem> {
        if self.ended {
            return Ok(None);
        }
        if self.reader.is_none() {
            let Some(stream) = &self.stream else {
                self.ended = true;
                return Ok(None);
            };
            self.reader = Some(ChunkReader::new(stream).map_err(unreadable)?);
        }
        let Some(reader) = &self.reader else {
            return Ok(None);
        };
        match timing::timed(Stage::Body, reader.next())
            .await
            .map_err(unreadable)?
        {
            Some(chunk) => {
                self.meter.add(u64::from(chunk.length()))?;
                Ok(Some(chunk))
            }
            None => {
                self.ended = true;
                Ok(None)
            }
        }
    }

    /// Hands `chunk` (the unread end of the last one) to the next read.
    pub fn put_back(&mut self, chunk: Uint8Array) {
        if chunk.length() > 0 {
            self.back = Some(chunk);
        }
    }

    /// Reads the whole body into wasm. The pieces wait in the runtime's
    /// buffers until the end, so a refused body never enters wasm and an
    /// accepted one is copied once into a buffer of its size.
    pub async fn read_all(mut self) -> Result<Vec<u8>, Problem> {
        let mut pieces = Vec::new();
        let mut total = 0usize;
        while let Some(piece) = self.next().await? {
            total += piece.length() as usize;
            pieces.push(piece);
        }
        let mut out = vec![0; total];
        let mut at = 0;
        for piece in pieces {
            let n = piece.length() as usize;
            piece.copy_to(&mut out[at..at + n]);
            at += n;
        }
        Ok(out)
    }

    /// Stops reading for good: nothing more is read into wasm or decoded,
    /// and what is left as sent is dropped or cancelled ([`caps::rest`]).
    /// Call it on every refusal made while the body is read.
    pub async fn stop(&mut self) {
        if self.stopped {
            return;
        }
        self.stopped = true;
        self.back = None;
        if self.ended {
            return;
        }
        self.ended = true;
        let rest = caps::rest(self.length, self.meter.sent());
        match &self.reader {
            Some(reader) => reader.drop_rest(rest).await,
            None => {
                if let Some(stream) = &self.stream {
                    discard_stream(stream, rest).await;
                }
            }
        }
    }
}
