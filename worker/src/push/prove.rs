//! Proving a body from the chunks it will be served from (docs/transfer.md,
//! "Delta push"), pure: the caller reads the chunks [`Prover::reads`] names,
//! in order, and feeds their raw bytes; the prover hashes them against the
//! manifest's sha256 and size and screens them for packet-core's findings.
//!
//! A body that grew from a base body (its recipe starts with that body's
//! first chunks, and the store kept that body's end state: its SHA-256
//! state and its scanners' snapshots) is proven from where that body
//! ended: only the base body's last chunks (the ones not copied) and the
//! new chunks are read; the base's bytes after the copied chunks must be
//! the first new bytes (else the body is proven whole), and only the bytes
//! after them are hashed and screened.

use packet_core::assembled::{BodyHasher, Proof};
use packet_core::secrets::Scanner;
use packet_core::{Body, BodyFindings, BodyScanner, Error, HashState};

use super::plan::{GrownFrom, HashPlan};
use crate::storage::chunk::ChunkRef;

/// The most bytes of a base body's tail compared with new bytes; a longer
/// tail is hashed whole instead.
pub const MAX_TAIL: u64 = 8 << 20;

/// A body's end state, kept for bodies of several chunks: the SHA-256
/// state after all of its bytes, and for each scan class its scanner's
/// snapshot.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct End {
    /// The hash state after the body.
    pub hash: HashState,
    /// `(class, snapshot)`, one per class it was screened as.
    pub scans: Vec<(u8, Vec<u8>)>,
}

/// A body proven (or, for a body a base holds, screened).
#[derive(Debug)]
pub struct Proven {
    /// The body.
    pub body: Body,
    /// The chunks it is served from.
    pub chunks: Vec<ChunkRef>,
    /// The proof (none for a body only screened).
    pub proof: Option<Proof>,
    /// Its end state (a body hashed here).
    pub end: Option<End>,
    /// What it holds, for each class its members have.
    pub findings: Vec<(u8, BodyFindings)>,
}

/// Why a body was not proven.
#[derive(Debug)]
pub enum ProveError {
    /// The base body's tail is not the start of the new bytes: prove it
    /// whole ([`Prover::full`]).
    Differs,
    /// Its bytes are not the manifest's (packet-core's refusal).
    Body(Error),
}

enum Mode {
    Full(BodyHasher),
    Grown {
        tail: Vec<u8>,
        tail_len: u64,
        compared: u64,
        hasher: BodyHasher,
    },
    ScanOnly,
}

/// Hashes and screens one body as its chunks are fed.
pub struct Prover {
    body: Body,
    chunks: Vec<ChunkRef>,
    reads: Vec<ChunkRef>,
    mode: Mode,
    scanners: Vec<(u8, BodyScanner)>,
    fed: u64,
    hashed: u64,
}

impl Prover {
    /// Proves `body` from all of `chunks`; `classes` are its members'
    /// scan classes, each with the path of one member of that class.
    pub fn full(
        body: Body,
        chunks: Vec<ChunkRef>,
        classes: &[(u8, &str)],
        scanner: &Scanner,
    ) -> Prover {
        Prover {
            body,
            reads: chunks.clone(),
            chunks,
            mode: Mode::Full(BodyHasher::new(body)),
            scanners: classes
                .iter()
                .map(|&(c, path)| (c, BodyScanner::new(scanner, path)))
                .collect(),
            fed: 0,
            hashed: 0,
        }
    }

    /// Screens `body`, which a base holds, from its `chunks` (a base stored
    /// before the store kept findings, or a member of a class no base
    /// member of that body had).
    pub fn scan_only(
        body: Body,
        chunks: Vec<ChunkRef>,
        classes: &[(u8, &str)],
        scanner: &Scanner,
    ) -> Prover {
        Prover {
            mode: Mode::ScanOnly,
            ..Prover::full(body, chunks, classes, scanner)
        }
    }

    /// Proves `body` from where `from.base` ended (`end`), if that can be
    /// done: the state is that body's, every class has a snapshot, the
    /// body is at least as long and the tail is short enough.
    pub fn grown(
        body: Body,
        plan: &HashPlan,
        from: &GrownFrom,
        end: &End,
        classes: &[(u8, &str)],
        scanner: &Scanner,
    ) -> Option<Prover> {
        let copied: u64 = plan.chunks.get(..from.copied)?.iter().map(|c| c.raw).sum();
        let tail_len: u64 = from.tail.iter().map(|c| c.raw).sum();
        if end.hash.hashed() != from.base.size
            || copied + tail_len != from.base.size
            || from.base.size > body.size
            || tail_len > MAX_TAIL
        {
            return None;
        }
        let mut scanners = Vec::with_capacity(classes.len());
        for &(class, path) in classes {
            let (_, snapshot) = end.scans.iter().find(|(c, _)| *c == class)?;
            scanners.push((class, BodyScanner::resume(scanner, path, snapshot)?));
        }
        let hasher = BodyHasher::resume(body, &end.hash).ok()?;
        let mut reads = from.tail.clone();
        reads.extend_from_slice(&plan.chunks[from.copied..]);
        Some(Prover {
            body,
            chunks: plan.chunks.clone(),
            reads,
            mode: Mode::Grown {
                tail: Vec::with_capacity(tail_len as usize),
                tail_len,
                compared: 0,
                hasher,
            },
            scanners,
            fed: 0,
            hashed: 0,
        })
    }

    /// The chunks to read, in order.
    pub fn reads(&self) -> &[ChunkRef] {
        &self.reads
    }

    /// The chunks the body is served from.
    pub fn chunks(&self) -> &[ChunkRef] {
        &self.chunks
    }

    /// The body.
    pub fn body(&self) -> Body {
        self.body
    }

    /// Bytes hashed so far.
    pub fn hashed(&self) -> u64 {
        self.hashed
    }

    fn screen(&mut self, bytes: &[u8]) {
        for (_, s) in &mut self.scanners {
            s.feed(bytes);
        }
    }

    /// The next raw bytes of the reads, in order, in pieces of any size.
    pub fn feed(&mut self, mut bytes: &[u8]) -> Result<(), ProveError> {
        self.fed += bytes.len() as u64;
        match &mut self.mode {
            Mode::Full(h) => {
                h.update(bytes).map_err(ProveError::Body)?;
                self.hashed += bytes.len() as u64;
            }
            Mode::ScanOnly => {}
            Mode::Grown {
                tail,
                tail_len,
                compared,
                hasher,
            } => {
                let want = (*tail_len as usize)
                    .saturating_sub(tail.len())
                    .min(bytes.len());
                tail.extend_from_slice(&bytes[..want]);
                bytes = &bytes[want..];
                let left = (*tail_len - *compared) as usize;
                let n = left.min(bytes.len());
                if n > 0 {
                    let at = *compared as usize;
                    if tail.len() < *tail_len as usize || tail[at..at + n] != bytes[..n] {
                        return Err(ProveError::Differs);
                    }
                    *compared += n as u64;
                    bytes = &bytes[n..];
                }
                if bytes.is_empty() {
                    return Ok(());
                }
                hasher.update(bytes).map_err(ProveError::Body)?;
                self.hashed += bytes.len() as u64;
            }
        }
        if !matches!(self.mode, Mode::Grown { .. }) || !bytes.is_empty() {
            self.screen(bytes);
        }
        Ok(())
    }

    /// The proof, once every read was fed.
    pub fn finish(self) -> Result<Proven, ProveError> {
        let expected: u64 = self.reads.iter().map(|c| c.raw).sum();
        if self.fed != expected {
            return Err(ProveError::Body(Error::new(
                packet_core::ErrorCode::MemberDigestMismatch,
                format!(
                    "{} of the body's {expected} stored bytes were read",
                    self.fed
                ),
            )));
        }
        let scans: Vec<(u8, Vec<u8>)> = self
            .scanners
            .iter()
            .map(|(c, s)| (*c, s.snapshot()))
            .collect();
        let findings = self
            .scanners
            .into_iter()
            .map(|(c, s)| (c, s.finish()))
            .collect();
        let (proof, end) = match self.mode {
            Mode::ScanOnly => (None, None),
            Mode::Full(h) | Mode::Grown { hasher: h, .. } => {
                let hash = h.state();
                let proof = h.finish().map_err(ProveError::Body)?;
                (Some(proof), Some(End { hash, scans }))
            }
        };
        Ok(Proven {
            body: self.body,
            chunks: self.chunks,
            proof,
            end,
            findings,
        })
    }
}
