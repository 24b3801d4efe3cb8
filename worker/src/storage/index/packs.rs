//! `packs` (every R2 object that holds chunks or a whole packet, recorded
//! before the object is written; `unused_check` marks it for the clean-up)
//! and `pack_users` (pack and its user: a stored packet, by digest, or an
//! open push, `push:<id>`).

use serde::Deserialize;
use worker::{D1Database, D1PreparedStatement, Result};

use super::{int, json, sql, text};

/// The owner name of an open push in `pack_users`.
pub fn push_owner(id: &str) -> String {
    format!("push:{id}")
}

/// The current time, RFC 3339 in UTC.
pub fn now() -> String {
    String::from(js_sys::Date::new_0().to_iso_string())
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
    insert_statement(db, key, size, chunks, digest)?
        .run()
        .await
        .map(|_| ())
}

/// The statement of [`insert`].
pub fn insert_statement(
    db: &D1Database,
    key: &str,
    size: u64,
    chunks: u64,
    digest: &str,
) -> Result<D1PreparedStatement> {
    sql(
        "INSERT OR IGNORE INTO packs (key, size, chunks, packet, created, unused_check) \
         VALUES (:key, :size, :chunks, :packet, :created, 1)",
    )
    .bind("key", text(key))
    .bind("size", int(size))
    .bind("chunks", int(chunks))
    .bind("packet", text(digest))
    .bind("created", text(&now()))
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

/// Makes `owner` a user of `keys`, if `guard` (an SQL condition over the
/// statement's parameters) holds.
pub fn add_users(db: &D1Database, owner: &str, keys: &[String]) -> Result<D1PreparedStatement> {
    sql("INSERT OR IGNORE INTO pack_users (pack, owner) SELECT value, :owner FROM json_each(:keys)")
        .bind("owner", text(owner))
        .bind("keys", json(&keys))
        .prepare(db)
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
    #[derive(Deserialize)]
    struct Key {
        key: String,
    }
    Ok(
        sql("SELECT key FROM packs WHERE key IN (SELECT value FROM json_each(:keys))")
            .bind("keys", json(&keys))
            .prepare(db)?
            .all()
            .await?
            .results::<Key>()?
            .into_iter()
            .map(|k| k.key)
            .collect(),
    )
}
