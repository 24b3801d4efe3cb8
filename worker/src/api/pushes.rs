//! Delta pushes (`/v1/pushes/…`, docs/transfer.md "Delta push"): create
//! (the manifest, checked by packet-core, against the push's bases), the
//! recipes of large missing bodies, parts of missing chunks, the state, an
//! abort, and `complete`, which builds the packet's layout and verifies the
//! whole packet as a reader would before it becomes visible.

use std::collections::{HashMap, HashSet};

use packet_core::offsets::Offsets;
use packet_core::{Digest, Error as PacketError, ErrorCode, Limits, Manifest};
use pillbox_wire::{MissingChunks, PartReceived, Recipes};
use worker::{Bucket, Conditional, D1Database, Request};

use super::http::{content_length, internal, json_response, no_content, parse_json, Answer};
use super::packets::{already_stored, indexed, stored, too_large};
use crate::assemble::{self, Packet, Provers, RebuildError};
use crate::caps::{self, Caps, Over};
use crate::compact::{self, Compaction};
use crate::config::{self, Config};
use crate::encoding::{self, Encoding};
use crate::index::{self, NewPacket, NewStorage};
use crate::ingest;
use crate::layout::Layout;
use crate::objects;
use crate::parts::PartRecord;
use crate::plan::{self, Bases, Plan, Uploaded};
use crate::problem::Problem;
use crate::query::{upload_labels, Query};
use crate::rows::{PushPartRow, PushRow};
use crate::store;

/// Bases a push may name.
const MAX_BASES: usize = 16;
/// Largest recipes request, decoded.
const MAX_RECIPES_BODY: u64 = 16 << 20;
/// Attempts at updating a push's plan when recipes arrive concurrently.
const PLAN_ATTEMPTS: usize = 8;

fn manifest_object(id: &str) -> String {
    format!("pushes/{id}/manifest")
}

fn plan_object(id: &str) -> String {
    format!("pushes/{id}/recipes")
}

fn record_object(id: &str, number: u16, attempt: &str) -> String {
    format!("pushes/{id}/parts/{number}.{attempt}")
}

/// The push in progress with this id, or 404.
async fn open_push(db: &D1Database, id: &str) -> Result<PushRow, Problem> {
    index::push(db, id).await.map_err(internal)?.ok_or_else(|| {
        Problem::not_found(format!(
            "no push {id} is in progress (completed, aborted, refused, expired or never created)"
        ))
    })
}

fn corrupt(e: crate::binary::Corrupt) -> Problem {
    Problem::internal(e.to_string())
}

/// A push's plan and its R2 etag.
async fn read_plan(bucket: &Bucket, id: &str) -> Result<(Plan, String), Problem> {
    let key = plan_object(id);
    let object = bucket
        .get(&key)
        .execute()
        .await
        .map_err(internal)?
        .ok_or_else(|| Problem::internal(format!("push {id} has no plan")))?;
    let etag = object.etag();
    let bytes = object
        .body()
        .ok_or_else(|| Problem::internal("R2 returned no body"))?
        .bytes()
        .await
        .map_err(internal)?;
    Ok((Plan::decode(&bytes).map_err(corrupt)?, etag))
}

/// The bases' manifests and layouts.
async fn load_bases(
    bucket: &Bucket,
    db: &D1Database,
    digests: &[String],
) -> Result<(Bases, Vec<String>), Problem> {
    let mut bases = Bases::new();
    let mut used = Vec::new();
    for d in digests {
        let Ok(digest) = d.parse::<Digest>() else {
            continue;
        };
        if let Some(row) = index::packet(db, &digest).await.map_err(internal)? {
            let loaded = objects::load(bucket, &row).await?;
            bases.add(&loaded.manifest, &loaded.layout);
            used.push(row.digest);
        }
    }
    Ok((bases, used))
}

/// The parts' records: every chunk the push uploaded and where it lives.
async fn uploaded(
    bucket: &Bucket,
    parts: &[PushPartRow],
) -> Result<HashMap<Digest, Uploaded>, Problem> {
    let mut out = HashMap::new();
    for part in parts {
        let bytes = objects::read_object(bucket, &part.record)
            .await?
            .ok_or_else(|| {
                Problem::internal(format!("the record of part {} is missing", part.number))
            })?;
        let record = PartRecord::decode(&bytes).map_err(corrupt)?;
        for f in record.frames {
            out.insert(
                f.sha256,
                Uploaded {
                    pack: record.packs[f.pack as usize].clone(),
                    offset: f.offset,
                    size: u64::from(f.size),
                },
            );
        }
    }
    Ok(out)
}

/// `POST /v1/pushes?digest=…&size=…[&base=…][&label=…]`. The bases are
/// used only if `bases_readable` (the caller may read packets): otherwise
/// they are ignored, as if none were named, and the push's `bases` is empty.
pub async fn create(
    req: &mut Request,
    bucket: &Bucket,
    db: &D1Database,
    config: &Config,
    query: &Query,
    bases_readable: bool,
) -> Answer {
    let digest = query
        .get("digest")
        .unwrap_or("")
        .parse::<Digest>()
        .map_err(Problem::from_packet_error_400)?;
    let size = query
        .get("size")
        .and_then(|s| s.parse::<u64>().ok())
        .filter(|&s| s > 0)
        .ok_or_else(|| {
            Problem::bad_request(
                "size_invalid",
                "size= is the packet's size in bytes, a positive integer",
            )
        })?;
    let labels = upload_labels(query.all("label"))?;
    let bases = query.all("base");
    if bases.len() > MAX_BASES {
        return Err(Problem::bad_request(
            "bases_invalid",
            format!("a push names at most {MAX_BASES} bases"),
        ));
    }
    for b in &bases {
        b.parse::<Digest>()
            .map_err(Problem::from_packet_error_400)?;
    }
    let max = config.limits.max_manifest_bytes;
    let body = super::http::body(req, encoding::ALL, Caps::decoded(max, manifest_too_large))?;
    if let Some(row) = index::packet(db, &digest).await.map_err(internal)? {
        return already_stored(db, row, &labels).await;
    }
    if let Some(p) = too_large(size, config) {
        return Err(p);
    }
    if body.is_absent() {
        return Err(Problem::bad_request(
            "body_invalid",
            "the push has no body: send packet.json",
        ));
    }
    let json = body.read_all().await?;
    let manifest =
        Manifest::parse(&json, &config.limits).map_err(|e| Problem::from_packet_error(&e))?;
    let expected = manifest.packet_size();
    if expected != size {
        return Err(Problem::bad_request(
            "size_mismatch",
            format!("this manifest makes a packet of {expected} bytes, size= says {size}"),
        ));
    }
    let (bases, used) = if bases_readable {
        load_bases(bucket, db, &bases).await?
    } else {
        (Bases::new(), Vec::new())
    };
    let plan = Plan::new(&manifest, &bases);
    let id = index::new_id(db).await.map_err(internal)?;
    objects::write_object(bucket, &manifest_object(&id), json).await?;
    objects::write_object(bucket, &plan_object(&id), plan.encode()).await?;
    let row = PushRow {
        id: id.clone(),
        digest: digest.to_string(),
        size,
        bases: serde_json::to_string(&used).unwrap_or_else(|_| "[]".into()),
        labels: serde_json::to_string(&labels).unwrap_or_else(|_| "[]".into()),
        created: index::now(),
    };
    index::insert_push(db, &row).await.map_err(internal)?;
    let status = plan.status(&HashSet::new());
    let mut response = json_response(201, &row.view(&status, &[], config))?;
    response
        .headers_mut()
        .set("location", &format!("/v1/pushes/{id}"))
        .map_err(internal)?;
    Ok(response)
}

/// `GET /v1/pushes/{id}`: what is still missing, which parts arrived.
pub async fn get(
    bucket: &Bucket,
    db: &D1Database,
    config: &Config,
    id: &str,
    reveal: bool,
) -> Answer {
    let row = open_push(db, id).await?;
    let (plan, _) = read_plan(bucket, id).await?;
    let mut parts = index::push_parts(db, id).await.map_err(internal)?;
    if !reveal {
        for p in &mut parts {
            p.stored_bytes = p.bytes;
        }
    }
    let have: HashSet<Digest> = uploaded(bucket, &parts).await?.into_keys().collect();
    json_response(200, &row.view(&plan.status(&have), &parts, config))
}

/// Deletes a push's R2 objects (its packs go with the clean-up).
async fn delete_objects(bucket: &Bucket, id: &str, parts: &[PushPartRow]) {
    for key in [manifest_object(id), plan_object(id)]
        .into_iter()
        .chain(parts.iter().map(|p| p.record.clone()))
    {
        let _ = bucket.delete(key).await;
    }
}

/// Ends a push without storing anything.
pub(super) async fn discard(bucket: &Bucket, db: &D1Database, id: &str) -> Result<(), Problem> {
    let parts = index::push_parts(db, id).await.map_err(internal)?;
    index::discard_push(db, id).await.map_err(internal)?;
    delete_objects(bucket, id, &parts).await;
    Ok(())
}

/// `DELETE /v1/pushes/{id}`
pub async fn abort(bucket: &Bucket, db: &D1Database, id: &str) -> Answer {
    open_push(db, id).await?;
    discard(bucket, db, id).await?;
    no_content()
}

/// `POST /v1/pushes/{id}/recipes`
pub async fn recipes(req: &mut Request, bucket: &Bucket, db: &D1Database, id: &str) -> Answer {
    let body = super::http::body(
        req,
        &[Encoding::Identity, Encoding::Gzip],
        Caps::decoded(MAX_RECIPES_BODY, caps::too_large),
    )?;
    let row = open_push(db, id).await?;
    if body.is_absent() {
        return Err(Problem::bad_request(
            "body_invalid",
            "send {\"recipes\": [...]}",
        ));
    }
    let bytes = body.read_all().await?;
    let asked: Recipes = parse_json(&bytes)?;
    let (bases, _) = load_bases(bucket, db, &row.base_list()).await?;
    let mut attempt = 0;
    let chunks = loop {
        attempt += 1;
        let (mut plan, etag) = read_plan(bucket, id).await?;
        let chunks = plan.add_recipes(&asked, &bases)?;
        let written = bucket
            .put(plan_object(id), plan.encode())
            .only_if(Conditional {
                etag_matches: Some(etag),
                ..Default::default()
            })
            .execute()
            .await
            .map_err(internal)?;
        if written.is_some() {
            break chunks;
        }
        if attempt >= PLAN_ATTEMPTS {
            return Err(Problem::conflict(
                "push_busy",
                "the push's recipes changed while these were added",
                "send the recipes again",
            ));
        }
    };
    let parts = index::push_parts(db, id).await.map_err(internal)?;
    let have = uploaded(bucket, &parts).await?;
    let missing: Vec<(Digest, u32)> = chunks
        .into_iter()
        .filter(|(d, _)| !have.contains_key(d))
        .collect();
    json_response(
        200,
        &MissingChunks {
            missing_bytes: missing.iter().map(|(_, s)| u64::from(*s)).sum(),
            missing_chunks: missing.iter().map(|(d, _)| d.hex().to_string()).collect(),
        },
    )
}

/// 413 `limit_manifest`: packet.json over the manifest limit, as sent or
/// once decoded.
fn manifest_too_large(over: Over) -> Problem {
    let (what, max) = match over {
        Over::Sent(max) => ("is over", max),
        Over::Decoded(max) => ("decodes to more than", max),
    };
    Problem::too_large(
        ErrorCode::LimitManifest.as_str(),
        format!("packet.json {what} {}", caps::bytes(max)),
        ErrorCode::LimitManifest.advice(),
    )
}

/// What a part may be: as sent, its frames (`PUSH_PART_BYTES`) with room
/// for the table and a little compression overhead; once decoded, the
/// batch's head, the largest table and its frames. 413 `part_too_large`
/// as sent, `decoded_too_large` once decoded.
fn part_caps(config: &Config) -> Caps {
    let table = (pillbox_wire::chunks::HEAD_BYTES as u64)
        + (pillbox_wire::chunks::ENTRY_BYTES as u64) * u64::from(config::MAX_PART_FRAMES);
    Caps {
        sent: config.push_part_bytes + table + (1 << 20),
        decoded: config.push_part_bytes + table,
        refuse: |over| match over {
            Over::Sent(most) => Problem::too_large(
                "part_too_large",
                format!("a part has at most {most} bytes as sent"),
                "send fewer chunks per part (part_limits.max_bytes)",
            ),
            Over::Decoded(most) => caps::decoded_too_large(most),
        },
    }
}

/// `PUT /v1/pushes/{id}/parts/{number}`
pub async fn part(
    req: &Request,
    bucket: &Bucket,
    db: &D1Database,
    config: &Config,
    id: &str,
    number: u16,
    reveal: bool,
) -> Answer {
    // A part needs a Content-Length (411), checked against its caps here.
    content_length(req)?;
    let body = super::http::body(req, encoding::ALL, part_caps(config))?;
    let push = open_push(db, id).await?;
    let (plan, _) = read_plan(bucket, id).await?;
    if body.is_absent() {
        return Err(Problem::bad_request("body_invalid", "the part has no body"));
    }
    let attempt = index::new_id(db).await.map_err(internal)?;
    let pack_key = store::pack_key(&attempt);
    let target = ingest::Target {
        plan: &plan,
        max_bytes: config.push_part_bytes,
        pack_key: &pack_key,
        digest: &push.digest,
        hasher: config.frame_hasher,
    };
    let got = ingest::ingest(bucket, db, body, &target).await?;
    let record = record_object(id, number, &attempt);
    objects::write_object(bucket, &record, got.record.encode()).await?;
    let row = PushPartRow {
        number,
        pack: got.pack.as_ref().map(|(k, _)| k.clone()),
        record,
        frames: got.frames,
        bytes: got.bytes,
        stored_bytes: got.stored_bytes,
    };
    let stored_chunks = got.pack.as_ref().map(|(_, c)| c.as_slice()).unwrap_or(&[]);
    crate::timing::timed(
        crate::timing::Stage::D1,
        index::record_part(db, id, &row, stored_chunks, &got.record.packs),
    )
    .await
    .map_err(internal)?;
    json_response(
        200,
        &PartReceived {
            push_id: id.to_string(),
            number,
            frames: got.frames,
            bytes: got.bytes,
            // Which bytes the store held already is news about other
            // packets: told only to a caller that may read them all.
            stored_bytes: if reveal { got.stored_bytes } else { got.bytes },
        },
    )
}

/// 409 `push_incomplete`, with the bodies and chunks still missing.
fn incomplete(missing: &[Digest]) -> Problem {
    let mut p = Problem::conflict(
        "push_incomplete",
        format!("{} bodies or chunks are still missing", missing.len()),
        "upload them (GET the push to see what is missing), then complete again",
    );
    p.error.missing = Some(missing.iter().map(|d| d.hex().to_string()).collect());
    p
}

/// The chunks of `layout` that lie in these packs (which are gone).
fn lost(manifest: &Manifest, layout: &crate::layout::Layout, packs: &[u32]) -> Vec<Digest> {
    let mut out = Vec::new();
    let mut seen = HashSet::new();
    for i in 0..manifest.members.len() {
        for c in layout.chunks(i) {
            if packs.contains(&c.pack) && seen.insert(c.sha256) {
                out.push(c.sha256);
            }
        }
    }
    out
}

/// The layout to store a verified packet with: `layout` with its small
/// packs merged into a new pack when [`compact::plan`] calls for it (and
/// that pack's key and plan), else `layout` as it is. A merge that cannot
/// be made (a read, a check or a write failed) leaves the layout as it is:
/// the packet is stored either way.
async fn compacted(
    bucket: &Bucket,
    db: &D1Database,
    digest: &Digest,
    layout: Layout,
) -> (Layout, Option<(String, Compaction)>) {
    let Some(c) = compact::plan(&layout) else {
        return (layout, None);
    };
    match merge(bucket, db, digest, &c).await {
        Ok(key) => (c.relayout(&layout, &key), Some((key, c))),
        Err(e) => {
            worker::console_warn!(
                "{{\"event\":\"compaction_skipped\",\"digest\":\"{digest}\",\"why\":{:?}}}",
                e
            );
            (layout, None)
        }
    }
}

/// Copies the chunks of `c` into a new pack, each checked by its sha256
/// (its row is written first, so the clean-up finds it whatever happens).
async fn merge(
    bucket: &Bucket,
    db: &D1Database,
    digest: &Digest,
    c: &Compaction,
) -> Result<String, String> {
    let mut reads = Vec::with_capacity(c.reads.len());
    for (pack, range) in &c.reads {
        let reader = store::read_range(bucket, pack, range.clone())
            .await
            .map_err(|e| store_text(&e))?
            .ok_or_else(|| format!("{pack} is gone"))?;
        let mut bytes = Vec::with_capacity((range.end - range.start) as usize);
        while let Some(piece) = reader.next().await.map_err(|e| store_text(&e))? {
            let start = bytes.len();
            bytes.resize(start + piece.length() as usize, 0);
            piece.copy_to(&mut bytes[start..]);
        }
        if bytes.len() as u64 != range.end - range.start {
            return Err(format!("{pack} is shorter than its layout says"));
        }
        reads.push(bytes);
    }
    let mut out = Vec::with_capacity(c.size as usize);
    for p in &c.copies {
        let piece = &reads[p.read][p.at as usize..(p.at + p.size) as usize];
        if Digest::of(piece) != p.sha256 {
            return Err(format!(
                "a chunk of {} does not hash to its name",
                c.reads[p.read].0
            ));
        }
        out.extend_from_slice(piece);
    }
    let key = store::pack_key(&index::new_id(db).await.map_err(|e| e.to_string())?);
    index::insert_pack(db, &key, c.size, c.copies.len() as u64, &digest.to_string())
        .await
        .map_err(|e| e.to_string())?;
    objects::write_object(bucket, &key, out)
        .await
        .map_err(|p| p.error.message().to_string())?;
    Ok(key)
}

fn store_text(e: &store::StoreError) -> String {
    match e {
        store::StoreError::Refused(e) => e.to_string(),
        store::StoreError::Failed(t) => t.clone(),
    }
}

/// `POST /v1/pushes/{id}/complete`
pub async fn complete(bucket: &Bucket, db: &D1Database, id: &str) -> Answer {
    let row = open_push(db, id).await?;
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
    let json = objects::read_object(bucket, &manifest_object(id))
        .await?
        .ok_or_else(|| Problem::internal(format!("push {id} has no manifest")))?;
    let manifest = Manifest::parse(&json, &Limits::FORMAT)
        .map_err(|e| Problem::internal(format!("the push's manifest: {e}")))?;
    let (plan, _) = read_plan(bucket, id).await?;
    let parts = index::push_parts(db, id).await.map_err(internal)?;
    let have = uploaded(bucket, &parts).await?;
    let (bases, _) = load_bases(bucket, db, &row.base_list()).await?;
    let assembled = plan::assemble(&manifest, &bases, &plan, &have).map_err(|m| incomplete(&m))?;
    let offsets = Offsets::of(&manifest);
    let packet = Packet {
        manifest: &manifest,
        json: &json,
        offsets: &offsets,
        layout: &assembled.layout,
    };
    let mut provers = Provers::new(&manifest, &assembled.prove);
    let refused = |e: PacketError| -> Problem { Problem::from_packet_error(&e) };
    let found = match assemble::digest(bucket, &packet, &mut provers).await {
        Ok(d) => d,
        Err(RebuildError::MissingPack(p)) => {
            return Err(incomplete(&lost(&manifest, &assembled.layout, &[p])))
        }
        Err(RebuildError::Body(i)) => {
            discard(bucket, db, id).await?;
            let member = &manifest.members[i];
            return Err(refused(
                PacketError::new(
                    ErrorCode::MemberDigestMismatch,
                    format!(
                        "the chunks of {} do not make a body that hashes to its sha256 {}",
                        member.path,
                        member
                            .sha256()
                            .map(|d| d.hex().to_string())
                            .unwrap_or_default()
                    ),
                )
                .at_path(&member.path)
                .at_offset(offsets.data_offsets()[i]),
            ));
        }
        Err(RebuildError::Store(e)) => return Err(super::packets::refusal(e)),
    };
    if found != digest {
        discard(bucket, db, id).await?;
        return Err(refused(PacketError::new(
            ErrorCode::PacketDigestMismatch,
            format!("the packet built from this push hashes to {found}, not {digest}"),
        )));
    }
    let (layout, merged) = compacted(bucket, db, &digest, assembled.layout).await;
    let (layout_key, manifest_key) = (
        objects::layout_key(&digest, id),
        objects::manifest_key(&digest, id),
    );
    objects::write_object(bucket, &layout_key, layout.encode()).await?;
    objects::write_object(bucket, &manifest_key, json.clone()).await?;
    let packs: Vec<String> = layout.packs().to_vec();
    let new = NewPacket {
        digest: &digest,
        size: offsets.size(),
        manifest: &manifest,
        manifest_range: offsets.manifest_range(),
        storage: NewStorage::Chunked {
            layout: &layout_key,
            manifest: &manifest_key,
        },
        packs: &packs,
        labels: &labels,
    };
    let is_stored = index::complete_push(db, &new, id).await.map_err(internal)?;
    let drop_ours = || async {
        let _ = bucket.delete(layout_key.clone()).await;
        let _ = bucket.delete(manifest_key.clone()).await;
    };
    if !is_stored {
        // A pack the layout names was collected meanwhile.
        drop_ours().await;
        let present = index::existing_packs(db, &packs).await.map_err(internal)?;
        let gone: Vec<u32> = (0..packs.len() as u32)
            .filter(|&i| !present.contains(&packs[i as usize]))
            .collect();
        return Err(incomplete(&lost(&manifest, &layout, &gone)));
    }
    if let Some((key, c)) = &merged {
        // Dedup hints follow the copies, which stay longest; only a hint.
        let _ = index::move_chunks(db, key, &c.chunks(), &c.merged).await;
    }
    super::log_findings(&digest, &provers.findings(&manifest));
    delete_objects(bucket, id, &parts).await;
    let now = indexed(db, &digest).await?;
    if now.layout_key.as_deref() == Some(layout_key.as_str()) {
        stored(db, &digest).await
    } else {
        drop_ours().await;
        json_response(200, &now.stored(false))
    }
}
