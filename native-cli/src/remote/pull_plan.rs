//! Where each body of a pull comes from (docs/transfer.md, "Delta pull"): a
//! pure function of the bodies wanted, their chunks, and what this machine
//! already holds. No file, cache or connection is touched here; the caller
//! describes what it holds ([`Held`]: whole bodies and chunks at places of
//! its own numbering, earlier versions of bodies), and [`plan`] says, for
//! every body, which pieces come from where and which chunks to fetch, in
//! batches. Nothing a plan names is trusted: every piece is hashed as it
//! is read, and a piece that does not hash right is fetched instead.
//!
//! The preferences, in order: a whole body held here (one read, hashed as
//! it is copied); a chunk held here; for a body whose earlier version at
//! the same path is held (an appended log), the bytes past that version's
//! end by `Range` ([`Tail`]), the rest of its last chunks read from it;
//! else the chunk is fetched, once however many bodies share it.

use std::collections::{HashMap, HashSet};

use packet_core::Body;
use pillbox_wire::recipes::ChunkName;

/// A place holding bytes: one of the caller's sources, and an offset in it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct At {
    /// The caller's number for the source (a file, a buffer).
    pub source: usize,
    /// Where the bytes start in it.
    pub offset: u64,
}

impl At {
    /// `n` bytes further on.
    pub fn plus(self, n: u64) -> At {
        At {
            source: self.source,
            offset: self.offset + n,
        }
    }
}

/// How a wanted body is cut.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Cut {
    /// Its chunks, in order (a body of one chunk lists itself).
    Chunks(Vec<ChunkName>),
    /// No chunk list: the store keeps it whole (a /1 packet), and it is read
    /// by `Range` when it is not held here.
    Whole,
}

/// One distinct body the packet needs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Wanted {
    /// The body (size and sha256, as the manifest states them).
    pub body: Body,
    /// How it is cut.
    pub cut: Cut,
    /// An earlier version of it held here: the file at the same path, which
    /// a log that grew has as its first bytes.
    pub earlier: Option<Earlier>,
}

/// An earlier version of a body, held here.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Earlier {
    /// Where its first byte is.
    pub at: At,
    /// Its length.
    pub len: u64,
}

/// What this machine holds, as far as planning needs to know.
#[derive(Clone, Debug, Default)]
pub struct Held {
    /// Whole bodies, where they are.
    pub bodies: HashMap<Body, At>,
    /// Chunks, where they are.
    pub chunks: HashMap<ChunkName, At>,
}

/// Where one piece of a body comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum From {
    /// Read here (and hashed against its name).
    Local(At),
    /// Fetched with `POST …/chunks`.
    Fetch,
    /// Made of the earlier version's bytes from the piece's start to that
    /// version's end, then tail `tail`'s bytes.
    Tail(usize),
}

/// A piece of a body: one of its chunks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Piece {
    /// Where it starts in the body.
    pub offset: u64,
    /// The chunk.
    pub chunk: ChunkName,
    /// Where its bytes come from.
    pub from: From,
}

/// How one body is made.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Make {
    /// Copied whole from here, hashed as it is copied.
    Whole(At),
    /// Put together from its pieces; then hashed whole.
    Pieces(Vec<Piece>),
    /// Read by `Range` from the packet (no chunk list), hashed as it comes.
    Range,
}

/// Bytes of a body past the end of its earlier version, read by `Range`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Tail {
    /// The body (index into the wanted list).
    pub body: usize,
    /// Its earlier version.
    pub earlier: Earlier,
    /// The first piece it completes starts here (at or before the earlier
    /// version's end).
    pub start: u64,
}

/// One `POST …/chunks`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Batch {
    /// The chunks, in the packet's order.
    pub chunks: Vec<ChunkName>,
    /// Their raw bytes.
    pub bytes: u64,
}

/// How many chunks and bytes one request may ask for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BatchLimits {
    /// Chunks per request.
    pub chunks: usize,
    /// Raw bytes per request (the store bounds the stored bytes, which are
    /// at most these).
    pub bytes: u64,
}

impl BatchLimits {
    /// 16,384 chunks or 8 MiB a request (the store takes 65,536 and
    /// 64 MiB): small enough that several requests are in flight at once
    /// and the first bytes land early.
    pub const DEFAULT: BatchLimits = BatchLimits {
        chunks: 16_384,
        bytes: 8 << 20,
    };
}

/// The plan.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Plan {
    /// How each wanted body is made, in the wanted list's order.
    pub bodies: Vec<Make>,
    /// The chunks to fetch, each once.
    pub batches: Vec<Batch>,
    /// The tails to read by `Range`.
    pub tails: Vec<Tail>,
    /// What it adds up to.
    pub totals: Totals,
}

/// Bytes by where they come from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Totals {
    /// Read here.
    pub local_bytes: u64,
    /// Fetched as chunks (raw bytes; each chunk once).
    pub fetch_bytes: u64,
    /// Chunks fetched.
    pub fetch_chunks: u64,
    /// Read by `Range`: tails and bodies with no chunk list.
    pub range_bytes: u64,
}

/// Plans `wanted`, given what is `held` here.
pub fn plan(wanted: &[Wanted], held: &Held, limits: BatchLimits) -> Plan {
    let mut out = Plan::default();
    let mut fetching: HashSet<ChunkName> = HashSet::new();
    let mut batch = Batch::default();
    let mut fetch = |c: ChunkName, out: &mut Plan, batch: &mut Batch| {
        if !fetching.insert(c) {
            return;
        }
        if !batch.chunks.is_empty()
            && (batch.chunks.len() >= limits.chunks
                || batch.bytes + u64::from(c.size) > limits.bytes)
        {
            out.batches.push(std::mem::take(batch));
        }
        batch.chunks.push(c);
        batch.bytes += u64::from(c.size);
        out.totals.fetch_chunks += 1;
        out.totals.fetch_bytes += u64::from(c.size);
    };
    for (index, w) in wanted.iter().enumerate() {
        if let Some(&at) = held.bodies.get(&w.body) {
            out.totals.local_bytes += w.body.size;
            out.bodies.push(Make::Whole(at));
            continue;
        }
        let chunks = match &w.cut {
            Cut::Chunks(c) => c,
            Cut::Whole => {
                out.totals.range_bytes += w.body.size;
                out.bodies.push(Make::Range);
                continue;
            }
        };
        let mut pieces = Vec::with_capacity(chunks.len());
        let mut offset = 0u64;
        for &c in chunks {
            let from = match held.chunks.get(&c) {
                Some(&at) => From::Local(at),
                None => From::Fetch,
            };
            pieces.push(Piece {
                offset,
                chunk: c,
                from,
            });
            offset += u64::from(c.size);
        }
        if let Some(tail) = tail_of(index, w, &pieces) {
            let t = out.tails.len();
            for p in pieces.iter_mut().filter(|p| p.offset >= tail.start) {
                p.from = From::Tail(t);
            }
            out.totals.range_bytes += w.body.size - tail.earlier.len;
            out.tails.push(tail);
        }
        for p in &pieces {
            match p.from {
                From::Local(_) => out.totals.local_bytes += u64::from(p.chunk.size),
                From::Fetch => fetch(p.chunk, &mut out, &mut batch),
                From::Tail(_) => {}
            }
        }
        out.bodies.push(Make::Pieces(pieces));
    }
    if !batch.chunks.is_empty() {
        out.batches.push(batch);
    }
    out
}

/// A body that grew from its earlier version: every piece it has to fetch
/// lies at or after the start of the piece holding the earlier version's
/// end, and those pieces are all fetched (none held here). Then its bytes
/// past the earlier end are read by `Range` and the rest of those pieces
/// from the earlier version.
fn tail_of(index: usize, w: &Wanted, pieces: &[Piece]) -> Option<Tail> {
    let earlier = w.earlier?;
    if earlier.len == 0 || earlier.len >= w.body.size {
        return None;
    }
    let first_fetched = pieces.iter().position(|p| p.from == From::Fetch)?;
    let start = pieces[first_fetched].offset;
    let end_of = |p: &Piece| p.offset + u64::from(p.chunk.size);
    // The first fetched piece must reach the earlier end or start at it:
    // bytes before it are held, the earlier version's own.
    if start > earlier.len || end_of(&pieces[first_fetched]) < earlier.len {
        return None;
    }
    if pieces[first_fetched..]
        .iter()
        .any(|p| p.from != From::Fetch)
    {
        return None;
    }
    Some(Tail {
        body: index,
        earlier,
        start,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use packet_core::Digest;

    fn name(tag: &str, size: u32) -> ChunkName {
        ChunkName {
            sha256: Digest::of(tag.as_bytes()),
            size,
        }
    }

    fn body(tag: &str, size: u64) -> Body {
        Body {
            sha256: Digest::of(tag.as_bytes()),
            size,
        }
    }

    fn one_chunk(tag: &str, size: u32) -> Wanted {
        Wanted {
            body: body(tag, u64::from(size)),
            cut: Cut::Chunks(vec![name(tag, size)]),
            earlier: None,
        }
    }

    fn at(source: usize, offset: u64) -> At {
        At { source, offset }
    }

    #[test]
    fn nothing_held_fetches_every_chunk_once_in_order() {
        let shared = name("shared", 300);
        let wanted = vec![
            one_chunk("a", 10),
            Wanted {
                body: body("big", 700),
                cut: Cut::Chunks(vec![name("c1", 400), shared]),
                earlier: None,
            },
            Wanted {
                body: body("big2", 600),
                cut: Cut::Chunks(vec![shared, shared]),
                earlier: None,
            },
        ];
        let p = plan(&wanted, &Held::default(), BatchLimits::DEFAULT);
        assert_eq!(p.batches.len(), 1);
        assert_eq!(
            p.batches[0].chunks,
            vec![name("a", 10), name("c1", 400), shared]
        );
        assert_eq!(p.totals.fetch_bytes, 710);
        assert_eq!(p.totals.fetch_chunks, 3);
        assert_eq!(p.totals.local_bytes, 0);
        let Make::Pieces(pieces) = &p.bodies[2] else {
            panic!("{:?}", p.bodies[2]);
        };
        assert_eq!(pieces[1].offset, 300);
        assert!(pieces.iter().all(|p| p.from == From::Fetch));
    }

    #[test]
    fn whole_bodies_then_chunks_held_here_are_read_not_fetched() {
        let wanted = vec![
            one_chunk("a", 10),
            one_chunk("b", 20),
            Wanted {
                body: body("big", 700),
                cut: Cut::Chunks(vec![name("c1", 400), name("c2", 300)]),
                earlier: None,
            },
        ];
        let mut held = Held::default();
        held.bodies.insert(body("a", 10), at(0, 0));
        // A chunk of the same name is as good as the body.
        held.chunks.insert(name("b", 20), at(3, 50));
        held.chunks.insert(name("c2", 300), at(1, 4096));
        let p = plan(&wanted, &held, BatchLimits::DEFAULT);
        assert_eq!(p.bodies[0], Make::Whole(at(0, 0)));
        assert_eq!(
            p.bodies[1],
            Make::Pieces(vec![Piece {
                offset: 0,
                chunk: name("b", 20),
                from: From::Local(at(3, 50)),
            }])
        );
        assert_eq!(p.batches.len(), 1);
        assert_eq!(p.batches[0].chunks, vec![name("c1", 400)]);
        assert_eq!(p.totals.local_bytes, 10 + 20 + 300);
        assert_eq!(p.totals.fetch_bytes, 400);
    }

    #[test]
    fn batches_are_bounded_by_count_and_bytes() {
        let wanted: Vec<Wanted> = (0..10).map(|i| one_chunk(&format!("f{i}"), 100)).collect();
        let limits = BatchLimits {
            chunks: 4,
            bytes: 250,
        };
        let p = plan(&wanted, &Held::default(), limits);
        let sizes: Vec<usize> = p.batches.iter().map(|b| b.chunks.len()).collect();
        assert_eq!(sizes, [2, 2, 2, 2, 2]);
        let limits = BatchLimits {
            chunks: 3,
            bytes: 10_000,
        };
        let p = plan(&wanted, &Held::default(), limits);
        let sizes: Vec<usize> = p.batches.iter().map(|b| b.chunks.len()).collect();
        assert_eq!(sizes, [3, 3, 3, 1]);
        // A chunk larger than the byte bound still goes, alone.
        let big = vec![one_chunk("x", 1000), one_chunk("y", 10)];
        let p = plan(&big, &Held::default(), limits);
        assert_eq!(p.batches.len(), 1);
        let p = plan(
            &big,
            &Held::default(),
            BatchLimits {
                chunks: 10,
                bytes: 500,
            },
        );
        assert_eq!(p.batches.len(), 2);
    }

    #[test]
    fn an_appended_log_reads_only_its_new_bytes_by_range() {
        // The earlier version (1000 bytes) was cut 400 + 350 + 250; the log
        // grew by 60 bytes: its last chunk is cut again, 310 bytes.
        let old = [name("o1", 400), name("o2", 350), name("o3", 250)];
        let new_last = name("n3", 310);
        let wanted = vec![Wanted {
            body: body("log v2", 1060),
            cut: Cut::Chunks(vec![old[0], old[1], new_last]),
            earlier: Some(Earlier {
                at: at(7, 0),
                len: 1000,
            }),
        }];
        let mut held = Held::default();
        held.chunks.insert(old[0], at(7, 0));
        held.chunks.insert(old[1], at(7, 400));
        held.chunks.insert(old[2], at(7, 750));
        let p = plan(&wanted, &held, BatchLimits::DEFAULT);
        assert!(p.batches.is_empty(), "{:?}", p.batches);
        assert_eq!(
            p.tails,
            vec![Tail {
                body: 0,
                earlier: Earlier {
                    at: at(7, 0),
                    len: 1000
                },
                start: 750,
            }]
        );
        assert_eq!(p.totals.range_bytes, 60);
        let Make::Pieces(pieces) = &p.bodies[0] else {
            panic!();
        };
        assert_eq!(pieces[2].from, From::Tail(0));
        assert_eq!(pieces[0].from, From::Local(at(7, 0)));
    }

    #[test]
    fn a_body_that_changed_in_its_middle_fetches_its_chunks() {
        let wanted = vec![Wanted {
            body: body("v2", 1100),
            cut: Cut::Chunks(vec![name("o1", 400), name("new", 450), name("o3", 250)]),
            earlier: Some(Earlier {
                at: at(2, 0),
                len: 1000,
            }),
        }];
        let mut held = Held::default();
        held.chunks.insert(name("o1", 400), at(2, 0));
        held.chunks.insert(name("o3", 250), at(2, 750));
        let p = plan(&wanted, &held, BatchLimits::DEFAULT);
        assert!(p.tails.is_empty());
        assert_eq!(p.batches[0].chunks, vec![name("new", 450)]);
        // Shorter than before: no tail either.
        let shorter = vec![Wanted {
            body: body("v3", 900),
            cut: Cut::Chunks(vec![name("o1", 400), name("x", 500)]),
            earlier: Some(Earlier {
                at: at(2, 0),
                len: 1000,
            }),
        }];
        let p = plan(&shorter, &held, BatchLimits::DEFAULT);
        assert!(p.tails.is_empty());
        assert_eq!(p.batches[0].chunks, vec![name("x", 500)]);
    }

    #[test]
    fn a_body_with_no_chunk_list_is_read_by_range_unless_held() {
        let wanted = vec![
            Wanted {
                body: body("whole", 5 << 20),
                cut: Cut::Whole,
                earlier: None,
            },
            Wanted {
                body: body("held", 3 << 20),
                cut: Cut::Whole,
                earlier: None,
            },
        ];
        let mut held = Held::default();
        held.bodies.insert(body("held", 3 << 20), at(0, 512));
        let p = plan(&wanted, &held, BatchLimits::DEFAULT);
        assert_eq!(p.bodies, vec![Make::Range, Make::Whole(at(0, 512))]);
        assert_eq!(p.totals.range_bytes, 5 << 20);
        assert!(p.batches.is_empty());
    }
}
