//! A request body's `Content-Encoding`: every route takes `identity` only
//! (the bodies of pushes carry chunks compressed one by one), and names the
//! others in its refusal. Pure.

use crate::problem::Problem;
use pillbox_wire::ApiCode;

/// How a request body is encoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Encoding {
    /// Not encoded.
    Identity,
    /// gzip.
    Gzip,
    /// zstd.
    Zstd,
}

impl Encoding {
    /// The encoding a `Content-Encoding` header names, if it is one of
    /// `allowed` (415 `encoding_unsupported` otherwise). No header is
    /// `identity`.
    pub fn parse(header: Option<&str>, allowed: &[Encoding]) -> Result<Encoding, Problem> {
        let name = header.map(|h| h.trim().to_ascii_lowercase());
        let encoding = match name.as_deref() {
            None | Some("") | Some("identity") => Some(Encoding::Identity),
            Some("gzip") | Some("x-gzip") => Some(Encoding::Gzip),
            Some("zstd") => Some(Encoding::Zstd),
            Some(_) => None,
        };
        match encoding {
            Some(e) if allowed.contains(&e) => Ok(e),
            _ => Err(Problem::new(
                ApiCode::EncodingUnsupported,
                format!(
                    "this request takes a body encoded as {}, not {:?}",
                    allowed
                        .iter()
                        .map(|e| e.name())
                        .collect::<Vec<_>>()
                        .join(", "),
                    header.unwrap_or("")
                ),
                "send the body in one of those encodings (Content-Encoding)",
            )),
        }
    }

    /// Its `Content-Encoding` name.
    pub fn name(self) -> &'static str {
        match self {
            Encoding::Identity => "identity",
            Encoding::Gzip => "gzip",
            Encoding::Zstd => "zstd",
        }
    }
}

/// Every encoding.
pub const ALL: &[Encoding] = &[Encoding::Identity, Encoding::Gzip, Encoding::Zstd];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_refusals() {
        assert_eq!(Encoding::parse(None, ALL), Ok(Encoding::Identity));
        assert_eq!(Encoding::parse(Some(" GZIP "), ALL), Ok(Encoding::Gzip));
        assert_eq!(Encoding::parse(Some("zstd"), ALL), Ok(Encoding::Zstd));
        let no_zstd = [Encoding::Identity, Encoding::Gzip];
        let e = Encoding::parse(Some("zstd"), &no_zstd).unwrap_err();
        assert_eq!((e.status, e.error.code()), (415, "encoding_unsupported"));
        assert_eq!(Encoding::parse(Some("br"), ALL).unwrap_err().status, 415);
    }
}
