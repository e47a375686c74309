//! The policies the configuration sets and the manager applies: what a message meets
//! when its conversation is busy ([`Queueing`]), and the defaults of the bridge-wide
//! bounds (`bridge.max_reply_messages`, `bridge.final_retry_hours`,
//! `bridge.max_event_age_seconds`).
//!
//! A module of its own so the configuration can build them without depending on the
//! manager, which reads its settings from the configuration (issue 34: no module loop in
//! the daemon).

use std::time::Duration;

/// The default `bridge.max_reply_messages`.
pub const DEFAULT_MAX_REPLY_MESSAGES: usize = 10;

/// The default `bridge.final_retry_hours`.
pub const DEFAULT_FINAL_RETRY_HOURS: u64 = 6;

/// The default `bridge.max_event_age_seconds`: an hour.
pub const DEFAULT_MAX_EVENT_AGE: Duration = Duration::from_secs(3600);

/// What a chat message meets when its conversation is busy with an earlier one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum BusyPolicy {
    /// Wait its turn (up to a bound), with the localized queued notice.
    Queue,
    /// Get DeerFlow's busy reply at once.
    Reject,
}

/// A channel's busy policy and its bound.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Queueing {
    /// `busy_policy`.
    pub policy: BusyPolicy,
    /// `max_queued_per_conversation`: chat messages that may wait behind the one being
    /// handled; the next gets the busy reply.
    pub max_queued: usize,
}

impl Queueing {
    /// The default bound of `max_queued_per_conversation`.
    pub const DEFAULT_MAX_QUEUED: usize = 3;

    /// How many may wait behind the message being handled.
    pub(crate) fn limit(self) -> usize {
        match self.policy {
            BusyPolicy::Queue => self.max_queued,
            BusyPolicy::Reject => 0,
        }
    }
}

impl Default for Queueing {
    fn default() -> Self {
        Self {
            policy: BusyPolicy::Queue,
            max_queued: Self::DEFAULT_MAX_QUEUED,
        }
    }
}
