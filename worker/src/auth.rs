//! Bearer tokens and their scopes (docs/worker.md, "Access").
//!
//! Tokens are configured hashed: the `PILLBOX_TOKENS` secret holds
//! `[{"id","sha256","scopes"}]`, the SHA-256 (hex) of each token and what it
//! may do; the older single `PILLBOX_TOKEN` secret, if set, is a token with
//! every scope. A presented token is hashed once and compared with every
//! configured hash in constant time (no early exit, so timing tells neither
//! which entry matched nor how much of a hash did). Tokens are never logged
//! or echoed; a refusal names the token's `id` at most.
//!
//! [`required`] says what a route needs, from its row of the routes' table
//! and the server's access settings; [`Tokens::authenticate`] turns the
//! `Authorization` header into a [`Grant`], and [`Grant::allows`] checks it.

use packet_core::Digest;
use pillbox_wire::ApiCode;
use serde::Deserialize;

use crate::problem::Problem;
use crate::route::{Access, Route};

pub use pillbox_wire::ReadAccess;

/// Reads an access setting (`READ_ACCESS`, `LIST_ACCESS`): `public`, else
/// `token` (the default, also for a value it does not know: it fails
/// closed).
pub fn read_access(value: Option<&str>) -> ReadAccess {
    match value.map(str::trim) {
        Some("public") => ReadAccess::Public,
        _ => ReadAccess::Token,
    }
}

/// What a token may do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Scope {
    /// `read`: packets, their members, manifests, recipes and chunks, a
    /// ref by name and its history, the digests that start with a prefix;
    /// the bases a push names are used only with it.
    Read,
    /// `list`: `GET /v1/packets`, `GET /v1/refs`, `GET /v1/search`.
    List,
    /// `push`: uploads and delta pushes (a push stores a packet; it moves no
    /// ref).
    Push,
    /// `refs` (every ref) or `refs:<prefix>`: create, move and delete refs
    /// whose names lie under the prefix.
    Refs(RefPrefix),
    /// `delete`: delete packets.
    Delete,
    /// `admin`: everything.
    Admin,
}

/// The refs a `refs` scope covers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RefPrefix {
    /// `refs`: every name.
    All,
    /// `refs:<prefix>`: names under the prefix, segment by segment:
    /// `sessions/demo/` and `sessions/demo` both cover `sessions/demo/latest`
    /// but not `sessions/demo2/latest`; `sessions/demo` also covers the name
    /// `sessions/demo` itself.
    Under(String),
}

impl RefPrefix {
    /// True if a ref of this name may be written.
    pub fn covers(&self, name: &str) -> bool {
        match self {
            RefPrefix::All => true,
            RefPrefix::Under(prefix) => match prefix.strip_suffix('/') {
                Some(dir) => name.starts_with(prefix.as_str()) && name.len() > dir.len() + 1,
                None => {
                    name == prefix
                        || (name.starts_with(prefix.as_str())
                            && name.as_bytes().get(prefix.len()) == Some(&b'/'))
                }
            },
        }
    }
}

impl Scope {
    /// Parses a scope as written in `PILLBOX_TOKENS`; `None` for a word it
    /// does not know (the whole setting is then refused: it fails closed).
    pub fn parse(text: &str) -> Option<Scope> {
        Some(match text {
            "read" => Scope::Read,
            "list" => Scope::List,
            "push" => Scope::Push,
            "refs" => Scope::Refs(RefPrefix::All),
            "delete" => Scope::Delete,
            "admin" => Scope::Admin,
            _ => {
                let prefix = text.strip_prefix("refs:")?;
                let name = prefix.strip_suffix('/').unwrap_or(prefix);
                crate::route::check_ref_name(name).ok()?;
                Scope::Refs(RefPrefix::Under(prefix.to_string()))
            }
        })
    }
}

/// What a route needs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Need {
    /// Reading packets or a ref by name.
    Read,
    /// Listing or searching.
    List,
    /// Uploading or pushing packets.
    Push,
    /// Writing the ref of this name.
    Ref(String),
    /// Deleting a packet.
    Delete,
    /// The operator's routes (the benchmark baseline).
    Admin,
}

impl Need {
    /// The scope a refusal tells the caller to ask for.
    fn scope_name(&self) -> String {
        match self {
            Need::Read => "read".into(),
            Need::List => "list".into(),
            Need::Push => "push".into(),
            Need::Ref(name) => format!("refs:<a prefix of {name}>"),
            Need::Delete => "delete".into(),
            Need::Admin => "admin".into(),
        }
    }
}

/// What `route` needs (its row of [`crate::route::ROUTES`]), or `None`
/// when anyone may call it: `GET /v1`, CORS preflights and the
/// inspector's pages always; reads with `READ_ACCESS=public`; listing and
/// search with `LIST_ACCESS=public`.
pub fn required(route: &Route, reads: ReadAccess, lists: ReadAccess) -> Option<Need> {
    match route.spec().access {
        Access::Anyone => None,
        Access::Read => (reads == ReadAccess::Token).then_some(Need::Read),
        Access::List => (lists == ReadAccess::Token).then_some(Need::List),
        Access::Push => Some(Need::Push),
        // Every route that needs a refs scope names its ref (route's
        // tests); one that did not would need admin.
        Access::Refs => Some(
            route
                .ref_name()
                .map_or(Need::Admin, |name| Need::Ref(name.to_string())),
        ),
        Access::Delete => Some(Need::Delete),
        Access::Admin => Some(Need::Admin),
    }
}

/// An authenticated token: its id and scopes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Grant {
    /// The entry's `id` (`PILLBOX_TOKEN` for the single token).
    pub id: String,
    /// What it may do.
    pub scopes: Vec<Scope>,
}

impl Grant {
    /// True if the token may do what `need` names.
    pub fn allows(&self, need: &Need) -> bool {
        self.scopes.iter().any(|s| match (s, need) {
            (Scope::Admin, _) => true,
            (Scope::Read, Need::Read)
            | (Scope::List, Need::List)
            | (Scope::Push, Need::Push)
            | (Scope::Delete, Need::Delete) => true,
            (Scope::Refs(prefix), Need::Ref(name)) => prefix.covers(name),
            _ => false,
        })
    }

    /// `Ok` if the token may do what `need` names, else 403 `scope_missing`.
    pub fn check(&self, need: &Need) -> Result<(), Problem> {
        if self.allows(need) {
            return Ok(());
        }
        let what = match need {
            Need::Ref(name) => format!("may not write the ref {name:?}"),
            Need::Read => "may not read".into(),
            Need::List => "may not list or search".into(),
            Need::Push => "may not upload or push".into(),
            Need::Delete => "may not delete packets".into(),
            Need::Admin => "may not use the operator's routes".into(),
        };
        Err(Problem::new(
            ApiCode::ScopeMissing,
            format!("the token {:?} {what}", self.id),
            format!(
                "use a token whose scopes include {} (or admin); the store's operator sets them in PILLBOX_TOKENS",
                need.scope_name()
            ),
        ))
    }
}

/// One entry of `PILLBOX_TOKENS`, as written.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TokenEntry {
    id: String,
    sha256: String,
    scopes: Vec<String>,
}

/// A configured token: the SHA-256 of its bytes and what it grants.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Configured {
    hash: [u8; 32],
    grant: Grant,
}

/// The tokens the server accepts.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Tokens {
    configured: Vec<Configured>,
}

/// The id the single `PILLBOX_TOKEN` has in refusals.
pub const SINGLE_TOKEN_ID: &str = "PILLBOX_TOKEN";

impl Tokens {
    /// Reads the secrets: `tokens` is `PILLBOX_TOKENS` (JSON), `single` is
    /// `PILLBOX_TOKEN`. A malformed `PILLBOX_TOKENS` is a 500
    /// `tokens_invalid` for every request that needs a token (the message
    /// says which entry, never a hash or a token).
    pub fn from_secrets(tokens: Option<&str>, single: Option<&str>) -> Result<Tokens, Problem> {
        let mut configured = Vec::new();
        if let Some(single) = single.filter(|t| !t.is_empty()) {
            configured.push(Configured {
                hash: Digest::of(single.as_bytes()).0,
                grant: Grant {
                    id: SINGLE_TOKEN_ID.into(),
                    scopes: vec![Scope::Admin],
                },
            });
        }
        if let Some(json) = tokens.filter(|t| !t.trim().is_empty()) {
            let entries: Vec<TokenEntry> = serde_json::from_str(json).map_err(|e| {
                invalid(format!(
                    "PILLBOX_TOKENS is not a JSON array of {{\"id\",\"sha256\",\"scopes\"}} (line {}, column {})",
                    e.line(),
                    e.column()
                ))
            })?;
            for (i, entry) in entries.into_iter().enumerate() {
                let hash = format!("sha256:{}", entry.sha256.to_ascii_lowercase())
                    .parse::<Digest>()
                    .map_err(|_| {
                        invalid(format!(
                            "PILLBOX_TOKENS entry {i} ({:?}): sha256 is not 64 hex digits",
                            entry.id
                        ))
                    })?
                    .0;
                let scopes = entry
                    .scopes
                    .iter()
                    .map(|s| {
                        Scope::parse(s).ok_or_else(|| {
                            invalid(format!(
                                "PILLBOX_TOKENS entry {i} ({:?}): unknown scope {s:?}",
                                entry.id
                            ))
                        })
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                // A push belongs to the id of the token that created it:
                // two tokens of one id would share them.
                if configured.iter().any(|c| c.grant.id == entry.id) {
                    return Err(invalid(format!(
                        "PILLBOX_TOKENS entry {i} ({:?}): another token has this id (or it is the single token's)",
                        entry.id
                    )));
                }
                configured.push(Configured {
                    hash,
                    grant: Grant {
                        id: entry.id,
                        scopes,
                    },
                });
            }
        }
        Ok(Tokens { configured })
    }

    /// The grant of the token in the `Authorization` header: 401
    /// `unauthorized` when there is none (or it is not `Bearer`), 403
    /// `token_not_configured` when the server has no tokens, 403
    /// `forbidden` when it is none of them.
    pub fn authenticate(&self, authorization: Option<&str>) -> Result<Grant, Problem> {
        let presented = authorization
            .and_then(bearer)
            .ok_or_else(Problem::unauthorized)?;
        if self.configured.is_empty() {
            return Err(Problem::new(
                ApiCode::TokenNotConfigured,
                "the server has no tokens (neither PILLBOX_TOKENS nor PILLBOX_TOKEN is set), so it accepts none",
                "set the secret: `wrangler secret put PILLBOX_TOKENS` (or PILLBOX_TOKENS=... in .dev.vars locally); docs/worker.md, \"Access\"",
            ));
        }
        let hash = Digest::of(presented.as_bytes()).0;
        // Every entry is compared, matched or not.
        let mut found = None;
        for (i, c) in self.configured.iter().enumerate() {
            if constant_time_eq(&hash, &c.hash) && found.is_none() {
                found = Some(i);
            }
        }
        found
            .map(|i| self.configured[i].grant.clone())
            .ok_or_else(Problem::forbidden)
    }
}

fn invalid(message: String) -> Problem {
    Problem::new(
        ApiCode::TokensInvalid,
        message,
        "the store's operator must fix the PILLBOX_TOKENS secret (docs/worker.md, \"Access\")",
    )
}

/// The token in `Bearer <token>` (scheme case-insensitive).
fn bearer(header: &str) -> Option<&str> {
    let (scheme, token) = header.trim().split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

/// Equality of two hashes whose running time depends on neither's bytes.
fn constant_time_eq(a: &[u8; 32], b: &[u8; 32]) -> bool {
    a.iter()
        .zip(b.iter())
        .fold(0u8, |acc, (p, q)| acc | (p ^ q))
        == 0
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::route::{route, Method};

    fn hex(token: &str) -> String {
        Digest::of(token.as_bytes()).hex().to_string()
    }

    fn tokens(entries: &[(&str, &str, &[&str])], single: Option<&str>) -> Tokens {
        let json = serde_json::to_string(
            &entries
                .iter()
                .map(|(id, token, scopes)| {
                    serde_json::json!({"id": id, "sha256": hex(token), "scopes": scopes})
                })
                .collect::<Vec<_>>(),
        )
        .unwrap();
        Tokens::from_secrets(Some(&json), single).unwrap()
    }

    fn status(t: &Tokens, header: Option<&str>) -> u16 {
        t.authenticate(header).unwrap_err().status
    }

    #[test]
    fn missing_or_malformed_header_is_401() {
        let t = tokens(&[], Some("s3cret"));
        assert_eq!(status(&t, None), 401);
        assert_eq!(status(&t, Some("Basic abc")), 401);
        assert_eq!(status(&t, Some("Bearer ")), 401);
    }

    #[test]
    fn wrong_token_is_403_and_right_token_passes() {
        let t = tokens(&[], Some("s3cret"));
        assert_eq!(status(&t, Some("Bearer nope")), 403);
        assert_eq!(status(&t, Some("Bearer s3cre")), 403);
        assert!(t.authenticate(Some("Bearer s3cret")).is_ok());
        assert!(t.authenticate(Some("bearer  s3cret ")).is_ok());
    }

    #[test]
    fn no_configured_token_refuses_everything() {
        let e = Tokens::from_secrets(None, None)
            .unwrap()
            .authenticate(Some("Bearer x"))
            .unwrap_err();
        assert_eq!((e.status, e.error.code()), (403, "token_not_configured"));
        let empty = Tokens::from_secrets(Some(" "), Some("")).unwrap();
        assert!(empty.authenticate(Some("Bearer x")).is_err());
    }

    #[test]
    fn refusals_never_echo_the_token_or_its_hash() {
        let t = tokens(&[("a", "other", &["read"])], None);
        let e = t.authenticate(Some("Bearer my-token-value")).unwrap_err();
        assert!(!e.to_json().contains("my-token-value"));
        assert!(!e.to_json().contains(&hex("other")));
        let bad = format!(r#"[{{"id":"x","sha256":"{}","scopes":["fly"]}}]"#, hex("t"));
        let e = Tokens::from_secrets(Some(&bad), None).unwrap_err();
        assert!(!e.to_json().contains(&hex("t")), "{}", e.to_json());
    }

    #[test]
    fn the_single_token_has_every_scope_and_entries_theirs() {
        let t = tokens(
            &[("sandbox-7", "sb", &["read", "push", "refs:sessions/demo/"])],
            Some("all"),
        );
        let all = t.authenticate(Some("Bearer all")).unwrap();
        assert_eq!(all.id, SINGLE_TOKEN_ID);
        for need in [
            Need::Read,
            Need::List,
            Need::Push,
            Need::Delete,
            Need::Admin,
            Need::Ref("anything".into()),
        ] {
            assert!(all.allows(&need), "{need:?}");
        }
        let sb = t.authenticate(Some("Bearer sb")).unwrap();
        assert_eq!(sb.id, "sandbox-7");
        assert!(sb.allows(&Need::Read) && sb.allows(&Need::Push));
        assert!(sb.allows(&Need::Ref("sessions/demo/latest".into())));
        for need in [
            Need::List,
            Need::Delete,
            Need::Admin,
            Need::Ref("sessions/other/latest".into()),
            Need::Ref("sessions/demo".into()),
        ] {
            let e = sb.check(&need).unwrap_err();
            assert_eq!(
                (e.status, e.error.code()),
                (403, "scope_missing"),
                "{need:?}"
            );
        }
    }

    #[test]
    fn ref_prefixes_match_whole_segments() {
        let dir = RefPrefix::Under("sessions/demo/".into());
        let name = RefPrefix::Under("sessions/demo".into());
        assert!(dir.covers("sessions/demo/latest"));
        assert!(!dir.covers("sessions/demo"));
        assert!(!dir.covers("sessions/demo2/latest"));
        assert!(name.covers("sessions/demo"));
        assert!(name.covers("sessions/demo/latest"));
        assert!(!name.covers("sessions/demo2"));
        assert!(!name.covers("sessions/dem"));
        assert!(RefPrefix::All.covers("x"));
    }

    #[test]
    fn unknown_scopes_and_malformed_entries_fail_closed() {
        for bad in [
            "{}",
            "[{\"id\":\"a\",\"sha256\":\"00\",\"scopes\":[]}]",
            &format!(
                r#"[{{"id":"a","sha256":"{}","scopes":["read:sessions/"]}}]"#,
                hex("t")
            ),
            &format!(
                r#"[{{"id":"a","sha256":"{}","scopes":["refs:../x"]}}]"#,
                hex("t")
            ),
            &format!(
                r#"[{{"id":"a","sha256":"{}","scopes":["refs:"]}}]"#,
                hex("t")
            ),
            &format!(
                r#"[{{"id":"a","sha256":"{}","scopes":[],"extra":1}}]"#,
                hex("t")
            ),
        ] {
            let e = Tokens::from_secrets(Some(bad), Some("single")).unwrap_err();
            assert_eq!((e.status, e.error.code()), (500, "tokens_invalid"), "{bad}");
        }
        let upper = format!(
            r#"[{{"id":"a","sha256":"{}","scopes":["list"]}}]"#,
            hex("t").to_uppercase()
        );
        let t = Tokens::from_secrets(Some(&upper), None).unwrap();
        assert!(t
            .authenticate(Some("Bearer t"))
            .unwrap()
            .allows(&Need::List));
    }

    #[test]
    fn access_settings_default_to_token() {
        assert_eq!(read_access(None), ReadAccess::Token);
        assert_eq!(read_access(Some("token")), ReadAccess::Token);
        assert_eq!(read_access(Some(" public ")), ReadAccess::Public);
        assert_eq!(read_access(Some("open")), ReadAccess::Token);
    }

    #[test]
    fn what_each_route_needs() {
        use ReadAccess::{Public, Token};
        let d = "sha256:0000000000000000000000000000000000000000000000000000000000000abc";
        let id = "00112233445566778899aabbccddeeff";
        let need = |m, p: &str, reads, lists| required(&route(m, p).unwrap(), reads, lists);
        for (m, p) in [
            (Method::Get, format!("/v1/packets/{d}")),
            (Method::Head, format!("/v1/packets/{d}")),
            (Method::Get, format!("/v1/packets/{d}/manifest")),
            (Method::Get, format!("/v1/packets/{d}/members/workspace/a")),
            (Method::Get, format!("/v1/packets/{d}/recipes")),
            (Method::Post, format!("/v1/packets/{d}/chunks")),
            (Method::Get, "/v1/refs/sessions/x".into()),
        ] {
            assert_eq!(need(m, &p, Token, Public), Some(Need::Read), "{p}");
            assert_eq!(need(m, &p, Public, Token), None, "{p}");
        }
        for p in ["/v1/packets", "/v1/refs", "/v1/search"] {
            assert_eq!(need(Method::Get, p, Public, Token), Some(Need::List), "{p}");
            assert_eq!(need(Method::Get, p, Token, Public), None, "{p}");
        }
        for (m, p) in [
            (Method::Put, format!("/v1/packets/{d}")),
            (Method::Post, "/v1/uploads".into()),
            (Method::Get, format!("/v1/uploads/{id}")),
            (Method::Put, format!("/v1/uploads/{id}/parts/1")),
            (Method::Post, format!("/v1/uploads/{id}/complete")),
            (Method::Delete, format!("/v1/uploads/{id}")),
            (Method::Post, "/v1/pushes".into()),
            (Method::Get, format!("/v1/pushes/{id}")),
            (Method::Delete, format!("/v1/pushes/{id}")),
            (Method::Post, format!("/v1/pushes/{id}/recipes")),
            (Method::Put, format!("/v1/pushes/{id}/parts/1")),
            (Method::Post, format!("/v1/pushes/{id}/complete")),
        ] {
            assert_eq!(need(m, &p, Public, Public), Some(Need::Push), "{p}");
        }
        assert_eq!(
            need(Method::Put, "/v1/refs/sessions/x/latest", Public, Public),
            Some(Need::Ref("sessions/x/latest".into()))
        );
        assert_eq!(
            need(Method::Delete, "/v1/refs/sessions/x/latest", Public, Public),
            Some(Need::Ref("sessions/x/latest".into()))
        );
        assert_eq!(
            need(Method::Delete, &format!("/v1/packets/{d}"), Public, Public),
            Some(Need::Delete)
        );
        assert_eq!(
            need(Method::Post, "/v1/bench/baseline", Public, Public),
            Some(Need::Admin)
        );
        assert_eq!(
            need(Method::Get, "/v1/bench/costs", Public, Public),
            Some(Need::Admin)
        );
        for (m, p) in [
            (Method::Get, "/v1"),
            (Method::Options, "/v1/packets"),
            (Method::Get, "/"),
        ] {
            assert_eq!(need(m, p, Token, Token), None, "{p}");
        }
    }
}
