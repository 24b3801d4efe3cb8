//! Claude Code fixtures: the project folder a transcript lives in, written
//! out independently of the CLI's code, transcripts, and the flags that
//! carry them.

use std::path::{Path, PathBuf};

use super::{s, write};

/// A Claude Code session id.
pub const CLAUDE_SESSION: &str = "5f1c7a0e-2b6d-4c3e-9a8f-0123456789ab";

/// `--harness claude --session CLAUDE_SESSION --claude-config-dir CONFIG`.
pub fn claude_flags(config: &Path) -> [&str; 6] {
    [
        "--harness",
        "claude",
        "--session",
        CLAUDE_SESSION,
        "--claude-config-dir",
        s(config),
    ]
}

/// A short path's project folder name: `-` for every character that is
/// not an ASCII letter or digit.
pub fn encoded(path: &Path) -> String {
    path.to_str()
        .unwrap()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect()
}

/// Claude Code's project folder name: `-` for every UTF-16 unit that is
/// not an ASCII letter or digit; past 200 characters, a cut and the
/// base-36 |Java hashCode|.
pub fn claude_folder(path: &Path) -> String {
    let units: Vec<u16> = path.to_str().unwrap().encode_utf16().collect();
    let plain: String = units
        .iter()
        .map(|&u| {
            if u < 128 && (u as u8 as char).is_ascii_alphanumeric() {
                u as u8 as char
            } else {
                '-'
            }
        })
        .collect();
    if plain.len() <= 200 {
        return plain;
    }
    let mut h: i32 = 0;
    for &u in &units {
        h = h.wrapping_mul(31).wrapping_add(u as i32);
    }
    let mut n = (h as i64).abs();
    let mut digits = String::new();
    loop {
        digits.insert(0, char::from_digit((n % 36) as u32, 36).unwrap());
        n /= 36;
        if n == 0 {
            break;
        }
    }
    format!("{}-{digits}", &plain[..200])
}

/// A path below `root/tag` long enough for the hashed folder name.
pub fn long_dir(root: &Path, tag: &str) -> PathBuf {
    let mut p = root.join(tag);
    for i in 0..8 {
        p = p.join(format!("a_rather_long_folder_name_{i}"));
    }
    p
}

/// The transcript of CLAUDE_SESSION in `config`'s project folder `folder`.
pub fn claude_transcript_path(config: &Path, folder: &str) -> PathBuf {
    config
        .join("projects")
        .join(folder)
        .join(format!("{CLAUDE_SESSION}.jsonl"))
}

/// Writes a one-line transcript of CLAUDE_SESSION into `config`'s project
/// folder `folder`; returns its text.
pub fn claude_transcript(config: &Path, folder: &str) -> String {
    let transcript = format!(
        "{}\n",
        format_args!(
            r#"{{"type":"assistant","sessionId":"{CLAUDE_SESSION}","message":{{"model":"claude-sonnet-4-5","role":"assistant","content":[]}},"uuid":"a1"}}"#
        )
    );
    write(&claude_transcript_path(config, folder), &transcript);
    transcript
}
