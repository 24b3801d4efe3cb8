//! Secrets found by content, through the binary: credentials of fifteen
//! formats planted where agent sandboxes keep them are all kept out of a
//! default pack (by name or by content), the pack names each one by path,
//! line and rule and never its value; `--secrets exclude` records them,
//! `--allow-secret` and published packages pack them; the readers report
//! what a packet written by another tool holds. Harness state (Codex
//! rollouts, compressed ones included, Claude Code transcripts and their
//! session folders, OpenCode exports) is held to the same rules.

mod common;

use std::fs;
use std::path::Path;

use common::*;
use serde_json::Value;

const URL_SAFE: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-";
const B64: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// A token in GitHub's format (also npm's): prefix, 30 characters, their
/// CRC32 in 6 base62 digits.
fn checksummed(prefix: &str, seed: u64) -> String {
    let body = chars(seed, 30, ALNUM);
    let mut crc = flate2::Crc::new();
    crc.update(body.as_bytes());
    let mut n = u64::from(crc.sum());
    let digits = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
    let mut sum = [b'0'; 6];
    for d in sum.iter_mut().rev() {
        *d = digits[(n % 62) as usize];
        n /= 62;
    }
    format!("{prefix}{body}{}", String::from_utf8(sum.to_vec()).unwrap())
}

/// A PEM block whose body starts as `kind`'s encoding does.
fn pem(kind: &str, head: &str, body_len: usize, seed: u64) -> String {
    let body = format!("{head}{}", chars(seed, body_len - head.len(), B64));
    let lines: Vec<String> = body
        .as_bytes()
        .chunks(70)
        .map(|c| String::from_utf8(c.to_vec()).unwrap())
        .collect();
    format!(
        "-----BEGIN {kind}-----\n{}\n-----END {kind}-----\n",
        lines.join("\n")
    )
}

/// One planted credential: its file, its contents, and the secrets the
/// detector names in it as (line, rule), none when the file's name keeps
/// it out.
type Planted = (&'static str, String, Vec<(u64, &'static str)>);

/// Every planted credential.
fn planted() -> Vec<Planted> {
    let openai = format!(
        "sk-proj-{}T3BlbkFJ{}",
        chars(1, 74, URL_SAFE),
        chars(2, 74, URL_SAFE)
    );
    let anthropic = format!("sk-ant-api03-{}AA", chars(3, 93, URL_SAFE));
    let stripe = format!("sk_live_{}", chars(4, 24, ALNUM));
    let gh = checksummed("ghp_", 5);
    let gh_checkout = checksummed("ghs_", 6);
    let basic = "eC1hY2Nlc3MtdG9rZW46Z2hzX2FiY2RlZmdoaWprbG1ub3BxcnN0dXZ3eHl6MDEyMzQ1";
    vec![
        // By name: .env files are excluded whatever they hold.
        (
            ".env",
            format!("OPENAI_API_KEY={openai}\nANTHROPIC_API_KEY={anthropic}\n"),
            vec![],
        ),
        (".env.local", format!("STRIPE_SECRET_KEY={stripe}\n"), vec![]),
        (
            ".git/config",
            format!(
                "[core]\n\trepositoryformatversion = 0\n[remote \"origin\"]\n\turl = https://x-access-token:{gh_checkout}@github.com/acme/app.git\n\
                 \tfetch = +refs/heads/*:refs/remotes/origin/*\n[http \"https://github.com/\"]\n\textraheader = AUTHORIZATION: basic {basic}\n"
            ),
            vec![(4, "git-url-credentials"), (4, "github-token"), (7, "git-extraheader-credentials")],
        ),
        (
            "config/settings.json",
            format!(
                "{{\n  \"github\": {{\"token\": \"{gh}\"}},\n  \"slack\": {{\"bot\": \"xoxb-2718281828-3141592653-{}\"}}\n}}\n",
                chars(7, 24, ALNUM)
            ),
            vec![(2, "github-token"), (3, "slack-token")],
        ),
        (
            "scripts/deploy.sh",
            format!(
                "#!/bin/sh\nexport AWS_ACCESS_KEY_ID=AKIA{}\nexport AWS_SECRET_ACCESS_KEY={}\naws s3 sync dist s3://acme\n",
                chars(8, 16, b"ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"),
                chars(9, 40, B64)
            ),
            vec![(2, "aws-access-key")],
        ),
        (
            ".yarnrc.yml",
            format!("nodeLinker: node-modules\nnpmAuthToken: {}\n", checksummed("npm_", 10)),
            vec![],
        ),
        (
            "deploy_key",
            pem("OPENSSH PRIVATE KEY", "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ", 400, 11),
            vec![(1, "private-key")],
        ),
        (
            "certs/server.pem",
            pem("RSA PRIVATE KEY", "MIIEpAIBAAKCAQEA", 1600, 12),
            vec![(1, "private-key")],
        ),
        (
            "gcp/service-account.json",
            format!(
                "{{\n  \"type\": \"service_account\",\n  \"project_id\": \"acme\",\n  \"private_key\": \"{}\",\n  \"client_email\": \"ci@acme.iam.gserviceaccount.com\"\n}}\n",
                pem("PRIVATE KEY", "MIIEvQIBADANBgkqhkiG9w0BAQEFAASC", 1624, 13).replace('\n', "\\n")
            ),
            vec![(4, "gcp-service-account")],
        ),
        (
            "notebooks/train.ipynb",
            format!(
                "{{\"cells\": [{{\"cell_type\": \"code\", \"source\": [\"from huggingface_hub import login\\n\", \"login(token=\\\"hf_{}\\\")\"]}}]}}\n",
                chars(14, 34, b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz")
            ),
            vec![(1, "huggingface-token")],
        ),
        (
            "src/maps.ts",
            format!(
                "import {{ Loader }} from \"@googlemaps/js-api-loader\";\n\nexport const loader = new Loader({{ apiKey: \"AIza{}\" }});\n",
                chars(15, 35, URL_SAFE)
            ),
            vec![(3, "google-api-key")],
        ),
        (
            "ci/gitlab.env.sh",
            format!("export GITLAB_TOKEN=glpat-{}\n", chars(16, 20, URL_SAFE)),
            vec![(1, "gitlab-token")],
        ),
        (
            ".config/gh/hosts.yml",
            format!("github.com:\n    oauth_token: {}\n", checksummed("gho_", 17)),
            vec![],
        ),
        (
            ".pypirc",
            format!("[pypi]\nusername = __token__\npassword = pypi-{}\n", chars(18, 80, URL_SAFE)),
            vec![],
        ),
        (
            ".npmrc",
            format!("//registry.npmjs.org/:_authToken={}\n", checksummed("npm_", 19)),
            vec![],
        ),
    ]
}

/// The values planted: none may ever appear in a packet, a report or an
/// error.
fn secret_values() -> Vec<String> {
    let mut out = Vec::new();
    for (_, contents, _) in planted() {
        for word in contents.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '-')) {
            if word.len() >= 20 {
                out.push(word.to_owned());
            }
        }
    }
    out
}

fn plant(ws: &Path) {
    write(&ws.join("README.md"), "# acme\n");
    write(&ws.join("src/main.rs"), "fn main() {}\n");
    for (path, contents, _) in planted() {
        write(&ws.join(path), contents);
    }
}

fn assert_no_value(what: &str, bytes: &[u8]) {
    for v in secret_values() {
        assert!(
            !bytes.windows(v.len()).any(|w| w == v.as_bytes()),
            "{what} holds a secret value ({}…)",
            &v[..8]
        );
    }
}

#[test]
fn a_default_pack_refuses_every_planted_secret_by_path_line_and_rule_never_by_value() {
    let t = tmp();
    let ws = t.path().join("ws");
    plant(&ws);
    let packet = t.path().join("p.tar");
    let run = checkpoint(&["pack", s(&ws), "-o", s(&packet), "--quiet"]);
    assert_eq!(run.code, 5);
    let err = run.json();
    assert_eq!(err["code"], "secret_in_workspace", "{err}");
    let message = err["message"].as_str().unwrap();
    for (path, _, found) in planted() {
        for (line, rule) in found {
            let named = format!("workspace/{path}:{line} {rule}");
            assert!(message.contains(&named), "{named} not in {message}");
        }
    }
    assert_no_value("the refusal", &run.stdout);
    assert_no_value("stderr", &run.stderr);
    assert!(!packet.exists(), "nothing is kept");
    assert_eq!(names(t.path()), ["ws"], "no temporary file is left behind");
    // To standard output too: refused before a byte is written.
    let run = checkpoint(&["pack", s(&ws), "-o", "-", "--quiet"]);
    assert_eq!(run.code, 5);
    assert_eq!(run.stderr_json()["code"], "secret_in_workspace");
    assert!(run.stdout.is_empty(), "no packet bytes on stdout");
}

#[test]
fn secrets_exclude_leaves_every_one_out_and_records_each_path_and_rule() {
    let t = tmp();
    let ws = t.path().join("ws");
    plant(&ws);
    for output in ["file", "stdout"] {
        let packet = t.path().join(format!("{output}.tar"));
        let report = if output == "file" {
            pack(&ws, &packet, &["--secrets", "exclude"])
        } else {
            let run = run(pillbox().args([
                "checkpoint",
                "pack",
                s(&ws),
                "-o",
                "-",
                "--quiet",
                "--secrets",
                "exclude",
            ]));
            assert_eq!(run.code, 0);
            fs::write(&packet, &run.stdout).unwrap();
            run.stderr_json()
        };
        assert_schema("pack-1.schema.json", &report);
        let bytes = fs::read(&packet).unwrap();
        assert_no_value("the packet", &bytes);
        assert_no_value("the report", report.to_string().as_bytes());
        let inspect = ok(&["inspect", s(&packet)]);
        let members: Vec<&str> = inspect["members"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["path"].as_str().unwrap())
            .collect();
        assert!(members.contains(&"workspace/README.md"));
        let exclusions = inspect["exclusions"].as_array().unwrap();
        for (path, _, found) in planted() {
            let member = format!("workspace/{path}");
            assert!(
                !members.contains(&member.as_str()),
                "{member} packed ({output})"
            );
            for (_, rule) in found {
                assert!(
                    exclusions
                        .iter()
                        .any(|e| e["rule"] == rule && e["pattern"] == path && e["matched"] == 1),
                    "no exclusion ({rule}, {path}) in {exclusions:?}"
                );
                assert!(report["secrets"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|s| s["path"] == member.as_str()
                        && s["rule"] == rule
                        && s["action"] == "excluded"));
            }
        }
        // What verify reads back holds nothing more.
        let v = ok(&["verify", s(&packet)]);
        assert_eq!(v["findings"]["secrets"], serde_json::json!([]), "{v}");
    }
}

#[test]
fn allowed_fixtures_and_published_packages_are_packed_and_reported() {
    let t = tmp();
    let ws = t.path().join("ws");
    write(&ws.join("README.md"), "# acme\n");
    let key = pem("PRIVATE KEY", "MIIEvQIBADANBgkqhkiG9w0BAQEFAASC", 1624, 21);
    write(&ws.join("tests/fixtures/tls/key.pem"), &key);
    write(&ws.join("node_modules/https-fixture/test/key.pem"), &key);
    write(&ws.join("vendor/ureq-x/Cargo.toml.orig"), "[package]\n");
    write(&ws.join("vendor/ureq-x/src/testdata/key.pem"), &key);
    write(
        &ws.join("pydeps/paramiko-3.0.dist-info/RECORD"),
        "paramiko/__init__.py,,\n",
    );
    write(&ws.join("pydeps/paramiko/test_rsa.key"), &key);
    let packet = t.path().join("p.tar");
    // The user's own fixture is refused until allowed.
    let err = fails(
        &["pack", s(&ws), "-o", s(&packet), "--quiet"],
        5,
        "secret_in_workspace",
    );
    let message = err["message"].as_str().unwrap();
    assert!(
        message.contains("workspace/tests/fixtures/tls/key.pem:1 private-key"),
        "{message}"
    );
    assert!(
        message.starts_with("1 secret"),
        "published packages are not refused: {message}"
    );
    let report = pack(&ws, &packet, &["--allow-secret", "tests/fixtures/**"]);
    let secrets: Vec<(String, String)> = report["secrets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["path"].as_str().unwrap().to_owned(),
                s["action"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(
        secrets,
        [
            (
                "workspace/node_modules/https-fixture/test/key.pem".into(),
                "published".into()
            ),
            (
                "workspace/pydeps/paramiko/test_rsa.key".into(),
                "published".into()
            ),
            (
                "workspace/tests/fixtures/tls/key.pem".into(),
                "allowed".into()
            ),
            (
                "workspace/vendor/ureq-x/src/testdata/key.pem".into(),
                "published".into()
            ),
        ]
    );
    // Every reader reports what the packet holds, whoever packed it.
    let v = ok(&["verify", s(&packet)]);
    assert_eq!(v["findings"]["secrets"].as_array().unwrap().len(), 4, "{v}");
}

#[test]
fn readers_report_secrets_in_packets_other_tools_wrote() {
    // GNU tar does not look at contents: a tar of the planted workspace,
    // rebuilt into a packet by packet-core from the same files, is what a
    // careless packer makes. verify and inspect flag it without refusing.
    let t = tmp();
    let ws = t.path().join("ws");
    write(
        &ws.join("src/app.py"),
        format!("TOKEN = \"{}\"\n", checksummed("ghp_", 30)),
    );
    write(&ws.join(".env"), "A=1\n");
    write(
        &ws.join(".git/config"),
        "[core]\n\tfsmonitor = .git/fsmonitor.sh\n[filter \"x\"]\n\tsmudge = ./run\n",
    );
    let mut sources = vec![packet_core::in_memory::Source::Dir {
        path: "workspace".into(),
    }];
    for dir in ["workspace/.git", "workspace/src"] {
        sources.push(packet_core::in_memory::Source::Dir { path: dir.into() });
    }
    for (path, file) in [
        ("workspace/.env", ".env"),
        ("workspace/.git/config", ".git/config"),
        ("workspace/src/app.py", "src/app.py"),
    ] {
        sources.push(packet_core::in_memory::Source::File {
            path: path.into(),
            contents: fs::read(ws.join(file)).unwrap(),
            executable: false,
        });
    }
    let built = packet_core::in_memory::build(&sources, None, vec![], &packet_core::Limits::FORMAT)
        .unwrap();
    let packet = t.path().join("other.tar");
    fs::write(&packet, &built.bytes).unwrap();
    let expected: Value = serde_json::json!({
        "secrets": [
            {"path": "workspace/.env", "line": null, "rule": "env-file"},
            {"path": "workspace/src/app.py", "line": 1, "rule": "github-token"}
        ],
        "git": [
            {"path": "workspace/.git/config", "line": 2, "setting": "core.fsmonitor",
             "why": "runs this program at every git status and at most other commands"},
            {"path": "workspace/.git/config", "line": 4, "setting": "filter.x.smudge",
             "why": "runs this program on files at checkout, add and status"}
        ]
    });
    let v = ok(&["verify", s(&packet)]);
    assert_eq!(v["findings"], expected);
    let i = ok(&["inspect", s(&packet)]);
    assert_eq!(i["findings"], expected);
    let text = checkpoint(&["inspect", s(&packet), "--format", "text"]);
    let text = String::from_utf8(text.stdout).unwrap();
    assert!(
        text.contains("# secret workspace/src/app.py:1 github-token"),
        "{text}"
    );
    assert!(
        text.contains("# git workspace/.git/config:2 core.fsmonitor"),
        "{text}"
    );
    let out = t.path().join("out");
    let u = ok(&[
        "unpack",
        s(&packet),
        "--trust-unverified",
        "--into",
        s(&out),
    ]);
    assert_eq!(u["findings"], expected);
    assert_eq!(u["git"], Value::Null);
    assert_schema("unpack-1.schema.json", &u);
    assert_schema("verify-1.schema.json", &v);
    assert_schema("inspect-1.schema.json", &i);
}

// ---- Harness state: files the adapters collect outside the workspace -----

/// A token a tool printed, as a session log records it.
fn leaked_token() -> String {
    checksummed("ghp_", 41)
}

/// Packs with `args` (into a file, then to standard output) and expects
/// the detector's refusal naming `named` (`member:line rule`, the first
/// as the error's path), never the token.
fn refused_for_harness(args: &[&str], packet: &Path, named: &[String], box_: Option<&OpencodeBox>) {
    let token = leaked_token();
    let run_with = |extra: &[&str]| {
        let all: Vec<&str> = args.iter().chain(extra).copied().collect();
        match box_ {
            Some(b) => oc(&all, b),
            None => checkpoint(&all),
        }
    };
    let no_token = |what: &str, bytes: &[u8]| {
        assert!(
            !bytes.windows(token.len()).any(|w| w == token.as_bytes()),
            "{what} holds the token"
        );
    };
    let run = run_with(&["-o", s(packet), "--quiet"]);
    assert_eq!(run.code, 5, "{}", String::from_utf8_lossy(&run.stdout));
    let err = run.json();
    assert_eq!(err["code"], "secret_in_workspace", "{err}");
    let first = named[0].split(':').next().unwrap();
    assert_eq!(err["path"], first, "{err}");
    let message = err["message"].as_str().unwrap();
    for n in named {
        assert!(message.contains(n.as_str()), "{n} not in {message}");
    }
    no_token("the refusal", &run.stdout);
    no_token("stderr", &run.stderr);
    assert!(!packet.exists(), "nothing is kept");
    let run = run_with(&["-o", "-", "--quiet"]);
    assert_eq!(run.code, 5);
    let err = run.stderr_json();
    assert_eq!(err["code"], "secret_in_workspace", "{err}");
    assert_eq!(err["path"], first, "{err}");
    assert!(run.stdout.is_empty(), "no packet bytes on stdout");
    no_token("stderr", &run.stderr);
    // The session log cannot be left out of its own session.
    let run = run_with(&["-o", s(packet), "--quiet", "--secrets", "exclude"]);
    assert_eq!(run.code, 5);
    let err = run.json();
    assert_eq!(err["code"], "secret_in_workspace", "{err}");
    assert!(
        err["message"].as_str().unwrap().contains("session log"),
        "{err}"
    );
    assert!(!packet.exists(), "nothing is kept");
}

/// A Codex home whose rollout quotes the token on its fifth line, after
/// most of it (its first 30 characters, not a token) on the same line: a
/// compressor copies the token from there, so the compressed file does not
/// hold it whole.
fn codex_with_token(t: &Path) -> (std::path::PathBuf, std::path::PathBuf, std::path::PathBuf) {
    let ws = t.join("ws");
    write(&ws.join("src/main.rs"), "fn main() {}\n");
    let home = t.join("codex-home");
    let rollout = codex_home(&home, THREAD, &ws, "gpt-5.1-codex");
    let mut lines = fs::read_to_string(&rollout).unwrap();
    let token = leaked_token();
    lines.push_str(&format!(
        r#"{{"timestamp":"2026-11-30T01:02:05.000Z","type":"response_item","payload":{{"type":"function_call_output","output":"revoked: {} (truncated); current: GITHUB_TOKEN={token}"}}}}"#,
        &token[..30]
    ));
    lines.push('\n');
    fs::write(&rollout, lines).unwrap();
    (ws, home, rollout)
}

#[test]
fn a_token_in_a_codex_rollout_refuses_the_pack_by_member_line_and_rule() {
    let t = tmp();
    let (ws, home, _) = codex_with_token(t.path());
    let packet = t.path().join("p.tar");
    let args = [
        "pack",
        s(&ws),
        "--harness",
        "codex",
        "--thread",
        THREAD,
        "--codex-home",
        s(&home),
    ];
    let member =
        format!("harness/codex/sessions/2026/11/30/rollout-2026-11-30T01-02-03-{THREAD}.jsonl");
    refused_for_harness(&args, &packet, &[format!("{member}:5 github-token")], None);
}

#[test]
fn a_token_in_a_compressed_codex_rollout_is_found_in_its_lines() {
    let t = tmp();
    let (ws, home, rollout) = codex_with_token(t.path());
    let zst = compress(&rollout);
    fs::remove_file(&rollout).unwrap();
    let compressed = fs::read(&zst).unwrap();
    let token = leaked_token();
    assert!(
        !compressed
            .windows(token.len())
            .any(|w| w == token.as_bytes()),
        "the compressed bytes do not show the token"
    );
    let packet = t.path().join("p.tar");
    let args = [
        "pack",
        s(&ws),
        "--harness",
        "codex",
        "--thread",
        THREAD,
        "--codex-home",
        s(&home),
    ];
    let member =
        format!("harness/codex/sessions/2026/11/30/rollout-2026-11-30T01-02-03-{THREAD}.jsonl.zst");
    refused_for_harness(&args, &packet, &[format!("{member}:5 github-token")], None);
}

#[test]
fn a_token_in_a_claude_transcript_or_its_session_folder_refuses_the_pack() {
    const SESSION: &str = "5f1c7a0e-2b6d-4c3e-9a8f-0123456789ab";
    let t = tmp();
    let ws = t.path().join("ws");
    write(&ws.join("app.js"), "console.log(1)\n");
    let config = t.path().join("claude");
    let project = config.join("projects").join("-old-ws");
    let token = leaked_token();
    let transcript = [
        format!(
            r#"{{"type":"user","sessionId":"{SESSION}","cwd":"/old/ws","message":{{"role":"user","content":"hi"}},"uuid":"u1"}}"#
        ),
        format!(
            r#"{{"type":"assistant","sessionId":"{SESSION}","cwd":"/old/ws","message":{{"model":"claude-sonnet-4-5","role":"assistant","content":[]}},"uuid":"a1"}}"#
        ),
        format!(
            r#"{{"type":"user","sessionId":"{SESSION}","cwd":"/old/ws","message":{{"role":"user","content":[{{"type":"tool_result","content":"GITHUB_TOKEN={token}"}}]}},"uuid":"u2"}}"#
        ),
    ]
    .join("\n")
        + "\n";
    write(&project.join(format!("{SESSION}.jsonl")), &transcript);
    write(
        &project.join(SESSION).join("tool-results/r1.txt"),
        format!("env\nGITHUB_TOKEN={token}\n"),
    );
    let packet = t.path().join("p.tar");
    let args = [
        "pack",
        s(&ws),
        "--harness",
        "claude",
        "--session",
        SESSION,
        "--claude-config-dir",
        s(&config),
    ];
    refused_for_harness(
        &args,
        &packet,
        &[
            // In packet order: the session folder's files, then the transcript.
            format!("harness/claude/{SESSION}/tool-results/r1.txt:2 github-token"),
            format!("harness/claude/{SESSION}.jsonl:3 github-token"),
        ],
        None,
    );
}

#[test]
fn a_token_in_an_opencode_export_refuses_the_pack() {
    let t = tmp();
    let bin = fake_opencode(t.path());
    let b = opencode_box(t.path(), "a");
    let export = export_json(&["msg_1", "msg_2"]).replacen(
        "tool output: OPENAI_API_KEY is set",
        &format!("tool output: GITHUB_TOKEN={}", leaked_token()),
        1,
    );
    let line = export
        .lines()
        .position(|l| l.contains("GITHUB_TOKEN="))
        .unwrap()
        + 1;
    write(
        &b.data.join("sessions").join(format!("{OC_SESSION}.json")),
        &export,
    );
    let ws = t.path().join("a/ws");
    write(&ws.join("app.js"), "console.log(1)\n");
    let packet = t.path().join("p.tar");
    let args = [
        "pack",
        s(&ws),
        "--harness",
        "opencode",
        "--session",
        OC_SESSION,
        "--opencode-bin",
        s(&bin),
    ];
    refused_for_harness(
        &args,
        &packet,
        &[format!(
            "harness/opencode/{OC_SESSION}.json:{line} github-token"
        )],
        Some(&b),
    );
}
