//! # pillbox-worker
//!
//! The pillbox edge: a Cloudflare Worker that accepts session packets only
//! after packet-core has verified them, keeps their bytes in R2 under their
//! digest and indexes them in D1. The HTTP API is `proto/openapi.yaml`; its
//! behaviour and deployment are in `docs/worker.md`.
//!
//! | module | holds |
//! |---|---|
//! | [`route`] | method + path → [`route::Route`] (pure) |
//! | [`problem`] | refusals and their JSON bodies (pure) |
//! | [`auth`] | bearer tokens, constant-time comparison (pure) |
//! | [`range`] | HTTP `Range` → `Content-Range` (pure) |
//! | [`multipart`] | how an upload is cut into parts (pure) |
//! | [`config`] | settings from the Worker's variables (pure) |
//! | `store` | streams between requests, packet-core's reader and R2 (wasm) |
//! | `index` | the D1 queries (wasm) |
//! | `api` | one handler per route (wasm) |
//!
//! The pure modules build and test natively (`cargo test -p pillbox-worker`);
//! the rest builds for `wasm32-unknown-unknown` only.

// A `Problem` is an HTTP refusal on a request's error path: its size does
// not matter, and boxing it everywhere would only add noise.
#![allow(clippy::result_large_err)]

pub mod auth;
pub mod config;
pub mod multipart;
pub mod problem;
pub mod range;
pub mod route;

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
