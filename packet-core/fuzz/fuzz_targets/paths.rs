//! Fuzzes the path rules (docs/session-packet.md §2, §3, §6): canonical
//! member paths, the member order, symlink resolution and the portable
//! collision key.
//!
//! The input is split at its first 0xff byte into a path and a link target
//! (0xff never occurs in UTF-8). Properties:
//! - `check_member_path` never panics; what it accepts is canonical (no
//!   empty, `.` or `..` component, no control character, not absolute,
//!   under a root, within the length limit), and is what `MemberPath`
//!   accepts;
//! - `compare` is a total order consistent with bytewise comparison where
//!   `/` sorts first, and a directory sorts right before its subtree;
//! - `resolve_symlink_target` never panics; what it accepts resolves inside
//!   the link's own root, and every directory it passes lies in that root;
//! - `portable_key` is idempotent and the same for a path's NFC and NFD
//!   spellings.
#![no_main]

use libfuzzer_sys::fuzz_target;
use packet_core::{path, MemberPath};
use unicode_normalization::UnicodeNormalization;

const MAX: usize = 4096;

fn canonical(p: &str) -> bool {
    !p.starts_with('/')
        && p.split('/').all(|c| !c.is_empty() && c != "." && c != "..")
        && !p
            .chars()
            .any(|c| (c as u32) < 0x20 || (0x7f..=0x9f).contains(&(c as u32)))
}

fuzz_target!(|data: &[u8]| {
    let (a, b) = match data.iter().position(|&x| x == 0xff) {
        Some(i) => (&data[..i], &data[i + 1..]),
        None => (data, &b""[..]),
    };
    for bytes in [a, b] {
        // The type that holds a member path accepts exactly what the rules do.
        assert_eq!(
            MemberPath::from_bytes(bytes).ok().as_deref(),
            path::check_member_path(bytes, MAX).ok()
        );
        if let Ok(p) = path::check_member_path(bytes, MAX) {
            assert!(
                canonical(p) && p.len() <= MAX && path::root_of(p).is_some(),
                "{p:?}"
            );
            let key = path::portable_key(p);
            assert_eq!(
                path::portable_key(&key),
                key,
                "portable_key is not idempotent for {p:?}"
            );
            let nfc: String = p.nfc().collect();
            let nfd: String = p.nfd().collect();
            assert_eq!(path::portable_key(&nfc), key, "{p:?}");
            assert_eq!(path::portable_key(&nfd), key, "{p:?}");
        }
    }
    if let (Ok(x), Ok(y)) = (std::str::from_utf8(a), std::str::from_utf8(b)) {
        let key = |s: &str| {
            s.bytes()
                .map(|c| if c == b'/' { 0 } else { c })
                .collect::<Vec<u8>>()
        };
        assert_eq!(path::compare(x, y), key(x).cmp(&key(y)), "{x:?} {y:?}");
        assert_eq!(path::compare(x, y), path::compare(y, x).reverse());
        // A link at a root itself ("workspace") lies in no directory of its
        // root; the member-set rules refuse it (a root is a directory, §1),
        // so only links below a root are resolved here.
        let link = path::check_member_path(a, MAX)
            .ok()
            .filter(|l| path::parent(l).is_some());
        if let Some(link) = link {
            if let Ok(r) = path::resolve_symlink_target(link, y, MAX) {
                let root = path::root_of(link);
                assert!(!y.starts_with('/'));
                assert_eq!(
                    path::root_of(&r.resolved),
                    root,
                    "{link:?} -> {y:?} = {:?}",
                    r.resolved
                );
                assert!(r
                    .resolved
                    .split('/')
                    .all(|c| !c.is_empty() && c != "." && c != ".."));
                for d in &r.through {
                    assert_eq!(path::root_of(d), root, "{link:?} -> {y:?} passes {d:?}");
                }
            }
        }
    }
});
