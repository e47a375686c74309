//! The raw configuration: serde structs that mirror `config.yaml` as an operator writes it.
//!
//! Types are deliberately permissive (signed integers, floats, optional everything) so that
//! [`validate`](super::validate) can refuse a bad value with the key path and a sentence
//! saying what was expected, instead of a bare serde type error. DeerFlow's own top-level
//! sections (`models`, `sandbox`, …) are not modelled and are ignored.

use std::collections::BTreeMap;

use im_bridge_channel::Secret;
use serde::Deserialize;
use serde_yaml_ng::{Mapping, Value};

/// The whole file. Only the three sections im-bridge reads are modelled.
#[derive(Debug, Default, Deserialize)]
pub struct RawConfig {
    /// DeerFlow's `channels:` section: Gateway URLs, intake limits, session defaults and
    /// one block per platform.
    #[serde(default)]
    pub channels: RawChannels,
    /// DeerFlow's `channel_connections:` section.
    #[serde(default)]
    pub channel_connections: RawChannelConnections,
    /// im-bridge's own section. Unknown keys here are errors.
    #[serde(default)]
    pub bridge: RawBridge,
}

/// DeerFlow's `channels:` section.
#[derive(Debug, Default, Deserialize)]
pub struct RawChannels {
    /// LangGraph-compatible API base (threads, runs). Default `http://localhost:8001/api`.
    pub langgraph_url: Option<String>,
    /// Gateway base for goal, models, memory. Default `http://localhost:8001`.
    pub gateway_url: Option<String>,
    /// Capacity of the inbound queue (queued + reserved). Default 1000.
    pub inbound_queue_maxsize: Option<i64>,
    /// Messages handled at once. Default 64.
    pub max_concurrency: Option<i64>,
    /// How long shutdown waits for admitted work to drain. Default 3 s.
    pub shutdown_grace_period_seconds: Option<f64>,
    /// Session defaults for every channel's runs.
    pub session: Option<RawSession>,
    /// One block per platform (`telegram:`, `feishu:`, …), keyed by provider name.
    #[serde(flatten)]
    pub blocks: BTreeMap<String, Value>,
}

/// The keys every platform block shares; the rest belongs to the adapter.
#[derive(Debug, Default, Deserialize)]
pub struct RawChannelBlock {
    /// Whether the channel starts.
    #[serde(default)]
    pub enabled: bool,
    /// Platform user ids allowed to talk to the bot: a list, or one id as a string. Empty
    /// or absent means everyone.
    pub allowed_users: Option<Value>,
    /// Platform user ids allowed to change group-chat settings such as `/lang`.
    pub admin_users: Option<Value>,
    /// Session overrides for this channel's runs.
    pub session: Option<RawSession>,
    /// Default reply language for this channel.
    pub locale: Option<String>,
    /// What a chat message meets while its conversation is busy: `queue` (default: it waits
    /// its turn) or `reject` (DeerFlow's busy reply).
    pub busy_policy: Option<String>,
    /// With `queue`: chat messages that may wait behind the one being handled (default 3);
    /// the next gets the busy reply.
    pub max_queued_per_conversation: Option<i64>,
    /// Adjustments of the channel's declared rate budgets, by budget name (issue 33).
    pub rate_budgets: Option<BTreeMap<String, RawRateBudget>>,
    /// This channel's `bridge.max_event_age_seconds`: a message older than this when it
    /// arrives is not acted on. 0 turns the guard off here.
    pub max_event_age_seconds: Option<f64>,
    /// Everything else: the adapter's own keys.
    #[serde(flatten)]
    pub platform: Mapping,
}

/// One rate budget's adjustment (`channels.<name>.rate_budgets.<budget>`).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawRateBudget {
    /// Sustained writes a second (may be a fraction: 0.5 is one every two seconds).
    pub per_second: Option<f64>,
    /// Writes allowed back to back when the budget is whole.
    pub burst: Option<i64>,
}

/// A session layer: run defaults at the global, channel or user level.
#[derive(Debug, Default, Clone, Deserialize)]
pub struct RawSession {
    /// Agent to run (`lead_agent` or a custom agent name).
    pub assistant_id: Option<Value>,
    /// Merged into the run's `config`.
    pub config: Option<Mapping>,
    /// Merged into the run's `context`.
    pub context: Option<Mapping>,
    /// Per-user overrides, keyed by raw platform user id.
    pub users: Option<BTreeMap<String, RawSession>>,
}

/// DeerFlow's `channel_connections:` section.
#[derive(Debug, Default, Deserialize)]
pub struct RawChannelConnections {
    /// User-owned channel connections (identity binding).
    #[serde(default)]
    pub enabled: bool,
    /// Whether unbound senders are refused when connections are enabled. Default true.
    pub require_bound_identity: Option<bool>,
    /// The admins' default language for bot replies. Default `en-US`.
    pub notification_locale: Option<String>,
    /// Per-provider connection settings (DeerFlow's; read by DeerFlow, not by us).
    #[serde(flatten)]
    pub providers: BTreeMap<String, Value>,
}

/// im-bridge's own `bridge:` section.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawBridge {
    /// `sqlite://PATH` (default `sqlite://./im-bridge.db`) or `postgres://…`.
    pub store: Option<String>,
    /// How long a replica's leases in the store last unless renewed (its transport's, its
    /// journaled messages'), in seconds: 5 to 300, default 15. Shorter: a dead replica's
    /// work is taken over sooner; longer: a slow store is waited out longer.
    pub store_lease_seconds: Option<f64>,
    /// Address of `/healthz`, `/readyz`, `/metrics`. Default `127.0.0.1:9464`.
    pub admin_listen: Option<String>,
    /// Token sent as `X-DeerFlow-Internal-Token`; falls back to
    /// `DEER_FLOW_INTERNAL_AUTH_TOKEN`. A [`Secret`] from the moment it is read, so no
    /// `{:?}` of the raw config can print it.
    pub internal_token: Option<Secret>,
    /// Read timeout of `/goal from-chat` and `/compact`, which call a model. Default 120 s.
    pub goal_from_chat_timeout_seconds: Option<f64>,
    /// Directory of extra or overriding `<locale>/bridge.ftl` catalogs.
    pub locales_dir: Option<String>,
    /// Most messages one reply may fill; a longer answer is cut, its last message saying so.
    /// Default 10.
    pub max_reply_messages: Option<i64>,
    /// Group-topic bindings and reply-chain records untouched this many days are pruned
    /// (private-chat bindings are kept). Default 30.
    pub conversation_ttl_days: Option<f64>,
    /// How long a final the platform could not take (an outage, a long `Retry-After`) is
    /// retried, across restarts. Default 6.
    pub final_retry_hours: Option<f64>,
    /// The bearer token of the operator's admin endpoints (`/admin/…`: deliveries, drain);
    /// unset (the default), they do not exist. At least 16 characters, e.g.
    /// `$IM_BRIDGE_ADMIN_TOKEN`.
    pub admin_token: Option<Secret>,
    /// A message older than this many seconds when it arrives (by the platform's own
    /// timestamp) is not acted on; its chat is told once to send it again. Default 3600;
    /// 0 turns the guard off. `channels.<name>.max_event_age_seconds` overrides it.
    pub max_event_age_seconds: Option<f64>,
}
