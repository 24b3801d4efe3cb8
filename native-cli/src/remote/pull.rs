//! `pull`: downloads a packet by digest or by ref, feeding the bytes
//! through packet-core's reader as they arrive; a dropped connection is
//! continued with `Range`, and the file is renamed into place (or copied
//! to standard output) only once the whole packet has verified.

use std::fs::{self, File};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::time::Instant;

use packet_core::{Digest, Limits, ReaderOptions};
use pillbox_wire::DigestPrefix;
use serde::Serialize;

use super::client::{ref_digest, status_error, store_info, Remote};
use super::delta_pull::{self, DeltaPullReport};
use super::{packet_path, ref_path};
use crate::cache::Cache;
use crate::error::{CliError, Refused, Result};
use crate::packet_io::{self, PacketSource, CHUNK};
use crate::progress::Progress;
use crate::report::{HarnessReport, Totals};

/// What to pull: a digest, the start of one, or a ref naming one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PullTarget {
    /// `sha256:<hex>`
    Digest(Digest),
    /// `sha256:` and 8 to 63 hex digits, resolved by the store
    /// (`GET /v1/digests/{prefix}`) to the one packet it names.
    Prefix(DigestPrefix),
    /// A ref name, resolved with `GET /v1/refs/{name}`.
    Ref(String),
}

impl PullTarget {
    /// `sha256:…` is a digest or a prefix of one (and must be a valid
    /// one; no ref name holds a `:`); anything else a ref.
    pub fn parse(s: &str) -> Result<PullTarget> {
        if !Digest::is_digest_text(s) {
            return if s.is_empty() {
                Err(CliError::Usage("name a digest or a ref to pull".into()))
            } else {
                Ok(PullTarget::Ref(s.to_owned()))
            };
        }
        if s.len() == Digest::TEXT_LEN {
            return s
                .parse::<Digest>()
                .map(PullTarget::Digest)
                .map_err(|e| CliError::Usage(format!("{s:?}: {}", e.message())));
        }
        DigestPrefix::parse(s)
            .map(PullTarget::Prefix)
            .map_err(|e| CliError::Usage(e.message().to_owned()))
    }
}

/// The `pillbox.checkpoint.pull/1` object.
#[derive(Debug, Serialize)]
pub struct PullReport {
    /// `pillbox.checkpoint.pull/1`.
    pub schema: &'static str,
    /// The packet's digest (verified).
    pub digest: String,
    /// Its size.
    pub size: u64,
    /// The store's base URL.
    pub remote: String,
    /// The ref it was pulled by, if any.
    #[serde(rename = "ref")]
    pub ref_name: Option<String>,
    /// Where it was written (absolute), or `-`.
    pub output: String,
    /// Members after `packet.json`.
    pub members: u64,
    /// Manifest totals.
    pub totals: Totals,
    /// Harness state carried.
    pub harness: Option<HarnessReport>,
    /// Times the download continued after a dropped connection.
    pub resumed: u32,
    /// Wall time of the download and verification, in seconds.
    pub download_seconds: f64,
    /// `whole` (one download) or `delta` (rebuilt from bases, the cache
    /// and fetched chunks).
    pub mode: &'static str,
    /// Bytes of the store's answers' bodies, as received (compressed or not).
    pub bytes_received: u64,
    /// Requests sent again after a transient failure (a continued
    /// download counts too).
    pub retries: u32,
    /// Delta pull only: where the bytes came from.
    pub delta: Option<DeltaPullReport>,
}

/// Where a delta pull looks for bytes before it fetches them.
pub struct PullSources {
    /// `--base` packet files.
    pub bases: Vec<PathBuf>,
    /// The chunk cache, or none (`--no-cache`).
    pub cache: CacheChoice,
    /// Download the whole packet even when the store serves chunks.
    pub whole: bool,
}

/// Which chunk cache a pull uses.
pub enum CacheChoice {
    /// The cache in this folder, bounded.
    At {
        /// The folder.
        dir: PathBuf,
        /// Its bound in bytes.
        max_bytes: u64,
    },
    /// None: fetched chunks live in a temporary folder until the packet
    /// is rebuilt.
    Off,
}

impl PullSources {
    /// Whether to make the packet from chunks: the store must serve them.
    pub fn delta(&self, remote: &Remote) -> Result<bool> {
        if self.whole {
            return Ok(false);
        }
        // A store that does not describe itself cannot offer delta transfer.
        match store_info(remote) {
            Ok(settings) => Ok(settings.delta),
            Err(CliError::Remote { exit, .. }) if exit != crate::error::EXIT_IO => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Opens the cache this pull uses, and its folder; `None` with
    /// `--no-cache` (what is fetched goes straight where it belongs).
    pub fn open_cache(&self) -> Result<Option<(Cache, Option<PathBuf>)>> {
        match &self.cache {
            CacheChoice::At { dir, max_bytes } => {
                Ok(Some((Cache::open(dir, *max_bytes)?, Some(dir.clone()))))
            }
            CacheChoice::Off => Ok(None),
        }
    }
}

/// `pull`. With `output` `-` the packet goes to stdout once verified.
pub fn pull(
    remote: &Remote,
    target: &PullTarget,
    output: &Path,
    sources: &PullSources,
    progress: &Progress,
) -> Result<PullReport> {
    let (digest, ref_name) = resolve(remote, target)?;
    let to_stdout = output == Path::new("-");
    let mut tmp = if to_stdout {
        let dir = std::env::temp_dir();
        tempfile::Builder::new()
            .prefix(".pillbox-pull-")
            .tempfile()
            .map_err(|e| CliError::io("create a spool file in", dir, e))?
    } else {
        let dir = match output.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        tempfile::Builder::new()
            .prefix(".pillbox-pull-")
            .tempfile_in(&dir)
            .map_err(|e| CliError::io("create a file in", dir, e))?
    };
    let started = Instant::now();
    let received_before = remote.traffic().received();
    let retries_before = remote.traffic().retries();
    // The temporary file is removed when `tmp` drops on any error below.
    let (manifest, size, resumed, delta) = if sources.delta(remote)? {
        let cache = sources.open_cache()?;
        let label = tmp.path().to_path_buf();
        let (manifest, report) = delta_pull::pull_into_file(
            remote,
            digest,
            &sources.bases,
            cache,
            tmp.as_file(),
            &label,
            progress,
        )?;
        let size = manifest.packet_size();
        (manifest, size, 0, Some(report))
    } else {
        let download = Download::start(remote, &digest, tmp.as_file())?;
        progress.phase("download", download.size);
        let options = ReaderOptions {
            expected_digest: Some(digest),
            ..ReaderOptions::default()
        };
        let read = packet_io::read_packet(&download, options, progress, &mut |_| Ok(()))?;
        let resumed = download.resumed.get();
        for _ in 0..resumed {
            remote.traffic().add_retry();
        }
        drop(download);
        (read.manifest, read.size, resumed, None)
    };
    progress.finish();
    let tmp_path = tmp.path().to_path_buf();
    let file = tmp.as_file_mut();
    file.flush()
        .and_then(|()| file.sync_all())
        .map_err(|e| CliError::io("write", &tmp_path, e))?;
    let output_label = if to_stdout {
        let mut f = tmp
            .reopen()
            .map_err(|e| CliError::io("reopen", &tmp_path, e))?;
        let mut out = io::stdout().lock();
        let mut buf = vec![0u8; CHUNK];
        loop {
            let n = f
                .read(&mut buf)
                .map_err(|e| CliError::io("read", &tmp_path, e))?;
            if n == 0 {
                break;
            }
            out.write_all(&buf[..n])
                .map_err(|e| CliError::io("write", "standard output", e))?;
        }
        out.flush()
            .map_err(|e| CliError::io("write", "standard output", e))?;
        "-".to_owned()
    } else {
        use std::os::unix::fs::PermissionsExt;
        fs::set_permissions(tmp.path(), fs::Permissions::from_mode(0o644))
            .map_err(|e| CliError::io("chmod", &tmp_path, e))?;
        tmp.persist(output)
            .map_err(|e| CliError::io("rename into", output, e.error))?;
        fs::canonicalize(output)
            .unwrap_or_else(|_| output.to_path_buf())
            .display()
            .to_string()
    };
    Ok(PullReport {
        schema: "pillbox.checkpoint.pull/1",
        digest: digest.to_string(),
        size,
        remote: remote.base().to_owned(),
        ref_name,
        output: output_label,
        members: manifest.totals.members,
        totals: manifest.totals,
        harness: manifest.harness.as_ref().map(HarnessReport::of),
        resumed,
        download_seconds: started.elapsed().as_secs_f64(),
        mode: if delta.is_some() { "delta" } else { "whole" },
        bytes_received: remote.traffic().received() - received_before,
        retries: remote.traffic().retries() - retries_before,
        delta,
    })
}

/// The digest to pull, and the ref it was named by.
pub fn resolve(remote: &Remote, target: &PullTarget) -> Result<(Digest, Option<String>)> {
    Ok(match target {
        PullTarget::Digest(d) => (*d, None),
        PullTarget::Prefix(p) => (super::digests::resolve(remote, p)?, None),
        PullTarget::Ref(name) => (resolve_ref(remote, name)?, Some(name.clone())),
    })
}

fn resolve_ref(remote: &Remote, name: &str) -> Result<Digest> {
    let path = ref_path(name);
    let what = format!("GET {path}");
    let mut r = remote.get(&what, &path)?;
    if r.status().as_u16() != 200 {
        return Err(status_error(&what, r));
    }
    ref_digest(&what, &mut r)
}

/// A packet being downloaded: the bytes read through it are also written
/// to the temporary file; a connection that drops is picked up again with
/// `Range: bytes=<received>-` (bounded by the retry policy).
struct Download<'a> {
    remote: &'a Remote,
    path: String,
    file: &'a File,
    size: u64,
    body: std::cell::RefCell<Option<ureq::BodyReader<'static>>>,
    received: std::cell::Cell<u64>,
    resumed: std::cell::Cell<u32>,
    opened: std::cell::Cell<bool>,
}

impl<'a> Download<'a> {
    fn start(remote: &'a Remote, digest: &Digest, file: &'a File) -> Result<Download<'a>> {
        let path = packet_path(digest);
        let what = format!("GET {path}");
        let r = remote.get(&what, &path)?;
        if r.status().as_u16() != 200 {
            return Err(status_error(&what, r));
        }
        let size = r
            .headers()
            .get("content-length")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0);
        Limits::FORMAT
            .check_packet_size(size)
            .map_err(CliError::Packet)?;
        Ok(Download {
            remote,
            path,
            file,
            size,
            body: std::cell::RefCell::new(Some(r.into_body().into_reader())),
            received: std::cell::Cell::new(0),
            resumed: std::cell::Cell::new(0),
            opened: std::cell::Cell::new(false),
        })
    }

    /// Asks for the rest of the packet after a dropped connection.
    fn reconnect(&self) -> io::Result<ureq::BodyReader<'static>> {
        let from = self.received.get();
        let response = self
            .remote
            .get_from(&self.path, from)
            .map_err(io::Error::other)?;
        let expected = format!("bytes {from}-");
        let range_ok = response
            .headers()
            .get("content-range")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with(&expected));
        if response.status().as_u16() != 206 || !range_ok {
            return Err(io::Error::other(format!(
                "the store did not continue the download at byte {from} (HTTP {})",
                response.status().as_u16()
            )));
        }
        Ok(response.into_body().into_reader())
    }
}

impl Read for &Download<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let mut attempt = 1;
        loop {
            let result = match self.body.borrow_mut().as_mut() {
                Some(body) => body.read(buf),
                None => Err(io::Error::other("the connection was lost")),
            };
            match result {
                Ok(n) => {
                    self.remote.traffic().add_received(n as u64);
                    let mut file = self.file;
                    file.write_all(&buf[..n])?;
                    self.received.set(self.received.get() + n as u64);
                    return Ok(n);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    let Some(delay) = self.remote.retry().delay_after(attempt) else {
                        return Err(e);
                    };
                    std::thread::sleep(delay);
                    attempt += 1;
                    *self.body.borrow_mut() = self.reconnect().ok();
                    if self.body.borrow().is_some() {
                        self.resumed.set(self.resumed.get() + 1);
                    }
                }
            }
        }
    }
}

impl PacketSource for Download<'_> {
    fn open_packet(&self) -> Result<Box<dyn Read + '_>> {
        if self.opened.replace(true) {
            return Err(Refused::DownloadReadTwice {}.into());
        }
        Ok(Box::new(self))
    }

    fn label(&self) -> String {
        format!("{}{}", self.remote.base(), self.path)
    }

    fn size_hint(&self) -> Option<u64> {
        Some(self.size)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pull_targets() {
        let d = Digest::of(b"packet");
        assert_eq!(
            PullTarget::parse(&d.to_string()).unwrap(),
            PullTarget::Digest(d)
        );
        assert_eq!(
            PullTarget::parse("sessions/x/latest").unwrap(),
            PullTarget::Ref("sessions/x/latest".into())
        );
        assert_eq!(PullTarget::parse("sha256:abc").unwrap_err().code(), "usage");
        assert_eq!(
            PullTarget::parse("sha256:0123abcd").unwrap(),
            PullTarget::Prefix(DigestPrefix::parse("sha256:0123abcd").unwrap())
        );
        assert_eq!(
            PullTarget::parse(&format!("sha256:{}", "A".repeat(64)))
                .unwrap_err()
                .code(),
            "usage"
        );
    }
}
