//! # packet-core
//!
//! The one implementation of the `pillbox.session-packet/2` format (and
//! the reader of `/1`): a deterministic POSIX ustar file that carries an
//! AI coding agent's workspace and, optionally, its harness state, named
//! by the SHA-256 of its manifest, which determines every other byte. The
//! specification is `docs/session-packet.md`; this crate is its code.
//!
//! `no_std` + `alloc`, no I/O: consumers (the CLI, the Worker, the browser
//! page) move bytes in and out.
//!
//! ```
//! use packet_core::in_memory::{build, Source};
//! use packet_core::{Event, Limits, Reader, ReaderOptions};
//!
//! let built = build(
//!     &[
//!         Source::Dir { path: "workspace".into() },
//!         Source::File { path: "workspace/a.txt".into(), contents: b"hi".to_vec(), executable: false },
//!     ],
//!     None,
//!     vec![],
//!     &Limits::FORMAT,
//! )?;
//!
//! // Read it back in chunks of any size, as a file or a stream delivers it.
//! let mut reader = Reader::new(ReaderOptions { expected_digest: Some(built.digest), ..Default::default() });
//! let mut body = Vec::new();
//! for chunk in built.bytes.chunks(100) {
//!     reader.feed_with(chunk, |event| {
//!         if let Event::Data(bytes) = event {
//!             body.extend_from_slice(bytes);
//!         }
//!         Ok::<(), packet_core::Error>(())
//!     })?;
//! }
//! let packet = reader.finish()?;
//! // A packet is named by its manifest's exact bytes.
//! assert_eq!(packet.digest, packet_core::Digest::of(&built.manifest.to_canonical_json()));
//! assert_eq!(packet.digest, built.digest);
//! assert_eq!(packet.size, built.bytes.len() as u64);
//! assert_eq!(packet.manifest.members.len(), 2);
//! assert_eq!(body, b"hi");
//! // Where each member's body is, and packet.json's own bytes.
//! let at = packet.data_offsets[1] as usize;
//! assert_eq!(&built.bytes[at..at + 2], b"hi");
//! let json = &built.bytes[packet.manifest_range.start as usize..packet.manifest_range.end as usize];
//! assert_eq!(json, packet.manifest.to_canonical_json());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! | item | what it is |
//! |---|---|
//! | [`Reader`], [`ReaderOptions`], [`Event`], [`VerifiedPacket`], [`reader::verify`] | packet bytes in chunks → verified members |
//! | [`assembled`] | a /2 packet verified from its manifest and its bodies' proofs, wherever the bodies are kept |
//! | [`Writer`], [`WriterOptions`], [`Step`] | a manifest and bodies → packet bytes |
//! | [`Format`], [`FORMAT_ID`] | the format's versions: what names a packet of each, its size limit |
//! | [`Manifest`], [`Member`], [`Entry`], [`Mode`], [`Body`], [`Harness`], [`HarnessKind`], [`Exclusion`], [`Totals`] | `packet.json` and the member-set rules |
//! | [`MemberSummary`] | one member as reports show it, in their JSON |
//! | [`Error`], [`ErrorCode`], [`Refusal`] | refusals, their stable codes and their JSON shape |
//! | [`Misuse`], [`WriteError`] | a writer driven out of order |
//! | [`Digest`], [`DigestPrefix`], [`Hasher`], [`ResumableHasher`], [`HashState`] | SHA-256, the `sha256:<hex>` form and the start of one, and a hash that stops and goes on later |
//! | [`Limits`], [`Kind`] | the format's limits and member types |
//! | [`offsets`] | where each member's header and body lie, and the format's bytes of any range |
//! | [`MemberPath`], [`path`] | a path that follows the path rules; canonical paths, the member order, symlink resolution, collision keys |
//! | [`exclude`] | credential rules and `--exclude` globs |
//! | [`secrets`] | credentials found by content, as a stream |
//! | [`git`] | git settings and hooks that run programs |
//! | [`Findings`] | what a reader reports about a packet it accepts |
//! | [`diff`] | members added, removed and changed between two manifests |
//! | [`in_memory`] | building small packets in memory |
#![no_std]
#![forbid(unsafe_code)]
#![deny(missing_docs)]

extern crate alloc;

pub mod assembled;
pub mod diff;
mod digest;
mod error;
pub mod exclude;
mod findings;
mod format;
pub mod git;
mod header;
pub mod in_memory;
mod limits;
mod manifest;
pub mod offsets;
pub mod path;
pub mod reader;
mod scan;
pub mod secrets;
mod writer;

pub use digest::{Digest, DigestPrefix, HashState, Hasher, HexDigest, ResumableHasher};
pub use error::{Error, ErrorCode, Misuse, Refusal, RefusalDetails, WriteError};
pub use findings::{
    scan_class, BodyFindings, BodyScan, BodyScanner, Findings, GitFinding, SecretFinding, HOOK_WHY,
};
pub use format::{Format, FORMAT_ID};
pub use header::Kind;
pub use limits::Limits;
pub use manifest::{
    Body, Entry, Exclusion, Harness, HarnessKind, Manifest, Member, MemberSummary, Mode, Totals,
};
pub use path::MemberPath;
pub use reader::{Event, HashedElsewhere, PacketHash, Reader, ReaderOptions, VerifiedPacket};
pub use writer::{Step, Writer, WriterOptions};

/// For a packer that lays the packet out before every digest is known and
/// writes `packet.json` last, straight into its output ([`Writer::after_manifest`]).
#[doc(hidden)]
pub use manifest::json::Sink;
#[doc(hidden)]
pub use writer::write_manifest_member;

#[doc(hidden)]
pub mod raw;
