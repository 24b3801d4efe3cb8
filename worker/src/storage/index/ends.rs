//! `body_ends`: for bodies of several chunks, the SHA-256 state after all
//! of their bytes and, per scan class, the scanner's snapshot, so that a
//! body that grew from one of them is hashed and screened only from where
//! it ended. Read only for bodies of a push's bases.

use std::collections::HashMap;

use packet_core::{Body, HashState};
use serde::Deserialize;
use worker::{D1Database, D1PreparedStatement, Result};

use super::{blob, int, sql, text, unhex};
use crate::push::prove::End;

#[derive(Deserialize)]
struct Row {
    class: u8,
    hash_state: String,
    scan: String,
}

/// The end state of `body`, with the snapshots of every class kept.
pub async fn get(db: &D1Database, body: &Body) -> Result<Option<End>> {
    let rows = sql(
        "SELECT class, hex(hash_state) AS hash_state, hex(scan) AS scan FROM body_ends \
                    WHERE sha256 = :sha256 AND size = :size",
    )
    .bind("sha256", text(&body.sha256.hex().to_string()))
    .bind("size", int(body.size))
    .prepare(db)?
    .all()
    .await?
    .results::<Row>()?;
    let mut end: Option<End> = None;
    for r in rows {
        let (Some(state), Some(scan)) = (
            unhex(&r.hash_state).and_then(|b| HashState::from_bytes(&b)),
            unhex(&r.scan),
        ) else {
            continue;
        };
        let e = end.get_or_insert_with(|| End {
            hash: state.clone(),
            scans: Vec::new(),
        });
        e.scans.push((r.class, scan));
    }
    Ok(end)
}

/// The end states of these bodies (those kept).
pub async fn get_all(db: &D1Database, bodies: &[Body]) -> Result<HashMap<Body, End>> {
    let mut out = HashMap::new();
    for b in bodies {
        if let Some(e) = get(db, b).await? {
            out.insert(*b, e);
        }
    }
    Ok(out)
}

/// Rows for the end states of bodies just proven.
pub fn insert(db: &D1Database, ends: &[(Body, End)]) -> Result<Vec<D1PreparedStatement>> {
    let mut out = Vec::new();
    for (body, end) in ends {
        for (class, scan) in &end.scans {
            out.push(
                sql(
                    "INSERT OR IGNORE INTO body_ends (sha256, size, class, hash_state, scan) \
                     VALUES (:sha256, :size, :class, :hash_state, :scan)",
                )
                .bind("sha256", text(&body.sha256.hex().to_string()))
                .bind("size", int(body.size))
                .bind("class", int(u64::from(*class)))
                .bind("hash_state", blob(end.hash.as_bytes()))
                .bind("scan", blob(scan))
                .prepare(db)?,
            );
        }
    }
    Ok(out)
}
