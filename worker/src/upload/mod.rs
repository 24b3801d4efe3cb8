//! A packet uploaded whole (docs/worker.md, "Multipart uploads"): in one
//! request (`PUT /v1/packets/{digest}`), or in parts (`/v1/uploads/…`)
//! that R2 assembles into one object. Either way the packet's bytes are
//! verified by packet-core on their way into, or in, the object that then
//! is the packet's, and its row is written only once they pass. What the
//! requests may carry is pure; the modules marked (wasm) move the bytes
//! and rows between the request, R2 and D1, and `api/packets.rs` and
//! `api/uploads.rs` answer:
//!
//! | module | holds |
//! |---|---|
//! | [`request`] | a packet sent in one request held to the single upload's limit; a create body read |
//! | `single` | `PUT /v1/packets/{digest}`: the body streamed through packet-core into an object of its own, the packet indexed (wasm) |
//! | `parts` | a multipart upload: found, opened in R2 and D1, a part streamed into it, discarded, completed (assembled, verified once, indexed) (wasm) |

pub mod request;

#[cfg(target_arch = "wasm32")]
pub mod parts;
#[cfg(target_arch = "wasm32")]
pub mod single;
