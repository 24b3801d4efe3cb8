//! # packet-core
//!
//! The one implementation of the `pillbox.session-packet/1` format: a
//! deterministic, content-addressed POSIX ustar file that carries an AI
//! coding agent's workspace and, optionally, its harness state. The
//! specification is `docs/session-packet.md`; this crate is its code.
//!
//! `no_std` + `alloc`, no I/O: consumers (the CLI, the Worker, the browser
//! page) move bytes in and out.
//!
//! | module | holds |
//! |---|---|
//! | [`error`] | [`Error`] and its stable [`ErrorCode`]s |
//! | [`limits`] | [`Limits`]: packet size, members, path length, manifest size |
//! | [`digest`] | [`Digest`] (`sha256:<hex>`) and an incremental [`Hasher`] |
//! | [`path`] | canonical paths, the member order, symlink resolution, collision keys |
//! | [`header`] | the ustar header codec and the one permitted PAX use |
//! | [`manifest`] | [`Manifest`] and the member-set rules |
//! | [`canonical`] | the manifest's canonical JSON, written, measured or compared |
//! | [`exclude`] | credential rules and `--exclude` globs |
//! | [`diff`] | members added, removed and changed between two manifests |
//! | [`writer`] | [`Writer`]: manifest + bodies → packet bytes |
//! | [`reader`] | [`Reader`]: packet bytes in chunks → verified members |
//! | [`build`] | building small packets in memory |
//!
//! ```
//! use packet_core::build::{build, Source};
//! use packet_core::{reader, Limits, ReaderOptions};
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
//! let options = ReaderOptions { expected_digest: Some(built.digest), ..Default::default() };
//! let (manifest, verified) = reader::verify(&built.bytes, options)?;
//! assert_eq!(manifest.members.len(), 2);
//! assert_eq!(verified.size, built.bytes.len() as u64);
//! # Ok::<(), packet_core::Error>(())
//! ```
#![no_std]
#![forbid(unsafe_code)]
#![deny(missing_docs)]

extern crate alloc;

pub mod build;
pub mod canonical;
pub mod diff;
pub mod digest;
pub mod error;
pub mod exclude;
pub mod header;
pub mod limits;
pub mod manifest;
mod manifest_stream;
pub mod path;
pub mod reader;
mod scan;
pub mod writer;

pub use digest::{Digest, Hasher};
pub use error::{Error, ErrorCode};
pub use header::Kind;
pub use limits::Limits;
pub use manifest::{Entry, Exclusion, Harness, HarnessKind, Manifest, Totals, FORMAT_ID};
pub use reader::{Event, Reader, ReaderOptions, Verified};
pub use writer::{Step, Writer, WriterOptions};
