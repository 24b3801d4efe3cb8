//! Streaming verification: the page pushes a packet's chunks, of any size,
//! and gets progress back; [`Verifier::finish`] yields a verified [`Packet`]
//! or throws the typed refusal. Only the manifest and one offset per member
//! are kept, whatever the packet's size.

use packet_core::{Digest, Error, Event, Hasher, Manifest, Reader, ReaderOptions, Verified};
use serde::Serialize;
use wasm_bindgen::prelude::*;

use crate::member::MemberCheck;
use crate::view::{refusal, to_js, MemberView, ReportView};

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
    expected: Option<Digest>,
    reader: Reader,
    data_offsets: Vec<u64>,
    verified: usize,
    current: Option<usize>,
}

impl Verifier {
    /// A verifier; with `expected`, [`Verifier::finish_packet`] also checks
    /// the whole packet's digest.
    pub fn with_digest(expected: Option<Digest>) -> Verifier {
        Verifier::with_options(ReaderOptions {
            expected_digest: expected,
            ..Default::default()
        })
    }

    /// A verifier that leaves the whole-packet digest to the caller (who
    /// hashes the same bytes elsewhere, e.g. on another thread, and hands
    /// the result to [`Verifier::finish_with_digest`]).
    pub fn with_external_digest(expected: Option<Digest>) -> Verifier {
        Verifier::with_options(ReaderOptions {
            expected_digest: expected,
            skip_packet_digest: true,
            ..Default::default()
        })
    }

    fn with_options(options: ReaderOptions) -> Verifier {
        Verifier {
            expected: options.expected_digest,
            reader: Reader::new(options),
            data_offsets: Vec::new(),
            verified: 0,
            current: None,
        }
    }

    /// Ends the input of a verifier made by
    /// [`Verifier::with_external_digest`]: `digest` is the whole packet's,
    /// computed by the caller over exactly the bytes pushed.
    pub fn finish_with_digest(self, digest: Digest) -> Result<Packet, Error> {
        // As packet-core does: the structure first, then the digest.
        let expected = self.expected;
        let mut packet = self.finish_packet()?;
        if let Some(expected) = expected {
            if expected != digest {
                return Err(Error::new(
                    packet_core::ErrorCode::PacketDigestMismatch,
                    format!("expected {expected}, the packet is {digest}"),
                ));
            }
        }
        packet.verified.digest = Some(digest);
        Ok(packet)
    }

    /// Feeds one chunk through the reader, recording member offsets.
    pub fn push_bytes(&mut self, chunk: &[u8]) -> Result<Progress, Error> {
        let mut input = chunk;
        while !input.is_empty() {
            let (used, event) = self.reader.feed(input)?;
            self.on_event(event);
            input = &input[used..];
        }
        // A member that ended exactly at the chunk's end reports it on the
        // next call: drain it now so the counts are current.
        loop {
            let (_, event) = self.reader.feed(&[])?;
            match event {
                Some(Event::MemberEnd { .. }) => self.on_event(event),
                _ => break,
            }
        }
        Ok(self.progress())
    }

    fn on_event(&mut self, event: Option<Event<'_>>) {
        match event {
            Some(Event::Manifest) => {
                let n = self.reader.manifest().map_or(0, |m| m.members.len());
                self.data_offsets = vec![0; n];
            }
            Some(Event::MemberStart {
                index, data_offset, ..
            }) => {
                if let Some(slot) = self.data_offsets.get_mut(index) {
                    *slot = data_offset;
                }
                self.current = Some(index);
            }
            Some(Event::MemberEnd { .. }) => {
                self.verified += 1;
                self.current = None;
            }
            Some(Event::Data(_)) | None => {}
        }
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
                .map(|e| e.path.clone()),
        }
    }

    /// Ends the input: the packet is verified, or the refusal is returned.
    pub fn finish_packet(mut self) -> Result<Packet, Error> {
        let verified = self.reader.finish()?;
        let manifest = self.reader.into_manifest().ok_or_else(|| {
            Error::new(
                packet_core::ErrorCode::Usage,
                "verified packet without a manifest",
            )
        })?;
        Ok(Packet {
            manifest,
            verified,
            data_offsets: self.data_offsets,
        })
    }
}

#[wasm_bindgen]
impl Verifier {
    /// `new Verifier(expectedDigest)`: `expectedDigest` is `null` or
    /// `"sha256:<hex>"`; a malformed digest throws a `digest_syntax` refusal.
    #[wasm_bindgen(constructor)]
    pub fn new(expected_digest: Option<String>) -> Result<Verifier, JsValue> {
        let expected = match expected_digest {
            Some(s) => Some(s.parse::<Digest>().map_err(|e| refusal(&e))?),
            None => None,
        };
        Ok(Verifier::with_digest(expected))
    }

    /// `Verifier.withExternalDigest(expectedDigest)`: a verifier that does
    /// not hash the whole packet; the caller hashes the same bytes with a
    /// `PacketHasher` (on another thread) and ends with `finishWithDigest`.
    #[wasm_bindgen(js_name = withExternalDigest)]
    pub fn with_external_digest_js(expected_digest: Option<String>) -> Result<Verifier, JsValue> {
        let expected = match expected_digest {
            Some(s) => Some(s.parse::<Digest>().map_err(|e| refusal(&e))?),
            None => None,
        };
        Ok(Verifier::with_external_digest(expected))
    }

    /// Ends the input of a `withExternalDigest` verifier with the whole
    /// packet's digest (`"sha256:<hex>"`); throws `packet_digest_mismatch`
    /// when it differs from the expected one, or any other refusal.
    #[wasm_bindgen(js_name = finishWithDigest)]
    pub fn finish_with_digest_js(self, digest: &str) -> Result<Packet, JsValue> {
        let digest = digest.parse::<Digest>().map_err(|e| refusal(&e))?;
        self.finish_with_digest(digest).map_err(|e| refusal(&e))
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
        self.finish_packet().map_err(|e| refusal(&e))
    }
}

/// A verified packet: its manifest, digest and member offsets (JavaScript
/// class `Packet`). It holds no member bodies.
#[wasm_bindgen]
pub struct Packet {
    pub(crate) manifest: Manifest,
    pub(crate) verified: Verified,
    pub(crate) data_offsets: Vec<u64>,
}

impl Packet {
    /// The manifest.
    pub fn manifest(&self) -> &Manifest {
        &self.manifest
    }

    /// The report the page draws.
    pub fn report_view(&self) -> ReportView {
        ReportView::new(
            &self.manifest,
            self.verified.digest.map(|d| d.to_string()),
            self.verified.size,
            &self.data_offsets,
        )
    }

    /// The view of member `index`.
    pub fn member_view(&self, index: usize) -> Option<MemberView> {
        let entry = self.manifest.members.get(index)?;
        Some(MemberView::new(
            index,
            entry,
            self.data_offsets.get(index).copied().unwrap_or(0),
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
        String::from_utf8(self.manifest.to_canonical_json()).unwrap_or_default()
    }

    /// The index of the member at `path`, or `undefined`.
    #[wasm_bindgen(js_name = indexOf)]
    pub fn index_of(&self, path: &str) -> Option<usize> {
        self.manifest.find(path).map(|(i, _)| i)
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
        MemberCheck::for_member(&self.manifest, index).map_err(|e| refusal(&e))
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
