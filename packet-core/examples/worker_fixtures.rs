//! Generates the packets the Worker's end-to-end tests and benchmarks use,
//! and verifies files as an oracle for the tests' expectations.
//!
//! ```text
//! cargo run -p packet-core --example worker_fixtures -- set DIR
//!     small.pkt, harness.pkt (Codex harness), many.pkt (300 members),
//!     big.pkt (~12 MiB, incompressible), base.pkt and edited.pkt (a
//!     workspace with a 3 MiB session log, and the same after one more turn:
//!     the log appended to, one file edited), and DIR/index.json describing
//!     each (digest, size, manifest offset and length, every member's offsets);
//!     v1-small.pkt, v1-harness.pkt, v1-big.pkt and v1-base.pkt are the same
//!     packets in format /1 (named by the whole file).
//! cargo run -p packet-core --example worker_fixtures -- large FILE [SMALL BIG [EDITED [text]]]
//!     SMALL files of 1 MiB and BIG files of 100 MiB of incompressible bytes
//!     (default 720 and 3: just under 1 GiB), written in a streaming pass;
//!     with EDITED, the first EDITED small files have other contents (the
//!     same packet after an edit); with `text`, the files are JSON lines
//!     that compress like a session log instead of noise.
//! cargo run -p packet-core --example worker_fixtures -- describe FILE
//!     FILE's entry of an index.json (as `set` writes them) on stdout.
//! cargo run -p packet-core --example worker_fixtures -- verify FILE [DIGEST]
//!     {"ok":true,...} or {"ok":false,"code":...,"path":...} on stdout.
//! ```
use std::fs::File;
use std::io::{BufWriter, Read, Write};

use packet_core::in_memory::{build, build_as, Source};
use packet_core::{
    reader, Digest, Event, Format, Harness, HarnessKind, Hasher, Limits, Manifest, Member,
    MemberPath, Reader, ReaderOptions, Step, Writer,
};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("set") if args.len() == 2 => write_set(&args[1]),
        Some("large") if (2..=6).contains(&args.len()) && args.len() != 3 => {
            let (small, big) = if args.len() >= 4 {
                (args[2].parse().unwrap_or(720), args[3].parse().unwrap_or(3))
            } else {
                (720, 3)
            };
            let edited = args.get(4).and_then(|e| e.parse().ok()).unwrap_or(0);
            let text = args.get(5).map(String::as_str) == Some("text");
            write_large(&args[1], small, big, edited, text)
        }
        Some("describe") if args.len() == 2 => File::open(&args[1])
            .map_err(|e| format!("{}: {e}", args[1]))
            .and_then(|f| describe(std::io::BufReader::with_capacity(1 << 20, f)))
            .map(|index| println!("{index}")),
        Some("verify") if args.len() == 2 || args.len() == 3 => verify(&args[1], args.get(2)),
        _ => Err(
            "usage: worker_fixtures set DIR | large FILE [SMALL BIG [EDITED [text]]] | describe FILE | verify FILE [DIGEST]".into(),
        ),
    };
    if let Err(e) = result {
        eprintln!("worker_fixtures: {e}");
        std::process::exit(1);
    }
}

type Result<T> = std::result::Result<T, String>;

/// Deterministic incompressible bytes (SplitMix64), or JSON lines that
/// compress like a session log (`text`).
struct Noise(u64);

impl Noise {
    /// Fills `buf` with text: JSON lines of a few words drawn by the noise.
    fn fill_text(&mut self, buf: &mut [u8]) {
        const WORDS: [&str; 16] = [
            "the",
            "agent",
            "reads",
            "src/lib.rs",
            "runs",
            "cargo",
            "test",
            "and",
            "edits",
            "a",
            "function",
            "output",
            "ok",
            "error",
            "turn",
            "tool",
        ];
        let mut line = Vec::new();
        let mut at = 0;
        while at < buf.len() {
            line.clear();
            self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = self.0;
            line.extend_from_slice(format!("{{\"id\":{},\"text\":\"", z % 100_000).as_bytes());
            for _ in 0..12 {
                line.extend_from_slice(WORDS[(z & 15) as usize].as_bytes());
                line.push(b' ');
                z >>= 4;
            }
            line.extend_from_slice(b"\"}\n");
            let n = line.len().min(buf.len() - at);
            buf[at..at + n].copy_from_slice(&line[..n]);
            at += n;
        }
    }

    fn fill(&mut self, buf: &mut [u8]) {
        for chunk in buf.chunks_mut(8) {
            self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = self.0;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^= z >> 31;
            chunk.copy_from_slice(&z.to_le_bytes()[..chunk.len()]);
        }
    }

    fn bytes(seed: u64, len: usize) -> Vec<u8> {
        let mut v = vec![0; len];
        Noise(seed).fill(&mut v);
        v
    }
}

fn file(path: &str, contents: Vec<u8>) -> Source {
    Source::File {
        path: path.into(),
        contents,
        executable: false,
    }
}

fn dir(path: &str) -> Source {
    Source::Dir { path: path.into() }
}

fn write_set(dir_path: &str) -> Result<()> {
    std::fs::create_dir_all(dir_path).map_err(|e| e.to_string())?;
    let thread = "0199a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b";
    let rollout =
        format!("harness/codex/sessions/2026/11/30/rollout-2026-11-30T03-00-00-{thread}.jsonl");
    let mut sets: Vec<(&str, Vec<Source>, Option<Harness>)> = Vec::new();
    sets.push((
        "small",
        vec![
            dir("workspace"),
            file("workspace/README.md", b"# sample workspace\n".to_vec()),
            dir("workspace/src"),
            file(
                "workspace/src/main.rs",
                b"fn main() {\n    println!(\"hello\");\n}\n".to_vec(),
            ),
            file("workspace/src/data.bin", Noise::bytes(1, 70_000)),
            file("workspace/empty.txt", Vec::new()),
            Source::Symlink {
                path: "workspace/main".into(),
                target: "src/main.rs".into(),
            },
        ],
        None,
    ));
    sets.push((
        "harness",
        vec![
            dir("workspace"),
            file(
                "workspace/notes.md",
                b"notes for the next sandbox\n".to_vec(),
            ),
            dir("harness"),
            dir("harness/codex"),
            dir("harness/codex/sessions"),
            dir("harness/codex/sessions/2026"),
            dir("harness/codex/sessions/2026/11"),
            dir("harness/codex/sessions/2026/11/30"),
            file(&rollout, b"{\"type\":\"session_meta\"}\n".to_vec()),
        ],
        Some(Harness {
            kind: HarnessKind::Codex,
            model: Some("gpt-5-codex".into()),
            provider: None,
            session_log: rollout.clone(),
            session_id: thread.into(),
            version: None,
        }),
    ));
    let mut many = vec![dir("workspace")];
    for i in 0..300 {
        many.push(file(
            &format!("workspace/f{i:04}.txt"),
            format!("file {i}\n").into_bytes(),
        ));
    }
    sets.push(("many", many, None));
    // A session before and after one more turn, for delta pushes: most
    // bodies are the same, the log grows at its end, one file changes.
    let turn = |n: usize| -> Vec<u8> {
        let mut log = Vec::new();
        for i in 0..n {
            log.extend_from_slice(
                format!(
                    "{{\"timestamp\":\"2026-12-01T09:{:02}:{:02}Z\",\"type\":\"response_item\",\"payload\":{{\"turn\":{i},\"text\":\"the agent reads src/lib.rs and runs the tests ({})\"}}}}\n",
                    (i / 60) % 60,
                    i % 60,
                    i % 13
                )
                .as_bytes(),
            );
        }
        log
    };
    let session = |log: Vec<u8>, lib: &[u8]| {
        vec![
            dir("workspace"),
            file("workspace/README.md", b"# sample workspace\n".to_vec()),
            dir("workspace/assets"),
            file("workspace/assets/blob.bin", Noise::bytes(4, 600_000)),
            file("workspace/copy-a.txt", b"the same bytes twice\n".to_vec()),
            file("workspace/copy-b.txt", b"the same bytes twice\n".to_vec()),
            dir("workspace/logs"),
            file("workspace/logs/session.jsonl", log),
            dir("workspace/src"),
            file("workspace/src/lib.rs", lib.to_vec()),
        ]
    };
    sets.push((
        "base",
        session(turn(24_000), b"pub fn answer() -> u32 {\n    41\n}\n"),
        None,
    ));
    sets.push((
        "edited",
        session(turn(25_000), b"pub fn answer() -> u32 {\n    42\n}\n"),
        None,
    ));
    sets.push((
        "big",
        vec![
            dir("workspace"),
            file("workspace/README.md", b"# sample workspace\n".to_vec()),
            file("workspace/blob-a.bin", Noise::bytes(2, 7 << 20)),
            file("workspace/blob-b.bin", Noise::bytes(3, 5 << 20)),
        ],
        None,
    ));
    let mut index = serde_json::Map::new();
    for (name, sources, harness) in sets {
        // Packets of format /1 too (named by the whole file), as stores
        // and clients before /2 wrote them: v1-<name>.
        if ["small", "harness", "big", "base"].contains(&name) {
            let v1 = build_as(
                Format::V1,
                &sources,
                harness.clone(),
                Vec::new(),
                &Limits::FORMAT,
            )
            .map_err(|e| e.to_string())?;
            let path = format!("{dir_path}/v1-{name}.pkt");
            std::fs::write(&path, &v1.bytes).map_err(|e| format!("{path}: {e}"))?;
            index.insert(format!("v1-{name}"), describe(v1.bytes.as_slice())?);
        }
        let built =
            build(&sources, harness, Vec::new(), &Limits::FORMAT).map_err(|e| e.to_string())?;
        let path = format!("{dir_path}/{name}.pkt");
        std::fs::write(&path, &built.bytes).map_err(|e| format!("{path}: {e}"))?;
        index.insert(name.into(), describe(built.bytes.as_slice())?);
    }
    let out = format!("{dir_path}/index.json");
    std::fs::write(&out, serde_json::to_vec(&index).map_err(|e| e.to_string())?)
        .map_err(|e| e.to_string())
}

/// Where everything is in a packet, found by the reader as it streams.
fn describe(mut source: impl Read) -> Result<serde_json::Value> {
    let mut r = Reader::new(ReaderOptions::default());
    let mut starts = Vec::new();
    let mut buf = vec![0u8; 1 << 20];
    let mut size = 0u64;
    loop {
        let n = source.read(&mut buf).map_err(|e| e.to_string())?;
        if n == 0 {
            break;
        }
        size += n as u64;
        r.feed_with(&buf[..n], |event| {
            if let Event::MemberStart {
                index,
                header_offset,
                data_offset,
                ..
            } = event
            {
                starts.push((index, header_offset, data_offset));
            }
            Ok::<(), packet_core::Error>(())
        })
        .map_err(|e| e.to_string())?;
    }
    let verified = r.finish().map_err(|e| e.to_string())?;
    let manifest = &verified.manifest;
    let members: Vec<serde_json::Value> = starts
        .iter()
        .map(|&(i, header_offset, data_offset)| {
            let e: &Member = &manifest.members[i];
            serde_json::json!({
                "path": e.path,
                "type": e.kind().as_str(),
                "size": e.size(),
                "sha256": e.sha256().map(|d| d.to_string()),
                "header_offset": header_offset,
                "data_offset": data_offset,
            })
        })
        .collect();
    Ok(serde_json::json!({
        "digest": verified.digest.to_string(),
        "size": size,
        "manifest_offset": verified.manifest_range.start,
        "manifest_len": verified.manifest_range.end - verified.manifest_range.start,
        "harness": manifest.harness.as_ref().map(|h| serde_json::json!({"kind": h.kind.as_str(), "thread_id": h.session_id})),
        "members": members,
    }))
}

fn write_large(path: &str, small: u64, big: u64, edited: u64, text: bool) -> Result<()> {
    const MIB: u64 = 1 << 20;
    let mut specs: Vec<(String, u64, u64)> = Vec::new(); // path, size, seed
    for i in 0..big {
        specs.push((format!("workspace/big/{i:03}.bin"), 100 * MIB, 1000 + i));
    }
    for i in 0..small {
        let seed = if i < edited { 1_000_000 + i } else { 10 + i };
        specs.push((format!("workspace/small/{i:05}.bin"), MIB, seed));
    }
    let mut buf = vec![0u8; MIB as usize];
    let mut entries = vec![
        Member::dir("workspace"),
        Member::dir("workspace/big"),
        Member::dir("workspace/small"),
    ];
    for (p, size, seed) in &specs {
        let mut noise = Noise(*seed);
        let mut h = Hasher::new();
        let mut left = *size;
        while left > 0 {
            let n = left.min(MIB) as usize;
            if text {
                noise.fill_text(&mut buf[..n]);
            } else {
                noise.fill(&mut buf[..n]);
            }
            h.update(&buf[..n]);
            left -= n as u64;
        }
        let path = MemberPath::parse(p).map_err(|e| e.to_string())?;
        entries.push(Member::file(path, *size, h.finish(), false));
    }
    let manifest =
        Manifest::build(entries, None, Vec::new(), &Limits::FORMAT).map_err(|e| e.to_string())?;
    let mut out = BufWriter::with_capacity(
        MIB as usize,
        File::create(path).map_err(|e| format!("{path}: {e}"))?,
    );
    let mut writer = Writer::new(&manifest);
    let mut packet = Hasher::new();
    loop {
        match writer.next().map_err(|e| e.to_string())? {
            Step::Bytes(b) => {
                packet.update(b);
                out.write_all(b).map_err(|e| e.to_string())?;
            }
            Step::Body { index, .. } => {
                let entry = &manifest.members[index];
                let (_, _, seed) = specs
                    .iter()
                    .find(|(p, _, _)| *p == entry.path)
                    .ok_or("lost a file")?;
                let mut noise = Noise(*seed);
                let mut left = entry.size();
                while left > 0 {
                    let n = left.min(MIB) as usize;
                    if text {
                        noise.fill_text(&mut buf[..n]);
                    } else {
                        noise.fill(&mut buf[..n]);
                    }
                    writer.body(&buf[..n]).map_err(|e| e.to_string())?;
                    packet.update(&buf[..n]);
                    out.write_all(&buf[..n]).map_err(|e| e.to_string())?;
                    left -= n as u64;
                }
            }
            Step::Done(_) => break,
        }
    }
    out.flush().map_err(|e| e.to_string())?;
    println!("{}", packet.finish());
    Ok(())
}

fn verify(path: &str, digest: Option<&String>) -> Result<()> {
    let mut bytes = Vec::new();
    File::open(path)
        .and_then(|mut f| f.read_to_end(&mut bytes))
        .map_err(|e| format!("{path}: {e}"))?;
    let expected = digest
        .map(|d| d.parse::<Digest>())
        .transpose()
        .map_err(|e| e.to_string())?;
    let result = match reader::verify(
        &bytes,
        ReaderOptions {
            expected_digest: expected,
            ..Default::default()
        },
    ) {
        Ok(v) => {
            serde_json::json!({ "ok": true, "digest": v.digest.to_string(), "size": v.size })
        }
        Err(e) => {
            serde_json::json!({ "ok": false, "code": e.code().as_str(), "path": e.path(), "offset": e.offset() })
        }
    };
    println!("{result}");
    Ok(())
}
