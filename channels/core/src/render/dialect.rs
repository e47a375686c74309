//! The markup a channel shows, as an adapter declares it: a [`Dialect`] says how the
//! agent's Markdown is written in the platform's markup, and the renderer, the cut and the
//! length layer ask it nothing else. The core knows two, neither a platform's own:
//! [`Plain`] and [`PlainText`]; a platform with formatting implements its dialect in its
//! adapter crate and names it in `Capabilities::markup`.
//!
//! A dialect is a unit struct behind `&'static dyn Dialect`, so capabilities stay a
//! `const`; two dialects are equal when their [`Dialect::name`]s are.

use std::fmt;

use serde::{Serialize, Serializer};

use super::Rendered;
use super::doc::Frame;
use crate::capabilities::LengthUnit;

/// How the agent's Markdown is written in one platform's markup.
///
/// The renderer parses the Markdown into visible text and runs of it in styles
/// ([`Frame`]s), cuts it by visible length, and asks a [`Writer`] from
/// [`Dialect::writer`] to write each message. A dialect only says how styles and text
/// are written and what its platform counts.
pub trait Dialect: Send + Sync + 'static {
    /// A short name, unique among dialects (`snake_case`): what capabilities show and
    /// compare.
    fn name(&self) -> &'static str;

    /// A writer for one message (a fresh one per message: it may keep state, such as an
    /// open code fence).
    fn writer(&self) -> Box<dyn Writer>;

    /// A text in this markup that shows exactly `plain`, nothing formatted: what a reply
    /// the platform could not parse is resent as. By default what a fresh [`Writer`]
    /// writes for `plain` in no style: the dialect's escaping of text, written once.
    fn literal(&self, plain: &str) -> String {
        let mut out = String::with_capacity(plain.len());
        self.writer().text(&mut out, plain, &[]);
        out
    }

    /// How many units more than itself the character `c` counts for when the platform's
    /// limit is on the written text: what escaping `c` adds (its entity's length less
    /// one), or what it may start (a quoted line's `> `). The cut counts it, so a message
    /// stays within the limit as written, and [`Dialect::literal`] of its visible text
    /// too. By default 0: the limit is on what the reader sees.
    fn extra_units(&self, c: char) -> usize {
        let _ = c;
        0
    }

    /// The schemes a link's address may start with (ASCII case-insensitive) to be a link;
    /// any other link shows its text only. An image's address must be `http(s)` wherever.
    /// By default `http://` and `https://`.
    fn link_schemes(&self) -> &'static [&'static str] {
        HTTP
    }

    /// Whether links are written as text, their address in parentheses after it
    /// ("text (url)"), instead of as [`Frame::Link`]s. By default not.
    fn links_as_text(&self) -> bool {
        false
    }

    /// Whether the length layer renders the agent's Markdown at all. When not, a text
    /// passes as written, split on its source (a terminal shows Markdown as it is). By
    /// default it does.
    fn renders_markdown(&self) -> bool {
        true
    }

    /// Writes what must come before the [`ELLIPSIS`](super::ELLIPSIS) of a cut preview
    /// for it to show as text (a line break after a closing code fence, on whose line it
    /// would keep the block open). By default nothing.
    fn before_ellipsis(&self, text: &mut String) {
        let _ = text;
    }

    /// Why `message` would not be accepted as the platform parses this markup, or would
    /// not show exactly its [`Rendered::plain`]; `message` was cut to `limit` `unit`s.
    /// As strict as the platform, or as a check can be without it. For the tests and
    /// the fuzz targets (the renderer's guarantees, `render::check_final`), never called
    /// while delivering.
    fn check(&self, message: &Rendered, unit: LengthUnit, limit: usize) -> Result<(), String>;
}

/// The schemes every dialect takes a link in.
pub const HTTP: &[&str] = &["http://", "https://"];

/// How one message's styles and text are written.
///
/// The renderer calls it in order: for each run of visible text, [`Writer::close`] for
/// every style the run does not share with the one before (innermost first),
/// [`Writer::open`] for each new one (outermost first), then [`Writer::text`]; at the end
/// of the message every open style is closed. Styles are always properly nested.
pub trait Writer {
    /// Opens `frame` for a run whose first piece of text is `piece`.
    fn open(&mut self, out: &mut String, frame: &Frame, piece: &str);
    /// Closes `frame`.
    fn close(&mut self, out: &mut String, frame: &Frame);
    /// Writes visible `text` shown in `frames` (outermost first).
    fn text(&mut self, out: &mut String, text: &str, frames: &[Frame]);
}

/// Writes the visible text only, every style left out.
struct TextOnly;

impl Writer for TextOnly {
    fn open(&mut self, _: &mut String, _: &Frame, _: &str) {}

    fn close(&mut self, _: &mut String, _: &Frame) {}

    fn text(&mut self, out: &mut String, text: &str, _: &[Frame]) {
        out.push_str(text);
    }
}

/// Why a text-only message is not its visible text.
fn check_text(message: &Rendered) -> Result<(), String> {
    if message.text == message.plain {
        Ok(())
    } else {
        Err(format!(
            "text {:?} != plain {:?}",
            message.text, message.plain
        ))
    }
}

/// No markup, the text as written: the length layer splits the agent's text without
/// rendering it (the console shows Markdown as it is). Rendered, it is the visible text
/// only (links as "text (url)").
#[derive(Clone, Copy, Debug, Default)]
pub struct Plain;

impl Dialect for Plain {
    fn name(&self) -> &'static str {
        "plain"
    }

    fn writer(&self) -> Box<dyn Writer> {
        Box::new(TextOnly)
    }

    fn links_as_text(&self) -> bool {
        true
    }

    fn renders_markdown(&self) -> bool {
        false
    }

    fn check(&self, message: &Rendered, _: LengthUnit, _: usize) -> Result<(), String> {
        check_text(message)
    }
}

/// No markup, the agent's Markdown rendered to readable text: the visible text of
/// [`Plain`]'s rendering, headings, lists and tables as lines, links as "text (url)" (for
/// a platform whose markdown a bot can rarely use).
#[derive(Clone, Copy, Debug, Default)]
pub struct PlainText;

impl Dialect for PlainText {
    fn name(&self) -> &'static str {
        "plain_text"
    }

    fn writer(&self) -> Box<dyn Writer> {
        Box::new(TextOnly)
    }

    fn links_as_text(&self) -> bool {
        true
    }

    fn check(&self, message: &Rendered, _: LengthUnit, _: usize) -> Result<(), String> {
        check_text(message)
    }
}

impl fmt::Debug for dyn Dialect {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl PartialEq for dyn Dialect {
    fn eq(&self, other: &Self) -> bool {
        self.name() == other.name()
    }
}

impl Eq for dyn Dialect {}

impl Serialize for dyn Dialect {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.name())
    }
}
