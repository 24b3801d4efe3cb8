//! What a stored packet's bodies hold (packet-core's findings: secrets by
//! line, git settings that run programs), kept with the packet (its D1 row,
//! only when there is something) so that a push building on it knows the
//! findings of every body it reuses without reading it: bodies with the
//! same bytes and the same [`scan_class`] have the same findings. Only the
//! findings of bodies are kept; those the manifest alone shows (credential
//! names, hooks) follow from the manifest.

use std::cell::RefCell;
use std::collections::HashMap;

use packet_core::secrets::SECRET_RULES;
use packet_core::{scan_class, Body, BodyFindings, Findings, Manifest};
use serde::{Deserialize, Serialize};

/// A body and the class its findings depend on.
pub type BodyClass = (Body, u8);

/// One body's findings, as text (in a push part's record).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeptBody {
    secrets: Vec<(u64, String)>,
    git: Vec<(u64, String, String)>,
}

impl KeptBody {
    /// `found` as text.
    pub fn of(found: &BodyFindings) -> KeptBody {
        KeptBody {
            secrets: found
                .secrets
                .iter()
                .map(|(l, r)| (*l, r.to_string()))
                .collect(),
            git: found
                .git
                .iter()
                .map(|(l, s, w)| (*l, s.clone(), w.to_string()))
                .collect(),
        }
    }

    /// The findings again.
    pub fn findings(&self) -> BodyFindings {
        BodyFindings {
            secrets: self
                .secrets
                .iter()
                .map(|(l, r)| (*l, interned(r)))
                .collect(),
            git: self
                .git
                .iter()
                .map(|(l, s, w)| (*l, s.clone(), interned(w)))
                .collect(),
        }
    }
}

/// The findings of a packet's bodies, by member path.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeptFindings {
    /// `(path, line, rule id)` of each secret found in a body.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    secrets: Vec<(String, u64, String)>,
    /// `(path, line, setting, why)` of each git setting found in a body.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    git: Vec<(String, u64, String, String)>,
}

thread_local! {
    static TEXTS: RefCell<Vec<&'static str>> = const { RefCell::new(Vec::new()) };
}

/// `text` as a `&'static str`, as packet-core's findings hold them: the
/// rule ids and reasons are packet-core's own constants, so a handful of
/// distinct texts are made once per isolate.
fn interned(text: &str) -> &'static str {
    if let Some(r) = SECRET_RULES.iter().find(|r| r.id == text) {
        return r.id;
    }
    TEXTS.with(|t| {
        let mut t = t.borrow_mut();
        if let Some(s) = t.iter().find(|s| **s == text) {
            return *s;
        }
        let s: &'static str = Box::leak(text.to_string().into_boxed_str());
        t.push(s);
        s
    })
}

impl KeptFindings {
    /// What a reader reported of a packet's bodies.
    pub fn of(findings: &Findings) -> KeptFindings {
        KeptFindings {
            secrets: findings
                .secrets
                .iter()
                .filter_map(|f| Some((f.path.clone(), f.line?, f.rule.to_string())))
                .collect(),
            git: findings
                .git
                .iter()
                .filter_map(|f| {
                    Some((
                        f.path.clone(),
                        f.line?,
                        f.setting.clone(),
                        f.why.to_string(),
                    ))
                })
                .collect(),
        }
    }

    /// Whether its bodies hold nothing.
    pub fn is_empty(&self) -> bool {
        self.secrets.is_empty() && self.git.is_empty()
    }

    /// The text kept in the row (`None`: nothing found).
    pub fn to_text(&self) -> Option<String> {
        (!self.is_empty()).then(|| serde_json::to_string(self).unwrap_or_default())
    }

    /// Reads the text kept in a row (`None` for no text: nothing found).
    pub fn from_text(text: Option<&str>) -> KeptFindings {
        text.and_then(|t| serde_json::from_str(t).ok())
            .unwrap_or_default()
    }

    /// What the body of the member at `path` holds.
    pub fn of_path(&self, path: &str) -> BodyFindings {
        BodyFindings {
            secrets: self
                .secrets
                .iter()
                .filter(|s| s.0 == path)
                .map(|s| (s.1, interned(&s.2)))
                .collect(),
            git: self
                .git
                .iter()
                .filter(|g| g.0 == path)
                .map(|g| (g.1, g.2.clone(), interned(&g.3)))
                .collect(),
        }
    }

    /// The packet's findings, as a reader reports them.
    pub fn to_findings(&self, manifest: &Manifest) -> Findings {
        let mut found = self.by_path();
        Findings::assemble(manifest, |i| {
            found.remove(manifest.members[i].path.as_str())
        })
    }

    fn by_path(&self) -> HashMap<&str, BodyFindings> {
        let mut out: HashMap<&str, BodyFindings> = HashMap::new();
        for s in &self.secrets {
            out.entry(s.0.as_str())
                .or_default()
                .secrets
                .push((s.1, interned(&s.2)));
        }
        for g in &self.git {
            out.entry(g.0.as_str())
                .or_default()
                .git
                .push((g.1, g.2.clone(), interned(&g.3)));
        }
        out
    }

    /// The findings of every (body, class) of `manifest`, the packet these
    /// are kept for: empty for a body that holds nothing.
    pub fn by_body(&self, manifest: &Manifest) -> HashMap<BodyClass, BodyFindings> {
        let found = self.by_path();
        let mut out = HashMap::new();
        for m in &manifest.members {
            if let Some(body) = m.body() {
                out.entry((body, scan_class(&m.path)))
                    .or_insert_with(|| found.get(m.path.as_str()).cloned().unwrap_or_default());
            }
        }
        out
    }

    /// The findings of a packet from those of its bodies.
    pub fn from_bodies(
        manifest: &Manifest,
        mut body: impl FnMut(BodyClass) -> Option<BodyFindings>,
    ) -> KeptFindings {
        let mut kept = KeptFindings::default();
        for m in &manifest.members {
            let Some(b) = m.body() else { continue };
            let Some(found) = body((b, scan_class(&m.path))) else {
                continue;
            };
            for (line, rule) in found.secrets {
                kept.secrets
                    .push((m.path.to_string(), line, rule.to_string()));
            }
            for (line, setting, why) in found.git {
                kept.git
                    .push((m.path.to_string(), line, setting, why.to_string()));
            }
        }
        kept
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use packet_core::in_memory::{build, Source};
    use packet_core::{reader, Limits, ReaderOptions};

    #[test]
    fn kept_findings_give_back_what_the_reader_reports() {
        let file = |path: &str, contents: &[u8]| Source::File {
            path: path.into(),
            contents: contents.to_vec(),
            executable: false,
        };
        let built = build(
            &[
                Source::Dir {
                    path: "workspace".into(),
                },
                file("workspace/.env", b"A=1\n"),
                Source::Dir {
                    path: "workspace/.git".into(),
                },
                file("workspace/.git/config", b"[core]\n\tfsmonitor = ./watch\n"),
                file(
                    "workspace/key.txt",
                    b"one\n-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZWQyNTUxOQAAACDvYJ4uPlZ8z0m6VbW7X3GbMg7kU1rQ5FfJ6rM4vQxwAAAAKAAAAAAAAA\n-----END OPENSSH PRIVATE KEY-----\n",
                ),
                file("workspace/plain.txt", b"nothing here\n"),
            ],
            None,
            vec![],
            &Limits::FORMAT,
        )
        .unwrap();
        let read = reader::verify(&built.bytes, ReaderOptions::default()).unwrap();
        let kept = KeptFindings::of(&read.findings);
        let text = kept.to_text();
        let back = KeptFindings::from_text(text.as_deref());
        assert_eq!(back, kept);
        assert!(!kept.is_empty(), "{:?}", read.findings);
        assert_eq!(back.to_findings(&read.manifest), read.findings);
        let bodies = back.by_body(&read.manifest);
        let again = KeptFindings::from_bodies(&read.manifest, |bc| bodies.get(&bc).cloned());
        assert_eq!(again, kept);
        assert!(KeptFindings::from_text(None).is_empty());
        assert_eq!(KeptFindings::default().to_text(), None);
    }
}
