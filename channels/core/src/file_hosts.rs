//! Where an adapter may fetch a file from: the platform's own file hosts, nothing else.
//!
//! An inbound event can carry a URL (a Discord attachment, a QQ image), and some platform
//! APIs answer one (DingTalk's `downloadUrl`). Fetching any URL that arrives would let
//! whoever forges or relays an event make the bridge request internal addresses (SSRF). So
//! each adapter holds a [`FileHosts`] list (`file_hosts` in its config block, defaulting to
//! the platform's real CDN hosts) and refuses a URL on any other host before a request is
//! made.
//!
//! A pattern is `example.com` (that host only), `.example.com` or `*.example.com` (that
//! domain and every subdomain), an IP literal (`127.0.0.1`, `[::1]`: matched exactly, never
//! by a domain pattern), and optionally `:port` (then only that port; without one any port).
//! Names compare case-insensitively and without a trailing dot. A URL is allowed only when
//! it is `http(s)`, carries no userinfo, and its host matches a pattern.

use std::fmt;
use std::net::IpAddr;

use serde::{Serialize, Serializer};
use url::{Host, Url};

/// Most patterns in one list (bounded memory on a hostile file).
pub const MAX_FILE_HOSTS: usize = 256;

/// A pattern that is not a host pattern (its text is not echoed: it came from a file).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum FileHostError {
    /// An empty or blank pattern.
    #[error("expected a host pattern, got an empty one")]
    Empty,
    /// Not a host, `.domain`, `*.domain` or IP literal, with an optional `:port`.
    #[error("expected a host such as cdn.example.com, .example.com or 127.0.0.1:8080")]
    Invalid,
    /// More than [`MAX_FILE_HOSTS`] patterns.
    #[error("expected at most {MAX_FILE_HOSTS} host patterns")]
    TooMany,
}

/// What a pattern's host part matches.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Matcher {
    /// This host name only (lowercase, no trailing dot).
    Exact(String),
    /// This domain and its subdomains (lowercase, no trailing dot, no leading dot).
    Domain(String),
    /// This IP address only.
    Ip(IpAddr),
}

/// One parsed pattern, with the text it was read from (normalized) for display.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Pattern {
    matcher: Matcher,
    port: Option<u16>,
    text: String,
}

/// The hosts an adapter may fetch files from. Pure; cheap to clone.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FileHosts {
    patterns: Vec<Pattern>,
}

impl FileHosts {
    /// Parses every pattern; the first bad one is the error. An empty list allows nothing.
    pub fn new<I, S>(patterns: I) -> Result<Self, FileHostError>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let mut parsed = Vec::new();
        for text in patterns {
            if parsed.len() == MAX_FILE_HOSTS {
                return Err(FileHostError::TooMany);
            }
            parsed.push(parse_pattern(text.as_ref())?);
        }
        Ok(Self { patterns: parsed })
    }

    /// Whether a fetch of `url` may be made: `http`/`https`, no userinfo, a host (and port,
    /// where the pattern names one) that a pattern matches.
    pub fn allows(&self, url: &Url) -> bool {
        if !matches!(url.scheme(), "http" | "https")
            || !url.username().is_empty()
            || url.password().is_some()
        {
            return false;
        }
        let port = url.port_or_known_default();
        let host = match url.host() {
            Some(Host::Domain(name)) => Matcher::Exact(normal_name(name)),
            Some(Host::Ipv4(ip)) => Matcher::Ip(IpAddr::V4(ip)),
            Some(Host::Ipv6(ip)) => Matcher::Ip(IpAddr::V6(ip)),
            None => return false,
        };
        self.patterns.iter().any(|p| {
            let host_ok = match (&p.matcher, &host) {
                (Matcher::Exact(want), Matcher::Exact(got)) => want == got,
                (Matcher::Domain(want), Matcher::Exact(got)) => {
                    got == want
                        || got
                            .strip_suffix(want.as_str())
                            .is_some_and(|rest| rest.ends_with('.'))
                }
                (Matcher::Ip(want), Matcher::Ip(got)) => want == got,
                _ => false,
            };
            host_ok && p.port.is_none_or(|want| port == Some(want))
        })
    }

    /// The patterns, normalized (lowercase, no trailing dot, `*.` written as `.`).
    pub fn patterns(&self) -> impl Iterator<Item = &str> {
        self.patterns.iter().map(|p| p.text.as_str())
    }

    /// Whether no host is allowed at all.
    pub fn is_empty(&self) -> bool {
        self.patterns.is_empty()
    }
}

impl fmt::Display for FileHosts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let all: Vec<&str> = self.patterns().collect();
        f.write_str(&all.join(", "))
    }
}

impl Serialize for FileHosts {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.patterns())
    }
}

/// A host name lowercased, without its trailing dot.
fn normal_name(name: &str) -> String {
    name.strip_suffix('.').unwrap_or(name).to_ascii_lowercase()
}

fn parse_pattern(text: &str) -> Result<Pattern, FileHostError> {
    let text = text.trim();
    if text.is_empty() {
        return Err(FileHostError::Empty);
    }
    let (domain, rest) = if let Some(rest) = text.strip_prefix("*.") {
        (true, rest)
    } else if let Some(rest) = text.strip_prefix('.') {
        (true, rest)
    } else {
        (false, text)
    };
    let (host, port) = split_port(rest)?;
    let matcher = match Host::parse(host).map_err(|_| FileHostError::Invalid)? {
        Host::Ipv4(ip) if !domain && !host.starts_with('[') => Matcher::Ip(IpAddr::V4(ip)),
        Host::Ipv6(ip) if !domain => Matcher::Ip(IpAddr::V6(ip)),
        Host::Domain(name) => {
            let name = normal_name(&name);
            let labels_ok = !name.is_empty()
                && name.split('.').all(|label| {
                    !label.is_empty()
                        && label
                            .bytes()
                            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
                });
            if !labels_ok {
                return Err(FileHostError::Invalid);
            }
            if domain {
                Matcher::Domain(name)
            } else {
                Matcher::Exact(name)
            }
        }
        _ => return Err(FileHostError::Invalid),
    };
    let host_text = match &matcher {
        Matcher::Exact(name) => name.clone(),
        Matcher::Domain(name) => format!(".{name}"),
        Matcher::Ip(IpAddr::V4(ip)) => ip.to_string(),
        Matcher::Ip(IpAddr::V6(ip)) => format!("[{ip}]"),
    };
    let text = match port {
        Some(port) => format!("{host_text}:{port}"),
        None => host_text,
    };
    Ok(Pattern {
        matcher,
        port,
        text,
    })
}

/// `host[:port]` or `[v6][:port]` split into its host and port.
fn split_port(text: &str) -> Result<(&str, Option<u16>), FileHostError> {
    let (host, port) = if text.starts_with('[') {
        match text.find(']') {
            Some(end) => {
                let (host, rest) = text.split_at(end + 1);
                match rest {
                    "" => (host, None),
                    _ => (
                        host,
                        Some(rest.strip_prefix(':').ok_or(FileHostError::Invalid)?),
                    ),
                }
            }
            None => return Err(FileHostError::Invalid),
        }
    } else {
        match text.split_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (text, None),
        }
    };
    let port = match port {
        None => None,
        Some(digits) if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) => {
            Some(digits.parse().map_err(|_| FileHostError::Invalid)?)
        }
        Some(_) => return Err(FileHostError::Invalid),
    };
    if host.is_empty() {
        return Err(FileHostError::Invalid);
    }
    Ok((host, port))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hosts(patterns: &[&str]) -> FileHosts {
        FileHosts::new(patterns).unwrap()
    }

    fn allows(hosts: &FileHosts, url: &str) -> bool {
        hosts.allows(&Url::parse(url).unwrap())
    }

    #[test]
    fn an_exact_host_matches_itself_only() {
        let h = hosts(&["cdn.discordapp.com"]);
        assert!(allows(
            &h,
            "https://cdn.discordapp.com/attachments/1/2/a.png?ex=1"
        ));
        assert!(allows(&h, "http://CDN.DiscordApp.COM/x"));
        assert!(allows(&h, "https://cdn.discordapp.com./x"), "trailing dot");
        assert!(
            allows(&h, "https://cdn.discordapp.com:8443/x"),
            "no port named"
        );
        assert!(!allows(&h, "https://cdn.discordapp.com.evil.com/x"));
        assert!(!allows(&h, "https://evil.com/cdn.discordapp.com"));
        assert!(!allows(
            &h,
            "https://evil.com/?u=https://cdn.discordapp.com/"
        ));
        assert!(
            !allows(&h, "https://x.cdn.discordapp.com/x"),
            "no subdomains"
        );
        assert!(!allows(&h, "https://discordapp.com/x"));
        assert!(!allows(&h, "https://evilcdn.discordapp.com/x"));
    }

    #[test]
    fn userinfo_and_other_schemes_are_refused() {
        let h = hosts(&["cdn.discordapp.com", "evil.com"]);
        assert!(!allows(&h, "https://cdn.discordapp.com@evil.com/x"));
        assert!(!allows(&h, "https://user:pw@cdn.discordapp.com/x"));
        assert!(!allows(&h, "https://user@cdn.discordapp.com/x"));
        assert!(!allows(&h, "ftp://cdn.discordapp.com/x"));
        assert!(!allows(&h, "file:///etc/passwd"));
        assert!(!allows(&h, "data:text/plain,hi"));
        // `evil.com` listed: the userinfo form is refused all the same.
        assert!(!allows(&h, "http://cdn.discordapp.com:x@evil.com/"));
    }

    #[test]
    fn a_domain_pattern_matches_the_domain_and_its_subdomains() {
        for pattern in [".qpic.cn", "*.qpic.cn", "*.QPIC.cn.", " .qpic.cn "] {
            let h = hosts(&[pattern]);
            assert_eq!(h.patterns().collect::<Vec<_>>(), [".qpic.cn"]);
            assert!(allows(&h, "https://gchat.qpic.cn/x"), "{pattern}");
            assert!(allows(&h, "https://a.b.qpic.cn/x"));
            assert!(allows(&h, "https://qpic.cn/x"));
            assert!(!allows(&h, "https://evilqpic.cn/x"));
            assert!(!allows(&h, "https://qpic.cn.evil.com/x"));
            assert!(!allows(&h, "https://gchat.qpic.cn.evil.com/x"));
        }
    }

    #[test]
    fn ip_literals_match_only_when_listed_exactly() {
        // A domain pattern over an address is no pattern at all.
        assert_eq!(FileHosts::new([".0.0.1"]), Err(FileHostError::Invalid));
        assert_eq!(FileHosts::new(["*.[::1]"]), Err(FileHostError::Invalid));
        let h = hosts(&["localhost"]);
        assert!(
            !allows(&h, "http://127.0.0.1/x"),
            "a name never matches an address"
        );
        let h = hosts(&["127.0.0.1", "[::1]"]);
        assert!(allows(&h, "http://127.0.0.1:9/x"));
        assert!(allows(&h, "http://[::1]:9/x"));
        assert!(!allows(&h, "http://127.0.0.2/x"));
        assert!(
            !allows(&h, "http://localhost/x"),
            "a name is not its address"
        );
        // The URL parser reads these as 127.0.0.1 too; they are the same address.
        assert!(allows(&h, "http://0x7f.0.0.1/x"));
        assert!(allows(&h, "http://2130706433/x"));
        let h = hosts(&["cdn.example.com"]);
        assert!(!allows(&h, "http://127.0.0.1/x"));
        assert!(!allows(&h, "http://[::1]/x"));
    }

    #[test]
    fn a_port_in_a_pattern_is_matched() {
        let h = hosts(&["127.0.0.1:8080", "cdn.example.com:443", "[::1]:9"]);
        assert!(allows(&h, "http://127.0.0.1:8080/x"));
        assert!(!allows(&h, "http://127.0.0.1:8081/x"));
        assert!(!allows(&h, "http://127.0.0.1/x"), "the default port is 80");
        assert!(
            allows(&h, "https://cdn.example.com/x"),
            "443 is https's default"
        );
        assert!(!allows(&h, "http://cdn.example.com/x"));
        assert!(allows(&h, "http://[::1]:9/x"));
        assert!(!allows(&h, "http://[::1]:10/x"));
        assert_eq!(
            h.to_string(),
            "127.0.0.1:8080, cdn.example.com:443, [::1]:9"
        );
    }

    #[test]
    fn bad_patterns_are_refused() {
        for bad in [
            "",
            "  ",
            ".",
            "*.",
            "*",
            "a..b",
            "https://cdn.example.com",
            "a/b",
            "user@host",
            "host:",
            "host:x",
            "host:99999",
            "[::1",
            "[::1]x",
            "*.127.0.0.1x/",
            "*.[::1]",
            "a b",
            "ex*ample.com",
            ":80",
        ] {
            assert!(FileHosts::new([bad]).is_err(), "{bad:?}");
        }
        assert_eq!(FileHosts::new([""]), Err(FileHostError::Empty));
        let many = vec!["a.com"; MAX_FILE_HOSTS + 1];
        assert_eq!(FileHosts::new(many), Err(FileHostError::TooMany));
        let empty = FileHosts::new(Vec::<String>::new()).unwrap();
        assert!(empty.is_empty());
        assert!(!allows(&empty, "https://cdn.discordapp.com/x"));
    }

    #[test]
    fn it_serializes_as_its_normalized_patterns() {
        let h = hosts(&["CDN.discordapp.com.", "*.qpic.cn"]);
        assert_eq!(
            serde_json::to_string(&h).unwrap(),
            r#"["cdn.discordapp.com",".qpic.cn"]"#
        );
    }
}
