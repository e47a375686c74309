//! Tests of the renderer with the core's own dialects: plain text, cuts, previews, and the
//! properties every dialect keeps (`conformance.rs`), run here for [`Plain`] and
//! [`PlainText`]. Each adapter tests its own dialect's output and runs the same
//! properties for it.

use super::conformance::texts;
use super::*;

use LengthUnit::{Chars, Utf16};

fn plain(markdown: &str) -> String {
    render(markdown, &Plain, Utf16, 100_000)
        .into_iter()
        .map(|r| {
            assert_eq!(r.text, r.plain);
            r.text
        })
        .collect()
}

#[test]
fn plain_markup_shows_the_same_text_with_link_addresses() {
    assert_eq!(
        plain("# T\n\n**b** [x](https://e.x) <https://e.y> <a@b.c> `c`"),
        "T\n\nb x (https://e.x) https://e.y a@b.c c"
    );
    assert_eq!(
        plain("![cat](https://e.x/c.png)"),
        "cat (https://e.x/c.png)"
    );
    assert_eq!(plain("a <b> & c"), "a <b> & c");
}

#[test]
fn a_grapheme_longer_than_the_limit_is_cut_between_code_points() {
    let chunks = render("👍🏽", &Plain, Utf16, 2);
    assert_eq!(texts(&chunks), ["👍", "🏽"]);
}

#[test]
fn cuts_prefer_paragraphs_then_lines_then_spaces() {
    let chunks = render("aaaa bbbb\ncccc\n\ndddd", &Plain, Chars, 16);
    assert_eq!(texts(&chunks), ["aaaa bbbb\ncccc", "dddd"]);
    let chunks = render("aaaa bbbb\ncccc dddd", &Plain, Chars, 16);
    assert_eq!(texts(&chunks), ["aaaa bbbb", "cccc dddd"]);
    let chunks = render("aaaa bbbb cccc dddd", &Plain, Chars, 16);
    assert_eq!(texts(&chunks), ["aaaa bbbb cccc", "dddd"]);
    let chunks = render("abcdefghij", &Plain, Chars, 4);
    assert_eq!(texts(&chunks), ["abcd", "efgh", "ij"]);
}

#[test]
fn blank_input_gives_no_message() {
    assert!(render("<!-- -->", &Plain, Utf16, 10).len() <= 1);
}

#[test]
fn a_preview_without_room_for_the_ellipsis_is_a_prefix() {
    let preview = render_preview("abcdef", &Plain, LengthUnit::Bytes, 2);
    assert_eq!(preview.text, "ab");
}

#[test]
fn plain_text_is_the_readable_text_of_the_markdown() {
    let shown = render(
        "# Plan\n\n- **ship** [it](https://e.x)\n- `test`\n\n| a | b |\n|---|---|\n| 1 | 2 |",
        &PlainText,
        LengthUnit::Bytes,
        100_000,
    );
    assert_eq!(
        texts(&shown),
        ["Plan\n\n• ship it (https://e.x)\n• test\n\na | b\n1 | 2"]
    );
}

#[test]
fn dialects_compare_and_show_by_name() {
    let plain: &'static dyn Dialect = &Plain;
    let text: &'static dyn Dialect = &PlainText;
    assert_eq!(plain, &Plain as &dyn Dialect);
    assert_ne!(plain, text);
    assert_eq!(format!("{text:?}"), "plain_text");
    assert_eq!(
        serde_json::to_string(&crate::Capabilities::final_only(10).markup).ok(),
        Some("\"plain\"".to_owned())
    );
}

#[test]
fn the_core_dialects_keep_every_property() {
    conformance::run(&Plain);
    conformance::run(&PlainText);
}
