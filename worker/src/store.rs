//! Streams between requests, packet-core and R2. A packet's bytes reach its
//! R2 key only through [`verify_into_bucket`]: each chunk of the source is
//! copied into wasm for packet-core's [`Reader`] and handed on to an R2 put
//! through a `FixedLengthStream`; the last chunk is handed on only once the
//! whole packet is verified. A refusal aborts the put, so nothing is stored. R2 is
//! also given the expected SHA-256, so it refuses bytes that do not hash to
//! it.

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

/// The R2 key of a verified packet.
pub fn packet_key(digest: &Digest) -> String {
    format!("packets/sha256/{}", digest.hex())
}

/// The R2 key a multipart upload assembles into before it is verified.
pub fn staging_key(upload_id: &str) -> String {
    format!("uploads/{upload_id}")
}

/// Why a packet was not stored.
pub enum StoreError {
    /// packet-core refused it.
    Refused(PacketError),
    /// The body stream or R2 failed.
    Failed(String),
}

fn js_error(context: &str, e: JsValue) -> StoreError {
    let text = e
        .dyn_ref::<js_sys::Error>()
        .map(|e| String::from(e.message()))
        .unwrap_or_else(|| format!("{e:?}"));
    StoreError::Failed(format!("{context}: {text}"))
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

/// The whole-packet hash computed by the runtime (`crypto.DigestStream`).
struct PlatformHash {
    stream: DigestStream,
    writer: WritableStreamDefaultWriter,
}

impl PlatformHash {
    fn new() -> Result<PlatformHash, StoreError> {
        let stream = DigestStream::new(DigestStreamAlgorithm::Sha256);
        let writable: &web_sys::WritableStream = stream.raw().unchecked_ref();
        let writer = writable
            .get_writer()
            .map_err(|e| js_error("digest stream", e))?;
        Ok(PlatformHash { stream, writer })
    }

    async fn write(&self, chunk: &[u8]) -> Result<(), StoreError> {
        // A copy of its own: the runtime may take over the buffer it is given.
        let array = Uint8Array::from(chunk);
        JsFuture::from(self.writer.write_with_chunk(&array))
            .await
            .map(|_| ())
            .map_err(|e| js_error("digest stream", e))
    }

    async fn finish(self) -> Result<Digest, StoreError> {
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

/// Streams exactly `size` bytes of `source` through packet-core into R2 at
/// the packet's key. Returns the verified packet (what the index needs), or
/// why nothing was stored.
pub async fn verify_into_bucket(
    bucket: &Bucket,
    source: ReadableStream,
    size: u64,
    expected: Digest,
    limits: Limits,
    hasher: PacketHasher,
) -> Result<VerifiedPacket, StoreError> {
    let fixed = if size <= u64::from(u32::MAX) {
        FixedLengthStream::new(size as u32)
    } else {
        FixedLengthStream::new_big_int(BigInt::from(size))
    }
    .map_err(|e| js_error("fixed length stream", e))?;
    let transform: &TransformStream = fixed.unchecked_ref();
    let sink = transform
        .writable()
        .get_writer()
        .map_err(|e| js_error("fixed length stream", e))?;
    let put = bucket
        .put(
            packet_key(&expected),
            Data::ReadableStream(transform.readable()),
        )
        .http_metadata(HttpMetadata {
            content_type: Some("application/x-tar".into()),
            ..Default::default()
        })
        .sha256(expected.0.to_vec())
        .execute();
    let reader = ChunkReader::new(&source)?;
    let pump = async {
        let pumped = pump(&reader, &sink, size, expected, limits, hasher).await;
        if pumped.is_err() {
            // Stop the put (it must not wait for more bytes), then read the
            // rest of the source: a request answered before its body was read
            // leaves the connection unusable for the next request. Errors
            // here change nothing.
            let _ =
                JsFuture::from(sink.abort_with_reason(&JsValue::from_str("packet refused"))).await;
            drain(&reader).await;
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

/// Reads and discards a request body nobody read, up to `limit` bytes
/// (then cancels it). A local `wrangler dev` leaves a connection unusable
/// when a request is answered before its body was read.
pub async fn discard(body: &ReadableStream, limit: u64) {
    if body.locked() {
        return;
    }
    let Ok(reader) = ChunkReader::new(body) else {
        return;
    };
    let mut seen = 0u64;
    while let Ok(Some(chunk)) = reader.next().await {
        seen += u64::from(chunk.length());
        if seen > limit {
            let _ = Reflect::get(&reader.reader, &JsValue::from_str("cancel"))
                .ok()
                .and_then(|f| f.dyn_into::<js_sys::Function>().ok())
                .map(|f| f.call0(&reader.reader));
            break;
        }
    }
}

/// Reads a stream to its end, discarding it.
async fn drain(reader: &ChunkReader) {
    while let Ok(Some(_)) = reader.next().await {}
}

/// Size of the chunks the source is read in: large, because every chunk
/// costs a few round trips between wasm and the runtime.
const CHUNK: u32 = 1 << 20;

/// Reads a byte stream in chunks of up to [`CHUNK`] bytes: a BYOB reader's
/// `readAtLeast` (workerd) when the stream offers one, else the default
/// reader's chunks as they come.
struct ChunkReader {
    reader: js_sys::Object,
    byob: bool,
}

impl ChunkReader {
    fn new(stream: &ReadableStream) -> Result<ChunkReader, StoreError> {
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

    /// The next chunk, or `None` at the end.
    async fn next(&self) -> Result<Option<Uint8Array>, StoreError> {
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
/// hash) into `sink`, holding back the last chunk until the packet is
/// verified.
async fn pump(
    source: &ChunkReader,
    sink: &WritableStreamDefaultWriter,
    size: u64,
    expected: Digest,
    limits: Limits,
    hasher: PacketHasher,
) -> Result<VerifiedPacket, StoreError> {
    let mut reader: Reader<HashedElsewhere> = Reader::hashed_elsewhere(ReaderOptions {
        limits,
        expected_digest: Some(expected),
        ..Default::default()
    });
    let mut hash = PacketHash::new(hasher)?;
    let mut buf = Vec::new();
    let mut seen = 0u64;
    let last = loop {
        let Some(chunk) = source.next().await? else {
            // The body ended early: the core says what is missing.
            let ended = reader.finish_with_digest(hash.finish().await?);
            return Err(ended.map_or_else(StoreError::Refused, |_| {
                StoreError::Failed(format!("the body ended after {seen} of {size} bytes"))
            }));
        };
        let n = chunk.length() as usize;
        buf.resize(n, 0);
        chunk.copy_to(&mut buf[..n]);
        seen += n as u64;
        reader.feed(&buf).map_err(StoreError::Refused)?;
        hash.write(&buf).await?;
        if seen >= size {
            break chunk;
        }
        JsFuture::from(sink.write_with_chunk(&chunk))
            .await
            .map_err(|e| js_error("storing the packet", e))?;
    };
    let verified = reader
        .finish_with_digest(hash.finish().await?)
        .map_err(StoreError::Refused)?;
    JsFuture::from(sink.write_with_chunk(&last))
        .await
        .map_err(|e| js_error("storing the packet", e))?;
    if source.next().await?.is_some() {
        // More bytes than announced: the fixed-length sink would refuse them.
        return Err(StoreError::Failed(format!(
            "the body is longer than {size} bytes"
        )));
    }
    JsFuture::from(sink.close())
        .await
        .map_err(|e| js_error("storing the packet", e))?;
    Ok(verified)
}
