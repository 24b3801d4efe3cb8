//! Where each member's body is in a packet, computed from its manifest
//! alone (the format's layout is fixed by the manifest: headers, padded
//! bodies, in order), so that a base packet's bodies can be read without
//! reading the rest of it.
//!
// packet-core's layout replaces this at merge: it computes the same offsets
// for the edge and the CLI; this local version asks packet-core for each
// member's header bytes and adds them up.

use packet_core::raw::{encode_member_header, padded, BLOCK};
use packet_core::Manifest;

/// `data_offsets(m)[i]` is the offset of `m.members[i]`'s first body byte
/// (for a member without a body, where it would start), as
/// [`packet_core::VerifiedPacket::data_offsets`] gives it after a read.
pub fn data_offsets(manifest: &Manifest) -> Vec<u64> {
    let mut offset = BLOCK as u64 + padded(manifest.canonical_len());
    let mut header = Vec::with_capacity(4 * BLOCK);
    manifest
        .members
        .iter()
        .map(|m| {
            header.clear();
            encode_member_header(m, &mut header);
            let data = offset + header.len() as u64;
            offset = data + padded(m.size);
            data
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use packet_core::in_memory::{build, Source};
    use packet_core::{Limits, ReaderOptions};

    #[test]
    fn the_offsets_are_the_readers() {
        let long = format!("workspace/{}/{}", "d".repeat(120), "f".repeat(90));
        let built = build(
            &[
                Source::Dir {
                    path: "workspace".into(),
                },
                Source::File {
                    path: "workspace/a.txt".into(),
                    contents: b"hello".to_vec(),
                    executable: false,
                },
                Source::File {
                    path: "workspace/empty".into(),
                    contents: vec![],
                    executable: true,
                },
                Source::Dir {
                    path: format!("workspace/{}", "d".repeat(120)),
                },
                // A path too long for ustar: a PAX header comes first.
                Source::File {
                    path: long,
                    contents: vec![9; 1500],
                    executable: false,
                },
                Source::Symlink {
                    path: "workspace/link".into(),
                    target: "a.txt".into(),
                },
                Source::File {
                    path: "workspace/z.bin".into(),
                    contents: vec![1; 513],
                    executable: false,
                },
            ],
            None,
            vec![],
            &Limits::FORMAT,
        )
        .unwrap();
        let read = packet_core::reader::verify(&built.bytes, ReaderOptions::default()).unwrap();
        assert_eq!(data_offsets(&read.manifest), read.data_offsets);
        let sample = packet_core::in_memory::sample_packet();
        let read = packet_core::reader::verify(&sample, ReaderOptions::default()).unwrap();
        assert_eq!(data_offsets(&read.manifest), read.data_offsets);
    }
}
