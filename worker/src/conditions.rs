//! ETags and conditional requests: packets and members are tagged with
//! their digest, refs with the digest they hold, and `If-Match` /
//! `If-None-Match` carry those digests back. Pure, so it is tested
//! natively.

use packet_core::Digest;
use pillbox_wire::ApiCode;

use crate::problem::Problem;

/// The ETag of a resource named by `digest`: the digest, quoted.
pub fn etag(digest: &str) -> String {
    format!("\"{digest}\"")
}

/// The digest in an `If-Match` / `If-None-Match` value (quotes and a weak
/// `W/` prefix optional); a malformed one is packet-core's 400.
pub fn condition_digest(value: &str) -> Result<Digest, Problem> {
    let v = value.trim();
    let v = v.strip_prefix("W/").unwrap_or(v);
    let v = v.trim_matches('"');
    v.parse::<Digest>().map_err(Problem::from_packet_error_400)
}

/// Whether an `If-None-Match` value names `tag` (or is `*`): the client
/// has these bytes already, so the answer is 304.
pub fn none_match(if_none_match: &str, tag: &str) -> bool {
    if_none_match
        .split(',')
        .any(|t| t.trim() == tag || t.trim() == "*")
}

/// What a `PUT /v1/refs/{name}` may do, by its conditions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RefWrite {
    /// No `If-Match` (or `If-None-Match: *`): create the ref, which must
    /// not exist.
    Create,
    /// `If-Match`: move the ref, only if it holds `expected` now.
    Move {
        /// The digest the ref must hold.
        expected: Digest,
    },
}

/// Reads the `If-Match` and `If-None-Match` headers of a ref write.
pub fn ref_write(if_match: Option<&str>, if_none_match: Option<&str>) -> Result<RefWrite, Problem> {
    match (if_match, if_none_match) {
        (Some(_), Some(_)) => Err(Problem::bad_request(
            ApiCode::PreconditionInvalid,
            "send If-Match or If-None-Match, not both",
        )),
        (Some(expected), None) => Ok(RefWrite::Move {
            expected: condition_digest(expected)?,
        }),
        (None, Some(v)) if v.trim() != "*" => Err(Problem::bad_request(
            ApiCode::PreconditionInvalid,
            "If-None-Match on a ref must be *",
        )),
        (None, _) => Ok(RefWrite::Create),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn digest() -> Digest {
        Digest::of(b"packet")
    }

    #[test]
    fn conditions_take_the_digest_quoted_or_not() {
        let d = digest();
        for value in [
            d.to_string(),
            etag(&d.to_string()),
            format!(" W/{} ", etag(&d.to_string())),
        ] {
            assert_eq!(condition_digest(&value), Ok(d), "{value}");
        }
        let e = condition_digest("garbage").unwrap_err();
        assert_eq!((e.status, e.error.code()), (400, "digest_syntax"));
    }

    #[test]
    fn if_none_match_names_the_tag_or_anything() {
        let tag = etag(&digest().to_string());
        assert!(none_match(&tag, &tag));
        assert!(none_match(&format!("\"x\", {tag}"), &tag));
        assert!(none_match("*", &tag));
        assert!(!none_match("\"x\"", &tag));
        // Weak tags do not match: the bytes must be the same.
        assert!(!none_match(&format!("W/{tag}"), &tag));
    }

    #[test]
    fn a_ref_write_creates_or_moves() {
        let d = digest();
        let quoted = etag(&d.to_string());
        assert_eq!(ref_write(None, None), Ok(RefWrite::Create));
        assert_eq!(ref_write(None, Some(" * ")), Ok(RefWrite::Create));
        assert_eq!(
            ref_write(Some(&quoted), None),
            Ok(RefWrite::Move { expected: d })
        );
        let code = |r: Result<RefWrite, Problem>| r.unwrap_err().error.code().to_owned();
        assert_eq!(
            code(ref_write(Some(&quoted), Some("*"))),
            "precondition_invalid"
        );
        assert_eq!(code(ref_write(None, Some(&quoted))), "precondition_invalid");
        assert_eq!(code(ref_write(Some("garbage"), None)), "digest_syntax");
    }
}
