//! The schemas list the harnesses by hand: the CLI's outputs once
//! (`proto/cli/common.schema.json`, `$defs/harness_kind`), the manifest's
//! kinds and member roots in `proto/pillbox/session-packet-*.schema.json`.
//! These tests hold every list to [`ADAPTERS`]: each adapter's kind and
//! root is there, and nothing else.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde_json::Value;

use super::ADAPTERS;

fn proto(relative: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../proto")
        .join(relative)
}

fn read(path: &Path) -> Value {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_slice(&bytes).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn names() -> Vec<String> {
    ADAPTERS
        .iter()
        .map(|a| a.kind().as_str().to_owned())
        .collect()
}

fn roots() -> BTreeSet<String> {
    ADAPTERS
        .iter()
        .map(|a| a.kind().root().to_owned())
        .collect()
}

fn strings(v: &Value, at: &str) -> Vec<String> {
    v.as_array()
        .unwrap_or_else(|| panic!("{at} is not a list"))
        .iter()
        .map(|s| {
            s.as_str()
                .unwrap_or_else(|| panic!("{at} holds {s}"))
                .to_owned()
        })
        .collect()
}

/// Every `enum` in `v`, with its JSON pointer.
fn enums<'a>(v: &'a Value, at: String, out: &mut Vec<(String, &'a Value)>) {
    match v {
        Value::Object(map) => {
            for (k, child) in map {
                let here = format!("{at}/{k}");
                if k == "enum" {
                    out.push((here.clone(), child));
                }
                enums(child, here, out);
            }
        }
        Value::Array(items) => {
            for (i, child) in items.iter().enumerate() {
                enums(child, format!("{at}/{i}"), out);
            }
        }
        _ => {}
    }
}

#[test]
fn the_cli_schemas_list_the_adapters_once() {
    let common = read(&proto("cli/common.schema.json"));
    assert_eq!(
        strings(&common["$defs"]["harness_kind"]["enum"], "harness_kind"),
        names(),
        "common.schema.json's harness_kind lists the adapters in their order"
    );
    let dir = proto("cli");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().ends_with(".schema.json"))
        .collect();
    files.sort();
    assert!(files.len() > 1);
    for file in files {
        let schema = read(&file);
        let mut found = Vec::new();
        enums(&schema, String::new(), &mut found);
        for (at, list) in found {
            let Some(values) = list.as_array() else {
                continue;
            };
            let names_a_harness = values
                .iter()
                .any(|v| v.as_str().is_some_and(|s| names().iter().any(|n| n == s)));
            let home = file.ends_with("common.schema.json") && at == "/$defs/harness_kind/enum";
            assert!(
                !names_a_harness || home,
                "{}{at} lists harnesses: refer to common.schema.json#/$defs/harness_kind",
                file.display()
            );
        }
    }
}

#[test]
fn the_packet_schemas_name_each_adapter_s_kind_and_root() {
    for n in [1, 2] {
        let file = format!("pillbox/session-packet-{n}.schema.json");
        let harness = &read(&proto(&file))["$defs"]["harness"];
        let kinds: BTreeSet<String> = strings(&harness["properties"]["kind"]["enum"], &file)
            .into_iter()
            .collect();
        assert_eq!(kinds, names().into_iter().collect(), "{file}: kinds");

        // `^harness/(codex|claude|opencode)/`: the roots a rollout may be under.
        let pattern = harness["properties"]["rollout"]["allOf"]
            .as_array()
            .unwrap()
            .iter()
            .find_map(|p| p["pattern"].as_str())
            .unwrap_or_else(|| panic!("{file}: no rollout pattern"));
        let alternatives = pattern
            .strip_prefix("^harness/(")
            .and_then(|p| p.strip_suffix(")/"))
            .unwrap_or_else(|| panic!("{file}: rollout pattern {pattern}"));
        let listed: BTreeSet<String> = alternatives
            .split('|')
            .map(|k| format!("harness/{k}"))
            .collect();
        assert_eq!(listed, roots(), "{file}: rollout roots");

        // One `if kind then rollout under its root` per kind.
        let mut rules = BTreeSet::new();
        for rule in harness["allOf"].as_array().unwrap() {
            let kind = rule["if"]["properties"]["kind"]["const"]
                .as_str()
                .unwrap_or_else(|| panic!("{file}: a rule for no kind"));
            let root = rule["then"]["properties"]["rollout"]["pattern"]
                .as_str()
                .unwrap_or_else(|| panic!("{file}: {kind}'s rule has no rollout pattern"));
            let adapter = ADAPTERS
                .iter()
                .find(|a| a.kind().as_str() == kind)
                .unwrap_or_else(|| panic!("{file}: a rule for {kind}, which no adapter is"));
            let own = adapter.kind().root();
            assert_eq!(root, format!("^{own}/"), "{file}: {kind}");
            assert!(rules.insert(own.to_owned()), "{file}: {kind} twice");
        }
        assert_eq!(rules, roots(), "{file}: the rules' roots");
    }
}
