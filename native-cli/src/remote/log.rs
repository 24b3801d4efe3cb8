//! `log`: the packets a ref has named, newest first
//! (`GET /v1/ref-history/{name}`, the `read` scope), and what changed from
//! each to the next, computed here from their manifests (docs/cli.md,
//! "log").
//!
//! Each packet's `packet.json` comes through the pull machinery
//! ([`parts::fetch`]): its recipes, then only the manifest chunks neither
//! the newer packet's `packet.json` (the base) nor the chunk cache holds,
//! and a /2 packet's `packet.json` is checked against its digest as it
//! comes together. Walking newest to oldest, consecutive manifests share
//! most chunks, so a log costs one history request per page, one recipes
//! request per packet and what changed in `packet.json`; no body is read.
//! Only two manifests are held at a time.

use std::path::PathBuf;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Mutex;

use packet_core::diff::Change;
use packet_core::{Digest, Manifest};
use pillbox_wire::{ApiCode, RefHistory, RefMove};
use serde::Serialize;

use super::client::{read_answer, status_error, Remote};
use super::delta_pull::describe_manifest;
use super::fetch::Fetcher;
use super::parts::{self, KnownBase, Parts};
use super::{packet_path, percent_encode};
use crate::cache::Cache;
use crate::error::{CliError, Result};
use crate::report::Totals;

/// The most moves one history request asks for (the API's page limit).
const PAGE: usize = 500;
/// How many paths an entry's change lists.
pub const PATHS_MAX: usize = 20;

/// What `log` is asked.
pub struct LogRequest {
    /// The ref.
    pub name: String,
    /// How many moves to show.
    pub limit: usize,
    /// The chunk cache and its folder, if any.
    pub cache: Option<(Cache, Option<PathBuf>)>,
}

/// The `pillbox.checkpoint.log/1` object.
#[derive(Debug, Serialize)]
pub struct LogReport {
    /// `pillbox.checkpoint.log/1`.
    pub schema: &'static str,
    /// The store's base URL.
    pub remote: String,
    /// The ref.
    #[serde(rename = "ref")]
    pub ref_name: String,
    /// How many moves the store keeps per ref.
    pub kept: u32,
    /// The moves, newest first.
    pub entries: Vec<Entry>,
    /// True when the store keeps older moves than `--limit` shows.
    pub truncated: bool,
    /// What reading the manifests cost.
    pub fetched: Fetched,
}

/// One move of the ref.
#[derive(Debug, Serialize)]
pub struct Entry {
    /// The packet the ref named from then on.
    pub digest: String,
    /// When (RFC 3339, UTC).
    pub at: String,
    /// The id of the token that moved it, if the store knows.
    pub by: Option<String>,
    /// Whether the store still holds the packet.
    pub stored: bool,
    /// Whether its `packet.json` was checked against its digest (a /2
    /// packet's name; a /1 packet is named by its whole file, which `log`
    /// does not read).
    pub manifest_checked: bool,
    /// Its format id, its size and totals (null when it is not stored).
    pub format: Option<&'static str>,
    /// Its size in bytes.
    pub size: Option<u64>,
    /// Its manifest's totals.
    pub totals: Option<Totals>,
    /// What changed from the packet the ref named before; null for the
    /// first the store kept, and when either packet is not stored.
    pub change: Option<ChangeReport>,
}

/// What changed from one packet to the next.
#[derive(Debug, Serialize, PartialEq, Eq)]
pub struct ChangeReport {
    /// Members added.
    pub added: u64,
    /// Members removed.
    pub removed: u64,
    /// Members in both that differ.
    pub changed: u64,
    /// File bytes after, less file bytes before.
    pub bytes: i64,
    /// Whether the harness descriptor changed.
    pub harness_changed: bool,
    /// The first [`PATHS_MAX`] members added, removed or changed, in
    /// archive order.
    pub paths: Vec<ChangedPath>,
    /// True when more members changed than `paths` lists.
    pub paths_truncated: bool,
}

/// One member of [`ChangeReport::paths`].
#[derive(Debug, Serialize, PartialEq, Eq)]
pub struct ChangedPath {
    /// Member path.
    pub path: String,
    /// `added`, `removed` or `changed`.
    pub change: &'static str,
    /// Its size in the newer packet (in the older for a removed one).
    pub size: u64,
}

/// What the log's requests cost.
#[derive(Debug, Default, Serialize)]
pub struct Fetched {
    /// Requests sent (history pages, recipes, manifest chunks).
    pub requests: u64,
    /// Bytes of the store's answers' bodies, as received.
    pub bytes_received: u64,
    /// Manifests read (one per distinct packet the log looked at).
    pub manifests: u64,
    /// Chunks of `packet.json` fetched (the rest came from the newer
    /// packet's or the cache).
    pub chunks_fetched: u64,
    /// Their raw bytes.
    pub chunk_bytes_fetched: u64,
}

/// `log`.
pub fn log(remote: &Remote, request: LogRequest) -> Result<LogReport> {
    let before = (remote.traffic().requests(), remote.traffic().received());
    // One move more than shown: the packet before the oldest one shown,
    // to say what the oldest changed.
    let (moves, kept, older) = history(remote, &request.name, request.limit + 1)?;
    let truncated = moves.len() > request.limit || older;
    let cache = request.cache.map(|(c, _)| Mutex::new(c));
    let mut fetched = Fetched::default();
    let mut entries = Vec::with_capacity(moves.len().min(request.limit));
    // Newest to oldest: `newer` is the entry just made and its manifest.
    let mut newer: Option<(Digest, Option<Read>)> = None;
    for m in &moves {
        let digest = m.digest.parse::<Digest>().map_err(|e| {
            super::client::bad_answer(
                &format!("GET /v1/ref-history/{}", request.name),
                &format!("digest {:?}: {}", m.digest, e.message()),
            )
        })?;
        let read = match &newer {
            Some((d, r)) if *d == digest => r.clone(),
            _ => {
                let base = newer
                    .as_ref()
                    .and_then(|(d, r)| r.as_ref().map(|r| (*d, r)));
                read(remote, digest, base, cache.as_ref(), &mut fetched)?
            }
        };
        if let (Some(entry), Some((_, Some(newer_read)))) = (entries.last_mut(), &newer) {
            let entry: &mut Entry = entry;
            if let Some(r) = &read {
                entry.change = Some(change(&r.manifest, &newer_read.manifest));
            }
        }
        if entries.len() < request.limit {
            entries.push(entry(m, read.as_ref()));
        }
        newer = Some((digest, read));
    }
    if let Some(cache) = cache {
        cache
            .into_inner()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .finish()?;
    }
    fetched.requests = remote.traffic().requests() - before.0;
    fetched.bytes_received = remote.traffic().received() - before.1;
    Ok(LogReport {
        schema: "pillbox.checkpoint.log/1",
        remote: remote.base().to_owned(),
        ref_name: request.name,
        kept,
        entries,
        truncated,
        fetched,
    })
}

/// A packet's manifest as read, and what it was read from.
#[derive(Clone)]
struct Read {
    manifest: Manifest,
    parts: std::rc::Rc<Parts>,
    checked: bool,
}

/// Up to `want` moves, newest first; the bound kept; whether older ones
/// follow.
fn history(remote: &Remote, name: &str, want: usize) -> Result<(Vec<RefMove>, u32, bool)> {
    let mut moves = Vec::new();
    let mut cursor: Option<String> = None;
    let segments: Vec<String> = name.split('/').map(percent_encode).collect();
    loop {
        let ask = (want - moves.len()).min(PAGE);
        let mut path = format!("/v1/ref-history/{}?limit={ask}", segments.join("/"));
        if let Some(c) = &cursor {
            path.push_str(&format!("&cursor={}", percent_encode(c)));
        }
        let what = format!("GET {path}");
        let mut r = remote.get(&what, &path)?;
        if r.status().as_u16() != 200 {
            return Err(status_error(&what, r));
        }
        let page: RefHistory = read_answer(&what, &mut r)?;
        moves.extend(page.moves.into_iter().take(ask));
        match page.next_cursor {
            Some(next) if moves.len() < want => cursor = Some(next),
            next => return Ok((moves, page.kept, next.is_some())),
        }
    }
}

/// The manifest of `digest`, fetched with `base` (the newer packet) as the
/// source of shared chunks; `None` if the store no longer holds it.
fn read(
    remote: &Remote,
    digest: Digest,
    base: Option<(Digest, &Read)>,
    cache: Option<&Mutex<Cache>>,
    fetched: &mut Fetched,
) -> Result<Option<Read>> {
    let fetcher = Fetcher::new(remote, packet_path(&digest));
    let known = base.map(|(d, r)| KnownBase {
        digest: Some(d),
        json: &r.parts.json,
        recipes: &r.parts.recipes,
    });
    let parts = match parts::fetch(&fetcher, &digest, known.as_ref(), cache) {
        Ok(p) => p,
        Err(CliError::Remote { code, .. }) if code == ApiCode::NotFound.as_str() => {
            return Ok(None)
        }
        Err(e) => return Err(e),
    };
    fetched.manifests += 1;
    fetched.chunks_fetched += fetcher.fetched.chunks.load(Relaxed);
    fetched.chunk_bytes_fetched += fetcher.fetched.bytes.load(Relaxed);
    let (manifest, assembly) = describe_manifest(&parts, digest)?;
    Ok(Some(Read {
        manifest,
        checked: assembly.is_some(),
        parts: std::rc::Rc::new(parts),
    }))
}

fn entry(m: &RefMove, read: Option<&Read>) -> Entry {
    Entry {
        digest: m.digest.clone(),
        at: m.at.clone(),
        by: m.by.clone(),
        stored: read.is_some(),
        manifest_checked: read.is_some_and(|r| r.checked),
        format: read.map(|r| r.manifest.format.id()),
        size: read.map(|r| r.manifest.packet_size()),
        totals: read.map(|r| r.manifest.totals),
        change: None,
    }
}

/// What changed from `older` to `newer` (packet-core's
/// [`diff`](packet_core::diff::diff)).
pub fn change(older: &Manifest, newer: &Manifest) -> ChangeReport {
    let mut report = ChangeReport {
        added: 0,
        removed: 0,
        changed: 0,
        bytes: newer.totals.bytes as i64 - older.totals.bytes as i64,
        harness_changed: older.harness != newer.harness,
        paths: Vec::new(),
        paths_truncated: false,
    };
    for c in packet_core::diff::diff(older, newer) {
        let (change, member) = match c {
            Change::Added { b } => {
                report.added += 1;
                ("added", &newer.members[b])
            }
            Change::Removed { a } => {
                report.removed += 1;
                ("removed", &older.members[a])
            }
            Change::Changed { b, .. } => {
                report.changed += 1;
                ("changed", &newer.members[b])
            }
        };
        if report.paths.len() < PATHS_MAX {
            report.paths.push(ChangedPath {
                path: member.path.to_string(),
                change,
                size: member.size(),
            });
        } else {
            report.paths_truncated = true;
        }
    }
    report
}

#[cfg(test)]
mod tests {
    use super::*;
    use packet_core::{Limits, Member};

    fn manifest(files: &[(&str, &[u8])]) -> Manifest {
        let mut members = vec![Member::dir("workspace")];
        for (path, bytes) in files {
            members.push(Member::file(
                packet_core::MemberPath::parse(&format!("workspace/{path}")).unwrap(),
                bytes.len() as u64,
                Digest::of(bytes),
                false,
            ));
        }
        Manifest::build(members, None, vec![], &Limits::FORMAT).unwrap()
    }

    #[test]
    fn a_change_counts_members_and_bytes_and_lists_paths() {
        let a = manifest(&[("a", b"one"), ("b", b"two"), ("c", b"three")]);
        let b = manifest(&[("a", b"one"), ("b", b"two, longer"), ("d", b"4")]);
        let c = change(&a, &b);
        assert_eq!((c.added, c.removed, c.changed), (1, 1, 1));
        assert_eq!(c.bytes, (3 + 11 + 1) - (3 + 3 + 5));
        let listed: Vec<(&str, &str, u64)> = c
            .paths
            .iter()
            .map(|p| (p.path.as_str(), p.change, p.size))
            .collect();
        assert_eq!(
            listed,
            [
                ("workspace/b", "changed", 11),
                ("workspace/c", "removed", 5),
                ("workspace/d", "added", 1)
            ]
        );
        assert!(!c.paths_truncated && !c.harness_changed);
        assert_eq!(change(&a, &a).paths, Vec::new());
    }

    #[test]
    fn a_long_change_lists_the_first_paths() {
        let names: Vec<String> = (0..PATHS_MAX + 5).map(|i| format!("f{i:03}")).collect();
        let files: Vec<(&str, &[u8])> = names.iter().map(|n| (n.as_str(), &b"x"[..])).collect();
        let c = change(&manifest(&[]), &manifest(&files));
        assert_eq!(c.added as usize, PATHS_MAX + 5);
        assert_eq!(c.paths.len(), PATHS_MAX);
        assert!(c.paths_truncated);
    }
}
