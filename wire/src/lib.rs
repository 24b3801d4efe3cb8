//! # pillbox-wire
//!
//! The JSON bodies of the pillbox store's HTTP API (`proto/openapi.yaml`)
//! as serde types. The Worker serializes its answers from them and
//! deserializes requests into them; the CLI does the opposite. One
//! definition for both ends means a field cannot be renamed, added or made
//! optional on one side only, and `tests/openapi.rs` ties every type to the
//! document's schema for its route.
//!
//! Conventions, as the Worker sends them and the document says:
//! - a field of type `Option<T>` is always sent, `null` when absent
//!   (`next_cursor`, `harness`, `path`, `offset`, ...); the only fields sent
//!   or left out are [`Problem::current`] and [`Problem::missing`];
//! - answers ignore fields they do not know (a newer store may add some);
//!   requests refuse them (`deny_unknown_fields`), so a misspelt field is a
//!   `400 body_invalid`, not silently dropped;
//! - digests are the `sha256:<hex>` text: a request's digest is checked by
//!   the Worker with packet-core (a malformed one is `400 digest_syntax`,
//!   not a serde error), an answer's digest is the one the index holds.
//!
//! ```
//! use pillbox_wire::{ErrorBody, Problem};
//!
//! let body = r#"{"error":{"code":"ref_conflict","path":null,"offset":null,
//!     "message":"m","advice":"a","current":null}}"#;
//! let parsed: ErrorBody = serde_json::from_str(body).unwrap();
//! assert_eq!(parsed.error.code(), "ref_conflict");
//! // `current: null` (the ref does not exist) is not the same as no `current`.
//! assert_eq!(parsed.error.current, Some(None));
//! ```
//!
//! | module | routes |
//! |---|---|
//! | [`info`] | `GET /v1` |
//! | [`packets`] | `GET /v1/packets`, `PUT /v1/packets/{digest}` (and the answers that say a packet is stored) |
//! | [`uploads`] | `/v1/uploads`, its parts and `complete` |
//! | [`refs`] | `/v1/refs`, `/v1/refs/{name}` |
//! | [`search`] | `GET /v1/search` |
//! | [`pushes`] | `/v1/pushes/…`, and a packet's recipes and chunks |
//! | [`chunks`] | the chunk batch, `application/x-pillbox-chunks` (a binary body) |
//! | [`problem`] | every refusal |

#![no_std]
#![deny(missing_docs)]

extern crate alloc;

pub mod chunks;
pub mod info;
pub mod packets;
pub mod problem;
pub mod pushes;
pub mod refs;
pub mod search;
pub mod uploads;

pub use info::{Info, PartSizes, ReadAccess, API_VERSION, SERVICE, TRANSFER_DELTA, TRANSFER_WHOLE};
pub use packets::{Harness, Packet, PacketFacts, PacketList, Stored};
pub use problem::{ErrorBody, Problem};
pub use pushes::{
    ChunkRequest, Chunking, MissingChunks, PartLimits, PartReceived, Push, PushPart, Recipe,
    RecipeChunk, Recipes,
};
pub use refs::{PutRef, Ref, RefChange, RefList};
pub use search::{SearchMatch, SearchResults};
pub use uploads::{CreateUpload, PartStored, ReceivedPart, Upload};
