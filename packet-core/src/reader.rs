//! The strict streaming reader and verifier: a push parser in the manner of
//! csv-core. Feed it input in chunks of any size; it consumes some bytes
//! and may yield an [`Event`]. Memory stays bounded by the parsed manifest
//! and one header, whatever the packet size: `packet.json` is parsed as it
//! arrives, member by member, and its text is not kept.
//!
//! ```
//! use packet_core::{Event, Reader, ReaderOptions};
//! # let packet = packet_core::build::sample_packet();
//! let mut reader = Reader::new(ReaderOptions::default());
//! let mut files = 0;
//! for chunk in packet.chunks(1000) {
//!     let mut input = chunk;
//!     while !input.is_empty() {
//!         let (used, event) = reader.feed(input)?;
//!         input = &input[used..];
//!         if let Some(Event::MemberStart { .. }) = event {
//!             files += 1;
//!         }
//!     }
//! }
//! let verified = reader.finish()?;
//! assert_eq!(verified.members, files);
//! # Ok::<(), packet_core::Error>(())
//! ```

use alloc::vec::Vec;

use crate::digest::{Digest, Hasher};
use crate::error::{Error, ErrorCode};
use crate::header::{self, Fields, Kind, BLOCK, TYPE_PAX};
use crate::limits::Limits;
use crate::manifest::Manifest;
use crate::manifest_stream::ManifestStream;
use crate::path::{self, MANIFEST_PATH};

/// How a [`Reader`] checks a packet.
#[derive(Clone, Copy, Debug, Default)]
pub struct ReaderOptions {
    /// Limits to enforce (clamped to the format's).
    pub limits: Limits,
    /// The digest the whole packet must have, checked by [`Reader::finish`].
    pub expected_digest: Option<Digest>,
    /// Skip hashing the whole packet (the caller hashes it elsewhere, e.g.
    /// on another thread or with a platform digest stream, and compares the
    /// result itself). `expected_digest` is then ignored.
    pub skip_packet_digest: bool,
    /// Skip hashing member bodies. Only for a second read of a packet whose
    /// members were all verified in a first read: when this read's whole
    /// packet digest equals the digest of that first read, the bodies are
    /// the same bytes, so hashing them again proves nothing. Every other
    /// check (headers, order, sizes, padding, end marker) still runs. A
    /// caller that sets this MUST check the whole-packet digest of this
    /// read (`expected_digest`, or its own hash with `skip_packet_digest`)
    /// before trusting anything it read.
    pub skip_member_digests: bool,
}

/// Something the reader found.
#[derive(Debug, PartialEq, Eq)]
pub enum Event<'a> {
    /// `packet.json` was read and every member-set rule holds;
    /// [`Reader::manifest`] now returns it.
    Manifest,
    /// The header of `manifest.members[index]` matched the manifest.
    MemberStart {
        /// Index into the manifest's members.
        index: usize,
        /// Offset of the member's first header block (a PAX header when
        /// there is one).
        header_offset: u64,
        /// Offset of the member's first body byte.
        data_offset: u64,
    },
    /// A slice of the current member's body, borrowed from the input.
    Data(&'a [u8]),
    /// The current member's body ended and matched its sha256.
    MemberEnd {
        /// Index into the manifest's members.
        index: usize,
    },
}

/// What a successful read established.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Verified {
    /// The packet digest, unless hashing was skipped.
    pub digest: Option<Digest>,
    /// Bytes read.
    pub size: u64,
    /// Members after `packet.json`.
    pub members: usize,
}

#[derive(Debug)]
enum State {
    Header,
    Pax { size: u64, padded: u64 },
    Manifest { size: u64, padded: u64 },
    Body { index: usize, remaining: u64 },
    Padding { remaining: u64 },
    EndSecond,
    Done,
}

/// The streaming reader. See the module docs for the loop that drives it.
pub struct Reader {
    options: ReaderOptions,
    state: State,
    /// Bytes consumed so far.
    offset: u64,
    block: [u8; BLOCK],
    block_len: usize,
    /// Offset of the first byte of `block`.
    block_start: u64,
    /// The raw bytes of a pending PAX header (its header block and padded
    /// body), compared with the canonical encoding of the member it serves.
    pax_raw: Vec<u8>,
    pax_offset: u64,
    /// `packet.json`'s text as it arrives, and how many bytes of its
    /// padded body were consumed, and where its padding first held a
    /// non-zero byte.
    manifest_text: Option<ManifestStream>,
    manifest_read: u64,
    manifest_padding_nonzero: Option<u64>,
    manifest: Option<Manifest>,
    next_index: usize,
    pending_end: Option<usize>,
    body_hasher: Hasher,
    packet_hasher: Option<Hasher>,
    failed: Option<Error>,
}

impl Reader {
    /// A reader with the given options.
    pub fn new(options: ReaderOptions) -> Reader {
        let options = ReaderOptions {
            limits: options.limits.clamped(),
            ..options
        };
        Reader {
            options,
            state: State::Header,
            offset: 0,
            block: [0; BLOCK],
            block_len: 0,
            block_start: 0,
            pax_raw: Vec::new(),
            pax_offset: 0,
            manifest_text: None,
            manifest_read: 0,
            manifest_padding_nonzero: None,
            manifest: None,
            next_index: 0,
            pending_end: None,
            body_hasher: Hasher::new(),
            packet_hasher: (!options.skip_packet_digest).then(Hasher::new),
            failed: None,
        }
    }

    /// The manifest, once [`Event::Manifest`] has been yielded.
    pub fn manifest(&self) -> Option<&Manifest> {
        self.manifest.as_ref()
    }

    /// Takes the manifest out of a finished reader.
    pub fn into_manifest(self) -> Option<Manifest> {
        self.manifest
    }

    /// Bytes consumed so far.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// Consumes a prefix of `input` and possibly yields an event. Returns
    /// the number of bytes consumed; call again with the rest. Every call
    /// either consumes at least one byte or yields an event. After an error
    /// the reader stays failed.
    pub fn feed<'a>(&mut self, input: &'a [u8]) -> Result<(usize, Option<Event<'a>>), Error> {
        if let Some(e) = &self.failed {
            return Err(e.clone());
        }
        match self.step(input) {
            Ok((used, event)) => {
                if let Some(h) = &mut self.packet_hasher {
                    h.update(&input[..used]);
                }
                self.offset += used as u64;
                Ok((used, event))
            }
            Err(e) => {
                let e = e.at_offset(self.offset);
                self.failed = Some(e.clone());
                Err(e)
            }
        }
    }

    /// Ends the input. Fails if the packet is incomplete or, when an
    /// expected digest was given, if the packet's digest differs.
    pub fn finish(&mut self) -> Result<Verified, Error> {
        if let Some(e) = &self.failed {
            return Err(e.clone());
        }
        let result = self.finish_inner();
        if let Err(e) = &result {
            self.failed = Some(e.clone());
        }
        result
    }

    fn finish_inner(&mut self) -> Result<Verified, Error> {
        if !matches!(self.state, State::Done) || self.pending_end.is_some() {
            let what = match (&self.state, &self.manifest) {
                (_, None) => alloc::string::String::from("before packet.json was complete"),
                (State::EndSecond, _) => {
                    alloc::string::String::from("inside the end-of-archive marker")
                }
                (_, Some(m)) => match m.members.get(self.next_index.saturating_sub(1)) {
                    Some(e) => alloc::format!("inside or after member {:?}", e.path),
                    None => alloc::string::String::from("before the end-of-archive marker"),
                },
            };
            return Err(Error::new(
                ErrorCode::Truncated,
                alloc::format!("the packet ends after {} bytes, {what}", self.offset),
            )
            .at_offset(self.offset));
        }
        let digest = self.packet_hasher.take().map(Hasher::finish);
        if let (Some(expected), Some(got)) = (self.options.expected_digest, digest) {
            if expected != got {
                return Err(Error::new(
                    ErrorCode::PacketDigestMismatch,
                    alloc::format!("expected {expected}, the packet is {got}"),
                ));
            }
        }
        Ok(Verified {
            digest,
            size: self.offset,
            members: self.manifest.as_ref().map_or(0, |m| m.members.len()),
        })
    }

    fn step<'a>(&mut self, input: &'a [u8]) -> Result<(usize, Option<Event<'a>>), Error> {
        if let Some(index) = self.pending_end.take() {
            return Ok((0, Some(Event::MemberEnd { index })));
        }
        if self.offset > self.options.limits.max_packet_bytes {
            return Err(Error::new(
                ErrorCode::LimitSize,
                alloc::format!(
                    "the packet is larger than the limit of {} bytes",
                    self.options.limits.max_packet_bytes
                ),
            ));
        }
        match self.state {
            State::Header | State::EndSecond => {
                let used = self.fill_block(input);
                if self.block_len < BLOCK {
                    return Ok((used, None));
                }
                self.block_len = 0;
                let event = self.on_block()?;
                Ok((used, event))
            }
            State::Pax { size, padded } => {
                let used = self.fill_pax(input, padded);
                if (self.pax_raw.len() - BLOCK) as u64 == padded {
                    let start = BLOCK + size as usize;
                    if let Some(i) = header::first_nonzero(&self.pax_raw[start..]) {
                        // Errors carry the offending byte's offset, which
                        // does not depend on how the input was chunked.
                        return Err(Error::new(
                            ErrorCode::PaddingNotZero,
                            "the padding after a PAX header's records is not zero",
                        )
                        .at_offset(self.pax_offset + (start + i) as u64));
                    }
                    self.state = State::Header;
                }
                Ok((used, None))
            }
            State::Manifest { size, padded } => {
                let n = ((padded - self.manifest_read).min(input.len() as u64)) as usize;
                let text_left = size.saturating_sub(self.manifest_read) as usize;
                let (text, padding) = input[..n].split_at(n.min(text_left));
                if let Some(stream) = &mut self.manifest_text {
                    stream.feed(text);
                }
                if self.manifest_padding_nonzero.is_none() {
                    if let Some(i) = header::first_nonzero(padding) {
                        let at = self.manifest_read + text.len() as u64 + i as u64;
                        self.manifest_padding_nonzero = Some(at);
                    }
                }
                self.manifest_read += n as u64;
                let used = n;
                if self.manifest_read == padded {
                    // packet.json's body starts right after its header,
                    // the first block of the packet.
                    let body_start = BLOCK as u64;
                    if let Some(at) = self.manifest_padding_nonzero {
                        return Err(Error::new(
                            ErrorCode::PaddingNotZero,
                            "the padding after packet.json is not zero",
                        )
                        .at_path(MANIFEST_PATH)
                        .at_offset(body_start + at));
                    }
                    let stream = self
                        .manifest_text
                        .take()
                        .unwrap_or_else(ManifestStream::new);
                    let manifest = stream
                        .finish(&self.options.limits, size)
                        .map_err(|e| e.at_offset(body_start))?;
                    self.manifest = Some(manifest);
                    self.state = State::Header;
                    return Ok((used, Some(Event::Manifest)));
                }
                Ok((used, None))
            }
            State::Body { index, remaining } => {
                let n = (remaining.min(input.len() as u64)) as usize;
                let data = &input[..n];
                let check = !self.options.skip_member_digests;
                if check {
                    self.body_hasher.update(data);
                }
                let remaining = remaining - n as u64;
                if remaining == 0 {
                    let hasher = core::mem::take(&mut self.body_hasher);
                    let got = if check { Some(hasher.finish()) } else { None };
                    let entry = &self.manifest_ref()?.members[index];
                    if let Some(got) = got.filter(|g| Some(*g) != entry.sha256) {
                        // At the body's first byte, whatever the chunking.
                        let data_offset = (self.offset + n as u64).saturating_sub(entry.size);
                        return Err(Error::new(
                            ErrorCode::MemberDigestMismatch,
                            alloc::format!(
                                "the bytes hash to {}, the manifest says {}",
                                got.hex(),
                                entry
                                    .sha256
                                    .map(|d| alloc::string::ToString::to_string(&d.hex()))
                                    .unwrap_or_default()
                            ),
                        )
                        .at_path(&entry.path)
                        .at_offset(data_offset));
                    }
                    let pad = header::padded(entry.size) - entry.size;
                    self.state = if pad == 0 {
                        State::Header
                    } else {
                        State::Padding { remaining: pad }
                    };
                    self.pending_end = Some(index);
                } else {
                    self.state = State::Body { index, remaining };
                }
                Ok((n, Some(Event::Data(data))))
            }
            State::Padding { remaining } => {
                let n = (remaining.min(input.len() as u64)) as usize;
                if let Some(i) = header::first_nonzero(&input[..n]) {
                    let path = self
                        .manifest
                        .as_ref()
                        .and_then(|m| m.members.get(self.next_index.wrapping_sub(1)))
                        .map(|e| e.path.clone())
                        .unwrap_or_default();
                    return Err(Error::new(
                        ErrorCode::PaddingNotZero,
                        "the padding after the body is not zero",
                    )
                    .at_path(path)
                    .at_offset(self.offset + i as u64));
                }
                let remaining = remaining - n as u64;
                self.state = if remaining == 0 {
                    State::Header
                } else {
                    State::Padding { remaining }
                };
                Ok((n, None))
            }
            State::Done => {
                if input.is_empty() {
                    Ok((0, None))
                } else {
                    Err(Error::new(
                        ErrorCode::TrailingData,
                        "bytes follow the end-of-archive marker (two zero blocks end a packet, with nothing after them)",
                    ))
                }
            }
        }
    }

    fn manifest_ref(&self) -> Result<&Manifest, Error> {
        self.manifest
            .as_ref()
            .ok_or_else(|| Error::new(ErrorCode::Usage, "no manifest yet"))
    }

    fn fill_block(&mut self, input: &[u8]) -> usize {
        if self.block_len == 0 {
            // Each call's input starts at `self.offset`.
            self.block_start = self.offset;
        }
        let n = (BLOCK - self.block_len).min(input.len());
        self.block[self.block_len..self.block_len + n].copy_from_slice(&input[..n]);
        self.block_len += n;
        n
    }

    /// Appends to the PAX buffer until it holds `padded` body bytes.
    fn fill_pax(&mut self, input: &[u8], padded: u64) -> usize {
        let have = (self.pax_raw.len() - BLOCK) as u64;
        let n = ((padded - have).min(input.len() as u64)) as usize;
        self.pax_raw.extend_from_slice(&input[..n]);
        n
    }

    fn on_block(&mut self) -> Result<Option<Event<'static>>, Error> {
        let at = self.block_start;
        self.on_block_inner().map_err(|e| e.at_offset(at))
    }

    fn on_block_inner(&mut self) -> Result<Option<Event<'static>>, Error> {
        if header::is_zero_block(&self.block) {
            return self.on_zero_block();
        }
        if matches!(self.state, State::EndSecond) {
            return Err(Error::new(
                ErrorCode::EndMarker,
                "the end-of-archive marker is one zero block followed by a non-zero block",
            ));
        }
        // A copy, so that the decoded fields borrow it rather than `self`.
        let block = self.block;
        let raw = header::decode_fields(&block)?;
        if raw.typeflag == TYPE_PAX {
            return self.on_pax_header(&raw).map(|()| None);
        }
        if self.manifest.is_none() {
            return self.on_manifest_header(&raw).map(|()| None);
        }
        self.on_member_header(&raw).map(Some)
    }

    fn on_zero_block(&mut self) -> Result<Option<Event<'static>>, Error> {
        if matches!(self.state, State::EndSecond) {
            self.state = State::Done;
            return Ok(None);
        }
        if !self.pax_raw.is_empty() {
            return Err(Error::new(
                ErrorCode::PaxInvalid,
                "a PAX header is followed by the end of the archive, not by a member",
            ));
        }
        let Some(manifest) = &self.manifest else {
            return Err(Error::new(
                ErrorCode::ManifestNotFirst,
                "the archive ends before packet.json",
            ));
        };
        if let Some(missing) = manifest.members.get(self.next_index) {
            return Err(Error::new(
                ErrorCode::MemberMissing,
                "the manifest lists this member but the archive ends before it",
            )
            .at_path(&missing.path));
        }
        self.state = State::EndSecond;
        Ok(None)
    }

    fn on_pax_header(&mut self, raw: &Fields<'_>) -> Result<(), Error> {
        if !self.pax_raw.is_empty() {
            return Err(Error::new(
                ErrorCode::PaxInvalid,
                "two PAX headers in a row: at most one precedes a member",
            ));
        }
        if raw.size == 0 || raw.size > header::MAX_PAX_BYTES {
            return Err(Error::new(
                ErrorCode::PaxInvalid,
                alloc::format!(
                    "a PAX header of {} bytes (at most {} are needed for a path and a link path)",
                    raw.size,
                    header::MAX_PAX_BYTES
                ),
            ));
        }
        if self.block != header::pax_header_block(raw.size) {
            return Err(Error::new(
                ErrorCode::HeaderNotCanonical,
                "the PAX header's own header block is not the canonical one",
            ));
        }
        self.pax_offset = self.block_start;
        self.pax_raw.extend_from_slice(&self.block);
        self.state = State::Pax {
            size: raw.size,
            padded: header::padded(raw.size),
        };
        Ok(())
    }

    fn on_manifest_header(&mut self, raw: &Fields<'_>) -> Result<(), Error> {
        if !self.pax_raw.is_empty() {
            // docs/session-packet.md §4: packet.json never needs a PAX header.
            return Err(Error::new(
                ErrorCode::PaxInvalid,
                "a PAX header precedes the first member: packet.json never has one",
            ));
        }
        if !raw.path_is(MANIFEST_PATH.as_bytes()) || raw.typeflag != header::TYPE_FILE {
            return Err(Error::new(
                ErrorCode::ManifestNotFirst,
                alloc::format!(
                    "the first member is {:?}, it must be the regular file packet.json",
                    alloc::string::String::from_utf8_lossy(&raw.path())
                ),
            ));
        }
        if raw.size > self.options.limits.max_manifest_bytes {
            return Err(Error::new(
                ErrorCode::LimitManifest,
                alloc::format!(
                    "packet.json declares {} bytes, the limit is {}",
                    raw.size,
                    self.options.limits.max_manifest_bytes
                ),
            )
            .at_path(MANIFEST_PATH));
        }
        let mut expected = Vec::with_capacity(BLOCK);
        header::encode(
            &header::HeaderSpec {
                path: MANIFEST_PATH,
                kind: Kind::File,
                mode: 0o644,
                size: raw.size,
                target: "",
            },
            &mut expected,
        );
        if expected[..] != self.block[..] {
            return Err(Error::new(
                ErrorCode::HeaderNotCanonical,
                "the header of packet.json is not the canonical one (mode 0644, all other fields zero)",
            )
            .at_path(MANIFEST_PATH));
        }
        self.manifest_text = Some(ManifestStream::new());
        self.manifest_read = 0;
        self.manifest_padding_nonzero = None;
        self.state = State::Manifest {
            size: raw.size,
            padded: header::padded(raw.size),
        };
        Ok(())
    }

    fn on_member_header(&mut self, raw: &Fields<'_>) -> Result<Event<'static>, Error> {
        let manifest = self
            .manifest
            .take()
            .ok_or_else(|| Error::new(ErrorCode::Usage, "no manifest yet"))?;
        let result = self.check_member_header(&manifest, raw);
        self.manifest = Some(manifest);
        result
    }

    fn check_member_header(
        &mut self,
        manifest: &Manifest,
        raw: &Fields<'_>,
    ) -> Result<Event<'static>, Error> {
        let limits = self.options.limits;
        let pax = if self.pax_raw.is_empty() {
            None
        } else {
            let size = {
                let pax_block: &[u8; BLOCK] = self.pax_raw[..BLOCK]
                    .try_into()
                    .map_err(|_| Error::new(ErrorCode::Usage, "PAX buffer shorter than a block"))?;
                header::decode_fields(pax_block)?.size as usize
            };
            Some(header::decode_pax(&self.pax_raw[BLOCK..BLOCK + size])?)
        };
        let pax_path = pax.as_ref().and_then(|p| p.path.as_deref());
        if pax_path.is_some() && !raw.path_is_empty() {
            return Err(Error::new(
                ErrorCode::PaxInvalid,
                "a PAX path is given, so the ustar name and prefix must be empty",
            ));
        }
        let expected = manifest.members.get(self.next_index);
        let stored_path = |path: &[u8]| match pax_path {
            Some(p) => p == path,
            None => raw.path_is(path),
        };
        let path_buf;
        let path = match expected {
            // The manifest's paths passed the same check when it was read.
            Some(entry) if stored_path(entry.path.as_bytes()) => entry.path.as_str(),
            _ => match pax_path {
                Some(p) => path::check_member_path(p, limits.max_path_bytes)?,
                None => {
                    path_buf = raw.path();
                    path::check_member_path(&path_buf, limits.max_path_bytes)?
                }
            },
        };
        let Some(entry) = expected else {
            return Err(Error::new(
                ErrorCode::MemberUnexpected,
                "the archive holds a member after the last one the manifest lists",
            )
            .at_path(path));
        };
        if entry.path != path {
            let previous = self
                .next_index
                .checked_sub(1)
                .and_then(|i| manifest.members.get(i));
            let code = if previous.is_some_and(|p| p.path == path) {
                ErrorCode::MemberDuplicate
            } else if manifest.find(path).is_some() {
                ErrorCode::MemberUnsorted
            } else {
                ErrorCode::MemberUnexpected
            };
            return Err(Error::new(
                code,
                alloc::format!(
                    "the archive has this member where the manifest lists {:?}",
                    entry.path
                ),
            )
            .at_path(path));
        }
        let kind = match raw.typeflag {
            header::TYPE_FILE => Kind::File,
            header::TYPE_DIR => Kind::Dir,
            _ => Kind::Symlink,
        };
        let mismatch = |what: alloc::string::String| {
            Error::new(ErrorCode::MemberMismatch, what).at_path(&entry.path)
        };
        if kind != entry.kind {
            return Err(mismatch(alloc::format!(
                "the archive has a {}, the manifest a {}",
                kind.as_str(),
                entry.kind.as_str()
            )));
        }
        let canonical_mode = match kind {
            Kind::File => raw.mode == 0o644 || raw.mode == 0o755,
            Kind::Dir => raw.mode == 0o755,
            Kind::Symlink => raw.mode == 0o777,
        };
        if !canonical_mode {
            return Err(Error::new(
                ErrorCode::ModeNotCanonical,
                alloc::format!(
                    "mode {:o} is not canonical for a {}",
                    raw.mode,
                    kind.as_str()
                ),
            )
            .at_path(&entry.path));
        }
        if raw.mode != entry.mode {
            return Err(mismatch(alloc::format!(
                "the archive has mode {:o}, the manifest {:o}",
                raw.mode,
                entry.mode
            )));
        }
        if raw.size != entry.size {
            return Err(mismatch(alloc::format!(
                "the header declares {} bytes, the manifest {}",
                raw.size,
                entry.size
            )));
        }
        if kind == Kind::Symlink {
            let target_bytes = match pax.as_ref().and_then(|p| p.linkpath.as_ref()) {
                Some(t) if raw.linkname.is_empty() => t.as_slice(),
                Some(_) => {
                    return Err(Error::new(
                        ErrorCode::PaxInvalid,
                        "a PAX linkpath is given, so the ustar linkname must be empty",
                    )
                    .at_path(&entry.path))
                }
                None => raw.linkname,
            };
            if Some(target_bytes) != entry.target.as_deref().map(str::as_bytes) {
                return Err(mismatch(alloc::format!(
                    "the archive's link target {:?} differs from the manifest's",
                    alloc::string::String::from_utf8_lossy(target_bytes)
                )));
            }
        }
        if let Some(p) = &pax {
            let unneeded_path = p.path.is_some() && !header::needs_pax_path(&entry.path);
            let target = entry.target.as_deref().unwrap_or("");
            let unneeded_link = p.linkpath.is_some()
                && (kind != Kind::Symlink || !header::needs_pax_linkpath(target));
            if unneeded_path || unneeded_link {
                return Err(Error::new(
                    ErrorCode::PaxInvalid,
                    "a PAX header is used where the ustar fields suffice",
                )
                .at_path(&entry.path));
            }
        }
        // The header bytes seen (PAX header, if any, then this block) must
        // be the member's one encoding.
        let spec = entry.header_spec();
        let had_pax = !self.pax_raw.is_empty();
        let canonical = if had_pax {
            let mut expected = Vec::with_capacity(self.pax_raw.len() + BLOCK);
            header::encode(&spec, &mut expected);
            let mut seen = core::mem::take(&mut self.pax_raw);
            seen.extend_from_slice(&self.block);
            expected == seen
        } else {
            header::single_block(&spec).is_some_and(|b| b == self.block)
        };
        if !canonical {
            return Err(Error::new(
                ErrorCode::HeaderNotCanonical,
                "the header differs from the format's one encoding of this member",
            )
            .at_path(&entry.path));
        }
        let index = self.next_index;
        self.next_index += 1;
        let data_offset = self.block_start + BLOCK as u64;
        let header_offset = if had_pax {
            self.pax_offset
        } else {
            self.block_start
        };
        if kind == Kind::File && entry.size > 0 {
            self.body_hasher = Hasher::new();
            self.state = State::Body {
                index,
                remaining: entry.size,
            };
        } else {
            if kind == Kind::File && entry.sha256 != Some(Digest::EMPTY) {
                return Err(Error::new(
                    ErrorCode::MemberDigestMismatch,
                    "the file is empty but the manifest's sha256 is not that of no bytes",
                )
                .at_path(&entry.path));
            }
            self.state = State::Header;
            self.pending_end = Some(index);
        }
        Ok(Event::MemberStart {
            index,
            header_offset,
            data_offset,
        })
    }
}

/// Verifies a whole packet held in memory.
pub fn verify(bytes: &[u8], options: ReaderOptions) -> Result<(Manifest, Verified), Error> {
    let mut reader = Reader::new(options);
    let mut input = bytes;
    while !input.is_empty() {
        let (used, _) = reader.feed(input)?;
        input = &input[used..];
    }
    let verified = reader.finish()?;
    let manifest = reader
        .into_manifest()
        .ok_or_else(|| Error::new(ErrorCode::Usage, "verified packet without a manifest"))?;
    Ok((manifest, verified))
}
