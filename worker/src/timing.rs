//! Where a request's time goes, for the benchmark (docs/benchmarks.md,
//! "Transfer"): named totals of wall time, reported in a `Pillbox-Timing`
//! response header only when `BENCH_ROUTES` is `1`. Local workerd's clock
//! advances during computation, so CPU spent in wasm shows up too.

use std::cell::RefCell;

/// The stages a request's time is split into.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stage {
    /// Reading the request body (waiting for the network).
    Body,
    /// Decompressing (gzip, zstd).
    Decode,
    /// Hashing (frames, bodies, the packet).
    Hash,
    /// Copies between wasm and JavaScript buffers.
    Copy,
    /// Writing to R2.
    R2Write,
    /// Reading from R2.
    R2Read,
    /// D1 queries.
    D1,
    /// packet-core's reader checking a whole packet (in wasm).
    Verify,
    /// A pushed `packet.json`: assembled from its chunks, parsed and
    /// checked, its bodies planned (in wasm).
    Manifest,
    /// A pushed packet made ready to store: its proofs gathered, its
    /// layout, root and findings built (in wasm).
    Layout,
}

const STAGES: [(Stage, &str); 10] = [
    (Stage::Body, "body"),
    (Stage::Decode, "decode"),
    (Stage::Hash, "hash"),
    (Stage::Copy, "copy"),
    (Stage::R2Write, "r2_write"),
    (Stage::R2Read, "r2_read"),
    (Stage::D1, "d1"),
    (Stage::Verify, "verify"),
    (Stage::Manifest, "manifest"),
    (Stage::Layout, "layout"),
];

/// Bytes counted, for the benchmark and the tests that check what a
/// request read and hashed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Counter {
    /// Stored bytes read from R2 by range reads of packs and objects.
    R2Read,
    /// Body bytes hashed to prove bodies (frames hashed as they arrive
    /// are not counted: they are what the request sent).
    Hashed,
    /// Bytes written to R2 (packs, the push's own objects).
    R2Written,
}

const COUNTERS: [(Counter, &str); 3] = [
    (Counter::R2Read, "r2_read_bytes"),
    (Counter::Hashed, "hashed_bytes"),
    (Counter::R2Written, "r2_write_bytes"),
];

thread_local! {
    static TOTALS: RefCell<[f64; STAGES.len()]> = const { RefCell::new([0.0; STAGES.len()]) };
    static COUNTS: RefCell<[u64; 3]> = const { RefCell::new([0; 3]) };
    static STARTED: RefCell<f64> = const { RefCell::new(0.0) };
}

/// Adds `n` to `counter`.
pub fn count(counter: Counter, n: u64) {
    COUNTS.with(|c| {
        if let Some(i) = COUNTERS.iter().position(|(k, _)| *k == counter) {
            c.borrow_mut()[i] += n;
        }
    });
}

#[wasm_bindgen::prelude::wasm_bindgen]
extern "C" {
    #[wasm_bindgen(js_namespace = performance, js_name = now)]
    fn performance_now() -> f64;
}

/// Milliseconds from the runtime's `performance.now()` (one direct call:
/// it is taken several times per frame).
pub fn now() -> f64 {
    performance_now()
}

/// Starts a request's accounting (each request runs alone in its isolate
/// while it is measured: the benchmark sends one at a time).
pub fn begin() {
    TOTALS.with(|t| *t.borrow_mut() = [0.0; STAGES.len()]);
    COUNTS.with(|c| *c.borrow_mut() = [0; 3]);
    STARTED.with(|s| *s.borrow_mut() = now());
}

/// Adds the time since `since` (a [`now`]) to `stage`.
pub fn add(stage: Stage, since: f64) {
    let spent = now() - since;
    TOTALS.with(|t| {
        if let Some(i) = STAGES.iter().position(|(s, _)| *s == stage) {
            t.borrow_mut()[i] += spent;
        }
    });
}

/// Runs `work`, adding its time to `stage`.
pub async fn timed<T>(stage: Stage, work: impl core::future::Future<Output = T>) -> T {
    let since = now();
    let out = work.await;
    add(stage, since);
    out
}

/// Runs `work` (in wasm, no awaits), adding its time to `stage`.
pub fn timed_sync<T>(stage: Stage, work: impl FnOnce() -> T) -> T {
    let since = now();
    let out = work();
    add(stage, since);
    out
}

/// Milliseconds since [`begin`].
pub fn elapsed() -> f64 {
    now() - STARTED.with(|s| *s.borrow())
}

/// The `Pillbox-Timing` header's value:
/// `stage=ms;…;total=ms;counter=bytes;…;wasm_memory=bytes`.
pub fn report() -> String {
    let total = elapsed();
    let mut parts: Vec<String> = TOTALS.with(|t| {
        STAGES
            .iter()
            .zip(t.borrow().iter())
            .map(|((_, name), ms)| format!("{name}={ms:.1}"))
            .collect()
    });
    parts.push(format!("total={total:.1}"));
    COUNTS.with(|c| {
        for ((_, name), n) in COUNTERS.iter().zip(c.borrow().iter()) {
            parts.push(format!("{name}={n}"));
        }
    });
    // The instance's wasm linear memory (it never shrinks: its peak).
    parts.push(format!(
        "wasm_memory={}",
        core::arch::wasm32::memory_size::<0>() as u64 * 65536
    ));
    parts.join(";")
}
