//! Streams between requests, packet-core and R2. A whole packet's bytes
//! reach R2 only through [`verify_into_bucket`]: each chunk of the source is
//! copied into wasm for packet-core's [`Reader`] and handed on to an R2 put
//! through a `FixedLengthStream`; the last chunk is handed on only once the
//! whole packet is verified. A refusal aborts the put, so nothing is stored.
//! The whole packet is hashed only for a /1 packet, which that hash names;
//! a /2 packet is named by its manifest, which the reader checks as soon as
//! it is read (packet-core's rule per format). An object already in R2 (a
//! multipart upload assembled) is verified by reading it once
//! ([`verify_object`]).
//!
//! Also here: the pieces the other streaming modules share, a reader of
//! large chunks ([`ChunkReader`]), the runtime's SHA-256 ([`PlatformHash`]),
//! an R2 put fed by writes ([`FixedPut`]) and R2 range reads ([`read_range`]).

use js_sys::{BigInt, Reflect, Uint8Array};
use packet_core::{
    Digest, Error as PacketError, HashedElsewhere, Hasher, Limits, Reader, ReaderOptions,
    VerifiedPacket,
};
use wasm_bindgen::{JsCast, JsValue};
use wasm_bindgen_futures::JsFuture;
use web_sys::{ReadableStream, TransformStream, WritableStreamDefaultWriter};
use worker::crypto::{DigestStream, DigestStreamAlgorithm};
use worker::worker_sys::FixedLengthStream;
use worker::{Bucket, Data, HttpMetadata};

use crate::config::PacketHasher;
use crate::problem::Problem;
use crate::timing::{self, Stage};

/// Why a packet was not stored.
pub enum StoreError {
    /// packet-core refused it.
    Refused(PacketError),
    /// The body stream or R2 failed.
    Failed(String),
}

impl StoreError {
    /// A verification that did not store the packet: packet-core's
    /// refusal (422), or a storage failure (500).
    pub fn problem(self) -> Problem {
        match self {
            StoreError::Refused(e) => Problem::from_packet_error(&e),
            StoreError::Failed(message) => Problem::internal(message),
        }
    }
}

/// A JavaScript exception as text.
pub fn js_text(e: &JsValue) -> String {
    e.dyn_ref::<js_sys::Error>()
        .map(|e| String::from(e.message()))
        .unwrap_or_else(|| format!("{e:?}"))
}

/// A JavaScript exception as a storage failure.
pub fn js_error(context: &str, e: JsValue) -> StoreError {
    StoreError::Failed(format!("{context}: {}", js_text(&e)))
}

/// The whole-packet SHA-256, computed as the chunks pass: by packet-core in
/// wasm, or by the runtime.
enum PacketHash {
    Core(Hasher),
    Platform(PlatformHash),
}

impl PacketHash {
    fn new(hasher: PacketHasher) -> Result<PacketHash, StoreError> {
        Ok(match hasher {
            PacketHasher::Core => PacketHash::Core(Hasher::new()),
            PacketHasher::Platform => PacketHash::Platform(PlatformHash::new()?),
        })
    }

    async fn write(&mut self, chunk: &[u8]) -> Result<(), StoreError> {
        match self {
            PacketHash::Core(h) => {
                h.update(chunk);
                Ok(())
            }
            PacketHash::Platform(h) => h.write(chunk).await,
        }
    }

    async fn finish(self) -> Result<Digest, StoreError> {
        match self {
            PacketHash::Core(h) => Ok(h.finish()),
            PacketHash::Platform(h) => h.finish().await,
        }
    }
}

/// A SHA-256 computed by the runtime (`crypto.DigestStream`).
pub struct PlatformHash {
    stream: DigestStream,
    writer: WritableStreamDefaultWriter,
}

impl PlatformHash {
    /// A new hash.
    pub fn new() -> Result<PlatformHash, StoreError> {
        let stream = DigestStream::new(DigestStreamAlgorithm::Sha256);
        let writable: &web_sys::WritableStream = stream.raw().unchecked_ref();
        let writer = writable
            .get_writer()
            .map_err(|e| js_error("digest stream", e))?;
        Ok(PlatformHash { stream, writer })
    }

    /// Hashes bytes held in wasm (copied out first).
    pub async fn write(&self, chunk: &[u8]) -> Result<(), StoreError> {
        self.write_array(&Uint8Array::from(chunk)).await
    }

    /// Hashes bytes held by the runtime, without a copy (the stream reads
    /// them and leaves the buffer usable).
    pub async fn write_array(&self, chunk: &Uint8Array) -> Result<(), StoreError> {
        JsFuture::from(self.writer.write_with_chunk(chunk))
            .await
            .map(|_| ())
            .map_err(|e| js_error("digest stream", e))
    }

    /// The digest of everything written.
    pub async fn finish(self) -> Result<Digest, StoreError> {
        JsFuture::from(self.writer.close())
            .await
            .map_err(|e| js_error("digest stream", e))?;
        let bytes = self
            .stream
            .digest()
            .await
            .map_err(|e| StoreError::Failed(format!("digest stream: {e}")))?
            .to_vec();
        let array: [u8; 32] = bytes
            .try_into()
            .map_err(|_| StoreError::Failed("digest stream: not 32 bytes".into()))?;
        Ok(Digest(array))
    }
}

/// A `FixedLengthStream` of `size` bytes: R2 needs the length of a
/// streamed put before the bytes.
pub fn fixed_length(size: u64) -> Result<TransformStream, StoreError> {
    let fixed = if size <= u64::from(u32::MAX) {
        FixedLengthStream::new(size as u32)
    } else {
        FixedLengthStream::new_big_int(BigInt::from(size))
    }
    .map_err(|e| js_error("fixed length stream", e))?;
    Ok(fixed.unchecked_into())
}

/// An R2 put of exactly `size` bytes, fed by [`FixedPut::writer`]; the
/// put completes when the last byte is written and the writer closed, and
/// [`FixedPut::abort`] makes it store nothing. Clones share the stream.
#[derive(Clone)]
pub struct FixedPut {
    /// Where the bytes go.
    pub writer: WritableStreamDefaultWriter,
    /// The readable side, for the put.
    pub readable: ReadableStream,
}

impl FixedPut {
    /// A put's stream of `size` bytes.
    pub fn new(size: u64) -> Result<FixedPut, StoreError> {
        let transform = fixed_length(size)?;
        let writer = transform
            .writable()
            .get_writer()
            .map_err(|e| js_error("fixed length stream", e))?;
        Ok(FixedPut {
            writer,
            readable: transform.readable(),
        })
    }

    /// Writes bytes held by the runtime.
    pub async fn write(&self, chunk: &Uint8Array) -> Result<(), StoreError> {
        JsFuture::from(self.writer.write_with_chunk(chunk))
            .await
            .map(|_| ())
            .map_err(|e| js_error("storing", e))
    }

    /// Ends the stream (the put then completes).
    pub async fn close(&self) -> Result<(), StoreError> {
        JsFuture::from(self.writer.close())
            .await
            .map(|_| ())
            .map_err(|e| js_error("storing", e))
    }

    /// Makes the put fail: nothing is stored.
    pub async fn abort(&self, why: &str) {
        let _ = JsFuture::from(self.writer.abort_with_reason(&JsValue::from_str(why))).await;
    }
}

/// Streams exactly `size` bytes of `source` through packet-core into R2 at
/// `key`. Returns the verified packet (what the index needs), or why
/// nothing was stored.
pub async fn verify_into_bucket(
    bucket: &Bucket,
    key: &str,
    source: ReadableStream,
    size: u64,
    expected: Digest,
    limits: Limits,
    hasher: PacketHasher,
) -> Result<VerifiedPacket, StoreError> {
    let sink = FixedPut::new(size)?;
    let put = bucket
        .put(key, Data::ReadableStream(sink.readable.clone()))
        .http_metadata(HttpMetadata {
            content_type: Some("application/x-tar".into()),
            ..Default::default()
        })
        .execute();
    let reader = ChunkReader::new(&source)?;
    let pump = async {
        let pumped = pump(
            &reader,
            Stage::Body,
            Some(&sink),
            size,
            expected,
            limits,
            hasher,
        )
        .await;
        if pumped.is_err() {
            // Stop the put (it must not wait for more bytes), then drop the
            // rest of the source ([`crate::caps::rest`]). Errors here change
            // nothing.
            sink.abort("packet refused").await;
            reader.drop_rest(crate::caps::rest(Some(size), 0)).await;
        }
        pumped
    };
    let (put, pumped) = futures_util::future::join(put, pump).await;
    let verified = pumped?;
    match put {
        Ok(_) => Ok(verified),
        Err(e) => Err(StoreError::Failed(format!("storing the packet: {e}"))),
    }
}

/// Verifies the `size` bytes of the object at `key` (a multipart upload R2
/// assembled) by reading it once through packet-core; nothing is written.
pub async fn verify_object(
    bucket: &Bucket,
    key: &str,
    size: u64,
    expected: Digest,
    limits: Limits,
    hasher: PacketHasher,
) -> Result<VerifiedPacket, StoreError> {
    let object = bucket
        .get(key)
        .execute()
        .await
        .map_err(|e| StoreError::Failed(format!("reading {key}: {e}")))?
        .ok_or_else(|| StoreError::Failed(format!("{key} is missing")))?;
    let source = body_stream(&object)?;
    let reader = ChunkReader::new(&source)?;
    pump(&reader, Stage::R2Read, None, size, expected, limits, hasher).await
}

/// An R2 object's body as a stream.
pub fn body_stream(object: &worker::Object) -> Result<ReadableStream, StoreError> {
    match object
        .body()
        .ok_or_else(|| StoreError::Failed("R2 returned no body".into()))?
        .response_body()
        .map_err(|e| StoreError::Failed(format!("R2 body: {e}")))?
    {
        worker::ResponseBody::Stream(stream) => Ok(stream),
        _ => Err(StoreError::Failed("R2 returned no stream".into())),
    }
}

/// Bytes `range` of the object at `key`, as a chunk reader; `None` if the
/// object is missing.
pub async fn read_range(
    bucket: &Bucket,
    key: &str,
    range: core::ops::Range<u64>,
) -> Result<Option<ChunkReader>, StoreError> {
    let object = bucket
        .get(key)
        .range(worker::Range::OffsetWithLength {
            offset: range.start,
            length: range.end - range.start,
        })
        .execute()
        .await
        .map_err(|e| StoreError::Failed(format!("reading {key}: {e}")))?;
    match object {
        None => Ok(None),
        Some(o) => Ok(Some(ChunkReader::new(&body_stream(&o)?)?)),
    }
}

/// Size of the chunks the source is read in: large, because every chunk
/// costs a few round trips between wasm and the runtime.
const CHUNK: u32 = 1 << 20;

/// Reads a byte stream in chunks of up to [`CHUNK`] bytes: a BYOB reader's
/// `readAtLeast` (workerd) when the stream offers one, else the default
/// reader's chunks as they come.
pub struct ChunkReader {
    reader: js_sys::Object,
    byob: bool,
}

impl ChunkReader {
    /// Reads and drops at most what `rest` allows of the locked body, then
    /// cancels what is left.
    pub async fn drop_rest(&self, rest: crate::caps::Rest) {
        let crate::caps::Rest::Drain(most) = rest else {
            self.cancel();
            return;
        };
        let mut seen = 0u64;
        loop {
            match self.next().await {
                Ok(Some(chunk)) => {
                    seen += u64::from(chunk.length());
                    if seen > most {
                        self.cancel();
                        return;
                    }
                }
                _ => return,
            }
        }
    }

    /// A reader of `stream` (which it locks).
    pub fn new(stream: &ReadableStream) -> Result<ChunkReader, StoreError> {
        let options = js_sys::Object::new();
        let _ = Reflect::set(
            &options,
            &JsValue::from_str("mode"),
            &JsValue::from_str("byob"),
        );
        let get_reader: js_sys::Function = Reflect::get(stream, &JsValue::from_str("getReader"))
            .map_err(|e| js_error("reading the packet", e))?
            .unchecked_into();
        if let Ok(reader) = get_reader.call1(stream, &options) {
            let has_read_at_least = Reflect::get(&reader, &JsValue::from_str("readAtLeast"))
                .map(|f| f.is_function())
                .unwrap_or(false);
            if has_read_at_least {
                return Ok(ChunkReader {
                    reader: reader.unchecked_into(),
                    byob: true,
                });
            }
            let _ = Reflect::get(&reader, &JsValue::from_str("releaseLock"))
                .ok()
                .and_then(|f| f.dyn_into::<js_sys::Function>().ok())
                .map(|f| f.call0(&reader));
        }
        let reader = get_reader
            .call0(stream)
            .map_err(|e| js_error("reading the packet", e))?;
        Ok(ChunkReader {
            reader: reader.unchecked_into(),
            byob: false,
        })
    }

    /// Stops reading: the rest of the stream is discarded.
    pub fn cancel(&self) {
        let _ = Reflect::get(&self.reader, &JsValue::from_str("cancel"))
            .ok()
            .and_then(|f| f.dyn_into::<js_sys::Function>().ok())
            .map(|f| f.call0(&self.reader));
    }

    /// The next chunk, or `None` at the end.
    pub async fn next(&self) -> Result<Option<Uint8Array>, StoreError> {
        let method = if self.byob { "readAtLeast" } else { "read" };
        let f: js_sys::Function = Reflect::get(&self.reader, &JsValue::from_str(method))
            .map_err(|e| js_error("reading the packet", e))?
            .unchecked_into();
        let promise = if self.byob {
            f.call2(
                &self.reader,
                &JsValue::from(CHUNK),
                &Uint8Array::new_with_length(CHUNK),
            )
        } else {
            f.call0(&self.reader)
        }
        .map_err(|e| js_error("reading the packet", e))?;
        let step = JsFuture::from(js_sys::Promise::from(promise))
            .await
            .map_err(|e| js_error("reading the packet", e))?;
        let value = Reflect::get(&step, &JsValue::from_str("value")).unwrap_or(JsValue::UNDEFINED);
        let chunk = value
            .dyn_into::<Uint8Array>()
            .ok()
            .filter(|c| c.length() > 0);
        let done = Reflect::get(&step, &JsValue::from_str("done"))
            .ok()
            .and_then(|d| d.as_bool())
            .unwrap_or(true);
        match chunk {
            Some(c) => Ok(Some(c)),
            None if done => Ok(None),
            // An empty chunk before the end: ask again.
            None => Box::pin(self.next()).await,
        }
    }
}

/// Moves chunks from `source` through packet-core's reader (and the packet
/// hash) into `sink` (if any), holding back the last chunk until the packet
/// is verified.
async fn pump(
    source: &ChunkReader,
    source_stage: Stage,
    sink: Option<&FixedPut>,
    size: u64,
    expected: Digest,
    limits: Limits,
    hasher: PacketHasher,
) -> Result<VerifiedPacket, StoreError> {
    let mut reader: Reader<HashedElsewhere> = Reader::hashed_elsewhere(ReaderOptions {
        limits,
        expected_digest: Some(expected),
    });
    // Until packet.json shows a /2 packet, every byte may be part of a /1
    // packet's name; from then on only a /1 packet is hashed whole.
    let mut hash = Some(PacketHash::new(hasher)?);
    let mut buf = Vec::new();
    let mut seen = 0u64;
    let last = loop {
        let Some(chunk) = timing::timed(source_stage, source.next()).await? else {
            // The body ended early: the core says what is missing.
            let whole = match hash.take() {
                Some(h) => Some(h.finish().await?),
                None => None,
            };
            let ended = reader.finish_with_digest(whole);
            return Err(ended.map_or_else(StoreError::Refused, |_| {
                StoreError::Failed(format!("the body ended after {seen} of {size} bytes"))
            }));
        };
        let n = chunk.length() as usize;
        buf.resize(n, 0);
        let since = timing::now();
        chunk.copy_to(&mut buf[..n]);
        timing::add(Stage::Copy, since);
        seen += n as u64;
        let since = timing::now();
        reader.feed(&buf).map_err(StoreError::Refused)?;
        timing::add(Stage::Verify, since);
        if reader.whole_hash_needed() == Some(false) {
            hash = None;
        }
        if let Some(h) = hash.as_mut() {
            timing::timed(Stage::Hash, h.write(&buf)).await?;
        }
        if seen >= size {
            break chunk;
        }
        if let Some(sink) = sink {
            timing::timed(Stage::R2Write, sink.write(&chunk)).await?;
        }
    };
    let whole = match hash.take() {
        Some(h) => Some(h.finish().await?),
        None => None,
    };
    let verified = reader
        .finish_with_digest(whole)
        .map_err(StoreError::Refused)?;
    if source.next().await?.is_some() {
        // More bytes than announced: the fixed-length sink would refuse them.
        return Err(StoreError::Failed(format!(
            "the body is longer than {size} bytes"
        )));
    }
    if let Some(sink) = sink {
        sink.write(&last).await?;
        sink.close().await?;
    }
    Ok(verified)
}
