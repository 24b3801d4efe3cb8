//! The adversarial corpus (tests/adversarial/cases.json) through the
//! native reader: every hostile packet is refused with its expected code
//! and path, whole and in chunks of 1, 7, 511, 512 and 4096 bytes, and so
//! is its `packet.json` parsed alone and, where the row gives it, its member
//! set packed; every accepted one is byte for byte the writer's encoding of
//! what was read.
//!
//! The same table runs under wasm32 in `adversarial_wasm.rs`.

mod adversarial_support;

use std::collections::BTreeSet;

use packet_core::ErrorCode;

#[test]
fn every_adversarial_case_has_its_expected_outcome() {
    adversarial_support::run_all();
}

/// The codes docs/session-packet.md §11 lists, in its order.
fn documented_codes() -> Vec<&'static str> {
    let spec = include_str!("../../docs/session-packet.md");
    let section = spec
        .split_once("\n## 11. Error codes\n")
        .expect("docs/session-packet.md has §11")
        .1;
    let section = section.split_once("\n## ").map_or(section, |(s, _)| s);
    let list = section
        .split_once("The codes are")
        .expect("§11 lists the codes")
        .1;
    list.split('`')
        .skip(1)
        .step_by(2)
        .filter(|code| {
            code.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
        })
        .collect()
}

#[test]
fn every_documented_code_is_earned_by_a_case() {
    let documented: BTreeSet<&str> = documented_codes().into_iter().collect();
    let enumerated: BTreeSet<&str> = ErrorCode::ALL.iter().map(|c| c.as_str()).collect();
    assert_eq!(
        documented, enumerated,
        "docs/session-packet.md §11 and ErrorCode::ALL list different codes"
    );
    let earned: BTreeSet<String> = adversarial_support::cases()
        .into_iter()
        .filter_map(|c| c.code)
        .collect();
    let unearned: Vec<&&str> = documented
        .iter()
        .filter(|&&c| !earned.contains(c))
        .collect();
    assert!(
        unearned.is_empty(),
        "no case in tests/adversarial/cases.json is refused with {unearned:?}"
    );
    let undocumented: Vec<&String> = earned
        .iter()
        .filter(|c| !documented.contains(c.as_str()))
        .collect();
    assert!(
        undocumented.is_empty(),
        "cases are refused with codes §11 does not list: {undocumented:?}"
    );
}
