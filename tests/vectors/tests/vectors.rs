//! The checked-in vectors are exactly what their descriptions produce, and
//! the reader accepts them however the input is chunked; the /1 vectors,
//! written before /2, still verify under their old digests, read as they
//! did, and rebuild as /2 packets of the same members under /2's names.

use packet_core::in_memory::Source;
use packet_core::{Digest, Format, ReaderOptions};
use packet_vectors::description::{parse_digests, read_chunked};

fn digests() -> Vec<(String, String)> {
    let text = std::fs::read_to_string(packet_vectors::digests_path()).unwrap();
    parse_digests(&text).unwrap()
}

fn v1_digests() -> Vec<(String, String)> {
    let text = std::fs::read_to_string(packet_vectors::v1_digests_path()).unwrap();
    parse_digests(&text).unwrap()
}

/// `packet.json`'s bytes in a packet: the body of its first member.
fn manifest_bytes(packet: &[u8]) -> &[u8] {
    let size = std::str::from_utf8(&packet[124..135]).unwrap();
    let size = usize::from_str_radix(size, 8).unwrap();
    assert_eq!(&packet[..12], b"packet.json\0");
    &packet[512..512 + size]
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
        // A /2 packet is named by its packet.json's bytes, not its file's.
        assert_eq!(
            Digest::of(manifest_bytes(&checked_in)).to_string(),
            digest,
            "{name}"
        );
        assert_ne!(Digest::of(&checked_in).to_string(), digest, "{name}");
        assert_eq!(built.manifest.format, Format::V2, "{name}");
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

#[test]
fn the_1_vectors_still_verify_under_their_old_digests_and_rebuild_as_2() {
    let v1 = v1_digests();
    let v2 = digests();
    let names: Vec<&String> = v1.iter().map(|(n, _)| n).collect();
    assert_eq!(names, v2.iter().map(|(n, _)| n).collect::<Vec<_>>());
    let mut files: Vec<String> = std::fs::read_dir(packet_vectors::root().join("v1/packets"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    files.sort();
    let listed: Vec<String> = names.iter().map(|n| format!("{n}.packet")).collect();
    assert_eq!(files, listed);
    for ((name, digest), (_, v2_digest)) in v1.iter().zip(&v2) {
        let bytes = packet_vectors::v1_packet(name).unwrap();
        let description = packet_vectors::description(name).unwrap();
        // A /1 packet is named by its whole file.
        assert_eq!(Digest::of(&bytes).to_string(), *digest, "{name}");
        let options = ReaderOptions {
            expected_digest: Some(digest.parse().unwrap()),
            ..Default::default()
        };
        let whole = read_chunked(&bytes, options, usize::MAX).unwrap();
        assert_eq!(whole.verified.manifest.format, Format::V1, "{name}");
        assert_eq!(whole.verified.digest.to_string(), *digest, "{name}");
        for chunk in [1, 7, 511, 512, 4096] {
            let r = read_chunked(&bytes, options, chunk).unwrap();
            assert_eq!(r, whole, "{name}: chunk {chunk}");
        }
        // Its whole hash is needed, and checked, when it is computed elsewhere.
        let mut elsewhere = packet_core::Reader::hashed_elsewhere(options);
        elsewhere.feed(&bytes).unwrap();
        assert_eq!(elsewhere.whole_hash_needed(), Some(true), "{name}");
        let verified = elsewhere
            .finish_with_digest(Some(Digest::of(&bytes)))
            .unwrap();
        assert_eq!(verified, whole.verified, "{name}");
        // Under its manifest's digest (a /2 name) it is refused.
        let as_2 = ReaderOptions {
            expected_digest: Some(Digest::of(manifest_bytes(&bytes))),
            ..Default::default()
        };
        let e = read_chunked(&bytes, as_2, 4096).unwrap_err();
        assert_eq!(
            e.code(),
            packet_core::ErrorCode::PacketDigestMismatch,
            "{name}"
        );
        // The /1 writer still writes exactly these bytes.
        let rebuilt = description.build_as(Format::V1).unwrap();
        assert!(rebuilt.bytes == bytes, "{name}: the /1 encoding changed");
        assert_eq!(rebuilt.digest.to_string(), *digest, "{name}");
        // Its /2 rebuild: the same members, named by /2's rule, read the
        // same (members, offsets, bodies), one byte of packet.json apart.
        let rebuilt = description.build().unwrap();
        assert_eq!(rebuilt.manifest.format, Format::V2);
        assert_eq!(
            rebuilt.manifest.members, whole.verified.manifest.members,
            "{name}"
        );
        assert_eq!(
            rebuilt.manifest.totals, whole.verified.manifest.totals,
            "{name}"
        );
        assert_eq!(rebuilt.digest.to_string(), *v2_digest, "{name}");
        assert_eq!(
            rebuilt.digest,
            Digest::of(&rebuilt.manifest.to_canonical_json())
        );
        assert!(
            rebuilt.bytes == packet_vectors::packet(name).unwrap(),
            "{name}"
        );
        let read_2 = read_chunked(&rebuilt.bytes, ReaderOptions::default(), 4096).unwrap();
        assert_eq!(read_2.members, whole.members, "{name}");
        assert_eq!(read_2.verified.data_offsets, whole.verified.data_offsets);
        assert_eq!(read_2.verified.size, whole.verified.size);
        assert_eq!(read_2.verified.findings, whole.verified.findings);
        let differing: Vec<usize> = (0..bytes.len())
            .filter(|&i| bytes[i] != rebuilt.bytes[i])
            .collect();
        let json = whole.verified.manifest_range.clone();
        assert!(
            differing.iter().all(|&i| json.contains(&(i as u64))),
            "{name}: /1 and /2 differ outside packet.json at {differing:?}"
        );
    }
}
