//! Helpers shared by the integration tests: run the real binary, build
//! trees on disk, and snapshot trees for comparison; each harness's
//! fixtures in a module of its own (`codex`, `claude`, `opencode`).
#![allow(dead_code)]

mod claude;
mod codex;
mod opencode;

// Not every test file uses every harness.
#[allow(unused_imports)]
pub use {claude::*, codex::*, opencode::*};

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::{symlink, PermissionsExt};
use std::path::{Path, PathBuf};

use assert_cmd::Command;
use serde_json::Value;

/// The binary under test.
pub fn pillbox() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_pillbox"));
    c.env_remove("CODEX_HOME").env_remove("CLAUDE_CONFIG_DIR");
    c
}

/// What one run printed.
pub struct Run {
    pub code: i32,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
}

impl Run {
    /// Stdout parsed as exactly one JSON object on one line.
    pub fn json(&self) -> Value {
        one_json(&self.stdout, "stdout", self)
    }
    /// Stderr parsed as exactly one JSON object on one line.
    pub fn stderr_json(&self) -> Value {
        one_json(&self.stderr, "stderr", self)
    }
}

fn one_json(bytes: &[u8], which: &str, run: &Run) -> Value {
    let text = String::from_utf8_lossy(bytes);
    let lines: Vec<&str> = text.lines().filter(|l| !l.is_empty()).collect();
    assert_eq!(
        lines.len(),
        1,
        "{which} should hold one JSON line; exit {}; stdout {:?}; stderr {:?}",
        run.code,
        String::from_utf8_lossy(&run.stdout),
        String::from_utf8_lossy(&run.stderr)
    );
    serde_json::from_str(lines[0])
        .unwrap_or_else(|e| panic!("{which} is not JSON ({e}): {}", lines[0]))
}

/// Runs `pillbox checkpoint <args>`.
pub fn checkpoint(args: &[&str]) -> Run {
    run(pillbox().arg("checkpoint").args(args))
}

/// Runs a prepared command.
pub fn run(cmd: &mut Command) -> Run {
    let out = cmd.output().expect("run pillbox");
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: out.stdout,
        stderr: out.stderr,
    }
}

/// Runs a command that must succeed and returns its JSON.
pub fn ok(args: &[&str]) -> Value {
    let r = checkpoint(args);
    assert_eq!(
        r.code,
        0,
        "pillbox checkpoint {args:?} failed: {}",
        String::from_utf8_lossy(&r.stdout)
    );
    r.json()
}

/// Runs a command that must fail with `code` and returns its error JSON.
pub fn fails(args: &[&str], exit: i32, code: &str) -> Value {
    let r = checkpoint(args);
    let j = r.json();
    assert_eq!(r.code, exit, "exit code of {args:?}: {j}");
    assert_eq!(j["schema"], "pillbox.error/1");
    assert_eq!(j["code"], code, "{j}");
    assert!(j["message"].as_str().is_some_and(|m| !m.is_empty()));
    assert!(j["advice"].as_str().is_some_and(|m| !m.is_empty()));
    j
}

/// Deterministic characters from `alphabet` (for planted credentials).
pub fn chars(seed: u64, n: usize, alphabet: &[u8]) -> String {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            alphabet[(x % alphabet.len() as u64) as usize] as char
        })
        .collect()
}

/// Letters and digits.
pub const ALNUM: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";

/// Packs `ws` into `out` and returns the JSON.
pub fn pack(ws: &Path, out: &Path, extra: &[&str]) -> Value {
    let mut args = vec!["pack", s(ws), "-o", s(out), "--quiet"];
    args.extend_from_slice(extra);
    ok(&args)
}

/// `pack WS -o OUT EXTRA…`'s arguments.
pub fn pack_args<'a>(ws: &'a Path, out: &'a Path, extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec!["pack", s(ws), "-o", s(out)];
    args.extend_from_slice(extra);
    args
}

/// `unpack PACKET --digest DIGEST --into INTO EXTRA…`'s arguments.
pub fn unpack_args<'a>(
    packet: &'a Path,
    digest: &'a str,
    into: &'a Path,
    extra: &[&'a str],
) -> Vec<&'a str> {
    let mut args = vec!["unpack", s(packet), "--digest", digest, "--into", s(into)];
    args.extend_from_slice(extra);
    args
}

/// Writes a report (unpack's, restore's) to `path`, for
/// `restore-check --checkpoint`; returns the path.
pub fn checkpoint_file(path: PathBuf, report: &Value) -> PathBuf {
    fs::write(&path, serde_json::to_vec(report).unwrap()).unwrap();
    path
}

/// A path as `&str`.
pub fn s(p: &Path) -> &str {
    p.to_str().expect("UTF-8 test path")
}

/// Writes a file, creating parents.
pub fn write(path: &Path, contents: impl AsRef<[u8]>) {
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, contents).unwrap();
}

/// Sets permission bits.
pub fn chmod(path: &Path, mode: u32) {
    fs::set_permissions(path, fs::Permissions::from_mode(mode)).unwrap();
}

/// A representative workspace: nested files, an executable, a relative
/// symlink to a file and to a directory, an empty directory, an empty
/// file, a name with spaces and UTF-8, and a binary file.
pub fn sample_workspace(root: &Path) {
    write(&root.join("README.md"), "# project\n");
    write(&root.join("src/main.rs"), "fn main() {}\n");
    write(&root.join("src/lib/deep/mod.rs"), "pub fn x() {}\n");
    write(&root.join("bin/run.sh"), "#!/bin/sh\necho run\n");
    chmod(&root.join("bin/run.sh"), 0o755);
    write(&root.join("docs/naïve file.txt"), "unicode name\n");
    write(&root.join("empty-file"), "");
    write(
        &root.join("data.bin"),
        (0..=255u8).cycle().take(300_000).collect::<Vec<u8>>(),
    );
    fs::create_dir_all(root.join("empty-dir/nested-empty")).unwrap();
    symlink("src/main.rs", root.join("main-link")).unwrap();
    symlink("../src", root.join("docs/src-link")).unwrap();
}

/// One node of a tree snapshot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Node {
    Dir,
    File { executable: bool, contents: Vec<u8> },
    Symlink(String),
    Other,
}

/// Every path below `root` (relative), with its type, exec bit, contents
/// or link target.
pub fn snapshot(root: &Path) -> BTreeMap<String, Node> {
    let mut out = BTreeMap::new();
    walk(root, root, &mut out);
    out
}

fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<String, Node>) {
    for entry in fs::read_dir(dir).unwrap() {
        let entry = entry.unwrap();
        let path = entry.path();
        let rel = path
            .strip_prefix(root)
            .unwrap()
            .to_str()
            .unwrap()
            .to_owned();
        let meta = fs::symlink_metadata(&path).unwrap();
        let node = if meta.file_type().is_symlink() {
            Node::Symlink(fs::read_link(&path).unwrap().to_str().unwrap().to_owned())
        } else if meta.is_dir() {
            walk(root, &path, out);
            Node::Dir
        } else if meta.is_file() {
            Node::File {
                executable: meta.permissions().mode() & 0o100 != 0,
                contents: fs::read(&path).unwrap(),
            }
        } else {
            Node::Other
        };
        out.insert(rel, node);
    }
}

/// A fresh temporary directory.
pub fn tmp() -> tempfile::TempDir {
    tempfile::tempdir().unwrap()
}

/// The digest string of a pack report.
pub fn digest(report: &Value) -> String {
    report["digest"].as_str().unwrap().to_owned()
}

/// The name of the packet `bytes` by its own version's rule, as
/// packet-core reads it: the SHA-256 of its `packet.json` (/2), or of the
/// whole file (/1).
pub fn packet_name(bytes: &[u8]) -> String {
    packet_core::reader::verify(bytes, Default::default())
        .unwrap_or_else(|e| panic!("packet-core refuses the packet: {e:?}"))
        .digest
        .to_string()
}

/// The adversarial corpus's folder, tests/adversarial.
pub fn corpus_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/adversarial")
}

/// The rows of tests/adversarial/cases.json, in its order.
pub fn corpus_cases() -> Vec<Value> {
    let table: Value =
        serde_json::from_slice(&fs::read(corpus_dir().join("cases.json")).unwrap()).unwrap();
    table["cases"].as_array().unwrap().clone()
}

/// The digest a row of tests/adversarial/cases.json names its accepted
/// packet by: its `digest`, or else the packet's name by its own rule.
pub fn case_digest(row: &Value, packet: &Path) -> String {
    match row["digest"].as_str() {
        Some(d) => d.to_owned(),
        None => packet_name(&fs::read(packet).unwrap()),
    }
}

/// Paths in a directory (non-recursive), sorted.
pub fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// Checks `value` against `proto/cli/<file>` with the subset of JSON Schema
/// those files use (type, const, enum, properties, required,
/// additionalProperties, items, minItems, minimum, anyOf, $ref; `pattern`
/// is not interpreted). Panics with the JSON path of the first mismatch.
pub fn assert_schema(file: &str, value: &Value) {
    let schema = load_schema(file);
    if let Err(e) = check(&schema, file, value, "$") {
        panic!("{file}: {e}\nvalue: {value}");
    }
}

fn load_schema(file: &str) -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../proto/cli")
        .join(file);
    serde_json::from_slice(&fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display())))
        .unwrap()
}

fn resolve(reference: &str, doc: &str) -> (Value, String) {
    let (file, pointer) = reference.split_once('#').unwrap();
    let file = if file.is_empty() {
        doc.to_owned()
    } else {
        file.to_owned()
    };
    let root = load_schema(&file);
    (
        root.pointer(pointer)
            .unwrap_or_else(|| panic!("{reference} not found"))
            .clone(),
        file,
    )
}

fn check(schema: &Value, doc: &str, v: &Value, at: &str) -> Result<(), String> {
    if let Some(r) = schema.get("$ref").and_then(Value::as_str) {
        let (s, d) = resolve(r, doc);
        return check(&s, &d, v, at);
    }
    if let Some(any) = schema.get("anyOf").and_then(Value::as_array) {
        if !any.iter().any(|s| check(s, doc, v, at).is_ok()) {
            return Err(format!("{at}: matches none of anyOf"));
        }
    }
    if let Some(c) = schema.get("const") {
        if c != v {
            return Err(format!("{at}: {v} is not {c}"));
        }
    }
    if let Some(e) = schema.get("enum").and_then(Value::as_array) {
        if !e.contains(v) {
            return Err(format!("{at}: {v} not in {e:?}"));
        }
    }
    if let Some(t) = schema.get("type") {
        let types: Vec<&str> = match t {
            Value::String(s) => vec![s.as_str()],
            Value::Array(a) => a.iter().filter_map(Value::as_str).collect(),
            _ => vec![],
        };
        let ok = types.iter().any(|t| match *t {
            "object" => v.is_object(),
            "array" => v.is_array(),
            "string" => v.is_string(),
            "integer" => v.is_u64() || v.is_i64(),
            "number" => v.is_number(),
            "boolean" => v.is_boolean(),
            "null" => v.is_null(),
            _ => false,
        });
        if !ok {
            return Err(format!("{at}: {v} is not of type {types:?}"));
        }
    }
    if let (Some(min), Some(n)) = (schema.get("minimum").and_then(Value::as_i64), v.as_i64()) {
        if n < min {
            return Err(format!("{at}: {n} < {min}"));
        }
    }
    if let Some(o) = v.as_object() {
        let props = schema.get("properties").and_then(Value::as_object);
        for r in schema
            .get("required")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let r = r.as_str().unwrap();
            if !o.contains_key(r) {
                return Err(format!("{at}: missing {r}"));
            }
        }
        for (k, val) in o {
            match props.and_then(|p| p.get(k)) {
                Some(s) => check(s, doc, val, &format!("{at}.{k}"))?,
                None if schema.get("additionalProperties") == Some(&Value::Bool(false)) => {
                    return Err(format!("{at}: unexpected key {k}"))
                }
                None => {}
            }
        }
    }
    if let Some(a) = v.as_array() {
        if let Some(min) = schema.get("minItems").and_then(Value::as_u64) {
            if (a.len() as u64) < min {
                return Err(format!("{at}: fewer than {min} items"));
            }
        }
        if let Some(items) = schema.get("items") {
            for (i, x) in a.iter().enumerate() {
                check(items, doc, x, &format!("{at}[{i}]"))?;
            }
        }
    }
    Ok(())
}
