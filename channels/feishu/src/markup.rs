//! The markdown of a Feishu / Lark message card (JSON 1.0 `markdown` element) as a
//! renderer dialect: the markup the delivery engine writes the agent's Markdown in for
//! this channel ([`FeishuCard`], in [`CAPABILITIES`](crate::CAPABILITIES)).
//!
//! Bold, italic, strikethrough, inline code, links and fenced code blocks; headings, lists
//! and tables degrade to text as everywhere, quotes show their text. `<` and `>` outside
//! code blocks are written as the entities `&#60;` / `&#62;` (a card would read
//! `<at id=all>` as a mention of everyone), and so are `` ` `` and `~` in text (`&#96;`,
//! `&#126;`: a line of them would open a code fence and turn the code blocks after it
//! inside out); each counts as the bytes it becomes, so a cut message stays within a limit
//! on the card's size. Only `http(s)` links are links.
//!
//! Children:
//! - `tests.rs`: the renderer's output in this dialect (the fuzzer's regressions among
//!   them), and the renderer's properties.

use im_bridge_channel::LengthUnit;
use im_bridge_channel::render::{
    CodeFence, Dialect, FenceReader, Frame, Rendered, Writer, close_style, is_fence,
    longest_backticks, open_style,
};

/// A Feishu card's markdown (see the module docs).
#[derive(Clone, Copy, Debug, Default)]
pub struct FeishuCard;

impl Dialect for FeishuCard {
    fn name(&self) -> &'static str {
        "feishu_card"
    }

    fn writer(&self) -> Box<dyn Writer> {
        Box::<CardWriter>::default()
    }

    fn extra_units(&self, c: char) -> usize {
        // `&#60;` `&#62;` `&#96;` are 5 bytes, `&#126;` 6; code counts them too (more than
        // it needs, never less).
        match c {
            '<' | '>' | '`' => 4,
            '~' => 5,
            _ => 0,
        }
    }

    fn before_ellipsis(&self, text: &mut String) {
        // After a closing fence, on a line of its own: on the fence's line it would keep
        // the block open.
        if is_fence(text.rsplit('\n').next().unwrap_or_default()) {
            text.push('\n');
        }
    }

    fn check(&self, message: &Rendered, unit: LengthUnit, limit: usize) -> Result<(), String> {
        if !card_safe(&message.text) {
            // A tag outside code, or a code block left open.
            return Err("card_safe: false".to_owned());
        }
        // Its plain resend, entities and all, fits too.
        let resent = unit.measure(&self.literal(&message.plain));
        if resent > limit && message.plain.chars().count() != 1 {
            return Err(format!("literal: {resent} > {limit}"));
        }
        Ok(())
    }
}

/// Writes one message of a card's markdown. Quotes have no syntax there (JSON 1.0), so
/// they show their text; code uses a fence longer than any run of backticks it holds.
#[derive(Default)]
struct CardWriter {
    /// The code block open, or just closed.
    code: CodeFence,
}

/// Whether what is written next starts a line (as a fence could: after at most three
/// spaces).
fn at_line_start(out: &str) -> bool {
    let line = out.rsplit('\n').next().unwrap_or_default();
    line.len() <= 3 && line.bytes().all(|b| b == b' ')
}

impl Writer for CardWriter {
    fn open(&mut self, out: &mut String, frame: &Frame, piece: &str) {
        self.code.leave(out, piece);
        match frame {
            Frame::Pre(language) => {
                // A fence opens a block only at a line's start (a list item's marker may
                // precede it).
                if !out.is_empty() && !out.ends_with('\n') {
                    out.push('\n');
                }
                self.code.open(out, piece, language.as_deref());
            }
            Frame::Strike => out.push_str("~~"),
            // Bold, italic and links as CommonMark; code is written with its text, which
            // decides the fence.
            _ => open_style(out, frame),
        }
    }

    fn close(&mut self, out: &mut String, frame: &Frame) {
        match frame {
            Frame::Pre(_) => self.code.close(out, ""),
            Frame::Strike => out.push_str("~~"),
            _ => close_style(out, frame),
        }
    }

    fn text(&mut self, out: &mut String, text: &str, frames: &[Frame]) {
        self.code.leave(out, text);
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

/// Appends `text` with `<`, `>`, `` ` `` and `~` as the entities a Feishu card shows as
/// the characters: text never becomes a card tag such as `<at id=all>`, nor a code fence
/// (a line of backticks or tildes), which would turn the code blocks after it inside out
/// and leave their raw `<` outside code.
fn escape_card_into(out: &mut String, text: &str) {
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

/// Whether a card's markdown holds no `<` or `>` outside its fenced code blocks (no text
/// can become a card tag), and closes every block it opens.
fn card_safe(text: &str) -> bool {
    let mut fences = FenceReader::default();
    let tags_outside_code = text
        .split('\n')
        .all(|line| fences.code(line) || !line.contains(['<', '>']));
    // A block left open would show its closing fence (and what follows) as code.
    tags_outside_code && !fences.is_open()
}

#[cfg(test)]
mod tests;
