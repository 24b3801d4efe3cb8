//! One member as reports show it: the CLI's `inspect` and `diff` JSON
//! (proto/cli/*.schema.json) and the inspector page's member views.

use alloc::string::String;

use serde::{Serialize, Serializer};

use crate::digest::Digest;
use crate::header::Kind;
use crate::manifest::{Member, Mode};
use crate::path::MemberPath;

/// A member described for a report: what its manifest entry states, under
/// the manifest's names. Its JSON is
/// `{"path","type","mode","size","sha256","target"}`: `size` is 0 but for
/// files, `sha256` bare hex for files and null otherwise, `target` a
/// symlink's and null otherwise. A consumer that shows more (the page's
/// index and body offset) puts its fields beside it with
/// `#[serde(flatten)]`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct MemberSummary {
    /// Its path.
    pub path: MemberPath,
    /// File, directory or symlink.
    #[serde(rename = "type")]
    pub kind: Kind,
    /// Its mode, `0644`, `0755` or `0777`.
    pub mode: Mode,
    /// Its body's size (0 for directories and symlinks).
    pub size: u64,
    /// Its body's SHA-256 (files only), written as bare hex.
    #[serde(serialize_with = "bare_hex")]
    pub sha256: Option<Digest>,
    /// Its target (symlinks only).
    pub target: Option<String>,
}

impl From<&Member> for MemberSummary {
    fn from(m: &Member) -> MemberSummary {
        MemberSummary {
            path: m.path.clone(),
            kind: m.kind(),
            mode: m.mode(),
            size: m.size(),
            sha256: m.sha256(),
            target: m.target().map(String::from),
        }
    }
}

/// A file's digest as the manifest writes it, without `sha256:`.
fn bare_hex<S: Serializer>(sha256: &Option<Digest>, s: S) -> Result<S::Ok, S::Error> {
    match sha256 {
        Some(d) => s.collect_str(&d.hex()),
        None => s.serialize_none(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_summary_is_the_members_manifest_facts_under_their_json_names() {
        let file = Member::file("workspace/a", 2, Digest::of(b"hi"), true);
        let json = serde_json::to_string(&MemberSummary::from(&file)).unwrap();
        let hex = alloc::string::ToString::to_string(&Digest::of(b"hi").hex());
        assert_eq!(
            json,
            alloc::format!(
                r#"{{"path":"workspace/a","type":"file","mode":"0755","size":2,"sha256":"{hex}","target":null}}"#
            )
        );
        let link = Member::symlink("workspace/l", "a");
        let json = serde_json::to_string(&MemberSummary::from(&link)).unwrap();
        assert_eq!(
            json,
            r#"{"path":"workspace/l","type":"symlink","mode":"0777","size":0,"sha256":null,"target":"a"}"#
        );
        let dir = Member::dir("workspace");
        let json = serde_json::to_string(&MemberSummary::from(&dir)).unwrap();
        assert_eq!(
            json,
            r#"{"path":"workspace","type":"dir","mode":"0755","size":0,"sha256":null,"target":null}"#
        );
    }
}
