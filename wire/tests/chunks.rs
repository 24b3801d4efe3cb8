//! Properties of the chunk batch codec: any set of chunks round-trips,
//! fed in any pieces; any single byte changed is refused or still names
//! the same frames (a byte of a frame is caught by its sha256).

use packet_core::Digest;
use pillbox_wire::chunks::{
    batch_len, encode_head, BatchError, BatchLimits, Decoder, Event, Frame,
};
use proptest::prelude::*;

fn encode(chunks: &[Vec<u8>]) -> (Vec<Frame>, Vec<u8>) {
    let frames: Vec<Frame> = chunks.iter().map(|c| Frame::of(c)).collect();
    let mut out = encode_head(&frames);
    for c in chunks {
        out.extend_from_slice(c);
    }
    (frames, out)
}

/// Decodes `bytes` cut at `cuts`; returns the frames' bytes.
fn decode(bytes: &[u8], cuts: &[usize]) -> Result<Vec<Vec<u8>>, BatchError> {
    let mut d = Decoder::new(BatchLimits::PART);
    let mut got: Vec<Vec<u8>> = Vec::new();
    let mut points: Vec<usize> = cuts.iter().map(|c| c % (bytes.len() + 1)).collect();
    points.push(0);
    points.push(bytes.len());
    points.sort_unstable();
    for w in points.windows(2) {
        d.feed(&bytes[w[0]..w[1]], |e| {
            match e {
                Event::FrameStart { .. } => got.push(Vec::new()),
                Event::Data { index, bytes } => got[index].extend_from_slice(bytes),
                Event::Table(_) | Event::FrameEnd { .. } => {}
            }
            Ok::<(), BatchError>(())
        })?;
    }
    d.finish()?;
    Ok(got)
}

proptest! {
    #[test]
    fn any_chunks_round_trip_in_any_pieces(
        chunks in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..300), 0..20),
        cuts in prop::collection::vec(any::<usize>(), 0..10),
    ) {
        let (frames, bytes) = encode(&chunks);
        prop_assert_eq!(bytes.len() as u64, batch_len(&frames));
        prop_assert_eq!(decode(&bytes, &cuts).unwrap(), chunks);
    }

    #[test]
    fn a_changed_byte_never_passes_as_other_content(
        chunks in prop::collection::vec(prop::collection::vec(any::<u8>(), 1..200), 1..8),
        at in any::<usize>(),
        flip in 1u8..=255,
    ) {
        let (frames, mut bytes) = encode(&chunks);
        let at = at % bytes.len();
        bytes[at] ^= flip;
        // Either refused, or (a changed name or size in the table, which
        // then still hashes right) every frame returned hashes to the name
        // its table gives: never bytes under a name they do not have.
        if let Ok(got) = decode(&bytes, &[]) {
            let (decoded_frames, _) = encode(&got);
            prop_assert_ne!(&decoded_frames, &frames);
            for (g, f) in got.iter().zip(&decoded_frames) {
                prop_assert_eq!(Digest::of(g), f.sha256);
            }
        }
    }
}
