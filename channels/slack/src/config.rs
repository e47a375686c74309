//! The `channels.slack` block (the adapter's keys: DeerFlow's `bot_token`, `app_token`,
//! `bot_user_id`, `event_delivery`, and ours, `signing_secret`, `api_url`, `mention_only`,
//! `thread_replies`, `max_message_bytes`, `webhook`, `file_hosts`; the shared `enabled`,
//! `allowed_users`, `busy_policy` and `locale` are the daemon's): raw keys as an operator
//! writes them, and the resolved settings the adapter runs with.
//!
//! DeerFlow's block (`bot_token`, `app_token`, `allowed_users`) is accepted unchanged and
//! means what it means there: Socket Mode with both tokens. Every Web API call goes to
//! `{api_url}/api/<method>` and the Socket Mode URL is whatever `apps.connections.open`
//! answers, so tests point `api_url` at a fake; beside the file hosts, only the slash
//! commands' response URLs (`hooks.slack.com`, `channel/respond.rs`) name `slack.com`.
//!
//! Defaults, and why:
//! - `event_delivery: socket` (DeerFlow's only mode); `http` serves the Events API (and
//!   the slash commands, told apart by their form body) on one route of the shared
//!   webhook host, `webhook.path` default [`DEFAULT_WEBHOOK_PATH`];
//! - `mention_only: true`: DeerFlow answers what its documented subscriptions deliver,
//!   `app_mention` in channels and `message.im` in DMs, so a channel message is answered
//!   only when it mentions the bot. `false` answers every channel message the app
//!   receives (with `message.channels` / `message.groups` subscribed);
//! - `thread_replies: true`: a Slack thread is one conversation and answers go into the
//!   thread of the message they answer (a top-level message starts one), as DeerFlow
//!   does. `false`: a top-level message belongs to the channel's one conversation and is
//!   answered in the channel; a message inside a thread still continues that thread;
//! - `max_message_bytes: 3500`: where answers are split, in bytes of UTF-8 as the reader
//!   sees them; Slack refuses an edit over 4,000 bytes, so that is the most accepted. The
//!   key was `max_message_chars` (then in characters, up to 40,000); that name is still
//!   read, with a warning, its value taken as bytes and kept within the range.
//!
//! Validation is pure (no socket) and never echoes a secret; a token with the wrong
//! prefix is refused naming the key and the prefix expected. Unknown keys are warnings,
//! since the file is shared with DeerFlow.

pub use im_bridge_channel::config::RawWebhook;
use im_bridge_channel::config::{self, Issues, WebhookPlace};
use im_bridge_channel::{FileHosts, Secret};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::markup::{DEFAULT_MESSAGE_BYTES, MAX_MESSAGE_BYTES};

/// The Web API base of the real Slack (methods under `/api/`).
pub const API_URL: &str = "https://slack.com";
/// Where Slack serves the files users share: `url_private` and `url_private_download`
/// are on `files.slack.com` (Slack's "File object" reference), which on Enterprise Grid
/// redirects to `files-origin.slack.com` (hermes-agent#114483). Downloading one needs the
/// bot token, so the list is Slack's own file hosts only; a file elsewhere is not fetched.
pub const FILE_HOSTS: &[&str] = &["files.slack.com", "files-origin.slack.com"];
/// The default path of the Events API route (slash commands are posted to it too).
pub const DEFAULT_WEBHOOK_PATH: &str = "/slack/events";
/// How a bot token starts (a Bot User OAuth Token).
pub const BOT_TOKEN_PREFIX: &str = "xoxb-";
/// How an app-level token starts (Socket Mode, scope `connections:write`).
pub const APP_TOKEN_PREFIX: &str = "xapp-";
/// The smallest `max_message_bytes` accepted.
const MIN_MESSAGE_BYTES: i64 = 100;
/// Longest `bot_user_id` accepted (Slack's ids are about eleven characters).
const MAX_ID_LEN: usize = 32;

/// The adapter's keys of `channels.slack`, as written.
#[derive(Debug, Default, Deserialize)]
pub struct RawSlackConfig {
    /// The Bot User OAuth Token (`xoxb-…`), usually `$SLACK_BOT_TOKEN`. Required.
    pub bot_token: Option<Secret>,
    /// The app-level token (`xapp-…`, scope `connections:write`), usually
    /// `$SLACK_APP_TOKEN`. Required in Socket Mode; unused with `event_delivery: http`.
    pub app_token: Option<Secret>,
    /// The bot's own user id (`U…`); default: what `auth.test` answers at start.
    pub bot_user_id: Option<String>,
    /// How events arrive: `socket` (Socket Mode, default) or `http` (the Events API).
    pub event_delivery: Option<String>,
    /// The app's Signing Secret (Basic Information → App Credentials). Required with
    /// `event_delivery: http`: every request is checked against it.
    pub signing_secret: Option<Secret>,
    /// Web API base URL without a path. Default `https://slack.com`.
    pub api_url: Option<String>,
    /// In channels, answer only messages that mention the bot. Default true.
    pub mention_only: Option<bool>,
    /// Answer in the thread of the message answered; a thread is one conversation.
    /// Default true.
    pub thread_replies: Option<bool>,
    /// Where answers are split, in bytes of visible text (100 to 4,000). Default 3,500.
    pub max_message_bytes: Option<i64>,
    /// The former name of `max_message_bytes` (in characters, up to 40,000): read with a
    /// warning, as bytes, kept within `max_message_bytes`'s range.
    pub max_message_chars: Option<i64>,
    /// `event_delivery: http`: where the Events API (and slash command) requests are
    /// served.
    pub webhook: Option<RawWebhook>,
    /// Hosts user files may be fetched from (`files.example.com`, `.example.com` for a
    /// domain and its subdomains, `127.0.0.1:8080`). Default [`FILE_HOSTS`].
    pub file_hosts: Option<Value>,
}

/// What the Slack adapter runs with.
#[derive(Clone, Debug, Serialize)]
pub struct SlackSettings {
    /// The bot token (sent as `Authorization: Bearer …` to the Web API and the file host;
    /// never printed).
    pub bot_token: Secret,
    /// The bot's user id when configured; otherwise `auth.test` tells it.
    pub bot_user_id: Option<String>,
    /// How events arrive.
    pub delivery: Delivery,
    /// Web API base URL, without a trailing slash (methods are `{api_url}/api/<method>`).
    pub api_url: String,
    /// In channels, only messages mentioning the bot are answered.
    pub mention_only: bool,
    /// Answers go into the thread of the message answered.
    pub thread_replies: bool,
    /// Where answers are split, in bytes of visible text.
    pub max_message_bytes: usize,
    /// The hosts user files are fetched from; a URL elsewhere is refused unfetched.
    pub file_hosts: FileHosts,
}

/// How events arrive.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "snake_case", tag = "event_delivery")]
pub enum Delivery {
    /// Socket Mode: a WebSocket opened with the app-level token.
    Socket {
        /// The app-level token (`xapp-…`).
        app_token: Secret,
    },
    /// The Events API: Slack posts signed requests to a route this daemon serves.
    Http {
        /// The Signing Secret the requests are checked against.
        signing_secret: Secret,
        /// Where the route is served.
        webhook: WebhookPlace,
    },
}

impl SlackSettings {
    /// The URL of a Web API method: `{api_url}/api/<method>`.
    pub fn method_url(&self, method: &str) -> String {
        format!("{}/api/{method}", self.api_url)
    }
}

/// Reads and validates the adapter's keys of `channels.slack`.
pub fn validate(block: Value, issues: &mut Issues) -> Option<SlackSettings> {
    let raw: RawSlackConfig = config::parse_block(block, issues)?;
    raw.validate(issues)
}

impl RawSlackConfig {
    /// Resolves the raw keys, recording every problem. Pure.
    pub fn validate(&self, issues: &mut Issues) -> Option<SlackSettings> {
        let errors_before = issues.error_count();
        let bot_token = token(
            issues,
            "bot_token",
            self.bot_token.as_ref(),
            BOT_TOKEN_PREFIX,
            "required: the Bot User OAuth Token (OAuth & Permissions, xoxb-…), e.g. bot_token: $SLACK_BOT_TOKEN",
        );
        let delivery = match config::choice(
            issues,
            "event_delivery",
            self.event_delivery.as_deref(),
            &["socket", "http"],
        ) {
            "http" => self.http(issues),
            _ => self.socket(issues),
        };
        let bot_user_id = self.bot_user_id(issues);
        let api_url = config::root_url(
            issues,
            "api_url",
            self.api_url.as_deref(),
            API_URL,
            "methods are under /api/",
        );
        let max_message_bytes = self.max_message_bytes(issues);
        let file_hosts =
            config::file_hosts(issues, "file_hosts", self.file_hosts.as_ref(), FILE_HOSTS);
        if issues.error_count() > errors_before {
            return None;
        }
        Some(SlackSettings {
            bot_token: bot_token?,
            bot_user_id,
            delivery: delivery?,
            api_url,
            mention_only: self.mention_only.unwrap_or(true),
            thread_replies: self.thread_replies.unwrap_or(true),
            max_message_bytes: usize::try_from(max_message_bytes).ok()?,
            file_hosts,
        })
    }

    /// `max_message_bytes`, or the former `max_message_chars` (warned about) kept within
    /// the range: a configuration written for the old key still starts.
    fn max_message_bytes(&self, issues: &mut Issues) -> i64 {
        let range = MIN_MESSAGE_BYTES..=MAX_MESSAGE_BYTES as i64;
        let default = DEFAULT_MESSAGE_BYTES as i64;
        match (self.max_message_bytes, self.max_message_chars) {
            (Some(_), Some(_)) => {
                issues.warn("max_message_chars", "ignored: max_message_bytes is set");
            }
            (None, Some(chars)) => {
                let bytes = chars.clamp(*range.start(), *range.end());
                issues.warn(
                    "max_message_chars",
                    format!(
                        "renamed max_message_bytes (Slack refuses an edit over 4,000 bytes); \
                         read as max_message_bytes: {bytes}"
                    ),
                );
                return bytes;
            }
            _ => {}
        }
        config::integer(
            issues,
            "max_message_bytes",
            self.max_message_bytes,
            default,
            range,
        )
    }

    /// Socket Mode: the app-level token is required; a `webhook` block would be ignored.
    fn socket(&self, issues: &mut Issues) -> Option<Delivery> {
        if self.webhook.is_some() {
            issues.warn(
                "webhook",
                "ignored because event_delivery is socket (set event_delivery: http to use it)",
            );
        }
        let app_token = token(
            issues,
            "app_token",
            self.app_token.as_ref(),
            APP_TOKEN_PREFIX,
            "required with event_delivery: socket: the app-level token with connections:write (Basic Information → App-Level Tokens, xapp-…), e.g. app_token: $SLACK_APP_TOKEN",
        );
        Some(Delivery::Socket {
            app_token: app_token?,
        })
    }

    /// The Events API: the signing secret and the route's place are required.
    fn http(&self, issues: &mut Issues) -> Option<Delivery> {
        let signing_secret = config::required_secret(
            issues,
            "signing_secret",
            self.signing_secret.as_ref(),
            "required with event_delivery: http: the app's Signing Secret (Basic Information → App Credentials), e.g. signing_secret: $SLACK_SIGNING_SECRET",
        );
        if signing_secret
            .as_ref()
            .is_some_and(|s| !s.expose().bytes().all(|b| b.is_ascii_graphic()))
        {
            issues.error(
                "signing_secret",
                "expected the secret alone: visible ASCII, no spaces",
            );
        }
        let webhook = config::webhook_place(
            issues,
            self.webhook.as_ref(),
            DEFAULT_WEBHOOK_PATH,
            "0.0.0.0:3000",
        );
        Some(Delivery::Http {
            signing_secret: signing_secret?,
            webhook: webhook?,
        })
    }

    /// DeerFlow's optional `bot_user_id` (a leading `@` dropped, as DeerFlow does).
    fn bot_user_id(&self, issues: &mut Issues) -> Option<String> {
        let id = config::optional_text(self.bot_user_id.as_deref())?;
        let id = id.trim_start_matches('@');
        let plausible = !id.is_empty()
            && id.len() <= MAX_ID_LEN
            && id.bytes().all(|b| b.is_ascii_alphanumeric());
        if plausible {
            Some(id.to_owned())
        } else {
            issues.error(
                "bot_user_id",
                "expected the bot's user id, letters and digits such as U0123ABCD",
            );
            None
        }
    }
}

/// A required token that starts with `prefix`: the value alone, visible ASCII. Refusals
/// name the prefix expected, never the value.
fn token(
    issues: &mut Issues,
    key: &str,
    value: Option<&Secret>,
    prefix: &str,
    hint: &str,
) -> Option<Secret> {
    let token = config::required_secret(issues, key, value, hint)?;
    let text = token.expose();
    if !text.bytes().all(|b| b.is_ascii_graphic()) {
        issues.error(
            key,
            "expected the token alone: visible ASCII, no spaces or \"Bearer \" prefix",
        );
        None
    } else if !text.starts_with(prefix) || text.len() == prefix.len() {
        issues.error(key, format!("expected a token starting with {prefix}"));
        None
    } else {
        Some(token)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn check(block: Value) -> (Option<SlackSettings>, Vec<String>) {
        im_bridge_channel::fixtures::validated(validate, "channels.slack", block)
    }

    fn messages(block: Value) -> Vec<String> {
        let mut issues = Issues::new("channels.slack");
        validate(block, &mut issues);
        issues.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn deerflows_block_is_accepted_unchanged() {
        // config.example.yaml's `channels.slack`, values filled in; the daemon takes
        // `enabled` and `allowed_users` out before the adapter sees the block.
        let (s, found) = check(json!({
            "bot_token": "xoxb-1234-5678-abcdef",
            "app_token": "xapp-1-A0123-4567-abcdef",
        }));
        assert!(found.is_empty(), "{found:?}");
        let s = s.unwrap();
        let Delivery::Socket { app_token } = &s.delivery else {
            panic!("{:?}", s.delivery);
        };
        assert_eq!(app_token.expose(), "xapp-1-A0123-4567-abcdef");
        assert_eq!(s.api_url, API_URL);
        assert_eq!(
            s.method_url("chat.postMessage"),
            "https://slack.com/api/chat.postMessage"
        );
        assert!(s.mention_only && s.thread_replies);
        assert_eq!(s.max_message_bytes, DEFAULT_MESSAGE_BYTES);
        assert_eq!(s.bot_user_id, None);
        assert_eq!(s.file_hosts.patterns().collect::<Vec<_>>(), FILE_HOSTS);
        // DeerFlow's other keys: `event_delivery: socket` and `bot_user_id`.
        let (s, found) = check(json!({
            "bot_token": "xoxb-1", "app_token": "xapp-1", "event_delivery": "socket",
            "bot_user_id": "@U0BOT42",
        }));
        assert!(found.is_empty(), "{found:?}");
        assert_eq!(s.unwrap().bot_user_id.as_deref(), Some("U0BOT42"));
    }

    #[test]
    fn http_delivery_needs_the_signing_secret_and_a_place() {
        let (s, found) = check(json!({
            "bot_token": "xoxb-1", "event_delivery": "http", "signing_secret": "8f742231b10e",
            "webhook": {"listen": "127.0.0.1:3000"}, "api_url": "http://127.0.0.1:9/",
            "mention_only": false, "thread_replies": false, "max_message_bytes": 4000,
        }));
        assert!(found.is_empty(), "{found:?}");
        let s = s.unwrap();
        let Delivery::Http { webhook, .. } = &s.delivery else {
            panic!("{:?}", s.delivery);
        };
        assert_eq!(webhook.path, DEFAULT_WEBHOOK_PATH);
        assert_eq!(webhook.listen, "127.0.0.1:3000".parse().unwrap());
        assert_eq!(
            s.method_url("auth.test"),
            "http://127.0.0.1:9/api/auth.test"
        );
        assert!(!s.mention_only && !s.thread_replies);
        assert_eq!(s.max_message_bytes, MAX_MESSAGE_BYTES);
        let (s, found) = check(json!({"bot_token": "xoxb-1", "event_delivery": "http"}));
        assert!(s.is_none());
        assert_eq!(
            found,
            [
                "E channels.slack.signing_secret",
                "E channels.slack.webhook.listen"
            ]
        );
    }

    #[test]
    fn socket_mode_needs_the_app_token_and_warns_of_an_unused_webhook_block() {
        let (s, found) = check(json!({"bot_token": "xoxb-1", "webhook": {"listen": "0.0.0.0:1"}}));
        assert!(s.is_none());
        assert_eq!(
            found,
            ["W channels.slack.webhook", "E channels.slack.app_token"]
        );
    }

    #[test]
    fn a_wrong_token_is_refused_at_its_key_without_its_value() {
        let said = messages(json!({
            "bot_token": "xoxp-SECRETUSERTOKEN", "app_token": "xoxb-SECRETBOT",
        }));
        assert_eq!(
            said,
            [
                "channels.slack.bot_token: expected a token starting with xoxb-",
                "channels.slack.app_token: expected a token starting with xapp-",
            ]
        );
        let said = messages(json!({"bot_token": "Bearer xoxb-SECRET", "app_token": "xapp-"}));
        assert!(said[0].starts_with("channels.slack.bot_token: expected the token alone"));
        assert!(said[1].starts_with("channels.slack.app_token: expected a token starting"));
        assert!(!said.concat().contains("SECRET"), "{said:?}");
        let said = messages(json!({}));
        assert!(
            said[0].starts_with("channels.slack.bot_token: required"),
            "{said:?}"
        );
        assert!(said[0].contains("$SLACK_BOT_TOKEN"), "{said:?}");
        // Settings print no secret either.
        let (s, _) = check(json!({"bot_token": "xoxb-TOPSECRET", "app_token": "xapp-TOPSECRET"}));
        let printed = format!("{s:?} {}", serde_json::to_string(&s).unwrap());
        assert!(!printed.contains("TOPSECRET"), "{printed}");
    }

    #[test]
    fn every_other_problem_is_reported_at_its_key() {
        let (s, found) = check(json!({
            "bot_token": "xoxb-1", "app_token": "xapp-1", "event_delivery": "rtm",
            "api_url": "https://slack.com/api", "max_message_bytes": 4_001,
            "bot_user_id": "<@U1>", "file_hosts": [""], "surprise": 1,
        }));
        assert!(s.is_none());
        assert_eq!(
            found,
            [
                "W channels.slack.surprise",
                "E channels.slack.event_delivery",
                "E channels.slack.bot_user_id",
                "E channels.slack.api_url",
                "E channels.slack.max_message_bytes",
                "E channels.slack.file_hosts",
            ]
        );
    }

    #[test]
    fn the_former_max_message_chars_is_read_as_bytes_within_the_range_with_a_warning() {
        let keys = |extra: Value| {
            let mut block = json!({"bot_token": "xoxb-1", "app_token": "xapp-1"});
            block
                .as_object_mut()
                .unwrap()
                .extend(extra.as_object().unwrap().clone());
            block
        };
        for (chars, bytes) in [(40_000, MAX_MESSAGE_BYTES), (2_000, 2_000), (5, 100)] {
            let (s, found) = check(keys(json!({"max_message_chars": chars})));
            assert_eq!(s.unwrap().max_message_bytes, bytes);
            assert_eq!(found, ["W channels.slack.max_message_chars"]);
        }
        let said = messages(keys(json!({"max_message_chars": 40_000})));
        assert!(said[0].contains("max_message_bytes: 4000"), "{said:?}");
        let both = json!({"max_message_chars": 9, "max_message_bytes": 1_000});
        let (s, found) = check(keys(both));
        assert_eq!(s.unwrap().max_message_bytes, 1_000);
        assert_eq!(found, ["W channels.slack.max_message_chars"]);
    }

    #[test]
    fn file_hosts_can_point_at_a_fake() {
        let (s, found) = check(json!({
            "bot_token": "xoxb-1", "app_token": "xapp-1", "file_hosts": "127.0.0.1:9",
        }));
        assert!(found.is_empty(), "{found:?}");
        assert_eq!(s.unwrap().file_hosts.to_string(), "127.0.0.1:9");
    }
}
