//! Writes the inspector's test packets into a directory, all generated with
//! packet-core (the malformed ones by re-encoding headers with its ustar
//! codec, never by hand):
//!
//! - `good.packet`: a workspace (text, executable, binary, image, symlink)
//!   and a Codex harness with a rollout and exclusions;
//! - `good-v2.packet`: the same session later: one file changed, one
//!   removed, one added;
//! - `tampered.packet`: `good.packet` with one byte flipped in the body of
//!   `workspace/src/main.rs`;
//! - `traversal.packet`: a member header naming `workspace/../evil`;
//! - `escape.packet`: a symlink `workspace/link` whose target leaves the
//!   workspace;
//! - `findings.packet`: a valid packet holding what a reader reports: a
//!   GitHub token in a settings file, a `.env` file, a `core.fsmonitor`
//!   setting and an executable hook;
//! - with `--many N`: `many-N.packet`, N small files in directories of
//!   100, for the tree's behaviour on large member counts;
//! - with `--big MB`: `big-MB.packet`, about MB megabytes of
//!   incompressible files in 4 MB members, for streaming tests and
//!   throughput measurements.
//!
//! `cargo run -p packet-inspector-wasm --example fixtures -- <dir> [--big 100]`

use std::path::Path;

use packet_core::in_memory::{build, Built, Source};
use packet_core::raw::{encode_packet, HeaderSpec, UncheckedManifest, UncheckedMember};
use packet_core::{reader, Entry, Exclusion, Harness, HarnessKind, Kind, Limits, ReaderOptions};

const THREAD: &str = "019ad3c2-7a10-7c41-9e55-2b8f3c4d5e6f";

fn dir(path: &str) -> Source {
    Source::Dir { path: path.into() }
}

fn file(path: &str, contents: impl Into<Vec<u8>>) -> Source {
    Source::File {
        path: path.into(),
        contents: contents.into(),
        executable: false,
    }
}

fn main_rs(version: u32) -> String {
    let mut s = String::from("// A tiny command-line tool.\nuse std::env;\n\nfn main() {\n");
    s.push_str("    let args: Vec<String> = env::args().skip(1).collect();\n");
    if version == 1 {
        s.push_str("    println!(\"hello, {}\", args.join(\" \"));\n");
    } else {
        s.push_str("    let name = args.first().map(String::as_str).unwrap_or(\"world\");\n");
        s.push_str("    println!(\"hello, {name}\");\n");
    }
    for i in 0..20 {
        s.push_str(&format!("    // step {i}: nothing to do\n"));
    }
    s.push_str("}\n");
    s
}

/// A 48×48 RGB gradient as a PNG (stored deflate blocks, real CRCs).
fn png() -> Vec<u8> {
    fn crc32(bytes: &[u8]) -> u32 {
        let mut crc = !0u32;
        for &b in bytes {
            crc ^= b as u32;
            for _ in 0..8 {
                crc = if crc & 1 != 0 {
                    (crc >> 1) ^ 0xedb8_8320
                } else {
                    crc >> 1
                };
            }
        }
        !crc
    }
    fn chunk(out: &mut Vec<u8>, kind: &[u8], data: &[u8]) {
        out.extend_from_slice(&(data.len() as u32).to_be_bytes());
        let start = out.len();
        out.extend_from_slice(kind);
        out.extend_from_slice(data);
        let crc = crc32(&out[start..]);
        out.extend_from_slice(&crc.to_be_bytes());
    }
    let (w, h) = (48u32, 48u32);
    let mut raw = Vec::new();
    for y in 0..h {
        raw.push(0);
        for x in 0..w {
            raw.extend_from_slice(&[(40 + x * 4) as u8, (60 + y * 3) as u8, (220 - x - y) as u8]);
        }
    }
    let (mut a, mut b) = (1u32, 0u32);
    for &byte in &raw {
        a = (a + byte as u32) % 65521;
        b = (b + a) % 65521;
    }
    let mut z = vec![0x78, 0x01, 0x01];
    z.extend_from_slice(&(raw.len() as u16).to_le_bytes());
    z.extend_from_slice(&(!(raw.len() as u16)).to_le_bytes());
    z.extend_from_slice(&raw);
    z.extend_from_slice(&((b << 16) | a).to_be_bytes());
    let mut ihdr = Vec::new();
    ihdr.extend_from_slice(&w.to_be_bytes());
    ihdr.extend_from_slice(&h.to_be_bytes());
    ihdr.extend_from_slice(&[8, 2, 0, 0, 0]);
    let mut out = b"\x89PNG\r\n\x1a\n".to_vec();
    chunk(&mut out, b"IHDR", &ihdr);
    chunk(&mut out, b"IDAT", &z);
    chunk(&mut out, b"IEND", &[]);
    out
}

fn session(version: u32) -> Built {
    let rollout =
        format!("harness/codex/sessions/2026/11/30/rollout-2026-11-30T03-00-00-{THREAD}.jsonl");
    let mut log = format!("{{\"type\":\"session_meta\",\"payload\":{{\"id\":\"{THREAD}\"}}}}\n");
    log.push_str("{\"type\":\"turn_context\",\"payload\":{\"model\":\"gpt-5-codex\"}}\n");
    if version == 2 {
        log.push_str("{\"type\":\"turn_context\",\"payload\":{\"model\":\"gpt-5-codex\"}}\n");
    }
    let mut sources = vec![
        dir("workspace"),
        file(
            "workspace/README.md",
            "# greeter\n\nSays hello.\n\n- build: `cargo build`\n- run: `./bin/run`\n",
        ),
        file(
            "workspace/Cargo.toml",
            "[package]\nname = \"greeter\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
        ),
        dir("workspace/src"),
        file("workspace/src/main.rs", main_rs(version)),
        dir("workspace/bin"),
        Source::File {
            path: "workspace/bin/run".into(),
            contents: b"#!/bin/sh\nexec cargo run --quiet -- \"$@\"\n".to_vec(),
            executable: true,
        },
        Source::Symlink {
            path: "workspace/run".into(),
            target: "bin/run".into(),
        },
        dir("workspace/assets"),
        file("workspace/assets/logo.png", png()),
        file(
            "workspace/assets/table.bin",
            (0..=255u8).cycle().take(1000).collect::<Vec<_>>(),
        ),
        dir("harness"),
        dir("harness/codex"),
        dir("harness/codex/sessions"),
        dir("harness/codex/sessions/2026"),
        dir("harness/codex/sessions/2026/11"),
        dir("harness/codex/sessions/2026/11/30"),
        file(&rollout, log),
    ];
    if version == 1 {
        sources.push(file("workspace/NOTES.txt", "todo: greet by name\n"));
    } else {
        sources.push(dir("workspace/tests"));
        sources.push(file(
            "workspace/tests/greet.rs",
            "#[test]\nfn greets() {}\n",
        ));
    }
    let harness = Harness {
        kind: HarnessKind::Codex,
        model: Some("gpt-5-codex".into()),
        provider: None,
        session_log: rollout,
        session_id: THREAD.into(),
        version: None,
    };
    let exclusions = vec![
        Exclusion {
            matched: 1,
            pattern: "codex/auth.json".into(),
            rule: "codex-auth".into(),
        },
        Exclusion {
            matched: 2,
            pattern: "target/".into(),
            rule: "user".into(),
        },
    ];
    build(&sources, Some(harness), exclusions, &Limits::FORMAT).expect("the session packet builds")
}

/// The offset of `path`'s first body byte, found by the reader.
fn data_offset(bytes: &[u8], path: &str) -> u64 {
    let packet = reader::verify(bytes, ReaderOptions::default()).expect("a valid packet");
    let (index, _) = packet.manifest.find(path).expect("the member is there");
    packet.data_offsets[index]
}

/// Archive bytes for a manifest and member headers written as given, with
/// no checks: how a malicious packet would be made.
fn raw_packet(manifest: &UncheckedManifest, members: &[HeaderSpec<'_>]) -> Vec<u8> {
    let json = manifest.to_canonical_json();
    encode_packet(&json, members.iter().map(|spec| (*spec, &[][..])))
}

/// A manifest of `members` as given, with its totals.
fn unchecked_manifest(members: Vec<(&str, Entry)>) -> UncheckedManifest {
    let members = members
        .into_iter()
        .map(|(path, entry)| UncheckedMember {
            path: path.into(),
            entry,
        })
        .collect();
    UncheckedManifest::assemble(members, None, vec![])
}

fn dir_spec(path: &str) -> HeaderSpec<'_> {
    HeaderSpec {
        path,
        kind: Kind::Dir,
        mode: 0o755,
        size: 0,
        target: "",
    }
}

/// Incompressible bytes (xorshift64*), deterministic.
fn noise(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    let mut out = Vec::with_capacity(len + 8);
    while out.len() < len {
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        out.extend_from_slice(&x.wrapping_mul(0x2545_f491_4f6c_dd1d).to_le_bytes());
    }
    out.truncate(len);
    out
}

/// A token in GitHub's format: 30 characters and their CRC32 in 6 base62
/// digits (made up: no live credential).
fn github_style_token() -> String {
    let body = "Q2h7Tb9xLm4Ws8Kd1Rv6Ny3Pf5Gj0Z";
    let mut crc = !0u32;
    for &b in body.as_bytes() {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                0xedb8_8320 ^ (crc >> 1)
            } else {
                crc >> 1
            };
        }
    }
    let mut n = !crc;
    let digits = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
    let mut sum = [b'0'; 6];
    for d in sum.iter_mut().rev() {
        *d = digits[(n % 62) as usize];
        n /= 62;
    }
    format!("ghp_{body}{}", String::from_utf8_lossy(&sum))
}

/// A valid packet with something to report in each kind of finding.
fn findings() -> Built {
    let settings = format!("{{\n  \"token\": \"{}\"\n}}\n", github_style_token());
    build(
        &[
            dir("workspace"),
            file("workspace/.env", "DEBUG=1\n"),
            dir("workspace/.git"),
            file(
                "workspace/.git/config",
                "[core]\n\tbare = false\n\tfsmonitor = .git/watch.sh\n",
            ),
            dir("workspace/.git/hooks"),
            Source::File {
                path: "workspace/.git/hooks/post-checkout".into(),
                contents: b"#!/bin/sh\n".to_vec(),
                executable: true,
            },
            file("workspace/settings.json", settings),
        ],
        None,
        vec![],
        &Limits::FORMAT,
    )
    .expect("the packet builds")
}

fn write(dir: &Path, name: &str, bytes: &[u8]) {
    std::fs::write(dir.join(name), bytes).expect("the fixture is written");
    println!("{name}\t{} bytes", bytes.len());
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let out = Path::new(
        args.first()
            .map(String::as_str)
            .unwrap_or("inspector/tests/out/packets"),
    );
    std::fs::create_dir_all(out).expect("the output directory is created");

    let good = session(1);
    write(out, "good.packet", &good.bytes);
    std::fs::write(out.join("good.digest"), good.digest.to_string()).expect("written");
    write(out, "good-v2.packet", &session(2).bytes);

    let mut tampered = good.bytes.clone();
    let at = data_offset(&good.bytes, "workspace/src/main.rs") as usize + 10;
    tampered[at] ^= 0x01;
    write(out, "tampered.packet", &tampered);

    // The manifest lists a harmless set; the archive then holds a member
    // whose header names a path that climbs out of the workspace.
    let manifest = unchecked_manifest(vec![("workspace", Entry::Dir)]);
    let traversal = raw_packet(
        &manifest,
        &[dir_spec("workspace"), dir_spec("workspace/../evil")],
    );
    write(out, "traversal.packet", &traversal);

    let manifest = unchecked_manifest(vec![
        ("workspace", Entry::Dir),
        (
            "workspace/link",
            Entry::Symlink {
                target: "../../etc/passwd".into(),
            },
        ),
    ]);
    let escape = raw_packet(
        &manifest,
        &[
            dir_spec("workspace"),
            HeaderSpec {
                path: "workspace/link",
                kind: Kind::Symlink,
                mode: 0o777,
                size: 0,
                target: "../../etc/passwd",
            },
        ],
    );
    write(out, "escape.packet", &escape);
    write(out, "findings.packet", &findings().bytes);

    if let Some(n) = args
        .iter()
        .position(|a| a == "--many")
        .and_then(|i| args.get(i + 1))
    {
        let n: usize = n.parse().expect("--many takes a member count");
        let mut sources = vec![dir("workspace")];
        for d in 0..n.div_ceil(100) {
            sources.push(dir(&format!("workspace/d{d:04}")));
            for f in 0..100.min(n - d * 100) {
                sources.push(file(
                    &format!("workspace/d{d:04}/f{f:03}.txt"),
                    format!("file {d}/{f}\n"),
                ));
            }
        }
        let many = build(&sources, None, vec![], &Limits::FORMAT).expect("the packet builds");
        write(out, &format!("many-{n}.packet"), &many.bytes);
    }
    if let Some(mb) = args
        .iter()
        .position(|a| a == "--big")
        .and_then(|i| args.get(i + 1))
    {
        let mb: usize = mb.parse().expect("--big takes a size in MB");
        let mut sources = vec![dir("workspace"), dir("workspace/data")];
        let per_file = 4_000_000;
        for i in 0..mb.div_ceil(4) {
            sources.push(file(
                &format!("workspace/data/blob-{i:04}.bin"),
                noise(per_file, (i as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15)),
            ));
        }
        sources.push(file("workspace/README.md", "Incompressible test data.\n"));
        let big = build(&sources, None, vec![], &Limits::FORMAT).expect("the big packet builds");
        write(out, &format!("big-{mb}.packet"), &big.bytes);
    }
}
