//! Member paths: canonical form, roots, order, symlink targets and
//! cross-platform collisions (docs/session-packet.md, "Paths" and "Order").

use alloc::string::String;
use alloc::vec::Vec;
use core::cmp::Ordering;

use unicode_normalization::UnicodeNormalization;

use crate::error::{Error, ErrorCode};
use crate::scan;

/// The manifest's member path; always the first member.
pub const MANIFEST_PATH: &str = "packet.json";

/// The root under which the agent's workspace lives.
pub const WORKSPACE_ROOT: &str = "workspace";

/// The root under which harness state (e.g. a Codex rollout) lives.
pub const HARNESS_ROOT: &str = "harness";

/// Which of the two roots a member lies in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Root {
    /// `workspace/`
    Workspace,
    /// `harness/`
    Harness,
}

impl Root {
    /// The root directory's member path.
    pub const fn as_str(self) -> &'static str {
        match self {
            Root::Workspace => WORKSPACE_ROOT,
            Root::Harness => HARNESS_ROOT,
        }
    }

    /// The part of `path` below this root (`src/main.rs` for
    /// `workspace/src/main.rs` below [`Root::Workspace`]); `None` for the
    /// root itself and for a path outside it. Unlike
    /// [`MemberPath::relative`], it says which root the path lies in, and
    /// it reads any text (a path found on disk is not checked yet).
    pub fn below(self, path: &str) -> Option<&str> {
        below(self.as_str(), path)
    }

    /// The path of `relative` below this root, as text, unchecked (the
    /// inverse of [`Root::below`]; [`MemberPath::join`] checks).
    pub fn member_path(self, relative: &str) -> String {
        member_below(self.as_str(), relative)
    }
}

/// The part of `path` below the folder `folder` (a member path), if it
/// lies below it: text only, nothing checked.
pub(crate) fn below<'a>(folder: &str, path: &'a str) -> Option<&'a str> {
    path.strip_prefix(folder)?.strip_prefix('/')
}

/// The path of `relative` below the folder `folder`, unchecked: the
/// inverse of [`below`].
pub(crate) fn member_below(folder: &str, relative: &str) -> String {
    alloc::format!("{folder}/{relative}")
}

/// The root a canonical path lies in (a root is in itself), if any.
pub fn root_of(path: &str) -> Option<Root> {
    // The first component is `root` when the path is `root` or `root/...`.
    let first_is = |root: &str| {
        path.strip_prefix(root)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
    };
    if first_is(WORKSPACE_ROOT) {
        Some(Root::Workspace)
    } else if first_is(HARNESS_ROOT) {
        Some(Root::Harness)
    } else {
        None
    }
}

/// The parent of a canonical path (`None` for a single component).
pub fn parent(path: &str) -> Option<&str> {
    path.rfind('/').map(|i| &path[..i])
}

/// The last component of a canonical path.
pub fn file_name(path: &str) -> &str {
    path.rfind('/').map_or(path, |i| &path[i + 1..])
}

/// The format's member order: paths compared component by component, each
/// component bytewise. Equivalently, bytewise with `/` sorting below every
/// other byte. A directory is immediately followed by its whole subtree.
pub fn compare(a: &str, b: &str) -> Ordering {
    let key = |c: u8| if c == b'/' { 0u8 } else { c };
    let (a, b) = (a.as_bytes(), b.as_bytes());
    // Equal bytes have equal keys: skip them in bulk, then compare keys
    // where the bytes differ (`/` and NUL differ but share a key).
    let mut at = 0;
    loop {
        at += common_prefix_len(&a[at..], &b[at..]);
        match (a.get(at), b.get(at)) {
            (Some(&x), Some(&y)) => match key(x).cmp(&key(y)) {
                Ordering::Equal => at += 1,
                other => return other,
            },
            _ => return a.len().cmp(&b.len()),
        }
    }
}

/// The number of leading bytes `a` and `b` share.
fn common_prefix_len(a: &[u8], b: &[u8]) -> usize {
    const CHUNK: usize = 16;
    let chunks = a
        .chunks_exact(CHUNK)
        .zip(b.chunks_exact(CHUNK))
        .take_while(|(x, y)| x == y)
        .count();
    let at = chunks * CHUNK;
    at + a[at..]
        .iter()
        .zip(&b[at..])
        .take_while(|(x, y)| x == y)
        .count()
}

/// Whether `s` holds a C0, DEL or C1 control character. Read as bytes:
/// C0 and DEL are themselves, C1 (U+0080 to U+009F) is `C2 80` to `C2 9F`,
/// and in UTF-8 a `C2` byte only ever starts a character.
fn has_control(s: &str) -> bool {
    let b = s.as_bytes();
    if !scan::any(b, |c| c < 0x20 || c == 0x7f || c == 0xc2) {
        return false;
    }
    b.iter().enumerate().any(|(i, &c)| {
        c < 0x20 || c == 0x7f || (c == 0xc2 && b.get(i + 1).is_some_and(|&n| n <= 0x9f))
    })
}

/// Checks that `bytes` is a canonical path of at most `max_len` bytes and
/// returns it as `&str`. Canonical: UTF-8, not empty, no leading or trailing
/// `/`, no empty, `.` or `..` component, no control character.
pub fn check_canonical(bytes: &[u8], max_len: usize) -> Result<&str, Error> {
    let path = core::str::from_utf8(bytes).map_err(|_| not_utf8(bytes))?;
    check_canonical_str(path, max_len)
}

/// The first rule of [`check_canonical`]: a path is UTF-8.
fn not_utf8(bytes: &[u8]) -> Error {
    Error::new(ErrorCode::PathNotUtf8, "path is not valid UTF-8")
        .at_path(String::from_utf8_lossy(bytes))
}

/// [`check_canonical`] for a path already known to be UTF-8.
fn check_canonical_str(path: &str, max_len: usize) -> Result<&str, Error> {
    check_length(path, max_len)?;
    if has_control(path) {
        return Err(Error::new(
            ErrorCode::PathControlChar,
            "path holds NUL or another control character",
        )
        .at_path(path));
    }
    if path.starts_with('/') {
        return Err(Error::new(ErrorCode::PathAbsolute, "path is absolute").at_path(path));
    }
    let not_canonical = path
        .as_bytes()
        .split(|&b| b == b'/')
        .any(|component| matches!(component, b"" | b"." | b".."));
    if not_canonical {
        return Err(Error::new(
            ErrorCode::PathNotCanonical,
            "path has an empty, \".\" or \"..\" component or a trailing \"/\"",
        )
        .at_path(path));
    }
    Ok(path)
}

/// Checks a member path (not the manifest): canonical and inside
/// `workspace` or `harness` (a root itself included).
pub fn check_member_path(bytes: &[u8], max_len: usize) -> Result<&str, Error> {
    let path = check_canonical(bytes, max_len)?;
    check_in_roots(path)
}

/// [`check_member_path`] for a path already known to be UTF-8.
fn check_member_path_str(path: &str, max_len: usize) -> Result<&str, Error> {
    let path = check_canonical_str(path, max_len)?;
    check_in_roots(path)
}

/// The first rule of [`check_canonical`]: at most `max_len` bytes.
fn check_length(path: &str, max_len: usize) -> Result<(), Error> {
    if path.len() > max_len {
        return Err(Error::new(
            ErrorCode::PathTooLong,
            alloc::format!("path is {} bytes, the limit is {max_len}", path.len()),
        )
        .at_path(truncate_for_display(path)));
    }
    Ok(())
}

fn check_in_roots(path: &str) -> Result<&str, Error> {
    if root_of(path).is_none() {
        return Err(Error::new(
            ErrorCode::PathOutsideRoots,
            "members live under \"workspace/\" or \"harness/\"",
        )
        .at_path(path));
    }
    Ok(path)
}

/// The longest member path the format allows (docs/session-packet.md §8).
const MAX_PATH_BYTES: usize = crate::limits::Limits::FORMAT.max_path_bytes;

/// A member path that follows every rule of docs/session-packet.md §2 on
/// its own: valid UTF-8, at most the format's 4096 bytes, canonical, free
/// of control characters, inside `workspace` or `harness`. It can only be
/// made through those rules ([`MemberPath::parse`], [`MemberPath::join`],
/// [`MemberPath::root`]), so whoever holds one need not check it again.
/// The rules between members (order, parents, collisions) and a reader's
/// tighter [`Limits`](crate::Limits) are the manifest's to check.
///
/// It reads as the `&str` it holds (`Deref`, `AsRef`, `Borrow`,
/// `Display`, comparisons with strings), and its JSON form is that string.
/// Its `Ord` is `str`'s, bytewise; the member order is [`compare`].
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct MemberPath(String);

impl MemberPath {
    /// Checks `path` against the rules (the first that fails is the
    /// error: `path_too_long`, `path_control_char`, `path_absolute`,
    /// `path_not_canonical`, `path_outside_roots`).
    pub fn parse(path: &str) -> Result<MemberPath, Error> {
        check_member_path_str(path, MAX_PATH_BYTES)?;
        Ok(MemberPath(String::from(path)))
    }

    /// [`MemberPath::parse`] of bytes, which must also be UTF-8
    /// (`path_not_utf8`): a name as a file system or a header gives it.
    pub fn from_bytes(bytes: &[u8]) -> Result<MemberPath, Error> {
        MemberPath::from_utf8(bytes.to_vec())
    }

    /// [`MemberPath::from_bytes`] of bytes it may keep.
    fn from_utf8(bytes: Vec<u8>) -> Result<MemberPath, Error> {
        let path = String::from_utf8(bytes).map_err(|e| not_utf8(e.as_bytes()))?;
        MemberPath::parse_within(path, MAX_PATH_BYTES)
    }

    /// [`MemberPath::parse`] of an owned string, with a limit that may be
    /// tighter than the format's (a reader's [`Limits`](crate::Limits)).
    pub(crate) fn parse_within(path: String, max_len: usize) -> Result<MemberPath, Error> {
        check_member_path_str(&path, max_len.min(MAX_PATH_BYTES))?;
        Ok(MemberPath(path))
    }

    /// A path written in the program, such as `"workspace"`: a literal
    /// that breaks the rules is a bug in the program, so it panics, as
    /// `http`'s `HeaderValue::from_static` does. Paths from anywhere else
    /// go through [`MemberPath::parse`].
    #[track_caller]
    pub fn from_static(path: &'static str) -> MemberPath {
        match MemberPath::parse(path) {
            Ok(p) => p,
            Err(e) => panic!("{path:?} is not a member path: {}", e.message()),
        }
    }

    /// A root directory's own path.
    pub fn root(root: Root) -> MemberPath {
        MemberPath(String::from(root.as_str()))
    }

    /// The path of `relative` below this one (`workspace` joined with
    /// `src/main.rs` is `workspace/src/main.rs`), checked as a whole: a
    /// `relative` that is empty, absolute, holds a `.`, `..` or control
    /// character, or makes the path too long is refused with that rule's
    /// code.
    pub fn join(&self, relative: &str) -> Result<MemberPath, Error> {
        MemberPath::join_bytes(self, relative.as_bytes())
    }

    /// [`MemberPath::join`] of a name given as bytes, which must be UTF-8
    /// (`path_not_utf8`): a directory entry's name.
    pub fn join_bytes(&self, relative: &[u8]) -> Result<MemberPath, Error> {
        let mut bytes = Vec::with_capacity(self.0.len() + 1 + relative.len());
        bytes.extend_from_slice(self.0.as_bytes());
        bytes.push(b'/');
        bytes.extend_from_slice(relative);
        MemberPath::from_utf8(bytes)
    }

    /// Refuses the path if it is longer than `max_len` bytes
    /// (`path_too_long`): a reader's limits may be tighter than the
    /// format's.
    pub fn check_length(&self, max_len: usize) -> Result<(), Error> {
        check_length(&self.0, max_len)
    }

    /// The path below its root (empty for a root itself): what exclusion
    /// rules and `--exclude` patterns are matched against.
    pub fn relative(&self) -> &str {
        self.0.split_once('/').map_or("", |(_, rest)| rest)
    }

    /// The path as a string.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The string it holds.
    pub fn into_string(self) -> String {
        self.0
    }
}

impl core::ops::Deref for MemberPath {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl AsRef<str> for MemberPath {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl core::borrow::Borrow<str> for MemberPath {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl core::fmt::Display for MemberPath {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(&self.0)
    }
}

impl core::fmt::Debug for MemberPath {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        core::fmt::Debug::fmt(&self.0, f)
    }
}

impl core::str::FromStr for MemberPath {
    type Err = Error;
    fn from_str(path: &str) -> Result<MemberPath, Error> {
        MemberPath::parse(path)
    }
}

impl TryFrom<&str> for MemberPath {
    type Error = Error;
    fn try_from(path: &str) -> Result<MemberPath, Error> {
        MemberPath::parse(path)
    }
}

impl TryFrom<String> for MemberPath {
    type Error = Error;
    fn try_from(path: String) -> Result<MemberPath, Error> {
        MemberPath::parse_within(path, MAX_PATH_BYTES)
    }
}

impl From<MemberPath> for String {
    fn from(path: MemberPath) -> String {
        path.0
    }
}

impl From<&MemberPath> for String {
    fn from(path: &MemberPath) -> String {
        path.0.clone()
    }
}

impl<'a> From<MemberPath> for alloc::borrow::Cow<'a, str> {
    fn from(path: MemberPath) -> alloc::borrow::Cow<'a, str> {
        alloc::borrow::Cow::Owned(path.0)
    }
}

impl<'a> From<&'a MemberPath> for alloc::borrow::Cow<'a, str> {
    fn from(path: &'a MemberPath) -> alloc::borrow::Cow<'a, str> {
        alloc::borrow::Cow::Borrowed(&path.0)
    }
}

impl PartialEq<str> for MemberPath {
    fn eq(&self, other: &str) -> bool {
        self.0 == other
    }
}

impl PartialEq<&str> for MemberPath {
    fn eq(&self, other: &&str) -> bool {
        self.0 == *other
    }
}

impl PartialEq<String> for MemberPath {
    fn eq(&self, other: &String) -> bool {
        &self.0 == other
    }
}

impl PartialEq<MemberPath> for str {
    fn eq(&self, other: &MemberPath) -> bool {
        self == other.0
    }
}

impl PartialEq<MemberPath> for &str {
    fn eq(&self, other: &MemberPath) -> bool {
        *self == other.0
    }
}

impl PartialEq<MemberPath> for String {
    fn eq(&self, other: &MemberPath) -> bool {
        *self == other.0
    }
}

impl serde::Serialize for MemberPath {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0)
    }
}

impl<'de> serde::Deserialize<'de> for MemberPath {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<MemberPath, D::Error> {
        let path = String::deserialize(d)?;
        MemberPath::try_from(path).map_err(|e| serde::de::Error::custom(e.message()))
    }
}

/// What [`Member`](crate::Member)'s constructors take as a path: a
/// [`MemberPath`], or a path written in the program, checked as
/// [`MemberPath::from_static`] checks it.
pub trait IntoMemberPath {
    /// The checked path.
    fn into_member_path(self) -> MemberPath;
}

impl IntoMemberPath for MemberPath {
    fn into_member_path(self) -> MemberPath {
        self
    }
}

impl IntoMemberPath for &'static str {
    #[track_caller]
    fn into_member_path(self) -> MemberPath {
        MemberPath::from_static(self)
    }
}

fn truncate_for_display(path: &str) -> String {
    let mut end = path.len().min(200);
    while !path.is_char_boundary(end) {
        end -= 1;
    }
    let mut s = String::from(&path[..end]);
    if end < path.len() {
        s.push('…');
    }
    s
}

/// Checks a symlink's target and resolves it lexically. The target must be
/// relative, non-empty, at most `max_len` bytes, free of control characters,
/// and every step of its lexical resolution from the link's directory must
/// stay inside the link's own root.
///
/// Returns the resolved path and, for the "through another symlink" rule,
/// every intermediate directory it passes (not the final component).
pub fn resolve_symlink_target(
    link: &str,
    target: &str,
    max_len: usize,
) -> Result<ResolvedTarget, Error> {
    let invalid = |msg: &str| {
        Error::new(
            ErrorCode::SymlinkTargetInvalid,
            alloc::format!("{msg}: {target:?}"),
        )
        .at_path(link)
    };
    if target.is_empty() {
        return Err(invalid("symlink target is empty"));
    }
    if target.len() > max_len {
        return Err(Error::new(
            ErrorCode::PathTooLong,
            alloc::format!(
                "symlink target is {} bytes, the limit is {max_len}",
                target.len()
            ),
        )
        .at_path(link));
    }
    if has_control(target) {
        return Err(invalid(
            "symlink target holds NUL or another control character",
        ));
    }
    if target.starts_with('/') {
        return Err(Error::new(
            ErrorCode::SymlinkAbsolute,
            alloc::format!("symlink target {target:?} is absolute"),
        )
        .at_path(link));
    }
    let root = root_of(link).ok_or_else(|| {
        Error::new(
            ErrorCode::PathOutsideRoots,
            "symlink lies outside the roots",
        )
        .at_path(link)
    })?;
    let mut stack: Vec<&str> = parent(link).unwrap_or("").split('/').collect();
    let mut through = Vec::new();
    let components: Vec<&str> = target.split('/').collect();
    let last_meaningful = components
        .iter()
        .rposition(|c| !c.is_empty() && *c != ".")
        .unwrap_or(0);
    for (i, component) in components.iter().enumerate() {
        match *component {
            "" | "." => continue,
            ".." => {
                if stack.len() <= 1 {
                    return Err(Error::new(
                        ErrorCode::SymlinkEscapes,
                        alloc::format!("symlink target {target:?} leaves \"{}/\"", root.as_str()),
                    )
                    .at_path(link));
                }
                stack.pop();
            }
            name => {
                stack.push(name);
                if i < last_meaningful {
                    through.push(stack.join("/"));
                }
            }
        }
    }
    Ok(ResolvedTarget {
        resolved: stack.join("/"),
        through,
    })
}

/// The lexical resolution of a symlink target.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResolvedTarget {
    /// The member path the target names (it need not exist).
    pub resolved: String,
    /// The directories the resolution descends into on its way, in order.
    pub through: Vec<String>,
}

/// Code points that HFS+ and APFS ignore when comparing names.
fn is_ignorable(c: char) -> bool {
    matches!(
        c as u32,
        0x200B..=0x200F | 0x202A..=0x202E | 0x206A..=0x206F | 0xFEFF
    )
}

/// The key under which two paths name the same file on a case-insensitive,
/// normalisation-insensitive file system (macOS APFS and HFS+, Windows
/// NTFS for case): NFD, ignorable code points removed, lowercased.
pub fn portable_key(path: &str) -> String {
    if path.is_ascii() {
        // NFD leaves ASCII as it is, no ASCII character is ignorable and
        // ASCII lowercases to ASCII: the key is the ASCII lowercase.
        return path.to_ascii_lowercase();
    }
    full_portable_key(path)
}

/// [`portable_key`] computed in full, for any path.
fn full_portable_key(path: &str) -> String {
    path.nfd()
        .filter(|c| !is_ignorable(*c))
        .flat_map(char::to_lowercase)
        .collect::<String>()
        .nfd()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn order_puts_subtree_after_parent() {
        let mut v = alloc::vec!["workspace/a-b", "workspace/a/c", "workspace/a", "workspace"];
        v.sort_by(|a, b| compare(a, b));
        assert_eq!(
            v,
            ["workspace", "workspace/a", "workspace/a/c", "workspace/a-b"]
        );
    }

    #[test]
    fn below_a_root_is_the_path_under_it_and_nothing_else() {
        assert_eq!(
            Root::Workspace.below("workspace/src/a.rs"),
            Some("src/a.rs")
        );
        assert_eq!(Root::Harness.below("harness/codex"), Some("codex"));
        assert_eq!(Root::Workspace.below("workspace"), None);
        assert_eq!(Root::Workspace.below("workspace-b/a"), None);
        assert_eq!(Root::Workspace.below("harness/workspace/a"), None);
        assert_eq!(Root::Harness.below("workspace/harness/a"), None);
        // Text found on disk is read as it is, checked or not.
        assert_eq!(Root::Workspace.below("workspace/a\nb"), Some("a\nb"));
        assert_eq!(
            Root::Workspace.member_path("src/a.rs"),
            "workspace/src/a.rs"
        );
        let relative = "src/a.rs";
        assert_eq!(
            Root::Workspace.below(&Root::Workspace.member_path(relative)),
            Some(relative)
        );
    }

    #[test]
    fn canonical_paths() {
        assert!(check_member_path(b"workspace/a/b.txt", 4096).is_ok());
        let code = |p: &[u8]| check_member_path(p, 4096).unwrap_err().code();
        assert_eq!(code(b"/workspace"), ErrorCode::PathAbsolute);
        assert_eq!(code(b"workspace/../x"), ErrorCode::PathNotCanonical);
        assert_eq!(code(b"workspace/./x"), ErrorCode::PathNotCanonical);
        assert_eq!(code(b"workspace//x"), ErrorCode::PathNotCanonical);
        assert_eq!(code(b"workspace/x/"), ErrorCode::PathNotCanonical);
        assert_eq!(code(b""), ErrorCode::PathNotCanonical);
        assert_eq!(code(b"workspace/a\0b"), ErrorCode::PathControlChar);
        assert_eq!(code(b"workspace/a\nb"), ErrorCode::PathControlChar);
        assert_eq!(code(b"workspace/\xc2\x85"), ErrorCode::PathControlChar);
        assert_eq!(code(b"workspace/\xff"), ErrorCode::PathNotUtf8);
        assert_eq!(code(b"other/x"), ErrorCode::PathOutsideRoots);
        assert_eq!(code(b"workspacex/x"), ErrorCode::PathOutsideRoots);
        let long = alloc::format!("workspace/{}", "a".repeat(4090));
        assert_eq!(code(long.as_bytes()), ErrorCode::PathTooLong);
    }

    #[test]
    fn a_member_path_holds_only_what_the_rules_accept() {
        let p = MemberPath::parse("workspace/a/b.txt").unwrap();
        assert_eq!(p, "workspace/a/b.txt");
        assert_eq!(p.relative(), "a/b.txt");
        assert_eq!(p.join("c").unwrap(), "workspace/a/b.txt/c");
        assert_eq!(p.join("c/d").unwrap().as_str(), "workspace/a/b.txt/c/d");
        assert_eq!(MemberPath::root(Root::Harness), "harness");
        assert_eq!(MemberPath::root(Root::Workspace).relative(), "");
        // The same codes as the rules, in the same order.
        for bad in [
            &b"/workspace"[..],
            b"workspace/../x",
            b"workspace/x/",
            b"",
            b"workspace/a\0b",
            b"workspace/\xc2\x85",
            b"workspace/\xff",
            b"other/x",
        ] {
            let rule = check_member_path(bad, 4096).unwrap_err();
            assert_eq!(MemberPath::from_bytes(bad).unwrap_err(), rule);
            if let Ok(text) = core::str::from_utf8(bad) {
                assert_eq!(MemberPath::parse(text).unwrap_err(), rule);
            }
        }
        let ws = MemberPath::root(Root::Workspace);
        let code = |name: &[u8]| ws.join_bytes(name).unwrap_err().code();
        assert_eq!(code(b".."), ErrorCode::PathNotCanonical);
        assert_eq!(code(b""), ErrorCode::PathNotCanonical);
        assert_eq!(code(b"/x"), ErrorCode::PathNotCanonical);
        assert_eq!(code(b"a\nb"), ErrorCode::PathControlChar);
        assert_eq!(code(b"\xff"), ErrorCode::PathNotUtf8);
        assert_eq!(code("a".repeat(4090).as_bytes()), ErrorCode::PathTooLong);
        assert_eq!(ws.join(&"a".repeat(4086)).unwrap().len(), 4096);
        // A reader's tighter limit.
        assert_eq!(p.check_length(17), Ok(()));
        assert_eq!(
            p.check_length(16).unwrap_err().code(),
            ErrorCode::PathTooLong
        );
    }

    #[test]
    fn a_member_path_reads_and_writes_as_its_string() {
        let p = MemberPath::from_static("workspace/x y");
        let json = serde_json::to_string(&p).unwrap();
        assert_eq!(json, "\"workspace/x y\"");
        assert_eq!(serde_json::from_str::<MemberPath>(&json).unwrap(), p);
        assert!(serde_json::from_str::<MemberPath>("\"workspace/..\"").is_err());
        assert_eq!(alloc::format!("{p}"), "workspace/x y");
        assert_eq!(alloc::format!("{p:?}"), "\"workspace/x y\"");
        assert!(p.starts_with("workspace/"));
        assert_eq!(String::from(p), "workspace/x y");
    }

    #[test]
    #[should_panic(expected = "is not a member path")]
    fn a_literal_that_breaks_the_rules_is_a_bug() {
        MemberPath::from_static("workspace/../etc");
    }

    #[test]
    fn symlink_resolution() {
        let r = resolve_symlink_target("workspace/a/l", "../b/c", 4096).unwrap();
        assert_eq!(r.resolved, "workspace/b/c");
        assert_eq!(r.through, ["workspace/b"]);
        let r = resolve_symlink_target("workspace/l", "..", 4096).unwrap_err();
        assert_eq!(r.code(), ErrorCode::SymlinkEscapes);
        let r = resolve_symlink_target("workspace/a/l", "..", 4096).unwrap();
        assert_eq!(r.resolved, "workspace");
        let r = resolve_symlink_target("workspace/l", "x/../../y", 4096).unwrap_err();
        assert_eq!(r.code(), ErrorCode::SymlinkEscapes);
        let r = resolve_symlink_target("workspace/l", "/etc", 4096).unwrap_err();
        assert_eq!(r.code(), ErrorCode::SymlinkAbsolute);
        let r = resolve_symlink_target("harness/l", "../workspace", 4096).unwrap_err();
        assert_eq!(r.code(), ErrorCode::SymlinkEscapes);
        let r = resolve_symlink_target("workspace/l", "./x/", 4096).unwrap();
        assert_eq!(r.resolved, "workspace/x");
        assert!(r.through.is_empty());
    }

    /// The member order as first specified: byte by byte, `/` lowest.
    fn compare_reference(a: &str, b: &str) -> Ordering {
        let key = |c: u8| if c == b'/' { 0u8 } else { c };
        for (x, y) in a.bytes().zip(b.bytes()) {
            match key(x).cmp(&key(y)) {
                Ordering::Equal => continue,
                other => return other,
            }
        }
        a.len().cmp(&b.len())
    }

    #[test]
    fn compare_agrees_with_the_bytewise_reference() {
        // Short strings over an alphabet with `/`, NUL (same key as `/`)
        // and neighbours, at lengths around the 16-byte chunk.
        let alphabet = ["/", "\0", "a", "b", "-", "."];
        let mut strings = alloc::vec![String::new()];
        for len in 1..=3 {
            let mut next = Vec::new();
            for s in strings.iter().filter(|s| s.len() == len - 1) {
                for c in alphabet {
                    next.push(alloc::format!("{s}{c}"));
                }
            }
            strings.extend(next);
        }
        let long = "workspace/src/module/";
        let mut all = strings.clone();
        for s in &strings {
            all.push(alloc::format!("{long}{s}"));
            all.push(alloc::format!("{long}{long}{s}"));
        }
        for a in &all {
            for b in &all {
                assert_eq!(compare(a, b), compare_reference(a, b), "{a:?} {b:?}");
            }
        }
    }

    #[test]
    fn control_characters_are_found_as_chars_would_find_them() {
        let is_control = |c: char| (c as u32) < 0x20 || (0x7f..=0x9f).contains(&(c as u32));
        for c in (0..0x800)
            .filter_map(char::from_u32)
            .chain(['\u{fffd}', '\u{10ffff}'])
        {
            for s in [
                alloc::format!("{c}"),
                alloc::format!("a{c}b"),
                alloc::format!("\u{e9}{c}"),
            ] {
                assert_eq!(has_control(&s), s.chars().any(is_control), "{s:?}");
            }
        }
    }

    #[test]
    fn ascii_portable_keys_are_the_full_computation() {
        let full = full_portable_key;
        let ascii: String = (0u8..0x80).map(char::from).collect();
        assert_eq!(portable_key(&ascii), full(&ascii));
        assert_eq!(
            portable_key("workspace/\u{212A}"),
            full("workspace/\u{212A}")
        );
    }

    #[test]
    fn portable_keys_collide_like_apfs() {
        assert_eq!(
            portable_key("workspace/README"),
            portable_key("workspace/readme")
        );
        assert_eq!(
            portable_key("workspace/\u{212A}"),
            portable_key("workspace/k")
        );
        assert_eq!(
            portable_key("workspace/\u{e9}"),
            portable_key("workspace/e\u{301}")
        );
        assert_eq!(
            portable_key("workspace/a\u{200d}b"),
            portable_key("workspace/ab")
        );
        assert_ne!(portable_key("workspace/a"), portable_key("workspace/b"));
    }
}
