//! `/v1/packets/…` and `/v1/search`: storing a packet in one request,
//! reading it back whole, by range, by member or its manifest (a packet
//! stored whole is read from its object, a chunked one rebuilt from its
//! packs), its recipes and chunks for a delta pull, listing, searching and
//! deleting.

use std::rc::Rc;

use packet_core::Digest;
use pillbox_wire::chunks::{encode_table, BatchLimits, Frame, ENTRY_BYTES, HEAD_BYTES, MEDIA_TYPE};
use pillbox_wire::{ChunkRequest, SearchResults};
use worker::{Bucket, D1Database, Headers, Range, Request, ResponseBody};

use super::http::{
    attachment, content_length, empty, header, internal, json_response, no_content,
    range_not_satisfiable, read_json_up_to, set, streamed, Answer, IMMUTABLE,
};
use crate::assemble::{self, Output, RebuildError};
use crate::conditions::{etag, none_match};
use crate::config::Config;
use crate::index::{self, NewPacket, NewStorage};
use crate::layout::ChunkRef;
use crate::objects::{self, Loaded};
use crate::plan;
use crate::problem::Problem;
use crate::query::{upload_labels, Query};
use crate::range::{self, RangeAnswer};
use crate::rows::{self, PacketRow, Storage};
use crate::search::{self, Cursor};
use crate::store::{self, FixedPut, StoreError};

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

/// The indexed packet with this digest, or 404.
pub(super) async fn indexed(db: &D1Database, digest: &Digest) -> Result<PacketRow, Problem> {
    index::packet(db, digest)
        .await
        .map_err(internal)?
        .ok_or_else(|| Problem::not_found(format!("no packet {digest} is stored")))
}

/// 413 when `size` is over the server's packet limit (packet-core's
/// `limit_size`, refused before a byte is read).
pub(super) fn too_large(size: u64, config: &Config) -> Option<Problem> {
    (size > config.limits.max_packet_bytes).then(|| {
        Problem::too_large(
            packet_core::ErrorCode::LimitSize.as_str(),
            format!(
                "the packet is {size} bytes, this server accepts at most {}",
                config.limits.max_packet_bytes
            ),
            packet_core::ErrorCode::LimitSize.advice(),
        )
    })
}

/// A verification that did not store the packet: packet-core's refusal
/// (422), or a storage failure (500).
pub(super) fn refusal(e: StoreError) -> Problem {
    match e {
        StoreError::Refused(e) => Problem::from_packet_error(&e),
        StoreError::Failed(message) => Problem::internal(message),
    }
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
    index::add_labels(db, &digest, labels)
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
    if let Some(row) = index::packet(db, &digest).await.map_err(internal)? {
        return already_stored(db, row, &labels).await;
    }
    let size = content_length(req)?;
    if let Some(p) = too_large(size, config) {
        return Err(p);
    }
    if size > config.max_single_upload_bytes {
        return Err(Problem::too_large(
            "upload_too_large",
            format!(
                "a single upload takes at most {} bytes, this one is {size}",
                config.max_single_upload_bytes
            ),
            "upload it in parts: POST /v1/uploads (see docs/worker.md)",
        ));
    }
    let body = req
        .inner()
        .body()
        .ok_or_else(|| Problem::bad_request("body_invalid", "the upload has no body"))?;
    // A key of its own, never reused: the clean-up may still be deleting an
    // earlier object of the same packet.
    let key = store::staging_key(&index::new_id(db).await.map_err(internal)?);
    index::insert_pack(db, &key, size, 0, &digest.to_string())
        .await
        .map_err(internal)?;
    let verified = match store::verify_into_bucket(
        bucket,
        &key,
        body,
        size,
        digest,
        config.limits,
        config.packet_hasher,
    )
    .await
    {
        Ok(v) => v,
        Err(e) => {
            // The put was aborted: no object, so no row for it either.
            let _ = index::forget_pack(db, &key).await;
            return Err(refusal(e));
        }
    };
    let packs = [key.clone()];
    index::insert_whole_packet(
        db,
        &NewPacket {
            digest: &digest,
            size,
            manifest: &verified.manifest,
            manifest_range: verified.manifest_range.clone(),
            storage: NewStorage::Whole { key: &key },
            packs: &packs,
            labels: &labels,
        },
    )
    .await
    .map_err(internal)?;
    super::log_findings(&digest, &verified.findings);
    stored(db, &digest).await
}

/// A packet's bytes could not be read back.
fn unreadable(digest: &Digest, e: RebuildError) -> Problem {
    match e {
        RebuildError::MissingPack(_) => Problem::internal(format!(
            "packet {digest} is indexed but some of its bytes are missing from R2"
        )),
        RebuildError::Body(_) => {
            Problem::internal(format!("packet {digest}: a body does not match"))
        }
        RebuildError::Store(e) => refusal(e),
    }
}

/// Streams bytes `range` of a chunked packet into a response body: the
/// bytes are produced while the response is sent (bounded memory).
fn rebuilt_body(
    bucket: &Bucket,
    loaded: Rc<Loaded>,
    digest: Digest,
    range: core::ops::Range<u64>,
) -> Result<ResponseBody, Problem> {
    let sink = FixedPut::new(range.end - range.start).map_err(refusal)?;
    let readable = sink.readable.clone();
    let bucket = bucket.clone();
    wasm_bindgen_futures::spawn_local(async move {
        let mut out = Output::new(sink.writer.clone());
        match assemble::stream(&bucket, &loaded.packet(), range, &mut out, None).await {
            Ok(()) => {
                let _ = sink.close().await;
            }
            Err(e) => {
                let p = unreadable(&digest, e);
                worker::console_error!("{}", p.to_json());
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
            let loaded = objects::load(bucket, &row).await?;
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
    let loaded = objects::load(bucket, &row).await?;
    let (index, member) = loaded
        .manifest
        .find(path)
        .ok_or_else(|| Problem::not_found(format!("packet {digest} has no member {path:?}")))?;
    if member.kind() != packet_core::Kind::File {
        let mut p = Problem::new(
            404,
            "not_a_file",
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
        [one] => {
            let key = &loaded.layout.packs()[one.pack as usize];
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
    let refs = index::delete_packet(db, &digest).await.map_err(internal)?;
    if !refs.is_empty() {
        return Err(Problem::conflict(
            "packet_referenced",
            format!("refs point at {digest}: {}", refs.join(", ")),
            "move or delete those refs first",
        ));
    }
    objects::forget(&row.digest);
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
    let (rows, next) = index::list_packets(db, &filter).await.map_err(internal)?;
    json_response(200, &rows::packet_page(&rows, next))
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
    let rows = index::packets_from(db, at.seq, SEARCH_SCAN + 1)
        .await
        .map_err(internal)?;
    let scanned = rows.len().min(SEARCH_SCAN as usize);
    for row in &rows[..scanned] {
        let from = if row.seq == at.seq { at.member } else { 0 };
        let loaded = objects::load(bucket, row).await?;
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

/// `GET /v1/packets/{digest}/recipes`: how its bodies of several chunks
/// are cut.
pub async fn recipes(bucket: &Bucket, db: &D1Database, digest: Digest) -> Answer {
    let row = indexed(db, &digest).await?;
    let loaded = objects::load(bucket, &row).await?;
    json_response(200, &plan::recipes_of(&loaded.manifest, &loaded.layout))
}

/// `POST /v1/packets/{digest}/chunks`: the chunks asked for, as a chunk
/// batch, each read from its pack (back-to-back chunks in one read).
pub async fn chunks(req: &mut Request, bucket: &Bucket, db: &D1Database, digest: Digest) -> Answer {
    let row = indexed(db, &digest).await?;
    let asked: ChunkRequest = read_json_up_to(req, MAX_CHUNK_REQUEST).await?;
    let gzip = match asked.encoding.as_deref() {
        None | Some("identity") => false,
        Some("gzip") => true,
        Some(other) => {
            return Err(Problem::bad_request(
                "body_invalid",
                format!("\"encoding\": {other:?} is not one the store sends (gzip or identity)"),
            ))
        }
    };
    if asked.chunks.len() > BatchLimits::MAX_FRAMES as usize {
        return Err(too_many());
    }
    let loaded = objects::load(bucket, &row).await?;
    let index = plan::chunks_of(&loaded.manifest, &loaded.layout);
    let mut wanted: Vec<ChunkRef> = Vec::with_capacity(asked.chunks.len());
    let mut total = 0u64;
    for hex in &asked.chunks {
        let found = Digest::from_hex(hex)
            .ok()
            .and_then(|d| index.get(&d))
            .ok_or_else(|| {
                Problem::bad_request(
                    "chunk_unknown",
                    format!("{hex:?} is not a chunk of packet {digest} (GET its recipes; a body of at most 1 MiB is one chunk)"),
                )
            })?;
        total += found.size;
        wanted.push(*found);
    }
    if total > MAX_CHUNK_BYTES {
        return Err(too_many());
    }
    let frames: Vec<Frame> = wanted
        .iter()
        .map(|c| Frame {
            sha256: c.sha256,
            size: c.size as u32,
        })
        .collect();
    let mut table = Vec::with_capacity(HEAD_BYTES + ENTRY_BYTES * frames.len());
    encode_table(&frames, &mut table);
    let length = table.len() as u64 + total;
    let sink = FixedPut::new(length).map_err(refusal)?;
    let readable = sink.readable.clone();
    let bucket = bucket.clone();
    wasm_bindgen_futures::spawn_local(async move {
        let done = send_chunks(&bucket, &loaded, &table, &wanted, &sink).await;
        match done {
            Ok(()) => {
                let _ = sink.close().await;
            }
            Err(e) => {
                worker::console_error!(
                    "sending chunks of {digest}: {}",
                    unreadable(&digest, e).to_json()
                );
                sink.abort("the chunks could not be read").await;
            }
        }
    });
    let headers = Headers::new();
    set(&headers, "content-type", MEDIA_TYPE)?;
    set(&headers, "cache-control", "no-store")?;
    attachment(&headers)?;
    if gzip {
        // The runtime compresses the stream natively on the way out (a
        // response's Content-Encoding is applied to its body).
        set(&headers, "content-encoding", "gzip")?;
        headers
            .append("vary", "Accept-Encoding")
            .map_err(internal)?;
    } else {
        set(&headers, "content-length", &length.to_string())?;
    }
    streamed(ResponseBody::Stream(readable), 200, headers)
}

fn too_many() -> Problem {
    Problem::too_large(
        "chunks_too_many",
        "ask for at most 65,536 chunks and 64 MiB per request",
        "split the request",
    )
}

/// Writes a chunk batch: the table, then each chunk from its pack, runs of
/// back-to-back chunks in one range read.
async fn send_chunks(
    bucket: &Bucket,
    loaded: &Loaded,
    table: &[u8],
    wanted: &[ChunkRef],
    sink: &FixedPut,
) -> Result<(), RebuildError> {
    sink.write(&js_sys::Uint8Array::from(table)).await?;
    let mut i = 0;
    while i < wanted.len() {
        let first = wanted[i];
        let mut end = first.offset + first.size;
        let mut j = i + 1;
        while j < wanted.len() && wanted[j].pack == first.pack && wanted[j].offset == end {
            end += wanted[j].size;
            j += 1;
        }
        let key = &loaded.layout.packs()[first.pack as usize];
        let reader = store::read_range(bucket, key, first.offset..end)
            .await?
            .ok_or(RebuildError::MissingPack(first.pack))?;
        let mut left = end - first.offset;
        while left > 0 {
            let Some(chunk) = reader.next().await? else {
                return Err(RebuildError::MissingPack(first.pack));
            };
            left = left.saturating_sub(u64::from(chunk.length()));
            sink.write(&chunk).await?;
        }
        i = j;
    }
    Ok(())
}
