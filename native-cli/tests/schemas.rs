//! Every command's JSON output matches its schema in proto/cli/, on
//! success and on failure.

mod common;

use std::fs;

use common::*;

#[test]
fn every_output_matches_its_schema() {
    let t = tmp();
    let ws = t.path().join("ws");
    sample_workspace(&ws);
    write(&ws.join(".netrc"), "machine x\n");
    let home = t.path().join("codex");
    codex_home(&home, THREAD, &ws, "gpt-test");
    let packet = t.path().join("p.tar");
    let p = pack(
        &ws,
        &packet,
        &[
            "--harness",
            "codex",
            "--thread",
            THREAD,
            "--codex-home",
            s(&home),
        ],
    );
    assert_schema("pack-1.schema.json", &p);
    let d = digest(&p);
    let v = ok(&["verify", s(&packet), "--digest", &d]);
    assert_schema("verify-1.schema.json", &v);
    assert_schema("inspect-1.schema.json", &ok(&["inspect", s(&packet)]));
    let new_home = t.path().join("codex2");
    let u = ok(&[
        "unpack",
        s(&packet),
        "--digest",
        &d,
        "--into",
        s(&t.path().join("out")),
        "--codex-home",
        s(&new_home),
    ]);
    assert_schema("unpack-1.schema.json", &u);
    let cp = t.path().join("cp.json");
    fs::write(&cp, u.to_string()).unwrap();
    assert_schema(
        "restore-check-1.schema.json",
        &ok(&["restore-check", "--checkpoint", s(&cp)]),
    );
    let c = checkpoint(&["cat", s(&packet), "workspace/README.md"]);
    assert_schema("cat-1.schema.json", &c.stderr_json());
    write(&ws.join("README.md"), "changed\n");
    let b = t.path().join("b.tar");
    pack(&ws, &b, &[]);
    assert_schema("diff-1.schema.json", &ok(&["diff", s(&packet), s(&b)]));

    assert_schema(
        "error-1.schema.json",
        &fails(&["verify", s(&t.path().join("none"))], 4, "io"),
    );
    assert_schema(
        "error-1.schema.json",
        &fails(
            &[
                "verify",
                s(&packet),
                "--digest",
                &format!("sha256:{}", "1".repeat(64)),
            ],
            3,
            "packet_digest_mismatch",
        ),
    );
    assert_schema(
        "error-1.schema.json",
        &fails(&["unpack", s(&packet)], 2, "usage"),
    );
    let c = checkpoint(&["cat", s(&packet), "workspace/none"]);
    assert!(c.stdout.is_empty());
    assert_schema("error-1.schema.json", &c.stderr_json());
}

#[test]
fn opencode_outputs_match_their_schemas() {
    let t = tmp();
    let bin = fake_opencode(t.path());
    let a = opencode_box(t.path(), "a");
    write(
        &a.data.join("sessions").join(format!("{OC_SESSION}.json")),
        export_json(&["msg_1"]),
    );
    let ws = t.path().join("ws");
    write(&ws.join("a.txt"), "a\n");
    let packet = t.path().join("p.tar");
    let r = oc(
        &[
            "pack",
            s(&ws),
            "-o",
            s(&packet),
            "--harness",
            "opencode",
            "--session",
            OC_SESSION,
            "--opencode-bin",
            s(&bin),
        ],
        &a,
    );
    assert_eq!(r.code, 0, "{}", String::from_utf8_lossy(&r.stdout));
    let p = r.json();
    assert_schema("pack-1.schema.json", &p);
    assert_schema("inspect-1.schema.json", &ok(&["inspect", s(&packet)]));
    let b = opencode_box(t.path(), "b");
    let u = oc(
        &[
            "unpack",
            s(&packet),
            "--digest",
            &digest(&p),
            "--into",
            s(&t.path().join("out")),
            "--opencode-import",
            "--opencode-bin",
            s(&bin),
        ],
        &b,
    );
    assert_eq!(u.code, 0, "{}", String::from_utf8_lossy(&u.stdout));
    assert_schema("unpack-1.schema.json", &u.json());
    let cp = t.path().join("cp.json");
    fs::write(&cp, u.json().to_string()).unwrap();
    let c = oc(
        &[
            "restore-check",
            "--checkpoint",
            s(&cp),
            "--opencode-bin",
            s(&bin),
        ],
        &b,
    );
    assert_eq!(c.code, 0, "{}", String::from_utf8_lossy(&c.stdout));
    assert_schema("restore-check-1.schema.json", &c.json());
    let e = oc(
        &[
            "restore-check",
            "--harness",
            "opencode",
            "--thread",
            "ses_absent",
            "--opencode-bin",
            s(&bin),
        ],
        &b,
    );
    assert_schema("error-1.schema.json", &e.json());
}

#[test]
fn the_schema_check_itself_catches_a_wrong_shape() {
    let bad = serde_json::json!({"schema": "pillbox.checkpoint.verify/1", "ok": true});
    let caught = std::panic::catch_unwind(|| assert_schema("verify-1.schema.json", &bad));
    assert!(caught.is_err());
}
