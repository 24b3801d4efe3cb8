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

use super::check::{self, RestoreCheckRequest, Resumable};
use super::flags::{CommandLine, Home, IdFlag, PathFlag, Restore};
use super::{
    check_fits, file_size, for_each_line, Adapter, LocateRequest, Located, Move, RestorePlan,
};
use crate::error::{Refused, Result};
use crate::walk::{walk_tree, Planned, Walk};

/// The Claude Code adapter.
pub struct Claude;

/// Claude Code on the command line: `--session`, and its config dir,
/// `--claude-config-dir`, else `$CLAUDE_CONFIG_DIR`, else `~/.claude`.
const COMMAND_LINE: CommandLine = CommandLine {
    about: "Claude Code: the transcript of one session",
    product: "Claude Code",
    id: IdFlag {
        long: "session",
        value_name: "UUID",
        placeholder: "<uuid>",
        help: "Claude Code session id (a lowercase UUID) whose transcript to carry",
    },
    pack: Home::Dir {
        flag: PathFlag {
            long: "claude-config-dir",
            value_name: "DIR",
            help: "Claude Code config dir to read the transcript from",
        },
        env: "CLAUDE_CONFIG_DIR",
        default_dir: ".claude",
    },
    restore: Restore::Under(PathFlag {
        long: "claude-config-dir",
        value_name: "DIR",
        help: "Restore a Claude Code transcript under this config dir, in the project folder of the new workspace path",
    }),
    check: None,
};

/// Where the packet keeps Claude Code's state.
const ROOT: &str = HarnessKind::Claude.root();

/// Claude Code's longest project folder name before it adds a hash.
pub const MAX_ENCODED: usize = 200;

/// The variable newer Claude Code releases read for the project folder's
/// name; when it is set, pack looks there and unpack restores there.
pub const PROJECT_DIR_NAME_ENV: &str = "CLAUDE_CODE_PROJECT_DIR_NAME";

/// The project folder name Claude Code gives a working directory
/// (HARNESS.md): every UTF-16 code unit that is not an ASCII letter or
/// digit becomes `-`; a name longer than 200 characters is cut to 200 and
/// followed by `-` and the base-36 absolute value of the path's Java
/// `String.hashCode`.
pub fn encode_project(path: &Path) -> String {
    let text = path.to_string_lossy();
    let units: Vec<u16> = text.encode_utf16().collect();
    let mut name: String = units
        .iter()
        .map(|&u| match u8::try_from(u) {
            Ok(b) if b.is_ascii_alphanumeric() => char::from(b),
            _ => '-',
        })
        .collect();
    if name.len() <= MAX_ENCODED {
        return name;
    }
    name.truncate(MAX_ENCODED);
    let hash = units
        .iter()
        .fold(0i32, |h, &u| h.wrapping_mul(31).wrapping_add(i32::from(u)));
    name.push('-');
    name.push_str(&base36(hash.unsigned_abs()));
    name
}

fn base36(mut n: u32) -> String {
    let mut digits = Vec::new();
    loop {
        digits.push(b"0123456789abcdefghijklmnopqrstuvwxyz"[(n % 36) as usize]);
        n /= 36;
        if n == 0 {
            break;
        }
    }
    digits.reverse();
    String::from_utf8(digits).unwrap_or_default()
}

/// The project folder for `workspace`: `$CLAUDE_CODE_PROJECT_DIR_NAME`
/// when set (one plain folder name), else [`encode_project`].
pub fn project_folder(workspace: &Path) -> Result<String> {
    let Some(name) = std::env::var_os(PROJECT_DIR_NAME_ENV).filter(|v| !v.is_empty()) else {
        return Ok(encode_project(workspace));
    };
    match name.to_str() {
        Some(n) if n != "." && n != ".." && !n.contains(['/', '\0']) => Ok(n.to_owned()),
        _ => Err(Refused::ClaudeProjectDirNameInvalid {
            name: name.to_string_lossy().into_owned(),
        }
        .into()),
    }
}

impl Adapter for Claude {
    fn kind(&self) -> HarnessKind {
        HarnessKind::Claude
    }

    fn command_line(&self) -> &'static CommandLine {
        &COMMAND_LINE
    }

    /// The transcript is a file named for the session.
    fn restore_check(&self, request: &RestoreCheckRequest) -> Result<Resumable> {
        let (_, raw) = check::restored_log(request, |name, id| name == format!("{id}.jsonl"))?;
        Ok(Resumable {
            rollout_path: Some(raw.to_owned()),
            model: None,
        })
    }

    fn resume(&self, id: &str) -> Vec<String> {
        vec!["claude".into(), "--resume".into(), id.into()]
    }

    fn locate(&self, request: &LocateRequest<'_>) -> Result<Located> {
        let projects = request.home.join("projects");
        let file_name = format!("{}.jsonl", request.id);
        let preferred = projects.join(project_folder(request.workspace)?);
        let project = match Some(preferred).filter(|p| p.join(&file_name).is_file()) {
            Some(p) => p,
            None => search_projects(&projects, &file_name)?,
        };
        let source = project.join(&file_name);
        let size = file_size(&source)?;
        check_fits(&source, size, request.workspace_bytes)?;
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
                size,
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
            harness: Harness::new(HarnessKind::Claude, model, member, request.id.to_owned()),
            source_path: Some(source),
            walk,
            scratch: None,
            secrets: Vec::new(),
        })
    }

    fn restore_plan(
        &self,
        home: &Path,
        harness: &Harness,
        manifest: &Manifest,
        workspace: &Path,
    ) -> Result<RestorePlan> {
        let project = home.join("projects").join(project_folder(workspace)?);
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
        Ok(RestorePlan {
            rollout_path: Some(project.join(transcript)),
            moves,
            import: None,
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
            encode_project(Path::new("/work/my_app.v2")),
            "-work-my-app-v2"
        );
        // One `-` per UTF-16 unit: two for a character outside the BMP.
        assert_eq!(encode_project(Path::new("/a\u{e9}\u{1f600}b")), "-a---b");
        let exact = format!("/{}", "a".repeat(MAX_ENCODED - 1));
        assert_eq!(encode_project(Path::new(&exact)).len(), MAX_ENCODED);
    }

    /// The name Claude Code 2.1.197 gave a 282-character workspace path
    /// (seen in its config dir's projects/ folder).
    #[test]
    fn long_names_get_the_java_hash_suffix() {
        let segments: Vec<String> = (0..9)
            .map(|i| format!("segment_{i}{}", "x".repeat(20)))
            .collect();
        let path = format!("/tmp/hx/long/{}", segments.join("/"));
        assert_eq!(path.len(), 282);
        let name = encode_project(Path::new(&path));
        assert_eq!(&name[MAX_ENCODED..], "-ca1he3");
        assert_eq!(
            name[..MAX_ENCODED],
            encode_project(Path::new(&path[..MAX_ENCODED]))
        );
        // |i32::MIN| is 2^31, as JavaScript's Math.abs gives it.
        assert_eq!(base36(i32::MIN.unsigned_abs()), "zik0zk");
    }
}
