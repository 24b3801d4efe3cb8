//! Round trip and determinism as properties: any valid member set writes,
//! reads back identically and writes the same bytes twice; how the input
//! (or the bodies given to the writer) is chunked never changes the result,
//! for valid and for corrupted packets alike.
#![cfg(not(target_arch = "wasm32"))]

use std::collections::{BTreeMap, BTreeSet};

use packet_core::exclude::credential_rule;
use packet_core::in_memory::{build, Built, Source};
use packet_core::offsets::{header_bytes, Offsets, Piece};
use packet_core::path::portable_key;
use packet_core::{
    reader, Error, Event, Limits, Reader, ReaderOptions, Step, VerifiedPacket, Writer,
    WriterOptions,
};
use proptest::prelude::*;

/// A component: mostly short, from an alphabet that exercises the order
/// ('-' and '.' sort before '/' bytewise but after it in the format's
/// order), case, non-ASCII; sometimes long enough to need PAX.
fn component() -> impl Strategy<Value = String> {
    prop_oneof![
        8 => "[a-dA-D0-9._-]{1,8}",
        2 => "[a-c\u{e9}\u{65e5}\u{1f600}]{1,4}",
        1 => "[a-z]{90,130}",
    ]
    .prop_filter("not . or ..", |c| c != "." && c != "..")
}

#[derive(Clone, Debug)]
enum Leaf {
    Dir,
    File(Vec<u8>, bool),
    /// Index of the member to point at (modulo the member count), or a
    /// dangling name.
    Symlink(usize, bool),
}

fn leaf() -> impl Strategy<Value = Leaf> {
    prop_oneof![
        1 => Just(Leaf::Dir),
        5 => (
            prop_oneof![
                3 => proptest::collection::vec(any::<u8>(), 0..64),
                1 => proptest::collection::vec(any::<u8>(), 500..1100),
            ],
            any::<bool>()
        )
            .prop_map(|(c, x)| Leaf::File(c, x)),
        2 => (any::<usize>(), any::<bool>()).prop_map(|(i, d)| Leaf::Symlink(i, d)),
    ]
}

/// A valid member set under `workspace/`: parents before children, no
/// collisions, no credentials, symlinks as leaves pointing inside the root
/// without passing through another symlink.
fn member_set() -> impl Strategy<Value = Vec<Source>> {
    proptest::collection::vec(
        (proptest::collection::vec(component(), 1..4), leaf()),
        0..24,
    )
    .prop_map(|raw| {
        // path -> leaf; ancestors become directories.
        let mut kinds: BTreeMap<String, Leaf> = BTreeMap::new();
        let mut keys: BTreeSet<String> = BTreeSet::new();
        keys.insert(portable_key("workspace"));
        kinds.insert("workspace".into(), Leaf::Dir);
        'paths: for (components, leaf) in raw {
            let mut path = String::from("workspace");
            let n = components.len();
            for (i, c) in components.into_iter().enumerate() {
                path = format!("{path}/{c}");
                let last = i + 1 == n;
                match kinds.get(&path) {
                    Some(Leaf::Dir) => continue,
                    Some(_) => continue 'paths, // a file or symlink already here
                    None => {}
                }
                if !keys.insert(portable_key(&path)) || path.len() > 1000 {
                    continue 'paths;
                }
                let relative = &path["workspace/".len()..];
                let kind = if last { leaf.clone() } else { Leaf::Dir };
                if !matches!(kind, Leaf::Dir) && credential_rule(relative).is_some() {
                    continue 'paths;
                }
                kinds.insert(path.clone(), kind);
            }
        }
        let paths: Vec<String> = kinds
            .iter()
            .filter(|(_, k)| !matches!(k, Leaf::Symlink(..)))
            .map(|(p, _)| p.clone())
            .collect();
        kinds
            .iter()
            .map(|(path, kind)| match kind {
                Leaf::Dir => Source::Dir { path: path.clone() },
                Leaf::File(contents, executable) => Source::File {
                    path: path.clone(),
                    contents: contents.clone(),
                    executable: *executable,
                },
                Leaf::Symlink(i, dangling) => {
                    let to = if *dangling {
                        "workspace/no-such-member".to_string()
                    } else {
                        paths[i % paths.len()].clone()
                    };
                    Source::Symlink {
                        path: path.clone(),
                        target: relative_target(path, &to),
                    }
                }
            })
            .collect()
    })
}

/// The relative path from `link`'s directory to `to` (both canonical and
/// under `workspace`).
fn relative_target(link: &str, to: &str) -> String {
    let from: Vec<&str> = link.split('/').collect();
    let from = &from[..from.len() - 1];
    let to: Vec<&str> = to.split('/').collect();
    let common = from.iter().zip(&to).take_while(|(a, b)| a == b).count();
    let mut parts: Vec<&str> = vec![".."; from.len() - common];
    parts.extend(&to[common..]);
    if parts.is_empty() {
        ".".into()
    } else {
        parts.join("/")
    }
}

fn contents_of<'a>(sources: &'a [Source], path: &str) -> &'a [u8] {
    sources
        .iter()
        .find_map(|s| match s {
            Source::File {
                path: p, contents, ..
            } if p == path => Some(contents.as_slice()),
            _ => None,
        })
        .unwrap_or(&[])
}

/// Everything a read produced.
#[derive(Debug, PartialEq, Eq)]
struct Reading {
    events: Vec<String>,
    bodies: Vec<Vec<u8>>,
    verified: VerifiedPacket,
}

/// Reads `bytes` in chunks whose sizes cycle through `sizes`.
fn read(
    bytes: &[u8],
    options: ReaderOptions,
    sizes: &[usize],
) -> Result<(Reading, packet_core::Manifest), Error> {
    let mut reader = Reader::new(options);
    let mut events = Vec::new();
    let mut bodies: Vec<Vec<u8>> = Vec::new();
    let mut at = 0;
    let mut k = 0;
    while at < bytes.len() {
        let size = sizes[k % sizes.len()].max(1);
        k += 1;
        let input = &bytes[at..(at + size).min(bytes.len())];
        at += input.len();
        reader.feed_with(input, |event| {
            match event {
                Event::Data(d) => bodies
                    .last_mut()
                    .expect("data inside a member")
                    .extend_from_slice(d),
                Event::MemberStart {
                    index,
                    header_offset,
                    data_offset,
                    ..
                } => {
                    bodies.push(Vec::new());
                    events.push(format!("start {index} {header_offset} {data_offset}"));
                }
                Event::MemberEnd { index } => events.push(format!("end {index}")),
                Event::Manifest(_) => events.push("manifest".to_string()),
            }
            Ok::<(), Error>(())
        })?;
    }
    let verified = reader.finish()?;
    let manifest = verified.manifest.clone();
    Ok((
        Reading {
            events,
            bodies,
            verified,
        },
        manifest,
    ))
}

fn built(sources: &[Source]) -> Built {
    build(sources, None, vec![], &Limits::FORMAT).expect("a valid member set builds")
}

/// Writes with the writer directly, feeding each body in chunks of the
/// given sizes.
fn write_chunked(built: &Built, sources: &[Source], sizes: &[usize]) -> Vec<u8> {
    let mut writer = Writer::with_options(&built.manifest, WriterOptions::default());
    let mut out = Vec::new();
    let mut k = 0;
    loop {
        match writer.next().unwrap() {
            Step::Bytes(b) => out.extend_from_slice(b),
            Step::Body {
                index,
                size,
                offset,
            } => {
                assert_eq!(offset, out.len() as u64);
                let body = contents_of(sources, &built.manifest.members[index].path);
                assert_eq!(size, body.len() as u64);
                let mut rest = body;
                while !rest.is_empty() {
                    let n = sizes[k % sizes.len()].clamp(1, rest.len());
                    k += 1;
                    writer.body(&rest[..n]).unwrap();
                    out.extend_from_slice(&rest[..n]);
                    rest = &rest[n..];
                }
            }
            Step::Done(d) => {
                assert_eq!(d, Some(built.digest));
                break;
            }
        }
    }
    out
}

/// Writes as a caller that lays the packet out before the digests are
/// known does: members from [`Writer::after_manifest`] at their offsets,
/// then `packet.json` in front with [`packet_core::write_manifest_member`].
fn write_manifest_last(built: &Built, sources: &[Source]) -> Vec<u8> {
    let options = WriterOptions {
        packet_digest: true,
        verify_bodies: true,
    };
    let mut writer = Writer::after_manifest(&built.manifest, options);
    let start = writer.offset() as usize;
    let mut out = vec![0xAA; start];
    loop {
        match writer.next().unwrap() {
            Step::Bytes(b) => out.extend_from_slice(b),
            Step::Body { index, offset, .. } => {
                assert_eq!(offset, out.len() as u64);
                let body = contents_of(sources, &built.manifest.members[index].path);
                writer.body(body).unwrap();
                out.extend_from_slice(body);
            }
            Step::Done(d) => {
                assert_eq!(d, None, "no packet digest without packet.json");
                break;
            }
        }
    }
    let mut head = Vec::new();
    let len = packet_core::write_manifest_member(&built.manifest, &mut head);
    assert_eq!(len as usize, start);
    assert_eq!(head.len(), start);
    out[..start].copy_from_slice(&head);
    out
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 96,
        failure_persistence: Some(Box::new(proptest::test_runner::FileFailurePersistence::Off)),
        ..ProptestConfig::default()
    })]

    #[test]
    fn round_trip_and_determinism(sources in member_set()) {
        let first = built(&sources);
        // The same bytes twice, and whatever order the sources come in.
        let mut reversed = sources.clone();
        reversed.reverse();
        prop_assert!(built(&reversed).bytes == first.bytes);
        prop_assert_eq!(built(&sources).digest, first.digest);
        prop_assert_eq!(first.manifest.packet_size(), first.bytes.len() as u64);
        // Reads back: the same manifest, every body, the same digest.
        let options = ReaderOptions { expected_digest: Some(first.digest), ..Default::default() };
        let (reading, manifest) = read(&first.bytes, options, &[usize::MAX]).unwrap();
        prop_assert_eq!(&manifest, &first.manifest);
        prop_assert_eq!(reading.bodies.len(), manifest.members.len());
        for (entry, body) in manifest.members.iter().zip(&reading.bodies) {
            prop_assert!(body.as_slice() == contents_of(&sources, &entry.path), "{}", entry.path);
        }
        prop_assert_eq!(reading.verified.digest, first.digest);
        // The manifest's own JSON round-trips.
        let json = manifest.to_canonical_json();
        prop_assert_eq!(packet_core::Manifest::parse(&json, &Limits::FORMAT).unwrap(), manifest);
    }

    #[test]
    fn reader_chunking_never_changes_the_result(
        sources in member_set(),
        sizes in proptest::collection::vec(prop_oneof![4 => 1usize..16, 2 => 16usize..700, 1 => 700usize..5000], 1..8),
    ) {
        let b = built(&sources);
        let whole = read(&b.bytes, ReaderOptions::default(), &[usize::MAX]).unwrap();
        let chunked = read(&b.bytes, ReaderOptions::default(), &sizes).unwrap();
        prop_assert_eq!(whole, chunked);
    }

    #[test]
    fn writing_the_manifest_last_gives_the_same_bytes(sources in member_set()) {
        let b = built(&sources);
        prop_assert!(write_manifest_last(&b, &sources) == b.bytes);
    }

    #[test]
    fn writer_body_chunking_never_changes_the_bytes(
        sources in member_set(),
        sizes in proptest::collection::vec(1usize..700, 1..6),
    ) {
        let b = built(&sources);
        prop_assert!(write_chunked(&b, &sources, &sizes) == b.bytes);
    }

    #[test]
    fn corrupted_packets_fail_the_same_way_whatever_the_chunking(
        sources in member_set(),
        at in any::<prop::sample::Index>(),
        xor in 1u8..=255,
        cut in any::<bool>(),
        sizes in proptest::collection::vec(1usize..1100, 1..6),
    ) {
        let b = built(&sources);
        let i = at.index(b.bytes.len());
        let bytes = if cut {
            b.bytes[..i].to_vec()
        } else {
            let mut v = b.bytes.clone();
            v[i] ^= xor;
            v
        };
        let options = ReaderOptions { expected_digest: Some(b.digest), ..Default::default() };
        let whole = read(&bytes, options, &[usize::MAX]).map(|r| r.0);
        let chunked = read(&bytes, options, &sizes).map(|r| r.0);
        let bytewise = read(&bytes, options, &[1]).map(|r| r.0);
        // A changed byte or a cut is always refused.
        let e = whole.expect_err("a corrupted packet was accepted");
        let c = chunked.expect_err("accepted when chunked");
        let w = bytewise.expect_err("accepted byte by byte");
        prop_assert_eq!((e.code(), e.path()), (c.code(), c.path()));
        prop_assert_eq!((e.code(), e.path()), (w.code(), w.path()));
        prop_assert_eq!(e.offset(), c.offset(), "{} / {}", e, c);
        if cut {
            prop_assert_eq!(e.code(), packet_core::ErrorCode::Truncated);
        }
    }

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..3000)) {
        let whole = reader::verify(&bytes, ReaderOptions::default());
        let chunked = read(&bytes, ReaderOptions::default(), &[3]).map(|r| r.0);
        prop_assert_eq!(whole.is_ok(), chunked.is_ok());
        if let (Err(a), Err(b)) = (whole, chunked) {
            prop_assert_eq!(a.code(), b.code());
        }
    }

    #[test]
    fn the_tar_crate_lists_the_same_members(sources in member_set()) {
        let b = built(&sources);
        let mut archive = tar::Archive::new(b.bytes.as_slice());
        let mut listed = Vec::new();
        for entry in archive.entries().unwrap() {
            let mut entry = entry.unwrap();
            let path = String::from_utf8(entry.path_bytes().into_owned()).unwrap();
            let link = entry.link_name_bytes().map(|l| String::from_utf8(l.into_owned()).unwrap());
            let mode = entry.header().mode().unwrap();
            let mut body = Vec::new();
            std::io::Read::read_to_end(&mut entry, &mut body).unwrap();
            listed.push((path, mode, link, body));
        }
        prop_assert_eq!(listed.len(), b.manifest.members.len() + 1);
        prop_assert_eq!(listed[0].0.as_str(), "packet.json");
        prop_assert!(listed[0].3 == b.manifest.to_canonical_json());
        for (entry, (path, mode, link, body)) in b.manifest.members.iter().zip(&listed[1..]) {
            prop_assert_eq!(&entry.path, path);
            prop_assert_eq!(entry.mode().bits(), *mode);
            prop_assert_eq!(entry.target(), link.as_deref());
            prop_assert!(body.as_slice() == contents_of(&sources, &entry.path));
        }
    }

    #[test]
    fn offsets_are_the_readers_and_any_range_rebuilds_as_written(
        sources in member_set(),
        cuts in proptest::collection::vec(any::<prop::sample::Index>(), 1..6),
    ) {
        let b = built(&sources);
        let offsets = Offsets::of(&b.manifest);
        prop_assert_eq!(offsets.size(), b.bytes.len() as u64);
        let (reading, _) = read(&b.bytes, ReaderOptions::default(), &[usize::MAX]).unwrap();
        prop_assert_eq!(offsets.data_offsets(), reading.verified.data_offsets.as_slice());
        prop_assert_eq!(offsets.manifest_range(), reading.verified.manifest_range.clone());
        for (i, member) in b.manifest.members.iter().enumerate() {
            // The reader names each member's header offset as it starts.
            let start = format!("start {i} {} {}", offsets.header_offset(i).unwrap(), offsets.data_offset(i).unwrap());
            prop_assert!(reading.events.contains(&start), "{}", start);
            let (h, d) = (offsets.header_offset(i).unwrap() as usize, offsets.data_offset(i).unwrap() as usize);
            prop_assert!(b.bytes[h..d] == header_bytes(member)[..], "{}", member.path);
        }
        // Any range, rebuilt from the pieces: the format's bytes from
        // packet-core, the JSON and the bodies from where the caller keeps them.
        let json = b.manifest.to_canonical_json();
        let mut bounds: Vec<u64> = cuts.iter().map(|c| c.index(b.bytes.len() + 1) as u64).collect();
        bounds.push(0);
        bounds.push(b.bytes.len() as u64);
        bounds.sort();
        for w in bounds.windows(2) {
            let mut rebuilt = Vec::new();
            for piece in offsets.pieces(&b.manifest, w[0]..w[1]) {
                prop_assert!(!piece.is_empty());
                match piece {
                    Piece::Fill(r) => offsets.write_fill(&b.manifest, r, &mut rebuilt).unwrap(),
                    Piece::Manifest(r) => rebuilt.extend_from_slice(&json[r.start as usize..r.end as usize]),
                    Piece::Body { index, range } => {
                        let body = contents_of(&sources, &b.manifest.members[index].path);
                        rebuilt.extend_from_slice(&body[range.start as usize..range.end as usize]);
                    }
                }
            }
            prop_assert!(rebuilt == b.bytes[w[0] as usize..w[1] as usize], "bytes {}..{}", w[0], w[1]);
        }
    }
}
