//! `refs`: the refs a store holds, by name prefix (`GET /v1/refs`, the
//! `list` scope), page after page up to a bound.

use pillbox_wire::Ref;
use serde::{Deserialize, Serialize};

use super::client::{read_answer, status_error, Remote};
use crate::error::Result;

/// The most refs one request asks for (the API's page limit).
const PAGE: u32 = 500;

/// One ref as `refs` reports it.
#[derive(Debug, Serialize, Deserialize)]
pub struct Listed {
    /// Name, digest and when it last moved.
    #[serde(flatten)]
    pub now: Ref,
    /// The packet's size, when the store's listing gives it.
    #[serde(default)]
    pub size: Option<u64>,
    /// The packet's labels, when the store's listing gives them.
    #[serde(default)]
    pub labels: Option<Vec<String>>,
}

/// A page of `GET /v1/refs`, read tolerantly: fields a store adds to each
/// ref beyond `Ref`'s are kept when `Listed` knows them.
#[derive(Debug, Deserialize)]
struct Page {
    refs: Vec<Listed>,
    next_cursor: Option<String>,
}

/// The `pillbox.checkpoint.refs/1` object.
#[derive(Debug, Serialize)]
pub struct RefsReport {
    /// `pillbox.checkpoint.refs/1`.
    pub schema: &'static str,
    /// The store's base URL.
    pub remote: String,
    /// The prefix asked for (`""`: every ref).
    pub prefix: String,
    /// The refs, in name order.
    pub refs: Vec<Listed>,
    /// True when more refs match than `--limit`.
    pub truncated: bool,
}

/// Lists the refs whose names start with `prefix`, at most `limit`.
pub fn list(remote: &Remote, prefix: &str, limit: usize) -> Result<RefsReport> {
    let mut refs: Vec<Listed> = Vec::new();
    let mut cursor: Option<String> = None;
    let truncated = loop {
        let want = (limit - refs.len()).min(PAGE as usize);
        let mut path = format!("/v1/refs?prefix={}&limit={want}", query_value(prefix));
        if let Some(c) = &cursor {
            path.push_str(&format!("&cursor={}", query_value(c)));
        }
        let what = format!("GET {path}");
        let mut r = remote.get(&what, &path)?;
        if r.status().as_u16() != 200 {
            return Err(status_error(&what, r));
        }
        let page: Page = read_answer(&what, &mut r)?;
        refs.extend(page.refs.into_iter().take(want));
        match page.next_cursor {
            None => break false,
            Some(_) if refs.len() >= limit => break true,
            Some(next) => cursor = Some(next),
        }
    };
    Ok(RefsReport {
        schema: "pillbox.checkpoint.refs/1",
        remote: remote.base().to_owned(),
        prefix: prefix.to_owned(),
        refs,
        truncated,
    })
}

/// A query value: ref names keep their `/` (allowed in a query), other
/// characters beyond the unreserved ones are percent-encoded.
fn query_value(v: &str) -> String {
    v.split('/')
        .map(super::percent_encode)
        .collect::<Vec<_>>()
        .join("/")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_keep_their_slashes_in_a_query() {
        assert_eq!(query_value("sessions/a b/"), "sessions/a%20b/");
        assert_eq!(query_value("x&y=z"), "x%26y%3Dz");
    }
}
