//! What a harness's restore check is asked and answers: the request (from
//! an unpack's JSON or the flags), what the checkpoint recorded of the
//! session, what the check found, and the checks every harness whose
//! session is a file shares (`restore_check.rs` runs the command).

use std::fs;
use std::path::{Path, PathBuf};

use packet_core::HarnessKind;
use serde_json::Value;

use crate::error::{Refused, Result};

/// What to check.
pub struct RestoreCheckRequest {
    /// Which harness.
    pub kind: HarnessKind,
    /// Thread (Codex) or session (Claude Code, OpenCode) id.
    pub thread_id: String,
    /// The session log's path as the checkpoint records it (`None`: the
    /// checkpoint carries none).
    pub rollout_path: Option<String>,
    /// What the checkpoint records of the session besides (`None` when the
    /// fields were given one by one).
    pub recorded: Option<Recorded>,
    /// The harness's program, for a harness asked about its sessions
    /// rather than read (its flag, else its default).
    pub program: Option<PathBuf>,
}

/// What an unpack recorded of a session beside its id and path (what an
/// OpenCode import reports).
pub struct Recorded {
    /// The exporting OpenCode's version.
    pub version: Option<String>,
    /// The restored workspace (the session's commands run from it).
    pub workspace: Option<PathBuf>,
    /// How many messages the session had.
    pub messages: u64,
    /// The id of its last message.
    pub last_message: Option<String>,
}

impl RestoreCheckRequest {
    /// From the JSON an `unpack` printed.
    pub fn from_unpack_json(text: &str, label: &Path) -> Result<RestoreCheckRequest> {
        let v: Value = serde_json::from_str(text).map_err(|e| Refused::CheckpointNotJson {
            label: label.to_path_buf(),
            error: e.to_string(),
        })?;
        if v["schema"] != "pillbox.checkpoint.unpack/1" {
            return Err(Refused::CheckpointNotUnpackReport {
                label: label.to_path_buf(),
                schema: v["schema"].to_string(),
            }
            .into());
        }
        let h = &v["harness"];
        let (Some(kind), Some(thread)) = (h["kind"].as_str(), h["thread_id"].as_str()) else {
            return Err(Refused::CheckpointWithoutHarness {}.into());
        };
        let Some(kind) = HarnessKind::from_name(kind) else {
            return Err(Refused::CheckpointHarnessUnknown {
                label: label.to_path_buf(),
                kind: kind.to_owned(),
            }
            .into());
        };
        let recorded = Recorded {
            version: h["version"].as_str().map(str::to_owned),
            workspace: v["workspace"].as_str().map(PathBuf::from),
            messages: h["messages"].as_u64().unwrap_or(0),
            last_message: h["last_message"].as_str().map(str::to_owned),
        };
        Ok(RestoreCheckRequest {
            kind,
            thread_id: thread.to_owned(),
            rollout_path: h["rollout_path"].as_str().map(str::to_owned),
            recorded: Some(recorded),
            program: None,
        })
    }
}

/// What a harness's check found of a restored session.
pub struct Resumable {
    /// The session log's absolute path, as the checkpoint records it
    /// (`None` for a harness that keeps sessions in its own store).
    pub rollout_path: Option<String>,
    /// The model the log records, if any.
    pub model: Option<String>,
}

/// The checks of a session log restored as a file: the checkpoint records
/// its path, absolute, with the file name `well_named` accepts for the
/// session, and it is a regular file on this machine. Returns the path
/// and the path as recorded.
pub fn restored_log(
    request: &RestoreCheckRequest,
    well_named: impl Fn(&str, &str) -> bool,
) -> Result<(PathBuf, &str)> {
    let Some(raw) = request.rollout_path.as_deref().filter(|p| !p.is_empty()) else {
        return Err(Refused::CheckpointWithoutRolloutPath {}.into());
    };
    let path = PathBuf::from(raw);
    if !path.is_absolute() {
        return Err(Refused::RolloutPathRelative {
            path,
            raw: raw.to_owned(),
        }
        .into());
    }
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
    let id = &request.thread_id;
    if !well_named(name, id) {
        return Err(Refused::RolloutPathMisnamed {
            path,
            raw: raw.to_owned(),
            id: id.clone(),
        }
        .into());
    }
    match fs::metadata(&path) {
        Ok(m) if m.is_file() => Ok((path, raw)),
        Ok(_) => Err(Refused::RolloutNotARegularFile {
            path,
            raw: raw.to_owned(),
        }
        .into()),
        Err(e) => Err(Refused::RolloutNotOnThisMachine {
            path,
            raw: raw.to_owned(),
            error: e.to_string(),
        }
        .into()),
    }
}
