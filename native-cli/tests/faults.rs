//! Fault injection around `pillbox checkpoint unpack`: the disk fills up,
//! a write fails, the process is killed, the packet file is truncated or
//! changed while it is read, the target is read-only. After every fault the
//! target is as it was (absent, or an empty directory), nothing else
//! changed, and the only possible leftover is the documented one: a
//! `.pillbox-unpack-*` staging folder inside the target after a kill
//! (docs/cli.md, docs/hardening.md), whose presence says the unpack did not
//! complete.
//!
//! The tmpfs tests mount file systems and need root; they are skipped, with
//! a message, for other users. The others run anywhere.

mod common;

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::thread::sleep;
use std::time::{Duration, Instant};

use common::{checkpoint, digest, pack, s, snapshot, tmp, write};

const STAGING: &str = ".pillbox-unpack-";

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .map(|o| o.stdout == b"0\n")
        .unwrap_or(false)
}

/// A mounted tmpfs, unmounted on drop.
struct Mount(PathBuf);

impl Mount {
    fn tmpfs(dir: &Path, options: &str) -> Mount {
        fs::create_dir_all(dir).unwrap();
        let status = Command::new("mount")
            .args(["-t", "tmpfs", "-o", options, "tmpfs", s(dir)])
            .status()
            .unwrap();
        assert!(status.success(), "mount -t tmpfs -o {options} failed");
        Mount(dir.to_path_buf())
    }
}

impl Drop for Mount {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

/// A workspace of `big` bytes in one file plus 300 small files and a
/// symlink, packed; returns (workspace, packet, digest).
fn packet_with(dir: &Path, big: usize) -> (PathBuf, PathBuf, String) {
    let ws = dir.join("ws");
    write(&ws.join("big.bin"), vec![0u8; big]);
    for i in 0..300 {
        write(&ws.join(format!("many/f{i:03}.txt")), format!("file {i}\n"));
    }
    std::os::unix::fs::symlink("many/f000.txt", ws.join("link")).unwrap();
    let packet = dir.join("p.packet");
    let d = digest(&pack(&ws, &packet, &[]));
    (ws, packet, d)
}

fn entries(dir: &Path) -> Vec<String> {
    match fs::read_dir(dir) {
        Ok(rd) => {
            let mut v: Vec<String> = rd
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect();
            v.sort();
            v
        }
        Err(_) => vec![],
    }
}

fn unpack_cmd(packet: &Path, d: &str, target: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_pillbox"));
    c.args([
        "checkpoint",
        "unpack",
        s(packet),
        "--digest",
        d,
        "--into",
        s(target),
        "--quiet",
    ])
    .stdout(Stdio::piped())
    .stderr(Stdio::null());
    c
}

/// Waits until a staging folder appears in `target` (the read has started).
fn wait_for_staging(child: &mut Child, target: &Path) -> bool {
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(30) {
        if entries(target).iter().any(|e| e.starts_with(STAGING)) {
            return true;
        }
        if child.try_wait().unwrap().is_some() {
            return false;
        }
        sleep(Duration::from_micros(200));
    }
    false
}

fn error_json(out: &std::process::Output) -> serde_json::Value {
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|_| panic!("not JSON: {}", String::from_utf8_lossy(&out.stdout)))
}

#[test]
fn unpack_onto_a_full_disk_leaves_nothing() {
    if !is_root() {
        eprintln!("skipped: mounting a tmpfs needs root");
        return;
    }
    let t = tmp();
    let (_, packet, d) = packet_with(t.path(), 3 << 20);
    let mnt = Mount::tmpfs(&t.path().join("small"), "size=2m");
    for pre_existing in [false, true] {
        let target = mnt.0.join("target");
        if pre_existing {
            fs::create_dir(&target).unwrap();
        }
        let r = checkpoint(&["unpack", s(&packet), "--digest", &d, "--into", s(&target)]);
        let j = r.json();
        assert_eq!((r.code, j["code"].as_str()), (4, Some("io")), "{j}");
        assert!(
            j["message"].as_str().unwrap().contains("No space left"),
            "{j}"
        );
        if pre_existing {
            assert_eq!(entries(&target), Vec::<String>::new(), "target not empty");
            fs::remove_dir(&target).unwrap();
        }
        assert_eq!(
            entries(&mnt.0),
            Vec::<String>::new(),
            "litter on the full disk"
        );
    }
}

#[test]
fn a_write_error_while_unpacking_leaves_nothing() {
    // RLIMIT_FSIZE with SIGXFSZ ignored: writes past 256 KiB fail with
    // EFBIG, an injected writer error that needs no privileges.
    let t = tmp();
    let (_, packet, d) = packet_with(t.path(), 1 << 20);
    let root = t.path().join("root");
    fs::create_dir(&root).unwrap();
    let target = root.join("target");
    let out = Command::new("bash")
        .args(["-c", "trap '' XFSZ; ulimit -f 256; exec \"$@\"", "bash"])
        .arg(env!("CARGO_BIN_EXE_pillbox"))
        .args([
            "checkpoint",
            "unpack",
            s(&packet),
            "--digest",
            &d,
            "--into",
            s(&target),
            "--quiet",
        ])
        .output()
        .unwrap();
    let j = error_json(&out);
    assert_eq!(
        (out.status.code(), j["code"].as_str()),
        (Some(4), Some("io")),
        "{j}"
    );
    assert!(j["message"].as_str().unwrap().contains("too large"), "{j}");
    assert_eq!(entries(&root), Vec::<String>::new());
}

#[test]
fn a_read_only_target_is_left_untouched() {
    if !is_root() {
        eprintln!("skipped: mounting a read-only tmpfs needs root");
        return;
    }
    let t = tmp();
    let (_, packet, d) = packet_with(t.path(), 4096);
    let mnt = Mount::tmpfs(&t.path().join("ro"), "ro,size=1m");
    // The read-only directory itself as the (empty) target, and an absent
    // target below it.
    for target in [mnt.0.clone(), mnt.0.join("sub/target")] {
        let r = checkpoint(&["unpack", s(&packet), "--digest", &d, "--into", s(&target)]);
        let j = r.json();
        assert_eq!((r.code, j["code"].as_str()), (4, Some("io")), "{j}");
        assert!(j["message"].as_str().unwrap().contains("Read-only"), "{j}");
        assert_eq!(entries(&mnt.0), Vec::<String>::new());
    }
}

/// The state a killed unpack may leave: nothing (target absent or empty),
/// a staging folder (the documented clean-up applies), or the complete
/// workspace without staging.
#[derive(Debug, PartialEq, Eq)]
enum AfterKill {
    Nothing,
    Staging,
    Complete,
}

#[test]
fn a_killed_unpack_leaves_nothing_but_the_documented_staging_folder() {
    let t = tmp();
    let (ws, packet, d) = packet_with(t.path(), 64 << 20);
    let expected = snapshot(&ws);
    let mut seen = Vec::new();
    // Kill at once, early (after 1 and 15 ms) and at several delays after
    // the staging folder appeared, while members are written.
    let plan: &[(bool, u64)] = &[
        (false, 0),
        (false, 1),
        (false, 15),
        (true, 0),
        (true, 5),
        (true, 20),
        (true, 60),
        (true, 120),
    ];
    for (i, &(once_staging, ms)) in plan.iter().enumerate() {
        let target = t.path().join(format!("target{i}"));
        let mut child = unpack_cmd(&packet, &d, &target).spawn().unwrap();
        if once_staging {
            assert!(
                wait_for_staging(&mut child, &target),
                "the unpack never started writing"
            );
        }
        sleep(Duration::from_millis(ms));
        let _ = child.kill();
        let status = child.wait().unwrap();
        let names = entries(&target);
        let state = if names.is_empty() {
            AfterKill::Nothing
        } else if names.iter().any(|n| n.starts_with(STAGING)) {
            AfterKill::Staging
        } else {
            // The unpack finished, or was killed after its last rename
            // (while reporting): either way the workspace is whole.
            assert_eq!(
                snapshot(&target),
                expected,
                "a partial workspace without staging ({status}): {names:?}"
            );
            AfterKill::Complete
        };
        // The documented clean-up: a staging folder means the unpack did
        // not complete; empty the target (it was empty before).
        if state == AfterKill::Staging {
            for n in &names {
                let p = target.join(n);
                if fs::symlink_metadata(&p).unwrap().is_dir() {
                    fs::remove_dir_all(&p).unwrap();
                } else {
                    fs::remove_file(&p).unwrap();
                }
            }
        }
        if state != AfterKill::Complete {
            let r = checkpoint(&[
                "unpack",
                s(&packet),
                "--digest",
                &d,
                "--into",
                s(&target),
                "--quiet",
            ]);
            assert_eq!(r.code, 0, "unpack after the clean-up: {}", r.json());
            assert_eq!(snapshot(&target), expected);
        }
        seen.push(state);
    }
    eprintln!("states after kills: {seen:?}");
    assert!(
        seen.contains(&AfterKill::Staging),
        "no kill landed while members were written: {seen:?}"
    );
    // A kill before the staging folder exists (the unpack creates it within
    // a millisecond of starting) leaves nothing; how often one lands that
    // early depends on the machine, so it is reported, not required.
    if !seen.contains(&AfterKill::Nothing) {
        eprintln!("no kill landed before the staging folder was created");
    }
}

/// Starts an unpack, applies `change` to the packet file once its staging
/// folder exists (or right away), and checks the unpack is refused and
/// leaves nothing.
fn changed_while_reading(change: &dyn Fn(&Path), once_staging: bool) -> String {
    let t = tmp();
    let (_, packet, d) = packet_with(t.path(), 96 << 20);
    let target = t.path().join("target");
    let mut child = unpack_cmd(&packet, &d, &target).spawn().unwrap();
    if once_staging {
        assert!(
            wait_for_staging(&mut child, &target),
            "the unpack never started writing"
        );
    }
    change(&packet);
    let out = child.wait_with_output().unwrap();
    let j = error_json(&out);
    assert_eq!(out.status.code(), Some(3), "{j}");
    assert!(
        !target.exists(),
        "target left behind: {:?}",
        entries(&target)
    );
    j["code"].as_str().unwrap().to_owned()
}

fn truncate_to_half(p: &Path) {
    let f = fs::OpenOptions::new().write(true).open(p).unwrap();
    let len = f.metadata().unwrap().len();
    f.set_len(len / 2).unwrap();
}

fn overwrite_near_the_end(p: &Path) {
    use std::os::unix::fs::FileExt;
    let f = fs::OpenOptions::new().write(true).open(p).unwrap();
    let len = f.metadata().unwrap().len();
    // Inside big.bin's body, well past the headers.
    f.write_all_at(b"tampered", len / 3).unwrap();
    f.write_all_at(b"tampered", len - 8 * 1024).unwrap();
}

#[test]
fn a_packet_truncated_while_unpacking_is_refused() {
    for once_staging in [false, true] {
        let code = changed_while_reading(&truncate_to_half, once_staging);
        assert!(
            ["truncated", "packet_digest_mismatch"].contains(&code.as_str()),
            "{code}"
        );
    }
}

#[test]
fn a_packet_changed_while_unpacking_is_refused() {
    for once_staging in [false, true] {
        let code = changed_while_reading(&overwrite_near_the_end, once_staging);
        assert!(
            [
                "member_digest_mismatch",
                "packet_digest_mismatch",
                "padding_not_zero"
            ]
            .contains(&code.as_str()),
            "{code}"
        );
    }
}

#[test]
fn a_packet_truncated_before_verify_is_refused_at_every_block() {
    // verify reads the file as it is: every prefix is refused.
    let t = tmp();
    let ws = t.path().join("ws");
    write(&ws.join("a.txt"), "a\n");
    write(&ws.join("d/b.txt"), vec![7u8; 1500]);
    let packet = t.path().join("p.packet");
    pack(&ws, &packet, &[]);
    let bytes = fs::read(&packet).unwrap();
    let cut = t.path().join("cut.packet");
    for end in (0..bytes.len()).step_by(512).chain([bytes.len() - 1]) {
        fs::write(&cut, &bytes[..end]).unwrap();
        fs::set_permissions(&cut, fs::Permissions::from_mode(0o644)).unwrap();
        let r = checkpoint(&["verify", s(&cut), "--quiet"]);
        // Cut before its first byte, the file is no packet at all.
        let want = if end == 0 {
            (5, Some("not_a_packet"))
        } else {
            (3, Some("truncated"))
        };
        assert_eq!((r.code, r.json()["code"].as_str()), want, "cut at {end}");
    }
}
