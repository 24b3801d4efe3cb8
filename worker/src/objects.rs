//! Stored packets as the reads need them: the manifest (parsed, with its
//! bytes), packet-core's offsets and the layout, loaded from R2 once and
//! kept in the isolate for the next requests (a few, within a byte budget).
//! A whole packet's manifest is read from its object by range; a chunked
//! packet's manifest and layout are objects of their own.

use std::cell::RefCell;
use std::rc::Rc;

use packet_core::offsets::Offsets;
use packet_core::{Limits, Manifest};
use worker::Bucket;

use crate::layout::Layout;
use crate::problem::Problem;
use crate::rows::{PacketRow, Storage};

/// Stored packets kept in the isolate, at most.
const CACHED: usize = 16;
/// Bytes of manifests and layouts kept in the isolate, at most.
const CACHE_BYTES: usize = 32 << 20;

/// A stored packet, ready to be read.
pub struct Loaded {
    /// Its manifest.
    pub manifest: Manifest,
    /// `packet.json`'s bytes.
    pub json: Vec<u8>,
    /// Where its members lie.
    pub offsets: Offsets,
    /// Where its bodies lie.
    pub layout: Layout,
}

impl Loaded {
    /// The [`crate::assemble::Packet`] it makes.
    pub fn packet(&self) -> crate::assemble::Packet<'_> {
        crate::assemble::Packet {
            manifest: &self.manifest,
            json: &self.json,
            offsets: &self.offsets,
            layout: &self.layout,
        }
    }

    fn weight(&self) -> usize {
        // The parsed manifest takes a few times its JSON.
        self.json.len() * 3 + self.layout.weight()
    }
}

thread_local! {
    static CACHE: RefCell<Vec<(String, Rc<Loaded>)>> = const { RefCell::new(Vec::new()) };
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
            .unwrap_or("")
    )
}

fn damaged(row: &PacketRow, what: &str) -> Problem {
    Problem::internal(format!("packet {} is indexed but {what}", row.digest))
}

async fn object_bytes(
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

/// The stored packet `row` names, from the isolate's cache or R2.
pub async fn load(bucket: &Bucket, row: &PacketRow) -> Result<Rc<Loaded>, Problem> {
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
    let storage = row
        .storage()
        .ok_or_else(|| damaged(row, "its row names no objects"))?;
    let (json, layout_bytes, whole) = match storage {
        Storage::Whole { object } => {
            let json = object_bytes(
                bucket,
                object,
                Some((row.manifest_offset, row.manifest_size)),
            )
            .await?
            .ok_or_else(|| damaged(row, "its bytes are missing from R2"))?;
            (json, None, Some(object.to_string()))
        }
        Storage::Chunked { layout, manifest } => {
            let json = object_bytes(bucket, manifest, None)
                .await?
                .ok_or_else(|| damaged(row, "its manifest is missing from R2"))?;
            let layout = object_bytes(bucket, layout, None)
                .await?
                .ok_or_else(|| damaged(row, "its layout is missing from R2"))?;
            (json, Some(layout), None)
        }
    };
    // The store verified it before indexing it; the format's limits are
    // the widest any stored packet was accepted under.
    let manifest = Manifest::parse(&json, &Limits::FORMAT)
        .map_err(|e| damaged(row, &format!("its stored manifest does not parse: {e}")))?;
    let offsets = Offsets::of(&manifest);
    let layout = match (&layout_bytes, &whole) {
        (Some(bytes), _) => {
            Layout::decode(bytes, &manifest).map_err(|e| damaged(row, &e.to_string()))?
        }
        (None, Some(object)) => Layout::whole(object, &manifest, &offsets),
        (None, None) => return Err(damaged(row, "it has no layout")),
    };
    let loaded = Rc::new(Loaded {
        manifest,
        json,
        offsets,
        layout,
    });
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

/// Forgets a packet (deleted).
pub fn forget(digest: &str) {
    CACHE.with(|c| {
        c.borrow_mut()
            .retain(|(k, _)| !k.starts_with(&format!("{digest} ")))
    });
}

/// The R2 key of a chunked packet's manifest, stored by push `push_id`.
pub fn manifest_key(digest: &packet_core::Digest, push_id: &str) -> String {
    format!("manifests/sha256/{}/{push_id}", digest.hex())
}

/// The R2 key of a chunked packet's layout, stored by push `push_id`.
pub fn layout_key(digest: &packet_core::Digest, push_id: &str) -> String {
    format!("layouts/sha256/{}/{push_id}", digest.hex())
}

/// Reads a whole small object (a push's manifest, plan or part record).
pub async fn read_object(bucket: &Bucket, key: &str) -> Result<Option<Vec<u8>>, Problem> {
    object_bytes(bucket, key, None).await
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
