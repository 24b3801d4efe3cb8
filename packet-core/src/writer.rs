//! The packet writer: a pull-style state machine that yields the bytes of a
//! packet for a validated [`Manifest`], asking its caller for each file's
//! body in turn. It does no I/O.
//!
//! ```
//! use packet_core::{Digest, Entry, Limits, Manifest, Step, Writer};
//!
//! let body = b"hello\n";
//! let manifest = Manifest::build(
//!     vec![
//!         Entry::dir("workspace"),
//!         Entry::file("workspace/hello.txt", body.len() as u64, Digest::of(body), false),
//!     ],
//!     None,
//!     vec![],
//!     &Limits::FORMAT,
//! )?;
//! let mut writer = Writer::new(&manifest);
//! let mut packet = Vec::new();
//! loop {
//!     match writer.next()? {
//!         Step::Bytes(bytes) => packet.extend_from_slice(bytes),
//!         Step::Body { index, .. } => {
//!             assert_eq!(manifest.members[index].path, "workspace/hello.txt");
//!             writer.body(body)?;
//!             packet.extend_from_slice(body);
//!         }
//!         Step::Done(digest) => {
//!             assert_eq!(digest, Some(Digest::of(&packet)));
//!             break;
//!         }
//!     }
//! }
//! # Ok::<(), packet_core::Error>(())
//! ```

use alloc::vec::Vec;

use crate::digest::{Digest, Hasher};
use crate::error::{Error, ErrorCode};
use crate::header::{self, HeaderSpec, Kind, BLOCK};
use crate::manifest::Manifest;
use crate::path::MANIFEST_PATH;

/// What the writer wants done next.
#[derive(Debug, PartialEq, Eq)]
pub enum Step<'w> {
    /// Write these bytes (headers, the manifest, padding, the end marker).
    Bytes(&'w [u8]),
    /// Feed the body of `manifest.members[index]` (exactly `size` bytes)
    /// through [`Writer::body`], writing the same bytes to the output.
    Body {
        /// Index into `manifest.members`.
        index: usize,
        /// Bytes expected.
        size: u64,
        /// Offset of the body's first byte in the packet.
        offset: u64,
    },
    /// The packet is complete; the packet digest, if the writer computed it.
    Done(Option<Digest>),
}

/// The header of `packet.json` for a manifest of `len` bytes.
fn manifest_spec(len: u64) -> HeaderSpec<'static> {
    HeaderSpec {
        path: MANIFEST_PATH,
        kind: Kind::File,
        mode: 0o644,
        size: len,
        target: "",
    }
}

/// Writes the `packet.json` member (header, canonical JSON and zero
/// padding: the bytes a [`Writer`] starts with) into `sink`, without
/// holding the JSON in memory; returns how many bytes it wrote, the offset
/// at which [`Writer::after_manifest`] starts.
pub fn write_manifest_member(manifest: &Manifest, sink: &mut impl crate::canonical::Sink) -> u64 {
    let len = manifest.canonical_len();
    let mut head = Vec::with_capacity(BLOCK);
    header::encode(&manifest_spec(len), &mut head);
    sink.put(&head);
    crate::canonical::write_manifest(manifest, sink);
    let padding = (header::padded(len) - len) as usize;
    sink.put(&[0u8; BLOCK][..padding]);
    BLOCK as u64 + header::padded(len)
}

/// Options for [`Writer`].
#[derive(Clone, Copy, Debug)]
pub struct WriterOptions {
    /// Hash the whole packet (off when the caller hashes the output itself,
    /// e.g. on another thread).
    pub packet_digest: bool,
    /// Hash each body and check it against the manifest, which catches a
    /// file that changed between hashing and writing.
    pub verify_bodies: bool,
}

impl Default for WriterOptions {
    fn default() -> Self {
        WriterOptions {
            packet_digest: true,
            verify_bodies: true,
        }
    }
}

#[derive(Debug, PartialEq, Eq)]
enum State {
    Start,
    /// About to emit the header of member `index` (with the previous
    /// body's padding in front).
    Header(usize),
    /// The header of member `index` was emitted; its body comes next.
    AnnounceBody(usize),
    /// Inside member `index`'s body.
    Body(usize),
    End,
    Done,
}

/// Writes one packet. See the module docs for the loop that drives it.
pub struct Writer<'m> {
    manifest: &'m Manifest,
    options: WriterOptions,
    state: State,
    buf: Vec<u8>,
    offset: u64,
    remaining: u64,
    pending_padding: usize,
    body_hasher: Option<Hasher>,
    packet_hasher: Option<Hasher>,
}

impl<'m> Writer<'m> {
    /// A writer for an already validated manifest (from [`Manifest::build`]
    /// or [`Manifest::parse`]), with default options.
    pub fn new(manifest: &'m Manifest) -> Writer<'m> {
        Self::with_options(manifest, WriterOptions::default())
    }

    /// A writer with explicit options.
    pub fn with_options(manifest: &'m Manifest, options: WriterOptions) -> Writer<'m> {
        Writer {
            manifest,
            options,
            state: State::Start,
            buf: Vec::with_capacity(4 * BLOCK),
            offset: 0,
            remaining: 0,
            pending_padding: 0,
            body_hasher: None,
            packet_hasher: options.packet_digest.then(Hasher::new),
        }
    }

    /// A writer that starts right after `packet.json`, at the first
    /// member's header: for a caller that lays the packet out before every
    /// digest is known and writes `packet.json` last, with
    /// [`write_manifest_member`]. The manifest's JSON is never held in
    /// memory. It computes no packet digest, whatever `options` say.
    pub fn after_manifest(manifest: &'m Manifest, options: WriterOptions) -> Writer<'m> {
        let mut writer = Self::with_options(
            manifest,
            WriterOptions {
                packet_digest: false,
                ..options
            },
        );
        writer.state = State::Header(0);
        writer.offset = BLOCK as u64 + header::padded(manifest.canonical_len());
        writer
    }

    /// Bytes produced so far (headers, bodies and padding).
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// The next step. After [`Step::Body`], call [`Writer::body`] until the
    /// whole body has been fed, then call `next` again.
    #[allow(clippy::should_implement_trait)] // a lending step, not an Iterator
    pub fn next(&mut self) -> Result<Step<'_>, Error> {
        self.buf.clear();
        if self.buf.capacity() > 1 << 16 {
            // Give back what the manifest needed.
            self.buf = Vec::with_capacity(4 * BLOCK);
        }
        match self.state {
            State::Start => {
                // The manifest is written straight into the output buffer:
                // one copy, however many members it lists.
                let len = self.manifest.canonical_len();
                self.buf.reserve(BLOCK + len as usize);
                header::encode(&manifest_spec(len), &mut self.buf);
                crate::canonical::write_manifest(self.manifest, &mut self.buf);
                self.pending_padding = (header::padded(len) - len) as usize;
                self.state = State::Header(0);
                self.next_header()
            }
            State::Header(_) => self.next_header(),
            State::AnnounceBody(index) => {
                self.state = State::Body(index);
                Ok(Step::Body {
                    index,
                    size: self.remaining,
                    offset: self.offset,
                })
            }
            State::Body(index) => {
                if self.remaining != 0 {
                    return Err(Error::new(
                        ErrorCode::Usage,
                        alloc::format!("{} bytes of the body are still missing", self.remaining),
                    )
                    .at_path(&self.manifest.members[index].path));
                }
                let entry = &self.manifest.members[index];
                if let Some(hasher) = self.body_hasher.take() {
                    let got = hasher.finish();
                    if Some(got) != entry.sha256 {
                        return Err(Error::new(
                            ErrorCode::MemberDigestMismatch,
                            "the file changed while it was being packed (its bytes no longer match the digest taken before writing)",
                        )
                        .at_path(&entry.path));
                    }
                }
                self.pending_padding = header::padded(entry.size) as usize - entry.size as usize;
                self.state = State::Header(index + 1);
                self.next_header()
            }
            State::End | State::Done => {
                self.state = State::Done;
                Ok(Step::Done(self.packet_hasher.take().map(Hasher::finish)))
            }
        }
    }

    fn next_header(&mut self) -> Result<Step<'_>, Error> {
        let State::Header(index) = self.state else {
            return Err(Error::new(ErrorCode::Usage, "writer driven out of order"));
        };
        let padding = core::mem::take(&mut self.pending_padding);
        self.buf.resize(self.buf.len() + padding, 0);
        match self.manifest.members.get(index) {
            Some(entry) => {
                header::encode(&entry.header_spec(), &mut self.buf);
                if entry.kind == Kind::File && entry.size > 0 {
                    self.state = State::AnnounceBody(index);
                    self.remaining = entry.size;
                    self.body_hasher = self.options.verify_bodies.then(Hasher::new);
                } else {
                    self.state = State::Header(index + 1);
                    if entry.kind == Kind::File && self.options.verify_bodies {
                        // An empty file: its digest is that of no bytes.
                        if entry.sha256 != Some(Digest::EMPTY) {
                            return Err(Error::new(
                                ErrorCode::MemberDigestMismatch,
                                "the file changed while it was being packed",
                            )
                            .at_path(&entry.path));
                        }
                    }
                }
            }
            None => {
                self.buf.resize(self.buf.len() + 2 * BLOCK, 0);
                self.state = State::End;
            }
        }
        self.offset += self.buf.len() as u64;
        if let Some(h) = &mut self.packet_hasher {
            h.update(&self.buf);
        }
        Ok(Step::Bytes(&self.buf))
    }

    /// Feeds part of the pending body. The caller writes the same bytes to
    /// its output. Refuses more bytes than the manifest declares.
    pub fn body(&mut self, chunk: &[u8]) -> Result<(), Error> {
        let State::Body(index) = self.state else {
            return Err(Error::new(ErrorCode::Usage, "no body is pending"));
        };
        if chunk.len() as u64 > self.remaining {
            return Err(Error::new(
                ErrorCode::MemberMismatch,
                "the file grew while it was being packed",
            )
            .at_path(&self.manifest.members[index].path));
        }
        self.remaining -= chunk.len() as u64;
        self.offset += chunk.len() as u64;
        if let Some(h) = &mut self.body_hasher {
            h.update(chunk);
        }
        if let Some(h) = &mut self.packet_hasher {
            h.update(chunk);
        }
        Ok(())
    }
}
