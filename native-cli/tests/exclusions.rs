//! What never enters a packet: credential files (each rule, from a real
//! pack), user patterns, special files, escaping symlinks, `.git` files.

mod common;

use std::fs;
use std::os::unix::fs::symlink;
use std::os::unix::net::UnixListener;

use common::*;
use serde_json::Value;

/// One concrete path per credential rule, as found in real homes and
/// workspaces, with the rule id that must exclude it.
const CREDENTIALS: &[(&str, &str)] = &[
    ("codex-auth", "home/.codex/auth.json"),
    ("claude-credentials", "home/.claude/.credentials.json"),
    ("opencode-auth", "home/.local/share/opencode/auth.json"),
    ("opencode-db", "home/.local/share/opencode/opencode.db"),
    ("opencode-db", "home/.local/share/opencode/opencode.db-wal"),
    ("opencode-db", "home/.local/share/opencode/opencode.db-shm"),
    (
        "opencode-db",
        "home/.local/share/opencode/opencode.db-journal",
    ),
    ("git-credentials", ".git-credentials"),
    ("git-credentials", "home/.config/git/credentials"),
    ("netrc", ".netrc"),
    ("netrc", "home/_netrc"),
    ("ssh-private-key", "home/.ssh/id_rsa"),
    ("ssh-private-key", "home/.ssh/id_ed25519"),
    ("ssh-private-key", "deploy/id_ecdsa"),
    ("aws-credentials", "home/.aws/credentials"),
    ("aws-credentials", "home/.aws/sso/cache/token.json"),
    ("docker-config", "home/.docker/config.json"),
    (
        "gcloud-credentials",
        "home/.config/gcloud/application_default_credentials.json",
    ),
    ("gcloud-credentials", "home/.config/gcloud/credentials.db"),
    ("azure-credentials", "home/.azure/msal_token_cache.json"),
    ("kube-config", "home/.kube/config"),
    ("gh-hosts", "home/.config/gh/hosts.yml"),
    ("package-registry-tokens", ".npmrc"),
    ("package-registry-tokens", "home/.pypirc"),
    ("package-registry-tokens", "home/.cargo/credentials.toml"),
    (
        "gnupg-private-keys",
        "home/.gnupg/private-keys-v1.d/ABCD.key",
    ),
];

fn member_paths(report: &Value) -> Vec<String> {
    report["members"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["path"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn every_credential_rule_excludes_its_files_from_a_real_pack() {
    let t = tmp();
    let ws = t.path().join("ws");
    write(&ws.join("src/app.py"), "print('hi')\n");
    write(
        &ws.join("home/.ssh/id_ed25519.pub"),
        "ssh-ed25519 AAAA public\n",
    );
    for (_, p) in CREDENTIALS {
        write(&ws.join(p), "SECRET-VALUE-never-packed\n");
    }
    let packet = t.path().join("p.tar");
    let report = pack(&ws, &packet, &[]);
    let bytes = fs::read(&packet).unwrap();
    assert!(
        !bytes.windows(12).any(|w| w == b"SECRET-VALUE"),
        "no secret bytes in the packet"
    );
    let listed = member_paths(&ok(&["inspect", s(&packet)]));
    for (rule, p) in CREDENTIALS {
        let member = format!("workspace/{p}");
        assert!(!listed.contains(&member), "{member} must not be packed");
        let skipped = report["skipped"].as_array().unwrap();
        let hit = skipped
            .iter()
            .find(|x| x["path"] == member.as_str())
            .unwrap_or_else(|| panic!("{member} reported"));
        assert_eq!(hit["rule"], *rule, "{member}");
    }
    assert!(
        listed.contains(&"workspace/home/.ssh/id_ed25519.pub".to_owned()),
        "public keys are not credentials"
    );
    // The manifest records each rule that applied, with counts, not contents.
    let inspect = ok(&["inspect", s(&packet)]);
    let exclusions = inspect["exclusions"].as_array().unwrap();
    let mut rules: Vec<&str> = CREDENTIALS.iter().map(|(r, _)| *r).collect();
    rules.dedup();
    for rule in rules {
        let expected = CREDENTIALS.iter().filter(|(r, _)| *r == rule).count() as u64;
        let matched: u64 = exclusions
            .iter()
            .filter(|e| e["rule"] == rule)
            .map(|e| e["matched"].as_u64().unwrap())
            .sum();
        assert_eq!(matched, expected, "rule {rule}");
        assert!(exclusions
            .iter()
            .any(|e| e["rule"] == rule && e["why"].as_str().is_some()));
    }
}

#[test]
fn user_patterns_exclude_but_never_re_include_credentials() {
    let t = tmp();
    let ws = t.path().join("ws");
    write(&ws.join("keep.txt"), "k\n");
    write(&ws.join("build.log"), "log\n");
    write(&ws.join("target/debug/app"), "bin\n");
    write(&ws.join(".netrc"), "machine x password y\n");
    let packet = t.path().join("p.tar");
    let r = pack(
        &ws,
        &packet,
        &[
            "--exclude",
            "*.log",
            "--exclude",
            "target",
            "--exclude",
            "!.netrc",
            "--exclude",
            "!**/.netrc",
        ],
    );
    let listed = member_paths(&ok(&["inspect", s(&packet)]));
    assert_eq!(listed, ["workspace", "workspace/keep.txt"]);
    let ex = r["exclusions"].as_array().unwrap();
    let has = |rule: &str, pattern: &str| {
        ex.iter()
            .any(|e| e["rule"] == rule && e["pattern"] == pattern && e["matched"] == 1)
    };
    assert!(has("user", "*.log"), "{ex:?}");
    assert!(has("user", "target"), "{ex:?}");
    assert!(has("netrc", "**/.netrc"), "{ex:?}");
}

#[test]
fn special_files_are_skipped_with_a_reason() {
    let t = tmp();
    let ws = t.path().join("ws");
    write(&ws.join("a.txt"), "a\n");
    let fifo = ws.join("pipe");
    let status = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(status.success());
    let _listener = UnixListener::bind(ws.join("agent.sock")).unwrap();
    let packet = t.path().join("p.tar");
    let r = pack(&ws, &packet, &[]);
    let skipped = r["skipped"].as_array().unwrap();
    let reason = |p: &str| {
        skipped
            .iter()
            .find(|x| x["path"] == p)
            .map(|x| (x["rule"].clone(), x["reason"].as_str().unwrap().to_owned()))
    };
    let (rule, why) = reason("workspace/pipe").unwrap();
    assert_eq!(rule, "special-file");
    assert!(why.starts_with("fifo"), "{why}");
    let (_, why) = reason("workspace/agent.sock").unwrap();
    assert!(why.starts_with("socket"), "{why}");
    assert_eq!(
        member_paths(&ok(&["inspect", s(&packet)])),
        ["workspace", "workspace/a.txt"]
    );
}

#[test]
fn a_linked_worktree_git_file_is_refused_clearly() {
    let t = tmp();
    let ws = t.path().join("ws");
    write(&ws.join("src/a.rs"), "x\n");
    write(
        &ws.join(".git"),
        "gitdir: /home/me/project/.git/worktrees/ws\n",
    );
    let j = fails(
        &["pack", s(&ws), "-o", s(&t.path().join("p.tar"))],
        5,
        "git_dir_outside_workspace",
    );
    assert!(j["message"]
        .as_str()
        .unwrap()
        .contains("/home/me/project/.git/worktrees/ws"));
    assert!(j["advice"].as_str().unwrap().contains("--exclude .git"));
    // Leaving it out is the documented way through.
    pack(&ws, &t.path().join("p.tar"), &["--exclude", ".git"]);
}

#[test]
fn escaping_symlinks_are_refused_or_skipped_on_request() {
    let t = tmp();
    let ws = t.path().join("ws");
    write(&ws.join("sub/a.txt"), "a\n");
    symlink("../../outside", ws.join("sub/escape")).unwrap();
    symlink("a.txt", ws.join("sub/inside")).unwrap();
    let out = t.path().join("p.tar");
    let j = fails(&["pack", s(&ws), "-o", s(&out)], 5, "symlink_escapes");
    assert_eq!(j["path"], "workspace/sub/escape");
    assert!(j["advice"]
        .as_str()
        .unwrap()
        .contains("--skip-escaping-symlinks"));
    assert!(!out.exists());
    let r = pack(&ws, &out, &["--skip-escaping-symlinks"]);
    assert_eq!(r["skipped"][0]["path"], "workspace/sub/escape");
    assert_eq!(r["skipped"][0]["rule"], "escaping-symlink");
    let listed = member_paths(&ok(&["inspect", s(&out)]));
    assert!(listed.contains(&"workspace/sub/inside".to_owned()));
    assert!(!listed.contains(&"workspace/sub/escape".to_owned()));
}

#[test]
fn names_the_core_refuses_fail_the_pack_naming_the_path() {
    use std::os::unix::ffi::OsStrExt;
    let t = tmp();
    let ws = t.path().join("ws");
    write(&ws.join("ok.txt"), "x");
    let bad = ws.join(std::ffi::OsStr::from_bytes(b"bad-\xff.txt"));
    fs::write(&bad, "x").unwrap();
    let j = fails(
        &["pack", s(&ws), "-o", s(&t.path().join("p.tar"))],
        5,
        "path_not_utf8",
    );
    assert!(j["path"].as_str().unwrap().starts_with("workspace/bad-"));
    fs::remove_file(&bad).unwrap();
    write(&ws.join("README"), "1");
    write(&ws.join("readme"), "2");
    let j = fails(
        &["pack", s(&ws), "-o", s(&t.path().join("p.tar"))],
        5,
        "path_collision",
    );
    assert!(j["message"].as_str().unwrap().contains("README"));
    // The rules are checked while the files are read: nothing is left
    // behind, neither the packet nor its temporary file.
    let left: Vec<_> = fs::read_dir(t.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(left, ["ws"]);
}

#[test]
fn opencode_travels_only_through_its_export() {
    // Its database (which holds credentials) is never read: the session
    // comes from `opencode export`, so without the program nothing is packed.
    let t = tmp();
    let ws = t.path().join("ws");
    write(&ws.join("a"), "x");
    let packet = t.path().join("p.tar");
    let j = fails(
        &[
            "pack",
            s(&ws),
            "-o",
            s(&packet),
            "--harness",
            "opencode",
            "--session",
            "ses_dceb97773ffeEbFZpPTlgwYItc",
            "--opencode-bin",
            s(&t.path().join("absent/opencode")),
        ],
        5,
        "opencode_unavailable",
    );
    assert!(j["advice"].as_str().unwrap().contains("--opencode-bin"));
    fails(
        &["pack", s(&ws), "-o", s(&packet), "--harness", "opencode"],
        2,
        "usage",
    );
    assert!(!packet.exists());
}
