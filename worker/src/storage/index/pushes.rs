//! `pushes` (a push waiting for recipes or parts), `push_parts` (a part
//! received: its pack, its record, frames and bytes) and the transaction
//! that stores a pushed packet and ends its push. The rows, and the push as
//! the API shows it, are pure; the statements are wasm.

use packet_core::Digest;
use pillbox_wire::{Push, PushPart};
use serde::Deserialize;

use crate::config::Config;
use crate::push::plan::Status;

#[cfg(target_arch = "wasm32")]
pub use statements::*;

/// A delta push in progress.
#[derive(Clone, Debug, Deserialize)]
pub struct PushRow {
    /// Its id.
    pub id: String,
    /// The digest the packet must have.
    pub digest: String,
    /// Its size.
    pub size: u64,
    /// JSON array of the bases used (digests).
    pub bases: String,
    /// JSON array of labels.
    pub labels: String,
    /// RFC 3339.
    pub created: String,
    /// The id of the token that created it (`None`: created before pushes
    /// had owners).
    #[serde(default)]
    pub owner: Option<String>,
}

/// A received push part.
#[derive(Clone, Debug, Deserialize)]
pub struct PushPartRow {
    /// 1-based.
    pub number: u16,
    /// The pack it wrote, if it stored anything.
    pub pack: Option<String>,
    /// Its record object (`pushes/<id>/parts/…`).
    pub record: String,
    /// Frames it carried.
    pub frames: u32,
    /// Bytes of frames it carried.
    pub bytes: u64,
    /// Of those, the bytes it stored.
    pub stored_bytes: u64,
}

impl PushRow {
    /// The bases used.
    pub fn base_list(&self) -> Vec<String> {
        serde_json::from_str(&self.bases).unwrap_or_default()
    }

    /// The bases used, as digests (the row holds only stored packets'
    /// digests).
    pub fn base_digests(&self) -> Vec<Digest> {
        self.base_list()
            .iter()
            .filter_map(|d| d.parse().ok())
            .collect()
    }

    /// The labels to attach.
    pub fn label_list(&self) -> Vec<String> {
        serde_json::from_str(&self.labels).unwrap_or_default()
    }

    /// The push as `POST /v1/pushes` and `GET /v1/pushes/{id}` show it.
    pub fn view(&self, status: &Status, parts: &[PushPartRow], config: &Config) -> Push {
        Push {
            push_id: self.id.clone(),
            location: format!("/v1/pushes/{}", self.id),
            digest: self.digest.clone(),
            size: self.size,
            bases_used: self.base_list(),
            missing: status.missing.iter().map(|d| d.hex().to_string()).collect(),
            missing_chunks: status
                .missing_chunks
                .iter()
                .map(|d| d.hex().to_string())
                .collect(),
            missing_bytes: status.missing_bytes,
            parts: parts
                .iter()
                .map(|p| PushPart {
                    number: p.number,
                    frames: p.frames,
                    bytes: p.bytes,
                    stored_bytes: p.stored_bytes,
                })
                .collect(),
            part_limits: config.part_limits(),
            chunking: Config::chunking(),
        }
    }
}

/// The statements of `pushes` and `push_parts`.
#[cfg(target_arch = "wasm32")]
mod statements {
    use worker::{D1Database, Result};

    use super::{PushPartRow, PushRow};
    use crate::push::prove::End;
    use crate::storage::chunk::NewChunk;
    use crate::storage::index::chunks;
    use crate::storage::index::packets::{self, NewPacket, PacketRow};
    use crate::storage::index::packs::{self, push_owner};
    use crate::storage::index::{ends, int, json, opt, run_batches, sql, text, Condition};

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
    fn pin(
        db: &D1Database,
        push_id: &str,
        packs: &[String],
    ) -> Result<worker::D1PreparedStatement> {
        sql("INSERT OR IGNORE INTO pack_users (pack, owner) SELECT value, :owner FROM json_each(:keys) \
             WHERE EXISTS (SELECT 1 FROM pushes WHERE id = :push)")
        .bind("owner", text(&push_owner(push_id)))
        .bind("keys", json(&packs))
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
            packs::insert_statement(db, key, size, count, digest, &Condition::always())?,
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
    /// that started it (it has no rows). Returns the packet's row if it is
    /// stored.
    pub async fn store_packet(
        db: &D1Database,
        p: &NewPacket<'_>,
        push_id: Option<&str>,
        extras: &Extras<'_>,
    ) -> Result<Option<PacketRow>> {
        let mut statements = packets::insert_statements(db, p, &Condition::always())?;
        let digest = p.digest.to_string();
        if let Some((pack, rows)) = extras.stored {
            statements.extend(chunks::insert_if_stored(db, pack, rows, &digest)?);
        }
        statements.extend(ends::insert(db, extras.ends)?);
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
        packets::get(db, p.digest).await
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::index::fixtures::{json_of, D, T};
    use serde_json::json;

    #[test]
    fn a_push_shows_its_bases_what_is_missing_and_its_parts() {
        let id = "00112233445566778899aabbccddeeff";
        let row = PushRow {
            id: id.into(),
            digest: D.into(),
            size: 4096,
            bases: format!("[\"{D}\"]"),
            labels: "[]".into(),
            created: T.into(),
            owner: Some("pusher".into()),
        };
        let status = Status {
            missing: vec![packet_core::Digest::EMPTY],
            missing_chunks: vec![],
            missing_bytes: 7,
        };
        let part = PushPartRow {
            number: 1,
            pack: Some("packs/p".into()),
            record: "pushes/x/parts/1.a".into(),
            frames: 2,
            bytes: 10,
            stored_bytes: 4,
        };
        let v = json_of(row.view(&status, &[part], &Config::from_vars(|_| None)));
        assert_eq!(v["location"], json!(format!("/v1/pushes/{id}")));
        assert_eq!(v["bases_used"], json!([D]));
        assert_eq!(
            v["missing"],
            json!([packet_core::Digest::EMPTY.hex().to_string()])
        );
        assert_eq!(v["missing_bytes"], json!(7));
        assert_eq!(
            v["parts"],
            json!([{ "number": 1, "frames": 2, "bytes": 10, "stored_bytes": 4 }])
        );
        assert_eq!(v["chunking"]["algorithm"], json!("fastcdc-v2020"));
    }
}
