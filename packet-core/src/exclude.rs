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
pub fn credential_rule(relative: &str) -> Option<&'static CredentialRule> {
    CREDENTIAL_RULES
        .iter()
        .find(|rule| rule.patterns.iter().any(|p| glob_match(p, relative)))
}

/// Whether a glob pattern (see the module docs) matches a relative path.
pub fn glob_match(pattern: &str, path: &str) -> bool {
    let pattern = pattern.trim_matches('/');
    // Most credential patterns are `**/` then literal components: the
    // path's last components are those, which needs no component walk.
    if let Some(literal) = pattern.strip_prefix("**/") {
        if !literal.contains(['*', '?']) {
            return ends_with_components(path, literal);
        }
        // `**/<literal>/**`: the literal components anywhere in the path.
        if let Some(inner) = literal.strip_suffix("/**") {
            if !inner.contains(['*', '?']) {
                return path.match_indices(inner).any(|(at, _)| {
                    let before = &path[..at];
                    let after = &path[at + inner.len()..];
                    (before.is_empty() || before.ends_with('/'))
                        && (after.is_empty() || after.starts_with('/'))
                });
            }
        }
    }
    match_components(Some(pattern), Some(path))
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
