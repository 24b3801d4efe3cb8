//! Codex fixtures: a home with a realistic rollout, its compressed form,
//! and the flags that carry it.

use std::fs;
use std::path::{Path, PathBuf};

use super::{s, write};

/// A lowercase UUIDv7-shaped thread id.
pub const THREAD: &str = "0199a213-81c0-7800-8aa1-bbab2a035a53";

/// Builds a Codex home with a realistic rollout for `thread` (and an
/// `auth.json` and state database that must never be packed); returns the
/// rollout's path.
pub fn codex_home(home: &Path, thread: &str, cwd: &Path, model: &str) -> PathBuf {
    write(
        &home.join("auth.json"),
        r#"{"OPENAI_API_KEY":"sk-never-packed"}"#,
    );
    write(&home.join("state_5.sqlite"), "SQLite format 3\0");
    write(
        &home.join("config.toml"),
        "model = \"gpt-test\"\nmodel_provider = \"mock\"\n",
    );
    let name = format!("rollout-2026-11-30T01-02-03-{thread}.jsonl");
    let rollout = home.join("sessions/2026/11/30").join(name);
    let lines = [
        format!(
            r#"{{"timestamp":"2026-11-30T01:02:03.456Z","type":"session_meta","payload":{{"id":"{thread}","session_id":"{thread}","timestamp":"2026-11-30T01:02:03.400Z","cwd":"{}","originator":"codex_exec","cli_version":"0.171.0","instructions":null,"model_provider":"mock"}}}}"#,
            cwd.display()
        ),
        r#"{"timestamp":"2026-11-30T01:02:03.500Z","type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"hello"}]}}"#.to_owned(),
        format!(
            r#"{{"timestamp":"2026-11-30T01:02:03.510Z","type":"turn_context","payload":{{"cwd":"{}","approval_policy":"never","sandbox_policy":{{"type":"read-only"}},"model":"{model}","summary":"auto"}}}}"#,
            cwd.display()
        ),
        r#"{"timestamp":"2026-11-30T01:02:04.000Z","type":"event_msg","payload":{"type":"agent_message","message":"hi"}}"#.to_owned(),
    ];
    write(&rollout, lines.join("\n") + "\n");
    rollout
}

/// Writes `path` compressed as Codex does, beside it as `<path>.zst`;
/// returns the compressed file's path.
pub fn compress(path: &Path) -> PathBuf {
    let plain = fs::read(path).unwrap();
    let z =
        ruzstd::encoding::compress_to_vec(&plain[..], ruzstd::encoding::CompressionLevel::Fastest);
    let zst = PathBuf::from(format!("{}.zst", path.display()));
    fs::write(&zst, z).unwrap();
    zst
}

/// `--harness codex --thread THREAD --codex-home HOME`.
pub fn codex_flags(home: &Path) -> [&str; 6] {
    [
        "--harness",
        "codex",
        "--thread",
        THREAD,
        "--codex-home",
        s(home),
    ]
}
