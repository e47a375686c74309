//! The configuration toolkit every adapter validates its `channels.<name>` block with.
//!
//! An operator points im-bridge at DeerFlow's own `config.yaml`, so every adapter reads its
//! block the same way:
//! - [`parse_block`] deserializes the adapter's raw keys; a key it does not know is a
//!   *warning* (the file is DeerFlow's, and DeerFlow may know it), a value of the wrong
//!   type an *error* at its full key path;
//! - [`Issues`] collects every problem under the block's prefix
//!   (`channels.telegram.webhook.listen: …`), so `check-config` lists them all at once;
//! - the value helpers ([`seconds`], [`integer`], [`base_url`], [`required_secret`],
//!   [`socket_addr`], [`choice`], [`id_list`], [`file_hosts`]) check a value the same way in every adapter
//!   and never echo a secret.
//!
//! Everything here is pure: it opens no file or socket, so `check-config` can run it anywhere.

use std::fmt;
use std::net::SocketAddr;
use std::ops::RangeInclusive;
use std::time::Duration;

use serde::de::DeserializeOwned;
use serde_json::Value;

mod webhook;

pub use webhook::{EventMode, RawWebhook, WebhookPlace, event_mode, webhook_place};

use crate::access::AllowedUsers;
use crate::file_hosts::FileHosts;
use crate::secret::Secret;

/// Whether an issue stops the daemon from starting.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Severity {
    /// The configuration is invalid.
    Error,
    /// Worth telling the operator; the daemon starts anyway.
    Warning,
}

/// One problem with the configuration, at a full key path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigIssue {
    /// Dotted key path, e.g. `channels.telegram.bot_token`.
    pub path: String,
    /// What was expected. Never contains a secret's value.
    pub message: String,
    /// Error or warning.
    pub severity: Severity,
}

impl ConfigIssue {
    /// An error at `path`.
    pub fn error(path: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            path: path.into(),
            message: message.into(),
            severity: Severity::Error,
        }
    }

    /// A warning at `path`.
    pub fn warning(path: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            severity: Severity::Warning,
            ..Self::error(path, message)
        }
    }

    /// Whether this issue stops the daemon from starting.
    pub fn is_error(&self) -> bool {
        self.severity == Severity::Error
    }
}

impl fmt::Display for ConfigIssue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path, self.message)
    }
}

/// The issues found in one block, every path under its prefix.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Issues {
    prefix: String,
    list: Vec<ConfigIssue>,
}

impl Issues {
    /// Issues of the block at `prefix` (`channels.telegram`); an empty prefix is the root.
    pub fn new(prefix: impl Into<String>) -> Self {
        Self {
            prefix: prefix.into(),
            list: Vec::new(),
        }
    }

    /// The block's own path.
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// The full path of `key` inside the block (`webhook.listen` → `channels.telegram.webhook.listen`);
    /// an empty key is the block itself.
    pub fn path(&self, key: &str) -> String {
        match (self.prefix.is_empty(), key.is_empty()) {
            (_, true) => self.prefix.clone(),
            (true, false) => key.to_owned(),
            (false, false) => format!("{}.{key}", self.prefix),
        }
    }

    /// Records an error at `key`.
    pub fn error(&mut self, key: &str, message: impl Into<String>) {
        let issue = ConfigIssue::error(self.path(key), message);
        self.list.push(issue);
    }

    /// Records a warning at `key`.
    pub fn warn(&mut self, key: &str, message: impl Into<String>) {
        let issue = ConfigIssue::warning(self.path(key), message);
        self.list.push(issue);
    }

    /// Records an issue found elsewhere (its path is kept as it is).
    pub fn push(&mut self, issue: ConfigIssue) {
        self.list.push(issue);
    }

    /// Whether any error was recorded.
    pub fn has_errors(&self) -> bool {
        self.list.iter().any(ConfigIssue::is_error)
    }

    /// How many errors were recorded.
    pub fn error_count(&self) -> usize {
        self.list.iter().filter(|i| i.is_error()).count()
    }

    /// Whether an error was recorded at exactly `path`.
    pub fn has_error_at(&self, path: &str) -> bool {
        self.list.iter().any(|i| i.is_error() && i.path == path)
    }

    /// Every issue, in the order found.
    pub fn iter(&self) -> impl Iterator<Item = &ConfigIssue> {
        self.list.iter()
    }

    /// The issues, in the order found.
    pub fn into_vec(self) -> Vec<ConfigIssue> {
        self.list
    }
}

/// Deserializes an adapter's raw keys from its block.
///
/// Unknown keys become warnings at their full path; a value of the wrong type is an error
/// at its path, and then `None` is returned. A missing block (`null`) reads as an empty one.
pub fn parse_block<T: DeserializeOwned>(block: Value, issues: &mut Issues) -> Option<T> {
    let block = if block.is_null() {
        Value::Object(serde_json::Map::new())
    } else {
        block
    };
    let mut unknown = Vec::new();
    let parsed = {
        let mut on_unknown = |path: serde_ignored::Path<'_>| unknown.push(clean_path(&path));
        let ignored = serde_ignored::Deserializer::new(block, &mut on_unknown);
        serde_path_to_error::deserialize::<_, T>(ignored)
    };
    for key in unknown {
        issues.warn(&key, "unknown key, ignored");
    }
    match parsed {
        Ok(raw) => Some(raw),
        Err(error) => {
            let key = clean_path(error.path());
            issues.error(&key, error.into_inner().to_string());
            None
        }
    }
}

/// A serde path as a config key: `Option` layers (`?`) dropped, the root as "".
fn clean_path(path: &impl fmt::Display) -> String {
    let text = path.to_string().replace(".?", "").replace("?.", "");
    if text == "." || text == "?" {
        String::new()
    } else {
        text
    }
}

/// A duration in (fractional) seconds within `range`; absent = `default`. Out of range,
/// or not finite, is an error and yields `default`.
pub fn seconds(
    issues: &mut Issues,
    key: &str,
    value: Option<f64>,
    default: Duration,
    range: RangeInclusive<f64>,
) -> Duration {
    let Some(v) = value else {
        return default;
    };
    if v.is_finite() && range.contains(&v) {
        Duration::from_secs_f64(v)
    } else {
        issues.error(
            key,
            format!(
                "expected a number of seconds from {} to {}, got {v}",
                range.start(),
                range.end()
            ),
        );
        default
    }
}

/// A whole number within `range`; absent = `default`.
pub fn integer(
    issues: &mut Issues,
    key: &str,
    value: Option<i64>,
    default: i64,
    range: RangeInclusive<i64>,
) -> i64 {
    match value {
        None => default,
        Some(v) if range.contains(&v) => v,
        Some(v) => {
            issues.error(
                key,
                format!(
                    "expected a whole number from {} to {}, got {v}",
                    range.start(),
                    range.end()
                ),
            );
            default
        }
    }
}

/// Checks an `http://` or `https://` base URL with a host and no query or fragment, and
/// returns it without its trailing slash. Absent or blank = `default`.
pub fn base_url(issues: &mut Issues, key: &str, value: Option<&str>, default: &str) -> String {
    let text = match value.map(str::trim) {
        None | Some("") => return default.trim_end_matches('/').to_owned(),
        Some(text) => text,
    };
    match http_url(text) {
        Some(url) => url,
        None => {
            issues.error(
                key,
                format!(
                    "expected an http:// or https:// URL without query, got {}",
                    shown_url(text)
                ),
            );
            default.trim_end_matches('/').to_owned()
        }
    }
}

/// [`base_url`] of a platform whose API paths are fixed below its root (`{api_url}/api/…`):
/// a URL with a path is also an error, whose message says what the adapter adds (`adds`,
/// e.g. `REST adds /api/v10`).
pub fn root_url(
    issues: &mut Issues,
    key: &str,
    value: Option<&str>,
    default: &str,
    adds: &str,
) -> String {
    let url = base_url(issues, key, value, default);
    if url::Url::parse(&url).is_ok_and(|u| !matches!(u.path(), "" | "/")) {
        issues.error(
            key,
            format!("expected a base without a path, e.g. {default} ({adds})"),
        );
    }
    url
}

/// A URL an operator wrote, as an error about it may repeat it: quoted, without its user,
/// password, query or fragment (any of which may hold a credential), saying so when any was
/// left out; a text that is no URL as written.
pub fn shown_url(text: &str) -> String {
    if url::Url::parse(text).is_err() {
        return format!("{text:?}");
    }
    let shown = crate::doctor::display_url(text);
    if shown == text.trim_end_matches('/') {
        format!("{shown:?}")
    } else {
        format!("{shown:?} (its user, password, query or fragment not shown)")
    }
}

/// `text` without its trailing slash when it is an `http(s)://` URL with a host and no
/// query or fragment.
pub fn http_url(text: &str) -> Option<String> {
    let trimmed = text.trim().trim_end_matches('/');
    let url = url::Url::parse(trimmed).ok()?;
    let ok = matches!(url.scheme(), "http" | "https")
        && url.host().is_some()
        && url.query().is_none()
        && url.fragment().is_none();
    ok.then(|| trimmed.to_owned())
}

/// A required piece of text (an app id, a client id): trimmed; absent or blank is an error
/// whose message is `hint` (say what to write, e.g. `required: the app's id from the
/// developer console, e.g. app_id: cli_a1b2c3`).
pub fn required_text(
    issues: &mut Issues,
    key: &str,
    value: Option<&str>,
    hint: &str,
) -> Option<String> {
    match value.map(str::trim) {
        Some(text) if !text.is_empty() => Some(text.to_owned()),
        _ => {
            issues.error(key, hint);
            None
        }
    }
}

/// Optional text: trimmed, and blank read as absent.
pub fn optional_text(value: Option<&str>) -> Option<String> {
    value
        .map(str::trim)
        .filter(|text| !text.is_empty())
        .map(str::to_owned)
}

/// A required credential: absent or empty is an error whose message is `hint` (say what to
/// write, e.g. `required: the bot token from @BotFather, e.g. bot_token: $TELEGRAM_BOT_TOKEN`).
/// The value is never echoed.
pub fn required_secret(
    issues: &mut Issues,
    key: &str,
    value: Option<&Secret>,
    hint: &str,
) -> Option<Secret> {
    match value {
        Some(secret) if !secret.expose().trim().is_empty() => Some(secret.clone()),
        _ => {
            issues.error(key, hint);
            None
        }
    }
}

/// A socket address such as `0.0.0.0:8443`; absent or blank is an error saying `required`.
pub fn socket_addr(
    issues: &mut Issues,
    key: &str,
    value: Option<&str>,
    required: &str,
) -> Option<SocketAddr> {
    match value.map(str::trim) {
        None | Some("") => {
            issues.error(key, required);
            None
        }
        Some(text) => match text.parse() {
            Ok(addr) => Some(addr),
            Err(_) => {
                issues.error(
                    key,
                    format!("expected an address such as 0.0.0.0:8443, got {text:?}"),
                );
                None
            }
        },
    }
}

/// One of `options` (the first is the default when absent or blank). An unknown value is
/// an error and yields the default.
pub fn choice(
    issues: &mut Issues,
    key: &str,
    value: Option<&str>,
    options: &[&'static str],
) -> &'static str {
    let default = options.first().copied().unwrap_or("");
    match value.map(str::trim) {
        None | Some("") => default,
        Some(text) => match options.iter().find(|o| o.eq_ignore_ascii_case(text)) {
            Some(found) => found,
            None => {
                issues.error(
                    key,
                    format!("expected {}, got {text:?}", options.join(" or ")),
                );
                default
            }
        },
    }
}

/// A list of platform ids (`allowed_users`, `admin_users`, `allowed_guilds`); numbers are
/// ids too. Absent, null, empty or `[]` allows anyone (DeerFlow's meaning). Anything but a
/// list is an error at the key (issue 27: `allowed_users: abc` used to pass as a list of one
/// id no sender has, locking everyone out without a word), and so is an entry that is not a
/// string or a number. It fails closed: with errors, nobody is allowed.
pub fn id_list(issues: &mut Issues, key: &str, value: Option<&Value>) -> AllowedUsers {
    let items = match value {
        None | Some(Value::Null) => return AllowedUsers::Anyone,
        Some(Value::String(s)) if s.trim().is_empty() => return AllowedUsers::Anyone,
        Some(Value::Array(items)) => items,
        Some(_) => {
            issues.error(key, "expected a list of ids, e.g. [123456789]");
            return AllowedUsers::Only(Default::default());
        }
    };
    let mut ids = Vec::with_capacity(items.len());
    // Every entry is read, so each bad one is reported in the same pass.
    for (i, item) in items.iter().enumerate() {
        match item {
            Value::String(s) if !s.trim().is_empty() => ids.push(Some(s.trim().to_owned())),
            Value::Number(n) => ids.push(Some(n.to_string())),
            _ => issues.error(
                key,
                format!("entry {i} is not an id (a string or a number)"),
            ),
        }
    }
    if ids.len() < items.len() {
        return AllowedUsers::Only(Default::default());
    }
    AllowedUsers::from_entries(Some(ids))
}

/// The hosts an adapter may fetch files from (`file_hosts`): a list of host patterns (see
/// [`FileHosts`]), or one as a string. Absent = `defaults` (the platform's own file hosts).
/// Each bad entry is an error at the key; an empty list is allowed (no file is fetched)
/// with a warning saying so.
pub fn file_hosts(
    issues: &mut Issues,
    key: &str,
    value: Option<&Value>,
    defaults: &[&str],
) -> FileHosts {
    let items: Vec<&Value> = match value {
        None | Some(Value::Null) => return FileHosts::new(defaults).unwrap_or_default(),
        Some(Value::Array(items)) => items.iter().collect(),
        Some(other) => vec![other],
    };
    let mut texts = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let checked = match item {
            Value::String(text) => FileHosts::new([text]).map(|_| text.as_str()),
            _ => Err(crate::FileHostError::Invalid),
        };
        match checked {
            Ok(text) => texts.push(text),
            Err(error) => issues.error(key, format!("entry {i}: {error}")),
        }
    }
    match FileHosts::new(&texts) {
        Ok(hosts) => {
            if hosts.is_empty() && items.is_empty() {
                issues.warn(key, "no host listed, so no attachment is fetched");
            }
            hosts
        }
        Err(error) => {
            issues.error(key, error.to_string());
            FileHosts::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;
    use serde_json::json;

    #[derive(Debug, Default, Deserialize)]
    struct Raw {
        token: Option<Secret>,
        nested: Option<Nested>,
    }

    #[derive(Debug, Default, Deserialize)]
    struct Nested {
        listen: Option<String>,
    }

    fn paths(issues: &Issues) -> Vec<(&str, Severity)> {
        issues
            .iter()
            .map(|i| (i.path.as_str(), i.severity))
            .collect()
    }

    #[test]
    fn unknown_keys_warn_and_wrong_types_fail_at_their_full_path() {
        let mut issues = Issues::new("channels.demo");
        let raw: Raw = parse_block(
            json!({"token": "t", "surprise": 1, "nested": {"listen": "x", "extra": true}}),
            &mut issues,
        )
        .unwrap();
        assert_eq!(raw.nested.unwrap().listen.as_deref(), Some("x"));
        assert_eq!(
            paths(&issues),
            [
                ("channels.demo.nested.extra", Severity::Warning),
                ("channels.demo.surprise", Severity::Warning)
            ]
        );
        let mut issues = Issues::new("channels.demo");
        assert!(parse_block::<Raw>(json!({"nested": {"listen": [1]}}), &mut issues).is_none());
        assert_eq!(
            paths(&issues),
            [("channels.demo.nested.listen", Severity::Error)]
        );
        let mut issues = Issues::new("channels.demo");
        let raw: Raw = parse_block(Value::Null, &mut issues).unwrap();
        assert!(raw.token.is_none() && issues.iter().next().is_none());
        assert!(parse_block::<Raw>(json!("a string"), &mut issues).is_none());
        assert_eq!(paths(&issues), [("channels.demo", Severity::Error)]);
    }

    #[test]
    fn value_helpers_check_and_fall_back() {
        let mut issues = Issues::new("c");
        let d = Duration::from_secs(3);
        assert_eq!(seconds(&mut issues, "t", None, d, 0.0..=10.0), d);
        assert_eq!(
            seconds(&mut issues, "t", Some(0.5), d, 0.0..=10.0),
            Duration::from_millis(500)
        );
        assert_eq!(seconds(&mut issues, "t", Some(f64::NAN), d, 0.0..=10.0), d);
        assert_eq!(seconds(&mut issues, "t", Some(11.0), d, 0.0..=10.0), d);
        assert_eq!(integer(&mut issues, "n", Some(0), 30, 1..=300), 30);
        assert_eq!(integer(&mut issues, "n", Some(7), 30, 1..=300), 7);
        assert_eq!(
            base_url(
                &mut issues,
                "u",
                Some(" http://127.0.0.1:9/api/ "),
                "https://x"
            ),
            "http://127.0.0.1:9/api"
        );
        assert_eq!(
            base_url(&mut issues, "u", Some(""), "https://x/"),
            "https://x"
        );
        assert_eq!(
            base_url(&mut issues, "u", Some("ftp://h"), "https://x"),
            "https://x"
        );
        assert_eq!(
            base_url(&mut issues, "u", Some("https://h/?q=1"), "https://x"),
            "https://x"
        );
        // What an error repeats of a URL holds no credential.
        base_url(
            &mut issues,
            "v",
            Some("https://me:pw@h/?token=t0k"),
            "https://x",
        );
        let said: Vec<String> = issues.iter().map(ToString::to_string).collect();
        let said = said.join("\n");
        assert!(
            said.contains(r#"got "https://h" (its user, password, query or fragment not shown)"#),
            "{said}"
        );
        assert!(!said.contains("pw") && !said.contains("t0k"), "{said}");
        assert_eq!(shown_url("ftp://h/x"), r#""ftp://h/x""#);
        assert_eq!(shown_url("api.example.com"), r#""api.example.com""#);
        assert_eq!(
            root_url(
                &mut issues,
                "r",
                Some("https://h/api"),
                "https://x",
                "adds /api"
            ),
            "https://h/api"
        );
        assert_eq!(
            root_url(
                &mut issues,
                "r",
                Some("http://127.0.0.1:9/"),
                "https://x",
                "-"
            ),
            "http://127.0.0.1:9"
        );
        assert_eq!(
            choice(&mut issues, "m", None, &["polling", "webhook"]),
            "polling"
        );
        assert_eq!(
            choice(&mut issues, "m", Some("Webhook"), &["polling", "webhook"]),
            "webhook"
        );
        assert_eq!(
            choice(&mut issues, "m", Some("pigeon"), &["polling", "webhook"]),
            "polling"
        );
        assert_eq!(
            socket_addr(&mut issues, "l", Some("127.0.0.1:1"), "req"),
            Some(([127, 0, 0, 1], 1).into())
        );
        assert_eq!(socket_addr(&mut issues, "l", Some("nowhere"), "req"), None);
        assert_eq!(socket_addr(&mut issues, "l", None, "required here"), None);
        let errors: Vec<&str> = issues.iter().map(|i| i.path.as_str()).collect();
        assert_eq!(
            errors,
            [
                "c.t", "c.t", "c.n", "c.u", "c.u", "c.v", "c.r", "c.m", "c.l", "c.l"
            ]
        );
        assert!(issues.has_error_at("c.l") && !issues.has_error_at("c.x"));
    }

    #[test]
    fn secrets_are_required_and_never_echoed() {
        let mut issues = Issues::new("c");
        let given = Secret::new("s3cr3t-value");
        assert_eq!(
            required_secret(&mut issues, "k", Some(&given), "hint").unwrap(),
            given
        );
        assert!(
            required_secret(&mut issues, "k", Some(&Secret::new(" ")), "write k: $K").is_none()
        );
        assert!(required_secret(&mut issues, "k", None, "write k: $K").is_none());
        let text = format!("{issues:?}");
        assert!(!text.contains("s3cr3t"), "{text}");
        assert_eq!(
            issues.iter().filter(|i| i.message == "write k: $K").count(),
            2
        );
    }

    #[test]
    fn id_lists_fail_closed() {
        let mut issues = Issues::new("c");
        assert_eq!(id_list(&mut issues, "ids", None), AllowedUsers::Anyone);
        assert_eq!(
            id_list(&mut issues, "ids", Some(&json!([]))),
            AllowedUsers::Anyone
        );
        assert_eq!(
            id_list(&mut issues, "ids", Some(&json!(""))),
            AllowedUsers::Anyone
        );
        let some = id_list(&mut issues, "ids", Some(&json!([42, "u2"])));
        assert!(some.allows("42") && some.allows("u2") && !some.allows("u3"));
        assert!(issues.iter().next().is_none());
        // A bad entry is an error, and the list allows nobody.
        let nobody = id_list(&mut issues, "ids", Some(&json!([42, {"x": 1}])));
        assert!(!nobody.allows("42"));
        assert_eq!(paths(&issues), [("c.ids", Severity::Error)]);
    }

    #[test]
    fn issue_27_an_id_list_that_is_not_a_list_is_an_error() {
        for value in [json!("abc"), json!(42), json!({"a": 1}), json!(true)] {
            let mut issues = Issues::new("channels.telegram");
            let allowed = id_list(&mut issues, "allowed_users", Some(&value));
            assert!(!allowed.allows("abc") && !allowed.allows("42"), "{value}");
            assert_eq!(
                paths(&issues),
                [("channels.telegram.allowed_users", Severity::Error)],
                "{value}"
            );
        }
    }

    #[test]
    fn file_hosts_default_list_and_report_bad_entries_at_the_key() {
        let mut issues = Issues::new("channels.demo");
        let hosts = file_hosts(&mut issues, "file_hosts", None, &["cdn.example.com"]);
        assert_eq!(hosts.patterns().collect::<Vec<_>>(), ["cdn.example.com"]);
        let listed = json!(["*.Example.org", "127.0.0.1:8080"]);
        let hosts = file_hosts(&mut issues, "file_hosts", Some(&listed), &["x.com"]);
        assert_eq!(
            hosts.patterns().collect::<Vec<_>>(),
            [".example.org", "127.0.0.1:8080"]
        );
        let one = json!("cdn.example.net");
        let hosts = file_hosts(&mut issues, "file_hosts", Some(&one), &[]);
        assert_eq!(hosts.patterns().collect::<Vec<_>>(), ["cdn.example.net"]);
        assert!(paths(&issues).is_empty());
        let bad = json!(["", "https://x.com/", 7, "ok.com"]);
        let hosts = file_hosts(&mut issues, "file_hosts", Some(&bad), &[]);
        assert_eq!(hosts.patterns().collect::<Vec<_>>(), ["ok.com"]);
        assert_eq!(
            paths(&issues),
            [("channels.demo.file_hosts", Severity::Error); 3]
        );
        let mut issues = Issues::new("channels.demo");
        let hosts = file_hosts(&mut issues, "file_hosts", Some(&json!([])), &["x.com"]);
        assert!(hosts.is_empty());
        assert_eq!(
            paths(&issues),
            [("channels.demo.file_hosts", Severity::Warning)]
        );
    }
}
