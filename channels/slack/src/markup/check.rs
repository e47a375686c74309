//! What Slack would show of a `mrkdwn` message, for [`Dialect::check`](super::Dialect):
//! the tests' and the fuzz target's proof that every message the renderer writes is read
//! by Slack as the text it should show.
//!
//! Slack's parser is not public, so this reads only what the dialect writes and what
//! cannot be misread: every `&` starts `&amp;`, `&lt;` or `&gt;`; every `<` starts a link
//! `<url>` or `<url|text>` to an address with one of the dialect's schemes; a raw `>` only
//! ends a link or starts a quoted line (`> `). Style markers (`*`, `_`, `~`, `` ` ``) and
//! the zero-width spaces that separate them are taken out of both sides before comparing,
//! since Slack has no escape for them and shows one it does not pair as written.

use im_bridge_channel::render::Rendered;

use super::BOUNDARY;

/// Why `message` would not show exactly its `plain`, if it would not.
pub(super) fn check(message: &Rendered) -> Result<(), String> {
    let shown = shown(&message.text)?;
    if unmarked(&shown) == unmarked(&message.plain) {
        Ok(())
    } else {
        Err(format!("shows {shown:?}, not {:?}", message.plain))
    }
}

/// The text without style markers and boundaries.
fn unmarked(text: &str) -> String {
    text.chars()
        .filter(|c| !matches!(c, '*' | '_' | '~' | '`') && *c != BOUNDARY)
        .collect()
}

/// What Slack shows of `text`: entities decoded, links as their text, quote markers out.
pub(super) fn shown(text: &str) -> Result<String, String> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    let mut line_start = true;
    while let Some(c) = rest.chars().next() {
        if line_start && rest.starts_with("> ") {
            rest = &rest[2..];
            line_start = false;
            continue;
        }
        line_start = c == '\n';
        match c {
            '&' => {
                let (decoded, len) = entity(rest)?;
                out.push(decoded);
                rest = &rest[len..];
            }
            '<' => {
                let end = rest.find('>').ok_or("a < that starts no link")?;
                out.push_str(&link(&rest[1..end])?);
                rest = &rest[end + 1..];
            }
            '>' => return Err(format!("a raw > before {:?}", clip(rest))),
            c => {
                out.push(c);
                rest = &rest[c.len_utf8()..];
            }
        }
    }
    Ok(out)
}

/// The character an entity at the start of `text` stands for, and its length.
fn entity(text: &str) -> Result<(char, usize), String> {
    [("&amp;", '&'), ("&lt;", '<'), ("&gt;", '>')]
        .into_iter()
        .find(|(name, _)| text.starts_with(name))
        .map(|(name, c)| (c, name.len()))
        .ok_or_else(|| format!("a bare & before {:?}", clip(text)))
}

/// What a link `<inner>` shows: its text, or its address when it has none.
fn link(inner: &str) -> Result<String, String> {
    let (address, label) = match inner.split_once('|') {
        Some((address, label)) => (address, Some(label)),
        None => (inner, None),
    };
    let schemes = ["http://", "https://", "mailto:"];
    let lower = address.to_ascii_lowercase();
    if !schemes.iter().any(|s| lower.starts_with(s)) {
        return Err(format!("a link to {address:?}, which is no address"));
    }
    if address.contains(|c: char| c.is_whitespace() || c == '<') {
        return Err(format!("a link address {address:?} that Slack would cut"));
    }
    let shown = match label {
        Some("") => return Err("a link without text".into()),
        Some(label) => label,
        None => address,
    };
    let mut out = String::with_capacity(shown.len());
    let mut rest = shown;
    while let Some(c) = rest.chars().next() {
        if c == '&' {
            let (decoded, len) = entity(rest)?;
            out.push(decoded);
            rest = &rest[len..];
        } else {
            out.push(c);
            rest = &rest[c.len_utf8()..];
        }
    }
    Ok(out)
}

/// The start of `text`, for an error message.
fn clip(text: &str) -> String {
    text.chars().take(20).collect()
}
