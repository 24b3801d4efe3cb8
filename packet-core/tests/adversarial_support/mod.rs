//! The adversarial corpus (tests/adversarial), compiled in so the same
//! table runs natively and under wasm32: `cases.json` holds every case's
//! expected outcome and its name (`digest`), `corpus.rs` the packet bytes
//! in the same order (some gzip-compressed); each case's bytes are checked
//! against its sha256.
//!
//! Besides the reader, three more ways into packet-core meet the same
//! cases: `packet.json`'s body parsed alone (`Manifest::parse`); for a case
//! whose row carries the member set behind its honest manifest (`build`),
//! packing that member set; and for an accepted /2 packet, its verification
//! from `packet.json` and its bodies (`assembled::Assembly`).

use std::io::Read;

use packet_core::assembled::{Assembly, BodyHasher};
use packet_core::{
    reader, BodyScan, Digest, ErrorCode, Event, Format, Limits, Manifest, Reader, ReaderOptions,
    Step, VerifiedPacket, Writer,
};
use serde_json::Value;

#[path = "../../../tests/adversarial/corpus.rs"]
mod corpus;

#[allow(dead_code)]
#[path = "../../../tests/vectors/src/description.rs"]
mod description;

const CASES: &str = include_str!("../../../tests/adversarial/cases.json");

/// One row of the table.
pub struct Case {
    pub id: String,
    pub group: String,
    /// `None` for a packet the format accepts.
    pub code: Option<String>,
    pub path: Option<String>,
    /// The packet's name, by its version's rule.
    pub digest: Digest,
    /// The digest to give as expected instead (a case about the name).
    pub expected_digest: Option<String>,
    /// The member set that packing must refuse as the reader refuses the
    /// packet.
    pub build: Option<description::Description>,
    /// What a reader reports about an accepted packet (nothing unless the
    /// row says).
    pub findings: Value,
    pub sha256: String,
    pub bytes: Vec<u8>,
}

fn gunzip(stored: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(stored)
        .read_to_end(&mut out)
        .expect("a gzip-compressed case");
    out
}

/// Every case, in the table's order, with its bytes.
pub fn cases() -> Vec<Case> {
    let table: Value = serde_json::from_str(CASES).expect("cases.json is JSON");
    let rows = table["cases"].as_array().expect("a cases array");
    assert_eq!(
        rows.len(),
        corpus::PACKETS.len(),
        "corpus.rs and cases.json disagree: regenerate with tests/adversarial/generate.py"
    );
    rows.iter()
        .zip(corpus::PACKETS)
        .map(|(row, stored)| {
            let id = row["id"].as_str().unwrap();
            let file = row["file"].as_str().unwrap();
            let bytes = if file.ends_with(".gz") {
                gunzip(stored)
            } else {
                stored.to_vec()
            };
            let expect = &row["expect"];
            let refused = expect["outcome"] == "refuse";
            assert!(refused || expect["outcome"] == "accept", "{id}: outcome");
            Case {
                id: id.to_string(),
                group: row["group"].as_str().unwrap().to_string(),
                code: refused.then(|| expect["code"].as_str().unwrap().to_string()),
                path: expect["path"].as_str().map(str::to_string),
                digest: row["digest"]
                    .as_str()
                    .and_then(|d| d.parse().ok())
                    .unwrap_or_else(|| panic!("{id}: digest is not sha256:<hex>")),
                expected_digest: row["expected_digest"].as_str().map(str::to_string),
                build: row.get("build").map(|b| {
                    serde_json::from_value(b.clone()).unwrap_or_else(|e| panic!("{id}: build: {e}"))
                }),
                findings: expect
                    .get("findings")
                    .cloned()
                    .unwrap_or_else(|| serde_json::json!({"secrets": [], "git": []})),
                sha256: row["sha256"].as_str().unwrap().to_string(),
                bytes,
            }
        })
        .collect()
}

/// What a packet read to its end gave: the manifest, the bodies read, the
/// findings and the digest.
type Reading = (Manifest, Vec<Vec<u8>>, Value, Digest);

/// Feeds `bytes` in chunks of `chunk` bytes; returns the error or what was
/// read.
fn read_chunked(
    bytes: &[u8],
    options: ReaderOptions,
    chunk: usize,
) -> Result<Reading, packet_core::Error> {
    let mut reader = Reader::new(options);
    let mut bodies: Vec<Vec<u8>> = Vec::new();
    for piece in bytes.chunks(chunk.max(1)) {
        reader.feed_with(piece, |event| {
            match event {
                Event::MemberStart { .. } => bodies.push(Vec::new()),
                Event::Data(d) => bodies.last_mut().unwrap().extend_from_slice(d),
                _ => {}
            }
            Ok::<(), packet_core::Error>(())
        })?;
    }
    let verified = reader.finish()?;
    let findings = serde_json::to_value(&verified.findings).unwrap();
    Ok((verified.manifest, bodies, findings, verified.digest))
}

/// Re-encodes an accepted packet with the writer: the format has one
/// encoding, so the bytes must come back identical. With the digest the
/// writer names it by.
fn rewrite(manifest: &packet_core::Manifest, bodies: &[Vec<u8>]) -> (Vec<u8>, Option<Digest>) {
    let mut writer = Writer::new(manifest);
    let mut out = Vec::new();
    loop {
        match writer.next().expect("the writer takes a verified manifest") {
            Step::Bytes(b) => out.extend_from_slice(b),
            Step::Body { index, .. } => {
                writer.body(&bodies[index]).unwrap();
                out.extend_from_slice(&bodies[index]);
            }
            Step::Done(digest) => return (out, digest),
        }
    }
}

/// An accepted /2 packet verified from its parts, as a store that keeps
/// bodies apart does: `packet.json`'s bytes, each body hashed, the
/// findings assembled from the bodies scanned one by one.
fn assemble(
    json: &[u8],
    manifest: &Manifest,
    bodies: &[Vec<u8>],
    expected: Digest,
) -> Result<VerifiedPacket, packet_core::Error> {
    let mut assembly = Assembly::new(json, Some(expected), &Limits::FORMAT)?;
    let mut scan = BodyScan::new(manifest);
    for (i, member) in manifest.members.iter().enumerate() {
        let Some(body) = member.body() else { continue };
        scan.body(manifest, i, &bodies[i]);
        if assembly.needs(body) {
            let mut hasher = BodyHasher::new(body);
            hasher.update(&bodies[i])?;
            assembly.prove(hasher.finish()?);
        }
    }
    assembly.finish(scan.finish(manifest))
}

/// Whether a refusal is the case's: its code, and its path where the case
/// names one.
fn expected(case: &Case, e: &packet_core::Error) -> Result<(), String> {
    let code = case.code.as_deref().unwrap_or("acceptance");
    if e.code().as_str() != code {
        return Err(format!("refused as {} ({e}), expected {code}", e.code()));
    }
    if case.path.is_some() && e.path() != case.path.as_deref() {
        return Err(format!(
            "refused at path {:?}, expected {:?}",
            e.path(),
            case.path
        ));
    }
    Ok(())
}

/// Codes that only `packet.json`'s contents can earn: the manifest parsed
/// alone must be refused with them too.
const MANIFEST_CODES: &[&str] = &[
    "manifest_invalid",
    "manifest_not_canonical",
    "manifest_totals",
    "harness_invalid",
    "credential_in_packet",
    "path_collision",
    "limit_members",
    "limit_size",
    "digest_size_conflict",
];

/// `packet.json`'s body, when the packet opens with a regular-file header
/// of that name and holds all of the body it declares.
fn manifest_body(bytes: &[u8]) -> Option<&[u8]> {
    let header = bytes.get(..512)?;
    if &header[..12] != b"packet.json\0" || header[156] != b'0' {
        return None;
    }
    let size = std::str::from_utf8(&header[124..135]).ok()?;
    let size = usize::try_from(u64::from_str_radix(size, 8).ok()?).ok()?;
    bytes.get(512..512usize.checked_add(size)?)
}

/// Checks one case through the reader, the manifest parser and the packer;
/// returns a description of what went wrong, if anything.
pub fn check(case: &Case) -> Result<(), String> {
    let hex = packet_core::Digest::of(&case.bytes).hex().to_string();
    if hex != case.sha256 {
        return Err(format!(
            "bytes do not match cases.json's sha256 {}",
            case.sha256
        ));
    }
    // A consumer parses the expected digest before it reads a byte.
    let expected_digest = match case.expected_digest.as_deref().map(str::parse::<Digest>) {
        None => None,
        Some(Ok(d)) => Some(d),
        Some(Err(e)) => return expected(case, &e).map_err(|m| format!("the expected digest: {m}")),
    };
    let options = ReaderOptions {
        expected_digest,
        ..ReaderOptions::default()
    };
    let whole = reader::verify(&case.bytes, options);
    let version = if case.group == "v1" {
        Format::V1
    } else {
        Format::V2
    };
    match (&case.code, &whole) {
        (None, Err(e)) => return Err(format!("refused ({e}), the corpus expects acceptance")),
        (Some(code), Ok(_)) => return Err(format!("ACCEPTED, the corpus expects {code}")),
        (Some(_), Err(e)) => expected(case, e)?,
        (None, Ok(verified)) => {
            let found = serde_json::to_value(&verified.findings).unwrap();
            if found != case.findings {
                return Err(format!("findings {found}, expected {}", case.findings));
            }
            if verified.digest != case.digest {
                return Err(format!(
                    "named {}, the corpus names it {}",
                    verified.digest, case.digest
                ));
            }
            if verified.manifest.format != version {
                return Err(format!("read as {:?}", verified.manifest.format));
            }
        }
    }
    // Given its name as the expected digest, a case ends as it does
    // without one: the name is right, so consumers can always give it.
    if case.expected_digest.is_none() {
        let named = ReaderOptions {
            expected_digest: Some(case.digest),
            ..options
        };
        match (reader::verify(&case.bytes, named), &whole) {
            (Ok(_), Ok(_)) => {}
            (Err(e), Err(_)) => expected(case, &e).map_err(|m| format!("given its digest: {m}"))?,
            (named, _) => {
                return Err(format!(
                    "given its digest: {:?}",
                    named.map(|_| ()).map_err(|e| e.code())
                ))
            }
        }
    }
    // The same outcome whatever the chunking.
    for chunk in [1, 7, 511, 512, 4096] {
        if case.bytes.len() > 1 << 20 && chunk <= 7 {
            continue;
        }
        let chunked = read_chunked(&case.bytes, options, chunk);
        match (&whole, &chunked) {
            (Ok(verified), Ok((manifest, bodies, findings, digest))) => {
                let (rewritten, written_digest) = rewrite(manifest, bodies);
                if rewritten != case.bytes {
                    return Err("accepted but not the writer's encoding".into());
                }
                if written_digest != Some(case.digest) || *digest != case.digest {
                    return Err(format!(
                        "in chunks of {chunk}, named {digest}, the writer names it {written_digest:?}"
                    ));
                }
                if *findings != case.findings {
                    return Err(format!("in chunks of {chunk}, findings {findings}"));
                }
                if version == Format::V2 && chunk == 4096 {
                    let json = manifest_body(&case.bytes).expect("an accepted packet.json");
                    match assemble(json, manifest, bodies, case.digest) {
                        Ok(assembled) if assembled == *verified => {}
                        other => {
                            return Err(format!(
                                "assembled from its parts: {:?}",
                                other.map_err(|e| e.to_string())
                            ))
                        }
                    }
                }
            }
            (Err(a), Err(b)) if a.code() == b.code() && a.path() == b.path() => {}
            _ => {
                return Err(format!(
                    "chunks of {chunk} give {:?}, whole {:?}",
                    chunked.as_ref().err().map(|e| e.code()),
                    whole.as_ref().err().map(|e| e.code())
                ))
            }
        }
    }
    // packet.json alone: what only its contents can earn, it earns alone;
    // anything it refuses, the reader refused the same way.
    if let Some(body) = manifest_body(&case.bytes) {
        let from_the_manifest = case
            .code
            .as_deref()
            .is_some_and(|c| MANIFEST_CODES.contains(&c));
        match Manifest::parse(body, &Limits::FORMAT) {
            Err(e) => expected(case, &e).map_err(|m| format!("packet.json alone: {m}"))?,
            Ok(_) if from_the_manifest => return Err("packet.json alone is accepted".into()),
            Ok(_) => {}
        }
    }
    // Packing the member set behind an honest manifest.
    if let Some(description) = &case.build {
        match description.build() {
            Ok(_) => return Err("packing its members succeeds".into()),
            Err(description::BuildError::Write(packet_core::WriteError::Refused(e))) => {
                expected(case, &e).map_err(|m| format!("packing: {m}"))?
            }
            Err(e) => return Err(format!("packing fails for another reason: {e}")),
        }
    }
    Ok(())
}

/// Runs every case; panics listing every failure.
pub fn run_all() {
    let cases = cases();
    assert!(cases.len() >= 60, "the corpus holds at least 60 cases");
    for group in [
        "tar",
        "paths",
        "links",
        "special",
        "metadata",
        "limits",
        "manifest",
        "digest",
        "cross-platform",
        "findings",
        "accept",
        "v1",
    ] {
        assert!(cases.iter().any(|c| c.group == group), "no case in {group}");
    }
    for c in &cases {
        if let Some(code) = &c.code {
            assert!(
                ErrorCode::from_str_code(code).is_some(),
                "{}: {code} is not a packet-core code",
                c.id
            );
        }
    }
    let failures: Vec<String> = cases
        .iter()
        .filter_map(|c| check(c).err().map(|e| format!("{}: {e}", c.id)))
        .collect();
    assert!(
        failures.is_empty(),
        "{} of {} cases failed:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}
