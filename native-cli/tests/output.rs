//! Two audiences, one schema: on a terminal every command prints a short
//! summary and an error once, as a message; with `--json`, or when its
//! output is not a terminal, the JSON object exactly as the schemas say,
//! and a usage error once, as JSON (docs/cli.md, "Output").

mod common;
mod store;
mod terminal;

use std::fs;
use std::path::Path;

use common::*;
use terminal::on_terminal;

const THREAD: &str = "0199a213-81c0-7800-8aa1-bbab2a035a53";

/// A workspace with a credential file, packed into `a.tar` (piped: JSON).
fn packed(dir: &Path) -> (String, String) {
    let ws = dir.join("ws");
    fs::create_dir_all(ws.join("src")).unwrap();
    fs::write(ws.join("src/main.rs"), "fn main() {}\n").unwrap();
    fs::write(ws.join("README.md"), "hello\n").unwrap();
    fs::write(ws.join(".env"), "KEY=1\n").unwrap();
    let packet = dir.join("a.tar");
    let v = ok(&["pack", s(&ws), "-o", s(&packet), "--quiet"]);
    (
        s(&packet).to_owned(),
        v["digest"].as_str().unwrap().to_owned(),
    )
}

fn pb(dir: &Path, args: &[&str]) -> terminal::Screen {
    on_terminal(dir, args, &[])
}

#[test]
fn pack_on_a_terminal_is_a_short_summary() {
    let t = tempfile::tempdir().unwrap();
    let ws = t.path().join("ws");
    packed(t.path());
    let out = pb(
        t.path(),
        &["checkpoint", "pack", s(&ws), "-o", "b.tar", "-q"],
    );
    assert_eq!(out.code, 0, "{}", out.text);
    let text = &out.text;
    assert!(!text.contains('{'), "no JSON on a terminal: {text}");
    assert!(text.starts_with("Packed "), "{text}");
    let digest = ok(&["verify", s(&t.path().join("b.tar")), "-q"])["digest"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(text.contains(&format!(" {}\n", &digest[..19])), "{text}");
    assert!(
        text.contains("5.5 KiB: 2 files (19 B), 2 directories"),
        "{text}"
    );
    assert!(
        text.contains("skipped  .env  credential file (env-file)"),
        "{text}"
    );
    assert_eq!(text.matches(".env").count(), 1, "the reason once: {text}");
    assert!(
        text.contains(&format!("--digest {digest} --into DIR")),
        "{text}"
    );
    assert!(text.lines().count() <= 6, "{text}");
}

#[test]
fn json_on_a_terminal_is_the_same_object_as_piped() {
    let t = tempfile::tempdir().unwrap();
    let (packet, _) = packed(t.path());
    let screen = pb(t.path(), &["checkpoint", "verify", &packet, "--json", "-q"]);
    assert_eq!(screen.code, 0);
    let on_terminal: serde_json::Value = serde_json::from_str(screen.text.trim()).unwrap();
    let piped = ok(&["verify", &packet, "-q"]);
    assert_eq!(on_terminal, piped);
    let inspect = pb(
        t.path(),
        &["checkpoint", "inspect", &packet, "--format", "json"],
    );
    let v: serde_json::Value = serde_json::from_str(inspect.text.trim()).unwrap();
    assert_eq!(v["schema"], "pillbox.checkpoint.inspect/1");
}

#[test]
fn every_local_command_has_a_summary() {
    let t = tempfile::tempdir().unwrap();
    let (packet, digest) = packed(t.path());
    let short = &digest[..19];
    let cases: Vec<(Vec<&str>, Vec<String>)> = vec![
        (
            vec!["verify", &packet, "--digest", &digest],
            vec![format!("Verified {short}"), "matches --digest".into()],
        ),
        (
            vec!["inspect", &packet],
            vec![
                format!("Packet {short}"),
                "-rw-r--r--  6 B  workspace/README.md".into(),
                "drwxr-xr-x       workspace/src/".into(),
            ],
        ),
        (
            vec!["diff", &packet, &packet],
            vec!["identical: same members".into()],
        ),
        (
            vec!["unpack", &packet, "--digest", &digest, "--into", "restored"],
            vec![format!("Unpacked {short} into "), "2 files (19 B)".into()],
        ),
    ];
    for (args, wants) in cases {
        let mut line = vec!["checkpoint"];
        line.extend(&args);
        line.push("-q");
        let out = pb(t.path(), &line);
        assert_eq!(out.code, 0, "{args:?}: {}", out.text);
        assert!(!out.text.contains("\"schema\""), "{args:?}: {}", out.text);
        for want in wants {
            assert!(
                out.text.contains(&want),
                "{args:?}: want {want:?} in\n{}",
                out.text
            );
        }
    }
}

#[test]
fn restore_check_on_a_terminal_says_how_to_resume() {
    let t = tempfile::tempdir().unwrap();
    let home = t.path().join("codex");
    let rollout = home.join(format!(
        "sessions/2026/11/30/rollout-2026-11-30T01-02-03-{THREAD}.jsonl"
    ));
    fs::create_dir_all(rollout.parent().unwrap()).unwrap();
    fs::write(
        &rollout,
        format!("{{\"timestamp\":\"2026-11-30T01:02:03.456Z\",\"type\":\"session_meta\",\"payload\":{{\"id\":\"{THREAD}\",\"timestamp\":\"2026-11-30T01:02:03.400Z\",\"cwd\":\"/w\",\"originator\":\"codex_exec\",\"cli_version\":\"0.171.0\",\"instructions\":null,\"model_provider\":\"openai\"}}}}\n{{\"timestamp\":\"2026-11-30T01:02:03.510Z\",\"type\":\"turn_context\",\"payload\":{{\"cwd\":\"/w\",\"approval_policy\":\"never\",\"sandbox_policy\":{{\"type\":\"workspace-write\"}},\"model\":\"gpt-5.1-codex\",\"summary\":\"auto\"}}}}\n"),
    )
    .unwrap();
    let args = [
        "checkpoint",
        "restore-check",
        "--thread",
        THREAD,
        "--rollout-path",
        s(&rollout),
        "-q",
    ];
    let out = pb(t.path(), &args);
    assert_eq!(out.code, 0, "{}", out.text);
    assert!(
        out.text
            .contains(&format!("The codex thread {THREAD} can be resumed")),
        "{}",
        out.text
    );
    assert!(out.text.contains("resume  codex"), "{}", out.text);
    let piped = checkpoint(&args[1..]);
    assert_eq!(piped.code, 0);
    assert_eq!(piped.json()["schema"], "pillbox.checkpoint.restore-check/1");
}

#[test]
fn cat_prints_only_the_member_on_a_terminal() {
    let t = tempfile::tempdir().unwrap();
    let (packet, _) = packed(t.path());
    let out = pb(
        t.path(),
        &["checkpoint", "cat", &packet, "workspace/README.md", "-q"],
    );
    assert_eq!((out.code, out.raw.as_str()), (0, "hello\r\n"));
    // With --json the report follows on stderr, as it does when stderr is
    // not a terminal.
    let out = pb(
        t.path(),
        &[
            "checkpoint",
            "cat",
            &packet,
            "workspace/README.md",
            "-q",
            "--json",
        ],
    );
    assert!(
        out.text
            .starts_with("hello\n{\"schema\":\"pillbox.checkpoint.cat/1\""),
        "{}",
        out.text
    );
    let piped = checkpoint(&["cat", &packet, "workspace/README.md", "-q"]);
    assert_eq!(piped.stdout, b"hello\n");
    assert_eq!(piped.stderr_json()["schema"], "pillbox.checkpoint.cat/1");
}

#[test]
fn a_usage_error_is_printed_once_and_names_the_command_help() {
    let t = tempfile::tempdir().unwrap();
    // Piped: the JSON object alone, nothing on stderr.
    let r = checkpoint(&["pack", "."]);
    assert_eq!(r.code, 2);
    assert!(
        r.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&r.stderr)
    );
    let e = r.json();
    assert_eq!(e["code"], "usage");
    assert_eq!(e["advice"], "see `pillbox checkpoint pack --help`");
    let r = checkpoint(&["pakc"]);
    assert_eq!(r.json()["advice"], "see `pillbox checkpoint --help`");
    assert!(r.stderr.is_empty());
    // A usage error found after parsing names its command's help too.
    let r = checkpoint(&["diff", "-", "-"]);
    assert_eq!(r.json()["advice"], "see `pillbox checkpoint diff --help`");
    // On a terminal: clap's message, with its suggestion, and no JSON.
    let out = pb(t.path(), &["checkpoint", "pakc"]);
    assert_eq!(out.code, 2);
    assert!(
        out.text.contains("unrecognized subcommand 'pakc'"),
        "{}",
        out.text
    );
    assert!(out.text.contains("'pack'"), "{}", out.text);
    assert!(
        out.text.contains("try 'pillbox checkpoint --help'"),
        "{}",
        out.text
    );
    assert!(!out.text.contains("\"schema\""), "{}", out.text);
    let out = pb(t.path(), &["checkpoint", "pack", "."]);
    assert!(
        out.text.contains("try 'pillbox checkpoint pack --help'"),
        "{}",
        out.text
    );
    // --json on a terminal: the object.
    let out = pb(t.path(), &["checkpoint", "pack", ".", "--json"]);
    assert!(
        out.text.starts_with("{\"schema\":\"pillbox.error/1\""),
        "{}",
        out.text
    );
}

#[test]
fn a_failure_on_a_terminal_says_what_where_and_what_to_do() {
    let t = tempfile::tempdir().unwrap();
    let out = pb(t.path(), &["checkpoint", "verify", "missing.tar", "-q"]);
    assert_eq!(out.code, 4);
    let text = &out.text;
    assert!(text.starts_with("error: cannot open missing.tar"), "{text}");
    assert!(text.contains("path  missing.tar"), "{text}");
    assert!(text.contains("help  check that the path exists"), "{text}");
    assert!(!text.contains('{'), "{text}");
    let piped = checkpoint(&["verify", "missing.tar", "-q"]);
    assert_eq!(piped.code, 4);
    assert_eq!(piped.json()["code"], "io");
    assert!(piped.stderr.is_empty());
}

#[test]
fn colour_only_when_wanted() {
    let t = tempfile::tempdir().unwrap();
    let (packet, _) = packed(t.path());
    let args = ["checkpoint", "verify", packet.as_str(), "-q"];
    let styled = on_terminal(t.path(), &args, &[]);
    assert!(styled.raw.contains('\u{1b}'), "{:?}", styled.raw);
    for env in [("NO_COLOR", "1"), ("CLICOLOR", "0")] {
        let plain = on_terminal(t.path(), &args, &[env]);
        assert!(!plain.raw.contains('\u{1b}'), "{env:?}: {:?}", plain.raw);
        assert_eq!(plain.text, styled.text);
    }
    let never = on_terminal(
        t.path(),
        &["checkpoint", "verify", &packet, "-q", "--color", "never"],
        &[],
    );
    assert!(!never.raw.contains('\u{1b}'), "{:?}", never.raw);
}

#[test]
fn push_pull_save_and_restore_have_a_summary() {
    let store = store::Store::start();
    let t = tempfile::tempdir().unwrap();
    let (packet, digest) = packed(t.path());
    let short = &digest[..19];
    let state = t.path().join("state");
    let cache = t.path().join("cache");
    let env = [
        ("XDG_STATE_HOME", s(&state)),
        ("XDG_CACHE_HOME", s(&cache)),
        ("PILLBOX_REMOTE", store.url.as_str()),
    ];
    let run = |args: &[&str]| {
        let out = on_terminal(t.path(), args, &env);
        assert_eq!(out.code, 0, "{args:?}: {}", out.text);
        assert!(!out.text.contains("\"schema\""), "{args:?}: {}", out.text);
        out.text
    };
    let text = run(&[
        "checkpoint",
        "push",
        &packet,
        "--ref",
        "sessions/t/latest",
        "-q",
    ]);
    assert!(
        text.starts_with(&format!("Pushed {short} to {}", store.url)),
        "{text}"
    );
    assert!(
        text.contains(&format!("ref   sessions/t/latest created at {short}")),
        "{text}"
    );
    let text = run(&[
        "checkpoint",
        "push",
        &packet,
        "--ref",
        "sessions/t/latest",
        "-q",
    ]);
    assert!(
        text.contains("nothing: the store already holds this packet"),
        "{text}"
    );
    assert!(text.contains("unchanged"), "{text}");
    let text = run(&[
        "checkpoint",
        "pull",
        "sessions/t/latest",
        "-o",
        "pulled.tar",
        "-q",
    ]);
    assert!(text.starts_with("Pulled sessions/t/latest into "), "{text}");
    assert!(text.contains(short), "{text}");
    fs::write(t.path().join("ws/README.md"), "hello again\n").unwrap();
    let ws = t.path().join("ws");
    let text = run(&[
        "checkpoint",
        "save",
        s(&ws),
        "--ref",
        "sessions/t/latest",
        "-q",
    ]);
    assert!(
        text.starts_with(&format!("Saved {} as sessions/t/latest", s(&ws))),
        "{text}"
    );
    assert!(text.contains(&format!("moved {short} → ")), "{text}");
    assert!(text.contains(".env  credential file"), "{text}");
    let text = run(&[
        "checkpoint",
        "restore",
        "sessions/t/latest",
        "--into",
        "back",
        "-q",
    ]);
    assert!(
        text.starts_with("Restored sessions/t/latest into "),
        "{text}"
    );
    assert!(text.contains("received"), "{text}");
    assert_eq!(
        fs::read(t.path().join("back/README.md")).unwrap(),
        b"hello again\n"
    );
}

/// Every frame of the progress bar in what a terminal received: (phase,
/// done, total), in bytes as the bar rounds them.
fn frames(raw: &str) -> Vec<(String, f64, f64)> {
    let plain = terminal::readable(&raw.replace('\r', "\n").replace("\u{1b}[2K", "\n"));
    let bytes = |s: &str| -> Option<f64> {
        let (n, unit) = s.split_at(s.find(|c: char| c.is_ascii_alphabetic())?);
        let scale = match unit {
            "B" => 1.0,
            "KiB" => 1024.0,
            "MiB" => 1024.0 * 1024.0,
            "GiB" => 1024.0 * 1024.0 * 1024.0,
            _ => return None,
        };
        Some(n.trim().parse::<f64>().ok()? * scale)
    };
    plain
        .lines()
        .filter_map(|l| {
            let (phase, rest) = l.split_once(" [")?;
            let (_, counts) = rest.split_once("] ")?;
            let counts = counts.split(' ').take(4).collect::<Vec<_>>().join(" ");
            let (done, total) = counts.split_once('/')?;
            let total: String = total.split(' ').take(2).collect::<Vec<_>>().join("");
            Some((
                phase.trim().to_owned(),
                bytes(&done.replace(' ', ""))?,
                bytes(&total)?,
            ))
        })
        .collect()
}

#[test]
fn the_progress_bar_waits_and_never_runs_backwards() {
    let t = tempfile::tempdir().unwrap();
    let ws = t.path().join("ws");
    fs::create_dir_all(&ws).unwrap();
    for i in 0..40 {
        fs::write(ws.join(format!("f{i}.txt")), format!("{i}\n").repeat(2000)).unwrap();
    }
    fs::write(ws.join("large.bin"), vec![7u8; 6 << 20]).unwrap();
    // Held back: a run shorter than the hold draws nothing.
    let held = on_terminal(
        t.path(),
        &["checkpoint", "pack", s(&ws), "-o", "a.tar"],
        &[("PILLBOX_PROGRESS_AFTER_MS", "600000")],
    );
    assert_eq!(held.code, 0, "{}", held.text);
    assert!(frames(&held.raw).is_empty(), "{:?}", held.raw);
    assert!(held.text.starts_with("Packed "), "{}", held.text);
    // Drawn at once: each phase's total stays fixed and its count grows.
    for args in [
        vec!["checkpoint", "pack", s(&ws), "-o", "b.tar"],
        vec!["checkpoint", "verify", "b.tar"],
        vec!["checkpoint", "diff", "a.tar", "b.tar"],
    ] {
        let shown = on_terminal(t.path(), &args, &[("PILLBOX_PROGRESS_AFTER_MS", "0")]);
        assert_eq!(shown.code, 0, "{args:?}: {}", shown.text);
        let frames = frames(&shown.raw);
        assert!(!frames.is_empty(), "{args:?}: no bar in {:?}", shown.raw);
        for pair in frames.windows(2) {
            let ((pa, da, ta), (pb, db, tb)) = (&pair[0], &pair[1]);
            if pa == pb {
                assert_eq!(ta, tb, "{args:?}: {pa}'s total changed: {pair:?}");
                assert!(db >= da, "{args:?}: {pa} ran backwards: {pair:?}");
            }
            assert!(db <= tb, "{args:?}: {pair:?}");
        }
    }
}

#[test]
fn refs_lists_what_the_store_holds_in_both_modes() {
    let store = store::Store::start();
    let t = tempfile::tempdir().unwrap();
    let (packet, digest) = packed(t.path());
    let with_store = |args: &[&str]| {
        let mut cmd = pillbox();
        cmd.env("XDG_STATE_HOME", t.path().join("state"))
            .env("PILLBOX_REMOTE", &store.url)
            .arg("checkpoint")
            .args(args)
            .arg("-q");
        run(&mut cmd)
    };
    for name in ["sessions/b/latest", "sessions/a/latest", "other/x"] {
        assert_eq!(with_store(&["push", &packet, "--ref", name]).code, 0);
    }
    let all = with_store(&["refs"]).json();
    assert_schema("refs-1.schema.json", &all);
    let names: Vec<&str> = all["refs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["other/x", "sessions/a/latest", "sessions/b/latest"]);
    assert_eq!(all["refs"][0]["digest"], digest.as_str());
    assert_eq!(all["truncated"], false);
    let some = with_store(&["refs", "sessions/"]).json();
    assert_eq!(some["refs"].as_array().unwrap().len(), 2);
    assert_eq!(some["prefix"], "sessions/");
    let one = with_store(&["refs", "--limit", "1"]).json();
    assert_eq!(
        (one["refs"].as_array().unwrap().len(), &one["truncated"]),
        (1, &serde_json::json!(true))
    );
    let screen = on_terminal(
        t.path(),
        &["checkpoint", "refs", "sessions/", "-q"],
        &[("PILLBOX_REMOTE", store.url.as_str())],
    );
    assert_eq!(screen.code, 0, "{}", screen.text);
    let short = &digest[..19];
    assert!(
        screen
            .text
            .starts_with(&format!("2 refs under sessions/ at {}", store.url)),
        "{}",
        screen.text
    );
    assert!(
        screen
            .text
            .contains(&format!("  sessions/a/latest  {short}  2026-12-01 00:00")),
        "{}",
        screen.text
    );
}

#[test]
fn a_report_file_gets_the_json_and_the_terminal_the_summary() {
    let t = tempfile::tempdir().unwrap();
    packed(t.path());
    let ws = t.path().join("ws");
    let out = pb(
        t.path(),
        &[
            "checkpoint",
            "pack",
            s(&ws),
            "-o",
            "c.tar",
            "--report",
            "r.json",
            "-q",
        ],
    );
    assert_eq!(out.code, 0, "{}", out.text);
    assert!(out.text.starts_with("Packed "), "{}", out.text);
    let report: serde_json::Value =
        serde_json::from_slice(&fs::read(t.path().join("r.json")).unwrap()).unwrap();
    assert_schema("pack-1.schema.json", &report);
    // Piped, the file alone takes the report.
    let mut cmd = pillbox();
    cmd.current_dir(t.path()).args([
        "checkpoint",
        "pack",
        s(&ws),
        "-o",
        "d.tar",
        "--report",
        "r2.json",
        "-q",
    ]);
    let r = run(&mut cmd);
    assert_eq!(r.code, 0);
    assert!(r.stdout.is_empty());
    assert!(t.path().join("r2.json").is_file());
}
