//! The `pillbox.checkpoint.unpack/1` object: what was verified, where the
//! workspace and the harness state went, and what `--neutralize-git`
//! changed. Restore prints the same object under its own schema.

use serde::Serialize;

use packet_core::Findings;

use super::Placed;
use crate::report::{HarnessReport, Totals};

/// The `pillbox.checkpoint.unpack/1` object.
#[derive(Debug, Serialize)]
pub struct UnpackReport {
    /// `pillbox.checkpoint.unpack/1`.
    pub schema: &'static str,
    /// The packet's format id, which says what its digest is the SHA-256 of.
    pub format: &'static str,
    /// The packet digest.
    pub digest: String,
    /// Whether the digest was checked against `--digest` (false with `--trust-unverified`).
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
    /// restored workspace (packet-core's report).
    pub findings: Findings,
    /// What `--neutralize-git` changed (`null` without it).
    pub git: Option<GitNeutralized>,
}

impl UnpackReport {
    /// What unpack reports of a packet placed so; `digest_checked`:
    /// whether its digest was checked against one given.
    pub(crate) fn of(placed: Placed, digest_checked: bool) -> UnpackReport {
        let totals = placed.read.manifest.totals;
        UnpackReport {
            schema: "pillbox.checkpoint.unpack/1",
            format: placed.read.manifest.format.id(),
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
}

/// What `--neutralize-git` changed in the restored workspace: every byte
/// else is the packet's.
#[derive(Debug, Default, Serialize)]
pub struct GitNeutralized {
    /// Settings left out of restored git configuration files.
    pub removed: Vec<RemovedSetting>,
    /// Hooks restored without their exec bit (mode 0644), by member path.
    pub hooks_disabled: Vec<String>,
}

/// A setting left out of a restored git configuration file.
#[derive(Debug, Serialize)]
pub struct RemovedSetting {
    /// The configuration file's member path.
    pub path: String,
    /// The line it was on in the packet's file.
    pub line: u64,
    /// Its key.
    pub setting: String,
}
