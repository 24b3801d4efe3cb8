//! What a received push part left behind (docs/transfer.md, "Parts"): for
//! every frame it carried, where that chunk now lives: in the pack the part
//! wrote, or where the store already held it. `complete` builds the layout
//! from these records with no per-chunk lookups. A record is an R2 object
//! (`pushes/<id>/parts/<n>.<attempt>`): a part of 65,536 small frames
//! needs 3 MB, more than a D1 row holds.
//!
//! Encoding (big-endian): `"PBPART01"`, version 1, `u32` pack count, each
//! pack key as `u16` length + UTF-8, `u32` frame count, then per frame its
//! 32-byte SHA-256, `u32` pack index, `u64` offset, `u32` size.

use packet_core::Digest;

use crate::binary::{Corrupt, In, Out};

const MAGIC: &[u8; 8] = b"PBPART01";
const VERSION: u8 = 1;

/// Where one frame's chunk lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrameAt {
    /// The chunk's SHA-256.
    pub sha256: Digest,
    /// Index into [`PartRecord::packs`].
    pub pack: u32,
    /// Its first byte in the pack.
    pub offset: u64,
    /// Its size.
    pub size: u32,
}

/// A received part's frames and where they live.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PartRecord {
    /// The packs the frames live in.
    pub packs: Vec<String>,
    /// Every frame, in the part's order.
    pub frames: Vec<FrameAt>,
}

impl PartRecord {
    /// The index of pack `key`, added if new.
    pub fn pack(&mut self, key: &str) -> u32 {
        match self.packs.iter().position(|p| p == key) {
            Some(i) => i as u32,
            None => {
                self.packs.push(key.to_string());
                (self.packs.len() - 1) as u32
            }
        }
    }

    /// The object's bytes.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Out::new(MAGIC, VERSION);
        out.u32(self.packs.len() as u32);
        for p in &self.packs {
            out.text(p);
        }
        out.u32(self.frames.len() as u32);
        for f in &self.frames {
            out.digest(&f.sha256);
            out.u32(f.pack);
            out.u64(f.offset);
            out.u32(f.size);
        }
        out.finish()
    }

    /// Reads a record.
    pub fn decode(bytes: &[u8]) -> Result<PartRecord, Corrupt> {
        let mut r = In::new(bytes, MAGIC, VERSION, "part record")?;
        let mut record = PartRecord::default();
        for _ in 0..r.count(2)? {
            record.packs.push(r.text()?);
        }
        let n = r.count(48)?;
        record.frames.reserve(n);
        for _ in 0..n {
            let frame = FrameAt {
                sha256: r.digest()?,
                pack: r.u32()?,
                offset: r.u64()?,
                size: r.u32()?,
            };
            if frame.pack as usize >= record.packs.len() {
                return Err(Corrupt::new("a part record names a pack it does not list"));
            }
            record.frames.push(frame);
        }
        r.end()?;
        Ok(record)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_refuses_a_bad_pack_index() {
        let mut r = PartRecord::default();
        let own = r.pack("packs/new");
        let old = r.pack("uploads/old");
        assert_eq!(r.pack("packs/new"), own);
        r.frames.push(FrameAt {
            sha256: Digest::of(b"a"),
            pack: own,
            offset: 0,
            size: 1,
        });
        r.frames.push(FrameAt {
            sha256: Digest::of(b"b"),
            pack: old,
            offset: 4096,
            size: 1,
        });
        assert_eq!(PartRecord::decode(&r.encode()).unwrap(), r);
        r.frames[1].pack = 7;
        assert!(PartRecord::decode(&r.encode()).is_err());
    }
}
