//! Bearer-token checks. The token is compared in constant time (both sides
//! are hashed to 32 bytes first, so neither length nor content leaks through
//! timing) and is never logged or echoed.

use packet_core::Digest;

use crate::problem::Problem;

pub use pillbox_wire::ReadAccess;

/// Reads the `READ_ACCESS` setting: `token`, else `public` (the default,
/// also for a value it does not know).
pub fn read_access(value: Option<&str>) -> ReadAccess {
    match value.map(str::trim) {
        Some("token") => ReadAccess::Token,
        _ => ReadAccess::Public,
    }
}

/// Checks the `Authorization` header against the configured token.
/// `configured` is `None` when the secret is not set: every authenticated
/// request is then refused (the server fails closed).
pub fn check(authorization: Option<&str>, configured: Option<&str>) -> Result<(), Problem> {
    let Some(header) = authorization else {
        return Err(Problem::unauthorized());
    };
    let Some(presented) = bearer(header) else {
        return Err(Problem::unauthorized());
    };
    let Some(configured) = configured.filter(|t| !t.is_empty()) else {
        return Err(Problem::new(
            403,
            "token_not_configured",
            "the server has no PILLBOX_TOKEN secret, so it accepts no writes",
            "set the secret: `wrangler secret put PILLBOX_TOKEN` (or PILLBOX_TOKEN=... in .dev.vars locally)",
        ));
    };
    if constant_time_eq(presented.as_bytes(), configured.as_bytes()) {
        Ok(())
    } else {
        Err(Problem::forbidden())
    }
}

/// The token in `Bearer <token>` (scheme case-insensitive).
fn bearer(header: &str) -> Option<&str> {
    let (scheme, token) = header.trim().split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

/// Equality whose running time depends on neither input's length or bytes.
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    let (x, y) = (Digest::of(a).0, Digest::of(b).0);
    x.iter()
        .zip(y.iter())
        .fold(0u8, |acc, (p, q)| acc | (p ^ q))
        == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_or_malformed_header_is_401() {
        assert_eq!(check(None, Some("s3cret")).unwrap_err().status, 401);
        assert_eq!(
            check(Some("Basic abc"), Some("s3cret")).unwrap_err().status,
            401
        );
        assert_eq!(
            check(Some("Bearer "), Some("s3cret")).unwrap_err().status,
            401
        );
    }

    #[test]
    fn wrong_token_is_403_and_right_token_passes() {
        assert_eq!(
            check(Some("Bearer nope"), Some("s3cret"))
                .unwrap_err()
                .status,
            403
        );
        assert_eq!(
            check(Some("Bearer s3cre"), Some("s3cret"))
                .unwrap_err()
                .status,
            403
        );
        assert!(check(Some("Bearer s3cret"), Some("s3cret")).is_ok());
        assert!(check(Some("bearer  s3cret "), Some("s3cret")).is_ok());
    }

    #[test]
    fn no_configured_token_refuses_everything() {
        let e = check(Some("Bearer x"), None).unwrap_err();
        assert_eq!((e.status, e.error.code()), (403, "token_not_configured"));
        assert!(check(Some("Bearer x"), Some("")).is_err());
    }

    #[test]
    fn refusals_never_echo_the_token() {
        let e = check(Some("Bearer my-token-value"), Some("other")).unwrap_err();
        assert!(!e.to_json().contains("my-token-value"));
    }

    #[test]
    fn read_access_defaults_to_public() {
        assert_eq!(read_access(None), ReadAccess::Public);
        assert_eq!(read_access(Some("token")), ReadAccess::Token);
        assert_eq!(read_access(Some("public")), ReadAccess::Public);
    }
}
