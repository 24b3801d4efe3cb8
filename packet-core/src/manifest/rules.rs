//! The rules the whole member set obeys (docs/session-packet.md §2, §3,
//! §5 to §8): each member on its own, then order, parents, symlinks,
//! collisions, the harness descriptor, exclusions, totals and size limits.

use alloc::string::String;
use alloc::vec::Vec;
use core::cmp::Ordering;

use crate::error::{Error, ErrorCode};
use crate::exclude::{credential_rule, InPacket};
use crate::header::{self, Kind};
use crate::limits::Limits;
use crate::manifest::{packet_size, Entry, HarnessKind, Manifest, Member, Totals};
use crate::path::{self, Root, HARNESS_ROOT, MANIFEST_PATH, WORKSPACE_ROOT};

impl Manifest {
    /// [`Manifest::validate`] for a manifest whose canonical JSON is
    /// `manifest_len` bytes long (known to a reader, which has just read
    /// it).
    pub(crate) fn validate_with_len(
        &self,
        limits: &Limits,
        manifest_len: u64,
    ) -> Result<(), Error> {
        let limits = limits.for_format(self.format);
        check_member_count(self.members.len(), &limits)?;
        let (has_workspace, has_harness) = self.check_members_in_order(&limits)?;
        if !has_workspace {
            return Err(Error::new(
                ErrorCode::MemberMissing,
                "every packet has a \"workspace\" directory member",
            )
            .at_path(WORKSPACE_ROOT));
        }
        self.check_symlinks_through_symlinks(&limits)?;
        self.check_collisions()?;
        self.check_bodies()?;
        self.check_harness(has_harness)?;
        self.check_exclusions()?;
        if Totals::of(&self.members) != self.totals {
            return Err(Error::new(
                ErrorCode::ManifestTotals,
                "totals do not match the members listed",
            )
            .at_path(MANIFEST_PATH));
        }
        self.check_size(&limits, manifest_len)
    }

    /// The rules checked member by member, in archive order: each member
    /// on its own, then its place after the previous one and below its
    /// parent. Returns whether the `workspace` and `harness` roots are
    /// listed.
    pub(crate) fn check_members_in_order(&self, limits: &Limits) -> Result<(bool, bool), Error> {
        let mut ancestors: Vec<&Member> = Vec::new();
        let mut previous: Option<&str> = None;
        let mut has_workspace = false;
        let mut has_harness = false;
        for member in &self.members {
            check_member(member, limits)?;
            if let Some(prev) = previous {
                match path::compare(prev, &member.path) {
                    Ordering::Less => {}
                    Ordering::Equal => {
                        return Err(Error::new(
                            ErrorCode::MemberDuplicate,
                            "the path appears twice",
                        )
                        .at_path(&member.path))
                    }
                    Ordering::Greater => {
                        return Err(Error::new(
                            ErrorCode::MemberUnsorted,
                            alloc::format!("comes after {prev:?} but sorts before it"),
                        )
                        .at_path(&member.path))
                    }
                }
            }
            previous = Some(member.path.as_str());
            match path::parent(&member.path) {
                None => {
                    // A root: `workspace` or `harness`, always a directory.
                    if member.kind() != Kind::Dir {
                        return Err(Error::new(
                            ErrorCode::MemberParentMissing,
                            "a root must be a directory",
                        )
                        .at_path(&member.path));
                    }
                    has_workspace |= member.path == WORKSPACE_ROOT;
                    has_harness |= member.path == HARNESS_ROOT;
                    ancestors.clear();
                }
                Some(parent) => {
                    while let Some(top) = ancestors.last() {
                        if is_ancestor(&top.path, &member.path) {
                            break;
                        }
                        ancestors.pop();
                    }
                    match ancestors.last() {
                        Some(top) if top.path == parent && top.kind() == Kind::Dir => {}
                        Some(top) if top.kind() == Kind::Symlink => {
                            return Err(Error::new(
                                ErrorCode::MemberBelowSymlink,
                                alloc::format!("lies below the symlink {:?}", top.path),
                            )
                            .at_path(&member.path))
                        }
                        _ => {
                            return Err(Error::new(
                                ErrorCode::MemberParentMissing,
                                alloc::format!(
                                "its parent {parent:?} is not a directory member listed before it"
                            ),
                            )
                            .at_path(&member.path))
                        }
                    }
                }
            }
            if path::parent(&member.path).is_none() {
                ancestors.clear();
            }
            ancestors.push(member);
        }
        Ok((has_workspace, has_harness))
    }

    /// The limits on the member count and on the packet's size, alone:
    /// both follow from the members listed and their sizes, so a packer
    /// checks them before it reads a byte of any file (a sparse file of
    /// terabytes is refused for its size, not hashed first).
    pub fn check_limits(&self, limits: &Limits) -> Result<(), Error> {
        let limits = limits.for_format(self.format);
        check_member_count(self.members.len(), &limits)?;
        self.check_size(&limits, self.canonical_len())
    }

    fn check_size(&self, limits: &Limits, manifest_len: u64) -> Result<(), Error> {
        limits.check_packet_size(packet_size(manifest_len, &self.members))
    }

    fn check_symlinks_through_symlinks(&self, limits: &Limits) -> Result<(), Error> {
        for member in &self.members {
            let Entry::Symlink { target } = &member.entry else {
                continue;
            };
            let resolved =
                path::resolve_symlink_target(&member.path, target, limits.max_path_bytes)?;
            for dir in &resolved.through {
                if let Some((_, hop)) = self.find(dir) {
                    if hop.kind() == Kind::Symlink {
                        return Err(Error::new(
                            ErrorCode::SymlinkThroughSymlink,
                            alloc::format!(
                                "target {target:?} passes through the symlink {:?}",
                                hop.path
                            ),
                        )
                        .at_path(&member.path));
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

    /// One sha256 names one body: two files that give the same digest with
    /// different sizes cannot both be what they say, and a consumer that
    /// keeps each body once, by its digest, would serve one of them wrong.
    fn check_bodies(&self) -> Result<(), Error> {
        let mut bodies: Vec<(&crate::digest::Digest, usize, u64)> = self
            .members
            .iter()
            .enumerate()
            .filter_map(|(i, m)| match &m.entry {
                Entry::File { size, sha256, .. } => Some((sha256, i, *size)),
                _ => None,
            })
            .collect();
        bodies.sort_unstable();
        // Name the first member, in archive order, whose size differs from
        // that of an earlier member with its sha256: in each group of one
        // sha256, the first whose size is not the group's first member's.
        let conflict = bodies
            .chunk_by(|a, b| a.0 == b.0)
            .filter_map(|group| {
                let first = group[0];
                let later = group.iter().find(|b| b.2 != first.2)?;
                Some((later.1, first.1))
            })
            .min();
        if let Some((later, other)) = conflict {
            let (a, b) = (&self.members[other], &self.members[later]);
            return Err(Error::new(
                ErrorCode::DigestSizeConflict,
                alloc::format!(
                    "{:?} and {:?} have the same sha256 but sizes {} and {}",
                    a.path,
                    b.path,
                    a.size(),
                    b.size()
                ),
            )
            .at_path(&b.path));
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
        // The manifest's names for the session id and log are `thread_id`
        // and `rollout`; the messages use them.
        if !h.kind.accepts_session_id(&h.session_id) {
            let shape = match h.kind {
                HarnessKind::Codex | HarnessKind::Claude => "a lowercase hyphenated UUID",
                HarnessKind::Opencode => "ses_ and 1 to 64 ASCII letters and digits",
            };
            return Err(invalid(alloc::format!(
                "thread_id {:?} is not {shape}",
                h.session_id
            )));
        }
        for (key, value) in [
            ("model", &h.model),
            ("provider", &h.provider),
            ("version", &h.version),
        ] {
            let Some(value) = value else { continue };
            if value.is_empty() || value.len() > 256 || value.chars().any(char::is_control) {
                return Err(invalid(alloc::format!(
                    "{key} must be 1 to 256 bytes without control characters"
                )));
            }
        }
        let kind_root = h.kind.root();
        let log_ok = h.kind.relative_path(&h.session_log).is_some()
            && self
                .find(&h.session_log)
                .is_some_and(|(_, m)| m.kind() == Kind::File);
        if !log_ok {
            return Err(invalid(alloc::format!(
                "rollout {:?} is not a file member under \"{kind_root}/\"",
                h.session_log
            )));
        }
        if !path::file_name(&h.session_log).contains(h.session_id.as_str()) {
            return Err(invalid(alloc::format!(
                "rollout {:?} is not named for thread {}",
                h.session_log,
                h.session_id
            )));
        }
        let stray = self.members.iter().find(|m| {
            path::root_of(&m.path) == Some(Root::Harness)
                && m.path != HARNESS_ROOT
                && m.path != kind_root
                && h.kind.relative_path(&m.path).is_none()
        });
        if let Some(stray) = stray {
            return Err(Error::new(
                ErrorCode::HarnessInvalid,
                alloc::format!("harness members live under \"{kind_root}/\""),
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

/// The limit on the member count, checked before any member is.
pub(crate) fn check_member_count(count: usize, limits: &Limits) -> Result<(), Error> {
    if count as u64 > limits.max_members {
        return Err(Error::new(
            ErrorCode::LimitMembers,
            alloc::format!("{count} members, the limit is {}", limits.max_members),
        ));
    }
    Ok(())
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

/// Checks one member on its own: path, mode for its type, fields for its
/// type, credentials.
fn check_member(member: &Member, limits: &Limits) -> Result<(), Error> {
    // The path follows the rules on its own; a reader's limit may be tighter.
    member.path.check_length(limits.max_path_bytes)?;
    let path = member.path.as_str();
    match &member.entry {
        Entry::File { size, .. } => {
            let most = limits.max_packet_bytes.min(header::MAX_MEMBER_BYTES);
            if *size > most {
                return Err(Error::new(
                    ErrorCode::LimitSize,
                    alloc::format!(
                        "{size} bytes is more than a member may hold ({most} bytes: the packet limit, or the most a ustar header can declare)"
                    ),
                )
                .at_path(path));
            }
        }
        Entry::Symlink { target } => {
            path::resolve_symlink_target(path, target, limits.max_path_bytes)?;
        }
        Entry::Dir => {}
    }
    if member.kind() != Kind::Dir {
        let refused = credential_rule(member.relative_path())
            .filter(|rule| rule.in_packet == InPacket::Refused);
        if let Some(rule) = refused {
            return Err(Error::new(
                ErrorCode::CredentialInPacket,
                alloc::format!("matches the credential rule {:?} ({})", rule.id, rule.why),
            )
            .at_path(path));
        }
    }
    Ok(())
}
