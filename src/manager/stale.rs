//! The stale-event guard (issue 33, item 3): after an outage, platforms deliver what was
//! sent meanwhile, hours late, and acting on it does harm (a replayed "restart", a question
//! long since answered elsewhere, a `/new` that throws away the conversation since).
//!
//! A message older than its channel's `max_event_age` (by `created_at`: the platform's own
//! timestamp, which adapters read; a message without one is dated by its arrival and so is
//! never stale) is not handled at all: no Gateway call, no command, no notice, no place in
//! its conversation's line. It is consumed, as a handled message is: its redelivery keys
//! (its own and, for a message joined from several, its parts') are recorded for the
//! dedupe TTL as a handled message's are (`dedupe.rs`), so a redelivery, of the message or
//! of one of its parts alone, is dropped, never run or retried.
//!
//! Its chat hears once that it came too late and should be sent again: one reply per chat
//! per [`LATE_REPLY_WINDOW`], so a burst of stale messages (a backlog delivered at once)
//! gets one reply, under the first of them. Which chats were told is kept as a dedupe
//! record of the store under [`LATE_REPLY_SCOPE`], so the bookkeeping is bounded like every
//! dedupe record (the store's cap, the window as TTL), and holds across replicas and
//! restarts (a crash loop does not repeat it). A store failure errs towards the reply.
//!
//! Messages a restart recovers from the journal are not checked: they were admitted while
//! fresh, and their senders are owed the answer (crash safety, `journal.rs`).

use std::collections::HashMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use im_bridge_channel::InboundMessage;

use super::{Inner, dedupe};
use crate::policy::DEFAULT_MAX_EVENT_AGE;
use crate::store::DedupeKey;
use crate::telemetry::names;

/// How long one "too late" reply covers its chat: later stale messages there within it get
/// none.
pub const LATE_REPLY_WINDOW: Duration = Duration::from_secs(600);

/// The dedupe scope recording which chats heard the late reply: no adapter scopes its
/// redelivery keys like this (theirs name a chat, a workspace or a tenant).
pub const LATE_REPLY_SCOPE: &str = "im-bridge:late-reply";

/// How old a message may be and still be acted on: `bridge.max_event_age_seconds` and each
/// channel's `max_event_age_seconds`. Zero turns the guard off.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EventAge {
    /// For channels without their own.
    pub default: Duration,
    /// By channel name.
    pub by_channel: HashMap<String, Duration>,
}

impl Default for EventAge {
    fn default() -> Self {
        Self {
            default: DEFAULT_MAX_EVENT_AGE,
            by_channel: HashMap::new(),
        }
    }
}

impl EventAge {
    /// The limit of `channel`; `None` when its guard is off.
    pub fn limit(&self, channel: &str) -> Option<Duration> {
        let limit = self.by_channel.get(channel).unwrap_or(&self.default);
        (!limit.is_zero()).then_some(*limit)
    }

    /// How old `msg` is at `now` (Unix seconds), when that is older than its channel allows.
    pub fn stale(&self, msg: &InboundMessage, now: f64) -> Option<Duration> {
        let limit = self.limit(&msg.channel_name)?;
        let age = now - msg.created_at;
        // Not finite (a bad timestamp) or in the future (a clock ahead): not stale.
        let age = Duration::try_from_secs_f64(age).ok()?;
        (age > limit).then_some(age)
    }
}

/// Now, in Unix seconds.
pub(super) fn now_unix() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// Consumes stale `msg` (`age` old) without acting on it, and tells its chat once.
pub(super) async fn consume(inner: &Inner, msg: &InboundMessage, age: Duration) {
    let store = &inner.store;
    match dedupe::admit_once(store.as_ref(), msg).await {
        Ok(true) => {}
        Ok(false) => {
            tracing::info!("Dropped a redelivered message.");
            return;
        }
        Err(error) => {
            tracing::warn!(%error, "Dedupe lookup failed; dropping the stale message anyway.");
        }
    }
    let channel = inner.replier.outbound().channel_label(&msg.channel_name);
    metrics::counter!(names::STALE, "channel" => channel).increment(1);
    let limit = inner.config.max_event_age.limit(&msg.channel_name);
    tracing::info!(
        age_seconds = age.as_secs(),
        max_age_seconds = limit.map_or(0, |l| l.as_secs()),
        "Dropped a message older than max_event_age without acting on it."
    );
    let told = DedupeKey {
        channel: msg.channel_name.clone(),
        workspace: LATE_REPLY_SCOPE.to_owned(),
        chat_id: msg.chat_id.clone(),
        message_id: "told".to_owned(),
    };
    let tell = match store.dedupe_admit(&told, LATE_REPLY_WINDOW).await {
        Ok(first) => first,
        Err(error) => {
            tracing::debug!(%error, "Reading whether the chat heard the late reply failed; replying.");
            true
        }
    };
    if tell {
        inner
            .replier
            .reply(msg, crate::i18n::msg::RUN_TOO_LATE, &[])
            .await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sent(channel: &str, seconds_ago: f64, now: f64) -> InboundMessage {
        let mut msg = InboundMessage::new(channel, "c", "u", "x");
        msg.created_at = now - seconds_ago;
        msg
    }

    #[test]
    fn a_message_older_than_its_channels_limit_is_stale() {
        let now = 1_800_000_000.0;
        let ages = EventAge {
            default: Duration::from_secs(3600),
            by_channel: HashMap::from([
                ("slow".to_owned(), Duration::from_secs(3 * 3600)),
                ("off".to_owned(), Duration::ZERO),
            ]),
        };
        assert_eq!(ages.stale(&sent("any", 3599.0, now), now), None);
        assert_eq!(
            ages.stale(&sent("any", 7200.0, now), now),
            Some(Duration::from_secs(7200))
        );
        // The channel's own limit wins; zero turns the guard off.
        assert_eq!(ages.stale(&sent("slow", 7200.0, now), now), None);
        assert!(ages.stale(&sent("slow", 4.0 * 3600.0, now), now).is_some());
        assert_eq!(ages.stale(&sent("off", 1e6, now), now), None);
        assert_eq!(ages.limit("off"), None);
        // A clock behind the platform's, or a timestamp that is no time, is never stale.
        assert_eq!(ages.stale(&sent("any", -600.0, now), now), None);
        assert_eq!(ages.stale(&sent("any", f64::NAN, now), now), None);
    }
}
