//! The sections behind [`validate`](super::validate), one function each, in the order it
//! calls them: the channel blocks' shape, the unset variables that matter, the keys of
//! `channels:` itself, `bridge:` (the Gateway's token and timeout, where state lives, the
//! bounds, the admin endpoints), `channel_connections:`, each enabled channel through its
//! platform, the language tags against the catalogs, and at least one channel. Each records
//! what is wrong at its key path in [`Findings`] and goes on, so one pass lists every
//! problem; the order of the calls is the order problems are listed in.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::num::NonZeroUsize;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use im_bridge_channel::{AllowedUsers, Configured, Issues, Secret, config};
use serde_yaml_ng::{Mapping, Value};

use super::super::raw::{RawBridge, RawChannelBlock, RawChannelConnections, RawChannels};
use super::super::{ConfigError, Env, UnsetVar};
use super::values::{
    check_locale_tag, event_age, is_channel_block, join, positive, queueing, rate_budgets, seconds,
    session_layer, store_location, url_setting, user_list,
};
use super::{ChannelSettings, IntakeSettings, SessionLayer, absent_adapter};
use crate::i18n::Catalogs;
use crate::state::{SECRET_KEY_ENV, SecretKey};
use crate::store::StoreLocation;

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

/// What validation found so far: every problem at its key path, and the warnings.
pub(super) struct Findings {
    /// The problems, in the order they were found.
    pub(super) errors: Vec<ConfigError>,
    /// What the operator should know but does not stop the daemon.
    pub(super) warnings: Vec<String>,
}

impl Findings {
    /// What parsing found: the values of the wrong type, and the keys it ignored.
    pub(super) fn new(type_errors: Vec<ConfigError>, ignored: &[String]) -> Self {
        Self {
            errors: type_errors,
            warnings: ignored
                .iter()
                .map(|p| format!("{p}: unknown key, ignored"))
                .collect(),
        }
    }
}

/// DeerFlow's own channels that im-bridge has no adapter for: their blocks in the shared
/// file are DeerFlow's business (a warning only when one is enabled).
pub(crate) const DEERFLOW_ONLY_CHANNELS: &[&str] = &["buzz", "github"];

/// The channel blocks (`channels.<name>`) in the shape every platform shares, by name; an
/// empty block is an empty mapping. A key that names no platform im-bridge or DeerFlow
/// knows (a slip such as `max_concurency: 8` or `sesion:`) is a warning and ignored, as
/// unknown keys in DeerFlow's blocks are, unless it is an enabled block (see `adapter`).
pub(super) fn channel_blocks(
    raw: BTreeMap<String, Value>,
    found: &mut Findings,
) -> Vec<(String, RawChannelBlock)> {
    let mut blocks = Vec::new();
    for (name, value) in raw {
        let path = format!("channels.{name}");
        let known = crate::platforms::KNOWN_PLATFORMS.contains(&name.as_str())
            || DEERFLOW_ONLY_CHANNELS.contains(&name.as_str());
        let value = match value {
            Value::Null => Value::Mapping(Mapping::new()),
            Value::Mapping(block)
                if !known
                    && !block
                        .get("enabled")
                        .is_some_and(|e| e == &Value::Bool(true)) =>
            {
                found.warnings.push(format!("{path}: unknown key, ignored"));
                continue;
            }
            Value::Mapping(block) => Value::Mapping(block),
            _ if !known => {
                found.warnings.push(format!("{path}: unknown key, ignored"));
                continue;
            }
            other => other,
        };
        match serde_path_to_error::deserialize::<_, RawChannelBlock>(value) {
            Ok(block) => blocks.push((name, block)),
            Err(e) => found.errors.push(ConfigError::error(
                join(&path, &e.path().to_string()),
                e.into_inner().to_string(),
            )),
        }
    }
    blocks
}

/// The unset `$VAR`s where they matter: anywhere in `bridge:`, in `channels:` outside a
/// disabled block, in `channel_connections:` outside a provider's block.
pub(super) fn unset_variables(
    unset: &[UnsetVar],
    blocks: &[(String, RawChannelBlock)],
    connections: &RawChannelConnections,
    found: &mut Findings,
) {
    let enabled = |name: &str| blocks.iter().any(|(n, b)| n == name && b.enabled);
    for var in unset {
        let mut parts = var.path.splitn(3, '.');
        let (section, key) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
        let key = key.split('[').next().unwrap_or(key);
        let matters = match section {
            "bridge" => true,
            "channels" => !is_channel_block(key) || enabled(key),
            "channel_connections" => !key.is_empty() && !connections.providers.contains_key(key),
            _ => false,
        };
        if matters {
            found.errors.push(ConfigError::error(
                &var.path,
                format!("environment variable ${} is not set", var.name),
            ));
        }
    }
}

/// The keys of `channels:` itself, for every channel.
pub(super) struct Shared {
    /// `channels.langgraph_url`.
    pub(super) langgraph_url: String,
    /// `channels.gateway_url`.
    pub(super) gateway_url: String,
    /// The intake bounds and the shutdown grace.
    pub(super) intake: IntakeSettings,
    /// `channels.session`.
    pub(super) session: SessionLayer,
}

/// The keys of `channels:` itself: the Gateway's URLs (with DeerFlow's environment
/// fallbacks), the intake bounds, the shutdown grace and the session defaults.
pub(super) fn channels_keys(ch: &RawChannels, env: &dyn Env, found: &mut Findings) -> Shared {
    let errors = &mut found.errors;
    let langgraph_url = url_setting(
        ch.langgraph_url.as_deref(),
        env.var("DEER_FLOW_CHANNELS_LANGGRAPH_URL"),
        DEFAULT_LANGGRAPH_URL,
        "channels.langgraph_url",
        errors,
    );
    let gateway_url = url_setting(
        ch.gateway_url.as_deref(),
        env.var("DEER_FLOW_CHANNELS_GATEWAY_URL"),
        DEFAULT_GATEWAY_URL,
        "channels.gateway_url",
        errors,
    );
    let intake = IntakeSettings {
        inbound_queue_maxsize: positive(
            "channels.inbound_queue_maxsize",
            ch.inbound_queue_maxsize,
            DEFAULT_QUEUE,
            1_000_000,
            errors,
        ),
        max_concurrency: positive(
            "channels.max_concurrency",
            ch.max_concurrency,
            DEFAULT_CONCURRENCY,
            10_000,
            errors,
        ),
        shutdown_grace: seconds(
            "channels.shutdown_grace_period_seconds",
            ch.shutdown_grace_period_seconds,
            DEFAULT_GRACE_SECONDS,
            true,
            errors,
        ),
    };
    let session = ch
        .session
        .as_ref()
        .map(|s| session_layer(s, "channels.session", errors))
        .unwrap_or_default();
    Shared {
        langgraph_url,
        gateway_url,
        intake,
        session,
    }
}

/// The `bridge:` section, checked.
pub(super) struct Bridge {
    /// `bridge.goal_from_chat_timeout_seconds`.
    pub(super) goal_from_chat_timeout: Duration,
    /// `bridge.internal_token`, else `DEER_FLOW_INTERNAL_AUTH_TOKEN`.
    pub(super) internal_token: Option<Secret>,
    /// `bridge.store`.
    pub(super) store: StoreLocation,
    /// `bridge.store_lease_seconds`.
    pub(super) store_lease: Duration,
    /// From [`SECRET_KEY_ENV`].
    pub(super) secret_key: Option<SecretKey>,
    /// `bridge.max_reply_messages`.
    pub(super) max_reply_messages: NonZeroUsize,
    /// `bridge.conversation_ttl_days`.
    pub(super) conversation_ttl: Duration,
    /// `bridge.final_retry_hours`.
    pub(super) final_retry: Duration,
    /// `bridge.max_event_age_seconds`.
    pub(super) max_event_age: Duration,
    /// `bridge.admin_listen`.
    pub(super) admin_listen: SocketAddr,
    /// `bridge.admin_token`.
    pub(super) admin_token: Option<Secret>,
    /// `bridge.locales_dir`.
    pub(super) locales_dir: Option<PathBuf>,
    /// `DEER_FLOW_AUTH_DISABLED`, as DeerFlow reads it.
    pub(super) single_user: bool,
}

/// The `bridge:` section, and the variables of the bridge's environment beside it.
pub(super) fn bridge(b: &RawBridge, env: &dyn Env, found: &mut Findings) -> Bridge {
    let goal_from_chat_timeout = seconds(
        "bridge.goal_from_chat_timeout_seconds",
        b.goal_from_chat_timeout_seconds,
        DEFAULT_FROM_CHAT_SECONDS,
        false,
        &mut found.errors,
    );
    let internal_token = internal_token(b, env, found);
    let store = store_location(
        b.store.as_deref().unwrap_or(DEFAULT_STORE),
        &mut found.errors,
    );
    let store_lease = store_lease(b.store_lease_seconds, &mut found.errors);
    if matches!(store, StoreLocation::Postgres(_)) && store_lease < crate::lease::SHARED_SAFE_TTL {
        found.warnings.push(format!(
            "bridge.store_lease_seconds: {} s on a shared store is under {} s: a database call stalled for its whole {} s timeout could let two replicas answer one message; keep {} s or more unless the database is near",
            store_lease.as_secs_f64(),
            crate::lease::SHARED_SAFE_TTL.as_secs(),
            crate::store::postgres::CALL_TIMEOUT.as_secs(),
            crate::lease::SHARED_SAFE_TTL.as_secs(),
        ));
    }
    // Named by the variable, never echoed (issue 32).
    let secret_key =
        SecretKey::from_var(env.var(SECRET_KEY_ENV).as_deref()).unwrap_or_else(|error| {
            found
                .errors
                .push(ConfigError::error(SECRET_KEY_ENV, error.to_string()));
            None
        });
    let (max_reply_messages, conversation_ttl, final_retry, max_event_age) =
        bounds(b, &mut found.errors);
    let (admin_listen, admin_token) = admin(b, &mut found.errors);
    Bridge {
        goal_from_chat_timeout,
        internal_token,
        store,
        store_lease,
        secret_key,
        max_reply_messages,
        conversation_ttl,
        final_retry,
        max_event_age,
        admin_listen,
        admin_token,
        locales_dir: b
            .locales_dir
            .as_ref()
            .filter(|d| !d.is_empty())
            .map(PathBuf::from),
        single_user: env
            .var("DEER_FLOW_AUTH_DISABLED")
            .is_some_and(|v| matches!(v.trim(), "1" | "true" | "TRUE" | "True" | "yes")),
    }
}

/// `bridge.internal_token`, else DeerFlow's variable; a warning when neither is set.
fn internal_token(b: &RawBridge, env: &dyn Env, found: &mut Findings) -> Option<Secret> {
    let token = b
        .internal_token
        .clone()
        .filter(|t| !t.expose().is_empty())
        .or_else(|| {
            env.var("DEER_FLOW_INTERNAL_AUTH_TOKEN")
                .filter(|t| !t.is_empty())
                .map(Secret::new)
        });
    if token.is_none() {
        found.warnings.push("bridge.internal_token: not set and DEER_FLOW_INTERNAL_AUTH_TOKEN is empty; the Gateway will refuse our calls unless its auth is disabled".into());
    }
    token
}

/// `bridge.store_lease_seconds`, from [`MIN_TTL`](crate::lease::MIN_TTL) to
/// [`MAX_TTL`](crate::lease::MAX_TTL) (their docs say why); absent, the default.
fn store_lease(value: Option<f64>, errors: &mut Vec<ConfigError>) -> Duration {
    let mut issues = Issues::new("bridge");
    let lease = config::seconds(
        &mut issues,
        "store_lease_seconds",
        value,
        crate::lease::DEFAULT_TTL,
        crate::lease::MIN_TTL.as_secs_f64()..=crate::lease::MAX_TTL.as_secs_f64(),
    );
    errors.extend(issues.into_vec());
    lease
}

/// The bridge-wide bounds: `max_reply_messages`, `conversation_ttl_days`,
/// `final_retry_hours` and `max_event_age_seconds`.
fn bounds(
    b: &RawBridge,
    errors: &mut Vec<ConfigError>,
) -> (NonZeroUsize, Duration, Duration, Duration) {
    let max_reply_messages = positive(
        "bridge.max_reply_messages",
        b.max_reply_messages,
        crate::policy::DEFAULT_MAX_REPLY_MESSAGES,
        1_000,
        errors,
    );
    let conversation_ttl = in_units(
        ("bridge.conversation_ttl_days", b.conversation_ttl_days),
        (crate::retention::DEFAULT_TTL_DAYS, 86_400.0),
        3_600.0..=(3_650.0 * 86_400.0),
        "a number of days from 0.042 (an hour) to 3650",
        errors,
    );
    let final_retry = in_units(
        ("bridge.final_retry_hours", b.final_retry_hours),
        (crate::policy::DEFAULT_FINAL_RETRY_HOURS as f64, 3_600.0),
        60.0..=(7.0 * 86_400.0),
        "a number of hours from 0.017 (a minute) to 168",
        errors,
    );
    let max_event_age = event_age(
        "bridge.max_event_age_seconds",
        b.max_event_age_seconds,
        crate::policy::DEFAULT_MAX_EVENT_AGE,
        errors,
    );
    (
        max_reply_messages,
        conversation_ttl,
        final_retry,
        max_event_age,
    )
}

/// A duration written in a larger unit (days, hours): `(path, value)` with `(default,
/// seconds per unit)`, within `range` seconds; out of range, the default and an error
/// saying what was `expected`.
fn in_units(
    (path, value): (&str, Option<f64>),
    (default, unit): (f64, f64),
    range: std::ops::RangeInclusive<f64>,
    expected: &str,
    errors: &mut Vec<ConfigError>,
) -> Duration {
    let (section, key) = path.split_once('.').unwrap_or(("", path));
    let mut issues = Issues::new(section);
    let amount = value.unwrap_or(default);
    let duration = config::seconds(
        &mut issues,
        key,
        Some(amount * unit),
        Duration::from_secs_f64(default * unit),
        range,
    );
    if issues.has_errors() {
        errors.push(ConfigError::error(
            path,
            format!("expected {expected}, got {amount}"),
        ));
    }
    duration
}

/// `bridge.admin_listen` and `bridge.admin_token` (long enough, or unset).
fn admin(b: &RawBridge, errors: &mut Vec<ConfigError>) -> (SocketAddr, Option<Secret>) {
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
    (admin_listen, admin_token)
}

/// `channel_connections:`: the admins' reply language (returned), and no identity gate
/// asked for, which im-bridge does not have yet.
pub(super) fn connections(cc: &RawChannelConnections, found: &mut Findings) -> String {
    let notification_locale = cc
        .notification_locale
        .clone()
        .unwrap_or_else(|| DEFAULT_LOCALE.into());
    check_locale_tag(
        "channel_connections.notification_locale",
        &notification_locale,
        &mut found.errors,
    );
    if cc.enabled && cc.require_bound_identity.unwrap_or(true) {
        found.errors.push(ConfigError::error(
            "channel_connections.enabled",
            "user-owned connections with require_bound_identity are not supported by im-bridge yet; set enabled: false (or require_bound_identity: false) until the identity gate lands",
        ));
    }
    notification_locale
}

/// Every enabled channel block whose platform this build has and accepts its keys, with
/// the daemon's keys of the block checked; `max_event_age` is the bridge's, for blocks
/// without their own.
pub(super) fn enabled_channels(
    blocks: Vec<(String, RawChannelBlock)>,
    max_event_age: Duration,
    found: &mut Findings,
) -> Vec<ChannelSettings> {
    let mut channels = Vec::new();
    for (name, block) in blocks {
        if !block.enabled {
            continue;
        }
        let path = format!("channels.{name}");
        let Some(configured) = adapter(&path, &name, &block, found) else {
            continue;
        };
        let allowed_users = user_list(
            &format!("{path}.allowed_users"),
            block.allowed_users.as_ref(),
            &mut found.errors,
        );
        if matches!(allowed_users, AllowedUsers::Only(_))
            && crate::platforms::find(&name).is_some_and(|p| !p.checks_allowed_users())
        {
            found.warnings.push(format!(
                "{path}.allowed_users: this channel has one user, whoever runs it, so the list has no effect"
            ));
        }
        let errors = &mut found.errors;
        if let Some(locale) = &block.locale {
            check_locale_tag(&format!("{path}.locale"), locale, errors);
        }
        let queueing = queueing(&path, &block, errors);
        let rate_budgets = rate_budgets(&path, &block, errors);
        let max_event_age = event_age(
            &format!("{path}.max_event_age_seconds"),
            block.max_event_age_seconds,
            max_event_age,
            errors,
        );
        channels.push(ChannelSettings {
            allowed_users,
            admin_users: user_list(
                &format!("{path}.admin_users"),
                block.admin_users.as_ref(),
                errors,
            ),
            session: block
                .session
                .as_ref()
                .map(|s| session_layer(s, &format!("{path}.session"), errors))
                .unwrap_or_default(),
            locale: block.locale.clone(),
            queueing,
            rate_budgets,
            max_event_age,
            name,
            platform: configured,
        });
    }
    channels
}

/// The platform's own keys of the block at `path`, validated by the platform the registry
/// has for `name`; `None` (with why) when this build has none or the keys are wrong.
fn adapter(
    path: &str,
    name: &str,
    block: &RawChannelBlock,
    found: &mut Findings,
) -> Option<Arc<dyn Configured>> {
    let Some(platform) = crate::platforms::find(name) else {
        match absent_adapter(path, name, crate::platforms::KNOWN_PLATFORMS) {
            Ok(warning) => found.warnings.push(warning),
            Err(error) => found.errors.push(error),
        }
        return None;
    };
    let mut issues = Issues::new(path);
    let configured = match serde_json::to_value(&block.platform) {
        Ok(keys) => platform.validate(keys, &mut issues),
        Err(error) => {
            issues.error("", format!("expected a mapping with string keys: {error}"));
            None
        }
    };
    for issue in issues.into_vec() {
        if !issue.is_error() {
            found.warnings.push(issue.to_string());
        } else if !found.errors.iter().any(|e| e.path == issue.path) {
            // An unset `$VAR` was already reported at the same path.
            found.errors.push(issue);
        }
    }
    configured
}

/// The language tags (the admins' and each channel's) name a catalog im-bridge has:
/// embedded, or from `locales_dir`, whose files are checked too.
pub(super) fn locales(
    locales_dir: Option<&Path>,
    notification_locale: &str,
    channels: &[ChannelSettings],
    found: &mut Findings,
) {
    let Some(catalogs) = catalogs(locales_dir, found) else {
        return;
    };
    let supported = catalogs.supported_list();
    let mut check = |path: String, tag: &str| {
        if catalogs.negotiate(tag).is_none() && !found.errors.iter().any(|e| e.path == path) {
            found.errors.push(ConfigError::error(
                path,
                format!("there is no catalog for {tag:?}; supported: {supported}"),
            ));
        }
    };
    check(
        "channel_connections.notification_locale".into(),
        notification_locale,
    );
    for channel in channels {
        if let Some(locale) = &channel.locale {
            check(format!("channels.{}.locale", channel.name), locale);
        }
    }
}

/// The catalogs the daemon will load: the embedded ones, or those of `locales_dir` once
/// its files pass (their problems are `bridge.locales_dir`'s).
fn catalogs(locales_dir: Option<&Path>, found: &mut Findings) -> Option<Catalogs> {
    let Some(dir) = locales_dir else {
        return Catalogs::embedded().ok();
    };
    match crate::i18n::check_dir(dir) {
        Ok(catalog_warnings) => {
            found.warnings.extend(
                catalog_warnings
                    .into_iter()
                    .map(|w| format!("bridge.locales_dir: {w}")),
            );
            Catalogs::load(Some(dir)).ok()
        }
        Err(catalog_errors) => {
            found.errors.extend(
                catalog_errors
                    .into_iter()
                    .map(|e| ConfigError::error("bridge.locales_dir", e)),
            );
            None
        }
    }
}

/// At least one channel starts, unless an enabled one has errors (which already say why
/// it will not).
pub(super) fn some_channel(
    channels: &[ChannelSettings],
    channel_errors: bool,
    found: &mut Findings,
) {
    if !channels.is_empty() || channel_errors {
        return;
    }
    // The registry names the platforms; this generic code does not (tests/source_rules.rs).
    let names: Vec<&str> = crate::platforms::PLATFORMS
        .iter()
        .map(|p| p.name())
        .collect();
    found.errors.push(ConfigError::error(
        "channels",
        format!(
            "no channel is enabled, so nothing would start; set enabled: true on at least one of this build's platforms ({})",
            names.join(", ")
        ),
    ));
}
