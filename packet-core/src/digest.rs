//! SHA-256 digests and their text form, `sha256:<64 lowercase hex>`.

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
        match s.strip_prefix("sha256:") {
            Some(hex) => Digest::from_hex(hex),
            None => Err(Error::new(
                ErrorCode::DigestSyntax,
                "a packet digest starts with \"sha256:\"",
            )),
        }
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

#[cfg(test)]
mod tests {
    use super::*;

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
