//! A push's requests with frames (docs/transfer.md, "Push", step 3): its
//! parts, and the create body of a push that stays open (part
//! [`CREATE_PART`]), pure: where a request's frames are placed (in its own
//! new pack, or where the store holds them already), the `chunks` rows of
//! what it stored, what the records of a push's requests put at hand when
//! the push is read again, and the parts a look lists.

use std::collections::HashMap;
use std::rc::Rc;

use packet_core::{Body, BodyFindings};
use pillbox_wire::chunks::Frame;

use super::at_hand::AtHand;
use super::in_order::Arrived;
use super::records::PartRecord;
use crate::storage::chunk::{ChunkRef, Held, Name, NewChunk};
use crate::storage::findings::BodyClass;
use crate::storage::index::pushes::PushPartRow;

/// The part number of a create body's frames in `push_parts` (parts sent
/// later are numbered from 1, so it is never replaced).
pub const CREATE_PART: u16 = 0;

/// A request's frames placed: its record (where each frame's chunk lies),
/// which frames are new to the store (written, as sent, into the
/// request's pack, back to back in table order), and that pack's size.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Placed {
    /// The record of where the frames live.
    pub record: PartRecord,
    /// For each frame, whether it goes into the request's pack.
    pub new: Vec<bool>,
    /// The request's pack's size (0: it writes no pack).
    pub pack_size: u64,
}

impl Placed {
    /// How many frames go into the request's pack.
    pub fn new_count(&self) -> u64 {
        self.new.iter().filter(|n| **n).count() as u64
    }
}

/// Places a request's `frames`: each the store holds already (`held`, by
/// name and size) lies where it is held; the others go into the pack
/// `pack_key`, in table order.
pub fn place<'h>(
    frames: &[Frame],
    held: impl Fn(&Name) -> Option<&'h Held>,
    pack_key: &str,
) -> Placed {
    let mut record = PartRecord::default();
    let mut new = Vec::with_capacity(frames.len());
    let mut offset = 0u64;
    for f in frames {
        let raw = u64::from(f.raw_size);
        let chunk = match held(&(f.sha256, raw)) {
            Some(h) => {
                new.push(false);
                let slot = record.pack(&h.pack);
                ChunkRef {
                    sha256: f.sha256,
                    raw,
                    slot,
                    offset: h.offset,
                    stored: h.stored,
                    encoding: h.encoding,
                }
            }
            None => {
                new.push(true);
                let slot = record.pack(pack_key);
                let c = ChunkRef {
                    sha256: f.sha256,
                    raw,
                    slot,
                    offset,
                    stored: u64::from(f.stored_size),
                    encoding: f.encoding,
                };
                offset += u64::from(f.stored_size);
                c
            }
        };
        record.frames.push(chunk);
    }
    Placed {
        record,
        new,
        pack_size: offset,
    }
}

/// The rows for the chunks a request stored in its pack (those `new`
/// marks).
pub fn stored_rows(record: &PartRecord, new: &[bool]) -> Vec<NewChunk> {
    record
        .frames
        .iter()
        .zip(new)
        .filter(|(_, n)| **n)
        .map(|(c, _)| (c.sha256, c.raw, c.offset, c.stored, c.encoding))
        .collect()
}

/// The row of a request with `frames` (part `number`; a create body's is
/// [`CREATE_PART`]): its pack `pack_key`, if its new frames made one
/// (`pack_size` bytes), and its record object.
pub fn part_row(
    number: u16,
    frames: &[Frame],
    pack_key: &str,
    pack_size: u64,
    record: String,
) -> PushPartRow {
    PushPartRow {
        number,
        pack: (pack_size > 0).then(|| pack_key.to_string()),
        record,
        frames: frames.len() as u32,
        bytes: frames.iter().map(|f| u64::from(f.stored_size)).sum(),
        stored_bytes: pack_size,
    }
}

/// What the frames of `record` that are whole bodies hold, by body and
/// class (only what is not empty was kept).
pub fn found(record: &PartRecord) -> impl Iterator<Item = (BodyClass, BodyFindings)> + '_ {
    record.findings.iter().filter_map(|(i, class, f)| {
        let c = record.frames.get(*i as usize)?;
        let body = Body {
            sha256: c.sha256,
            size: c.raw,
        };
        Some(((body, *class), f.clone()))
    })
}

/// The packs a push read again must ask about (whether they still have
/// their row): its bases' and its records', each once.
pub fn packs_named(at_hand: &AtHand, records: &[Rc<PartRecord>]) -> Vec<String> {
    let mut named = at_hand.packs.keys();
    for key in records.iter().flat_map(|r| &r.packs) {
        if !named.contains(key) {
            named.push(key.clone());
        }
    }
    named
}

/// What a push's records put at hand besides their frames.
#[derive(Debug, Default)]
pub struct Gathered {
    /// What the frames that are whole bodies hold.
    pub arrived: HashMap<BodyClass, BodyFindings>,
    /// The bodies proven as their chunks arrived, with where those lie.
    pub early: HashMap<Body, Vec<Arrived>>,
}

/// A push read again: what lies in the packs `gone` (collected since it
/// was found) is forgotten, then every frame of `records` not in one of
/// them is put at hand, with the bodies proven from frames none of which
/// lies in one, and what the frames that are bodies hold (a later record's
/// word on a body and class wins).
pub fn gather(records: &[Rc<PartRecord>], gone: &[String], at_hand: &mut AtHand) -> Gathered {
    at_hand.forget_packs(gone);
    let mut gathered = Gathered::default();
    for record in records {
        for (key, chunk) in record.located() {
            if !gone.iter().any(|g| g == key) {
                at_hand.add_frame(key, chunk);
            }
        }
        for e in &record.early {
            let run = (e.first as usize)..(e.first + e.count) as usize;
            // Where the chunks hashed lie, in the push's pack table; a
            // body with a chunk in a pack collected is read, if at all.
            let chunks: Option<Vec<ChunkRef>> = record.frames[run]
                .iter()
                .map(|c| {
                    let key = record.packs.get(c.slot as usize)?;
                    if gone.iter().any(|g| g == key) {
                        return None;
                    }
                    Some(c.in_slot(at_hand.packs.find(key)?))
                })
                .collect();
            if let Some(chunks) = chunks {
                gathered.early.entry(e.body).or_default().push(Arrived {
                    chunks,
                    end: e.end.clone(),
                    findings: e.findings.clone(),
                });
            }
        }
        gathered.arrived.extend(found(record));
    }
    gathered
}

/// The bytes a part stored, as told to its caller: which bytes the store
/// held already is news about other packets, told only to a caller that
/// may read them all (`reveal`); any other is told the bytes it sent.
pub fn stored_told(part: &PushPartRow, reveal: bool) -> u64 {
    if reveal {
        part.stored_bytes
    } else {
        part.bytes
    }
}

/// The parts a look at a push lists: all but its create body's, each with
/// the stored bytes its caller is told.
pub fn listed(parts: &[PushPartRow], reveal: bool) -> Vec<PushPartRow> {
    parts
        .iter()
        .filter(|p| p.number != CREATE_PART)
        .map(|p| PushPartRow {
            stored_bytes: stored_told(p, reveal),
            ..p.clone()
        })
        .collect()
}

#[cfg(all(test, not(target_arch = "wasm32")))]
mod tests {
    use super::*;

    use packet_core::assembled::BodyHasher;
    use packet_core::Digest;
    use pillbox_wire::chunks::Encoding;

    use super::super::in_order::Early;
    use super::super::prove::End;

    fn frame(tag: &str, raw: u32, stored: u32) -> Frame {
        Frame {
            sha256: Digest::of(tag.as_bytes()),
            raw_size: raw,
            stored_size: stored,
            encoding: if raw == stored {
                Encoding::Identity
            } else {
                Encoding::Zstd
            },
        }
    }

    fn name(f: &Frame) -> Name {
        (f.sha256, u64::from(f.raw_size))
    }

    #[test]
    fn frames_held_lie_where_they_are_and_the_others_go_into_the_pack() {
        let (a, b, c) = (frame("a", 100, 40), frame("b", 50, 50), frame("c", 70, 30));
        let old = Held {
            pack: "packs/old".into(),
            offset: 4096,
            stored: 50,
            encoding: Encoding::Identity,
        };
        let held = |n: &Name| (*n == name(&b)).then_some(&old);
        let placed = place(&[a, b, c], held, "packs/new");
        assert_eq!(placed.new, [true, false, true]);
        assert_eq!(placed.new_count(), 2);
        assert_eq!(placed.pack_size, 40 + 30);
        assert_eq!(placed.record.packs, ["packs/new", "packs/old"]);
        let frames = &placed.record.frames;
        assert_eq!(
            (frames[0].slot, frames[0].offset, frames[0].stored),
            (0, 0, 40)
        );
        assert_eq!(frames[0].encoding, Encoding::Zstd);
        assert_eq!(
            (frames[1].slot, frames[1].offset, frames[1].stored),
            (1, 4096, 50)
        );
        assert_eq!(
            (frames[2].slot, frames[2].offset, frames[2].stored),
            (0, 40, 30)
        );
        assert_eq!(
            stored_rows(&placed.record, &placed.new),
            [
                (a.sha256, 100, 0, 40, Encoding::Zstd),
                (c.sha256, 70, 40, 30, Encoding::Zstd)
            ]
        );
    }

    #[test]
    fn a_request_whose_frames_are_all_held_writes_no_pack() {
        let a = frame("a", 10, 10);
        let old = Held {
            pack: "packs/old".into(),
            offset: 7,
            stored: 10,
            encoding: Encoding::Identity,
        };
        let held = |_: &Name| Some(&old);
        let placed = place(&[a], held, "packs/new");
        assert_eq!((placed.pack_size, placed.new_count()), (0, 0));
        assert_eq!(placed.record.packs, ["packs/old"]);
        assert!(stored_rows(&placed.record, &placed.new).is_empty());
        let none = place(&[], |_: &Name| None, "packs/new");
        assert_eq!((none.pack_size, none.record.packs.len()), (0, 0));
    }

    #[test]
    fn a_requests_row_names_its_pack_only_when_it_stored_frames() {
        let frames = [frame("a", 100, 40), frame("b", 50, 50)];
        let row = part_row(3, &frames, "packs/new", 40, "pushes/p/parts/3".into());
        assert_eq!(
            (row.number, row.pack.as_deref(), row.record.as_str()),
            (3, Some("packs/new"), "pushes/p/parts/3")
        );
        assert_eq!((row.frames, row.bytes, row.stored_bytes), (2, 90, 40));
        let held = part_row(CREATE_PART, &frames, "packs/new", 0, "r".into());
        assert_eq!((held.number, held.pack, held.stored_bytes), (0, None, 0));
        assert_eq!((held.frames, held.bytes), (2, 90));
    }

    fn early(bytes: &[u8], first: u32, count: u32) -> Early {
        let mut hasher = BodyHasher::new(Body {
            sha256: Digest::of(bytes),
            size: bytes.len() as u64,
        });
        hasher.update(bytes).unwrap();
        Early {
            body: hasher.expected(),
            first,
            count,
            end: End {
                hash: hasher.state(),
                scans: vec![],
            },
            findings: vec![(1, BodyFindings::default())],
        }
    }

    #[test]
    fn a_push_read_again_has_at_hand_what_its_records_left_in_packs_not_gone() {
        let (a, b, c) = (frame("a", 10, 10), frame("b", 20, 20), frame("c", 30, 30));
        // The first request's frames a and b went into its pack, b was
        // held in a pack since collected; the second's c into its own.
        let gone_held = Held {
            pack: "packs/gone".into(),
            offset: 0,
            stored: 20,
            encoding: Encoding::Identity,
        };
        let b_held = |n: &Name| (*n == name(&b)).then_some(&gone_held);
        let mut first = place(&[a, b], b_held, "packs/one").record;
        first.early = vec![early(b"ab", 0, 1), early(b"xy", 0, 2)];
        let findings = BodyFindings {
            secrets: vec![(1, "private-key")],
            git: vec![],
        };
        first.findings = vec![(0, 3, findings.clone()), (1, 3, findings.clone())];
        let second = place(&[c], |_: &Name| None, "packs/two").record;
        let records = [Rc::new(first), Rc::new(second)];
        let mut at_hand = AtHand::new();
        assert_eq!(
            packs_named(&at_hand, &records),
            ["packs/one", "packs/gone", "packs/two"]
        );
        let gone = vec!["packs/gone".to_string()];
        let gathered = gather(&records, &gone, &mut at_hand);
        assert!(at_hand.frame(&name(&a)).is_some());
        assert!(at_hand.frame(&name(&b)).is_none());
        let c_at = at_hand.frame(&name(&c)).unwrap();
        assert_eq!(at_hand.packs.key(c_at.slot), Some("packs/two"));
        // Only the body proven from frames not in a pack gone.
        let ab = early(b"ab", 0, 1);
        assert_eq!(gathered.early.len(), 1);
        let arrived = &gathered.early[&ab.body];
        assert_eq!(arrived.len(), 1);
        assert_eq!(arrived[0].chunks, [at_hand.frame(&name(&a)).unwrap()]);
        assert_eq!(arrived[0].end, ab.end);
        // What arrived bodies hold is kept, whichever pack they lie in.
        let body = |f: &Frame| Body {
            sha256: f.sha256,
            size: u64::from(f.raw_size),
        };
        assert_eq!(gathered.arrived.len(), 2);
        assert_eq!(gathered.arrived[&(body(&a), 3)], findings);
        assert_eq!(gathered.arrived[&(body(&b), 3)], findings);
    }

    #[test]
    fn findings_of_frames_a_record_does_not_list_are_left_out() {
        let mut record = place(&[frame("a", 10, 10)], |_: &Name| None, "packs/one").record;
        record.findings = vec![(5, 1, BodyFindings::default())];
        assert_eq!(found(&record).count(), 0);
    }

    #[test]
    fn a_look_lists_the_parts_but_the_create_bodys_and_tells_stored_bytes_to_readers() {
        let part = |number, bytes, stored_bytes| PushPartRow {
            number,
            pack: None,
            record: format!("pushes/p/parts/{number}.x"),
            frames: 1,
            bytes,
            stored_bytes,
        };
        let parts = [part(CREATE_PART, 10, 0), part(1, 100, 40), part(2, 7, 7)];
        let shown = |reveal| {
            listed(&parts, reveal)
                .iter()
                .map(|p| (p.number, p.bytes, p.stored_bytes))
                .collect::<Vec<_>>()
        };
        assert_eq!(shown(true), [(1, 100, 40), (2, 7, 7)]);
        assert_eq!(shown(false), [(1, 100, 100), (2, 7, 7)]);
        assert_eq!(stored_told(&parts[1], true), 40);
        assert_eq!(stored_told(&parts[1], false), 100);
    }
}
