//! A pushed packet's `packet.json` (docs/transfer.md, "Delta push", step
//! 1), pure: assembled from its recipe's chunks, each sent as a frame or a
//! base's chunk of that name and size, then checked by packet-core: it must
//! hash to the digest the push names and pass every rule. A refusal names
//! packet-core's code but never the digest the store computed (the pusher
//! names the packet; the store only says it is not that one). A /1 packet
//! is named by its whole file: it is taken only whole.

use pillbox_wire::ApiCode;
use std::collections::HashMap;

use packet_core::assembled::Assembly;
use packet_core::{Digest, Error, ErrorCode, Format, Limits, Manifest};
use pillbox_wire::recipes::ChunkName;

use super::at_hand::AtHand;
use crate::problem::Problem;
use crate::storage::chunk::Name;

/// The chunks of the manifest's recipe neither sent nor a base's manifest
/// chunk, each once.
pub fn missing(
    recipe: &[ChunkName],
    sent: impl Fn(&Name) -> bool,
    at_hand: &AtHand,
) -> Vec<Digest> {
    let mut seen = std::collections::HashSet::new();
    recipe
        .iter()
        .map(|c| (c.sha256, u64::from(c.size)))
        .filter(|n| !sent(n) && at_hand.manifest_bytes(n).is_none())
        .filter(|n| seen.insert(n.0))
        .map(|n| n.0)
        .collect()
}

/// `packet.json` from its chunks: those sent (raw bytes by name), else a
/// base's manifest chunks. `None` if one is neither.
pub fn assemble(
    recipe: &[ChunkName],
    sent: &HashMap<Name, Vec<u8>>,
    at_hand: &AtHand,
) -> Option<Vec<u8>> {
    let total: u64 = recipe.iter().map(|c| u64::from(c.size)).sum();
    let mut json = Vec::with_capacity(total as usize);
    for c in recipe {
        let name = (c.sha256, u64::from(c.size));
        let bytes = sent
            .get(&name)
            .map(Vec::as_slice)
            .or_else(|| at_hand.manifest_bytes(&name))?;
        json.extend_from_slice(bytes);
    }
    Some(json)
}

/// 422 `whole_upload_required`.
fn whole_only() -> Problem {
    Problem::new(
        ApiCode::WholeUploadRequired,
        "a pillbox.session-packet/1 packet is named by the hash of its whole file: the store takes it only whole",
        "upload it whole: PUT /v1/packets/{digest}, or POST /v1/uploads for a large one",
    )
}

/// Checks `json` as the `packet.json` of the packet `digest` names.
pub fn check(json: &[u8], digest: Digest, limits: &Limits) -> Result<Assembly, Problem> {
    let assembly = match Assembly::new(json, None, limits) {
        Ok(a) => a,
        Err(e) => {
            if e.code() == ErrorCode::ManifestInvalid
                && Manifest::parse(json, limits).is_ok_and(|m| m.format == Format::V1)
            {
                return Err(whole_only());
            }
            return Err(Problem::from_packet_error(&e));
        }
    };
    if assembly.digest() != digest {
        return Err(Problem::from_packet_error(
            &Error::new(
                ErrorCode::PacketDigestMismatch,
                format!("packet.json as assembled from this push does not hash to {digest}"),
            )
            .at_path(packet_core::path::MANIFEST_PATH)
            .at_offset(512),
        ));
    }
    Ok(assembly)
}
