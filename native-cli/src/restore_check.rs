//! `pillbox checkpoint restore-check`: validates a checkpoint the way a host
//! does before resuming an agent session. The rollout path must be
//! absolute, present on this machine, named for the thread, and its log
//! must record that thread. An OpenCode session has no file of its own:
//! this machine's `opencode` must run, be no older than the one that
//! exported the session, and hold the session with the checkpoint's
//! messages. When it fails, the recovery is to clear the rollout from the
//! checkpoint and start a fresh thread, never to resume into an empty
//! session that only looks live.

use std::fs;
use std::path::{Path, PathBuf};

use packet_core::HarnessKind;
use serde::Serialize;
use serde_json::Value;

use crate::error::{Refused, Result};
use crate::harness::{self, codex, opencode};

/// What to check.
pub struct RestoreCheckRequest {
    /// Which harness.
    pub kind: HarnessKind,
    /// Thread (Codex) or session (Claude Code, OpenCode) id.
    pub thread_id: String,
    /// The session log's path as the checkpoint records it (`None`: the
    /// checkpoint carries none).
    pub rollout_path: Option<String>,
    /// What an OpenCode checkpoint records of its session (`None` when the
    /// fields were given one by one).
    pub opencode: Option<OpencodeCheckpoint>,
}

/// What an unpack of an OpenCode export recorded.
pub struct OpencodeCheckpoint {
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
        let opencode = (kind == HarnessKind::Opencode).then(|| OpencodeCheckpoint {
            version: h["version"].as_str().map(str::to_owned),
            workspace: v["workspace"].as_str().map(PathBuf::from),
            messages: h["messages"].as_u64().unwrap_or(0),
            last_message: h["last_message"].as_str().map(str::to_owned),
        });
        Ok(RestoreCheckRequest {
            kind,
            thread_id: thread.to_owned(),
            rollout_path: h["rollout_path"].as_str().map(str::to_owned),
            opencode,
        })
    }
}

/// The `pillbox.checkpoint.restore-check/1` object.
#[derive(Debug, Serialize)]
pub struct RestoreCheckReport {
    /// `pillbox.checkpoint.restore-check/1`.
    pub schema: &'static str,
    /// Always true (a failure prints a `pillbox.error/1` object instead).
    pub ok: bool,
    /// `codex`, `claude` or `opencode`.
    pub harness: &'static str,
    /// The thread or session id.
    pub thread_id: String,
    /// The session log's absolute path (null for OpenCode, whose sessions
    /// live in its database).
    pub rollout_path: Option<String>,
    /// The model the log records, if any.
    pub model: Option<String>,
    /// The command that resumes the session.
    pub resume: Vec<String>,
}

/// Runs the checks; `opencode` is the program asked about an OpenCode
/// session.
pub fn restore_check(request: &RestoreCheckRequest, opencode: &Path) -> Result<RestoreCheckReport> {
    harness::check_id(request.kind, &request.thread_id)?;
    if request.kind == HarnessKind::Opencode {
        return check_opencode(request, opencode);
    }
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
    let well_named = match request.kind {
        HarnessKind::Codex => codex::is_rollout_name(name, id),
        HarnessKind::Claude | HarnessKind::Opencode => name == format!("{id}.jsonl"),
    };
    if !well_named {
        return Err(Refused::RolloutPathMisnamed {
            path,
            raw: raw.to_owned(),
            id: id.clone(),
        }
        .into());
    }
    match fs::metadata(&path) {
        Ok(m) if m.is_file() => {}
        Ok(_) => {
            return Err(Refused::RolloutNotARegularFile {
                path,
                raw: raw.to_owned(),
            }
            .into())
        }
        Err(e) => {
            return Err(Refused::RolloutNotOnThisMachine {
                path,
                raw: raw.to_owned(),
                error: e.to_string(),
            }
            .into())
        }
    }
    let (model, resume) = match request.kind {
        HarnessKind::Codex => {
            let meta = codex::read_rollout(&path).map_err(|_| Refused::RolloutNotCodex {
                path: path.clone(),
                raw: raw.to_owned(),
            })?;
            if meta.thread_id.as_deref() != Some(id) {
                return Err(Refused::RestoredRolloutThreadMismatch {
                    path,
                    recorded: meta.thread_id.unwrap_or_default(),
                    id: id.clone(),
                }
                .into());
            }
            (
                meta.model,
                vec!["codex".into(), "exec".into(), "resume".into(), id.clone()],
            )
        }
        HarnessKind::Claude | HarnessKind::Opencode => {
            (None, vec!["claude".into(), "--resume".into(), id.clone()])
        }
    };
    Ok(RestoreCheckReport {
        schema: "pillbox.checkpoint.restore-check/1",
        ok: true,
        harness: request.kind.as_str(),
        thread_id: id.clone(),
        rollout_path: Some(raw.to_owned()),
        model,
        resume,
    })
}

/// OpenCode: the program runs, is no older than the exporter, and holds
/// the session with the checkpoint's messages.
fn check_opencode(request: &RestoreCheckRequest, program: &Path) -> Result<RestoreCheckReport> {
    let id = &request.thread_id;
    let facts = request.opencode.as_ref();
    let cwd = facts
        .and_then(|f| f.workspace.clone())
        .filter(|w| w.is_dir())
        .unwrap_or_else(|| PathBuf::from("."));
    let local = opencode::version(program, &cwd)?;
    opencode::check_not_older(program, &local, facts.and_then(|f| f.version.as_deref()))?;
    let Some(session) = opencode::local_session(program, id, &cwd)? else {
        return Err(Refused::OpencodeSessionAbsent { id: id.clone() }.into());
    };
    if let Some(f) = facts {
        if !session.continues(f.messages, f.last_message.as_deref()) {
            return Err(Refused::RestoredOpencodeSessionDiffers { id: id.clone() }.into());
        }
    }
    Ok(RestoreCheckReport {
        schema: "pillbox.checkpoint.restore-check/1",
        ok: true,
        harness: request.kind.as_str(),
        thread_id: id.clone(),
        rollout_path: None,
        model: session.model,
        resume: vec![
            "opencode".into(),
            "run".into(),
            "--session".into(),
            id.clone(),
        ],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const ID: &str = "0199a213-81c0-7800-8aa1-bbab2a035a53";

    fn check(path: Option<&str>) -> Result<RestoreCheckReport> {
        restore_check(
            &RestoreCheckRequest {
                kind: HarnessKind::Codex,
                thread_id: ID.into(),
                rollout_path: path.map(str::to_owned),
                opencode: None,
            },
            Path::new("opencode"),
        )
    }

    #[test]
    fn relative_missing_and_present_rollouts() {
        let rel = format!("sessions/2026/11/30/rollout-2026-11-30T01-02-03-{ID}.jsonl");
        assert_eq!(
            check(Some(&rel)).unwrap_err().code(),
            "invalid_rollout_path"
        );
        let t = tempfile::tempdir().unwrap();
        let abs = t
            .path()
            .join(format!("rollout-2026-11-30T01-02-03-{ID}.jsonl"));
        assert_eq!(
            check(Some(abs.to_str().unwrap())).unwrap_err().code(),
            "rollout_unavailable"
        );
        assert_eq!(check(None).unwrap_err().code(), "rollout_unavailable");
        fs::write(
            &abs,
            format!("{{\"type\":\"session_meta\",\"payload\":{{\"id\":\"{ID}\"}}}}\n"),
        )
        .unwrap();
        let ok = check(Some(abs.to_str().unwrap())).unwrap();
        assert_eq!(ok.resume, ["codex", "exec", "resume", ID]);
    }
}
