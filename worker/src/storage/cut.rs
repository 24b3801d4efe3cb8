//! Cutting bytes into chunks at the edge, as every client does (the table
//! of [`pillbox_wire::chunking`], the `fastcdc` crate's `v2020` with its
//! default normalisation, built for wasm32 like the rest of the Worker):
//! the Worker cuts the layout streams it writes, and the `packet.json` of a
//! packet that arrived whole, so that the same bytes are the same chunks
//! whoever cut them.

use core::ops::Range;

use fastcdc::v2020::FastCDC;
use pillbox_wire::chunking::Cdc;

/// The chunks of `bytes` under `cdc`, as ranges, in order.
pub fn cut(bytes: &[u8], cdc: &Cdc) -> Vec<Range<usize>> {
    if bytes.is_empty() {
        return Vec::new();
    }
    if cdc.is_one_chunk(bytes.len() as u64) {
        return std::iter::once(0..bytes.len()).collect();
    }
    FastCDC::new(bytes, cdc.min as usize, cdc.avg as usize, cdc.max as usize)
        .map(|c| c.offset..c.offset + c.length)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use pillbox_wire::chunking::{BODIES, MANIFEST};

    fn sample(len: usize, seed: u64) -> Vec<u8> {
        let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
        (0..len)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                (x % 251) as u8
            })
            .collect()
    }

    #[test]
    fn the_cuts_are_fastcdc_over_the_table_and_cover_every_byte() {
        for (cdc, lens) in [
            (&MANIFEST, [0usize, 10, 64 << 10, (64 << 10) + 1, 3 << 20]),
            (&BODIES, [1, 256 << 10, (256 << 10) + 1, 5 << 20, 9 << 20]),
        ] {
            for len in lens {
                let bytes = sample(len, len as u64);
                let got = cut(&bytes, cdc);
                let mut at = 0;
                for r in &got {
                    assert_eq!(r.start, at);
                    assert!(r.len() as u32 <= cdc.largest_chunk());
                    at = r.end;
                }
                assert_eq!(at, len);
                if !cdc.is_one_chunk(len as u64) {
                    let direct: Vec<Range<usize>> =
                        FastCDC::new(&bytes, cdc.min as usize, cdc.avg as usize, cdc.max as usize)
                            .map(|c| c.offset..c.offset + c.length)
                            .collect();
                    assert_eq!(got, direct);
                    if len > 2 * cdc.max as usize {
                        assert!(got.len() > 1);
                    }
                }
            }
        }
    }

    #[test]
    fn a_change_in_the_middle_changes_only_nearby_chunks() {
        let before = sample(2 << 20, 7);
        let mut after = before.clone();
        after[1 << 20] ^= 1;
        let name = |b: &[u8], r: &Range<usize>| packet_core::Digest::of(&b[r.clone()]);
        let old: std::collections::HashSet<_> = cut(&before, &MANIFEST)
            .iter()
            .map(|r| name(&before, r))
            .collect();
        let changed = cut(&after, &MANIFEST)
            .iter()
            .filter(|r| !old.contains(&name(&after, r)))
            .count();
        assert!(changed <= 2, "{changed}");
    }
}
