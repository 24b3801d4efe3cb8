//! # pillbox-worker
//!
//! The pillbox edge: a Cloudflare Worker that accepts session packets only
//! after packet-core has verified them, keeps their bytes in R2 (whole, or
//! as chunks in content-addressed packs) and indexes them in D1. The HTTP
//! API is `proto/openapi.yaml`; its behaviour and deployment are in
//! `docs/worker.md`, delta transfer and the storage model in
//! `docs/transfer.md`.
//!
//! Every JSON body it reads or answers is a type of the `pillbox-wire`
//! crate, which the CLI shares.
//!
//! | module | holds |
//! |---|---|
//! | [`route`] | the table of routes (path, methods and their operationIds, the scope needed), method + path → [`route::Route`] (pure) |
//! | [`query`] | query strings: pages, cursors, labels, filters (pure) |
//! | [`conditions`] | ETags, `If-Match` / `If-None-Match` (pure) |
//! | [`problem`] | refusals and their JSON bodies (pure) |
//! | [`auth`] | bearer tokens (hashed, constant-time), their scopes, what each route needs (pure) |
//! | [`range`] | HTTP `Range` → `Content-Range` (pure) |
//! | [`multipart`] | how an upload is cut into parts (pure) |
//! | [`config`] | settings from the Worker's variables, `GET /v1` (pure) |
//! | [`cost`] | what requests cost in D1 and R2: the counters, the `Pillbox-Cost` header (pure) |
//! | [`encoding`] | a request body's `Content-Encoding` (pure) |
//! | [`caps`] | what a request body may hold, the count that holds it there, what becomes of a refused one's rest (pure) |
//! | [`platform`] | a chunk's SHA-256 and a zstd frame decoded by the runtime (wasm; packet-core and `ruzstd` natively) |
//! | [`binary`] | the encoding of the Worker's own binary objects (pure) |
//! | [`storage`] | how packets are kept: keys, packs, layouts, roots, chunks, the D1 tables (one file each, rows beside their statements), streams into R2, reads and what they answer with, compaction, the clean-up (pure; its statements, streams, reads, answers, compaction's reads and clean-up are wasm) |
//! | [`push`] | a /2 push: what is at hand, recipes, the plan, proofs, the gate (pure; its flows through R2 and D1 are wasm) |
//! | [`upload`] | a packet uploaded whole, in one request or in parts: what the requests may carry (pure; its flows through R2 and D1 are wasm) |
//! | [`search`] | `GET /v1/search` by scanning manifests: a cursor, a page filled packet by packet (pure) |
//! | [`findings`] | the log line of a stored packet's findings (pure; logging it is wasm) |
//! | `body` | a request body read as it arrives, held to its cap (wasm) |
//! | `ingest` | frames streamed in (a push's create body, a part): checked, hashed, packed (wasm) |
//! | `meter` | the D1 and R2 bindings counted, when `BENCH_ROUTES` is `1` (wasm, with `js/meter.mjs`) |
//! | `api` | the router and one handler per route, by resource (wasm) |
//!
//! The pure modules build and test natively (`cargo test -p pillbox-worker`);
//! the rest builds for `wasm32-unknown-unknown` only.

// A `Problem` is an HTTP refusal on a request's error path: its size does
// not matter, and boxing it everywhere would only add noise.
#![allow(clippy::result_large_err)]

pub mod auth;
pub mod binary;
pub mod caps;
pub mod conditions;
pub mod config;
pub mod cost;
pub mod encoding;
pub mod findings;
pub mod multipart;
pub mod platform;
pub mod problem;
pub mod push;
pub mod query;
pub mod range;
pub mod route;
pub mod search;
pub mod storage;
pub mod upload;

#[cfg(target_arch = "wasm32")]
mod api;
#[cfg(target_arch = "wasm32")]
mod body;
#[cfg(target_arch = "wasm32")]
mod ingest;
#[cfg(target_arch = "wasm32")]
mod meter;
#[cfg(target_arch = "wasm32")]
mod timing;

#[cfg(target_arch = "wasm32")]
#[worker::event(fetch)]
async fn fetch(
    req: worker::Request,
    env: worker::Env,
    _ctx: worker::Context,
) -> worker::Result<worker::Response> {
    api::handle(req, env).await
}

/// The scheduled clean-up (`[triggers] crons` in wrangler.toml): discards
/// multipart uploads and pushes left unfinished for longer than
/// `UPLOAD_TTL_HOURS`, and deletes packs nothing uses any more.
#[cfg(target_arch = "wasm32")]
#[worker::event(scheduled)]
async fn scheduled(event: worker::ScheduledEvent, env: worker::Env, _ctx: worker::ScheduleContext) {
    match api::clean(&env, event.schedule()).await {
        Ok(storage::clean::Cleaned { uploads, pushes, packs }) => worker::console_log!(
            "clean-up: {uploads} unfinished upload(s) and {pushes} push(es) discarded, {packs} unused pack(s) deleted"
        ),
        Err(p) => worker::console_error!("clean-up: {}", p.to_json()),
    }
}
