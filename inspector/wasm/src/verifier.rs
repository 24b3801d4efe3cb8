//! Streaming verification: the page pushes a packet's chunks, of any size,
//! and gets progress back; [`Verifier::finish_packet`] yields a verified
//! [`Packet`] or throws the typed refusal. packet-core's reader keeps the
//! manifest and one offset per member, whatever the packet's size.

use packet_core::{
    Digest, Error, Event, HashedElsewhere, Hasher, Manifest, Reader, ReaderOptions, VerifiedPacket,
};
use serde::Serialize;
use wasm_bindgen::prelude::*;

use crate::member::MemberCheck;
use crate::view::{refusal, to_js, Failure, MemberView, ReportView};

/// Progress after a chunk.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Progress {
    /// Bytes consumed so far.
    pub offset: u64,
    /// Whether `packet.json` has been read and checked.
    pub manifest: bool,
    /// Members in the manifest, once known.
    pub members_total: Option<usize>,
    /// Members whose header (and body, for files) matched the manifest.
    pub members_verified: usize,
    /// The member being read, if any.
    pub current: Option<String>,
}

/// The streaming verifier (JavaScript class `Verifier`).
#[wasm_bindgen]
pub struct Verifier {
    reader: Reader<HashedElsewhere>,
    /// The whole-packet hash when this verifier computes it; `None` when
    /// the page hashes the same bytes on another thread.
    packet_hash: Option<Hasher>,
    verified: usize,
    current: Option<usize>,
}

impl Verifier {
    /// A verifier that hashes the whole packet itself; with `expected`,
    /// [`Verifier::finish_packet`] also checks the packet's digest.
    pub fn with_digest(expected: Option<Digest>) -> Verifier {
        Verifier::reading(expected, Some(Hasher::new()))
    }

    /// A verifier that leaves the whole-packet digest to the caller (who
    /// hashes the same bytes elsewhere, e.g. on another thread, and hands
    /// the result to [`Verifier::finish_with_digest`]).
    pub fn with_external_digest(expected: Option<Digest>) -> Verifier {
        Verifier::reading(expected, None)
    }

    fn reading(expected: Option<Digest>, packet_hash: Option<Hasher>) -> Verifier {
        Verifier {
            reader: Reader::hashed_elsewhere(ReaderOptions {
                expected_digest: expected,
                ..Default::default()
            }),
            packet_hash,
            verified: 0,
            current: None,
        }
    }

    /// Feeds one chunk through the reader.
    pub fn push_bytes(&mut self, chunk: &[u8]) -> Result<Progress, Error> {
        let (verified, current) = (&mut self.verified, &mut self.current);
        self.reader.feed_with(chunk, |event| {
            match event {
                Event::MemberStart { index, .. } => *current = Some(index),
                Event::MemberEnd { .. } => {
                    *verified += 1;
                    *current = None;
                }
                Event::Manifest(_) | Event::Data(_) => {}
            }
            Ok::<(), Error>(())
        })?;
        // A /2 packet is named by its manifest: the whole file is hashed
        // only for a /1 packet.
        if self.reader.whole_hash_needed() != Some(false) {
            if let Some(h) = &mut self.packet_hash {
                h.update(chunk);
            }
        }
        Ok(self.progress())
    }

    /// Where the reader is.
    pub fn progress(&self) -> Progress {
        let manifest = self.reader.manifest();
        Progress {
            offset: self.reader.offset(),
            manifest: manifest.is_some(),
            members_total: manifest.map(|m| m.members.len()),
            members_verified: self.verified,
            current: self
                .current
                .and_then(|i| manifest.and_then(|m| m.members.get(i)))
                .map(|e| e.path.to_string()),
        }
    }

    /// Ends the input of a verifier that hashes the packet itself: the
    /// packet is verified, or the refusal is returned.
    pub fn finish_packet(self) -> Result<Packet, Failure> {
        let Some(hash) = self.packet_hash else {
            return Err(Failure::bug(
                "this verifier was made withExternalDigest: end it with finishWithDigest",
            ));
        };
        Ok(Packet::from(
            self.reader.finish_with_digest(Some(hash.finish()))?,
        ))
    }

    /// Ends the input of a verifier made by
    /// [`Verifier::with_external_digest`]: `digest` is the whole packet's,
    /// computed by the caller over exactly the bytes pushed; only a /1
    /// packet needs it ([`Verifier::whole_hash_needed`]).
    pub fn finish_with_digest(self, digest: Option<Digest>) -> Result<Packet, Failure> {
        if self.packet_hash.is_some() {
            return Err(Failure::bug(
                "this verifier hashes the packet itself: end it with finish",
            ));
        }
        Ok(Packet::from(self.reader.finish_with_digest(digest)?))
    }

    /// Whether the whole packet must be hashed: unknown (`None`) until
    /// packet.json is read; then only for a /1 packet, which its whole file
    /// names (a /2 packet is named by its manifest).
    pub fn whole_hash_needed(&self) -> Option<bool> {
        self.reader.whole_hash_needed()
    }
}

#[wasm_bindgen]
impl Verifier {
    /// `new Verifier(expectedDigest)`: `expectedDigest` is `null` or
    /// `"sha256:<hex>"`; a malformed digest throws a `digest_syntax` refusal.
    #[wasm_bindgen(constructor)]
    pub fn new(expected_digest: Option<String>) -> Result<Verifier, JsValue> {
        Ok(Verifier::with_digest(parse_expected(expected_digest)?))
    }

    /// `Verifier.withExternalDigest(expectedDigest)`: a verifier that does
    /// not hash the whole packet; the caller hashes the same bytes with a
    /// `PacketHasher` (on another thread) and ends with `finishWithDigest`.
    #[wasm_bindgen(js_name = withExternalDigest)]
    pub fn with_external_digest_js(expected_digest: Option<String>) -> Result<Verifier, JsValue> {
        Ok(Verifier::with_external_digest(parse_expected(
            expected_digest,
        )?))
    }

    /// Ends the input of a `withExternalDigest` verifier with the whole
    /// packet's digest (`"sha256:<hex>"`), or `null` when
    /// `wholeHashNeeded` said none is needed (a /2 packet); throws
    /// `packet_digest_mismatch` when the packet's digest differs from the
    /// expected one, or any other refusal.
    #[wasm_bindgen(js_name = finishWithDigest)]
    pub fn finish_with_digest_js(self, digest: Option<String>) -> Result<Packet, JsValue> {
        let digest = digest
            .map(|d| d.parse::<Digest>().map_err(|e| refusal(&e)))
            .transpose()?;
        self.finish_with_digest(digest).map_err(|f| f.to_js())
    }

    /// `null` until packet.json is read; then whether the caller of a
    /// `withExternalDigest` verifier must go on hashing the whole packet
    /// (`true` only for a /1 packet).
    #[wasm_bindgen(getter, js_name = wholeHashNeeded)]
    pub fn whole_hash_needed_js(&self) -> Option<bool> {
        self.whole_hash_needed()
    }

    /// Feeds a chunk; returns `{offset, manifest, membersTotal,
    /// membersVerified, current}` or throws the refusal.
    pub fn push(&mut self, chunk: &[u8]) -> Result<JsValue, JsValue> {
        self.push_bytes(chunk)
            .map(|p| to_js(&p))
            .map_err(|e| refusal(&e))
    }

    /// The current progress, without feeding anything.
    #[wasm_bindgen(js_name = progress)]
    pub fn progress_js(&self) -> JsValue {
        to_js(&self.progress())
    }

    /// Ends the input; returns the verified `Packet` or throws the refusal
    /// (`truncated`, `packet_digest_mismatch`, …). Consumes the verifier.
    pub fn finish(self) -> Result<Packet, JsValue> {
        self.finish_packet().map_err(|f| f.to_js())
    }
}

/// `isDigest(text)`: whether `text` is a whole packet digest
/// (`sha256:<64 lowercase hex>`), the form `new Verifier` takes; the page
/// reads anything else it is given as a ref name.
#[wasm_bindgen(js_name = isDigest)]
pub fn is_digest(text: &str) -> bool {
    text.parse::<Digest>().is_ok()
}

fn parse_expected(expected_digest: Option<String>) -> Result<Option<Digest>, JsValue> {
    expected_digest
        .map(|s| s.parse::<Digest>().map_err(|e| refusal(&e)))
        .transpose()
}

/// A verified packet: its manifest, digest and member offsets (JavaScript
/// class `Packet`). It holds no member bodies.
#[wasm_bindgen]
pub struct Packet {
    pub(crate) verified: VerifiedPacket,
}

impl From<VerifiedPacket> for Packet {
    fn from(verified: VerifiedPacket) -> Packet {
        Packet { verified }
    }
}

impl Packet {
    /// The manifest.
    pub fn manifest(&self) -> &Manifest {
        &self.verified.manifest
    }

    /// The report the page draws.
    pub fn report_view(&self) -> ReportView {
        ReportView::new(&self.verified)
    }

    /// The view of member `index`.
    pub fn member_view(&self, index: usize) -> Option<MemberView> {
        let member = self.verified.manifest.members.get(index)?;
        Some(MemberView::new(
            index,
            member,
            self.verified.data_offsets[index],
        ))
    }
}

#[wasm_bindgen]
impl Packet {
    /// `{format, digest, size, harness, exclusions, totals, members}`.
    pub fn report(&self) -> JsValue {
        to_js(&self.report_view())
    }

    /// The canonical `packet.json` text.
    #[wasm_bindgen(js_name = manifestJson)]
    pub fn manifest_json(&self) -> String {
        String::from_utf8(self.verified.manifest.to_canonical_json()).unwrap_or_default()
    }

    /// The index of the member at `path`, or `undefined`.
    #[wasm_bindgen(js_name = indexOf)]
    pub fn index_of(&self, path: &str) -> Option<usize> {
        self.verified.manifest.find(path).map(|(i, _)| i)
    }

    /// The member at `index` as `{index, path, type, mode, size, sha256,
    /// target, dataOffset}`, or `null`.
    pub fn member(&self, index: usize) -> JsValue {
        self.member_view(index).map_or(JsValue::NULL, |m| to_js(&m))
    }

    /// A check for the body of file member `index` read back from the
    /// packet (`file.slice(dataOffset, dataOffset + size)` or a range read).
    #[wasm_bindgen(js_name = checkMember)]
    pub fn check_member(&self, index: usize) -> Result<MemberCheck, JsValue> {
        MemberCheck::for_member(&self.verified.manifest, index).map_err(|f| f.to_js())
    }
}

/// SHA-256 over a whole packet, for the digest thread of a
/// `withExternalDigest` verifier (JavaScript class `PacketHasher`).
#[wasm_bindgen]
#[derive(Default)]
pub struct PacketHasher(Hasher);

#[wasm_bindgen]
impl PacketHasher {
    /// A hasher over no bytes yet.
    #[wasm_bindgen(constructor)]
    pub fn new() -> PacketHasher {
        PacketHasher(Hasher::new())
    }

    /// Hashes the next bytes.
    pub fn update(&mut self, chunk: &[u8]) {
        self.0.update(chunk);
    }

    /// The digest, `"sha256:<hex>"`.
    pub fn finish(self) -> String {
        self.0.finish().to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_digest_is_told_from_a_ref_name() {
        let digest = Digest::of(b"packet").to_string();
        assert!(is_digest(&digest));
        assert!(!is_digest(&digest.to_uppercase()));
        assert!(!is_digest(&digest[..20]));
        assert!(!is_digest(&digest[7..]));
        assert!(!is_digest("team/main"));
    }
}
