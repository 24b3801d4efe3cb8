//! The scheduled clean-up's bindings: the run itself is
//! [`crate::storage::clean`]; here its database and bucket are opened
//! (counted when `BENCH_ROUTES` is `1`) and its cutoff is taken from
//! `UPLOAD_TTL_HOURS`.

use worker::Env;

use super::http::internal;
use crate::problem::Problem;
use crate::storage::clean::{self, Cleaned};

/// One run of the clean-up at `now_ms`.
pub async fn clean(env: &Env, now_ms: f64) -> Result<Cleaned, Problem> {
    let config = super::config(env);
    // Counted into the isolate's totals (docs/worker.md, "Costs").
    let metered;
    let env = if config.bench_routes {
        metered = crate::meter::Meter::wrap(env.clone(), super::DATABASE, super::BUCKET).0;
        &metered
    } else {
        env
    };
    let bucket = super::bucket(env)?;
    let db = super::database(env)?;
    let cutoff = clean::cutoff(now_ms, config.upload_ttl_ms);
    clean::run(&bucket, &db, &cutoff).await.map_err(internal)
}
