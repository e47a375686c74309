//! Validated settings: what the daemon actually runs with.
//!
//! [`validate`] is pure: it reads the parsed file and the environment's `DEER_FLOW_*`
//! fallbacks, and opens no file or socket, so `check-config` can run it anywhere.
//!
//! Children: `sections`, one check per section of the file (what [`validate`] calls, in
//! order); `values`, the checks of one value each (URLs, numbers, the store, tags, lists).

use std::net::SocketAddr;
use std::num::NonZeroUsize;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use im_bridge_channel::{AllowedUsers, Configured, Secret};
use serde::Serialize;
use serde_json::{Map, Value as Json};

use super::{ConfigError, Env, Parsed};
use crate::policy::Queueing;
pub use crate::store::StoreLocation;

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
    /// How long this replica's leases in the store last unless renewed
    /// (`bridge.store_lease_seconds`).
    #[serde(with = "secs")]
    pub store_lease: Duration,
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

mod sections;
mod values;

use sections::Findings;

mod secs {
    use std::time::Duration;

    pub fn serialize<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_f64(d.as_secs_f64())
    }
}

/// Turns a parsed file into settings, or lists every problem (each at its key path, in
/// the order of the sections below). Returns warnings too.
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
    let mut found = Findings::new(type_errors, &ignored);
    // Channel blocks first: whether a block is enabled decides whether an unset variable
    // inside it matters.
    let blocks = sections::channel_blocks(std::mem::take(&mut raw.channels.blocks), &mut found);
    sections::unset_variables(&unset, &blocks, &raw.channel_connections, &mut found);
    let shared = sections::channels_keys(&raw.channels, env, &mut found);
    let bridge = sections::bridge(&raw.bridge, env, &mut found);
    let notification_locale = sections::connections(&raw.channel_connections, &mut found);
    let errors_before_channels = found.errors.len();
    let channels = sections::enabled_channels(blocks, bridge.max_event_age, &mut found);
    let channel_errors = found.errors.len() > errors_before_channels;
    let locales_dir = bridge.locales_dir.as_deref();
    sections::locales(locales_dir, &notification_locale, &channels, &mut found);
    sections::some_channel(&channels, channel_errors, &mut found);
    if !found.errors.is_empty() {
        return Err(found.errors);
    }
    let connections_enabled = raw.channel_connections.enabled;
    let settings = Settings {
        gateway: GatewaySettings {
            langgraph_url: shared.langgraph_url,
            gateway_url: shared.gateway_url,
            internal_token: bridge.internal_token,
            goal_from_chat_timeout: bridge.goal_from_chat_timeout,
        },
        intake: shared.intake,
        session: shared.session,
        channels,
        connections_enabled,
        notification_locale,
        store: bridge.store,
        store_lease: bridge.store_lease,
        admin_listen: bridge.admin_listen,
        admin_token: bridge.admin_token,
        locales_dir: bridge.locales_dir,
        max_reply_messages: bridge.max_reply_messages,
        conversation_ttl: bridge.conversation_ttl,
        final_retry: bridge.final_retry,
        max_event_age: bridge.max_event_age,
        single_user: bridge.single_user,
        secret_key: bridge.secret_key,
    };
    Ok((settings, found.warnings))
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
