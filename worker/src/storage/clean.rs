//! The clean-up (docs/transfer.md, "Clean-up"), run by the scheduled
//! handler: discards multipart uploads and pushes left unfinished for
//! longer than `UPLOAD_TTL_HOURS`, then deletes the packs no stored packet
//! and no open push uses any more, older than the same TTL, with their
//! chunks' rows. Each kind is bounded per run; the rest waits for the
//! next. Also here: discarding one upload (an abort, a refused complete)
//! or one push, and deleting a packet, whose bytes the clean-up collects.

use packet_core::Digest;
use worker::{Bucket, D1Database, Result};

use super::index::packets::{self, PacketRow, Storage};
use super::index::packs;
use super::index::pushes::{self, PushRow};
use super::index::uploads::{self, UploadRow};
use super::keys;
use super::load;

/// Uploads, and pushes, discarded per run at most.
const SESSIONS_PER_RUN: usize = 1000;
/// Packs looked at per run at most.
const PACKS_PER_RUN: u32 = 500;
/// Uploads, or pushes, read per look.
const ROWS_PER_LOOK: u32 = 50;

/// What one run did.
pub struct Cleaned {
    /// Multipart uploads discarded.
    pub uploads: usize,
    /// Pushes discarded.
    pub pushes: usize,
    /// Packs deleted.
    pub packs: usize,
}

/// One run of the clean-up: what was started or created before `cutoff`
/// (RFC 3339, UTC) and left goes.
pub async fn run(bucket: &Bucket, db: &D1Database, cutoff: &str) -> Result<Cleaned> {
    let uploads = expire(
        SESSIONS_PER_RUN,
        async || uploads::created_before(db, cutoff, ROWS_PER_LOOK).await,
        async |row: &UploadRow| discard_upload(bucket, db, row).await.map(drop),
    )
    .await?;
    // A push goes however active it is.
    let pushes = expire(
        SESSIONS_PER_RUN,
        async || pushes::created_before(db, cutoff, ROWS_PER_LOOK).await,
        async |row: &PushRow| discard_push(bucket, db, &row.id).await,
    )
    .await?;
    let packs = collect_packs(bucket, db, cutoff, PACKS_PER_RUN).await?;
    Ok(Cleaned {
        uploads,
        pushes,
        packs,
    })
}

/// The cutoff of a run at `now_ms` (milliseconds since the epoch) for
/// what is older than `ttl_ms`, RFC 3339 in UTC.
pub fn cutoff(now_ms: f64, ttl_ms: u64) -> String {
    String::from(
        js_sys::Date::new(&wasm_bindgen::JsValue::from_f64(now_ms - ttl_ms as f64)).to_iso_string(),
    )
}

/// Discards an upload: its rows first (claiming it, so that a `complete`
/// finishing at the same moment either stored the packet before, and the
/// staging object is the packet's, or stores nothing), then its R2
/// multipart upload and staging object. Returns whether it was there.
pub async fn discard_upload(bucket: &Bucket, db: &D1Database, row: &UploadRow) -> Result<bool> {
    let key = keys::upload(&row.id);
    if !uploads::claim(db, &row.id, &key, row.size).await? {
        return Ok(false);
    }
    if let Ok(upload) = bucket.resume_multipart_upload(key.clone(), &row.r2_upload_id) {
        // Already completed or aborted uploads fail here; the staging object goes below.
        let _ = upload.abort().await;
    }
    bucket.delete(key).await?;
    Ok(true)
}

/// Discards an open push: the isolate's copy of its manifest, its objects
/// (manifest, recipes, part records) and its rows; the packs it used are
/// left to a later run.
pub async fn discard_push(bucket: &Bucket, db: &D1Database, id: &str) -> Result<()> {
    crate::push::opened::forget(id);
    delete_push_objects(bucket, db, id).await;
    pushes::discard(db, id).await
}

/// Deletes a push's own R2 objects (manifest, recipes, part records), as
/// it ends either way; its packs go with the clean-up.
pub async fn delete_push_objects(bucket: &Bucket, db: &D1Database, id: &str) {
    let parts = pushes::parts(db, id).await.unwrap_or_default();
    for key in [keys::push_manifest(id), keys::push_recipes(id)]
        .into_iter()
        .chain(parts.iter().map(|p| p.record.clone()))
    {
        let _ = bucket.delete(key).await;
    }
}

/// Deletes the packet `digest` (its row `row`), unless a ref names it:
/// its rows now (its packs are marked for the clean-up), the isolate's
/// copy, and a chunked packet's manifest and layout objects; its bytes go
/// with the next clean-up that finds them unused. Returns the refs that
/// point at it (then nothing was deleted).
pub async fn delete_packet(
    bucket: &Bucket,
    db: &D1Database,
    digest: &Digest,
    row: &PacketRow,
) -> Result<Vec<String>> {
    let refs = packets::delete(db, digest).await?;
    if !refs.is_empty() {
        return Ok(refs);
    }
    load::forget(&row.digest);
    if let Some(Storage::Chunked { layout, manifest }) = row.storage() {
        for key in [layout, manifest] {
            bucket.delete(key).await?;
        }
    }
    Ok(Vec::new())
}

/// Discards what `older` finds (a look at a time) with `discard`, until a
/// look finds nothing or `limit` are discarded. Returns how many were.
async fn expire<R>(
    limit: usize,
    older: impl AsyncFn() -> Result<Vec<R>>,
    discard: impl AsyncFn(&R) -> Result<()>,
) -> Result<usize> {
    let mut discarded = 0;
    while discarded < limit {
        let rows = older().await?;
        if rows.is_empty() {
            break;
        }
        for row in &rows {
            discard(row).await?;
            discarded += 1;
        }
    }
    Ok(discarded)
}

/// Deletes the packs marked for a look, created before `cutoff`, that no
/// one uses (at most `limit` looked at); unmarks the others. Returns how
/// many it deleted.
async fn collect_packs(
    bucket: &Bucket,
    db: &D1Database,
    cutoff: &str,
    limit: u32,
) -> Result<usize> {
    let mut deleted = 0;
    for key in packs::to_check(db, cutoff, limit).await? {
        if packs::collect(db, &key).await? {
            // Its row is gone: nothing can start using it, so its bytes go.
            bucket.delete(key).await?;
            deleted += 1;
        }
    }
    Ok(deleted)
}
