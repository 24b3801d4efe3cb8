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
use packet_core::{Body, Digest, Error, ErrorCode, Format, Limits, Manifest};
use pillbox_wire::chunks::Frame;
use pillbox_wire::recipes::{ChunkName, Recipes};

use super::at_hand::AtHand;
use super::complete::classes_of;
use super::plan::Plan;
use super::recipes::RecipeBook;
use super::wanted::check_wanted;
use crate::problem::Problem;
use crate::storage::chunk::Name;

/// The manifest's recipe a create body names: at least one chunk (422
/// `recipes_size`), at most `limits`' manifest size in all (413
/// `limit_manifest`).
pub fn check_recipe(recipe: &[ChunkName], limits: &Limits) -> Result<(), Problem> {
    let total: u64 = recipe.iter().map(|c| u64::from(c.size)).sum();
    if recipe.is_empty() {
        return Err(Problem::new(
            ApiCode::RecipesSize,
            "the push names no chunk of packet.json",
            "send the manifest's recipe: its chunks in order",
        ));
    }
    if total > limits.max_manifest_bytes {
        return Err(Problem::over_limit(
            ErrorCode::LimitManifest,
            format!(
                "packet.json is {total} bytes, at most {} are accepted",
                limits.max_manifest_bytes
            ),
            ErrorCode::LimitManifest.advice(),
        ));
    }
    Ok(())
}

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

/// 409 `manifest_incomplete`, naming the chunks of packet.json
/// ([`missing`]) neither sent nor in a base the store uses.
pub fn incomplete(missing: &[Digest]) -> Problem {
    let mut p = Problem::new(
        ApiCode::ManifestIncomplete,
        format!("{} chunks of packet.json are neither in this body nor in a base the store uses", missing.len()),
        "send them (or every chunk of packet.json): the bases named may be unknown to the store or not readable by this token",
    );
    p.error.missing = Some(missing.iter().map(|d| d.hex().to_string()).collect());
    p
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

/// A create body (docs/transfer.md, "Push", step 1): its recipes and its
/// table, the packet it names.
pub struct CreateBody<'a> {
    /// The recipes it carries: packet.json's, then the bodies'.
    pub recipes: &'a Recipes,
    /// Its frames' table.
    pub frames: &'a [Frame],
    /// Which frames are chunks of packet.json
    /// ([`super::wanted::manifest_frames`]).
    pub is_manifest: &'a [bool],
    /// The packet's digest, as named.
    pub digest: Digest,
    /// Its size, as the client states it.
    pub size: u64,
}

/// A create body's `packet.json`, checked, and what follows from it.
pub struct Checked {
    /// `packet.json`'s bytes.
    pub json: Vec<u8>,
    /// Those bytes checked and parsed.
    pub assembly: Assembly,
    /// The body recipes, checked against its bodies and the bases.
    pub book: RecipeBook,
    /// Each body's scan classes, with the path of one member of each.
    pub classes: HashMap<Body, Vec<(u8, String)>>,
}

impl CreateBody<'_> {
    /// Once packet.json's frames are in (their raw bytes `sent`, by name):
    /// packet.json is assembled (with the bases' chunks) and [`check`]ed;
    /// `size` must be the size it implies (400 `size_mismatch`); the body
    /// recipes are checked against its bodies (422 `recipe_invalid`,
    /// `recipe_not_needed`, …); and every other frame must be a chunk the
    /// push needs, of its size (422 `chunk_not_needed`,
    /// `chunk_size_mismatch`), all before a body frame's bytes are read.
    pub fn check(
        &self,
        sent: &HashMap<Name, Vec<u8>>,
        at_hand: &AtHand,
        limits: &Limits,
    ) -> Result<Checked, Problem> {
        let json = assemble(&self.recipes.manifest, sent, at_hand)
            .ok_or_else(|| Problem::internal("a manifest chunk went missing"))?;
        let assembly = check(&json, self.digest, limits)?;
        let expected = assembly.offsets().size();
        if expected != self.size {
            return Err(Problem::bad_request(
                ApiCode::SizeMismatch,
                format!(
                    "this manifest makes a packet of {expected} bytes, size= says {}",
                    self.size
                ),
            ));
        }
        let bodies = assembly.unproven();
        let mut book = RecipeBook::new();
        book.add(&self.recipes.bodies, &bodies, at_hand)?;
        let wanted = Plan::new(&bodies, at_hand, &book).wanted(at_hand, &book);
        check_wanted(self.frames, self.is_manifest, &wanted)?;
        let classes = classes_of(assembly.manifest());
        Ok(Checked {
            json,
            assembly,
            book,
            classes,
        })
    }
}
