//! `GET /v1/search` by scanning manifests (docs/worker.md, "Reads"): packets
//! in insertion order, their members in manifest order, from an opaque
//! cursor (`<packet seq>.<member index>`, the next member to look at). No
//! per-member index is kept; each request scans a bounded number of
//! packets, so a page may hold fewer matches than asked for and still have
//! a next cursor. A page is filled packet by packet ([`Page`]); the scan
//! reads the manifests from R2 (`storage::serve::search`).

use packet_core::{Kind, Manifest, Member};
use pillbox_wire::ApiCode;
use pillbox_wire::{SearchMatch, SearchResults};

use crate::problem::Problem;
use crate::query::SearchKey;

/// Where a search page starts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Cursor {
    /// The packet's `seq`.
    pub seq: u64,
    /// The member index in that packet.
    pub member: usize,
}

impl Cursor {
    /// Parses a cursor a previous page gave (`None`: from the start).
    pub fn parse(text: Option<&str>) -> Result<Cursor, Problem> {
        let Some(text) = text else {
            return Ok(Cursor::default());
        };
        let parsed = text
            .split_once('.')
            .and_then(|(s, m)| Some((s.parse::<u64>().ok()?, m.parse::<usize>().ok()?)));
        match parsed {
            Some((seq, member)) => Ok(Cursor { seq, member }),
            None => Err(Problem::bad_request(
                ApiCode::CursorInvalid,
                "cursor is not one a previous page of this search gave",
            )),
        }
    }

    /// The text a page gives as `next_cursor`.
    pub fn to_text(self) -> String {
        format!("{}.{}", self.seq, self.member)
    }
}

/// Whether `member` matches `key`.
pub fn matches(member: &Member, key: &SearchKey) -> bool {
    match key {
        SearchKey::Path(p) => member.path == *p,
        SearchKey::Sha256(hex) => member
            .sha256()
            .filter(|_| member.kind() == Kind::File)
            .is_some_and(|d| d.hex().to_string() == *hex),
    }
}

/// The members of `manifest` from index `from` on that match `key`, as
/// (index, match) in manifest order.
pub fn scan<'a>(
    manifest: &'a Manifest,
    key: &'a SearchKey,
    from: usize,
) -> Box<dyn Iterator<Item = usize> + 'a> {
    match key {
        // Paths are unique and sorted: one binary search.
        SearchKey::Path(p) => Box::new(
            manifest
                .find(p)
                .map(|(i, _)| i)
                .filter(|&i| i >= from)
                .into_iter(),
        ),
        SearchKey::Sha256(_) => Box::new(
            (from..manifest.members.len()).filter(move |&i| matches(&manifest.members[i], key)),
        ),
    }
}

/// A page of a search being filled, packet by packet in insertion order,
/// from a cursor.
pub struct Page<'a> {
    key: &'a SearchKey,
    limit: usize,
    start: Cursor,
    results: SearchResults,
}

impl<'a> Page<'a> {
    /// A page of at most `limit` matches of `key`, from `start` on.
    pub fn new(key: &'a SearchKey, limit: usize, start: Cursor) -> Page<'a> {
        Page {
            key,
            limit,
            start,
            results: SearchResults {
                matches: Vec::new(),
                next_cursor: None,
            },
        }
    }

    /// Adds the matches of the packet `seq` (`digest`, its `manifest`),
    /// from the start's member when the page starts in it. `true` once the
    /// page is full: another match was found, and the next page starts
    /// with it.
    pub fn scan(&mut self, seq: u64, digest: &str, manifest: &Manifest) -> bool {
        let from = if seq == self.start.seq {
            self.start.member
        } else {
            0
        };
        for i in scan(manifest, self.key, from) {
            if self.results.matches.len() == self.limit {
                self.results.next_cursor = Some(Cursor { seq, member: i }.to_text());
                return true;
            }
            self.results
                .matches
                .push(search_match(digest, &manifest.members[i]));
        }
        false
    }

    /// The page. `next` is the packet the scan stopped before when it
    /// reached its bound with the page not full: the next page starts
    /// there.
    pub fn finish(mut self, next: Option<u64>) -> SearchResults {
        if let Some(seq) = next {
            if self.results.next_cursor.is_none() {
                self.results.next_cursor = Some(Cursor { seq, member: 0 }.to_text());
            }
        }
        self.results
    }
}

/// A member as `GET /v1/search` shows it.
pub fn search_match(digest: &str, member: &Member) -> SearchMatch {
    SearchMatch {
        digest: digest.to_string(),
        path: member.path.to_string(),
        kind: member.kind().as_str().to_string(),
        size: member.size(),
        sha256: member
            .sha256()
            .filter(|_| member.kind() == Kind::File)
            .map(|d| d.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use packet_core::{Digest, Limits};

    #[test]
    fn cursors_round_trip_and_refuse_anything_else() {
        let c = Cursor { seq: 41, member: 7 };
        assert_eq!(Cursor::parse(Some(&c.to_text())).unwrap(), c);
        assert_eq!(Cursor::parse(None).unwrap(), Cursor::default());
        for bad in ["17", "a.b", "1.", ".2", "-1.0"] {
            assert_eq!(
                Cursor::parse(Some(bad)).unwrap_err().error.code(),
                "cursor_invalid",
                "{bad}"
            );
        }
    }

    fn two_matches() -> Manifest {
        Manifest::build(
            vec![
                Member::dir("workspace"),
                Member::file("workspace/a", 1, Digest::of(b"x"), false),
                Member::file("workspace/b", 1, Digest::of(b"x"), false),
            ],
            None,
            vec![],
            &Limits::FORMAT,
        )
        .unwrap()
    }

    fn found(results: &SearchResults) -> Vec<(&str, &str)> {
        results
            .matches
            .iter()
            .map(|m| (m.digest.as_str(), m.path.as_str()))
            .collect()
    }

    #[test]
    fn a_page_goes_on_from_its_cursor_and_stops_at_the_match_after_its_last() {
        let (m, key) = (
            two_matches(),
            SearchKey::Sha256(Digest::of(b"x").hex().to_string()),
        );
        let mut page = Page::new(&key, 3, Cursor { seq: 5, member: 2 });
        assert!(!page.scan(5, "p5", &m));
        assert!(!page.scan(7, "p7", &m));
        assert!(page.scan(9, "p9", &m));
        let results = page.finish(None);
        assert_eq!(
            found(&results),
            [
                ("p5", "workspace/b"),
                ("p7", "workspace/a"),
                ("p7", "workspace/b")
            ]
        );
        assert_eq!(results.next_cursor.as_deref(), Some("9.1"));
        // The cursor's packet is gone: the next one is scanned whole.
        let mut page = Page::new(&key, 3, Cursor { seq: 5, member: 2 });
        assert!(!page.scan(6, "p6", &m));
        assert_eq!(page.finish(None).matches.len(), 2);
    }

    #[test]
    fn a_page_not_full_ends_where_the_scan_stopped_if_it_did() {
        let (m, key) = (two_matches(), SearchKey::Path("workspace/a".into()));
        let mut page = Page::new(&key, 2, Cursor::default());
        assert!(!page.scan(1, "p1", &m));
        let results = page.finish(Some(66));
        assert_eq!(found(&results), [("p1", "workspace/a")]);
        assert_eq!(results.next_cursor.as_deref(), Some("66.0"));
        let mut page = Page::new(&key, 2, Cursor::default());
        assert!(!page.scan(1, "p1", &m));
        assert!(!page.scan(2, "p2", &m));
        let last = page.finish(None);
        assert_eq!((last.matches.len(), last.next_cursor), (2, None));
    }

    #[test]
    fn scans_by_path_and_by_content() {
        let m = Manifest::build(
            vec![
                Member::dir("workspace"),
                Member::file("workspace/a", 1, Digest::of(b"x"), false),
                Member::file("workspace/b", 1, Digest::of(b"x"), false),
                Member::symlink("workspace/c", "a"),
            ],
            None,
            vec![],
            &Limits::FORMAT,
        )
        .unwrap();
        let sha = SearchKey::Sha256(Digest::of(b"x").hex().to_string());
        assert_eq!(scan(&m, &sha, 0).collect::<Vec<_>>(), [1, 2]);
        assert_eq!(scan(&m, &sha, 2).collect::<Vec<_>>(), [2]);
        let path = SearchKey::Path("workspace".into());
        assert_eq!(scan(&m, &path, 0).collect::<Vec<_>>(), [0]);
        assert_eq!(scan(&m, &path, 1).count(), 0);
        let shown = search_match("sha256:00", &m.members[0]);
        assert_eq!((shown.kind.as_str(), shown.sha256), ("dir", None));
        assert_eq!(
            search_match("sha256:00", &m.members[1]).sha256,
            Some(Digest::of(b"x").to_string())
        );
    }
}
