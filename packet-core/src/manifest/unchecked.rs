//! A manifest whose member paths are not checked yet: what `packet.json`
//! parses into, before the rules run (docs/session-packet.md §10, step 1),
//! and what a tool that writes hostile packets on purpose encodes
//! (`packet_core::raw`).
//!
//! The rules are checked member by member, in archive order, each path as
//! its member comes ([`UncheckedManifest::check`]): so a manifest with
//! several faults is refused for the first one, whichever rule it breaks.

use alloc::string::String;
use alloc::vec::Vec;

use serde::Deserialize;

use crate::error::Error;
use crate::format::Format;
use crate::header::HeaderSpec;
use crate::limits::Limits;
use crate::manifest::{json, rules, Entry, Exclusion, Harness, Manifest, Member, Totals};
use crate::path::{self, MemberPath};

/// A member whose path is any string.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UncheckedMember {
    /// Its path, as written.
    pub path: String,
    /// Its type and the facts that type has.
    pub entry: Entry,
}

impl UncheckedMember {
    /// What its header encodes, path and all.
    pub(crate) fn header_spec(&self) -> HeaderSpec<'_> {
        self.entry.header_spec(&self.path)
    }
}

impl From<Member> for UncheckedMember {
    fn from(m: Member) -> UncheckedMember {
        UncheckedMember {
            path: m.path.into_string(),
            entry: m.entry,
        }
    }
}

/// A manifest as parsed, before its paths and member set are checked.
/// Fields are declared in bytewise key order, as [`Manifest`]'s.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UncheckedManifest {
    /// Exclusion rules that applied.
    #[serde(default, deserialize_with = "json::present")]
    pub exclusions: Vec<Exclusion>,
    /// The format version.
    #[serde(deserialize_with = "json::format")]
    pub format: Format,
    /// Harness state carried, if any.
    #[serde(default, deserialize_with = "json::present")]
    pub harness: Option<Harness>,
    /// The members after `packet.json`, in the order listed.
    #[serde(deserialize_with = "json::members")]
    pub members: Vec<UncheckedMember>,
    /// Counts and bytes, as stated.
    pub totals: Totals,
}

impl From<Manifest> for UncheckedManifest {
    fn from(m: Manifest) -> UncheckedManifest {
        UncheckedManifest {
            exclusions: m.exclusions,
            format: m.format,
            harness: m.harness,
            members: m.members.into_iter().map(UncheckedMember::from).collect(),
            totals: m.totals,
        }
    }
}

impl UncheckedManifest {
    /// [`Manifest::assemble`] of members whose paths are not checked yet:
    /// sorted in the member order, totals computed, exclusions sorted.
    pub fn assemble(
        mut members: Vec<UncheckedMember>,
        harness: Option<Harness>,
        mut exclusions: Vec<Exclusion>,
    ) -> UncheckedManifest {
        members.sort_by(|a, b| path::compare(&a.path, &b.path));
        exclusions.sort();
        UncheckedManifest {
            exclusions,
            format: Format::CURRENT,
            harness,
            totals: Totals::of_entries(members.iter().map(|m| &m.entry)),
            members,
        }
    }

    /// Its canonical JSON, whatever its members are.
    pub fn to_canonical_json(&self) -> Vec<u8> {
        let mut out = Vec::new();
        json::write_unchecked(self, &mut out);
        out
    }

    /// The length of its canonical JSON, without writing it.
    pub(crate) fn canonical_len(&self) -> u64 {
        let mut counter = json::Counter::default();
        json::write_unchecked(self, &mut counter);
        counter.0
    }

    /// Checks every rule, as [`Manifest::validate`] does, for a manifest
    /// whose canonical JSON is `manifest_len` bytes long, and gives the
    /// manifest with its paths checked.
    pub(crate) fn check(self, limits: &Limits, manifest_len: u64) -> Result<Manifest, Error> {
        let limits = limits.for_format(self.format);
        rules::check_member_count(self.members.len(), &limits)?;
        // Each path is checked as its member comes; the members before the
        // first refused path are kept (in place: a member keeps its size).
        let mut refused: Option<Error> = None;
        let members: Vec<Member> = self
            .members
            .into_iter()
            .map_while(
                |m| match MemberPath::parse_within(m.path, limits.max_path_bytes) {
                    Ok(path) => Some(Member {
                        path,
                        entry: m.entry,
                    }),
                    Err(e) => {
                        refused = Some(e);
                        None
                    }
                },
            )
            .collect();
        let manifest = Manifest {
            exclusions: self.exclusions,
            format: self.format,
            harness: self.harness,
            members,
            totals: self.totals,
        };
        match refused {
            None => {
                manifest.validate_with_len(&limits, manifest_len)?;
                Ok(manifest)
            }
            Some(e) => {
                // A member before the refused path may break a rule of
                // its own or of the order first.
                manifest.check_members_in_order(&limits)?;
                Err(e)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorCode;
    use alloc::vec;

    /// The JSON of a manifest listing `paths` as directories, in the order given.
    fn listing(paths: &[&str]) -> Vec<u8> {
        let members: Vec<UncheckedMember> = paths
            .iter()
            .map(|p| UncheckedMember {
                path: String::from(*p),
                entry: Entry::Dir,
            })
            .collect();
        UncheckedManifest {
            exclusions: vec![],
            format: Format::CURRENT,
            harness: None,
            totals: Totals::of_entries(members.iter().map(|m| &m.entry)),
            members,
        }
        .to_canonical_json()
    }

    fn refused(paths: &[&str], limits: &Limits) -> ErrorCode {
        Manifest::parse(&listing(paths), limits).unwrap_err().code()
    }

    /// The rules run member by member: a fault of an earlier member wins
    /// over a refused path after it, and the other way round.
    #[test]
    fn the_first_fault_in_member_order_is_the_one_reported() {
        let format = &Limits::FORMAT;
        let code = refused(
            &["workspace", "workspace/b", "workspace/a", "workspace/.."],
            format,
        );
        assert_eq!(code, ErrorCode::MemberUnsorted);
        let code = refused(
            &["workspace", "workspace/..", "workspace/b", "workspace/a"],
            format,
        );
        assert_eq!(code, ErrorCode::PathNotCanonical);
        let code = refused(&["workspace", "workspace/a/b", "other"], format);
        assert_eq!(code, ErrorCode::MemberParentMissing);
        let code = refused(&["workspace", "other", "workspace/a/b"], format);
        assert_eq!(code, ErrorCode::PathOutsideRoots);
        // The member count is checked before any member.
        let two = Limits {
            max_members: 2,
            ..Limits::FORMAT
        };
        let code = refused(&["workspace", "/x", "workspace/a"], &two);
        assert_eq!(code, ErrorCode::LimitMembers);
        // A reader's tighter path limit comes first among a path's rules.
        let short = Limits {
            max_path_bytes: 16,
            ..Limits::FORMAT
        };
        let code = refused(&["workspace", "workspace/\nabcdefghij"], &short);
        assert_eq!(code, ErrorCode::PathTooLong);
        let code = refused(&["workspace", "workspace/\nabcdefghij"], format);
        assert_eq!(code, ErrorCode::PathControlChar);
    }

    #[test]
    fn a_checked_manifest_is_the_unchecked_one_with_its_paths_checked() {
        let json = listing(&["workspace", "workspace/a"]);
        let manifest = Manifest::parse(&json, &Limits::FORMAT).unwrap();
        assert_eq!(manifest.members[1].path, "workspace/a");
        assert_eq!(UncheckedManifest::from(manifest).to_canonical_json(), json);
    }
}
