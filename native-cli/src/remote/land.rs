//! Carrying out a pull plan (`pull_plan`): every body's bytes read from
//! where the plan says or fetched, checked, and written where the caller's
//! [`Sink`] puts them, several requests in flight and local reads beside
//! them. Each piece is hashed against its chunk's name before it is
//! written; each body is then hashed whole ([`BodyHasher`]) into the
//! [`Proof`] the caller's [`Assembly`](packet_core::assembled::Assembly)
//! needs, and scanned for what a reader would report
//! ([`BodyScanner`]). A place here whose bytes do not hash right is passed
//! over: those chunks are fetched instead.

use std::collections::HashMap;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::Mutex;

use packet_core::assembled::{BodyHasher, Proof};
use packet_core::secrets::Scanner;
use packet_core::{BodyFindings, BodyScanner, Digest};
use pillbox_wire::recipes::ChunkName;

use super::fetch::{Each, Fetcher, IN_FLIGHT};
use super::pull_plan::{At, Batch, BatchLimits, Cut, From, Make, Piece, Plan, Tail, Wanted};
use crate::error::{CliError, Refused, Result};
use crate::packet_io::CHUNK;
use crate::progress::Progress;

/// Where the bytes a plan names are read from, by [`At::source`].
pub enum Source {
    /// A file, read with positioned reads.
    File(File),
    /// Bytes in memory.
    Bytes(Vec<u8>),
}

impl Source {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> bool {
        match self {
            Source::File(file) => file.read_exact_at(buf, offset).is_ok(),
            Source::Bytes(b) => {
                let Some(end) = usize::try_from(offset)
                    .ok()
                    .and_then(|o| o.checked_add(buf.len()))
                else {
                    return false;
                };
                match b.get(offset as usize..end) {
                    Some(s) => {
                        buf.copy_from_slice(s);
                        true
                    }
                    None => false,
                }
            }
        }
    }
}

/// Where the bodies go.
pub trait Sink: Sync {
    /// Writes bytes of wanted body `body` at `offset` within it, to every
    /// place that body goes.
    fn write(&self, body: usize, offset: u64, bytes: &[u8]) -> Result<()>;
    /// Reads back bytes of wanted body `body` written before.
    fn read_back(&self, body: usize, offset: u64, buf: &mut [u8]) -> Result<()>;
}

/// What landing needs besides the plan.
pub struct Job<'a> {
    /// The bodies, as planned.
    pub wanted: &'a [Wanted],
    /// The plan.
    pub plan: &'a Plan,
    /// Its places' sources.
    pub sources: &'a [Source],
    /// The store, for chunks and ranges.
    pub fetcher: &'a Fetcher<'a>,
    /// Where each wanted body's first copy starts in the packet (for
    /// `Range` reads).
    pub packet_offsets: &'a [u64],
    /// Per wanted body, the member paths to scan it as (one per
    /// `scan_class`); `None`: no scan.
    pub scan: Option<&'a [Vec<String>]>,
    /// Where the bytes go.
    pub sink: &'a dyn Sink,
    /// Each fetched chunk, once checked (to keep it in the cache).
    pub keep: Option<&'a Each<'a>>,
    /// The bar.
    pub progress: &'a Progress,
}

/// What landing established.
#[derive(Debug, Default)]
pub struct Landed {
    /// Each wanted body's proof.
    pub proofs: Vec<Proof>,
    /// Per wanted body, the findings of each scan asked for.
    pub findings: Vec<Vec<BodyFindings>>,
    /// Bytes read from each source.
    pub read_from: Vec<u64>,
}

/// A body's mode: whole (its one job owns it) or by pieces.
const WHOLE: u8 = 0;
const PIECES: u8 = 1;

struct BodyState {
    mode: AtomicU8,
    /// Pieces still to land.
    remaining: AtomicUsize,
    /// Each piece landed yet.
    landed: Vec<AtomicBool>,
}

struct Run<'a> {
    job: &'a Job<'a>,
    pieces: Vec<Vec<Piece>>,
    states: Vec<BodyState>,
    /// Chunk → the (body, piece) pairs it is.
    index: HashMap<ChunkName, Vec<(usize, usize)>>,
    scanner: Scanner,
    proofs: Mutex<Vec<Option<Proof>>>,
    findings: Mutex<Vec<Vec<BodyFindings>>>,
    read_from: Vec<AtomicU64>,
    /// Chunks to fetch after all, and the bodies that fell back whole.
    fallback: Mutex<Vec<ChunkName>>,
    stop: AtomicBool,
    failure: Mutex<Option<CliError>>,
}

/// Lands every body of `job`.
pub fn land(job: &Job<'_>) -> Result<Landed> {
    let n = job.wanted.len();
    let mut pieces: Vec<Vec<Piece>> = Vec::with_capacity(n);
    for (w, make) in job.wanted.iter().zip(&job.plan.bodies) {
        pieces.push(match (make, &w.cut) {
            (Make::Pieces(p), _) => p.clone(),
            // A whole body that does not hash right is fetched by chunks.
            (Make::Whole(_), Cut::Chunks(chunks)) => {
                let mut at = 0;
                chunks
                    .iter()
                    .map(|&chunk| {
                        let p = Piece {
                            offset: at,
                            chunk,
                            from: From::Fetch,
                        };
                        at += u64::from(chunk.size);
                        p
                    })
                    .collect()
            }
            (Make::Whole(_) | Make::Range, _) => Vec::new(),
        });
    }
    let mut index: HashMap<ChunkName, Vec<(usize, usize)>> = HashMap::new();
    for (b, list) in pieces.iter().enumerate() {
        for (i, p) in list.iter().enumerate() {
            index.entry(p.chunk).or_default().push((b, i));
        }
    }
    let states = job
        .plan
        .bodies
        .iter()
        .zip(&pieces)
        .map(|(make, list)| BodyState {
            mode: AtomicU8::new(if matches!(make, Make::Pieces(_)) {
                PIECES
            } else {
                WHOLE
            }),
            remaining: AtomicUsize::new(list.len()),
            landed: list.iter().map(|_| AtomicBool::new(false)).collect(),
        })
        .collect();
    let run = Run {
        job,
        pieces,
        states,
        index,
        scanner: Scanner::new(),
        proofs: Mutex::new(vec![None; n]),
        findings: Mutex::new(vec![Vec::new(); n]),
        read_from: job.sources.iter().map(|_| AtomicU64::new(0)).collect(),
        fallback: Mutex::new(Vec::new()),
        stop: AtomicBool::new(false),
        failure: Mutex::new(None),
    };
    run.go()?;
    let proofs = run.proofs.into_inner().unwrap_or_default();
    let mut out = Landed {
        proofs: Vec::with_capacity(n),
        findings: run.findings.into_inner().unwrap_or_default(),
        read_from: run
            .read_from
            .iter()
            .map(|a| a.load(Ordering::Relaxed))
            .collect(),
    };
    for (i, p) in proofs.into_iter().enumerate() {
        match p {
            Some(p) => out.proofs.push(p),
            None => {
                return Err(CliError::Bug(format!(
                    "body {} was never landed",
                    job.wanted[i].body.sha256
                )))
            }
        }
    }
    Ok(out)
}

/// Local work: one body read whole, the local pieces of one body, a tail
/// or a range.
enum Work {
    Whole(usize, At),
    Local(usize),
    Tail(usize),
    Range(usize),
}

impl Run<'_> {
    fn go(&self) -> Result<()> {
        let job = self.job;
        let mut work = Vec::new();
        for (b, make) in job.plan.bodies.iter().enumerate() {
            match make {
                Make::Whole(at) => work.push(Work::Whole(b, *at)),
                Make::Range => work.push(Work::Range(b)),
                Make::Pieces(p) => {
                    if p.iter().any(|p| matches!(p.from, From::Local(_))) {
                        work.push(Work::Local(b));
                    }
                }
            }
        }
        work.extend((0..job.plan.tails.len()).map(Work::Tail));
        let next = AtomicUsize::new(0);
        let local = || {
            while !self.stop.load(Ordering::Relaxed) {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(w) = work.get(i) else { break };
                let done = match w {
                    Work::Whole(b, at) => self.whole(*b, *at),
                    Work::Local(b) => self.local_pieces(*b),
                    Work::Tail(t) => self.tail(*t),
                    Work::Range(b) => self.range(*b),
                };
                if let Err(e) = done {
                    self.fail(e);
                }
            }
        };
        let deliver = |c: ChunkName, raw: &[u8]| self.deliver(c, raw);
        std::thread::scope(|scope| {
            let locals: Vec<_> = (0..2).map(|_| scope.spawn(local)).collect();
            if let Err(e) = job
                .fetcher
                .batches(&job.plan.batches, IN_FLIGHT, &self.stop, &deliver)
            {
                self.fail(e);
            }
            for h in locals {
                if h.join().is_err() {
                    self.fail(CliError::Bug("a landing thread panicked".into()));
                }
            }
        });
        self.take_failure()?;
        // What did not hash right here is fetched now.
        let mut again = std::mem::take(&mut *lock(&self.fallback));
        if !again.is_empty() {
            again.sort();
            again.dedup();
            let batches = batches_of(&again);
            job.fetcher
                .batches(&batches, IN_FLIGHT, &self.stop, &deliver)?;
            self.take_failure()?;
        }
        Ok(())
    }

    fn fail(&self, e: CliError) {
        self.stop.store(true, Ordering::Relaxed);
        let mut f = lock(&self.failure);
        if f.is_none() {
            *f = Some(e);
        }
    }

    fn take_failure(&self) -> Result<()> {
        match lock(&self.failure).take() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    fn source(&self, at: At) -> Result<&Source> {
        self.job
            .sources
            .get(at.source)
            .ok_or_else(|| CliError::Bug(format!("no source {}", at.source)))
    }

    /// A body read whole from `at`: hashed, scanned and written as it is
    /// read; one that does not hash right is fetched by its chunks.
    fn whole(&self, b: usize, at: At) -> Result<()> {
        let body = self.job.wanted[b].body;
        let source = self.source(at)?;
        let mut hasher = BodyHasher::new(body);
        let mut scans = self.scanners(b);
        let mut buf = vec![0u8; CHUNK.min(body.size as usize)];
        let mut done = 0u64;
        let mut ok = true;
        while done < body.size {
            let n = (body.size - done).min(buf.len() as u64) as usize;
            if !source.read_at(&mut buf[..n], at.offset + done) || hasher.update(&buf[..n]).is_err()
            {
                ok = false;
                break;
            }
            for s in &mut scans {
                s.feed(&buf[..n]);
            }
            self.job.sink.write(b, done, &buf[..n])?;
            done += n as u64;
        }
        match ok.then(|| hasher.finish().ok()).flatten() {
            Some(proof) => {
                self.read_from[at.source].fetch_add(body.size, Ordering::Relaxed);
                self.job.progress.inc(body.size);
                self.proven(b, proof, scans);
                Ok(())
            }
            None => self.fall_back_whole(b),
        }
    }

    /// A whole body that could not be read here: by its chunks instead.
    fn fall_back_whole(&self, b: usize) -> Result<()> {
        if self.pieces[b].is_empty() {
            // No chunk list: by range.
            return self.range(b);
        }
        self.states[b].mode.store(PIECES, Ordering::Release);
        let mut f = lock(&self.fallback);
        f.extend(self.pieces[b].iter().map(|p| p.chunk));
        Ok(())
    }

    /// The local pieces of body `b`.
    fn local_pieces(&self, b: usize) -> Result<()> {
        let mut buf = Vec::new();
        for (i, p) in self.pieces[b].iter().enumerate() {
            let From::Local(at) = p.from else { continue };
            if self.stop.load(Ordering::Relaxed) {
                return Ok(());
            }
            buf.resize(p.chunk.size as usize, 0);
            let source = self.source(at)?;
            let checked = match source.read_at(&mut buf, at.offset) {
                false => None,
                // A piece that is the whole body is checked by its hash.
                true if self.is_whole_piece(b) => self.whole_proof(b, &buf).map(Some),
                true => (Digest::of(&buf) == p.chunk.sha256).then_some(None),
            };
            if let Some(proof) = checked {
                self.read_from[at.source].fetch_add(u64::from(p.chunk.size), Ordering::Relaxed);
                self.land_piece(b, i, &buf, proof)?;
            } else {
                lock(&self.fallback).push(p.chunk);
            }
        }
        Ok(())
    }

    /// The proof of body `b` by `raw`, its whole bytes, if they are.
    fn whole_proof(&self, b: usize, raw: &[u8]) -> Option<Proof> {
        let mut hasher = BodyHasher::new(self.job.wanted[b].body);
        hasher.update(raw).ok()?;
        hasher.finish().ok()
    }

    fn is_whole_piece(&self, b: usize) -> bool {
        let body = self.job.wanted[b].body;
        let list = &self.pieces[b];
        list.len() == 1
            && list[0].chunk.sha256 == body.sha256
            && u64::from(list[0].chunk.size) == body.size
    }

    /// A fetched chunk: every piece it is, of bodies landing by pieces.
    fn deliver(&self, c: ChunkName, raw: &[u8]) -> Result<()> {
        let Some(places) = self.index.get(&c) else {
            return Err(CliError::Bug(format!(
                "chunk {} was not asked for",
                c.sha256
            )));
        };
        // Checked once against its name; a piece that is a whole body is
        // checked by that body's hash as it lands.
        let whole_only = places.iter().all(|&(b, _)| self.is_whole_piece(b));
        if !whole_only && (raw.len() != c.size as usize || Digest::of(raw) != c.sha256) {
            return Err(Refused::ChunkNotServed {
                sha256: c.sha256.hex().to_string(),
            }
            .into());
        }
        let mut checked = !whole_only;
        for &(b, i) in places {
            if self.states[b].mode.load(Ordering::Acquire) != PIECES {
                continue;
            }
            checked = true;
            let proof = match self.is_whole_piece(b) {
                true => Some(self.whole_proof(b, raw).ok_or_else(|| {
                    CliError::from(Refused::ChunkNotServed {
                        sha256: c.sha256.hex().to_string(),
                    })
                })?),
                false => None,
            };
            self.land_piece(b, i, raw, proof)?;
        }
        if let (true, Some(keep)) = (checked, self.job.keep) {
            keep(c, raw)?;
        }
        Ok(())
    }

    /// Writes a checked piece (once) and finishes its body after the last;
    /// a piece that is the whole body comes with the body's proof.
    fn land_piece(&self, b: usize, i: usize, raw: &[u8], proof: Option<Proof>) -> Result<()> {
        let state = &self.states[b];
        if state.landed[i].swap(true, Ordering::AcqRel) {
            return Ok(());
        }
        if let Some(proof) = proof {
            let body = self.job.wanted[b].body;
            self.job.sink.write(b, 0, raw)?;
            let mut scans = self.scanners(b);
            for s in &mut scans {
                s.feed(raw);
            }
            self.job.progress.inc(body.size);
            self.proven(b, proof, scans);
            state.remaining.fetch_sub(1, Ordering::AcqRel);
            return Ok(());
        }
        self.job.sink.write(b, self.pieces[b][i].offset, raw)?;
        self.job.progress.inc(raw.len() as u64);
        if state.remaining.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.finish_pieces(b)?;
        }
        Ok(())
    }

    /// Every piece of body `b` landed: it is read back, hashed whole and
    /// scanned.
    fn finish_pieces(&self, b: usize) -> Result<()> {
        let body = self.job.wanted[b].body;
        let mut hasher = BodyHasher::new(body);
        let mut scans = self.scanners(b);
        let mut buf = vec![0u8; CHUNK.min(body.size as usize)];
        let mut done = 0u64;
        while done < body.size {
            let n = (body.size - done).min(buf.len() as u64) as usize;
            self.job.sink.read_back(b, done, &mut buf[..n])?;
            hasher.update(&buf[..n]).map_err(CliError::Packet)?;
            for s in &mut scans {
                s.feed(&buf[..n]);
            }
            done += n as u64;
        }
        let proof = hasher.finish().map_err(CliError::Packet)?;
        self.proven(b, proof, scans);
        Ok(())
    }

    /// A tail: the earlier version's bytes from the first piece it makes,
    /// then the packet's bytes past that version's end, cut into the pieces
    /// and each checked; the pieces not made so are fetched.
    fn tail(&self, t: usize) -> Result<()> {
        let tail: &Tail = &self.job.plan.tails[t];
        let b = tail.body;
        let body = self.job.wanted[b].body;
        let todo: Vec<usize> = self.pieces[b]
            .iter()
            .enumerate()
            .filter(|(_, p)| p.from == From::Tail(t))
            .map(|(i, _)| i)
            .collect();
        let mut made = vec![false; todo.len()];
        let mut pending: Vec<u8> = Vec::new();
        let earlier = self.source(tail.earlier.at)?;
        let head = (tail.earlier.len - tail.start) as usize;
        pending.resize(head, 0);
        let mut ok = earlier.read_at(&mut pending, tail.earlier.at.offset + tail.start);
        let mut k = 0;
        let mut take = |pending: &mut Vec<u8>, this: &Self| -> Result<()> {
            while k < todo.len() {
                let p = this.pieces[b][todo[k]];
                let size = p.chunk.size as usize;
                if pending.len() < size {
                    break;
                }
                let piece = &pending[..size];
                let checked = match this.is_whole_piece(b) {
                    true => this.whole_proof(b, piece).map(Some),
                    false => (Digest::of(piece) == p.chunk.sha256).then_some(None),
                };
                if let Some(proof) = checked {
                    this.land_piece(b, todo[k], piece, proof)?;
                    made[k] = true;
                    // The piece's bytes below the earlier end were read here.
                    let end = p.offset + u64::from(p.chunk.size);
                    let here = end.min(tail.earlier.len).saturating_sub(p.offset);
                    this.read_from[tail.earlier.at.source].fetch_add(here, Ordering::Relaxed);
                }
                pending.drain(..size);
                k += 1;
            }
            Ok(())
        };
        if ok {
            let start = self.job.packet_offsets[b] + tail.earlier.len;
            let end = self.job.packet_offsets[b] + body.size;
            let fetched = self.job.fetcher.range(start, end, &mut |bytes| {
                pending.extend_from_slice(bytes);
                take(&mut pending, self)
            });
            if let Err(e) = fetched {
                if matches!(e, CliError::Refused(_) | CliError::Bug(_)) {
                    return Err(e);
                }
                ok = false;
            }
        }
        let missing: Vec<ChunkName> = todo
            .iter()
            .zip(&made)
            .filter(|(_, m)| !**m)
            .map(|(&i, _)| self.pieces[b][i].chunk)
            .collect();
        if !ok || !missing.is_empty() {
            lock(&self.fallback).extend(missing);
        }
        Ok(())
    }

    /// A body with no chunk list, read by `Range` from the packet.
    fn range(&self, b: usize) -> Result<()> {
        let body = self.job.wanted[b].body;
        let start = self.job.packet_offsets[b];
        let mut hasher = BodyHasher::new(body);
        let mut scans = self.scanners(b);
        let mut done = 0u64;
        self.job
            .fetcher
            .range(start, start + body.size, &mut |bytes| {
                hasher.update(bytes).map_err(CliError::Packet)?;
                for s in &mut scans {
                    s.feed(bytes);
                }
                self.job.sink.write(b, done, bytes)?;
                done += bytes.len() as u64;
                self.job.progress.inc(bytes.len() as u64);
                Ok(())
            })?;
        let proof = hasher.finish().map_err(CliError::Packet)?;
        self.proven(b, proof, scans);
        Ok(())
    }

    fn scanners(&self, b: usize) -> Vec<BodyScanner> {
        match self.job.scan {
            Some(scan) => scan[b]
                .iter()
                .map(|path| BodyScanner::new(&self.scanner, path))
                .collect(),
            None => Vec::new(),
        }
    }

    fn proven(&self, b: usize, proof: Proof, scans: Vec<BodyScanner>) {
        lock(&self.proofs)[b] = Some(proof);
        if !scans.is_empty() {
            lock(&self.findings)[b] = scans.into_iter().map(BodyScanner::finish).collect();
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Chunks to fetch after all, in batches.
fn batches_of(chunks: &[ChunkName]) -> Vec<Batch> {
    let limits = BatchLimits::DEFAULT;
    let mut out: Vec<Batch> = Vec::new();
    for &c in chunks {
        match out.last_mut() {
            Some(b)
                if b.chunks.len() < limits.chunks
                    && b.bytes + u64::from(c.size) <= limits.bytes =>
            {
                b.chunks.push(c);
                b.bytes += u64::from(c.size);
            }
            _ => out.push(Batch {
                chunks: vec![c],
                bytes: u64::from(c.size),
            }),
        }
    }
    out
}
