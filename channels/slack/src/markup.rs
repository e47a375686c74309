//! Slack's `mrkdwn` as a renderer dialect: the markup the delivery engine writes the
//! agent's Markdown in for this channel ([`SlackMrkdwn`]). The core's renderer parses the
//! Markdown once and cuts it into messages by visible length; this dialect only says how
//! each style and each piece of text is written.
//!
//! - Text has `&`, `<` and `>` escaped as `&amp;`, `&lt;`, `&gt;` (only those three, as
//!   Slack asks: an unescaped `<` would start a mention or a link), code included.
//! - Bold `*b*`, italic `_i_`, strikethrough `~s~`, inline code `` `c` ``, a code block
//!   between triple backticks (no language tag: Slack shows none), a quote as `> ` lines.
//!   Headings (bold lines), lists (`•` and numbers) and tables degrade to text in the
//!   core's renderer.
//! - A link is `<url|text>`, or `<url>` when its text is its address; in the address `&`
//!   is escaped, and `|`, `<`, `>` and spaces are percent-encoded, so it cannot end early.
//!   Styles inside a link's text are left out (Slack shows a link's text plain).
//! - Slack formats a marker only at a word boundary (`a*b*c` stays as typed), so a style
//!   that opens or closes against a letter, a digit or another marker is separated from it
//!   by a zero-width space (U+200B), which shows nothing.
//! - Slack has no escape for `*`, `_`, `~` and `` ` ``: one the agent wrote as text stays
//!   as written and may format if it pairs up. Inline code that contains a backtick is
//!   written without its markers; a code block's ```` ``` ```` is broken by a zero-width
//!   space.
//!
//! Slack refuses a `chat.update` whose `text` is over 4,000 bytes of UTF-8 (`msg_too_long`;
//! its reference says "cannot exceed 4,000 characters", live calls count bytes), and a
//! streamed message is finished by such an update, so every message the adapter writes is
//! at most [`MAX_MESSAGE_BYTES`], posts too (Slack has recommended 4,000 for a post since
//! long before it began to refuse longer edits). Answers are split at
//! [`DEFAULT_MESSAGE_BYTES`] of visible text unless `max_message_bytes` says otherwise,
//! counted in bytes like the cap, so an answer in Chinese is split as soon as one in
//! English would fill a message. Each escaped character counts its entity's length, so a
//! cut message stays within the cap as written but for its markers and link addresses:
//! what those grow past the cap is cut again into follow-up messages ([`slack_texts`],
//! child `fit`).
//!
//! Children:
//! - `check.rs`: what Slack would show of a message ([`Dialect::check`]).
//! - `fit.rs`: written `mrkdwn` cut to Slack's cap, well-formed.
//! - `tests.rs`: the output construct by construct, the 45,000-character split, and the
//!   renderer's properties for this dialect.

mod check;
mod fit;

use im_bridge_channel::LengthUnit;
use im_bridge_channel::render::{Dialect, Frame, Rendered, Writer, push_link_url};

/// The longest `text` the adapter writes in one message, in bytes of UTF-8: the most
/// `chat.update` takes.
pub const MAX_MESSAGE_BYTES: usize = 4_000;
/// Where answers are split by default, in bytes of visible text: under
/// [`MAX_MESSAGE_BYTES`], with room for markers and link addresses.
pub const DEFAULT_MESSAGE_BYTES: usize = 3_500;

/// `text` (written `mrkdwn`) as the messages Slack takes: itself when it is at most
/// [`MAX_MESSAGE_BYTES`], else cut into several of at most that (child `fit`).
pub(crate) fn slack_texts(text: &str) -> Vec<String> {
    fit::within_limit(text, MAX_MESSAGE_BYTES)
}

/// Separates a marker from a letter next to it, so Slack still reads it as a marker.
const BOUNDARY: char = '\u{200B}';

/// Slack's `mrkdwn` (see the module docs).
#[derive(Clone, Copy, Debug, Default)]
pub struct SlackMrkdwn;

impl Dialect for SlackMrkdwn {
    fn name(&self) -> &'static str {
        "slack_mrkdwn"
    }

    fn writer(&self) -> Box<dyn Writer> {
        Box::new(MrkdwnWriter::default())
    }

    fn extra_units(&self, c: char) -> usize {
        match c {
            '&' => "&amp;".len() - 1,
            '<' | '>' => "&lt;".len() - 1,
            _ => 0,
        }
    }

    fn link_schemes(&self) -> &'static [&'static str] {
        &["http://", "https://", "mailto:"]
    }

    fn check(&self, message: &Rendered, _: LengthUnit, _: usize) -> Result<(), String> {
        check::check(message)
    }
}

/// How one open style was written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Written {
    /// Its markers were written.
    Marked,
    /// Nothing was written for it (a style inside a link, code holding a backtick).
    Silent,
    /// A link written as `<url|`: its text follows, then `>`.
    Link,
    /// A link written as `<url>`: its text is not written again.
    BareLink,
}

/// Writes one message of `mrkdwn`.
#[derive(Default)]
struct MrkdwnWriter {
    /// How each open style was written, outermost first.
    open: Vec<Written>,
    /// A marker was just closed: a word character right after it needs a [`BOUNDARY`].
    closed: bool,
}

impl MrkdwnWriter {
    /// Whether a link is open: styles inside it are not written.
    fn in_link(&self) -> bool {
        self.open
            .iter()
            .any(|w| matches!(w, Written::Link | Written::BareLink))
    }

    /// Writes an opening marker, after a [`BOUNDARY`] when it would touch a word or the
    /// closing marker of another style (markers of styles opened together may touch).
    fn marker(&self, out: &mut String, marker: &str) -> Written {
        let touching = out
            .chars()
            .next_back()
            .is_some_and(|c| c.is_alphanumeric() || self.closed && needs_boundary(c));
        if touching {
            out.push(BOUNDARY);
        }
        out.push_str(marker);
        Written::Marked
    }
}

/// Whether a marker next to `c` must be separated from it.
fn needs_boundary(c: char) -> bool {
    c.is_alphanumeric() || matches!(c, '*' | '_' | '~' | '`')
}

impl Writer for MrkdwnWriter {
    fn open(&mut self, out: &mut String, frame: &Frame, piece: &str) {
        let written = if self.in_link() {
            Written::Silent
        } else {
            match frame {
                Frame::Quote => {
                    quote_line(out);
                    Written::Marked
                }
                Frame::Pre(_) => self.marker(out, "```"),
                Frame::Bold => self.marker(out, "*"),
                Frame::Italic => self.marker(out, "_"),
                Frame::Strike => self.marker(out, "~"),
                Frame::Code if piece.contains('`') => Written::Silent,
                Frame::Code => self.marker(out, "`"),
                Frame::Link(url) => {
                    out.push('<');
                    push_address(out, url);
                    if bare(url, piece) {
                        Written::BareLink
                    } else {
                        out.push('|');
                        Written::Link
                    }
                }
            }
        };
        self.open.push(written);
        self.closed = false;
    }

    fn close(&mut self, out: &mut String, frame: &Frame) {
        let written = self.open.pop().unwrap_or(Written::Silent);
        self.closed = false;
        match (written, frame) {
            (Written::Silent, _) | (Written::Marked, Frame::Quote) => {}
            (Written::Link | Written::BareLink, _) | (Written::Marked, Frame::Link(_)) => {
                out.push('>');
            }
            (Written::Marked, Frame::Pre(_)) => {
                if out.ends_with('`') {
                    out.push(BOUNDARY);
                }
                out.push_str("```");
                self.closed = true;
            }
            (Written::Marked, Frame::Bold | Frame::Italic | Frame::Strike | Frame::Code) => {
                out.push(match frame {
                    Frame::Bold => '*',
                    Frame::Italic => '_',
                    Frame::Strike => '~',
                    _ => '`',
                });
                self.closed = true;
            }
        }
    }

    fn text(&mut self, out: &mut String, text: &str, frames: &[Frame]) {
        if self.open.contains(&Written::BareLink) {
            return;
        }
        if std::mem::take(&mut self.closed) && text.chars().next().is_some_and(needs_boundary) {
            out.push(BOUNDARY);
        }
        let pre = frames.iter().any(|f| matches!(f, Frame::Pre(_)));
        let quoted = frames.contains(&Frame::Quote);
        for c in text.chars() {
            match c {
                '&' => out.push_str("&amp;"),
                '<' => out.push_str("&lt;"),
                '>' => out.push_str("&gt;"),
                '\n' if quoted => out.push_str("\n> "),
                '`' if pre && out.ends_with("``") => {
                    out.push(BOUNDARY);
                    out.push('`');
                }
                c => out.push(c),
            }
        }
    }
}

/// Starts a quoted line where a line starts (once: a code block inside a quote is quoted
/// once). A quote that opens mid-line (after a list item's marker) has its first line
/// unmarked: a line break there would show.
fn quote_line(out: &mut String) {
    if out.is_empty() || out.ends_with('\n') {
        out.push_str("> ");
    }
}

/// Appends a link's address: the kit's encoding of what would end it (`<`, `>`, spaces,
/// parentheses), then `&` escaped and `|` (which would start the link's text)
/// percent-encoded.
fn push_address(out: &mut String, url: &str) {
    let mut encoded = String::with_capacity(url.len());
    push_link_url(&mut encoded, url);
    for c in encoded.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '|' => out.push_str("%7C"),
            c => out.push(c),
        }
    }
}

/// Whether a link to `url` whose text is `piece` can be written `<url>`: its text is its
/// address, which shows as written.
fn bare(url: &str, piece: &str) -> bool {
    piece == url
        && !url.contains(|c: char| matches!(c, '|' | '<' | '>' | '(' | ')') || c.is_whitespace())
}

#[cfg(test)]
mod tests;
