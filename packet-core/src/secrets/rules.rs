//! The formats the detector knows (docs/session-packet.md §7.2), each as
//! its issuer documents it: a literal anchor the search finds, then a
//! precise check of the bytes around it. Only high-confidence formats are
//! here: a provider prefix with a fixed length and alphabet (and its
//! checksum where it has one), a private key block with a real body, an
//! AWS access key id with its secret beside it. Documentation placeholders
//! (`EXAMPLE` keys, `...` bodies, runs of one character) fail the checks.

/// One detector rule: a stable id, recorded in reports and exclusions,
/// and what it finds.
#[derive(Debug, PartialEq, Eq)]
pub struct SecretRule {
    /// Stable id (`github-token`, `private-key`, ...).
    pub id: &'static str,
    /// What it finds, for people.
    pub what: &'static str,
}

macro_rules! secret_rules {
    ($($name:ident = $id:literal, $what:literal;)*) => {
        $(pub(super) const $name: &SecretRule = &SecretRule { id: $id, what: $what };)*
        /// Every detector rule, in the order docs/session-packet.md §7.2
        /// lists them.
        pub const SECRET_RULES: &[&SecretRule] = &[$($name),*];
    };
}

secret_rules! {
    GITHUB = "github-token", "a GitHub token (ghp_, gho_, ghu_, ghs_, ghr_) with a valid checksum";
    GITHUB_PAT = "github-fine-grained-token", "a GitHub fine-grained personal access token (github_pat_)";
    GITLAB = "gitlab-token", "a GitLab personal access token (glpat-)";
    SLACK = "slack-token", "a Slack bot, user or app token (xoxb-, xoxp-, xoxe-, xapp-)";
    SLACK_WEBHOOK = "slack-webhook", "a Slack incoming webhook URL";
    OPENAI = "openai-api-key", "an OpenAI API key (sk-...T3BlbkFJ...)";
    ANTHROPIC = "anthropic-api-key", "an Anthropic API key (sk-ant-api03-, sk-ant-admin01-)";
    STRIPE = "stripe-key", "a Stripe secret or restricted key (sk_live_, rk_live_, sk_test_, rk_test_)";
    AWS = "aws-access-key", "an AWS access key id (AKIA, ASIA) with its secret access key beside it";
    PRIVATE_KEY = "private-key", "a PEM, OpenSSH or PGP private key block with a key body";
    GCP = "gcp-service-account", "a Google Cloud service account key (a private key in a private_key field)";
    HUGGING_FACE = "huggingface-token", "a Hugging Face access token (hf_)";
    GOOGLE_API = "google-api-key", "a Google API key (AIza)";
    NPM = "npm-token", "an npm access token (npm_) with a valid checksum";
    GIT_URL = "git-url-credentials", "a password or token in a URL in a git configuration file";
    GIT_HEADER = "git-extraheader-credentials", "an Authorization header in a git configuration file's http.extraheader";
}

/// What an anchor is the start (or the middle) of.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Anchor {
    GitHub,
    GitHubPat,
    GitLab,
    SlackBot,
    SlackUser,
    SlackApp,
    SlackWebhook,
    OpenAiMarker,
    Anthropic,
    Stripe,
    Aws,
    PrivateKey,
    HuggingFace,
    GoogleApi,
    Npm,
}

impl Anchor {
    /// Every anchor, in a fixed order (a detector's snapshot names them by
    /// their place here).
    const ALL: [Anchor; 15] = [
        Anchor::GitHub,
        Anchor::GitHubPat,
        Anchor::GitLab,
        Anchor::SlackBot,
        Anchor::SlackUser,
        Anchor::SlackApp,
        Anchor::SlackWebhook,
        Anchor::OpenAiMarker,
        Anchor::Anthropic,
        Anchor::Stripe,
        Anchor::Aws,
        Anchor::PrivateKey,
        Anchor::HuggingFace,
        Anchor::GoogleApi,
        Anchor::Npm,
    ];

    /// Its place in [`Anchor::ALL`].
    pub(super) fn index(self) -> u8 {
        Self::ALL.iter().position(|&a| a == self).unwrap_or(0) as u8
    }

    /// The anchor at `index` in [`Anchor::ALL`].
    pub(super) fn from_index(index: u8) -> Option<Anchor> {
        Self::ALL.get(usize::from(index)).copied()
    }
}

/// The anchors the search looks for. None is a prefix, a suffix or a part
/// of another (a test holds this), so a leftmost-first search finds them
/// all.
pub(super) const ANCHORS: &[(&str, Anchor)] = &[
    ("ghp_", Anchor::GitHub),
    ("gho_", Anchor::GitHub),
    ("ghu_", Anchor::GitHub),
    ("ghs_", Anchor::GitHub),
    ("ghr_", Anchor::GitHub),
    ("github_pat_", Anchor::GitHubPat),
    ("glpat-", Anchor::GitLab),
    ("xoxb-", Anchor::SlackBot),
    ("xoxp-", Anchor::SlackUser),
    ("xoxe-", Anchor::SlackUser),
    ("xapp-", Anchor::SlackApp),
    ("hooks.slack.com/", Anchor::SlackWebhook),
    ("T3BlbkFJ", Anchor::OpenAiMarker),
    ("sk-ant-", Anchor::Anthropic),
    ("sk_live_", Anchor::Stripe),
    ("rk_live_", Anchor::Stripe),
    ("sk_test_", Anchor::Stripe),
    ("rk_test_", Anchor::Stripe),
    ("AKIA", Anchor::Aws),
    ("ASIA", Anchor::Aws),
    ("PRIVATE KEY", Anchor::PrivateKey),
    ("hf_", Anchor::HuggingFace),
    ("AIza", Anchor::GoogleApi),
    ("npm_", Anchor::Npm),
];

/// The longest anchor.
pub(super) const MAX_ANCHOR: usize = 16;

/// The most bytes any check looks at before its anchor.
pub(super) const MAX_BACK: usize = AWS_PAIR_DISTANCE;

/// The most bytes any check looks at from its anchor on.
pub(super) const MAX_AHEAD: usize = AWS_PAIR_DISTANCE;

/// How far from an AWS access key id its secret may be.
const AWS_PAIR_DISTANCE: usize = 1024;

/// How far back the OpenAI marker may be from its key's `sk-`.
const OPENAI_BACK: usize = 160;

/// A private key's header before `PRIVATE KEY`, and a `"private_key":`
/// label before that.
const KEY_BACK: usize = 96;

/// Bytes of a private key block looked at: the header's end, RFC 1421
/// header lines, and enough of the body.
const KEY_AHEAD: usize = 640;

impl Anchor {
    /// How many bytes before and from the anchor its check looks at.
    pub(super) fn window(self) -> (usize, usize) {
        match self {
            Anchor::Aws => (AWS_PAIR_DISTANCE, AWS_PAIR_DISTANCE),
            Anchor::OpenAiMarker => (OPENAI_BACK, 160),
            Anchor::PrivateKey => (KEY_BACK, KEY_AHEAD),
            Anchor::SlackUser | Anchor::SlackApp | Anchor::SlackWebhook => (1, 192),
            _ => (1, 128),
        }
    }

    /// Checks the bytes around an anchor found at `window[at..]`. `at_eof`
    /// tells that the window ends where the file does. Returns the rule
    /// and where in the window the secret starts.
    pub(super) fn check(
        self,
        window: &[u8],
        at: usize,
        at_eof: bool,
    ) -> Option<(&'static SecretRule, usize)> {
        let t = Text {
            bytes: window,
            at_eof,
        };
        let rule = match self {
            Anchor::GitHub => github(&t, at),
            Anchor::GitHubPat => github_fine_grained(&t, at),
            Anchor::GitLab => gitlab(&t, at),
            Anchor::SlackBot => slack_bot(&t, at),
            Anchor::SlackUser => slack_user(&t, at),
            Anchor::SlackApp => slack_app(&t, at),
            Anchor::SlackWebhook => slack_webhook(&t, at),
            Anchor::OpenAiMarker => return openai(&t, at),
            Anchor::Anthropic => anthropic(&t, at),
            Anchor::Stripe => stripe(&t, at),
            Anchor::Aws => aws(&t, at),
            Anchor::PrivateKey => return private_key(&t, at),
            Anchor::HuggingFace => hugging_face(&t, at),
            Anchor::GoogleApi => google_api(&t, at),
            Anchor::Npm => npm(&t, at),
        };
        rule.map(|r| (r, at))
    }
}

/// A window of bytes, and whether it ends where the file does.
struct Text<'a> {
    bytes: &'a [u8],
    at_eof: bool,
}

impl Text<'_> {
    /// The length of the run of bytes from `at` on that satisfy `class`.
    fn run(&self, at: usize, class: fn(u8) -> bool) -> usize {
        self.bytes
            .get(at..)
            .map_or(0, |rest| rest.iter().take_while(|&&b| class(b)).count())
    }

    /// Whether a token of `class` bytes may end at `at`: the next byte is
    /// not of its class, or the file ends there. A window that ends
    /// before the file does says nothing, so the token does not count.
    fn ends_at(&self, at: usize, class: fn(u8) -> bool) -> bool {
        match self.bytes.get(at) {
            Some(&b) => !class(b),
            None => self.at_eof,
        }
    }

    /// Whether a token may start at `at`: the byte before is not one of
    /// `class`.
    fn starts_at(&self, at: usize, class: fn(u8) -> bool) -> bool {
        at == 0 || !class(self.bytes[at - 1])
    }

    /// `bytes[at..at + len]`, if the window holds it.
    fn get(&self, at: usize, len: usize) -> Option<&[u8]> {
        self.bytes.get(at..at.checked_add(len)?)
    }

    /// A run of exactly `len` bytes of `class` at `at`, not followed by
    /// another byte of `class` or of `boundary`.
    fn exactly(
        &self,
        at: usize,
        len: usize,
        class: fn(u8) -> bool,
        boundary: fn(u8) -> bool,
    ) -> Option<&[u8]> {
        (self.run(at, class) == len && self.ends_at(at + len, boundary))
            .then(|| &self.bytes[at..at + len])
    }
}

fn alnum(b: u8) -> bool {
    b.is_ascii_alphanumeric()
}

/// `[A-Za-z0-9_-]`: the alphabet of URL-safe tokens.
fn url_safe(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b == b'-'
}

fn base64(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'+' || b == b'/'
}

/// Whether a token's random part looks random rather than made up:
/// enough distinct characters, no long run of one character, and none of
/// the words documentation puts in fake keys.
pub(super) fn looks_random(token: &[u8]) -> bool {
    let mut seen = [false; 256];
    let mut distinct = 0;
    let mut run = 0;
    let mut longest = 0;
    let mut previous = None;
    for &b in token {
        if !seen[b as usize] {
            seen[b as usize] = true;
            distinct += 1;
        }
        run = if previous == Some(b) { run + 1 } else { 1 };
        longest = longest.max(run);
        previous = Some(b);
    }
    let wanted = (token.len() / 3).clamp(4, 14);
    distinct >= wanted && longest < 5 && !has_placeholder_word(token)
}

fn has_placeholder_word(token: &[u8]) -> bool {
    const WORDS: &[&[u8]] = &[
        b"example",
        b"sample",
        b"placeholder",
        b"xxxxx",
        b"dummy",
        b"redacted",
    ];
    (0..token.len()).any(|i| {
        WORDS.iter().any(|w| {
            token
                .get(i..i + w.len())
                .is_some_and(|t| t.eq_ignore_ascii_case(w))
        })
    })
}

/// Whether a token mixes letters and digits, as generated ones do.
fn letters_and_digits(token: &[u8]) -> bool {
    token.iter().any(u8::is_ascii_digit) && token.iter().any(u8::is_ascii_alphabetic)
}

/// GitHub's classic tokens: a 4-byte prefix, 30 random base62 characters
/// and their CRC32 in 6 base62 digits.
fn github(t: &Text<'_>, at: usize) -> Option<&'static SecretRule> {
    let token = t.exactly(at + 4, 36, alnum, alnum)?;
    // The prefix is preceded by something other than a letter or a digit
    // (`_` is fine: tokens appear in names such as `GH_TOKEN=`).
    (t.starts_at(at, alnum) && checksum_matches(token)).then_some(GITHUB)
}

/// npm's tokens follow GitHub's format: `npm_`, 30 random characters, a
/// CRC32 in 6 base62 digits.
fn npm(t: &Text<'_>, at: usize) -> Option<&'static SecretRule> {
    let token = t.exactly(at + 4, 36, alnum, alnum)?;
    (t.starts_at(at, alnum) && checksum_matches(token)).then_some(NPM)
}

/// Whether the last 6 base62 digits of `token` are the CRC32 of the rest.
pub(super) fn checksum_matches(token: &[u8]) -> bool {
    let (body, digits) = token.split_at(token.len() - 6);
    let mut value: u64 = 0;
    for &d in digits {
        let Some(v) = base62_value(d) else {
            return false;
        };
        value = value * 62 + u64::from(v);
    }
    value == u64::from(crc32(body))
}

/// The base62 digit value (0-9, A-Z, a-z), as GitHub's token checksums
/// write it.
fn base62_value(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'A'..=b'Z' => Some(b - b'A' + 10),
        b'a'..=b'z' => Some(b - b'a' + 36),
        _ => None,
    }
}

/// CRC-32 (IEEE 802.3, reflected, as zlib computes it).
pub(super) fn crc32(bytes: &[u8]) -> u32 {
    const TABLE: [u32; 256] = {
        let mut table = [0u32; 256];
        let mut i = 0;
        while i < 256 {
            let mut c = i as u32;
            let mut k = 0;
            while k < 8 {
                c = if c & 1 != 0 {
                    0xedb8_8320 ^ (c >> 1)
                } else {
                    c >> 1
                };
                k += 1;
            }
            table[i] = c;
            i += 1;
        }
        table
    };
    let mut crc = !0u32;
    for &b in bytes {
        crc = TABLE[((crc ^ u32::from(b)) & 0xff) as usize] ^ (crc >> 8);
    }
    !crc
}

/// `github_pat_`, 22 base62 characters, `_`, 59 base62 characters.
fn github_fine_grained(t: &Text<'_>, at: usize) -> Option<&'static SecretRule> {
    let start = at + "github_pat_".len();
    let id = t.get(start, 22)?;
    let secret = t.get(start + 23, 59)?;
    let shaped = id.iter().all(|&b| alnum(b))
        && t.bytes.get(start + 22) == Some(&b'_')
        && secret.iter().all(|&b| alnum(b))
        && t.ends_at(start + 82, url_safe);
    (shaped && t.starts_at(at, alnum) && looks_random(secret)).then_some(GITHUB_PAT)
}

/// `glpat-` and 20 URL-safe characters, or the routable form: 27 or more,
/// a dot, and a version and CRC in 9 base36 digits.
fn gitlab(t: &Text<'_>, at: usize) -> Option<&'static SecretRule> {
    let start = at + "glpat-".len();
    let n = t.run(start, url_safe);
    let classic = n == 20 && t.ends_at(start + n, |b| url_safe(b) || b == b'.');
    let routable = n >= 27
        && t.bytes.get(start + n) == Some(&b'.')
        && t.run(start + n + 1, |b| {
            b.is_ascii_digit() || b.is_ascii_lowercase()
        }) == 9
        && t.ends_at(start + n + 10, alnum);
    let body = t.get(start, n)?;
    ((classic || routable) && t.starts_at(at, alnum) && looks_random(body)).then_some(GITLAB)
}

fn digits(b: u8) -> bool {
    b.is_ascii_digit()
}

/// `xoxb-`, two numeric ids of 10 to 13 digits, and a secret of 24 or
/// more letters and digits.
fn slack_bot(t: &Text<'_>, at: usize) -> Option<&'static SecretRule> {
    let mut i = at + "xoxb-".len();
    for _ in 0..2 {
        let n = t.run(i, digits);
        if !(10..=13).contains(&n) || t.bytes.get(i + n) != Some(&b'-') {
            return None;
        }
        i += n + 1;
    }
    let n = t.run(i, alnum);
    (n >= 24 && t.starts_at(at, alnum) && t.ends_at(i + n, url_safe) && looks_random(t.get(i, n)?))
        .then_some(SLACK)
}

/// `xoxp-` or `xoxe-`, three numeric ids of 10 to 13 digits, and a
/// secret of 28 to 34 characters.
fn slack_user(t: &Text<'_>, at: usize) -> Option<&'static SecretRule> {
    let mut i = at + "xoxp-".len();
    for _ in 0..3 {
        let n = t.run(i, digits);
        if !(10..=13).contains(&n) || t.bytes.get(i + n) != Some(&b'-') {
            return None;
        }
        i += n + 1;
    }
    let n = t.run(i, alnum);
    let shaped = (28..=34).contains(&n) && t.ends_at(i + n, url_safe);
    (shaped && t.starts_at(at, alnum) && looks_random(t.get(i, n)?)).then_some(SLACK)
}

/// `xapp-`, a digit, an app id, a numeric id and a 64-digit hex secret.
fn slack_app(t: &Text<'_>, at: usize) -> Option<&'static SecretRule> {
    let i = at + "xapp-".len();
    if !t.starts_at(at, alnum) || t.run(i, digits) != 1 || t.bytes.get(i + 1) != Some(&b'-') {
        return None;
    }
    let j = i + 2;
    let id = t.run(j, |b| b.is_ascii_uppercase() || b.is_ascii_digit());
    if !(9..=12).contains(&id) || t.bytes.get(j + id) != Some(&b'-') {
        return None;
    }
    let k = j + id + 1;
    let number = t.run(k, digits);
    if number < 10 || t.bytes.get(k + number) != Some(&b'-') {
        return None;
    }
    let s = k + number + 1;
    let hex = |b: u8| b.is_ascii_digit() || (b'a'..=b'f').contains(&b);
    (t.run(s, hex) == 64 && t.ends_at(s + 64, alnum) && looks_random(t.get(s, 64)?))
        .then_some(SLACK)
}

/// `hooks.slack.com/services/T…/B…/<24 characters>`.
fn slack_webhook(t: &Text<'_>, at: usize) -> Option<&'static SecretRule> {
    let rest = t.bytes.get(at + "hooks.slack.com/".len()..)?;
    let path = rest.strip_prefix(b"services/")?;
    let mut parts = path.splitn(3, |&b| b == b'/');
    let team = parts.next()?;
    let hook = parts.next()?;
    let secret = parts.next()?;
    let n = secret.iter().take_while(|&&b| alnum(b)).count();
    let id = |p: &[u8], first: u8| {
        p.first() == Some(&first)
            && (8..=12).contains(&p.len())
            && p.iter()
                .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit())
    };
    let ends = secret.get(n).is_none_or(|&b| !alnum(b));
    (id(team, b'T') && id(hook, b'B') && n == 24 && ends && looks_random(&secret[..n]))
        .then_some(SLACK_WEBHOOK)
}

/// OpenAI keys carry `T3BlbkFJ` ("OpenAI" in base64) between two random
/// halves: `sk-` (or `sk-proj-`, `sk-svcacct-`, `sk-admin-`), 20 or more
/// characters, the marker, 20 or more characters. Returns where `sk-`
/// starts.
fn openai(t: &Text<'_>, at: usize) -> Option<(&'static SecretRule, usize)> {
    // Back from the marker over the token's characters to its `sk-`.
    let before = t.bytes[..at]
        .iter()
        .rev()
        .take_while(|&&b| url_safe(b))
        .count();
    let run = &t.bytes[at - before..at];
    // The key's `sk-`: the first one in the run that no letter or digit
    // precedes.
    let start = at - before
        + (0..run.len())
            .find(|&i| run[i..].starts_with(b"sk-") && (i == 0 || !alnum(run[i - 1])))?;
    let token = &t.bytes[start..at];
    let head = [&b"sk-proj-"[..], b"sk-svcacct-", b"sk-admin-", b"sk-"]
        .into_iter()
        .find(|p| token.starts_with(p))?;
    let first = &token[head.len()..];
    let after = at + "T3BlbkFJ".len();
    let n = t.run(after, url_safe);
    let second = t.get(after, n)?;
    let shaped = first.len() >= 20 && n >= 20 && t.ends_at(after + n, url_safe);
    (shaped && looks_random(first) && looks_random(second)).then_some((OPENAI, start))
}

/// `sk-ant-api03-` or `sk-ant-admin01-`, 93 URL-safe characters, `AA`.
fn anthropic(t: &Text<'_>, at: usize) -> Option<&'static SecretRule> {
    let rest = &t.bytes[at + "sk-ant-".len()..];
    let kind = [&b"api03-"[..], b"admin01-"]
        .into_iter()
        .find(|k| rest.starts_with(k))?;
    let start = at + "sk-ant-".len() + kind.len();
    let n = t.run(start, url_safe);
    let body = t.get(start, n)?;
    (n == 95 && body.ends_with(b"AA") && t.starts_at(at, alnum) && looks_random(&body[..93]))
        .then_some(ANTHROPIC)
}

/// `sk_live_`, `rk_live_`, `sk_test_` or `rk_test_` and 24 to 99 letters
/// and digits (fewer are documentation stand-ins such as `sk_test_123`).
fn stripe(t: &Text<'_>, at: usize) -> Option<&'static SecretRule> {
    let start = at + "sk_live_".len();
    let n = t.run(start, alnum);
    let body = t.get(start, n)?;
    ((24..=99).contains(&n)
        && t.starts_at(at, alnum)
        && t.ends_at(start + n, url_safe)
        && letters_and_digits(body)
        && looks_random(body))
    .then_some(STRIPE)
}

/// An AWS access key id (`AKIA` or `ASIA` and 16 characters of base32)
/// with, within [`AWS_PAIR_DISTANCE`] bytes, a 40-character secret access
/// key after a name that says `secret`. An id alone is not a credential;
/// AWS's documentation keys end in `EXAMPLE` and are refused.
fn aws(t: &Text<'_>, at: usize) -> Option<&'static SecretRule> {
    fn base32(b: u8) -> bool {
        b.is_ascii_uppercase() || (b'2'..=b'7').contains(&b)
    }
    let id = t.exactly(at + 4, 16, base32, alnum)?;
    if !t.starts_at(at, alnum) || !looks_random(id) {
        return None;
    }
    // The secret: after a `secret` name, the first 40-character base64
    // token, within the 64 bytes that follow the name.
    let bytes = t.bytes;
    let mut i = 0;
    while let Some(found) = find_ignore_case(&bytes[i..], b"secret") {
        let name_end = i + found + b"secret".len();
        let mut j = name_end;
        let limit = (name_end + 64).min(bytes.len());
        while j < limit {
            if base64(bytes[j]) && (j == 0 || !base64(bytes[j - 1])) {
                let n = t.run(j, base64);
                if n == 40 && t.ends_at(j + n, |b| base64(b) || b == b'=') {
                    let secret = &bytes[j..j + n];
                    let mixed = secret.iter().any(u8::is_ascii_uppercase)
                        && secret.iter().any(u8::is_ascii_lowercase)
                        && secret.iter().any(u8::is_ascii_digit);
                    if mixed && looks_random(secret) {
                        return Some(AWS);
                    }
                }
                j += n.max(1);
            } else {
                j += 1;
            }
        }
        i = name_end;
    }
    None
}

fn find_ignore_case(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack
        .windows(needle.len())
        .position(|w| w.eq_ignore_ascii_case(needle))
}

/// `hf_` and 34 letters.
fn hugging_face(t: &Text<'_>, at: usize) -> Option<&'static SecretRule> {
    let token = t.exactly(at + 3, 34, |b| b.is_ascii_alphabetic(), url_safe)?;
    let mixed =
        token.iter().any(u8::is_ascii_uppercase) && token.iter().any(u8::is_ascii_lowercase);
    (t.starts_at(at, alnum) && mixed && looks_random(token)).then_some(HUGGING_FACE)
}

/// `AIza` and 35 URL-safe characters.
fn google_api(t: &Text<'_>, at: usize) -> Option<&'static SecretRule> {
    let token = t.exactly(at + 4, 35, url_safe, url_safe)?;
    (t.starts_at(at, url_safe) && letters_and_digits(token) && looks_random(token))
        .then_some(GOOGLE_API)
}

/// What a private key block's header names before `PRIVATE KEY`.
#[derive(Clone, Copy, PartialEq, Eq)]
enum KeyKind {
    /// PKCS#1, PKCS#8, SEC1 and encrypted PKCS#8: DER, so the body's
    /// base64 starts with `M` (a SEQUENCE).
    Der,
    /// `OPENSSH PRIVATE KEY`: the body starts with `openssh-key-v1`.
    OpenSsh,
    /// `PGP PRIVATE KEY BLOCK`: armored packets.
    Pgp,
}

/// The fewest base64 characters of a key body: an Ed25519 key in PKCS#8
/// is 48 bytes, 64 characters.
const KEY_BODY_MIN: usize = 64;

/// A body this long is a key whether or not its end is in the window.
const KEY_BODY_ENOUGH: usize = 256;

/// `-----BEGIN <kind> PRIVATE KEY-----` (or `... PRIVATE KEY BLOCK-----`)
/// followed by a real body: at least [`KEY_BODY_MIN`] base64 characters
/// shaped as the kind's encoding starts, line breaks (real or `\n`
/// escapes, as JSON and string literals carry them) between, and the
/// `-----END` line right after, unless the body is long enough on its own.
/// Bodies elided with `...` or a placeholder are not keys. A key in a
/// `"private_key":` field is a Google Cloud service account key.
fn private_key(t: &Text<'_>, at: usize) -> Option<(&'static SecretRule, usize)> {
    let bytes = t.bytes;
    let before = &bytes[..at];
    let (kind, header) = [
        (KeyKind::Der, &b"-----BEGIN "[..]),
        (KeyKind::Der, b"-----BEGIN RSA "),
        (KeyKind::Der, b"-----BEGIN DSA "),
        (KeyKind::Der, b"-----BEGIN EC "),
        (KeyKind::Der, b"-----BEGIN ENCRYPTED "),
        (KeyKind::OpenSsh, b"-----BEGIN OPENSSH "),
        (KeyKind::Pgp, b"-----BEGIN PGP "),
    ]
    .into_iter()
    .find(|(_, h)| before.ends_with(h))?;
    let begin = at - header.len();
    let mut i = at + b"PRIVATE KEY".len();
    let close: &[u8] = if kind == KeyKind::Pgp {
        b" BLOCK-----"
    } else {
        b"-----"
    };
    if bytes.get(i..i + close.len())? != close {
        return None;
    }
    i += close.len();
    i = skip_breaks(bytes, i);
    // RFC 1421 headers (Proc-Type, DEK-Info) and armor headers (Version,
    // Comment): `Name: value` lines before the body, then a blank line
    // for PGP.
    for _ in 0..4 {
        let line_end = i + bytes[i..]
            .iter()
            .position(|&b| b == b'\n' || b == b'\\')
            .unwrap_or(bytes.len() - i);
        let line = &bytes[i..line_end];
        if line.contains(&b':') && !line.starts_with(b"-----") {
            i = skip_breaks(bytes, line_end);
        } else {
            break;
        }
    }
    let body_start = i;
    let mut count = 0;
    let mut head = [0u8; KEY_BODY_MIN];
    loop {
        let n = t.run(i, base64);
        for (k, &b) in bytes[i..i + n].iter().enumerate() {
            if count + k < KEY_BODY_MIN {
                head[count + k] = b;
            }
        }
        count += n;
        i += n;
        while bytes.get(i) == Some(&b'=') {
            i += 1;
        }
        let next = skip_breaks(bytes, i);
        if next == i || count >= KEY_BODY_ENOUGH {
            break;
        }
        i = next;
    }
    if count < KEY_BODY_MIN {
        return None;
    }
    let ended = count >= KEY_BODY_ENOUGH || bytes[skip_breaks(bytes, i)..].starts_with(b"-----END");
    let shaped = match kind {
        KeyKind::Der => head[0] == b'M',
        KeyKind::OpenSsh => head.starts_with(b"b3BlbnNzaC1rZXktdjE"),
        KeyKind::Pgp => true,
    };
    if !(ended && shaped && key_looks_random(&head)) || body_start == i {
        return None;
    }
    // A JSON `"private_key": "` field just before: a service account key.
    let rule = if json_field_before(&bytes[..begin], b"\"private_key\"") {
        GCP
    } else {
        PRIVATE_KEY
    };
    Some((rule, begin))
}

/// Whether `before` ends with `<name>: "` (spaces around the colon
/// allowed): the key is the value of that JSON field.
fn json_field_before(before: &[u8], name: &[u8]) -> bool {
    let trim = |s: &[u8]| -> usize { s.len() - s.iter().rev().take_while(|b| **b == b' ').count() };
    let Some(rest) = before.strip_suffix(b"\"") else {
        return false;
    };
    let rest = &rest[..trim(rest)];
    let Some(rest) = rest.strip_suffix(b":") else {
        return false;
    };
    rest[..trim(rest)].ends_with(name)
}

/// Whether a key body's first characters look like encoded key material:
/// enough distinct characters and no placeholder word (runs of `A` are
/// normal: OpenSSH keys hold zero-filled lengths).
fn key_looks_random(head: &[u8]) -> bool {
    let mut seen = [false; 256];
    for &b in head {
        seen[b as usize] = true;
    }
    seen.iter().filter(|&&s| s).count() >= 16 && !has_placeholder_word(head)
}

/// Skips line breaks, real (`\r`, `\n`, spaces and tabs around them) or
/// escaped in a string literal (`\n`, `\r`).
fn skip_breaks(bytes: &[u8], mut i: usize) -> usize {
    loop {
        match bytes.get(i..) {
            Some([b'\n' | b'\r' | b' ' | b'\t', ..]) => i += 1,
            Some([b'\\', b'n' | b'r', ..]) => i += 2,
            _ => return i,
        }
    }
}
