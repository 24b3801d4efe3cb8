//! Every R2 key the Worker writes, built here and nowhere else
//! (docs/transfer.md, "Storage at the edge"). Ids are 32 random lowercase
//! hex digits from D1 and never reused, so two requests never write one key.

use packet_core::Digest;

/// A pack: chunks back to back, as stored.
pub fn pack(id: &str) -> String {
    format!("packs/{id}")
}

/// A packet stored whole (a single upload), or the object a multipart
/// upload assembles, kept as the packet's once verified.
pub fn upload(id: &str) -> String {
    format!("uploads/{id}")
}

/// A packet stored whole before the store kept packs (migration 0002).
pub fn old_packet(digest: &Digest) -> String {
    format!("packets/sha256/{}", digest.hex())
}

/// An open push's `packet.json` (kept while the push waits for parts).
pub fn push_manifest(id: &str) -> String {
    format!("pushes/{id}/manifest")
}

/// An open push's recipes.
pub fn push_recipes(id: &str) -> String {
    format!("pushes/{id}/recipes")
}

/// What part `number` of an open push brought, from one attempt.
pub fn push_record(id: &str, number: u16, attempt: &str) -> String {
    format!("pushes/{id}/parts/{number}.{attempt}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_have_their_documented_shape() {
        assert_eq!(pack("ab"), "packs/ab");
        assert_eq!(upload("ab"), "uploads/ab");
        assert_eq!(
            old_packet(&Digest::EMPTY),
            format!("packets/sha256/{}", Digest::EMPTY.hex())
        );
        assert_eq!(push_record("p", 3, "a"), "pushes/p/parts/3.a");
        assert_eq!(push_manifest("p"), "pushes/p/manifest");
        assert_eq!(push_recipes("p"), "pushes/p/recipes");
    }
}
