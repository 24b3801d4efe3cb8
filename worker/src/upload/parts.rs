//! A multipart upload (docs/worker.md, "Multipart uploads"): found while
//! it is in progress, opened (its id, R2's multipart upload into its
//! staging object, its row), a part streamed into R2 and recorded,
//! aborted, and completed: R2 assembles the parts into the staging object,
//! which is verified by reading it once through packet-core and then
//! indexed as the packet's object in the transaction that forgets the
//! upload. Discarding an upload, here and in the clean-up, is
//! [`crate::storage::clean::discard_upload`].

use packet_core::Digest;
use pillbox_wire::ApiCode;
use web_sys::ReadableStream;
use worker::{Bucket, D1Database};

use crate::config::Config;
use crate::multipart::Plan;
use crate::problem::{internal, Problem};
use crate::storage::clean::discard_upload;
use crate::storage::findings::KeptFindings;
use crate::storage::index::new_id;
use crate::storage::index::packets::{self, NewPacket, NewStorage, PacketRow};
use crate::storage::index::uploads::{self, PartRow, UploadRow};
use crate::storage::keys;
use crate::storage::load::indexed;
use crate::storage::stream::{self, StoreError};
use crate::timing::{self, Stage};

/// The upload in progress with this id, or 404.
pub async fn in_progress(db: &D1Database, id: &str) -> Result<UploadRow, Problem> {
    uploads::get(db, id)
        .await
        .map_err(internal)?
        .ok_or_else(|| {
            Problem::not_found(format!(
                "no upload {id} is in progress (finished, aborted or never created)"
            ))
        })
}

/// Opens an upload of the packet `digest`, cut as `plan`, that attaches
/// `labels`: its row.
pub async fn open(
    bucket: &Bucket,
    db: &D1Database,
    digest: &Digest,
    plan: Plan,
    labels: &[String],
) -> Result<UploadRow, Problem> {
    let id = new_id(db).await.map_err(internal)?;
    let upload = bucket
        .create_multipart_upload(keys::upload(&id))
        .execute()
        .await
        .map_err(internal)?;
    let row = UploadRow {
        id,
        digest: digest.to_string(),
        size: plan.size,
        part_size: plan.part_size,
        r2_upload_id: upload.upload_id().await,
        labels: serde_json::to_string(labels).unwrap_or_else(|_| "[]".into()),
    };
    uploads::insert(db, &row).await.map_err(internal)?;
    Ok(row)
}

/// Streams part `number` of the upload `row` (`length` bytes of `body`,
/// checked against its plan) into R2 and records its etag.
pub async fn put_part(
    bucket: &Bucket,
    db: &D1Database,
    row: &UploadRow,
    number: u16,
    length: u64,
    body: ReadableStream,
) -> Result<(), Problem> {
    let upload = bucket
        .resume_multipart_upload(keys::upload(&row.id), &row.r2_upload_id)
        .map_err(internal)?;
    let part = timing::timed(Stage::R2Write, upload.upload_part(number, body))
        .await
        .map_err(internal)?;
    let part = PartRow {
        number,
        etag: part.etag(),
        size: length,
    };
    uploads::put_part(db, &row.id, &part)
        .await
        .map_err(internal)
}

/// Aborts the upload `row`: 404 if another request discarded it first.
pub async fn abort(bucket: &Bucket, db: &D1Database, row: &UploadRow) -> Result<(), Problem> {
    if !discard_upload(bucket, db, row).await.map_err(internal)? {
        return Err(Problem::not_found(format!(
            "no upload {} is in progress",
            row.id
        )));
    }
    Ok(())
}

/// How a complete ended.
pub enum Completed {
    /// Another upload of the same packet stored it first (its row): this
    /// one is discarded.
    Before(PacketRow),
    /// Stored by this request: the object it assembled is the packet's
    /// (its row).
    Stored(PacketRow),
    /// Indexed meanwhile by another upload of the same packet (its row).
    Raced(PacketRow),
}

/// Completes the upload `row`: 409 `upload_incomplete` while parts are
/// missing; R2 assembles the parts into the staging object (unless a
/// complete before did), packet-core reads it once, and it is indexed as
/// the packet's object with the upload forgotten. A refused packet
/// discards the upload.
pub async fn complete(
    bucket: &Bucket,
    db: &D1Database,
    config: &Config,
    row: &UploadRow,
) -> Result<Completed, Problem> {
    let id = row.id.as_str();
    let plan = row.plan();
    let digest = row
        .digest
        .parse::<Digest>()
        .map_err(Problem::from_packet_error_400)?;
    let labels = row.label_list();
    let staging = keys::upload(id);
    if let Some(existing) = packets::get(db, &digest).await.map_err(internal)? {
        // Another upload of the same packet finished first.
        discard_upload(bucket, db, row).await.map_err(internal)?;
        return Ok(Completed::Before(existing));
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
        timing::timed(Stage::R2Write, upload.complete(uploaded))
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
            discard_upload(bucket, db, row).await.map_err(internal)?;
            return Err(e.problem());
        }
        Err(e) => return Err(e.problem()),
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
    crate::findings::log(&digest, &verified.findings);
    let now = indexed(db, &digest).await?;
    if now.object_key.as_deref() == Some(staging.as_str()) {
        Ok(Completed::Stored(now))
    } else {
        Ok(Completed::Raced(now))
    }
}
