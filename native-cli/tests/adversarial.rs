//! The adversarial corpus (tests/adversarial/cases.json) through the
//! `pillbox` binary: `checkpoint verify` and `checkpoint unpack` for every
//! case.
//!
//! - A refused case exits 3 with the case's code (and path) in the
//!   `pillbox.error/1` object, from both commands; unpack leaves its target
//!   as it found it (absent, or an empty directory), creates no Codex home,
//!   and changes nothing in the directory tree around the target (a
//!   sentinel tree is snapshotted before and after).
//! - A case refused for its expected digest (`digest_syntax`) is a
//!   malformed `--digest` argument to the CLI: both commands exit 2 with a
//!   `usage` error that names `--digest`, and unpack touches nothing.
//! - An accepted case verifies and unpacks, and the unpacked workspace is
//!   exactly what GNU tar extracts from the same packet; the tree around the
//!   target is unchanged apart from the target itself.

mod common;

use std::collections::BTreeMap;
use std::fs;
use std::io::Read;
use std::os::unix::fs::{symlink, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;

use common::{case_digest, checkpoint, corpus_cases, corpus_dir, s, snapshot, tmp, write, Node};
use serde_json::Value;

struct Case {
    id: String,
    code: Option<String>,
    path: Option<String>,
    expected_digest: Option<String>,
    /// The row, for the digest its packet is named by.
    row: Value,
    file: PathBuf,
    /// What verify and unpack report about an accepted packet.
    findings: Value,
}

fn cases() -> Vec<Case> {
    corpus_cases()
        .iter()
        .map(|row| Case {
            id: row["id"].as_str().unwrap().to_owned(),
            code: (row["expect"]["outcome"] == "refuse")
                .then(|| row["expect"]["code"].as_str().unwrap().to_owned()),
            path: row["expect"]["path"].as_str().map(str::to_owned),
            expected_digest: row["expected_digest"].as_str().map(str::to_owned),
            row: row.clone(),
            file: corpus_dir().join(row["file"].as_str().unwrap()),
            findings: row["expect"]
                .get("findings")
                .cloned()
                .unwrap_or_else(|| serde_json::json!({"secrets": [], "git": []})),
        })
        .collect()
}

/// The case's packet as a file (decompressed into `scratch` if stored
/// gzip-compressed).
fn packet_file(case: &Case, scratch: &Path) -> PathBuf {
    if case.file.extension().is_some_and(|e| e == "gz") {
        let mut bytes = Vec::new();
        flate2::read::GzDecoder::new(fs::File::open(&case.file).unwrap())
            .read_to_end(&mut bytes)
            .unwrap();
        let out = scratch.join(format!("{}.packet", case.id));
        fs::write(&out, bytes).unwrap();
        out
    } else {
        case.file.clone()
    }
}

/// A tree that must never change: files, a directory, a symlink pointing
/// out of it, beside the unpack target.
fn sentinel(root: &Path) {
    write(&root.join("sentinel/keep.txt"), "keep\n");
    write(
        &root.join("sentinel/etc/passwd"),
        "root:x:0:0::/root:/bin/sh\n",
    );
    fs::create_dir_all(root.join("sentinel/empty")).unwrap();
    symlink("/etc", root.join("sentinel/etc-link")).unwrap();
    fs::set_permissions(root.join("sentinel"), fs::Permissions::from_mode(0o755)).unwrap();
}

/// Everything under `root` with each entry's permission bits.
fn tree(root: &Path) -> BTreeMap<String, (Node, u32)> {
    snapshot(root)
        .into_iter()
        .map(|(k, v)| {
            let mode = fs::symlink_metadata(root.join(&k))
                .unwrap()
                .permissions()
                .mode();
            (k, (v, mode & 0o7777))
        })
        .collect()
}

/// What a refusal looks like from the CLI: (exit code, `code`).
fn cli_refusal<'a>(code: &'a str, packet: &Path) -> (i32, &'a str) {
    // The expected digest comes in as an argument, so a malformed one is a
    // usage error, found before the packet is opened.
    if code == "digest_syntax" {
        (2, "usage")
    } else if !names_packet_json_first(packet) {
        (5, "not_a_packet")
    } else {
        (3, code)
    }
}

/// docs/cli.md's rule for `not_a_packet`: a file whose first header does
/// not name packet.json (nor is a PAX header), read as far as it goes, is
/// no packet at all, not a damaged one.
fn names_packet_json_first(packet: &Path) -> bool {
    let bytes = fs::read(packet).unwrap();
    let head = &bytes[..bytes.len().min(512)];
    if head.is_empty() {
        return false;
    }
    if head.get(156) == Some(&b'x') {
        return true;
    }
    let field = &head[..head.len().min(100)];
    let end = field.iter().position(|&b| b == 0);
    let name = &field[..end.unwrap_or(field.len())];
    if end.is_some() || field.len() == 100 {
        name == b"packet.json"
    } else {
        b"packet.json".starts_with(name)
    }
}

/// Whether the JSON is the refusal the case expects.
fn refused_as_expected(code: &str, packet: &Path, exit: i32, json: &Value) -> bool {
    let (want_exit, want_code) = cli_refusal(code, packet);
    exit == want_exit
        && json["code"] == want_code
        && json["exit_code"] == want_exit
        && (want_code != "usage"
            || json["message"]
                .as_str()
                .is_some_and(|m| m.contains("--digest")))
}

/// Runs one case; returns what went wrong, if anything.
fn check(case: &Case, index: usize) -> Result<(), String> {
    let t = tmp();
    let root = t.path().join("root");
    sentinel(&root);
    let packet = packet_file(case, t.path());
    let accepted = case.code.is_none();
    let digest = match &case.expected_digest {
        Some(d) => d.clone(),
        None if accepted => case_digest(&case.row, &packet),
        None => String::new(),
    };
    let digest_args: Vec<&str> = if accepted || case.expected_digest.is_some() {
        vec!["--digest", &digest]
    } else {
        vec![]
    };

    // verify
    let mut args = vec!["verify", s(&packet), "--quiet"];
    args.extend(&digest_args);
    let run = checkpoint(&args);
    let json = run.json();
    match &case.code {
        Some(code) => {
            if !refused_as_expected(code, &packet, run.code, &json) {
                return Err(format!(
                    "verify: exit {}, {json}; expected {:?}",
                    run.code,
                    cli_refusal(code, &packet)
                ));
            }
            if case.path.is_some()
                && json["code"] != "not_a_packet"
                && json["path"].as_str() != case.path.as_deref()
            {
                return Err(format!(
                    "verify: path {}, expected {:?}",
                    json["path"], case.path
                ));
            }
        }
        None => {
            if run.code != 0 || json["ok"] != true || json["digest_checked"] != true {
                return Err(format!("verify refused an accepted case: {json}"));
            }
            if json["findings"] != case.findings {
                return Err(format!(
                    "verify reports {}, expected {}",
                    json["findings"], case.findings
                ));
            }
        }
    }

    // unpack: into an absent target (even cases) or an empty one (odd).
    let target = root.join("target");
    let pre_existing = index % 2 == 1;
    if pre_existing {
        fs::create_dir(&target).unwrap();
    }
    let codex_home = root.join("codex-home");
    let before = tree(&root);
    let mut args = vec![
        "unpack",
        s(&packet),
        "--into",
        s(&target),
        "--codex-home",
        s(&codex_home),
        "--quiet",
    ];
    if digest_args.is_empty() {
        args.push("--trust-unverified");
    } else {
        args.extend(&digest_args);
    }
    let run = checkpoint(&args);
    let json = run.json();
    match &case.code {
        Some(code) => {
            if !refused_as_expected(code, &packet, run.code, &json) {
                return Err(format!(
                    "unpack: exit {}, {json}; expected {:?}",
                    run.code,
                    cli_refusal(code, &packet)
                ));
            }
            if case.path.is_some()
                && json["code"] != "not_a_packet"
                && json["path"].as_str() != case.path.as_deref()
            {
                return Err(format!(
                    "unpack: path {}, expected {:?}",
                    json["path"], case.path
                ));
            }
            let after = tree(&root);
            if after != before {
                let changed: Vec<&String> = after
                    .keys()
                    .chain(before.keys())
                    .filter(|k| after.get(*k) != before.get(*k))
                    .collect();
                return Err(format!(
                    "unpack changed the tree around the target: {changed:?}"
                ));
            }
            if pre_existing != target.exists() {
                return Err("unpack left the target in another state".into());
            }
        }
        None => {
            if run.code != 0 {
                return Err(format!("unpack refused an accepted case: {json}"));
            }
            if json["findings"] != case.findings {
                return Err(format!(
                    "unpack reports {}, expected {}",
                    json["findings"], case.findings
                ));
            }
            // GNU tar is the oracle for what the workspace holds (so no
            // staging folder or anything else may remain beside it).
            let gnu = t.path().join("gnu");
            fs::create_dir(&gnu).unwrap();
            let out = Command::new("tar")
                .args(["-xf", s(&packet), "-C", s(&gnu), "--no-same-owner"])
                .output()
                .unwrap();
            if !out.status.success() {
                return Err(format!("GNU tar: {}", String::from_utf8_lossy(&out.stderr)));
            }
            if tree(&gnu.join("workspace")) != tree(&target) {
                return Err("the unpacked workspace differs from GNU tar's extraction".into());
            }
            let mut after = tree(&root);
            after.retain(|k, _| k != "target" && !k.starts_with("target/"));
            after.retain(|k, _| k != "codex-home" && !k.starts_with("codex-home/"));
            let mut expected = before.clone();
            expected.retain(|k, _| k != "target");
            if after != expected {
                return Err("unpack wrote outside its targets".into());
            }
        }
    }
    Ok(())
}

#[test]
fn every_adversarial_case_is_refused_or_unpacked_safely() {
    let cases = cases();
    assert!(cases.len() >= 60);
    // Absolute paths some cases aim at must not appear.
    let aimed = ["/etc/cron.d/evil", "/evil"];
    let existed: Vec<bool> = aimed.iter().map(|p| Path::new(p).exists()).collect();
    let failures: Vec<String> = cases
        .iter()
        .enumerate()
        .filter_map(|(i, c)| check(c, i).err().map(|e| format!("{}: {e}", c.id)))
        .collect();
    for (p, existed) in aimed.iter().zip(existed) {
        assert_eq!(Path::new(p).exists(), existed, "{p} appeared");
    }
    assert!(
        failures.is_empty(),
        "{} of {} cases failed:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}

#[test]
fn the_checked_in_corpus_is_what_the_generator_produces() {
    let out = Command::new("python3")
        .arg(corpus_dir().join("generate.py"))
        .arg("--check")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "tests/adversarial drifted from generate.py: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}
