//! The outbound side of the bus: routes each reply to its channel's delivery engine.
//!
//! The inbound side (bounded admission with reserve/commit) lives in `im-bridge-channel`
//! because adapters use it; this module owns what only the daemon needs: one
//! [`Delivery`] per channel, a delivery lane per chat (lanes.rs), and counting what was
//! delivered. A failed delivery is logged and counted, never propagated: one channel's
//! trouble cannot stop another's replies.
//!
//! # Publishing never waits for a chat's budget
//!
//! [`Outbound::publish`] queues the reply on its chat's lane and returns: the wait for the
//! platform's per-chat write budget (a second in a Telegram private chat, three in a group)
//! is the lane's, not the worker's that published (issue 13, item 4). Each lane delivers
//! its chat's replies one at a time in publish order, so a chat still reads its replies in
//! the order they were written, and lanes of different chats deliver concurrently. What a
//! caller needs from a landed final (the message that shows it, for reply chains) it gets
//! through an [`AfterShown`] hook the lane runs once the final landed.
//!
//! Bounded: at most [`MAX_PENDING_REPLIES`] replies wait across all lanes; beyond that
//! `publish` waits for room (backpressure on the workers, not unbounded memory). A lane's
//! newest partial is replaced by a newer partial of the same reply, so a slow chat holds
//! one pending partial per reply, not one per token. At shutdown the daemon
//! [flushes](Outbound::flush) the lanes after the manager drained and before the
//! transports stop.

mod lanes;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use im_bridge_channel::{
    BudgetPlan, Capabilities, Channel, ChannelError, ChatId, Delivery, FileLabel, InboundFile,
    InboundMessage, MessageId, OutboundMessage, Reaction, RetryPolicy,
};

use crate::telemetry::names;

pub use lanes::{AfterShown, Gate, Hooks, Landed, MAX_PENDING_REPLIES, WITHHELD};
use lanes::{Job, Lanes};

/// Routes outbound messages to channels.
pub struct Outbound {
    deliveries: HashMap<&'static str, Arc<Delivery>>,
    lanes: Lanes,
    streams: Arc<StreamWatch>,
}

/// Who hears that a streamed reply got its platform message (the journal), set once.
type StreamWatcher = Box<dyn Fn(&str, &ChatId, Option<&MessageId>, &MessageId) + Send + Sync>;

#[derive(Default)]
struct StreamWatch(std::sync::OnceLock<StreamWatcher>);

impl std::fmt::Debug for Outbound {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Outbound")
            .field("channels", &self.deliveries.keys().collect::<Vec<_>>())
            .field("pending", &self.lanes.pending())
            .finish()
    }
}

impl Outbound {
    /// A router over `channels`, each behind its own delivery engine.
    pub fn new(channels: &[Arc<dyn Channel>]) -> Self {
        Self::with_bound(channels, MAX_PENDING_REPLIES)
    }

    /// A router whose lanes hold at most `max_pending` replies together, each channel
    /// within the rate budgets it declares, kept in this process.
    pub fn with_bound(channels: &[Arc<dyn Channel>], max_pending: usize) -> Self {
        Self::with_budgets(channels, max_pending, |channel: &dyn Channel| {
            BudgetPlan::declared(&channel.capabilities())
        })
    }

    /// A router whose lanes hold at most `max_pending` replies together, each channel
    /// within the rate budgets `plan` makes for it (issue 33).
    pub fn with_budgets(
        channels: &[Arc<dyn Channel>],
        max_pending: usize,
        plan: impl Fn(&dyn Channel) -> BudgetPlan,
    ) -> Self {
        let streams = Arc::new(StreamWatch::default());
        let deliveries = channels
            .iter()
            .map(|c| {
                let (name, watch) = (c.name(), streams.clone());
                let plan = plan(c.as_ref());
                let delivery = Delivery::with_budgets(c.clone(), RetryPolicy::default(), plan)
                    .on_stream_started(Arc::new(
                        move |chat: &ChatId, source: Option<&MessageId>, shown: &MessageId| {
                            if let Some(watcher) = watch.0.get() {
                                watcher(name, chat, source, shown);
                            }
                        },
                    ));
                (name, Arc::new(delivery))
            })
            .collect();
        Self {
            deliveries,
            lanes: Lanes::new(max_pending),
            streams,
        }
    }

    /// Calls `watcher` with the channel, chat, source message and platform message each
    /// time a streamed reply gets the message that shows it. Only the first watcher set is
    /// kept.
    pub fn watch_streams(
        &self,
        watcher: impl Fn(&str, &ChatId, Option<&MessageId>, &MessageId) + Send + Sync + 'static,
    ) {
        let _ = self.streams.0.set(Box::new(watcher));
    }

    /// The running channel's own name: a `'static` label for per-message metrics, so they
    /// need not copy the message's channel name.
    pub fn channel_label(&self, channel: &str) -> &'static str {
        self.deliveries
            .get_key_value(channel)
            .map_or("unknown", |(name, _)| name)
    }

    /// Reads an inbound attachment through the channel that received it, refusing more
    /// than `max_bytes`, with what reading it told of the file (its name and type, where
    /// the message did not carry them).
    pub async fn fetch_file(
        &self,
        channel: &str,
        file: &InboundFile,
        max_bytes: u64,
    ) -> Result<(Bytes, FileLabel), ChannelError> {
        match self.deliveries.get(channel) {
            Some(delivery) => delivery.channel().fetch_labeled(file, max_bytes).await,
            None => Err(ChannelError::Stopped),
        }
    }

    /// Shows "typing…" in `msg`'s chat (a hint: a failure is logged at debug, nothing more).
    pub async fn show_typing(&self, msg: &OutboundMessage) {
        if let Some(delivery) = self.deliveries.get(msg.channel_name.as_str())
            && let Err(error) = delivery
                .show_typing(im_bridge_channel::SendTarget::from(msg))
                .await
        {
            tracing::debug!(%error, "Showing the typing hint failed.");
        }
    }

    /// Puts `reaction` on `source`, the user's message, if its channel has reactions
    /// ([`Capabilities::reactions`]); nothing otherwise. A hint: a failure is logged at
    /// debug, nothing more.
    pub async fn react(&self, source: &InboundMessage, reaction: Reaction) {
        let Some(delivery) = self.deliveries.get(source.channel_name.as_str()) else {
            return;
        };
        let channel = delivery.channel();
        if !channel.capabilities().reactions {
            return;
        }
        let target = source.reply(String::new(), false);
        if let Err(error) = channel
            .react(im_bridge_channel::SendTarget::from(&target), reaction)
            .await
        {
            tracing::debug!(%error, ?reaction, "Adding a reaction failed.");
        }
    }

    /// What the named channel can show, if it is running.
    pub fn capabilities(&self, channel: &str) -> Option<Capabilities> {
        self.deliveries
            .get(channel)
            .map(|d| d.channel().capabilities())
    }

    /// The named channel's reply window (issue 33), if it is running and has one.
    pub fn reply_window(&self, channel: &str) -> Option<im_bridge_channel::ReplyWindow> {
        self.capabilities(channel).and_then(|c| c.reply_window)
    }

    /// Queues `msg` on its chat's delivery lane and returns without waiting for it to be
    /// delivered (only, when [`MAX_PENDING_REPLIES`] already wait, for room). `after` runs
    /// once it was delivered or failed, with what became of it ([`Landed`]).
    pub async fn publish(&self, msg: OutboundMessage, after: Option<AfterShown>) {
        self.publish_hooked(msg, Hooks::after(after)).await;
    }

    /// [`Outbound::publish`] with both [`Hooks`].
    pub async fn publish_hooked(&self, msg: OutboundMessage, hooks: Hooks) {
        let Some((name, delivery)) = self.deliveries.get_key_value(msg.channel_name.as_str())
        else {
            tracing::warn!(channel = %msg.channel_name, "Dropped a reply for a channel that is not running.");
            metrics::counter!(names::OUTBOUND, "channel" => "unknown", "result" => "no_channel")
                .increment(1);
            if let Some(after) = hooks.after {
                let error = ChannelError::Stopped.to_string();
                after(Landed::Failed {
                    transient: false,
                    error,
                })
                .await;
            }
            return;
        };
        self.lanes
            .push(name, delivery, msg, hooks, Job::Reply)
            .await;
    }

    /// Tells `source`'s channel, after every reply published to it so far was delivered,
    /// that the bridge is done with it, if the channel asks to hear it
    /// ([`Capabilities::turn_ends`]).
    /// A final of the turn that failed and waits for the journal's retry holds this back
    /// until [`Outbound::retries_settled`] (or [`Outbound::retry_superseded`]).
    pub async fn turn_ended(&self, source: &InboundMessage) {
        self.tell_end(source, Job::TurnEnd).await;
    }

    /// Tells `source`'s channel, as [`Outbound::turn_ended`] does, that the bridge is done
    /// with it now that the journal's retries of one entry's finals (their send keys
    /// `keys`) settled: delivered (`answered`), or given up; once no other final of it
    /// waits for a retry.
    pub async fn retries_settled(&self, source: &InboundMessage, answered: bool, keys: &[String]) {
        let keys = keys.to_vec();
        self.tell_end(source, Job::Settled { answered, keys }).await;
    }

    /// Tells `source`'s channel nothing yet, but that a final of its turn that failed
    /// and waited for the journal's retry gave way to a later one (its send key `key`):
    /// the turn's end, held back for that retry, is told as it comes (or now, if it came
    /// and no other final of the turn waits for a retry).
    pub async fn retry_superseded(&self, source: &InboundMessage, key: Option<String>) {
        self.tell_end(source, Job::Superseded { key }).await;
    }

    /// The journal no longer retries the finals of `source`'s turn: their entry was
    /// `taken` over by another replica (which tells the channel the bridge is done with
    /// `source`, so nothing is told from here, the turn's own end included), or dropped by
    /// an operator (the end says `source` went unanswered). `keys` are the send keys of
    /// that entry's finals: another entry's finals of `source` that wait for their own
    /// retries (a message that carried held finals) still hold the end back. Returns
    /// whether that end came already and is owed now ([`Outbound::retries_settled`] tells
    /// it). Changes nothing when no end waits for those retries.
    pub fn retries_left(&self, source: &InboundMessage, taken: bool, keys: &[String]) -> bool {
        let Some((name, delivery)) = self.deliveries.get_key_value(source.channel_name.as_str())
        else {
            return false;
        };
        if !delivery.channel().capabilities().turn_ends {
            return false;
        }
        let marker = source.reply(String::new(), true);
        let key = (*name, marker.chat_id);
        self.lanes.retries_left(key, marker.thread_ts, taken, keys)
    }

    /// Sources whose finals' fate is kept for their turn's end (tests: none is left behind).
    #[cfg(test)]
    pub(crate) fn fates_kept(&self) -> usize {
        self.lanes.fates_kept()
    }

    async fn tell_end(&self, source: &InboundMessage, job: Job) {
        let Some((name, delivery)) = self.deliveries.get_key_value(source.channel_name.as_str())
        else {
            return;
        };
        if delivery.channel().capabilities().turn_ends {
            let marker = source.reply(String::new(), true);
            self.lanes
                .push(name, delivery, marker, Hooks::default(), job)
                .await;
        }
    }

    /// Waits until every reply published so far (and any published meanwhile) was
    /// delivered or failed, for at most `bound`; `false` when the bound ran out first.
    pub async fn flush(&self, bound: Duration) -> bool {
        self.lanes.flush(bound).await
    }
}

/// Delivers `msg` through `delivery`, counting and logging the outcome.
async fn deliver(
    delivery: &Delivery,
    msg: &OutboundMessage,
    before: Option<im_bridge_channel::BeforeFinal>,
    gate: Option<Gate>,
) -> Landed {
    let channel = delivery.channel().name();
    match delivery.deliver_noting(msg, before, gate).await {
        Ok(shown) => {
            let kind = if msg.is_final { "final" } else { "partial" };
            metrics::counter!(names::OUTBOUND, "channel" => channel, "result" => kind).increment(1);
            Landed::Shown(shown)
        }
        Err(ChannelError::ReplyWindow(reason)) => window_closed(channel, msg, reason, None),
        Err(ChannelError::ReplyWindowRest { reason, rest }) => {
            window_closed(channel, msg, reason, Some(rest))
        }
        // The gate said why (the journal's fence logs it).
        Err(ChannelError::Withheld) => withheld(channel),
        Err(error) => {
            tracing::warn!(channel, %error, is_final = msg.is_final, "Delivering a reply failed.");
            metrics::counter!(names::OUTBOUND, "channel" => channel, "result" => "error")
                .increment(1);
            Landed::Failed {
                transient: error.is_transient(),
                error: error.to_string(),
            }
        }
    }
}

/// What became of a final the journal's fence withheld ([`Gate`]): it failed for now,
/// counted as `withheld`.
fn withheld(channel: &'static str) -> Landed {
    metrics::counter!(names::OUTBOUND, "channel" => channel, "result" => "withheld").increment(1);
    Landed::Failed {
        transient: true,
        error: WITHHELD.to_owned(),
    }
}

/// What became of `msg` when its source took no more replies (`rest`: after its first
/// messages): not a failure of the platform, the publisher holds it for a later message.
fn window_closed(
    channel: &'static str,
    msg: &OutboundMessage,
    reason: &'static str,
    rest: Option<String>,
) -> Landed {
    tracing::info!(
        channel,
        reason,
        is_final = msg.is_final,
        partly = rest.is_some(),
        "A reply's source takes no more replies."
    );
    metrics::counter!(names::OUTBOUND, "channel" => channel, "result" => "window_closed")
        .increment(1);
    Landed::WindowClosed { rest }
}
