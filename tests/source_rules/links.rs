//! Markdown links (issue 28): every relative link or image in the repository's Markdown
//! files names a file or directory that exists, and every `#fragment` into a Markdown file
//! (its own included) names one of that file's headings by the anchor GitHub gives it, so
//! moving a page or renaming a heading cannot leave a dead link behind.
//!
//! pulldown-cmark reads the Markdown (the renderer's parser), so text in code spans and
//! fenced blocks is never taken for a link. URLs (`https:`, `mailto:`, any `scheme:`) and
//! rustdoc's intra-doc paths (`crate::Item`, in the crate READMEs rustdoc includes) are not
//! files and are left alone.

use std::collections::HashSet;

use percent_encoding::percent_decode_str;
use pulldown_cmark::{Event, LinkType, Options, Parser, Tag, TagEnd};

use super::rules::Violation;

/// What a link's path names, as [`broken_links`]'s caller finds it on disk.
pub enum Target {
    /// Nothing.
    Missing,
    /// A directory, or a file whose headings do not matter (not Markdown).
    Other,
    /// A Markdown file, with its text (for its headings).
    Markdown(String),
}

/// A link or image target of a Markdown text, and the 1-based line it is on.
#[derive(Debug, PartialEq)]
pub struct Link {
    /// As written, without the angle brackets of `<target>`.
    pub target: String,
    /// Where it is.
    pub line: usize,
}

fn parser(text: &str) -> Parser<'_> {
    Parser::new_ext(text, Options::ENABLE_TABLES | Options::ENABLE_STRIKETHROUGH)
}

fn line_of(text: &str, offset: usize) -> usize {
    text[..offset].matches('\n').count() + 1
}

/// Every link and image of `text` (inline and reference-style), and every reference
/// definition (`[id]: target`) whether a link uses it or not. Autolinks (`<https://…>`)
/// are URLs by construction and are left out.
pub fn links(text: &str) -> Vec<Link> {
    let parser = parser(text);
    let mut found: Vec<Link> = parser
        .reference_definitions()
        .iter()
        .map(|(_, def)| Link {
            target: def.dest.to_string(),
            line: line_of(text, def.span.start),
        })
        .collect();
    for (event, range) in parser.into_offset_iter() {
        if let Event::Start(
            Tag::Link {
                link_type,
                dest_url,
                ..
            }
            | Tag::Image {
                link_type,
                dest_url,
                ..
            },
        ) = event
            && !matches!(link_type, LinkType::Autolink | LinkType::Email)
        {
            found.push(Link {
                target: dest_url.to_string(),
                line: line_of(text, range.start),
            });
        }
    }
    found.sort_by_key(|l| l.line);
    found
}

/// The anchor GitHub gives a heading: its text lowercased, every character but letters,
/// digits, `-`, `_` and spaces removed, each space then a `-` ("`/goal`: every outcome" →
/// `goal-every-outcome`).
pub fn slug(heading: &str) -> String {
    heading
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, '-' | '_' | ' '))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// The anchors of `text`'s headings, in GitHub's way: a repeated slug gets `-1`, `-2`, ….
pub fn anchors(text: &str) -> HashSet<String> {
    let mut anchors = HashSet::new();
    let mut heading: Option<String> = None;
    for event in parser(text) {
        match event {
            Event::Start(Tag::Heading { .. }) => heading = Some(String::new()),
            Event::Text(t) | Event::Code(t) => {
                if let Some(h) = heading.as_mut() {
                    h.push_str(&t);
                }
            }
            Event::End(TagEnd::Heading(_)) => {
                let base = slug(&heading.take().unwrap_or_default());
                let mut anchor = base.clone();
                let mut n = 0;
                while !anchors.insert(anchor.clone()) {
                    n += 1;
                    anchor = format!("{base}-{n}");
                }
            }
            _ => {}
        }
    }
    anchors
}

/// A target outside the repository's files: a URL or an intra-doc path.
fn is_external(target: &str) -> bool {
    let scheme = target.split_once(':').is_some_and(|(s, _)| {
        s.starts_with(|c: char| c.is_ascii_alphabetic())
            && s.chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
    });
    scheme || target.contains("::")
}

/// `path` (`/`-separated, from the repository root) with `.` and `..` segments resolved;
/// `None` when it climbs out of the repository.
fn normalize(path: &str) -> Option<String> {
    let mut parts: Vec<&str> = Vec::new();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop()?;
            }
            _ => parts.push(part),
        }
    }
    Some(parts.join("/"))
}

/// The broken links of the Markdown file `path` (from the repository root) whose text is
/// `text`: a relative target that names nothing, or a fragment no heading of its Markdown
/// file has. `lookup` tells what a normalized path (`""` is the root) names.
pub fn broken_links(path: &str, text: &str, lookup: &dyn Fn(&str) -> Target) -> Vec<Violation> {
    let dir = path.rsplit_once('/').map_or("", |(dir, _)| dir);
    let broken = |link: &Link, what: &str| Violation {
        path: path.to_owned(),
        line: link.line,
        what: format!("{what}: {}", link.target),
    };
    let mut found = Vec::new();
    for link in links(text) {
        if link.target.is_empty() || is_external(&link.target) {
            continue;
        }
        let (file, fragment) = match link.target.split_once('#') {
            Some((file, fragment)) => (file, Some(fragment)),
            None => (link.target.as_str(), None),
        };
        let file = percent_decode_str(file).decode_utf8_lossy();
        let target = if file.is_empty() {
            Target::Markdown(text.to_owned())
        } else {
            let Some(resolved) = normalize(&format!("{dir}/{file}")) else {
                found.push(broken(&link, "a link out of the repository"));
                continue;
            };
            lookup(&resolved)
        };
        match (target, fragment) {
            (Target::Missing, _) => found.push(broken(&link, "a link to nothing")),
            (Target::Markdown(target), Some(fragment)) => {
                let fragment = percent_decode_str(fragment).decode_utf8_lossy();
                if !anchors(&target).contains(fragment.as_ref()) {
                    found.push(broken(&link, "a link to a heading that is not there"));
                }
            }
            _ => {}
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lookup(path: &str) -> Target {
        match path {
            "docs/page.md" => Target::Markdown("# Page\n\n## Set up: `im-bridge`\n".into()),
            "docs" | "src/lib.rs" => Target::Other,
            _ => Target::Missing,
        }
    }

    fn lines(path: &str, text: &str) -> Vec<usize> {
        let found = broken_links(path, text, &lookup);
        found.iter().map(|v| v.line).collect()
    }

    #[test]
    fn a_link_to_nothing_or_to_a_missing_heading_fails() {
        let text = "# Top\n\n\
            [page](docs/page.md) [dir](docs/) [code](src/lib.rs) [up](docs/../src/lib.rs)\n\
            [gone](docs/gone.md)\n\
            [heading](docs/page.md#set-up-im-bridge) [no heading](docs/page.md#setup)\n\
            [here](#top) [not here](#bottom) ![image](img/a.png)\n\
            [out](../elsewhere.md)\n\n\
            [ref]: docs/missing.md\n";
        assert_eq!(lines("README.md", text), [4, 5, 6, 6, 7, 9]);
        // Relative to the file's own directory.
        assert!(lines("docs/index.md", "[p](page.md) [r](../src/lib.rs)\n").is_empty());
        assert_eq!(lines("docs/index.md", "[p](docs/page.md)\n"), [1]);
    }

    #[test]
    fn urls_code_and_intra_doc_paths_are_not_links() {
        let text = "[web](https://example.com/x.md) [mail](mailto:a@b.c) <https://x.y>\n\
            `[in code](nowhere.md)`\n\n\
            ```text\n[in a block](nowhere.md)\n```\n\n\
            [`Channel`]: crate::Channel\n\
            [`Exit`]: im_bridge_channel::ChannelExit\n";
        assert!(lines("README.md", text).is_empty());
    }

    #[test]
    fn anchors_are_githubs() {
        for (heading, anchor) in [
            ("`/goal`: every outcome", "goal-every-outcome"),
            ("3. Configure im-bridge", "3-configure-im-bridge"),
            (
                "What users see, and Telegram's limits",
                "what-users-see-and-telegrams-limits",
            ),
            (
                "Pre-flight: `im-bridge doctor`",
                "pre-flight-im-bridge-doctor",
            ),
            ("snake_case · 中文", "snake_case--中文"),
        ] {
            assert_eq!(slug(heading), anchor);
        }
        let twice = anchors("## Notes\n\ntext\n\n## Notes\n\n## Notes\n");
        let mut twice: Vec<_> = twice.into_iter().collect();
        twice.sort();
        assert_eq!(twice, ["notes", "notes-1", "notes-2"]);
    }
}
