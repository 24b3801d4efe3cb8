//! Reading one member back: the page reads a member's body by range (a
//! `File` slice, or the Worker's member read) and re-hashes it against the
//! manifest before showing any of it. Also the preview's content sniffing.

use packet_core::assembled::BodyHasher;
use packet_core::{Body, Entry, Error, Manifest};
use wasm_bindgen::prelude::*;

use crate::view::{refusal, Failure};

/// Re-hashes one file member's body (JavaScript class `MemberCheck`):
/// packet-core's [`BodyHasher`], the check every consumer makes of a body
/// it reads back, with the member's path on its refusals.
#[wasm_bindgen]
pub struct MemberCheck {
    path: String,
    hasher: BodyHasher,
}

impl MemberCheck {
    /// A check for file member `index` of `manifest`. Asking for one of a
    /// member that does not exist, or has no body, is a bug in the page.
    pub fn for_member(manifest: &Manifest, index: usize) -> Result<MemberCheck, Failure> {
        let member = manifest
            .members
            .get(index)
            .ok_or_else(|| Failure::bug(format!("no member {index}")))?;
        match &member.entry {
            Entry::File { size, sha256, .. } => Ok(MemberCheck {
                path: member.path.to_string(),
                hasher: BodyHasher::new(Body {
                    sha256: *sha256,
                    size: *size,
                }),
            }),
            _ => Err(Failure::bug(format!(
                "{} has no body: it is a {}",
                member.path,
                member.kind().as_str()
            ))),
        }
    }

    /// Hashes the next part of the body.
    pub fn update(&mut self, chunk: &[u8]) -> Result<(), Error> {
        self.hasher.update(chunk).map_err(|e| e.at_path(&self.path))
    }

    /// Checks the whole body: its size and its sha256.
    pub fn finish_check(self) -> Result<(), Error> {
        let path = self.path;
        self.hasher
            .finish()
            .map(|_| ())
            .map_err(|e| e.at_path(path))
    }
}

#[wasm_bindgen]
impl MemberCheck {
    /// Hashes the next part of the body; throws a refusal if more bytes
    /// arrive than the manifest declares.
    pub fn push(&mut self, chunk: &[u8]) -> Result<(), JsValue> {
        self.update(chunk).map_err(|e| refusal(&e))
    }

    /// Ends the body; throws `member_digest_mismatch` unless it is exactly
    /// the member the manifest describes.
    pub fn finish(self) -> Result<(), JsValue> {
        self.finish_check().map_err(|e| refusal(&e))
    }

    /// The body size the manifest declares.
    #[wasm_bindgen(getter)]
    pub fn size(&self) -> f64 {
        self.hasher.expected().size as f64
    }
}

/// How the preview shows a body, from its first bytes: `image/png`,
/// `image/jpeg`, `image/gif`, `image/webp`, `text` (UTF-8 without NUL or
/// other control characters besides tab, newline, carriage return and form
/// feed, allowing a character cut at the end) or `binary`.
#[wasm_bindgen]
pub fn classify(head: &[u8]) -> String {
    const SIGNATURES: &[(&[u8], &str)] = &[
        (b"\x89PNG\r\n\x1a\n", "image/png"),
        (b"\xff\xd8\xff", "image/jpeg"),
        (b"GIF87a", "image/gif"),
        (b"GIF89a", "image/gif"),
    ];
    for (magic, mime) in SIGNATURES {
        if head.starts_with(magic) {
            return (*mime).to_string();
        }
    }
    if head.len() >= 12 && &head[..4] == b"RIFF" && &head[8..12] == b"WEBP" {
        return "image/webp".to_string();
    }
    let text = match std::str::from_utf8(head) {
        Ok(s) => Some(s),
        // A multi-byte character cut by the end of the head is still text.
        Err(e) if e.error_len().is_none() && head.len() - e.valid_up_to() < 4 => {
            std::str::from_utf8(&head[..e.valid_up_to()]).ok()
        }
        Err(_) => None,
    };
    match text {
        Some(s)
            if !s
                .chars()
                .any(|c| c.is_control() && !matches!(c, '\t' | '\n' | '\r' | '\x0c')) =>
        {
            "text".to_string()
        }
        _ => "binary".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use packet_core::in_memory::{build, Source};
    use packet_core::{ErrorCode, Limits};

    #[test]
    fn classify_recognises_text_binary_and_images() {
        assert_eq!(classify(b"fn main() {}\n"), "text");
        assert_eq!(classify("h\u{e9}llo".as_bytes()), "text");
        assert_eq!(classify(&"é".as_bytes()[..1]), "text");
        assert_eq!(classify(b"\x00\x01\x02"), "binary");
        assert_eq!(classify(b"\x89PNG\r\n\x1a\nrest"), "image/png");
        assert_eq!(classify(b"RIFF\0\0\0\0WEBPVP8 "), "image/webp");
        assert_eq!(classify(b"\xff\xfe\xfd"), "binary");
    }

    #[test]
    fn member_check_accepts_the_body_and_refuses_a_changed_one() {
        let built = build(
            &[
                Source::Dir {
                    path: "workspace".into(),
                },
                Source::File {
                    path: "workspace/a.txt".into(),
                    contents: b"hello".to_vec(),
                    executable: false,
                },
            ],
            None,
            vec![],
            &Limits::FORMAT,
        )
        .unwrap();
        let mut ok = MemberCheck::for_member(&built.manifest, 1).unwrap();
        ok.update(b"hel").unwrap();
        ok.update(b"lo").unwrap();
        ok.finish_check().unwrap();

        let mut bad = MemberCheck::for_member(&built.manifest, 1).unwrap();
        bad.update(b"jello").unwrap();
        let e = bad.finish_check().unwrap_err();
        assert_eq!(e.code(), ErrorCode::MemberDigestMismatch);
        assert_eq!(e.path(), Some("workspace/a.txt"));

        let mut long = MemberCheck::for_member(&built.manifest, 1).unwrap();
        assert!(long.update(b"hello!").is_err());

        assert!(MemberCheck::for_member(&built.manifest, 0).is_err());
        assert!(MemberCheck::for_member(&built.manifest, 9).is_err());
    }
}
