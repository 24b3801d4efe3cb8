//! `/v1/packets/…`, `/v1/digests/{prefix}` and `/v1/search`: storing a
//! packet in one request (/1 or /2, by the reader's rule for each), reading
//! it back whole, by range, by member or its manifest (a packet stored
//! whole is read from its object, any other rebuilt from its packs, zstd
//! chunks decoded), its recipes and chunks for a delta pull, listing,
//! finding digests by prefix, searching and deleting.

use pillbox_wire::ApiCode;
use std::rc::Rc;

use packet_core::Digest;
use pillbox_wire::chunks::{encode_table, BatchLimits, Frame, ENTRY_BYTES, HEAD_BYTES, MEDIA_TYPE};
use pillbox_wire::{ChunkRequest, DigestPrefix, SearchResults};
use worker::{Bucket, D1Database, Headers, Range, Request, ResponseBody};

use super::http::{
    attachment, content_length, empty, header, internal, json_response, no_content, parse_json,
    range_not_satisfiable, set, streamed, Answer, IMMUTABLE,
};
use crate::caps::Caps;
use crate::conditions::{etag, none_match};
use crate::config::Config;
use crate::problem::Problem;
use crate::query::{upload_labels, Query};
use crate::range::{self, RangeAnswer};
use crate::search::{self, Cursor};
use crate::storage::chunk::ChunkRef;
use crate::storage::index::packets::{self, PacketRow, Storage};
use crate::storage::load::{self, indexed};
use crate::storage::read::{self, Output};
use crate::storage::stored::Stored;
use crate::storage::stream::{FixedPut, StoreError};
use crate::upload::request::check_single;
use crate::upload::single::{self, Sent};

/// Packets and members never change under their digest.
const PACKET_TYPE: &str = "application/x-tar";

/// The response header that reports [`wasm_memory_bytes`] after a
/// verification.
const WASM_MEMORY_HEADER: &str = "pillbox-wasm-memory-bytes";

/// Packets a search request scans at most (bounded work per request).
const SEARCH_SCAN: u32 = 64;
/// Most bytes one `POST …/chunks` answers.
const MAX_CHUNK_BYTES: u64 = 64 << 20;
/// Largest `POST …/chunks` body: 65,536 hex names with their quotes.
const MAX_CHUNK_REQUEST: u64 = 5 << 20;

/// The size of this instance's wasm linear memory, in bytes. Linear memory
/// only grows, so after a verification this is the most the instance has
/// held in wasm since it started (the isolate's JS heap is not included).
fn wasm_memory_bytes() -> u64 {
    core::arch::wasm32::memory_size::<0>() as u64 * 65536
}

/// 413 when `size` is over the server's packet limit (packet-core's
/// `limit_size`, refused before a byte is read).
pub(super) fn too_large(size: u64, config: &Config) -> Option<Problem> {
    (size > config.limits.max_packet_bytes).then(|| {
        Problem::over_limit(
            packet_core::ErrorCode::LimitSize,
            format!(
                "the packet is {size} bytes, this server accepts at most {}",
                config.limits.max_packet_bytes
            ),
            packet_core::ErrorCode::LimitSize.advice(),
        )
    })
}

/// `201`: the packet is verified, stored and indexed by this request.
pub(super) async fn stored(db: &D1Database, digest: &Digest) -> Answer {
    let row = indexed(db, digest).await?;
    let mut response = json_response(201, &row.stored(true))?;
    let headers = response.headers_mut();
    headers
        .set("location", &format!("/v1/packets/{digest}"))
        .map_err(internal)?;
    headers
        .set(WASM_MEMORY_HEADER, &wasm_memory_bytes().to_string())
        .map_err(internal)?;
    Ok(response)
}

/// `200`: the packet was stored already (labels given are added).
pub(super) async fn already_stored(db: &D1Database, row: PacketRow, labels: &[String]) -> Answer {
    let digest = row
        .digest
        .parse::<Digest>()
        .map_err(|e| Problem::internal(e.to_string()))?;
    if labels.is_empty() {
        return json_response(200, &row.stored(false));
    }
    packets::add_labels(db, &digest, labels)
        .await
        .map_err(internal)?;
    json_response(200, &indexed(db, &digest).await?.stored(false))
}

/// `PUT /v1/packets/{digest}`
pub async fn upload(
    req: &mut Request,
    bucket: &Bucket,
    db: &D1Database,
    config: &Config,
    digest: Digest,
    query: &Query,
) -> Answer {
    let labels = upload_labels(query.all("label"))?;
    super::http::identity_only(req)?;
    if let Some(row) = packets::get(db, &digest).await.map_err(internal)? {
        return already_stored(db, row, &labels).await;
    }
    let size = content_length(req)?;
    if let Some(p) = too_large(size, config) {
        return Err(p);
    }
    check_single(size, config)?;
    let body = req
        .inner()
        .body()
        .ok_or_else(|| Problem::bad_request(ApiCode::BodyInvalid, "the upload has no body"))?;
    let sent = Sent {
        digest,
        size,
        body,
        labels: &labels,
    };
    single::store(bucket, db, config, sent).await?;
    stored(db, &digest).await
}

/// Streams bytes `range` of a packet stored in packs into a response
/// body: the bytes are produced while the response is sent (bounded
/// memory).
fn rebuilt_body(
    bucket: &Bucket,
    loaded: Rc<Stored>,
    digest: Digest,
    range: core::ops::Range<u64>,
) -> Result<ResponseBody, Problem> {
    let sink = FixedPut::new(range.end - range.start).map_err(StoreError::problem)?;
    let readable = sink.readable.clone();
    let bucket = bucket.clone();
    wasm_bindgen_futures::spawn_local(async move {
        let mut out = Output::new(sink.writer.clone());
        match read::packet_range(&bucket, &loaded, range, &mut out).await {
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

/// `GET` / `HEAD /v1/packets/{digest}`, whole or one range.
pub async fn get(
    req: &Request,
    bucket: &Bucket,
    db: &D1Database,
    digest: Digest,
    head: bool,
) -> Answer {
    let row = indexed(db, &digest).await?;
    let tag = etag(&row.digest);
    let headers = Headers::new();
    set(&headers, "etag", &tag)?;
    set(&headers, "cache-control", IMMUTABLE)?;
    set(&headers, "accept-ranges", "bytes")?;
    set(&headers, "content-type", PACKET_TYPE)?;
    attachment(&headers)?;
    if let Some(inm) = header(req, "if-none-match") {
        if none_match(&inm, &tag) {
            return empty(304, headers);
        }
    }
    let answer = range::answer(header(req, "range").as_deref(), row.size);
    if let Some(cr) = answer.content_range(row.size) {
        set(&headers, "content-range", &cr)?;
    }
    let (status, bytes) = match answer {
        RangeAnswer::Full => (200, 0..row.size),
        RangeAnswer::Partial { start, end } => (206, start..end + 1),
        RangeAnswer::Unsatisfiable => return range_not_satisfiable("packet", row.size),
    };
    set(
        &headers,
        "content-length",
        &answer.length(row.size).to_string(),
    )?;
    if head {
        return empty(status, headers);
    }
    let body = match row.storage() {
        Some(Storage::Whole { object }) => {
            read_range(
                bucket,
                &digest,
                object,
                bytes.start,
                bytes.end - bytes.start,
                status == 200,
            )
            .await?
        }
        _ => {
            let loaded = load::load(bucket, &row).await?;
            rebuilt_body(bucket, loaded, digest, bytes)?
        }
    };
    streamed(body, status, headers)
}

fn missing_bytes(digest: &Digest) -> Problem {
    Problem::internal(format!(
        "packet {digest} is indexed but its bytes are missing from R2"
    ))
}

/// Reads `length` bytes at `offset` of the object `key` (all of it when
/// `whole`), passed through without a copy in wasm.
async fn read_range(
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
        get.range(Range::OffsetWithLength { offset, length })
    };
    let object = get
        .execute()
        .await
        .map_err(internal)?
        .ok_or_else(|| missing_bytes(digest))?;
    object
        .body()
        .ok_or_else(|| Problem::internal("R2 returned no body"))?
        .response_body()
        .map_err(internal)
}

/// `GET /v1/packets/{digest}/manifest`: `packet.json` as stored.
pub async fn manifest(bucket: &Bucket, db: &D1Database, digest: Digest) -> Answer {
    let row = indexed(db, &digest).await?;
    let body = match row.storage() {
        Some(Storage::Whole { object }) => {
            read_range(
                bucket,
                &digest,
                object,
                row.manifest_offset,
                row.manifest_size,
                false,
            )
            .await?
        }
        Some(Storage::Chunked { manifest, .. }) => {
            read_range(bucket, &digest, manifest, 0, row.manifest_size, true).await?
        }
        Some(Storage::Packed { .. }) => {
            let loaded = load::load(bucket, &row).await?;
            ResponseBody::Body(loaded.json.clone())
        }
        None => return Err(Problem::internal(format!("packet {digest} has no objects"))),
    };
    let headers = Headers::new();
    set(&headers, "content-type", "application/json")?;
    set(&headers, "cache-control", IMMUTABLE)?;
    set(&headers, "etag", &etag(&format!("{}/manifest", row.digest)))?;
    set(&headers, "content-length", &row.manifest_size.to_string())?;
    streamed(body, 200, headers)
}

/// `GET` / `HEAD /v1/packets/{digest}/members/{path}`: one file's bytes,
/// found in the manifest, read where the layout says (one R2 range read
/// when the body is one chunk).
pub async fn member(
    req: &Request,
    bucket: &Bucket,
    db: &D1Database,
    digest: Digest,
    path: &str,
    head: bool,
) -> Answer {
    let row = indexed(db, &digest).await?;
    let loaded = load::load(bucket, &row).await?;
    let (index, member) = loaded
        .manifest
        .find(path)
        .ok_or_else(|| Problem::not_found(format!("packet {digest} has no member {path:?}")))?;
    if member.kind() != packet_core::Kind::File {
        let mut p = Problem::new(
            ApiCode::NotAFile,
            format!("{path:?} is a {}, it has no bytes", member.kind().as_str()),
            "read the manifest for directories and symlink targets",
        );
        p.error.refusal.details.path = Some(member.path.clone().into());
        return Err(p);
    }
    let sha = member.sha256().unwrap_or(Digest::EMPTY).to_string();
    let headers = Headers::new();
    set(&headers, "content-type", "application/octet-stream")?;
    set(&headers, "cache-control", IMMUTABLE)?;
    attachment(&headers)?;
    set(&headers, "etag", &etag(&sha))?;
    set(&headers, "pillbox-member-sha256", &sha)?;
    set(&headers, "pillbox-member-mode", member.mode().as_str())?;
    set(&headers, "accept-ranges", "bytes")?;
    let answer = range::answer(header(req, "range").as_deref(), member.size());
    let (status, start, length) = match answer {
        RangeAnswer::Full => (200, 0, member.size()),
        RangeAnswer::Partial { start, end } => (206, start, end - start + 1),
        RangeAnswer::Unsatisfiable => return range_not_satisfiable("member", member.size()),
    };
    if let Some(cr) = answer.content_range(member.size()) {
        set(&headers, "content-range", &cr)?;
    }
    set(&headers, "content-length", &length.to_string())?;
    if head {
        return empty(status, headers);
    }
    let chunks = loaded.layout.chunks(index);
    let body = match chunks {
        [] => ResponseBody::Empty,
        [one] if one.is_identity() && length > 0 => {
            let key = loaded.layout.packs().key(one.slot).ok_or_else(|| {
                Problem::internal(format!("packet {digest}: a chunk in an empty slot"))
            })?;
            read_range(bucket, &digest, key, one.offset + start, length, false).await?
        }
        _ => {
            let at = loaded.offsets.data_offsets()[index] + start;
            rebuilt_body(bucket, loaded.clone(), digest, at..at + length)?
        }
    };
    streamed(body, status, headers)
}

/// `DELETE /v1/packets/{digest}`, unless a ref names it. Its rows and a
/// chunked packet's manifest and layout go now; its bytes go with the next
/// clean-up that finds them unused.
pub async fn delete(bucket: &Bucket, db: &D1Database, digest: Digest) -> Answer {
    let row = indexed(db, &digest).await?;
    let refs = packets::delete(db, &digest).await.map_err(internal)?;
    if !refs.is_empty() {
        return Err(Problem::new(
            ApiCode::PacketReferenced,
            format!("refs point at {digest}: {}", refs.join(", ")),
            "move or delete those refs first",
        ));
    }
    load::forget(&row.digest);
    if let Some(Storage::Chunked { layout, manifest }) = row.storage() {
        for key in [layout, manifest] {
            bucket.delete(key).await.map_err(internal)?;
        }
    }
    no_content()
}

/// `GET /v1/packets`: newest first, filtered.
pub async fn list(db: &D1Database, query: &Query) -> Answer {
    let filter = query.packet_filter()?;
    let (rows, next) = packets::list(db, &filter).await.map_err(internal)?;
    json_response(200, &packets::page(&rows, next))
}

/// `GET /v1/digests/{prefix}`: the stored packets whose digest starts with
/// the prefix, at most `limit`, in digest order.
pub async fn by_prefix(db: &D1Database, prefix: &DigestPrefix, query: &Query) -> Answer {
    let limit = query.limit()?;
    let found = packets::with_prefix(db, prefix.as_str(), limit + 1)
        .await
        .map_err(internal)?;
    json_response(200, &packets::digest_matches(prefix.as_str(), found, limit))
}

/// `GET /v1/search`: the members with a path or a blob sha256, found by
/// scanning stored manifests from the cursor on.
pub async fn search(bucket: &Bucket, db: &D1Database, query: &Query) -> Answer {
    let key = query.search_key()?;
    let limit = query.limit()? as usize;
    let mut at = Cursor::parse(query.get("cursor"))?;
    let mut results = SearchResults {
        matches: Vec::new(),
        next_cursor: None,
    };
    let rows = packets::from_seq(db, at.seq, SEARCH_SCAN + 1)
        .await
        .map_err(internal)?;
    let scanned = rows.len().min(SEARCH_SCAN as usize);
    for row in &rows[..scanned] {
        let from = if row.seq == at.seq { at.member } else { 0 };
        let loaded = load::load(bucket, row).await?;
        for i in search::scan(&loaded.manifest, &key, from) {
            if results.matches.len() == limit {
                results.next_cursor = Some(
                    Cursor {
                        seq: row.seq,
                        member: i,
                    }
                    .to_text(),
                );
                return json_response(200, &results);
            }
            results.matches.push(search::search_match(
                &row.digest,
                &loaded.manifest.members[i],
            ));
        }
        at = Cursor {
            seq: row.seq + 1,
            member: 0,
        };
    }
    if rows.len() > scanned {
        // The scan's bound: the next page goes on from the next packet.
        results.next_cursor = Some(
            Cursor {
                seq: rows[scanned].seq,
                member: 0,
            }
            .to_text(),
        );
    }
    json_response(200, &results)
}

/// `GET /v1/packets/{digest}/recipes[?base=…]`: how its manifest and its
/// bodies of several chunks are cut, with copy runs of the bases' bodies.
pub async fn recipes(bucket: &Bucket, db: &D1Database, digest: Digest, query: &Query) -> Answer {
    let row = indexed(db, &digest).await?;
    let bases = query.all("base");
    if bases.len() > 16 {
        return Err(Problem::bad_request(
            ApiCode::BasesInvalid,
            "name at most 16 bases",
        ));
    }
    let mut loaded_bases = Vec::new();
    for b in &bases {
        let d = b
            .parse::<Digest>()
            .map_err(Problem::from_packet_error_400)?;
        if let Some(r) = packets::get(db, &d).await.map_err(internal)? {
            loaded_bases.push(load::load(bucket, &r).await?);
        }
    }
    let loaded = load::load(bucket, &row).await?;
    let refs: Vec<&Stored> = loaded_bases.iter().map(|b| b.as_ref()).collect();
    let doc = loaded.recipes(&refs).encode();
    let headers = Headers::new();
    set(&headers, "content-type", pillbox_wire::recipes::MEDIA_TYPE)?;
    set(&headers, "cache-control", "no-store")?;
    set(&headers, "content-length", &doc.len().to_string())?;
    streamed(ResponseBody::Body(doc), 200, headers)
}

/// `POST /v1/packets/{digest}/chunks`: the chunks asked for, as a chunk
/// batch of frames as stored, each read from its pack (back-to-back chunks
/// in one read). The request's size is checked before it is read.
pub async fn chunks(req: &mut Request, bucket: &Bucket, db: &D1Database, digest: Digest) -> Answer {
    let body = super::http::body(req, Caps::bytes(MAX_CHUNK_REQUEST))?;
    content_length(req)?;
    let row = indexed(db, &digest).await?;
    let asked: ChunkRequest = parse_json(&body.read_all().await?)?;
    if asked.chunks.len() > BatchLimits::MAX_FRAMES as usize {
        return Err(too_many());
    }
    let loaded = load::load(bucket, &row).await?;
    let index = loaded.fetchable();
    let mut wanted: Vec<ChunkRef> = Vec::with_capacity(asked.chunks.len());
    let mut total = 0u64;
    for hex in &asked.chunks {
        let found = Digest::from_hex(hex)
            .ok()
            .and_then(|d| index.get(&d))
            .ok_or_else(|| {
                Problem::bad_request(
                    ApiCode::ChunkUnknown,
                    format!("{hex:?} is not a chunk of packet {digest} (GET its recipes; a body of at most 1 MiB is one chunk)"),
                )
            })?;
        total += found.stored;
        wanted.push(*found);
    }
    if total > MAX_CHUNK_BYTES {
        return Err(too_many());
    }
    let frames: Vec<Frame> = wanted
        .iter()
        .map(|c| Frame {
            sha256: c.sha256,
            raw_size: c.raw as u32,
            stored_size: c.stored as u32,
            encoding: c.encoding,
        })
        .collect();
    let mut table = Vec::with_capacity(HEAD_BYTES + ENTRY_BYTES * frames.len());
    encode_table(&frames, &mut table);
    let length = table.len() as u64 + total;
    let sink = FixedPut::new(length).map_err(StoreError::problem)?;
    let readable = sink.readable.clone();
    let bucket = bucket.clone();
    wasm_bindgen_futures::spawn_local(async move {
        let mut out = Output::new(sink.writer.clone());
        let done = match out.bytes(&table).await {
            Ok(()) => read::stored_chunks(&bucket, loaded.layout.packs(), &wanted, &mut out).await,
            Err(e) => Err(e),
        };
        match done {
            Ok(()) => {
                let _ = sink.close().await;
            }
            Err(e) => {
                worker::console_error!("sending chunks of {digest}: {}", e.problem().to_json());
                sink.abort("the chunks could not be read").await;
            }
        }
    });
    let headers = Headers::new();
    set(&headers, "content-type", MEDIA_TYPE)?;
    set(&headers, "cache-control", "no-store")?;
    attachment(&headers)?;
    set(&headers, "content-length", &length.to_string())?;
    streamed(ResponseBody::Stream(readable), 200, headers)
}

fn too_many() -> Problem {
    Problem::new(
        ApiCode::ChunksTooMany,
        "ask for at most 65,536 chunks and 64 MiB per request",
        "split the request",
    )
}
