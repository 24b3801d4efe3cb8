//! The CLI's one error type: every failure has a stable code, the path
//! involved, a message and advice, and maps to one exit code
//! (docs/cli.md, "Exit codes").

use std::borrow::Cow;
use std::io;
use std::path::{Path, PathBuf};

use packet_core::{RefusalDetails, WriteError};
use serde::Serialize;

use crate::change::Change;
pub use crate::refused::Refused;

/// Exit code for success.
pub const EXIT_OK: i32 = 0;
/// Exit code for a command line that cannot be understood.
pub const EXIT_USAGE: i32 = 2;
/// Exit code for a packet that failed verification.
pub const EXIT_VERIFY: i32 = 3;
/// Exit code for a read or write that failed.
pub const EXIT_IO: i32 = 4;
/// Exit code for input the command refuses (workspace, target, harness).
pub const EXIT_REFUSED: i32 = 5;
/// Exit code for a bug in pillbox itself (sysexits' `EX_SOFTWARE`).
pub const EXIT_BUG: i32 = 70;

/// Why a command failed.
#[derive(Debug)]
pub enum CliError {
    /// The packet was refused by packet-core while reading it.
    Packet(packet_core::Error),
    /// The workspace cannot become a packet: packet-core refused a path,
    /// a symlink or the member set while packing.
    Unpackable(packet_core::Error),
    /// A file system operation failed.
    Io {
        /// What was being done, e.g. "read", "create".
        op: &'static str,
        /// The file it was done to.
        path: PathBuf,
        /// The operating system's error.
        source: io::Error,
    },
    /// The command refuses its input (a target that is not empty, a
    /// harness that cannot be carried, a rollout that is missing...).
    Refused(Refused),
    /// The command line is not usable.
    Usage(String),
    /// A bug in this program: packet-core driven out of order, or a state
    /// the CLI's own code rules out. Never a verdict on the packet or the
    /// workspace.
    Bug(String),
    /// A packet store refused a request or could not be reached. A packet
    /// refused by the store's packet-core (HTTP 422) keeps its code, path
    /// and offset unchanged.
    Remote {
        /// The store's code (packet-core's for a refused packet), or
        /// `remote_unreachable`.
        code: String,
        /// The exit code: 3 for a refused packet, 4 when the store cannot
        /// be reached or fails, 5 for any other refusal.
        exit: i32,
        /// The member path involved, if any.
        path: Option<String>,
        /// The byte offset in the packet, if known.
        offset: Option<u64>,
        /// What happened.
        message: String,
        /// What the user can do.
        advice: String,
    },
}

/// Shorthand for the CLI's results.
pub type Result<T, E = CliError> = std::result::Result<T, E>;

impl CliError {
    /// An I/O error on `path`.
    pub fn io(op: &'static str, path: impl AsRef<Path>, source: io::Error) -> CliError {
        CliError::Io {
            op,
            path: path.as_ref().to_path_buf(),
            source,
        }
    }

    /// A failure of packet-core's writer while packing: the workspace is
    /// refused, or the writer was driven out of order (a bug).
    pub fn unpackable(e: WriteError) -> CliError {
        match e {
            WriteError::Refused(e) => CliError::Unpackable(e),
            WriteError::Misuse(m) => CliError::Bug(m.to_string()),
        }
    }

    /// The stable code shown in the JSON.
    pub fn code(&self) -> &str {
        match self {
            CliError::Packet(e) | CliError::Unpackable(e) => e.code().as_str(),
            CliError::Io { .. } => "io",
            CliError::Refused(r) => r.code(),
            CliError::Usage(_) => "usage",
            CliError::Bug(_) => "bug",
            CliError::Remote { code, .. } => code,
        }
    }

    /// The process exit code.
    pub fn exit_code(&self) -> i32 {
        match self {
            CliError::Packet(_) => EXIT_VERIFY,
            CliError::Unpackable(_) | CliError::Refused(_) => EXIT_REFUSED,
            CliError::Io { .. } => EXIT_IO,
            CliError::Usage(_) => EXIT_USAGE,
            CliError::Bug(_) => EXIT_BUG,
            CliError::Remote { exit, .. } => *exit,
        }
    }

    /// The `pillbox.error/1` object.
    pub fn report(&self) -> ErrorReport {
        let (path, offset, message, advice) = match self {
            CliError::Packet(e) => (
                e.path().map(str::to_owned),
                e.offset(),
                e.message().to_owned(),
                e.advice().to_owned(),
            ),
            CliError::Unpackable(e) => (
                e.path().map(str::to_owned),
                None,
                e.message().to_owned(),
                unpackable_advice(e.code()).to_owned(),
            ),
            CliError::Io { op, path, source } => (
                Some(path.display().to_string()),
                None,
                format!("cannot {op} {}: {source}", path.display()),
                io_advice(source.kind()).to_owned(),
            ),
            CliError::Refused(r) => {
                let (path, message, advice) = r.describe();
                (path, None, message, advice.to_owned())
            }
            CliError::Usage(message) => (
                None,
                None,
                message.clone(),
                "see `pillbox checkpoint --help`".to_owned(),
            ),
            CliError::Bug(message) => (
                None,
                None,
                message.clone(),
                "this is a bug in pillbox, not a problem with the packet or the workspace: please report it with the command that led to it".to_owned(),
            ),
            CliError::Remote {
                path,
                offset,
                message,
                advice,
                ..
            } => (path.clone(), *offset, message.clone(), advice.clone()),
        };
        let (paths, paths_count) = match self {
            CliError::Refused(Refused::LocalChanges { count, listed, .. }) => {
                (Some(listed.clone()), Some(*count))
            }
            _ => (None, None),
        };
        let candidates = match self {
            CliError::Refused(Refused::DigestAmbiguous { candidates, .. }) => {
                Some(candidates.clone())
            }
            _ => None,
        };
        ErrorReport {
            schema: "pillbox.error/1",
            code: self.code().to_owned(),
            exit_code: self.exit_code(),
            details: RefusalDetails {
                path: path.map(Cow::Owned),
                offset,
                message: Cow::Owned(message),
                advice: Cow::Owned(advice),
            },
            paths,
            paths_count,
            candidates,
        }
    }
}

/// Advice for packet-core refusals met while packing a workspace.
fn unpackable_advice(code: packet_core::ErrorCode) -> &'static str {
    use packet_core::ErrorCode::*;
    match code {
        PathNotUtf8 | PathControlChar => {
            "rename the file (packet paths are UTF-8 without control characters) or leave it out with --exclude"
        }
        PathCollision => {
            "rename one of the two files: they would overwrite each other on macOS or Windows"
        }
        SymlinkEscapes | SymlinkAbsolute => {
            "make the link relative and inside the workspace, leave it out with --exclude, or pass --skip-escaping-symlinks"
        }
        SymlinkThroughSymlink | SymlinkTargetInvalid => {
            "point the link straight at its target (not through another link), or leave it out with --exclude"
        }
        MemberDigestMismatch | MemberMismatch => {
            "the file changed while it was being packed: pack again once nothing writes to the workspace"
        }
        LimitMembers | LimitSize | LimitManifest | PathTooLong => {
            "the workspace exceeds the format's limits: leave build outputs and caches out with --exclude"
        }
        _ => code.advice(),
    }
}

fn io_advice(kind: io::ErrorKind) -> &'static str {
    match kind {
        io::ErrorKind::NotFound => "check that the path exists and is spelled right",
        io::ErrorKind::PermissionDenied => "check the permissions of the path and its parents",
        io::ErrorKind::AlreadyExists => "remove the existing file or choose another path",
        io::ErrorKind::StorageFull => "free some disk space and try again",
        io::ErrorKind::ReadOnlyFilesystem => "choose a writable location",
        _ => "check the path and the file system, then try again",
    }
}

/// The JSON object printed for every failure: packet-core's refusal shape
/// with the schema in front and the exit code after the code.
#[derive(Debug, Serialize)]
pub struct ErrorReport {
    /// Always `pillbox.error/1`.
    pub schema: &'static str,
    /// Stable snake_case code: a packet-core code, `io`, `usage`, `bug`, or
    /// a CLI refusal.
    pub code: String,
    /// The process exit code.
    pub exit_code: i32,
    /// The member path or file path involved, the byte offset in the
    /// packet when known, what happened and what the user can do.
    #[serde(flatten)]
    pub details: RefusalDetails<'static>,
    /// `local_changes`: the paths that differ (at most 100), each with what
    /// changed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub paths: Option<Vec<Change>>,
    /// `local_changes`: how many paths differ in all.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub paths_count: Option<u64>,
    /// `digest_ambiguous`: the stored digests that start with the prefix
    /// (at most 10).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub candidates: Option<Vec<String>>,
}

impl From<Refused> for CliError {
    fn from(r: Refused) -> Self {
        CliError::Refused(r)
    }
}

impl From<packet_core::Error> for CliError {
    fn from(e: packet_core::Error) -> Self {
        CliError::Packet(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use packet_core::ErrorCode;

    #[test]
    fn exit_codes_follow_the_kind_of_failure() {
        let packet = CliError::Packet(packet_core::Error::new(ErrorCode::Truncated, "short"));
        assert_eq!(packet.exit_code(), EXIT_VERIFY);
        assert_eq!(packet.code(), "truncated");
        let io = CliError::io("read", "/x", io::Error::from(io::ErrorKind::NotFound));
        assert_eq!(io.exit_code(), EXIT_IO);
        let report = io.report();
        assert_eq!(report.details.path.as_deref(), Some("/x"));
        assert!(report.details.message.contains("/x"));
        assert_eq!(CliError::Usage("x".into()).exit_code(), EXIT_USAGE);
        let refused = CliError::from(Refused::TargetNotEmpty {
            target: PathBuf::from("/t"),
        });
        assert_eq!(refused.exit_code(), EXIT_REFUSED);
        assert_eq!(refused.report().code, "target_not_empty");
        // packet-core's writer driven out of order: a bug, not a refusal.
        let manifest = packet_core::Manifest::build(
            vec![packet_core::Member::dir("workspace")],
            None,
            vec![],
            &packet_core::Limits::FORMAT,
        )
        .unwrap();
        let misuse = packet_core::Writer::new(&manifest).body(b"x").unwrap_err();
        let bug = CliError::unpackable(misuse);
        assert_eq!((bug.code(), bug.exit_code()), ("bug", EXIT_BUG));
    }
}
