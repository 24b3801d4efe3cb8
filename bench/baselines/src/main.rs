//! Baselines the benchmark compares the pillbox CLI with, measured in the
//! same run on the same data:
//!
//! ```text
//! bench-baselines tar-pack DIR OUT     the tar crate's Builder, sorted walk, normalised headers
//! bench-baselines tar-unpack ARCHIVE DIR  the tar crate's Archive::unpack
//! bench-baselines sha256 FILE          raw SHA-256 of a file (1 MiB reads), the physical limit
//! bench-baselines sha256-mem FILE      SHA-256 of as many bytes as FILE holds, from memory (no reads)
//! ```
use std::fs::{self, File};
use std::io::{self, BufWriter, Read, Write};
use std::path::Path;
use std::process::ExitCode;

use sha2::{Digest, Sha256};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args
        .iter()
        .map(String::as_str)
        .collect::<Vec<_>>()
        .as_slice()
    {
        ["tar-pack", dir, out] => tar_pack(Path::new(dir), Path::new(out)),
        ["tar-unpack", archive, dir] => tar_unpack(Path::new(archive), Path::new(dir)),
        ["sha256", file] => sha256(Path::new(file)),
        ["sha256-mem", file] => sha256_mem(Path::new(file)),
        ["copy", file, out] => copy(Path::new(file), Path::new(out)),
        _ => {
            eprintln!(
                "usage: bench-baselines tar-pack DIR OUT | tar-unpack ARCHIVE DIR | sha256 FILE | sha256-mem FILE | copy FILE OUT"
            );
            return ExitCode::from(2);
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("bench-baselines: {e}");
            ExitCode::FAILURE
        }
    }
}

fn tar_pack(dir: &Path, out: &Path) -> io::Result<()> {
    let file = BufWriter::with_capacity(1 << 20, File::create(out)?);
    let mut builder = tar::Builder::new(file);
    builder.mode(tar::HeaderMode::Deterministic);
    builder.follow_symlinks(false);
    add_sorted(&mut builder, dir, Path::new(""))?;
    builder.into_inner()?.flush()
}

fn add_sorted<W: Write>(b: &mut tar::Builder<W>, root: &Path, rel: &Path) -> io::Result<()> {
    let mut names: Vec<_> = fs::read_dir(root.join(rel))?
        .map(|e| e.map(|e| e.file_name()))
        .collect::<Result<_, _>>()?;
    names.sort();
    for name in names {
        let rel = rel.join(&name);
        let full = root.join(&rel);
        let meta = fs::symlink_metadata(&full)?;
        b.append_path_with_name(&full, &rel)?;
        if meta.is_dir() {
            add_sorted(b, root, &rel)?;
        }
    }
    Ok(())
}

fn tar_unpack(archive: &Path, dir: &Path) -> io::Result<()> {
    let file = io::BufReader::with_capacity(1 << 20, File::open(archive)?);
    tar::Archive::new(file).unpack(dir)
}

fn sha256(file: &Path) -> io::Result<()> {
    let mut f = File::open(file)?;
    let mut buf = vec![0u8; 1 << 20];
    let mut h = Sha256::new();
    loop {
        let n = f.read(&mut buf)?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
    }
    let digest = h.finalize();
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    println!("{hex}  {}", file.display());
    Ok(())
}

/// Copies `file` to a new file `out` through one 1 MiB buffer: reading and
/// writing every byte once, with no hashing and no per-file work (less
/// than any packer or unpacker must do with the same bytes). Not
/// `io::copy`, which may let the kernel copy file to file without the
/// bytes ever reaching the process, as hashing needs them to.
fn copy(file: &Path, out: &Path) -> io::Result<()> {
    let mut from = File::open(file)?;
    let mut to = File::options().write(true).create_new(true).open(out)?;
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = from.read(&mut buf)?;
        if n == 0 {
            break;
        }
        to.write_all(&buf[..n])?;
    }
    Ok(())
}

/// Hashes as many bytes as `file` holds from one 1 MiB buffer filled with
/// its first MiB: the hashing alone, without the reads (what a thread that
/// only hashes blocks another thread read costs).
fn sha256_mem(file: &Path) -> io::Result<()> {
    let size = fs::metadata(file)?.len();
    let mut buf = vec![0u8; 1 << 20];
    let n = File::open(file)?.read(&mut buf)?;
    buf[n..].fill(0x5a);
    let mut h = Sha256::new();
    let mut left = size;
    while left > 0 {
        let take = left.min(buf.len() as u64) as usize;
        h.update(&buf[..take]);
        left -= take as u64;
    }
    let digest = h.finalize();
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    println!("{hex}  ({size} bytes from memory)");
    Ok(())
}
