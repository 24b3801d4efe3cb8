//! Claude Code: a session's transcript, `<config>/projects/<encoded cwd>/<session>.jsonl`,
//! and its sidecar folder `<session>/` when there is one (HARNESS.md). Packed
//! as `harness/claude/<session>.jsonl` (+ `harness/claude/<session>/…`);
//! restored under the encoded name of the workspace's NEW absolute path so
//! `claude --resume <session>` finds it there. The transcript's bytes are
//! not rewritten (its `cwd` fields keep the old path; resume still works).
//! `.credentials.json` is never carried.

use std::fs;
use std::path::{Path, PathBuf};

use packet_core::{Harness, HarnessKind, Manifest};
use serde_json::Value;

use super::{
    file_size, for_each_line, refuse_existing, Adapter, LocateRequest, Located, Move, RestorePlan,
};
use crate::error::{Refused, Result};
use crate::walk::{walk_tree, Planned, Walk};

/// The Claude Code adapter.
pub struct Claude;

/// Where the packet keeps Claude Code's state.
const ROOT: &str = HarnessKind::Claude.root();

/// Claude Code's longest project folder name before it adds a hash.
pub const MAX_ENCODED: usize = 200;

/// The project folder name for a working directory: every character that
/// is not an ASCII letter or digit becomes `-`. Names longer than 200
/// characters get a hashed suffix this tool cannot reproduce: `None`.
pub fn encode_project(path: &Path) -> Option<String> {
    let s: String = path
        .to_string_lossy()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    (s.len() <= MAX_ENCODED).then_some(s)
}

impl Adapter for Claude {
    fn locate(&self, request: &LocateRequest<'_>) -> Result<Located> {
        let projects = request.home.join("projects");
        let file_name = format!("{}.jsonl", request.id);
        let preferred = encode_project(request.workspace).map(|e| projects.join(e));
        let project = match preferred.filter(|p| p.join(&file_name).is_file()) {
            Some(p) => p,
            None => search_projects(&projects, &file_name)?,
        };
        let source = project.join(&file_name);
        let (session, model) = read_transcript(&source)?;
        if let Some(found) = session.filter(|s| s != request.id) {
            return Err(Refused::TranscriptSessionMismatch {
                source,
                recorded: found,
                id: request.id.to_owned(),
            }
            .into());
        }
        if let Some(expected) = request.expect_model {
            if model.as_deref() != Some(expected) {
                return Err(Refused::TranscriptModelMismatch {
                    source,
                    recorded: model,
                    expected: expected.to_owned(),
                }
                .into());
            }
        }
        let member = HarnessKind::Claude.member_path(&file_name);
        let mut planned = vec![
            Planned::Dir {
                member: "harness".into(),
            },
            Planned::Dir {
                member: ROOT.into(),
            },
            Planned::File {
                member: member.clone(),
                source: Some(source.clone()),
                executable: false,
                size: file_size(&source)?,
            },
        ];
        let mut walk = Walk::default();
        let sidecar = project.join(request.id);
        if fs::symlink_metadata(&sidecar)
            .map(|m| m.is_dir())
            .unwrap_or(false)
        {
            walk_tree(
                &sidecar,
                &HarnessKind::Claude.member_path(request.id),
                request.walk,
                &mut walk,
            )?;
            planned.append(&mut walk.planned);
        }
        Ok(Located {
            planned,
            harness: Harness {
                kind: HarnessKind::Claude,
                model,
                session_log: member,
                session_id: request.id.to_owned(),
            },
            source_path: source,
            walk,
        })
    }

    fn restore_plan(
        &self,
        home: &Path,
        harness: &Harness,
        manifest: &Manifest,
        workspace: &Path,
    ) -> Result<RestorePlan> {
        let Some(encoded) = encode_project(workspace) else {
            return Err(Refused::ClaudeProjectPathTooLong {
                workspace: workspace.to_path_buf(),
            }
            .into());
        };
        let project = home.join("projects").join(encoded);
        let session = &harness.session_id;
        let transcript = format!("{session}.jsonl");
        if HarnessKind::Claude.relative_path(&harness.session_log) != Some(transcript.as_str()) {
            return Err(Refused::TranscriptNotWhereExpected {
                member: harness.session_log.clone(),
                expected: HarnessKind::Claude.member_path(&transcript),
            }
            .into());
        }
        let mut moves = vec![Move {
            relative: transcript.clone(),
            destination: project.join(&transcript),
        }];
        if manifest
            .find(&HarnessKind::Claude.member_path(session))
            .is_some()
        {
            moves.push(Move {
                relative: session.clone(),
                destination: project.join(session),
            });
        }
        for m in &moves {
            refuse_existing(&m.destination)?;
        }
        Ok(RestorePlan {
            rollout_path: project.join(transcript),
            moves,
        })
    }
}

fn search_projects(projects: &Path, file_name: &str) -> Result<PathBuf> {
    let mut found = Vec::new();
    if let Ok(entries) = fs::read_dir(projects) {
        for entry in entries.flatten() {
            if entry.path().join(file_name).is_file() {
                found.push(entry.path());
            }
        }
    }
    found.sort();
    match found.len() {
        1 => Ok(found.remove(0)),
        0 => Err(Refused::TranscriptNotFound {
            projects: projects.to_path_buf(),
            file_name: file_name.to_owned(),
        }
        .into()),
        count => Err(Refused::TranscriptAmbiguous {
            file_name: file_name.to_owned(),
            count,
            second: found.swap_remove(1),
        }
        .into()),
    }
}

/// The first `sessionId` recorded and the model of the last assistant message.
fn read_transcript(path: &Path) -> Result<(Option<String>, Option<String>)> {
    let mut session = None;
    let mut model = None;
    let mut lines = 0u64;
    let mut unparsable = 0u64;
    for_each_line(path, |line| {
        lines += 1;
        let Ok(v) = serde_json::from_slice::<Value>(line) else {
            unparsable += 1;
            return true;
        };
        if session.is_none() {
            session = v["sessionId"].as_str().map(str::to_owned);
        }
        if v["type"] == "assistant" {
            if let Some(m) = v["message"]["model"]
                .as_str()
                .filter(|m| !m.is_empty() && !m.starts_with('<'))
            {
                model = Some(m.to_owned());
            }
        }
        true
    })?;
    if lines == 0 || unparsable == lines {
        return Err(Refused::TranscriptWithoutJson {
            path: path.to_path_buf(),
        }
        .into());
    }
    Ok((session, model))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodes_like_claude_code() {
        assert_eq!(
            encode_project(Path::new("/work/my_app.v2")).as_deref(),
            Some("-work-my-app-v2")
        );
        assert_eq!(
            encode_project(Path::new(&format!("/{}", "a".repeat(250)))),
            None
        );
    }
}
