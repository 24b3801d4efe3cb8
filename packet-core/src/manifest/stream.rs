//! `packet.json` parsed as it arrives, so that a reader never holds its
//! text and the parsed manifest at once (for 250,000 members the text alone
//! is about 37 MB).
//!
//! The canonical form makes this simple: the text is
//! `{…,"members":[M1,M2,…],"totals":{…}}`, with the members array last but
//! one. Each member object is parsed and compared with its canonical
//! serialisation as soon as it is complete, and its text is dropped. What
//! surrounds the members (the skeleton) is parsed at the end with the
//! members array empty, then the whole manifest is validated as
//! [`Manifest::parse`] would.
//!
//! This fast path only ever accepts a text that [`Manifest::parse`] accepts,
//! giving the same manifest. On anything unexpected (a member that does not
//! parse or is not canonical, a skeleton that does not parse), the text
//! seen so far is rebuilt exactly (each dropped member's text was its
//! canonical serialisation) and the rest is buffered, so that
//! [`Manifest::parse`] reports the very same error on the whole text.

use alloc::vec::Vec;

use crate::error::Error;
use crate::limits::Limits;
use crate::manifest::{json, Manifest, UncheckedManifest, UncheckedMember};

/// Where the members array starts. In canonical JSON it cannot occur
/// inside a string (a `"` inside a string is always escaped) and it is
/// always preceded by `"format"`'s value.
const MEMBERS_KEY: &[u8] = b",\"members\":[";

enum Mode {
    /// Before the members array: the text so far.
    Prefix(Vec<u8>),
    /// Inside it: members parsed so far and the text after the last one.
    Members {
        prefix: Vec<u8>,
        members: Vec<UncheckedMember>,
        pending: Vec<u8>,
    },
    /// After it: the text from its closing `]` on.
    Suffix {
        prefix: Vec<u8>,
        members: Vec<UncheckedMember>,
        suffix: Vec<u8>,
    },
    /// The whole text, for [`Manifest::parse`].
    Whole(Vec<u8>),
}

/// `packet.json`'s text, fed in pieces of any size.
pub(crate) struct ManifestStream {
    mode: Mode,
}

impl ManifestStream {
    pub(crate) fn new() -> ManifestStream {
        ManifestStream {
            mode: Mode::Prefix(Vec::new()),
        }
    }

    /// Takes the next bytes of the text.
    pub(crate) fn feed(&mut self, bytes: &[u8]) {
        match &mut self.mode {
            Mode::Whole(text) => text.extend_from_slice(bytes),
            Mode::Prefix(text) => {
                let from = text.len().saturating_sub(MEMBERS_KEY.len() - 1);
                text.extend_from_slice(bytes);
                let found = text[from..]
                    .windows(MEMBERS_KEY.len())
                    .position(|w| w == MEMBERS_KEY);
                if let Some(i) = found {
                    let end = from + i + MEMBERS_KEY.len();
                    let pending = text[end..].to_vec();
                    text.truncate(end);
                    let prefix = core::mem::take(text);
                    self.mode = Mode::Members {
                        prefix,
                        members: Vec::new(),
                        pending,
                    };
                    self.scan_members();
                }
            }
            Mode::Members { pending, .. } => {
                pending.extend_from_slice(bytes);
                self.scan_members();
            }
            Mode::Suffix { suffix, .. } => suffix.extend_from_slice(bytes),
        }
    }

    /// Takes every complete member out of `pending`.
    fn scan_members(&mut self) {
        let Mode::Members {
            members, pending, ..
        } = &mut self.mode
        else {
            return;
        };
        let mut at = 0;
        loop {
            let rest = &pending[at..];
            let Some(&first) = rest.first() else {
                break;
            };
            let start = match (first, members.is_empty()) {
                (b']', _) => {
                    // The end of the array; the rest is the suffix.
                    pending.drain(..at);
                    return self.enter_suffix();
                }
                (b',', false) => 1,
                (b'{', true) => 0,
                _ => return self.fall_back_to_whole(at),
            };
            if rest.get(start) != Some(&b'{') {
                if rest.len() <= start {
                    break;
                }
                return self.fall_back_to_whole(at);
            }
            let Some(len) = object_len(&rest[start..]) else {
                break;
            };
            let text = &rest[start..start + len];
            let Some(member) = json::parse_member(text) else {
                return self.fall_back_to_whole(at);
            };
            members.push(member);
            at += start + len;
        }
        pending.drain(..at);
    }

    fn enter_suffix(&mut self) {
        if let Mode::Members {
            prefix,
            members,
            pending,
        } = &mut self.mode
        {
            self.mode = Mode::Suffix {
                prefix: core::mem::take(prefix),
                members: core::mem::take(members),
                suffix: core::mem::take(pending),
            };
        }
    }

    /// Gives up the fast path: rebuilds the text seen so far, `consumed`
    /// bytes of `pending` included in the members.
    fn fall_back_to_whole(&mut self, consumed: usize) {
        if let Mode::Members { pending, .. } = &mut self.mode {
            pending.drain(..consumed);
        }
        self.mode = Mode::Whole(self.take_text());
    }

    /// The text seen so far, rebuilt exactly.
    fn take_text(&mut self) -> Vec<u8> {
        match &mut self.mode {
            Mode::Members {
                prefix,
                members,
                pending: rest,
            }
            | Mode::Suffix {
                prefix,
                members,
                suffix: rest,
            } => rebuild(prefix, members, rest),
            Mode::Prefix(text) | Mode::Whole(text) => core::mem::take(text),
        }
    }

    /// The manifest, once the whole text has been fed.
    pub(crate) fn finish(mut self, limits: &Limits, len: u64) -> Result<Manifest, Error> {
        if let Mode::Suffix {
            prefix,
            members,
            suffix,
        } = &mut self.mode
        {
            if let Some(mut manifest) = parse_skeleton(prefix, suffix) {
                manifest.members = core::mem::take(members);
                return manifest.check(&limits.clamped(), len);
            }
        }
        Manifest::parse(&self.take_text(), limits)
    }
}

/// The length of the JSON object at the start of `text` (which starts
/// with `{`), or `None` if it is not complete yet. Member objects hold no
/// nested objects or arrays: the first `}` outside a string ends them.
fn object_len(text: &[u8]) -> Option<usize> {
    let mut in_string = false;
    let mut escaped = false;
    for (i, &b) in text.iter().enumerate().skip(1) {
        if in_string {
            if escaped {
                escaped = false;
            } else if b == b'\\' {
                escaped = true;
            } else if b == b'"' {
                in_string = false;
            }
        } else if b == b'"' {
            in_string = true;
        } else if b == b'}' {
            return Some(i + 1);
        }
    }
    None
}

/// The manifest around an empty members array, if it parses, names this
/// format and is canonical.
fn parse_skeleton(prefix: &[u8], suffix: &[u8]) -> Option<UncheckedManifest> {
    let mut text = Vec::with_capacity(prefix.len() + suffix.len());
    text.extend_from_slice(prefix);
    text.extend_from_slice(suffix);
    let manifest: UncheckedManifest = serde_json::from_slice(&text).ok()?;
    json::is_canonical(&manifest, &text).then_some(manifest)
}

/// The exact text: the prefix, each member's canonical text (which is the
/// text it was parsed from) separated by commas, then `rest`.
fn rebuild(prefix: &[u8], members: &[UncheckedMember], rest: &[u8]) -> Vec<u8> {
    let mut text = Vec::new();
    text.extend_from_slice(prefix);
    json::write_members(members, &mut text);
    text.extend_from_slice(rest);
    text
}

#[cfg(all(test, not(target_arch = "wasm32")))]
mod tests {
    use super::*;
    use crate::in_memory::{build, Source};
    use crate::manifest::Exclusion;
    use alloc::string::String;
    use alloc::vec;
    use proptest::prelude::*;

    /// The text of a manifest with files, folders, a symlink, names that
    /// need escaping and an exclusion record.
    fn text() -> Vec<u8> {
        let mut sources = vec![
            Source::Dir {
                path: "workspace".into(),
            },
            Source::Dir {
                path: "workspace/d}{\"q".into(),
            },
            Source::File {
                path: "workspace/d}{\"q/a\\b,].txt".into(),
                contents: b"x".to_vec(),
                executable: false,
            },
            Source::Symlink {
                path: "workspace/link".into(),
                target: "d}{\"q".into(),
            },
        ];
        for i in 0..12 {
            sources.push(Source::File {
                path: alloc::format!("workspace/f{i}.txt"),
                contents: vec![b'a'; i],
                executable: i % 3 == 0,
            });
        }
        let exclusions = vec![Exclusion {
            matched: 2,
            pattern: String::from("**/.netrc"),
            rule: String::from("netrc"),
        }];
        let built = build(&sources, None, exclusions, &Limits::FORMAT).unwrap();
        built.manifest.to_canonical_json()
    }

    fn streamed(text: &[u8], sizes: &[usize]) -> Result<Manifest, Error> {
        let mut stream = ManifestStream::new();
        let mut rest = text;
        let mut k = 0;
        while !rest.is_empty() {
            let n = sizes[k % sizes.len()].clamp(1, rest.len());
            k += 1;
            stream.feed(&rest[..n]);
            rest = &rest[n..];
        }
        stream.finish(&Limits::FORMAT, text.len() as u64)
    }

    #[test]
    fn a_valid_manifest_streams_to_the_same_manifest() {
        let text = text();
        let whole = Manifest::parse(&text, &Limits::FORMAT).unwrap();
        for size in [1, 2, 7, 64, 4096, usize::MAX] {
            assert_eq!(streamed(&text, &[size]).unwrap(), whole, "chunks of {size}");
        }
    }

    const BYTES: &[u8] = b"\"\\,]}{[ a0:\n";

    proptest! {
        #![proptest_config(ProptestConfig {
            cases: 2000,
            failure_persistence: None,
            ..ProptestConfig::default()
        })]

        /// Whatever is changed in the text, streaming gives exactly what
        /// parsing the whole text gives: the same manifest or the same
        /// error (code, message, path).
        #[test]
        fn streaming_agrees_with_the_whole_parse(
            at in any::<prop::sample::Index>(),
            how in 0u8..3,
            byte in prop::sample::select(BYTES),
            sizes in proptest::collection::vec(1usize..300, 1..5),
        ) {
            let mut text = text();
            let i = at.index(text.len());
            match how {
                0 => text[i] = byte,
                1 => text.insert(i, byte),
                _ => { text.remove(i); }
            }
            let whole = Manifest::parse(&text, &Limits::FORMAT);
            prop_assert_eq!(streamed(&text, &sizes), whole);
        }
    }
}
