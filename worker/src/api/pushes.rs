//! Pushes of /2 packets (`/v1/pushes/…`, docs/transfer.md "Delta push"):
//! create (the recipes and the frames the client believes the store
//! lacks; completed in the same request when everything is at hand), the
//! recipes of large bodies, parts, the state, an abort, and `complete`.
//! Each handler parses, authorises (its caller did), calls the pure push
//! logic ([`crate::push`]) and the storage ([`crate::storage`]), and
//! answers.

use pillbox_wire::ApiCode;
use std::collections::{HashMap, HashSet};
use std::rc::Rc;

use packet_core::assembled::Assembly;
use packet_core::secrets::Scanner;
use packet_core::{Body, BodyFindings, Digest, Limits};
use pillbox_wire::chunks::{Decoder, Frame};
use pillbox_wire::recipes::{PushDecoder, RecipeLimits, Recipes};
use pillbox_wire::{MissingChunks, PartReceived};
use worker::{Bucket, Conditional, D1Database, Request};

use super::http::{content_length, internal, json_response, no_content, Answer};
use super::packets::{already_stored, indexed, stored, too_large};
use crate::body::Body as RequestBody;
use crate::config::Config;
use crate::index::{self, NewPacket, NewStorage};
use crate::ingest;
use crate::problem::Problem;
use crate::push::arrival;
use crate::push::at_hand::AtHand;
use crate::push::complete::{classes_of, Completion};
use crate::push::in_order::{Arrived, InOrder};
use crate::push::manifest::{self, Checked, CreateBody};
use crate::push::opened::{self, Opened};
use crate::push::parts::{self, Gathered, Held, Placed, StoredChunk, CREATE_PART};
use crate::push::plan::{Plan, Source, Status};
use crate::push::prove::ProveError;
use crate::push::recipes::{self as push_recipes, RecipeBook};
use crate::push::records::PartRecord;
use crate::push::request::{self, CreateQuery};
use crate::push::storing::Storing;
use crate::push::wanted::{
    check_wanted, incomplete, manifest_frames, missing_list, status_of, wanted_of,
};
use crate::query::Query;
use crate::rows::{PushPartRow, PushRow};
use crate::storage::chunk::{ChunkRef, Name};
use crate::storage::compacting;
use crate::storage::findings::BodyClass;
use crate::storage::index::{chunks, ends, packs, pushes};
use crate::storage::keys;
use crate::storage::load;
use crate::storage::read::{self, ReadError};
use crate::storage::stored::Stored;
use crate::timing::{self, Counter, Stage};

/// Attempts at updating a push's recipes when they arrive concurrently.
const RECIPE_ATTEMPTS: usize = 8;
fn corrupt(e: crate::binary::Corrupt) -> Problem {
    Problem::internal(e.to_string())
}

fn db_failed(e: worker::Error) -> Problem {
    internal(e)
}

/// The push in progress with this id that the token `caller` (its id)
/// created, or 404: another token's push is answered as one that does not
/// exist, so its id, state and missing chunks are told to no one else
/// (docs/transfer.md, "Whose push").
async fn open_push(db: &D1Database, id: &str, caller: &str) -> Result<PushRow, Problem> {
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

/// The bases that are stored, loaded, and their digests.
async fn load_bases(
    bucket: &Bucket,
    db: &D1Database,
    digests: &[String],
) -> Result<(AtHand, Vec<String>), Problem> {
    let mut at_hand = AtHand::new();
    let mut used = Vec::new();
    for d in digests {
        let Ok(digest) = d.parse::<Digest>() else {
            continue;
        };
        if used.contains(&digest.to_string()) {
            continue;
        }
        if let Some(row) = timing::timed(Stage::D1, index::packet(db, &digest))
            .await
            .map_err(internal)?
        {
            at_hand.add_base(load::load(bucket, &row).await?);
            used.push(row.digest);
        }
    }
    Ok((at_hand, used))
}

/// Where a request's frames will live: in its new pack (those the store
/// does not hold) or where the store holds them ([`parts::place`]).
async fn place(db: &D1Database, frames: &[Frame], pack_key: &str) -> Result<Placed, Problem> {
    let names: Vec<Name> = frames
        .iter()
        .map(|f| (f.sha256, u64::from(f.raw_size)))
        .collect();
    let held = timing::timed(Stage::D1, chunks::find(db, &names))
        .await
        .map_err(internal)?;
    let at = |name: &Name| {
        held.get(name).map(|h| Held {
            pack: &h.pack,
            offset: h.offset,
            stored: h.stored,
            encoding: h.encoding,
        })
    };
    Ok(parts::place(frames, at, pack_key))
}

/// A push as it stands: its packet, what is at hand, its recipes and what
/// its frames' bodies hold.
struct State {
    row: PushRow,
    json: Rc<Vec<u8>>,
    assembly: Rc<Assembly>,
    recipes: Recipes,
    recipes_etag: String,
    at_hand: AtHand,
    book: RecipeBook,
    arrived: HashMap<BodyClass, BodyFindings>,
    early: HashMap<Body, Vec<Arrived>>,
    parts: Vec<PushPartRow>,
}

async fn read_state(bucket: &Bucket, db: &D1Database, row: PushRow) -> Result<State, Problem> {
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
    let (mut at_hand, _) = load_bases(bucket, db, &row.base_list()).await?;
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
        let record = Rc::new(PartRecord::decode(&bytes).map_err(corrupt)?);
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
    fn plan(&self) -> Plan {
        Plan::new(&self.assembly.unproven(), &self.at_hand, &self.book)
    }

    /// What the push lacks: what `GET` lists and `complete` refuses with.
    fn status(&self) -> Status {
        status_of(
            &self.plan(),
            &self.at_hand,
            &self.book,
            &self.recipes.manifest,
        )
    }

    /// The chunks a part of the push may carry, sha256 → size.
    fn wanted(&self) -> HashMap<Digest, u64> {
        wanted_of(
            &self.plan(),
            &self.at_hand,
            &self.book,
            &self.recipes.manifest,
        )
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
    let CreateQuery {
        digest,
        size,
        labels,
        bases,
    } = CreateQuery::parse(query)?;
    let mut body = super::http::body(req, request::create_caps(config))?;
    if let Some(row) = timing::timed(Stage::D1, index::packet(db, &digest))
        .await
        .map_err(internal)?
    {
        return already_stored(db, row, &labels).await;
    }
    if let Some(p) = too_large(size, config) {
        return Err(p);
    }
    content_length(req)?;
    if body.is_absent() {
        return Err(Problem::bad_request(
            ApiCode::BodyInvalid,
            "the push has no body",
        ));
    }
    let (at_hand, used) = if bases_readable {
        load_bases(bucket, db, &bases).await?
    } else {
        (AtHand::new(), Vec::new())
    };
    let created = Create {
        bucket,
        db,
        config,
        digest,
        size,
        labels,
        used,
        caller,
    };
    let answer = created.run(&mut body, at_hand).await;
    if answer.is_err() {
        body.stop().await;
    }
    answer
}

struct Create<'a> {
    bucket: &'a Bucket,
    db: &'a D1Database,
    config: &'a Config,
    digest: Digest,
    size: u64,
    labels: Vec<String>,
    used: Vec<String>,
    caller: &'a str,
}

impl Create<'_> {
    async fn run(self, body: &mut RequestBody, mut at_hand: AtHand) -> Answer {
        let Create {
            bucket,
            db,
            config,
            digest,
            size,
            ..
        } = &self;
        let mut decoder = PushDecoder::new(request::limits(config));
        let recipes = ingest::read_recipes(body, &mut decoder).await?;
        manifest::check_recipe(&recipes.manifest, &config.limits)?;
        let batch = decoder
            .batch_mut()
            .ok_or_else(|| Problem::internal("the batch follows the recipes"))?;
        let frames = ingest::read_table(body, batch).await?;
        let is_manifest = manifest_frames(&frames, &recipes.manifest)?;
        let sent: HashSet<Name> = frames
            .iter()
            .map(|f| (f.sha256, u64::from(f.raw_size)))
            .collect();
        let missing = manifest::missing(&recipes.manifest, |n| sent.contains(n), &at_hand);
        if !missing.is_empty() {
            return Err(manifest::incomplete(&missing));
        }
        let id = timing::timed(Stage::D1, index::new_id(db))
            .await
            .map_err(internal)?;
        let pack_key = keys::pack(&id);
        let placed = place(db, &frames, &pack_key).await?;
        let new_count = placed.new_count();
        let Placed {
            mut record,
            new,
            pack_size,
        } = placed;
        if pack_size > 0 {
            timing::timed(
                Stage::D1,
                packs::insert(db, &pack_key, pack_size, new_count, &digest.to_string()),
            )
            .await
            .map_err(internal)?;
        }
        let manifest_frames = is_manifest.iter().filter(|m| **m).count();
        let create_body = CreateBody {
            recipes: &recipes,
            frames: &frames,
            is_manifest: &is_manifest,
            digest: *digest,
            size: *size,
        };
        let scanner = Scanner::new();
        let mut raws: HashMap<Name, Vec<u8>> = HashMap::new();
        let mut checked: Option<Checked> = None;
        let mut findings: Vec<(u32, u8, BodyFindings)> = Vec::new();
        let finalize = |raws: &HashMap<Name, Vec<u8>>, at_hand: &AtHand| {
            timing::timed_sync(Stage::Manifest, || {
                create_body.check(raws, at_hand, &config.limits)
            })
        };
        if manifest_frames == 0 {
            checked = Some(finalize(&raws, &at_hand)?);
        }
        let batch = decoder
            .batch_mut()
            .ok_or_else(|| Problem::internal("the batch follows the recipes"))?;
        let mut seen_manifest = 0;
        let (frames_ref, new_ref, at_hand_ref) = (&frames, &new, &at_hand);
        let (raws_ref, checked_ref, findings_ref) = (&mut raws, &mut checked, &mut findings);
        let (is_manifest_ref, scanner_ref, finalize_ref) = (&is_manifest, &scanner, &finalize);
        let pumped = ingest::with_pack(bucket, &pack_key, pack_size, |sink| async move {
            let mut each = |index: usize, raw: &[u8]| -> Result<(), Problem> {
                let f = &frames_ref[index];
                let name = (f.sha256, u64::from(f.raw_size));
                if is_manifest_ref[index] {
                    raws_ref.insert(name, raw.to_vec());
                    seen_manifest += 1;
                    if seen_manifest == manifest_frames {
                        *checked_ref = Some(finalize_ref(raws_ref, at_hand_ref)?);
                    }
                    return Ok(());
                }
                let body = Body {
                    sha256: f.sha256,
                    size: name.1,
                };
                let classes = checked_ref.as_ref().map(|c| &c.classes);
                if let Some(list) = classes.and_then(|c| c.get(&body)) {
                    for (class, found) in arrival::screen(raw, list, scanner_ref) {
                        findings_ref.push((index as u32, class, found));
                    }
                }
                Ok(())
            };
            ingest::pump(body, batch, frames_ref, new_ref, sink.as_ref(), &mut each).await
        })
        .await;
        if let Err(p) = pumped {
            let _ = packs::forget(db, &pack_key).await;
            return Err(p);
        }
        let Checked {
            json,
            assembly,
            book,
            ..
        } = checked.ok_or_else(|| Problem::internal("the manifest was not checked"))?;
        for (key, chunk) in record.located() {
            at_hand.add_frame(key, chunk);
        }
        let bodies = assembly.unproven();
        let mut plan = timing::timed_sync(Stage::Manifest, || Plan::new(&bodies, &at_hand, &book));
        record.findings = findings;
        let arrived: HashMap<_, _> = parts::found(&record).collect();
        let mut json = json;
        if plan.is_complete() {
            let recipes_names: Vec<Name> = recipes
                .manifest
                .iter()
                .map(|c| (c.sha256, u64::from(c.size)))
                .collect();
            let kept_json = json.clone();
            let finished = finish(
                bucket,
                db,
                Finishing {
                    assembly,
                    json,
                    manifest: recipes_names,
                    at_hand: &at_hand,
                    plan: &plan,
                    arrived: &arrived,
                    early: &HashMap::new(),
                    labels: &self.labels,
                    push_id: None,
                    frames_pack: Some((pack_key.as_str(), parts::stored_rows(&record, &new))),
                },
            )
            .await?;
            match finished {
                Finished::Answer(r) => return Ok(r),
                // Packs it relied on were collected meanwhile: the push
                // stays open, lacking what lay in them.
                Finished::Lost(gone) => {
                    at_hand.forget_packs(&gone);
                    plan = Plan::new(&bodies, &at_hand, &book);
                    json = kept_json;
                }
            }
        }
        // Not everything is at hand: the push stays open.
        let status = status_of(&plan, &at_hand, &book, &recipes.manifest);
        let row = PushRow {
            id: id.clone(),
            digest: digest.to_string(),
            size: *size,
            bases: serde_json::to_string(&self.used).unwrap_or_else(|_| "[]".into()),
            labels: serde_json::to_string(&self.labels).unwrap_or_else(|_| "[]".into()),
            created: packs::now(),
            owner: Some(self.caller.to_string()),
        };
        load::write_object(bucket, &keys::push_manifest(&id), json).await?;
        let kept = Recipes {
            manifest: recipes.manifest.clone(),
            bodies: book.received(),
        };
        load::write_object(bucket, &keys::push_recipes(&id), kept.encode()).await?;
        pushes::insert(db, &row).await.map_err(internal)?;
        let record_key = keys::push_record(&id, CREATE_PART, &id);
        load::write_object(bucket, &record_key, record.encode()).await?;
        // A create's part is never replaced (parts are numbered from 1).
        let part = PushPartRow {
            number: CREATE_PART,
            pack: (pack_size > 0).then(|| pack_key.clone()),
            record: record_key,
            frames: frames.len() as u32,
            bytes: frames.iter().map(|f| u64::from(f.stored_size)).sum(),
            stored_bytes: pack_size,
        };
        timing::timed(
            Stage::D1,
            pushes::record_part(
                db,
                &id,
                &part,
                &parts::stored_rows(&record, &new),
                &record.packs,
            ),
        )
        .await
        .map_err(internal)?;
        let mut response = json_response(202, &row.view(&status, &[], config))?;
        response
            .headers_mut()
            .set("location", &format!("/v1/pushes/{id}"))
            .map_err(internal)?;
        Ok(response)
    }
}

/// What finishing a push needs.
struct Finishing<'a> {
    assembly: Assembly,
    json: Vec<u8>,
    manifest: Vec<Name>,
    at_hand: &'a AtHand,
    plan: &'a Plan,
    arrived: &'a HashMap<BodyClass, BodyFindings>,
    /// The bodies proven as their chunks arrived.
    early: &'a HashMap<Body, Vec<Arrived>>,
    labels: &'a [String],
    push_id: Option<&'a str>,
    /// A push completed in the request that started it: the pack its
    /// frames went to and their rows (it has no push of its own).
    frames_pack: Option<(&'a str, Vec<StoredChunk>)>,
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

/// How finishing a push ended.
enum Finished {
    /// Stored (201), or stored by another push first (200).
    Answer(worker::Response),
    /// Packs it relied on were collected meanwhile (their keys): what lay
    /// in them is missing, and the push says so.
    Lost(Vec<String>),
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

/// Proves what is left, lays the packet out, stores and indexes it: 201.
async fn finish(bucket: &Bucket, db: &D1Database, f: Finishing<'_>) -> Result<Finished, Problem> {
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
        &timing::timed(Stage::D1, index::new_id(db))
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
    let is_stored = timing::timed(
        Stage::D1,
        pushes::store_packet(db, &new, f.push_id, &extras),
    )
    .await
    .map_err(internal)?;
    if !is_stored {
        // A pack the packet names was collected meanwhile.
        return lost_packs(db, f.at_hand, None).await;
    }
    super::log_findings(&digest, &verified.findings);
    if let Some(id) = f.push_id {
        delete_objects(bucket, db, id).await;
    }
    let now = timing::timed(Stage::D1, indexed(db, &digest)).await?;
    if now
        .root_hex
        .as_deref()
        .and_then(crate::storage::index::unhex)
        .as_deref()
        == Some(root.as_slice())
    {
        let crate::push::storing::Laid {
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
        load::remember(&now, std::rc::Rc::new(kept));
        timing::timed(Stage::D1, stored(db, &digest))
            .await
            .map(Finished::Answer)
    } else {
        json_response(200, &now.stored(false)).map(Finished::Answer)
    }
}

/// Deletes a push's R2 objects (its packs go with the clean-up).
async fn delete_objects(bucket: &Bucket, db: &D1Database, id: &str) {
    let parts = pushes::parts(db, id).await.unwrap_or_default();
    for key in [keys::push_manifest(id), keys::push_recipes(id)]
        .into_iter()
        .chain(parts.iter().map(|p| p.record.clone()))
    {
        let _ = bucket.delete(key).await;
    }
}

/// Ends a push without storing anything.
pub(super) async fn discard(bucket: &Bucket, db: &D1Database, id: &str) -> Result<(), Problem> {
    opened::forget(id);
    delete_objects(bucket, db, id).await;
    pushes::discard(db, id).await.map_err(db_failed)
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
    let row = open_push(db, id, caller).await?;
    let state = read_state(bucket, db, row).await?;
    let parts = parts::listed(&state.parts, reveal);
    json_response(200, &state.row.view(&state.status(), &parts, config))
}

/// `DELETE /v1/pushes/{id}`
pub async fn abort(bucket: &Bucket, db: &D1Database, id: &str, caller: &str) -> Answer {
    open_push(db, id, caller).await?;
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
    let row = open_push(db, id, caller).await?;
    let bytes = body.read_all().await?;
    let asked = Recipes::decode(&bytes, RecipeLimits::DEFAULT).map_err(ingest::malformed)?;
    push_recipes::bodies_only(&asked)?;
    let mut attempt = 0;
    loop {
        attempt += 1;
        let mut state = read_state(bucket, db, row.clone()).await?;
        let named = state
            .book
            .add(&asked.bodies, &state.assembly.unproven(), &state.at_hand)?;
        let kept = Recipes {
            manifest: state.recipes.manifest.clone(),
            bodies: state.book.received(),
        };
        let written = bucket
            .put(keys::push_recipes(id), kept.encode())
            .only_if(Conditional {
                etag_matches: Some(state.recipes_etag.clone()),
                ..Default::default()
            })
            .execute()
            .await
            .map_err(internal)?;
        if written.is_some() {
            let missing = state.book.lacking(&named, &state.at_hand);
            return json_response(
                200,
                &MissingChunks {
                    missing_bytes: missing.iter().map(|c| c.1).sum(),
                    missing_chunks: missing.iter().map(|c| c.0.hex().to_string()).collect(),
                },
            );
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
    let row = open_push(db, id, caller).await?;
    let state = read_state(bucket, db, row.clone()).await?;
    if body.is_absent() {
        return Err(Problem::bad_request(
            ApiCode::BodyInvalid,
            "the part has no body",
        ));
    }
    let answer = receive(&mut body, bucket, db, config, &state, number, reveal).await;
    if answer.is_err() {
        body.stop().await;
    }
    answer
}

async fn receive(
    body: &mut RequestBody,
    bucket: &Bucket,
    db: &D1Database,
    config: &Config,
    state: &State,
    number: u16,
    reveal: bool,
) -> Answer {
    let id = &state.row.id;
    let mut decoder = Decoder::new(config.batch_limits());
    let frames = ingest::read_table(body, &mut decoder).await?;
    check_wanted(&frames, &[], &state.wanted())?;
    let attempt = index::new_id(db).await.map_err(internal)?;
    let pack_key = keys::pack(&attempt);
    let placed = place(db, &frames, &pack_key).await?;
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
    let row = PushPartRow {
        number,
        pack: (pack_size > 0).then(|| pack_key.clone()),
        record: record_key,
        frames: frames.len() as u32,
        bytes: frames.iter().map(|f| u64::from(f.stored_size)).sum(),
        stored_bytes: pack_size,
    };
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
    json_response(
        200,
        &PartReceived {
            push_id: id.to_string(),
            number,
            frames: row.frames,
            bytes: row.bytes,
            // Which bytes the store held already is news about other
            // packets: told only to a caller that may read them all.
            stored_bytes: parts::stored_told(&row, reveal),
        },
    )
}

/// `POST /v1/pushes/{id}/complete`
pub async fn complete(bucket: &Bucket, db: &D1Database, id: &str, caller: &str) -> Answer {
    let row = open_push(db, id, caller).await?;
    let labels = row.label_list();
    let digest = row
        .digest
        .parse::<Digest>()
        .map_err(|e| Problem::internal(e.to_string()))?;
    if let Some(existing) = index::packet(db, &digest).await.map_err(internal)? {
        // Another push or upload of the same packet finished first.
        discard(bucket, db, id).await?;
        return already_stored(db, existing, &labels).await;
    }
    let state = read_state(bucket, db, row.clone()).await?;
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
    opened::forget(id);
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
            push_id: Some(id),
            frames_pack: None,
        },
    )
    .await?;
    match finished {
        Finished::Answer(r) => Ok(r),
        // What lay in the packs collected is missing now: the same list
        // `GET` gives.
        Finished::Lost(_) => {
            let state = read_state(bucket, db, row).await?;
            Err(incomplete(&missing_list(&state.status())))
        }
    }
}
