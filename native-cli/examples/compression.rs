//! Measures how delta push parts compress (docs/transfer.md,
//! "Compression"): each file is cut into parts of 32 MiB, as a push cuts
//! its chunk batches, and every part is compressed on its own with each
//! candidate setting. Prints one Markdown row per file and setting: the
//! ratio (input bytes / output bytes) and the single-core speed.
//!
//!     cargo run --release -p pillbox --example compression -- FILE...

use std::io::Write;
use std::time::Instant;

const PART: usize = 32 << 20;

enum Setting {
    Zstd { level: i32, window_log: Option<u32> },
    Gzip(u32),
}

impl Setting {
    fn name(&self) -> String {
        match self {
            Setting::Zstd {
                level,
                window_log: Some(w),
            } => format!("zstd-{level} w{w}"),
            Setting::Zstd {
                level,
                window_log: None,
            } => format!("zstd-{level}"),
            Setting::Gzip(level) => format!("gzip-{level}"),
        }
    }

    fn compress(&self, part: &[u8]) -> usize {
        match self {
            Setting::Zstd { level, window_log } => {
                let mut enc = zstd::bulk::Compressor::new(*level).expect("zstd level");
                if let Some(w) = window_log {
                    enc.set_parameter(zstd::zstd_safe::CParameter::WindowLog(*w))
                        .expect("window log");
                }
                enc.compress(part).expect("zstd").len()
            }
            Setting::Gzip(level) => {
                let mut enc = flate2::write::GzEncoder::new(
                    Vec::with_capacity(part.len() / 2),
                    flate2::Compression::new(*level),
                );
                enc.write_all(part).expect("gzip");
                enc.finish().expect("gzip").len()
            }
        }
    }
}

fn main() {
    let settings = [
        Setting::Zstd {
            level: 1,
            window_log: Some(23),
        },
        Setting::Zstd {
            level: 3,
            window_log: None,
        },
        Setting::Zstd {
            level: 3,
            window_log: Some(23),
        },
        Setting::Zstd {
            level: 6,
            window_log: Some(23),
        },
        Setting::Zstd {
            level: 9,
            window_log: Some(23),
        },
        Setting::Gzip(1),
        Setting::Gzip(6),
    ];
    println!("| sample | setting | ratio | MB/s (one core) |");
    println!("|---|---|---|---|");
    for file in std::env::args().skip(1) {
        let bytes = std::fs::read(&file).expect("read the sample");
        let name = std::path::Path::new(&file)
            .file_name()
            .map_or(file.clone(), |n| n.to_string_lossy().into_owned());
        for s in &settings {
            let started = Instant::now();
            let out: usize = bytes.chunks(PART).map(|p| s.compress(p)).sum();
            let seconds = started.elapsed().as_secs_f64();
            println!(
                "| {name} ({} MB) | {} | {:.2}× | {:.0} |",
                bytes.len() / 1_000_000,
                s.name(),
                bytes.len() as f64 / out as f64,
                bytes.len() as f64 / 1e6 / seconds
            );
        }
    }
}
