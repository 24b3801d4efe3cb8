//! Where a packet's harness state goes, decided from its manifest before
//! any body is read: its destination (a folder, or the harness's program),
//! the adapter's plan, and a staging folder; for a harness restored by its
//! program, the program's check, which a restore in place makes too; and
//! the check that keeps a harness symlink inside the folder it is restored
//! as.

use std::fs;
use std::path::Path;

use packet_core::{Harness, Kind, Limits, Manifest};

use super::target::{Created, Staging, Target};
use super::UnpackRequest;
use crate::error::{CliError, Refused, Result};
use crate::harness::{self, Destination, Importer, RestorePlan};

/// Where harness members go while the packet is read, and then for good.
pub(crate) struct HarnessTarget {
    pub(crate) staging: Staging,
    pub(crate) plan: RestorePlan,
    pub(crate) to: Destination,
}

/// Where a packet's harness state goes, decided from its manifest before
/// any body is read (`None`: not restored): the home is created if
/// missing, the destinations must not exist, and a staging folder is made
/// in the home (for a harness restored by its program, which is checked
/// first, in the temporary folder).
pub(crate) fn prepare_harness(
    m: &Manifest,
    request: &UnpackRequest,
    created: &mut Created,
    workspace: &Path,
) -> Result<Option<HarnessTarget>> {
    let Some(h) = &m.harness else {
        return Ok(None);
    };
    let Some(to) = request.harness.get(h.kind) else {
        return Ok(None);
    };
    let (plan, staging) = match to {
        Destination::Dir(home) => {
            created.dir_all(home)?;
            let home = fs::canonicalize(home).map_err(|e| CliError::io("open", home, e))?;
            let plan = harness::adapter(h.kind).restore_plan(&home, h, m, workspace)?;
            plan.refuse_existing()?;
            (plan, Staging::create(&Target::harness_home(&home)?)?)
        }
        Destination::Program { program, importer } => {
            prepare_import(program, *importer, m, h, workspace)?
        }
    };
    confine_harness_symlinks(m, h.kind, &plan)?;
    Ok(Some(HarnessTarget {
        staging,
        plan,
        to: to.clone(),
    }))
}

/// For a harness restored by its program, before any body is read: the
/// program can take the session ([`Importer::check`]), the adapter's plan
/// (which says where the packet holds the session, and refuses a packet
/// that holds it elsewhere) and a staging folder for it in the temporary
/// folder. Unpack, a fresh restore and a restore in place all ask here.
pub(crate) fn prepare_import(
    program: &Path,
    importer: &dyn Importer,
    m: &Manifest,
    h: &Harness,
    workspace: &Path,
) -> Result<(RestorePlan, Staging)> {
    importer.check(program, h, workspace)?;
    let staging = Staging::create(&Target::harness_home(&std::env::temp_dir())?)?;
    let plan = harness::adapter(h.kind).restore_plan(&staging.path, h, m, workspace)?;
    Ok((plan, staging))
}

/// Refuses a harness symlink that would point out of the folder it is
/// restored as: packet-core keeps every link inside `harness/`, but
/// `harness/` is not one folder on the host; a session's folder moves on
/// its own into the harness home, where `..` leads to other sessions.
pub(crate) fn confine_harness_symlinks(
    manifest: &Manifest,
    kind: packet_core::HarnessKind,
    plan: &RestorePlan,
) -> Result<()> {
    for m in manifest
        .members
        .iter()
        .filter(|m| m.kind() == Kind::Symlink)
    {
        let Some(relative) = kind.relative_path(&m.path) else {
            continue;
        };
        let Some(moved) = plan.moves.iter().find(|mv| mv.covers(relative).is_some()) else {
            // Not restored at all.
            continue;
        };
        let folder = kind.member_path(&moved.relative);
        let inside = |p: &str| {
            p == folder
                || p.strip_prefix(folder.as_str())
                    .is_some_and(|rest| rest.starts_with('/'))
        };
        let target = m.target().unwrap_or("");
        let resolved = packet_core::path::resolve_symlink_target(
            &m.path,
            target,
            Limits::FORMAT.max_path_bytes,
        )?;
        if !inside(&resolved.resolved) || !resolved.through.iter().all(|t| inside(t)) {
            return Err(Refused::HarnessSymlinkEscapes {
                member: m.path.to_string(),
                target: target.to_owned(),
            }
            .into());
        }
    }
    Ok(())
}
