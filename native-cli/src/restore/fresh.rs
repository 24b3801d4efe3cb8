//! A restore into an empty or absent folder from a /2 packet's parts
//! (docs/cli.md, "restore"): the tree is laid out in staging folders
//! inside the targets (folders, links and empty files as unpack makes
//! them), each body lands in its files as it is read or fetched and
//! checked, several requests in flight; packet-core's `Assembly` then
//! accepts the packet only once its manifest matched its name and every
//! body was proven, and only then do the staged entries move into place,
//! as unpack moves them. No packet stream is rebuilt or read.

use std::io::{Read, Seek, SeekFrom, Write};
use std::os::fd::OwnedFd;
use std::path::PathBuf;

use packet_core::{git, BodyFindings, Kind, Manifest};
use rustix::fs::OFlags;

use super::staging::{by_member, scans_of, token, Tree};
use crate::error::{CliError, Result};
use crate::progress::Progress;
use crate::remote::delta_pull::{DeltaPull, DeltaPullReport};
use crate::unpack::{
    self, Created, GitNeutralized, Member, Op, Placed, RemovedSetting, Root, Staged, Staging,
    StagingWriter, Target, UnpackRequest,
};

/// What a fresh restore did.
pub struct Fresh {
    /// The packet, verified and in place.
    pub placed: Placed,
    /// Where the bytes came from.
    pub report: DeltaPullReport,
    /// Each member's body's findings (`None`: no body).
    pub findings: Vec<Option<BodyFindings>>,
    /// Each restored harness member and where it went.
    pub harness_places: Vec<(String, PathBuf)>,
}

/// Restores the packet `pull` describes into `request.into` (absent or
/// empty), its harness state as `request` says. `staging` is told the
/// staging folders it will make in the workspace, before it makes them.
pub fn restore(
    mut pull: DeltaPull<'_>,
    bases: &[PathBuf],
    request: &UnpackRequest,
    created: &mut Created,
    staging: &mut dyn FnMut(&[PathBuf]) -> Result<()>,
    progress: &Progress,
) -> Result<Fresh> {
    created.dir_all(&request.into)?;
    let target = Target::workspace(&request.into)?;
    let workspace =
        std::fs::canonicalize(&request.into).map_err(|e| CliError::io("open", &request.into, e))?;
    let manifest = pull.manifest.clone();
    let harness = unpack::prepare_harness(&manifest, request, created, &workspace)?;
    let token = token();
    let names = [
        format!(".pillbox-restore-{token}"),
        format!(".pillbox-restore-{token}-scratch"),
    ];
    staging(
        &names
            .iter()
            .map(|n| target.path.join(n))
            .collect::<Vec<_>>(),
    )?;
    let ws_staging = Staging::create_named(&target, &names[0])?;
    let scratch = Staging::create_named(&target, &names[1])?;
    // The tree, without bodies.
    let mut writer = StagingWriter::new(
        vec![Root::new(
            packet_core::path::WORKSPACE_ROOT,
            &ws_staging,
            false,
        )?],
        request.neutralize_git,
    );
    let harness_root = match (&harness, &manifest.harness) {
        (Some(t), Some(h)) => {
            writer.apply(Op::Root(Root::new(h.kind.root(), &t.staging, true)?))?;
            Some(format!("{}/", h.kind.root()))
        }
        _ => None,
    };
    for m in &manifest.members {
        writer.apply(Op::Start(Member {
            path: m.path.to_string(),
            kind: m.kind(),
            mode: m.mode().bits(),
            size: m.size(),
            target: m.target().map(str::to_owned),
        }))?;
        writer.apply(Op::End)?;
    }
    let hooks_disabled = std::mem::take(&mut writer.neutralized.hooks_disabled);
    drop(writer);
    // Where each body goes: its members' files, else a scratch file (a
    // harness body not restored is still proven).
    let place = |path: &str| -> Option<(usize, String)> {
        if let Some(rest) = packet_core::path::Root::Workspace.below(path) {
            return Some((0, rest.to_owned()));
        }
        let root = harness_root.as_deref()?;
        path.strip_prefix(root).map(|rest| (1, rest.to_owned()))
    };
    let mut dests = Vec::with_capacity(pull.bodies.wanted.len());
    for (slot, members) in pull.bodies.members.iter().enumerate() {
        let mut list: Vec<(usize, String)> = members
            .iter()
            .filter_map(|&m| place(&manifest.members[m].path))
            .collect();
        if list.is_empty() {
            list.push((2, format!("body-{slot}")));
        }
        dests.push(list);
    }
    let dup = |fd: &OwnedFd| {
        fd.try_clone()
            .map_err(|e| CliError::io("open", &ws_staging.path, e))
    };
    let mut roots = vec![dup(&ws_staging.fd)?];
    let mut labels = vec![ws_staging.path.clone()];
    match &harness {
        Some(t) => {
            roots.push(dup(&t.staging.fd)?);
            labels.push(t.staging.path.clone());
        }
        None => {
            roots.push(dup(&scratch.fd)?);
            labels.push(scratch.path.clone());
        }
    }
    roots.push(dup(&scratch.fd)?);
    labels.push(scratch.path.clone());
    let sink = Tree {
        roots,
        labels,
        dests,
        create: vec![false, false, true],
    };
    // Bodies from the bases and the cache, the rest fetched.
    pull.add_bases(bases);
    pull.add_cache();
    let plan = pull.plan();
    let scan = scans_of(&manifest, &pull.bodies.members);
    let landed = pull.land(&plan, &sink, Some(&scan), progress)?;
    let by_member = by_member(&manifest, &pull.bodies.members, &scan, &landed.findings);
    let findings = packet_core::Findings::assemble(&manifest, |i| by_member[i].clone());
    let Some(verified) = pull.verify(&landed, &[], findings)? else {
        return Err(CliError::Bug(
            "a /1 packet reached the restore from parts".into(),
        ));
    };
    let git = match request.neutralize_git {
        true => Some(GitNeutralized {
            removed: neutralize_configs(&manifest, &sink)?,
            hooks_disabled,
        }),
        false => None,
    };
    drop(sink);
    drop(scratch);
    let report = pull.finish(&landed)?;
    let harness_places = match (&harness, &manifest.harness) {
        (Some(t), Some(h)) => t.plan.places(&manifest, h.kind),
        _ => Vec::new(),
    };
    let placed = unpack::finish_placing(
        verified,
        Staged {
            workspace: ws_staging,
            target,
            harness,
            path: workspace,
        },
        created,
        git,
    )?;
    Ok(Fresh {
        placed,
        report,
        findings: by_member,
        harness_places,
    })
}

/// Rewrites each staged repository configuration file without the
/// settings that run programs.
fn neutralize_configs(manifest: &Manifest, tree: &Tree) -> Result<Vec<RemovedSetting>> {
    let mut removed = Vec::new();
    for m in &manifest.members {
        let Some(relative) = packet_core::path::Root::Workspace.below(&m.path) else {
            continue;
        };
        if m.kind() != Kind::File || !git::is_repository_config(relative) {
            continue;
        }
        unpack::check_git_config_size(m.path.as_str(), m.size())?;
        let mut f = tree.open(0, relative, OFlags::RDWR)?;
        let shown = tree.labels[0].join(relative);
        let mut bytes = Vec::with_capacity(m.size() as usize);
        f.read_to_end(&mut bytes)
            .map_err(|e| CliError::io("read", &shown, e))?;
        let (cleaned, settings) = git::neutralize(&bytes);
        for s in settings {
            removed.push(RemovedSetting {
                path: m.path.to_string(),
                line: s.line,
                setting: s.key,
            });
        }
        f.set_len(0)
            .and_then(|()| f.seek(SeekFrom::Start(0)))
            .and_then(|_| f.write_all(&cleaned))
            .map_err(|e| CliError::io("write", &shown, e))?;
    }
    Ok(removed)
}
