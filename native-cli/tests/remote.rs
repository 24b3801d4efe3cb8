//! `push` and `pull` of /2 packets against a store that speaks the delta
//! protocol (`store`): the packet goes up as its manifest's chunks and the
//! bodies the store lacks (`PBPUSH02`, binary recipes, `PBCHUNK2` parts
//! of per-chunk zstd frames), and comes back byte for byte.

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

/// Packs `ws` to standard output into `out` (the way `save` hashes it).
fn pack_to(ws: &Path, out: &Path) {
    let r = checkpoint(&["pack", s(ws), "-o", "-", "--quiet"]);
    assert_eq!(r.code, 0, "pack: {}", String::from_utf8_lossy(&r.stderr));
    fs::write(out, &r.stdout).unwrap();
}

fn push(store: &Store, packet: &Path, extra: &[&str]) -> Value {
    let state = packet.parent().unwrap().join("state");
    let mut cmd = pillbox();
    cmd.env("XDG_STATE_HOME", &state).args([
        "checkpoint",
        "push",
        s(packet),
        "--remote",
        &store.url,
        "--quiet",
    ]);
    cmd.args(extra);
    let r = run(&mut cmd);
    assert_eq!(r.code, 0, "push: {}", String::from_utf8_lossy(&r.stdout));
    r.json()
}

fn pull(store: &Store, target: &str, out: &Path, extra: &[&str]) -> Value {
    let cache = out.parent().unwrap().join("cache");
    let mut cmd = pillbox();
    cmd.args([
        "checkpoint",
        "pull",
        target,
        "--remote",
        &store.url,
        "-o",
        s(out),
        "--cache-dir",
        s(&cache),
        "--quiet",
    ]);
    cmd.args(extra);
    let r = run(&mut cmd);
    assert_eq!(r.code, 0, "pull: {}", String::from_utf8_lossy(&r.stdout));
    r.json()
}

/// A workspace of small files, a compressible large one and an
/// incompressible large one.
fn workspace(ws: &Path) {
    for i in 0..200 {
        write(
            &ws.join(format!("src/m{}/f{i}.rs", i % 7)),
            format!("pub fn f{i}() -> u32 {{ {i} }}\n").repeat(1 + i % 5),
        );
    }
    write(
        &ws.join("log.jsonl"),
        "{\"type\":\"turn\",\"text\":\"hello\"}\n".repeat(40_000),
    );
    write(&ws.join("blob.bin"), noise(3 << 20, 7));
}

#[test]
fn a_packet_pushed_by_delta_is_pulled_back_byte_for_byte() {
    let store = Store::start();
    let t = tmp();
    let ws = t.path().join("ws");
    workspace(&ws);
    let packet = t.path().join("p.tar");
    pack_to(&ws, &packet);
    let pushed = push(&store, &packet, &["--ref", "sessions/a/latest"]);
    assert_eq!(pushed["mode"], "delta", "{pushed}");
    assert_eq!(pushed["uploaded"], true);
    let digest = pushed["digest"].as_str().unwrap().to_owned();
    assert!(store.holds(&digest));
    // Compressible chunks travel compressed: far fewer bytes than the packet.
    let sent = pushed["bytes_sent"].as_u64().unwrap();
    let size = pushed["size"].as_u64().unwrap();
    assert!(sent < size, "{sent} of {size}");
    assert!(
        pushed["delta"]["frame_bytes"].as_u64().unwrap()
            < pushed["delta"]["chunk_bytes"].as_u64().unwrap()
    );
    let creates = store
        .log()
        .iter()
        .filter(|l| l.method == "POST" && l.path == "/v1/pushes")
        .count();
    assert_eq!(creates, 1);
    let out = t.path().join("pulled.tar");
    let pulled = pull(&store, "sessions/a/latest", &out, &[]);
    assert_eq!(pulled["mode"], "delta");
    assert_eq!(pulled["digest"], digest.as_str());
    assert_eq!(fs::read(&out).unwrap(), fs::read(&packet).unwrap());
    // A second pull finds every chunk in the cache.
    let again = t.path().join("again.tar");
    let second = pull(&store, &digest, &again, &[]);
    assert_eq!(second["delta"]["chunks_fetched"], 0, "{second}");
    assert_eq!(fs::read(&again).unwrap(), fs::read(&packet).unwrap());
}

#[test]
fn a_second_push_sends_only_what_its_base_lacks() {
    let store = Store::start();
    let t = tmp();
    let ws = t.path().join("ws");
    workspace(&ws);
    let first = t.path().join("1.tar");
    pack_to(&ws, &first);
    push(&store, &first, &["--ref", "sessions/a/latest"]);
    // One small file edited, the log grown at its end.
    write(&ws.join("src/m0/f0.rs"), "pub fn f0() -> u32 { 1 }\n");
    let mut log = fs::read(ws.join("log.jsonl")).unwrap();
    log.extend_from_slice(
        "{\"type\":\"turn\",\"text\":\"more\"}\n"
            .repeat(500)
            .as_bytes(),
    );
    fs::write(ws.join("log.jsonl"), &log).unwrap();
    let second = t.path().join("2.tar");
    pack_to(&ws, &second);
    store.clear_log();
    let pushed = push(&store, &second, &["--ref", "sessions/a/latest"]);
    assert_eq!(pushed["mode"], "delta");
    let delta = &pushed["delta"];
    assert_eq!(delta["missing_bodies"], 2, "{pushed}");
    // Of the log, only its changed tail goes: a chunk or two.
    assert!(delta["chunk_bytes"].as_u64().unwrap() < 3 << 20, "{pushed}");
    assert!(pushed["bytes_sent"].as_u64().unwrap() < 1 << 20, "{pushed}");
    let digest = pushed["digest"].as_str().unwrap();
    let out = t.path().join("pulled.tar");
    pull(&store, digest, &out, &["--base", s(&first)]);
    assert_eq!(fs::read(&out).unwrap(), fs::read(&second).unwrap());
}

/// Serves the test store on `$PILLBOX_TEST_STORE` (`127.0.0.1:8799` by
/// default) until the process is stopped: for timing the CLI by hand.
#[test]
#[ignore]
fn serve() {
    let address = std::env::var("PILLBOX_TEST_STORE").unwrap_or("127.0.0.1:8799".into());
    let store = Store::start_on(&address);
    eprintln!("serving {}", store.url);
    loop {
        std::thread::park();
    }
}
