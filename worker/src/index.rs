//! The D1 index: the queries of packets, labels, uploads and the
//! clean-up (refs and their history are `storage::index::refs`). A packet row is written only
//! for a verified packet whose bytes are all in R2, in one batch (a
//! transaction) with the rows that say which packs it uses, so a reader
//! never sees a packet whose bytes could be collected. The rows read are
//! [`crate::rows`]' types.

use packet_core::{Digest, Manifest};
use serde::Deserialize;
use wasm_bindgen::JsValue;
use worker::{D1Database, D1PreparedStatement, Result};

use crate::query::ListFilter;
use crate::rows::{PacketRow, PartRow, UploadRow};

/// Statements per D1 batch.
const STATEMENTS_PER_BATCH: usize = 200;

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
     CASE WHEN p.root IS NULL THEN NULL ELSE hex(p.root) END AS root_hex, p.findings, p.findings_kept, \
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

/// The digests of indexed packets that start with `prefix` (`sha256:` and
/// hex digits), in digest order, at most `limit`: a range of the
/// `digest` index (`g` sorts after every hex digit).
pub async fn digests_with_prefix(db: &D1Database, prefix: &str, limit: u32) -> Result<Vec<String>> {
    #[derive(Deserialize)]
    struct DigestRow {
        digest: String,
    }
    Ok(db
        .prepare("SELECT digest FROM packets WHERE digest >= ?1 AND digest < ?1 || 'g' ORDER BY digest LIMIT ?2")
        .bind(&[text(prefix), int(u64::from(limit))])?
        .all()
        .await?
        .results::<DigestRow>()?
        .into_iter()
        .map(|r| r.digest)
        .collect())
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
    /// What its bodies hold ([`crate::storage::findings::KeptFindings`]
    /// as text; `None`: nothing).
    pub findings: Option<String>,
}

/// [`NewPacket::storage`].
pub enum NewStorage<'a> {
    /// The packet is the object `key`.
    Whole {
        /// Its key.
        key: &'a str,
    },
    /// Chunks in packs, found from this root (a /2 push).
    Packed {
        /// The root's bytes.
        root: &'a [u8],
    },
}

/// The statements that index a packet, each conditional on `guard` (an SQL
/// condition, its parameters numbered from ?20): the packet row, only if
/// every pack it uses still has its row (the clean-up deletes a pack's row
/// before its object); its labels; and its packs' users, only if this
/// request's row is the one stored (a concurrent store of the same packet
/// may have won). Safe to run twice or concurrently.
pub(crate) fn packet_statements(
    db: &D1Database,
    p: &NewPacket<'_>,
    guard: &str,
    guard_values: &[JsValue],
) -> Result<Vec<D1PreparedStatement>> {
    let digest = p.digest.to_string();
    let harness = p.manifest.harness.as_ref();
    let (storage, object, root) = match p.storage {
        NewStorage::Whole { key } => ("whole", Some(key), None),
        NewStorage::Packed { root } => ("packed", None, Some(root)),
    };
    let root = root.map_or(JsValue::NULL, crate::storage::index::blob);
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
        root.clone(),
        opt(p.findings.as_deref()),
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
             manifest_offset, manifest_size, created, storage, object_key, root, findings, findings_kept) \
             SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, 1 \
             WHERE (SELECT count(*) FROM packs WHERE key IN (SELECT value FROM json_each(?15))) = ?16 AND ({guard})"
        ))
        .bind(&values)?];
    // Ours: the row names this request's objects.
    let ours =
        "EXISTS (SELECT 1 FROM packets WHERE digest = ?1 AND object_key IS ?2 AND root IS ?3)";
    statements.push(
        db.prepare(format!(
            "INSERT OR IGNORE INTO pack_users (pack, owner) SELECT value, ?1 FROM json_each(?4) WHERE {ours}"
        ))
        .bind(&[text(&digest), opt(object), root, packs])?,
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
