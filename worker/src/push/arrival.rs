//! A frame as it arrives (docs/transfer.md, "Push", step 3), pure: its
//! stored bytes are decoded into exactly its raw size and hashed against
//! its name; a frame that is a whole body of the packet is screened for
//! findings then, for each class its members have, so the body is never
//! read again.

use packet_core::secrets::Scanner;
use packet_core::{BodyFindings, BodyScanner};
use pillbox_wire::chunks::Frame;
use pillbox_wire::ApiCode;

use crate::platform;
use crate::problem::Problem;
use crate::storage::frames;

fn refused(code: ApiCode, message: String) -> Problem {
    Problem::new(
        code,
        message,
        "send chunks named by the sha256 of their raw bytes, each zstd frame decoding to exactly its raw size",
    )
}

/// The raw bytes of frame `index` (`frame`, its stored bytes `stored`),
/// into `raw` (cleared first), checked against its name.
pub fn check(index: usize, frame: &Frame, stored: &[u8], raw: &mut Vec<u8>) -> Result<(), Problem> {
    raw.clear();
    frames::decode_into(frame.encoding, u64::from(frame.raw_size), stored, raw).map_err(|e| {
        refused(
            e.code,
            format!("frame {index} ({}): {}", frame.sha256.hex(), e.message),
        )
    })?;
    // The digest the bytes have is not told: only that they are not the
    // name's.
    if platform::sha256(raw) != frame.sha256 {
        return Err(refused(
            ApiCode::ChunkDigestMismatch,
            format!(
                "frame {index} is named {} but its bytes do not hash to it",
                frame.sha256.hex()
            ),
        ));
    }
    Ok(())
}

/// What the raw bytes of a body hold, for each of `classes` (a class and
/// the path of one member of it); only the classes with findings.
pub fn screen(raw: &[u8], classes: &[(u8, String)], scanner: &Scanner) -> Vec<(u8, BodyFindings)> {
    classes
        .iter()
        .filter_map(|(class, path)| {
            let mut s = BodyScanner::new(scanner, path);
            s.feed(raw);
            let found = s.finish();
            (!found.is_empty()).then_some((*class, found))
        })
        .collect()
}
