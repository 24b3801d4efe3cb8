//! Frames received (docs/transfer.md, "Push", step 3): a request's frames
//! placed where they will live, under its new id ([`place`], for a create
//! body too), and a part of an open push read as it arrives
//! ([`crate::ingest`]): its table checked against what the push wants, its
//! new frames written into its own pack (whose row makes it the push's
//! first), whole bodies screened and large bodies proven as their chunks
//! arrive in order, then its record and its row written.

use pillbox_wire::ApiCode;

use packet_core::secrets::Scanner;
use packet_core::Body;
use pillbox_wire::chunks::{Decoder, Frame};
use worker::{Bucket, D1Database};

use super::arrival;
use super::complete::classes_of;
use super::in_order::InOrder;
use super::internal;
use super::parts::{self, Placed};
use super::state::{self, State};
use super::wanted::check_wanted;
use crate::body::Body as RequestBody;
use crate::config::Config;
use crate::ingest;
use crate::problem::Problem;
use crate::storage::chunk::Name;
use crate::storage::index::pushes::{PushPartRow, PushRow};
use crate::storage::index::{chunks, pushes};
use crate::storage::keys;
use crate::storage::load;
use crate::timing::{self, Stage};

/// A request's frames placed: the request's new id, the key of its pack,
/// and where each frame will live.
pub struct Landing {
    /// The request's id (a create's is its push's).
    pub id: String,
    /// Its pack's key, named by its id.
    pub pack_key: String,
    /// Where its frames will live: in its pack (those the store does not
    /// hold) or where the store holds them ([`parts::place`]).
    pub placed: Placed,
}

/// Places a request's `frames` under a new id. `id_stage` is the stage of
/// `Pillbox-Timing` that finding the id counts in (a create's is D1; a
/// part's is in none).
pub async fn place(
    db: &D1Database,
    frames: &[Frame],
    id_stage: Option<Stage>,
) -> Result<Landing, Problem> {
    let new_id = crate::storage::index::new_id(db);
    let id = match id_stage {
        Some(stage) => timing::timed(stage, new_id).await,
        None => new_id.await,
    }
    .map_err(internal)?;
    let pack_key = keys::pack(&id);
    let names: Vec<Name> = frames
        .iter()
        .map(|f| (f.sha256, u64::from(f.raw_size)))
        .collect();
    let held = timing::timed(Stage::D1, chunks::find(db, &names))
        .await
        .map_err(internal)?;
    let placed = parts::place(frames, |name: &Name| held.get(name), &pack_key);
    Ok(Landing {
        id,
        pack_key,
        placed,
    })
}

/// Part `number` of the push `row`, its chunk batch read from `body`: the
/// part's row as recorded. A refusal stops the body.
pub async fn part(
    bucket: &Bucket,
    db: &D1Database,
    config: &Config,
    row: PushRow,
    body: &mut RequestBody,
    number: u16,
) -> Result<PushPartRow, Problem> {
    let state = state::read(bucket, db, row).await?;
    if body.is_absent() {
        return Err(Problem::bad_request(
            ApiCode::BodyInvalid,
            "the part has no body",
        ));
    }
    let received = receive(body, bucket, db, config, &state, number).await;
    if received.is_err() {
        body.stop().await;
    }
    received
}

async fn receive(
    body: &mut RequestBody,
    bucket: &Bucket,
    db: &D1Database,
    config: &Config,
    state: &State,
    number: u16,
) -> Result<PushPartRow, Problem> {
    let id = &state.row.id;
    let mut decoder = Decoder::new(config.batch_limits());
    let frames = ingest::read_table(body, &mut decoder).await?;
    check_wanted(&frames, &[], &state.wanted())?;
    let Landing {
        id: attempt,
        pack_key,
        placed,
    } = place(db, &frames, None).await?;
    let new_count = placed.new_count();
    let Placed {
        mut record,
        new,
        pack_size,
    } = placed;
    // The part's pack is the push's from now on: the clean-up leaves it.
    // (The packs holding chunks it found stored become the push's with its
    // record; one collected meanwhile is forgotten by the next look.)
    if pack_size > 0 {
        let digest = state.row.digest.as_str();
        timing::timed(
            Stage::D1,
            pushes::insert_part_pack(db, id, &pack_key, pack_size, new_count, digest),
        )
        .await
        .map_err(internal)?;
    }
    let classes = classes_of(state.assembly.manifest());
    let scanner = Scanner::new();
    let mut findings = Vec::new();
    let placed = record.frames.clone();
    let mut in_order = InOrder::new(
        &placed,
        &new,
        &state.assembly.unproven(),
        &state.book,
        &classes,
        &scanner,
    );
    let (frames_ref, new_ref, classes_ref, scanner_ref) = (&frames, &new, &classes, &scanner);
    let (findings_ref, decoder_ref, in_order_ref) = (&mut findings, &mut decoder, &mut in_order);
    let pumped = ingest::with_pack(bucket, &pack_key, pack_size, |sink| async move {
        let mut each = |index: usize, raw: &[u8]| -> Result<(), Problem> {
            let f = &frames_ref[index];
            let body = Body {
                sha256: f.sha256,
                size: u64::from(f.raw_size),
            };
            if let Some(list) = classes_ref.get(&body) {
                for (class, found) in arrival::screen(raw, list, scanner_ref) {
                    findings_ref.push((index as u32, class, found));
                }
            }
            let since = timing::now();
            in_order_ref.feed(index, raw);
            timing::add(Stage::Hash, since);
            Ok(())
        };
        ingest::pump(
            body,
            decoder_ref,
            frames_ref,
            new_ref,
            sink.as_ref(),
            &mut each,
        )
        .await
    })
    .await;
    if let Err(p) = pumped {
        let _ = pushes::forget_part_pack(db, id, &pack_key).await;
        return Err(p);
    }
    record.findings = findings;
    record.early = in_order.finish();
    let record_key = keys::push_record(id, number, &attempt);
    load::write_object(bucket, &record_key, record.encode()).await?;
    let row = parts::part_row(number, &frames, &pack_key, pack_size, record_key);
    let replaced = timing::timed(
        Stage::D1,
        pushes::record_part(
            db,
            id,
            &row,
            &parts::stored_rows(&record, &new),
            &record.packs,
        ),
    )
    .await
    .map_err(internal)?;
    // The attempt this part replaced leaves no record behind (its pack
    // goes with the push).
    if let Some(old) = replaced {
        let _ = bucket.delete(old).await;
    }
    Ok(row)
}
