//! A /2 packet verified from its parts rather than read as one stream: its
//! `packet.json` bytes and a proof for each body, wherever the bodies are
//! kept (a store's packs, a client's cache, an older packet, a workspace).
//!
//! A /2 packet is named by its manifest, and the manifest determines every
//! byte of the packet but the bodies (docs/session-packet.md §9): so the
//! packet is verified once its manifest hashes to the name, passes every
//! rule, and every body its members list is proven to have the size and
//! sha256 the manifest states. [`Assembly`] holds that check: a consumer
//! that keeps bodies by their digest proves each one, by hashing it
//! ([`BodyHasher`]) or from what it proved before ([`Proof::stored`]), and
//! gets the same [`VerifiedPacket`] a [`Reader`](crate::Reader) gives.
//!
//! ```
//! use packet_core::assembled::{Assembly, BodyHasher};
//! use packet_core::in_memory::{build, Source};
//! use packet_core::{Findings, Limits};
//!
//! let built = build(
//!     &[
//!         Source::Dir { path: "workspace".into() },
//!         Source::File { path: "workspace/a.txt".into(), contents: b"hi".to_vec(), executable: false },
//!     ],
//!     None,
//!     vec![],
//!     &Limits::FORMAT,
//! )?;
//! let json = built.manifest.to_canonical_json();
//! let mut assembly = Assembly::new(&json, Some(built.digest), &Limits::FORMAT)?;
//! for body in assembly.unproven() {
//!     let mut hasher = BodyHasher::new(body);
//!     hasher.update(b"hi")?;
//!     assembly.prove(hasher.finish()?);
//! }
//! let packet = assembly.finish(Findings::default())?;
//! assert_eq!(packet.digest, built.digest);
//! assert_eq!(packet.size, built.bytes.len() as u64);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use alloc::vec::Vec;

use crate::digest::{Digest, HashState, ResumableHasher};
use crate::error::{Error, ErrorCode};
use crate::findings::Findings;
use crate::header::BLOCK;
use crate::limits::Limits;
use crate::manifest::{Body, Manifest};
use crate::offsets::Offsets;
use crate::path::MANIFEST_PATH;
use crate::reader::VerifiedPacket;

/// That a body with this size and sha256 is at hand: made only by hashing
/// its bytes ([`BodyHasher::finish`]) or by a consumer vouching for bytes it
/// proved before ([`Proof::stored`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Proof {
    body: Body,
}

impl Proof {
    /// A body the consumer's own store holds and proved when it stored it:
    /// bytes it hashed then, kept under their (sha256, size). Only for
    /// bytes that were hashed; a name alone proves nothing.
    pub fn stored(body: Body) -> Proof {
        Proof { body }
    }

    /// The body proven.
    pub fn body(&self) -> Body {
        self.body
    }
}

/// Hashes one body as it comes, in pieces of any size, and proves it if it
/// has exactly the size and sha256 expected. Its state can be kept and
/// resumed ([`BodyHasher::state`], [`BodyHasher::resume`]), so a body that
/// grew is hashed from where its earlier version ended.
#[derive(Clone)]
pub struct BodyHasher {
    expected: Body,
    hasher: ResumableHasher,
}

impl BodyHasher {
    /// A hasher for `expected`.
    pub fn new(expected: Body) -> BodyHasher {
        BodyHasher {
            expected,
            hasher: ResumableHasher::new(),
        }
    }

    /// A hasher for `expected` that goes on from `state`: the state after a
    /// prefix of its bytes (the whole of an earlier version of the body,
    /// say, whose bytes the caller checked are this body's first ones).
    pub fn resume(expected: Body, state: &HashState) -> Result<BodyHasher, Error> {
        if state.hashed() > expected.size {
            return Err(too_long(expected, state.hashed()));
        }
        Ok(BodyHasher {
            expected,
            hasher: ResumableHasher::resume(state),
        })
    }

    /// The body it proves.
    pub fn expected(&self) -> Body {
        self.expected
    }

    /// Bytes hashed so far.
    pub fn hashed(&self) -> u64 {
        self.hasher.len()
    }

    /// The state after the bytes so far.
    pub fn state(&self) -> HashState {
        self.hasher.state()
    }

    /// The next bytes; more than the body's size is a refusal.
    pub fn update(&mut self, bytes: &[u8]) -> Result<(), Error> {
        let after = self.hasher.len().saturating_add(bytes.len() as u64);
        if after > self.expected.size {
            return Err(too_long(self.expected, after));
        }
        self.hasher.update(bytes);
        Ok(())
    }

    /// The proof, if the bytes were the body.
    pub fn finish(self) -> Result<Proof, Error> {
        let (expected, hashed) = (self.expected, self.hasher.len());
        if hashed != expected.size {
            return Err(Error::new(
                ErrorCode::MemberDigestMismatch,
                alloc::format!(
                    "the body has {hashed} bytes, the manifest says {}",
                    expected.size
                ),
            ));
        }
        let got = self.hasher.finish();
        if got != expected.sha256 {
            return Err(Error::new(
                ErrorCode::MemberDigestMismatch,
                alloc::format!(
                    "the bytes hash to {}, the manifest says {}",
                    got.hex(),
                    expected.sha256.hex()
                ),
            ));
        }
        Ok(Proof { body: expected })
    }
}

fn too_long(expected: Body, len: u64) -> Error {
    Error::new(
        ErrorCode::MemberDigestMismatch,
        alloc::format!(
            "the body has at least {len} bytes, the manifest says {}",
            expected.size
        ),
    )
}

/// A /2 packet being verified from its manifest and its bodies' proofs.
#[derive(Debug)]
pub struct Assembly {
    manifest: Manifest,
    digest: Digest,
    offsets: Offsets,
    /// Every distinct body the members list, sorted, with whether it is
    /// proven and the first member that has it.
    bodies: Vec<(Body, bool, usize)>,
    unproven: usize,
}

impl Assembly {
    /// Checks `json`, a /2 packet's `packet.json`: that it hashes to
    /// `expected` (the packet's name) when one is given, then that it is
    /// the canonical manifest of a valid member set within `limits`. A /1
    /// packet is named by its whole file, so it cannot be assembled: it is
    /// read as a stream.
    pub fn new(json: &[u8], expected: Option<Digest>, limits: &Limits) -> Result<Assembly, Error> {
        let digest = Digest::of(json);
        if let Some(expected) = expected.filter(|e| *e != digest) {
            return Err(Error::new(
                ErrorCode::PacketDigestMismatch,
                alloc::format!("expected {expected}, this packet's manifest is {digest}"),
            )
            .at_path(MANIFEST_PATH)
            .at_offset(BLOCK as u64));
        }
        let manifest = Manifest::parse(json, limits).map_err(|e| e.at_offset(BLOCK as u64))?;
        if !manifest.format.named_by_manifest() {
            return Err(Error::new(
                ErrorCode::ManifestInvalid,
                alloc::format!(
                    "a {} packet is named by its whole file: it is verified by reading it whole, not from its parts",
                    manifest.format.id()
                ),
            )
            .at_path(MANIFEST_PATH));
        }
        Ok(Self::of(manifest, digest))
    }

    fn of(manifest: Manifest, digest: Digest) -> Assembly {
        let mut bodies: Vec<(Body, bool, usize)> = manifest
            .members
            .iter()
            .enumerate()
            .filter_map(|(i, m)| m.body().map(|b| (b, false, i)))
            .collect();
        // One entry per body, the first member that has it kept.
        bodies.sort_by_key(|&(b, _, i)| (b, i));
        bodies.dedup_by_key(|(b, _, _)| *b);
        let unproven = bodies.len();
        let offsets = Offsets::of(&manifest);
        Assembly {
            manifest,
            digest,
            offsets,
            bodies,
            unproven,
        }
    }

    /// The manifest (valid: it passed every rule).
    pub fn manifest(&self) -> &Manifest {
        &self.manifest
    }

    /// The packet's digest: its manifest's.
    pub fn digest(&self) -> Digest {
        self.digest
    }

    /// Where each part of the packet lies.
    pub fn offsets(&self) -> &Offsets {
        &self.offsets
    }

    /// The distinct bodies not proven yet, in the order of the members
    /// that first list them.
    pub fn unproven(&self) -> Vec<Body> {
        let mut out: Vec<(usize, Body)> = self
            .bodies
            .iter()
            .filter(|(_, proven, _)| !proven)
            .map(|&(b, _, i)| (i, b))
            .collect();
        out.sort_unstable_by_key(|&(i, _)| i);
        out.into_iter().map(|(_, b)| b).collect()
    }

    /// Whether every body is proven.
    pub fn is_complete(&self) -> bool {
        self.unproven == 0
    }

    /// Whether `body` is one this packet needs and has not proven yet.
    pub fn needs(&self, body: Body) -> bool {
        self.slot(body).is_some_and(|i| !self.bodies[i].1)
    }

    fn slot(&self, body: Body) -> Option<usize> {
        self.bodies.binary_search_by_key(&body, |&(b, _, _)| b).ok()
    }

    /// Records a proof; returns whether the packet lists that body (a proof
    /// of another body changes nothing).
    pub fn prove(&mut self, proof: Proof) -> bool {
        let Some(i) = self.slot(proof.body) else {
            return false;
        };
        if !self.bodies[i].1 {
            self.bodies[i].1 = true;
            self.unproven -= 1;
        }
        true
    }

    /// A refusal about `body`: `error` (from a [`BodyHasher`], say) with the
    /// path and data offset of the first member that has it.
    pub fn refuse_body(&self, body: Body, error: Error) -> Error {
        match self.slot(body) {
            Some(i) => {
                let index = self.bodies[i].2;
                error
                    .at_path(&self.manifest.members[index].path)
                    .at_offset(self.offsets.data_offsets()[index])
            }
            None => error,
        }
    }

    /// The verified packet, once every body is proven; `findings` are what
    /// the consumer found in its bodies and manifest (see
    /// [`Findings::assemble`]).
    pub fn finish(self, findings: Findings) -> Result<VerifiedPacket, Error> {
        if let Some(&(body, _, index)) = self.bodies.iter().find(|(_, proven, _)| !proven) {
            let member = &self.manifest.members[index];
            return Err(Error::new(
                ErrorCode::MemberMissing,
                alloc::format!(
                    "no proof was given for its body ({} bytes, sha256 {})",
                    body.size,
                    body.sha256.hex()
                ),
            )
            .at_path(&member.path)
            .at_offset(self.offsets.data_offsets()[index]));
        }
        let manifest_range = self.offsets.manifest_range();
        Ok(VerifiedPacket {
            digest: self.digest,
            size: self.offsets.size(),
            data_offsets: self.offsets.data_offsets().to_vec(),
            manifest_range,
            findings,
            manifest: self.manifest,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::Format;
    use crate::in_memory::{build, build_as, Source};
    use alloc::vec;

    fn sources() -> Vec<Source> {
        vec![
            Source::Dir {
                path: "workspace".into(),
            },
            Source::File {
                path: "workspace/a".into(),
                contents: b"one".to_vec(),
                executable: false,
            },
            Source::File {
                path: "workspace/b".into(),
                contents: b"one".to_vec(),
                executable: true,
            },
            Source::File {
                path: "workspace/c".into(),
                contents: b"two!".to_vec(),
                executable: false,
            },
            Source::File {
                path: "workspace/empty".into(),
                contents: Vec::new(),
                executable: false,
            },
        ]
    }

    #[test]
    fn an_assembled_packet_is_what_the_reader_gives() {
        let built = build(&sources(), None, vec![], &Limits::FORMAT).unwrap();
        let read = crate::reader::verify(&built.bytes, Default::default()).unwrap();
        let json = built.manifest.to_canonical_json();
        let mut a = Assembly::new(&json, Some(built.digest), &Limits::FORMAT).unwrap();
        // Two members share one body: it is proven once; empty files need none.
        assert_eq!(a.unproven().len(), 2);
        for body in a.unproven() {
            let bytes: &[u8] = if body.size == 3 { b"one" } else { b"two!" };
            let mut h = BodyHasher::new(body);
            for b in bytes {
                h.update(&[*b]).unwrap();
            }
            assert!(a.prove(h.finish().unwrap()));
        }
        let assembled = a.finish(read.findings.clone()).unwrap();
        assert_eq!(assembled, read);
    }

    #[test]
    fn every_body_needs_its_proof_and_a_wrong_one_is_refused() {
        let built = build(&sources(), None, vec![], &Limits::FORMAT).unwrap();
        let json = built.manifest.to_canonical_json();
        let mut a = Assembly::new(&json, None, &Limits::FORMAT).unwrap();
        let [one, two] = [a.unproven()[0], a.unproven()[1]];
        assert!(a.prove(Proof::stored(one)));
        let e = Assembly::new(&json, None, &Limits::FORMAT)
            .unwrap()
            .finish(Findings::default())
            .unwrap_err();
        assert_eq!(e.code(), ErrorCode::MemberMissing);
        assert_eq!(e.path(), Some("workspace/a"));
        // A proof of a body of another size is not this body's.
        assert!(!a.prove(Proof::stored(Body {
            sha256: two.sha256,
            size: two.size + 1
        })));
        assert!(!a.is_complete());
        // Bytes that lie are refused, too many of them at once.
        let mut h = BodyHasher::new(two);
        assert_eq!(
            h.update(b"two!!").unwrap_err().code(),
            ErrorCode::MemberDigestMismatch
        );
        h.update(b"two?").unwrap();
        let e = a.refuse_body(two, h.finish().unwrap_err());
        assert_eq!(e.code(), ErrorCode::MemberDigestMismatch);
        assert_eq!(e.path(), Some("workspace/c"));
        let short = BodyHasher::new(two);
        assert_eq!(
            short.finish().unwrap_err().code(),
            ErrorCode::MemberDigestMismatch
        );
    }

    #[test]
    fn the_manifest_must_hash_to_the_name_and_be_of_2() {
        let built = build(&sources(), None, vec![], &Limits::FORMAT).unwrap();
        let json = built.manifest.to_canonical_json();
        let e = Assembly::new(&json, Some(Digest::of(b"x")), &Limits::FORMAT).unwrap_err();
        assert_eq!(
            (e.code(), e.offset()),
            (ErrorCode::PacketDigestMismatch, Some(512))
        );
        let v1 = build_as(Format::V1, &sources(), None, vec![], &Limits::FORMAT).unwrap();
        let e = Assembly::new(&v1.manifest.to_canonical_json(), None, &Limits::FORMAT).unwrap_err();
        assert_eq!(e.code(), ErrorCode::ManifestInvalid);
        let mut spaced = json.clone();
        spaced.push(b' ');
        let e = Assembly::new(&spaced, None, &Limits::FORMAT).unwrap_err();
        assert_eq!(e.code(), ErrorCode::ManifestNotCanonical);
    }

    #[test]
    fn a_body_that_grew_is_hashed_from_where_it_ended() {
        let old = b"line one\nline two\n".repeat(10);
        let mut new = old.clone();
        new.extend_from_slice(b"line three\n");
        let mut h = BodyHasher::new(Body {
            sha256: Digest::of(&old),
            size: old.len() as u64,
        });
        h.update(&old).unwrap();
        let state = h.state();
        let body = Body {
            sha256: Digest::of(&new),
            size: new.len() as u64,
        };
        let mut resumed = BodyHasher::resume(body, &state).unwrap();
        resumed.update(&new[old.len()..]).unwrap();
        assert_eq!(resumed.finish().unwrap().body(), body);
        let small = Body {
            sha256: Digest::of(b"x"),
            size: 1,
        };
        assert!(BodyHasher::resume(small, &state).is_err());
    }
}
