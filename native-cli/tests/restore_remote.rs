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
