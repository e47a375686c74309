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
        Markup::Plain | Markup::PlainText => plain.clone(),
        Markup::TelegramHtml => tagged(doc, range, &mut TelegramHtml),
        Markup::FeishuCard => tagged(doc, range, &mut FeishuCard::default()),
        Markup::DingTalkMarkdown => tagged(doc, range, &mut DingTalk),
    };
    Rendered { text, plain }
}

/// How one markup writes its styles and its text.
trait Tags {
    /// Opens `frame` for a run whose first piece is `piece`.
    fn open(&mut self, out: &mut String, frame: &Frame, piece: &str);
    fn close(&mut self, out: &mut String, frame: &Frame);
    /// Writes visible `text` shown in `frames` (outermost first).
    fn text(&mut self, out: &mut String, text: &str, frames: &[Frame]);
}

struct TelegramHtml;

impl Tags for TelegramHtml {
    fn open(&mut self, out: &mut String, frame: &Frame, _: &str) {
        open_tag(out, frame);
    }

    fn close(&mut self, out: &mut String, frame: &Frame) {
        close(out, frame);
    }

    fn text(&mut self, out: &mut String, text: &str, _: &[Frame]) {
        escape_into(out, text, false);
    }
}

/// A Feishu card's markdown. Quotes have no syntax there (JSON 1.0), so they show their
/// text; code uses a fence longer than any run of backticks it holds.
#[derive(Default)]
struct FeishuCard {
    /// The fence of the code block open.
    fence: String,
    /// A code block was just closed: what follows starts on a line of its own, or the
    /// closing fence would not close it.
    after_fence: bool,
}

impl FeishuCard {
    /// Starts a new line after a closing fence, unless `next` does.
    fn leave_fence(&mut self, out: &mut String, next: &str) {
        if std::mem::take(&mut self.after_fence) && !next.starts_with('\n') {
            out.push('\n');
        }
    }
}

/// Whether what is written next starts a line (as a fence could: after at most three
/// spaces).
fn at_line_start(out: &str) -> bool {
    let line = out.rsplit('\n').next().unwrap_or_default();
    line.len() <= 3 && line.bytes().all(|b| b == b' ')
}

/// The longest run of backticks in `text`.
fn longest_backticks(text: &str) -> usize {
    text.split(|c| c != '`')
        .map(str::len)
        .max()
        .unwrap_or_default()
}

impl Tags for FeishuCard {
    fn open(&mut self, out: &mut String, frame: &Frame, piece: &str) {
        self.leave_fence(out, piece);
        match frame {
            Frame::Quote => {}
            Frame::Pre(language) => {
                // A fence opens a block only at a line's start (a list item's marker may
                // precede it).
                if !out.is_empty() && !out.ends_with('\n') {
                    out.push('\n');
                }
                self.fence = "`".repeat(longest_backticks(piece).max(2) + 1);
                out.push_str(&self.fence);
                out.push_str(language.as_deref().unwrap_or_default());
                out.push('\n');
            }
            Frame::Bold => out.push_str("**"),
            Frame::Italic => out.push('*'),
            Frame::Strike => out.push_str("~~"),
            Frame::Link(_) => out.push('['),
            // Written with its text, which decides the fence.
            Frame::Code => {}
        }
    }

    fn close(&mut self, out: &mut String, frame: &Frame) {
        match frame {
            Frame::Quote | Frame::Code => {}
            Frame::Pre(_) => {
                out.push('\n');
                out.push_str(&self.fence);
                self.after_fence = true;
            }
            Frame::Bold => out.push_str("**"),
            Frame::Italic => out.push('*'),
            Frame::Strike => out.push_str("~~"),
            Frame::Link(url) => {
                out.push_str("](");
                push_url(out, url);
                out.push(')');
            }
        }
    }

    fn text(&mut self, out: &mut String, text: &str, frames: &[Frame]) {
        self.leave_fence(out, text);
        if frames.iter().any(|f| matches!(f, Frame::Pre(_))) {
            out.push_str(text);
        } else if frames.last() == Some(&Frame::Code) {
            let longest = longest_backticks(text);
            if longest >= 2 && at_line_start(out) {
                // Its fence would be three backticks or more at a line's start: a card
                // reads that as a code block opening. Shown as text instead.
                escape_card_into(out, text);
                return;
            }
            let fence = "`".repeat(longest + 1);
            let pad = if longest > 0 { " " } else { "" };
            out.push_str(&fence);
            out.push_str(pad);
            escape_card_tags_into(out, text);
            out.push_str(pad);
            out.push_str(&fence);
        } else {
            escape_card_into(out, text);
        }
    }
}

/// DingTalk's `sampleMarkdown`. Quotes and code blocks are quoted lines (`> `), every line
/// of them; inline code is bold (or its text, inside bold); strikethrough is its text.
struct DingTalk;

fn quoted(frames: &[Frame]) -> bool {
    frames
        .iter()
        .any(|f| matches!(f, Frame::Quote | Frame::Pre(_)))
}

impl Tags for DingTalk {
    fn open(&mut self, out: &mut String, frame: &Frame, _: &str) {
        match frame {
            Frame::Quote => quote_line(out),
            Frame::Pre(language) => {
                quote_line(out);
                if let Some(language) = language {
                    out.push_str("**");
                    out.push_str(language);
                    out.push_str("**\n> ");
                }
            }
            Frame::Bold => out.push_str("**"),
            Frame::Italic => out.push('*'),
            Frame::Link(_) => out.push('['),
            Frame::Strike | Frame::Code => {}
        }
    }

    fn close(&mut self, out: &mut String, frame: &Frame) {
        match frame {
            Frame::Bold => out.push_str("**"),
            Frame::Italic => out.push('*'),
            Frame::Link(url) => {
                out.push_str("](");
                push_url(out, url);
                out.push(')');
            }
            Frame::Quote | Frame::Pre(_) | Frame::Strike | Frame::Code => {}
        }
    }

    fn text(&mut self, out: &mut String, text: &str, frames: &[Frame]) {
        let bold = frames.last() == Some(&Frame::Code) && !frames.contains(&Frame::Bold);
        if bold {
            out.push_str("**");
        }
        if quoted(frames) {
            out.push_str(&text.replace('\n', "\n> "));
        } else {
            out.push_str(text);
        }
        if bold {
            out.push_str("**");
        }
    }
}

/// Starts a quoted line: on a line of its own (a list item's marker may precede it), once
/// (a code block inside a quote is quoted once).
fn quote_line(out: &mut String) {
    if out.ends_with("> ") {
        return;
    }
    if !out.is_empty() && !out.ends_with('\n') {
        out.push('\n');
    }
    out.push_str("> ");
}

/// A link's address with the characters that would end a Markdown destination encoded,
/// and `<` and `>` too, which a card would read as the start of a tag (`<at id=all>`).
fn push_url(out: &mut String, url: &str) {
    for c in url.chars() {
        match c {
            '(' => out.push_str("%28"),
            ')' => out.push_str("%29"),
            ' ' => out.push_str("%20"),
            '<' => out.push_str("%3C"),
            '>' => out.push_str("%3E"),
            c => out.push(c),
        }
    }
}

/// Appends `text` with `<`, `>`, `` ` `` and `~` as the entities a Feishu card shows as
/// the characters: text never becomes a card tag such as `<at id=all>`, nor a code fence
/// (a line of backticks or tildes), which would turn the code blocks after it inside out
/// and leave their raw `<` outside code.
pub(super) fn escape_card_into(out: &mut String, text: &str) {
    for c in text.chars() {
        match c {
            '`' => out.push_str("&#96;"),
            '~' => out.push_str("&#126;"),
            c => escape_card_tag(out, c),
        }
    }
}

/// [`escape_card_into`] inside an inline code span, whose own fence is longer than any
/// backtick run in it: only `<` and `>`.
fn escape_card_tags_into(out: &mut String, text: &str) {
    text.chars().for_each(|c| escape_card_tag(out, c));
}

fn escape_card_tag(out: &mut String, c: char) {
    match c {
        '<' => out.push_str("&#60;"),
        '>' => out.push_str("&#62;"),
        c => out.push(c),
    }
}

fn tagged(doc: &Doc, range: Range<usize>, tags: &mut dyn Tags) -> String {
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
