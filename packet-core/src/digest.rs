//! SHA-256 digests and their text form, `sha256:<64 lowercase hex>`, and
//! the start of one that names a stored packet ([`DigestPrefix`]). This is
//! the one reader of that text.

use alloc::string::String;
use core::fmt;
use core::str::FromStr;

use sha2::{Digest as _, Sha256};

use crate::error::{Error, ErrorCode};

/// A SHA-256 digest. Displays as `sha256:<64 lowercase hex>`; [`Digest::hex`]
/// gives the bare hex used inside the manifest.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Digest(pub [u8; 32]);

impl Digest {
    /// The digest of `bytes`.
    pub fn of(bytes: &[u8]) -> Digest {
        Digest(Sha256::digest(bytes).into())
    }

    /// The bare 64-character lowercase hex form.
    pub fn hex(&self) -> HexDigest<'_> {
        HexDigest(&self.0)
    }

    /// The length of the text form: `sha256:` and 64 hex digits.
    pub const TEXT_LEN: usize = TEXT_PREFIX.len() + 64;

    /// Whether `text` is written as a digest or the start of one, valid or
    /// not (it starts with `sha256:`): what tells a digest from a name that
    /// is not one, such as a ref, which never holds a `:`.
    pub fn is_digest_text(text: &str) -> bool {
        text.starts_with(TEXT_PREFIX)
    }

    /// A digest written either as a packet digest (`sha256:<64 hex>`) or
    /// as its bare hex: what a query string or a person may give.
    pub fn parse_text_or_hex(s: &str) -> Result<Digest, Error> {
        Digest::from_hex(s.strip_prefix(TEXT_PREFIX).unwrap_or(s))
    }

    /// Parses 64 lowercase hex digits (no prefix).
    pub fn from_hex(s: &str) -> Result<Digest, Error> {
        let b = s.as_bytes();
        if b.len() != 64 {
            return Err(Error::new(
                ErrorCode::DigestSyntax,
                alloc::format!("a sha256 has 64 hex digits, found {}", b.len()),
            ));
        }
        let mut out = [0u8; 32];
        // Invalid digits map to 0xff; one OR over every digit finds them.
        let mut seen = 0u8;
        for (byte, pair) in out.iter_mut().zip(b.chunks_exact(2)) {
            let (hi, lo) = (
                HEX_VALUE[usize::from(pair[0])],
                HEX_VALUE[usize::from(pair[1])],
            );
            seen |= hi | lo;
            *byte = (hi << 4) | (lo & 0x0f);
        }
        if seen > 0x0f {
            return Err(Error::new(
                ErrorCode::DigestSyntax,
                "a sha256 is written in lowercase hex digits (0-9, a-f)",
            ));
        }
        Ok(Digest(out))
    }

    /// The digest of no bytes, which every empty file has.
    pub const EMPTY: Digest = Digest([
        0xe3, 0xb0, 0xc4, 0x42, 0x98, 0xfc, 0x1c, 0x14, 0x9a, 0xfb, 0xf4, 0xc8, 0x99, 0x6f, 0xb9,
        0x24, 0x27, 0xae, 0x41, 0xe4, 0x64, 0x9b, 0x93, 0x4c, 0xa4, 0x95, 0x99, 0x1b, 0x78, 0x52,
        0xb8, 0x55,
    ]);
}

/// What the text form of a digest starts with.
const TEXT_PREFIX: &str = "sha256:";

/// The value of each lowercase hex digit; 0xff for every other byte.
const HEX_VALUE: [u8; 256] = {
    let mut table = [0xff; 256];
    let mut i = 0;
    while i < 16 {
        table[b"0123456789abcdef"[i] as usize] = i as u8;
        i += 1;
    }
    table
};

/// Display adapter for the bare hex form.
pub struct HexDigest<'a>(&'a [u8; 32]);

impl fmt::Display for HexDigest<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for b in self.0 {
            write!(f, "{b:02x}")?;
        }
        Ok(())
    }
}

impl fmt::Display for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "sha256:{}", self.hex())
    }
}

impl fmt::Debug for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl FromStr for Digest {
    type Err = Error;

    /// Parses the packet digest form `sha256:<64 lowercase hex>`.
    fn from_str(s: &str) -> Result<Digest, Error> {
        match s.strip_prefix(TEXT_PREFIX) {
            Some(hex) => Digest::from_hex(hex),
            None => Err(Error::new(
                ErrorCode::DigestSyntax,
                "a packet digest starts with \"sha256:\"",
            )),
        }
    }
}

/// The start of a digest naming a stored packet: `sha256:` and
/// [`DigestPrefix::MIN_HEX`] to 64 lowercase hex digits. Long enough that
/// a typo rarely matches, short enough to type; a store resolves it and a
/// client refuses one that matches several packets. It names a packet, it
/// proves nothing: a check of bytes takes a whole [`Digest`].
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct DigestPrefix(String);

impl DigestPrefix {
    /// The fewest hex digits a prefix has (32 bits).
    pub const MIN_HEX: usize = 8;

    /// Reads `sha256:<hex>`, 8 to 64 lowercase hex digits
    /// (`digest_syntax`); the message says what a prefix is.
    pub fn parse(text: &str) -> Result<DigestPrefix, Error> {
        let hex = text.strip_prefix(TEXT_PREFIX).unwrap_or("");
        let valid = (Self::MIN_HEX..=64).contains(&hex.len())
            && hex.bytes().all(|b| HEX_VALUE[usize::from(b)] != 0xff);
        if valid {
            Ok(DigestPrefix(String::from(text)))
        } else {
            Err(Error::new(
                ErrorCode::DigestSyntax,
                alloc::format!(
                    "{text:?} is not a digest prefix: write sha256: and {} to 64 lowercase hex digits",
                    Self::MIN_HEX
                ),
            ))
        }
    }

    /// `sha256:<hex>`.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Its hex digits.
    pub fn hex(&self) -> &str {
        &self.0[TEXT_PREFIX.len()..]
    }

    /// True if `digest` (`sha256:<hex>`) starts with it.
    pub fn matches(&self, digest: &str) -> bool {
        digest.starts_with(self.0.as_str())
    }

    /// Its first `hex_digits` digits (at least [`DigestPrefix::MIN_HEX`],
    /// at most all it has), as a digest is shown shortened.
    pub fn shortened(&self, hex_digits: usize) -> DigestPrefix {
        let keep = hex_digits.clamp(Self::MIN_HEX, self.hex().len());
        DigestPrefix(String::from(&self.0[..TEXT_PREFIX.len() + keep]))
    }
}

impl fmt::Display for DigestPrefix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// An incremental SHA-256.
#[derive(Clone, Default)]
pub struct Hasher(Sha256);

impl Hasher {
    /// A fresh hasher.
    pub fn new() -> Hasher {
        Hasher(Sha256::new())
    }

    /// Adds bytes.
    pub fn update(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }

    /// The digest of everything added.
    pub fn finish(self) -> Digest {
        Digest(self.0.finalize().into())
    }
}

/// A SHA-256 that can stop and go on later, elsewhere: its state after
/// any prefix is a few dozen bytes ([`HashState`]), so a store that hashed
/// a body once can hash only what was appended to it.
#[derive(Clone)]
pub struct ResumableHasher {
    state: [u32; 8],
    /// Bytes hashed so far.
    len: u64,
    /// The bytes of the block not yet compressed.
    pending: [u8; 64],
}

/// SHA-256's initial state (FIPS 180-4, 5.3.3).
const INITIAL: [u32; 8] = [
    0x6a09_e667,
    0xbb67_ae85,
    0x3c6e_f372,
    0xa54f_f53a,
    0x510e_527f,
    0x9b05_688c,
    0x1f83_d9ab,
    0x5be0_cd19,
];

impl Default for ResumableHasher {
    fn default() -> Self {
        ResumableHasher::new()
    }
}

impl ResumableHasher {
    /// A fresh hasher.
    pub fn new() -> ResumableHasher {
        ResumableHasher {
            state: INITIAL,
            len: 0,
            pending: [0; 64],
        }
    }

    /// Bytes hashed so far.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether nothing was hashed yet.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Adds bytes.
    pub fn update(&mut self, mut bytes: &[u8]) {
        let used = (self.len % 64) as usize;
        self.len += bytes.len() as u64;
        if used > 0 {
            let n = (64 - used).min(bytes.len());
            self.pending[used..used + n].copy_from_slice(&bytes[..n]);
            bytes = &bytes[n..];
            if used + n < 64 {
                return;
            }
            sha2::block_api::compress256(&mut self.state, &[self.pending]);
        }
        let (blocks, rest) = bytes.as_chunks::<64>();
        sha2::block_api::compress256(&mut self.state, blocks);
        self.pending[..rest.len()].copy_from_slice(rest);
    }

    /// The digest of everything added.
    pub fn finish(mut self) -> Digest {
        let bits = self.len.wrapping_mul(8);
        let used = (self.len % 64) as usize;
        let mut block = [0u8; 64];
        block[..used].copy_from_slice(&self.pending[..used]);
        block[used] = 0x80;
        if used >= 56 {
            sha2::block_api::compress256(&mut self.state, &[block]);
            block = [0; 64];
        }
        block[56..].copy_from_slice(&bits.to_be_bytes());
        sha2::block_api::compress256(&mut self.state, &[block]);
        let mut out = [0u8; 32];
        for (chunk, word) in out.chunks_exact_mut(4).zip(self.state) {
            chunk.copy_from_slice(&word.to_be_bytes());
        }
        Digest(out)
    }

    /// Its state, to go on with later ([`ResumableHasher::resume`]).
    pub fn state(&self) -> HashState {
        let mut bytes = [0u8; HashState::MAX_LEN];
        bytes[..8].copy_from_slice(&self.len.to_be_bytes());
        for (chunk, word) in bytes[8..40].chunks_exact_mut(4).zip(self.state) {
            chunk.copy_from_slice(&word.to_be_bytes());
        }
        let used = (self.len % 64) as usize;
        bytes[40..40 + used].copy_from_slice(&self.pending[..used]);
        HashState {
            bytes,
            len: 40 + used,
        }
    }

    /// A hasher in the state `state` records.
    pub fn resume(state: &HashState) -> ResumableHasher {
        let b = &state.bytes;
        let len = u64::from_be_bytes(b[..8].try_into().unwrap_or_default());
        let mut words = [0u32; 8];
        for (word, chunk) in words.iter_mut().zip(b[8..40].chunks_exact(4)) {
            *word = u32::from_be_bytes(chunk.try_into().unwrap_or_default());
        }
        let mut pending = [0u8; 64];
        let used = (len % 64) as usize;
        pending[..used].copy_from_slice(&b[40..40 + used]);
        ResumableHasher {
            state: words,
            len,
            pending,
        }
    }
}

/// A [`ResumableHasher`]'s state after some prefix: the prefix's length,
/// SHA-256's eight state words, and the bytes of its last, incomplete
/// block. Encoded (big-endian) as `u64 length, 8 × u32, length % 64
/// bytes`: 40 to 103 bytes.
#[derive(Clone, PartialEq, Eq)]
pub struct HashState {
    bytes: [u8; HashState::MAX_LEN],
    len: usize,
}

impl HashState {
    /// The longest encoding.
    pub const MAX_LEN: usize = 40 + 63;

    /// How many bytes were hashed.
    pub fn hashed(&self) -> u64 {
        u64::from_be_bytes(self.bytes[..8].try_into().unwrap_or_default())
    }

    /// Its encoding.
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes[..self.len]
    }

    /// Reads an encoding; `None` if it is not one.
    pub fn from_bytes(bytes: &[u8]) -> Option<HashState> {
        if bytes.len() < 40 || bytes.len() > Self::MAX_LEN {
            return None;
        }
        let hashed = u64::from_be_bytes(bytes[..8].try_into().ok()?);
        if bytes.len() != 40 + (hashed % 64) as usize {
            return None;
        }
        let mut out = [0u8; Self::MAX_LEN];
        out[..bytes.len()].copy_from_slice(bytes);
        Some(HashState {
            bytes: out,
            len: bytes.len(),
        })
    }
}

impl fmt::Debug for HashState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "HashState({} bytes hashed)", self.hashed())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_digest_is_read_with_or_without_its_prefix_and_nothing_else() {
        use alloc::string::ToString;
        let d = Digest::of(b"x");
        let text = d.to_string();
        let hex = d.hex().to_string();
        assert_eq!(Digest::parse_text_or_hex(&text).unwrap(), d);
        assert_eq!(Digest::parse_text_or_hex(&hex).unwrap(), d);
        for bad in [
            "",
            "sha256:",
            "sha1:00",
            "sha256:sha256:00",
            &hex[1..],
            &hex.to_uppercase(),
        ] {
            let e = Digest::parse_text_or_hex(bad).unwrap_err();
            assert_eq!(e.code(), ErrorCode::DigestSyntax, "{bad:?}");
        }
    }

    #[test]
    fn a_prefix_is_8_to_64_lowercase_hex_digits_after_sha256() {
        let p = DigestPrefix::parse("sha256:0123abcd").unwrap();
        assert_eq!((p.as_str(), p.hex()), ("sha256:0123abcd", "0123abcd"));
        assert!(p.matches(&alloc::format!("sha256:0123abcd{}", "0".repeat(56))));
        assert!(!p.matches(&alloc::format!("sha256:0123abce{}", "0".repeat(56))));
        let full = alloc::format!("sha256:{}", "f".repeat(64));
        assert!(DigestPrefix::parse(&full).is_ok());
        for bad in [
            "sha256:0123abc",
            "0123abcd",
            "sha256:0123ABCD",
            "sha256:0123abcg",
            "sha256:",
            &alloc::format!("sha256:{}", "f".repeat(65)),
        ] {
            let e = DigestPrefix::parse(bad).unwrap_err();
            assert!(e.message().contains("8 to 64 lowercase hex"), "{bad}: {e}");
            assert_eq!(e.code(), ErrorCode::DigestSyntax);
        }
    }

    #[test]
    fn a_prefix_shortens_to_at_least_eight_digits() {
        let p =
            DigestPrefix::parse(&alloc::format!("sha256:{}", "0123456789ab".repeat(5))).unwrap();
        assert_eq!(p.shortened(12).as_str(), "sha256:0123456789ab");
        assert_eq!(p.shortened(2).as_str(), "sha256:01234567");
        let short = DigestPrefix::parse("sha256:0123abcd").unwrap();
        assert_eq!(short.shortened(12), short);
    }

    #[test]
    fn digest_text_is_told_from_other_names() {
        use alloc::string::ToString;
        let text = Digest::of(b"x").to_string();
        assert_eq!(text.len(), Digest::TEXT_LEN);
        assert!(Digest::is_digest_text(&text));
        assert!(Digest::is_digest_text("sha256:"));
        assert!(!Digest::is_digest_text("sessions/x/latest"));
        assert!(!Digest::is_digest_text(&text[7..]));
    }

    #[test]
    fn the_resumable_hasher_is_sha256_however_it_is_fed_and_resumed() {
        let data: alloc::vec::Vec<u8> = (0..1000u32).map(|i| (i * 7 + i / 13) as u8).collect();
        for len in [0usize, 1, 55, 56, 63, 64, 65, 119, 128, 500, 1000] {
            let want = Digest::of(&data[..len]);
            for cut in [0, 1, 31, 63, 64, 65, len / 2, len] {
                let cut = cut.min(len);
                let mut h = ResumableHasher::new();
                for piece in data[..cut].chunks(7) {
                    h.update(piece);
                }
                let state = h.state();
                assert_eq!(state.hashed(), cut as u64);
                let again = HashState::from_bytes(state.as_bytes()).unwrap();
                let mut h = ResumableHasher::resume(&again);
                h.update(&data[cut..len]);
                assert_eq!(h.finish(), want, "len {len}, cut {cut}");
            }
        }
        assert!(HashState::from_bytes(&[0; 39]).is_none());
        assert!(HashState::from_bytes(&[0; 41]).is_none());
    }

    #[test]
    fn empty_is_the_digest_of_no_bytes() {
        assert_eq!(Digest::EMPTY, Digest::of(b""));
        assert_eq!(Digest::EMPTY, Hasher::new().finish());
    }

    #[test]
    fn hex_round_trip_and_refusals() {
        let d = Digest::of(b"x");
        let hex = alloc::string::ToString::to_string(&d.hex());
        assert_eq!(Digest::from_hex(&hex).unwrap(), d);
        for bad in [
            0u8, b'/', b':', b'@', b'A', b'F', b'G', b'`', b'g', 0x80, 0xff,
        ] {
            for at in [0, 1, 62, 63] {
                let mut b = hex.clone().into_bytes();
                b[at] = bad;
                let s = alloc::string::String::from_utf8_lossy(&b).into_owned();
                if s.len() == 64 {
                    let e = Digest::from_hex(&s).unwrap_err();
                    assert_eq!(e.code(), ErrorCode::DigestSyntax);
                }
            }
        }
        for c in 0..=255u8 {
            let valid = c.is_ascii_digit() || (b'a'..=b'f').contains(&c);
            assert_eq!(HEX_VALUE[usize::from(c)] != 0xff, valid);
        }
    }
}
