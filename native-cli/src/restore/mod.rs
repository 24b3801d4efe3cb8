//! `pillbox checkpoint restore`: a checkpoint from a store into a folder
//! (docs/cli.md, "restore"). The target is checked before anything is
//! fetched. Into an empty or absent folder, a /2 packet is put together
//! from its parts (`fresh`): bodies land in staging folders as they are
//! read or fetched and checked, and move into place once packet-core's
//! `Assembly` accepted the whole. A /1 packet is made as a file (from
//! chunks, or downloaded whole) and unpacked. Over an earlier restore,
//! `in_place` changes only what differs (`scan` reads the folder, `journal`
//! makes the change resumable, `recording` keeps what was read for the
//! next time); `staging` is what both land bodies in and scan them as.

mod fresh;
mod in_place;
mod journal;
mod recording;
mod scan;
mod staging;

use std::collections::HashMap;
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::time::Instant;

use serde::Serialize;

use crate::error::{CliError, Refused, Result};
use crate::packet_io::PacketInput;
use crate::progress::Progress;
use crate::record;
use crate::remote::delta_pull::{self, DeltaPull};
use crate::remote::{self, DeltaPullReport, PullSources, PullTarget, Remote};
use crate::unpack::{self, Created, Placed, Target, UnpackReport, UnpackRequest};
use crate::walk::FileId;
use journal::{Journal, Toward};
use recording::Recorder;

/// The `pillbox.checkpoint.restore/1` object: what `unpack` prints, and
/// what `pull` adds.
#[derive(Debug, Serialize)]
pub struct RestoreReport {
    /// What `unpack` reports, under the schema
    /// `pillbox.checkpoint.restore/1` (the digest is always checked: it is
    /// the one the store named).
    #[serde(flatten)]
    pub unpacked: UnpackReport,
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
    discard_local: bool,
    progress: &Progress,
) -> Result<RestoreReport> {
    let started = Instant::now();
    // Files stamped after this are racy for the next record's user.
    let started_ns = record::now_ns();
    let received_before = store.traffic().received();
    let retries_before = store.traffic().retries();
    let mut created = Created::default();
    // The target, before anything is fetched.
    let opened = match open_target(&request.into, &mut created) {
        Ok(o) => o,
        Err(e) => {
            created.undo();
            return Err(e);
        }
    };
    let result = match opened {
        Opened::InPlace(holding) => in_place::restore(
            *holding,
            store,
            target,
            sources,
            &request,
            discard_local,
            started_ns,
            &mut created,
            progress,
        )
        .map(|d| {
            let placed = Placed {
                read: d.read,
                workspace: d.workspace,
                harness: d.harness,
                git: d.git,
            };
            let unpacked = UnpackReport::of(placed, true);
            Outcome {
                unpacked,
                ref_name: d.ref_name,
                delta: Some(d.delta),
                counts: (d.written, d.removed, d.unchanged),
            }
        }),
        Opened::Fresh(recorder) => fresh(
            store,
            target,
            sources,
            request,
            recorder,
            started_ns,
            &mut created,
            progress,
        ),
    };
    progress.finish();
    let outcome = match result {
        Ok(o) => o,
        Err(e) => {
            created.undo();
            return Err(e);
        }
    };
    let (written, removed, unchanged) = outcome.counts;
    Ok(RestoreReport {
        unpacked: UnpackReport {
            schema: "pillbox.checkpoint.restore/1",
            ..outcome.unpacked
        },
        remote: store.base().to_owned(),
        ref_name: outcome.ref_name,
        mode: if outcome.delta.is_some() {
            "delta"
        } else {
            "whole"
        },
        written,
        removed,
        unchanged,
        bytes_received: store.traffic().received() - received_before,
        retries: store.traffic().retries() - retries_before,
        seconds: started.elapsed().as_secs_f64(),
        delta: outcome.delta,
    })
}

/// What a restore did, for the report.
struct Outcome {
    unpacked: UnpackReport,
    ref_name: Option<String>,
    delta: Option<DeltaPullReport>,
    /// Members written, removed, left as they were.
    counts: (u64, u64, u64),
}

/// What the target is.
enum Opened {
    /// Absent (now created) or empty: a fresh restore, with the record's
    /// lock when records can be kept.
    Fresh(Option<Recorder>),
    /// It holds a recorded checkpoint, or what an interrupted restore left.
    InPlace(Box<in_place::Holding>),
}

/// Looks at the target: absent or empty, or holding the checkpoint its
/// workspace record names; anything else is refused (`target_not_empty`).
fn open_target(into: &Path, created: &mut Created) -> Result<Opened> {
    match std::fs::symlink_metadata(into) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => created.dir_all(into)?,
        Err(e) => return Err(CliError::io("inspect", into, e)),
        Ok(m) if m.file_type().is_symlink() => {
            return Err(Refused::TargetIsSymlink {
                target: into.to_path_buf(),
            }
            .into())
        }
        Ok(m) if !m.is_dir() => {
            return Err(Refused::TargetNotDirectory {
                target: into.to_path_buf(),
            }
            .into())
        }
        Ok(_) => {}
    }
    let target = Target::workspace(into)?;
    let workspace = std::fs::canonicalize(into).map_err(|e| CliError::io("open", into, e))?;
    let stat =
        rustix::fs::fstat(&target.fd).map_err(|e| CliError::io("inspect", into, e.into()))?;
    let root = FileId::of(&stat);
    let empty = std::fs::read_dir(into)
        .map_err(|e| CliError::io("list", into, e))?
        .next()
        .is_none();
    let not_empty = || {
        CliError::from(Refused::TargetNotEmpty {
            target: into.to_path_buf(),
        })
    };
    // No place for records (no $HOME): nothing can be restored over.
    let recorder = match Recorder::acquire(&workspace, root) {
        Ok(r) => r,
        Err(_) if empty => return Ok(Opened::Fresh(None)),
        Err(_) => return Err(not_empty()),
    };
    if empty {
        recorder.abandon();
        return Ok(Opened::Fresh(Some(recorder)));
    }
    let record = recorder.load();
    let journal = recorder.journal();
    if record.is_none() && journal.is_none() {
        return Err(not_empty());
    }
    Ok(Opened::InPlace(Box::new(in_place::Holding {
        recorder,
        target,
        record,
        journal: journal.unwrap_or_default(),
    })))
}

/// A restore into an absent or empty folder.
#[allow(clippy::too_many_arguments)]
fn fresh(
    store: &Remote,
    target: &PullTarget,
    sources: &PullSources,
    request: UnpackRequest,
    recorder: Option<Recorder>,
    started_ns: i64,
    created: &mut Created,
    progress: &Progress,
) -> Result<Outcome> {
    let (digest, ref_name) = remote::resolve(store, target)?;
    let request = UnpackRequest {
        expected: Some(digest),
        ..request
    };
    if !sources.delta(store)? {
        let (dir, file) = spool_dir()?;
        let whole = PullSources {
            bases: Vec::new(),
            cache: remote::CacheChoice::Off,
            whole: true,
        };
        remote::pull(store, &PullTarget::Digest(digest), &file, &whole, progress)?;
        let unpacked = unpack::unpack(&PacketInput::File(file), &request, progress)?;
        drop(dir);
        if let Some(r) = &recorder {
            r.abandon();
        }
        let n = unpacked.members;
        return Ok(Outcome {
            unpacked,
            ref_name,
            delta: None,
            counts: (n, 0, 0),
        });
    }
    let cache = sources.open_cache()?;
    let pull = DeltaPull::describe(store, digest, None, cache)?;
    if !pull.is_assembled() {
        let (dir, file) = spool_dir()?;
        let f = std::fs::File::create(&file).map_err(|e| CliError::io("create", &file, e))?;
        let (_, report) = delta_pull::write_packet(pull, &sources.bases, &f, &file, progress)?;
        drop(f);
        let unpacked = unpack::unpack(&PacketInput::File(file), &request, progress)?;
        drop(dir);
        let n = unpacked.members;
        return Ok(Outcome {
            unpacked,
            ref_name,
            delta: Some(report),
            counts: (n, 0, 0),
        });
    }
    let json = pull.parts.json.clone();
    let recipes = pull.parts.recipes.clone();
    // What a crash from here on leaves: the staging folders, and members
    // of this checkpoint.
    let mut journal_hook = |staging: &[PathBuf]| -> Result<()> {
        match &recorder {
            Some(r) => r.write_journal(&Journal {
                staging: staging.to_vec(),
                toward: vec![Toward {
                    digest,
                    json: json.clone(),
                }],
            }),
            None => Ok(()),
        }
    };
    let done = match fresh::restore(
        pull,
        &sources.bases,
        &request,
        created,
        &mut journal_hook,
        progress,
    ) {
        Ok(d) => d,
        Err(e) => {
            if let Some(r) = &recorder {
                r.abandon();
            }
            return Err(e);
        }
    };
    if let Some(r) = &recorder {
        let manifest = &done.placed.read.manifest;
        let target = Target::workspace(&request.into)?;
        let mut stats = recording::Stats::new(target.fd.as_fd());
        let dests: HashMap<&str, &Path> = done
            .harness_places
            .iter()
            .map(|(m, d)| (m.as_str(), d.as_path()))
            .collect();
        let mut files = Vec::new();
        for (i, m) in manifest.members.iter().enumerate() {
            let Some(sha256) = m.sha256() else { continue };
            // A file neutralized on the way stands for its member too.
            let identity = match (
                packet_core::path::Root::Workspace.below(&m.path),
                dests.get(m.path.as_str()),
            ) {
                (Some(rel), _) => stats.identity(rel),
                (None, Some(dest)) => recording::identity_at(dest),
                (None, None) => None,
            };
            if let Some(identity) = identity {
                files.push(recording::entry(
                    &m.path,
                    identity,
                    sha256,
                    done.findings[i].as_ref(),
                ));
            }
        }
        // The home a harness restored as files went under, as given.
        let homes = match &manifest.harness {
            Some(h) => request
                .harness
                .dir(h.kind)
                .map(|home| vec![(h.kind.as_str().to_owned(), home.to_path_buf())])
                .unwrap_or_default(),
            None => Vec::new(),
        };
        let next = recording::record_of(
            r,
            recording::Checkpoint {
                store: store.base(),
                ref_name: ref_name.as_deref(),
                digest,
                json: &json,
                manifest,
                recipes: &recipes,
                harness_homes: homes,
                started: started_ns,
                verdicts: Vec::new(),
            },
            files,
        );
        // The checkpoint is in place: a record that cannot be written only
        // makes the next restore go into an empty folder.
        if r.finish(&next).is_err() {
            r.abandon();
        }
    }
    let n = done.placed.read.manifest.totals.members;
    Ok(Outcome {
        unpacked: UnpackReport::of(done.placed, true),
        ref_name,
        delta: Some(done.report),
        counts: (n, 0, 0),
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
