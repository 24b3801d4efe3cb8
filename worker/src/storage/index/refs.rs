//! `refs` (names for packets, created only if absent and moved only from
//! the digest the writer expects) and `ref_history` (the packets each ref
//! has named, the last [`REF_HISTORY_KEPT`]). A change to a ref and its
//! history row are one batch, one transaction: the row is written on the
//! same condition as the change, evaluated on the same state, so the
//! history never holds a move that did not happen nor misses one that did.

use packet_core::Digest;
use serde::Deserialize;
use wasm_bindgen::JsValue;
use worker::{D1Database, D1PreparedStatement, Result};

use super::{int, opt, sql, text, Sql};
use crate::rows::{ListedRefRow, RefMoveRow, RefRow, REF_HISTORY_KEPT};

/// The current time, RFC 3339 in UTC.
fn now() -> String {
    String::from(js_sys::Date::new_0().to_iso_string())
}

#[derive(Deserialize)]
struct NameRow {
    #[allow(dead_code)]
    name: String,
}

/// One ref.
pub async fn get(db: &D1Database, name: &str) -> Result<Option<RefRow>> {
    sql("SELECT name, digest, updated FROM refs WHERE name = :name")
        .bind("name", text(name))
        .prepare(db)?
        .first::<RefRow>(None)
        .await
}

/// Refs whose names start with `prefix`, in name order, after `after`,
/// with their packets' sizes and labels.
pub async fn list(
    db: &D1Database,
    prefix: &str,
    after: &str,
    limit: u32,
) -> Result<(Vec<ListedRefRow>, Option<String>)> {
    let mut rows = sql(
        "SELECT r.name, r.digest, r.updated, p.size AS size, \
         (SELECT group_concat(l.label, char(10)) FROM labels l WHERE l.digest = r.digest) AS labels \
         FROM refs r LEFT JOIN packets p ON p.digest = r.digest \
         WHERE substr(r.name, 1, length(:prefix)) = :prefix AND r.name > :after \
         ORDER BY r.name LIMIT :limit",
    )
    .bind("prefix", text(prefix))
    .bind("after", text(after))
    .bind("limit", int(u64::from(limit) + 1))
    .prepare(db)?
    .all()
    .await?
    .results::<ListedRefRow>()?;
    let next = if rows.len() > limit as usize {
        rows.truncate(limit as usize);
        rows.last().map(|r| r.name.clone())
    } else {
        None
    };
    Ok((rows, next))
}

/// The history row of a change to `name` making it name `digest`, written
/// only if `condition` (over `:name` and `expected`) holds, and the
/// statement that drops the rows before the last [`REF_HISTORY_KEPT`].
fn recorded(
    db: &D1Database,
    condition: &'static str,
    name: &str,
    digest: &Digest,
    expected: Option<&Digest>,
    at: &str,
    by: Option<&str>,
) -> Result<[D1PreparedStatement; 2]> {
    let mut insert = Sql::owned(format!(
        "INSERT INTO ref_history (name, digest, at, token_id) \
         SELECT :name, :digest, :at, :by WHERE {condition}"
    ))
    .bind("name", text(name))
    .bind("digest", text(&digest.to_string()))
    .bind("at", text(at))
    .bind("by", opt(by));
    if let Some(e) = expected {
        insert = insert.bind("expected", text(&e.to_string()));
    }
    let prune = sql("DELETE FROM ref_history WHERE name = :name AND seq <= \
         (SELECT seq FROM ref_history WHERE name = :name ORDER BY seq DESC LIMIT 1 OFFSET :kept)")
    .bind("name", text(name))
    .bind("kept", int(u64::from(REF_HISTORY_KEPT)));
    Ok([insert.prepare(db)?, prune.prepare(db)?])
}

/// True if the statement at `index` of a batch returned a row.
fn returned(results: &[worker::D1Result], index: usize) -> Result<bool> {
    Ok(results
        .get(index)
        .map(|r| r.results::<NameRow>())
        .transpose()?
        .is_some_and(|rows| !rows.is_empty()))
}

/// Creates a ref that must not exist, recording `by` (a token's id) in
/// its history. `false` if it already exists.
pub async fn create(
    db: &D1Database,
    name: &str,
    digest: &Digest,
    by: Option<&str>,
) -> Result<bool> {
    let at = now();
    let [history, prune] = recorded(
        db,
        "NOT EXISTS (SELECT 1 FROM refs WHERE name = :name)",
        name,
        digest,
        None,
        &at,
        by,
    )?;
    let insert = sql(
        "INSERT INTO refs (name, digest, updated) VALUES (:name, :digest, :at) \
         ON CONFLICT (name) DO NOTHING RETURNING name",
    )
    .bind("name", text(name))
    .bind("digest", text(&digest.to_string()))
    .bind("at", text(&at))
    .prepare(db)?;
    let results = db.batch(vec![history, insert, prune]).await?;
    returned(&results, 1)
}

/// Moves a ref from `expected` to `digest` atomically, recording `by` in
/// its history. `false` if the ref does not hold `expected` (or does not
/// exist).
pub async fn swap(
    db: &D1Database,
    name: &str,
    expected: &Digest,
    digest: &Digest,
    by: Option<&str>,
) -> Result<bool> {
    let at = now();
    let [history, prune] = recorded(
        db,
        "EXISTS (SELECT 1 FROM refs WHERE name = :name AND digest = :expected)",
        name,
        digest,
        Some(expected),
        &at,
        by,
    )?;
    let update = sql("UPDATE refs SET digest = :digest, updated = :at \
         WHERE name = :name AND digest = :expected RETURNING name")
    .bind("digest", text(&digest.to_string()))
    .bind("at", text(&at))
    .bind("name", text(name))
    .bind("expected", text(&expected.to_string()))
    .prepare(db)?;
    let results = db.batch(vec![history, update, prune]).await?;
    returned(&results, 1)
}

/// Deletes a ref and its history, only if it holds `expected` when one is
/// given. `false` if nothing was deleted.
pub async fn delete(db: &D1Database, name: &str, expected: Option<&Digest>) -> Result<bool> {
    let (holds, values): (&str, Vec<(&'static str, JsValue)>) = match expected {
        Some(d) => (
            "name = :name AND digest = :expected",
            vec![("name", text(name)), ("expected", text(&d.to_string()))],
        ),
        None => ("name = :name", vec![("name", text(name))]),
    };
    let bound = |statement: String| {
        values
            .iter()
            .fold(Sql::owned(statement), |s, (k, v)| s.bind(k, v.clone()))
            .prepare(db)
    };
    let history = bound(format!(
        "DELETE FROM ref_history WHERE name = :name AND EXISTS (SELECT 1 FROM refs WHERE {holds})"
    ))?;
    let delete = bound(format!("DELETE FROM refs WHERE {holds} RETURNING name"))?;
    let results = db.batch(vec![history, delete]).await?;
    returned(&results, 1)
}

/// A ref's history, newest first, before `before` (a `seq`), with the
/// cursor for the next page.
pub async fn history(
    db: &D1Database,
    name: &str,
    before: Option<u64>,
    limit: u32,
) -> Result<(Vec<RefMoveRow>, Option<u64>)> {
    let mut rows = sql("SELECT seq, digest, at, token_id FROM ref_history \
         WHERE name = :name AND (:before IS NULL OR seq < :before) \
         ORDER BY seq DESC LIMIT :limit")
    .bind("name", text(name))
    .bind("before", before.map_or(JsValue::NULL, int))
    .bind("limit", int(u64::from(limit) + 1))
    .prepare(db)?
    .all()
    .await?
    .results::<RefMoveRow>()?;
    let next = if rows.len() > limit as usize {
        rows.truncate(limit as usize);
        rows.last().map(|r| r.seq)
    } else {
        None
    };
    Ok((rows, next))
}
