//! Counting what requests cost (docs/worker.md, "Costs"): when
//! `BENCH_ROUTES` is `1`, a request (or a scheduled run) sees its D1 and R2
//! bindings through `worker/js/meter.mjs`, which counts every call made
//! through them, so no call site counts anything. [`Meter::report`] is the
//! request's `Pillbox-Cost` header, [`isolate_totals`] what every request
//! of the isolate has cost (including work done after an answer's headers
//! were sent, e.g. a streamed read).
//!
//! Off in production: the counts would tell a caller how many rows a
//! lookup read, which says what the store holds.

use js_sys::{Object, Reflect};
use wasm_bindgen::prelude::*;
use worker::Env;

use crate::cost::Cost;

#[wasm_bindgen(module = "/js/meter.mjs")]
extern "C" {
    #[wasm_bindgen(js_name = newMeter)]
    fn new_meter() -> Object;
    #[wasm_bindgen(js_name = meterEnv)]
    fn meter_env(env: &JsValue, database: &str, bucket: &str, meter: &Object) -> JsValue;
    #[wasm_bindgen(js_name = readMeter)]
    fn read_meter(meter: &Object) -> Object;
    #[wasm_bindgen(js_name = isolateTotals)]
    fn js_isolate_totals() -> Object;
    #[wasm_bindgen(js_name = isolateTables)]
    fn js_isolate_tables() -> Object;
}

/// One request's counters.
pub struct Meter(Object);

impl Meter {
    /// `env` with its D1 binding `database` and R2 binding `bucket`
    /// counted by a new meter.
    pub fn wrap(env: Env, database: &str, bucket: &str) -> (Env, Meter) {
        let meter = new_meter();
        let metered = meter_env(env.as_ref(), database, bucket, &meter);
        (metered.unchecked_into(), Meter(meter))
    }

    /// What the request has cost so far.
    pub fn cost(&self) -> Cost {
        cost_of(&read_meter(&self.0))
    }

    /// The `Pillbox-Cost` header's value, with the request's wall time.
    pub fn report(&self, wall_ms: f64) -> String {
        self.cost().header(wall_ms)
    }
}

/// What every metered request and run of this isolate has cost.
pub fn isolate_totals() -> Cost {
    cost_of(&js_isolate_totals())
}

/// The isolate's D1 queries by the table each names first:
/// `{table: {queries, rows_read, rows_written, d1_ms}}`.
pub fn isolate_tables() -> serde_json::Value {
    js_sys::JSON::stringify(&js_isolate_tables())
        .ok()
        .and_then(|text| text.as_string())
        .and_then(|text| serde_json::from_str(&text).ok())
        .unwrap_or_default()
}

fn cost_of(counters: &Object) -> Cost {
    Cost::read(|name| {
        Reflect::get(counters, &JsValue::from_str(name))
            .ok()?
            .as_f64()
    })
}
