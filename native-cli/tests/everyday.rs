//! What a person meets first: member paths as they are in the workspace,
//! `diff --exit-code`, a packet written into the workspace it packs, an
//! output folder that does not exist yet, files that are no packet at all,
//! ids in the wrong shape (docs/cli.md).

mod common;
mod store;

use std::fs;
use std::io::Write;
use std::path::Path;

use common::*;

fn workspace(dir: &Path) -> std::path::PathBuf {
    let ws = dir.join("ws");
    write(&ws.join("src/main.rs"), "fn main() {}\n");
    write(&ws.join("README.md"), "hello\n");
    ws
}

#[test]
fn cat_takes_a_path_relative_to_the_workspace() {
    let t = tmp();
    let ws = workspace(t.path());
    write(&ws.join("harness/notes.txt"), "not a session log\n");
    let packet = t.path().join("p.tar");
    ok(&["pack", s(&ws), "-o", s(&packet), "-q"]);
    for name in ["src/main.rs", "./src/main.rs", "workspace/src/main.rs"] {
        let r = checkpoint(&["cat", s(&packet), name, "-q"]);
        assert_eq!(r.code, 0, "{name}: {}", String::from_utf8_lossy(&r.stdout));
        assert_eq!(r.stdout, b"fn main() {}\n", "{name}");
        assert_eq!(r.stderr_json()["path"], "workspace/src/main.rs");
    }
    // harness/notes.txt is the workspace's file: the packet has no
    // harness/ member of that name.
    let r = checkpoint(&["cat", s(&packet), "harness/notes.txt", "-q"]);
    assert_eq!(r.stdout, b"not a session log\n");
    let r = checkpoint(&["cat", s(&packet), "src/nope.rs", "-q"]);
    assert_eq!(r.code, 5);
    let j = r.stderr_json();
    assert_eq!(j["code"], "member_not_found");
    assert!(
        j["advice"]
            .as_str()
            .unwrap()
            .contains("relative to the workspace"),
        "{j}"
    );
}

#[test]
fn a_name_that_is_two_members_is_refused_with_both() {
    use packet_core::in_memory::{build, Source};
    use packet_core::{Harness, HarnessKind, Limits};
    const SESSION: &str = "5f1c7a0e-2b6d-4c3e-9a8f-0123456789ab";
    let t = tmp();
    let file = |path: &str, text: &str| Source::File {
        path: path.into(),
        contents: text.as_bytes().to_vec(),
        executable: false,
    };
    let dir = |path: &str| Source::Dir { path: path.into() };
    // A Claude Code session whose workspace also has a harness/ folder.
    let log = format!("harness/claude/{SESSION}.jsonl");
    let packet = t.path().join("p.tar");
    let built = build(
        &[
            dir("harness"),
            dir("harness/claude"),
            file(&log, "{\"sessionId\":\"x\"}\n"),
            dir("workspace"),
            dir("workspace/harness"),
            dir("workspace/harness/claude"),
            file(&format!("workspace/{log}"), "the workspace's\n"),
        ],
        Some(Harness {
            kind: HarnessKind::Claude,
            model: None,
            session_log: log.clone(),
            session_id: SESSION.into(),
            provider: None,
            version: None,
        }),
        vec![],
        &Limits::FORMAT,
    )
    .unwrap();
    fs::write(&packet, built.bytes).unwrap();
    let r = checkpoint(&["cat", s(&packet), &log, "-q"]);
    assert_eq!(r.code, 5);
    let j = r.stderr_json();
    assert_eq!(j["code"], "member_ambiguous");
    let message = j["message"].as_str().unwrap();
    assert!(
        message.contains(&format!("{log} and workspace/{log}")),
        "{message}"
    );
    let r = checkpoint(&["cat", s(&packet), &format!("workspace/{log}"), "-q"]);
    assert_eq!(r.stdout, b"the workspace's\n");
}

#[test]
fn diff_exit_code_says_whether_the_packets_differ() {
    let t = tmp();
    let ws = workspace(t.path());
    let (a, b) = (t.path().join("a.tar"), t.path().join("b.tar"));
    ok(&["pack", s(&ws), "-o", s(&a), "-q"]);
    let same = checkpoint(&["diff", s(&a), s(&a), "--exit-code", "-q"]);
    assert_eq!(same.code, 0);
    assert_eq!(same.json()["identical"], true);
    write(&ws.join("README.md"), "changed\n");
    ok(&["pack", s(&ws), "-o", s(&b), "-q"]);
    let differ = checkpoint(&["diff", s(&a), s(&b), "--exit-code", "-q"]);
    assert_eq!(differ.code, 1);
    assert_eq!(differ.json()["identical"], false);
    // Without --exit-code a diff that found changes succeeded.
    assert_eq!(checkpoint(&["diff", s(&a), s(&b), "-q"]).code, 0);
}

#[test]
fn a_packet_written_into_the_workspace_is_not_packed_into_itself() {
    let t = tmp();
    let ws = workspace(t.path());
    let run_in = |args: &[&str]| {
        let mut cmd = pillbox();
        cmd.current_dir(&ws).arg("checkpoint").args(args);
        run(&mut cmd)
    };
    let r = run_in(&["pack", ".", "-o", "./self.tar", "-q"]);
    assert_eq!(r.code, 0);
    let first = r.json();
    // An interrupted pack's temporary file, too.
    write(&ws.join(".pillbox-pack-Ab12Cd"), "half a packet");
    let r = run_in(&["pack", ".", "-o", "./self.tar", "-q"]);
    assert_eq!(r.code, 0);
    let second = r.json();
    assert_eq!(
        second["digest"], first["digest"],
        "the old self.tar was packed"
    );
    let skipped: Vec<(&str, &str)> = second["skipped"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| (x["path"].as_str().unwrap(), x["rule"].as_str().unwrap()))
        .collect();
    assert_eq!(
        skipped,
        [
            ("workspace/.pillbox-pack-Ab12Cd", "pack-output"),
            ("workspace/self.tar", "pack-output")
        ]
    );
    let listed = ok(&["inspect", s(&ws.join("self.tar")), "-q"]);
    let names: Vec<&str> = listed["members"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["path"].as_str().unwrap())
        .collect();
    assert!(
        !names
            .iter()
            .any(|n| n.ends_with("self.tar") || n.contains(".pillbox-pack-")),
        "{names:?}"
    );
}

#[test]
fn pack_creates_the_output_folder() {
    let t = tmp();
    let ws = workspace(t.path());
    let out = t.path().join("new/deeper/p.tar");
    let j = ok(&["pack", s(&ws), "-o", s(&out), "-q"]);
    assert_eq!(j["output"], s(&out));
    assert!(out.is_file());
}

#[test]
fn a_file_that_is_no_packet_is_named_as_such() {
    let t = tmp();
    let ws = workspace(t.path());
    let packet = t.path().join("p.tar");
    ok(&["pack", s(&ws), "-o", s(&packet), "-q"]);
    let empty = t.path().join("empty");
    fs::write(&empty, b"").unwrap();
    let gz = t.path().join("p.tar.gz");
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    enc.write_all(&fs::read(&packet).unwrap()).unwrap();
    fs::write(&gz, enc.finish().unwrap()).unwrap();
    let plain = t.path().join("plain.tar");
    let mut builder = tar::Builder::new(Vec::new());
    builder
        .append_path_with_name(ws.join("README.md"), "README.md")
        .unwrap();
    fs::write(&plain, builder.into_inner().unwrap()).unwrap();
    for (file, what) in [
        (
            ws.join("src/main.rs"),
            "does not begin with a packet's packet.json",
        ),
        (empty, "it is empty"),
        (gz, "gzip-compressed"),
        (plain, "a tar archive whose first member is not packet.json"),
    ] {
        for command in ["verify", "inspect"] {
            let j = fails(&[command, s(&file), "-q"], 5, "not_a_packet");
            let message = j["message"].as_str().unwrap();
            assert!(message.contains("is not a pillbox packet"), "{message}");
            assert!(message.contains(what), "{message}");
            assert_eq!(j["path"], s(&file));
        }
    }
    // A packet cut short is a damaged packet, not "no packet".
    let bytes = fs::read(&packet).unwrap();
    let cut = t.path().join("cut.tar");
    fs::write(&cut, &bytes[..bytes.len() / 2]).unwrap();
    fails(&["verify", s(&cut), "-q"], 3, "truncated");
}

#[test]
fn an_id_in_the_wrong_shape_is_a_usage_error_showing_the_shape() {
    let t = tmp();
    let ws = workspace(t.path());
    let upper = "0199A213-81C0-7800-8AA1-BBAB2A035A53";
    for args in [
        vec![
            "pack",
            s(&ws),
            "-o",
            "x.tar",
            "--harness",
            "codex",
            "--thread",
            upper,
            "--codex-home",
            "h",
        ],
        vec![
            "pack",
            s(&ws),
            "-o",
            "x.tar",
            "--harness",
            "claude",
            "--session",
            "not-a-uuid",
        ],
        vec![
            "restore-check",
            "--thread",
            upper,
            "--rollout-path",
            "/x.jsonl",
        ],
    ] {
        let j = fails(&args, 2, "usage");
        let message = j["message"].as_str().unwrap();
        assert!(message.contains("lowercase hyphenated UUID"), "{message}");
    }
}

#[test]
fn save_and_restore_are_top_level_commands_too() {
    let store = store::Store::start();
    let t = tmp();
    let ws = workspace(t.path());
    let with_store = |args: &[&str]| {
        let mut cmd = pillbox();
        cmd.env("XDG_STATE_HOME", t.path().join("state"))
            .env("XDG_CACHE_HOME", t.path().join("cache"))
            .env("PILLBOX_REMOTE", &store.url)
            .args(args)
            .arg("-q");
        run(&mut cmd)
    };
    let saved = with_store(&[
        "save",
        s(&ws),
        "--ref",
        "sessions/a/latest",
        "--exclude",
        "README.md",
    ]);
    assert_eq!(saved.code, 0, "{}", String::from_utf8_lossy(&saved.stdout));
    let saved = saved.json();
    assert_eq!(saved["schema"], "pillbox.checkpoint.save/1");
    let again = with_store(&[
        "checkpoint",
        "save",
        s(&ws),
        "--ref",
        "sessions/a/latest",
        "--exclude",
        "README.md",
    ])
    .json();
    assert_eq!(again["digest"], saved["digest"]);
    let into = t.path().join("back");
    let restored = with_store(&["restore", "sessions/a/latest", "--into", s(&into)]);
    assert_eq!(
        restored.code,
        0,
        "{}",
        String::from_utf8_lossy(&restored.stdout)
    );
    assert_eq!(restored.json()["digest"], saved["digest"]);
    assert!(into.join("src/main.rs").is_file());
    assert!(!into.join("README.md").exists());
    // Their usage errors name their own help.
    let r = with_store(&["save", s(&ws)]);
    assert_eq!(r.code, 2);
    assert_eq!(r.json()["advice"], "see `pillbox save --help`");
}
