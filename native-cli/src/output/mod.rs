//! Where a command's report goes and in what form (docs/cli.md, "Output").
//!
//! Two audiences, one schema: every report is the versioned JSON object of
//! `proto/cli/`; a person at a terminal reads a short summary of the same
//! object ([`human`]), a program reads the object itself. A report is
//! rendered for a person when its stream is a terminal and `--json` was not
//! given; anything else (a pipe, a file, `--report FILE`) gets the JSON,
//! byte for byte as before, so scripts never see the summary.
//!
//! An error is written once: on a terminal, a message on stderr (what went
//! wrong, the path, what to do); otherwise the `pillbox.error/1` object
//! where the command's JSON goes.

mod human;
mod units;

use std::io::{self, IsTerminal, Write};
use std::path::Path;
use std::sync::OnceLock;

use anstream::ColorChoice;
use serde::Serialize;

use crate::error::{CliError, ErrorReport};

/// The stream a report goes to.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum To {
    /// Standard output (most commands).
    Stdout,
    /// Standard error (when the packet or a member goes to stdout).
    Stderr,
}

impl To {
    fn is_terminal(self) -> bool {
        match self {
            To::Stdout => io::stdout().is_terminal(),
            To::Stderr => io::stderr().is_terminal(),
        }
    }
}

/// `--color`: when the human summary may use colour.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum ColorWhen {
    /// On a terminal, unless `NO_COLOR` is set or `CLICOLOR=0` (and when
    /// `CLICOLOR_FORCE` is set).
    #[default]
    Auto,
    /// Always, on a terminal.
    Always,
    /// Never.
    Never,
}

impl ColorWhen {
    /// clap's and anstream's name for the same choice.
    pub fn choice(self) -> ColorChoice {
        match self {
            ColorWhen::Auto => ColorChoice::Auto,
            ColorWhen::Always => ColorChoice::Always,
            ColorWhen::Never => ColorChoice::Never,
        }
    }
}

/// What the command line asked of the output.
#[derive(Clone, Copy, Debug, Default)]
pub struct Choice {
    /// `--json`: the JSON object even on a terminal.
    pub json: bool,
    /// `--color`.
    pub color: ColorWhen,
}

static CHOICE: OnceLock<Choice> = OnceLock::new();

/// Sets the output choice for this run (once, before anything is printed).
pub fn init(choice: Choice) {
    let _ = CHOICE.set(choice);
}

fn choice() -> Choice {
    CHOICE.get().copied().unwrap_or_default()
}

/// Whether a report for `to` is read by a person: the stream is a terminal
/// and `--json` was not given.
pub fn for_person(to: To) -> bool {
    !choice().json && to.is_terminal()
}

/// Writes `text` to `to`, colour kept or stripped as `--color`, `NO_COLOR`
/// and `CLICOLOR` say.
fn write_styled(to: To, text: &str) {
    let color = choice().color.choice();
    let _ = match to {
        To::Stdout => {
            let mut s = anstream::AutoStream::new(io::stdout().lock(), color);
            s.write_all(text.as_bytes()).and_then(|()| s.flush())
        }
        To::Stderr => {
            let mut s = anstream::AutoStream::new(io::stderr().lock(), color);
            s.write_all(text.as_bytes()).and_then(|()| s.flush())
        }
    };
}

fn write_plain(to: To, text: &str) {
    let _ = match to {
        To::Stdout => io::stdout().lock().write_all(text.as_bytes()),
        To::Stderr => io::stderr().lock().write_all(text.as_bytes()),
    };
}

/// The JSON text of a report, one line.
fn json_line<T: Serialize>(value: &T) -> String {
    let mut text = serde_json::to_string(value).unwrap_or_else(|e| {
        format!(r#"{{"schema":"pillbox.error/1","code":"bug","exit_code":70,"path":null,"offset":null,"message":"cannot encode the report: {e}","advice":"report this bug"}}"#)
    });
    text.push('\n');
    text
}

/// Prints a command's report: JSON to `file` when given (`--report`);
/// a summary for a person when `to` is a terminal (besides the file);
/// else, unless the file took it, the JSON on `to`.
pub fn emit<T: Serialize>(value: &T, to: To, file: Option<&Path>) {
    let filed = file.is_some_and(|f| std::fs::write(f, json_line(value)).is_ok());
    if filed && !for_person(to) {
        return;
    }
    if for_person(to) {
        if let Ok(v) = serde_json::to_value(value) {
            let text = human::report(&v);
            if !text.is_empty() {
                write_styled(to, &text);
            }
            return;
        }
    }
    write_plain(to, &json_line(value));
}

/// Prints the JSON object on `to` whatever the stream (`--format json`).
pub fn emit_json<T: Serialize>(value: &T, to: To) {
    write_plain(to, &json_line(value));
}

/// Prints a failure once: the `pillbox.error/1` object where the command's
/// JSON goes (and to `file`, with `--report`), or, for a person on a
/// terminal, a message on stderr. A usage error's advice names the help of
/// `command` (e.g. `pillbox checkpoint pack`).
pub fn emit_error(err: &CliError, to: To, file: Option<&Path>, command: &str) {
    let report = error_report(err, command);
    let mut written = false;
    if let Some(f) = file {
        written = std::fs::write(f, json_line(&report)).is_ok();
    }
    if for_person(to) {
        write_styled(To::Stderr, &human::error(&report));
    } else if !written {
        write_plain(to, &json_line(&report));
    }
}

/// The error object, a usage error advised to read its command's help.
pub fn error_report(err: &CliError, command: &str) -> ErrorReport {
    let mut report = err.report();
    if matches!(err, CliError::Usage(_)) {
        report.details.advice = format!("see `{command} --help`").into();
    }
    report
}

/// For a usage error clap found: clap's own text on a terminal (it names
/// the argument, suggests a spelling and shows the usage), the error
/// object otherwise; never both.
pub fn emit_usage(err: &clap::Error, message: String, command: &str) {
    let e = CliError::Usage(message);
    if for_person(To::Stdout) {
        let rendered = err.render().ansi().to_string();
        // clap's closing hint names `--help` alone; name the command's.
        let text = match rendered.find("For more information, try") {
            Some(at) => format!(
                "{}For more information, try '{command} --help'.\n",
                &rendered[..at]
            ),
            None => rendered,
        };
        write_styled(To::Stderr, &text);
    } else {
        write_plain(To::Stdout, &json_line(&error_report(&e, command)));
    }
}

impl Choice {
    /// `--json` and `--color` read from raw arguments, for a command line
    /// clap refused (the values clap would have parsed).
    pub fn from_args(args: &[std::ffi::OsString]) -> Choice {
        let mut choice = Choice::default();
        let mut args = args.iter().skip(1).filter_map(|a| a.to_str());
        while let Some(a) = args.next() {
            let value = match a {
                "--" => break,
                "--json" => {
                    choice.json = true;
                    continue;
                }
                "--color" => args.next(),
                _ => a.strip_prefix("--color="),
            };
            if let Some(v) = value {
                choice.color = match v {
                    "always" => ColorWhen::Always,
                    "never" => ColorWhen::Never,
                    _ => ColorWhen::Auto,
                };
            }
        }
        choice
    }
}

/// The command a command line runs, as its help is asked for:
/// `pillbox checkpoint pack` (as far as its words name subcommands).
pub fn command_path(cmd: &clap::Command, args: &[std::ffi::OsString]) -> String {
    let mut path = vec![cmd.get_name().to_owned()];
    let mut current = cmd;
    let mut words = args.iter().skip(1).filter_map(|a| a.to_str());
    while let Some(w) = words.next() {
        if w == "--" {
            break;
        }
        if w == "--color" {
            words.next();
            continue;
        }
        if w.starts_with('-') {
            continue;
        }
        match current.find_subcommand(w) {
            Some(sub) => {
                path.push(sub.get_name().to_owned());
                current = sub;
            }
            None => break,
        }
    }
    path.join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(a: &[&str]) -> Vec<std::ffi::OsString> {
        a.iter().map(Into::into).collect()
    }

    #[test]
    fn the_command_is_named_as_its_help_is_asked_for() {
        let cmd = clap::Command::new("pillbox").subcommand(
            clap::Command::new("checkpoint")
                .subcommand(clap::Command::new("pack").visible_alias("p"))
                .subcommand(clap::Command::new("inspect").visible_alias("ls")),
        );
        for (line, want) in [
            (&["pillbox"][..], "pillbox"),
            (
                &["pillbox", "checkpoint", "pack", ".", "-o", "x"],
                "pillbox checkpoint pack",
            ),
            (
                &["pillbox", "--color", "never", "checkpoint", "ls"],
                "pillbox checkpoint inspect",
            ),
            (&["pillbox", "checkpoint", "pakc"], "pillbox checkpoint"),
            (
                &["pillbox", "--json", "checkpoint", "--", "pack"],
                "pillbox checkpoint",
            ),
        ] {
            assert_eq!(command_path(&cmd, &args(line)), want, "{line:?}");
        }
    }

    #[test]
    fn json_and_color_are_read_from_a_refused_line() {
        let c = Choice::from_args(&args(&[
            "pillbox",
            "checkpoint",
            "x",
            "--json",
            "--color=never",
        ]));
        assert!(c.json);
        assert_eq!(c.color, ColorWhen::Never);
        let c = Choice::from_args(&args(&["pillbox", "--", "--json"]));
        assert!(!c.json);
    }
}
