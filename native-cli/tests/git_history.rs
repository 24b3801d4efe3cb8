//! Secrets in git history, through the binary and with real `git`: a key
//! committed and then deleted is refused by commit and path (never by
//! value), wherever git keeps it (a loose object, a pack after `git gc`,
//! the stash, the index, a tag); history a remote already has is reported
//! and packed; `--secrets exclude` leaves a repository that git still
//! works in after unpack.

mod common;

use std::path::Path;
use std::process::Command;

use common::*;
use serde_json::Value;

/// An OpenAI key in its current format, different for each `seed`.
fn key(seed: u64) -> String {
    format!(
        "sk-proj-{}T3BlbkFJ{}",
        chars(2 * seed, 74, ALNUM),
        chars(2 * seed + 1, 74, ALNUM)
    )
}

thread_local! {
    /// The git commands this test has run, from 2: with this start, the
    /// stamps below have a pushed commit slip past a walk of local history
    /// that trusts commit times (16 of 31 starts do).
    static GIT_RUNS: std::cell::Cell<i64> = const { std::cell::Cell::new(2) };
}

/// Runs git in `dir` with no user or system configuration; returns stdout.
///
/// Each command's clock is skewed, the same way in every run of a test:
/// some commits share a second, some are stamped earlier than their
/// parents (machines' clocks disagree). What history a remote has must not
/// depend on commit times.
fn git(dir: &Path, args: &[&str]) -> String {
    let n = GIT_RUNS.with(|c| c.replace(c.get() + 1));
    let stamp = format!("@{} +0000", 1_700_000_000 + (n % 3) * 7 - n / 5);
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_AUTHOR_DATE", &stamp)
        .env("GIT_COMMITTER_DATE", &stamp)
        .env("HOME", dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_AUTHOR_NAME", "A")
        .env("GIT_AUTHOR_EMAIL", "a@example.com")
        .env("GIT_COMMITTER_NAME", "A")
        .env("GIT_COMMITTER_EMAIL", "a@example.com")
        .output()
        .expect("run git");
    assert!(
        out.status.success(),
        "git {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// The short id (12 hex digits) of the commit `HEAD` names.
fn head(ws: &Path) -> String {
    git(ws, &["rev-parse", "--short=12", "HEAD"])
        .trim()
        .to_owned()
}

/// A repository in `ws` with one commit of a README.
fn repo(ws: &Path) {
    std::fs::create_dir_all(ws).unwrap();
    git(ws, &["init", "-q", "-b", "main"]);
    write(&ws.join("README.md"), "# project\n");
    git(ws, &["add", "README.md"]);
    git(ws, &["commit", "-q", "-m", "start"]);
}

/// Commits a `.env` holding a key, then its removal; returns the short id
/// of the commit that brought the key.
fn commit_then_delete_env(ws: &Path, secret: &str) -> String {
    write(
        &ws.join(".env"),
        format!("DEBUG=1\nOPENAI_API_KEY={secret}\n"),
    );
    git(ws, &["add", ".env"]);
    git(ws, &["commit", "-q", "-m", "settings"]);
    let id = git(ws, &["rev-parse", "--short=12", "HEAD"])
        .trim()
        .to_owned();
    git(ws, &["rm", "-q", ".env"]);
    git(ws, &["commit", "-q", "-m", "no settings"]);
    id
}

/// Packs `ws`; returns the exit code and stdout parsed.
fn try_pack(ws: &Path, out: &Path, extra: &[&str]) -> (i32, Value, String) {
    let mut args = vec!["pack", s(ws), "-o", s(out), "--quiet"];
    args.extend_from_slice(extra);
    let r = checkpoint(&args);
    let text = String::from_utf8_lossy(&r.stdout).into_owned();
    (r.code, r.json(), text)
}

/// Asserts a refusal naming `want` (each as `commit:path:line rule`).
fn assert_refused(ws: &Path, secret: &str, want: &[&str]) -> Value {
    let t = tmp();
    let out = t.path().join("p.tar");
    let (code, j, text) = try_pack(ws, &out, &[]);
    assert_eq!(code, 5, "{j}");
    assert_eq!(j["code"], "secret_in_git_history", "{j}");
    let message = j["message"].as_str().unwrap();
    for w in want {
        assert!(message.contains(w), "{message:?} does not name {w:?}");
    }
    assert!(!text.contains(secret), "the refusal printed the key");
    assert!(!out.exists(), "a refused pack leaves no packet");
    j
}

#[test]
fn a_key_committed_then_deleted_is_refused_by_commit_and_path() {
    let t = tmp();
    let ws = t.path().join("ws");
    repo(&ws);
    let secret = key(1);
    let commit = commit_then_delete_env(&ws, &secret);
    let j = assert_refused(
        &ws,
        &secret,
        &[&format!("workspace/.git {commit}:.env:2 openai-api-key")],
    );
    assert_eq!(j["path"], "workspace/.git");
    assert!(j["advice"].as_str().unwrap().contains("git filter-repo"));
    // To standard output, and through save's path, the same refusal.
    let r = checkpoint(&["pack", s(&ws), "-o", "-", "--quiet"]);
    assert_eq!(r.code, 5);
    assert!(r.stdout.is_empty(), "nothing reaches stdout");
    assert_eq!(r.stderr_json()["code"], "secret_in_git_history");
    // The workspace's files alone (the repository left out by the user)
    // pack.
    let out = t.path().join("files.tar");
    pack(&ws, &out, &["--exclude", ".git"]);
}

#[test]
fn history_a_remote_has_is_reported_not_refused() {
    let t = tmp();
    let first = t.path().join("first");
    let origin = t.path().join("origin.git");
    let ws = t.path().join("ws");
    repo(&first);
    let secret = key(2);
    let env = format!("DEBUG=1\nOPENAI_API_KEY={secret}\n");
    let commit = commit_then_delete_env(&first, &secret);
    git(
        t.path(),
        &["init", "-q", "--bare", "-b", "main", s(&origin)],
    );
    git(&first, &["push", "-q", s(&origin), "main"]);
    // A clone of that history packs, and what the remote has is not read:
    // fetched as a pack, or cloned from a local path (which copies the
    // origin's loose objects as they are).
    let packed = t.path().join("packed");
    git(
        t.path(),
        &["clone", "-q", "--no-local", s(&origin), s(&packed)],
    );
    let (code, j, _) = try_pack(&packed, &t.path().join("packed.tar"), &[]);
    assert_eq!(code, 0, "{j}");
    assert_eq!(j["secrets"], serde_json::json!([]));
    git(t.path(), &["clone", "-q", s(&origin), s(&ws)]);
    let (code, j, _) = try_pack(&ws, &t.path().join("clone.tar"), &[]);
    assert_eq!(code, 0, "{j}");
    assert_eq!(j["secrets"], serde_json::json!([]));
    // The same file committed again: a commit no remote has reaches the
    // key's blob, which the remote has. No new exposure: reported, packed.
    write(&ws.join(".env"), &env);
    git(&ws, &["add", "-f", ".env"]);
    git(&ws, &["commit", "-q", "-m", "settings again"]);
    let again_id = head(&ws);
    git(&ws, &["rm", "-q", ".env"]);
    git(&ws, &["commit", "-q", "-m", "no settings again"]);
    let out = t.path().join("p.tar");
    let (code, j, text) = try_pack(&ws, &out, &[]);
    assert_eq!(code, 0, "{j}");
    assert!(!text.contains(&secret));
    let secrets = j["secrets"].as_array().unwrap();
    assert_eq!(secrets.len(), 1, "{j}");
    let s0 = &secrets[0];
    assert_eq!(s0["action"], "on-remote");
    assert_eq!(s0["path"], "workspace/.git");
    assert_eq!(s0["rule"], "openai-api-key");
    assert_eq!(s0["line"], 2);
    assert_eq!(s0["git"]["path"], ".env");
    assert_eq!(s0["git"]["commit"], again_id.as_str());
    assert_ne!(s0["git"]["commit"], commit.as_str());
    assert_schema("pack-1.schema.json", &j);
    // A key no remote has, committed on top, is refused.
    let other = key(3);
    write(
        &ws.join("deploy.sh"),
        format!("export OPENAI_API_KEY={other}\n"),
    );
    git(&ws, &["add", "deploy.sh"]);
    git(&ws, &["commit", "-q", "-m", "deploy"]);
    let id = head(&ws);
    git(&ws, &["rm", "-q", "deploy.sh"]);
    git(&ws, &["commit", "-q", "-m", "no deploy"]);
    assert_refused(&ws, &other, &[&format!("{id}:deploy.sh:1 openai-api-key")]);
    // Pushed, it is the remote's: packed, nothing read.
    git(&ws, &["push", "-q", "origin", "main"]);
    let (code, j, _) = try_pack(&ws, &t.path().join("q.tar"), &[]);
    assert_eq!(code, 0, "{j}");
    assert_eq!(j["secrets"], serde_json::json!([]));
}

#[test]
fn a_key_in_a_pack_after_gc_is_refused() {
    let t = tmp();
    let ws = t.path().join("ws");
    repo(&ws);
    let secret = key(4);
    let commit = commit_then_delete_env(&ws, &secret);
    git(&ws, &["gc", "-q", "--prune=now"]);
    let loose = walk_files(&ws.join(".git/objects"))
        .into_iter()
        .filter(|p| !p.contains("/pack/") && !p.contains("/info/"))
        .count();
    assert_eq!(loose, 0, "gc packed every object");
    assert_refused(&ws, &secret, &[&format!("{commit}:.env:2 openai-api-key")]);
    // --secrets exclude cannot take one object out of a pack: the
    // repository is left out, and says so.
    let out = t.path().join("p.tar");
    let (code, j, _) = try_pack(&ws, &out, &["--secrets", "exclude"]);
    assert_eq!(code, 0, "{j}");
    assert_eq!(j["skipped"][0]["path"], "workspace/.git", "{j}");
    assert!(j["skipped"][0]["reason"]
        .as_str()
        .unwrap()
        .contains("without this repository"));
    assert!(j["exclusions"]
        .as_array()
        .unwrap()
        .iter()
        .any(|e| e["pattern"] == ".git" && e["rule"] == "openai-api-key"));
    let restored = t.path().join("restored");
    ok(&[
        "unpack",
        s(&out),
        "--into",
        s(&restored),
        "--trust-unverified",
        "--quiet",
    ]);
    assert!(!restored.join(".git").exists());
    assert!(restored.join("README.md").exists());
}

#[test]
fn a_key_in_the_stash_is_refused() {
    let t = tmp();
    let ws = t.path().join("ws");
    repo(&ws);
    let secret = key(5);
    write(&ws.join("README.md"), format!("# project\nkey: {secret}\n"));
    git(&ws, &["stash", "-q"]);
    assert_eq!(
        std::fs::read_to_string(ws.join("README.md")).unwrap(),
        "# project\n"
    );
    assert_refused(&ws, &secret, &[":README.md:2 openai-api-key"]);
}

#[test]
fn a_key_only_in_the_index_is_refused() {
    let t = tmp();
    let ws = t.path().join("ws");
    repo(&ws);
    let secret = key(6);
    write(&ws.join("config.py"), format!("KEY = '{secret}'\n"));
    git(&ws, &["add", "config.py"]);
    // The file itself is changed afterwards: only the index has the key.
    write(&ws.join("config.py"), "KEY = None\n");
    assert_refused(&ws, &secret, &["index:config.py:1 openai-api-key"]);
}

#[test]
fn a_key_in_a_tagged_commit_is_refused() {
    let t = tmp();
    let ws = t.path().join("ws");
    repo(&ws);
    let secret = key(7);
    git(&ws, &["checkout", "-q", "-b", "release"]);
    write(&ws.join("notes.txt"), format!("{secret}\n"));
    git(&ws, &["add", "notes.txt"]);
    git(&ws, &["commit", "-q", "-m", "release notes"]);
    let id = head(&ws);
    git(&ws, &["tag", "-a", "v1", "-m", "v1"]);
    git(&ws, &["checkout", "-q", "main"]);
    git(&ws, &["branch", "-q", "-D", "release"]);
    git(&ws, &["reflog", "expire", "--expire=now", "--all"]);
    assert_refused(&ws, &secret, &[&format!("{id}:notes.txt:1 openai-api-key")]);
}

#[test]
fn a_key_in_an_amended_commit_is_found_through_the_reflog() {
    let t = tmp();
    let ws = t.path().join("ws");
    repo(&ws);
    let secret = key(8);
    write(&ws.join("app.js"), format!("const key = '{secret}';\n"));
    git(&ws, &["add", "app.js"]);
    git(&ws, &["commit", "-q", "-m", "app"]);
    let id = head(&ws);
    write(&ws.join("app.js"), "const key = process.env.KEY;\n");
    git(&ws, &["commit", "-q", "-a", "--amend", "-m", "app"]);
    assert_refused(&ws, &secret, &[&format!("{id}:app.js:1 openai-api-key")]);
    // Once the reflog forgets it and gc prunes it, nothing holds it.
    git(&ws, &["reflog", "expire", "--expire=now", "--all"]);
    git(&ws, &["gc", "-q", "--prune=now"]);
    let (code, j, _) = try_pack(&ws, &t.path().join("p.tar"), &[]);
    assert_eq!(code, 0, "{j}");
}

#[test]
fn a_key_on_a_deleted_branch_is_found_in_its_loose_objects() {
    let t = tmp();
    let ws = t.path().join("ws");
    repo(&ws);
    let secret = key(15);
    git(&ws, &["checkout", "-q", "-b", "spike"]);
    let commit = commit_then_delete_env(&ws, &secret);
    git(&ws, &["checkout", "-q", "main"]);
    git(&ws, &["branch", "-q", "-D", "spike"]);
    git(&ws, &["reflog", "expire", "--expire=now", "--all"]);
    // No ref or reflog reaches it; its objects are still there, loose.
    assert_refused(&ws, &secret, &[&format!("{commit}:.env:2 openai-api-key")]);
}

#[test]
fn a_key_git_add_left_behind_is_found_in_a_cruft_pack() {
    let t = tmp();
    let ws = t.path().join("ws");
    repo(&ws);
    let secret = key(16);
    write(&ws.join("creds.txt"), format!("{secret}\n"));
    git(&ws, &["add", "creds.txt"]);
    git(&ws, &["reset", "-q", "creds.txt"]);
    std::fs::remove_file(ws.join("creds.txt")).unwrap();
    // Unreachable and recent: gc keeps it, in a cruft pack.
    git(&ws, &["gc", "-q", "--cruft"]);
    let packs = walk_files(&ws.join(".git/objects/pack"));
    assert!(packs.iter().any(|p| p.ends_with(".mtimes")), "{packs:?}");
    assert_refused(
        &ws,
        &secret,
        &["workspace/.git unreachable blob ", ":1 openai-api-key"],
    );
}

#[test]
fn allow_secret_matches_the_path_in_the_commit() {
    let t = tmp();
    let ws = t.path().join("ws");
    repo(&ws);
    let secret = key(9);
    write(&ws.join("tests/fixtures/key.txt"), format!("{secret}\n"));
    git(&ws, &["add", "tests"]);
    git(&ws, &["commit", "-q", "-m", "fixture"]);
    git(&ws, &["rm", "-q", "-r", "tests"]);
    git(&ws, &["commit", "-q", "-m", "no fixture"]);
    let out = t.path().join("p.tar");
    let (code, j, _) = try_pack(&ws, &out, &["--allow-secret", "tests/fixtures/**"]);
    assert_eq!(code, 0, "{j}");
    assert_eq!(j["secrets"][0]["action"], "allowed", "{j}");
    assert_eq!(j["secrets"][0]["git"]["path"], "tests/fixtures/key.txt");
}

#[test]
fn secrets_exclude_leaves_a_repository_git_works_in() {
    let t = tmp();
    let ws = t.path().join("ws");
    repo(&ws);
    let secret = key(10);
    commit_then_delete_env(&ws, &secret);
    write(&ws.join("src/main.rs"), "fn main() {}\n");
    git(&ws, &["add", "src"]);
    git(&ws, &["commit", "-q", "-m", "code"]);
    let out = t.path().join("p.tar");
    let (code, j, text) = try_pack(&ws, &out, &["--secrets", "exclude"]);
    assert_eq!(code, 0, "{j}");
    assert!(!text.contains(&secret));
    let secrets = j["secrets"].as_array().unwrap();
    assert_eq!(secrets.len(), 1, "{j}");
    assert_eq!(secrets[0]["action"], "excluded");
    let skipped = j["skipped"][0]["path"].as_str().unwrap();
    assert!(skipped.starts_with("workspace/.git/objects/"), "{j}");
    assert_schema("pack-1.schema.json", &j);
    let bytes = std::fs::read(&out).unwrap();
    assert!(
        !bytes.windows(secret.len()).any(|w| w == secret.as_bytes()),
        "the packet holds the key"
    );
    let restored = t.path().join("restored");
    ok(&[
        "unpack",
        s(&out),
        "--into",
        s(&restored),
        "--trust-unverified",
        "--quiet",
    ]);
    assert_eq!(git(&restored, &["status", "--porcelain"]), "");
    let log = git(&restored, &["log", "--format=%s"]);
    assert_eq!(log, "code\nno settings\nsettings\nstart\n");
    assert_eq!(
        std::fs::read_to_string(restored.join("src/main.rs")).unwrap(),
        "fn main() {}\n"
    );
    // The key's object is what is missing, and only it.
    let fsck = Command::new("git")
        .args(["fsck", "--full"])
        .current_dir(&restored)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .output()
        .unwrap();
    let said =
        String::from_utf8_lossy(&fsck.stdout).into_owned() + &String::from_utf8_lossy(&fsck.stderr);
    let missing: Vec<&str> = said.lines().filter(|l| l.starts_with("missing")).collect();
    assert_eq!(missing.len(), 1, "{said}");
    // And packing the restored workspace again is refused no more.
    let again = t.path().join("again.tar");
    pack(&restored, &again, &[]);
}

#[test]
fn a_nested_repository_is_scanned_too() {
    let t = tmp();
    let ws = t.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    write(&ws.join("notes.md"), "notes\n");
    let inner = ws.join("vendor/lib");
    repo(&inner);
    let secret = key(11);
    let commit = commit_then_delete_env(&inner, &secret);
    assert_refused(
        &ws,
        &secret,
        &[&format!(
            "workspace/vendor/lib/.git {commit}:.env:2 openai-api-key"
        )],
    );
}

#[test]
fn a_submodule_s_own_history_is_scanned() {
    let t = tmp();
    let lib = t.path().join("lib");
    repo(&lib);
    let ws = t.path().join("ws");
    repo(&ws);
    git(
        &ws,
        &[
            "-c",
            "protocol.file.allow=always",
            "submodule",
            "add",
            "-q",
            s(&lib),
            "lib",
        ],
    );
    git(&ws, &["commit", "-q", "-m", "lib"]);
    // Packs: the submodule's history is its remote's.
    let (code, j, _) = try_pack(&ws, &t.path().join("p.tar"), &[]);
    assert_eq!(code, 0, "{j}");
    // A key committed in the submodule and never pushed.
    let secret = key(13);
    let commit = commit_then_delete_env(&ws.join("lib"), &secret);
    assert_refused(
        &ws,
        &secret,
        &[&format!(
            "workspace/.git/modules/lib {commit}:.env:2 openai-api-key"
        )],
    );
}

#[test]
fn a_linked_worktree_s_index_is_scanned() {
    let t = tmp();
    let ws = t.path().join("ws");
    repo(&ws);
    git(&ws, &["worktree", "add", "-q", "-b", "side", "side"]);
    // Relative links both ways, as `git worktree add --relative-paths`
    // writes them: the worktree lies inside the workspace.
    std::fs::write(ws.join("side/.git"), "gitdir: ../.git/worktrees/side\n").unwrap();
    std::fs::write(
        ws.join(".git/worktrees/side/gitdir"),
        "../../../side/.git\n",
    )
    .unwrap();
    let secret = key(14);
    write(&ws.join("side/token.txt"), format!("{secret}\n"));
    git(&ws.join("side"), &["add", "token.txt"]);
    std::fs::remove_file(ws.join("side/token.txt")).unwrap();
    assert_refused(
        &ws,
        &secret,
        &["workspace/.git index:token.txt:1 openai-api-key"],
    );
}

#[test]
fn a_corrupt_repository_is_refused_not_crashed_on() {
    let t = tmp();
    let ws = t.path().join("ws");
    repo(&ws);
    let secret = key(12);
    commit_then_delete_env(&ws, &secret);
    // Every loose object truncated: zlib streams cut short.
    for f in walk_files(&ws.join(".git/objects")) {
        let bytes = std::fs::read(&f).unwrap();
        std::fs::write(&f, &bytes[..bytes.len() / 2]).unwrap();
    }
    let (code, j, _) = try_pack(&ws, &t.path().join("p.tar"), &[]);
    assert_eq!(code, 5, "{j}");
    assert_eq!(j["code"], "git_history_unreadable", "{j}");
    assert_eq!(j["path"], "workspace/.git");
    // A pack whose index is garbage (its objects would travel unread), a
    // truncated pack, a packed-refs file that does not parse.
    for damage in ["pack-index", "pack", "packed-refs"] {
        let ws = t.path().join(format!("ws-{damage}"));
        repo(&ws);
        commit_then_delete_env(&ws, &key(17));
        git(&ws, &["gc", "-q", "--prune=now"]);
        let packs = walk_files(&ws.join(".git/objects/pack"));
        let file = |ext: &str| packs.iter().find(|p| p.ends_with(ext)).unwrap().clone();
        match damage {
            "pack-index" => std::fs::write(file(".idx"), [7u8; 100]).unwrap(),
            "pack" => {
                let f = file(".pack");
                let bytes = std::fs::read(&f).unwrap();
                std::fs::write(&f, &bytes[..bytes.len() / 2]).unwrap();
            }
            _ => std::fs::write(ws.join(".git/packed-refs"), "garbage\n").unwrap(),
        }
        let (code, j, _) = try_pack(&ws, &t.path().join(format!("{damage}.tar")), &[]);
        assert_eq!(code, 5, "{damage}: {j}");
        assert_eq!(j["code"], "git_history_unreadable", "{damage}: {j}");
    }
    // With --secrets exclude, the repository is left out and said to be.
    let (code, j, _) = try_pack(&ws, &t.path().join("q.tar"), &["--secrets", "exclude"]);
    assert_eq!(code, 0, "{j}");
    assert_eq!(j["skipped"][0]["rule"], "git-history-unreadable", "{j}");
}

#[test]
fn a_link_where_git_reads_is_never_followed() {
    let t = tmp();
    let ws = t.path().join("ws");
    repo(&ws);
    // A FIFO in the workspace (never packed) and links to it where git
    // reads: following them would wait for a writer forever.
    rustix::fs::mknodat(
        rustix::fs::CWD,
        ws.join("pipe"),
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o644),
        0,
    )
    .unwrap();
    std::os::unix::fs::symlink("../pipe", ws.join(".git/packed-refs")).unwrap();
    let (code, j, _) = try_pack(&ws, &t.path().join("p.tar"), &[]);
    assert_eq!(code, 5, "{j}");
    assert_eq!(j["code"], "git_history_unreadable", "{j}");
    assert!(
        j["message"].as_str().unwrap().contains("packed-refs"),
        "{j}"
    );
    std::fs::remove_file(ws.join(".git/packed-refs")).unwrap();
    std::fs::remove_file(ws.join(".git/HEAD")).unwrap();
    std::os::unix::fs::symlink("../pipe", ws.join(".git/HEAD")).unwrap();
    let (code, j, _) = try_pack(&ws, &t.path().join("q.tar"), &[]);
    assert_eq!(code, 5, "{j}");
    assert_eq!(j["code"], "git_history_unreadable", "{j}");
}

/// Every regular file below `dir`, as paths.
fn walk_files(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let e = e.unwrap();
            let p = e.path();
            if e.file_type().unwrap().is_dir() {
                stack.push(p);
            } else {
                out.push(p.to_string_lossy().into_owned());
            }
        }
    }
    out
}
