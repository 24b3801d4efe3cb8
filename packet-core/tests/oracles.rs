//! Independent readers agree with the format: every golden vector, /2 and
//! /1, is listed and extracted with the same members, types, modes, link
//! targets and contents by GNU tar, Python's `tarfile` (with the `data`
//! extraction filter) and the `tar` crate.
//!
//! Needs `tar` (GNU) and `python3` (3.11.4 or newer, for `filter='data'`)
//! on the PATH.
#![cfg(not(target_arch = "wasm32"))]

#[allow(dead_code)]
#[path = "../../tests/vectors/src/description.rs"]
mod description;

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use description::{parse_digests, Description};
use packet_core::in_memory::Source;
use packet_core::Format;

/// What a reader says a member is.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Node {
    Dir { mode: u32 },
    File { mode: u32, contents: Vec<u8> },
    Symlink { target: String },
}

fn vectors_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/vectors")
}

/// (name, packet path, expected members including packet.json) of every
/// vector, /2 and /1 (tests/vectors/v1): the two versions are the same
/// tar, and packets of both are on disks to be read.
fn vectors() -> Vec<(String, PathBuf, BTreeMap<String, Node>)> {
    let digests = std::fs::read_to_string(vectors_dir().join("digests.json")).unwrap();
    let names: Vec<String> = parse_digests(&digests)
        .unwrap()
        .into_iter()
        .map(|(name, _)| name)
        .collect();
    let v1 = std::fs::read_to_string(vectors_dir().join("v1/digests.json")).unwrap();
    let v1: Vec<String> = parse_digests(&v1)
        .unwrap()
        .into_iter()
        .map(|(name, _)| name)
        .collect();
    assert_eq!(names, v1);
    let mut out = Vec::new();
    for (format, folder) in [(Format::V2, "packets"), (Format::V1, "v1/packets")] {
        for name in &names {
            let text =
                std::fs::read_to_string(vectors_dir().join(format!("descriptions/{name}.json")))
                    .unwrap();
            let description = Description::parse(&text).unwrap();
            let built = description.build_as(format).unwrap();
            let mut expected = BTreeMap::new();
            expected.insert(
                "packet.json".to_string(),
                Node::File {
                    mode: 0o644,
                    contents: built.manifest.to_canonical_json(),
                },
            );
            for s in description.sources().unwrap() {
                let (path, node) = match s {
                    Source::Dir { path } => (path, Node::Dir { mode: 0o755 }),
                    Source::File {
                        path,
                        contents,
                        executable,
                    } => (
                        path,
                        Node::File {
                            mode: if executable { 0o755 } else { 0o644 },
                            contents,
                        },
                    ),
                    Source::Symlink { path, target } => (path, Node::Symlink { target }),
                };
                expected.insert(path, node);
            }
            let packet = vectors_dir().join(format!("{folder}/{name}.packet"));
            out.push((format!("{name} ({format:?})"), packet, expected));
        }
    }
    out
}

/// A scratch directory removed on drop.
struct Scratch(PathBuf);

impl Scratch {
    fn new(tag: &str) -> Scratch {
        use std::sync::atomic::{AtomicUsize, Ordering};
        static N: AtomicUsize = AtomicUsize::new(0);
        let dir = std::env::temp_dir().join(format!(
            "packet-core-oracle-{}-{tag}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::SeqCst)
        ));
        std::fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Everything under `root`, as relative paths.
fn walk(root: &Path) -> BTreeMap<String, Node> {
    fn go(root: &Path, dir: &Path, out: &mut BTreeMap<String, Node>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let entry = entry.unwrap();
            let path = entry.path();
            let rel = path
                .strip_prefix(root)
                .unwrap()
                .to_str()
                .unwrap()
                .to_string();
            let meta = std::fs::symlink_metadata(&path).unwrap();
            let mode = meta.permissions().mode() & 0o7777;
            if meta.file_type().is_symlink() {
                let target = std::fs::read_link(&path).unwrap();
                out.insert(
                    rel,
                    Node::Symlink {
                        target: target.to_str().unwrap().to_string(),
                    },
                );
            } else if meta.is_dir() {
                out.insert(rel, Node::Dir { mode });
                go(root, &path, out);
            } else {
                assert!(meta.is_file(), "{rel}: not a regular file");
                out.insert(
                    rel,
                    Node::File {
                        mode,
                        contents: std::fs::read(&path).unwrap(),
                    },
                );
            }
        }
    }
    let mut out = BTreeMap::new();
    go(root, root, &mut out);
    out
}

fn run(cmd: &mut Command) -> Vec<u8> {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?}: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

#[test]
fn gnu_tar_lists_and_extracts_every_vector() {
    for (name, packet, expected) in vectors() {
        // Listing: permissions, numeric owner 0/0, size, name, link target.
        let listing = run(Command::new("tar")
            .env("LC_ALL", "C.UTF-8")
            .args([
                "--quoting-style=literal",
                "--numeric-owner",
                "--full-time",
                "-tvf",
            ])
            .arg(&packet));
        let listing = String::from_utf8(listing).unwrap();
        let mut listed = Vec::new();
        for line in listing.lines() {
            // "-rw-r--r-- 0/0 6 1970-01-01 00:00:00 workspace/a -> t"
            let mut fields = line.splitn(6, ' ').filter(|f| !f.is_empty());
            let perms = fields.next().unwrap().to_string();
            let rest: Vec<&str> = line[perms.len()..].split_whitespace().collect();
            assert_eq!(rest[0], "0/0", "{name}: {line}");
            assert_eq!(rest[2], "1970-01-01", "{name}: {line}");
            assert_eq!(rest[3], "00:00:00", "{name}: {line}");
            let after_time = line.find(" 00:00:00 ").unwrap() + " 00:00:00 ".len();
            let name_part = &line[after_time..];
            let (path, target) = match name_part.split_once(" -> ") {
                Some((p, t)) if perms.starts_with('l') => (p.to_string(), Some(t.to_string())),
                _ => (name_part.to_string(), None),
            };
            let size: u64 = rest[1].parse().unwrap();
            listed.push((perms, size, path, target));
        }
        assert_eq!(listed.len(), expected.len(), "{name}");
        for (perms, size, path, target) in &listed {
            let node = expected
                .get(path)
                .unwrap_or_else(|| panic!("{name}: tar lists {path:?}"));
            let want = match node {
                Node::Dir { .. } => ("drwxr-xr-x".to_string(), 0, None),
                Node::File { mode, contents } => (
                    if *mode == 0o755 {
                        "-rwxr-xr-x"
                    } else {
                        "-rw-r--r--"
                    }
                    .to_string(),
                    contents.len() as u64,
                    None,
                ),
                Node::Symlink { target } => ("lrwxrwxrwx".to_string(), 0, Some(target.clone())),
            };
            assert_eq!(
                (perms.clone(), *size, target.clone()),
                want,
                "{name}: {path}"
            );
        }
        // The archive order is the manifest's order.
        let order: Vec<&str> = listed.iter().map(|l| l.2.as_str()).collect();
        assert_eq!(order[0], "packet.json");
        let mut sorted = order[1..].to_vec();
        sorted.sort_by(|a, b| packet_core::path::compare(a, b));
        assert_eq!(order[1..], sorted[..], "{name}");

        // Extraction.
        let dir = Scratch::new("gnu");
        run(Command::new("tar")
            .arg("-xf")
            .arg(&packet)
            .arg("-C")
            .arg(&dir.0));
        assert_eq!(walk(&dir.0), expected, "{name}");
    }
}

const PYTHON_ORACLE: &str = r#"
import json, sys, tarfile
packet, dest = sys.argv[1], sys.argv[2]
members = []
with tarfile.open(packet, mode="r:") as tf:
    for m in tf.getmembers():
        kind = "dir" if m.isdir() else "file" if m.isreg() else "symlink" if m.issym() else "other"
        members.append({"name": m.name, "type": kind, "mode": m.mode, "size": m.size,
                        "linkname": m.linkname, "mtime": m.mtime, "uid": m.uid, "gid": m.gid,
                        "uname": m.uname, "gname": m.gname, "pax": m.pax_headers})
    tf.extractall(dest, filter="data")
json.dump(members, sys.stdout)
"#;

#[test]
fn python_tarfile_lists_and_extracts_every_vector() {
    for (name, packet, expected) in vectors() {
        let dir = Scratch::new("python");
        let out = run(Command::new("python3")
            .args(["-c", PYTHON_ORACLE])
            .arg(&packet)
            .arg(&dir.0));
        let listed: Vec<serde_json::Value> = serde_json::from_slice(&out).unwrap();
        assert_eq!(listed.len(), expected.len(), "{name}");
        let mut previous: Option<String> = None;
        for m in &listed {
            let path = m["name"].as_str().unwrap();
            let node = expected
                .get(path)
                .unwrap_or_else(|| panic!("{name}: python lists {path:?}"));
            let (kind, mode, size, link) = match node {
                Node::Dir { mode } => ("dir", *mode, 0, ""),
                Node::File { mode, contents } => ("file", *mode, contents.len() as u64, ""),
                Node::Symlink { target } => ("symlink", 0o777, 0, target.as_str()),
            };
            assert_eq!(m["type"], kind, "{name}: {path}");
            assert_eq!(m["mode"].as_u64(), Some(u64::from(mode)), "{name}: {path}");
            assert_eq!(m["size"].as_u64(), Some(size), "{name}: {path}");
            assert_eq!(m["linkname"], link, "{name}: {path}");
            for zero in ["mtime", "uid", "gid"] {
                assert_eq!(m[zero].as_u64(), Some(0), "{name}: {path}: {zero}");
            }
            assert_eq!(m["uname"], "", "{name}: {path}");
            assert_eq!(m["gname"], "", "{name}: {path}");
            // PAX headers carry only path and linkpath, and only when needed.
            for key in m["pax"].as_object().unwrap().keys() {
                assert!(
                    key == "path" || key == "linkpath",
                    "{name}: {path}: PAX key {key}"
                );
            }
            if let Some(p) = &previous {
                if p != "packet.json" {
                    assert_eq!(
                        packet_core::path::compare(p, path),
                        std::cmp::Ordering::Less
                    );
                }
            }
            previous = Some(path.to_string());
        }
        assert_eq!(walk(&dir.0), expected, "{name}");
    }
}

#[test]
fn tar_crate_lists_and_unpacks_every_vector() {
    for (name, packet, expected) in vectors() {
        let bytes = std::fs::read(&packet).unwrap();
        let mut archive = tar::Archive::new(bytes.as_slice());
        let mut listed = BTreeMap::new();
        for entry in archive.entries().unwrap() {
            let mut entry = entry.unwrap();
            let path = String::from_utf8(entry.path_bytes().into_owned()).unwrap();
            let header = entry.header().clone();
            assert_eq!(header.mtime().unwrap(), 0, "{name}: {path}");
            assert_eq!(
                (header.uid().unwrap(), header.gid().unwrap()),
                (0, 0),
                "{name}: {path}"
            );
            let mode = header.mode().unwrap();
            let node = match header.entry_type() {
                tar::EntryType::Directory => Node::Dir { mode },
                tar::EntryType::Regular => {
                    let mut contents = Vec::new();
                    std::io::Read::read_to_end(&mut entry, &mut contents).unwrap();
                    Node::File { mode, contents }
                }
                tar::EntryType::Symlink => Node::Symlink {
                    target: String::from_utf8(entry.link_name_bytes().unwrap().into_owned())
                        .unwrap(),
                },
                other => panic!("{name}: {path}: {other:?}"),
            };
            assert!(listed.insert(path, node).is_none(), "{name}: duplicate");
        }
        assert_eq!(listed, expected, "{name}");
        let dir = Scratch::new("tar-crate");
        let mut archive = tar::Archive::new(bytes.as_slice());
        archive.set_preserve_permissions(true);
        archive.unpack(&dir.0).unwrap();
        assert_eq!(walk(&dir.0), expected, "{name}");
    }
}
