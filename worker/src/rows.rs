//! What the D1 index's rows hold ([`crate::index`] reads them), and the
//! API answers built from them ([`pillbox_wire`]). Pure, so every answer's
//! shape is tested natively.

use pillbox_wire::{
    DigestMatches, Harness, ListedRef, Packet, PacketFacts, PacketList, Push, PushPart,
    ReceivedPart, Ref, RefChange, RefHistory, RefList, RefMove, Stored, Upload,
};
use serde::Deserialize;

use crate::config::Config;
use crate::multipart::Plan;
use crate::push::plan::Status;

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

/// Newline-separated labels (`group_concat`), sorted.
fn label_list(labels: Option<&str>) -> Vec<String> {
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
pub fn packet_page(rows: &[PacketRow], next: Option<u64>) -> PacketList {
    PacketList {
        packets: rows.iter().map(PacketRow::listed).collect(),
        next_cursor: next.map(|n| n.to_string()),
    }
}

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

/// A page of `GET /v1/refs`; `next` is the last name when more follow.
pub fn ref_page(rows: &[ListedRefRow], next: Option<String>) -> RefList {
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
pub fn ref_history(name: &str, rows: &[RefMoveRow], next: Option<u64>) -> RefHistory {
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const D: &str = "sha256:0000000000000000000000000000000000000000000000000000000000000abc";
    const T: &str = "2026-12-01T09:00:00.000Z";

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

    fn json_of(value: impl serde::Serialize) -> serde_json::Value {
        serde_json::to_value(value).unwrap()
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
    fn pages_carry_the_next_cursor_as_text_or_null() {
        let rows = [packet(None, None)];
        assert_eq!(
            json_of(packet_page(&rows, Some(7)))["next_cursor"],
            json!("7")
        );
        assert_eq!(
            json_of(packet_page(&[], None)),
            json!({ "packets": [], "next_cursor": null })
        );
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
            json_of(ref_page(&[listed], Some("sessions/a".into()))),
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
            json_of(ref_history("sessions/a", &rows, Some(4))),
            json!({
                "name": "sessions/a",
                "moves": [{ "digest": D, "at": T, "by": "ci" }, { "digest": D, "at": T, "by": null }],
                "next_cursor": "4",
                "kept": REF_HISTORY_KEPT,
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
