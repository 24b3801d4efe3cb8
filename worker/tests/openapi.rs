//! Holds the Worker's table of routes (`route::ROUTES`) to
//! `proto/openapi.yaml`, both ways: every operation of the document (a
//! method of a path) is a route's, with the same `operationId` and the
//! access its `security` states, and every route of the table that serves
//! the API is an operation of the document. The routes beside the API (a
//! CORS preflight, the inspector's files) and the benchmark's are not in
//! the document. (`pillbox-wire`'s `tests/openapi.rs` reads the document
//! strictly; this test only reads it.)

#![cfg(not(target_arch = "wasm32"))]

use std::collections::{BTreeMap, BTreeSet};

use pillbox_worker::route::{Access, Serves, ROUTES};
use yaml_rust2::{Yaml, YamlLoader};

/// What an operation's `security` asks: the bearer scopes named, and
/// whether no token at all is an alternative (`{}`).
#[derive(Clone, Debug, PartialEq, Eq)]
struct Security {
    scopes: BTreeSet<String>,
    anonymous: bool,
}

impl Security {
    fn of(requirements: &Yaml) -> Security {
        let list = requirements
            .as_vec()
            .unwrap_or_else(|| panic!("a security that is not a list: {requirements:?}"));
        let mut scopes = BTreeSet::new();
        let mut anonymous = false;
        for requirement in list {
            let schemes = requirement
                .as_hash()
                .unwrap_or_else(|| panic!("a security requirement that is not a map"));
            anonymous |= schemes.is_empty();
            for (scheme, names) in schemes {
                assert_eq!(scheme.as_str(), Some("bearer"), "an unknown scheme");
                for name in names.as_vec().expect("a list of scopes") {
                    scopes.insert(name.as_str().expect("a scope's name").to_string());
                }
            }
        }
        Security { scopes, anonymous }
    }

    /// What the document states for a route that needs `access`.
    fn stated_for(access: Access) -> Security {
        let (scope, anonymous) = match access {
            Access::Anyone => (None, true),
            // Anonymous when the server sets READ_ACCESS or LIST_ACCESS
            // to public.
            Access::Read => (Some("read"), true),
            Access::List => (Some("list"), true),
            Access::Push => (Some("push"), false),
            Access::Refs => (Some("refs:<prefix>"), false),
            Access::Delete => (Some("delete"), false),
            Access::Admin => (Some("admin"), false),
        };
        Security {
            scopes: scope.into_iter().map(String::from).collect(),
            anonymous,
        }
    }
}

/// An operation: its `operationId` and what its caller needs.
type Operations = BTreeMap<(String, String), (String, Security)>;

fn document() -> Yaml {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../proto/openapi.yaml");
    let text = std::fs::read_to_string(path).expect("read proto/openapi.yaml");
    let mut docs = YamlLoader::load_from_str(&text).expect("proto/openapi.yaml is YAML");
    assert_eq!(docs.len(), 1, "one YAML document");
    docs.remove(0)
}

/// Every operation of the document, by (`METHOD`, path).
fn documented(doc: &Yaml) -> Operations {
    let default = Security::of(&doc["security"]);
    let paths = doc["paths"].as_hash().expect("paths");
    let mut found = Operations::new();
    for (path, item) in paths {
        let path = path.as_str().expect("a path");
        for (method, operation) in item.as_hash().expect("a path item") {
            let method = method.as_str().expect("a method");
            if !["get", "head", "put", "post", "delete", "options", "patch"].contains(&method) {
                continue;
            }
            let id = operation["operationId"]
                .as_str()
                .unwrap_or_else(|| panic!("{method} {path} has no operationId"));
            let security = match &operation["security"] {
                Yaml::BadValue => default.clone(),
                stated => Security::of(stated),
            };
            found.insert(
                (method.to_uppercase(), path.to_string()),
                (id.to_string(), security),
            );
        }
    }
    found
}

/// Every operation the table routes.
fn routed() -> Operations {
    let mut found = Operations::new();
    for row in ROUTES {
        if let Serves::Api(operations) = row.serves {
            for (method, id) in operations {
                let before = found.insert(
                    (method.as_str().to_string(), row.path.to_string()),
                    (id.to_string(), Security::stated_for(row.access)),
                );
                assert!(before.is_none(), "{} {} twice", method.as_str(), row.path);
            }
        }
    }
    found
}

/// Where two sets of operations differ: those of `a` that `b` lacks or
/// has otherwise.
fn differences(a: &Operations, b: &Operations) -> Vec<String> {
    a.iter()
        .filter(|(k, v)| b.get(*k) != Some(*v))
        .map(|((method, path), (id, security))| {
            format!(
                "{method} {path}: {id}, {security:?} (the other has {:?})",
                b.get(&(method.clone(), path.clone()))
            )
        })
        .collect()
}

#[test]
fn every_operation_of_the_document_is_a_route_with_its_id_and_access() {
    let missing = differences(&documented(&document()), &routed());
    assert!(
        missing.is_empty(),
        "operations of proto/openapi.yaml that route::ROUTES lacks, or names otherwise:\n{}",
        missing.join("\n")
    );
}

#[test]
fn every_route_of_the_api_is_an_operation_of_the_document() {
    let missing = differences(&routed(), &documented(&document()));
    assert!(
        missing.is_empty(),
        "routes of route::ROUTES that proto/openapi.yaml lacks, or names otherwise:\n{}",
        missing.join("\n")
    );
}

#[test]
fn the_routes_beside_the_api_are_not_in_the_document() {
    let doc = document();
    let paths = doc["paths"].as_hash().expect("paths");
    for row in ROUTES {
        if !matches!(row.serves, Serves::Api(_)) {
            assert!(
                !paths.contains_key(&Yaml::String(row.path.to_string())),
                "{} ({}) is not an operation of the API",
                row.name,
                row.path
            );
        }
    }
    assert!(ROUTES.iter().any(|r| r.serves == Serves::Beside));
}
