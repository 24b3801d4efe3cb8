//! OpenCode: one session as `opencode export <session>` prints it
//! (HARNESS.md), packed as `harness/opencode/<session>.json`. OpenCode keeps
//! its sessions in `opencode.db` beside its credentials (`auth.json`), so
//! the database never travels: pack runs the export, and `unpack
//! --opencode-import` runs `opencode import` from inside the restored
//! workspace (its [`Importer`]), after which `opencode run --session
//! <session>` continues there. `opencode import` only adds messages and
//! parts, so a copy of the session to be discarded is deleted first
//! (`opencode session delete`), with an export of it kept until the
//! import succeeded.
//!
//! Every `opencode` command runs with a bounded time and output, from the
//! workspace, with an environment cut down to what locates OpenCode's data
//! and config: no API keys, tokens or inline config reach it. The export
//! itself is ordinary packet content (tool output inside it can quote
//! anything the agent saw).

use std::fs::File;
use std::io::{BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use packet_core::{Harness, HarnessKind, Limits, Manifest};
use serde::de::IgnoredAny;
use serde::Deserialize;

use super::check::{RestoreCheckRequest, Resumable};
use super::flags::{CommandLine, Home, IdFlag, PathFlag, ProgramFlag, Restore, Switch};
use super::{Adapter, Diverged, Import, Importer, LocateRequest, Located, Needed, RestorePlan};
use crate::error::{CliError, Refused, Result};
use crate::walk::{Planned, Walk};

/// The OpenCode adapter.
pub struct Opencode;

/// The program run when no `--opencode-bin` names one.
const DEFAULT_PROGRAM: &str = "opencode";

/// `--opencode-bin`, with what the program is run for.
const fn program_flag(help: &'static str) -> ProgramFlag {
    ProgramFlag {
        flag: PathFlag {
            long: "opencode-bin",
            value_name: "FILE",
            help,
        },
        default: DEFAULT_PROGRAM,
    }
}

/// OpenCode on the command line: `--session`; the program pack exports
/// with, unpack imports with (`--opencode-import`) and restore-check asks,
/// `--opencode-bin`, else `opencode` on `PATH`.
const COMMAND_LINE: CommandLine = CommandLine {
    about: "OpenCode: one session as `opencode export` prints it",
    product: "OpenCode",
    id: IdFlag {
        long: "session",
        value_name: "ID",
        placeholder: "<ses_…>",
        help: "OpenCode session id (`ses_…`) to export",
    },
    pack: Home::Program(program_flag("The OpenCode program that exports the session")),
    restore: Restore::Import {
        switch: Switch {
            long: "opencode-import",
            help: "Import an OpenCode session into this machine's OpenCode (`opencode import`, run from the restored workspace)",
        },
        program: program_flag("The OpenCode program that imports the session"),
        importer: &Opencode,
    },
    check: Some(program_flag("The OpenCode program to ask for the session")),
};

/// How long one `opencode` command may run.
const TIMEOUT: Duration = Duration::from_secs(120);

/// The most of a command's stderr kept for a refusal.
const STDERR_KEPT: usize = 64 << 10;

/// The most of `opencode --version`'s output read.
const VERSION_OUTPUT: u64 = 4 << 10;

/// The variables passed on to `opencode`: where its data, config and
/// temporary files are, and the locale. Anything else (API keys, tokens,
/// `OPENCODE_CONFIG_CONTENT`, `OPENCODE_AUTH_CONTENT`) is withheld.
const PASSED_ENV: &[&str] = &[
    "HOME",
    "PATH",
    "USER",
    "LOGNAME",
    "LANG",
    "LC_ALL",
    "LC_CTYPE",
    "TZ",
    "TMPDIR",
    "XDG_DATA_HOME",
    "XDG_CONFIG_HOME",
    "XDG_STATE_HOME",
    "XDG_CACHE_HOME",
    "XDG_RUNTIME_DIR",
    "OPENCODE_DB",
    "OPENCODE_CONFIG",
    "OPENCODE_CONFIG_DIR",
];

/// Set for every `opencode` command: no update check, no model list
/// download (the export and import need neither).
const SET_ENV: &[(&str, &str)] = &[
    ("OPENCODE_DISABLE_AUTOUPDATE", "1"),
    ("OPENCODE_DISABLE_MODELS_FETCH", "1"),
];

/// The export's member path for a session.
fn member_of(session: &str) -> String {
    HarnessKind::Opencode.member_path(&format!("{session}.json"))
}

impl Adapter for Opencode {
    fn kind(&self) -> HarnessKind {
        HarnessKind::Opencode
    }

    fn command_line(&self) -> &'static CommandLine {
        &COMMAND_LINE
    }

    /// No file of its own: the program runs, is no older than the OpenCode
    /// that exported the session, and holds the session with the
    /// checkpoint's messages.
    fn restore_check(&self, request: &RestoreCheckRequest) -> Result<Resumable> {
        let program = request
            .program
            .as_deref()
            .unwrap_or(Path::new(DEFAULT_PROGRAM));
        let id = &request.thread_id;
        let facts = request.recorded.as_ref();
        let cwd = facts
            .and_then(|f| f.workspace.clone())
            .filter(|w| w.is_dir())
            .unwrap_or_else(|| PathBuf::from("."));
        let local = version(program, &cwd)?;
        check_not_older(program, &local, facts.and_then(|f| f.version.as_deref()))?;
        let Some(session) = local_session(program, id, &cwd)? else {
            return Err(Refused::OpencodeSessionAbsent { id: id.clone() }.into());
        };
        if let Some(f) = facts {
            if !session.continues(f.messages, f.last_message.as_deref()) {
                return Err(Refused::RestoredOpencodeSessionDiffers { id: id.clone() }.into());
            }
        }
        Ok(Resumable {
            rollout_path: None,
            model: session.model,
        })
    }

    fn resume(&self, id: &str) -> Vec<String> {
        vec![
            "opencode".into(),
            "run".into(),
            "--session".into(),
            id.into(),
        ]
    }

    /// `request.home` is the `opencode` program.
    fn locate(&self, request: &LocateRequest<'_>) -> Result<Located> {
        let program = request.home;
        let version = version(program, request.workspace)?;
        let limit = Limits::FORMAT
            .max_packet_bytes
            .saturating_sub(request.workspace_bytes);
        let exported = export(
            program,
            request.id,
            request.workspace,
            limit,
            SCRATCH_PREFIX,
        )?;
        let size = exported.size;
        let summary = Summary::read(&exported.path)?;
        if summary.session_id != request.id {
            return Err(Refused::OpencodeExportMismatch {
                recorded: summary.session_id,
                id: request.id.to_owned(),
            }
            .into());
        }
        if let Some(expected) = request.expect_model {
            if summary.model.as_deref() != Some(expected) {
                return Err(Refused::OpencodeModelMismatch {
                    id: request.id.to_owned(),
                    recorded: summary.model,
                    expected: expected.to_owned(),
                }
                .into());
            }
        }
        let member = member_of(request.id);
        let planned = vec![
            Planned::Dir {
                member: "harness".into(),
            },
            Planned::Dir {
                member: HarnessKind::Opencode.root().into(),
            },
            Planned::File {
                member: member.clone(),
                source: Some(exported.path.to_path_buf()),
                executable: false,
                size,
            },
        ];
        Ok(Located {
            planned,
            harness: Harness {
                kind: HarnessKind::Opencode,
                model: summary.model,
                provider: summary.provider,
                session_log: member,
                session_id: request.id.to_owned(),
                version: Some(version),
            },
            source_path: None,
            walk: Walk::default(),
            scratch: Some(exported.path),
            secrets: Vec::new(),
        })
    }

    /// Nothing is moved: the export is staged under `home` (a temporary
    /// folder) and imported once the workspace is in place.
    fn restore_plan(
        &self,
        _home: &Path,
        harness: &Harness,
        _manifest: &Manifest,
        _workspace: &Path,
    ) -> Result<RestorePlan> {
        let expected = member_of(&harness.session_id);
        if harness.session_log != expected {
            return Err(Refused::OpencodeExportNotWhereExpected {
                member: harness.session_log.clone(),
                expected,
            }
            .into());
        }
        Ok(RestorePlan {
            moves: Vec::new(),
            rollout_path: None,
            import: Some(format!("{}.json", harness.session_id)),
        })
    }
}

impl Importer for Opencode {
    /// The program runs and is no older than the OpenCode that exported
    /// the session.
    fn check(&self, program: &Path, harness: &Harness, workspace: &Path) -> Result<()> {
        let local = version(program, workspace)?;
        check_not_older(program, &local, harness.version.as_deref())
    }

    /// Reads the staged export and compares it with this machine's copy of
    /// the session, if any ([`import_needed`]).
    fn prepare(
        &self,
        program: &Path,
        harness: &Harness,
        file: PathBuf,
        workspace: &Path,
        diverged: Diverged,
    ) -> Result<Import> {
        let summary = Summary::read(&file)?;
        let session = &harness.session_id;
        let local = local_session(program, session, workspace)?;
        let needed = import_needed(
            session,
            local.as_ref().map(|c| c.message_ids.as_slice()),
            &summary.message_ids,
            diverged,
        )?;
        Ok(Import {
            file,
            message_ids: summary.message_ids,
            needed,
        })
    }

    /// Runs `opencode import <file>` from inside the restored workspace.
    fn import(&self, program: &Path, file: &Path, workspace: &Path) -> Result<()> {
        let file_arg = file.to_string_lossy();
        run_quiet(program, &["import", file_arg.as_ref()], workspace)
    }

    /// Exports this machine's copy of `id` (a backup), runs `opencode
    /// session delete <id>` (a failure there changes nothing and is
    /// returned), then imports `file`. If the import fails, the copy is
    /// put back from the backup (deleted again, in case the import left
    /// part of the file's session, then the backup imported) and the
    /// import's failure returned; if putting it back fails too, the backup
    /// is kept and the refusal names it.
    fn replace(&self, program: &Path, id: &str, file: &Path, workspace: &Path) -> Result<()> {
        let limit = Limits::FORMAT.max_packet_bytes;
        let backup = match export(program, id, workspace, limit, BACKUP_PREFIX) {
            Ok(backup) => backup,
            // Gone since it was compared: nothing to discard.
            Err(e) if session_not_found(&e) => return self.import(program, file, workspace),
            Err(e) => return Err(e),
        };
        delete(program, id, workspace)?;
        let Err(failure) = self.import(program, file, workspace) else {
            return Ok(());
        };
        let put_back = match delete(program, id, workspace) {
            Err(e) if !session_not_found(&e) => Err(e),
            _ => self.import(program, &backup.path, workspace),
        };
        match put_back {
            Ok(()) => Err(failure),
            Err(e) => Err(kept(e, id, backup.path)),
        }
    }
}

/// The start of the name of an export read and removed (in the temporary
/// folder).
const SCRATCH_PREFIX: &str = ".pillbox-opencode-";

/// The start of a backup export's file name (in the temporary folder): a
/// person may have to find it.
const BACKUP_PREFIX: &str = "pillbox-opencode-backup-";

/// Runs `opencode session delete <id>` from `cwd`.
fn delete(program: &Path, id: &str, cwd: &Path) -> Result<()> {
    run_quiet(program, &["session", "delete", id], cwd)
}

/// Runs a command whose output is only a line of news, refusing a failure.
fn run_quiet(program: &Path, args: &[&str], cwd: &Path) -> Result<()> {
    let mut out = Vec::new();
    let ran = run(program, args, cwd, &mut out, VERSION_OUTPUT)?;
    if !ran.status.success() {
        return Err(failed(program, args, &ran));
    }
    Ok(())
}

/// Whether `e` is OpenCode saying it has no such session.
fn session_not_found(e: &CliError) -> bool {
    matches!(e, CliError::Refused(Refused::OpencodeFailed { stderr, .. }) if stderr.contains("Session not found"))
}

/// Keeps the backup export of session `id` that could not be put back
/// (`e`, the failure of putting it back) and names it.
fn kept(e: CliError, id: &str, backup: tempfile::TempPath) -> CliError {
    let path = backup.keep().unwrap_or_else(|e| {
        let path = e.path.to_path_buf();
        std::mem::forget(e.path);
        path
    });
    Refused::OpencodeBackupKept {
        id: id.to_owned(),
        backup: path.display().to_string(),
        error: e.report().details.message.into_owned(),
    }
    .into()
}

/// What this machine's OpenCode needs done to hold session `id`, whose
/// export holds the messages `packet`, given its own copy of it (`local`,
/// its messages). `opencode import` adds the messages and parts it does
/// not hold and keeps the ones it does, deleting none (observed with
/// 1.18.33): no copy, or an earlier version of the session (its messages
/// the start of `packet`), becomes the packet's session by an import,
/// losing nothing; the same messages need nothing; a copy that went its
/// own way (messages `packet` lacks) would be mixed with the packet's by
/// an import, so it is refused, or with [`Diverged::Replaced`] deleted
/// before the import.
fn import_needed(
    id: &str,
    local: Option<&[String]>,
    packet: &[String],
    diverged: Diverged,
) -> Result<Needed> {
    let Some(local) = local else {
        return Ok(Needed::Add);
    };
    if local == packet {
        return Ok(Needed::Nothing);
    }
    if packet.starts_with(local) {
        return Ok(Needed::Add);
    }
    match diverged {
        Diverged::Replaced => Ok(Needed::Replace),
        Diverged::Refused => Err(Refused::OpencodeSessionConflict { id: id.to_owned() }.into()),
    }
}

/// The command line as a person would type it, for messages.
fn shown(program: &Path, args: &[&str]) -> String {
    let mut s = program.display().to_string();
    for a in args {
        s.push(' ');
        s.push_str(a);
    }
    s
}

/// What a finished command left.
struct Ran {
    status: ExitStatus,
    /// Its stderr, at most [`STDERR_KEPT`] bytes.
    stderr: Vec<u8>,
    /// Whether it printed more than the caller takes (and was stopped).
    overflowed: bool,
}

/// Runs `program args…` in `cwd` with the cut-down environment, copying
/// at most `max_out` bytes of its stdout into `out`; stops it after
/// [`TIMEOUT`] or once it prints more than `max_out` bytes.
fn run(
    program: &Path,
    args: &[&str],
    cwd: &Path,
    out: &mut (dyn Write + Send),
    max_out: u64,
) -> Result<Ran> {
    let mut command = Command::new(program);
    command
        .args(args)
        .current_dir(cwd)
        .env_clear()
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for name in PASSED_ENV {
        if let Some(v) = std::env::var_os(name) {
            command.env(name, v);
        }
    }
    command.envs(SET_ENV.iter().copied());
    let mut child = command.spawn().map_err(|e| Refused::OpencodeUnavailable {
        program: program.to_path_buf(),
        error: e.to_string(),
    })?;
    let (Some(mut stdout), Some(stderr)) = (child.stdout.take(), child.stderr.take()) else {
        let _ = child.kill();
        let _ = child.wait();
        return Err(CliError::Bug("a piped child has no pipes".into()));
    };
    let overflowed = AtomicBool::new(false);
    let flag = &overflowed;
    let command_line = shown(program, args);
    std::thread::scope(|scope| {
        let errors = scope.spawn(move || {
            let mut kept = Vec::new();
            // Read on to the end so the program never blocks on a full pipe.
            let mut rest = stderr;
            let _ = (&mut rest).take(STDERR_KEPT as u64).read_to_end(&mut kept);
            let _ = std::io::copy(&mut rest, &mut std::io::sink());
            kept
        });
        let copied = scope.spawn(move || -> std::io::Result<()> {
            let copied = std::io::copy(&mut (&mut stdout).take(max_out), out)?;
            if copied == max_out {
                let mut one = [0u8; 1];
                if stdout.read(&mut one)? > 0 {
                    flag.store(true, Ordering::Relaxed);
                }
            }
            // Dropping the pipe here makes a program still writing stop.
            drop(stdout);
            Ok(())
        });
        let status = wait_bounded(&mut child, &overflowed);
        let copied = copied.join();
        let stderr = errors.join().unwrap_or_default();
        let status = status?;
        let Some(status) = status else {
            return Err(Refused::OpencodeTimedOut {
                command: command_line.clone(),
                seconds: TIMEOUT.as_secs(),
            }
            .into());
        };
        match copied {
            Ok(Ok(())) => {}
            Ok(Err(e)) => return Err(CliError::io("write the output of", &command_line, e)),
            Err(_) => return Err(CliError::Bug("the output copy stopped unexpectedly".into())),
        }
        Ok(Ran {
            status,
            stderr,
            overflowed: overflowed.load(Ordering::Relaxed),
        })
    })
}

/// Waits for `child` until [`TIMEOUT`], or until its output overflowed;
/// kills it then. `None`: it timed out.
fn wait_bounded(child: &mut Child, overflowed: &AtomicBool) -> Result<Option<ExitStatus>> {
    let deadline = Instant::now() + TIMEOUT;
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return Ok(Some(status)),
            Ok(None) => {}
            Err(e) => return Err(CliError::io("wait for", "opencode", e)),
        }
        let late = Instant::now() >= deadline;
        if late || overflowed.load(Ordering::Relaxed) {
            let _ = child.kill();
            let status = child
                .wait()
                .map_err(|e| CliError::io("wait for", "opencode", e))?;
            return Ok((!late).then_some(status));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The first lines of a command's stderr, without terminal colours.
fn first_lines(stderr: &[u8]) -> String {
    let text = String::from_utf8_lossy(stderr);
    let mut plain = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            // CSI sequences: ESC [ parameters final-byte.
            if chars.peek() == Some(&'[') {
                chars.next();
                for c in chars.by_ref() {
                    if ('@'..='~').contains(&c) {
                        break;
                    }
                }
            }
            continue;
        }
        plain.push(c);
    }
    let lines: Vec<&str> = plain
        .lines()
        .map(str::trim_end)
        .filter(|l| !l.is_empty())
        .take(5)
        .collect();
    let mut joined = lines.join(" | ");
    if joined.len() > 1000 {
        let mut cut = 1000;
        while !joined.is_char_boundary(cut) {
            cut -= 1;
        }
        joined.truncate(cut);
        joined.push('…');
    }
    if joined.is_empty() {
        "(nothing on stderr)".into()
    } else {
        joined
    }
}

/// The refusal of a command that exited unsuccessfully.
fn failed(program: &Path, args: &[&str], ran: &Ran) -> CliError {
    Refused::OpencodeFailed {
        command: shown(program, args),
        status: ran.status.to_string(),
        stderr: first_lines(&ran.stderr),
    }
    .into()
}

/// The version `opencode --version` prints (e.g. `1.18.33`).
fn version(program: &Path, cwd: &Path) -> Result<String> {
    let args = ["--version"];
    let mut out = Vec::new();
    let ran = run(program, &args, cwd, &mut out, VERSION_OUTPUT)?;
    if !ran.status.success() {
        return Err(failed(program, &args, &ran));
    }
    let text = String::from_utf8_lossy(&out);
    let printed = text.trim();
    match printed.lines().next().map(str::trim) {
        Some(v) if parse_version(v).is_some() && !ran.overflowed => Ok(v.to_owned()),
        _ => Err(Refused::OpencodeVersionUnreadable {
            program: program.to_path_buf(),
            printed: printed.chars().take(200).collect(),
        }
        .into()),
    }
}

/// The numbers of a version such as `1.18.33` (a `v` prefix and a suffix
/// after `-` or `+` are allowed and ignored).
fn parse_version(v: &str) -> Option<Vec<u64>> {
    let v = v.strip_prefix('v').unwrap_or(v);
    let core = v.split(['-', '+']).next()?;
    core.split('.').map(|n| n.parse().ok()).collect()
}

/// Refuses an OpenCode older than the one that exported the session: it
/// may not read what a newer one wrote.
fn check_not_older(program: &Path, local: &str, exporter: Option<&str>) -> Result<()> {
    let Some(exporter) = exporter else {
        return Ok(());
    };
    let (Some(have), Some(need)) = (parse_version(local), parse_version(exporter)) else {
        return Ok(());
    };
    if have < need {
        return Err(Refused::OpencodeTooOld {
            program: program.to_path_buf(),
            local: local.to_owned(),
            exporter: exporter.to_owned(),
        }
        .into());
    }
    Ok(())
}

/// An export written to a temporary file.
struct Exported {
    path: tempfile::TempPath,
    size: u64,
}

/// Runs `opencode export <session>` in `cwd` into a temporary file whose
/// name starts with `prefix`, taking at most `limit` bytes.
fn export(program: &Path, session: &str, cwd: &Path, limit: u64, prefix: &str) -> Result<Exported> {
    let args = ["export", session];
    let tmp = tempfile::Builder::new()
        .prefix(prefix)
        .suffix(".json")
        .tempfile()
        .map_err(|e| CliError::io("create a temporary file in", std::env::temp_dir(), e))?;
    let (mut file, path) = tmp.into_parts();
    let ran = run(program, &args, cwd, &mut file, limit)?;
    if ran.overflowed {
        return Err(Refused::OpencodeExportTooLarge {
            command: shown(program, &args),
            limit,
        }
        .into());
    }
    if !ran.status.success() {
        return Err(failed(program, &args, &ran));
    }
    file.flush().map_err(|e| CliError::io("write", &*path, e))?;
    let size = file
        .metadata()
        .map_err(|e| CliError::io("inspect", &*path, e))?
        .len();
    Ok(Exported { path, size })
}

/// What the session's copy in this machine's OpenCode holds, if it has
/// one: `opencode export` refusing with "Session not found" means none.
fn local_session(program: &Path, session: &str, cwd: &Path) -> Result<Option<Summary>> {
    let limit = Limits::FORMAT.max_packet_bytes;
    let exported = match export(program, session, cwd, limit, SCRATCH_PREFIX) {
        Ok(e) => e,
        Err(e) if session_not_found(&e) => return Ok(None),
        Err(e) => return Err(e),
    };
    Summary::read(&exported.path).map(Some)
}

/// What pillbox reads from an export: the session id, its model and
/// provider, and the ids of its messages in order. Parts (the transcript
/// itself) are skipped as they stream by, not kept.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Summary {
    /// `info.id`.
    pub session_id: String,
    /// `info.model.id`, else the last assistant message's `modelID`.
    pub model: Option<String>,
    /// `info.model.providerID`, else the last assistant message's `providerID`.
    pub provider: Option<String>,
    /// Every message's `info.id`, in the export's order.
    pub message_ids: Vec<String>,
}

#[derive(Deserialize)]
struct Export {
    info: Info,
    messages: Vec<Message>,
}

#[derive(Deserialize)]
struct Info {
    id: String,
    #[serde(default)]
    model: Option<ModelRef>,
}

#[derive(Deserialize)]
struct ModelRef {
    #[serde(default)]
    id: Option<String>,
    #[serde(default, rename = "providerID")]
    provider_id: Option<String>,
}

#[derive(Deserialize)]
struct Message {
    info: MessageInfo,
    #[serde(default)]
    #[allow(dead_code)]
    parts: IgnoredAny,
}

#[derive(Deserialize)]
struct MessageInfo {
    id: String,
    #[serde(default)]
    role: Option<String>,
    #[serde(default, rename = "modelID")]
    model_id: Option<String>,
    #[serde(default, rename = "providerID")]
    provider_id: Option<String>,
}

impl Summary {
    /// Reads an export file.
    pub fn read(path: &Path) -> Result<Summary> {
        let f = File::open(path).map_err(|e| CliError::io("read", path, e))?;
        let export: Export =
            serde_json::from_reader(BufReader::with_capacity(crate::packet_io::CHUNK, f)).map_err(
                |e| Refused::OpencodeExportInvalid {
                    error: e.to_string(),
                },
            )?;
        let last_assistant = export
            .messages
            .iter()
            .rev()
            .find(|m| m.info.role.as_deref() == Some("assistant"));
        let known = |v: Option<String>| v.filter(|s| !s.is_empty());
        let (info_model, info_provider) = match export.info.model {
            Some(m) => (known(m.id), known(m.provider_id)),
            None => (None, None),
        };
        let model =
            info_model.or_else(|| last_assistant.and_then(|m| known(m.info.model_id.clone())));
        let provider = info_provider
            .or_else(|| last_assistant.and_then(|m| known(m.info.provider_id.clone())));
        Ok(Summary {
            session_id: export.info.id,
            model,
            provider,
            message_ids: export.messages.into_iter().map(|m| m.info.id).collect(),
        })
    }

    /// Whether this (a machine's copy) holds the packet's conversation:
    /// its message `messages - 1` is `last`, the packet's last message (a
    /// session resumed since holds more after it).
    pub fn continues(&self, messages: u64, last: Option<&str>) -> bool {
        let Some(index) = messages.checked_sub(1) else {
            return true;
        };
        usize::try_from(index)
            .ok()
            .and_then(|i| self.message_ids.get(i))
            .map(String::as_str)
            == last
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const EXPORT: &str = r#"{"info":{"id":"ses_dceb97773ffeEbFZpPTlgwYItc","directory":"/a","model":{"id":"mock-model","providerID":"mock"},"version":"1.18.33"},
"messages":[{"info":{"role":"user","id":"msg_1","sessionID":"ses_dceb97773ffeEbFZpPTlgwYItc"},"parts":[{"type":"text","text":"hi"}]},
{"info":{"role":"assistant","id":"msg_2","modelID":"m2","providerID":"p2"},"parts":[]}]}"#;

    #[test]
    fn an_export_is_summarised_without_its_parts() {
        let t = tempfile::tempdir().unwrap();
        let p = t.path().join("e.json");
        std::fs::write(&p, EXPORT).unwrap();
        let s = Summary::read(&p).unwrap();
        assert_eq!(s.session_id, "ses_dceb97773ffeEbFZpPTlgwYItc");
        assert_eq!(s.model.as_deref(), Some("mock-model"));
        assert_eq!(s.provider.as_deref(), Some("mock"));
        assert_eq!(s.message_ids, ["msg_1", "msg_2"]);
        assert!(s.continues(2, Some("msg_2")));
        assert!(s.continues(1, Some("msg_1")));
        assert!(!s.continues(1, Some("msg_2")));
        assert!(!s.continues(3, Some("msg_3")));
        assert!(s.continues(0, None));
        // Without info.model, the last assistant message names them.
        std::fs::write(
            &p,
            EXPORT.replace(r#""model":{"id":"mock-model","providerID":"mock"},"#, ""),
        )
        .unwrap();
        let s = Summary::read(&p).unwrap();
        assert_eq!(
            (s.model.as_deref(), s.provider.as_deref()),
            (Some("m2"), Some("p2"))
        );
        std::fs::write(&p, "not json").unwrap();
        assert_eq!(Summary::read(&p).unwrap_err().code(), "session_log_invalid");
    }

    #[test]
    fn a_copy_of_the_session_is_brought_forward_unless_it_went_its_own_way() {
        let ids = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let packet = ids(&["m1", "m2", "m3"]);
        let needed = |local: Option<&[&str]>, diverged| {
            let local = local.map(ids);
            import_needed("ses_x", local.as_deref(), &packet, diverged)
        };
        for diverged in [Diverged::Refused, Diverged::Replaced] {
            // None here, or an earlier version: imported.
            assert_eq!(needed(None, diverged).unwrap(), Needed::Add);
            assert_eq!(needed(Some(&[]), diverged).unwrap(), Needed::Add);
            assert_eq!(needed(Some(&["m1"]), diverged).unwrap(), Needed::Add);
            assert_eq!(needed(Some(&["m1", "m2"]), diverged).unwrap(), Needed::Add);
            // The same session: nothing to do.
            assert_eq!(
                needed(Some(&["m1", "m2", "m3"]), diverged).unwrap(),
                Needed::Nothing
            );
        }
        // Its own way: other messages, messages out of order, or more
        // (resumed since).
        for local in [
            &["m1", "mx"][..],
            &["m2"],
            &["m2", "m1"],
            &["m1", "m2", "m3", "m4"],
        ] {
            let e = needed(Some(local), Diverged::Refused).unwrap_err();
            assert_eq!(e.code(), "opencode_session_conflict", "{local:?}");
            // Discarded: deleted before the import, which only adds.
            assert_eq!(
                needed(Some(local), Diverged::Replaced).unwrap(),
                Needed::Replace
            );
        }
    }

    #[test]
    fn versions_compare_by_their_numbers() {
        assert_eq!(parse_version("1.18.33"), Some(vec![1, 18, 33]));
        assert_eq!(parse_version("v1.2.3-beta.1"), Some(vec![1, 2, 3]));
        assert_eq!(parse_version("opencode 1.2"), None);
        let p = Path::new("opencode");
        check_not_older(p, "1.18.33", Some("1.18.33")).unwrap();
        check_not_older(p, "1.18.40", Some("1.18.33")).unwrap();
        check_not_older(p, "1.18.33", None).unwrap();
        let e = check_not_older(p, "1.9.0", Some("1.18.33")).unwrap_err();
        assert_eq!(e.code(), "opencode_too_old");
    }

    #[test]
    fn stderr_is_shown_without_colours_and_cut() {
        let s = first_lines(b"\x1b[91m\x1b[1mError: \x1b[0mSession not found: ses_x\n\n");
        assert_eq!(s, "Error: Session not found: ses_x");
        assert_eq!(first_lines(b""), "(nothing on stderr)");
        let many: String = (0..10).map(|i| format!("line {i}\n")).collect();
        assert_eq!(first_lines(many.as_bytes()).matches("line").count(), 5);
    }
}
