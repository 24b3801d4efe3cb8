//! Multipart uploads (`/v1/uploads/…`, docs/worker.md "Multipart
//! uploads"): create, read, send parts, complete, abort. Each handler
//! parses the request, authorises (its caller did), calls one function of
//! [`crate::upload::parts`] (opening the upload, storing a part, assembling
//! and verifying it, discarding it) and answers.

use pillbox_wire::ApiCode;
use pillbox_wire::PartStored;
use worker::{Bucket, D1Database, Request};

use super::http::{content_length, internal, json_response, no_content, read_json, Answer};
use super::packets::{already_stored, stored, too_large};
use crate::config::Config;
use crate::multipart::Plan;
use crate::problem::Problem;
use crate::storage::index::packets;
use crate::storage::index::uploads;
use crate::upload::parts::{self, in_progress, Completed};
use crate::upload::request::Create;

/// `POST /v1/uploads`: plans the parts and opens an R2 multipart upload,
/// unless the packet is stored already (200, nothing to send).
pub async fn create(
    req: &mut Request,
    bucket: &Bucket,
    db: &D1Database,
    config: &Config,
) -> Answer {
    let asked = Create::parse(read_json(req).await?)?;
    if let Some(row) = packets::get(db, &asked.digest).await.map_err(internal)? {
        return already_stored(db, row, &asked.labels).await;
    }
    if let Some(p) = too_large(asked.size, config) {
        return Err(p);
    }
    let plan = Plan::new(
        asked.size,
        asked.part_size,
        config.default_part_size,
        config.max_part_size(),
    )?;
    let row = parts::open(bucket, db, &asked.digest, plan, &asked.labels).await?;
    let mut response = json_response(201, &row.view(&[]))?;
    response
        .headers_mut()
        .set("location", &format!("/v1/uploads/{}", row.id))
        .map_err(internal)?;
    Ok(response)
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
    parts::put_part(bucket, db, &row, number, length, body).await?;
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
    parts::abort(bucket, db, &row).await?;
    no_content()
}

/// `POST /v1/uploads/{id}/complete`: R2 assembles the parts into the
/// staging object, which is verified by reading it once through
/// packet-core and then kept as the packet's object.
pub async fn complete(bucket: &Bucket, db: &D1Database, config: &Config, id: &str) -> Answer {
    let row = in_progress(db, id).await?;
    match parts::complete(bucket, db, config, &row).await? {
        Completed::Before(existing) => already_stored(db, existing, &row.label_list()).await,
        Completed::Stored(row) => stored(&row),
        Completed::Raced(now) => json_response(200, &now.stored(false)),
    }
}
