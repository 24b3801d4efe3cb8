//! The push pipeline end to end, natively: a store of packs in memory, a
//! client that sends what its base lacks (as the CLI does), the edge's
//! pure steps in the order the Worker runs them, and the invariant as a
//! property: whatever a client sends (lying frames, recipes or bases), a
//! packet that becomes visible serves exactly the bytes its manifest names.

use std::collections::HashMap;
use std::rc::Rc;

use packet_core::in_memory::{build, Built, Source};
use packet_core::secrets::Scanner;
use packet_core::{Body, Digest, Limits, Member};
use pillbox_wire::chunking::{BODIES, MANIFEST};
use pillbox_wire::chunks::Frame;
use pillbox_wire::recipes::{BodyRecipe, ChunkName, Recipes, Run};

use super::at_hand::AtHand;
use super::complete::{classes_of, Completion};
use super::in_order::{Arrived, InOrder};
use super::manifest::CreateBody;
use super::plan::{Plan, Source as From};
use super::prove::{End, ProveError};
use super::recipes::RecipeBook;
use super::storing::Storing;
use super::{arrival, manifest, wanted};
use crate::storage::chunk::ChunkRef;
use crate::storage::cut::cut;
use crate::storage::findings::BodyClass;
use crate::storage::frames;
use crate::storage::packs::PackTable;
use crate::storage::rebuild::{Reads, Segment};
use crate::storage::stored::Stored;

/// Packs in memory.
#[derive(Default)]
struct Store {
    packs: HashMap<String, Vec<u8>>,
    ends: HashMap<Body, End>,
    pushes: u32,
    /// Whether large bodies whose chunks arrive in order are proven then.
    in_order: bool,
}

/// What one push read and hashed.
#[derive(Debug, Default, PartialEq, Eq)]
struct Cost {
    read: u64,
    hashed: u64,
}

impl Store {
    fn raw(&self, packs: &PackTable, c: &ChunkRef) -> Vec<u8> {
        let key = packs.key(c.slot).expect("a slot with a key");
        let stored = &self.packs[key][c.offset as usize..(c.offset + c.stored) as usize];
        let mut raw = Vec::new();
        frames::decode_into(c.encoding, c.raw, stored, &mut raw).expect("a stored chunk decodes");
        raw
    }

    /// The whole packet `s` serves, rebuilt from its packs.
    fn serve(&self, s: &Stored) -> Vec<u8> {
        let mut out = Vec::new();
        for read in Reads::new(&s.manifest, &s.offsets, &s.layout, 0..s.offsets.size()) {
            let read = read.expect("the layout covers every body");
            let mut source: &[u8] = match &read.source {
                Some((slot, r)) => {
                    let key = s.layout.packs().key(*slot).unwrap();
                    &self.packs[key][r.start as usize..r.end as usize]
                }
                None => &[],
            };
            for seg in &read.segments {
                match seg {
                    Segment::Fill(r) => s
                        .offsets
                        .write_fill(&s.manifest, r.clone(), &mut out)
                        .unwrap(),
                    Segment::Json(r) => {
                        out.extend_from_slice(&s.json[r.start as usize..r.end as usize])
                    }
                    Segment::Stored { len, .. } => {
                        out.extend_from_slice(&source[..*len as usize]);
                        source = &source[*len as usize..];
                    }
                    Segment::Frame {
                        chunk, skip, take, ..
                    } => {
                        let mut raw = Vec::new();
                        frames::decode_into(
                            chunk.encoding,
                            chunk.raw,
                            &source[..chunk.stored as usize],
                            &mut raw,
                        )
                        .unwrap();
                        out.extend_from_slice(&raw[*skip as usize..(*skip + *take) as usize]);
                        source = &source[chunk.stored as usize..];
                    }
                }
            }
        }
        out
    }
}

/// What a client sends: the recipes and the frames (stored bytes).
#[derive(Clone, Debug)]
struct Sent {
    recipes: Recipes,
    frames: Vec<(Frame, Vec<u8>)>,
}

fn frame_of(raw: &[u8]) -> (Frame, Vec<u8>) {
    let z = zstd::bulk::compress(raw, 3).unwrap();
    if pillbox_wire::chunking::keep_compressed(raw.len(), z.len()) && z.len() < raw.len() {
        (
            Frame::zstd(Digest::of(raw), raw.len() as u32, z.len() as u32),
            z,
        )
    } else {
        (Frame::identity(raw), raw.to_vec())
    }
}

fn body_bytes(b: &Built, i: usize) -> &[u8] {
    let at = packet_core::offsets::Offsets::of(&b.manifest).data_offsets()[i] as usize;
    &b.bytes[at..at + b.manifest.members[i].size() as usize]
}

/// What the CLI sends for `new` over `base`: the manifest's chunks and the
/// bodies the base lacks; a large body that starts like the base's body at
/// the same path copies those chunks.
fn client(new: &Built, base: Option<&Stored>) -> Sent {
    let json = new.manifest.to_canonical_json();
    let base_manifest: std::collections::HashSet<(Digest, u64)> = base
        .map(|b| b.manifest_chunks.iter().map(ChunkRef::name).collect())
        .unwrap_or_default();
    let base_chunks: std::collections::HashSet<(Digest, u64)> = base
        .map(|b| b.layout.all_chunks().iter().map(ChunkRef::name).collect())
        .unwrap_or_default();
    let mut recipes = Recipes::default();
    let mut frames = Vec::new();
    let mut sent = std::collections::HashSet::new();
    for r in cut(&json, &MANIFEST) {
        let bytes = &json[r];
        let name = (Digest::of(bytes), bytes.len() as u64);
        recipes.manifest.push(ChunkName {
            sha256: name.0,
            size: name.1 as u32,
        });
        if !base_manifest.contains(&name) && sent.insert(name) {
            frames.push(frame_of(bytes));
        }
    }
    let mut bodies_seen = std::collections::HashSet::new();
    for (i, m) in new.manifest.members.iter().enumerate() {
        let Some(body) = m.body() else { continue };
        if !bodies_seen.insert(body) {
            continue;
        }
        let in_base =
            base.is_some_and(|b| b.manifest.members.iter().any(|bm| bm.body() == Some(body)));
        if in_base {
            continue;
        }
        let bytes = body_bytes(new, i);
        if BODIES.is_one_chunk(body.size) {
            frames.push(frame_of(bytes));
            continue;
        }
        let pieces: Vec<&[u8]> = cut(bytes, &BODIES).into_iter().map(|r| &bytes[r]).collect();
        let names: Vec<(Digest, u64)> = pieces
            .iter()
            .map(|p| (Digest::of(p), p.len() as u64))
            .collect();
        let mut runs = Vec::new();
        let mut k = 0;
        if let Some(b) = base {
            if let Some((j, old)) = b.manifest.find(&m.path) {
                let theirs: Vec<(Digest, u64)> =
                    b.layout.chunks(j).iter().map(ChunkRef::name).collect();
                while k < names.len()
                    && k < theirs.len()
                    && names[k] == theirs[k]
                    && theirs.len() > 1
                {
                    k += 1;
                }
                if k > 0 {
                    runs.push(Run::Copy {
                        body: old.body().unwrap(),
                        first: 0,
                        count: k as u32,
                    });
                }
            }
        }
        for (p, n) in pieces.iter().zip(&names).skip(k) {
            runs.push(Run::Chunk(ChunkName {
                sha256: n.0,
                size: n.1 as u32,
            }));
            if !base_chunks.contains(n) && sent.insert(*n) {
                frames.push(frame_of(p));
            }
        }
        recipes.bodies.push(BodyRecipe { body, runs });
    }
    Sent { recipes, frames }
}

/// The edge's steps for one push of `digest` over `bases`: a stored packet,
/// or the code it was refused with.
fn edge(
    store: &mut Store,
    digest: Digest,
    sent: &Sent,
    bases: &[Rc<Stored>],
) -> Result<(Rc<Stored>, Cost), String> {
    let scanner = Scanner::new();
    let mut cost = Cost::default();
    let mut at_hand = AtHand::new();
    for b in bases {
        at_hand.add_base(b.clone());
    }
    store.pushes += 1;
    let key = format!("packs/{:032x}", store.pushes);
    let mut pack = Vec::new();
    let mut raws: HashMap<(Digest, u64), Vec<u8>> = HashMap::new();
    let mut raw = Vec::new();
    let mut placed = Vec::new();
    for (i, (f, stored)) in sent.frames.iter().enumerate() {
        if !f.stored_size_fits() || f.stored_size as usize != stored.len() {
            return Err("chunk_batch_stored_size".into());
        }
        arrival::check(i, f, stored, &mut raw).map_err(|p| p.error.code().to_string())?;
        let c = ChunkRef {
            sha256: f.sha256,
            raw: u64::from(f.raw_size),
            slot: 0,
            offset: pack.len() as u64,
            stored: stored.len() as u64,
            encoding: f.encoding,
        };
        placed.push(c);
        pack.extend_from_slice(stored);
        raws.insert(c.name(), raw.clone());
    }
    let missing = manifest::missing(&sent.recipes.manifest, |n| raws.contains_key(n), &at_hand);
    if !missing.is_empty() {
        return Err("manifest_incomplete".into());
    }
    let json =
        manifest::assemble(&sent.recipes.manifest, &raws, &at_hand).ok_or("manifest_incomplete")?;
    let assembly =
        manifest::check(&json, digest, &Limits::FORMAT).map_err(|p| p.error.code().to_string())?;
    // The frames are kept (the pack is written) once the manifest passed.
    let mut offset = 0;
    for (f, stored) in &sent.frames {
        at_hand.add_frame(
            &key,
            ChunkRef {
                sha256: f.sha256,
                raw: u64::from(f.raw_size),
                slot: 0,
                offset,
                stored: stored.len() as u64,
                encoding: f.encoding,
            },
        );
        offset += stored.len() as u64;
    }
    store.packs.insert(key.clone(), pack);
    let bodies = assembly.unproven();
    let mut book = RecipeBook::new();
    book.add(&sent.recipes.bodies, &bodies, &at_hand)
        .map_err(|p| p.error.code().to_string())?;
    let plan = Plan::new(&bodies, &at_hand, &book);
    if !plan.is_complete() {
        return Err("push_incomplete".into());
    }
    let classes = classes_of(assembly.manifest());
    let mut arrived: HashMap<BodyClass, packet_core::BodyFindings> = HashMap::new();
    for (body, source) in &plan.bodies {
        if let From::Arrived(c) = source {
            for (class, f) in arrival::screen(&raws[&c.name()], &classes[body], &scanner) {
                arrived.insert((*body, class), f);
            }
        }
    }
    // The bodies proven as the frames were checked, in the order sent.
    let mut early: HashMap<Body, Vec<Arrived>> = HashMap::new();
    if store.in_order {
        let new = vec![true; placed.len()];
        let mut in_order = InOrder::new(&placed, &new, &bodies, &book, &classes, &scanner);
        for (i, c) in placed.iter().enumerate() {
            in_order.feed(i, &raws[&c.name()]);
        }
        for e in in_order.finish() {
            let slot = at_hand.packs.find(&key).expect("the push's pack");
            let run = e.first as usize..(e.first + e.count) as usize;
            early.entry(e.body).or_default().push(Arrived {
                chunks: placed[run].iter().map(|c| c.in_slot(slot)).collect(),
                end: e.end,
                findings: e.findings,
            });
        }
    }
    let (mut completion, tasks) = Completion::start(
        assembly,
        &plan,
        &at_hand,
        (&arrived, &early),
        &store.ends,
        &scanner,
    )
    .map_err(|e| e.code().as_str().to_string())?;
    for task in tasks {
        let mut prover = task.prover;
        let proven = loop {
            let mut failed = None;
            for c in prover.reads().to_vec() {
                let bytes = store.raw(&at_hand.packs, &c);
                cost.read += bytes.len() as u64;
                if let Err(e) = prover.feed(&bytes) {
                    failed = Some(e);
                    break;
                }
            }
            let body = prover.body();
            match failed {
                Some(ProveError::Differs) => {
                    prover = completion.again(&prover, &scanner);
                    continue;
                }
                Some(e) => return Err(completion.refused(body, e).code().as_str().to_string()),
                None => {}
            }
            cost.hashed += prover.hashed();
            match prover.finish() {
                Ok(p) => break p,
                Err(e) => return Err(completion.refused(body, e).code().as_str().to_string()),
            }
        };
        completion
            .done(proven)
            .map_err(|e| e.code().as_str().to_string())?;
    }
    let (verified, layout, kept, ends) = completion
        .finish(at_hand.packs.clone())
        .map_err(|e| e.code().as_str().to_string())?;
    store.ends.extend(ends);
    let manifest_refs: Vec<ChunkRef> = sent
        .recipes
        .manifest
        .iter()
        .map(|c| {
            at_hand
                .chunk(&(c.sha256, u64::from(c.size)))
                .expect("checked at hand")
        })
        .collect();
    store.pushes += 1;
    let own = format!("packs/{:032x}", store.pushes);
    let storing = Storing::new(layout, manifest_refs, &own, at_hand.layout_chunks());
    let reads: Vec<Vec<u8>> = storing
        .reads()
        .iter()
        .map(|(k, r)| store.packs[k][r.start as usize..r.end as usize].to_vec())
        .collect();
    let laid = storing.finish(&reads).map_err(|e| e.0)?;
    if !laid.pack.is_empty() {
        store.packs.insert(own, laid.pack.clone());
    }
    // Read back as a reader would: the root's chunks, assembled and checked.
    let packs = &laid.root.packs;
    let json: Vec<u8> = laid
        .root
        .manifest
        .iter()
        .flat_map(|c| store.raw(packs, c))
        .collect();
    let stream: Vec<u8> = laid
        .root
        .layout
        .iter()
        .flat_map(|c| store.raw(packs, c))
        .collect();
    let root = crate::storage::root::Root::decode(&laid.root.encode()).map_err(|e| e.0)?;
    let stored =
        Stored::packed(verified.digest, root, json, stream, Some(kept)).map_err(|e| e.0)?;
    assert_eq!(stored.layout.all_chunks(), laid.layout.all_chunks());
    Ok((Rc::new(stored), cost))
}

fn noise(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x % 251) as u8
        })
        .collect()
}

fn log(lines: usize) -> Vec<u8> {
    (0..lines)
        .flat_map(|i| {
            format!(
                "{{\"turn\":{i},\"text\":\"the agent runs the tests ({})\"}}\n",
                i % 7
            )
            .into_bytes()
        })
        .collect()
}

fn packet(files: &[(&str, Vec<u8>)]) -> Built {
    let mut sources = vec![Source::Dir {
        path: "workspace".into(),
    }];
    for (p, c) in files {
        sources.push(Source::File {
            path: (*p).into(),
            contents: c.clone(),
            executable: false,
        });
    }
    build(&sources, None, vec![], &Limits::FORMAT).unwrap()
}

#[test]
fn a_first_push_then_an_appended_log_costs_the_new_bytes() {
    let mut store = Store::default();
    let mut files: Vec<(&str, Vec<u8>)> = vec![
        ("workspace/a.txt", b"alpha\n".to_vec()),
        ("workspace/blob.bin", noise(3, 700_000)),
        ("workspace/copy.txt", b"alpha\n".to_vec()),
        ("workspace/log.jsonl", log(40_000)),
    ];
    for i in 0..400 {
        files.push((
            Box::leak(format!("workspace/m{i:04}.txt").into_boxed_str()),
            format!("file {i}\n").into_bytes(),
        ));
    }
    let first = packet(&files);
    let sent = client(&first, None);
    let (base, _) = edge(&mut store, first.digest, &sent, &[]).unwrap();
    assert_eq!(store.serve(&base), first.bytes, "what was pushed is served");
    // One more turn: the log grows by a few lines, one file changes.
    files[3]
        .1
        .extend_from_slice(&log(40_100)[log(40_000).len()..]);
    files[0].1 = b"alpha, edited\n".to_vec();
    let next = packet(&files);
    let sent = client(&next, Some(&base));
    let sent_bytes: usize = sent.frames.iter().map(|(_, b)| b.len()).sum();
    assert!(sent_bytes < 64 << 10, "{sent_bytes} bytes of frames");
    let (stored, cost) = edge(&mut store, next.digest, &sent, std::slice::from_ref(&base)).unwrap();
    assert_eq!(store.serve(&stored), next.bytes);
    let log_before = files[3].1.len() as u64 - (log(40_100).len() - log(40_000).len()) as u64;
    let appended = files[3].1.len() as u64 - log_before;
    assert_eq!(cost.hashed, appended, "only the appended bytes are hashed");
    assert!(
        cost.read < (2 << 20) + appended,
        "{cost:?}: the old log's last chunk and the new bytes"
    );
    // Its layout shares every chunk but a few with its base's.
    let base_layout: std::collections::HashSet<_> =
        base.layout_chunks.iter().map(ChunkRef::name).collect();
    let new_chunks = stored
        .layout_chunks
        .iter()
        .filter(|c| !base_layout.contains(&c.name()))
        .count();
    assert!(new_chunks <= 2, "{new_chunks} new layout chunks");
    // A pull of it with the base: copies for the log, chunks for the rest.
    let recipes = stored.recipes(&[&base]);
    let log_recipe = recipes
        .bodies
        .iter()
        .find(|b| b.body.size == files[3].1.len() as u64)
        .unwrap();
    assert!(matches!(log_recipe.runs[0], Run::Copy { first: 0, .. }));
}

#[test]
fn bodies_proven_as_they_arrive_need_no_read_and_end_as_a_read_would() {
    let files: Vec<(&str, Vec<u8>)> = vec![
        ("workspace/a.txt", b"alpha\n".to_vec()),
        ("workspace/blob.bin", noise(3, 700_000)),
        ("workspace/log.jsonl", log(40_000)),
    ];
    let first = packet(&files);
    let sent = client(&first, None);
    let mut read = Store::default();
    let (_, cost_read) = edge(&mut read, first.digest, &sent, &[]).unwrap();
    assert!(cost_read.hashed > 1_000_000, "{cost_read:?}");
    let mut early = Store {
        in_order: true,
        ..Store::default()
    };
    let (stored, cost) = edge(&mut early, first.digest, &sent, &[]).unwrap();
    assert_eq!(early.serve(&stored), first.bytes);
    assert_eq!(cost, Cost::default(), "nothing is read back");
    assert_eq!(early.ends, read.ends, "the end states a read would keep");
    // The log grows: proven from where it ended on arrival.
    let mut grown = files.clone();
    grown[2].1.extend_from_slice(b"{\"turn\":\"one more\"}\n");
    let next = packet(&grown);
    let sent = client(&next, Some(&stored));
    let (again, cost) = edge(&mut early, next.digest, &sent, &[stored]).unwrap();
    assert_eq!(early.serve(&again), next.bytes);
    assert!(cost.read < 2 << 20, "{cost:?}");
}

#[test]
fn the_known_holes_are_closed() {
    let mut store = Store::default();
    let big = noise(9, 600_000);
    let files = vec![
        ("workspace/a.txt", b"one\n".to_vec()),
        ("workspace/big.bin", big.clone()),
    ];
    let first = packet(&files);
    let (base, _) = edge(&mut store, first.digest, &client(&first, None), &[]).unwrap();

    // A wrong digest is refused without the digest the store computed.
    let sent = client(&first, None);
    let _ = &base;
    let wrong = Digest::of(b"another packet");
    let json = first.manifest.to_canonical_json();
    let p = manifest::check(&json, wrong, &Limits::FORMAT).unwrap_err();
    assert_eq!(p.error.code(), "packet_digest_mismatch");
    assert!(!p.error.message().contains(&first.digest.hex().to_string()));
    assert_eq!(
        edge(&mut store, wrong, &sent, &[]).unwrap_err(),
        "packet_digest_mismatch"
    );

    // Two members with one sha256 and two sizes: packet-core refuses it.
    let members = vec![
        Member::dir("workspace"),
        Member::file("workspace/x", 4, Digest::of(b"one\n"), false),
        Member::file("workspace/y", 5, Digest::of(b"one\n"), false),
    ];
    let m = packet_core::Manifest::assemble(members, None, vec![]);
    let json = m.to_canonical_json();
    let p = manifest::check(&json, Digest::of(&json), &Limits::FORMAT).unwrap_err();
    assert_eq!(p.error.code(), "digest_size_conflict");

    // A base body named like a new body but of another size is not it:
    // the base serves other bytes under that sha256.
    let other = packet(&[
        ("workspace/a.txt", b"one\n".to_vec()),
        ("workspace/big.bin", noise(10, 600_000)),
    ]);
    let mut sent = client(&other, Some(&base));
    let (mut digest, mut bases) = (other.digest, vec![base.clone()]);
    tell(
        Lie::SameShaOtherSizeBase,
        &mut sent,
        &mut digest,
        &mut bases,
        &mut store,
    );
    assert_eq!(bases.len(), 2);
    let (stored, _) = edge(&mut store, digest, &sent, &bases).unwrap();
    assert_eq!(store.serve(&stored), other.bytes);

    // A one-chunk recipe named after its body is still hashed: a frame
    // named after the body whose bytes are other bytes is refused.
    let mid = noise(11, 300_000);
    let next = packet(&[("workspace/mid.bin", mid.clone())]);
    let mut sent = client(&next, None);
    let body = next.manifest.members[1].body().unwrap();
    sent.recipes.bodies = vec![BodyRecipe {
        body,
        runs: vec![Run::Chunk(ChunkName {
            sha256: body.sha256,
            size: body.size as u32,
        })],
    }];
    let liar_bytes = noise(12, 300_000);
    sent.frames.retain(|(f, _)| f.raw_size < 100_000);
    sent.frames.push((
        Frame {
            sha256: body.sha256,
            ..Frame::identity(&liar_bytes)
        },
        liar_bytes,
    ));
    assert_eq!(
        edge(&mut store, next.digest, &sent, &[]).unwrap_err(),
        "chunk_digest_mismatch"
    );

    // Two recipes giving one chunk two sizes are refused.
    let two = packet(&[
        ("workspace/p.bin", noise(20, 400_000)),
        ("workspace/q.bin", noise(21, 400_000)),
    ]);
    let mut sent = client(&two, None);
    let shared = ChunkName {
        sha256: Digest::of(b"shared"),
        size: 100_000,
    };
    sent.recipes.bodies[0].runs[0] = Run::Chunk(shared);
    sent.recipes.bodies[1].runs[0] = Run::Chunk(ChunkName {
        size: 100_001,
        ..shared
    });
    assert_eq!(
        edge(&mut store, two.digest, &sent, &[]).unwrap_err(),
        "recipe_invalid"
    );
}

#[test]
fn a_create_body_is_checked_once_packet_json_is_in() {
    let built = packet(&[
        ("workspace/a.txt", b"alpha\n".to_vec()),
        ("workspace/big.bin", noise(4, 700_000)),
    ]);
    let sent = client(&built, None);
    let frames: Vec<Frame> = sent.frames.iter().map(|(f, _)| *f).collect();
    let is_manifest = wanted::manifest_frames(&frames, &sent.recipes.manifest).unwrap();
    assert!(is_manifest[0] && !is_manifest[is_manifest.len() - 1]);
    let mut raws = HashMap::new();
    for (i, (f, stored)) in sent.frames.iter().enumerate() {
        if is_manifest[i] {
            let mut raw = Vec::new();
            arrival::check(i, f, stored, &mut raw).unwrap();
            raws.insert((f.sha256, u64::from(f.raw_size)), raw);
        }
    }
    let at_hand = AtHand::new();
    let body = CreateBody {
        recipes: &sent.recipes,
        frames: &frames,
        is_manifest: &is_manifest,
        digest: built.digest,
        size: built.bytes.len() as u64,
    };
    let checked = body.check(&raws, &at_hand, &Limits::FORMAT).unwrap();
    assert_eq!(checked.json, built.manifest.to_canonical_json());
    assert_eq!(checked.assembly.digest(), built.digest);
    assert_eq!(checked.book.len(), 1, "the large body's recipe");
    assert_eq!(checked.classes.len(), 2);
    let code = |body: &CreateBody, raws: &HashMap<(Digest, u64), Vec<u8>>| {
        let p = body.check(raws, &at_hand, &Limits::FORMAT).err().unwrap();
        (p.status, p.error.code().to_string())
    };
    // The size the client states is the size the manifest implies.
    let resized = CreateBody {
        size: body.size + 1,
        ..body
    };
    assert_eq!(code(&resized, &raws), (400, "size_mismatch".into()));
    // packet.json is the one the push names.
    let renamed = CreateBody {
        digest: Digest::of(b"another packet"),
        ..body
    };
    assert_eq!(
        code(&renamed, &raws),
        (422, "packet_digest_mismatch".into())
    );
    // A body frame the packet does not need is refused before it is read.
    let mut more = frames.clone();
    more.push(frame_of(b"a file of another packet\n").0);
    let mut marks = is_manifest.clone();
    marks.push(false);
    let stranger = CreateBody {
        frames: &more,
        is_manifest: &marks,
        ..body
    };
    assert_eq!(code(&stranger, &raws), (422, "chunk_not_needed".into()));
    // A recipe for a body a frame carries whole is not needed.
    let mut recipes = sent.recipes.clone();
    let small = built.manifest.members[1].body().unwrap();
    recipes.bodies.push(BodyRecipe {
        body: small,
        runs: vec![Run::Chunk(ChunkName {
            sha256: small.sha256,
            size: small.size as u32,
        })],
    });
    let recipe = CreateBody {
        recipes: &recipes,
        ..body
    };
    assert_eq!(code(&recipe, &raws), (422, "recipe_not_needed".into()));
    // Without every frame of packet.json it cannot be assembled.
    raws.clear();
    assert_eq!(code(&body, &raws).0, 500);
}

/// A lie a client (or a store in a bad state) could tell.
#[derive(Clone, Copy, Debug)]
enum Lie {
    None,
    FlipFrameByte(usize),
    RenameFrame(usize),
    SwapRuns(usize),
    ResizeChunk(usize),
    ShiftCopy(usize),
    DropFrame(usize),
    FrameForAnother(usize),
    WrongDigest,
    SameShaOtherSizeBase,
}

fn tell(
    lie: Lie,
    sent: &mut Sent,
    digest: &mut Digest,
    bases: &mut Vec<Rc<Stored>>,
    store: &mut Store,
) {
    let nf = sent.frames.len().max(1);
    let nr = sent.recipes.bodies.len().max(1);
    match lie {
        Lie::None => {}
        Lie::FlipFrameByte(i) => {
            if let Some((_, b)) = sent.frames.get_mut(i % nf) {
                let k = b.len() / 2;
                b[k] ^= 1;
            }
        }
        Lie::RenameFrame(i) => {
            if let Some((f, _)) = sent.frames.get_mut(i % nf) {
                f.sha256 = Digest::of(&f.sha256.0);
            }
        }
        Lie::SwapRuns(i) => {
            if let Some(r) = sent.recipes.bodies.get_mut(i % nr) {
                let n = r.runs.len();
                if n > 1 {
                    r.runs.swap(0, n - 1);
                }
            }
        }
        Lie::ResizeChunk(i) => {
            if let Some(r) = sent.recipes.bodies.get_mut(i % nr) {
                if let Some(Run::Chunk(c)) =
                    r.runs.iter_mut().rev().find(|r| matches!(r, Run::Chunk(_)))
                {
                    c.size += 1;
                }
            }
        }
        Lie::ShiftCopy(i) => {
            if let Some(r) = sent.recipes.bodies.get_mut(i % nr) {
                for run in &mut r.runs {
                    if let Run::Copy { first, .. } = run {
                        *first += 1;
                    }
                }
            }
        }
        Lie::DropFrame(i) => {
            if !sent.frames.is_empty() {
                sent.frames.remove(i % nf);
            }
        }
        Lie::FrameForAnother(i) => {
            // A frame's name and size given to another frame's bytes.
            if sent.frames.len() > 1 {
                let j = i % nf;
                let k = (j + 1) % nf;
                let name = sent.frames[k].0;
                let bytes = sent.frames[j].1.clone();
                sent.frames[j] = (
                    Frame {
                        stored_size: bytes.len() as u32,
                        ..name
                    },
                    bytes,
                );
            }
        }
        Lie::WrongDigest => *digest = Digest::of(&digest.0),
        Lie::SameShaOtherSizeBase => {
            // A base that names a body of the new packet with another size
            // (and holds other bytes for it).
            let Some(target) = sent.recipes.bodies.first().map(|r| r.body) else {
                return;
            };
            let fake = Body {
                sha256: target.sha256,
                size: target.size - 1,
            };
            let members = vec![
                Member::dir("workspace"),
                Member::file("workspace/fake.bin", fake.size, fake.sha256, false),
            ];
            let m = packet_core::Manifest::assemble(members, None, vec![]);
            let json = m.to_canonical_json();
            let garbage = noise(99, fake.size as usize);
            store.pushes += 1;
            let key = format!("packs/{:032x}", store.pushes);
            let mut pack = garbage.clone();
            pack.extend_from_slice(&json);
            let mut packs = PackTable::new();
            let slot = packs.slot(&key);
            let mut b = crate::storage::layout::LayoutBuilder::new(packs.clone());
            b.end_member();
            b.push(ChunkRef::identity(fake.sha256, slot, 0, fake.size));
            b.end_member();
            let stream = b.finish().encode();
            pack.extend_from_slice(&stream);
            store.packs.insert(key, pack);
            let root = crate::storage::root::Root {
                packs,
                manifest: vec![ChunkRef::identity(
                    Digest::EMPTY,
                    slot,
                    fake.size,
                    json.len() as u64,
                )],
                layout: vec![ChunkRef::identity(
                    Digest::EMPTY,
                    slot,
                    fake.size + json.len() as u64,
                    stream.len() as u64,
                )],
            };
            let s = Stored::packed(Digest::of(&json), root, json, stream, None).unwrap();
            bases.insert(0, Rc::new(s));
        }
    }
}

fn lie() -> impl proptest::strategy::Strategy<Value = Lie> {
    use proptest::prelude::*;
    prop_oneof![
        Just(Lie::None),
        any::<usize>().prop_map(Lie::FlipFrameByte),
        any::<usize>().prop_map(Lie::RenameFrame),
        any::<usize>().prop_map(Lie::SwapRuns),
        any::<usize>().prop_map(Lie::ResizeChunk),
        any::<usize>().prop_map(Lie::ShiftCopy),
        any::<usize>().prop_map(Lie::DropFrame),
        any::<usize>().prop_map(Lie::FrameForAnother),
        Just(Lie::WrongDigest),
        Just(Lie::SameShaOtherSizeBase),
    ]
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig { cases: 96, ..Default::default() })]

    #[test]
    fn a_visible_packet_serves_exactly_its_manifests_bytes(
        seed in 0u64..1_000_000,
        small in 1usize..30,
        large in 0usize..3,
        grow in proptest::bool::ANY,
        edits in proptest::collection::vec((0usize..40, 0u8..4), 0..5),
        lie in lie(),
        in_order in proptest::bool::ANY,
    ) {
        let mut store = Store { in_order, ..Store::default() };
        let mut files: Vec<(String, Vec<u8>)> = (0..small)
            .map(|i| (format!("workspace/s{i:03}.txt"), noise(seed + i as u64, 10 + (seed as usize + i * 37) % 3000)))
            .collect();
        for i in 0..large {
            files.push((format!("workspace/l{i}.bin"), noise(seed ^ (i as u64 + 1000), 270_000 + (seed as usize % 5) * 100_000)));
        }
        let as_refs = |f: &[(String, Vec<u8>)]| -> Built {
            let v: Vec<(&str, Vec<u8>)> = f.iter().map(|(p, c)| (p.as_str(), c.clone())).collect();
            packet(&v)
        };
        let first = as_refs(&files);
        let (base, _) = edge(&mut store, first.digest, &client(&first, None), &[]).unwrap();
        proptest::prop_assert_eq!(store.serve(&base), first.bytes.clone());
        if grow && large > 0 {
            // A large body that grew: its recipe copies the old chunks.
            let n = files.len();
            files[n - 1].1.extend_from_slice(&noise(seed + 3, 70_000));
        }
        for (at, kind) in edits {
            let n = files.len();
            match kind {
                0 => files[at % n].1.extend_from_slice(&noise(seed + 7, 5000)),
                1 => files[at % n].1 = noise(seed + at as u64 + 50, 100),
                2 => files.push((format!("workspace/new{at:03}.txt"), noise(at as u64, 40))),
                _ => if n > 1 { files.remove(at % n); },
            }
        }
        files.sort_by(|a, b| a.0.cmp(&b.0));
        files.dedup_by(|a, b| a.0 == b.0);
        let next = as_refs(&files);
        let mut sent = client(&next, Some(&base));
        let mut digest = next.digest;
        let mut bases = vec![base.clone()];
        tell(lie, &mut sent, &mut digest, &mut bases, &mut store);
        match edge(&mut store, digest, &sent, &bases) {
            Ok((stored, _)) => {
                // Visible: every member's bytes are the manifest's.
                let served = store.serve(&stored);
                let reread = packet_core::reader::verify(&served, packet_core::ReaderOptions {
                    expected_digest: Some(stored.digest),
                    ..Default::default()
                });
                proptest::prop_assert!(reread.is_ok(), "{lie:?}: {reread:?}");
                proptest::prop_assert_eq!(stored.digest, next.digest);
                proptest::prop_assert!(served == next.bytes, "{:?}", lie);
            }
            Err(code) => {
                proptest::prop_assert!(!matches!(lie, Lie::None), "an honest push was refused: {code}");
            }
        }
    }
}
