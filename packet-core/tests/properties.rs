//! Round trip and determinism as properties: any valid member set writes,
//! reads back identically and writes the same bytes twice; how the input
//! (or the bodies given to the writer) is chunked never changes the result,
//! for valid and for corrupted packets alike.
//!
//! And the property the format rests on (docs/session-packet.md §9): a
//! packet the reader accepts, however it was made, is exactly what the
//! writer makes of the manifest and bodies read, and a /2 packet's digest
//! is the SHA-256 of its `packet.json`. So a /2 packet's name determines
//! every byte of it, bodies through their digests; and verifying a /2
//! packet from its `packet.json` and bodies (`assembled::Assembly`) gives
//! the reader's verdict.
#![cfg(not(target_arch = "wasm32"))]

use std::collections::{BTreeMap, BTreeSet};

use packet_core::assembled::{Assembly, BodyHasher};
use packet_core::exclude::credential_rule;
use packet_core::in_memory::{build, build_as, Built, Source};
use packet_core::offsets::{header_bytes, Offsets, Piece};
use packet_core::path::portable_key;
use packet_core::{
    reader, BodyScan, Digest, Error, Event, Format, Limits, Manifest, Reader, ReaderOptions, Step,
    VerifiedPacket, Writer, WriterOptions,
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

fn built_as(format: Format, sources: &[Source]) -> Built {
    build_as(format, sources, None, vec![], &Limits::FORMAT).expect("a valid member set builds")
}

/// `packet.json`'s bytes in a packet the reader accepted.
fn manifest_json<'p>(packet: &'p [u8], verified: &VerifiedPacket) -> &'p [u8] {
    let range = &verified.manifest_range;
    &packet[range.start as usize..range.end as usize]
}

/// What the writer makes of a manifest and the bodies of its members, and
/// the digest it names the packet by.
fn write(manifest: &Manifest, bodies: &[Vec<u8>]) -> (Vec<u8>, Option<Digest>) {
    let mut writer = Writer::new(manifest);
    let mut out = Vec::new();
    loop {
        match writer
            .next()
            .expect("the writer takes a manifest the reader accepted")
        {
            Step::Bytes(b) => out.extend_from_slice(b),
            Step::Body { index, .. } => {
                writer
                    .body(&bodies[index])
                    .expect("the body read fits its member");
                out.extend_from_slice(&bodies[index]);
            }
            Step::Done(digest) => return (out, digest),
        }
    }
}

/// A change to a packet's bytes.
#[derive(Clone, Debug)]
enum Mutation {
    /// One byte changed.
    Flip(prop::sample::Index, u8),
    /// Two blocks exchanged.
    Swap(prop::sample::Index, prop::sample::Index),
    /// A block copied in front of another: a header spliced in, say.
    Copy(prop::sample::Index, prop::sample::Index),
    /// A block removed.
    Drop(prop::sample::Index),
    /// The packet cut.
    Cut(prop::sample::Index),
    /// A run of blocks replaced by the same blocks of the twin packet (the
    /// same members, one body changed): its header, body or `packet.json`
    /// spliced in.
    Splice(prop::sample::Index, usize),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    use prop::sample::Index;
    prop_oneof![
        2 => (any::<Index>(), 1u8..=255).prop_map(|(i, x)| Mutation::Flip(i, x)),
        2 => (any::<Index>(), any::<Index>()).prop_map(|(a, b)| Mutation::Swap(a, b)),
        1 => (any::<Index>(), any::<Index>()).prop_map(|(a, b)| Mutation::Copy(a, b)),
        1 => any::<Index>().prop_map(Mutation::Drop),
        1 => any::<Index>().prop_map(Mutation::Cut),
        3 => (any::<Index>(), 1usize..4).prop_map(|(i, n)| Mutation::Splice(i, n)),
    ]
}

/// `bytes` with the mutations applied in turn; `twin` is the packet the
/// splices take blocks from.
fn mutated(bytes: &[u8], twin: &[u8], mutations: &[Mutation]) -> Vec<u8> {
    const BLOCK: usize = 512;
    let mut p = bytes.to_vec();
    for m in mutations {
        let blocks = p.len() / BLOCK;
        match m {
            Mutation::Flip(at, xor) if !p.is_empty() => {
                let i = at.index(p.len());
                p[i] ^= xor;
            }
            Mutation::Swap(a, b) if blocks > 0 => {
                let (x, y) = (a.index(blocks) * BLOCK, b.index(blocks) * BLOCK);
                for i in 0..BLOCK {
                    p.swap(x + i, y + i);
                }
            }
            Mutation::Copy(from, to) if blocks > 0 => {
                let from = from.index(blocks) * BLOCK;
                let block = p[from..from + BLOCK].to_vec();
                let to = to.index(blocks + 1) * BLOCK;
                p.splice(to..to, block);
            }
            Mutation::Drop(at) if blocks > 0 => {
                let at = at.index(blocks) * BLOCK;
                p.drain(at..at + BLOCK);
            }
            Mutation::Cut(at) => p.truncate(at.index(p.len() + 1)),
            Mutation::Splice(at, n) if blocks > 0 => {
                let start = at.index(blocks) * BLOCK;
                let end = (start + n * BLOCK).min(p.len()).min(twin.len());
                if start < end {
                    p[start..end].copy_from_slice(&twin[start..end]);
                }
            }
            _ => {}
        }
    }
    p
}

/// `sources` with the first non-empty file's first byte changed: the twin
/// packet's members, one body apart.
fn twin_of(sources: &[Source], xor: u8) -> Vec<Source> {
    let mut twin = sources.to_vec();
    if let Some(contents) = twin.iter_mut().find_map(|s| match s {
        Source::File { contents, .. } if !contents.is_empty() => Some(contents),
        _ => None,
    }) {
        contents[0] ^= xor;
    }
    twin
}

/// A verdict as two ways of verifying are compared: the packet, or the
/// code, path and offset of the refusal.
fn verdict(
    result: Result<VerifiedPacket, Error>,
) -> Result<VerifiedPacket, (&'static str, Option<String>, Option<u64>)> {
    result.map_err(|e| (e.code().as_str(), e.path().map(str::to_string), e.offset()))
}

/// A /2 packet verified from its parts, as a store that keeps bodies apart
/// does: `packet.json`, then each distinct body hashed in member order
/// (`body(i)` is what the store holds for member `i`), and the findings
/// assembled from the bodies scanned.
fn assembled(
    json: &[u8],
    expected: Option<Digest>,
    body: impl Fn(usize) -> Vec<u8>,
) -> Result<VerifiedPacket, Error> {
    let mut assembly = Assembly::new(json, expected, &Limits::FORMAT)?;
    let manifest = assembly.manifest().clone();
    let mut scan = BodyScan::new(&manifest);
    for (i, member) in manifest.members.iter().enumerate() {
        let Some(wanted) = member.body() else {
            continue;
        };
        let bytes = body(i);
        scan.body(&manifest, i, &bytes);
        if assembly.needs(wanted) {
            let mut hasher = BodyHasher::new(wanted);
            let proof = hasher
                .update(&bytes)
                .and_then(|()| hasher.finish())
                .map_err(|e| assembly.refuse_body(wanted, e))?;
            assembly.prove(proof);
        }
    }
    assembly.finish(scan.finish(&manifest))
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
    let named_by_manifest = built.manifest.format.named_by_manifest();
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
                // A /2 packet's name is its manifest's, known before
                // packet.json is written; a /1 packet's needs the whole file.
                if named_by_manifest {
                    assert_eq!(d, Some(built.digest));
                } else {
                    assert_eq!(d, None, "no /1 packet digest without packet.json");
                }
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
        for format in Format::ALL {
            let b = built_as(format, &sources);
            prop_assert!(write_manifest_last(&b, &sources) == b.bytes, "{:?}", format);
        }
    }

    /// The property the format rests on: whatever the bytes (a valid
    /// packet, or one with bytes flipped, blocks swapped, copied or
    /// dropped, cut, or blocks of a twin packet spliced in), a packet the
    /// reader accepts is exactly the writer's encoding of the manifest and
    /// bodies it read, and is named by its version's rule: a /2 packet by
    /// its packet.json's bytes, a /1 packet by the whole file.
    #[test]
    fn an_accepted_packet_is_the_writers_encoding_and_its_manifest_names_it(
        sources in member_set(),
        v1 in prop::bool::weighted(0.25),
        twin_xor in 1u8..=255,
        mutations in proptest::collection::vec(mutation(), 0..4),
    ) {
        let format = if v1 { Format::V1 } else { Format::V2 };
        let b = built_as(format, &sources);
        let twin = built_as(format, &twin_of(&sources, twin_xor));
        let bytes = mutated(&b.bytes, &twin.bytes, &mutations);
        let Ok((reading, manifest)) = read(&bytes, ReaderOptions::default(), &[usize::MAX]) else {
            return Ok(());
        };
        let (written, digest) = write(&manifest, &reading.bodies);
        prop_assert!(written == bytes, "accepted bytes the writer does not write");
        prop_assert_eq!(digest, Some(reading.verified.digest));
        let json = manifest_json(&bytes, &reading.verified);
        prop_assert!(json == manifest.to_canonical_json().as_slice());
        if manifest.format.named_by_manifest() {
            prop_assert_eq!(reading.verified.digest, Digest::of(json));
            prop_assert_eq!(reading.verified.digest, manifest.json_digest());
        } else {
            prop_assert_eq!(reading.verified.digest, Digest::of(&bytes));
        }
        // An accepted packet is the original or its twin, whole.
        prop_assert!(bytes == b.bytes || bytes == twin.bytes);
    }

    /// Verifying a /2 packet from its packet.json and its bodies gives the
    /// reader's verdict on the packet: the same verified packet, or the
    /// same refusal (code, path, offset), whichever bodies are corrupted
    /// and whatever digest is expected.
    #[test]
    fn an_assembled_packet_has_the_readers_verdict(
        sources in member_set(),
        corrupt in proptest::collection::vec((any::<prop::sample::Index>(), any::<prop::sample::Index>(), 1u8..=255), 0..3),
        expected in 0u8..4,
    ) {
        let b = built(&sources);
        let manifest = &b.manifest;
        let offsets = Offsets::of(manifest);
        let data = offsets.data_offsets();
        // Each distinct body as the store holds it; corruption changes a
        // body's bytes wherever members share it, in the packet and the store.
        let mut store: BTreeMap<packet_core::Body, Vec<u8>> = BTreeMap::new();
        for m in &manifest.members {
            if let Some(body) = m.body() {
                store.insert(body, contents_of(&sources, &m.path).to_vec());
            }
        }
        let keys: Vec<packet_core::Body> = store.keys().copied().collect();
        if !keys.is_empty() {
            for (which, at, xor) in &corrupt {
                let bytes = store.get_mut(&keys[which.index(keys.len())]).unwrap();
                let i = at.index(bytes.len());
                bytes[i] ^= xor;
            }
        }
        let mut packet = b.bytes.clone();
        for (i, m) in manifest.members.iter().enumerate() {
            if let Some(body) = m.body() {
                let at = data[i] as usize;
                packet[at..at + body.size as usize].copy_from_slice(&store[&body]);
            }
        }
        let expected = match expected {
            0 => None,
            1 => Some(b.digest),
            2 => Some(Digest::of(&b.bytes)),
            _ => Some(Digest::of(b"another packet")),
        };
        let options = ReaderOptions { expected_digest: expected, ..Default::default() };
        let read = verdict(reader::verify(&packet, options));
        let json = manifest.to_canonical_json();
        let body = |i: usize| manifest.members[i].body().map(|k| store[&k].clone()).unwrap_or_default();
        let parts = verdict(assembled(&json, expected, body));
        prop_assert_eq!(&parts, &read);
        // Corrupted bodies are always found.
        let corrupted = keys.iter().any(|k| Digest::of(&store[k]) != k.sha256);
        prop_assert_eq!(read.is_ok(), !corrupted && expected.is_none_or(|e| e == b.digest));
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
