//! Collecting what a packet holds before anything is hashed: the walk of
//! the workspace (without the packet being written into it), its git
//! history screened for secrets, and the harness state the adapter locates.

use std::fs;
use std::path::{Path, PathBuf};

use super::git_history::{self, ScanCache};
use super::secrets::{Found, SecretReport};
use super::{PackRequest, TEMPORARY_PREFIX};
use crate::error::{CliError, Refused, Result};
use crate::harness::{self, LocateRequest};
use crate::walk::{walk_tree, Planned, Skipped, Walk};

/// What the walk and the harness adapter found, before anything is hashed.
pub(super) struct Collected {
    pub(super) workspace: PathBuf,
    pub(super) walk: Walk,
    pub(super) harness: Option<packet_core::Harness>,
    pub(super) harness_source: Option<PathBuf>,
    /// Secrets the adapter found in what the packet's bytes hide.
    pub(super) hidden: Vec<Found>,
    /// Secrets found in git history and packed (or left out, already
    /// taken from the walk), for the report.
    pub(super) history: Vec<SecretReport>,
    /// A session log the harness printed (a temporary file), kept until the
    /// packet is written.
    pub(super) harness_scratch: Option<tempfile::TempPath>,
}

/// A packet written into the workspace being packed (`pack . -o
/// ./self.tar`) is never packed into itself: the walk drops the output
/// file (an earlier packet by that name) and any temporary file pack
/// writes beside it, and the report says so (`skipped`, rule
/// `pack-output`).
fn leave_out_the_output(workspace: &Path, output: &Path, walk: &mut Walk) {
    if output == Path::new("-") {
        return;
    }
    let (Some(parent), Some(name)) = (output.parent(), output.file_name()) else {
        return;
    };
    let parent = if parent.as_os_str().is_empty() {
        Path::new(".")
    } else {
        parent
    };
    let Ok(dir) = fs::canonicalize(parent) else {
        return;
    };
    let Ok(relative) = dir.strip_prefix(workspace) else {
        return;
    };
    let Some(relative) = relative.to_str() else {
        return;
    };
    let Some(name) = name.to_str() else { return };
    let folder = if relative.is_empty() {
        packet_core::path::WORKSPACE_ROOT.to_owned()
    } else {
        format!("{}/{relative}", packet_core::path::WORKSPACE_ROOT)
    };
    let output_member = format!("{folder}/{name}");
    let temporary = format!("{folder}/{TEMPORARY_PREFIX}");
    let mut dropped = Vec::new();
    walk.planned.retain(|p| {
        let m = p.member();
        let is_file = matches!(p, Planned::Walked { .. });
        let ours = is_file
            && (m == output_member
                || m.strip_prefix(&temporary)
                    .is_some_and(|rest| !rest.contains('/')));
        if ours {
            dropped.push(m.to_owned());
        }
        !ours
    });
    for path in dropped {
        let reason = if path == output_member {
            "the packet this pack writes (-o): never packed into itself"
        } else {
            "a temporary file of pack: never packed"
        };
        walk.skipped.push(Skipped {
            path,
            rule: "pack-output".into(),
            reason: reason.into(),
        });
    }
}

/// Walks the workspace, screens its git history (with the verdicts of
/// `scans`, if given), and locates the harness state.
pub(super) fn collect(
    request: &PackRequest,
    scans: Option<&mut ScanCache<'_>>,
) -> Result<Collected> {
    let workspace = fs::canonicalize(&request.workspace)
        .map_err(|e| CliError::io("open the workspace", &request.workspace, e))?;
    if !workspace.is_dir() {
        return Err(Refused::WorkspaceNotDirectory { workspace }.into());
    }
    let mut walk = Walk::default();
    walk_tree(
        &workspace,
        packet_core::path::WORKSPACE_ROOT,
        &request.walk,
        &mut walk,
    )?;
    leave_out_the_output(&workspace, &request.output, &mut walk);
    // Before anything is hashed: what it leaves out is left out of the walk.
    let history = git_history::screen(&workspace, &mut walk, &request.secrets, scans)?;
    let mut harness_descriptor = None;
    let mut harness_source = None;
    let mut harness_scratch = None;
    let mut hidden: Vec<Found> = Vec::new();
    if let Some(h) = &request.harness {
        harness::check_id(h.kind, &h.id)?;
        let workspace_bytes = walk.listed_bytes();
        let located = harness::adapter(h.kind).locate(&LocateRequest {
            home: &h.home,
            id: &h.id,
            workspace: &workspace,
            expect_model: h.expect_model.as_deref(),
            walk: &request.walk,
            workspace_bytes,
        })?;
        walk.planned.extend(located.planned);
        for (k, v) in located.walk.exclusions {
            *walk.exclusions.entry(k).or_default() += v;
        }
        walk.skipped.extend(located.walk.skipped);
        harness_source = located.source_path;
        harness_descriptor = Some(located.harness);
        harness_scratch = located.scratch;
        hidden = located.secrets;
    }
    Ok(Collected {
        workspace,
        walk,
        harness: harness_descriptor,
        harness_source,
        hidden,
        history,
        harness_scratch,
    })
}
