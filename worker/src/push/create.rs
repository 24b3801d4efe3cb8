//! `POST /v1/pushes` (docs/transfer.md, "Push", step 1): the create body
//! read as it arrives ([`crate::ingest`]): its recipes, its table (packet
//! .json's frames first, all of its chunks sent or in a base), its frames
//! (those the store lacks into the request's own pack). Once packet.json's
//! frames are in, the packet is checked ([`super::manifest::CreateBody`])
//! before a body frame's bytes are read. With every body at hand the push
//! is completed in the same request ([`super::finish`]); else it stays
//! open, its manifest, recipes and frames' record kept.

use std::collections::{HashMap, HashSet};

use packet_core::secrets::Scanner;
use packet_core::{Body, BodyFindings};
use pillbox_wire::recipes::{PushDecoder, Recipes};
use worker::{Bucket, D1Database};

use super::arrival;
use super::at_hand::AtHand;
use super::finish::{finish, Ended, Finished, Finishing};
use super::internal;
use super::manifest::{self, Checked, CreateBody};
use super::parts::{self, Placed, CREATE_PART};
use super::plan::{Plan, Status};
use super::receive::{place, Landing};
use super::request::{self, CreateQuery};
use super::state::load_bases;
use super::wanted::{manifest_frames, status_of};
use crate::body::Body as RequestBody;
use crate::config::Config;
use crate::ingest;
use crate::problem::Problem;
use crate::storage::chunk::Name;
use crate::storage::index::pushes::PushRow;
use crate::storage::index::{packs, pushes};
use crate::storage::keys;
use crate::storage::load;
use crate::timing::{self, Stage};

/// A create, its query checked, its body not read yet.
pub struct Create<'a> {
    /// The bucket of packs and objects.
    pub bucket: &'a Bucket,
    /// The index.
    pub db: &'a D1Database,
    /// The settings.
    pub config: &'a Config,
    /// The packet, its labels and the bases named.
    pub query: CreateQuery,
    /// Whether the caller may read packets: else the bases are ignored,
    /// as if none were named ("What a push can learn").
    pub bases_readable: bool,
    /// The id of the token that creates it.
    pub caller: &'a str,
}

/// How a create ended.
pub enum Created {
    /// The packet is stored in this request.
    Ended(Ended),
    /// The push stays open (202): its row, and what it lacks.
    Open {
        /// Its row.
        row: PushRow,
        /// What it lacks.
        status: Status,
    },
}

impl Create<'_> {
    /// Reads the create body from `body` (stopped on a refusal) and stores
    /// the packet, or leaves the push open.
    pub async fn run(self, body: &mut RequestBody) -> Result<Created, Problem> {
        let (at_hand, used) = if self.bases_readable {
            load_bases(self.bucket, self.db, &self.query.bases).await?
        } else {
            (AtHand::new(), Vec::new())
        };
        let created = self.read(body, at_hand, used).await;
        if created.is_err() {
            body.stop().await;
        }
        created
    }

    async fn read(
        self,
        body: &mut RequestBody,
        mut at_hand: AtHand,
        used: Vec<String>,
    ) -> Result<Created, Problem> {
        let Create {
            bucket,
            db,
            config,
            query:
                CreateQuery {
                    digest,
                    size,
                    labels,
                    ..
                },
            caller,
            ..
        } = self;
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
        let Landing {
            id,
            pack_key,
            placed,
        } = place(db, &frames, Some(Stage::D1)).await?;
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
            digest,
            size,
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
                    labels: &labels,
                    push_id: None,
                    frames_pack: Some((pack_key.as_str(), parts::stored_rows(&record, &new))),
                },
            )
            .await?;
            match finished {
                Finished::Ended(ended) => return Ok(Created::Ended(ended)),
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
            size,
            bases: serde_json::to_string(&used).unwrap_or_else(|_| "[]".into()),
            labels: serde_json::to_string(&labels).unwrap_or_else(|_| "[]".into()),
            created: crate::storage::index::now(),
            owner: Some(caller.to_string()),
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
        let part = parts::part_row(CREATE_PART, &frames, &pack_key, pack_size, record_key);
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
        Ok(Created::Open { row, status })
    }
}
