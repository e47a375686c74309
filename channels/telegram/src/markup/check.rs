//! A checker of Telegram HTML as strict as Telegram: what it accepts, Telegram accepts,
//! and it returns the text Telegram would show. [`TelegramHtml`](super::TelegramHtml)'s
//! [`check`](im_bridge_channel::render::Dialect::check), so the renderer's property tests
//! and the `markdown` fuzz target hold this dialect to it.
//!
//! Accepted: the tags `b i s code pre a blockquote`, properly nested and all closed; no
//! attribute but `href` on `a` and `class="language-…"` on a `code` directly inside `pre`;
//! the entities `&lt; &gt; &amp; &quot;` and numeric ones, and no bare `<`, `>` or `&`.
//! Telegram's nesting rules: code and pre hold text only (pre: one `code` at most, around
//! all of its text), quotes do not nest, a link holds no link and no code, and a code
//! block stands at the top level or directly in a quote.

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
