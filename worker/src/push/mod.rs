//! A /2 push (docs/transfer.md, "Delta push"), pure, so that every
//! decision about what a pushed packet is made of tests natively:
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

#[cfg(all(test, not(target_arch = "wasm32")))]
mod tests;
