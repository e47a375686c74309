//! The renderer's output in a card's markdown: what it keeps, what it degrades, the
//! entities it writes and counts, and the fuzzer's regressions (issue 19); and the
//! renderer's properties for this dialect.

use im_bridge_channel::LengthUnit;
use im_bridge_channel::render::conformance::{self, check_final, check_preview, one, texts};
use im_bridge_channel::render::{Dialect, render, render_preview};

use super::{FeishuCard, card_safe};

use LengthUnit::Utf16;

/// `markdown` as one Feishu card's markdown.
fn card(markdown: &str) -> String {
    one(markdown, &FeishuCard)
}

#[test]
fn feishu_cards_keep_what_card_markdown_shows_and_degrade_the_rest() {
    conformance::assert_each(
        &FeishuCard,
        &[
            (
                "**b** *i* _i_ ~~s~~ `c` [x](<https://e.x/a(1) b>)",
                "**b** *i* *i* ~~s~~ `c` [x](https://e.x/a%281%29%20b)",
            ),
            // Headings bold; code as code; quotes show their text; tags are escaped.
            (
                "# Plan\n\n```rust\nlet a = b < c;\n```\n\n> quoted <at id=all></at>",
                "**Plan**\n\n```rust\nlet a = b < c;\n```\n\nquoted &#60;at id=all&#62;&#60;/at&#62;",
            ),
            // Lists and tables as text; only http(s) links; an image is a link to it.
            (
                "- one\n- two\n\n| a | b |\n|---|---|\n| 1 | 2 |",
                "• one\n• two\n\n**a | b**\n1 | 2",
            ),
            (
                "[mail](mailto:a@b.c) ![chart](https://e.x/c.png)",
                "mail [chart](https://e.x/c.png)",
            ),
            // Code holding backticks gets a longer fence; inline code's `<` is escaped too.
            ("``a`b<``", "`` a`b&#60; ``"),
            ("````\n```rust\n<\n````", "````\n```rust\n<\n````"),
            // A code block in a list item starts on a line of its own, so its fence holds.
            ("- ```rust\n  a < b\n  ```", "• \n```rust\na < b\n```"),
        ],
    );
}

/// Found by the `markdown` fuzz target: a link's address kept its `<` and `>`, so a card
/// could read a tag in it. They are percent-encoded, as a browser would send them.
#[test]
fn issue_19_a_link_address_never_writes_a_tag_into_a_card() {
    let text = card("[a](https://x.y/?q=<at>&r=1)");
    assert_eq!(text, "[a](https://x.y/?q=%3Cat%3E&r=1)");
    // The fuzzer's input (fuzz/seeds/markdown/crash-0835…), its shape: a long query with
    // `<` in it, in a card cut to 60 bytes.
    let text = format!(
        "Some text and a [link](https://x.y/?{}\"<&>\"); }}",
        "é".repeat(40)
    );
    check_final(&text, &FeishuCard, LengthUnit::Bytes, 60);
}

/// Found by the `markdown` fuzz target: text that shows a line of backticks (an escaped
/// fence) was written as it is, so a card read it as a fence, the real code block after
/// it came out inside out and its raw `<at id=all>` landed outside code.
#[test]
fn issue_19_text_never_opens_a_code_fence_in_a_card() {
    let markdown = "\\```\n\n```\n<at id=all>\n```\n\\~~~ too";
    let text = card(markdown);
    assert!(card_safe(&text), "{text:?}");
    assert!(text.starts_with("&#96;&#96;&#96;\n"), "{text:?}");
    assert!(text.ends_with("&#126;&#126;&#126; too"), "{text:?}");
    // Cut into small cards: each safe, each within the limit as written.
    for limit in [8, 24, 60] {
        check_final(markdown, &FeishuCard, LengthUnit::Bytes, limit);
    }
}

/// Found by the `markdown` fuzz target: text right after a code block in a list item was
/// written on the closing fence's line (` ```text `), which closes nothing, so the card's
/// later code blocks came out inside out.
#[test]
fn issue_19_a_closing_fence_stands_on_its_own_line_in_a_card() {
    // The fuzzer's input (fuzz/seeds/markdown/crash-4ff6…) after its three selector
    // bytes: a card, UTF-16 units, a limit of 126.
    let input: &[u8] = b"\
        <# Titl 1\xcd\xdf\x91\x9a\x8ce\x0a\x0aSoNmorl*bo*d*\x00l\x00\x00\x00\x00\x00\
        \x00\x00\x00e\x0a-         t > > \xd5\xd5  \x81 \x0a\xd5\xd5\xd5\xd5\xcd\xdf\
        \x91\x9a\x8ce\x0a\x0aSoNmorl*bo*d*\x00l\x00\x00\x00\x00\x00 \x91\x9a\x8ce\x0a\
        \x0aSoNmorl*bo*d*\x00l\x00\x00\x00\x00\x00\x00\x00\x00e\x0a-         t >\x81\
        \x0a   \xd5\xd5\xd5\xd5\xd5\xd5\xd5\xd5\x00\x00e\x0a-         t >\x81\x0a   \
        \xd5\xd5\xd5\xd5\xd5\xd5\xd5\xd5\xd5\xd5\xd5\xd5\xd5\xd5\xd5\xd5\xd5\xd5\xd5\
        \xd5\xd5\xd5\xd5\xd5\xd5\xd5\xd5\xd5\xd5\xd5\xd5\xd5\xd5\xd5\xd5\xd5\xd5\x7f)q\
        \x07\xe3U\x00\x00\xd5\xd5\xd5\xd5\xd5\xd5\xd5\xd5\xd5\xd5\xd5\xd5\xd5\xd5\xd5\
        \xd5\xd5\xd5";
    let markdown = String::from_utf8_lossy(input);
    check_final(&markdown, &FeishuCard, Utf16, 126);
    for chunk in render(&markdown, &FeishuCard, Utf16, 126) {
        for line in chunk.text.lines().filter(|l| l.starts_with("```")) {
            assert_eq!(line, "```", "{:?}", chunk.text);
        }
    }
}

#[test]
fn a_feishu_card_counts_the_entities_it_writes() {
    // 20 `<` are 100 bytes once written: a 60-byte limit cuts them into two cards.
    let chunks = render(&"<".repeat(20), &FeishuCard, LengthUnit::Bytes, 60);
    assert_eq!(chunks.len(), 2, "{chunks:?}");
    assert!(chunks.iter().all(|c| c.text.len() <= 60), "{chunks:?}");
    let preview = render_preview(&"<".repeat(20), &FeishuCard, LengthUnit::Bytes, 60);
    assert!(preview.text.len() <= 60, "{preview:?}");
    assert_eq!(FeishuCard.literal("a<b>"), "a&#60;b&#62;");
}

#[test]
fn issue_19_inline_code_never_opens_a_fence_in_a_card() {
    // The fuzzer's input (fuzz/seeds/markdown/crash-96af…) after its selector bytes: a
    // card, UTF-16 units, a limit of 96. It opens with inline code holding two backticks,
    // whose own fence (three) at a line's start read as a code block; and its preview,
    // cut inside a code block, wrote the ellipsis on the closing fence's line.
    let input: &[u8] = b"\
        `?``\x00\x00\x00~`]\x00\xff\x00\x00\x00\x00\x00\x00\x00t\x01\x81\x0a\x06\xff\
        \x99\xff\xff\x09\x09\x09\x09\x09\x09\x09\x09\x09@\x04\x00\x0a\x0a> \x09\x09\
        \x09\x01$<\x09 Te\xd1~\x09\x01$<\x09 Te\xd1~, `co~, `code` an\x0a> quoted ; \
        }\x0a```, `co\xe6\x87\xad\xe5\x96\x97\xa7 e\xc2\x81\x0a";
    let markdown = String::from_utf8_lossy(input);
    check_final(&markdown, &FeishuCard, Utf16, 96);
    check_preview(&markdown, &FeishuCard, Utf16, 96);
    // A preview cut inside a code block closes it before the ellipsis.
    let code = format!("```\n{}\n```", "let x = 1;\n".repeat(20));
    let preview = render_preview(&code, &FeishuCard, Utf16, 60);
    assert!(preview.text.ends_with("\n```\n…"), "{:?}", preview.text);
    assert!(card_safe(&preview.text));
    // Inside a line the span keeps its code style.
    let chunks = render("see `a``b` here", &FeishuCard, Utf16, 100);
    assert_eq!(texts(&chunks), ["see ``` a``b ``` here"]);
    // At a line's start it is text.
    let chunks = render("`a``b` here", &FeishuCard, Utf16, 100);
    assert_eq!(texts(&chunks), ["a&#96;&#96;b here"]);
}

/// Found by the renderer's property test (its saved seed, before the properties moved
/// here): a code fence opened twice and bold left open, cut small.
#[test]
fn a_fence_opened_twice_stays_safe_when_cut() {
    check_final("```rust\n```rust\n**<", &FeishuCard, Utf16, 15);
    check_preview("```rust\n```rust\n**<", &FeishuCard, Utf16, 15);
}

#[test]
fn feishu_card_keeps_every_property() {
    conformance::run(&FeishuCard);
}
