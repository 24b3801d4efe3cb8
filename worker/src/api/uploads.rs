//! Multipart uploads (`/v1/uploads/…`, docs/worker.md "Multipart
//! uploads"): create, read, send parts, complete (assemble, verify by
//! reading the assembled object once, which then is the packet's object,
//! index), abort. Discarding an upload, here and in the clean-up, is
//! [`crate::storage::clean::discard_upload`].

use packet_core::Digest;
use pillbox_wire::ApiCode;
use pillbox_wire::{CreateUpload, PartStored};
use worker::{Bucket, D1Database, Request};

use super::http::{content_length, internal, json_response, no_content, read_json, Answer};
use super::packets::{already_stored, indexed, refusal, stored, too_large};
use crate::config::Config;
use crate::multipart::Plan;
use crate::problem::Problem;
use crate::query::upload_labels;
use crate::storage::clean::discard_upload;
use crate::storage::findings::KeptFindings;
use crate::storage::index::new_id;
use crate::storage::index::packets::{self, NewPacket, NewStorage};
use crate::storage::index::uploads::{self, PartRow, UploadRow};
use crate::storage::keys;
use crate::storage::stream::{self, StoreError};

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
    if let Some(row) = packets::get(db, &digest).await.map_err(internal)? {
        return already_stored(db, row, &labels).await;
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
    let id = new_id(db).await.map_err(internal)?;
    let upload = bucket
        .create_multipart_upload(keys::upload(&id))
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
    uploads::insert(db, &row).await.map_err(internal)?;
    let mut response = json_response(201, &row.view(&[]))?;
    response
        .headers_mut()
        .set("location", &format!("/v1/uploads/{id}"))
        .map_err(internal)?;
    Ok(response)
}

/// The upload in progress with this id, or 404.
async fn in_progress(db: &D1Database, id: &str) -> Result<UploadRow, Problem> {
    uploads::get(db, id)
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
    let parts = uploads::parts(db, id).await.map_err(internal)?;
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
    super::http::identity_only(req)?;
    let row = in_progress(db, id).await?;
    let length = content_length(req)?;
    row.plan().check_part(number, length)?;
    let body = req
        .inner()
        .body()
        .ok_or_else(|| Problem::bad_request(ApiCode::BodyInvalid, "the part has no body"))?;
    let upload = bucket
        .resume_multipart_upload(keys::upload(id), &row.r2_upload_id)
        .map_err(internal)?;
    let part = crate::timing::timed(
        crate::timing::Stage::R2Write,
        upload.upload_part(number, body),
    )
    .await
    .map_err(internal)?;
    let part = PartRow {
        number,
        etag: part.etag(),
        size: length,
    };
    uploads::put_part(db, id, &part).await.map_err(internal)?;
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
    if !discard_upload(bucket, db, &row).await.map_err(internal)? {
        return Err(Problem::not_found(format!("no upload {id} is in progress")));
    }
    no_content()
}

/// `POST /v1/uploads/{id}/complete`: R2 assembles the parts into the
/// staging object, which is verified by reading it once through
/// packet-core and then kept as the packet's object.
pub async fn complete(bucket: &Bucket, db: &D1Database, config: &Config, id: &str) -> Answer {
    let row = in_progress(db, id).await?;
    let plan = row.plan();
    let digest = row
        .digest
        .parse::<Digest>()
        .map_err(Problem::from_packet_error_400)?;
    let labels: Vec<String> = serde_json::from_str(&row.labels).unwrap_or_default();
    let staging = keys::upload(id);
    if let Some(existing) = packets::get(db, &digest).await.map_err(internal)? {
        // Another upload of the same packet finished first.
        discard_upload(bucket, db, &row).await.map_err(internal)?;
        return already_stored(db, existing, &labels).await;
    }
    let parts = uploads::parts(db, id).await.map_err(internal)?;
    let received: Vec<u16> = parts.iter().map(|p| p.number).collect();
    let missing = plan.missing(&received);
    if !missing.is_empty() {
        return Err(Problem::new(
            ApiCode::UploadIncomplete,
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
        crate::timing::timed(crate::timing::Stage::R2Write, upload.complete(uploaded))
            .await
            .map_err(|e| {
                Problem::new(
                    ApiCode::UploadNotAssembled,
                    format!("R2 could not assemble the parts: {e}"),
                    "upload the parts again (or start a new upload), then complete again",
                )
            })?;
    }
    let verified = match stream::verify_object(
        bucket,
        &staging,
        plan.size,
        digest,
        config.limits,
        config.packet_hasher,
    )
    .await
    {
        Ok(v) => v,
        Err(e @ StoreError::Refused(_)) => {
            // Refused: the staging object and the upload go.
            discard_upload(bucket, db, &row).await.map_err(internal)?;
            return Err(refusal(e));
        }
        Err(e) => return Err(refusal(e)),
    };
    let packs = [staging.clone()];
    let new = NewPacket {
        digest: &digest,
        size: plan.size,
        manifest: &verified.manifest,
        manifest_range: verified.manifest_range.clone(),
        storage: NewStorage::Whole { key: &staging },
        packs: &packs,
        labels: &labels,
        findings: KeptFindings::of(&verified.findings).to_text(),
    };
    if !uploads::complete(db, &new, id, &staging)
        .await
        .map_err(internal)?
    {
        return Err(Problem::not_found(format!(
            "upload {id} was discarded while it was being completed (older than UPLOAD_TTL_HOURS)"
        )));
    }
    super::log_findings(&digest, &verified.findings);
    let now = indexed(db, &digest).await?;
    if now.object_key.as_deref() == Some(staging.as_str()) {
        stored(db, &digest).await
    } else {
        json_response(200, &now.stored(false))
    }
}
