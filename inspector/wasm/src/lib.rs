//! # packet-inspector-wasm
//!
//! Thin wasm-bindgen bindings over `packet-core` for the browser packet
//! inspector (`inspector/web/`). Every format rule stays in `packet-core`;
//! this crate only drives its streaming [`packet_core::Reader`] and turns
//! what it learns into plain JavaScript objects.
//!
//! | module | holds |
//! |---|---|
//! | [`view`] | the JSON shapes handed to the page: report, members, refusals |
//! | [`verifier`] | [`Verifier`]: a `File`'s chunks in, progress and a verified [`Packet`] out; [`PacketHasher`] for the whole-packet digest on another thread; [`is_digest`], what is a digest |
//! | [`member`] | [`MemberCheck`]: re-hashing one member read back by range; [`classify`] for previews |
//! | [`compare`] | member diff of two verified packets and a line diff of two texts |
//!
//! From JavaScript (a Web Worker):
//!
//! ```js
//! const verifier = new Verifier(null);
//! for (let at = 0; at < file.size; at += CHUNK) {
//!   const progress = verifier.push(new Uint8Array(await file.slice(at, at + CHUNK).arrayBuffer()));
//! }
//! const packet = verifier.finish();   // throws a refusal {code, path, offset, message, advice}
//! const report = packet.report();     // digest, size, harness, totals, members with data offsets
//! ```
#![deny(missing_docs)]
#![forbid(unsafe_code)]

pub mod compare;
pub mod member;
pub mod verifier;
pub mod view;

pub use compare::{compare_packets, line_diff};
pub use member::{classify, MemberCheck};
pub use verifier::{is_digest, Packet, PacketHasher, Verifier};
