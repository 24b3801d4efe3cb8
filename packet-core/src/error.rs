//! Typed failures. Every way a packet can be refused has one [`ErrorCode`]
//! whose string form is stable: the CLI's JSON, the Worker's HTTP body and
//! the inspector page all show it unchanged, in the one JSON shape
//! [`Refusal`] defines.
//!
//! A refusal is never a bug in the program that drives this crate: a writer
//! driven out of order is a [`Misuse`], reported as a [`WriteError`], and
//! has no [`ErrorCode`].

use alloc::borrow::Cow;
use alloc::string::String;
use core::fmt;

use serde::{Deserialize, Serialize, Serializer};

/// What a person can do about most refusals: the packet itself is wrong.
const REPACK: &str =
    "the file is not a valid session packet: refuse it and repack from the source workspace";
/// ... about a packet whose members do not match its own manifest.
const ALTERED: &str = "the packet was altered after it was packed: fetch it again from its source";
/// ... about a packet over the format's limits.
const LIMITS: &str =
    "the packet exceeds the format's limits: pack less (use --exclude) or split the workspace";

/// The one table of refusal codes: each row is a variant, its stable string
/// and its advice. [`ErrorCode`], [`ErrorCode::as_str`],
/// [`ErrorCode::ALL`] and [`ErrorCode::advice`] are generated from it, and
/// a test holds it equal to the list in docs/session-packet.md §11.
macro_rules! error_codes {
    ($( $(#[$doc:meta])* $name:ident = $code:literal, $advice:expr; )*) => {
        /// Why a packet, a member or a manifest was refused.
        ///
        /// The string forms (see [`ErrorCode::as_str`]) are part of the
        /// format's public contract and never change meaning
        /// (docs/session-packet.md §11).
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        #[non_exhaustive]
        pub enum ErrorCode {
            $( $(#[$doc])* $name, )*
        }

        impl ErrorCode {
            /// Every code, in the table's order.
            pub const ALL: &'static [ErrorCode] = &[ $( ErrorCode::$name, )* ];

            /// The stable machine-readable code.
            pub const fn as_str(self) -> &'static str {
                match self {
                    $( ErrorCode::$name => $code, )*
                }
            }

            /// What a person can do about it, in one sentence.
            pub const fn advice(self) -> &'static str {
                match self {
                    $( ErrorCode::$name => $advice, )*
                }
            }
        }
    };
}

error_codes! {
    /// A header's checksum field does not match its bytes.
    HeaderChecksum = "header_checksum", REPACK;
    /// The magic or version field is not POSIX ustar (`ustar\0`, `00`).
    HeaderMagic = "header_magic", REPACK;
    /// A numeric header field is not a canonical NUL-terminated octal number.
    HeaderNumeric = "header_numeric", REPACK;
    /// A header field holds something other than what the writer produces
    /// for this member (mtime, owners, names, device numbers, padding, or an
    /// encoding that differs byte for byte).
    HeaderNotCanonical = "header_not_canonical", REPACK;
    /// A typeflag other than regular file, directory, symlink (or the one
    /// permitted extension header).
    TypeflagForbidden = "typeflag_forbidden", REPACK;
    /// A PAX extended header that breaks the one documented use: unknown
    /// keys, repeated keys, malformed records, not needed, stacked, or not
    /// followed by a member.
    PaxInvalid = "pax_invalid", REPACK;
    /// A body's padding up to the next block is not all zero.
    PaddingNotZero = "padding_not_zero", REPACK;
    /// The input ended before the archive did.
    Truncated = "truncated", "the packet is incomplete: fetch or copy it again";
    /// The end-of-archive marker is not exactly two zero blocks.
    EndMarker = "end_marker", REPACK;
    /// Bytes follow the end-of-archive marker.
    TrailingData = "trailing_data", REPACK;
    /// A path is not valid UTF-8.
    PathNotUtf8 = "path_not_utf8", REPACK;
    /// A path starts with `/`.
    PathAbsolute = "path_absolute", REPACK;
    /// A path has an empty, `.` or `..` component, or a trailing `/`.
    PathNotCanonical = "path_not_canonical", REPACK;
    /// A path holds NUL or another control character.
    PathControlChar = "path_control_char", REPACK;
    /// A path is longer than the limit.
    PathTooLong = "path_too_long", LIMITS;
    /// A member lies outside `workspace/` and `harness/`.
    PathOutsideRoots = "path_outside_roots", REPACK;
    /// Two members would become the same file on a case-insensitive or
    /// normalisation-insensitive file system.
    PathCollision = "path_collision", REPACK;
    /// Two members share a path.
    MemberDuplicate = "member_duplicate", REPACK;
    /// Members are not in the format's order.
    MemberUnsorted = "member_unsorted", REPACK;
    /// A member's parent is not a directory member that comes before it.
    MemberParentMissing = "member_parent_missing", REPACK;
    /// A member lies below a symlink.
    MemberBelowSymlink = "member_below_symlink", REPACK;
    /// A symlink target is absolute.
    SymlinkAbsolute = "symlink_absolute", REPACK;
    /// A symlink target, resolved lexically, leaves its root.
    SymlinkEscapes = "symlink_escapes", REPACK;
    /// A symlink target passes through another symlink.
    SymlinkThroughSymlink = "symlink_through_symlink", REPACK;
    /// A symlink target is empty, too long, or holds NUL or control characters.
    SymlinkTargetInvalid = "symlink_target_invalid", REPACK;
    /// A mode is not one of the canonical modes for its type.
    ModeNotCanonical = "mode_not_canonical", REPACK;
    /// The first member is not `packet.json`.
    ManifestNotFirst = "manifest_not_first", REPACK;
    /// The manifest is not valid JSON of the documented shape (unknown,
    /// duplicate, missing or null fields, wrong types, wrong format id).
    ManifestInvalid = "manifest_invalid", REPACK;
    /// The manifest parses but is not in canonical form.
    ManifestNotCanonical = "manifest_not_canonical", REPACK;
    /// The manifest's totals do not add up.
    ManifestTotals = "manifest_totals", REPACK;
    /// The harness descriptor is inconsistent with the members.
    HarnessInvalid = "harness_invalid", REPACK;
    /// The manifest lists a member the archive does not hold.
    MemberMissing = "member_missing", ALTERED;
    /// The archive holds a member the manifest does not list.
    MemberUnexpected = "member_unexpected", ALTERED;
    /// A member's type, mode, size or target disagrees with the manifest.
    MemberMismatch = "member_mismatch", ALTERED;
    /// A member's bytes do not hash to the manifest's sha256.
    MemberDigestMismatch = "member_digest_mismatch", ALTERED;
    /// Two file members have the same sha256 but different sizes.
    DigestSizeConflict = "digest_size_conflict", REPACK;
    /// A credential file was found among the members.
    CredentialInPacket = "credential_in_packet",
        "credential files are never carried in a packet: repack without it";
    /// Too many members.
    LimitMembers = "limit_members", LIMITS;
    /// The packet or a declared size is larger than the limit.
    LimitSize = "limit_size", LIMITS;
    /// The manifest is larger than its limit.
    LimitManifest = "limit_manifest", LIMITS;
    /// The whole packet does not hash to the expected digest.
    PacketDigestMismatch = "packet_digest_mismatch",
        "the packet is not the one that was asked for: fetch it again, or check the digest you gave";
    /// A digest string is not `sha256:` and 64 lowercase hex digits.
    DigestSyntax = "digest_syntax", "write digests as sha256: followed by 64 lowercase hex digits";
}

impl ErrorCode {
    /// Parses a code from its stable string form.
    pub fn from_str_code(s: &str) -> Option<ErrorCode> {
        Self::ALL.iter().copied().find(|c| c.as_str() == s)
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A refusal: a stable [`ErrorCode`], the member path involved (if any), the
/// byte offset in the packet (if known) and a message for people.
///
/// Serialises as its [`Refusal`] shape.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Error {
    code: ErrorCode,
    path: Option<String>,
    offset: Option<u64>,
    message: String,
}

impl Error {
    /// A new error with a message describing what was found.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Error {
            code,
            path: None,
            offset: None,
            message: message.into(),
        }
    }

    /// Attaches the member path the error concerns.
    pub fn at_path(mut self, path: impl Into<String>) -> Self {
        self.path = Some(path.into());
        self
    }

    /// Attaches the byte offset in the packet where the problem starts,
    /// unless one is already set.
    pub fn at_offset(mut self, offset: u64) -> Self {
        if self.offset.is_none() {
            self.offset = Some(offset);
        }
        self
    }

    /// The stable code.
    pub fn code(&self) -> ErrorCode {
        self.code
    }

    /// The member path involved, if any.
    pub fn path(&self) -> Option<&str> {
        self.path.as_deref()
    }

    /// The byte offset in the packet, if known.
    pub fn offset(&self) -> Option<u64> {
        self.offset
    }

    /// What was found, without the advice.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// What a person can do about it.
    pub fn advice(&self) -> &'static str {
        self.code.advice()
    }

    /// The refusal as JSON shows it.
    pub fn refusal(&self) -> Refusal<'_> {
        Refusal {
            code: Cow::Borrowed(self.code.as_str()),
            details: RefusalDetails {
                path: self.path.as_deref().map(Cow::Borrowed),
                offset: self.offset,
                message: Cow::Borrowed(&self.message),
                advice: Cow::Borrowed(self.advice()),
            },
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.code)?;
        if let Some(p) = &self.path {
            write!(f, " at {p:?}")?;
        }
        if let Some(o) = self.offset {
            write!(f, " (byte {o})")?;
        }
        write!(f, ": {}; {}", self.message, self.code.advice())
    }
}

impl core::error::Error for Error {}

impl Serialize for Error {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.refusal().serialize(s)
    }
}

/// The JSON shape of a refusal, defined once for every consumer:
/// `{"code","path","offset","message","advice"}`, with `path` and `offset`
/// `null` when unknown. The CLI's `pillbox.error/1`, the Worker's error
/// body and the page's refusals are this object, the CLI and the Worker
/// adding fields of their own (`#[serde(flatten)]`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Refusal<'a> {
    /// Stable snake_case code: an [`ErrorCode`], or a consumer's own.
    pub code: Cow<'a, str>,
    /// Everything after the code.
    #[serde(flatten)]
    pub details: RefusalDetails<'a>,
}

impl<'a> Refusal<'a> {
    /// A refusal with a code of the consumer's own (an HTTP API's, a
    /// command line's), no path and no offset.
    pub fn new(
        code: impl Into<Cow<'a, str>>,
        message: impl Into<Cow<'a, str>>,
        advice: impl Into<Cow<'a, str>>,
    ) -> Refusal<'a> {
        Refusal {
            code: code.into(),
            details: RefusalDetails {
                path: None,
                offset: None,
                message: message.into(),
                advice: advice.into(),
            },
        }
    }

    /// The same refusal, owning its text.
    pub fn into_owned(self) -> Refusal<'static> {
        let own = |c: Cow<'a, str>| Cow::Owned(c.into_owned());
        Refusal {
            code: own(self.code),
            details: RefusalDetails {
                path: self.details.path.map(own),
                offset: self.details.offset,
                message: own(self.details.message),
                advice: own(self.details.advice),
            },
        }
    }
}

/// What a refusal says after its code: `{"path","offset","message","advice"}`.
/// A part of its own so that a consumer can put a field of its own right
/// after the code (the CLI's `exit_code`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RefusalDetails<'a> {
    /// The member path or file involved, if any.
    pub path: Option<Cow<'a, str>>,
    /// The byte offset in the packet where the problem starts, if known.
    pub offset: Option<u64>,
    /// What was found.
    pub message: Cow<'a, str>,
    /// What a person can do about it.
    pub advice: Cow<'a, str>,
}

/// A call the API rules out: the writer driven out of order by the program
/// that drives it. A bug in that program, never a property of a packet, so
/// it has no [`ErrorCode`]: consumers report it as their own bug.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Misuse {
    message: String,
    path: Option<String>,
}

impl Misuse {
    pub(crate) fn new(message: impl Into<String>) -> Misuse {
        Misuse {
            message: message.into(),
            path: None,
        }
    }

    pub(crate) fn at_path(mut self, path: impl Into<String>) -> Misuse {
        self.path = Some(path.into());
        self
    }

    /// What the caller did wrong.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The member the call concerned, if any.
    pub fn path(&self) -> Option<&str> {
        self.path.as_deref()
    }
}

impl fmt::Display for Misuse {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "packet-core was driven out of order")?;
        if let Some(p) = &self.path {
            write!(f, " at {p:?}")?;
        }
        write!(f, ": {}", self.message)
    }
}

impl core::error::Error for Misuse {}

/// Why writing a packet failed: a member was refused (a file that changed
/// while it was packed, a member set that breaks a rule), or the writer was
/// driven out of order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WriteError {
    /// The members cannot become a packet.
    Refused(Error),
    /// A bug in the caller.
    Misuse(Misuse),
}

impl From<Error> for WriteError {
    fn from(e: Error) -> Self {
        WriteError::Refused(e)
    }
}

impl From<Misuse> for WriteError {
    fn from(m: Misuse) -> Self {
        WriteError::Misuse(m)
    }
}

impl fmt::Display for WriteError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WriteError::Refused(e) => e.fmt(f),
            WriteError::Misuse(m) => m.fmt(f),
        }
    }
}

impl core::error::Error for WriteError {}

/// Shorthand for results in this crate.
pub type Result<T, E = Error> = core::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::collections::BTreeSet;
    use alloc::vec::Vec;

    /// The codes docs/session-packet.md §11 lists: every backquoted word of
    /// lowercase letters, digits and underscores in that section.
    fn documented_codes() -> BTreeSet<&'static str> {
        let spec = include_str!("../../docs/session-packet.md");
        let start = spec
            .find("\n## 11. Error codes")
            .expect("the spec has a section 11, Error codes");
        let section = &spec[start + 1..];
        let section = &section[..section.find("\n## ").unwrap_or(section.len())];
        section
            .split('`')
            .skip(1)
            .step_by(2)
            .filter(|w| {
                !w.is_empty()
                    && w.bytes()
                        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
            })
            .collect()
    }

    #[test]
    fn the_table_is_the_list_in_the_spec() {
        let table: BTreeSet<&str> = ErrorCode::ALL.iter().map(|c| c.as_str()).collect();
        assert_eq!(
            table.len(),
            ErrorCode::ALL.len(),
            "a code string is repeated"
        );
        let documented = documented_codes();
        let undocumented: Vec<_> = table.difference(&documented).collect();
        let unknown: Vec<_> = documented.difference(&table).collect();
        assert!(
            undocumented.is_empty() && unknown.is_empty(),
            "codes missing from docs/session-packet.md §11: {undocumented:?}; \
             listed there but not in the table: {unknown:?}"
        );
    }

    #[test]
    fn every_code_parses_back() {
        for &code in ErrorCode::ALL {
            assert_eq!(ErrorCode::from_str_code(code.as_str()), Some(code));
        }
        assert_eq!(ErrorCode::from_str_code("usage"), None);
    }

    #[test]
    fn a_refusal_serialises_in_the_one_shape() {
        let e = Error::new(ErrorCode::Truncated, "short").at_offset(1024);
        assert_eq!(
            serde_json::to_string(&e).unwrap(),
            r#"{"code":"truncated","path":null,"offset":1024,"message":"short","advice":"the packet is incomplete: fetch or copy it again"}"#
        );
        let e = Error::new(ErrorCode::MemberMismatch, "m").at_path("workspace/a");
        let json = serde_json::to_string(&e).unwrap();
        assert!(
            json.starts_with(r#"{"code":"member_mismatch","path":"workspace/a","offset":null,"#)
        );
    }
}
