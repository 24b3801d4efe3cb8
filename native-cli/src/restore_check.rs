//! `pillbox checkpoint restore-check`: validates a checkpoint the way a host
//! does before resuming an agent session. The rollout path must be
//! absolute, present on this machine, named for the thread, and its log
//! must record that thread. An OpenCode session has no file of its own:
//! this machine's `opencode` must run, be no older than the one that
//! exported the session, and hold the session with the checkpoint's
//! messages. When it fails, the recovery is to clear the rollout from the
//! checkpoint and start a fresh thread, never to resume into an empty
//! session that only looks live.

use serde::Serialize;

use crate::error::Result;
use crate::harness;
pub use crate::harness::check::RestoreCheckRequest;

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

/// Runs the checks of the checkpoint's harness (its adapter's
/// [`harness::Adapter::restore_check`]).
pub fn restore_check(request: &RestoreCheckRequest) -> Result<RestoreCheckReport> {
    harness::check_id(request.kind, &request.thread_id)?;
    let adapter = harness::adapter(request.kind);
    let found = adapter.restore_check(request)?;
    Ok(RestoreCheckReport {
        schema: "pillbox.checkpoint.restore-check/1",
        ok: true,
        harness: adapter.kind().as_str(),
        thread_id: request.thread_id.clone(),
        rollout_path: found.rollout_path,
        model: found.model,
        resume: adapter.resume(&request.thread_id),
    })
}

#[cfg(test)]
mod tests {
    use std::fs;

    use packet_core::HarnessKind;

    use super::*;

    const ID: &str = "0199a213-81c0-7800-8aa1-bbab2a035a53";

    fn check(path: Option<&str>) -> Result<RestoreCheckReport> {
        restore_check(&RestoreCheckRequest {
            kind: HarnessKind::Codex,
            thread_id: ID.into(),
            rollout_path: path.map(str::to_owned),
            recorded: None,
            program: None,
        })
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

    #[test]
    fn each_harness_resumes_with_its_own_program() {
        for (kind, program) in [
            (HarnessKind::Codex, "codex"),
            (HarnessKind::Claude, "claude"),
            (HarnessKind::Opencode, "opencode"),
        ] {
            let adapter = harness::adapter(kind);
            assert_eq!(adapter.kind(), kind);
            assert_eq!(adapter.resume("x")[0], program, "{kind:?}");
        }
    }
}
