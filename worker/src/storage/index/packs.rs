//! `packs` (every R2 object that holds chunks or a whole packet, recorded
//! before the object is written; `unused_check` marks it for the clean-up)
//! and `pack_users` (pack and its user: a stored packet, by digest, or an
//! open push, `push:<id>`); and collecting a pack no one uses.

use serde::Deserialize;
use worker::{D1Database, D1PreparedStatement, Result};

use super::{int, json, now, sql, text, Condition, Sql};

/// A row of pack keys.
#[derive(Deserialize)]
struct KeyRow {
    key: String,
}

/// The owner name of an open push in `pack_users`.
pub fn push_owner(id: &str) -> String {
    format!("push:{id}")
}

/// Records an R2 object about to hold chunks of packet `digest` (before a
/// byte is written, so the clean-up finds it whatever happens next).
pub async fn insert(
    db: &D1Database,
    key: &str,
    size: u64,
    chunks: u64,
    digest: &str,
) -> Result<()> {
    insert_statement(db, key, size, chunks, digest, &Condition::always())?
        .run()
        .await
        .map(|_| ())
}

/// The statement of [`insert`], recording the object only if `guard`
/// holds (chunks 0: it holds packet `digest` whole).
pub fn insert_statement(
    db: &D1Database,
    key: &str,
    size: u64,
    chunks: u64,
    digest: &str,
    guard: &Condition,
) -> Result<D1PreparedStatement> {
    Sql::owned(format!(
        "INSERT OR IGNORE INTO packs (key, size, chunks, packet, created, unused_check) \
         SELECT :key, :size, :chunks, :packet, :created, 1 WHERE {}",
        guard.text()
    ))
    .bind("key", text(key))
    .bind("size", int(size))
    .bind("chunks", int(chunks))
    .bind("packet", text(digest))
    .bind("created", text(&now()))
    .bind_condition(guard)
    .prepare(db)
}

/// The keys of `keys` whose row is gone: packs the clean-up collected.
pub async fn gone(db: &D1Database, keys: &[String]) -> Result<Vec<String>> {
    if keys.is_empty() {
        return Ok(Vec::new());
    }
    let present = existing(db, keys).await?;
    Ok(keys
        .iter()
        .filter(|k| !present.contains(k))
        .cloned()
        .collect())
}

/// Forgets a pack whose object was never written.
pub async fn forget(db: &D1Database, key: &str) -> Result<()> {
    sql("DELETE FROM packs WHERE key = :key AND NOT EXISTS (SELECT 1 FROM pack_users WHERE pack = :key)")
        .bind("key", text(key))
        .prepare(db)?
        .run()
        .await
        .map(|_| ())
}

/// Marks the packs `owner` uses for the clean-up, then drops its rows.
pub fn release(db: &D1Database, owner: &str) -> Result<Vec<D1PreparedStatement>> {
    Ok(vec![
        sql("UPDATE packs SET unused_check = 1 WHERE key IN (SELECT pack FROM pack_users WHERE owner = :owner)")
            .bind("owner", text(owner))
            .prepare(db)?,
        sql("DELETE FROM pack_users WHERE owner = :owner")
            .bind("owner", text(owner))
            .prepare(db)?,
    ])
}

/// Which of these packs still have their row.
pub async fn existing(db: &D1Database, keys: &[String]) -> Result<Vec<String>> {
    key_rows(
        db,
        sql("SELECT key FROM packs WHERE key IN (SELECT value FROM json_each(:keys))")
            .bind("keys", json(&keys)),
    )
    .await
}

/// Marks those of `keys` that no one uses for the clean-up's next look.
pub fn mark_if_unused(db: &D1Database, keys: &[String]) -> Result<D1PreparedStatement> {
    sql(
        "UPDATE packs SET unused_check = 1 WHERE key IN (SELECT value FROM json_each(:keys)) \
         AND NOT EXISTS (SELECT 1 FROM pack_users WHERE pack = packs.key)",
    )
    .bind("keys", json(&keys))
    .prepare(db)
}

/// Packs the clean-up should look at: marked, created before
/// `created_before` (RFC 3339, UTC), oldest first.
pub async fn to_check(db: &D1Database, created_before: &str, limit: u32) -> Result<Vec<String>> {
    key_rows(
        db,
        sql("SELECT key FROM packs WHERE unused_check = 1 AND created < :before ORDER BY created LIMIT :limit")
            .bind("before", text(created_before))
            .bind("limit", int(u64::from(limit))),
    )
    .await
}

/// The `key` column of the rows a query returns.
async fn key_rows(db: &D1Database, query: Sql) -> Result<Vec<String>> {
    Ok(query
        .prepare(db)?
        .all()
        .await?
        .results::<KeyRow>()?
        .into_iter()
        .map(|k| k.key)
        .collect())
}

/// Deletes a pack's row and its chunks' rows if no one uses it (then its
/// object may go: nothing can start using it any more, and a packet that
/// named it would not be stored, its row being gone). Otherwise unmarks
/// it. Returns whether it was deleted.
pub async fn collect(db: &D1Database, key: &str) -> Result<bool> {
    let results = db
        .batch(vec![
            sql("DELETE FROM packs WHERE key = :key \
                 AND NOT EXISTS (SELECT 1 FROM pack_users WHERE pack = :key) RETURNING key")
            .bind("key", text(key))
            .prepare(db)?,
            sql("UPDATE packs SET unused_check = 0 WHERE key = :key")
                .bind("key", text(key))
                .prepare(db)?,
            sql("DELETE FROM chunks WHERE pack = :key AND NOT EXISTS (SELECT 1 FROM packs WHERE key = :key)")
                .bind("key", text(key))
                .prepare(db)?,
        ])
        .await?;
    Ok(results
        .first()
        .and_then(|r| r.results::<serde_json::Value>().ok())
        .is_some_and(|rows| !rows.is_empty()))
}
