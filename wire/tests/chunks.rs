//! The chunk batch codec as properties: any batch decodes back to its
//! chunks however the input is cut; a batch cut short or with bytes added
//! is refused, whatever the cut; arbitrary bytes never panic the decoder.

use packet_core::Digest;
use pillbox_wire::chunks::{encode, BatchError, BatchLimits, Decoded, Decoder, Frame};
use proptest::prelude::*;

/// Decodes `batch` fed in pieces whose sizes cycle through `sizes`:
/// the table and each frame's bytes.
fn decode(batch: &[u8], sizes: &[usize]) -> Result<(Vec<Frame>, Vec<Vec<u8>>), BatchError> {
    let mut d = Decoder::new(BatchLimits::DOWNLOAD);
    let mut frames: Vec<Vec<u8>> = Vec::new();
    let (mut at, mut k) = (0, 0);
    while at < batch.len() {
        let n = sizes[k % sizes.len()].max(1);
        k += 1;
        let mut input = &batch[at..(at + n).min(batch.len())];
        at += input.len();
        while !input.is_empty() {
            let (decoded, used) = d.decode(input)?;
            input = &input[used..];
            match decoded {
                Decoded::Table => frames = vec![Vec::new(); d.table().len()],
                Decoded::Data { index, bytes, .. } => frames[index].extend_from_slice(bytes),
                Decoded::NeedInput | Decoded::Done => {}
            }
        }
    }
    d.finish()?;
    Ok((d.table().to_vec(), frames))
}

fn chunks() -> impl Strategy<Value = Vec<Vec<u8>>> {
    proptest::collection::vec(proptest::collection::vec(any::<u8>(), 1..300), 0..12)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn decodes_back_to_the_chunks_however_cut(
        chunks in chunks(),
        sizes in proptest::collection::vec(1usize..80, 1..6),
    ) {
        let refs: Vec<&[u8]> = chunks.iter().map(Vec::as_slice).collect();
        let batch = encode(&refs);
        let (table, frames) = decode(&batch, &sizes).unwrap();
        prop_assert_eq!(&frames, &chunks);
        for (f, c) in table.iter().zip(&chunks) {
            prop_assert_eq!(f.sha256, Digest::of(c));
            prop_assert_eq!(f.size as usize, c.len());
        }
    }

    #[test]
    fn a_cut_or_extended_batch_is_refused(
        chunks in chunks(),
        cut in any::<prop::sample::Index>(),
        extra in proptest::collection::vec(any::<u8>(), 1..8),
        sizes in proptest::collection::vec(1usize..80, 1..6),
    ) {
        let refs: Vec<&[u8]> = chunks.iter().map(Vec::as_slice).collect();
        let batch = encode(&refs);
        let short = &batch[..cut.index(batch.len())];
        prop_assert_eq!(decode(short, &sizes).unwrap_err().code(), "chunk_batch_truncated");
        let mut long = batch.clone();
        long.extend_from_slice(&extra);
        prop_assert_eq!(decode(&long, &sizes).unwrap_err().code(), "chunk_batch_trailing");
    }

    #[test]
    fn arbitrary_bytes_never_panic(
        bytes in proptest::collection::vec(any::<u8>(), 0..400),
        prefix in any::<bool>(),
        sizes in proptest::collection::vec(1usize..80, 1..6),
    ) {
        let mut input = if prefix { b"PBCHUNK1".to_vec() } else { Vec::new() };
        input.extend_from_slice(&bytes);
        let _ = decode(&input, &sizes);
    }
}
