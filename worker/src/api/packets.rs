//! `/v1/packets/…`, `/v1/digests/{prefix}` and `/v1/search`: storing a
//! packet in one request (/1 or /2, by the reader's rule for each), reading
//! it back whole, by range, by member or its manifest (a packet stored
//! whole is read from its object, any other rebuilt from its packs, zstd
//! chunks decoded), its recipes and chunks for a delta pull, listing,
//! finding digests by prefix, searching and deleting. Each handler parses
//! the request, authorises (its caller did), calls one function and
//! answers: the upload is [`crate::upload::single`]'s, the bodies of reads
//! and a search's page are [`crate::storage::serve`]'s, a delete is
//! [`crate::storage::clean::delete_packet`]; the headers of a read are set
//! here.

use pillbox_wire::ApiCode;

use packet_core::Digest;
use pillbox_wire::chunks::MEDIA_TYPE;
use pillbox_wire::{ChunkRequest, DigestPrefix};
use worker::{Bucket, D1Database, Headers, Request, ResponseBody};

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
use crate::search::Cursor;
use crate::storage::clean::delete_packet;
use crate::storage::index::packets::{self, PacketRow};
use crate::storage::load::{self, indexed};
use crate::storage::{fetch, serve};
use crate::upload::request::check_single;
use crate::upload::single::{self, Sent};

/// Packets and members never change under their digest.
const PACKET_TYPE: &str = "application/x-tar";

/// The response header that reports [`wasm_memory_bytes`] after a
/// verification.
const WASM_MEMORY_HEADER: &str = "pillbox-wasm-memory-bytes";

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
    let refused = config.limits.check_packet_size(size).err()?;
    Some(Problem::over_limit(
        refused.code(),
        refused.message(),
        refused.advice(),
    ))
}

/// `201`: the packet is verified, stored and indexed by this request (its
/// row).
pub(super) fn stored(row: &PacketRow) -> Answer {
    let mut response = json_response(201, &row.stored(true))?;
    let headers = response.headers_mut();
    headers
        .set("location", &format!("/v1/packets/{}", row.digest))
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
    stored(&indexed(db, &digest).await?)
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
    let body = serve::packet(bucket, &row, digest, bytes, status == 200).await?;
    streamed(body, status, headers)
}

/// `GET /v1/packets/{digest}/manifest`: `packet.json` as stored.
pub async fn manifest(bucket: &Bucket, db: &D1Database, digest: Digest) -> Answer {
    let row = indexed(db, &digest).await?;
    let body = serve::manifest(bucket, &row, &digest).await?;
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
    let (index, member) = loaded.file(path)?;
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
    let body = serve::member(bucket, &loaded, index, start, length).await?;
    streamed(body, status, headers)
}

/// `DELETE /v1/packets/{digest}`, unless a ref names it. Its rows and a
/// chunked packet's manifest and layout go now; its bytes go with the next
/// clean-up that finds them unused.
pub async fn delete(bucket: &Bucket, db: &D1Database, digest: Digest) -> Answer {
    let row = indexed(db, &digest).await?;
    let refs = delete_packet(bucket, db, &digest, &row)
        .await
        .map_err(internal)?;
    if !refs.is_empty() {
        return Err(packets::referenced(&row.digest, &refs));
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
    let cursor = Cursor::parse(query.get("cursor"))?;
    json_response(200, &serve::search(bucket, db, &key, limit, cursor).await?)
}

/// `GET /v1/packets/{digest}/recipes[?base=…]`: how its manifest and its
/// bodies of several chunks are cut, with copy runs of the bases' bodies.
pub async fn recipes(bucket: &Bucket, db: &D1Database, digest: Digest, query: &Query) -> Answer {
    let row = indexed(db, &digest).await?;
    let bases = query.recipe_bases()?;
    let doc = serve::recipes(bucket, db, &row, &bases).await?;
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
    fetch::check_count(asked.chunks.len())?;
    let loaded = load::load(bucket, &row).await?;
    let answer = fetch::answer(&loaded.fetchable(), &asked.chunks, &digest)?;
    let length = answer.length;
    let body = serve::chunks(bucket, loaded, answer)?;
    let headers = Headers::new();
    set(&headers, "content-type", MEDIA_TYPE)?;
    set(&headers, "cache-control", "no-store")?;
    attachment(&headers)?;
    set(&headers, "content-length", &length.to_string())?;
    streamed(body, 200, headers)
}
