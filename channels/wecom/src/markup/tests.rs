//! The renderer's output in WeCom's markdown, a long answer split under the byte limit,
//! and the renderer's properties for this dialect.

use im_bridge_channel::LengthUnit;
use im_bridge_channel::render::{conformance, render};

use super::WeComMarkdown;
use crate::config::{DEFAULT_MARKDOWN_BYTES, MAX_STREAM_BYTES};

#[test]
fn wecom_markdown_writes_each_construct() {
    conformance::assert_each(
        &WeComMarkdown,
        &[
            (
                "**b** *i* ~~s~~ run `cargo test` [x](https://e.x/a)",
                "**b** *i* s run `cargo test` [x](https://e.x/a)",
            ),
            ("> said\n> twice", "> said\n> twice"),
            (
                "Try:\n\n```rust\nfn main() {}\n```\n\nok",
                "Try:\n\n```rust\nfn main() {}\n```\n\nok",
            ),
            ("[app](wxwork://x) end", "app end"),
        ],
    );
}

#[test]
fn a_long_answer_is_split_under_the_byte_limit() {
    let limit = usize::try_from(MAX_STREAM_BYTES).unwrap();
    let split = usize::try_from(DEFAULT_MARKDOWN_BYTES).unwrap();
    let paragraph = "企业微信的**流式消息**最多两万字节。".repeat(20);
    let answer = vec![paragraph; 60].join("\n\n");
    assert!(answer.len() > 3 * split);
    let chunks = render(&answer, &WeComMarkdown, LengthUnit::Bytes, split);
    assert!(chunks.len() >= 3, "{}", chunks.len());
    for chunk in &chunks {
        assert!(chunk.text.len() <= limit, "{}", chunk.text.len());
        assert!(std::str::from_utf8(chunk.text.as_bytes()).is_ok());
        assert_eq!(chunk.text.matches("**").count() % 2, 0);
    }
}

#[test]
fn wecom_markdown_keeps_every_property() {
    conformance::run(&WeComMarkdown);
}

/// Found by the property suite: a preview cut right after a code block closed inside a
/// quote got its `…` on the fence's line, which then no longer closed the block.
#[test]
fn a_quoted_closing_fence_keeps_its_line_before_the_ellipsis() {
    use im_bridge_channel::render::Dialect;
    for fence in ["```", "> ```", "> > ````"] {
        let mut text = format!("> ```rust\n> x\n{fence}");
        WeComMarkdown.before_ellipsis(&mut text);
        assert_eq!(text, format!("> ```rust\n> x\n{fence}\n"));
    }
    let mut text = "> not a fence ```".to_owned();
    WeComMarkdown.before_ellipsis(&mut text);
    assert_eq!(text, "> not a fence ```");
}
