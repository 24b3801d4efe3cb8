//! `/v1/packets/…` and `/v1/search`: storing a packet in one request,
//! reading it back whole, by range, by member or its manifest, listing,
//! searching and deleting.

use packet_core::Digest;
use worker::{Bucket, D1Database, Headers, Range, Request, ResponseBody};

use super::http::{
    content_length, empty, header, internal, json_response, no_content, range_not_satisfiable, set,
    streamed, Answer,
};
use crate::conditions::{etag, none_match};
use crate::config::Config;
use crate::index;
use crate::problem::Problem;
use crate::query::{upload_labels, Query};
use crate::range::{self, RangeAnswer};
use crate::rows::{self, PacketRow};
use crate::store::{self, StoreError};

/// Packets and members never change under their digest.
const IMMUTABLE: &str = "public, max-age=31536000, immutable";
const PACKET_TYPE: &str = "application/x-tar";

/// The response header that reports [`wasm_memory_bytes`] after a
/// verification.
const WASM_MEMORY_HEADER: &str = "pillbox-wasm-memory-bytes";

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
        index::add_labels(db, &digest, &labels)
            .await
            .map_err(internal)?;
        return json_response(200, &row.stored(false));
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
    let indexed = store::verify_into_bucket(
        bucket,
        body,
        size,
        digest,
        config.limits,
        config.packet_hasher,
    )
    .await
    .map_err(refusal)?;
    if let Some(line) = crate::findings::log_line(&indexed.digest, &indexed.findings) {
        worker::console_warn!("{line}");
    }
    index::insert_packet(db, &indexed, &labels)
        .await
        .map_err(internal)?;
    stored(db, &digest).await
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
    if let Some(inm) = header(req, "if-none-match") {
        if none_match(&inm, &tag) {
            return empty(304, headers);
        }
    }
    let answer = range::answer(header(req, "range").as_deref(), row.size);
    if let Some(cr) = answer.content_range(row.size) {
        set(&headers, "content-range", &cr)?;
    }
    let status = match answer {
        RangeAnswer::Full => 200,
        RangeAnswer::Partial { .. } => 206,
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
    let get = bucket.get(store::packet_key(&digest));
    let get = match answer {
        RangeAnswer::Partial { start, end } => get.range(Range::OffsetWithLength {
            offset: start,
            length: end - start + 1,
        }),
        _ => get,
    };
    let object = get
        .execute()
        .await
        .map_err(internal)?
        .ok_or_else(|| missing_bytes(&digest))?;
    let body = object
        .body()
        .ok_or_else(|| Problem::internal("R2 returned no body"))?
        .response_body()
        .map_err(internal)?;
    streamed(body, status, headers)
}

fn missing_bytes(digest: &Digest) -> Problem {
    Problem::internal(format!(
        "packet {digest} is indexed but its bytes are missing from R2"
    ))
}

/// Reads `length` bytes at `offset` of a stored packet.
async fn read_range(
    bucket: &Bucket,
    digest: &Digest,
    offset: u64,
    length: u64,
) -> Result<ResponseBody, Problem> {
    if length == 0 {
        return Ok(ResponseBody::Empty);
    }
    let object = bucket
        .get(store::packet_key(digest))
        .range(Range::OffsetWithLength { offset, length })
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
    let body = read_range(bucket, &digest, row.manifest_offset, row.manifest_size).await?;
    let headers = Headers::new();
    set(&headers, "content-type", "application/json")?;
    set(&headers, "cache-control", IMMUTABLE)?;
    set(&headers, "etag", &etag(&format!("{}/manifest", row.digest)))?;
    set(&headers, "content-length", &row.manifest_size.to_string())?;
    streamed(body, 200, headers)
}

/// `GET` / `HEAD /v1/packets/{digest}/members/{path}`: one file's bytes,
/// read from R2 at the offset the index holds.
pub async fn member(
    req: &Request,
    bucket: &Bucket,
    db: &D1Database,
    digest: Digest,
    path: &str,
    head: bool,
) -> Answer {
    indexed(db, &digest).await?;
    let member = index::member(db, &digest, path)
        .await
        .map_err(internal)?
        .ok_or_else(|| Problem::not_found(format!("packet {digest} has no member {path:?}")))?;
    if member.kind != "file" {
        let mut p = Problem::new(
            404,
            "not_a_file",
            format!("{path:?} is a {}, it has no bytes", member.kind),
            "read the manifest for directories and symlink targets",
        );
        p.error.refusal.details.path = Some(member.path.clone().into());
        return Err(p);
    }
    let sha = format!("sha256:{}", member.sha256.as_deref().unwrap_or_default());
    let headers = Headers::new();
    set(&headers, "content-type", "application/octet-stream")?;
    set(&headers, "cache-control", IMMUTABLE)?;
    set(&headers, "etag", &etag(&sha))?;
    set(&headers, "pillbox-member-sha256", &sha)?;
    set(
        &headers,
        "pillbox-member-mode",
        &format!("{:04o}", member.mode),
    )?;
    set(&headers, "accept-ranges", "bytes")?;
    let answer = range::answer(header(req, "range").as_deref(), member.size);
    let (status, offset, length) = match answer {
        RangeAnswer::Full => (200, member.data_offset, member.size),
        RangeAnswer::Partial { start, end } => (206, member.data_offset + start, end - start + 1),
        RangeAnswer::Unsatisfiable => return range_not_satisfiable("member", member.size),
    };
    if let Some(cr) = answer.content_range(member.size) {
        set(&headers, "content-range", &cr)?;
    }
    set(&headers, "content-length", &length.to_string())?;
    if head {
        return empty(status, headers);
    }
    let body = read_range(bucket, &digest, offset, length).await?;
    streamed(body, status, headers)
}

/// `DELETE /v1/packets/{digest}`, unless a ref names it.
pub async fn delete(bucket: &Bucket, db: &D1Database, digest: Digest) -> Answer {
    indexed(db, &digest).await?;
    let refs = index::delete_packet(db, &digest).await.map_err(internal)?;
    if !refs.is_empty() {
        return Err(Problem::conflict(
            "packet_referenced",
            format!("refs point at {digest}: {}", refs.join(", ")),
            "move or delete those refs first",
        ));
    }
    bucket
        .delete(store::packet_key(&digest))
        .await
        .map_err(internal)?;
    no_content()
}

/// `GET /v1/packets`: newest first, filtered.
pub async fn list(db: &D1Database, query: &Query) -> Answer {
    let filter = query.packet_filter()?;
    let (rows, next) = index::list_packets(db, &filter).await.map_err(internal)?;
    json_response(200, &rows::packet_page(&rows, next))
}

/// `GET /v1/search`: the members with a path or a blob sha256.
pub async fn search(db: &D1Database, query: &Query) -> Answer {
    let key = query.search_key()?;
    let (rows, next) = index::search(
        db,
        &key,
        query.cursor_number()?.unwrap_or(0),
        query.limit()?,
    )
    .await
    .map_err(internal)?;
    json_response(200, &rows::search_page(&rows, next))
}
