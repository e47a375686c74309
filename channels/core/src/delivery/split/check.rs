//! The splitter's guarantees as checks that panic with the offending chunk: the property
//! tests in `tests.rs` and the `markdown` fuzz target (through the crate's `fuzzing`
//! module) run every split through them.
//!
//! [`check_chunks`] asserts, for a text, a unit, a limit and the chunks split from them:
//! - the empty text gives no chunk, and no chunk (nor its body) is empty;
//! - every chunk measures at most the limit in its unit, except a chunk that is a single
//!   code point longer than the limit by itself (only possible below 4 bytes / 2 UTF-16
//!   units / 1 char, so never for a limit of at least 4);
//! - the bodies are consecutive and cover the input, and each chunk's text is exactly
//!   `head + input[body] + tail`, where `head` is empty or a reopening fence line
//!   (`marker info\n`) and `tail` is empty or a closing fence line (`marker` or
//!   `\nmarker`) with the same marker as the next chunk's head; so the chunks with the
//!   added fence lines removed concatenate to the input, and when no chunk has added lines
//!   the chunks themselves concatenate to the input;
//! - a text without fences never gets added lines, and when every grapheme cluster of a
//!   fence-free text fits the limit, every cut falls on a grapheme cluster boundary.
//!
//! [`check_truncate`] asserts that a preview is a prefix of the text (plus the ellipsis),
//! within the limit unless it is a single code point, and empty only for the empty text.

use unicode_segmentation::UnicodeSegmentation;

use super::{Chunk, ELLIPSIS, opening_fence, scan_fences};
use crate::capabilities::LengthUnit;

/// Every guarantee of the module docs; panics with the offending chunk.
pub fn check_chunks(input: &str, unit: LengthUnit, limit: usize, chunks: &[Chunk]) {
    assert_eq!(input.is_empty(), chunks.is_empty(), "{chunks:?}");
    let mut next = 0;
    for (i, chunk) in chunks.iter().enumerate() {
        assert!(!chunk.body.is_empty(), "empty body: {chunk:?}");
        assert_eq!(chunk.body.start, next, "bodies not consecutive: {chunks:?}");
        next = chunk.body.end;
        let (head, rest) = chunk.text.split_at(chunk.head);
        let (body, tail) = rest.split_at(rest.len() - chunk.tail);
        assert_eq!(body, &input[chunk.body.clone()], "{chunk:?}");
        let len = unit.measure(&chunk.text);
        let single_over = chunk.text.chars().count() == 1 && len > limit;
        assert!(len <= limit || single_over, "{len} > {limit}: {chunk:?}");
        assert!(len <= limit || limit < 4, "{len} > {limit}: {chunk:?}");
        if !head.is_empty() {
            assert!(head.ends_with('\n'), "{chunk:?}");
            assert!(
                opening_fence(head.trim_end_matches('\n')).is_some(),
                "{chunk:?}"
            );
        }
        if !tail.is_empty() {
            let marker = tail.strip_prefix('\n').unwrap_or(tail);
            assert!(opening_fence(marker).is_some_and(|(m, info)| m == marker && info.is_empty()));
            assert!(tail.starts_with('\n') || body.ends_with('\n'), "{chunk:?}");
            let reopened = &chunks[i + 1].text[..chunks[i + 1].head];
            assert!(reopened.starts_with(marker), "{chunks:?}");
        }
    }
    assert_eq!(next, input.len());
    if chunks.iter().all(|c| c.head == 0 && c.tail == 0) {
        let joined: String = chunks.iter().map(|c| c.text.as_str()).collect();
        assert_eq!(joined, input);
    }
    if scan_fences(input).is_empty() {
        assert!(chunks.iter().all(|c| c.head == 0 && c.tail == 0));
        let fits = input.graphemes(true).all(|g| unit.measure(g) <= limit);
        if fits {
            let bounds: Vec<usize> = input
                .grapheme_indices(true)
                .map(|(at, _)| at)
                .chain([input.len()])
                .collect();
            for chunk in chunks {
                assert!(
                    bounds.binary_search(&chunk.body.end).is_ok(),
                    "cut in a grapheme: {chunk:?}"
                );
            }
        }
    }
}

/// A preview `cut` of `text` keeps [`super::truncate`]'s promises.
pub fn check_truncate(text: &str, unit: LengthUnit, limit: usize, cut: &str) {
    let body = cut
        .strip_suffix(ELLIPSIS)
        .filter(|_| unit.measure(text) > limit);
    let body = body.unwrap_or(cut);
    assert!(
        text.starts_with(body),
        "{cut:?} is not a prefix of the text"
    );
    let len = unit.measure(cut);
    assert!(
        len <= limit || cut.chars().count() == 1,
        "{len} > {limit}: {cut:?}"
    );
    assert_eq!(text.is_empty(), cut.is_empty(), "{cut:?}");
}
