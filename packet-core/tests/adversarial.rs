//! The adversarial corpus (tests/adversarial/cases.json) through the
//! native reader: every hostile packet is refused with its expected code
//! and path, whole and in chunks of 1, 511 and 4096 bytes; every accepted
//! one is byte for byte the writer's encoding of what was read.
//!
//! The same table runs under wasm32 in `adversarial_wasm.rs`.

mod adversarial_support;

#[test]
fn every_adversarial_case_has_its_expected_outcome() {
    adversarial_support::run_all();
}
