//! Completing a push (docs/transfer.md, "Delta push", step 4), pure: from
//! the plan, every body is given to the [`Gate`] with how it is proven, and
//! the bodies that need reading are listed as tasks, each a [`Prover`] the
//! caller feeds from R2 (only bodies nothing proved yet, and bodies of old
//! bases to screen for findings; never a body a base holds to prove it,
//! nor one proven as its chunks arrived, [`Arrived`]).
//! The findings of the packet follow from its bodies' findings (kept by the
//! bases, found as frames arrived, found by the provers).

use std::collections::HashMap;

use packet_core::assembled::{Assembly, Proof};
use packet_core::secrets::Scanner;
use packet_core::{scan_class, Body, BodyFindings, Error, Findings, VerifiedPacket};

use super::at_hand::AtHand;
use super::gate::Gate;
use super::in_order::Arrived;
use super::plan::{Plan, Source};
use super::prove::{End, ProveError, Proven, Prover};
use crate::storage::findings::{BodyClass, KeptFindings};
use crate::storage::layout::Layout;
use crate::storage::packs::PackTable;

/// What a body's members are: each scan class with the path of one member
/// of that class.
pub fn classes_of(manifest: &packet_core::Manifest) -> HashMap<Body, Vec<(u8, String)>> {
    let mut out: HashMap<Body, Vec<(u8, String)>> = HashMap::new();
    for m in &manifest.members {
        if let Some(b) = m.body() {
            let class = scan_class(&m.path);
            let list = out.entry(b).or_default();
            if !list.iter().any(|(c, _)| *c == class) {
                list.push((class, m.path.to_string()));
            }
        }
    }
    out
}

fn refs(list: &[(u8, String)]) -> Vec<(u8, &str)> {
    list.iter().map(|(c, p)| (*c, p.as_str())).collect()
}

/// A completed push: the verified packet, its layout, its bodies' findings
/// and the end states of the bodies hashed.
pub type Finished = (VerifiedPacket, Layout, KeptFindings, Vec<(Body, End)>);

/// A body to read: to prove it, or (a body a base holds) to screen it.
pub struct Task {
    /// The prover it is fed to.
    pub prover: Prover,
    /// Whether it proves (else it only screens).
    pub proves: bool,
}

/// A push being completed.
pub struct Completion {
    gate: Gate,
    classes: HashMap<Body, Vec<(u8, String)>>,
    findings: HashMap<BodyClass, BodyFindings>,
    ends: Vec<(Body, End)>,
}

impl Completion {
    /// Starts completing the packet `assembly` checked, planned as `plan`
    /// over `at_hand`. `arrived` are the findings of bodies that arrived as
    /// frames (screened then; a class not listed held nothing), `early`
    /// the bodies proven as their chunks arrived, `ends` the kept end
    /// states of base bodies a body grew from. Returns the completion and
    /// the bodies to read.
    pub fn start(
        assembly: Assembly,
        plan: &Plan,
        at_hand: &AtHand,
        (arrived, early): (
            &HashMap<BodyClass, BodyFindings>,
            &HashMap<Body, Vec<Arrived>>,
        ),
        ends: &HashMap<Body, End>,
        scanner: &Scanner,
    ) -> Result<(Completion, Vec<Task>), Error> {
        let classes = classes_of(assembly.manifest());
        let mut gate = Gate::new(assembly);
        let mut findings = HashMap::new();
        let mut tasks = Vec::new();
        let mut hashed = Vec::new();
        let none = Vec::new();
        for (body, source) in &plan.bodies {
            let mine = classes.get(body).unwrap_or(&none);
            match source {
                Source::Base(chunks) => {
                    gate.from_base(*body, chunks.clone())?;
                    let unknown: Vec<(u8, String)> = mine
                        .iter()
                        .filter(|(c, _)| match at_hand.findings(*body, *c) {
                            Some(f) => {
                                findings.insert((*body, *c), f.clone());
                                false
                            }
                            None => true,
                        })
                        .cloned()
                        .collect();
                    if !unknown.is_empty() {
                        tasks.push(Task {
                            prover: Prover::scan_only(
                                *body,
                                chunks.clone(),
                                &refs(&unknown),
                                scanner,
                            ),
                            proves: false,
                        });
                    }
                }
                Source::Arrived(chunk) => {
                    // Hashed against its name (the body's) as it arrived.
                    gate.from_base(*body, vec![*chunk])?;
                    for (c, _) in mine {
                        let f = arrived.get(&(*body, *c)).cloned().unwrap_or_default();
                        findings.insert((*body, *c), f);
                    }
                }
                Source::Hash(h) => {
                    let proven = early
                        .get(body)
                        .and_then(|list| list.iter().find(|a| a.proves(&h.chunks, mine)));
                    if let Some(a) = proven {
                        // Hashed from exactly these chunks as they arrived.
                        hashed.push(Proven {
                            body: *body,
                            chunks: h.chunks.clone(),
                            proof: Some(Proof::stored(*body)),
                            end: Some(a.end.clone()),
                            findings: a.findings.clone(),
                        });
                        continue;
                    }
                    let grown = h.grown_from.as_ref().and_then(|from| {
                        let end = ends.get(&from.base)?;
                        Prover::grown(*body, h, from, end, &refs(mine), scanner)
                    });
                    let prover = grown.unwrap_or_else(|| {
                        Prover::full(*body, h.chunks.clone(), &refs(mine), scanner)
                    });
                    tasks.push(Task {
                        prover,
                        proves: true,
                    });
                }
                Source::Missing => {}
            }
        }
        let mut completion = Completion {
            gate,
            classes,
            findings,
            ends: Vec::new(),
        };
        for p in hashed {
            completion.done(p)?;
        }
        Ok((completion, tasks))
    }

    /// A prover to start again from scratch: `prover` found its base's tail
    /// was not the start of the new bytes.
    pub fn again(&self, prover: &Prover, scanner: &Scanner) -> Prover {
        let body = prover.body();
        let none = Vec::new();
        let mine = self.classes.get(&body).unwrap_or(&none);
        Prover::full(body, prover.chunks().to_vec(), &refs(mine), scanner)
    }

    /// A task's result.
    pub fn done(&mut self, proven: Proven) -> Result<(), Error> {
        self.gate.hashed(&proven)?;
        for (c, f) in &proven.findings {
            self.findings.insert((proven.body, *c), f.clone());
        }
        if let Some(end) = proven.end {
            self.ends.push((proven.body, end));
        }
        Ok(())
    }

    /// A refusal of a task: packet-core's error at the body's first member.
    pub fn refused(&self, body: Body, e: ProveError) -> Error {
        match e {
            ProveError::Body(e) => self.gate.assembly().refuse_body(body, e),
            ProveError::Differs => self.gate.assembly().refuse_body(
                body,
                Error::new(
                    packet_core::ErrorCode::MemberDigestMismatch,
                    "the body does not continue the base body it grew from",
                ),
            ),
        }
    }

    /// The manifest.
    pub fn manifest(&self) -> &packet_core::Manifest {
        self.gate.assembly().manifest()
    }

    /// The verified packet, its layout over `packs`, its bodies' findings
    /// and the end states of the bodies hashed, once every body is proven.
    pub fn finish(self, packs: PackTable) -> Result<Finished, Error> {
        let manifest = self.gate.assembly().manifest();
        let kept = KeptFindings::from_bodies(manifest, |bc| self.findings.get(&bc).cloned());
        let findings: Findings = kept.to_findings(manifest);
        let (verified, layout) = self.gate.finish(packs, findings)?;
        Ok((verified, layout, kept, self.ends))
    }
}
