//! A packet store on a local port that speaks the delta protocol of /2
//! (docs/transfer.md, proto/openapi.yaml) for the CLI's tests: pushes that
//! carry `PBPUSH02`, binary recipes, `PBCHUNK2` parts and chunk reads, the
//! refs, and `GET /v1`. It keeps everything in memory and checks what it
//! is sent as a store must: every zstd frame's shape checked from its
//! headers by `pillbox_wire::frames` before it is decoded, as the Worker
//! does, every frame decoded to exactly its raw size and hashed against its
//! name, `packet.json` assembled from frames and
//! its bases' chunks and checked by packet-core (`Assembly`), each body
//! proven from a base, a frame, or its recipe's chunks before the packet
//! is visible. Every request is logged, so tests can say what a command
//! sent.
#![allow(dead_code)]

use std::collections::{HashMap, HashSet};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};

use packet_core::assembled::{Assembly, BodyHasher, Proof};
use packet_core::{Body, Digest, Limits};
use pillbox_wire::chunks::{self, BatchLimits, Decoded, Decoder, Encoding, Frame};
use pillbox_wire::frames;
use pillbox_wire::recipes::{
    BodyRecipe, ChunkName, PushDecoded, PushDecoder, PushLimits, RecipeLimits, Recipes, Run,
};

/// One request as the store saw it.
#[derive(Clone, Debug)]
pub struct Logged {
    pub method: String,
    /// The path without the query.
    pub path: String,
    pub query: String,
    pub body_bytes: usize,
    pub status: u16,
}

/// A packet the store holds.
#[derive(Clone)]
struct StoredPacket {
    json: Vec<u8>,
    manifest_chunks: Vec<ChunkName>,
    /// Large bodies' chunks, as stored.
    recipes: HashMap<Body, Vec<ChunkName>>,
    bodies: HashSet<Body>,
}

/// An open push.
struct OpenPush {
    digest: Digest,
    size: u64,
    json: Vec<u8>,
    manifest_chunks: Vec<ChunkName>,
    bases: Vec<Digest>,
    /// Chunks uploaded by this push.
    uploaded: HashSet<ChunkName>,
    recipes: HashMap<Body, Vec<ChunkName>>,
    proven: HashSet<Body>,
    parts: Vec<(u16, u32, u64)>,
}

/// One move of a ref, as its history keeps it.
#[derive(Clone)]
struct Move {
    seq: u64,
    digest: Digest,
    at: String,
    by: Option<String>,
}

/// How many moves the store keeps per ref (as the Worker).
pub const HISTORY_KEPT: usize = 100;

#[derive(Default)]
struct State {
    /// Every chunk stored: its frame and stored bytes.
    chunks: HashMap<ChunkName, (Frame, Vec<u8>)>,
    packets: HashMap<Digest, StoredPacket>,
    /// Labels by packet, as pushes named them.
    labels: HashMap<Digest, Vec<String>>,
    refs: HashMap<String, Digest>,
    /// Each ref's moves, oldest first, the last [`HISTORY_KEPT`].
    history: HashMap<String, Vec<Move>>,
    /// Moves recorded so far (their `seq`, and the seconds of their time).
    moves: u64,
    pushes: HashMap<String, OpenPush>,
    log: Vec<Logged>,
    next_id: u64,
}

/// The store: its URL while it runs.
pub struct Store {
    pub url: String,
    state: Arc<Mutex<State>>,
}

impl Store {
    /// Starts a store on a free local port.
    pub fn start() -> Store {
        Store::start_on("127.0.0.1:0")
    }

    /// Starts a store listening on `address`.
    pub fn start_on(address: &str) -> Store {
        let listener = TcpListener::bind(address).unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let state = Arc::new(Mutex::new(State::default()));
        let shared = Arc::clone(&state);
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(conn) = conn else { continue };
                let state = Arc::clone(&shared);
                std::thread::spawn(move || serve(conn, &state));
            }
        });
        Store { url, state }
    }

    /// The requests so far.
    pub fn log(&self) -> Vec<Logged> {
        self.state.lock().unwrap().log.clone()
    }

    /// Forgets the requests so far.
    pub fn clear_log(&self) {
        self.state.lock().unwrap().log.clear();
    }

    /// Whether the store holds `digest`.
    pub fn holds(&self, digest: &str) -> bool {
        let d: Digest = digest.parse().unwrap();
        self.state.lock().unwrap().packets.contains_key(&d)
    }

    /// Chunks stored.
    pub fn chunk_count(&self) -> usize {
        self.state.lock().unwrap().chunks.len()
    }

    /// Stores a copy of the packet `digest` under another digest (the
    /// store cannot tell), so that two digests share a prefix; returns the
    /// new digest, which starts with `prefix` and is otherwise `digest`'s.
    pub fn alias(&self, digest: &str, prefix: &str) -> String {
        let d: Digest = digest.parse().unwrap();
        let hex = d.hex().to_string();
        let other = format!("sha256:{prefix}{}", &hex[prefix.len()..]);
        let mut s = self.state.lock().unwrap();
        let p = s.packets[&d].clone();
        s.packets.insert(other.parse().unwrap(), p);
        other
    }

    /// Deletes a packet (its refs and history are left as they are).
    pub fn forget(&self, digest: &str) {
        let d: Digest = digest.parse().unwrap();
        self.state.lock().unwrap().packets.remove(&d);
    }
}

struct Request {
    method: String,
    path: String,
    query: Vec<(String, String)>,
    raw_query: String,
    headers: HashMap<String, String>,
    body: Vec<u8>,
}

struct Response {
    status: u16,
    content_type: &'static str,
    body: Vec<u8>,
}

fn json(status: u16, value: serde_json::Value) -> Response {
    Response {
        status,
        content_type: "application/json",
        body: serde_json::to_vec(&value).unwrap(),
    }
}

fn problem(status: u16, code: &str, message: &str) -> Response {
    json(
        status,
        serde_json::json!({"error": {"code": code, "path": null, "offset": null, "message": message, "advice": "test store"}}),
    )
}

fn serve(conn: TcpStream, state: &Mutex<State>) {
    let mut reader = BufReader::new(conn.try_clone().unwrap());
    let mut out = conn;
    loop {
        let Some(request) = read_request(&mut reader) else {
            return;
        };
        let close = request
            .headers
            .get("connection")
            .is_some_and(|v| v.eq_ignore_ascii_case("close"));
        let response = handle(&request, state);
        state.lock().unwrap().log.push(Logged {
            method: request.method.clone(),
            path: request.path.clone(),
            query: request.raw_query.clone(),
            body_bytes: request.body.len(),
            status: response.status,
        });
        let head = format!(
            "HTTP/1.1 {} X\r\ncontent-type: {}\r\ncontent-length: {}\r\n\r\n",
            response.status,
            response.content_type,
            response.body.len()
        );
        if out.write_all(head.as_bytes()).is_err() {
            return;
        }
        if request.method != "HEAD" && out.write_all(&response.body).is_err() {
            return;
        }
        if close {
            return;
        }
    }
}

fn read_request(r: &mut BufReader<TcpStream>) -> Option<Request> {
    let mut line = String::new();
    if r.read_line(&mut line).ok()? == 0 {
        return None;
    }
    let mut parts = line.split_whitespace();
    let method = parts.next()?.to_owned();
    let target = parts.next()?.to_owned();
    let mut headers = HashMap::new();
    loop {
        let mut h = String::new();
        r.read_line(&mut h).ok()?;
        let h = h.trim_end();
        if h.is_empty() {
            break;
        }
        let (k, v) = h.split_once(':')?;
        headers.insert(k.trim().to_ascii_lowercase(), v.trim().to_owned());
    }
    let mut body = Vec::new();
    if let Some(n) = headers.get("content-length") {
        body.resize(n.parse().ok()?, 0);
        r.read_exact(&mut body).ok()?;
    } else if headers
        .get("transfer-encoding")
        .is_some_and(|v| v.eq_ignore_ascii_case("chunked"))
    {
        loop {
            let mut size = String::new();
            r.read_line(&mut size).ok()?;
            let n = usize::from_str_radix(size.trim(), 16).ok()?;
            let mut piece = vec![0u8; n + 2];
            r.read_exact(&mut piece).ok()?;
            if n == 0 {
                break;
            }
            body.extend_from_slice(&piece[..n]);
        }
    }
    let (path, raw_query) = target.split_once('?').unwrap_or((&target, ""));
    let query = raw_query
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            (k.to_owned(), v.to_owned())
        })
        .collect();
    Some(Request {
        method,
        path: path.to_owned(),
        query,
        raw_query: raw_query.to_owned(),
        headers,
        body,
    })
}

/// `GET /v1/refs?prefix=&limit=&cursor=`: a page of refs in name order.
fn list_refs(s: &State, r: &Request) -> Response {
    let q = |k: &str| {
        r.query
            .iter()
            .find(|(n, _)| n == k)
            .map(|(_, v)| v.as_str())
    };
    let prefix = q("prefix").unwrap_or("");
    let after = q("cursor").unwrap_or("");
    let limit: usize = q("limit").and_then(|l| l.parse().ok()).unwrap_or(50);
    let mut names: Vec<&String> = s
        .refs
        .keys()
        .filter(|n| n.starts_with(prefix) && n.as_str() > after)
        .collect();
    names.sort();
    let more = names.len() > limit;
    names.truncate(limit);
    let refs: Vec<serde_json::Value> = names
        .iter()
        .map(|n| {
            let d = s.refs[*n];
            let mut labels = s.labels.get(&d).cloned().unwrap_or_default();
            labels.sort();
            serde_json::json!({
                "name": n, "digest": d.to_string(), "updated": updated(s, n),
                "size": s.packets.get(&d).map(|p| packet_core::Manifest::parse(&p.json, &Limits::FORMAT).unwrap().packet_size()),
                "labels": labels,
            })
        })
        .collect();
    let next = more.then(|| names.last().map(|n| n.to_string())).flatten();
    json(200, serde_json::json!({"refs": refs, "next_cursor": next}))
}

/// When a ref last moved.
fn updated(s: &State, name: &str) -> String {
    s.history
        .get(name)
        .and_then(|h| h.last())
        .map_or_else(|| "2026-12-01T00:00:00Z".to_owned(), |m| m.at.clone())
}

/// `GET /v1/ref-history/{name}?limit=&cursor=`: newest first.
fn ref_history(s: &State, name: &str, r: &Request) -> Response {
    let q = |k: &str| {
        r.query
            .iter()
            .find(|(n, _)| n == k)
            .map(|(_, v)| v.as_str())
    };
    let Some(moves) = s.history.get(name) else {
        return problem(404, "not_found", "no such ref");
    };
    let limit: usize = q("limit").and_then(|l| l.parse().ok()).unwrap_or(50);
    let before: u64 = q("cursor").and_then(|c| c.parse().ok()).unwrap_or(u64::MAX);
    let older: Vec<&Move> = moves.iter().rev().filter(|m| m.seq < before).collect();
    let page: Vec<serde_json::Value> = older
        .iter()
        .take(limit)
        .map(|m| serde_json::json!({"digest": m.digest.to_string(), "at": m.at, "by": m.by}))
        .collect();
    let next = (older.len() > limit).then(|| older[limit - 1].seq.to_string());
    json(
        200,
        serde_json::json!({"name": name, "moves": page, "next_cursor": next, "kept": HISTORY_KEPT}),
    )
}

/// `GET /v1/digests/{prefix}?limit=`: stored digests that start with it.
fn digests(s: &State, prefix: &str, r: &Request) -> Response {
    let prefix = prefix.replace("%3A", ":").replace("%3a", ":");
    let Ok(p) = pillbox_wire::DigestPrefix::parse(&prefix) else {
        return problem(400, "digest_prefix_invalid", "not a prefix");
    };
    let limit: usize = r
        .query
        .iter()
        .find(|(n, _)| n == "limit")
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(50);
    let mut found: Vec<String> = s
        .packets
        .keys()
        .map(Digest::to_string)
        .filter(|d| p.matches(d))
        .collect();
    found.sort();
    let truncated = found.len() > limit;
    found.truncate(limit);
    json(
        200,
        serde_json::json!({"prefix": prefix, "digests": found, "truncated": truncated}),
    )
}

fn handle(r: &Request, state: &Mutex<State>) -> Response {
    let mut s = state.lock().unwrap();
    let segments: Vec<&str> = r.path.trim_start_matches('/').split('/').collect();
    match (r.method.as_str(), &segments[..]) {
        ("GET", ["v1"]) => json(
            200,
            serde_json::json!({
                "service": "pillbox", "api": 1, "format": "pillbox.session-packet/2",
                "max_packet_bytes": 1u64 << 34, "max_members": 250000,
                "max_single_upload_bytes": 8u64 << 20,
                "part_size": {"default": 8u64 << 20, "min": 5u64 << 20, "max": 64u64 << 20},
                "read_access": "public", "transfer": ["whole", "delta"]
            }),
        ),
        ("GET", ["v1", "refs"]) => list_refs(&s, r),
        ("GET", ["v1", "ref-history", name @ ..]) => ref_history(&s, &name.join("/"), r),
        ("GET", ["v1", "digests", prefix]) => digests(&s, prefix, r),
        ("GET", ["v1", "refs", name @ ..]) => {
            let name = name.join("/");
            match s.refs.get(&name) {
                Some(d) => json(
                    200,
                    serde_json::json!({"name": name, "digest": d.to_string(), "updated": updated(&s, &name)}),
                ),
                None => problem(404, "not_found", "no such ref"),
            }
        }
        ("PUT", ["v1", "refs", name @ ..]) => put_ref(&mut s, &name.join("/"), r),
        ("HEAD" | "GET", ["v1", "packets", d]) => match d.parse::<Digest>() {
            Ok(d) if s.packets.contains_key(&d) && r.method == "HEAD" => {
                json(200, serde_json::json!({}))
            }
            _ => problem(404, "not_found", "no such packet"),
        },
        ("GET", ["v1", "packets", d, "manifest"]) => match stored(&s, d) {
            Some(p) => Response {
                status: 200,
                content_type: "application/json",
                body: p.json.clone(),
            },
            None => problem(404, "not_found", "no such packet"),
        },
        ("GET", ["v1", "packets", d, "recipes"]) => match stored(&s, d) {
            Some(p) => {
                let manifest = packet_core::Manifest::parse(&p.json, &Limits::FORMAT).unwrap();
                let mut seen = HashSet::new();
                let bodies = manifest
                    .members
                    .iter()
                    .filter_map(|m| m.body())
                    .filter(|b| seen.insert(*b))
                    .filter_map(|b| {
                        p.recipes.get(&b).map(|chunks| BodyRecipe {
                            body: b,
                            runs: chunks.iter().map(|c| Run::Chunk(*c)).collect(),
                        })
                    })
                    .collect();
                Response {
                    status: 200,
                    content_type: "application/x-pillbox-recipes",
                    body: Recipes {
                        manifest: p.manifest_chunks.clone(),
                        bodies,
                    }
                    .encode(),
                }
            }
            None => problem(404, "not_found", "no such packet"),
        },
        ("POST", ["v1", "packets", d, "chunks"]) => read_chunks(&s, d, &r.body),
        ("POST", ["v1", "pushes"]) => create(&mut s, r),
        ("GET", ["v1", "pushes", id]) => match s.pushes.get(*id) {
            Some(p) => json(200, view(&s, id, p)),
            None => problem(404, "not_found", "no such push"),
        },
        ("POST", ["v1", "pushes", id, "recipes"]) => add_recipes(&mut s, id, &r.body),
        ("PUT", ["v1", "pushes", id, "parts", n]) => part(&mut s, id, n, &r.body),
        ("POST", ["v1", "pushes", id, "complete"]) => complete(&mut s, id),
        _ => problem(404, "not_found", "no such route"),
    }
}

fn stored<'a>(s: &'a State, d: &str) -> Option<&'a StoredPacket> {
    s.packets.get(&d.parse::<Digest>().ok()?)
}

fn put_ref(s: &mut State, name: &str, r: &Request) -> Response {
    let body: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
    let digest: Digest = body["digest"].as_str().unwrap().parse().unwrap();
    if !s.packets.contains_key(&digest) {
        return problem(409, "packet_not_found", "the packet is not stored");
    }
    let current = s.refs.get(name).copied();
    let ok = match (r.headers.get("if-match"), r.headers.get("if-none-match")) {
        (Some(m), _) => current.map(|c| format!("\"{c}\"")) == Some(m.clone()),
        (None, Some(_)) => current.is_none(),
        (None, None) => true,
    };
    if !ok {
        return json(
            409,
            serde_json::json!({"error": {"code": "ref_conflict", "path": null, "offset": null, "message": "moved", "advice": "a", "current": current.map(|c| c.to_string())}}),
        );
    }
    s.refs.insert(name.to_owned(), digest);
    s.moves += 1;
    let seq = s.moves;
    let at = format!("2026-12-01T00:{:02}:{:02}Z", (seq / 60) % 60, seq % 60);
    let by = r
        .headers
        .contains_key("authorization")
        .then(|| "test-token".to_owned());
    let moves = s.history.entry(name.to_owned()).or_default();
    moves.push(Move {
        seq,
        digest,
        at: at.clone(),
        by,
    });
    if moves.len() > HISTORY_KEPT {
        moves.remove(0);
    }
    json(
        if current.is_some() { 200 } else { 201 },
        serde_json::json!({"name": name, "digest": digest.to_string(), "updated": at}),
    )
}

fn stored_answer(s: &State, digest: &Digest, created: bool) -> Response {
    let p = &s.packets[digest];
    let manifest = packet_core::Manifest::parse(&p.json, &Limits::FORMAT).unwrap();
    json(
        if created { 201 } else { 200 },
        serde_json::json!({
            "digest": digest.to_string(), "size": manifest.packet_size(),
            "members": manifest.totals.members, "file_bytes": manifest.totals.bytes,
            "harness": null, "labels": [], "created": created,
            "created_at": "2026-12-01T00:00:00Z"
        }),
    )
}

/// Why a frame's stored bytes are not its chunk: the code the Worker
/// answers with, and what was found.
#[derive(Debug)]
struct BadFrame {
    code: &'static str,
    message: String,
}

/// Decodes a frame's stored bytes as the Worker does: a zstd frame's shape
/// is checked from its headers first (one frame of the allowed shape,
/// declaring no other size), then it is decoded; the result is exactly its
/// raw size, hashing to its name.
fn unframe(f: &Frame, stored: &[u8]) -> Result<Vec<u8>, BadFrame> {
    let bad = |code, message: String| BadFrame { code, message };
    let raw = match f.encoding {
        Encoding::Identity => stored.to_vec(),
        Encoding::Zstd => {
            frames::check(u64::from(f.raw_size), stored)
                .map_err(|e| bad(e.code(), e.to_string()))?;
            zstd::bulk::decompress(stored, f.raw_size as usize)
                .map_err(|e| bad("chunk_frame_invalid", e.to_string()))?
        }
    };
    if raw.len() != f.raw_size as usize || Digest::of(&raw) != f.sha256 {
        let message = format!("frame {} is not its chunk", f.sha256);
        return Err(bad("chunk_digest_mismatch", message));
    }
    Ok(raw)
}

/// The frames of a batch, each checked.
fn frames_of(table: &[Frame], data: &[Vec<u8>]) -> Result<Vec<(Frame, Vec<u8>)>, BadFrame> {
    table
        .iter()
        .zip(data)
        .map(|(f, d)| unframe(f, d).map(|_| (*f, d.clone())))
        .collect()
}

fn decode_batch(bytes: &[u8]) -> Result<Vec<(Frame, Vec<u8>)>, BadFrame> {
    // A batch that does not decode: the code this store has always given.
    let undecodable = |e: &dyn std::fmt::Display| BadFrame {
        code: "chunk_digest_mismatch",
        message: e.to_string(),
    };
    let mut d = Decoder::new(BatchLimits::DOWNLOAD);
    let mut data: Vec<Vec<u8>> = Vec::new();
    let mut input = bytes;
    loop {
        let (decoded, used) = d.decode(input).map_err(|e| undecodable(&e))?;
        input = &input[used..];
        match decoded {
            Decoded::Table => data = vec![Vec::new(); d.table().len()],
            Decoded::Data { index, bytes, .. } => data[index].extend_from_slice(bytes),
            Decoded::Done => break,
            Decoded::NeedInput => {
                if input.is_empty() {
                    break;
                }
            }
        }
    }
    d.finish().map_err(|e| undecodable(&e))?;
    frames_of(d.table(), &data)
}

fn name_of(f: &Frame) -> ChunkName {
    ChunkName {
        sha256: f.sha256,
        size: f.raw_size,
    }
}

/// The chunks the bases hold, and their recipes by body.
fn base_pool(
    s: &State,
    bases: &[Digest],
) -> (
    HashSet<ChunkName>,
    HashMap<Body, Vec<ChunkName>>,
    HashSet<Body>,
) {
    let mut chunks = HashSet::new();
    let mut recipes = HashMap::new();
    let mut bodies = HashSet::new();
    for b in bases {
        let Some(p) = s.packets.get(b) else { continue };
        chunks.extend(p.manifest_chunks.iter().copied());
        for (body, list) in &p.recipes {
            chunks.extend(list.iter().copied());
            recipes.insert(*body, list.clone());
        }
        for body in &p.bodies {
            bodies.insert(*body);
            if body.size <= 256 << 10 {
                chunks.insert(ChunkName {
                    sha256: body.sha256,
                    size: body.size as u32,
                });
            }
        }
    }
    (chunks, recipes, bodies)
}

fn chunk_bytes(s: &State, c: &ChunkName) -> Vec<u8> {
    let (f, stored) = &s.chunks[c];
    unframe(f, stored).unwrap()
}

fn create(s: &mut State, r: &Request) -> Response {
    let q = |k: &str| r.query.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
    let Some(digest) = q("digest").and_then(|d| d.replace("%3A", ":").parse::<Digest>().ok())
    else {
        return problem(400, "digest_syntax", "no digest");
    };
    let size: u64 = q("size").and_then(|v| v.parse().ok()).unwrap_or(0);
    let labels: Vec<String> = r
        .query
        .iter()
        .filter(|(k, _)| k == "label")
        .map(|(_, v)| v.replace("%3D", "=").replace("%3A", ":"))
        .collect();
    if !labels.is_empty() {
        let held = s.labels.entry(digest).or_default();
        held.extend(labels);
        held.sort();
        held.dedup();
    }
    if s.packets.contains_key(&digest) {
        return stored_answer(s, &digest, false);
    }
    let bases: Vec<Digest> = r
        .query
        .iter()
        .filter(|(k, _)| k == "base")
        .filter_map(|(_, v)| v.replace("%3A", ":").parse().ok())
        .filter(|d| s.packets.contains_key(d))
        .collect();
    let limits = PushLimits {
        recipes: RecipeLimits::DEFAULT,
        batch: BatchLimits::upload(32 << 20, 64 << 20),
    };
    let mut decoder = PushDecoder::new(limits);
    let mut data: Vec<Vec<u8>> = Vec::new();
    let mut input = &r.body[..];
    let mut recipes = None;
    while !input.is_empty() {
        let (found, used) = match decoder.decode(input) {
            Ok(x) => x,
            Err(e) => return problem(422, e.code(), &e.to_string()),
        };
        input = &input[used..];
        match found {
            PushDecoded::Recipes => recipes = Some(decoder.take_recipes()),
            PushDecoded::Batch(Decoded::Table) => {
                data = vec![Vec::new(); decoder.batch().unwrap().table().len()]
            }
            PushDecoded::Batch(Decoded::Data { index, bytes, .. }) => {
                data[index].extend_from_slice(bytes)
            }
            _ => {}
        }
    }
    if let Err(e) = decoder.finish() {
        return problem(422, e.code(), &e.to_string());
    }
    let Some(recipes) = recipes else {
        return problem(422, "recipes_truncated", "no recipes");
    };
    let frames = match frames_of(decoder.batch().unwrap().table(), &data) {
        Ok(f) => f,
        Err(e) => return problem(422, e.code, &e.message),
    };
    let (pool, _, _) = base_pool(s, &bases);
    let sent: HashMap<ChunkName, Vec<u8>> = frames
        .iter()
        .map(|(f, d)| (name_of(f), unframe(f, d).unwrap()))
        .collect();
    let mut json_bytes = Vec::new();
    let mut lacking = Vec::new();
    for c in &recipes.manifest {
        if let Some(b) = sent.get(c) {
            json_bytes.extend_from_slice(b);
        } else if pool.contains(c) {
            json_bytes.extend_from_slice(&chunk_bytes(s, c));
        } else {
            lacking.push(c.sha256.hex().to_string());
        }
    }
    if !lacking.is_empty() {
        return json(
            409,
            serde_json::json!({"error": {"code": "manifest_incomplete", "path": null, "offset": null, "message": "chunks of packet.json are missing", "advice": "send them", "missing": lacking}}),
        );
    }
    let assembly = match Assembly::new(&json_bytes, Some(digest), &Limits::FORMAT) {
        Ok(a) => a,
        Err(e) => return problem(422, e.code().as_str(), e.message()),
    };
    if assembly.manifest().packet_size() != size {
        return problem(400, "size_mismatch", "size");
    }
    // As the edge: a recipe only for a large body no base holds, and a
    // body frame only for a chunk the push may upload.
    let (_, _, base_bodies) = base_pool(s, &bases);
    let bodies = assembly.unproven();
    for r in &recipes.bodies {
        if !bodies.contains(&r.body) || r.body.size <= 256 << 10 || base_bodies.contains(&r.body) {
            return problem(
                422,
                "recipe_not_needed",
                "no recipe is needed for that body",
            );
        }
    }
    let manifest_names: HashSet<ChunkName> = recipes.manifest.iter().copied().collect();
    for (f, _) in &frames {
        let name = name_of(f);
        if manifest_names.contains(&name) {
            continue;
        }
        let small_body = bodies
            .iter()
            .any(|b| b.sha256 == f.sha256 && b.size <= 1 << 20 && !base_bodies.contains(b));
        let recipe_chunk = recipes.bodies.iter().any(|r| {
            r.runs
                .iter()
                .any(|run| matches!(run, Run::Chunk(c) if *c == name))
        }) && !pool.contains(&name);
        if !small_body && !recipe_chunk {
            return problem(422, "chunk_not_needed", "not a chunk this push needs");
        }
    }
    for (f, d) in &frames {
        s.chunks
            .entry(name_of(f))
            .or_insert_with(|| (*f, d.clone()));
    }
    s.next_id += 1;
    let id = format!("{:032x}", s.next_id);
    let mut push = OpenPush {
        digest,
        size,
        json: json_bytes,
        manifest_chunks: recipes.manifest.clone(),
        bases,
        uploaded: sent.keys().copied().collect(),
        recipes: HashMap::new(),
        proven: HashSet::new(),
        parts: Vec::new(),
    };
    for b in recipes.bodies {
        match expand(s, &push, &b) {
            Ok(chunks) => {
                push.recipes.insert(b.body, chunks);
            }
            Err(e) => return problem(422, "recipe_invalid", &e),
        }
    }
    if let Err(e) = prove(s, &mut push) {
        return problem(422, "member_digest_mismatch", &e);
    }
    let all = Assembly::new(&push.json, Some(digest), &Limits::FORMAT)
        .unwrap()
        .unproven()
        .iter()
        .all(|b| push.proven.contains(b));
    if all {
        finish(s, &push);
        return stored_answer(s, &digest, true);
    }
    let answer = view(s, &id, &push);
    s.pushes.insert(id, push);
    json(202, answer)
}

/// A recipe's chunks, copies resolved against the bases' recipes.
fn expand(s: &State, push: &OpenPush, recipe: &BodyRecipe) -> Result<Vec<ChunkName>, String> {
    let (_, base_recipes, _) = base_pool(s, &push.bases);
    let mut out = Vec::new();
    for run in &recipe.runs {
        match run {
            Run::Chunk(c) => out.push(*c),
            Run::Copy { body, first, count } => {
                let list = base_recipes
                    .get(body)
                    .ok_or_else(|| format!("a copy of {} no base holds", body.sha256))?;
                let range = *first as usize..(*first + *count) as usize;
                out.extend_from_slice(list.get(range).ok_or("a copy past the base body's end")?);
            }
        }
    }
    let total: u64 = out.iter().map(|c| u64::from(c.size)).sum();
    if total != recipe.body.size {
        return Err(format!(
            "the recipe of {} does not add up",
            recipe.body.sha256
        ));
    }
    Ok(out)
}

/// Proves every body it can: in a base, or from chunks at hand.
fn prove(s: &State, push: &mut OpenPush) -> Result<(), String> {
    let (pool, _, base_bodies) = base_pool(s, &push.bases);
    let at_hand = |c: &ChunkName| push.uploaded.contains(c) || pool.contains(c);
    let assembly = Assembly::new(&push.json, Some(push.digest), &Limits::FORMAT).unwrap();
    for body in assembly.unproven() {
        if push.proven.contains(&body) {
            continue;
        }
        if base_bodies.contains(&body) {
            let _ = Proof::stored(body);
            push.proven.insert(body);
            continue;
        }
        let chunks = if body.size <= 256 << 10 {
            vec![ChunkName {
                sha256: body.sha256,
                size: body.size as u32,
            }]
        } else {
            match push.recipes.get(&body) {
                Some(c) => c.clone(),
                None => continue,
            }
        };
        if !chunks.iter().all(at_hand) {
            continue;
        }
        let mut h = BodyHasher::new(body);
        for c in &chunks {
            h.update(&chunk_bytes(s, c))
                .map_err(|e| e.message().to_owned())?;
        }
        h.finish().map_err(|e| e.message().to_owned())?;
        push.proven.insert(body);
    }
    Ok(())
}

fn missing_of(s: &State, push: &OpenPush) -> (Vec<String>, Vec<String>, u64) {
    let (pool, _, _) = base_pool(s, &push.bases);
    let assembly = Assembly::new(&push.json, Some(push.digest), &Limits::FORMAT).unwrap();
    let mut bodies = Vec::new();
    let mut chunks = Vec::new();
    let mut seen = HashSet::new();
    let mut bytes = 0;
    for b in assembly.unproven() {
        if push.proven.contains(&b) {
            continue;
        }
        bodies.push(b.sha256.hex().to_string());
        match push.recipes.get(&b) {
            Some(list) => {
                for c in list {
                    if !push.uploaded.contains(c) && !pool.contains(c) && seen.insert(*c) {
                        chunks.push(c.sha256.hex().to_string());
                        bytes += u64::from(c.size);
                    }
                }
            }
            None => bytes += b.size,
        }
    }
    (bodies, chunks, bytes)
}

fn view(s: &State, id: &str, push: &OpenPush) -> serde_json::Value {
    let (missing, missing_chunks, missing_bytes) = missing_of(s, push);
    serde_json::json!({
        "push_id": id, "location": format!("/v1/pushes/{id}"),
        "digest": push.digest.to_string(), "size": push.size,
        "bases_used": push.bases.iter().map(|b| b.to_string()).collect::<Vec<_>>(),
        "missing": missing, "missing_chunks": missing_chunks, "missing_bytes": missing_bytes,
        "parts": push.parts.iter().map(|(n, f, b)| serde_json::json!({"number": n, "frames": f, "bytes": b, "stored_bytes": b})).collect::<Vec<_>>(),
        "part_limits": {"max_bytes": 32u64 << 20, "max_raw_bytes": 64u64 << 20, "max_frames": 65536,
                         "encodings": ["identity", "zstd"], "zstd_max_window": 8u64 << 20},
        "chunking": serde_json::to_value(pillbox_wire::Chunking::ours()).unwrap(),
    })
}

fn add_recipes(s: &mut State, id: &str, body: &[u8]) -> Response {
    let recipes = match Recipes::decode(body, RecipeLimits::DEFAULT) {
        Ok(r) => r,
        Err(e) => return problem(422, e.code(), &e.to_string()),
    };
    let Some(mut push) = s.pushes.remove(id) else {
        return problem(404, "not_found", "no such push");
    };
    let (pool, _, base_bodies) = base_pool(s, &push.bases);
    let mut missing = Vec::new();
    let mut bytes = 0;
    for r in &recipes.bodies {
        if r.body.size <= 256 << 10 || base_bodies.contains(&r.body) {
            s.pushes.insert(id.to_owned(), push);
            return problem(
                422,
                "recipe_not_needed",
                "no recipe is needed for that body",
            );
        }
        match expand(s, &push, r) {
            Ok(chunks) => {
                for c in &chunks {
                    if !push.uploaded.contains(c) && !pool.contains(c) {
                        missing.push(c.sha256.hex().to_string());
                        bytes += u64::from(c.size);
                    }
                }
                push.recipes.insert(r.body, chunks);
            }
            Err(e) => {
                s.pushes.insert(id.to_owned(), push);
                return problem(422, "recipe_invalid", &e);
            }
        }
    }
    s.pushes.insert(id.to_owned(), push);
    json(
        200,
        serde_json::json!({"missing_chunks": missing, "missing_bytes": bytes}),
    )
}

fn part(s: &mut State, id: &str, n: &str, body: &[u8]) -> Response {
    let frames = match decode_batch(body) {
        Ok(f) => f,
        Err(e) => return problem(422, e.code, &e.message),
    };
    let Some(push) = s.pushes.get_mut(id) else {
        return problem(404, "not_found", "no such push");
    };
    let number: u16 = n.parse().unwrap();
    let bytes: u64 = frames.iter().map(|(f, _)| u64::from(f.stored_size)).sum();
    push.parts.push((number, frames.len() as u32, bytes));
    for (f, _) in &frames {
        push.uploaded.insert(name_of(f));
    }
    for (f, d) in &frames {
        s.chunks
            .entry(name_of(f))
            .or_insert_with(|| (*f, d.clone()));
    }
    json(
        200,
        serde_json::json!({"push_id": id, "number": number, "frames": frames.len(), "bytes": bytes, "stored_bytes": bytes}),
    )
}

fn complete(s: &mut State, id: &str) -> Response {
    let Some(mut push) = s.pushes.remove(id) else {
        return problem(404, "not_found", "no such push");
    };
    if let Err(e) = prove(s, &mut push) {
        return problem(422, "member_digest_mismatch", &e);
    }
    let (missing, chunks, _) = missing_of(s, &push);
    if !missing.is_empty() {
        let all: Vec<String> = missing.into_iter().chain(chunks).collect();
        s.pushes.insert(id.to_owned(), push);
        return json(
            409,
            serde_json::json!({"error": {"code": "push_incomplete", "path": null, "offset": null, "message": "incomplete", "advice": "send them", "missing": all}}),
        );
    }
    let digest = push.digest;
    finish(s, &push);
    stored_answer(s, &digest, true)
}

/// Stores a packet whose every body is proven.
fn finish(s: &mut State, push: &OpenPush) {
    let manifest = packet_core::Manifest::parse(&push.json, &Limits::FORMAT).unwrap();
    let (_, base_recipes, _) = base_pool(s, &push.bases);
    let mut recipes = HashMap::new();
    let mut bodies = HashSet::new();
    for b in manifest.members.iter().filter_map(|m| m.body()) {
        bodies.insert(b);
        if b.size > 256 << 10 {
            let list = push
                .recipes
                .get(&b)
                .or_else(|| base_recipes.get(&b))
                .cloned()
                .expect("a proven large body has a recipe");
            recipes.insert(b, list);
        }
    }
    s.packets.insert(
        push.digest,
        StoredPacket {
            json: push.json.clone(),
            manifest_chunks: push.manifest_chunks.clone(),
            recipes,
            bodies,
        },
    );
}

fn read_chunks(s: &State, d: &str, body: &[u8]) -> Response {
    let Some(p) = stored(s, d) else {
        return problem(404, "not_found", "no such packet");
    };
    let asked: serde_json::Value = serde_json::from_slice(body).unwrap();
    let mine: HashSet<ChunkName> = p
        .manifest_chunks
        .iter()
        .copied()
        .chain(p.recipes.values().flatten().copied())
        .chain(
            p.bodies
                .iter()
                .filter(|b| b.size <= 1 << 20)
                .map(|b| ChunkName {
                    sha256: b.sha256,
                    size: b.size as u32,
                }),
        )
        .collect();
    let mut frames: Vec<(Frame, Vec<u8>)> = Vec::new();
    for h in asked["chunks"].as_array().unwrap() {
        let sha = Digest::from_hex(h.as_str().unwrap()).unwrap();
        let Some(c) = mine.iter().find(|c| c.sha256 == sha) else {
            return problem(400, "chunk_unknown", "not a chunk of this packet");
        };
        let (f, stored) = &s.chunks[c];
        frames.push((*f, stored.clone()));
    }
    let refs: Vec<(Frame, &[u8])> = frames.iter().map(|(f, d)| (*f, &d[..])).collect();
    Response {
        status: 200,
        content_type: chunks::MEDIA_TYPE,
        body: chunks::encode(&refs),
    }
}

#[cfg(test)]
mod frame_tests {
    use super::*;

    /// A chunk of `raw` sent as the zstd frame `stored`, as the frame
    /// table names it.
    fn zstd_frame(raw: &[u8], stored: &[u8]) -> Frame {
        Frame {
            sha256: Digest::of(raw),
            raw_size: raw.len() as u32,
            stored_size: stored.len() as u32,
            encoding: Encoding::Zstd,
        }
    }

    #[test]
    fn the_store_checks_a_frames_shape_as_the_worker_does_before_decoding() {
        let raw = b"one chunk of text, one chunk of text, one chunk of text".repeat(40);
        let whole = zstd::bulk::compress(&raw, 3).unwrap();
        let frame = zstd_frame(&raw, &whole);
        assert_eq!(unframe(&frame, &whole).unwrap(), raw);
        // Two frames that together decode to the chunk: libzstd takes
        // them, the wire's rule does not.
        let (head, tail) = raw.split_at(raw.len() / 2);
        let mut two = zstd::bulk::compress(head, 3).unwrap();
        two.extend(zstd::bulk::compress(tail, 3).unwrap());
        assert_eq!(zstd::bulk::decompress(&two, raw.len()).unwrap(), raw);
        let e = unframe(&zstd_frame(&raw, &two), &two).unwrap_err();
        assert_eq!(e.code, "chunk_frame_invalid", "{e:?}");
        // A frame declaring another size than the chunk's.
        let mut shorter = zstd_frame(&raw[1..], &whole);
        shorter.sha256 = frame.sha256;
        let e = unframe(&shorter, &whole).unwrap_err();
        assert_eq!(e.code, "chunk_frame_invalid", "{e:?}");
        // The right shape and size, other bytes.
        let other = zstd::bulk::compress(&vec![b'x'; raw.len()], 3).unwrap();
        let e = unframe(&frame, &other).unwrap_err();
        assert_eq!(e.code, "chunk_digest_mismatch", "{e:?}");
    }
}
