//! A request body read as it arrives, held to its [`Caps`]
//! (docs/transfer.md, "Decoding limits"). A declared `Content-Length` is
//! checked before any byte is read; the bytes as sent are counted as they
//! arrive and the decoded bytes as they come out of the decoder, and the
//! body is refused the moment either count passes its cap.
//!
//! gzip is decoded by the runtime's `DecompressionStream`, fed
//! [`GZIP_STEP`] bytes at a time, and only once what the step before made
//! has been read. The runtime's decoder has no backpressure: a write is
//! expanded in full into its buffer at once, however little is read, so a
//! body piped through it would inflate a bomb to its end (deflate expands
//! up to 1,032 times: one step makes at most about 16.5 MiB). zstd is
//! decoded in wasm by [`crate::zstd`], one block at a time.
//!
//! On a refusal nothing more is decoded: the decoder is dropped and the
//! rest of the body is read and dropped as sent, or cancelled
//! ([`caps::rest`]).

use std::time::Duration;

use futures_util::future::{self, Either};
use js_sys::{ArrayBuffer, Reflect, Uint8Array};
use wasm_bindgen::{JsCast, JsValue};
use wasm_bindgen_futures::JsFuture;
use web_sys::{ReadableStream, WritableStream, WritableStreamDefaultWriter};

use crate::caps::{self, Caps, Meter, Rest};
use crate::encoding::Encoding;
use crate::problem::Problem;
use crate::store::{self, ChunkReader, StoreError};
use crate::timing::{self, Stage};
use crate::zstd::ZstdStream;

/// Bytes of gzip handed to the runtime's decoder in one write.
const GZIP_STEP: u32 = 16 << 10;
/// Decoded bytes gathered into one chunk.
const OUT_CHUNK: u32 = 1 << 20;
/// Decoded zstd output handed on at a time.
const ZSTD_STEP: usize = 1 << 20;

/// 422 `encoding_invalid`: the body does not decode.
pub fn encoding_invalid(message: String) -> Problem {
    Problem::new(
        422,
        "encoding_invalid",
        message,
        "send the body encoded as its Content-Encoding says (or with none)",
    )
}

fn unreadable(e: StoreError) -> Problem {
    match e {
        StoreError::Refused(e) => Problem::from_packet_error(&e),
        StoreError::Failed(m) => {
            Problem::bad_request("body_invalid", format!("the body could not be read: {m}"))
        }
    }
}

/// The body as sent, counted.
struct Raw {
    stream: Option<ReadableStream>,
    reader: Option<ChunkReader>,
    ended: bool,
}

impl Raw {
    /// The next chunk as sent, `None` at the end; refused past the cap.
    async fn next(&mut self, meter: &mut Meter) -> Result<Option<Uint8Array>, Problem> {
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
                meter
                    .add_sent(u64::from(chunk.length()))
                    .map_err(|o| meter.refusal(o))?;
                Ok(Some(chunk))
            }
            None => {
                self.ended = true;
                Ok(None)
            }
        }
    }

    /// Drops what is left as sent, or cancels it.
    async fn finish(&mut self, rest: Rest) {
        if self.ended {
            return;
        }
        self.ended = true;
        match &self.reader {
            Some(reader) => drop_rest(reader, rest).await,
            None => {
                if let Some(stream) = &self.stream {
                    discard_stream(stream, rest).await;
                }
            }
        }
    }
}

/// Reads and drops at most what `rest` allows of a locked body, then
/// cancels what is left.
pub async fn drop_rest(reader: &ChunkReader, rest: Rest) {
    let Rest::Drain(most) = rest else {
        reader.cancel();
        return;
    };
    let mut seen = 0u64;
    loop {
        match reader.next().await {
            Ok(Some(chunk)) => {
                seen += u64::from(chunk.length());
                if seen > most {
                    reader.cancel();
                    return;
                }
            }
            _ => return,
        }
    }
}

/// The same for a body nobody read (an answer given before it was
/// needed): drained or cancelled by [`caps::rest`] from its declared length.
pub async fn discard(stream: &ReadableStream, length: Option<u64>) {
    discard_stream(stream, caps::rest(length, 0)).await;
}

async fn discard_stream(stream: &ReadableStream, rest: Rest) {
    if stream.locked() {
        return;
    }
    if let Ok(reader) = ChunkReader::new(stream) {
        drop_rest(&reader, rest).await;
    }
}

/// The runtime's gzip decoder, fed a step at a time.
struct Gunzip {
    writer: WritableStreamDefaultWriter,
    /// A BYOB reader of the decoded bytes.
    reader: JsValue,
    /// The read in flight, and how many bytes it asked for.
    read: Option<(JsFuture, u32)>,
    /// The chunk being filled and how many bytes it holds (a read in
    /// flight holds its buffer).
    out: Option<ArrayBuffer>,
    filled: u32,
    /// The chunk as sent being fed, and how much of it was fed.
    input: Option<(Uint8Array, u32)>,
    /// Whether everything the decoder made has been read.
    drained: bool,
    /// Whether the input ended (the decoder was closed).
    closed: bool,
    /// Whether the decoded bytes ended.
    done: bool,
}

fn js(context: &str) -> impl Fn(JsValue) -> Problem + '_ {
    move |e| Problem::internal(format!("{context}: {}", store::js_text(&e)))
}

fn gzip_invalid(e: JsValue) -> Problem {
    encoding_invalid(format!(
        "the gzip body does not decode: {}",
        store::js_text(&e)
    ))
}

impl Gunzip {
    fn new() -> Result<Gunzip, Problem> {
        let ctor = Reflect::get(&js_sys::global(), &JsValue::from_str("DecompressionStream"))
            .map_err(js("DecompressionStream"))?;
        let ctor: js_sys::Function = ctor.dyn_into().map_err(js("DecompressionStream"))?;
        let args = js_sys::Array::of1(&JsValue::from_str("gzip"));
        let transform = Reflect::construct(&ctor, &args).map_err(js("DecompressionStream"))?;
        let writable: WritableStream = Reflect::get(&transform, &JsValue::from_str("writable"))
            .map_err(js("DecompressionStream"))?
            .unchecked_into();
        let readable = Reflect::get(&transform, &JsValue::from_str("readable"))
            .map_err(js("DecompressionStream"))?;
        let get_reader: js_sys::Function = Reflect::get(&readable, &JsValue::from_str("getReader"))
            .map_err(js("DecompressionStream"))?
            .unchecked_into();
        let options = js_sys::Object::new();
        Reflect::set(
            &options,
            &JsValue::from_str("mode"),
            &JsValue::from_str("byob"),
        )
        .map_err(js("DecompressionStream"))?;
        let reader = get_reader
            .call1(&readable, &options)
            .map_err(js("DecompressionStream"))?;
        Ok(Gunzip {
            writer: writable.get_writer().map_err(js("DecompressionStream"))?,
            reader,
            read: None,
            out: None,
            filled: 0,
            input: None,
            drained: true,
            closed: false,
            done: false,
        })
    }

    /// Starts a read into the rest of the chunk being filled.
    fn start_read(&mut self) -> Result<(), Problem> {
        if self.read.is_some() {
            return Ok(());
        }
        let out = self
            .out
            .take()
            .unwrap_or_else(|| ArrayBuffer::new(OUT_CHUNK));
        let want = OUT_CHUNK - self.filled;
        let view = Uint8Array::new_with_byte_offset_and_length(&out, self.filled, want);
        let read: js_sys::Function = Reflect::get(&self.reader, &JsValue::from_str("read"))
            .map_err(js("reading the decoded body"))?
            .unchecked_into();
        let promise = read
            .call1(&self.reader, &view)
            .map_err(js("reading the decoded body"))?;
        self.read = Some((JsFuture::from(js_sys::Promise::from(promise)), want));
        Ok(())
    }

    /// The chunk filled so far, if it holds anything.
    fn take_filled(&mut self) -> Option<Uint8Array> {
        let out = self.out.take()?;
        let n = std::mem::take(&mut self.filled);
        (n > 0).then(|| Uint8Array::new_with_byte_offset_and_length(&out, 0, n))
    }

    /// Feeds the decoder its next step (or closes it at the end of the
    /// input). Returns once the runtime has expanded it in full.
    async fn feed(&mut self, raw: &mut Raw, meter: &mut Meter) -> Result<(), Problem> {
        let fed_all = self
            .input
            .as_ref()
            .is_none_or(|(chunk, at)| *at >= chunk.length());
        if fed_all {
            self.input = raw.next(meter).await?.map(|c| (c, 0));
        }
        // The runtime expands the step within the write call itself.
        let since = timing::now();
        let write = match self.input.as_mut() {
            Some((chunk, at)) => {
                let end = chunk.length().min(*at + GZIP_STEP);
                let step = chunk.subarray(*at, end);
                *at = end;
                self.writer.write_with_chunk(&step)
            }
            None => {
                self.closed = true;
                self.writer.close()
            }
        };
        self.drained = false;
        let written = JsFuture::from(write).await;
        timing::add(Stage::Decode, since);
        written.map_err(gzip_invalid)?;
        Ok(())
    }

    async fn next(
        &mut self,
        raw: &mut Raw,
        meter: &mut Meter,
    ) -> Result<Option<Uint8Array>, Problem> {
        loop {
            if self.done {
                return Ok(self.take_filled());
            }
            self.start_read()?;
            if self.drained && !self.closed {
                self.feed(raw, meter).await?;
            }
            let Some((read, want)) = self.read.as_mut() else {
                continue;
            };
            let want = *want;
            let step = if self.closed {
                read.await
            } else {
                // The runtime makes a step's output at once, but a read of
                // it resolves a few turns later: a timer fires only once
                // every ready task ran, so a read still pending then has
                // nothing to read and the decoder wants its next step.
                let tick = worker::Delay::from(Duration::ZERO);
                match future::select(read, tick).await {
                    Either::Left((step, _)) => step,
                    Either::Right(_) => {
                        self.drained = true;
                        continue;
                    }
                }
            };
            self.read = None;
            let step = step.map_err(gzip_invalid)?;
            let done = Reflect::get(&step, &JsValue::from_str("done"))
                .ok()
                .and_then(|d| d.as_bool())
                .unwrap_or(true);
            let value = Reflect::get(&step, &JsValue::from_str("value"))
                .ok()
                .and_then(|v| v.dyn_into::<Uint8Array>().ok());
            // The read was handed the chunk's buffer and gives it back.
            let Some(value) = value else {
                if self.filled > 0 {
                    return Err(Problem::internal("the gzip decoder kept decoded bytes"));
                }
                self.done = true;
                continue;
            };
            self.out = Some(value.buffer());
            let n = value.length();
            self.filled += n;
            // A read that got less than it asked for emptied the decoder.
            self.drained = n < want;
            meter
                .add_decoded(u64::from(n))
                .map_err(|o| meter.refusal(o))?;
            if done {
                self.done = true;
            } else if self.filled == OUT_CHUNK {
                return Ok(self.take_filled());
            }
        }
    }

    /// Drops the decoder and whatever it holds.
    fn abort(&self) {
        let _ = self
            .writer
            .abort_with_reason(&JsValue::from_str("body refused"));
        if let Ok(cancel) = Reflect::get(&self.reader, &JsValue::from_str("cancel")) {
            if let Some(cancel) = cancel.dyn_ref::<js_sys::Function>() {
                let _ = cancel.call0(&self.reader);
            }
        }
    }
}

enum Decoder {
    Identity,
    /// Made at the first read.
    Gzip(Option<Box<Gunzip>>),
    Zstd {
        stream: Box<ZstdStream>,
        out: Vec<u8>,
    },
}

/// A request body, decoded as it is read, held to its caps.
pub struct Body {
    raw: Raw,
    length: Option<u64>,
    meter: Meter,
    decoder: Decoder,
    stopped: bool,
}

impl Body {
    /// The body `stream` (none: empty) of `length` bytes as sent if
    /// declared, in `encoding`: refused at once if `length` is over the
    /// caps. Nothing is read yet.
    pub fn open(
        stream: Option<ReadableStream>,
        length: Option<u64>,
        encoding: Encoding,
        caps: Caps,
    ) -> Result<Body, Problem> {
        let meter = Meter::new(caps, encoding == Encoding::Identity);
        if let Some(length) = length {
            meter.declared(length).map_err(|o| meter.refusal(o))?;
        }
        let decoder = match encoding {
            Encoding::Identity => Decoder::Identity,
            Encoding::Gzip => Decoder::Gzip(None),
            Encoding::Zstd => Decoder::Zstd {
                stream: Box::new(ZstdStream::new(crate::config::ZSTD_MAX_WINDOW)),
                out: Vec::new(),
            },
        };
        Ok(Body {
            raw: Raw {
                stream,
                reader: None,
                ended: false,
            },
            length,
            meter,
            decoder,
            stopped: false,
        })
    }

    /// Whether the request came with no body at all.
    pub fn is_absent(&self) -> bool {
        self.raw.stream.is_none()
    }

    /// The next decoded bytes, as runtime buffers; `None` at the end. On a
    /// refusal the body is stopped ([`Body::stop`]).
    pub async fn next(&mut self) -> Result<Option<Uint8Array>, Problem> {
        if self.stopped {
            return Ok(None);
        }
        let got = self.decode().await;
        if got.is_err() {
            self.stop().await;
        }
        got
    }

    async fn decode(&mut self) -> Result<Option<Uint8Array>, Problem> {
        let Body {
            raw,
            meter,
            decoder,
            ..
        } = self;
        match decoder {
            Decoder::Identity => {
                let chunk = raw.next(meter).await?;
                if let Some(c) = &chunk {
                    meter
                        .add_decoded(u64::from(c.length()))
                        .map_err(|o| meter.refusal(o))?;
                }
                Ok(chunk)
            }
            Decoder::Gzip(gunzip) => {
                if gunzip.is_none() {
                    *gunzip = Some(Box::new(Gunzip::new()?));
                }
                match gunzip.as_mut() {
                    Some(g) => g.next(raw, meter).await,
                    None => Ok(None),
                }
            }
            Decoder::Zstd { stream, out } => loop {
                out.clear();
                let since = timing::now();
                let more = stream
                    .decode(out, ZSTD_STEP)
                    .map_err(|e| zstd_refused(e.code, e.message))?;
                timing::add(Stage::Decode, since);
                if more {
                    meter
                        .add_decoded(out.len() as u64)
                        .map_err(|o| meter.refusal(o))?;
                    let since = timing::now();
                    let chunk = Uint8Array::from(out.as_slice());
                    timing::add(Stage::Copy, since);
                    return Ok(Some(chunk));
                }
                match raw.next(meter).await? {
                    Some(chunk) => {
                        let since = timing::now();
                        let bytes = chunk.to_vec();
                        timing::add(Stage::Copy, since);
                        stream.feed(&bytes);
                    }
                    None => {
                        stream
                            .finish()
                            .map_err(|e| zstd_refused(e.code, e.message))?;
                        return Ok(None);
                    }
                }
            },
        }
    }

    /// Reads the whole decoded body into wasm. The pieces wait in the
    /// runtime's buffers until the end, so a refused body never enters
    /// wasm and an accepted one is copied once into a buffer of its size.
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

    /// Stops reading for good: nothing more is decoded, and what is left as
    /// sent is dropped or cancelled ([`caps::rest`]). Call it on every
    /// refusal the body's reader makes.
    pub async fn stop(&mut self) {
        if self.stopped {
            return;
        }
        self.stopped = true;
        if let Decoder::Gzip(Some(g)) = &self.decoder {
            g.abort();
        }
        self.decoder = Decoder::Identity;
        let rest = caps::rest(self.length, self.meter.sent());
        self.raw.finish(rest).await;
    }
}

fn zstd_refused(code: &str, message: String) -> Problem {
    match code {
        "encoding_invalid" => encoding_invalid(message),
        _ => Problem::new(
            422,
            code,
            message,
            "compress with a window of at most 8 MiB (zstd levels 1 to 19 without --long or --ultra use one)",
        ),
    }
}
