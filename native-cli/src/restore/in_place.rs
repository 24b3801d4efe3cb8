//! A restore over the checkpoint a folder holds (docs/cli.md, "restore in
//! place"): the workspace record says which one; the folder is compared
//! with it before anything is fetched (`scan`), and a local change stops
//! the restore unless `--discard-local`. Then only what differs is fetched
//! and staged in a folder inside the target (bodies the workspace holds
//! are read from it, each checked), packet-core's `Assembly` accepts the
//! whole, and only then are members written (each staged, then renamed
//! over its path below the target's descriptor), removed, or left as they
//! are. The journal (`journal`) lets a restore that was killed be run
//! again and finish.

use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};

use packet_core::path::Root;
use packet_core::secrets::Scanner;
use packet_core::{
    git, scan_class, Body, BodyFindings, BodyScanner, Entry, Harness, Kind, Limits, Manifest,
    VerifiedPacket,
};
use rustix::fs::{
    fchmod, fstat, mkdirat, renameat, symlinkat, unlinkat, AtFlags, FileType, Mode, OFlags,
};

use super::journal::{Journal, Toward};
use super::recording::{self, Checkpoint, Recorder, Stats};
use super::scan::{self, Expected, HarnessPlace, Known, Scan};
use super::staging::{by_member, scans_of, token, Tree};
use crate::change::{Change, ChangeKind};
use crate::chunking::{self, BODIES};
use crate::error::{CliError, Refused, Result};
use crate::harness::{self, Destinations, Diverged, Importer, PendingImport, RestorePlan};
use crate::progress::Progress;
use crate::record::Record;
use crate::remote::delta_pull::{DeltaPull, DeltaPullReport, SourceKind};
use crate::remote::land::Source;
use crate::remote::parts::KnownBase;
use crate::remote::pull_plan::{At, Cut, Earlier};
use crate::remote::{self, PullSources, PullTarget, Remote};
use crate::report::HarnessReport;
use crate::unpack::{
    self, Created, GitNeutralized, RemovedSetting, Staging, Target, UnpackRequest, DIR_MODE,
    PRIVATE_DIR_MODE, PRIVATE_FILE_MODE,
};
use crate::walk::open_beneath;

/// A folder that holds a recorded checkpoint (or what an interrupted
/// restore left), held under its record's lock.
pub struct Holding {
    /// The record's lock and journal.
    pub recorder: Recorder,
    /// The folder, open.
    pub target: Target,
    /// The record (none: an interrupted fresh restore's journal only).
    pub record: Option<Record>,
    /// The journal an interrupted restore left (empty if none).
    pub journal: Journal,
}

/// What the restore did.
pub struct Done {
    /// The packet, verified.
    pub read: VerifiedPacket,
    /// The workspace's real path.
    pub workspace: PathBuf,
    /// The harness state and where it went.
    pub harness: Option<HarnessReport>,
    /// What `--neutralize-git` changed.
    pub git: Option<GitNeutralized>,
    /// Members written, removed, left.
    pub written: u64,
    /// Members removed.
    pub removed: u64,
    /// Members left as they were.
    pub unchanged: u64,
    /// Where the bytes came from.
    pub delta: DeltaPullReport,
    /// The ref it came from.
    pub ref_name: Option<String>,
}

/// How many changed paths a refusal lists.
pub const LISTED_CHANGES: usize = 100;

/// Restores `target` over the checkpoint `holding` holds.
#[allow(clippy::too_many_arguments)]
pub fn restore(
    holding: Holding,
    store: &Remote,
    target: &PullTarget,
    sources: &PullSources,
    request: &UnpackRequest,
    discard_local: bool,
    started: i64,
    created: &mut Created,
    progress: &Progress,
) -> Result<Done> {
    let Holding {
        recorder,
        target: folder,
        record,
        mut journal,
    } = holding;
    let workspace = recorder.workspace.clone();
    let old = match &record {
        Some(r) => Some(Manifest::parse(&r.json, &Limits::FORMAT).map_err(CliError::Packet)?),
        None => None,
    };
    let pending: Vec<Manifest> = journal
        .toward
        .iter()
        .filter_map(|t| Manifest::parse(&t.json, &Limits::FORMAT).ok())
        .collect();
    // What an interrupted restore staged is its own: gone before anything
    // is compared.
    for dir in std::mem::take(&mut journal.staging) {
        remove_staging(&dir);
    }
    let expected = Expected {
        old: old.as_ref(),
        pending: pending.iter().collect(),
        record: record.as_ref(),
    };
    // The folder, before anything is fetched.
    let mut scan =
        scan::scan_workspace(folder.fd.as_fd(), &folder.path, &expected, &HashSet::new())?;
    let homes = Homes::of(request, record.as_ref());
    let mut places: Vec<(String, PathBuf)> = Vec::new();
    if let Some(m) = &old {
        places.extend(harness_places(m, homes.recorded_for(m), &workspace)?);
    }
    for m in &pending {
        places.extend(harness_places(m, homes.given_for(m), &workspace)?);
    }
    places.sort();
    places.dedup();
    let harness_list: Vec<HarnessPlace<'_>> = places
        .iter()
        .map(|(m, d)| HarnessPlace {
            member: m,
            destination: d.clone(),
        })
        .collect();
    scan::scan_harness(&harness_list, &expected, &mut scan)?;
    refuse_changes(&folder.path, &scan.changes, discard_local)?;

    // The checkpoint to restore, described by the store; what the record
    // holds is not fetched again.
    let (digest, ref_name) = remote::resolve(store, target)?;
    let recipes: HashMap<Body, Vec<pillbox_wire::recipes::ChunkName>> = record
        .as_ref()
        .map(|r| {
            r.recipes
                .iter()
                .map(|b| (b.body, b.chunks.clone()))
                .collect()
        })
        .unwrap_or_default();
    let base = record.as_ref().map(|r| KnownBase {
        digest: Some(r.digest),
        json: &r.json,
        recipes: &recipes,
    });
    let cache = sources.open_cache()?;
    let mut pull = DeltaPull::describe(store, digest, base.as_ref(), cache)?;
    if !pull.is_assembled() {
        return Err(Refused::InPlaceNeedsFormat2 {
            target: folder.path.clone(),
        }
        .into());
    }
    let new = pull.manifest.clone();
    let json = pull.parts.json.clone();
    let new_recipes = pull.parts.recipes.clone();

    // Where the new checkpoint's harness state goes, and what is there.
    let harness_home = homes.given_for(&new).map(Path::to_path_buf);
    let mut harness_plan: Option<RestorePlan> = None;
    let mut new_places: Vec<(String, PathBuf)> = Vec::new();
    if let (Some(h), Some(home)) = (&new.harness, &harness_home) {
        created.dir_all(home)?;
        let home = std::fs::canonicalize(home).map_err(|e| CliError::io("open", home, e))?;
        let plan = harness::adapter(h.kind).restore_plan(&home, h, &new, &workspace)?;
        unpack::confine_harness_symlinks(&new, h.kind, &plan)?;
        new_places = plan.places(&new, h.kind);
        harness_plan = Some(plan);
    }
    // A session handed to its harness's program: the program and where the
    // checkpoint holds the session are checked as unpack checks them,
    // before any body is fetched.
    let staged_import = match &new.harness {
        Some(h) => match request.harness.program(h.kind) {
            Some(program) => StagedImport::prepare(program, h, &new, &workspace)?,
            None => None,
        },
        None => None,
    };
    let unscanned: Vec<HarnessPlace<'_>> = new_places
        .iter()
        .filter(|(m, _)| !scan.found.contains_key(m.as_str()))
        .map(|(m, d)| HarnessPlace {
            member: m,
            destination: d.clone(),
        })
        .collect();
    let new_only = Expected {
        old: None,
        pending: vec![&new],
        record: None,
    };
    scan::scan_harness(&unscanned, &new_only, &mut scan)?;
    let harness_dest: HashMap<&str, &Path> = new_places
        .iter()
        .map(|(m, d)| (m.as_str(), d.as_path()))
        .collect();

    // What changes.
    let actions = Actions::of(&new, &scan, &harness_dest, &folder.path, discard_local);
    refuse_changes(&folder.path, &actions.conflicts, discard_local)?;
    let stored: Vec<Body> = actions.kept_bodies.iter().copied().collect();
    pull.bodies.keep_only(|b| actions.wanted.contains(b));

    // What the folder holds already, for the bodies that change.
    add_workspace_sources(
        &mut pull,
        &scan,
        &folder,
        &recipes,
        &harness_dest_by(&places),
    )?;
    pull.add_bases(&sources.bases);
    pull.add_cache();
    let plan = pull.plan();

    // Staging folders (named in the journal first), then the bodies.
    let token = token();
    let ws_name = format!(".pillbox-restore-{token}");
    let harness_staging_home = harness_plan
        .as_ref()
        .and(harness_home.as_ref())
        .map(|h| std::fs::canonicalize(h).unwrap_or_else(|_| h.clone()));
    journal.staging = vec![folder.path.join(&ws_name)];
    if let Some(h) = &harness_staging_home {
        journal.staging.push(h.join(&ws_name));
    }
    recorder.write_journal(&journal)?;
    let ws_staging = Staging::create_named(&folder, &ws_name)?;
    let harness_staging = match &harness_staging_home {
        Some(h) => Some(Staging::create_named(&Target::harness_home(h)?, &ws_name)?),
        None => None,
    };
    let sink = staged_sink(
        &pull,
        &new,
        &ws_staging,
        harness_staging.as_ref(),
        staged_import.as_ref(),
        &harness_dest,
    )?;
    let scan_spec = scans_of(&new, &pull.bodies.members);
    let landed = pull.land(&plan, &sink, Some(&scan_spec), progress)?;

    // The findings: the landed bodies', and the kept ones' as the record
    // or their bytes say.
    let scanner = Scanner::new();
    let mut by_member = by_member(&new, &pull.bodies.members, &scan_spec, &landed.findings);
    // Findings recorded under other rules are screened again.
    let screened = record.as_ref().filter(|r| r.same_rules());
    let recorded_places = harness_dest_by(&places);
    for (i, m) in new.members.iter().enumerate() {
        let Some(body) = m.body() else { continue };
        if by_member[i].is_some() || !actions.kept_bodies.contains(&body) {
            continue;
        }
        by_member[i] = Some(kept_findings(
            screened,
            &scanner,
            m,
            &folder,
            &recorded_places,
        )?);
    }
    let findings = packet_core::Findings::assemble(&new, |i| by_member[i].clone());
    let Some(verified) = pull.verify(&landed, &stored, findings)? else {
        return Err(CliError::Bug(
            "a /1 packet reached the in-place restore".into(),
        ));
    };

    // A session to import: imported unless this machine holds it already;
    // a copy of it that went its own way is replaced only with
    // --discard-local.
    let import = match &staged_import {
        Some(staged) => {
            let file = staged.staging.path.join(&staged.name);
            let diverged = if discard_local {
                Diverged::Replaced
            } else {
                Diverged::Refused
            };
            Some(PendingImport::prepare(
                staged.program,
                staged.harness,
                file,
                &workspace,
                diverged,
            )?)
        }
        None => None,
    };

    // Everything verified: the journal names the destination, then the
    // folder changes.
    journal.toward.push(Toward {
        digest,
        json: json.clone(),
    });
    recorder.write_journal(&journal)?;
    let umask = current_umask();
    let mut applier = Applier {
        folder: &folder,
        staging: &ws_staging,
        harness_staging: harness_staging.as_ref(),
        umask,
        neutralize: request.neutralize_git,
        neutralized: GitNeutralized::default(),
        slots: slot_uses(&pull, &new, &actions),
        written_ids: HashMap::new(),
        harness_dest: harness_dest_by(&new_places),
        created,
    };
    applier.apply(&new, &actions, &pull)?;
    if let Some(import) = &import {
        import.run(&workspace)?;
    }

    // The next record: every restored file as it is now.
    let mut files = Vec::new();
    let mut stats = Stats::new(folder.fd.as_fd());
    for (i, m) in new.members.iter().enumerate() {
        let Entry::File { sha256, .. } = m.entry else {
            continue;
        };
        let identity = match applier.written_ids.get(&i) {
            Some(id) => Some(*id),
            None => match scan.known.get(m.path.as_str()) {
                Some(Known {
                    identity: Some(id), ..
                }) if !actions.chmods.contains(&i) => Some(*id),
                _ => match (
                    Root::Workspace.below(&m.path),
                    harness_dest.get(m.path.as_str()),
                ) {
                    (Some(rel), _) => stats.identity(rel),
                    (None, Some(dest)) => recording::identity_at(dest),
                    (None, None) => None,
                },
            },
        };
        if let Some(identity) = identity {
            files.push(recording::entry(
                &m.path,
                identity,
                sha256,
                by_member[i].as_ref(),
            ));
        }
    }
    let harness_homes = match (&new.harness, &harness_home) {
        (Some(h), Some(home)) => vec![(h.kind.as_str().to_owned(), home.clone())],
        _ => Vec::new(),
    };
    let next = recording::record_of(
        &recorder,
        Checkpoint {
            store: store.base(),
            ref_name: ref_name.as_deref(),
            digest,
            json: &json,
            manifest: &new,
            recipes: &new_recipes,
            harness_homes,
            started,
            verdicts: record
                .as_ref()
                .map(|r| r.verdicts.clone())
                .unwrap_or_default(),
        },
        files,
    );
    // The checkpoint is in place: a record that cannot be written only
    // makes the next restore compare every file's bytes.
    if recorder.finish(&next).is_err() {
        recorder.abandon();
    }
    let git = request
        .neutralize_git
        .then(|| std::mem::take(&mut applier.neutralized));
    let written = applier_written(&actions);
    // Every member not written is as it was (the roots, and harness state
    // not restored here, among them).
    let (written, removed, unchanged) = (
        written,
        actions.removed(),
        new.members.len() as u64 - written,
    );
    drop(applier);
    drop(sink);
    drop(ws_staging);
    drop(harness_staging);
    let delta = pull.finish(&landed)?;
    let harness = new.harness.as_ref().map(|h| {
        let mut r = HarnessReport::of(h);
        let restored = harness_plan.is_some() || import.is_some();
        r.restored = Some(restored);
        r.rollout_path = Some(
            harness_plan
                .as_ref()
                .and_then(|p| p.rollout_path.as_ref())
                .map(|p| p.display().to_string()),
        );
        if let Some(import) = &import {
            import.report(&mut r);
        }
        r
    });
    Ok(Done {
        read: verified,
        workspace,
        harness,
        git,
        written,
        removed,
        unchanged,
        delta,
        ref_name,
    })
}

fn applier_written(a: &Actions) -> u64 {
    (a.mkdirs.len() + a.links.len() + a.files.len() + a.chmods.len()) as u64
}

/// Refuses local changes unless they are to be discarded.
fn refuse_changes(target: &Path, changes: &[Change], discard: bool) -> Result<()> {
    if changes.is_empty() || discard {
        return Ok(());
    }
    Err(Refused::LocalChanges {
        target: target.to_path_buf(),
        count: changes.len() as u64,
        listed: changes.iter().take(LISTED_CHANGES).cloned().collect(),
    }
    .into())
}

/// Removes a staging folder an interrupted restore left (only a folder
/// of the names restores give them).
fn remove_staging(dir: &Path) {
    let ours = dir
        .file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n.starts_with(".pillbox-"));
    let is_dir = std::fs::symlink_metadata(dir).is_ok_and(|m| m.is_dir());
    if ours && is_dir {
        let _ = std::fs::remove_dir_all(dir);
    }
}

/// The process's file creation mask.
fn current_umask() -> u32 {
    let umask = rustix::process::umask(Mode::empty());
    rustix::process::umask(umask);
    umask.bits()
}

/// The harness homes of the recorded checkpoint and of the restore.
struct Homes {
    given: Destinations,
    recorded: Vec<(String, PathBuf)>,
}

impl Homes {
    fn of(request: &UnpackRequest, record: Option<&Record>) -> Homes {
        Homes {
            given: request.harness.clone(),
            recorded: record.map(|r| r.harness_homes.clone()).unwrap_or_default(),
        }
    }

    /// Where the recorded checkpoint's harness state is on this machine.
    fn recorded_for(&self, m: &Manifest) -> Option<&Path> {
        let kind = m.harness.as_ref()?.kind;
        self.recorded
            .iter()
            .find(|(k, _)| k == kind.as_str())
            .map(|(_, h)| h.as_path())
    }

    /// Where this restore puts a checkpoint's harness state, for a
    /// harness restored as files.
    fn given_for(&self, m: &Manifest) -> Option<&Path> {
        self.given.dir(m.harness.as_ref()?.kind)
    }
}

/// Each harness member of `m` restored under `home`, and its path.
fn harness_places(
    m: &Manifest,
    home: Option<&Path>,
    workspace: &Path,
) -> Result<Vec<(String, PathBuf)>> {
    let (Some(h), Some(home)) = (&m.harness, home) else {
        return Ok(Vec::new());
    };
    let home = std::fs::canonicalize(home).unwrap_or_else(|_| home.to_path_buf());
    let plan = match harness::adapter(h.kind).restore_plan(&home, h, m, workspace) {
        Ok(p) => p,
        // A recorded checkpoint whose harness state cannot be placed was
        // not restored here.
        Err(_) => return Ok(Vec::new()),
    };
    Ok(plan.places(m, h.kind))
}

fn harness_dest_by(places: &[(String, PathBuf)]) -> HashMap<String, PathBuf> {
    places.iter().cloned().collect()
}

/// What the restore does to the folder, member by member.
#[derive(Default)]
struct Actions {
    /// Files whose exec bit alone changes.
    chmods: Vec<usize>,
    /// Workspace paths (relative) of files and links to remove first.
    remove: Vec<String>,
    /// Workspace folders (relative) to remove, deepest first.
    rmdirs: Vec<String>,
    /// Folders left out of packets that are in the way, removed whole
    /// (`--discard-local`).
    purge: Vec<String>,
    /// Folders to create, in packet order.
    mkdirs: Vec<usize>,
    /// Links to write.
    links: Vec<usize>,
    /// Files to write.
    files: Vec<usize>,
    /// Bodies to land.
    wanted: HashSet<Body>,
    /// Bodies the folder holds for the members left.
    kept_bodies: HashSet<Body>,
    /// Entries in the way that the checkpoint's rules leave out of packets.
    conflicts: Vec<Change>,
    /// Workspace members the restore removes.
    removed_members: u64,
}

impl Actions {
    fn of(
        new: &Manifest,
        scan: &Scan,
        harness_dest: &HashMap<&str, &Path>,
        shown: &Path,
        discard: bool,
    ) -> Actions {
        let kept: HashSet<&str> = scan.kept.iter().map(String::as_str).collect();
        let mut a = Actions::default();
        let mut new_paths: HashSet<&str> = HashSet::new();
        for (i, m) in new.members.iter().enumerate() {
            let in_workspace = Root::Workspace.below(&m.path);
            if in_workspace.is_none() && !harness_dest.contains_key(m.path.as_str()) {
                // Not restored (harness state without its home): proven,
                // not written.
                if let Some(b) = m.body() {
                    a.wanted.insert(b);
                }
                continue;
            }
            new_paths.insert(&m.path);
            let known = scan.known.get(m.path.as_str());
            if let Some(k) = known {
                if k.entry == m.entry {
                    if let Some(b) = m.body() {
                        a.kept_bodies.insert(b);
                    }
                    continue;
                }
                if let (
                    Entry::File {
                        size: s1,
                        sha256: d1,
                        ..
                    },
                    Entry::File {
                        size: s2,
                        sha256: d2,
                        ..
                    },
                ) = (&k.entry, &m.entry)
                {
                    if s1 == s2 && d1 == d2 && in_workspace.is_some() {
                        a.chmods.push(i);
                        if let Some(b) = m.body() {
                            a.kept_bodies.insert(b);
                        }
                        continue;
                    }
                }
            }
            if let Some(rel) = in_workspace {
                if let Some(found) = scan.found.get(m.path.as_str()) {
                    if known.is_none() && kept.contains(m.path.as_str()) && !discard {
                        a.conflicts.push(Change {
                            path: shown.join(rel).display().to_string(),
                            change: ChangeKind::Added,
                        });
                    }
                    let is_dir = found.kind == FileType::Directory;
                    if is_dir && m.kind() != Kind::Dir {
                        // Everything below goes too: the new checkpoint has
                        // nothing there.
                        // Entries the rules leave out of packets are in
                        // the way: a conflict, or with --discard-local
                        // removed like the rest.
                        for k in &scan.kept {
                            let below = k.len() > m.path.len()
                                && k.starts_with(m.path.as_str())
                                && k.as_bytes()[m.path.len()] == b'/';
                            if !below {
                                continue;
                            }
                            let Some(krel) = Root::Workspace.below(k) else {
                                continue;
                            };
                            if !discard {
                                a.conflicts.push(Change {
                                    path: shown.join(krel).display().to_string(),
                                    change: ChangeKind::Added,
                                });
                            } else if scan
                                .found
                                .get(k)
                                .is_some_and(|f| f.kind == FileType::Directory)
                            {
                                a.purge.push(krel.to_owned());
                            } else {
                                a.remove.push(krel.to_owned());
                            }
                        }
                        a.rmdirs.push(rel.to_owned());
                    } else if !is_dir && m.kind() == Kind::Dir {
                        a.remove.push(rel.to_owned());
                    }
                }
            }
            match &m.entry {
                Entry::Dir => a.mkdirs.push(i),
                Entry::Symlink { .. } => a.links.push(i),
                Entry::File { .. } => {
                    a.files.push(i);
                    if let Some(b) = m.body() {
                        a.wanted.insert(b);
                    }
                }
            }
        }
        // What the folder has that the new checkpoint does not.
        let mut gone_dirs: Vec<String> = Vec::new();
        for (member, found) in &scan.found {
            let Some(rel) = Root::Workspace.below(member) else {
                continue;
            };
            if new_paths.contains(member.as_str()) || kept.contains(member.as_str()) {
                continue;
            }
            // Only the checkpoint's own members, or local changes being
            // discarded (anything else refused the restore already).
            if !scan.known.contains_key(member) && !discard {
                continue;
            }
            if scan.known.contains_key(member) {
                a.removed_members += 1;
            }
            if found.kind == FileType::Directory {
                gone_dirs.push(rel.to_owned());
            } else {
                a.remove.push(rel.to_owned());
            }
        }
        a.rmdirs.extend(gone_dirs);
        // Deepest first.
        a.rmdirs.sort_by(|x, y| {
            y.matches('/')
                .count()
                .cmp(&x.matches('/').count())
                .then(y.cmp(x))
        });
        a.rmdirs.dedup();
        a.remove.sort();
        a.remove.dedup();
        // A body the folder keeps need not land, unless a written file
        // needs it too (it is then read from the kept file).
        a
    }

    fn removed(&self) -> u64 {
        self.removed_members
    }
}

/// How many written members use each landed body, by root: the last one
/// takes the staged file itself, the others a copy.
fn slot_uses(pull: &DeltaPull<'_>, new: &Manifest, a: &Actions) -> HashMap<usize, usize> {
    let mut slot_of: HashMap<Body, usize> = HashMap::new();
    for (s, w) in pull.bodies.wanted.iter().enumerate() {
        slot_of.insert(w.body, s);
    }
    let mut uses = HashMap::new();
    for &i in &a.files {
        if let Some(b) = new.members[i].body() {
            if let Some(&s) = slot_of.get(&b) {
                *uses.entry(s).or_insert(0) += 1;
            }
        }
    }
    uses
}

/// Sources for the bodies that change: a file the folder holds with the
/// same bytes (a file that moved), and the earlier version at the same
/// path of a large body (with its chunks, as the record knew them or as
/// they cut).
fn add_workspace_sources(
    pull: &mut DeltaPull<'_>,
    scan: &Scan,
    folder: &Target,
    recipes: &HashMap<Body, Vec<pillbox_wire::recipes::ChunkName>>,
    harness_dest: &HashMap<String, PathBuf>,
) -> Result<()> {
    let mut by_body: HashMap<Body, &str> = HashMap::new();
    for (member, k) in &scan.known {
        if let Entry::File { size, sha256, .. } = k.entry {
            if size > 0 {
                by_body
                    .entry(Body { sha256, size })
                    .or_insert(member.as_str());
            }
        }
    }
    let open = |member: &str| -> Option<File> {
        match Root::Workspace.below(member) {
            Some(rel) => open_beneath(
                folder.fd.as_fd(),
                rel,
                OFlags::RDONLY | OFlags::NONBLOCK | OFlags::NOCTTY,
                Mode::empty(),
            )
            .ok()
            .map(File::from),
            None => {
                let dest = harness_dest.get(member)?;
                rustix::fs::open(
                    dest,
                    OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC,
                    Mode::empty(),
                )
                .ok()
                .map(File::from)
            }
        }
    };
    let wanted: Vec<(usize, Body)> = pull
        .bodies
        .wanted
        .iter()
        .enumerate()
        .map(|(s, w)| (s, w.body))
        .collect();
    for (slot, body) in wanted {
        if let Some(member) = by_body.get(&body) {
            if let Some(f) = open(member) {
                let source = pull.local.add(Source::File(f), SourceKind::Workspace);
                pull.local
                    .held
                    .bodies
                    .insert(body, At { source, offset: 0 });
                continue;
            }
        }
        if BODIES.is_one_chunk(body.size) {
            continue;
        }
        // The earlier version at one of its paths.
        let members = pull.bodies.members[slot].clone();
        for i in members {
            let path = &pull.manifest.members[i].path;
            let Some(Known {
                entry: Entry::File { size, sha256, .. },
                ..
            }) = scan.known.get(path.as_str())
            else {
                continue;
            };
            let old = Body {
                sha256: *sha256,
                size: *size,
            };
            let Some(f) = open(path) else { continue };
            let cut_file = f.try_clone().ok();
            let source = pull.local.add(Source::File(f), SourceKind::Workspace);
            let at = At { source, offset: 0 };
            match recipes.get(&old) {
                Some(chunks) => {
                    let mut offset = 0;
                    for c in chunks {
                        pull.local.held.chunks.entry(*c).or_insert(at.plus(offset));
                        offset += u64::from(c.size);
                    }
                }
                None => {
                    if let Some(f) = cut_file {
                        let shown = PathBuf::from(path.as_str());
                        if let Ok(cut) = chunking::cut(&f, &BODIES, &shown, |_, _| Ok(())) {
                            for p in cut.pieces {
                                pull.local
                                    .held
                                    .chunks
                                    .entry(p.name())
                                    .or_insert(at.plus(p.offset));
                            }
                        }
                    }
                }
            }
            if let Cut::Chunks(_) = pull.bodies.wanted[slot].cut {
                pull.bodies.wanted[slot].earlier = Some(Earlier { at, len: old.size });
            }
            break;
        }
    }
    Ok(())
}

/// A session staged to be imported by its harness's program: the member,
/// and the file in `staging` it is staged as.
struct StagedImport<'a> {
    program: (&'a Path, &'static dyn Importer),
    harness: &'a Harness,
    staging: Staging,
    member: String,
    name: String,
}

impl<'a> StagedImport<'a> {
    /// The program's check and the adapter's plan, as unpack makes them
    /// ([`unpack::prepare_import`]); `None` when the plan imports nothing.
    fn prepare(
        program: (&'a Path, &'static dyn Importer),
        harness: &'a Harness,
        new: &Manifest,
        workspace: &Path,
    ) -> Result<Option<StagedImport<'a>>> {
        let (plan, staging) =
            unpack::prepare_import(program.0, program.1, new, harness, workspace)?;
        Ok(plan.import.map(|name| StagedImport {
            program,
            harness,
            staging,
            member: harness.session_log.clone(),
            name,
        }))
    }
}

/// Where each landed body is staged: in the workspace's staging folder
/// if a workspace member has it, in the harness home's if a harness
/// member does (and for a session to import, the file it is imported
/// from).
fn staged_sink(
    pull: &DeltaPull<'_>,
    new: &Manifest,
    ws: &Staging,
    harness: Option<&Staging>,
    import: Option<&StagedImport>,
    harness_dest: &HashMap<&str, &Path>,
) -> Result<Tree> {
    let dup = |s: &Staging| -> Result<OwnedFd> {
        s.fd.try_clone()
            .map_err(|e| CliError::io("open", &s.path, e))
    };
    let mut roots = vec![dup(ws)?];
    let mut labels = vec![ws.path.clone()];
    for s in [harness, import.map(|i| &i.staging)] {
        match s {
            Some(s) => {
                roots.push(dup(s)?);
                labels.push(s.path.clone());
            }
            None => {
                roots.push(dup(ws)?);
                labels.push(ws.path.clone());
            }
        }
    }
    let mut dests = Vec::new();
    for (slot, members) in pull.bodies.members.iter().enumerate() {
        let name = format!("b{slot}");
        let mut list = Vec::new();
        let in_ws = members
            .iter()
            .any(|&i| Root::Workspace.below(&new.members[i].path).is_some());
        let in_harness = members
            .iter()
            .any(|&i| harness_dest.contains_key(new.members[i].path.as_str()));
        if in_ws || (!in_harness && import.is_none()) {
            list.push((0, name.clone()));
        }
        if in_harness && harness.is_some() {
            list.push((1, name.clone()));
        }
        if let Some(i) = import {
            if members.iter().any(|&m| new.members[m].path == i.member) {
                list.push((2, i.name.clone()));
            }
        }
        if list.is_empty() {
            list.push((0, name));
        }
        dests.push(list);
    }
    Ok(Tree {
        roots,
        labels,
        dests,
        create: vec![true, true, true],
    })
}

/// The findings of a body the folder keeps: the record's (same bytes;
/// `screened` is the record when it was screened under these rules) or
/// its bytes', scanned now.
fn kept_findings(
    screened: Option<&Record>,
    scanner: &Scanner,
    m: &packet_core::Member,
    folder: &Target,
    harness_dest: &HashMap<String, PathBuf>,
) -> Result<BodyFindings> {
    let sha = m.sha256();
    if let Some(r) = screened {
        if let Some(e) = r.file(&m.path).filter(|e| Some(e.sha256) == sha) {
            if let (Some(list), 0) = (&e.findings, scan_class(&m.path)) {
                return Ok(BodyFindings {
                    secrets: list
                        .iter()
                        .filter_map(|f| f.finding().map(|f| (f.line, f.rule.id)))
                        .collect(),
                    git: Vec::new(),
                });
            }
        }
    }
    // Read the file (a kept one is the member's bytes: checked as read).
    let mut f = match Root::Workspace.below(&m.path) {
        Some(rel) => File::from(
            open_beneath(
                folder.fd.as_fd(),
                rel,
                OFlags::RDONLY | OFlags::NONBLOCK,
                Mode::empty(),
            )
            .map_err(|e| CliError::io("read", folder.path.join(rel), e.into()))?,
        ),
        None => {
            let Some(dest) = harness_dest.get(m.path.as_str()) else {
                return Ok(BodyFindings::default());
            };
            File::open(dest).map_err(|e| CliError::io("read", dest, e))?
        }
    };
    let mut s = BodyScanner::new(scanner, &m.path);
    let mut h = packet_core::Hasher::new();
    let mut buf = vec![0u8; crate::packet_io::CHUNK];
    loop {
        let n = f
            .read(&mut buf)
            .map_err(|e| CliError::io("read", m.path.as_str(), e))?;
        if n == 0 {
            break;
        }
        s.feed(&buf[..n]);
        h.update(&buf[..n]);
    }
    if Some(h.finish()) != sha {
        return Err(Refused::WorkspaceChanged {
            member: m.path.to_string(),
            what: "a file changed while it was being restored over".into(),
        }
        .into());
    }
    Ok(s.finish())
}

/// Changes the folder, once everything verified.
struct Applier<'a> {
    folder: &'a Target,
    staging: &'a Staging,
    harness_staging: Option<&'a Staging>,
    umask: u32,
    neutralize: bool,
    neutralized: GitNeutralized,
    /// Written members left to use each landed body.
    slots: HashMap<usize, usize>,
    /// Each written file's identity right after it was renamed into place.
    written_ids: HashMap<usize, crate::record::Identity>,
    /// Where each restored harness member goes.
    harness_dest: HashMap<String, PathBuf>,
    created: &'a mut Created,
}

impl<'a> Applier<'a> {
    fn apply(&mut self, new: &Manifest, a: &Actions, pull: &DeltaPull<'_>) -> Result<()> {
        let root = self.folder.fd.as_fd();
        for rel in &a.remove {
            let (dir, leaf) = self.parent(rel)?;
            match unlinkat(dir.as_fd(), leaf, AtFlags::empty()) {
                Ok(()) | Err(rustix::io::Errno::NOENT) => {}
                Err(e) => return Err(CliError::io("remove", self.folder.path.join(rel), e.into())),
            }
        }
        for rel in &a.purge {
            let (dir, leaf) = self.parent(rel)?;
            remove_all_at(dir.as_fd(), std::ffi::OsStr::new(leaf))
                .map_err(|e| CliError::io("remove", self.folder.path.join(rel), e.into()))?;
        }
        for rel in &a.rmdirs {
            self.remove_tree(rel)?;
        }
        let mut slot_of: HashMap<Body, usize> = HashMap::new();
        for (s, w) in pull.bodies.wanted.iter().enumerate() {
            slot_of.insert(w.body, s);
        }
        let mut n = 0usize;
        for &i in &a.mkdirs {
            let m = &new.members[i];
            match Root::Workspace.below(&m.path) {
                Some(rel) => {
                    let (dir, leaf) = self.parent(rel)?;
                    match mkdirat(dir.as_fd(), leaf, Mode::from_raw_mode(DIR_MODE)) {
                        Ok(()) => {}
                        Err(rustix::io::Errno::EXIST) => {}
                        Err(e) => {
                            return Err(CliError::io(
                                "create",
                                self.folder.path.join(rel),
                                e.into(),
                            ))
                        }
                    }
                    if self.umask & 0o700 != 0 {
                        let fd = open_beneath(
                            root,
                            rel,
                            OFlags::RDONLY | OFlags::DIRECTORY,
                            Mode::empty(),
                        )
                        .map_err(|e| CliError::io("open", self.folder.path.join(rel), e.into()))?;
                        let kept = (DIR_MODE & !self.umask) | 0o700;
                        fchmod(&fd, Mode::from_raw_mode(kept)).map_err(|e| {
                            CliError::io("set permissions of", self.folder.path.join(rel), e.into())
                        })?;
                    }
                }
                None => {
                    let Some(dest) = self.harness_dest(new, i) else {
                        continue;
                    };
                    if std::fs::symlink_metadata(&dest).is_err() {
                        self.created
                            .dir_all(dest.parent().unwrap_or(Path::new("/")))?;
                        rustix::fs::mkdir(&dest, Mode::from_raw_mode(PRIVATE_DIR_MODE))
                            .map_err(|e| CliError::io("create", &dest, e.into()))?;
                    }
                }
            }
        }
        for &i in &a.links {
            let m = &new.members[i];
            let target = m.target().unwrap_or("");
            n += 1;
            let name = format!("l{n}");
            let (staging, to_dir, to_leaf, shown) = self.destination(new, i)?;
            symlinkat(target, staging.fd.as_fd(), name.as_str()).map_err(|e| {
                CliError::io("create the symlink", staging.path.join(&name), e.into())
            })?;
            renameat(
                staging.fd.as_fd(),
                name.as_str(),
                to_dir.as_fd(),
                to_leaf.as_str(),
            )
            .map_err(|e| CliError::io("move into place", &shown, e.into()))?;
        }
        for &i in &a.files {
            let m = &new.members[i];
            let in_workspace = Root::Workspace.below(&m.path);
            let hook = self.neutralize
                && m.mode().is_executable()
                && in_workspace.is_some_and(git::is_hook);
            let config = self.neutralize && in_workspace.is_some_and(git::is_repository_config);
            let mode = if in_workspace.is_none() {
                PRIVATE_FILE_MODE
            } else if hook {
                0o644 & !self.umask
            } else {
                m.mode().bits() & !self.umask
            };
            let (staging, to_dir, to_leaf, shown) = self.destination(new, i)?;
            n += 1;
            let name = match m.body().and_then(|b| slot_of.get(&b).copied()) {
                None => {
                    let name = format!("e{n}");
                    open_beneath(
                        staging.fd.as_fd(),
                        &name,
                        OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL,
                        Mode::from_raw_mode(0o600),
                    )
                    .map_err(|e| CliError::io("create", staging.path.join(&name), e.into()))?;
                    name
                }
                Some(slot) => {
                    let staged = format!("b{slot}");
                    let left = self.slots.get(&slot).copied().unwrap_or(1);
                    if left <= 1 {
                        staged
                    } else {
                        self.slots.insert(slot, left - 1);
                        let name = format!("c{n}");
                        copy_staged(staging, &staged, &name)?;
                        name
                    }
                }
            };
            let fd = open_beneath(staging.fd.as_fd(), &name, OFlags::RDWR, Mode::empty())
                .map_err(|e| CliError::io("open", staging.path.join(&name), e.into()))?;
            if config {
                unpack::check_git_config_size(m.path.as_str(), m.size())?;
                let mut f = File::from(
                    fd.try_clone()
                        .map_err(|e| CliError::io("open", &shown, e))?,
                );
                let mut bytes = Vec::new();
                f.read_to_end(&mut bytes)
                    .map_err(|e| CliError::io("read", &shown, e))?;
                let (cleaned, settings) = git::neutralize(&bytes);
                for s in settings {
                    self.neutralized.removed.push(RemovedSetting {
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
            if hook {
                self.neutralized.hooks_disabled.push(m.path.to_string());
            }
            fchmod(&fd, Mode::from_raw_mode(mode))
                .map_err(|e| CliError::io("set permissions of", &shown, e.into()))?;
            drop(fd);
            renameat(
                staging.fd.as_fd(),
                name.as_str(),
                to_dir.as_fd(),
                to_leaf.as_str(),
            )
            .map_err(|e| CliError::io("move into place", &shown, e.into()))?;
            let id =
                rustix::fs::statat(to_dir.as_fd(), to_leaf.as_str(), AtFlags::SYMLINK_NOFOLLOW)
                    .map(|s| crate::record::Identity::of(&s))
                    .map_err(|e| CliError::io("inspect", &shown, e.into()))?;
            self.written_ids.insert(i, id);
        }
        for &i in &a.chmods {
            let m = &new.members[i];
            let Some(rel) = Root::Workspace.below(&m.path) else {
                continue;
            };
            let fd = open_beneath(root, rel, OFlags::RDONLY | OFlags::NONBLOCK, Mode::empty())
                .map_err(|e| CliError::io("open", self.folder.path.join(rel), e.into()))?;
            let st = fstat(&fd)
                .map_err(|e| CliError::io("inspect", self.folder.path.join(rel), e.into()))?;
            if FileType::from_raw_mode(st.st_mode) != FileType::RegularFile {
                return Err(Refused::WorkspaceChanged {
                    member: m.path.to_string(),
                    what: "the file was replaced while restoring".into(),
                }
                .into());
            }
            fchmod(&fd, Mode::from_raw_mode(m.mode().bits() & !self.umask)).map_err(|e| {
                CliError::io("set permissions of", self.folder.path.join(rel), e.into())
            })?;
        }
        Ok(())
    }

    /// The folder holding workspace path `rel`, and its last component.
    fn parent<'r>(&self, rel: &'r str) -> Result<(OwnedFd, &'r str)> {
        let (dir, leaf) = match rel.rsplit_once('/') {
            Some((d, l)) => (d, l),
            None => ("", rel),
        };
        let fd = if dir.is_empty() {
            self.folder
                .fd
                .try_clone()
                .map_err(|e| CliError::io("open", &self.folder.path, e))?
        } else {
            open_beneath(
                self.folder.fd.as_fd(),
                dir,
                OFlags::PATH | OFlags::DIRECTORY,
                Mode::empty(),
            )
            .map_err(|e| CliError::io("open", self.folder.path.join(dir), e.into()))?
        };
        Ok((fd, leaf))
    }

    /// Removes the folder at `rel` and what is below it (entries left out
    /// of packets stay, and keep the folder).
    fn remove_tree(&self, rel: &str) -> Result<()> {
        let (dir, leaf) = self.parent(rel)?;
        match unlinkat(dir.as_fd(), leaf, AtFlags::REMOVEDIR) {
            Ok(()) | Err(rustix::io::Errno::NOENT) | Err(rustix::io::Errno::NOTEMPTY) => Ok(()),
            Err(rustix::io::Errno::NOTDIR) => unlinkat(dir.as_fd(), leaf, AtFlags::empty())
                .map_err(|e| CliError::io("remove", self.folder.path.join(rel), e.into())),
            Err(e) => Err(CliError::io("remove", self.folder.path.join(rel), e.into())),
        }
    }

    fn harness_dest(&self, new: &Manifest, i: usize) -> Option<PathBuf> {
        self.harness_staging?;
        self.harness_dest.get(new.members[i].path.as_str()).cloned()
    }

    /// Where member `i` goes: the staging folder its body is in, the
    /// folder and name it is renamed to, and its path for messages.
    fn destination(
        &mut self,
        new: &Manifest,
        i: usize,
    ) -> Result<(&'a Staging, OwnedFd, String, PathBuf)> {
        let m = &new.members[i];
        if let Some(rel) = Root::Workspace.below(&m.path) {
            let (dir, leaf) = self.parent(rel)?;
            return Ok((
                self.staging,
                dir,
                leaf.to_owned(),
                self.folder.path.join(rel),
            ));
        }
        let dest = self
            .harness_dest(new, i)
            .ok_or_else(|| CliError::Bug(format!("{} has no place", m.path)))?;
        let staging = self
            .harness_staging
            .ok_or_else(|| CliError::Bug("harness state with no staging folder".into()))?;
        let parent = dest.parent().unwrap_or(Path::new("/")).to_path_buf();
        self.created.dir_all(&parent)?;
        let dir = rustix::fs::open(
            &parent,
            OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| CliError::io("open", &parent, e.into()))?;
        let leaf = dest
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or("")
            .to_owned();
        Ok((staging, dir, leaf, dest))
    }
}

/// Removes the folder `name` in `dir` and everything below it, through
/// descriptors only (never following a link).
fn remove_all_at(dir: BorrowedFd<'_>, name: &std::ffi::OsStr) -> rustix::io::Result<()> {
    let fd = match rustix::fs::openat(
        dir,
        name,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    ) {
        Ok(fd) => fd,
        Err(rustix::io::Errno::NOENT) => return Ok(()),
        Err(rustix::io::Errno::NOTDIR | rustix::io::Errno::LOOP) => {
            return unlinkat(dir, name, AtFlags::empty())
        }
        Err(e) => return Err(e),
    };
    let mut names = Vec::new();
    for entry in rustix::fs::Dir::read_from(&fd)? {
        let entry = entry?;
        let n = entry.file_name().to_bytes();
        if n != b"." && n != b".." {
            names.push((n.to_vec(), entry.file_type()));
        }
    }
    for (n, kind) in names {
        let n = <std::ffi::OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(&n);
        if kind == FileType::Directory {
            remove_all_at(fd.as_fd(), n)?;
        } else {
            match unlinkat(fd.as_fd(), n, AtFlags::empty()) {
                Ok(()) | Err(rustix::io::Errno::NOENT) => {}
                Err(e) => return Err(e),
            }
        }
    }
    unlinkat(dir, name, AtFlags::REMOVEDIR)
}

/// Copies staged file `from` to a new staged file `to`.
fn copy_staged(staging: &Staging, from: &str, to: &str) -> Result<()> {
    let mut src = File::from(
        open_beneath(staging.fd.as_fd(), from, OFlags::RDONLY, Mode::empty())
            .map_err(|e| CliError::io("open", staging.path.join(from), e.into()))?,
    );
    let mut dst = File::from(
        open_beneath(
            staging.fd.as_fd(),
            to,
            OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL,
            Mode::from_raw_mode(0o600),
        )
        .map_err(|e| CliError::io("create", staging.path.join(to), e.into()))?,
    );
    std::io::copy(&mut src, &mut dst)
        .map_err(|e| CliError::io("write", staging.path.join(to), e))?;
    Ok(())
}
