//! Independent readers agree: GNU tar lists the packet, and Python's
//! tarfile with the 'data' filter extracts the same tree as unpack.

mod common;

use std::process::Command;

use common::*;

#[test]
fn gnu_tar_lists_every_member() {
    let t = tmp();
    let ws = t.path().join("ws");
    sample_workspace(&ws);
    write(
        &ws.join(format!("long/{}/{}.txt", "d".repeat(120), "f".repeat(120))),
        "long path\n",
    );
    let packet = t.path().join("p.tar");
    pack(&ws, &packet, &[]);
    let out = Command::new("tar")
        .arg("-tvf")
        .arg(&packet)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let listing = String::from_utf8(out.stdout).unwrap();
    let inspect = ok(&["inspect", s(&packet)]);
    let members = inspect["members"].as_array().unwrap();
    let lines: Vec<&str> = listing.lines().collect();
    assert_eq!(lines.len(), members.len() + 1, "{listing}");
    assert!(lines[0].ends_with(" packet.json"), "{listing}");
    for (line, m) in lines[1..].iter().zip(members) {
        let path = m["path"].as_str().unwrap();
        match m["type"].as_str().unwrap() {
            "dir" => assert!(
                line.starts_with("drwxr-xr-x 0/0") && line.ends_with(path),
                "{line}"
            ),
            "symlink" => assert!(
                line.starts_with('l')
                    && line.ends_with(&format!("{path} -> {}", m["target"].as_str().unwrap())),
                "{line}"
            ),
            _ => {
                let mode = if m["mode"] == "0755" {
                    "-rwxr-xr-x"
                } else {
                    "-rw-r--r--"
                };
                assert!(line.starts_with(mode) && line.ends_with(path), "{line}");
                assert!(line.contains(&format!(" {} ", m["size"])), "{line}");
            }
        }
    }
}

#[test]
fn python_tarfile_data_filter_extracts_the_same_tree_as_unpack() {
    let t = tmp();
    let ws = t.path().join("ws");
    sample_workspace(&ws);
    let packet = t.path().join("p.tar");
    let d = digest(&pack(&ws, &packet, &[]));
    let ours = t.path().join("ours");
    ok(&["unpack", s(&packet), "--digest", &d, "--into", s(&ours)]);
    let theirs = t.path().join("theirs");
    let script = "import sys, tarfile\nwith tarfile.open(sys.argv[1]) as t:\n    t.extractall(sys.argv[2], filter='data')\n";
    let out = Command::new("python3")
        .args(["-c", script, s(&packet), s(&theirs)])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::remove_file(theirs.join("packet.json")).unwrap();
    assert_eq!(snapshot(&theirs.join("workspace")), snapshot(&ours));
    assert_eq!(names(&theirs), ["workspace"]);
}

#[test]
fn gnu_tar_and_sha256sum_name_a_packet_as_pack_does() {
    // What docs/cli.md tells users: a packet's digest is the SHA-256 of its
    // packet.json, which any tar reader extracts.
    let t = tmp();
    let ws = t.path().join("ws");
    sample_workspace(&ws);
    let packet = t.path().join("p.tar");
    let d = digest(&pack(&ws, &packet, &[]));
    let out = Command::new("bash")
        .args([
            "-c",
            "set -o pipefail; tar -xOf \"$1\" packet.json | sha256sum",
            "bash",
            s(&packet),
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let printed = String::from_utf8(out.stdout).unwrap();
    let hex = printed.split_whitespace().next().unwrap();
    assert_eq!(format!("sha256:{hex}"), d, "{printed}");
    assert_eq!(ok(&["verify", s(&packet), "--digest", &d])["digest"], d);
}
