//! `push`: verifies the packet here, then sends it in one request or, past
//! the store's single-upload limit, in parts (resuming an interrupted
//! upload), and moves a ref to it with compare-and-swap.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::time::Instant;

use std::collections::HashMap;

use packet_core::{Digest, Manifest};
use pillbox_wire::{CreateUpload, PutRef, Upload};
use serde::Serialize;

use super::bodies::{Bodies, PacketBodies};
use super::client::{
    bad_answer, is_stored, read_answer, ref_digest, status_error, store_info, Remote,
};
use super::delta_push::{delta_push, DeltaReport, DeltaRequest, KnownBase};
use super::upload_state::{lock_file, state_file, StateLock, UploadState};
use super::{label_query, packet_path, ref_path, upload_path};
use crate::error::{CliError, Refused, Result};
use crate::packet_io::{self, PacketInput, PacketSource};
use crate::progress::Progress;

/// What `--expect-ref` says the ref holds before the push moves it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExpectRef {
    /// The ref must not exist yet.
    Absent,
    /// The ref must hold this digest.
    Digest(Digest),
}

impl std::str::FromStr for ExpectRef {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        if s == "absent" {
            return Ok(ExpectRef::Absent);
        }
        // A compare-and-swap guard names exactly what the ref holds: a
        // prefix is refused, never resolved.
        s.parse::<Digest>().map(ExpectRef::Digest).map_err(|e| {
            if pillbox_wire::DigestPrefix::parse(s).is_ok() {
                format!("{s:?} is the start of a digest: --expect-ref is the compare-and-swap guard and takes the whole digest the ref must hold (sha256: and 64 hex digits), or `absent`")
            } else {
                format!("{s:?}: `absent` or a digest: {}", e.message())
            }
        })
    }
}

/// A push to run.
pub struct PushRequest {
    /// The packet file (or `-`).
    pub packet: PathBuf,
    /// Move this ref to the packet afterwards.
    pub ref_name: Option<String>,
    /// What the ref must hold before it moves (compare-and-swap).
    pub expect_ref: Option<ExpectRef>,
    /// Part size to ask for in a multipart upload.
    pub part_size: Option<u64>,
    /// Labels to attach to the packet.
    pub labels: Vec<String>,
    /// Where interrupted uploads are recorded.
    pub state_dir: PathBuf,
    /// Use the whole-packet paths even when the store takes delta pushes.
    pub whole: bool,
    /// Stored packets the push builds on, besides the ref's current one.
    pub bases: Vec<Digest>,
}

/// How the parts went.
#[derive(Debug, Serialize)]
pub struct PartsReport {
    /// Parts in the upload.
    pub total: u64,
    /// Parts this run sent (fewer than `total` when resumed).
    pub sent: u64,
    /// Every part's size but the last's.
    pub part_size: u64,
}

/// The ref moved by a push.
#[derive(Debug, Serialize)]
pub struct RefReport {
    /// The ref's name.
    pub name: String,
    /// What it held before (`null`: it did not exist).
    pub previous: Option<String>,
    /// What it holds now: the pushed packet.
    pub digest: String,
    /// False when it already held the packet.
    pub moved: bool,
}

/// The `pillbox.checkpoint.push/1` object.
#[derive(Debug, Serialize)]
pub struct PushReport {
    /// `pillbox.checkpoint.push/1`.
    pub schema: &'static str,
    /// The packet's digest.
    pub digest: String,
    /// Its size in bytes.
    pub size: u64,
    /// The store's base URL.
    pub remote: String,
    /// True when this run stored the packet; false when the store had it.
    pub uploaded: bool,
    /// `single`, `multipart`, `delta`, or `none` (already stored).
    pub mode: &'static str,
    /// Multipart only.
    pub parts: Option<PartsReport>,
    /// True when an interrupted multipart upload was continued.
    pub resumed: bool,
    /// Bytes of the request bodies that carried the packet: the packet
    /// itself (single, multipart), or the compressed manifest, recipes and
    /// parts (delta).
    pub bytes_sent: u64,
    /// Requests sent again after a transient failure.
    pub retries: u32,
    /// Wall time of the upload (after local verification), in seconds.
    pub upload_seconds: f64,
    /// The ref moved, if `--ref` was given.
    #[serde(rename = "ref")]
    pub ref_moved: Option<RefReport>,
    /// Delta push only: what was reused and what was sent.
    pub delta: Option<DeltaReport>,
}

/// `push`.
pub fn push(remote: &Remote, request: &PushRequest, progress: &Progress) -> Result<PushReport> {
    let input = PacketInput::open(&request.packet)?;
    let read = packet_io::verify(&input, None, progress)?;
    // The bytes to send: the file itself, or the spooled copy of stdin.
    let (file, _spool) = upload_file(&input)?;
    let bodies = PacketBodies::open(
        &file,
        read.data_offsets.clone(),
        read.manifest.members.iter().map(|m| m.size()).collect(),
    )?;
    let packet = Verified {
        manifest: &read.manifest,
        json: None,
        digest: read.digest,
        size: read.size,
        file: Some(&file),
        bodies: &bodies,
        cuts: None,
        known: None,
    };
    push_verified(remote, request, &packet, progress)
}

/// A packet verified on this machine, ready to send.
pub struct Verified<'a> {
    /// Its manifest.
    pub manifest: &'a Manifest,
    /// Its `packet.json`'s exact bytes, when already at hand.
    pub json: Option<&'a [u8]>,
    /// Its digest.
    pub digest: Digest,
    /// Its size.
    pub size: u64,
    /// The packet file, for the whole-packet paths (`save` without `-o`
    /// has none, and goes by delta).
    pub file: Option<&'a Path>,
    /// Where its bodies are read from, for a delta push.
    pub bodies: &'a dyn Bodies,
    /// Large bodies already cut into chunks (by body sha256).
    pub cuts: Option<&'a HashMap<Digest, Vec<crate::chunking::Piece>>>,
    /// What this machine knows a stored packet holds (the workspace
    /// record's packet): when the ref points at it, the push sends exactly
    /// what it lacks.
    pub known: Option<&'a KnownBase>,
}

/// Sends a verified packet by delta push when the store takes it (and
/// `--whole` was not given, and the packet is a /2 one: a /1 packet is
/// named by its whole file and goes up whole), else in one request or in
/// parts; then moves the ref.
pub fn push_verified(
    remote: &Remote,
    request: &PushRequest,
    packet: &Verified<'_>,
    progress: &Progress,
) -> Result<PushReport> {
    let (digest, size) = (packet.digest, packet.size);
    let started = Instant::now();
    let sent_before = remote.traffic().sent();
    let retries_before = remote.traffic().retries();
    let mut report = PushReport {
        schema: "pillbox.checkpoint.push/1",
        digest: digest.to_string(),
        size,
        remote: remote.base().to_owned(),
        uploaded: false,
        mode: "none",
        parts: None,
        resumed: false,
        bytes_sent: 0,
        retries: 0,
        upload_seconds: 0.0,
        ref_moved: None,
        delta: None,
    };
    let settings = store_info(remote)?;
    let delta = settings.delta && !request.whole && packet.manifest.format.named_by_manifest();
    let current = match (&request.ref_name, delta) {
        (Some(name), true) => current_ref(remote, name)?,
        _ => None,
    };
    // A push that knows its base (a save after the last one) goes straight
    // to the create, which answers 200 for a packet stored already.
    let stored = current == Some(digest)
        || (!(delta && packet.known.is_some()) && is_stored(remote, &digest)?);
    if stored {
        // Nothing to send.
    } else if delta {
        let mut bases = request.bases.clone();
        if let Some(current) = current {
            if !bases.contains(&current) {
                bases.insert(0, current);
            }
        }
        let owned_json;
        let json = match packet.json {
            Some(j) => j,
            None => {
                owned_json = packet.manifest.to_canonical_json();
                &owned_json
            }
        };
        let no_cuts = HashMap::new();
        let outcome = delta_push(
            remote,
            &DeltaRequest {
                manifest: packet.manifest,
                json,
                digest,
                size,
                bodies: packet.bodies,
                cuts: packet.cuts.unwrap_or(&no_cuts),
                bases,
                known: packet.known,
                labels: &request.labels,
                state_dir: &request.state_dir,
            },
            progress,
        )?;
        report.uploaded = outcome.created;
        report.resumed = outcome.resumed;
        report.mode = if outcome.created || outcome.report.chunks_sent > 0 {
            "delta"
        } else {
            "none"
        };
        report.bytes_sent = remote.traffic().sent() - sent_before;
        report.delta = Some(outcome.report);
    } else {
        let Some(file) = packet.file else {
            return Err(CliError::Bug(
                "a whole-packet push of a packet with no file".into(),
            ));
        };
        let info = settings.info;
        progress.phase("upload", size);
        if size <= info.max_single_upload_bytes {
            report.uploaded = put_single(remote, &digest, file, size, &request.labels, progress)?;
            report.mode = "single";
            report.bytes_sent = size;
        } else {
            let outcome = put_multipart(remote, request, &digest, file, size, progress)?;
            report.uploaded = outcome.created;
            report.mode = "multipart";
            report.resumed = outcome.resumed;
            report.bytes_sent = outcome.bytes_sent;
            report.parts = Some(PartsReport {
                total: outcome.total,
                sent: outcome.sent,
                part_size: outcome.part_size,
            });
        }
    }
    report.upload_seconds = started.elapsed().as_secs_f64();
    progress.finish();
    if let Some(name) = &request.ref_name {
        report.ref_moved = Some(move_ref(remote, name, &digest, request.expect_ref)?);
    }
    report.retries = remote.traffic().retries() - retries_before;
    Ok(report)
}

/// Whether the store takes delta pushes (`GET /v1`).
pub fn takes_delta(remote: &Remote) -> Result<bool> {
    Ok(store_info(remote)?.delta)
}

/// What the ref holds now, `None` if it does not exist.
fn current_ref(remote: &Remote, name: &str) -> Result<Option<Digest>> {
    let path = ref_path(name);
    let what = format!("GET {path}");
    let mut r = remote.get(&what, &path)?;
    match r.status().as_u16() {
        200 => ref_digest(&what, &mut r).map(Some),
        404 => Ok(None),
        _ => Err(status_error(&what, r)),
    }
}

/// A path to read the packet's bytes from, and the spool it lives in when
/// the packet came from standard input.
fn upload_file(input: &PacketInput) -> Result<(PathBuf, Option<tempfile::TempPath>)> {
    match input {
        PacketInput::File(p) => Ok((p.clone(), None)),
        PacketInput::Spooled { .. } => {
            // Parts are re-read by path for retries; give the spool a name.
            let named = tempfile::Builder::new()
                .prefix(".pillbox-push-")
                .tempfile()
                .map_err(|e| CliError::io("create a spool file in", std::env::temp_dir(), e))?;
            let mut from = input.open_packet()?;
            let (mut f, path) = named.into_parts();
            io::copy(&mut from, &mut f).map_err(|e| CliError::io("write", &path, e))?;
            Ok((path.to_path_buf(), Some(path)))
        }
    }
}

/// One `PUT /v1/packets/{digest}`. True when this request stored it.
fn put_single(
    remote: &Remote,
    digest: &Digest,
    file: &Path,
    size: u64,
    labels: &[String],
    progress: &Progress,
) -> Result<bool> {
    let path = format!("{}{}", packet_path(digest), label_query(labels));
    let what = format!("PUT {}", packet_path(digest));
    let r = remote.put_range(&what, &path, file, 0, size, progress)?;
    match r.status().as_u16() {
        201 => Ok(true),
        200 => Ok(false),
        _ => Err(status_error(&what, r)),
    }
}

struct MultipartOutcome {
    created: bool,
    resumed: bool,
    total: u64,
    sent: u64,
    part_size: u64,
    bytes_sent: u64,
}

/// `GET /v1/uploads/{id}`: the upload's state, `None` if the store no
/// longer has it (finished, aborted or expired).
fn get_upload(remote: &Remote, id: &str) -> Result<Option<Upload>> {
    let what = format!("GET {}", upload_path(id));
    let mut r = remote.get(&what, &upload_path(id))?;
    match r.status().as_u16() {
        200 => read_answer(&what, &mut r).map(Some),
        404 => Ok(None),
        _ => Err(status_error(&what, r)),
    }
}

fn put_multipart(
    remote: &Remote,
    request: &PushRequest,
    digest: &Digest,
    file: &Path,
    size: u64,
    progress: &Progress,
) -> Result<MultipartOutcome> {
    let state_path = state_file(&request.state_dir, remote.base(), digest);
    let lock_path = lock_file(&request.state_dir, remote.base(), digest);
    let lock = StateLock::acquire(&lock_path)?;
    let result = drive_multipart(remote, request, digest, file, size, &state_path, progress);
    if result.is_ok() {
        // Done: a push waiting on this lock finds the packet stored.
        let _ = fs::remove_file(&lock_path);
    }
    drop(lock);
    result
}

fn drive_multipart(
    remote: &Remote,
    request: &PushRequest,
    digest: &Digest,
    file: &Path,
    size: u64,
    state_path: &Path,
    progress: &Progress,
) -> Result<MultipartOutcome> {
    let mut outcome = MultipartOutcome {
        created: false,
        resumed: false,
        total: 0,
        sent: 0,
        part_size: 0,
        bytes_sent: 0,
    };
    // A push that waited for the lock may find the packet stored meanwhile.
    if is_stored(remote, digest)? {
        return Ok(outcome);
    }
    let saved = UploadState::load(state_path, remote.base(), digest, size);
    let mut view = match &saved {
        Some(s) => get_upload(remote, &s.upload_id)?,
        None => None,
    };
    outcome.resumed = view.is_some();
    if view.is_none() {
        let what = "POST /v1/uploads";
        let body = CreateUpload {
            digest: digest.to_string(),
            size,
            part_size: request.part_size,
            labels: request.labels.clone(),
        };
        let mut r = remote.send_json(what, "POST", "/v1/uploads", &body, &[])?;
        match r.status().as_u16() {
            201 => {
                let created: Upload = read_answer(what, &mut r)?;
                UploadState {
                    remote: remote.base().to_owned(),
                    digest: digest.to_string(),
                    size,
                    upload_id: created.upload_id.clone(),
                    part_size: created.part_size,
                }
                .save(state_path)?;
                view = Some(created);
            }
            // The store has the packet already (another client finished first).
            200 => {
                let _ = fs::remove_file(state_path);
                return Ok(outcome);
            }
            _ => return Err(status_error(what, r)),
        }
    }
    let Some(mut view) = view else {
        return Err(bad_answer("POST /v1/uploads", "no upload"));
    };
    outcome.total = view.parts;
    outcome.part_size = view.part_size;
    progress.set_position(size.saturating_sub(missing_bytes(&view, size)));
    // Sends the missing parts, completes; a complete that finds parts
    // missing (a part lost by the store) sends those and completes again.
    for _round in 0..3 {
        for &number in &view.missing {
            let offset = (u64::from(number) - 1) * view.part_size;
            let length = view.part_size.min(size.saturating_sub(offset));
            let path = format!("{}/parts/{number}", upload_path(&view.upload_id));
            let what = format!("PUT {path}");
            let r = remote.put_range(&what, &path, file, offset, length, progress)?;
            if r.status().as_u16() != 200 {
                return Err(status_error(&what, r));
            }
            outcome.sent += 1;
            outcome.bytes_sent += length;
        }
        let path = format!("{}/complete", upload_path(&view.upload_id));
        let what = format!("POST {path}");
        // The complete request has no fields: its body is JSON `null`. It
        // can run long (the store assembles and verifies the packet).
        let r = remote.send_json(&what, "POST", &path, &(), &[])?;
        match r.status().as_u16() {
            201 | 200 => {
                outcome.created = r.status().as_u16() == 201;
                let _ = fs::remove_file(state_path);
                return Ok(outcome);
            }
            409 => match get_upload(remote, &view.upload_id)? {
                Some(v) if !v.missing.is_empty() => view = v,
                _ => return Err(status_error(&what, r)),
            },
            // Refused by packet-core: the store dropped the upload.
            422 => {
                let _ = fs::remove_file(state_path);
                return Err(status_error(&what, r));
            }
            // A retried complete whose first attempt succeeded finds the
            // upload gone: the packet is there.
            404 if is_stored(remote, digest)? => {
                let _ = fs::remove_file(state_path);
                return Ok(outcome);
            }
            _ => return Err(status_error(&what, r)),
        }
    }
    Err(Refused::UploadIncomplete {
        upload: view.upload_id.clone(),
    }
    .into())
}

/// The bytes of the parts `view` says are missing, of a `size`-byte packet.
fn missing_bytes(view: &Upload, size: u64) -> u64 {
    view.missing
        .iter()
        .map(|&n| {
            let offset = (u64::from(n) - 1).saturating_mul(view.part_size);
            view.part_size.min(size.saturating_sub(offset))
        })
        .sum()
}

/// Moves `name` to `digest` with compare-and-swap: `If-Match` the digest
/// it is expected to hold, or `If-None-Match: *` to create it.
fn move_ref(
    remote: &Remote,
    name: &str,
    digest: &Digest,
    expect: Option<ExpectRef>,
) -> Result<RefReport> {
    let path = ref_path(name);
    let expected = match expect {
        Some(e) => e,
        None => {
            let what = format!("GET {path}");
            let mut r = remote.get(&what, &path)?;
            match r.status().as_u16() {
                404 => ExpectRef::Absent,
                200 => {
                    let current = ref_digest(&what, &mut r)?;
                    if current == *digest {
                        return Ok(RefReport {
                            name: name.to_owned(),
                            previous: Some(current.to_string()),
                            digest: digest.to_string(),
                            moved: false,
                        });
                    }
                    ExpectRef::Digest(current)
                }
                _ => return Err(status_error(&what, r)),
            }
        }
    };
    let header = match expected {
        ExpectRef::Absent => ("if-none-match", "*".to_owned()),
        ExpectRef::Digest(d) => ("if-match", format!("\"{d}\"")),
    };
    let what = format!("PUT {path}");
    let body = PutRef {
        digest: digest.to_string(),
    };
    let r = remote.send_json(&what, "PUT", &path, &body, &[header])?;
    match r.status().as_u16() {
        200 | 201 => Ok(RefReport {
            name: name.to_owned(),
            previous: match expected {
                ExpectRef::Absent => None,
                ExpectRef::Digest(d) => Some(d.to_string()),
            },
            digest: digest.to_string(),
            moved: match expected {
                ExpectRef::Absent => true,
                ExpectRef::Digest(d) => d != *digest,
            },
        }),
        _ => Err(status_error(&what, r)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ref_expectations() {
        let d = Digest::of(b"packet");
        assert_eq!("absent".parse::<ExpectRef>(), Ok(ExpectRef::Absent));
        assert_eq!(d.to_string().parse::<ExpectRef>(), Ok(ExpectRef::Digest(d)));
        assert!("sha256:xyz".parse::<ExpectRef>().is_err());
    }

    #[test]
    fn missing_bytes_count_the_short_last_part() {
        let view = Upload {
            upload_id: "x".into(),
            location: "/v1/uploads/x".into(),
            digest: Digest::of(b"packet").to_string(),
            size: 12,
            part_size: 5,
            parts: 3,
            received: vec![],
            missing: vec![1, 3],
        };
        assert_eq!(missing_bytes(&view, 12), 5 + 2);
    }
}
