//! Comparing two manifests member by member: which members were added,
//! removed or changed, walking both member lists once in the format's order
//! (they are sorted by [`path::compare`]). What `pillbox checkpoint diff`
//! and the inspector page show.

use alloc::vec::Vec;
use core::cmp::Ordering;

use crate::manifest::Manifest;
use crate::path;

/// Which fields of a member differ between the two manifests.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Fields {
    /// The type (file, directory, symlink).
    pub kind: bool,
    /// The mode.
    pub mode: bool,
    /// The body size.
    pub size: bool,
    /// The body digest.
    pub sha256: bool,
    /// The symlink target.
    pub target: bool,
}

impl Fields {
    /// Whether anything differs.
    pub fn any(&self) -> bool {
        self.kind || self.mode || self.size || self.sha256 || self.target
    }

    /// The differing fields as the manifest names them: `type`, `mode`,
    /// `size`, `sha256`, `target`, in that order.
    pub fn names(&self) -> Vec<&'static str> {
        [
            (self.kind, "type"),
            (self.mode, "mode"),
            (self.size, "size"),
            (self.sha256, "sha256"),
            (self.target, "target"),
        ]
        .into_iter()
        .filter_map(|(set, name)| set.then_some(name))
        .collect()
    }
}

/// One difference, by index into each manifest's `members`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Change {
    /// `b.members[b]` has no counterpart in `a`.
    Added {
        /// Index into the second manifest's members.
        b: usize,
    },
    /// `a.members[a]` has no counterpart in `b`.
    Removed {
        /// Index into the first manifest's members.
        a: usize,
    },
    /// The same path in both, with different fields.
    Changed {
        /// Index into the first manifest's members.
        a: usize,
        /// Index into the second manifest's members.
        b: usize,
        /// What differs.
        fields: Fields,
    },
}

/// The differences from `a` to `b`, in the format's order; members equal in
/// both are left out.
pub fn diff(a: &Manifest, b: &Manifest) -> Vec<Change> {
    let (ma, mb) = (&a.members, &b.members);
    let mut out = Vec::new();
    let (mut i, mut j) = (0, 0);
    while i < ma.len() || j < mb.len() {
        let order = match (ma.get(i), mb.get(j)) {
            (Some(x), Some(y)) => path::compare(&x.path, &y.path),
            (Some(_), None) => Ordering::Less,
            _ => Ordering::Greater,
        };
        match order {
            Ordering::Less => {
                out.push(Change::Removed { a: i });
                i += 1;
            }
            Ordering::Greater => {
                out.push(Change::Added { b: j });
                j += 1;
            }
            Ordering::Equal => {
                let (x, y) = (&ma[i], &mb[j]);
                let fields = Fields {
                    kind: x.kind() != y.kind(),
                    mode: x.mode() != y.mode(),
                    size: x.size() != y.size(),
                    sha256: x.sha256() != y.sha256(),
                    target: x.target() != y.target(),
                };
                if fields.any() {
                    out.push(Change::Changed { a: i, b: j, fields });
                }
                i += 1;
                j += 1;
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::in_memory::{build, Source};
    use crate::limits::Limits;
    use alloc::string::String;
    use alloc::vec;

    fn manifest(files: &[(&str, &str, bool)]) -> Manifest {
        let mut sources = vec![Source::Dir {
            path: "workspace".into(),
        }];
        for (p, c, x) in files {
            sources.push(Source::File {
                path: alloc::format!("workspace/{p}"),
                contents: c.as_bytes().to_vec(),
                executable: *x,
            });
        }
        build(&sources, None, vec![], &Limits::FORMAT)
            .unwrap()
            .manifest
    }

    #[test]
    fn added_removed_changed_in_order() {
        let a = manifest(&[
            ("a", "1", false),
            ("b", "x", false),
            ("c", "same", false),
            ("d", "e", false),
        ]);
        let b = manifest(&[
            ("a", "22", false),
            ("c", "same", false),
            ("c-new", "n", false),
            ("d", "e", true),
        ]);
        let got = diff(&a, &b);
        let path = |m: &Manifest, i: usize| String::from(m.members[i].path.as_str());
        assert_eq!(got.len(), 4);
        assert!(
            matches!(got[0], Change::Changed { a: 1, b: 1, fields } if fields.names() == ["size", "sha256"])
        );
        assert!(matches!(got[1], Change::Removed { a: 2 }));
        assert_eq!(path(&b, 3), "workspace/c-new");
        assert!(matches!(got[2], Change::Added { b: 3 }));
        assert!(matches!(got[3], Change::Changed { fields, .. } if fields.names() == ["mode"]));
        assert!(diff(&a, &a).is_empty());
    }
}
