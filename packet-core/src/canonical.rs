//! The manifest's canonical JSON (docs/session-packet.md, §5.2), written
//! into a [`Sink`] so that a reader can compare a manifest with its
//! canonical form, or measure it, without building a second copy: for a
//! manifest of 250,000 members that copy would be tens of megabytes.
//!
//! The output is byte for byte what `serde_json` writes for the manifest's
//! `Serialize` implementation (keys in declaration order, which is bytewise
//! order; no whitespace; JCS string escapes); a test holds the two equal.

use alloc::vec::Vec;

use crate::header::Kind;
use crate::manifest::{Entry, Exclusion, Harness, Manifest, Totals};
use crate::scan;

/// Where canonical JSON goes.
pub trait Sink {
    /// Appends bytes.
    fn put(&mut self, bytes: &[u8]);
}

impl Sink for Vec<u8> {
    fn put(&mut self, bytes: &[u8]) {
        self.extend_from_slice(bytes);
    }
}

/// Counts bytes.
#[derive(Default)]
pub struct Counter(pub u64);

impl Sink for Counter {
    fn put(&mut self, bytes: &[u8]) {
        self.0 += bytes.len() as u64;
    }
}

/// Compares what is written with an expected byte string.
pub struct Comparer<'a> {
    expected: &'a [u8],
    pos: usize,
    equal: bool,
}

impl<'a> Comparer<'a> {
    /// Compares against `expected`.
    pub fn new(expected: &'a [u8]) -> Self {
        Comparer {
            expected,
            pos: 0,
            equal: true,
        }
    }

    /// Whether everything written equals `expected`, with nothing left over.
    pub fn matches(&self) -> bool {
        self.equal && self.pos == self.expected.len()
    }
}

impl Sink for Comparer<'_> {
    fn put(&mut self, bytes: &[u8]) {
        if !self.equal {
            return;
        }
        let end = self.pos + bytes.len();
        if self.expected.get(self.pos..end) == Some(bytes) {
            self.pos = end;
        } else {
            self.equal = false;
        }
    }
}

/// Writes the canonical JSON of `manifest`.
pub fn write_manifest(m: &Manifest, out: &mut impl Sink) {
    out.put(b"{");
    if !m.exclusions.is_empty() {
        out.put(b"\"exclusions\":[");
        for (i, e) in m.exclusions.iter().enumerate() {
            if i > 0 {
                out.put(b",");
            }
            write_exclusion(e, out);
        }
        out.put(b"],");
    }
    out.put(b"\"format\":");
    string(&m.format, out);
    if let Some(h) = &m.harness {
        out.put(b",\"harness\":");
        write_harness(h, out);
    }
    out.put(b",\"members\":[");
    for (i, e) in m.members.iter().enumerate() {
        if i > 0 {
            out.put(b",");
        }
        write_entry(e, out);
    }
    out.put(b"],\"totals\":");
    write_totals(&m.totals, out);
    out.put(b"}");
}

fn write_exclusion(e: &Exclusion, out: &mut impl Sink) {
    out.put(b"{\"matched\":");
    number(e.matched, out);
    out.put(b",\"pattern\":");
    string(&e.pattern, out);
    out.put(b",\"rule\":");
    string(&e.rule, out);
    out.put(b"}");
}

fn write_harness(h: &Harness, out: &mut impl Sink) {
    out.put(b"{\"kind\":");
    string(h.kind.as_str(), out);
    if let Some(model) = &h.model {
        out.put(b",\"model\":");
        string(model, out);
    }
    out.put(b",\"rollout\":");
    string(&h.rollout, out);
    out.put(b",\"thread_id\":");
    string(&h.thread_id, out);
    out.put(b"}");
}

pub(crate) fn write_entry(e: &Entry, out: &mut impl Sink) {
    out.put(b"{\"mode\":\"");
    let mode = [
        b'0',
        b'0' + ((e.mode >> 6) & 7) as u8,
        b'0' + ((e.mode >> 3) & 7) as u8,
        b'0' + (e.mode & 7) as u8,
    ];
    out.put(&mode);
    out.put(b"\",\"path\":");
    string(&e.path, out);
    if let Some(sha) = &e.sha256 {
        out.put(b",\"sha256\":\"");
        let mut hex = [0u8; 64];
        for (i, b) in sha.0.iter().enumerate() {
            hex[2 * i] = HEX[usize::from(b >> 4)];
            hex[2 * i + 1] = HEX[usize::from(b & 15)];
        }
        out.put(&hex);
        out.put(b"\"");
    }
    if e.kind == Kind::File {
        out.put(b",\"size\":");
        number(e.size, out);
    }
    if let Some(t) = &e.target {
        out.put(b",\"target\":");
        string(t, out);
    }
    out.put(b",\"type\":");
    string(e.kind.as_str(), out);
    out.put(b"}");
}

fn write_totals(t: &Totals, out: &mut impl Sink) {
    for (i, (key, v)) in [
        ("bytes", t.bytes),
        ("directories", t.directories),
        ("files", t.files),
        ("members", t.members),
        ("symlinks", t.symlinks),
    ]
    .into_iter()
    .enumerate()
    {
        out.put(if i == 0 { b"{\"" } else { b",\"" });
        out.put(key.as_bytes());
        out.put(b"\":");
        number(v, out);
    }
    out.put(b"}");
}

const HEX: &[u8; 16] = b"0123456789abcdef";

/// Whether a JSON string escapes this byte: `"`, `\\` and the C0 controls.
fn needs_escape(b: u8) -> bool {
    b < 0x20 || b == b'"' || b == b'\\'
}

fn number(mut v: u64, out: &mut impl Sink) {
    let mut buf = [0u8; 20];
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    out.put(&buf[i..]);
}

/// A JSON string with the minimal escapes of RFC 8785.
fn string(s: &str, out: &mut impl Sink) {
    out.put(b"\"");
    let bytes = s.as_bytes();
    // Most strings need no escape: settle that first, in one fast scan.
    if !scan::any(bytes, needs_escape) {
        out.put(bytes);
        out.put(b"\"");
        return;
    }
    let mut start = 0;
    for (i, &b) in bytes.iter().enumerate() {
        let escape: Option<&[u8]> = match b {
            b'"' => Some(b"\\\""),
            b'\\' => Some(b"\\\\"),
            0x08 => Some(b"\\b"),
            0x0c => Some(b"\\f"),
            b'\n' => Some(b"\\n"),
            b'\r' => Some(b"\\r"),
            b'\t' => Some(b"\\t"),
            _ => None,
        };
        if escape.is_none() && b >= 0x20 {
            continue;
        }
        out.put(&bytes[start..i]);
        match escape {
            Some(e) => out.put(e),
            None => out.put(&[
                b'\\',
                b'u',
                b'0',
                b'0',
                HEX[usize::from(b >> 4)],
                HEX[usize::from(b & 15)],
            ]),
        }
        start = i + 1;
    }
    out.put(&bytes[start..]);
    out.put(b"\"");
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::digest::Digest;
    use crate::manifest::HarnessKind;
    use alloc::string::String;
    use alloc::vec;

    #[test]
    fn matches_serde_json_byte_for_byte() {
        let odd = String::from("q\"b\\s/\u{1}\u{1f}\u{7f}\u{e9}\u{212a}\n\t\r\u{8}\u{c}");
        let m = Manifest {
            exclusions: vec![Exclusion {
                matched: 12345678901234,
                pattern: odd.clone(),
                rule: String::from("user"),
            }],
            format: String::from(crate::FORMAT_ID),
            harness: Some(Harness {
                kind: HarnessKind::Codex,
                model: Some(odd.clone()),
                rollout: String::from("harness/codex/x"),
                thread_id: String::from("t"),
            }),
            members: vec![
                Entry::dir("workspace"),
                Entry::file("workspace/\u{e9}\"x", 0, Digest::of(b""), true),
                Entry::file("workspace/b", u64::MAX, Digest::of(b"b"), false),
                Entry::symlink("workspace/l", odd),
            ],
            totals: Totals {
                bytes: 0,
                directories: 1,
                files: 2,
                members: 4,
                symlinks: u64::MAX,
            },
        };
        let ours = {
            let mut v = Vec::new();
            write_manifest(&m, &mut v);
            v
        };
        assert_eq!(ours, serde_json::to_vec(&m).unwrap());
        let mut counter = Counter::default();
        write_manifest(&m, &mut counter);
        assert_eq!(counter.0, ours.len() as u64);
        let mut same = Comparer::new(&ours);
        write_manifest(&m, &mut same);
        assert!(same.matches());
        let mut longer = ours.clone();
        longer.push(b' ');
        let mut c = Comparer::new(&longer);
        write_manifest(&m, &mut c);
        assert!(!c.matches());
        let mut changed = ours.clone();
        changed[10] ^= 1;
        let mut c = Comparer::new(&changed);
        write_manifest(&m, &mut c);
        assert!(!c.matches());
    }
}
