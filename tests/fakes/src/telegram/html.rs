//! Telegram's HTML parse mode (`parse_mode: "HTML"`), by hand: a small tokenizer over the
//! sent text that yields the visible text and its [`Entity`]s, or Telegram's reason for
//! refusing it.
//!
//! It follows tdlib's `parse_html` (which the Bot API server runs) where that is known:
//! tag names case-insensitive and ending at a space or `>`; attributes quoted with `"` or
//! `'` or a bare name token; the end tag must match the innermost open tag (`</>` closes
//! it, whatever it is); an empty entity is dropped; `<pre><code class="language-x">` is one
//! `pre` with a language; entities sorted by offset, longer first. The reasons use
//! Telegram's wording, usually ending in `at byte offset N` (a byte offset into the text as
//! sent).
//!
//! One deliberate difference, stricter than tdlib: Telegram keeps a `&` that starts no
//! entity as a literal `&` (and takes `&lt` without its `;`), but its documentation says
//! every `&` outside an entity must be escaped. The fake enforces the documentation, so a
//! bridge that forgets to escape fails here rather than by luck in production: only
//! `&lt;` `&gt;` `&amp;` `&quot;` `&#NNN;` and `&#xHHHH;` are taken, anything else is
//! "Unsupported HTML entity". Not played: Telegram's rules on which entities may contain
//! which (it silently drops some overlaps; the fake keeps what was written), URL
//! normalisation, and `tg://user?id=` mentions.

use super::entity::{self, Entity};

/// The tags Telegram's HTML mode knows; any other start tag is refused.
const SUPPORTED: &str =
    "a b strong i em u ins s strike del span tg-spoiler tg-emoji code pre blockquote";

/// Why Telegram refuses a text: the reason after "can't parse entities: ".
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ParseError(pub(crate) String);

impl ParseError {
    /// The whole `description` of the 400 answer.
    pub(crate) fn description(&self) -> String {
        format!("Bad Request: can't parse entities: {}", self.0)
    }
}

/// Parses `html` as Telegram's HTML mode: the visible text and its entities, sorted.
pub(crate) fn parse(html: &str) -> Result<(String, Vec<Entity>), ParseError> {
    let mut parser = Parser {
        src: html,
        pos: 0,
        text: String::with_capacity(html.len()),
        utf16: 0,
        open: Vec::new(),
        entities: Vec::new(),
    };
    parser.run()?;
    let mut entities = parser.entities;
    for e in &mut entities {
        // Telegram keeps a language only on `pre`.
        if e.kind == "code" {
            e.language = None;
        }
    }
    entity::sort(&mut entities);
    Ok((parser.text, entities))
}

/// A start tag not yet closed.
struct Open {
    tag: String,
    /// `href`, the code language, `spoiler`, the emoji id, or `expandable`.
    argument: String,
    /// Where its content starts in the visible text, in UTF-16 units.
    offset: usize,
    /// The same in bytes of the visible text (a link without `href` links its text).
    text_start: usize,
}

struct Parser<'a> {
    src: &'a str,
    /// Byte position in `src`; always on a char boundary, since it only stops on ASCII.
    pos: usize,
    text: String,
    /// `text`'s length in UTF-16 units.
    utf16: usize,
    open: Vec<Open>,
    entities: Vec<Entity>,
}

fn is_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r' | b'\x0b' | b'\x0c')
}

fn err<T>(reason: String) -> Result<T, ParseError> {
    Err(ParseError(reason))
}

impl<'a> Parser<'a> {
    fn peek(&self) -> Option<u8> {
        self.src.as_bytes().get(self.pos).copied()
    }

    /// `src[from..to]`, empty if that is not a slice (it always is: both ends are ASCII
    /// boundaries).
    fn slice(&self, from: usize, to: usize) -> &'a str {
        self.src.get(from..to).unwrap_or("")
    }

    /// Advances while `keep` holds for the next byte.
    fn skip_while(&mut self, keep: impl Fn(u8) -> bool) {
        while self.peek().is_some_and(&keep) {
            self.pos += 1;
        }
    }

    fn push(&mut self, s: &str) {
        self.utf16 += s.encode_utf16().count();
        self.text.push_str(s);
    }

    fn run(&mut self) -> Result<(), ParseError> {
        while let Some(b) = self.peek() {
            match b {
                b'&' => {
                    let c = self.entity()?;
                    self.push(c.encode_utf8(&mut [0; 4]));
                }
                b'<' if self.src.as_bytes().get(self.pos + 1) == Some(&b'/') => self.end_tag()?,
                b'<' => self.start_tag()?,
                _ => {
                    let from = self.pos;
                    self.skip_while(|b| b != b'<' && b != b'&');
                    let run = self.slice(from, self.pos);
                    self.push(run);
                }
            }
        }
        match self.open.last() {
            Some(open) => err(format!(
                "Can't find end tag corresponding to start tag \"{}\"",
                open.tag
            )),
            None => Ok(()),
        }
    }

    /// Decodes the entity at `&`: one of the four named ones or a numeric one, with its `;`.
    fn entity(&mut self) -> Result<char, ParseError> {
        let at = self.pos;
        let unsupported = || err(format!("Unsupported HTML entity at byte offset {at}"));
        self.pos += 1;
        let c = if self.peek() == Some(b'#') {
            self.pos += 1;
            let hex = matches!(self.peek(), Some(b'x' | b'X'));
            if hex {
                self.pos += 1;
            }
            let from = self.pos;
            self.skip_while(|b| {
                if hex {
                    b.is_ascii_hexdigit()
                } else {
                    b.is_ascii_digit()
                }
            });
            let digits = self.slice(from, self.pos);
            // More than 7 digits cannot be a code point (and would overflow).
            let code = match u32::from_str_radix(digits, if hex { 16 } else { 10 }) {
                Ok(code) if digits.len() <= 7 && (1..=0x10FFFF).contains(&code) => code,
                _ => return unsupported(),
            };
            match char::from_u32(code) {
                Some(c) => c,
                None => {
                    return err(
                        "Text contains invalid Unicode characters after decoding HTML \
                         entities, check for unmatched surrogate code units"
                            .to_owned(),
                    );
                }
            }
        } else {
            let from = self.pos;
            self.skip_while(|b| b.is_ascii_alphabetic());
            match self.slice(from, self.pos) {
                "lt" => '<',
                "gt" => '>',
                "amp" => '&',
                "quot" => '"',
                _ => return unsupported(),
            }
        };
        if self.peek() != Some(b';') {
            return unsupported();
        }
        self.pos += 1;
        Ok(c)
    }

    fn start_tag(&mut self) -> Result<(), ParseError> {
        let at = self.pos;
        self.pos += 1;
        self.skip_while(|b| !is_space(b) && b != b'>');
        if self.peek().is_none() {
            return err(format!("Unclosed start tag at byte offset {at}"));
        }
        let tag = self.slice(at + 1, self.pos).to_ascii_lowercase();
        if !SUPPORTED.split(' ').any(|known| known == tag) {
            return err(format!(
                "Unsupported start tag \"{tag}\" at byte offset {at}"
            ));
        }
        let mut argument = String::new();
        loop {
            self.skip_while(is_space);
            match self.peek() {
                None => return err(format!("Unclosed start tag at byte offset {at}")),
                Some(b'>') => {
                    self.pos += 1;
                    break;
                }
                Some(_) => {}
            }
            let from = self.pos;
            self.skip_while(|b| !is_space(b) && b != b'=' && b != b'>');
            let name = self.slice(from, self.pos).to_ascii_lowercase();
            if name.is_empty() {
                return err(format!(
                    "Empty attribute name in the tag \"{tag}\" at byte offset {at}"
                ));
            }
            self.skip_while(is_space);
            if self.peek() != Some(b'=') {
                if tag == "blockquote" && name == "expandable" {
                    argument = "expandable".to_owned();
                    continue;
                }
                return err(format!(
                    "Expected equal sign in declaration of an attribute of the tag \"{tag}\" at byte offset {at}"
                ));
            }
            self.pos += 1;
            self.skip_while(is_space);
            let value = match self.peek() {
                None => {
                    return err(format!("Unclosed start tag \"{tag}\" at byte offset {at}"));
                }
                Some(quote @ (b'"' | b'\'')) => self.quoted(quote, at)?,
                Some(_) => self.name_token()?,
            };
            match (tag.as_str(), name.as_str()) {
                ("a", "href") | ("tg-emoji", "emoji-id") => argument = value,
                ("code", "class") => {
                    if let Some(language) = value.strip_prefix("language-") {
                        argument = language.to_owned();
                    }
                }
                ("span", "class") => {
                    if let Some(class) = value.strip_prefix("tg-") {
                        argument = class.to_owned();
                    }
                }
                ("blockquote", "expandable") => argument = "expandable".to_owned(),
                _ => {}
            }
        }
        if tag == "span" && argument != "spoiler" {
            return err(format!(
                "Tag \"span\" must have class \"tg-spoiler\" at byte offset {at}"
            ));
        }
        self.open.push(Open {
            tag,
            argument,
            offset: self.utf16,
            text_start: self.text.len(),
        });
        Ok(())
    }

    /// A value in `quote`s, entities decoded; `at` is its tag's start.
    fn quoted(&mut self, quote: u8, at: usize) -> Result<String, ParseError> {
        self.pos += 1;
        let mut value = String::new();
        loop {
            match self.peek() {
                None => return err(format!("Unclosed start tag at byte offset {at}")),
                Some(b) if b == quote => {
                    self.pos += 1;
                    return Ok(value);
                }
                Some(b'&') => value.push(self.entity()?),
                Some(_) => {
                    let from = self.pos;
                    self.skip_while(|b| b != quote && b != b'&');
                    value.push_str(self.slice(from, self.pos));
                }
            }
        }
    }

    /// An unquoted value: letters, digits, `.` and `-`, case-insensitive.
    fn name_token(&mut self) -> Result<String, ParseError> {
        let from = self.pos;
        self.skip_while(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'-');
        if self.peek().is_some_and(|b| !is_space(b) && b != b'>') {
            return err(format!(
                "Unexpected end of name token at byte offset {from}"
            ));
        }
        Ok(self.slice(from, self.pos).to_ascii_lowercase())
    }

    fn end_tag(&mut self) -> Result<(), ParseError> {
        let at = self.pos;
        if self.open.is_empty() {
            return err(format!("Unexpected end tag at byte offset {at}"));
        }
        self.pos += 2;
        self.skip_while(|b| !is_space(b) && b != b'>');
        let name = self.slice(at + 2, self.pos).to_ascii_lowercase();
        self.skip_while(is_space);
        if self.peek() != Some(b'>') {
            return err(format!("Unclosed end tag at byte offset {at}"));
        }
        self.pos += 1;
        let Some(open) = self.open.pop() else {
            return err(format!("Unexpected end tag at byte offset {at}"));
        };
        if !name.is_empty() && name != open.tag {
            return err(format!(
                "Unmatched end tag at byte offset {at}, expected \"</{}>\", found \"</{name}>\"",
                open.tag
            ));
        }
        self.close(open)
    }

    /// Turns a closed tag into its entity (none if it holds no text).
    fn close(&mut self, open: Open) -> Result<(), ParseError> {
        let (offset, length) = (open.offset, self.utf16 - open.offset);
        if length == 0 {
            return Ok(());
        }
        let entity = |kind| Entity::new(kind, offset, length);
        let same_span = |e: &Entity| e.offset == offset && e.length == length;
        let made = match open.tag.as_str() {
            "b" | "strong" => entity("bold"),
            "i" | "em" => entity("italic"),
            "u" | "ins" => entity("underline"),
            "s" | "strike" | "del" => entity("strikethrough"),
            "span" | "tg-spoiler" => entity("spoiler"),
            "blockquote" if open.argument.is_empty() => entity("blockquote"),
            "blockquote" => entity("expandable_blockquote"),
            "a" => {
                let url = match open.argument.as_str() {
                    "" => self.text.get(open.text_start..).unwrap_or(""),
                    href => href,
                };
                if url.is_empty() {
                    return Ok(());
                }
                entity("text_link").with_url(url)
            }
            "tg-emoji" => match open.argument.parse::<i64>() {
                Ok(id) if id != 0 => entity("custom_emoji").with_custom_emoji_id(&open.argument),
                _ => return err("Invalid custom emoji identifier specified".to_owned()),
            },
            "pre" => {
                // `<pre><code class="language-x">…</code></pre>`: the code was one pre.
                if let Some(last) = self.entities.last_mut()
                    && last.kind == "code"
                    && same_span(last)
                    && last.language.is_some()
                {
                    last.kind = "pre";
                    return Ok(());
                }
                entity("pre")
            }
            "code" => {
                let language = Some(open.argument).filter(|l| !l.is_empty());
                if let Some(last) = self.entities.last_mut()
                    && last.kind == "pre"
                    && same_span(last)
                    && language.is_some()
                {
                    last.language = language;
                    return Ok(());
                }
                Entity {
                    language,
                    ..entity("code")
                }
            }
            _ => return Ok(()),
        };
        self.entities.push(made);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(html: &str) -> (String, Vec<Entity>) {
        parse(html).unwrap_or_else(|e| panic!("{html:?}: {}", e.0))
    }

    fn refused(html: &str) -> String {
        match parse(html) {
            Ok(parsed) => panic!("{html:?} parsed: {parsed:?}"),
            Err(e) => e.description(),
        }
    }

    fn one(html: &str) -> Entity {
        let (text, entities) = ok(html);
        assert_eq!(text, "x", "{html}");
        assert_eq!(entities.len(), 1, "{html}: {entities:?}");
        entities.into_iter().next().unwrap()
    }

    #[test]
    fn every_tag_makes_its_entity_and_names_are_case_insensitive() {
        let e = |kind| Entity::new(kind, 0, 1);
        for (html, want) in [
            ("<b>x</b>", e("bold")),
            ("<STRONG>x</strong>", e("bold")),
            ("<i>x</i>", e("italic")),
            ("<em>x</EM>", e("italic")),
            ("<u>x</u>", e("underline")),
            ("<ins>x</ins>", e("underline")),
            ("<s>x</s>", e("strikethrough")),
            ("<strike>x</strike>", e("strikethrough")),
            ("<del>x</del>", e("strikethrough")),
            ("<tg-spoiler>x</tg-spoiler>", e("spoiler")),
            (r#"<span class="tg-spoiler">x</span>"#, e("spoiler")),
            ("<span class=tg-spoiler>x</span>", e("spoiler")),
            ("<code>x</code>", e("code")),
            ("<pre>x</pre>", e("pre")),
            ("<blockquote>x</blockquote>", e("blockquote")),
            (
                "<blockquote expandable>x</blockquote>",
                e("expandable_blockquote"),
            ),
            (
                r#"<a href="https://example.com/?a=1&amp;b=2">x</a>"#,
                e("text_link").with_url("https://example.com/?a=1&b=2"),
            ),
            (
                "<A HREF='https://example.com'>x</a >",
                e("text_link").with_url("https://example.com"),
            ),
            (
                r#"<tg-emoji emoji-id="5368324170671202286">x</tg-emoji>"#,
                e("custom_emoji").with_custom_emoji_id("5368324170671202286"),
            ),
        ] {
            assert_eq!(one(html), want, "{html}");
        }
    }

    #[test]
    fn pre_with_a_code_language_is_one_pre_and_inline_code_drops_its_language() {
        let (text, entities) = ok("<pre><code class=\"language-rust\">fn main() {}</code></pre>");
        assert_eq!(text, "fn main() {}");
        assert_eq!(entities, [Entity::new("pre", 0, 12).with_language("rust")]);
        assert_eq!(
            one(r#"<code class="language-rust">x</code>"#),
            Entity::new("code", 0, 1)
        );
        // A pre around a code without a language stays two entities.
        let (_, entities) = ok("<pre><code>x</code></pre>");
        assert_eq!(
            entities,
            [Entity::new("pre", 0, 1), Entity::new("code", 0, 1)]
        );
    }

    #[test]
    fn nested_tags_give_sorted_entities_and_empty_ones_are_dropped() {
        let (text, entities) = ok("a<b>b<i>c</i>d</b><u></u>e<s><i>f</i></s>");
        assert_eq!(text, "abcdef");
        assert_eq!(
            entities,
            [
                Entity::new("bold", 1, 3),
                Entity::new("italic", 2, 1),
                // Same span: Telegram's priority puts italic before strikethrough.
                Entity::new("italic", 5, 1),
                Entity::new("strikethrough", 5, 1),
            ]
        );
        // `</>` closes the innermost tag; a link without href links its text.
        let (text, entities) = ok("<b><a>https://t.me</></>");
        assert_eq!(text, "https://t.me");
        assert_eq!(
            entities,
            [
                Entity::new("text_link", 0, 12).with_url("https://t.me"),
                Entity::new("bold", 0, 12),
            ]
        );
    }

    #[test]
    fn entities_decode_named_and_numeric_and_a_bare_gt_is_text() {
        let (text, entities) = ok("&lt;b&gt; &amp; &quot;q&quot; &#65;&#x42;&#X1F600; a > b");
        assert_eq!(text, "<b> & \"q\" AB😀 a > b");
        assert!(entities.is_empty());
        assert_eq!(
            ok("<code>&lt;tag&gt;</code>").1,
            [Entity::new("code", 0, 5)]
        );
    }

    #[test]
    fn offsets_count_utf16_units_across_emoji_and_cjk() {
        // 😀 is two UTF-16 units (four bytes), 漢字 one unit each (three bytes each).
        let (text, entities) = ok("😀<b>漢字</b> <i>👍🏽x</i>&#x1F600;<u>é</u>");
        assert_eq!(text, "😀漢字 👍🏽x😀é");
        assert_eq!(
            entities,
            [
                Entity::new("bold", 2, 2),
                Entity::new("italic", 5, 5),
                Entity::new("underline", 12, 1),
            ]
        );
    }

    #[test]
    fn each_malformed_text_gets_telegrams_reason_and_byte_offset() {
        let cases = [
            ("a < b", "Unsupported start tag \"\" at byte offset 2"),
            (
                "x <foo>y</foo>",
                "Unsupported start tag \"foo\" at byte offset 2",
            ),
            ("é<br/>", "Unsupported start tag \"br/\" at byte offset 2"),
            ("<b>x</b></i>", "Unexpected end tag at byte offset 8"),
            ("x</b>", "Unexpected end tag at byte offset 1"),
            (
                "<b>x",
                "Can't find end tag corresponding to start tag \"b\"",
            ),
            (
                "<b><i>x</i>",
                "Can't find end tag corresponding to start tag \"b\"",
            ),
            ("a<b", "Unclosed start tag at byte offset 1"),
            ("<a href=\"x>y</a>", "Unclosed start tag at byte offset 0"),
            ("<b>x</b", "Unclosed end tag at byte offset 4"),
            (
                "<b><i>x</b></i>",
                "Unmatched end tag at byte offset 7, expected \"</i>\", found \"</b>\"",
            ),
            (
                "<a =\"x\">y</a>",
                "Empty attribute name in the tag \"a\" at byte offset 0",
            ),
            (
                "<a href>y</a>",
                "Expected equal sign in declaration of an attribute of the tag \"a\" at byte offset 0",
            ),
            ("<a href=", "Unclosed start tag \"a\" at byte offset 0"),
            (
                "<a href=x/y>z</a>",
                "Unexpected end of name token at byte offset 8",
            ),
            (
                "<span>x</span>",
                "Tag \"span\" must have class \"tg-spoiler\" at byte offset 0",
            ),
            (
                "<tg-emoji emoji-id=\"abc\">x</tg-emoji>",
                "Invalid custom emoji identifier specified",
            ),
            ("AT&T", "Unsupported HTML entity at byte offset 2"),
            ("&nbsp;", "Unsupported HTML entity at byte offset 0"),
            ("a &lt b", "Unsupported HTML entity at byte offset 2"),
            ("&#0;", "Unsupported HTML entity at byte offset 0"),
            ("&#x110000;", "Unsupported HTML entity at byte offset 0"),
            (
                "&#99999999999999999999;",
                "Unsupported HTML entity at byte offset 0",
            ),
            ("&#;", "Unsupported HTML entity at byte offset 0"),
            (
                "<a href=\"?a&b\">x</a>",
                "Unsupported HTML entity at byte offset 11",
            ),
            (
                "&#xD800;",
                "Text contains invalid Unicode characters after decoding HTML entities, check for unmatched surrogate code units",
            ),
        ];
        for (html, reason) in cases {
            assert_eq!(
                refused(html),
                format!("Bad Request: can't parse entities: {reason}"),
                "{html}"
            );
        }
    }

    #[test]
    fn no_input_panics() {
        // Every prefix of tricky texts, cut at each char boundary: an answer, never a panic.
        let texts = [
            "<pre><code class=\"language-rust\">&#x1F600;漢</code></pre>",
            "<a href='&amp;&#1;'>😀</a><blockquote expandable>é</blockquote>",
            "<<>></ ><b \t\n>&#x;&#",
        ];
        for text in texts {
            for (i, _) in text.char_indices().chain([(text.len(), ' ')]) {
                let _ = parse(&text[..i]);
            }
        }
    }
}
