//! Refusals: every answer that is not a success carries `{"error": Problem}`.

use alloc::string::String;
use alloc::vec::Vec;
use packet_core::Refusal;
use serde::{Deserialize, Deserializer, Serialize};

use crate::codes::ApiCode;

/// The body of every refusal (schema `ErrorBody`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorBody {
    /// What was refused and why.
    pub error: Problem,
}

/// [`ErrorBody::error`] (schema `Problem`): packet-core's [`Refusal`]
/// shape, `{code, path, offset, message, advice}`, defined once there, plus
/// `current` on a ref conflict, `missing` on an incomplete push. A packet refused by the store's packet-core
/// (422) carries packet-core's code, path, offset, message and advice
/// unchanged.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Problem {
    /// Code, path, offset, message and advice.
    #[serde(flatten)]
    pub refusal: Refusal<'static>,
    /// Only on `ref_conflict`: the digest the ref holds, `Some(None)`
    /// (`null`) if it does not exist; left out of every other refusal.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "present"
    )]
    pub current: Option<Option<String>>,
    /// Only on `push_incomplete`: the bodies and chunks (hex SHA-256s)
    /// the push still lacks; left out of every other refusal.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub missing: Option<Vec<String>>,
}

impl Problem {
    /// The stable code.
    pub fn code(&self) -> &str {
        &self.refusal.code
    }

    /// The code, if it is one of the API's own (else it is packet-core's,
    /// or one this CLI does not know yet).
    pub fn api_code(&self) -> Option<ApiCode> {
        ApiCode::from_str_code(self.code())
    }

    /// What was found.
    pub fn message(&self) -> &str {
        &self.refusal.details.message
    }

    /// What a person can do about it.
    pub fn advice(&self) -> &str {
        &self.refusal.details.advice
    }
}

/// Reads a field that is there (`Some`), possibly `null` (`Some(None)`);
/// `#[serde(default)]` makes an absent one `None`. Serde alone reads
/// `null` as `None`, which would lose "the ref does not exist".
fn present<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Option<String>>, D::Error> {
    Option::<String>::deserialize(d).map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn problem(current: Option<Option<String>>) -> Problem {
        Problem {
            refusal: Refusal {
                code: "ref_conflict".into(),
                details: packet_core::RefusalDetails {
                    path: None,
                    offset: None,
                    message: "m".into(),
                    advice: "a".into(),
                },
            },
            current,
            missing: None,
        }
    }

    #[test]
    fn current_is_absent_null_or_a_digest_both_ways() {
        for current in [None, Some(None), Some(Some("sha256:00".into()))] {
            let p = problem(current);
            let text = serde_json::to_string(&p).unwrap();
            assert_eq!(text.contains("\"current\""), p.current.is_some(), "{text}");
            assert_eq!(serde_json::from_str::<Problem>(&text).unwrap(), p);
        }
    }
}
