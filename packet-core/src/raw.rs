//! The format's encoders without its rules, for tools that write hostile
//! packets on purpose (the fuzz targets, the inspector's malformed
//! fixtures): one encoder of packets, whatever their manifest and headers
//! say. Nothing written with it is checked.

use alloc::vec::Vec;

pub use crate::header::{encode as encode_header, padded, HeaderSpec, BLOCK};
pub use crate::manifest::{UncheckedManifest, UncheckedMember};

use crate::header::Kind;

/// Appends the header(s) the format writes for `member`.
pub fn encode_member_header(member: &UncheckedMember, out: &mut Vec<u8>) {
    encode_header(&member.header_spec(), out);
}

/// A packet as the format lays one out: `packet.json` holding `json`, then
/// each member's header(s) and body, each padded to a whole block, then
/// the end marker. The headers and bodies are written as given, whether
/// or not they agree with `json` or with each other.
pub fn encode_packet<'a>(
    json: &[u8],
    members: impl IntoIterator<Item = (HeaderSpec<'a>, &'a [u8])>,
) -> Vec<u8> {
    let mut out = Vec::new();
    encode_header(&HeaderSpec::manifest(json.len() as u64), &mut out);
    append_padded(&mut out, json);
    for (header, body) in members {
        encode_header(&header, &mut out);
        append_padded(&mut out, body);
    }
    out.resize(out.len() + 2 * BLOCK, 0);
    out
}

/// [`encode_packet`] of `manifest`: its canonical JSON, each member's own
/// header, and `bodies[i]` as the body of each file `manifest.members[i]`
/// (empty when missing; directories and symlinks get none, whatever
/// `bodies` holds).
pub fn encode_manifest(manifest: &UncheckedManifest, bodies: &[Vec<u8>]) -> Vec<u8> {
    let json = manifest.to_canonical_json();
    let members = manifest.members.iter().enumerate().map(|(i, member)| {
        let body = match member.entry.kind() {
            Kind::File => bodies.get(i).map_or(&[][..], Vec::as_slice),
            Kind::Dir | Kind::Symlink => &[],
        };
        (member.header_spec(), body)
    });
    encode_packet(&json, members)
}

fn append_padded(out: &mut Vec<u8>, bytes: &[u8]) {
    out.extend_from_slice(bytes);
    out.resize(padded(out.len() as u64) as usize, 0);
}
