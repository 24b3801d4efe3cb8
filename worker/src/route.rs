//! Routing: a request's method and path become a [`Route`] holding parsed,
//! checked values, or a [`Problem`] (404, 405, 400). Pure, so it is tested
//! natively.

use packet_core::Digest;
use pillbox_wire::ApiCode;
use pillbox_wire::DigestPrefix;

use crate::problem::Problem;

/// The API's HTTP methods (the ones a route can name).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    /// `GET`
    Get,
    /// `HEAD`
    Head,
    /// `PUT`
    Put,
    /// `POST`
    Post,
    /// `DELETE`
    Delete,
    /// `OPTIONS`
    Options,
    /// Anything else.
    Other,
}

impl Method {
    /// Parses a method name.
    pub fn parse(name: &str) -> Method {
        match name.to_ascii_uppercase().as_str() {
            "GET" => Method::Get,
            "HEAD" => Method::Head,
            "PUT" => Method::Put,
            "POST" => Method::Post,
            "DELETE" => Method::Delete,
            "OPTIONS" => Method::Options,
            _ => Method::Other,
        }
    }
}

/// What a request asks for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Route {
    /// `OPTIONS` anywhere under `/v1`: a CORS preflight.
    Preflight,
    /// `GET`/`HEAD /v1`: the server's limits and settings.
    Info,
    /// `GET /v1/packets`
    ListPackets,
    /// `PUT /v1/packets/{digest}`
    UploadPacket(Digest),
    /// `GET`/`HEAD /v1/packets/{digest}` (`head` is true for `HEAD`).
    GetPacket { digest: Digest, head: bool },
    /// `DELETE /v1/packets/{digest}`
    DeletePacket(Digest),
    /// `GET /v1/packets/{digest}/manifest`
    GetManifest(Digest),
    /// `GET`/`HEAD /v1/packets/{digest}/members/{path}`
    GetMember {
        digest: Digest,
        path: String,
        head: bool,
    },
    /// `GET /v1/packets/{digest}/recipes`
    GetRecipes(Digest),
    /// `POST /v1/packets/{digest}/chunks`
    GetChunks(Digest),
    /// `POST /v1/uploads`
    CreateUpload,
    /// `GET /v1/uploads/{id}`
    GetUpload(String),
    /// `PUT /v1/uploads/{id}/parts/{number}`
    UploadPart { id: String, number: u16 },
    /// `POST /v1/uploads/{id}/complete`
    CompleteUpload(String),
    /// `DELETE /v1/uploads/{id}`
    AbortUpload(String),
    /// `POST /v1/pushes`
    CreatePush,
    /// `GET /v1/pushes/{id}`
    GetPush(String),
    /// `DELETE /v1/pushes/{id}`
    AbortPush(String),
    /// `POST /v1/pushes/{id}/recipes`
    PushRecipes(String),
    /// `PUT /v1/pushes/{id}/parts/{number}`
    PushPart { id: String, number: u16 },
    /// `POST /v1/pushes/{id}/complete`
    CompletePush(String),
    /// The benchmark baseline, routed only when the Worker's `BENCH_ROUTES`
    /// is `1` (not part of the API): POST /v1/bench/baseline.
    BenchBaseline,
    /// What the isolate's requests have cost so far, routed only when
    /// `BENCH_ROUTES` is `1` (not part of the API): GET /v1/bench/costs.
    BenchCosts,
    /// `GET /v1/refs`
    ListRefs,
    /// `GET /v1/refs/{name}`
    GetRef(String),
    /// `PUT /v1/refs/{name}`
    PutRef(String),
    /// `DELETE /v1/refs/{name}`
    DeleteRef(String),
    /// `GET /v1/ref-history/{name}` (not under `/v1/refs/{name}`: a ref
    /// name may end in any segment)
    RefHistory(String),
    /// `GET /v1/digests/{prefix}`
    DigestsByPrefix(DigestPrefix),
    /// `GET /v1/search`
    Search,
    /// Anything outside `/v1`: the inspector's static files.
    Assets,
}

/// Routes a request. `path` is the URL path as sent (percent-encoded).
pub fn route(method: Method, path: &str) -> Result<Route, Problem> {
    let Some(rest) = path
        .strip_prefix("/v1")
        .filter(|r| r.is_empty() || r.starts_with('/'))
    else {
        return Ok(Route::Assets);
    };
    if method == Method::Options {
        return Ok(Route::Preflight);
    }
    let rest = rest.strip_prefix('/').unwrap_or(rest);
    let segments: Vec<&str> = if rest.is_empty() {
        Vec::new()
    } else {
        rest.split('/').collect()
    };
    use Method::*;
    let not_allowed = |allowed: &str| Err(Problem::method_not_allowed(allowed));
    match segments.as_slice() {
        [] => match method {
            Get | Head => Ok(Route::Info),
            _ => not_allowed("GET, HEAD"),
        },
        ["packets"] => match method {
            Get => Ok(Route::ListPackets),
            _ => not_allowed("GET"),
        },
        ["packets", digest] => {
            let digest = parse_digest(digest)?;
            match method {
                Put => Ok(Route::UploadPacket(digest)),
                Get => Ok(Route::GetPacket {
                    digest,
                    head: false,
                }),
                Head => Ok(Route::GetPacket { digest, head: true }),
                Delete => Ok(Route::DeletePacket(digest)),
                _ => not_allowed("GET, HEAD, PUT, DELETE"),
            }
        }
        ["packets", digest, "manifest"] => {
            let digest = parse_digest(digest)?;
            match method {
                Get => Ok(Route::GetManifest(digest)),
                _ => not_allowed("GET"),
            }
        }
        ["packets", digest, "recipes"] => {
            let digest = parse_digest(digest)?;
            match method {
                Get => Ok(Route::GetRecipes(digest)),
                _ => not_allowed("GET"),
            }
        }
        ["packets", digest, "chunks"] => {
            let digest = parse_digest(digest)?;
            match method {
                Post => Ok(Route::GetChunks(digest)),
                _ => not_allowed("POST"),
            }
        }
        ["packets", digest, "members", member @ ..] if !member.is_empty() => {
            let digest = parse_digest(digest)?;
            let path = percent_decode(&member.join("/"))?;
            match method {
                Get => Ok(Route::GetMember {
                    digest,
                    path,
                    head: false,
                }),
                Head => Ok(Route::GetMember {
                    digest,
                    path,
                    head: true,
                }),
                _ => not_allowed("GET, HEAD"),
            }
        }
        ["uploads"] => match method {
            Post => Ok(Route::CreateUpload),
            _ => not_allowed("POST"),
        },
        ["uploads", id] => {
            let id = check_upload_id(id)?;
            match method {
                Get => Ok(Route::GetUpload(id)),
                Delete => Ok(Route::AbortUpload(id)),
                _ => not_allowed("GET, DELETE"),
            }
        }
        ["uploads", id, "parts", number] => {
            let id = check_upload_id(id)?;
            let number = parse_part_number(number)?;
            match method {
                Put => Ok(Route::UploadPart { id, number }),
                _ => not_allowed("PUT"),
            }
        }
        ["uploads", id, "complete"] => {
            let id = check_upload_id(id)?;
            match method {
                Post => Ok(Route::CompleteUpload(id)),
                _ => not_allowed("POST"),
            }
        }
        ["pushes"] => match method {
            Post => Ok(Route::CreatePush),
            _ => not_allowed("POST"),
        },
        ["pushes", id] => {
            let id = check_session_id(id, "push")?;
            match method {
                Get => Ok(Route::GetPush(id)),
                Delete => Ok(Route::AbortPush(id)),
                _ => not_allowed("GET, DELETE"),
            }
        }
        ["pushes", id, "recipes"] => {
            let id = check_session_id(id, "push")?;
            match method {
                Post => Ok(Route::PushRecipes(id)),
                _ => not_allowed("POST"),
            }
        }
        ["pushes", id, "parts", number] => {
            let id = check_session_id(id, "push")?;
            let number = parse_part_number(number)?;
            match method {
                Put => Ok(Route::PushPart { id, number }),
                _ => not_allowed("PUT"),
            }
        }
        ["pushes", id, "complete"] => {
            let id = check_session_id(id, "push")?;
            match method {
                Post => Ok(Route::CompletePush(id)),
                _ => not_allowed("POST"),
            }
        }
        ["bench", "baseline"] => match method {
            Post => Ok(Route::BenchBaseline),
            _ => not_allowed("POST"),
        },
        ["bench", "costs"] => match method {
            Get => Ok(Route::BenchCosts),
            _ => not_allowed("GET"),
        },
        ["refs"] => match method {
            Get => Ok(Route::ListRefs),
            _ => not_allowed("GET"),
        },
        ["refs", name @ ..] => {
            let name = percent_decode(&name.join("/"))?;
            check_ref_name(&name)?;
            match method {
                Get => Ok(Route::GetRef(name)),
                Put => Ok(Route::PutRef(name)),
                Delete => Ok(Route::DeleteRef(name)),
                _ => not_allowed("GET, PUT, DELETE"),
            }
        }
        ["ref-history", name @ ..] if !name.is_empty() => {
            let name = percent_decode(&name.join("/"))?;
            check_ref_name(&name)?;
            match method {
                Get => Ok(Route::RefHistory(name)),
                _ => not_allowed("GET"),
            }
        }
        ["digests", prefix] => {
            let prefix = parse_prefix(prefix)?;
            match method {
                Get => Ok(Route::DigestsByPrefix(prefix)),
                _ => not_allowed("GET"),
            }
        }
        ["search"] => match method {
            Get => Ok(Route::Search),
            _ => not_allowed("GET"),
        },
        _ => Err(Problem::not_found("no such endpoint")),
    }
}

/// Parses a digest written in a URL (`sha256:<hex>`, the colon possibly
/// percent-encoded), refusing anything not canonical.
pub fn parse_digest(segment: &str) -> Result<Digest, Problem> {
    let text = percent_decode(segment)?;
    text.parse::<Digest>()
        .map_err(Problem::from_packet_error_400)
}

/// Parses a digest prefix written in a URL (`sha256:` and 8 to 64 hex
/// digits, the colon possibly percent-encoded): 400 `digest_prefix_invalid`
/// otherwise.
pub fn parse_prefix(segment: &str) -> Result<DigestPrefix, Problem> {
    let text = percent_decode(segment)?;
    DigestPrefix::parse(&text)
        .map_err(|e| Problem::bad_request(ApiCode::DigestPrefixInvalid, e.message()))
}

/// Decodes `%XX` escapes; the result must be UTF-8.
pub fn percent_decode(input: &str) -> Result<String, Problem> {
    let bytes = input.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = bytes
                .get(i + 1..i + 3)
                .and_then(|h| core::str::from_utf8(h).ok())
                .and_then(|h| u8::from_str_radix(h, 16).ok())
                .ok_or_else(|| {
                    Problem::bad_request(
                        ApiCode::BadPath,
                        "a `%` escape in the URL path is not two hex digits",
                    )
                })?;
            out.push(hex);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| {
        Problem::bad_request(ApiCode::BadPath, "the URL path is not UTF-8 once decoded")
    })
}

/// Checks a ref name: 1 to 256 bytes, `/`-separated segments of ASCII
/// letters, digits, `.`, `_` and `-`, no empty, `.` or `..` segment.
/// Example: `sessions/7f3c/latest`.
pub fn check_ref_name(name: &str) -> Result<(), Problem> {
    let valid = !name.is_empty()
        && name.len() <= 256
        && name.split('/').all(|s| {
            !s.is_empty()
                && s != "."
                && s != ".."
                && s.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
        });
    if valid {
        Ok(())
    } else {
        Err(Problem::bad_request(
            ApiCode::RefNameInvalid,
            "a ref name is 1 to 256 bytes of `/`-separated segments made of ASCII letters, digits, `.`, `_` and `-` (e.g. sessions/<name>/latest)",
        ))
    }
}

/// Checks a label: 1 to 128 bytes of ASCII letters, digits and `._:/=@+-`
/// (e.g. `host=ci-7`, `team:agents`).
pub fn check_label(label: &str) -> Result<(), Problem> {
    let valid = !label.is_empty()
        && label.len() <= 128
        && label
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._:/=@+-".contains(&b));
    if valid {
        Ok(())
    } else {
        Err(Problem::bad_request(
            ApiCode::LabelInvalid,
            "a label is 1 to 128 bytes of ASCII letters, digits and `._:/=@+-` (e.g. host=ci-7)",
        ))
    }
}

fn check_upload_id(id: &str) -> Result<String, Problem> {
    check_session_id(id, "upload")
}

/// An upload's or a push's id: 32 lowercase hex digits (else 404).
fn check_session_id(id: &str, what: &str) -> Result<String, Problem> {
    if id.len() == 32 && id.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
        Ok(id.to_string())
    } else {
        Err(Problem::not_found(format!("no such {what}")))
    }
}

fn parse_part_number(text: &str) -> Result<u16, Problem> {
    match text.parse::<u16>() {
        Ok(n) if (1..=crate::multipart::MAX_PARTS).contains(&n) && !text.starts_with('0') => Ok(n),
        _ => Err(Problem::bad_request(
            ApiCode::PartNumberInvalid,
            "a part number is a decimal integer from 1 to 10000",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::auth::{required, Need, ReadAccess};

    /// What a request needs with reads and lists gated.
    fn need(path: &str, method: Method) -> Option<Need> {
        required(
            &route(method, path).unwrap(),
            ReadAccess::Token,
            ReadAccess::Token,
        )
    }

    const HEX: &str = "0000000000000000000000000000000000000000000000000000000000000abc";

    fn digest() -> Digest {
        format!("sha256:{HEX}").parse().unwrap()
    }

    #[test]
    fn packet_routes_parse_the_digest() {
        let path = format!("/v1/packets/sha256:{HEX}");
        assert_eq!(route(Method::Put, &path), Ok(Route::UploadPacket(digest())));
        assert_eq!(
            route(Method::Head, &path),
            Ok(Route::GetPacket {
                digest: digest(),
                head: true
            })
        );
        let encoded = format!("/v1/packets/sha256%3A{HEX}/manifest");
        assert_eq!(
            route(Method::Get, &encoded),
            Ok(Route::GetManifest(digest()))
        );
    }

    #[test]
    fn a_malformed_digest_is_a_400_with_the_core_code() {
        let err = route(Method::Get, "/v1/packets/sha256:ABC").unwrap_err();
        assert_eq!(err.status, 400);
        assert_eq!(err.error.code(), "digest_syntax");
        let upper = format!("/v1/packets/sha256:{}", HEX.to_uppercase());
        assert_eq!(
            route(Method::Get, &upper).unwrap_err().error.code(),
            "digest_syntax"
        );
    }

    #[test]
    fn member_paths_keep_their_slashes_and_are_decoded() {
        let path = format!("/v1/packets/sha256:{HEX}/members/workspace/src/a%20b.rs");
        assert_eq!(
            route(Method::Get, &path),
            Ok(Route::GetMember {
                digest: digest(),
                path: "workspace/src/a b.rs".into(),
                head: false
            })
        );
        let bad = format!("/v1/packets/sha256:{HEX}/members/workspace/%ff");
        assert_eq!(
            route(Method::Get, &bad).unwrap_err().error.code(),
            "bad_path"
        );
    }

    #[test]
    fn refs_take_multi_segment_names() {
        assert_eq!(
            route(Method::Put, "/v1/refs/sessions/abc/latest"),
            Ok(Route::PutRef("sessions/abc/latest".into()))
        );
        assert_eq!(route(Method::Get, "/v1/refs"), Ok(Route::ListRefs));
        assert_eq!(
            route(Method::Get, "/v1/refs/a/../b")
                .unwrap_err()
                .error
                .code(),
            "ref_name_invalid"
        );
        assert_eq!(
            route(Method::Get, "/v1/refs/a//b")
                .unwrap_err()
                .error
                .code(),
            "ref_name_invalid"
        );
        assert_eq!(
            route(Method::Get, "/v1/refs/a%2F..%2Fb")
                .unwrap_err()
                .error
                .code(),
            "ref_name_invalid"
        );
    }

    #[test]
    fn a_refs_history_and_digest_prefixes() {
        assert_eq!(
            route(Method::Get, "/v1/ref-history/sessions/a/history"),
            Ok(Route::RefHistory("sessions/a/history".into()))
        );
        assert_eq!(
            route(Method::Get, "/v1/refs/sessions/a/history"),
            Ok(Route::GetRef("sessions/a/history".into())),
            "a ref may be named history"
        );
        assert_eq!(
            route(Method::Get, "/v1/ref-history/a/../b")
                .unwrap_err()
                .error
                .code(),
            "ref_name_invalid"
        );
        assert_eq!(
            route(Method::Put, "/v1/ref-history/a").unwrap_err().status,
            405
        );
        assert_eq!(
            route(Method::Get, "/v1/digests/sha256%3A0123abcd"),
            Ok(Route::DigestsByPrefix(
                DigestPrefix::parse("sha256:0123abcd").unwrap()
            ))
        );
        for bad in ["sha256:0123abc", "0123abcd", "sha256:0123ABCD"] {
            let err = route(Method::Get, &format!("/v1/digests/{bad}")).unwrap_err();
            assert_eq!(
                (err.status, err.error.code()),
                (400, "digest_prefix_invalid")
            );
        }
        assert_eq!(
            need("/v1/ref-history/sessions/a", Method::Get),
            Some(Need::Read)
        );
        assert_eq!(
            need("/v1/digests/sha256:0123abcd", Method::Get),
            Some(Need::Read)
        );
    }

    #[test]
    fn uploads_and_parts() {
        let id = "0123456789abcdef0123456789abcdef";
        assert_eq!(
            route(Method::Put, &format!("/v1/uploads/{id}/parts/3")),
            Ok(Route::UploadPart {
                id: id.into(),
                number: 3
            })
        );
        assert_eq!(
            route(Method::Post, &format!("/v1/uploads/{id}/complete")),
            Ok(Route::CompleteUpload(id.into()))
        );
        assert_eq!(
            route(Method::Put, &format!("/v1/uploads/{id}/parts/0"))
                .unwrap_err()
                .status,
            400
        );
        assert_eq!(
            route(Method::Put, &format!("/v1/uploads/{id}/parts/10001"))
                .unwrap_err()
                .status,
            400
        );
        assert_eq!(
            route(Method::Put, &format!("/v1/uploads/{id}/parts/03"))
                .unwrap_err()
                .status,
            400
        );
        assert_eq!(
            route(Method::Get, "/v1/uploads/NOTANID")
                .unwrap_err()
                .status,
            404
        );
    }

    #[test]
    fn pushes_and_a_packets_chunks() {
        let id = "00112233445566778899aabbccddeeff";
        assert_eq!(route(Method::Post, "/v1/pushes"), Ok(Route::CreatePush));
        assert_eq!(
            route(Method::Put, &format!("/v1/pushes/{id}/parts/2")),
            Ok(Route::PushPart {
                id: id.into(),
                number: 2
            })
        );
        assert_eq!(
            route(Method::Delete, &format!("/v1/pushes/{id}")),
            Ok(Route::AbortPush(id.into()))
        );
        assert_eq!(
            route(Method::Get, "/v1/pushes/xyz").unwrap_err().status,
            404
        );
        let chunks = format!("/v1/packets/sha256:{HEX}/chunks");
        assert_eq!(route(Method::Post, &chunks), Ok(Route::GetChunks(digest())));
        assert_eq!(need(&chunks, Method::Post), Some(Need::Read));
        let err = route(Method::Get, &chunks).unwrap_err();
        assert_eq!((err.status, err.allow.as_deref()), (405, Some("POST")));
        for r in [
            route(Method::Post, "/v1/pushes"),
            route(Method::Get, &format!("/v1/pushes/{id}")),
            route(Method::Post, "/v1/bench/baseline"),
            route(Method::Get, "/v1/bench/costs"),
        ] {
            assert!(matches!(
                required(&r.unwrap(), ReadAccess::Public, ReadAccess::Public),
                Some(Need::Push | Need::Admin)
            ));
        }
    }

    #[test]
    fn writes_are_marked() {
        assert_eq!(need("/v1/refs/x", Method::Put), Some(Need::Ref("x".into())));
        assert_eq!(need("/v1/refs/x", Method::Get), Some(Need::Read));
        assert_eq!(need("/v1/uploads", Method::Post), Some(Need::Push));
        assert_eq!(need("/v1/packets", Method::Get), Some(Need::List));
    }

    #[test]
    fn wrong_methods_and_unknown_paths() {
        let err = route(Method::Post, "/v1/packets").unwrap_err();
        assert_eq!((err.status, err.error.code()), (405, "method_not_allowed"));
        assert_eq!(route(Method::Get, "/v1/nope").unwrap_err().status, 404);
        assert_eq!(route(Method::Options, "/v1/packets"), Ok(Route::Preflight));
        assert_eq!(route(Method::Get, "/"), Ok(Route::Assets));
        assert_eq!(route(Method::Get, "/v10/x"), Ok(Route::Assets));
        assert_eq!(route(Method::Get, "/index.html"), Ok(Route::Assets));
    }

    #[test]
    fn labels() {
        assert!(check_label("host=ci-7").is_ok());
        assert!(check_label("").is_err());
        assert!(check_label("a b").is_err());
        assert!(check_label(&"x".repeat(129)).is_err());
    }
}
