//! # pillbox-wire
//!
//! The bodies of the pillbox store's HTTP API (`proto/openapi.yaml`): the
//! JSON ones as serde types, and the binary ones (chunk batches, recipes,
//! a push's create body) as streaming codecs, with the chunking table they
//! follow. The Worker serializes its answers from them and
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
//! | [`packets`] | `GET /v1/packets`, `PUT /v1/packets/{digest}` (and the answers that say a packet is stored), `GET /v1/digests/{prefix}` |
//! | [`uploads`] | `/v1/uploads`, its parts and `complete` |
//! | [`refs`] | `/v1/refs`, `/v1/refs/{name}`, `/v1/ref-history/{name}` |
//! | [`search`] | `GET /v1/search` |
//! | [`pushes`] | `/v1/pushes/…` (JSON), and the chunk request of `POST /v1/packets/{digest}/chunks` |
//! | [`chunking`] | how bodies and `packet.json` are cut and chunks compressed (the one table) |
//! | [`chunks`] | the chunk batch, `application/x-pillbox-chunks` (binary) |
//! | [`frames`] | a chunk frame's shape, read from its headers before it is decoded (the Worker's and the CLI's one check) |
//! | [`recipes`] | recipes (`application/x-pillbox-recipes`) and a push's create body (`application/x-pillbox-push`), binary |
//! | [`binary`] | the binary bodies' refusals and their codes |
//! | [`problem`] | every refusal |
//! | [`codes`] | the API's own refusal codes, with their statuses (the one table) |

#![no_std]
#![deny(missing_docs)]

extern crate alloc;

pub mod binary;
pub mod chunking;
pub mod chunks;
pub mod codes;
pub mod frames;
pub mod info;
pub mod packets;
pub mod problem;
pub mod pushes;
pub mod recipes;
pub mod refs;
pub mod search;
pub mod uploads;

pub use codes::ApiCode;
pub use info::{Info, PartSizes, ReadAccess, API_VERSION, SERVICE, TRANSFER_DELTA, TRANSFER_WHOLE};
pub use packets::{DigestMatches, DigestPrefix, Harness, Packet, PacketFacts, PacketList, Stored};
pub use problem::{ErrorBody, Problem};
pub use pushes::{
    CdcSizes, ChunkRequest, Chunking, MissingChunks, PartLimits, PartReceived, Push, PushPart,
};
pub use refs::{ListedRef, PutRef, Ref, RefChange, RefHistory, RefList, RefMove};
pub use search::{SearchMatch, SearchResults};
pub use uploads::{CreateUpload, PartStored, ReceivedPart, Upload};
