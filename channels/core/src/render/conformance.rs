//! The renderer's property tests, for any [`Dialect`]: the core runs them for [`Plain`]
//! and [`PlainText`], and each adapter's tests run them for its own dialect, so every
//! dialect keeps the same guarantees without the core knowing it (cargo feature
//! `test-support`, for tests only).
//!
//! [`run`] checks, on Markdown made of the constructs the renderer knows and on arbitrary
//! text: every message of a final and every preview well-formed as the dialect's
//! [`Dialect::check`] tells, within the limit, never blank, nothing lost
//! ([`check_final`], [`check_preview`]); a plain-text resend showing every link's
//! address ([`check_resend`]); the cut's quick `fits` agreeing with its
//! measure; nothing panicking; blank text giving no message; and deep nesting staying
//! linear. [`one`] and [`texts`] serve the adapters' own tests of their output.
//!
//! [`Plain`]: super::Plain
//! [`PlainText`]: super::PlainText

use std::time::{Duration, Instant};

use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};

use super::{Dialect, Measure, Rendered, render, render_preview};
use crate::capabilities::LengthUnit;

pub use super::check::{check_final, check_preview, check_resend};

/// `markdown` as one message in `dialect` (no limit to speak of): its text.
pub fn one(markdown: &str, dialect: &dyn Dialect) -> String {
    let chunks = render(markdown, dialect, LengthUnit::Bytes, 100_000);
    assert!(chunks.len() <= 1, "{chunks:?}");
    chunks
        .into_iter()
        .next()
        .map(|r| r.text)
        .unwrap_or_default()
}

/// Each `(markdown, shown)` of `cases`: `markdown` as one message in `dialect` is `shown`
/// (a dialect's table of what it writes for each construct).
pub fn assert_each(dialect: &dyn Dialect, cases: &[(&str, &str)]) {
    for (markdown, shown) in cases {
        assert_eq!(one(markdown, dialect), *shown, "{markdown:?}");
    }
}

/// The texts of `chunks`, to compare with what they should be.
pub fn texts(chunks: &[Rendered]) -> Vec<&str> {
    chunks.iter().map(|c| c.text.as_str()).collect()
}

/// Markdown is drawn from these pieces.
const TOKENS: &[&str] = &[
    "**",
    "*",
    "_",
    "~~",
    "`",
    "```rust\n",
    "```\n",
    "[a](https://x.y/?q=1&r=\"2\")",
    "> ",
    "- ",
    "1. ",
    "# ",
    "| a | b |\n|---|---|\n",
    "word",
    "other words here",
    "中文字符",
    "👍🏽",
    "\n",
    "\n\n",
    " ",
    "<",
    "&",
];

/// Cases per property.
const CASES: u32 = 256;

fn markdown() -> impl Strategy<Value = String> {
    prop::collection::vec(prop::sample::select(TOKENS), 0..40).prop_map(|tokens| tokens.concat())
}

fn unit() -> impl Strategy<Value = LengthUnit> {
    prop_oneof![
        Just(LengthUnit::Utf16),
        Just(LengthUnit::Chars),
        Just(LengthUnit::Bytes)
    ]
}

/// Runs `test` on `CASES` values of `strategy`, and panics with the smallest failing one.
fn property<S: Strategy>(
    dialect: &dyn Dialect,
    name: &str,
    strategy: S,
    test: impl Fn(S::Value) -> Result<(), TestCaseError>,
) {
    let mut runner = TestRunner::new(Config {
        cases: CASES,
        failure_persistence: None,
        ..Config::default()
    });
    if let Err(failure) = runner.run(&strategy, test) {
        panic!("{dialect:?}: {name}: {failure}");
    }
}

/// Every property of the renderer, for `dialect` (see the module docs). Panics with the
/// smallest input that breaks one.
pub fn run(dialect: &dyn Dialect) {
    property(
        dialect,
        "every chunk is well-formed, within the limit, and nothing is lost",
        (markdown(), unit(), 8usize..300),
        |(markdown, unit, limit)| {
            check_final(&markdown, dialect, unit, limit);
            Ok(())
        },
    );
    property(
        dialect,
        "a plain-text resend shows every link's address, as links written as text",
        (markdown(), unit(), 8usize..300),
        |(markdown, unit, limit)| {
            check_resend(&markdown, dialect, unit, limit);
            Ok(())
        },
    );
    property(
        dialect,
        "every preview is well-formed and within the limit",
        (markdown(), unit(), 8usize..300),
        |(markdown, unit, limit)| {
            check_preview(&markdown, dialect, unit, limit);
            Ok(())
        },
    );
    // `fits` is `measure(text) <= limit`, however early it stops reading.
    property(
        dialect,
        "fits agrees with measure",
        (
            prop_oneof![any::<String>(), "[a<>`~\n\r é😀]{0,60}"],
            unit(),
            0usize..4,
        ),
        |(text, unit, slack)| {
            let measure = Measure::new(unit, dialect);
            let len = measure.measure(&text);
            for limit in [len.saturating_sub(slack), len, len + slack] {
                prop_assert_eq!(
                    measure.fits(&text, limit),
                    len <= limit,
                    "{} at {}",
                    len,
                    limit
                );
            }
            Ok(())
        },
    );
    property(
        dialect,
        "arbitrary text never panics and renders well-formed",
        (any::<String>(), 0usize..40),
        |(text, limit)| {
            for unit in [LengthUnit::Utf16, LengthUnit::Chars, LengthUnit::Bytes] {
                let chunks = render(&text, dialect, unit, limit);
                let preview = render_preview(&text, dialect, unit, limit);
                for chunk in chunks.iter().chain([&preview]) {
                    let checked = dialect.check(chunk, unit, limit);
                    prop_assert!(checked.is_ok(), "{:?}: {:?}", checked, chunk.text);
                }
            }
            Ok(())
        },
    );
    blank_input_gives_no_message(dialect);
    deep_nesting_stays_linear(dialect);
}

fn blank_input_gives_no_message(dialect: &dyn Dialect) {
    assert!(render("", dialect, LengthUnit::Utf16, 10).is_empty());
    assert!(render(" \n\n \n", dialect, LengthUnit::Utf16, 10).is_empty());
    assert_eq!(
        render_preview("", dialect, LengthUnit::Utf16, 10).text,
        "",
        "{dialect:?}"
    );
}

fn deep_nesting_stays_linear(dialect: &dyn Dialect) {
    for markdown in [
        "- ".repeat(5_000) + "x",
        "> ".repeat(5_000) + "x",
        "**".repeat(5_000) + "x",
        "[".repeat(5_000) + "x",
    ] {
        let started = Instant::now();
        let chunks = render(&markdown, dialect, LengthUnit::Utf16, 4096);
        let shown: usize = chunks.iter().map(|c| c.plain.len()).sum();
        // Linear: at most a capped indentation and a marker per nesting level.
        assert!(
            shown <= 16 * markdown.len(),
            "{dialect:?}: {shown} shown of {}",
            markdown.len()
        );
        for chunk in &chunks {
            if let Err(why) = dialect.check(chunk, LengthUnit::Utf16, 4096) {
                panic!("{dialect:?}: {why} in {:?}", chunk.text);
            }
        }
        assert!(started.elapsed() < Duration::from_secs(5), "{dialect:?}");
    }
}
