//! Ties the wire types to `proto/openapi.yaml`, so that a field added,
//! renamed, made optional or nullable on one side only fails here.
//!
//! - Every JSON body the document declares (each request body and each
//!   answer, on every route) is listed in [`bodies`] with the type that
//!   carries it; a body with no type, or a type for a body the document no
//!   longer has, is an error.
//! - Each type's samples are serialized and compared with the schema at
//!   every level: the keys seen are exactly the schema's `properties`;
//!   every value has a JSON type the schema allows; a schema that allows
//!   `null` gets a `null` from some sample (the Rust field is an `Option`)
//!   and one that does not never does; `const` and `enum` hold.
//! - `required`: for an answer, the keys every sample sends (the Worker
//!   always sends them); for a request, the keys without which the type
//!   does not deserialize (the Worker refuses the request). A request type
//!   also refuses a field the schema does not name
//!   (`additionalProperties: false`).
//! - Every sample deserializes back to itself (what the CLI reads is what
//!   the Worker wrote).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Debug;

use packet_core::{Refusal, RefusalDetails};
use pillbox_wire::*;
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::{Map, Value};
use yaml_rust2::parser::{Event, MarkedEventReceiver, Parser};
use yaml_rust2::scanner::{Marker, TScalarStyle};
use yaml_rust2::{Yaml, YamlLoader};

// ---- the document -----------------------------------------------------------

fn document() -> Value {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../proto/openapi.yaml");
    let text = std::fs::read_to_string(path).expect("read proto/openapi.yaml");
    strict_yaml(&text).unwrap_or_else(|e| panic!("proto/openapi.yaml: {e}"))
}

/// One YAML document as JSON, refusing what a lenient reader lets through
/// and other OpenAPI tools do not: a key twice in one mapping, and a node
/// with no value at all. The second is how an unquoted comma in a flow
/// mapping goes wrong: in `{ description: a, b. }` the comma ends the
/// value `a` and `b.` is a key of its own, with no value. (An explicit
/// `null` is a value.)
fn strict_yaml(text: &str) -> Result<Value, String> {
    /// The nodes with no value, each named by the scalar before it (the
    /// key whose value is missing) and that scalar's line.
    #[derive(Default)]
    struct Empty {
        before: Option<(String, usize)>,
        found: Vec<String>,
    }
    impl MarkedEventReceiver for Empty {
        fn on_event(&mut self, event: Event, mark: Marker) {
            if let Event::Scalar(value, style, _, tag) = event {
                if value.is_empty() && style == TScalarStyle::Plain && tag.is_none() {
                    self.found.push(match &self.before {
                        Some((key, line)) => format!("{key:?} (line {line})"),
                        None => format!("line {}", mark.line()),
                    });
                }
                self.before = Some((value, mark.line()));
            }
        }
    }
    let mut empty = Empty::default();
    Parser::new_from_str(text)
        .load(&mut empty, true)
        .map_err(|e| format!("not YAML: {e}"))?;
    if !empty.found.is_empty() {
        return Err(format!(
            "no value after {} (in a flow mapping, quote a text that holds a comma)",
            empty.found.join(", ")
        ));
    }
    let docs = YamlLoader::load_from_str(text).map_err(|e| format!("not YAML: {e}"))?;
    match docs.as_slice() {
        [doc] => Ok(json_of(doc)),
        _ => Err(format!("{} YAML documents, not one", docs.len())),
    }
}

/// The YAML document as JSON (OpenAPI 3.1 is JSON Schema, written in YAML).
fn json_of(y: &Yaml) -> Value {
    match y {
        Yaml::Hash(h) => Value::Object(
            h.iter()
                .map(|(k, v)| {
                    let key = match k {
                        Yaml::String(s) => s.clone(),
                        Yaml::Integer(i) => i.to_string(),
                        other => panic!("a mapping key that is not text: {other:?}"),
                    };
                    (key, json_of(v))
                })
                .collect(),
        ),
        Yaml::Array(a) => Value::Array(a.iter().map(json_of).collect()),
        Yaml::String(s) => Value::String(s.clone()),
        Yaml::Integer(i) => Value::from(*i),
        Yaml::Real(r) => Value::from(r.parse::<f64>().expect("a YAML real")),
        Yaml::Boolean(b) => Value::Bool(*b),
        Yaml::Null => Value::Null,
        other => panic!("unexpected YAML node {other:?}"),
    }
}

/// `/a/b~1c` → the node, following the JSON Pointer escapes.
fn at<'a>(doc: &'a Value, pointer: &str) -> &'a Value {
    doc.pointer(pointer)
        .unwrap_or_else(|| panic!("the document has nothing at {pointer}"))
}

/// Where the schema of a JSON body is defined: its `$ref` target, or the
/// place it is written inline.
fn schema_home(schema: &Value, written_at: &str) -> String {
    match schema.get("$ref").and_then(Value::as_str) {
        Some(r) => r.trim_start_matches('#').to_owned(),
        None => written_at.to_owned(),
    }
}

fn escape(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

/// Every JSON body the document declares, by [`schema_home`], with the
/// operations that use it.
fn declared_bodies(doc: &Value) -> BTreeMap<String, Vec<String>> {
    let json = escape("application/json");
    let mut found: BTreeMap<String, Vec<String>> = BTreeMap::new();
    // A request body or a response, written at `place`: its JSON schema.
    let mut declare = |node: &Value, place: &str, what: String| {
        if let Some(schema) = node.pointer(&format!("/content/{json}/schema")) {
            let home = schema_home(schema, &format!("{place}/content/{json}/schema"));
            found.entry(home).or_default().push(what);
        }
    };
    let paths = doc["paths"].as_object().expect("paths");
    for (template, item) in paths {
        for (method, op) in item.as_object().expect("a path item") {
            if method == "parameters" {
                continue;
            }
            let base = format!("/paths/{}/{method}", escape(template));
            let what = format!("{} {template}", method.to_uppercase());
            if let Some(request) = op.get("requestBody") {
                declare(
                    request,
                    &format!("{base}/requestBody"),
                    format!("{what} request"),
                );
            }
            for (status, response) in op["responses"].as_object().expect("responses") {
                // A response may be one of components/responses.
                let (response, place) = match response.get("$ref").and_then(Value::as_str) {
                    Some(r) => (
                        at(doc, r.trim_start_matches('#')),
                        r.trim_start_matches('#').to_owned(),
                    ),
                    None => (response, format!("{base}/responses/{status}")),
                };
                declare(response, &place, format!("{what} → {status}"));
            }
        }
    }
    found
}

// ---- the types and their samples -------------------------------------------

#[derive(Clone, Copy, PartialEq)]
enum Direction {
    /// The Worker sends it, the CLI reads it.
    Answer,
    /// The CLI sends it, the Worker reads it.
    Request,
}

struct Body {
    /// [`schema_home`] of the document's schema for it.
    home: &'static str,
    direction: Direction,
    samples: Vec<Value>,
    /// Whether the Rust type deserializes this value.
    accepts: fn(&Value) -> bool,
}

fn accepts<T: DeserializeOwned>(v: &Value) -> bool {
    serde_json::from_value::<T>(v.clone()).is_ok()
}

fn body<T>(home: &'static str, direction: Direction, samples: Vec<T>) -> Body
where
    T: Serialize + DeserializeOwned + PartialEq + Debug,
{
    let values: Vec<Value> = samples
        .iter()
        .map(|s| serde_json::to_value(s).unwrap())
        .collect();
    for (sample, value) in samples.iter().zip(&values) {
        let back: T = serde_json::from_value(value.clone())
            .unwrap_or_else(|e| panic!("{home}: {value} does not read back: {e}"));
        assert_eq!(
            &back, sample,
            "{home}: a sample does not read back as itself"
        );
    }
    Body {
        home,
        direction,
        samples: values,
        accepts: accepts::<T>,
    }
}

fn digest(byte: u8) -> String {
    format!("sha256:{}", format!("{byte:02x}").repeat(32))
}

fn facts(harness: Option<Harness>, labels: &[&str]) -> PacketFacts {
    PacketFacts {
        digest: digest(1),
        size: 10_240,
        members: 3,
        file_bytes: 1_200,
        harness,
        labels: labels.iter().map(|l| l.to_string()).collect(),
    }
}

fn codex(model: Option<&str>) -> Option<Harness> {
    Some(Harness {
        kind: "codex".into(),
        thread_id: "7f3c".into(),
        model: model.map(str::to_owned),
    })
}

fn claude() -> Option<Harness> {
    Some(Harness {
        kind: "claude".into(),
        thread_id: "a1".into(),
        model: Some("opus".into()),
    })
}

const NOW: &str = "2026-12-01T09:00:00.000Z";

fn packet(harness: Option<Harness>) -> Packet {
    Packet {
        facts: facts(harness, &["host=ci-7"]),
        created: NOW.into(),
    }
}

fn git_ref(name: &str) -> Ref {
    Ref {
        name: name.into(),
        digest: digest(2),
        updated: NOW.into(),
    }
}

fn listed_ref(name: &str, size: Option<u64>) -> ListedRef {
    ListedRef {
        now: git_ref(name),
        size,
        labels: vec!["host=ci-7".into()],
    }
}

fn problem(code: &str) -> Problem {
    problem_at(code, None, None)
}

fn problem_at(code: &str, path: Option<&str>, offset: Option<u64>) -> Problem {
    Problem {
        refusal: Refusal {
            code: String::from(code).into(),
            details: RefusalDetails {
                path: path.map(|p| String::from(p).into()),
                offset,
                message: "what was found".into(),
                advice: "what to do".into(),
            },
        },
        current: None,
        missing: None,
    }
}

fn conflicts() -> Vec<ErrorBody> {
    [Some(digest(3)), None]
        .into_iter()
        .map(|current| ErrorBody {
            error: Problem {
                current: Some(current),
                ..problem("ref_conflict")
            },
        })
        .collect()
}

fn info(read_access: ReadAccess) -> Info {
    Info {
        service: SERVICE.into(),
        api: API_VERSION,
        format: "pillbox.session-packet/2".into(),
        max_packet_bytes: 1 << 30,
        max_members: 100_000,
        max_single_upload_bytes: 64 << 20,
        part_size: PartSizes {
            default: 32 << 20,
            min: 5 << 20,
            max: 64 << 20,
        },
        read_access,
        transfer: vec![TRANSFER_WHOLE.into(), TRANSFER_DELTA.into()],
    }
}

fn hex(byte: u8) -> String {
    format!("{byte:02x}").repeat(32)
}

fn incomplete() -> Vec<ErrorBody> {
    vec![ErrorBody {
        error: Problem {
            missing: Some(vec![hex(7), hex(8)]),
            ..problem("push_incomplete")
        },
    }]
}

fn push(parts: Vec<PushPart>) -> Push {
    let id = "00112233445566778899aabbccddeeff";
    Push {
        push_id: id.into(),
        location: format!("/v1/pushes/{id}"),
        digest: digest(4),
        size: 3 << 20,
        bases_used: vec![digest(1)],
        missing: vec![hex(9)],
        missing_chunks: vec![hex(10)],
        missing_bytes: 300_000,
        parts,
        part_limits: PartLimits {
            max_bytes: 32 << 20,
            max_raw_bytes: 64 << 20,
            max_frames: 65_536,
            encodings: vec!["identity".into(), "zstd".into()],
            zstd_max_window: 8 << 20,
        },
        chunking: Chunking::ours(),
    }
}

fn upload(received: Vec<ReceivedPart>, missing: Vec<u16>) -> Upload {
    let id = "0123456789abcdef0123456789abcdef";
    Upload {
        upload_id: id.into(),
        location: format!("/v1/uploads/{id}"),
        digest: digest(4),
        size: 12 << 20,
        part_size: 5 << 20,
        parts: 3,
        received,
        missing,
    }
}

fn search_match(kind: &str, sha256: Option<String>) -> SearchMatch {
    SearchMatch {
        digest: digest(1),
        path: "workspace/src".into(),
        kind: kind.into(),
        size: 0,
        sha256,
    }
}

/// Every JSON body of the API with its type and samples that, together,
/// send every field, every `null` and every nested item.
fn bodies() -> Vec<Body> {
    use Direction::*;
    vec![
        body(
            "/components/schemas/Info",
            Answer,
            vec![info(ReadAccess::Public), info(ReadAccess::Token)],
        ),
        body(
            "/paths/~1v1~1packets/get/responses/200/content/application~1json/schema",
            Answer,
            vec![
                PacketList {
                    packets: vec![
                        packet(codex(Some("gpt-5-codex"))),
                        packet(codex(None)),
                        packet(claude()),
                        packet(None),
                    ],
                    next_cursor: Some("41".into()),
                },
                PacketList {
                    packets: vec![],
                    next_cursor: None,
                },
            ],
        ),
        body(
            "/components/schemas/Stored",
            Answer,
            vec![
                Stored {
                    facts: facts(codex(Some("gpt-5-codex")), &["a", "b"]),
                    created: true,
                    created_at: NOW.into(),
                },
                Stored {
                    facts: facts(codex(None), &[]),
                    created: false,
                    created_at: NOW.into(),
                },
                Stored {
                    facts: facts(claude(), &[]),
                    created: false,
                    created_at: NOW.into(),
                },
                Stored {
                    facts: facts(None, &[]),
                    created: false,
                    created_at: NOW.into(),
                },
            ],
        ),
        body(
            "/paths/~1v1~1uploads/post/requestBody/content/application~1json/schema",
            Request,
            vec![
                CreateUpload {
                    digest: digest(4),
                    size: 12 << 20,
                    part_size: Some(5 << 20),
                    labels: vec!["kind=big".into()],
                },
                CreateUpload {
                    digest: digest(4),
                    size: 12 << 20,
                    part_size: None,
                    labels: vec![],
                },
            ],
        ),
        body(
            "/components/schemas/Upload",
            Answer,
            vec![
                upload(vec![], vec![1, 2, 3]),
                upload(
                    vec![ReceivedPart {
                        number: 2,
                        size: 5 << 20,
                    }],
                    vec![1, 3],
                ),
            ],
        ),
        body(
            "/paths/~1v1~1uploads~1{id}~1parts~1{number}/put/responses/200/content/application~1json/schema",
            Answer,
            vec![PartStored {
                upload_id: "0123456789abcdef0123456789abcdef".into(),
                number: 3,
                size: 2 << 20,
            }],
        ),
        body(
            "/paths/~1v1~1refs/get/responses/200/content/application~1json/schema",
            Answer,
            vec![
                RefList {
                    refs: vec![
                        listed_ref("sessions/a/latest", Some(10_240)),
                        listed_ref("sessions/b/latest", None),
                    ],
                    next_cursor: Some("sessions/a/latest".into()),
                },
                RefList {
                    refs: vec![],
                    next_cursor: None,
                },
            ],
        ),
        body(
            "/components/schemas/Ref",
            Answer,
            vec![git_ref("sessions/demo/latest")],
        ),
        body(
            "/components/schemas/RefHistory",
            Answer,
            vec![
                RefHistory {
                    name: "sessions/demo/latest".into(),
                    moves: vec![
                        RefMove {
                            digest: digest(2),
                            at: NOW.into(),
                            by: Some("ci".into()),
                        },
                        RefMove {
                            digest: digest(3),
                            at: NOW.into(),
                            by: None,
                        },
                    ],
                    next_cursor: Some("17".into()),
                    kept: 100,
                },
                RefHistory {
                    name: "sessions/demo/latest".into(),
                    moves: vec![],
                    next_cursor: None,
                    kept: 100,
                },
            ],
        ),
        body(
            "/components/schemas/DigestMatches",
            Answer,
            vec![DigestMatches {
                prefix: "sha256:02020202".into(),
                digests: vec![digest(2), digest(3)],
                truncated: false,
            }],
        ),
        body(
            "/paths/~1v1~1refs~1{name}/put/requestBody/content/application~1json/schema",
            Request,
            vec![PutRef { digest: digest(2) }],
        ),
        body(
            "/components/schemas/RefChange",
            Answer,
            vec![
                RefChange {
                    now: git_ref("sessions/demo/latest"),
                    previous: Some(digest(5)),
                },
                RefChange {
                    now: git_ref("sessions/demo/latest"),
                    previous: None,
                },
            ],
        ),
        body(
            "/paths/~1v1~1search/get/responses/200/content/application~1json/schema",
            Answer,
            vec![
                SearchResults {
                    matches: vec![
                        search_match("file", Some(digest(6))),
                        search_match("dir", None),
                        search_match("symlink", None),
                    ],
                    next_cursor: Some("17".into()),
                },
                SearchResults {
                    matches: vec![],
                    next_cursor: None,
                },
            ],
        ),
        body("/components/schemas/ErrorBody", Answer, {
            let mut all = vec![
                ErrorBody {
                    error: problem("unauthorized"),
                },
                ErrorBody {
                    error: problem_at(
                        "member_digest_mismatch",
                        Some("workspace/src/main.rs"),
                        Some(2560),
                    ),
                },
            ];
            all.extend(conflicts());
            all.extend(incomplete());
            all
        }),
        body(
            "/components/responses/PushIncomplete/content/application~1json/schema",
            Answer,
            incomplete(),
        ),
        body(
            "/components/schemas/Push",
            Answer,
            vec![
                push(vec![]),
                push(vec![PushPart {
                    number: 1,
                    frames: 2,
                    bytes: 300_000,
                    stored_bytes: 100_000,
                }]),
            ],
        ),
        body(
            "/paths/~1v1~1pushes~1{id}~1parts~1{number}/put/responses/200/content/application~1json/schema",
            Answer,
            vec![PartReceived {
                push_id: "00112233445566778899aabbccddeeff".into(),
                number: 1,
                frames: 2,
                bytes: 300_000,
                stored_bytes: 100_000,
            }],
        ),
        body(
            "/paths/~1v1~1pushes~1{id}~1recipes/post/responses/200/content/application~1json/schema",
            Answer,
            vec![MissingChunks {
                missing_chunks: vec![hex(10)],
                missing_bytes: 200_000,
            }],
        ),
        body(
            "/paths/~1v1~1packets~1{digest}~1chunks/post/requestBody/content/application~1json/schema",
            Request,
            vec![ChunkRequest {
                chunks: vec![hex(10), hex(11)],
            }],
        ),
        body(
            "/components/responses/RefConflict/content/application~1json/schema",
            Answer,
            conflicts(),
        ),
    ]
}

/// JSON bodies that are not the API's own: the manifest is packet-core's
/// `packet.json`, served as stored (proto/pillbox/ describes it).
const NOT_WIRE_TYPES: &[&str] = &[
    "/paths/~1v1~1packets~1{digest}~1manifest/get/responses/200/content/application~1json/schema",
];

// ---- the comparison ---------------------------------------------------------

struct Checker<'a> {
    doc: &'a Value,
    errors: Vec<String>,
}

fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_u64() || n.is_i64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn names(v: Option<&Value>) -> BTreeSet<String> {
    v.and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .map(str::to_owned)
        .collect()
}

impl Checker<'_> {
    /// The schema with `$ref`s followed (siblings kept) and `allOf` merged
    /// into one object schema.
    fn resolve(&self, schema: &Value) -> Value {
        let mut schema = schema.clone();
        while let Some(r) = schema.get("$ref").and_then(Value::as_str) {
            let mut target = at(self.doc, r.trim_start_matches('#')).clone();
            for (k, v) in schema.as_object().unwrap() {
                if k != "$ref" {
                    target[k] = v.clone();
                }
            }
            schema = target;
        }
        if let Some(parts) = schema
            .as_object_mut()
            .and_then(|o| o.remove("allOf"))
            .and_then(|a| a.as_array().cloned())
        {
            for part in parts {
                let part = self.resolve(&part);
                schema = self.merge(schema, &part);
            }
        }
        schema
    }

    fn merge(&self, mut into: Value, from: &Value) -> Value {
        for (key, value) in from.as_object().unwrap() {
            match key.as_str() {
                "required" => {
                    let all: BTreeSet<String> = names(into.get("required"))
                        .union(&names(Some(value)))
                        .cloned()
                        .collect();
                    into["required"] = all.into_iter().map(Value::String).collect();
                }
                "properties" => {
                    let mut props = into
                        .get("properties")
                        .and_then(Value::as_object)
                        .cloned()
                        .unwrap_or_default();
                    for (name, s) in value.as_object().unwrap() {
                        let merged = match props.get(name) {
                            // `false`: a response that narrows a schema
                            // says the property is never there.
                            Some(_) if s.is_boolean() => s.clone(),
                            Some(old) if old.is_boolean() => old.clone(),
                            Some(old) => self.merge(self.resolve(old), &self.resolve(s)),
                            None => s.clone(),
                        };
                        props.insert(name.clone(), merged);
                    }
                    into["properties"] = Value::Object(props);
                }
                _ => {
                    into.as_object_mut()
                        .unwrap()
                        .entry(key.clone())
                        .or_insert_with(|| value.clone());
                }
            }
        }
        into
    }

    /// The JSON types a schema allows (empty: any).
    fn types(&self, schema: &Value) -> BTreeSet<String> {
        let mut types = BTreeSet::new();
        match schema.get("type") {
            Some(Value::String(t)) => {
                types.insert(t.clone());
            }
            Some(Value::Array(list)) => {
                types.extend(list.iter().filter_map(Value::as_str).map(str::to_owned))
            }
            _ => {}
        }
        if let Some(c) = schema.get("const") {
            types.insert(json_type(c).to_owned());
        }
        for alternative in schema
            .get("oneOf")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            types.extend(self.types(&self.resolve(alternative)));
        }
        types
    }

    fn fail(&mut self, at: &str, message: String) {
        self.errors.push(format!("{at}: {message}"));
    }

    /// Compares what the samples send at one place with the schema there.
    fn check(&mut self, at: &str, schema: &Value, values: &[&Value], direction: Direction) {
        let schema = self.resolve(schema);
        let types = self.types(&schema);
        for v in values {
            if !types.is_empty() && !types.contains(json_type(v)) {
                self.fail(
                    at,
                    format!("{v} is a {}, the document allows {types:?}", json_type(v)),
                );
            }
            if let Some(c) = schema.get("const").filter(|c| *c != *v) {
                self.fail(at, format!("{v} is not the document's const {c}"));
            }
            if let Some(list) = schema.get("enum").and_then(Value::as_array) {
                if !list.contains(v) {
                    self.fail(at, format!("{v} is not one of the document's {list:?}"));
                }
            }
        }
        if direction == Direction::Answer
            && types.contains("null")
            && !values.iter().any(|v| v.is_null())
        {
            self.fail(
                at,
                "the document allows null, no sample sends it (an Option in Rust, or no null in the document)".into(),
            );
        }
        let objects: Vec<&Map<String, Value>> =
            values.iter().filter_map(|v| v.as_object()).collect();
        if !objects.is_empty() {
            self.check_object(at, &schema, &objects, direction);
        }
        let arrays: Vec<&Vec<Value>> = values.iter().filter_map(|v| v.as_array()).collect();
        if !arrays.is_empty() {
            let items: Vec<&Value> = arrays.iter().flat_map(|a| a.iter()).collect();
            match schema.get("items") {
                Some(_) if items.is_empty() => {
                    self.fail(at, "no sample has an item: add one".into())
                }
                Some(item) => self.check(&format!("{at}[]"), item, &items, direction),
                None => self.fail(at, "an array with no `items` schema".into()),
            }
        }
    }

    fn check_object(
        &mut self,
        at: &str,
        schema: &Value,
        objects: &[&Map<String, Value>],
        direction: Direction,
    ) {
        let properties = schema
            .get("properties")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        // A property whose schema is `false` is documented as never sent.
        let documented: BTreeSet<&String> = properties
            .iter()
            .filter(|(_, s)| **s != Value::Bool(false))
            .map(|(k, _)| k)
            .collect();
        let sent: BTreeSet<&String> = objects.iter().flat_map(|o| o.keys()).collect();
        for extra in sent.difference(&documented) {
            self.fail(
                at,
                format!("the Rust type has `{extra}`, the document does not"),
            );
        }
        for missing in documented.difference(&sent) {
            self.fail(
                at,
                format!(
                    "the document has `{missing}`, no sample sends it (is it in the Rust type?)"
                ),
            );
        }
        if direction == Direction::Answer {
            let always: BTreeSet<String> = sent
                .iter()
                .filter(|k| objects.iter().all(|o| o.contains_key(k.as_str())))
                .map(|k| k.to_string())
                .collect();
            let required = names(schema.get("required"));
            if always != required {
                self.fail(
                    at,
                    format!(
                        "the Rust type always sends {always:?}, the document requires {required:?}"
                    ),
                );
            }
        }
        for (name, property) in properties.iter().filter(|(_, s)| !s.is_boolean()) {
            let values: Vec<&Value> = objects.iter().filter_map(|o| o.get(name)).collect();
            if !values.is_empty() {
                self.check(&format!("{at}.{name}"), property, &values, direction);
            }
        }
    }

    /// A request's `required` is what the Worker cannot do without: the
    /// fields whose removal makes the type refuse the body.
    fn check_request(&mut self, home: &str, schema: &Value, body: &Body) {
        let schema = self.resolve(schema);
        let full = &body.samples[0];
        let mut needed = BTreeSet::new();
        for key in full.as_object().expect("a request is an object").keys() {
            let mut without = full.clone();
            without.as_object_mut().unwrap().remove(key);
            if !(body.accepts)(&without) {
                needed.insert(key.clone());
            }
        }
        let required = names(schema.get("required"));
        if needed != required {
            self.fail(
                home,
                format!("the Rust type needs {needed:?}, the document requires {required:?}"),
            );
        }
        if schema.get("additionalProperties") == Some(&Value::Bool(false)) {
            let mut extra = full.clone();
            extra["not_in_the_document"] = Value::from(1);
            if (body.accepts)(&extra) {
                self.fail(home, "the document allows no other field, the Rust type accepts one (deny_unknown_fields)".into());
            }
        }
    }
}

// ---- the tests --------------------------------------------------------------

#[test]
fn every_json_body_of_the_document_has_a_wire_type() {
    let doc = document();
    let declared = declared_bodies(&doc);
    let typed: BTreeSet<&str> = bodies().iter().map(|b| b.home).collect();
    let untyped: Vec<String> = declared
        .iter()
        .filter(|(home, _)| {
            !typed.contains(home.as_str()) && !NOT_WIRE_TYPES.contains(&home.as_str())
        })
        .map(|(home, ops)| format!("{home} ({})", ops.join(", ")))
        .collect();
    assert_eq!(
        untyped,
        Vec::<String>::new(),
        "JSON bodies with no wire type"
    );
    let stale: Vec<&&str> = typed
        .iter()
        .chain(NOT_WIRE_TYPES)
        .filter(|home| !declared.contains_key(**home))
        .collect();
    assert_eq!(
        stale,
        Vec::<&&str>::new(),
        "listed bodies the document does not declare"
    );
    assert!(
        declared.len() >= 12,
        "read only {} bodies: has the document changed shape?",
        declared.len()
    );
}

#[test]
fn every_wire_type_matches_its_schema() {
    let doc = document();
    let mut checker = Checker {
        doc: &doc,
        errors: Vec::new(),
    };
    for body in bodies() {
        let schema = at(&doc, body.home).clone();
        let values: Vec<&Value> = body.samples.iter().collect();
        checker.check(body.home, &schema, &values, body.direction);
        if body.direction == Direction::Request {
            checker.check_request(body.home, &schema, &body);
        }
    }
    assert!(
        checker.errors.is_empty(),
        "the wire types and proto/openapi.yaml disagree:\n{}",
        checker.errors.join("\n")
    );
}

#[test]
fn read_access_has_the_documents_values() {
    let doc = document();
    let documented = names(Some(at(
        &doc,
        "/components/schemas/Info/properties/read_access/enum",
    )));
    let ours: BTreeSet<String> = [ReadAccess::Public, ReadAccess::Token]
        .iter()
        .map(|r| {
            serde_json::to_value(r)
                .unwrap()
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    assert_eq!(ours, documented);
}

#[test]
fn the_document_reader_refuses_split_and_repeated_keys() {
    assert_eq!(
        strict_yaml("a: { description: \"As GET, without a body.\", b: null }\n"),
        Ok(serde_json::json!({ "a": { "description": "As GET, without a body.", "b": null } }))
    );
    for (text, expect) in [
        (
            "a: { description: As GET, without a body. }\n",
            "no value after \"without a body.\" (line 1)",
        ),
        ("a:\n  b:\n  c: 1\n", "no value after \"b\" (line 2)"),
        ("a: 1\nb: { c }\n", "no value after \"c\" (line 2)"),
        ("a:\n  - 1\n  -\n", "no value after \"1\" (line 2)"),
        ("a: 1\nb: 2\na: 3\n", "duplicated key"),
        ("a: { b: 1, b: 2 }\n", "duplicated key"),
    ] {
        let refused = strict_yaml(text).expect_err(text);
        assert!(refused.contains(expect), "{text:?}: {refused}");
    }
}

#[test]
fn the_checker_sees_a_field_the_document_lacks() {
    // The comparison itself: a body with one field more, one field fewer, a
    // null where the document has none, must each be reported.
    let doc = document();
    let schema = at(&doc, "/components/schemas/Ref").clone();
    let mut checker = Checker {
        doc: &doc,
        errors: Vec::new(),
    };
    let good = serde_json::to_value(git_ref("a")).unwrap();
    let mut extra = good.clone();
    extra["extra"] = Value::from(1);
    let mut fewer = good.clone();
    fewer.as_object_mut().unwrap().remove("updated");
    let mut null = good.clone();
    null["digest"] = Value::Null;
    for (sample, expect) in [
        (&good, None),
        (&extra, Some("has `extra`")),
        (&fewer, Some("has `updated`, no sample")),
        (&null, Some("is a null")),
    ] {
        checker.errors.clear();
        checker.check("Ref", &schema, &[sample], Direction::Answer);
        match expect {
            None => assert_eq!(checker.errors, Vec::<String>::new()),
            Some(text) => assert!(
                checker.errors.iter().any(|e| e.contains(text)),
                "{text:?} not in {:?}",
                checker.errors
            ),
        }
    }
}

// ---- the refusal codes ------------------------------------------------------

/// The codes the document gives as values: `code` in an example body, a
/// `code` property's `const`, and `code` in a response that narrows one.
fn codes_given(node: &Value, found: &mut BTreeSet<String>) {
    match node {
        Value::Object(o) => {
            for (key, value) in o {
                if key == "code" {
                    if let Some(c) = value.as_str().or_else(|| value["const"].as_str()) {
                        found.insert(c.to_owned());
                    }
                }
                codes_given(value, found);
            }
        }
        Value::Array(a) => a.iter().for_each(|v| codes_given(v, found)),
        _ => {}
    }
}

/// `x-codes` of the document's `Problem.code` is the table [`ApiCode`],
/// both ways and with each code's status; every code the document gives
/// as a value is the API's or packet-core's (what reaches the API as-is);
/// no code is both, so a code has one meaning; and the document's text
/// says when each of the API's codes is answered (it names it in
/// `backquotes`).
#[test]
fn the_documents_codes_are_the_api_code_table() {
    let doc = document();
    let listed = at(&doc, "/components/schemas/Problem/properties/code/x-codes")
        .as_object()
        .expect("x-codes maps each code to its status");
    let documented: BTreeMap<&str, u64> = listed
        .iter()
        .map(|(code, status)| {
            let status = status.as_u64();
            (
                code.as_str(),
                status.unwrap_or_else(|| panic!("x-codes: {code}'s status is not a number")),
            )
        })
        .collect();
    let table: BTreeMap<&str, u64> = ApiCode::ALL
        .iter()
        .map(|c| (c.as_str(), u64::from(c.status())))
        .collect();
    let differ = |a: &BTreeMap<&str, u64>, b: &BTreeMap<&str, u64>| -> Vec<String> {
        a.iter()
            .filter(|(code, status)| b.get(*code) != Some(status))
            .map(|(code, status)| format!("{code} ({status})"))
            .collect()
    };
    assert_eq!(
        differ(&table, &documented),
        Vec::<String>::new(),
        "codes of ApiCode that x-codes lacks, or lists with another status"
    );
    assert_eq!(
        differ(&documented, &table),
        Vec::<String>::new(),
        "codes of x-codes that ApiCode lacks, or has with another status"
    );

    for code in ApiCode::ALL {
        assert_eq!(
            packet_core::ErrorCode::from_str_code(code.as_str()),
            None,
            "{code} is packet-core's too"
        );
    }
    let mut given = BTreeSet::new();
    codes_given(&doc, &mut given);
    assert!(
        given.contains("ref_conflict") && given.contains("member_digest_mismatch"),
        "{given:?}"
    );
    let unknown: Vec<&String> = given
        .iter()
        .filter(|c| {
            ApiCode::from_str_code(c).is_none()
                && packet_core::ErrorCode::from_str_code(c).is_none()
        })
        .collect();
    assert_eq!(
        unknown,
        Vec::<&String>::new(),
        "codes the document gives that are neither the API's nor packet-core's"
    );

    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../proto/openapi.yaml"
    ))
    .unwrap();
    let unsaid: Vec<&str> = ApiCode::ALL
        .iter()
        .map(|c| c.as_str())
        .filter(|c| !text.contains(&format!("`{c}`")))
        .collect();
    assert_eq!(
        unsaid,
        Vec::<&str>::new(),
        "codes the document never says when it answers with"
    );
}
