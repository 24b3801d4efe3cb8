//! Comparing two verified packets: which members were added, removed or
//! changed (packet-core's [`diff`](packet_core::diff)), and a line diff for
//! a changed text file.

use packet_core::diff::{self, Change};
use serde::Serialize;
use similar::{ChangeTag, TextDiff};
use wasm_bindgen::prelude::*;

use crate::verifier::Packet;
use crate::view::{to_js, MemberView};

/// Texts larger than this (per side) are not line-diffed: the page says so
/// instead of freezing.
pub const MAX_DIFF_BYTES: usize = 4 << 20;

/// Lines of context around each change.
const CONTEXT: usize = 3;

/// One side of a comparison.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SideView {
    /// Packet digest.
    pub digest: String,
    /// Packet size.
    pub size: u64,
    /// Member count.
    pub members: usize,
}

/// A member present in both packets whose type, mode, size, body or target
/// differs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ChangedView {
    /// The member path.
    pub path: String,
    /// As it is in the first packet.
    pub before: MemberView,
    /// As it is in the second packet.
    pub after: MemberView,
    /// `after.size - before.size`.
    pub size_delta: i64,
    /// What differs: any of `type`, `mode`, `content`, `target`.
    pub what: Vec<&'static str>,
}

/// The member diff of two packets.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CompareView {
    /// The first (older) packet.
    pub a: SideView,
    /// The second (newer) packet.
    pub b: SideView,
    /// Members only in `b`.
    pub added: Vec<MemberView>,
    /// Members only in `a`.
    pub removed: Vec<MemberView>,
    /// Members in both that differ.
    pub changed: Vec<ChangedView>,
    /// Members identical in both.
    pub unchanged: usize,
    /// Sum of file sizes in `b` minus that in `a`.
    pub bytes_delta: i64,
}

fn side(p: &Packet) -> SideView {
    SideView {
        digest: p.verified.digest.to_string(),
        size: p.verified.size,
        members: p.manifest().members.len(),
    }
}

/// Compares two verified packets member by member.
pub fn compare(a: &Packet, b: &Packet) -> CompareView {
    let mut view = CompareView {
        a: side(a),
        b: side(b),
        added: Vec::new(),
        removed: Vec::new(),
        changed: Vec::new(),
        unchanged: 0,
        bytes_delta: b.manifest().totals.bytes as i64 - a.manifest().totals.bytes as i64,
    };
    let changes = diff::diff(a.manifest(), b.manifest());
    for change in &changes {
        match *change {
            Change::Removed { a: i } => view.removed.extend(a.member_view(i)),
            Change::Added { b: j } => view.added.extend(b.member_view(j)),
            Change::Changed { a: i, b: j, fields } => {
                let (x, y) = (&a.manifest().members[i], &b.manifest().members[j]);
                // The page shows a size or digest change as one "content" change.
                let mut what = Vec::new();
                if fields.kind {
                    what.push("type");
                }
                if fields.mode {
                    what.push("mode");
                }
                if fields.size || fields.sha256 {
                    what.push("content");
                }
                if fields.target {
                    what.push("target");
                }
                if let (Some(before), Some(after)) = (a.member_view(i), b.member_view(j)) {
                    view.changed.push(ChangedView {
                        path: x.path.to_string(),
                        size_delta: y.size() as i64 - x.size() as i64,
                        before,
                        after,
                        what,
                    });
                }
            }
        }
    }
    let common = a.manifest().members.len() - view.removed.len();
    view.unchanged = common - view.changed.len();
    view
}

/// `comparePackets(a, b)`: `{a, b, added, removed, changed, unchanged,
/// bytesDelta}`.
#[wasm_bindgen(js_name = comparePackets)]
pub fn compare_packets(a: &Packet, b: &Packet) -> JsValue {
    to_js(&compare(a, b))
}

/// One line of a diff hunk.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LineView {
    /// `equal`, `delete` or `insert`.
    pub tag: &'static str,
    /// 1-based line number in the old text.
    pub old: Option<usize>,
    /// 1-based line number in the new text.
    pub new: Option<usize>,
    /// The line without its line ending.
    pub text: String,
}

/// A run of changes with their context.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HunkView {
    /// Lines, in order.
    pub lines: Vec<LineView>,
}

/// A line diff.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DiffView {
    /// Hunks, each with three lines of context.
    pub hunks: Vec<HunkView>,
    /// Lines inserted.
    pub inserted: usize,
    /// Lines deleted.
    pub deleted: usize,
    /// Set when a side exceeds [`MAX_DIFF_BYTES`]: no hunks are computed.
    pub too_large: bool,
}

/// Diffs two texts line by line (invalid UTF-8 is shown replaced).
pub fn diff_lines(old: &[u8], new: &[u8]) -> DiffView {
    if old.len() > MAX_DIFF_BYTES || new.len() > MAX_DIFF_BYTES {
        return DiffView {
            hunks: Vec::new(),
            inserted: 0,
            deleted: 0,
            too_large: true,
        };
    }
    let (old, new) = (String::from_utf8_lossy(old), String::from_utf8_lossy(new));
    let diff = TextDiff::from_lines(old.as_ref(), new.as_ref());
    let (mut inserted, mut deleted) = (0, 0);
    let hunks = diff
        .grouped_ops(CONTEXT)
        .iter()
        .map(|group| HunkView {
            lines: group
                .iter()
                .flat_map(|op| diff.iter_changes(op))
                .map(|c| {
                    let tag = match c.tag() {
                        ChangeTag::Equal => "equal",
                        ChangeTag::Delete => {
                            deleted += 1;
                            "delete"
                        }
                        ChangeTag::Insert => {
                            inserted += 1;
                            "insert"
                        }
                    };
                    LineView {
                        tag,
                        old: c.old_index().map(|n| n + 1),
                        new: c.new_index().map(|n| n + 1),
                        text: c.value().trim_end_matches(['\n', '\r']).to_string(),
                    }
                })
                .collect(),
        })
        .collect();
    DiffView {
        hunks,
        inserted,
        deleted,
        too_large: false,
    }
}

/// `lineDiff(old, new)`: `{hunks: [{lines: [{tag, old, new, text}]}],
/// inserted, deleted, tooLarge}`.
#[wasm_bindgen(js_name = lineDiff)]
pub fn line_diff(old: &[u8], new: &[u8]) -> JsValue {
    to_js(&diff_lines(old, new))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::verifier::Verifier;
    use packet_core::in_memory::{build, Source};
    use packet_core::Limits;

    fn file(path: &str, contents: &str) -> Source {
        Source::File {
            path: path.into(),
            contents: contents.as_bytes().to_vec(),
            executable: false,
        }
    }

    fn packet(sources: &[Source]) -> Packet {
        let built = build(sources, None, vec![], &Limits::FORMAT).unwrap();
        let mut v = Verifier::with_digest(Some(built.digest));
        v.push_bytes(&built.bytes).unwrap();
        v.finish_packet().unwrap()
    }

    #[test]
    fn compare_finds_added_removed_and_changed_members() {
        let ws = || Source::Dir {
            path: "workspace".into(),
        };
        let a = packet(&[
            ws(),
            file("workspace/a.txt", "one\n"),
            file("workspace/gone.txt", "x"),
            file("workspace/same", "s"),
        ]);
        let b = packet(&[
            ws(),
            file("workspace/a.txt", "one\ntwo\n"),
            file("workspace/new.txt", "n"),
            file("workspace/same", "s"),
        ]);
        let v = compare(&a, &b);
        assert_eq!(
            v.added
                .iter()
                .map(|m| m.member.path.as_str())
                .collect::<Vec<_>>(),
            ["workspace/new.txt"]
        );
        assert_eq!(
            v.removed
                .iter()
                .map(|m| m.member.path.as_str())
                .collect::<Vec<_>>(),
            ["workspace/gone.txt"]
        );
        assert_eq!(v.changed.len(), 1);
        assert_eq!(v.changed[0].path, "workspace/a.txt");
        assert_eq!(v.changed[0].size_delta, 4);
        assert_eq!(v.changed[0].what, ["content"]);
        assert_eq!(v.unchanged, 2);
        assert_eq!(v.bytes_delta, 4 + 1 - 1);
    }

    #[test]
    fn line_diff_reports_hunks_with_line_numbers() {
        let d = diff_lines(b"a\nb\nc\n", b"a\nB\nc\nd\n");
        assert!(!d.too_large);
        assert_eq!((d.inserted, d.deleted), (2, 1));
        let lines = &d.hunks[0].lines;
        assert_eq!(
            lines[0],
            LineView {
                tag: "equal",
                old: Some(1),
                new: Some(1),
                text: "a".into()
            }
        );
        assert!(lines.contains(&LineView {
            tag: "delete",
            old: Some(2),
            new: None,
            text: "b".into()
        }));
        assert!(lines.contains(&LineView {
            tag: "insert",
            old: None,
            new: Some(4),
            text: "d".into()
        }));
        assert!(diff_lines(&vec![b'a'; MAX_DIFF_BYTES + 1], b"").too_large);
    }
}
