//! A request's query string: page sizes, cursors, labels and the filters
//! of `GET /v1/packets` and `GET /v1/search`, checked into typed values or
//! a 400. Pure, so it is tested natively.

use packet_core::{Digest, HarnessKind};
use pillbox_wire::ApiCode;

use crate::problem::Problem;
use crate::route::check_label;

/// A page's size when the request names none.
pub const DEFAULT_PAGE: u32 = 50;
/// The largest page a request may ask for (`limit`).
pub const MAX_PAGE: u32 = 500;
/// The most labels one upload may attach.
pub const MAX_LABELS: usize = 32;
/// The most bases a push may name, and a packet's recipes be asked
/// against.
pub const MAX_BASES: usize = 16;

/// The decoded `key=value` pairs of a query string, in order (a key may
/// repeat: `label=a&label=b`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Query(Vec<(String, String)>);

/// Filters for listing packets (`GET /v1/packets`).
#[derive(Debug, Default, PartialEq, Eq)]
pub struct ListFilter {
    /// Every label must be present.
    pub labels: Vec<String>,
    /// Harness thread id.
    pub thread_id: Option<String>,
    /// Harness kind.
    pub harness: Option<String>,
    /// Only packets listed after this cursor (a `seq`, newest first).
    pub before: Option<u64>,
    /// At most this many.
    pub limit: u32,
}

/// What a search looks for (`GET /v1/search`).
#[derive(Debug, PartialEq, Eq)]
pub enum SearchKey {
    /// A member path.
    Path(String),
    /// A file's sha256 (`<hex>`, as the index holds it).
    Sha256(String),
}

impl Query {
    /// The query of a URL, from its decoded pairs.
    pub fn from_pairs(pairs: impl IntoIterator<Item = (String, String)>) -> Query {
        Query(pairs.into_iter().collect())
    }

    /// The first value of `key`.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// Every value of `key`, in order.
    pub fn all(&self, key: &str) -> Vec<String> {
        self.0
            .iter()
            .filter(|(k, _)| k == key)
            .map(|(_, v)| v.clone())
            .collect()
    }

    /// `limit`: 1 to [`MAX_PAGE`], [`DEFAULT_PAGE`] if not given.
    pub fn limit(&self) -> Result<u32, Problem> {
        match self.get("limit") {
            None => Ok(DEFAULT_PAGE),
            Some(v) => match v.parse::<u32>() {
                Ok(n) if (1..=MAX_PAGE).contains(&n) => Ok(n),
                _ => Err(Problem::bad_request(
                    ApiCode::LimitInvalid,
                    format!("limit is an integer from 1 to {MAX_PAGE}"),
                )),
            },
        }
    }

    /// `cursor` where it is a number (packets and search pages), if given.
    pub fn cursor_number(&self) -> Result<Option<u64>, Problem> {
        self.get("cursor")
            .map(|c| {
                c.parse::<u64>().map_err(|_| {
                    Problem::bad_request(
                        ApiCode::CursorInvalid,
                        "pass back the next_cursor of the previous page unchanged",
                    )
                })
            })
            .transpose()
    }

    /// The filter of `GET /v1/packets`. Checked in this order: labels,
    /// harness, cursor, limit (the first wrong one is the refusal).
    pub fn packet_filter(&self) -> Result<ListFilter, Problem> {
        let labels = self.all("label");
        for l in &labels {
            check_label(l)?;
        }
        let harness = self.get("harness").map(str::to_string);
        if let Some(h) = &harness {
            if HarnessKind::from_name(h).is_none() {
                return Err(Problem::bad_request(
                    ApiCode::HarnessFilterInvalid,
                    "harness is codex, claude or opencode",
                ));
            }
        }
        Ok(ListFilter {
            labels,
            thread_id: self.get("thread_id").map(str::to_string),
            harness,
            before: self.cursor_number()?,
            limit: self.limit()?,
        })
    }

    /// The bases of `GET /v1/packets/{digest}/recipes` (`base=`, each read
    /// as a digest when it is used): at most [`MAX_BASES`].
    pub fn recipe_bases(&self) -> Result<Vec<String>, Problem> {
        let bases = self.all("base");
        if bases.len() > MAX_BASES {
            return Err(Problem::bad_request(
                ApiCode::BasesInvalid,
                format!("name at most {MAX_BASES} bases"),
            ));
        }
        Ok(bases)
    }

    /// The key of `GET /v1/search`: exactly one of `path=` (not empty) and
    /// `sha256=` (`sha256:<hex>` or `<hex>`, checked by packet-core).
    pub fn search_key(&self) -> Result<SearchKey, Problem> {
        match (self.get("path"), self.get("sha256")) {
            (Some(p), None) if !p.is_empty() => Ok(SearchKey::Path(p.to_string())),
            (None, Some(s)) => {
                let d = Digest::parse_text_or_hex(s).map_err(Problem::from_packet_error_400)?;
                Ok(SearchKey::Sha256(d.hex().to_string()))
            }
            _ => Err(Problem::bad_request(
                ApiCode::SearchInvalid,
                "give exactly one of path= or sha256=",
            )),
        }
    }
}

/// The labels an upload attaches: each checked, at most [`MAX_LABELS`],
/// sorted and without repeats (the order they are stored and shown in).
pub fn upload_labels(list: Vec<String>) -> Result<Vec<String>, Problem> {
    if list.len() > MAX_LABELS {
        return Err(Problem::bad_request(
            ApiCode::LabelInvalid,
            "at most 32 labels per packet upload",
        ));
    }
    for l in &list {
        check_label(l)?;
    }
    let mut list = list;
    list.sort();
    list.dedup();
    Ok(list)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn query(text: &str) -> Query {
        Query::from_pairs(text.split('&').filter(|p| !p.is_empty()).map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            (k.to_string(), v.to_string())
        }))
    }

    fn code<T: std::fmt::Debug>(r: Result<T, Problem>) -> String {
        r.unwrap_err().error.code().to_owned()
    }

    #[test]
    fn limits_default_and_stay_in_range() {
        assert_eq!(query("").limit(), Ok(DEFAULT_PAGE));
        assert_eq!(query("limit=1").limit(), Ok(1));
        assert_eq!(query("limit=500").limit(), Ok(MAX_PAGE));
        for bad in ["limit=0", "limit=501", "limit=x", "limit=-1", "limit="] {
            assert_eq!(code(query(bad).limit()), "limit_invalid", "{bad}");
        }
    }

    #[test]
    fn a_recipes_bases_are_sixteen_at_most_in_the_order_given() {
        let sixteen: Vec<String> = (0..16).map(|i| format!("b{i:02}")).collect();
        let text: Vec<String> = sixteen.iter().map(|b| format!("base={b}")).collect();
        assert_eq!(query(&text.join("&")).recipe_bases(), Ok(sixteen.clone()));
        assert_eq!(query("").recipe_bases(), Ok(vec![]));
        let err = query(&format!("{}&base=x", text.join("&")))
            .recipe_bases()
            .unwrap_err();
        assert_eq!((err.status, err.error.code()), (400, "bases_invalid"));
        assert_eq!(err.error.refusal.details.message, "name at most 16 bases");
    }

    #[test]
    fn numeric_cursors() {
        assert_eq!(query("").cursor_number(), Ok(None));
        assert_eq!(query("cursor=41").cursor_number(), Ok(Some(41)));
        assert_eq!(
            code(query("cursor=sessions").cursor_number()),
            "cursor_invalid"
        );
    }

    #[test]
    fn the_packet_filter_checks_labels_then_harness_then_cursor_then_limit() {
        let f = query("label=b&label=a&harness=codex&thread_id=t&cursor=9&limit=2")
            .packet_filter()
            .unwrap();
        assert_eq!(
            f,
            ListFilter {
                labels: vec!["b".into(), "a".into()],
                thread_id: Some("t".into()),
                harness: Some("codex".into()),
                before: Some(9),
                limit: 2,
            }
        );
        assert_eq!(
            code(query("label=a b&harness=x").packet_filter()),
            "label_invalid"
        );
        assert_eq!(
            code(query("harness=x&cursor=y").packet_filter()),
            "harness_filter_invalid"
        );
        assert_eq!(
            code(query("cursor=y&limit=0").packet_filter()),
            "cursor_invalid"
        );
        assert_eq!(code(query("limit=0").packet_filter()), "limit_invalid");
        // Every kind the manifest knows is a filter, in its manifest spelling.
        for kind in ["codex", "claude", "opencode"] {
            let f = query(&format!("harness={kind}")).packet_filter().unwrap();
            assert_eq!(f.harness.as_deref(), Some(kind));
        }
        assert_eq!(
            code(query("harness=Codex").packet_filter()),
            "harness_filter_invalid"
        );
    }

    #[test]
    fn a_search_takes_a_path_or_a_sha256_with_or_without_its_prefix() {
        let hex = "ab".repeat(32);
        assert_eq!(
            query("path=workspace/a").search_key(),
            Ok(SearchKey::Path("workspace/a".into()))
        );
        for text in [format!("sha256={hex}"), format!("sha256=sha256:{hex}")] {
            assert_eq!(
                query(&text).search_key(),
                Ok(SearchKey::Sha256(hex.clone()))
            );
        }
        assert_eq!(code(query("sha256=AB").search_key()), "digest_syntax");
        for bad in ["", "path=", "path=a&sha256=b"] {
            assert_eq!(code(query(bad).search_key()), "search_invalid", "{bad}");
        }
    }

    #[test]
    fn upload_labels_are_checked_sorted_and_unique() {
        let labels = |l: &[&str]| upload_labels(l.iter().map(|s| s.to_string()).collect());
        assert_eq!(labels(&["b", "a", "b"]), Ok(vec!["a".into(), "b".into()]));
        assert_eq!(code(labels(&["a b"])), "label_invalid");
        let many: Vec<String> = (0..=MAX_LABELS).map(|i| format!("l{i}")).collect();
        assert_eq!(code(upload_labels(many)), "label_invalid");
        assert!(upload_labels((0..MAX_LABELS).map(|i| format!("l{i}")).collect()).is_ok());
    }
}
