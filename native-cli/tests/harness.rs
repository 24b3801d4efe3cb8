//! Harness state: Codex rollouts (plain and zstd-compressed) and Claude
//! Code transcripts (long project paths included) packed from fixture homes
//! and restored into fresh ones; OpenCode sessions exported and imported
//! through a stand-in `opencode` program, by unpack and by restore (fresh
//! and in place); the packet limit checked before a session log is read;
//! restore-check. The fixtures are in `common` (`codex`, `claude`,
//! `opencode`).

mod common;
mod store;

use std::fs;
use std::path::{Path, PathBuf};

use common::*;
use serde_json::Value;
use store::Store;

const MODEL: &str = "gpt-5.1-codex";

/// The sample workspace and a Codex home with its rollout, packed: the
/// packet, the rollout and the pack report.
fn codex_packet(t: &Path) -> (PathBuf, PathBuf, Value) {
    let ws = t.join("ws");
    sample_workspace(&ws);
    let home = t.join("codex-home");
    let rollout = codex_home(&home, THREAD, &ws, MODEL);
    let packet = t.join("p.tar");
    let r = pack(&ws, &packet, &codex_flags(&home));
    (packet, rollout, r)
}

#[test]
fn codex_rollout_round_trips_into_a_fresh_home() {
    let t = tmp();
    let (packet, rollout, r) = codex_packet(t.path());
    let member =
        format!("harness/codex/sessions/2026/11/30/rollout-2026-11-30T01-02-03-{THREAD}.jsonl");
    assert_eq!(r["harness"]["kind"], "codex");
    assert_eq!(r["harness"]["thread_id"], THREAD);
    assert_eq!(r["harness"]["model"], MODEL);
    assert_eq!(r["harness"]["member"], member.as_str());
    assert_eq!(r["harness"]["source_path"], s(&rollout));
    // Only the rollout travels: no auth.json, no sqlite state, no config.
    let listed: Vec<String> = ok(&["inspect", s(&packet)])["members"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["path"].as_str().unwrap().to_owned())
        .filter(|p| p.starts_with("harness"))
        .collect();
    assert_eq!(
        listed,
        [
            "harness",
            "harness/codex",
            "harness/codex/sessions",
            "harness/codex/sessions/2026",
            "harness/codex/sessions/2026/11",
            "harness/codex/sessions/2026/11/30",
            member.as_str()
        ]
    );
    assert!(!fs::read(&packet)
        .unwrap()
        .windows(16)
        .any(|w| w == b"sk-never-packed\""));

    let new_home = t.path().join("new-home");
    write(&new_home.join("config.toml"), "model = \"gpt-test\"\n");
    let out = t.path().join("restored");
    let d = r["digest"].as_str().unwrap();
    let u = ok(&unpack_args(
        &packet,
        d,
        &out,
        &["--codex-home", s(&new_home)],
    ));
    let restored = fs::canonicalize(&new_home)
        .unwrap()
        .join(member.strip_prefix("harness/codex/").unwrap());
    assert_eq!(u["harness"]["thread_id"], THREAD);
    assert_eq!(u["harness"]["model"], MODEL);
    assert_eq!(u["harness"]["restored"], true);
    assert_eq!(u["harness"]["rollout_path"], s(&restored));
    assert!(restored.is_absolute());
    assert_eq!(fs::read(&restored).unwrap(), fs::read(&rollout).unwrap());
    assert!(!new_home.join("auth.json").exists());
    assert_eq!(
        names(&new_home),
        ["config.toml", "sessions"],
        "no staging folder left behind"
    );
    assert_eq!(snapshot(&t.path().join("ws")), snapshot(&out));

    // restore-check accepts the checkpoint unpack printed.
    let cp = checkpoint_file(t.path().join("checkpoint.json"), &u);
    let c = ok(&["restore-check", "--checkpoint", s(&cp)]);
    assert_eq!(c["schema"], "pillbox.checkpoint.restore-check/1");
    assert_eq!(c["rollout_path"], s(&restored));
    assert_eq!(c["model"], MODEL);
    assert_eq!(
        c["resume"],
        serde_json::json!(["codex", "exec", "resume", THREAD])
    );

    // Restoring again refuses to overwrite the rollout, and leaves the new workspace target untouched.
    let out2 = t.path().join("restored2");
    fails(
        &unpack_args(&packet, d, &out2, &["--codex-home", s(&new_home)]),
        5,
        "target_not_empty",
    );
    assert!(!out2.exists());
}

#[test]
fn without_a_codex_home_the_rollout_is_verified_but_not_restored() {
    let t = tmp();
    let (packet, _, r) = codex_packet(t.path());
    let out = t.path().join("out");
    let u = ok(&unpack_args(
        &packet,
        r["digest"].as_str().unwrap(),
        &out,
        &[],
    ));
    assert_eq!(u["harness"]["restored"], false);
    assert_eq!(u["harness"]["rollout_path"], Value::Null);
    assert!(!out.join("harness").exists());
    let cp = checkpoint_file(t.path().join("cp.json"), &u);
    let j = fails(
        &["restore-check", "--checkpoint", s(&cp)],
        5,
        "rollout_unavailable",
    );
    assert!(j["advice"].as_str().unwrap().contains("fresh thread"));
}

#[test]
fn restore_check_refuses_relative_and_absent_rollouts() {
    let t = tmp();
    let check = |thread: &str, rollout: &str, exit: i32, code: &str| {
        let args = [
            "restore-check",
            "--thread",
            thread,
            "--rollout-path",
            rollout,
        ];
        fails(&args, exit, code)
    };
    let rel = format!("sessions/2026/11/30/rollout-2026-11-30T01-02-03-{THREAD}.jsonl");
    let j = check(THREAD, &rel, 5, "invalid_rollout_path");
    assert!(j["advice"]
        .as_str()
        .unwrap()
        .contains("start a fresh thread"));
    let absent = t.path().join(&rel);
    check(THREAD, s(&absent), 5, "rollout_unavailable");
    let home = t.path().join("home");
    let rollout = codex_home(&home, THREAD, t.path(), MODEL);
    ok(&[
        "restore-check",
        "--thread",
        THREAD,
        "--rollout-path",
        s(&rollout),
    ]);
    let other = "0199a213-81c0-7800-8aa1-000000000000";
    check(other, s(&rollout), 5, "invalid_rollout_path");
    check("NOT-A-UUID", s(&rollout), 2, "usage");
}

#[test]
fn codex_pack_refuses_bad_ids_missing_and_mismatched_rollouts() {
    let t = tmp();
    let ws = t.path().join("ws");
    write(&ws.join("a"), "x");
    let home = t.path().join("home");
    let rollout = codex_home(&home, THREAD, &ws, MODEL);
    let out = t.path().join("p.tar");
    let refused = |id: &str, exit: i32, code: &str| {
        let flags = [
            "--harness",
            "codex",
            "--thread",
            id,
            "--codex-home",
            s(&home),
        ];
        fails(&pack_args(&ws, &out, &flags), exit, code)
    };
    let upper = THREAD.to_uppercase();
    // An id given on the command line in the wrong shape is a usage error
    // that shows the shape.
    let j = refused(&upper, 2, "usage");
    assert!(
        j["message"]
            .as_str()
            .unwrap()
            .contains("--thread: thread id"),
        "{j}"
    );
    let other = "0199a213-81c0-7800-8aa1-000000000001";
    let j = refused(other, 5, "rollout_not_found");
    assert!(j["advice"].as_str().unwrap().contains("without --harness"));
    // A rollout whose session_meta names another thread.
    let text = fs::read_to_string(&rollout)
        .unwrap()
        .replacen(THREAD, other, 2);
    fs::write(&rollout, text).unwrap();
    refused(THREAD, 5, "rollout_mismatch");
    assert!(!out.exists());
    // CODEX_HOME is honoured when no flag is given.
    let home2 = t.path().join("home2");
    codex_home(&home2, THREAD, &ws, MODEL);
    let flags = ["--harness", "codex", "--thread", THREAD];
    let r = run(pillbox()
        .arg("checkpoint")
        .args(pack_args(&ws, &out, &flags))
        .args(["--expect-model", MODEL])
        .env("CODEX_HOME", &home2));
    assert_eq!(r.code, 0, "{}", String::from_utf8_lossy(&r.stdout));
    assert_eq!(r.json()["harness"]["model"], MODEL);
    let r = run(pillbox()
        .arg("checkpoint")
        .args(pack_args(&ws, &out, &flags))
        .env("HOME", t.path().join("nohome"))
        .env("CODEX_HOME", &home2));
    assert_eq!(r.code, 0);
}

#[test]
fn claude_transcript_moves_to_the_new_workspace_project_folder() {
    let t = tmp();
    let ws = t.path().join("old_work.space");
    write(&ws.join("app.js"), "console.log(1)\n");
    let ws_real = fs::canonicalize(&ws).unwrap();
    let config = t.path().join("claude");
    write(
        &config.join(".credentials.json"),
        r#"{"claudeAiOauth":{"accessToken":"never-packed"}}"#,
    );
    write(&config.join(".claude.json"), "{}");
    let project = config.join("projects").join(encoded(&ws_real));
    let transcript = format!(
        "{}\n{}\n",
        format_args!(
            r#"{{"type":"user","sessionId":"{CLAUDE_SESSION}","cwd":"{}","message":{{"role":"user","content":"hi"}},"uuid":"u1"}}"#,
            ws_real.display()
        ),
        format_args!(
            r#"{{"type":"assistant","sessionId":"{CLAUDE_SESSION}","cwd":"{}","message":{{"model":"claude-sonnet-4-5","role":"assistant","content":[]}},"uuid":"a1"}}"#,
            ws_real.display()
        )
    );
    write(
        &project.join(format!("{CLAUDE_SESSION}.jsonl")),
        &transcript,
    );
    write(
        &project.join(CLAUDE_SESSION).join("tool-results/r1.txt"),
        "tool output\n",
    );

    let packet = t.path().join("p.tar");
    let r = pack(&ws, &packet, &claude_flags(&config));
    assert_eq!(r["harness"]["kind"], "claude");
    assert_eq!(r["harness"]["model"], "claude-sonnet-4-5");
    assert_eq!(
        r["harness"]["member"],
        format!("harness/claude/{CLAUDE_SESSION}.jsonl")
    );
    assert!(!fs::read(&packet)
        .unwrap()
        .windows(12)
        .any(|w| w == b"never-packed"));

    let new_ws = t.path().join("elsewhere/new-ws");
    let new_config = t.path().join("claude2");
    let u = ok(&unpack_args(
        &packet,
        r["digest"].as_str().unwrap(),
        &new_ws,
        &["--claude-config-dir", s(&new_config)],
    ));
    let new_project = fs::canonicalize(&new_config)
        .unwrap()
        .join("projects")
        .join(encoded(&fs::canonicalize(&new_ws).unwrap()));
    let restored = new_project.join(format!("{CLAUDE_SESSION}.jsonl"));
    assert_eq!(u["harness"]["rollout_path"], s(&restored));
    // The bytes are carried unchanged (cwd fields keep the old path).
    assert_eq!(fs::read_to_string(&restored).unwrap(), transcript);
    assert_eq!(
        fs::read_to_string(new_project.join(CLAUDE_SESSION).join("tool-results/r1.txt")).unwrap(),
        "tool output\n"
    );
    assert_eq!(names(&new_config), ["projects"]);
    assert_eq!(
        fs::read_to_string(new_ws.join("app.js")).unwrap(),
        "console.log(1)\n"
    );

    // Found by searching every project folder when the workspace moved.
    let moved = t.path().join("moved");
    fs::rename(&ws, &moved).unwrap();
    let r2 = pack(&moved, &t.path().join("p2.tar"), &claude_flags(&config));
    assert_eq!(
        r2["harness"]["source_path"],
        s(&project.join(format!("{CLAUDE_SESSION}.jsonl")))
    );
    let c = ok(&[
        "restore-check",
        "--harness",
        "claude",
        "--thread",
        CLAUDE_SESSION,
        "--rollout-path",
        s(&restored),
    ]);
    assert_eq!(
        c["resume"],
        serde_json::json!(["claude", "--resume", CLAUDE_SESSION])
    );
}

#[test]
fn claude_pack_without_a_transcript_says_so() {
    let t = tmp();
    let ws = t.path().join("ws");
    write(&ws.join("a"), "x");
    let packet = t.path().join("p.tar");
    let none = t.path().join("none");
    let j = fails(
        &pack_args(&ws, &packet, &claude_flags(&none)),
        5,
        "transcript_not_found",
    );
    assert!(j["message"].as_str().unwrap().contains(CLAUDE_SESSION));
    // An id flag of the other harness is a usage error, not silently ignored.
    let usage = |flags: &[&str]| fails(&pack_args(&ws, &packet, flags), 2, "usage");
    usage(&[
        "--harness",
        "claude",
        "--session",
        CLAUDE_SESSION,
        "--thread",
        THREAD,
    ]);
    usage(&["--harness", "codex"]);
    usage(&["--thread", THREAD]);
}

// ---- Codex: compressed rollouts ------------------------------------------

#[test]
fn a_compressed_codex_rollout_travels_compressed() {
    let t = tmp();
    let ws = t.path().join("ws");
    write(&ws.join("a"), "x");
    let home = t.path().join("home");
    let rollout = codex_home(&home, THREAD, &ws, MODEL);
    let zst = compress(&rollout);
    let packet = t.path().join("p.tar");
    let base = codex_flags(&home);
    // Both forms present: Codex could read either, so pack refuses.
    let j = fails(&pack_args(&ws, &packet, &base), 5, "rollout_ambiguous");
    assert!(j["message"]
        .as_str()
        .unwrap()
        .contains("plain and compressed"));
    fs::remove_file(&rollout).unwrap();
    let r = pack(&ws, &packet, &base);
    let member =
        format!("harness/codex/sessions/2026/11/30/rollout-2026-11-30T01-02-03-{THREAD}.jsonl.zst");
    assert_eq!(r["harness"]["member"], member.as_str());
    assert_eq!(r["harness"]["model"], MODEL, "read from inside the .zst");
    assert_eq!(r["harness"]["source_path"], s(&zst));
    let new_home = t.path().join("new-home");
    let u = ok(&unpack_args(
        &packet,
        r["digest"].as_str().unwrap(),
        &t.path().join("out"),
        &["--codex-home", s(&new_home)],
    ));
    let restored = fs::canonicalize(&new_home)
        .unwrap()
        .join(member.strip_prefix("harness/codex/").unwrap());
    assert_eq!(u["harness"]["rollout_path"], s(&restored));
    assert_eq!(fs::read(&restored).unwrap(), fs::read(&zst).unwrap());
    let cp = checkpoint_file(t.path().join("cp.json"), &u);
    let c = ok(&["restore-check", "--checkpoint", s(&cp)]);
    assert_eq!(c["model"], MODEL);
    // A .zst that is not zstd.
    fs::write(&zst, &fs::read(&restored).unwrap()[..8]).unwrap();
    fails(&pack_args(&ws, &packet, &base), 5, "session_log_invalid");
}

#[test]
fn a_rollout_too_large_for_the_packet_is_refused_before_it_is_read() {
    let t = tmp();
    let ws = t.path().join("ws");
    write(&ws.join("a"), "0123456789");
    let home = t.path().join("home");
    let rollout = codex_home(&home, THREAD, &ws, MODEL);
    // Sparse: reading or hashing it would take seconds; the refusal must
    // not. 5 bytes short of the format's 16 GiB limit.
    let f = fs::OpenOptions::new().write(true).open(&rollout).unwrap();
    f.set_len((16 << 30) - 5).unwrap();
    drop(f);
    let started = std::time::Instant::now();
    let packet = t.path().join("p.tar");
    let j = fails(
        &pack_args(&ws, &packet, &codex_flags(&home)),
        5,
        "session_log_too_large",
    );
    assert!(started.elapsed() < std::time::Duration::from_secs(5));
    assert_eq!(j["path"], s(&rollout));
    let message = j["message"].as_str().unwrap();
    assert!(
        message.contains(&((16u64 << 30) - 5).to_string()),
        "{message}"
    );
    assert!(message.contains("10 bytes"), "{message}");
    assert!(j["advice"]
        .as_str()
        .unwrap()
        .contains("compress the rollout"));
    assert!(!t.path().join("p.tar").exists());
}

// ---- Claude Code: long project paths ---------------------------------------

#[test]
fn claude_workspaces_with_long_paths_use_the_hashed_folder_name() {
    let t = tmp();
    let ws = long_dir(t.path(), "old");
    write(&ws.join("a.txt"), "a\n");
    let ws_real = fs::canonicalize(&ws).unwrap();
    let folder = claude_folder(&ws_real);
    assert!(folder.len() > 200, "the test needs a long path");
    let config = t.path().join("claude");
    let transcript = claude_transcript(&config, &folder);
    // A stray copy elsewhere: the workspace's own folder is taken first.
    claude_transcript(&config, "-some-other-project");
    let packet = t.path().join("p.tar");
    let r = pack(&ws, &packet, &claude_flags(&config));
    assert_eq!(
        r["harness"]["source_path"],
        s(&config
            .join("projects")
            .join(&folder)
            .join(format!("{CLAUDE_SESSION}.jsonl")))
    );
    let new_ws = long_dir(t.path(), "new");
    let new_config = t.path().join("claude2");
    let u = ok(&unpack_args(
        &packet,
        r["digest"].as_str().unwrap(),
        &new_ws,
        &["--claude-config-dir", s(&new_config)],
    ));
    let restored = fs::canonicalize(&new_config)
        .unwrap()
        .join("projects")
        .join(claude_folder(&fs::canonicalize(&new_ws).unwrap()))
        .join(format!("{CLAUDE_SESSION}.jsonl"));
    assert_eq!(u["harness"]["rollout_path"], s(&restored));
    assert_eq!(fs::read_to_string(&restored).unwrap(), transcript);
}

#[test]
fn claude_code_project_dir_name_names_the_folder() {
    let t = tmp();
    let ws = t.path().join("ws");
    write(&ws.join("a.txt"), "a\n");
    let config = t.path().join("claude");
    claude_transcript(&config, "chosen-name");
    let packet = t.path().join("p.tar");
    let run_with = |name: &str, args: &[&str]| {
        run(pillbox()
            .arg("checkpoint")
            .args(args)
            .env("CLAUDE_CODE_PROJECT_DIR_NAME", name))
    };
    let r = run_with(
        "chosen-name",
        &pack_args(&ws, &packet, &claude_flags(&config)),
    );
    assert_eq!(r.code, 0, "{}", String::from_utf8_lossy(&r.stdout));
    let digest = r.json()["digest"].as_str().unwrap().to_owned();
    let new_config = t.path().join("claude2");
    let unpack = |name: &str, into: &str| {
        let into = t.path().join(into);
        let flags = ["--claude-config-dir", s(&new_config)];
        run_with(name, &unpack_args(&packet, &digest, &into, &flags))
    };
    let u = unpack("restored-here", "out");
    assert_eq!(u.code, 0, "{}", String::from_utf8_lossy(&u.stdout));
    let restored = fs::canonicalize(&new_config)
        .unwrap()
        .join("projects/restored-here")
        .join(format!("{CLAUDE_SESSION}.jsonl"));
    assert_eq!(u.json()["harness"]["rollout_path"], s(&restored));
    let bad = unpack("../escape", "out2");
    assert_eq!(bad.code, 5);
    assert_eq!(bad.json()["code"], "claude_project_dir_invalid");
    assert!(!t.path().join("out2").exists());
}

// ---- OpenCode, through a stand-in program ---------------------------------

#[test]
fn opencode_sessions_travel_as_an_export_and_are_imported_in_the_new_workspace() {
    let t = tmp();
    let opencode = Opencode::new(t.path());
    let a = opencode_box(t.path(), "a");
    let export = export_json(&["msg_1", "msg_2"]);
    write(&a.session(), &export);
    let ws = t.path().join("a/ws");
    write(&ws.join("app.js"), "console.log(1)\n");
    // OpenCode's state inside the workspace (a project-local data folder) is
    // left out by the credential rules like any other copy.
    write(
        &ws.join(".local/share/opencode/opencode.db"),
        "SQLite format 3\0",
    );
    write(&ws.join(".local/share/opencode/auth.json"), "{}");
    let packet = t.path().join("p.tar");
    let r = opencode.pack(&a, &ws, &packet);
    assert_eq!(r.code, 0, "{}", String::from_utf8_lossy(&r.stdout));
    let r = r.json();
    let member = format!("harness/opencode/{OC_SESSION}.json");
    assert_eq!(r["harness"]["kind"], "opencode");
    assert_eq!(r["harness"]["thread_id"], OC_SESSION);
    assert_eq!(r["harness"]["model"], "claude-sonnet-4-5");
    assert_eq!(r["harness"]["provider"], "anthropic");
    assert_eq!(r["harness"]["version"], "1.18.33");
    assert_eq!(r["harness"]["member"], member.as_str());
    assert!(r["harness"].get("source_path").is_none());
    // The export ran from the workspace, without the caller's secrets.
    let env = fs::read_to_string(a.data.join("last-env")).unwrap();
    assert!(
        !env.contains("sk-ant-env-secret") && !env.contains("sk-inline"),
        "{env}"
    );
    assert!(env.contains("OPENCODE_DISABLE_AUTOUPDATE=1"));
    assert_eq!(
        fs::read_to_string(a.data.join("last-cwd")).unwrap().trim(),
        s(&fs::canonicalize(&ws).unwrap())
    );
    // The packet holds the export, byte for byte, and no database or key.
    let c = checkpoint(&["cat", s(&packet), &member]);
    assert_eq!(String::from_utf8(c.stdout).unwrap(), export);
    let bytes = fs::read(&packet).unwrap();
    assert!(!bytes.windows(15).any(|w| w == b"SQLite format 3"));
    assert!(!bytes.windows(19).any(|w| w == b"sk-ant-never-packed"));
    let i = ok(&["inspect", s(&packet)]);
    let rules: Vec<&str> = i["exclusions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["rule"].as_str().unwrap())
        .collect();
    assert!(
        rules.contains(&"opencode-db") && rules.contains(&"opencode-auth"),
        "{rules:?}"
    );
    let digest = r["digest"].as_str().unwrap().to_owned();
    let unpack =
        |b: &OpencodeBox, into: &str| opencode.unpack(b, &packet, &digest, &t.path().join(into));

    // Box B: without --opencode-import the export is verified, not imported.
    let b = opencode_box(t.path(), "b");
    let plain = t.path().join("b/plain");
    let u = oc(&unpack_args(&packet, &digest, &plain, &[]), &b);
    assert_eq!(u.code, 0);
    assert_eq!(u.json()["harness"]["restored"], false);
    assert!(!b.session().exists());

    // With it: imported from inside the new workspace.
    let new_ws = t.path().join("b/elsewhere/ws2");
    let u = unpack(&b, "b/elsewhere/ws2");
    assert_eq!(u.code, 0, "{}", String::from_utf8_lossy(&u.stdout));
    let u = u.json();
    assert_eq!(u["harness"]["restored"], true);
    assert_eq!(u["harness"]["rollout_path"], Value::Null);
    assert_eq!(u["harness"]["messages"], 2);
    assert_eq!(u["harness"]["last_message"], "msg_2");
    assert_eq!(fs::read_to_string(b.session()).unwrap(), export);
    assert_eq!(
        fs::read_to_string(b.data.join("import-cwd"))
            .unwrap()
            .trim(),
        s(&fs::canonicalize(&new_ws).unwrap())
    );
    assert_eq!(
        fs::read_to_string(new_ws.join("app.js")).unwrap(),
        "console.log(1)\n"
    );
    assert!(!new_ws.join(".local/share/opencode/opencode.db").exists());
    assert!(!new_ws.join(".local/share/opencode/auth.json").exists());
    let cp = checkpoint_file(t.path().join("cp.json"), &u);
    let c = opencode.restore_check(&b, &cp);
    assert_eq!(c.code, 0, "{}", String::from_utf8_lossy(&c.stdout));
    let c = c.json();
    assert_eq!(c["rollout_path"], Value::Null);
    assert_eq!(
        c["resume"],
        serde_json::json!(["opencode", "run", "--session", OC_SESSION])
    );

    // The same session again: nothing to import, nothing refused.
    let again = unpack(&b, "b/again");
    assert_eq!(again.code, 0, "{}", String::from_utf8_lossy(&again.stdout));

    // An earlier version of the session is brought forward.
    b.holds(&["msg_1"]);
    let forward = unpack(&b, "b/forward");
    assert_eq!(
        forward.code,
        0,
        "{}",
        String::from_utf8_lossy(&forward.stdout)
    );
    assert_eq!(forward.json()["harness"]["messages"], 2);
    assert_eq!(fs::read_to_string(b.session()).unwrap(), export);

    // Another copy of the session with other messages is never replaced.
    let other = export_json(&["msg_1", "msg_9"]);
    write(&b.session(), &other);
    let j = unpack(&b, "b/clash");
    assert_eq!(j.code, 5);
    assert_eq!(j.json()["code"], "opencode_session_conflict");
    assert!(!t.path().join("b/clash").exists());
    assert_eq!(fs::read_to_string(b.session()).unwrap(), other);
    let c = opencode.restore_check(&b, &cp);
    assert_eq!(c.json()["code"], "opencode_session_conflict");
    // A session resumed since (more messages after the packet's) passes.
    b.holds(&["msg_1", "msg_2", "msg_3"]);
    let c = opencode.restore_check(&b, &cp);
    assert_eq!(c.code, 0);
    fs::remove_file(b.session()).unwrap();
    let c = opencode.restore_check(&b, &cp);
    assert_eq!(c.json()["code"], "rollout_unavailable");

    // An OpenCode older than the exporter is refused before anything is written.
    write(&b.data.join("version"), "1.9.0\n");
    let j = unpack(&b, "b/old");
    assert_eq!(j.json()["code"], "opencode_too_old");
    assert!(!t.path().join("b/old").exists());
    let c = opencode.restore_check(&b, &cp);
    assert_eq!(c.json()["code"], "opencode_too_old");
}

#[test]
fn opencode_pack_refusals_name_the_command() {
    let t = tmp();
    let bin = fake_opencode(t.path());
    let a = opencode_box(t.path(), "a");
    let ws = t.path().join("ws");
    write(&ws.join("a"), "x");
    let out = t.path().join("p.tar");
    let pack_with = |bin: &str, id: &str| {
        let flags = [
            "--harness",
            "opencode",
            "--session",
            id,
            "--opencode-bin",
            bin,
        ];
        oc(&pack_args(&ws, &out, &flags), &a)
    };
    let missing = pack_with(s(&t.path().join("no/opencode")), OC_SESSION);
    assert_eq!(
        (missing.code, missing.json()["code"].as_str()),
        (5, Some("opencode_unavailable"))
    );
    let absent = pack_with(s(&bin), OC_SESSION).json();
    assert_eq!(absent["code"], "opencode_failed");
    let message = absent["message"].as_str().unwrap();
    assert!(
        message.contains(&format!("export {OC_SESSION}")),
        "{message}"
    );
    assert!(message.contains("Error: Session not found"), "{message}");
    assert!(!message.contains('\u{1b}'), "{message}");
    assert_eq!(
        pack_with(s(&bin), "0199a213-81c0-7800-8aa1-bbab2a035a53").json()["code"],
        "usage"
    );
    write(
        &a.session(),
        "{\"info\":{\"id\":\"ses_other\"},\"messages\":[]}",
    );
    assert_eq!(
        pack_with(s(&bin), OC_SESSION).json()["code"],
        "session_log_mismatch"
    );
    write(&a.session(), "[]");
    assert_eq!(
        pack_with(s(&bin), OC_SESSION).json()["code"],
        "session_log_invalid"
    );
    assert!(!out.exists());
    // --thread is Codex's.
    fails(
        &pack_args(&ws, &out, &["--harness", "opencode", "--thread", THREAD]),
        2,
        "usage",
    );
}

#[test]
fn restore_imports_an_opencode_session_fresh_and_in_place() {
    let store = Store::start();
    let t = tmp();
    let opencode = Opencode::new(t.path());
    let save = |b: &OpencodeBox, ws: &Path| opencode.save(b, &store.url, ws);
    let restore =
        |b: &OpencodeBox, ws: &Path, extra: &[&str]| opencode.restore(b, &store.url, ws, extra);
    let a = opencode_box(t.path(), "a");
    let b = opencode_box(t.path(), "b");
    // Turn 1 on A.
    let ws_a = a.root.join("ws");
    write(&ws_a.join("app.js"), "console.log(1)\n");
    a.holds(&["msg_1"]);
    save(&a, &ws_a);

    // Turn 2 on B: restored fresh and imported from inside the workspace.
    let ws_b = b.root.join("ws");
    let r = restore(&b, &ws_b, &[]);
    assert_eq!(r.code, 0, "{}", String::from_utf8_lossy(&r.stdout));
    let v = r.json();
    assert_eq!(v["harness"]["restored"], true, "{v}");
    assert_eq!(v["harness"]["rollout_path"], Value::Null);
    assert_eq!(v["harness"]["messages"], 1);
    assert_eq!(v["harness"]["last_message"], "msg_1");
    assert_eq!(
        fs::read_to_string(b.session()).unwrap(),
        export_json(&["msg_1"])
    );
    assert_eq!(
        fs::read_to_string(b.data.join("import-cwd"))
            .unwrap()
            .trim(),
        s(&fs::canonicalize(&ws_b).unwrap())
    );
    write(&ws_b.join("app.js"), "console.log(2)\n");
    b.holds(&["msg_1", "msg_2"]);
    save(&b, &ws_b);

    // Turn 3 on A, in place: A's copy is the start of the checkpoint's,
    // so the checkpoint's is imported over it.
    let r = restore(&a, &ws_a, &[]);
    assert_eq!(r.code, 0, "{}", String::from_utf8_lossy(&r.stdout));
    let v = r.json();
    assert_eq!(v["harness"]["restored"], true, "{v}");
    assert_eq!(v["harness"]["messages"], 2);
    assert_eq!(v["harness"]["last_message"], "msg_2");
    assert_eq!(
        fs::read_to_string(ws_a.join("app.js")).unwrap(),
        "console.log(2)\n"
    );
    assert_eq!(
        fs::read_to_string(a.session()).unwrap(),
        export_json(&["msg_1", "msg_2"])
    );

    // Restored again with nothing new: A holds the same session, and
    // nothing is imported.
    fs::remove_file(a.data.join("import-cwd")).unwrap();
    let r = restore(&a, &ws_a, &[]);
    assert_eq!(r.code, 0, "{}", String::from_utf8_lossy(&r.stdout));
    assert_eq!(r.json()["harness"]["restored"], true);
    assert!(!a.data.join("import-cwd").exists());

    // A's copy went its own way: refused, and kept, unless --discard-local.
    a.holds(&["msg_1", "msg_x"]);
    write(&ws_b.join("app.js"), "console.log(3)\n");
    b.holds(&["msg_1", "msg_2", "msg_3"]);
    save(&b, &ws_b);
    let r = restore(&a, &ws_a, &[]);
    assert_eq!(r.code, 5, "{}", String::from_utf8_lossy(&r.stdout));
    assert_eq!(r.json()["code"], "opencode_session_conflict");
    assert_eq!(
        fs::read_to_string(a.session()).unwrap(),
        export_json(&["msg_1", "msg_x"])
    );
    assert_eq!(
        fs::read_to_string(ws_a.join("app.js")).unwrap(),
        "console.log(2)\n"
    );
    let r = restore(&a, &ws_a, &["--discard-local"]);
    assert_eq!(r.code, 0, "{}", String::from_utf8_lossy(&r.stdout));
    assert_eq!(r.json()["harness"]["messages"], 3);
    assert_eq!(
        fs::read_to_string(a.session()).unwrap(),
        export_json(&["msg_1", "msg_2", "msg_3"])
    );

    // Into an empty folder, an earlier version of the session is brought
    // forward too; a copy that went its own way is refused, and nothing is
    // restored.
    let c = opencode_box(t.path(), "c");
    c.holds(&["msg_1"]);
    let r = restore(&c, &c.root.join("ws"), &[]);
    assert_eq!(r.code, 0, "{}", String::from_utf8_lossy(&r.stdout));
    assert_eq!(r.json()["harness"]["messages"], 3);
    assert_eq!(
        fs::read_to_string(c.session()).unwrap(),
        export_json(&["msg_1", "msg_2", "msg_3"])
    );
    let d = opencode_box(t.path(), "d");
    d.holds(&["msg_1", "msg_y"]);
    let r = restore(&d, &d.root.join("ws"), &[]);
    assert_eq!(r.code, 5, "{}", String::from_utf8_lossy(&r.stdout));
    assert_eq!(r.json()["code"], "opencode_session_conflict");
    assert!(!t.path().join("d/ws").exists());
    assert_eq!(
        fs::read_to_string(d.session()).unwrap(),
        export_json(&["msg_1", "msg_y"])
    );
}

#[test]
fn a_discarded_opencode_copy_is_put_back_when_the_import_fails() {
    let store = Store::start();
    let t = tmp();
    let opencode = Opencode::new(t.path());
    let a = opencode_box(t.path(), "a");
    let b = opencode_box(t.path(), "b");
    // The backups a restore on A exports, in a temporary folder of its own.
    let temp = a.root.join("tmp");
    fs::create_dir_all(&temp).unwrap();
    let backups = || -> Vec<PathBuf> {
        fs::read_dir(&temp)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| s(p).contains("pillbox-opencode-backup-"))
            .collect()
    };
    let restore_discarding = |ws: &Path| {
        let mut cmd = pillbox();
        cmd.env("XDG_STATE_HOME", a.root.join("state"))
            .env("XDG_CACHE_HOME", a.root.join("cache"))
            .env("TMPDIR", &temp)
            .args(["checkpoint", "restore", OC_REF, "--remote", &store.url])
            .args(["--into", s(ws), "--quiet", "--discard-local"])
            .args(["--opencode-import", "--opencode-bin", s(&opencode.bin)]);
        with_box(&mut cmd, &a)
    };
    let ws_a = a.root.join("ws");
    write(&ws_a.join("app.js"), "console.log(1)\n");
    a.holds(&["msg_1"]);
    opencode.save(&a, &store.url, &ws_a);
    let ws_b = b.root.join("ws");
    assert_eq!(opencode.restore(&b, &store.url, &ws_b, &[]).code, 0);
    b.holds(&["msg_1", "msg_2"]);
    opencode.save(&b, &store.url, &ws_b);
    // A's copy went its own way.
    let own_way = export_json(&["msg_1", "msg_x"]);
    write(&a.session(), &own_way);

    // The import fails after the copy was deleted: the copy is put back
    // from its backup, which is then removed, and the failure is the
    // import's.
    write(&a.data.join("fail-imports"), "1");
    let r = restore_discarding(&ws_a);
    assert_eq!(r.code, 5, "{}", String::from_utf8_lossy(&r.stdout));
    let v = r.json();
    assert_eq!(v["code"], "opencode_failed");
    let message = v["message"].as_str().unwrap();
    assert!(message.contains("Error: the import failed"), "{message}");
    assert!(!message.contains("pillbox-opencode-backup-"), "{message}");
    assert_eq!(fs::read_to_string(a.session()).unwrap(), own_way);
    assert_eq!(
        fs::read_to_string(a.data.join("deleted")).unwrap(),
        format!("{OC_SESSION}\n")
    );
    assert_eq!(backups(), Vec::<PathBuf>::new());

    // Putting it back fails too: the backup is kept, and the failure says
    // where it is.
    write(&a.data.join("fail-imports"), "2");
    let r = restore_discarding(&ws_a);
    assert_eq!(r.code, 5, "{}", String::from_utf8_lossy(&r.stdout));
    let v = r.json();
    assert_eq!(v["code"], "opencode_failed");
    let message = v["message"].as_str().unwrap();
    assert!(!a.session().exists());
    let kept = backups();
    assert_eq!(kept.len(), 1, "{kept:?}");
    assert!(
        message.contains(&format!("kept as an export in {}", s(&kept[0]))),
        "{message}"
    );
    assert_eq!(fs::read_to_string(&kept[0]).unwrap(), own_way);
    fs::remove_file(&kept[0]).unwrap();

    // Put back by hand, then discarded: the checkpoint's session exactly,
    // and no backup left.
    write(&a.session(), &own_way);
    let r = restore_discarding(&ws_a);
    assert_eq!(r.code, 0, "{}", String::from_utf8_lossy(&r.stdout));
    assert_eq!(
        fs::read_to_string(a.session()).unwrap(),
        export_json(&["msg_1", "msg_2"])
    );
    assert_eq!(backups(), Vec::<PathBuf>::new());
}

#[test]
fn an_in_place_restore_checks_the_opencode_program_and_export_as_unpack_does() {
    use packet_core::in_memory::{build, Source};
    use packet_core::{Harness, HarnessKind, Limits};
    let store = Store::start();
    let t = tmp();
    let opencode = Opencode::new(t.path());
    let restore = |b: &OpencodeBox, ws: &Path| opencode.restore(b, &store.url, ws, &[]);
    let a = opencode_box(t.path(), "a");
    let b = opencode_box(t.path(), "b");
    let ws_a = a.root.join("ws");
    write(&ws_a.join("app.js"), "console.log(1)\n");
    a.holds(&["msg_1"]);
    opencode.save(&a, &store.url, &ws_a);
    let ws_b = b.root.join("ws");
    let r = restore(&b, &ws_b);
    assert_eq!(r.code, 0, "{}", String::from_utf8_lossy(&r.stdout));
    write(&ws_a.join("app.js"), "console.log(2)\n");
    a.holds(&["msg_1", "msg_2"]);
    opencode.save(&a, &store.url, &ws_a);
    let unchanged = |b: &OpencodeBox| {
        assert_eq!(
            fs::read_to_string(ws_b.join("app.js")).unwrap(),
            "console.log(1)\n"
        );
        assert_eq!(
            fs::read_to_string(b.session()).unwrap(),
            export_json(&["msg_1"])
        );
    };

    // An OpenCode older than the exporter: refused before anything changes.
    write(&b.data.join("version"), "1.9.0\n");
    let r = restore(&b, &ws_b);
    assert_eq!(r.code, 5, "{}", String::from_utf8_lossy(&r.stdout));
    assert_eq!(r.json()["code"], "opencode_too_old");
    unchanged(&b);
    fs::remove_file(b.data.join("version")).unwrap();

    // A checkpoint whose export is not harness/opencode/<session>.json.
    let stray = format!("harness/opencode/copy-of-{OC_SESSION}.json");
    let file = |path: &str, text: &str| Source::File {
        path: path.into(),
        contents: text.as_bytes().to_vec(),
        executable: false,
    };
    let dir = |path: &str| Source::Dir { path: path.into() };
    let built = build(
        &[
            dir("harness"),
            dir("harness/opencode"),
            file(&stray, &export_json(&["msg_1", "msg_2"])),
            dir("workspace"),
            file("workspace/app.js", "console.log(3)\n"),
        ],
        Some(Harness {
            kind: HarnessKind::Opencode,
            model: Some("claude-sonnet-4-5".into()),
            session_log: stray.clone(),
            session_id: OC_SESSION.into(),
            provider: Some("anthropic".into()),
            version: Some("1.18.33".into()),
        }),
        vec![],
        &Limits::FORMAT,
    )
    .unwrap();
    let packet = t.path().join("stray.tar");
    fs::write(&packet, &built.bytes).unwrap();
    let args = [
        "push",
        s(&packet),
        "--remote",
        &store.url,
        "--ref",
        OC_REF,
        "--quiet",
    ];
    let r = a.checkpoint(&args);
    assert_eq!(r.code, 0, "push: {}", String::from_utf8_lossy(&r.stdout));
    let fresh = restore(&b, &b.root.join("fresh"));
    assert_eq!(fresh.code, 5, "{}", String::from_utf8_lossy(&fresh.stdout));
    assert_eq!(fresh.json()["code"], "session_log_invalid");
    let r = restore(&b, &ws_b);
    assert_eq!(r.code, 5, "{}", String::from_utf8_lossy(&r.stdout));
    let j = r.json();
    assert_eq!(j["code"], "session_log_invalid");
    assert_eq!(j["path"], stray.as_str());
    unchanged(&b);
}
