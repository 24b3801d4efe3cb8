//! Codex CLI: a thread's rollout, `$CODEX_HOME/sessions/YYYY/MM/DD/rollout-<time>-<thread_id>.jsonl`,
//! or the same name with `.zst` once Codex has compressed it (HARNESS.md;
//! Codex reads both). Only the rollout is carried, as it is: never
//! `auth.json`, never the `*.sqlite` state (it records the rollout's
//! absolute path; Codex rebuilds it).

use std::fs;
use std::path::{Path, PathBuf};

use packet_core::secrets::{Detector, Scanner};
use packet_core::{Harness, HarnessKind, Manifest};
use serde_json::Value;

use super::check::{self, RestoreCheckRequest, Resumable};
use super::flags::{CommandLine, Home, IdFlag, PathFlag, Restore};
use super::{
    ancestors, check_fits, file_size, for_each_line, Adapter, LocateRequest, Located, Move,
    RestorePlan,
};
use crate::error::{CliError, Refused, Result};
use crate::pack::secrets::Found;
use crate::walk::{Planned, Walk};

/// The Codex adapter.
pub struct Codex;

/// Codex on the command line: `--thread`, and its home, `--codex-home`,
/// else `$CODEX_HOME`, else `~/.codex`.
const COMMAND_LINE: CommandLine = CommandLine {
    about: "OpenAI Codex CLI: the rollout of one thread",
    product: "Codex",
    id: IdFlag {
        long: "thread",
        value_name: "UUID",
        placeholder: "<uuid>",
        help: "Codex thread id (a lowercase UUID) whose rollout to carry",
    },
    pack: Home::Dir {
        flag: PathFlag {
            long: "codex-home",
            value_name: "DIR",
            help: "Codex home to read the rollout from (pack, save) or restore it under (restore)",
        },
        env: "CODEX_HOME",
        default_dir: ".codex",
    },
    restore: Restore::Under(PathFlag {
        long: "codex-home",
        value_name: "DIR",
        help:
            "Restore a Codex rollout under this Codex home (at the same sessions/YYYY/MM/DD/ place)",
    }),
    check: None,
};

impl Adapter for Codex {
    fn kind(&self) -> HarnessKind {
        HarnessKind::Codex
    }

    fn command_line(&self) -> &'static CommandLine {
        &COMMAND_LINE
    }

    /// The rollout is a file named for the thread whose first line is
    /// the thread's `session_meta`.
    fn restore_check(&self, request: &RestoreCheckRequest) -> Result<Resumable> {
        let (path, raw) = check::restored_log(request, is_rollout_name)?;
        let meta = read_rollout(&path).map_err(|_| Refused::RolloutNotCodex {
            path: path.clone(),
            raw: raw.to_owned(),
        })?;
        let id = &request.thread_id;
        if meta.thread_id.as_deref() != Some(id) {
            return Err(Refused::RestoredRolloutThreadMismatch {
                path,
                recorded: meta.thread_id.unwrap_or_default(),
                id: id.clone(),
            }
            .into());
        }
        Ok(Resumable {
            rollout_path: Some(raw.to_owned()),
            model: meta.model,
        })
    }

    fn resume(&self, id: &str) -> Vec<String> {
        vec!["codex".into(), "exec".into(), "resume".into(), id.into()]
    }

    fn locate(&self, request: &LocateRequest<'_>) -> Result<Located> {
        let (relative, source) = find_rollout(request.home, request.id)?;
        let size = file_size(&source)?;
        check_fits(&source, size, request.workspace_bytes)?;
        // A compressed rollout's bytes hide its lines from the detector
        // pack runs over every body: its lines are scanned as they are
        // read here.
        let mut detector = super::zstd::is_compressed(&source).then(|| Scanner::new().detector(""));
        let meta = read_rollout_scanning(&source, detector.as_mut())?;
        if meta.thread_id.as_deref() != Some(request.id) {
            return Err(Refused::RolloutThreadMismatch {
                source,
                recorded: meta.thread_id.unwrap_or_default(),
                id: request.id.to_owned(),
            }
            .into());
        }
        if let Some(expected) = request.expect_model {
            if meta.model.as_deref() != Some(expected) {
                return Err(Refused::RolloutModelMismatch {
                    source,
                    recorded: meta.model,
                    expected: expected.to_owned(),
                }
                .into());
            }
        }
        let member = HarnessKind::Codex.member_path(&relative);
        let secrets = detector.map_or_else(Vec::new, |d| Found::of(&member, d.finish()).collect());
        let mut planned = ancestors(&member);
        planned.push(Planned::File {
            member: member.clone(),
            source: Some(source.clone()),
            executable: false,
            size,
        });
        Ok(Located {
            planned,
            harness: Harness::new(
                HarnessKind::Codex,
                meta.model,
                member,
                request.id.to_owned(),
            ),
            source_path: Some(source),
            walk: Walk::default(),
            scratch: None,
            secrets,
        })
    }

    fn restore_plan(
        &self,
        home: &Path,
        harness: &Harness,
        _manifest: &Manifest,
        _workspace: &Path,
    ) -> Result<RestorePlan> {
        let rollout = &harness.session_log;
        let relative = HarnessKind::Codex
            .relative_path(rollout)
            .unwrap_or(rollout)
            .to_owned();
        if !is_rollout_path(&relative, &harness.session_id) {
            return Err(Refused::RolloutNotWhereCodexLooks {
                member: rollout.clone(),
                id: harness.session_id.clone(),
            }
            .into());
        }
        let destination = home.join(&relative);
        Ok(RestorePlan {
            moves: vec![Move {
                relative,
                destination: destination.clone(),
            }],
            rollout_path: Some(destination),
            import: None,
        })
    }
}

/// Whether a file name is a rollout of `thread`:
/// `rollout-*-<thread>.jsonl`, or the same compressed, `….jsonl.zst`.
pub fn is_rollout_name(name: &str, thread: &str) -> bool {
    let plain = format!("-{thread}.jsonl");
    name.starts_with("rollout-")
        && (name.ends_with(&plain)
            || name
                .strip_suffix(".zst")
                .is_some_and(|n| n.ends_with(&plain)))
}

/// Finds `sessions/*/*/*/rollout-*-<thread>.jsonl` (or `.jsonl.zst`);
/// returns its path relative to the home and its full path.
fn find_rollout(home: &Path, thread: &str) -> Result<(String, PathBuf)> {
    let sessions = home.join("sessions");
    let mut found = Vec::new();
    for (y, y_path) in subdirs(&sessions)? {
        for (m, m_path) in subdirs(&y_path)? {
            for (d, d_path) in subdirs(&m_path)? {
                let entries =
                    fs::read_dir(&d_path).map_err(|e| CliError::io("list", &d_path, e))?;
                for entry in entries {
                    let entry = entry.map_err(|e| CliError::io("list", &d_path, e))?;
                    let Some(name) = entry.file_name().to_str().map(str::to_owned) else {
                        continue;
                    };
                    if is_rollout_name(&name, thread) && entry.path().is_file() {
                        found.push((format!("sessions/{y}/{m}/{d}/{name}"), entry.path()));
                    }
                }
            }
        }
    }
    found.sort();
    // Codex reads either form, so a thread with both has two histories.
    if let [(plain, plain_path), (compressed, compressed_path)] = &found[..] {
        if compressed.strip_suffix(".zst") == Some(plain.as_str()) {
            return Err(Refused::RolloutPlainAndCompressed {
                plain: plain_path.clone(),
                compressed: compressed_path.clone(),
            }
            .into());
        }
    }
    match found.len() {
        1 => Ok(found.remove(0)),
        0 => Err(Refused::RolloutNotFound {
            sessions,
            thread: thread.to_owned(),
        }
        .into()),
        count => Err(Refused::RolloutAmbiguous {
            thread: thread.to_owned(),
            count,
            first: found[0].1.clone(),
            second: found[1].1.clone(),
        }
        .into()),
    }
}

/// Whether `relative` is `sessions/YYYY/MM/DD/rollout-*-<thread>.jsonl`
/// (or `.jsonl.zst`).
fn is_rollout_path(relative: &str, thread: &str) -> bool {
    let parts: Vec<&str> = relative.split('/').collect();
    let digits = |s: &str, n: usize| s.len() == n && s.bytes().all(|b| b.is_ascii_digit());
    parts.len() == 5
        && parts[0] == "sessions"
        && digits(parts[1], 4)
        && digits(parts[2], 2)
        && digits(parts[3], 2)
        && is_rollout_name(parts[4], thread)
}

/// Subdirectories with UTF-8 names, sorted; none when `dir` is absent.
fn subdirs(dir: &Path) -> Result<Vec<(String, PathBuf)>> {
    let entries = match fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(CliError::io("list", dir, e)),
    };
    let mut out = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| CliError::io("list", dir, e))?;
        let is_dir = entry.file_type().map(|t| t.is_dir()).unwrap_or(false);
        if let (true, Some(name)) = (is_dir, entry.file_name().to_str()) {
            out.push((name.to_owned(), entry.path()));
        }
    }
    out.sort();
    Ok(out)
}

/// What a rollout records about itself.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct RolloutMeta {
    /// `payload.id` of the first line, when it is a `session_meta` line.
    pub thread_id: Option<String>,
    /// `payload.model` of the last `turn_context` line.
    pub model: Option<String>,
}

/// Reads the first line's `session_meta` and the last `turn_context` model,
/// one line at a time (through the zstd decoder for a `.zst` rollout).
pub fn read_rollout(path: &Path) -> Result<RolloutMeta> {
    read_rollout_scanning(path, None)
}

/// [`read_rollout`], feeding every line read to `detector` too.
fn read_rollout_scanning(path: &Path, mut detector: Option<&mut Detector>) -> Result<RolloutMeta> {
    let mut meta = RolloutMeta::default();
    let mut first = true;
    let mut bad_first = false;
    for_each_line(path, |line| {
        if let Some(d) = detector.as_deref_mut() {
            d.feed(line);
            d.feed(b"\n");
        }
        if first {
            first = false;
            let v: Value = serde_json::from_slice(line).unwrap_or(Value::Null);
            if v["type"] == "session_meta" {
                meta.thread_id = v["payload"]["id"].as_str().map(str::to_owned);
            } else {
                bad_first = true;
                return false;
            }
            return true;
        }
        if contains(line, b"\"turn_context\"") {
            if let Ok(v) = serde_json::from_slice::<Value>(line) {
                if v["type"] == "turn_context" {
                    if let Some(m) = v["payload"]["model"].as_str().filter(|m| !m.is_empty()) {
                        meta.model = Some(m.to_owned());
                    }
                }
            }
        }
        true
    })?;
    if bad_first || first {
        return Err(Refused::RolloutWithoutSessionMeta {
            path: path.to_path_buf(),
        }
        .into());
    }
    Ok(meta)
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_place_codex_reads_is_restored() {
        let id = "0199a213-81c0-7800-8aa1-bbab2a035a53";
        assert!(is_rollout_path(
            &format!("sessions/2026/11/30/rollout-2026-11-30T01-02-03-{id}.jsonl"),
            id
        ));
        assert!(is_rollout_path(
            &format!("sessions/2026/11/30/rollout-2026-11-30T01-02-03-{id}.jsonl.zst"),
            id
        ));
        assert!(!is_rollout_path(
            &format!("sessions/2026/11/30/rollout-2026-11-30T01-02-03-{id}.zst"),
            id
        ));
        assert!(!is_rollout_path(&format!("config-{id}.jsonl"), id));
        assert!(!is_rollout_path(
            &format!("sessions/26/11/30/rollout-x-{id}.jsonl"),
            id
        ));
        assert!(!is_rollout_path(
            &format!("archived_sessions/2026/11/30/rollout-x-{id}.jsonl"),
            id
        ));
    }

    #[test]
    fn reads_thread_and_last_model() {
        let t = tempfile::tempdir().unwrap();
        let p = t.path().join("r.jsonl");
        fs::write(
            &p,
            concat!(
                r#"{"timestamp":"t","type":"session_meta","payload":{"id":"0199a213-81c0-7800-8aa1-bbab2a035a53","cwd":"/w"}}"#, "\n",
                r#"{"type":"turn_context","payload":{"model":"gpt-a"}}"#, "\n",
                r#"{"type":"turn_context","payload":{"model":"gpt-b"}}"#, "\n",
            ),
        )
        .unwrap();
        let m = read_rollout(&p).unwrap();
        assert_eq!(
            m.thread_id.as_deref(),
            Some("0199a213-81c0-7800-8aa1-bbab2a035a53")
        );
        assert_eq!(m.model.as_deref(), Some("gpt-b"));
        let z = t.path().join("r.jsonl.zst");
        let compressed = ruzstd::encoding::compress_to_vec(
            &fs::read(&p).unwrap()[..],
            ruzstd::encoding::CompressionLevel::Fastest,
        );
        fs::write(&z, compressed).unwrap();
        assert_eq!(read_rollout(&z).unwrap(), m);
        fs::write(&p, "{\"type\":\"event\"}\n").unwrap();
        assert_eq!(read_rollout(&p).unwrap_err().code(), "rollout_invalid");
        // Not zstd at all, under a .zst name.
        fs::write(&z, "{\"type\":\"session_meta\"}\n").unwrap();
        assert_eq!(read_rollout(&z).unwrap_err().code(), "session_log_invalid");
    }
}
