//! Every way a packet can be refused, one test (at least) each, asserting
//! the exact error code and the member path where there is one. Hostile
//! packets are built header by header with `support`, independently of the
//! writer.
//!
//! Runs natively and, like the `vectors` test, under wasm32 with
//! wasm-bindgen-test: the same hostile packets get the same codes there.

mod support;

#[cfg(target_arch = "wasm32")]
use wasm_bindgen_test::wasm_bindgen_test as test;

use packet_core::in_memory::{build, Source};
use packet_core::{reader, Digest, ErrorCode as C, Limits, Manifest, ReaderOptions};
use support::*;

const A: &str = "workspace/a.txt";

fn with_limits(limits: Limits) -> ReaderOptions {
    ReaderOptions {
        limits,
        ..Default::default()
    }
}

#[test]
fn independent_encoder_matches_the_writer() {
    let members = base_members();
    let sources: Vec<Source> = members
        .iter()
        .map(|m| match m {
            Member::Dir(p) => Source::Dir { path: p.clone() },
            Member::File(p, c, x) => Source::File {
                path: p.clone(),
                contents: c.clone(),
                executable: *x,
            },
            Member::Symlink(p, t) => Source::Symlink {
                path: p.clone(),
                target: t.clone(),
            },
        })
        .collect();
    let built = build(&sources, None, vec![], &Limits::FORMAT).unwrap();
    assert_eq!(built.bytes, base_packet());
    let verified = reader::verify(&base_packet(), ReaderOptions::default()).unwrap();
    assert_eq!(verified.manifest.members.len(), members.len());
    assert_eq!(verified.digest, Digest::of(&built.bytes));
}

// ---------------------------------------------------------------- headers

#[test]
fn bad_checksum() {
    let p = base_packet();
    let at = find(&p, A).offset;
    let wrong = patch_raw(&p, at, CHKSUM, b"000001\0 ", false);
    assert_refused(&wrong, C::HeaderChecksum, None);
    let not_octal = patch_raw(&p, at, CHKSUM, b"0x1234\0 ", false);
    assert_refused(&not_octal, C::HeaderChecksum, None);
    let blank = patch_raw(&p, at, CHKSUM, b"        ", false);
    assert_refused(&blank, C::HeaderChecksum, None);
    // A flipped bit anywhere in the header breaks the sum.
    let mut flipped = p.clone();
    flipped[at + 20] ^= 1;
    assert_refused(&flipped, C::HeaderChecksum, None);
    // The manifest's header too.
    let mut flipped = p.clone();
    flipped[3] ^= 1;
    assert_refused(&flipped, C::HeaderChecksum, None);
}

#[test]
fn checksum_in_another_layout_is_not_canonical() {
    // Same value, written as seven digits and a NUL (also valid ustar).
    let p = base_packet();
    let at = find(&p, A).offset;
    let sum = checksum(&p[at..at + BLOCK]);
    let other = patch_raw(&p, at, CHKSUM, format!("{sum:07o}\0").as_bytes(), false);
    assert_refused(&other, C::HeaderNotCanonical, Some(A));
}

#[test]
fn refused_header_errors_carry_the_header_offset() {
    let p = base_packet();
    let at = find(&p, A).offset;
    let e = refuse(&patch_raw(&p, at, CHKSUM, b"000001\0 ", false));
    assert_eq!(e.offset(), Some(at as u64));
}

#[test]
fn non_ustar_magic_or_version() {
    let p = base_packet();
    let at = find(&p, A).offset;
    // GNU tar's old format: "ustar  \0".
    let gnu = patch(&patch(&p, at, MAGIC, b"ustar "), at, VERSION, b" \0");
    assert_refused(&gnu, C::HeaderMagic, None);
    // v7: no magic at all.
    let v7 = patch(&patch(&p, at, MAGIC, b""), at, VERSION, b"");
    assert_refused(&v7, C::HeaderMagic, None);
    assert_refused(&patch(&p, at, VERSION, b"01"), C::HeaderMagic, None);
    assert_refused(&patch(&p, at, MAGIC, b"USTAR\0"), C::HeaderMagic, None);
    // The manifest header as well.
    assert_refused(&patch(&p, 0, VERSION, b"0\0"), C::HeaderMagic, None);
}

#[test]
fn every_forbidden_typeflag() {
    let p = base_packet();
    let at = find(&p, A).offset;
    let mut refused = 0;
    for flag in 0..=255u8 {
        if matches!(flag, b'0' | b'2' | b'5' | b'x') {
            continue;
        }
        let e = refuse(&patch(&p, at, TYPEFLAG, &[flag]));
        assert_eq!(e.code(), C::TypeflagForbidden, "typeflag {flag:#x}: {e}");
        refused += 1;
    }
    assert_eq!(refused, 252);
    // Named ones, for the record: hardlink, char/block device, FIFO,
    // contiguous, global PAX, GNU long name/link, sparse, volume, dumpdir,
    // the old NUL "regular file" and vendor extensions 'A'..'Z'.
    for flag in *b"13467gLKSVDAXZ" {
        assert_refused(
            &patch(&p, at, TYPEFLAG, &[flag]),
            C::TypeflagForbidden,
            None,
        );
    }
    assert_refused(&patch(&p, at, TYPEFLAG, &[0]), C::TypeflagForbidden, None);
}

#[test]
fn typeflag_that_disagrees_with_the_manifest() {
    // A permitted typeflag, but not the manifest's type for the member.
    let p = base_packet();
    let e = refuse(&patch_member(&p, "workspace/bin", TYPEFLAG, b"0"));
    assert_eq!(
        (e.code(), e.path()),
        (C::MemberMismatch, Some("workspace/bin"))
    );
}

#[test]
fn size_fields_not_canonical_octal() {
    let p = base_packet();
    let at = find(&p, A).offset;
    for bad in [
        &b"0000000000 6"[..],                                // space inside
        b"00000000009\0",                                    // not octal
        b" 0000000006\0",                                    // leading space (tar's older style)
        b"0000000006 \0",                                    // trailing space before NUL
        b"000000000006",                 // 12 digits, no NUL: overflows the field
        b"\x80\0\0\0\0\0\0\0\0\0\0\x06", // GNU base-256
        b"\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xfa", // base-256 negative
        b"-0000000006\0",                // negative
        b"6\0\0\0\0\0\0\0\0\0\0\0",      // short
    ] {
        let e = refuse(&patch(&p, at, SIZE, bad));
        assert_eq!(e.code(), C::HeaderNumeric, "{bad:?}: {e}");
    }
    // Other numeric fields the same way.
    assert_refused(
        &patch(&p, at, MODE, b"0644\0\0\0\0"),
        C::HeaderNumeric,
        None,
    );
    assert_refused(&patch(&p, at, MODE, b" 000644\0"), C::HeaderNumeric, None);
    assert_refused(&patch(&p, at, UID, b"0000000 "), C::HeaderNumeric, None);
    assert_refused(
        &patch(&p, at, MTIME, b"\x80\0\0\0\0\0\0\0\0\0\0\x01"),
        C::HeaderNumeric,
        None,
    );
}

#[test]
fn sizes_that_disagree_with_the_manifest() {
    let p = base_packet();
    let at = find(&p, A).offset;
    // Smaller, larger, and the largest the field can hold (8 GiB - 1):
    // the manifest wins and nothing is read past the header.
    for size in [5u64, 7, 512, 0o77777777777] {
        let e = refuse(&patch(&p, at, SIZE, &octal(size, 12)));
        assert_eq!(
            (e.code(), e.path()),
            (C::MemberMismatch, Some(A)),
            "{size}: {e}"
        );
    }
    // A directory or symlink with a size.
    let e = refuse(&patch_member(&p, "workspace/bin", SIZE, &octal(1, 12)));
    assert_eq!(
        (e.code(), e.path()),
        (C::MemberMismatch, Some("workspace/bin"))
    );
    let e = refuse(&patch_member(&p, "workspace/link", SIZE, &octal(1, 12)));
    assert_eq!(
        (e.code(), e.path()),
        (C::MemberMismatch, Some("workspace/link"))
    );
}

#[test]
fn unused_fields_must_be_zero() {
    let p = base_packet();
    let at = find(&p, A).offset;
    let cases: Vec<(Field, &[u8])> = vec![
        (UNAME, b"root"),
        (GNAME, b"root"),
        (UID, b"0001750\0"),
        (GID, b"0001750\0"),
        (MTIME, b"14567123456\0"),
        (DEVMAJOR, b"0000001\0"),
        (DEVMINOR, b"0000001\0"),
        (PAD, b"\x01"),
        (Field(511, 1), b"x"),
    ];
    for (field, value) in cases {
        let e = refuse(&patch(&p, at, field, value));
        assert_eq!(e.code(), C::HeaderNotCanonical, "{field:?}: {e}");
    }
    // Bytes after the terminating NUL of a string field.
    let mut name = A.as_bytes().to_vec();
    name.extend_from_slice(b"\0junk");
    assert_refused(&patch(&p, at, NAME, &name), C::HeaderNotCanonical, None);
    assert_refused(&patch(&p, at, PREFIX, b"\0x"), C::HeaderNotCanonical, None);
    assert_refused(
        &patch(&p, at, LINKNAME, b"\0x"),
        C::HeaderNotCanonical,
        None,
    );
    // A link name on a regular file.
    assert_refused(
        &patch(&p, at, LINKNAME, b"x"),
        C::HeaderNotCanonical,
        Some(A),
    );
    // Numeric fields without the canonical zero padding of the writer
    // (devmajor as all-NUL, which many tars write).
    assert_refused(&patch(&p, at, DEVMAJOR, b""), C::HeaderNumeric, None);
}

#[test]
fn short_path_split_into_prefix_is_not_canonical() {
    // "workspace" + "a.txt" in prefix/name is the same path, but not its one
    // encoding: short paths live in name alone.
    let p = base_packet();
    let at = find(&p, A).offset;
    let split = patch(&patch(&p, at, NAME, b"a.txt"), at, PREFIX, b"workspace");
    assert_refused(&split, C::HeaderNotCanonical, Some(A));
}

#[test]
fn body_and_manifest_padding_must_be_zero() {
    let p = base_packet();
    let h = find(&p, A);
    let mut bad = p.clone();
    bad[h.offset + BLOCK + 6] = b'!';
    assert_refused(&bad, C::PaddingNotZero, Some(A));
    let mut bad = p.clone();
    bad[h.offset + 2 * BLOCK - 1] = 1;
    assert_refused(&bad, C::PaddingNotZero, Some(A));
    let m = find(&p, "packet.json");
    let mut bad = p.clone();
    bad[BLOCK + m.size as usize] = b' ';
    assert_refused(&bad, C::PaddingNotZero, Some("packet.json"));
}

#[test]
fn error_offsets_do_not_depend_on_chunking() {
    // Each refusal names the same byte whether the packet arrives whole or
    // in pieces: the first non-zero padding byte, a body's first byte for a
    // digest mismatch, packet.json's first byte for a manifest refusal.
    let p = base_packet();
    let h = find(&p, A);
    let m = find(&p, "packet.json");
    let mut padding = p.clone();
    padding[h.offset + BLOCK + 300] = 1;
    let mut body = p.clone();
    body[h.offset + BLOCK + 3] ^= 1;
    let mut manifest_padding = p.clone();
    manifest_padding[BLOCK + m.size as usize + 5] = 1;
    let mut manifest = p.clone();
    manifest[BLOCK + 1] = b'x';
    let long = packet(&long_members());
    let pax = headers(&long)[2].offset;
    let mut pax_padding = long.clone();
    pax_padding[pax + BLOCK + 400] = 1;
    for (bytes, code, offset) in [
        (&padding, C::PaddingNotZero, h.offset + BLOCK + 300),
        (&body, C::MemberDigestMismatch, h.offset + BLOCK),
        (
            &manifest_padding,
            C::PaddingNotZero,
            BLOCK + m.size as usize + 5,
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

// ---------------------------------------------------------------- PAX

fn long_name() -> String {
    format!("workspace/{}", "n".repeat(120))
}

fn long_members() -> Vec<Member> {
    vec![dir("workspace"), file(&long_name(), b"x")]
}

#[test]
fn the_documented_pax_use_is_accepted() {
    let p = packet(&long_members());
    assert_eq!(headers(&p)[2].typeflag, b'x');
    reader::verify(&p, ReaderOptions::default()).unwrap();
}

fn pax_packet(records: &[u8], member: &Member, name_in_header: &str) -> Vec<u8> {
    let members = vec![dir("workspace"), member.clone()];
    let mut t = Tar::new();
    t.manifest(&manifest_json(&members))
        .member(&members[0])
        .pax(records);
    let mut h = Header::new(member.typeflag(), member.mode(), member.size());
    h.set(NAME, name_in_header.as_bytes());
    t.header(&h);
    if let Member::File(_, c, _) = member {
        t.body(c);
    }
    t.end().to_vec()
}

#[test]
fn pax_with_unknown_keys() {
    let m = file(&long_name(), b"x");
    let path = pax_record("path", long_name().as_bytes());
    for key in [
        "mtime",
        "uid",
        "uname",
        "size",
        "comment",
        "SCHILY.xattr.user.x",
        "GNU.sparse.map",
        "hdrcharset",
        "atime",
    ] {
        let mut records = path.clone();
        let extra = pax_record(key, b"0");
        // Keep bytewise key order so only the key itself is at fault.
        if key.as_bytes() < b"path".as_slice() {
            records = [extra, path.clone()].concat();
        } else {
            records.extend(extra);
        }
        let e = refuse(&pax_packet(&records, &m, ""));
        assert_eq!(e.code(), C::PaxInvalid, "{key}: {e}");
    }
}

#[test]
fn pax_with_duplicate_or_unordered_keys() {
    let m = file(&long_name(), b"x");
    let path = pax_record("path", long_name().as_bytes());
    let twice = [path.clone(), path.clone()].concat();
    assert_refused(&pax_packet(&twice, &m, ""), C::PaxInvalid, None);
    let target = "t".repeat(150);
    let l = symlink(&long_name(), &target);
    let unordered = [path.clone(), pax_record("linkpath", target.as_bytes())].concat();
    assert_refused(&pax_packet(&unordered, &l, ""), C::PaxInvalid, None);
}

#[test]
fn pax_records_malformed() {
    let m = file(&long_name(), b"x");
    let good = pax_record("path", long_name().as_bytes());
    let text = String::from_utf8(good.clone()).unwrap();
    let (len, rest) = text.split_once(' ').unwrap();
    let n: usize = len.parse().unwrap();
    for bad in [
        format!("{} {rest}", n + 1), // length too long
        format!("{} {rest}", n - 1), // length too short
        format!("0{len} {rest}"),    // leading zero
        format!("{len}  {rest}"),    // extra space
        text.replace('\n', "\r"),    // no newline
        text.replacen('=', ":", 1),  // no '='
        format!("{len}{rest}"),      // no space
    ] {
        let e = refuse(&pax_packet(bad.as_bytes(), &m, ""));
        assert_eq!(e.code(), C::PaxInvalid, "{bad:?}: {e}");
    }
}

#[test]
fn pax_that_is_not_needed() {
    // A PAX path for a path that fits the ustar fields.
    let short = file("workspace/short", b"x");
    let records = pax_record("path", b"workspace/short");
    assert_refused(
        &pax_packet(&records, &short, ""),
        C::PaxInvalid,
        Some("workspace/short"),
    );
    // A PAX linkpath for a short target.
    let link = symlink("workspace/l", "a");
    let mut t = Tar::new();
    let members = vec![dir("workspace"), link.clone()];
    t.manifest(&manifest_json(&members)).member(&members[0]);
    t.pax(&pax_record("linkpath", b"a"));
    t.header(Header::for_path(b'2', "workspace/l", 0o777, 0).set(LINKNAME, b""));
    assert_refused(&t.end().to_vec(), C::PaxInvalid, Some("workspace/l"));
    // A linkpath on a regular file.
    let m = file(&long_name(), b"x");
    let records = [
        pax_record("linkpath", "t".repeat(150).as_bytes()),
        pax_record("path", long_name().as_bytes()),
    ]
    .concat();
    assert_refused(
        &pax_packet(&records, &m, ""),
        C::PaxInvalid,
        Some(long_name().as_str()),
    );
}

#[test]
fn pax_path_with_a_name_in_the_ustar_header() {
    let m = file(&long_name(), b"x");
    let records = pax_record("path", long_name().as_bytes());
    assert_refused(
        &pax_packet(&records, &m, "workspace/x"),
        C::PaxInvalid,
        None,
    );
}

#[test]
fn pax_empty_or_oversized() {
    let m = file(&long_name(), b"x");
    assert_refused(&pax_packet(b"", &m, ""), C::PaxInvalid, None);
    let huge = pax_record("path", "a".repeat(9000).as_bytes());
    assert_refused(&pax_packet(&huge, &m, ""), C::PaxInvalid, None);
}

#[test]
fn stacked_pax_headers() {
    let members = long_members();
    let records = pax_record("path", long_name().as_bytes());
    let mut t = Tar::new();
    t.manifest(&manifest_json(&members)).member(&members[0]);
    t.pax(&records).pax(&records);
    t.member(&members[1]).end();
    assert_refused(&t.bytes, C::PaxInvalid, None);
}

#[test]
fn dangling_pax_headers() {
    let members = vec![dir("workspace")];
    let records = pax_record("path", long_name().as_bytes());
    // Followed by the end marker.
    let mut t = Tar::new();
    t.manifest(&manifest_json(&members))
        .member(&members[0])
        .pax(&records)
        .end();
    assert_refused(&t.bytes, C::PaxInvalid, None);
    // Followed by nothing at all.
    let mut t = Tar::new();
    t.manifest(&manifest_json(&members))
        .member(&members[0])
        .pax(&records);
    assert_refused(&t.bytes, C::Truncated, None);
    // Before packet.json.
    let mut t = Tar::new();
    t.pax(&pax_record("path", b"packet.json"))
        .manifest(&manifest_json(&members));
    t.member(&members[0]).end();
    assert_refused(&t.bytes, C::PaxInvalid, None);
}

#[test]
fn pax_header_block_not_canonical() {
    let members = long_members();
    let records = pax_record("path", long_name().as_bytes());
    // GNU tar names PAX headers "./PaxHeaders.<pid>/<name>".
    let mut t = Tar::new();
    t.manifest(&manifest_json(&members)).member(&members[0]);
    let mut h = pax_header(records.len() as u64);
    h.set(NAME, b"./PaxHeaders/nnn");
    t.header(&h).body(&records).member(&members[1]).end();
    // Whatever follows, the non-canonical PAX header block is refused first.
    assert_refused(&t.bytes, C::HeaderNotCanonical, None);
    let mut h = pax_header(records.len() as u64);
    h.set(MODE, &octal(0o600, 8));
    let mut t = Tar::new();
    t.manifest(&manifest_json(&members))
        .member(&members[0])
        .header(&h)
        .body(&records);
    assert_refused(&t.bytes, C::HeaderNotCanonical, None);
}

#[test]
fn pax_padding_must_be_zero() {
    let p = packet(&long_members());
    let pax = headers(&p)[2].clone();
    assert_eq!(pax.typeflag, b'x');
    let mut bad = p.clone();
    bad[pax.offset + 2 * BLOCK - 1] = 1;
    assert_refused(&bad, C::PaddingNotZero, None);
}

#[test]
fn gnu_long_name_is_not_the_documented_extension() {
    let members = long_members();
    let mut t = Tar::new();
    t.manifest(&manifest_json(&members)).member(&members[0]);
    let name = long_name();
    let mut h = Header::new(b'L', 0o644, name.len() as u64 + 1);
    h.set(NAME, b"././@LongLink");
    t.header(&h).body(format!("{name}\0").as_bytes());
    t.member(&members[1]).end();
    assert_refused(&t.bytes, C::TypeflagForbidden, None);
}

// ---------------------------------------------------------------- truncation and trailing data

#[test]
fn every_prefix_is_truncated() {
    let p = packet(&[
        dir("workspace"),
        file("workspace/a", b"abc"),
        symlink("workspace/l", "a"),
        file(&long_name(), &[7u8; 600]),
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
        assert_refused(&bytes, C::TrailingData, None);
        let e = refuse(&bytes);
        assert_eq!(e.offset(), Some(p.len() as u64));
    }
    let twice = [p.clone(), p.clone()].concat();
    assert_refused(&twice, C::TrailingData, None);
}

#[test]
fn end_marker_must_be_two_zero_blocks() {
    let p = base_packet();
    let end = end_marker_offset(&p);
    // One zero block, then a header.
    let mut bad = p[..end + BLOCK].to_vec();
    bad.extend_from_slice(&p[find(&p, A).offset..find(&p, A).offset + BLOCK]);
    assert_refused(&bad, C::EndMarker, None);
    // One zero block, then garbage.
    let mut bad = p.clone();
    bad[end + BLOCK + 100] = 1;
    assert_refused(&bad, C::EndMarker, None);
    // Only one zero block.
    assert_refused(&p[..end + BLOCK], C::Truncated, None);
    // No end marker.
    assert_refused(&p[..end], C::Truncated, None);
}

// ---------------------------------------------------------------- paths

#[test]
fn bad_paths_in_the_manifest() {
    for (path, code) in [
        ("/workspace/x", C::PathAbsolute),
        ("workspace/../x", C::PathNotCanonical),
        ("workspace/./x", C::PathNotCanonical),
        ("workspace//x", C::PathNotCanonical),
        ("workspace/x/", C::PathNotCanonical),
        ("workspace/..", C::PathNotCanonical),
        ("workspace/a\u{0}b", C::PathControlChar),
        ("workspace/a\nb", C::PathControlChar),
        ("workspace/a\u{7f}b", C::PathControlChar),
        ("workspace/a\u{9b}b", C::PathControlChar),
        ("elsewhere/x", C::PathOutsideRoots),
        ("packet.json", C::PathOutsideRoots),
    ] {
        let members = vec![dir("workspace"), file(path, b"x")];
        let e = refuse(&packet_with(&manifest_json(&members), &members[..1]));
        assert_eq!((e.code(), e.path()), (code, Some(path)), "{path:?}: {e}");
        // The same rule through Manifest::build.
        let entries = vec![
            packet_core::Member::dir("workspace"),
            packet_core::Member::file(path, 1, Digest::of(b"x"), false),
        ];
        let e = Manifest::build(entries, None, vec![], &Limits::FORMAT).unwrap_err();
        assert_eq!(e.code(), code, "{path:?}");
    }
    let empty = vec![dir("workspace"), file("", b"x")];
    assert_refused(
        &packet_with(&manifest_json(&empty), &empty[..1]),
        C::PathNotCanonical,
        Some(""),
    );
}

#[test]
fn over_long_paths() {
    let path = format!("workspace/{}fff", "d/".repeat(2042));
    assert_eq!(path.len(), 4097);
    let members = vec![dir("workspace"), file(&path, b"x")];
    let e = refuse(&packet_with(&manifest_json(&members), &members[..1]));
    assert_eq!(e.code(), C::PathTooLong);
    // Exactly 4096 bytes is fine as far as the path rule goes (the missing
    // parent directories are what is refused then).
    let ok = &path[..4096];
    let members = vec![dir("workspace"), file(ok, b"x")];
    let e = refuse(&packet_with(&manifest_json(&members), &members[..1]));
    assert_eq!(e.code(), C::MemberParentMissing);
}

#[test]
fn bad_paths_in_headers() {
    let p = base_packet();
    let at = find(&p, A).offset;
    for (name, code) in [
        (&b"/workspace/a.txt"[..], C::PathAbsolute),
        (b"workspace/../a.txt", C::PathNotCanonical),
        (b"workspace/./a.txt", C::PathNotCanonical),
        (b"workspace//a.txt", C::PathNotCanonical),
        (b"workspace/a\nb", C::PathControlChar),
        (b"workspace/a\x1bb", C::PathControlChar),
        (b"workspace/\xff\xfe", C::PathNotUtf8),
        (b"elsewhere/a.txt", C::PathOutsideRoots),
        (b"", C::PathNotCanonical),
    ] {
        let e = refuse(&patch(&p, at, NAME, name));
        assert_eq!(e.code(), code, "{name:?}: {e}");
    }
    // A NUL inside the name ends the name; what follows it is refused.
    assert_refused(
        &patch(&p, at, NAME, b"workspace/a\0.txt"),
        C::HeaderNotCanonical,
        None,
    );
}

#[test]
fn non_utf8_path_in_pax() {
    let m = file(&long_name(), b"x");
    let mut bad = long_name().into_bytes();
    bad.push(0xc3);
    let records = pax_record("path", &bad);
    let e = refuse(&pax_packet(&records, &m, ""));
    assert_eq!(e.code(), C::PathNotUtf8, "{e}");
}

// ---------------------------------------------------------------- member set

#[test]
fn duplicate_members() {
    let mut members = base_members();
    members.insert(2, file(A, b"hello\n"));
    assert_refused(&packet(&members), C::MemberDuplicate, Some(A));
    // The manifest lists it once, the archive holds it twice.
    let base = base_members();
    let mut archived = base.clone();
    archived.insert(2, base[1].clone());
    assert_refused(
        &packet_with(&manifest_json(&base), &archived),
        C::MemberDuplicate,
        Some(A),
    );
}

#[test]
fn file_and_directory_at_the_same_path() {
    let members = vec![
        dir("workspace"),
        dir("workspace/x"),
        file("workspace/x", b""),
    ];
    assert_refused(&packet(&members), C::MemberDuplicate, Some("workspace/x"));
    let members = vec![
        dir("workspace"),
        file("workspace/x", b""),
        dir("workspace/x"),
    ];
    assert_refused(&packet(&members), C::MemberDuplicate, Some("workspace/x"));
}

#[test]
fn unsorted_members() {
    let mut members = base_members();
    members.swap(1, 2); // bin before a.txt
    assert_refused(&packet(&members), C::MemberUnsorted, Some(A));
    // "a-b" sorts after "a/..." in the format's order ("/" is lowest).
    let members = vec![
        dir("workspace"),
        file("workspace/a-b", b""),
        dir("workspace/a"),
        file("workspace/a/c", b""),
    ];
    assert_refused(&packet(&members), C::MemberUnsorted, Some("workspace/a"));
    // Sorted manifest, archive in another order.
    let base = base_members();
    let mut archived = base.clone();
    archived.swap(1, 2);
    assert_refused(
        &packet_with(&manifest_json(&base), &archived),
        C::MemberUnsorted,
        Some("workspace/bin"),
    );
}

#[test]
fn missing_parents_and_roots() {
    let members = vec![dir("workspace"), file("workspace/d/x", b"")];
    assert_refused(
        &packet(&members),
        C::MemberParentMissing,
        Some("workspace/d/x"),
    );
    let members = vec![
        dir("workspace"),
        file("workspace/d", b""),
        file("workspace/d/x", b""),
    ];
    assert_refused(
        &packet(&members),
        C::MemberParentMissing,
        Some("workspace/d/x"),
    );
    let members = vec![file("workspace", b"")];
    assert_refused(&packet(&members), C::MemberParentMissing, Some("workspace"));
    let members: Vec<Member> = vec![];
    assert_refused(&packet(&members), C::MemberMissing, Some("workspace"));
}

#[test]
fn escaping_symlinks() {
    for (link, target, code) in [
        ("workspace/l", "/etc/passwd", C::SymlinkAbsolute),
        ("workspace/l", "..", C::SymlinkEscapes),
        ("workspace/l", "../workspace/a.txt", C::SymlinkEscapes),
        ("workspace/d/l", "../../x", C::SymlinkEscapes),
        ("workspace/l", "d/../../x", C::SymlinkEscapes),
        ("workspace/l", "", C::SymlinkTargetInvalid),
        ("workspace/l", "a\nb", C::SymlinkTargetInvalid),
        ("workspace/l", "a\0b", C::SymlinkTargetInvalid),
    ] {
        let members = vec![dir("workspace"), dir("workspace/d"), symlink(link, target)];
        let e = refuse(&packet_with(&manifest_json(&members), &members[..2]));
        assert_eq!((e.code(), e.path()), (code, Some(link)), "{target:?}: {e}");
    }
    // From the harness root into the workspace.
    let members = vec![
        dir("harness"),
        symlink("harness/l", "../workspace"),
        dir("workspace"),
    ];
    assert_refused(
        &packet_with(&manifest_json(&members), &[]),
        C::SymlinkEscapes,
        Some("harness/l"),
    );
    // The archive's target differs from the manifest's.
    let members = vec![dir("workspace"), symlink("workspace/l", "a")];
    let archived = vec![dir("workspace"), symlink("workspace/l", "../../etc")];
    assert_refused(
        &packet_with(&manifest_json(&members), &archived),
        C::MemberMismatch,
        Some("workspace/l"),
    );
    // A symlink target over the path limit.
    let members = vec![dir("workspace"), symlink("workspace/l", &"a/".repeat(2049))];
    assert_refused(
        &packet_with(&manifest_json(&members), &[]),
        C::PathTooLong,
        Some("workspace/l"),
    );
}

#[test]
fn symlink_through_another_symlink() {
    let members = vec![
        dir("workspace"),
        dir("workspace/d"),
        symlink("workspace/l1", "d"),
        symlink("workspace/l2", "l1/x"),
    ];
    assert_refused(
        &packet(&members),
        C::SymlinkThroughSymlink,
        Some("workspace/l2"),
    );
    // A chain that escapes only through the other link: l1 -> .. from d.
    let members = vec![
        dir("workspace"),
        dir("workspace/d"),
        symlink("workspace/d/up", ".."),
        symlink("workspace/l", "d/up/d"),
    ];
    assert_refused(
        &packet(&members),
        C::SymlinkThroughSymlink,
        Some("workspace/l"),
    );
}

#[test]
fn members_below_a_symlink() {
    let members = vec![
        dir("workspace"),
        dir("workspace/d"),
        symlink("workspace/l", "d"),
        file("workspace/l/x", b"x"),
    ];
    assert_refused(
        &packet(&members),
        C::MemberBelowSymlink,
        Some("workspace/l/x"),
    );
}

#[test]
fn non_canonical_modes_in_headers() {
    let p = base_packet();
    for (path, mode) in [
        (A, 0o4755),
        (A, 0o2755),
        (A, 0o1644),
        (A, 0o600),
        (A, 0o664),
        (A, 0o744),
        (A, 0o100644),
        ("workspace/bin", 0o700),
        ("workspace/bin", 0o1755),
        ("workspace/bin", 0o2755),
        ("workspace/bin", 0o775),
        ("workspace/link", 0o755),
        ("workspace/link", 0o4777),
    ] {
        let e = refuse(&patch_member(&p, path, MODE, &octal(mode, 8)));
        assert_eq!(
            (e.code(), e.path()),
            (C::ModeNotCanonical, Some(path)),
            "{mode:o}: {e}"
        );
    }
    // Canonical, but not the manifest's.
    let e = refuse(&patch_member(&p, A, MODE, &octal(0o755, 8)));
    assert_eq!((e.code(), e.path()), (C::MemberMismatch, Some(A)));
}

#[test]
fn non_canonical_modes_in_the_manifest() {
    for (mode, kind) in [
        ("4755", "file"),
        ("0600", "file"),
        ("755", "file"),
        ("0644", "dir"),
        ("0755", "symlink"),
        ("1755", "dir"),
    ] {
        let m = match kind {
            "file" => file("workspace/x", b""),
            "dir" => dir("workspace/x"),
            _ => symlink("workspace/x", "y"),
        };
        let entry = m.entry().with("mode", Json::str(mode));
        let members = vec![dir("workspace"), m];
        let json = manifest_value(&members)
            .with("members", Json::Arr(vec![members[0].entry(), entry]))
            .to_bytes();
        let e = refuse(&packet_with(&json, &members));
        let expected = if ["0644", "0755", "0777"].contains(&mode) {
            C::ModeNotCanonical
        } else {
            C::ManifestInvalid
        };
        assert_eq!(e.code(), expected, "{mode} {kind}: {e}");
    }
    // Through the API.
    let mut e = packet_core::Member::file("workspace/x", 0, Digest::of(b""), false);
    e.mode = 0o4644;
    let err = Manifest::build(
        vec![packet_core::Member::dir("workspace"), e],
        None,
        vec![],
        &Limits::FORMAT,
    )
    .unwrap_err();
    assert_eq!(
        (err.code(), err.path()),
        (C::ModeNotCanonical, Some("workspace/x"))
    );
}

#[test]
fn non_zero_owner_and_time_fields() {
    let p = base_packet();
    for (field, value) in [
        (MTIME, octal(1_700_000_000, 12)),
        (UID, octal(1000, 8)),
        (GID, octal(1000, 8)),
        (UNAME, b"user".to_vec()),
        (GNAME, b"staff".to_vec()),
    ] {
        for path in [A, "workspace", "workspace/link", "packet.json"] {
            let e = refuse(&patch_member(&p, path, field, &value));
            assert_eq!(e.code(), C::HeaderNotCanonical, "{field:?} {path}: {e}");
        }
    }
}

// ---------------------------------------------------------------- manifest

#[test]
fn manifest_not_first() {
    let members = base_members();
    let mut t = Tar::new();
    t.member(&members[0]).manifest(&manifest_json(&members));
    for m in &members[1..] {
        t.member(m);
    }
    assert_refused(&t.end().bytes, C::ManifestNotFirst, None);
    // packet.json as a directory.
    let mut t = Tar::new();
    t.header(&Header::for_path(b'5', "packet.json", 0o755, 0))
        .end();
    assert_refused(&t.bytes, C::ManifestNotFirst, None);
    // An archive with no members at all.
    assert_refused(&Tar::new().end().bytes, C::ManifestNotFirst, None);
    // packet.json with a non-canonical header (mode 0755).
    let p = base_packet();
    assert_refused(
        &patch(&p, 0, MODE, &octal(0o755, 8)),
        C::HeaderNotCanonical,
        Some("packet.json"),
    );
}

fn manifest_refusal(json: &[u8]) -> packet_core::Error {
    let members = base_members();
    let e = refuse(&packet_with(json, &members));
    // Manifest::parse refuses it the same way.
    let direct = Manifest::parse(json, &Limits::FORMAT).unwrap_err();
    assert_eq!(e.code(), direct.code());
    e
}

#[test]
fn manifest_malformed() {
    let good = manifest_json(&base_members());
    let text = String::from_utf8(good.clone()).unwrap();
    for bad in [
        "".to_string(),
        "{".to_string(),
        "[]".to_string(),
        "null".to_string(),
        text[..text.len() - 1].to_string(),
        text.replace(
            "\"format\":\"pillbox.session-packet/1\"",
            "\"format\":\"pillbox.session-packet/2\"",
        ),
        text.replace("\"format\":\"pillbox.session-packet/1\",", ""),
        text.replace("\"size\":6", "\"size\":\"6\""),
        text.replace("\"size\":6", "\"size\":-6"),
        text.replace("\"size\":6", "\"size\":6.0"),
        text.replace("\"size\":6", "\"size\":18446744073709551616"),
        text.replace("\"type\":\"dir\"", "\"type\":\"hardlink\""),
        text.replace("\"type\":\"dir\"", "\"type\":\"directory\""),
        text.replacen("\"sha256\":\"", "\"sha256\":\"X", 1),
        text.replacen("\"sha256\":\"", "\"sha256\":\"sha256:", 1),
    ] {
        let e = manifest_refusal(bad.as_bytes());
        assert_eq!(
            (e.code(), e.path()),
            (C::ManifestInvalid, Some("packet.json")),
            "{bad}: {e}"
        );
    }
    // Invalid UTF-8 inside a string.
    let mut bytes = good.clone();
    let at = text.find("a.txt").unwrap();
    bytes[at] = 0xff;
    assert_eq!(manifest_refusal(&bytes).code(), C::ManifestInvalid);
}

#[test]
fn manifest_null_and_unknown_fields() {
    let members = base_members();
    let base = manifest_value(&members);
    let entries: Vec<Json> = members.iter().map(Member::entry).collect();
    let with_entry = |i: usize, e: Json| {
        let mut es = entries.clone();
        es[i] = e;
        base.clone().with("members", Json::Arr(es)).to_bytes()
    };
    for bad in [
        base.clone().with("harness", Json::Null).to_bytes(),
        base.clone().with("exclusions", Json::Null).to_bytes(),
        base.clone().with("extra", Json::Bool(true)).to_bytes(),
        base.clone().with("created", Json::Num(0)).to_bytes(),
        base.clone()
            .with("totals", totals(&members).with("other", Json::Num(0)))
            .to_bytes(),
        base.clone()
            .with("totals", totals(&members).without("symlinks"))
            .to_bytes(),
        base.clone().with("totals", Json::Null).to_bytes(),
        base.clone().without("totals").to_bytes(),
        base.clone().without("members").to_bytes(),
        with_entry(1, entries[1].clone().with("mtime", Json::Num(0))),
        with_entry(1, entries[1].clone().with("target", Json::Null)),
        with_entry(1, entries[1].clone().with("sha256", Json::Null)),
        with_entry(1, entries[1].clone().without("sha256")),
        with_entry(1, entries[1].clone().without("size")),
        with_entry(0, entries[0].clone().with("size", Json::Num(0))),
        with_entry(0, entries[0].clone().with("target", Json::str("x"))),
        with_entry(5, entries[5].clone().without("target")),
        with_entry(
            5,
            entries[5]
                .clone()
                .with("sha256", Json::str(&sha256_hex(b""))),
        ),
        base.clone()
            .with("exclusions", Json::Arr(vec![]))
            .to_bytes(),
        base.clone()
            .with(
                "exclusions",
                Json::Arr(vec![Json::obj(vec![
                    ("matched", Json::Num(1)),
                    ("pattern", Json::str("*.log")),
                    ("rule", Json::str("user")),
                    ("why", Json::str("x")),
                ])]),
            )
            .to_bytes(),
        base.clone()
            .with(
                "harness",
                Json::obj(vec![
                    ("kind", Json::str("codex")),
                    ("model", Json::Null),
                    ("rollout", Json::str("harness/codex/x")),
                    ("thread_id", Json::str("x")),
                ]),
            )
            .to_bytes(),
        base.clone()
            .with(
                "harness",
                Json::obj(vec![
                    ("kind", Json::str("opencode")),
                    ("rollout", Json::str("harness/opencode/x")),
                    ("thread_id", Json::str("x")),
                ]),
            )
            .to_bytes(),
    ] {
        let e = manifest_refusal(&bad);
        assert!(
            matches!(e.code(), C::ManifestInvalid | C::ManifestNotCanonical),
            "{}: {e}",
            String::from_utf8_lossy(&bad)
        );
        assert_eq!(e.path(), Some("packet.json"));
    }
}

#[test]
fn manifest_null_fields_are_invalid_not_merely_non_canonical() {
    let members = base_members();
    let base = manifest_value(&members);
    let e = manifest_refusal(&base.clone().with("harness", Json::Null).to_bytes());
    assert_eq!(e.code(), C::ManifestInvalid);
    let e = manifest_refusal(&base.with("extra", Json::Num(1)).to_bytes());
    assert_eq!(e.code(), C::ManifestInvalid);
}

#[test]
fn manifest_duplicate_keys() {
    let good = String::from_utf8(manifest_json(&base_members())).unwrap();
    let dup_top = good.replacen('{', "{\"format\":\"pillbox.session-packet/1\",", 1);
    assert_eq!(
        manifest_refusal(dup_top.as_bytes()).code(),
        C::ManifestInvalid
    );
    let dup_entry = good.replacen(
        "\"mode\":\"0755\",",
        "\"mode\":\"0755\",\"mode\":\"0755\",",
        1,
    );
    assert_eq!(
        manifest_refusal(dup_entry.as_bytes()).code(),
        C::ManifestInvalid
    );
    let dup_totals = good.replacen("\"bytes\":", "\"files\":3,\"bytes\":", 1);
    assert_eq!(
        manifest_refusal(dup_totals.as_bytes()).code(),
        C::ManifestInvalid
    );
}

#[test]
fn manifest_not_canonical() {
    let members = base_members();
    let good = String::from_utf8(manifest_json(&members)).unwrap();
    for bad in [
        format!("{good}\n"),
        format!(" {good}"),
        good.replacen(',', ", ", 1),
        good.replacen(':', ": ", 1),
        good.replace("a.txt", "a\\u002etxt"),
        good.replace("\"workspace/a.txt\"", "\"workspace/\\u0061.txt\""),
        good.replacen("\"format\"", "\"\\u0066ormat\"", 1),
        // Keys out of order.
        Json::obj_as_is(vec![
            (
                "members",
                Json::Arr(members.iter().map(Member::entry).collect()),
            ),
            ("format", Json::str("pillbox.session-packet/1")),
            ("totals", totals(&members)),
        ])
        .to_string_lossy(),
    ] {
        let e = manifest_refusal(bad.as_bytes());
        assert_eq!(
            (e.code(), e.path()),
            (C::ManifestNotCanonical, Some("packet.json")),
            "{bad}: {e}"
        );
    }
}

trait Lossy {
    fn to_string_lossy(&self) -> String;
}
impl Lossy for Json {
    fn to_string_lossy(&self) -> String {
        String::from_utf8(self.to_bytes()).unwrap()
    }
}

#[test]
fn manifest_totals_must_add_up() {
    let members = base_members();
    let json = manifest_value(&members)
        .with("totals", totals(&members).with("bytes", Json::Num(1)))
        .to_bytes();
    assert_refused(
        &packet_with(&json, &members),
        C::ManifestTotals,
        Some("packet.json"),
    );
    let json = manifest_value(&members)
        .with("totals", totals(&members).with("members", Json::Num(5)))
        .to_bytes();
    assert_refused(
        &packet_with(&json, &members),
        C::ManifestTotals,
        Some("packet.json"),
    );
}

#[test]
fn member_missing_from_or_extra_to_the_manifest() {
    let members = base_members();
    // Listed but absent (last, and in the middle).
    let archived = &members[..members.len() - 1];
    assert_refused(
        &packet_with(&manifest_json(&members), archived),
        C::MemberMissing,
        Some("workspace/link"),
    );
    let mut archived = members.clone();
    archived.remove(2);
    let e = refuse(&packet_with(&manifest_json(&members), &archived));
    assert_eq!(e.code(), C::MemberUnsorted, "{e}"); // bin/run arrives where bin was listed
                                                    // Present but not listed: after the last, and in the middle.
    let mut archived = members.clone();
    archived.push(file("workspace/zzz", b""));
    assert_refused(
        &packet_with(&manifest_json(&members), &archived),
        C::MemberUnexpected,
        Some("workspace/zzz"),
    );
    let mut archived = members.clone();
    archived.insert(2, file("workspace/b.txt", b""));
    assert_refused(
        &packet_with(&manifest_json(&members), &archived),
        C::MemberUnexpected,
        Some("workspace/b.txt"),
    );
}

#[test]
fn size_or_sha256_mismatch() {
    let members = base_members();
    // Same size, other bytes.
    let mut archived = members.clone();
    archived[1] = file(A, b"HELLO\n");
    assert_refused(
        &packet_with(&manifest_json(&members), &archived),
        C::MemberDigestMismatch,
        Some(A),
    );
    // Flip one body byte of a valid packet.
    let p = base_packet();
    let mut bad = p.clone();
    bad[find(&p, A).offset + BLOCK] ^= 0x20;
    assert_refused(&bad, C::MemberDigestMismatch, Some(A));
    // Other size: the header's size disagrees with the manifest.
    let mut archived = members.clone();
    archived[1] = file(A, b"hello, world\n");
    assert_refused(
        &packet_with(&manifest_json(&members), &archived),
        C::MemberMismatch,
        Some(A),
    );
    // An empty file whose manifest sha256 is not that of no bytes.
    let listed: Vec<Json> = members
        .iter()
        .map(|m| {
            if m.path() == "workspace/empty" {
                m.entry().with("sha256", Json::str(&sha256_hex(b"x")))
            } else {
                m.entry()
            }
        })
        .collect();
    let json = manifest_value(&members)
        .with("members", Json::Arr(listed))
        .to_bytes();
    assert_refused(
        &packet_with(&json, &members),
        C::MemberDigestMismatch,
        Some("workspace/empty"),
    );
}

// ---------------------------------------------------------------- limits

#[test]
fn limits_from_reader_options() {
    let p = base_packet();
    let limits = |f: &dyn Fn(&mut Limits)| {
        let mut l = Limits::FORMAT;
        f(&mut l);
        with_limits(l)
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
    assert!(
        e.offset().unwrap() <= find(&p, "workspace").offset as u64,
        "{e}"
    );
    reader::verify(&p, limits(&|l| l.max_packet_bytes = p.len() as u64)).unwrap();
    let m = find(&p, "packet.json");
    let e = refuse_with(&p, limits(&|l| l.max_manifest_bytes = m.size - 1));
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

#[test]
fn declared_size_over_the_format_limit_is_refused_before_any_body() {
    // One file declared just over 1 GiB; the packet stops after its header,
    // so reading a body would end in `truncated`, not `limit_size`.
    let size = (1u64 << 30) + 1;
    let entry = Json::obj(vec![
        ("mode", Json::str("0644")),
        ("path", Json::str("workspace/big")),
        ("sha256", Json::str(&sha256_hex(b""))),
        ("size", Json::Num(size)),
        ("type", Json::str("file")),
    ]);
    let json = Json::obj(vec![
        ("format", Json::str("pillbox.session-packet/1")),
        ("members", Json::Arr(vec![dir("workspace").entry(), entry])),
        (
            "totals",
            Json::obj(vec![
                ("bytes", Json::Num(size)),
                ("directories", Json::Num(1)),
                ("files", Json::Num(1)),
                ("members", Json::Num(2)),
                ("symlinks", Json::Num(0)),
            ]),
        ),
    ])
    .to_bytes();
    let mut t = Tar::new();
    t.manifest(&json).member(&dir("workspace"));
    t.header(&Header::for_path(b'0', "workspace/big", 0o644, size));
    let e = refuse(&t.bytes);
    assert_eq!((e.code(), e.path()), (C::LimitSize, Some("workspace/big")));
    // Two files that fit alone but not together.
    let half = 600u64 << 20;
    let entry = |p: &str| {
        Json::obj(vec![
            ("mode", Json::str("0644")),
            ("path", Json::str(p)),
            ("sha256", Json::str(&sha256_hex(b""))),
            ("size", Json::Num(half)),
            ("type", Json::str("file")),
        ])
    };
    let json = Json::obj(vec![
        ("format", Json::str("pillbox.session-packet/1")),
        (
            "members",
            Json::Arr(vec![
                dir("workspace").entry(),
                entry("workspace/a"),
                entry("workspace/b"),
            ]),
        ),
        (
            "totals",
            Json::obj(vec![
                ("bytes", Json::Num(2 * half)),
                ("directories", Json::Num(1)),
                ("files", Json::Num(2)),
                ("members", Json::Num(3)),
                ("symlinks", Json::Num(0)),
            ]),
        ),
    ])
    .to_bytes();
    let mut t = Tar::new();
    t.manifest(&json);
    let e = refuse(&t.bytes);
    assert_eq!(e.code(), C::LimitSize);
    assert_eq!(
        Manifest::parse(&json, &Limits::FORMAT).unwrap_err().code(),
        C::LimitSize
    );
}

#[test]
fn more_members_than_the_format_allows() {
    let mut entries = vec![packet_core::Member::dir("workspace")];
    entries.extend((0..250_000).map(|i| {
        packet_core::Member::file(format!("workspace/f{i:06}"), 0, Digest::of(b""), false)
    }));
    assert_eq!(entries.len(), 250_001);
    let e = Manifest::build(entries, None, vec![], &Limits::FORMAT).unwrap_err();
    assert_eq!(e.code(), C::LimitMembers);
}

#[test]
fn a_manifest_listing_250_001_members_is_refused() {
    // The manifest itself, as a reader would receive it (about 13 MB of
    // JSON): refused by the member limit, not by its size.
    let mut members = vec![dir("workspace")];
    members.extend((0..250_000).map(|i| dir(&format!("workspace/d{i:06}"))));
    let json = manifest_json(&members);
    assert!((json.len() as u64) < Limits::FORMAT.max_manifest_bytes);
    let e = Manifest::parse(&json, &Limits::FORMAT).unwrap_err();
    assert_eq!(e.code(), C::LimitMembers, "{e}");
    // Through the reader, with the manifest alone (no member follows).
    let mut t = Tar::new();
    t.manifest(&json);
    let e = reader::verify(&t.bytes, ReaderOptions::default()).unwrap_err();
    assert_eq!(e.code(), C::LimitMembers);
    // 250,000 is the limit itself.
    members.pop();
    Manifest::parse(&manifest_json(&members), &Limits::FORMAT).unwrap();
}

#[test]
fn a_digest_computed_elsewhere_is_still_compared_with_the_expected_one() {
    let p = base_packet();
    let read_elsewhere = |bytes: &[u8], expected: Option<Digest>| {
        let mut r = packet_core::Reader::hashed_elsewhere(ReaderOptions {
            expected_digest: expected,
            ..Default::default()
        });
        r.feed(bytes)?;
        r.finish_with_digest(Digest::of(bytes))
    };
    let e = read_elsewhere(&p, Some(Digest::of(b"other"))).unwrap_err();
    assert_eq!(e.code(), C::PacketDigestMismatch);
    let v = read_elsewhere(&p, Some(Digest::of(&p))).unwrap();
    assert_eq!(v.digest, Digest::of(&p));
    assert_eq!(read_elsewhere(&p, None).unwrap().digest, Digest::of(&p));
    // Member digests are still checked, before the packet's.
    let mut bad = p.clone();
    bad[find(&p, A).offset + BLOCK] ^= 1;
    let e = read_elsewhere(&bad, Some(Digest::of(&p))).unwrap_err();
    assert_eq!(e.code(), C::MemberDigestMismatch);
}

#[test]
fn manifest_over_its_limit_is_refused_from_the_header() {
    // packet.json declaring 64 MiB + 1: refused before its body is read.
    let mut t = Tar::new();
    t.header(&Header::for_path(
        b'0',
        "packet.json",
        0o644,
        (64 << 20) + 1,
    ));
    assert_refused(&t.bytes, C::LimitManifest, Some("packet.json"));
}

#[test]
fn digest_mismatch() {
    let p = base_packet();
    let options = ReaderOptions {
        expected_digest: Some(Digest::of(b"something else")),
        ..Default::default()
    };
    let e = refuse_with(&p, options);
    assert_eq!(e.code(), C::PacketDigestMismatch);
    let right = ReaderOptions {
        expected_digest: Some(Digest::of(&p)),
        ..Default::default()
    };
    let v = reader::verify(&p, right).unwrap();
    assert_eq!(v.digest, Digest::of(&p));
    assert_eq!(v.size, p.len() as u64);
    // Digest syntax.
    for bad in [
        "sha256:".to_string(),
        format!("sha256:{}", "A".repeat(64)),
        format!("sha256:{}", "0".repeat(63)),
        format!("sha256:{}", "0".repeat(65)),
        format!("SHA256:{}", "0".repeat(64)),
        "0".repeat(64),
    ] {
        let e = bad.parse::<Digest>().unwrap_err();
        assert_eq!(e.code(), C::DigestSyntax, "{bad}");
    }
    let d = Digest::of(&p);
    assert_eq!(d.to_string().parse::<Digest>().unwrap(), d);
}

// ---------------------------------------------------------------- credentials, collisions, harness

#[test]
fn credential_files_are_refused() {
    for (path, contents) in [
        ("workspace/.netrc", &b"machine x login y password z"[..]),
        ("workspace/sub/.git-credentials", b"https://u:p@host"),
        ("workspace/.ssh/id_ed25519", b"key"),
        ("workspace/.codex/auth.json", b"{}"),
        ("workspace/.aws/credentials", b"[default]"),
    ] {
        let mut members = vec![dir("workspace")];
        let mut parent = String::from("workspace");
        for comp in path
            .split('/')
            .skip(1)
            .collect::<Vec<_>>()
            .split_last()
            .unwrap()
            .1
        {
            parent = format!("{parent}/{comp}");
            members.push(dir(&parent));
        }
        members.push(file(path, contents));
        assert_refused(&packet(&members), C::CredentialInPacket, Some(path));
    }
    // As a symlink, too.
    let members = vec![
        dir("workspace"),
        file("workspace/x", b""),
        symlink("workspace/.netrc", "x"),
    ];
    assert_refused(
        &packet(&members),
        C::CredentialInPacket,
        Some("workspace/.netrc"),
    );
    // Under the harness root: Codex's login file.
    let id = "0199a213-81c0-7800-8aa1-bbab2a035a53";
    let rollout = format!("harness/codex/sessions/rollout-{id}.jsonl");
    let members = vec![
        dir("harness"),
        dir("harness/codex"),
        file("harness/codex/auth.json", b"{}"),
        dir("harness/codex/sessions"),
        file(&rollout, b"{}\n"),
        dir("workspace"),
    ];
    let json = manifest_value(&members)
        .with(
            "harness",
            Json::obj(vec![
                ("kind", Json::str("codex")),
                ("rollout", Json::str(&rollout)),
                ("thread_id", Json::str(id)),
            ]),
        )
        .to_bytes();
    assert_refused(
        &packet_with(&json, &members),
        C::CredentialInPacket,
        Some("harness/codex/auth.json"),
    );
    // build() refuses it too.
    let packet_core::WriteError::Refused(e) = build(
        &[
            Source::Dir {
                path: "workspace".into(),
            },
            Source::File {
                path: "workspace/.netrc".into(),
                contents: vec![],
                executable: false,
            },
        ],
        None,
        vec![],
        &Limits::FORMAT,
    )
    .unwrap_err() else {
        panic!("build() was driven out of order");
    };
    assert_eq!(
        (e.code(), e.path()),
        (C::CredentialInPacket, Some("workspace/.netrc"))
    );
}

#[test]
fn case_and_normalisation_collisions() {
    for (a, b) in [
        ("workspace/README", "workspace/readme"),
        ("workspace/Makefile", "workspace/makefile"),
        ("workspace/caf\u{e9}", "workspace/cafe\u{301}"),
        ("workspace/\u{212a}", "workspace/k"),
        ("workspace/a\u{200d}b", "workspace/ab"),
    ] {
        let mut members = vec![dir("workspace"), file(a, b"1"), file(b, b"2")];
        members[1..].sort_by(|x, y| packet_core::path::compare(x.path(), y.path()));
        let e = refuse(&packet(&members));
        assert_eq!(e.code(), C::PathCollision, "{a:?} {b:?}: {e}");
        assert!(e.path() == Some(a) || e.path() == Some(b));
    }
    // A directory and a file that collide.
    let members = vec![
        dir("workspace"),
        dir("workspace/Src"),
        file("workspace/src", b""),
    ];
    assert_refused(&packet(&members), C::PathCollision, Some("workspace/src"));
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

#[test]
fn harness_descriptor_inconsistent() {
    let id = "0199a213-81c0-7800-8aa1-bbab2a035a53";
    let rollout = format!("harness/codex/sessions/rollout-2026-11-30T10-00-00-{id}.jsonl");
    let members = vec![
        dir("harness"),
        dir("harness/codex"),
        dir("harness/codex/sessions"),
        file(&rollout, b"{}\n"),
        dir("workspace"),
    ];
    let harness = |kind: &str, rollout: &str, thread: &str| {
        manifest_value(&members)
            .with(
                "harness",
                Json::obj(vec![
                    ("kind", Json::str(kind)),
                    ("rollout", Json::str(rollout)),
                    ("thread_id", Json::str(thread)),
                ]),
            )
            .to_bytes()
    };
    reader::verify(
        &packet_with(&harness("codex", &rollout, id), &members),
        ReaderOptions::default(),
    )
    .unwrap();
    for json in [
        manifest_json(&members),
        harness("codex", &rollout, &id.to_uppercase()),
        harness("codex", &rollout, "0199a213-81c0-7800-8aa1-bbab2a035a54"),
        harness("claude", &rollout, id),
        harness("codex", "harness/codex/sessions", id),
        harness("codex", "harness/codex/missing.jsonl", id),
    ] {
        let e = refuse(&packet_with(&json, &members));
        assert_eq!(
            e.code(),
            C::HarnessInvalid,
            "{}: {e}",
            String::from_utf8_lossy(&json)
        );
    }
}

#[test]
fn exclusions_malformed() {
    let members = base_members();
    let excl = |items: Vec<(u64, &str, &str)>| {
        manifest_value(&members)
            .with(
                "exclusions",
                Json::Arr(
                    items
                        .into_iter()
                        .map(|(n, p, r)| {
                            Json::obj(vec![
                                ("matched", Json::Num(n)),
                                ("pattern", Json::str(p)),
                                ("rule", Json::str(r)),
                            ])
                        })
                        .collect(),
                ),
            )
            .to_bytes()
    };
    let ok = excl(vec![(1, "**/.netrc", "netrc"), (2, "*.log", "user")]);
    reader::verify(&packet_with(&ok, &members), ReaderOptions::default()).unwrap();
    for bad in [
        excl(vec![(0, "*.log", "user")]),
        excl(vec![(1, "", "user")]),
        excl(vec![(1, "*.log", "")]),
        excl(vec![(1, "*.log", "user"), (1, "*.log", "user")]),
        excl(vec![(2, "*.log", "user"), (1, "**/.netrc", "netrc")]),
    ] {
        let e = refuse(&packet_with(&bad, &members));
        assert_eq!(
            (e.code(), e.path()),
            (C::ManifestInvalid, Some("packet.json")),
            "{}",
            String::from_utf8_lossy(&bad)
        );
    }
}

#[test]
fn a_failed_reader_stays_failed() {
    let p = base_packet();
    let bad = patch_raw(&p, find(&p, A).offset, CHKSUM, b"000001\0 ", false);
    let mut r = packet_core::Reader::new(ReaderOptions::default());
    let first = r.feed(&bad).unwrap_err();
    assert_eq!(r.feed(b"more").unwrap_err(), first);
    assert_eq!(r.finish().unwrap_err(), first);
}
