//! The keys every platform that can receive its events over a webhook shares: `mode`
//! (the long connection, the default, or `webhook`) and the `webhook` block (`listen`,
//! `path`), checked the same way for each (issue 29). A platform keeps its own webhook
//! settings (tokens, keys) and builds them around the [`WebhookPlace`] read here.

use std::net::SocketAddr;

use serde::{Deserialize, Serialize};

use super::{Issues, choice, socket_addr};

/// `channels.<platform>.webhook`, as written.
#[derive(Debug, Default, Deserialize)]
pub struct RawWebhook {
    /// Local address to bind, e.g. `0.0.0.0:8443`. Required with `mode: webhook`.
    pub listen: Option<String>,
    /// The path the callback is served on; each platform has its default.
    pub path: Option<String>,
}

/// Where a platform's event callback is served.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct WebhookPlace {
    /// Local address to bind.
    pub listen: SocketAddr,
    /// The path served.
    pub path: String,
}

/// How a platform's events arrive, per `mode`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventMode {
    /// The platform's long connection (`websocket`, the default, or one of the platform's
    /// own names for it).
    Connection,
    /// A callback this daemon serves (`webhook`).
    Webhook,
}

/// Reads `mode`: `websocket` (the default), `webhook`, or one of `aliases` (other names the
/// platform uses for its long connection, e.g. QQ's `gateway`). A `webhook` block given
/// while the mode is not `webhook` is a warning: it would be ignored.
pub fn event_mode(
    issues: &mut Issues,
    mode: Option<&str>,
    aliases: &[&'static str],
    webhook: Option<&RawWebhook>,
) -> EventMode {
    let mut options = vec!["websocket", "webhook"];
    options.extend_from_slice(aliases);
    match choice(issues, "mode", mode, &options) {
        "webhook" => EventMode::Webhook,
        _ => {
            if webhook.is_some() {
                issues.warn(
                    "webhook",
                    "ignored because mode is websocket (set mode: webhook to use it)",
                );
            }
            EventMode::Connection
        }
    }
}

/// Reads the `webhook` block for `mode: webhook`: `listen` is required (`example` shows
/// one, e.g. `0.0.0.0:8443`), `path` defaults to `default_path` and must start with `/`
/// and carry no query or fragment.
pub fn webhook_place(
    issues: &mut Issues,
    webhook: Option<&RawWebhook>,
    default_path: &str,
    example: &str,
) -> Option<WebhookPlace> {
    let raw = RawWebhook::default();
    let hook = webhook.unwrap_or(&raw);
    let listen = socket_addr(
        issues,
        "webhook.listen",
        hook.listen.as_deref(),
        &format!("required with mode: webhook: the local address to bind, e.g. {example}"),
    );
    let path = match hook.path.as_deref().map(str::trim) {
        None | Some("") => default_path.to_owned(),
        Some(p) if p.starts_with('/') && !p.contains(['?', '#']) => p.to_owned(),
        Some(p) => {
            issues.error(
                "webhook.path",
                format!("expected a path starting with /, got {p:?}"),
            );
            return None;
        }
    };
    Some(WebhookPlace {
        listen: listen?,
        path,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn messages(issues: Issues) -> Vec<String> {
        issues
            .iter()
            .map(|i| format!("{} {}", i.path, i.message))
            .collect()
    }

    #[test]
    fn the_mode_defaults_to_the_connection_and_knows_aliases() {
        let mut issues = Issues::new("channels.x");
        assert_eq!(
            event_mode(&mut issues, None, &[], None),
            EventMode::Connection
        );
        assert_eq!(
            event_mode(&mut issues, Some("gateway"), &["gateway"], None),
            EventMode::Connection
        );
        assert_eq!(
            event_mode(&mut issues, Some("webhook"), &[], None),
            EventMode::Webhook
        );
        assert!(issues.iter().next().is_none());
        let block = RawWebhook::default();
        assert_eq!(
            event_mode(&mut issues, Some("gateway"), &[], Some(&block)),
            EventMode::Connection
        );
        let said = messages(issues);
        assert_eq!(said.len(), 2, "{said:?}");
        assert!(said[0].starts_with("channels.x.mode "), "{said:?}");
        assert!(
            said[1].starts_with("channels.x.webhook ignored"),
            "{said:?}"
        );
    }

    #[test]
    fn a_place_needs_an_address_and_a_clean_path() {
        let mut issues = Issues::new("channels.x");
        let block = RawWebhook {
            listen: Some("127.0.0.1:8443".into()),
            path: None,
        };
        let place = webhook_place(&mut issues, Some(&block), "/x/events", "0.0.0.0:8443");
        assert_eq!(
            place,
            Some(WebhookPlace {
                listen: "127.0.0.1:8443".parse().unwrap(),
                path: "/x/events".into()
            })
        );
        assert!(webhook_place(&mut issues, None, "/x", "0.0.0.0:8080").is_none());
        let bad = RawWebhook {
            listen: Some("127.0.0.1:1".into()),
            path: Some("events?x=1".into()),
        };
        assert!(webhook_place(&mut issues, Some(&bad), "/x", "0.0.0.0:8080").is_none());
        let said = messages(issues);
        assert_eq!(said.len(), 2, "{said:?}");
        assert!(said[0].contains("webhook.listen required") && said[0].contains("0.0.0.0:8080"));
        assert!(said[1].contains("webhook.path expected a path"), "{said:?}");
    }
}
