//! Bodies proven as their chunks arrive (docs/transfer.md, "Push", step 3),
//! pure: when a part carries every chunk of a large body's recipe, one
//! after the other in the recipe's order and each new to the store
//! (written, as sent, into the part's own pack), the body is hashed and
//! screened from those chunks' raw bytes as they are checked, and its proof
//! kept with the part's record ([`InOrder::finish`]). `complete` then needs
//! no read of that body ([`Arrived::proves`]): the proof holds only if the
//! chunks the body will be served from are exactly the ones that were
//! hashed (same pack, offset, stored size and encoding). A body whose
//! chunks arrive out of order, across parts, mixed with chunks the store
//! held, or whose bytes are not the manifest's is left to `complete`, which
//! reads it.

use std::collections::HashMap;

use packet_core::secrets::Scanner;
use packet_core::{Body, BodyFindings};

use super::prove::{End, Prover};
use super::recipes::RecipeBook;
use crate::storage::chunk::ChunkRef;

/// The most bodies proven at once (bodies whose runs overlap: recipes
/// sharing chunks); a body that would be one more is left to `complete`.
pub const MAX_AT_ONCE: usize = 8;

/// A body proven from a run of a part's frames.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Early {
    /// The body.
    pub body: Body,
    /// Its first frame's index in the part.
    pub first: u32,
    /// How many frames, from `first`.
    pub count: u32,
    /// Its end state.
    pub end: End,
    /// What it holds, for each class its members have (empty ones too).
    pub findings: Vec<(u8, BodyFindings)>,
}

/// A body proven as it arrived, its frames placed where `complete` finds
/// its chunks (slots of the push's pack table).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Arrived {
    /// The chunks that were hashed, where they lie.
    pub chunks: Vec<ChunkRef>,
    /// Its end state.
    pub end: End,
    /// What it holds, for each class.
    pub findings: Vec<(u8, BodyFindings)>,
}

impl Arrived {
    /// Whether this proves a body served from `chunks` whose members have
    /// `classes`: the very chunks hashed, every class screened.
    pub fn proves(&self, chunks: &[ChunkRef], classes: &[(u8, String)]) -> bool {
        self.chunks == chunks
            && classes
                .iter()
                .all(|(c, _)| self.findings.iter().any(|(f, _)| f == c))
    }
}

struct Running {
    first: usize,
    count: usize,
    next: usize,
    prover: Prover,
}

/// The bodies of one part being proven as its frames are checked.
pub struct InOrder<'a> {
    frames: &'a [ChunkRef],
    /// The runs starting at each frame: the body and its frame count.
    starts: HashMap<usize, Vec<(Body, usize)>>,
    classes: &'a HashMap<Body, Vec<(u8, String)>>,
    scanner: &'a Scanner,
    running: Vec<Running>,
    proven: Vec<Early>,
}

impl<'a> InOrder<'a> {
    /// The part whose frames are `frames` (as placed, in the table's
    /// order; `new` marks those written into the part's own pack), for the
    /// recipes of `book` over the packet's `bodies`; `classes` are each
    /// body's scan classes.
    pub fn new(
        frames: &'a [ChunkRef],
        new: &[bool],
        bodies: &[Body],
        book: &RecipeBook,
        classes: &'a HashMap<Body, Vec<(u8, String)>>,
        scanner: &'a Scanner,
    ) -> InOrder<'a> {
        let mut at: HashMap<(packet_core::Digest, u64), usize> = HashMap::new();
        for (i, f) in frames.iter().enumerate() {
            at.entry(f.name()).or_insert(i);
        }
        let mut starts: HashMap<usize, Vec<(Body, usize)>> = HashMap::new();
        for body in bodies {
            let Some(r) = book.get(body) else { continue };
            let Some(&first) = r.chunks.first().and_then(|c| at.get(c)) else {
                continue;
            };
            let end = first + r.chunks.len();
            let run = frames.get(first..end).zip(new.get(first..end));
            let in_order = run.is_some_and(|(fs, ns)| {
                fs.iter().zip(&r.chunks).all(|(f, c)| f.name() == *c) && ns.iter().all(|n| *n)
            });
            let total: u64 = r.chunks.iter().map(|c| c.1).sum();
            if in_order && total == body.size {
                starts
                    .entry(first)
                    .or_default()
                    .push((*body, r.chunks.len()));
            }
        }
        InOrder {
            frames,
            starts,
            classes,
            scanner,
            running: Vec::new(),
            proven: Vec::new(),
        }
    }

    /// Whether any body may be proven here.
    pub fn is_empty(&self) -> bool {
        self.starts.is_empty()
    }

    /// Frame `index`'s raw bytes, checked against its name.
    pub fn feed(&mut self, index: usize, raw: &[u8]) {
        if let Some(runs) = self.starts.remove(&index) {
            for (body, count) in runs {
                if self.running.len() >= MAX_AT_ONCE {
                    break;
                }
                let none = Vec::new();
                let mine = self.classes.get(&body).unwrap_or(&none);
                let refs: Vec<(u8, &str)> = mine.iter().map(|(c, p)| (*c, p.as_str())).collect();
                let chunks = self.frames[index..index + count].to_vec();
                self.running.push(Running {
                    first: index,
                    count,
                    next: index,
                    prover: Prover::full(body, chunks, &refs, self.scanner),
                });
            }
        }
        let mut i = 0;
        while i < self.running.len() {
            let r = &mut self.running[i];
            // A frame skipped or fed twice: the body is left to `complete`.
            let fed = r.next == index && r.prover.feed(raw).is_ok();
            r.next += 1;
            if !fed {
                self.running.swap_remove(i);
                continue;
            }
            if r.next < r.first + r.count {
                i += 1;
                continue;
            }
            let done = self.running.swap_remove(i);
            if let Ok(p) = done.prover.finish() {
                if let (Some(_), Some(end)) = (p.proof, p.end) {
                    self.proven.push(Early {
                        body: p.body,
                        first: done.first as u32,
                        count: done.count as u32,
                        end,
                        findings: p.findings,
                    });
                }
            }
        }
    }

    /// The bodies proven, once every frame was fed.
    pub fn finish(self) -> Vec<Early> {
        self.proven
    }
}

#[cfg(all(test, not(target_arch = "wasm32")))]
mod tests {
    use super::*;
    use crate::push::at_hand::AtHand;
    use packet_core::Digest;
    use pillbox_wire::recipes::{BodyRecipe, ChunkName, Run};

    /// A body of `pieces` (each 100 KiB of its own byte), its recipe's
    /// book, and each piece's bytes.
    fn body(pieces: &[u8]) -> (Body, RecipeBook, Vec<Vec<u8>>) {
        let bytes: Vec<Vec<u8>> = pieces.iter().map(|b| vec![*b; 100 << 10]).collect();
        let all = bytes.concat();
        let body = Body {
            sha256: Digest::of(&all),
            size: all.len() as u64,
        };
        let book = book_of(body, &bytes);
        (body, book, bytes)
    }

    fn frame(bytes: &[u8], offset: u64) -> ChunkRef {
        ChunkRef::identity(Digest::of(bytes), 0, offset, bytes.len() as u64)
    }

    /// The bodies proven when `sent` (indices into `bytes`, or other
    /// bytes) arrive in that order, all new unless `held`.
    fn proven(body: Body, book: &RecipeBook, sent: &[Vec<u8>], held: Option<usize>) -> Vec<Early> {
        let frames: Vec<ChunkRef> = sent
            .iter()
            .enumerate()
            .map(|(i, b)| frame(b, i as u64 * (100 << 10)))
            .collect();
        let new: Vec<bool> = (0..frames.len()).map(|i| Some(i) != held).collect();
        let classes = HashMap::from([(body, vec![(0u8, "workspace/big.bin".to_string())])]);
        let scanner = Scanner::new();
        let mut in_order = InOrder::new(&frames, &new, &[body], book, &classes, &scanner);
        for (i, b) in sent.iter().enumerate() {
            in_order.feed(i, b);
        }
        in_order.finish()
    }

    #[test]
    fn a_body_whose_chunks_arrive_in_order_is_proven() {
        let (body, book, bytes) = body(&[1, 2, 3]);
        let mut sent = vec![vec![9u8; 10]];
        sent.extend(bytes.iter().cloned());
        sent.push(vec![8u8; 10]);
        let got = proven(body, &book, &sent, None);
        assert_eq!(got.len(), 1);
        assert_eq!((got[0].body, got[0].first, got[0].count), (body, 1, 3));
        assert_eq!(got[0].end.hash.hashed(), body.size);
        assert_eq!(got[0].end.scans.len(), 1);
        assert_eq!(got[0].findings.len(), 1);
    }

    #[test]
    fn out_of_order_split_or_held_chunks_leave_the_body_to_complete() {
        let (body, book, bytes) = body(&[1, 2, 3]);
        let swapped = vec![bytes[0].clone(), bytes[2].clone(), bytes[1].clone()];
        assert!(
            proven(body, &book, &swapped, None).is_empty(),
            "out of order"
        );
        let gap = vec![
            bytes[0].clone(),
            vec![7u8; 10],
            bytes[1].clone(),
            bytes[2].clone(),
        ];
        assert!(
            proven(body, &book, &gap, None).is_empty(),
            "not one after the other"
        );
        // Across parts: each part has only some of the chunks.
        assert!(
            proven(body, &book, &bytes[..2], None).is_empty(),
            "first part"
        );
        assert!(
            proven(body, &book, &bytes[2..], None).is_empty(),
            "second part"
        );
        // A chunk the store held (not in the part's pack).
        assert!(
            proven(body, &book, &bytes, Some(1)).is_empty(),
            "held chunk"
        );
    }

    #[test]
    fn a_chunk_sent_twice_is_fed_once() {
        let (body, book, bytes) = body(&[1, 2, 3]);
        // The first chunk again after the body: the run starts at its first
        // sending and is proven once.
        let mut sent = bytes.clone();
        sent.push(bytes[0].clone());
        let got = proven(body, &book, &sent, None);
        assert_eq!(got.len(), 1);
        assert_eq!((got[0].first, got[0].count), (0, 3));
        // A frame fed twice or skipped stops the body's proof.
        let frames: Vec<ChunkRef> = bytes.iter().map(|b| frame(b, 0)).collect();
        let classes = HashMap::new();
        let scanner = Scanner::new();
        let mut in_order = InOrder::new(&frames, &[true; 3], &[body], &book, &classes, &scanner);
        in_order.feed(0, &bytes[0]);
        in_order.feed(0, &bytes[0]);
        in_order.feed(1, &bytes[1]);
        in_order.feed(2, &bytes[2]);
        assert!(in_order.finish().is_empty());
    }

    #[test]
    fn bytes_that_are_not_the_body_prove_nothing() {
        // The recipe names chunks whose bytes do not make the body (a
        // lying recipe: its body's sha256 is another's).
        let (fake, lying_book, bytes) = lying(&[1, 2, 3]);
        assert!(proven(fake, &lying_book, &bytes, None).is_empty());
    }

    /// A recipe book holding `body` as the chunks `pieces`, in order.
    fn book_of(body: Body, pieces: &[Vec<u8>]) -> RecipeBook {
        let runs = pieces
            .iter()
            .map(|p| {
                Run::Chunk(ChunkName {
                    sha256: Digest::of(p),
                    size: p.len() as u32,
                })
            })
            .collect();
        let mut book = RecipeBook::new();
        book.add(&[BodyRecipe { body, runs }], &[body], &AtHand::new())
            .unwrap();
        book
    }

    /// A body named by other bytes' sha256, with the recipe of `pieces`.
    fn lying(pieces: &[u8]) -> (Body, RecipeBook, Vec<Vec<u8>>) {
        let (real, _, bytes) = body(pieces);
        let fake = Body {
            sha256: Digest::of(b"another body"),
            size: real.size,
        };
        let book = book_of(fake, &bytes);
        (fake, book, bytes)
    }

    #[test]
    fn a_proof_counts_only_for_the_chunks_hashed() {
        let (body, book, bytes) = body(&[1, 2, 3]);
        let e = proven(body, &book, &bytes, None).remove(0);
        let chunks: Vec<ChunkRef> = bytes
            .iter()
            .enumerate()
            .map(|(i, b)| frame(b, i as u64 * (100 << 10)))
            .collect();
        let a = Arrived {
            chunks: chunks.clone(),
            end: e.end,
            findings: e.findings,
        };
        let classes = vec![(0u8, "workspace/big.bin".to_string())];
        assert!(a.proves(&chunks, &classes));
        // The same chunk kept elsewhere, or another class to screen.
        let mut elsewhere = chunks.clone();
        elsewhere[1] = elsewhere[1].in_slot(4);
        assert!(!a.proves(&elsewhere, &classes));
        assert!(!a.proves(&chunks, &[(0, "a".into()), (3, "b".into())]));
    }
}
