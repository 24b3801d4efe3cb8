//! The D1 index: every query the API runs. A packet row is written only
//! for a verified packet whose bytes are all in R2, in one batch (a
//! transaction) with the rows that say which packs it uses, so a reader
//! never sees a packet whose bytes could be collected. The rows read are
//! [`crate::rows`]' types.

use std::collections::HashMap;

use packet_core::{Digest, Manifest};
use serde::Deserialize;
use wasm_bindgen::JsValue;
use worker::{D1Database, D1PreparedStatement, Result};

use crate::query::ListFilter;
use crate::rows::{PacketRow, PartRow, PushPartRow, PushRow, RefRow, UploadRow};

/// Statements per D1 batch.
const STATEMENTS_PER_BATCH: usize = 200;
/// Items per JSON array bound to one statement (`json_each`): D1 binds at
/// most 100 parameters, so long lists go as one JSON text, kept well under
/// D1's largest value.
const JSON_ITEMS: usize = 4000;

fn text(s: &str) -> JsValue {
    JsValue::from_str(s)
}

fn int(n: u64) -> JsValue {
    JsValue::from_f64(n as f64)
}

fn opt(s: Option<&str>) -> JsValue {
    s.map_or(JsValue::NULL, JsValue::from_str)
}

/// The current time, RFC 3339 in UTC.
pub fn now() -> String {
    String::from(js_sys::Date::new_0().to_iso_string())
}

const PACKET_COLUMNS: &str =
    "p.seq, p.digest, p.size, p.member_count, p.file_bytes, p.harness_kind, p.thread_id, p.model, \
     p.manifest_offset, p.manifest_size, p.created, p.storage, p.object_key, p.layout_key, p.manifest_key, \
     (SELECT group_concat(l.label, char(10)) FROM labels l WHERE l.digest = p.digest) AS labels";

/// A JSON array of text, bound as one parameter.
fn json_list<'a>(items: impl IntoIterator<Item = &'a str>) -> JsValue {
    let list: Vec<&str> = items.into_iter().collect();
    text(&serde_json::to_string(&list).unwrap_or_else(|_| "[]".into()))
}

/// Runs statements in batches (the last batch holds the last statements).
async fn run_batches(db: &D1Database, mut statements: Vec<D1PreparedStatement>) -> Result<()> {
    while statements.len() > STATEMENTS_PER_BATCH {
        let rest = statements.split_off(STATEMENTS_PER_BATCH);
        db.batch(std::mem::replace(&mut statements, rest)).await?;
    }
    if !statements.is_empty() {
        db.batch(statements).await?;
    }
    Ok(())
}

/// The indexed packet with this digest.
pub async fn packet(db: &D1Database, digest: &Digest) -> Result<Option<PacketRow>> {
    db.prepare(format!(
        "SELECT {PACKET_COLUMNS} FROM packets p WHERE p.digest = ?1"
    ))
    .bind(&[text(&digest.to_string())])?
    .first::<PacketRow>(None)
    .await
}

/// Adds labels to an indexed packet (existing ones are kept).
pub async fn add_labels(db: &D1Database, digest: &Digest, labels: &[String]) -> Result<()> {
    if labels.is_empty() {
        return Ok(());
    }
    let statements = label_statements(db, digest, labels)?;
    db.batch(statements).await.map(|_| ())
}

fn label_statements(
    db: &D1Database,
    digest: &Digest,
    labels: &[String],
) -> Result<Vec<D1PreparedStatement>> {
    labels
        .iter()
        .map(|l| {
            db.prepare("INSERT OR IGNORE INTO labels (digest, label) VALUES (?1, ?2)")
                .bind(&[text(&digest.to_string()), text(l)])
        })
        .collect()
}

/// What the packet row holds, from a verified or assembled packet.
pub struct NewPacket<'a> {
    /// Its digest.
    pub digest: &'a Digest,
    /// Its size.
    pub size: u64,
    /// Its manifest.
    pub manifest: &'a Manifest,
    /// Where `packet.json` lies in the packet.
    pub manifest_range: core::ops::Range<u64>,
    /// How its bytes are kept.
    pub storage: NewStorage<'a>,
    /// The R2 objects holding its bodies (a whole packet's object is its only one).
    pub packs: &'a [String],
    /// Labels to attach.
    pub labels: &'a [String],
}

/// [`NewPacket::storage`].
pub enum NewStorage<'a> {
    /// The packet is the object `key`.
    Whole {
        /// Its key.
        key: &'a str,
    },
    /// Bodies in packs; these objects hold the manifest and the layout.
    Chunked {
        /// The layout object.
        layout: &'a str,
        /// The manifest object.
        manifest: &'a str,
    },
}

/// The statements that index a packet, each conditional on `guard` (an SQL
/// condition, its parameters numbered from ?20): the packet row, only if
/// every pack it uses still has its row (the clean-up deletes a pack's row
/// before its object); its labels; and its packs' users, only if this
/// request's row is the one stored (a concurrent store of the same packet
/// may have won). Safe to run twice or concurrently.
fn packet_statements(
    db: &D1Database,
    p: &NewPacket<'_>,
    guard: &str,
    guard_values: &[JsValue],
) -> Result<Vec<D1PreparedStatement>> {
    let digest = p.digest.to_string();
    let harness = p.manifest.harness.as_ref();
    let (storage, object, layout, manifest) = match p.storage {
        NewStorage::Whole { key } => ("whole", Some(key), None, None),
        NewStorage::Chunked { layout, manifest } => ("chunked", None, Some(layout), Some(manifest)),
    };
    let packs = json_list(p.packs.iter().map(String::as_str));
    let mut values = vec![
        text(&digest),
        int(p.size),
        int(p.manifest.members.len() as u64),
        int(p.manifest.totals.bytes),
        opt(harness.map(|h| h.kind.as_str())),
        opt(harness.map(|h| h.session_id.as_str())),
        opt(harness.and_then(|h| h.model.as_deref())),
        int(p.manifest_range.start),
        int(p.manifest_range.end - p.manifest_range.start),
        text(&now()),
        text(storage),
        opt(object),
        opt(layout),
        opt(manifest),
        packs.clone(),
        int(p.packs.len() as u64),
    ];
    if !guard_values.is_empty() {
        // The guard's parameters are ?20 on.
        values.resize(19, JsValue::NULL);
        values.extend_from_slice(guard_values);
    }
    let mut statements = vec![db
        .prepare(format!(
            "INSERT OR IGNORE INTO packets (digest, size, member_count, file_bytes, harness_kind, thread_id, model, \
             manifest_offset, manifest_size, created, storage, object_key, layout_key, manifest_key) \
             SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14 \
             WHERE (SELECT count(*) FROM packs WHERE key IN (SELECT value FROM json_each(?15))) = ?16 AND ({guard})"
        ))
        .bind(&values)?];
    // Ours: the row names this request's objects.
    let ours = "EXISTS (SELECT 1 FROM packets WHERE digest = ?1 AND (object_key IS ?2 AND layout_key IS ?3))";
    statements.push(
        db.prepare(format!(
            "INSERT OR IGNORE INTO pack_users (pack, owner) SELECT value, ?1 FROM json_each(?4) WHERE {ours}"
        ))
        .bind(&[text(&digest), opt(object), opt(layout), packs])?,
    );
    for l in p.labels {
        statements.push(
            db.prepare(
                "INSERT OR IGNORE INTO labels (digest, label) SELECT ?1, ?2 WHERE EXISTS (SELECT 1 FROM packets WHERE digest = ?1)",
            )
            .bind(&[text(&digest), text(l)])?,
        );
    }
    Ok(statements)
}

/// Records an R2 object that is about to hold bodies of packet `digest`
/// (before a byte is written, so the clean-up can find it whatever happens
/// next).
pub async fn insert_pack(
    db: &D1Database,
    key: &str,
    size: u64,
    chunks: u64,
    digest: &str,
) -> Result<()> {
    db.prepare("INSERT OR IGNORE INTO packs (key, size, chunks, packet, created, unused_check) VALUES (?1, ?2, ?3, ?4, ?5, 1)")
        .bind(&[text(key), int(size), int(chunks), text(digest), text(&now())])?
        .run()
        .await
        .map(|_| ())
}

/// Forgets a pack whose object was never written.
pub async fn forget_pack(db: &D1Database, key: &str) -> Result<()> {
    db.prepare("DELETE FROM packs WHERE key = ?1 AND NOT EXISTS (SELECT 1 FROM pack_users WHERE pack = ?1)")
        .bind(&[text(key)])?
        .run()
        .await
        .map(|_| ())
}

/// Indexes a packet stored whole (a single upload, its pack recorded by
/// [`insert_pack`] before the put). If another request stored the same
/// packet first, its object is left to the clean-up.
pub async fn insert_whole_packet(db: &D1Database, p: &NewPacket<'_>) -> Result<()> {
    let mut statements = packet_statements(db, p, "1", &[])?;
    statements.push(unused_if_unowned(db, p.packs)?);
    run_batches(db, statements).await
}

/// Indexes a packet a multipart upload assembled at `key`, and forgets the
/// upload, in one transaction that happens only if the upload still exists
/// (the clean-up may have discarded it meanwhile). `false` if it did not.
pub async fn complete_upload(
    db: &D1Database,
    p: &NewPacket<'_>,
    upload_id: &str,
    key: &str,
) -> Result<bool> {
    let guard = "EXISTS (SELECT 1 FROM uploads WHERE id = ?20)";
    let mut statements = vec![db
        .prepare(format!(
            "INSERT OR IGNORE INTO packs (key, size, chunks, packet, created, unused_check) SELECT ?1, ?2, 0, ?5, ?3, 1 WHERE {}",
            guard.replace("?20", "?4")
        ))
        .bind(&[text(key), int(p.size), text(&now()), text(upload_id), text(&p.digest.to_string())])?];
    statements.extend(packet_statements(db, p, guard, &[text(upload_id)])?);
    statements.push(unused_if_unowned(db, p.packs)?);
    let found = db
        .prepare("SELECT count(*) AS n FROM uploads WHERE id = ?1")
        .bind(&[text(upload_id)])?;
    statements.push(found);
    statements.push(
        db.prepare("DELETE FROM upload_parts WHERE upload_id = ?1")
            .bind(&[text(upload_id)])?,
    );
    statements.push(
        db.prepare("DELETE FROM uploads WHERE id = ?1")
            .bind(&[text(upload_id)])?,
    );
    let results = db.batch(statements).await?;
    let count = results
        .get(results.len() - 3)
        .and_then(|r| r.results::<Count>().ok())
        .and_then(|rows| rows.first().map(|c| c.n))
        .unwrap_or(0);
    Ok(count > 0)
}

#[derive(Deserialize)]
struct Count {
    n: u64,
}

/// Marks packs that no one uses for the clean-up's next look.
fn unused_if_unowned(db: &D1Database, packs: &[String]) -> Result<D1PreparedStatement> {
    db.prepare(
        "UPDATE packs SET unused_check = 1 WHERE key IN (SELECT value FROM json_each(?1)) \
         AND NOT EXISTS (SELECT 1 FROM pack_users WHERE pack = packs.key)",
    )
    .bind(&[json_list(packs.iter().map(String::as_str))])
}

/// Packets, newest first, with a cursor for the next page.
pub async fn list_packets(
    db: &D1Database,
    filter: &ListFilter,
) -> Result<(Vec<PacketRow>, Option<u64>)> {
    let mut clauses = Vec::new();
    let mut values = Vec::new();
    for label in &filter.labels {
        values.push(text(label));
        clauses.push(format!(
            "EXISTS (SELECT 1 FROM labels l2 WHERE l2.digest = p.digest AND l2.label = ?{})",
            values.len()
        ));
    }
    if let Some(thread) = &filter.thread_id {
        values.push(text(thread));
        clauses.push(format!("p.thread_id = ?{}", values.len()));
    }
    if let Some(kind) = &filter.harness {
        values.push(text(kind));
        clauses.push(format!("p.harness_kind = ?{}", values.len()));
    }
    if let Some(before) = filter.before {
        values.push(int(before));
        clauses.push(format!("p.seq < ?{}", values.len()));
    }
    let condition = if clauses.is_empty() {
        String::from("1")
    } else {
        clauses.join(" AND ")
    };
    values.push(int(u64::from(filter.limit) + 1));
    let sql = format!(
        "SELECT {PACKET_COLUMNS} FROM packets p WHERE {condition} ORDER BY p.seq DESC LIMIT ?{}",
        values.len()
    );
    let mut rows = db
        .prepare(sql)
        .bind(&values)?
        .all()
        .await?
        .results::<PacketRow>()?;
    let next = if rows.len() > filter.limit as usize {
        rows.truncate(filter.limit as usize);
        rows.last().map(|r| r.seq)
    } else {
        None
    };
    Ok((rows, next))
}

/// Packets in insertion order from `seq` on (for the search's scan).
pub async fn packets_from(db: &D1Database, seq: u64, limit: u32) -> Result<Vec<PacketRow>> {
    db.prepare(format!(
        "SELECT {PACKET_COLUMNS} FROM packets p WHERE p.seq >= ?1 ORDER BY p.seq LIMIT ?2"
    ))
    .bind(&[int(seq), int(u64::from(limit))])?
    .all()
    .await?
    .results::<PacketRow>()
}

/// Removes a packet from the index, unless a ref points at it. Returns
/// the refs that point at it (nothing was removed then).
pub async fn delete_packet(db: &D1Database, digest: &Digest) -> Result<Vec<String>> {
    let d = digest.to_string();
    let refs = db
        .prepare("SELECT name FROM refs WHERE digest = ?1 ORDER BY name LIMIT 10")
        .bind(&[text(&d)])?
        .all()
        .await?
        .results::<NameRow>()?;
    if !refs.is_empty() {
        return Ok(refs.into_iter().map(|r| r.name).collect());
    }
    db.batch(vec![
        db.prepare("DELETE FROM packets WHERE digest = ?1")
            .bind(&[text(&d)])?,
        db.prepare("DELETE FROM labels WHERE digest = ?1")
            .bind(&[text(&d)])?,
        release(db, &d)?,
        db.prepare("DELETE FROM pack_users WHERE owner = ?1")
            .bind(&[text(&d)])?,
    ])
    .await?;
    Ok(Vec::new())
}

#[derive(Deserialize)]
struct NameRow {
    name: String,
}

/// Marks the packs `owner` uses for the clean-up's next look (before the
/// owner's rows go).
fn release(db: &D1Database, owner: &str) -> Result<D1PreparedStatement> {
    db.prepare("UPDATE packs SET unused_check = 1 WHERE key IN (SELECT pack FROM pack_users WHERE owner = ?1)")
        .bind(&[text(owner)])
}

/// One ref.
pub async fn get_ref(db: &D1Database, name: &str) -> Result<Option<RefRow>> {
    db.prepare("SELECT name, digest, updated FROM refs WHERE name = ?1")
        .bind(&[text(name)])?
        .first::<RefRow>(None)
        .await
}

/// Refs whose names start with `prefix`, in name order, after `after`.
pub async fn list_refs(
    db: &D1Database,
    prefix: &str,
    after: &str,
    limit: u32,
) -> Result<(Vec<RefRow>, Option<String>)> {
    let mut rows = db
        .prepare(
            "SELECT name, digest, updated FROM refs WHERE substr(name, 1, length(?1)) = ?1 AND name > ?2 \
             ORDER BY name LIMIT ?3",
        )
        .bind(&[text(prefix), text(after), int(u64::from(limit) + 1)])?
        .all()
        .await?
        .results::<RefRow>()?;
    let next = if rows.len() > limit as usize {
        rows.truncate(limit as usize);
        rows.last().map(|r| r.name.clone())
    } else {
        None
    };
    Ok((rows, next))
}

/// Creates a ref that must not exist. `false` if it already does.
pub async fn create_ref(db: &D1Database, name: &str, digest: &Digest) -> Result<bool> {
    let rows = db
        .prepare("INSERT INTO refs (name, digest, updated) VALUES (?1, ?2, ?3) ON CONFLICT (name) DO NOTHING RETURNING name")
        .bind(&[text(name), text(&digest.to_string()), text(&now())])?
        .all()
        .await?
        .results::<NameRow>()?;
    Ok(!rows.is_empty())
}

/// Moves a ref from `expected` to `digest` atomically. `false` if the ref
/// does not hold `expected` (or does not exist).
pub async fn swap_ref(
    db: &D1Database,
    name: &str,
    expected: &Digest,
    digest: &Digest,
) -> Result<bool> {
    let rows = db
        .prepare("UPDATE refs SET digest = ?1, updated = ?2 WHERE name = ?3 AND digest = ?4 RETURNING name")
        .bind(&[text(&digest.to_string()), text(&now()), text(name), text(&expected.to_string())])?
        .all()
        .await?
        .results::<NameRow>()?;
    Ok(!rows.is_empty())
}

/// Deletes a ref, only if it holds `expected` when one is given. `false`
/// if nothing was deleted.
pub async fn delete_ref(db: &D1Database, name: &str, expected: Option<&Digest>) -> Result<bool> {
    let statement = match expected {
        Some(d) => db
            .prepare("DELETE FROM refs WHERE name = ?1 AND digest = ?2 RETURNING name")
            .bind(&[text(name), text(&d.to_string())])?,
        None => db
            .prepare("DELETE FROM refs WHERE name = ?1 RETURNING name")
            .bind(&[text(name)])?,
    };
    Ok(!statement.all().await?.results::<NameRow>()?.is_empty())
}

/// A fresh id (uploads, pushes, packs): 32 lowercase hex digits from
/// D1's random source.
pub async fn new_id(db: &D1Database) -> Result<String> {
    #[derive(Deserialize)]
    struct Id {
        id: String,
    }
    db.prepare("SELECT lower(hex(randomblob(16))) AS id")
        .first::<Id>(None)
        .await?
        .map(|r| r.id)
        .ok_or_else(|| worker::Error::from("no random id"))
}

/// Records a new upload.
pub async fn insert_upload(db: &D1Database, row: &UploadRow) -> Result<()> {
    db.prepare(
        "INSERT INTO uploads (id, digest, size, part_size, r2_upload_id, labels, created) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
    )
    .bind(&[
        text(&row.id),
        text(&row.digest),
        int(row.size),
        int(row.part_size),
        text(&row.r2_upload_id),
        text(&row.labels),
        text(&now()),
    ])?
    .run()
    .await
    .map(|_| ())
}

/// One upload.
pub async fn upload(db: &D1Database, id: &str) -> Result<Option<UploadRow>> {
    db.prepare(
        "SELECT id, digest, size, part_size, r2_upload_id, labels FROM uploads WHERE id = ?1",
    )
    .bind(&[text(id)])?
    .first::<UploadRow>(None)
    .await
}

/// Uploads started before `created_before` (RFC 3339, UTC), oldest first.
pub async fn uploads_created_before(
    db: &D1Database,
    created_before: &str,
    limit: u32,
) -> Result<Vec<UploadRow>> {
    db.prepare(
        "SELECT id, digest, size, part_size, r2_upload_id, labels FROM uploads WHERE created < ?1 ORDER BY created, id LIMIT ?2",
    )
    .bind(&[text(created_before), int(u64::from(limit))])?
    .all()
    .await?
    .results::<UploadRow>()
}

/// The parts received so far, by number.
pub async fn parts(db: &D1Database, id: &str) -> Result<Vec<PartRow>> {
    db.prepare("SELECT number, etag, size FROM upload_parts WHERE upload_id = ?1 ORDER BY number")
        .bind(&[text(id)])?
        .all()
        .await?
        .results::<PartRow>()
}

/// Records a part (replacing an earlier upload of the same number).
pub async fn put_part(db: &D1Database, id: &str, part: &PartRow) -> Result<()> {
    db.prepare("INSERT OR REPLACE INTO upload_parts (upload_id, number, etag, size) VALUES (?1, ?2, ?3, ?4)")
        .bind(&[text(id), int(u64::from(part.number)), text(&part.etag), int(part.size)])?
        .run()
        .await
        .map(|_| ())
}

/// Claims an upload for discarding: deletes its rows and records its
/// staging object as an unused pack (so the clean-up deletes whatever is
/// left of it), in one transaction. `false` if the upload was gone.
pub async fn claim_upload(db: &D1Database, id: &str, staging_key: &str, size: u64) -> Result<bool> {
    let results = db
        .batch(vec![
            db.prepare(
                "INSERT OR IGNORE INTO packs (key, size, chunks, packet, created, unused_check) \
                 SELECT ?1, ?2, 0, digest, ?3, 1 FROM uploads WHERE id = ?4",
            )
            .bind(&[text(staging_key), int(size), text(&now()), text(id)])?,
            db.prepare("DELETE FROM upload_parts WHERE upload_id = ?1")
                .bind(&[text(id)])?,
            db.prepare("DELETE FROM uploads WHERE id = ?1 RETURNING id")
                .bind(&[text(id)])?,
        ])
        .await?;
    Ok(results
        .last()
        .and_then(|r| r.results::<serde_json::Value>().ok())
        .is_some_and(|rows| !rows.is_empty()))
}

// ---- delta pushes --------------------------------------------------------

/// The owner name of an open push in `pack_users`.
fn push_owner(id: &str) -> String {
    format!("push:{id}")
}

/// Records a new push.
pub async fn insert_push(db: &D1Database, row: &PushRow) -> Result<()> {
    db.prepare("INSERT INTO pushes (id, digest, size, bases, labels, created) VALUES (?1, ?2, ?3, ?4, ?5, ?6)")
        .bind(&[text(&row.id), text(&row.digest), int(row.size), text(&row.bases), text(&row.labels), text(&row.created)])?
        .run()
        .await
        .map(|_| ())
}

const PUSH_COLUMNS: &str = "id, digest, size, bases, labels, created";

/// One push.
pub async fn push(db: &D1Database, id: &str) -> Result<Option<PushRow>> {
    db.prepare(format!("SELECT {PUSH_COLUMNS} FROM pushes WHERE id = ?1"))
        .bind(&[text(id)])?
        .first::<PushRow>(None)
        .await
}

/// Pushes started before `created_before` (RFC 3339, UTC), oldest first.
pub async fn pushes_created_before(
    db: &D1Database,
    created_before: &str,
    limit: u32,
) -> Result<Vec<PushRow>> {
    db.prepare(format!(
        "SELECT {PUSH_COLUMNS} FROM pushes WHERE created < ?1 ORDER BY created, id LIMIT ?2"
    ))
    .bind(&[text(created_before), int(u64::from(limit))])?
    .all()
    .await?
    .results::<PushRow>()
}

/// A push's parts, by number.
pub async fn push_parts(db: &D1Database, id: &str) -> Result<Vec<PushPartRow>> {
    db.prepare("SELECT number, pack, record, frames, bytes, stored_bytes FROM push_parts WHERE push_id = ?1 ORDER BY number")
        .bind(&[text(id)])?
        .all()
        .await?
        .results::<PushPartRow>()
}

/// Where the store already holds these chunks (in packs not being
/// collected), as sha256 → (pack, offset, size).
pub async fn find_chunks(
    db: &D1Database,
    shas: &[Digest],
) -> Result<HashMap<Digest, (String, u64, u64)>> {
    #[derive(Deserialize)]
    struct Row {
        sha256: String,
        pack: String,
        offset: u64,
        size: u64,
    }
    let mut found = HashMap::new();
    let hex: Vec<String> = shas.iter().map(|d| d.hex().to_string()).collect();
    for group in hex.chunks(JSON_ITEMS) {
        let rows = db
            .prepare(
                "SELECT c.sha256, c.pack, c.offset, c.size FROM chunks c JOIN packs p ON p.key = c.pack \
                 WHERE c.sha256 IN (SELECT value FROM json_each(?1))",
            )
            .bind(&[json_list(group.iter().map(String::as_str))])?
            .all()
            .await?
            .results::<Row>()?;
        for r in rows {
            if let Ok(d) = Digest::from_hex(&r.sha256) {
                found.insert(d, (r.pack, r.offset, r.size));
            }
        }
    }
    Ok(found)
}

/// A part received: the chunks it stored in `pack` (sha256, offset, size),
/// the packs its frames live in, and its row (replacing an earlier attempt
/// of the same number). Nothing is recorded if the push is gone.
pub async fn record_part(
    db: &D1Database,
    push_id: &str,
    part: &PushPartRow,
    stored: &[(Digest, u64, u64)],
    packs: &[String],
) -> Result<()> {
    let open = "EXISTS (SELECT 1 FROM pushes WHERE id = ?9)";
    let mut statements = Vec::new();
    if let Some(pack) = &part.pack {
        for group in stored.chunks(JSON_ITEMS) {
            let rows: Vec<(String, u64, u64)> = group
                .iter()
                .map(|(d, o, s)| (d.hex().to_string(), *o, *s))
                .collect();
            statements.push(
                db.prepare(format!(
                    "INSERT OR IGNORE INTO chunks (sha256, pack, offset, size) \
                     SELECT json_extract(value, '$[0]'), ?1, json_extract(value, '$[1]'), json_extract(value, '$[2]') \
                     FROM json_each(?2) WHERE {}",
                    open.replace("?9", "?3")
                ))
                .bind(&[text(pack), text(&serde_json::to_string(&rows).unwrap_or_else(|_| "[]".into())), text(push_id)])?,
            );
        }
    }
    statements.push(
        db.prepare(format!(
            "INSERT OR IGNORE INTO pack_users (pack, owner) SELECT value, ?1 FROM json_each(?2) WHERE {}",
            open.replace("?9", "?3")
        ))
        .bind(&[text(&push_owner(push_id)), json_list(packs.iter().map(String::as_str)), text(push_id)])?,
    );
    statements.push(
        db.prepare(format!(
            "INSERT OR REPLACE INTO push_parts (push_id, number, pack, record, frames, bytes, stored_bytes) \
             SELECT ?9, ?2, ?3, ?4, ?5, ?6, ?7 WHERE {open}"
        ))
        .bind(&[
            JsValue::NULL,
            int(u64::from(part.number)),
            opt(part.pack.as_deref()),
            text(&part.record),
            int(u64::from(part.frames)),
            int(part.bytes),
            int(part.stored_bytes),
            JsValue::NULL,
            text(push_id),
        ])?,
    );
    run_batches(db, statements).await
}

/// Stores the packet a push assembled and ends the push, in one
/// transaction: the packet row only if every pack its layout names still
/// exists, and the push's rows go only if the packet is stored (by this
/// push or another). Returns whether the packet is stored now.
pub async fn complete_push(db: &D1Database, p: &NewPacket<'_>, push_id: &str) -> Result<bool> {
    let mut statements = packet_statements(db, p, "1", &[])?;
    let stored = "EXISTS (SELECT 1 FROM packets WHERE digest = ?2)";
    let owner = push_owner(push_id);
    let digest = p.digest.to_string();
    statements.push(
        db.prepare(format!("UPDATE packs SET unused_check = 1 WHERE key IN (SELECT pack FROM pack_users WHERE owner = ?1) AND {stored}"))
            .bind(&[text(&owner), text(&digest)])?,
    );
    statements.push(
        db.prepare(format!(
            "DELETE FROM pack_users WHERE owner = ?1 AND {stored}"
        ))
        .bind(&[text(&owner), text(&digest)])?,
    );
    statements.push(
        db.prepare(format!(
            "DELETE FROM push_parts WHERE push_id = ?1 AND {stored}"
        ))
        .bind(&[text(push_id), text(&digest)])?,
    );
    statements.push(
        db.prepare(format!("DELETE FROM pushes WHERE id = ?1 AND {stored}"))
            .bind(&[text(push_id), text(&digest)])?,
    );
    db.batch(statements).await?;
    Ok(packet(db, p.digest).await?.is_some())
}

/// Points the rows of chunks a compaction copied into `pack` (sha256,
/// offset, size) at their copy there, where their row named one of the
/// packs `merged`: the copy is the one later packets use.
pub async fn move_chunks(
    db: &D1Database,
    pack: &str,
    chunks: &[(Digest, u64, u64)],
    merged: &[String],
) -> Result<()> {
    let mut statements = Vec::new();
    for group in chunks.chunks(JSON_ITEMS) {
        let rows: Vec<(String, u64)> = group
            .iter()
            .map(|(d, o, _)| (d.hex().to_string(), *o))
            .collect();
        statements.push(
            db.prepare(
                "UPDATE chunks SET pack = ?1, \
                 offset = (SELECT json_extract(value, '$[1]') FROM json_each(?2) WHERE json_extract(value, '$[0]') = chunks.sha256) \
                 WHERE sha256 IN (SELECT json_extract(value, '$[0]') FROM json_each(?2)) \
                 AND pack IN (SELECT value FROM json_each(?3)) AND EXISTS (SELECT 1 FROM packs WHERE key = ?1)",
            )
            .bind(&[
                text(pack),
                text(&serde_json::to_string(&rows).unwrap_or_else(|_| "[]".into())),
                json_list(merged.iter().map(String::as_str)),
            ])?,
        );
    }
    run_batches(db, statements).await
}

/// Ends a push without storing anything: its rows go and the packs it
/// used are left to the clean-up.
pub async fn discard_push(db: &D1Database, push_id: &str) -> Result<()> {
    let owner = push_owner(push_id);
    db.batch(vec![
        release(db, &owner)?,
        db.prepare("DELETE FROM pack_users WHERE owner = ?1")
            .bind(&[text(&owner)])?,
        db.prepare("DELETE FROM push_parts WHERE push_id = ?1")
            .bind(&[text(push_id)])?,
        db.prepare("DELETE FROM pushes WHERE id = ?1")
            .bind(&[text(push_id)])?,
    ])
    .await
    .map(|_| ())
}

/// Which of these packs still have their row.
pub async fn existing_packs(db: &D1Database, keys: &[String]) -> Result<Vec<String>> {
    #[derive(Deserialize)]
    struct Key {
        key: String,
    }
    Ok(db
        .prepare("SELECT key FROM packs WHERE key IN (SELECT value FROM json_each(?1))")
        .bind(&[json_list(keys.iter().map(String::as_str))])?
        .all()
        .await?
        .results::<Key>()?
        .into_iter()
        .map(|k| k.key)
        .collect())
}

// ---- the clean-up ------------------------------------------------------------

/// Packs the clean-up should look at: marked, created before the cutoff.
pub async fn packs_to_check(
    db: &D1Database,
    created_before: &str,
    limit: u32,
) -> Result<Vec<String>> {
    #[derive(Deserialize)]
    struct Key {
        key: String,
    }
    Ok(db
        .prepare("SELECT key FROM packs WHERE unused_check = 1 AND created < ?1 ORDER BY created LIMIT ?2")
        .bind(&[text(created_before), int(u64::from(limit))])?
        .all()
        .await?
        .results::<Key>()?
        .into_iter()
        .map(|k| k.key)
        .collect())
}

/// Deletes a pack's row and its chunks' rows if no one uses it (then its
/// object may go: nothing can start using it any more, and a packet that
/// named it would not be stored, its row being gone). Otherwise unmarks
/// it. Returns whether it was deleted.
pub async fn collect_pack(db: &D1Database, key: &str) -> Result<bool> {
    let results = db
        .batch(vec![
            db.prepare("DELETE FROM packs WHERE key = ?1 AND NOT EXISTS (SELECT 1 FROM pack_users WHERE pack = ?1) RETURNING key")
                .bind(&[text(key)])?,
            db.prepare("UPDATE packs SET unused_check = 0 WHERE key = ?1").bind(&[text(key)])?,
            db.prepare("DELETE FROM chunks WHERE pack = ?1 AND NOT EXISTS (SELECT 1 FROM packs WHERE key = ?1)")
                .bind(&[text(key)])?,
        ])
        .await?;
    Ok(results
        .first()
        .and_then(|r| r.results::<serde_json::Value>().ok())
        .is_some_and(|rows| !rows.is_empty()))
}
