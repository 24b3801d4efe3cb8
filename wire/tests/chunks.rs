//! The binary codecs as properties: any chunk batch, recipes document or
//! push body decodes back to what was encoded however the input is cut; a
//! body cut short or with bytes added is refused, whatever the cut;
//! arbitrary bytes never panic a decoder, and what a decoder holds never
//! exceeds what its limits allow.

use packet_core::{Body, Digest};
use pillbox_wire::binary::DecodeError;
use pillbox_wire::chunks::{encode, BatchLimits, Decoded, Decoder, Encoding, Frame};
use pillbox_wire::recipes::{
    BodyRecipe, ChunkName, PushDecoded, PushDecoder, PushLimits, RecipeLimits, Recipes, Run,
};
use proptest::prelude::*;

/// Decodes `batch` fed in pieces whose sizes cycle through `sizes`:
/// the table and each frame's stored bytes.
fn decode(
    batch: &[u8],
    sizes: &[usize],
    limits: BatchLimits,
) -> Result<(Vec<Frame>, Vec<Vec<u8>>), DecodeError> {
    let mut d = Decoder::new(limits);
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
            // The decoder holds its table and nothing of the frames.
            assert!(d.table().len() as u32 <= limits.max_frames);
        }
    }
    d.finish()?;
    Ok((d.table().to_vec(), frames))
}

/// Frames with stored bytes: identity ones, and "zstd" ones whose stored
/// bytes are shorter than their raw size (the codec does not decompress).
fn frames() -> impl Strategy<Value = Vec<(Frame, Vec<u8>)>> {
    let one = (
        proptest::collection::vec(any::<u8>(), 1..300),
        any::<bool>(),
        1u32..5000,
    )
        .prop_map(|(bytes, zstd, extra)| {
            if zstd {
                let raw = bytes.len() as u32 + extra;
                (
                    Frame::zstd(Digest::of(&bytes), raw, bytes.len() as u32),
                    bytes,
                )
            } else {
                (Frame::identity(&bytes), bytes)
            }
        });
    proptest::collection::vec(one, 0..12)
}

fn batch_of(frames: &[(Frame, Vec<u8>)]) -> Vec<u8> {
    let refs: Vec<(Frame, &[u8])> = frames.iter().map(|(f, b)| (*f, b.as_slice())).collect();
    encode(&refs)
}

fn digest() -> impl Strategy<Value = Digest> {
    any::<[u8; 32]>().prop_map(Digest)
}

fn chunk_name() -> impl Strategy<Value = ChunkName> {
    (digest(), 1u32..=(1 << 20)).prop_map(|(sha256, size)| ChunkName { sha256, size })
}

fn body() -> impl Strategy<Value = Body> {
    (digest(), 1u64..u64::MAX).prop_map(|(sha256, size)| Body { sha256, size })
}

fn recipes() -> impl Strategy<Value = Recipes> {
    let run = prop_oneof![
        chunk_name().prop_map(Run::Chunk),
        (body(), any::<u32>(), 1u32..u32::MAX).prop_map(|(body, first, count)| Run::Copy {
            body,
            first,
            count
        }),
    ];
    let recipe = (body(), proptest::collection::vec(run, 0..6))
        .prop_map(|(body, runs)| BodyRecipe { body, runs });
    (
        proptest::collection::vec(chunk_name(), 0..6),
        proptest::collection::vec(recipe, 0..5),
    )
        .prop_map(|(manifest, bodies)| Recipes { manifest, bodies })
}

/// Decodes a push body fed in pieces: its recipes and its frames.
fn decode_push(
    body: &[u8],
    sizes: &[usize],
    limits: PushLimits,
) -> Result<(Recipes, Vec<Vec<u8>>), DecodeError> {
    let mut p = PushDecoder::new(limits);
    let mut frames: Vec<Vec<u8>> = Vec::new();
    let mut recipes = None;
    let (mut at, mut k) = (0, 0);
    while at < body.len() {
        let n = sizes[k % sizes.len()].max(1);
        k += 1;
        let mut input = &body[at..(at + n).min(body.len())];
        at += input.len();
        while !input.is_empty() {
            let (found, used) = p.decode(input)?;
            input = &input[used..];
            match found {
                PushDecoded::Recipes => recipes = Some(p.take_recipes()),
                PushDecoded::Batch(Decoded::Table) => {
                    frames = vec![Vec::new(); p.batch().map_or(0, |b| b.table().len())]
                }
                PushDecoded::Batch(Decoded::Data { index, bytes, .. }) => {
                    frames[index].extend_from_slice(bytes)
                }
                _ => {}
            }
        }
    }
    p.finish()?;
    Ok((recipes.unwrap_or_default(), frames))
}

const PUSH: PushLimits = PushLimits {
    recipes: RecipeLimits::DEFAULT,
    batch: BatchLimits::DOWNLOAD,
};

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn a_batch_decodes_back_however_cut(
        frames in frames(),
        sizes in proptest::collection::vec(1usize..80, 1..6),
    ) {
        let batch = batch_of(&frames);
        let (table, bytes) = decode(&batch, &sizes, BatchLimits::DOWNLOAD).unwrap();
        prop_assert_eq!(table.len(), frames.len());
        for ((t, b), (f, want)) in table.iter().zip(&bytes).zip(&frames) {
            prop_assert_eq!(t, f);
            prop_assert_eq!(b, want);
            prop_assert_eq!(t.encoding == Encoding::Identity, t.raw_size == t.stored_size);
        }
    }

    #[test]
    fn a_cut_or_extended_batch_is_refused(
        frames in frames(),
        cut in any::<prop::sample::Index>(),
        extra in proptest::collection::vec(any::<u8>(), 1..8),
        sizes in proptest::collection::vec(1usize..80, 1..6),
    ) {
        let batch = batch_of(&frames);
        let short = &batch[..cut.index(batch.len())];
        prop_assert_eq!(decode(short, &sizes, BatchLimits::DOWNLOAD).unwrap_err().code(), "chunk_batch_truncated");
        let mut long = batch.clone();
        long.extend_from_slice(&extra);
        prop_assert_eq!(decode(&long, &sizes, BatchLimits::DOWNLOAD).unwrap_err().code(), "chunk_batch_trailing");
    }

    #[test]
    fn a_batch_over_its_limits_is_refused_before_its_frames(
        frames in frames(),
        max_frames in 0u32..12,
        max_stored in 0u64..2000,
    ) {
        let limits = BatchLimits { max_frames, max_stored_bytes: max_stored, ..BatchLimits::DOWNLOAD };
        let batch = batch_of(&frames);
        let stored: u64 = frames.iter().map(|(f, _)| u64::from(f.stored_size)).sum();
        let result = decode(&batch, &[batch.len().max(1)], limits);
        if frames.len() as u32 > max_frames {
            prop_assert_eq!(result.unwrap_err().code(), "chunk_batch_frames");
        } else if stored > max_stored {
            prop_assert_eq!(result.unwrap_err().code(), "chunk_batch_size");
        } else {
            prop_assert!(result.is_ok());
        }
    }

    #[test]
    fn recipes_and_push_bodies_decode_back_however_cut(
        r in recipes(),
        frames in frames(),
        sizes in proptest::collection::vec(1usize..120, 1..6),
    ) {
        let doc = r.encode();
        prop_assert_eq!(&Recipes::decode(&doc, RecipeLimits::DEFAULT).unwrap(), &r);
        let body = r.encode_push(&batch_of(&frames));
        let (got, bytes) = decode_push(&body, &sizes, PUSH).unwrap();
        prop_assert_eq!(&got, &r);
        let want: Vec<Vec<u8>> = frames.iter().map(|(_, b)| b.clone()).collect();
        prop_assert_eq!(bytes, want);
    }

    #[test]
    fn cut_or_extended_recipes_are_refused(
        r in recipes(),
        cut in any::<prop::sample::Index>(),
        extra in proptest::collection::vec(any::<u8>(), 1..8),
    ) {
        let doc = r.encode();
        let short = &doc[..cut.index(doc.len())];
        prop_assert_eq!(Recipes::decode(short, RecipeLimits::DEFAULT).unwrap_err().code(), "recipes_truncated");
        let mut long = doc.clone();
        long.extend_from_slice(&extra);
        prop_assert_eq!(Recipes::decode(&long, RecipeLimits::DEFAULT).unwrap_err().code(), "recipes_trailing");
    }

    #[test]
    fn recipes_beyond_their_limits_are_refused(
        r in recipes(),
        max_bytes in 8u64..2000,
        max_runs in 0u32..12,
    ) {
        let limits = RecipeLimits { max_bytes, max_runs, ..RecipeLimits::DEFAULT };
        let doc = r.encode();
        let runs: usize = r.bodies.iter().map(|b| b.runs.len()).sum();
        match Recipes::decode(&doc, limits) {
            Ok(got) => {
                prop_assert_eq!(got, r);
                prop_assert!(doc.len() as u64 <= max_bytes && runs as u32 <= max_runs);
            }
            Err(e) => {
                prop_assert_eq!(e.code(), "recipes_count");
                prop_assert!(doc.len() as u64 > max_bytes || runs as u32 > max_runs);
            }
        }
    }

    #[test]
    fn arbitrary_bytes_never_panic(
        bytes in proptest::collection::vec(any::<u8>(), 0..600),
        prefix in 0u8..3,
        sizes in proptest::collection::vec(1usize..80, 1..6),
    ) {
        let mut input = match prefix {
            0 => b"PBCHUNK2".to_vec(),
            1 => b"PBPUSH02".to_vec(),
            _ => b"PBRECIPE".to_vec(),
        };
        input.extend_from_slice(&bytes);
        let _ = decode(&input, &sizes, BatchLimits::DOWNLOAD);
        let _ = decode_push(&input, &sizes, PUSH);
        let _ = Recipes::decode(&input, RecipeLimits::DEFAULT);
    }
}
