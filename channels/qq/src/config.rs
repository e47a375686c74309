//! The `channels.qq` block (the adapter's keys: `app_id`, `client_secret`, `sandbox`,
//! `api_url`, `token_url`, `mode`, `webhook`, `file_hosts`; the shared `enabled`, `allowed_users` and
//! `locale` are the daemon's): raw keys as an operator writes them, and the resolved
//! settings the adapter runs with.
//!
//! Every URL the adapter calls derives from `api_url` (REST and `GET /gateway`) and
//! `token_url` (the access token), so tests point it at a fake. `sandbox: true` only
//! changes the default `api_url`; an explicit `api_url` wins (with a warning when both are
//! set). Validation is pure (no socket) and never echoes the secret; unknown keys are
//! warnings, since the file is shared with DeerFlow.

pub use im_bridge_channel::config::RawWebhook;
use im_bridge_channel::config::{self, EventMode, Issues, WebhookPlace};
use im_bridge_channel::{FileHosts, Secret};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The REST (and gateway discovery) base of the production bots.
pub const API_URL: &str = "https://api.sgroup.qq.com";
/// The REST base of the sandbox (`sandbox: true`).
pub const SANDBOX_API_URL: &str = "https://sandbox.api.sgroup.qq.com";
/// Where access tokens are asked for.
pub const TOKEN_URL: &str = "https://bots.qq.com";
/// Where QQ serves the attachments of bot messages. The official v2 docs
/// (bot.q.qq.com/wiki/develop/api-v2) give an attachment only a `url`, sometimes without a
/// scheme (nonebot/adapter-qq PR #85 completes it); observed group and C2C URLs are on
/// `multimedia.nt.qq.com.cn` (QQNT's media host) and the older `*.qpic.cn` image CDN
/// (`gchat.qpic.cn`, `c2cpicdw.qpic.cn`, as go-cqhttp/NapCat reports show); `.qq.com`
/// covers Tencent's other media hosts. An attachment elsewhere is not fetched.
pub const FILE_HOSTS: &[&str] = &["multimedia.nt.qq.com.cn", ".qpic.cn", ".qq.com"];
/// The default webhook path.
pub const DEFAULT_WEBHOOK_PATH: &str = "/qq/events";
/// Longest app id accepted (it travels in the `X-Union-Appid` header; real ones are about
/// ten digits).
const MAX_APP_ID_LEN: usize = 64;

/// The adapter's keys of `channels.qq`, as written.
#[derive(Debug, Default, Deserialize)]
pub struct RawQqConfig {
    /// The bot's AppID from the QQ bot console (a number or a string). Required.
    pub app_id: Option<Value>,
    /// The bot's AppSecret, usually `$QQ_CLIENT_SECRET`. Required. It fetches access
    /// tokens and, in webhook mode, seeds the key that verifies QQ's signatures.
    pub client_secret: Option<Secret>,
    /// Use the sandbox REST host (`https://sandbox.api.sgroup.qq.com`). Default false.
    pub sandbox: Option<bool>,
    /// REST and gateway-discovery base URL. Default `https://api.sgroup.qq.com` (or the
    /// sandbox host with `sandbox: true`); a loopback URL points the adapter at a fake.
    pub api_url: Option<String>,
    /// Access-token base URL. Default `https://bots.qq.com`.
    pub token_url: Option<String>,
    /// How events arrive: `websocket` (default; `gateway` is the same) or `webhook`.
    pub mode: Option<String>,
    /// Webhook mode: where QQ's callbacks are served.
    pub webhook: Option<RawWebhook>,
    /// Hosts attachments may be fetched from (`cdn.example.com`, `.example.com` for a domain
    /// and its subdomains, `127.0.0.1:8080`). Default [`FILE_HOSTS`].
    pub file_hosts: Option<Value>,
}

/// What the QQ adapter runs with.
#[derive(Clone, Debug, Serialize)]
pub struct QqSettings {
    /// The bot's AppID, as a string.
    pub app_id: String,
    /// The bot's AppSecret.
    pub client_secret: Secret,
    /// Whether the sandbox was asked for (informational: `api_url` already reflects it).
    pub sandbox: bool,
    /// REST and gateway-discovery base URL, without a trailing slash.
    pub api_url: String,
    /// Access-token base URL, without a trailing slash.
    pub token_url: String,
    /// How events arrive.
    pub transport: Transport,
    /// The hosts attachments are fetched from; a URL elsewhere is refused unfetched.
    pub file_hosts: FileHosts,
}

/// How events arrive.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "snake_case", tag = "mode")]
pub enum Transport {
    /// The op-code WebSocket gateway the adapter connects to.
    Websocket,
    /// QQ posts signed events to a callback this daemon serves.
    Webhook(WebhookSettings),
}

/// Resolved webhook settings: where QQ's callbacks are served.
pub type WebhookSettings = WebhookPlace;

/// Reads and validates the adapter's keys of `channels.qq`.
pub fn validate(block: Value, issues: &mut Issues) -> Option<QqSettings> {
    let raw: RawQqConfig = config::parse_block(block, issues)?;
    raw.validate(issues)
}

impl RawQqConfig {
    /// Resolves the raw keys, recording every problem. Pure.
    pub fn validate(&self, issues: &mut Issues) -> Option<QqSettings> {
        let errors_before = issues.error_count();
        let app_id = self.app_id(issues);
        let client_secret = config::required_secret(
            issues,
            "client_secret",
            self.client_secret.as_ref(),
            "required: the bot's AppSecret from the QQ bot console, e.g. client_secret: $QQ_CLIENT_SECRET",
        );
        let sandbox = self.sandbox.unwrap_or(false);
        let explicit_api = self
            .api_url
            .as_deref()
            .is_some_and(|u| !u.trim().is_empty());
        if sandbox && explicit_api {
            issues.warn(
                "sandbox",
                "ignored because api_url is set (point api_url at the sandbox host instead)",
            );
        }
        let default_api = if sandbox { SANDBOX_API_URL } else { API_URL };
        let api_url = config::base_url(issues, "api_url", self.api_url.as_deref(), default_api);
        let token_url = config::base_url(issues, "token_url", self.token_url.as_deref(), TOKEN_URL);
        let transport = match config::event_mode(
            issues,
            self.mode.as_deref(),
            &["gateway"],
            self.webhook.as_ref(),
        ) {
            EventMode::Webhook => config::webhook_place(
                issues,
                self.webhook.as_ref(),
                DEFAULT_WEBHOOK_PATH,
                "0.0.0.0:8443",
            )
            .map(Transport::Webhook),
            EventMode::Connection => Some(Transport::Websocket),
        };
        let file_hosts =
            config::file_hosts(issues, "file_hosts", self.file_hosts.as_ref(), FILE_HOSTS);
        if issues.error_count() > errors_before {
            return None;
        }
        Some(QqSettings {
            app_id: app_id?,
            client_secret: client_secret?,
            sandbox,
            api_url,
            token_url,
            transport: transport?,
            file_hosts,
        })
    }

    /// The app id as a string: YAML writes a numeric id as a number.
    fn app_id(&self, issues: &mut Issues) -> Option<String> {
        let text = match &self.app_id {
            Some(Value::String(s)) => s.trim().to_owned(),
            Some(Value::Number(n)) => n.to_string(),
            Some(Value::Null) | None => String::new(),
            Some(_) => {
                issues.error("app_id", "expected the AppID as a number or a string");
                return None;
            }
        };
        let usable = !text.is_empty()
            && text.len() <= MAX_APP_ID_LEN
            && text.bytes().all(|b| b.is_ascii_graphic());
        if usable {
            Some(text)
        } else if text.is_empty() {
            issues.error(
                "app_id",
                "required: the bot's AppID from the QQ bot console, e.g. app_id: 102012345",
            );
            None
        } else {
            issues.error(
                "app_id",
                format!("expected up to {MAX_APP_ID_LEN} visible ASCII characters"),
            );
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn check(block: Value) -> (Option<QqSettings>, Vec<String>) {
        im_bridge_channel::fixtures::validated(validate, "channels.qq", block)
    }

    #[test]
    fn the_gateway_needs_only_the_app() {
        let (s, found) = check(json!({"app_id": 102012345, "client_secret": "s3cret"}));
        let s = s.unwrap();
        assert!(found.is_empty(), "{found:?}");
        assert_eq!(s.app_id, "102012345");
        assert_eq!(s.api_url, API_URL);
        assert_eq!(s.token_url, TOKEN_URL);
        assert!(!s.sandbox);
        assert!(matches!(s.transport, Transport::Websocket));
        assert_eq!(s.file_hosts.patterns().collect::<Vec<_>>(), FILE_HOSTS);
        let (s, found) = check(json!({
            "app_id": 1, "client_secret": "s", "file_hosts": ["127.0.0.1", "*.example.com"],
        }));
        assert!(found.is_empty(), "{found:?}");
        assert_eq!(s.unwrap().file_hosts.to_string(), "127.0.0.1, .example.com");
        let (s, found) = check(json!({"app_id": 1, "client_secret": "s", "file_hosts": [""]}));
        assert!(s.is_none());
        assert_eq!(found, ["E channels.qq.file_hosts"]);
        let (s, _) = check(json!({"app_id": "1020", "client_secret": "s", "sandbox": true}));
        assert_eq!(s.unwrap().api_url, SANDBOX_API_URL);
        let (s, found) = check(json!({
            "app_id": "1020", "client_secret": "s", "mode": "gateway",
            "api_url": "http://127.0.0.1:9/", "token_url": "http://127.0.0.1:9/bots/",
        }));
        let s = s.unwrap();
        assert_eq!(
            (s.api_url.as_str(), s.token_url.as_str()),
            ("http://127.0.0.1:9", "http://127.0.0.1:9/bots")
        );
        assert!(found.is_empty(), "{found:?}");
    }

    #[test]
    fn an_explicit_api_url_wins_over_sandbox_with_a_warning() {
        let (s, found) = check(json!({
            "app_id": "1020", "client_secret": "s", "sandbox": true,
            "api_url": "https://proxy.example",
        }));
        let s = s.unwrap();
        assert_eq!(s.api_url, "https://proxy.example");
        assert!(s.sandbox);
        assert_eq!(found, ["W channels.qq.sandbox"]);
    }

    #[test]
    fn every_problem_is_reported_at_its_key_and_no_secret_is_echoed() {
        let (s, found) = check(json!({
            "app_id": "has space", "client_secret": "", "api_url": "ftp://x",
            "token_url": "https://t/?q", "mode": "pigeon",
        }));
        assert!(s.is_none());
        assert_eq!(
            found,
            [
                "E channels.qq.app_id",
                "E channels.qq.client_secret",
                "E channels.qq.api_url",
                "E channels.qq.token_url",
                "E channels.qq.mode"
            ]
        );
        let (_, found) = check(json!({"app_id": [1], "client_secret": "x"}));
        assert_eq!(found, ["E channels.qq.app_id"]);
        let mut issues = Issues::new("channels.qq");
        let settings = validate(
            json!({"client_secret": "TOPSECRET", "mode": "webhook"}),
            &mut issues,
        );
        let text = format!("{:?} {settings:?}", issues.into_vec());
        assert!(!text.contains("TOPSECRET"), "{text}");
        let (s, _) = check(json!({"app_id": "1", "client_secret": "TOPSECRET"}));
        let printed = format!("{s:?} {}", serde_json::to_string(&s).unwrap());
        assert!(!printed.contains("TOPSECRET"), "{printed}");
    }

    #[test]
    fn the_webhook_needs_an_address() {
        let (s, found) = check(json!({
            "app_id": "1", "client_secret": "s", "mode": "webhook",
            "webhook": {"listen": "127.0.0.1:0"},
        }));
        let Some(QqSettings {
            transport: Transport::Webhook(hook),
            ..
        }) = s
        else {
            panic!("webhook settings expected: {found:?}");
        };
        assert_eq!(hook.path, DEFAULT_WEBHOOK_PATH);
        assert_eq!(hook.listen, "127.0.0.1:0".parse().unwrap());
        let (s, found) = check(json!({
            "app_id": "1", "client_secret": "s", "mode": "webhook",
            "webhook": {"path": "no-slash"},
        }));
        assert!(s.is_none());
        assert_eq!(
            found,
            ["E channels.qq.webhook.listen", "E channels.qq.webhook.path"]
        );
        let (s, found) = check(json!({
            "app_id": "1", "client_secret": "s", "webhook": {"listen": "0.0.0.0:1"},
        }));
        assert!(matches!(s.unwrap().transport, Transport::Websocket));
        assert_eq!(found, ["W channels.qq.webhook"]);
    }
}
