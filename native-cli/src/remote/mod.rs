//! `push` and `pull`: moving packets to and from a pillbox packet store
//! (the edge Worker's HTTP API, `proto/openapi.yaml`; docs/cli.md,
//! "push" and "pull").
//!
//! Both directions verify with packet-core on this machine: push reads the
//! whole packet before sending a byte (and the server verifies it again);
//! pull feeds the bytes through packet-core's reader as they arrive and
//! renames the file into place only once it has verified. The HTTP client
//! is `ureq` (blocking, rustls); transient failures are retried with a
//! bounded backoff (`client::RetryPolicy`).
//!
//! | module | holds |
//! |---|---|
//! | `client` | the store's URL and token, requests and retries, answers read into `pillbox_wire` types, status → error |
//! | `push` | `push`: a delta push, or a single upload or a multipart one, then the ref |
//! | `bodies` | where a delta push reads bodies: a packet file or the workspace |
//! | `delta_push` | delta push: the manifest's chunks and what the bases lack in one `PBPUSH02` create when it fits, else recipes, parts of per-chunk zstd frames in parallel, complete |
//! | `refs` | `refs`: the refs a store holds, by prefix |
//! | `log` | `log`: the packets a ref has named, and what changed from each to the next |
//! | `digests` | a packet named by a prefix of its digest, resolved by the store |
//! | `refusal` | a store's refusal in the CLI's terms: what was refused, what to do with this CLI |
//! | `upload_state` | the record of an interrupted upload or push, and its lock |
//! | `pull` | `pull`: a delta pull, or a download verified as it arrives, continued after a drop |
//! | `delta_pull` | delta pull: what the packet is made of, what this machine holds (bases, the cache, a workspace), the plan carried out into a sink, the Assembly gate |
//! | `parts` | `packet.json` and the large bodies' chunk lists: recipes (with a base), manifest chunks held here or fetched |
//! | `pull_local` | what a delta pull wants and what this machine holds for it: the bodies, what a base gives, what to ask the cache for, where the bytes came from (pure) |
//! | `pull_plan` | the pure plan: where each body's pieces come from, which chunks to fetch in which batches |
//! | `fetch` | `POST …/chunks` batches several at a time (frames decoded on the receiving thread) and `Range` reads |
//! | `land` | carrying a plan out: pieces read or fetched, each hashed, written to a sink; each body proven and scanned |
//!
//! Every JSON body sent or read is a type of the `pillbox-wire` crate, the
//! one the Worker answers with.

mod bodies;
mod client;
pub mod delta_pull;
mod delta_push;
mod digests;
mod fetch;
pub mod land;
mod log;
pub mod parts;
mod pull;
mod pull_local;
pub mod pull_plan;
mod push;
mod refs;
mod refusal;
mod upload_state;

use packet_core::Digest;

pub use bodies::Bodies;
pub use client::{Remote, Token};
pub use delta_pull::DeltaPullReport;
pub use delta_push::{DeltaReport as PushDeltaReport, KnownBase};
pub use digests::stored as stored_digest;
pub use log::{log, LogRequest};
pub use pull::{pull, resolve, CacheChoice, PullSources, PullTarget};
pub use push::{
    push, push_verified, takes_delta, ExpectRef, PartsReport, PushReport, PushRequest, RefReport,
    Verified,
};
pub use refs::list as list_refs;
pub use upload_state::default_state_dir;

/// The environment variable holding the bearer token.
pub const TOKEN_ENV: &str = "PILLBOX_TOKEN";
/// The environment variable naming the default remote.
pub const REMOTE_ENV: &str = "PILLBOX_REMOTE";

// ---- where things are in the store's API ------------------------------------

/// `/v1/packets/sha256:<hex>`
pub fn packet_path(digest: &Digest) -> String {
    format!("/v1/packets/{digest}")
}

/// `/v1/refs/<name>`, each `/`-separated segment percent-encoded (the
/// store's ref names only use unreserved characters, so this changes
/// nothing for a valid name and keeps an invalid one inside its route).
pub fn ref_path(name: &str) -> String {
    let segments: Vec<String> = name.split('/').map(percent_encode).collect();
    format!("/v1/refs/{}", segments.join("/"))
}

/// `/v1/uploads/<id>` (the id as the store issued it: 32 hex digits).
pub fn upload_path(id: &str) -> String {
    format!("/v1/uploads/{}", percent_encode(id))
}

/// `/v1/pushes/<id>` (the id as the store issued it).
pub fn push_path(id: &str) -> String {
    format!("/v1/pushes/{}", percent_encode(id))
}

fn percent_encode(segment: &str) -> String {
    let mut out = String::with_capacity(segment.len());
    for b in segment.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// `?label=a&label=b` for `PUT /v1/packets/{digest}` (empty for none).
fn label_query(labels: &[String]) -> String {
    let pairs: Vec<String> = labels
        .iter()
        .map(|l| format!("label={}", percent_encode(l)))
        .collect();
    if pairs.is_empty() {
        String::new()
    } else {
        format!("?{}", pairs.join("&"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn api_paths() {
        let d = Digest::of(b"packet");
        assert_eq!(packet_path(&d), format!("/v1/packets/sha256:{}", d.hex()));
        assert_eq!(
            ref_path("sessions/demo/latest"),
            "/v1/refs/sessions/demo/latest"
        );
        assert_eq!(ref_path("a b/c?d"), "/v1/refs/a%20b/c%3Fd");
        assert_eq!(upload_path("0123abcd"), "/v1/uploads/0123abcd");
        assert_eq!(label_query(&[]), "");
        assert_eq!(
            label_query(&["host=ci-7".into(), "team:x".into()]),
            "?label=host%3Dci-7&label=team%3Ax"
        );
    }
}
