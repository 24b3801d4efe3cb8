//! `pillbox`: moves an AI coding agent's session between machines as one
//! deterministic session packet (`pillbox.session-packet/2`, named by the
//! SHA-256 of its `packet.json`; `/1` packets, named by the whole file's,
//! are read too).
//!
//! The binary is thin over `packet-core`, which holds every format rule:
//! this crate walks directories, reads and writes files, stages and renames,
//! finds harness state, and reports each run: a short summary for a person
//! at a terminal, one JSON object for a program (docs/cli.md, `output`).

mod cache;
mod change;
mod chunking;
mod compress;
mod error;
mod harness;
mod output;
mod pack;
mod packet_io;
mod progress;
mod query;
mod record;
mod refused;
mod remote;
mod report;
mod restore;
mod restore_check;
mod save;
mod unpack;
mod walk;

use std::io::{self, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Args, CommandFactory, Parser, Subcommand, ValueEnum};
use packet_core::Digest;
use serde::Serialize;

use error::{CliError, Result, EXIT_OK};
use harness::flags::{self as harness_flags, HarnessArg};
use output::To as JsonTo;
use packet_io::PacketInput;
use progress::Progress;

/// Pack, unpack, verify and inspect session packets.
#[derive(Debug, Parser)]
#[command(
    name = "pillbox",
    version,
    about = "Move an AI coding agent's session between machines as one verified packet",
    long_about = long_about(),
    after_help = "Round trip:\n  pillbox checkpoint pack ./project -o project.tar\n  pillbox checkpoint verify project.tar --digest sha256:…\n  pillbox checkpoint unpack project.tar --digest sha256:… --into ./restored\n\nAfter every turn, a host saves and restores through a packet store:\n  pillbox save . --remote $PILLBOX_REMOTE --ref sessions/demo/latest\n  pillbox restore sessions/demo/latest --remote $PILLBOX_REMOTE --into ./ws"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// Print the JSON object (docs/cli.md) even on a terminal; it is printed whenever the output is not a terminal.
    #[arg(long, global = true)]
    json: bool,
    /// When the summary on a terminal uses colour (NO_COLOR, CLICOLOR and CLICOLOR_FORCE are honoured with auto).
    #[arg(
        long,
        global = true,
        value_enum,
        value_name = "WHEN",
        default_value = "auto"
    )]
    color: output::ColorWhen,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Session packets: pack, unpack, verify, inspect, cat, diff, restore-check, push, pull, refs, log, save, restore.
    #[command(subcommand)]
    Checkpoint(Checkpoint),
    /// Save the workspace to a packet store after a turn: `pillbox checkpoint save`, with the same flags.
    #[command(after_help = SAVE_EXAMPLES)]
    Save(SaveArgs),
    /// Restore a saved session from a packet store: `pillbox checkpoint restore`, with the same flags.
    #[command(after_help = RESTORE_EXAMPLES)]
    Restore(RestoreArgs),
}

/// The long `--help` of `pillbox`, naming every harness.
fn long_about() -> String {
    format!(
        "pillbox moves an AI coding agent's session (its workspace and, optionally, its {} session log) \
between machines as one session packet: a deterministic, content-addressed POSIX ustar file that never \
holds credentials.\n\nOn a terminal every command prints a short summary; with --json, or when its output is not a terminal, \
it prints exactly one JSON object instead (see docs/cli.md). Exit codes: 0 ok, 2 usage, \
3 the packet failed verification, 4 I/O error, 5 input refused.",
        harness_flags::every_product()
    )
}

/// `save`'s examples, for both of its names.
const SAVE_EXAMPLES: &str = "Examples:\n  pillbox save . --remote https://pillbox.example.workers.dev --ref sessions/demo/latest --exclude target\n  pillbox save . --remote $PILLBOX_REMOTE --ref sessions/demo/latest --harness codex --thread <uuid>\n\nOnly files changed since the last save or restore here are read (the workspace record, kept in $XDG_STATE_HOME/pillbox/workspaces). The ref's current packet is the base: bodies and chunks it holds are not sent, and when it is the last save's packet everything new goes in one request. A file that changes while saving is refused (save again).";

/// `restore`'s examples, for both of its names.
const RESTORE_EXAMPLES: &str = "Examples:\n  pillbox restore sessions/demo/latest --remote https://pillbox.example.workers.dev --into ./restored\n  pillbox restore sessions/demo/latest --remote $PILLBOX_REMOTE --into ./ws --codex-home ~/.codex --base old.tar\n\nA host that restores repeatedly needs no --base: the chunk cache keeps what earlier pulls fetched.";

/// The `checkpoint` group.
#[derive(Debug, Subcommand)]
enum Checkpoint {
    /// Pack a workspace (and optionally an agent's session log) into a packet.
    #[command(
        after_help = "Examples:\n  pillbox checkpoint pack . -o /tmp/ws.tar --exclude target --exclude '**/node_modules'\n  pillbox checkpoint pack . -o - --harness codex --thread 0199a213-81c0-7800-8aa1-bbab2a035a53 > ws.tar\n  pillbox checkpoint pack . -o ws.tar --harness claude --session 5f1c7a0e-2b6d-4c3e-9a8f-0123456789ab\n  pillbox checkpoint pack . -o ws.tar --harness opencode --session ses_dceb97773ffeEbFZpPTlgwYItc\n\nCredential files (auth.json, .credentials.json, .netrc, .env, cloud credentials...) are never packed, and a file holding a secret (an API token, a private key...), or git history holding one that no remote has, refuses the pack unless --secrets exclude or --allow-secret; see docs/cli.md."
    )]
    Pack(PackArgs),
    /// Verify a packet, then restore its workspace (and session log) into empty targets.
    #[command(
        after_help = "Examples:\n  pillbox checkpoint unpack ws.tar --digest sha256:<hex> --into ./restored\n  pillbox checkpoint unpack ws.tar --digest sha256:<hex> --into ./restored --codex-home ~/.codex\n  curl -s https://example.invalid/ws.tar | pillbox checkpoint unpack - --digest sha256:<hex> --into ./restored\n\nNothing is written until the whole packet has verified; on any failure the targets are left as they were. The JSON reports secrets and git settings that run programs (see --neutralize-git)."
    )]
    Unpack(UnpackArgs),
    /// Verify a packet completely without writing any file.
    Verify(VerifyArgs),
    /// Show a verified packet's manifest: members, totals, harness, exclusions.
    #[command(visible_alias = "ls")]
    Inspect(InspectArgs),
    /// Write one member's bytes to stdout, once the whole packet has verified.
    Cat(CatArgs),
    /// Compare two packets: members added, removed and changed.
    Diff(DiffArgs),
    /// Check, as a host would before resuming, that a restored session log is usable.
    RestoreCheck(RestoreCheckArgs),
    /// Verify a packet, then upload it to a packet store (and move a ref to it).
    #[command(
        after_help = "Examples:\n  PILLBOX_TOKEN=... pillbox checkpoint push ws.tar --remote https://pillbox.example.workers.dev --ref sessions/demo/latest\n  pillbox checkpoint push ws.tar --remote http://127.0.0.1:8787 --token-file ~/.config/pillbox/token --ref sessions/demo/latest --expect-ref sha256:<hex>\n\nA packet the store already holds is not sent again. A packet larger than the store's single-upload limit goes up in parts; an interrupted upload continues where it stopped on the next push of the same packet."
    )]
    Push(PushArgs),
    /// Download a packet by digest or ref, verifying it as it arrives; write it only once it has verified.
    #[command(
        after_help = "Examples:\n  pillbox checkpoint pull sessions/demo/latest --remote https://pillbox.example.workers.dev -o ws.tar\n  pillbox checkpoint pull sha256:<hex> --remote http://127.0.0.1:8787 -o - | tar -t\n\nNothing is written at FILE unless the whole packet verified (digest and every member)."
    )]
    Pull(PullArgs),
    /// List the refs a packet store holds (all, or those whose names start with PREFIX).
    #[command(
        after_help = "Examples:\n  pillbox checkpoint refs --remote https://pillbox.example.workers.dev\n  pillbox checkpoint refs sessions/demo/ --remote $PILLBOX_REMOTE --json\n\nListing needs a token with the list scope (unless the store lists publicly)."
    )]
    Refs(RefsArgs),
    /// Show the packets a ref has named, newest first, and what changed from each to the next.
    #[command(
        after_help = "Examples:\n  pillbox checkpoint log sessions/demo/latest --remote https://pillbox.example.workers.dev\n  pillbox checkpoint log sessions/demo/latest --remote $PILLBOX_REMOTE --limit 5 --json\n\nThe store keeps each ref's last 100 moves. What changed is computed here from the packets' manifests (packet.json, fetched as pull fetches it: only the chunks neither the newer packet nor the chunk cache holds); no body is read. Reading the history needs a token with the read scope (unless the store reads publicly). Any digest it prints, or its first 8 hex digits or more, names the packet to pull or restore."
    )]
    Log(LogArgs),
    /// Pack a workspace and push it in one step, sending only what the store lacks; no packet file is left behind.
    #[command(after_help = SAVE_EXAMPLES)]
    Save(SaveArgs),
    /// Pull a packet and unpack it in one step: bodies from --base packets and the local cache, the rest fetched; everything verified before anything lands.
    #[command(after_help = RESTORE_EXAMPLES)]
    Restore(RestoreArgs),
}

#[derive(Debug, Args)]
struct RemoteArgs {
    /// The packet store's base URL [default: $PILLBOX_REMOTE].
    #[arg(long, value_name = "URL")]
    remote: Option<String>,
    /// Read the bearer token from this file instead of $PILLBOX_TOKEN.
    #[arg(long, value_name = "FILE")]
    token_file: Option<PathBuf>,
}

impl RemoteArgs {
    fn connect(&self) -> Result<remote::Remote> {
        let url = match &self.remote {
            Some(u) => u.clone(),
            None => std::env::var(remote::REMOTE_ENV).map_err(|_| {
                CliError::Usage(format!(
                    "name the packet store with --remote URL (or ${})",
                    remote::REMOTE_ENV
                ))
            })?,
        };
        remote::Remote::new(&url, remote::Token::load(self.token_file.as_deref())?)
    }
}

#[derive(Debug, Args)]
struct PushArgs {
    /// The packet file, or `-` for stdin.
    packet: PathBuf,
    #[command(flatten)]
    remote: RemoteArgs,
    /// Then move this ref (e.g. `sessions/<name>/latest`) to the packet, with compare-and-swap.
    #[arg(long = "ref", value_name = "NAME")]
    ref_name: Option<String>,
    /// With --ref: the digest the ref must hold now, or `absent`; without it, the value read just before the move.
    #[arg(long, value_name = "DIGEST|absent", requires = "ref_name")]
    expect_ref: Option<String>,
    /// Part size to ask the store for when the packet goes up in parts (bytes; the store's bounds apply).
    #[arg(long, value_name = "BYTES")]
    part_size: Option<u64>,
    /// Attach a label to the packet (e.g. `host=ci-7`). Repeatable.
    #[arg(long, value_name = "LABEL")]
    label: Vec<String>,
    #[command(flatten)]
    delta: DeltaPushArgs,
    #[command(flatten)]
    common: Common,
}

/// How a push sends the packet.
#[derive(Debug, Args)]
struct DeltaPushArgs {
    /// Send the whole packet (one request, or parts) even when the store takes delta pushes.
    #[arg(long)]
    whole: bool,
    /// A stored packet this one builds on (besides the ref's current packet), by digest or its first 8 hex digits or more: bodies and chunks it holds are not sent. Repeatable.
    #[arg(long = "base", value_name = "DIGEST")]
    bases: Vec<String>,
}

impl DeltaPushArgs {
    /// The bases, a prefix resolved by the store.
    fn bases(&self, store: &remote::Remote) -> Result<Vec<Digest>> {
        self.bases
            .iter()
            .map(|s| remote::stored_digest(store, s, "--base"))
            .collect()
    }
}

#[derive(Debug, Args)]
struct RefsArgs {
    /// Only refs whose names start with this (e.g. `sessions/demo/`).
    prefix: Option<String>,
    #[command(flatten)]
    remote: RemoteArgs,
    /// List at most this many refs.
    #[arg(long, value_name = "N", default_value = "1000", value_parser = clap::value_parser!(u32).range(1..))]
    limit: u32,
    #[command(flatten)]
    common: Common,
}

#[derive(Debug, Args)]
struct LogArgs {
    /// The ref (e.g. `sessions/demo/latest`).
    #[arg(value_name = "REF")]
    name: String,
    #[command(flatten)]
    remote: RemoteArgs,
    /// Show at most this many moves, newest first.
    #[arg(long, value_name = "N", default_value = "20", value_parser = clap::value_parser!(u32).range(1..))]
    limit: u32,
    /// The chunk cache folder [default: $XDG_CACHE_HOME/pillbox, else ~/.cache/pillbox].
    #[arg(long, value_name = "DIR", conflicts_with = "no_cache")]
    cache_dir: Option<PathBuf>,
    /// Use no chunk cache: every manifest chunk not in the newer packet's manifest is fetched.
    #[arg(long)]
    no_cache: bool,
    #[command(flatten)]
    common: Common,
}

#[derive(Debug, Args)]
struct PullArgs {
    /// A digest (`sha256:<hex>`), its first 8 hex digits or more (`sha256:1fc1766b`), or a ref name.
    target: String,
    #[command(flatten)]
    remote: RemoteArgs,
    /// Where to write the packet; `-` writes it to stdout once verified (the JSON then goes to stderr).
    #[arg(short, long, value_name = "FILE")]
    output: PathBuf,
    #[command(flatten)]
    sources: PullSourceArgs,
    #[command(flatten)]
    common: Common,
}

/// Where a pull finds bytes before it fetches them.
#[derive(Debug, Args)]
struct PullSourceArgs {
    /// A packet file on this machine to take bodies from (an earlier version of the same session, say). Repeatable; a file that is not a packet is reported and left out.
    #[arg(long = "base", value_name = "FILE")]
    bases: Vec<PathBuf>,
    /// The chunk cache folder [default: $XDG_CACHE_HOME/pillbox, else ~/.cache/pillbox; bounded by $PILLBOX_CACHE_MAX_BYTES, default 4 GiB].
    #[arg(long, value_name = "DIR", conflicts_with = "no_cache")]
    cache_dir: Option<PathBuf>,
    /// Use no chunk cache: fetched chunks go straight where they belong and are not kept.
    #[arg(long)]
    no_cache: bool,
    /// Download the whole packet even when the store serves chunks.
    #[arg(long)]
    whole: bool,
}

impl PullSourceArgs {
    fn sources(&self) -> Result<remote::PullSources> {
        let cache = if self.no_cache {
            remote::CacheChoice::Off
        } else {
            remote::CacheChoice::At {
                dir: match &self.cache_dir {
                    Some(d) => d.clone(),
                    None => cache::default_dir()?,
                },
                max_bytes: cache::max_bytes_from_env()?,
            }
        };
        Ok(remote::PullSources {
            bases: self.bases.clone(),
            cache,
            whole: self.whole,
        })
    }
}

#[derive(Debug, Args)]
struct PackArgs {
    /// The workspace directory to pack.
    #[arg(default_value = ".")]
    workspace: PathBuf,
    /// Where to write the packet; `-` writes it to stdout (the JSON report then goes to stderr or --report).
    #[arg(short, long, value_name = "FILE")]
    output: PathBuf,
    #[command(flatten)]
    flags: PackFlags,
    /// Write the JSON report to this file instead of stdout (stderr when the packet goes to stdout).
    #[arg(long, value_name = "FILE")]
    report: Option<PathBuf>,
    #[command(flatten)]
    common: Common,
}

/// What to pack besides the workspace, and what to leave out (pack, save).
#[derive(Debug, Args)]
struct PackFlags {
    // `--harness`, the session id, and each harness's home.
    #[command(flatten)]
    harness: harness_flags::PackFlags,
    /// Refuse unless the session log records this model.
    #[arg(long, value_name = "MODEL")]
    expect_model: Option<String>,
    /// Leave out paths matching this glob, relative to the workspace (`*`, `?`, `**`). Repeatable. Credential files are always left out.
    #[arg(long, value_name = "GLOB")]
    exclude: Vec<String>,
    /// Skip symlinks that point outside the workspace instead of refusing to pack.
    #[arg(long)]
    skip_escaping_symlinks: bool,
    /// What a secret found in a file does: `refuse` the pack (naming each file, line and rule), or `exclude` the file (recorded in the manifest). In git history no remote has: refuse, or leave out its loose objects (else the repository's git directory).
    #[arg(long, value_enum, value_name = "ACTION", default_value = "refuse")]
    secrets: pack::secrets::SecretsMode,
    /// Pack files matching this glob even if they hold secrets (known test fixtures), relative to the workspace. Repeatable.
    #[arg(long, value_name = "GLOB")]
    allow_secret: Vec<String>,
}

#[derive(Debug, Args)]
struct SaveArgs {
    /// The workspace directory to save.
    #[arg(default_value = ".")]
    workspace: PathBuf,
    #[command(flatten)]
    remote: RemoteArgs,
    /// Move this ref (e.g. `sessions/<name>/latest`) to the packet, with compare-and-swap; its current packet is the push's base.
    #[arg(long = "ref", value_name = "NAME")]
    ref_name: String,
    /// The digest the ref must hold now, or `absent`; without it, the value read just before the move.
    #[arg(long, value_name = "DIGEST|absent")]
    expect_ref: Option<String>,
    /// Also write the packet to this file (by default no packet file is written).
    #[arg(short, long, value_name = "FILE")]
    output: Option<PathBuf>,
    #[command(flatten)]
    flags: PackFlags,
    /// Attach a label to the packet (e.g. `host=ci-7`). Repeatable.
    #[arg(long, value_name = "LABEL")]
    label: Vec<String>,
    /// Part size to ask the store for when the packet goes up in parts.
    #[arg(long, value_name = "BYTES")]
    part_size: Option<u64>,
    #[command(flatten)]
    delta: DeltaPushArgs,
    #[command(flatten)]
    common: Common,
}

#[derive(Debug, Args)]
struct RestoreArgs {
    /// A digest (`sha256:<hex>`), its first 8 hex digits or more (`sha256:1fc1766b`), or a ref name.
    target: String,
    #[command(flatten)]
    remote: RemoteArgs,
    /// The workspace target: an empty or absent directory, or one holding the checkpoint its workspace record names (saved or restored there), which is restored over in place.
    #[arg(long, value_name = "DIR")]
    into: PathBuf,
    // The folder each harness restored as files goes under.
    #[command(flatten)]
    homes: harness_flags::RestoreHomes,
    // Each harness restored by its own program.
    #[command(flatten)]
    imports: harness_flags::RestoreImports,
    /// Write restored git repositories without the settings that run programs (core.fsmonitor, filter.*, core.sshCommand...) and their hooks without the exec bit; the JSON says what changed.
    #[arg(long)]
    neutralize_git: bool,
    /// Restoring over the checkpoint the folder holds: overwrite (or remove) what changed there since it was saved or restored, instead of refusing with local_changes.
    #[arg(long)]
    discard_local: bool,
    #[command(flatten)]
    sources: PullSourceArgs,
    #[command(flatten)]
    common: Common,
}

#[derive(Debug, Args)]
#[command(group = clap::ArgGroup::new("trust").required(true).args(["digest", "trust_unverified"]))]
struct UnpackArgs {
    /// The packet file, or `-` for stdin (spooled to a temporary file, then read twice).
    packet: PathBuf,
    /// The workspace target: an empty or absent directory.
    #[arg(long, value_name = "DIR")]
    into: PathBuf,
    /// The digest the packet must have (`sha256:<64 hex>`: the SHA-256 of its packet.json, or of the whole file for a /1 packet), checked before anything is written.
    #[arg(long, value_name = "DIGEST")]
    digest: Option<String>,
    /// Unpack without an expected digest: the packet is still verified against its own manifest, but nothing proves it is the packet you meant.
    #[arg(long)]
    trust_unverified: bool,
    // The folder each harness restored as files goes under.
    #[command(flatten)]
    homes: harness_flags::RestoreHomes,
    /// Write restored git repositories without the settings that run programs (core.fsmonitor, filter.*, core.sshCommand...) and their hooks without the exec bit; the JSON says what changed.
    #[arg(long)]
    neutralize_git: bool,
    // Each harness restored by its own program.
    #[command(flatten)]
    imports: harness_flags::RestoreImports,
    #[command(flatten)]
    common: Common,
}

#[derive(Debug, Args)]
struct VerifyArgs {
    /// The packet file, or `-` for stdin.
    packet: PathBuf,
    /// The digest the packet must have.
    #[arg(long, value_name = "DIGEST")]
    digest: Option<String>,
    #[command(flatten)]
    common: Common,
}

#[derive(Debug, Clone, Copy, ValueEnum, PartialEq, Eq)]
enum Format {
    /// One JSON object, on a terminal too (as --json).
    Json,
    /// A plain listing, also when the output is not a terminal.
    Text,
}

#[derive(Debug, Args)]
struct InspectArgs {
    /// The packet file, or `-` for stdin.
    packet: PathBuf,
    /// The digest the packet must have.
    #[arg(long, value_name = "DIGEST")]
    digest: Option<String>,
    /// Output format [default: a summary on a terminal, else json].
    #[arg(long, value_enum)]
    format: Option<Format>,
    #[command(flatten)]
    common: Common,
}

#[derive(Debug, Args)]
struct CatArgs {
    /// The packet file, or `-` for stdin.
    packet: PathBuf,
    /// The member path, e.g. `workspace/src/main.rs`.
    member: String,
    /// The digest the packet must have.
    #[arg(long, value_name = "DIGEST")]
    digest: Option<String>,
    /// Write the JSON report to this file instead of stderr.
    #[arg(long, value_name = "FILE")]
    report: Option<PathBuf>,
    #[command(flatten)]
    common: Common,
}

#[derive(Debug, Args)]
struct DiffArgs {
    /// The first (older) packet.
    a: PathBuf,
    /// The second (newer) packet.
    b: PathBuf,
    /// Exit with 1 when the packets differ, 0 when they are identical (as `git diff --exit-code`).
    #[arg(long)]
    exit_code: bool,
    /// Output format [default: a summary on a terminal, else json].
    #[arg(long, value_enum)]
    format: Option<Format>,
    #[command(flatten)]
    common: Common,
}

#[derive(Debug, Args)]
struct RestoreCheckArgs {
    /// The JSON object `unpack` printed (a file, or `-` for stdin).
    #[arg(long, value_name = "FILE", conflicts_with_all = ["harness", "thread", "rollout_path"])]
    checkpoint: Option<PathBuf>,
    /// The harness, when giving the fields one by one.
    #[arg(long, value_enum, default_value = harness_flags::default_harness())]
    harness: HarnessArg,
    // The thread or session id; its help names each harness's.
    #[arg(long, value_name = "ID", required_unless_present = "checkpoint", help = harness_flags::check_id_help())]
    thread: Option<String>,
    // The session log's path; its help names the harnesses without one.
    #[arg(long, value_name = "PATH", help = harness_flags::rollout_path_help())]
    rollout_path: Option<String>,
    // The program restore-check asks, for each harness asked about its sessions.
    #[command(flatten)]
    programs: harness_flags::CheckFlags,
    #[command(flatten)]
    common: Common,
}

#[derive(Debug, Args)]
struct Common {
    /// No progress bar on stderr.
    #[arg(short, long)]
    quiet: bool,
}

fn main() -> ExitCode {
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let command = output::command_path(&Cli::command(), &args);
    let cli = match Cli::try_parse_from(&args) {
        Ok(cli) => cli,
        Err(e) => {
            use clap::error::ErrorKind;
            output::init(output::Choice::from_args(&args));
            if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) {
                let _ = e.print();
                return ExitCode::from(EXIT_OK as u8);
            }
            let rendered = e.render().to_string();
            let first = rendered.split("\n\n").next().unwrap_or("").trim();
            let message = first
                .strip_prefix("error: ")
                .unwrap_or(first)
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" ");
            let message = if e.kind() == ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand {
                format!("a command is required: `{command} --help` lists them")
            } else {
                message
            };
            output::emit_usage(&e, message, &command);
            return ExitCode::from(error::EXIT_USAGE as u8);
        }
    };
    output::init(output::Choice {
        json: cli.json,
        color: cli.color,
    });
    let (result, json_to, report_file) = run(cli);
    match result {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            output::emit_error(&e, json_to, report_file.as_deref(), &command);
            ExitCode::from(e.exit_code() as u8)
        }
    }
}

/// Runs a command; on success it has printed its report and returns the
/// exit code (0, or 1 for `diff --exit-code` of packets that differ).
/// Returns where an error's report goes.
fn run(cli: Cli) -> (Result<u8>, JsonTo, Option<PathBuf>) {
    let cmd = match cli.command {
        Command::Checkpoint(cmd) => cmd,
        Command::Save(a) => Checkpoint::Save(a),
        Command::Restore(a) => Checkpoint::Restore(a),
    };
    match cmd {
        Checkpoint::Pack(a) => {
            let to = if a.output == Path::new("-") {
                JsonTo::Stderr
            } else {
                JsonTo::Stdout
            };
            let report = a.report.clone();
            (run_pack(a, to).map(done), to, report)
        }
        Checkpoint::Cat(a) => {
            let report = a.report.clone();
            (run_cat(a).map(done), JsonTo::Stderr, report)
        }
        Checkpoint::Unpack(a) => (run_unpack(a).map(done), JsonTo::Stdout, None),
        Checkpoint::Verify(a) => (run_verify(a).map(done), JsonTo::Stdout, None),
        Checkpoint::Inspect(a) => (run_inspect(a).map(done), JsonTo::Stdout, None),
        Checkpoint::Diff(a) => (run_diff(a), JsonTo::Stdout, None),
        Checkpoint::RestoreCheck(a) => (run_restore_check(a).map(done), JsonTo::Stdout, None),
        Checkpoint::Push(a) => (run_push(a).map(done), JsonTo::Stdout, None),
        Checkpoint::Refs(a) => (run_refs(a).map(done), JsonTo::Stdout, None),
        Checkpoint::Log(a) => (run_log(a).map(done), JsonTo::Stdout, None),
        Checkpoint::Save(a) => (run_save(a).map(done), JsonTo::Stdout, None),
        Checkpoint::Restore(a) => (run_restore(a).map(done), JsonTo::Stdout, None),
        Checkpoint::Pull(a) => {
            let to = if a.output == Path::new("-") {
                JsonTo::Stderr
            } else {
                JsonTo::Stdout
            };
            (run_pull(a, to).map(done), to, None)
        }
    }
}

/// A command that succeeded exits 0.
fn done((): ()) -> u8 {
    EXIT_OK as u8
}

/// Prints a command's report: a summary on a terminal, else its JSON
/// object (to `file` with `--report`).
fn emit<T: Serialize>(value: &T, to: JsonTo, file: Option<&Path>) {
    output::emit(value, to, file);
}

/// `--digest`: a whole digest. A prefix is refused: the digest is what
/// proves the file is the packet meant, and a prefix of a few hex digits
/// proves little (anyone can make a packet whose digest starts with 32 or
/// 48 chosen bits).
fn parse_digest(d: Option<&str>) -> Result<Option<Digest>> {
    d.map(|s| {
        s.parse::<Digest>().map_err(|e| {
            if pillbox_wire::DigestPrefix::parse(s).is_ok() {
                CliError::Usage(format!(
                    "--digest {s:?} is the start of a digest: --digest checks the file against the whole digest (sha256: and 64 hex digits), which a prefix would not prove; push, save, refs --json and log --json print it whole"
                ))
            } else {
                CliError::Usage(format!("--digest {s:?}: {}", e.message()))
            }
        })
    })
    .transpose()
}

impl PackFlags {
    /// The pack request for `workspace` into `output`.
    fn request(self, workspace: PathBuf, output: PathBuf) -> Result<pack::PackRequest> {
        let harness = self.harness.chosen()?.map(|chosen| pack::HarnessRequest {
            kind: chosen.kind,
            home: chosen.home,
            id: chosen.id,
            expect_model: self.expect_model.clone(),
        });
        Ok(pack::PackRequest {
            workspace,
            output,
            harness,
            walk: walk::WalkOptions {
                excludes: self.exclude,
                skip_escaping_symlinks: self.skip_escaping_symlinks,
            },
            secrets: pack::secrets::SecretPolicy {
                mode: self.secrets,
                allow: self.allow_secret,
            },
        })
    }
}

fn run_pack(a: PackArgs, to: JsonTo) -> Result<()> {
    let request = a.flags.request(a.workspace, a.output)?;
    if request.output == Path::new("-") && io::stdout().is_terminal() {
        return Err(CliError::Usage(
            "refusing to write a packet to a terminal: redirect stdout or use -o FILE".into(),
        ));
    }
    let report = pack::pack(&request, &Progress::new(a.common.quiet))?;
    emit(&report, to, a.report.as_deref());
    Ok(())
}

fn parse_expect_ref(s: Option<&str>) -> Result<Option<remote::ExpectRef>> {
    s.map(|s| {
        s.parse::<remote::ExpectRef>()
            .map_err(|e| CliError::Usage(format!("--expect-ref {e}")))
    })
    .transpose()
}

fn run_save(a: SaveArgs) -> Result<()> {
    let store = a.remote.connect()?;
    let pack_request = a.flags.request(a.workspace, PathBuf::from("-"))?;
    let push_request = remote::PushRequest {
        packet: PathBuf::from("-"),
        ref_name: Some(a.ref_name),
        expect_ref: parse_expect_ref(a.expect_ref.as_deref())?,
        part_size: a.part_size,
        labels: a.label,
        state_dir: remote::default_state_dir()?,
        whole: a.delta.whole,
        bases: a.delta.bases(&store)?,
    };
    let report = save::save(
        &store,
        pack_request,
        a.output,
        push_request,
        &Progress::new(a.common.quiet),
    )?;
    emit(&report, JsonTo::Stdout, None);
    Ok(())
}

fn run_restore(a: RestoreArgs) -> Result<()> {
    let target = remote::PullTarget::parse(&a.target)?;
    let store = a.remote.connect()?;
    let sources = a.sources.sources()?;
    let request = unpack::UnpackRequest {
        into: a.into,
        expected: None,
        harness: harness_flags::destinations(&a.homes, &a.imports),
        neutralize_git: a.neutralize_git,
    };
    let report = restore::restore(
        &store,
        &target,
        &sources,
        request,
        a.discard_local,
        &Progress::new(a.common.quiet),
    )?;
    emit(&report, JsonTo::Stdout, None);
    Ok(())
}

fn run_unpack(a: UnpackArgs) -> Result<()> {
    let expected = parse_digest(a.digest.as_deref())?;
    // Before the packet is read (standard input is spooled first).
    unpack::check_target(&a.into)?;
    let source = PacketInput::open(&a.packet)?;
    let request = unpack::UnpackRequest {
        into: a.into,
        expected,
        harness: harness_flags::destinations(&a.homes, &a.imports),
        neutralize_git: a.neutralize_git,
    };
    let report = unpack::unpack(&source, &request, &Progress::new(a.common.quiet))?;
    emit(&report, JsonTo::Stdout, None);
    Ok(())
}

fn run_verify(a: VerifyArgs) -> Result<()> {
    let expected = parse_digest(a.digest.as_deref())?;
    let source = PacketInput::open(&a.packet)?;
    let report = query::verify(&source, expected, &Progress::new(a.common.quiet))?;
    emit(&report, JsonTo::Stdout, None);
    Ok(())
}

fn run_inspect(a: InspectArgs) -> Result<()> {
    let expected = parse_digest(a.digest.as_deref())?;
    let source = PacketInput::open(&a.packet)?;
    let report = query::inspect(&source, expected, &Progress::new(a.common.quiet))?;
    match a.format {
        None => emit(&report, JsonTo::Stdout, None),
        Some(Format::Json) => output::emit_json(&report, JsonTo::Stdout),
        Some(Format::Text) => print_text(&query::inspect_text(&report))?,
    }
    Ok(())
}

fn print_text(text: &str) -> Result<()> {
    let mut out = io::stdout().lock();
    out.write_all(text.as_bytes())
        .and_then(|()| out.flush())
        .map_err(|e| CliError::io("write", "standard output", e))
}

fn run_cat(a: CatArgs) -> Result<()> {
    let expected = parse_digest(a.digest.as_deref())?;
    let source = PacketInput::open(&a.packet)?;
    let mut out = io::stdout().lock();
    let report = query::cat(
        &source,
        &a.member,
        expected,
        &mut out,
        &Progress::new(a.common.quiet),
    )?;
    emit(&report, JsonTo::Stderr, a.report.as_deref());
    Ok(())
}

fn run_diff(a: DiffArgs) -> Result<u8> {
    if a.a == Path::new("-") && a.b == Path::new("-") {
        return Err(CliError::Usage(
            "only one of the two packets can come from stdin".into(),
        ));
    }
    let first = PacketInput::open(&a.a)?;
    let second = PacketInput::open(&a.b)?;
    let report = query::diff(&first, &second, &Progress::new(a.common.quiet))?;
    match a.format {
        None => emit(&report, JsonTo::Stdout, None),
        Some(Format::Json) => output::emit_json(&report, JsonTo::Stdout),
        Some(Format::Text) => print_text(&query::diff_text(&report))?,
    }
    Ok(if a.exit_code && !report.identical {
        1
    } else {
        EXIT_OK as u8
    })
}

fn run_restore_check(a: RestoreCheckArgs) -> Result<()> {
    let mut request = match &a.checkpoint {
        Some(file) => {
            let text = if file == Path::new("-") {
                io::read_to_string(io::stdin())
                    .map_err(|e| CliError::io("read", "standard input", e))?
            } else {
                std::fs::read_to_string(file).map_err(|e| CliError::io("read", file, e))?
            };
            restore_check::RestoreCheckRequest::from_unpack_json(&text, file)?
        }
        None => restore_check::RestoreCheckRequest {
            kind: a.harness.kind(),
            thread_id: harness_flags::checked_id(
                a.harness.kind(),
                a.thread.clone().unwrap_or_default(),
                "--thread",
            )?,
            rollout_path: a.rollout_path.clone(),
            recorded: None,
            program: None,
        },
    };
    request.program = a.programs.program(request.kind);
    let report = restore_check::restore_check(&request)?;
    emit(&report, JsonTo::Stdout, None);
    Ok(())
}

fn run_push(a: PushArgs) -> Result<()> {
    let expect_ref = parse_expect_ref(a.expect_ref.as_deref())?;
    let store = a.remote.connect()?;
    let request = remote::PushRequest {
        packet: a.packet,
        ref_name: a.ref_name,
        expect_ref,
        part_size: a.part_size,
        labels: a.label,
        state_dir: remote::default_state_dir()?,
        whole: a.delta.whole,
        bases: a.delta.bases(&store)?,
    };
    let report = remote::push(&store, &request, &Progress::new(a.common.quiet))?;
    emit(&report, JsonTo::Stdout, None);
    Ok(())
}

fn run_refs(a: RefsArgs) -> Result<()> {
    let store = a.remote.connect()?;
    let report = remote::list_refs(&store, a.prefix.as_deref().unwrap_or(""), a.limit as usize)?;
    emit(&report, JsonTo::Stdout, None);
    Ok(())
}

fn run_log(a: LogArgs) -> Result<()> {
    if !matches!(
        remote::PullTarget::parse(&a.name)?,
        remote::PullTarget::Ref(_)
    ) {
        return Err(CliError::Usage(format!(
            "{:?} is a digest: log shows the history of a ref (e.g. sessions/demo/latest); pull or restore a packet by its digest",
            a.name
        )));
    }
    let store = a.remote.connect()?;
    let cache = if a.no_cache {
        None
    } else {
        let dir = match a.cache_dir {
            Some(d) => d,
            None => cache::default_dir()?,
        };
        Some((
            cache::Cache::open(&dir, cache::max_bytes_from_env()?)?,
            Some(dir),
        ))
    };
    let report = remote::log(
        &store,
        remote::LogRequest {
            name: a.name,
            limit: a.limit as usize,
            cache,
        },
    )?;
    emit(&report, JsonTo::Stdout, None);
    Ok(())
}

fn run_pull(a: PullArgs, to: JsonTo) -> Result<()> {
    let target = remote::PullTarget::parse(&a.target)?;
    if a.output == Path::new("-") && io::stdout().is_terminal() {
        return Err(CliError::Usage(
            "refusing to write a packet to a terminal: redirect stdout or use -o FILE".into(),
        ));
    }
    let store = a.remote.connect()?;
    let sources = a.sources.sources()?;
    let report = remote::pull(
        &store,
        &target,
        &a.output,
        &sources,
        &Progress::new(a.common.quiet),
    )?;
    emit(&report, to, None);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// clap's own checks of the command line: no flag declared twice (the
    /// adapters' flags meet each other's and the commands' here), and
    /// every argument a flag refers to exists.
    #[test]
    fn the_command_line_is_well_formed() {
        Cli::command().debug_assert();
    }
}
