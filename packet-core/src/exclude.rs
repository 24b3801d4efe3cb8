//! What never enters a packet (docs/session-packet.md, "Credentials"), and
//! the glob patterns that users add with `--exclude`.
//!
//! Patterns match a path relative to its root (`workspace/` or
//! `harness/`), component by component: `*` matches any run of characters
//! within one component, `?` one character, and a `**` component any number
//! of components (zero included).

/// One built-in credential rule: a stable id, the patterns it matches and
/// why it exists.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CredentialRule {
    /// Stable id, recorded in the manifest when the rule excluded something.
    pub id: &'static str,
    /// Patterns relative to the member's root.
    pub patterns: &'static [&'static str],
    /// Why the file is a credential.
    pub why: &'static str,
}

/// The credential rules. Packing excludes every match; reading refuses a
/// packet that holds one (as a file or a symlink). No flag re-includes them.
pub const CREDENTIAL_RULES: &[CredentialRule] = &[
    CredentialRule {
        id: "codex-auth",
        patterns: &["**/.codex/auth.json", "codex/auth.json"],
        why: "Codex CLI's login: API key or ChatGPT OAuth tokens",
    },
    CredentialRule {
        id: "claude-credentials",
        patterns: &["**/.credentials.json"],
        why: "Claude Code's OAuth tokens on Linux",
    },
    CredentialRule {
        id: "opencode-auth",
        patterns: &["**/opencode/auth.json"],
        why: "OpenCode's provider API keys",
    },
    CredentialRule {
        id: "opencode-db",
        patterns: &[
            "**/opencode.db",
            "**/opencode.db-wal",
            "**/opencode.db-shm",
            "**/opencode.db-journal",
        ],
        why: "OpenCode's database, which stores credentials beside sessions; its SQLite sidecars hold the same pages",
    },
    CredentialRule {
        id: "git-credentials",
        patterns: &["**/.git-credentials", "**/.config/git/credentials"],
        why: "git's credential store: plain-text tokens and passwords",
    },
    CredentialRule {
        id: "netrc",
        patterns: &["**/.netrc", "**/_netrc"],
        why: "machine logins and passwords used by curl, git and ftp",
    },
    CredentialRule {
        id: "ssh-private-key",
        patterns: &[
            "**/id_rsa",
            "**/id_dsa",
            "**/id_ecdsa",
            "**/id_ed25519",
            "**/id_ecdsa_sk",
            "**/id_ed25519_sk",
            "**/.ssh/identity",
        ],
        why: "SSH private keys",
    },
    CredentialRule {
        id: "aws-credentials",
        patterns: &[
            "**/.aws/credentials",
            "**/.aws/sso/cache/**",
            "**/.aws/cli/cache/**",
        ],
        why: "AWS access keys and cached SSO session tokens",
    },
    CredentialRule {
        id: "docker-config",
        patterns: &["**/.docker/config.json"],
        why: "registry logins (base64 user:password or helper tokens)",
    },
    CredentialRule {
        id: "gcloud-credentials",
        patterns: &[
            "**/.config/gcloud/credentials.db",
            "**/.config/gcloud/access_tokens.db",
            "**/.config/gcloud/application_default_credentials.json",
            "**/.config/gcloud/legacy_credentials/**",
        ],
        why: "Google Cloud refresh and access tokens",
    },
    CredentialRule {
        id: "azure-credentials",
        patterns: &[
            "**/.azure/accessTokens.json",
            "**/.azure/msal_token_cache.json",
            "**/.azure/msal_token_cache.bin",
            "**/.azure/service_principal_entries.json",
        ],
        why: "Azure CLI tokens and service principal secrets",
    },
    CredentialRule {
        id: "kube-config",
        patterns: &["**/.kube/config"],
        why: "Kubernetes cluster credentials (client keys, bearer tokens)",
    },
    CredentialRule {
        id: "gh-hosts",
        patterns: &["**/.config/gh/hosts.yml"],
        why: "GitHub CLI OAuth tokens",
    },
    CredentialRule {
        id: "package-registry-tokens",
        patterns: &[
            "**/.npmrc",
            "**/.pypirc",
            "**/.cargo/credentials",
            "**/.cargo/credentials.toml",
            "**/.gem/credentials",
        ],
        why: "package registry publish tokens (npm, PyPI, crates.io, RubyGems)",
    },
    CredentialRule {
        id: "gnupg-private-keys",
        patterns: &["**/.gnupg/private-keys-v1.d/**", "**/.gnupg/secring.gpg"],
        why: "GnuPG secret keys",
    },
];

/// The credential rule that matches a path relative to its root, if any.
///
/// Every member of every packet goes through here, so the patterns are
/// classified once, at compile time ([`CREDENTIAL_MATCHERS`]), and a path
/// is first compared on its last component, which rejects almost every
/// path without looking further.
pub fn credential_rule(relative: &str) -> Option<&'static CredentialRule> {
    let name = last_component(relative);
    CREDENTIAL_MATCHERS
        .iter()
        .find(|(_, shape)| match *shape {
            Shape::Tail {
                literal,
                name: tail,
            } => quick_eq(name, tail) && ends_with_components(relative, literal),
            Shape::Within(inner) => within_components(relative, inner),
            Shape::Exact(literal) => quick_eq(relative, literal),
            Shape::Glob(pattern) => match_components(Some(pattern), Some(relative)),
        })
        .map(|&(rule, _)| &CREDENTIAL_RULES[rule])
}

/// `a == b`, deciding on the length and the first byte when they differ,
/// as they do for nearly every path and credential pattern.
fn quick_eq(a: &str, b: &str) -> bool {
    a.len() == b.len() && a.as_bytes().first() == b.as_bytes().first() && a == b
}

/// Every credential pattern with the index of its rule, in rule order.
static CREDENTIAL_MATCHERS: [(usize, Shape<'static>); CREDENTIAL_PATTERNS] = {
    let mut out = [(0, Shape::Glob("")); CREDENTIAL_PATTERNS];
    let (mut rule, mut n) = (0, 0);
    while rule < CREDENTIAL_RULES.len() {
        let patterns = CREDENTIAL_RULES[rule].patterns;
        let mut i = 0;
        while i < patterns.len() {
            let shape = shape(patterns[i]);
            out[n] = (rule, shape);
            n += 1;
            i += 1;
        }
        rule += 1;
    }
    out
};

/// How many patterns the credential rules hold in all.
const CREDENTIAL_PATTERNS: usize = {
    let (mut rule, mut n) = (0, 0);
    while rule < CREDENTIAL_RULES.len() {
        n += CREDENTIAL_RULES[rule].patterns.len();
        rule += 1;
    }
    n
};

/// What matching a pattern takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Shape<'a> {
    /// `**/<literal>` without wildcards: the path's last components are
    /// the literal's. `name` is the literal's last component.
    Tail { literal: &'a str, name: &'a str },
    /// `**/<inner>/**` without wildcards in `inner`: the literal's
    /// components appear, in a row, somewhere in the path.
    Within(&'a str),
    /// No wildcards at all: the path is the pattern.
    Exact(&'a str),
    /// Anything else, matched component by component (already trimmed of
    /// leading and trailing `/`).
    Glob(&'a str),
}

/// Classifies a pattern (see [`Shape`]). A `const fn` so that the
/// credential patterns are classified at compile time.
const fn shape(pattern: &str) -> Shape<'_> {
    let pattern = trim_slashes(pattern);
    let Some(literal) = strip_prefix(pattern, "**/") else {
        // Without wildcards each component matches only itself.
        return if has_wildcard(pattern) {
            Shape::Glob(pattern)
        } else {
            Shape::Exact(pattern)
        };
    };
    if !has_wildcard(literal) {
        let name = match last_slash(literal) {
            Some(at) => literal.split_at(at + 1).1,
            None => literal,
        };
        return Shape::Tail { literal, name };
    }
    if let Some(inner) = strip_suffix(literal, "/**") {
        if !has_wildcard(inner) {
            return Shape::Within(inner);
        }
    }
    Shape::Glob(pattern)
}

/// Whether a glob pattern (see the module docs) matches a relative path.
pub fn glob_match(pattern: &str, path: &str) -> bool {
    match shape(pattern) {
        // Most credential patterns are `**/` then literal components: the
        // path's last components are those, which needs no component walk.
        Shape::Tail { literal, .. } => ends_with_components(path, literal),
        // `**/<literal>/**`: the literal components anywhere in the path.
        Shape::Within(inner) => within_components(path, inner),
        Shape::Exact(literal) => path == literal,
        Shape::Glob(pattern) => match_components(Some(pattern), Some(path)),
    }
}

/// The last `/`-separated component of a path.
fn last_component(path: &str) -> &str {
    match path.as_bytes().iter().rposition(|&b| b == b'/') {
        Some(at) => &path[at + 1..],
        None => path,
    }
}

/// Whether `inner`'s components appear, in a row, in `path`: whether
/// `inner` occurs in `path` starting where a component starts and ending
/// where one ends.
fn within_components(path: &str, inner: &str) -> bool {
    let (path, inner) = (path.as_bytes(), inner.as_bytes());
    let mut start = 0;
    loop {
        let rest = &path[start..];
        // The first byte alone rules out nearly every component.
        if rest.first() == inner.first()
            && rest.starts_with(inner)
            && rest.get(inner.len()).is_none_or(|&b| b == b'/')
        {
            return true;
        }
        match rest.iter().position(|&b| b == b'/') {
            Some(slash) => start += slash + 1,
            None => return false,
        }
    }
}

/// Whether the last components of `path` are those of `literal`.
fn ends_with_components(path: &str, literal: &str) -> bool {
    path == literal
        || path
            .strip_suffix(literal)
            .is_some_and(|head| head.ends_with('/'))
}

/// The first `/`-separated component of `s` and the rest. `None` stands for
/// no components at all; `Some(s)` for the components of `s.split('/')`
/// (at least one, possibly empty). Walking the strings in place rather
/// than collecting components keeps matching free of allocation: every
/// member of every packet is matched against every credential pattern.
fn split_first(s: Option<&str>) -> Option<(&str, Option<&str>)> {
    s.map(|s| match s.split_once('/') {
        Some((first, rest)) => (first, Some(rest)),
        None => (s, None),
    })
}

fn match_components(pat: Option<&str>, comps: Option<&str>) -> bool {
    match split_first(pat) {
        None => comps.is_none(),
        Some(("**", rest)) => {
            // `**` stands for any number of components, none included.
            let mut at = comps;
            loop {
                if match_components(rest, at) {
                    return true;
                }
                match split_first(at) {
                    Some((_, next)) => at = next,
                    None => return false,
                }
            }
        }
        Some((first, rest)) => match split_first(comps) {
            Some((c, crest)) => {
                match_one(first.as_bytes(), c.as_bytes()) && match_components(rest, crest)
            }
            None => false,
        },
    }
}

/// `*` and `?` within one component, iteratively (no exponential blow-up).
fn match_one(pat: &[u8], s: &[u8]) -> bool {
    let (mut p, mut i) = (0, 0);
    let (mut star, mut mark) = (None, 0);
    while i < s.len() {
        if p < pat.len() && (pat[p] == b'?' || pat[p] == s[i]) {
            p += 1;
            i += 1;
        } else if p < pat.len() && pat[p] == b'*' {
            star = Some(p);
            mark = i;
            p += 1;
        } else if let Some(sp) = star {
            p = sp + 1;
            mark += 1;
            i = mark;
        } else {
            return false;
        }
    }
    pat[p..].iter().all(|&c| c == b'*')
}

// The helpers below work on bytes at ASCII `/`, `*` and `?` positions,
// which are always character boundaries, and are `const fn` for `shape`.

const fn trim_slashes(s: &str) -> &str {
    let b = s.as_bytes();
    let (mut start, mut end) = (0, b.len());
    while start < end && b[start] == b'/' {
        start += 1;
    }
    while end > start && b[end - 1] == b'/' {
        end -= 1;
    }
    s.split_at(end).0.split_at(start).1
}

const fn strip_prefix<'a>(s: &'a str, prefix: &str) -> Option<&'a str> {
    if s.len() < prefix.len() {
        return None;
    }
    let (head, tail) = s.split_at(prefix.len());
    if bytes_eq(head.as_bytes(), prefix.as_bytes()) {
        Some(tail)
    } else {
        None
    }
}

const fn strip_suffix<'a>(s: &'a str, suffix: &str) -> Option<&'a str> {
    if s.len() < suffix.len() {
        return None;
    }
    let (head, tail) = s.split_at(s.len() - suffix.len());
    if bytes_eq(tail.as_bytes(), suffix.as_bytes()) {
        Some(head)
    } else {
        None
    }
}

const fn bytes_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

const fn has_wildcard(s: &str) -> bool {
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'*' || b[i] == b'?' {
            return true;
        }
        i += 1;
    }
    false
}

const fn last_slash(s: &str) -> Option<usize> {
    let b = s.as_bytes();
    let mut i = b.len();
    while i > 0 {
        i -= 1;
        if b[i] == b'/' {
            return Some(i);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs() {
        assert!(glob_match("**/.netrc", ".netrc"));
        assert!(glob_match("**/.netrc", "a/b/.netrc"));
        assert!(!glob_match("**/.netrc", "a/.netrc.bak"));
        assert!(glob_match("*.log", "x.log"));
        assert!(!glob_match("*.log", "d/x.log"));
        assert!(glob_match("**/*.log", "d/x.log"));
        assert!(glob_match("target/**", "target/debug/x"));
        assert!(glob_match("a?c", "abc"));
        assert!(!glob_match("a?c", "ac"));
    }

    /// The matcher as first specified: components collected, then matched.
    fn reference(pattern: &str, path: &str) -> bool {
        fn go(pat: &[&str], comps: &[&str]) -> bool {
            match pat.split_first() {
                None => comps.is_empty(),
                Some((&"**", rest)) => (0..=comps.len()).any(|skip| go(rest, &comps[skip..])),
                Some((first, rest)) => match comps.split_first() {
                    Some((c, crest)) => {
                        match_one(first.as_bytes(), c.as_bytes()) && go(rest, crest)
                    }
                    None => false,
                },
            }
        }
        let pat: alloc::vec::Vec<&str> = pattern.trim_matches('/').split('/').collect();
        let comps: alloc::vec::Vec<&str> = path.split('/').collect();
        go(&pat, &comps)
    }

    #[test]
    fn globs_match_as_the_component_reference_does() {
        let mut patterns: alloc::vec::Vec<&str> = alloc::vec![
            "",
            "/",
            "**",
            "**/**",
            "a/**",
            "**/a",
            "a/**/b",
            "*",
            "*/",
            "/a/",
            "a*",
            "?",
            "a//b",
            "**/x/**/y",
            "*.log",
            "**/*.log",
            "target/**",
            "a?c",
        ];
        for rule in CREDENTIAL_RULES {
            patterns.extend_from_slice(rule.patterns);
        }
        let paths = [
            "",
            "a",
            "b",
            "a/b",
            "a/a/b",
            "a/x/b",
            "x/a",
            "a//b",
            "a/",
            "/a",
            "x/y",
            "x/z/y",
            "q/x/r/y/s",
            "d/x.log",
            "x.log",
            "target",
            "target/debug/x",
            "abc",
            "ac",
            ".netrc",
            "h/.codex/auth.json",
            "codex/auth.json",
            ".aws/sso/cache/t.json",
            ".aws/sso/cache",
            "n/.config/gcloud/legacy_credentials/k",
        ];
        for p in &patterns {
            for path in &paths {
                assert_eq!(
                    glob_match(p, path),
                    reference(p, path),
                    "{p:?} against {path:?}"
                );
            }
        }
    }

    #[test]
    fn credential_rule_agrees_with_matching_each_pattern() {
        let by_pattern = |matches: fn(&str, &str) -> bool, path: &str| {
            CREDENTIAL_RULES
                .iter()
                .find(|rule| rule.patterns.iter().any(|p| matches(p, path)))
                .map(|rule| rule.id)
        };
        let mut paths: alloc::vec::Vec<alloc::string::String> = alloc::vec::Vec::new();
        for rule in CREDENTIAL_RULES {
            for pattern in rule.patterns {
                let literal = pattern.trim_start_matches("**/").trim_end_matches("/**");
                for variant in [
                    alloc::string::String::from(literal),
                    alloc::format!("a/{literal}"),
                    alloc::format!("a/b/{literal}/c"),
                    alloc::format!("{literal}/c/d"),
                    alloc::format!("x{literal}"),
                    alloc::format!("a/x{literal}"),
                    alloc::format!("{literal}x"),
                    alloc::format!("{literal}x/y"),
                    alloc::format!("a/{literal}.bak"),
                    alloc::string::String::from(&literal[1..]),
                    alloc::string::String::from(&literal[..literal.len() - 1]),
                ] {
                    paths.push(variant);
                }
            }
        }
        paths.extend(
            [
                "",
                "a",
                "a/",
                "/",
                "//",
                "src/main.rs",
                "codex/auth.json/x",
                "x/codex/auth.json",
            ]
            .map(alloc::string::String::from),
        );
        for path in &paths {
            let found = credential_rule(path).map(|rule| rule.id);
            assert_eq!(found, by_pattern(glob_match, path), "{path:?}");
            assert_eq!(found, by_pattern(reference, path), "{path:?}");
        }
    }

    #[test]
    fn within_finds_what_the_component_reference_finds() {
        for (_, shape) in &CREDENTIAL_MATCHERS {
            let Shape::Within(inner) = *shape else {
                continue;
            };
            let pattern = alloc::format!("**/{inner}/**");
            for path in [
                alloc::string::String::from(inner),
                alloc::format!("{inner}/"),
                alloc::format!("/{inner}"),
                alloc::format!("a/{inner}/b"),
                alloc::format!("a{inner}/b"),
                alloc::format!("a/{inner}b"),
                alloc::format!("{inner}{inner}"),
                alloc::format!("{inner}/{inner}"),
                alloc::format!("x{inner}/{inner}"),
            ] {
                assert_eq!(
                    within_components(&path, inner),
                    reference(&pattern, &path),
                    "{inner:?} in {path:?}"
                );
            }
        }
    }

    #[test]
    fn within_patterns_find_overlapping_literals() {
        // Every place a component starts is tried, so a literal that can
        // overlap itself is found wherever it occurs.
        for (pattern, path) in [
            ("**/a/a/**", "xa/a/a"),
            ("**/a/a/**", "a/a/a"),
            ("**/aa/**", "aaa/aa"),
            ("**/ab/ab/**", "x/ab/ab/ab"),
            ("**/a/a/**", "a/xa/a"),
            ("**/a/a/**", "ba/a"),
        ] {
            assert_eq!(
                glob_match(pattern, path),
                reference(pattern, path),
                "{pattern} {path}"
            );
        }
        assert!(glob_match("**/a/a/**", "xa/a/a"));
    }

    #[test]
    fn credential_rules_match_where_they_should() {
        let id = |p: &str| credential_rule(p).map(|r| r.id);
        assert_eq!(id("codex/auth.json"), Some("codex-auth"));
        assert_eq!(id("home/.codex/auth.json"), Some("codex-auth"));
        assert_eq!(id(".local/share/opencode/auth.json"), Some("opencode-auth"));
        assert_eq!(id("x/opencode.db-wal"), Some("opencode-db"));
        assert_eq!(id(".ssh/id_ed25519"), Some("ssh-private-key"));
        assert_eq!(id(".ssh/id_ed25519.pub"), None);
        assert_eq!(id(".aws/credentials"), Some("aws-credentials"));
        assert_eq!(id("src/auth.json"), None);
        assert_eq!(id("README.md"), None);
    }
}
