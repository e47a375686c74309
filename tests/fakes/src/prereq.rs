//! What some tests need from the machine beyond Rust (issue 28): a PostgreSQL installation
//! ([`postgres`](crate::postgres)) and libfaketime. A machine without one of them skips the
//! tests that need it, saying so in one line on the terminal, so `cargo test --workspace`
//! passes on any machine; CI sets [`STRICT_ENV`], which turns every such skip into a
//! failure, so it never loses a test silently.

use std::collections::HashSet;
use std::io::Write;
use std::sync::{Mutex, PoisonError};

/// Set (to anything but `0` or empty) where a missing prerequisite must fail the tests
/// that need it instead of skipping them: CI (`.ci/run`).
pub const STRICT_ENV: &str = "IM_BRIDGE_TEST_STRICT";

/// Whether missing prerequisites fail ([`STRICT_ENV`]).
pub fn strict() -> bool {
    std::env::var(STRICT_ENV).is_ok_and(|v| !v.is_empty() && v != "0")
}

/// `what` is missing from this machine (`why`, with how to get it). Under [`STRICT_ENV`]
/// this panics; otherwise it writes one line per prerequisite and process to the terminal
/// (past the test harness's capture) and the caller skips its test.
pub fn missing(what: &'static str, why: &str) {
    if strict() {
        panic!("{what} is needed here ({STRICT_ENV} is set): {why}");
    }
    static SAID: Mutex<Option<HashSet<&'static str>>> = Mutex::new(None);
    let first = SAID
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .get_or_insert_with(HashSet::new)
        .insert(what);
    if first {
        // Straight to the terminal: the harness captures `eprintln!` of passing tests.
        let _ = writeln!(
            std::io::stderr(),
            "note: skipping the tests that need {what}: {why}"
        );
    }
}
