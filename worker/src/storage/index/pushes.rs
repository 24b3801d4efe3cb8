//! `pushes` (a push waiting for recipes or parts), `push_parts` (a part
//! received: its pack, its record, frames and bytes) and the transaction
//! that stores a pushed packet and ends its push.

use worker::{D1Database, Result};

use super::chunks::{self, NewChunk};
use super::packs::{self, push_owner};
use super::{int, opt, run_batches, sql, text};
use crate::index::{packet_statements, NewPacket};
use crate::push::prove::End;
use crate::rows::{PushPartRow, PushRow};

/// Records a new push.
pub async fn insert(db: &D1Database, row: &PushRow) -> Result<()> {
    sql(
        "INSERT INTO pushes (id, digest, size, bases, labels, created, owner) \
         VALUES (:id, :digest, :size, :bases, :labels, :created, :owner)",
    )
    .bind("id", text(&row.id))
    .bind("digest", text(&row.digest))
    .bind("size", int(row.size))
    .bind("bases", text(&row.bases))
    .bind("labels", text(&row.labels))
    .bind("created", text(&row.created))
    .bind("owner", opt(row.owner.as_deref()))
    .prepare(db)?
    .run()
    .await
    .map(|_| ())
}

/// One push.
pub async fn get(db: &D1Database, id: &str) -> Result<Option<PushRow>> {
    sql("SELECT id, digest, size, bases, labels, created, owner FROM pushes WHERE id = :id")
        .bind("id", text(id))
        .prepare(db)?
        .first::<PushRow>(None)
        .await
}

/// Pushes started before `created_before` (RFC 3339, UTC), oldest first.
pub async fn created_before(
    db: &D1Database,
    created_before: &str,
    limit: u32,
) -> Result<Vec<PushRow>> {
    sql(
        "SELECT id, digest, size, bases, labels, created, owner FROM pushes WHERE created < :before \
         ORDER BY created, id LIMIT :limit",
    )
    .bind("before", text(created_before))
    .bind("limit", int(u64::from(limit)))
    .prepare(db)?
    .all()
    .await?
    .results::<PushRow>()
}

/// A push's parts, by number.
pub async fn parts(db: &D1Database, id: &str) -> Result<Vec<PushPartRow>> {
    sql("SELECT number, pack, record, frames, bytes, stored_bytes FROM push_parts WHERE push_id = :id ORDER BY number")
        .bind("id", text(id))
        .prepare(db)?
        .all()
        .await?
        .results::<PushPartRow>()
}

/// A part received: the chunks it stored in its pack, the packs its frames
/// live in, and its row (replacing an earlier attempt of the same number).
/// Nothing is recorded if the push is gone. Returns the record object of
/// the attempt it replaced, if any (read in the transaction that replaces
/// it, so each replaced record is named to exactly one caller, which
/// deletes it).
pub async fn record_part(
    db: &D1Database,
    push_id: &str,
    part: &PushPartRow,
    stored: &[NewChunk],
    packs: &[String],
) -> Result<Option<String>> {
    let mut statements = Vec::new();
    if let Some(pack) = &part.pack {
        statements.extend(chunks::insert_if_open(db, pack, stored, push_id)?);
    }
    statements.push(pin(db, push_id, packs)?);
    run_batches(db, statements).await?;
    #[derive(serde::Deserialize)]
    struct Record {
        record: String,
    }
    let results = db
        .batch(vec![
            sql("SELECT record FROM push_parts WHERE push_id = :push AND number = :number")
                .bind("push", text(push_id))
                .bind("number", int(u64::from(part.number)))
                .prepare(db)?,
            sql("INSERT OR REPLACE INTO push_parts (push_id, number, pack, record, frames, bytes, stored_bytes) \
                 SELECT :push, :number, :pack, :record, :frames, :bytes, :stored WHERE EXISTS (SELECT 1 FROM pushes WHERE id = :push)")
            .bind("push", text(push_id))
            .bind("number", int(u64::from(part.number)))
            .bind("pack", opt(part.pack.as_deref()))
            .bind("record", text(&part.record))
            .bind("frames", int(u64::from(part.frames)))
            .bind("bytes", int(part.bytes))
            .bind("stored", int(part.stored_bytes))
            .prepare(db)?,
        ])
        .await?;
    let replaced = results
        .first()
        .map(|r| r.results::<Record>())
        .transpose()?
        .and_then(|rows| rows.into_iter().next())
        .map(|r| r.record)
        .filter(|r| *r != part.record);
    Ok(replaced)
}

/// Makes open push `push_id` a user of `packs` (nothing if it is gone).
fn pin(db: &D1Database, push_id: &str, packs: &[String]) -> Result<worker::D1PreparedStatement> {
    sql("INSERT OR IGNORE INTO pack_users (pack, owner) SELECT value, :owner FROM json_each(:keys) \
         WHERE EXISTS (SELECT 1 FROM pushes WHERE id = :push)")
    .bind("owner", text(&push_owner(push_id)))
    .bind("keys", super::json(&packs))
    .bind("push", text(push_id))
    .prepare(db)
}

/// Records the pack a part of open push `push_id` (or the packet it
/// completes) is about to write, used by that push from the start: the
/// clean-up cannot take it while it is being written.
pub async fn insert_part_pack(
    db: &D1Database,
    push_id: &str,
    key: &str,
    size: u64,
    count: u64,
    digest: &str,
) -> Result<()> {
    db.batch(vec![
        packs::insert_statement(db, key, size, count, digest)?,
        pin(db, push_id, &[key.to_string()])?,
    ])
    .await
    .map(|_| ())
}

/// Forgets the pack of a part refused before its object was written.
pub async fn forget_part_pack(db: &D1Database, push_id: &str, key: &str) -> Result<()> {
    db.batch(vec![
        sql("DELETE FROM pack_users WHERE pack = :key AND owner = :owner")
            .bind("key", text(key))
            .bind("owner", text(&push_owner(push_id)))
            .prepare(db)?,
        sql("DELETE FROM packs WHERE key = :key AND NOT EXISTS (SELECT 1 FROM pack_users WHERE pack = :key)")
            .bind("key", text(key))
            .prepare(db)?,
    ])
    .await
    .map(|_| ())
}

/// Chunks compaction copied into a packet's own pack (its key; each
/// copy's sha256, offset and stored size) and the packs they came from.
pub type Moved<'a> = (&'a str, &'a [(packet_core::Digest, u64, u64)], &'a [String]);

/// What storing a pushed packet writes besides its row.
pub struct Extras<'a> {
    /// The rows of the chunks a push of one request stored, in its pack.
    pub stored: Option<(&'a str, &'a [NewChunk])>,
    /// End states of bodies it hashed.
    pub ends: &'a [(packet_core::Body, End)],
    /// Chunks compaction copied into its own pack (sha256, offset, stored
    /// size), and the packs they were copied from.
    pub moved: Option<Moved<'a>>,
}

/// Stores the packet a push built and ends the push, in one transaction
/// (a batch): the packet row only if every pack it names still has its row;
/// the push's rows go only if the packet is stored (by this push or
/// another). `push_id` is `None` for a push that completes in the request
/// that started it (it has no rows). Returns whether the packet is stored.
pub async fn store_packet(
    db: &D1Database,
    p: &NewPacket<'_>,
    push_id: Option<&str>,
    extras: &Extras<'_>,
) -> Result<bool> {
    let mut statements = packet_statements(db, p, "1", &[])?;
    let digest = p.digest.to_string();
    if let Some((pack, rows)) = extras.stored {
        statements.extend(chunks::insert_if_stored(db, pack, rows, &digest)?);
    }
    statements.extend(super::ends::insert(db, extras.ends)?);
    if let Some((pack, moved, merged)) = extras.moved {
        statements.extend(chunks::move_to(db, pack, moved, merged)?);
    }
    if let Some(id) = push_id {
        let owner = push_owner(id);
        statements.push(
            sql("UPDATE packs SET unused_check = 1 WHERE key IN (SELECT pack FROM pack_users WHERE owner = :owner) \
                 AND EXISTS (SELECT 1 FROM packets WHERE digest = :digest)")
            .bind("owner", text(&owner))
            .bind("digest", text(&digest))
            .prepare(db)?,
        );
        statements.push(
            sql("DELETE FROM pack_users WHERE owner = :owner AND EXISTS (SELECT 1 FROM packets WHERE digest = :digest)")
                .bind("owner", text(&owner))
                .bind("digest", text(&digest))
                .prepare(db)?,
        );
        statements.push(
            sql("DELETE FROM push_parts WHERE push_id = :id AND EXISTS (SELECT 1 FROM packets WHERE digest = :digest)")
                .bind("id", text(id))
                .bind("digest", text(&digest))
                .prepare(db)?,
        );
        statements.push(
            sql("DELETE FROM pushes WHERE id = :id AND EXISTS (SELECT 1 FROM packets WHERE digest = :digest)")
                .bind("id", text(id))
                .bind("digest", text(&digest))
                .prepare(db)?,
        );
    }
    run_batches(db, statements).await?;
    Ok(crate::index::packet(db, p.digest).await?.is_some())
}

/// Ends a push without storing anything: its rows go and the packs it
/// used are left to the clean-up.
pub async fn discard(db: &D1Database, push_id: &str) -> Result<()> {
    let mut statements = packs::release(db, &push_owner(push_id))?;
    statements.push(
        sql("DELETE FROM push_parts WHERE push_id = :id")
            .bind("id", text(push_id))
            .prepare(db)?,
    );
    statements.push(
        sql("DELETE FROM pushes WHERE id = :id")
            .bind("id", text(push_id))
            .prepare(db)?,
    );
    db.batch(statements).await.map(|_| ())
}
