//! `ReaderOptions::skip_member_digests`: a second read that trusts the
//! first read's member checks still runs every structural check, and the
//! whole-packet digest still catches changed bodies.

use packet_core::in_memory::sample_packet;
use packet_core::{reader, Digest, ErrorCode, ReaderOptions};

fn second_pass(expected: Option<Digest>) -> ReaderOptions {
    ReaderOptions {
        expected_digest: expected,
        skip_member_digests: true,
        ..Default::default()
    }
}

#[test]
fn a_second_pass_over_the_same_bytes_verifies() {
    let packet = sample_packet();
    let digest = Digest::of(&packet);
    let first = reader::verify(&packet, ReaderOptions::default()).unwrap();
    let second = reader::verify(&packet, second_pass(Some(digest))).unwrap();
    assert_eq!(first.manifest, second.manifest);
    assert_eq!(second.digest, digest);
}

#[test]
fn a_changed_body_is_caught_by_the_packet_digest() {
    let packet = sample_packet();
    let digest = Digest::of(&packet);
    let read = reader::verify(&packet, ReaderOptions::default()).unwrap();
    // Flip the first byte of the first file's body.
    let index = read
        .manifest
        .members
        .iter()
        .position(|m| m.size > 0)
        .unwrap();
    let mut tampered = packet.clone();
    tampered[read.data_offsets[index] as usize] ^= 1;
    let e = reader::verify(&tampered, second_pass(Some(digest))).unwrap_err();
    assert_eq!(e.code(), ErrorCode::PacketDigestMismatch, "{e}");
    // Without the shortcut the member itself is named.
    let e = reader::verify(&tampered, ReaderOptions::default()).unwrap_err();
    assert_eq!(e.code(), ErrorCode::MemberDigestMismatch, "{e}");
}

#[test]
fn structural_checks_still_run() {
    let mut packet = sample_packet();
    packet.push(0);
    let digest = Digest::of(&packet);
    let e = reader::verify(&packet, second_pass(Some(digest))).unwrap_err();
    assert_eq!(e.code(), ErrorCode::TrailingData, "{e}");
}
