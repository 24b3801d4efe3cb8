//! `save` costs the change: with the workspace record of the last save, a
//! second save opens only the files that changed, and sends only the new
//! chunks of `packet.json` and the changed bodies, in one request; what it
//! stored is the packet `pack` makes, byte for byte.

mod common;
mod store;

use std::fs;
use std::io::Write;
use std::path::Path;
use std::time::Duration;

use common::*;
use serde_json::Value;
use store::Store;

/// Files written just before a save are stamped within the racy margin of
/// its start and read again by the next save: the tests' workspaces are
/// left this long first.
const SETTLED: Duration = Duration::from_millis(2_100);

fn save(store: &Store, ws: &Path, state: &Path, extra: &[&str]) -> Value {
    let mut cmd = pillbox();
    cmd.env("XDG_STATE_HOME", state).args([
        "checkpoint",
        "save",
        s(ws),
        "--remote",
        &store.url,
        "--ref",
        "sessions/t/latest",
        "--quiet",
    ]);
    cmd.args(extra);
    let r = run(&mut cmd);
    assert_eq!(r.code, 0, "save: {}", String::from_utf8_lossy(&r.stdout));
    let j = r.json();
    assert_schema("save-1.schema.json", &j);
    j
}

/// `pack -o -`'s bytes.
fn packed(ws: &Path, extra: &[&str]) -> Vec<u8> {
    let mut args = vec!["pack", s(ws), "-o", "-", "--quiet"];
    args.extend_from_slice(extra);
    let r = checkpoint(&args);
    assert_eq!(r.code, 0, "pack: {}", String::from_utf8_lossy(&r.stderr));
    r.stdout
}

fn pulled(store: &Store, t: &Path, name: &str) -> Vec<u8> {
    let out = t.join(name);
    let r = checkpoint(&[
        "pull",
        "sessions/t/latest",
        "--remote",
        &store.url,
        "-o",
        s(&out),
        "--no-cache",
        "--quiet",
    ]);
    assert_eq!(r.code, 0, "pull: {}", String::from_utf8_lossy(&r.stdout));
    fs::read(out).unwrap()
}

fn n(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a number: {v}"))
}

/// A workspace of `count` small files in nested folders.
fn small_files(ws: &Path, count: usize) {
    for i in 0..count {
        write(
            &ws.join(format!("pkg{}/lib/m{}/file{i}.js", i % 40, i % 13)),
            format!("module.exports = function f{i}() {{ return {i}; }};\n"),
        );
    }
}

#[test]
fn a_save_after_a_one_file_edit_reads_that_file_and_sends_it_in_one_request() {
    let store = Store::start();
    let t = tmp();
    let (ws, state) = (t.path().join("ws"), t.path().join("state"));
    let count = 5_000;
    small_files(&ws, count);
    std::thread::sleep(SETTLED);
    let first = save(&store, &ws, &state, &[]);
    assert_eq!(n(&first["files_read"]), count as u64, "{first}");
    assert_eq!(n(&first["files_reused"]), 0);
    assert!(first["record"].as_str().unwrap().starts_with(s(&state)));
    write(
        &ws.join("pkg3/lib/m3/file3.js"),
        "module.exports = 'edited';\n",
    );
    store.clear_log();
    let second = save(&store, &ws, &state, &[]);
    assert_eq!(n(&second["files_read"]), 1, "{second}");
    assert_eq!(n(&second["files_reused"]), count as u64 - 1);
    assert_eq!(n(&second["bytes_hashed"]), 27);
    assert_eq!(second["mode"], "delta");
    assert_eq!(second["delta"]["one_request"], true, "{second}");
    assert_eq!(n(&second["delta"]["parts_sent"]), 0);
    let sent = n(&second["bytes_sent"]);
    assert!(sent <= 32 << 10, "{sent} bytes sent");
    let pushes: Vec<_> = store
        .log()
        .into_iter()
        .filter(|l| l.path.starts_with("/v1/pushes"))
        .collect();
    assert_eq!(pushes.len(), 1, "{pushes:?}");
    assert_eq!(pushes[0].status, 201);
    assert_eq!(second["ref"]["previous"], first["digest"]);
    // What the store holds is what pack makes of the workspace.
    assert_eq!(pulled(&store, t.path(), "p.tar"), packed(&ws, &[]));
    // Nothing changed: nothing is read but the file edited just before the
    // last save (too recent to trust), and nothing is sent.
    let third = save(&store, &ws, &state, &[]);
    assert_eq!(n(&third["files_read"]), 1, "{third}");
    assert_eq!(third["digest"], second["digest"]);
    assert_eq!(third["uploaded"], false);
}

#[test]
fn a_grown_session_log_sends_only_its_tail() {
    let store = Store::start();
    let t = tmp();
    let (ws, state, home) = (
        t.path().join("ws"),
        t.path().join("state"),
        t.path().join("codex"),
    );
    small_files(&ws, 50);
    let rollout = codex_home(&home, THREAD, &ws, "gpt-test");
    let mut f = fs::OpenOptions::new().append(true).open(&rollout).unwrap();
    for i in 0..90_000 {
        writeln!(
            f,
            r#"{{"timestamp":"2026-11-30T01:02:05.000Z","type":"event_msg","payload":{{"type":"agent_message","message":"turn {i}: {}"}}}}"#,
            (i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15)
        )
        .unwrap();
    }
    drop(f);
    assert!(fs::metadata(&rollout).unwrap().len() > 8 << 20);
    std::thread::sleep(SETTLED);
    let harness = [
        "--harness",
        "codex",
        "--thread",
        THREAD,
        "--codex-home",
        s(&home),
    ];
    let first = save(&store, &ws, &state, &harness);
    assert_eq!(n(&first["files_read"]), 51);
    let mut f = fs::OpenOptions::new().append(true).open(&rollout).unwrap();
    for i in 0..100 {
        writeln!(
            f,
            r#"{{"timestamp":"2026-11-30T01:03:00.000Z","type":"event_msg","payload":{{"type":"agent_message","message":"a new turn, line {i}: {}"}}}}"#,
            (i as u64).wrapping_mul(0x2545_f491_4f6c_dd1d)
        )
        .unwrap();
    }
    drop(f);
    let second = save(&store, &ws, &state, &harness);
    assert_eq!(n(&second["files_read"]), 1, "{second}");
    assert_eq!(second["delta"]["one_request"], true, "{second}");
    let sent = n(&second["bytes_sent"]);
    assert!(sent <= 64 << 10, "{sent} bytes sent: {second}");
    assert_eq!(pulled(&store, t.path(), "p.tar"), packed(&ws, &harness));
}

#[test]
fn another_folder_at_the_same_path_and_a_damaged_record_are_read_whole() {
    let store = Store::start();
    let t = tmp();
    let (ws, state) = (t.path().join("ws"), t.path().join("state"));
    small_files(&ws, 30);
    std::thread::sleep(SETTLED);
    let first = save(&store, &ws, &state, &[]);
    let record = first["record"].as_str().unwrap().to_owned();
    // The record is outside the workspace, and never packed.
    assert!(!record.starts_with(s(&ws)));
    let again = save(&store, &ws, &state, &[]);
    assert_eq!(n(&again["files_read"]), 0, "{again}");
    // The same files, in a folder moved to the same path: another root.
    let copy = t.path().join("copy");
    fs::rename(&ws, &copy).unwrap();
    fs::create_dir(&ws).unwrap();
    for entry in fs::read_dir(&copy).unwrap() {
        let entry = entry.unwrap();
        fs::rename(entry.path(), ws.join(entry.file_name())).unwrap();
    }
    let moved = save(&store, &ws, &state, &[]);
    assert_eq!(n(&moved["files_read"]), 30, "{moved}");
    assert_eq!(moved["digest"], first["digest"]);
    // A damaged record is ignored, and replaced.
    let mut bytes = fs::read(&record).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0xff;
    fs::write(&record, &bytes).unwrap();
    let damaged = save(&store, &ws, &state, &[]);
    assert_eq!(n(&damaged["files_read"]), 30, "{damaged}");
    let after = save(&store, &ws, &state, &[]);
    assert_eq!(n(&after["files_read"]), 0, "{after}");
}
