//! A packet's root (docs/transfer.md, "Storage at the edge"): the small
//! record, kept in the packet's D1 row, from which everything else of a
//! packet stored by a /2 push is found: its pack table, where the chunks of
//! its `packet.json` lie and where the chunks of its layout stream lie. The
//! chunks' names are not kept: a reader hashes the bytes it assembles (the
//! manifest must hash to the packet's digest), so a root is a few bytes per
//! chunk.
//!
//! Encoding, after `"PBROOT01"` and version 1: varint slot count, each slot
//! a byte (0 empty, 1 `packs/` and a 16-byte id, 2 another key: varint
//! length and UTF-8), then the manifest's chunks and the layout's chunks,
//! each list a varint count and per chunk a varint raw size and the
//! location as a layout writes it ([`super::layout::Deltas`], shared by
//! both lists).

use packet_core::Digest;

use super::chunk::ChunkRef;
use super::layout::Deltas;
use super::packs::PackTable;
use crate::binary::{Corrupt, In, Out};

const MAGIC: &[u8; 8] = b"PBROOT01";
const PACK_PREFIX: &str = "packs/";

/// A packet's root.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Root {
    /// Its packs, by slot.
    pub packs: PackTable,
    /// `packet.json`'s chunks, in order (names are placeholders until the
    /// bytes are read and hashed).
    pub manifest: Vec<ChunkRef>,
    /// The layout stream's chunks, in order (names as for `manifest`).
    pub layout: Vec<ChunkRef>,
}

fn hex_id(key: &str) -> Option<[u8; 16]> {
    let hex = key.strip_prefix(PACK_PREFIX)?;
    if hex.len() != 32
        || !hex
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    {
        return None;
    }
    let mut id = [0u8; 16];
    for (i, b) in id.iter_mut().enumerate() {
        *b = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).ok()?;
    }
    Some(id)
}

impl Root {
    /// The bytes kept in the packet's row.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Out::new(MAGIC, 1);
        out.varint(self.packs.len() as u64);
        for slot in self.packs.slots() {
            match slot {
                None => out.bytes(&[0]),
                Some(key) => match hex_id(key) {
                    Some(id) => {
                        out.bytes(&[1]);
                        out.bytes(&id);
                    }
                    None => {
                        out.bytes(&[2]);
                        out.varint(key.len() as u64);
                        out.bytes(key.as_bytes());
                    }
                },
            }
        }
        let mut deltas = Deltas::default();
        for list in [&self.manifest, &self.layout] {
            out.varint(list.len() as u64);
            for c in list {
                out.varint(c.raw);
                deltas.put(&mut out, c);
            }
        }
        out.finish()
    }

    /// Reads a root.
    pub fn decode(bytes: &[u8]) -> Result<Root, Corrupt> {
        let mut r = In::new(bytes, MAGIC, 1, "root")?;
        let n = r.varint_count(1)?;
        let mut slots = Vec::with_capacity(n);
        for _ in 0..n {
            slots.push(match r.bytes(1)?[0] {
                0 => None,
                1 => {
                    let id = r.bytes(16)?;
                    let hex: String = id.iter().map(|b| format!("{b:02x}")).collect();
                    Some(format!("{PACK_PREFIX}{hex}"))
                }
                2 => {
                    let len = r.varint_count(1)?;
                    let key = std::str::from_utf8(r.bytes(len)?)
                        .map_err(|_| Corrupt::new("a root names a key that is not UTF-8"))?;
                    Some(key.to_string())
                }
                t => return Err(Corrupt::new(format!("a root slot of kind {t}"))),
            });
        }
        let packs = PackTable::from_slots(slots)
            .ok_or_else(|| Corrupt::new("a root names a pack twice"))?;
        let mut deltas = Deltas::default();
        let mut lists = [Vec::new(), Vec::new()];
        for list in &mut lists {
            let n = r.varint_count(4)?;
            list.reserve(n);
            for _ in 0..n {
                let raw = r.varint()?;
                list.push(deltas.get(&mut r, &packs, Digest::EMPTY, raw)?);
            }
        }
        r.end()?;
        let [manifest, layout] = lists;
        if manifest.is_empty() {
            return Err(Corrupt::new("a root with no manifest chunk"));
        }
        Ok(Root {
            packs,
            manifest,
            layout,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pillbox_wire::chunks::Encoding;

    #[test]
    fn a_root_round_trips_in_a_few_bytes_a_chunk() {
        let mut packs = PackTable::new();
        packs.slot("packs/00112233445566778899aabbccddeeff");
        packs.slot("uploads/0123");
        packs.slot("packs/ffeeddccbbaa99887766554433221100");
        packs.keep_only(&[true, false, true]);
        let c = |slot, offset, raw, stored| ChunkRef {
            sha256: Digest::EMPTY,
            raw,
            slot,
            offset,
            stored,
            encoding: if stored == raw {
                Encoding::Identity
            } else {
                Encoding::Zstd
            },
        };
        let manifest: Vec<ChunkRef> = (0..256u64).map(|i| c(0, i * 6000, 16_000, 6000)).collect();
        let root = Root {
            packs,
            manifest,
            layout: vec![c(2, 10, 30_000, 30_000), c(2, 30_010, 20_000, 9_000)],
        };
        let bytes = root.encode();
        assert!(bytes.len() < 9 + 40 + 258 * 7, "{} bytes", bytes.len());
        assert_eq!(Root::decode(&bytes).unwrap(), root);
        for cut in 0..bytes.len() {
            assert!(Root::decode(&bytes[..cut]).is_err());
        }
        let mut other = root.clone();
        other.layout[0].slot = 1;
        assert!(Root::decode(&other.encode()).is_err(), "an empty slot");
    }
}
