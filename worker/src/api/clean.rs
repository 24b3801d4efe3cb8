//! The scheduled clean-up (`[triggers] crons` in wrangler.toml;
//! docs/transfer.md, "Clean-up"): discards multipart uploads and pushes left unfinished for
//! longer than `UPLOAD_TTL_HOURS`, then deletes the packs no stored packet
//! and no open push uses any more, older than the same TTL, with their
//! chunks' rows. Each kind is bounded per run; the rest waits for the next.

use worker::Env;

use super::http::internal;
use super::{pushes, uploads};
use crate::problem::Problem;
use crate::storage::index::packs;

/// Uploads, and pushes, discarded per run at most.
const SESSIONS_PER_RUN: usize = 1000;
/// Packs looked at per run at most.
const PACKS_PER_RUN: u32 = 500;

/// What one run did.
pub struct Cleaned {
    /// Multipart uploads discarded.
    pub uploads: usize,
    /// Pushes discarded.
    pub pushes: usize,
    /// Packs deleted.
    pub packs: usize,
}

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
    let cutoff = String::from(
        js_sys::Date::new(&wasm_bindgen::JsValue::from_f64(
            now_ms - config.upload_ttl_ms as f64,
        ))
        .to_iso_string(),
    );
    let uploads = uploads::expire(&bucket, &db, &cutoff, SESSIONS_PER_RUN).await?;
    let mut discarded = 0;
    while discarded < SESSIONS_PER_RUN {
        let rows = crate::storage::index::pushes::created_before(&db, &cutoff, 50)
            .await
            .map_err(internal)?;
        if rows.is_empty() {
            break;
        }
        for row in &rows {
            pushes::discard(&bucket, &db, &row.id).await?;
            discarded += 1;
        }
    }
    let mut packs = 0;
    for key in packs::to_check(&db, &cutoff, PACKS_PER_RUN)
        .await
        .map_err(internal)?
    {
        if packs::collect(&db, &key).await.map_err(internal)? {
            // Its row is gone: nothing can start using it, so its bytes go.
            bucket.delete(key).await.map_err(internal)?;
            packs += 1;
        }
    }
    Ok(Cleaned {
        uploads,
        pushes: discarded,
        packs,
    })
}
