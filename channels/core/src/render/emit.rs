//! One message's markup, written from a range of the intermediate form.
//!
//! The styles of consecutive runs are stacks that come from one tree walk, so moving from
//! one run to the next closes the styles the next does not share (innermost first) and
//! opens its new ones: tags are always properly nested. At the message's start the first
//! run's styles are opened, at its end every open one is closed, so a style cut by a
//! message boundary is closed at the end of one message and opened again, the same, at
//! the start of the next (a code block with its language). How a style and a piece of
//! text are written is the dialect's [`Writer`].

use std::ops::Range;

use super::doc::{Doc, Frame, push_address};
use super::{Dialect, Rendered, Writer};

/// The message showing `doc.visible[range]` in `dialect` (without its
/// [`plain_linked`](Rendered::plain_linked): [`linked`]).
pub(super) fn emit(doc: &Doc, range: Range<usize>, dialect: &dyn Dialect) -> Rendered {
    let plain = doc
        .visible
        .get(range.clone())
        .unwrap_or_default()
        .to_owned();
    let text = tagged(doc, range, dialect.writer().as_mut());
    Rendered {
        text,
        plain,
        plain_linked: None,
    }
}

/// `doc.visible[range]` with `addresses` (the message's share of `doc.addresses`) each
/// after its link's text, one before the range at its start and one after it at its end;
/// `None` without addresses.
pub(super) fn linked(
    doc: &Doc,
    range: Range<usize>,
    addresses: &[(usize, String)],
) -> Option<String> {
    if addresses.is_empty() {
        return None;
    }
    let visible = doc.visible.get(range.clone()).unwrap_or_default();
    let grown: usize = addresses.iter().map(|(_, url)| url.len() + 3).sum();
    let mut out = String::with_capacity(visible.len() + grown);
    let mut from = range.start;
    for (at, url) in addresses {
        let at = (*at).min(range.end).max(from);
        out.push_str(doc.visible.get(from..at).unwrap_or_default());
        push_address(&mut out, url);
        from = at;
    }
    out.push_str(doc.visible.get(from..range.end).unwrap_or_default());
    Some(out)
}

fn tagged(doc: &Doc, range: Range<usize>, tags: &mut dyn Writer) -> String {
    let mut out = String::with_capacity(range.len() + range.len() / 4);
    let mut open: &[Frame] = &[];
    let first = doc.spans.partition_point(|s| s.range.end <= range.start);
    for span in doc.spans.iter().skip(first) {
        if span.range.start >= range.end {
            break;
        }
        let from = span.range.start.max(range.start);
        let to = span.range.end.min(range.end);
        let Some(piece) = doc.visible.get(from..to).filter(|p| !p.is_empty()) else {
            continue;
        };
        let shared = open
            .iter()
            .zip(&span.frames)
            .take_while(|(a, b)| a == b)
            .count();
        for frame in open[shared..].iter().rev() {
            tags.close(&mut out, frame);
        }
        for frame in &span.frames[shared..] {
            tags.open(&mut out, frame, piece);
        }
        tags.text(&mut out, piece, &span.frames);
        open = &span.frames;
    }
    for frame in open.iter().rev() {
        tags.close(&mut out, frame);
    }
    out
}
