//! `refs` (names for packets, created only if absent and moved only from
//! the digest the writer expects) and `ref_history` (the packets each ref
//! has named, the last [`REF_HISTORY_KEPT`]). A change to a ref and its
//! history row are one batch, one transaction: the row is written on the
//! same condition as the change, evaluated on the same state, so the
//! history never holds a move that did not happen nor misses one that did.
//! The rows, and the answers built from them, are pure; the statements are
//! wasm.

use pillbox_wire::{ListedRef, Ref, RefChange, RefHistory, RefList, RefMove};
use serde::Deserialize;

use super::packets::label_list;

#[cfg(target_arch = "wasm32")]
pub use statements::*;

/// A ref.
#[derive(Clone, Debug, Deserialize)]
pub struct RefRow {
    /// Its name.
    pub name: String,
    /// The packet it names.
    pub digest: String,
    /// When it last changed (RFC 3339).
    pub updated: String,
}

impl RefRow {
    /// The ref as `GET /v1/refs/{name}` answers it.
    pub fn to_wire(&self) -> Ref {
        Ref {
            name: self.name.clone(),
            digest: self.digest.clone(),
            updated: self.updated.clone(),
        }
    }

    /// The answer to the `PUT` that made the ref this, from `previous`.
    pub fn changed(&self, previous: Option<String>) -> RefChange {
        RefChange {
            now: self.to_wire(),
            previous,
        }
    }
}

/// A ref as `GET /v1/refs` lists it: with its packet's size and labels.
#[derive(Clone, Debug, Deserialize)]
pub struct ListedRefRow {
    /// Its name.
    pub name: String,
    /// The packet it names.
    pub digest: String,
    /// When it last changed (RFC 3339).
    pub updated: String,
    /// The packet's size (null if it is not stored).
    pub size: Option<u64>,
    /// Its newline-separated labels (from the query).
    pub labels: Option<String>,
}

/// A page of `GET /v1/refs`; `next` is the last name when more follow.
pub fn page(rows: &[ListedRefRow], next: Option<String>) -> RefList {
    RefList {
        refs: rows
            .iter()
            .map(|r| ListedRef {
                now: Ref {
                    name: r.name.clone(),
                    digest: r.digest.clone(),
                    updated: r.updated.clone(),
                },
                size: r.size,
                labels: label_list(r.labels.as_deref()),
            })
            .collect(),
        next_cursor: next,
    }
}

/// How many moves `ref_history` keeps per ref: a move recorded drops the
/// ones before the last this many (docs/worker.md, "Ref history").
pub const REF_HISTORY_KEPT: u32 = 100;

/// A row of `ref_history`.
#[derive(Clone, Debug, Deserialize)]
pub struct RefMoveRow {
    /// Order of the moves.
    pub seq: u64,
    /// The packet the ref named from then on.
    pub digest: String,
    /// When (RFC 3339).
    pub at: String,
    /// The id of the token that moved it, if known.
    pub token_id: Option<String>,
}

/// A page of `GET /v1/ref-history/{name}`, newest first; `next` is the
/// last row's `seq` when older rows follow.
pub fn history_page(name: &str, rows: &[RefMoveRow], next: Option<u64>) -> RefHistory {
    RefHistory {
        name: name.to_string(),
        moves: rows
            .iter()
            .map(|r| RefMove {
                digest: r.digest.clone(),
                at: r.at.clone(),
                by: r.token_id.clone(),
            })
            .collect(),
        next_cursor: next.map(|n| n.to_string()),
        kept: REF_HISTORY_KEPT,
    }
}

/// The statements of `refs` and `ref_history`.
#[cfg(target_arch = "wasm32")]
mod statements {
    use packet_core::Digest;
    use serde::Deserialize;
    use wasm_bindgen::JsValue;
    use worker::{D1Database, D1PreparedStatement, Result};

    use super::{ListedRefRow, RefMoveRow, RefRow, REF_HISTORY_KEPT};
    use crate::storage::index::{int, now, opt, sql, text, Condition, Sql};

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
        change(db, name, None, digest, by).await
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
        change(db, name, Some(expected), digest, by).await
    }

    /// Makes `name` name `digest`: created if `expected` is `None` and the
    /// ref is absent, moved if it holds `expected`. The history row, the
    /// change and the pruning of the history are one batch; `false` if the
    /// change did not happen.
    async fn change(
        db: &D1Database,
        name: &str,
        expected: Option<&Digest>,
        digest: &Digest,
        by: Option<&str>,
    ) -> Result<bool> {
        let at = now();
        let (condition, write) = match expected {
            None => (
                "NOT EXISTS (SELECT 1 FROM refs WHERE name = :name)",
                sql(
                    "INSERT INTO refs (name, digest, updated) VALUES (:name, :digest, :at) \
                     ON CONFLICT (name) DO NOTHING RETURNING name",
                ),
            ),
            Some(e) => (
                "EXISTS (SELECT 1 FROM refs WHERE name = :name AND digest = :expected)",
                sql("UPDATE refs SET digest = :digest, updated = :at \
                     WHERE name = :name AND digest = :expected RETURNING name")
                .bind("expected", text(&e.to_string())),
            ),
        };
        let [history, prune] = recorded(db, condition, name, digest, expected, &at, by)?;
        let write = write
            .bind("name", text(name))
            .bind("digest", text(&digest.to_string()))
            .bind("at", text(&at))
            .prepare(db)?;
        let results = db.batch(vec![history, write, prune]).await?;
        returned(&results, 1)
    }

    /// Deletes a ref and its history, only if it holds `expected` when one is
    /// given. `false` if nothing was deleted.
    pub async fn delete(db: &D1Database, name: &str, expected: Option<&Digest>) -> Result<bool> {
        let mut holds = Condition::always()
            .and("name = :name")
            .bind("name", text(name));
        if let Some(d) = expected {
            holds = holds
                .and("digest = :expected")
                .bind("expected", text(&d.to_string()));
        }
        let history = Sql::owned(format!(
            "DELETE FROM ref_history WHERE name = :name AND EXISTS (SELECT 1 FROM refs WHERE {})",
            holds.text()
        ))
        .bind_condition(&holds)
        .prepare(db)?;
        let delete = Sql::owned(format!(
            "DELETE FROM refs WHERE {} RETURNING name",
            holds.text()
        ))
        .bind_condition(&holds)
        .prepare(db)?;
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::index::fixtures::{json_of, D, T};
    use serde_json::json;

    #[test]
    fn pages_carry_the_next_cursor_as_text_or_null() {
        let r = RefRow {
            name: "sessions/a".into(),
            digest: D.into(),
            updated: T.into(),
        };
        let listed = ListedRefRow {
            name: r.name.clone(),
            digest: r.digest.clone(),
            updated: r.updated.clone(),
            size: Some(10_240),
            labels: Some("z\nhost=ci-7".into()),
        };
        assert_eq!(
            json_of(page(&[listed], Some("sessions/a".into()))),
            json!({
                "refs": [{ "name": "sessions/a", "digest": D, "updated": T,
                           "size": 10_240, "labels": ["host=ci-7", "z"] }],
                "next_cursor": "sessions/a",
            })
        );
        assert_eq!(
            json_of(r.changed(None)),
            json!({ "name": "sessions/a", "digest": D, "updated": T, "previous": null })
        );
    }

    #[test]
    fn a_history_page_is_newest_first_and_says_what_is_kept() {
        let rows = [
            RefMoveRow {
                seq: 9,
                digest: D.into(),
                at: T.into(),
                token_id: Some("ci".into()),
            },
            RefMoveRow {
                seq: 4,
                digest: D.into(),
                at: T.into(),
                token_id: None,
            },
        ];
        assert_eq!(
            json_of(history_page("sessions/a", &rows, Some(4))),
            json!({
                "name": "sessions/a",
                "moves": [{ "digest": D, "at": T, "by": "ci" }, { "digest": D, "at": T, "by": null }],
                "next_cursor": "4",
                "kept": REF_HISTORY_KEPT,
            })
        );
    }
}
