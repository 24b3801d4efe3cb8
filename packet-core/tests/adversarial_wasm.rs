//! The adversarial corpus through the reader compiled to wasm32, under
//! node:
//!
//! ```text
//! CARGO_TARGET_WASM32_UNKNOWN_UNKNOWN_RUNNER=wasm-bindgen-test-runner \
//!   cargo test -p packet-core --target wasm32-unknown-unknown --test adversarial_wasm
//! ```
//!
//! The packets and the table are compiled in (a wasm test cannot read
//! files); the checks are the native test's (`adversarial_support`).
#![cfg(target_arch = "wasm32")]

mod adversarial_support;

use wasm_bindgen_test::wasm_bindgen_test;

#[wasm_bindgen_test]
fn every_adversarial_case_has_its_expected_outcome_in_wasm() {
    adversarial_support::run_all();
}
