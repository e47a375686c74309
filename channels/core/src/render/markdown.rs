//! Pieces of CommonMark that several platforms' markdowns write alike, for their
//! dialects' [`Writer`](super::Writer)s: the inline styles' markers, a link's address, and
//! a fenced code block whose fence no backtick inside can close; and, to check what was
//! written, its code blocks read back as a reader would ([`FenceReader`], [`is_fence`]).

use super::doc::Frame;

/// Writes the CommonMark marker opening an inline style: `**` bold, `*` italic, `[` a
/// link. Any other frame writes nothing (a dialect writes quotes, code and strikethrough
/// its own way).
pub fn open_style(out: &mut String, frame: &Frame) {
    match frame {
        Frame::Bold => out.push_str("**"),
        Frame::Italic => out.push('*'),
        Frame::Link(_) => out.push('['),
        Frame::Strike | Frame::Code | Frame::Pre(_) | Frame::Quote => {}
    }
}

/// Writes the CommonMark marker closing an inline style: `**` bold, `*` italic, a link's
/// `](address)` ([`push_link_url`]). Any other frame writes nothing.
pub fn close_style(out: &mut String, frame: &Frame) {
    match frame {
        Frame::Bold => out.push_str("**"),
        Frame::Italic => out.push('*'),
        Frame::Link(url) => {
            out.push_str("](");
            push_link_url(out, url);
            out.push(')');
        }
        Frame::Strike | Frame::Code | Frame::Pre(_) | Frame::Quote => {}
    }
}

/// Appends a Markdown link's address with the characters that would end its destination
/// encoded (`(`, `)`, space), and `<` and `>` too, which a markdown that takes tags would
/// read as the start of one (a mention of everyone).
pub fn push_link_url(out: &mut String, url: &str) {
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

/// The longest run of backticks in `text`.
pub fn longest_backticks(text: &str) -> usize {
    text.split(|c| c != '`')
        .map(str::len)
        .max()
        .unwrap_or_default()
}

/// A fenced code block being written: its fence is longer than any run of backticks in
/// the code (three at least), and what follows its closing fence starts a line of its
/// own, or the fence would not close it.
#[derive(Debug, Default)]
pub struct CodeFence {
    /// The fence of the block open.
    fence: String,
    /// A block was just closed: what follows starts a line.
    after: bool,
}

impl CodeFence {
    /// Writes the opening fence of a block whose code starts with `piece` (a cut block
    /// reopens with its next piece), its `language`, and the line break after them. The
    /// caller has put `out` at a line's start.
    pub fn open(&mut self, out: &mut String, piece: &str, language: Option<&str>) {
        self.fence = "`".repeat(longest_backticks(piece).max(2) + 1);
        out.push_str(&self.fence);
        out.push_str(language.unwrap_or_default());
        out.push('\n');
    }

    /// Writes the closing fence on a line of its own, after `prefix` (a quote's `> `).
    pub fn close(&mut self, out: &mut String, prefix: &str) {
        out.push('\n');
        out.push_str(prefix);
        out.push_str(&self.fence);
        self.after = true;
    }

    /// Before `next` is written: a line break after a closing fence, unless `next`
    /// starts with one.
    pub fn leave(&mut self, out: &mut String, next: &str) {
        if std::mem::take(&mut self.after) && !next.starts_with('\n') {
            out.push('\n');
        }
    }
}

/// Whether `line` is a code fence alone: three backticks or more and nothing else (what
/// must stay on a line of its own, or it would keep its block open).
pub fn is_fence(line: &str) -> bool {
    line.len() >= 3 && line.bytes().all(|b| b == b'`')
}

/// Reads a markdown's fenced code blocks line by line as CommonMark does: three backticks
/// or more open a block, and a line of at least as many with nothing after them closes it.
#[derive(Debug, Default)]
pub struct FenceReader {
    /// The open block's fence length.
    open: Option<usize>,
}

impl FenceReader {
    /// Reads the next `line`: whether it is code (a fence, or inside a block).
    pub fn code(&mut self, line: &str) -> bool {
        let ticks = line.len() - line.trim_start_matches('`').len();
        match self.open {
            Some(open) if ticks >= open && line[ticks..].trim().is_empty() => self.open = None,
            Some(_) => {}
            None if ticks >= 3 => self.open = Some(ticks),
            None => return false,
        }
        true
    }

    /// Whether a block is open: its closing fence not read yet.
    pub fn is_open(&self) -> bool {
        self.open.is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_block_closes_on_a_fence_at_least_as_long_and_alone() {
        let mut fences = FenceReader::default();
        let read: Vec<bool> = ["a", "````rust", "```", "``` x", "`````", "b"]
            .into_iter()
            .map(|line| fences.code(line))
            .collect();
        assert_eq!(read, [false, true, true, true, true, false]);
        assert!(!fences.is_open());
        assert!(fences.code("```"));
        assert!(fences.is_open());
        assert!(is_fence("```") && !is_fence("``") && !is_fence("``` x"));
    }
}
