//! Shared by the `reader` and `reader_structured` targets: reading a packet whole and in
//! chunks, and the properties every outcome must have. The structure-aware
//! mutator writes packets the writer would refuse with packet-core's raw
//! encoder (`packet_core::raw`).
#![allow(dead_code)]

use packet_core::assembled::{Assembly, BodyHasher};
use packet_core::raw::UncheckedManifest;
use packet_core::{
    path, reader, BodyScan, Digest, Event, Limits, Reader, ReaderOptions, Step, Totals,
    VerifiedPacket, Writer,
};

/// A refusal as outcomes are compared: its code, path and offset.
pub type Refused = (&'static str, Option<String>, Option<u64>);

/// The outcome of reading: the verified packet and the bodies, or the
/// refusal.
pub type Outcome = Result<(VerifiedPacket, Vec<Vec<u8>>), Refused>;

fn refused(e: packet_core::Error) -> Refused {
    (e.code().as_str(), e.path().map(str::to_string), e.offset())
}

/// Reads `bytes` whole (`chunk_seed == 0`) or in chunks of 1 to 1500 bytes.
pub fn read(bytes: &[u8], chunk_seed: usize) -> Outcome {
    let fail = refused;
    let mut reader = Reader::new(ReaderOptions::default());
    let mut bodies: Vec<Vec<u8>> = Vec::new();
    let (mut at, mut state) = (0, chunk_seed);
    while at < bytes.len() {
        state = state.wrapping_mul(1_103_515_245).wrapping_add(12_345);
        let size = if chunk_seed == 0 {
            bytes.len()
        } else {
            1 + (state >> 8) % 1500
        };
        let input = &bytes[at..(at + size).min(bytes.len())];
        at += input.len();
        reader
            .feed_with(input, |event| {
                match event {
                    Event::MemberStart { .. } => bodies.push(Vec::new()),
                    Event::Data(d) => bodies
                        .last_mut()
                        .expect("data after a start")
                        .extend_from_slice(d),
                    _ => {}
                }
                Ok::<(), packet_core::Error>(())
            })
            .map_err(fail)?;
    }
    Ok((reader.finish().map_err(fail)?, bodies))
}

/// A /2 packet verified from its parts, as a store that keeps bodies apart
/// does: `packet.json`'s bytes, each distinct body hashed, the findings
/// assembled from the bodies scanned.
fn assemble(json: &[u8], bodies: &[Vec<u8>]) -> Result<VerifiedPacket, Refused> {
    let mut assembly = Assembly::new(json, None, &Limits::FORMAT).map_err(refused)?;
    let manifest = assembly.manifest().clone();
    let mut scan = BodyScan::new(&manifest);
    for (i, member) in manifest.members.iter().enumerate() {
        let Some(body) = member.body() else { continue };
        scan.body(&manifest, i, &bodies[i]);
        if assembly.needs(body) {
            let mut hasher = BodyHasher::new(body);
            hasher.update(&bodies[i]).map_err(refused)?;
            assembly.prove(hasher.finish().map_err(refused)?);
        }
    }
    assembly.finish(scan.finish(&manifest)).map_err(refused)
}

/// The properties: no panic, the same outcome whole and chunked, and an
/// accepted packet is the writer's encoding of what was read, is named by
/// its version's rule (a /2 packet by its `packet.json`'s bytes, a /1
/// packet by the whole file), is what verifying a /2 packet from its
/// `packet.json` and bodies gives, and keeps the format's promises
/// (canonical paths inside the roots, no two members colliding under the
/// portable key, every symlink resolving inside its root).
pub fn check(bytes: &[u8]) {
    let whole = read(bytes, 0);
    let chunked = read(bytes, bytes.len() | 1);
    match (&whole, &chunked) {
        (Ok(a), Ok(b)) => assert!(a == b, "chunking changed the events"),
        (Err(a), Err(b)) => assert_eq!(a, b, "chunking changed the error"),
        _ => panic!("chunking changed the outcome: {whole:?} / {chunked:?}"),
    }
    assert_eq!(
        reader::verify(bytes, ReaderOptions::default()).is_ok(),
        whole.is_ok()
    );
    let Ok((verified, bodies)) = whole else {
        return;
    };
    let manifest = &verified.manifest;
    let range = verified.manifest_range.clone();
    let json = &bytes[range.start as usize..range.end as usize];
    if manifest.format.named_by_manifest() {
        assert_eq!(
            verified.digest,
            Digest::of(json),
            "a /2 packet is named by its manifest"
        );
        let parts = assemble(json, &bodies).expect("its parts verify");
        assert!(
            parts == verified,
            "assembled from its parts, another packet"
        );
    } else {
        assert_eq!(
            verified.digest,
            Digest::of(bytes),
            "a /1 packet is named by its file"
        );
    }
    let mut keys: Vec<String> = Vec::new();
    for e in &manifest.members {
        assert!(
            path::check_member_path(e.path.as_bytes(), 4096).is_ok(),
            "{:?}",
            e.path
        );
        keys.push(path::portable_key(&e.path));
        if let Some(t) = &e.target() {
            let r =
                path::resolve_symlink_target(&e.path, t, 4096).expect("an accepted link resolves");
            assert_eq!(path::root_of(&r.resolved), path::root_of(&e.path));
        }
    }
    keys.sort();
    assert!(
        keys.windows(2).all(|w| w[0] != w[1]),
        "accepted colliding members"
    );
    let mut writer = Writer::new(manifest);
    let mut out = Vec::new();
    loop {
        match writer
            .next()
            .expect("the writer accepts a verified manifest")
        {
            Step::Bytes(b) => out.extend_from_slice(b),
            Step::Body { index, .. } => {
                writer.body(&bodies[index]).expect("the body fits");
                out.extend_from_slice(&bodies[index]);
            }
            Step::Done(digest) => {
                assert_eq!(
                    digest,
                    Some(verified.digest),
                    "the writer names it otherwise"
                );
                break;
            }
        }
    }
    assert!(
        out == bytes,
        "an accepted packet differs from the writer's encoding"
    );
}

/// Recomputes totals after a mutation (sometimes left stale on purpose by
/// the caller).
pub fn retotal(manifest: &mut UncheckedManifest) {
    manifest.totals = Totals::of_entries(manifest.members.iter().map(|m| &m.entry));
}
