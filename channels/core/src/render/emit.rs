//! One message's markup, written from a range of the intermediate form.
//!
//! The styles of consecutive runs are stacks that come from one tree walk, so moving from
//! one run to the next closes the styles the next does not share (innermost first) and
//! opens its new ones: tags are always properly nested. At the message's start the first
//! run's styles are opened, at its end every open one is closed, so a style cut by a
//! message boundary is closed at the end of one message and opened again, the same, at
//! the start of the next (a code block with its language).

use std::ops::Range;

use super::doc::{Doc, Frame};
use super::{Markup, Rendered};

/// The message showing `doc.visible[range]` in `markup`.
pub(super) fn emit(doc: &Doc, range: Range<usize>, markup: Markup) -> Rendered {
    let plain = doc
        .visible
        .get(range.clone())
        .unwrap_or_default()
        .to_owned();
    let text = match markup {
        Markup::Plain => plain.clone(),
        Markup::TelegramHtml => telegram_html(doc, range),
    };
    Rendered { text, plain }
}

fn telegram_html(doc: &Doc, range: Range<usize>) -> String {
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
            close(&mut out, frame);
        }
        for frame in &span.frames[shared..] {
            open_tag(&mut out, frame);
        }
        escape_into(&mut out, piece, false);
        open = &span.frames;
    }
    for frame in open.iter().rev() {
        close(&mut out, frame);
    }
    out
}

fn open_tag(out: &mut String, frame: &Frame) {
    match frame {
        Frame::Quote => out.push_str("<blockquote>"),
        Frame::Pre(Some(language)) => {
            out.push_str("<pre><code class=\"language-");
            escape_into(out, language, true);
            out.push_str("\">");
        }
        Frame::Pre(None) => out.push_str("<pre><code>"),
        Frame::Bold => out.push_str("<b>"),
        Frame::Italic => out.push_str("<i>"),
        Frame::Strike => out.push_str("<s>"),
        Frame::Link(url) => {
            out.push_str("<a href=\"");
            escape_into(out, url, true);
            out.push_str("\">");
        }
        Frame::Code => out.push_str("<code>"),
    }
}

fn close(out: &mut String, frame: &Frame) {
    out.push_str(match frame {
        Frame::Quote => "</blockquote>",
        Frame::Pre(_) => "</code></pre>",
        Frame::Bold => "</b>",
        Frame::Italic => "</i>",
        Frame::Strike => "</s>",
        Frame::Link(_) => "</a>",
        Frame::Code => "</code>",
    });
}

/// Appends `text` with `&`, `<` and `>` escaped, and `"` too in an attribute value.
pub(super) fn escape_into(out: &mut String, text: &str, attribute: bool) {
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' if attribute => out.push_str("&quot;"),
            c => out.push(c),
        }
    }
}
