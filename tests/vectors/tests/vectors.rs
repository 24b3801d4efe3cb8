//! The checked-in vectors are exactly what their descriptions produce, and
//! the reader accepts them however the input is chunked.

use packet_core::in_memory::Source;
use packet_core::{Digest, ReaderOptions};
use packet_vectors::description::{parse_digests, read_chunked};

fn digests() -> Vec<(String, String)> {
    let text = std::fs::read_to_string(packet_vectors::digests_path()).unwrap();
    parse_digests(&text).unwrap()
}

#[test]
fn descriptions_packets_and_digests_list_the_same_vectors() {
    let names = packet_vectors::names().unwrap();
    assert!(names.len() >= 12, "{names:?}");
    let listed: Vec<String> = digests().into_iter().map(|(n, _)| n).collect();
    assert_eq!(names, listed);
    let mut packets: Vec<String> = std::fs::read_dir(packet_vectors::root().join("packets"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .map(|f| {
            f.strip_suffix(".packet")
                .expect("only .packet files")
                .to_string()
        })
        .collect();
    packets.sort();
    assert_eq!(names, packets);
    // digests.json is in the generator's own layout.
    let text = std::fs::read_to_string(packet_vectors::digests_path()).unwrap();
    assert_eq!(text, packet_vectors::digests_json(&digests()));
}

#[test]
fn every_vector_rebuilds_byte_for_byte() {
    for (name, digest) in digests() {
        let built = packet_vectors::description(&name).unwrap().build().unwrap();
        let checked_in = packet_vectors::packet(&name).unwrap();
        assert!(built.bytes == checked_in, "{name}: rebuilt bytes differ; run `cargo run -p packet-vectors --bin gen` and review the diff");
        assert_eq!(built.digest.to_string(), digest, "{name}");
        assert_eq!(Digest::of(&checked_in).to_string(), digest, "{name}");
        assert_eq!(
            built.manifest.packet_size(),
            checked_in.len() as u64,
            "{name}"
        );
        // Building twice gives the same bytes.
        let again = packet_vectors::description(&name).unwrap().build().unwrap();
        assert!(again.bytes == built.bytes, "{name}");
    }
}

#[test]
fn every_vector_reads_back_whatever_the_chunking() {
    for (name, digest) in digests() {
        let description = packet_vectors::description(&name).unwrap();
        let bytes = packet_vectors::packet(&name).unwrap();
        let options = ReaderOptions {
            expected_digest: Some(digest.parse().unwrap()),
            ..Default::default()
        };
        let whole = read_chunked(&bytes, options, usize::MAX).unwrap();
        assert_eq!(whole.verified.digest.to_string(), digest);
        assert_eq!(whole.verified.size, bytes.len() as u64);
        let manifest = whole.verified.manifest.clone();
        assert_eq!(whole.verified.data_offsets.len(), manifest.members.len());
        assert_eq!(whole.members.len(), manifest.members.len(), "{name}");
        let sources = description.sources().unwrap();
        assert_eq!(sources.len(), manifest.members.len(), "{name}");
        for (i, (index, header_offset, data_offset, body)) in whole.members.iter().enumerate() {
            assert_eq!(*index, i);
            let entry = &manifest.members[i];
            let source = sources
                .iter()
                .find(|s| match s {
                    Source::Dir { path }
                    | Source::File { path, .. }
                    | Source::Symlink { path, .. } => *path == entry.path,
                })
                .unwrap();
            let expected: &[u8] = match source {
                Source::File { contents, .. } => contents,
                _ => &[],
            };
            assert!(body == expected, "{name}: {}", entry.path);
            // The data offset addresses the body inside the packet, and the
            // header offset a header block.
            let (d, h) = (*data_offset as usize, *header_offset as usize);
            assert!(&bytes[d..d + body.len()] == body.as_slice());
            assert_eq!(&bytes[h + 257..h + 263], b"ustar\0");
            assert!(h < d && (d - h) % 512 == 0);
        }
        for chunk in [1, 2, 3, 100, 511, 512, 513, 4096, 65536] {
            let r = read_chunked(&bytes, options, chunk).unwrap();
            assert_eq!(r, whole, "{name}: chunk {chunk}");
        }
    }
}

#[test]
fn the_codex_vector_carries_its_rollout() {
    let bytes = packet_vectors::packet("harness-codex").unwrap();
    let r = read_chunked(&bytes, ReaderOptions::default(), 4096).unwrap();
    let manifest = r.verified.manifest;
    let harness = manifest.harness.as_ref().unwrap();
    assert_eq!(harness.kind.as_str(), "codex");
    assert!(harness
        .session_log
        .starts_with("harness/codex/sessions/2026/11/30/rollout-2026-11-30T10-00-00-"));
    assert!(harness
        .session_log
        .ends_with(&format!("{}.jsonl", harness.session_id)));
    let (index, _) = manifest.find(&harness.session_log).unwrap();
    let body = &r.members.iter().find(|m| m.0 == index).unwrap().3;
    assert!(body.starts_with(b"{\"timestamp\""));
    let exclusions = packet_vectors::packet("exclusions").unwrap();
    let r = read_chunked(&exclusions, ReaderOptions::default(), 4096).unwrap();
    let rules: Vec<String> = r
        .verified
        .manifest
        .exclusions
        .iter()
        .map(|e| e.rule.clone())
        .collect();
    assert_eq!(
        rules,
        ["codex-auth", "netrc", "special-file", "user", "user"]
    );
}
