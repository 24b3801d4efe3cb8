//! JSON shapes shared by several commands (proto/cli/*.schema.json). A
//! member is packet-core's [`MemberSummary`].

use packet_core::{exclude, Exclusion, Harness, Kind, MemberSummary};
use serde::Serialize;

/// Manifest totals: packet-core's own type, serialised as the manifest does.
pub use packet_core::Totals;

/// One exclusion record, with the reason for credential rules.
#[derive(Debug, Clone, Serialize)]
pub struct ExclusionReport {
    /// Rule id: a credential rule, `user`, `special-file` or `escaping-symlink`.
    pub rule: String,
    /// The pattern that matched.
    pub pattern: String,
    /// How many paths it excluded.
    pub matched: u64,
    /// Why the rule exists (credential and secret rules).
    pub why: Option<&'static str>,
}

impl From<&Exclusion> for ExclusionReport {
    fn from(e: &Exclusion) -> Self {
        ExclusionReport {
            rule: e.rule.clone(),
            pattern: e.pattern.clone(),
            matched: e.matched,
            why: exclude::CREDENTIAL_RULES
                .iter()
                .find(|r| r.id == e.rule)
                .map(|r| r.why)
                .or_else(|| crate::pack::secrets::rule_what(&e.rule)),
        }
    }
}

/// Harness state in a packet, and where it is on this machine.
#[derive(Debug, Clone, Serialize)]
pub struct HarnessReport {
    /// `codex`, `claude` or `opencode`.
    pub kind: &'static str,
    /// Thread (Codex) or session (Claude Code, OpenCode) id.
    pub thread_id: String,
    /// The model the session log records.
    pub model: Option<String>,
    /// The member holding the session log.
    pub member: String,
    /// The model's provider, when the packet records one (OpenCode).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
    /// The version of the harness that wrote the session log, when the
    /// packet records one (the exporting OpenCode).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// pack: the session log's absolute path on this machine.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source_path: Option<String>,
    /// unpack: whether the harness state was written (for OpenCode:
    /// imported, or found already imported).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub restored: Option<bool>,
    /// unpack: the restored session log's absolute path (null when not
    /// restored, and for OpenCode, whose sessions live in its database).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rollout_path: Option<Option<String>>,
    /// unpack of an OpenCode export: how many messages the session has, so
    /// that restore-check can tell the session apart from another copy.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub messages: Option<u64>,
    /// unpack of an OpenCode export: the id of its last message (null for
    /// a session without messages).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_message: Option<Option<String>>,
}

impl HarnessReport {
    /// As described by the manifest.
    pub fn of(h: &Harness) -> HarnessReport {
        HarnessReport {
            kind: h.kind.as_str(),
            thread_id: h.session_id.clone(),
            model: h.model.clone(),
            member: h.session_log.clone(),
            provider: h.provider.clone(),
            version: h.version.clone(),
            source_path: None,
            restored: None,
            rollout_path: None,
            messages: None,
            last_message: None,
        }
    }

    /// As packed from `source`.
    pub fn packed(h: &Harness, source: Option<&std::path::Path>) -> HarnessReport {
        HarnessReport {
            source_path: source.map(|p| p.display().to_string()),
            ..Self::of(h)
        }
    }
}

/// `drwxr-xr-x`-style permissions of a member as a report lists it.
pub fn mode_string(e: &MemberSummary) -> String {
    let t = match e.kind {
        Kind::Dir => 'd',
        Kind::Symlink => 'l',
        Kind::File => '-',
    };
    let mode = e.mode.bits();
    let mut s = String::with_capacity(10);
    s.push(t);
    for shift in [6, 3, 0] {
        let bits = (mode >> shift) & 7;
        s.push(if bits & 4 != 0 { 'r' } else { '-' });
        s.push(if bits & 2 != 0 { 'w' } else { '-' });
        s.push(if bits & 1 != 0 { 'x' } else { '-' });
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use packet_core::Member;

    #[test]
    fn modes_render_like_ls() {
        let d = Member::dir("workspace");
        assert_eq!(mode_string(&(&d).into()), "drwxr-xr-x");
        let l = Member::symlink("workspace/l", "x");
        assert_eq!(mode_string(&(&l).into()), "lrwxrwxrwx");
        let f = Member::file("workspace/f", 0, packet_core::Digest::of(b""), false);
        assert_eq!(mode_string(&(&f).into()), "-rw-r--r--");
        let x = Member::file("workspace/x", 0, packet_core::Digest::of(b""), true);
        assert_eq!(mode_string(&(&x).into()), "-rwxr-xr-x");
    }
}
