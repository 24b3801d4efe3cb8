//! The manifest, `packet.json` (docs/session-packet.md §5): its types here,
//! its canonical JSON and strict parse in [`json`], its parse as it streams
//! in [`stream`], the rules the whole member set obeys in [`rules`], the
//! manifest as parsed, before its paths are checked, in [`unchecked`], and
//! one member as reports show it in [`summary`].

pub(crate) mod json;
mod rules;
pub(crate) mod stream;
mod summary;
mod unchecked;

pub use summary::MemberSummary;
pub use unchecked::{UncheckedManifest, UncheckedMember};

use alloc::string::String;
use alloc::vec::Vec;

use serde::{Deserialize, Serialize};

use crate::digest::Digest;
use crate::error::{Error, ErrorCode};
use crate::format::Format;
use crate::header::{self, HeaderSpec, Kind, BLOCK};
use crate::limits::Limits;
use crate::path::{self, IntoMemberPath, MemberPath, MANIFEST_PATH};

/// A member's permission bits, one of the format's canonical modes
/// (docs/session-packet.md §4): a file's `0644` or `0755`, a directory's
/// `0755`, a symlink's `0777`. Follows from the member's [`Entry`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Mode(u32);

impl Mode {
    /// A regular file's.
    pub const FILE: Mode = Mode(0o644);
    /// An executable file's (owner-execute was set on the source).
    pub const EXECUTABLE: Mode = Mode(0o755);
    /// A directory's.
    pub const DIR: Mode = Mode(0o755);
    /// A symlink's.
    pub const SYMLINK: Mode = Mode(0o777);

    /// The permission bits.
    pub const fn bits(self) -> u32 {
        self.0
    }

    /// The manifest's four octal digits: `"0644"`, `"0755"` or `"0777"`.
    pub const fn as_str(self) -> &'static str {
        match self.0 {
            0o644 => "0644",
            0o755 => "0755",
            _ => "0777",
        }
    }

    /// The mode whose manifest form is `text` (`"0644"`, `"0755"`,
    /// `"0777"`).
    pub fn parse(text: &str) -> Option<Mode> {
        [Mode::FILE, Mode::EXECUTABLE, Mode::SYMLINK]
            .into_iter()
            .find(|m| m.as_str() == text)
    }

    /// Whether the owner-execute bit is set.
    pub const fn is_executable(self) -> bool {
        self.0 & 0o100 != 0
    }
}

impl core::fmt::Display for Mode {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The manifest's four octal digits, as its JSON writes them.
impl Serialize for Mode {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

/// What a member is, with exactly the facts its type has: a file has a
/// size, a digest and an execute bit; a directory nothing more; a symlink
/// its target.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Entry {
    /// A regular file.
    File {
        /// Its body's size in bytes.
        size: u64,
        /// Its body's SHA-256.
        sha256: Digest,
        /// Mode 0755 rather than 0644.
        executable: bool,
    },
    /// A directory.
    Dir,
    /// A symbolic link.
    Symlink {
        /// Its target, verbatim.
        target: String,
    },
}

impl Entry {
    /// Its type.
    pub const fn kind(&self) -> Kind {
        match self {
            Entry::File { .. } => Kind::File,
            Entry::Dir => Kind::Dir,
            Entry::Symlink { .. } => Kind::Symlink,
        }
    }

    /// Its mode.
    pub const fn mode(&self) -> Mode {
        match self {
            Entry::File {
                executable: true, ..
            } => Mode::EXECUTABLE,
            Entry::File { .. } => Mode::FILE,
            Entry::Dir => Mode::DIR,
            Entry::Symlink { .. } => Mode::SYMLINK,
        }
    }

    /// The size its header declares: a file's body size, zero for the
    /// other types.
    pub const fn size(&self) -> u64 {
        match self {
            Entry::File { size, .. } => *size,
            Entry::Dir | Entry::Symlink { .. } => 0,
        }
    }

    /// A symlink's target.
    pub fn target(&self) -> Option<&str> {
        match self {
            Entry::Symlink { target } => Some(target),
            Entry::File { .. } | Entry::Dir => None,
        }
    }

    /// What the header of a member at `path` encodes.
    pub(crate) fn header_spec<'a>(&'a self, path: &'a str) -> HeaderSpec<'a> {
        HeaderSpec {
            path,
            kind: self.kind(),
            mode: self.mode().bits(),
            size: self.size(),
            target: self.target().unwrap_or(""),
        }
    }
}

/// One member as the manifest lists it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Member {
    /// Its path, which follows the path rules ([`MemberPath`]).
    pub path: MemberPath,
    /// Its type and the facts that type has.
    pub entry: Entry,
}

/// A file's body as the manifest names it: its size and its SHA-256.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Body {
    /// Its SHA-256.
    pub sha256: Digest,
    /// Its size in bytes.
    pub size: u64,
}

impl Member {
    /// A directory member.
    #[track_caller]
    pub fn dir(path: impl IntoMemberPath) -> Member {
        Member {
            path: path.into_member_path(),
            entry: Entry::Dir,
        }
    }

    /// A regular file member; `executable` picks 0o755 over 0o644.
    #[track_caller]
    pub fn file(path: impl IntoMemberPath, size: u64, sha256: Digest, executable: bool) -> Member {
        Member {
            path: path.into_member_path(),
            entry: Entry::File {
                size,
                sha256,
                executable,
            },
        }
    }

    /// A symlink member.
    #[track_caller]
    pub fn symlink(path: impl IntoMemberPath, target: impl Into<String>) -> Member {
        Member {
            path: path.into_member_path(),
            entry: Entry::Symlink {
                target: target.into(),
            },
        }
    }

    /// Its type.
    pub const fn kind(&self) -> Kind {
        self.entry.kind()
    }

    /// Its mode.
    pub const fn mode(&self) -> Mode {
        self.entry.mode()
    }

    /// The size its header declares: a file's body size, zero for the
    /// other types.
    pub const fn size(&self) -> u64 {
        self.entry.size()
    }

    /// A file's SHA-256.
    pub const fn sha256(&self) -> Option<Digest> {
        match self.entry {
            Entry::File { sha256, .. } => Some(sha256),
            Entry::Dir | Entry::Symlink { .. } => None,
        }
    }

    /// A symlink's target.
    pub fn target(&self) -> Option<&str> {
        self.entry.target()
    }

    /// A file's body, when it has bytes in the packet (a file of at least
    /// one byte).
    pub const fn body(&self) -> Option<Body> {
        match self.entry {
            Entry::File { size, sha256, .. } if size > 0 => Some(Body { sha256, size }),
            _ => None,
        }
    }

    /// What the member's header encodes.
    pub(crate) fn header_spec(&self) -> HeaderSpec<'_> {
        self.entry.header_spec(&self.path)
    }

    /// The path relative to its root (empty for a root itself).
    pub fn relative_path(&self) -> &str {
        self.path.relative()
    }
}

/// The harness whose state a packet carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum HarnessKind {
    /// OpenAI Codex CLI: a rollout under `harness/codex/sessions/`.
    Codex,
    /// Claude Code: a transcript under `harness/claude/`.
    Claude,
    /// OpenCode: a session as `opencode export` prints it, under
    /// `harness/opencode/`.
    Opencode,
}

impl HarnessKind {
    /// Every kind, in the manifest's order of names.
    pub const ALL: [HarnessKind; 3] = [
        HarnessKind::Claude,
        HarnessKind::Codex,
        HarnessKind::Opencode,
    ];

    /// The manifest's name for it.
    pub const fn as_str(self) -> &'static str {
        match self {
            HarnessKind::Codex => "codex",
            HarnessKind::Claude => "claude",
            HarnessKind::Opencode => "opencode",
        }
    }

    /// The kind the manifest names `name`, if any.
    pub fn from_name(name: &str) -> Option<HarnessKind> {
        Self::ALL.into_iter().find(|k| k.as_str() == name)
    }

    /// The directory member every member of this harness lies under:
    /// `harness/<kind>` (docs/session-packet.md §5).
    pub const fn root(self) -> &'static str {
        match self {
            HarnessKind::Codex => "harness/codex",
            HarnessKind::Claude => "harness/claude",
            HarnessKind::Opencode => "harness/opencode",
        }
    }

    /// The member path of `relative` (a path below [`HarnessKind::root`]).
    pub fn member_path(self, relative: &str) -> String {
        crate::path::member_below(self.root(), relative)
    }

    /// `member`'s path below [`HarnessKind::root`], if it lies below it.
    pub fn relative_path(self, member: &str) -> Option<&str> {
        crate::path::below(self.root(), member).filter(|rest| !rest.is_empty())
    }

    /// Whether `id` can be this harness's session id: a lowercase
    /// hyphenated UUID for Codex and Claude Code, `ses_` and 1 to 64 ASCII
    /// letters and digits for OpenCode (docs/session-packet.md §5).
    pub fn accepts_session_id(self, id: &str) -> bool {
        match self {
            HarnessKind::Codex | HarnessKind::Claude => Harness::is_session_id(id),
            HarnessKind::Opencode => id.strip_prefix("ses_").is_some_and(|rest| {
                (1..=64).contains(&rest.len()) && rest.bytes().all(|b| b.is_ascii_alphanumeric())
            }),
        }
    }

    /// What [`HarnessKind::accepts_session_id`] accepts, in words, for
    /// messages.
    pub const fn session_id_shape(self) -> &'static str {
        match self {
            HarnessKind::Codex | HarnessKind::Claude => {
                "a canonical id (a lowercase hyphenated UUID such as 0199a213-81c0-7800-8aa1-bbab2a035a53)"
            }
            HarnessKind::Opencode => {
                "an OpenCode session id (ses_ and letters and digits, such as ses_dceb97773ffeEbFZpPTlgwYItc)"
            }
        }
    }

    /// What this harness calls its session id, for messages.
    pub const fn session_id_name(self) -> &'static str {
        match self {
            HarnessKind::Codex => "thread id",
            HarnessKind::Claude | HarnessKind::Opencode => "session id",
        }
    }
}

/// The harness descriptor. Its fields keep the manifest's names on the
/// wire (`rollout`, `thread_id`); the Rust names say what they are for
/// every harness.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Harness {
    /// Which harness.
    pub kind: HarnessKind,
    /// The model recorded in the session log, if any.
    #[serde(default, deserialize_with = "json::present")]
    pub model: Option<String>,
    /// The model's provider as the harness names it (OpenCode's
    /// `providerID`), if recorded.
    #[serde(default, deserialize_with = "json::present")]
    pub provider: Option<String>,
    /// The member holding the session log (a Codex rollout, a Claude Code
    /// transcript, an OpenCode export). The manifest's `rollout`.
    #[serde(rename = "rollout")]
    pub session_log: String,
    /// The Codex thread id, Claude Code session id or OpenCode session id
    /// ([`HarnessKind::accepts_session_id`]). The manifest's `thread_id`.
    #[serde(rename = "thread_id")]
    pub session_id: String,
    /// The version of the harness that wrote the session log, when pack
    /// learnt it (the OpenCode that exported the session).
    #[serde(default, deserialize_with = "json::present")]
    pub version: Option<String>,
}

impl Harness {
    /// A descriptor with no provider and no version (what Codex and Claude
    /// Code packets record).
    pub fn new(
        kind: HarnessKind,
        model: Option<String>,
        session_log: String,
        session_id: String,
    ) -> Harness {
        Harness {
            kind,
            model,
            provider: None,
            session_log,
            session_id,
            version: None,
        }
    }

    /// Whether `id` is a lowercase hyphenated UUID (8-4-4-4-12 hex
    /// digits): a Codex thread id or a Claude Code session id.
    pub fn is_session_id(id: &str) -> bool {
        let b = id.as_bytes();
        b.len() == 36
            && b.iter().enumerate().all(|(i, &c)| match i {
                8 | 13 | 18 | 23 => c == b'-',
                _ => c.is_ascii_digit() || (b'a'..=b'f').contains(&c),
            })
    }
}

/// One exclusion rule that removed something at pack time.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Exclusion {
    /// How many paths it excluded (at least one).
    pub matched: u64,
    /// The pattern that matched, as written.
    pub pattern: String,
    /// The rule: a credential rule id, `user` for `--exclude`, or
    /// `special-file` for sockets, FIFOs and devices.
    pub rule: String,
}

/// Member counts and the sum of file sizes. Reports print it with the
/// manifest's keys (its `Serialize`); `packet.json` itself is written only
/// by the canonical encoder.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Totals {
    /// Sum of file sizes.
    pub bytes: u64,
    /// Directory members.
    pub directories: u64,
    /// File members.
    pub files: u64,
    /// All members after `packet.json`.
    pub members: u64,
    /// Symlink members.
    pub symlinks: u64,
}

impl Totals {
    /// Counts `members` and sums their file sizes.
    pub fn of(members: &[Member]) -> Totals {
        Totals::of_entries(members.iter().map(|m| &m.entry))
    }

    /// Counts members by their entries and sums their file sizes.
    pub fn of_entries<'a>(entries: impl IntoIterator<Item = &'a Entry>) -> Totals {
        let mut t = Totals::default();
        for entry in entries {
            t.members += 1;
            match *entry {
                Entry::File { size, .. } => {
                    t.files += 1;
                    t.bytes = t.bytes.saturating_add(size);
                }
                Entry::Dir => t.directories += 1,
                Entry::Symlink { .. } => t.symlinks += 1,
            }
        }
        t
    }
}

/// The manifest. Fields are declared in bytewise key order, which is the
/// canonical serialisation order. Its JSON is read through
/// [`UncheckedManifest`], whose paths [`Manifest::parse`] then checks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Manifest {
    /// Exclusion rules that applied, sorted by (rule, pattern).
    pub exclusions: Vec<Exclusion>,
    /// The format version.
    pub format: Format,
    /// Harness state carried, if any.
    pub harness: Option<Harness>,
    /// Every member after `packet.json`, in archive order.
    pub members: Vec<Member>,
    /// Counts and bytes.
    pub totals: Totals,
}

impl Manifest {
    /// Builds a manifest from members in any order: sorts them, computes
    /// the totals, sorts the exclusions, and checks every rule.
    pub fn build(
        members: Vec<Member>,
        harness: Option<Harness>,
        exclusions: Vec<Exclusion>,
        limits: &Limits,
    ) -> Result<Manifest, Error> {
        let manifest = Self::assemble(members, harness, exclusions);
        manifest.validate(limits)?;
        Ok(manifest)
    }

    /// [`Manifest::build`] without the checks: sorts the members, computes
    /// the totals and sorts the exclusions. For a writer that lays the
    /// packet out while [`Manifest::validate`] runs on another thread;
    /// nothing made from an assembled manifest may be kept unless
    /// `validate` accepts it.
    pub fn assemble(
        mut members: Vec<Member>,
        harness: Option<Harness>,
        mut exclusions: Vec<Exclusion>,
    ) -> Manifest {
        members.sort_by(|a, b| path::compare(&a.path, &b.path));
        exclusions.sort();
        Manifest {
            exclusions,
            format: Format::CURRENT,
            harness,
            totals: Totals::of(&members),
            members,
        }
    }

    /// The canonical JSON bytes of `packet.json`.
    pub fn to_canonical_json(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.canonical_len() as usize);
        json::write_manifest(self, &mut out);
        out
    }

    /// The SHA-256 of the canonical JSON, without holding it: a /2
    /// packet's digest (docs/session-packet.md §9).
    pub fn json_digest(&self) -> Digest {
        let mut hasher = crate::digest::Hasher::new();
        json::write_manifest(self, &mut hasher);
        hasher.finish()
    }

    /// The length of the canonical JSON, without writing it.
    pub fn canonical_len(&self) -> u64 {
        let mut counter = json::Counter::default();
        json::write_manifest(self, &mut counter);
        counter.0
    }

    /// Parses `packet.json`: typed, closed objects, then byte-for-byte
    /// canonical form, then every member-set rule.
    pub fn parse(bytes: &[u8], limits: &Limits) -> Result<Manifest, Error> {
        let limits = limits.clamped();
        if bytes.len() as u64 > limits.max_manifest_bytes {
            return Err(Error::new(
                ErrorCode::LimitManifest,
                alloc::format!(
                    "packet.json is {} bytes, the limit is {}",
                    bytes.len(),
                    limits.max_manifest_bytes
                ),
            )
            .at_path(MANIFEST_PATH));
        }
        json::parse_canonical(bytes)?.check(&limits, bytes.len() as u64)
    }

    /// Checks every rule the member set obeys (docs/session-packet.md,
    /// "Member set"): paths, order, parents, modes, symlinks, credentials,
    /// collisions, harness, totals and size limits.
    pub fn validate(&self, limits: &Limits) -> Result<(), Error> {
        self.validate_with_len(limits, self.canonical_len())
    }

    /// Finds a member by path (binary search in archive order).
    pub fn find(&self, path: &str) -> Option<(usize, &Member)> {
        self.members
            .binary_search_by(|m| path::compare(&m.path, path))
            .ok()
            .map(|i| (i, &self.members[i]))
    }

    /// The exact size of the packet these members make, in bytes.
    pub fn packet_size(&self) -> u64 {
        packet_size(self.canonical_len(), &self.members)
    }
}

/// The exact packet size for a manifest of `manifest_len` bytes and these
/// members: every header, every padded body, the end marker. Saturates
/// instead of overflowing.
pub(crate) fn packet_size(manifest_len: u64, members: &[Member]) -> u64 {
    let mut total = header::encoded_len(&HeaderSpec::manifest(manifest_len))
        .saturating_add(header::padded(manifest_len));
    for m in members {
        total = total
            .saturating_add(header::encoded_len(&m.header_spec()))
            .saturating_add(header::padded(m.size()));
    }
    total.saturating_add(2 * BLOCK as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_kind_takes_its_own_session_ids() {
        let uuid = "0199a213-81c0-7800-8aa1-bbab2a035a53";
        let ses = "ses_dceb97773ffeEbFZpPTlgwYItc";
        for kind in [HarnessKind::Codex, HarnessKind::Claude] {
            assert!(kind.accepts_session_id(uuid));
            assert!(!kind.accepts_session_id(ses));
        }
        let o = HarnessKind::Opencode;
        assert!(o.accepts_session_id(ses));
        assert!(!o.accepts_session_id(uuid));
        assert!(!o.accepts_session_id("ses_"));
        assert!(!o.accepts_session_id("ses_a/b"));
        assert!(!o.accepts_session_id(&alloc::format!("ses_{}", "a".repeat(65))));
        assert!(o.accepts_session_id(&alloc::format!("ses_{}", "a".repeat(64))));
    }

    #[test]
    fn kinds_are_found_by_their_manifest_names() {
        for kind in HarnessKind::ALL {
            assert_eq!(HarnessKind::from_name(kind.as_str()), Some(kind));
        }
        assert_eq!(HarnessKind::from_name("Codex"), None);
    }
}
