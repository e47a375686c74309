//! The `channels.wecom` block (DeerFlow's keys: `bot_id`, `bot_secret`, plus the shared
//! `enabled`, `allowed_users`, `locale` the daemon reads): raw keys as an operator writes
//! them, and the resolved settings the adapter runs with.
//!
//! The socket is `ws_url` (WeCom's endpoint by default), so tests point it at a fake; the
//! media a callback points at is fetched only from a host `file_hosts` lists. `mode` names
//! how events arrive: only `long_connection` for now (the callback mode, with its own
//! `token` / `encoding_aes_key` envelope on the shared webhook host, is not built; see the
//! README). DeerFlow's `working_message` is accepted and not used: the daemon writes its
//! own, localized notice. Validation is pure (no socket) and never echoes a secret; unknown
//! keys are warnings, since the file is shared with DeerFlow.

use im_bridge_channel::config::{self, Issues};
use im_bridge_channel::{FileHosts, Secret};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// WeCom's long-connection endpoint (official SDKs' default, doc path 101463).
pub const WS_URL: &str = "wss://openws.work.weixin.qq.com";
/// Where the media of a callback lives: WeCom's documented examples and every recorded
/// callback point at one Tencent Cloud COS bucket,
/// `ww-aibot-img-1258476243.cos.ap-guangzhou.myqcloud.com` (signed URLs valid five
/// minutes). Only that bucket, not `.myqcloud.com`: any tenant can own a bucket there. An
/// operator whose log shows a refused host adds it.
pub const FILE_HOSTS: &[&str] = &["ww-aibot-img-1258476243.cos.ap-guangzhou.myqcloud.com"];
/// The only `mode`: the long connection.
pub const MODES: &[&str] = &["long_connection"];
/// The longest stream `content` WeCom takes: 20480 bytes of UTF-8 (doc path 100719,
/// 流式消息回复; the SDKs' `StreamReplyBody`).
pub const MAX_STREAM_BYTES: i64 = 20_480;
/// Where answers are split by default, in UTF-8 bytes of visible text: the renderer
/// does not count Markdown's markers, so this leaves their room under
/// [`MAX_STREAM_BYTES`] (a text of 18000 bytes would need over 1200 bold spans to pass it).
pub const DEFAULT_MARKDOWN_BYTES: i64 = 18_000;
/// The range `max_markdown_bytes` accepts: below 1000 an answer becomes a flood of
/// messages; above [`MAX_STREAM_BYTES`] WeCom refuses it.
pub const MARKDOWN_BYTES_RANGE: std::ops::RangeInclusive<i64> = 1000..=MAX_STREAM_BYTES;

/// The adapter's keys of `channels.wecom`, as written.
#[derive(Debug, Default, Deserialize)]
pub struct RawWeComConfig {
    /// The intelligent bot's BotID (机器人 ID) from its API settings. Required.
    pub bot_id: Option<String>,
    /// The long connection's Secret, usually `$WECOM_BOT_SECRET`. Required; it goes on the
    /// wire only in the subscribe frame.
    pub bot_secret: Option<Secret>,
    /// The WebSocket endpoint. Default `wss://openws.work.weixin.qq.com`; a `ws://`
    /// loopback URL points the adapter at a fake.
    pub ws_url: Option<String>,
    /// How events arrive: `long_connection` (the default and, for now, the only value).
    pub mode: Option<String>,
    /// DeerFlow's "working" notice. Accepted for compatibility, not used: the daemon shows
    /// its own, in the user's language.
    pub working_message: Option<String>,
    /// The longest reply message, in UTF-8 bytes; a longer answer is several messages.
    /// Default 18000, at most 20480 (WeCom's limit), least 1000.
    pub max_markdown_bytes: Option<i64>,
    /// Hosts callback media may be fetched from (`cdn.example.com`, `.example.com` for a
    /// domain and its subdomains, `127.0.0.1:8080`). Default [`FILE_HOSTS`].
    pub file_hosts: Option<Value>,
}

/// What the WeCom adapter runs with.
#[derive(Clone, Debug, Serialize)]
pub struct WeComSettings {
    /// The bot's BotID.
    pub bot_id: String,
    /// The long connection's Secret.
    pub bot_secret: Secret,
    /// The WebSocket endpoint.
    pub ws_url: String,
    /// The longest reply message, in UTF-8 bytes.
    pub max_markdown_bytes: usize,
    /// The hosts media is read from; a URL elsewhere is refused unfetched.
    pub file_hosts: FileHosts,
}

/// Reads and validates the adapter's keys of `channels.wecom`.
pub fn validate(block: Value, issues: &mut Issues) -> Option<WeComSettings> {
    let raw: RawWeComConfig = config::parse_block(block, issues)?;
    raw.validate(issues)
}

impl RawWeComConfig {
    /// Resolves the raw keys, recording every problem. Pure.
    pub fn validate(&self, issues: &mut Issues) -> Option<WeComSettings> {
        let errors_before = issues.error_count();
        let bot_id = config::required_text(
            issues,
            "bot_id",
            self.bot_id.as_deref(),
            "required: the intelligent bot's BotID from its API settings (long connection), e.g. bot_id: $WECOM_BOT_ID",
        );
        let bot_secret = config::required_secret(
            issues,
            "bot_secret",
            self.bot_secret.as_ref(),
            "required: the long connection's Secret, e.g. bot_secret: $WECOM_BOT_SECRET",
        );
        let ws_url = ws_url(issues, self.ws_url.as_deref());
        config::choice(issues, "mode", self.mode.as_deref(), MODES);
        let max_markdown_bytes = config::integer(
            issues,
            "max_markdown_bytes",
            self.max_markdown_bytes,
            DEFAULT_MARKDOWN_BYTES,
            MARKDOWN_BYTES_RANGE,
        );
        let file_hosts =
            config::file_hosts(issues, "file_hosts", self.file_hosts.as_ref(), FILE_HOSTS);
        if issues.error_count() > errors_before {
            return None;
        }
        Some(WeComSettings {
            bot_id: bot_id?,
            bot_secret: bot_secret?,
            ws_url,
            max_markdown_bytes: usize::try_from(max_markdown_bytes).ok()?,
            file_hosts,
        })
    }
}

/// The endpoint: a `ws://` or `wss://` URL with a host and no fragment, without its
/// trailing slash. Absent or blank = [`WS_URL`].
fn ws_url(issues: &mut Issues, value: Option<&str>) -> String {
    let text = match value.map(str::trim) {
        None | Some("") => return WS_URL.to_owned(),
        Some(text) => text.trim_end_matches('/'),
    };
    let ok = url::Url::parse(text).is_ok_and(|url| {
        matches!(url.scheme(), "ws" | "wss") && url.host().is_some() && url.fragment().is_none()
    });
    if ok {
        text.to_owned()
    } else {
        issues.error(
            "ws_url",
            format!(
                "expected a ws:// or wss:// URL, got {}",
                config::shown_url(text)
            ),
        );
        WS_URL.to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn check(block: Value) -> (Option<WeComSettings>, Vec<String>) {
        im_bridge_channel::fixtures::validated(validate, "channels.wecom", block)
    }

    #[test]
    fn deerflows_block_is_accepted_unchanged() {
        // config.example.yaml's `channels.wecom`, values filled, less the shared keys the
        // daemon takes (`enabled`, `allowed_users`), plus DeerFlow's optional key.
        let (s, found) = check(json!({
            "bot_id": "aibAbC123", "bot_secret": "s3cret", "working_message": "Working on it...",
        }));
        let s = s.unwrap();
        assert!(found.is_empty(), "{found:?}");
        assert_eq!(s.bot_id, "aibAbC123");
        assert_eq!(s.ws_url, WS_URL);
        assert_eq!(s.max_markdown_bytes, 18_000);
        assert_eq!(s.file_hosts.patterns().collect::<Vec<_>>(), FILE_HOSTS);
    }

    #[test]
    fn the_endpoint_mode_and_bounds_are_checked() {
        let (s, found) = check(json!({
            "bot_id": "b", "bot_secret": "s", "ws_url": "ws://127.0.0.1:9/",
            "mode": "long_connection", "max_markdown_bytes": 4096, "file_hosts": ["127.0.0.1"],
        }));
        let s = s.unwrap();
        assert!(found.is_empty(), "{found:?}");
        assert_eq!(s.ws_url, "ws://127.0.0.1:9");
        assert_eq!(s.max_markdown_bytes, 4096);
        let (s, found) = check(json!({
            "bot_id": "b", "bot_secret": "s", "ws_url": "https://x", "mode": "webhook",
            "max_markdown_bytes": 30000,
        }));
        assert!(s.is_none());
        assert_eq!(
            found,
            [
                "E channels.wecom.ws_url",
                "E channels.wecom.mode",
                "E channels.wecom.max_markdown_bytes",
            ]
        );
    }

    #[test]
    fn every_problem_is_reported_and_no_secret_is_echoed() {
        let (s, found) = check(json!({"bot_secret": " ", "surprise": 1}));
        assert!(s.is_none());
        assert_eq!(
            found,
            [
                "W channels.wecom.surprise",
                "E channels.wecom.bot_id",
                "E channels.wecom.bot_secret",
            ]
        );
        let mut issues = Issues::new("channels.wecom");
        let settings = validate(
            json!({"bot_id": "b", "bot_secret": "TOPSECRET", "ws_url": "nope"}),
            &mut issues,
        );
        assert!(settings.is_none());
        assert!(!format!("{:?}", issues.into_vec()).contains("TOPSECRET"));
        let (s, _) = check(json!({"bot_id": "b", "bot_secret": "TOPSECRET"}));
        let printed = format!("{s:?} {}", serde_json::to_string(&s).unwrap());
        assert!(!printed.contains("TOPSECRET"), "{printed}");
    }
}
