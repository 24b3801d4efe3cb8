//! Frames streamed in (docs/transfer.md, "Push", steps 1 and 3): a push's
//! create body (its recipes, then a chunk batch) or a part (a chunk batch),
//! read as it arrives, within its cap ([`crate::body`]). The batch's table
//! is checked before a frame's bytes are read; each frame's stored bytes
//! are copied into wasm, decoded into exactly their raw size and hashed
//! against its name ([`crate::push::arrival`]), and the frames the store
//! does not hold yet are written, as sent, into one new pack through a
//! `FixedLengthStream`. The pack's last bytes are handed to R2 only once
//! every frame is verified; a refusal aborts the put, so a refused request
//! stores nothing, and its caller stops the body ([`Body::stop`]), so no
//! frame after the refusal is decoded. Memory: the recipes, the table, one
//! frame (at most 1 MiB stored and 1 MiB raw) and one input chunk.

use js_sys::Uint8Array;
use pillbox_wire::binary::DecodeError;
use pillbox_wire::chunks::{Decoder, Frame};
use pillbox_wire::recipes::{PushDecoded, PushDecoder, Recipes};
use wasm_bindgen_futures::JsFuture;
use worker::{Bucket, Data};

use crate::body::Body;
use crate::problem::Problem;
use crate::push::arrival;
use crate::storage::stream::{self, FixedPut, StoreError};
use crate::timing::{self, Counter, Stage};

/// A refusal of the body's shape (422 with the codec's code).
pub fn malformed(e: DecodeError) -> Problem {
    Problem::new(
        e.kind.api_code(),
        format!("{} (at byte {})", e.message, e.offset),
        "send the body as docs/transfer.md describes it (PBPUSH02 recipes, then a PBCHUNK2 chunk batch)",
    )
}

fn failed(e: StoreError) -> Problem {
    match e {
        StoreError::Refused(e) => Problem::from_packet_error(&e),
        StoreError::Failed(m) => Problem::internal(m),
    }
}

/// Reads a push's create body up to the end of its recipes.
pub async fn read_recipes(body: &mut Body, decoder: &mut PushDecoder) -> Result<Recipes, Problem> {
    let mut buf = Vec::new();
    loop {
        let Some(chunk) = body.next().await? else {
            decoder.finish().map_err(malformed)?;
            return Err(malformed(DecodeError::new(
                pillbox_wire::binary::DecodeErrorKind::RecipesTruncated,
                0,
                "the body ends inside its recipes".into(),
            )));
        };
        buf.resize(chunk.length() as usize, 0);
        chunk.copy_to(&mut buf);
        let mut at = 0;
        while at < buf.len() {
            let (found, used) = decoder.decode(&buf[at..]).map_err(malformed)?;
            at += used;
            if found == PushDecoded::Recipes {
                body.put_back(chunk.subarray(at as u32, chunk.length()));
                return Ok(decoder.take_recipes());
            }
        }
    }
}

/// Reads a chunk batch's head and table; the frames' bytes stay in the
/// body.
pub async fn read_table(body: &mut Body, decoder: &mut Decoder) -> Result<Vec<Frame>, Problem> {
    let mut table = Vec::new();
    loop {
        if decoder.has_table() {
            return Ok(decoder.table().to_vec());
        }
        let Some(chunk) = body.next().await? else {
            decoder.finish().map_err(malformed)?;
            return Ok(decoder.table().to_vec());
        };
        let mut used = 0u32;
        while used < chunk.length() && !decoder.has_table() {
            let want = decoder.table_bytes_wanted() as u32;
            let n = want.min(chunk.length() - used).max(1);
            table.resize(n as usize, 0);
            chunk.subarray(used, used + n).copy_to(&mut table);
            used += n;
            decoder.decode(&table).map_err(malformed)?;
        }
        body.put_back(chunk.subarray(used, chunk.length()));
    }
}

/// The pack's writes: runs of new frames' bytes as large as the input
/// chunks allow, one write in flight while the next run is checked, and the
/// last run held back until every frame is verified.
struct PackWrites<'a> {
    sink: &'a FixedPut,
    held: Option<Uint8Array>,
    in_flight: Option<JsFuture>,
}

impl PackWrites<'_> {
    async fn settle(&mut self) -> Result<(), Problem> {
        if let Some(write) = self.in_flight.take() {
            timing::timed(Stage::R2Write, write)
                .await
                .map_err(|e| failed(stream::js_error("storing the pack", e)))?;
        }
        Ok(())
    }

    async fn run(&mut self, run: Uint8Array) -> Result<(), Problem> {
        timing::count(Counter::R2Written, u64::from(run.length()));
        if let Some(previous) = self.held.replace(run) {
            self.settle().await?;
            self.in_flight = Some(JsFuture::from(self.sink.writer.write_with_chunk(&previous)));
        }
        Ok(())
    }

    async fn finish(mut self) -> Result<(), Problem> {
        self.settle().await?;
        if let Some(last) = self.held.take() {
            timing::timed(Stage::R2Write, self.sink.write(&last))
                .await
                .map_err(failed)?;
        }
        timing::timed(Stage::R2Write, self.sink.close())
            .await
            .map_err(failed)
    }
}

/// What is done with each frame's raw bytes once checked: its index in
/// the table and its bytes.
pub type OnFrame<'a> = dyn FnMut(usize, &[u8]) -> Result<(), Problem> + 'a;

/// Streams the frames of `frames` (the table): each is checked and its
/// raw bytes handed to `each(index, raw)`; those `new` marks are written
/// to `sink`, as sent.
pub async fn pump(
    body: &mut Body,
    decoder: &mut Decoder,
    frames: &[Frame],
    new: &[bool],
    sink: Option<&FixedPut>,
    each: &mut OnFrame<'_>,
) -> Result<(), Problem> {
    let mut stored = Vec::new();
    let mut raw = Vec::new();
    let mut pack = sink.map(|sink| PackWrites {
        sink,
        held: None,
        in_flight: None,
    });
    loop {
        if decoder.pending_frame().is_none() {
            break;
        }
        let Some(chunk) = body.next().await? else {
            break;
        };
        let mut at = 0u32;
        // The run of new frames' bytes in this chunk not yet queued.
        let mut run: Option<(u32, u32)> = None;
        while at < chunk.length() {
            let Some((index, left)) = decoder.pending_frame() else {
                return Err(malformed(DecodeError::new(
                    pillbox_wire::binary::DecodeErrorKind::BatchTrailing,
                    decoder.offset(),
                    "bytes follow the last frame".into(),
                )));
            };
            let n = left.min(chunk.length() - at);
            let start = stored.len();
            stored.resize(start + n as usize, 0);
            let since = timing::now();
            chunk.subarray(at, at + n).copy_to(&mut stored[start..]);
            timing::add(Stage::Copy, since);
            let last = decoder.consume(n).unwrap_or(true);
            if new[index] {
                run = Some(match run {
                    Some((s, _)) => (s, at + n),
                    None => (at, at + n),
                });
            } else if let (Some(p), Some((a, b))) = (pack.as_mut(), run.take()) {
                p.run(chunk.subarray(a, b)).await?;
            }
            at += n;
            if last {
                let since = timing::now();
                let checked = arrival::check(index, &frames[index], &stored, &mut raw);
                timing::add(Stage::Hash, since);
                checked?;
                each(index, &raw)?;
                stored.clear();
            }
        }
        if let (Some(p), Some((a, b))) = (pack.as_mut(), run.take()) {
            p.run(chunk.subarray(a, b)).await?;
        }
    }
    decoder.finish().map_err(malformed)?;
    // Nothing may follow the batch.
    if let Some(extra) = body.next().await? {
        let _ = extra;
        return Err(malformed(DecodeError::new(
            pillbox_wire::binary::DecodeErrorKind::BatchTrailing,
            decoder.offset(),
            "bytes follow the last frame".into(),
        )));
    }
    if let Some(p) = pack {
        p.finish().await?;
    }
    Ok(())
}

/// Runs `work` with the put of a new pack of `size` bytes at `key` (its
/// row recorded already): `work` writes it and closes it, or fails, and
/// then the put is aborted and nothing is stored. With `size` 0, `work`
/// runs with no pack.
pub async fn with_pack<T, Fut>(
    bucket: &Bucket,
    key: &str,
    size: u64,
    work: impl FnOnce(Option<FixedPut>) -> Fut,
) -> Result<T, Problem>
where
    Fut: core::future::Future<Output = Result<T, Problem>>,
{
    if size == 0 {
        return work(None).await;
    }
    let sink = FixedPut::new(size).map_err(failed)?;
    let put = bucket
        .put(key, Data::ReadableStream(sink.readable.clone()))
        .execute();
    let abort = sink.clone();
    let job = async move {
        let done = work(Some(sink)).await;
        if done.is_err() {
            abort.abort("refused").await;
        }
        done
    };
    let (put, done) = futures_util::future::join(put, job).await;
    let value = done?;
    put.map_err(|e| Problem::internal(format!("storing the pack {key}: {e}")))?;
    Ok(value)
}
