//! Regenerates `packets/*.packet` and `digests.json` from
//! `descriptions/*.json`.
//!
//! ```text
//! cargo run -p packet-vectors --bin gen
//! ```

use std::fs;
use std::process::ExitCode;

fn main() -> ExitCode {
    match run() {
        Ok(n) => {
            println!(
                "wrote {n} vectors and {}",
                packet_vectors::digests_path().display()
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("gen: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> Result<usize, String> {
    let names = packet_vectors::names().map_err(|e| e.to_string())?;
    fs::create_dir_all(packet_vectors::root().join("packets")).map_err(|e| e.to_string())?;
    let mut digests = Vec::new();
    for name in &names {
        let built = packet_vectors::description(name)?
            .build()
            .map_err(|e| format!("{name}: {e}"))?;
        let path = packet_vectors::packet_path(name);
        fs::write(&path, &built.bytes).map_err(|e| format!("{}: {e}", path.display()))?;
        println!("{name}: {} bytes, {}", built.bytes.len(), built.digest);
        digests.push((name.clone(), built.digest.to_string()));
    }
    let json = packet_vectors::digests_json(&digests);
    fs::write(packet_vectors::digests_path(), json).map_err(|e| e.to_string())?;
    // Remove packets whose description is gone.
    for entry in fs::read_dir(packet_vectors::root().join("packets")).map_err(|e| e.to_string())? {
        let entry = entry.map_err(|e| e.to_string())?;
        let file = entry.file_name().to_string_lossy().into_owned();
        if let Some(stem) = file.strip_suffix(".packet") {
            if !names.iter().any(|n| n == stem) {
                fs::remove_file(entry.path()).map_err(|e| e.to_string())?;
            }
        }
    }
    Ok(names.len())
}
