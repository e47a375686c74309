//! The renderer's output in DingTalk's markdown: what it adapts, a code block cut between
//! messages, link addresses (issue 19); and the renderer's properties for this dialect.

use im_bridge_channel::LengthUnit;
use im_bridge_channel::render::conformance;
use im_bridge_channel::render::render;

use super::DingTalkMarkdown;

/// `markdown` as one DingTalk markdown message.
fn one(markdown: &str) -> String {
    conformance::one(markdown, &DingTalkMarkdown)
}

#[test]
fn dingtalk_markdown_adapts_what_it_cannot_show() {
    conformance::assert_each(
        &DingTalkMarkdown,
        &[
            (
                "**b** *i* ~~s~~ run `cargo test` [x](https://e.x/a)",
                "**b** *i* s run **cargo test** [x](https://e.x/a)",
            ),
            // A code block is quoted lines under its language; so is a quote.
            (
                "Try:\n\n```rust\nfn main() {\n    go();\n}\n```\n\n> said\n> twice",
                "Try:\n\n> **rust**\n> fn main() {\n>     go();\n> }\n\n> said\n> twice",
            ),
            ("**bold `code`**", "**bold code**"),
            ("[app](dingtalk://x) ---", "app ---"),
            ("| a | b |\n|---|---|\n| 1 | 2 |", "**a | b**\n1 | 2"),
        ],
    );
    // A code block cut between messages is quoted again, under its language, in the next.
    let code = format!("```py\n{}```", "print(1)\n".repeat(40));
    let chunks = render(&code, &DingTalkMarkdown, LengthUnit::Bytes, 120);
    assert!(chunks.len() > 1);
    for chunk in &chunks {
        assert!(
            chunk.text.starts_with("> **py**\n> print(1)"),
            "{:?}",
            chunk.text
        );
        assert!(
            chunk.text.lines().all(|l| l.starts_with("> ")),
            "{:?}",
            chunk.text
        );
        assert!(chunk.text.len() <= 120 + 12, "{}", chunk.text.len());
    }
}

/// Found by the `markdown` fuzz target: a link's address kept its `<` and `>`, so a card
/// could read a tag in it (the same encoding is written here). They are percent-encoded, as a browser would send them.
#[test]
fn issue_19_a_link_address_never_writes_a_tag() {
    let text = one("[a](https://x.y/?q=<at>&r=1)");
    assert_eq!(text, "[a](https://x.y/?q=%3Cat%3E&r=1)");
}

#[test]
fn dingtalk_markdown_keeps_every_property() {
    conformance::run(&DingTalkMarkdown);
}
