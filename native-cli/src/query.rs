//! Commands that read packets and write no files: `verify`, `inspect`,
//! `cat` and `diff`. Each reads the whole packet through packet-core's
//! reader, so nothing is reported from a packet that fails verification.

use std::fmt::Write as _;
use std::io::{self, Read, Seek, SeekFrom, Write};

use packet_core::diff::Change;
use packet_core::{Digest, Event, Findings, Kind, Manifest, Member, MemberSummary, VerifiedPacket};
use serde::Serialize;

use crate::error::{CliError, Refused, Result};
use crate::packet_io::{self, PacketSource, CHUNK};
use crate::progress::Progress;
use crate::report::{mode_string, ExclusionReport, HarnessReport, Totals};

/// The `pillbox.checkpoint.verify/1` object.
#[derive(Debug, Serialize)]
pub struct VerifyReport {
    /// `pillbox.checkpoint.verify/1`.
    pub schema: &'static str,
    /// Always true (a failure prints a `pillbox.error/1` object instead).
    pub ok: bool,
    /// The packet's format id, which says what its digest is the SHA-256 of.
    pub format: &'static str,
    /// The packet digest.
    pub digest: String,
    /// Whether it was compared with `--digest`.
    pub digest_checked: bool,
    /// Packet size in bytes.
    pub size: u64,
    /// Members after `packet.json`.
    pub members: u64,
    /// Manifest totals.
    pub totals: Totals,
    /// Harness state carried.
    pub harness: Option<HarnessReport>,
    /// Secrets, and git settings and hooks that run programs, found in
    /// the packet (a report: the packet verified).
    pub findings: Findings,
}

/// `verify`.
pub fn verify(
    source: &dyn PacketSource,
    expected: Option<Digest>,
    progress: &Progress,
) -> Result<VerifyReport> {
    let read = packet_io::verify(source, expected, progress)?;
    progress.finish();
    Ok(VerifyReport {
        schema: "pillbox.checkpoint.verify/1",
        ok: true,
        format: read.manifest.format.id(),
        digest: read.digest.to_string(),
        digest_checked: expected.is_some(),
        size: read.size,
        members: read.manifest.totals.members,
        totals: read.manifest.totals,
        harness: read.manifest.harness.as_ref().map(HarnessReport::of),
        findings: read.findings,
    })
}

/// The `pillbox.checkpoint.inspect/1` object.
#[derive(Debug, Serialize)]
pub struct InspectReport {
    /// `pillbox.checkpoint.inspect/1`.
    pub schema: &'static str,
    /// The packet's format id, which says what its digest is the SHA-256 of.
    pub format: &'static str,
    /// The packet digest.
    pub digest: String,
    /// Packet size in bytes.
    pub size: u64,
    /// Manifest totals.
    pub totals: Totals,
    /// Harness state carried.
    pub harness: Option<HarnessReport>,
    /// Exclusion rules that applied when it was packed.
    pub exclusions: Vec<ExclusionReport>,
    /// Every member, in archive order.
    pub members: Vec<MemberSummary>,
    /// Secrets, and git settings and hooks that run programs, found in
    /// the packet.
    pub findings: Findings,
}

/// `inspect`.
pub fn inspect(
    source: &dyn PacketSource,
    expected: Option<Digest>,
    progress: &Progress,
) -> Result<InspectReport> {
    let read = packet_io::verify(source, expected, progress)?;
    progress.finish();
    let m = &read.manifest;
    Ok(InspectReport {
        schema: "pillbox.checkpoint.inspect/1",
        format: m.format.id(),
        digest: read.digest.to_string(),
        size: read.size,
        totals: m.totals,
        harness: m.harness.as_ref().map(HarnessReport::of),
        exclusions: m.exclusions.iter().map(ExclusionReport::from).collect(),
        members: m.members.iter().map(MemberSummary::from).collect(),
        findings: read.findings,
    })
}

/// The `tar -tv`-like listing of `inspect --format text`.
pub fn inspect_text(report: &InspectReport) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "# {} {} ({} bytes)",
        report.format, report.digest, report.size
    );
    let t = &report.totals;
    let _ = writeln!(
        s,
        "# {} members: {} files ({} bytes), {} directories, {} symlinks",
        t.members, t.files, t.bytes, t.directories, t.symlinks
    );
    if let Some(h) = &report.harness {
        let _ = writeln!(
            s,
            "# harness {} thread {} model {} log {}",
            h.kind,
            h.thread_id,
            h.model.as_deref().unwrap_or("-"),
            h.member
        );
    }
    for e in &report.exclusions {
        let _ = writeln!(
            s,
            "# excluded {} path(s) by {} {:?}",
            e.matched, e.rule, e.pattern
        );
    }
    for f in &report.findings.secrets {
        let at = f.line.map(|l| format!(":{l}")).unwrap_or_default();
        let _ = writeln!(s, "# secret {}{at} {}", f.path, f.rule);
    }
    for f in &report.findings.git {
        let at = f.line.map(|l| format!(":{l}")).unwrap_or_default();
        let _ = writeln!(s, "# git {}{at} {}: {}", f.path, f.setting, f.why);
    }
    for e in &report.members {
        let name = match e.kind {
            Kind::Dir => format!("{}/", e.path),
            Kind::Symlink => format!("{} -> {}", e.path, e.target.as_deref().unwrap_or("")),
            Kind::File => e.path.to_string(),
        };
        let _ = writeln!(
            s,
            "{} 0/0 {:>12} 1970-01-01 00:00 {}",
            mode_string(e),
            e.size,
            name
        );
    }
    s
}

/// The `pillbox.checkpoint.cat/1` object (printed on stderr or to `--report`).
#[derive(Debug, Serialize)]
pub struct CatReport {
    /// `pillbox.checkpoint.cat/1`.
    pub schema: &'static str,
    /// The member written to standard output.
    pub path: String,
    /// Its size.
    pub size: u64,
    /// Its sha256 (bare hex), as the manifest records and the reader checked.
    pub sha256: String,
    /// Its mode.
    pub mode: String,
    /// The packet's format id, which says what its digest is the SHA-256 of.
    pub format: &'static str,
    /// The packet digest.
    pub packet_digest: String,
    /// Whether the packet digest was compared with `--digest`.
    pub digest_checked: bool,
}

/// `cat`: the member is copied into an unnamed temporary file while the
/// whole packet is verified, then copied to `out`, so no byte reaches
/// standard output unless the member and the packet verified.
pub fn cat(
    source: &dyn PacketSource,
    member: &str,
    expected: Option<Digest>,
    out: &mut dyn Write,
    progress: &Progress,
) -> Result<CatReport> {
    let tmp_dir = std::env::temp_dir();
    let mut spool = tempfile::tempfile()
        .map_err(|e| CliError::io("create a temporary file in", &tmp_dir, e))?;
    let mut target: Option<usize> = None;
    let mut resolved = member.to_owned();
    let mut copying = false;
    let options = packet_core::ReaderOptions {
        expected_digest: expected,
        ..Default::default()
    };
    progress.phase("read", source.size_hint().unwrap_or(0));
    let read = packet_io::read_packet(source, options, progress, &mut |event| {
        match event {
            Event::Manifest(m) => {
                let (index, entry) = resolve_member(m, member)?;
                resolved = entry.path.to_string();
                if entry.kind() != Kind::File {
                    return Err(Refused::NotAFile {
                        member: member.to_owned(),
                        kind: entry.kind().as_str(),
                    }
                    .into());
                }
                target = Some(index);
            }
            Event::MemberStart { index, .. } => copying = Some(index) == target,
            Event::Data(bytes) if copying => {
                spool
                    .write_all(bytes)
                    .map_err(|e| CliError::io("write a temporary file in", &tmp_dir, e))?;
            }
            Event::MemberEnd { .. } => copying = false,
            Event::Data(_) => {}
        }
        Ok(())
    })?;
    progress.finish();
    let (_, entry) = read
        .manifest
        .find(&resolved)
        .ok_or_else(|| Refused::MemberNotInManifest {
            member: resolved.clone(),
        })?;
    spool
        .seek(SeekFrom::Start(0))
        .map_err(|e| CliError::io("rewind a temporary file in", &tmp_dir, e))?;
    let mut buf = vec![0u8; CHUNK];
    loop {
        let n = match spool.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(CliError::io("read a temporary file in", &tmp_dir, e)),
        };
        out.write_all(&buf[..n])
            .map_err(|e| CliError::io("write", "standard output", e))?;
    }
    out.flush()
        .map_err(|e| CliError::io("write", "standard output", e))?;
    Ok(CatReport {
        schema: "pillbox.checkpoint.cat/1",
        path: entry.path.to_string(),
        size: entry.size(),
        sha256: entry
            .sha256()
            .map(|d| d.hex().to_string())
            .unwrap_or_default(),
        mode: entry.mode().to_string(),
        format: read.manifest.format.id(),
        packet_digest: read.digest.to_string(),
        digest_checked: expected.is_some(),
    })
}

/// The member a user named: a path relative to the workspace
/// (`src/main.rs`, `./src/main.rs`) or a member path as the manifest
/// writes it (`workspace/src/main.rs`, `harness/…`). A name that could be
/// either of two members is refused with both.
pub fn resolve_member<'m>(m: &'m Manifest, asked: &str) -> Result<(usize, &'m Member)> {
    let asked = asked.trim_start_matches("./");
    let mut found: Vec<(usize, &Member)> = Vec::new();
    for name in [asked.to_owned(), format!("workspace/{asked}")] {
        if let Some(hit) = m.find(&name) {
            if !found.iter().any(|(i, _)| *i == hit.0) {
                found.push(hit);
            }
        }
    }
    match found.as_slice() {
        [one] => Ok(*one),
        [] => Err(Refused::MemberNotFound {
            member: asked.to_owned(),
        }
        .into()),
        [a, b, ..] => Err(Refused::MemberAmbiguous {
            member: asked.to_owned(),
            first: a.1.path.to_string(),
            second: b.1.path.to_string(),
        }
        .into()),
    }
}

/// One side of a diff.
#[derive(Debug, Serialize)]
pub struct DiffSide {
    /// The packet as named on the command line.
    pub packet: String,
    /// Its format id, which says what its digest is the SHA-256 of.
    pub format: &'static str,
    /// Its digest.
    pub digest: String,
    /// Its size.
    pub size: u64,
    /// Its totals.
    pub totals: Totals,
    /// Its harness.
    pub harness: Option<HarnessReport>,
}

/// A member present in both packets that differs.
#[derive(Debug, Serialize)]
pub struct Changed {
    /// Member path.
    pub path: String,
    /// Which of `type`, `mode`, `size`, `sha256`, `target` differ.
    pub fields: Vec<&'static str>,
    /// The member in the first packet.
    pub a: MemberSummary,
    /// The member in the second packet.
    pub b: MemberSummary,
}

/// The `pillbox.checkpoint.diff/1` object.
#[derive(Debug, Serialize)]
pub struct DiffReport {
    /// `pillbox.checkpoint.diff/1`.
    pub schema: &'static str,
    /// Whether the two packets hold the same members, harness and exclusions.
    pub identical: bool,
    /// The first packet.
    pub a: DiffSide,
    /// The second packet.
    pub b: DiffSide,
    /// Members only in the second packet.
    pub added: Vec<MemberSummary>,
    /// Members only in the first packet.
    pub removed: Vec<MemberSummary>,
    /// Members in both that differ.
    pub changed: Vec<Changed>,
    /// Whether the harness descriptors differ.
    pub harness_changed: bool,
    /// Whether the exclusion records differ.
    pub exclusions_changed: bool,
}

/// `diff`.
pub fn diff(a: &dyn PacketSource, b: &dyn PacketSource, progress: &Progress) -> Result<DiffReport> {
    let ra = packet_io::verify_as(a, None, progress, "verify 1/2")?;
    let rb = packet_io::verify_as(b, None, progress, "verify 2/2")?;
    progress.finish();
    let (added, removed, changed) = compare(&ra.manifest, &rb.manifest);
    let harness_changed = ra.manifest.harness != rb.manifest.harness;
    let exclusions_changed = ra.manifest.exclusions != rb.manifest.exclusions;
    let side = |src: &dyn PacketSource, r: &VerifiedPacket| -> Result<DiffSide> {
        Ok(DiffSide {
            packet: src.label(),
            format: r.manifest.format.id(),
            digest: r.digest.to_string(),
            size: r.size,
            totals: r.manifest.totals,
            harness: r.manifest.harness.as_ref().map(HarnessReport::of),
        })
    };
    Ok(DiffReport {
        schema: "pillbox.checkpoint.diff/1",
        identical: added.is_empty()
            && removed.is_empty()
            && changed.is_empty()
            && !harness_changed
            && !exclusions_changed,
        a: side(a, &ra)?,
        b: side(b, &rb)?,
        added,
        removed,
        changed,
        harness_changed,
        exclusions_changed,
    })
}

/// Members added, removed and changed from `a` to `b`, in archive order
/// (packet-core's [`diff`](packet_core::diff::diff)).
pub fn compare(
    a: &Manifest,
    b: &Manifest,
) -> (Vec<MemberSummary>, Vec<MemberSummary>, Vec<Changed>) {
    let (mut added, mut removed, mut changed) = (Vec::new(), Vec::new(), Vec::new());
    for change in packet_core::diff::diff(a, b) {
        match change {
            Change::Added { b: j } => added.push(MemberSummary::from(&b.members[j])),
            Change::Removed { a: i } => removed.push(MemberSummary::from(&a.members[i])),
            Change::Changed { a: i, b: j, fields } => changed.push(Changed {
                path: a.members[i].path.to_string(),
                fields: fields.names(),
                a: (&a.members[i]).into(),
                b: (&b.members[j]).into(),
            }),
        }
    }
    (added, removed, changed)
}

/// The readable form of `diff --format text`: `A`, `D`, `M` lines.
pub fn diff_text(report: &DiffReport) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "--- {} {}", report.a.packet, report.a.digest);
    let _ = writeln!(s, "+++ {} {}", report.b.packet, report.b.digest);
    for e in &report.added {
        let _ = writeln!(s, "A {} ({}, {} bytes)", e.path, e.kind, e.size);
    }
    for e in &report.removed {
        let _ = writeln!(s, "D {} ({}, {} bytes)", e.path, e.kind, e.size);
    }
    for c in &report.changed {
        let mut what = Vec::new();
        for f in &c.fields {
            what.push(match *f {
                "type" => format!("type {} -> {}", c.a.kind, c.b.kind),
                "mode" => format!("mode {} -> {}", c.a.mode, c.b.mode),
                "size" => format!("size {} -> {}", c.a.size, c.b.size),
                "sha256" => "contents".to_owned(),
                _ => format!(
                    "target {:?} -> {:?}",
                    c.a.target.as_deref().unwrap_or(""),
                    c.b.target.as_deref().unwrap_or("")
                ),
            });
        }
        let _ = writeln!(s, "M {} ({})", c.path, what.join(", "));
    }
    if report.harness_changed {
        let _ = writeln!(s, "harness changed");
    }
    if report.exclusions_changed {
        let _ = writeln!(s, "exclusions changed");
    }
    let _ = writeln!(
        s,
        "{} added, {} removed, {} changed{}",
        report.added.len(),
        report.removed.len(),
        report.changed.len(),
        if report.identical { " (identical)" } else { "" }
    );
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet_io::test_support::Bytes;
    use packet_core::in_memory::{build, Source};

    fn packet(files: &[(&str, &[u8], bool)]) -> Vec<u8> {
        let mut sources = vec![Source::Dir {
            path: "workspace".into(),
        }];
        for (p, c, x) in files {
            sources.push(Source::File {
                path: format!("workspace/{p}"),
                contents: c.to_vec(),
                executable: *x,
            });
        }
        build(&sources, None, vec![], &packet_core::Limits::FORMAT)
            .unwrap()
            .bytes
    }

    #[test]
    fn diff_reports_added_removed_changed() {
        let a = packet(&[
            ("same", b"1", false),
            ("gone", b"x", false),
            ("edit", b"a", false),
            ("exec", b"e", false),
        ]);
        let b = packet(&[
            ("same", b"1", false),
            ("new", b"y", false),
            ("edit", b"bb", false),
            ("exec", b"e", true),
        ]);
        let r = diff(&Bytes(a), &Bytes(b), &Progress::new(true)).unwrap();
        assert!(!r.identical);
        assert_eq!(
            r.added.iter().map(|e| e.path.as_str()).collect::<Vec<_>>(),
            ["workspace/new"]
        );
        assert_eq!(
            r.removed
                .iter()
                .map(|e| e.path.as_str())
                .collect::<Vec<_>>(),
            ["workspace/gone"]
        );
        let changed: Vec<_> = r
            .changed
            .iter()
            .map(|c| (c.path.as_str(), c.fields.clone()))
            .collect();
        assert_eq!(
            changed,
            [
                ("workspace/edit", vec!["size", "sha256"]),
                ("workspace/exec", vec!["mode"])
            ]
        );
        let text = diff_text(&r);
        assert!(
            text.contains("M workspace/exec (mode 0644 -> 0755)"),
            "{text}"
        );
    }

    #[test]
    fn cat_writes_only_the_member() {
        let p = packet(&[("a", b"alpha", false), ("b", b"beta", false)]);
        let mut out = Vec::new();
        let r = cat(
            &Bytes(p),
            "workspace/b",
            None,
            &mut out,
            &Progress::new(true),
        )
        .unwrap();
        assert_eq!(out, b"beta");
        assert_eq!(r.size, 4);
    }

    #[test]
    fn cat_writes_nothing_from_a_tampered_packet() {
        let mut p = packet(&[("a", b"alpha", false)]);
        let at = p.windows(5).position(|w| w == b"alpha").unwrap();
        p[at] = b'A';
        let mut out = Vec::new();
        let e = cat(
            &Bytes(p),
            "workspace/a",
            None,
            &mut out,
            &Progress::new(true),
        )
        .unwrap_err();
        assert_eq!(e.code(), "member_digest_mismatch");
        assert!(out.is_empty());
    }
}
