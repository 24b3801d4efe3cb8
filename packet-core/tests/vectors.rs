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
//! (whole and in small chunks) with every body as described. (Refused
//! inputs are the adversarial corpus's: `adversarial_wasm.rs`.)

#[allow(dead_code)]
#[path = "../../tests/vectors/src/description.rs"]
mod description;

use description::{parse_digests, read_chunked, Description};
use packet_core::in_memory::Source;
use packet_core::ReaderOptions;

#[cfg(target_arch = "wasm32")]
use wasm_bindgen_test::wasm_bindgen_test as test;

macro_rules! vectors {
    ($($name:literal,)*) => {
        &[$((
            $name,
            include_str!(concat!("../../tests/vectors/descriptions/", $name, ".json")),
            include_bytes!(concat!("../../tests/vectors/packets/", $name, ".packet")),
        ),)*]
    };
}

/// (name, description, packet) for every vector; digests.json must list
/// exactly these names.
const VECTORS: &[(&str, &str, &[u8])] = vectors![
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

#[test]
fn every_vector_is_compiled_in() {
    let digests = parse_digests(DIGESTS).unwrap();
    let listed: Vec<&str> = digests.iter().map(|(n, _)| n.as_str()).collect();
    let included: Vec<&str> = VECTORS.iter().map(|v| v.0).collect();
    assert_eq!(listed, included);
}

#[test]
fn vectors_build_to_the_same_bytes() {
    let digests = parse_digests(DIGESTS).unwrap();
    for ((name, description, packet), (_, digest)) in VECTORS.iter().zip(&digests) {
        let built = Description::parse(description).unwrap().build().unwrap();
        assert!(
            built.bytes == *packet,
            "{name}: the bytes differ from the checked-in packet"
        );
        assert_eq!(built.digest.to_string(), *digest, "{name}");
    }
}

#[test]
fn checked_in_packets_verify_in_any_chunking() {
    let digests = parse_digests(DIGESTS).unwrap();
    for ((name, description, packet), (_, digest)) in VECTORS.iter().zip(&digests) {
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
