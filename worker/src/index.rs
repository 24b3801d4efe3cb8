//! The D1 index: every query the API runs. A packet row is written only
//! for a verified packet, after its members, in a batch (a transaction), so
//! a reader never sees a packet without its members. The rows read are
//! [`crate::rows`]' types.

use packet_core::{Digest, VerifiedPacket};
use serde::Deserialize;
use wasm_bindgen::JsValue;
use worker::{D1Database, D1PreparedStatement, Result};

use crate::query::{ListFilter, SearchKey};
use crate::rows::{MemberRow, PacketRow, PartRow, RefRow, UploadRow};

/// Members per INSERT (D1 binds at most 100 parameters per statement).
const MEMBER_ROWS_PER_STATEMENT: usize = 10;
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
     p.manifest_offset, p.manifest_size, p.created, \
     (SELECT group_concat(l.label, char(10)) FROM labels l WHERE l.digest = p.digest) AS labels";

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

/// Indexes a verified packet: members first, then the packet row and its
/// labels in the last batch. Safe to run twice or concurrently for the same
/// packet (every insert ignores rows already there).
pub async fn insert_packet(
    db: &D1Database,
    indexed: &VerifiedPacket,
    labels: &[String],
) -> Result<()> {
    let digest = indexed.digest.to_string();
    let mut statements = Vec::new();
    let entries: Vec<(usize, &packet_core::Member)> =
        indexed.manifest.members.iter().enumerate().collect();
    for rows in entries.chunks(MEMBER_ROWS_PER_STATEMENT) {
        let placeholders: Vec<String> = (0..rows.len())
            .map(|r| {
                let b = r * 9;
                format!(
                    "(?{},?{},?{},?{},?{},?{},?{},?{},?{})",
                    b + 1,
                    b + 2,
                    b + 3,
                    b + 4,
                    b + 5,
                    b + 6,
                    b + 7,
                    b + 8,
                    b + 9
                )
            })
            .collect();
        let mut values = Vec::with_capacity(rows.len() * 9);
        for (index, entry) in rows {
            values.push(text(&digest));
            values.push(int(*index as u64));
            values.push(text(&entry.path));
            values.push(text(entry.kind.as_str()));
            values.push(int(u64::from(entry.mode)));
            values.push(int(entry.size));
            values.push(
                entry
                    .sha256
                    .map_or(JsValue::NULL, |d| text(&d.hex().to_string())),
            );
            values.push(opt(entry.target.as_deref()));
            values.push(int(indexed.data_offsets[*index]));
        }
        statements.push(
            db.prepare(format!(
                "INSERT OR IGNORE INTO members (digest, idx, path, type, mode, size, sha256, target, data_offset) VALUES {}",
                placeholders.join(",")
            ))
            .bind(&values)?,
        );
    }
    let harness = indexed.manifest.harness.as_ref();
    let mut last = label_statements(db, &indexed.digest, labels)?;
    last.push(
        db.prepare(
            "INSERT OR IGNORE INTO packets (digest, size, member_count, file_bytes, harness_kind, thread_id, model, \
             manifest_offset, manifest_size, created) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
        )
        .bind(&[
            text(&digest),
            int(indexed.size),
            int(indexed.manifest.members.len() as u64),
            int(indexed.manifest.totals.bytes),
            opt(harness.map(|h| h.kind.as_str())),
            opt(harness.map(|h| h.session_id.as_str())),
            opt(harness.and_then(|h| h.model.as_deref())),
            int(indexed.manifest_range.start),
            int(indexed.manifest_range.end - indexed.manifest_range.start),
            text(&now()),
        ])?,
    );
    while statements.len() > STATEMENTS_PER_BATCH {
        let rest = statements.split_off(STATEMENTS_PER_BATCH);
        db.batch(std::mem::replace(&mut statements, rest)).await?;
    }
    statements.extend(last);
    db.batch(statements).await.map(|_| ())
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

/// One member of an indexed packet.
pub async fn member(db: &D1Database, digest: &Digest, path: &str) -> Result<Option<MemberRow>> {
    db.prepare("SELECT id, digest, path, type, mode, size, sha256, target, data_offset FROM members WHERE digest = ?1 AND path = ?2")
        .bind(&[text(&digest.to_string()), text(path)])?
        .first::<MemberRow>(None)
        .await
}

/// Members matching a path or a blob sha256, across packets, with a cursor.
pub async fn search(
    db: &D1Database,
    key: &SearchKey,
    after: u64,
    limit: u32,
) -> Result<(Vec<MemberRow>, Option<u64>)> {
    let (column, value) = match key {
        SearchKey::Path(p) => ("path", p),
        SearchKey::Sha256(h) => ("sha256", h),
    };
    let mut rows = db
        .prepare(format!(
            "SELECT id, digest, path, type, mode, size, sha256, target, data_offset FROM members \
             WHERE {column} = ?1 AND id > ?2 ORDER BY id LIMIT ?3"
        ))
        .bind(&[text(value), int(after), int(u64::from(limit) + 1)])?
        .all()
        .await?
        .results::<MemberRow>()?;
    let next = if rows.len() > limit as usize {
        rows.truncate(limit as usize);
        rows.last().map(|r| r.id)
    } else {
        None
    };
    Ok((rows, next))
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
        db.prepare("DELETE FROM members WHERE digest = ?1")
            .bind(&[text(&d)])?,
    ])
    .await?;
    Ok(Vec::new())
}

#[derive(Deserialize)]
struct NameRow {
    name: String,
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

/// A fresh upload id: 32 lowercase hex digits from D1's random source.
pub async fn new_upload_id(db: &D1Database) -> Result<String> {
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

/// Forgets an upload and its parts.
pub async fn delete_upload(db: &D1Database, id: &str) -> Result<()> {
    db.batch(vec![
        db.prepare("DELETE FROM upload_parts WHERE upload_id = ?1")
            .bind(&[text(id)])?,
        db.prepare("DELETE FROM uploads WHERE id = ?1")
            .bind(&[text(id)])?,
    ])
    .await
    .map(|_| ())
}
