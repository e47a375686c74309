//! Markdown to the intermediate form: the visible text, and runs of it with their styles.
//!
//! The builder walks pulldown-cmark's events once. Every `Start` pushes one context
//! (a style, or nothing for structural tags) and its `End` pops it, so the styles of a
//! run are always a properly nested stack. The strictest nesting rules among the dialects
//! are kept here, where the stack is known: a style already open is not opened again
//! (`<b><b>`), quotes do not nest, a link holds no inline code, and code holds nothing.
//!
//! Blocks are separated by one blank line and list items and table rows by one newline,
//! written lazily just before the next visible text, inside the contexts the two blocks
//! share (two paragraphs of one quote are separated inside the quote).

use std::ops::Range;

use pulldown_cmark::{CodeBlockKind, Event, Options, Parser, Tag, TagEnd};

use super::Dialect;

/// A style a run of text is shown in, as a [`Writer`](super::Writer) is asked to write it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Frame {
    /// A block quote (quotes do not nest).
    Quote,
    /// A code block, with its sanitized language.
    Pre(Option<String>),
    /// Bold (also headings and table headers).
    Bold,
    /// Italic.
    Italic,
    /// Strikethrough.
    Strike,
    /// A link to an address with one of the dialect's
    /// [`link_schemes`](super::Dialect::link_schemes).
    Link(String),
    /// Inline code.
    Code,
}

/// A run of the visible text (`range`) and its styles, outermost first.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Span {
    pub range: Range<usize>,
    pub frames: Vec<Frame>,
}

/// A rendered document: the visible text, covered by consecutive spans.
#[derive(Debug, Default)]
pub(super) struct Doc {
    pub visible: String,
    pub spans: Vec<Span>,
    /// For a dialect that does not write links as text: each link's address the visible
    /// text does not show, and where in it a links-as-text dialect would show it (just
    /// after the link's text), in order. What a plain-text resend of a message adds
    /// ([`Rendered::plain_linked`](super::Rendered::plain_linked)). One entry per link of
    /// the Markdown at most, so bounded by its length; empty for a text without links.
    pub addresses: Vec<(usize, String)>,
}

impl Doc {
    /// Parses `markdown` for `dialect`. For a `preview`, a fenced code block still open at
    /// the end of the text is taken as plain text, from the start of its fence line on.
    pub fn parse(markdown: &str, dialect: &dyn Dialect, preview: bool) -> Doc {
        let open_fence = preview.then(|| open_fence_line(markdown)).flatten();
        let (source, literal) = open_fence
            .and_then(|at| markdown.split_at_checked(at))
            .unwrap_or((markdown, ""));
        let mut builder = Builder::new(dialect);
        for event in Parser::new_ext(source, options()) {
            builder.event(event);
        }
        if !literal.is_empty() {
            builder.request(Break::Paragraph);
            builder.write(literal, None);
        }
        builder.doc
    }

    /// Whether the visible byte at `at` is inside a code block.
    pub fn in_pre(&self, at: usize) -> bool {
        let index = self.spans.partition_point(|s| s.range.end <= at);
        self.spans
            .get(index)
            .is_some_and(|s| s.frames.iter().any(|f| matches!(f, Frame::Pre(_))))
    }
}

fn options() -> Options {
    Options::ENABLE_STRIKETHROUGH | Options::ENABLE_TABLES | Options::ENABLE_TASKLISTS
}

/// The start of the line of a fenced code block's opening fence, if that block runs to
/// the end of `markdown` because it was never closed.
///
/// The parser tells a closed block from an open one by its ranges: a closed block's range
/// ends after its closing fence, past its content; an open one ends with its content, or,
/// when it has none yet, is the opening line alone.
fn open_fence_line(markdown: &str) -> Option<usize> {
    let mut block: Option<(Range<usize>, Option<usize>)> = None;
    let mut last_open = None;
    for (event, range) in Parser::new_ext(markdown, options()).into_offset_iter() {
        match event {
            Event::Start(Tag::CodeBlock(CodeBlockKind::Fenced(_))) => block = Some((range, None)),
            Event::Text(_) => {
                if let Some((_, text_end)) = block.as_mut() {
                    *text_end = Some(range.end);
                }
            }
            Event::End(TagEnd::CodeBlock) => {
                if let Some((whole, text_end)) = block.take() {
                    let unclosed = whole.end >= markdown.len()
                        && match text_end {
                            Some(end) => end >= whole.end,
                            None => !markdown
                                .get(whole.clone())
                                .unwrap_or_default()
                                .trim_end_matches(['\n', '\r'])
                                .contains('\n'),
                        };
                    if unclosed {
                        last_open = Some(whole.start);
                    }
                }
            }
            _ => {}
        }
    }
    last_open.map(|at| {
        markdown
            .get(..at)
            .and_then(|before| before.rfind('\n'))
            .map_or(0, |nl| nl + 1)
    })
}

/// List nesting levels shown by indentation; deeper ones are indented as much (so a
/// pathological nesting cannot make the text grow with the square of its depth).
const MAX_INDENT: usize = 8;

/// What separates two blocks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Break {
    /// One newline (list items, table rows).
    Line,
    /// One blank line (paragraphs and other blocks).
    Paragraph,
}

/// A link or image being written.
struct OpenLink {
    url: String,
    /// Where its visible text starts.
    start: usize,
    image: bool,
}

struct Builder<'d> {
    dialect: &'d dyn Dialect,
    doc: Doc,
    /// One entry per open `Start` tag: whether it opened a style.
    contexts: Vec<bool>,
    /// The styles open, outermost first. Each kind is open once at most (see
    /// [`Builder::style`]), so this holds six frames at most, however deep the nesting.
    frames: Vec<Frame>,
    /// The separator owed before the next visible text, and in how many of the open
    /// styles it is written (the fewest of those asked for: the ones the blocks share).
    pending: Option<(Break, usize)>,
    /// Just after a list item's marker: the item's first block follows on the same line.
    after_marker: bool,
    /// Open lists: the next number of an ordered one.
    lists: Vec<Option<u64>>,
    /// Cells written in the current table row.
    cells: usize,
    /// The text of the code block being read (written at its end, less its final newline).
    code: Option<String>,
    links: Vec<OpenLink>,
}

impl<'d> Builder<'d> {
    fn new(dialect: &'d dyn Dialect) -> Self {
        Self {
            dialect,
            doc: Doc::default(),
            contexts: Vec::new(),
            frames: Vec::new(),
            pending: None,
            after_marker: false,
            lists: Vec::new(),
            cells: 0,
            code: None,
            links: Vec::new(),
        }
    }

    fn event(&mut self, event: Event<'_>) {
        match event {
            Event::Start(tag) => self.start(tag),
            Event::End(tag) => self.end(tag),
            Event::Text(text) => match self.code.as_mut() {
                Some(code) => code.push_str(&text),
                None => self.write(&text, None),
            },
            Event::Code(text) => {
                let in_link = self.active(|f| matches!(f, Frame::Link(_)));
                self.write(&text, (!in_link).then_some(Frame::Code));
            }
            // Raw HTML is not passed through: it is text, escaped when emitted.
            Event::Html(text) | Event::InlineHtml(text) => self.write(&text, None),
            Event::InlineMath(text) | Event::DisplayMath(text) => self.write(&text, None),
            Event::FootnoteReference(label) => self.write(&format!("[{label}]"), None),
            Event::SoftBreak | Event::HardBreak => self.write("\n", None),
            Event::Rule => {
                self.request(Break::Paragraph);
                self.write("———", None);
            }
            Event::TaskListMarker(done) => self.write(if done { "☑ " } else { "☐ " }, None),
        }
    }

    fn start(&mut self, tag: Tag<'_>) {
        let frame = match tag {
            Tag::Paragraph
            | Tag::HtmlBlock
            | Tag::Table(_)
            | Tag::FootnoteDefinition(_)
            | Tag::DefinitionList
            | Tag::MetadataBlock(_) => {
                self.request(Break::Paragraph);
                None
            }
            Tag::DefinitionListTitle | Tag::DefinitionListDefinition => {
                self.request(Break::Line);
                None
            }
            Tag::Heading { .. } => {
                self.request(Break::Paragraph);
                self.style(Frame::Bold)
            }
            Tag::BlockQuote(_) => {
                self.request(Break::Paragraph);
                self.style(Frame::Quote)
            }
            Tag::CodeBlock(kind) => {
                self.request(Break::Paragraph);
                self.code = Some(String::new());
                let language = match kind {
                    CodeBlockKind::Fenced(info) => sanitize_language(&info),
                    CodeBlockKind::Indented => None,
                };
                Some(Frame::Pre(language))
            }
            Tag::List(first) => {
                self.request(if self.lists.is_empty() {
                    Break::Paragraph
                } else {
                    Break::Line
                });
                self.lists.push(first);
                None
            }
            Tag::Item => {
                self.request(Break::Line);
                let marker = self.item_marker();
                self.write(&marker, None);
                self.after_marker = true;
                None
            }
            Tag::TableHead => {
                self.request(Break::Line);
                self.cells = 0;
                self.style(Frame::Bold)
            }
            Tag::TableRow => {
                self.request(Break::Line);
                self.cells = 0;
                None
            }
            Tag::TableCell => {
                if self.cells > 0 {
                    self.write(" | ", None);
                }
                self.cells += 1;
                None
            }
            Tag::Emphasis => self.style(Frame::Italic),
            Tag::Strong => self.style(Frame::Bold),
            Tag::Strikethrough => self.style(Frame::Strike),
            Tag::Superscript | Tag::Subscript => None,
            Tag::Link { dest_url, .. } => self.open_link(&dest_url, false),
            Tag::Image { dest_url, .. } => self.open_link(&dest_url, true),
        };
        self.contexts.push(frame.is_some());
        self.frames.extend(frame);
    }

    fn pop_context(&mut self) {
        if self.contexts.pop() == Some(true) {
            self.frames.pop();
        }
        if let Some((_, depth)) = self.pending.as_mut() {
            *depth = (*depth).min(self.frames.len());
        }
    }

    fn end(&mut self, tag: TagEnd) {
        match tag {
            TagEnd::CodeBlock => {
                let code = self.code.take().unwrap_or_default();
                let code = code.strip_suffix('\n').unwrap_or(&code);
                let code = code.strip_suffix('\r').unwrap_or(code);
                self.write(code, None);
            }
            TagEnd::List(_) => {
                self.lists.pop();
            }
            TagEnd::Link | TagEnd::Image => {
                self.pop_context();
                self.close_link();
                return;
            }
            _ => {}
        }
        self.pop_context();
    }

    /// The context for `frame`: none if the same style is open already (it would show
    /// nothing more), so a quote inside a quote is not one either (an HTML dialect may
    /// refuse it).
    fn style(&self, frame: Frame) -> Option<Frame> {
        (!self.active(|f| *f == frame)).then_some(frame)
    }

    fn active(&self, matches: impl Fn(&Frame) -> bool) -> bool {
        self.frames.iter().any(matches)
    }

    fn open_link(&mut self, url: &str, image: bool) -> Option<Frame> {
        // The link's own text starts after any separator owed before it.
        self.flush();
        self.links.push(OpenLink {
            url: url.to_owned(),
            start: self.doc.visible.len(),
            image,
        });
        // An image is a link to it, where its address is http(s).
        let allowed = !self.dialect.links_as_text()
            && if image {
                has_scheme(url, super::HTTP)
            } else {
                has_scheme(url, self.dialect.link_schemes())
            };
        let nested = self.active(|f| matches!(f, Frame::Link(_)));
        (allowed && !nested).then(|| Frame::Link(url.to_owned()))
    }

    /// At a link's or image's end (its context already popped).
    fn close_link(&mut self) {
        let Some(link) = self.links.pop() else {
            return;
        };
        let shown = self.doc.visible.get(link.start..).unwrap_or_default();
        let url = link.url.as_str();
        if shown.is_empty() && link.image {
            // An image without alt text: its address is what can be shown of it.
            let frame = (!self.dialect.links_as_text() && has_scheme(url, super::HTTP))
                .then(|| Frame::Link(url.to_owned()));
            self.write(url, frame);
        } else if !url.is_empty() && shown != url && url.strip_prefix("mailto:") != Some(shown) {
            if self.dialect.links_as_text() {
                let mut address = String::with_capacity(url.len() + 3);
                push_address(&mut address, url);
                self.write(&address, None);
            } else {
                let at = self.doc.visible.len();
                self.doc.addresses.push((at, link.url));
            }
        }
    }

    fn item_marker(&mut self) -> String {
        let indent = "  ".repeat(self.lists.len().saturating_sub(1).min(MAX_INDENT));
        match self.lists.last_mut() {
            Some(Some(number)) => {
                let marker = format!("{indent}{number}. ");
                *number = number.saturating_add(1);
                marker
            }
            _ => format!("{indent}• "),
        }
    }

    /// Owes `kind` before the next visible text, written in the styles open now.
    fn request(&mut self, kind: Break) {
        if self.after_marker {
            return;
        }
        let depth = self.frames.len();
        self.pending = Some(match self.pending {
            Some((owed, at)) => (owed.max(kind), at.min(depth)),
            None => (kind, depth),
        });
    }

    /// Writes the separator owed, topping up the newlines the text already ends with.
    fn flush(&mut self) {
        let Some((kind, depth)) = self.pending.take() else {
            return;
        };
        if self.doc.visible.is_empty() {
            return;
        }
        let want = match kind {
            Break::Line => 1,
            Break::Paragraph => 2,
        };
        let have = self
            .doc
            .visible
            .bytes()
            .rev()
            .take(want)
            .take_while(|&b| b == b'\n')
            .count();
        let frames = self.frames.get(..depth).unwrap_or_default().to_vec();
        self.push("\n".repeat(want - have).as_str(), frames);
    }

    /// Writes visible `text` in the open styles, plus `extra` innermost.
    fn write(&mut self, text: &str, extra: Option<Frame>) {
        if text.is_empty() {
            return;
        }
        self.flush();
        self.after_marker = false;
        let mut frames = self.frames.clone();
        frames.extend(extra);
        self.push(text, frames);
    }

    fn push(&mut self, text: &str, frames: Vec<Frame>) {
        if text.is_empty() {
            return;
        }
        let start = self.doc.visible.len();
        self.doc.visible.push_str(text);
        let end = self.doc.visible.len();
        match self.doc.spans.last_mut() {
            Some(last) if last.frames == frames => last.range.end = end,
            _ => self.doc.spans.push(Span {
                range: start..end,
                frames,
            }),
        }
    }
}

/// Appends what follows a link's text where links are written as text: its address in
/// parentheses (" (url)").
pub(super) fn push_address(out: &mut String, url: &str) {
    out.push_str(" (");
    out.push_str(url);
    out.push(')');
}

/// Whether `url` starts with one of `schemes` (ASCII case-insensitive).
fn has_scheme(url: &str, schemes: &[&str]) -> bool {
    schemes.iter().any(|scheme| {
        url.get(..scheme.len())
            .is_some_and(|head| head.eq_ignore_ascii_case(scheme))
    })
}

/// A code block's language: the first word of its info string, reduced to the characters
/// an HTML class name takes safely (`[A-Za-z0-9_+\-#.]`); `None` when nothing is left.
fn sanitize_language(info: &str) -> Option<String> {
    let word = info.split_whitespace().next().unwrap_or_default();
    let language: String = word
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '+' | '-' | '#' | '.'))
        .collect();
    (!language.is_empty()).then_some(language)
}
