//! A local change: how one path of a folder differs from the checkpoint
//! its workspace record says it holds (docs/cli.md, "What counts as a
//! local change"). A leaf: restore's scan finds changes, and the
//! `local_changes` refusal lists them.

use serde::Serialize;

/// How a path differs from the checkpoint the folder holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ChangeKind {
    /// Its bytes differ.
    Edited,
    /// Its exec bit differs.
    Mode,
    /// It is another type of entry (a file for a folder, a link for a file).
    Type,
    /// The checkpoint has no such path.
    Added,
    /// The checkpoint has it; the folder does not.
    Removed,
}

impl ChangeKind {
    /// Its name in the JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            ChangeKind::Edited => "edited",
            ChangeKind::Mode => "mode",
            ChangeKind::Type => "type",
            ChangeKind::Added => "added",
            ChangeKind::Removed => "removed",
        }
    }
}

/// One local change.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Change {
    /// The path on this machine.
    pub path: String,
    /// What changed.
    pub change: ChangeKind,
}
