//! The renderer's guarantees as checks, for the tests and the `markdown` fuzz target
//! (through the crate's `fuzzing` module).
//!
//! [`telegram_html`] is a checker of Telegram HTML as strict as Telegram: what it accepts,
//! Telegram accepts, and it returns the text Telegram would show.
//!
//! Accepted: the tags `b i s code pre a blockquote`, properly nested and all closed; no
//! attribute but `href` on `a` and `class="language-…"` on a `code` directly inside `pre`;
//! the entities `&lt; &gt; &amp; &quot;` and numeric ones, and no bare `<`, `>` or `&`.
//! Telegram's nesting rules: code and pre hold text only (pre: one `code` at most, around
//! all of its text), quotes do not nest, a link holds no link and no code, and a code
//! block stands at the top level or directly in a quote.
//!
//! [`check_final`] and [`check_preview`] render a text and panic with the offending
//! message unless it keeps what the module docs promise: each message well-formed in its
//! markup and showing exactly its `plain`; within the limit as the cut counts it (a Feishu
//! card's entities, DingTalk's quoted lines), unless it is a single code point longer than
//! the limit; never blank; and the messages are the whole text in order, but for
//! whitespace at the cuts.

use super::{Markup, Measure, Rendered, render, render_preview};
use crate::capabilities::LengthUnit;

/// The text `html` shows, or why Telegram would refuse it.
pub fn telegram_html(html: &str) -> Result<String, String> {
    let mut shown = String::new();
    let mut stack: Vec<&str> = Vec::new();
    // Whether the innermost open `pre` has content yet (text or its `code`).
    let mut pre_used = false;
    let mut rest = html;
    while let Some(c) = rest.chars().next() {
        match c {
            '<' => {
                let end = rest.find('>').ok_or("unterminated tag")?;
                let tag = &rest[1..end];
                rest = &rest[end + 1..];
                if let Some(name) = tag.strip_prefix('/') {
                    match stack.pop() {
                        Some(open) if open == name => {}
                        other => return Err(format!("</{name}> closes {other:?}")),
                    }
                    continue;
                }
                let (name, attributes) = tag.split_once(' ').unwrap_or((tag, ""));
                let parent = stack.last().copied();
                if matches!(parent, Some("code")) {
                    return Err(format!("<{name}> inside code"));
                }
                if parent == Some("pre") {
                    if name != "code" || pre_used {
                        return Err(format!("<{name}> inside pre"));
                    }
                    pre_used = true;
                }
                match name {
                    "b" | "i" | "s" | "blockquote" if attributes.is_empty() => {}
                    "code" if attributes.is_empty() => {}
                    "code" if parent == Some("pre") => {
                        let language = attributes
                            .strip_prefix("class=\"language-")
                            .and_then(|a| a.strip_suffix('"'))
                            .ok_or_else(|| format!("code attributes {attributes:?}"))?;
                        if language.is_empty() || language.contains(['"', ' ', '&']) {
                            return Err(format!("language {language:?}"));
                        }
                    }
                    "pre" if attributes.is_empty() => {
                        if stack.iter().any(|t| *t != "blockquote") {
                            return Err(format!("pre inside {stack:?}"));
                        }
                        pre_used = false;
                    }
                    "a" => {
                        let href = attributes
                            .strip_prefix("href=\"")
                            .and_then(|a| a.strip_suffix('"'))
                            .ok_or_else(|| format!("a attributes {attributes:?}"))?;
                        if href.contains('"') {
                            return Err(format!("href {href:?}"));
                        }
                        decode_into(&mut String::new(), href)?;
                    }
                    _ => return Err(format!("tag <{tag}>")),
                }
                let nested = |t: &str| stack.contains(&t);
                if name == "blockquote" && nested("blockquote") {
                    return Err("nested blockquote".to_owned());
                }
                if (name == "a" || name == "code") && nested("a") {
                    return Err(format!("<{name}> inside a link"));
                }
                if name == "a" && nested("code") {
                    return Err("link inside code".to_owned());
                }
                stack.push(name);
            }
            '>' => return Err("bare >".to_owned()),
            _ => {
                let end = rest.find(['<', '>']).unwrap_or(rest.len());
                let text = &rest[..end];
                rest = &rest[end..];
                if stack.last() == Some(&"pre") {
                    if pre_used {
                        return Err("text after code inside pre".to_owned());
                    }
                    pre_used = true;
                }
                decode_into(&mut shown, text)?;
            }
        }
    }
    match stack.last() {
        Some(open) => Err(format!("<{open}> never closed")),
        None => Ok(shown),
    }
}

/// Appends `text` with its entities decoded; an unknown entity or a bare `&` is an error.
fn decode_into(out: &mut String, text: &str) -> Result<(), String> {
    let mut rest = text;
    while let Some(amp) = rest.find('&') {
        out.push_str(&rest[..amp]);
        let after = &rest[amp + 1..];
        let semi = after.find(';').ok_or("bare &")?;
        let name = &after[..semi];
        let decoded = match name {
            "lt" => '<',
            "gt" => '>',
            "amp" => '&',
            "quot" => '"',
            _ => {
                let number = name.strip_prefix('#').ok_or(format!("entity &{name};"))?;
                let value = match number.strip_prefix(['x', 'X']) {
                    Some(hex) => u32::from_str_radix(hex, 16),
                    None => number.parse(),
                }
                .map_err(|_| format!("entity &{name};"))?;
                char::from_u32(value).ok_or(format!("entity &{name};"))?
            }
        };
        out.push(decoded);
        rest = &after[semi + 1..];
    }
    out.push_str(rest);
    Ok(())
}

/// Renders `markdown` as a final and checks every message (see the module docs).
pub fn check_final(markdown: &str, markup: Markup, unit: LengthUnit, limit: usize) {
    let chunks = render(markdown, markup, unit, limit);
    let whole = render(markdown, markup, unit, usize::MAX);
    assert!(whole.len() <= 1, "{whole:?}");
    let whole = whole.first().map(|r| r.plain.as_str()).unwrap_or_default();
    let measure = Measure::new(unit, markup);
    for chunk in &chunks {
        check_markup(chunk, markup);
        // What the cut counted: a card's `<` and `>` as the entities they become, each
        // DingTalk newline as the quoted line it may start.
        let len = measure.measure(&chunk.plain);
        assert!(
            len <= limit || chunk.plain.chars().count() == 1,
            "{len} > {limit}: {chunk:?}"
        );
        if markup == Markup::FeishuCard {
            assert!(
                unit.measure(&Markup::FeishuCard.literal(&chunk.plain)) <= limit
                    || chunk.plain.chars().count() == 1,
                "{chunk:?}"
            );
        }
        assert!(!chunk.plain.trim().is_empty(), "{chunk:?}");
    }
    // The chunks are the whole text in order, but for whitespace at the cuts.
    let mut rest = whole;
    for chunk in &chunks {
        let piece = chunk.plain.trim_start();
        rest = rest.trim_start();
        assert!(rest.starts_with(piece), "{piece:?} is not next in {rest:?}");
        rest = &rest[piece.len()..];
    }
    assert!(rest.trim().is_empty(), "left over: {rest:?}");
    let joined: Vec<&str> = chunks.iter().map(|c| c.plain.as_str()).collect();
    assert_eq!(
        collapse(&joined.join(" ")).replace(' ', ""),
        collapse(whole).replace(' ', "")
    );
}

/// Renders `markdown` as a preview and checks it: well-formed, and within the limit.
pub fn check_preview(markdown: &str, markup: Markup, unit: LengthUnit, limit: usize) {
    let preview = render_preview(markdown, markup, unit, limit);
    check_markup(&preview, markup);
    let len = unit.measure(&preview.plain);
    assert!(len <= limit, "{len} > {limit}: {preview:?}");
}

/// A message is well-formed in its markup and shows exactly its `plain`, as far as a
/// check can tell without the platform.
fn check_markup(rendered: &Rendered, markup: Markup) {
    match markup {
        Markup::TelegramHtml => match telegram_html(&rendered.text) {
            Ok(shown) => assert_eq!(shown, rendered.plain, "in {:?}", rendered.text),
            Err(why) => panic!("{why} in {:?}", rendered.text),
        },
        Markup::Plain | Markup::PlainText => assert_eq!(rendered.text, rendered.plain),
        Markup::FeishuCard => assert!(card_safe(&rendered.text), "{:?}", rendered.text),
        Markup::DingTalkMarkdown => {}
    }
}

/// Whether a card's markdown holds no `<` or `>` outside its fenced code blocks (no text
/// can become a card tag), and closes every block it opens.
pub(crate) fn card_safe(text: &str) -> bool {
    // The open fence's length, as CommonMark closes it: a line of at least as many.
    let mut fence: Option<usize> = None;
    let tags_outside_code = text.split('\n').all(|line| {
        let ticks = line.len() - line.trim_start_matches('`').len();
        match fence {
            Some(open) if ticks >= open && line[ticks..].trim().is_empty() => fence = None,
            Some(_) => {}
            None if ticks >= 3 => fence = Some(ticks),
            None => return !line.contains(['<', '>']),
        }
        true
    });
    // A block left open would show its closing fence (and what follows) as code.
    tags_outside_code && fence.is_none()
}

/// Whitespace runs as one space, the ends trimmed.
fn collapse(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::telegram_html;

    #[test]
    fn the_checker_refuses_what_telegram_refuses() {
        for bad in [
            "<b><i>x</b></i>",
            "<b>x",
            "x</b>",
            "<u>x</u>",
            "<b class=\"x\">x</b>",
            "<code class=\"language-rust\">x</code>",
            "<pre><code>x</code>y</pre>",
            "<pre>x<code>y</code></pre>",
            "<blockquote><blockquote>x</blockquote></blockquote>",
            "<a href=\"x\"><code>y</code></a>",
            "<code><b>x</b></code>",
            "<b><pre>x</pre></b>",
            "a & b",
            "a &nbsp; b",
            "a > b",
            "<a href=\"x\" title=\"y\">z</a>",
        ] {
            assert!(telegram_html(bad).is_err(), "accepted {bad:?}");
        }
        assert_eq!(
            telegram_html(
                "<b>a &amp; <i>b</i></b> &lt;&#33;&#x41;&quot; <pre><code class=\"language-rust\">x</code></pre>"
            ),
            Ok("a & b <!A\" x".to_owned())
        );
        assert_eq!(
            telegram_html(
                "<blockquote><pre>x</pre></blockquote><a href=\"https://x?a=1&amp;b\">y</a>"
            ),
            Ok("xy".to_owned())
        );
    }
}
