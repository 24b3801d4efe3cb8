//! An open push (docs/transfer.md, "Push"): found for the token that
//! created it ("Whose push"), its state read from R2 and D1 (its
//! `packet.json`, kept parsed by the isolate, [`super::opened`]; its
//! recipes; its bases; its parts' records, less what lay in packs
//! collected since: "A push knows what it lacks"), its recipes updated, and
//! the push discarded.

use pillbox_wire::ApiCode;
use std::collections::HashMap;
use std::rc::Rc;

use packet_core::assembled::Assembly;
use packet_core::{Body, BodyFindings, Digest, Limits};
use pillbox_wire::recipes::{BodyRecipe, RecipeLimits, Recipes};
use worker::{Bucket, Conditional, D1Database};

use super::at_hand::AtHand;
use super::in_order::Arrived;
use super::internal;
use super::opened::{self, Opened};
use super::parts::{self, Gathered};
use super::plan::{Plan, Status};
use super::recipes::RecipeBook;
use super::records::PartRecord;
use super::wanted::{status_of, wanted_of};
use crate::problem::Problem;
use crate::storage::chunk::Name;
use crate::storage::findings::BodyClass;
use crate::storage::index::packets;
use crate::storage::index::pushes::{PushPartRow, PushRow};
use crate::storage::index::{packs, pushes};
use crate::storage::keys;
use crate::storage::load;
use crate::timing::{self, Stage};

/// Attempts at updating a push's recipes when they arrive concurrently.
const RECIPE_ATTEMPTS: usize = 8;

/// The push in progress with this id that the token `caller` (its id)
/// created, or 404: another token's push is answered as one that does not
/// exist, so its id, state and missing chunks are told to no one else
/// (docs/transfer.md, "Whose push").
pub async fn find(db: &D1Database, id: &str, caller: &str) -> Result<PushRow, Problem> {
    pushes::get(db, id)
        .await
        .map_err(internal)?
        .filter(|row| row.owner.as_deref().is_none_or(|owner| owner == caller))
        .ok_or_else(|| {
            Problem::not_found(format!(
                "no push {id} of this token is in progress (completed, aborted, refused, expired, created by another token or never created)"
            ))
        })
}

/// The bases that are stored (their rows read in one query), each once
/// in the order named, loaded, and their digests.
pub async fn load_bases(
    bucket: &Bucket,
    db: &D1Database,
    digests: &[Digest],
) -> Result<(AtHand, Vec<String>), Problem> {
    let mut once: Vec<Digest> = Vec::with_capacity(digests.len());
    for d in digests {
        if !once.contains(d) {
            once.push(*d);
        }
    }
    let rows = timing::timed(Stage::D1, packets::get_named(db, &once))
        .await
        .map_err(internal)?;
    let mut at_hand = AtHand::new();
    let mut used = Vec::with_capacity(rows.len());
    for row in rows {
        at_hand.add_base(load::load(bucket, &row).await?);
        used.push(row.digest);
    }
    Ok((at_hand, used))
}

/// A push as it stands: its packet, what is at hand, its recipes and what
/// its frames' bodies hold.
pub struct State {
    /// Its row.
    pub row: PushRow,
    /// Its `packet.json`.
    pub json: Rc<Vec<u8>>,
    /// That manifest, checked and parsed.
    pub assembly: Rc<Assembly>,
    /// Its recipes as kept (packet.json's, then the bodies').
    pub recipes: Recipes,
    /// The recipes object's etag, for updating it.
    pub recipes_etag: String,
    /// Its bases and its frames, less what lay in packs collected.
    pub at_hand: AtHand,
    /// Its body recipes, resolved (those that still hold).
    pub book: RecipeBook,
    /// What its frames that are whole bodies hold.
    pub arrived: HashMap<BodyClass, BodyFindings>,
    /// The bodies proven as their chunks arrived.
    pub early: HashMap<Body, Vec<Arrived>>,
    /// Its requests with frames (the create body's too).
    pub parts: Vec<PushPartRow>,
}

/// Reads the state of the push `row`.
pub async fn read(bucket: &Bucket, db: &D1Database, row: PushRow) -> Result<State, Problem> {
    let id = row.id.clone();
    let Opened { json, assembly } = match opened::get(&id) {
        Some(kept) => kept,
        None => {
            let json = load::object_bytes(bucket, &keys::push_manifest(&id), None)
                .await?
                .ok_or_else(|| Problem::internal(format!("push {id} has no manifest")))?;
            let assembly = timing::timed_sync(Stage::Manifest, || {
                Assembly::new(&json, None, &Limits::FORMAT)
            })
            .map_err(|e| Problem::internal(format!("the push's manifest: {e}")))?;
            let read = Opened {
                json: Rc::new(json),
                assembly: Rc::new(assembly),
            };
            opened::keep(&id, &read);
            read
        }
    };
    let object = bucket
        .get(keys::push_recipes(&id))
        .execute()
        .await
        .map_err(internal)?
        .ok_or_else(|| Problem::internal(format!("push {id} has no recipes")))?;
    let recipes_etag = object.etag();
    let bytes = object
        .body()
        .ok_or_else(|| Problem::internal("R2 returned no body"))?
        .bytes()
        .await
        .map_err(internal)?;
    let recipes = Recipes::decode(&bytes, RecipeLimits::DEFAULT)
        .map_err(|e| Problem::internal(e.to_string()))?;
    let (mut at_hand, _) = load_bases(bucket, db, &row.base_digests()).await?;
    let parts = pushes::parts(db, &id).await.map_err(internal)?;
    let mut records = Vec::with_capacity(parts.len());
    for part in &parts {
        if let Some(kept) = opened::record(&id, &part.record) {
            records.push(kept);
            continue;
        }
        // A record replaced (and deleted) since the parts were listed: its
        // frames count as missing until the next look.
        let Some(bytes) = load::object_bytes(bucket, &part.record, None).await? else {
            continue;
        };
        let record =
            Rc::new(PartRecord::decode(&bytes).map_err(|e| Problem::internal(e.to_string()))?);
        opened::keep_record(&id, &part.record, &record, bytes.len());
        records.push(record);
    }
    // What lies in packs collected since it was found is missing: the
    // bases' packs and the records' are asked about at once, and a frame
    // in a pack that is gone is not at hand (a later part may bring it
    // again).
    let named = parts::packs_named(&at_hand, &records);
    let gone = packs::gone(db, &named).await.map_err(internal)?;
    let Gathered { arrived, early } = parts::gather(&records, &gone, &mut at_hand);
    let mut book = RecipeBook::new();
    book.add_kept(&recipes.bodies, &assembly.unproven(), &at_hand);
    Ok(State {
        row,
        json,
        assembly,
        recipes,
        recipes_etag,
        at_hand,
        book,
        arrived,
        early,
        parts,
    })
}

impl State {
    /// Where each body comes from.
    pub fn plan(&self) -> Plan {
        Plan::new(&self.assembly.unproven(), &self.at_hand, &self.book)
    }

    /// What the push lacks: what `GET` lists and `complete` refuses with.
    pub fn status(&self) -> Status {
        status_of(
            &self.plan(),
            &self.at_hand,
            &self.book,
            &self.recipes.manifest,
        )
    }

    /// The chunks a part of the push may carry, sha256 → size.
    pub fn wanted(&self) -> HashMap<Digest, u64> {
        wanted_of(
            &self.plan(),
            &self.at_hand,
            &self.book,
            &self.recipes.manifest,
        )
    }
}

/// Adds body recipes to the push `row` (docs/transfer.md, "Push", step
/// 2), all or none, written back only if no other request changed them
/// meanwhile (the recipes object's etag; [`RECIPE_ATTEMPTS`] tries, then
/// 409 `push_busy`). Returns the chunks of the recipes named that are not
/// at hand.
pub async fn add_recipes(
    bucket: &Bucket,
    db: &D1Database,
    row: &PushRow,
    asked: &[BodyRecipe],
) -> Result<Vec<Name>, Problem> {
    let mut attempt = 0;
    loop {
        attempt += 1;
        let mut state = read(bucket, db, row.clone()).await?;
        let named = state
            .book
            .add(asked, &state.assembly.unproven(), &state.at_hand)?;
        let kept = Recipes {
            manifest: state.recipes.manifest.clone(),
            bodies: state.book.received(),
        };
        let written = bucket
            .put(keys::push_recipes(&row.id), kept.encode())
            .only_if(Conditional {
                etag_matches: Some(state.recipes_etag.clone()),
                ..Default::default()
            })
            .execute()
            .await
            .map_err(internal)?;
        if written.is_some() {
            return Ok(state.book.lacking(&named, &state.at_hand));
        }
        if attempt >= RECIPE_ATTEMPTS {
            return Err(Problem::new(
                ApiCode::PushBusy,
                "the push's recipes changed while these were added",
                "send the recipes again",
            ));
        }
    }
}

/// Ends a push without storing anything (storage's discard, answered as a
/// refusal when the store fails).
pub async fn discard(bucket: &Bucket, db: &D1Database, id: &str) -> Result<(), Problem> {
    crate::storage::clean::discard_push(bucket, db, id)
        .await
        .map_err(internal)
}
