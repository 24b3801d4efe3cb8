//! The shapes handed to JavaScript. Field names are camelCase; sizes and
//! offsets are JSON numbers (exact below 2^53, far above the format's 1 GiB
//! limit).

use packet_core::{
    Error, Findings, Member, MemberSummary, Refusal, RefusalDetails, VerifiedPacket,
};
use serde::Serialize;
use wasm_bindgen::JsValue;

/// Why a binding failed: packet-core refused the packet (or a member read
/// back), or the page called the bindings in a way they rule out.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Failure {
    /// A refusal, shown as packet-core's [`Refusal`].
    Refused(Error),
    /// A bug in the page, never a verdict on the packet: thrown in the same
    /// shape with the code [`BUG`].
    Bug(String),
}

/// The code a bug in the page is thrown with.
pub const BUG: &str = "bug";

impl Failure {
    /// A bug in the page.
    pub fn bug(message: impl Into<String>) -> Failure {
        Failure::Bug(message.into())
    }

    /// The thrown JavaScript value: `{code, path, offset, message, advice}`.
    pub fn to_js(&self) -> JsValue {
        match self {
            Failure::Refused(e) => refusal(e),
            Failure::Bug(message) => to_js(&Refusal {
                code: BUG.into(),
                details: RefusalDetails {
                    path: None,
                    offset: None,
                    message: message.as_str().into(),
                    advice: "this is a bug in the inspector page, not a verdict on the packet: reload the page and try again".into(),
                },
            }),
        }
    }
}

impl From<Error> for Failure {
    fn from(e: Error) -> Self {
        Failure::Refused(e)
    }
}

/// One member of a verified packet: packet-core's [`MemberSummary`] and
/// where the page finds it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MemberView {
    /// Index in the manifest's member list.
    pub index: usize,
    /// Path, type, mode, size, sha256 and target.
    #[serde(flatten)]
    pub member: MemberSummary,
    /// Offset of the first body byte in the packet.
    pub data_offset: u64,
}

impl MemberView {
    /// The view of `entry`, found at `data_offset`.
    pub fn new(index: usize, entry: &Member, data_offset: u64) -> Self {
        MemberView {
            index,
            member: MemberSummary::from(entry),
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
    /// Credential rule id, `user`, `special-file`, `escaping-symlink` or
    /// a secret rule id (then the pattern is the file's path).
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
    pub digest: String,
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
    /// What packet-core's reader found: secrets (never their values), git
    /// settings and hooks that run programs. A report: the packet verified.
    pub findings: Findings,
}

impl ReportView {
    /// The report of a verified packet.
    pub fn new(packet: &VerifiedPacket) -> Self {
        let manifest = &packet.manifest;
        let t = manifest.totals;
        ReportView {
            format: manifest.format.id().to_owned(),
            digest: packet.digest.to_string(),
            size: packet.size,
            harness: manifest.harness.as_ref().map(|h| HarnessView {
                kind: h.kind.as_str(),
                model: h.model.clone(),
                rollout: h.session_log.clone(),
                thread_id: h.session_id.clone(),
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
                .zip(&packet.data_offsets)
                .map(|((i, m), &at)| MemberView::new(i, m, at))
                .collect(),
            findings: packet.findings.clone(),
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

/// A refusal as a thrown JavaScript value, in packet-core's [`Refusal`]
/// shape.
pub fn refusal(e: &Error) -> JsValue {
    to_js(e)
}
