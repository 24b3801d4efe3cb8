//! The harness flags of the command line, made from each adapter's
//! [`CommandLine`]: the flag that names its session, where its state is (a
//! folder found through a flag, an environment variable and a folder under
//! `$HOME`, or a program to run), how unpack and restore put the state back,
//! and the help of each. The groups here declare those flags to clap in the
//! adapters' order and resolve what was given; the commands flatten them and
//! never name a harness's flag themselves.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use clap::builder::{EnumValueParser, PossibleValue};
use clap::{value_parser, Arg, ArgAction, ArgMatches, Args, Command, FromArgMatches, ValueEnum};
use packet_core::HarnessKind;

use super::{adapter, invalid_id, Adapter, Destination, Destinations, Importer, ADAPTERS};
use crate::error::{CliError, Result};

/// How one harness appears on the command line.
pub struct CommandLine {
    /// What the list of `--harness` values says of it.
    pub about: &'static str,
    /// Its product's name, for help texts (`Claude Code`).
    pub product: &'static str,
    /// The flag pack and save take its session id from.
    pub id: IdFlag,
    /// Where pack and save find its state.
    pub pack: Home,
    /// How unpack and restore put its state back.
    pub restore: Restore,
    /// The program restore-check asks about a restored session, for a
    /// harness that is asked rather than read.
    pub check: Option<ProgramFlag>,
}

/// The flag that names the session to carry.
pub struct IdFlag {
    /// `thread` or `session` (harnesses may share one).
    pub long: &'static str,
    /// Its value's name in the help (`UUID`).
    pub value_name: &'static str,
    /// Its value in the message that asks for it (`<uuid>`).
    pub placeholder: &'static str,
    /// What the flag names for this harness, for the help.
    pub help: &'static str,
}

/// A flag whose value is a path.
pub struct PathFlag {
    /// Its name, without `--`.
    pub long: &'static str,
    /// Its value's name in the help (`DIR`, `FILE`).
    pub value_name: &'static str,
    /// Its help, without the default.
    pub help: &'static str,
}

/// A flag given or not.
pub struct Switch {
    /// Its name, without `--`.
    pub long: &'static str,
    /// Its help.
    pub help: &'static str,
}

/// A program: the flag's value, else `default` on `PATH`.
pub struct ProgramFlag {
    /// The flag.
    pub flag: PathFlag,
    /// The program run without it.
    pub default: &'static str,
}

/// Where a harness keeps its state, as pack looks for it.
pub enum Home {
    /// A folder: the flag, else `$env`, else `$HOME/<default_dir>`.
    Dir {
        /// The flag.
        flag: PathFlag,
        /// The environment variable the harness itself reads.
        env: &'static str,
        /// The folder under `$HOME` without either.
        default_dir: &'static str,
    },
    /// A program that keeps the state itself and is asked for it.
    Program(ProgramFlag),
}

/// How unpack and restore put a harness's state back.
pub enum Restore {
    /// As files under the folder the flag names; not restored without it.
    Under(PathFlag),
    /// Handed to the harness's program once the workspace is in place,
    /// when `switch` is given; not restored without it.
    Import {
        /// The flag that asks for the import.
        switch: Switch,
        /// The program that imports.
        program: ProgramFlag,
        /// What the import does.
        importer: &'static dyn Importer,
    },
}

impl PathFlag {
    fn arg(&self, help: String) -> Arg {
        Arg::new(self.long)
            .long(self.long)
            .value_name(self.value_name)
            .value_parser(value_parser!(PathBuf))
            .action(ArgAction::Set)
            .help(help)
    }
}

impl ProgramFlag {
    fn arg(&self) -> Arg {
        self.flag.arg(format!(
            "{} [default: {} on PATH]",
            self.flag.help, self.default
        ))
    }

    /// The program named, else the default.
    fn resolve(&self, given: Option<&Path>) -> PathBuf {
        given.map_or_else(|| PathBuf::from(self.default), Path::to_path_buf)
    }
}

impl Home {
    fn flag(&self) -> &PathFlag {
        match self {
            Home::Dir { flag, .. } | Home::Program(ProgramFlag { flag, .. }) => flag,
        }
    }

    fn arg(&self) -> Arg {
        match self {
            Home::Dir {
                flag,
                env,
                default_dir,
            } => flag.arg(format!(
                "{} [default: ${env}, else $HOME/{default_dir}]",
                flag.help
            )),
            Home::Program(program) => program.arg(),
        }
    }

    /// The home: the flag, then the environment variable, then
    /// `$HOME/<default_dir>`; for a program, the flag or the default.
    fn resolve(&self, given: Option<&Path>) -> Result<PathBuf> {
        let (env, default_dir) = match self {
            Home::Program(program) => return Ok(program.resolve(given)),
            Home::Dir {
                env, default_dir, ..
            } => (env, default_dir),
        };
        if let Some(p) = given {
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
}

/// A harness as `--harness` names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HarnessArg(HarnessKind);

impl HarnessArg {
    /// The harness.
    pub fn kind(self) -> HarnessKind {
        self.0
    }

    /// Its adapter.
    pub fn adapter(self) -> &'static dyn Adapter {
        adapter(self.0)
    }
}

impl ValueEnum for HarnessArg {
    fn value_variants<'a>() -> &'a [Self] {
        static ALL: OnceLock<Vec<HarnessArg>> = OnceLock::new();
        ALL.get_or_init(|| ADAPTERS.iter().map(|a| HarnessArg(a.kind())).collect())
    }

    fn to_possible_value(&self) -> Option<PossibleValue> {
        Some(PossibleValue::new(self.0.as_str()).help(self.adapter().command_line().about))
    }
}

/// The harness restore-check assumes when none is named: the first
/// adapter's (Codex, the one harness there was at first).
pub fn default_harness() -> &'static str {
    ADAPTERS[0].kind().as_str()
}

/// The values of the harness flags a command was given, by flag.
#[derive(Debug, Default)]
struct Given {
    paths: Vec<(&'static str, PathBuf)>,
    texts: Vec<(&'static str, String)>,
    switches: Vec<&'static str>,
}

impl Given {
    fn path(&self, long: &str) -> Option<&Path> {
        self.paths
            .iter()
            .find(|(l, _)| *l == long)
            .map(|(_, p)| p.as_path())
    }

    fn text(&self, long: &str) -> Option<&str> {
        self.texts
            .iter()
            .find(|(l, _)| *l == long)
            .map(|(_, t)| t.as_str())
    }

    fn switched(&self, long: &str) -> bool {
        self.switches.contains(&long)
    }

    fn read_paths(&mut self, m: &ArgMatches, flags: &[&'static str]) {
        for &long in flags {
            if let Some(p) = m.get_one::<PathBuf>(long) {
                self.paths.push((long, p.clone()));
            }
        }
    }
}

/// The flags pack takes each harness's home from, in the adapters' order.
fn pack_home_flags() -> Vec<&'static PathFlag> {
    ADAPTERS
        .iter()
        .map(|a| a.command_line().pack.flag())
        .collect()
}

/// The session id flags, each once, in the adapters' order.
fn id_flags() -> Vec<&'static str> {
    let mut out: Vec<&'static str> = Vec::new();
    for a in ADAPTERS {
        let long = a.command_line().id.long;
        if !out.contains(&long) {
            out.push(long);
        }
    }
    out
}

/// The adapters whose session an id flag names.
fn named_by(long: &str) -> Vec<&'static dyn Adapter> {
    ADAPTERS
        .iter()
        .copied()
        .filter(|a| a.command_line().id.long == long)
        .collect()
}

/// `a`, `a or b`, `a, b or c`.
fn join(items: &[String], last: &str) -> String {
    match items {
        [] => String::new(),
        [one] => one.clone(),
        [init @ .., tail] => format!("{} {last} {tail}", init.join(", ")),
    }
}

fn names(adapters: &[&'static dyn Adapter]) -> Vec<String> {
    adapters
        .iter()
        .map(|a| a.kind().as_str().to_owned())
        .collect()
}

fn products(adapters: &[&'static dyn Adapter]) -> Vec<String> {
    adapters
        .iter()
        .map(|a| a.command_line().product.to_owned())
        .collect()
}

/// Every harness's product name: `Codex, Claude Code or OpenCode`.
pub fn every_product() -> String {
    join(&products(ADAPTERS), "or")
}

/// `--harness`'s help: each harness with the id flag it needs.
fn harness_help() -> String {
    let groups: Vec<String> = id_flags()
        .into_iter()
        .map(|long| {
            let by = named_by(long);
            let quoted: Vec<String> = names(&by).iter().map(|n| format!("`{n}`")).collect();
            let verb = if by.len() == 1 { "needs" } else { "need" };
            format!("{} ({verb} --{long})", join(&quoted, "or"))
        })
        .collect();
    format!("Also carry an agent's session log: {}", groups.join(", "))
}

/// An id flag's help: what it names for each harness that takes it.
fn id_arg(long: &'static str) -> Arg {
    let by = named_by(long);
    let helps: Vec<&str> = by.iter().map(|a| a.command_line().id.help).collect();
    let value_name = match &by[..] {
        [one] => one.command_line().id.value_name,
        _ => "ID",
    };
    Arg::new(long)
        .long(long)
        .value_name(value_name)
        .value_parser(value_parser!(String))
        .action(ArgAction::Set)
        .help(helps.join(", or "))
}

/// restore-check's `--thread` help: `The thread (Codex) or session
/// (Claude Code, OpenCode) id`.
pub fn check_id_help() -> String {
    let parts: Vec<String> = id_flags()
        .into_iter()
        .map(|long| format!("{long} ({})", products(&named_by(long)).join(", ")))
        .collect();
    format!("The {} id", join(&parts, "or"))
}

/// restore-check's `--rollout-path` help: not for a harness whose
/// sessions are imported rather than restored as files.
pub fn rollout_path_help() -> String {
    let imported: Vec<&'static dyn Adapter> = ADAPTERS
        .iter()
        .copied()
        .filter(|a| matches!(a.command_line().restore, Restore::Import { .. }))
        .collect();
    let base = "The session log's path as the checkpoint records it (must be absolute";
    match imported.len() {
        0 => format!("{base})"),
        _ => format!("{base}; not for {})", join(&products(&imported), "or")),
    }
}

/// A thread or session id given on the command line: one of the harness's
/// shape, or a usage error that names `flag` and shows the shape.
pub fn checked_id(kind: HarnessKind, id: String, flag: &str) -> Result<String> {
    if kind.accepts_session_id(&id) {
        return Ok(id);
    }
    let (_, message, _) = invalid_id(kind, id).describe();
    Err(CliError::Usage(format!("{flag}: {message}")))
}

/// `--harness`, the session id and each harness's home (pack, save).
#[derive(Debug)]
pub struct PackFlags {
    harness: Option<HarnessArg>,
    given: Given,
}

/// The harness pack carries: its kind, its home and the session id.
pub struct Chosen {
    /// Which harness.
    pub kind: HarnessKind,
    /// Its home, or the program to run.
    pub home: PathBuf,
    /// The session id, of the harness's shape.
    pub id: String,
}

impl PackFlags {
    /// The harness to carry (none without `--harness`): an id flag that is
    /// another harness's, a missing id, a home that cannot be found and an
    /// id of another shape are usage errors, in that order.
    pub fn chosen(&self) -> Result<Option<Chosen>> {
        let Some(harness) = self.harness else {
            if !self.given.texts.is_empty() {
                let flags: Vec<String> = id_flags().iter().map(|l| format!("--{l}")).collect();
                return Err(CliError::Usage(format!(
                    "{} need --harness {}",
                    join(&flags, "and"),
                    join(&names(ADAPTERS), "or")
                )));
            }
            return Ok(None);
        };
        let adapter = harness.adapter();
        let line = adapter.command_line();
        if let Some((stray, _)) = self.given.texts.iter().find(|(l, _)| *l != line.id.long) {
            return Err(CliError::Usage(format!(
                "--{stray} belongs to --harness {}",
                join(&names(&named_by(stray)), "or")
            )));
        }
        let kind = adapter.kind();
        let id = self.given.text(line.id.long).ok_or_else(|| {
            CliError::Usage(format!(
                "--harness {} needs --{} {}",
                kind.as_str(),
                line.id.long,
                line.id.placeholder
            ))
        })?;
        let home = line.pack.resolve(self.given.path(line.pack.flag().long))?;
        Ok(Some(Chosen {
            kind,
            home,
            id: checked_id(kind, id.to_owned(), &format!("--{}", line.id.long))?,
        }))
    }
}

impl PackFlags {
    fn declare(mut cmd: Command) -> Command {
        cmd = cmd.arg(
            Arg::new("harness")
                .long("harness")
                .value_name("HARNESS")
                .value_parser(EnumValueParser::<HarnessArg>::new())
                .action(ArgAction::Set)
                .help(harness_help()),
        );
        for long in id_flags() {
            cmd = cmd.arg(id_arg(long));
        }
        for a in ADAPTERS {
            cmd = cmd.arg(a.command_line().pack.arg());
        }
        cmd
    }

    fn read(m: &ArgMatches) -> PackFlags {
        let mut given = Given::default();
        for long in id_flags() {
            if let Some(id) = m.get_one::<String>(long) {
                given.texts.push((long, id.clone()));
            }
        }
        let homes: Vec<&'static str> = pack_home_flags().iter().map(|f| f.long).collect();
        given.read_paths(m, &homes);
        PackFlags {
            harness: m.get_one::<HarnessArg>("harness").copied(),
            given,
        }
    }
}

/// The folder each harness restored as files goes under (unpack, restore:
/// `--codex-home`, …).
#[derive(Debug)]
pub struct RestoreHomes(Given);

/// Each harness restored by its program: the switch that asks for it and
/// the program (unpack, restore: `--opencode-import`, `--opencode-bin`).
#[derive(Debug)]
pub struct RestoreImports(Given);

/// The `Under` flags, in the adapters' order.
fn under_flags() -> Vec<&'static PathFlag> {
    ADAPTERS
        .iter()
        .filter_map(|a| match &a.command_line().restore {
            Restore::Under(flag) => Some(flag),
            Restore::Import { .. } => None,
        })
        .collect()
}

/// The `Import` switches and programs, in the adapters' order.
fn import_flags() -> Vec<(&'static Switch, &'static ProgramFlag)> {
    ADAPTERS
        .iter()
        .filter_map(|a| match &a.command_line().restore {
            Restore::Import {
                switch, program, ..
            } => Some((switch, program)),
            Restore::Under(_) => None,
        })
        .collect()
}

impl RestoreHomes {
    fn declare(mut cmd: Command) -> Command {
        for flag in under_flags() {
            cmd = cmd.arg(flag.arg(flag.help.to_owned()));
        }
        cmd
    }

    fn read(m: &ArgMatches) -> RestoreHomes {
        let mut given = Given::default();
        let flags: Vec<&'static str> = under_flags().iter().map(|f| f.long).collect();
        given.read_paths(m, &flags);
        RestoreHomes(given)
    }
}

impl RestoreImports {
    fn declare(mut cmd: Command) -> Command {
        for (switch, program) in import_flags() {
            cmd = cmd
                .arg(
                    Arg::new(switch.long)
                        .long(switch.long)
                        .action(ArgAction::SetTrue)
                        .help(switch.help),
                )
                .arg(program.arg());
        }
        cmd
    }

    fn read(m: &ArgMatches) -> RestoreImports {
        let mut given = Given::default();
        for (switch, program) in import_flags() {
            if m.get_flag(switch.long) {
                given.switches.push(switch.long);
            }
            given.read_paths(m, &[program.flag.long]);
        }
        RestoreImports(given)
    }
}

/// Where unpack and restore put each harness's state, as their flags say.
pub fn destinations(homes: &RestoreHomes, imports: &RestoreImports) -> Destinations {
    let mut out = Destinations::default();
    for a in ADAPTERS {
        let to = match &a.command_line().restore {
            Restore::Under(flag) => homes.0.path(flag.long).map(|p| Destination::Dir(p.into())),
            Restore::Import {
                switch,
                program,
                importer,
            } => imports
                .0
                .switched(switch.long)
                .then(|| Destination::Program {
                    program: program.resolve(imports.0.path(program.flag.long)),
                    importer: *importer,
                }),
        };
        if let Some(to) = to {
            out.insert(a.kind(), to);
        }
    }
    out
}

/// The program restore-check asks, for each harness that is asked
/// (`--opencode-bin`).
#[derive(Debug)]
pub struct CheckFlags(Given);

/// The restore-check programs, in the adapters' order.
fn check_flags() -> Vec<&'static ProgramFlag> {
    ADAPTERS
        .iter()
        .filter_map(|a| a.command_line().check.as_ref())
        .collect()
}

impl CheckFlags {
    /// The program to ask about a session of `kind` (`None`: its
    /// sessions are read, not asked for).
    pub fn program(&self, kind: HarnessKind) -> Option<PathBuf> {
        let check = adapter(kind).command_line().check.as_ref()?;
        Some(check.resolve(self.0.path(check.flag.long)))
    }
}

impl CheckFlags {
    fn declare(mut cmd: Command) -> Command {
        for program in check_flags() {
            cmd = cmd.arg(program.arg());
        }
        cmd
    }

    fn read(m: &ArgMatches) -> CheckFlags {
        let mut given = Given::default();
        let flags: Vec<&'static str> = check_flags().iter().map(|p| p.flag.long).collect();
        given.read_paths(m, &flags);
        CheckFlags(given)
    }
}

/// clap's `Args` and `FromArgMatches` for groups that declare their flags
/// in `declare` and read them in `read` (the derive cannot: the flags are
/// the adapters').
macro_rules! flag_groups {
    ($($group:ident),*) => {$(
        impl Args for $group {
            fn augment_args(cmd: Command) -> Command {
                $group::declare(cmd)
            }

            fn augment_args_for_update(cmd: Command) -> Command {
                $group::declare(cmd)
            }
        }

        impl FromArgMatches for $group {
            fn from_arg_matches(m: &ArgMatches) -> std::result::Result<Self, clap::Error> {
                Ok($group::read(m))
            }

            fn update_from_arg_matches(
                &mut self,
                m: &ArgMatches,
            ) -> std::result::Result<(), clap::Error> {
                *self = $group::read(m);
                Ok(())
            }
        }
    )*};
}

flag_groups!(PackFlags, RestoreHomes, RestoreImports, CheckFlags);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_read_as_prose() {
        let s = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(join(&s(&["a"]), "or"), "a");
        assert_eq!(join(&s(&["a", "b"]), "or"), "a or b");
        assert_eq!(join(&s(&["a", "b", "c"]), "and"), "a, b and c");
    }

    #[test]
    fn help_names_each_harness_with_its_flag() {
        assert_eq!(
            harness_help(),
            "Also carry an agent's session log: `codex` (needs --thread), `claude` or `opencode` (need --session)"
        );
        assert_eq!(
            check_id_help(),
            "The thread (Codex) or session (Claude Code, OpenCode) id"
        );
        assert_eq!(every_product(), "Codex, Claude Code or OpenCode");
    }
}
