//! The API's refusals: an HTTP status and the JSON body
//! `{"error":{"code","path","offset","message","advice"}}`
//! ([`pillbox_wire::ErrorBody`], packet-core's [`Refusal`] shape). Packet refusals carry packet-core's codes
//! unchanged; the API's own codes, each with its status, are the table
//! [`ApiCode`] (and `x-codes` in `proto/openapi.yaml`).

use packet_core::{ErrorCode, Refusal};
use pillbox_wire::{ApiCode, ErrorBody};

/// packet-core's message of a wrong digest ("the bytes hash to X, the
/// manifest says Y", "expected Y, the packet is X") without X, the digest
/// computed: what bytes hash to is told to no one who did not name it.
fn without_computed(message: &str) -> Option<String> {
    if let Some(rest) = message.strip_prefix("the bytes hash to ") {
        let (_, stated) = rest.split_once(", the manifest says ")?;
        return Some(format!(
            "the bytes do not hash to {stated}, the sha256 the manifest states"
        ));
    }
    let (expected, _) = message.strip_prefix("expected ")?.split_once(", ")?;
    Some(format!("the bytes do not hash to {expected}"))
}

/// A refusal, ready to become a response.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    /// HTTP status.
    pub status: u16,
    /// The body's `error`: code, path, offset, message, advice and, on a
    /// ref conflict, the digest the ref holds.
    pub error: pillbox_wire::Problem,
    /// For 405: the methods the resource allows (the `Allow` header).
    pub allow: Option<String>,
}

impl Problem {
    /// A refusal with one of the API's codes (and the status the table
    /// gives it), a message and advice.
    pub fn new(code: ApiCode, message: impl Into<String>, advice: impl Into<String>) -> Problem {
        Problem::with_status(code.status(), code.as_str(), message.into(), advice.into())
    }

    /// 413 with packet-core's code of the limit a packet is over.
    pub fn over_limit(
        code: ErrorCode,
        message: impl Into<String>,
        advice: impl Into<String>,
    ) -> Problem {
        Problem::with_status(413, code.as_str(), message.into(), advice.into())
    }

    fn with_status(status: u16, code: &str, message: String, advice: String) -> Problem {
        Problem {
            status,
            error: pillbox_wire::Problem {
                refusal: Refusal::new(code.to_string(), message, advice),
                current: None,
                missing: None,
            },
            allow: None,
        }
    }

    /// A packet refused by packet-core: 422 with the core's code, path,
    /// offset and advice unchanged, and its message, except that a refusal
    /// of a wrong digest names only the digest the request or the manifest
    /// stated, never the one the store computed (docs/hardening.md,
    /// "What a refusal tells").
    pub fn from_packet_error(error: &packet_core::Error) -> Problem {
        let mut refusal = error.refusal().into_owned();
        if matches!(
            error.code(),
            ErrorCode::PacketDigestMismatch | ErrorCode::MemberDigestMismatch
        ) {
            if let Some(message) = without_computed(&refusal.details.message) {
                refusal.details.message = message.into();
            }
        }
        Problem {
            status: 422,
            error: pillbox_wire::Problem {
                refusal,
                current: None,
                missing: None,
            },
            allow: None,
        }
    }

    /// A malformed value in the request (a digest in the URL or a body),
    /// refused by packet-core: 400 with the core's code.
    pub fn from_packet_error_400(error: packet_core::Error) -> Problem {
        Problem {
            status: 400,
            ..Problem::from_packet_error(&error)
        }
    }

    /// A malformed request (`code` is one of the table's 400s), with the
    /// advice every such refusal has.
    pub fn bad_request(code: ApiCode, message: impl Into<String>) -> Problem {
        debug_assert_eq!(code.status(), 400, "{code} is not a malformed request");
        Problem::new(
            code,
            message,
            "fix the request as the message says; the API is described in proto/openapi.yaml",
        )
    }

    /// 401: no bearer token.
    pub fn unauthorized() -> Problem {
        Problem::new(
            ApiCode::Unauthorized,
            "this request needs a bearer token (Authorization: Bearer <token>)",
            "send a token the store's operator gave you (PILLBOX_TOKENS or PILLBOX_TOKEN)",
        )
    }

    /// 403: a token that is none of the configured ones.
    pub fn forbidden() -> Problem {
        Problem::new(
            ApiCode::Forbidden,
            "the bearer token is not accepted",
            "check the token: its SHA-256 must be one in the server's PILLBOX_TOKENS secret (or it must equal PILLBOX_TOKEN)",
        )
    }

    /// 404.
    pub fn not_found(message: impl Into<String>) -> Problem {
        Problem::new(
            ApiCode::NotFound,
            message,
            "check the digest, name or path; GET /v1/packets lists what is stored",
        )
    }

    /// 405 with the methods allowed.
    pub fn method_not_allowed(allowed: &str) -> Problem {
        Problem {
            allow: Some(allowed.to_string()),
            ..Problem::new(
                ApiCode::MethodNotAllowed,
                format!("this resource allows {allowed}"),
                "use one of the allowed methods",
            )
        }
    }

    /// 500: a storage or runtime failure, described without secrets.
    pub fn internal(message: impl Into<String>) -> Problem {
        Problem::new(
            ApiCode::Internal,
            message,
            "retry; if it persists, check the Worker's logs",
        )
    }

    /// The JSON body.
    pub fn to_json(&self) -> String {
        let body = ErrorBody {
            error: self.error.clone(),
        };
        serde_json::to_string(&body)
            .unwrap_or_else(|_| String::from("{\"error\":{\"code\":\"internal\"}}"))
    }
}

/// A runtime failure (R2, D1) as a 500.
#[cfg(target_arch = "wasm32")]
pub fn internal(e: worker::Error) -> Problem {
    Problem::internal(e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use packet_core::assembled::{Assembly, BodyHasher};
    use packet_core::{Body, Digest, Error, Limits};

    #[test]
    fn a_wrong_digest_is_refused_without_the_digest_computed() {
        let stated = Body {
            sha256: Digest::of(b"what the manifest says"),
            size: 5,
        };
        let mut h = BodyHasher::new(stated);
        h.update(b"other").unwrap();
        let computed = Digest::of(b"other");
        let e = h.finish().unwrap_err();
        assert!(e.message().contains(&computed.hex().to_string()), "{e}");
        let p = Problem::from_packet_error(&e);
        let message = &p.error.refusal.details.message;
        assert!(!message.contains(&computed.hex().to_string()), "{message}");
        assert!(
            message.contains(&stated.sha256.hex().to_string()),
            "{message}"
        );
        assert_eq!(p.error.refusal.code, "member_digest_mismatch");

        let json = br#"{"not":"a manifest"}"#;
        let named = Digest::of(b"the name the request gave");
        let e = Assembly::new(json, Some(named), &Limits::FORMAT).unwrap_err();
        let p = Problem::from_packet_error(&e);
        let message = &p.error.refusal.details.message;
        assert!(
            !message.contains(&Digest::of(json).hex().to_string()),
            "{message}"
        );
        assert!(message.contains(&named.hex().to_string()), "{message}");
        assert_eq!(p.error.refusal.code, "packet_digest_mismatch");
    }

    #[test]
    fn packet_errors_keep_their_code_path_and_offset() {
        let e = Error::new(ErrorCode::MemberDigestMismatch, "the bytes hash to x")
            .at_path("workspace/a")
            .at_offset(1536);
        let p = Problem::from_packet_error(&e);
        assert_eq!(p.status, 422);
        let v: serde_json::Value = serde_json::from_str(&p.to_json()).unwrap();
        assert_eq!(v["error"]["code"], "member_digest_mismatch");
        assert_eq!(v["error"]["path"], "workspace/a");
        assert_eq!(v["error"]["offset"], 1536);
        assert_eq!(v["error"]["message"], "the bytes hash to x");
        assert_eq!(
            v["error"]["advice"],
            ErrorCode::MemberDigestMismatch.advice()
        );
        assert!(v["error"].get("current").is_none());
    }

    #[test]
    fn api_errors_have_null_path_and_offset() {
        let v: serde_json::Value =
            serde_json::from_str(&Problem::unauthorized().to_json()).unwrap();
        assert_eq!(v["error"]["code"], "unauthorized");
        assert!(v["error"]["path"].is_null());
        assert!(v["error"]["offset"].is_null());
    }

    #[test]
    fn a_ref_conflict_shows_the_current_digest_or_null() {
        let mut p = Problem::new(ApiCode::RefConflict, "m", "a");
        p.error.current = Some(None);
        let v: serde_json::Value = serde_json::from_str(&p.to_json()).unwrap();
        assert!(v["error"]["current"].is_null());
        assert!(v["error"].as_object().unwrap().contains_key("current"));
    }
}
