//! Typed refusals. Every way a packet can be refused has one [`ErrorCode`]
//! whose string form is stable: the CLI's JSON, the Worker's HTTP body and
//! the inspector page all show it unchanged.

use alloc::string::String;
use core::fmt;

/// Why a packet, a member or a manifest was refused.
///
/// The string forms (see [`ErrorCode::as_str`]) are part of the format's
/// public contract and never change meaning.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorCode {
    /// A header's checksum field does not match its bytes.
    HeaderChecksum,
    /// The magic or version field is not POSIX ustar (`ustar\0`, `00`).
    HeaderMagic,
    /// A numeric header field is not a canonical NUL-terminated octal number.
    HeaderNumeric,
    /// A header field holds something other than what the writer produces
    /// for this member (mtime, owners, names, device numbers, padding, or an
    /// encoding that differs byte for byte).
    HeaderNotCanonical,
    /// A typeflag other than regular file, directory, symlink (or the one
    /// permitted extension header).
    TypeflagForbidden,
    /// A PAX extended header that breaks the one documented use: unknown
    /// keys, repeated keys, malformed records, not needed, stacked, or not
    /// followed by a member.
    PaxInvalid,
    /// A body's padding up to the next block is not all zero.
    PaddingNotZero,
    /// The input ended before the archive did.
    Truncated,
    /// The end-of-archive marker is not exactly two zero blocks.
    EndMarker,
    /// Bytes follow the end-of-archive marker.
    TrailingData,
    /// A path is not valid UTF-8.
    PathNotUtf8,
    /// A path starts with `/`.
    PathAbsolute,
    /// A path has an empty, `.` or `..` component, or a trailing `/`.
    PathNotCanonical,
    /// A path holds NUL or another control character.
    PathControlChar,
    /// A path is longer than the limit.
    PathTooLong,
    /// A member lies outside `workspace/` and `harness/`.
    PathOutsideRoots,
    /// Two members would become the same file on a case-insensitive or
    /// normalisation-insensitive file system.
    PathCollision,
    /// Two members share a path.
    MemberDuplicate,
    /// Members are not in the format's order.
    MemberUnsorted,
    /// A member's parent is not a directory member that comes before it.
    MemberParentMissing,
    /// A member lies below a symlink.
    MemberBelowSymlink,
    /// A symlink target is absolute.
    SymlinkAbsolute,
    /// A symlink target, resolved lexically, leaves its root.
    SymlinkEscapes,
    /// A symlink target passes through another symlink.
    SymlinkThroughSymlink,
    /// A symlink target is empty, too long, or holds NUL or control characters.
    SymlinkTargetInvalid,
    /// A mode is not one of the canonical modes for its type.
    ModeNotCanonical,
    /// The first member is not `packet.json`.
    ManifestNotFirst,
    /// The manifest is not valid JSON of the documented shape (unknown,
    /// duplicate, missing or null fields, wrong types, wrong format id).
    ManifestInvalid,
    /// The manifest parses but is not in canonical form.
    ManifestNotCanonical,
    /// The manifest's totals do not add up.
    ManifestTotals,
    /// The harness descriptor is inconsistent with the members.
    HarnessInvalid,
    /// The manifest lists a member the archive does not hold.
    MemberMissing,
    /// The archive holds a member the manifest does not list.
    MemberUnexpected,
    /// A member's type, mode, size or target disagrees with the manifest.
    MemberMismatch,
    /// A member's bytes do not hash to the manifest's sha256.
    MemberDigestMismatch,
    /// A credential file was found among the members.
    CredentialInPacket,
    /// Too many members.
    LimitMembers,
    /// The packet or a declared size is larger than the limit.
    LimitSize,
    /// The manifest is larger than its limit.
    LimitManifest,
    /// The whole packet does not hash to the expected digest.
    PacketDigestMismatch,
    /// A digest string is not `sha256:` and 64 lowercase hex digits.
    DigestSyntax,
    /// The reader or writer was driven out of order by its caller.
    Usage,
}

impl ErrorCode {
    /// The stable machine-readable code.
    pub const fn as_str(self) -> &'static str {
        use ErrorCode::*;
        match self {
            HeaderChecksum => "header_checksum",
            HeaderMagic => "header_magic",
            HeaderNumeric => "header_numeric",
            HeaderNotCanonical => "header_not_canonical",
            TypeflagForbidden => "typeflag_forbidden",
            PaxInvalid => "pax_invalid",
            PaddingNotZero => "padding_not_zero",
            Truncated => "truncated",
            EndMarker => "end_marker",
            TrailingData => "trailing_data",
            PathNotUtf8 => "path_not_utf8",
            PathAbsolute => "path_absolute",
            PathNotCanonical => "path_not_canonical",
            PathControlChar => "path_control_char",
            PathTooLong => "path_too_long",
            PathOutsideRoots => "path_outside_roots",
            PathCollision => "path_collision",
            MemberDuplicate => "member_duplicate",
            MemberUnsorted => "member_unsorted",
            MemberParentMissing => "member_parent_missing",
            MemberBelowSymlink => "member_below_symlink",
            SymlinkAbsolute => "symlink_absolute",
            SymlinkEscapes => "symlink_escapes",
            SymlinkThroughSymlink => "symlink_through_symlink",
            SymlinkTargetInvalid => "symlink_target_invalid",
            ModeNotCanonical => "mode_not_canonical",
            ManifestNotFirst => "manifest_not_first",
            ManifestInvalid => "manifest_invalid",
            ManifestNotCanonical => "manifest_not_canonical",
            ManifestTotals => "manifest_totals",
            HarnessInvalid => "harness_invalid",
            MemberMissing => "member_missing",
            MemberUnexpected => "member_unexpected",
            MemberMismatch => "member_mismatch",
            MemberDigestMismatch => "member_digest_mismatch",
            CredentialInPacket => "credential_in_packet",
            LimitMembers => "limit_members",
            LimitSize => "limit_size",
            LimitManifest => "limit_manifest",
            PacketDigestMismatch => "packet_digest_mismatch",
            DigestSyntax => "digest_syntax",
            Usage => "usage",
        }
    }

    /// Every code, for documentation and exhaustive tests.
    pub const ALL: &'static [ErrorCode] = &[
        ErrorCode::HeaderChecksum,
        ErrorCode::HeaderMagic,
        ErrorCode::HeaderNumeric,
        ErrorCode::HeaderNotCanonical,
        ErrorCode::TypeflagForbidden,
        ErrorCode::PaxInvalid,
        ErrorCode::PaddingNotZero,
        ErrorCode::Truncated,
        ErrorCode::EndMarker,
        ErrorCode::TrailingData,
        ErrorCode::PathNotUtf8,
        ErrorCode::PathAbsolute,
        ErrorCode::PathNotCanonical,
        ErrorCode::PathControlChar,
        ErrorCode::PathTooLong,
        ErrorCode::PathOutsideRoots,
        ErrorCode::PathCollision,
        ErrorCode::MemberDuplicate,
        ErrorCode::MemberUnsorted,
        ErrorCode::MemberParentMissing,
        ErrorCode::MemberBelowSymlink,
        ErrorCode::SymlinkAbsolute,
        ErrorCode::SymlinkEscapes,
        ErrorCode::SymlinkThroughSymlink,
        ErrorCode::SymlinkTargetInvalid,
        ErrorCode::ModeNotCanonical,
        ErrorCode::ManifestNotFirst,
        ErrorCode::ManifestInvalid,
        ErrorCode::ManifestNotCanonical,
        ErrorCode::ManifestTotals,
        ErrorCode::HarnessInvalid,
        ErrorCode::MemberMissing,
        ErrorCode::MemberUnexpected,
        ErrorCode::MemberMismatch,
        ErrorCode::MemberDigestMismatch,
        ErrorCode::CredentialInPacket,
        ErrorCode::LimitMembers,
        ErrorCode::LimitSize,
        ErrorCode::LimitManifest,
        ErrorCode::PacketDigestMismatch,
        ErrorCode::DigestSyntax,
        ErrorCode::Usage,
    ];

    /// Parses a code from its stable string form.
    pub fn from_str_code(s: &str) -> Option<ErrorCode> {
        Self::ALL.iter().copied().find(|c| c.as_str() == s)
    }

    /// What a person can do about it, in one sentence.
    pub const fn advice(self) -> &'static str {
        use ErrorCode::*;
        match self {
            PacketDigestMismatch => {
                "the packet is not the one that was asked for: fetch it again, or check the digest you gave"
            }
            MemberDigestMismatch | MemberMismatch | MemberMissing | MemberUnexpected => {
                "the packet was altered after it was packed: fetch it again from its source"
            }
            Truncated => "the packet is incomplete: fetch or copy it again",
            CredentialInPacket => {
                "credential files are never carried in a packet: repack without it"
            }
            LimitMembers | LimitSize | LimitManifest | PathTooLong => {
                "the packet exceeds the format's limits: pack less (use --exclude) or split the workspace"
            }
            DigestSyntax => "write digests as sha256: followed by 64 lowercase hex digits",
            Usage => "this is a bug in the program that drives the packet library",
            _ => "the file is not a valid pillbox.session-packet/1: refuse it and repack from the source workspace",
        }
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A refusal: a stable [`ErrorCode`], the member path involved (if any), the
/// byte offset in the packet (if known) and a message for people.
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

/// Shorthand for results in this crate.
pub type Result<T, E = Error> = core::result::Result<T, E>;
