//! What a push lacks and what a request of it may send (docs/transfer.md,
//! "A push knows what it lacks"), pure: its status (what `GET` lists and
//! `complete` refuses with), the chunks it may upload, and a request's
//! frames checked against them before a frame's bytes are read.

use pillbox_wire::ApiCode;
use std::collections::{HashMap, HashSet};

use packet_core::Digest;
use pillbox_wire::chunks::Frame;
use pillbox_wire::recipes::ChunkName;

use super::at_hand::AtHand;
use super::plan::{Plan, Status};
use super::recipes::RecipeBook;
use crate::problem::Problem;
use crate::storage::chunk::Name;

/// The chunks of packet.json's recipe not at hand (a base's, or uploaded
/// by the push), each once.
pub fn lacking_manifest(recipe: &[ChunkName], at_hand: &AtHand) -> Vec<Name> {
    let mut seen = HashSet::new();
    recipe
        .iter()
        .map(|c| (c.sha256, u64::from(c.size)))
        .filter(|n| at_hand.chunk(n).is_none() && seen.insert(*n))
        .collect()
}

/// What a push lacks: its plan's missing bodies and chunks, and the
/// chunks of packet.json that are no longer at hand (a pack collected).
pub fn status_of(
    plan: &Plan,
    at_hand: &AtHand,
    book: &RecipeBook,
    manifest: &[ChunkName],
) -> Status {
    let mut status = plan.status(at_hand, book);
    for (sha256, size) in lacking_manifest(manifest, at_hand) {
        if !status.missing_chunks.contains(&sha256) {
            status.missing_chunks.push(sha256);
            status.missing_bytes += size;
        }
    }
    status
}

/// The chunks a push may upload: its plan's, and the chunks of
/// packet.json no longer at hand.
pub fn wanted_of(
    plan: &Plan,
    at_hand: &AtHand,
    book: &RecipeBook,
    manifest: &[ChunkName],
) -> HashMap<Digest, u64> {
    let mut wanted = plan.wanted(at_hand, book);
    for (sha256, size) in lacking_manifest(manifest, at_hand) {
        wanted.insert(sha256, size);
    }
    wanted
}

/// The list a 409 `push_incomplete` carries: the missing chunks, then the
/// missing bodies.
pub fn missing_list(status: &Status) -> Vec<Digest> {
    let mut missing = status.missing_chunks.clone();
    missing.extend(status.missing.iter().copied());
    missing
}

/// 409 `push_incomplete`, with the bodies and chunks still missing.
pub fn incomplete(missing: &[Digest]) -> Problem {
    let mut p = Problem::new(
        ApiCode::PushIncomplete,
        format!("{} bodies or chunks are still missing", missing.len()),
        "upload them (GET the push to see what is missing), then complete again",
    );
    p.error.missing = Some(missing.iter().map(|d| d.hex().to_string()).collect());
    p
}

fn refused(code: ApiCode, message: String) -> Problem {
    Problem::new(
        code,
        message,
        "send only chunks this push needs, each once, named by the sha256 of its raw bytes (GET the push to see them)",
    )
}

/// Which frames of a create body's table are chunks of packet.json (by
/// name and size): they come first (422 `manifest_chunks_first`).
pub fn manifest_frames(frames: &[Frame], recipe: &[ChunkName]) -> Result<Vec<bool>, Problem> {
    let names: HashSet<Name> = recipe
        .iter()
        .map(|c| (c.sha256, u64::from(c.size)))
        .collect();
    let is_manifest: Vec<bool> = frames
        .iter()
        .map(|f| names.contains(&(f.sha256, u64::from(f.raw_size))))
        .collect();
    if let Some(first_body) = is_manifest.iter().position(|m| !m) {
        if is_manifest[first_body..].contains(&true) {
            return Err(refused(
                ApiCode::ManifestChunksFirst,
                format!("frame {first_body} is a body's chunk and a chunk of packet.json follows it: the manifest's chunks come first"),
            ));
        }
    }
    Ok(is_manifest)
}

/// Checks a table's frames against what the push may upload: no frame
/// twice (422 `chunk_not_needed`), and each one `skip` does not mark a
/// chunk of `wanted` (422 `chunk_not_needed`) of its size (422
/// `chunk_size_mismatch`).
pub fn check_wanted(
    frames: &[Frame],
    skip: &[bool],
    wanted: &HashMap<Digest, u64>,
) -> Result<(), Problem> {
    let mut seen = HashSet::new();
    for (i, f) in frames.iter().enumerate() {
        if !seen.insert(f.sha256) {
            return Err(refused(
                ApiCode::ChunkNotNeeded,
                format!("frame {i} ({}) is sent twice", f.sha256.hex()),
            ));
        }
        if skip.get(i).copied().unwrap_or(false) {
            continue;
        }
        match wanted.get(&f.sha256) {
            None => {
                return Err(refused(
                    ApiCode::ChunkNotNeeded,
                    format!(
                        "frame {i} ({}) is not a chunk this push needs",
                        f.sha256.hex()
                    ),
                ))
            }
            Some(&size) if size != u64::from(f.raw_size) => {
                return Err(refused(
                    ApiCode::ChunkSizeMismatch,
                    format!(
                        "frame {i} ({}) has {} bytes, the chunk has {size}",
                        f.sha256.hex(),
                        f.raw_size
                    ),
                ))
            }
            Some(_) => {}
        }
    }
    Ok(())
}

#[cfg(all(test, not(target_arch = "wasm32")))]
mod tests {
    use super::*;

    use packet_core::Body;
    use pillbox_wire::recipes::{BodyRecipe, Run};

    use super::super::fixtures::body;
    use super::super::plan::Source;
    use crate::storage::chunk::ChunkRef;

    fn name(tag: &str, size: u64) -> Name {
        (Digest::of(tag.as_bytes()), size)
    }

    fn chunk_name(n: Name) -> ChunkName {
        ChunkName {
            sha256: n.0,
            size: n.1 as u32,
        }
    }

    fn frame(n: Name) -> Frame {
        Frame {
            sha256: n.0,
            raw_size: n.1 as u32,
            stored_size: n.1 as u32,
            encoding: pillbox_wire::chunks::Encoding::Identity,
        }
    }

    /// A push of a large body (two chunks, one uploaded) and a small one
    /// (missing), over a manifest of three chunks, one uploaded.
    struct Push {
        at_hand: AtHand,
        book: RecipeBook,
        plan: Plan,
        manifest: Vec<ChunkName>,
        large: Body,
        small: Body,
        parts: [Name; 2],
        json: [Name; 3],
    }

    fn push() -> Push {
        let parts = [name("part 1", 200_000), name("part 2", 100_000)];
        let large = body("large", 300_000);
        let small = body("small", 10);
        let json = [
            name("json 1", 4096),
            name("json 2", 4096),
            name("json 3", 20),
        ];
        let mut at_hand = AtHand::new();
        for (i, n) in [parts[0], json[0]].into_iter().enumerate() {
            at_hand.add_frame(
                "packs/push",
                ChunkRef::identity(n.0, 0, i as u64 * 300_000, n.1),
            );
        }
        let mut book = RecipeBook::new();
        let recipe = BodyRecipe {
            body: large,
            runs: parts.iter().map(|&n| Run::Chunk(chunk_name(n))).collect(),
        };
        book.add(&[recipe], &[large, small], &at_hand).unwrap();
        let plan = Plan::new(&[large, small], &at_hand, &book);
        // The last chunk of packet.json is named twice.
        let manifest = [json[0], json[1], json[2], json[2]]
            .map(chunk_name)
            .to_vec();
        Push {
            at_hand,
            book,
            plan,
            manifest,
            large,
            small,
            parts,
            json,
        }
    }

    #[test]
    fn the_status_lists_the_plans_lack_then_packet_json_chunks_not_at_hand() {
        let p = push();
        assert_eq!(p.plan.bodies[0], (p.large, Source::Missing));
        assert_eq!(
            lacking_manifest(&p.manifest, &p.at_hand),
            [p.json[1], p.json[2]]
        );
        let status = status_of(&p.plan, &p.at_hand, &p.book, &p.manifest);
        assert_eq!(status.missing, [p.large.sha256, p.small.sha256]);
        assert_eq!(
            status.missing_chunks,
            [p.parts[1].0, p.json[1].0, p.json[2].0]
        );
        assert_eq!(
            status.missing_bytes,
            p.parts[1].1 + p.small.size + p.json[1].1 + p.json[2].1
        );
        // A 409 lists the chunks first, then the bodies.
        let missing = missing_list(&status);
        assert_eq!(
            missing,
            [
                p.parts[1].0,
                p.json[1].0,
                p.json[2].0,
                p.large.sha256,
                p.small.sha256
            ]
        );
        let refusal = incomplete(&missing);
        assert_eq!(
            (refusal.status, refusal.error.code()),
            (409, "push_incomplete")
        );
        let listed: Vec<String> = missing.iter().map(|d| d.hex().to_string()).collect();
        assert_eq!(refusal.error.missing, Some(listed));
    }

    #[test]
    fn a_chunk_of_packet_json_a_recipe_also_lacks_is_counted_once() {
        let p = push();
        // packet.json's last chunk is also the large body's missing chunk.
        let manifest = vec![chunk_name(p.json[0]), chunk_name(p.parts[1])];
        let status = status_of(&p.plan, &p.at_hand, &p.book, &manifest);
        assert_eq!(status.missing_chunks, [p.parts[1].0]);
        assert_eq!(status.missing_bytes, p.parts[1].1 + p.small.size);
        // Nothing lacking: only what the plan says.
        let none = status_of(&p.plan, &p.at_hand, &p.book, &[chunk_name(p.json[0])]);
        assert_eq!(none, p.plan.status(&p.at_hand, &p.book));
    }

    #[test]
    fn a_push_wants_its_plans_chunks_and_packet_json_chunks_not_at_hand() {
        let p = push();
        let wanted = wanted_of(&p.plan, &p.at_hand, &p.book, &p.manifest);
        // Every chunk of the recipe (a part sent again is still wanted),
        // and each body of at most a chunk's largest size, whole.
        let expected: HashMap<Digest, u64> = [
            p.parts[0],
            p.parts[1],
            (p.large.sha256, p.large.size),
            (p.small.sha256, p.small.size),
            p.json[1],
            p.json[2],
        ]
        .into_iter()
        .collect();
        assert_eq!(wanted, expected);
        // packet.json's chunk uploaded already is not wanted again.
        assert!(!wanted.contains_key(&p.json[0].0));
    }

    #[test]
    fn frames_are_checked_against_what_the_push_wants() {
        let p = push();
        let wanted = wanted_of(&p.plan, &p.at_hand, &p.book, &p.manifest);
        let code = |frames: &[Frame], skip: &[bool]| {
            check_wanted(frames, skip, &wanted)
                .err()
                .map(|e| (e.status, e.error.code().to_string()))
        };
        let good = [frame(p.parts[1]), frame(p.json[1])];
        assert_eq!(code(&good, &[]), None);
        let twice = [frame(p.parts[1]), frame(p.parts[1])];
        assert_eq!(code(&twice, &[]), Some((422, "chunk_not_needed".into())));
        // Sent twice is refused even for frames not checked otherwise.
        assert_eq!(
            code(&twice, &[true, true]),
            Some((422, "chunk_not_needed".into()))
        );
        let stranger = [frame(name("stranger", 7))];
        assert_eq!(code(&stranger, &[]), Some((422, "chunk_not_needed".into())));
        assert_eq!(code(&stranger, &[true]), None);
        let resized = [frame((p.parts[1].0, p.parts[1].1 - 1))];
        assert_eq!(
            code(&resized, &[]),
            Some((422, "chunk_size_mismatch".into()))
        );
    }

    #[test]
    fn a_create_bodys_manifest_frames_come_first() {
        let p = push();
        let body = frame(p.parts[1]);
        let (a, b) = (frame(p.json[1]), frame(p.json[2]));
        assert_eq!(
            manifest_frames(&[a, b, body], &p.manifest).unwrap(),
            [true, true, false]
        );
        assert_eq!(manifest_frames(&[body], &p.manifest).unwrap(), [false]);
        assert!(manifest_frames(&[], &p.manifest).unwrap().is_empty());
        // Matched by name and size.
        let resized = frame((p.json[1].0, 1));
        assert_eq!(
            manifest_frames(&[a, resized], &p.manifest).unwrap(),
            [true, false]
        );
        let late = manifest_frames(&[a, body, b], &p.manifest).unwrap_err();
        assert_eq!(
            (late.status, late.error.code()),
            (422, "manifest_chunks_first")
        );
        assert!(late.error.message().contains("frame 1"));
    }
}
