//! What the fake takes for a URL in a reply: QQ refuses a C2C or group message carrying a
//! URL whose domain the bot has not registered (40054010), and says nothing of how it
//! finds one, so the fake reads broadly.
//!
//! A URL is any `scheme://host`; a bare domain is a run of ASCII letters, digits, `-` and
//! `.` with two labels or more whose last is two letters or more (`example.com`,
//! `file.pdf`), or four number labels (an IPv4 address). Either is allowed only on a
//! registered domain or its subdomains. `example[.]com` is no domain.

/// Whether `content` carries a URL or a bare domain outside `registered`.
pub(super) fn unregistered(content: &str, registered: &[String]) -> bool {
    let allowed = |host: &str| {
        let host = host.to_ascii_lowercase();
        registered
            .iter()
            .any(|d| host == *d || host.ends_with(&format!(".{d}")))
    };
    let bare = |text: &str| {
        text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '-' || c == '.'))
            .map(|word| word.trim_matches('.'))
            .any(|word| is_domain(word) && !allowed(word))
    };
    content
        .split_whitespace()
        .any(|token| match token.find("://") {
            // A URL's host decides (its path may hold `file.pdf`); what precedes it is text.
            Some(at) => {
                let host: String = token[at + 3..]
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || matches!(c, '-' | '.' | '_'))
                    .collect();
                bare(&token[..at]) || !allowed(host.trim_end_matches('.'))
            }
            None => bare(token),
        })
}

/// Whether `word` (no dot at either end) names a host.
fn is_domain(word: &str) -> bool {
    let labels: Vec<&str> = word.split('.').collect();
    if labels.len() < 2 || labels.iter().any(|l| l.is_empty()) {
        return false;
    }
    if labels.len() == 4 && labels.iter().all(|l| l.bytes().all(|b| b.is_ascii_digit())) {
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
    fn urls_and_bare_domains_are_found_unless_registered() {
        let registered = vec!["example.com".to_owned()];
        for text in [
            "see https://evil.org/a",
            "see evil.org",
            "http://localhost/x",
            "at 10.0.0.1 now",
            "docs.example.com.evil.net",
        ] {
            assert!(unregistered(text, &registered), "{text}");
        }
        for text in [
            "see https://example.com/a/file.pdf",
            "https://docs.example.com/x and example.com.",
            "no link, 3.14, e.g. this",
            "defanged evil[.]org/a",
            "",
        ] {
            assert!(!unregistered(text, &registered), "{text}");
        }
    }
}
