//! The shapes handed to JavaScript. Field names are camelCase; sizes and
//! offsets are JSON numbers (exact below 2^53, far above the format's 1 GiB
//! limit).

use packet_core::{Entry, Error, Manifest};
use serde::Serialize;
use wasm_bindgen::JsValue;

/// A refusal as the page shows it: the stable code unchanged, the member or
/// header involved, and what to do.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RefusalView {
    /// Stable snake_case code (`ErrorCode::as_str`).
    pub code: &'static str,
    /// What was found.
    pub message: String,
    /// What a person can do about it.
    pub advice: &'static str,
    /// The member path involved, if any.
    pub path: Option<String>,
    /// Byte offset in the packet where the problem starts, if known.
    pub offset: Option<u64>,
}

impl From<&Error> for RefusalView {
    fn from(e: &Error) -> Self {
        RefusalView {
            code: e.code().as_str(),
            message: e.message().to_string(),
            advice: e.advice(),
            path: e.path().map(str::to_string),
            offset: e.offset(),
        }
    }
}

/// One member of a verified packet.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MemberView {
    /// Index in the manifest's member list.
    pub index: usize,
    /// Canonical member path.
    pub path: String,
    /// `file`, `dir` or `symlink`.
    #[serde(rename = "type")]
    pub kind: &'static str,
    /// `0644`, `0755` or `0777`.
    pub mode: String,
    /// Body size (files).
    pub size: u64,
    /// Body sha256 as lowercase hex (files).
    pub sha256: Option<String>,
    /// Link target (symlinks).
    pub target: Option<String>,
    /// Offset of the first body byte in the packet.
    pub data_offset: u64,
}

impl MemberView {
    /// The view of `entry`, found at `data_offset`.
    pub fn new(index: usize, entry: &Entry, data_offset: u64) -> Self {
        MemberView {
            index,
            path: entry.path.clone(),
            kind: entry.kind.as_str(),
            mode: format!("{:04o}", entry.mode),
            size: entry.size,
            sha256: entry.sha256.map(|d| d.hex().to_string()),
            target: entry.target.clone(),
            data_offset,
        }
    }
}

/// The harness descriptor.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HarnessView {
    /// `codex` or `claude`.
    pub kind: &'static str,
    /// Model recorded in the session log, if any.
    pub model: Option<String>,
    /// Member holding the session log.
    pub rollout: String,
    /// Thread or session id.
    pub thread_id: String,
}

/// One exclusion rule applied at pack time.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ExclusionView {
    /// Paths it excluded.
    pub matched: u64,
    /// The pattern.
    pub pattern: String,
    /// Credential rule id, `user` or `special-file`.
    pub rule: String,
}

/// Counts and bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TotalsView {
    /// Sum of file sizes.
    pub bytes: u64,
    /// Directory members.
    pub directories: u64,
    /// File members.
    pub files: u64,
    /// All members.
    pub members: u64,
    /// Symlink members.
    pub symlinks: u64,
}

/// Everything the page shows about a verified packet.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ReportView {
    /// The format id.
    pub format: String,
    /// `sha256:<hex>` of the whole packet.
    pub digest: Option<String>,
    /// Packet size in bytes.
    pub size: u64,
    /// Harness state carried, if any.
    pub harness: Option<HarnessView>,
    /// Exclusions applied at pack time.
    pub exclusions: Vec<ExclusionView>,
    /// Totals from the manifest (checked by the reader).
    pub totals: TotalsView,
    /// Members in archive order.
    pub members: Vec<MemberView>,
}

impl ReportView {
    /// The report of a verified manifest.
    pub fn new(
        manifest: &Manifest,
        digest: Option<String>,
        size: u64,
        data_offsets: &[u64],
    ) -> Self {
        let t = manifest.totals;
        ReportView {
            format: manifest.format.clone(),
            digest,
            size,
            harness: manifest.harness.as_ref().map(|h| HarnessView {
                kind: h.kind.as_str(),
                model: h.model.clone(),
                rollout: h.rollout.clone(),
                thread_id: h.thread_id.clone(),
            }),
            exclusions: manifest
                .exclusions
                .iter()
                .map(|e| ExclusionView {
                    matched: e.matched,
                    pattern: e.pattern.clone(),
                    rule: e.rule.clone(),
                })
                .collect(),
            totals: TotalsView {
                bytes: t.bytes,
                directories: t.directories,
                files: t.files,
                members: t.members,
                symlinks: t.symlinks,
            },
            members: manifest
                .members
                .iter()
                .enumerate()
                .map(|(i, e)| MemberView::new(i, e, data_offsets.get(i).copied().unwrap_or(0)))
                .collect(),
        }
    }
}

/// Serialises `value` and parses it into a plain JavaScript object.
pub fn to_js<T: Serialize>(value: &T) -> JsValue {
    match serde_json::to_string(value) {
        Ok(s) => js_sys::JSON::parse(&s).unwrap_or(JsValue::NULL),
        Err(_) => JsValue::NULL,
    }
}

/// A refusal as a thrown JavaScript value.
pub fn refusal(e: &Error) -> JsValue {
    to_js(&RefusalView::from(e))
}
