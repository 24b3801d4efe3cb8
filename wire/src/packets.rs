//! Stored packets: the listing, the answer to every request that
//! stores one (`PUT /v1/packets/{digest}`, and the multipart upload's
//! create and complete when the packet is there already or now), and the
//! digests that start with a prefix (`GET /v1/digests/{prefix}`).

use alloc::string::String;
use alloc::vec::Vec;
use serde::{Deserialize, Serialize};

/// What every answer about a stored packet says of it: the fields the
/// document's `Packet` and `Stored` schemas share.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PacketFacts {
    /// `sha256:<hex>` of the whole packet.
    pub digest: String,
    /// The packet's size in bytes.
    pub size: u64,
    /// Members after `packet.json`.
    pub members: u64,
    /// The sum of the file members' sizes.
    pub file_bytes: u64,
    /// The agent harness state the packet carries, `null` for none.
    pub harness: Option<Harness>,
    /// The packet's labels, sorted.
    pub labels: Vec<String>,
}

/// [`PacketFacts::harness`] (schema `Harness`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Harness {
    /// `codex`, `claude` or `opencode`.
    pub kind: String,
    /// The harness thread (session) id.
    pub thread_id: String,
    /// The model the session used, `null` if the packet does not say.
    pub model: Option<String>,
}

/// One item of `GET /v1/packets` (schema `Packet`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Packet {
    /// Digest, size, members, harness, labels.
    #[serde(flatten)]
    pub facts: PacketFacts,
    /// When the store first stored it (RFC 3339, UTC).
    pub created: String,
}

/// `GET /v1/packets` 200: a page of packets, newest first.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PacketList {
    /// This page.
    pub packets: Vec<Packet>,
    /// The `cursor` for the next page, `null` on the last page.
    pub next_cursor: Option<String>,
}

/// The packet is stored (schema `Stored`): `PUT /v1/packets/{digest}` 201
/// or 200, `POST /v1/uploads` 200, `POST /v1/uploads/{id}/complete` 201
/// or 200.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stored {
    /// Digest, size, members, harness, labels.
    #[serde(flatten)]
    pub facts: PacketFacts,
    /// True if this request stored it (201), false if it was there (200).
    pub created: bool,
    /// When the store first stored it (RFC 3339, UTC).
    pub created_at: String,
}

/// `GET /v1/digests/{prefix}` 200 (schema `DigestMatches`): the stored
/// packets whose digest starts with a prefix, in digest order.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DigestMatches {
    /// The prefix asked for, as `sha256:<hex>`.
    pub prefix: String,
    /// `sha256:<hex>` of each match, at most `limit`.
    pub digests: Vec<String>,
    /// True when more packets match than `digests` lists.
    pub truncated: bool,
}

/// The start of a digest naming a stored packet: `sha256:` and
/// [`DigestPrefix::MIN_HEX`] to 64 lowercase hex digits. Long enough that
/// a typo rarely matches, short enough to type; the store resolves it
/// (`GET /v1/digests/{prefix}`) and a client refuses one that matches
/// several packets. It names a packet, it proves nothing: a check of
/// bytes (`--digest`, `If-Match`) takes a whole digest.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct DigestPrefix(String);

impl DigestPrefix {
    /// The fewest hex digits a prefix has (32 bits).
    pub const MIN_HEX: usize = 8;

    /// Reads `sha256:<hex>`, 8 to 64 lowercase hex digits; the error says
    /// what a prefix is.
    pub fn parse(text: &str) -> Result<DigestPrefix, String> {
        let hex = text.strip_prefix("sha256:").unwrap_or("");
        let valid = (Self::MIN_HEX..=64).contains(&hex.len())
            && hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
        if valid {
            Ok(DigestPrefix(String::from(text)))
        } else {
            Err(alloc::format!(
                "{text:?} is not a digest prefix: write sha256: and {} to 64 lowercase hex digits",
                Self::MIN_HEX
            ))
        }
    }

    /// `sha256:<hex>`.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Its hex digits.
    pub fn hex(&self) -> &str {
        &self.0["sha256:".len()..]
    }

    /// True if `digest` (`sha256:<hex>`) starts with it.
    pub fn matches(&self, digest: &str) -> bool {
        digest.starts_with(self.0.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_prefix_is_8_to_64_lowercase_hex_digits_after_sha256() {
        let p = DigestPrefix::parse("sha256:0123abcd").unwrap();
        assert_eq!((p.as_str(), p.hex()), ("sha256:0123abcd", "0123abcd"));
        assert!(p.matches(&alloc::format!("sha256:0123abcd{}", "0".repeat(56))));
        assert!(!p.matches(&alloc::format!("sha256:0123abce{}", "0".repeat(56))));
        let full = alloc::format!("sha256:{}", "f".repeat(64));
        assert!(DigestPrefix::parse(&full).is_ok());
        for bad in [
            "sha256:0123abc",
            "0123abcd",
            "sha256:0123ABCD",
            "sha256:0123abcg",
            "sha256:",
            &alloc::format!("sha256:{}", "f".repeat(65)),
        ] {
            let e = DigestPrefix::parse(bad).unwrap_err();
            assert!(e.contains("8 to 64 lowercase hex"), "{bad}: {e}");
        }
    }
}
