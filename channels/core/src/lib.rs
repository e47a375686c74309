//! Shared model and machinery for im-bridge channel adapters.
//!
//! Dependency arrows point one way: adapters depend on this crate, the daemon depends on
//! this crate and the adapters, and this crate depends on neither. It knows nothing of
//! DeerFlow: no threads, runs, artifacts or owners, only what a chat platform knows.
#![doc = include_str!("../README.md")]
#![deny(missing_docs)]
#![forbid(unsafe_code)]

mod access;
pub mod backoff;
mod body;
pub mod budget;
mod capabilities;
mod channel;
mod commands;
pub mod config;
mod delivery;
pub mod digest;
pub mod doctor;
mod error;
mod file_hosts;
#[cfg(any(test, feature = "test-support"))]
pub mod fixtures;
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing;
pub mod http;
mod ids;
mod inbound;
mod menu;
mod message;
pub mod reconnect;
pub mod registry;
pub mod render;
mod secret;
pub mod socket;
pub mod state;
pub mod telemetry;
pub mod token;
pub mod webhook;

pub use access::AllowedUsers;
pub use body::{BoundedRead, header_seconds, read_bounded, read_staged};
pub use capabilities::{
    Capabilities, ChatBudget, LateReplies, LengthUnit, RateBudget, ReplyWindow, UpdateMode, Writes,
};
pub use channel::{
    Channel, ChannelExit, ChannelIdentity, Reaction, SENT_KEYS, SendParts, SendTarget, SentMessage,
    SentOnce, fetch_handle, fetch_handle_labeled, transport_ended,
};
pub use commands::{CommandVocabulary, strip_leading_mentions};
pub use config::{ConfigIssue, Issues, Severity};
pub use delivery::{
    BUDGET_FALLBACKS, BUDGET_SKIPS, BUDGET_WAITS, BeforeFinal, BudgetPlan, Budgets, ChannelExt,
    Delivery, EditClock, Fenced, FinishOrSend, LimitLength, MAX_NEWEST_CHATS, MAX_PAUSE_WAIT,
    MAX_SOURCES, MAX_STREAMS, Newest, NewestMessages, PassiveReplies, REPLY_WINDOW_REFUSED,
    ReplyQuotas, RetryFinals, RetryPolicy, StreamStarted, Throttle, WriteGate, split,
};
pub use error::{ChannelError, ChannelResult, RetryAfterHint};
pub use file_hosts::{FileHostError, FileHosts, MAX_FILE_HOSTS};
pub use ids::{ChatId, MessageId, UserId};
pub use inbound::{
    AdmitError, InboundQueue, InboundSink, Queued, REFUSALS_CAPACITY, REFUSED_METRIC, Reservation,
    Room, Skip, Waited, inbound_queue,
};
pub use menu::{CommandMenu, MenuEntry};
pub use message::{
    ChatKind, DeliveryHints, FileKind, FileLabel, FileSource, InboundFile, InboundMessage, MsgType,
    OutboundFile, OutboundMessage, RedeliveryKey, safe_file_name,
};
pub use reconnect::{Cause, Reconnect};
pub use registry::{Adapter, BuildContext, Configured, Platform, Prepared};
pub use secret::Secret;
pub use state::{ChannelState, MemoryState, StateError};
pub use telemetry::{Stage, Telemetry};
pub use webhook::{
    Freshness, Installed, RunningHost, Stale, WEBHOOK_FRESHNESS, WEBHOOK_REFUSED_METRIC,
    WebhookError, WebhookHandler, WebhookHost, WebhookLimits, WebhookRequest, WebhookResponse,
    WebhookRoute,
};

/// A test binary's log lines, for tests that prove logs carry no secret (`test-support`).
#[cfg(feature = "test-support")]
pub mod logs;
