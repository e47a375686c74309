//! The small Rust lexer the source rules share: which bytes of a file are code, comments,
//! string or char literals; the file with its test-only items blanked out; and its string
//! literals with the statement around them.
//!
//! Blanking replaces bytes with spaces and keeps every newline, so offsets and line numbers
//! in a stripped text are those of the file. A rule that cut a file at its first
//! `#[cfg(test)]` (as the first version did) would exempt the production code after a
//! `#[cfg(test)] mod tests;` line or a `#[cfg(test)]` helper method; this strips exactly the
//! annotated item instead.

use std::ops::Range;

/// What a run of source bytes is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Anything outside comments and literals.
    Code,
    /// A line or (nested) block comment, doc comments included.
    Comment,
    /// A string literal, quotes and `r#` prefix included (a `b` prefix stays code).
    Str,
    /// A char or byte-char literal, quotes included.
    Char,
}

/// One run of bytes of one [`Kind`].
#[derive(Clone, Debug)]
pub struct Span {
    /// What the bytes are.
    pub kind: Kind,
    /// Where they are.
    pub range: Range<usize>,
    /// For a [`Kind::Str`], the literal's text between its quotes; else `range`.
    pub body: Range<usize>,
}

fn is_ident(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

/// Splits `text` into code, comments and literals. Handles escapes, raw strings (`r#"…"#`,
/// `br"…"`), nested block comments, multi-byte and escaped chars (`'’'`, `'\u{7b}'`) and
/// lifetimes (`'a`, which stay code).
pub fn lex(text: &str) -> Vec<Span> {
    let b = text.as_bytes();
    let mut spans = Vec::new();
    let mut code_start = 0;
    let mut i = 0;
    while i < b.len() {
        let at = |k: usize| b.get(k).copied();
        let (kind, end, body) = match b[i] {
            b'/' if at(i + 1) == Some(b'/') => {
                let end = text[i..].find('\n').map_or(b.len(), |e| i + e);
                (Kind::Comment, end, i..end)
            }
            b'/' if at(i + 1) == Some(b'*') => {
                let (mut depth, mut j) = (1, i + 2);
                while j < b.len() && depth > 0 {
                    if b[j] == b'/' && at(j + 1) == Some(b'*') {
                        depth += 1;
                        j += 2;
                    } else if b[j] == b'*' && at(j + 1) == Some(b'/') {
                        depth -= 1;
                        j += 2;
                    } else {
                        j += 1;
                    }
                }
                (Kind::Comment, j.min(b.len()), i..j.min(b.len()))
            }
            b'"' => {
                let mut j = i + 1;
                while j < b.len() && b[j] != b'"' {
                    j += if b[j] == b'\\' { 2 } else { 1 };
                }
                let j = j.min(b.len());
                (Kind::Str, (j + 1).min(b.len()), i + 1..j)
            }
            b'r' if raw_prefix_ok(b, i) => {
                let mut j = i + 1;
                while at(j) == Some(b'#') {
                    j += 1;
                }
                if at(j) != Some(b'"') {
                    i += 1;
                    continue;
                }
                let close = format!("\"{}", "#".repeat(j - i - 1));
                let body_start = j + 1;
                let body_end = text[body_start..]
                    .find(&close)
                    .map_or(b.len(), |e| body_start + e);
                let end = (body_end + close.len()).min(b.len());
                (Kind::Str, end, body_start..body_end)
            }
            b'\'' => {
                let end = if at(i + 1) == Some(b'\\') {
                    // '\n', '\'', '\\', '\u{…}': the closing quote comes after the escape.
                    let from = (i + 3).min(b.len());
                    b[from..]
                        .iter()
                        .position(|&c| c == b'\'')
                        .map(|e| from + e + 1)
                } else {
                    text[i + 1..]
                        .chars()
                        .next()
                        .map(|c| i + 1 + c.len_utf8())
                        .filter(|&k| at(k) == Some(b'\''))
                        .map(|k| k + 1)
                };
                match end {
                    Some(end) => (Kind::Char, end.min(b.len()), i..end.min(b.len())),
                    None => {
                        // A lifetime or label: code.
                        i += 1;
                        continue;
                    }
                }
            }
            _ => {
                i += 1;
                continue;
            }
        };
        if code_start < i {
            spans.push(code(code_start..i));
        }
        spans.push(Span {
            kind,
            range: i..end,
            body,
        });
        i = end;
        code_start = end;
    }
    if code_start < b.len() {
        spans.push(code(code_start..b.len()));
    }
    spans
}

fn code(range: Range<usize>) -> Span {
    Span {
        kind: Kind::Code,
        body: range.clone(),
        range,
    }
}

/// Whether the `r` at `i` opens a raw string: it starts a token (`r"`, `r#"`), or follows a
/// `b` that does (`br"`).
fn raw_prefix_ok(b: &[u8], i: usize) -> bool {
    let starts_token = |k: usize| k == 0 || !is_ident(b[k - 1]);
    matches!(b.get(i + 1), Some(b'"' | b'#'))
        && (starts_token(i) || (b[i - 1] == b'b' && starts_token(i - 1)))
}

/// `text` with the bytes of every span whose kind `keep` refuses replaced by spaces
/// (newlines kept, so lines and offsets do not move).
pub fn blank(text: &str, keep: impl Fn(Kind) -> bool) -> String {
    let mut out = text.as_bytes().to_vec();
    for span in lex(text) {
        if !keep(span.kind) {
            blank_range(&mut out, span.range);
        }
    }
    into_string(out)
}

fn blank_range(bytes: &mut [u8], range: Range<usize>) {
    for byte in &mut bytes[range] {
        if *byte != b'\n' {
            *byte = b' ';
        }
    }
}

fn into_string(bytes: Vec<u8>) -> String {
    // Whole characters are blanked (a span never splits one), so this stays UTF-8.
    String::from_utf8(bytes).unwrap_or_default()
}

const CFG_TEST: &str = "#[cfg(test)]";

/// The items annotated `#[cfg(test)]` in `text`: for each, the byte range from the
/// attribute to the end of the item (its `;`, or the `}` matching its first `{`, skipping
/// braces in literals and comments), and its header (the code between the attribute and
/// that `;` or `{`). A file with an inner `#![cfg(test)]` is one test item.
pub fn test_items(text: &str) -> Vec<(Range<usize>, String)> {
    let code_only = blank(text, |k| k == Kind::Code);
    if code_only.contains("#![cfg(test)]") {
        return vec![(0..text.len(), String::new())];
    }
    let b = code_only.as_bytes();
    let mut items = Vec::new();
    let mut from = 0;
    while let Some(found) = code_only[from..].find(CFG_TEST) {
        let start = from + found;
        let header_start = start + CFG_TEST.len();
        let (mut depth, mut j) = (0i32, header_start);
        let mut end = b.len();
        while j < b.len() {
            match b[j] {
                b'(' | b'[' => depth += 1,
                b')' | b']' => depth -= 1,
                b';' if depth == 0 => {
                    end = j + 1;
                    break;
                }
                b'}' if depth == 0 => {
                    // The enclosing block ended: the item was the block's tail expression.
                    end = j;
                    break;
                }
                b'{' if depth == 0 => {
                    end = matching_brace(b, j);
                    break;
                }
                _ => {}
            }
            j += 1;
        }
        items.push((
            start..end,
            code_only[header_start..j.min(b.len())].to_owned(),
        ));
        from = end.max(header_start);
    }
    items
}

/// The offset after the `}` that closes the `{` at `open` (code-only bytes).
fn matching_brace(b: &[u8], open: usize) -> usize {
    let mut depth = 0;
    for (k, &byte) in b.iter().enumerate().skip(open) {
        match byte {
            b'{' => depth += 1,
            b'}' => {
                depth -= 1;
                if depth == 0 {
                    return k + 1;
                }
            }
            _ => {}
        }
    }
    b.len()
}

/// `text` with every `#[cfg(test)]` item blanked out and everything else kept.
pub fn production(text: &str) -> String {
    let mut out = text.as_bytes().to_vec();
    for (range, _) in test_items(text) {
        blank_range(&mut out, range);
    }
    into_string(out)
}

/// The names of the modules `text` declares `#[cfg(test)]`, inline (`mod tests { … }`) or
/// in their own file (`mod tests;`): those files, and every file under their directory, are
/// test code.
pub fn test_modules(text: &str) -> Vec<String> {
    test_items(text)
        .into_iter()
        .filter_map(|(_, header)| {
            let mut words = header
                .split(|c: char| !(c.is_alphanumeric() || c == '_'))
                .filter(|w| !w.is_empty());
            words.find(|&w| w == "mod")?;
            words.next().map(str::to_owned)
        })
        .collect()
}

/// A function with a body.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Function {
    /// Its name.
    pub name: String,
    /// From its `fn` keyword to the `}` that closes its body (inclusive).
    pub range: Range<usize>,
}

/// The functions with a body in `code` (code only: comments and literals blanked), nested
/// ones too, in source order. A `fn` keyword opens one when a name follows it (a
/// `fn(…)` pointer type does not); its body is the first `{` outside parentheses and
/// brackets, unless a `;` comes first (a declaration in a trait).
pub fn functions(code: &str) -> Vec<Function> {
    let b = code.as_bytes();
    let mut found = Vec::new();
    for (at, _) in code.match_indices("fn") {
        let before_ok = at == 0 || !is_ident(b[at - 1]);
        let after = &code[at + 2..];
        let name_start = after.len() - after.trim_start().len();
        if !before_ok || name_start == 0 {
            continue;
        }
        let name: String = after[name_start..]
            .bytes()
            .take_while(|&c| is_ident(c))
            .map(char::from)
            .collect();
        if name.is_empty() {
            continue;
        }
        let mut depth = 0i32;
        for (k, &c) in b.iter().enumerate().skip(at + 2) {
            match c {
                b'(' | b'[' => depth += 1,
                b')' | b']' => depth -= 1,
                b';' if depth == 0 => break,
                b'{' if depth == 0 => {
                    found.push(Function {
                        name,
                        range: at..matching_brace(b, k),
                    });
                    break;
                }
                _ => {}
            }
        }
    }
    found
}

/// A string literal and where it stands.
#[derive(Clone, Debug)]
pub struct Literal {
    /// The code before it in the same statement (since the last `;` or `}`).
    pub context: String,
    /// Its text between the quotes, escapes as written.
    pub text: String,
    /// The offset of its opening quote (or raw prefix).
    pub offset: usize,
}

/// The string literals of `code`, comments and char literals skipped.
pub fn literals(code: &str) -> Vec<Literal> {
    let mut out = Vec::new();
    let mut statement_start = 0;
    for span in lex(code) {
        match span.kind {
            Kind::Code => {
                if let Some(k) = code[span.range.clone()].rfind([';', '}']) {
                    statement_start = span.range.start + k + 1;
                }
            }
            Kind::Str => out.push(Literal {
                context: code[statement_start..span.range.start].to_owned(),
                text: code[span.body].to_owned(),
                offset: span.range.start,
            }),
            Kind::Comment | Kind::Char => {}
        }
    }
    out
}

/// The 1-based line of byte `offset` in `text`.
pub fn line_of(text: &str, offset: usize) -> usize {
    let before = &text.as_bytes()[..offset.min(text.len())];
    before.iter().filter(|&&b| b == b'\n').count() + 1
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_literal_scanner_finds_what_it_should() {
        let code = r##"
            fn f() { tracing::warn!(%e, "Logged in a span."); }
            fn g() -> &'static str { "Hello there, dear user" }
            // "a comment with many words"
            const C: char = '"'; let raw = r#"a raw string with words"#;
            let b = br"raw bytes"; let e = "say \"hi\" twice"; let q = '\'';
        "##;
        let found: Vec<String> = literals(code).into_iter().map(|l| l.text).collect();
        assert_eq!(
            found,
            [
                "Logged in a span.",
                "Hello there, dear user",
                "a raw string with words",
                "raw bytes",
                r#"say \"hi\" twice"#,
            ]
        );
        let first = &literals(code)[0];
        assert!(first.context.contains("tracing::"));
        assert_eq!(line_of(code, first.offset), 2);
    }

    #[test]
    fn code_after_a_test_module_is_kept() {
        let text = "fn a() {}\n#[cfg(test)]\nmod tests {\n    #[test]\n    fn t() { if x { y() } }\n}\nfn b() {}\n";
        let prod = production(text);
        assert!(prod.contains("fn a() {}") && prod.contains("fn b() {}"));
        assert!(!prod.contains("mod tests") && !prod.contains("fn t()"));
        assert_eq!(prod.lines().count(), text.lines().count(), "lines kept");
        assert_eq!(line_of(&prod, prod.find("fn b").unwrap()), 7);
    }

    #[test]
    fn a_test_module_declaration_and_a_test_helper_are_items() {
        let text = "#[cfg(test)]\nmod tests;\nmod worker;\nimpl S {\n    #[cfg(test)]\n    fn len(&self) -> usize { self.v.len() }\n    fn keep(&self) {}\n}\nfn f() {\n    #[cfg(test)]\n    HITS.fetch_add(1, Ordering::Relaxed);\n    run();\n}\n";
        let prod = production(text);
        for kept in [
            "mod worker;",
            "fn keep(&self) {}",
            "run();",
            "impl S {",
            "fn f() {",
        ] {
            assert!(prod.contains(kept), "{kept} is production code");
        }
        for gone in ["mod tests", "fn len", "HITS"] {
            assert!(!prod.contains(gone), "{gone} is test code");
        }
        assert_eq!(
            prod.matches('}').count(),
            3,
            "impl S, keep and f keep their closing braces"
        );
    }

    #[test]
    fn braces_in_literals_and_comments_do_not_end_a_test_module() {
        let text = "#[cfg(test)]\nmod tests {\n    const A: &str = \"}}\";\n    const B: &str = r#\"}\"#;\n    const C: char = '}';\n    const D: char = '\\u{7d}';\n    // }\n    /* } /* } */ } */\n    fn t<'a>(x: &'a str) { let _ = [1; 2]; }\n}\nfn after() {}\n";
        let prod = production(text);
        assert!(prod.contains("fn after() {}"));
        assert!(!prod.contains("const") && !prod.contains("fn t"), "{prod}");
    }

    #[test]
    fn test_modules_are_named_inline_or_in_a_file() {
        let text = "#[cfg(test)]\nmod recorder;\n#[cfg(test)]\npub(in crate::x) mod kit { /* mod nope; */ }\n#[cfg(test)]\nfn helper() {}\n#[cfg(test)]\n#[allow(dead_code)]\nmod tests;\n";
        assert_eq!(test_modules(text), ["recorder", "kit", "tests"]);
        assert_eq!(production("#![cfg(test)]\nfn f() {}\n").trim(), "");
    }

    #[test]
    fn an_attribute_in_a_literal_or_comment_is_not_a_test_item() {
        let text = "// #[cfg(test)]\nconst S: &str = \"#[cfg(test)]\";\nfn f() {}\n";
        assert_eq!(production(text), text);
    }

    #[test]
    fn functions_are_found_with_their_bodies() {
        let text = "trait T { fn decl(&self) -> u8; }\ntype H = fn(&str) -> u8;\npub async fn outer<F: Fn() -> u8>(f: [u8; 2]) -> impl Fn() -> u8\nwhere F: Send {\n    fn inner() { let s = \"}\"; }\n    move || 1\n}\nfn after() {}\n";
        let code = blank(text, |k| k == Kind::Code);
        let found = functions(&code);
        let names: Vec<&str> = found.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(names, ["outer", "inner", "after"]);
        assert_eq!(line_of(text, found[0].range.start), 3);
        assert_eq!(
            line_of(text, found[0].range.end),
            7,
            "outer ends at its own brace"
        );
        assert_eq!(&text[found[2].range.clone()], "fn after() {}");
    }

    #[test]
    fn comments_can_be_blanked_alone() {
        let text = "let a = \"x\"; // one\n/** two */ let b = 'c';\n";
        let code = blank(text, |k| k != Kind::Comment);
        assert_eq!(code, "let a = \"x\";       \n           let b = 'c';\n");
    }
}
