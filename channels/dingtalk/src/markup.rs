//! DingTalk's `sampleMarkdown` as a renderer dialect: the markup the delivery engine writes
//! the agent's Markdown in for this channel ([`DingTalkMarkdown`], in
//! [`capabilities`](crate::capabilities)).
//!
//! Bold, italic, links, quotes; what it has no syntax for is adapted as DeerFlow's
//! DingTalk channel does: inline code in bold, a code block as quoted lines under its
//! language in bold, strikethrough as its text; headings, lists and tables degrade to text
//! as everywhere. Only `http(s)` links are links. Each newline counts three bytes (it may
//! start a quoted line), so a cut message stays within a limit on the written text.
//!
//! Children:
//! - `tests.rs`: the renderer's output in this dialect, and the renderer's properties.

use im_bridge_channel::LengthUnit;
use im_bridge_channel::render::{Dialect, Frame, Rendered, Writer, close_style, open_style};

/// DingTalk's `sampleMarkdown` (see the module docs).
#[derive(Clone, Copy, Debug, Default)]
pub struct DingTalkMarkdown;

impl Dialect for DingTalkMarkdown {
    fn name(&self) -> &'static str {
        "dingtalk_markdown"
    }

    fn writer(&self) -> Box<dyn Writer> {
        Box::new(MarkdownWriter)
    }

    fn extra_units(&self, c: char) -> usize {
        // A newline may start a quoted line: `\n> `.
        if c == '\n' { 2 } else { 0 }
    }

    fn check(&self, _: &Rendered, _: LengthUnit, _: usize) -> Result<(), String> {
        // DingTalk refuses no markdown: whatever is written shows, as text at worst.
        Ok(())
    }
}

/// Writes one message of `sampleMarkdown`. Quotes and code blocks are quoted lines (`> `),
/// every line of them; inline code is bold (or its text, inside bold); strikethrough is
/// its text.
struct MarkdownWriter;

fn quoted(frames: &[Frame]) -> bool {
    frames
        .iter()
        .any(|f| matches!(f, Frame::Quote | Frame::Pre(_)))
}

impl Writer for MarkdownWriter {
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
            // Bold, italic and links as CommonMark; strikethrough and code are their text.
            _ => open_style(out, frame),
        }
    }

    fn close(&mut self, out: &mut String, frame: &Frame) {
        close_style(out, frame);
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

#[cfg(test)]
mod tests;
