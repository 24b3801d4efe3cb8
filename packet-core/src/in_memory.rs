//! Building a packet from members held in memory: for tests, vectors, the
//! wasm bindings and small tools. Large packets go through [`Writer`]
//! directly, streaming bodies from their source.

use alloc::string::String;
use alloc::vec::Vec;

use crate::digest::Digest;
use crate::error::WriteError;
use crate::format::Format;
use crate::limits::Limits;
use crate::manifest::{Entry, Exclusion, Harness, Manifest, UncheckedManifest, UncheckedMember};
use crate::path;
use crate::writer::{Step, Writer};

/// A member with its contents, in any order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Source {
    /// A directory.
    Dir {
        /// Member path.
        path: String,
    },
    /// A regular file.
    File {
        /// Member path.
        path: String,
        /// Contents.
        contents: Vec<u8>,
        /// Owner-executable (mode 0755 rather than 0644).
        executable: bool,
    },
    /// A symlink.
    Symlink {
        /// Member path.
        path: String,
        /// Link target.
        target: String,
    },
}

impl Source {
    fn path(&self) -> &str {
        match self {
            Source::Dir { path } | Source::File { path, .. } | Source::Symlink { path, .. } => path,
        }
    }

    /// Its member, whose path the manifest's rules check.
    fn member(&self) -> UncheckedMember {
        let entry = match self {
            Source::Dir { .. } => Entry::Dir,
            Source::File {
                contents,
                executable,
                ..
            } => Entry::File {
                size: contents.len() as u64,
                sha256: Digest::of(contents),
                executable: *executable,
            },
            Source::Symlink { target, .. } => Entry::Symlink {
                target: target.clone(),
            },
        };
        UncheckedMember {
            path: String::from(self.path()),
            entry,
        }
    }

    /// The body: a file's contents, nothing for the other types.
    fn body(&self) -> &[u8] {
        match self {
            Source::File { contents, .. } => contents,
            Source::Dir { .. } | Source::Symlink { .. } => &[],
        }
    }
}

/// A packet built in memory.
#[derive(Clone, Debug)]
pub struct Built {
    /// Its manifest.
    pub manifest: Manifest,
    /// Its bytes.
    pub bytes: Vec<u8>,
    /// Its digest.
    pub digest: Digest,
}

/// Builds a packet: hashes the files, sorts the members, checks every rule
/// and writes the bytes.
pub fn build(
    sources: &[Source],
    harness: Option<Harness>,
    exclusions: Vec<Exclusion>,
    limits: &Limits,
) -> Result<Built, WriteError> {
    build_as(Format::CURRENT, sources, harness, exclusions, limits)
}

/// [`build`] in a given version of the format: a /1 packet, for the read
/// path of packets written before /2.
pub fn build_as(
    format: Format,
    sources: &[Source],
    harness: Option<Harness>,
    exclusions: Vec<Exclusion>,
    limits: &Limits,
) -> Result<Built, WriteError> {
    // Sorted as the manifest sorts its members, so that the body of
    // `manifest.members[i]` is `sorted[i].body()`.
    let mut sorted: Vec<&Source> = sources.iter().collect();
    sorted.sort_by(|a, b| path::compare(a.path(), b.path()));
    let members = sorted.iter().map(|s| s.member()).collect();
    let mut unchecked = UncheckedManifest::assemble(members, harness, exclusions);
    unchecked.format = format;
    let len = unchecked.canonical_len();
    let manifest: Manifest = unchecked.check(limits, len)?;
    let mut bytes = Vec::with_capacity(manifest.packet_size() as usize);
    let mut writer = Writer::new(&manifest);
    let digest = loop {
        match writer.next()? {
            Step::Bytes(b) => bytes.extend_from_slice(b),
            Step::Body { index, .. } => {
                let body = sorted[index].body();
                writer.body(body)?;
                bytes.extend_from_slice(body);
            }
            Step::Done(d) => break d.unwrap_or_else(|| Digest::of(&bytes)),
        }
    };
    Ok(Built {
        manifest,
        bytes,
        digest,
    })
}

/// A small valid packet (a workspace with a file, a directory and a
/// symlink), for examples and smoke tests.
pub fn sample_packet() -> Vec<u8> {
    sample().map(|b| b.bytes).unwrap_or_default()
}

/// [`sample_packet`] with its manifest and digest.
pub fn sample() -> Result<Built, WriteError> {
    let sources = [
        Source::Dir {
            path: "workspace".into(),
        },
        Source::File {
            path: "workspace/README.md".into(),
            contents: b"# sample\n".to_vec(),
            executable: false,
        },
        Source::Dir {
            path: "workspace/bin".into(),
        },
        Source::File {
            path: "workspace/bin/run".into(),
            contents: b"#!/bin/sh\necho hi\n".to_vec(),
            executable: true,
        },
        Source::Symlink {
            path: "workspace/run".into(),
            target: "bin/run".into(),
        },
    ];
    build(&sources, None, Vec::new(), &Limits::FORMAT)
}
