//! A stand-in packet store for the CLI's delta transfer tests, until the
//! Worker serves the same routes: the delta push (`/v1/pushes`, recipes,
//! parts, `complete`), the delta pull (`/v1/packets/{digest}/manifest`,
//! `/recipes`, `/chunks`), whole downloads, refs and `GET /v1`, as
//! docs/transfer.md describes them, in memory.
//!
//! It is faithful where a client could tell: presence comes from the named
//! bases only; every part is decoded and every frame checked with the real
//! codec (`pillbox-wire`); `complete` rebuilds the packet with packet-core's
//! writer and refuses a wrong digest; the answers are the `pillbox-wire`
//! types. It is not a second store: no persistence, no limits beyond the
//! format's.
//!
//!     cargo run -p pillbox --example mock_store -- [--port N] [--token T] [--no-delta] [--no-gzip]
//!
//! Prints `listening on http://127.0.0.1:<port>` once ready. Test hooks:
//! `GET /__mock/log` (every request: method, path, body bytes, status) and
//! `POST /__mock/fail?path=<part>&times=N` (the next N requests whose
//! path contains `<part>` lose their connection before an answer).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::io::{Read, Write};
use std::sync::{Arc, Mutex};

use packet_core::{Digest, Limits, Manifest, Step, Writer};
use pillbox_wire::chunks::{self, BatchError, BatchLimits, Decoder, Event, Frame};
use pillbox_wire::{
    ChunkRequest, Chunking, MissingChunks, PacketFacts, PartLimits, PartReceived, PushPart,
    PushSession, Recipe, RecipeChunk, Recipes, Stored,
};
use serde::Serialize;
use tiny_http::{Header, Method, Request, Response, Server};

/// A stored packet: its bytes (served whole), manifest and recipes.
struct Packet {
    bytes: Vec<u8>,
    manifest_json: Vec<u8>,
    manifest: Manifest,
    /// Body hex → its chunks, for the multi-chunk bodies.
    recipes: HashMap<String, Vec<(String, u32)>>,
    labels: Vec<String>,
}

impl Packet {
    /// The chunks (and single-chunk bodies) this packet is made of.
    fn chunk_names(&self) -> HashSet<String> {
        let mut out = HashSet::new();
        for m in &self.manifest.members {
            let Some(d) = m.sha256.filter(|_| m.size > 0) else {
                continue;
            };
            let hex = d.hex().to_string();
            match self.recipes.get(&hex) {
                Some(r) => out.extend(r.iter().map(|(c, _)| c.clone())),
                None => {
                    out.insert(hex);
                }
            }
        }
        out
    }
}

struct Push {
    /// The distinct bodies of the manifest: (hex, size), in order.
    bodies: Vec<(String, u64)>,
    /// The small ones (a chunk each).
    small: HashSet<String>,
    /// Every chunk of the recipes received.
    recipe_chunks: HashSet<String>,
    digest: Digest,
    size: u64,
    manifest: Manifest,
    manifest_json: Vec<u8>,
    bases_used: Vec<String>,
    labels: Vec<String>,
    /// Chunks and single-chunk bodies present: from the bases, then uploaded.
    present: HashSet<String>,
    /// Large bodies of the bases (present whole), with their recipes.
    base_recipes: HashMap<String, Vec<(String, u32)>>,
    /// Recipes received for this push's missing large bodies.
    recipes: HashMap<String, Vec<(String, u32)>>,
    parts: BTreeMap<u32, PushPart>,
}

/// The distinct bodies of a manifest: (hex, size), in order.
fn distinct_bodies(manifest: &Manifest) -> Vec<(String, u64)> {
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    for m in &manifest.members {
        if let Some(d) = m.sha256.filter(|_| m.size > 0) {
            let hex = d.hex().to_string();
            if seen.insert(hex.clone()) {
                out.push((hex, m.size));
            }
        }
    }
    out
}

impl Push {
    fn bodies(&self) -> Vec<(String, u64)> {
        self.bodies.clone()
    }

    /// Whether every byte of a body is here.
    fn body_present(&self, hex: &str, size: u64) -> bool {
        if size <= THRESHOLD {
            return self.present.contains(hex);
        }
        if self.base_recipes.contains_key(hex) {
            return true;
        }
        match self.recipes.get(hex) {
            Some(r) => r.iter().all(|(c, _)| self.present.contains(c)),
            None => false,
        }
    }

    fn missing(&self) -> (Vec<String>, u64) {
        let mut bytes = 0;
        let list = self
            .bodies()
            .into_iter()
            .filter(|(h, s)| !self.body_present(h, *s))
            .map(|(h, s)| {
                bytes += s;
                h
            })
            .collect();
        (list, bytes)
    }

    fn missing_chunks(&self) -> (Vec<String>, u64) {
        let mut seen = HashSet::new();
        let mut bytes = 0;
        let mut out = Vec::new();
        for r in self.recipes.values() {
            for (c, s) in r {
                if !self.present.contains(c) && seen.insert(c.clone()) {
                    bytes += u64::from(*s);
                    out.push(c.clone());
                }
            }
        }
        (out, bytes)
    }

    /// Whether a frame named `hex` is one this push needs.
    fn needs(&self, hex: &str) -> bool {
        if self.present.contains(hex) {
            // Sent again: harmless, as a retried part is.
            return true;
        }
        self.small.contains(hex) || self.recipe_chunks.contains(hex)
    }
}

const THRESHOLD: u64 = 256 << 10;

#[derive(Default)]
struct State {
    packets: HashMap<String, Packet>,
    chunks: HashMap<String, Arc<Vec<u8>>>,
    refs: BTreeMap<String, String>,
    pushes: HashMap<String, Push>,
    next_id: u64,
    log: Vec<LogEntry>,
    /// Path prefix → connections still to drop.
    failures: Vec<(String, u32)>,
}

#[derive(Clone, Serialize)]
struct LogEntry {
    method: String,
    path: String,
    body_bytes: u64,
    content_encoding: Option<String>,
    status: u16,
}

struct Config {
    token: Option<String>,
    delta: bool,
    gzip: bool,
}

type Answer = (u16, Vec<u8>, Vec<(&'static str, String)>);

fn json<T: Serialize>(status: u16, value: &T) -> Answer {
    (
        status,
        serde_json::to_vec(value).unwrap(),
        vec![("content-type", "application/json".into())],
    )
}

fn problem(status: u16, code: &str, message: &str) -> Answer {
    json(
        status,
        &serde_json::json!({"error": {"code": code, "path": null, "offset": null, "message": message, "advice": "see docs/transfer.md"}}),
    )
}

fn main() {
    let mut port = 0u16;
    let mut config = Config {
        token: None,
        delta: true,
        gzip: true,
    };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--port" => port = args.next().and_then(|p| p.parse().ok()).expect("--port N"),
            "--token" => config.token = args.next(),
            "--no-delta" => config.delta = false,
            "--no-gzip" => config.gzip = false,
            other => panic!("unknown argument {other}"),
        }
    }
    let server = Server::http(("127.0.0.1", port)).expect("listen");
    let addr = server.server_addr().to_ip().expect("an IP address");
    println!("listening on http://{addr}");
    std::io::stdout().flush().ok();
    let state = Arc::new(Mutex::new(State::default()));
    let config = Arc::new(config);
    for request in server.incoming_requests() {
        let state = Arc::clone(&state);
        let config = Arc::clone(&config);
        std::thread::spawn(move || serve(request, &state, &config));
    }
}

fn header<'a>(req: &'a Request, name: &'static str) -> Option<&'a str> {
    req.headers()
        .iter()
        .find(|h| h.field.equiv(name))
        .map(|h| h.value.as_str())
}

fn serve(mut req: Request, state: &Mutex<State>, config: &Config) {
    let method = req.method().clone();
    let url = req.url().to_owned();
    let (path, query) = url.split_once('?').unwrap_or((&url, ""));
    let path = path.to_owned();
    let query = query.to_owned();
    let encoding = header(&req, "content-encoding").map(str::to_owned);
    let accepts_gzip =
        config.gzip && header(&req, "accept-encoding").is_some_and(|v| v.contains("gzip"));
    let auth_ok = match &config.token {
        None => true,
        Some(t) => header(&req, "authorization") == Some(&format!("Bearer {t}")),
    };
    let mut body = Vec::new();
    let _ = req.as_reader().read_to_end(&mut body);
    let drop_it = {
        let mut s = state.lock().unwrap();
        let hit = s
            .failures
            .iter_mut()
            .find(|(p, n)| *n > 0 && path.contains(p.as_str()));
        match hit {
            Some((_, n)) => {
                *n -= 1;
                true
            }
            None => false,
        }
    };
    if drop_it {
        // The connection is lost before an answer: the client must retry.
        let mut w = req.into_writer();
        let _ = w.flush();
        return;
    }
    let headers_of = |name: &'static str| {
        req.headers()
            .iter()
            .find(|h| h.field.equiv(name))
            .map(|h| h.value.as_str().to_owned())
    };
    let if_match = headers_of("if-match");
    let if_none_match = headers_of("if-none-match");
    let range = headers_of("range");
    let answer = route(
        &method,
        &path,
        &query,
        &body,
        encoding.as_deref(),
        auth_ok,
        if_match.as_deref(),
        if_none_match.as_deref(),
        range.as_deref(),
        state,
        config,
    );
    let (status, mut bytes, mut headers) = answer;
    let gzippable = headers.iter().any(|(k, v)| {
        *k == "content-type" && (v.contains("json") || v.contains("x-pillbox-chunks"))
    });
    if accepts_gzip && gzippable && bytes.len() > 1024 {
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        enc.write_all(&bytes).unwrap();
        bytes = enc.finish().unwrap();
        headers.push(("content-encoding", "gzip".into()));
    }
    state.lock().unwrap().log.push(LogEntry {
        method: method.to_string(),
        path: if query.is_empty() {
            path.clone()
        } else {
            format!("{path}?{query}")
        },
        body_bytes: body.len() as u64,
        content_encoding: encoding,
        status,
    });
    let is_head = method == Method::Head;
    let len = bytes.len();
    let mut response =
        Response::from_data(if is_head { Vec::new() } else { bytes }).with_status_code(status);
    for (k, v) in headers {
        response.add_header(Header::from_bytes(k.as_bytes(), v.as_bytes()).unwrap());
    }
    if is_head {
        response.add_header(Header::from_bytes("content-length", len.to_string()).unwrap());
    }
    let _ = req.respond(response);
}

fn decode_body(body: &[u8], encoding: Option<&str>) -> Result<Vec<u8>, Answer> {
    match encoding {
        None | Some("identity") => Ok(body.to_vec()),
        Some("zstd") => {
            let mut d = zstd::stream::read::Decoder::new(body)
                .map_err(|e| problem(400, "body_invalid", &e.to_string()))?;
            // What a `zstd` content coding may use (RFC 9659).
            d.window_log_max(23)
                .map_err(|e| problem(400, "body_invalid", &e.to_string()))?;
            let mut out = Vec::new();
            d.read_to_end(&mut out)
                .map_err(|e| problem(400, "body_invalid", &format!("zstd: {e}")))?;
            Ok(out)
        }
        Some("gzip") => {
            let mut out = Vec::new();
            flate2::read::GzDecoder::new(body)
                .read_to_end(&mut out)
                .map_err(|e| problem(400, "body_invalid", &format!("gzip: {e}")))?;
            Ok(out)
        }
        Some(other) => Err(problem(
            415,
            "encoding_unsupported",
            &format!("content-encoding {other}"),
        )),
    }
}

fn query_values<'a>(query: &'a str, key: &str) -> Vec<&'a str> {
    query
        .split('&')
        .filter_map(|kv| kv.split_once('='))
        .filter(|(k, _)| *k == key)
        .map(|(_, v)| v)
        .collect()
}

fn unescape(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' && i + 2 < b.len() {
            if let Ok(v) =
                u8::from_str_radix(std::str::from_utf8(&b[i + 1..i + 3]).unwrap_or(""), 16)
            {
                out.push(v);
                i += 3;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn chunking() -> Chunking {
    Chunking {
        algorithm: "fastcdc-v2020".into(),
        threshold: THRESHOLD,
        min_size: 64 << 10,
        avg_size: 256 << 10,
        max_size: 1 << 20,
    }
}

fn stored(p: &Packet, digest: &str, created: bool) -> Stored {
    Stored {
        facts: PacketFacts {
            digest: digest.to_owned(),
            size: p.bytes.len() as u64,
            members: p.manifest.totals.members,
            file_bytes: p.manifest.totals.bytes,
            harness: None,
            labels: p.labels.clone(),
        },
        created,
        created_at: "2026-12-01T00:00:00Z".into(),
    }
}

fn session(id: &str, p: &Push) -> PushSession {
    let (missing, missing_bytes) = p.missing();
    let (missing_chunks, _) = p.missing_chunks();
    PushSession {
        push_id: id.to_owned(),
        location: format!("/v1/pushes/{id}"),
        digest: p.digest.to_string(),
        size: p.size,
        bases_used: p.bases_used.clone(),
        missing,
        missing_bytes,
        missing_chunks,
        received: p.parts.values().cloned().collect(),
        part_limits: PartLimits {
            max_bytes: 32 << 20,
            max_frames: chunks::MAX_FRAMES,
        },
        chunking: chunking(),
    }
}

#[allow(clippy::too_many_arguments)]
fn route(
    method: &Method,
    path: &str,
    query: &str,
    body: &[u8],
    encoding: Option<&str>,
    auth_ok: bool,
    if_match: Option<&str>,
    if_none_match: Option<&str>,
    range: Option<&str>,
    state: &Mutex<State>,
    config: &Config,
) -> Answer {
    let segments: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    // Fetching chunks is a read, whatever its method.
    let write = !matches!(method, Method::Get | Method::Head) && !path.ends_with("/chunks");
    if write && !auth_ok && !path.starts_with("/__mock") {
        return problem(401, "unauthorized", "a write needs the token");
    }
    match (method, segments.as_slice()) {
        (Method::Get, ["v1"]) => {
            let mut info = serde_json::json!({
                "service": "pillbox", "api": 1, "format": "pillbox.session-packet/1",
                "max_packet_bytes": 1u64 << 30, "max_members": 250000,
                "max_single_upload_bytes": 64u64 << 20,
                "part_size": {"default": 32u64 << 20, "min": 5u64 << 20, "max": 64u64 << 20},
                "read_access": "public"
            });
            if config.delta {
                info["transfer"] = serde_json::json!(["whole", "delta"]);
            }
            json(200, &info)
        }
        (Method::Get, ["__mock", "log"]) => json(200, &state.lock().unwrap().log),
        (Method::Post, ["__mock", "fail"]) => {
            let prefix = unescape(query_values(query, "path").first().copied().unwrap_or(""));
            let times = query_values(query, "times")
                .first()
                .and_then(|t| t.parse().ok())
                .unwrap_or(1);
            state.lock().unwrap().failures.push((prefix, times));
            (204, Vec::new(), vec![])
        }
        (Method::Post, ["v1", "pushes"]) if config.delta => {
            create_push(query, body, encoding, state)
        }
        (_, ["v1", "pushes", id, rest @ ..]) if config.delta => {
            push_route(method, id, rest, body, encoding, state)
        }
        (Method::Get | Method::Head, ["v1", "packets", d]) => {
            let s = state.lock().unwrap();
            let Some(p) = s.packets.get(*d) else {
                return problem(404, "not_found", "no such packet");
            };
            // `bytes=N-` or `bytes=N-M`.
            let span = range.and_then(|r| r.strip_prefix("bytes=")).and_then(|r| {
                let (a, b) = r.split_once('-')?;
                let a: usize = a.parse().ok()?;
                let b: usize = if b.is_empty() {
                    p.bytes.len().checked_sub(1)?
                } else {
                    b.parse().ok()?
                };
                (a <= b && b < p.bytes.len()).then_some((a, b))
            });
            match span {
                Some((a, b)) => (
                    206,
                    p.bytes[a..=b].to_vec(),
                    vec![
                        ("content-type", "application/x-tar".into()),
                        ("content-range", format!("bytes {a}-{b}/{}", p.bytes.len())),
                    ],
                ),
                None => (
                    200,
                    p.bytes.clone(),
                    vec![("content-type", "application/x-tar".into())],
                ),
            }
        }
        (Method::Get, ["v1", "packets", d, "manifest"]) => {
            let s = state.lock().unwrap();
            match s.packets.get(*d) {
                Some(p) => (
                    200,
                    p.manifest_json.clone(),
                    vec![("content-type", "application/json".into())],
                ),
                None => problem(404, "not_found", "no such packet"),
            }
        }
        (Method::Get, ["v1", "packets", d, "recipes"]) if config.delta => {
            let s = state.lock().unwrap();
            match s.packets.get(*d) {
                Some(p) => json(
                    200,
                    &Recipes {
                        recipes: recipes_of(&p.recipes, &p.manifest),
                    },
                ),
                None => problem(404, "not_found", "no such packet"),
            }
        }
        (Method::Post, ["v1", "packets", d, "chunks"]) if config.delta => {
            let s = state.lock().unwrap();
            let Some(p) = s.packets.get(*d) else {
                return problem(404, "not_found", "no such packet");
            };
            let Ok(wanted) = serde_json::from_slice::<ChunkRequest>(body) else {
                return problem(400, "body_invalid", "not a chunk request");
            };
            let names = p.chunk_names();
            let mut frames = Vec::new();
            let mut datas = Vec::new();
            let mut total = 0u64;
            for h in &wanted.chunks {
                if !names.contains(h) {
                    return problem(400, "chunk_not_in_packet", h);
                }
                let Some(bytes) = s.chunks.get(h) else {
                    return problem(500, "internal", "a chunk is lost");
                };
                total += bytes.len() as u64;
                frames.push(Frame::of(bytes));
                datas.push(Arc::clone(bytes));
            }
            if wanted.chunks.len() > chunks::MAX_FRAMES as usize || total > 64 << 20 {
                return problem(400, "too_many_chunks", "at most 65,536 chunks or 64 MiB");
            }
            let mut out = chunks::encode_head(&frames);
            for d in datas {
                out.extend_from_slice(&d);
            }
            (
                200,
                out,
                vec![("content-type", chunks::CONTENT_TYPE.into())],
            )
        }
        (Method::Get, ["v1", "refs", name @ ..]) => {
            let name = name.join("/");
            let s = state.lock().unwrap();
            match s.refs.get(&name) {
                Some(d) => json(
                    200,
                    &pillbox_wire::Ref {
                        name,
                        digest: d.clone(),
                        updated: "2026-12-01T00:00:00Z".into(),
                    },
                ),
                None => problem(404, "not_found", "no such ref"),
            }
        }
        (Method::Put, ["v1", "refs", name @ ..]) => {
            let name = name.join("/");
            let Ok(put) = serde_json::from_slice::<pillbox_wire::PutRef>(body) else {
                return problem(400, "body_invalid", "not a ref");
            };
            let mut s = state.lock().unwrap();
            if !s.packets.contains_key(&put.digest) {
                return problem(404, "not_found", "no such packet");
            }
            let current = s.refs.get(&name).cloned();
            let ok = match (if_match, if_none_match, &current) {
                (Some(m), _, Some(c)) => m.trim_matches('"') == c,
                (Some(_), _, None) => false,
                (None, Some("*"), c) => c.is_none(),
                (None, _, _) => true,
            };
            if !ok {
                return problem(409, "ref_conflict", "the ref holds something else");
            }
            s.refs.insert(name.clone(), put.digest.clone());
            json(
                if current.is_some() { 200 } else { 201 },
                &pillbox_wire::RefChange {
                    now: pillbox_wire::Ref {
                        name,
                        digest: put.digest,
                        updated: "2026-12-01T00:00:00Z".into(),
                    },
                    previous: current,
                },
            )
        }
        _ => problem(404, "not_found", "no such route"),
    }
}

fn recipes_of(recipes: &HashMap<String, Vec<(String, u32)>>, manifest: &Manifest) -> Vec<Recipe> {
    let mut seen = HashSet::new();
    manifest
        .members
        .iter()
        .filter_map(|m| m.sha256.map(|d| (d.hex().to_string(), m.size)))
        .filter(|(h, _)| recipes.contains_key(h) && seen.insert(h.clone()))
        .map(|(h, size)| Recipe {
            chunks: recipes[&h]
                .iter()
                .map(|(c, s)| RecipeChunk {
                    sha256: c.clone(),
                    size: *s,
                })
                .collect(),
            sha256: h,
            size,
        })
        .collect()
}

fn create_push(query: &str, body: &[u8], encoding: Option<&str>, state: &Mutex<State>) -> Answer {
    let json_bytes = match decode_body(body, encoding) {
        Ok(b) => b,
        Err(a) => return a,
    };
    let Some(digest) = query_values(query, "digest")
        .first()
        .and_then(|d| unescape(d).parse::<Digest>().ok())
    else {
        return problem(400, "digest_syntax", "digest=sha256:<hex>");
    };
    let size: u64 = query_values(query, "size")
        .first()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let manifest = match Manifest::parse(&json_bytes, &Limits::FORMAT) {
        Ok(m) => m,
        Err(e) => return problem(422, e.code().as_str(), e.message()),
    };
    if manifest.packet_size() != size {
        return problem(
            400,
            "size_mismatch",
            "size is not the manifest's packet size",
        );
    }
    let mut s = state.lock().unwrap();
    let key = digest.to_string();
    if let Some(p) = s.packets.get(&key) {
        return json(200, &stored(p, &key, false));
    }
    let mut present = HashSet::new();
    let mut base_recipes = HashMap::new();
    let mut bases_used = Vec::new();
    for b in query_values(query, "base") {
        let b = unescape(b);
        if let Some(p) = s.packets.get(&b) {
            bases_used.push(b.clone());
            present.extend(p.chunk_names());
            for m in &p.manifest.members {
                if let Some(d) = m.sha256.filter(|_| m.size > 0) {
                    present.insert(d.hex().to_string());
                }
            }
            for (h, r) in &p.recipes {
                base_recipes.insert(h.clone(), r.clone());
            }
        }
    }
    s.next_id += 1;
    let id = format!("{:032x}", s.next_id);
    let bodies = distinct_bodies(&manifest);
    let small = bodies
        .iter()
        .filter(|(_, s)| *s <= THRESHOLD)
        .map(|(h, _)| h.clone())
        .collect();
    let push = Push {
        bodies,
        small,
        recipe_chunks: HashSet::new(),
        digest,
        size,
        manifest,
        manifest_json: json_bytes,
        bases_used,
        labels: query_values(query, "label")
            .iter()
            .map(|l| unescape(l))
            .collect(),
        present,
        base_recipes,
        recipes: HashMap::new(),
        parts: BTreeMap::new(),
    };
    let answer = json(201, &session(&id, &push));
    s.pushes.insert(id, push);
    answer
}

fn push_route(
    method: &Method,
    id: &str,
    rest: &[&str],
    body: &[u8],
    encoding: Option<&str>,
    state: &Mutex<State>,
) -> Answer {
    let mut s = state.lock().unwrap();
    let State {
        pushes,
        chunks: store,
        packets,
        ..
    } = &mut *s;
    let Some(push) = pushes.get_mut(id) else {
        return problem(404, "not_found", "no such push");
    };
    match (method, rest) {
        (Method::Get, []) => json(200, &session(id, push)),
        (Method::Delete, []) => {
            pushes.remove(id);
            (204, Vec::new(), vec![])
        }
        (Method::Post, ["recipes"]) => {
            let Ok(recipes) = serde_json::from_slice::<Recipes>(body) else {
                return problem(400, "body_invalid", "not recipes");
            };
            let bodies: HashMap<String, u64> = push.bodies().into_iter().collect();
            let mut asked = HashSet::new();
            for r in recipes.recipes {
                let total: u64 = r.chunks.iter().map(|c| u64::from(c.size)).sum();
                if bodies.get(&r.sha256) != Some(&r.size) || total != r.size {
                    return problem(422, "recipe_invalid", &r.sha256);
                }
                if r.chunks.iter().any(|c| c.size > 1 << 20) {
                    return problem(422, "recipe_invalid", "a chunk over 1 MiB");
                }
                asked.extend(r.chunks.iter().map(|c| c.sha256.clone()));
                push.recipe_chunks
                    .extend(r.chunks.iter().map(|c| c.sha256.clone()));
                push.recipes.insert(
                    r.sha256,
                    r.chunks.into_iter().map(|c| (c.sha256, c.size)).collect(),
                );
            }
            let (all, _) = push.missing_chunks();
            let missing: Vec<String> = all.into_iter().filter(|c| asked.contains(c)).collect();
            let wanted: HashSet<&String> = missing.iter().collect();
            let missing_bytes = push
                .recipes
                .values()
                .flatten()
                .filter(|(c, _)| wanted.contains(c))
                .map(|(c, s)| (c.clone(), u64::from(*s)))
                .collect::<HashMap<_, _>>()
                .values()
                .sum();
            json(
                200,
                &MissingChunks {
                    missing_chunks: missing,
                    missing_bytes,
                },
            )
        }
        (Method::Put, ["parts", n]) => {
            let Ok(number) = n.parse::<u32>() else {
                return problem(400, "part_number", "a part number");
            };
            let batch = match decode_body(body, encoding) {
                Ok(b) => b,
                Err(a) => return a,
            };
            let mut decoder = Decoder::new(BatchLimits::PART);
            let mut frames: Vec<Vec<u8>> = Vec::new();
            let fed = decoder.feed(&batch, |e| {
                match e {
                    Event::FrameStart { .. } => frames.push(Vec::new()),
                    Event::Data { bytes, .. } => {
                        frames.last_mut().unwrap().extend_from_slice(bytes)
                    }
                    _ => {}
                }
                Ok::<(), BatchError>(())
            });
            if let Err(e) = fed.and_then(|()| decoder.finish()) {
                return problem(422, e.code.as_str(), &e.to_string());
            }
            let table = decoder.table().to_vec();
            let mut bytes = 0u64;
            let mut stored_bytes = 0u64;
            for (f, data) in table.iter().zip(&frames) {
                let hex = f.sha256.hex().to_string();
                if !push.needs(&hex) {
                    return problem(422, "chunk_not_needed", &hex);
                }
                bytes += data.len() as u64;
                if !store.contains_key(&hex) {
                    stored_bytes += data.len() as u64;
                    store.insert(hex.clone(), Arc::new(data.clone()));
                }
            }
            for f in &table {
                push.present.insert(f.sha256.hex().to_string());
            }
            let part = PushPart {
                number,
                frames: table.len() as u32,
                bytes,
            };
            push.parts.insert(number, part);
            json(
                200,
                &PartReceived {
                    push_id: id.to_owned(),
                    number,
                    frames: table.len() as u32,
                    bytes,
                    stored_bytes,
                },
            )
        }
        (Method::Post, ["complete"]) => {
            let (missing, _) = push.missing();
            if !missing.is_empty() {
                return problem(
                    409,
                    "push_incomplete",
                    &format!("{} bodies missing", missing.len()),
                );
            }
            let mut recipes = HashMap::new();
            for (h, s) in push.bodies() {
                if s > THRESHOLD {
                    let r = push
                        .recipes
                        .get(&h)
                        .or_else(|| push.base_recipes.get(&h))
                        .cloned()
                        .unwrap_or_default();
                    recipes.insert(h, r);
                }
            }
            let bytes = match rebuild(&push.manifest, &recipes, store) {
                Ok(b) => b,
                Err(missing) => return problem(409, "push_incomplete", &missing),
            };
            let got = Digest::of(&bytes);
            let key = push.digest.to_string();
            if got != push.digest {
                pushes.remove(id);
                return problem(
                    422,
                    "packet_digest_mismatch",
                    "the rebuilt packet has another digest",
                );
            }
            let packet = Packet {
                bytes,
                manifest_json: push.manifest_json.clone(),
                manifest: push.manifest.clone(),
                recipes,
                labels: push.labels.clone(),
            };
            pushes.remove(id);
            if let Some(p) = packets.get(&key) {
                return json(200, &stored(p, &key, false));
            }
            let answer = json(201, &stored(&packet, &key, true));
            packets.insert(key, packet);
            answer
        }
        _ => problem(404, "not_found", "no such route"),
    }
}

/// The packet's bytes from the manifest and the chunks, with packet-core's
/// writer (which also checks every body against the manifest).
fn rebuild(
    manifest: &Manifest,
    recipes: &HashMap<String, Vec<(String, u32)>>,
    store: &HashMap<String, Arc<Vec<u8>>>,
) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    let mut writer = Writer::new(manifest);
    loop {
        match writer.next().map_err(|e| format!("{e:?}"))? {
            Step::Bytes(b) => out.extend_from_slice(b),
            Step::Body { index, .. } => {
                let hex = manifest.members[index]
                    .sha256
                    .map(|d| d.hex().to_string())
                    .unwrap_or_default();
                let names: Vec<String> = match recipes.get(&hex) {
                    Some(r) => r.iter().map(|(c, _)| c.clone()).collect(),
                    None => vec![hex],
                };
                for n in names {
                    let bytes = store.get(&n).ok_or_else(|| format!("chunk {n} missing"))?;
                    writer.body(bytes).map_err(|e| format!("{e:?}"))?;
                    out.extend_from_slice(bytes);
                }
            }
            Step::Done(_) => break,
        }
    }
    Ok(out)
}
