//! Completing a push (docs/transfer.md, "Push", step 5; the end of a
//! create that has everything): the bodies nothing proved yet are read
//! from R2 and proven ([`super::complete`], the gate behind it), the packet
//! is laid out (its layout's chunks, compaction:
//! [`crate::storage::compacting`]; its root), its own pack written (its
//! `packs` row first), and one D1 batch stores the packet's row (only if
//! every pack it names still has its row) and ends the push. A pack found
//! gone on the way makes what lay in it missing: the push says so rather
//! than storing a packet that names it ("A push knows what it lacks").

use std::collections::HashMap;
use std::rc::Rc;

use packet_core::assembled::Assembly;
use packet_core::secrets::Scanner;
use packet_core::{Body, BodyFindings, Digest, Limits};
use worker::{Bucket, D1Database};

use super::at_hand::AtHand;
use super::complete::Completion;
use super::in_order::Arrived;
use super::internal;
use super::opened;
use super::plan::{Plan, Source};
use super::prove::ProveError;
use super::state::{self, discard, State};
use super::storing::{Laid, Storing};
use super::wanted::{incomplete, missing_list};
use crate::problem::Problem;
use crate::storage::chunk::NewChunk;
use crate::storage::chunk::{ChunkRef, Name};
use crate::storage::compacting;
use crate::storage::findings::BodyClass;
use crate::storage::index::packets::PacketRow;
use crate::storage::index::packets::{self, NewPacket, NewStorage};
use crate::storage::index::pushes::PushRow;
use crate::storage::index::{ends, packs, pushes};
use crate::storage::keys;
use crate::storage::load;
use crate::storage::read::{self, ReadError};
use crate::storage::stored::Stored;
use crate::timing::{self, Counter, Stage};

/// A push that ended in a stored packet.
pub enum Ended {
    /// Stored and indexed by this request (201): its row.
    Stored(PacketRow),
    /// Stored by another push of the same packet first (200): its row.
    Raced(PacketRow),
}

/// How finishing a push ended.
pub(super) enum Finished {
    /// The packet is stored.
    Ended(Ended),
    /// Packs it relied on were collected meanwhile (their keys): what lay
    /// in them is missing, and the push says so.
    Lost(Vec<String>),
}

/// What finishing a push needs.
pub(super) struct Finishing<'a> {
    pub assembly: Assembly,
    pub json: Vec<u8>,
    pub manifest: Vec<Name>,
    pub at_hand: &'a AtHand,
    pub plan: &'a Plan,
    pub arrived: &'a HashMap<BodyClass, BodyFindings>,
    /// The bodies proven as their chunks arrived.
    pub early: &'a HashMap<Body, Vec<Arrived>>,
    pub labels: &'a [String],
    pub push_id: Option<&'a str>,
    /// A push completed in the request that started it: the pack its
    /// frames went to and their rows (it has no push of its own).
    pub frames_pack: Option<(&'a str, Vec<NewChunk>)>,
}

/// Why a body's proof stopped.
enum Stop {
    Read(ReadError),
    Prove(ProveError),
}

impl From<ReadError> for Stop {
    fn from(e: ReadError) -> Stop {
        Stop::Read(e)
    }
}

/// The packs of `at_hand` whose rows are gone, with `key` (a pack found
/// gone) among them.
async fn lost_packs(
    db: &D1Database,
    at_hand: &AtHand,
    key: Option<&str>,
) -> Result<Finished, Problem> {
    let mut gone = packs::gone(db, &at_hand.packs.keys())
        .await
        .map_err(internal)?;
    if let Some(k) = key.filter(|k| !gone.iter().any(|g| g == k)) {
        gone.push(k.to_string());
    }
    Ok(Finished::Lost(gone))
}

/// How `POST /v1/pushes/{id}/complete` ended.
pub enum Completed {
    /// The packet is stored ([`Ended`]).
    Ended(Ended),
    /// Another push or upload of the same packet finished before this one
    /// completed: the push is discarded (200, with its labels added).
    Before(PacketRow),
}

/// Completes the push `row`: 409 `push_incomplete` with what it lacks
/// (also when a pack it relied on went while it completed), 422 when the
/// packet is refused (the push is then discarded).
pub async fn complete(
    bucket: &Bucket,
    db: &D1Database,
    row: PushRow,
) -> Result<Completed, Problem> {
    let id = row.id.clone();
    let labels = row.label_list();
    let digest = row
        .digest
        .parse::<Digest>()
        .map_err(|e| Problem::internal(e.to_string()))?;
    if let Some(existing) = packets::get(db, &digest).await.map_err(internal)? {
        // Another push or upload of the same packet finished first.
        discard(bucket, db, &id).await?;
        return Ok(Completed::Before(existing));
    }
    let state = state::read(bucket, db, row.clone()).await?;
    let plan = state.plan();
    let status = state.status();
    if !plan.is_complete() || !status.missing_chunks.is_empty() {
        return Err(incomplete(&missing_list(&status)));
    }
    let manifest_names: Vec<Name> = state
        .recipes
        .manifest
        .iter()
        .map(|c| (c.sha256, u64::from(c.size)))
        .collect();
    let State {
        assembly,
        json,
        at_hand,
        arrived,
        early,
        ..
    } = state;
    // The push ends here, stored or not: the assembly is taken whole (or
    // parsed again while another request of it still holds one).
    opened::forget(&id);
    let json = Rc::unwrap_or_clone(json);
    let assembly = match Rc::try_unwrap(assembly) {
        Ok(assembly) => assembly,
        Err(_) => Assembly::new(&json, None, &Limits::FORMAT)
            .map_err(|e| Problem::internal(format!("the push's manifest: {e}")))?,
    };
    let finished = finish(
        bucket,
        db,
        Finishing {
            assembly,
            json,
            manifest: manifest_names,
            at_hand: &at_hand,
            plan: &plan,
            arrived: &arrived,
            early: &early,
            labels: &labels,
            push_id: Some(&id),
            frames_pack: None,
        },
    )
    .await?;
    match finished {
        Finished::Ended(ended) => Ok(Completed::Ended(ended)),
        // What lay in the packs collected is missing now: the same list
        // `GET` gives.
        Finished::Lost(_) => {
            let state = state::read(bucket, db, row).await?;
            Err(incomplete(&missing_list(&state.status())))
        }
    }
}

/// Proves what is left, lays the packet out, stores and indexes it.
pub(super) async fn finish(
    bucket: &Bucket,
    db: &D1Database,
    f: Finishing<'_>,
) -> Result<Finished, Problem> {
    let digest = f.assembly.digest();
    let push_id = f.push_id;
    let frames_key = f.frames_pack.as_ref().map(|(k, _)| k.to_string());
    let drop_push = || {
        let frames_key = frames_key.clone();
        async move {
            if let Some(id) = push_id {
                let _ = discard(bucket, db, id).await;
            }
            // A refused push of one request leaves nothing: its pack is
            // known to it alone.
            if let Some(key) = frames_key {
                let _ = bucket.delete(key.clone()).await;
                let _ = packs::forget(db, &key).await;
            }
        }
    };
    // The end states of the base bodies bodies grew from.
    let grown: Vec<Body> = f
        .plan
        .bodies
        .iter()
        .filter_map(|(_, s)| match s {
            Source::Hash(h) => h.grown_from.as_ref().map(|g| g.base),
            _ => None,
        })
        .collect();
    let kept_ends = timing::timed(Stage::D1, ends::get_all(db, &grown))
        .await
        .map_err(internal)?;
    let scanner = Scanner::new();
    let (mut completion, tasks) = match timing::timed_sync(Stage::Layout, || {
        Completion::start(
            f.assembly,
            f.plan,
            f.at_hand,
            (f.arrived, f.early),
            &kept_ends,
            &scanner,
        )
    }) {
        Ok(x) => x,
        Err(e) => {
            drop_push().await;
            return Err(Problem::from_packet_error(&e));
        }
    };
    for task in tasks {
        let mut prover = task.prover;
        let proven = loop {
            let reads = prover.reads().to_vec();
            let fed = read::raw_chunks(bucket, &f.at_hand.packs, &reads, |_, raw| {
                let since = timing::now();
                let r = prover.feed(raw).map_err(Stop::Prove);
                timing::add(Stage::Hash, since);
                r
            })
            .await;
            let body = prover.body();
            match fed {
                Err(Stop::Prove(ProveError::Differs)) => {
                    prover = completion.again(&prover, &scanner);
                    continue;
                }
                Err(Stop::Prove(e)) => {
                    drop_push().await;
                    return Err(Problem::from_packet_error(&completion.refused(body, e)));
                }
                Err(Stop::Read(ReadError::Missing(key))) => {
                    return lost_packs(db, f.at_hand, Some(&key)).await;
                }
                Err(Stop::Read(e)) => return Err(e.problem()),
                Ok(()) => {}
            }
            timing::count(Counter::Hashed, prover.hashed());
            match prover.finish() {
                Ok(p) => break p,
                Err(e) => {
                    drop_push().await;
                    return Err(Problem::from_packet_error(&completion.refused(body, e)));
                }
            }
        };
        if let Err(e) = completion.done(proven) {
            drop_push().await;
            return Err(Problem::from_packet_error(&e));
        }
    }
    let manifest = completion.manifest().clone();
    let finished = timing::timed_sync(Stage::Layout, || completion.finish(f.at_hand.packs.clone()));
    let (verified, layout, kept, new_ends) = match finished {
        Ok(x) => x,
        Err(e) => {
            drop_push().await;
            return Err(Problem::from_packet_error(&e));
        }
    };
    let manifest_refs: Vec<ChunkRef> = f
        .manifest
        .iter()
        .map(|n| {
            f.at_hand
                .chunk(n)
                .ok_or_else(|| Problem::internal("a manifest chunk went missing"))
        })
        .collect::<Result<_, _>>()?;
    let own_key = keys::pack(
        &timing::timed(Stage::D1, crate::storage::index::new_id(db))
            .await
            .map_err(internal)?,
    );
    let storing = timing::timed_sync(Stage::Layout, || {
        Storing::new(layout, manifest_refs, &own_key, f.at_hand.layout_chunks())
    });
    let laid = timing::timed(Stage::Layout, compacting::lay_out(bucket, storing)).await;
    if !laid.pack.is_empty() {
        let digest_text = digest.to_string();
        let size = laid.pack.len() as u64;
        // An open push uses its packet's pack from the start, so the
        // clean-up cannot take it before the packet is stored.
        let recorded = async {
            match push_id {
                Some(id) => pushes::insert_part_pack(db, id, &own_key, size, 0, &digest_text).await,
                None => packs::insert(db, &own_key, size, 0, &digest_text).await,
            }
        };
        timing::timed(Stage::D1, recorded).await.map_err(internal)?;
        timing::count(Counter::R2Written, laid.pack.len() as u64);
        timing::timed(
            Stage::R2Write,
            load::write_object(bucket, &own_key, laid.pack.clone()),
        )
        .await?;
    }
    let root = laid.root.encode();
    let keys_used = laid.root.packs.keys();
    let findings_text = kept.to_text();
    let kept_findings = kept.clone();
    let new = NewPacket {
        digest: &digest,
        size: verified.size,
        manifest: &manifest,
        manifest_range: verified.manifest_range.clone(),
        storage: NewStorage::Packed { root: &root },
        packs: &keys_used,
        labels: f.labels,
        findings: findings_text,
    };
    let extras = pushes::Extras {
        stored: f
            .frames_pack
            .as_ref()
            .map(|(k, rows)| (*k, rows.as_slice())),
        ends: &new_ends,
        moved: (!laid.copied.is_empty()).then_some((
            own_key.as_str(),
            laid.copied.as_slice(),
            laid.merged.as_slice(),
        )),
    };
    let stored = timing::timed(
        Stage::D1,
        pushes::store_packet(db, &new, f.push_id, &extras),
    )
    .await
    .map_err(internal)?;
    let Some(now) = stored else {
        // A pack the packet names was collected meanwhile.
        return lost_packs(db, f.at_hand, None).await;
    };
    crate::findings::log(&digest, &verified.findings);
    if let Some(id) = f.push_id {
        crate::storage::clean::delete_push_objects(bucket, db, id).await;
    }
    if now
        .root_hex
        .as_deref()
        .and_then(crate::storage::index::unhex)
        .as_deref()
        != Some(root.as_slice())
    {
        return Ok(Finished::Ended(Ended::Raced(now)));
    }
    let Laid {
        root: r, layout, ..
    } = laid;
    let kept = timing::timed_sync(Stage::Layout, || {
        Stored::from_parts(
            digest,
            manifest,
            f.json,
            layout,
            r.manifest,
            r.layout,
            Some(kept_findings),
        )
    });
    load::remember(&now, Rc::new(kept));
    Ok(Finished::Ended(Ended::Stored(now)))
}
