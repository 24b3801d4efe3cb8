//! # pillbox-worker
//!
//! The pillbox edge: a Cloudflare Worker that accepts session packets only
//! after packet-core has verified them, keeps their bytes in R2 under their
//! digest and indexes them in D1. The HTTP API is `proto/openapi.yaml`; its
//! behaviour and deployment are in `docs/worker.md`.
//!
//! Every JSON body it reads or answers is a type of the `pillbox-wire`
//! crate, which the CLI shares.
//!
//! | module | holds |
//! |---|---|
//! | [`route`] | method + path → [`route::Route`] (pure) |
//! | [`query`] | query strings: pages, cursors, labels, filters (pure) |
//! | [`conditions`] | ETags, `If-Match` / `If-None-Match` (pure) |
//! | [`problem`] | refusals and their JSON bodies (pure) |
//! | [`rows`] | the index's rows and the answers built from them (pure) |
//! | [`auth`] | bearer tokens, constant-time comparison (pure) |
//! | [`range`] | HTTP `Range` → `Content-Range` (pure) |
//! | [`multipart`] | how an upload is cut into parts (pure) |
//! | [`config`] | settings from the Worker's variables, `GET /v1` (pure) |
//! | [`findings`] | the log line of a stored packet's findings (pure) |
//! | `store` | streams between requests, packet-core's reader and R2 (wasm) |
//! | `index` | the D1 queries (wasm) |
//! | `api` | the router and one handler per route, by resource (wasm) |
//!
//! The pure modules build and test natively (`cargo test -p pillbox-worker`);
//! the rest builds for `wasm32-unknown-unknown` only.

// A `Problem` is an HTTP refusal on a request's error path: its size does
// not matter, and boxing it everywhere would only add noise.
#![allow(clippy::result_large_err)]

pub mod auth;
pub mod conditions;
pub mod config;
pub mod findings;
pub mod multipart;
pub mod problem;
pub mod query;
pub mod range;
pub mod route;
pub mod rows;

#[cfg(target_arch = "wasm32")]
mod api;
#[cfg(target_arch = "wasm32")]
mod index;
#[cfg(target_arch = "wasm32")]
mod store;

#[cfg(target_arch = "wasm32")]
#[worker::event(fetch)]
async fn fetch(
    req: worker::Request,
    env: worker::Env,
    _ctx: worker::Context,
) -> worker::Result<worker::Response> {
    api::handle(req, env).await
}

/// The scheduled clean-up (`[triggers] crons` in wrangler.toml): aborts
/// multipart uploads left unfinished for longer than `UPLOAD_TTL_HOURS`.
#[cfg(target_arch = "wasm32")]
#[worker::event(scheduled)]
async fn scheduled(event: worker::ScheduledEvent, env: worker::Env, _ctx: worker::ScheduleContext) {
    match api::expire_uploads(&env, event.schedule()).await {
        Ok(n) => worker::console_log!("expired {n} unfinished upload(s)"),
        Err(p) => worker::console_error!("expiring unfinished uploads: {}", p.to_json()),
    }
}
