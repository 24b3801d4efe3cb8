//! A packet sent whole in one request (`PUT /v1/packets/{digest}`): its
//! body streamed through packet-core into an object of its own
//! ([`stream::verify_into_bucket`]), whose `packs` row is written first
//! and forgotten if the packet is refused (the put is aborted, so there is
//! no object), then the packet's row.

use packet_core::Digest;
use web_sys::ReadableStream;
use worker::{Bucket, D1Database};

use crate::config::Config;
use crate::problem::{internal, Problem};
use crate::storage::findings::KeptFindings;
use crate::storage::index::packets::{self, NewPacket, NewStorage};
use crate::storage::index::{new_id, packs};
use crate::storage::keys;
use crate::storage::stream;

/// A packet sent in one request, its size checked.
pub struct Sent<'a> {
    /// The digest it must have.
    pub digest: Digest,
    /// Its size (the request's `Content-Length`).
    pub size: u64,
    /// The request's body.
    pub body: ReadableStream,
    /// The labels to attach.
    pub labels: &'a [String],
}

/// Verifies `sent` into its object and indexes it; a refused packet
/// leaves nothing behind.
pub async fn store(
    bucket: &Bucket,
    db: &D1Database,
    config: &Config,
    sent: Sent<'_>,
) -> Result<(), Problem> {
    let Sent {
        digest,
        size,
        body,
        labels,
    } = sent;
    // A key of its own, never reused: the clean-up may still be deleting an
    // earlier object of the same packet.
    let key = keys::upload(&new_id(db).await.map_err(internal)?);
    packs::insert(db, &key, size, 0, &digest.to_string())
        .await
        .map_err(internal)?;
    let verified = match stream::verify_into_bucket(
        bucket,
        &key,
        body,
        size,
        digest,
        config.limits,
        config.packet_hasher,
    )
    .await
    {
        Ok(v) => v,
        Err(e) => {
            // The put was aborted: no object, so no row for it either.
            let _ = packs::forget(db, &key).await;
            return Err(e.problem());
        }
    };
    let packs = [key.clone()];
    packets::insert_whole(
        db,
        &NewPacket {
            digest: &digest,
            size,
            manifest: &verified.manifest,
            manifest_range: verified.manifest_range.clone(),
            storage: NewStorage::Whole { key: &key },
            packs: &packs,
            labels,
            findings: KeptFindings::of(&verified.findings).to_text(),
        },
    )
    .await
    .map_err(internal)?;
    crate::findings::log(&digest, &verified.findings);
    Ok(())
}
