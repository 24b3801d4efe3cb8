//! Byte scans shaped so that the compiler vectorises them: a fixed-size
//! chunk at a time, with no branch inside a chunk.

const CHUNK: usize = 16;

/// Whether any byte of `bytes` satisfies `pred`.
pub(crate) fn any(bytes: &[u8], pred: impl Fn(u8) -> bool) -> bool {
    let mut chunks = bytes.chunks_exact(CHUNK);
    chunks
        .by_ref()
        .any(|c| c.iter().fold(false, |found, &b| found | pred(b)))
        || chunks.remainder().iter().any(|&b| pred(b))
}

/// The offset of the first byte of `bytes` that satisfies `pred`.
pub(crate) fn position(bytes: &[u8], pred: impl Fn(u8) -> bool) -> Option<usize> {
    let clean = bytes
        .chunks_exact(CHUNK)
        .take_while(|c| !c.iter().fold(false, |found, &b| found | pred(b)))
        .count()
        * CHUNK;
    bytes[clean..]
        .iter()
        .position(|&b| pred(b))
        .map(|i| clean + i)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scans_find_what_a_plain_loop_finds() {
        for len in 0..70 {
            let mut v = alloc::vec![0u8; len];
            assert!(!any(&v, |b| b != 0));
            assert_eq!(position(&v, |b| b != 0), None);
            for at in 0..len {
                v[at] = 1;
                assert!(any(&v, |b| b != 0));
                assert_eq!(position(&v, |b| b != 0), Some(at));
                v[at] = 0;
            }
        }
    }
}
