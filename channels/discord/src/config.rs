//! The `channels.discord` block (the adapter's keys: `bot_token`, `allowed_guilds`,
//! `mention_only`, `allowed_channels`, `thread_mode`, `api_url`, `file_hosts`; the shared `enabled`,
//! `allowed_users` and `locale` are the daemon's): raw keys as an operator writes them, and
//! the resolved settings the adapter runs with.
//!
//! Every REST call goes to `{api_url}/api/v10/…` and the gateway is whatever
//! `GET /gateway/bot` returns, so tests point `api_url` at a fake; nothing else names
//! `discord.com`. Defaults follow DeerFlow (spec platforms.md §7.4): `mention_only` false,
//! `thread_mode` = `mention_only`. Validation is pure (no socket) and never echoes the token;
//! unknown keys are warnings, since the file is shared with DeerFlow.

use std::collections::BTreeSet;

use im_bridge_channel::config::{self, Issues};
use im_bridge_channel::{FileHosts, Secret};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The REST base of the real Discord (REST under `/api/v10`).
pub const API_URL: &str = "https://discord.com";
/// The REST API version in every path.
pub const API_VERSION: u8 = 10;
/// Where Discord serves attachments: `Attachment.url` is on `cdn.discordapp.com`,
/// `Attachment.proxy_url` on `media.discordapp.net` (Discord's API reference, "Attachment
/// Object", and its "Image Formatting" CDN section). An attachment elsewhere is not fetched.
pub const FILE_HOSTS: &[&str] = &["cdn.discordapp.com", "media.discordapp.net"];
/// Most ids accepted in one of the allow-lists (bounded memory on a hostile file).
const MAX_IDS: usize = 10_000;

/// The adapter's keys of `channels.discord`, as written.
#[derive(Debug, Default, Deserialize)]
pub struct RawDiscordConfig {
    /// The bot token from the Developer Portal (Bot → Reset Token), usually
    /// `$DISCORD_BOT_TOKEN`. Required.
    pub bot_token: Option<Secret>,
    /// Guild (server) ids the bot serves; when set, other guilds and all DMs are ignored
    /// without any side effect. Integers, or strings of digits.
    pub allowed_guilds: Option<Value>,
    /// Only messages that mention the bot are answered (except in `allowed_channels`).
    /// Default false.
    pub mention_only: Option<bool>,
    /// Channel ids answered without a mention even with `mention_only`.
    pub allowed_channels: Option<Value>,
    /// Answer in a thread created from the user's message. Default = `mention_only`.
    pub thread_mode: Option<bool>,
    /// REST base URL without a path. Default `https://discord.com`.
    pub api_url: Option<String>,
    /// Hosts attachments may be fetched from (`cdn.example.com`, `.example.com` for a domain
    /// and its subdomains, `127.0.0.1:8080`). Default [`FILE_HOSTS`].
    pub file_hosts: Option<Value>,
}

/// What the Discord adapter runs with.
#[derive(Clone, Debug, Serialize)]
pub struct DiscordSettings {
    /// The bot token (sent as `Authorization: Bot <token>`; never printed).
    pub bot_token: Secret,
    /// The guilds served; empty = every guild and DMs.
    pub allowed_guilds: BTreeSet<u64>,
    /// Only messages mentioning the bot are answered, outside `allowed_channels`.
    pub mention_only: bool,
    /// Channels answered without a mention.
    pub allowed_channels: BTreeSet<u64>,
    /// Replies go into a thread created from the user's message.
    pub thread_mode: bool,
    /// REST base URL, without a trailing slash (REST is `{api_url}/api/v10/…`).
    pub api_url: String,
    /// The hosts attachments are fetched from; a URL elsewhere is refused unfetched.
    pub file_hosts: FileHosts,
}

impl DiscordSettings {
    /// The REST root, `{api_url}/api/v10`.
    pub fn rest_root(&self) -> String {
        format!("{}/api/v{API_VERSION}", self.api_url)
    }

    /// Whether a message from `guild` (`None` = a DM) may be looked at at all: with
    /// `allowed_guilds` set, other guilds and DMs are not.
    pub fn guild_allowed(&self, guild: Option<u64>) -> bool {
        if self.allowed_guilds.is_empty() {
            return true;
        }
        guild.is_some_and(|g| self.allowed_guilds.contains(&g))
    }
}

/// Reads and validates the adapter's keys of `channels.discord`.
pub fn validate(block: Value, issues: &mut Issues) -> Option<DiscordSettings> {
    let raw: RawDiscordConfig = config::parse_block(block, issues)?;
    raw.validate(issues)
}

impl RawDiscordConfig {
    /// Resolves the raw keys, recording every problem. Pure.
    pub fn validate(&self, issues: &mut Issues) -> Option<DiscordSettings> {
        let errors_before = issues.error_count();
        let bot_token = config::required_secret(
            issues,
            "bot_token",
            self.bot_token.as_ref(),
            "required: the bot token from the Discord Developer Portal (Bot → Reset Token), e.g. bot_token: $DISCORD_BOT_TOKEN",
        );
        if let Some(token) = &bot_token {
            let t = token.expose();
            if t.trim() != t || t.bytes().any(|b| !b.is_ascii_graphic()) {
                issues.error(
                    "bot_token",
                    "expected the token alone: visible ASCII, no spaces or \"Bot \" prefix",
                );
            }
        }
        let allowed_guilds = id_set(issues, "allowed_guilds", self.allowed_guilds.as_ref());
        let allowed_channels = id_set(issues, "allowed_channels", self.allowed_channels.as_ref());
        let mention_only = self.mention_only.unwrap_or(false);
        let thread_mode = self.thread_mode.unwrap_or(mention_only);
        let api_url = config::root_url(
            issues,
            "api_url",
            self.api_url.as_deref(),
            API_URL,
            "REST adds /api/v10",
        );
        let file_hosts =
            config::file_hosts(issues, "file_hosts", self.file_hosts.as_ref(), FILE_HOSTS);
        if issues.error_count() > errors_before {
            return None;
        }
        Some(DiscordSettings {
            bot_token: bot_token?,
            allowed_guilds,
            mention_only,
            allowed_channels,
            thread_mode,
            api_url,
            file_hosts,
        })
    }
}

/// A list of snowflake ids: integers or strings of digits (one id alone is a list of
/// one). Anything else is an error at the key.
fn id_set(issues: &mut Issues, key: &str, value: Option<&Value>) -> BTreeSet<u64> {
    let one = |v: &Value| match v {
        Value::Number(n) => n.as_u64().filter(|&id| id > 0),
        Value::String(s) => {
            let s = s.trim();
            (!s.is_empty() && s.len() <= 20 && s.bytes().all(|b| b.is_ascii_digit()))
                .then(|| s.parse::<u64>().ok())
                .flatten()
                .filter(|&id| id > 0)
        }
        _ => None,
    };
    let items: Vec<&Value> = match value {
        None | Some(Value::Null) => return BTreeSet::new(),
        Some(Value::String(s)) if s.trim().is_empty() => return BTreeSet::new(),
        Some(Value::Array(items)) => items.iter().collect(),
        Some(other) => vec![other],
    };
    if items.len() > MAX_IDS {
        issues.error(key, format!("expected at most {MAX_IDS} ids"));
        return BTreeSet::new();
    }
    let mut ids = BTreeSet::new();
    for (i, item) in items.iter().enumerate() {
        match one(item) {
            Some(id) => {
                ids.insert(id);
            }
            None => issues.error(
                key,
                format!("entry {i}: expected a numeric id such as 1234567890123456789"),
            ),
        }
    }
    ids
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn check(block: Value) -> (Option<DiscordSettings>, Vec<String>) {
        im_bridge_channel::fixtures::validated(validate, "channels.discord", block)
    }

    #[test]
    fn the_token_alone_gives_the_documented_defaults() {
        let (s, found) = check(json!({"bot_token": "abc.def.ghi"}));
        let s = s.unwrap();
        assert!(found.is_empty(), "{found:?}");
        assert_eq!(s.api_url, API_URL);
        assert_eq!(s.rest_root(), "https://discord.com/api/v10");
        assert!(!s.mention_only && !s.thread_mode);
        assert!(s.allowed_guilds.is_empty() && s.allowed_channels.is_empty());
        assert!(s.guild_allowed(None) && s.guild_allowed(Some(7)));
        assert_eq!(s.file_hosts.patterns().collect::<Vec<_>>(), FILE_HOSTS);
    }

    #[test]
    fn file_hosts_are_host_patterns() {
        let (s, found) = check(json!({"bot_token": "t", "file_hosts": ["127.0.0.1:9"]}));
        assert!(found.is_empty(), "{found:?}");
        assert_eq!(s.unwrap().file_hosts.to_string(), "127.0.0.1:9");
        let (s, found) = check(json!({"bot_token": "t", "file_hosts": ["", "a/b"]}));
        assert!(s.is_none());
        assert_eq!(found, ["E channels.discord.file_hosts"; 2]);
    }

    #[test]
    fn thread_mode_follows_mention_only_unless_set() {
        let (s, _) = check(json!({"bot_token": "t", "mention_only": true}));
        let s = s.unwrap();
        assert!(s.mention_only && s.thread_mode);
        let (s, _) = check(json!({"bot_token": "t", "mention_only": true, "thread_mode": false}));
        assert!(!s.unwrap().thread_mode);
        let (s, _) = check(json!({"bot_token": "t", "thread_mode": true}));
        let s = s.unwrap();
        assert!(!s.mention_only && s.thread_mode);
    }

    #[test]
    fn ids_are_integers_or_digit_strings_and_guilds_exclude_dms() {
        let (s, found) = check(json!({
            "bot_token": "t",
            "allowed_guilds": [1234567890123456789u64, "42"],
            "allowed_channels": "77",
            "api_url": "http://127.0.0.1:9/",
        }));
        let s = s.unwrap();
        assert!(found.is_empty(), "{found:?}");
        assert_eq!(
            s.allowed_guilds.iter().copied().collect::<Vec<_>>(),
            [42, 1234567890123456789]
        );
        assert_eq!(s.allowed_channels.iter().copied().collect::<Vec<_>>(), [77]);
        assert_eq!(s.rest_root(), "http://127.0.0.1:9/api/v10");
        assert!(s.guild_allowed(Some(42)));
        assert!(!s.guild_allowed(Some(43)));
        assert!(
            !s.guild_allowed(None),
            "a DM is excluded when guilds are set"
        );
    }

    #[test]
    fn every_problem_is_reported_at_its_key_and_no_token_is_echoed() {
        let (s, found) = check(json!({
            "bot_token": "", "allowed_guilds": ["abc", -1, 1.5], "allowed_channels": {"x": 1},
            "api_url": "ftp://x",
        }));
        assert!(s.is_none());
        assert_eq!(
            found,
            [
                "E channels.discord.bot_token",
                "E channels.discord.allowed_guilds",
                "E channels.discord.allowed_guilds",
                "E channels.discord.allowed_guilds",
                "E channels.discord.allowed_channels",
                "E channels.discord.api_url",
            ]
        );
        let (s, found) = check(json!({"bot_token": "t", "api_url": "https://proxy/api/v10"}));
        assert!(s.is_none());
        assert_eq!(found, ["E channels.discord.api_url"]);
        let (s, found) = check(json!({"bot_token": "Bot TOPSECRET"}));
        assert!(s.is_none());
        assert_eq!(found, ["E channels.discord.bot_token"]);
        let mut issues = Issues::new("channels.discord");
        let settings = validate(json!({"bot_token": "Bot TOPSECRET"}), &mut issues);
        let text = format!("{:?} {settings:?}", issues.into_vec());
        assert!(!text.contains("TOPSECRET"), "{text}");
        let (s, _) = check(json!({"bot_token": "TOPSECRET"}));
        let printed = format!("{s:?} {}", serde_json::to_string(&s).unwrap());
        assert!(!printed.contains("TOPSECRET"), "{printed}");
    }

    #[test]
    fn unknown_keys_warn() {
        let (s, found) = check(json!({"bot_token": "t", "enabled": true, "surprise": 1}));
        assert!(s.is_some());
        assert!(
            found.contains(&"W channels.discord.surprise".to_owned()),
            "{found:?}"
        );
    }
}
