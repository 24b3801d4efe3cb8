//! A stored packet as reads and pushes see it, whatever form it is stored
//! in (docs/transfer.md, "Storage at the edge"): its manifest and its
//! bytes, where every body's chunks lie ([`Layout`]), where the chunks of
//! its `packet.json` lie, and (for a packet stored by a /2 push) where the
//! chunks of its layout stream lie, each named by the SHA-256 of its raw
//! bytes. Built from bytes the Worker fetched; pure.

use std::collections::HashMap;

use packet_core::offsets::Offsets;
use packet_core::{Body, Digest, Findings, Limits, Manifest, Member};
use pillbox_wire::chunking::MANIFEST;
use pillbox_wire::recipes::{BodyRecipe, ChunkName, Recipes, Run};
use pillbox_wire::ApiCode;

use super::chunk::{ChunkRef, Name};
use super::cut::cut;
use super::findings::KeptFindings;
use super::layout::Layout;
use super::root::Root;
use crate::binary::Corrupt;
use crate::problem::Problem;

/// How a stored packet's bytes are kept.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Form {
    /// One R2 object holding the packet.
    Whole,
    /// Pushed before format /2: a manifest object and a layout object.
    PushedV1,
    /// Pushed as /2: a root naming chunks of the manifest and the layout.
    Packed,
}

/// Where a read of a member's body is served from
/// ([`Stored::body_read`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BodyRead<'a> {
    /// Nothing: the body is empty.
    Nothing,
    /// A range of one object: the body is one chunk stored as it is.
    Object {
        /// The object's key.
        key: &'a str,
        /// The range's first byte in the object.
        offset: u64,
        /// Its length.
        length: u64,
    },
    /// Bytes of the packet, rebuilt from its chunks ([`super::rebuild`]).
    Packet(core::ops::Range<u64>),
}

/// A stored packet, ready to be read or built on.
#[derive(Debug)]
pub struct Stored {
    /// Its digest.
    pub digest: Digest,
    /// How it is kept.
    pub form: Form,
    /// Its manifest.
    pub manifest: Manifest,
    /// `packet.json`'s bytes.
    pub json: Vec<u8>,
    /// Where its members lie.
    pub offsets: Offsets,
    /// Where its bodies lie, and its pack table.
    pub layout: Layout,
    /// `packet.json`'s chunks, named, in order (slots in the layout's table).
    pub manifest_chunks: Vec<ChunkRef>,
    /// The layout stream's chunks, named, in order (packed only).
    pub layout_chunks: Vec<ChunkRef>,
    /// What its bodies hold, when it was recorded (`None`: stored before
    /// the store kept findings; its bodies are scanned when reused).
    pub findings: Option<KeptFindings>,
}

fn parse(json: &[u8], what: &str) -> Result<Manifest, Corrupt> {
    // The store verified it before indexing it; the format's limits are
    // the widest any stored packet was accepted under.
    Manifest::parse(json, &Limits::FORMAT)
        .map_err(|e| Corrupt::new(format!("{what}: the stored manifest does not parse: {e}")))
}

/// The chunks of `json` cut as a client cuts it, at `at` in pack `slot`,
/// stored as they are.
fn manifest_chunks_in(json: &[u8], slot: u32, at: u64) -> Vec<ChunkRef> {
    cut(json, &MANIFEST)
        .into_iter()
        .map(|r| {
            ChunkRef::identity(
                Digest::of(&json[r.clone()]),
                slot,
                at + r.start as u64,
                r.len() as u64,
            )
        })
        .collect()
}

/// Names `chunks` (whose raw sizes cut `bytes`) by hashing their bytes.
fn name_chunks(bytes: &[u8], chunks: &mut [ChunkRef]) -> Result<(), Corrupt> {
    let mut at = 0usize;
    for c in chunks.iter_mut() {
        let end = at
            .checked_add(c.raw as usize)
            .filter(|&e| e <= bytes.len())
            .ok_or_else(|| Corrupt::new("a root's chunks are longer than their bytes"))?;
        c.sha256 = Digest::of(&bytes[at..end]);
        at = end;
    }
    if at != bytes.len() {
        return Err(Corrupt::new("a root's chunks are shorter than their bytes"));
    }
    Ok(())
}

impl Stored {
    /// A packet stored whole in the object `key`; `json` is its
    /// `packet.json`, read from the object at `manifest_offset`.
    pub fn whole(
        digest: Digest,
        key: &str,
        json: Vec<u8>,
        manifest_offset: u64,
        findings: Option<KeptFindings>,
    ) -> Result<Stored, Corrupt> {
        let manifest = parse(&json, key)?;
        let offsets = Offsets::of(&manifest);
        let layout = Layout::whole(key, &manifest, &offsets);
        let manifest_chunks = manifest_chunks_in(&json, 0, manifest_offset);
        Ok(Stored {
            digest,
            form: Form::Whole,
            manifest,
            json,
            offsets,
            layout,
            manifest_chunks,
            layout_chunks: Vec::new(),
            findings,
        })
    }

    /// A packet pushed before format /2: its manifest object `manifest_key`
    /// holding `json`, and its layout object's bytes.
    pub fn pushed_v1(
        digest: Digest,
        manifest_key: &str,
        json: Vec<u8>,
        layout: &[u8],
        findings: Option<KeptFindings>,
    ) -> Result<Stored, Corrupt> {
        let manifest = parse(&json, manifest_key)?;
        let offsets = Offsets::of(&manifest);
        let mut layout = Layout::decode_v1(layout, &manifest)?;
        let slot = layout.packs_mut().slot(manifest_key);
        let manifest_chunks = manifest_chunks_in(&json, slot, 0);
        Ok(Stored {
            digest,
            form: Form::PushedV1,
            manifest,
            json,
            offsets,
            layout,
            manifest_chunks,
            layout_chunks: Vec::new(),
            findings,
        })
    }

    /// A packet stored by a /2 push: its root, and the raw bytes of its
    /// manifest's chunks and of its layout's chunks, each in order. The
    /// manifest must hash to the packet's digest.
    pub fn packed(
        digest: Digest,
        root: Root,
        json: Vec<u8>,
        layout: Vec<u8>,
        findings: Option<KeptFindings>,
    ) -> Result<Stored, Corrupt> {
        if Digest::of(&json) != digest {
            return Err(Corrupt::new(format!(
                "the manifest of {digest} assembled from its chunks does not hash to it"
            )));
        }
        let Root {
            packs,
            mut manifest,
            layout: mut layout_chunks,
        } = root;
        name_chunks(&json, &mut manifest)?;
        name_chunks(&layout, &mut layout_chunks)?;
        let parsed = parse(&json, &digest.to_string())?;
        let offsets = Offsets::of(&parsed);
        let layout = Layout::decode(&layout, &parsed, packs)?;
        Ok(Stored {
            digest,
            form: Form::Packed,
            manifest: parsed,
            json,
            offsets,
            layout,
            manifest_chunks: manifest,
            layout_chunks,
            findings,
        })
    }

    /// A packet the Worker just stored from a push, from the parts it has
    /// at hand (nothing is read back).
    #[allow(clippy::too_many_arguments)]
    pub fn from_parts(
        digest: Digest,
        manifest: Manifest,
        json: Vec<u8>,
        layout: Layout,
        manifest_chunks: Vec<ChunkRef>,
        layout_chunks: Vec<ChunkRef>,
        findings: Option<KeptFindings>,
    ) -> Stored {
        let offsets = Offsets::of(&manifest);
        Stored {
            digest,
            form: Form::Packed,
            manifest,
            json,
            offsets,
            layout,
            manifest_chunks,
            layout_chunks,
            findings,
        }
    }

    /// The member at `path`, which must be a file, and its index: 404
    /// `not_found` when the packet has none, 404 `not_a_file` for a
    /// directory or a symlink.
    pub fn file(&self, path: &str) -> Result<(usize, &Member), Problem> {
        let digest = self.digest;
        let (index, member) = self
            .manifest
            .find(path)
            .ok_or_else(|| Problem::not_found(format!("packet {digest} has no member {path:?}")))?;
        if member.kind() != packet_core::Kind::File {
            let mut p = Problem::new(
                ApiCode::NotAFile,
                format!("{path:?} is a {}, it has no bytes", member.kind().as_str()),
                "read the manifest for directories and symlink targets",
            );
            p.error.refusal.details.path = Some(member.path.clone().into());
            return Err(p);
        }
        Ok((index, member))
    }

    /// Where bytes `start..start + length` of the body of member `index`
    /// are read: one range read when the body is one chunk stored as it
    /// is, else the packet's bytes rebuilt.
    pub fn body_read(
        &self,
        index: usize,
        start: u64,
        length: u64,
    ) -> Result<BodyRead<'_>, Corrupt> {
        Ok(match self.layout.chunks(index) {
            [] => BodyRead::Nothing,
            [one] if one.is_identity() && length > 0 => BodyRead::Object {
                key: self.layout.packs().key(one.slot).ok_or_else(|| {
                    Corrupt::new(format!("packet {}: a chunk in an empty slot", self.digest))
                })?,
                offset: one.offset + start,
                length,
            },
            _ => {
                let at = self.offsets.data_offsets()[index] + start;
                BodyRead::Packet(at..at + length)
            }
        })
    }

    /// Bytes of memory it takes, roughly (for the isolate's cache).
    pub fn weight(&self) -> usize {
        // The parsed manifest takes a few times its JSON.
        self.json.len() * 3
            + self.layout.weight()
            + (self.manifest_chunks.len() + self.layout_chunks.len())
                * core::mem::size_of::<ChunkRef>()
    }

    /// Every chunk a client may fetch by name
    /// (`POST /v1/packets/{digest}/chunks`): the manifest's chunks, the
    /// chunks of bodies of several chunks, and bodies of at most 1 MiB that
    /// are one chunk.
    pub fn fetchable(&self) -> HashMap<Digest, ChunkRef> {
        let mut out = HashMap::new();
        for c in &self.manifest_chunks {
            out.entry(c.sha256).or_insert(*c);
        }
        for c in self.layout.all_chunks() {
            if c.raw <= u64::from(pillbox_wire::chunking::MAX_CHUNK) {
                out.entry(c.sha256).or_insert(*c);
            }
        }
        out
    }

    /// The names of the manifest's chunks, in order.
    pub fn manifest_recipe(&self) -> Vec<Name> {
        self.manifest_chunks.iter().map(ChunkRef::name).collect()
    }

    /// The recipes document of the packet (`GET …/recipes`): its
    /// manifest's chunks and the recipe of every body of several chunks,
    /// each body once, in manifest order. Runs of chunks that are
    /// consecutive chunks of a body of one of `bases` are copy runs of it.
    pub fn recipes(&self, bases: &[&Stored]) -> Recipes {
        // Each chunk name of the bases' bodies of several chunks: where.
        let mut index: HashMap<Name, (Body, usize, &[ChunkRef])> = HashMap::new();
        for base in bases {
            for (i, m) in base.manifest.members.iter().enumerate() {
                let chunks = base.layout.chunks(i);
                let Some(body) = m.body().filter(|_| chunks.len() > 1) else {
                    continue;
                };
                for (at, c) in chunks.iter().enumerate() {
                    index.entry(c.name()).or_insert((body, at, chunks));
                }
            }
        }
        let mut seen = std::collections::HashSet::new();
        let mut bodies = Vec::new();
        for (i, m) in self.manifest.members.iter().enumerate() {
            let chunks = self.layout.chunks(i);
            let Some(body) = m.body().filter(|_| chunks.len() > 1) else {
                continue;
            };
            if !seen.insert(body) {
                continue;
            }
            let mut runs = Vec::new();
            let mut k = 0;
            while k < chunks.len() {
                let c = chunks[k];
                let Some(&(from, at, theirs)) = index.get(&c.name()) else {
                    runs.push(Run::Chunk(ChunkName {
                        sha256: c.sha256,
                        size: c.raw as u32,
                    }));
                    k += 1;
                    continue;
                };
                let mut n = 1;
                while k + n < chunks.len()
                    && at + n < theirs.len()
                    && chunks[k + n].name() == theirs[at + n].name()
                {
                    n += 1;
                }
                runs.push(Run::Copy {
                    body: from,
                    first: at as u32,
                    count: n as u32,
                });
                k += n;
            }
            bodies.push(BodyRecipe { body, runs });
        }
        Recipes {
            manifest: self
                .manifest_chunks
                .iter()
                .map(|c| ChunkName {
                    sha256: c.sha256,
                    size: c.raw as u32,
                })
                .collect(),
            bodies,
        }
    }

    /// The packet's findings, for its log line (`None` when not kept).
    pub fn findings(&self) -> Option<Findings> {
        self.findings
            .as_ref()
            .map(|f| f.to_findings(&self.manifest))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::layout::LayoutBuilder;
    use crate::storage::packs::PackTable;
    use packet_core::in_memory::{build, Source};
    use pillbox_wire::chunks::Encoding;

    fn sample(n: usize) -> packet_core::in_memory::Built {
        let mut sources = vec![Source::Dir {
            path: "workspace".into(),
        }];
        for i in 0..n {
            sources.push(Source::File {
                path: format!("workspace/file-{i:05}.txt"),
                contents: format!("body {i}\n").into_bytes(),
                executable: false,
            });
        }
        build(&sources, None, vec![], &Limits::FORMAT).unwrap()
    }

    #[test]
    fn a_whole_packets_manifest_is_cut_as_a_client_cuts_it() {
        let built = sample(800);
        let json = built.manifest.to_canonical_json();
        assert!(json.len() > 64 << 10);
        let s = Stored::whole(built.digest, "uploads/x", json.clone(), 512, None).unwrap();
        let mut at = 512;
        for c in &s.manifest_chunks {
            let r = (at - 512) as usize..(at - 512 + c.raw) as usize;
            assert_eq!(c.sha256, Digest::of(&json[r]));
            assert_eq!(
                &built.bytes[at as usize..(at + c.raw) as usize],
                &json[(at - 512) as usize..(at - 512 + c.raw) as usize]
            );
            at += c.raw;
        }
        assert!(s.manifest_chunks.len() > 2);
        assert_eq!(s.fetchable().len(), s.manifest_chunks.len() + 800);
    }

    #[test]
    fn a_member_read_is_a_file_of_the_packet() {
        let built = sample(2);
        let json = built.manifest.to_canonical_json();
        let s = Stored::whole(built.digest, "uploads/x", json, 512, None).unwrap();
        let (index, member) = s.file("workspace/file-00001.txt").unwrap();
        assert_eq!((index, member.size()), (2, 7));
        let err = s.file("workspace/nope").unwrap_err();
        assert_eq!((err.status, err.error.code()), (404, "not_found"));
        let err = s.file("workspace").unwrap_err();
        assert_eq!(err.error.code(), "not_a_file");
        assert_eq!(err.error.refusal.details.path.as_deref(), Some("workspace"));
    }

    #[test]
    fn a_body_of_one_chunk_as_stored_is_one_range_read_and_any_other_is_rebuilt() {
        let built = sample(2);
        let json = built.manifest.to_canonical_json();
        let whole = Stored::whole(built.digest, "uploads/x", json.clone(), 512, None).unwrap();
        let (index, _) = whole.file("workspace/file-00001.txt").unwrap();
        let at = whole.offsets.data_offsets()[index];
        assert_eq!(
            whole.body_read(index, 2, 3),
            Ok(BodyRead::Object {
                key: "uploads/x",
                offset: at + 2,
                length: 3
            })
        );
        assert_eq!(&built.bytes[at as usize + 2..at as usize + 5], b"dy ");
        assert_eq!(
            whole.body_read(0, 0, 0),
            Ok(BodyRead::Nothing),
            "a directory"
        );
        // Stored compressed: rebuilt; in an empty slot: the store is damaged.
        let laid = |encoding, slot| {
            let mut packs = PackTable::new();
            packs.slot("packs/p");
            let mut b = LayoutBuilder::new(packs);
            for m in &built.manifest.members {
                if let Some(body) = m.body() {
                    b.push(ChunkRef {
                        encoding,
                        ..ChunkRef::identity(body.sha256, slot, 0, body.size)
                    });
                }
                b.end_member();
            }
            Stored::from_parts(
                built.digest,
                built.manifest.clone(),
                json.clone(),
                b.finish(),
                vec![],
                vec![],
                None,
            )
        };
        assert_eq!(
            laid(Encoding::Zstd, 0).body_read(index, 2, 3),
            Ok(BodyRead::Packet(at + 2..at + 5))
        );
        assert_eq!(
            laid(Encoding::Identity, 0).body_read(index, 2, 3),
            Ok(BodyRead::Object {
                key: "packs/p",
                offset: 2,
                length: 3
            })
        );
        let damaged = laid(Encoding::Identity, 3)
            .body_read(index, 2, 3)
            .unwrap_err();
        assert_eq!(
            damaged.0,
            format!("packet {}: a chunk in an empty slot", built.digest)
        );
    }

    #[test]
    fn a_packed_packet_is_checked_against_its_digest_and_named_by_its_bytes() {
        let built = sample(3);
        let json = built.manifest.to_canonical_json();
        let mut packs = PackTable::new();
        let slot = packs.slot("packs/00112233445566778899aabbccddeeff");
        let mut b = LayoutBuilder::new(packs.clone());
        let mut at = 0;
        for m in &built.manifest.members {
            if let Some(body) = m.body() {
                b.push(ChunkRef::identity(body.sha256, slot, at, body.size));
                at += body.size;
            }
            b.end_member();
        }
        let layout = b.finish().encode();
        let root = Root {
            packs,
            manifest: vec![ChunkRef::identity(
                Digest::EMPTY,
                slot,
                at,
                json.len() as u64,
            )],
            layout: vec![ChunkRef::identity(
                Digest::EMPTY,
                slot,
                at + json.len() as u64,
                layout.len() as u64,
            )],
        };
        let s = Stored::packed(
            built.digest,
            root.clone(),
            json.clone(),
            layout.clone(),
            None,
        )
        .unwrap();
        assert_eq!(s.manifest_chunks[0].sha256, built.digest);
        assert_eq!(s.layout_chunks[0].sha256, Digest::of(&layout));
        let mut other = json.clone();
        other[20] ^= 1;
        assert!(Stored::packed(built.digest, root.clone(), other, layout.clone(), None).is_err());
        assert!(Stored::packed(
            built.digest,
            root,
            json,
            layout[..layout.len() - 1].to_vec(),
            None
        )
        .is_err());
    }
}
