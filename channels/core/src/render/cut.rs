//! Where a rendered document is cut into messages, by the length of its visible text (as
//! [`Measure`] counts it).
//!
//! Each message is filled greedily and cut at the best boundary that keeps it within the
//! limit, in this order of preference:
//!
//! 1. after a blank line (a paragraph break), then after a newline, then after
//!    whitespace, if that keeps the message at least half full;
//! 2. the same, wherever it is;
//! 3. between two grapheme clusters (a flag, a skin-toned or ZWJ emoji, a letter with its
//!    combining marks stays whole);
//! 4. only when one grapheme cluster is longer than the limit: between two code points,
//!    so never inside a UTF-16 surrogate pair; and when not even one code point fits,
//!    after that one code point (the only way a message exceeds the limit).
//!
//! A message's range never starts or ends with whitespace, as a platform would trim it,
//! except that the indentation of a code line at a message's start is kept. A range that
//! would be blank is dropped.

use std::ops::Range;

use unicode_segmentation::UnicodeSegmentation;

use super::Measure;
use super::doc::Doc;

/// The ranges of `doc.visible` to send as messages of at most `limit` `unit`s.
pub(super) fn chunks(doc: &Doc, unit: Measure, limit: usize) -> Vec<Range<usize>> {
    let text = doc.visible.as_str();
    let mut ranges = Vec::new();
    let mut at = 0;
    loop {
        let start = skip_blank(doc, at);
        if start >= text.len() {
            return ranges;
        }
        let end = cut(text, start, unit, limit);
        let kept = start + text[start..end].trim_end().len();
        if kept > start {
            ranges.push(start..kept);
        }
        at = end;
    }
}

/// The whole visible text less the whitespace at its ends (a platform would trim it).
pub(super) fn whole(doc: &Doc) -> Range<usize> {
    let start = skip_blank(doc, 0);
    let end = doc.visible.trim_end().len().max(start);
    start..end
}

/// The end of the longest prefix of `doc.visible[start..]` within `room` units, cut on a
/// grapheme cluster boundary if one fits, else a code point boundary (`start` if none
/// does), less the whitespace it would end with.
pub(super) fn prefix(doc: &Doc, start: usize, unit: Measure, room: usize) -> usize {
    let text = doc.visible.get(start..).unwrap_or_default();
    let fit = |pieces: &mut dyn Iterator<Item = &str>| {
        let mut used = 0;
        let mut end = 0;
        for piece in pieces {
            used += unit.measure(piece);
            if used > room {
                break;
            }
            end += piece.len();
        }
        end
    };
    let end = match fit(&mut text.graphemes(true)) {
        0 => fit(&mut text.split_inclusive(|_| true)),
        end => end,
    };
    start + text[..end].trim_end().len()
}

/// Skips the whitespace at `at`: all of it, but for spaces and tabs in a code block.
fn skip_blank(doc: &Doc, mut at: usize) -> usize {
    let text = doc.visible.as_str();
    while let Some(c) = text.get(at..).and_then(|rest| rest.chars().next()) {
        let skip = matches!(c, '\n' | '\r') || (c.is_whitespace() && !doc.in_pre(at));
        if !skip {
            break;
        }
        at += c.len_utf8();
    }
    at
}

/// What precedes a boundary, best first.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    Paragraph,
    Line,
    Space,
}

/// The end of the message that starts at `start` (a non-whitespace character): past it,
/// and `text.len()` when the rest fits.
fn cut(text: &str, start: usize, unit: Measure, limit: usize) -> usize {
    let rest = &text[start..];
    if unit.fits(rest, limit) {
        return text.len();
    }
    // The last boundary of each kind that fits, with the units before it.
    let mut best: [Option<(usize, usize)>; 3] = [None; 3];
    let mut anywhere = None;
    let mut used = 0;
    let mut previous: Option<&str> = None;
    for (offset, grapheme) in rest.grapheme_indices(true) {
        if let Some(prev) = previous {
            let at = start + offset;
            let kind = if text[..at].ends_with("\n\n") || text[..at].ends_with("\n\r\n") {
                Some(Kind::Paragraph)
            } else if prev.ends_with('\n') {
                Some(Kind::Line)
            } else if prev.chars().all(char::is_whitespace) {
                Some(Kind::Space)
            } else {
                None
            };
            if let Some(kind) = kind {
                best[kind as usize] = Some((at, used));
            }
            anywhere = Some(at);
        }
        used += unit.measure(grapheme);
        if used > limit {
            break;
        }
        previous = Some(grapheme);
    }
    let half_full = best
        .iter()
        .flatten()
        .find(|(_, before)| before.saturating_mul(2) >= limit);
    if let Some(&(at, _)) = half_full.or(best.iter().flatten().next()) {
        return at;
    }
    if let Some(at) = anywhere {
        return at;
    }
    // Not one grapheme cluster fits: cut it between code points, at least after one.
    let mut end = start;
    let mut used = 0;
    for c in rest.chars() {
        used += unit.measure(c.encode_utf8(&mut [0; 4]));
        if used > limit && end > start {
            break;
        }
        end += c.len_utf8();
        if used > limit {
            break;
        }
    }
    end
}
