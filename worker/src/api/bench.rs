//! The benchmark baseline (docs/worker.md, "Settings"), answered
//! only when `BENCH_ROUTES` is `1`: `POST /v1/bench/baseline` streams its
//! body into R2 unverified, the same way a part's pack is written, so a
//! benchmark can compare a verified push against the raw cost of moving
//! the bytes through the Worker into R2. The object is deleted afterwards.
//! `GET /v1/bench/costs` answers what the isolate's requests have cost so
//! far (docs/worker.md, "Costs"), for a benchmark to take differences of.

use pillbox_wire::ApiCode;
use worker::{Bucket, D1Database, Data, Request};

use super::http::{content_length, internal, json_response, Answer};
use crate::config::Config;
use crate::problem::Problem;
use crate::storage::index::new_id;
use crate::storage::stream::{ChunkReader, FixedPut, StoreError};
use crate::timing::{self, Stage};

/// `POST /v1/bench/baseline`
pub async fn baseline(req: &Request, bucket: &Bucket, db: &D1Database, config: &Config) -> Answer {
    if !config.bench_routes {
        return Err(Problem::not_found("no such endpoint"));
    }
    let length = content_length(req)?;
    if length > config.max_single_upload_bytes {
        return Err(crate::caps::too_large(config.max_single_upload_bytes));
    }
    let body = req
        .inner()
        .body()
        .ok_or_else(|| Problem::bad_request(ApiCode::BodyInvalid, "no body"))?;
    let key = format!("bench/{}", new_id(db).await.map_err(internal)?);
    let sink = FixedPut::new(length).map_err(StoreError::problem)?;
    let put = bucket
        .put(&key, Data::ReadableStream(sink.readable.clone()))
        .execute();
    let pump = async {
        let reader = ChunkReader::new(&body)?;
        while let Some(chunk) = timing::timed(Stage::Body, reader.next()).await? {
            timing::timed(Stage::R2Write, sink.write(&chunk)).await?;
        }
        sink.close().await
    };
    let (put, pumped) = futures_util::future::join(put, pump).await;
    pumped.map_err(StoreError::problem)?;
    put.map_err(internal)?;
    let _ = bucket.delete(key).await;
    json_response(200, &serde_json::json!({ "bytes": length }))
}

/// `GET /v1/bench/costs`: `{"isolate": {counter: value, …}, "tables":
/// {table: {queries, rows_read, rows_written, d1_ms}}}`.
pub fn costs(config: &Config) -> Answer {
    if !config.bench_routes {
        return Err(Problem::not_found("no such endpoint"));
    }
    json_response(
        200,
        &serde_json::json!({
            "isolate": crate::meter::isolate_totals().to_json(),
            "tables": crate::meter::isolate_tables(),
        }),
    )
}
