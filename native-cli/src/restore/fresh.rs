//! A restore into an empty or absent folder from a /2 packet's parts
//! (docs/cli.md, "restore"): the tree is laid out in staging folders
//! inside the targets (folders, links and empty files as unpack makes
//! them), each body lands in its files as it is read or fetched and
//! checked, several requests in flight; packet-core's `Assembly` then
//! accepts the packet only once its manifest matched its name and every
//! body was proven, and only then do the staged entries move into place,
//! as unpack moves them. No packet stream is rebuilt or read.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::FileExt;
use std::path::PathBuf;

use packet_core::{git, scan_class, BodyFindings, Kind, Manifest};
use rustix::fs::{Mode, OFlags};

use crate::error::{CliError, Result};
use crate::progress::Progress;
use crate::remote::delta_pull::{DeltaPull, DeltaPullReport};
use crate::remote::land::Sink;
use crate::unpack::{
    self, Created, GitNeutralized, Member, Op, Placed, RemovedSetting, Root, Staged, Staging,
    StagingWriter, Target, UnpackRequest,
};
use crate::walk::open_beneath;

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
    let token = super::in_place::token();
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
        (Some(t), Some(h)) => super::in_place::places_of(&manifest, h.kind, &t.plan),
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

/// Per wanted body, the member paths to scan it as: one per scan class
/// among the members that have it (the same bytes of the same class hold
/// the same findings).
pub fn scans_of(manifest: &Manifest, members: &[Vec<usize>]) -> Vec<Vec<String>> {
    members
        .iter()
        .map(|ms| {
            let mut classes: Vec<u8> = Vec::new();
            let mut out = Vec::new();
            for &m in ms {
                let path = &manifest.members[m].path;
                let class = scan_class(path);
                if !classes.contains(&class) {
                    classes.push(class);
                    out.push(path.to_string());
                }
            }
            out
        })
        .collect()
}

/// Each member's body's findings, from each body's scans (`None` for a
/// member without a body).
pub fn by_member(
    manifest: &Manifest,
    members: &[Vec<usize>],
    scans: &[Vec<String>],
    found: &[Vec<BodyFindings>],
) -> Vec<Option<BodyFindings>> {
    let mut out = vec![None; manifest.members.len()];
    for (slot, ms) in members.iter().enumerate() {
        for &m in ms {
            let class = scan_class(&manifest.members[m].path);
            let k = scans[slot].iter().position(|p| scan_class(p) == class);
            out[m] = k.and_then(|k| found.get(slot)?.get(k).cloned());
        }
    }
    out
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

/// Staging folders as a sink: each body written into its files there,
/// which the layout created or which are created on the first write.
pub(super) struct Tree {
    /// The folders (a fresh restore's: the workspace's staging folder, the
    /// harness's, a scratch folder).
    pub roots: Vec<OwnedFd>,
    /// Their paths, for messages.
    pub labels: Vec<PathBuf>,
    /// Per wanted body: (root, path below it) of each file.
    pub dests: Vec<Vec<(usize, String)>>,
    /// Per root, whether its files are created on the first write.
    pub create: Vec<bool>,
}

impl Tree {
    /// Opens a file below root `root`, never through a link.
    pub fn open(&self, root: usize, relative: &str, flags: OFlags) -> Result<File> {
        let flags = if self.create[root] {
            flags | OFlags::CREATE
        } else {
            flags
        };
        open_beneath(
            self.roots[root].as_fd(),
            relative,
            flags,
            Mode::from_raw_mode(0o600),
        )
        .map(File::from)
        .map_err(|e| CliError::io("open", self.labels[root].join(relative), e.into()))
    }
}

impl Sink for Tree {
    fn write(&self, body: usize, offset: u64, bytes: &[u8]) -> Result<()> {
        for (root, relative) in &self.dests[body] {
            let f = self.open(*root, relative, OFlags::WRONLY)?;
            f.write_all_at(bytes, offset)
                .map_err(|e| CliError::io("write", self.labels[*root].join(relative), e))?;
        }
        Ok(())
    }

    fn read_back(&self, body: usize, offset: u64, buf: &mut [u8]) -> Result<()> {
        let (root, relative) = &self.dests[body][0];
        let f = self.open(*root, relative, OFlags::RDONLY)?;
        f.read_exact_at(buf, offset)
            .map_err(|e| CliError::io("read", self.labels[*root].join(relative), e))
    }
}
