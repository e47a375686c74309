//! Validated settings: what the daemon actually runs with.
//!
//! [`validate`] is pure: it reads the parsed file and the environment's `DEER_FLOW_*`
//! fallbacks, and opens no file or socket, so `check-config` can run it anywhere.
//!
//! Child: `values`, the checks of one value each (URLs, numbers, the store, tags, lists).

use std::net::SocketAddr;
use std::num::NonZeroUsize;
use std::path::PathBuf;
use std::time::Duration;

use std::sync::Arc;

use im_bridge_channel::{AllowedUsers, Configured, Issues, Secret, config};

use crate::manager::Queueing;
use serde::Serialize;
use serde_json::{Map, Value as Json};
use serde_yaml_ng::{Mapping, Value};

use super::raw::RawChannelBlock;
use super::{ConfigError, Env, Parsed};

const DEFAULT_LANGGRAPH_URL: &str = "http://localhost:8001/api";
const DEFAULT_GATEWAY_URL: &str = "http://localhost:8001";
const DEFAULT_QUEUE: usize = 1000;
const DEFAULT_CONCURRENCY: usize = 64;
const DEFAULT_GRACE_SECONDS: f64 = 3.0;
const DEFAULT_FROM_CHAT_SECONDS: f64 = 120.0;
const DEFAULT_STORE: &str = "sqlite://./im-bridge.db";
const DEFAULT_ADMIN: &str = "127.0.0.1:9464";
/// The shortest `bridge.admin_token`: guessing it must be hopeless.
const ADMIN_TOKEN_MIN: usize = 16;
const DEFAULT_LOCALE: &str = "en-US";

/// Everything the daemon needs, validated.
#[derive(Clone, Debug, Serialize)]
pub struct Settings {
    /// How to reach the DeerFlow Gateway.
    pub gateway: GatewaySettings,
    /// Intake bounds and shutdown timing.
    pub intake: IntakeSettings,
    /// Session defaults for every channel (`channels.session`).
    pub session: SessionLayer,
    /// The channels that will start, in name order.
    pub channels: Vec<ChannelSettings>,
    /// User-owned channel connections (identity binding) are enabled.
    pub connections_enabled: bool,
    /// The admins' default reply language.
    pub notification_locale: String,
    /// Where bindings, dedupe keys and chat settings live.
    pub store: StoreLocation,
    /// Address of the admin endpoints.
    pub admin_listen: SocketAddr,
    /// The bearer token of the operator's admin endpoints (issue 33); `None`: they are off.
    pub admin_token: Option<Secret>,
    /// Directory of extra or overriding catalogs.
    pub locales_dir: Option<PathBuf>,
    /// Most messages one reply may fill.
    pub max_reply_messages: NonZeroUsize,
    /// How long untouched group-topic bindings and reply-chain records are kept.
    #[serde(with = "secs")]
    pub conversation_ttl: Duration,
    /// How long a final that could not be delivered is retried (`bridge.final_retry_hours`).
    #[serde(with = "secs")]
    pub final_retry: Duration,
    /// A message older than this when it arrives is not acted on
    /// (`bridge.max_event_age_seconds`; zero: the guard is off). Channels may have their own.
    #[serde(with = "secs")]
    pub max_event_age: Duration,
    /// DeerFlow runs in single-user mode (`DEER_FLOW_AUTH_DISABLED=1` in the bridge's
    /// environment, as in DeerFlow's own): every conversation belongs to its default user.
    pub single_user: bool,
    /// The key channel secrets are encrypted with at rest (`IM_BRIDGE_SECRET_KEY`, issue
    /// 32); without it they are not persisted. Prints as `<redacted>`.
    pub secret_key: Option<crate::state::SecretKey>,
}

/// How to reach the DeerFlow Gateway.
#[derive(Clone, Debug, Serialize)]
pub struct GatewaySettings {
    /// LangGraph-compatible API base (threads, runs).
    pub langgraph_url: String,
    /// Gateway base (goal, models, memory).
    pub gateway_url: String,
    /// `X-DeerFlow-Internal-Token`.
    pub internal_token: Option<Secret>,
    /// Read timeout of calls that wait for a model (`/goal from-chat`, `/compact`).
    #[serde(with = "secs")]
    pub goal_from_chat_timeout: Duration,
}

impl GatewaySettings {
    /// The Gateway client's configuration: these URLs, the token (as the client's own
    /// redacted type, so the client crate needs no chat-side crate) and the from-chat
    /// timeout; every other bound at the client's default.
    pub fn client_config(&self) -> crate::gateway::GatewayConfig {
        let token = |t: &Secret| crate::gateway::InternalToken::new(t.expose());
        crate::gateway::GatewayConfig {
            langgraph_url: self.langgraph_url.clone(),
            gateway_url: self.gateway_url.clone(),
            internal_token: self.internal_token.as_ref().map(token),
            from_chat_timeout: self.goal_from_chat_timeout,
            ..crate::gateway::GatewayConfig::default()
        }
    }
}

/// Intake bounds.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct IntakeSettings {
    /// Inbound queue capacity (queued + reserved); a full queue refuses new messages.
    pub inbound_queue_maxsize: NonZeroUsize,
    /// Messages handled at once.
    pub max_concurrency: NonZeroUsize,
    /// How long shutdown waits for admitted work before cancelling it.
    #[serde(with = "secs")]
    pub shutdown_grace: Duration,
}

/// One session layer, converted to the JSON the run body carries.
#[derive(Clone, Debug, Default, Serialize)]
pub struct SessionLayer {
    /// Agent name, if this layer sets one.
    pub assistant_id: Option<String>,
    /// Merged into the run `config`.
    pub config: Map<String, Json>,
    /// Merged into the run `context`.
    pub context: Map<String, Json>,
    /// Per-user layers, keyed by raw platform user id.
    pub users: std::collections::BTreeMap<String, SessionLayer>,
}

/// One enabled channel.
#[derive(Clone, Debug, Serialize)]
pub struct ChannelSettings {
    /// Provider name (`console`, `telegram`, …).
    pub name: String,
    /// Who may talk to the bot.
    pub allowed_users: AllowedUsers,
    /// Who may change group-chat settings.
    pub admin_users: AllowedUsers,
    /// Session overrides.
    pub session: SessionLayer,
    /// Default reply language of this channel.
    pub locale: Option<String>,
    /// What a message meets while its conversation is busy.
    pub queueing: Queueing,
    /// Adjustments of the channel's declared rate budgets (issue 33).
    pub rate_budgets: Vec<crate::budgets::BudgetOverride>,
    /// How old a message may be and still be acted on (its `max_event_age_seconds`, else
    /// the bridge's; zero: the guard is off).
    #[serde(with = "secs")]
    pub max_event_age: Duration,
    /// The adapter's own settings, validated by its [`Platform`](im_bridge_channel::Platform)
    /// and ready to build.
    #[serde(serialize_with = "effective")]
    pub platform: Arc<dyn Configured>,
}

fn effective<S: serde::Serializer>(c: &Arc<dyn Configured>, s: S) -> Result<S::Ok, S::Error> {
    c.effective().serialize(s)
}

/// Where state is stored.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum StoreLocation {
    /// An embedded SQLite file.
    Sqlite(PathBuf),
    /// A shared Postgres database (the URL may carry a password, so it is a secret).
    Postgres(Secret),
}

mod values;

use values::{
    check_locale_tag, event_age, is_channel_block, join, positive, queueing, rate_budgets, seconds,
    session_layer, store_location, url_setting, user_list,
};

mod secs {
    use std::time::Duration;

    pub fn serialize<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_f64(d.as_secs_f64())
    }
}

/// Turns a parsed file into settings, or lists every problem. Returns warnings too.
pub fn validate(
    parsed: Parsed,
    env: &dyn Env,
) -> Result<(Settings, Vec<String>), Vec<ConfigError>> {
    let Parsed {
        mut raw,
        unset,
        ignored,
        type_errors,
    } = parsed;
    let mut errors = type_errors;
    let mut warnings: Vec<String> = ignored
        .iter()
        .map(|p| format!("{p}: unknown key, ignored"))
        .collect();

    // Parse channel blocks first: whether a block is enabled decides whether an unset
    // variable inside it matters.
    let mut blocks = Vec::new();
    for (name, value) in std::mem::take(&mut raw.channels.blocks) {
        let path = format!("channels.{name}");
        let value = if value.is_null() {
            Value::Mapping(Mapping::new())
        } else {
            value
        };
        match serde_path_to_error::deserialize::<_, RawChannelBlock>(value) {
            Ok(block) => blocks.push((name, block)),
            Err(e) => errors.push(ConfigError::error(
                join(&path, &e.path().to_string()),
                e.into_inner().to_string(),
            )),
        }
    }
    let enabled = |name: &str| blocks.iter().any(|(n, b)| n == name && b.enabled);
    for var in &unset {
        let mut parts = var.path.splitn(3, '.');
        let (section, key) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
        let key = key.split('[').next().unwrap_or(key);
        let matters = match section {
            "bridge" => true,
            "channels" => !is_channel_block(key) || enabled(key),
            "channel_connections" => {
                !key.is_empty() && !raw.channel_connections.providers.contains_key(key)
            }
            _ => false,
        };
        if matters {
            errors.push(ConfigError::error(
                &var.path,
                format!("environment variable ${} is not set", var.name),
            ));
        }
    }

    let ch = &raw.channels;
    let langgraph_url = url_setting(
        ch.langgraph_url.as_deref(),
        env.var("DEER_FLOW_CHANNELS_LANGGRAPH_URL"),
        DEFAULT_LANGGRAPH_URL,
        "channels.langgraph_url",
        &mut errors,
    );
    let gateway_url = url_setting(
        ch.gateway_url.as_deref(),
        env.var("DEER_FLOW_CHANNELS_GATEWAY_URL"),
        DEFAULT_GATEWAY_URL,
        "channels.gateway_url",
        &mut errors,
    );
    let inbound_queue_maxsize = positive(
        "channels.inbound_queue_maxsize",
        ch.inbound_queue_maxsize,
        DEFAULT_QUEUE,
        1_000_000,
        &mut errors,
    );
    let max_concurrency = positive(
        "channels.max_concurrency",
        ch.max_concurrency,
        DEFAULT_CONCURRENCY,
        10_000,
        &mut errors,
    );
    let shutdown_grace = seconds(
        "channels.shutdown_grace_period_seconds",
        ch.shutdown_grace_period_seconds,
        DEFAULT_GRACE_SECONDS,
        true,
        &mut errors,
    );
    let session = ch
        .session
        .as_ref()
        .map(|s| session_layer(s, "channels.session", &mut errors))
        .unwrap_or_default();

    let b = &raw.bridge;
    let goal_from_chat_timeout = seconds(
        "bridge.goal_from_chat_timeout_seconds",
        b.goal_from_chat_timeout_seconds,
        DEFAULT_FROM_CHAT_SECONDS,
        false,
        &mut errors,
    );
    let internal_token = b
        .internal_token
        .clone()
        .filter(|t| !t.expose().is_empty())
        .or_else(|| {
            env.var("DEER_FLOW_INTERNAL_AUTH_TOKEN")
                .filter(|t| !t.is_empty())
                .map(Secret::new)
        });
    if internal_token.is_none() {
        warnings.push("bridge.internal_token: not set and DEER_FLOW_INTERNAL_AUTH_TOKEN is empty; the Gateway will refuse our calls unless its auth is disabled".into());
    }
    let store = store_location(b.store.as_deref().unwrap_or(DEFAULT_STORE), &mut errors);
    // Named by the variable, never echoed (issue 32).
    let secret_key = crate::state::SecretKey::from_env(env).unwrap_or_else(|error| {
        errors.push(ConfigError::error(
            crate::state::SECRET_KEY_ENV,
            error.to_string(),
        ));
        None
    });
    let max_reply_messages = positive(
        "bridge.max_reply_messages",
        b.max_reply_messages,
        crate::manager::DEFAULT_MAX_REPLY_MESSAGES,
        1_000,
        &mut errors,
    );
    let conversation_ttl = {
        let mut issues = Issues::new("bridge");
        let days = b
            .conversation_ttl_days
            .unwrap_or(crate::retention::DEFAULT_TTL_DAYS);
        let ttl = config::seconds(
            &mut issues,
            "conversation_ttl_days",
            Some(days * 86_400.0),
            Duration::from_secs_f64(crate::retention::DEFAULT_TTL_DAYS * 86_400.0),
            3_600.0..=(3_650.0 * 86_400.0),
        );
        if issues.has_errors() {
            errors.push(ConfigError::error(
                "bridge.conversation_ttl_days",
                format!("expected a number of days from 0.05 (about an hour) to 3650, got {days}"),
            ));
        }
        ttl
    };
    let final_retry = {
        let mut issues = Issues::new("bridge");
        let default = crate::manager::journal::DEFAULT_FINAL_RETRY_HOURS as f64;
        let hours = b.final_retry_hours.unwrap_or(default);
        let retry = config::seconds(
            &mut issues,
            "final_retry_hours",
            Some(hours * 3_600.0),
            Duration::from_secs_f64(default * 3_600.0),
            60.0..=(7.0 * 86_400.0),
        );
        if issues.has_errors() {
            errors.push(ConfigError::error(
                "bridge.final_retry_hours",
                format!("expected a number of hours from 0.02 (a minute) to 168, got {hours}"),
            ));
        }
        retry
    };
    let max_event_age = event_age(
        "bridge.max_event_age_seconds",
        b.max_event_age_seconds,
        crate::manager::stale::DEFAULT_MAX_EVENT_AGE,
        &mut errors,
    );
    let admin_text = b.admin_listen.as_deref().unwrap_or(DEFAULT_ADMIN);
    let admin_listen = admin_text.parse::<SocketAddr>().unwrap_or_else(|_| {
        errors.push(ConfigError::error(
            "bridge.admin_listen",
            format!("expected an address such as 127.0.0.1:9464, got {admin_text:?}"),
        ));
        SocketAddr::from(([127, 0, 0, 1], 9464))
    });
    let admin_token = b.admin_token.clone().filter(|t| !t.is_empty());
    if admin_token
        .as_ref()
        .is_some_and(|t| t.expose().chars().count() < ADMIN_TOKEN_MIN)
    {
        errors.push(ConfigError::error(
            "bridge.admin_token",
            format!("expected at least {ADMIN_TOKEN_MIN} characters (e.g. openssl rand -hex 32)"),
        ));
    }
    let locales_dir = b
        .locales_dir
        .as_ref()
        .filter(|d| !d.is_empty())
        .map(PathBuf::from);

    let cc = &raw.channel_connections;
    let notification_locale = cc
        .notification_locale
        .clone()
        .unwrap_or_else(|| DEFAULT_LOCALE.into());
    check_locale_tag(
        "channel_connections.notification_locale",
        &notification_locale,
        &mut errors,
    );
    if cc.enabled && cc.require_bound_identity.unwrap_or(true) {
        errors.push(ConfigError::error(
            "channel_connections.enabled",
            "user-owned connections with require_bound_identity are not supported by im-bridge yet; set enabled: false (or require_bound_identity: false) until the identity gate lands",
        ));
    }

    let mut channels = Vec::new();
    let errors_before_channels = errors.len();
    for (name, block) in blocks {
        if !block.enabled {
            continue;
        }
        let path = format!("channels.{name}");
        let Some(platform) = crate::platforms::find(&name) else {
            match absent_adapter(&path, &name, crate::platforms::KNOWN_PLATFORMS) {
                Ok(warning) => warnings.push(warning),
                Err(error) => errors.push(error),
            }
            continue;
        };
        let mut issues = Issues::new(&path);
        let configured = match serde_json::to_value(&block.platform) {
            Ok(keys) => platform.validate(keys, &mut issues),
            Err(error) => {
                issues.error("", format!("expected a mapping with string keys: {error}"));
                None
            }
        };
        for issue in issues.into_vec() {
            if !issue.is_error() {
                warnings.push(issue.to_string());
            } else if !errors.iter().any(|e| e.path == issue.path) {
                // An unset `$VAR` was already reported at the same path.
                errors.push(issue);
            }
        }
        let Some(configured) = configured else {
            continue;
        };
        if let Some(locale) = &block.locale {
            check_locale_tag(&format!("{path}.locale"), locale, &mut errors);
        }
        let queueing = queueing(&path, &block, &mut errors);
        let rate_budgets = rate_budgets(&path, &block, &mut errors);
        let channel_event_age = event_age(
            &format!("{path}.max_event_age_seconds"),
            block.max_event_age_seconds,
            max_event_age,
            &mut errors,
        );
        channels.push(ChannelSettings {
            allowed_users: user_list(
                &format!("{path}.allowed_users"),
                block.allowed_users.as_ref(),
                &mut errors,
            ),
            admin_users: user_list(
                &format!("{path}.admin_users"),
                block.admin_users.as_ref(),
                &mut errors,
            ),
            session: block
                .session
                .as_ref()
                .map(|s| session_layer(s, &format!("{path}.session"), &mut errors))
                .unwrap_or_default(),
            locale: block.locale.clone(),
            queueing,
            rate_budgets,
            max_event_age: channel_event_age,
            name,
            platform: configured,
        });
    }
    let channel_errors = errors.len() > errors_before_channels;
    // Locales must name a catalog im-bridge has (embedded, or from locales_dir).
    let catalogs = match &locales_dir {
        None => crate::i18n::Catalogs::embedded().ok(),
        Some(dir) => match crate::i18n::check_dir(dir) {
            Ok(catalog_warnings) => {
                warnings.extend(
                    catalog_warnings
                        .into_iter()
                        .map(|w| format!("bridge.locales_dir: {w}")),
                );
                crate::i18n::Catalogs::load(Some(dir)).ok()
            }
            Err(catalog_errors) => {
                errors.extend(
                    catalog_errors
                        .into_iter()
                        .map(|e| ConfigError::error("bridge.locales_dir", e)),
                );
                None
            }
        },
    };
    if let Some(catalogs) = &catalogs {
        let supported = catalogs.supported_list();
        let mut check = |path: String, tag: &str| {
            if catalogs.negotiate(tag).is_none() && !errors.iter().any(|e| e.path == path) {
                errors.push(ConfigError::error(
                    path,
                    format!("there is no catalog for {tag:?}; supported: {supported}"),
                ));
            }
        };
        check(
            "channel_connections.notification_locale".into(),
            &notification_locale,
        );
        for channel in &channels {
            if let Some(locale) = &channel.locale {
                check(format!("channels.{}.locale", channel.name), locale);
            }
        }
    }
    // An enabled channel with errors already says why it will not start.
    if channels.is_empty() && !channel_errors {
        // The registry names the platforms; this generic code does not (tests/source_rules.rs).
        let names: Vec<&str> = crate::platforms::PLATFORMS
            .iter()
            .map(|p| p.name())
            .collect();
        errors.push(ConfigError::error(
            "channels",
            format!(
                "no channel is enabled, so nothing would start; set enabled: true on at least one of this build's platforms ({})",
                names.join(", ")
            ),
        ));
    }

    if !errors.is_empty() {
        return Err(errors);
    }
    let settings = Settings {
        gateway: GatewaySettings {
            langgraph_url,
            gateway_url,
            internal_token,
            goal_from_chat_timeout,
        },
        intake: IntakeSettings {
            inbound_queue_maxsize,
            max_concurrency,
            shutdown_grace,
        },
        session,
        channels,
        connections_enabled: cc.enabled,
        notification_locale,
        store,
        admin_listen,
        admin_token,
        locales_dir,
        max_reply_messages,
        conversation_ttl,
        final_retry,
        max_event_age,
        single_user: env
            .var("DEER_FLOW_AUTH_DISABLED")
            .is_some_and(|v| matches!(v.trim(), "1" | "true" | "TRUE" | "True" | "yes")),
        secret_key,
    };
    Ok((settings, warnings))
}

/// An enabled block whose platform this build has no adapter for: an error when im-bridge
/// has the platform (one of `known`: this build lacks its feature), else a warning (a
/// platform im-bridge has no adapter for at all, e.g. one only DeerFlow serves).
pub(crate) fn absent_adapter(
    path: &str,
    name: &str,
    known: &[&str],
) -> Result<String, ConfigError> {
    if known.contains(&name) {
        Err(ConfigError::error(
            path,
            format!(
                "this build of im-bridge has no {name} adapter; rebuild with the {name} feature, or set enabled: false"
            ),
        ))
    } else {
        Ok(format!(
            "{path}: enabled, but im-bridge has no {name} adapter; it will not start here"
        ))
    }
}
