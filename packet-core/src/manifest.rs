//! The manifest, `packet.json` (docs/session-packet.md, "Manifest"): its
//! types, its canonical JSON, and the rules the whole member set obeys.

use alloc::string::{String, ToString};
use alloc::vec::Vec;
use core::cmp::Ordering;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::canonical;
use crate::digest::Digest;
use crate::error::{Error, ErrorCode};
use crate::exclude::credential_rule;
use crate::header::{self, HeaderSpec, Kind, BLOCK};
use crate::limits::Limits;
use crate::path::{self, Root, HARNESS_ROOT, MANIFEST_PATH, WORKSPACE_ROOT};

/// The format id, the value of the manifest's `format` key.
pub const FORMAT_ID: &str = "pillbox.session-packet/1";

/// One member as the manifest lists it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    /// Canonical member path.
    pub path: String,
    /// Type.
    pub kind: Kind,
    /// Permission bits: 0o644 or 0o755 for files, 0o755 for directories,
    /// 0o777 for symlinks.
    pub mode: u32,
    /// Body size (files only; zero otherwise).
    pub size: u64,
    /// Body digest (files only).
    pub sha256: Option<Digest>,
    /// Link target (symlinks only).
    pub target: Option<String>,
}

impl Entry {
    /// A directory entry.
    pub fn dir(path: impl Into<String>) -> Entry {
        Entry {
            path: path.into(),
            kind: Kind::Dir,
            mode: 0o755,
            size: 0,
            sha256: None,
            target: None,
        }
    }

    /// A regular file entry; `executable` picks 0o755 over 0o644.
    pub fn file(path: impl Into<String>, size: u64, sha256: Digest, executable: bool) -> Entry {
        Entry {
            path: path.into(),
            kind: Kind::File,
            mode: if executable { 0o755 } else { 0o644 },
            size,
            sha256: Some(sha256),
            target: None,
        }
    }

    /// A symlink entry.
    pub fn symlink(path: impl Into<String>, target: impl Into<String>) -> Entry {
        Entry {
            path: path.into(),
            kind: Kind::Symlink,
            mode: 0o777,
            size: 0,
            sha256: None,
            target: Some(target.into()),
        }
    }

    /// What the member's header encodes.
    pub fn header_spec(&self) -> HeaderSpec<'_> {
        HeaderSpec {
            path: &self.path,
            kind: self.kind,
            mode: self.mode,
            size: self.size,
            target: self.target.as_deref().unwrap_or(""),
        }
    }

    /// The path relative to its root (empty for a root itself).
    pub fn relative_path(&self) -> &str {
        match self.path.split_once('/') {
            Some((_, rest)) => rest,
            None => "",
        }
    }
}

/// The harness whose state a packet carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum HarnessKind {
    /// OpenAI Codex CLI: a rollout under `harness/codex/sessions/`.
    Codex,
    /// Claude Code: a transcript under `harness/claude/`.
    Claude,
}

impl HarnessKind {
    /// The manifest's name for it.
    pub const fn as_str(self) -> &'static str {
        match self {
            HarnessKind::Codex => "codex",
            HarnessKind::Claude => "claude",
        }
    }
}

/// The harness descriptor.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Harness {
    /// Which harness.
    pub kind: HarnessKind,
    /// The model recorded in the session log, if any.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "present"
    )]
    pub model: Option<String>,
    /// The member holding the session log (Codex rollout, Claude Code transcript).
    pub rollout: String,
    /// The thread (Codex) or session (Claude Code) id: a lowercase UUID.
    pub thread_id: String,
}

/// One exclusion rule that removed something at pack time.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
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

/// Member counts and the sum of file sizes.
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

/// The manifest. Fields are declared in bytewise key order, which is the
/// canonical serialisation order.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    /// Exclusion rules that applied, sorted by (rule, pattern).
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "present"
    )]
    pub exclusions: Vec<Exclusion>,
    /// Always [`FORMAT_ID`].
    pub format: String,
    /// Harness state carried, if any.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "present"
    )]
    pub harness: Option<Harness>,
    /// Every member after `packet.json`, in archive order.
    #[serde(serialize_with = "ser_entries", deserialize_with = "de_entries")]
    pub members: Vec<Entry>,
    /// Counts and bytes.
    pub totals: Totals,
}

/// Deserialises an optional field that, when present, must not be null.
fn present<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de> + PresentOnly,
{
    T::from_present(d)
}

trait PresentOnly: Sized {
    fn from_present<'de, D: Deserializer<'de>>(d: D) -> Result<Self, D::Error>;
}

impl<T: for<'a> Deserialize<'a>> PresentOnly for Option<T> {
    fn from_present<'de, D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        T::deserialize(d).map(Some)
    }
}

impl<T: for<'a> Deserialize<'a>> PresentOnly for Vec<T> {
    fn from_present<'de, D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        <Vec<T> as Deserialize>::deserialize(d)
    }
}

/// The JSON shape of one entry, keys in bytewise order.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawEntry {
    mode: String,
    path: String,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "present"
    )]
    sha256: Option<String>,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "present"
    )]
    size: Option<u64>,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "present"
    )]
    target: Option<String>,
    #[serde(rename = "type")]
    kind: String,
}

fn ser_entries<S: Serializer>(entries: &[Entry], s: S) -> Result<S::Ok, S::Error> {
    use serde::ser::SerializeSeq;
    let mut seq = s.serialize_seq(Some(entries.len()))?;
    for e in entries {
        seq.serialize_element(&RawEntry {
            mode: alloc::format!("{:04o}", e.mode),
            path: e.path.clone(),
            sha256: e.sha256.map(|d| d.hex().to_string()),
            size: (e.kind == Kind::File).then_some(e.size),
            target: e.target.clone(),
            kind: String::from(e.kind.as_str()),
        })?;
    }
    seq.end()
}

fn de_entries<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<Entry>, D::Error> {
    // One entry at a time: no intermediate list of raw entries, which for
    // 250,000 members would cost as much memory as the entries themselves.
    struct Entries;
    impl<'de> serde::de::Visitor<'de> for Entries {
        type Value = Vec<Entry>;
        fn expecting(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
            f.write_str("a list of members")
        }
        fn visit_seq<A: serde::de::SeqAccess<'de>>(
            self,
            mut seq: A,
        ) -> Result<Vec<Entry>, A::Error> {
            use serde::de::Error as _;
            let mut out = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(1 << 16));
            while let Some(raw) = seq.next_element::<RawEntry>()? {
                out.push(entry_from_raw(raw).map_err(A::Error::custom)?);
            }
            Ok(out)
        }
    }
    d.deserialize_seq(Entries)
}

pub(crate) fn entry_from_raw(r: RawEntry) -> Result<Entry, String> {
    let kind = match r.kind.as_str() {
        "file" => Kind::File,
        "dir" => Kind::Dir,
        "symlink" => Kind::Symlink,
        other => {
            return Err(alloc::format!(
                "member {:?}: unknown type {other:?}",
                r.path
            ))
        }
    };
    let mode = match r.mode.as_str() {
        "0644" => 0o644,
        "0755" => 0o755,
        "0777" => 0o777,
        other => {
            return Err(alloc::format!(
                "member {:?}: mode {other:?} is not 0644, 0755 or 0777",
                r.path
            ))
        }
    };
    let file = kind == Kind::File;
    if file != r.size.is_some() || file != r.sha256.is_some() {
        return Err(alloc::format!(
            "member {:?}: size and sha256 are present for files and only for files",
            r.path
        ));
    }
    if (kind == Kind::Symlink) != r.target.is_some() {
        return Err(alloc::format!(
            "member {:?}: target is present for symlinks and only for symlinks",
            r.path
        ));
    }
    let sha256 = match r.sha256 {
        Some(h) => Some(
            Digest::from_hex(&h)
                .map_err(|e| alloc::format!("member {:?}: {}", r.path, e.message()))?,
        ),
        None => None,
    };
    Ok(Entry {
        path: r.path,
        kind,
        mode,
        size: r.size.unwrap_or(0),
        sha256,
        target: r.target,
    })
}

impl Manifest {
    /// Builds a manifest from entries in any order: sorts them, computes
    /// the totals, sorts the exclusions, and checks every rule.
    pub fn build(
        members: Vec<Entry>,
        harness: Option<Harness>,
        exclusions: Vec<Exclusion>,
        limits: &Limits,
    ) -> Result<Manifest, Error> {
        let manifest = Self::assemble(members, harness, exclusions);
        manifest.validate(limits)?;
        Ok(manifest)
    }

    /// [`Manifest::build`] without the checks: sorts the entries, computes
    /// the totals and sorts the exclusions. For a writer that lays the
    /// packet out while [`Manifest::validate`] runs on another thread;
    /// nothing made from an assembled manifest may be kept unless
    /// `validate` accepts it.
    pub fn assemble(
        mut members: Vec<Entry>,
        harness: Option<Harness>,
        mut exclusions: Vec<Exclusion>,
    ) -> Manifest {
        members.sort_by(|a, b| path::compare(&a.path, &b.path));
        exclusions.sort();
        Manifest {
            exclusions,
            format: String::from(FORMAT_ID),
            harness,
            totals: compute_totals(&members),
            members,
        }
    }

    /// The canonical JSON bytes of `packet.json`.
    pub fn to_canonical_json(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.canonical_len() as usize);
        canonical::write_manifest(self, &mut out);
        out
    }

    /// The length of the canonical JSON, without writing it.
    pub fn canonical_len(&self) -> u64 {
        let mut counter = canonical::Counter::default();
        canonical::write_manifest(self, &mut counter);
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
        let manifest: Manifest = serde_json::from_slice(bytes).map_err(|e| {
            Error::new(
                ErrorCode::ManifestInvalid,
                alloc::format!("packet.json: {e}"),
            )
            .at_path(MANIFEST_PATH)
        })?;
        if manifest.format != FORMAT_ID {
            return Err(Error::new(
                ErrorCode::ManifestInvalid,
                alloc::format!(
                    "format is {:?}, this reader understands {FORMAT_ID:?}",
                    manifest.format
                ),
            )
            .at_path(MANIFEST_PATH));
        }
        let mut comparer = canonical::Comparer::new(bytes);
        canonical::write_manifest(&manifest, &mut comparer);
        if !comparer.matches() {
            return Err(Error::new(
                ErrorCode::ManifestNotCanonical,
                "packet.json is not in canonical form (sorted keys, no whitespace, minimal escapes, no trailing newline)",
            )
            .at_path(MANIFEST_PATH));
        }
        manifest.validate_with_len(&limits, bytes.len() as u64)?;
        Ok(manifest)
    }

    /// Checks every rule the member set obeys (docs/session-packet.md,
    /// "Member set"): paths, order, parents, modes, symlinks, credentials,
    /// collisions, harness, totals and size limits.
    pub fn validate(&self, limits: &Limits) -> Result<(), Error> {
        self.validate_with_len(limits, self.canonical_len())
    }

    pub(crate) fn validate_with_len(
        &self,
        limits: &Limits,
        manifest_len: u64,
    ) -> Result<(), Error> {
        let limits = limits.clamped();
        if self.members.len() as u64 > limits.max_members {
            return Err(Error::new(
                ErrorCode::LimitMembers,
                alloc::format!(
                    "{} members, the limit is {}",
                    self.members.len(),
                    limits.max_members
                ),
            ));
        }
        let mut ancestors: Vec<&Entry> = Vec::new();
        let mut previous: Option<&str> = None;
        let mut has_workspace = false;
        let mut has_harness = false;
        for entry in &self.members {
            check_entry(entry, &limits)?;
            if let Some(prev) = previous {
                match path::compare(prev, &entry.path) {
                    Ordering::Less => {}
                    Ordering::Equal => {
                        return Err(Error::new(
                            ErrorCode::MemberDuplicate,
                            "the path appears twice",
                        )
                        .at_path(&entry.path))
                    }
                    Ordering::Greater => {
                        return Err(Error::new(
                            ErrorCode::MemberUnsorted,
                            alloc::format!("comes after {prev:?} but sorts before it"),
                        )
                        .at_path(&entry.path))
                    }
                }
            }
            previous = Some(&entry.path);
            match path::parent(&entry.path) {
                None => {
                    // A root: `workspace` or `harness`, always a directory.
                    if entry.kind != Kind::Dir {
                        return Err(Error::new(
                            ErrorCode::MemberParentMissing,
                            "a root must be a directory",
                        )
                        .at_path(&entry.path));
                    }
                    has_workspace |= entry.path == WORKSPACE_ROOT;
                    has_harness |= entry.path == HARNESS_ROOT;
                    ancestors.clear();
                }
                Some(parent) => {
                    while let Some(top) = ancestors.last() {
                        if is_ancestor(&top.path, &entry.path) {
                            break;
                        }
                        ancestors.pop();
                    }
                    match ancestors.last() {
                        Some(top) if top.path == parent && top.kind == Kind::Dir => {}
                        Some(top) if top.kind == Kind::Symlink => {
                            return Err(Error::new(
                                ErrorCode::MemberBelowSymlink,
                                alloc::format!("lies below the symlink {:?}", top.path),
                            )
                            .at_path(&entry.path))
                        }
                        _ => {
                            return Err(Error::new(
                                ErrorCode::MemberParentMissing,
                                alloc::format!(
                                "its parent {parent:?} is not a directory member listed before it"
                            ),
                            )
                            .at_path(&entry.path))
                        }
                    }
                }
            }
            if path::parent(&entry.path).is_none() {
                ancestors.clear();
            }
            ancestors.push(entry);
        }
        if !has_workspace {
            return Err(Error::new(
                ErrorCode::MemberMissing,
                "every packet has a \"workspace\" directory member",
            )
            .at_path(WORKSPACE_ROOT));
        }
        self.check_symlinks_through_symlinks(&limits)?;
        self.check_collisions()?;
        self.check_harness(has_harness)?;
        self.check_exclusions()?;
        if compute_totals(&self.members) != self.totals {
            return Err(Error::new(
                ErrorCode::ManifestTotals,
                "totals do not match the members listed",
            )
            .at_path(MANIFEST_PATH));
        }
        let size = packet_size(manifest_len, &self.members);
        if size > limits.max_packet_bytes {
            return Err(Error::new(
                ErrorCode::LimitSize,
                alloc::format!(
                    "the packet would be {size} bytes, the limit is {}",
                    limits.max_packet_bytes
                ),
            ));
        }
        Ok(())
    }

    /// Finds an entry by path (binary search in archive order).
    pub fn find(&self, path: &str) -> Option<(usize, &Entry)> {
        self.members
            .binary_search_by(|e| path::compare(&e.path, path))
            .ok()
            .map(|i| (i, &self.members[i]))
    }

    /// The exact size of the packet these members make, in bytes.
    pub fn packet_size(&self) -> u64 {
        packet_size(self.canonical_len(), &self.members)
    }

    fn check_symlinks_through_symlinks(&self, limits: &Limits) -> Result<(), Error> {
        for entry in self.members.iter().filter(|e| e.kind == Kind::Symlink) {
            let target = entry.target.as_deref().unwrap_or("");
            let resolved =
                path::resolve_symlink_target(&entry.path, target, limits.max_path_bytes)?;
            for dir in &resolved.through {
                if let Some((_, hop)) = self.find(dir) {
                    if hop.kind == Kind::Symlink {
                        return Err(Error::new(
                            ErrorCode::SymlinkThroughSymlink,
                            alloc::format!(
                                "target {target:?} passes through the symlink {:?}",
                                hop.path
                            ),
                        )
                        .at_path(&entry.path));
                    }
                }
            }
        }
        Ok(())
    }

    fn check_collisions(&self) -> Result<(), Error> {
        // A 64-bit hash of each portable key, sorted: 16 bytes a member
        // rather than a copy of every key. Equal hashes are then confirmed
        // on the keys themselves.
        let mut keys: Vec<(u64, usize)> = self
            .members
            .iter()
            .enumerate()
            .map(|(i, e)| (portable_key_hash(&e.path), i))
            .collect();
        keys.sort_unstable();
        // Of all colliding pairs, name the one whose later member comes
        // first in archive order (a parent's collision before its children's).
        let mut found: Option<(usize, usize)> = None;
        for pair in keys.windows(2) {
            if pair[0].0 != pair[1].0 {
                continue;
            }
            let (i, j) = (pair[0].1.min(pair[1].1), pair[0].1.max(pair[1].1));
            let (a, b) = (&self.members[i].path, &self.members[j].path);
            if found.is_none_or(|(_, best)| j < best)
                && path::portable_key(a) == path::portable_key(b)
            {
                found = Some((i, j));
            }
        }
        if let Some((i, j)) = found {
            let (first, second) = (&self.members[i].path, &self.members[j].path);
            return Err(Error::new(
                ErrorCode::PathCollision,
                alloc::format!(
                    "{first:?} and {second:?} are the same file on a case- or normalisation-insensitive file system (macOS, Windows)"
                ),
            )
            .at_path(second.as_str()));
        }
        Ok(())
    }

    fn check_harness(&self, has_harness_root: bool) -> Result<(), Error> {
        let Some(h) = &self.harness else {
            if has_harness_root {
                return Err(Error::new(
                    ErrorCode::HarnessInvalid,
                    "harness members are present but the manifest has no harness descriptor",
                )
                .at_path(HARNESS_ROOT));
            }
            return Ok(());
        };
        let invalid =
            |msg: String| Error::new(ErrorCode::HarnessInvalid, msg).at_path(MANIFEST_PATH);
        if !is_canonical_uuid(&h.thread_id) {
            return Err(invalid(alloc::format!(
                "thread_id {:?} is not a lowercase hyphenated UUID",
                h.thread_id
            )));
        }
        if let Some(model) = &h.model {
            if model.is_empty() || model.len() > 256 || model.chars().any(char::is_control) {
                return Err(invalid(String::from(
                    "model must be 1 to 256 characters without control characters",
                )));
            }
        }
        let prefix = alloc::format!("{HARNESS_ROOT}/{}/", h.kind.as_str());
        let rollout_ok = h.rollout.starts_with(&prefix)
            && self
                .find(&h.rollout)
                .is_some_and(|(_, e)| e.kind == Kind::File);
        if !rollout_ok {
            return Err(invalid(alloc::format!(
                "rollout {:?} is not a file member under {prefix:?}",
                h.rollout
            )));
        }
        if !path::file_name(&h.rollout).contains(h.thread_id.as_str()) {
            return Err(invalid(alloc::format!(
                "rollout {:?} is not named for thread {}",
                h.rollout,
                h.thread_id
            )));
        }
        let kind_root = prefix.trim_end_matches('/');
        let stray = self.members.iter().find(|e| {
            path::root_of(&e.path) == Some(Root::Harness)
                && e.path != HARNESS_ROOT
                && e.path != kind_root
                && !e.path.starts_with(&prefix)
        });
        if let Some(stray) = stray {
            return Err(Error::new(
                ErrorCode::HarnessInvalid,
                alloc::format!("harness members live under {prefix:?}"),
            )
            .at_path(&stray.path));
        }
        Ok(())
    }

    fn check_exclusions(&self) -> Result<(), Error> {
        for pair in self.exclusions.windows(2) {
            if pair[0] >= pair[1] {
                return Err(Error::new(
                    ErrorCode::ManifestInvalid,
                    "exclusions are sorted by rule, then pattern, without repeats",
                )
                .at_path(MANIFEST_PATH));
            }
        }
        for e in &self.exclusions {
            let bad = e.matched == 0
                || e.rule.is_empty()
                || e.pattern.is_empty()
                || e.rule
                    .chars()
                    .chain(e.pattern.chars())
                    .any(char::is_control);
            if bad {
                return Err(Error::new(
                    ErrorCode::ManifestInvalid,
                    "an exclusion names a rule and a pattern and matched at least once",
                )
                .at_path(MANIFEST_PATH));
            }
        }
        Ok(())
    }
}

/// FNV-1a, 64 bits: a fast, deterministic hash for bucketing keys.
fn fnv1a(bytes: impl IntoIterator<Item = u8>) -> u64 {
    bytes.into_iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// `fnv1a` of [`path::portable_key`], without building the key when the
/// path is ASCII (its key is then its ASCII lowercase).
fn portable_key_hash(p: &str) -> u64 {
    if p.is_ascii() {
        fnv1a(p.bytes().map(|b| b.to_ascii_lowercase()))
    } else {
        fnv1a(path::portable_key(p).bytes())
    }
}

fn is_ancestor(dir: &str, path: &str) -> bool {
    path.len() > dir.len() && path.starts_with(dir) && path.as_bytes()[dir.len()] == b'/'
}

/// Checks one entry on its own: path, mode for its type, fields for its
/// type, credentials.
pub fn check_entry(entry: &Entry, limits: &Limits) -> Result<(), Error> {
    let path = path::check_member_path_str(&entry.path, limits.max_path_bytes)?;
    let mode_ok = match entry.kind {
        Kind::File => entry.mode == 0o644 || entry.mode == 0o755,
        Kind::Dir => entry.mode == 0o755,
        Kind::Symlink => entry.mode == 0o777,
    };
    if !mode_ok {
        return Err(Error::new(
            ErrorCode::ModeNotCanonical,
            alloc::format!(
                "mode {:o} is not canonical for a {} (files 644 or 755, directories 755, symlinks 777)",
                entry.mode,
                entry.kind.as_str()
            ),
        )
        .at_path(path));
    }
    let file = entry.kind == Kind::File;
    if file != entry.sha256.is_some()
        || (!file && entry.size != 0)
        || (entry.kind == Kind::Symlink) != entry.target.is_some()
    {
        return Err(Error::new(
            ErrorCode::ManifestInvalid,
            "size and sha256 belong to files, target to symlinks",
        )
        .at_path(path));
    }
    if entry.size > limits.max_packet_bytes {
        return Err(Error::new(
            ErrorCode::LimitSize,
            alloc::format!(
                "{} bytes is more than the packet limit of {}",
                entry.size,
                limits.max_packet_bytes
            ),
        )
        .at_path(path));
    }
    if entry.kind == Kind::Symlink {
        let target = entry.target.as_deref().unwrap_or("");
        path::resolve_symlink_target(path, target, limits.max_path_bytes)?;
    }
    if entry.kind != Kind::Dir {
        if let Some(rule) = credential_rule(entry.relative_path()) {
            return Err(Error::new(
                ErrorCode::CredentialInPacket,
                alloc::format!("matches the credential rule {:?} ({})", rule.id, rule.why),
            )
            .at_path(path));
        }
    }
    Ok(())
}

/// Counts members and sums file sizes.
pub fn compute_totals(members: &[Entry]) -> Totals {
    let mut t = Totals {
        members: members.len() as u64,
        ..Totals::default()
    };
    for e in members {
        match e.kind {
            Kind::File => {
                t.files += 1;
                t.bytes = t.bytes.saturating_add(e.size);
            }
            Kind::Dir => t.directories += 1,
            Kind::Symlink => t.symlinks += 1,
        }
    }
    t
}

/// The exact packet size for a manifest of `manifest_len` bytes and these
/// members: every header, every padded body, the end marker. Saturates
/// instead of overflowing.
pub fn packet_size(manifest_len: u64, members: &[Entry]) -> u64 {
    let manifest_spec = HeaderSpec {
        path: MANIFEST_PATH,
        kind: Kind::File,
        mode: 0o644,
        size: manifest_len,
        target: "",
    };
    let mut total =
        header::encoded_len(&manifest_spec).saturating_add(header::padded(manifest_len));
    for e in members {
        total = total
            .saturating_add(header::encoded_len(&e.header_spec()))
            .saturating_add(header::padded(e.size));
    }
    total.saturating_add(2 * BLOCK as u64)
}

/// Whether `s` is a lowercase hyphenated UUID (8-4-4-4-12 hex digits).
pub fn is_canonical_uuid(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() == 36
        && b.iter().enumerate().all(|(i, &c)| match i {
            8 | 13 | 18 | 23 => c == b'-',
            _ => c.is_ascii_digit() || (b'a'..=b'f').contains(&c),
        })
}
