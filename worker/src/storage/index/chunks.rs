//! `chunks`: one row per unique chunk a push stored, where one copy of it
//! lies (its pack, offset, stored size and encoding, its raw size). A hint
//! for not storing the same bytes twice, from any session; layouts and
//! roots hold the locations that count. Found by name and size.

use std::collections::HashMap;

use packet_core::Digest;
use pillbox_wire::chunks::Encoding;
use serde::Deserialize;
use worker::{D1Database, D1PreparedStatement, Result};

use super::{json, sql, text, Sql, JSON_ITEMS};
use crate::storage::chunk::{Held, Name, NewChunk};

#[derive(Deserialize)]
struct Row {
    sha256: String,
    size: u64,
    pack: String,
    offset: u64,
    stored_size: Option<u64>,
    encoding: Option<u8>,
}

/// Where the store holds these chunks (in packs that still have their row).
pub async fn find(db: &D1Database, names: &[Name]) -> Result<HashMap<Name, Held>> {
    let mut found = HashMap::new();
    let hex: Vec<String> = names.iter().map(|n| n.0.hex().to_string()).collect();
    for group in hex.chunks(JSON_ITEMS) {
        let rows = sql(
            "SELECT c.sha256, c.size, c.pack, c.offset, c.stored_size, c.encoding FROM chunks c \
             JOIN packs p ON p.key = c.pack WHERE c.sha256 IN (SELECT value FROM json_each(:names))",
        )
        .bind("names", json(&group))
        .prepare(db)?
        .all()
        .await?
        .results::<Row>()?;
        for r in rows {
            let Ok(d) = Digest::from_hex(&r.sha256) else {
                continue;
            };
            let encoding =
                Encoding::from_byte(r.encoding.unwrap_or(0)).unwrap_or(Encoding::Identity);
            found.insert(
                (d, r.size),
                Held {
                    pack: r.pack,
                    offset: r.offset,
                    stored: r.stored_size.unwrap_or(r.size),
                    encoding,
                },
            );
        }
    }
    let wanted: std::collections::HashSet<&Name> = names.iter().collect();
    found.retain(|n, _| wanted.contains(n));
    Ok(found)
}

/// Rows for chunks just stored in `pack` by a push completed in one
/// request, kept only if packet `digest` is stored.
pub fn insert_if_stored(
    db: &D1Database,
    pack: &str,
    chunks: &[NewChunk],
    digest: &str,
) -> Result<Vec<D1PreparedStatement>> {
    rows(
        db,
        pack,
        chunks,
        "EXISTS (SELECT 1 FROM packets WHERE digest = :owner)",
        digest,
    )
}

/// Rows for chunks just stored in `pack` by a part of push `push`, kept
/// only while the push is open.
pub fn insert_if_open(
    db: &D1Database,
    pack: &str,
    chunks: &[NewChunk],
    push: &str,
) -> Result<Vec<D1PreparedStatement>> {
    rows(
        db,
        pack,
        chunks,
        "EXISTS (SELECT 1 FROM pushes WHERE id = :owner)",
        push,
    )
}

fn rows(
    db: &D1Database,
    pack: &str,
    chunks: &[NewChunk],
    guard: &'static str,
    owner: &str,
) -> Result<Vec<D1PreparedStatement>> {
    let mut out = Vec::new();
    for group in chunks.chunks(JSON_ITEMS) {
        let rows: Vec<(String, u64, u64, u64, u8)> = group
            .iter()
            .map(|(d, size, offset, stored, e)| {
                (d.hex().to_string(), *size, *offset, *stored, e.byte())
            })
            .collect();
        out.push(
            Sql::owned(format!(
                "INSERT OR IGNORE INTO chunks (sha256, size, pack, offset, stored_size, encoding) \
                 SELECT json_extract(value, '$[0]'), json_extract(value, '$[1]'), :pack, json_extract(value, '$[2]'), \
                 json_extract(value, '$[3]'), json_extract(value, '$[4]') FROM json_each(:rows) WHERE {guard}"
            ))
            .bind("pack", text(pack))
            .bind("rows", json(&rows))
            .bind("owner", text(owner))
            .prepare(db)?,
        );
    }
    Ok(out)
}

/// Points the rows of chunks copied into `pack` (sha256, offset, stored
/// size) at the copies, where their row named one of the packs `merged`:
/// the copy is the one later packets use.
pub fn move_to(
    db: &D1Database,
    pack: &str,
    chunks: &[(Digest, u64, u64)],
    merged: &[String],
) -> Result<Vec<D1PreparedStatement>> {
    let mut out = Vec::new();
    for group in chunks.chunks(JSON_ITEMS) {
        let rows: Vec<(String, u64)> = group
            .iter()
            .map(|(d, o, _)| (d.hex().to_string(), *o))
            .collect();
        out.push(
            sql("UPDATE chunks SET pack = :pack, \
                 offset = (SELECT json_extract(value, '$[1]') FROM json_each(:rows) WHERE json_extract(value, '$[0]') = chunks.sha256) \
                 WHERE sha256 IN (SELECT json_extract(value, '$[0]') FROM json_each(:rows)) \
                 AND pack IN (SELECT value FROM json_each(:merged)) AND EXISTS (SELECT 1 FROM packs WHERE key = :pack)")
            .bind("pack", text(pack))
            .bind("rows", json(&rows))
            .bind("merged", json(&merged))
            .prepare(db)?,
        );
    }
    if !chunks.is_empty() {
        // Each pack's row counts the chunk rows that name it: the new pack
        // gains the rows moved to it, the merged ones lose them.
        out.push(
            sql("UPDATE packs SET chunks = (SELECT count(*) FROM chunks c WHERE c.pack = packs.key) \
                 WHERE (key = :pack OR key IN (SELECT value FROM json_each(:merged))) \
                 AND EXISTS (SELECT 1 FROM packs WHERE key = :pack)")
            .bind("pack", text(pack))
            .bind("merged", json(&merged))
            .prepare(db)?,
        );
    }
    Ok(out)
}
