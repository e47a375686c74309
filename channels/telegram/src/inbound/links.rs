//! A message's named links (`text_link` entities) kept for the agent: Telegram sends the
//! link's text in `text` and where it points only in the entity's `url`, so without this
//! the agent reads the words and loses the link. Each becomes `[text](url)`, as Feishu's
//! inbound renders a named link. Pure.
//!
//! Entity positions are UTF-16 code units (Bot API); [`byte_range`] maps one onto the
//! text's bytes and refuses, rather than panics on, a range past the end or one that
//! starts or ends inside a character (half a surrogate pair).

use std::ops::Range;

use crate::model::MessageEntity;

/// The entity type of a named link.
const TEXT_LINK: &str = "text_link";

/// The byte range of the UTF-16 range `offset..offset + length` of `text`; `None` when
/// it runs past the end or cuts a character.
pub(crate) fn byte_range(text: &str, offset: u32, length: u32) -> Option<Range<usize>> {
    let (start, end) = (u64::from(offset), u64::from(offset) + u64::from(length));
    let mut units = 0u64;
    let (mut from, mut to) = (None, None);
    for (at, ch) in text.char_indices().chain([(text.len(), '\0')]) {
        if units == start {
            from = Some(at);
        }
        if units == end {
            to = Some(at);
            break;
        }
        if units > end || at == text.len() {
            break;
        }
        units += ch.len_utf16() as u64;
    }
    Some(from?..to?)
}

/// `text` with each `text_link` entity's words written `[words](url)`. An entity without a
/// URL, with a range that does not fit, or overlapping an earlier one is left as it is.
pub(crate) fn with_links(text: &str, entities: &[MessageEntity]) -> String {
    let mut links: Vec<(Range<usize>, &str)> = entities
        .iter()
        .filter(|e| e.kind == TEXT_LINK)
        .filter_map(|e| {
            let url = e.url.as_deref().map(str::trim).filter(|u| !u.is_empty())?;
            Some((byte_range(text, e.offset, e.length)?, url))
        })
        .collect();
    links.sort_by_key(|(range, _)| range.start);
    let mut out = String::with_capacity(text.len());
    let mut done = 0;
    for (range, url) in links {
        if range.start < done {
            continue;
        }
        out.push_str(&text[done..range.start]);
        // Spaces the entity took in stay outside the brackets.
        let taken = &text[range.clone()];
        let words = taken.trim();
        let lead = &taken[..taken.len() - taken.trim_start().len()];
        let trail = &taken[taken.trim_end().len()..];
        out.push_str(lead);
        if words.is_empty() || words == url {
            out.push_str(url);
        } else {
            out.push_str(&format!("[{words}]({url})"));
        }
        out.push_str(if words.is_empty() { "" } else { trail });
        done = range.end;
    }
    out.push_str(&text[done..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn link(offset: u32, length: u32, url: &str) -> MessageEntity {
        MessageEntity {
            kind: TEXT_LINK.into(),
            offset,
            length,
            url: Some(url.into()),
        }
    }

    #[test]
    fn utf16_ranges_map_to_bytes_or_to_nothing() {
        // "é" is 1 unit and 2 bytes; "🦌" is 2 units (a surrogate pair) and 4 bytes.
        let text = "é🦌 deer";
        assert_eq!(byte_range(text, 0, 1), Some(0..2));
        assert_eq!(byte_range(text, 1, 2), Some(2..6));
        assert_eq!(byte_range(text, 4, 4), Some(7..11));
        assert_eq!(byte_range(text, 8, 0), Some(11..11), "the very end");
        assert_eq!(byte_range(text, 2, 1), None, "starts inside the pair");
        assert_eq!(byte_range(text, 1, 1), None, "ends inside the pair");
        assert_eq!(byte_range(text, 4, 5), None, "past the end");
        assert_eq!(byte_range(text, 9, 0), None);
        assert_eq!(byte_range(text, u32::MAX, u32::MAX), None);
        assert_eq!(byte_range("", 0, 0), Some(0..0));
    }

    #[test]
    fn named_links_keep_their_url() {
        let text = "🦌 read the spec and the plan";
        // "the spec" starts after "🦌 read " (2 + 6 units).
        let entities = [
            link(8, 8, "https://example.com/spec"),
            link(25, 4, "https://example.com/plan"),
            MessageEntity {
                kind: "bold".into(),
                offset: 0,
                length: 2,
                url: None,
            },
        ];
        assert_eq!(
            with_links(text, &entities),
            "🦌 read [the spec](https://example.com/spec) and the [plan](https://example.com/plan)"
        );
        // Out of range, inside a character, overlapping, or without a URL: left alone.
        let odd = [
            link(1, 3, "https://a.example"),
            link(8, 99, "https://b.example"),
            link(8, 4, "https://c.example"),
            link(9, 2, "https://d.example"),
            MessageEntity {
                url: None,
                ..link(17, 3, "")
            },
        ];
        assert_eq!(
            with_links(text, &odd),
            "🦌 read [the](https://c.example) spec and the plan"
        );
        // Words that are the URL itself stay the URL.
        let bare = "see https://e.x";
        assert_eq!(with_links(bare, &[link(4, 11, "https://e.x")]), bare);
    }
}
