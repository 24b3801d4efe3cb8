//! Refusals a table of hostile packets cannot state. Every hostile input
//! with one expected code and path lives in the adversarial corpus
//! (tests/adversarial/cases.json), read by every consumer; this file keeps
//! what needs a program: error offsets and chunking, every prefix and every
//! typeflag of a packet, limits tightened through `ReaderOptions`, the
//! manifest API's own entry points, and the reader's state after a refusal.
//!
//! The packets here are made by packet-core's writer and then damaged in
//! place (a byte flipped, a field rewritten, a cut).
//!
//! Runs natively and, like the `vectors` test, under wasm32 with
//! wasm-bindgen-test.

#[cfg(target_arch = "wasm32")]
use wasm_bindgen_test::wasm_bindgen_test as test;

use packet_core::in_memory::{build, Source};
use packet_core::{reader, Digest, ErrorCode as C, Limits, Manifest, ReaderOptions};

const A: &str = "workspace/a.txt";
const BLOCK: usize = 512;

fn dir(path: &str) -> Source {
    Source::Dir { path: path.into() }
}

fn file(path: &str, contents: &[u8], executable: bool) -> Source {
    Source::File {
        path: path.into(),
        contents: contents.to_vec(),
        executable,
    }
}

fn symlink(path: &str, target: &str) -> Source {
    Source::Symlink {
        path: path.into(),
        target: target.into(),
    }
}

fn packet(sources: &[Source]) -> Vec<u8> {
    build(sources, None, vec![], &Limits::FORMAT).unwrap().bytes
}

/// Directories, a plain file, an executable, an empty file and a symlink.
fn base_packet() -> Vec<u8> {
    packet(&[
        dir("workspace"),
        file(A, b"hello\n", false),
        dir("workspace/bin"),
        file("workspace/bin/run", b"#!/bin/sh\necho run\n", true),
        file("workspace/empty", b"", false),
        symlink("workspace/link", "a.txt"),
    ])
}

fn long_name() -> String {
    format!("workspace/{}", "n".repeat(120))
}

/// A packet whose second member needs a PAX header.
fn long_packet() -> Vec<u8> {
    packet(&[dir("workspace"), file(&long_name(), b"x", false)])
}

/// (offset, typeflag, name field, size) of every header block of a
/// well-formed packet, PAX headers included.
fn headers(packet: &[u8]) -> Vec<(usize, u8, String, usize)> {
    let mut out = Vec::new();
    let mut at = 0;
    while packet[at..at + BLOCK].iter().any(|&b| b != 0) {
        let b = &packet[at..at + BLOCK];
        let name = &b[..100];
        let name = &name[..name.iter().position(|&c| c == 0).unwrap_or(100)];
        let size = std::str::from_utf8(&b[124..135]).unwrap();
        let size = usize::from_str_radix(size, 8).unwrap();
        out.push((at, b[156], String::from_utf8_lossy(name).into_owned(), size));
        at += BLOCK + size.div_ceil(BLOCK) * BLOCK;
    }
    out
}

/// The header of the member whose name field is `path`: (offset, size).
fn find(packet: &[u8], path: &str) -> (usize, usize) {
    headers(packet)
        .into_iter()
        .find(|h| h.2 == path)
        .map(|h| (h.0, h.3))
        .unwrap_or_else(|| panic!("no header for {path}"))
}

/// A copy of `packet` with `value` at `offset` in the header block at `at`
/// and that header's checksum fixed.
fn patch(packet: &[u8], at: usize, offset: usize, value: &[u8]) -> Vec<u8> {
    let mut p = packet.to_vec();
    let block = &mut p[at..at + BLOCK];
    block[offset..offset + value.len()].copy_from_slice(value);
    block[148..156].fill(b' ');
    let sum: u32 = block.iter().map(|&b| u32::from(b)).sum();
    block[148..156].copy_from_slice(format!("{sum:06o}\0 ").as_bytes());
    p
}

/// Feeds `bytes` in chunks of `chunk` bytes, ignoring events.
fn feed_chunked(
    bytes: &[u8],
    options: ReaderOptions,
    chunk: usize,
) -> Result<packet_core::VerifiedPacket, packet_core::Error> {
    let mut reader = packet_core::Reader::new(options);
    for piece in bytes.chunks(chunk.max(1)) {
        reader.feed(piece)?;
    }
    reader.finish()
}

/// Verifies with `options`; the packet must be refused, and refused the same
/// way whether it is fed whole or one byte at a time.
fn refuse_with(bytes: &[u8], options: ReaderOptions) -> packet_core::Error {
    let whole = match reader::verify(bytes, options) {
        Ok(_) => panic!("the packet was accepted"),
        Err(e) => e,
    };
    let bytewise = feed_chunked(bytes, options, 1).expect_err("accepted when fed byte by byte");
    assert_eq!(whole.code(), bytewise.code(), "{whole} / {bytewise}");
    assert_eq!(whole.path(), bytewise.path());
    whole
}

fn refuse(bytes: &[u8]) -> packet_core::Error {
    refuse_with(bytes, ReaderOptions::default())
}

// ---------------------------------------------------------------- offsets and chunking

#[test]
fn refused_header_errors_carry_the_header_offset() {
    let p = base_packet();
    let (at, _) = find(&p, A);
    let mut bad = p.clone();
    bad[at + 148..at + 156].copy_from_slice(b"000001\0 ");
    let e = refuse(&bad);
    assert_eq!(e.code(), C::HeaderChecksum);
    assert_eq!(e.offset(), Some(at as u64));
}

#[test]
fn error_offsets_do_not_depend_on_chunking() {
    // Each refusal names the same byte whether the packet arrives whole or
    // in pieces: the first non-zero padding byte, a body's first byte for a
    // digest mismatch, packet.json's first byte for a manifest refusal.
    let p = base_packet();
    let (at, _) = find(&p, A);
    let (_, manifest_size) = find(&p, "packet.json");
    let mut padding = p.clone();
    padding[at + BLOCK + 300] = 1;
    let mut body = p.clone();
    body[at + BLOCK + 3] ^= 1;
    let mut manifest_padding = p.clone();
    manifest_padding[BLOCK + manifest_size + 5] = 1;
    let mut manifest = p.clone();
    manifest[BLOCK + 1] = b'x';
    let long = long_packet();
    let (pax, typeflag, _, _) = headers(&long)[2];
    assert_eq!(typeflag, b'x');
    let mut pax_padding = long.clone();
    pax_padding[pax + BLOCK + 400] = 1;
    for (bytes, code, offset) in [
        (&padding, C::PaddingNotZero, at + BLOCK + 300),
        (&body, C::MemberDigestMismatch, at + BLOCK),
        (
            &manifest_padding,
            C::PaddingNotZero,
            BLOCK + manifest_size + 5,
        ),
        (&manifest, C::ManifestInvalid, BLOCK),
        (&pax_padding, C::PaddingNotZero, pax + BLOCK + 400),
    ] {
        for chunk in [1, 3, 100, 512, 700, 100_000] {
            let e = feed_chunked(bytes, ReaderOptions::default(), chunk).unwrap_err();
            assert_eq!(
                (e.code(), e.offset()),
                (code, Some(offset as u64)),
                "chunk {chunk}: {e}"
            );
        }
    }
}

#[test]
fn every_prefix_is_truncated() {
    let p = packet(&[
        dir("workspace"),
        file("workspace/a", b"abc", false),
        symlink("workspace/l", "a"),
        file(&long_name(), &[7u8; 600], false),
    ]);
    for cut in 0..p.len() {
        let e =
            reader::verify(&p[..cut], ReaderOptions::default()).expect_err("a prefix was accepted");
        assert_eq!(e.code(), C::Truncated, "cut at {cut}: {e}");
        assert_eq!(e.offset(), Some(cut as u64));
    }
    // Cut at block boundaries and fed in odd chunk sizes as well.
    for cut in (0..p.len()).step_by(BLOCK) {
        for chunk in [1, 7, 511, 513, 4096] {
            let e = feed_chunked(&p[..cut], ReaderOptions::default(), chunk).unwrap_err();
            assert_eq!(e.code(), C::Truncated, "cut at {cut}, chunk {chunk}");
        }
    }
    reader::verify(&p, ReaderOptions::default()).unwrap();
}

#[test]
fn data_after_the_end_marker() {
    let p = base_packet();
    for extra in [&[0u8][..], &[1], &[0; BLOCK], &[0; 2 * BLOCK], b"trailing"] {
        let bytes = [p.as_slice(), extra].concat();
        let e = refuse(&bytes);
        assert_eq!((e.code(), e.path()), (C::TrailingData, None));
        assert_eq!(e.offset(), Some(p.len() as u64));
    }
    let twice = [p.clone(), p.clone()].concat();
    assert_eq!(refuse(&twice).code(), C::TrailingData);
}

#[test]
fn every_forbidden_typeflag() {
    // The table names the typeflags tar writers use; here, every byte.
    let p = base_packet();
    let (at, _) = find(&p, A);
    let mut refused = 0;
    for flag in 0..=255u8 {
        if matches!(flag, b'0' | b'2' | b'5' | b'x') {
            continue;
        }
        let e = refuse(&patch(&p, at, 156, &[flag]));
        assert_eq!(e.code(), C::TypeflagForbidden, "typeflag {flag:#x}: {e}");
        refused += 1;
    }
    assert_eq!(refused, 252);
}

// ---------------------------------------------------------------- options

#[test]
fn limits_from_reader_options() {
    let p = base_packet();
    let limits = |f: &dyn Fn(&mut Limits)| {
        let mut l = Limits::FORMAT;
        f(&mut l);
        ReaderOptions {
            limits: l,
            ..Default::default()
        }
    };
    let e = refuse_with(&p, limits(&|l| l.max_members = 5));
    assert_eq!(e.code(), C::LimitMembers);
    reader::verify(&p, limits(&|l| l.max_members = 6)).unwrap();
    let e = refuse_with(&p, limits(&|l| l.max_path_bytes = 16));
    assert_eq!(
        (e.code(), e.path()),
        (C::PathTooLong, Some("workspace/bin/run"))
    );
    reader::verify(&p, limits(&|l| l.max_path_bytes = 17)).unwrap();
    let e = refuse_with(&p, limits(&|l| l.max_packet_bytes = p.len() as u64 - 1));
    assert_eq!(e.code(), C::LimitSize);
    // Refused as soon as the manifest is read: before any member.
    assert!(e.offset().unwrap() <= find(&p, "workspace").0 as u64, "{e}");
    reader::verify(&p, limits(&|l| l.max_packet_bytes = p.len() as u64)).unwrap();
    let (_, manifest_size) = find(&p, "packet.json");
    let e = refuse_with(
        &p,
        limits(&|l| l.max_manifest_bytes = manifest_size as u64 - 1),
    );
    assert_eq!(
        (e.code(), e.path()),
        (C::LimitManifest, Some("packet.json"))
    );
    assert_eq!(e.offset(), Some(0));
    // Options cannot loosen the format's limits.
    let loose = Limits {
        max_packet_bytes: u64::MAX,
        max_members: u64::MAX,
        max_path_bytes: usize::MAX,
        max_manifest_bytes: u64::MAX,
    };
    assert_eq!(loose.clamped(), Limits::FORMAT);
}

/// The packet's name: a /2 packet's is its manifest's.
fn name_of(p: &[u8]) -> Digest {
    reader::verify(p, ReaderOptions::default()).unwrap().digest
}

#[test]
fn a_digest_computed_elsewhere_is_not_needed_by_a_2_packet() {
    let p = base_packet();
    let read_elsewhere = |bytes: &[u8], expected: Option<Digest>| {
        let mut r = packet_core::Reader::hashed_elsewhere(ReaderOptions {
            expected_digest: expected,
            ..Default::default()
        });
        r.feed(bytes)?;
        assert_eq!(r.whole_hash_needed(), Some(false));
        r.finish_with_digest(None)
    };
    let e = read_elsewhere(&p, Some(Digest::of(b"other"))).unwrap_err();
    assert_eq!(e.code(), C::PacketDigestMismatch);
    let v = read_elsewhere(&p, Some(name_of(&p))).unwrap();
    assert_eq!(v.digest, name_of(&p));
    assert_ne!(v.digest, Digest::of(&p));
    assert_eq!(read_elsewhere(&p, None).unwrap().digest, name_of(&p));
    // Member digests are still checked.
    let mut bad = p.clone();
    bad[find(&p, A).0 + BLOCK] ^= 1;
    let e = read_elsewhere(&bad, Some(name_of(&p))).unwrap_err();
    assert_eq!(e.code(), C::MemberDigestMismatch);
}

#[test]
fn the_expected_digest_is_checked() {
    let p = base_packet();
    let wrong = ReaderOptions {
        expected_digest: Some(Digest::of(b"something else")),
        ..Default::default()
    };
    assert_eq!(refuse_with(&p, wrong).code(), C::PacketDigestMismatch);
    // The whole file's hash does not name a /2 packet.
    let whole = ReaderOptions {
        expected_digest: Some(Digest::of(&p)),
        ..Default::default()
    };
    assert_eq!(refuse_with(&p, whole).code(), C::PacketDigestMismatch);
    let right = ReaderOptions {
        expected_digest: Some(name_of(&p)),
        ..Default::default()
    };
    let v = reader::verify(&p, right).unwrap();
    assert_eq!(v.size, p.len() as u64);
    let d = name_of(&p);
    assert_eq!(d.to_string().parse::<Digest>().unwrap(), d);
}

// ---------------------------------------------------------------- the manifest API

#[test]
fn more_members_than_the_format_allows() {
    let mut entries = vec![packet_core::Member::dir("workspace")];
    entries.extend((0..250_000).map(|i| {
        let path = packet_core::MemberPath::parse(&format!("workspace/f{i:06}")).unwrap();
        packet_core::Member::file(path, 0, Digest::of(b""), false)
    }));
    assert_eq!(entries.len(), 250_001);
    let e = Manifest::build(entries, None, vec![], &Limits::FORMAT).unwrap_err();
    assert_eq!(e.code(), C::LimitMembers);
}

/// The canonical manifest of the workspace and `n` directories below it.
fn directories_manifest(n: usize) -> Vec<u8> {
    let mut json = format!(
        r#"{{"format":"{}","members":[{{"mode":"0755","path":"workspace","type":"dir"}}"#,
        packet_core::FORMAT_ID
    );
    for i in 0..n {
        json.push_str(&format!(
            r#",{{"mode":"0755","path":"workspace/d{i:06}","type":"dir"}}"#
        ));
    }
    json.push_str(&format!(
        r#"],"totals":{{"bytes":0,"directories":{m},"files":0,"members":{m},"symlinks":0}}}}"#,
        m = n + 1
    ));
    json.into_bytes()
}

#[test]
fn a_manifest_listing_250_001_members_is_refused() {
    // The manifest itself, as a reader would receive it (about 13 MB of
    // JSON): refused by the member limit, not by its size.
    let json = directories_manifest(250_000);
    assert!((json.len() as u64) < Limits::FORMAT.max_manifest_bytes);
    let e = Manifest::parse(&json, &Limits::FORMAT).unwrap_err();
    assert_eq!(e.code(), C::LimitMembers, "{e}");
    // 250,000 is the limit itself.
    Manifest::parse(&directories_manifest(249_999), &Limits::FORMAT).unwrap();
}

/// `Manifest::assemble` (for a writer that checks the rules on another
/// thread while it lays the packet out) orders and totals but checks
/// nothing; `validate` then refuses exactly what `build` refuses.
#[test]
fn assemble_checks_nothing_and_validate_refuses_what_build_does() {
    let entries = || {
        vec![
            packet_core::Member::file("workspace/readme", 1, Digest::of(b"2"), false),
            packet_core::Member::dir("workspace"),
            packet_core::Member::file("workspace/README", 1, Digest::of(b"1"), false),
        ]
    };
    let assembled = Manifest::assemble(entries(), None, vec![]);
    let order: Vec<&str> = assembled.members.iter().map(|e| e.path.as_str()).collect();
    assert_eq!(order, ["workspace", "workspace/README", "workspace/readme"]);
    assert_eq!(assembled.totals.files, 2);
    let refused = assembled.validate(&Limits::FORMAT).unwrap_err();
    let built = Manifest::build(entries(), None, vec![], &Limits::FORMAT).unwrap_err();
    assert_eq!(refused.code(), C::PathCollision);
    assert_eq!(
        (refused.code(), refused.path()),
        (built.code(), built.path())
    );
    // Without the collision, the two agree on the manifest.
    let fine = || entries().into_iter().skip(1).collect::<Vec<_>>();
    let assembled = Manifest::assemble(fine(), None, vec![]);
    assembled.validate(&Limits::FORMAT).unwrap();
    assert_eq!(
        assembled,
        Manifest::build(fine(), None, vec![], &Limits::FORMAT).unwrap()
    );
}

/// Two files with one sha256 and different sizes: the later one in archive
/// order is named, whichever is larger, as a reader meets it.
#[test]
fn a_digest_size_conflict_names_the_later_member() {
    let d = Digest::of(b"x");
    let three = |sizes: [u64; 3]| {
        let mut members = vec![packet_core::Member::dir("workspace")];
        for (name, size) in ["a", "b", "c"].iter().zip(sizes) {
            members.push(packet_core::Member::file(
                packet_core::MemberPath::parse(&format!("workspace/{name}")).unwrap(),
                size,
                d,
                false,
            ));
        }
        Manifest::build(members, None, vec![], &Limits::FORMAT).map(|_| ())
    };
    for (sizes, path) in [
        ([1, 2, 2], "workspace/b"),
        ([2, 1, 1], "workspace/b"),
        ([1, 1, 2], "workspace/c"),
        ([2, 2, 1], "workspace/c"),
        ([2, 1, 2], "workspace/b"),
    ] {
        let e = three(sizes).unwrap_err();
        assert_eq!(
            (e.code(), e.path()),
            (C::DigestSizeConflict, Some(path)),
            "{sizes:?}"
        );
    }
    three([1, 1, 1]).unwrap();
}

// ---------------------------------------------------------------- the reader after a refusal

#[test]
fn a_failed_reader_stays_failed() {
    let p = base_packet();
    let mut bad = p.clone();
    let (at, _) = find(&p, A);
    bad[at + 148..at + 156].copy_from_slice(b"000001\0 ");
    let mut r = packet_core::Reader::new(ReaderOptions::default());
    let first = r.feed(&bad).unwrap_err();
    assert_eq!(r.feed(b"more").unwrap_err(), first);
    assert_eq!(r.finish().unwrap_err(), first);
}
