//! Telegram's HTML parse mode (`parse_mode: "HTML"`) as a renderer dialect: the markup the
//! delivery engine writes the agent's Markdown in for this channel ([`TelegramHtml`], in
//! [`CAPABILITIES`](crate::CAPABILITIES)).
//!
//! Styles are the tags `b i s code pre a blockquote`, a code block
//! `<pre><code class="language-…">`; text has `&`, `<` and `>` escaped (and `"` in an
//! attribute). Telegram counts its limit after entities parsing, on what the reader sees,
//! so nothing is counted beyond the visible text. Links may also be `tg://` and `mailto:`.
//!
//! Children:
//! - `check.rs`: a checker of Telegram HTML as strict as Telegram ([`Dialect::check`]).
//! - `tests.rs`: the renderer's output in this dialect, and the renderer's properties.

mod check;

use im_bridge_channel::LengthUnit;
use im_bridge_channel::render::{Dialect, Frame, Rendered, Writer};

pub use check::telegram_html;

/// Telegram's HTML parse mode (see the module docs).
#[derive(Clone, Copy, Debug, Default)]
pub struct TelegramHtml;

impl Dialect for TelegramHtml {
    fn name(&self) -> &'static str {
        "telegram_html"
    }

    fn writer(&self) -> Box<dyn Writer> {
        Box::new(TelegramHtml)
    }

    fn link_schemes(&self) -> &'static [&'static str] {
        &["http://", "https://", "tg://", "mailto:"]
    }

    fn check(&self, message: &Rendered, _: LengthUnit, _: usize) -> Result<(), String> {
        let shown = telegram_html(&message.text)?;
        if shown == message.plain {
            Ok(())
        } else {
            Err(format!("shows {shown:?}, not {:?}", message.plain))
        }
    }
}

impl Writer for TelegramHtml {
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
fn escape_into(out: &mut String, text: &str, attribute: bool) {
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

#[cfg(test)]
mod tests;
