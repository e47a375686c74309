//! The `channels.telegram` block: raw keys as an operator writes them, and the resolved
//! settings the adapter runs with.
//!
//! The daemon reads the keys every channel shares (`enabled`, `allowed_users`,
//! `admin_users`, `session`, `locale`); everything else in the block is handed to
//! [`validate`], which uses the core's config toolkit: an unknown key is a warning, not an
//! error, because operators share this file with DeerFlow (STYLE habit 6). Validation is
//! pure: it opens no socket, so `check-config` can run it anywhere, and it never echoes a
//! secret.

use std::net::SocketAddr;
use std::time::Duration;

use im_bridge_channel::Secret;
use im_bridge_channel::config::{self, Issues};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The hosted Bot API.
pub const DEFAULT_API_URL: &str = "https://api.telegram.org";
/// How long one `getUpdates` long poll is held open by Telegram when nothing happens.
pub const DEFAULT_POLL_TIMEOUT: Duration = Duration::from_secs(30);
/// Longest accepted `poll_timeout_seconds`; a poll is also bounded on our side by this
/// plus a margin, so a silently dead connection is noticed within that time.
const MAX_POLL_TIMEOUT_SECONDS: i64 = 300;
/// Telegram's limit on `secret_token`.
const MAX_SECRET_TOKEN_LEN: usize = 256;

/// The adapter's keys of `channels.telegram`, as written (types kept permissive so
/// [`RawTelegramConfig::validate`] can say what was expected).
#[derive(Debug, Default, Deserialize)]
pub struct RawTelegramConfig {
    /// The bot token from @BotFather (`123456:ABC-…`), usually `$TELEGRAM_BOT_TOKEN`.
    /// Required.
    pub bot_token: Option<Secret>,
    /// Base URL of the Bot API: the hosted one by default, or a local Bot API server
    /// (`telegram-bot-api --local`) or, in tests, a fake. Default `https://api.telegram.org`.
    pub api_url: Option<String>,
    /// How updates arrive: `polling` (default; no public endpoint needed) or `webhook`.
    pub mode: Option<String>,
    /// Webhook settings; read only when `mode: webhook`.
    pub webhook: Option<RawWebhook>,
    /// DeerFlow's Bot API 10.1 rich messages. Accepted for compatibility and ignored for
    /// now: replies use Telegram's HTML formatting.
    pub rich_messages: Option<bool>,
    /// Long-poll timeout of `getUpdates`, in whole seconds, 1 to 300. Default 30.
    pub poll_timeout_seconds: Option<i64>,
}

/// `channels.telegram.webhook`.
#[derive(Debug, Default, Deserialize)]
pub struct RawWebhook {
    /// Local address the webhook server binds, e.g. `0.0.0.0:8443`. Required.
    pub listen: Option<String>,
    /// The public HTTPS URL Telegram posts to (your reverse proxy), e.g.
    /// `https://bot.example.com/telegram/hook`; its path is the path served locally.
    /// Required.
    pub public_url: Option<String>,
    /// Sent by Telegram in `X-Telegram-Bot-Api-Secret-Token` on every delivery; requests
    /// without it are refused. 1 to 256 characters of `A-Z a-z 0-9 _ -`. Required.
    pub secret_token: Option<Secret>,
}

/// What the Telegram adapter runs with.
#[derive(Clone, Debug, Serialize)]
pub struct TelegramSettings {
    /// The bot token. Only the API client puts it on the wire.
    pub bot_token: Secret,
    /// Bot API base URL without a trailing slash.
    pub api_url: String,
    /// How updates arrive.
    pub transport: Transport,
    /// Accepted and ignored for now (replies use Telegram's HTML formatting).
    pub rich_messages: bool,
}

impl TelegramSettings {
    /// Long polling against the hosted Bot API with the default timeout.
    pub fn new(bot_token: Secret) -> Self {
        Self {
            bot_token,
            api_url: DEFAULT_API_URL.to_owned(),
            transport: Transport::Polling {
                timeout: DEFAULT_POLL_TIMEOUT,
            },
            rich_messages: false,
        }
    }

    /// The same settings against another Bot API base URL (a local server, a fake).
    pub fn with_api_url(mut self, api_url: impl Into<String>) -> Self {
        self.api_url = api_url.into().trim_end_matches('/').to_owned();
        self
    }
}

/// How updates arrive.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "snake_case", tag = "mode")]
pub enum Transport {
    /// `deleteWebhook`, then `getUpdates` long polls.
    Polling {
        /// Long-poll timeout of each `getUpdates`.
        #[serde(serialize_with = "secs")]
        timeout: Duration,
    },
    /// An HTTP server Telegram posts updates to.
    Webhook(WebhookSettings),
}

/// Resolved webhook settings.
#[derive(Clone, Debug, Serialize)]
pub struct WebhookSettings {
    /// Local address to bind.
    pub listen: SocketAddr,
    /// The URL given to `setWebhook`.
    pub public_url: String,
    /// The path served locally (the path of `public_url`, `/` when it has none).
    pub path: String,
    /// Expected in `X-Telegram-Bot-Api-Secret-Token`.
    pub secret_token: Secret,
}

fn secs<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64())
}

/// Reads and validates the adapter's keys of `channels.telegram` (the daemon removed the
/// keys every channel shares). Unknown keys become warnings; every problem is recorded in
/// `issues` at its full key path; `None` when there are errors.
pub fn validate(block: Value, issues: &mut Issues) -> Option<TelegramSettings> {
    let raw: RawTelegramConfig = config::parse_block(block, issues)?;
    raw.validate(issues)
}

impl RawTelegramConfig {
    /// Resolves the raw keys, recording every problem. Pure.
    pub fn validate(&self, issues: &mut Issues) -> Option<TelegramSettings> {
        let errors_before = issues.error_count();
        let bot_token = config::required_secret(
            issues,
            "bot_token",
            self.bot_token.as_ref(),
            "required: the bot token from @BotFather, e.g. bot_token: $TELEGRAM_BOT_TOKEN",
        );
        if bot_token
            .as_ref()
            .is_some_and(|token| !looks_like_bot_token(token.expose()))
        {
            // Never echo the value: it may be a real token with a typo.
            issues.error(
                "bot_token",
                "does not look like a bot token (expected <digits>:<secret> as @BotFather gives it)",
            );
        }
        let api_url = config::base_url(issues, "api_url", self.api_url.as_deref(), DEFAULT_API_URL);
        if self.rich_messages == Some(true) {
            issues.warn(
                "rich_messages",
                "Bot API rich messages (sendRichMessage) are not supported by im-bridge yet; replies use Telegram HTML formatting",
            );
        }
        let transport = match config::choice(
            issues,
            "mode",
            self.mode.as_deref(),
            &["polling", "webhook"],
        ) {
            "webhook" => {
                if self.poll_timeout_seconds.is_some() {
                    issues.warn("poll_timeout_seconds", "ignored because mode is webhook");
                }
                let raw = RawWebhook::default();
                let hook = self.webhook.as_ref().unwrap_or(&raw);
                validate_webhook(hook, &api_url, issues).map(Transport::Webhook)
            }
            _ => {
                if self.webhook.is_some() {
                    issues.warn(
                        "webhook",
                        "ignored because mode is polling (set mode: webhook to use it)",
                    );
                }
                let seconds = config::integer(
                    issues,
                    "poll_timeout_seconds",
                    self.poll_timeout_seconds,
                    DEFAULT_POLL_TIMEOUT.as_secs() as i64,
                    1..=MAX_POLL_TIMEOUT_SECONDS,
                );
                Some(Transport::Polling {
                    timeout: Duration::from_secs(seconds.unsigned_abs()),
                })
            }
        };
        if issues.error_count() > errors_before {
            return None;
        }
        Some(TelegramSettings {
            bot_token: bot_token?,
            api_url,
            transport: transport?,
            rich_messages: self.rich_messages.unwrap_or(false),
        })
    }
}

fn validate_webhook(
    hook: &RawWebhook,
    api_url: &str,
    issues: &mut Issues,
) -> Option<WebhookSettings> {
    let listen = config::socket_addr(
        issues,
        "webhook.listen",
        hook.listen.as_deref(),
        "required with mode: webhook: the local address to bind, e.g. 0.0.0.0:8443",
    );
    let public = match hook.public_url.as_deref().map(str::trim) {
        None | Some("") => {
            issues.error(
                "webhook.public_url",
                "required with mode: webhook: the public https:// URL Telegram posts to",
            );
            None
        }
        Some(text) => match config::http_url(text).and_then(|u| reqwest::Url::parse(&u).ok()) {
            Some(url) => {
                if url.scheme() == "http" && api_url == DEFAULT_API_URL {
                    issues.warn(
                        "webhook.public_url",
                        "the hosted Bot API only delivers to https:// URLs",
                    );
                }
                Some((text.to_owned(), url.path().to_owned()))
            }
            None => {
                issues.error(
                    "webhook.public_url",
                    format!(
                        "expected an https:// URL without query, got {}",
                        config::shown_url(text)
                    ),
                );
                None
            }
        },
    };
    let secret_token = match &hook.secret_token {
        None => {
            issues.error(
                "webhook.secret_token",
                "required with mode: webhook: 1 to 256 characters of A-Z, a-z, 0-9, _ and -",
            );
            None
        }
        Some(secret) if !is_valid_secret_token(secret.expose()) => {
            issues.error(
                "webhook.secret_token",
                "expected 1 to 256 characters of A-Z, a-z, 0-9, _ and -",
            );
            None
        }
        Some(secret) => Some(secret.clone()),
    };
    let ((public_url, path), listen, secret_token) = (public?, listen?, secret_token?);
    Some(WebhookSettings {
        listen,
        public_url,
        path: if path.is_empty() { "/".into() } else { path },
        secret_token,
    })
}

/// `<digits>:<secret>` with a URL-safe secret.
fn looks_like_bot_token(token: &str) -> bool {
    let Some((id, secret)) = token.split_once(':') else {
        return false;
    };
    !id.is_empty()
        && id.bytes().all(|b| b.is_ascii_digit())
        && !secret.is_empty()
        && secret
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

fn is_valid_secret_token(token: &str) -> bool {
    im_bridge_channel::http::is_plain_id(token, MAX_SECRET_TOKEN_LEN)
}

#[cfg(test)]
mod tests {
    use super::*;
    use im_bridge_channel::ConfigIssue;

    const TOKEN: &str = "123456:AAH-secret_value";

    #[derive(Debug)]
    struct Loaded {
        settings: TelegramSettings,
        warnings: Vec<ConfigIssue>,
    }

    fn load(yaml: &str) -> Result<Loaded, Vec<ConfigIssue>> {
        let value: Value = serde_yaml_ng::from_str(yaml).unwrap();
        let mut issues = Issues::new("channels.telegram");
        match validate(value, &mut issues) {
            Some(settings) => Ok(Loaded {
                settings,
                warnings: issues.into_vec(),
            }),
            None => Err(issues
                .into_vec()
                .into_iter()
                .filter(ConfigIssue::is_error)
                .collect()),
        }
    }

    fn paths(issues: &[ConfigIssue]) -> Vec<&str> {
        issues.iter().map(|i| i.path.as_str()).collect()
    }

    #[test]
    fn minimal_block_polls_the_hosted_api() {
        let loaded = load(&format!("bot_token: \"{TOKEN}\"\nrich_messages: false\n")).unwrap();
        assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
        let s = loaded.settings;
        assert_eq!(s.bot_token.expose(), TOKEN);
        assert_eq!(s.api_url, DEFAULT_API_URL);
        assert!(
            matches!(s.transport, Transport::Polling { timeout } if timeout == DEFAULT_POLL_TIMEOUT)
        );
    }

    #[test]
    fn unknown_keys_warn_with_their_full_path() {
        let loaded = load(&format!(
            "bot_token: \"{TOKEN}\"\nsurprise: 1\nmode: webhook\nwebhook: {{listen: \"127.0.0.1:8443\", public_url: \"https://x.example/hook\", secret_token: abc, extra: 2}}\n"
        ))
        .unwrap();
        assert_eq!(
            paths(&loaded.warnings),
            [
                "channels.telegram.surprise",
                "channels.telegram.webhook.extra"
            ]
        );
    }

    #[test]
    fn missing_and_malformed_values_are_errors_at_their_key() {
        let errors =
            load("api_url: ftp://x\nmode: carrier-pigeon\npoll_timeout_seconds: 0\n").unwrap_err();
        assert_eq!(
            paths(&errors),
            [
                "channels.telegram.bot_token",
                "channels.telegram.api_url",
                "channels.telegram.mode",
                "channels.telegram.poll_timeout_seconds"
            ]
        );
        let errors = load(&format!(
            "bot_token: \"{TOKEN}\"\npoll_timeout_seconds: 0\n"
        ))
        .unwrap_err();
        assert_eq!(paths(&errors), ["channels.telegram.poll_timeout_seconds"]);
        let errors = load("bot_token: [1]\n").unwrap_err();
        assert_eq!(paths(&errors), ["channels.telegram.bot_token"]);
        let errors =
            load(&format!("bot_token: \"{TOKEN}\"\nwebhook: {{listen: 3}}\n")).unwrap_err();
        assert_eq!(paths(&errors), ["channels.telegram.webhook.listen"]);
    }

    #[test]
    fn webhook_mode_requires_every_key() {
        let errors = load(&format!("bot_token: \"{TOKEN}\"\nmode: webhook\n")).unwrap_err();
        assert_eq!(
            paths(&errors),
            [
                "channels.telegram.webhook.listen",
                "channels.telegram.webhook.public_url",
                "channels.telegram.webhook.secret_token"
            ]
        );
        let errors = load(&format!(
            "bot_token: \"{TOKEN}\"\nmode: webhook\nwebhook: {{listen: nowhere, public_url: \"https://x.example/h?q=1\", secret_token: \"has space\"}}\n"
        ))
        .unwrap_err();
        assert_eq!(errors.len(), 3, "{errors:?}");
    }

    #[test]
    fn webhook_path_comes_from_the_public_url() {
        let loaded = load(&format!(
            "bot_token: \"{TOKEN}\"\napi_url: \"http://127.0.0.1:8081/\"\nmode: webhook\nwebhook: {{listen: \"127.0.0.1:8443\", public_url: \"http://bot.example/tg/hook\", secret_token: s3cr3t_-X}}\n"
        ))
        .unwrap();
        assert_eq!(loaded.settings.api_url, "http://127.0.0.1:8081");
        let Transport::Webhook(hook) = &loaded.settings.transport else {
            panic!("{:?}", loaded.settings.transport)
        };
        assert_eq!(hook.path, "/tg/hook");
        assert_eq!(hook.secret_token.expose(), "s3cr3t_-X");
        // http is fine for a local Bot API server; only the hosted one needs https.
        assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
    }

    #[test]
    fn rich_messages_are_accepted_with_a_warning() {
        let loaded = load(&format!("bot_token: \"{TOKEN}\"\nrich_messages: true\n")).unwrap();
        assert_eq!(paths(&loaded.warnings), ["channels.telegram.rich_messages"]);
        assert!(loaded.settings.rich_messages);
    }

    #[test]
    fn secrets_never_print() {
        let bad = load("bot_token: \"not a token but secret-ish 987\"\n").unwrap_err();
        let text = format!("{bad:?} {}", bad[0]);
        assert!(!text.contains("secret-ish"), "{text}");
        let loaded = load(&format!(
            "bot_token: \"{TOKEN}\"\nmode: webhook\nwebhook: {{listen: \"127.0.0.1:1\", public_url: \"https://x.example/\", secret_token: HOOKSECRET}}\n"
        ))
        .unwrap();
        let printed = format!(
            "{:?} {}",
            loaded.settings,
            serde_json::to_string(&loaded.settings).unwrap()
        );
        assert!(!printed.contains("AAH-secret"), "{printed}");
        assert!(!printed.contains("HOOKSECRET"), "{printed}");
    }
}
