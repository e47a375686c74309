//! The renderer's output in `mrkdwn`: each construct, escaping, links, word boundaries,
//! code, the split of a long answer; every message checked by `check.rs`; and the
//! renderer's properties for this dialect.

use im_bridge_channel::LengthUnit;
use im_bridge_channel::render::conformance;
use im_bridge_channel::render::{Dialect, render};

use super::{BOUNDARY, DEFAULT_MESSAGE_BYTES, MAX_MESSAGE_BYTES, SlackMrkdwn, slack_texts};

/// `markdown` as one `mrkdwn` message, checked to show exactly its `plain`.
fn mrkdwn(markdown: &str) -> String {
    let chunks = render(markdown, &SlackMrkdwn, LengthUnit::Chars, 100_000);
    assert!(chunks.len() <= 1, "{chunks:?}");
    for chunk in &chunks {
        if let Err(why) = SlackMrkdwn.check(chunk, LengthUnit::Chars, 100_000) {
            panic!("{why} in {:?}", chunk.text);
        }
    }
    conformance::one(markdown, &SlackMrkdwn)
}

#[test]
fn inline_styles_use_slacks_markers() {
    assert_eq!(mrkdwn("**b** *i* _i_ ~~s~~ `c`"), "*b* _i_ _i_ ~s~ `c`");
    assert_eq!(mrkdwn("***both***"), "_*both*_");
}

#[test]
fn only_ampersand_and_angle_brackets_are_escaped_everywhere() {
    assert_eq!(mrkdwn("a < b && c > d"), "a &lt; b &amp;&amp; c &gt; d");
    assert_eq!(mrkdwn("`a<b&c>`"), "`a&lt;b&amp;c&gt;`");
    assert_eq!(mrkdwn("<@U123> <!here>"), "&lt;@U123&gt; &lt;!here&gt;");
    assert_eq!(mrkdwn("\"quotes\" 'and' #hash"), "\"quotes\" 'and' #hash");
    assert_eq!(SlackMrkdwn.literal("**a<b&c>**"), "**a&lt;b&amp;c&gt;**");
}

#[test]
fn links_are_angle_bracketed_and_cannot_end_early() {
    assert_eq!(
        mrkdwn("[x](https://e.x/a?b=1&c=2)"),
        "<https://e.x/a?b=1&amp;c=2|x>"
    );
    assert_eq!(mrkdwn("<https://e.x/a>"), "<https://e.x/a>");
    assert_eq!(
        mrkdwn("[a|b > c](https://e.x/?q=a|b)"),
        "<https://e.x/?q=a%7Cb|a|b &gt; c>"
    );
    assert_eq!(mrkdwn("[m](mailto:a@b.c)"), "<mailto:a@b.c|m>");
    assert_eq!(mrkdwn("[x](javascript:alert(1))"), "x");
    assert_eq!(mrkdwn("[x](/relative)"), "x");
    // Styles around a link are kept, inside one left out.
    assert_eq!(mrkdwn("**[x](https://e.x)**"), "*<https://e.x|x>*");
    assert_eq!(mrkdwn("[**x** y](https://e.x)"), "<https://e.x|x y>");
}

#[test]
fn a_marker_inside_a_word_is_set_apart_by_a_zero_width_space() {
    let z = BOUNDARY;
    assert_eq!(mrkdwn("foo**bar**baz"), format!("foo{z}*bar*{z}baz"));
    assert_eq!(mrkdwn("**a**_b_"), format!("*a*{z}_b_"));
    assert_eq!(mrkdwn("(**a**)"), "(*a*)");
    assert_eq!(mrkdwn("2 * 3 * 4"), "2 * 3 * 4");
}

#[test]
fn code_blocks_are_fenced_without_their_language() {
    assert_eq!(
        mrkdwn("Try:\n\n```rust\nfn main() {\n    go(a < b);\n}\n```\n\nDone."),
        "Try:\n\n```fn main() {\n    go(a &lt; b);\n}```\n\nDone."
    );
    // Code holding a backtick: inline without markers, a block's fence broken.
    assert_eq!(mrkdwn("`` a`b ``"), "a`b");
    let z = BOUNDARY;
    assert_eq!(mrkdwn("~~~\na```b\n~~~"), format!("```a``{z}`b```"));
    assert_eq!(mrkdwn("~~~\nx`\n~~~"), format!("```x`{z}```"));
}

#[test]
fn headings_lists_and_quotes_degrade_to_text_slack_shows() {
    assert_eq!(mrkdwn("# Title\n\ntext"), "*Title*\n\ntext");
    assert_eq!(mrkdwn("- a\n- b"), "• a\n• b");
    assert_eq!(mrkdwn("1. a\n2. b"), "1. a\n2. b");
    assert_eq!(mrkdwn("> said\n> twice"), "> said\n> twice");
    assert_eq!(
        mrkdwn("before\n\n> one\n>\n> two\n\nafter > that"),
        "before\n\n> one\n> \n> two\n\nafter &gt; that"
    );
}

#[test]
fn a_45000_character_answer_is_split_under_the_cap_with_nothing_lost() {
    let paragraph =
        "Slack & friends <3 **bold** words, a [link](https://e.x/?a=1&b=2) and `code`.\n\n";
    let block = "```\nlet x = a < b && c;\n```\n\n";
    let mut answer = String::new();
    while answer.chars().count() < 45_000 {
        answer.push_str(paragraph);
        if answer.len().is_multiple_of(7) {
            answer.push_str(block);
        }
        answer.push_str("- item one\n- item two\n\n");
    }
    let chunks = render(
        &answer,
        &SlackMrkdwn,
        LengthUnit::Bytes,
        DEFAULT_MESSAGE_BYTES,
    );
    // What the reader sees is shorter than the Markdown (markers, addresses).
    let shown: usize = chunks.iter().map(|c| c.plain.len()).sum();
    assert!(
        shown > 30_000 && chunks.len() > shown / DEFAULT_MESSAGE_BYTES,
        "{shown}"
    );
    for chunk in &chunks {
        assert!(chunk.plain.len() <= DEFAULT_MESSAGE_BYTES);
        for text in slack_texts(&chunk.text) {
            assert!(text.len() <= MAX_MESSAGE_BYTES, "{}", text.len());
        }
        assert_eq!(chunk.text.matches("```").count() % 2, 0, "{:?}", chunk.text);
        SlackMrkdwn
            .check(chunk, LengthUnit::Bytes, DEFAULT_MESSAGE_BYTES)
            .unwrap();
    }
    conformance::check_final(
        &answer,
        &SlackMrkdwn,
        LengthUnit::Bytes,
        DEFAULT_MESSAGE_BYTES,
    );
    let whole = render(&answer, &SlackMrkdwn, LengthUnit::Bytes, usize::MAX);
    let words = |t: &str| t.split_whitespace().collect::<String>();
    let joined: String = chunks.iter().map(|c| words(&c.plain)).collect();
    assert_eq!(joined, words(&whole[0].plain));
}

#[test]
fn plain_text_of_45000_characters_is_thirteen_messages() {
    let answer = "Forty-five thousand characters of words. ".repeat(45_000 / 41 + 1);
    assert!(answer.chars().count() >= 45_000);
    let chunks = render(
        &answer,
        &SlackMrkdwn,
        LengthUnit::Bytes,
        DEFAULT_MESSAGE_BYTES,
    );
    assert_eq!(chunks.len(), 13);
    assert!(
        chunks
            .iter()
            .all(|c| c.plain.len() <= DEFAULT_MESSAGE_BYTES)
    );
    let joined: Vec<&str> = chunks.iter().map(|c| c.text.as_str()).collect();
    assert_eq!(joined.join(" "), answer.trim_end());
}

#[test]
fn a_code_block_cut_in_two_is_closed_and_reopened() {
    let code: String = (0..200).map(|i| format!("line {i} < end\n")).collect();
    let answer = format!("```\n{code}```");
    let chunks = render(&answer, &SlackMrkdwn, LengthUnit::Chars, 1000);
    assert!(chunks.len() > 1);
    for chunk in &chunks {
        assert!(
            chunk.text.starts_with("```") && chunk.text.ends_with("```"),
            "{:?}",
            chunk.text
        );
    }
}

#[test]
fn the_check_refuses_what_slack_would_misread() {
    use im_bridge_channel::render::Rendered;
    let bad = |text: &str, plain: &str| {
        let message = Rendered {
            text: text.into(),
            plain: plain.into(),
            plain_linked: None,
        };
        SlackMrkdwn.check(&message, LengthUnit::Chars, 100).is_err()
    };
    assert!(bad("a < b", "a < b"));
    assert!(bad("a & b", "a & b"));
    assert!(bad("a > b", "a > b"));
    assert!(bad("<javascript:x|y>", "y"));
    assert!(bad("<https://e.x|>", ""));
    assert!(bad("*a*", "b"));
    assert!(!bad("> <https://e.x|a &amp; b>", "a & b"));
}

#[test]
fn slack_mrkdwn_keeps_every_property() {
    conformance::run(&SlackMrkdwn);
}
