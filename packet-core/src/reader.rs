//! The strict streaming reader and verifier. Feed it a packet in chunks of
//! any size; each call consumes the whole chunk and reports, through a
//! callback, every [`Event`] about that chunk's bytes. Memory stays bounded
//! by the parsed manifest, one offset per member and one header, whatever
//! the packet size: `packet.json` is parsed as it arrives, member by
//! member, and its text is not kept.
//!
//! Finishing consumes the reader and yields a [`VerifiedPacket`], once the
//! structure is complete and the whole packet's digest is known and equal
//! to the expected one. The reader hashes the packet itself, or (a
//! [`Reader<HashedElsewhere>`]) leaves it to the caller, who hands the
//! digest to [`Reader::finish_with_digest`].
//!
//! ```
//! use packet_core::{Event, Reader, ReaderOptions};
//! # let packet = packet_core::in_memory::sample_packet();
//! let mut reader = Reader::new(ReaderOptions::default());
//! let mut ended = 0;
//! for chunk in packet.chunks(1000) {
//!     reader.feed_with(chunk, |event| {
//!         if let Event::MemberEnd { .. } = event {
//!             ended += 1;
//!         }
//!         Ok::<(), packet_core::Error>(())
//!     })?;
//! }
//! let verified = reader.finish()?;
//! assert_eq!(verified.manifest.members.len(), ended);
//! # Ok::<(), packet_core::Error>(())
//! ```

use alloc::vec::Vec;
use core::ops::Range;

use crate::digest::{Digest, Hasher};
use crate::error::{Error, ErrorCode};
use crate::findings::{Collector, Findings};
#[cfg(test)]
use crate::format::Format;
use crate::header::{self, Fields, HeaderSpec, Kind, BLOCK, TYPE_PAX};
use crate::limits::Limits;
use crate::manifest::stream::ManifestStream;
use crate::manifest::{Manifest, Member};
use crate::path::{self, MANIFEST_PATH};

/// How a [`Reader`] checks a packet.
#[derive(Clone, Copy, Debug, Default)]
pub struct ReaderOptions {
    /// Limits to enforce (clamped to the format's).
    pub limits: Limits,
    /// The digest the packet must have (docs/session-packet.md §9): for a
    /// /2 packet, its `packet.json`'s, checked as soon as that is read and
    /// before any other member; for a /1 packet, the whole file's, checked
    /// when the reader finishes, whoever hashed the packet.
    pub expected_digest: Option<Digest>,
}

/// Something the reader found, reported while it reads the chunk holding
/// it: when [`Reader::feed_with`] returns, every event about the chunk's
/// bytes has been reported.
#[derive(Debug, PartialEq, Eq)]
pub enum Event<'a> {
    /// `packet.json` was read and every member-set rule holds.
    Manifest(&'a Manifest),
    /// The header of `manifest.members[index]` matched the manifest.
    MemberStart {
        /// Index into the manifest's members.
        index: usize,
        /// The member.
        member: &'a Member,
        /// Offset of the member's first header block (a PAX header when
        /// there is one).
        header_offset: u64,
        /// Offset of the member's first body byte.
        data_offset: u64,
    },
    /// A slice of the current member's body, borrowed from the input.
    Data(&'a [u8]),
    /// The current member ended (a file's body matched its sha256).
    MemberEnd {
        /// Index into the manifest's members.
        index: usize,
    },
}

/// A packet read to its end, or assembled from bodies
/// ([`crate::assembled`]): every check passed and its digest is known (and
/// equal to the expected one, when one was given).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct VerifiedPacket {
    /// Its manifest.
    pub manifest: Manifest,
    /// The whole packet's digest.
    pub digest: Digest,
    /// Its size in bytes.
    pub size: u64,
    /// `data_offsets[i]` is the offset of `manifest.members[i]`'s first body
    /// byte (for a member without a body, where it would start).
    pub data_offsets: Vec<u64>,
    /// Where `packet.json`'s bytes are in the packet.
    pub manifest_range: Range<u64>,
    /// What the packet holds that a person should know before restoring
    /// it: secrets, and git settings and hooks that run programs
    /// (docs/session-packet.md §7.4). Found in the same pass, from the
    /// same bytes; never a reason to refuse the packet.
    pub findings: Findings,
}

mod sealed {
    pub trait Sealed {}
}

/// Who hashes the whole packet while a [`Reader`] reads it: the reader
/// itself ([`Hasher`], the default) or its caller ([`HashedElsewhere`]).
pub trait PacketHash: sealed::Sealed {
    #[doc(hidden)]
    fn update(&mut self, bytes: &[u8]);
}

impl sealed::Sealed for Hasher {}

impl PacketHash for Hasher {
    fn update(&mut self, bytes: &[u8]) {
        Hasher::update(self, bytes);
    }
}

/// The caller hashes the same bytes elsewhere (another thread, a platform
/// digest stream) and hands the digest to [`Reader::finish_with_digest`].
/// Only a /1 packet needs it ([`Reader::whole_hash_needed`]).
#[derive(Clone, Copy, Debug, Default)]
pub struct HashedElsewhere;

impl sealed::Sealed for HashedElsewhere {}

impl PacketHash for HashedElsewhere {
    fn update(&mut self, _: &[u8]) {}
}

/// The streaming reader. See the module docs for the loop that drives it.
pub struct Reader<H: PacketHash = Hasher> {
    options: ReaderOptions,
    packet_hash: H,
    manifest: Option<Manifest>,
    data_offsets: Vec<u64>,
    parser: Parser,
    failed: Option<Error>,
    collector: Collector,
    /// Whether the whole packet is still being hashed: until `packet.json`
    /// shows a /2 packet, which its manifest names.
    whole_hash: bool,
    /// The SHA-256 of `packet.json`'s bytes, once read.
    manifest_digest: Digest,
}

impl Reader {
    /// A reader that hashes the whole packet as it reads it.
    pub fn new(options: ReaderOptions) -> Reader {
        Reader::with_hash(options, Hasher::new())
    }

    /// Ends the input. Fails if the packet is incomplete or, when an
    /// expected digest was given, if the packet's digest differs.
    pub fn finish(self) -> Result<VerifiedPacket, Error> {
        let (ended, hash) = self.end()?;
        let digest = if ended.manifest.format.named_by_manifest() {
            ended.manifest_digest
        } else {
            hash.finish()
        };
        ended.with_digest(digest)
    }
}

impl Reader<HashedElsewhere> {
    /// A reader that leaves the whole-packet digest to its caller.
    pub fn hashed_elsewhere(options: ReaderOptions) -> Reader<HashedElsewhere> {
        Reader::with_hash(options, HashedElsewhere)
    }

    /// Ends the input. `whole` is the whole packet's digest, computed by
    /// the caller over exactly the bytes fed: a /1 packet's name, which it
    /// needs; a /2 packet is named by its manifest and does not consult it
    /// ([`Reader::whole_hash_needed`]). Fails if the packet is incomplete,
    /// if a /1 packet's whole digest is not given or, when an expected
    /// digest was given, if the packet's digest differs from it.
    pub fn finish_with_digest(self, whole: Option<Digest>) -> Result<VerifiedPacket, Error> {
        let (ended, _) = self.end()?;
        match (ended.manifest.format.named_by_manifest(), whole) {
            (true, _) => {
                let digest = ended.manifest_digest;
                ended.with_digest(digest)
            }
            (false, Some(d)) => ended.with_digest(d),
            (false, None) => Err(Error::new(
                ErrorCode::PacketDigestMismatch,
                "a pillbox.session-packet/1 is named by the hash of the whole file, and it was not computed",
            )),
        }
    }
}

impl<H: PacketHash> Reader<H> {
    fn with_hash(options: ReaderOptions, packet_hash: H) -> Reader<H> {
        Reader {
            options: ReaderOptions {
                limits: options.limits.clamped(),
                ..options
            },
            packet_hash,
            manifest: None,
            data_offsets: Vec::new(),
            parser: Parser::new(),
            failed: None,
            collector: Collector::new(),
            whole_hash: true,
            manifest_digest: Digest::EMPTY,
        }
    }

    /// Whether the caller of a [`Reader<HashedElsewhere>`] must hash the
    /// whole packet: `None` until `packet.json` is read, then `Some(true)`
    /// for a /1 packet (named by the whole file) and `Some(false)` for a /2
    /// packet (named by its manifest).
    pub fn whole_hash_needed(&self) -> Option<bool> {
        self.manifest
            .as_ref()
            .map(|m| !m.format.named_by_manifest())
    }

    /// The manifest, once [`Event::Manifest`] has been reported.
    pub fn manifest(&self) -> Option<&Manifest> {
        self.manifest.as_ref()
    }

    /// Bytes consumed so far.
    pub fn offset(&self) -> u64 {
        self.parser.offset
    }

    /// Reads `chunk`, ignoring the events.
    pub fn feed(&mut self, chunk: &[u8]) -> Result<(), Error> {
        self.feed_with(chunk, |_| Ok(()))
    }

    /// Reads `chunk`, reporting every event about its bytes to `on_event`
    /// in order. A refusal is returned, and returned again by every later
    /// call. An error from `on_event` stops the reading right after that
    /// event's bytes ([`Reader::offset`] tells where) and is returned.
    pub fn feed_with<E: From<Error>>(
        &mut self,
        chunk: &[u8],
        mut on_event: impl FnMut(Event<'_>) -> Result<(), E>,
    ) -> Result<(), E> {
        if let Some(e) = &self.failed {
            return Err(e.clone().into());
        }
        let mut input = chunk;
        let result = loop {
            if input.is_empty() && self.parser.pending_end.is_none() {
                break Ok(());
            }
            let start = self.parser.offset;
            let (used, found) = match self
                .parser
                .step(input, self.manifest.as_ref(), &self.options)
            {
                Ok(step) => step,
                Err(e) => {
                    let e = e.at_offset(start);
                    self.failed = Some(e.clone());
                    break Err(e.into());
                }
            };
            let (consumed, rest) = input.split_at(used);
            input = rest;
            let event = match found {
                None => continue,
                Some(Found::Manifest(manifest, json_digest)) => {
                    if manifest.format.named_by_manifest() {
                        self.whole_hash = false;
                        self.manifest_digest = json_digest;
                        if let Some(expected) =
                            self.options.expected_digest.filter(|e| *e != json_digest)
                        {
                            // Before any member is read: the manifest names
                            // every other byte of the packet.
                            let e = Error::new(
                                ErrorCode::PacketDigestMismatch,
                                alloc::format!(
                                    "expected {expected}, this packet's manifest is {json_digest}"
                                ),
                            )
                            .at_path(MANIFEST_PATH)
                            .at_offset(BLOCK as u64);
                            self.failed = Some(e.clone());
                            break Err(e.into());
                        }
                    }
                    self.data_offsets.reserve_exact(manifest.members.len());
                    self.collector.manifest(&manifest);
                    Event::Manifest(self.manifest.insert(*manifest))
                }
                Some(Found::MemberStart {
                    index,
                    member,
                    header_offset,
                    data_offset,
                }) => {
                    self.data_offsets.push(data_offset);
                    self.collector.start(member);
                    Event::MemberStart {
                        index,
                        member,
                        header_offset,
                        data_offset,
                    }
                }
                Some(Found::Data) => {
                    self.collector.data(consumed);
                    Event::Data(consumed)
                }
                Some(Found::MemberEnd { index }) => {
                    self.collector.end();
                    Event::MemberEnd { index }
                }
            };
            if let Err(e) = on_event(event) {
                break Err(e);
            }
        };
        if self.whole_hash {
            self.packet_hash.update(&chunk[..chunk.len() - input.len()]);
        }
        result
    }

    /// The structure's end: the packet is complete (or the refusal).
    fn end(self) -> Result<(Ended, H), Error> {
        if let Some(e) = self.failed {
            return Err(e);
        }
        let offset = self.parser.offset;
        match (&self.parser.state, self.manifest) {
            (State::Done, Some(manifest)) => Ok((
                Ended {
                    manifest,
                    size: offset,
                    data_offsets: self.data_offsets,
                    manifest_range: BLOCK as u64..BLOCK as u64 + self.parser.manifest_len,
                    expected: self.options.expected_digest,
                    findings: self.collector.finish(),
                    manifest_digest: self.manifest_digest,
                },
                self.packet_hash,
            )),
            (state, manifest) => {
                let what = match (state, &manifest) {
                    (_, None) => alloc::string::String::from("before packet.json was complete"),
                    (State::EndSecond, _) => {
                        alloc::string::String::from("inside the end-of-archive marker")
                    }
                    (_, Some(m)) => match m.members.get(self.parser.next_index.saturating_sub(1)) {
                        Some(e) => alloc::format!("inside or after member {:?}", e.path),
                        None => alloc::string::String::from("before the end-of-archive marker"),
                    },
                };
                Err(Error::new(
                    ErrorCode::Truncated,
                    alloc::format!("the packet ends after {offset} bytes, {what}"),
                )
                .at_offset(offset))
            }
        }
    }
}

/// A packet whose structure is complete, waiting for its digest.
struct Ended {
    manifest: Manifest,
    size: u64,
    data_offsets: Vec<u64>,
    manifest_range: Range<u64>,
    expected: Option<Digest>,
    findings: Findings,
    manifest_digest: Digest,
}

impl Ended {
    fn with_digest(self, digest: Digest) -> Result<VerifiedPacket, Error> {
        if let Some(expected) = self.expected.filter(|e| *e != digest) {
            return Err(Error::new(
                ErrorCode::PacketDigestMismatch,
                alloc::format!("expected {expected}, the packet is {digest}"),
            ));
        }
        Ok(VerifiedPacket {
            manifest: self.manifest,
            digest,
            size: self.size,
            data_offsets: self.data_offsets,
            manifest_range: self.manifest_range,
            findings: self.findings,
        })
    }
}

/// Verifies a whole packet held in memory.
pub fn verify(bytes: &[u8], options: ReaderOptions) -> Result<VerifiedPacket, Error> {
    let mut reader = Reader::new(options);
    reader.feed(bytes)?;
    reader.finish()
}

/// What one step of the parser found in the bytes it consumed.
enum Found<'m> {
    /// Boxed: a manifest is much larger than the other findings. With the
    /// SHA-256 of its bytes.
    Manifest(alloc::boxed::Box<Manifest>, Digest),
    MemberStart {
        index: usize,
        member: &'m Member,
        header_offset: u64,
        data_offset: u64,
    },
    /// The bytes consumed are body data.
    Data,
    MemberEnd {
        index: usize,
    },
}

#[derive(Debug)]
enum State {
    Header,
    Pax {
        size: u64,
        padded: u64,
    },
    Manifest {
        size: u64,
        padded: u64,
    },
    Body {
        index: usize,
        remaining: u64,
        /// The manifest's sha256 of the body.
        expected: Digest,
        /// Where the body starts (errors point there).
        data_offset: u64,
        /// Padding after the body.
        padding: u64,
    },
    Padding {
        remaining: u64,
    },
    EndSecond,
    Done,
}

/// The parse state: everything a step changes.
struct Parser {
    state: State,
    /// Bytes consumed so far.
    offset: u64,
    block: [u8; BLOCK],
    block_len: usize,
    /// Offset of the first byte of `block`.
    block_start: u64,
    /// The raw bytes of a pending PAX header (its header block and padded
    /// body), compared with the canonical encoding of the member it serves,
    /// and the length of its records.
    pax_raw: Vec<u8>,
    pax_size: usize,
    pax_offset: u64,
    /// `packet.json`'s text as it arrives, its length, how many bytes of
    /// its padded body were consumed, and where its padding first held a
    /// non-zero byte.
    manifest_text: Option<ManifestStream>,
    manifest_len: u64,
    manifest_read: u64,
    manifest_padding_nonzero: Option<u64>,
    next_index: usize,
    /// A member that ended with the last step's bytes; reported by the
    /// next step, which consumes nothing.
    pending_end: Option<usize>,
    body_hasher: Hasher,
    /// `packet.json`'s bytes, hashed as they arrive.
    manifest_hasher: Hasher,
}

impl Parser {
    fn new() -> Parser {
        Parser {
            state: State::Header,
            offset: 0,
            block: [0; BLOCK],
            block_len: 0,
            block_start: 0,
            pax_raw: Vec::new(),
            pax_size: 0,
            pax_offset: 0,
            manifest_text: None,
            manifest_len: 0,
            manifest_read: 0,
            manifest_padding_nonzero: None,
            next_index: 0,
            pending_end: None,
            body_hasher: Hasher::new(),
            manifest_hasher: Hasher::new(),
        }
    }

    /// Consumes a prefix of `input` (possibly empty, when it reports a
    /// pending end) and says what it found there.
    fn step<'m>(
        &mut self,
        input: &[u8],
        manifest: Option<&'m Manifest>,
        options: &ReaderOptions,
    ) -> Result<(usize, Option<Found<'m>>), Error> {
        if let Some(index) = self.pending_end.take() {
            return Ok((0, Some(Found::MemberEnd { index })));
        }
        if self.offset > options.limits.max_packet_bytes {
            return Err(Error::new(
                ErrorCode::LimitSize,
                alloc::format!(
                    "the packet is larger than the limit of {} bytes",
                    options.limits.max_packet_bytes
                ),
            ));
        }
        let (used, found) = match self.state {
            State::Header | State::EndSecond => {
                let used = self.fill_block(input);
                if self.block_len < BLOCK {
                    (used, None)
                } else {
                    self.block_len = 0;
                    let at = self.block_start;
                    let found = self
                        .on_block(manifest, options)
                        .map_err(|e| e.at_offset(at))?;
                    (used, found)
                }
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
                (used, None)
            }
            State::Manifest { size, padded } => {
                let n = ((padded - self.manifest_read).min(input.len() as u64)) as usize;
                let text_left = size.saturating_sub(self.manifest_read) as usize;
                let (text, padding) = input[..n].split_at(n.min(text_left));
                if let Some(stream) = &mut self.manifest_text {
                    stream.feed(text);
                }
                self.manifest_hasher.update(text);
                if self.manifest_padding_nonzero.is_none() {
                    if let Some(i) = header::first_nonzero(padding) {
                        let at = self.manifest_read + text.len() as u64 + i as u64;
                        self.manifest_padding_nonzero = Some(at);
                    }
                }
                self.manifest_read += n as u64;
                if self.manifest_read < padded {
                    (n, None)
                } else {
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
                        .finish(&options.limits, size)
                        .map_err(|e| e.at_offset(body_start))?;
                    self.state = State::Header;
                    let digest = core::mem::take(&mut self.manifest_hasher).finish();
                    (
                        n,
                        Some(Found::Manifest(alloc::boxed::Box::new(manifest), digest)),
                    )
                }
            }
            State::Body {
                index,
                remaining,
                expected,
                data_offset,
                padding,
            } => {
                let n = (remaining.min(input.len() as u64)) as usize;
                self.body_hasher.update(&input[..n]);
                let remaining = remaining - n as u64;
                if remaining == 0 {
                    let hasher = core::mem::take(&mut self.body_hasher);
                    {
                        let got = hasher.finish();
                        if got != expected {
                            // At the body's first byte, whatever the chunking.
                            let mut e = Error::new(
                                ErrorCode::MemberDigestMismatch,
                                alloc::format!(
                                    "the bytes hash to {}, the manifest says {}",
                                    got.hex(),
                                    expected.hex()
                                ),
                            )
                            .at_offset(data_offset);
                            if let Some(m) = manifest.and_then(|m| m.members.get(index)) {
                                e = e.at_path(&m.path);
                            }
                            return Err(e);
                        }
                    }
                    self.state = if padding == 0 {
                        State::Header
                    } else {
                        State::Padding { remaining: padding }
                    };
                    self.pending_end = Some(index);
                } else {
                    self.state = State::Body {
                        index,
                        remaining,
                        expected,
                        data_offset,
                        padding,
                    };
                }
                (n, Some(Found::Data))
            }
            State::Padding { remaining } => {
                let n = (remaining.min(input.len() as u64)) as usize;
                if let Some(i) = header::first_nonzero(&input[..n]) {
                    let mut e = Error::new(
                        ErrorCode::PaddingNotZero,
                        "the padding after the body is not zero",
                    )
                    .at_offset(self.offset + i as u64);
                    let member = self.next_index.checked_sub(1);
                    if let Some(m) = member.and_then(|i| manifest?.members.get(i)) {
                        e = e.at_path(&m.path);
                    }
                    return Err(e);
                }
                let remaining = remaining - n as u64;
                self.state = if remaining == 0 {
                    State::Header
                } else {
                    State::Padding { remaining }
                };
                (n, None)
            }
            State::Done => {
                if !input.is_empty() {
                    return Err(Error::new(
                        ErrorCode::TrailingData,
                        "bytes follow the end-of-archive marker (two zero blocks end a packet, with nothing after them)",
                    ));
                }
                (0, None)
            }
        };
        self.offset += used as u64;
        Ok((used, found))
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

    fn on_block<'m>(
        &mut self,
        manifest: Option<&'m Manifest>,
        options: &ReaderOptions,
    ) -> Result<Option<Found<'m>>, Error> {
        if header::is_zero_block(&self.block) {
            return self.on_zero_block(manifest).map(|()| None);
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
        match manifest {
            None => self.on_manifest_header(&raw, options).map(|()| None),
            Some(manifest) => self.on_member_header(manifest, &raw, options).map(Some),
        }
    }

    fn on_zero_block(&mut self, manifest: Option<&Manifest>) -> Result<(), Error> {
        if matches!(self.state, State::EndSecond) {
            self.state = State::Done;
            return Ok(());
        }
        if !self.pax_raw.is_empty() {
            return Err(Error::new(
                ErrorCode::PaxInvalid,
                "a PAX header is followed by the end of the archive, not by a member",
            ));
        }
        let Some(manifest) = manifest else {
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
        Ok(())
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
        self.pax_size = raw.size as usize;
        self.pax_raw.extend_from_slice(&self.block);
        self.state = State::Pax {
            size: raw.size,
            padded: header::padded(raw.size),
        };
        Ok(())
    }

    fn on_manifest_header(
        &mut self,
        raw: &Fields<'_>,
        options: &ReaderOptions,
    ) -> Result<(), Error> {
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
        if raw.size > options.limits.max_manifest_bytes {
            return Err(Error::new(
                ErrorCode::LimitManifest,
                alloc::format!(
                    "packet.json declares {} bytes, the limit is {}",
                    raw.size,
                    options.limits.max_manifest_bytes
                ),
            )
            .at_path(MANIFEST_PATH));
        }
        if header::single_block(&HeaderSpec::manifest(raw.size)) != Some(self.block) {
            return Err(Error::new(
                ErrorCode::HeaderNotCanonical,
                "the header of packet.json is not the canonical one (mode 0644, all other fields zero)",
            )
            .at_path(MANIFEST_PATH));
        }
        self.manifest_text = Some(ManifestStream::new());
        self.manifest_len = raw.size;
        self.manifest_read = 0;
        self.manifest_padding_nonzero = None;
        self.state = State::Manifest {
            size: raw.size,
            padded: header::padded(raw.size),
        };
        Ok(())
    }

    fn on_member_header<'m>(
        &mut self,
        manifest: &'m Manifest,
        raw: &Fields<'_>,
        options: &ReaderOptions,
    ) -> Result<Found<'m>, Error> {
        let limits = options.limits;
        let pax = if self.pax_raw.is_empty() {
            None
        } else {
            Some(header::decode_pax(
                &self.pax_raw[BLOCK..BLOCK + self.pax_size],
            )?)
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
            Some(member) if stored_path(member.path.as_bytes()) => member.path.as_str(),
            _ => match pax_path {
                Some(p) => path::check_member_path(p, limits.max_path_bytes)?,
                None => {
                    path_buf = raw.path();
                    path::check_member_path(&path_buf, limits.max_path_bytes)?
                }
            },
        };
        let Some(member) = expected else {
            return Err(Error::new(
                ErrorCode::MemberUnexpected,
                "the archive holds a member after the last one the manifest lists",
            )
            .at_path(path));
        };
        if member.path != path {
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
                    member.path
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
            Error::new(ErrorCode::MemberMismatch, what).at_path(&member.path)
        };
        if kind != member.kind() {
            return Err(mismatch(alloc::format!(
                "the archive has a {}, the manifest a {}",
                kind.as_str(),
                member.kind().as_str()
            )));
        }
        if !kind.allows_mode(raw.mode) {
            return Err(Error::new(
                ErrorCode::ModeNotCanonical,
                alloc::format!(
                    "mode {:o} is not canonical for a {}",
                    raw.mode,
                    kind.as_str()
                ),
            )
            .at_path(&member.path));
        }
        if raw.mode != member.mode().bits() {
            return Err(mismatch(alloc::format!(
                "the archive has mode {:o}, the manifest {}",
                raw.mode,
                member.mode()
            )));
        }
        if raw.size != member.size() {
            return Err(mismatch(alloc::format!(
                "the header declares {} bytes, the manifest {}",
                raw.size,
                member.size()
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
                    .at_path(&member.path))
                }
                None => raw.linkname,
            };
            if Some(target_bytes) != member.target().map(str::as_bytes) {
                return Err(mismatch(alloc::format!(
                    "the archive's link target {:?} differs from the manifest's",
                    alloc::string::String::from_utf8_lossy(target_bytes)
                )));
            }
        }
        if let Some(p) = &pax {
            let unneeded_path = p.path.is_some() && !header::needs_pax_path(&member.path);
            let target = member.target().unwrap_or("");
            let unneeded_link = p.linkpath.is_some()
                && (kind != Kind::Symlink || !header::needs_pax_linkpath(target));
            if unneeded_path || unneeded_link {
                return Err(Error::new(
                    ErrorCode::PaxInvalid,
                    "a PAX header is used where the ustar fields suffice",
                )
                .at_path(&member.path));
            }
        }
        // The header bytes seen (PAX header, if any, then this block) must
        // be the member's one encoding.
        let spec = member.header_spec();
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
            .at_path(&member.path));
        }
        let index = self.next_index;
        self.next_index += 1;
        let data_offset = self.block_start + BLOCK as u64;
        let header_offset = if had_pax {
            self.pax_offset
        } else {
            self.block_start
        };
        if let Some(body) = member.body() {
            self.body_hasher = Hasher::new();
            self.state = State::Body {
                index,
                remaining: body.size,
                expected: body.sha256,
                data_offset,
                padding: header::padded(body.size) - body.size,
            };
        } else {
            if member.sha256().is_some_and(|d| d != Digest::EMPTY) {
                return Err(Error::new(
                    ErrorCode::MemberDigestMismatch,
                    "the file is empty but the manifest's sha256 is not that of no bytes",
                )
                .at_path(&member.path));
            }
            self.state = State::Header;
            self.pending_end = Some(index);
        }
        Ok(Found::MemberStart {
            index,
            member,
            header_offset,
            data_offset,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::in_memory::sample_packet;

    fn read_in_chunks(
        bytes: &[u8],
        chunk: usize,
        elsewhere: bool,
        expected: Option<Digest>,
    ) -> Result<VerifiedPacket, Error> {
        let options = ReaderOptions {
            expected_digest: expected,
            ..Default::default()
        };
        if elsewhere {
            let mut r = Reader::hashed_elsewhere(options);
            for c in bytes.chunks(chunk) {
                r.feed(c)?;
            }
            let whole = (r.whole_hash_needed() == Some(true)).then(|| Digest::of(bytes));
            r.finish_with_digest(whole)
        } else {
            let mut r = Reader::new(options);
            for c in bytes.chunks(chunk) {
                r.feed(c)?;
            }
            r.finish()
        }
    }

    fn sample_as(format: Format) -> crate::in_memory::Built {
        let sample = crate::in_memory::sample().unwrap();
        let sources: Vec<crate::in_memory::Source> = sample
            .manifest
            .members
            .iter()
            .zip(
                &read_in_chunks(&sample.bytes, 1 << 20, false, None)
                    .unwrap()
                    .data_offsets,
            )
            .map(|(m, &at)| match &m.entry {
                crate::manifest::Entry::Dir => crate::in_memory::Source::Dir {
                    path: alloc::string::String::from(&m.path),
                },
                crate::manifest::Entry::Symlink { target } => crate::in_memory::Source::Symlink {
                    path: alloc::string::String::from(&m.path),
                    target: target.clone(),
                },
                crate::manifest::Entry::File {
                    size, executable, ..
                } => crate::in_memory::Source::File {
                    path: alloc::string::String::from(&m.path),
                    contents: sample.bytes[at as usize..(at + size) as usize].to_vec(),
                    executable: *executable,
                },
            })
            .collect();
        crate::in_memory::build_as(format, &sources, None, Vec::new(), &Limits::FORMAT).unwrap()
    }

    #[test]
    fn offsets_point_at_the_member_bodies_and_packet_json() {
        for format in Format::ALL {
            let built = sample_as(format);
            let bytes = built.bytes;
            let digest = built.digest;
            for chunk in [1, 7, 512, 100_000] {
                for elsewhere in [false, true] {
                    let read = read_in_chunks(&bytes, chunk, elsewhere, Some(digest)).unwrap();
                    assert_eq!(read.size, bytes.len() as u64);
                    assert_eq!(read.digest, digest);
                    assert_eq!(read.manifest.format, format);
                    assert_eq!(read.data_offsets.len(), read.manifest.members.len());
                    for (m, &offset) in read.manifest.members.iter().zip(&read.data_offsets) {
                        if let Some(sha) = m.sha256() {
                            let body = &bytes[offset as usize..(offset + m.size()) as usize];
                            assert_eq!(Digest::of(body), sha, "{}", m.path);
                        }
                    }
                    let range =
                        read.manifest_range.start as usize..read.manifest_range.end as usize;
                    assert_eq!(&bytes[range], read.manifest.to_canonical_json().as_slice());
                }
            }
        }
    }

    #[test]
    fn a_packet_is_named_by_its_manifest_in_2_and_by_its_file_in_1() {
        let v2 = sample_as(Format::V2);
        assert_eq!(v2.digest, Digest::of(&v2.manifest.to_canonical_json()));
        assert_eq!(v2.digest, v2.manifest.json_digest());
        let v1 = sample_as(Format::V1);
        assert_eq!(v1.digest, Digest::of(&v1.bytes));
        let other = Digest::of(b"another packet");
        for built in [&v1, &v2] {
            for elsewhere in [false, true] {
                let e = read_in_chunks(&built.bytes, 1000, elsewhere, Some(other)).unwrap_err();
                assert_eq!(e.code(), ErrorCode::PacketDigestMismatch);
                let read = read_in_chunks(&built.bytes, 1000, elsewhere, None).unwrap();
                assert_eq!(read.digest, built.digest);
            }
        }
        // A /2 packet's wrong name is refused at packet.json, before any
        // other member is read.
        let mut r = Reader::new(ReaderOptions {
            expected_digest: Some(other),
            ..Default::default()
        });
        let mut events = 0;
        let e = r
            .feed_with(&v2.bytes, |_| {
                events += 1;
                Ok::<(), Error>(())
            })
            .unwrap_err();
        assert_eq!(e.code(), ErrorCode::PacketDigestMismatch);
        assert_eq!((e.offset(), events), (Some(512), 0));
        // A /1 packet's whole digest handed in that is not the expected one,
        // or none at all.
        for (whole, code) in [
            (Some(other), ErrorCode::PacketDigestMismatch),
            (None, ErrorCode::PacketDigestMismatch),
        ] {
            let mut r = Reader::hashed_elsewhere(ReaderOptions {
                expected_digest: Some(v1.digest),
                ..Default::default()
            });
            r.feed(&v1.bytes).unwrap();
            assert_eq!(r.whole_hash_needed(), Some(true));
            assert_eq!(r.finish_with_digest(whole).unwrap_err().code(), code);
        }
    }

    /// Once a chunk is fed, every member whose last byte it held has
    /// ended: no event waits for a later call.
    #[test]
    fn a_member_ends_with_the_chunk_that_holds_its_last_byte() {
        let bytes = sample_packet();
        let read = read_in_chunks(&bytes, usize::MAX, false, None).unwrap();
        let ends: Vec<u64> = read
            .manifest
            .members
            .iter()
            .zip(&read.data_offsets)
            .map(|(m, &at)| at + m.size())
            .collect();
        let mut r = Reader::new(ReaderOptions::default());
        let mut ended = 0;
        for (i, byte) in bytes.chunks(1).enumerate() {
            r.feed_with(byte, |event| {
                if let Event::MemberEnd { .. } = event {
                    ended += 1;
                }
                Ok::<(), Error>(())
            })
            .unwrap();
            let fed = i as u64 + 1;
            assert_eq!(
                ended,
                ends.iter().filter(|&&end| end <= fed).count(),
                "after {fed} bytes"
            );
        }
        r.finish().unwrap();
    }

    #[test]
    fn truncation_and_limits_are_refusals() {
        let bytes = sample_packet();
        for elsewhere in [false, true] {
            let e = read_in_chunks(&bytes[..bytes.len() - 512], 512, elsewhere, None).unwrap_err();
            assert_eq!(e.code(), ErrorCode::Truncated);
        }
        let mut r = Reader::new(ReaderOptions {
            limits: Limits {
                max_members: 1,
                ..Limits::FORMAT
            },
            ..Default::default()
        });
        assert_eq!(r.feed(&bytes).unwrap_err().code(), ErrorCode::LimitMembers);
    }

    #[test]
    fn an_error_from_the_callback_stops_the_reading_after_its_event() {
        let bytes = sample_packet();
        let mut r = Reader::new(ReaderOptions::default());
        #[derive(Debug, PartialEq)]
        enum Stop {
            Seen,
            Refused,
        }
        impl From<Error> for Stop {
            fn from(_: Error) -> Stop {
                Stop::Refused
            }
        }
        let stop = r
            .feed_with(&bytes, |event| match event {
                Event::Manifest(_) => Err(Stop::Seen),
                _ => Ok(()),
            })
            .unwrap_err();
        assert_eq!(stop, Stop::Seen);
        let manifest_end = BLOCK as u64 + header::padded(r.manifest().unwrap().canonical_len());
        assert_eq!(r.offset(), manifest_end);
        // The rest reads on.
        let json = r.manifest().unwrap().to_canonical_json();
        r.feed(&bytes[manifest_end as usize..]).unwrap();
        assert_eq!(r.finish().unwrap().digest, Digest::of(&json));
    }
}
