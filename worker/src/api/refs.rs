//! `/v1/refs/…`: names for packets. A ref is created only if it does not
//! exist and moved only from the digest the writer expects
//! (compare-and-swap), so two writers never silently overwrite each other.

use packet_core::Digest;
use pillbox_wire::PutRef;
use worker::{D1Database, Request};

use super::http::{header, internal, json_response, no_content, read_json, Answer};
use crate::conditions::{condition_digest, etag, ref_write, RefWrite};
use crate::index;
use crate::problem::Problem;
use crate::query::Query;
use crate::rows::{self, RefRow};

/// `GET /v1/refs/{name}`; the ETag is the digest it holds.
pub async fn get(db: &D1Database, name: &str) -> Answer {
    let row = index::get_ref(db, name)
        .await
        .map_err(internal)?
        .ok_or_else(|| Problem::not_found(format!("no ref {name:?}")))?;
    let mut response = json_response(200, &row.to_wire())?;
    response
        .headers_mut()
        .set("etag", &etag(&row.digest))
        .map_err(internal)?;
    Ok(response)
}

/// `GET /v1/refs`: by name, after `cursor`, starting with `prefix`.
pub async fn list(db: &D1Database, query: &Query) -> Answer {
    let prefix = query.get("prefix").unwrap_or("");
    let after = query.get("cursor").unwrap_or("");
    let (rows, next) = index::list_refs(db, prefix, after, query.limit()?)
        .await
        .map_err(internal)?;
    json_response(200, &rows::ref_page(&rows, next))
}

/// 409 `ref_conflict`, with the digest the ref holds now (`current`,
/// null if it does not exist) so the writer can decide again.
async fn conflict(db: &D1Database, name: &str, wanted: &str) -> Problem {
    let current = index::get_ref(db, name)
        .await
        .ok()
        .flatten()
        .map(|r| r.digest);
    let mut p = Problem::conflict(
        "ref_conflict",
        match &current {
            Some(d) => format!("ref {name:?} holds {d}, not {wanted}"),
            None => format!("ref {name:?} does not exist, so it does not hold {wanted}"),
        },
        "read the ref again, decide, and retry with If-Match set to the digest it holds (or no If-Match to create it)",
    );
    p.error.current = Some(current);
    p
}

/// The ref just written.
async fn written(db: &D1Database, name: &str) -> Result<RefRow, Problem> {
    index::get_ref(db, name)
        .await
        .map_err(internal)?
        .ok_or_else(|| Problem::internal("ref vanished"))
}

/// `PUT /v1/refs/{name}`: create (201) or move (200) the ref to a stored
/// packet.
pub async fn put(req: &mut Request, db: &D1Database, name: &str) -> Answer {
    let if_match = header(req, "if-match");
    let if_none_match = header(req, "if-none-match");
    let body: PutRef = read_json(req).await?;
    let digest = body
        .digest
        .parse::<Digest>()
        .map_err(Problem::from_packet_error_400)?;
    if index::packet(db, &digest)
        .await
        .map_err(internal)?
        .is_none()
    {
        return Err(Problem::not_found(format!(
            "no packet {digest} is stored: upload it before naming it"
        )));
    }
    match ref_write(if_match.as_deref(), if_none_match.as_deref())? {
        RefWrite::Move { expected } => {
            if index::swap_ref(db, name, &expected, &digest)
                .await
                .map_err(internal)?
            {
                let row = written(db, name).await?;
                json_response(200, &row.changed(Some(expected.to_string())))
            } else {
                Err(conflict(db, name, &expected.to_string()).await)
            }
        }
        RefWrite::Create => {
            if index::create_ref(db, name, &digest)
                .await
                .map_err(internal)?
            {
                let row = written(db, name).await?;
                json_response(201, &row.changed(None))
            } else {
                Err(conflict(db, name, "nothing (create-only)").await)
            }
        }
    }
}

/// `DELETE /v1/refs/{name}`, only if it holds the `If-Match` digest when
/// one is given.
pub async fn delete(req: &Request, db: &D1Database, name: &str) -> Answer {
    let expected = header(req, "if-match")
        .map(|v| condition_digest(&v))
        .transpose()?;
    if index::delete_ref(db, name, expected.as_ref())
        .await
        .map_err(internal)?
    {
        return no_content();
    }
    match (index::get_ref(db, name).await.map_err(internal)?, expected) {
        (None, _) => Err(Problem::not_found(format!("no ref {name:?}"))),
        (Some(_), Some(e)) => Err(conflict(db, name, &e.to_string()).await),
        (Some(_), None) => Err(Problem::internal("the ref could not be deleted")),
    }
}
