//! What the Worker says about a packet it stored that holds something a
//! person should know (packet-core's findings: secrets, git settings that
//! run programs): one log line, in JSON, naming paths, lines and rules,
//! never a value. A report, not a refusal: the packet verified.

use packet_core::{Digest, Findings};
use serde::Serialize;

#[derive(Serialize)]
struct Line<'a> {
    event: &'static str,
    digest: String,
    findings: &'a Findings,
}

/// The log line for a stored packet, or `None` when nothing was found.
pub fn log_line(digest: &Digest, findings: &Findings) -> Option<String> {
    if findings.is_empty() {
        return None;
    }
    serde_json::to_string(&Line {
        event: "packet_findings",
        digest: digest.to_string(),
        findings,
    })
    .ok()
}

/// Logs the line of a packet just stored, if it has one (wherever a
/// packet becomes stored).
#[cfg(target_arch = "wasm32")]
pub fn log(digest: &Digest, findings: &Findings) {
    if let Some(line) = log_line(digest, findings) {
        worker::console_warn!("{line}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use packet_core::in_memory::{build, Source};
    use packet_core::{reader, Limits, ReaderOptions};

    #[test]
    fn a_packet_with_findings_is_logged_by_path_line_and_rule() {
        let built = build(
            &[
                Source::Dir {
                    path: "workspace".into(),
                },
                Source::File {
                    path: "workspace/.env".into(),
                    contents: b"SECRET_VALUE=hunter2\n".to_vec(),
                    executable: false,
                },
            ],
            None,
            vec![],
            &Limits::FORMAT,
        )
        .unwrap();
        let read = reader::verify(&built.bytes, ReaderOptions::default()).unwrap();
        let line = log_line(&read.digest, &read.findings).unwrap();
        let v: serde_json::Value = serde_json::from_str(&line).unwrap();
        assert_eq!(v["event"], "packet_findings");
        assert_eq!(v["digest"], built.digest.to_string());
        assert_eq!(
            v["findings"]["secrets"],
            serde_json::json!([{"path": "workspace/.env", "line": null, "rule": "env-file"}])
        );
        assert!(!line.contains("hunter2"), "never a value");
        let plain = build(
            &[Source::Dir {
                path: "workspace".into(),
            }],
            None,
            vec![],
            &Limits::FORMAT,
        )
        .unwrap();
        let read = reader::verify(&plain.bytes, ReaderOptions::default()).unwrap();
        assert_eq!(log_line(&read.digest, &read.findings), None);
    }
}
