//! Credentials found by content (docs/session-packet.md §7.2): a streaming
//! detector fed the same chunks that are hashed, so that finding a secret
//! costs no second read.
//!
//! A [`Scanner`] holds the anchors, built once and shared (it is `Sync`);
//! a [`Detector`] follows one file. The search is in two steps: an
//! Aho-Corasick search for a few literal anchors (provider prefixes,
//! `PRIVATE KEY`, `AKIA`...) runs at memory speed over every byte, and
//! only around an anchor does a precise check of the format run (length,
//! alphabet, checksum where the format has one, a real key body). A chunk
//! boundary never hides a secret: the detector keeps a bounded tail of what
//! it was fed, enough to see every anchor and the window its check needs.
//!
//! ```
//! use packet_core::secrets::Scanner;
//!
//! let scanner = Scanner::new();
//! let mut detector = scanner.detector("deploy.sh");
//! // A key pair split across two chunks.
//! detector.feed(b"export AWS_ACCESS_KEY_ID=AKIAZ7Q2VX");
//! detector.feed(b"MR4TPB3N6W\nexport AWS_SECRET_ACCESS_KEY=9dWq2LrT7xKp4Vb8NzYc3HfJ6mQs1Ae5Gu0Ro2Ki\n");
//! let findings = detector.finish();
//! assert_eq!(findings.len(), 1);
//! assert_eq!((findings[0].rule.id, findings[0].line), ("aws-access-key", 1));
//! ```
//!
//! A finding names its rule and line, never the value.

mod git_config;
mod rules;

pub(crate) use git_config::is_git_config;

use alloc::vec::Vec;

use aho_corasick::{AhoCorasick, AhoCorasickBuilder, MatchKind};

pub use rules::{SecretRule, SECRET_RULES};

use rules::{Anchor, ANCHORS, MAX_AHEAD, MAX_ANCHOR, MAX_BACK};

/// One secret found in a file: which rule, and on which line (1-based).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Finding {
    /// The rule it matched.
    pub rule: &'static SecretRule,
    /// The line it starts on, counted from 1.
    pub line: u64,
}

/// The anchors' automaton, built once and shared by every [`Detector`].
#[derive(Clone, Debug)]
pub struct Scanner {
    anchors: AhoCorasick,
}

impl Default for Scanner {
    fn default() -> Self {
        Scanner::new()
    }
}

impl Scanner {
    /// Builds the anchors' automaton (a few microseconds: build one per
    /// reader or pack, not one per file).
    pub fn new() -> Scanner {
        let anchors = AhoCorasickBuilder::new()
            .match_kind(MatchKind::LeftmostFirst)
            .build(ANCHORS.iter().map(|(literal, _)| literal))
            // Every anchor is a short literal: building cannot fail.
            .unwrap_or_else(|_| unreachable!("the anchors are short literals"));
        Scanner { anchors }
    }

    /// What a whole file holds, given in one piece: [`Scanner::detector`]
    /// fed once, without keeping a tail or counting lines beyond those the
    /// findings need.
    pub fn scan(&self, relative: &str, body: &[u8]) -> Vec<Finding> {
        let mut findings: Vec<Finding> = Vec::new();
        let mut lines = Lines::default();
        for m in self.anchors.find_iter(body) {
            let anchor = ANCHORS[m.pattern().as_usize()].1;
            let at = m.start();
            let (back, ahead) = anchor.window();
            let from = at.saturating_sub(back);
            let to = (at + ahead).min(body.len());
            if let Some((rule, start)) = anchor.check(&body[from..to], at - from, to == body.len())
            {
                let line = lines.of(body, from + start);
                findings.push(Finding { rule, line });
            }
        }
        if git_config::is_git_config(relative) {
            findings.extend(git_config::credentials(body));
        }
        findings.sort_by_key(|f| (f.line, f.rule.id));
        findings.dedup();
        findings
    }

    /// A detector for the file at `relative` (its path below its root, as
    /// the credential rules take it): git configuration files are also
    /// checked for credentials in remote URLs and `http.extraheader`.
    pub fn detector(&self, relative: &str) -> Detector {
        Detector {
            // A clone shares the automaton.
            scanner: self.clone(),
            git_config: git_config::is_git_config(relative).then(Vec::new),
            fed: 0,
            lines: 0,
            tail: Vec::new(),
            deferred: Vec::new(),
            findings: Vec::new(),
        }
    }
}

/// The bytes kept from one chunk to the next: enough for an anchor that
/// straddles the boundary and for the window any check looks at.
const TAIL: usize = MAX_BACK + MAX_AHEAD + MAX_ANCHOR;

/// How much of a git configuration file is kept to parse it whole (git's
/// own files are a few kilobytes; a larger one is checked as any file).
const GIT_CONFIG_MAX: usize = 1 << 20;

/// Follows one file's bytes, fed in chunks of any size.
#[derive(Debug)]
pub struct Detector {
    scanner: Scanner,
    /// A git configuration file's bytes, kept to be parsed at the end.
    git_config: Option<Vec<u8>>,
    /// Bytes fed so far.
    fed: u64,
    /// Newlines among them.
    lines: u64,
    /// The last [`TAIL`] bytes fed.
    tail: Vec<u8>,
    /// Anchors (offset, which) whose window was not complete yet.
    deferred: Vec<(u64, Anchor)>,
    findings: Vec<Finding>,
}

impl Detector {
    /// Reads the next bytes of the file.
    pub fn feed(&mut self, chunk: &[u8]) {
        if chunk.is_empty() {
            return;
        }
        if let Some(config) = &mut self.git_config {
            if config.len() + chunk.len() <= GIT_CONFIG_MAX {
                config.extend_from_slice(chunk);
            } else {
                self.git_config = None;
            }
        }
        let start = self.fed;
        let end = start + chunk.len() as u64;
        let view = View {
            tail: &self.tail,
            tail_start: start - self.tail.len() as u64,
            chunk,
            chunk_start: start,
            lines_at_tail: self.lines - count_lines(&self.tail),
        };
        let mut found = Vec::new();
        // Anchors seen before whose window this chunk completes.
        let mut still = Vec::new();
        for &(at, anchor) in &self.deferred {
            match view.check(at, anchor, false) {
                Checked::Later => still.push((at, anchor)),
                Checked::Found(f) => found.push(f),
                Checked::Nothing => {}
            }
        }
        // Anchors that straddle the boundary with the bytes before.
        let mut anchors: Vec<(u64, Anchor)> = view.straddling();
        for m in self.scanner.anchors.find_iter(chunk) {
            anchors.push((start + m.start() as u64, ANCHORS[m.pattern().as_usize()].1));
        }
        for (at, anchor) in anchors {
            match view.check(at, anchor, false) {
                Checked::Later => still.push((at, anchor)),
                Checked::Found(f) => found.push(f),
                Checked::Nothing => {}
            }
        }
        self.deferred = still;
        for f in found {
            self.record(f);
        }
        self.lines += count_lines(chunk);
        self.fed = end;
        keep_tail(&mut self.tail, chunk);
    }

    /// Ends the file; returns what was found, in line order, each rule
    /// once per line.
    pub fn finish(mut self) -> Vec<Finding> {
        let view = View {
            tail: &self.tail,
            tail_start: self.fed - self.tail.len() as u64,
            chunk: &[],
            chunk_start: self.fed,
            lines_at_tail: self.lines - count_lines(&self.tail),
        };
        let found: Vec<Finding> = self
            .deferred
            .iter()
            .filter_map(|&(at, anchor)| match view.check(at, anchor, true) {
                Checked::Found(f) => Some(f),
                _ => None,
            })
            .collect();
        for f in found {
            self.record(f);
        }
        if let Some(config) = self.git_config.take() {
            for f in git_config::credentials(&config) {
                self.record(f);
            }
        }
        self.findings.sort_by_key(|f| (f.line, f.rule.id));
        self.findings
    }

    fn record(&mut self, finding: Finding) {
        if !self.findings.contains(&finding) {
            self.findings.push(finding);
        }
    }
}

/// The first byte of a detector's snapshot (its encoding's version).
const SNAPSHOT_VERSION: u8 = 1;

impl Detector {
    /// Its state after the bytes fed so far, as bytes: a store that scanned
    /// a body once keeps it, and scans only what is appended later
    /// ([`Scanner::resume`]). At most a few kilobytes (the tail, pending
    /// anchors, findings), plus a git configuration file's bytes.
    pub fn snapshot(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(64 + self.tail.len());
        out.push(SNAPSHOT_VERSION);
        out.extend_from_slice(&self.fed.to_be_bytes());
        out.extend_from_slice(&self.lines.to_be_bytes());
        put_bytes(&mut out, &self.tail);
        out.extend_from_slice(&(self.deferred.len() as u32).to_be_bytes());
        for &(at, anchor) in &self.deferred {
            out.extend_from_slice(&at.to_be_bytes());
            out.push(anchor.index());
        }
        out.extend_from_slice(&(self.findings.len() as u32).to_be_bytes());
        for f in &self.findings {
            out.extend_from_slice(&f.line.to_be_bytes());
            let rule = SECRET_RULES.iter().position(|r| r.id == f.rule.id);
            out.push(rule.unwrap_or(0) as u8);
        }
        match &self.git_config {
            Some(config) => {
                out.push(1);
                put_bytes(&mut out, config);
            }
            None => out.push(0),
        }
        out
    }
}

fn put_bytes(out: &mut Vec<u8>, bytes: &[u8]) {
    out.extend_from_slice(&(bytes.len() as u32).to_be_bytes());
    out.extend_from_slice(bytes);
}

/// Reads a snapshot's fields in order.
struct Snapshot<'a>(&'a [u8]);

impl<'a> Snapshot<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if self.0.len() < n {
            return None;
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Some(head)
    }
    fn u8(&mut self) -> Option<u8> {
        self.take(1).map(|b| b[0])
    }
    fn u32(&mut self) -> Option<u32> {
        self.take(4)
            .and_then(|b| b.try_into().ok())
            .map(u32::from_be_bytes)
    }
    fn u64(&mut self) -> Option<u64> {
        self.take(8)
            .and_then(|b| b.try_into().ok())
            .map(u64::from_be_bytes)
    }
    fn bytes(&mut self) -> Option<&'a [u8]> {
        let n = self.u32()? as usize;
        self.take(n)
    }
}

impl Scanner {
    /// A detector for the file at `relative` in the state `snapshot`
    /// recorded ([`Detector::snapshot`]); `None` if it is not a snapshot,
    /// or not one of a file of that kind.
    pub fn resume(&self, relative: &str, snapshot: &[u8]) -> Option<Detector> {
        let mut r = Snapshot(snapshot);
        if r.u8()? != SNAPSHOT_VERSION {
            return None;
        }
        let fed = r.u64()?;
        let lines = r.u64()?;
        let tail = r.bytes()?;
        if tail.len() > TAIL || tail.len() as u64 > fed || count_lines(tail) > lines {
            return None;
        }
        let tail = tail.to_vec();
        let mut deferred = Vec::new();
        for _ in 0..r.u32()? {
            let at = r.u64()?;
            let anchor = Anchor::from_index(r.u8()?)?;
            if at > fed || at < fed - tail.len() as u64 {
                return None;
            }
            deferred.push((at, anchor));
        }
        let mut findings = Vec::new();
        for _ in 0..r.u32()? {
            let line = r.u64()?;
            let rule = SECRET_RULES.get(usize::from(r.u8()?))?;
            findings.push(Finding { rule, line });
        }
        let git_config = match r.u8()? {
            0 => None,
            1 => Some(r.bytes()?.to_vec()),
            _ => return None,
        };
        if !r.0.is_empty() || git_config.is_some() != git_config::is_git_config(relative) {
            return None;
        }
        Some(Detector {
            scanner: self.clone(),
            git_config,
            fed,
            lines,
            tail,
            deferred,
            findings,
        })
    }
}

/// Keeps the last [`TAIL`] bytes of what was fed.
fn keep_tail(tail: &mut Vec<u8>, chunk: &[u8]) {
    if chunk.len() >= TAIL {
        tail.clear();
        tail.extend_from_slice(&chunk[chunk.len() - TAIL..]);
    } else {
        let keep = (TAIL - chunk.len()).min(tail.len());
        tail.drain(..tail.len() - keep);
        tail.extend_from_slice(chunk);
    }
}

/// Line numbers of offsets in one buffer, asked in increasing order.
#[derive(Default)]
struct Lines {
    counted_to: usize,
    newlines: u64,
}

impl Lines {
    fn of(&mut self, body: &[u8], at: usize) -> u64 {
        if at < self.counted_to {
            // Findings come in anchor order, but one may start before the
            // anchor of the previous one: count afresh.
            self.counted_to = 0;
            self.newlines = 0;
        }
        self.newlines += count_lines(&body[self.counted_to..at]);
        self.counted_to = at;
        self.newlines + 1
    }
}

fn count_lines(bytes: &[u8]) -> u64 {
    memchr::memchr_iter(b'\n', bytes).count() as u64
}

/// What a check says about an anchor.
enum Checked {
    /// Not a secret.
    Nothing,
    /// A secret.
    Found(Finding),
    /// The window it needs goes beyond the bytes fed so far.
    Later,
}

/// The bytes at hand: the kept tail, then the chunk being fed.
struct View<'a> {
    tail: &'a [u8],
    tail_start: u64,
    chunk: &'a [u8],
    chunk_start: u64,
    /// Newlines before the tail's first byte.
    lines_at_tail: u64,
}

impl View<'_> {
    fn end(&self) -> u64 {
        self.chunk_start + self.chunk.len() as u64
    }

    /// Anchors that start in the tail and end in the chunk: the automaton
    /// runs on the chunk alone, so these are found here, by comparing each
    /// anchor at each place it could start.
    fn straddling(&self) -> Vec<(u64, Anchor)> {
        let mut out = Vec::new();
        let before = self.tail.len().min(MAX_ANCHOR - 1);
        if before == 0 {
            return out;
        }
        let after = self.chunk.len().min(MAX_ANCHOR - 1);
        let mut joined = [0u8; 2 * MAX_ANCHOR];
        joined[..before].copy_from_slice(&self.tail[self.tail.len() - before..]);
        joined[before..before + after].copy_from_slice(&self.chunk[..after]);
        let joined = &joined[..before + after];
        for start in 0..before {
            for &(literal, anchor) in ANCHORS {
                let literal = literal.as_bytes();
                if start + literal.len() > before && joined[start..].starts_with(literal) {
                    let at = self.chunk_start - (before - start) as u64;
                    out.push((at, anchor));
                }
            }
        }
        out
    }

    /// Runs the anchor's check on its window, once the window is at hand
    /// (or, at the end of the file, on what there is).
    fn check(&self, at: u64, anchor: Anchor, at_end: bool) -> Checked {
        let (back, ahead) = anchor.window();
        let from = at.saturating_sub(back as u64).max(self.tail_start);
        let to = at + ahead as u64;
        if to > self.end() && !at_end {
            return Checked::Later;
        }
        let to = to.min(self.end());
        let mut scratch = Vec::new();
        let window = self.bytes(from, to, &mut scratch);
        let pos = (at - from) as usize;
        match anchor.check(window, pos, to == self.end() && at_end) {
            None => Checked::Nothing,
            Some((rule, start)) => Checked::Found(Finding {
                rule,
                line: self.line_of(from + start as u64),
            }),
        }
    }

    /// The bytes `from..to`, borrowed from the chunk when they all lie in
    /// it, else copied into `scratch`.
    fn bytes<'s>(&'s self, from: u64, to: u64, scratch: &'s mut Vec<u8>) -> &'s [u8] {
        if from >= self.chunk_start {
            let a = (from - self.chunk_start) as usize;
            let b = (to - self.chunk_start) as usize;
            return &self.chunk[a..b];
        }
        let a = (from - self.tail_start) as usize;
        let tail_end = self.tail_start + self.tail.len() as u64;
        if to <= tail_end {
            return &self.tail[a..(to - self.tail_start) as usize];
        }
        scratch.extend_from_slice(&self.tail[a..]);
        scratch.extend_from_slice(&self.chunk[..(to - self.chunk_start) as usize]);
        scratch
    }

    /// The 1-based line of the byte at `at` (which lies in the tail or the
    /// chunk).
    fn line_of(&self, at: u64) -> u64 {
        let mut lines = self.lines_at_tail;
        let tail_end = self.tail_start + self.tail.len() as u64;
        let in_tail = (at.min(tail_end) - self.tail_start) as usize;
        lines += count_lines(&self.tail[..in_tail]);
        if at > self.chunk_start {
            lines += count_lines(&self.chunk[..(at - self.chunk_start) as usize]);
        }
        lines + 1
    }
}

#[cfg(test)]
pub(crate) mod tests;
