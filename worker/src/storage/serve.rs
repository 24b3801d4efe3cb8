//! What the reads answer with (docs/worker.md, "Reads"; docs/transfer.md,
//! "Reads" and "Recipes and chunks"): a stored packet's bytes, any range,
//! its manifest, a member's body, its recipes, the chunks a client asks
//! for, and a page of a search. A range of one object is passed through
//! as R2 sends it; any other bytes are produced by [`read`] while the
//! answer is sent (bounded memory), and a failure on the way aborts the
//! answer (logged: its headers are sent).

use std::ops::Range;
use std::rc::Rc;

use packet_core::Digest;
use pillbox_wire::SearchResults;
use worker::{Bucket, D1Database, ResponseBody};

use super::fetch::ChunkAnswer;
use super::index::packets::{self, PacketRow, Storage};
use super::load;
use super::read::{self, Output};
use super::stored::{BodyRead, Stored};
use super::stream::FixedPut;
use crate::problem::{internal, Problem};
use crate::query::SearchKey;
use crate::search::{Cursor, Page};

/// Packets a search request scans at most (bounded work per request).
const SEARCH_SCAN: u32 = 64;

/// Bytes `range` of the packet `row`: a range of its object when it is
/// stored whole (all of it when `whole`), else rebuilt from its packs.
pub async fn packet(
    bucket: &Bucket,
    row: &PacketRow,
    digest: Digest,
    range: Range<u64>,
    whole: bool,
) -> Result<ResponseBody, Problem> {
    match row.storage() {
        Some(Storage::Whole { object }) => {
            object_range(
                bucket,
                &digest,
                object,
                range.start,
                range.end - range.start,
                whole,
            )
            .await
        }
        _ => {
            let loaded = load::load(bucket, row).await?;
            rebuilt(bucket, loaded, digest, range)
        }
    }
}

/// The packet `row`'s `packet.json`, as stored.
pub async fn manifest(
    bucket: &Bucket,
    row: &PacketRow,
    digest: &Digest,
) -> Result<ResponseBody, Problem> {
    match row.storage() {
        Some(Storage::Whole { object }) => {
            object_range(
                bucket,
                digest,
                object,
                row.manifest_offset,
                row.manifest_size,
                false,
            )
            .await
        }
        Some(Storage::Chunked { manifest, .. }) => {
            object_range(bucket, digest, manifest, 0, row.manifest_size, true).await
        }
        Some(Storage::Packed { .. }) => {
            let loaded = load::load(bucket, row).await?;
            Ok(ResponseBody::Body(loaded.json.clone()))
        }
        None => Err(Problem::internal(format!("packet {digest} has no objects"))),
    }
}

/// Bytes `start..start + length` of the body of member `index` of
/// `packet`, read where its layout says ([`Stored::body_read`]).
pub async fn member(
    bucket: &Bucket,
    packet: &Rc<Stored>,
    index: usize,
    start: u64,
    length: u64,
) -> Result<ResponseBody, Problem> {
    let digest = packet.digest;
    match packet
        .body_read(index, start, length)
        .map_err(|e| Problem::internal(e.0))?
    {
        BodyRead::Nothing => Ok(ResponseBody::Empty),
        BodyRead::Object {
            key,
            offset,
            length,
        } => object_range(bucket, &digest, key, offset, length, false).await,
        BodyRead::Packet(range) => rebuilt(bucket, packet.clone(), digest, range),
    }
}

/// The recipes document of the packet `row` against `bases` (each a
/// digest, else 400; those not stored are left out), encoded.
pub async fn recipes(
    bucket: &Bucket,
    db: &D1Database,
    row: &PacketRow,
    bases: &[String],
) -> Result<Vec<u8>, Problem> {
    let named = bases
        .iter()
        .map(|b| b.parse::<Digest>())
        .collect::<Result<Vec<_>, _>>()
        .map_err(Problem::from_packet_error_400)?;
    let mut loaded_bases = Vec::new();
    for r in packets::get_named(db, &named).await.map_err(internal)? {
        loaded_bases.push(load::load(bucket, &r).await?);
    }
    let loaded = load::load(bucket, row).await?;
    let refs: Vec<&Stored> = loaded_bases.iter().map(|b| b.as_ref()).collect();
    Ok(loaded.recipes(&refs).encode())
}

/// A chunk answer of `packet`: its table, then its chunks as stored, each
/// read from its pack (back-to-back chunks in one read).
pub fn chunks(
    bucket: &Bucket,
    packet: Rc<Stored>,
    answer: ChunkAnswer,
) -> Result<ResponseBody, Problem> {
    let ChunkAnswer {
        chunks,
        table,
        length,
    } = answer;
    let sink = FixedPut::new(length).map_err(|e| e.problem())?;
    let readable = sink.readable.clone();
    let bucket = bucket.clone();
    wasm_bindgen_futures::spawn_local(async move {
        let mut out = Output::new(sink.writer.clone());
        let done = match out.bytes(&table).await {
            Ok(()) => read::stored_chunks(&bucket, packet.layout.packs(), &chunks, &mut out).await,
            Err(e) => Err(e),
        };
        match done {
            Ok(()) => {
                let _ = sink.close().await;
            }
            Err(e) => {
                worker::console_error!(
                    "sending chunks of {}: {}",
                    packet.digest,
                    e.problem().to_json()
                );
                sink.abort("the chunks could not be read").await;
            }
        }
    });
    Ok(ResponseBody::Stream(readable))
}

/// A page of the search for `key`, at most `limit` matches from `cursor`
/// on: the stored manifests are scanned in insertion order, at most
/// [`SEARCH_SCAN`] packets per request.
pub async fn search(
    bucket: &Bucket,
    db: &D1Database,
    key: &SearchKey,
    limit: usize,
    cursor: Cursor,
) -> Result<SearchResults, Problem> {
    let mut page = Page::new(key, limit, cursor);
    let rows = packets::from_seq(db, cursor.seq, SEARCH_SCAN + 1)
        .await
        .map_err(internal)?;
    let scanned = rows.len().min(SEARCH_SCAN as usize);
    for row in &rows[..scanned] {
        let loaded = load::load(bucket, row).await?;
        if page.scan(row.seq, &row.digest, &loaded.manifest) {
            return Ok(page.finish(None));
        }
    }
    // The scan's bound: the next page goes on from the next packet.
    Ok(page.finish(rows.get(scanned).map(|r| r.seq)))
}

/// Bytes `range` of a packet stored in packs, produced while the answer
/// is sent.
fn rebuilt(
    bucket: &Bucket,
    packet: Rc<Stored>,
    digest: Digest,
    range: Range<u64>,
) -> Result<ResponseBody, Problem> {
    let sink = FixedPut::new(range.end - range.start).map_err(|e| e.problem())?;
    let readable = sink.readable.clone();
    let bucket = bucket.clone();
    wasm_bindgen_futures::spawn_local(async move {
        let mut out = Output::new(sink.writer.clone());
        match read::packet_range(&bucket, &packet, range, &mut out).await {
            Ok(()) => {
                let _ = sink.close().await;
            }
            Err(e) => {
                worker::console_error!("reading {digest}: {}", e.problem().to_json());
                sink.abort("the packet could not be read").await;
            }
        }
    });
    Ok(ResponseBody::Stream(readable))
}

/// `length` bytes at `offset` of the object `key` (all of it when
/// `whole`), passed through without a copy in wasm.
async fn object_range(
    bucket: &Bucket,
    digest: &Digest,
    key: &str,
    offset: u64,
    length: u64,
    whole: bool,
) -> Result<ResponseBody, Problem> {
    if length == 0 {
        return Ok(ResponseBody::Empty);
    }
    let get = bucket.get(key);
    let get = if whole {
        get
    } else {
        get.range(worker::Range::OffsetWithLength { offset, length })
    };
    let object = get.execute().await.map_err(internal)?.ok_or_else(|| {
        Problem::internal(format!(
            "packet {digest} is indexed but its bytes are missing from R2"
        ))
    })?;
    object
        .body()
        .ok_or_else(|| Problem::internal("R2 returned no body"))?
        .response_body()
        .map_err(internal)
}
