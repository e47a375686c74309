//! Answers to a slash command typed where the bot is not a member (a direct message
//! between two people, a channel it was never added to): `chat.postMessage` is refused
//! there (`channel_not_found`, `not_in_channel`), so the command's `response_url` carries
//! the answer instead, for the conversation to see (`in_channel`). Slack takes at most
//! [`RESPONSES_PER_COMMAND`] posts within [`RESPONSE_URL_LIFETIME`] of the command.
//!
//! - **Kept in memory only.** The URL is signed: it is held as a `Secret` (never logged,
//!   never journaled) by the command's `trigger_id`, which the message's metadata carries
//!   (`trigger_id`); a restart forgets it, and a recovered command's answer is then refused
//!   as before. Only `https://hooks.slack.com/` URLs are kept (or ones on the configured
//!   `api_url`'s host, where a test fake serves them). At most [`MAX_KEPT`] at once.
//! - **Posts spent on what reads.** Each post is one of the five, so an answer is not shown
//!   while it is written: its first partial (or the "queued" notice it replaces) opens a
//!   message that exists only here ([`message_id`]), its edits are passed over, and its
//!   final goes out as one post. An answer longer than five messages loses the rest (the
//!   refusal is logged); a post that failed on the way (a timeout, a 5xx) may have landed,
//!   and is made again: shown twice rather than not at all.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use im_bridge_channel::{MessageId, Secret, SendTarget};
use serde_json::Value;
use tokio::time::Instant;

use super::lock;
use crate::api::SlackApi;
use crate::error::ApiError;

/// Posts one `response_url` takes (Slack: "up to 5 times within 30 minutes").
pub const RESPONSES_PER_COMMAND: u8 = 5;
/// How long after the command its `response_url` takes posts.
pub const RESPONSE_URL_LIFETIME: Duration = Duration::from_secs(30 * 60);
/// The most commands whose URLs are kept at once (the oldest goes first).
pub const MAX_KEPT: usize = 1024;
/// Where Slack's response URLs are.
const SLACK_HOOKS: &str = "hooks.slack.com";
/// The operation named in errors.
const OP: &str = "response_url";
/// The id of an answer that went, or will go, through a `response_url`.
const PREFIX: &str = "response_url:";

/// Slack's codes for a conversation the bot cannot post in.
const OUTSIDE_CODES: &[&str] = &["channel_not_found", "not_in_channel"];

/// One command's URL.
struct Responder {
    url: Secret,
    until: Instant,
    used: u8,
    /// The bot was refused in the command's conversation: answers go through the URL.
    outside: bool,
}

/// The `response_url`s of recent commands, by `trigger_id`.
#[derive(Default)]
pub(super) struct Responders(Mutex<HashMap<String, Responder>>);

impl Responders {
    /// Keeps `url` for the command `trigger_id` when it is Slack's (or on `api_url`'s
    /// host).
    pub(super) fn remember(&self, trigger_id: &str, url: &str, api_url: &str) {
        if trigger_id.is_empty() || !allowed(url, api_url) {
            return;
        }
        let now = Instant::now();
        let mut kept = lock(&self.0);
        kept.retain(|_, r| r.until > now);
        if kept.len() >= MAX_KEPT
            && let Some(oldest) = kept
                .iter()
                .min_by_key(|(_, r)| r.until)
                .map(|(k, _)| k.clone())
        {
            kept.remove(&oldest);
        }
        kept.insert(
            trigger_id.to_owned(),
            Responder {
                url: Secret::new(url),
                until: now + RESPONSE_URL_LIFETIME,
                used: 0,
                outside: false,
            },
        );
    }

    /// Whether answers to `trigger_id` go through its URL: the bot was refused in its
    /// conversation before.
    pub(super) fn outside(&self, trigger_id: &str) -> bool {
        lock(&self.0).get(trigger_id).is_some_and(|r| r.outside)
    }

    /// After `error`, a refusal of a post to `trigger_id`'s conversation: whether answers
    /// now go through the command's URL (the bot is not in the conversation, and the URL
    /// is kept).
    pub(super) fn refused(&self, trigger_id: &str, error: &ApiError) -> bool {
        if !error
            .code()
            .is_some_and(|code| OUTSIDE_CODES.contains(&code))
        {
            return false;
        }
        let mut kept = lock(&self.0);
        let Some(responder) = kept.get_mut(trigger_id) else {
            return false;
        };
        responder.outside = true;
        true
    }

    /// Posts `text` through `trigger_id`'s URL: refused at once when it is forgotten (a
    /// restart), expired or spent; a refusal of Slack's (a 4xx) spends it.
    pub(super) async fn respond(
        &self,
        api: &SlackApi,
        trigger_id: &str,
        text: &str,
    ) -> Result<(), ApiError> {
        let url = {
            let mut kept = lock(&self.0);
            let refused = |code| ApiError::refusal(OP, 404, Some(code), None);
            let Some(r) = kept.get_mut(trigger_id) else {
                return Err(refused("response_url_forgotten"));
            };
            if r.until <= Instant::now() {
                return Err(refused("response_url_expired"));
            }
            if r.used >= RESPONSES_PER_COMMAND {
                return Err(refused("response_url_spent"));
            }
            r.used += 1;
            r.url.clone()
        };
        let responded = api.respond(&url, text).await;
        if let Err(ApiError::Api { status, .. }) = &responded
            && (400..500).contains(status)
            && let Some(r) = lock(&self.0).get_mut(trigger_id)
        {
            r.used = RESPONSES_PER_COMMAND;
        }
        responded
    }
}

/// The command a reply answers: its `trigger_id`, from the message's metadata.
pub(super) fn command_of<'a>(to: &SendTarget<'a>) -> Option<&'a str> {
    to.metadata
        .get("trigger_id")
        .and_then(Value::as_str)
        .filter(|t| !t.is_empty())
}

/// The id of an answer to `trigger_id` through its URL.
pub(super) fn message_id(trigger_id: &str) -> MessageId {
    MessageId::new(format!("{PREFIX}{trigger_id}"))
}

/// The command whose URL message `id` is, if it is one.
pub(super) fn trigger_of(id: &MessageId) -> Option<&str> {
    id.as_str().strip_prefix(PREFIX)
}

/// Whether `url` may be posted to: Slack's hooks over HTTPS, or the configured API's host
/// where it is not Slack's own (a test fake).
fn allowed(url: &str, api_url: &str) -> bool {
    let Ok(url) = reqwest::Url::parse(url) else {
        return false;
    };
    let slack = url.scheme() == "https" && url.host_str() == Some(SLACK_HOOKS);
    let api = reqwest::Url::parse(api_url).ok();
    let configured = api.is_some_and(|api| {
        !api.host_str()
            .is_some_and(|h| h == "slack.com" || h.ends_with(".slack.com"))
            && api.scheme() == url.scheme()
            && api.host_str() == url.host_str()
            && api.port_or_known_default() == url.port_or_known_default()
    });
    slack || configured
}

#[cfg(test)]
mod tests {
    use super::*;

    const API: &str = "https://slack.com";

    #[test]
    fn only_slacks_hooks_or_the_configured_api_are_kept() {
        assert!(allowed("https://hooks.slack.com/commands/T1/2/x", API));
        assert!(!allowed("http://hooks.slack.com/commands/T1/2/x", API));
        assert!(!allowed(
            "https://hooks.slack.com.evil.example/commands",
            API
        ));
        assert!(!allowed("https://evil.example/commands", API));
        assert!(!allowed("not a url", API));
        assert!(
            !allowed("https://slack.com/api/chat.postMessage", API),
            "not a hook"
        );
        assert!(allowed(
            "http://127.0.0.1:9/commands/T1/2/x",
            "http://127.0.0.1:9"
        ));
        assert!(!allowed(
            "http://127.0.0.1:8/commands/T1/2/x",
            "http://127.0.0.1:9"
        ));
    }

    #[test]
    fn a_refusal_for_a_conversation_outside_sends_answers_through_the_url() {
        let responders = Responders::default();
        responders.remember("t1", "https://hooks.slack.com/commands/T1/2/x", API);
        responders.remember("t2", "https://evil.example/x", API);
        let outside = ApiError::refusal("chat.postMessage", 200, Some("channel_not_found"), None);
        let other = ApiError::refusal("chat.postMessage", 200, Some("is_archived"), None);
        assert!(!responders.refused("t1", &other));
        assert!(!responders.outside("t1"));
        assert!(!responders.refused("t2", &outside), "no URL kept");
        assert!(responders.refused("t1", &outside));
        assert!(responders.outside("t1"));
        let id = message_id("t1");
        assert_eq!(trigger_of(&id), Some("t1"));
        assert_eq!(trigger_of(&MessageId::new("1.2")), None);
    }

    #[test]
    fn the_oldest_url_goes_when_too_many_are_kept() {
        let responders = Responders::default();
        for i in 0..=MAX_KEPT {
            responders.remember(&format!("t{i}"), "https://hooks.slack.com/c", API);
        }
        let kept = lock(&responders.0);
        assert_eq!(kept.len(), MAX_KEPT);
        assert!(kept.contains_key(&format!("t{MAX_KEPT}")));
    }
}
