//! Written `mrkdwn` cut to what Slack takes ([`within_limit`]): the core's renderer cuts
//! an answer by what the reader sees, counting escapes, but not the style markers, the
//! zero-width boundaries, a quote's `> ` or a link's address, so a part cut near
//! [`MAX_MESSAGE_BYTES`](super::MAX_MESSAGE_BYTES) can be longer as written. Slack refuses
//! such a `text` in `chat.update` (`msg_too_long`), which finishes a streamed answer, so
//! the adapter sends what does not fit as follow-up messages.
//!
//! The written text is cut between its atoms (an entity `&amp;`, a link `<url|text>`, a
//! code fence ```` ``` ````), preferring a line before a blank one (a paragraph break,
//! where no inline style is open), then any line break, then a space, each if it keeps the
//! message at least half full; only a link longer than a whole message is cut inside
//! (between characters). A code block open at the cut is closed at the end of the message
//! and opened again at the start of the next, and a quoted line cut in its middle goes on
//! quoted. An inline style open at a cut other than a paragraph break shows its markers as
//! typed (Slack has no escape to close it with): the text is all there either way.
//! Lengths are bytes of UTF-8, as Slack counts them.

use super::BOUNDARY;

/// What a message may grow by past its cut, in bytes: a [`BOUNDARY`] and a closing fence.
const CLOSING: usize = 6;
/// The most the next message may start with past the cut, in bytes: a quote's `> `, a
/// fence and a [`BOUNDARY`]. A cut keeps more than this before it (more than `> ` outside
/// code), so the text left is always shorter.
const OPENING: usize = 8;

/// `text` (written `mrkdwn`) as messages of at most `max` bytes each: itself when it fits
/// (the empty text too), else cut as the module docs say. `max` must leave room for a few
/// bytes of markup (the adapter's is 4,000).
pub(crate) fn within_limit(text: &str, max: usize) -> Vec<String> {
    if text.len() <= max {
        return vec![text.to_owned()];
    }
    let mut texts = Vec::new();
    let mut rest = text.to_owned();
    while rest.len() > max {
        let (head, tail) = cut_once(&rest, max);
        if !head.trim().is_empty() {
            texts.push(head);
        }
        rest = tail;
    }
    if !rest.trim().is_empty() {
        texts.push(rest);
    }
    texts
}

/// Where a message may end, and what is open there.
#[derive(Clone, Copy, Debug)]
struct Cut {
    /// The byte where the message ends.
    end: usize,
    /// The byte where the next message's text starts (after the line break or space).
    next: usize,
    /// A code block is open there.
    in_pre: bool,
    /// The cut is inside a quoted line (not at its end).
    mid_quote: bool,
}

/// The best cuts seen so far while reading a message's text.
#[derive(Default)]
struct Cuts {
    paragraph: Option<Cut>,
    line: Option<Cut>,
    space: Option<Cut>,
    atom: Option<Cut>,
}

/// The first message of `text` (over `max`) and the text left for the next ones.
fn cut_once(text: &str, max: usize) -> (String, String) {
    let room = max.saturating_sub(CLOSING).max(OPENING + 1);
    let mut cuts = Cuts::default();
    let mut bytes = 0;
    let mut in_pre = false;
    let mut quoted = text.starts_with("> ");
    let mut at = 0;
    while at < text.len() {
        let rest = &text[at..];
        let len = atom_len(rest);
        let atom = &rest[..len];
        let cut = |next| Cut {
            end: at,
            next,
            in_pre,
            mid_quote: quoted,
        };
        // The latest cut of each kind is the fullest message.
        let opening = if in_pre {
            OPENING
        } else {
            2 * usize::from(quoted)
        };
        if bytes > opening {
            cuts.atom = Some(cut(at));
            if atom == "\n" {
                let line_end = Cut {
                    mid_quote: false,
                    ..cut(at + 1)
                };
                let next = &text[at + 1..];
                if next.starts_with('\n') || next.starts_with("> \n") {
                    cuts.paragraph = Some(line_end);
                }
                cuts.line = Some(line_end);
            } else if atom == " " {
                // A space in code is code: it goes on in the next message.
                cuts.space = Some(cut(if in_pre { at } else { at + 1 }));
            }
        }
        if bytes + len > room {
            break;
        }
        if atom == "```" {
            in_pre = !in_pre;
        }
        if atom == "\n" {
            quoted = text[at + 1..].starts_with("> ");
        }
        bytes += len;
        at += len;
    }
    let half = |c: &Option<Cut>| c.filter(|c| c.end * 2 >= room);
    let chosen = half(&cuts.paragraph)
        .or_else(|| half(&cuts.line))
        .or_else(|| half(&cuts.space))
        .or(cuts.line)
        .or(cuts.space)
        .or(cuts.atom);
    match chosen {
        Some(cut) => split_at(text, cut),
        // Only a link longer than a message: cut inside it, between characters.
        None => {
            let end = text.floor_char_boundary(room);
            (text[..end].to_owned(), text[end..].to_owned())
        }
    }
}

/// The length in bytes of the atom `text` starts with: an entity, a link, a code fence, or
/// one character.
fn atom_len(text: &str) -> usize {
    if text.starts_with("```") {
        return 3;
    }
    let first = text.chars().next().map_or(0, char::len_utf8);
    let closing = match text.as_bytes().first() {
        Some(b'&') => text.bytes().take(8).position(|b| b == b';'),
        Some(b'<') => text.find('>'),
        _ => None,
    };
    closing.map_or(first, |end| end + 1)
}

/// `text` cut at `cut`: the message, closed, and the rest, opened again.
fn split_at(text: &str, cut: Cut) -> (String, String) {
    let mut head = text[..cut.end].to_owned();
    let mut tail = String::new();
    let mut rest = &text[cut.next..];
    if cut.in_pre {
        if head.ends_with('`') {
            head.push(BOUNDARY);
        }
        head.push_str("```");
        if cut.mid_quote && !rest.starts_with("> ") {
            tail.push_str("> ");
        } else if let Some(after) = rest.strip_prefix("> ") {
            tail.push_str("> ");
            rest = after;
        }
        tail.push_str("```");
        if rest.starts_with('`') {
            tail.push(BOUNDARY);
        }
    } else {
        trim_blank_end(&mut head);
        rest = trim_blank_start(rest);
        if cut.mid_quote && !rest.starts_with("> ") {
            tail.push_str("> ");
        }
    }
    tail.push_str(rest);
    (head, tail)
}

/// Takes blank lines (a quoted one too) and spaces off the end of `text`.
fn trim_blank_end(text: &mut String) {
    loop {
        let trimmed = text.trim_end().len();
        text.truncate(trimmed);
        let last_line = text.rfind('\n').map_or(0, |i| i + 1);
        if &text[last_line..] == ">" {
            text.truncate(last_line);
        } else {
            return;
        }
    }
}

/// `text` without the blank lines (a quoted one too) and spaces it starts with.
fn trim_blank_start(mut text: &str) -> &str {
    loop {
        let line_end = text.find('\n').map_or(text.len(), |i| i + 1);
        let line = &text[..line_end];
        if line_end < text.len() && matches!(line.trim_end(), "" | ">") {
            text = &text[line_end..];
        } else {
            return text.trim_start_matches(' ');
        }
    }
}

#[cfg(test)]
mod tests {
    use im_bridge_channel::LengthUnit;
    use im_bridge_channel::render::render;

    use super::super::check::shown;
    use super::super::{MAX_MESSAGE_BYTES, SlackMrkdwn};
    use super::*;

    /// What the messages show together, every style marker, boundary and space aside.
    fn shown_all(texts: &[String]) -> String {
        texts
            .iter()
            .map(|t| shown(t).unwrap_or_else(|why| panic!("{why} in {t:?}")))
            .collect::<String>()
            .chars()
            .filter(|c| !matches!(*c, '*' | '_' | '~' | '`' | BOUNDARY) && !c.is_whitespace())
            .collect()
    }

    /// Asserts every message of `texts` is within `max`, and each code fence closed in the
    /// message that opens it.
    fn assert_fit(texts: &[String], max: usize) {
        for text in texts {
            assert!(text.len() <= max, "{} bytes over {max}", text.len());
            assert!(!text.trim().is_empty());
            assert_eq!(
                text.matches("```").count() % 2,
                0,
                "an open fence in {text:?}"
            );
        }
    }

    /// Markdown where markup is most of what is written: styles on short words, links
    /// with long addresses, quotes, code and escapes.
    fn marked_up(paragraphs: usize) -> String {
        let mut md = String::new();
        for n in 0..paragraphs {
            md.push_str(&format!(
                "**b{n}** _i_ ~~s~~ `c&d` [x](https://example.com/a/long/path/{n}?q=1&r=2) a<b\n\n\
                 > quoted **line** {n}\n> and *more* & more\n\n\
                 ```\nfn f{n}() -> u8 {{ a & b < c }}\n\nlet x = {n};\n```\n\n"
            ));
        }
        md
    }

    #[test]
    fn a_text_that_fits_is_itself() {
        assert_eq!(within_limit("", 10), [""]);
        assert_eq!(within_limit("*a* b", 5), ["*a* b"]);
    }

    #[test]
    fn a_part_at_the_cap_full_of_markup_is_cut_within_it_losing_nothing() {
        let md = marked_up(400);
        let parts = render(&md, &SlackMrkdwn, LengthUnit::Bytes, MAX_MESSAGE_BYTES);
        let longest = parts.iter().map(|p| p.text.len()).max().unwrap();
        assert!(
            longest > MAX_MESSAGE_BYTES,
            "the renderer alone wrote {longest}"
        );
        for part in &parts {
            let texts = within_limit(&part.text, MAX_MESSAGE_BYTES);
            assert_fit(&texts, MAX_MESSAGE_BYTES);
            assert_eq!(
                shown_all(&texts),
                shown_all(std::slice::from_ref(&part.text))
            );
        }
    }

    #[test]
    fn small_caps_cut_every_construct_well_formed() {
        let md = marked_up(6);
        let whole = render(&md, &SlackMrkdwn, LengthUnit::Chars, 100_000);
        let text = &whole[0].text;
        for max in [80, 97, 123, 200, 333] {
            let texts = within_limit(text, max);
            assert!(texts.len() > 1);
            assert_fit(&texts, max);
            assert_eq!(
                shown_all(&texts),
                shown_all(std::slice::from_ref(text)),
                "at {max}"
            );
        }
    }

    #[test]
    fn a_code_block_is_closed_and_opened_again_and_a_quote_goes_on_quoted() {
        let code = format!("```{}```", "let x = 1;\n".repeat(8).trim_end());
        let texts = within_limit(&code, 60);
        assert_fit(&texts, 60);
        assert!(
            texts
                .iter()
                .all(|t| t.starts_with("```") && t.ends_with("```"))
        );
        let quote = format!("> {}", "word ".repeat(30).trim_end());
        let texts = within_limit(&quote, 50);
        assert_fit(&texts, 50);
        assert!(texts.iter().all(|t| t.starts_with("> ")), "{texts:?}");
        // A paragraph break is preferred to a line break, and blank lines are not sent.
        let prose = format!("{}\n\n{}\nend", "a ".repeat(20).trim_end(), "b".repeat(15));
        assert_eq!(
            within_limit(&prose, 55),
            [
                "a ".repeat(20).trim_end().to_owned(),
                format!("{}\nend", "b".repeat(15))
            ]
        );
    }

    #[test]
    fn entities_and_links_are_never_cut_unless_a_link_outgrows_a_message() {
        let text = format!(
            "{}<https://e.x/{}|t> &amp;",
            "&lt;".repeat(30),
            "p".repeat(20)
        );
        // The link is 36 bytes: it fits from 42 on, room left for a closing fence.
        for max in 42..80 {
            let texts = within_limit(&text, max);
            assert_fit(&texts, max);
            assert_eq!(
                shown_all(&texts),
                shown_all(std::slice::from_ref(&text)),
                "at {max}"
            );
        }
        let long = format!("<https://e.x/{}>", "p".repeat(100));
        let texts = within_limit(&long, 40);
        assert_fit(&texts, 40);
        assert_eq!(texts.concat(), long);
    }

    #[test]
    fn lengths_are_bytes_so_chinese_is_cut_three_times_as_often_and_between_characters() {
        let prose = "中文回答，每个字三个字节。".repeat(250);
        assert!(prose.chars().count() < MAX_MESSAGE_BYTES && prose.len() > 2 * MAX_MESSAGE_BYTES);
        let texts = within_limit(&prose, MAX_MESSAGE_BYTES);
        assert_eq!(
            texts.len(),
            3,
            "{:?}",
            texts.iter().map(String::len).collect::<Vec<_>>()
        );
        assert_fit(&texts, MAX_MESSAGE_BYTES);
        assert_eq!(texts.concat(), prose);
        // A link longer than a message is cut inside, never inside a character.
        let long = format!("<https://e.x/{}>", "路".repeat(30));
        for max in 20..40 {
            let texts = within_limit(&long, max);
            assert_fit(&texts, max);
            assert_eq!(texts.concat(), long, "at {max}");
        }
    }
}
