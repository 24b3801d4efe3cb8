//! The Worker's own binary objects (layouts, roots, push states, part
//! records): big-endian integers, varints and length-prefixed text after an
//! 8-byte magic and a version byte. [`Out`] writes them, [`In`] reads them back and turns any
//! inconsistency into [`Corrupt`] instead of a panic.

use packet_core::Digest;

/// A stored object that does not decode: the store itself is damaged (the
/// Worker wrote every such object), so it is a 500, never a refusal.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Corrupt(pub String);

impl Corrupt {
    /// A corruption described by `what`.
    pub fn new(what: impl Into<String>) -> Corrupt {
        Corrupt(what.into())
    }
}

impl core::fmt::Display for Corrupt {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "a stored object is corrupt: {}", self.0)
    }
}

/// Writes an object.
pub struct Out(pub Vec<u8>);

impl Out {
    /// A new object of `kind` (its 8-byte magic) at `version`.
    pub fn new(magic: &[u8; 8], version: u8) -> Out {
        let mut bytes = Vec::with_capacity(64);
        bytes.extend_from_slice(magic);
        bytes.push(version);
        Out(bytes)
    }

    /// Appends a `u16`.
    pub fn u16(&mut self, v: u16) {
        self.0.extend_from_slice(&v.to_be_bytes());
    }

    /// Appends a `u32`.
    pub fn u32(&mut self, v: u32) {
        self.0.extend_from_slice(&v.to_be_bytes());
    }

    /// Appends a `u64`.
    pub fn u64(&mut self, v: u64) {
        self.0.extend_from_slice(&v.to_be_bytes());
    }

    /// Appends a SHA-256.
    pub fn digest(&mut self, d: &Digest) {
        self.0.extend_from_slice(&d.0);
    }

    /// Appends an unsigned LEB128 varint (1 to 10 bytes).
    pub fn varint(&mut self, mut v: u64) {
        while v >= 0x80 {
            self.0.push((v as u8) | 0x80);
            v >>= 7;
        }
        self.0.push(v as u8);
    }

    /// Appends a signed varint (zigzag, then LEB128).
    pub fn svarint(&mut self, v: i64) {
        self.varint(((v << 1) ^ (v >> 63)) as u64);
    }

    /// Appends raw bytes.
    pub fn bytes(&mut self, b: &[u8]) {
        self.0.extend_from_slice(b);
    }

    /// Appends text of at most 65,535 bytes, prefixed by its length.
    pub fn text(&mut self, s: &str) {
        let bytes = &s.as_bytes()[..s.len().min(u16::MAX as usize)];
        self.u16(bytes.len() as u16);
        self.0.extend_from_slice(bytes);
    }

    /// The object's bytes.
    pub fn finish(self) -> Vec<u8> {
        self.0
    }
}

/// Reads an object.
pub struct In<'a> {
    bytes: &'a [u8],
    at: usize,
    what: &'static str,
}

impl<'a> In<'a> {
    /// Starts reading `bytes`, which must be a `what` (its magic) at
    /// `version`.
    pub fn new(
        bytes: &'a [u8],
        magic: &[u8; 8],
        version: u8,
        what: &'static str,
    ) -> Result<In<'a>, Corrupt> {
        if bytes.len() < 9 || &bytes[..8] != magic {
            return Err(Corrupt::new(format!("not a {what}")));
        }
        if bytes[8] != version {
            return Err(Corrupt::new(format!(
                "a {what} of version {}, this Worker reads version {version}",
                bytes[8]
            )));
        }
        Ok(In { bytes, at: 9, what })
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], Corrupt> {
        let end = self
            .at
            .checked_add(n)
            .filter(|&e| e <= self.bytes.len())
            .ok_or_else(|| Corrupt::new(format!("a {} ends early", self.what)))?;
        let out = &self.bytes[self.at..end];
        self.at = end;
        Ok(out)
    }

    /// Reads a `u16`.
    pub fn u16(&mut self) -> Result<u16, Corrupt> {
        Ok(u16::from_be_bytes(
            self.take(2)?.try_into().unwrap_or([0; 2]),
        ))
    }

    /// Reads a `u32`.
    pub fn u32(&mut self) -> Result<u32, Corrupt> {
        Ok(u32::from_be_bytes(
            self.take(4)?.try_into().unwrap_or([0; 4]),
        ))
    }

    /// Reads a `u64`.
    pub fn u64(&mut self) -> Result<u64, Corrupt> {
        Ok(u64::from_be_bytes(
            self.take(8)?.try_into().unwrap_or([0; 8]),
        ))
    }

    /// Reads a SHA-256.
    pub fn digest(&mut self) -> Result<Digest, Corrupt> {
        Ok(Digest(self.take(32)?.try_into().unwrap_or([0; 32])))
    }

    /// Reads an unsigned LEB128 varint.
    pub fn varint(&mut self) -> Result<u64, Corrupt> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let b = self.take(1)?[0];
            v |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                if shift == 63 && b > 1 {
                    break;
                }
                return Ok(v);
            }
        }
        Err(Corrupt::new(format!(
            "a {} holds a varint over 64 bits",
            self.what
        )))
    }

    /// Reads a signed (zigzag) varint.
    pub fn svarint(&mut self) -> Result<i64, Corrupt> {
        let v = self.varint()?;
        Ok(((v >> 1) as i64) ^ -((v & 1) as i64))
    }

    /// Reads `n` raw bytes.
    pub fn bytes(&mut self, n: usize) -> Result<&'a [u8], Corrupt> {
        self.take(n)
    }

    /// A varint count of items of at least `item_bytes` each, checked
    /// against what is left.
    pub fn varint_count(&mut self, item_bytes: usize) -> Result<usize, Corrupt> {
        let n = self.varint()?;
        if n.saturating_mul(item_bytes.max(1) as u64) > (self.bytes.len() - self.at) as u64 {
            return Err(Corrupt::new(format!(
                "a {} counts {n} items it does not hold",
                self.what
            )));
        }
        Ok(n as usize)
    }

    /// Whether every byte was read.
    pub fn is_empty(&self) -> bool {
        self.at == self.bytes.len()
    }

    /// Reads length-prefixed text.
    pub fn text(&mut self) -> Result<String, Corrupt> {
        let n = self.u16()? as usize;
        String::from_utf8(self.take(n)?.to_vec())
            .map_err(|_| Corrupt::new(format!("a {} holds text that is not UTF-8", self.what)))
    }

    /// A count of items of at least `item_bytes` each, checked against what
    /// is left so that a corrupt count cannot ask for a huge allocation.
    pub fn count(&mut self, item_bytes: usize) -> Result<usize, Corrupt> {
        let n = self.u32()? as usize;
        if n.saturating_mul(item_bytes.max(1)) > self.bytes.len() - self.at {
            return Err(Corrupt::new(format!(
                "a {} counts {n} items it does not hold",
                self.what
            )));
        }
        Ok(n)
    }

    /// Checks that nothing follows.
    pub fn end(self) -> Result<(), Corrupt> {
        if self.at == self.bytes.len() {
            Ok(())
        } else {
            Err(Corrupt::new(format!(
                "{} bytes follow the end of a {}",
                self.bytes.len() - self.at,
                self.what
            )))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_refusals() {
        let mut out = Out::new(b"PBTEST01", 1);
        out.u16(7);
        out.u32(1 << 20);
        out.u64(u64::MAX);
        out.digest(&Digest::EMPTY);
        out.text("packs/ab");
        let bytes = out.finish();
        let mut r = In::new(&bytes, b"PBTEST01", 1, "test").unwrap();
        assert_eq!(r.u16().unwrap(), 7);
        assert_eq!(r.u32().unwrap(), 1 << 20);
        assert_eq!(r.u64().unwrap(), u64::MAX);
        assert_eq!(r.digest().unwrap(), Digest::EMPTY);
        assert_eq!(r.text().unwrap(), "packs/ab");
        r.end().unwrap();
        assert!(In::new(&bytes, b"PBTEST01", 2, "test").is_err());
        assert!(In::new(&bytes[..5], b"PBTEST01", 1, "test").is_err());
        let mut short = In::new(&bytes[..12], b"PBTEST01", 1, "test").unwrap();
        short.u16().unwrap();
        assert!(short.u32().is_err());
        let mut huge = Out::new(b"PBTEST01", 1);
        huge.u32(u32::MAX);
        let huge = huge.finish();
        assert!(In::new(&huge, b"PBTEST01", 1, "test")
            .unwrap()
            .count(1)
            .is_err());
    }

    #[test]
    fn varints_round_trip() {
        let values = [0u64, 1, 127, 128, 300, u32::MAX as u64, u64::MAX];
        let signed = [0i64, -1, 1, -64, 64, i64::MIN, i64::MAX];
        let mut out = Out::new(b"PBTEST01", 1);
        for v in values {
            out.varint(v);
        }
        for v in signed {
            out.svarint(v);
        }
        let bytes = out.finish();
        let mut r = In::new(&bytes, b"PBTEST01", 1, "test").unwrap();
        for v in values {
            assert_eq!(r.varint().unwrap(), v);
        }
        for v in signed {
            assert_eq!(r.svarint().unwrap(), v);
        }
        r.end().unwrap();
        let mut long = Out::new(b"PBTEST01", 1);
        long.bytes(&[0xff; 11]);
        let long = long.finish();
        assert!(In::new(&long, b"PBTEST01", 1, "test")
            .unwrap()
            .varint()
            .is_err());
    }
}
