//! Fuzzes packet-core's reader with a structure-aware custom mutator.
//!
//! libFuzzer's byte-level mutations rarely get past the manifest's checks.
//! This target's mutator (`fuzz_mutator!`) reads the input as a packet
//! and, when it parses, changes its *member set* and re-encodes it with a
//! raw encoder that checks no rule: hostile paths from a dictionary
//! (`..`, absolute, control characters, case and Unicode twins of an
//! existing member, `.git` look-alikes, roots), symlinks that escape or pass
//! through other links, members below symlinks or files, duplicated,
//! dropped or swapped members, wrong types, modes, sizes or digests, stale
//! totals, harness descriptors, the other version of the format; or it
//! edits the archive around an honest manifest (a member's header or body,
//! a block). Otherwise it falls back to libFuzzer's own mutations. The
//! properties are `common::check`'s.
#![no_main]

mod common;

use libfuzzer_sys::{fuzz_mutator, fuzz_target, fuzzer_mutate};
use packet_core::raw::{encode_manifest, UncheckedManifest, UncheckedMember};
use packet_core::{Digest, Entry, Format, Harness, HarnessKind, Kind};

const SEEDS: &[&[u8]] = &[
    include_bytes!("../../../tests/vectors/packets/symlinks.packet"),
    include_bytes!("../../../tests/vectors/packets/long-path-pax.packet"),
    include_bytes!("../../../tests/vectors/packets/harness-codex.packet"),
    include_bytes!("../../../tests/vectors/packets/utf8-paths.packet"),
    include_bytes!("../../../tests/vectors/packets/nested-dirs.packet"),
];

/// Names a hostile member may take, relative to an existing directory.
const NAMES: &[&str] = &[
    "..",
    ".",
    "",
    "a/../..",
    "/etc/passwd",
    "a\0b",
    "a\nb",
    "\u{1b}[2J",
    "\u{85}",
    "README",
    "readme",
    "\u{212a}",
    "k",
    "caf\u{e9}",
    "cafe\u{301}",
    "a\u{200d}b",
    "ab",
    ".git",
    ".GIT",
    ".gi\u{200c}t",
    "CON",
    "x.",
    "x ",
    "\u{fffd}",
    ".codex/auth.json",
    ".netrc",
    "id_rsa",
    "packet.json",
];

/// Link targets.
const TARGETS: &[&str] = &[
    "..",
    "../..",
    "../../..",
    "/",
    "/etc",
    "a",
    "./a//b/..",
    "l/x",
    "x/../../y",
    "",
    "\u{0}",
    ".",
    "../workspace",
    "../harness/codex",
];

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next() % n as u64) as usize
        }
    }
}

/// A member with any path: an empty file, a directory or a symlink.
fn member(path: String, entry: Entry) -> UncheckedMember {
    UncheckedMember { path, entry }
}

fn empty_file() -> Entry {
    Entry::File {
        size: 0,
        sha256: Digest::of(b""),
        executable: false,
    }
}

fn join(dir: &str, name: &str) -> String {
    if name.starts_with('/') {
        name.to_string()
    } else {
        format!("{dir}/{name}")
    }
}

fn mutate_members(bytes: &[u8], rng: &mut Rng) -> Option<Vec<u8>> {
    let (verified, mut bodies) = common::read(bytes, 0).ok()?;
    let mut m = UncheckedManifest::from(verified.manifest);
    let steps = 1 + rng.below(3);
    for _ in 0..steps {
        let n = m.members.len();
        let dirs: Vec<String> = m
            .members
            .iter()
            .filter(|e| e.entry.kind() == Kind::Dir)
            .map(|e| e.path.clone())
            .collect();
        let dir = dirs
            .get(rng.below(dirs.len()))
            .cloned()
            .unwrap_or_else(|| "workspace".into());
        let at = rng.below(n + 1);
        match rng.below(12) {
            0 => {
                let p = join(&dir, NAMES[rng.below(NAMES.len())]);
                m.members.insert(at, member(p, empty_file()));
                bodies.insert(at, Vec::new());
            }
            1 => {
                let p = join(&dir, NAMES[rng.below(NAMES.len())]);
                m.members.insert(at, member(p, Entry::Dir));
                bodies.insert(at, Vec::new());
            }
            2 => {
                let p = join(&dir, &format!("l{}", rng.below(3)));
                let target = TARGETS[rng.below(TARGETS.len())].into();
                m.members.insert(at, member(p, Entry::Symlink { target }));
                bodies.insert(at, Vec::new());
            }
            3 if n > 0 => {
                // A twin of an existing member: another case or normalisation.
                let e = m.members[rng.below(n)].clone();
                let twin = match rng.below(3) {
                    0 => e.path.to_uppercase(),
                    1 => e.path.replace('k', "\u{212a}").replace('e', "e\u{200b}"),
                    _ => e.path.clone(),
                };
                m.members.insert(at, UncheckedMember { path: twin, ..e });
                bodies.insert(at, Vec::new());
            }
            4 if n > 0 => {
                let i = rng.below(n);
                m.members.remove(i);
                bodies.remove(i);
            }
            5 if n > 1 => {
                let (i, j) = (rng.below(n), rng.below(n));
                m.members.swap(i, j);
                bodies.swap(i, j);
            }
            6 if n > 0 => {
                // The manifest can only state canonical modes; a file's
                // execute bit flips.
                let e = &mut m.members[rng.below(n)];
                if let Entry::File { executable, .. } = &mut e.entry {
                    *executable = !*executable;
                }
            }
            7 if n > 0 => {
                let i = rng.below(n);
                let e = &mut m.members[i];
                e.entry = match rng.below(3) {
                    0 => Entry::File {
                        size: bodies[i].len() as u64,
                        sha256: Digest::of(&bodies[i]),
                        executable: false,
                    },
                    1 => Entry::Dir,
                    _ => Entry::Symlink {
                        target: TARGETS[rng.below(TARGETS.len())].into(),
                    },
                };
            }
            8 if n > 0 => {
                let i = rng.below(n);
                if let Entry::File { size, sha256, .. } = &mut m.members[i].entry {
                    bodies[i].push(rng.next() as u8);
                    if rng.below(2) == 0 {
                        *size = bodies[i].len() as u64;
                    }
                    if rng.below(2) == 0 {
                        *sha256 = Digest::of(&bodies[i]);
                    }
                }
            }
            9 if n > 0 => {
                // A member below a symlink or a file.
                let e = m.members[rng.below(n)].clone();
                let p = format!("{}/x", e.path);
                m.members.insert(at, member(p, empty_file()));
                bodies.insert(at, Vec::new());
            }
            10 => {
                m.harness = match rng.below(3) {
                    0 => None,
                    _ => Some(Harness {
                        kind: if rng.below(2) == 0 {
                            HarnessKind::Codex
                        } else {
                            HarnessKind::Claude
                        },
                        model: None,
                        provider: None,
                        session_log: m
                            .members
                            .get(rng.below(n.max(1)))
                            .map(|e| e.path.clone())
                            .unwrap_or_default(),
                        session_id: "0199a213-81c0-7800-8aa1-bbab2a035a53".into(),
                        version: None,
                    }),
                };
            }
            11 => {
                // The other version: the same bytes but one, under /1's rules.
                m.format = match m.format {
                    Format::V1 => Format::V2,
                    _ => Format::V1,
                };
            }
            _ => {}
        }
    }
    if rng.below(8) != 0 {
        common::retotal(&mut m);
    }
    if rng.below(2) == 0 {
        m.members
            .sort_by(|a, b| packet_core::path::compare(&a.path, &b.path));
        // Bodies follow their members by path again.
    }
    bodies.resize(m.members.len(), Vec::new());
    for (i, e) in m.members.iter().enumerate() {
        let (kind, size) = (e.entry.kind(), e.entry.size());
        if kind == Kind::File && bodies[i].len() as u64 != size && rng.below(2) == 0 {
            bodies[i].resize(size.min(1 << 16) as usize, 0);
        }
    }
    Some(encode_manifest(&m, &bodies))
}

fn mutate_blocks(bytes: &mut Vec<u8>, rng: &mut Rng) {
    let blocks = bytes.len() / 512;
    if blocks == 0 {
        return;
    }
    let start = rng.below(blocks) * 512;
    match rng.below(4) {
        0 => {
            let at = start + rng.below(512);
            bytes[at] = rng.next() as u8;
            let sum: u32 = bytes[start..start + 512]
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
            bytes[start + 148..start + 156].copy_from_slice(format!("{sum:06o}\0 ").as_bytes());
        }
        1 => bytes.truncate(start),
        2 => {
            let block = bytes[start..start + 512].to_vec();
            let to = rng.below(blocks + 1) * 512;
            bytes.splice(to..to, block);
        }
        _ => {
            bytes.drain(start..start + 512);
        }
    }
}

fuzz_mutator!(|data: &mut [u8], size: usize, max_size: usize, seed: u32| {
    let mut rng = Rng(u64::from(seed).wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
    let input = if size == 0 || rng.below(16) == 0 {
        SEEDS[rng.below(SEEDS.len())].to_vec()
    } else {
        data[..size].to_vec()
    };
    let out = match rng.below(4) {
        0 | 1 => mutate_members(&input, &mut rng),
        2 => {
            let mut b = input.clone();
            mutate_blocks(&mut b, &mut rng);
            Some(b)
        }
        _ => None,
    };
    match out {
        Some(out) if out.len() <= max_size => {
            data[..out.len()].copy_from_slice(&out);
            out.len()
        }
        _ => fuzzer_mutate(data, size, max_size),
    }
});

fuzz_target!(|data: &[u8]| {
    common::check(data);
});
