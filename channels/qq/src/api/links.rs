//! Links written so QQ does not take them for links, for a reply QQ refused because of one.
//!
//! QQ refuses a C2C or group message carrying a URL whose domain the bot has not
//! registered (code 40054010 "消息发送失败，不允许发送url"; bot-docs'
//! `openapi/error/error.md` lists 304003 `URL_NOT_ALLOWED` too), and the renderer writes
//! links as "text (url)". Such a reply is sent once more through [`defang`]: every
//! `scheme://` is dropped and every dot of a domain becomes `[.]`
//! (`https://example.com/a` → `example[.]com/a`), so the reader still gets the answer and
//! can still read where a link pointed. A bot whose domains are registered never comes
//! here: its links pass the first time.
//!
//! A domain is a run of ASCII letters, digits, `-` and `.` with two labels or more, the
//! last one two letters or more (`example.com`, `a.b.example.org`, also `file.pdf`), or
//! four number labels (an IPv4 address). Over-matching costs a `[.]` in a reply QQ has
//! already refused; under-matching costs the reply.

/// What replaces a domain's dot.
const DOT: &str = "[.]";

/// `text` with its links and bare domains defanged, or `None` when it has none.
pub fn defang(text: &str) -> Option<String> {
    let unschemed = drop_schemes(text);
    let out = defang_domains(&unschemed);
    (out != text).then_some(out)
}

/// Whether `c` can be part of a domain-like run.
fn is_host_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '-' || c == '.'
}

/// `text` without any `scheme://` (a scheme is an ASCII letter, then letters, digits,
/// `+`, `-` or `.`).
fn drop_schemes(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("://") {
        let before = &rest[..at];
        let start = before
            .char_indices()
            .rev()
            .take_while(|(_, c)| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
            .last()
            .map_or(at, |(i, _)| i);
        // The scheme starts at its first letter (`x1.https://` keeps `x1.`).
        let start = before[start..]
            .char_indices()
            .find(|(_, c)| c.is_ascii_alphabetic())
            .map_or(at, |(i, _)| start + i);
        out.push_str(&before[..start]);
        rest = &rest[at + 3..];
    }
    out.push_str(rest);
    out
}

/// `text` with the dots of every domain-like run written as [`DOT`].
fn defang_domains(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + text.len() / 4);
    let mut rest = text;
    while let Some(start) = rest.find(is_host_char) {
        out.push_str(&rest[..start]);
        let run = &rest[start..];
        let len = run.find(|c| !is_host_char(c)).unwrap_or(run.len());
        let (word, after) = run.split_at(len);
        push_word(&mut out, word);
        rest = after;
    }
    out.push_str(rest);
    out
}

/// One run of host characters, its inner dots defanged when it is a domain.
fn push_word(out: &mut String, word: &str) {
    // A sentence's full stop (or dots around it) is no part of the domain.
    let core = word.trim_matches('.');
    let lead = word.len() - word.trim_start_matches('.').len();
    if !is_domain(core) {
        out.push_str(word);
        return;
    }
    out.push_str(&word[..lead]);
    out.push_str(&core.replace('.', DOT));
    out.push_str(&word[lead + core.len()..]);
}

/// Whether `core` (no dot at either end) names a host.
fn is_domain(core: &str) -> bool {
    let labels: Vec<&str> = core.split('.').collect();
    if labels.len() < 2 || labels.iter().any(|l| l.is_empty()) {
        return false;
    }
    let numeric = |l: &&str| l.len() <= 3 && l.bytes().all(|b| b.is_ascii_digit());
    if labels.len() == 4 && labels.iter().all(numeric) {
        return true;
    }
    labels
        .last()
        .is_some_and(|tld| tld.len() >= 2 && tld.bytes().all(|b| b.is_ascii_alphabetic()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_and_domains_lose_their_scheme_and_dots() {
        let cases = [
            ("see https://example.com/a", "see example[.]com/a"),
            (
                "Docs (https://docs.example.org/x.html?q=1#f).",
                "Docs (docs[.]example[.]org/x[.]html?q=1#f).",
            ),
            ("go to example.com.", "go to example[.]com."),
            ("http://127.0.0.1:8080/", "127[.]0[.]0[.]1:8080/"),
            ("ftp://files.example.net", "files[.]example[.]net"),
            (
                "链接：https://a.example.cn/路径",
                "链接：a[.]example[.]cn/路径",
            ),
            ("www.example.com and b.io", "www[.]example[.]com and b[.]io"),
        ];
        for (text, want) in cases {
            assert_eq!(defang(text).as_deref(), Some(want), "{text}");
        }
    }

    #[test]
    fn text_without_a_domain_is_left_alone() {
        for text in [
            "",
            "no links here",
            "pi is 3.14, e.g. this... or v1.2",
            "a ratio 1:2 and a path a/b",
            "你好。再见。",
        ] {
            assert_eq!(defang(text), None, "{text}");
        }
    }
}
