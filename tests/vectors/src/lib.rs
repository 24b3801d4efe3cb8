//! The golden vectors of `pillbox.session-packet/2`, and those of `/1`
//! kept as they were written.
//!
//! Layout of this folder:
//!
//! | path | holds |
//! |---|---|
//! | `descriptions/<name>.json` | the input of each vector (see [`description`]) |
//! | `packets/<name>.packet` | the /2 packet built from it |
//! | `digests.json` | each vector's packet digest (a /2 packet's: the SHA-256 of its `packet.json`) |
//! | `v1/packets/<name>.packet`, `v1/digests.json` | the /1 packets of the same descriptions, as /1 writers wrote them, and their digests (the SHA-256 of the whole file): never regenerated, so that every reader keeps reading /1 |
//!
//! Inputs that must be refused live in one table for every consumer, the
//! adversarial corpus (tests/adversarial/cases.json).
//!
//! `cargo run -p packet-vectors --bin gen` rebuilds `packets/` and
//! `digests.json` from the descriptions; `cargo test -p packet-vectors`
//! checks that the checked-in files are exactly what the descriptions
//! produce, and packet-core's `vectors` test checks the same under wasm32.

use std::fs;
use std::path::PathBuf;

pub mod description;

pub use description::Description;

/// This folder.
pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The names of the described vectors, sorted.
pub fn names() -> std::io::Result<Vec<String>> {
    let mut names: Vec<String> = fs::read_dir(root().join("descriptions"))?
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            name.strip_suffix(".json").map(str::to_string)
        })
        .collect();
    names.sort();
    Ok(names)
}

/// Reads and parses one description.
pub fn description(name: &str) -> Result<Description, String> {
    let path = root().join("descriptions").join(format!("{name}.json"));
    let text = fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    Description::parse(&text).map_err(|e| format!("{}: {e}", path.display()))
}

/// The path of a vector's packet.
pub fn packet_path(name: &str) -> PathBuf {
    root().join("packets").join(format!("{name}.packet"))
}

/// The checked-in packet of a vector, if any.
pub fn packet(name: &str) -> Option<Vec<u8>> {
    fs::read(packet_path(name)).ok()
}

/// The path of `digests.json`.
pub fn digests_path() -> PathBuf {
    root().join("digests.json")
}

/// The path of a vector's /1 packet.
pub fn v1_packet_path(name: &str) -> PathBuf {
    root().join("v1/packets").join(format!("{name}.packet"))
}

/// The checked-in /1 packet of a vector, if any.
pub fn v1_packet(name: &str) -> Option<Vec<u8>> {
    fs::read(v1_packet_path(name)).ok()
}

/// The path of the /1 vectors' `digests.json`.
pub fn v1_digests_path() -> PathBuf {
    root().join("v1/digests.json")
}

/// Writes `digests.json` for these (name, digest) pairs: one line per
/// vector, sorted by name, so that diffs stay readable.
pub fn digests_json(pairs: &[(String, String)]) -> String {
    let mut out = String::from("{\n");
    for (i, (name, digest)) in pairs.iter().enumerate() {
        let comma = if i + 1 < pairs.len() { "," } else { "" };
        out.push_str(&format!("  {name:?}: {digest:?}{comma}\n"));
    }
    out.push_str("}\n");
    out
}
