//! `push` and `pull`: moving packets to and from a pillbox packet store
//! (the edge Worker's HTTP API, `proto/openapi.yaml`; docs/cli.md,
//! "push" and "pull").
//!
//! Both directions verify with packet-core on this machine: push reads the
//! whole packet before sending a byte (and the server verifies it again);
//! pull feeds the bytes through packet-core's reader as they arrive and
//! renames the file into place only once it has verified. The HTTP client
//! is `ureq` (blocking, rustls); transient failures are retried with a
//! bounded backoff ([`RetryPolicy`]).

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use packet_core::{Digest, Limits, ReaderOptions};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use ureq::http::Response;
use ureq::{Body, SendBody};

use crate::error::{CliError, Refused, Result, EXIT_IO, EXIT_REFUSED, EXIT_VERIFY};
use crate::packet_io::{self, PacketInput, PacketSource, CHUNK};
use crate::progress::Progress;
use crate::report::{HarnessReport, Totals};

/// The environment variable holding the bearer token.
pub const TOKEN_ENV: &str = "PILLBOX_TOKEN";
/// The environment variable naming the default remote.
pub const REMOTE_ENV: &str = "PILLBOX_REMOTE";

// ---- the remote ----------------------------------------------------------

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

/// A packet store: its base URL, the token and an HTTP agent.
pub struct Remote {
    base: String,
    token: Option<Token>,
    agent: ureq::Agent,
    retry: RetryPolicy,
}

impl Remote {
    /// Checks the URL (`http://` or `https://`, no query or fragment) and
    /// prepares a client. A trailing `/` is dropped; a path prefix is kept.
    pub fn new(url: &str, token: Option<Token>) -> Result<Remote> {
        let base = base_url(url)?;
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
        Ok(Remote {
            base,
            token,
            agent: ureq::Agent::new_with_config(config),
            retry: RetryPolicy::default(),
        })
    }

    /// The base URL as used.
    pub fn base(&self) -> &str {
        &self.base
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
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

    fn get(&self, what: &str, path: &str) -> Result<Response<Body>> {
        self.without_body(what, path, false)
    }

    fn head(&self, what: &str, path: &str) -> Result<Response<Body>> {
        self.without_body(what, path, true)
    }

    fn without_body(&self, what: &str, path: &str, head: bool) -> Result<Response<Body>> {
        let url = self.url(path);
        self.send(what, &mut || {
            let mut r = if head {
                self.agent.head(&url)
            } else {
                self.agent.get(&url)
            };
            if let Some(a) = self.auth() {
                r = r.header("authorization", a);
            }
            r.call()
        })
    }

    fn send_json(
        &self,
        what: &str,
        method: &str,
        path: &str,
        body: &Value,
        headers: &[(&str, String)],
    ) -> Result<Response<Body>> {
        let url = self.url(path);
        let bytes = serde_json::to_vec(body).unwrap_or_default();
        self.send(what, &mut || {
            let mut r = match method {
                "PUT" => self.agent.put(&url),
                _ => self.agent.post(&url),
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

    /// PUTs `length` bytes of `file` from `offset`, with a Content-Length
    /// (the store refuses chunked uploads).
    fn put_range(
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

/// `/v1/packets/sha256:<hex>`
pub fn packet_path(digest: &Digest) -> String {
    format!("/v1/packets/{digest}")
}

/// `/v1/refs/<name>`, each `/`-separated segment percent-encoded (the
/// store's ref names only use unreserved characters, so this changes
/// nothing for a valid name and keeps an invalid one inside its route).
pub fn ref_path(name: &str) -> String {
    let segments: Vec<String> = name.split('/').map(percent_encode).collect();
    format!("/v1/refs/{}", segments.join("/"))
}

/// `/v1/uploads/<id>` (the id as the store issued it: 32 hex digits).
pub fn upload_path(id: &str) -> String {
    format!("/v1/uploads/{}", percent_encode(id))
}

fn percent_encode(segment: &str) -> String {
    let mut out = String::with_capacity(segment.len());
    for b in segment.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

fn unreachable_error(what: &str, base: &str, detail: &str) -> CliError {
    CliError::Remote {
        code: "remote_unreachable".into(),
        exit: EXIT_IO,
        path: None,
        offset: None,
        message: format!("{what} at {base} failed: {detail}"),
        advice: "check the --remote URL and the network, then run the command again (an interrupted push resumes where it stopped)".into(),
    }
}

/// The error for an answer the command cannot use. A `422` carries
/// packet-core's code, path and offset unchanged (exit 3); a `5xx` is exit
/// 4; any other refusal (401, 403, 404, 409, 413…) is exit 5.
fn status_error(what: &str, mut response: Response<Body>) -> CliError {
    let status = response.status().as_u16();
    let body: Option<Value> = response
        .body_mut()
        .with_config()
        .limit(1 << 20)
        .read_to_vec()
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok());
    let problem = body.as_ref().and_then(|b| b.get("error"));
    let text = |k: &str| problem.and_then(|p| p.get(k)).and_then(Value::as_str);
    let code = text("code").unwrap_or(match status {
        401 => "unauthorized",
        403 => "forbidden",
        404 => "not_found",
        409 => "conflict",
        _ => "remote_refused",
    });
    let exit = match status {
        422 => EXIT_VERIFY,
        500..=599 => EXIT_IO,
        _ => EXIT_REFUSED,
    };
    let message = match text("message") {
        Some(m) => format!("{what}: HTTP {status}: {m}"),
        None => format!("{what}: HTTP {status}"),
    };
    let advice = match status {
        401 | 403 => {
            "set PILLBOX_TOKEN (or pass --token-file) to the store's write token".to_owned()
        }
        _ => text("advice")
            .unwrap_or("see the store's answer above; the API is described in proto/openapi.yaml")
            .to_owned(),
    };
    CliError::Remote {
        code: code.to_owned(),
        exit,
        path: text("path").map(str::to_owned),
        offset: problem
            .and_then(|p| p.get("offset"))
            .and_then(Value::as_u64),
        message,
        advice,
    }
}

fn read_json(what: &str, response: &mut Response<Body>) -> Result<Value> {
    let bytes = response
        .body_mut()
        .with_config()
        .limit(4 << 20)
        .read_to_vec()
        .map_err(|e| unreachable_error(what, "the store", &e.to_string()))?;
    serde_json::from_slice(&bytes).map_err(|e| bad_answer(what, &format!("not JSON: {e}")))
}

fn bad_answer(what: &str, detail: &str) -> CliError {
    Refused::RemoteInvalidAnswer {
        what: what.to_owned(),
        detail: detail.to_owned(),
    }
    .into()
}

/// What `GET /v1` says about the store.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StoreInfo {
    /// Largest body a single `PUT /v1/packets/{digest}` takes.
    pub max_single_upload_bytes: u64,
    /// Part size the store picks when none is asked for.
    pub default_part_size: u64,
    /// Smallest part size it accepts.
    pub min_part_size: u64,
    /// Largest part size it accepts.
    pub max_part_size: u64,
}

impl StoreInfo {
    /// Parses the `GET /v1` body.
    pub fn parse(v: &Value) -> Option<StoreInfo> {
        let n = |p: &str| v.pointer(p).and_then(Value::as_u64);
        Some(StoreInfo {
            max_single_upload_bytes: n("/max_single_upload_bytes")?,
            default_part_size: n("/part_size/default")?,
            min_part_size: n("/part_size/min")?,
            max_part_size: n("/part_size/max")?,
        })
    }
}

fn store_info(remote: &Remote) -> Result<StoreInfo> {
    let what = "GET /v1";
    let mut r = remote.get(what, "/v1")?;
    if r.status().as_u16() != 200 {
        return Err(status_error(what, r));
    }
    let v = read_json(what, &mut r)?;
    StoreInfo::parse(&v).ok_or_else(|| bad_answer(what, "no max_single_upload_bytes or part_size"))
}

// ---- push ----------------------------------------------------------------

/// What `--expect-ref` says the ref holds before the push moves it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExpectRef {
    /// The ref must not exist yet.
    Absent,
    /// The ref must hold this digest.
    Digest(Digest),
}

impl std::str::FromStr for ExpectRef {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        if s == "absent" {
            return Ok(ExpectRef::Absent);
        }
        s.parse::<Digest>()
            .map(ExpectRef::Digest)
            .map_err(|e| format!("{s:?}: `absent` or a digest: {}", e.message()))
    }
}

/// A push to run.
pub struct PushRequest {
    /// The packet file (or `-`).
    pub packet: PathBuf,
    /// Move this ref to the packet afterwards.
    pub ref_name: Option<String>,
    /// What the ref must hold before it moves (compare-and-swap).
    pub expect_ref: Option<ExpectRef>,
    /// Part size to ask for in a multipart upload.
    pub part_size: Option<u64>,
    /// Labels to attach to the packet.
    pub labels: Vec<String>,
    /// Where interrupted uploads are recorded.
    pub state_dir: PathBuf,
}

/// How the parts went.
#[derive(Debug, Serialize)]
pub struct PartsReport {
    /// Parts in the upload.
    pub total: u64,
    /// Parts this run sent (fewer than `total` when resumed).
    pub sent: u64,
    /// Every part's size but the last's.
    pub part_size: u64,
}

/// The ref moved by a push.
#[derive(Debug, Serialize)]
pub struct RefReport {
    /// The ref's name.
    pub name: String,
    /// What it held before (`null`: it did not exist).
    pub previous: Option<String>,
    /// What it holds now: the pushed packet.
    pub digest: String,
    /// False when it already held the packet.
    pub moved: bool,
}

/// The `pillbox.checkpoint.push/1` object.
#[derive(Debug, Serialize)]
pub struct PushReport {
    /// `pillbox.checkpoint.push/1`.
    pub schema: &'static str,
    /// The packet's digest.
    pub digest: String,
    /// Its size in bytes.
    pub size: u64,
    /// The store's base URL.
    pub remote: String,
    /// True when this run stored the packet; false when the store had it.
    pub uploaded: bool,
    /// `single`, `multipart`, or `none` (already stored).
    pub mode: &'static str,
    /// Multipart only.
    pub parts: Option<PartsReport>,
    /// True when an interrupted multipart upload was continued.
    pub resumed: bool,
    /// Packet bytes sent by this run.
    pub bytes_sent: u64,
    /// Wall time of the upload (after local verification), in seconds.
    pub upload_seconds: f64,
    /// The ref moved, if `--ref` was given.
    #[serde(rename = "ref")]
    pub ref_moved: Option<RefReport>,
}

/// `push`.
pub fn push(remote: &Remote, request: &PushRequest, progress: &Progress) -> Result<PushReport> {
    let input = PacketInput::open(&request.packet)?;
    let read = packet_io::verify(&input, None, progress)?;
    let (digest, size) = (read.digest, read.size);
    // The bytes to send: the file itself, or the spooled copy of stdin.
    let (file, _spool) = upload_file(&input)?;
    let started = Instant::now();
    let mut report = PushReport {
        schema: "pillbox.checkpoint.push/1",
        digest: digest.to_string(),
        size,
        remote: remote.base().to_owned(),
        uploaded: false,
        mode: "none",
        parts: None,
        resumed: false,
        bytes_sent: 0,
        upload_seconds: 0.0,
        ref_moved: None,
    };
    if !is_stored(remote, &digest)? {
        let info = store_info(remote)?;
        progress.phase("upload", size);
        if size <= info.max_single_upload_bytes {
            report.uploaded = put_single(remote, &digest, &file, size, &request.labels, progress)?;
            report.mode = "single";
            report.bytes_sent = size;
        } else {
            let outcome = put_multipart(remote, request, &digest, &file, size, progress)?;
            report.uploaded = outcome.created;
            report.mode = "multipart";
            report.resumed = outcome.resumed;
            report.bytes_sent = outcome.bytes_sent;
            report.parts = Some(PartsReport {
                total: outcome.total,
                sent: outcome.sent,
                part_size: outcome.part_size,
            });
        }
    }
    report.upload_seconds = started.elapsed().as_secs_f64();
    progress.finish();
    if let Some(name) = &request.ref_name {
        report.ref_moved = Some(move_ref(remote, name, &digest, request.expect_ref)?);
    }
    Ok(report)
}

/// A path to read the packet's bytes from, and the spool it lives in when
/// the packet came from standard input.
fn upload_file(input: &PacketInput) -> Result<(PathBuf, Option<tempfile::TempPath>)> {
    match input {
        PacketInput::File(p) => Ok((p.clone(), None)),
        PacketInput::Spooled { .. } => {
            // Parts are re-read by path for retries; give the spool a name.
            let named = tempfile::Builder::new()
                .prefix(".pillbox-push-")
                .tempfile()
                .map_err(|e| CliError::io("create a spool file in", std::env::temp_dir(), e))?;
            let mut from = input.open_packet()?;
            let (mut f, path) = named.into_parts();
            io::copy(&mut from, &mut f).map_err(|e| CliError::io("write", &path, e))?;
            Ok((path.to_path_buf(), Some(path)))
        }
    }
}

fn is_stored(remote: &Remote, digest: &Digest) -> Result<bool> {
    let what = format!("HEAD {}", packet_path(digest));
    let r = remote.head(&what, &packet_path(digest))?;
    match r.status().as_u16() {
        200 => Ok(true),
        404 => Ok(false),
        _ => Err(status_error(&what, r)),
    }
}

fn label_query(labels: &[String]) -> String {
    let pairs: Vec<String> = labels
        .iter()
        .map(|l| format!("label={}", percent_encode(l)))
        .collect();
    if pairs.is_empty() {
        String::new()
    } else {
        format!("?{}", pairs.join("&"))
    }
}

/// One `PUT /v1/packets/{digest}`. True when this request stored it.
fn put_single(
    remote: &Remote,
    digest: &Digest,
    file: &Path,
    size: u64,
    labels: &[String],
    progress: &Progress,
) -> Result<bool> {
    let path = format!("{}{}", packet_path(digest), label_query(labels));
    let what = format!("PUT {}", packet_path(digest));
    let r = remote.put_range(&what, &path, file, 0, size, progress)?;
    match r.status().as_u16() {
        201 => Ok(true),
        200 => Ok(false),
        _ => Err(status_error(&what, r)),
    }
}

/// An interrupted multipart upload, recorded so the next push of the same
/// packet to the same store continues it
/// (`$XDG_STATE_HOME/pillbox/uploads/<hex>-<remote>.json`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct UploadState {
    /// The store's base URL.
    pub remote: String,
    /// The packet.
    pub digest: String,
    /// Its size.
    pub size: u64,
    /// The store's upload id.
    pub upload_id: String,
    /// The upload's part size.
    pub part_size: u64,
}

/// The folder for upload state: `$XDG_STATE_HOME/pillbox/uploads`, else
/// `$HOME/.local/state/pillbox/uploads`.
pub fn default_state_dir() -> Result<PathBuf> {
    let base = match std::env::var_os("XDG_STATE_HOME").filter(|v| !v.is_empty()) {
        Some(d) => PathBuf::from(d),
        None => match std::env::var_os("HOME").filter(|v| !v.is_empty()) {
            Some(h) => PathBuf::from(h).join(".local/state"),
            None => {
                return Err(CliError::Usage(
                    "neither XDG_STATE_HOME nor HOME is set: cannot record upload state".into(),
                ))
            }
        },
    };
    Ok(base.join("pillbox/uploads"))
}

/// The state file for `digest` pushed to `remote`.
pub fn state_file(dir: &Path, remote: &str, digest: &Digest) -> PathBuf {
    let remote_hash = Digest::of(remote.as_bytes()).hex().to_string();
    dir.join(format!("{}-{}.json", digest.hex(), &remote_hash[..16]))
}

impl UploadState {
    /// Reads a state file; a missing, unreadable or foreign one is `None`.
    pub fn load(path: &Path, remote: &str, digest: &Digest, size: u64) -> Option<UploadState> {
        let bytes = fs::read(path).ok()?;
        let state: UploadState = serde_json::from_slice(&bytes).ok()?;
        (state.remote == remote && state.digest == digest.to_string() && state.size == size)
            .then_some(state)
    }

    /// Writes the state file atomically (temporary file, then rename).
    pub fn save(&self, path: &Path) -> Result<()> {
        let dir = path.parent().unwrap_or(Path::new("."));
        fs::create_dir_all(dir).map_err(|e| CliError::io("create", dir, e))?;
        let mut tmp = tempfile::Builder::new()
            .prefix(".upload-")
            .tempfile_in(dir)
            .map_err(|e| CliError::io("create a file in", dir, e))?;
        let text = serde_json::to_vec_pretty(self).unwrap_or_default();
        let tmp_path = tmp.path().to_path_buf();
        tmp.write_all(&text)
            .map_err(|e| CliError::io("write", &tmp_path, e))?;
        tmp.persist(path)
            .map_err(|e| CliError::io("rename into", path, e.error))?;
        Ok(())
    }
}

/// An exclusive lock on a file, released when dropped (the process dying
/// releases it too): two pushes of the same packet on one machine take
/// turns instead of driving the same upload at once.
struct StateLock(File);

impl StateLock {
    fn acquire(path: &Path) -> Result<StateLock> {
        let dir = path.parent().unwrap_or(Path::new("."));
        fs::create_dir_all(dir).map_err(|e| CliError::io("create", dir, e))?;
        let f = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(path)
            .map_err(|e| CliError::io("open", path, e))?;
        rustix::fs::flock(&f, rustix::fs::FlockOperation::LockExclusive)
            .map_err(|e| CliError::io("lock", path, e.into()))?;
        Ok(StateLock(f))
    }
}

impl Drop for StateLock {
    fn drop(&mut self) {
        let _ = rustix::fs::flock(&self.0, rustix::fs::FlockOperation::Unlock);
    }
}

struct MultipartOutcome {
    created: bool,
    resumed: bool,
    total: u64,
    sent: u64,
    part_size: u64,
    bytes_sent: u64,
}

/// What `GET /v1/uploads/{id}` (or the creating `POST`) says.
#[derive(Debug)]
struct UploadView {
    id: String,
    part_size: u64,
    parts: u64,
    missing: Vec<u64>,
}

impl UploadView {
    fn parse(v: &Value) -> Option<UploadView> {
        Some(UploadView {
            id: v.get("upload_id")?.as_str()?.to_owned(),
            part_size: v.get("part_size")?.as_u64()?,
            parts: v.get("parts")?.as_u64()?,
            missing: v
                .get("missing")?
                .as_array()?
                .iter()
                .filter_map(Value::as_u64)
                .collect(),
        })
    }
}

fn get_upload(remote: &Remote, id: &str) -> Result<Option<UploadView>> {
    let what = format!("GET {}", upload_path(id));
    let mut r = remote.get(&what, &upload_path(id))?;
    match r.status().as_u16() {
        200 => {
            let v = read_json(&what, &mut r)?;
            UploadView::parse(&v)
                .map(Some)
                .ok_or_else(|| bad_answer(&what, "no upload_id, part_size, parts or missing"))
        }
        404 => Ok(None),
        _ => Err(status_error(&what, r)),
    }
}

fn put_multipart(
    remote: &Remote,
    request: &PushRequest,
    digest: &Digest,
    file: &Path,
    size: u64,
    progress: &Progress,
) -> Result<MultipartOutcome> {
    let state_path = state_file(&request.state_dir, remote.base(), digest);
    let lock_path = state_path.with_extension("lock");
    let lock = StateLock::acquire(&lock_path)?;
    let result = drive_multipart(remote, request, digest, file, size, &state_path, progress);
    if result.is_ok() {
        // Done: a push waiting on this lock finds the packet stored.
        let _ = fs::remove_file(&lock_path);
    }
    drop(lock);
    result
}

fn drive_multipart(
    remote: &Remote,
    request: &PushRequest,
    digest: &Digest,
    file: &Path,
    size: u64,
    state_path: &Path,
    progress: &Progress,
) -> Result<MultipartOutcome> {
    let mut outcome = MultipartOutcome {
        created: false,
        resumed: false,
        total: 0,
        sent: 0,
        part_size: 0,
        bytes_sent: 0,
    };
    // A push that waited for the lock may find the packet stored meanwhile.
    if is_stored(remote, digest)? {
        return Ok(outcome);
    }
    let saved = UploadState::load(state_path, remote.base(), digest, size);
    let mut view = match &saved {
        Some(s) => get_upload(remote, &s.upload_id)?,
        None => None,
    };
    outcome.resumed = view.is_some();
    if view.is_none() {
        let what = "POST /v1/uploads";
        let mut body = serde_json::json!({ "digest": digest.to_string(), "size": size, "labels": request.labels });
        if let Some(p) = request.part_size {
            body["part_size"] = p.into();
        }
        let mut r = remote.send_json(what, "POST", "/v1/uploads", &body, &[])?;
        match r.status().as_u16() {
            201 => {
                let v = read_json(what, &mut r)?;
                let created = UploadView::parse(&v)
                    .ok_or_else(|| bad_answer(what, "no upload_id, part_size, parts or missing"))?;
                UploadState {
                    remote: remote.base().to_owned(),
                    digest: digest.to_string(),
                    size,
                    upload_id: created.id.clone(),
                    part_size: created.part_size,
                }
                .save(state_path)?;
                view = Some(created);
            }
            // The store has the packet already (another client finished first).
            200 => {
                let _ = fs::remove_file(state_path);
                return Ok(outcome);
            }
            _ => return Err(status_error(what, r)),
        }
    }
    let Some(mut view) = view else {
        return Err(bad_answer("POST /v1/uploads", "no upload"));
    };
    outcome.total = view.parts;
    outcome.part_size = view.part_size;
    progress.set_position(size.saturating_sub(missing_bytes(&view, size)));
    // Sends the missing parts, completes; a complete that finds parts
    // missing (a part lost by the store) sends those and completes again.
    for _round in 0..3 {
        for &number in &view.missing {
            let offset = (number - 1) * view.part_size;
            let length = view.part_size.min(size.saturating_sub(offset));
            let path = format!("{}/parts/{number}", upload_path(&view.id));
            let what = format!("PUT {path}");
            let r = remote.put_range(&what, &path, file, offset, length, progress)?;
            if r.status().as_u16() != 200 {
                return Err(status_error(&what, r));
            }
            outcome.sent += 1;
            outcome.bytes_sent += length;
        }
        let path = format!("{}/complete", upload_path(&view.id));
        let what = format!("POST {path}");
        let r = remote.send_json(&what, "POST", &path, &Value::Null, &[])?;
        match r.status().as_u16() {
            201 | 200 => {
                outcome.created = r.status().as_u16() == 201;
                let _ = fs::remove_file(state_path);
                return Ok(outcome);
            }
            409 => match get_upload(remote, &view.id)? {
                Some(v) if !v.missing.is_empty() => view = v,
                _ => return Err(status_error(&what, r)),
            },
            // Refused by packet-core: the store dropped the upload.
            422 => {
                let _ = fs::remove_file(state_path);
                return Err(status_error(&what, r));
            }
            // A retried complete whose first attempt succeeded finds the
            // upload gone: the packet is there.
            404 if is_stored(remote, digest)? => {
                let _ = fs::remove_file(state_path);
                return Ok(outcome);
            }
            _ => return Err(status_error(&what, r)),
        }
    }
    Err(Refused::UploadIncomplete {
        upload: view.id.clone(),
    }
    .into())
}

fn missing_bytes(view: &UploadView, size: u64) -> u64 {
    view.missing
        .iter()
        .map(|&n| {
            let offset = (n - 1).saturating_mul(view.part_size);
            view.part_size.min(size.saturating_sub(offset))
        })
        .sum()
}

/// Moves `name` to `digest` with compare-and-swap: `If-Match` the digest
/// it is expected to hold, or `If-None-Match: *` to create it.
fn move_ref(
    remote: &Remote,
    name: &str,
    digest: &Digest,
    expect: Option<ExpectRef>,
) -> Result<RefReport> {
    let path = ref_path(name);
    let expected = match expect {
        Some(e) => e,
        None => {
            let what = format!("GET {path}");
            let mut r = remote.get(&what, &path)?;
            match r.status().as_u16() {
                404 => ExpectRef::Absent,
                200 => {
                    let v = read_json(&what, &mut r)?;
                    let current = v
                        .get("digest")
                        .and_then(Value::as_str)
                        .and_then(|d| d.parse::<Digest>().ok())
                        .ok_or_else(|| bad_answer(&what, "no digest"))?;
                    if current == *digest {
                        return Ok(RefReport {
                            name: name.to_owned(),
                            previous: Some(current.to_string()),
                            digest: digest.to_string(),
                            moved: false,
                        });
                    }
                    ExpectRef::Digest(current)
                }
                _ => return Err(status_error(&what, r)),
            }
        }
    };
    let header = match expected {
        ExpectRef::Absent => ("if-none-match", "*".to_owned()),
        ExpectRef::Digest(d) => ("if-match", format!("\"{d}\"")),
    };
    let what = format!("PUT {path}");
    let body = serde_json::json!({ "digest": digest.to_string() });
    let r = remote.send_json(&what, "PUT", &path, &body, &[header])?;
    match r.status().as_u16() {
        200 | 201 => Ok(RefReport {
            name: name.to_owned(),
            previous: match expected {
                ExpectRef::Absent => None,
                ExpectRef::Digest(d) => Some(d.to_string()),
            },
            digest: digest.to_string(),
            moved: match expected {
                ExpectRef::Absent => true,
                ExpectRef::Digest(d) => d != *digest,
            },
        }),
        _ => Err(status_error(&what, r)),
    }
}

// ---- pull ----------------------------------------------------------------

/// What to pull: a digest, or a ref naming one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PullTarget {
    /// `sha256:<hex>`
    Digest(Digest),
    /// A ref name, resolved with `GET /v1/refs/{name}`.
    Ref(String),
}

impl PullTarget {
    /// `sha256:…` is a digest (and must be a valid one); anything else a ref.
    pub fn parse(s: &str) -> Result<PullTarget> {
        if s.starts_with("sha256:") {
            s.parse::<Digest>()
                .map(PullTarget::Digest)
                .map_err(|e| CliError::Usage(format!("{s:?}: {}", e.message())))
        } else if s.is_empty() {
            Err(CliError::Usage("name a digest or a ref to pull".into()))
        } else {
            Ok(PullTarget::Ref(s.to_owned()))
        }
    }
}

/// The `pillbox.checkpoint.pull/1` object.
#[derive(Debug, Serialize)]
pub struct PullReport {
    /// `pillbox.checkpoint.pull/1`.
    pub schema: &'static str,
    /// The packet's digest (verified).
    pub digest: String,
    /// Its size.
    pub size: u64,
    /// The store's base URL.
    pub remote: String,
    /// The ref it was pulled by, if any.
    #[serde(rename = "ref")]
    pub ref_name: Option<String>,
    /// Where it was written (absolute), or `-`.
    pub output: String,
    /// Members after `packet.json`.
    pub members: u64,
    /// Manifest totals.
    pub totals: Totals,
    /// Harness state carried.
    pub harness: Option<HarnessReport>,
    /// Times the download continued after a dropped connection.
    pub resumed: u32,
    /// Wall time of the download and verification, in seconds.
    pub download_seconds: f64,
}

/// `pull`. With `output` `-` the packet goes to stdout once verified.
pub fn pull(
    remote: &Remote,
    target: &PullTarget,
    output: &Path,
    progress: &Progress,
) -> Result<PullReport> {
    let (digest, ref_name) = match target {
        PullTarget::Digest(d) => (*d, None),
        PullTarget::Ref(name) => (resolve_ref(remote, name)?, Some(name.clone())),
    };
    let to_stdout = output == Path::new("-");
    let mut tmp = if to_stdout {
        let dir = std::env::temp_dir();
        tempfile::Builder::new()
            .prefix(".pillbox-pull-")
            .tempfile()
            .map_err(|e| CliError::io("create a spool file in", dir, e))?
    } else {
        let dir = match output.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        tempfile::Builder::new()
            .prefix(".pillbox-pull-")
            .tempfile_in(&dir)
            .map_err(|e| CliError::io("create a file in", dir, e))?
    };
    let started = Instant::now();
    let download = Download::start(remote, &digest, tmp.as_file())?;
    progress.phase("download", download.size);
    let options = ReaderOptions {
        expected_digest: Some(digest),
        ..ReaderOptions::default()
    };
    // The temporary file is removed when `tmp` drops on any error below.
    let read = packet_io::read_packet(&download, options, progress, &mut |_| Ok(()))?;
    let resumed = download.resumed.get();
    drop(download);
    progress.finish();
    let tmp_path = tmp.path().to_path_buf();
    let file = tmp.as_file_mut();
    file.flush()
        .and_then(|()| file.sync_all())
        .map_err(|e| CliError::io("write", &tmp_path, e))?;
    let output_label = if to_stdout {
        let mut f = tmp
            .reopen()
            .map_err(|e| CliError::io("reopen", &tmp_path, e))?;
        let mut out = io::stdout().lock();
        let mut buf = vec![0u8; CHUNK];
        loop {
            let n = f
                .read(&mut buf)
                .map_err(|e| CliError::io("read", &tmp_path, e))?;
            if n == 0 {
                break;
            }
            out.write_all(&buf[..n])
                .map_err(|e| CliError::io("write", "standard output", e))?;
        }
        out.flush()
            .map_err(|e| CliError::io("write", "standard output", e))?;
        "-".to_owned()
    } else {
        use std::os::unix::fs::PermissionsExt;
        fs::set_permissions(tmp.path(), fs::Permissions::from_mode(0o644))
            .map_err(|e| CliError::io("chmod", &tmp_path, e))?;
        tmp.persist(output)
            .map_err(|e| CliError::io("rename into", output, e.error))?;
        fs::canonicalize(output)
            .unwrap_or_else(|_| output.to_path_buf())
            .display()
            .to_string()
    };
    Ok(PullReport {
        schema: "pillbox.checkpoint.pull/1",
        digest: digest.to_string(),
        size: read.size,
        remote: remote.base().to_owned(),
        ref_name,
        output: output_label,
        members: read.manifest.totals.members,
        totals: read.manifest.totals,
        harness: read.manifest.harness.as_ref().map(HarnessReport::of),
        resumed,
        download_seconds: started.elapsed().as_secs_f64(),
    })
}

fn resolve_ref(remote: &Remote, name: &str) -> Result<Digest> {
    let path = ref_path(name);
    let what = format!("GET {path}");
    let mut r = remote.get(&what, &path)?;
    if r.status().as_u16() != 200 {
        return Err(status_error(&what, r));
    }
    let v = read_json(&what, &mut r)?;
    v.get("digest")
        .and_then(Value::as_str)
        .and_then(|d| d.parse::<Digest>().ok())
        .ok_or_else(|| bad_answer(&what, "no digest"))
}

/// A packet being downloaded: the bytes read through it are also written
/// to the temporary file; a connection that drops is picked up again with
/// `Range: bytes=<received>-` (bounded by the retry policy).
struct Download<'a> {
    remote: &'a Remote,
    path: String,
    file: &'a File,
    size: u64,
    body: std::cell::RefCell<Option<ureq::BodyReader<'static>>>,
    received: std::cell::Cell<u64>,
    resumed: std::cell::Cell<u32>,
    opened: std::cell::Cell<bool>,
}

impl<'a> Download<'a> {
    fn start(remote: &'a Remote, digest: &Digest, file: &'a File) -> Result<Download<'a>> {
        let path = packet_path(digest);
        let what = format!("GET {path}");
        let r = remote.get(&what, &path)?;
        if r.status().as_u16() != 200 {
            return Err(status_error(&what, r));
        }
        let size = r
            .headers()
            .get("content-length")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0);
        if size > Limits::FORMAT.max_packet_bytes {
            return Err(CliError::Packet(packet_core::Error::new(
                packet_core::ErrorCode::LimitSize,
                format!(
                    "the store sends {size} bytes, more than the format's {} byte limit",
                    Limits::FORMAT.max_packet_bytes
                ),
            )));
        }
        Ok(Download {
            remote,
            path,
            file,
            size,
            body: std::cell::RefCell::new(Some(r.into_body().into_reader())),
            received: std::cell::Cell::new(0),
            resumed: std::cell::Cell::new(0),
            opened: std::cell::Cell::new(false),
        })
    }

    /// Asks for the rest of the packet after a dropped connection.
    fn reconnect(&self) -> io::Result<ureq::BodyReader<'static>> {
        let from = self.received.get();
        let url = self.remote.url(&self.path);
        let mut r = self
            .remote
            .agent
            .get(&url)
            .header("range", format!("bytes={from}-"));
        if let Some(a) = self.remote.auth() {
            r = r.header("authorization", a);
        }
        let response = r.call().map_err(io::Error::other)?;
        let expected = format!("bytes {from}-");
        let range_ok = response
            .headers()
            .get("content-range")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with(&expected));
        if response.status().as_u16() != 206 || !range_ok {
            return Err(io::Error::other(format!(
                "the store did not continue the download at byte {from} (HTTP {})",
                response.status().as_u16()
            )));
        }
        Ok(response.into_body().into_reader())
    }
}

impl Read for &Download<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let mut attempt = 1;
        loop {
            let result = match self.body.borrow_mut().as_mut() {
                Some(body) => body.read(buf),
                None => Err(io::Error::other("the connection was lost")),
            };
            match result {
                Ok(n) => {
                    let mut file = self.file;
                    file.write_all(&buf[..n])?;
                    self.received.set(self.received.get() + n as u64);
                    return Ok(n);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    let Some(delay) = self.remote.retry.delay_after(attempt) else {
                        return Err(e);
                    };
                    std::thread::sleep(delay);
                    attempt += 1;
                    *self.body.borrow_mut() = self.reconnect().ok();
                    if self.body.borrow().is_some() {
                        self.resumed.set(self.resumed.get() + 1);
                    }
                }
            }
        }
    }
}

impl PacketSource for Download<'_> {
    fn open_packet(&self) -> Result<Box<dyn Read + '_>> {
        if self.opened.replace(true) {
            return Err(Refused::DownloadReadTwice {}.into());
        }
        Ok(Box::new(self))
    }

    fn label(&self) -> String {
        format!("{}{}", self.remote.base(), self.path)
    }

    fn size_hint(&self) -> Option<u64> {
        Some(self.size)
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

    fn digest() -> Digest {
        Digest::of(b"packet")
    }

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
    fn api_paths() {
        let d = digest();
        assert_eq!(packet_path(&d), format!("/v1/packets/sha256:{}", d.hex()));
        assert_eq!(
            ref_path("sessions/demo/latest"),
            "/v1/refs/sessions/demo/latest"
        );
        assert_eq!(ref_path("a b/c?d"), "/v1/refs/a%20b/c%3Fd");
        assert_eq!(upload_path("0123abcd"), "/v1/uploads/0123abcd");
        assert_eq!(label_query(&[]), "");
        assert_eq!(
            label_query(&["host=ci-7".into(), "team:x".into()]),
            "?label=host%3Dci-7&label=team%3Ax"
        );
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
    fn upload_state_round_trips_and_ignores_foreign_files() {
        let dir = tempfile::tempdir().unwrap();
        let d = digest();
        let path = state_file(dir.path(), "http://a", &d);
        assert_ne!(path, state_file(dir.path(), "http://b", &d));
        assert!(path
            .file_name()
            .unwrap()
            .to_str()
            .unwrap()
            .starts_with(&d.hex().to_string()));
        assert_eq!(UploadState::load(&path, "http://a", &d, 10), None);
        let state = UploadState {
            remote: "http://a".into(),
            digest: d.to_string(),
            size: 10,
            upload_id: "0123456789abcdef0123456789abcdef".into(),
            part_size: 5 << 20,
        };
        state.save(&path).unwrap();
        assert_eq!(UploadState::load(&path, "http://a", &d, 10), Some(state));
        assert_eq!(UploadState::load(&path, "http://b", &d, 10), None);
        assert_eq!(UploadState::load(&path, "http://a", &d, 11), None);
        fs::write(&path, "not json").unwrap();
        assert_eq!(UploadState::load(&path, "http://a", &d, 10), None);
    }

    #[test]
    fn pull_targets_and_ref_expectations() {
        let d = digest();
        assert_eq!(
            PullTarget::parse(&d.to_string()).unwrap(),
            PullTarget::Digest(d)
        );
        assert_eq!(
            PullTarget::parse("sessions/x/latest").unwrap(),
            PullTarget::Ref("sessions/x/latest".into())
        );
        assert_eq!(PullTarget::parse("sha256:abc").unwrap_err().code(), "usage");
        assert_eq!("absent".parse::<ExpectRef>(), Ok(ExpectRef::Absent));
        assert_eq!(d.to_string().parse::<ExpectRef>(), Ok(ExpectRef::Digest(d)));
        assert!("sha256:xyz".parse::<ExpectRef>().is_err());
    }

    #[test]
    fn the_store_settings_are_read_from_get_v1() {
        let v: Value = serde_json::from_str(
            r#"{"max_single_upload_bytes":8388608,"part_size":{"default":5242880,"min":5242880,"max":8388608}}"#,
        )
        .unwrap();
        assert_eq!(
            StoreInfo::parse(&v),
            Some(StoreInfo {
                max_single_upload_bytes: 8 << 20,
                default_part_size: 5 << 20,
                min_part_size: 5 << 20,
                max_part_size: 8 << 20
            })
        );
        assert_eq!(StoreInfo::parse(&serde_json::json!({})), None);
    }

    #[test]
    fn missing_bytes_count_the_short_last_part() {
        let view = UploadView {
            id: "x".into(),
            part_size: 5,
            parts: 3,
            missing: vec![1, 3],
        };
        assert_eq!(missing_bytes(&view, 12), 5 + 2);
    }

    #[test]
    fn the_token_never_shows_in_debug_output() {
        let t = Token("s3cret".into());
        assert!(!format!("{t:?}").contains("s3cret"));
    }
}
