//! A store's refusal in the CLI's terms: what was refused (a ref, a
//! packet, a push) and what the user can do with this CLI, chosen by the
//! store's code (proto/openapi.yaml), never by its free text. No HTTP
//! status, header or route reaches the message or the advice; a packet
//! refused by the store's packet-core keeps packet-core's code, path,
//! offset, message and advice unchanged.

use packet_core::ErrorCode;
use pillbox_wire::{ApiCode, Problem};

use crate::error::{CliError, EXIT_IO, EXIT_REFUSED, EXIT_VERIFY};

/// The code of a failure (5xx) whose body is not the API's (a proxy's
/// page, say): the CLI's own, since the store named none.
const REMOTE_FAILED: &str = "remote_failed";
/// The code of a refusal whose body is not the API's and whose status
/// names none of the API's codes.
const REMOTE_REFUSED: &str = "remote_refused";

/// Where a token is configured, for advice.
const TOKEN_HOW: &str = "pass it with --token-file FILE or $PILLBOX_TOKEN";

/// What a request was about, read from the method and route it was sent
/// to (`"PUT /v1/refs/sessions/x"`).
#[derive(Debug, PartialEq, Eq)]
pub enum Subject {
    /// `GET /v1`: the store's settings.
    Store,
    /// A ref, by name; `write` for a move.
    Ref { name: String, write: bool },
    /// A packet (or one of its members, manifest, recipes or chunks).
    Packet { digest: String, write: bool },
    /// An upload in parts, or a delta push.
    Upload,
    /// Listing or search.
    List,
    /// Anything else.
    Other,
}

impl Subject {
    /// The subject of `what`, a method and a route.
    pub fn of(what: &str) -> Subject {
        let (method, rest) = what.split_once(' ').unwrap_or(("GET", what));
        let path = rest.split([' ', '?']).next().unwrap_or("");
        let write = matches!(method, "PUT" | "POST" | "DELETE" | "PATCH");
        let Some(route) = path.strip_prefix("/v1") else {
            return Subject::Other;
        };
        let route = route.strip_prefix('/').unwrap_or(route);
        if route.is_empty() {
            return Subject::Store;
        }
        let (head, tail) = route.split_once('/').unwrap_or((route, ""));
        match head {
            "refs" | "ref-history" if !tail.is_empty() => Subject::Ref {
                name: percent_decode(tail),
                write,
            },
            "digests" => Subject::Packet {
                digest: percent_decode(tail),
                write: false,
            },
            "refs" | "search" => Subject::List,
            "packets" if tail.is_empty() => {
                if write {
                    Subject::Upload
                } else {
                    Subject::List
                }
            }
            "packets" => Subject::Packet {
                digest: percent_decode(tail.split('/').next().unwrap_or(tail)),
                write,
            },
            "uploads" | "pushes" => Subject::Upload,
            _ => Subject::Other,
        }
    }

    /// The scope a token needs for this request (docs/worker.md, "Access").
    fn scope(&self) -> String {
        match self {
            Subject::Ref { name, write: true } => format!("refs (or refs:<a prefix of {name}>)"),
            Subject::Packet { write: true, .. } | Subject::Upload => "push".into(),
            Subject::List => "list".into(),
            _ => "read".into(),
        }
    }

    /// The thing refused, as a person names it.
    fn noun(&self) -> String {
        match self {
            Subject::Store => "the store's settings".into(),
            Subject::Ref { name, .. } => format!("the ref {name}"),
            Subject::Packet { digest, .. } => format!("the packet {digest}"),
            Subject::Upload => "the upload".into(),
            Subject::List => "the listing".into(),
            Subject::Other => "the request".into(),
        }
    }

    /// What was being done, for a failure to reach the store.
    pub fn doing(&self) -> String {
        match self {
            Subject::Store => "reading the store's settings".into(),
            Subject::Ref { name, write: true } => format!("moving the ref {name}"),
            Subject::Ref { name, .. } => format!("reading the ref {name}"),
            Subject::Packet {
                digest,
                write: true,
            } => format!("uploading the packet {digest}"),
            Subject::Packet { digest, .. } => format!("reading the packet {digest}"),
            Subject::Upload => "uploading".into(),
            Subject::List => "listing".into(),
            Subject::Other => "a request".into(),
        }
    }
}

/// The folder a ref name is in, as a prefix for `refs` (`sessions/x/`
/// for `sessions/x/latest`; empty for a name without `/`).
fn parent(name: &str) -> &str {
    name.rfind('/').map_or("", |i| &name[..=i])
}

fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' && i + 2 < b.len() {
            if let Ok(v) = u8::from_str_radix(&s[i + 1..i + 3], 16) {
                out.push(v);
                i += 3;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The CLI error for a store's refusal of `what` with `status` and, when
/// the body is the API's, its problem.
pub fn refusal(what: &str, status: u16, problem: Option<Problem>) -> CliError {
    let subject = Subject::of(what);
    // The API's code, or without the API's body the one its status means.
    let api = match &problem {
        Some(p) => p.api_code(),
        None => match status {
            401 => Some(ApiCode::Unauthorized),
            403 => Some(ApiCode::Forbidden),
            404 => Some(ApiCode::NotFound),
            500..=599 => Some(ApiCode::Internal),
            _ => None,
        },
    };
    let code = match (&problem, api) {
        (Some(p), _) => p.code().to_owned(),
        (None, _) if (500..=599).contains(&status) => REMOTE_FAILED.to_owned(),
        (None, Some(api)) => api.as_str().to_owned(),
        (None, None) => REMOTE_REFUSED.to_owned(),
    };
    let exit = match status {
        422 => EXIT_VERIFY,
        500..=599 => EXIT_IO,
        _ => EXIT_REFUSED,
    };
    let store_said = problem.as_ref().map(|p| p.message().to_owned());
    let (path, offset) = problem.as_ref().map_or((None, None), |p| {
        let d = &p.refusal.details;
        (d.path.as_ref().map(|p| p.to_string()), d.offset)
    });
    // A packet refused by the store's packet-core: its words unchanged.
    if status == 422 {
        if let Some(p) = &problem {
            if ErrorCode::from_str_code(p.code()).is_some() {
                return CliError::Remote {
                    code,
                    exit,
                    path,
                    offset,
                    message: format!("the store refused {}: {}", subject.noun(), p.message()),
                    advice: p.advice().to_owned(),
                };
            }
        }
    }
    let (message, advice) = words(
        &subject,
        api,
        &code,
        status,
        store_said.as_deref(),
        &problem,
    );
    CliError::Remote {
        code,
        exit,
        path,
        offset,
        message,
        advice,
    }
}

/// The message and the advice for `code`: by the API's code `api`, or
/// packet-core's, or for a code this CLI does not know, by its status and
/// its family.
fn words(
    subject: &Subject,
    api: Option<ApiCode>,
    code: &str,
    status: u16,
    store_said: Option<&str>,
    problem: &Option<Problem>,
) -> (String, String) {
    let noun = subject.noun();
    let said = |default: String| store_said.map_or(default, str::to_owned);
    use ApiCode::*;
    match (api, ErrorCode::from_str_code(code)) {
        (Some(Unauthorized), _) => (
            format!("the store needs a token for {noun}"),
            format!("get a token from the store's operator and {TOKEN_HOW}"),
        ),
        (Some(Forbidden), _) if problem.is_none() => (
            format!("the store refused the token for {noun}"),
            format!("the token is unknown to the store or its scopes lack {} (or admin): get a current one from the store's operator and {TOKEN_HOW}", subject.scope()),
        ),
        (Some(Forbidden), _) => (
            "the store does not know the token it was given".into(),
            format!("check the token (a revoked or mistyped one is refused); get a current one from the store's operator and {TOKEN_HOW}"),
        ),
        (Some(ScopeMissing), _) => {
            let scope = subject.scope();
            (
                said(format!("the token may not do this to {noun}")),
                format!("this needs a token whose scopes include {scope} (or admin): ask the store's operator for one and {TOKEN_HOW}"),
            )
        }
        (Some(TokenNotConfigured), _) => (
            "the store has no tokens configured, so it refuses every request that needs one".into(),
            "the store's operator must set PILLBOX_TOKENS (docs/worker.md, \"Access\")".into(),
        ),
        (Some(TokensInvalid), _) => (
            "the store's token configuration cannot be read".into(),
            "the store's operator must fix its PILLBOX_TOKENS secret; nothing on this machine can".into(),
        ),
        (Some(RefConflict), _) => {
            let current = problem.as_ref().and_then(|p| p.current.clone());
            match (subject, current) {
                (Subject::Ref { name, .. }, Some(Some(held))) => (
                    format!("the ref {name} holds {held}, not the packet --expect-ref named"),
                    format!("someone moved it: look at that packet (pillbox checkpoint pull {held} -o FILE), then run the command again with --expect-ref {held} to move it from there"),
                ),
                (Subject::Ref { name, .. }, Some(None)) => (
                    format!("the ref {name} does not exist, so it cannot hold the packet --expect-ref named"),
                    "run the command again with --expect-ref absent to create it".into(),
                ),
                _ => (
                    format!("{noun} moved while this command ran"),
                    "run the command again; --expect-ref names the digest it must hold".into(),
                ),
            }
        }
        (Some(NotFound), _) => match subject {
            Subject::Ref { name, .. } => (
                format!("the store has no ref {name}"),
                format!("list the refs near it with `pillbox checkpoint refs {}` (names are case-sensitive), and check that --remote names the store it was pushed to; a packet can also be pulled by its digest (sha256:…)", parent(name)),
            ),
            Subject::Packet { digest, .. } => (
                format!("the store holds no packet {digest}"),
                "check the digest (all 64 hex digits, as push or save printed it) and that --remote names the store it was pushed to; or pull by the ref it was pushed under".into(),
            ),
            _ => (
                format!("the store does not know {noun}"),
                "check that --remote is the base URL of a pillbox store (e.g. https://pillbox.example.workers.dev)".into(),
            ),
        },
        (Some(NotAFile), _) => (
            said(format!("{noun}: not a file")),
            "only files have bytes; inspect the packet to see its directories and symlinks".into(),
        ),
        (Some(MethodNotAllowed | LengthRequired | PreconditionInvalid | EncodingUnsupported), _) => (
            said(format!("the store refused {noun}")),
            "this pillbox and the store do not speak the same API version: update pillbox, or ask the store's operator which version it runs".into(),
        ),
        (Some(RefNameInvalid), _) => (
            said(format!("{noun}: not a valid ref name")),
            "use /-separated segments of letters, digits, '.', '_' and '-', such as sessions/<name>/latest".into(),
        ),
        (Some(LabelInvalid), _) => (
            said("a label is not valid".into()),
            "write labels as key=value with letters, digits, '.', '_', '-' and ':', e.g. --label host=ci-7".into(),
        ),
        (Some(DigestPrefixInvalid), _) => (
            said("a digest prefix is not valid".into()),
            "name a packet by sha256: and at least 8 lowercase hex digits of its digest (or all 64)".into(),
        ),
        (_, Some(ErrorCode::DigestSyntax)) => (
            said("a digest is not valid".into()),
            "write digests as sha256: and 64 lowercase hex digits".into(),
        ),
        (Some(PartSizeInvalid), _) => (
            said("the part size is outside what the store takes".into()),
            "leave --part-size out to use the store's default, or choose one between its min and max".into(),
        ),
        (Some(PushTooLarge | UploadTooLarge | BodyTooLarge | PartTooLarge), _)
        | (_, Some(ErrorCode::LimitSize | ErrorCode::LimitMembers | ErrorCode::LimitManifest)) => (
            said(format!("{noun} is larger than the store takes")),
            "leave large files out of the workspace with --exclude and pack again, or ask the store's operator for higher limits".into(),
        ),
        (Some(PacketReferenced), _) => (
            said(format!("refs point at {noun}")),
            "move those refs to another packet first".into(),
        ),
        (Some(WholeUploadRequired), _) => (
            said(format!("{noun} must be sent whole")),
            "run the command again with --whole".into(),
        ),
        (Some(Internal), _) => (
            said(format!("the store failed while handling {noun}")),
            "run the command again in a moment (an interrupted push resumes where it stopped); if it keeps failing, the store's operator can read its logs".into(),
        ),
        _ if status == 409 || status == 400 || status == 422 || code.starts_with("chunk")
            || code.starts_with("recipe") || code.ends_with("_incomplete") =>
        {
            (
                said(format!("the store refused {noun}")),
                "run the command again (what the store took is kept); if it refuses again, this pillbox and the store disagree on the protocol: update pillbox or report it with the command that led to it".into(),
            )
        }
        _ => (
            said(format!("the store refused {noun}")),
            "check --remote and the token; if it keeps happening, report it with the command that led to it".into(),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use packet_core::{Refusal, RefusalDetails};

    fn problem(code: &str, current: Option<Option<&str>>) -> Option<Problem> {
        Some(Problem {
            refusal: Refusal {
                code: code.to_owned().into(),
                details: RefusalDetails {
                    path: None,
                    offset: None,
                    message: "the store's words".into(),
                    advice: "the store's advice: If-Match, GET /v1/packets".into(),
                },
            },
            current: current.map(|c| c.map(str::to_owned)),
            missing: None,
        })
    }

    fn said(e: &CliError) -> (String, String, String, i32) {
        let r = e.report();
        (
            r.code.clone(),
            r.details.message.to_string(),
            r.details.advice.to_string(),
            r.exit_code,
        )
    }

    /// Advice in CLI terms: no status, route, header or "see above".
    fn in_cli_terms(text: &str) {
        for word in [
            "HTTP",
            "/v1",
            "If-Match",
            "If-None-Match",
            "header",
            "above",
            "GET ",
            "PUT ",
            "POST ",
        ] {
            assert!(!text.contains(word), "{word:?} in {text:?}");
        }
    }

    #[test]
    fn requests_are_named_by_what_they_are_about() {
        assert_eq!(Subject::of("GET /v1"), Subject::Store);
        assert_eq!(
            Subject::of("PUT /v1/refs/sessions/a%20b/latest"),
            Subject::Ref {
                name: "sessions/a b/latest".into(),
                write: true
            }
        );
        assert_eq!(
            Subject::of("GET /v1/packets/sha256:ab/members/x"),
            Subject::Packet {
                digest: "sha256:ab".into(),
                write: false
            }
        );
        assert_eq!(Subject::of("POST /v1/pushes"), Subject::Upload);
        assert_eq!(Subject::of("PUT /v1/uploads/x/parts/1"), Subject::Upload);
        assert_eq!(Subject::of("GET /v1/refs?prefix=x"), Subject::List);
        assert_eq!(
            Subject::of("GET /v1/ref-history/sessions/x?limit=5"),
            Subject::Ref {
                name: "sessions/x".into(),
                write: false
            }
        );
        assert_eq!(
            Subject::of("GET /v1/digests/sha256:0123abcd?limit=10"),
            Subject::Packet {
                digest: "sha256:0123abcd".into(),
                write: false
            }
        );
        assert_eq!(
            Subject::of("GET /v1/packets/sha256:ab (a body's bytes)"),
            Subject::Packet {
                digest: "sha256:ab".into(),
                write: false
            }
        );
    }

    #[test]
    fn a_ref_conflict_names_the_digest_for_expect_ref() {
        let held = format!("sha256:{}", "c".repeat(64));
        let e = refusal(
            "PUT /v1/refs/sessions/x",
            409,
            problem("ref_conflict", Some(Some(&held))),
        );
        let (code, message, advice, exit) = said(&e);
        assert_eq!((code.as_str(), exit), ("ref_conflict", 5));
        assert!(
            message.contains("sessions/x") && message.contains(&held),
            "{message}"
        );
        assert!(advice.contains(&format!("--expect-ref {held}")), "{advice}");
        in_cli_terms(&message);
        in_cli_terms(&advice);
        let e = refusal(
            "PUT /v1/refs/sessions/x",
            409,
            problem("ref_conflict", Some(None)),
        );
        assert!(said(&e).2.contains("--expect-ref absent"));
    }

    #[test]
    fn a_missing_scope_names_the_scope_and_how_to_get_it() {
        for (what, scope) in [
            (
                "PUT /v1/refs/sessions/x",
                "refs (or refs:<a prefix of sessions/x>)",
            ),
            ("POST /v1/pushes", "push"),
            ("PUT /v1/packets/sha256:ab", "push"),
            ("GET /v1/packets/sha256:ab", "read"),
            ("GET /v1/refs?prefix=s", "list"),
        ] {
            let (code, _, advice, exit) = said(&refusal(what, 403, problem("scope_missing", None)));
            assert_eq!((code.as_str(), exit), ("scope_missing", 5));
            assert!(
                advice.contains(&format!("scopes include {scope}")),
                "{what}: {advice}"
            );
            assert!(advice.contains("--token-file"), "{advice}");
            in_cli_terms(&advice);
        }
    }

    #[test]
    fn not_found_names_the_ref_or_digest_and_what_to_check() {
        let (_, message, advice, _) = said(&refusal(
            "GET /v1/refs/sessions/typo",
            404,
            problem("not_found", None),
        ));
        assert_eq!(message, "the store has no ref sessions/typo");
        assert!(
            advice.contains("pillbox checkpoint refs sessions/"),
            "{advice}"
        );
        in_cli_terms(&advice);
        let d = format!("sha256:{}", "0".repeat(64));
        let (_, message, advice, _) = said(&refusal(&format!("GET /v1/packets/{d}"), 404, None));
        assert_eq!(message, format!("the store holds no packet {d}"));
        in_cli_terms(&message);
        in_cli_terms(&advice);
    }

    #[test]
    fn a_packet_refused_by_the_store_keeps_packet_cores_words() {
        let mut p = problem("member_digest_mismatch", None).unwrap();
        p.refusal.details.path = Some("workspace/a".into());
        p.refusal.details.offset = Some(512);
        let e = refusal("POST /v1/pushes/x/complete", 422, Some(p));
        let r = e.report();
        assert_eq!(
            (r.code.as_str(), r.exit_code),
            ("member_digest_mismatch", 3)
        );
        assert_eq!(r.details.path.as_deref(), Some("workspace/a"));
        assert_eq!(r.details.offset, Some(512));
        assert!(r.details.message.ends_with("the store's words"));
    }

    /// Every code the store's API document names, and every code of the
    /// API's table, gets advice in the CLI's terms, not the store's.
    #[test]
    fn every_store_code_is_advised_in_cli_terms() {
        let doc = include_str!("../../../proto/openapi.yaml");
        let mut codes: Vec<&str> = doc
            .split('`')
            .skip(1)
            .step_by(2)
            .filter(|c| c.len() > 3 && c.bytes().all(|b| b.is_ascii_lowercase() || b == b'_'))
            .filter(|c| c.contains('_') || ["unauthorized", "forbidden", "internal"].contains(c))
            .collect();
        codes.sort_unstable();
        codes.dedup();
        assert!(codes.contains(&"ref_conflict") && codes.contains(&"scope_missing"));
        codes.extend(ApiCode::ALL.iter().map(|c| c.as_str()));
        codes.sort_unstable();
        codes.dedup();
        for code in codes {
            if ErrorCode::from_str_code(code).is_some() {
                continue;
            }
            for status in [400, 403, 404, 409, 413, 422, 500] {
                let e = refusal("PUT /v1/refs/sessions/x", status, problem(code, None));
                let (_, message, advice, _) = said(&e);
                assert!(!advice.contains("the store's advice"), "{code}: {advice}");
                in_cli_terms(&message);
                in_cli_terms(&advice);
            }
        }
        let (_, message, advice, exit) = said(&refusal("GET /v1/packets/sha256:ab", 502, None));
        assert_eq!(exit, 4);
        in_cli_terms(&message);
        in_cli_terms(&advice);
    }
}
