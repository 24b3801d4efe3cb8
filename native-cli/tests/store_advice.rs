//! A store's refusals reach the user as advice in the CLI's terms: the
//! flag to pass, the scope to ask for, the name to check; never an HTTP
//! status, header or route (docs/cli.md, "Store refusals").

mod common;
mod store;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::path::Path;

use common::*;
use serde_json::Value;

fn no_http(e: &Value) {
    for key in ["message", "advice"] {
        let text = e[key].as_str().unwrap();
        for word in ["HTTP", "/v1", "If-Match", "header", "above", "openapi"] {
            assert!(!text.contains(word), "{key} has {word:?}: {text}");
        }
    }
}

fn packet(dir: &Path, name: &str, text: &str) -> String {
    let ws = dir.join(format!("ws-{name}"));
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::write(ws.join("a.txt"), text).unwrap();
    let p = dir.join(format!("{name}.tar"));
    ok(&["pack", s(&ws), "-o", s(&p), "-q"]);
    s(&p).to_owned()
}

fn with_store(dir: &Path, url: &str, args: &[&str]) -> Run {
    let mut cmd = pillbox();
    cmd.env("XDG_STATE_HOME", dir.join("state"))
        .env("XDG_CACHE_HOME", dir.join("cache"))
        .env("PILLBOX_REMOTE", url)
        .env_remove("PILLBOX_TOKEN")
        .arg("checkpoint")
        .args(args)
        .arg("-q");
    run(&mut cmd)
}

#[test]
fn a_ref_conflict_says_which_expect_ref_to_pass() {
    let store = store::Store::start();
    let t = tmp();
    let a = packet(t.path(), "a", "one");
    let b = packet(t.path(), "b", "two");
    let r = with_store(
        t.path(),
        &store.url,
        &["push", &a, "--ref", "sessions/x/latest"],
    );
    assert_eq!(r.code, 0);
    let held = r.json()["digest"].as_str().unwrap().to_owned();
    let stale = format!("sha256:{}", "0".repeat(64));
    let r = with_store(
        t.path(),
        &store.url,
        &[
            "push",
            &b,
            "--ref",
            "sessions/x/latest",
            "--expect-ref",
            &stale,
        ],
    );
    assert_eq!(r.code, 5);
    let e = r.json();
    assert_eq!(e["code"], "ref_conflict");
    assert!(e["message"].as_str().unwrap().contains(&held), "{e}");
    assert!(
        e["advice"]
            .as_str()
            .unwrap()
            .contains(&format!("--expect-ref {held}")),
        "{e}"
    );
    no_http(&e);
}

#[test]
fn an_unknown_digest_or_ref_is_named_with_what_to_check() {
    let store = store::Store::start();
    let t = tmp();
    let unknown = format!("sha256:{}", "ab".repeat(32));
    let r = with_store(t.path(), &store.url, &["pull", &unknown, "-o", "x.tar"]);
    assert_eq!(r.code, 5, "{}", String::from_utf8_lossy(&r.stdout));
    let e = r.json();
    assert_eq!(e["code"], "not_found");
    assert_eq!(e["message"], format!("the store holds no packet {unknown}"));
    no_http(&e);
    let r = with_store(
        t.path(),
        &store.url,
        &["pull", "sessions/typo/latest", "-o", "x.tar"],
    );
    let e = r.json();
    assert_eq!(e["code"], "not_found");
    assert_eq!(e["message"], "the store has no ref sessions/typo/latest");
    assert!(
        e["advice"]
            .as_str()
            .unwrap()
            .contains("`pillbox checkpoint refs sessions/typo/`"),
        "{e}"
    );
    no_http(&e);
}

/// A store that answers `GET /v1` with its settings, holds no packet, and
/// refuses every other request with one code.
fn refusing(status: u16, code: &str) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let body = serde_json::json!({"error": {"code": code, "path": null, "offset": null,
        "message": "the token \"ci\" may not upload or push",
        "advice": "use a token whose scopes include push; GET /v1/packets lists what is stored"}})
    .to_string();
    std::thread::spawn(move || {
        for stream in listener.incoming().take(64) {
            let Ok(mut stream) = stream else { continue };
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut length = 0usize;
            let mut request = String::new();
            let _ = reader.read_line(&mut request);
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                    break;
                }
                if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                    length = v.trim().parse().unwrap_or(0);
                }
            }
            let mut sink = vec![0; length];
            let _ = reader.read_exact(&mut sink);
            let (status, body) = if request.starts_with("GET /v1 ") {
                (200, INFO.to_owned())
            } else if request.starts_with("HEAD ") {
                // Not stored; a HEAD answer has no body.
                (404, String::new())
            } else {
                (status, body.clone())
            };
            let _ = write!(
                stream,
                "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    url
}

const INFO: &str = r#"{"service":"pillbox","api":1,"format":"pillbox.session-packet/2","max_packet_bytes":1073741824,"max_members":100000,"max_single_upload_bytes":8388608,"part_size":{"default":5242880,"min":5242880,"max":8388608},"read_access":"token","transfer":["whole","delta"]}"#;

#[test]
fn token_refusals_name_the_scope_and_how_to_pass_a_token() {
    let t = tmp();
    let a = packet(t.path(), "a", "one");
    for (status, code, want) in [
        (403, "scope_missing", "scopes include push"),
        (401, "unauthorized", "--token-file"),
        (403, "forbidden", "--token-file"),
    ] {
        let url = refusing(status, code);
        let r = with_store(t.path(), &url, &["push", &a]);
        assert_eq!(r.code, 5, "{code}: {}", String::from_utf8_lossy(&r.stdout));
        let e = r.json();
        assert_eq!(e["code"], code);
        assert!(e["advice"].as_str().unwrap().contains(want), "{code}: {e}");
        no_http(&e);
    }
    let url = refusing(403, "scope_missing");
    let r = with_store(
        t.path(),
        &url,
        &["pull", "sessions/a/latest", "-o", "x.tar"],
    );
    let e = r.json();
    assert!(
        e["advice"]
            .as_str()
            .unwrap()
            .contains("scopes include read"),
        "{e}"
    );
}

#[test]
fn a_missing_ref_is_named_whatever_the_store_says() {
    let t = tmp();
    let url = refusing(404, "not_found");
    let r = with_store(
        t.path(),
        &url,
        &["pull", "sessions/a/latest", "-o", "x.tar"],
    );
    let e = r.json();
    assert_eq!(e["message"], "the store has no ref sessions/a/latest");
    no_http(&e);
}
