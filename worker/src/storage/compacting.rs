//! Compaction's reads (docs/transfer.md, "Packs per packet"): a packet
//! about to be stored is laid out ([`crate::push::storing::Storing`]) with
//! copies of the chunks it takes from its small packs ([`super::compact`]
//! plans which), read here from R2, run by run. A merge that cannot be
//! made (a read failed, a copy does not hash to its name) is skipped and
//! logged (`compaction_skipped`), and the packet is stored with the packs
//! it had.

use std::ops::Range;

use worker::Bucket;

use super::load;
use crate::push::storing::{Laid, Storing};

/// The packet laid out, with its small packs merged when that is called
/// for.
pub async fn lay_out(bucket: &Bucket, storing: Storing) -> Laid {
    let read = read(bucket, &storing.reads()).await;
    let (laid, skipped) = storing.lay_out(read);
    if let Some(why) = skipped {
        worker::console_warn!("{{\"event\":\"compaction_skipped\",\"why\":{why:?}}}");
    }
    laid
}

/// The stored bytes of `reads` (key, range), in order; why not, at the
/// first that fails or comes back short.
async fn read(bucket: &Bucket, reads: &[(String, Range<u64>)]) -> Result<Vec<Vec<u8>>, String> {
    let mut bytes = Vec::with_capacity(reads.len());
    for (key, range) in reads {
        let length = range.end - range.start;
        match load::object_bytes(bucket, key, Some((range.start, length))).await {
            Ok(Some(b)) if b.len() as u64 == length => bytes.push(b),
            Ok(_) => return Err(format!("{key} is shorter than the packet's layout says")),
            Err(e) => return Err(e.error.message().to_string()),
        }
    }
    Ok(bytes)
}
