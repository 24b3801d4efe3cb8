//! A packet named by the start of its digest (`sha256:` and 8 hex digits
//! or more, as summaries print them shortened): the store lists the
//! stored digests that start with it (`GET /v1/digests/{prefix}`, the
//! `read` scope), and the prefix stands for the packet only if it names
//! exactly one. It names a packet and proves nothing: what is then read
//! is verified against the whole digest it resolved to, and checks of
//! bytes (`--digest`, `--expect-ref`) take whole digests.

use packet_core::Digest;
use pillbox_wire::{DigestMatches, DigestPrefix};

use super::client::{bad_answer, read_answer, status_error, Remote};
use crate::error::{Refused, Result};

/// How many matches a refusal of an ambiguous prefix lists.
pub const CANDIDATES: u32 = 10;

/// The one stored packet whose digest starts with `prefix`; refused with
/// `digest_unknown` when none does, `digest_ambiguous` (its candidates
/// listed) when several do.
pub fn resolve(remote: &Remote, prefix: &DigestPrefix) -> Result<Digest> {
    let path = format!("/v1/digests/{}?limit={CANDIDATES}", prefix.as_str());
    let what = format!("GET {path}");
    let mut r = remote.get(&what, &path)?;
    if r.status().as_u16() != 200 {
        return Err(status_error(&what, r));
    }
    let found: DigestMatches = read_answer(&what, &mut r)?;
    let digests = found
        .digests
        .iter()
        .map(|d| match d.parse::<Digest>() {
            Ok(parsed) if prefix.matches(d) => Ok(parsed),
            _ => Err(bad_answer(
                &what,
                &format!("{d:?} is not a digest that starts with {}", prefix.as_str()),
            )),
        })
        .collect::<Result<Vec<Digest>>>()?;
    match digests.as_slice() {
        [] => Err(Refused::DigestUnknown {
            prefix: prefix.as_str().to_owned(),
        }
        .into()),
        [one] if !found.truncated => Ok(*one),
        _ => Err(Refused::DigestAmbiguous {
            prefix: prefix.as_str().to_owned(),
            candidates: digests.iter().map(Digest::to_string).collect(),
            more: found.truncated,
        }
        .into()),
    }
}

/// A digest given where a stored packet is meant (`--base`): a whole one
/// as it is, a prefix resolved by the store.
pub fn stored(remote: &Remote, text: &str, flag: &str) -> Result<Digest> {
    match super::PullTarget::parse(text) {
        Ok(super::PullTarget::Digest(d)) => Ok(d),
        Ok(super::PullTarget::Prefix(p)) => resolve(remote, &p),
        _ => Err(crate::error::CliError::Usage(format!(
            "{flag} {text:?}: write a digest (sha256: and 64 hex digits) or its first {} or more",
            DigestPrefix::MIN_HEX
        ))),
    }
}
