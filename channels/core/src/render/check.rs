//! The renderer's guarantees as checks, for the property tests (`conformance.rs`, each
//! adapter's for its dialect) and the `markdown` fuzz target (through the crate's
//! `fuzzing` module).
//!
//! [`check_final`] and [`check_preview`] render a text and panic with the offending
//! message unless it keeps what the module docs promise: each message well-formed in its
//! dialect and showing exactly its `plain`, as [`Dialect::check`] tells; within the limit
//! as the cut counts it (what [`Dialect::extra_units`] adds), unless it is a single code
//! point longer than the limit; never blank; and the messages are the whole text in order,
//! but for whitespace at the cuts. [`check_resend`] checks what the messages' plain-text
//! resends show: every link's address, as a dialect writing links as text shows it.

use super::{Dialect, Measure, Rendered, render, render_preview};
use crate::capabilities::LengthUnit;

/// Renders `markdown` as a final and checks every message (see the module docs).
pub fn check_final(markdown: &str, dialect: &dyn Dialect, unit: LengthUnit, limit: usize) {
    let chunks = render(markdown, dialect, unit, limit);
    let whole = render(markdown, dialect, unit, usize::MAX);
    assert!(whole.len() <= 1, "{whole:?}");
    let whole = whole.first().map(|r| r.plain.as_str()).unwrap_or_default();
    let measure = Measure::new(unit, dialect);
    for chunk in &chunks {
        check_markup(chunk, dialect, unit, limit);
        // What the cut counted: the entities characters become, the quoted lines newlines
        // may start.
        let len = measure.measure(&chunk.plain);
        assert!(
            len <= limit || chunk.plain.chars().count() == 1,
            "{len} > {limit}: {chunk:?}"
        );
        assert!(!chunk.plain.trim().is_empty(), "{chunk:?}");
    }
    // The chunks are the whole text in order, but for whitespace at the cuts.
    let mut rest = whole;
    for chunk in &chunks {
        let piece = chunk.plain.trim_start();
        rest = rest.trim_start();
        assert!(rest.starts_with(piece), "{piece:?} is not next in {rest:?}");
        rest = &rest[piece.len()..];
    }
    assert!(rest.trim().is_empty(), "left over: {rest:?}");
    let joined: Vec<&str> = chunks.iter().map(|c| c.plain.as_str()).collect();
    assert_eq!(
        collapse(&joined.join(" ")).replace(' ', ""),
        collapse(whole).replace(' ', "")
    );
}

/// Renders `markdown` as a final and checks what its messages' plain-text resends show
/// ([`Rendered::resend_text`]): together, whitespace aside, what
/// [`PlainText`](super::PlainText), a dialect
/// writing links as text, shows of it; and a message's
/// [`plain_linked`](Rendered::plain_linked) only where it adds an address to its `plain`.
///
/// For the property tests' Markdown; not fuzzed: where an image inside a link, or a link
/// without text, meets the rules on when an address is shown, the two may differ by that
/// address.
#[cfg(any(test, feature = "test-support"))]
pub fn check_resend(markdown: &str, dialect: &dyn Dialect, unit: LengthUnit, limit: usize) {
    let chunks = render(markdown, dialect, unit, limit);
    for chunk in &chunks {
        if let Some(linked) = &chunk.plain_linked {
            assert!(linked.len() > chunk.plain.len(), "{chunk:?}");
        }
    }
    let resent: Vec<&str> = chunks.iter().map(Rendered::resend_text).collect();
    let linked = render(markdown, &super::PlainText, unit, usize::MAX);
    let linked = linked.first().map(|r| r.plain.as_str()).unwrap_or_default();
    assert_eq!(
        collapse(&resent.join(" ")).replace(' ', ""),
        collapse(linked).replace(' ', ""),
        "{dialect:?}"
    );
}

/// Renders `markdown` as a preview and checks it: well-formed, and within the limit.
pub fn check_preview(markdown: &str, dialect: &dyn Dialect, unit: LengthUnit, limit: usize) {
    let preview = render_preview(markdown, dialect, unit, limit);
    check_markup(&preview, dialect, unit, limit);
    let len = unit.measure(&preview.plain);
    assert!(len <= limit, "{len} > {limit}: {preview:?}");
}

/// A message is well-formed in its dialect and shows exactly its `plain`, as far as the
/// dialect's check can tell without the platform.
fn check_markup(rendered: &Rendered, dialect: &dyn Dialect, unit: LengthUnit, limit: usize) {
    if let Err(why) = dialect.check(rendered, unit, limit) {
        panic!("{why} in {:?} ({dialect:?})", rendered.text);
    }
}

/// Whitespace runs as one space, the ends trimmed.
fn collapse(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}
