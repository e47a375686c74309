//! Tests of the splitter: worked examples per unit and script, then property tests over
//! arbitrary Unicode and generated code fences.
//!
//! The property tests assert every guarantee of the module docs on each split, through
//! `check.rs` (which the `markdown` fuzz target runs too).

use proptest::prelude::*;

use super::check::{check_chunks, check_truncate};
use super::*;

use LengthUnit::{Bytes, Chars, Utf16};

fn checked(input: &str, unit: LengthUnit, limit: usize) -> Vec<String> {
    let chunks = split_chunks(input, unit, limit);
    check_chunks(input, unit, limit, &chunks);
    chunks.into_iter().map(|c| c.text).collect()
}

#[test]
fn ascii_exact_limit_and_one_more() {
    assert_eq!(checked("", Chars, 10), Vec::<String>::new());
    assert_eq!(checked("abcdefghij", Chars, 10), ["abcdefghij"]);
    assert_eq!(checked("abcdefghijk", Chars, 10), ["abcdefghij", "k"]);
    assert_eq!(checked("abcdefghijk", Bytes, 10), ["abcdefghij", "k"]);
    assert_eq!(checked("abcdefghijk", Utf16, 11), ["abcdefghijk"]);
}

#[test]
fn prefers_a_newline_then_whitespace() {
    // The newline keeps the first message more than half full: it wins over the later
    // space.
    assert_eq!(
        checked("first line\nsecond line", Chars, 16),
        ["first line\n", "second line"]
    );
    // A newline that would leave the message less than half full loses to whitespace.
    assert_eq!(
        checked("a\nbb cc dd ee ff", Chars, 12),
        ["a\nbb cc dd ", "ee ff"]
    );
    // No whitespace at all: cut anywhere, at the limit.
    assert_eq!(checked("abcdefgh", Chars, 3), ["abc", "def", "gh"]);
    // A newline early in the message still beats a cut inside a word.
    assert_eq!(checked("ab\ncdefghij", Chars, 8), ["ab\n", "cdefghij"]);
    // CRLF stays together.
    assert_eq!(checked("abc\r\ndef", Chars, 5), ["abc\r\n", "def"]);
}

#[test]
fn cjk_per_unit() {
    let text = "你好世界和平";
    assert_eq!(checked(text, Chars, 4), ["你好世界", "和平"]);
    assert_eq!(checked(text, Utf16, 4), ["你好世界", "和平"]);
    // Three bytes each: a 7-byte limit holds two.
    assert_eq!(checked(text, Bytes, 7), ["你好", "世界", "和平"]);
    assert_eq!(checked(text, Bytes, 18), [text]);
}

#[test]
fn bytes_never_cut_a_multibyte_char() {
    let text = "héllo wörld ñ";
    for limit in 1..=text.len() {
        for chunk in checked(text, Bytes, limit) {
            assert!(chunk.len() <= limit.max(2), "{chunk:?} over {limit}");
        }
    }
    assert_eq!(checked("ééé", Bytes, 3), ["é", "é", "é"]);
}

#[test]
fn emoji_zwj_sequences_and_flags_stay_whole() {
    let family = "👨\u{200D}👩\u{200D}👧\u{200D}👦";
    assert_eq!(family.chars().count(), 7);
    let text = format!("ab{family}cd");
    assert_eq!(checked(&text, Chars, 8), ["ab", &format!("{family}c"), "d"]);
    assert_eq!(
        checked(&text, Chars, 9),
        [format!("ab{family}"), "cd".into()]
    );
    let flags = "🇯🇵🇺🇸🇫🇷";
    assert_eq!(checked(flags, Utf16, 6), ["🇯🇵", "🇺🇸", "🇫🇷"]);
    assert_eq!(checked(flags, Chars, 5), ["🇯🇵🇺🇸", "🇫🇷"]);
    assert_eq!(checked(flags, Bytes, 8), ["🇯🇵", "🇺🇸", "🇫🇷"]);
}

#[test]
fn combining_marks_stay_with_their_base() {
    let text = "e\u{301}e\u{301}e\u{301}";
    assert_eq!(
        checked(text, Chars, 3),
        ["e\u{301}", "e\u{301}", "e\u{301}"]
    );
    assert_eq!(checked(text, Chars, 4), ["e\u{301}e\u{301}", "e\u{301}"]);
    // A cluster longer than the limit is cut between code points, as a last resort.
    let heavy = "a\u{300}\u{301}\u{302}\u{303}";
    assert_eq!(
        checked(heavy, Chars, 2),
        ["a\u{300}", "\u{301}\u{302}", "\u{303}"]
    );
}

#[test]
fn surrogate_pairs_are_never_split_under_utf16() {
    assert_eq!(checked("a😀b😀", Utf16, 2), ["a", "😀", "b", "😀"]);
    assert_eq!(checked("a😀b😀", Utf16, 3), ["a😀", "b😀"]);
    // Below one pair's length, each emoji goes alone, over the limit (degenerate).
    assert_eq!(checked("😀😀", Utf16, 1), ["😀", "😀"]);
}

#[test]
fn a_cut_inside_a_code_fence_closes_and_reopens_it() {
    let text = "Intro.\n```rust\nfn a() {}\nfn b() {}\nfn c() {}\n```\nOutro.";
    let chunks = checked(text, Chars, 32);
    assert_eq!(
        chunks,
        [
            "Intro.\n```rust\nfn a() {}\n```",
            "```rust\nfn b() {}\nfn c() {}\n```\n",
            "Outro.",
        ]
    );
    // Without a fence line in reach, a long code line is cut at whitespace and both halves
    // stay code.
    let long = "```\nlet x = 1; let y = 2;\n```";
    assert_eq!(
        checked(long, Chars, 20),
        ["```\nlet x = 1; \n```", "```\nlet y = 2;\n```"]
    );
}

#[test]
fn fence_markers_and_info_strings_are_kept() {
    let text = "~~~~ python title\nprint(1)\nprint(2)\n~~~~\n";
    assert_eq!(
        checked(text, Chars, 34),
        [
            "~~~~ python title\nprint(1)\n~~~~",
            "~~~~python title\nprint(2)\n~~~~\n",
        ]
    );
    // An unclosed block is closed between chunks but not at the very end.
    let open = "```\nline one\nline two\nline three";
    let chunks = checked(open, Chars, 25);
    assert_eq!(chunks, ["```\nline one\nline two\n```", "```\nline three"]);
}

#[test]
fn text_that_only_looks_like_a_fence_is_left_alone() {
    // Two backticks, four spaces of indentation, a backtick in the info string.
    for text in ["``\nab\ncd", "    ```\nab\ncd", "```a`b\nab\ncd"] {
        let chunks = split_chunks(text, Chars, 8);
        check_chunks(text, Chars, 8, &chunks);
        assert!(
            chunks.iter().all(|c| c.head == 0 && c.tail == 0),
            "{chunks:?}"
        );
    }
}

#[test]
fn degenerate_limits_terminate_without_panicking() {
    let text = "```rust\nfn main() {}\n```\n👨\u{200D}👩\u{200D}👧 e\u{301} 😀 日本";
    for unit in [Chars, Bytes, Utf16] {
        for limit in 0..=12 {
            checked(text, unit, limit);
        }
    }
    assert_eq!(checked("ab", Chars, 0), ["a", "b"]);
}

#[test]
fn a_huge_limit_is_one_chunk() {
    assert_eq!(checked("abc", Chars, usize::MAX), ["abc"]);
}

#[test]
fn truncate_previews() {
    assert!(matches!(
        truncate("short", Chars, 10),
        Cow::Borrowed("short")
    ));
    assert_eq!(truncate("abcdefghij", Chars, 5), "abcd…");
    // The ellipsis is 3 bytes: it only fits when something else fits too.
    assert_eq!(truncate("abcdefghij", Bytes, 5), "ab…");
    assert_eq!(truncate("abcdefghij", Bytes, 3), "abc");
    assert_eq!(truncate("e\u{301}e\u{301}e\u{301}", Chars, 4), "e\u{301}…");
    assert_eq!(truncate("😀😀😀", Utf16, 4), "😀…");
    assert_eq!(truncate("😀😀", Utf16, 1), "😀");
    assert_eq!(truncate("abc", Chars, 0), "a");
    for limit in 1..40 {
        let cut = truncate("a 😀 b 🇯🇵 c 日本 d", Utf16, limit);
        assert!(Utf16.measure(&cut) <= limit.max(2), "{cut:?} over {limit}");
    }
}

/// Text that exercises the splitter: arbitrary Unicode, whitespace, and fenced blocks.
fn piece() -> impl Strategy<Value = String> {
    let fence = (
        prop::sample::select(vec!["```", "````", "~~~", "  ```"]),
        "[a-z]{0,6}",
        prop::collection::vec("[^\n]{0,24}", 0..5),
        any::<bool>(),
    )
        .prop_map(|(marker, info, lines, closed)| {
            let mut block = format!("{marker}{info}\n{}", lines.join("\n"));
            if closed {
                block.push('\n');
                block.push_str(marker.trim_start());
                block.push('\n');
            }
            block
        });
    prop_oneof![
        3 => any::<String>(),
        2 => "[a-zé日😀🇯🇵 \n\u{301}\u{200D}👩]{0,40}",
        1 => prop::sample::select(vec!["\n", " ", "\r\n", "\n\n"]).prop_map(str::to_owned),
        2 => fence,
    ]
}

fn unit() -> impl Strategy<Value = LengthUnit> {
    prop::sample::select(vec![Chars, Bytes, Utf16])
}

proptest! {
    #[test]
    fn every_split_keeps_its_guarantees(
        pieces in prop::collection::vec(piece(), 0..8),
        unit in unit(),
        limit in prop_oneof![0usize..12, 12usize..160],
    ) {
        let text = pieces.concat();
        let chunks = split_chunks(&text, unit, limit);
        check_chunks(&text, unit, limit, &chunks);
    }

    #[test]
    fn a_text_that_fits_is_one_message_as_it_is(
        pieces in prop::collection::vec(piece(), 0..8),
        unit in unit(),
        spare in 0usize..4,
    ) {
        let text = pieces.concat();
        let limit = unit.measure(&text) + spare;
        let expected: Vec<String> = Some(text.clone())
            .filter(|t| !t.is_empty())
            .into_iter()
            .collect();
        prop_assert_eq!(split(&text, unit, limit), expected);
    }

    #[test]
    fn truncated_previews_fit_and_are_prefixes(
        text in any::<String>(),
        unit in unit(),
        limit in 0usize..64,
    ) {
        check_truncate(&text, unit, limit, &truncate(&text, unit, limit));
    }
}
