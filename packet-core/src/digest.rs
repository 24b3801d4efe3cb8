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
        for (i, pair) in b.chunks_exact(2).enumerate() {
            out[i] = (hex_val(pair[0])? << 4) | hex_val(pair[1])?;
        }
        Ok(Digest(out))
    }
}

fn hex_val(c: u8) -> Result<u8, Error> {
    match c {
        b'0'..=b'9' => Ok(c - b'0'),
        b'a'..=b'f' => Ok(c - b'a' + 10),
        _ => Err(Error::new(
            ErrorCode::DigestSyntax,
            "a sha256 is written in lowercase hex digits (0-9, a-f)",
        )),
    }
}

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
