//! What a push's frames left behind (docs/transfer.md, "Push", step 3): for
//! every frame a request carried (a part, or the create body of a push that
//! did not complete at once), where its chunk now lives (in the pack the
//! request wrote, or where the store held it already) and, for a frame that
//! is a whole body, what the body holds (screened as it arrived, for each
//! class its members have; only what is not empty). `complete` builds the
//! packet from these records with no per-chunk lookups. A record is an R2
//! object (`pushes/<id>/parts/<n>.<attempt>`): a part of 65,536 frames
//! needs 3.6 MB, more than a D1 row holds.
//!
//! Encoding (big-endian): `"PBPART02"`, version 2, `u32` pack count, each
//! pack key as `u16` length + UTF-8, `u32` frame count, then per frame its
//! 32-byte SHA-256, `u32` raw size, `u32` pack index, `u64` offset, `u32`
//! stored size and `u8` encoding; then `u32` length and the findings as
//! JSON (`[[frame index, class, findings], …]`); then the bodies proven as
//! they arrived ([`crate::push::in_order`]): `u32` count, each body's
//! 32-byte SHA-256, `u64` size, `u32` first frame, `u32` frame count, its
//! hash state (`u16` length + bytes), `u16` scan count, each scan's `u8`
//! class and snapshot (`u32` length + bytes), then `u32` length and its
//! findings as JSON (`[[class, findings], …]`). A version 2 record (no
//! bodies proven) is still read.

use packet_core::{Body, BodyFindings, Digest, HashState};
use pillbox_wire::chunks::Encoding;

use super::in_order::Early;
use super::prove::End;
use crate::binary::{Corrupt, In, Out};
use crate::storage::chunk::ChunkRef;
use crate::storage::findings::KeptBody;

const MAGIC: &[u8; 8] = b"PBPART03";
const VERSION: u8 = 3;
const MAGIC_2: &[u8; 8] = b"PBPART02";

/// A request's frames and where they live.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PartRecord {
    /// The packs the frames live in.
    pub packs: Vec<String>,
    /// Every frame, in the request's order.
    pub frames: Vec<ChunkRef>,
    /// `(frame index, class, findings)` of frames that are bodies holding
    /// something.
    pub findings: Vec<(u32, u8, BodyFindings)>,
    /// The bodies proven from runs of its frames as they arrived.
    pub early: Vec<Early>,
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

    /// Each frame with the key of its pack.
    pub fn located(&self) -> impl Iterator<Item = (&str, ChunkRef)> {
        self.frames
            .iter()
            .map(|f| (self.packs[f.slot as usize].as_str(), *f))
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
            out.u32(f.raw as u32);
            out.u32(f.slot);
            out.u64(f.offset);
            out.u32(f.stored as u32);
            out.bytes(&[f.encoding.byte()]);
        }
        let findings: Vec<(u32, u8, KeptBody)> = self
            .findings
            .iter()
            .map(|(i, c, f)| (*i, *c, KeptBody::of(f)))
            .collect();
        let json = serde_json::to_vec(&findings).unwrap_or_else(|_| b"[]".to_vec());
        out.u32(json.len() as u32);
        out.bytes(&json);
        out.u32(self.early.len() as u32);
        for e in &self.early {
            out.digest(&e.body.sha256);
            out.u64(e.body.size);
            out.u32(e.first);
            out.u32(e.count);
            let hash = e.end.hash.as_bytes();
            out.u16(hash.len() as u16);
            out.bytes(hash);
            out.u16(e.end.scans.len() as u16);
            for (class, snapshot) in &e.end.scans {
                out.bytes(&[*class]);
                out.u32(snapshot.len() as u32);
                out.bytes(snapshot);
            }
            let findings: Vec<(u8, KeptBody)> = e
                .findings
                .iter()
                .map(|(c, f)| (*c, KeptBody::of(f)))
                .collect();
            let json = serde_json::to_vec(&findings).unwrap_or_else(|_| b"[]".to_vec());
            out.u32(json.len() as u32);
            out.bytes(&json);
        }
        out.finish()
    }

    /// Reads a record.
    pub fn decode(bytes: &[u8]) -> Result<PartRecord, Corrupt> {
        let old = bytes.starts_with(MAGIC_2);
        let mut r = if old {
            In::new(bytes, MAGIC_2, 2, "part record")?
        } else {
            In::new(bytes, MAGIC, VERSION, "part record")?
        };
        let mut record = PartRecord::default();
        for _ in 0..r.count(2)? {
            record.packs.push(r.text()?);
        }
        let n = r.count(53)?;
        record.frames.reserve(n);
        for _ in 0..n {
            let sha256: Digest = r.digest()?;
            let raw = u64::from(r.u32()?);
            let slot = r.u32()?;
            let offset = r.u64()?;
            let stored = u64::from(r.u32()?);
            let encoding = Encoding::from_byte(r.bytes(1)?[0])
                .ok_or_else(|| Corrupt::new("a part record names an unknown encoding"))?;
            if slot as usize >= record.packs.len() {
                return Err(Corrupt::new("a part record names a pack it does not list"));
            }
            record.frames.push(ChunkRef {
                sha256,
                raw,
                slot,
                offset,
                stored,
                encoding,
            });
        }
        let len = r.count(1)?;
        let json = r.bytes(len)?;
        let findings: Vec<(u32, u8, KeptBody)> = serde_json::from_slice(json)
            .map_err(|e| Corrupt::new(format!("a part record's findings: {e}")))?;
        record.findings = findings
            .into_iter()
            .map(|(i, c, f)| (i, c, f.findings()))
            .collect();
        if !old {
            for _ in 0..r.count(56)? {
                record.early.push(early(&mut r, record.frames.len())?);
            }
        }
        r.end()?;
        Ok(record)
    }
}

fn early(r: &mut In<'_>, frames: usize) -> Result<Early, Corrupt> {
    let sha256 = r.digest()?;
    let size = r.u64()?;
    let (first, count) = (r.u32()?, r.u32()?);
    if count == 0 || u64::from(first) + u64::from(count) > frames as u64 {
        return Err(Corrupt::new(
            "a part record proves a body from frames it does not list",
        ));
    }
    let n = usize::from(r.u16()?);
    let hash = HashState::from_bytes(r.bytes(n)?)
        .ok_or_else(|| Corrupt::new("a part record holds a bad hash state"))?;
    let mut scans = Vec::new();
    for _ in 0..r.u16()? {
        let class = r.bytes(1)?[0];
        let len = r.count(1)?;
        scans.push((class, r.bytes(len)?.to_vec()));
    }
    let len = r.count(1)?;
    let findings: Vec<(u8, KeptBody)> = serde_json::from_slice(r.bytes(len)?)
        .map_err(|e| Corrupt::new(format!("a part record's findings: {e}")))?;
    Ok(Early {
        body: Body { sha256, size },
        first,
        count,
        end: End { hash, scans },
        findings: findings
            .into_iter()
            .map(|(c, f)| (c, f.findings()))
            .collect(),
    })
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
        r.frames
            .push(ChunkRef::identity(Digest::of(b"a"), own, 0, 1));
        r.frames.push(ChunkRef {
            sha256: Digest::of(b"b"),
            raw: 900,
            slot: old,
            offset: 4096,
            stored: 12,
            encoding: Encoding::Zstd,
        });
        r.findings.push((
            1,
            3,
            BodyFindings {
                secrets: vec![(2, "private-key")],
                git: vec![(4, "core.fsmonitor".into(), "runs")],
            },
        ));
        assert_eq!(PartRecord::decode(&r.encode()).unwrap(), r);
        // A version 2 record is read as one with no body proven.
        let mut v2 = r.encode();
        v2[..9].copy_from_slice(b"PBPART02\x02");
        v2.truncate(v2.len() - 4);
        assert_eq!(PartRecord::decode(&v2).unwrap(), r);
        let mut hasher = packet_core::assembled::BodyHasher::new(Body {
            sha256: Digest::of(b"ab"),
            size: 2,
        });
        hasher.update(b"ab").unwrap();
        r.early.push(Early {
            body: hasher.expected(),
            first: 0,
            count: 2,
            end: End {
                hash: hasher.state(),
                scans: vec![(3, vec![1, 2, 3])],
            },
            findings: vec![(3, BodyFindings::default())],
        });
        assert_eq!(PartRecord::decode(&r.encode()).unwrap(), r);
        let mut beyond = r.clone();
        beyond.early[0].count = 3;
        assert!(PartRecord::decode(&beyond.encode()).is_err());
        let located: Vec<&str> = r.located().map(|(k, _)| k).collect();
        assert_eq!(located, ["packs/new", "uploads/old"]);
        r.frames[1].slot = 7;
        assert!(PartRecord::decode(&r.encode()).is_err());
    }
}
