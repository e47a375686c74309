//! WeCom's markdown as a renderer dialect ([`WeComMarkdown`]): what a stream reply's
//! `content` and a proactive `markdown` message show. WeCom documents the stream content
//! as "common markdown" (its `markdown_v2`: headings, bold, italic, lists, quotes, links,
//! inline code, fenced code blocks, tables); `<think>` tags show a thinking section.
//!
//! Bold `**b**`, italic `*i*`, inline code, fenced code blocks (a fence longer than any
//! backtick run inside), quotes as `> ` lines and links `[text](url)`; strikethrough,
//! which `markdown_v2` does not list, is its text; headings, lists and tables degrade to
//! text in the core's renderer. Only `http(s)` links are links. Limits are on UTF-8 bytes
//! of the visible text with what escaping adds (a newline counts three: it may start a
//! quoted line), not the markers: the adapter splits under 18000 bytes so that the
//! written text stays within a stream's 20480.
//!
//! Children:
//! - `tests.rs`: the output construct by construct, a long answer split under the byte
//!   limit, and the renderer's properties.

use im_bridge_channel::LengthUnit;
use im_bridge_channel::render::{
    CodeFence, Dialect, FenceReader, Frame, Rendered, Writer, close_style, is_fence, open_style,
};

/// WeCom's markdown (see the module docs).
#[derive(Clone, Copy, Debug, Default)]
pub struct WeComMarkdown;

impl Dialect for WeComMarkdown {
    fn name(&self) -> &'static str {
        "wecom_markdown"
    }

    fn writer(&self) -> Box<dyn Writer> {
        Box::<MarkdownWriter>::default()
    }

    fn extra_units(&self, c: char) -> usize {
        // A newline may start a quoted line (`\n> `); a backtick may need a zero-width
        // space (3 bytes) before it.
        match c {
            '\n' => 2,
            '`' => BREAK.len_utf8(),
            _ => 0,
        }
    }

    fn before_ellipsis(&self, text: &mut String) {
        // A closing fence (quoted, in a quote) must stay alone on its line.
        let last = text.rsplit('\n').next().unwrap_or_default();
        if is_fence(last.trim_start_matches("> ")) {
            text.push('\n');
        }
    }

    fn check(&self, message: &Rendered, _: LengthUnit, _: usize) -> Result<(), String> {
        // WeCom refuses no markdown (at worst it shows as text); a code block left open
        // would swallow what follows.
        let mut fences = FenceReader::default();
        for line in message.text.split('\n') {
            fences.code(line.trim_start_matches("> "));
        }
        if fences.is_open() {
            Err("a code block is left open".to_owned())
        } else {
            Ok(())
        }
    }
}

/// Writes one message.
#[derive(Default)]
struct MarkdownWriter {
    /// The code block open, or just closed.
    code: CodeFence,
    /// How many quotes are open: a code block inside one has every line quoted.
    quotes: usize,
}

/// Starts a quoted line where a line starts.
fn quote_line(out: &mut String) {
    if out.is_empty() || out.ends_with('\n') {
        out.push_str("> ");
    }
}

impl Writer for MarkdownWriter {
    fn open(&mut self, out: &mut String, frame: &Frame, piece: &str) {
        self.code.leave(out, piece);
        match frame {
            Frame::Quote => {
                self.quotes += 1;
                quote_line(out);
            }
            Frame::Pre(language) => {
                if !out.is_empty() && !out.ends_with('\n') && !out.ends_with("> ") {
                    out.push('\n');
                    if self.quotes > 0 {
                        out.push_str("> ");
                    }
                }
                self.code.open(out, piece, language.as_deref());
            }
            // Bold, italic and links as CommonMark; strikethrough and code are written
            // with their text.
            _ => open_style(out, frame),
        }
    }

    fn close(&mut self, out: &mut String, frame: &Frame) {
        match frame {
            Frame::Pre(_) => {
                let prefix = if self.quotes > 0 { "> " } else { "" };
                self.code.close(out, prefix);
            }
            Frame::Quote => self.quotes = self.quotes.saturating_sub(1),
            _ => close_style(out, frame),
        }
    }

    fn text(&mut self, out: &mut String, text: &str, frames: &[Frame]) {
        self.code.leave(out, text);
        let pre = frames.iter().any(|f| matches!(f, Frame::Pre(_)));
        let quoted = !pre && frames.contains(&Frame::Quote);
        if !pre && frames.last() == Some(&Frame::Code) && !text.contains('`') {
            out.push('`');
            out.push_str(text);
            out.push('`');
        } else if pre && self.quotes > 0 {
            out.push_str(&text.replace('\n', "\n> "));
        } else if pre {
            out.push_str(text);
        } else {
            push_text(out, text, quoted);
        }
    }
}

/// Appends visible text: in a quote each line quoted, and a run of backticks broken by a
/// zero-width space after every second one, so text never opens a code block.
fn push_text(out: &mut String, text: &str, quoted: bool) {
    for c in text.chars() {
        match c {
            '\n' if quoted => out.push_str("\n> "),
            '`' if out.ends_with("``") => {
                out.push(BREAK);
                out.push('`');
            }
            c => out.push(c),
        }
    }
}

/// Breaks a run of backticks in text; shows nothing.
const BREAK: char = '\u{200B}';

#[cfg(test)]
mod tests;
