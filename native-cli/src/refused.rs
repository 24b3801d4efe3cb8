//! Why a command refuses its input: one variant per situation, each with
//! its stable code (docs/cli.md, "Error codes"), the data its message
//! names and what a person can do about it. The variants, codes, messages
//! and advice come from one table, so that the codes can be listed and
//! checked against the documentation. Every value a message names (a
//! limit, an id's shape, the chunking this pillbox uses) is carried by
//! the refusal, given by the code that raises it: this module and
//! `error` sit below every other module and import none of them.

use std::path::{Path, PathBuf};

use crate::change::Change;

/// What to do after a failed restore check.
const RECOVERY: &str = "clear the rollout from the checkpoint and start a fresh thread; do not resume into an empty session";

/// The advice for a `restore-check` input that is not an unpack report.
const PASS_UNPACK_JSON: &str = "pass the JSON object that `pillbox checkpoint unpack` printed";

/// The advice for a thread that stopped where it never should.
const PACK_AGAIN: &str = "pack again; if it persists, report this bug";

/// What to do about secrets found in a workspace.
const SECRETS_ADVICE: &str = "remove them (move keys to a credential helper or a secret manager; for .git/config, `git remote set-url` to a URL without the token and `git config --unset-all` the http extraheader), leave those files out with --secrets exclude, or, for known test fixtures, pass --allow-secret GLOB";

/// What to do about secrets in git history no remote has.
const GIT_HISTORY_ADVICE: &str = "rewrite the local history without them (`git rebase -i` to edit or drop the commit, `git commit --amend` for the last one, or `git filter-repo --invert-paths --path FILE`; `git stash drop` for a stash, `git rm --cached FILE` for the index), then let no object keep them: `git reflog expire --expire=now --all && git gc --prune=now`; or pass --secrets exclude (loose objects holding them are left out, or else the repository); for known test fixtures, --allow-secret GLOB (matched against the path in the commit)";

/// A path as the JSON shows it.
fn shown(p: &Path) -> Option<String> {
    Some(p.display().to_string())
}

macro_rules! refusals {
    ($(
        $(#[$doc:meta])*
        $name:ident { $($field:ident : $ty:ty),* $(,)? } => $code:literal,
            path: $path:expr,
            message: $message:expr,
            advice: $advice:expr;
    )*) => {
        /// Why a command refuses its input (exit code 5).
        #[derive(Debug)]
        pub enum Refused {
            $( $(#[$doc])* $name { $($field: $ty),* }, )*
        }

        impl Refused {
            /// Every code, once per situation (several share one).
            #[cfg(test)]
            pub const CODES: &'static [&'static str] = &[$($code),*];

            /// The stable snake_case code.
            pub fn code(&self) -> &'static str {
                match self {
                    $( Refused::$name { .. } => $code, )*
                }
            }

            /// The path involved, what happened, and what to do.
            pub fn describe(&self) -> (Option<String>, String, &'static str) {
                match self {
                    $( Refused::$name { $($field),* } => ($path, $message, $advice), )*
                }
            }
        }
    };
}

refusals! {
    /// The unpack target is a file.
    TargetNotDirectory { target: PathBuf } => "target_not_directory",
        path: shown(target),
        message: format!("{} exists and is not a directory", target.display()),
        advice: "unpack into an empty or absent directory";
    /// The unpack target holds something already.
    TargetNotEmpty { target: PathBuf } => "target_not_empty",
        path: shown(target),
        message: format!("{} is not empty; unpack never overwrites or merges", target.display()),
        advice: "unpack into an empty or absent directory";
    /// Something appeared at a destination while unpacking.
    TargetAppeared { target: PathBuf } => "target_not_empty",
        path: shown(target),
        message: format!("{} appeared while unpacking", target.display()),
        advice: "make sure nothing else writes to the target, then unpack again";
    /// A harness file to restore exists already.
    HarnessFileExists { path: PathBuf } => "target_not_empty",
        path: shown(path),
        message: format!("{} already exists; unpack never overwrites harness state", path.display()),
        advice: "move the existing session log away, or restore into another harness home";
    /// restore: the folder differs from the checkpoint its record says it
    /// holds.
    LocalChanges { target: PathBuf, count: u64, listed: Vec<Change> } => "local_changes",
        path: shown(target),
        message: format!(
            "{count} path(s) in {} differ from the checkpoint recorded there{}",
            target.display(),
            listed
                .first()
                .map(|c| format!(" (first: {}, {})", c.path, c.change.as_str()))
                .unwrap_or_default()
        ),
        advice: "save them first (pillbox checkpoint save), restore into another folder, or pass --discard-local to overwrite them";
    /// restore: a folder can be restored over only with a /2 checkpoint.
    InPlaceNeedsFormat2 { target: PathBuf } => "target_not_empty",
        path: shown(target),
        message: format!("{} holds a checkpoint; a pillbox.session-packet/1 checkpoint cannot be restored over it", target.display()),
        advice: "restore it into an empty folder";
    /// Unpack's writing thread stopped taking work.
    UnpackWriterStopped {} => "unpack_interrupted",
        path: None,
        message: "the writing thread stopped unexpectedly".to_owned(),
        advice: "unpack again; if it persists, report this bug";
    /// A member's parent folder is not one this unpack created.
    ParentNotCreated { member: String } => "unpack_parent_missing",
        path: Some(member.clone()),
        message: "the member's parent folder was not created by this unpack".to_owned(),
        advice: "the packet is malformed: repack it from the source workspace";
    /// The workspace to pack is not a directory.
    WorkspaceNotDirectory { workspace: PathBuf } => "workspace_not_directory",
        path: shown(workspace),
        message: format!("{} is not a directory", workspace.display()),
        advice: "name the workspace directory to pack";
    /// Hashing stopped because another file failed first.
    PackAfterEarlierFailure {} => "pack_interrupted",
        path: None,
        message: "hashing stopped after an earlier failure".to_owned(),
        advice: "fix the error reported for the file above and pack again";
    /// A walking thread stopped.
    PackWalkingStopped {} => "pack_interrupted",
        path: None,
        message: "a walking thread stopped unexpectedly".to_owned(),
        advice: PACK_AGAIN;
    /// The unpack target is a symlink.
    TargetIsSymlink { target: PathBuf } => "target_not_directory",
        path: shown(target),
        message: format!("{} is a symlink; unpack never writes through a link", target.display()),
        advice: "unpack into an empty or absent directory named by its real path";
    /// A harness symlink would point out of the folder it is restored in.
    HarnessSymlinkEscapes { member: String, target: String } => "harness_symlink_escapes",
        path: Some(member.clone()),
        message: format!("the harness symlink points at {target:?}, outside the session folder it is restored in"),
        advice: "unpack without --codex-home or --claude-config-dir to restore the workspace alone";
    /// A git configuration file too large to neutralise.
    GitConfigTooLarge { member: String, limit: u64 } => "git_config_too_large",
        path: Some(member.clone()),
        message: format!("{member} is larger than {limit} bytes: too large to be git's, and too large to rewrite without its settings"),
        advice: "unpack without --neutralize-git and inspect the file before running git in the restored workspace";
    /// Files of the workspace hold secrets.
    SecretsInWorkspace { found: Vec<String> } => "secret_in_workspace",
        path: found.first().and_then(|f| f.split(':').next()).map(str::to_owned),
        message: format!(
            "{} secret(s) found, by content: {}; a packet never carries credentials",
            found.len(),
            found.join(", ")
        ),
        advice: SECRETS_ADVICE;
    /// Objects of a git repository that no remote has hold secrets.
    SecretsInGitHistory { found: Vec<String> } => "secret_in_git_history",
        path: found.first().and_then(|f| f.split(' ').next()).map(str::to_owned),
        message: format!(
            "{} secret(s) found in git history that no remote has (commit:path:line rule): {}; a packet never carries credentials",
            found.len(),
            found.join(", ")
        ),
        advice: GIT_HISTORY_ADVICE;
    /// A git repository whose objects could not be scanned for secrets.
    GitHistoryUnreadable { repository: String, why: String } => "git_history_unreadable",
        path: Some(repository.clone()),
        message: format!("the git history could not be scanned for secrets: {why}"),
        advice: "check the repository with `git fsck`; to pack the workspace without it, pass --secrets exclude (the repository is left out) or --exclude for its folder";
    /// A git repository with more history than the scan reads.
    GitHistoryTooLarge { repository: String, what: &'static str } => "git_history_too_large",
        path: Some(repository.clone()),
        message: format!("the git history the remotes lack holds {what}: more than the secret scan reads"),
        advice: "push the history to its remote (what a remote-tracking ref reaches is not read) or prune what nothing needs (`git gc --prune=now`); to pack the workspace without it, pass --secrets exclude (the repository is left out)";
    /// With `--secrets exclude`: the session log itself holds secrets.
    SecretInSessionLog { member: String, found: Vec<String> } => "secret_in_workspace",
        path: Some(member.clone()),
        message: format!(
            "the session log holds secrets ({}), and leaving it out would carry a session without its log",
            found.join(", ")
        ),
        advice: "start a new session, or pack the workspace alone (without --harness)";
    /// A file or folder was replaced while it was being packed.
    WorkspaceChanged { member: String, what: String } => "workspace_changed",
        path: Some(member.clone()),
        message: format!("{what} (pack never follows a link out of the workspace, never reads anything but the file it listed)"),
        advice: "pack again once nothing changes the workspace";
    /// A `.git` file points outside the workspace (a linked worktree).
    GitDirOutsideWorkspace { member: String, gitdir: String } => "git_dir_outside_workspace",
        path: Some(member.clone()),
        message: format!(
            "{member} is a .git file pointing at {gitdir:?}, outside the workspace (a linked worktree): the packet could not be restored as a working repository elsewhere"
        ),
        advice: "pack the main checkout instead, or leave git out with --exclude .git (the files are packed without their history)";
    /// The thread hashing a packet being read stopped.
    ReadHashingStopped {} => "read_interrupted",
        path: None,
        message: "the hashing thread stopped unexpectedly".to_owned(),
        advice: "read the packet again; if it persists, report this bug";
    /// A download was asked to be read a second time.
    DownloadReadTwice {} => "read_interrupted",
        path: None,
        message: "a download can be read only once".to_owned(),
        advice: "report this bug";
    /// The packet argument is a directory.
    NotAPacket { arg: PathBuf } => "not_a_packet",
        path: shown(arg),
        message: format!("{} is a directory, not a packet file", arg.display()),
        advice: "name the packet file (a .tar written by `pillbox checkpoint pack`)";
    /// The packet argument is a file that is no packet at all (empty, a
    /// source file, gzip, a tar that does not begin with packet.json).
    NotAPacketFile { arg: String, what: &'static str } => "not_a_packet",
        path: Some(arg.clone()),
        message: format!("{arg} is not a pillbox packet: {what}"),
        advice: "name a packet file (a .tar written by `pillbox checkpoint pack`, `save -o` or `pull -o`)";
    /// `cat`: the manifest lists no such member.
    MemberNotFound { member: String } => "member_not_found",
        path: None,
        message: format!("the packet has no member {member:?}"),
        advice: "list the members with `pillbox checkpoint inspect PACKET`; name one relative to the workspace (src/main.rs) or as listed (workspace/src/main.rs, harness/…)";
    /// `cat`: a name that is two members (`harness/x` beside `workspace/harness/x`).
    MemberAmbiguous { member: String, first: String, second: String } => "member_ambiguous",
        path: None,
        message: format!("{member:?} names two members: {first} and {second}"),
        advice: "name the member as listed, with its workspace/ or harness/ prefix";
    /// `cat`: the member is not in the manifest read to its end.
    MemberNotInManifest { member: String } => "member_not_found",
        path: None,
        message: format!("no member {member:?}"),
        advice: "check the path";
    /// `cat`: the member is a directory or a symlink.
    NotAFile { member: String, kind: &'static str } => "not_a_file",
        path: None,
        message: format!("{member:?} is a {kind}, not a file"),
        advice: "cat prints files; use inspect to see directories and symlink targets";
    /// A thread or session id that is not the harness's shape.
    InvalidId { kind: packet_core::HarnessKind, id: String, shape: &'static str } => "invalid_thread_id",
        path: None,
        message: format!("{} {id:?} is not {shape}", kind.session_id_name()),
        advice: "pass the id exactly as the harness printed it";
    /// A session log that cannot fit in a packet beside the workspace.
    SessionLogTooLarge { source: PathBuf, size: u64, workspace_bytes: u64, limit: u64 } => "session_log_too_large",
        path: shown(source),
        message: format!(
            "{} is {size} bytes; with the workspace's {workspace_bytes} bytes the packet would pass its limit of {limit} bytes, so it was not read",
            source.display()
        ),
        advice: "shrink what travels: compress the rollout (Codex reads rollout-….jsonl.zst as well), or archive the session in the harness and start a fresh one, or leave large workspace files out with --exclude; to carry the workspace alone, pack without --harness";
    /// An OpenCode export that would pass the packet limit.
    OpencodeExportTooLarge { command: String, limit: u64 } => "session_log_too_large",
        path: None,
        message: format!("`{command}` printed more than the {limit} bytes left in the packet beside the workspace; it was stopped"),
        advice: "start a fresh OpenCode session (or compact this one) and pack that, or leave large workspace files out with --exclude; to carry the workspace alone, pack without --harness";
    /// A `.zst` session log that does not decompress.
    SessionLogNotZstd { path: PathBuf, error: String } => "session_log_invalid",
        path: shown(path),
        message: format!("{} does not decompress as zstd: {error}", path.display()),
        advice: "check the file with `zstd -t`; a damaged rollout cannot be resumed";
    /// A session log line longer than the reader takes.
    SessionLogLineTooLong { path: PathBuf, limit: u64 } => "session_log_invalid",
        path: shown(path),
        message: format!("a line of {} is longer than {limit} bytes", path.display()),
        advice: "check that the file is the harness's JSONL session log";
    /// The Codex rollout records another thread.
    RolloutThreadMismatch { source: PathBuf, recorded: String, id: String } => "rollout_mismatch",
        path: shown(source),
        message: format!("the rollout's session_meta records thread {recorded:?}, not {id}"),
        advice: "check the thread id; the rollout file may have been renamed or copied";
    /// The Codex rollout records another model than `--expect-model`.
    RolloutModelMismatch { source: PathBuf, recorded: Option<String>, expected: String } => "rollout_mismatch",
        path: shown(source),
        message: format!("the rollout records model {recorded:?}, not {expected:?}"),
        advice: "check --expect-model, or leave it out to carry whatever model the rollout records";
    /// The packet's rollout is not where Codex looks for one.
    RolloutNotWhereCodexLooks { member: String, id: String } => "rollout_invalid",
        path: Some(member.clone()),
        message: format!("the packet's rollout {member:?} is not at sessions/YYYY/MM/DD/rollout-*-{id}.jsonl, where Codex looks for it"),
        advice: "unpack without --codex-home to restore the workspace alone, or repack the session with pillbox";
    /// A file that does not start like a Codex rollout.
    RolloutWithoutSessionMeta { path: PathBuf } => "rollout_invalid",
        path: shown(path),
        message: format!("{} does not start with a session_meta line", path.display()),
        advice: "check that the file is a Codex rollout";
    /// No rollout for the thread in the Codex home.
    RolloutNotFound { sessions: PathBuf, thread: String } => "rollout_not_found",
        path: shown(sessions),
        message: format!("no rollout for thread {thread} under {} (looked for sessions/YYYY/MM/DD/rollout-*-{thread}.jsonl)", sessions.display()),
        advice: "check the thread id and the Codex home (--codex-home, $CODEX_HOME, $HOME/.codex); to carry the workspace alone, pack without --harness";
    /// The same rollout both plain and compressed.
    RolloutPlainAndCompressed { plain: PathBuf, compressed: PathBuf } => "rollout_ambiguous",
        path: shown(compressed),
        message: format!("the rollout is there twice, plain and compressed: {} and {}", plain.display(), compressed.display()),
        advice: "Codex reads either, so they may hold different histories: keep the one Codex wrote last and move the other away";
    /// More than one rollout for the thread.
    RolloutAmbiguous { thread: String, count: usize, first: PathBuf, second: PathBuf } => "rollout_ambiguous",
        path: shown(second),
        message: format!("{count} rollouts for thread {thread}: {} and {}", first.display(), second.display()),
        advice: "keep one rollout per thread in the Codex home";
    /// The Claude Code transcript records another session.
    TranscriptSessionMismatch { source: PathBuf, recorded: String, id: String } => "transcript_mismatch",
        path: shown(source),
        message: format!("the transcript records session {recorded:?}, not {id}"),
        advice: "check the session id; the transcript may have been renamed or copied";
    /// The transcript records another model than `--expect-model`.
    TranscriptModelMismatch { source: PathBuf, recorded: Option<String>, expected: String } => "transcript_mismatch",
        path: shown(source),
        message: format!("the transcript records model {recorded:?}, not {expected:?}"),
        advice: "check --expect-model, or leave it out";
    /// `$CLAUDE_CODE_PROJECT_DIR_NAME` is not one folder name.
    ClaudeProjectDirNameInvalid { name: String } => "claude_project_dir_invalid",
        path: None,
        message: format!("CLAUDE_CODE_PROJECT_DIR_NAME is {name:?}, not one folder name"),
        advice: "set CLAUDE_CODE_PROJECT_DIR_NAME to a plain folder name (no '/'), or unset it";
    /// The packet's transcript is not where pillbox packs one.
    TranscriptNotWhereExpected { member: String, expected: String } => "transcript_invalid",
        path: Some(member.clone()),
        message: format!("the packet's transcript {member:?} is not {expected}"),
        advice: "unpack without --claude-config-dir to restore the workspace alone, or repack the session with pillbox";
    /// A file with no JSON lines.
    TranscriptWithoutJson { path: PathBuf } => "transcript_invalid",
        path: shown(path),
        message: format!("{} holds no JSON lines", path.display()),
        advice: "check that the file is a Claude Code transcript";
    /// No transcript for the session in any project folder.
    TranscriptNotFound { projects: PathBuf, file_name: String } => "transcript_not_found",
        path: shown(projects),
        message: format!("no transcript {file_name} in any folder of {}", projects.display()),
        advice: "check the session id and the Claude Code config dir (--claude-config-dir, $CLAUDE_CONFIG_DIR, $HOME/.claude); to carry the workspace alone, pack without --harness";
    /// The transcript is in several project folders, none the workspace's.
    TranscriptAmbiguous { file_name: String, count: usize, second: PathBuf } => "transcript_ambiguous",
        path: shown(second),
        message: format!("{file_name} is in {count} project folders, none of them this workspace's"),
        advice: "run pack from the workspace the session belongs to";
    /// The `opencode` program cannot be started.
    OpencodeUnavailable { program: PathBuf, error: String } => "opencode_unavailable",
        path: shown(program),
        message: format!("cannot run {}: {error}", program.display()),
        advice: "install OpenCode (npm opencode-ai) or name its program with --opencode-bin";
    /// `opencode --version` printed no version.
    OpencodeVersionUnreadable { program: PathBuf, printed: String } => "opencode_unavailable",
        path: shown(program),
        message: format!("`{} --version` printed {printed:?}, not a version", program.display()),
        advice: "check that --opencode-bin (or opencode on PATH) is OpenCode";
    /// This machine's OpenCode is older than the one that exported the session.
    OpencodeTooOld { program: PathBuf, local: String, exporter: String } => "opencode_too_old",
        path: shown(program),
        message: format!("this OpenCode is {local}, older than the {exporter} that exported the session"),
        advice: "upgrade OpenCode to at least the exporter's version, then import again";
    /// An `opencode` command failed.
    OpencodeFailed { command: String, status: String, stderr: String } => "opencode_failed",
        path: None,
        message: format!("`{command}` failed ({status}): {stderr}"),
        advice: "run the command yourself from the workspace to see what OpenCode needs (its data folder is found through $HOME or $XDG_DATA_HOME)";
    /// This machine's copy of a session was deleted for the checkpoint's
    /// (`--discard-local`), the import failed, and so did putting the copy
    /// back: it is kept as an export.
    OpencodeBackupKept { id: String, backup: String, error: String } => "opencode_failed",
        path: Some(backup.clone()),
        message: format!("this machine's copy of OpenCode session {id} was deleted to import the checkpoint's, the import failed, and putting the copy back failed too ({error}); it is kept as an export in {backup}"),
        advice: "run `opencode import` on the kept export from the workspace to put the copy back";
    /// An `opencode` command ran too long.
    OpencodeTimedOut { command: String, seconds: u64 } => "opencode_failed",
        path: None,
        message: format!("`{command}` did not finish in {seconds} s and was stopped"),
        advice: "run the command yourself from the workspace to see where it waits";
    /// The export is not the JSON `opencode export` prints.
    OpencodeExportInvalid { error: String } => "session_log_invalid",
        path: None,
        message: format!("the OpenCode export is not a session ({{\"info\":{{\"id\":…}},\"messages\":[…]}}): {error}"),
        advice: "check that the program is OpenCode and that `opencode export <session>` prints the session";
    /// The export records another session.
    OpencodeExportMismatch { recorded: String, id: String } => "session_log_mismatch",
        path: None,
        message: format!("the export records session {recorded:?}, not {id}"),
        advice: "check the session id (`opencode session list`)";
    /// The export records another model than `--expect-model`.
    OpencodeModelMismatch { id: String, recorded: Option<String>, expected: String } => "session_log_mismatch",
        path: None,
        message: format!("session {id} records model {recorded:?}, not {expected:?}"),
        advice: "check --expect-model, or leave it out";
    /// The packet's export member is not where pillbox packs one.
    OpencodeExportNotWhereExpected { member: String, expected: String } => "session_log_invalid",
        path: Some(member.clone()),
        message: format!("the packet's OpenCode export {member:?} is not {expected}"),
        advice: "unpack without --opencode-import to restore the workspace alone, or repack the session with pillbox";
    /// The session is already in this machine's OpenCode, with other messages.
    OpencodeSessionConflict { id: String } => "opencode_session_conflict",
        path: None,
        message: format!("this machine's OpenCode already has session {id} with messages the checkpoint lacks; `opencode import` only adds messages, so importing would mix them with the checkpoint's"),
        advice: "restore in place with --discard-local to replace this machine's copy with the checkpoint's, import into another OpenCode data folder ($XDG_DATA_HOME), or delete the session here first (`opencode session delete`); unpack without --opencode-import restores the workspace alone";
    /// `restore-check`: the OpenCode session here is not the checkpoint's.
    RestoredOpencodeSessionDiffers { id: String } => "opencode_session_conflict",
        path: None,
        message: format!("this machine's OpenCode has session {id} without the checkpoint's messages"),
        advice: RECOVERY;
    /// `restore-check`: the OpenCode session is not on this machine.
    OpencodeSessionAbsent { id: String } => "rollout_unavailable",
        path: None,
        message: format!("this machine's OpenCode has no session {id} (unpack with --opencode-import imports it)"),
        advice: RECOVERY;
    /// `restore-check`: the checkpoint is not JSON.
    CheckpointNotJson { label: PathBuf, error: String } => "checkpoint_invalid",
        path: shown(label),
        message: format!("not JSON: {error}"),
        advice: PASS_UNPACK_JSON;
    /// `restore-check`: the checkpoint is not an unpack report.
    CheckpointNotUnpackReport { label: PathBuf, schema: String } => "checkpoint_invalid",
        path: shown(label),
        message: format!("schema is {schema}, expected \"pillbox.checkpoint.unpack/1\""),
        advice: PASS_UNPACK_JSON;
    /// `restore-check`: a harness kind this tool does not know.
    CheckpointHarnessUnknown { label: PathBuf, kind: String } => "checkpoint_invalid",
        path: shown(label),
        message: format!("unknown harness kind {kind:?}"),
        advice: RECOVERY;
    /// `restore-check`: the checkpoint carries no harness state.
    CheckpointWithoutHarness {} => "rollout_unavailable",
        path: None,
        message: "the checkpoint carries no harness state".to_owned(),
        advice: RECOVERY;
    /// `restore-check`: the checkpoint records no rollout path.
    CheckpointWithoutRolloutPath {} => "rollout_unavailable",
        path: None,
        message: "the checkpoint records no rollout path".to_owned(),
        advice: RECOVERY;
    /// `restore-check`: the recorded rollout is not a regular file.
    RolloutNotARegularFile { path: PathBuf, raw: String } => "rollout_unavailable",
        path: shown(path),
        message: format!("{raw} is not a regular file"),
        advice: RECOVERY;
    /// `restore-check`: the recorded rollout is not on this machine.
    RolloutNotOnThisMachine { path: PathBuf, raw: String, error: String } => "rollout_unavailable",
        path: shown(path),
        message: format!("{raw} is not on this machine ({error})"),
        advice: RECOVERY;
    /// `restore-check`: the recorded file is not a Codex rollout.
    RolloutNotCodex { path: PathBuf, raw: String } => "rollout_unavailable",
        path: shown(path),
        message: format!("{raw} is not a Codex rollout"),
        advice: RECOVERY;
    /// `restore-check`: the recorded rollout path is relative.
    RolloutPathRelative { path: PathBuf, raw: String } => "invalid_rollout_path",
        path: shown(path),
        message: format!("rollout path {raw:?} is relative; a host resolves nothing against its own working directory"),
        advice: RECOVERY;
    /// `restore-check`: the recorded rollout is not named for the thread.
    RolloutPathMisnamed { path: PathBuf, raw: String, id: String } => "invalid_rollout_path",
        path: shown(path),
        message: format!("{raw} is not named for thread {id}"),
        advice: RECOVERY;
    /// `restore-check`: the restored rollout records another thread.
    RestoredRolloutThreadMismatch { path: PathBuf, recorded: String, id: String } => "rollout_mismatch",
        path: shown(path),
        message: format!("the rollout records thread {recorded:?}, not {id}"),
        advice: RECOVERY;
    /// push, pull: the store answered something the API does not describe.
    RemoteInvalidAnswer { doing: String, detail: String } => "remote_invalid_answer",
        path: None,
        message: format!("{doing}: the store's answer is not what this pillbox expects: {detail}"),
        advice: "check that --remote is the base URL of a pillbox store (e.g. https://pillbox.example.workers.dev), and that it and this pillbox are of the same version";
    /// push: the store expects bodies cut into chunks another way.
    ChunkingMismatch { theirs: String, ours: String } => "chunking_mismatch",
        path: None,
        message: format!("the store cuts and compresses chunks as {theirs}, not as this pillbox does ({ours})"),
        advice: "push with --whole, or use a pillbox that matches the store";
    /// push: the packet file changed after it was verified.
    PacketChanged { path: PathBuf } => "packet_changed",
        path: shown(path),
        message: format!("{} changed while it was being pushed", path.display()),
        advice: "leave the packet file alone until the push ends, then push again";
    /// pull: the store does not have a chunk it listed.
    ChunkNotServed { sha256: String } => "chunk_not_served",
        path: None,
        message: format!("the store did not send chunk {sha256}"),
        advice: "pull again; if it persists, the store is missing data: pull with --whole";
    /// pull, restore, log, push --base: no stored packet's digest starts with the prefix.
    DigestUnknown { prefix: String } => "digest_unknown",
        path: None,
        message: format!("the store holds no packet whose digest starts with {prefix}"),
        advice: "check the prefix against what push, save, refs or log printed (`pillbox checkpoint refs` lists what the store's refs name), and that --remote names the store it was pushed to";
    /// pull, restore, log, push --base: several stored packets' digests start with the prefix.
    DigestAmbiguous { prefix: String, candidates: Vec<String>, more: bool } => "digest_ambiguous",
        path: None,
        message: format!(
            "{prefix} is the start of {} stored packets' digests: {}{}",
            if *more { format!("more than {}", candidates.len()) } else { candidates.len().to_string() },
            candidates.join(", "),
            if *more { ", …" } else { "" }
        ),
        advice: "give more hex digits of the digest you mean (candidates lists them; all 64 are never ambiguous)";
    /// push: parts are still missing after three rounds.
    UploadIncomplete { upload: String } => "upload_incomplete",
        path: None,
        message: format!("the store still lacks parts of upload {upload} after three rounds"),
        advice: "run the push again: it continues the same upload";
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    /// The codes docs/cli.md's "Error codes" table lists, with their exit
    /// codes: the backquoted words of each row's first cell.
    fn documented() -> BTreeMap<String, String> {
        let doc = include_str!("../../docs/cli.md");
        let start = doc
            .find("\n## Error codes")
            .expect("docs/cli.md has Error codes");
        let section = &doc[start + 1..];
        let section = &section[..section[3..].find("\n## ").map_or(section.len(), |i| i + 3)];
        let mut codes = BTreeMap::new();
        for row in section.lines().filter(|l| l.starts_with("| `")) {
            let cells: Vec<&str> = row.split('|').map(str::trim).collect();
            for code in cells[1].split('`').skip(1).step_by(2) {
                codes.insert(code.to_owned(), cells[2].to_owned());
            }
        }
        codes
    }

    #[test]
    fn the_codes_are_the_ones_docs_cli_md_lists() {
        let documented = documented();
        let mut ours: BTreeMap<String, String> = Refused::CODES
            .iter()
            .map(|c| (c.to_string(), "5".to_owned()))
            .collect();
        for (code, exit) in [
            ("usage", "2"),
            ("io", "4"),
            ("remote_unreachable", "4"),
            ("bug", "70"),
        ] {
            ours.insert(code.to_owned(), exit.to_owned());
        }
        assert_eq!(
            ours, documented,
            "docs/cli.md's Error codes and the CLI's codes differ"
        );
    }
}
