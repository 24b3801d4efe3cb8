//! What a delta pull wants and what this machine holds for it, decided
//! from data alone (docs/transfer.md, "Delta pull"): the packet's distinct
//! bodies and where each first lies in the packet ([`Bodies`]), the bodies
//! and earlier versions a base packet gives by its manifest
//! ([`Bodies::take_base`]), the chunks still to look for in the cache
//! ([`Bodies::unheld_chunks`]), the bodies a restore in place still needs
//! ([`Bodies::keep_only`]), and, once landed, how many bytes came from
//! each kind of place ([`Local::tally`]). `delta_pull` opens and reads
//! the files these name; `pull_plan` decides where each piece comes from.

use std::collections::HashMap;

use packet_core::offsets::Offsets;
use packet_core::{Body, Manifest};
use pillbox_wire::chunking::MAX_CHUNK;
use pillbox_wire::recipes::ChunkName;

use super::land::Source;
use super::pull_plan::{At, Cut, Earlier, Held, Wanted};
use crate::chunking::BODIES;

/// The distinct bodies of a packet, in its order, which members have each,
/// and where each first lies in the packet.
#[derive(Debug, PartialEq, Eq)]
pub struct Bodies {
    /// The bodies to land, as `pull_plan` takes them.
    pub wanted: Vec<Wanted>,
    /// The members (indices into the manifest) that have each body.
    pub members: Vec<Vec<usize>>,
    /// Where each body's first copy starts in the packet.
    pub offsets: Vec<u64>,
}

impl Bodies {
    /// Every body of `manifest`, cut as `recipes` say (a body with no
    /// recipe is one chunk when it can be, else kept whole by the store).
    pub fn of(manifest: &Manifest, recipes: &HashMap<Body, Vec<ChunkName>>) -> Bodies {
        let mut wanted = Vec::new();
        let mut members: Vec<Vec<usize>> = Vec::new();
        let mut slot: HashMap<Body, usize> = HashMap::new();
        for (i, m) in manifest.members.iter().enumerate() {
            let Some(body) = m.body() else { continue };
            if let Some(&s) = slot.get(&body) {
                members[s].push(i);
                continue;
            }
            let cut = match recipes.get(&body) {
                Some(chunks) => Cut::Chunks(chunks.clone()),
                None if body.size <= u64::from(MAX_CHUNK) => Cut::Chunks(vec![ChunkName {
                    sha256: body.sha256,
                    size: body.size as u32,
                }]),
                None => Cut::Whole,
            };
            slot.insert(body, wanted.len());
            wanted.push(Wanted {
                body,
                cut,
                earlier: None,
            });
            members.push(vec![i]);
        }
        let data_offsets = Offsets::of(manifest);
        let offsets = members
            .iter()
            .map(|m| data_offsets.data_offsets()[m[0]])
            .collect();
        Bodies {
            wanted,
            members,
            offsets,
        }
    }

    /// Keeps only the bodies `keep` names (the others are at hand already:
    /// the caller proves them to the gate).
    pub fn keep_only(&mut self, keep: impl Fn(&Body) -> bool) {
        let wanted = std::mem::take(&mut self.wanted);
        let members = std::mem::take(&mut self.members);
        let offsets = std::mem::take(&mut self.offsets);
        for ((w, m), o) in wanted.into_iter().zip(members).zip(offsets) {
            if keep(&w.body) {
                self.wanted.push(w);
                self.members.push(m);
                self.offsets.push(o);
            }
        }
    }

    /// What base packet `base` gives the pull of `manifest`, its members'
    /// bodies at `offsets` in source `source`: every body it holds, added
    /// to `held` where none is held yet; and for a large body wanted at a
    /// path where the base holds another version of it (a log that grew),
    /// unless the wanted body is held whole already, that version, which
    /// becomes the body's earlier version if it has none. Returns those
    /// versions, in the base's order, for the caller to cut into the
    /// chunks they hold.
    pub fn take_base(
        &mut self,
        manifest: &Manifest,
        base: &Manifest,
        offsets: &[u64],
        source: usize,
        held: &mut Held,
    ) -> Vec<Earlier> {
        let by_path: HashMap<&str, usize> = self
            .members
            .iter()
            .enumerate()
            .flat_map(|(slot, ms)| ms.iter().map(move |&m| (m, slot)))
            .map(|(m, slot)| (manifest.members[m].path.as_str(), slot))
            .collect();
        let mut versions = Vec::new();
        for (member, &offset) in base.members.iter().zip(offsets) {
            let Some(body) = member.body() else { continue };
            let at = At { source, offset };
            held.bodies.entry(body).or_insert(at);
            let Some(&slot) = by_path.get(member.path.as_str()) else {
                continue;
            };
            let w = &mut self.wanted[slot];
            if w.body == body || BODIES.is_one_chunk(body.size) {
                continue;
            }
            if !matches!(w.cut, Cut::Chunks(_)) || held.bodies.contains_key(&w.body) {
                continue;
            }
            let version = Earlier { at, len: body.size };
            w.earlier.get_or_insert(version);
            versions.push(version);
        }
        versions
    }

    /// The chunks of the bodies not held whole that are not held either:
    /// what the cache is asked for.
    pub fn unheld_chunks(&self, held: &Held) -> Vec<ChunkName> {
        let mut names = Vec::new();
        for w in &self.wanted {
            if held.bodies.contains_key(&w.body) {
                continue;
            }
            if let Cut::Chunks(list) = &w.cut {
                names.extend(list.iter().filter(|c| !held.chunks.contains_key(c)));
            }
        }
        names
    }
}

/// What this machine holds for a pull: the places, and what is where.
#[derive(Default)]
pub struct Local {
    /// The places (`At::source` numbers index it).
    pub sources: Vec<Source>,
    /// What is where.
    pub held: Held,
    /// What each source is, for the report.
    pub kinds: Vec<SourceKind>,
}

/// What a source is, for the report.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SourceKind {
    /// `--base` packet number `n`.
    Base(usize),
    /// A pack of the chunk cache.
    Cache,
    /// `packet.json`'s own chunks.
    Manifest,
    /// The workspace (or a harness file) being restored over.
    Workspace,
}

/// Body bytes read from each kind of place.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Tally {
    /// From each `--base` packet, by its number.
    pub bases: Vec<(usize, u64)>,
    /// From the cache.
    pub cache: u64,
    /// From the workspace being restored over (and `packet.json`'s chunks).
    pub workspace: u64,
}

impl Local {
    /// Adds a source; returns its number.
    pub fn add(&mut self, source: Source, kind: SourceKind) -> usize {
        self.sources.push(source);
        self.kinds.push(kind);
        self.sources.len() - 1
    }

    /// What `read_from` (body bytes read from each source, by number)
    /// came to for each kind of place.
    pub fn tally(&self, read_from: &[u64]) -> Tally {
        tally(&self.kinds, read_from)
    }
}

fn tally(kinds: &[SourceKind], read_from: &[u64]) -> Tally {
    let mut t = Tally::default();
    for (&kind, &bytes) in kinds.iter().zip(read_from) {
        match kind {
            SourceKind::Base(b) => t.bases.push((b, bytes)),
            SourceKind::Cache => t.cache += bytes,
            SourceKind::Workspace | SourceKind::Manifest => t.workspace += bytes,
        }
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;
    use packet_core::in_memory::{build, Source as Member};
    use packet_core::{Digest, Limits};

    fn file(path: &str, contents: &[u8]) -> Member {
        Member::File {
            path: path.into(),
            contents: contents.to_vec(),
            executable: false,
        }
    }

    fn dir(path: &str) -> Member {
        Member::Dir { path: path.into() }
    }

    /// A packet's manifest of workspace files.
    fn manifest(files: &[(&str, &[u8])]) -> Manifest {
        let mut members = vec![dir("workspace")];
        members.extend(
            files
                .iter()
                .map(|(p, c)| file(&format!("workspace/{p}"), c)),
        );
        build(&members, None, vec![], &Limits::FORMAT)
            .unwrap()
            .manifest
    }

    fn body(contents: &[u8]) -> Body {
        Body {
            sha256: Digest::of(contents),
            size: contents.len() as u64,
        }
    }

    fn chunk(n: u8, size: u32) -> ChunkName {
        ChunkName {
            sha256: Digest::of(&[n]),
            size,
        }
    }

    /// Bytes of `len` that name themselves by `seed`.
    fn bytes(seed: u8, len: usize) -> Vec<u8> {
        (0..len).map(|i| seed.wrapping_add(i as u8)).collect()
    }

    #[test]
    fn bodies_are_distinct_in_packet_order_and_cut_as_their_recipes_say() {
        let large = bytes(1, (MAX_CHUNK as usize) + 1);
        let m = manifest(&[
            ("a", b"same"),
            ("b", b"other"),
            ("c", b"same"),
            ("large", &large),
            ("recipe", &bytes(2, 300_000)),
        ]);
        let listed = body(&bytes(2, 300_000));
        let recipe = vec![chunk(1, 100_000), chunk(2, 200_000)];
        let bodies = Bodies::of(&m, &HashMap::from([(listed, recipe.clone())]));
        let path = |i: usize| m.members[i].path.as_str();
        let paths: Vec<Vec<&str>> = bodies
            .members
            .iter()
            .map(|ms| ms.iter().map(|&i| path(i)).collect())
            .collect();
        assert_eq!(
            paths,
            [
                vec!["workspace/a", "workspace/c"],
                vec!["workspace/b"],
                vec!["workspace/large"],
                vec!["workspace/recipe"],
            ]
        );
        let cuts: Vec<&Cut> = bodies.wanted.iter().map(|w| &w.cut).collect();
        let one = |b: &[u8]| {
            Cut::Chunks(vec![ChunkName {
                sha256: Digest::of(b),
                size: b.len() as u32,
            }])
        };
        assert_eq!(
            cuts,
            [
                &one(b"same"),
                &one(b"other"),
                &Cut::Whole,
                &Cut::Chunks(recipe)
            ]
        );
        // Each body's first copy, where the packet's layout puts it.
        let offsets = Offsets::of(&m);
        for (slot, ms) in bodies.members.iter().enumerate() {
            assert_eq!(bodies.offsets[slot], offsets.data_offsets()[ms[0]]);
        }
        assert!(bodies.wanted.iter().all(|w| w.earlier.is_none()));
    }

    #[test]
    fn keep_only_keeps_each_body_with_its_members_and_offset() {
        let m = manifest(&[("a", b"1"), ("b", b"2"), ("c", b"3")]);
        let mut bodies = Bodies::of(&m, &HashMap::new());
        let all = Bodies::of(&m, &HashMap::new());
        bodies.keep_only(|b| *b != body(b"2"));
        assert_eq!(
            bodies.wanted,
            [all.wanted[0].clone(), all.wanted[2].clone()]
        );
        assert_eq!(
            bodies.members,
            [all.members[0].clone(), all.members[2].clone()]
        );
        assert_eq!(bodies.offsets, [all.offsets[0], all.offsets[2]]);
    }

    #[test]
    fn a_base_gives_its_bodies_and_the_earlier_versions_at_the_same_paths() {
        let log_v1 = bytes(3, 400_000);
        let mut log_v2 = log_v1.clone();
        log_v2.extend_from_slice(&bytes(4, 100_000));
        let small_v1 = bytes(5, 1000);
        let new = manifest(&[
            ("log", &log_v2),
            ("small", &bytes(6, 1000)),
            ("same", b"kept"),
        ]);
        let base = manifest(&[("log", &log_v1), ("small", &small_v1), ("same", b"kept")]);
        let recipes = HashMap::from([(body(&log_v2), vec![chunk(1, 250_000), chunk(2, 250_000)])]);
        let mut bodies = Bodies::of(&new, &recipes);
        let offsets: Vec<u64> = (0..base.members.len() as u64).map(|i| i * 1000).collect();
        let at = |i: usize| At {
            source: 7,
            offset: offsets[i],
        };
        let index = |path: &str| base.members.iter().position(|m| m.path == path).unwrap();
        let mut held = Held::default();
        let versions = bodies.take_base(&new, &base, &offsets, 7, &mut held);
        // Every body the base has, where it has it.
        assert_eq!(held.bodies.len(), 3);
        assert_eq!(held.bodies[&body(&log_v1)], at(index("workspace/log")));
        assert_eq!(held.bodies[&body(b"kept")], at(index("workspace/same")));
        // The log's earlier version (not the small file's: one chunk).
        let log_v1_at = Earlier {
            at: at(index("workspace/log")),
            len: log_v1.len() as u64,
        };
        assert_eq!(versions, [log_v1_at]);
        assert_eq!(bodies.wanted[0].earlier, Some(log_v1_at));
        assert_eq!(bodies.wanted[1].earlier, None);
        // A second base: its bodies do not displace the first's, and the
        // earlier version first found stays (its version is still cut).
        let versions = bodies.take_base(&new, &base, &offsets, 8, &mut held);
        assert_eq!(versions.len(), 1);
        assert_eq!(versions[0].at.source, 8);
        assert_eq!(held.bodies[&body(&log_v1)].source, 7);
        assert_eq!(bodies.wanted[0].earlier, Some(log_v1_at));
        // Once the body itself is held, no earlier version is wanted.
        held.bodies.insert(body(&log_v2), at(0));
        assert!(bodies
            .take_base(&new, &base, &offsets, 9, &mut held)
            .is_empty());
    }

    #[test]
    fn the_cache_is_asked_only_for_chunks_not_held() {
        let large = bytes(1, (MAX_CHUNK as usize) + 1);
        let m = manifest(&[
            ("a", b"a"),
            ("b", b"b"),
            ("large", &large),
            ("r", &bytes(2, 300_000)),
        ]);
        let recipe = vec![chunk(1, 100_000), chunk(2, 200_000)];
        let bodies = Bodies::of(&m, &HashMap::from([(body(&bytes(2, 300_000)), recipe)]));
        let mut held = Held::default();
        held.bodies.insert(
            body(b"a"),
            At {
                source: 0,
                offset: 0,
            },
        );
        held.chunks.insert(
            chunk(1, 100_000),
            At {
                source: 0,
                offset: 0,
            },
        );
        let one_b = ChunkName {
            sha256: Digest::of(b"b"),
            size: 1,
        };
        // Not a (held whole), not the large body (no chunks), not chunk 1.
        assert_eq!(bodies.unheld_chunks(&held), [one_b, chunk(2, 200_000)]);
    }

    #[test]
    fn bytes_read_are_told_by_the_kind_of_place() {
        let kinds = [
            SourceKind::Manifest,
            SourceKind::Base(0),
            SourceKind::Cache,
            SourceKind::Base(1),
            SourceKind::Cache,
            SourceKind::Workspace,
        ];
        assert_eq!(
            tally(&kinds, &[1, 10, 100, 1000, 10_000, 100_000]),
            Tally {
                bases: vec![(0, 10), (1, 1000)],
                cache: 10_100,
                workspace: 100_001,
            }
        );
        assert_eq!(tally(&[], &[]), Tally::default());
    }
}
