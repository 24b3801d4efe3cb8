//! A reference client of `POST /v1/pushes` for the end-to-end tests and
//! the storage measurements: what the CLI sends for a packet over a base
//! (docs/transfer.md, "Delta push"), from packet files.
//!
//! ```text
//! cargo run -p pillbox-worker --example push_body -- NEW.pkt OUT [BASE.pkt]
//!     writes the PBPUSH02 body for NEW over BASE into OUT: the manifest's
//!     chunks (FastCDC, the manifest's sizes), the recipes of its large
//!     bodies (a body that starts like the base's body at the same path
//!     copies those chunks), and the frames BASE lacks, each compressed
//!     with zstd level 3 when that saves 3 %; prints
//!     {"digest","size","frames","frame_bytes","body_bytes","manifest_chunks"}.
//! cargo run -p pillbox-worker --example push_body -- cuts FILE
//!     prints the manifest cuts of FILE's packet.json as the CLI makes them
//!     ([[sha256 hex, size], ...]).
//! cargo run -p pillbox-worker --example push_body -- fresh OUT SEED
//!     a small packet no other seed makes (a README, three small files, a
//!     600,000-byte blob, a 1.3 MB log): OUT.pkt, and OUT.json describing it.
//! cargo run -p pillbox-worker --example push_body -- workspace OUT MEMBERS TURN
//!     a workspace like a node_modules install (MEMBERS files in packages,
//!     a few of them large, and src/m0.js … src/m19.js) after TURN one-file
//!     edits (each appends a line to one src file): OUT.pkt and OUT.json.
//! ```

// The client compresses with the reference zstd, which builds natively only.
#[cfg(target_arch = "wasm32")]
fn main() {}

#[cfg(not(target_arch = "wasm32"))]
fn main() {
    client::main();
}

#[cfg(not(target_arch = "wasm32"))]
mod client {

    use std::collections::HashSet;

    use packet_core::{reader, Digest, ReaderOptions, VerifiedPacket};
    use pillbox_wire::chunking::{keep_compressed, BODIES, MANIFEST, ZSTD_LEVEL, ZSTD_WINDOW_LOG};
    use pillbox_wire::chunks::{self, Frame};
    use pillbox_wire::recipes::{BodyRecipe, ChunkName, Recipes, Run};
    use pillbox_worker::storage::cut::cut;

    type Name = (Digest, u64);

    fn read(path: &str) -> Result<(Vec<u8>, VerifiedPacket), String> {
        let bytes = std::fs::read(path).map_err(|e| format!("{path}: {e}"))?;
        let v =
            reader::verify(&bytes, ReaderOptions::default()).map_err(|e| format!("{path}: {e}"))?;
        Ok((bytes, v))
    }

    fn json_of(bytes: &[u8], v: &VerifiedPacket) -> Vec<u8> {
        bytes[v.manifest_range.start as usize..v.manifest_range.end as usize].to_vec()
    }

    fn body_of<'a>(bytes: &'a [u8], v: &VerifiedPacket, i: usize) -> &'a [u8] {
        let at = v.data_offsets[i] as usize;
        &bytes[at..at + v.manifest.members[i].size() as usize]
    }

    fn frame(raw: &[u8]) -> Result<(Frame, Vec<u8>), String> {
        let mut c = zstd::bulk::Compressor::new(ZSTD_LEVEL).map_err(|e| e.to_string())?;
        c.set_parameter(zstd::zstd_safe::CParameter::WindowLog(ZSTD_WINDOW_LOG))
            .map_err(|e| e.to_string())?;
        let z = c.compress(raw).map_err(|e| e.to_string())?;
        Ok(
            if keep_compressed(raw.len(), z.len()) && z.len() < raw.len() {
                (
                    Frame::zstd(Digest::of(raw), raw.len() as u32, z.len() as u32),
                    z,
                )
            } else {
                (Frame::identity(raw), raw.to_vec())
            },
        )
    }

    fn names(
        bytes: &[u8],
        cdc: &pillbox_wire::chunking::Cdc,
    ) -> Vec<(Name, std::ops::Range<usize>)> {
        cut(bytes, cdc)
            .into_iter()
            .map(|r| ((Digest::of(&bytes[r.clone()]), r.len() as u64), r))
            .collect()
    }

    fn push_body(new: &str, out: &str, base: Option<&str>) -> Result<(), String> {
        let (bytes, v) = read(new)?;
        let base = base.map(read).transpose()?;
        let json = json_of(&bytes, &v);
        let mut recipes = Recipes::default();
        let mut frames: Vec<(Frame, Vec<u8>)> = Vec::new();
        let mut sent: HashSet<Name> = HashSet::new();
        let base_manifest: HashSet<Name> = base
            .as_ref()
            .map(|(b, bv)| {
                names(&json_of(b, bv), &MANIFEST)
                    .into_iter()
                    .map(|(n, _)| n)
                    .collect()
            })
            .unwrap_or_default();
        for (name, r) in names(&json, &MANIFEST) {
            recipes.manifest.push(ChunkName {
                sha256: name.0,
                size: name.1 as u32,
            });
            if !base_manifest.contains(&name) && sent.insert(name) {
                frames.push(frame(&json[r])?);
            }
        }
        let base_bodies: HashSet<packet_core::Body> = base
            .as_ref()
            .map(|(_, bv)| {
                bv.manifest
                    .members
                    .iter()
                    .filter_map(|m| m.body())
                    .collect()
            })
            .unwrap_or_default();
        let mut base_chunks: HashSet<Name> = HashSet::new();
        if let Some((b, bv)) = &base {
            for (i, m) in bv.manifest.members.iter().enumerate() {
                if let Some(body) = m.body() {
                    if !BODIES.is_one_chunk(body.size) {
                        base_chunks.extend(
                            names(body_of(b, bv, i), &BODIES)
                                .into_iter()
                                .map(|(n, _)| n),
                        );
                    }
                }
            }
        }
        let mut seen = HashSet::new();
        for (i, m) in v.manifest.members.iter().enumerate() {
            let Some(body) = m.body() else { continue };
            if base_bodies.contains(&body) || !seen.insert(body) {
                continue;
            }
            let raw = body_of(&bytes, &v, i);
            if BODIES.is_one_chunk(body.size) {
                frames.push(frame(raw)?);
                continue;
            }
            let mine = names(raw, &BODIES);
            let mut runs = Vec::new();
            let mut k = 0;
            if let Some((b, bv)) = &base {
                if let Some((j, old)) = bv.manifest.find(&m.path) {
                    let old_body = old.body();
                    if let Some(ob) = old_body.filter(|ob| !BODIES.is_one_chunk(ob.size)) {
                        let theirs = names(body_of(b, bv, j), &BODIES);
                        while k < mine.len() && k < theirs.len() && mine[k].0 == theirs[k].0 {
                            k += 1;
                        }
                        if k > 0 {
                            runs.push(Run::Copy {
                                body: ob,
                                first: 0,
                                count: k as u32,
                            });
                        }
                    }
                }
            }
            for (name, r) in mine.iter().skip(k) {
                runs.push(Run::Chunk(ChunkName {
                    sha256: name.0,
                    size: name.1 as u32,
                }));
                if !base_chunks.contains(name) && sent.insert(*name) {
                    frames.push(frame(&raw[r.clone()])?);
                }
            }
            recipes.bodies.push(BodyRecipe { body, runs });
        }
        let refs: Vec<(Frame, &[u8])> = frames.iter().map(|(f, b)| (*f, b.as_slice())).collect();
        let batch = chunks::encode(&refs);
        let body = recipes.encode_push(&batch);
        std::fs::write(out, &body).map_err(|e| format!("{out}: {e}"))?;
        println!(
            "{}",
            serde_json::json!({
                "digest": v.digest.to_string(),
                "size": v.size,
                "frames": frames.len(),
                "frame_bytes": frames.iter().map(|(_, b)| b.len()).sum::<usize>(),
                "body_bytes": body.len(),
                "manifest_chunks": recipes.manifest.len(),
            })
        );
        Ok(())
    }

    fn cuts(path: &str) -> Result<(), String> {
        let (bytes, v) = read(path)?;
        let json = json_of(&bytes, &v);
        let list: Vec<(String, u64)> = names(&json, &MANIFEST)
            .into_iter()
            .map(|(n, _)| (n.0.hex().to_string(), n.1))
            .collect();
        println!(
            "{}",
            serde_json::to_string(&list).map_err(|e| e.to_string())?
        );
        Ok(())
    }

    fn describe(bytes: &[u8]) -> Result<serde_json::Value, String> {
        let v = reader::verify(bytes, ReaderOptions::default()).map_err(|e| e.to_string())?;
        let members: Vec<serde_json::Value> = v
            .manifest
            .members
            .iter()
            .enumerate()
            .map(|(i, m)| {
                serde_json::json!({
                    "path": m.path,
                    "type": m.kind().as_str(),
                    "size": m.size(),
                    "sha256": m.sha256().map(|d| d.to_string()),
                    "data_offset": v.data_offsets[i],
                })
            })
            .collect();
        Ok(serde_json::json!({
            "digest": v.digest.to_string(),
            "size": v.size,
            "manifest_offset": v.manifest_range.start,
            "manifest_len": v.manifest_range.end - v.manifest_range.start,
            "members": members,
        }))
    }

    fn noise(seed: u64, len: usize) -> Vec<u8> {
        let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
        (0..len)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                (x >> 24) as u8
            })
            .collect()
    }

    fn text(seed: u64, len: usize) -> Vec<u8> {
        let words = [
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
        ];
        let mut out = Vec::with_capacity(len + 64);
        let mut x = seed | 1;
        let mut line = 0u64;
        while out.len() < len {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            out.extend_from_slice(format!("{{\"turn\":{line},\"text\":\"").as_bytes());
            for k in 0..8 {
                out.extend_from_slice(
                    words[((x >> (k * 4)) % words.len() as u64) as usize].as_bytes(),
                );
                out.push(b' ');
            }
            out.extend_from_slice(b"\"}\n");
            line += 1;
        }
        out.truncate(len);
        out
    }

    fn write_packet(out: &str, sources: &[packet_core::in_memory::Source]) -> Result<(), String> {
        let built =
            packet_core::in_memory::build(sources, None, vec![], &packet_core::Limits::FORMAT)
                .map_err(|e| e.to_string())?;
        std::fs::write(format!("{out}.pkt"), &built.bytes).map_err(|e| e.to_string())?;
        std::fs::write(format!("{out}.json"), describe(&built.bytes)?.to_string())
            .map_err(|e| e.to_string())?;
        println!(
            "{}",
            serde_json::json!({"digest": built.digest.to_string(), "size": built.bytes.len()})
        );
        Ok(())
    }

    fn file(path: String, contents: Vec<u8>) -> packet_core::in_memory::Source {
        packet_core::in_memory::Source::File {
            path,
            contents,
            executable: false,
        }
    }

    fn dir(path: &str) -> packet_core::in_memory::Source {
        packet_core::in_memory::Source::Dir { path: path.into() }
    }

    fn fresh(out: &str, seed: u64) -> Result<(), String> {
        write_packet(
            out,
            &[
                dir("workspace"),
                file(
                    "workspace/README.md".into(),
                    format!("# fresh {seed}\n").into_bytes(),
                ),
                file("workspace/a.txt".into(), noise(seed, 900)),
                file("workspace/b.txt".into(), text(seed + 1, 5_000)),
                file("workspace/blob.bin".into(), noise(seed + 2, 600_000)),
                file("workspace/c.txt".into(), text(seed + 3, 40)),
                file("workspace/log.jsonl".into(), text(seed + 4, 1_300_000)),
            ],
        )
    }

    fn workspace(out: &str, members: usize, turn: usize) -> Result<(), String> {
        let mut sources = vec![dir("workspace"), dir("workspace/node_modules")];
        let packages = (members / 40).max(1);
        let mut n = 0;
        for p in 0..packages {
            let pkg = format!("workspace/node_modules/pkg-{p:04}");
            sources.push(dir(&pkg));
            sources.push(dir(&format!("{pkg}/lib")));
            for f in 0..40 {
                if n >= members {
                    break;
                }
                let size = if n % 400 == 7 {
                    300_000 + (n % 5) * 100_000
                } else {
                    200 + (n * 7919) % 3000
                };
                let path = if f < 2 {
                    format!("{pkg}/{}", ["package.json", "README.md"][f])
                } else {
                    format!("{pkg}/lib/file-{f:02}.js")
                };
                sources.push(file(path, text(n as u64 + 11, size)));
                n += 1;
            }
        }
        sources.push(dir("workspace/src"));
        for m in 0..20 {
            let mut body = format!("export const m{m} = {m};\n").into_bytes();
            for t in 1..=turn {
                if (t * 3) % 20 == m {
                    body.extend_from_slice(format!("export const turn_{t} = {t};\n").as_bytes());
                }
            }
            sources.push(file(format!("workspace/src/m{m}.js"), body));
        }
        write_packet(out, &sources)
    }

    pub fn main() {
        let args: Vec<String> = std::env::args().skip(1).collect();
        let result = match args
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>()
            .as_slice()
        {
            ["cuts", file] => cuts(file),
            ["fresh", out, seed] => seed
                .parse()
                .map_err(|_| "a seed".to_string())
                .and_then(|s| fresh(out, s)),
            ["workspace", out, members, turn] => match (members.parse(), turn.parse()) {
                (Ok(m), Ok(t)) => workspace(out, m, t),
                _ => Err("workspace OUT MEMBERS TURN".into()),
            },
            [new, out] => push_body(new, out, None),
            [new, out, base] => push_body(new, out, Some(base)),
            _ => Err("usage: push_body NEW.pkt OUT [BASE.pkt] | cuts FILE".into()),
        };
        if let Err(e) = result {
            eprintln!("push_body: {e}");
            std::process::exit(1);
        }
    }
}
