//! A /2 push (docs/transfer.md, "Delta push"). Every decision about what a
//! pushed packet is made of is pure and tests natively; the modules marked
//! (wasm) move a push's bytes and rows between the request, R2 and D1 and
//! call them, and `api/pushes.rs` answers:
//!
//! | module | holds |
//! |---|---|
//! | [`request`] | what a push's requests may carry: a create's query, the decoders' limits, the bodies' caps |
//! | [`at_hand`] | what the push may use: its bases' bodies and chunks, its own frames |
//! | [`manifest`] | `packet.json` assembled from its chunks and checked by packet-core; a create body checked once it is in |
//! | [`wanted`] | what a push lacks (its status) and may be sent; a request's frames checked against it |
//! | [`parts`] | a request's frames placed, the rows of what it stored, its records read again, the parts a look lists |
//! | [`arrival`] | a frame as it arrives: decoded, hashed, a whole body screened |
//! | [`in_order`] | a large body proven as its chunks arrive in its recipe's order |
//! | [`recipes`] | the recipes received, checked and resolved into chunks |
//! | [`plan`] | where each body comes from, and what is missing |
//! | [`prove`] | proving a body from its chunks (from a base version's end state when it grew) |
//! | [`gate`] | the invariant: the new layout is built from proofs only |
//! | [`complete`] | from the plan to the gate: what to read, the findings |
//! | [`storing`] | how a verified packet is written: its layout's chunks, compaction, its root |
//! | [`records`] | what a request's frames left behind |
//! | [`opened`] | the isolate's copy of the last push's manifest, parsed |
//! | `state` | an open push: found for its creator, read from R2 and D1, its recipes updated, discarded (wasm) |
//! | `create` | `POST /v1/pushes`: the create body read, the push stored at once or left open (wasm) |
//! | `receive` | a request's frames placed; a part read, packed and recorded (wasm) |
//! | `finish` | `complete`: what is left proven, the packet laid out, stored and indexed (wasm) |

pub mod arrival;
pub mod at_hand;
pub mod complete;
pub mod gate;
pub mod in_order;
pub mod manifest;
pub mod opened;
pub mod parts;
pub mod plan;
pub mod prove;
pub mod recipes;
pub mod records;
pub mod request;
pub mod storing;
pub mod wanted;

#[cfg(target_arch = "wasm32")]
pub mod create;
#[cfg(target_arch = "wasm32")]
pub mod finish;
#[cfg(target_arch = "wasm32")]
pub mod receive;
#[cfg(target_arch = "wasm32")]
pub mod state;

#[cfg(all(test, not(target_arch = "wasm32")))]
mod fixtures;
#[cfg(all(test, not(target_arch = "wasm32")))]
mod tests;

#[cfg(target_arch = "wasm32")]
use crate::problem::internal;
