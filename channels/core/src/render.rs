//! Rendering the agent's Markdown in a platform's markup, split into messages that are each
//! well-formed.
//!
//! The agent writes Markdown; a platform shows its own markup (a small HTML subset, a
//! markdown of its own), which its adapter describes as a [`Dialect`], and counts its
//! length limit on what the reader sees, after the markup is taken out (or on the written
//! text, which [`Dialect::extra_units`] accounts for). Cutting Markdown source (as
//! [`split`](crate::split) does) cannot keep every message well-formed in such a markup,
//! so this module works on the rendered form instead:
//!
//! 1. `doc.rs` parses the Markdown with pulldown-cmark (strikethrough, tables and task
//!    lists on) into a `Doc`: the visible text, and runs of it with the styles
//!    they are shown in (bold, italic, strike, inline code, link, code block with its
//!    language, block quote), outermost first. Headings, lists and tables, which the
//!    markups have no tag for, degrade to readable text (headings bold, lists "• "/"1. "
//!    lines, tables " | " rows).
//!    Raw HTML in the Markdown is text.
//! 2. `cut.rs` cuts the visible text by its length in the platform's unit, preferring
//!    paragraph breaks, then line breaks, then spaces, then grapheme cluster boundaries
//!    (an emoji sequence stays whole), then code points.
//! 3. `emit.rs` writes each piece with the dialect's [`Writer`]: every tag open at a cut
//!    is closed at the end of its message and opened again at the start of the next one (a
//!    code block with its language), so every message is well-formed on its own.
//!
//! Both text and markup come from one representation, so a message's [`Rendered::plain`]
//! is exactly its [`Rendered::text`] with the tags taken out and the entities decoded:
//! what the platform shows and measures.
//!
//! Children:
//! - `dialect.rs`: the [`Dialect`] trait an adapter implements for its platform's markup,
//!   and the two the core knows, [`Plain`] and [`PlainText`].
//! - `markdown.rs`: CommonMark pieces several platforms' markdowns share (inline markers,
//!   a link's address, a fenced code block), for their writers, and their checks' reading
//!   of code blocks.
//! - `doc.rs`: Markdown to the intermediate form (visible text + styled runs).
//! - `cut.rs`: where messages are cut, by visible length.
//! - `emit.rs`: one message's markup from a range of the intermediate form.
//! - `check.rs` (tests, fuzzing and `test-support`): the guarantees above as checks, each
//!   message checked by its dialect's [`Dialect::check`].
//! - `conformance.rs` (tests and `test-support`): the property tests every dialect runs,
//!   the core's for its own, each adapter's for its dialect.
//! - `tests.rs`: unit tests with the core's dialects, and their properties.

mod cut;
mod dialect;
mod doc;
mod emit;
mod markdown;

#[cfg(any(test, feature = "fuzzing", feature = "test-support"))]
pub(crate) mod check;
#[cfg(any(test, feature = "test-support"))]
pub mod conformance;

pub use dialect::{Dialect, HTTP, Plain, PlainText, Writer};
pub use doc::Frame;
pub use markdown::{
    CodeFence, FenceReader, close_style, is_fence, longest_backticks, open_style, push_link_url,
};

use crate::capabilities::LengthUnit;

/// What a cut preview ends with, when the limit leaves room for it.
pub const ELLIPSIS: &str = "…";

/// How the cut counts a visible text: in the platform's unit, plus what the dialect's
/// [`Dialect::extra_units`] adds where the limit is on the written form (an entity).
#[derive(Clone, Copy)]
pub(crate) struct Measure<'d> {
    unit: LengthUnit,
    dialect: &'d dyn Dialect,
}

impl<'d> Measure<'d> {
    pub(crate) fn new(unit: LengthUnit, dialect: &'d dyn Dialect) -> Self {
        Self { unit, dialect }
    }

    /// The length `text` counts for.
    pub(crate) fn measure(self, text: &str) -> usize {
        let grown: usize = text.chars().map(|c| self.dialect.extra_units(c)).sum();
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
            used += unit + self.dialect.extra_units(c);
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
    /// Platforms count their length limit on this (an HTML dialect's "1-4096 characters
    /// after entities parsing"). For [`Plain`] it equals `text`.
    pub plain: String,
    /// What a plain-text resend of the message shows (the platform refused its markup),
    /// when the markup carries link addresses `plain` does not show: `plain` with each
    /// link's address in parentheses after its text ("text (url)"), as a dialect that
    /// [writes links as text](Dialect::links_as_text) shows them. `None` for a message
    /// without such a link, and for a preview: the resend is `plain`. It may be longer than
    /// the limit (the length layer splits it).
    pub plain_linked: Option<String>,
}

impl Rendered {
    /// What a plain-text resend of the message shows: [`Rendered::plain_linked`] where it
    /// has one, else [`Rendered::plain`].
    pub fn resend_text(&self) -> &str {
        self.plain_linked.as_deref().unwrap_or(&self.plain)
    }
}

/// A final: `markdown` rendered in `dialect`, split into messages whose `plain` is at most
/// `limit` `unit`s each.
///
/// A message never starts or ends with whitespace (a platform would trim it), except the
/// indentation of a code line at the start of a message; a message that would be blank is
/// not produced, so the blank text gives no message. Every message is within the limit
/// whenever the limit can hold one code point (4 bytes, 2 UTF-16 units, 1 char); below
/// that, a message over the limit holds a single code point.
pub fn render(
    markdown: &str,
    dialect: &dyn Dialect,
    unit: LengthUnit,
    limit: usize,
) -> Vec<Rendered> {
    let doc = doc::Doc::parse(markdown, dialect, false);
    let ranges = cut::chunks(&doc, Measure::new(unit, dialect), limit);
    let mut addresses = doc.addresses.as_slice();
    let mut messages = Vec::with_capacity(ranges.len());
    for (n, range) in ranges.iter().enumerate() {
        // A link's address goes with the message its text ends in (or the whitespace
        // after it, which the cut leaves out).
        let next = ranges.get(n + 1).map_or(usize::MAX, |next| next.start);
        let (own, later) = addresses.split_at(addresses.partition_point(|(at, _)| *at <= next));
        addresses = later;
        let mut message = emit::emit(&doc, range.clone(), dialect);
        message.plain_linked = emit::linked(&doc, range.clone(), own);
        messages.push(message);
    }
    messages
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
pub fn render_preview(
    markdown: &str,
    dialect: &dyn Dialect,
    unit: LengthUnit,
    limit: usize,
) -> Rendered {
    let doc = doc::Doc::parse(markdown, dialect, true);
    let unit = Measure::new(unit, dialect);
    let whole = cut::whole(&doc);
    if unit.measure(&doc.visible[whole.clone()]) <= limit {
        return emit::emit(&doc, whole, dialect);
    }
    let room = limit.checked_sub(unit.measure(ELLIPSIS));
    let end = cut::prefix(&doc, whole.start, unit, room.unwrap_or(limit));
    let mut rendered = emit::emit(&doc, whole.start..end, dialect);
    if room.is_some() {
        dialect.before_ellipsis(&mut rendered.text);
        rendered.text.push_str(ELLIPSIS);
        rendered.plain.push_str(ELLIPSIS);
    }
    rendered
}

#[cfg(test)]
mod tests;
