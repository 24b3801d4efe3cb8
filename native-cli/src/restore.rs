//! `pillbox checkpoint restore`: pull and unpack in one step. With a store
//! that serves chunks, the packet is rebuilt from the bases, the cache and
//! fetched chunks and streams straight into unpack, which verifies it as
//! it always does (every member, then the digest) before anything lands;
//! no packet file is written. Otherwise the packet is downloaded into a
//! temporary file first, then unpacked.

use std::time::Instant;

use packet_core::Findings;
use serde::Serialize;

use crate::error::{CliError, Result};
use crate::packet_io::PacketInput;
use crate::progress::Progress;
use crate::remote::{self, DeltaPullReport, PullSources, PullTarget, RebuiltSource, Remote};
use crate::report::{HarnessReport, Totals};
use crate::unpack::{self, GitNeutralized, UnpackRequest};

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
    let (digest, ref_name) = remote::resolve(store, target)?;
    let request = UnpackRequest {
        expected: Some(digest),
        ..request
    };
    let (unpacked, delta) = if !sources.whole && remote::takes_delta(store)? {
        let (cache, dir) = sources.open_cache()?;
        let plan = remote::plan_pull(
            store,
            &digest,
            &sources.bases,
            cache,
            dir.as_deref(),
            progress,
        )?;
        let source = RebuiltSource::new(&plan, store);
        let unpacked = match unpack::unpack(&source, &request, progress) {
            Ok(u) => u,
            // The rebuild's own error explains the read that failed.
            Err(e) => return Err(plan.take_failure().unwrap_or(e)),
        };
        (unpacked, Some(plan.into_report()?))
    } else {
        let dir = tempfile::Builder::new()
            .prefix(".pillbox-restore-")
            .tempdir()
            .map_err(|e| CliError::io("create a folder in", std::env::temp_dir(), e))?;
        let file = dir.path().join("packet.tar");
        let whole = PullSources {
            bases: Vec::new(),
            cache: remote::CacheChoice::Off,
            whole: true,
        };
        remote::pull(store, &PullTarget::Digest(digest), &file, &whole, progress)?;
        let unpacked = unpack::unpack(&PacketInput::File(file), &request, progress)?;
        (unpacked, None)
    };
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
        bytes_received: store.traffic().received() - received_before,
        retries: store.traffic().retries() - retries_before,
        seconds: started.elapsed().as_secs_f64(),
        delta,
    })
}
