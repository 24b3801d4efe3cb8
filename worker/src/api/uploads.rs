//! Multipart uploads (`/v1/uploads/…`, docs/worker.md "Multipart
//! uploads"): create, read, send parts, complete (assemble, verify, store,
//! index), abort; and the scheduled clean-up of uploads left unfinished.

use packet_core::Digest;
use pillbox_wire::{CreateUpload, PartStored};
use worker::{Bucket, D1Database, Env, Request, ResponseBody};

use super::http::{content_length, internal, json_response, no_content, read_json, Answer};
use super::packets::{indexed, refusal, stored, too_large};
use crate::config::Config;
use crate::index;
use crate::multipart::Plan;
use crate::problem::Problem;
use crate::query::upload_labels;
use crate::rows::{PartRow, UploadRow};
use crate::store;

/// Uploads discarded per D1 query by [`expire_uploads`].
const EXPIRE_BATCH: u32 = 50;
/// Most uploads one scheduled run discards (the rest wait for the next run).
const EXPIRE_PER_RUN: usize = 1000;

/// `POST /v1/uploads`: plans the parts and opens an R2 multipart upload,
/// unless the packet is stored already (200, nothing to send).
pub async fn create(
    req: &mut Request,
    bucket: &Bucket,
    db: &D1Database,
    config: &Config,
) -> Answer {
    let body: CreateUpload = read_json(req).await?;
    let digest = body
        .digest
        .parse::<Digest>()
        .map_err(Problem::from_packet_error_400)?;
    let labels = upload_labels(body.labels)?;
    if let Some(row) = index::packet(db, &digest).await.map_err(internal)? {
        index::add_labels(db, &digest, &labels)
            .await
            .map_err(internal)?;
        return json_response(200, &row.stored(false));
    }
    if let Some(p) = too_large(body.size, config) {
        return Err(p);
    }
    let plan = Plan::new(
        body.size,
        body.part_size,
        config.default_part_size,
        config.max_part_size(),
    )?;
    let id = index::new_upload_id(db).await.map_err(internal)?;
    let upload = bucket
        .create_multipart_upload(store::staging_key(&id))
        .execute()
        .await
        .map_err(internal)?;
    let row = UploadRow {
        id: id.clone(),
        digest: digest.to_string(),
        size: plan.size,
        part_size: plan.part_size,
        r2_upload_id: upload.upload_id().await,
        labels: serde_json::to_string(&labels).unwrap_or_else(|_| "[]".into()),
    };
    index::insert_upload(db, &row).await.map_err(internal)?;
    let mut response = json_response(201, &row.view(&[]))?;
    response
        .headers_mut()
        .set("location", &format!("/v1/uploads/{id}"))
        .map_err(internal)?;
    Ok(response)
}

/// The upload in progress with this id, or 404.
async fn in_progress(db: &D1Database, id: &str) -> Result<UploadRow, Problem> {
    index::upload(db, id)
        .await
        .map_err(internal)?
        .ok_or_else(|| {
            Problem::not_found(format!(
                "no upload {id} is in progress (finished, aborted or never created)"
            ))
        })
}

/// `GET /v1/uploads/{id}`: which parts arrived, which are missing.
pub async fn get(db: &D1Database, id: &str) -> Answer {
    let row = in_progress(db, id).await?;
    let parts = index::parts(db, id).await.map_err(internal)?;
    json_response(200, &row.view(&parts))
}

/// `PUT /v1/uploads/{id}/parts/{number}`: streams one part into R2.
pub async fn part(
    req: &Request,
    bucket: &Bucket,
    db: &D1Database,
    id: &str,
    number: u16,
) -> Answer {
    let row = in_progress(db, id).await?;
    let length = content_length(req)?;
    row.plan().check_part(number, length)?;
    let body = req
        .inner()
        .body()
        .ok_or_else(|| Problem::bad_request("body_invalid", "the part has no body"))?;
    let upload = bucket
        .resume_multipart_upload(store::staging_key(id), &row.r2_upload_id)
        .map_err(internal)?;
    let part = upload.upload_part(number, body).await.map_err(internal)?;
    let part = PartRow {
        number,
        etag: part.etag(),
        size: length,
    };
    index::put_part(db, id, &part).await.map_err(internal)?;
    json_response(
        200,
        &PartStored {
            upload_id: id.to_string(),
            number,
            size: length,
        },
    )
}

/// `DELETE /v1/uploads/{id}`
pub async fn abort(bucket: &Bucket, db: &D1Database, id: &str) -> Answer {
    let row = in_progress(db, id).await?;
    discard(bucket, db, &row).await?;
    no_content()
}

/// Aborts an upload's R2 multipart upload, deletes its staging object (if
/// the parts were assembled) and its D1 rows.
async fn discard(bucket: &Bucket, db: &D1Database, row: &UploadRow) -> Result<(), Problem> {
    let key = store::staging_key(&row.id);
    if let Ok(upload) = bucket.resume_multipart_upload(key.clone(), &row.r2_upload_id) {
        // Already completed or aborted uploads fail here; the staging object goes below.
        let _ = upload.abort().await;
    }
    bucket.delete(key).await.map_err(internal)?;
    index::delete_upload(db, &row.id).await.map_err(internal)
}

/// The scheduled clean-up: discards every multipart upload started more
/// than `UPLOAD_TTL_HOURS` before `now_ms` (its R2 parts, staging object and
/// D1 rows). Returns how many it discarded.
pub async fn expire_uploads(env: &Env, now_ms: f64) -> Result<usize, Problem> {
    let config = super::config(env);
    let bucket = super::bucket(env)?;
    let db = super::database(env)?;
    let cutoff = String::from(
        js_sys::Date::new(&wasm_bindgen::JsValue::from_f64(
            now_ms - config.upload_ttl_ms as f64,
        ))
        .to_iso_string(),
    );
    let mut discarded = 0;
    while discarded < EXPIRE_PER_RUN {
        let rows = index::uploads_created_before(&db, &cutoff, EXPIRE_BATCH)
            .await
            .map_err(internal)?;
        if rows.is_empty() {
            break;
        }
        for row in &rows {
            discard(&bucket, &db, row).await?;
            discarded += 1;
        }
    }
    Ok(discarded)
}

/// `POST /v1/uploads/{id}/complete`: R2 assembles the parts, the result is
/// streamed back through packet-core into the packet's key, then indexed.
pub async fn complete(bucket: &Bucket, db: &D1Database, config: &Config, id: &str) -> Answer {
    let row = in_progress(db, id).await?;
    let plan = row.plan();
    let digest = row
        .digest
        .parse::<Digest>()
        .map_err(Problem::from_packet_error_400)?;
    let labels: Vec<String> = serde_json::from_str(&row.labels).unwrap_or_default();
    let staging = store::staging_key(id);
    if index::packet(db, &digest)
        .await
        .map_err(internal)?
        .is_some()
    {
        // Another upload of the same packet finished first.
        abort(bucket, db, id).await?;
        index::add_labels(db, &digest, &labels)
            .await
            .map_err(internal)?;
        let row = indexed(db, &digest).await?;
        return json_response(200, &row.stored(false));
    }
    let parts = index::parts(db, id).await.map_err(internal)?;
    let received: Vec<u16> = parts.iter().map(|p| p.number).collect();
    let missing = plan.missing(&received);
    if !missing.is_empty() {
        return Err(Problem::conflict(
            "upload_incomplete",
            format!("parts still missing: {missing:?}"),
            "upload the missing parts (GET the upload to see them), then complete again",
        ));
    }
    let assembled = match bucket.head(staging.clone()).await.map_err(internal)? {
        // A retried complete: the parts were assembled before.
        Some(object) if object.size() == plan.size => true,
        _ => false,
    };
    if !assembled {
        let upload = bucket
            .resume_multipart_upload(staging.clone(), &row.r2_upload_id)
            .map_err(internal)?;
        let uploaded = parts
            .iter()
            .map(|p| worker::UploadedPart::new(p.number, p.etag.clone()));
        upload.complete(uploaded).await.map_err(|e| {
            Problem::conflict(
                "upload_not_assembled",
                format!("R2 could not assemble the parts: {e}"),
                "upload the parts again (or start a new upload), then complete again",
            )
        })?;
    }
    let object = bucket
        .get(staging.clone())
        .execute()
        .await
        .map_err(internal)?
        .ok_or_else(|| Problem::internal("the assembled upload is missing"))?;
    let source = match object
        .body()
        .ok_or_else(|| Problem::internal("R2 returned no body"))?
        .response_body()
        .map_err(internal)?
    {
        ResponseBody::Stream(stream) => stream,
        _ => return Err(Problem::internal("R2 returned no stream")),
    };
    let result = store::verify_into_bucket(
        bucket,
        source,
        plan.size,
        digest,
        config.limits,
        config.packet_hasher,
    )
    .await;
    let outcome = match result {
        Ok(indexed) => {
            if let Some(line) = crate::findings::log_line(&indexed.digest, &indexed.findings) {
                worker::console_warn!("{line}");
            }
            index::insert_packet(db, &indexed, &labels)
                .await
                .map_err(internal)
        }
        Err(e) => Err(refusal(e)),
    };
    if matches!(&outcome, Ok(()) | Err(Problem { status: 422, .. })) {
        // Verified and indexed, or refused: either way the staging copy goes.
        bucket.delete(staging).await.map_err(internal)?;
        index::delete_upload(db, id).await.map_err(internal)?;
    }
    outcome?;
    stored(db, &digest).await
}
