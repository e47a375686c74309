//! The value checks behind [`validate`](super::validate): one function per kind of key of
//! the daemon's own sections (URLs with environment fallbacks, bounded numbers, the store
//! location, language tags, user lists, session layers, a channel's busy policy), each
//! recording what is wrong at its key path.

use std::num::NonZeroUsize;
use std::path::PathBuf;
use std::time::Duration;

use im_bridge_channel::{AllowedUsers, Issues, Secret, config};
use serde_json::{Map, Value as Json};
use serde_yaml_ng::{Mapping, Value};

use super::super::ConfigError;
use super::super::raw::{RawChannelBlock, RawSession};
use super::{SessionLayer, StoreLocation};
use crate::budgets::{BudgetOverride, MAX_PER_SECOND, MIN_PER_SECOND};
use crate::policy::{BusyPolicy, Queueing};
use im_bridge_channel::budget::MAX_BURST;

pub(super) fn join(base: &str, rest: &str) -> String {
    if rest.is_empty() || rest == "." {
        base.to_owned()
    } else {
        format!("{base}.{rest}")
    }
}

/// `busy_policy` and `max_queued_per_conversation` of one channel block.
pub(super) fn queueing(
    path: &str,
    block: &RawChannelBlock,
    errors: &mut Vec<ConfigError>,
) -> Queueing {
    let mut issues = Issues::new(path);
    let policy = match config::choice(
        &mut issues,
        "busy_policy",
        block.busy_policy.as_deref(),
        &["queue", "reject"],
    ) {
        "reject" => BusyPolicy::Reject,
        _ => BusyPolicy::Queue,
    };
    let max_queued = config::integer(
        &mut issues,
        "max_queued_per_conversation",
        block.max_queued_per_conversation,
        Queueing::DEFAULT_MAX_QUEUED as i64,
        0..=1_000,
    );
    errors.extend(issues.into_vec());
    Queueing {
        policy,
        max_queued: usize::try_from(max_queued).unwrap_or(Queueing::DEFAULT_MAX_QUEUED),
    }
}

/// `rate_budgets` of one channel block: each budget's `per_second` and `burst` in range
/// (whether the channel declares the budget is checked when it is built).
pub(super) fn rate_budgets(
    path: &str,
    block: &RawChannelBlock,
    errors: &mut Vec<ConfigError>,
) -> Vec<BudgetOverride> {
    let Some(raw) = &block.rate_budgets else {
        return Vec::new();
    };
    let mut issues = Issues::new(format!("{path}.rate_budgets"));
    let overrides = raw
        .iter()
        .map(|(name, raw)| {
            let per_second = raw.per_second.filter(|rate| {
                let fits = rate.is_finite() && (MIN_PER_SECOND..=MAX_PER_SECOND).contains(rate);
                if !fits {
                    issues.error(
                        &format!("{name}.per_second"),
                        format!(
                            "expected writes a second from {MIN_PER_SECOND:.6} (one a day) to {MAX_PER_SECOND}, got {rate}"
                        ),
                    );
                }
                fits
            });
            let burst = raw.burst.map(|_| {
                config::integer(
                    &mut issues,
                    &format!("{name}.burst"),
                    raw.burst,
                    1,
                    1..=i64::from(MAX_BURST),
                )
            });
            BudgetOverride {
                name: name.clone(),
                burst: burst.and_then(|b| u32::try_from(b).ok()),
                per_second,
            }
        })
        .collect();
    errors.extend(issues.into_vec());
    overrides
}

/// A `max_event_age_seconds` (`path` names it): 0 turns the stale-event guard off;
/// otherwise at least a minute (below that, ordinary delivery delays and clock skew would
/// turn fresh messages away) and at most a week. Absent = `default`.
pub(super) fn event_age(
    path: &str,
    value: Option<f64>,
    default: Duration,
    errors: &mut Vec<ConfigError>,
) -> Duration {
    const LONGEST: f64 = 7.0 * 86_400.0;
    match value {
        None => default,
        Some(0.0) => Duration::ZERO,
        Some(v) if v.is_finite() && (60.0..=LONGEST).contains(&v) => Duration::from_secs_f64(v),
        Some(v) => {
            errors.push(ConfigError::error(
                path,
                format!("expected 0 (off) or a number of seconds from 60 to {LONGEST}, got {v}"),
            ));
            default
        }
    }
}

pub(super) fn is_channel_block(key: &str) -> bool {
    !matches!(
        key,
        "langgraph_url"
            | "gateway_url"
            | "inbound_queue_maxsize"
            | "max_concurrency"
            | "shutdown_grace_period_seconds"
            | "session"
    )
}

/// Config value wins, then the environment fallback, then the default (spec gateway §1.1).
pub(super) fn url_setting(
    config: Option<&str>,
    env: Option<String>,
    default: &str,
    path: &str,
    errors: &mut Vec<ConfigError>,
) -> String {
    let value = config
        .filter(|v| !v.trim().is_empty())
        .map(str::to_owned)
        .or(env.filter(|v| !v.trim().is_empty()))
        .unwrap_or_else(|| default.to_owned());
    match im_bridge_channel::config::http_url(&value) {
        Some(url) => url,
        None => {
            errors.push(ConfigError::error(
                path,
                format!(
                    "expected an http:// or https:// URL without query, got {}",
                    im_bridge_channel::config::shown_url(&value)
                ),
            ));
            value
        }
    }
}

pub(super) fn positive(
    path: &str,
    value: Option<i64>,
    default: usize,
    max: usize,
    errors: &mut Vec<ConfigError>,
) -> NonZeroUsize {
    let fallback = NonZeroUsize::new(default).unwrap_or(NonZeroUsize::MIN);
    match value {
        None => fallback,
        Some(v) => match usize::try_from(v)
            .ok()
            .and_then(NonZeroUsize::new)
            .filter(|n| n.get() <= max)
        {
            Some(n) => n,
            None => {
                errors.push(ConfigError::error(
                    path,
                    format!("expected a positive integer no larger than {max}, got {v}"),
                ));
                fallback
            }
        },
    }
}

pub(super) fn seconds(
    path: &str,
    value: Option<f64>,
    default: f64,
    zero_ok: bool,
    errors: &mut Vec<ConfigError>,
) -> Duration {
    let v = value.unwrap_or(default);
    let valid = v.is_finite() && (v > 0.0 || (zero_ok && v == 0.0)) && v <= 86_400.0;
    if valid {
        Duration::from_secs_f64(v)
    } else {
        let expected = if zero_ok {
            "a number of seconds from 0 to 86400"
        } else {
            "a number of seconds above 0 and at most 86400"
        };
        errors.push(ConfigError::error(
            path,
            format!("expected {expected}, got {v}"),
        ));
        Duration::from_secs_f64(default)
    }
}

pub(super) fn store_location(text: &str, errors: &mut Vec<ConfigError>) -> StoreLocation {
    if let Some(path) = text.strip_prefix("sqlite://") {
        if path.is_empty() {
            errors.push(ConfigError::error(
                "bridge.store",
                "expected sqlite://PATH with a file path",
            ));
        }
        return StoreLocation::Sqlite(PathBuf::from(path));
    }
    if text.starts_with("postgres://") || text.starts_with("postgresql://") {
        return StoreLocation::Postgres(Secret::new(text));
    }
    // Never echo the value: a mistyped Postgres URL may carry a password.
    errors.push(ConfigError::error(
        "bridge.store",
        "expected sqlite://PATH or postgres://USER@HOST/DB",
    ));
    StoreLocation::Sqlite(PathBuf::from("./im-bridge.db"))
}

pub(super) fn check_locale_tag(path: &str, tag: &str, errors: &mut Vec<ConfigError>) {
    let mut parts = tag.split(['-', '_']);
    let lang_ok = parts
        .next()
        .is_some_and(|l| (2..=3).contains(&l.len()) && l.chars().all(|c| c.is_ascii_alphabetic()));
    let rest_ok =
        parts.all(|p| (1..=8).contains(&p.len()) && p.chars().all(|c| c.is_ascii_alphanumeric()));
    if !(lang_ok && rest_ok) {
        errors.push(ConfigError::error(
            path,
            format!("expected a language tag such as en-US or zh-CN, got {tag:?}"),
        ));
    }
}

/// `allowed_users` / `admin_users`: the core's id list (a list or one id; it fails closed).
pub(super) fn user_list(
    path: &str,
    value: Option<&Value>,
    errors: &mut Vec<ConfigError>,
) -> AllowedUsers {
    let mut issues = Issues::new("");
    let json = value.and_then(|v| serde_json::to_value(v).ok());
    let allowed = im_bridge_channel::config::id_list(&mut issues, path, json.as_ref());
    errors.extend(issues.into_vec());
    allowed
}

pub(super) fn session_layer(
    raw: &RawSession,
    path: &str,
    errors: &mut Vec<ConfigError>,
) -> SessionLayer {
    let assistant_id = match &raw.assistant_id {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(_) => {
            errors.push(ConfigError::error(
                format!("{path}.assistant_id"),
                "expected an agent name (a string)",
            ));
            None
        }
    };
    let mut to_json = |m: &Option<Mapping>, key: &str| -> Map<String, Json> {
        match m.as_ref().map(serde_json::to_value) {
            None => Map::new(),
            Some(Ok(Json::Object(map))) => map,
            Some(_) => {
                errors.push(ConfigError::error(
                    format!("{path}.{key}"),
                    "expected a mapping with string keys",
                ));
                Map::new()
            }
        }
    };
    let config = to_json(&raw.config, "config");
    let context = to_json(&raw.context, "context");
    let users = raw
        .users
        .iter()
        .flatten()
        .map(|(id, layer)| {
            (
                id.clone(),
                session_layer(layer, &format!("{path}.users.{id}"), errors),
            )
        })
        .collect();
    SessionLayer {
        assistant_id,
        config,
        context,
        users,
    }
}
