//! Fuzzes packet-core's reader.
//!
//! Every input is used twice:
//!
//! 1. as a packet, as is (libFuzzer's own mutations of the seed corpus,
//!    which holds the golden vectors, explore it);
//! 2. as a program of structure-aware mutations applied to one of the
//!    golden vectors compiled in (/2 ones, and two /1 ones for the /1 read
//!    path): byte 0 picks the vector, then each group of four bytes is one
//!    mutation (set a header byte and fix the block's checksum, set a
//!    numeric header field, set any byte, truncate, copy, drop or swap
//!    blocks, append bytes). Fixing checksums lets mutations reach the
//!    checks that come after the checksum.
//!
//! For both, the reader must not panic, must give the same outcome (the
//! same error code, path and offset) whole and in chunks of varying size,
//! and, when it accepts a packet, that packet must be byte for byte what the
//! writer produces from the manifest and the bodies it read (the format has
//! one encoding), named by its version's rule (a /2 packet by its
//! `packet.json`), and a /2 packet verified from its `packet.json` and
//! bodies must be the same verified packet.
#![no_main]

use libfuzzer_sys::fuzz_target;

mod common;

const BLOCK: usize = 512;

const SEEDS: &[&[u8]] = &[
    include_bytes!("../../../tests/vectors/packets/empty-workspace.packet"),
    include_bytes!("../../../tests/vectors/packets/exec-bits.packet"),
    include_bytes!("../../../tests/vectors/packets/symlinks.packet"),
    include_bytes!("../../../tests/vectors/packets/long-path-pax.packet"),
    include_bytes!("../../../tests/vectors/packets/long-symlink-target.packet"),
    include_bytes!("../../../tests/vectors/packets/harness-codex.packet"),
    include_bytes!("../../../tests/vectors/packets/empty-files.packet"),
    include_bytes!("../../../tests/vectors/packets/utf8-paths.packet"),
    include_bytes!("../../../tests/vectors/v1/packets/exec-bits.packet"),
    include_bytes!("../../../tests/vectors/v1/packets/long-path-pax.packet"),
];

/// (offset, width) of the numeric ustar fields: mode, uid, gid, size,
/// mtime, devmajor, devminor.
const NUMERIC: &[(usize, usize)] = &[
    (100, 8),
    (108, 8),
    (116, 8),
    (124, 12),
    (136, 12),
    (329, 8),
    (337, 8),
];

fn fix_checksum(block: &mut [u8]) {
    let sum: u32 = block
        .iter()
        .enumerate()
        .map(|(i, &b)| {
            if (148..156).contains(&i) {
                32
            } else {
                u32::from(b)
            }
        })
        .sum();
    let text = format!("{sum:06o}\0 ");
    block[148..156].copy_from_slice(text.as_bytes());
}

fn mutate(program: &[u8]) -> Option<Vec<u8>> {
    let (&pick, ops) = program.split_first()?;
    let mut p = SEEDS[usize::from(pick) % SEEDS.len()].to_vec();
    for op in ops.chunks_exact(4).take(16) {
        let (kind, a, b, c) = (op[0] % 9, usize::from(op[1]), usize::from(op[2]), op[3]);
        let blocks = p.len() / BLOCK;
        match kind {
            // A header byte, checksum fixed.
            0 if blocks > 0 => {
                let start = (a % blocks) * BLOCK;
                let at = start + (b * 2 + usize::from(c & 1)) % BLOCK;
                p[at] = c;
                fix_checksum(&mut p[start..start + BLOCK]);
            }
            // A numeric field set to an octal value, checksum fixed.
            1 if blocks > 0 => {
                let start = (a % blocks) * BLOCK;
                let (off, width) = NUMERIC[b % NUMERIC.len()];
                let value = u64::from(c) << (b / NUMERIC.len() % 4 * 8);
                let text = format!("{value:0w$o}\0", w = width - 1);
                if text.len() == width {
                    p[start + off..start + off + width].copy_from_slice(text.as_bytes());
                }
                fix_checksum(&mut p[start..start + BLOCK]);
            }
            // Any byte.
            2 if !p.is_empty() => {
                let at = ((a << 8) | b) * (usize::from(c) + 1) % p.len();
                p[at] ^= c | 1;
            }
            3 => p.truncate(((a << 8) | b) * (usize::from(c) + 1) % (p.len() + 1)),
            // Copy a block elsewhere.
            4 if blocks > 0 => {
                let from = (a % blocks) * BLOCK;
                let block = p[from..from + BLOCK].to_vec();
                let to = (b % (blocks + 1)) * BLOCK;
                p.splice(to..to, block);
            }
            // Drop a block.
            5 if blocks > 0 => {
                let at = (a % blocks) * BLOCK;
                p.drain(at..at + BLOCK);
            }
            // Swap two blocks.
            6 if blocks > 1 => {
                let (x, y) = ((a % blocks) * BLOCK, (b % blocks) * BLOCK);
                for i in 0..BLOCK {
                    p.swap(x + i, y + i);
                }
            }
            // Append bytes.
            7 => p.extend(std::iter::repeat_n(c, a % 3 * BLOCK + b % 2)),
            // A string field byte (name, linkname, prefix) in a header,
            // checksum fixed.
            8 if blocks > 0 => {
                let start = (a % blocks) * BLOCK;
                let at = match b % 3 {
                    0 => b % 100,
                    1 => 157 + b % 100,
                    _ => 345 + b % 155,
                };
                p[start + at] = c;
                fix_checksum(&mut p[start..start + BLOCK]);
            }
            _ => {}
        }
    }
    Some(p)
}

fuzz_target!(|data: &[u8]| {
    common::check(data);
    if let Some(mutated) = mutate(data) {
        common::check(&mutated);
    }
});
