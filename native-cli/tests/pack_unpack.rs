//! Pack, unpack, verify, inspect, cat and diff, driving the real binary on
//! real temporary directories.

mod common;

use std::fs::{self, File};
use std::os::unix::fs::{chown, symlink};
use std::time::{Duration, SystemTime};

use common::*;
use serde_json::Value;

#[test]
fn round_trip_reproduces_the_tree_exactly() {
    let t = tmp();
    let ws = t.path().join("ws");
    sample_workspace(&ws);
    let packet = t.path().join("p.tar");
    let report = pack(&ws, &packet, &[]);
    assert_eq!(report["schema"], "pillbox.checkpoint.pack/1");
    assert_eq!(
        report["size"].as_u64().unwrap(),
        fs::metadata(&packet).unwrap().len()
    );
    assert_eq!(report["output"], s(&fs::canonicalize(&packet).unwrap()));
    let d = digest(&report);
    let out = t.path().join("restored");
    let un = ok(&[
        "unpack",
        s(&packet),
        "--digest",
        &d,
        "--into",
        s(&out),
        "--quiet",
    ]);
    assert_eq!(un["schema"], "pillbox.checkpoint.unpack/1");
    assert_eq!(un["digest"], d.as_str());
    assert_eq!(un["digest_checked"], true);
    assert_eq!(un["workspace"], s(&fs::canonicalize(&out).unwrap()));
    assert_eq!(snapshot(&ws), snapshot(&out));
    // Exact modes: 0644 files, 0755 executables and directories.
    use std::os::unix::fs::PermissionsExt;
    let mode = |p: &str| {
        fs::symlink_metadata(out.join(p))
            .unwrap()
            .permissions()
            .mode()
            & 0o7777
    };
    assert_eq!(mode("README.md"), 0o644);
    assert_eq!(mode("bin/run.sh"), 0o755);
    assert_eq!(mode("empty-dir/nested-empty"), 0o755);
    assert!(fs::read_dir(out.join("empty-dir/nested-empty"))
        .unwrap()
        .next()
        .is_none());
}

#[test]
fn same_tree_same_bytes_whatever_mtimes_modes_owners_and_creation_order() {
    let t = tmp();
    let a = t.path().join("a");
    sample_workspace(&a);
    // The same tree built in reverse order, with other mtimes, other
    // group/other permission bits (as another umask gives), another owner.
    let b = t.path().join("b");
    let files: Vec<(String, Node)> = snapshot(&a).into_iter().rev().collect();
    fs::create_dir(&b).unwrap();
    for (rel, node) in &files {
        let p = b.join(rel);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        match node {
            Node::Dir => fs::create_dir_all(&p).unwrap(),
            Node::File {
                executable,
                contents,
            } => {
                fs::write(&p, contents).unwrap();
                chmod(&p, if *executable { 0o700 } else { 0o600 });
            }
            Node::Symlink(target) => symlink(target, &p).unwrap(),
            Node::Other => unreachable!(),
        }
    }
    let old = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000_000);
    for (rel, node) in &files {
        let p = b.join(rel);
        if !matches!(node, Node::Symlink(_)) {
            File::open(&p).unwrap().set_modified(old).unwrap();
        }
        std::os::unix::fs::lchown(&p, Some(1234), Some(5678)).unwrap();
    }
    chown(&b, Some(4321), Some(8765)).unwrap();
    assert_eq!(
        fs::metadata(b.join("README.md"))
            .unwrap()
            .modified()
            .unwrap(),
        old
    );
    let pa = t.path().join("a.tar");
    let pb = t.path().join("b.tar");
    let ra = pack(&a, &pa, &[]);
    let rb = run(pillbox().args(["checkpoint", "pack", s(&b), "-o", s(&pb), "--quiet"]));
    assert_eq!(rb.code, 0);
    // Packing under a restrictive umask changes nothing either.
    let r_umask = run(assert_cmd::Command::new("sh").args([
        "-c",
        &format!(
            "umask 077 && exec {} checkpoint pack {} -o {} --quiet",
            env!("CARGO_BIN_EXE_pillbox"),
            s(&b),
            s(&t.path().join("c.tar"))
        ),
    ]));
    assert_eq!(r_umask.code, 0);
    assert_eq!(digest(&ra), digest(&rb.json()));
    assert_eq!(digest(&ra), digest(&r_umask.json()));
    assert_eq!(fs::read(&pa).unwrap(), fs::read(&pb).unwrap());
    assert_eq!(
        fs::read(&pa).unwrap(),
        fs::read(t.path().join("c.tar")).unwrap()
    );
    // And packing again after touching every file gives the same digest.
    for (rel, _) in snapshot(&a) {
        let p = a.join(&rel);
        if fs::symlink_metadata(&p).unwrap().is_file() {
            File::options()
                .write(true)
                .open(&p)
                .unwrap()
                .set_modified(SystemTime::now())
                .unwrap();
        }
    }
    assert_eq!(
        digest(&pack(&a, &t.path().join("a2.tar"), &[])),
        digest(&ra)
    );
}

#[test]
fn pack_to_stdout_keeps_stdout_clean_and_reports_on_stderr() {
    let t = tmp();
    let ws = t.path().join("ws");
    sample_workspace(&ws);
    let r = checkpoint(&["pack", s(&ws), "-o", "-", "--quiet"]);
    assert_eq!(r.code, 0);
    let report = r.stderr_json();
    assert_eq!(report["output"], "-");
    assert_eq!(report["size"].as_u64().unwrap(), r.stdout.len() as u64);
    let file = t.path().join("p.tar");
    let from_file = pack(&ws, &file, &[]);
    assert_eq!(fs::read(&file).unwrap(), r.stdout);
    assert_eq!(from_file["digest"], report["digest"]);
    // --report sends the JSON to a file.
    let rep = t.path().join("report.json");
    let r = checkpoint(&["pack", s(&ws), "-o", "-", "--quiet", "--report", s(&rep)]);
    assert_eq!(r.code, 0);
    assert!(r.stderr.is_empty());
    let j: Value = serde_json::from_slice(&fs::read(&rep).unwrap()).unwrap();
    assert_eq!(j["digest"], report["digest"]);
}

#[test]
fn unpack_from_stdin_and_verify_from_stdin() {
    let t = tmp();
    let ws = t.path().join("ws");
    sample_workspace(&ws);
    let packet = t.path().join("p.tar");
    let d = digest(&pack(&ws, &packet, &[]));
    let out = t.path().join("out");
    let r = run(pillbox()
        .args([
            "checkpoint",
            "unpack",
            "-",
            "--digest",
            &d,
            "--into",
            s(&out),
            "--quiet",
        ])
        .pipe_stdin(&packet)
        .unwrap());
    assert_eq!(r.code, 0, "{}", String::from_utf8_lossy(&r.stdout));
    assert_eq!(snapshot(&ws), snapshot(&out));
    let r = run(pillbox()
        .args(["checkpoint", "verify", "-", "--digest", &d])
        .pipe_stdin(&packet)
        .unwrap());
    assert_eq!(r.json()["ok"], true);
}

#[test]
fn unpack_needs_a_digest_or_an_explicit_choice() {
    let t = tmp();
    let ws = t.path().join("ws");
    sample_workspace(&ws);
    let packet = t.path().join("p.tar");
    pack(&ws, &packet, &[]);
    let out = t.path().join("out");
    fails(&["unpack", s(&packet), "--into", s(&out)], 2, "usage");
    assert!(!out.exists());
    let j = ok(&[
        "unpack",
        s(&packet),
        "--trust-unverified",
        "--into",
        s(&out),
    ]);
    assert_eq!(j["digest_checked"], false);
    assert_eq!(snapshot(&ws), snapshot(&out));
}

#[test]
fn a_wrong_digest_writes_nothing() {
    let t = tmp();
    let ws = t.path().join("ws");
    sample_workspace(&ws);
    let packet = t.path().join("p.tar");
    pack(&ws, &packet, &[]);
    let out = t.path().join("out");
    let wrong = format!("sha256:{}", "0".repeat(64));
    fails(
        &["unpack", s(&packet), "--digest", &wrong, "--into", s(&out)],
        3,
        "packet_digest_mismatch",
    );
    assert!(!out.exists());
    fails(
        &[
            "unpack",
            s(&packet),
            "--digest",
            "sha256:XYZ",
            "--into",
            s(&out),
        ],
        2,
        "usage",
    );
}

#[test]
fn a_tampered_member_is_named_and_nothing_is_left() {
    let t = tmp();
    let ws = t.path().join("ws");
    write(&ws.join("notes/plan.txt"), "the original plan\n");
    write(&ws.join("other.txt"), "other\n");
    let packet = t.path().join("p.tar");
    pack(&ws, &packet, &[]);
    let original = fs::read(&packet).unwrap();
    let mut bytes = original.clone();
    let at = bytes.windows(8).position(|w| w == b"original").unwrap();
    bytes[at] = b'O';
    fs::write(&packet, &bytes).unwrap();
    let out = t.path().join("out");
    fs::create_dir(&out).unwrap();
    let j = fails(
        &[
            "unpack",
            s(&packet),
            "--trust-unverified",
            "--into",
            s(&out),
        ],
        3,
        "member_digest_mismatch",
    );
    assert_eq!(j["path"], "workspace/notes/plan.txt");
    assert!(j["offset"].as_u64().is_some());
    assert_eq!(
        names(&out),
        Vec::<String>::new(),
        "an empty target stays empty"
    );
    let j = fails(&["verify", s(&packet)], 3, "member_digest_mismatch");
    assert_eq!(j["path"], "workspace/notes/plan.txt");
    // A truncated packet too.
    fs::write(&packet, &original[..original.len() - 1024]).unwrap();
    fails(
        &[
            "unpack",
            s(&packet),
            "--trust-unverified",
            "--into",
            s(&out),
        ],
        3,
        "truncated",
    );
    assert_eq!(names(&out), Vec::<String>::new());
}

#[test]
fn a_non_empty_target_is_refused_and_left_as_it_was() {
    let t = tmp();
    let ws = t.path().join("ws");
    sample_workspace(&ws);
    let packet = t.path().join("p.tar");
    let d = digest(&pack(&ws, &packet, &[]));
    let out = t.path().join("out");
    write(&out.join("keep.txt"), "mine\n");
    let before = snapshot(&out);
    let j = fails(
        &["unpack", s(&packet), "--digest", &d, "--into", s(&out)],
        5,
        "target_not_empty",
    );
    assert_eq!(j["path"], s(&out));
    assert_eq!(snapshot(&out), before);
    let file = t.path().join("file");
    write(&file, "x");
    fails(
        &["unpack", s(&packet), "--digest", &d, "--into", s(&file)],
        5,
        "target_not_directory",
    );
}

#[test]
fn verify_inspect_cat_report_the_packet() {
    let t = tmp();
    let ws = t.path().join("ws");
    sample_workspace(&ws);
    let packet = t.path().join("p.tar");
    let d = digest(&pack(&ws, &packet, &[]));
    let v = ok(&["verify", s(&packet), "--digest", &d]);
    assert_eq!(v["schema"], "pillbox.checkpoint.verify/1");
    assert_eq!(v["digest_checked"], true);
    assert_eq!(v["totals"]["files"], 7);
    assert_eq!(v["totals"]["symlinks"], 2);
    let i = ok(&["inspect", s(&packet)]);
    assert_eq!(i["schema"], "pillbox.checkpoint.inspect/1");
    assert_eq!(i["format"], "pillbox.session-packet/2");
    let members = i["members"].as_array().unwrap();
    assert_eq!(members[0]["path"], "workspace");
    let run = members
        .iter()
        .find(|m| m["path"] == "workspace/bin/run.sh")
        .unwrap();
    assert_eq!(run["mode"], "0755");
    let link = members
        .iter()
        .find(|m| m["path"] == "workspace/main-link")
        .unwrap();
    assert_eq!(link["target"], "src/main.rs");
    let text = checkpoint(&["ls", s(&packet), "--format", "text"]);
    assert_eq!(text.code, 0);
    let text = String::from_utf8(text.stdout).unwrap();
    assert!(text.contains("-rwxr-xr-x 0/0"), "{text}");
    assert!(
        text.contains("workspace/main-link -> src/main.rs"),
        "{text}"
    );
    assert!(text.contains("workspace/empty-dir/"), "{text}");

    let c = checkpoint(&["cat", s(&packet), "workspace/data.bin", "--digest", &d]);
    assert_eq!(c.code, 0);
    assert_eq!(c.stdout, fs::read(ws.join("data.bin")).unwrap());
    let cj = c.stderr_json();
    assert_eq!(cj["schema"], "pillbox.checkpoint.cat/1");
    assert_eq!(cj["size"], 300_000);
    let c = checkpoint(&["cat", s(&packet), "workspace/nope"]);
    assert_eq!(c.code, 5);
    assert!(c.stdout.is_empty());
    assert_eq!(c.stderr_json()["code"], "member_not_found");
    let c = checkpoint(&["cat", s(&packet), "workspace/src"]);
    assert_eq!(c.stderr_json()["code"], "not_a_file");
}

#[test]
fn diff_lists_added_removed_and_changed_members() {
    let t = tmp();
    let ws = t.path().join("ws");
    sample_workspace(&ws);
    let a = t.path().join("a.tar");
    pack(&ws, &a, &[]);
    fs::remove_file(ws.join("README.md")).unwrap();
    write(&ws.join("NEW.md"), "new\n");
    write(&ws.join("src/main.rs"), "fn main() { changed() }\n");
    chmod(&ws.join("bin/run.sh"), 0o644);
    let b = t.path().join("b.tar");
    pack(&ws, &b, &[]);
    let d = ok(&["diff", s(&a), s(&b)]);
    assert_eq!(d["schema"], "pillbox.checkpoint.diff/1");
    assert_eq!(d["identical"], false);
    let paths = |k: &str| {
        d[k].as_array()
            .unwrap()
            .iter()
            .map(|e| e["path"].as_str().unwrap().to_owned())
            .collect::<Vec<_>>()
    };
    assert_eq!(paths("added"), ["workspace/NEW.md"]);
    assert_eq!(paths("removed"), ["workspace/README.md"]);
    assert_eq!(
        paths("changed"),
        ["workspace/bin/run.sh", "workspace/src/main.rs"]
    );
    assert_eq!(d["changed"][0]["fields"], serde_json::json!(["mode"]));
    assert_eq!(
        d["changed"][1]["fields"],
        serde_json::json!(["size", "sha256"])
    );
    let same = ok(&["diff", s(&a), s(&a)]);
    assert_eq!(same["identical"], true);
    let text = checkpoint(&["diff", s(&a), s(&b), "--format", "text"]);
    let text = String::from_utf8(text.stdout).unwrap();
    assert!(text.contains("A workspace/NEW.md"), "{text}");
    assert!(text.contains("D workspace/README.md"), "{text}");
    assert!(
        text.contains("M workspace/bin/run.sh (mode 0755 -> 0644)"),
        "{text}"
    );
}

#[test]
fn errors_are_one_json_object_with_distinct_exit_codes() {
    let t = tmp();
    let missing = t.path().join("missing.tar");
    let j = fails(&["verify", s(&missing)], 4, "io");
    assert_eq!(j["path"], s(&missing));
    let junk = t.path().join("junk.tar");
    write(&junk, vec![7u8; 2048]);
    fails(&["verify", s(&junk)], 3, "header_magic");
    fails(&["verify"], 2, "usage");
    fails(
        &[
            "pack",
            s(&t.path().join("nope")),
            "-o",
            s(&t.path().join("x.tar")),
        ],
        4,
        "io",
    );
    let help = checkpoint(&["--help"]);
    assert_eq!(help.code, 0);
    assert!(String::from_utf8_lossy(&help.stdout).contains("unpack"));
}

#[test]
fn hardlinks_are_packed_as_regular_files() {
    let t = tmp();
    let ws = t.path().join("ws");
    write(&ws.join("a.txt"), "shared\n");
    fs::hard_link(ws.join("a.txt"), ws.join("b.txt")).unwrap();
    let packet = t.path().join("p.tar");
    pack(&ws, &packet, &[]);
    let i = ok(&["inspect", s(&packet)]);
    let kinds: Vec<&str> = i["members"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["type"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["dir", "file", "file"]);
}

#[test]
fn a_failed_pack_leaves_no_output_behind() {
    let t = tmp();
    let ws = t.path().join("ws");
    write(&ws.join("a"), "x");
    symlink("/etc/passwd", ws.join("abs-link")).unwrap();
    let out = t.path().join("out");
    fs::create_dir(&out).unwrap();
    fails(
        &["pack", s(&ws), "-o", s(&out.join("p.tar"))],
        5,
        "symlink_absolute",
    );
    assert_eq!(names(&out), Vec::<String>::new());
}

/// Peak resident memory (KiB) of one run of the binary, measured by the
/// operating system (getrusage of the children of a Python process).
fn peak_rss_kib(args: &[&str]) -> u64 {
    let script = "import resource, subprocess, sys\n\
subprocess.run(sys.argv[1:], check=True, stdout=subprocess.DEVNULL)\n\
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n";
    let mut cmd = assert_cmd::Command::new("python3");
    cmd.args(["-c", script, env!("CARGO_BIN_EXE_pillbox"), "checkpoint"])
        .args(args);
    let r = run(&mut cmd);
    assert_eq!(r.code, 0, "{}", String::from_utf8_lossy(&r.stderr));
    String::from_utf8(r.stdout).unwrap().trim().parse().unwrap()
}

#[test]
fn memory_stays_bounded_whatever_the_file_size() {
    let t = tmp();
    let ws = t.path().join("ws");
    fs::create_dir(&ws).unwrap();
    // 48 MiB (sparse: cheap on disk, still read and hashed byte by byte).
    File::create(ws.join("big.bin"))
        .unwrap()
        .set_len(48 << 20)
        .unwrap();
    let packet = t.path().join("p.tar");
    let pack_kib = peak_rss_kib(&["pack", s(&ws), "-o", s(&packet), "--quiet"]);
    assert!(
        pack_kib < 32 << 10,
        "pack peaked at {pack_kib} KiB for a 48 MiB file"
    );
    let out = t.path().join("out");
    let unpack_kib = peak_rss_kib(&[
        "unpack",
        s(&packet),
        "--trust-unverified",
        "--into",
        s(&out),
        "--quiet",
    ]);
    assert!(
        unpack_kib < 32 << 10,
        "unpack peaked at {unpack_kib} KiB for a 48 MiB file"
    );
    assert_eq!(fs::metadata(out.join("big.bin")).unwrap().len(), 48 << 20);
}

/// Packing into a file lays the packet out in advance and writes small
/// bodies out of order; to standard output it streams. Both must give the
/// same bytes, whatever the sizes, path lengths and member kinds.
#[test]
fn a_file_and_standard_output_get_the_same_bytes() {
    let t = tmp();
    let ws = t.path().join("ws");
    fs::create_dir_all(&ws).unwrap();
    let sizes = [
        0usize,
        1,
        511,
        512,
        513,
        (256 << 10) - 1,
        256 << 10,
        (256 << 10) + 1,
        (3 << 20) + 7,
    ];
    for (i, size) in sizes.iter().enumerate() {
        let body: Vec<u8> = (0..*size).map(|b| (b * 31 + i) as u8).collect();
        fs::write(ws.join(format!("f{i}.bin")), body).unwrap();
    }
    // Enough small files for several runs of headers and bodies.
    for d in 0..8 {
        let dir = ws.join(format!("many/d{d}"));
        fs::create_dir_all(&dir).unwrap();
        for f in 0..150 {
            fs::write(
                dir.join(format!("{f}.txt")),
                vec![b'a' + (f % 26) as u8; f * 37],
            )
            .unwrap();
        }
    }
    // A path past ustar's 100-byte name (split into prefix), and one past
    // 255 bytes (a PAX record).
    let split = ws.join("a".repeat(60)).join("b".repeat(60));
    fs::create_dir_all(&split).unwrap();
    fs::write(split.join("c.txt"), b"split").unwrap();
    let long = ws.join("x".repeat(200)).join("y".repeat(200));
    fs::create_dir_all(&long).unwrap();
    fs::write(long.join("z.bin"), vec![9u8; 300 << 10]).unwrap();
    symlink("f1.bin", ws.join("link")).unwrap();
    fs::create_dir_all(ws.join("empty")).unwrap();

    let file = t.path().join("p.tar");
    let from_file = pack(&ws, &file, &[]);
    let r = checkpoint(&["pack", s(&ws), "-o", "-", "--quiet"]);
    assert_eq!(r.code, 0);
    assert_eq!(fs::read(&file).unwrap(), r.stdout);
    // packet.json (the first member; its size in octal at byte 124) is
    // longer than one of the 128 KiB blocks it is written in.
    let json_len =
        u64::from_str_radix(std::str::from_utf8(&r.stdout[124..135]).unwrap(), 8).unwrap();
    assert!(json_len > 128 << 10, "packet.json is {json_len} bytes");
    assert_eq!(from_file["digest"], r.stderr_json()["digest"]);
    let d = digest(&from_file);
    let out = t.path().join("out");
    ok(&[
        "unpack",
        s(&file),
        "--digest",
        &d,
        "--into",
        s(&out),
        "--quiet",
    ]);
    assert_eq!(snapshot(&ws), snapshot(&out));
}

/// A `pillbox.session-packet/1` packet, as packet-core built packets
/// before /2, written to `dir/v1.packet`: a file of several read blocks, an
/// executable, a symlink, an empty folder. Returns its path, its name (the
/// SHA-256 of the whole file) and its manifest's SHA-256.
fn v1_packet(dir: &std::path::Path) -> (std::path::PathBuf, String, String) {
    use packet_core::in_memory::{build_as, Source};
    use packet_core::{Digest, Format, Limits};
    let file = |path: &str, contents: Vec<u8>, executable| Source::File {
        path: path.into(),
        contents,
        executable,
    };
    let sources = vec![
        Source::Dir {
            path: "workspace".into(),
        },
        file("workspace/a.txt", b"one\n".to_vec(), false),
        file(
            "workspace/big.bin",
            (0..(3 << 20) + 5).map(|i: u32| (i * 7) as u8).collect(),
            false,
        ),
        file("workspace/run.sh", b"#!/bin/sh\n".to_vec(), true),
        Source::Symlink {
            path: "workspace/link".into(),
            target: "a.txt".into(),
        },
        Source::Dir {
            path: "workspace/many".into(),
        },
    ];
    let built = build_as(Format::V1, &sources, None, vec![], &Limits::FORMAT).unwrap();
    let whole = Digest::of(&built.bytes);
    assert_eq!(built.digest, whole);
    let path = dir.join("v1.packet");
    fs::write(&path, &built.bytes).unwrap();
    (
        path,
        whole.to_string(),
        built.manifest.json_digest().to_string(),
    )
}

#[test]
fn a_version_1_packet_is_read_by_its_whole_file_digest() {
    let t = tmp();
    let (packet, whole, manifest) = v1_packet(t.path());
    let v = ok(&["verify", s(&packet), "--digest", &whole]);
    assert_eq!(v["format"], "pillbox.session-packet/1");
    assert_eq!(v["digest"], whole.as_str());
    assert_eq!(v["digest_checked"], true);
    assert_eq!(ok(&["verify", s(&packet)])["digest"], whole.as_str());
    // Standard input is spooled, then read the same way.
    let r = run(pillbox()
        .args(["checkpoint", "verify", "-", "--digest", &whole])
        .write_stdin(fs::read(&packet).unwrap()));
    assert_eq!(r.code, 0);
    assert_eq!(r.json()["digest"], whole.as_str());
    let i = ok(&["inspect", s(&packet), "--digest", &whole]);
    assert_eq!(i["format"], "pillbox.session-packet/1");
    assert_eq!(i["digest"], whole.as_str());
    assert_eq!(i["totals"]["files"], 3);
    let c = checkpoint(&["cat", s(&packet), "workspace/a.txt", "--digest", &whole]);
    assert_eq!(c.code, 0);
    assert_eq!(c.stdout, b"one\n");
    assert_eq!(c.stderr_json()["packet_digest"], whole.as_str());
    assert_eq!(c.stderr_json()["format"], "pillbox.session-packet/1");
    let out = t.path().join("out");
    let u = ok(&["unpack", s(&packet), "--digest", &whole, "--into", s(&out)]);
    assert_eq!(u["format"], "pillbox.session-packet/1");
    assert_eq!(u["digest"], whole.as_str());
    let tree = snapshot(&out);
    assert_eq!(tree.len(), 5);
    assert_eq!(
        tree["run.sh"],
        Node::File {
            executable: true,
            contents: b"#!/bin/sh\n".to_vec()
        }
    );
    assert_eq!(tree["link"], Node::Symlink("a.txt".into()));
    assert!(
        matches!(&tree["big.bin"], Node::File { contents, .. } if contents.len() == (3 << 20) + 5)
    );

    // Its manifest's digest does not name it: that is /2's rule.
    let j = fails(
        &["verify", s(&packet), "--digest", &manifest],
        3,
        "packet_digest_mismatch",
    );
    assert!(j["message"].as_str().unwrap().contains(&whole), "{j}");
    fails(
        &["inspect", s(&packet), "--digest", &manifest],
        3,
        "packet_digest_mismatch",
    );
    let c = checkpoint(&["cat", s(&packet), "workspace/a.txt", "--digest", &manifest]);
    assert_eq!(c.code, 3);
    assert!(c.stdout.is_empty());
    assert_eq!(c.stderr_json()["code"], "packet_digest_mismatch");
    let refused = t.path().join("refused");
    fails(
        &[
            "unpack",
            s(&packet),
            "--digest",
            &manifest,
            "--into",
            s(&refused),
        ],
        3,
        "packet_digest_mismatch",
    );
    assert!(!refused.exists());
}

#[test]
fn a_version_2_packet_is_refused_by_its_whole_file_digest() {
    let t = tmp();
    let ws = t.path().join("ws");
    sample_workspace(&ws);
    let packet = t.path().join("p.tar");
    let d = digest(&pack(&ws, &packet, &[]));
    let whole = packet_core::Digest::of(&fs::read(&packet).unwrap()).to_string();
    assert_ne!(d, whole);
    let v = ok(&["verify", s(&packet), "--digest", &d]);
    assert_eq!(v["format"], "pillbox.session-packet/2");
    // Refused at packet.json, before any other member is read.
    for command in ["verify", "inspect"] {
        let j = fails(
            &[command, s(&packet), "--digest", &whole],
            3,
            "packet_digest_mismatch",
        );
        assert_eq!(j["path"], "packet.json", "{command}: {j}");
        assert_eq!(j["offset"], 512, "{command}: {j}");
    }
    let c = checkpoint(&["cat", s(&packet), "workspace/README.md", "--digest", &whole]);
    assert_eq!(c.code, 3);
    assert!(c.stdout.is_empty());
    assert_eq!(c.stderr_json()["code"], "packet_digest_mismatch");
    let out = t.path().join("out");
    let j = fails(
        &["unpack", s(&packet), "--digest", &whole, "--into", s(&out)],
        3,
        "packet_digest_mismatch",
    );
    assert_eq!(j["offset"], 512);
    assert!(!out.exists());
}
