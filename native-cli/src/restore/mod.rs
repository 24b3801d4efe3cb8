//! `pillbox checkpoint restore`: a checkpoint from a store into a folder
//! (docs/cli.md, "restore"). The target is checked before anything is
//! fetched. Into an empty or absent folder, a /2 packet is put together
//! from its parts (`fresh`): bodies land in staging folders as they are
//! read or fetched and checked, and move into place once packet-core's
//! `Assembly` accepted the whole. A /1 packet is made as a file (from
//! chunks, or downloaded whole) and unpacked.

mod fresh;

use std::time::Instant;

use packet_core::Findings;
use serde::Serialize;

use crate::error::{CliError, Result};
use crate::packet_io::PacketInput;
use crate::progress::Progress;
use crate::remote::delta_pull::{self, DeltaPull};
use crate::remote::{self, DeltaPullReport, PullSources, PullTarget, Remote};
use crate::report::{HarnessReport, Totals};
use crate::unpack::{self, Created, GitNeutralized, Placed, UnpackReport, UnpackRequest};

/// The `pillbox.checkpoint.restore/1` object: what `unpack` prints, and
/// what `pull` adds.
#[derive(Debug, Serialize)]
pub struct RestoreReport {
    /// `pillbox.checkpoint.restore/1`.
    pub schema: &'static str,
    /// The packet digest (verified).
    pub digest: String,
    /// Always true: the digest is the one the store named.
    pub digest_checked: bool,
    /// Packet size in bytes.
    pub size: u64,
    /// Members after `packet.json`.
    pub members: u64,
    /// Manifest totals.
    pub totals: Totals,
    /// Absolute path of the restored workspace.
    pub workspace: String,
    /// Harness state in the packet and where it was restored.
    pub harness: Option<HarnessReport>,
    /// What the packet holds that a person should know before using the
    /// restored workspace, as `unpack` reports it.
    pub findings: Findings,
    /// What `--neutralize-git` changed (`null` without it).
    pub git: Option<GitNeutralized>,
    /// The store's base URL.
    pub remote: String,
    /// The ref it was restored from, if any.
    #[serde(rename = "ref")]
    pub ref_name: Option<String>,
    /// `delta` or `whole`.
    pub mode: &'static str,
    /// Members written (files, folders and links created or replaced).
    pub written: u64,
    /// Members of the earlier checkpoint removed.
    pub removed: u64,
    /// Members left as they were (every one in a fresh folder is written).
    pub unchanged: u64,
    /// Bytes of the store's answers' bodies, as received.
    pub bytes_received: u64,
    /// Requests sent again after a transient failure.
    pub retries: u32,
    /// Wall time of the whole restore, in seconds.
    pub seconds: f64,
    /// Delta only: where the bytes came from.
    pub delta: Option<DeltaPullReport>,
}

/// `restore`.
pub fn restore(
    store: &Remote,
    target: &PullTarget,
    sources: &PullSources,
    request: UnpackRequest,
    progress: &Progress,
) -> Result<RestoreReport> {
    let started = Instant::now();
    let received_before = store.traffic().received();
    let retries_before = store.traffic().retries();
    // Before anything is fetched.
    unpack::check_target(&request.into)?;
    let (digest, ref_name) = remote::resolve(store, target)?;
    let request = UnpackRequest {
        expected: Some(digest),
        ..request
    };
    let (unpacked, delta) = if sources.delta(store)? {
        let cache = sources.open_cache()?;
        let pull = DeltaPull::describe(store, digest, None, Some(cache))?;
        if pull.is_assembled() {
            let mut created = Created::default();
            match fresh::restore(pull, &sources.bases, &request, &mut created, progress) {
                Ok((placed, report)) => {
                    progress.finish();
                    (report_of(placed, true), Some(report))
                }
                Err(e) => {
                    progress.finish();
                    created.undo();
                    return Err(e);
                }
            }
        } else {
            let (dir, file) = spool_dir()?;
            let f = std::fs::File::create(&file).map_err(|e| CliError::io("create", &file, e))?;
            let (_, report) = delta_pull::write_packet(pull, &sources.bases, &f, &file, progress)?;
            drop(f);
            let unpacked = unpack::unpack(&PacketInput::File(file), &request, progress)?;
            drop(dir);
            (unpacked, Some(report))
        }
    } else {
        let (dir, file) = spool_dir()?;
        let whole = PullSources {
            bases: Vec::new(),
            cache: remote::CacheChoice::Off,
            whole: true,
        };
        remote::pull(store, &PullTarget::Digest(digest), &file, &whole, progress)?;
        let unpacked = unpack::unpack(&PacketInput::File(file), &request, progress)?;
        drop(dir);
        (unpacked, None)
    };
    let written = unpacked.members;
    Ok(RestoreReport {
        schema: "pillbox.checkpoint.restore/1",
        digest: unpacked.digest,
        digest_checked: unpacked.digest_checked,
        size: unpacked.size,
        members: unpacked.members,
        totals: unpacked.totals,
        workspace: unpacked.workspace,
        harness: unpacked.harness,
        findings: unpacked.findings,
        git: unpacked.git,
        remote: store.base().to_owned(),
        ref_name,
        mode: if delta.is_some() { "delta" } else { "whole" },
        written,
        removed: 0,
        unchanged: 0,
        bytes_received: store.traffic().received() - received_before,
        retries: store.traffic().retries() - retries_before,
        seconds: started.elapsed().as_secs_f64(),
        delta,
    })
}

/// A temporary folder for a packet file on its way to unpack.
fn spool_dir() -> Result<(tempfile::TempDir, std::path::PathBuf)> {
    let dir = tempfile::Builder::new()
        .prefix(".pillbox-restore-")
        .tempdir()
        .map_err(|e| CliError::io("create a folder in", std::env::temp_dir(), e))?;
    let file = dir.path().join("packet.tar");
    Ok((dir, file))
}

/// What unpack would have reported of a packet placed so.
fn report_of(placed: Placed, digest_checked: bool) -> UnpackReport {
    let totals = placed.read.manifest.totals;
    UnpackReport {
        schema: "pillbox.checkpoint.unpack/1",
        digest: placed.read.digest.to_string(),
        digest_checked,
        size: placed.read.size,
        members: totals.members,
        totals,
        workspace: placed.workspace.display().to_string(),
        harness: placed.harness,
        findings: placed.read.findings,
        git: placed.git,
    }
}
