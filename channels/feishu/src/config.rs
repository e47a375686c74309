//! The `channels.feishu` block (DeerFlow's keys: `app_id`, `app_secret`, `domain`, plus the
//! shared `enabled`, `allowed_users`, `locale` the daemon reads): raw keys as an operator
//! writes them, and the resolved settings the adapter runs with. Every URL the adapter
//! calls derives from `domain`, so tests point it at a fake. Validation is pure (no socket)
//! and never echoes a secret; unknown keys are warnings, since the file is shared with
//! DeerFlow.

use im_bridge_channel::Secret;
pub use im_bridge_channel::config::RawWebhook;
use im_bridge_channel::config::{self, EventMode, Issues, WebhookPlace};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Feishu (China).
pub const FEISHU_DOMAIN: &str = "https://open.feishu.cn";
/// Lark (international).
pub const LARK_DOMAIN: &str = "https://open.larksuite.com";

/// The adapter's keys of `channels.feishu`, as written.
#[derive(Debug, Default, Deserialize)]
pub struct RawFeishuConfig {
    /// The app's id (`cli_…`). Required.
    pub app_id: Option<String>,
    /// The app's secret, usually `$FEISHU_APP_SECRET`. Required.
    pub app_secret: Option<Secret>,
    /// `https://open.feishu.cn` (default), `https://open.larksuite.com`, the shorthands
    /// `feishu` / `lark`, or any base URL (a fake in tests).
    pub domain: Option<String>,
    /// How events arrive: `websocket` (default, the long connection; no public URL) or
    /// `webhook`.
    pub mode: Option<String>,
    /// The event subscription's verification token (webhook mode).
    pub verification_token: Option<Secret>,
    /// The event subscription's encrypt key: when set, webhook bodies are encrypted and
    /// signed.
    pub encrypt_key: Option<Secret>,
    /// Webhook mode: where the event callback is served.
    pub webhook: Option<RawWebhook>,
}

/// What the Feishu adapter runs with.
#[derive(Clone, Debug, Serialize)]
pub struct FeishuSettings {
    /// The app's id.
    pub app_id: String,
    /// The app's secret; only the token and endpoint calls put it on the wire.
    pub app_secret: Secret,
    /// The API base URL without a trailing slash.
    pub domain: String,
    /// How events arrive.
    pub transport: Transport,
}

/// How events arrive.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "snake_case", tag = "mode")]
pub enum Transport {
    /// The long connection (pbbp2 frames over a WebSocket).
    Websocket,
    /// Feishu posts events to a callback this daemon serves.
    Webhook(WebhookSettings),
}

/// Resolved webhook settings.
#[derive(Clone, Debug, Serialize)]
pub struct WebhookSettings {
    /// Where the callback is served.
    #[serde(flatten)]
    pub place: WebhookPlace,
    /// Expected in every delivery.
    pub verification_token: Secret,
    /// Decrypts bodies and checks signatures, when set.
    pub encrypt_key: Option<Secret>,
}

/// The default webhook path.
pub const DEFAULT_WEBHOOK_PATH: &str = "/feishu/events";

/// Reads and validates the adapter's keys of `channels.feishu`.
pub fn validate(block: Value, issues: &mut Issues) -> Option<FeishuSettings> {
    let raw: RawFeishuConfig = config::parse_block(block, issues)?;
    raw.validate(issues)
}

impl RawFeishuConfig {
    /// Resolves the raw keys, recording every problem. Pure.
    pub fn validate(&self, issues: &mut Issues) -> Option<FeishuSettings> {
        let errors_before = issues.error_count();
        let app_id = config::required_text(
            issues,
            "app_id",
            self.app_id.as_deref(),
            "required: the app's id from the developer console, e.g. app_id: cli_a1b2c3",
        );
        let app_secret = config::required_secret(
            issues,
            "app_secret",
            self.app_secret.as_ref(),
            "required: the app's secret, e.g. app_secret: $FEISHU_APP_SECRET",
        );
        let domain = match self.domain.as_deref().map(str::trim) {
            Some(d) if d.eq_ignore_ascii_case("feishu") => FEISHU_DOMAIN.to_owned(),
            Some(d) if d.eq_ignore_ascii_case("lark") => LARK_DOMAIN.to_owned(),
            other => config::base_url(issues, "domain", other, FEISHU_DOMAIN),
        };
        let transport =
            match config::event_mode(issues, self.mode.as_deref(), &[], self.webhook.as_ref()) {
                EventMode::Webhook => self.webhook_settings(issues).map(Transport::Webhook),
                EventMode::Connection => Some(Transport::Websocket),
            };
        if issues.error_count() > errors_before {
            return None;
        }
        Some(FeishuSettings {
            app_id: app_id?,
            app_secret: app_secret?,
            domain,
            transport: transport?,
        })
    }

    fn webhook_settings(&self, issues: &mut Issues) -> Option<WebhookSettings> {
        let place = config::webhook_place(
            issues,
            self.webhook.as_ref(),
            DEFAULT_WEBHOOK_PATH,
            "0.0.0.0:8080",
        );
        let verification_token = config::required_secret(
            issues,
            "verification_token",
            self.verification_token.as_ref(),
            "required with mode: webhook: the event subscription's verification token",
        );
        let encrypt_key = self
            .encrypt_key
            .clone()
            .filter(|k| !k.expose().trim().is_empty());
        if encrypt_key.is_none() {
            issues.warn(
                "encrypt_key",
                "not set: webhook bodies arrive unencrypted and unsigned; set the encrypt key of the event subscription",
            );
        }
        Some(WebhookSettings {
            place: place?,
            verification_token: verification_token?,
            encrypt_key,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn check(block: Value) -> (Option<FeishuSettings>, Vec<String>) {
        im_bridge_channel::fixtures::validated(validate, "channels.feishu", block)
    }

    #[test]
    fn the_long_connection_needs_only_the_app() {
        let (s, found) = check(json!({"app_id": "cli_1", "app_secret": "s3cret"}));
        let s = s.unwrap();
        assert_eq!(s.domain, FEISHU_DOMAIN);
        assert!(matches!(s.transport, Transport::Websocket));
        assert!(found.is_empty(), "{found:?}");
        let (s, _) = check(json!({"app_id": "cli_1", "app_secret": "s", "domain": "lark"}));
        assert_eq!(s.unwrap().domain, LARK_DOMAIN);
        let (s, _) =
            check(json!({"app_id": "cli_1", "app_secret": "s", "domain": "http://127.0.0.1:9/"}));
        assert_eq!(s.unwrap().domain, "http://127.0.0.1:9");
    }

    #[test]
    fn every_problem_is_reported_at_its_key_and_no_secret_is_echoed() {
        let (s, found) = check(json!({"app_secret": "", "domain": "ftp://x", "mode": "carrier"}));
        assert!(s.is_none());
        assert_eq!(
            found,
            [
                "E channels.feishu.app_id",
                "E channels.feishu.app_secret",
                "E channels.feishu.domain",
                "E channels.feishu.mode"
            ]
        );
        let mut issues = Issues::new("channels.feishu");
        validate(
            json!({"app_id": "cli", "app_secret": "TOPSECRET", "mode": "webhook"}),
            &mut issues,
        );
        let text = format!("{:?}", issues.into_vec());
        assert!(!text.contains("TOPSECRET"), "{text}");
    }

    #[test]
    fn the_webhook_needs_an_address_and_the_token() {
        let (s, found) = check(json!({
            "app_id": "cli", "app_secret": "s", "mode": "webhook",
            "verification_token": "vt", "encrypt_key": "ek",
            "webhook": {"listen": "127.0.0.1:0"},
        }));
        let Some(FeishuSettings {
            transport: Transport::Webhook(hook),
            ..
        }) = s
        else {
            panic!("webhook settings expected: {found:?}");
        };
        assert_eq!(hook.place.path, DEFAULT_WEBHOOK_PATH);
        assert!(hook.encrypt_key.is_some());
        let (s, found) = check(json!({"app_id": "cli", "app_secret": "s", "mode": "webhook"}));
        assert!(s.is_none());
        assert_eq!(
            found,
            [
                "E channels.feishu.webhook.listen",
                "E channels.feishu.verification_token",
                "W channels.feishu.encrypt_key"
            ]
        );
    }
}
