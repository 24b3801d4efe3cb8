//! Agent harness state: finding a session log to pack, and where it goes on
//! unpack. One adapter per harness owns everything about its harness; they
//! are listed once, in [`ADAPTERS`]:
//!
//! | module | holds |
//! |---|---|
//! | `codex`, `claude`, `opencode` | the adapters: flags and homes, pack, restore, restore-check, resume |
//! | `check` | what a restore check is asked and answers, and the checks of a session log restored as a file |
//! | `flags` | the harness flags of the command line, made from the adapters' descriptions |
//! | `zstd` | reading a compressed session log |
//! | `schemas` | tests: the schemas' lists of harnesses are the adapters' |
//!
//! The rest of the CLI asks [`adapter`] for a packet's harness kind and
//! never chooses by kind itself.

pub mod check;
pub mod claude;
pub mod codex;
pub mod flags;
pub mod opencode;
#[cfg(test)]
mod schemas;
mod zstd;

use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};

use packet_core::{Harness, HarnessKind, Limits, Manifest};

use crate::error::{CliError, Refused, Result};
use crate::report::HarnessReport;
use crate::walk::{Planned, WalkOptions};
use check::{RestoreCheckRequest, Resumable};

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

impl Move {
    /// Whether the item moved holds `relative` (a path below
    /// `harness/<kind>/`): itself (`Some("")`) or what is below it
    /// (`Some(rest)`, the path below it).
    pub fn covers<'a>(&self, relative: &'a str) -> Option<&'a str> {
        if relative == self.relative {
            return Some("");
        }
        relative
            .strip_prefix(self.relative.as_str())?
            .strip_prefix('/')
    }
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

    /// The members of `m` (a `kind` checkpoint) this plan moves into
    /// place, each with its path.
    pub fn places(&self, m: &Manifest, kind: HarnessKind) -> Vec<(String, PathBuf)> {
        let mut out = Vec::new();
        for member in &m.members {
            let Some(relative) = kind.relative_path(&member.path) else {
                continue;
            };
            let place = self.moves.iter().find_map(|mv| {
                let rest = mv.covers(relative)?;
                Some(match rest {
                    "" => mv.destination.clone(),
                    rest => mv.destination.join(rest),
                })
            });
            if let Some(d) = place {
                out.push((member.path.to_string(), d));
            }
        }
        out
    }
}

/// A harness whose session state can travel in a packet: each adapter
/// owns how the command line names it, where its state lives, how it is
/// packed and restored, how a restored session is checked and the command
/// that resumes it.
pub trait Adapter: Sync {
    /// The harness this adapter is for.
    fn kind(&self) -> HarnessKind;
    /// Its flags, homes and help ([`flags`]).
    fn command_line(&self) -> &'static flags::CommandLine;
    /// Finds the session log (and anything beside it) to pack.
    fn locate(&self, request: &LocateRequest<'_>) -> Result<Located>;
    /// Decides where the packet's harness members go under `home` for a
    /// workspace restored at `workspace` (its real absolute path); whether
    /// something is there already is the caller's to check. For a harness
    /// restored by its program, `home` is the folder the members are
    /// staged in.
    fn restore_plan(
        &self,
        home: &Path,
        harness: &Harness,
        manifest: &Manifest,
        workspace: &Path,
    ) -> Result<RestorePlan>;
    /// Checks that a restored session can be resumed on this machine
    /// (`pillbox checkpoint restore-check`); its id is checked already.
    fn restore_check(&self, request: &RestoreCheckRequest) -> Result<Resumable>;
    /// The command that resumes session `id` once it is restored.
    fn resume(&self, id: &str) -> Vec<String>;
}

/// Every adapter, in the order the command line lists them. A harness is
/// added here, in its own module, and as a kind in packet-core.
pub const ADAPTERS: &[&dyn Adapter] = &[&codex::Codex, &claude::Claude, &opencode::Opencode];

/// The adapter for a harness kind.
pub fn adapter(kind: HarnessKind) -> &'static dyn Adapter {
    match ADAPTERS.iter().find(|a| a.kind() == kind) {
        Some(a) => *a,
        // The tests below hold every kind to one adapter.
        None => panic!("no adapter for the harness {:?}", kind.as_str()),
    }
}

/// What the harness named `name` calls a session, for a summary: the
/// name of its id flag (`thread` for Codex); `session` for a name no
/// adapter has.
pub fn session_noun(name: &str) -> &'static str {
    HarnessKind::from_name(name).map_or("session", |kind| adapter(kind).command_line().id.long)
}

/// A harness that keeps its sessions in its own store and takes a
/// restored one by running its program once the workspace is in place
/// (OpenCode's `opencode import`).
pub trait Importer: Sync {
    /// Before any body of the packet is read: refuses a `program` that
    /// cannot take the session (one older than the harness that wrote it).
    fn check(&self, program: &Path, harness: &Harness, workspace: &Path) -> Result<()>;
    /// Once the packet verified, before anything moves: what the staged
    /// `file` holds, and whether the harness needs it given its own copy
    /// of the session (`diverged` says what becomes of a copy that went
    /// its own way).
    fn prepare(
        &self,
        program: &Path,
        harness: &Harness,
        file: PathBuf,
        workspace: &Path,
        diverged: Diverged,
    ) -> Result<Import>;
    /// Hands the staged `file` to the harness, from inside the restored
    /// workspace ([`Needed::Add`]).
    fn import(&self, program: &Path, file: &Path, workspace: &Path) -> Result<()>;
    /// Puts the staged `file` in place of the harness's own copy of
    /// session `id`, from inside the restored workspace
    /// ([`Needed::Replace`]): the copy is removed first, and put back if
    /// the import fails.
    fn replace(&self, program: &Path, id: &str, file: &Path, workspace: &Path) -> Result<()>;
}

/// What the harness needs done with a session to hold the packet's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Needed {
    /// Nothing: it holds the packet's session already.
    Nothing,
    /// An import: it holds no copy, or an earlier version of the session,
    /// and the import adds what that lacks.
    Add,
    /// Its copy went its own way and is discarded (`--discard-local`):
    /// an import only adds, so the copy is removed first.
    Replace,
}

/// A session to hand to its harness once the workspace is in place.
pub struct Import {
    /// The staged session file.
    pub file: PathBuf,
    /// The ids of its messages, in order.
    pub message_ids: Vec<String>,
    /// What the harness needs done with it.
    pub needed: Needed,
}

/// An [`Import`] with the program that runs it.
pub struct PendingImport<'a> {
    program: &'a Path,
    importer: &'static dyn Importer,
    session: String,
    import: Import,
}

impl<'a> PendingImport<'a> {
    /// Once the packet verified, before anything moves: the session
    /// staged as `file` for `program` ([`Importer::prepare`]).
    pub fn prepare(
        (program, importer): (&'a Path, &'static dyn Importer),
        harness: &Harness,
        file: PathBuf,
        workspace: &Path,
        diverged: Diverged,
    ) -> Result<PendingImport<'a>> {
        let import = importer.prepare(program, harness, file, workspace, diverged)?;
        Ok(PendingImport {
            program,
            importer,
            session: harness.session_id.clone(),
            import,
        })
    }

    /// Once the workspace is in place: imports the session, in place of
    /// the harness's own copy if that is to be discarded, unless the
    /// harness holds it already.
    pub fn run(&self, workspace: &Path) -> Result<()> {
        let (program, file) = (self.program, &self.import.file);
        match self.import.needed {
            Needed::Nothing => Ok(()),
            Needed::Add => self.importer.import(program, file, workspace),
            Needed::Replace => self
                .importer
                .replace(program, &self.session, file, workspace),
        }
    }

    /// What the report says of it: how many messages, and the last one.
    pub fn report(&self, r: &mut HarnessReport) {
        let ids = &self.import.message_ids;
        r.messages = Some(ids.len() as u64);
        r.last_message = Some(ids.last().cloned());
    }
}

/// What a restore does with the harness's own copy of a session that went
/// its own way: one with messages the packet's lacks. Any other copy is
/// settled the same way by unpack and every restore: the packet's session
/// itself is left as it is, and an earlier version of it (its messages the
/// start of the packet's) is brought forward, which loses nothing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Diverged {
    /// Refused (unpack; a restore without `--discard-local`).
    Refused,
    /// Replaced by the packet's session (a restore in place with
    /// `--discard-local`).
    Replaced,
}

/// Where a restore puts one harness's state.
#[derive(Clone)]
pub enum Destination {
    /// Files under this folder (`--codex-home`).
    Dir(PathBuf),
    /// Handed to the harness's program once the workspace is in place
    /// (`--opencode-import`).
    Program {
        /// The program.
        program: PathBuf,
        /// What it does with the session.
        importer: &'static dyn Importer,
    },
}

/// Where a restore puts each harness's state; a harness without one is
/// not restored (its members are verified, not written).
#[derive(Clone, Default)]
pub struct Destinations(Vec<(HarnessKind, Destination)>);

impl Destinations {
    /// Puts `kind`'s state at `to`.
    pub fn insert(&mut self, kind: HarnessKind, to: Destination) {
        self.0.retain(|(k, _)| *k != kind);
        self.0.push((kind, to));
    }

    /// Where `kind`'s state goes, if anywhere.
    pub fn get(&self, kind: HarnessKind) -> Option<&Destination> {
        self.0.iter().find(|(k, _)| *k == kind).map(|(_, to)| to)
    }

    /// The folder `kind`'s files go under, for a harness restored as files.
    pub fn dir(&self, kind: HarnessKind) -> Option<&Path> {
        match self.get(kind)? {
            Destination::Dir(home) => Some(home),
            Destination::Program { .. } => None,
        }
    }

    /// The program that imports `kind`'s session, and what it does, for a
    /// harness restored by its program.
    pub fn program(&self, kind: HarnessKind) -> Option<(&Path, &'static dyn Importer)> {
        match self.get(kind)? {
            Destination::Program { program, importer } => Some((program, *importer)),
            Destination::Dir(_) => None,
        }
    }
}

/// Refuses an id that is not one of `kind`'s session ids.
pub fn check_id(kind: HarnessKind, id: &str) -> Result<()> {
    if kind.accepts_session_id(id) {
        return Ok(());
    }
    Err(invalid_id(kind, id.to_owned()).into())
}

/// The refusal of `id` as one of `kind`'s session ids, naming the shape
/// packet-core accepts.
pub fn invalid_id(kind: HarnessKind, id: String) -> Refused {
    Refused::InvalidId {
        kind,
        id,
        shape: kind.session_id_shape(),
    }
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
                limit: MAX_LINE,
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
    fn every_kind_has_one_adapter() {
        for kind in HarnessKind::ALL {
            let n = ADAPTERS.iter().filter(|a| a.kind() == kind).count();
            assert_eq!(n, 1, "{kind:?}");
            assert_eq!(adapter(kind).kind(), kind);
        }
        assert_eq!(ADAPTERS.len(), HarnessKind::ALL.len());
    }

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
