//! The `channels.wechat` block: DeerFlow's keys (`bot_token`, `ilink_bot_id`,
//! `qrcode_login_enabled`, `ilink_app_id`, `route_tag`, the polling and QR timings, the media
//! bounds, `allowed_file_extensions`; the daemon reads the shared `enabled`,
//! `allowed_users`, `session`, `locale`) as an operator writes them, and the settings the
//! adapter runs with.
//!
//! The endpoints are `api_url` and `cdn_url` (im-bridge's names, as every adapter's
//! `api_url`), so tests point them at a fake; DeerFlow's own `base_url` and `cdn_base_url`
//! are read as the same keys. DeerFlow's `state_dir` is accepted with a warning: the cursor
//! and a token from a QR login live in the daemon's store. Validation is pure (no socket)
//! and never echoes a secret; unknown keys are warnings, since the file is shared with
//! DeerFlow.

use std::time::Duration;

use im_bridge_channel::config::{self, Issues};
use im_bridge_channel::{FileHosts, Secret};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// How much longer than its hold a long poll may take to answer before the client stops
/// waiting (DeerFlow waits 5 s more, at least 10 s in all).
pub const POLL_SLACK: Duration = Duration::from_secs(10);
/// How long a poll's answer may take to arrive whole once it began in time (within its
/// hold and [`POLL_SLACK`]): a large batch over a slow link. Past it the poll fails, is
/// counted and retried after a backoff, rather than passing for an empty batch, which
/// would ask for the same batch at once, again and again, without a word.
pub const POLL_BODY_WAIT: Duration = Duration::from_secs(120);

/// iLink's bot API (DeerFlow's and Tencent's plugin's default).
pub const API_URL: &str = "https://ilinkai.weixin.qq.com";
/// iLink's CDN for media (DeerFlow's and the plugin's default).
pub const CDN_URL: &str = "https://novac2c.cdn.weixin.qq.com/c2c";
/// Hosts media may be fetched from besides `cdn_url`'s own: Tencent's WeChat domain, which
/// iLink's `full_url`s point into.
pub const FILE_HOSTS: &[&str] = &[".weixin.qq.com"];
/// `iLink-App-Id` when `ilink_app_id` is blank: the value Tencent's plugin sends (observed:
/// iLink answers a request without it as an ended session). DeerFlow sends none then.
pub const DEFAULT_APP_ID: &str = "bot";
/// DeerFlow's defaults.
pub const DEFAULT_POLLING_TIMEOUT: Duration = Duration::from_secs(35);
/// The wait after a failed poll before the backoff doubles it (DeerFlow's 5 s).
pub const DEFAULT_RETRY_DELAY: Duration = Duration::from_secs(5);
/// How often a QR code's status is asked when iLink answers at once (DeerFlow's 2 s).
pub const DEFAULT_QR_POLL_INTERVAL: Duration = Duration::from_secs(2);
/// How long one login waits for a scan before it gives up and starts over (DeerFlow's 180
/// s). Expired codes are replaced within it.
pub const DEFAULT_QR_POLL_TIMEOUT: Duration = Duration::from_secs(180);
/// `get_bot_qrcode?bot_type=`: 3 (DeerFlow, the plugin).
pub const DEFAULT_BOT_TYPE: i64 = 3;
/// `base_info.channel_version` (DeerFlow's default), and from it `iLink-App-ClientVersion`.
pub const DEFAULT_CHANNEL_VERSION: &str = "1.0";
/// DeerFlow's default bounds on media, in bytes.
pub const DEFAULT_IMAGE_BYTES: i64 = 20 * 1024 * 1024;
/// DeerFlow's default bound on files, in bytes.
pub const DEFAULT_FILE_BYTES: i64 = 50 * 1024 * 1024;
/// The largest bound im-bridge takes (and what DeerFlow's `0`, "no limit", means here).
pub const MAX_MEDIA_BYTES: i64 = 100 * 1024 * 1024;
/// DeerFlow's default `allowed_file_extensions`.
pub const DEFAULT_EXTENSIONS: &[&str] = &[
    ".txt", ".md", ".pdf", ".csv", ".json", ".yaml", ".yml", ".xml", ".html", ".log", ".zip",
    ".doc", ".docx", ".xls", ".xlsx", ".ppt", ".pptx", ".rtf", ".py", ".js", ".ts", ".tsx", ".jsx",
    ".java", ".go", ".rs", ".c", ".cpp", ".h", ".hpp", ".sql", ".sh", ".bat", ".ps1", ".toml",
    ".ini", ".conf",
];

/// The adapter's keys of `channels.wechat`, as written.
#[derive(Debug, Default, Deserialize)]
pub struct RawWechatConfig {
    /// The iLink bot token, usually `$WECHAT_BOT_TOKEN`. Optional with
    /// `qrcode_login_enabled`: the adapter then logs in by QR code and keeps the token.
    pub bot_token: Option<Secret>,
    /// The bot's `ilink_bot_id` (`…@im.bot`): informational (logs, doctor).
    pub ilink_bot_id: Option<String>,
    /// Log in by QR code when no token is configured or stored (default false).
    pub qrcode_login_enabled: Option<bool>,
    /// `iLink-App-Id`; blank = `bot`.
    pub ilink_app_id: Option<String>,
    /// `SKRouteTag`, sent when set.
    pub route_tag: Option<String>,
    /// How long a `getupdates` is held, seconds (default 35).
    pub polling_timeout: Option<f64>,
    /// The wait after a failed poll, seconds (default 5), doubled up to a minute.
    pub polling_retry_delay: Option<f64>,
    /// Seconds between QR status polls (default 2).
    pub qrcode_poll_interval: Option<f64>,
    /// Seconds one QR login waits for a scan (default 180).
    pub qrcode_poll_timeout: Option<f64>,
    /// `bot_type` of `get_bot_qrcode` (default 3).
    pub qrcode_bot_type: Option<i64>,
    /// `base_info.channel_version` (default `1.0`).
    pub channel_version: Option<String>,
    /// Hold polls as long as iLink's `longpolling_timeout_ms` says (default true).
    pub respect_server_longpoll_timeout: Option<bool>,
    /// The largest picture a user sends that is read, bytes (default 20 MiB; 0 = 100 MiB).
    pub max_inbound_image_bytes: Option<i64>,
    /// The largest picture sent, bytes (default 20 MiB; 0 = 100 MiB).
    pub max_outbound_image_bytes: Option<i64>,
    /// The largest file a user sends that is read, bytes (default 50 MiB; 0 = 100 MiB).
    pub max_inbound_file_bytes: Option<i64>,
    /// The largest file sent, bytes (default 50 MiB; 0 = 100 MiB).
    pub max_outbound_file_bytes: Option<i64>,
    /// File extensions accepted both ways (DeerFlow's list by default).
    pub allowed_file_extensions: Option<Vec<String>>,
    /// The bot API (DeerFlow: `base_url`).
    #[serde(alias = "base_url")]
    pub api_url: Option<String>,
    /// The media CDN (DeerFlow: `cdn_base_url`).
    #[serde(alias = "cdn_base_url")]
    pub cdn_url: Option<String>,
    /// Hosts media may be fetched from (default: `cdn_url`'s host and `.weixin.qq.com`).
    pub file_hosts: Option<Value>,
    /// DeerFlow's state directory: accepted, ignored (state lives in the store).
    pub state_dir: Option<Value>,
}

/// What the WeChat adapter runs with.
#[derive(Clone, Debug, Serialize)]
pub struct WechatSettings {
    /// The configured bot token, if any.
    pub bot_token: Option<Secret>,
    /// The configured `ilink_bot_id`, if any.
    pub ilink_bot_id: Option<String>,
    /// Whether a missing or ended token is obtained by QR login.
    pub qrcode_login: bool,
    /// `iLink-App-Id`.
    pub app_id: String,
    /// `SKRouteTag`, if any.
    pub route_tag: Option<String>,
    /// How long a poll is held.
    pub polling_timeout: Duration,
    /// The first wait after a failed poll.
    pub retry_delay: Duration,
    /// Between QR status polls.
    pub qr_poll_interval: Duration,
    /// How long one QR login waits.
    pub qr_poll_timeout: Duration,
    /// `bot_type`.
    pub qr_bot_type: i64,
    /// `base_info.channel_version`.
    pub channel_version: String,
    /// Whether iLink's `longpolling_timeout_ms` sets the hold.
    pub respect_server_longpoll_timeout: bool,
    /// Inbound picture bound, bytes.
    pub max_inbound_image_bytes: u64,
    /// Outbound picture bound, bytes.
    pub max_outbound_image_bytes: u64,
    /// Inbound file bound, bytes.
    pub max_inbound_file_bytes: u64,
    /// Outbound file bound, bytes.
    pub max_outbound_file_bytes: u64,
    /// Accepted extensions, lower-case with their dot.
    pub allowed_file_extensions: Vec<String>,
    /// The bot API, without a trailing slash.
    pub api_url: String,
    /// The CDN, without a trailing slash.
    pub cdn_url: String,
    /// Where media is read from.
    pub file_hosts: FileHosts,
    /// How much longer than its hold the client waits for a poll's answer: [`POLL_SLACK`]
    /// (not a key of `channels.wechat`; a test shortens it to play a poll that outlasts
    /// the client's wait).
    pub poll_slack: Duration,
    /// How long a poll's answer may take to arrive whole once it began: [`POLL_BODY_WAIT`]
    /// (not a key; a test shortens it to play an answer over a slow link).
    pub poll_body_wait: Duration,
}

impl WechatSettings {
    /// Whether a file named `name` may go either way.
    pub fn allows_file(&self, name: &str) -> bool {
        let lower = name.to_ascii_lowercase();
        self.allowed_file_extensions
            .iter()
            .any(|ext| lower.ends_with(ext.as_str()))
    }

    /// `iLink-App-ClientVersion`: `channel_version`'s `major.minor.patch` as
    /// `major << 16 | minor << 8 | patch`, each part at most 255 (DeerFlow, the plugin).
    pub fn client_version(&self) -> u32 {
        let mut parts = self
            .channel_version
            .split('.')
            .map(|p| p.trim().parse::<u32>().map_or(0, |n| n.min(0xff)));
        let mut next = || parts.next().unwrap_or(0);
        let (major, minor, patch) = (next(), next(), next());
        (major << 16) | (minor << 8) | patch
    }
}

/// Reads and validates the adapter's keys of `channels.wechat`.
pub fn validate(block: Value, issues: &mut Issues) -> Option<WechatSettings> {
    let raw: RawWechatConfig = config::parse_block(block, issues)?;
    raw.validate(issues)
}

/// A bound in bytes: absent = `default`, 0 = [`MAX_MEDIA_BYTES`].
fn bytes(issues: &mut Issues, key: &str, value: Option<i64>, default: i64) -> u64 {
    let n = config::integer(issues, key, value, default, 0..=MAX_MEDIA_BYTES);
    u64::try_from(if n == 0 { MAX_MEDIA_BYTES } else { n }).unwrap_or(0)
}

impl RawWechatConfig {
    /// Resolves the raw keys, recording every problem. Pure.
    pub fn validate(&self, issues: &mut Issues) -> Option<WechatSettings> {
        let errors_before = issues.error_count();
        let (bot_token, qrcode_login) = self.login(issues);
        let api_url = config::base_url(issues, "api_url", self.api_url.as_deref(), API_URL);
        let cdn_url = config::base_url(issues, "cdn_url", self.cdn_url.as_deref(), CDN_URL);
        let timers = self.timers(issues);
        let qr_bot_type = config::integer(
            issues,
            "qrcode_bot_type",
            self.qrcode_bot_type,
            DEFAULT_BOT_TYPE,
            0..=1000,
        );
        let bounds = self.bounds(issues);
        let file_hosts = file_hosts(issues, self.file_hosts.as_ref(), &cdn_url);
        if issues.error_count() > errors_before {
            return None;
        }
        Some(WechatSettings {
            bot_token,
            ilink_bot_id: config::optional_text(self.ilink_bot_id.as_deref()),
            qrcode_login,
            app_id: config::optional_text(self.ilink_app_id.as_deref())
                .unwrap_or_else(|| DEFAULT_APP_ID.to_owned()),
            route_tag: config::optional_text(self.route_tag.as_deref()),
            polling_timeout: timers.polling_timeout,
            retry_delay: timers.retry_delay,
            qr_poll_interval: timers.qr_poll_interval,
            qr_poll_timeout: timers.qr_poll_timeout,
            qr_bot_type,
            channel_version: config::optional_text(self.channel_version.as_deref())
                .unwrap_or_else(|| DEFAULT_CHANNEL_VERSION.to_owned()),
            respect_server_longpoll_timeout: self.respect_server_longpoll_timeout.unwrap_or(true),
            max_inbound_image_bytes: bounds.inbound_image,
            max_outbound_image_bytes: bounds.outbound_image,
            max_inbound_file_bytes: bounds.inbound_file,
            max_outbound_file_bytes: bounds.outbound_file,
            allowed_file_extensions: extensions(self.allowed_file_extensions.as_deref()),
            api_url,
            cdn_url,
            file_hosts,
            poll_slack: POLL_SLACK,
            poll_body_wait: POLL_BODY_WAIT,
        })
    }

    /// The configured token (blank is none) and whether a QR login may get one: one of
    /// the two is required. `state_dir` is DeerFlow's and ignored, with a warning.
    fn login(&self, issues: &mut Issues) -> (Option<Secret>, bool) {
        let bot_token = self
            .bot_token
            .clone()
            .filter(|t| !t.expose().trim().is_empty());
        let qrcode_login = self.qrcode_login_enabled.unwrap_or(false);
        if bot_token.is_none() && !qrcode_login {
            issues.error(
                "bot_token",
                "required unless qrcode_login_enabled is true: the iLink bot token, e.g. bot_token: $WECHAT_BOT_TOKEN",
            );
        }
        if self.state_dir.is_some() {
            issues.warn(
                "state_dir",
                "ignored: im-bridge keeps the poll cursor and a QR login's token in its store (bridge.store)",
            );
        }
        (bot_token, qrcode_login)
    }

    /// The poll's and the QR login's durations, each in its range.
    fn timers(&self, issues: &mut Issues) -> Timers {
        let secs = |issues: &mut Issues, key, value, default, range| {
            config::seconds(issues, key, value, default, range)
        };
        Timers {
            polling_timeout: secs(
                issues,
                "polling_timeout",
                self.polling_timeout,
                DEFAULT_POLLING_TIMEOUT,
                1.0..=300.0,
            ),
            retry_delay: secs(
                issues,
                "polling_retry_delay",
                self.polling_retry_delay,
                DEFAULT_RETRY_DELAY,
                0.1..=3600.0,
            ),
            qr_poll_interval: secs(
                issues,
                "qrcode_poll_interval",
                self.qrcode_poll_interval,
                DEFAULT_QR_POLL_INTERVAL,
                0.1..=60.0,
            ),
            qr_poll_timeout: secs(
                issues,
                "qrcode_poll_timeout",
                self.qrcode_poll_timeout,
                DEFAULT_QR_POLL_TIMEOUT,
                1.0..=86_400.0,
            ),
        }
    }

    /// The size bounds of pictures and files, each way.
    fn bounds(&self, issues: &mut Issues) -> Bounds {
        Bounds {
            inbound_image: bytes(
                issues,
                "max_inbound_image_bytes",
                self.max_inbound_image_bytes,
                DEFAULT_IMAGE_BYTES,
            ),
            outbound_image: bytes(
                issues,
                "max_outbound_image_bytes",
                self.max_outbound_image_bytes,
                DEFAULT_IMAGE_BYTES,
            ),
            inbound_file: bytes(
                issues,
                "max_inbound_file_bytes",
                self.max_inbound_file_bytes,
                DEFAULT_FILE_BYTES,
            ),
            outbound_file: bytes(
                issues,
                "max_outbound_file_bytes",
                self.max_outbound_file_bytes,
                DEFAULT_FILE_BYTES,
            ),
        }
    }
}

/// The durations [`RawWechatConfig::validate`] resolves.
struct Timers {
    polling_timeout: Duration,
    retry_delay: Duration,
    qr_poll_interval: Duration,
    qr_poll_timeout: Duration,
}

/// The size bounds [`RawWechatConfig::validate`] resolves, in bytes.
struct Bounds {
    inbound_image: u64,
    outbound_image: u64,
    inbound_file: u64,
    outbound_file: u64,
}

/// DeerFlow's normalization: lower-case, a leading dot; blank entries dropped; an absent
/// or empty list is the default.
fn extensions(value: Option<&[String]>) -> Vec<String> {
    let listed: Vec<String> = value
        .unwrap_or_default()
        .iter()
        .map(|e| e.trim().to_ascii_lowercase())
        .filter(|e| !e.is_empty())
        .map(|e| {
            if e.starts_with('.') {
                e
            } else {
                format!(".{e}")
            }
        })
        .collect();
    if listed.is_empty() {
        DEFAULT_EXTENSIONS.iter().map(|e| (*e).to_owned()).collect()
    } else {
        listed
    }
}

/// `file_hosts`, by default `cdn_url`'s host (with its port) and [`FILE_HOSTS`].
fn file_hosts(issues: &mut Issues, value: Option<&Value>, cdn_url: &str) -> FileHosts {
    let cdn_host = url::Url::parse(cdn_url).ok().and_then(|u| {
        let host = u.host_str()?.to_owned();
        Some(match u.port() {
            Some(port) => format!("{host}:{port}"),
            None => host,
        })
    });
    let mut defaults: Vec<&str> = FILE_HOSTS.to_vec();
    if let Some(host) = cdn_host.as_deref() {
        defaults.push(host);
    }
    config::file_hosts(issues, "file_hosts", value, &defaults)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn check(block: Value) -> (Option<WechatSettings>, Vec<String>) {
        im_bridge_channel::fixtures::validated(validate, "channels.wechat", block)
    }

    #[test]
    fn deerflows_block_is_accepted_unchanged() {
        // config.example.yaml's `channels.wechat`, values filled, less the shared keys.
        let (s, found) = check(json!({
            "bot_token": "tok", "ilink_bot_id": "b@im.bot", "qrcode_login_enabled": true,
            "ilink_app_id": "", "route_tag": "", "polling_timeout": 35,
            "polling_retry_delay": 5, "qrcode_poll_interval": 2, "qrcode_poll_timeout": 180,
        }));
        let s = s.unwrap();
        assert!(found.is_empty(), "{found:?}");
        assert_eq!(s.api_url, API_URL);
        assert_eq!(s.cdn_url, CDN_URL);
        assert_eq!(s.app_id, "bot");
        assert_eq!(s.route_tag, None);
        assert_eq!(s.polling_timeout, Duration::from_secs(35));
        assert_eq!(s.client_version(), 0x0001_0000);
        assert!(s.allows_file("Report.PDF") && !s.allows_file("run.exe"));
        assert!(
            s.file_hosts
                .patterns()
                .any(|p| p == "novac2c.cdn.weixin.qq.com")
        );
    }

    #[test]
    fn deerflows_names_for_the_endpoints_and_every_key_are_read() {
        let (s, found) = check(json!({
            "qrcode_login_enabled": true, "base_url": "http://127.0.0.1:9/",
            "cdn_base_url": "http://127.0.0.1:9/c2c", "channel_version": "2.4.6",
            "qrcode_bot_type": 3, "respect_server_longpoll_timeout": false,
            "max_inbound_image_bytes": 0, "max_outbound_file_bytes": 1024,
            "allowed_file_extensions": ["PDF", ".txt", " "], "state_dir": "/var/lib/wechat",
        }));
        let s = s.unwrap();
        assert_eq!(found, ["W channels.wechat.state_dir"]);
        assert!(s.bot_token.is_none());
        assert_eq!(s.api_url, "http://127.0.0.1:9");
        assert_eq!(s.cdn_url, "http://127.0.0.1:9/c2c");
        assert_eq!(s.client_version(), (2 << 16) | (4 << 8) | 6);
        assert!(!s.respect_server_longpoll_timeout);
        assert_eq!(s.max_inbound_image_bytes, MAX_MEDIA_BYTES as u64);
        assert_eq!(s.max_outbound_file_bytes, 1024);
        assert_eq!(s.allowed_file_extensions, [".pdf", ".txt"]);
        assert!(s.file_hosts.patterns().any(|p| p == "127.0.0.1:9"));
    }

    #[test]
    fn every_problem_is_reported_and_no_secret_is_echoed() {
        let (s, found) = check(json!({"surprise": 1, "polling_timeout": 0}));
        assert!(s.is_none());
        assert_eq!(
            found,
            [
                "W channels.wechat.surprise",
                "E channels.wechat.bot_token",
                "E channels.wechat.polling_timeout",
            ]
        );
        let mut issues = Issues::new("channels.wechat");
        let settings = validate(
            json!({"bot_token": "TOPSECRET", "api_url": "ftp://x"}),
            &mut issues,
        );
        assert!(settings.is_none());
        assert!(!format!("{:?}", issues.into_vec()).contains("TOPSECRET"));
        let (s, _) = check(json!({"bot_token": "TOPSECRET"}));
        let printed = format!("{s:?} {}", serde_json::to_string(&s).unwrap());
        assert!(!printed.contains("TOPSECRET"), "{printed}");
    }
}
