//! Credentials in git configuration files: a token in a remote URL
//! (`https://x-access-token:<token>@github.com/...`) or an Authorization
//! header in `http.extraheader`, as CI checkouts write them. These are
//! checked in configuration files only: elsewhere a URL with a password
//! is far more often an example than a credential.

use alloc::vec::Vec;

use super::rules::{GIT_HEADER, GIT_URL};
use super::Finding;
use crate::git;

/// Whether a path below its root is a git configuration file: a
/// repository's (see [`git::is_repository_config`]) or a user's
/// (`.gitconfig`, `.config/git/config`).
pub(crate) fn is_git_config(relative: &str) -> bool {
    let lower = |s: &str| s.eq_ignore_ascii_case(relative) || ends_with_component(relative, s);
    git::is_repository_config(relative) || lower(".gitconfig") || lower(".config/git/config")
}

fn ends_with_component(path: &str, tail: &str) -> bool {
    let (path, tail) = (path.as_bytes(), tail.as_bytes());
    path.len() > tail.len()
        && path[path.len() - tail.len() - 1] == b'/'
        && path[path.len() - tail.len()..].eq_ignore_ascii_case(tail)
}

/// The credentials in a whole configuration file.
pub(super) fn credentials(config: &[u8]) -> Vec<Finding> {
    git::credential_lines(config)
        .into_iter()
        .map(|(line, header)| Finding {
            rule: if header { GIT_HEADER } else { GIT_URL },
            line: line as u64 + 1,
        })
        .collect()
}
