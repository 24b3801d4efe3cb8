//! `packets` (one row per stored packet: its facts, how its bytes are
//! kept, what its bodies hold) and `labels`. A packet row is written only
//! for a verified packet whose bytes are all in R2, in one batch (a
//! transaction) with the rows that say which packs it uses, so a reader
//! never sees a packet whose bytes could be collected. The row, and the
//! answers built from rows (`GET /v1/packets`, a stored packet,
//! `GET /v1/digests/{prefix}`, a delete that refs hold back), are pure;
//! the statements are wasm.

use packet_core::Digest;
use pillbox_wire::{ApiCode, DigestMatches, Harness, Packet, PacketFacts, PacketList, Stored};
use serde::Deserialize;

use crate::problem::Problem;

#[cfg(target_arch = "wasm32")]
pub use statements::*;

/// A packet as indexed (`packets`, with its labels).
#[derive(Clone, Debug, Deserialize)]
pub struct PacketRow {
    /// Insertion order.
    pub seq: u64,
    /// `sha256:<hex>`.
    pub digest: String,
    /// Bytes.
    pub size: u64,
    /// Members after `packet.json`.
    pub member_count: u64,
    /// Sum of file sizes.
    pub file_bytes: u64,
    /// `codex`, `claude` or null.
    pub harness_kind: Option<String>,
    /// The harness thread id.
    pub thread_id: Option<String>,
    /// The harness model.
    pub model: Option<String>,
    /// Offset of `packet.json`.
    pub manifest_offset: u64,
    /// Length of `packet.json`.
    pub manifest_size: u64,
    /// RFC 3339.
    pub created: String,
    /// Newline-separated labels (from the query).
    pub labels: Option<String>,
    /// `whole` (the packet's bytes are one R2 object), `chunked` (pushed
    /// before format /2: its bodies are in packs, its manifest and layout
    /// are objects of their own) or `packed` (its chunks are in packs, found
    /// from its root).
    pub storage: String,
    /// A whole packet's object.
    pub object_key: Option<String>,
    /// A chunked packet's layout object.
    pub layout_key: Option<String>,
    /// A chunked packet's manifest object.
    pub manifest_key: Option<String>,
    /// A packed packet's root, as hex (`hex(root)`).
    #[serde(default)]
    pub root_hex: Option<String>,
    /// What its bodies hold ([`crate::storage::findings::KeptFindings`]
    /// as text), when kept and not empty.
    #[serde(default)]
    pub findings: Option<String>,
    /// 1 when the findings of its bodies were kept (packets stored since
    /// migration 0003).
    #[serde(default)]
    pub findings_kept: u64,
}

/// How a packet's bytes are kept.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Storage<'a> {
    /// One R2 object holding the packet.
    Whole {
        /// Its key.
        object: &'a str,
    },
    /// Bodies in packs, rebuilt on read: pushed before format /2.
    Chunked {
        /// The layout object's key.
        layout: &'a str,
        /// The manifest object's key.
        manifest: &'a str,
    },
    /// Chunks in packs, found from the root kept in the row (a /2 push).
    Packed {
        /// The root, as hex.
        root: &'a str,
    },
}

impl PacketRow {
    /// How its bytes are kept; `None` for a row that names neither form's
    /// objects (a damaged index).
    pub fn storage(&self) -> Option<Storage<'_>> {
        match (
            self.storage.as_str(),
            &self.object_key,
            &self.layout_key,
            &self.manifest_key,
        ) {
            ("whole", Some(object), _, _) => Some(Storage::Whole { object }),
            ("chunked", _, Some(layout), Some(manifest)) => {
                Some(Storage::Chunked { layout, manifest })
            }
            ("packed", ..) => self
                .root_hex
                .as_deref()
                .map(|root| Storage::Packed { root }),
            _ => None,
        }
    }

    /// The labels, sorted.
    pub fn label_list(&self) -> Vec<String> {
        label_list(self.labels.as_deref())
    }

    fn facts(&self) -> PacketFacts {
        PacketFacts {
            digest: self.digest.clone(),
            size: self.size,
            members: self.member_count,
            file_bytes: self.file_bytes,
            // The kind and the thread id are indexed together, from the
            // manifest's harness: both or neither.
            harness: self.harness_kind.clone().zip(self.thread_id.clone()).map(
                |(kind, thread_id)| Harness {
                    kind,
                    thread_id,
                    model: self.model.clone(),
                },
            ),
            labels: self.label_list(),
        }
    }

    /// The packet as `GET /v1/packets` lists it.
    pub fn listed(&self) -> Packet {
        Packet {
            facts: self.facts(),
            created: self.created.clone(),
        }
    }

    /// The answer to a request that stored it (`created`) or found it
    /// stored.
    pub fn stored(&self, created: bool) -> Stored {
        Stored {
            facts: self.facts(),
            created,
            created_at: self.created.clone(),
        }
    }
}

/// Newline-separated labels (`group_concat` of `labels`), sorted.
pub(super) fn label_list(labels: Option<&str>) -> Vec<String> {
    let mut labels: Vec<String> = labels
        .unwrap_or("")
        .split('\n')
        .filter(|l| !l.is_empty())
        .map(str::to_string)
        .collect();
    labels.sort();
    labels
}

/// A page of `GET /v1/packets`; `next` is the last row's `seq` when more
/// rows follow.
pub fn page(rows: &[PacketRow], next: Option<u64>) -> PacketList {
    PacketList {
        packets: rows.iter().map(PacketRow::listed).collect(),
        next_cursor: next.map(|n| n.to_string()),
    }
}

/// `GET /v1/digests/{prefix}`: `found` holds at most one more digest than
/// `limit` (which says there are more).
pub fn digest_matches(prefix: &str, mut found: Vec<String>, limit: u32) -> DigestMatches {
    let truncated = found.len() > limit as usize;
    found.truncate(limit as usize);
    DigestMatches {
        prefix: prefix.to_string(),
        digests: found,
        truncated,
    }
}

/// 409 `packet_referenced`: the packet `digest` is not deleted while
/// `refs` (some of those) point at it.
pub fn referenced(digest: &str, refs: &[String]) -> Problem {
    Problem::new(
        ApiCode::PacketReferenced,
        format!("refs point at {digest}: {}", refs.join(", ")),
        "move or delete those refs first",
    )
}

/// Of `rows`, those of `digests`, in the order named: one named twice
/// comes twice, one not stored not at all.
pub fn in_named_order(digests: &[Digest], rows: &[PacketRow]) -> Vec<PacketRow> {
    digests
        .iter()
        .filter_map(|d| {
            let d = d.to_string();
            rows.iter().find(|r| r.digest == d).cloned()
        })
        .collect()
}

/// The statements of `packets` and `labels`.
#[cfg(target_arch = "wasm32")]
mod statements {
    use packet_core::{Digest, Manifest};
    use serde::Deserialize;
    use wasm_bindgen::JsValue;
    use worker::{D1Database, D1PreparedStatement, Result};

    use super::{in_named_order, PacketRow};
    use crate::query::ListFilter;
    use crate::storage::index::{
        blob, int, json, now, opt, packs, run_batches, sql, text, Condition, Sql,
    };

    /// The columns of a [`PacketRow`], `p` being the packet.
    const COLUMNS: &str =
        "p.seq, p.digest, p.size, p.member_count, p.file_bytes, p.harness_kind, p.thread_id, p.model, \
         p.manifest_offset, p.manifest_size, p.created, p.storage, p.object_key, p.layout_key, p.manifest_key, \
         CASE WHEN p.root IS NULL THEN NULL ELSE hex(p.root) END AS root_hex, p.findings, p.findings_kept, \
         (SELECT group_concat(l.label, char(10)) FROM labels l WHERE l.digest = p.digest) AS labels";

    /// The indexed packet with this digest.
    pub async fn get(db: &D1Database, digest: &Digest) -> Result<Option<PacketRow>> {
        Sql::owned(format!(
            "SELECT {COLUMNS} FROM packets p WHERE p.digest = :digest"
        ))
        .bind("digest", text(&digest.to_string()))
        .prepare(db)?
        .first::<PacketRow>(None)
        .await
    }

    /// The rows of those of `digests` that are stored, in the order named
    /// ([`in_named_order`]), read in one query.
    pub async fn get_named(db: &D1Database, digests: &[Digest]) -> Result<Vec<PacketRow>> {
        if digests.is_empty() {
            return Ok(Vec::new());
        }
        let named: Vec<String> = digests.iter().map(Digest::to_string).collect();
        let rows = Sql::owned(format!(
            "SELECT {COLUMNS} FROM packets p WHERE p.digest IN (SELECT value FROM json_each(:digests))"
        ))
        .bind("digests", json(&named))
        .prepare(db)?
        .all()
        .await?
        .results::<PacketRow>()?;
        Ok(in_named_order(digests, &rows))
    }

    /// The digests of indexed packets that start with `prefix` (`sha256:`
    /// and hex digits), in digest order, at most `limit`: a range of the
    /// `digest` index (`g` sorts after every hex digit).
    pub async fn with_prefix(db: &D1Database, prefix: &str, limit: u32) -> Result<Vec<String>> {
        #[derive(Deserialize)]
        struct DigestRow {
            digest: String,
        }
        Ok(sql(
            "SELECT digest FROM packets WHERE digest >= :prefix AND digest < :prefix || 'g' \
             ORDER BY digest LIMIT :limit",
        )
        .bind("prefix", text(prefix))
        .bind("limit", int(u64::from(limit)))
        .prepare(db)?
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
        let statements = labels
            .iter()
            .map(|l| {
                sql("INSERT OR IGNORE INTO labels (digest, label) VALUES (:digest, :label)")
                    .bind("digest", text(&digest.to_string()))
                    .bind("label", text(l))
                    .prepare(db)
            })
            .collect::<Result<Vec<_>>>()?;
        db.batch(statements).await.map(|_| ())
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

    /// The statements that index a packet: its row, only if `guard` holds
    /// and every pack it uses still has its row (the clean-up deletes a
    /// pack's row before its object); its packs' users, only if this
    /// request's row is the one stored (a concurrent store of the same
    /// packet may have won); its labels, only if a row is stored. Safe to
    /// run twice or concurrently.
    pub fn insert_statements(
        db: &D1Database,
        p: &NewPacket<'_>,
        guard: &Condition,
    ) -> Result<Vec<D1PreparedStatement>> {
        let digest = p.digest.to_string();
        let harness = p.manifest.harness.as_ref();
        let (storage, object, root) = match p.storage {
            NewStorage::Whole { key } => ("whole", Some(key), None),
            NewStorage::Packed { root } => ("packed", None, Some(root)),
        };
        let root = root.map_or(JsValue::NULL, blob);
        let mut statements = vec![Sql::owned(format!(
            "INSERT OR IGNORE INTO packets (digest, size, member_count, file_bytes, harness_kind, thread_id, model, \
             manifest_offset, manifest_size, created, storage, object_key, root, findings, findings_kept) \
             SELECT :digest, :size, :members, :file_bytes, :harness, :thread, :model, :manifest_offset, \
             :manifest_size, :created, :storage, :object, :root, :findings, 1 \
             WHERE (SELECT count(*) FROM packs WHERE key IN (SELECT value FROM json_each(:packs))) = :pack_count \
             AND ({})",
            guard.text()
        ))
        .bind("digest", text(&digest))
        .bind("size", int(p.size))
        .bind("members", int(p.manifest.members.len() as u64))
        .bind("file_bytes", int(p.manifest.totals.bytes))
        .bind("harness", opt(harness.map(|h| h.kind.as_str())))
        .bind("thread", opt(harness.map(|h| h.session_id.as_str())))
        .bind("model", opt(harness.and_then(|h| h.model.as_deref())))
        .bind("manifest_offset", int(p.manifest_range.start))
        .bind(
            "manifest_size",
            int(p.manifest_range.end - p.manifest_range.start),
        )
        .bind("created", text(&now()))
        .bind("storage", text(storage))
        .bind("object", opt(object))
        .bind("root", root.clone())
        .bind("findings", opt(p.findings.as_deref()))
        .bind("packs", json(&p.packs))
        .bind("pack_count", int(p.packs.len() as u64))
        .bind_condition(guard)
        .prepare(db)?];
        // Ours: the row names this request's objects.
        statements.push(
            sql("INSERT OR IGNORE INTO pack_users (pack, owner) SELECT value, :digest FROM json_each(:packs) \
                 WHERE EXISTS (SELECT 1 FROM packets WHERE digest = :digest AND object_key IS :object AND root IS :root)")
            .bind("digest", text(&digest))
            .bind("object", opt(object))
            .bind("root", root)
            .bind("packs", json(&p.packs))
            .prepare(db)?,
        );
        for l in p.labels {
            statements.push(
                sql(
                    "INSERT OR IGNORE INTO labels (digest, label) SELECT :digest, :label \
                     WHERE EXISTS (SELECT 1 FROM packets WHERE digest = :digest)",
                )
                .bind("digest", text(&digest))
                .bind("label", text(l))
                .prepare(db)?,
            );
        }
        Ok(statements)
    }

    /// Indexes a packet stored whole (a single upload, its pack recorded
    /// by [`packs::insert`] before the put). If another request stored the
    /// same packet first, its object is left to the clean-up.
    pub async fn insert_whole(db: &D1Database, p: &NewPacket<'_>) -> Result<()> {
        let mut statements = insert_statements(db, p, &Condition::always())?;
        statements.push(packs::mark_if_unused(db, p.packs)?);
        run_batches(db, statements).await
    }

    /// Packets, newest first, with a cursor for the next page.
    pub async fn list(
        db: &D1Database,
        filter: &ListFilter,
    ) -> Result<(Vec<PacketRow>, Option<u64>)> {
        let mut condition = Condition::always();
        for (i, label) in filter.labels.iter().enumerate() {
            condition = condition
                .and(format!(
                    "EXISTS (SELECT 1 FROM labels l2 WHERE l2.digest = p.digest AND l2.label = :label_{i})"
                ))
                .bind(format!("label_{i}"), text(label));
        }
        if let Some(thread) = &filter.thread_id {
            condition = condition
                .and("p.thread_id = :thread")
                .bind("thread", text(thread));
        }
        if let Some(kind) = &filter.harness {
            condition = condition
                .and("p.harness_kind = :harness")
                .bind("harness", text(kind));
        }
        if let Some(before) = filter.before {
            condition = condition.and("p.seq < :before").bind("before", int(before));
        }
        let mut rows = Sql::owned(format!(
            "SELECT {COLUMNS} FROM packets p WHERE {} ORDER BY p.seq DESC LIMIT :limit",
            condition.text()
        ))
        .bind_condition(&condition)
        .bind("limit", int(u64::from(filter.limit) + 1))
        .prepare(db)?
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
    pub async fn from_seq(db: &D1Database, seq: u64, limit: u32) -> Result<Vec<PacketRow>> {
        Sql::owned(format!(
            "SELECT {COLUMNS} FROM packets p WHERE p.seq >= :seq ORDER BY p.seq LIMIT :limit"
        ))
        .bind("seq", int(seq))
        .bind("limit", int(u64::from(limit)))
        .prepare(db)?
        .all()
        .await?
        .results::<PacketRow>()
    }

    /// Removes a packet from the index, unless a ref points at it, and
    /// marks the packs it used for the clean-up. Returns the refs that
    /// point at it (nothing was removed then).
    pub async fn delete(db: &D1Database, digest: &Digest) -> Result<Vec<String>> {
        #[derive(Deserialize)]
        struct NameRow {
            name: String,
        }
        let d = digest.to_string();
        let refs = sql("SELECT name FROM refs WHERE digest = :digest ORDER BY name LIMIT 10")
            .bind("digest", text(&d))
            .prepare(db)?
            .all()
            .await?
            .results::<NameRow>()?;
        if !refs.is_empty() {
            return Ok(refs.into_iter().map(|r| r.name).collect());
        }
        let mut statements = vec![
            sql("DELETE FROM packets WHERE digest = :digest")
                .bind("digest", text(&d))
                .prepare(db)?,
            sql("DELETE FROM labels WHERE digest = :digest")
                .bind("digest", text(&d))
                .prepare(db)?,
        ];
        statements.extend(packs::release(db, &d)?);
        db.batch(statements).await?;
        Ok(Vec::new())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::index::fixtures::{json_of, D, T};
    use serde_json::json;

    fn packet(harness: Option<(&str, &str, Option<&str>)>, labels: Option<&str>) -> PacketRow {
        PacketRow {
            seq: 7,
            digest: D.into(),
            size: 10_240,
            member_count: 3,
            file_bytes: 1_200,
            harness_kind: harness.map(|h| h.0.into()),
            thread_id: harness.map(|h| h.1.into()),
            model: harness.and_then(|h| h.2.map(str::to_owned)),
            manifest_offset: 512,
            manifest_size: 700,
            created: T.into(),
            labels: labels.map(str::to_owned),
            storage: "whole".into(),
            object_key: Some("uploads/x".into()),
            layout_key: None,
            manifest_key: None,
            root_hex: None,
            findings: None,
            findings_kept: 1,
        }
    }

    #[test]
    fn rows_come_in_the_order_their_digests_were_named() {
        let row = |d: &Digest, seq| PacketRow {
            seq,
            digest: d.to_string(),
            ..packet(None, None)
        };
        let (a, b, c) = (Digest::of(b"a"), Digest::of(b"b"), Digest::of(b"c"));
        let rows = [row(&a, 1), row(&b, 2)];
        let seqs = |named: &[Digest]| -> Vec<u64> {
            in_named_order(named, &rows).iter().map(|r| r.seq).collect()
        };
        assert_eq!(seqs(&[b, c, a, b]), [2, 1, 2]);
        assert_eq!(seqs(&[c]), Vec::<u64>::new());
    }

    #[test]
    fn a_listed_packet_has_its_harness_or_null_and_sorted_labels() {
        let plain = packet(None, Some("b\na"));
        assert_eq!(
            json_of(plain.listed()),
            json!({
                "digest": D, "size": 10_240, "members": 3, "file_bytes": 1_200,
                "harness": null, "labels": ["a", "b"], "created": T,
            })
        );
        let codex = packet(Some(("codex", "7f3c", None)), None);
        assert_eq!(
            json_of(codex.listed())["harness"],
            json!({ "kind": "codex", "thread_id": "7f3c", "model": null })
        );
        assert_eq!(json_of(codex.listed())["labels"], json!([]));
    }

    #[test]
    fn a_stored_packet_says_whether_this_request_stored_it_and_when_it_was_first() {
        let row = packet(Some(("claude", "a1", Some("opus"))), Some("x"));
        let stored = json_of(row.stored(true));
        assert_eq!(
            stored,
            json!({
                "digest": D, "size": 10_240, "members": 3, "file_bytes": 1_200,
                "harness": { "kind": "claude", "thread_id": "a1", "model": "opus" },
                "labels": ["x"], "created": true, "created_at": T,
            })
        );
        assert_eq!(json_of(row.stored(false))["created"], json!(false));
    }

    #[test]
    fn a_packet_refs_point_at_is_refused_naming_them() {
        let p = referenced(D, &["sessions/a/latest".into(), "x".into()]);
        assert_eq!((p.status, p.error.code()), (409, "packet_referenced"));
        assert_eq!(
            p.error.refusal.details.message,
            format!("refs point at {D}: sessions/a/latest, x")
        );
    }

    #[test]
    fn pages_carry_the_next_cursor_as_text_or_null() {
        let rows = [packet(None, None)];
        assert_eq!(json_of(page(&rows, Some(7)))["next_cursor"], json!("7"));
        assert_eq!(
            json_of(page(&[], None)),
            json!({ "packets": [], "next_cursor": null })
        );
    }

    #[test]
    fn a_rows_storage_names_its_objects() {
        let mut row = packet(None, None);
        assert_eq!(
            row.storage(),
            Some(Storage::Whole {
                object: "uploads/x"
            })
        );
        row.storage = "chunked".into();
        assert_eq!(
            row.storage(),
            None,
            "a chunked row needs its layout and manifest"
        );
        row.layout_key = Some("layouts/l".into());
        row.manifest_key = Some("manifests/m".into());
        assert_eq!(
            row.storage(),
            Some(Storage::Chunked {
                layout: "layouts/l",
                manifest: "manifests/m"
            })
        );
    }

    #[test]
    fn digest_matches_say_when_there_are_more() {
        let found = vec!["a".to_string(), "b".into(), "c".into()];
        let m = digest_matches("sha256:0123abcd", found.clone(), 2);
        assert_eq!((m.digests.len(), m.truncated), (2, true));
        let m = digest_matches("sha256:0123abcd", found, 3);
        assert_eq!((m.digests.len(), m.truncated), (3, false));
    }
}
