//! The one gate a pushed packet passes before it can become visible
//! (docs/transfer.md, "The invariant"): **every member's bytes, as the store
//! will serve them, have the size and sha256 its manifest states.**
//!
//! The new packet's layout is built here and nowhere else, from proofs
//! only: each distinct body is given the chunks it will be served from
//! together with how it was proven, either by a base that holds the same
//! body (same sha256 and size, whose chunks it takes) or by hashing exactly
//! those chunks' raw bytes ([`Proven`]). Chunks must add up to the body's
//! size (a layout neither drops nor invents bytes) and a body of one chunk
//! is that chunk. [`Gate::finish`] is packet-core's
//! [`Assembly::finish`](packet_core::assembled::Assembly::finish): it
//! refuses a packet with any body unproven.

use std::collections::HashMap;

use packet_core::assembled::{Assembly, Proof};
use packet_core::{Body, Error, ErrorCode, Findings, VerifiedPacket};

use super::prove::Proven;
use crate::storage::chunk::ChunkRef;
use crate::storage::layout::{Layout, LayoutBuilder};
use crate::storage::packs::PackTable;

/// A packet being proven body by body.
pub struct Gate {
    assembly: Assembly,
    served: HashMap<Body, Vec<ChunkRef>>,
}

fn wrong(assembly: &Assembly, body: Body, message: String) -> Error {
    assembly.refuse_body(body, Error::new(ErrorCode::MemberDigestMismatch, message))
}

impl Gate {
    /// The gate of the packet `assembly` checked (its manifest, digest and
    /// rules).
    pub fn new(assembly: Assembly) -> Gate {
        Gate {
            assembly,
            served: HashMap::new(),
        }
    }

    /// The manifest and what is left to prove.
    pub fn assembly(&self) -> &Assembly {
        &self.assembly
    }

    fn accept(&mut self, body: Body, chunks: Vec<ChunkRef>, proof: Proof) -> Result<(), Error> {
        if proof.body() != body {
            return Err(wrong(
                &self.assembly,
                body,
                format!("a proof of another body ({} bytes)", proof.body().size),
            ));
        }
        let total: u64 = chunks.iter().map(|c| c.raw).sum();
        if total != body.size {
            return Err(wrong(
                &self.assembly,
                body,
                format!(
                    "its chunks add up to {total} bytes, the manifest says {}",
                    body.size
                ),
            ));
        }
        if let [one] = chunks.as_slice() {
            if one.sha256 != body.sha256 {
                return Err(wrong(
                    &self.assembly,
                    body,
                    format!("its one chunk is named {}", one.sha256.hex()),
                ));
            }
        }
        if !self.assembly.needs(body) {
            // Proven already (or not the packet's): nothing to add.
            return Ok(());
        }
        self.assembly.prove(proof);
        self.served.insert(body, chunks);
        Ok(())
    }

    /// A body a base of the push holds: the same sha256 and size, proven
    /// when that base was stored; it is served from the base's chunks.
    pub fn from_base(&mut self, body: Body, chunks: Vec<ChunkRef>) -> Result<(), Error> {
        self.accept(body, chunks, Proof::stored(body))
    }

    /// A body hashed from exactly the chunks it is served from.
    pub fn hashed(&mut self, proven: &Proven) -> Result<(), Error> {
        let Some(proof) = proven.proof else {
            return Ok(());
        };
        self.accept(proven.body, proven.chunks.clone(), proof)
    }

    /// The verified packet and its layout over `packs` (the slots the
    /// chunks name), once every body is proven.
    pub fn finish(
        self,
        packs: PackTable,
        findings: Findings,
    ) -> Result<(VerifiedPacket, Layout), Error> {
        let mut b = LayoutBuilder::new(packs);
        for m in &self.assembly.manifest().members {
            if let Some(body) = m.body() {
                for c in self.served.get(&body).map(Vec::as_slice).unwrap_or(&[]) {
                    b.push(*c);
                }
            }
            b.end_member();
        }
        let verified = self.assembly.finish(findings)?;
        Ok((verified, b.finish()))
    }
}
