//! How the store keeps packets (docs/transfer.md, "Storage at the edge"):
//! chunks in packs, as they were sent (zstd frames kept as they are), and
//! per packet a small root naming the chunks of its `packet.json` and of
//! its layout stream, which are chunks like any other, so that a packet
//! costs what changed since its base.
//!
//! | module | holds |
//! |---|---|
//! | [`keys`] | every R2 key the Worker writes (pure) |
//! | [`chunk`] | [`chunk::ChunkRef`]: where a chunk lies and what it holds; a `chunks` row, held or new (pure) |
//! | [`packs`] | a packet's pack table, slots stable from a packet to the next (pure) |
//! | [`layout`] | where each body's chunks lie: the layout stream, and the forms read from packets stored before (pure) |
//! | [`root`] | a packet's root (pure) |
//! | [`stored`] | a stored packet, whatever its form, as reads and pushes see it: a member's file and where its body is read (pure) |
//! | [`findings`] | what a stored packet's bodies hold, kept with it (pure) |
//! | [`frames`] | a chunk's stored bytes and its raw bytes: zstd, bounded (pure) |
//! | [`cut`] | FastCDC at the edge, as clients cut (pure) |
//! | [`compact`] | merging a new packet's small packs into its own (pure) |
//! | [`rebuild`] | a stored packet's bytes, any range, as R2 range reads (pure) |
//! | [`fetch`] | what a chunk answer sends: the chunks asked for, within its bounds, and its table (pure) |
//! | [`sql`] | named SQL parameters turned into D1's numbered ones (pure) |
//! | [`index`] | the D1 tables, one file each: the rows and the answers built from them (pure), the statements with named parameters (wasm) |
//! | `compacting` | compaction's reads of a new packet's small packs, from R2 (wasm) |
//! | `stream` | how a packet's bytes reach R2: streams between requests, packet-core's reader and R2 puts (wasm) |
//! | `load` | stored packets fetched from R2 and D1, kept in the isolate (wasm) |
//! | `read` | chunks and packet bytes streamed out of R2 (wasm) |
//! | `serve` | what the reads answer with: a packet's bytes, its manifest, a member's body, its recipes, a chunk answer, a page of a search (wasm) |
//! | `clean` | the scheduled clean-up: unfinished uploads and pushes discarded, unused packs deleted; a packet deleted (wasm) |

pub mod chunk;
pub mod compact;
pub mod cut;
pub mod fetch;
pub mod findings;
pub mod frames;
pub mod index;
pub mod keys;
pub mod layout;
pub mod packs;
pub mod rebuild;
pub mod root;
pub mod sql;
pub mod stored;

#[cfg(target_arch = "wasm32")]
pub mod clean;
#[cfg(target_arch = "wasm32")]
pub mod compacting;
#[cfg(target_arch = "wasm32")]
pub mod load;
#[cfg(target_arch = "wasm32")]
pub mod read;
#[cfg(target_arch = "wasm32")]
pub mod serve;
#[cfg(target_arch = "wasm32")]
pub mod stream;
