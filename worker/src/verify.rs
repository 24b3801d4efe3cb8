//! The verification glue: packet bytes in chunks go through packet-core's
//! [`Reader`]; what comes out is what the index needs (the manifest and each
//! member's data offset). No format rule is checked here: the core checks
//! them all. Memory stays bounded by the manifest, whatever the packet size.

use packet_core::{Digest, Error, ErrorCode, Event, Limits, Manifest, Reader, ReaderOptions};

/// A verified packet, ready to index.
#[derive(Debug)]
pub struct Indexed {
    /// The packet's digest (equal to the expected one).
    pub digest: Digest,
    /// Its size in bytes.
    pub size: u64,
    /// Its manifest.
    pub manifest: Manifest,
    /// `data_offsets[i]` is the offset of `manifest.members[i]`'s first body byte.
    pub data_offsets: Vec<u64>,
    /// Offset and length of `packet.json`'s bytes.
    pub manifest_offset: u64,
    /// Length of `packet.json`.
    pub manifest_len: u64,
}

/// Drives a [`Reader`] over a packet that must have digest `expected`.
pub struct Verifier {
    reader: Reader,
    expected: Digest,
    core_hashes_packet: bool,
    data_offsets: Vec<u64>,
}

/// Offset of `packet.json`'s body: it is always the first member, right
/// after its one header block (its name never needs a PAX header).
const MANIFEST_OFFSET: u64 = 512;

impl Verifier {
    /// A verifier. With `core_hashes_packet` false the caller hashes the
    /// whole packet elsewhere (a platform digest stream) and passes the
    /// result to [`Verifier::finish`].
    pub fn new(expected: Digest, limits: Limits, core_hashes_packet: bool) -> Verifier {
        let options = ReaderOptions {
            limits,
            expected_digest: Some(expected),
            skip_packet_digest: !core_hashes_packet,
            ..Default::default()
        };
        Verifier {
            reader: Reader::new(options),
            expected,
            core_hashes_packet,
            data_offsets: Vec::new(),
        }
    }

    /// Feeds the next chunk. The first refusal is returned, and every later
    /// call returns it again.
    pub fn feed(&mut self, mut chunk: &[u8]) -> Result<(), Error> {
        while !chunk.is_empty() {
            let (used, event) = self.reader.feed(chunk)?;
            chunk = &chunk[used..];
            match event {
                Some(Event::Manifest) => {
                    let members = self.reader.manifest().map_or(0, |m| m.members.len());
                    self.data_offsets.reserve_exact(members);
                }
                Some(Event::MemberStart {
                    index, data_offset, ..
                }) => {
                    debug_assert_eq!(index, self.data_offsets.len());
                    self.data_offsets.push(data_offset);
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// Bytes fed so far.
    pub fn offset(&self) -> u64 {
        self.reader.offset()
    }

    /// Ends the packet. `platform_digest` is the whole packet's SHA-256 when
    /// the caller computed it (required when the core does not hash it).
    pub fn finish(mut self, platform_digest: Option<Digest>) -> Result<Indexed, Error> {
        let verified = self.reader.finish()?;
        let digest = if self.core_hashes_packet {
            verified.digest
        } else {
            platform_digest
        }
        .ok_or_else(|| Error::new(ErrorCode::Usage, "the packet digest was not computed"))?;
        if digest != self.expected {
            return Err(Error::new(
                ErrorCode::PacketDigestMismatch,
                format!("expected {}, the packet is {digest}", self.expected),
            ));
        }
        let manifest = self
            .reader
            .into_manifest()
            .ok_or_else(|| Error::new(ErrorCode::Usage, "a verified packet has a manifest"))?;
        if self.data_offsets.len() != manifest.members.len() {
            return Err(Error::new(ErrorCode::Usage, "a member start was not seen"));
        }
        let manifest_len = manifest.to_canonical_json().len() as u64;
        Ok(Indexed {
            digest,
            size: verified.size,
            manifest,
            data_offsets: self.data_offsets,
            manifest_offset: MANIFEST_OFFSET,
            manifest_len,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use packet_core::build::sample_packet;

    fn verify_in_chunks(
        bytes: &[u8],
        chunk: usize,
        core: bool,
        expected: Digest,
    ) -> Result<Indexed, Error> {
        let mut v = Verifier::new(expected, Limits::FORMAT, core);
        for c in bytes.chunks(chunk) {
            v.feed(c)?;
        }
        v.finish((!core).then(|| Digest::of(bytes)))
    }

    #[test]
    fn offsets_point_at_the_member_bodies() {
        let bytes = sample_packet();
        let digest = Digest::of(&bytes);
        for chunk in [1, 7, 512, 100_000] {
            for core in [true, false] {
                let indexed = verify_in_chunks(&bytes, chunk, core, digest).unwrap();
                assert_eq!(indexed.size, bytes.len() as u64);
                assert_eq!(indexed.digest, digest);
                for (entry, &offset) in indexed.manifest.members.iter().zip(&indexed.data_offsets) {
                    if let Some(sha) = entry.sha256 {
                        let body = &bytes[offset as usize..(offset + entry.size) as usize];
                        assert_eq!(Digest::of(body), sha, "{}", entry.path);
                    }
                }
                let json =
                    &bytes[indexed.manifest_offset as usize..][..indexed.manifest_len as usize];
                assert_eq!(json, indexed.manifest.to_canonical_json().as_slice());
            }
        }
    }

    #[test]
    fn a_flipped_body_byte_is_the_core_refusal() {
        let mut bytes = sample_packet();
        let digest = Digest::of(&bytes);
        let manifest = packet_core::reader::verify(&bytes, Default::default())
            .unwrap()
            .0;
        let (index, entry) = manifest
            .members
            .iter()
            .enumerate()
            .find(|(_, e)| e.size > 0)
            .unwrap();
        let offset = verify_in_chunks(&bytes, 4096, true, digest)
            .unwrap()
            .data_offsets[index];
        bytes[offset as usize] ^= 1;
        let err = verify_in_chunks(&bytes, 4096, true, digest).unwrap_err();
        assert_eq!(err.code(), ErrorCode::MemberDigestMismatch);
        assert_eq!(err.path(), Some(entry.path.as_str()));
    }

    #[test]
    fn the_whole_digest_is_checked_both_ways() {
        let bytes = sample_packet();
        let other = Digest::of(b"another packet");
        for core in [true, false] {
            let err = verify_in_chunks(&bytes, 1000, core, other).unwrap_err();
            assert_eq!(err.code(), ErrorCode::PacketDigestMismatch);
        }
        let mut v = Verifier::new(Digest::of(&bytes), Limits::FORMAT, false);
        v.feed(&bytes).unwrap();
        assert_eq!(v.finish(None).unwrap_err().code(), ErrorCode::Usage);
    }

    #[test]
    fn truncation_and_limits_are_the_cores() {
        let bytes = sample_packet();
        let digest = Digest::of(&bytes);
        let err = verify_in_chunks(&bytes[..bytes.len() - 512], 512, true, digest).unwrap_err();
        assert_eq!(err.code(), ErrorCode::Truncated);
        let limits = Limits {
            max_members: 1,
            ..Limits::FORMAT
        };
        let mut v = Verifier::new(digest, limits, true);
        assert_eq!(v.feed(&bytes).unwrap_err().code(), ErrorCode::LimitMembers);
    }
}
