//! What every handler shares: building responses (JSON, empty, streamed,
//! refusals), CORS, and reading request headers and bodies (each held to
//! its caps, [`crate::body`]).

use pillbox_wire::ApiCode;
use serde::de::DeserializeOwned;
use serde::Serialize;
use worker::{Headers, Request, Response, ResponseBody};

use crate::body::Body;
use crate::caps::Caps;
use crate::config::Config;
use crate::encoding::Encoding;
use crate::problem::Problem;

/// What a handler returns: a response, or a refusal that becomes one.
pub type Answer = Result<Response, Problem>;

/// Largest JSON request body (`POST /v1/uploads`, `PUT /v1/refs/{name}`).
const MAX_JSON_BODY: u64 = 64 * 1024;

pub use crate::problem::internal;

/// A refusal as a response: its status, its JSON body, `Allow` on a 405
/// and `WWW-Authenticate` on a 401.
pub fn problem_response(p: &Problem) -> worker::Result<Response> {
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

/// A JSON answer (one of [`pillbox_wire`]'s types), never cached.
pub fn json_response<T: Serialize>(status: u16, body: &T) -> Answer {
    let bytes = serde_json::to_vec(body)
        .map_err(|e| Problem::internal(format!("writing the answer: {e}")))?;
    let headers = Headers::new();
    set(&headers, "content-type", "application/json")?;
    set(&headers, "cache-control", "no-store")?;
    Ok(Response::from_bytes(bytes)
        .map_err(internal)?
        .with_status(status)
        .with_headers(headers))
}

/// `204 No Content`.
pub fn no_content() -> Answer {
    Response::empty()
        .map(|r| r.with_status(204))
        .map_err(internal)
}

/// A response with no body (`HEAD`, `304`).
pub fn empty(status: u16, headers: Headers) -> Answer {
    Ok(Response::empty()
        .map_err(internal)?
        .with_status(status)
        .with_headers(headers))
}

/// A response whose body is R2's, passed through without a copy in wasm.
pub fn streamed(body: ResponseBody, status: u16, headers: Headers) -> Answer {
    Ok(Response::from_body(body)
        .map_err(internal)?
        .with_status(status)
        .with_headers(headers))
}

/// `416`: the range asked for is not inside the `what` of `size` bytes.
pub fn range_not_satisfiable(what: &str, size: u64) -> Answer {
    let p = Problem::new(
        ApiCode::RangeNotSatisfiable,
        format!("the {what} has {size} bytes"),
        format!("ask for bytes inside the {what}"),
    );
    let mut r = problem_response(&p).map_err(internal)?;
    r.headers_mut()
        .set("content-range", &format!("bytes */{size}"))
        .map_err(internal)?;
    Ok(r)
}

/// Sets a response header.
pub fn set(headers: &Headers, name: &str, value: &str) -> Result<(), Problem> {
    headers.set(name, value).map_err(internal)
}

/// Whether an answer was given to a request that needed a token.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Gate {
    /// Anyone may make this request: a cache may share the answer.
    Open,
    /// A token was needed: the answer depends on it.
    Token,
}

/// `Cache-Control` of immutable bytes anyone may read.
pub const IMMUTABLE: &str = "public, max-age=31536000, immutable";
/// The same bytes behind a token: only the caller's own cache keeps them.
const PRIVATE_IMMUTABLE: &str = "private, max-age=31536000, immutable";

/// Adds what every answer carries: `X-Content-Type-Options: nosniff`; the
/// CORS headers when the request's origin is allowed (`CORS_ORIGIN`; the
/// inspector the Worker serves is same-origin and needs none); and, behind
/// a token, `Vary: Authorization` with `Cache-Control: private` instead of
/// `public` so no shared cache hands one caller's answer to another.
pub fn finish(
    response: Response,
    config: &Config,
    origin: Option<&str>,
    gate: Gate,
) -> worker::Result<Response> {
    // Responses from R2 or fetch may have immutable headers: copy them.
    let headers = Headers::new();
    for (k, v) in response.headers().entries() {
        headers.append(&k, &v)?;
    }
    headers.set("x-content-type-options", "nosniff")?;
    if gate == Gate::Token {
        headers.append("vary", "Authorization")?;
        if headers.get("cache-control")?.as_deref() == Some(IMMUTABLE) {
            headers.set("cache-control", PRIVATE_IMMUTABLE)?;
        }
    }
    if let Some(allowed) = config.allowed_origin(origin) {
        headers.set("access-control-allow-origin", &allowed)?;
        headers.set(
            "access-control-allow-methods",
            "GET, HEAD, PUT, POST, DELETE, OPTIONS",
        )?;
        headers.set(
            "access-control-allow-headers",
            "Authorization, Content-Type, Content-Encoding, If-Match, If-None-Match, Range",
        )?;
        headers.set(
            "access-control-expose-headers",
            "ETag, Content-Length, Content-Range, Accept-Ranges, Location, Pillbox-Member-Sha256, Pillbox-Member-Mode, Pillbox-Wasm-Memory-Bytes, Pillbox-Timing, Pillbox-Cost",
        )?;
        headers.set("access-control-max-age", "86400")?;
    }
    if !config.cors_origins.is_empty() && config.allowed_origin(None).is_none() {
        // The allowed origin is this request's own: caches key on it.
        headers.append("vary", "Origin")?;
    }
    Ok(response.with_headers(headers))
}

/// `Content-Disposition: attachment` for bytes a browser should save, never
/// render (a member's body may be HTML or script).
pub fn attachment(headers: &Headers) -> Result<(), Problem> {
    set(headers, "content-disposition", "attachment")
}

/// A request header's value, if it has one.
pub fn header(req: &Request, name: &str) -> Option<String> {
    req.headers().get(name).ok().flatten()
}

/// The upload's `Content-Length` (R2 needs the length before the bytes).
pub fn content_length(req: &Request) -> Result<u64, Problem> {
    header(req, "content-length")
        .and_then(|v| v.trim().parse::<u64>().ok())
        .ok_or_else(|| {
            Problem::new(
                ApiCode::LengthRequired,
                "the upload has no Content-Length",
                "send the body with a Content-Length header (no chunked transfer encoding)",
            )
        })
}

/// The request's declared `Content-Length`, if it has one (a body sent
/// with chunked transfer encoding has none).
pub fn declared_length(req: &Request) -> Option<u64> {
    header(req, "content-length").and_then(|v| v.trim().parse::<u64>().ok())
}

/// The request's body, as sent (any `Content-Encoding` but `identity` is
/// 415 `encoding_unsupported`), to be read within `caps`: a declared
/// `Content-Length` over them is refused here, before a byte is read.
pub fn body(req: &Request, caps: Caps) -> Result<Body, Problem> {
    identity_only(req)?;
    Body::open(req.inner().body(), declared_length(req), caps)
}

/// 415 `encoding_unsupported` unless the body is sent as it is (also for
/// the routes that stream a body to R2 as sent: a whole packet, a part of
/// an upload).
pub fn identity_only(req: &Request) -> Result<(), Problem> {
    Encoding::parse(
        header(req, "content-encoding").as_deref(),
        &[Encoding::Identity],
    )
    .map(|_| ())
}

/// Reads a JSON request body into its [`pillbox_wire`] type.
pub async fn read_json<T: DeserializeOwned>(req: &mut Request) -> Result<T, Problem> {
    read_json_up_to(req, MAX_JSON_BODY).await
}

/// Reads a JSON request body of at most `max` bytes (413
/// `body_too_large`), not encoded.
pub async fn read_json_up_to<T: DeserializeOwned>(
    req: &mut Request,
    max: u64,
) -> Result<T, Problem> {
    let body = body(req, Caps::bytes(max))?;
    parse_json(&body.read_all().await?)
}

/// A JSON body as its [`pillbox_wire`] type.
pub fn parse_json<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, Problem> {
    serde_json::from_slice(bytes).map_err(|e| {
        Problem::bad_request(
            ApiCode::BodyInvalid,
            format!("the JSON body does not match the API: {e}"),
        )
    })
}
