//! Tests of the renderer: each construct, nesting, unbalanced input, cuts, and the
//! properties every rendering keeps (checked against the strict checker of `check.rs`).

use proptest::prelude::*;

use super::check::{card_safe, check_final, check_preview, telegram_html};
use super::*;

use LengthUnit::{Chars, Utf16};
use Markup::{DingTalkMarkdown, FeishuCard, Plain, TelegramHtml};

/// `markdown` as one Telegram HTML message, checked to be well-formed and to show exactly
/// its `plain`.
fn html(markdown: &str) -> String {
    let chunks = render(markdown, TelegramHtml, Utf16, 100_000);
    assert!(chunks.len() <= 1, "{chunks:?}");
    let rendered = chunks.into_iter().next().unwrap_or(Rendered {
        text: String::new(),
        plain: String::new(),
    });
    assert_well_formed(&rendered);
    rendered.text
}

fn plain(markdown: &str) -> String {
    render(markdown, Plain, Utf16, 100_000)
        .into_iter()
        .map(|r| {
            assert_eq!(r.text, r.plain);
            r.text
        })
        .collect()
}

fn assert_well_formed(rendered: &Rendered) {
    match telegram_html(&rendered.text) {
        Ok(shown) => assert_eq!(shown, rendered.plain, "in {:?}", rendered.text),
        Err(why) => panic!("{why} in {:?}", rendered.text),
    }
}

fn texts(chunks: &[Rendered]) -> Vec<&str> {
    chunks.iter().map(|c| c.text.as_str()).collect()
}

#[test]
fn inline_styles() {
    assert_eq!(
        html("**b** *i* _i_ ~~s~~ `c`"),
        "<b>b</b> <i>i</i> <i>i</i> <s>s</s> <code>c</code>"
    );
    assert_eq!(
        html("[x](https://e.x/a?b=1&c=2)"),
        "<a href=\"https://e.x/a?b=1&amp;c=2\">x</a>"
    );
    assert_eq!(
        html("<https://e.x>"),
        "<a href=\"https://e.x\">https://e.x</a>"
    );
    assert_eq!(
        html("[t](tg://user?id=1)"),
        "<a href=\"tg://user?id=1\">t</a>"
    );
    assert_eq!(html("[m](mailto:a@b.c)"), "<a href=\"mailto:a@b.c\">m</a>");
}

#[test]
fn only_safe_links_become_links() {
    assert_eq!(html("[x](javascript:alert(1))"), "x");
    assert_eq!(html("[x](/relative)"), "x");
    assert_eq!(html("[x](HTTPS://E.X)"), "<a href=\"HTTPS://E.X\">x</a>");
}

#[test]
fn a_quote_in_a_link_url_is_escaped() {
    assert_eq!(
        html("[a](https://x.y/?q=1&r=\"2\")"),
        "<a href=\"https://x.y/?q=1&amp;r=&quot;2&quot;\">a</a>"
    );
}

#[test]
fn special_characters_are_escaped_in_text_and_code() {
    assert_eq!(html("a < b && c > d"), "a &lt; b &amp;&amp; c &gt; d");
    assert_eq!(html("`a<b&c>`"), "<code>a&lt;b&amp;c&gt;</code>");
    assert_eq!(
        html("```\nif a < b && c {}\n```"),
        "<pre><code>if a &lt; b &amp;&amp; c {}</code></pre>"
    );
    assert_eq!(html("AT&amp;T"), "AT&amp;T");
}

#[test]
fn raw_html_is_text() {
    assert_eq!(html("<b>hi</b> x"), "&lt;b&gt;hi&lt;/b&gt; x");
    assert_eq!(
        html("<div>\n<script>x</script>\n</div>"),
        "&lt;div&gt;\n&lt;script&gt;x&lt;/script&gt;\n&lt;/div&gt;"
    );
}

#[test]
fn code_blocks_carry_their_language() {
    assert_eq!(
        html("```rust\nfn main() {}\n```"),
        "<pre><code class=\"language-rust\">fn main() {}</code></pre>"
    );
    assert_eq!(
        html("```c++ extra words\nx\n```"),
        "<pre><code class=\"language-c++\">x</code></pre>"
    );
    assert_eq!(
        html("```\"><script>\nx\n```"),
        "<pre><code class=\"language-script\">x</code></pre>"
    );
    assert_eq!(
        html("    indented\n    code"),
        "<pre><code>indented\ncode</code></pre>"
    );
    assert_eq!(
        html("```\n  keeps\n    indentation\n```"),
        "<pre><code>  keeps\n    indentation</code></pre>"
    );
}

#[test]
fn blocks_degrade_to_readable_text() {
    assert_eq!(html("# Title\n\ntext"), "<b>Title</b>\n\ntext");
    assert_eq!(html("## **Bold** title"), "<b>Bold title</b>");
    assert_eq!(html("- a\n- b"), "• a\n• b");
    assert_eq!(html("3. a\n4. b"), "3. a\n4. b");
    assert_eq!(
        html("- a\n  - b\n    1. c\n- d"),
        "• a\n  • b\n    1. c\n• d"
    );
    assert_eq!(html("- [ ] todo\n- [x] done"), "• ☐ todo\n• ☑ done");
    assert_eq!(
        html("| a | b |\n|---|---|\n| 1 | 2 |\n| 3 | 4 |"),
        "<b>a | b</b>\n1 | 2\n3 | 4"
    );
    assert_eq!(html("above\n\n---\n\nbelow"), "above\n\n———\n\nbelow");
    assert_eq!(
        html("![a cat](https://e.x/cat.png) ![local](cat.png)"),
        "<a href=\"https://e.x/cat.png\">a cat</a> local"
    );
    assert_eq!(html("one\ntwo  \nthree\\\nfour"), "one\ntwo\nthree\nfour");
    assert_eq!(html("p1\n\n\n\np2"), "p1\n\np2");
    assert_eq!(html("para\n- item\n\nafter"), "para\n\n• item\n\nafter");
}

#[test]
fn quotes() {
    assert_eq!(
        html("> q1\n>\n> q2\n\nafter"),
        "<blockquote>q1\n\nq2</blockquote>\n\nafter"
    );
    assert_eq!(html("> a\n> > b"), "<blockquote>a\n\nb</blockquote>");
    assert_eq!(
        html("> ```py\n> x = 1\n> ```"),
        "<blockquote><pre><code class=\"language-py\">x = 1</code></pre></blockquote>"
    );
}

#[test]
fn nested_styles_nest_properly() {
    assert_eq!(html("***bold italic***"), "<i><b>bold italic</b></i>");
    assert_eq!(
        html("**bold [link](https://e.x) and *it***"),
        "<b>bold <a href=\"https://e.x\">link</a> and <i>it</i></b>"
    );
    assert_eq!(
        html("[**bold** `code`](https://e.x)"),
        "<a href=\"https://e.x\"><b>bold</b> code</a>"
    );
    assert_eq!(html("**a `c` b**"), "<b>a <code>c</code> b</b>");
    assert_eq!(html("~~*a*~~"), "<s><i>a</i></s>");
    assert_eq!(html("**a *b* c**"), "<b>a <i>b</i> c</b>");
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
fn cjk_and_emoji() {
    assert_eq!(html("**中文字符** 👍🏽"), "<b>中文字符</b> 👍🏽");
    // 👍🏽 is 4 UTF-16 units and one grapheme cluster: never torn apart.
    let chunks = render("👍🏽👍🏽👍🏽", TelegramHtml, Utf16, 9);
    assert_eq!(texts(&chunks), ["👍🏽👍🏽", "👍🏽"]);
    let chunks = render("中文字符中文字符", TelegramHtml, Chars, 5);
    assert_eq!(texts(&chunks), ["中文字符中", "文字符"]);
    // A grapheme longer than the limit is cut between code points, never inside one.
    let chunks = render("👍🏽", Plain, Utf16, 2);
    assert_eq!(texts(&chunks), ["👍", "🏽"]);
}

#[test]
fn a_code_block_across_a_cut_is_closed_and_reopened() {
    let markdown = "```rust\nlet a = 1;\nlet b = 2;\nlet c = 3;\n```";
    let chunks = render(markdown, TelegramHtml, Utf16, 24);
    assert_eq!(
        texts(&chunks),
        [
            "<pre><code class=\"language-rust\">let a = 1;\nlet b = 2;</code></pre>",
            "<pre><code class=\"language-rust\">let c = 3;</code></pre>",
        ]
    );
    chunks.iter().for_each(assert_well_formed);
    // The indentation of a code line that starts a message is kept.
    let chunks = render("```\nfirst line\n    second\n```", TelegramHtml, Utf16, 12);
    assert_eq!(
        texts(&chunks),
        [
            "<pre><code>first line</code></pre>",
            "<pre><code>    second</code></pre>"
        ]
    );
}

#[test]
fn a_cut_inside_bold_closes_and_reopens_it() {
    let chunks = render("**one two three four**", TelegramHtml, Utf16, 10);
    assert_eq!(texts(&chunks), ["<b>one two</b>", "<b>three four</b>"]);
    let chunks = render("*x [a link](https://e.x) y*", TelegramHtml, Utf16, 6);
    chunks.iter().for_each(assert_well_formed);
    assert_eq!(
        texts(&chunks),
        [
            "<i>x <a href=\"https://e.x\">a</a></i>",
            "<i><a href=\"https://e.x\">link</a> y</i>"
        ]
    );
}

#[test]
fn cuts_prefer_paragraphs_then_lines_then_spaces() {
    let chunks = render("aaaa bbbb\ncccc\n\ndddd", Plain, Chars, 16);
    assert_eq!(texts(&chunks), ["aaaa bbbb\ncccc", "dddd"]);
    let chunks = render("aaaa bbbb\ncccc dddd", Plain, Chars, 16);
    assert_eq!(texts(&chunks), ["aaaa bbbb", "cccc dddd"]);
    let chunks = render("aaaa bbbb cccc dddd", Plain, Chars, 16);
    assert_eq!(texts(&chunks), ["aaaa bbbb cccc", "dddd"]);
    let chunks = render("abcdefghij", Plain, Chars, 4);
    assert_eq!(texts(&chunks), ["abcd", "efgh", "ij"]);
}

#[test]
fn blank_input_gives_no_message() {
    assert!(render("", TelegramHtml, Utf16, 10).is_empty());
    assert!(render(" \n\n \n", TelegramHtml, Utf16, 10).is_empty());
    assert!(render("<!-- -->", Plain, Utf16, 10).len() <= 1);
    assert_eq!(render_preview("", TelegramHtml, Utf16, 10).text, "");
}

#[test]
fn an_unclosed_fence_is_code_in_a_final_and_text_in_a_preview() {
    let markdown = "Here:\n\n```rust\nfn main() {\n    let x = 1 < 2;";
    assert_eq!(
        html(markdown),
        "Here:\n\n<pre><code class=\"language-rust\">fn main() {\n    let x = 1 &lt; 2;</code></pre>"
    );
    let preview = render_preview(markdown, TelegramHtml, Utf16, 4096);
    assert_well_formed(&preview);
    assert_eq!(
        preview.text,
        "Here:\n\n```rust\nfn main() {\n    let x = 1 &lt; 2;"
    );
    // Once closed, the preview shows the code block.
    let closed = format!("{markdown}\n```");
    let preview = render_preview(&closed, TelegramHtml, Utf16, 4096);
    assert!(
        preview.text.contains("<pre><code class=\"language-rust\">"),
        "{preview:?}"
    );
    // An opening fence alone, and one inside a quote.
    assert_eq!(
        render_preview("a\n```py", TelegramHtml, Utf16, 99).text,
        "a\n\n```py"
    );
    assert_eq!(render_preview("```\n```", TelegramHtml, Utf16, 99).text, "");
    assert_eq!(
        render_preview("> q\n> ```\n> x", TelegramHtml, Utf16, 99).text,
        "<blockquote>q</blockquote>\n\n&gt; ```\n&gt; x"
    );
}

#[test]
fn unbalanced_inline_markup_in_a_preview_is_text() {
    for (markdown, shown) in [
        ("some **bold", "some **bold"),
        ("a `code", "a `code"),
        ("see [link](https://e.", "see [link](https://e."),
        ("*x* and *y", "<i>x</i> and *y"),
    ] {
        let preview = render_preview(markdown, TelegramHtml, Utf16, 4096);
        assert_well_formed(&preview);
        assert_eq!(preview.text, shown);
    }
}

#[test]
fn a_long_preview_is_cut_with_an_ellipsis() {
    let preview = render_preview("**one two three**", TelegramHtml, Utf16, 8);
    assert_eq!(preview.text, "<b>one two</b>…");
    assert_eq!(preview.plain, "one two…");
    let preview = render_preview("```\nabcdefgh\n```", TelegramHtml, Utf16, 5);
    assert_eq!(preview.text, "<pre><code>abcd</code></pre>…");
    // No room for the ellipsis: a prefix only.
    let preview = render_preview("abcdef", Plain, LengthUnit::Bytes, 2);
    assert_eq!(preview.text, "ab");
}

/// `markdown` as one message in `markup` (no limit to speak of).
fn one(markdown: &str, markup: Markup) -> String {
    let chunks = render(markdown, markup, LengthUnit::Bytes, 100_000);
    assert!(chunks.len() <= 1, "{chunks:?}");
    chunks
        .into_iter()
        .next()
        .map(|r| r.text)
        .unwrap_or_default()
}

/// `markdown` as one Feishu card's markdown.
fn card(markdown: &str) -> String {
    one(markdown, FeishuCard)
}

#[test]
fn feishu_cards_keep_what_card_markdown_shows_and_degrade_the_rest() {
    for (markdown, shown) in [
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
    ] {
        assert_eq!(card(markdown), shown, "{markdown:?}");
    }
}

#[test]
fn plain_text_is_the_readable_text_of_the_markdown() {
    let shown = one(
        "# Plan\n\n- **ship** [it](https://e.x)\n- `test`\n\n| a | b |\n|---|---|\n| 1 | 2 |",
        Markup::PlainText,
    );
    assert_eq!(
        shown,
        "Plan\n\n• ship it (https://e.x)\n• test\n\na | b\n1 | 2"
    );
}

#[test]
fn dingtalk_markdown_adapts_what_it_cannot_show() {
    let ding = |markdown: &str| one(markdown, DingTalkMarkdown);
    for (markdown, shown) in [
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
    ] {
        assert_eq!(ding(markdown), shown, "{markdown:?}");
    }
    // A code block cut between messages is quoted again, under its language, in the next.
    let code = format!("```py\n{}```", "print(1)\n".repeat(40));
    let chunks = render(&code, DingTalkMarkdown, LengthUnit::Bytes, 120);
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
/// could read a tag in it. They are percent-encoded, as a browser would send them.
#[test]
fn issue_19_a_link_address_never_writes_a_tag_into_a_card() {
    for markup in [FeishuCard, DingTalkMarkdown] {
        let text = one("[a](https://x.y/?q=<at>&r=1)", markup);
        assert_eq!(text, "[a](https://x.y/?q=%3Cat%3E&r=1)", "{markup:?}");
    }
    // The fuzzer's input (fuzz/seeds/markdown/crash-0835…), its shape: a long query with
    // `<` in it, in a card cut to 60 bytes.
    let text = format!(
        "Some text and a [link](https://x.y/?{}\"<&>\"); }}",
        "é".repeat(40)
    );
    check_final(&text, FeishuCard, LengthUnit::Bytes, 60);
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
        check_final(markdown, FeishuCard, LengthUnit::Bytes, limit);
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
    check_final(&markdown, FeishuCard, Utf16, 126);
    for chunk in render(&markdown, FeishuCard, Utf16, 126) {
        for line in chunk.text.lines().filter(|l| l.starts_with("```")) {
            assert_eq!(line, "```", "{:?}", chunk.text);
        }
    }
}

#[test]
fn a_feishu_card_counts_the_entities_it_writes() {
    // 20 `<` are 100 bytes once written: a 60-byte limit cuts them into two cards.
    let chunks = render(&"<".repeat(20), FeishuCard, LengthUnit::Bytes, 60);
    assert_eq!(chunks.len(), 2, "{chunks:?}");
    assert!(chunks.iter().all(|c| c.text.len() <= 60), "{chunks:?}");
    let preview = render_preview(&"<".repeat(20), FeishuCard, LengthUnit::Bytes, 60);
    assert!(preview.text.len() <= 60, "{preview:?}");
    assert_eq!(FeishuCard.literal("a<b>"), "a&#60;b&#62;");
}

// ---- Properties ----

const TOKENS: &[&str] = &[
    "**",
    "*",
    "_",
    "~~",
    "`",
    "```rust\n",
    "```\n",
    "[a](https://x.y/?q=1&r=\"2\")",
    "> ",
    "- ",
    "1. ",
    "# ",
    "| a | b |\n|---|---|\n",
    "word",
    "other words here",
    "中文字符",
    "👍🏽",
    "\n",
    "\n\n",
    " ",
    "<",
    "&",
];

fn markdown() -> impl Strategy<Value = String> {
    prop::collection::vec(prop::sample::select(TOKENS), 0..40).prop_map(|tokens| tokens.concat())
}

fn unit() -> impl Strategy<Value = LengthUnit> {
    prop_oneof![Just(Utf16), Just(Chars), Just(LengthUnit::Bytes)]
}

fn markup() -> impl Strategy<Value = Markup> {
    prop_oneof![
        Just(TelegramHtml),
        Just(Plain),
        Just(FeishuCard),
        Just(DingTalkMarkdown),
        Just(Markup::PlainText)
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn every_chunk_is_well_formed_within_the_limit_and_nothing_is_lost(
        markdown in markdown(),
        markup in markup(),
        unit in unit(),
        limit in 8usize..300,
    ) {
        check_final(&markdown, markup, unit, limit);
    }

    #[test]
    fn every_preview_is_well_formed_within_the_limit(
        markdown in markdown(),
        markup in markup(),
        unit in unit(),
        limit in 8usize..300,
    ) {
        check_preview(&markdown, markup, unit, limit);
    }

    /// `fits` is `measure(text) <= limit`, however early it stops reading.
    #[test]
    fn fits_agrees_with_measure(
        text in prop_oneof![any::<String>(), "[a<>`~\n\r é😀]{0,60}"],
        markup in markup(),
        unit in unit(),
        slack in 0usize..4,
    ) {
        let measure = Measure::new(unit, markup);
        let len = measure.measure(&text);
        for limit in [len.saturating_sub(slack), len, len + slack] {
            prop_assert_eq!(measure.fits(&text, limit), len <= limit, "{} at {}", len, limit);
        }
    }

    #[test]
    fn arbitrary_text_never_panics(text in any::<String>(), limit in 0usize..40) {
        for markup in [Plain, TelegramHtml, FeishuCard, DingTalkMarkdown] {
            for unit in [Utf16, Chars, LengthUnit::Bytes] {
                let chunks = render(&text, markup, unit, limit);
                let preview = render_preview(&text, markup, unit, limit);
                if markup == TelegramHtml {
                    for chunk in chunks.iter().chain([&preview]) {
                        prop_assert!(telegram_html(&chunk.text).is_ok(), "{:?}", chunk.text);
                    }
                }
            }
        }
    }
}

#[test]
fn deep_nesting_stays_linear() {
    for markdown in [
        "- ".repeat(5_000) + "x",
        "> ".repeat(5_000) + "x",
        "**".repeat(5_000) + "x",
        "[".repeat(5_000) + "x",
    ] {
        let started = std::time::Instant::now();
        let chunks = render(&markdown, TelegramHtml, Utf16, 4096);
        let shown: usize = chunks.iter().map(|c| c.plain.len()).sum();
        // Linear: at most a capped indentation and a marker per nesting level.
        assert!(
            shown <= 16 * markdown.len(),
            "{shown} shown of {}",
            markdown.len()
        );
        chunks.iter().for_each(assert_well_formed);
        assert!(started.elapsed() < std::time::Duration::from_secs(5));
    }
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
    check_final(&markdown, FeishuCard, Utf16, 96);
    check_preview(&markdown, FeishuCard, Utf16, 96);
    // A preview cut inside a code block closes it before the ellipsis.
    let code = format!("```\n{}\n```", "let x = 1;\n".repeat(20));
    let preview = render_preview(&code, FeishuCard, Utf16, 60);
    assert!(preview.text.ends_with("\n```\n…"), "{:?}", preview.text);
    assert!(card_safe(&preview.text));
    // Inside a line the span keeps its code style.
    let chunks = render("see `a``b` here", FeishuCard, Utf16, 100);
    assert_eq!(texts(&chunks), ["see ``` a``b ``` here"]);
    // At a line's start it is text.
    let chunks = render("`a``b` here", FeishuCard, Utf16, 100);
    assert_eq!(texts(&chunks), ["a&#96;&#96;b here"]);
}
