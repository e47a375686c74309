//! The `channels.dingtalk` block (DeerFlow's keys: `client_id`, `client_secret`,
//! `card_template_id`, plus the shared `enabled`, `allowed_users`, `locale` the daemon
//! reads): raw keys as an operator writes them, and the resolved settings the adapter runs
//! with. Every URL the adapter calls derives from `api_url` (the OpenAPI host) or
//! `oapi_url` (the legacy host of the media upload), so tests point both at a fake; a file
//! is read from the `downloadUrl` DingTalk answers only on a host `file_hosts` lists.
//! Validation is pure (no socket) and never echoes a secret; unknown keys are warnings,
//! since the file is shared with DeerFlow.

use im_bridge_channel::config::{self, Issues};
use im_bridge_channel::{FileHosts, Secret};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The OpenAPI host: tokens, stream mode, robot messages, cards, file downloads.
pub const API_URL: &str = "https://api.dingtalk.com";
/// The legacy host: only the media upload (`/media/upload`) lives there.
pub const OAPI_URL: &str = "https://oapi.dingtalk.com";
/// Where the `downloadUrl` of `messageFiles/download` may point. DingTalk's reference
/// ("获取机器人消息中文件下载链接") documents it only as a temporary link; DingTalk serves
/// files from its own `*.dingtalk.com` hosts and signed Alibaba Cloud OSS URLs
/// (`*.aliyuncs.com`, as its presigned-URL APIs answer, e.g.
/// `dingdingsz.oss-cn-shenzhen.aliyuncs.com`). The URL comes from DingTalk's authenticated
/// answer, never from the event; an operator who sees a refusal in the log adds the host.
pub const FILE_HOSTS: &[&str] = &[".dingtalk.com", ".aliyuncs.com"];
/// Default bound on one `sampleMarkdown` message, in UTF-8 bytes.
///
/// DingTalk documents no length limit for the robot send APIs' `sampleMarkdown`; the
/// documented limit closest to it is 5000 characters for the markdown of work
/// notifications, and clients in the wild split robot markdown at about 4000 characters.
/// Counting bytes keeps 5000 under both for every script: ASCII stays at 5000 characters,
/// Chinese text at about 1700, so a message is never cut by the platform, and a long
/// answer becomes several messages instead.
pub const DEFAULT_MAX_MARKDOWN_BYTES: i64 = 5000;
/// The range `max_markdown_bytes` accepts: below 500 an answer becomes a flood of
/// messages; above 20000 (the body limit DingTalk documents for a robot webhook message)
/// the platform may refuse or cut it.
pub const MARKDOWN_BYTES_RANGE: std::ops::RangeInclusive<i64> = 500..=20_000;

/// The adapter's keys of `channels.dingtalk`, as written.
#[derive(Debug, Default, Deserialize)]
pub struct RawDingTalkConfig {
    /// The app's AppKey (Client ID), e.g. `dingxxxxxxxx`. Required. The robot's
    /// `robotCode` is the same value for an enterprise internal app.
    pub client_id: Option<String>,
    /// The app's AppSecret (Client Secret), usually `$DINGTALK_CLIENT_SECRET`. Required.
    pub client_secret: Option<Secret>,
    /// The id of an AI card template whose markdown variable is `content`. Set: replies
    /// stream into a card; unset or empty: a final markdown message only.
    pub card_template_id: Option<String>,
    /// The OpenAPI base URL. Default `https://api.dingtalk.com`.
    pub api_url: Option<String>,
    /// The legacy API base URL, used for the media upload only. Default
    /// `https://oapi.dingtalk.com`.
    pub oapi_url: Option<String>,
    /// The longest markdown message sent, in UTF-8 bytes; a longer answer is sent as
    /// several messages. Default 5000, from 500 to 20000.
    pub max_markdown_bytes: Option<i64>,
    /// Hosts a file's `downloadUrl` may be on (`cdn.example.com`, `.example.com` for a
    /// domain and its subdomains, `127.0.0.1:8080`). Default [`FILE_HOSTS`].
    pub file_hosts: Option<Value>,
}

/// What the DingTalk adapter runs with.
#[derive(Clone, Debug, Serialize)]
pub struct DingTalkSettings {
    /// The app's AppKey; also the default `robotCode`.
    pub client_id: String,
    /// The app's AppSecret; only the token and `connections/open` calls put it on the
    /// wire.
    pub client_secret: Secret,
    /// The AI card template; `None` means no streaming (final markdown only).
    pub card_template_id: Option<String>,
    /// The OpenAPI base URL without a trailing slash.
    pub api_url: String,
    /// The legacy API base URL without a trailing slash.
    pub oapi_url: String,
    /// The longest markdown message, in UTF-8 bytes.
    pub max_markdown_bytes: usize,
    /// The hosts files are read from; a `downloadUrl` elsewhere is refused unfetched.
    pub file_hosts: FileHosts,
}

/// Reads and validates the adapter's keys of `channels.dingtalk`.
pub fn validate(block: Value, issues: &mut Issues) -> Option<DingTalkSettings> {
    let raw: RawDingTalkConfig = config::parse_block(block, issues)?;
    raw.validate(issues)
}

impl RawDingTalkConfig {
    /// Resolves the raw keys, recording every problem. Pure.
    pub fn validate(&self, issues: &mut Issues) -> Option<DingTalkSettings> {
        let errors_before = issues.error_count();
        let client_id = config::required_text(
            issues,
            "client_id",
            self.client_id.as_deref(),
            "required: the app's AppKey (Client ID) from the developer console, e.g. client_id: dingabc123",
        );
        let client_secret = config::required_secret(
            issues,
            "client_secret",
            self.client_secret.as_ref(),
            "required: the app's AppSecret (Client Secret), e.g. client_secret: $DINGTALK_CLIENT_SECRET",
        );
        let card_template_id = config::optional_text(self.card_template_id.as_deref());
        let api_url = config::base_url(issues, "api_url", self.api_url.as_deref(), API_URL);
        let oapi_url = config::base_url(issues, "oapi_url", self.oapi_url.as_deref(), OAPI_URL);
        let max_markdown_bytes = config::integer(
            issues,
            "max_markdown_bytes",
            self.max_markdown_bytes,
            DEFAULT_MAX_MARKDOWN_BYTES,
            MARKDOWN_BYTES_RANGE,
        );
        let file_hosts =
            config::file_hosts(issues, "file_hosts", self.file_hosts.as_ref(), FILE_HOSTS);
        if issues.error_count() > errors_before {
            return None;
        }
        Some(DingTalkSettings {
            client_id: client_id?,
            client_secret: client_secret?,
            card_template_id,
            api_url,
            oapi_url,
            max_markdown_bytes: usize::try_from(max_markdown_bytes).ok()?,
            file_hosts,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn check(block: Value) -> (Option<DingTalkSettings>, Vec<String>) {
        im_bridge_channel::fixtures::validated(validate, "channels.dingtalk", block)
    }

    #[test]
    fn the_app_credentials_are_enough_and_every_url_has_a_default() {
        let (s, found) = check(json!({"client_id": " dingabc ", "client_secret": "s3cret"}));
        let s = s.unwrap();
        assert!(found.is_empty(), "{found:?}");
        assert_eq!(s.client_id, "dingabc");
        assert_eq!(s.api_url, API_URL);
        assert_eq!(s.oapi_url, OAPI_URL);
        assert_eq!(s.file_hosts.patterns().collect::<Vec<_>>(), FILE_HOSTS);
        assert_eq!(s.card_template_id, None);
        assert_eq!(s.max_markdown_bytes, 5000);
        let (s, found) = check(json!({
            "client_id": "d", "client_secret": "s", "file_hosts": ["127.0.0.1", "x/y"],
        }));
        assert!(s.is_none());
        assert_eq!(found, ["E channels.dingtalk.file_hosts"]);
        let (s, found) = check(json!({
            "client_id": "dingabc", "client_secret": "s",
            "api_url": "http://127.0.0.1:9/", "oapi_url": "http://127.0.0.1:9",
            "card_template_id": " tpl.schema ", "max_markdown_bytes": 800,
        }));
        let s = s.unwrap();
        assert!(found.is_empty(), "{found:?}");
        assert_eq!(s.api_url, "http://127.0.0.1:9");
        assert_eq!(s.oapi_url, "http://127.0.0.1:9");
        assert_eq!(s.card_template_id.as_deref(), Some("tpl.schema"));
        assert_eq!(s.max_markdown_bytes, 800);
        // An empty template id is no template (DeerFlow's example config writes "").
        let (s, _) = check(json!({"client_id": "d", "client_secret": "s", "card_template_id": ""}));
        assert_eq!(s.unwrap().card_template_id, None);
    }

    #[test]
    fn every_problem_is_reported_at_its_key_and_no_secret_is_echoed() {
        let (s, found) = check(json!({
            "client_secret": " ", "api_url": "ftp://x", "oapi_url": "https://h/?q",
            "max_markdown_bytes": 10, "surprise": true,
        }));
        assert!(s.is_none());
        assert_eq!(
            found,
            [
                "W channels.dingtalk.surprise",
                "E channels.dingtalk.client_id",
                "E channels.dingtalk.client_secret",
                "E channels.dingtalk.api_url",
                "E channels.dingtalk.oapi_url",
                "E channels.dingtalk.max_markdown_bytes",
            ]
        );
        let mut issues = Issues::new("channels.dingtalk");
        let settings = validate(
            json!({"client_id": "d", "client_secret": "TOPSECRET", "api_url": "nope"}),
            &mut issues,
        );
        assert!(settings.is_none());
        let text = format!("{:?}", issues.into_vec());
        assert!(!text.contains("TOPSECRET"), "{text}");
        let (s, _) = check(json!({"client_id": "d", "client_secret": "TOPSECRET"}));
        let printed = format!("{:?} {}", s, serde_json::to_string(&s).unwrap());
        assert!(!printed.contains("TOPSECRET"), "{printed}");
    }

    #[test]
    fn the_daemon_keys_are_not_the_adapters() {
        // The daemon strips `enabled`, `allowed_users`, `locale` before the adapter sees
        // the block; what reaches here is the adapter's own, and a wrong type is an error.
        let (s, found) = check(json!({"client_id": ["x"], "client_secret": "s"}));
        assert!(s.is_none());
        assert_eq!(found, ["E channels.dingtalk.client_id"]);
    }
}
