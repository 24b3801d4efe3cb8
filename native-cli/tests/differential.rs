//! Differential tests: every packet the project accepts is read the same
//! way by GNU tar, Python's tarfile (with the 'data' extraction filter)
//! and the `tar` crate, and `pillbox checkpoint unpack` extracts exactly
//! what they extract.
//!
//! Packets: the golden vectors (tests/vectors/packets), the accepted cases
//! of the adversarial corpus (tests/adversarial), and workspaces generated
//! here from a fixed seed and packed by `pillbox checkpoint pack`.
//!
//! For each packet the member lists (path, type, mode, size, link target,
//! and the sha256 of file contents where the reader gives contents) of the
//! three readers and of the manifest must be equal, and the four extracted
//! `workspace/` trees (types, contents, link targets, permission bits) must
//! be equal. The GNU tar and tarfile sides are tests/differential/oracles.py.
//!
//! Needs GNU tar and python3 (3.11.4+) on the PATH.

mod common;

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::{symlink, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;

use common::{
    case_digest, checkpoint, corpus_cases, corpus_dir, ok, s, snapshot, tmp, write, Node,
};
use packet_core::Digest;
use serde_json::Value;

/// One member as a reader lists it.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Listed {
    path: String,
    kind: String,
    mode: String,
    size: u64,
    target: Option<String>,
    /// Contents digest, when the reader gives contents.
    sha256: Option<String>,
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn listed(v: &Value, with_contents: bool) -> Vec<Listed> {
    v.as_array()
        .unwrap_or_else(|| panic!("a reader failed: {v}"))
        .iter()
        .map(|m| Listed {
            path: m["path"].as_str().unwrap().to_owned(),
            kind: m["type"].as_str().unwrap().to_owned(),
            mode: m["mode"].as_str().unwrap().to_owned(),
            size: m["size"].as_u64().unwrap(),
            target: m["target"].as_str().map(str::to_owned),
            sha256: if with_contents {
                m["sha256"].as_str().map(str::to_owned)
            } else {
                None
            },
        })
        .collect()
}

/// The manifest's view, packet.json included (its contents are compared
/// among the readers only).
fn manifest_listing(packet: &Path, with_contents: bool) -> Vec<Listed> {
    let inspect = ok(&["inspect", s(packet), "--quiet"]);
    let bytes = fs::read(packet).unwrap();
    let manifest_size =
        u64::from_str_radix(std::str::from_utf8(&bytes[124..135]).unwrap(), 8).unwrap();
    let mut out = vec![Listed {
        path: "packet.json".into(),
        kind: "file".into(),
        mode: "0644".into(),
        size: manifest_size,
        target: None,
        sha256: with_contents.then(|| {
            Digest::of(&bytes[512..512 + manifest_size as usize])
                .hex()
                .to_string()
        }),
    }];
    for m in inspect["members"].as_array().unwrap() {
        out.push(Listed {
            path: m["path"].as_str().unwrap().to_owned(),
            kind: m["type"].as_str().unwrap().to_owned(),
            mode: m["mode"].as_str().unwrap().to_owned(),
            size: m["size"].as_u64().unwrap(),
            target: m["target"].as_str().map(str::to_owned),
            sha256: if with_contents {
                m["sha256"].as_str().map(str::to_owned)
            } else {
                None
            },
        });
    }
    out
}

/// The `tar` crate's listing, and its extraction into `out`.
fn tar_crate(packet: &Path, out: &Path) -> Vec<Listed> {
    use std::io::Read;
    let mut archive = tar::Archive::new(fs::File::open(packet).unwrap());
    let mut members = Vec::new();
    for entry in archive.entries().unwrap() {
        let mut entry = entry.unwrap();
        let header = entry.header().clone();
        let kind = match header.entry_type() {
            tar::EntryType::Regular => "file",
            tar::EntryType::Directory => "dir",
            tar::EntryType::Symlink => "symlink",
            _ => "other",
        };
        let path = entry
            .path()
            .unwrap()
            .to_str()
            .unwrap()
            .trim_end_matches('/')
            .to_owned();
        let target = entry
            .link_name()
            .unwrap()
            .map(|t| t.to_str().unwrap().to_owned());
        let mut contents = Vec::new();
        entry.read_to_end(&mut contents).unwrap();
        members.push(Listed {
            path,
            kind: kind.into(),
            mode: format!("{:04o}", header.mode().unwrap() & 0o7777),
            size: entry.size(),
            target,
            sha256: (kind == "file").then(|| Digest::of(&contents).hex().to_string()),
        });
    }
    fs::create_dir_all(out).unwrap();
    let mut archive = tar::Archive::new(fs::File::open(packet).unwrap());
    archive.set_preserve_permissions(true);
    archive.unpack(out).unwrap();
    members
}

/// A tree with each entry's permission bits (symlinks: none).
fn tree(root: &Path) -> BTreeMap<String, (Node, u32)> {
    snapshot(root)
        .into_iter()
        .map(|(k, v)| {
            let meta = fs::symlink_metadata(root.join(&k)).unwrap();
            let mode = if meta.file_type().is_symlink() {
                0
            } else {
                meta.permissions().mode() & 0o7777
            };
            (k, (v, mode))
        })
        .collect()
}

/// Checks one accepted packet; returns what differed.
fn differential(packet: &Path, digest: &str) -> Result<(), String> {
    let t = tmp();
    let out = Command::new("python3")
        .arg(repo().join("tests/differential/oracles.py"))
        .args([s(packet), s(&t.path().join("oracles"))])
        .output()
        .unwrap();
    if !out.status.success() {
        return Err(format!(
            "oracles.py: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let oracles: Value = serde_json::from_slice(&out.stdout).unwrap();
    for reader in ["gnu", "python"] {
        if let Some(e) = oracles[reader].get("error") {
            return Err(format!("{reader} refused an accepted packet: {e}"));
        }
    }
    let ours = manifest_listing(packet, true);
    let ours_names = manifest_listing(packet, false);
    let tar_rs = tar_crate(packet, &t.path().join("tar-crate"));
    if listed(&oracles["gnu"], false) != ours_names {
        return Err(format!(
            "GNU tar lists {:?}, the manifest {:?}",
            oracles["gnu"], ours_names
        ));
    }
    if listed(&oracles["python"], true) != ours {
        return Err(format!(
            "tarfile lists {}, the manifest {:?}",
            oracles["python"], ours
        ));
    }
    if tar_rs != ours {
        return Err(format!(
            "the tar crate lists {tar_rs:?}, the manifest {ours:?}"
        ));
    }
    let target = t.path().join("unpacked");
    let r = checkpoint(&[
        "unpack",
        s(packet),
        "--digest",
        digest,
        "--into",
        s(&target),
        "--quiet",
    ]);
    if r.code != 0 {
        return Err(format!("unpack refused: {}", r.json()));
    }
    let unpacked = tree(&target);
    for (reader, dir) in [
        ("GNU tar", "oracles/gnu"),
        ("tarfile (data filter)", "oracles/python"),
        ("the tar crate", "tar-crate"),
    ] {
        let theirs = tree(&t.path().join(dir).join("workspace"));
        if theirs != unpacked {
            let differ: Vec<&String> = theirs
                .keys()
                .chain(unpacked.keys())
                .filter(|k| theirs.get(*k) != unpacked.get(*k))
                .collect();
            return Err(format!("{reader} extracts another workspace: {differ:?}"));
        }
    }
    Ok(())
}

/// A small deterministic generator (xorshift64*).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// Names whose portable keys all differ (no two collide on APFS).
fn name_pool() -> Vec<String> {
    let mut v: Vec<String> = [
        "a",
        "b.txt",
        "Makefile",
        "naïve file",
        "日本語",
        "with space",
        "a-b",
        "a.b",
        "x_y",
        ".hidden",
        "ünï",
        "CON",
        "trailing.",
        "🚀",
        "tab-less",
        "z",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    v.push("n".repeat(100));
    v.push(format!("long-{}", "q".repeat(95)));
    v.push("m".repeat(150));
    v
}

fn generate_workspace(root: &Path, rng: &mut Rng, depth: usize) {
    fs::create_dir_all(root).unwrap();
    let mut pool = name_pool();
    let entries = 1 + rng.below(6);
    for _ in 0..entries {
        let name = pool.remove(rng.below(pool.len()));
        let path = root.join(&name);
        match rng.below(10) {
            0..=4 => {
                let size = [0, 1, 511, 512, 513, 1000, 5000, 70_000][rng.below(8)];
                let contents: Vec<u8> = (0..size).map(|_| rng.next() as u8).collect();
                write(&path, contents);
                let mode = if rng.below(3) == 0 { 0o755 } else { 0o644 };
                fs::set_permissions(&path, fs::Permissions::from_mode(mode)).unwrap();
            }
            5..=7 if depth < 4 => generate_workspace(&path, rng, depth + 1),
            5..=7 => fs::create_dir(&path).unwrap(),
            _ => {
                let target = match rng.below(3) {
                    0 if depth > 0 => "..".to_string(),
                    1 => "missing/file".to_string(),
                    _ => pool[rng.below(pool.len())].clone(),
                };
                symlink(target, &path).unwrap();
            }
        }
    }
}

#[test]
fn every_accepted_packet_reads_and_extracts_the_same_everywhere() {
    let mut packets: Vec<(String, PathBuf, String)> = Vec::new();
    // Golden vectors.
    let digests: Value =
        serde_json::from_slice(&fs::read(repo().join("tests/vectors/digests.json")).unwrap())
            .unwrap();
    for (name, digest) in digests.as_object().unwrap() {
        let p = repo().join(format!("tests/vectors/packets/{name}.packet"));
        packets.push((
            format!("vector {name}"),
            p,
            digest.as_str().unwrap().to_owned(),
        ));
    }
    // Accepted adversarial cases.
    for c in &corpus_cases() {
        if c["expect"]["outcome"] == "accept" {
            let file = corpus_dir().join(c["file"].as_str().unwrap());
            let digest = case_digest(c, &file);
            packets.push((format!("case {}", c["id"].as_str().unwrap()), file, digest));
        }
    }
    // Generated workspaces.
    let t = tmp();
    let mut rng = Rng(0x5eed_1234_abcd_0001);
    for i in 0..24 {
        let ws = t.path().join(format!("ws{i}"));
        generate_workspace(&ws, &mut rng, 0);
        let packet = t.path().join(format!("ws{i}.packet"));
        let report = ok(&["pack", s(&ws), "-o", s(&packet), "--quiet"]);
        packets.push((
            format!("generated ws{i}"),
            packet,
            report["digest"].as_str().unwrap().to_owned(),
        ));
    }
    assert!(packets.len() >= 50, "{} packets", packets.len());
    let failures: Vec<String> = packets
        .iter()
        .filter_map(|(name, p, d)| differential(p, d).err().map(|e| format!("{name}: {e}")))
        .collect();
    assert!(
        failures.is_empty(),
        "{} of {} packets are read differently:\n{}",
        failures.len(),
        packets.len(),
        failures.join("\n")
    );
}
