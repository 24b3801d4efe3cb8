//! One handler per route. Handlers move streams between the request,
//! packet-core ([`crate::store`]), R2 and D1 ([`crate::index`]); every
//! rule about packets is packet-core's.

use packet_core::Digest;
use serde::Deserialize;
use serde_json::json;
use worker::{Bucket, D1Database, Env, Headers, Range, Request, Response, ResponseBody};

use crate::auth::{self, ReadAccess};
use crate::config::Config;
use crate::index::{self, ListFilter, SearchKey};
use crate::multipart::{Plan, MIN_PART_SIZE};
use crate::problem::Problem;
use crate::range::{self, RangeAnswer};
use crate::route::{self, check_label, Method, Route};
use crate::store::{self, StoreError};

const BUCKET: &str = "PACKETS";
const DATABASE: &str = "INDEX";
const IMMUTABLE: &str = "public, max-age=31536000, immutable";
const PACKET_TYPE: &str = "application/x-tar";
const DEFAULT_PAGE: u32 = 50;
const MAX_PAGE: u32 = 500;

type Answer = Result<Response, Problem>;

/// Handles one request: route, authorize, dispatch, add CORS headers.
pub async fn handle(req: Request, env: Env) -> worker::Result<Response> {
    let config = Config::from_vars(|name| env.var(name).ok().map(|v| v.to_string()));
    let url = req.url()?;
    let method = Method::parse(req.method().as_ref());
    let body = req.inner().body();
    let answer = match route::route(method, url.path()) {
        Ok(Route::Assets) => return assets(req, &env).await,
        Ok(route) => match authorize(&req, &env, &config, &route) {
            Ok(()) => dispatch(route, req, &env, &config, &url).await,
            Err(p) => Err(p),
        },
        Err(p) => Err(p),
    };
    if let Some(body) = body {
        // Refused before its body was read (auth, limits, malformed URL).
        store::discard(&body, config.max_single_upload_bytes + (1 << 20)).await;
    }
    let response = match answer {
        Ok(r) => r,
        Err(p) => problem_response(&p)?,
    };
    with_cors(response, &config)
}

async fn assets(req: Request, env: &Env) -> worker::Result<Response> {
    match env.assets("ASSETS") {
        Ok(fetcher) => fetcher.fetch_request(req).await,
        Err(_) => problem_response(&Problem::not_found("no such page")),
    }
}

fn authorize(req: &Request, env: &Env, config: &Config, route: &Route) -> Result<(), Problem> {
    // The preflight and the server's settings (GET /v1) are always public.
    let needs_token = route.is_write()
        || (config.read_access == ReadAccess::Token
            && !matches!(route, Route::Preflight | Route::Info));
    if !needs_token {
        return Ok(());
    }
    let header = req.headers().get("authorization").ok().flatten();
    let secret = env.secret("PILLBOX_TOKEN").ok().map(|s| s.to_string());
    auth::check(header.as_deref(), secret.as_deref())
}

async fn dispatch(
    route: Route,
    mut req: Request,
    env: &Env,
    config: &Config,
    url: &worker::Url,
) -> Answer {
    let bucket = || {
        env.bucket(BUCKET)
            .map_err(|e| Problem::internal(format!("the R2 binding {BUCKET}: {e}")))
    };
    let db = || {
        env.d1(DATABASE)
            .map_err(|e| Problem::internal(format!("the D1 binding {DATABASE}: {e}")))
    };
    let query = Query::new(url);
    match route {
        Route::Preflight => Response::empty()
            .map(|r| r.with_status(204))
            .map_err(internal),
        Route::Info => info(config),
        Route::ListPackets => list_packets(&db()?, &query).await,
        Route::UploadPacket(digest) => {
            upload_packet(&mut req, &bucket()?, &db()?, config, digest, &query).await
        }
        Route::GetPacket { digest, head } => {
            get_packet(&req, &bucket()?, &db()?, digest, head).await
        }
        Route::DeletePacket(digest) => delete_packet(&bucket()?, &db()?, digest).await,
        Route::GetManifest(digest) => get_manifest(&bucket()?, &db()?, digest).await,
        Route::GetMember { digest, path, head } => {
            get_member(&req, &bucket()?, &db()?, digest, &path, head).await
        }
        Route::CreateUpload => create_upload(&mut req, &bucket()?, &db()?, config).await,
        Route::GetUpload(id) => get_upload(&db()?, &id).await,
        Route::UploadPart { id, number } => {
            upload_part(&req, &bucket()?, &db()?, &id, number).await
        }
        Route::CompleteUpload(id) => complete_upload(&bucket()?, &db()?, config, &id).await,
        Route::AbortUpload(id) => abort_upload(&bucket()?, &db()?, &id).await,
        Route::ListRefs => list_refs(&db()?, &query).await,
        Route::GetRef(name) => get_ref(&db()?, &name).await,
        Route::PutRef(name) => put_ref(&mut req, &db()?, &name).await,
        Route::DeleteRef(name) => delete_ref(&req, &db()?, &name).await,
        Route::Search => search(&db()?, &query).await,
        Route::Assets => Err(Problem::not_found("no such page")),
    }
}

// ---- helpers ----------------------------------------------------------

fn internal(e: worker::Error) -> Problem {
    Problem::internal(e.to_string())
}

fn problem_response(p: &Problem) -> worker::Result<Response> {
    let headers = Headers::new();
    headers.set("content-type", "application/json")?;
    headers.set("cache-control", "no-store")?;
    if let Some(allow) = &p.allow {
        headers.set("allow", allow)?;
    }
    if p.status == 401 {
        headers.set("www-authenticate", "Bearer realm=\"pillbox\"")?;
    }
    Ok(Response::from_bytes(p.to_json().into_bytes())?
        .with_status(p.status)
        .with_headers(headers))
}

fn json_response(status: u16, value: &serde_json::Value) -> Answer {
    let headers = Headers::new();
    headers
        .set("content-type", "application/json")
        .map_err(internal)?;
    headers.set("cache-control", "no-store").map_err(internal)?;
    Ok(Response::from_bytes(value.to_string().into_bytes())
        .map_err(internal)?
        .with_status(status)
        .with_headers(headers))
}

fn with_cors(response: Response, config: &Config) -> worker::Result<Response> {
    // Responses from R2 or fetch may have immutable headers: copy them.
    let headers = Headers::new();
    for (k, v) in response.headers().entries() {
        headers.append(&k, &v)?;
    }
    headers.set("access-control-allow-origin", &config.cors_origin)?;
    headers.set(
        "access-control-allow-methods",
        "GET, HEAD, PUT, POST, DELETE, OPTIONS",
    )?;
    headers.set(
        "access-control-allow-headers",
        "Authorization, Content-Type, If-Match, If-None-Match, Range",
    )?;
    headers.set(
        "access-control-expose-headers",
        "ETag, Content-Length, Content-Range, Accept-Ranges, Location, Pillbox-Member-Sha256, Pillbox-Member-Mode, Pillbox-Wasm-Memory-Bytes",
    )?;
    headers.set("access-control-max-age", "86400")?;
    if config.cors_origin != "*" {
        headers.append("vary", "Origin")?;
    }
    Ok(response.with_headers(headers))
}

fn etag(digest: &str) -> String {
    format!("\"{digest}\"")
}

/// The digest in an `If-Match` / `If-None-Match` value (quotes optional).
fn condition_digest(value: &str) -> Result<Digest, Problem> {
    let v = value.trim();
    let v = v.strip_prefix("W/").unwrap_or(v);
    let v = v.trim_matches('"');
    v.parse::<Digest>().map_err(Problem::from_packet_error_400)
}

fn header(req: &Request, name: &str) -> Option<String> {
    req.headers().get(name).ok().flatten()
}

struct Query(Vec<(String, String)>);

impl Query {
    fn new(url: &worker::Url) -> Query {
        Query(
            url.query_pairs()
                .map(|(k, v)| (k.into_owned(), v.into_owned()))
                .collect(),
        )
    }

    fn get(&self, key: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    fn all(&self, key: &str) -> Vec<String> {
        self.0
            .iter()
            .filter(|(k, _)| k == key)
            .map(|(_, v)| v.clone())
            .collect()
    }

    fn limit(&self) -> Result<u32, Problem> {
        match self.get("limit") {
            None => Ok(DEFAULT_PAGE),
            Some(v) => match v.parse::<u32>() {
                Ok(n) if (1..=MAX_PAGE).contains(&n) => Ok(n),
                _ => Err(Problem::bad_request(
                    "limit_invalid",
                    format!("limit is an integer from 1 to {MAX_PAGE}"),
                )),
            },
        }
    }

    fn cursor_number(&self) -> Result<Option<u64>, Problem> {
        self.get("cursor")
            .map(|c| {
                c.parse::<u64>().map_err(|_| {
                    Problem::bad_request(
                        "cursor_invalid",
                        "pass back the next_cursor of the previous page unchanged",
                    )
                })
            })
            .transpose()
    }
}

fn labels_of(list: Vec<String>) -> Result<Vec<String>, Problem> {
    if list.len() > 32 {
        return Err(Problem::bad_request(
            "label_invalid",
            "at most 32 labels per packet upload",
        ));
    }
    for l in &list {
        check_label(l)?;
    }
    let mut list = list;
    list.sort();
    list.dedup();
    Ok(list)
}

fn packet_json(row: &index::PacketRow) -> serde_json::Value {
    json!({
        "digest": row.digest,
        "size": row.size,
        "members": row.member_count,
        "file_bytes": row.file_bytes,
        "harness": row.harness_kind.as_ref().map(|k| json!({
            "kind": k,
            "thread_id": row.thread_id,
            "model": row.model,
        })),
        "labels": row.label_list(),
        "created": row.created,
    })
}

async fn indexed_packet(db: &D1Database, digest: &Digest) -> Result<index::PacketRow, Problem> {
    index::packet(db, digest)
        .await
        .map_err(internal)?
        .ok_or_else(|| Problem::not_found(format!("no packet {digest} is stored")))
}

fn content_length(req: &Request) -> Result<u64, Problem> {
    header(req, "content-length")
        .and_then(|v| v.trim().parse::<u64>().ok())
        .ok_or_else(|| {
            Problem::new(
                411,
                "length_required",
                "the upload has no Content-Length",
                "send the body with a Content-Length header (no chunked transfer encoding)",
            )
        })
}

fn too_large_packet(size: u64, config: &Config) -> Option<Problem> {
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

fn refusal(e: StoreError) -> Problem {
    match e {
        StoreError::Refused(e) => Problem::from_packet_error(&e),
        StoreError::Failed(message) => Problem::internal(message),
    }
}

// ---- handlers ---------------------------------------------------------

fn info(config: &Config) -> Answer {
    json_response(
        200,
        &json!({
            "service": "pillbox",
            "api": 1,
            "format": packet_core::FORMAT_ID,
            "max_packet_bytes": config.limits.max_packet_bytes,
            "max_members": config.limits.max_members,
            "max_single_upload_bytes": config.max_single_upload_bytes,
            "part_size": {
                "default": config.default_part_size,
                "min": MIN_PART_SIZE,
                "max": config.max_part_size(),
            },
            "read_access": match config.read_access { ReadAccess::Public => "public", ReadAccess::Token => "token" },
        }),
    )
}

async fn upload_packet(
    req: &mut Request,
    bucket: &Bucket,
    db: &D1Database,
    config: &Config,
    digest: Digest,
    query: &Query,
) -> Answer {
    let labels = labels_of(query.all("label"))?;
    if let Some(row) = index::packet(db, &digest).await.map_err(internal)? {
        index::add_labels(db, &digest, &labels)
            .await
            .map_err(internal)?;
        let mut body = packet_json(&row);
        body["created"] = json!(false);
        body["created_at"] = json!(row.created);
        return json_response(200, &body);
    }
    let size = content_length(req)?;
    if let Some(p) = too_large_packet(size, config) {
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
    index::insert_packet(db, &indexed, &labels)
        .await
        .map_err(internal)?;
    stored_response(db, &digest).await
}

async fn stored_response(db: &D1Database, digest: &Digest) -> Answer {
    let row = indexed_packet(db, digest).await?;
    let mut body = packet_json(&row);
    body["created_at"] = body["created"].take();
    body["created"] = json!(true);
    let mut response = json_response(201, &body)?;
    let headers = response.headers_mut();
    headers
        .set("location", &format!("/v1/packets/{digest}"))
        .map_err(internal)?;
    headers
        .set(WASM_MEMORY_HEADER, &wasm_memory_bytes().to_string())
        .map_err(internal)?;
    Ok(response)
}

/// The response header that reports [`wasm_memory_bytes`] after a
/// verification.
const WASM_MEMORY_HEADER: &str = "pillbox-wasm-memory-bytes";

/// The size of this instance's wasm linear memory, in bytes. Linear memory
/// only grows, so after a verification this is the most the instance has
/// held in wasm since it started (the isolate's JS heap is not included).
fn wasm_memory_bytes() -> u64 {
    core::arch::wasm32::memory_size::<0>() as u64 * 65536
}

async fn get_packet(
    req: &Request,
    bucket: &Bucket,
    db: &D1Database,
    digest: Digest,
    head: bool,
) -> Answer {
    let row = indexed_packet(db, &digest).await?;
    let tag = etag(&row.digest);
    let headers = Headers::new();
    let set = |k: &str, v: &str| headers.set(k, v).map_err(internal);
    set("etag", &tag)?;
    set("cache-control", IMMUTABLE)?;
    set("accept-ranges", "bytes")?;
    set("content-type", PACKET_TYPE)?;
    if let Some(inm) = header(req, "if-none-match") {
        if inm.split(',').any(|t| t.trim() == tag || t.trim() == "*") {
            return Ok(Response::empty()
                .map_err(internal)?
                .with_status(304)
                .with_headers(headers));
        }
    }
    let answer = range::answer(header(req, "range").as_deref(), row.size);
    if let Some(cr) = answer.content_range(row.size) {
        set("content-range", &cr)?;
    }
    let status = match answer {
        RangeAnswer::Full => 200,
        RangeAnswer::Partial { .. } => 206,
        RangeAnswer::Unsatisfiable => {
            let p = Problem::new(
                416,
                "range_not_satisfiable",
                format!("the packet has {} bytes", row.size),
                "ask for bytes inside the packet",
            );
            let mut r = problem_response(&p).map_err(internal)?;
            r.headers_mut()
                .set("content-range", &format!("bytes */{}", row.size))
                .map_err(internal)?;
            return Ok(r);
        }
    };
    set("content-length", &answer.length(row.size).to_string())?;
    if head {
        return Ok(Response::empty()
            .map_err(internal)?
            .with_status(status)
            .with_headers(headers));
    }
    let key = store::packet_key(&digest);
    let get = bucket.get(key);
    let get = match answer {
        RangeAnswer::Partial { start, end } => get.range(Range::OffsetWithLength {
            offset: start,
            length: end - start + 1,
        }),
        _ => get,
    };
    let object = get.execute().await.map_err(internal)?.ok_or_else(|| {
        Problem::internal(format!(
            "packet {digest} is indexed but its bytes are missing from R2"
        ))
    })?;
    let body = object
        .body()
        .ok_or_else(|| Problem::internal("R2 returned no body"))?
        .response_body()
        .map_err(internal)?;
    Ok(Response::from_body(body)
        .map_err(internal)?
        .with_status(status)
        .with_headers(headers))
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
        .ok_or_else(|| {
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

async fn get_manifest(bucket: &Bucket, db: &D1Database, digest: Digest) -> Answer {
    let row = indexed_packet(db, &digest).await?;
    let body = read_range(bucket, &digest, row.manifest_offset, row.manifest_size).await?;
    let headers = Headers::new();
    let set = |k: &str, v: &str| headers.set(k, v).map_err(internal);
    set("content-type", "application/json")?;
    set("cache-control", IMMUTABLE)?;
    set("etag", &etag(&format!("{}/manifest", row.digest)))?;
    set("content-length", &row.manifest_size.to_string())?;
    Ok(Response::from_body(body)
        .map_err(internal)?
        .with_headers(headers))
}

async fn get_member(
    req: &Request,
    bucket: &Bucket,
    db: &D1Database,
    digest: Digest,
    path: &str,
    head: bool,
) -> Answer {
    indexed_packet(db, &digest).await?;
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
        p.path = Some(member.path.clone());
        return Err(p);
    }
    let sha = format!("sha256:{}", member.sha256.as_deref().unwrap_or_default());
    let headers = Headers::new();
    let set = |k: &str, v: &str| headers.set(k, v).map_err(internal);
    set("content-type", "application/octet-stream")?;
    set("cache-control", IMMUTABLE)?;
    set("etag", &etag(&sha))?;
    set("pillbox-member-sha256", &sha)?;
    set("pillbox-member-mode", &format!("{:04o}", member.mode))?;
    set("accept-ranges", "bytes")?;
    let answer = range::answer(header(req, "range").as_deref(), member.size);
    let (status, offset, length) = match answer {
        RangeAnswer::Full => (200, member.data_offset, member.size),
        RangeAnswer::Partial { start, end } => (206, member.data_offset + start, end - start + 1),
        RangeAnswer::Unsatisfiable => {
            let mut r = problem_response(&Problem::new(
                416,
                "range_not_satisfiable",
                format!("the member has {} bytes", member.size),
                "ask for bytes inside the member",
            ))
            .map_err(internal)?;
            r.headers_mut()
                .set("content-range", &format!("bytes */{}", member.size))
                .map_err(internal)?;
            return Ok(r);
        }
    };
    if let Some(cr) = answer.content_range(member.size) {
        set("content-range", &cr)?;
    }
    set("content-length", &length.to_string())?;
    if head {
        return Ok(Response::empty()
            .map_err(internal)?
            .with_status(status)
            .with_headers(headers));
    }
    let body = read_range(bucket, &digest, offset, length).await?;
    Ok(Response::from_body(body)
        .map_err(internal)?
        .with_status(status)
        .with_headers(headers))
}

async fn delete_packet(bucket: &Bucket, db: &D1Database, digest: Digest) -> Answer {
    indexed_packet(db, &digest).await?;
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
    Response::empty()
        .map(|r| r.with_status(204))
        .map_err(internal)
}

async fn list_packets(db: &D1Database, query: &Query) -> Answer {
    let labels = query.all("label");
    for l in &labels {
        check_label(l)?;
    }
    let harness = query.get("harness").map(str::to_string);
    if let Some(h) = &harness {
        if h != "codex" && h != "claude" {
            return Err(Problem::bad_request(
                "harness_invalid",
                "harness is codex or claude",
            ));
        }
    }
    let filter = ListFilter {
        labels,
        thread_id: query.get("thread_id").map(str::to_string),
        harness,
        before: query.cursor_number()?,
        limit: query.limit()?,
    };
    let (rows, next) = index::list_packets(db, &filter).await.map_err(internal)?;
    json_response(
        200,
        &json!({
            "packets": rows.iter().map(packet_json).collect::<Vec<_>>(),
            "next_cursor": next.map(|n| n.to_string()),
        }),
    )
}

async fn search(db: &D1Database, query: &Query) -> Answer {
    let key = match (query.get("path"), query.get("sha256")) {
        (Some(p), None) if !p.is_empty() => SearchKey::Path(p.to_string()),
        (None, Some(s)) => {
            let digest = if s.starts_with("sha256:") {
                s.to_string()
            } else {
                format!("sha256:{s}")
            };
            let d = digest
                .parse::<Digest>()
                .map_err(Problem::from_packet_error_400)?;
            SearchKey::Sha256(d.hex().to_string())
        }
        _ => {
            return Err(Problem::bad_request(
                "search_invalid",
                "give exactly one of path= or sha256=",
            ))
        }
    };
    let (rows, next) = index::search(
        db,
        &key,
        query.cursor_number()?.unwrap_or(0),
        query.limit()?,
    )
    .await
    .map_err(internal)?;
    json_response(
        200,
        &json!({
            "matches": rows.iter().map(|m| json!({
                "digest": m.digest,
                "path": m.path,
                "type": m.kind,
                "size": m.size,
                "sha256": m.sha256.as_ref().map(|h| format!("sha256:{h}")),
            })).collect::<Vec<_>>(),
            "next_cursor": next.map(|n| n.to_string()),
        }),
    )
}

// ---- multipart uploads --------------------------------------------------

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CreateUpload {
    digest: String,
    size: u64,
    #[serde(default)]
    part_size: Option<u64>,
    #[serde(default)]
    labels: Vec<String>,
}

async fn read_json<T: for<'de> Deserialize<'de>>(req: &mut Request) -> Result<T, Problem> {
    let bytes = req
        .bytes()
        .await
        .map_err(|e| Problem::bad_request("body_invalid", format!("reading the body: {e}")))?;
    if bytes.len() > 64 * 1024 {
        return Err(Problem::too_large(
            "body_too_large",
            "a JSON body is at most 64 KiB",
            "send a smaller body",
        ));
    }
    serde_json::from_slice(&bytes).map_err(|e| {
        Problem::bad_request(
            "body_invalid",
            format!("the JSON body does not match the API: {e}"),
        )
    })
}

fn upload_json(row: &index::UploadRow, plan: &Plan, parts: &[index::PartRow]) -> serde_json::Value {
    let received: Vec<u16> = parts.iter().map(|p| p.number).collect();
    json!({
        "upload_id": row.id,
        "location": format!("/v1/uploads/{}", row.id),
        "digest": row.digest,
        "size": row.size,
        "part_size": row.part_size,
        "parts": plan.parts(),
        "received": parts,
        "missing": plan.missing(&received),
    })
}

async fn create_upload(
    req: &mut Request,
    bucket: &Bucket,
    db: &D1Database,
    config: &Config,
) -> Answer {
    let body: CreateUpload = read_json(req).await?;
    let digest = body
        .digest
        .parse::<Digest>()
        .map_err(Problem::from_packet_error_400)?;
    let labels = labels_of(body.labels)?;
    if let Some(row) = index::packet(db, &digest).await.map_err(internal)? {
        index::add_labels(db, &digest, &labels)
            .await
            .map_err(internal)?;
        let mut out = packet_json(&row);
        out["created_at"] = out["created"].take();
        out["created"] = json!(false);
        return json_response(200, &out);
    }
    if let Some(p) = too_large_packet(body.size, config) {
        return Err(p);
    }
    let plan = Plan::new(
        body.size,
        body.part_size,
        config.default_part_size,
        config.max_part_size(),
    )?;
    let id = index::new_upload_id(db).await.map_err(internal)?;
    let upload = bucket
        .create_multipart_upload(store::staging_key(&id))
        .execute()
        .await
        .map_err(internal)?;
    let row = index::UploadRow {
        id: id.clone(),
        digest: digest.to_string(),
        size: plan.size,
        part_size: plan.part_size,
        r2_upload_id: upload.upload_id().await,
        labels: serde_json::to_string(&labels).unwrap_or_else(|_| "[]".into()),
    };
    index::insert_upload(db, &row).await.map_err(internal)?;
    let mut response = json_response(201, &upload_json(&row, &plan, &[]))?;
    response
        .headers_mut()
        .set("location", &format!("/v1/uploads/{id}"))
        .map_err(internal)?;
    Ok(response)
}

async fn upload_and_plan(db: &D1Database, id: &str) -> Result<(index::UploadRow, Plan), Problem> {
    let row = index::upload(db, id)
        .await
        .map_err(internal)?
        .ok_or_else(|| {
            Problem::not_found(format!(
                "no upload {id} is in progress (finished, aborted or never created)"
            ))
        })?;
    let plan = Plan {
        size: row.size,
        part_size: row.part_size,
    };
    Ok((row, plan))
}

async fn get_upload(db: &D1Database, id: &str) -> Answer {
    let (row, plan) = upload_and_plan(db, id).await?;
    let parts = index::parts(db, id).await.map_err(internal)?;
    json_response(200, &upload_json(&row, &plan, &parts))
}

async fn upload_part(
    req: &Request,
    bucket: &Bucket,
    db: &D1Database,
    id: &str,
    number: u16,
) -> Answer {
    let (row, plan) = upload_and_plan(db, id).await?;
    let length = content_length(req)?;
    plan.check_part(number, length)?;
    let body = req
        .inner()
        .body()
        .ok_or_else(|| Problem::bad_request("body_invalid", "the part has no body"))?;
    let upload = bucket
        .resume_multipart_upload(store::staging_key(id), &row.r2_upload_id)
        .map_err(internal)?;
    let part = upload.upload_part(number, body).await.map_err(internal)?;
    let part = index::PartRow {
        number,
        etag: part.etag(),
        size: length,
    };
    index::put_part(db, id, &part).await.map_err(internal)?;
    json_response(
        200,
        &json!({ "upload_id": id, "number": number, "size": length }),
    )
}

async fn abort_upload(bucket: &Bucket, db: &D1Database, id: &str) -> Answer {
    let (row, _) = upload_and_plan(db, id).await?;
    discard_upload(bucket, db, &row).await?;
    Response::empty()
        .map(|r| r.with_status(204))
        .map_err(internal)
}

/// Aborts an upload's R2 multipart upload, deletes its staging object (if
/// the parts were assembled) and its D1 rows.
async fn discard_upload(
    bucket: &Bucket,
    db: &D1Database,
    row: &index::UploadRow,
) -> Result<(), Problem> {
    let key = store::staging_key(&row.id);
    if let Ok(upload) = bucket.resume_multipart_upload(key.clone(), &row.r2_upload_id) {
        // Already completed or aborted uploads fail here; the staging object goes below.
        let _ = upload.abort().await;
    }
    bucket.delete(key).await.map_err(internal)?;
    index::delete_upload(db, &row.id).await.map_err(internal)
}

/// Uploads discarded per D1 query by [`expire_uploads`].
const EXPIRE_BATCH: u32 = 50;
/// Most uploads one scheduled run discards (the rest wait for the next run).
const EXPIRE_PER_RUN: usize = 1000;

/// The scheduled clean-up: discards every multipart upload started more
/// than `UPLOAD_TTL_HOURS` before `now_ms` (its R2 parts, staging object and
/// D1 rows). Returns how many it discarded.
pub async fn expire_uploads(env: &Env, now_ms: f64) -> Result<usize, Problem> {
    let config = Config::from_vars(|name| env.var(name).ok().map(|v| v.to_string()));
    let bucket = env
        .bucket(BUCKET)
        .map_err(|e| Problem::internal(format!("the R2 binding {BUCKET}: {e}")))?;
    let db = env
        .d1(DATABASE)
        .map_err(|e| Problem::internal(format!("the D1 binding {DATABASE}: {e}")))?;
    let cutoff = String::from(
        js_sys::Date::new(&wasm_bindgen::JsValue::from_f64(
            now_ms - config.upload_ttl_ms as f64,
        ))
        .to_iso_string(),
    );
    let mut discarded = 0;
    while discarded < EXPIRE_PER_RUN {
        let rows = index::uploads_created_before(&db, &cutoff, EXPIRE_BATCH)
            .await
            .map_err(internal)?;
        if rows.is_empty() {
            break;
        }
        for row in &rows {
            discard_upload(&bucket, &db, row).await?;
            discarded += 1;
        }
    }
    Ok(discarded)
}

async fn complete_upload(bucket: &Bucket, db: &D1Database, config: &Config, id: &str) -> Answer {
    let (row, plan) = upload_and_plan(db, id).await?;
    let digest = row
        .digest
        .parse::<Digest>()
        .map_err(Problem::from_packet_error_400)?;
    let labels: Vec<String> = serde_json::from_str(&row.labels).unwrap_or_default();
    let staging = store::staging_key(id);
    if index::packet(db, &digest)
        .await
        .map_err(internal)?
        .is_some()
    {
        // Another upload of the same packet finished first.
        abort_upload(bucket, db, id).await?;
        index::add_labels(db, &digest, &labels)
            .await
            .map_err(internal)?;
        let row = indexed_packet(db, &digest).await?;
        let mut out = packet_json(&row);
        out["created_at"] = out["created"].take();
        out["created"] = json!(false);
        return json_response(200, &out);
    }
    let parts = index::parts(db, id).await.map_err(internal)?;
    let received: Vec<u16> = parts.iter().map(|p| p.number).collect();
    let missing = plan.missing(&received);
    if !missing.is_empty() {
        return Err(Problem::conflict(
            "upload_incomplete",
            format!("parts still missing: {missing:?}"),
            "upload the missing parts (GET the upload to see them), then complete again",
        ));
    }
    let assembled = match bucket.head(staging.clone()).await.map_err(internal)? {
        // A retried complete: the parts were assembled before.
        Some(object) if object.size() == plan.size => true,
        _ => false,
    };
    if !assembled {
        let upload = bucket
            .resume_multipart_upload(staging.clone(), &row.r2_upload_id)
            .map_err(internal)?;
        let uploaded = parts
            .iter()
            .map(|p| worker::UploadedPart::new(p.number, p.etag.clone()));
        upload.complete(uploaded).await.map_err(|e| {
            Problem::conflict(
                "upload_not_assembled",
                format!("R2 could not assemble the parts: {e}"),
                "upload the parts again (or start a new upload), then complete again",
            )
        })?;
    }
    let object = bucket
        .get(staging.clone())
        .execute()
        .await
        .map_err(internal)?
        .ok_or_else(|| Problem::internal("the assembled upload is missing"))?;
    let source = match object
        .body()
        .ok_or_else(|| Problem::internal("R2 returned no body"))?
        .response_body()
        .map_err(internal)?
    {
        ResponseBody::Stream(stream) => stream,
        _ => return Err(Problem::internal("R2 returned no stream")),
    };
    let result = store::verify_into_bucket(
        bucket,
        source,
        plan.size,
        digest,
        config.limits,
        config.packet_hasher,
    )
    .await;
    let outcome = match result {
        Ok(indexed) => index::insert_packet(db, &indexed, &labels)
            .await
            .map_err(internal),
        Err(e) => Err(refusal(e)),
    };
    if matches!(&outcome, Ok(()) | Err(Problem { status: 422, .. })) {
        // Verified and indexed, or refused: either way the staging copy goes.
        bucket.delete(staging).await.map_err(internal)?;
        index::delete_upload(db, id).await.map_err(internal)?;
    }
    outcome?;
    stored_response(db, &digest).await
}

// ---- refs ---------------------------------------------------------------

fn ref_json(row: &index::RefRow) -> serde_json::Value {
    json!({ "name": row.name, "digest": row.digest, "updated": row.updated })
}

async fn get_ref(db: &D1Database, name: &str) -> Answer {
    let row = index::get_ref(db, name)
        .await
        .map_err(internal)?
        .ok_or_else(|| Problem::not_found(format!("no ref {name:?}")))?;
    let mut response = json_response(200, &ref_json(&row))?;
    response
        .headers_mut()
        .set("etag", &etag(&row.digest))
        .map_err(internal)?;
    Ok(response)
}

async fn list_refs(db: &D1Database, query: &Query) -> Answer {
    let prefix = query.get("prefix").unwrap_or("");
    let after = query.get("cursor").unwrap_or("");
    let (rows, next) = index::list_refs(db, prefix, after, query.limit()?)
        .await
        .map_err(internal)?;
    json_response(
        200,
        &json!({ "refs": rows.iter().map(ref_json).collect::<Vec<_>>(), "next_cursor": next }),
    )
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PutRef {
    digest: String,
}

async fn ref_conflict(db: &D1Database, name: &str, wanted: &str) -> Problem {
    let current = index::get_ref(db, name)
        .await
        .ok()
        .flatten()
        .map(|r| r.digest);
    let mut p = Problem::conflict(
        "ref_conflict",
        match &current {
            Some(d) => format!("ref {name:?} holds {d}, not {wanted}"),
            None => format!("ref {name:?} does not exist, so it does not hold {wanted}"),
        },
        "read the ref again, decide, and retry with If-Match set to the digest it holds (or no If-Match to create it)",
    );
    p.current = Some(current);
    p
}

async fn put_ref(req: &mut Request, db: &D1Database, name: &str) -> Answer {
    let if_match = header(req, "if-match");
    let if_none_match = header(req, "if-none-match");
    let body: PutRef = read_json(req).await?;
    let digest = body
        .digest
        .parse::<Digest>()
        .map_err(Problem::from_packet_error_400)?;
    if index::packet(db, &digest)
        .await
        .map_err(internal)?
        .is_none()
    {
        return Err(Problem::not_found(format!(
            "no packet {digest} is stored: upload it before naming it"
        )));
    }
    match (if_match, if_none_match) {
        (Some(_), Some(_)) => Err(Problem::bad_request(
            "precondition_invalid",
            "send If-Match or If-None-Match, not both",
        )),
        (Some(expected), None) => {
            let expected = condition_digest(&expected)?;
            if index::swap_ref(db, name, &expected, &digest)
                .await
                .map_err(internal)?
            {
                let row = index::get_ref(db, name)
                    .await
                    .map_err(internal)?
                    .ok_or_else(|| Problem::internal("ref vanished"))?;
                let mut out = ref_json(&row);
                out["previous"] = json!(expected.to_string());
                json_response(200, &out)
            } else {
                Err(ref_conflict(db, name, &expected.to_string()).await)
            }
        }
        (None, inm) => {
            if let Some(v) = inm {
                if v.trim() != "*" {
                    return Err(Problem::bad_request(
                        "precondition_invalid",
                        "If-None-Match on a ref must be *",
                    ));
                }
            }
            if index::create_ref(db, name, &digest)
                .await
                .map_err(internal)?
            {
                let row = index::get_ref(db, name)
                    .await
                    .map_err(internal)?
                    .ok_or_else(|| Problem::internal("ref vanished"))?;
                let mut out = ref_json(&row);
                out["previous"] = serde_json::Value::Null;
                json_response(201, &out)
            } else {
                Err(ref_conflict(db, name, "nothing (create-only)").await)
            }
        }
    }
}

async fn delete_ref(req: &Request, db: &D1Database, name: &str) -> Answer {
    let expected = header(req, "if-match")
        .map(|v| condition_digest(&v))
        .transpose()?;
    if index::delete_ref(db, name, expected.as_ref())
        .await
        .map_err(internal)?
    {
        return Response::empty()
            .map(|r| r.with_status(204))
            .map_err(internal);
    }
    match (index::get_ref(db, name).await.map_err(internal)?, expected) {
        (None, _) => Err(Problem::not_found(format!("no ref {name:?}"))),
        (Some(_), Some(e)) => Err(ref_conflict(db, name, &e.to_string()).await),
        (Some(_), None) => Err(Problem::internal("the ref could not be deleted")),
    }
}
