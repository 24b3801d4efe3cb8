//! The JavaScript-facing bindings, run under node by wasm-bindgen-test:
//! what the page receives for good, tampered and truncated packets.
#![cfg(target_arch = "wasm32")]

use js_sys::Reflect;
use packet_core::in_memory::{build, Built, Source};
use packet_core::Limits;
use packet_inspector_wasm::{classify, compare_packets, line_diff, Packet, PacketHasher, Verifier};
use wasm_bindgen::JsValue;
use wasm_bindgen_test::wasm_bindgen_test;

fn get(v: &JsValue, key: &str) -> JsValue {
    Reflect::get(v, &JsValue::from_str(key)).expect("an object")
}

fn string(v: &JsValue, key: &str) -> String {
    get(v, key)
        .as_string()
        .unwrap_or_else(|| panic!("{key} is not a string"))
}

fn number(v: &JsValue, key: &str) -> f64 {
    get(v, key)
        .as_f64()
        .unwrap_or_else(|| panic!("{key} is not a number"))
}

fn packet(main: &str, extra: Option<&str>) -> Built {
    let mut sources = vec![
        Source::Dir {
            path: "workspace".into(),
        },
        Source::File {
            path: "workspace/main.rs".into(),
            contents: main.as_bytes().to_vec(),
            executable: false,
        },
        Source::Symlink {
            path: "workspace/link".into(),
            target: "main.rs".into(),
        },
    ];
    if let Some(path) = extra {
        sources.push(Source::File {
            path: path.into(),
            contents: b"x".to_vec(),
            executable: true,
        });
    }
    build(&sources, None, vec![], &Limits::FORMAT).unwrap()
}

/// Pushes `bytes` in chunks of `size`, as the page does with a File.
fn push_all(verifier: &mut Verifier, bytes: &[u8], size: usize) -> Result<JsValue, JsValue> {
    let mut last = JsValue::NULL;
    for chunk in bytes.chunks(size) {
        last = verifier.push(chunk)?;
    }
    Ok(last)
}

fn open(built: &Built, chunk: usize) -> Packet {
    let mut v = Verifier::new(Some(built.digest.to_string())).unwrap();
    let progress = push_all(&mut v, &built.bytes, chunk).unwrap();
    assert_eq!(number(&progress, "offset"), built.bytes.len() as f64);
    assert!(get(&progress, "manifest").as_bool().unwrap());
    assert_eq!(
        number(&progress, "membersVerified"),
        number(&progress, "membersTotal")
    );
    v.finish().unwrap()
}

#[wasm_bindgen_test]
fn a_good_packet_verifies_in_any_chunking_and_reports_its_members() {
    let built = packet("fn main() {}\n", None);
    for chunk in [1, 7, 512, 513, 1 << 20] {
        let p = open(&built, chunk);
        let report = p.report();
        assert_eq!(string(&report, "digest"), built.digest.to_string());
        assert_eq!(number(&report, "size"), built.bytes.len() as f64);
        let members = js_sys::Array::from(&get(&report, "members"));
        assert_eq!(members.length(), 3);
        let main = members.get(p.index_of("workspace/main.rs").unwrap() as u32);
        assert_eq!(string(&main, "path"), "workspace/main.rs");
        assert_eq!(string(&main, "type"), "file");
        assert_eq!(string(&main, "mode"), "0644");
        assert_eq!(number(&main, "size"), 13.0);
        // The data offset points at the body inside the packet bytes.
        let at = number(&main, "dataOffset") as usize;
        assert_eq!(&built.bytes[at..at + 13], b"fn main() {}\n");
        let link = members.get(p.index_of("workspace/link").unwrap() as u32);
        assert_eq!(string(&link, "type"), "symlink");
        assert_eq!(string(&link, "target"), "main.rs");
    }
}

#[wasm_bindgen_test]
fn the_report_carries_what_the_reader_found() {
    let dir = |path: &str| Source::Dir { path: path.into() };
    let built = build(
        &[
            dir("workspace"),
            dir("workspace/.git"),
            dir("workspace/.git/hooks"),
            Source::File {
                path: "workspace/.git/hooks/pre-push".into(),
                contents: b"#!/bin/sh\n".to_vec(),
                executable: true,
            },
        ],
        None,
        vec![],
        &Limits::FORMAT,
    )
    .unwrap();
    let report = open(&built, 100).report();
    let findings = get(&report, "findings");
    let git = js_sys::Array::from(&get(&findings, "git"));
    assert_eq!(git.length(), 1);
    let hook = git.get(0);
    assert_eq!(string(&hook, "path"), "workspace/.git/hooks/pre-push");
    assert_eq!(string(&hook, "setting"), "hook");
    assert!(get(&hook, "line").is_null());
    assert_eq!(js_sys::Array::from(&get(&findings, "secrets")).length(), 0);
    // A packet with nothing to report says so.
    let plain = open(&packet("fn main() {}\n", None), 100).report();
    let git = js_sys::Array::from(&get(&get(&plain, "findings"), "git"));
    assert_eq!(git.length(), 0);
}

#[wasm_bindgen_test]
fn a_flipped_body_byte_is_refused_naming_the_member() {
    let built = packet("fn main() {}\n", None);
    let p = open(&built, 4096);
    let main = p.index_of("workspace/main.rs").unwrap();
    let at = number(&p.member(main), "dataOffset") as usize;
    let mut bytes = built.bytes.clone();
    bytes[at + 3] ^= 0x20;
    let mut v = Verifier::new(None).unwrap();
    let refusal = push_all(&mut v, &bytes, 4096).unwrap_err();
    assert_eq!(string(&refusal, "code"), "member_digest_mismatch");
    assert_eq!(string(&refusal, "path"), "workspace/main.rs");
    assert!(!string(&refusal, "advice").is_empty());
    assert!(number(&refusal, "offset") > 0.0);
}

#[wasm_bindgen_test]
fn a_truncated_packet_is_refused_at_finish_and_a_wrong_digest_at_packet_json() {
    let built = packet("fn main() {}\n", None);
    let mut v = Verifier::new(None).unwrap();
    push_all(&mut v, &built.bytes[..built.bytes.len() - 512], 1000).unwrap();
    let refusal = v.finish().err().expect("refused");
    assert_eq!(string(&refusal, "code"), "truncated");

    // A /2 packet's name is its packet.json's: checked before any member.
    let other = packet("fn main() { }\n", None);
    let mut v = Verifier::new(Some(other.digest.to_string())).unwrap();
    let refusal = push_all(&mut v, &built.bytes, 1000).err().expect("refused");
    assert_eq!(string(&refusal, "code"), "packet_digest_mismatch");
    assert_eq!(number(&refusal, "offset"), 512.0);

    let refusal = Verifier::new(Some("sha256:nothex".into()))
        .err()
        .expect("refused");
    assert_eq!(string(&refusal, "code"), "digest_syntax");
}

#[wasm_bindgen_test]
fn a_member_read_back_is_checked_against_the_manifest() {
    let built = packet("fn main() {}\n", None);
    let p = open(&built, 4096);
    let main = p.index_of("workspace/main.rs").unwrap();
    let at = number(&p.member(main), "dataOffset") as usize;
    let body = &built.bytes[at..at + 13];

    let mut check = p.check_member(main).unwrap();
    check.push(&body[..5]).unwrap();
    check.push(&body[5..]).unwrap();
    check.finish().unwrap();

    let mut check = p.check_member(main).unwrap();
    let mut changed = body.to_vec();
    changed[0] = b'F';
    check.push(&changed).unwrap();
    let refusal = check.finish().expect_err("refused");
    assert_eq!(string(&refusal, "code"), "member_digest_mismatch");
    assert_eq!(string(&refusal, "path"), "workspace/main.rs");

    let link = p.index_of("workspace/link").unwrap();
    assert!(p.check_member(link).is_err(), "a symlink has no body");
}

#[wasm_bindgen_test]
fn two_packets_compare_by_member_and_text_diffs_by_line() {
    let a = open(&packet("a\nb\nc\n", None), 4096);
    let b = open(&packet("a\nB\nc\n", Some("workspace/new.sh")), 4096);
    let c = compare_packets(&a, &b);
    let added = js_sys::Array::from(&get(&c, "added"));
    assert_eq!(added.length(), 1);
    assert_eq!(string(&added.get(0), "path"), "workspace/new.sh");
    assert_eq!(js_sys::Array::from(&get(&c, "removed")).length(), 0);
    let changed = js_sys::Array::from(&get(&c, "changed"));
    assert_eq!(changed.length(), 1);
    assert_eq!(string(&changed.get(0), "path"), "workspace/main.rs");
    assert_eq!(number(&changed.get(0), "sizeDelta"), 0.0);
    assert_eq!(number(&c, "unchanged"), 2.0);

    let d = line_diff(b"a\nb\nc\n", b"a\nB\nc\n");
    assert_eq!(number(&d, "inserted"), 1.0);
    assert_eq!(number(&d, "deleted"), 1.0);
    let lines = js_sys::Array::from(&get(
        &js_sys::Array::from(&get(&d, "hunks")).get(0),
        "lines",
    ));
    let tags: Vec<String> = lines.iter().map(|l| string(&l, "tag")).collect();
    assert_eq!(tags, ["equal", "delete", "insert", "equal"]);

    assert_eq!(classify(b"plain text\n"), "text");
    assert_eq!(classify(&[0, 159, 146, 150]), "binary");
}

#[wasm_bindgen_test]
fn a_2_packet_needs_no_whole_hash_and_a_1_packet_takes_it_from_another_thread() {
    // A /2 packet is named by its packet.json: once that is read the page
    // stops hashing the file, and finishes with no whole digest.
    let built = packet("fn main() {}\n", None);
    let mut v = Verifier::with_external_digest_js(Some(built.digest.to_string())).unwrap();
    assert_eq!(v.whole_hash_needed_js(), None);
    push_all(&mut v, &built.bytes, 700).unwrap();
    assert_eq!(v.whole_hash_needed_js(), Some(false));
    let p = v.finish_with_digest_js(None).unwrap();
    assert_eq!(string(&p.report(), "digest"), built.digest.to_string());
    assert_eq!(string(&p.report(), "format"), "pillbox.session-packet/2");
    // Named by another packet's manifest: refused as soon as packet.json is read.
    let other = packet("fn main() { }\n", None);
    let mut v = Verifier::with_external_digest_js(Some(other.digest.to_string())).unwrap();
    let refusal = push_all(&mut v, &built.bytes, 700).err().expect("refused");
    assert_eq!(string(&refusal, "code"), "packet_digest_mismatch");

    // A /1 packet: the whole file's digest, hashed elsewhere.
    let hash = |bytes: &[u8]| {
        let mut h = PacketHasher::new();
        for chunk in bytes.chunks(100) {
            h.update(chunk);
        }
        h.finish()
    };
    let v1 = packet_v1("fn main() {}\n");
    assert_eq!(hash(&v1.bytes), v1.digest.to_string());
    let mut v = Verifier::with_external_digest_js(Some(v1.digest.to_string())).unwrap();
    push_all(&mut v, &v1.bytes, 700).unwrap();
    assert_eq!(v.whole_hash_needed_js(), Some(true));
    let p = v.finish_with_digest_js(Some(hash(&v1.bytes))).unwrap();
    assert_eq!(string(&p.report(), "digest"), v1.digest.to_string());
    let mut v = Verifier::with_external_digest_js(Some(v1.digest.to_string())).unwrap();
    push_all(&mut v, &v1.bytes, 700).unwrap();
    let refusal = v
        .finish_with_digest_js(Some(hash(b"other")))
        .err()
        .expect("refused");
    assert_eq!(string(&refusal, "code"), "packet_digest_mismatch");

    // Structure is still checked: a truncated packet is refused whatever digest is given.
    let mut v = Verifier::with_external_digest_js(None).unwrap();
    push_all(&mut v, &v1.bytes[..1024], 700).unwrap();
    let refusal = v
        .finish_with_digest_js(Some(hash(&v1.bytes[..1024])))
        .err()
        .expect("refused");
    assert_eq!(string(&refusal, "code"), "truncated");
}

fn packet_v1(main: &str) -> Built {
    let sources = vec![
        Source::Dir {
            path: "workspace".into(),
        },
        Source::File {
            path: "workspace/main.rs".into(),
            contents: main.as_bytes().to_vec(),
            executable: false,
        },
    ];
    packet_core::in_memory::build_as(
        packet_core::Format::V1,
        &sources,
        None,
        vec![],
        &Limits::FORMAT,
    )
    .unwrap()
}

#[wasm_bindgen_test]
fn a_call_the_page_should_never_make_throws_a_bug_not_a_refusal() {
    let built = packet("fn main() {}\n", None);
    let mut v = Verifier::with_external_digest_js(None).unwrap();
    push_all(&mut v, &built.bytes, 700).unwrap();
    let thrown = v.finish().err().expect("thrown");
    assert_eq!(string(&thrown, "code"), "bug");
    assert!(string(&thrown, "advice").contains("not a verdict on the packet"));

    let mut v = Verifier::new(None).unwrap();
    push_all(&mut v, &built.bytes, 700).unwrap();
    let thrown = v
        .finish_with_digest_js(Some(built.digest.to_string()))
        .err()
        .expect("thrown");
    assert_eq!(string(&thrown, "code"), "bug");

    let p = open(&built, 4096);
    let link = p.index_of("workspace/link").unwrap();
    let thrown = p.check_member(link).err().expect("a symlink has no body");
    assert_eq!(string(&thrown, "code"), "bug");
}
