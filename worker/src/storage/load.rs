//! Stored packets as reads and pushes need them ([`Stored`]), fetched from
//! D1 ([`indexed`]) and R2 once and kept in the isolate for the next
//! requests (a few, within a byte budget): a whole packet's manifest is a
//! range of its object; a packet pushed before format /2 has a manifest
//! object and a layout object; a packed packet's root (in its row) names
//! the chunks of its manifest and of its layout, read and decoded, and its
//! manifest must hash to its digest.

use std::cell::RefCell;
use std::rc::Rc;

use packet_core::Digest;
use worker::{Bucket, D1Database};

use super::chunk::ChunkRef;
use super::findings::KeptFindings;
use super::index::packets::{self, PacketRow, Storage};
use super::index::unhex;
use super::packs::PackTable;
use super::read;
use super::root::Root;
use super::stored::Stored;
use crate::problem::{internal, Problem};

/// Stored packets kept in the isolate, at most.
const CACHED: usize = 16;
/// Bytes of stored packets kept in the isolate, at most.
const CACHE_BYTES: usize = 48 << 20;

thread_local! {
    static CACHE: RefCell<Vec<(String, Rc<Stored>)>> = const { RefCell::new(Vec::new()) };
}

/// What the cache knows a stored packet by: its digest and its objects (a
/// packet deleted and stored again has other objects).
fn cache_key(row: &PacketRow) -> String {
    format!(
        "{} {}",
        row.digest,
        row.object_key
            .as_deref()
            .or(row.layout_key.as_deref())
            .or(row.root_hex.as_deref())
            .unwrap_or("")
    )
}

fn damaged(row: &PacketRow, what: &str) -> Problem {
    Problem::internal(format!("packet {} is indexed but {what}", row.digest))
}

/// The indexed packet with this digest, or 404.
pub async fn indexed(db: &D1Database, digest: &Digest) -> Result<PacketRow, Problem> {
    packets::get(db, digest)
        .await
        .map_err(internal)?
        .ok_or_else(|| Problem::not_found(format!("no packet {digest} is stored")))
}

/// Reads a whole small object, or a range of one.
pub async fn object_bytes(
    bucket: &Bucket,
    key: &str,
    range: Option<(u64, u64)>,
) -> Result<Option<Vec<u8>>, Problem> {
    let get = bucket.get(key);
    let get = match range {
        Some((offset, length)) => get.range(worker::Range::OffsetWithLength { offset, length }),
        None => get,
    };
    let Some(object) = get
        .execute()
        .await
        .map_err(|e| Problem::internal(format!("reading {key}: {e}")))?
    else {
        return Ok(None);
    };
    let body = object
        .body()
        .ok_or_else(|| Problem::internal(format!("R2 returned no body for {key}")))?;
    body.bytes()
        .await
        .map(Some)
        .map_err(|e| Problem::internal(format!("reading {key}: {e}")))
}

/// Writes a small object.
pub async fn write_object(bucket: &Bucket, key: &str, bytes: Vec<u8>) -> Result<(), Problem> {
    bucket
        .put(key, bytes)
        .execute()
        .await
        .map(|_| ())
        .map_err(|e| Problem::internal(format!("writing {key}: {e}")))
}

/// The raw bytes of `chunks` (slots of `packs`), in order, concatenated.
pub async fn chunk_bytes(
    bucket: &Bucket,
    packs: &PackTable,
    chunks: &[ChunkRef],
) -> Result<Vec<u8>, Problem> {
    let total: u64 = chunks.iter().map(|c| c.raw).sum();
    let mut out = Vec::with_capacity(total as usize);
    read::raw_chunks(bucket, packs, chunks, |_, raw| {
        out.extend_from_slice(raw);
        Ok::<(), read::ReadError>(())
    })
    .await
    .map_err(|e| e.problem())?;
    Ok(out)
}

/// The stored packet `row` names, from the isolate's cache or R2.
pub async fn load(bucket: &Bucket, row: &PacketRow) -> Result<Rc<Stored>, Problem> {
    let key = cache_key(row);
    let hit = CACHE.with(|c| {
        let mut c = c.borrow_mut();
        let i = c.iter().position(|(k, _)| *k == key)?;
        let entry = c.remove(i);
        let loaded = entry.1.clone();
        c.push(entry);
        Some(loaded)
    });
    if let Some(loaded) = hit {
        return Ok(loaded);
    }
    let digest: Digest = row
        .digest
        .parse()
        .map_err(|e| damaged(row, &format!("its digest: {e}")))?;
    let findings =
        (row.findings_kept == 1).then(|| KeptFindings::from_text(row.findings.as_deref()));
    let storage = row
        .storage()
        .ok_or_else(|| damaged(row, "its row names no objects"))?;
    let corrupt = |e: crate::binary::Corrupt| damaged(row, &e.to_string());
    let stored = match storage {
        Storage::Whole { object } => {
            let json = object_bytes(
                bucket,
                object,
                Some((row.manifest_offset, row.manifest_size)),
            )
            .await?
            .ok_or_else(|| damaged(row, "its bytes are missing from R2"))?;
            Stored::whole(digest, object, json, row.manifest_offset, findings).map_err(corrupt)?
        }
        Storage::Chunked { layout, manifest } => {
            let json = object_bytes(bucket, manifest, None)
                .await?
                .ok_or_else(|| damaged(row, "its manifest is missing from R2"))?;
            let layout = object_bytes(bucket, layout, None)
                .await?
                .ok_or_else(|| damaged(row, "its layout is missing from R2"))?;
            Stored::pushed_v1(digest, manifest, json, &layout, findings).map_err(corrupt)?
        }
        Storage::Packed { root } => {
            let bytes = unhex(root).ok_or_else(|| damaged(row, "its root is not hex"))?;
            let root = Root::decode(&bytes).map_err(corrupt)?;
            let json = chunk_bytes(bucket, &root.packs, &root.manifest).await?;
            let layout = chunk_bytes(bucket, &root.packs, &root.layout).await?;
            Stored::packed(digest, root, json, layout, findings).map_err(corrupt)?
        }
    };
    let loaded = Rc::new(stored);
    CACHE.with(|c| {
        let mut c = c.borrow_mut();
        c.push((key, loaded.clone()));
        while c.len() > CACHED
            || (c.len() > 1 && c.iter().map(|(_, l)| l.weight()).sum::<usize>() > CACHE_BYTES)
        {
            c.remove(0);
        }
    });
    Ok(loaded)
}

/// Keeps a packet just stored in the isolate, as `row` names it: the next
/// push builds on it without reading it back.
pub fn remember(row: &PacketRow, stored: Rc<Stored>) {
    let key = cache_key(row);
    CACHE.with(|c| {
        let mut c = c.borrow_mut();
        c.retain(|(k, _)| *k != key);
        c.push((key, stored));
        while c.len() > CACHED
            || (c.len() > 1 && c.iter().map(|(_, l)| l.weight()).sum::<usize>() > CACHE_BYTES)
        {
            c.remove(0);
        }
    });
}

/// Forgets a packet (deleted).
pub fn forget(digest: &str) {
    CACHE.with(|c| {
        c.borrow_mut()
            .retain(|(k, _)| !k.starts_with(&format!("{digest} ")))
    });
}
