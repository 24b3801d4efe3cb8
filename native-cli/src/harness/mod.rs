//! Agent harness state: finding a session log to pack, and where it goes on
//! unpack. One adapter per harness (`codex`, `claude`, `opencode`).

pub mod claude;
pub mod codex;
pub mod opencode;
mod zstd;

use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};

use packet_core::{Harness, HarnessKind, Limits, Manifest};
use serde::Serialize;

use crate::error::{CliError, Refused, Result};
use crate::restore_check::{RestoreCheckRequest, Resumable};
use crate::walk::{Planned, WalkOptions};

/// Longest JSONL line read from a session log (a Codex `session_meta` line
/// carries the base instructions and can be long).
pub const MAX_LINE: u64 = 64 << 20;

/// What a pack asks a harness adapter for.
pub struct LocateRequest<'a> {
    /// The harness's home (`$CODEX_HOME`, `$CLAUDE_CONFIG_DIR`); for
    /// OpenCode, which finds its own data, the `opencode` program to run.
    pub home: &'a Path,
    /// Thread id (Codex) or session id (Claude Code, OpenCode), canonical.
    pub id: &'a str,
    /// The workspace's real absolute path.
    pub workspace: &'a Path,
    /// The model the caller expects, if it said so.
    pub expect_model: Option<&'a str>,
    /// Exclusion options (for a sidecar folder).
    pub walk: &'a WalkOptions,
    /// The bytes of the workspace's files already planned: what is left of
    /// the packet limit bounds the session log.
    pub workspace_bytes: u64,
}

/// A session log found for packing.
pub struct Located {
    /// Members under `harness/<kind>/`, the harness roots included.
    pub planned: Vec<Planned>,
    /// The descriptor for the manifest.
    pub harness: Harness,
    /// The session log's absolute path on this machine (`None` when it
    /// was printed by the harness rather than read from a file).
    pub source_path: Option<PathBuf>,
    /// What the walk of any sidecar folder excluded or skipped.
    pub walk: crate::walk::Walk,
    /// A temporary file the planned members are read from, removed when
    /// this is dropped (after the packet is written).
    pub scratch: Option<tempfile::TempPath>,
    /// Secrets in what the adapter read that the planned files' bytes
    /// hide from the detector pack runs over every body (a compressed
    /// rollout's lines): they stop the pack like any other.
    pub secrets: Vec<crate::pack::secrets::Found>,
}

/// One harness item to move from staging into the harness home.
#[derive(Debug, Clone)]
pub struct Move {
    /// Path relative to `harness/<kind>/` (and to the staging folder).
    pub relative: String,
    /// Its final absolute path.
    pub destination: PathBuf,
}

/// Where restored harness state goes.
pub struct RestorePlan {
    /// Items to move into place, after the workspace.
    pub moves: Vec<Move>,
    /// The restored session log's absolute path (`None` when the harness
    /// imports it into its own store instead).
    pub rollout_path: Option<PathBuf>,
    /// The staged file (relative to `harness/<kind>/`) the harness imports
    /// once the workspace is in place (OpenCode).
    pub import: Option<String>,
}

impl RestorePlan {
    /// Refuses destinations that exist already: a restore into a new
    /// place never overwrites what it finds there.
    pub fn refuse_existing(&self) -> Result<()> {
        for m in &self.moves {
            refuse_existing(&m.destination)?;
        }
        Ok(())
    }
}

/// A harness whose session state can travel in a packet: each adapter
/// owns where its state lives, how it is packed and restored, how a
/// restored session is checked and the command that resumes it.
pub trait Adapter {
    /// The harness this adapter is for.
    fn kind(&self) -> HarnessKind;
    /// Finds the session log (and anything beside it) to pack.
    fn locate(&self, request: &LocateRequest<'_>) -> Result<Located>;
    /// Decides where the packet's harness members go under `home` for a
    /// workspace restored at `workspace` (its real absolute path); whether
    /// something is there already is the caller's to check.
    fn restore_plan(
        &self,
        home: &Path,
        harness: &Harness,
        manifest: &Manifest,
        workspace: &Path,
    ) -> Result<RestorePlan>;
    /// Checks that a restored session can be resumed on this machine
    /// (`pillbox checkpoint restore-check`; `program` is the harness's
    /// program for one that is asked rather than read); its id is checked
    /// already.
    fn restore_check(&self, request: &RestoreCheckRequest, program: &Path) -> Result<Resumable>;
    /// The command that resumes session `id` once it is restored.
    fn resume(&self, id: &str) -> Vec<String>;
}

/// The adapter for a harness kind.
pub fn adapter(kind: HarnessKind) -> &'static dyn Adapter {
    match kind {
        HarnessKind::Codex => &codex::Codex,
        HarnessKind::Claude => &claude::Claude,
        HarnessKind::Opencode => &opencode::Opencode,
    }
}

/// The harness as named on the command line.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum HarnessArg {
    /// OpenAI Codex CLI: the rollout of one thread.
    Codex,
    /// Claude Code: the transcript of one session.
    Claude,
    /// OpenCode: one session as `opencode export` prints it.
    Opencode,
}

impl HarnessArg {
    /// The packet's harness kind.
    pub fn kind(self) -> HarnessKind {
        match self {
            HarnessArg::Codex => HarnessKind::Codex,
            HarnessArg::Claude => HarnessKind::Claude,
            HarnessArg::Opencode => HarnessKind::Opencode,
        }
    }
}

/// The harness home: the flag, then the environment variable, then
/// `$HOME/<default_dir>`.
pub fn home_dir(flag: Option<&Path>, env: &str, default_dir: &str) -> Result<PathBuf> {
    if let Some(p) = flag {
        return Ok(p.to_path_buf());
    }
    if let Some(v) = std::env::var_os(env).filter(|v| !v.is_empty()) {
        return Ok(PathBuf::from(v));
    }
    match std::env::var_os("HOME").filter(|v| !v.is_empty()) {
        Some(home) => Ok(PathBuf::from(home).join(default_dir)),
        None => Err(CliError::Usage(format!(
            "neither ${env} nor $HOME is set: name the harness home with a flag"
        ))),
    }
}

/// Refuses an id that is not one of `kind`'s session ids.
pub fn check_id(kind: HarnessKind, id: &str) -> Result<()> {
    if kind.accepts_session_id(id) {
        return Ok(());
    }
    Err(Refused::InvalidId {
        kind,
        id: id.to_owned(),
    }
    .into())
}

/// Refuses a session log that cannot fit in a packet beside the
/// workspace, before it is read: a rollout of several hundred megabytes
/// would otherwise be read, hashed and copied only to be refused.
pub fn check_fits(source: &Path, size: u64, workspace_bytes: u64) -> Result<()> {
    let limit = Limits::FORMAT.max_packet_bytes;
    if size.saturating_add(workspace_bytes) <= limit {
        return Ok(());
    }
    Err(Refused::SessionLogTooLarge {
        source: source.to_path_buf(),
        size,
        workspace_bytes,
        limit,
    }
    .into())
}

/// Calls `each` with every line of a JSONL file (without the newline),
/// stopping early when it returns false. A file named `*.zst` is read
/// through a streaming zstd decoder: one line in memory at a time.
pub fn for_each_line(path: &Path, mut each: impl FnMut(&[u8]) -> bool) -> Result<()> {
    let f = File::open(path).map_err(|e| CliError::io("read", path, e))?;
    let compressed = zstd::is_compressed(path);
    let source: Box<dyn Read> = if compressed {
        let f = BufReader::with_capacity(crate::packet_io::CHUNK, f);
        Box::new(zstd::Frames::new(f))
    } else {
        Box::new(f)
    };
    let mut r = BufReader::with_capacity(crate::packet_io::CHUNK, source);
    let mut line = Vec::new();
    loop {
        line.clear();
        let n = (&mut r)
            .take(MAX_LINE)
            .read_until(b'\n', &mut line)
            .map_err(|e| match e.kind() {
                std::io::ErrorKind::InvalidData if compressed => Refused::SessionLogNotZstd {
                    path: path.to_path_buf(),
                    error: e.to_string(),
                }
                .into(),
                _ => CliError::io("read", path, e),
            })?;
        if n == 0 {
            return Ok(());
        }
        if line.last() == Some(&b'\n') {
            line.pop();
        } else if n as u64 == MAX_LINE {
            return Err(Refused::SessionLogLineTooLong {
                path: path.to_path_buf(),
            }
            .into());
        }
        if !each(&line) {
            return Ok(());
        }
    }
}

/// Adds directory members for every ancestor of `member` (below and
/// including `harness`), parents first.
pub fn ancestors(member: &str) -> Vec<Planned> {
    let mut out = Vec::new();
    let mut at = 0;
    while let Some(i) = member[at..].find('/') {
        out.push(Planned::Dir {
            member: member[..at + i].to_owned(),
        });
        at += i + 1;
    }
    out
}

/// Refuses a destination that already exists (restores never overwrite).
pub fn refuse_existing(path: &Path) -> Result<()> {
    if std::fs::symlink_metadata(path).is_ok() {
        return Err(Refused::HarnessFileExists {
            path: path.to_path_buf(),
        }
        .into());
    }
    Ok(())
}

/// The size of a harness file about to be packed (not following a symlink).
pub fn file_size(path: &Path) -> Result<u64> {
    std::fs::symlink_metadata(path)
        .map(|m| m.len())
        .map_err(|e| CliError::io("inspect", path, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ancestors_lists_parents_in_order() {
        let a: Vec<String> = ancestors("harness/codex/sessions/f")
            .iter()
            .map(|p| p.member().to_owned())
            .collect();
        assert_eq!(a, ["harness", "harness/codex", "harness/codex/sessions"]);
    }

    #[test]
    fn a_session_log_too_large_for_the_packet_is_refused_by_its_size() {
        let limit = Limits::FORMAT.max_packet_bytes;
        let log = Path::new("/h/rollout.jsonl");
        check_fits(log, limit - 10, 10).unwrap();
        let e = check_fits(log, limit - 10, 11).unwrap_err();
        assert_eq!(e.code(), "session_log_too_large");
        assert_eq!(e.report().details.path.as_deref(), Some("/h/rollout.jsonl"));
        assert!(e.report().details.advice.contains("archive"));
    }
}
