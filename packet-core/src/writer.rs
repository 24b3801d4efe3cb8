//! The packet writer: a pull-style state machine that yields the bytes of a
//! packet for a validated [`Manifest`], asking its caller for each file's
//! body in turn. It does no I/O.
//!
//! ```
//! use packet_core::{Digest, Limits, Manifest, Member, Step, Writer};
//!
//! let body = b"hello\n";
//! let manifest = Manifest::build(
//!     vec![
//!         Member::dir("workspace"),
//!         Member::file("workspace/hello.txt", body.len() as u64, Digest::of(body), false),
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
//!             // A /2 packet is named by its manifest's exact bytes.
//!             assert_eq!(digest, Some(Digest::of(&manifest.to_canonical_json())));
//!             break;
//!         }
//!     }
//! }
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use alloc::vec::Vec;

use crate::digest::{Digest, Hasher};
use crate::error::{Error, ErrorCode, Misuse, WriteError};
use crate::header::{self, HeaderSpec, Kind, BLOCK};
use crate::manifest::{json, Manifest};

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
    /// The packet is complete; the packet digest: a /2 packet's (its
    /// manifest's) always, a /1 packet's (its whole file's) if the writer
    /// hashed the output.
    Done(Option<Digest>),
}

/// Writes the `packet.json` member (header, canonical JSON and zero
/// padding: the bytes a [`Writer`] starts with) into `sink`, without
/// holding the JSON in memory; returns how many bytes it wrote, the offset
/// at which [`Writer::after_manifest`] starts. For a packer that writes
/// `packet.json` last.
#[doc(hidden)]
pub fn write_manifest_member(manifest: &Manifest, sink: &mut impl json::Sink) -> u64 {
    let len = manifest.canonical_len();
    let mut head = Vec::with_capacity(BLOCK);
    header::encode(&HeaderSpec::manifest(len), &mut head);
    sink.put(&head);
    json::write_manifest(manifest, sink);
    let padding = (header::padded(len) - len) as usize;
    sink.put(&[0u8; BLOCK][..padding]);
    BLOCK as u64 + header::padded(len)
}

/// Options for [`Writer`].
#[derive(Clone, Copy, Debug)]
pub struct WriterOptions {
    /// Hash the whole packet, for a /1 packet's digest (off when the caller
    /// hashes the output itself, e.g. on another thread). A /2 packet's
    /// digest is its manifest's, which the writer always computes.
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
    /// A /2 packet's digest, once its manifest is written.
    manifest_digest: Option<Digest>,
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
            packet_hasher: (options.packet_digest && !manifest.format.named_by_manifest())
                .then(Hasher::new),
            manifest_digest: None,
        }
    }

    /// A writer that starts right after `packet.json`, at the first
    /// member's header: for a caller that lays the packet out before every
    /// digest is known and writes `packet.json` last, with
    /// [`write_manifest_member`]. The manifest's JSON is never held in
    /// memory. It computes no /1 packet digest, whatever `options` say; a
    /// /2 packet's is its manifest's.
    #[doc(hidden)]
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
        writer.manifest_digest = manifest
            .format
            .named_by_manifest()
            .then(|| manifest.json_digest());
        writer
    }

    /// Bytes produced so far (headers, bodies and padding).
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// The next step. After [`Step::Body`], call [`Writer::body`] until the
    /// whole body has been fed, then call `next` again: calling it before
    /// is a [`Misuse`].
    #[allow(clippy::should_implement_trait)] // a lending step, not an Iterator
    pub fn next(&mut self) -> Result<Step<'_>, WriteError> {
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
                header::encode(&HeaderSpec::manifest(len), &mut self.buf);
                json::write_manifest(self.manifest, &mut self.buf);
                if self.manifest.format.named_by_manifest() {
                    self.manifest_digest = Some(Digest::of(&self.buf[BLOCK..]));
                }
                self.pending_padding = (header::padded(len) - len) as usize;
                self.next_header(0)
            }
            State::Header(index) => self.next_header(index),
            State::AnnounceBody(index) => {
                self.state = State::Body(index);
                Ok(Step::Body {
                    index,
                    size: self.remaining,
                    offset: self.offset,
                })
            }
            State::Body(index) => {
                let member = &self.manifest.members[index];
                if self.remaining != 0 {
                    return Err(Misuse::new(alloc::format!(
                        "the next step was asked for with {} bytes of the body still missing",
                        self.remaining
                    ))
                    .at_path(&member.path)
                    .into());
                }
                if let Some(hasher) = self.body_hasher.take() {
                    let got = hasher.finish();
                    if Some(got) != member.sha256() {
                        return Err(Error::new(
                            ErrorCode::MemberDigestMismatch,
                            "the file changed while it was being packed (its bytes no longer match the digest taken before writing)",
                        )
                        .at_path(&member.path)
                        .into());
                    }
                }
                self.pending_padding =
                    header::padded(member.size()) as usize - member.size() as usize;
                self.next_header(index + 1)
            }
            State::End | State::Done => {
                self.state = State::Done;
                let whole = self.packet_hasher.take().map(Hasher::finish);
                Ok(Step::Done(self.manifest_digest.or(whole)))
            }
        }
    }

    /// Emits the previous body's padding and the header of member `index`
    /// (or the end marker after the last member).
    fn next_header(&mut self, index: usize) -> Result<Step<'_>, WriteError> {
        let padding = core::mem::take(&mut self.pending_padding);
        self.buf.resize(self.buf.len() + padding, 0);
        match self.manifest.members.get(index) {
            Some(member) => {
                header::encode(&member.header_spec(), &mut self.buf);
                if member.kind() == Kind::File && member.size() > 0 {
                    self.state = State::AnnounceBody(index);
                    self.remaining = member.size();
                    self.body_hasher = self.options.verify_bodies.then(Hasher::new);
                } else {
                    self.state = State::Header(index + 1);
                    if member.kind() == Kind::File && self.options.verify_bodies {
                        // An empty file: its digest is that of no bytes.
                        if member.sha256() != Some(Digest::EMPTY) {
                            return Err(Error::new(
                                ErrorCode::MemberDigestMismatch,
                                "the file changed while it was being packed",
                            )
                            .at_path(&member.path)
                            .into());
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
    /// its output. Refuses more bytes than the manifest declares; feeding a
    /// body when [`Writer::next`] has not asked for one is a [`Misuse`].
    pub fn body(&mut self, chunk: &[u8]) -> Result<(), WriteError> {
        let State::Body(index) = self.state else {
            return Err(Misuse::new("a body was fed when no body is pending").into());
        };
        if chunk.len() as u64 > self.remaining {
            return Err(Error::new(
                ErrorCode::MemberMismatch,
                "the file grew while it was being packed",
            )
            .at_path(&self.manifest.members[index].path)
            .into());
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::limits::Limits;
    use crate::manifest::Member;
    use alloc::vec;

    fn one_file() -> Manifest {
        Manifest::build(
            vec![
                Member::dir("workspace"),
                Member::file("workspace/a", 3, Digest::of(b"abc"), false),
            ],
            None,
            vec![],
            &Limits::FORMAT,
        )
        .unwrap()
    }

    #[test]
    fn driving_the_writer_out_of_order_is_a_misuse_not_a_refusal() {
        let manifest = one_file();
        let mut w = Writer::new(&manifest);
        let Err(WriteError::Misuse(m)) = w.body(b"a") else {
            panic!("a body before any was asked for");
        };
        assert!(m.message().contains("no body is pending"));
        loop {
            if let Step::Body { .. } = w.next().unwrap() {
                break;
            }
        }
        w.body(b"ab").unwrap();
        let Err(WriteError::Misuse(m)) = w.next() else {
            panic!("the next step with a body still missing");
        };
        assert_eq!(m.path(), Some("workspace/a"));
    }

    #[test]
    fn a_body_that_grew_or_changed_is_a_refusal() {
        let manifest = one_file();
        let mut w = Writer::new(&manifest);
        while !matches!(w.next().unwrap(), Step::Body { .. }) {}
        let Err(WriteError::Refused(e)) = w.body(b"abcd") else {
            panic!("more bytes than the manifest declares");
        };
        assert_eq!(e.code(), ErrorCode::MemberMismatch);
        w.body(b"abd").unwrap();
        let Err(WriteError::Refused(e)) = w.next() else {
            panic!("bytes that do not hash to the manifest's sha256");
        };
        assert_eq!(e.code(), ErrorCode::MemberDigestMismatch);
    }
}
