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
    /// Paths the patterns match that the rule leaves alone (templates
    /// such as `.env.example`).
    pub except: &'static [&'static str],
    /// Why the file is a credential.
    pub why: &'static str,
    /// What a reader does with a packet that holds such a file.
    pub in_packet: InPacket,
}

/// What a reader does with a packet that holds a file a credential rule
/// matches (docs/session-packet.md §7.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InPacket {
    /// The file is unambiguously a credential: the packet is refused
    /// (`credential_in_packet`).
    Refused,
    /// The file often holds credentials but may be ordinary
    /// configuration, and packets made before the rule may hold it: the
    /// packet is read, and the file reported.
    Reported,
}

const fn rule(
    id: &'static str,
    patterns: &'static [&'static str],
    why: &'static str,
) -> CredentialRule {
    CredentialRule {
        id,
        patterns,
        except: &[],
        why,
        in_packet: InPacket::Refused,
    }
}

const fn reported(
    id: &'static str,
    patterns: &'static [&'static str],
    why: &'static str,
) -> CredentialRule {
    CredentialRule {
        in_packet: InPacket::Reported,
        ..rule(id, patterns, why)
    }
}

/// The credential rules. Packing excludes every match; reading refuses a
/// packet that holds a match of a [`InPacket::Refused`] rule (as a file or
/// a symlink) and reports the others. No flag re-includes them. Paths
/// match without regard to ASCII case, and non-ASCII paths by their
/// portable key ([`crate::path::portable_key`]): on the file systems that
/// ignore case, `.NETRC` is `.netrc`.
pub const CREDENTIAL_RULES: &[CredentialRule] = &[
    rule(
        "codex-auth",
        &["**/.codex/auth.json", "codex/auth.json"],
        "Codex CLI's login: API key or ChatGPT OAuth tokens",
    ),
    rule(
        "claude-credentials",
        &["**/.credentials.json"],
        "Claude Code's OAuth tokens on Linux",
    ),
    rule(
        "opencode-auth",
        &["**/opencode/auth.json"],
        "OpenCode's provider API keys",
    ),
    rule(
        "opencode-db",
        &[
            "**/opencode.db",
            "**/opencode.db-wal",
            "**/opencode.db-shm",
            "**/opencode.db-journal",
        ],
        "OpenCode's database, which stores credentials beside sessions; its SQLite sidecars hold the same pages",
    ),
    rule(
        "git-credentials",
        &["**/.git-credentials", "**/.config/git/credentials"],
        "git's credential store: plain-text tokens and passwords",
    ),
    rule(
        "netrc",
        &["**/.netrc", "**/_netrc"],
        "machine logins and passwords used by curl, git and ftp",
    ),
    rule(
        "ssh-private-key",
        &[
            "**/id_rsa",
            "**/id_dsa",
            "**/id_ecdsa",
            "**/id_ed25519",
            "**/id_ecdsa_sk",
            "**/id_ed25519_sk",
            "**/.ssh/identity",
        ],
        "SSH private keys",
    ),
    rule(
        "aws-credentials",
        &[
            "**/.aws/credentials",
            "**/.aws/sso/cache/**",
            "**/.aws/cli/cache/**",
        ],
        "AWS access keys and cached SSO session tokens",
    ),
    rule(
        "docker-config",
        &["**/.docker/config.json"],
        "registry logins (base64 user:password or helper tokens)",
    ),
    rule(
        "gcloud-credentials",
        &[
            "**/.config/gcloud/credentials.db",
            "**/.config/gcloud/access_tokens.db",
            "**/.config/gcloud/application_default_credentials.json",
            "**/.config/gcloud/legacy_credentials/**",
        ],
        "Google Cloud refresh and access tokens",
    ),
    rule(
        "azure-credentials",
        &[
            "**/.azure/accessTokens.json",
            "**/.azure/msal_token_cache.json",
            "**/.azure/msal_token_cache.bin",
            "**/.azure/service_principal_entries.json",
        ],
        "Azure CLI tokens and service principal secrets",
    ),
    rule(
        "kube-config",
        &["**/.kube/config"],
        "Kubernetes cluster credentials (client keys, bearer tokens)",
    ),
    rule(
        "gh-hosts",
        &["**/.config/gh/hosts.yml"],
        "GitHub CLI OAuth tokens",
    ),
    rule(
        "package-registry-tokens",
        &[
            "**/.npmrc",
            "**/.pypirc",
            "**/.cargo/credentials",
            "**/.cargo/credentials.toml",
            "**/.gem/credentials",
        ],
        "package registry publish tokens (npm, PyPI, crates.io, RubyGems)",
    ),
    rule(
        "gnupg-private-keys",
        &["**/.gnupg/private-keys-v1.d/**", "**/.gnupg/secring.gpg"],
        "GnuPG secret keys",
    ),
    rule(
        "vault-token",
        &["**/.vault-token"],
        "HashiCorp Vault's login token",
    ),
    rule(
        "pgpass",
        &["**/.pgpass"],
        "PostgreSQL client passwords",
    ),
    rule(
        "terraform-credentials",
        &["**/.terraform.d/credentials.tfrc.json"],
        "Terraform Cloud and Enterprise API tokens",
    ),
    rule(
        "composer-auth",
        &["**/.composer/auth.json", "**/.config/composer/auth.json"],
        "Composer's registry passwords and GitHub, GitLab and Bitbucket tokens",
    ),
    rule(
        "hub-config",
        &["**/.config/hub"],
        "the hub CLI's GitHub OAuth token",
    ),
    rule(
        "s3cmd-config",
        &["**/.s3cfg"],
        "s3cmd's access and secret keys",
    ),
    CredentialRule {
        except: &[
            "**/.env.example",
            "**/.env.sample",
            "**/.env.template",
            "**/.env.dist",
            "**/.env.defaults",
        ],
        ..reported(
            "env-file",
            &["**/.env", "**/.env.*", "**/.envrc"],
            "environment files (.env, .env.local, direnv's .envrc): API keys and database passwords by convention; templates such as .env.example are packed",
        )
    },
    reported(
        "yarnrc",
        &["**/.yarnrc.yml"],
        "Yarn's settings, which hold npmAuthToken and npmAuthIdent registry logins",
    ),
    reported(
        "aws-config",
        &["**/.aws/config"],
        "AWS CLI profiles, which may hold access keys and credential_process commands",
    ),
    reported(
        "mysql-config",
        &["**/.my.cnf"],
        "MySQL client settings, which hold passwords",
    ),
    reported(
        "boto-config",
        &["**/.boto"],
        "boto and gsutil settings, which hold AWS keys and Google OAuth refresh tokens",
    ),
    reported(
        "maven-settings",
        &["**/.m2/settings.xml", "**/.m2/settings-security.xml"],
        "Maven's user settings: repository passwords and the master password",
    ),
    reported(
        "gradle-user-properties",
        &["**/.gradle/gradle.properties"],
        "Gradle's user-wide properties, where publishing and signing credentials go (a project's own gradle.properties is packed and checked by content)",
    ),
    reported(
        "pip-config",
        &["**/pip.conf", "**/pip.ini"],
        "pip's settings, whose index URLs may carry passwords",
    ),
    reported(
        "opencode-config",
        &[
            "**/.config/opencode/opencode.json",
            "**/.config/opencode/opencode.jsonc",
        ],
        "OpenCode's user settings, which may hold provider API keys",
    ),
];

/// The credential rule that matches a path relative to its root, if any.
///
/// Every member of every packet goes through here, so the patterns are
/// classified once, at compile time ([`CREDENTIAL_MATCHERS`]), and a path
/// is first compared on its last component, which rejects almost every
/// path without looking further.
pub fn credential_rule(relative: &str) -> Option<&'static CredentialRule> {
    credential_match(relative).map(|(rule, _)| rule)
}

/// [`credential_rule`], with the pattern that matched.
pub fn credential_match(relative: &str) -> Option<(&'static CredentialRule, &'static str)> {
    if relative.is_ascii() {
        return find_credential(relative);
    }
    // The key folds what case-insensitive file systems fold; it is ASCII
    // wherever a credential pattern could match.
    find_credential(&crate::path::portable_key(relative))
}

fn find_credential(relative: &str) -> Option<(&'static CredentialRule, &'static str)> {
    let name = last_component(relative);
    let mut found = CREDENTIAL_MATCHERS
        .iter()
        .filter(|(_, _, shape)| match *shape {
            Shape::Tail {
                literal,
                name: tail,
            } => quick_eq(name, tail) && ends_with_components(relative, literal, true),
            Shape::Within(inner) => within_components(relative, inner, true),
            Shape::Exact(literal) => quick_eq(relative, literal),
            Shape::Name(glob) => match_one(glob.as_bytes(), name.as_bytes(), true),
            Shape::Glob(pattern) => match_components(Some(pattern), Some(relative), true),
        });
    found.find_map(|&(rule, pattern, _)| {
        let rule = &CREDENTIAL_RULES[rule];
        let excepted = rule.except.iter().any(|e| matches_folded(e, relative));
        (!excepted).then_some((rule, pattern))
    })
}

/// Whether a pattern matches a path without regard to ASCII case.
fn matches_folded(pattern: &str, path: &str) -> bool {
    match shape(pattern) {
        Shape::Tail { literal, .. } => ends_with_components(path, literal, true),
        Shape::Within(inner) => within_components(path, inner, true),
        Shape::Exact(literal) => path.eq_ignore_ascii_case(literal),
        Shape::Name(glob) => match_one(glob.as_bytes(), last_component(path).as_bytes(), true),
        Shape::Glob(pattern) => match_components(Some(pattern), Some(path), true),
    }
}

/// `a == b` without regard to ASCII case, deciding on the length and the
/// first byte when they differ, as they do for nearly every path and
/// credential pattern.
fn quick_eq(a: &str, b: &str) -> bool {
    let first = |s: &str| s.as_bytes().first().map(u8::to_ascii_lowercase);
    a.len() == b.len() && first(a) == first(b) && a.eq_ignore_ascii_case(b)
}

/// Every credential pattern with the index of its rule, in rule order.
static CREDENTIAL_MATCHERS: [(usize, &str, Shape<'static>); CREDENTIAL_PATTERNS] = {
    let mut out = [(0, "", Shape::Glob("")); CREDENTIAL_PATTERNS];
    let (mut rule, mut n) = (0, 0);
    while rule < CREDENTIAL_RULES.len() {
        let patterns = CREDENTIAL_RULES[rule].patterns;
        let mut i = 0;
        while i < patterns.len() {
            let shape = shape(patterns[i]);
            out[n] = (rule, patterns[i], shape);
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
    /// `**/<name glob>` with wildcards in one component: the path's last
    /// component matches it (`**/.env.*`).
    Name(&'a str),
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
    if last_slash(literal).is_none() && !is_double_star(literal) {
        return Shape::Name(literal);
    }
    Shape::Glob(pattern)
}

const fn is_double_star(s: &str) -> bool {
    bytes_eq(s.as_bytes(), b"**")
}

/// Whether a glob pattern (see the module docs) matches a relative path.
pub fn glob_match(pattern: &str, path: &str) -> bool {
    match shape(pattern) {
        // Most credential patterns are `**/` then literal components: the
        // path's last components are those, which needs no component walk.
        Shape::Tail { literal, .. } => ends_with_components(path, literal, false),
        // `**/<literal>/**`: the literal components anywhere in the path.
        Shape::Within(inner) => within_components(path, inner, false),
        Shape::Exact(literal) => path == literal,
        Shape::Name(glob) => match_one(glob.as_bytes(), last_component(path).as_bytes(), false),
        Shape::Glob(pattern) => match_components(Some(pattern), Some(path), false),
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
/// where one ends. `fold` ignores ASCII case.
fn within_components(path: &str, inner: &str, fold: bool) -> bool {
    let (path, inner) = (path.as_bytes(), inner.as_bytes());
    let mut start = 0;
    loop {
        let rest = &path[start..];
        // The first byte alone rules out nearly every component.
        let first = |s: &[u8]| {
            s.first()
                .map(|b| if fold { b.to_ascii_lowercase() } else { *b })
        };
        if first(rest) == first(inner)
            && rest.len() >= inner.len()
            && bytes_match(&rest[..inner.len()], inner, fold)
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

/// Whether the last components of `path` are those of `literal`; `fold`
/// ignores ASCII case.
fn ends_with_components(path: &str, literal: &str, fold: bool) -> bool {
    let (path, literal) = (path.as_bytes(), literal.as_bytes());
    path.len() >= literal.len()
        && bytes_match(&path[path.len() - literal.len()..], literal, fold)
        && (path.len() == literal.len() || path[path.len() - literal.len() - 1] == b'/')
}

/// `a == b`, without regard to ASCII case when `fold`.
fn bytes_match(a: &[u8], b: &[u8], fold: bool) -> bool {
    if fold {
        a.eq_ignore_ascii_case(b)
    } else {
        a == b
    }
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

fn match_components(pat: Option<&str>, comps: Option<&str>, fold: bool) -> bool {
    match split_first(pat) {
        None => comps.is_none(),
        Some(("**", rest)) => {
            // `**` stands for any number of components, none included.
            let mut at = comps;
            loop {
                if match_components(rest, at, fold) {
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
                match_one(first.as_bytes(), c.as_bytes(), fold)
                    && match_components(rest, crest, fold)
            }
            None => false,
        },
    }
}

/// `*` and `?` within one component, iteratively (no exponential
/// blow-up); `fold` ignores ASCII case.
fn match_one(pat: &[u8], s: &[u8], fold: bool) -> bool {
    let (mut p, mut i) = (0, 0);
    let (mut star, mut mark) = (None, 0);
    let same = |a: u8, b: u8| a == b || (fold && a.eq_ignore_ascii_case(&b));
    while i < s.len() {
        if p < pat.len() && (pat[p] == b'?' || same(pat[p], s[i])) {
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
                        match_one(first.as_bytes(), c.as_bytes(), false) && go(rest, crest)
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
                .find(|rule| {
                    rule.patterns.iter().any(|p| matches(p, path))
                        && !rule.except.iter().any(|p| matches(p, path))
                })
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
                ".env.example",
                "app/.env.local",
                "app/.env.sample",
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
        for (_, _, shape) in &CREDENTIAL_MATCHERS {
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
                    within_components(&path, inner, false),
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
        assert_eq!(id(".env"), Some("env-file"));
        assert_eq!(id("web/.env.production.local"), Some("env-file"));
        assert_eq!(id("web/.env.example"), None);
        assert_eq!(id(".environment"), None);
        assert_eq!(id("gradle.properties"), None);
        assert_eq!(
            id("home/.gradle/gradle.properties"),
            Some("gradle-user-properties")
        );
        assert_eq!(id(".local/share/opencode/auth.json"), Some("opencode-auth"));
        assert_eq!(
            id(".config/opencode/opencode.json"),
            Some("opencode-config")
        );
    }

    #[test]
    fn credential_rules_ignore_case_as_case_insensitive_file_systems_do() {
        let id = |p: &str| credential_rule(p).map(|r| r.id);
        assert_eq!(id(".NETRC"), Some("netrc"));
        assert_eq!(id("Home/.SSH/ID_RSA"), Some("ssh-private-key"));
        assert_eq!(id(".azure/ACCESSTOKENS.JSON"), Some("azure-credentials"));
        assert_eq!(id(".AWS/SSO/Cache/t.json"), Some("aws-credentials"));
        assert_eq!(id("app/.ENV.Local"), Some("env-file"));
        assert_eq!(id("app/.ENV.EXAMPLE"), None);
        // The Kelvin sign folds to k, a zero-width joiner disappears: on
        // APFS both name .kube/config.
        assert_eq!(id(".\u{212a}ube/config"), Some("kube-config"));
        assert_eq!(id(".ku\u{200d}be/config"), Some("kube-config"));
        // User patterns keep their case.
        assert!(!glob_match("**/.netrc", ".NETRC"));
    }
}
