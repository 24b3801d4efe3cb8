//! Pushes of /2 packets (`/v1/pushes/…`, docs/transfer.md "Delta push"):
//! create (the recipes and the frames the client believes the store
//! lacks; completed in the same request when everything is at hand), the
//! recipes of large bodies, parts, the state, an abort, and `complete`.
//! Each handler parses the request, authorises (its caller did; a push is
//! its creator's, [`state::find`]), calls one function of [`crate::push`]
//! and turns what it returns into the answer.

use pillbox_wire::recipes::{RecipeLimits, Recipes};
use pillbox_wire::{MissingChunks, PartReceived};
use worker::{Bucket, D1Database, Request};

use super::http::{content_length, internal, json_response, no_content, Answer};
use super::packets::{already_stored, stored, too_large};
use crate::config::Config;
use crate::ingest;
use crate::problem::Problem;
use crate::push::create::{Create, Created};
use crate::push::finish::{self, Completed, Ended};
use crate::push::request::{self, CreateQuery};
use crate::push::{parts, receive, recipes as push_recipes, state};
use crate::query::Query;
use crate::storage::index::packets;
use crate::timing::{self, Stage};
use pillbox_wire::ApiCode;

pub(super) use crate::push::state::discard;

/// The answer to a push that ended in a stored packet: 201 stored by this
/// request, 200 stored by another first.
fn ended(ended: Ended) -> Answer {
    match ended {
        Ended::Stored(row) => stored(&row),
        Ended::Raced(row) => json_response(200, &row.stored(false)),
    }
}

/// `POST /v1/pushes?digest=…&size=…[&base=…][&label=…]`. The bases are
/// used only if `bases_readable` (the caller may read packets): otherwise
/// they are ignored, as if none were named.
pub async fn create(
    req: &mut Request,
    bucket: &Bucket,
    db: &D1Database,
    config: &Config,
    query: &Query,
    bases_readable: bool,
    caller: &str,
) -> Answer {
    let query = CreateQuery::parse(query)?;
    let mut body = super::http::body(req, request::create_caps(config))?;
    if let Some(row) = timing::timed(Stage::D1, packets::get(db, &query.digest))
        .await
        .map_err(internal)?
    {
        return already_stored(db, row, &query.labels).await;
    }
    if let Some(p) = too_large(query.size, config) {
        return Err(p);
    }
    content_length(req)?;
    if body.is_absent() {
        return Err(Problem::bad_request(
            ApiCode::BodyInvalid,
            "the push has no body",
        ));
    }
    let create = Create {
        bucket,
        db,
        config,
        query,
        bases_readable,
        caller,
    };
    match create.run(&mut body).await? {
        Created::Ended(e) => ended(e),
        Created::Open { row, status } => {
            let mut response = json_response(202, &row.view(&status, &[], config))?;
            response
                .headers_mut()
                .set("location", &format!("/v1/pushes/{}", row.id))
                .map_err(internal)?;
            Ok(response)
        }
    }
}

/// `GET /v1/pushes/{id}`: what is still missing, which parts arrived.
pub async fn get(
    bucket: &Bucket,
    db: &D1Database,
    config: &Config,
    id: &str,
    reveal: bool,
    caller: &str,
) -> Answer {
    let row = state::find(db, id, caller).await?;
    let state = state::read(bucket, db, row).await?;
    let parts = parts::listed(&state.parts, reveal);
    json_response(200, &state.row.view(&state.status(), &parts, config))
}

/// `DELETE /v1/pushes/{id}`
pub async fn abort(bucket: &Bucket, db: &D1Database, id: &str, caller: &str) -> Answer {
    state::find(db, id, caller).await?;
    discard(bucket, db, id).await?;
    no_content()
}

/// `POST /v1/pushes/{id}/recipes`
pub async fn recipes(
    req: &mut Request,
    bucket: &Bucket,
    db: &D1Database,
    id: &str,
    caller: &str,
) -> Answer {
    let body = super::http::body(req, request::recipes_caps())?;
    content_length(req)?;
    let row = state::find(db, id, caller).await?;
    let bytes = body.read_all().await?;
    let asked = Recipes::decode(&bytes, RecipeLimits::DEFAULT).map_err(ingest::malformed)?;
    push_recipes::bodies_only(&asked)?;
    let missing = state::add_recipes(bucket, db, &row, &asked.bodies).await?;
    json_response(
        200,
        &MissingChunks {
            missing_bytes: missing.iter().map(|c| c.1).sum(),
            missing_chunks: missing.iter().map(|c| c.0.hex().to_string()).collect(),
        },
    )
}

/// Who sends a request about a push: the token's id, and whether it may
/// read packets (then it is told which bytes the store held already).
pub struct Caller<'a> {
    /// The token's id.
    pub id: &'a str,
    /// Whether it may read packets.
    pub reveal: bool,
}

/// `PUT /v1/pushes/{id}/parts/{number}`
pub async fn part(
    req: &Request,
    bucket: &Bucket,
    db: &D1Database,
    config: &Config,
    (id, number): (&str, u16),
    caller: Caller<'_>,
) -> Answer {
    let Caller { id: caller, reveal } = caller;
    let mut body = super::http::body(req, request::part_caps(config))?;
    content_length(req)?;
    let row = state::find(db, id, caller).await?;
    let part = receive::part(bucket, db, config, row, &mut body, number).await?;
    json_response(
        200,
        &PartReceived {
            push_id: id.to_string(),
            number,
            frames: part.frames,
            bytes: part.bytes,
            stored_bytes: parts::stored_told(&part, reveal),
        },
    )
}

/// `POST /v1/pushes/{id}/complete`
pub async fn complete(bucket: &Bucket, db: &D1Database, id: &str, caller: &str) -> Answer {
    let row = state::find(db, id, caller).await?;
    let labels = row.label_list();
    match finish::complete(bucket, db, row).await? {
        Completed::Ended(e) => ended(e),
        Completed::Before(existing) => already_stored(db, existing, &labels).await,
    }
}
