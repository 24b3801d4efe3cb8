//! `uploads` (a multipart upload in progress: the packet it must be, how it
//! is cut, R2's upload id, its labels) and `upload_parts` (a part received,
//! with R2's etag); completing an upload, which indexes its packet and
//! forgets it in one transaction. The rows, and the upload as the API shows
//! it, are pure; the statements are wasm.

use pillbox_wire::{ReceivedPart, Upload};
use serde::Deserialize;

use crate::multipart::Plan;

#[cfg(target_arch = "wasm32")]
pub use statements::*;

/// A multipart upload in progress.
#[derive(Clone, Debug, Deserialize)]
pub struct UploadRow {
    /// Its id.
    pub id: String,
    /// The digest the packet must have.
    pub digest: String,
    /// Its size.
    pub size: u64,
    /// Every part's size but the last's.
    pub part_size: u64,
    /// R2's multipart upload id.
    pub r2_upload_id: String,
    /// JSON array of labels.
    pub labels: String,
}

impl UploadRow {
    /// The labels it attaches.
    pub fn label_list(&self) -> Vec<String> {
        serde_json::from_str(&self.labels).unwrap_or_default()
    }

    /// How the upload is cut (checked when it was created).
    pub fn plan(&self) -> Plan {
        Plan {
            size: self.size,
            part_size: self.part_size,
        }
    }

    /// The upload as `POST /v1/uploads` and `GET /v1/uploads/{id}` show
    /// it, with the parts received so far.
    pub fn view(&self, parts: &[PartRow]) -> Upload {
        let received: Vec<u16> = parts.iter().map(|p| p.number).collect();
        Upload {
            upload_id: self.id.clone(),
            location: format!("/v1/uploads/{}", self.id),
            digest: self.digest.clone(),
            size: self.size,
            part_size: self.part_size,
            parts: self.plan().parts(),
            received: parts
                .iter()
                .map(|p| ReceivedPart {
                    number: p.number,
                    size: p.size,
                })
                .collect(),
            missing: self.plan().missing(&received),
        }
    }
}

/// A received part.
#[derive(Clone, Debug, Deserialize)]
pub struct PartRow {
    /// 1-based.
    pub number: u16,
    /// R2's etag for it.
    pub etag: String,
    /// Bytes.
    pub size: u64,
}

/// The statements of `uploads` and `upload_parts`.
#[cfg(target_arch = "wasm32")]
mod statements {
    use serde::Deserialize;
    use worker::{D1Database, Result};

    use super::{PartRow, UploadRow};
    use crate::storage::index::packets::{self, NewPacket};
    use crate::storage::index::{int, now, packs, sql, text, Condition};

    /// Records a new upload.
    pub async fn insert(db: &D1Database, row: &UploadRow) -> Result<()> {
        sql(
            "INSERT INTO uploads (id, digest, size, part_size, r2_upload_id, labels, created) \
             VALUES (:id, :digest, :size, :part_size, :r2_upload_id, :labels, :created)",
        )
        .bind("id", text(&row.id))
        .bind("digest", text(&row.digest))
        .bind("size", int(row.size))
        .bind("part_size", int(row.part_size))
        .bind("r2_upload_id", text(&row.r2_upload_id))
        .bind("labels", text(&row.labels))
        .bind("created", text(&now()))
        .prepare(db)?
        .run()
        .await
        .map(|_| ())
    }

    /// One upload.
    pub async fn get(db: &D1Database, id: &str) -> Result<Option<UploadRow>> {
        sql("SELECT id, digest, size, part_size, r2_upload_id, labels FROM uploads WHERE id = :id")
            .bind("id", text(id))
            .prepare(db)?
            .first::<UploadRow>(None)
            .await
    }

    /// Uploads started before `created_before` (RFC 3339, UTC), oldest first.
    pub async fn created_before(
        db: &D1Database,
        created_before: &str,
        limit: u32,
    ) -> Result<Vec<UploadRow>> {
        sql(
            "SELECT id, digest, size, part_size, r2_upload_id, labels FROM uploads \
             WHERE created < :before ORDER BY created, id LIMIT :limit",
        )
        .bind("before", text(created_before))
        .bind("limit", int(u64::from(limit)))
        .prepare(db)?
        .all()
        .await?
        .results::<UploadRow>()
    }

    /// The parts received so far, by number.
    pub async fn parts(db: &D1Database, id: &str) -> Result<Vec<PartRow>> {
        sql("SELECT number, etag, size FROM upload_parts WHERE upload_id = :id ORDER BY number")
            .bind("id", text(id))
            .prepare(db)?
            .all()
            .await?
            .results::<PartRow>()
    }

    /// Records a part (replacing an earlier upload of the same number).
    pub async fn put_part(db: &D1Database, id: &str, part: &PartRow) -> Result<()> {
        sql(
            "INSERT OR REPLACE INTO upload_parts (upload_id, number, etag, size) \
             VALUES (:id, :number, :etag, :size)",
        )
        .bind("id", text(id))
        .bind("number", int(u64::from(part.number)))
        .bind("etag", text(&part.etag))
        .bind("size", int(part.size))
        .prepare(db)?
        .run()
        .await
        .map(|_| ())
    }

    /// Claims an upload for discarding: deletes its rows and records its
    /// staging object as an unused pack (so the clean-up deletes whatever
    /// is left of it), in one transaction. `false` if the upload was gone.
    pub async fn claim(db: &D1Database, id: &str, staging_key: &str, size: u64) -> Result<bool> {
        let results = db
            .batch(vec![
                sql("INSERT OR IGNORE INTO packs (key, size, chunks, packet, created, unused_check) \
                     SELECT :key, :size, 0, digest, :created, 1 FROM uploads WHERE id = :id")
                .bind("key", text(staging_key))
                .bind("size", int(size))
                .bind("created", text(&now()))
                .bind("id", text(id))
                .prepare(db)?,
                sql("DELETE FROM upload_parts WHERE upload_id = :id")
                    .bind("id", text(id))
                    .prepare(db)?,
                sql("DELETE FROM uploads WHERE id = :id RETURNING id")
                    .bind("id", text(id))
                    .prepare(db)?,
            ])
            .await?;
        Ok(results
            .last()
            .and_then(|r| r.results::<serde_json::Value>().ok())
            .is_some_and(|rows| !rows.is_empty()))
    }

    /// Indexes a packet a multipart upload assembled at `key`, and forgets
    /// the upload, in one transaction that happens only if the upload
    /// still exists (the clean-up may have discarded it meanwhile). `false`
    /// if it did not.
    pub async fn complete(
        db: &D1Database,
        p: &NewPacket<'_>,
        upload_id: &str,
        key: &str,
    ) -> Result<bool> {
        #[derive(Deserialize)]
        struct Count {
            n: u64,
        }
        let open = Condition::always()
            .and("EXISTS (SELECT 1 FROM uploads WHERE id = :upload)")
            .bind("upload", text(upload_id));
        let mut statements = vec![packs::insert_statement(
            db,
            key,
            p.size,
            0,
            &p.digest.to_string(),
            &open,
        )?];
        statements.extend(packets::insert_statements(db, p, &open)?);
        statements.push(packs::mark_if_unused(db, p.packs)?);
        statements.push(
            sql("SELECT count(*) AS n FROM uploads WHERE id = :id")
                .bind("id", text(upload_id))
                .prepare(db)?,
        );
        statements.push(
            sql("DELETE FROM upload_parts WHERE upload_id = :id")
                .bind("id", text(upload_id))
                .prepare(db)?,
        );
        statements.push(
            sql("DELETE FROM uploads WHERE id = :id")
                .bind("id", text(upload_id))
                .prepare(db)?,
        );
        let results = db.batch(statements).await?;
        let count = results
            .get(results.len() - 3)
            .and_then(|r| r.results::<Count>().ok())
            .and_then(|rows| rows.first().map(|c| c.n))
            .unwrap_or(0);
        Ok(count > 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::index::fixtures::{json_of, D};
    use serde_json::json;

    #[test]
    fn an_upload_shows_what_arrived_and_what_is_missing() {
        let id = "0123456789abcdef0123456789abcdef";
        let row = UploadRow {
            id: id.into(),
            digest: D.into(),
            size: (12 << 20) + 3,
            part_size: 5 << 20,
            r2_upload_id: "r2".into(),
            labels: "[]".into(),
        };
        let part = PartRow {
            number: 2,
            etag: "e".into(),
            size: 5 << 20,
        };
        assert_eq!(
            json_of(row.view(&[part])),
            json!({
                "upload_id": id, "location": format!("/v1/uploads/{id}"), "digest": D,
                "size": (12 << 20) + 3, "part_size": 5 << 20, "parts": 3,
                "received": [{ "number": 2, "size": 5 << 20 }], "missing": [1, 3],
            })
        );
        assert_eq!(json_of(row.view(&[]))["missing"], json!([1, 2, 3]));
    }

    #[test]
    fn an_uploads_labels_are_read_back_as_written() {
        let mut row = UploadRow {
            id: "0123456789abcdef0123456789abcdef".into(),
            digest: D.into(),
            size: 1,
            part_size: 5 << 20,
            r2_upload_id: "r2".into(),
            labels: serde_json::to_string(&["a", "host=ci-7"]).unwrap(),
        };
        assert_eq!(row.label_list(), ["a", "host=ci-7"]);
        row.labels = "not json".into();
        assert!(row.label_list().is_empty());
    }
}
