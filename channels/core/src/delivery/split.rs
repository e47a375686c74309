//! Cutting text to a platform's length limit: finals are split into several messages,
//! previews (partial updates) are truncated to one.
//!
//! Pure functions, no I/O: the [`LimitLength`](super::LimitLength) layer applies them to
//! every text primitive, and they are tested here on their own.
//!
//! # Where a final is cut
//!
//! Lengths are measured in the channel's [`LengthUnit`] (UTF-16 code units for Telegram,
//! UTF-8 bytes for QQ, code points elsewhere). Each message is filled greedily and cut at
//! the best position that keeps it within the limit, in this order of preference:
//!
//! 1. after a newline, if that keeps the message at least half full;
//! 2. after whitespace, on the same condition;
//! 3. after the last newline, then the last whitespace, wherever it is (but never so that
//!    the message would hold only whitespace);
//! 4. anywhere between two grapheme clusters (a flag, a ZWJ emoji sequence or a letter
//!    with its combining marks is never torn apart);
//! 5. only when a single grapheme cluster is longer than the limit: between two code
//!    points. A cut is never inside a code point, and so never inside a UTF-16 surrogate
//!    pair.
//!
//! # Code fences
//!
//! When a cut falls inside a Markdown code fence (a line of three or more backticks or
//! tildes, up to three spaces indented), the message is closed with the same fence marker
//! and the next one starts by reopening it with the same info string (```` ```rust ````),
//! so both halves still render as code. The added lines count within the limit. A cut is
//! never placed inside a fence line, nor just after an opening or just before a closing
//! one (which would leave an empty block).
//!
//! # Guarantees (asserted by the property tests in `split/tests.rs`)
//!
//! - No chunk is empty, and the empty text gives no chunk.
//! - Every chunk is within the limit, whenever the limit can hold the longest code point
//!   of the text (4 bytes, 2 UTF-16 units or 1 char at most). Below that, a chunk that is
//!   over the limit is a single code point.
//! - Each [`Chunk`] is `head + input[body] + tail`, where `head` is empty or a reopening
//!   fence line and `tail` is empty or a closing fence line; the bodies are consecutive
//!   and cover the input, so removing the added lines gives the input back exactly, and
//!   without fences the chunks concatenate to the input.
//!
//! Degenerate limits (smaller than a fence line or a grapheme cluster) drop the fence repair
//! and then the grapheme rule, in that order; they never panic or loop.

use std::borrow::Cow;
use std::ops::Range;

use unicode_segmentation::UnicodeSegmentation;

use crate::capabilities::LengthUnit;

/// What a truncated preview ends with, when the limit leaves room for it.
pub const ELLIPSIS: &str = "…";

/// One message of a split text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Chunk {
    /// The message text: `head` bytes added, then the input's `body`, then `tail` bytes
    /// added.
    pub text: String,
    /// The bytes of the input this chunk carries.
    pub body: Range<usize>,
    /// How many leading bytes of `text` were added (a reopened code fence line).
    pub head: usize,
    /// How many trailing bytes of `text` were added (a closing code fence line).
    pub tail: usize,
}

/// Splits `text` into messages of at most `limit` `unit`s (see the module docs for where
/// it cuts and what it guarantees).
pub fn split(text: &str, unit: LengthUnit, limit: usize) -> Vec<String> {
    split_chunks(text, unit, limit)
        .into_iter()
        .map(|c| c.text)
        .collect()
}

/// [`split`], keeping track of which input bytes and which added fence lines each message
/// holds.
pub fn split_chunks(text: &str, unit: LengthUnit, limit: usize) -> Vec<Chunk> {
    if text.is_empty() {
        return Vec::new();
    }
    // The common case, a text that fits: one chunk, as the search below would find, without
    // scanning fences or grapheme clusters. Its byte length bounds its length in every unit.
    if text.len() <= limit || unit.measure(text) <= limit {
        return vec![Chunk {
            text: text.to_owned(),
            body: 0..text.len(),
            head: 0,
            tail: 0,
        }];
    }
    let fences = scan_fences(text);
    let mut chunks: Vec<Chunk> = Vec::new();
    let mut start = 0;
    // The fence the previous chunk closed, to reopen at the start of this one.
    let mut reopen: Option<&Fence<'_>> = None;
    while start < text.len() {
        let head = reopen.map(Fence::opener).unwrap_or_default();
        let head_len = unit.measure(&head);
        let mut found = None;
        if head_len < limit {
            let room = limit - head_len;
            let scope = Scope {
                text,
                unit,
                start,
                room,
                fences: &fences,
            };
            found = scope
                .find_cut(Granularity::Graphemes)
                .or_else(|| scope.find_cut(Granularity::Chars))
                .map(|cut| (cut, head.as_str()));
        }
        let (cut, head) = match found {
            Some(found) => found,
            // Degenerate limit: no room for the fence lines; cut plainly, and take back the
            // closing line of the previous chunk, since this one does not reopen the block.
            None => {
                if let Some(previous) = chunks.last_mut().filter(|c| c.tail > 0) {
                    let len = previous.text.len() - previous.tail;
                    previous.text.truncate(len);
                    previous.tail = 0;
                }
                let scope = Scope {
                    text,
                    unit,
                    start,
                    room: limit,
                    fences: &[],
                };
                let cut = scope
                    .find_cut(Granularity::Graphemes)
                    .or_else(|| scope.find_cut(Granularity::Chars))
                    .unwrap_or_else(|| Cut::single_char(text, start));
                (cut, "")
            }
        };
        let tail = cut
            .close
            .map(|fence| fence.closer(&text[..cut.end]))
            .unwrap_or_default();
        let mut chunk = String::with_capacity(head.len() + (cut.end - start) + tail.len());
        chunk.push_str(head);
        chunk.push_str(&text[start..cut.end]);
        chunk.push_str(&tail);
        chunks.push(Chunk {
            text: chunk,
            body: start..cut.end,
            head: head.len(),
            tail: tail.len(),
        });
        reopen = cut.close;
        start = cut.end;
    }
    chunks
}

/// `text` cut to at most `limit` `unit`s for a preview: unchanged when it fits, else its
/// longest prefix ending on a grapheme cluster boundary, followed by [`ELLIPSIS`] when the
/// limit leaves room for it. Never empty for a non-empty text: below one code point's
/// length, the first code point is returned as is.
pub fn truncate(text: &str, unit: LengthUnit, limit: usize) -> Cow<'_, str> {
    if unit.measure(text) <= limit {
        return Cow::Borrowed(text);
    }
    let with_mark = limit
        .checked_sub(unit.measure(ELLIPSIS))
        .map(|room| prefix_within(text, unit, room))
        .filter(|&end| end > 0);
    match with_mark {
        Some(end) => Cow::Owned(format!("{}{ELLIPSIS}", &text[..end])),
        None => {
            let end = match prefix_within(text, unit, limit) {
                0 => text.chars().next().map_or(0, char::len_utf8),
                end => end,
            };
            Cow::Borrowed(&text[..end])
        }
    }
}

/// The end of the longest prefix of `text` within `room` units, on a grapheme cluster
/// boundary if one fits, else on a code point boundary (0 if not even one fits).
fn prefix_within(text: &str, unit: LengthUnit, room: usize) -> usize {
    let by = |pieces: &mut dyn Iterator<Item = (usize, &str)>| {
        let mut used = 0;
        let mut end = 0;
        for (at, piece) in pieces {
            used += unit.measure(piece);
            if used > room {
                break;
            }
            end = at + piece.len();
        }
        end
    };
    match by(&mut text.grapheme_indices(true)) {
        0 => by(&mut text
            .char_indices()
            .map(|(at, c)| (at, char_str(text, at, c)))),
        end => end,
    }
}

fn char_str(text: &str, at: usize, c: char) -> &str {
    &text[at..at + c.len_utf8()]
}

/// A fenced code block of the input, by byte offsets.
#[derive(Debug)]
struct Fence<'a> {
    /// Start of the opening fence line.
    open_start: usize,
    /// Just after the opening fence line (its newline included).
    body_start: usize,
    /// Start of the closing fence line; the text's end when the block is never closed.
    close_start: usize,
    /// Just after the closing fence line; the text's end when the block is never closed.
    close_end: usize,
    /// The run of backticks or tildes that opened it.
    marker: &'a str,
    /// The info string after the marker (the language), trimmed.
    info: &'a str,
}

impl Fence<'_> {
    /// The line that reopens this block at the start of the next chunk.
    fn opener(&self) -> String {
        format!("{}{}\n", self.marker, self.info)
    }

    /// The line that closes this block after `before` (the chunk so far).
    fn closer(&self, before: &str) -> String {
        if before.ends_with('\n') {
            self.marker.to_owned()
        } else {
            format!("\n{}", self.marker)
        }
    }

    /// The length of [`Fence::closer`], in any unit (it is ASCII).
    fn closer_len(&self, before: &str) -> usize {
        self.marker.len() + usize::from(!before.ends_with('\n'))
    }
}

/// Finds the fenced code blocks of `text`, CommonMark style: a line of at least three
/// backticks (whose info string has no backtick) or tildes, indented by at most three
/// spaces, opens a block that a line of at least as many of the same character closes.
fn scan_fences(text: &str) -> Vec<Fence<'_>> {
    let mut fences = Vec::new();
    let mut open: Option<(usize, usize, &str, &str)> = None;
    let mut line_start = 0;
    for line in text.split_inclusive('\n') {
        let line_end = line_start + line.len();
        let content = line.trim_end_matches(['\n', '\r']);
        match open {
            None => {
                if let Some((marker, info)) = opening_fence(content) {
                    open = Some((line_start, line_end, marker, info));
                }
            }
            Some((open_start, body_start, marker, info)) => {
                if closes_fence(content, marker) {
                    fences.push(Fence {
                        open_start,
                        body_start,
                        close_start: line_start,
                        close_end: line_end,
                        marker,
                        info,
                    });
                    open = None;
                }
            }
        }
        line_start = line_end;
    }
    if let Some((open_start, body_start, marker, info)) = open {
        fences.push(Fence {
            open_start,
            body_start,
            close_start: text.len(),
            close_end: text.len(),
            marker,
            info,
        });
    }
    fences
}

/// The marker and info string of an opening fence line.
fn opening_fence(line: &str) -> Option<(&str, &str)> {
    let rest = strip_indent(line)?;
    let fence_char = rest.chars().next().filter(|c| matches!(c, '`' | '~'))?;
    let run = rest.len() - rest.trim_start_matches(fence_char).len();
    if run < 3 {
        return None;
    }
    let info = rest[run..].trim();
    if fence_char == '`' && info.contains('`') {
        return None;
    }
    Some((&rest[..run], info))
}

/// Whether `line` closes a block opened with `marker`.
fn closes_fence(line: &str, marker: &str) -> bool {
    let Some(rest) = strip_indent(line) else {
        return false;
    };
    let Some(fence_char) = marker.chars().next() else {
        return false;
    };
    let after = rest.trim_start_matches(fence_char);
    rest.len() - after.len() >= marker.len() && after.trim().is_empty()
}

/// `line` without its indentation, if it is indented by at most three spaces.
fn strip_indent(line: &str) -> Option<&str> {
    let rest = line.trim_start_matches(' ');
    (line.len() - rest.len() <= 3).then_some(rest)
}

/// Whether cuts may fall between grapheme clusters only, or between any code points.
#[derive(Clone, Copy)]
enum Granularity {
    Graphemes,
    Chars,
}

/// Where one chunk ends, and the fence it must close (and the next must reopen).
#[derive(Clone, Copy)]
struct Cut<'f, 'a> {
    end: usize,
    close: Option<&'f Fence<'a>>,
}

impl Cut<'_, '_> {
    /// The last resort: one code point, whatever its length.
    fn single_char(text: &str, start: usize) -> Self {
        let len = text[start..].chars().next().map_or(1, char::len_utf8);
        Self {
            end: start + len,
            close: None,
        }
    }
}

/// How a position inside the text relates to the code fences.
enum Place<'f, 'a> {
    /// Outside any block: a cut there needs no repair.
    Outside,
    /// Inside a block's content: a cut there closes and reopens the block.
    Inside(&'f Fence<'a>),
    /// Inside a fence line, or at the very edge of a block's content: no cut there.
    Avoid,
}

/// The search for one chunk's end.
struct Scope<'f, 'a> {
    text: &'a str,
    unit: LengthUnit,
    /// Where the chunk starts in `text`.
    start: usize,
    /// How many units the chunk's body and its closing fence line may use.
    room: usize,
    /// The fences to keep intact; empty when fence repair is off.
    fences: &'f [Fence<'a>],
}

impl<'f, 'a> Scope<'f, 'a> {
    /// The best cut after `start` (the whole rest, when it fits), or `None` when not one
    /// piece of the given granularity fits.
    fn find_cut(&self, granularity: Granularity) -> Option<Cut<'f, 'a>> {
        let rest = &self.text[self.start..];
        match granularity {
            Granularity::Graphemes => self.scan(rest.grapheme_indices(true)),
            Granularity::Chars => self.scan(
                rest.char_indices()
                    .map(|(at, c)| (at, char_str(rest, at, c))),
            ),
        }
    }

    fn scan(&self, pieces: impl Iterator<Item = (usize, &'a str)>) -> Option<Cut<'f, 'a>> {
        let mut used = 0;
        let mut after_newline: Option<Candidate<'f, 'a>> = None;
        let mut after_space: Option<Candidate<'f, 'a>> = None;
        let mut anywhere: Option<Candidate<'f, 'a>> = None;
        let mut previous: Option<&str> = None;
        // Whether the chunk has something besides whitespace yet: a cut at whitespace
        // before that would send a blank message, which platforms refuse.
        let mut visible = false;
        for (offset, piece) in pieces {
            if let Some(prev) = previous {
                let at = self.start + offset;
                if let Some(candidate) = self.candidate(at, used) {
                    if visible && prev.ends_with('\n') {
                        after_newline = Some(candidate);
                    } else if visible && prev.chars().all(char::is_whitespace) {
                        after_space = Some(candidate);
                    }
                    anywhere = Some(candidate);
                }
            }
            visible |= !piece.chars().all(char::is_whitespace);
            used += self.unit.measure(piece);
            if used > self.room {
                let half_full = |c: &Option<Candidate<'f, 'a>>| {
                    c.filter(|c| c.used.saturating_mul(2) >= self.room)
                };
                return half_full(&after_newline)
                    .or(half_full(&after_space))
                    .or(after_newline)
                    .or(after_space)
                    .or(anywhere)
                    .map(|c| c.cut);
            }
            previous = Some(piece);
        }
        // The whole rest fits (the text's own end needs no fence repair).
        previous.map(|_| Cut {
            end: self.text.len(),
            close: None,
        })
    }

    /// A cut at `at` with `used` units before it, if it is allowed and fits with its
    /// closing fence line.
    fn candidate(&self, at: usize, used: usize) -> Option<Candidate<'f, 'a>> {
        let close = match self.place(at) {
            Place::Outside => None,
            Place::Inside(fence) => Some(fence),
            Place::Avoid => return None,
        };
        // Fence lines are ASCII: their length is the same in every unit.
        let cost = match close {
            Some(fence) => used + fence.closer_len(&self.text[..at]),
            None => used,
        };
        (cost <= self.room).then_some(Candidate {
            cut: Cut { end: at, close },
            used,
        })
    }

    fn place(&self, at: usize) -> Place<'f, 'a> {
        let index = self.fences.partition_point(|f| f.close_end <= at);
        match self.fences.get(index) {
            Some(fence) if at > fence.open_start => {
                if at <= fence.body_start || at >= fence.close_start {
                    Place::Avoid
                } else {
                    Place::Inside(fence)
                }
            }
            _ => Place::Outside,
        }
    }
}

/// A possible cut and how many units precede it.
#[derive(Clone, Copy)]
struct Candidate<'f, 'a> {
    cut: Cut<'f, 'a>,
    used: usize,
}

#[cfg(any(test, feature = "fuzzing"))]
pub(crate) mod check;
#[cfg(test)]
mod tests;
