//! Rendering the agent's Markdown in a platform's markup, split into messages that are each
//! well-formed.
//!
//! The agent writes Markdown; a platform shows its own markup (Telegram: a small HTML
//! subset) and counts its length limit on what the reader sees, after the markup is taken
//! out. Cutting Markdown source (as [`split`](crate::split) does) cannot keep every message
//! well-formed in such a markup, so this module works on the rendered form instead:
//!
//! 1. `doc.rs` parses the Markdown with pulldown-cmark (strikethrough, tables and task
//!    lists on) into a `Doc`: the visible text, and runs of it with the styles
//!    they are shown in (bold, italic, strike, inline code, link, code block with its
//!    language, block quote), outermost first. Constructs the markup has no tag for degrade
//!    to readable text there (headings bold, lists "• "/"1. " lines, tables " | " rows).
//!    Raw HTML in the Markdown is text.
//! 2. `cut.rs` cuts the visible text by its length in the platform's unit, preferring
//!    paragraph breaks, then line breaks, then spaces, then grapheme cluster boundaries
//!    (an emoji sequence stays whole), then code points.
//! 3. `emit.rs` writes each piece in the markup: every tag open at a cut is closed at the
//!    end of its message and opened again at the start of the next one (a code block with
//!    its language), so every message is well-formed on its own.
//!
//! Both text and markup come from one representation, so a message's [`Rendered::plain`]
//! is exactly its [`Rendered::text`] with the tags taken out and the entities decoded:
//! what the platform shows and measures.
//!
//! Children:
//! - `doc.rs`: Markdown to the intermediate form (visible text + styled runs).
//! - `cut.rs`: where messages are cut, by visible length.
//! - `emit.rs`: one message's markup from a range of the intermediate form.
//! - `check.rs` (tests and fuzzing only): a well-formedness checker as strict as Telegram,
//!   and the guarantees above as checks.
//! - `tests.rs`: unit and property tests.

mod cut;
mod doc;
mod emit;

#[cfg(any(test, feature = "fuzzing"))]
pub(crate) mod check;

use serde::Serialize;

use crate::capabilities::LengthUnit;

/// What a cut preview ends with, when the limit leaves room for it.
pub const ELLIPSIS: &str = "…";

/// The markup a channel shows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Markup {
    /// No markup, the text as written: the length layer splits the agent's text without
    /// rendering it (the console shows Markdown as it is). Rendered, it is the visible
    /// text only (links as "text (url)").
    Plain,
    /// No markup, the agent's Markdown rendered to readable text: the visible text of
    /// [`Markup::Plain`]'s rendering, headings, lists and tables as lines, links as
    /// "text (url)" (QQ, whose markdown needs permissions a bot rarely has).
    PlainText,
    /// Telegram's HTML parse mode (`parse_mode: "HTML"`).
    TelegramHtml,
    /// The markdown of a Feishu / Lark message card (JSON 1.0 `markdown` element): bold,
    /// italic, strikethrough, inline code, links and fenced code blocks; headings, lists
    /// and tables degrade to text as for Telegram, quotes show their text. `<` and `>`
    /// outside code blocks are written as the entities `&#60;` / `&#62;` (a card would
    /// read `<at id=all>` as a mention of everyone), and so are `` ` `` and `~` in text
    /// (`&#96;`, `&#126;`: a line of them would open a code fence and turn the code
    /// blocks after it inside out); each counts as the bytes it becomes, so a cut message
    /// stays within a limit on the card's size.
    FeishuCard,
    /// DingTalk's `sampleMarkdown`: bold, italic, links, quotes; what it has no syntax for
    /// is adapted as DeerFlow's DingTalk channel does: inline code in bold, a code block as
    /// quoted lines under its language in bold, strikethrough as its text; headings, lists
    /// and tables degrade to text as for Telegram. Each newline counts three bytes (it may
    /// start a quoted line), so a cut message stays within a limit on the written text.
    DingTalkMarkdown,
}

impl Markup {
    /// A text in this markup that shows exactly `plain`, nothing formatted: what a reply
    /// the platform could not parse is resent as.
    pub fn literal(self, plain: &str) -> String {
        let mut out = String::with_capacity(plain.len());
        match self {
            Markup::Plain | Markup::PlainText => out.push_str(plain),
            Markup::TelegramHtml => emit::escape_into(&mut out, plain, false),
            Markup::FeishuCard => emit::escape_card_into(&mut out, plain),
            Markup::DingTalkMarkdown => out.push_str(plain),
        }
        out
    }
}

impl Markup {
    /// Whether this markup shows text only (no formatting at all).
    fn is_text(self) -> bool {
        matches!(self, Markup::Plain | Markup::PlainText)
    }
}

/// How the cut counts a visible text: in the platform's unit, plus what escaping adds
/// where the limit is on the written form (a Feishu card's `&#60;`).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Measure {
    unit: LengthUnit,
    markup: Markup,
}

impl Measure {
    fn new(unit: LengthUnit, markup: Markup) -> Self {
        Self { unit, markup }
    }

    /// The length `text` counts for.
    pub(crate) fn measure(self, text: &str) -> usize {
        let count = |set: &[u8]| text.bytes().filter(|b| set.contains(b)).count();
        let grown = match self.markup {
            // `&#60;` `&#62;` `&#96;` are 5 bytes, `&#126;` 6; code counts them too (more
            // than it needs, never less).
            Markup::FeishuCard => 4 * count(b"<>`") + 5 * count(b"~"),
            Markup::DingTalkMarkdown => 2 * count(b"\n"),
            Markup::Plain | Markup::PlainText | Markup::TelegramHtml => 0,
        };
        self.unit.measure(text) + grown
    }

    /// Whether `text` measures at most `limit`, reading no further than the first
    /// character past it (the cut asks this of the whole rest of a reply at every message;
    /// measuring all of it each time made cutting a long reply into small messages
    /// quadratic).
    pub(crate) fn fits(self, text: &str, limit: usize) -> bool {
        let mut used = 0usize;
        for c in text.chars() {
            let unit = match self.unit {
                LengthUnit::Utf16 => c.len_utf16(),
                LengthUnit::Bytes => c.len_utf8(),
                LengthUnit::Chars => 1,
            };
            let grown = match (self.markup, c) {
                (Markup::FeishuCard, '<' | '>' | '`') => 4,
                (Markup::FeishuCard, '~') => 5,
                (Markup::DingTalkMarkdown, '\n') => 2,
                _ => 0,
            };
            used += unit + grown;
            if used > limit {
                return false;
            }
        }
        true
    }
}

/// One message of a rendered reply.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rendered {
    /// The message text in the markup (what is sent).
    pub text: String,
    /// What the reader sees: the text with the markup taken out (entities decoded).
    /// Platforms count their length limit on this (Telegram: "1-4096 characters after
    /// entities parsing"), and it is what a plain-text resend sends. For
    /// [`Markup::Plain`] it equals `text`.
    pub plain: String,
}

/// A final: `markdown` rendered in `markup`, split into messages whose `plain` is at most
/// `limit` `unit`s each.
///
/// A message never starts or ends with whitespace (a platform would trim it), except the
/// indentation of a code line at the start of a message; a message that would be blank is
/// not produced, so the blank text gives no message. Every message is within the limit
/// whenever the limit can hold one code point (4 bytes, 2 UTF-16 units, 1 char); below
/// that, a message over the limit holds a single code point.
pub fn render(markdown: &str, markup: Markup, unit: LengthUnit, limit: usize) -> Vec<Rendered> {
    let doc = doc::Doc::parse(markdown, markup, false);
    cut::chunks(&doc, Measure::new(unit, markup), limit)
        .into_iter()
        .map(|range| emit::emit(&doc, range, markup))
        .collect()
}

/// A partial of a reply still being written: ONE message, well-formed, cut to `limit`
/// `unit`s with [`ELLIPSIS`] if longer (the ellipsis counts within the limit; a limit
/// too small for it gives a prefix without it, possibly empty).
///
/// A fenced code block still open at the end of the text is shown as plain text, its
/// fence included, until it closes; the other constructs that are not balanced yet
/// (`` `code ``, `**bold`, a half-written `[link](`) are text to the Markdown parser
/// anyway. So the preview of a text being written does not flip between markups, and an
/// edit is never refused for its markup.
pub fn render_preview(markdown: &str, markup: Markup, unit: LengthUnit, limit: usize) -> Rendered {
    let doc = doc::Doc::parse(markdown, markup, true);
    let unit = Measure::new(unit, markup);
    let whole = cut::whole(&doc);
    if unit.measure(&doc.visible[whole.clone()]) <= limit {
        return emit::emit(&doc, whole, markup);
    }
    let room = limit.checked_sub(unit.measure(ELLIPSIS));
    let end = cut::prefix(&doc, whole.start, unit, room.unwrap_or(limit));
    let mut rendered = emit::emit(&doc, whole.start..end, markup);
    if room.is_some() {
        // After a card's closing fence, on a line of its own: on the fence's line it would
        // keep the block open.
        if markup == Markup::FeishuCard && ends_with_fence(&rendered.text) {
            rendered.text.push('\n');
        }
        rendered.text.push_str(ELLIPSIS);
        rendered.plain.push_str(ELLIPSIS);
    }
    rendered
}

/// Whether `text`'s last line is a code fence (three backticks or more, alone).
fn ends_with_fence(text: &str) -> bool {
    let last = text.rsplit('\n').next().unwrap_or_default();
    last.len() >= 3 && last.bytes().all(|b| b == b'`')
}

#[cfg(test)]
mod tests;
