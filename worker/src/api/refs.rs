//! `/v1/refs/…`: names for packets. A ref is created only if it does not
//! exist and moved only from the digest the writer expects
//! (compare-and-swap), so two writers never silently overwrite each other.
//! `/v1/ref-history/{name}`: the packets a ref has named, each with when
//! and by which token's id (docs/worker.md, "Ref history").

use packet_core::Digest;
use pillbox_wire::ApiCode;
use pillbox_wire::PutRef;
use worker::{D1Database, Request};

use super::http::{header, internal, json_response, no_content, read_json, Answer};
use crate::conditions::{condition_digest, etag, ref_write, RefWrite};
use crate::problem::Problem;
use crate::query::Query;
use crate::storage::index::packets;
use crate::storage::index::refs::{self, RefMoveRow, RefRow};

/// `GET /v1/refs/{name}`; the ETag is the digest it holds.
pub async fn get(db: &D1Database, name: &str) -> Answer {
    let row = refs::get(db, name)
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
    let (rows, next) = refs::list(db, prefix, after, query.limit()?)
        .await
        .map_err(internal)?;
    json_response(200, &refs::page(&rows, next))
}

/// 409 `ref_conflict`, with the digest the ref holds now (`current`,
/// null if it does not exist) so the writer can decide again.
async fn conflict(db: &D1Database, name: &str, wanted: &str) -> Problem {
    let current = refs::get(db, name).await.ok().flatten().map(|r| r.digest);
    let mut p = Problem::new(
        ApiCode::RefConflict,
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
    refs::get(db, name)
        .await
        .map_err(internal)?
        .ok_or_else(|| Problem::internal("ref vanished"))
}

/// `PUT /v1/refs/{name}`: create (201) or move (200) the ref to a stored
/// packet; its history records the move and `by`, the id of the token
/// that made it.
pub async fn put(req: &mut Request, db: &D1Database, name: &str, by: Option<&str>) -> Answer {
    let if_match = header(req, "if-match");
    let if_none_match = header(req, "if-none-match");
    let body: PutRef = read_json(req).await?;
    let digest = body
        .digest
        .parse::<Digest>()
        .map_err(Problem::from_packet_error_400)?;
    if packets::get(db, &digest).await.map_err(internal)?.is_none() {
        return Err(Problem::not_found(format!(
            "no packet {digest} is stored: upload it before naming it"
        )));
    }
    match ref_write(if_match.as_deref(), if_none_match.as_deref())? {
        RefWrite::Move { expected } => {
            if refs::swap(db, name, &expected, &digest, by)
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
            if refs::create(db, name, &digest, by)
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

/// `DELETE /v1/refs/{name}` (and its history), only if it holds the
/// `If-Match` digest when one is given.
pub async fn delete(req: &Request, db: &D1Database, name: &str) -> Answer {
    let expected = header(req, "if-match")
        .map(|v| condition_digest(&v))
        .transpose()?;
    if refs::delete(db, name, expected.as_ref())
        .await
        .map_err(internal)?
    {
        return no_content();
    }
    match (refs::get(db, name).await.map_err(internal)?, expected) {
        (None, _) => Err(Problem::not_found(format!("no ref {name:?}"))),
        (Some(_), Some(e)) => Err(conflict(db, name, &e.to_string()).await),
        (Some(_), None) => Err(Problem::internal("the ref could not be deleted")),
    }
}

/// `GET /v1/ref-history/{name}`: newest first, `cursor` the previous
/// page's `next_cursor`; 404 for a ref that does not exist (a deleted
/// ref's history goes with it).
pub async fn history(db: &D1Database, name: &str, query: &Query) -> Answer {
    let before = query.cursor_number()?;
    let limit = query.limit()?;
    let (mut rows, next) = refs::history(db, name, before, limit)
        .await
        .map_err(internal)?;
    if rows.is_empty() && before.is_none() {
        // A ref with no history rows was made by a Worker that kept none:
        // it has named its current packet at least.
        let row = refs::get(db, name)
            .await
            .map_err(internal)?
            .ok_or_else(|| Problem::not_found(format!("no ref {name:?}")))?;
        rows.push(RefMoveRow {
            seq: 0,
            digest: row.digest,
            at: row.updated,
            token_id: None,
        });
    }
    json_response(200, &refs::history_page(name, &rows, next))
}
