//! `proto/pillbox/session-packet-2.schema.json` describes exactly what
//! `Manifest::to_canonical_json` writes, and `session-packet-1.schema.json`
//! what /1 writers wrote: every vector's manifest (and a few more built
//! here) validates against its version's schema and not the other's, and a
//! set of invalid manifests is refused by both the schema and
//! `Manifest::parse`.
//!
//! Runs `python3 check_schema.py` (needs the `jsonschema` package).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use packet_core::{Digest, Format, Harness, HarnessKind, Limits, Manifest, Member, ReaderOptions};
use serde_json::{json, Value};

/// The schema of the manifests of `format`.
fn schema(format: Format) -> PathBuf {
    let n = match format {
        Format::V1 => 1,
        Format::V2 => 2,
    };
    packet_vectors::root().join(format!(
        "../../proto/pillbox/session-packet-{n}.schema.json"
    ))
}

/// A scratch directory removed on drop.
struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn manifest_of(packet: &[u8]) -> Manifest {
    packet_core::reader::verify(packet, ReaderOptions::default())
        .unwrap()
        .manifest
}

/// (format, name, manifest) of valid manifests of both versions.
fn valid_manifests() -> Vec<(Format, String, Vec<u8>)> {
    let mut out = Vec::new();
    for name in packet_vectors::names().unwrap() {
        let manifest = manifest_of(&packet_vectors::packet(&name).unwrap());
        assert_eq!(manifest.format, Format::V2, "{name}");
        out.push((Format::V2, name.clone(), manifest.to_canonical_json()));
        let manifest = manifest_of(&packet_vectors::v1_packet(&name).unwrap());
        assert_eq!(manifest.format, Format::V1, "{name}");
        out.push((Format::V1, name, manifest.to_canonical_json()));
    }
    // A Claude Code harness without a model.
    let id = "3f2b8c1e-9a7d-4e21-8b6f-0c5d4e3a2b1c";
    let transcript = format!("harness/claude/projects/-work/{id}.jsonl");
    let manifest = Manifest::build(
        vec![
            Member::dir("harness"),
            Member::dir("harness/claude"),
            Member::dir("harness/claude/projects"),
            Member::dir("harness/claude/projects/-work"),
            Member::file(
                packet_core::MemberPath::parse(&transcript).unwrap(),
                3,
                Digest::of(b"{}\n"),
                false,
            ),
            Member::dir("workspace"),
        ],
        Some(Harness {
            kind: HarnessKind::Claude,
            model: None,
            provider: None,
            session_log: transcript,
            session_id: id.into(),
            version: None,
        }),
        vec![],
        &Limits::FORMAT,
    )
    .unwrap();
    out.push((
        Format::V2,
        "claude-harness".into(),
        manifest.to_canonical_json(),
    ));
    // /2 carries files over 1 GiB, up to what a ustar header declares.
    out.push((Format::V2, "large-files".into(), large_files(Format::V2)));
    out
}

/// A manifest of a 3 GiB file and one of 8 GiB - 1 byte, in `format`.
fn large_files(format: Format) -> Vec<u8> {
    let mut manifest = Manifest::assemble(
        vec![
            Member::dir("workspace"),
            Member::file("workspace/disk.img", 3 << 30, Digest::of(b"3"), false),
            Member::file("workspace/most", (8 << 30) - 1, Digest::of(b"8"), false),
        ],
        None,
        vec![],
    );
    manifest.format = format;
    manifest.to_canonical_json()
}

/// The manifest of the `exec-bits` vector with one change.
fn changed(f: impl FnOnce(&mut Value)) -> Vec<u8> {
    let bytes = packet_vectors::packet("exec-bits").unwrap();
    let manifest = packet_core::reader::verify(&bytes, ReaderOptions::default())
        .unwrap()
        .manifest;
    let mut v: Value = serde_json::from_slice(&manifest.to_canonical_json()).unwrap();
    f(&mut v);
    serde_json::to_vec(&v).unwrap()
}

/// The manifest of the `harness-codex` vector with one change.
fn harness_manifest(f: impl FnOnce(&mut Value)) -> Vec<u8> {
    let bytes = packet_vectors::packet("harness-codex").unwrap();
    let manifest = packet_core::reader::verify(&bytes, ReaderOptions::default())
        .unwrap()
        .manifest;
    let mut v: Value = serde_json::from_slice(&manifest.to_canonical_json()).unwrap();
    f(&mut v);
    serde_json::to_vec(&v).unwrap()
}

/// Invalid /1 manifests: /1's limit, and an id that is neither version's.
fn invalid_v1_manifests() -> Vec<(&'static str, Vec<u8>)> {
    let changed = |f: &dyn Fn(&mut Value)| {
        let manifest = manifest_of(&packet_vectors::v1_packet("exec-bits").unwrap());
        let mut v: Value = serde_json::from_slice(&manifest.to_canonical_json()).unwrap();
        f(&mut v);
        serde_json::to_vec(&v).unwrap()
    };
    vec![
        ("large-files", large_files(Format::V1)),
        (
            "size-over-1gib",
            changed(&|v| v["members"][2]["size"] = json!(1073741825u64)),
        ),
        (
            "format-between-versions",
            changed(&|v| v["format"] = json!("pillbox.session-packet/1.5")),
        ),
    ]
}

/// Invalid /2 manifests.
fn invalid_manifests() -> Vec<(&'static str, Vec<u8>)> {
    vec![
        (
            "unknown-top-level-key",
            changed(|v| v["created"] = json!(0)),
        ),
        ("null-harness", changed(|v| v["harness"] = Value::Null)),
        (
            "null-exclusions",
            changed(|v| v["exclusions"] = Value::Null),
        ),
        ("empty-exclusions", changed(|v| v["exclusions"] = json!([]))),
        (
            "missing-totals",
            changed(|v| {
                v.as_object_mut().unwrap().remove("totals");
            }),
        ),
        (
            "missing-format",
            changed(|v| {
                v.as_object_mut().unwrap().remove("format");
            }),
        ),
        (
            "other-format",
            changed(|v| v["format"] = json!("pillbox.session-packet/3")),
        ),
        (
            "format-between-versions",
            changed(|v| v["format"] = json!("pillbox.session-packet/1.5")),
        ),
        ("members-not-array", changed(|v| v["members"] = json!({}))),
        (
            "unknown-member-key",
            changed(|v| v["members"][0]["mtime"] = json!(0)),
        ),
        (
            "null-member-target",
            changed(|v| v["members"][0]["target"] = Value::Null),
        ),
        (
            "dir-with-size",
            changed(|v| v["members"][0]["size"] = json!(0)),
        ),
        (
            "dir-mode-0700",
            changed(|v| v["members"][0]["mode"] = json!("0700")),
        ),
        (
            "file-mode-4755",
            changed(|v| v["members"][2]["mode"] = json!("4755")),
        ),
        (
            "file-mode-number",
            changed(|v| v["members"][2]["mode"] = json!(420)),
        ),
        (
            "type-hardlink",
            changed(|v| v["members"][2]["type"] = json!("hardlink")),
        ),
        (
            "file-without-sha256",
            changed(|v| {
                v["members"][2].as_object_mut().unwrap().remove("sha256");
            }),
        ),
        (
            "file-with-target",
            changed(|v| v["members"][2]["target"] = json!("x")),
        ),
        (
            "sha256-uppercase",
            changed(|v| {
                let s = v["members"][2]["sha256"].as_str().unwrap().to_uppercase();
                v["members"][2]["sha256"] = json!(s);
            }),
        ),
        (
            "sha256-prefixed",
            changed(|v| {
                let s = format!("sha256:{}", v["members"][2]["sha256"].as_str().unwrap());
                v["members"][2]["sha256"] = json!(s);
            }),
        ),
        (
            "size-negative",
            changed(|v| v["members"][2]["size"] = json!(-1)),
        ),
        (
            "size-string",
            changed(|v| v["members"][2]["size"] = json!("15")),
        ),
        (
            "size-8gib",
            changed(|v| v["members"][2]["size"] = json!(8u64 << 30)),
        ),
        (
            "path-absolute",
            changed(|v| v["members"][2]["path"] = json!("/workspace/bin/data.txt")),
        ),
        (
            "path-dotdot",
            changed(|v| v["members"][2]["path"] = json!("workspace/../data.txt")),
        ),
        (
            "path-dot",
            changed(|v| v["members"][2]["path"] = json!("workspace/./data.txt")),
        ),
        (
            "path-empty-component",
            changed(|v| v["members"][2]["path"] = json!("workspace//data.txt")),
        ),
        (
            "path-trailing-slash",
            changed(|v| v["members"][2]["path"] = json!("workspace/bin/")),
        ),
        (
            "path-control-char",
            changed(|v| v["members"][2]["path"] = json!("workspace/a\u{1}b")),
        ),
        (
            "path-outside-roots",
            changed(|v| v["members"][2]["path"] = json!("home/data.txt")),
        ),
        (
            "totals-extra-key",
            changed(|v| v["totals"]["dirs"] = json!(1)),
        ),
        (
            "totals-null",
            changed(|v| v["totals"]["bytes"] = Value::Null),
        ),
        (
            "exclusion-matched-zero",
            changed(|v| {
                v["exclusions"] = json!([{"matched": 0, "pattern": "*.log", "rule": "user"}]);
            }),
        ),
        (
            "exclusion-extra-key",
            changed(|v| {
                v["exclusions"] =
                    json!([{"matched": 1, "pattern": "*.log", "rule": "user", "paths": []}]);
            }),
        ),
        (
            "harness-kind-opencode",
            harness_manifest(|v| v["harness"]["kind"] = json!("opencode")),
        ),
        (
            "harness-null-model",
            harness_manifest(|v| v["harness"]["model"] = Value::Null),
        ),
        (
            "harness-empty-model",
            harness_manifest(|v| v["harness"]["model"] = json!("")),
        ),
        (
            "harness-extra-key",
            harness_manifest(|v| v["harness"]["cwd"] = json!("/work")),
        ),
        (
            "harness-thread-uppercase",
            harness_manifest(|v| {
                let s = v["harness"]["thread_id"].as_str().unwrap().to_uppercase();
                v["harness"]["thread_id"] = json!(s);
            }),
        ),
        (
            "harness-missing-rollout",
            harness_manifest(|v| {
                v["harness"].as_object_mut().unwrap().remove("rollout");
            }),
        ),
        (
            "harness-rollout-in-workspace",
            harness_manifest(|v| v["harness"]["rollout"] = json!("workspace/notes.md")),
        ),
    ]
}

/// Runs check_schema.py on `dir` with `format`'s schema; returns how many
/// files it found right.
fn check(format: Format, dir: &Path) -> usize {
    let out = Command::new("python3")
        .arg(packet_vectors::root().join("check_schema.py"))
        .arg(schema(format))
        .arg(dir)
        .output()
        .expect("python3 runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{format:?}:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout.lines().filter(|l| l.starts_with("ok ")).count()
}

#[test]
fn the_schema_accepts_every_manifest_and_refuses_invalid_ones() {
    let dir =
        Scratch(std::env::temp_dir().join(format!("packet-vectors-schema-{}", std::process::id())));
    let folder = |format: Format| dir.0.join(format!("{format:?}"));
    for format in Format::ALL {
        std::fs::create_dir_all(folder(format)).unwrap();
    }
    // How many files each version's folder holds.
    let mut expected: BTreeMap<Format, usize> = BTreeMap::new();
    let mut write = |format: Format, file: String, json: &[u8]| {
        std::fs::write(folder(format).join(file), json).unwrap();
        *expected.entry(format).or_default() += 1;
    };
    let valid = valid_manifests();
    assert!(valid.len() >= 26);
    for (format, name, json) in &valid {
        // packet-core reads it as that version.
        let parsed = Manifest::parse(json, &Limits::FORMAT).unwrap();
        assert_eq!(parsed.format, *format, "{name}");
        write(*format, format!("valid-{name}.json"), json);
        // The other version's schema refuses it.
        let other = if *format == Format::V1 {
            Format::V2
        } else {
            Format::V1
        };
        write(other, format!("invalid-other-version-{name}.json"), json);
    }
    let invalid = invalid_manifests()
        .into_iter()
        .map(|(name, json)| (Format::V2, name, json))
        .chain(
            invalid_v1_manifests()
                .into_iter()
                .map(|(name, json)| (Format::V1, name, json)),
        );
    for (format, name, json) in invalid {
        // packet-core refuses each of them too.
        let e = Manifest::parse(&json, &Limits::FORMAT)
            .err()
            .unwrap_or_else(|| panic!("{format:?} {name}: Manifest::parse accepted it"));
        assert!(
            matches!(
                e.code().as_str(),
                "manifest_invalid"
                    | "manifest_not_canonical"
                    | "mode_not_canonical"
                    | "path_absolute"
                    | "path_not_canonical"
                    | "path_control_char"
                    | "path_outside_roots"
                    | "limit_size"
                    | "harness_invalid"
            ),
            "{format:?} {name}: {e}"
        );
        write(format, format!("invalid-{name}.json"), &json);
    }
    for (format, files) in expected {
        assert_eq!(check(format, &folder(format)), files, "{format:?}");
    }
}
