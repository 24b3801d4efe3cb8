use alloc::format;
use alloc::string::String;
use alloc::vec;
use alloc::vec::Vec;

use super::rules::{checksum_matches, crc32, ANCHORS, MAX_ANCHOR};
use super::*;

/// Deterministic characters from `alphabet`.
fn chars(seed: u64, n: usize, alphabet: &[u8]) -> String {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            alphabet[(x % alphabet.len() as u64) as usize] as char
        })
        .collect()
}

const ALNUM: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
const URL_SAFE: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-";
const B64: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// A token in GitHub's format: `prefix`, 30 characters, their CRC32 in
/// 6 base62 digits.
fn checksummed(prefix: &str, seed: u64) -> String {
    let body = chars(seed, 30, ALNUM);
    let mut crc = u64::from(crc32(body.as_bytes()));
    let digits = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
    let mut sum = [b'0'; 6];
    for d in sum.iter_mut().rev() {
        *d = digits[(crc % 62) as usize];
        crc /= 62;
    }
    format!("{prefix}{body}{}", core::str::from_utf8(&sum).unwrap())
}

/// A PEM block of `kind` whose body starts with `head`, in lines of 64.
fn pem(kind: &str, head: &str, body_len: usize, seed: u64) -> String {
    let body = format!("{head}{}", chars(seed, body_len - head.len(), B64));
    let lines: Vec<&str> = body
        .as_bytes()
        .chunks(64)
        .map(|c| core::str::from_utf8(c).unwrap())
        .collect();
    format!(
        "-----BEGIN {kind}-----\n{}\n-----END {kind}-----\n",
        lines.join("\n")
    )
}

/// One sample of every rule, each in the context it is usually found in.
pub(crate) fn samples() -> Vec<(&'static str, String)> {
    vec![
        (
            "github-token",
            format!("GITHUB_TOKEN={}\n", checksummed("ghp_", 1)),
        ),
        (
            "github-token",
            format!("token: \"{}\"\n", checksummed("ghs_", 2)),
        ),
        (
            "github-fine-grained-token",
            format!(
                "pat = github_pat_{}_{}\n",
                chars(3, 22, ALNUM),
                chars(4, 59, ALNUM)
            ),
        ),
        (
            "gitlab-token",
            format!("GITLAB_TOKEN=glpat-{}\n", chars(5, 20, URL_SAFE)),
        ),
        (
            "slack-token",
            format!(
                "\"slack\": \"xoxb-2718281828-3141592653-{}\"\n",
                chars(6, 24, ALNUM)
            ),
        ),
        (
            "slack-token",
            format!(
                "xoxp-1234567890-2345678901-3456789012-{}\n",
                chars(7, 32, ALNUM)
            ),
        ),
        (
            "slack-webhook",
            format!(
                "url = \"https://hooks.slack.com/services/T0123ABCD/B0456EFGH/{}\"\n",
                chars(8, 24, ALNUM)
            ),
        ),
        (
            "openai-api-key",
            format!(
                "OPENAI_API_KEY=sk-proj-{}T3BlbkFJ{}\n",
                chars(9, 74, URL_SAFE),
                chars(10, 74, URL_SAFE)
            ),
        ),
        (
            "openai-api-key",
            format!(
                "key = 'sk-{}T3BlbkFJ{}'\n",
                chars(11, 20, ALNUM),
                chars(12, 20, ALNUM)
            ),
        ),
        (
            "anthropic-api-key",
            format!(
                "ANTHROPIC_API_KEY=sk-ant-api03-{}AA\n",
                chars(13, 93, URL_SAFE)
            ),
        ),
        (
            "stripe-key",
            format!("STRIPE_SECRET_KEY=sk_live_{}\n", chars(14, 24, ALNUM)),
        ),
        (
            "aws-access-key",
            format!(
                "aws_access_key_id = AKIA{}\naws_secret_access_key = {}\n",
                chars(15, 16, b"ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"),
                chars(16, 40, B64)
            ),
        ),
        (
            "private-key",
            pem("RSA PRIVATE KEY", "MIIEpAIBAAKCAQEA", 1600, 17),
        ),
        (
            "private-key",
            pem(
                "OPENSSH PRIVATE KEY",
                "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ",
                400,
                18,
            ),
        ),
        (
            "private-key",
            pem("PRIVATE KEY", "MC4CAQAwBQYDK2VwBCIEI", 64, 19),
        ),
        (
            "gcp-service-account",
            format!(
                "{{\"type\": \"service_account\", \"private_key\": \"{}\"}}\n",
                pem("PRIVATE KEY", "MIIEvQIBADANBgkqhkiG9w0BAQEFAASC", 1624, 20)
                    .replace('\n', "\\n")
            ),
        ),
        (
            "huggingface-token",
            format!(
                "HF_TOKEN=hf_{}\n",
                chars(
                    21,
                    34,
                    b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                )
            ),
        ),
        (
            "google-api-key",
            format!("const key = \"AIza{}\";\n", chars(22, 35, URL_SAFE)),
        ),
        (
            "npm-token",
            format!("npmAuthToken: {}\n", checksummed("npm_", 23)),
        ),
    ]
}

/// What the detector finds in `chunks`; and, when they are one piece,
/// what `Scanner::scan` finds must be the same.
fn detect(path: &str, chunks: &[&[u8]]) -> Vec<(&'static str, u64)> {
    let scanner = Scanner::new();
    let mut d = scanner.detector(path);
    for c in chunks {
        d.feed(c);
    }
    let found: Vec<(&'static str, u64)> = d
        .finish()
        .into_iter()
        .map(|f| (f.rule.id, f.line))
        .collect();
    let whole: Vec<u8> = chunks.concat();
    let scanned: Vec<(&'static str, u64)> = scanner
        .scan(path, &whole)
        .into_iter()
        .map(|f| (f.rule.id, f.line))
        .collect();
    assert_eq!(
        found, scanned,
        "the detector and the one-piece scan disagree"
    );
    found
}

#[test]
fn crc32_is_zlibs() {
    assert_eq!(crc32(b"123456789"), 0xcbf4_3926);
    assert_eq!(crc32(b""), 0);
}

#[test]
fn github_checksums_as_github_computes_them() {
    // Tokens of the documented format with their real checksums, and
    // with one digit changed.
    for token in [
        "M7H4jxUDDWHP4kZ6A4dxlQYsQIWJuq11T4V4",
        "HEEjXavM6wKtyhAUwDblMznMEhWyTt4XwY6f",
        "QdwULL38u41vs1OcAjhKqcaSZ9W63r0Zu4ln",
    ] {
        assert!(checksum_matches(token.as_bytes()), "{token}");
        let mut wrong = String::from(token);
        wrong.pop();
        wrong.push('X');
        assert!(!checksum_matches(wrong.as_bytes()), "{wrong}");
    }
}

#[test]
fn every_rule_finds_its_sample_on_its_line() {
    let mut ids: Vec<&str> = Vec::new();
    for (rule, sample) in samples() {
        let text = format!("first line\n\n{sample}last line\n");
        assert_eq!(
            detect("f.txt", &[text.as_bytes()]),
            [(rule, 3)],
            "{rule}: {sample}"
        );
        ids.push(rule);
    }
    for rule in SECRET_RULES {
        if !rule.id.starts_with("git-") {
            assert!(ids.contains(&rule.id), "no sample for {}", rule.id);
        }
    }
}

#[test]
fn a_chunk_boundary_anywhere_hides_nothing() {
    for (rule, sample) in samples() {
        let text = format!("x\n{sample}y\n");
        let bytes = text.as_bytes();
        for cut in 0..=bytes.len() {
            let (a, b) = bytes.split_at(cut);
            assert_eq!(detect("f", &[a, b]), [(rule, 2)], "{rule} cut at {cut}");
        }
        let ones: Vec<&[u8]> = bytes.chunks(1).collect();
        assert_eq!(detect("f", &ones), [(rule, 2)], "{rule} in 1-byte chunks");
        let sevens: Vec<&[u8]> = bytes.chunks(7).collect();
        assert_eq!(detect("f", &sevens), [(rule, 2)], "{rule} in 7-byte chunks");
    }
}

#[test]
fn far_into_a_large_file_the_line_is_right() {
    let (rule, sample) = samples().swap_remove(0);
    let filler = "0123456789 abcdefghij\n".repeat(100_000);
    let text = format!("{filler}{sample}");
    let chunks: Vec<&[u8]> = text.as_bytes().chunks(65_536).collect();
    assert_eq!(detect("big.txt", &chunks), [(rule, 100_001)]);
}

#[test]
fn placeholders_and_near_misses_are_not_secrets() {
    let digits30 = chars(30, 30, ALNUM);
    let not_found = [
        // A GitHub-shaped token whose checksum is wrong.
        format!("ghp_{digits30}000000"),
        String::from("ghp_abcdefghijklmnopqrstuvwxyzABCD012345"),
        format!("npm_{digits30}abcdef"),
        // AWS's documentation keys, and an id with no secret beside it.
        String::from("aws_access_key_id = AKIAIOSFODNN7EXAMPLE\naws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"),
        format!("id = AKIA{}", chars(31, 16, b"ABCDEFGHIJKLMNOPQRSTUVWXYZ234567")),
        // Key blocks without a key.
        String::from("-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA...\n-----END RSA PRIVATE KEY-----"),
        String::from("-----BEGIN PRIVATE KEY-----\n<your key here>\n-----END PRIVATE KEY-----"),
        String::from("if line.startswith('-----BEGIN OPENSSH PRIVATE KEY-----'):"),
        String::from("const PEM_HEADER = \"-----BEGIN PRIVATE KEY-----\";"),
        format!(
            "-----BEGIN PRIVATE KEY-----\n{}...\n",
            chars(32, 64, B64).replacen(|_| true, "M", 1)
        ),
        String::from("-----BEGIN PRIVATE KEY-----\nAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA\n-----END PRIVATE KEY-----"),
        // Too short, or made up.
        String::from("stripe.api_key = 'sk_test_123'"),
        String::from("sk_live_xxxxxxxxxxxxxxxxxxxxxxxxxxxx"),
        String::from("hf_hub_download_and_cache_the_model_file"),
        String::from("glpat-xxxxxxxxxxxxxxxxxxxx"),
        String::from("xoxb-your-token-here"),
        String::from("OPENAI_API_KEY=sk-..."),
        String::from("AIzaSyXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXX"),
        // A URL with a password outside git configuration.
        String::from("see https://user:secret@example.com/repo.git"),
    ];
    for text in not_found {
        assert_eq!(detect("f.md", &[text.as_bytes()]), [], "{text}");
    }
}

#[test]
fn git_configuration_credentials_are_found_in_git_configuration() {
    let config = "[core]\n\tbare = false\n[remote \"origin\"]\n\turl = https://x-access-token:abcdef123456@github.com/o/r.git\n\
[http \"https://github.com/\"]\n\textraheader = AUTHORIZATION: basic eC1hY2Nlc3MtdG9rZW46Z2hzXzEyMw==\n";
    let found = [
        ("git-url-credentials", 4),
        ("git-extraheader-credentials", 6),
    ];
    for path in [
        ".git/config",
        "sub/.git/config",
        ".git/modules/m/config",
        ".gitconfig",
    ] {
        assert_eq!(detect(path, &[config.as_bytes()]), found, "{path}");
    }
    assert_eq!(detect("notes/config", &[config.as_bytes()]), []);
}

#[test]
fn a_secret_is_reported_once_per_rule_and_line() {
    let token = checksummed("ghp_", 40);
    let text = format!("{token} {token}\n{token}\n");
    assert_eq!(
        detect("f", &[text.as_bytes()]),
        [("github-token", 1), ("github-token", 2)]
    );
}

#[test]
fn no_anchor_hides_another() {
    // A leftmost-first search resumes after each anchor, so an anchor
    // inside or across another is not seen. Across is harmless where the
    // overlap is letters and digits: the second anchor's check wants its
    // token to start after something else.
    let mid_token = ["T3BlbkFJ", "PRIVATE KEY", "hooks.slack.com/"];
    for (a, _) in ANCHORS {
        assert!(a.len() <= MAX_ANCHOR, "{a}");
        for (b, _) in ANCHORS {
            if a == b {
                continue;
            }
            assert!(!a.contains(b), "{a} holds {b}");
            for k in 1..a.len().min(b.len()) {
                if a.ends_with(&b[..k]) {
                    let alnum = b[..k].bytes().all(|c| c.is_ascii_alphanumeric());
                    assert!(alnum && !mid_token.contains(b), "{a} hides {b}");
                }
            }
        }
    }
}

#[test]
fn random_bytes_hold_no_secrets() {
    let mut x = 0x2545_f491_4f6c_dd1du64;
    let bytes: Vec<u8> = (0..4 << 20)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect();
    let chunks: Vec<&[u8]> = bytes.chunks(1 << 20).collect();
    assert_eq!(detect("blob.bin", &chunks), []);
}
