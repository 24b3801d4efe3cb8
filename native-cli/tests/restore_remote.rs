//! `restore` from a store that speaks the delta protocol of /2 (`store`):
//! into an empty folder, a packet's bodies land as they are fetched and
//! checked, and the tree is what `unpack` of the packet gives; the target
//! is checked before anything is fetched.

mod common;
mod store;

use std::fs;
use std::path::Path;

use common::*;
use serde_json::Value;
use store::Store;

/// Bytes that do not compress, seeded.
fn noise(len: usize, seed: u64) -> Vec<u8> {
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

/// A workspace of small files, duplicates, a large compressible file and
/// a large incompressible one, links and an empty folder.
fn workspace(ws: &Path) {
    sample_workspace(ws);
    for i in 0..60 {
        write(
            &ws.join(format!("src/m{}/f{i}.rs", i % 5)),
            format!("pub fn f{i}() -> u32 {{ {i} }}\n").repeat(1 + i % 4),
        );
    }
    write(&ws.join("copy-a/LICENSE"), "same bytes\n");
    write(&ws.join("copy-b/LICENSE"), "same bytes\n");
    write(
        &ws.join("log.jsonl"),
        "{\"type\":\"turn\",\"text\":\"hello there\"}\n".repeat(60_000),
    );
    write(&ws.join("blob.bin"), noise(3 << 20, 7));
}

fn env_for(cmd: &mut assert_cmd::Command, host: &Path) {
    cmd.env("XDG_STATE_HOME", host.join("state"))
        .env("XDG_CACHE_HOME", host.join("cache"))
        .env_remove("CODEX_HOME")
        .env_remove("PILLBOX_REMOTE");
}

/// Packs `ws` and pushes it as `sessions/a/latest`; returns the digest.
fn push_workspace(store: &Store, ws: &Path, packet: &Path, extra: &[&str]) -> String {
    let mut args = vec!["pack", s(ws), "-o", "-", "--quiet"];
    args.extend_from_slice(extra);
    let r = checkpoint(&args);
    assert_eq!(r.code, 0, "pack: {}", String::from_utf8_lossy(&r.stderr));
    fs::write(packet, &r.stdout).unwrap();
    let mut cmd = pillbox();
    env_for(&mut cmd, packet.parent().unwrap());
    cmd.args(["checkpoint", "push", s(packet), "--remote", &store.url]);
    cmd.args(["--ref", "sessions/a/latest", "--quiet"]);
    let r = run(&mut cmd);
    assert_eq!(r.code, 0, "push: {}", String::from_utf8_lossy(&r.stdout));
    r.json()["digest"].as_str().unwrap().to_owned()
}

/// `restore` on the host whose folders are under `host`.
fn restore(store: &Store, host: &Path, into: &Path, extra: &[&str]) -> Run {
    let mut cmd = pillbox();
    env_for(&mut cmd, host);
    cmd.args([
        "checkpoint",
        "restore",
        "sessions/a/latest",
        "--remote",
        &store.url,
    ]);
    cmd.args(["--into", s(into), "--quiet"]);
    cmd.args(extra);
    run(&mut cmd)
}

fn restored(store: &Store, host: &Path, into: &Path, extra: &[&str]) -> Value {
    let r = restore(store, host, into, extra);
    assert_eq!(r.code, 0, "restore: {}", String::from_utf8_lossy(&r.stdout));
    let v = r.json();
    assert_schema("restore-1.schema.json", &v);
    v
}

#[test]
fn a_fresh_restore_is_what_unpack_gives_and_fetches_no_packet_stream() {
    let store = Store::start();
    let t = tmp();
    let ws = t.path().join("ws");
    workspace(&ws);
    let packet = t.path().join("p.tar");
    let digest = push_workspace(&store, &ws, &packet, &[]);
    let unpacked = t.path().join("unpacked");
    ok(&[
        "unpack",
        s(&packet),
        "--digest",
        &digest,
        "--into",
        s(&unpacked),
    ]);
    store.clear_log();
    let into = t.path().join("restored");
    let v = restored(&store, &t.path().join("b"), &into, &["--no-cache"]);
    assert_eq!(v["digest"], digest.as_str());
    assert_eq!(v["mode"], "delta");
    assert_eq!(snapshot(&into), snapshot(&unpacked));
    assert_eq!(snapshot(&into), snapshot(&ws));
    // Nothing but chunks and recipes: no whole packet was read.
    assert!(store
        .log()
        .iter()
        .all(|l| !(l.method == "GET" && l.path == format!("/v1/packets/{digest}"))));
    // With the cache, a second host fetches nothing the first fetched.
    let host = t.path().join("c");
    let first = restored(&store, &host, &t.path().join("r1"), &[]);
    assert!(first["delta"]["chunks_fetched"].as_u64().unwrap() > 0);
    let second = restored(&store, &host, &t.path().join("r2"), &[]);
    assert_eq!(second["delta"]["chunks_fetched"], 0, "{second}");
    assert_eq!(snapshot(&t.path().join("r2")), snapshot(&ws));
}

#[test]
fn a_restore_restores_the_codex_rollout_and_reports_what_unpack_reports() {
    let store = Store::start();
    let t = tmp();
    let ws = t.path().join("ws");
    workspace(&ws);
    write(&ws.join(".git/config"), "[core]\n\tfsmonitor = ./run-me\n");
    write(&ws.join(".git/hooks/pre-commit"), "#!/bin/sh\n");
    chmod(&ws.join(".git/hooks/pre-commit"), 0o755);
    let home = t.path().join("codex");
    codex_home(&home, THREAD, &ws, "gpt-test");
    let packet = t.path().join("p.tar");
    let digest = push_workspace(
        &store,
        &ws,
        &packet,
        &[
            "--harness",
            "codex",
            "--thread",
            THREAD,
            "--codex-home",
            s(&home),
        ],
    );
    let unpacked = t.path().join("unpacked");
    let unpack = ok(&[
        "unpack",
        s(&packet),
        "--digest",
        &digest,
        "--into",
        s(&unpacked),
        "--codex-home",
        s(&t.path().join("home-u")),
        "--neutralize-git",
    ]);
    let into = t.path().join("restored");
    let v = restored(
        &store,
        &t.path().join("b"),
        &into,
        &[
            "--codex-home",
            s(&t.path().join("home-r")),
            "--neutralize-git",
        ],
    );
    assert_eq!(snapshot(&into), snapshot(&unpacked));
    assert_eq!(
        snapshot(&t.path().join("home-r")),
        snapshot(&t.path().join("home-u"))
    );
    assert_eq!(v["findings"], unpack["findings"]);
    assert_eq!(v["git"], unpack["git"]);
    assert!(v["harness"]["rollout_path"]
        .as_str()
        .unwrap()
        .starts_with(s(&t.path().join("home-r"))));
}

#[test]
fn a_non_empty_target_with_no_record_is_refused_before_anything_is_fetched() {
    let store = Store::start();
    let t = tmp();
    let ws = t.path().join("ws");
    workspace(&ws);
    push_workspace(&store, &ws, &t.path().join("p.tar"), &[]);
    let into = t.path().join("foreign");
    write(&into.join("mine.txt"), "not a checkpoint's\n");
    store.clear_log();
    let r = restore(&store, &t.path().join("b"), &into, &[]);
    assert_eq!(r.code, 5, "{}", String::from_utf8_lossy(&r.stdout));
    assert_eq!(r.json()["code"], "target_not_empty");
    assert!(store.log().is_empty(), "{:?}", store.log());
    assert_eq!(
        fs::read(into.join("mine.txt")).unwrap(),
        b"not a checkpoint's\n"
    );
}

/// Every path below `root` with its inode and mtime (files).
fn stamps(root: &Path) -> std::collections::BTreeMap<String, (u64, i64, i64)> {
    use std::os::unix::fs::MetadataExt;
    let mut out = std::collections::BTreeMap::new();
    for (path, node) in snapshot(root) {
        if let Node::File { .. } = node {
            let m = fs::symlink_metadata(root.join(&path)).unwrap();
            out.insert(path, (m.ino(), m.mtime(), m.mtime_nsec()));
        }
    }
    out
}

#[test]
fn a_restore_over_the_checkpoint_a_folder_holds_writes_only_what_changed() {
    let store = Store::start();
    let t = tmp();
    let ws = t.path().join("ws");
    workspace(&ws);
    push_workspace(&store, &ws, &t.path().join("1.tar"), &[]);
    let host = t.path().join("b");
    let into = t.path().join("restored");
    let first = restored(&store, &host, &into, &[]);
    assert_eq!(first["written"], first["members"]);
    // The next turn, elsewhere: an edit, a deletion, a new file, a mode
    // change, a file that became a link and a link that became a file.
    write(&ws.join("src/m0/f0.rs"), "pub fn f0() -> u32 { 42 }\n");
    fs::remove_file(ws.join("src/m1/f1.rs")).unwrap();
    write(&ws.join("src/new.rs"), "pub fn new() {}\n");
    chmod(&ws.join("README.md"), 0o755);
    fs::remove_file(ws.join("copy-b/LICENSE")).unwrap();
    std::os::unix::fs::symlink("../copy-a/LICENSE", ws.join("copy-b/LICENSE")).unwrap();
    fs::remove_file(ws.join("main-link")).unwrap();
    write(&ws.join("main-link"), "now a file\n");
    push_workspace(&store, &ws, &t.path().join("2.tar"), &[]);
    let before = stamps(&into);
    store.clear_log();
    let second = restored(&store, &host, &into, &[]);
    assert_eq!(snapshot(&into), snapshot(&ws));
    let after = stamps(&into);
    let changed: Vec<&String> = after
        .iter()
        .filter(|(p, s)| before.get(*p) != Some(s))
        .map(|(p, _)| p)
        .collect();
    assert_eq!(
        changed,
        ["main-link", "src/m0/f0.rs", "src/new.rs"],
        "{second}"
    );
    // The exec bit changed in place: the same file.
    assert_eq!(before["README.md"], after["README.md"]);
    assert_eq!(second["removed"], 1, "{second}");
    assert!(
        second["bytes_received"].as_u64().unwrap() < 64 << 10,
        "{second}"
    );
    assert!(second["unchanged"].as_u64().unwrap() > 60, "{second}");
}

/// Every path below `root`: its type, bytes, inode and mtime.
fn full(root: &Path) -> Vec<(String, String)> {
    use std::os::unix::fs::MetadataExt;
    let mut out: Vec<(String, String)> = snapshot(root)
        .into_iter()
        .map(|(p, n)| {
            let m = fs::symlink_metadata(root.join(&p)).unwrap();
            let node = format!(
                "{n:?} ino {} mtime {}.{} mode {:o}",
                m.ino(),
                m.mtime(),
                m.mtime_nsec(),
                m.mode()
            );
            (p, node)
        })
        .collect();
    out.sort();
    out
}

#[test]
fn local_changes_refuse_the_restore_before_anything_changes_and_discard_local_overwrites_them() {
    let store = Store::start();
    let t = tmp();
    let ws = t.path().join("ws");
    workspace(&ws);
    push_workspace(&store, &ws, &t.path().join("1.tar"), &[]);
    let host = t.path().join("b");
    let into = t.path().join("restored");
    restored(&store, &host, &into, &[]);
    write(&ws.join("src/m0/f0.rs"), "pub fn f0() -> u32 { 7 }\n");
    push_workspace(&store, &ws, &t.path().join("2.tar"), &[]);
    // Here, meanwhile: an edit, a new file, a deletion, a mode change.
    write(&into.join("src/m2/f2.rs"), "local work\n");
    write(&into.join("notes.txt"), "mine\n");
    fs::remove_file(into.join("docs/naïve file.txt")).unwrap();
    chmod(&into.join("src/main.rs"), 0o755);
    // And a file rewritten with its mtime put back: its ctime still moved.
    let kept = into.join("src/m3/f3.rs");
    let mtime = fs::metadata(&kept).unwrap().modified().unwrap();
    write(
        &kept,
        "same length, new bytes!?\n"
            .get(..fs::read(&kept).unwrap().len())
            .unwrap_or("x\n"),
    );
    fs::File::options()
        .write(true)
        .open(&kept)
        .unwrap()
        .set_modified(mtime)
        .unwrap();
    let before = full(&into);
    store.clear_log();
    let r = restore(&store, &host, &into, &[]);
    assert_eq!(r.code, 5, "{}", String::from_utf8_lossy(&r.stdout));
    let e = r.json();
    assert_schema("error-1.schema.json", &e);
    assert_eq!(e["code"], "local_changes");
    let listed: Vec<(String, String)> = e["paths"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            let path = p["path"].as_str().unwrap();
            let rel = path.strip_prefix(s(&into)).unwrap().trim_start_matches('/');
            (rel.to_owned(), p["change"].as_str().unwrap().to_owned())
        })
        .collect();
    let mut expected = vec![
        ("docs/naïve file.txt".to_owned(), "removed".to_owned()),
        ("notes.txt".to_owned(), "added".to_owned()),
        ("src/m2/f2.rs".to_owned(), "edited".to_owned()),
        ("src/m3/f3.rs".to_owned(), "edited".to_owned()),
        ("src/main.rs".to_owned(), "mode".to_owned()),
    ];
    expected.sort();
    let mut listed_sorted = listed.clone();
    listed_sorted.sort();
    assert_eq!(listed_sorted, expected);
    assert_eq!(e["paths_count"], 5);
    // Nothing changed, nothing was fetched.
    assert_eq!(full(&into), before);
    assert!(
        store.log().iter().all(|l| !l.path.contains("/chunks")),
        "{:?}",
        store.log()
    );
    // --discard-local: the checkpoint, exactly.
    let v = restored(&store, &host, &into, &["--discard-local"]);
    assert_eq!(snapshot(&into), snapshot(&ws), "{v}");
}

#[test]
fn a_restore_killed_at_any_point_finishes_when_run_again() {
    let store = Store::start();
    let t = tmp();
    let ws = t.path().join("ws");
    workspace(&ws);
    for i in 0..300 {
        write(
            &ws.join(format!("many/d{}/f{i}.txt", i % 9)),
            format!("file {i}\n").repeat(i % 7 + 1),
        );
    }
    push_workspace(&store, &ws, &t.path().join("1.tar"), &[]);
    let host = t.path().join("b");
    let into = t.path().join("restored");
    restored(&store, &host, &into, &[]);
    let old = snapshot(&ws);
    // The next checkpoint changes many files, removes some, adds folders.
    for i in 0..300 {
        let p = ws.join(format!("many/d{}/f{i}.txt", i % 9));
        match i % 3 {
            0 => write(&p, format!("changed {i}\n")),
            1 => fs::remove_file(&p).unwrap(),
            _ => {}
        }
    }
    fs::remove_dir_all(ws.join("src/m4")).unwrap();
    write(&ws.join("src/m4"), "a folder became a file\n");
    write(&ws.join("added/deep/x.txt"), "new\n");
    write(&ws.join("blob.bin"), noise(3 << 20, 8));
    push_workspace(&store, &ws, &t.path().join("2.tar"), &[]);
    let want = snapshot(&ws);
    let mut kills = 0;
    for round in 0..40u64 {
        let mut cmd = std::process::Command::new(assert_cmd::cargo::cargo_bin("pillbox"));
        cmd.env("XDG_STATE_HOME", host.join("state"))
            .env("XDG_CACHE_HOME", host.join("cache"))
            .args([
                "checkpoint",
                "restore",
                "sessions/a/latest",
                "--remote",
                &store.url,
            ])
            .args(["--into", s(&into), "--quiet", "--no-cache"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null());
        let mut child = cmd.spawn().unwrap();
        // A pseudo-random moment, from a few to a few hundred milliseconds.
        let wait = 2 + (round.wrapping_mul(2_654_435_761) % 300);
        std::thread::sleep(std::time::Duration::from_millis(wait));
        let _ = child.kill();
        let status = child.wait().unwrap();
        if !status.success() {
            kills += 1;
        }
        // Never a half-written file: each is the old checkpoint's or the new's.
        for (p, node) in snapshot(&into) {
            if p.starts_with(".pillbox-") {
                continue;
            }
            if let Node::File { contents, .. } = &node {
                let is = |tree: &std::collections::BTreeMap<String, Node>| matches!(tree.get(&p), Some(Node::File { contents: c, .. }) if c == contents);
                assert!(is(&old) || is(&want), "{p} is neither checkpoint's");
            }
        }
        if status.success() {
            break;
        }
    }
    let v = restored(&store, &host, &into, &[]);
    assert_eq!(snapshot(&into), want, "{v}");
    assert!(kills > 0, "no restore was interrupted");
}

/// `save` on the host whose folders are under `host`.
fn save(store: &Store, host: &Path, ws: &Path, extra: &[&str]) -> Value {
    let mut cmd = pillbox();
    env_for(&mut cmd, host);
    cmd.args(["checkpoint", "save", s(ws), "--remote", &store.url]);
    cmd.args(["--ref", "sessions/a/latest", "--quiet"]);
    cmd.args(extra);
    let r = run(&mut cmd);
    assert_eq!(r.code, 0, "save: {}", String::from_utf8_lossy(&r.stdout));
    r.json()
}

#[test]
fn a_session_moves_between_two_boxes_and_back_restoring_in_place_over_what_each_saved() {
    let store = Store::start();
    let t = tmp();
    let (box_a, box_b) = (t.path().join("A"), t.path().join("B"));
    let ws_a = box_a.join("ws");
    workspace(&ws_a);
    let home_a = box_a.join("codex");
    let rollout = codex_home(&home_a, THREAD, &ws_a, "gpt-test");
    let codex = |home: &Path| {
        vec![
            "--harness".to_owned(),
            "codex".to_owned(),
            "--thread".to_owned(),
            THREAD.to_owned(),
            "--codex-home".to_owned(),
            s(home).to_owned(),
        ]
    };
    let args_a = codex(&home_a);
    let args_a: Vec<&str> = args_a.iter().map(String::as_str).collect();
    // Turn 1 on A.
    save(&store, &box_a, &ws_a, &args_a);
    // Turn 2 on B: restored fresh, a file edited, the rollout grown.
    let ws_b = box_b.join("ws");
    let home_b = box_b.join("codex");
    restored(&store, &box_b, &ws_b, &["--codex-home", s(&home_b)]);
    write(&ws_b.join("src/m0/f0.rs"), "pub fn f0() -> u32 { 2 }\n");
    let rollout_b = home_b.join(rollout.strip_prefix(&home_a).unwrap());
    let mut log = fs::read(&rollout_b).unwrap();
    log.extend_from_slice(b"{\"timestamp\":\"2026-11-30T01:03:00.000Z\",\"type\":\"event_msg\",\"payload\":{\"type\":\"agent_message\",\"message\":\"turn 2\"}}\n");
    fs::write(&rollout_b, &log).unwrap();
    let args_b = codex(&home_b);
    let args_b: Vec<&str> = args_b.iter().map(String::as_str).collect();
    save(&store, &box_b, &ws_b, &args_b);
    // Turn 3 on A again: in place over what A saved.
    let before = stamps(&ws_a);
    let v = restored(&store, &box_a, &ws_a, &["--codex-home", s(&home_a)]);
    assert_eq!(snapshot(&ws_a), snapshot(&ws_b), "{v}");
    assert_eq!(fs::read(&rollout).unwrap(), log);
    let after = stamps(&ws_a);
    let changed: Vec<&String> = after
        .iter()
        .filter(|(p, s)| before.get(*p) != Some(s))
        .map(|(p, _)| p)
        .collect();
    assert_eq!(changed, ["src/m0/f0.rs"], "{v}");
    assert_eq!(v["written"], 2, "the file and the rollout: {v}");
    assert!(v["bytes_received"].as_u64().unwrap() < 64 << 10, "{v}");
    // A rollout that grew here since is this box's own turn: refused.
    let mut more = log.clone();
    more.extend_from_slice(b"{\"type\":\"local\"}\n");
    fs::write(&rollout, &more).unwrap();
    write(&ws_b.join("src/m0/f0.rs"), "pub fn f0() -> u32 { 3 }\n");
    save(&store, &box_b, &ws_b, &args_b);
    let r = restore(&store, &box_a, &ws_a, &["--codex-home", s(&home_a)]);
    assert_eq!(r.code, 5, "{}", String::from_utf8_lossy(&r.stdout));
    let e = r.json();
    assert_eq!(e["code"], "local_changes");
    assert_eq!(e["paths"][0]["path"], s(&rollout));
    assert_eq!(fs::read(&rollout).unwrap(), more);
}
