//! Interactive message cards: the one card shape the adapter sends, and the split of a
//! card's markdown into cards that each stay within the platform's card limit (the safety
//! net behind the renderer, [`FeishuCard`](crate::FeishuCard), which already writes the agent's text
//! as card markdown with `<` and `>` escaped and bounds its visible length).
//!
//! Every card is a message card JSON v1 with one `markdown` element. `update_multi: true`
//! makes it a shared card, which is what allows later `PATCH`es to be seen by everyone;
//! it must be present in the card sent and in every patch.
//!
//! The limit ([`MAX_CARD_BYTES`](crate::api::MAX_CARD_BYTES)) is on the request body
//! ("卡片消息请求体最大不能超过 30 KB"), which carries the card's serialized JSON as a
//! JSON string: escaped twice. So the text's budget is the limit minus the envelope, and
//! the escaping (a quote takes four bytes there, a newline three, a control character
//! seven) can still push a piece over it.
//! [`split_for_cards`] therefore cuts with the core splitter
//! (`im_bridge_channel::split::split`, in UTF-8 bytes:
//! on paragraph, line or space boundaries, never inside a character, closing and
//! reopening a fenced code block it cuts through) and cuts a piece again, with a budget
//! shrunk by how much escaping grew it, until its card fits.

use im_bridge_channel::LengthUnit;
use im_bridge_channel::split::split;
use serde_json::{Value, json};

/// Escaping twice makes at most this many bytes of one byte of text (`\\u001f`).
pub const MAX_ESCAPE_GROWTH: usize = 7;

/// The card showing `markdown`.
pub fn card(markdown: &str) -> Value {
    quoting(None, markdown)
}

/// The card showing `markdown` under a small grey note quoting what it answers (a
/// `note` element of plain text: nothing in it is read as markup).
pub fn quoting(quote: Option<&str>, markdown: &str) -> Value {
    let answer = json!({ "tag": "markdown", "content": markdown });
    let elements = match quote {
        Some(quote) => json!([
            { "tag": "note", "elements": [ { "tag": "plain_text", "content": quote } ] },
            answer,
        ]),
        None => json!([answer]),
    };
    json!({
        "config": { "wide_screen_mode": true, "update_multi": true },
        "elements": elements,
    })
}

/// Most lines of a quoted message.
pub const QUOTE_LINES: usize = 3;
/// Most characters of a quoted message.
pub const QUOTE_CHARS: usize = 240;

/// What a card quotes of the user's `text`: its first [`QUOTE_LINES`] non-empty lines, at
/// most [`QUOTE_CHARS`] characters (cut with "…"); `None` for a blank text.
pub fn quote(text: &str) -> Option<String> {
    let lines: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    if lines.is_empty() {
        return None;
    }
    let joined = lines[..lines.len().min(QUOTE_LINES)].join("\n");
    let cut = lines.len() > QUOTE_LINES || joined.chars().count() > QUOTE_CHARS;
    let mut quote: String = joined.chars().take(QUOTE_CHARS).collect();
    if cut {
        quote.push('…');
    }
    Some(quote)
}

/// The length of [`card`]`(markdown)` as a request carries it (serialized, then a JSON
/// string in the body), in bytes: what the card limit bounds.
pub fn card_len(markdown: &str) -> usize {
    wire_len(&card(markdown).to_string())
}

/// The bytes `content` takes as a JSON string in a request body, quotes included: what
/// `serde_json` writes for it (`"` and `\` take two bytes, `\n` and its kind two, other
/// control characters six).
pub fn wire_len(content: &str) -> usize {
    let escaped: usize = content
        .bytes()
        .map(|b| match b {
            b'"' | b'\\' | b'\n' | b'\r' | b'\t' | 0x08 | 0x0c => 2,
            0x00..=0x1f => 6,
            _ => 1,
        })
        .sum();
    escaped + 2
}

/// `text` cut into the texts of cards whose serialized JSON is at most `max_bytes` each
/// (see the module docs for where it cuts). The empty text gives no card. Below a
/// `max_bytes` that leaves the text a few bytes of room (far under any real limit), the
/// pieces are as small as the splitter allows and may still be over.
pub fn split_for_cards(text: &str, max_bytes: usize) -> Vec<String> {
    let envelope = card_len("");
    let room = max_bytes.saturating_sub(envelope).max(1);
    let mut cards = Vec::new();
    for piece in split(text, LengthUnit::Bytes, room) {
        push_fitting(piece, room, max_bytes, &mut cards);
    }
    cards
}

/// Pushes `piece` (cut with `budget`) if its card fits in `max_bytes`, else cuts it again
/// with a smaller budget. The budget shrinks on every round and never goes below
/// `room / MAX_ESCAPE_GROWTH`, where any piece fits, so this ends.
fn push_fitting(piece: String, budget: usize, max_bytes: usize, cards: &mut Vec<String>) {
    let len = card_len(&piece);
    let envelope = card_len("");
    let room = max_bytes.saturating_sub(envelope).max(1);
    let floor = (room / MAX_ESCAPE_GROWTH).max(1);
    if len <= max_bytes || budget <= floor {
        cards.push(piece);
        return;
    }
    // The escaped text is `len - envelope` bytes for `piece.len()` bytes of text.
    let escaped = len - envelope;
    let scaled = piece.len().saturating_mul(room) / escaped.max(1);
    let smaller = scaled.min(budget - 1).max(floor);
    for part in split(&piece, LengthUnit::Bytes, smaller) {
        push_fitting(part, smaller, max_bytes, cards);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::MAX_CARD_BYTES;

    #[test]
    fn a_cards_wire_length_is_what_serde_json_writes() {
        for content in [
            "",
            "plain",
            "a \"quote\" and a \\ back",
            "lines\n\tand\r\u{1}\u{8}\u{c}",
            "中文",
        ] {
            assert_eq!(
                wire_len(content),
                serde_json::to_string(content).unwrap().len(),
                "{content:?}"
            );
        }
    }

    fn assert_fits(cards: &[String], max: usize) {
        for (i, c) in cards.iter().enumerate() {
            assert!(card_len(c) <= max, "card {i} is {} bytes", card_len(c));
            assert!(!c.is_empty());
        }
    }

    /// What the adapter writes, as recorded in `tests/fixtures/card_quoting_reply.json`.
    #[test]
    fn a_quoting_card_is_the_recorded_one() {
        let recorded: Value =
            serde_json::from_str(im_bridge_channel::fixture!("card_quoting_reply.json")).unwrap();
        let written = quoting(
            Some("and the changelog?"),
            "**Changelog 1.4**\n\n- faster reconnects\n- cards patched in place",
        );
        assert_eq!(written, recorded);
    }

    #[test]
    fn the_card_is_a_shared_markdown_card() {
        let c = card("**hi** \"there\"");
        assert_eq!(c["config"]["update_multi"], true);
        assert_eq!(c["config"]["wide_screen_mode"], true);
        assert_eq!(c["elements"][0]["tag"], "markdown");
        assert_eq!(c["elements"][0]["content"], "**hi** \"there\"");
    }

    #[test]
    fn a_quote_is_the_first_lines_of_the_message_in_a_note() {
        assert_eq!(quote("  \n\n"), None);
        assert_eq!(
            quote("one\n\n two \nthree").as_deref(),
            Some("one\ntwo\nthree")
        );
        assert_eq!(quote("a\nb\nc\nd").as_deref(), Some("a\nb\nc…"));
        let long = "字".repeat(300);
        let q = quote(&long).unwrap();
        assert_eq!(q.chars().count(), QUOTE_CHARS + 1);
        assert!(q.ends_with('…'));
        let c = quoting(Some("<at id=all></at>"), "answer");
        assert_eq!(c["elements"][0]["tag"], "note");
        assert_eq!(c["elements"][0]["elements"][0]["tag"], "plain_text");
        assert_eq!(c["elements"][1]["content"], "answer");
        assert_eq!(c["config"]["update_multi"], true);
    }

    #[test]
    fn short_text_is_one_card_and_empty_text_none() {
        assert_eq!(split_for_cards("hello", MAX_CARD_BYTES), vec!["hello"]);
        assert!(split_for_cards("", MAX_CARD_BYTES).is_empty());
    }

    #[test]
    fn long_text_is_cut_on_paragraphs_within_the_limit() {
        let paragraph = "word ".repeat(200);
        let text = vec![paragraph.trim_end(); 100].join("\n\n");
        let cards = split_for_cards(&text, MAX_CARD_BYTES);
        assert!(cards.len() >= 4, "{}", cards.len());
        assert_fits(&cards, MAX_CARD_BYTES);
        assert_eq!(cards.concat(), text);
        // Cut after a blank line, not inside a paragraph.
        for c in &cards[..cards.len() - 1] {
            assert!(c.ends_with('\n'), "{:?}", &c[c.len() - 20..]);
        }
    }

    #[test]
    fn escaping_heavy_text_still_fits() {
        // Quotes and newlines double, control characters grow sixfold.
        for unit in ["\"\n", "\\\"", "\u{1}\u{2} ", "\u{1f}"] {
            let text = unit.repeat(40_000);
            let cards = split_for_cards(&text, MAX_CARD_BYTES);
            assert_fits(&cards, MAX_CARD_BYTES);
            assert_eq!(cards.concat(), text, "{unit:?}");
        }
    }

    #[test]
    fn multibyte_text_is_never_cut_inside_a_character() {
        let text = "飞书卡片😀".repeat(5_000);
        let cards = split_for_cards(&text, MAX_CARD_BYTES);
        assert!(cards.len() > 1);
        assert_fits(&cards, MAX_CARD_BYTES);
        assert_eq!(cards.concat(), text);
    }

    #[test]
    fn a_cut_code_block_is_closed_and_reopened() {
        let code = "let x = \"y\";\n".repeat(4_000);
        let text = format!("Intro\n\n```rust\n{code}```\n\nOutro");
        let cards = split_for_cards(&text, MAX_CARD_BYTES);
        assert!(cards.len() > 1);
        assert_fits(&cards, MAX_CARD_BYTES);
        for c in &cards {
            let fences = c.lines().filter(|l| l.starts_with("```")).count();
            assert_eq!(fences % 2, 0, "unbalanced fences in {:?}", &c[..20]);
        }
        assert!(cards[1..].iter().any(|c| c.starts_with("```rust\n")));
    }

    #[test]
    fn tiny_limits_do_not_loop_or_panic() {
        for max in [0, 1, 10, card_len(""), card_len("") + 3] {
            let cards = split_for_cards("a \"b\" c\nd", max);
            assert!(!cards.is_empty());
        }
    }
}
