//! The golden vectors (tests/vectors), checked on whatever target this test
//! is built for: natively with `cargo test -p packet-core --test vectors`,
//! and under wasm32 with
//!
//! ```text
//! CARGO_TARGET_WASM32_UNKNOWN_UNKNOWN_RUNNER=wasm-bindgen-test-runner \
//!   cargo test -p packet-core --target wasm32-unknown-unknown --test vectors
//! ```
//!
//! The descriptions, packets and digests are compiled in, so the wasm build
//! needs no file system. Each vector must build to the same bytes and
//! digest as the checked-in packet, and the checked-in packet must verify
//! (whole and in small chunks) with every body as described. The /1
//! vectors (tests/vectors/v1), written before /2, must still verify under
//! their old digests (the whole file's), and their members rebuild as the
//! /2 vectors. (Refused inputs are the adversarial corpus's:
//! `adversarial_wasm.rs`.)

#[allow(dead_code)]
#[path = "../../tests/vectors/src/description.rs"]
mod description;

use description::{parse_digests, read_chunked, Description};
use packet_core::in_memory::Source;
use packet_core::{Digest, ErrorCode, Format, ReaderOptions};

#[cfg(target_arch = "wasm32")]
use wasm_bindgen_test::wasm_bindgen_test as test;

macro_rules! vectors {
    ($($name:literal,)*) => {
        &[$((
            $name,
            include_str!(concat!("../../tests/vectors/descriptions/", $name, ".json")),
            include_bytes!(concat!("../../tests/vectors/packets/", $name, ".packet")),
            include_bytes!(concat!("../../tests/vectors/v1/packets/", $name, ".packet")),
        ),)*]
    };
}

/// (name, description, packet, /1 packet) for every vector; digests.json
/// and v1/digests.json must list exactly these names.
const VECTORS: &[(&str, &str, &[u8], &[u8])] = vectors![
    "binary-contents",
    "empty-files",
    "empty-workspace",
    "exclusions",
    "exec-bits",
    "harness-codex",
    "long-path-pax",
    "long-path-ustar-prefix",
    "long-symlink-target",
    "nested-dirs",
    "symlinks",
    "utf8-paths",
];

const DIGESTS: &str = include_str!("../../tests/vectors/digests.json");
const V1_DIGESTS: &str = include_str!("../../tests/vectors/v1/digests.json");

#[test]
fn every_vector_is_compiled_in() {
    let digests = parse_digests(DIGESTS).unwrap();
    let listed: Vec<&str> = digests.iter().map(|(n, _)| n.as_str()).collect();
    let included: Vec<&str> = VECTORS.iter().map(|v| v.0).collect();
    assert_eq!(listed, included);
    let v1 = parse_digests(V1_DIGESTS).unwrap();
    let listed: Vec<&str> = v1.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(listed, included);
}

#[test]
fn vectors_build_to_the_same_bytes() {
    let digests = parse_digests(DIGESTS).unwrap();
    for ((name, description, packet, _), (_, digest)) in VECTORS.iter().zip(&digests) {
        let built = Description::parse(description).unwrap().build().unwrap();
        assert!(
            built.bytes == *packet,
            "{name}: the bytes differ from the checked-in packet"
        );
        assert_eq!(built.digest.to_string(), *digest, "{name}");
        // Named by its packet.json's exact bytes.
        let json = &packet[512..512 + built.manifest.canonical_len() as usize];
        assert_eq!(Digest::of(json), built.digest, "{name}");
    }
}

#[test]
fn checked_in_packets_verify_in_any_chunking() {
    let digests = parse_digests(DIGESTS).unwrap();
    for ((name, description, packet, _), (_, digest)) in VECTORS.iter().zip(&digests) {
        let options = ReaderOptions {
            expected_digest: Some(digest.parse().unwrap()),
            ..Default::default()
        };
        let whole = read_chunked(packet, options, usize::MAX).unwrap();
        assert_eq!(whole.verified.digest.to_string(), *digest, "{name}");
        let sources = Description::parse(description).unwrap().sources().unwrap();
        let manifest = &whole.verified.manifest;
        assert_eq!(whole.members.len(), sources.len(), "{name}");
        for (index, _, _, body) in &whole.members {
            let path = &manifest.members[*index].path;
            let expected = sources.iter().find_map(|s| match s {
                Source::File {
                    path: p, contents, ..
                } if p == path => Some(contents.as_slice()),
                Source::File { .. } => None,
                Source::Dir { path: p } | Source::Symlink { path: p, .. } => {
                    (p == path).then_some(&[][..])
                }
            });
            assert!(expected == Some(body.as_slice()), "{name}: {path}");
        }
        for chunk in [1, 7, 512, 4096] {
            assert_eq!(
                read_chunked(packet, options, chunk).unwrap(),
                whole,
                "{name}: chunk {chunk}"
            );
        }
    }
}

#[test]
fn v1_vectors_verify_under_their_old_digests() {
    let v1 = parse_digests(V1_DIGESTS).unwrap();
    let v2 = parse_digests(DIGESTS).unwrap();
    for (((name, description, packet, v1_packet), (_, digest)), (_, v2_digest)) in
        VECTORS.iter().zip(&v1).zip(&v2)
    {
        let description = Description::parse(description).unwrap();
        assert_eq!(Digest::of(v1_packet).to_string(), *digest, "{name}");
        let options = ReaderOptions {
            expected_digest: Some(digest.parse().unwrap()),
            ..Default::default()
        };
        let whole = read_chunked(v1_packet, options, usize::MAX).unwrap();
        assert_eq!(whole.verified.manifest.format, Format::V1, "{name}");
        assert_eq!(whole.verified.digest.to_string(), *digest, "{name}");
        for chunk in [1, 7, 512, 4096] {
            let r = read_chunked(v1_packet, options, chunk).unwrap();
            assert_eq!(r, whole, "{name}: chunk {chunk}");
        }
        // The /1 writer still writes it byte for byte.
        let rebuilt = description.build_as(Format::V1).unwrap();
        assert!(
            rebuilt.bytes == *v1_packet,
            "{name}: the /1 encoding changed"
        );
        // The same members read the same from the /2 packet, named by /2's
        // rule; the /2 name does not name the /1 packet.
        let as_2 = read_chunked(packet, ReaderOptions::default(), 4096).unwrap();
        assert_eq!(as_2.verified.digest.to_string(), *v2_digest, "{name}");
        assert_eq!(as_2.members, whole.members, "{name}");
        assert_eq!(
            as_2.verified.manifest.members, whole.verified.manifest.members,
            "{name}"
        );
        let wrong = ReaderOptions {
            expected_digest: Some(as_2.verified.digest),
            ..Default::default()
        };
        let e = read_chunked(v1_packet, wrong, 4096).unwrap_err();
        assert_eq!(e.code(), ErrorCode::PacketDigestMismatch, "{name}");
    }
}
