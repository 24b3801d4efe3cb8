//! Harness state: Codex rollouts and Claude Code transcripts packed from
//! fixture homes and restored into fresh ones; restore-check; OpenCode.

mod common;

use std::fs;

use common::*;
use serde_json::Value;

const MODEL: &str = "gpt-5.1-codex";

fn codex_packet(t: &std::path::Path) -> (std::path::PathBuf, std::path::PathBuf, Value) {
    let ws = t.join("ws");
    sample_workspace(&ws);
    let home = t.join("codex-home");
    let rollout = codex_home(&home, THREAD, &ws, MODEL);
    let packet = t.join("p.tar");
    let r = pack(
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
    let u = ok(&[
        "unpack",
        s(&packet),
        "--digest",
        d,
        "--into",
        s(&out),
        "--codex-home",
        s(&new_home),
    ]);
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
    let cp = t.path().join("checkpoint.json");
    fs::write(&cp, serde_json::to_vec(&u).unwrap()).unwrap();
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
        &[
            "unpack",
            s(&packet),
            "--digest",
            d,
            "--into",
            s(&out2),
            "--codex-home",
            s(&new_home),
        ],
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
    let u = ok(&[
        "unpack",
        s(&packet),
        "--digest",
        r["digest"].as_str().unwrap(),
        "--into",
        s(&out),
    ]);
    assert_eq!(u["harness"]["restored"], false);
    assert_eq!(u["harness"]["rollout_path"], Value::Null);
    assert!(!out.join("harness").exists());
    let cp = t.path().join("cp.json");
    fs::write(&cp, serde_json::to_vec(&u).unwrap()).unwrap();
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
    let rel = format!("sessions/2026/11/30/rollout-2026-11-30T01-02-03-{THREAD}.jsonl");
    let j = fails(
        &["restore-check", "--thread", THREAD, "--rollout-path", &rel],
        5,
        "invalid_rollout_path",
    );
    assert!(j["advice"]
        .as_str()
        .unwrap()
        .contains("start a fresh thread"));
    let absent = t.path().join(&rel);
    fails(
        &[
            "restore-check",
            "--thread",
            THREAD,
            "--rollout-path",
            s(&absent),
        ],
        5,
        "rollout_unavailable",
    );
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
    fails(
        &[
            "restore-check",
            "--thread",
            other,
            "--rollout-path",
            s(&rollout),
        ],
        5,
        "invalid_rollout_path",
    );
    fails(
        &[
            "restore-check",
            "--thread",
            "NOT-A-UUID",
            "--rollout-path",
            s(&rollout),
        ],
        5,
        "invalid_thread_id",
    );
}

#[test]
fn codex_pack_refuses_bad_ids_missing_and_mismatched_rollouts() {
    let t = tmp();
    let ws = t.path().join("ws");
    write(&ws.join("a"), "x");
    let home = t.path().join("home");
    let rollout = codex_home(&home, THREAD, &ws, MODEL);
    let out = t.path().join("p.tar");
    let base = |id: &str| {
        vec![
            "pack".to_owned(),
            s(&ws).into(),
            "-o".into(),
            s(&out).into(),
            "--harness".into(),
            "codex".into(),
            "--thread".into(),
            id.into(),
            "--codex-home".into(),
            s(&home).into(),
        ]
    };
    let upper = THREAD.to_uppercase();
    fails(&args(&base(&upper)), 5, "invalid_thread_id");
    let other = "0199a213-81c0-7800-8aa1-000000000001";
    let j = fails(&args(&base(other)), 5, "rollout_not_found");
    assert!(j["advice"].as_str().unwrap().contains("without --harness"));
    // A rollout whose session_meta names another thread.
    let text = fs::read_to_string(&rollout)
        .unwrap()
        .replacen(THREAD, other, 2);
    fs::write(&rollout, text).unwrap();
    fails(&args(&base(THREAD)), 5, "rollout_mismatch");
    assert!(!out.exists());
    // CODEX_HOME is honoured when no flag is given.
    let home2 = t.path().join("home2");
    codex_home(&home2, THREAD, &ws, MODEL);
    let r = run(pillbox()
        .args([
            "checkpoint",
            "pack",
            s(&ws),
            "-o",
            s(&out),
            "--harness",
            "codex",
            "--thread",
            THREAD,
            "--expect-model",
            MODEL,
        ])
        .env("CODEX_HOME", &home2));
    assert_eq!(r.code, 0, "{}", String::from_utf8_lossy(&r.stdout));
    assert_eq!(r.json()["harness"]["model"], MODEL);
    let r = run(pillbox()
        .args([
            "checkpoint",
            "pack",
            s(&ws),
            "-o",
            s(&out),
            "--harness",
            "codex",
            "--thread",
            THREAD,
        ])
        .env("HOME", t.path().join("nohome"))
        .env("CODEX_HOME", &home2));
    assert_eq!(r.code, 0);
}

const SESSION: &str = "5f1c7a0e-2b6d-4c3e-9a8f-0123456789ab";

fn args(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

fn encoded(path: &std::path::Path) -> String {
    path.to_str()
        .unwrap()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect()
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
            r#"{{"type":"user","sessionId":"{SESSION}","cwd":"{}","message":{{"role":"user","content":"hi"}},"uuid":"u1"}}"#,
            ws_real.display()
        ),
        format_args!(
            r#"{{"type":"assistant","sessionId":"{SESSION}","cwd":"{}","message":{{"model":"claude-sonnet-4-5","role":"assistant","content":[]}},"uuid":"a1"}}"#,
            ws_real.display()
        )
    );
    write(&project.join(format!("{SESSION}.jsonl")), &transcript);
    write(
        &project.join(SESSION).join("tool-results/r1.txt"),
        "tool output\n",
    );

    let packet = t.path().join("p.tar");
    let r = pack(
        &ws,
        &packet,
        &[
            "--harness",
            "claude",
            "--session",
            SESSION,
            "--claude-config-dir",
            s(&config),
        ],
    );
    assert_eq!(r["harness"]["kind"], "claude");
    assert_eq!(r["harness"]["model"], "claude-sonnet-4-5");
    assert_eq!(
        r["harness"]["member"],
        format!("harness/claude/{SESSION}.jsonl")
    );
    assert!(!fs::read(&packet)
        .unwrap()
        .windows(12)
        .any(|w| w == b"never-packed"));

    let new_ws = t.path().join("elsewhere/new-ws");
    let new_config = t.path().join("claude2");
    let u = ok(&[
        "unpack",
        s(&packet),
        "--digest",
        r["digest"].as_str().unwrap(),
        "--into",
        s(&new_ws),
        "--claude-config-dir",
        s(&new_config),
    ]);
    let new_project = fs::canonicalize(&new_config)
        .unwrap()
        .join("projects")
        .join(encoded(&fs::canonicalize(&new_ws).unwrap()));
    let restored = new_project.join(format!("{SESSION}.jsonl"));
    assert_eq!(u["harness"]["rollout_path"], s(&restored));
    // The bytes are carried unchanged (cwd fields keep the old path).
    assert_eq!(fs::read_to_string(&restored).unwrap(), transcript);
    assert_eq!(
        fs::read_to_string(new_project.join(SESSION).join("tool-results/r1.txt")).unwrap(),
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
    let r2 = pack(
        &moved,
        &t.path().join("p2.tar"),
        &[
            "--harness",
            "claude",
            "--session",
            SESSION,
            "--claude-config-dir",
            s(&config),
        ],
    );
    assert_eq!(
        r2["harness"]["source_path"],
        s(&project.join(format!("{SESSION}.jsonl")))
    );
    let c = ok(&[
        "restore-check",
        "--harness",
        "claude",
        "--thread",
        SESSION,
        "--rollout-path",
        s(&restored),
    ]);
    assert_eq!(
        c["resume"],
        serde_json::json!(["claude", "--resume", SESSION])
    );
}

#[test]
fn claude_pack_without_a_transcript_says_so() {
    let t = tmp();
    let ws = t.path().join("ws");
    write(&ws.join("a"), "x");
    let j = fails(
        &[
            "pack",
            s(&ws),
            "-o",
            s(&t.path().join("p.tar")),
            "--harness",
            "claude",
            "--session",
            SESSION,
            "--claude-config-dir",
            s(&t.path().join("none")),
        ],
        5,
        "transcript_not_found",
    );
    assert!(j["message"].as_str().unwrap().contains(SESSION));
    // An id flag of the other harness is a usage error, not silently ignored.
    fails(
        &[
            "pack",
            s(&ws),
            "-o",
            s(&t.path().join("p.tar")),
            "--harness",
            "claude",
            "--session",
            SESSION,
            "--thread",
            THREAD,
        ],
        2,
        "usage",
    );
    fails(
        &[
            "pack",
            s(&ws),
            "-o",
            s(&t.path().join("p.tar")),
            "--harness",
            "codex",
        ],
        2,
        "usage",
    );
    fails(
        &[
            "pack",
            s(&ws),
            "-o",
            s(&t.path().join("p.tar")),
            "--thread",
            THREAD,
        ],
        2,
        "usage",
    );
}
