//! The renderer's output in Telegram HTML: each construct, nesting, unbalanced input,
//! cuts and previews, every message checked by the strict checker of `check.rs`; and the
//! renderer's properties for this dialect.

use im_bridge_channel::LengthUnit;
use im_bridge_channel::render::conformance::{self, texts};
use im_bridge_channel::render::{Rendered, render, render_preview};

use super::{TelegramHtml, telegram_html};

use LengthUnit::{Chars, Utf16};

/// `markdown` as one Telegram HTML message, checked to be well-formed and to show exactly
/// its `plain`.
fn html(markdown: &str) -> String {
    let chunks = render(markdown, &TelegramHtml, Utf16, 100_000);
    assert!(chunks.len() <= 1, "{chunks:?}");
    let rendered = chunks.into_iter().next().unwrap_or(Rendered {
        text: String::new(),
        plain: String::new(),
        plain_linked: None,
    });
    assert_well_formed(&rendered);
    rendered.text
}

fn assert_well_formed(rendered: &Rendered) {
    match telegram_html(&rendered.text) {
        Ok(shown) => assert_eq!(shown, rendered.plain, "in {:?}", rendered.text),
        Err(why) => panic!("{why} in {:?}", rendered.text),
    }
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
fn cjk_and_emoji() {
    assert_eq!(html("**中文字符** 👍🏽"), "<b>中文字符</b> 👍🏽");
    // 👍🏽 is 4 UTF-16 units and one grapheme cluster: never torn apart.
    let chunks = render("👍🏽👍🏽👍🏽", &TelegramHtml, Utf16, 9);
    assert_eq!(texts(&chunks), ["👍🏽👍🏽", "👍🏽"]);
    let chunks = render("中文字符中文字符", &TelegramHtml, Chars, 5);
    assert_eq!(texts(&chunks), ["中文字符中", "文字符"]);
}

#[test]
fn a_code_block_across_a_cut_is_closed_and_reopened() {
    let markdown = "```rust\nlet a = 1;\nlet b = 2;\nlet c = 3;\n```";
    let chunks = render(markdown, &TelegramHtml, Utf16, 24);
    assert_eq!(
        texts(&chunks),
        [
            "<pre><code class=\"language-rust\">let a = 1;\nlet b = 2;</code></pre>",
            "<pre><code class=\"language-rust\">let c = 3;</code></pre>",
        ]
    );
    chunks.iter().for_each(assert_well_formed);
    // The indentation of a code line that starts a message is kept.
    let chunks = render("```\nfirst line\n    second\n```", &TelegramHtml, Utf16, 12);
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
    let chunks = render("**one two three four**", &TelegramHtml, Utf16, 10);
    assert_eq!(texts(&chunks), ["<b>one two</b>", "<b>three four</b>"]);
    let chunks = render("*x [a link](https://e.x) y*", &TelegramHtml, Utf16, 6);
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
fn an_unclosed_fence_is_code_in_a_final_and_text_in_a_preview() {
    let markdown = "Here:\n\n```rust\nfn main() {\n    let x = 1 < 2;";
    assert_eq!(
        html(markdown),
        "Here:\n\n<pre><code class=\"language-rust\">fn main() {\n    let x = 1 &lt; 2;</code></pre>"
    );
    let preview = render_preview(markdown, &TelegramHtml, Utf16, 4096);
    assert_well_formed(&preview);
    assert_eq!(
        preview.text,
        "Here:\n\n```rust\nfn main() {\n    let x = 1 &lt; 2;"
    );
    // Once closed, the preview shows the code block.
    let closed = format!("{markdown}\n```");
    let preview = render_preview(&closed, &TelegramHtml, Utf16, 4096);
    assert!(
        preview.text.contains("<pre><code class=\"language-rust\">"),
        "{preview:?}"
    );
    // An opening fence alone, and one inside a quote.
    assert_eq!(
        render_preview("a\n```py", &TelegramHtml, Utf16, 99).text,
        "a\n\n```py"
    );
    assert_eq!(
        render_preview("```\n```", &TelegramHtml, Utf16, 99).text,
        ""
    );
    assert_eq!(
        render_preview("> q\n> ```\n> x", &TelegramHtml, Utf16, 99).text,
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
        let preview = render_preview(markdown, &TelegramHtml, Utf16, 4096);
        assert_well_formed(&preview);
        assert_eq!(preview.text, shown);
    }
}

#[test]
fn a_long_preview_is_cut_with_an_ellipsis() {
    let preview = render_preview("**one two three**", &TelegramHtml, Utf16, 8);
    assert_eq!(preview.text, "<b>one two</b>…");
    assert_eq!(preview.plain, "one two…");
    let preview = render_preview("```\nabcdefgh\n```", &TelegramHtml, Utf16, 5);
    assert_eq!(preview.text, "<pre><code>abcd</code></pre>…");
}

#[test]
fn telegram_html_keeps_every_property() {
    conformance::run(&TelegramHtml);
}
