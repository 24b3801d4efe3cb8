//! `pillbox checkpoint save`: pack and push in one step, leaving no packet
//! file behind (unless `-o`). The manifest and digest are computed as
//! `pack -o -` computes them; the delta push then reads only the bodies
//! the store lacks, from the workspace itself, each checked against the
//! sha256 it was packed with (a file that changed meanwhile is refused:
//! "the workspace changed while saving: save again").

use std::path::PathBuf;

use serde::Serialize;

use crate::error::{CliError, Result};
use crate::pack::{self, PackRequest};
use crate::progress::Progress;
use crate::remote::{self, PushDeltaReport, PushRequest, Remote, Verified};
use crate::report::{ExclusionReport, HarnessReport, Totals};
use crate::walk::Skipped;

/// The `pillbox.checkpoint.save/1` object: what `pack` and `push` print,
/// in one.
#[derive(Debug, Serialize)]
pub struct SaveReport {
    /// `pillbox.checkpoint.save/1`.
    pub schema: &'static str,
    /// The packet digest.
    pub digest: String,
    /// Its size.
    pub size: u64,
    /// Members after `packet.json`.
    pub members: u64,
    /// Manifest totals.
    pub totals: Totals,
    /// The packet file written with `-o`, else `null`.
    pub output: Option<String>,
    /// The workspace saved.
    pub workspace: String,
    /// Harness state carried.
    pub harness: Option<HarnessReport>,
    /// Exclusion rules that applied.
    pub exclusions: Vec<ExclusionReport>,
    /// What was left out.
    pub skipped: Vec<Skipped>,
    /// Secrets found by content and left out or packed, as `pack`
    /// reports them.
    pub secrets: Vec<crate::pack::secrets::SecretReport>,
    /// The store's base URL.
    pub remote: String,
    /// True when this run stored the packet.
    pub uploaded: bool,
    /// `delta`, `single`, `multipart` or `none`.
    pub mode: &'static str,
    /// Multipart only.
    pub parts: Option<remote::PartsReport>,
    /// True when an interrupted push was continued.
    pub resumed: bool,
    /// Bytes of the request bodies that carried the packet.
    pub bytes_sent: u64,
    /// Requests sent again after a transient failure.
    pub retries: u32,
    /// Wall time of the upload, in seconds.
    pub upload_seconds: f64,
    /// The ref moved.
    #[serde(rename = "ref")]
    pub ref_moved: Option<remote::RefReport>,
    /// Delta push only: what was reused and what was sent.
    pub delta: Option<PushDeltaReport>,
}

/// `save`: packs `pack_request` (into `output` when given, else nowhere)
/// and pushes it.
pub fn save(
    store: &Remote,
    pack_request: PackRequest,
    output: Option<PathBuf>,
    push_request: PushRequest,
    progress: &Progress,
) -> Result<SaveReport> {
    let (pack_report, pushed) = match output {
        Some(file) => {
            let request = PackRequest {
                output: file.clone(),
                ..pack_request
            };
            let packed = pack::pack(&request, progress)?;
            let push = PushRequest {
                packet: file,
                ..push_request
            };
            let pushed = remote::push(store, &push, progress)?;
            (packed, pushed)
        }
        None if push_request.whole || !remote::takes_delta(store)? => {
            // The whole packet goes up: it needs a file, removed after.
            let dir = tempfile::Builder::new()
                .prefix(".pillbox-save-")
                .tempdir()
                .map_err(|e| CliError::io("create a folder in", std::env::temp_dir(), e))?;
            let file = dir.path().join("packet.tar");
            let request = PackRequest {
                output: file.clone(),
                ..pack_request
            };
            let mut packed = pack::pack(&request, progress)?;
            packed.output = "-".to_owned();
            let push = PushRequest {
                packet: file,
                ..push_request
            };
            let pushed = remote::push(store, &push, progress)?;
            (packed, pushed)
        }
        None => {
            let packed = pack::pack_in_memory(&pack_request, progress)?;
            let packet = Verified {
                manifest: &packed.manifest,
                json: None,
                digest: packed.digest,
                size: packed.manifest.packet_size(),
                file: None,
                bodies: &packed.bodies,
                cuts: None,
                known: None,
            };
            let pushed = remote::push_verified(store, &push_request, &packet, progress)?;
            (packed.report, pushed)
        }
    };
    Ok(SaveReport {
        schema: "pillbox.checkpoint.save/1",
        digest: pack_report.digest,
        size: pack_report.size,
        members: pack_report.members,
        totals: pack_report.totals,
        output: (pack_report.output != "-").then_some(pack_report.output),
        workspace: pack_report.workspace,
        harness: pack_report.harness,
        exclusions: pack_report.exclusions,
        skipped: pack_report.skipped,
        secrets: pack_report.secrets,
        remote: pushed.remote,
        uploaded: pushed.uploaded,
        mode: pushed.mode,
        parts: pushed.parts,
        resumed: pushed.resumed,
        bytes_sent: pushed.bytes_sent,
        retries: pushed.retries,
        upload_seconds: pushed.upload_seconds,
        ref_moved: pushed.ref_moved,
        delta: pushed.delta,
    })
}
