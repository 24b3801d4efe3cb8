//! The manifest's JSON: its one canonical encoder (docs/session-packet.md
//! §5.2) and its strict parse (§5.1).
//!
//! The encoder writes into a [`Sink`], so that a reader can compare a
//! manifest with its canonical form, or measure it, without building a
//! second copy: for a manifest of 250,000 members that copy would be tens
//! of megabytes. Keys are written in bytewise order, with no whitespace and
//! the minimal string escapes of RFC 8785.
//!
//! The parse is serde's, into closed, typed objects that refuse unknown,
//! repeated, missing and null keys; what it accepts must then be exactly
//! what the encoder writes.

use alloc::string::String;
use alloc::vec::Vec;

use serde::{Deserialize, Deserializer};

use crate::digest::Digest;
use crate::error::{Error, ErrorCode};
use crate::format::Format;
use crate::header::Kind;
use crate::manifest::{
    Entry, Exclusion, Harness, Manifest, Member, Totals, UncheckedManifest, UncheckedMember,
};
use crate::path::MANIFEST_PATH;
use crate::scan;

/// Where canonical JSON goes: a buffer, a [`Counter`], a [`Comparer`], or
/// a consumer's own output (the in-place packer writes `packet.json`
/// straight into the packet file through one).
pub trait Sink {
    /// Appends bytes.
    fn put(&mut self, bytes: &[u8]);
}

impl Sink for Vec<u8> {
    fn put(&mut self, bytes: &[u8]) {
        self.extend_from_slice(bytes);
    }
}

impl Sink for crate::digest::Hasher {
    fn put(&mut self, bytes: &[u8]) {
        self.update(bytes);
    }
}

/// Counts bytes.
#[derive(Default)]
pub(crate) struct Counter(pub(crate) u64);

impl Sink for Counter {
    fn put(&mut self, bytes: &[u8]) {
        self.0 += bytes.len() as u64;
    }
}

/// Compares what is written with an expected byte string.
pub(crate) struct Comparer<'a> {
    expected: &'a [u8],
    pos: usize,
    equal: bool,
}

impl<'a> Comparer<'a> {
    /// Compares against `expected`.
    pub(crate) fn new(expected: &'a [u8]) -> Self {
        Comparer {
            expected,
            pos: 0,
            equal: true,
        }
    }

    /// Whether everything written equals `expected`, with nothing left over.
    pub(crate) fn matches(&self) -> bool {
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

/// A member as its JSON object is written: a path and an entry, checked
/// ([`Member`]) or not ([`UncheckedMember`]).
pub(crate) trait Listed {
    /// Its path.
    fn path(&self) -> &str;
    /// Its type and facts.
    fn entry(&self) -> &Entry;
}

impl Listed for Member {
    fn path(&self) -> &str {
        &self.path
    }
    fn entry(&self) -> &Entry {
        &self.entry
    }
}

impl Listed for UncheckedMember {
    fn path(&self) -> &str {
        &self.path
    }
    fn entry(&self) -> &Entry {
        &self.entry
    }
}

/// The fields of a manifest, its paths checked or not, as [`Parts`].
macro_rules! parts_of {
    ($m:expr) => {
        Parts {
            exclusions: &$m.exclusions,
            format: $m.format,
            harness: $m.harness.as_ref(),
            members: &$m.members,
            totals: &$m.totals,
        }
    };
}

/// Writes the canonical JSON of `manifest`.
pub(crate) fn write_manifest(m: &Manifest, out: &mut impl Sink) {
    parts_of!(m).write(out);
}

/// Writes the canonical JSON of a manifest whose paths are not checked.
pub(crate) fn write_unchecked(m: &UncheckedManifest, out: &mut impl Sink) {
    parts_of!(m).write(out);
}

/// A manifest's fields, whichever kind of member it lists.
struct Parts<'a, M> {
    exclusions: &'a [Exclusion],
    format: Format,
    harness: Option<&'a Harness>,
    members: &'a [M],
    totals: &'a Totals,
}

impl<M: Listed> Parts<'_, M> {
    fn write(&self, out: &mut impl Sink) {
        out.put(b"{");
        if !self.exclusions.is_empty() {
            out.put(b"\"exclusions\":[");
            write_list(self.exclusions, out, write_exclusion);
            out.put(b"],");
        }
        out.put(b"\"format\":");
        string(self.format.id(), out);
        if let Some(h) = self.harness {
            out.put(b",\"harness\":");
            write_harness(h, out);
        }
        out.put(b",\"members\":[");
        write_members(self.members, out);
        out.put(b"],\"totals\":");
        write_totals(self.totals, out);
        out.put(b"}");
    }
}

/// Writes the items of a JSON array, separated by commas.
fn write_list<T, S: Sink>(items: &[T], out: &mut S, write: impl Fn(&T, &mut S)) {
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            out.put(b",");
        }
        write(item, out);
    }
}

/// Writes the members array's items.
pub(crate) fn write_members<M: Listed>(members: &[M], out: &mut impl Sink) {
    write_list(members, out, write_member);
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
    if let Some(provider) = &h.provider {
        out.put(b",\"provider\":");
        string(provider, out);
    }
    // The wire names predate the harness-neutral field names.
    out.put(b",\"rollout\":");
    string(&h.session_log, out);
    out.put(b",\"thread_id\":");
    string(&h.session_id, out);
    if let Some(version) = &h.version {
        out.put(b",\"version\":");
        string(version, out);
    }
    out.put(b"}");
}

/// Writes the canonical JSON of one member object.
pub(crate) fn write_member(e: &impl Listed, out: &mut impl Sink) {
    let entry = e.entry();
    out.put(b"{\"mode\":\"");
    out.put(entry.mode().as_str().as_bytes());
    out.put(b"\",\"path\":");
    string(e.path(), out);
    match entry {
        Entry::File { size, sha256, .. } => {
            out.put(b",\"sha256\":\"");
            let mut hex = [0u8; 64];
            for (i, b) in sha256.0.iter().enumerate() {
                hex[2 * i] = HEX[usize::from(b >> 4)];
                hex[2 * i + 1] = HEX[usize::from(b & 15)];
            }
            out.put(&hex);
            out.put(b"\",\"size\":");
            number(*size, out);
        }
        Entry::Symlink { target } => {
            out.put(b",\"target\":");
            string(target, out);
        }
        Entry::Dir => {}
    }
    out.put(b",\"type\":");
    string(entry.kind().as_str(), out);
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

/// Parses `packet.json` into the closed, typed shape, then checks that it
/// names this format and is byte for byte its canonical serialisation. The
/// member-set rules are the caller's next step.
pub(crate) fn parse_canonical(bytes: &[u8]) -> Result<UncheckedManifest, Error> {
    let manifest: UncheckedManifest = serde_json::from_slice(bytes).map_err(|e| {
        let text = alloc::string::ToString::to_string(&e);
        match text.strip_prefix(MODE_FAULT) {
            // A member whose mode does not fit its type: the rule of §4,
            // with its own code, found while the member was parsed.
            Some(rest) => {
                let (path, message) = rest.split_once(MODE_FAULT).unwrap_or(("", rest));
                Error::new(ErrorCode::ModeNotCanonical, String::from(message)).at_path(path)
            }
            None => Error::new(
                ErrorCode::ManifestInvalid,
                alloc::format!("packet.json: {text}"),
            )
            .at_path(MANIFEST_PATH),
        }
    })?;
    if !is_canonical(&manifest, bytes) {
        return Err(Error::new(
            ErrorCode::ManifestNotCanonical,
            "packet.json is not in canonical form (sorted keys, no whitespace, minimal escapes, no trailing newline)",
        )
        .at_path(MANIFEST_PATH));
    }
    Ok(manifest)
}

/// Whether `text` is exactly the canonical JSON of `manifest`.
pub(crate) fn is_canonical(manifest: &UncheckedManifest, text: &[u8]) -> bool {
    let mut comparer = Comparer::new(text);
    write_unchecked(manifest, &mut comparer);
    comparer.matches()
}

/// A member object that parses and is exactly its canonical serialisation.
pub(crate) fn parse_member(text: &[u8]) -> Option<UncheckedMember> {
    let raw: MemberJson = serde_json::from_slice(text).ok()?;
    let member = member_from_raw(raw).ok()?;
    let mut comparer = Comparer::new(text);
    write_member(&member, &mut comparer);
    comparer.matches().then_some(member)
}

/// Deserialises an optional field that, when present, must not be null.
pub(super) fn present<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de> + PresentOnly,
{
    T::from_present(d)
}

pub(super) trait PresentOnly: Sized {
    fn from_present<'de, D: Deserializer<'de>>(d: D) -> Result<Self, D::Error>;
}

impl<T: for<'a> Deserialize<'a>> PresentOnly for Option<T> {
    fn from_present<'de, D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        T::deserialize(d).map(Some)
    }
}

impl<T: for<'a> Deserialize<'a>> PresentOnly for Vec<T> {
    fn from_present<'de, D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        <Vec<T> as Deserialize>::deserialize(d)
    }
}

/// The JSON shape of one member, keys in bytewise order.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct MemberJson {
    mode: String,
    path: String,
    #[serde(default, deserialize_with = "present")]
    sha256: Option<String>,
    #[serde(default, deserialize_with = "present")]
    size: Option<u64>,
    #[serde(default, deserialize_with = "present")]
    target: Option<String>,
    #[serde(rename = "type")]
    kind: String,
}

/// Deserialises the members array one member at a time: no intermediate
/// list of raw members, which for 250,000 members would cost as much
/// memory as the members themselves.
pub(super) fn members<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<UncheckedMember>, D::Error> {
    struct Members;
    impl<'de> serde::de::Visitor<'de> for Members {
        type Value = Vec<UncheckedMember>;
        fn expecting(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
            f.write_str("a list of members")
        }
        fn visit_seq<A: serde::de::SeqAccess<'de>>(
            self,
            mut seq: A,
        ) -> Result<Vec<UncheckedMember>, A::Error> {
            use serde::de::Error as _;
            let mut out = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(1 << 16));
            while let Some(raw) = seq.next_element::<MemberJson>()? {
                out.push(member_from_raw(raw).map_err(A::Error::custom)?);
            }
            Ok(out)
        }
    }
    d.deserialize_seq(Members)
}

/// Marks a member parse failure that is a mode not canonical for its
/// type (not a shape error): `MODE_FAULT path MODE_FAULT message`. The
/// marker is a control character, which no path and no serde message
/// holds.
const MODE_FAULT: &str = "\u{1}";

/// Deserialises the manifest's `format`: one of the versions a reader
/// accepts.
pub(super) fn format<'de, D: Deserializer<'de>>(d: D) -> Result<Format, D::Error> {
    use serde::de::Error as _;
    let id = String::deserialize(d)?;
    Format::from_id(&id).ok_or_else(|| {
        D::Error::custom(alloc::format!(
            "format is {id:?}, this reader understands {:?} and {:?}",
            Format::V1.id(),
            Format::V2.id()
        ))
    })
}

fn member_from_raw(r: MemberJson) -> Result<UncheckedMember, String> {
    let kind = match r.kind.as_str() {
        "file" => Kind::File,
        "dir" => Kind::Dir,
        "symlink" => Kind::Symlink,
        other => {
            return Err(alloc::format!(
                "member {:?}: unknown type {other:?}",
                r.path
            ))
        }
    };
    let mode = match r.mode.as_str() {
        "0644" => 0o644,
        "0755" => 0o755,
        "0777" => 0o777,
        other => {
            return Err(alloc::format!(
                "member {:?}: mode {other:?} is not 0644, 0755 or 0777",
                r.path
            ))
        }
    };
    let file = kind == Kind::File;
    if file != r.size.is_some() || file != r.sha256.is_some() {
        return Err(alloc::format!(
            "member {:?}: size and sha256 are present for files and only for files",
            r.path
        ));
    }
    if (kind == Kind::Symlink) != r.target.is_some() {
        return Err(alloc::format!(
            "member {:?}: target is present for symlinks and only for symlinks",
            r.path
        ));
    }
    if !kind.allows_mode(mode) {
        return Err(alloc::format!(
            "{MODE_FAULT}{}{MODE_FAULT}mode {mode:o} is not canonical for a {} (files 644 or 755, directories 755, symlinks 777)",
            r.path,
            kind.as_str()
        ));
    }
    let entry = match (kind, r.size, r.sha256, r.target) {
        (Kind::File, Some(size), Some(hex), None) => Entry::File {
            size,
            sha256: Digest::from_hex(&hex)
                .map_err(|e| alloc::format!("member {:?}: {}", r.path, e.message()))?,
            executable: mode == 0o755,
        },
        (Kind::Dir, None, None, None) => Entry::Dir,
        (Kind::Symlink, None, None, Some(target)) => Entry::Symlink { target },
        _ => {
            return Err(alloc::format!(
                "member {:?}: its fields do not belong to its type",
                r.path
            ))
        }
    };
    Ok(UncheckedMember {
        path: r.path,
        entry,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::manifest::HarnessKind;
    use alloc::vec;

    fn odd_manifest() -> Manifest {
        let odd = String::from("q\"b\\s/\u{1}\u{1f}\u{7f}\u{e9}\u{212a}\n\t\r\u{8}\u{c}");
        Manifest {
            exclusions: vec![Exclusion {
                matched: 12345678901234,
                pattern: odd.clone(),
                rule: String::from("user"),
            }],
            format: Format::CURRENT,
            harness: Some(Harness {
                kind: HarnessKind::Codex,
                model: Some(odd.clone()),
                provider: Some(odd.clone()),
                session_log: String::from("harness/codex/x"),
                session_id: String::from("t"),
                version: Some(odd.clone()),
            }),
            members: vec![
                Member::dir("workspace"),
                Member::file("workspace/\u{e9}\"x", 0, Digest::of(b""), true),
                Member::file("workspace/b", u64::MAX, Digest::of(b"b"), false),
                Member::symlink("workspace/l", odd),
            ],
            totals: Totals {
                bytes: 0,
                directories: 1,
                files: 2,
                members: 4,
                symlinks: u64::MAX,
            },
        }
    }

    /// What the encoder writes is JSON that parses back to the same value,
    /// under the manifest's wire names.
    #[test]
    fn the_encoding_is_json_of_the_manifest() {
        let m = odd_manifest();
        let mut ours = Vec::new();
        write_manifest(&m, &mut ours);
        let back: UncheckedManifest = serde_json::from_slice(&ours).unwrap();
        assert_eq!(back, UncheckedManifest::from(m.clone()));
        let value: serde_json::Value = serde_json::from_slice(&ours).unwrap();
        assert_eq!(value["harness"]["rollout"], "harness/codex/x");
        assert_eq!(value["harness"]["thread_id"], "t");
        assert_eq!(value["members"][1]["mode"], "0755");
        assert_eq!(value["totals"]["symlinks"], u64::MAX);
        // serde_json's own escapes are RFC 8785's minimal ones.
        let reencoded = serde_json::to_vec(&value["exclusions"][0]["pattern"]).unwrap();
        let pattern = &m.exclusions[0].pattern;
        let mut ours = Vec::new();
        string(pattern, &mut ours);
        assert_eq!(ours, reencoded);
    }

    #[test]
    fn the_counter_and_the_comparer_agree_with_the_bytes() {
        let m = odd_manifest();
        let mut ours = Vec::new();
        write_manifest(&m, &mut ours);
        let mut counter = Counter::default();
        write_manifest(&m, &mut counter);
        assert_eq!(counter.0, ours.len() as u64);
        let m = UncheckedManifest::from(m);
        assert!(is_canonical(&m, &ours));
        let mut longer = ours.clone();
        longer.push(b' ');
        assert!(!is_canonical(&m, &longer));
        let mut changed = ours.clone();
        changed[10] ^= 1;
        assert!(!is_canonical(&m, &changed));
    }
}
