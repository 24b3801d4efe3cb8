//! The commands to find things in a store: `refs` with each packet's size
//! and labels, `log` (the packets a ref has named and what changed from
//! each to the next), and packets named by the start of their digest in
//! pull, restore and push --base; in both output modes, with their
//! refusals' advice (docs/cli.md, "refs", "log", "Digest prefixes").

mod common;
mod store;
mod terminal;

use std::path::Path;

use common::*;
use serde_json::Value;
use store::Store;
use terminal::on_terminal;

/// `pillbox checkpoint <args> -q` against `store`, state and cache in `dir`.
fn at(store: &Store, dir: &Path, args: &[&str]) -> Run {
    let mut cmd = pillbox();
    cmd.env("XDG_STATE_HOME", dir.join("state"))
        .env("XDG_CACHE_HOME", dir.join("cache"))
        .env("PILLBOX_REMOTE", &store.url)
        .env_remove("PILLBOX_TOKEN")
        .arg("checkpoint")
        .args(args)
        .arg("-q");
    run(&mut cmd)
}

/// The same on a terminal.
fn on_screen(store: &Store, dir: &Path, args: &[&str]) -> terminal::Screen {
    let mut line = vec!["checkpoint"];
    line.extend_from_slice(args);
    line.push("-q");
    let (state, cache) = (dir.join("state"), dir.join("cache"));
    on_terminal(
        dir,
        &line,
        &[
            ("PILLBOX_REMOTE", store.url.as_str()),
            ("XDG_STATE_HOME", s(&state)),
            ("XDG_CACHE_HOME", s(&cache)),
        ],
    )
}

/// Packs `files` (path, contents) as a workspace into `<dir>/<name>.tar`.
fn packet(dir: &Path, name: &str, files: &[(&str, &str)]) -> String {
    let ws = dir.join(format!("ws-{name}"));
    for (path, text) in files {
        write(&ws.join(path), text);
    }
    let out = dir.join(format!("{name}.tar"));
    pack(&ws, &out, &[]);
    s(&out).to_owned()
}

/// Pushes `packet` and moves `ref_name` to it; its digest.
fn push(store: &Store, dir: &Path, packet: &str, ref_name: &str, extra: &[&str]) -> String {
    let mut args = vec!["push", packet, "--ref", ref_name];
    args.extend_from_slice(extra);
    let r = at(store, dir, &args);
    assert_eq!(r.code, 0, "push: {}", String::from_utf8_lossy(&r.stdout));
    r.json()["digest"].as_str().unwrap().to_owned()
}

/// Three packets pushed in turn to `sessions/demo/latest`: a, then b
/// (a.txt edited, c.txt added), then c (b.txt removed). Their digests,
/// newest first.
fn three_moves(store: &Store, dir: &Path) -> [String; 3] {
    let a = packet(dir, "a", &[("a.txt", "one"), ("b.txt", "two")]);
    let b = packet(
        dir,
        "b",
        &[
            ("a.txt", "one, longer"),
            ("b.txt", "two"),
            ("c.txt", "three"),
        ],
    );
    let c = packet(dir, "c", &[("a.txt", "one, longer"), ("c.txt", "three")]);
    let name = "sessions/demo/latest";
    let da = push(store, dir, &a, name, &[]);
    let db = push(store, dir, &b, name, &[]);
    let dc = push(store, dir, &c, name, &[]);
    [dc, db, da]
}

fn counts(change: &Value) -> (u64, u64, u64, i64) {
    (
        change["added"].as_u64().unwrap(),
        change["removed"].as_u64().unwrap(),
        change["changed"].as_u64().unwrap(),
        change["bytes"].as_i64().unwrap(),
    )
}

#[test]
fn refs_lists_each_packets_size_and_labels_in_both_modes() {
    let store = Store::start();
    let t = tmp();
    let p = packet(t.path(), "a", &[("a.txt", "one")]);
    let d = push(
        &store,
        t.path(),
        &p,
        "sessions/a/latest",
        &["--label", "host=ci-7", "--label", "team:x"],
    );
    let size = std::fs::metadata(&p).unwrap().len();
    let listed = at(&store, t.path(), &["refs"]).json();
    assert_schema("refs-1.schema.json", &listed);
    assert_eq!(listed["refs"][0]["digest"], d.as_str());
    assert_eq!(listed["refs"][0]["size"], size);
    assert_eq!(
        listed["refs"][0]["labels"],
        serde_json::json!(["host=ci-7", "team:x"])
    );
    let screen = on_screen(&store, t.path(), &["refs"]);
    assert_eq!(screen.code, 0, "{}", screen.text);
    let short = &d[..19];
    assert!(
        screen.text.contains(&format!(
            "  sessions/a/latest  {short}  2026-12-01 00:00  {}  host=ci-7 team:x",
            if size < 1024 {
                format!("{size} B")
            } else {
                format!("{:.1} KiB", size as f64 / 1024.0)
            }
        )),
        "{}",
        screen.text
    );
}

#[test]
fn log_shows_each_packet_and_what_changed_newest_first() {
    let store = Store::start();
    let t = tmp();
    let [dc, db, da] = three_moves(&store, t.path());
    let r = at(&store, t.path(), &["log", "sessions/demo/latest"]);
    assert_eq!(r.code, 0, "{}", String::from_utf8_lossy(&r.stdout));
    let log = r.json();
    assert_schema("log-1.schema.json", &log);
    assert_eq!(
        (&log["ref"], &log["kept"], &log["truncated"]),
        (
            &serde_json::json!("sessions/demo/latest"),
            &serde_json::json!(store::HISTORY_KEPT),
            &serde_json::json!(false)
        )
    );
    let entries = log["entries"].as_array().unwrap();
    let digests: Vec<&str> = entries
        .iter()
        .map(|e| e["digest"].as_str().unwrap())
        .collect();
    assert_eq!(digests, [dc.as_str(), db.as_str(), da.as_str()]);
    assert!(entries
        .iter()
        .all(|e| e["stored"] == true && e["manifest_checked"] == true));
    // c: b.txt removed (3 bytes); b: a.txt grew by 8, c.txt added (5).
    assert_eq!(counts(&entries[0]["change"]), (0, 1, 0, -3));
    assert_eq!(counts(&entries[1]["change"]), (1, 0, 1, 8 + 5));
    let paths: Vec<(&str, &str)> = entries[1]["change"]["paths"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p["path"].as_str().unwrap(), p["change"].as_str().unwrap()))
        .collect();
    assert_eq!(
        paths,
        [("workspace/a.txt", "changed"), ("workspace/c.txt", "added")]
    );
    assert_eq!(entries[2]["change"], Value::Null, "the first move");
    assert_eq!(log["fetched"]["manifests"], 3);
    assert!(log["fetched"]["requests"].as_u64().unwrap() >= 4);

    // On a terminal: one line per packet, what changed under it.
    let screen = on_screen(&store, t.path(), &["log", "sessions/demo/latest"]);
    assert_eq!(screen.code, 0, "{}", screen.text);
    let text = &screen.text;
    assert!(
        text.starts_with(&format!(
            "sessions/demo/latest at {}: 3 packets, newest first\n  {}  2026-12-01 00:00",
            store.url,
            &dc[..19]
        )),
        "{text}"
    );
    assert!(
        text.contains("      0 added, 1 removed, 0 changed, -3 B\n      - b.txt (3 B)"),
        "{text}"
    );
    assert!(
        text.contains(
            "      1 added, 0 removed, 1 changed, +13 B\n      ~ a.txt (11 B)\n      + c.txt (5 B)"
        ),
        "{text}"
    );
    assert!(text.contains("the oldest move the store keeps"), "{text}");
    assert!(text.contains("read 3 manifests in "), "{text}");
}

#[test]
fn log_limit_still_says_what_the_oldest_shown_changed() {
    let store = Store::start();
    let t = tmp();
    let [dc, db, _] = three_moves(&store, t.path());
    let log = at(
        &store,
        t.path(),
        &["log", "sessions/demo/latest", "--limit", "2", "--json"],
    )
    .json();
    assert_schema("log-1.schema.json", &log);
    let entries = log["entries"].as_array().unwrap();
    assert_eq!(entries.len(), 2);
    assert_eq!(
        (entries[0]["digest"].as_str(), entries[1]["digest"].as_str()),
        (Some(dc.as_str()), Some(db.as_str()))
    );
    assert_eq!(counts(&entries[1]["change"]), (1, 0, 1, 13));
    assert_eq!(log["truncated"], true);
    let screen = on_screen(
        &store,
        t.path(),
        &["log", "sessions/demo/latest", "--limit", "2"],
    );
    assert!(
        screen.text.contains("older moves are kept: raise --limit"),
        "{}",
        screen.text
    );
    // The manifests' chunks are in the cache now: nothing of them is fetched again.
    let again = at(&store, t.path(), &["log", "sessions/demo/latest"]).json();
    assert_eq!(again["fetched"]["chunks_fetched"], 0, "{again}");
    let uncached = at(
        &store,
        t.path(),
        &["log", "sessions/demo/latest", "--no-cache"],
    )
    .json();
    assert!(
        uncached["fetched"]["chunks_fetched"].as_u64().unwrap() > 0,
        "{uncached}"
    );
}

#[test]
fn log_marks_a_packet_the_store_no_longer_holds() {
    let store = Store::start();
    let t = tmp();
    let [_, db, _] = three_moves(&store, t.path());
    store.forget(&db);
    let log = at(&store, t.path(), &["log", "sessions/demo/latest"]).json();
    assert_schema("log-1.schema.json", &log);
    let e = &log["entries"];
    assert_eq!(
        (&e[1]["stored"], &e[1]["size"]),
        (&Value::Bool(false), &Value::Null)
    );
    assert_eq!(
        e[0]["change"],
        Value::Null,
        "its successor's change is unknown"
    );
    assert_eq!(e[1]["change"], Value::Null);
    let screen = on_screen(&store, t.path(), &["log", "sessions/demo/latest"]);
    assert!(screen.text.contains("no longer stored"), "{}", screen.text);
}

#[test]
fn log_refusals_say_what_to_do() {
    let store = Store::start();
    let t = tmp();
    let r = at(&store, t.path(), &["log", "sessions/typo/latest"]);
    assert_eq!(r.code, 5);
    let e = r.json();
    assert_schema("error-1.schema.json", &e);
    assert_eq!(e["code"], "not_found");
    assert!(
        e["advice"]
            .as_str()
            .unwrap()
            .contains("`pillbox checkpoint refs sessions/typo/`"),
        "{e}"
    );
    let d = format!("sha256:{}", "0".repeat(64));
    let e = at(&store, t.path(), &["log", &d]);
    assert_eq!(e.code, 2);
    assert!(
        e.json()["message"]
            .as_str()
            .unwrap()
            .contains("log shows the history of a ref"),
        "{}",
        e.json()
    );
    let shown = on_screen(&store, t.path(), &["log", "sessions/typo/latest"]);
    assert_eq!(shown.code, 5);
    assert!(
        shown
            .text
            .starts_with("error: the store has no ref sessions/typo/latest"),
        "{}",
        shown.text
    );
}

#[test]
fn a_digest_prefix_names_a_packet_to_pull_restore_and_build_on() {
    let store = Store::start();
    let t = tmp();
    let [dc, db, _] = three_moves(&store, t.path());
    // As summaries print it: sha256: and 12 hex digits.
    let short = &dc[..19];
    let out = t.path().join("pulled.tar");
    let r = at(&store, t.path(), &["pull", short, "-o", s(&out)]);
    assert_eq!(r.code, 0, "{}", String::from_utf8_lossy(&r.stdout));
    let pulled = r.json();
    assert_eq!(
        (pulled["digest"].as_str(), &pulled["ref"]),
        (Some(dc.as_str()), &Value::Null)
    );
    assert_eq!(packet_name(&std::fs::read(&out).unwrap()), dc);
    let into = t.path().join("restored");
    let r = at(
        &store,
        t.path(),
        &["restore", &db[..15], "--into", s(&into)],
    );
    assert_eq!(r.code, 0, "{}", String::from_utf8_lossy(&r.stdout));
    assert_eq!(r.json()["digest"], db.as_str());
    assert_eq!(
        std::fs::read_to_string(into.join("c.txt")).unwrap(),
        "three"
    );
    // push --base takes one too.
    let p = packet(
        t.path(),
        "d",
        &[("a.txt", "one, longer"), ("c.txt", "three, again")],
    );
    let r = at(&store, t.path(), &["push", &p, "--base", short]);
    assert_eq!(r.code, 0, "{}", String::from_utf8_lossy(&r.stdout));
    assert!(store
        .log()
        .iter()
        .any(|l| l.path == "/v1/pushes" && l.query.contains(&dc[7..])));
}

#[test]
fn an_ambiguous_or_unknown_prefix_is_refused_with_the_candidates() {
    let store = Store::start();
    let t = tmp();
    let [dc, ..] = three_moves(&store, t.path());
    let hex = &dc[7..];
    // Another stored digest with the same first 8 hex digits.
    let ninth = if &hex[8..9] == "0" { "1" } else { "0" };
    let twin = store.alias(&dc, &format!("{}{ninth}", &hex[..8]));
    let prefix = &dc[..15];
    let out = t.path().join("x.tar");
    let r = at(&store, t.path(), &["pull", prefix, "-o", s(&out)]);
    assert_eq!(r.code, 5);
    let e = r.json();
    assert_schema("error-1.schema.json", &e);
    assert_eq!(e["code"], "digest_ambiguous");
    let mut candidates: Vec<&str> = e["candidates"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_str().unwrap())
        .collect();
    candidates.sort();
    let mut both = vec![dc.as_str(), twin.as_str()];
    both.sort();
    assert_eq!(candidates, both);
    assert!(e["message"].as_str().unwrap().contains(&twin), "{e}");
    assert!(
        e["advice"].as_str().unwrap().contains("more hex digits"),
        "{e}"
    );
    assert!(!out.exists());
    // One digit more is enough.
    let r = at(&store, t.path(), &["pull", &dc[..16], "-o", s(&out)]);
    assert_eq!(r.code, 0, "{}", String::from_utf8_lossy(&r.stdout));
    let shown = on_screen(&store, t.path(), &["pull", prefix, "-o", s(&out)]);
    assert_eq!(shown.code, 5);
    assert!(
        shown.text.starts_with(&format!(
            "error: {prefix} is the start of 2 stored packets' digests: "
        )),
        "{}",
        shown.text
    );
    assert!(
        shown.text.contains("code  digest_ambiguous (exit 5)"),
        "{}",
        shown.text
    );

    let unknown = format!(
        "sha256:{}",
        if hex.starts_with("ff") {
            "00000000"
        } else {
            "ffffffff"
        }
    );
    let r = at(
        &store,
        t.path(),
        &["restore", &unknown, "--into", s(&t.path().join("r"))],
    );
    assert_eq!(r.code, 5);
    let e = r.json();
    assert_schema("error-1.schema.json", &e);
    assert_eq!(e["code"], "digest_unknown");
    assert!(e["message"].as_str().unwrap().contains(&unknown), "{e}");
    assert!(
        e["advice"]
            .as_str()
            .unwrap()
            .contains("pillbox checkpoint refs"),
        "{e}"
    );
    assert!(e.get("candidates").is_none());

    // Fewer than 8 hex digits is no prefix at all.
    let r = at(&store, t.path(), &["pull", &dc[..14], "-o", s(&out)]);
    assert_eq!(r.code, 2);
    assert!(
        r.json()["message"]
            .as_str()
            .unwrap()
            .contains("8 to 64 lowercase hex digits"),
        "{}",
        r.json()
    );
}

#[test]
fn checks_of_bytes_take_a_whole_digest() {
    let store = Store::start();
    let t = tmp();
    let p = packet(t.path(), "a", &[("a.txt", "one")]);
    let d = push(&store, t.path(), &p, "sessions/a/latest", &[]);
    // --digest proves the file is the packet meant: a prefix would not.
    for args in [
        vec!["verify", p.as_str(), "--digest", &d[..19]],
        vec!["inspect", p.as_str(), "--digest", &d[..19]],
    ] {
        let r = checkpoint(&args);
        assert_eq!(r.code, 2, "{args:?}");
        let e = r.json();
        assert!(
            e["message"].as_str().unwrap().contains("the whole digest"),
            "{e}"
        );
    }
    let into = t.path().join("u");
    let r = checkpoint(&["unpack", &p, "--digest", &d[..19], "--into", s(&into)]);
    assert_eq!(r.code, 2);
    assert!(!into.exists());
    // --expect-ref is the compare-and-swap guard: never resolved.
    let r = at(
        &store,
        t.path(),
        &[
            "push",
            &p,
            "--ref",
            "sessions/a/latest",
            "--expect-ref",
            &d[..19],
        ],
    );
    assert_eq!(r.code, 2);
    assert!(
        r.json()["message"]
            .as_str()
            .unwrap()
            .contains("compare-and-swap guard"),
        "{}",
        r.json()
    );
    assert!(!store
        .log()
        .iter()
        .any(|l| l.path.starts_with("/v1/digests")));
}
