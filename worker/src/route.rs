//! Routing: a request's method and path become a [`Route`] holding parsed,
//! checked values, or a [`Problem`] (404, 405, 400). Pure, so it is tested
//! natively.
//!
//! [`ROUTES`] is the one table of routes: each route's path, what its
//! caller needs ([`Access`]) and the methods it serves, each with the
//! `operationId` of `proto/openapi.yaml`. The router picks a path's route
//! by method from it, `auth` reads what a route needs from it, and
//! `worker/tests/openapi.rs` holds it to the document both ways. A new route is a
//! variant of [`Route`], its row of the table and its path's arm of
//! [`route`].

use packet_core::Digest;
use pillbox_wire::ApiCode;
use pillbox_wire::DigestPrefix;

use crate::problem::Problem;

/// The API's HTTP methods (the ones a route can name), in the order an
/// `Allow` header names them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
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

    /// Its name (`GET`); `OTHER` for a method the API does not name.
    pub fn as_str(self) -> &'static str {
        match self {
            Method::Get => "GET",
            Method::Head => "HEAD",
            Method::Put => "PUT",
            Method::Post => "POST",
            Method::Delete => "DELETE",
            Method::Options => "OPTIONS",
            Method::Other => "OTHER",
        }
    }
}

/// What a request asks for. The doc of each variant that serves the API
/// opens with its method(s) and path, as `tests/e2e/openapi.test.mjs`
/// reads them; its row of [`ROUTES`] says the same.
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

impl Route {
    /// The ref a route names (`/v1/refs/{name}`, `/v1/ref-history/{name}`):
    /// what a `refs:<prefix>` scope must cover to write it.
    pub fn ref_name(&self) -> Option<&str> {
        match self {
            Route::GetRef(name)
            | Route::PutRef(name)
            | Route::DeleteRef(name)
            | Route::RefHistory(name) => Some(name),
            _ => None,
        }
    }
}

/// What a route's caller needs (docs/worker.md, "Access"; the document's
/// `security`). [`crate::auth::required`] turns it into a
/// [`crate::auth::Need`] under the server's access settings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    /// Nothing: anyone may call it.
    Anyone,
    /// The `read` scope, unless the server sets `READ_ACCESS=public`.
    Read,
    /// The `list` scope, unless the server sets `LIST_ACCESS=public`.
    List,
    /// The `push` scope.
    Push,
    /// A `refs` scope that covers the ref the route names.
    Refs,
    /// The `delete` scope.
    Delete,
    /// The `admin` scope (the operator's routes).
    Admin,
}

/// What a route serves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Serves {
    /// Operations of `proto/openapi.yaml`: each method with its
    /// `operationId`.
    Api(&'static [(Method, &'static str)]),
    /// A benchmark's methods, answered only when `BENCH_ROUTES` is `1`
    /// (not in the document).
    Bench(&'static [Method]),
    /// No operation of its own: a CORS preflight, the inspector's files.
    Beside,
}

/// A route's row of [`ROUTES`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RouteSpec {
    /// Its variant of [`Route`].
    pub name: &'static str,
    /// Its path, as the document writes it (`…` for the rows beside the
    /// API: any path under `/v1`, any path outside it).
    pub path: &'static str,
    /// What its caller needs.
    pub access: Access,
    /// What it serves.
    pub serves: Serves,
}

impl RouteSpec {
    /// The methods it is picked for.
    pub fn methods(&self) -> Vec<Method> {
        match self.serves {
            Serves::Api(operations) => operations.iter().map(|(m, _)| *m).collect(),
            Serves::Bench(methods) => methods.to_vec(),
            Serves::Beside => Vec::new(),
        }
    }
}

/// A row's [`Serves`]: `api` and each method with its `operationId`,
/// `bench` and its methods, or `beside`.
macro_rules! serves {
    (api $($method:ident $operation:ident),+) => {
        Serves::Api(&[$((Method::$method, stringify!($operation))),+])
    };
    (bench $($method:ident),+) => {
        Serves::Bench(&[$(Method::$method),+])
    };
    (beside) => {
        Serves::Beside
    };
}

/// [`ROUTES`] and [`Route::spec`] from one row per variant of [`Route`]:
/// its name, its path, what its caller needs, what it serves.
macro_rules! routes {
    (@row $name:ident $path:literal $access:ident ($($serves:tt)+)) => {
        RouteSpec {
            name: stringify!($name),
            path: $path,
            access: Access::$access,
            serves: serves!($($serves)+),
        }
    };
    ($($name:ident $path:literal $access:ident ($($serves:tt)+),)+) => {
        /// Every route, one row each (in the order of [`Route`]'s variants).
        pub const ROUTES: &[RouteSpec] = &[$(routes!(@row $name $path $access ($($serves)+))),+];

        impl Route {
            /// Its row of [`ROUTES`].
            pub fn spec(&self) -> &'static RouteSpec {
                match self {
                    $(Route::$name { .. } => {
                        const ROW: RouteSpec = routes!(@row $name $path $access ($($serves)+));
                        &ROW
                    })+
                }
            }
        }
    };
}

routes! {
    // route         path                                    needs   serves
    Preflight        "/v1/…"                                 Anyone  (beside),
    Info             "/v1"                                   Anyone  (api Get getInfo, Head headInfo),
    ListPackets      "/v1/packets"                           List    (api Get listPackets),
    UploadPacket     "/v1/packets/{digest}"                  Push    (api Put uploadPacket),
    GetPacket        "/v1/packets/{digest}"                  Read    (api Get getPacket, Head headPacket),
    DeletePacket     "/v1/packets/{digest}"                  Delete  (api Delete deletePacket),
    GetManifest      "/v1/packets/{digest}/manifest"         Read    (api Get getPacketManifest),
    GetMember        "/v1/packets/{digest}/members/{path}"   Read    (api Get getPacketMember, Head headPacketMember),
    GetRecipes       "/v1/packets/{digest}/recipes"          Read    (api Get getPacketRecipes),
    GetChunks        "/v1/packets/{digest}/chunks"           Read    (api Post getPacketChunks),
    CreateUpload     "/v1/uploads"                           Push    (api Post createUpload),
    GetUpload        "/v1/uploads/{id}"                      Push    (api Get getUpload),
    UploadPart       "/v1/uploads/{id}/parts/{number}"       Push    (api Put uploadPart),
    CompleteUpload   "/v1/uploads/{id}/complete"             Push    (api Post completeUpload),
    AbortUpload      "/v1/uploads/{id}"                      Push    (api Delete abortUpload),
    CreatePush       "/v1/pushes"                            Push    (api Post createPush),
    GetPush          "/v1/pushes/{id}"                       Push    (api Get getPush),
    AbortPush        "/v1/pushes/{id}"                       Push    (api Delete abortPush),
    PushRecipes      "/v1/pushes/{id}/recipes"               Push    (api Post addPushRecipes),
    PushPart         "/v1/pushes/{id}/parts/{number}"        Push    (api Put uploadPushPart),
    CompletePush     "/v1/pushes/{id}/complete"              Push    (api Post completePush),
    BenchBaseline    "/v1/bench/baseline"                    Admin   (bench Post),
    BenchCosts       "/v1/bench/costs"                       Admin   (bench Get),
    ListRefs         "/v1/refs"                              List    (api Get listRefs),
    GetRef           "/v1/refs/{name}"                       Read    (api Get getRef),
    PutRef           "/v1/refs/{name}"                       Refs    (api Put putRef),
    DeleteRef        "/v1/refs/{name}"                       Refs    (api Delete deleteRef),
    RefHistory       "/v1/ref-history/{name}"                Read    (api Get getRefHistory),
    DigestsByPrefix  "/v1/digests/{prefix}"                  Read    (api Get findDigests),
    Search           "/v1/search"                            List    (api Get searchPackets),
    Assets           "/…"                                    Anyone  (beside),
}

/// Routes a request. `path` is the URL path as sent (percent-encoded).
/// Each arm parses one path's values and names the routes that lie there;
/// [`pick`] takes the one of the request's method from [`ROUTES`].
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
    let head = method == Method::Head;
    match segments.as_slice() {
        [] => pick(method, [Route::Info]),
        ["packets"] => pick(method, [Route::ListPackets]),
        ["packets", digest] => {
            let digest = parse_digest(digest)?;
            pick(
                method,
                [
                    Route::UploadPacket(digest),
                    Route::GetPacket { digest, head },
                    Route::DeletePacket(digest),
                ],
            )
        }
        ["packets", digest, "manifest"] => {
            pick(method, [Route::GetManifest(parse_digest(digest)?)])
        }
        ["packets", digest, "recipes"] => pick(method, [Route::GetRecipes(parse_digest(digest)?)]),
        ["packets", digest, "chunks"] => pick(method, [Route::GetChunks(parse_digest(digest)?)]),
        ["packets", digest, "members", member @ ..] if !member.is_empty() => {
            let digest = parse_digest(digest)?;
            let path = percent_decode(&member.join("/"))?;
            pick(method, [Route::GetMember { digest, path, head }])
        }
        ["uploads"] => pick(method, [Route::CreateUpload]),
        ["uploads", id] => {
            let id = check_upload_id(id)?;
            pick(
                method,
                [Route::GetUpload(id.clone()), Route::AbortUpload(id)],
            )
        }
        ["uploads", id, "parts", number] => {
            let id = check_upload_id(id)?;
            let number = parse_part_number(number)?;
            pick(method, [Route::UploadPart { id, number }])
        }
        ["uploads", id, "complete"] => pick(method, [Route::CompleteUpload(check_upload_id(id)?)]),
        ["pushes"] => pick(method, [Route::CreatePush]),
        ["pushes", id] => {
            let id = check_push_id(id)?;
            pick(method, [Route::GetPush(id.clone()), Route::AbortPush(id)])
        }
        ["pushes", id, "recipes"] => pick(method, [Route::PushRecipes(check_push_id(id)?)]),
        ["pushes", id, "parts", number] => {
            let id = check_push_id(id)?;
            let number = parse_part_number(number)?;
            pick(method, [Route::PushPart { id, number }])
        }
        ["pushes", id, "complete"] => pick(method, [Route::CompletePush(check_push_id(id)?)]),
        ["bench", "baseline"] => pick(method, [Route::BenchBaseline]),
        ["bench", "costs"] => pick(method, [Route::BenchCosts]),
        ["refs"] => pick(method, [Route::ListRefs]),
        ["refs", name @ ..] => {
            let name = percent_decode(&name.join("/"))?;
            check_ref_name(&name)?;
            pick(
                method,
                [
                    Route::GetRef(name.clone()),
                    Route::PutRef(name.clone()),
                    Route::DeleteRef(name),
                ],
            )
        }
        ["ref-history", name @ ..] if !name.is_empty() => {
            let name = percent_decode(&name.join("/"))?;
            check_ref_name(&name)?;
            pick(method, [Route::RefHistory(name)])
        }
        ["digests", prefix] => pick(method, [Route::DigestsByPrefix(parse_prefix(prefix)?)]),
        ["search"] => pick(method, [Route::Search]),
        _ => Err(Problem::not_found("no such endpoint")),
    }
}

/// The route among `routes` (those of one path) that serves `method`, or
/// 405 with `Allow` naming the methods they serve, in [`Method`]'s order.
fn pick<const N: usize>(method: Method, routes: [Route; N]) -> Result<Route, Problem> {
    let mut allowed = Vec::new();
    for route in routes {
        let methods = route.spec().methods();
        if methods.contains(&method) {
            return Ok(route);
        }
        allowed.extend(methods);
    }
    allowed.sort();
    allowed.dedup();
    let names: Vec<&str> = allowed.iter().map(|m| m.as_str()).collect();
    Err(Problem::method_not_allowed(&names.join(", ")))
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

fn check_push_id(id: &str) -> Result<String, Problem> {
    check_session_id(id, "push")
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

    /// A path of `template` with a valid value for each parameter.
    fn sample(template: &str) -> String {
        template
            .split('/')
            .map(|segment| match segment {
                "{digest}" => format!("sha256:{HEX}"),
                "{id}" => "0123456789abcdef0123456789abcdef".into(),
                "{number}" => "2".into(),
                "{path}" => "workspace/src/a.rs".into(),
                "{name}" => "sessions/x/latest".into(),
                "{prefix}" => "sha256:0123abcd".into(),
                s if s.starts_with('{') => panic!("{template}: give {s} a sample value"),
                s => s.into(),
            })
            .collect::<Vec<_>>()
            .join("/")
    }

    /// The rows routed by path: every other row has a path of the API.
    fn with_paths() -> impl Iterator<Item = &'static RouteSpec> {
        ROUTES.iter().filter(|r| r.serves != Serves::Beside)
    }

    #[test]
    fn every_row_is_the_route_of_its_path_and_methods() {
        use Method::*;
        for row in with_paths() {
            let path = sample(row.path);
            for method in row.methods() {
                let routed = route(method, &path)
                    .unwrap_or_else(|p| panic!("{} {path}: {}", method.as_str(), p.to_json()));
                assert_eq!(routed.spec(), row, "{} {path}", method.as_str());
                if let Route::GetPacket { head, .. } | Route::GetMember { head, .. } = routed {
                    assert_eq!(head, method == Head, "{} {path}", method.as_str());
                }
            }
            // Any other method is 405, naming exactly the path's methods.
            let mut allowed: Vec<Method> = with_paths()
                .filter(|r| r.path == row.path)
                .flat_map(|r| r.methods())
                .collect();
            allowed.sort();
            allowed.dedup();
            let names: Vec<&str> = allowed.iter().map(|m| m.as_str()).collect();
            for method in [Get, Head, Put, Post, Delete, Other] {
                if allowed.contains(&method) {
                    continue;
                }
                let err = route(method, &path).unwrap_err();
                assert_eq!(
                    (err.status, err.allow.as_deref()),
                    (405, Some(names.join(", ").as_str())),
                    "{} {path}",
                    method.as_str()
                );
            }
        }
    }

    #[test]
    fn the_table_has_one_row_per_route_and_names_the_operations_once() {
        let mut names: Vec<&str> = ROUTES.iter().map(|r| r.name).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), ROUTES.len(), "a route with two rows");
        let mut operations: Vec<&str> = ROUTES
            .iter()
            .flat_map(|r| match r.serves {
                Serves::Api(operations) => operations.iter().map(|(_, id)| *id).collect(),
                _ => Vec::new(),
            })
            .collect();
        let count = operations.len();
        operations.sort();
        operations.dedup();
        assert_eq!(operations.len(), count, "an operationId twice");
        assert_eq!(
            route(Method::Options, "/v1/refs").unwrap().spec().name,
            "Preflight"
        );
        assert_eq!(
            route(Method::Post, "/inspector.js").unwrap().spec().name,
            "Assets"
        );
    }

    #[test]
    fn a_route_that_needs_a_refs_scope_names_its_ref() {
        for row in with_paths().filter(|r| r.access == Access::Refs) {
            for method in row.methods() {
                let routed = route(method, &sample(row.path)).unwrap();
                assert_eq!(routed.ref_name(), Some("sessions/x/latest"), "{}", row.name);
                assert_eq!(
                    required(&routed, ReadAccess::Public, ReadAccess::Public),
                    Some(Need::Ref("sessions/x/latest".into()))
                );
            }
        }
    }

    #[test]
    fn labels() {
        assert!(check_label("host=ci-7").is_ok());
        assert!(check_label("").is_err());
        assert!(check_label("a b").is_err());
        assert!(check_label(&"x".repeat(129)).is_err());
    }
}
