//! The HTTP client of a packet store: its URL and token, requests with
//! retries ([`RetryPolicy`]), and the store's answers read into their
//! [`pillbox_wire`] types or turned into a [`CliError`] (status → code and
//! exit code).

use std::fs::{self, File};
use std::io::{self, Read, Seek, SeekFrom};
use std::path::Path;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::Duration;

use packet_core::Digest;
use pillbox_wire::{ErrorBody, Info, Ref, TRANSFER_DELTA};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use ureq::http::Response;
use ureq::{Body, SendBody};

use super::{packet_path, TOKEN_ENV};
use crate::error::{CliError, Refused, Result, EXIT_IO};
use crate::progress::Progress;

/// A bearer token. Its `Debug` never shows the secret.
#[derive(Clone)]
pub struct Token(String);

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Token(…)")
    }
}

impl Token {
    /// The token from `--token-file` if given, else `$PILLBOX_TOKEN`, else
    /// none (reads of a public store need none). Surrounding whitespace
    /// (a trailing newline) is dropped.
    pub fn load(file: Option<&Path>) -> Result<Option<Token>> {
        let raw = match file {
            Some(f) => Some(fs::read_to_string(f).map_err(|e| CliError::io("read", f, e))?),
            None => std::env::var(TOKEN_ENV).ok(),
        };
        Ok(raw
            .map(|t| t.trim().to_owned())
            .filter(|t| !t.is_empty())
            .map(Token))
    }
}

/// How often and how long to retry a request that failed for a reason that
/// may pass: a dropped connection, a timeout, 408, 429 or a 5xx answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Attempts in all, the first included.
    pub attempts: u32,
    /// The wait before the second attempt; it doubles for each next one.
    pub first_delay: Duration,
    /// The longest wait between two attempts.
    pub max_delay: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            attempts: 5,
            first_delay: Duration::from_millis(250),
            max_delay: Duration::from_secs(4),
        }
    }
}

impl RetryPolicy {
    /// The wait after failed attempt `attempt` (1-based), or `None` when
    /// no attempt is left.
    pub fn delay_after(&self, attempt: u32) -> Option<Duration> {
        if attempt >= self.attempts {
            return None;
        }
        let factor = 1u32
            .checked_shl(attempt.saturating_sub(1))
            .unwrap_or(u32::MAX);
        Some(self.first_delay.saturating_mul(factor).min(self.max_delay))
    }

    /// Whether an answer with this status is worth another attempt.
    pub fn retries_status(status: u16) -> bool {
        matches!(status, 408 | 429 | 500 | 502 | 503 | 504)
    }
}

/// A packet store: its base URL, the token and an HTTP agent (one
/// connection pool for every request).
pub struct Remote {
    base: String,
    token: Option<Token>,
    agent: ureq::Agent,
    retry: RetryPolicy,
    traffic: Traffic,
    /// `GET /v1`'s answer, once read.
    settings: std::sync::OnceLock<Settings>,
}

/// What went over the wire: request and response body bytes (headers
/// excluded, compressed or not), and requests that had to be sent again.
#[derive(Debug, Default)]
pub struct Traffic {
    sent: AtomicU64,
    received: AtomicU64,
    retries: AtomicU32,
    requests: AtomicU64,
}

impl Traffic {
    /// Request body bytes sent so far (every attempt).
    pub fn sent(&self) -> u64 {
        self.sent.load(Ordering::Relaxed)
    }

    /// Response body bytes received so far.
    pub fn received(&self) -> u64 {
        self.received.load(Ordering::Relaxed)
    }

    /// Requests sent again after a transient failure.
    pub fn retries(&self) -> u32 {
        self.retries.load(Ordering::Relaxed)
    }

    /// Requests sent so far (every attempt).
    pub fn requests(&self) -> u64 {
        self.requests.load(Ordering::Relaxed)
    }

    pub(super) fn add_sent(&self, n: u64) {
        self.sent.fetch_add(n, Ordering::Relaxed);
    }

    pub(super) fn add_received(&self, n: u64) {
        self.received.fetch_add(n, Ordering::Relaxed);
    }

    pub(super) fn add_retry(&self) {
        self.retries.fetch_add(1, Ordering::Relaxed);
    }
}

fn new_agent() -> ureq::Agent {
    let config = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_connect(Some(Duration::from_secs(15)))
        .timeout_per_read(Some(Duration::from_secs(120)))
        .timeout_per_write(Some(Duration::from_secs(120)))
        // Idle connections are dropped before a server's keep-alive
        // timeout can race a new request on them.
        .max_idle_age(Duration::from_secs(2))
        .user_agent(concat!("pillbox/", env!("CARGO_PKG_VERSION")))
        .build();
    ureq::Agent::new_with_config(config)
}

impl Remote {
    /// Checks the URL (`http://` or `https://`, no query or fragment) and
    /// prepares a client. A trailing `/` is dropped; a path prefix is kept.
    pub fn new(url: &str, token: Option<Token>) -> Result<Remote> {
        let base = base_url(url)?;
        Ok(Remote {
            base,
            token,
            agent: new_agent(),
            retry: RetryPolicy::default(),
            traffic: Traffic::default(),
            settings: std::sync::OnceLock::new(),
        })
    }

    /// What went over the wire so far.
    pub fn traffic(&self) -> &Traffic {
        &self.traffic
    }

    /// The base URL as used.
    pub fn base(&self) -> &str {
        &self.base
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// How failed requests are retried (a download retries its own reads).
    pub(super) fn retry(&self) -> &RetryPolicy {
        &self.retry
    }

    /// One `GET path` from byte `from` on (`Range: bytes=<from>-`), not
    /// retried: a download that lost its connection calls it in its own
    /// retry loop.
    pub(super) fn get_from(
        &self,
        path: &str,
        from: u64,
    ) -> std::result::Result<Response<Body>, ureq::Error> {
        self.traffic.requests.fetch_add(1, Ordering::Relaxed);
        let mut r = self
            .agent
            .get(&self.url(path))
            .header("range", format!("bytes={from}-"));
        if let Some(a) = self.auth() {
            r = r.header("authorization", a);
        }
        r.call()
    }

    fn auth(&self) -> Option<String> {
        self.token.as_ref().map(|t| format!("Bearer {}", t.0))
    }

    /// Sends the request `make` builds, again after a backoff while it fails
    /// for a transient reason. `what` names the request in errors.
    fn send(
        &self,
        what: &str,
        make: &mut dyn FnMut() -> std::result::Result<Response<Body>, ureq::Error>,
    ) -> Result<Response<Body>> {
        let mut attempt = 1;
        loop {
            if attempt > 1 {
                self.traffic.add_retry();
            }
            self.traffic.requests.fetch_add(1, Ordering::Relaxed);
            let failure = match make() {
                Ok(r) if RetryPolicy::retries_status(r.status().as_u16()) => {
                    match self.retry.delay_after(attempt) {
                        Some(_) => format!("HTTP {}", r.status().as_u16()),
                        None => return Ok(r),
                    }
                }
                Ok(r) => return Ok(r),
                Err(e) if is_transient(&e) => e.to_string(),
                Err(e) => return Err(unreachable_error(what, &self.base, &e.to_string())),
            };
            match self.retry.delay_after(attempt) {
                Some(delay) => std::thread::sleep(delay),
                None => return Err(unreachable_error(what, &self.base, &failure)),
            }
            attempt += 1;
        }
    }

    /// `GET path`, retried.
    pub(super) fn get(&self, what: &str, path: &str) -> Result<Response<Body>> {
        self.without_body(what, path, false)
    }

    /// `HEAD path`, retried.
    pub(super) fn head(&self, what: &str, path: &str) -> Result<Response<Body>> {
        self.without_body(what, path, true)
    }

    fn without_body(&self, what: &str, path: &str, head: bool) -> Result<Response<Body>> {
        let url = self.url(path);
        self.send(what, &mut || {
            let agent = &self.agent;
            let mut r = if head {
                agent.head(&url)
            } else {
                agent.get(&url)
            };
            if let Some(a) = self.auth() {
                r = r.header("authorization", a);
            }
            r.call()
        })
    }

    /// `PUT` (`method` "PUT") or `POST` of a JSON body, one of
    /// [`pillbox_wire`]'s request types, retried.
    pub(super) fn send_json<T: Serialize>(
        &self,
        what: &str,
        method: &str,
        path: &str,
        body: &T,
        headers: &[(&str, String)],
    ) -> Result<Response<Body>> {
        let url = self.url(path);
        let bytes = serde_json::to_vec(body).unwrap_or_default();
        self.send(what, &mut || {
            self.traffic.add_sent(bytes.len() as u64);
            let agent = &self.agent;
            let mut r = match method {
                "PUT" => agent.put(&url),
                _ => agent.post(&url),
            }
            .header("content-type", "application/json");
            if let Some(a) = self.auth() {
                r = r.header("authorization", a);
            }
            for (k, v) in headers {
                r = r.header(*k, v.as_str());
            }
            r.send(&bytes[..])
        })
    }

    /// `PUT` or `POST` (`method`) of `body`, with its content type and
    /// any other headers (a `content-encoding`),
    /// retried; every attempt's bytes count as sent.
    pub(super) fn send_bytes(
        &self,
        what: &str,
        method: &str,
        path: &str,
        content_type: &str,
        body: &[u8],
        headers: &[(&str, String)],
    ) -> Result<Response<Body>> {
        let url = self.url(path);
        self.send(what, &mut || {
            self.traffic.add_sent(body.len() as u64);
            let agent = &self.agent;
            let mut r = match method {
                "PUT" => agent.put(&url),
                _ => agent.post(&url),
            }
            .header("content-type", content_type);
            if let Some(a) = self.auth() {
                r = r.header("authorization", a);
            }
            for (k, v) in headers {
                r = r.header(*k, v.as_str());
            }
            r.send(body)
        })
    }

    /// `GET path` asking for a gzip answer where the store offers one,
    /// retried.
    pub(super) fn get_compressible(&self, what: &str, path: &str) -> Result<Response<Body>> {
        let url = self.url(path);
        self.send(what, &mut || {
            let mut r = self.agent.get(&url).header("accept-encoding", "gzip");
            if let Some(a) = self.auth() {
                r = r.header("authorization", a);
            }
            r.call()
        })
    }

    /// `GET path` of bytes `start..=end` (`Range`), retried.
    pub(super) fn get_range(
        &self,
        what: &str,
        path: &str,
        start: u64,
        end: u64,
    ) -> Result<Response<Body>> {
        let url = self.url(path);
        self.send(what, &mut || {
            let mut r = self
                .agent
                .get(&url)
                .header("range", format!("bytes={start}-{end}"));
            if let Some(a) = self.auth() {
                r = r.header("authorization", a);
            }
            r.call()
        })
    }

    /// An answer's body as it arrives: its wire bytes counted as
    /// received, a gzip encoding undone.
    pub(super) fn body_reader(&self, response: Response<Body>) -> Box<dyn Read + Send + '_> {
        let gzip = response
            .headers()
            .get("content-encoding")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.eq_ignore_ascii_case("gzip"));
        let counted = CountedIn {
            inner: response.into_body().into_reader(),
            traffic: &self.traffic,
        };
        if gzip {
            Box::new(flate2::read::GzDecoder::new(counted))
        } else {
            Box::new(counted)
        }
    }

    /// An answer's whole body (at most `limit` bytes once decoded).
    pub(super) fn read_body(
        &self,
        what: &str,
        response: Response<Body>,
        limit: u64,
    ) -> Result<Vec<u8>> {
        let mut out = Vec::new();
        self.body_reader(response)
            .take(limit + 1)
            .read_to_end(&mut out)
            .map_err(|e| unreachable_error(what, &self.base, &e.to_string()))?;
        if out.len() as u64 > limit {
            return Err(bad_answer(what, &format!("more than {limit} bytes")));
        }
        Ok(out)
    }

    /// PUTs `length` bytes of `file` from `offset`, with a Content-Length
    /// (the store refuses chunked uploads).
    pub(super) fn put_range(
        &self,
        what: &str,
        path: &str,
        file: &Path,
        offset: u64,
        length: u64,
        progress: &Progress,
    ) -> Result<Response<Body>> {
        let url = self.url(path);
        let start = progress.position();
        let source = File::open(file).map_err(|e| CliError::io("open", file, e))?;
        self.send(what, &mut || {
            progress.set_position(start);
            let mut f = source.try_clone().map_err(ureq::Error::Io)?;
            f.seek(SeekFrom::Start(offset)).map_err(ureq::Error::Io)?;
            self.traffic.add_sent(length);
            let body = Counted {
                inner: f.take(length),
                progress: progress.clone(),
            };
            let mut r = self
                .agent
                .put(&url)
                .header("content-type", "application/octet-stream")
                .header("content-length", length.to_string());
            if let Some(a) = self.auth() {
                r = r.header("authorization", a);
            }
            r.send(SendBody::from_owned_reader(body))
        })
    }
}

fn is_transient(e: &ureq::Error) -> bool {
    matches!(
        e,
        ureq::Error::Io(_)
            | ureq::Error::Timeout(_)
            | ureq::Error::ConnectionFailed
            | ureq::Error::HostNotFound
            | ureq::Error::Protocol(_)
            | ureq::Error::BodyStalled
    )
}

/// The base URL without a trailing `/`, or a usage error.
pub fn base_url(url: &str) -> Result<String> {
    let trimmed = url.trim().trim_end_matches('/');
    let rest = trimmed
        .strip_prefix("http://")
        .or_else(|| trimmed.strip_prefix("https://"));
    match rest {
        Some(r) if !r.is_empty() && !r.starts_with('/') && !r.contains(['?', '#', ' ']) => {
            Ok(trimmed.to_owned())
        }
        _ => Err(CliError::Usage(format!(
            "--remote {url:?}: give the store's base URL, e.g. https://pillbox.example.workers.dev or http://127.0.0.1:8787"
        ))),
    }
}

pub(super) fn unreachable_error(what: &str, base: &str, detail: &str) -> CliError {
    CliError::Remote {
        code: "remote_unreachable".into(),
        exit: EXIT_IO,
        path: None,
        offset: None,
        message: format!(
            "{} at {base} failed: {detail}",
            super::refusal::Subject::of(what).doing()
        ),
        advice: "check the --remote URL and the network, then run the command again (an interrupted push resumes where it stopped)".into(),
    }
}

/// The error for an answer the command cannot use: the store's code, and
/// a message and advice in the CLI's terms ([`super::refusal`]). A `422`
/// carries packet-core's code, path and offset unchanged (exit 3); a `5xx`
/// is exit 4; any other refusal (401, 403, 404, 409, 413…) is exit 5. A
/// body that is not the API's `{"error": …}` (a proxy's page, say) leaves
/// the code to the status.
pub(super) fn status_error(what: &str, mut response: Response<Body>) -> CliError {
    let status = response.status().as_u16();
    let problem = response
        .body_mut()
        .with_config()
        .limit(1 << 20)
        .read_to_vec()
        .ok()
        .and_then(|b| serde_json::from_slice::<ErrorBody>(&b).ok())
        .map(|b| b.error);
    super::refusal::refusal(what, status, problem)
}

/// Reads an answer's JSON body into its [`pillbox_wire`] type.
pub(super) fn read_answer<T: DeserializeOwned>(
    what: &str,
    response: &mut Response<Body>,
) -> Result<T> {
    let bytes = response
        .body_mut()
        .with_config()
        .limit(4 << 20)
        .read_to_vec()
        .map_err(|e| unreachable_error(what, "the store", &e.to_string()))?;
    parse_answer(what, &bytes)
}

/// An answer's body as `T`; one that is not JSON, or not the API's shape
/// (serde names the field), is `remote_invalid_answer`.
pub(super) fn parse_answer<T: DeserializeOwned>(what: &str, bytes: &[u8]) -> Result<T> {
    serde_json::from_slice(bytes).map_err(|e| {
        if e.is_data() {
            bad_answer(what, &e.to_string())
        } else {
            bad_answer(what, &format!("not JSON: {e}"))
        }
    })
}

/// `GET /v1`: the store's settings (push reads its single-upload limit),
/// and whether it takes delta transfer.
pub(super) fn store_info(remote: &Remote) -> Result<Settings> {
    if let Some(s) = remote.settings.get() {
        return Ok(s.clone());
    }
    let what = "GET /v1";
    let r = remote.get(what, "/v1")?;
    if r.status().as_u16() != 200 {
        return Err(status_error(what, r));
    }
    let bytes = remote.read_body(what, r, 1 << 20)?;
    let info: Info = parse_answer(what, &bytes)?;
    let offer: Offer = parse_answer(what, &bytes)?;
    let settings = Settings {
        delta: offer.transfer.iter().any(|t| t == TRANSFER_DELTA),
        info,
    };
    let _ = remote.settings.set(settings.clone());
    Ok(settings)
}

/// `HEAD /v1/packets/{digest}`: whether the store holds the packet.
pub(super) fn is_stored(remote: &Remote, digest: &Digest) -> Result<bool> {
    let what = format!("HEAD {}", packet_path(digest));
    let r = remote.head(&what, &packet_path(digest))?;
    match r.status().as_u16() {
        200 => Ok(true),
        404 => Ok(false),
        _ => Err(status_error(&what, r)),
    }
}

/// What `GET /v1` says (asked once per run).
#[derive(Clone)]
pub(super) struct Settings {
    /// The limits and settings every store sends.
    pub info: Info,
    /// True when its `transfer` lists `delta`.
    pub delta: bool,
}

/// `GET /v1`'s `transfer`, which a store that predates delta transfer does
/// not send.
// pillbox-wire's `Info::transfer` replaces this at merge (the Worker
// builds `Info` and gains the field there).
#[derive(Debug, Default, Deserialize)]
struct Offer {
    #[serde(default)]
    transfer: Vec<String>,
}

/// `GET /v1/refs/{name}` 200: the digest the ref holds.
pub(super) fn ref_digest(what: &str, response: &mut Response<Body>) -> Result<Digest> {
    let found: Ref = read_answer(what, response)?;
    found
        .digest
        .parse::<Digest>()
        .map_err(|e| bad_answer(what, &format!("digest {:?}: {}", found.digest, e.message())))
}

/// `remote_invalid_answer`: the store answered, but not as the API says.
pub(super) fn bad_answer(what: &str, detail: &str) -> CliError {
    Refused::RemoteInvalidAnswer {
        doing: super::refusal::Subject::of(what).doing(),
        detail: detail.to_owned(),
    }
    .into()
}

/// Counts an answer's wire bytes as received.
struct CountedIn<'a, R> {
    inner: R,
    traffic: &'a Traffic,
}

impl<R: Read> Read for CountedIn<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.traffic.add_received(n as u64);
        Ok(n)
    }
}

/// Counts the bytes read through it on the progress bar.
struct Counted<R> {
    inner: R,
    progress: Progress,
}

impl<R: Read> Read for Counted<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.progress.inc(n as u64);
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pillbox_wire::PartSizes;

    #[test]
    fn base_urls_are_checked_and_trimmed() {
        assert_eq!(
            base_url("http://127.0.0.1:8787/").unwrap(),
            "http://127.0.0.1:8787"
        );
        assert_eq!(
            base_url("https://example.invalid/store//").unwrap(),
            "https://example.invalid/store"
        );
        for bad in [
            "",
            "127.0.0.1:8787",
            "ftp://x",
            "http://",
            "http:///x",
            "http://h/?q=1",
        ] {
            assert_eq!(base_url(bad).unwrap_err().code(), "usage", "{bad}");
        }
    }

    #[test]
    fn retries_back_off_and_stop() {
        let p = RetryPolicy::default();
        let delays: Vec<_> = (1..=6).map(|a| p.delay_after(a)).collect();
        assert_eq!(
            delays,
            vec![
                Some(Duration::from_millis(250)),
                Some(Duration::from_millis(500)),
                Some(Duration::from_secs(1)),
                Some(Duration::from_secs(2)),
                None,
                None
            ]
        );
        let long = RetryPolicy { attempts: 40, ..p };
        assert_eq!(long.delay_after(39), Some(Duration::from_secs(4)));
        assert!(RetryPolicy::retries_status(503));
        assert!(RetryPolicy::retries_status(429));
        assert!(!RetryPolicy::retries_status(409));
        assert!(!RetryPolicy::retries_status(422));
        assert!(!RetryPolicy::retries_status(404));
    }

    #[test]
    fn the_store_settings_are_read_from_get_v1() {
        let info: Info = parse_answer(
            "GET /v1",
            br#"{"service":"pillbox","api":1,"format":"pillbox.session-packet/1","max_packet_bytes":1073741824,"max_members":100000,"max_single_upload_bytes":8388608,"part_size":{"default":5242880,"min":5242880,"max":8388608},"read_access":"public"}"#,
        )
        .unwrap();
        assert_eq!(
            (info.max_single_upload_bytes, info.part_size),
            (
                8 << 20,
                PartSizes {
                    default: 5 << 20,
                    min: 5 << 20,
                    max: 8 << 20
                }
            )
        );
        let missing = parse_answer::<Info>("GET /v1", b"{}").unwrap_err();
        assert_eq!(missing.code(), "remote_invalid_answer");
        assert!(missing.report().details.message.contains("missing field"));
        let html = parse_answer::<Info>("GET /v1", b"<html>").unwrap_err();
        assert!(html.report().details.message.contains("not JSON"));
    }

    #[test]
    fn the_token_never_shows_in_debug_output() {
        let t = Token("s3cret".into());
        assert!(!format!("{t:?}").contains("s3cret"));
    }
}
