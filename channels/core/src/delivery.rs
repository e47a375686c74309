//! The delivery engine: turns a conversation's outbound stream into primitive calls.
//!
//! For each `(chat, source message)` the manager publishes zero or more non-final
//! cumulative texts, then exactly one final. [`Delivery`] shows the partials while the
//! reply is written and makes sure the final lands, driven only by the channel's
//! [`Capabilities`](crate::Capabilities).
//!
//! # Layers
//!
//! Like teloxide's `Requester` adaptors, each behaviour is a wrapper that implements
//! [`Channel`] over another `Channel`, and [`ChannelExt`] composes them. Each layer does one
//! thing, knows nothing of the others, and is tested on its own. What a layer does not
//! change it passes on with `forward_channel!` (forward.rs), so only its own calls are
//! written out:
//!
//! ```text
//! Delivery ── streams (coalescer) ─┐
//!          └── final ──────────────┤
//!                                  ▼
//!   LimitLength   finals split into messages, previews truncated    (limit.rs, split.rs)
//!   FinishOrSend  a stream message that cannot be finished → a new message (fallback.rs)
//!   PassiveReplies each write answering a source takes one of its replies (passive.rs)
//!   RetryFinals   finals wait out Retry-After (bounded); partials never retried (retry.rs)
//!   Throttle      min edit interval per message; Retry-After pauses the chat (throttle.rs)
//!   Budgets       the bot-wide rate budgets: finals wait, partials skip (budgets.rs)
//!   Newest        notes each chat's newest message, for replies that stay last (newest.rs)
//!   Fenced        a final's writes ask its gate, if any, until one landed (fence.rs)
//!   the adapter   primitive calls only
//! ```
//!
//! The order matters: splitting happens above the fallback, so a failed finish falls back
//! to sending the *first chunk* only; both sit above the retries, so each chunk is retried
//! on its own and a retry never resends a chunk that landed; the throttle and the budgets
//! are low, so every call, retries included, is paced, and a bot-wide token is taken
//! just before the call that spends it (not before a wait for the chat's own budget);
//! below them only what waits for nothing: noting each chat's newest message, and the
//! final's gate, asked after every wait above it.
//!
//! What is not a per-call layer lives here and in `streams.rs`: which partials to show at
//! all. That needs state across calls (the stream's message, the one pending text, a
//! flusher task that wakes when the [`EditClock`] allows), so it is a small coalescer over
//! the layered channel rather than a wrapper of it.
//!
//! # Bounds
//!
//! One pending text per live stream; live streams are bounded by the runs in flight and
//! hard-capped at [`MAX_STREAMS`] (oldest evicted). Flusher tasks: at most one per live
//! stream, tracked, and cancelled by their stream's final or when the engine is dropped.
//! The throttle's maps are bounded as documented in `throttle.rs`.

mod budgets;
mod fallback;
mod fence;
mod forward;
mod limit;
mod newest;
mod passive;
#[cfg(test)]
mod recorder;
mod retry;
pub mod split;
mod streams;
mod throttle;

use std::sync::Arc;

use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::channel::{Channel, SendTarget};
use crate::error::ChannelResult;
use crate::ids::MessageId;
use crate::message::OutboundMessage;

pub use budgets::{BUDGET_FALLBACKS, BUDGET_SKIPS, BUDGET_WAITS, BudgetPlan, Budgets};
pub use fallback::FinishOrSend;
pub use fence::{Fenced, WriteGate};
pub use limit::LimitLength;
pub use newest::{MAX_NEWEST_CHATS, Newest, NewestMessages};
pub use passive::{MAX_SOURCES, PassiveReplies, REPLY_WINDOW_REFUSED, ReplyQuotas};
pub use retry::{RetryFinals, RetryPolicy};
pub use streams::MAX_STREAMS;
pub use throttle::{EditClock, MAX_PAUSE_WAIT, Throttle};

use fence::FinalFence;
use forward::forward_channel;
pub use streams::StreamStarted;
use streams::{Flusher, Offer, Stream, Streams, stream_key};

/// The layers [`Delivery`] puts over a channel, top first.
type Stack = LimitLength<
    FinishOrSend<PassiveReplies<RetryFinals<Throttle<Budgets<Newest<Fenced<Arc<dyn Channel>>>>>>>>,
>;

/// Composes the delivery layers over a channel (see the module docs for their order).
pub trait ChannelExt: Channel + Sized {
    /// Splits finals and truncates previews to the length limit.
    fn limit_length(self) -> LimitLength<Self> {
        LimitLength::new(self)
    }

    /// Sends a final as a new message when its stream message cannot be finished.
    fn finish_or_send(self) -> FinishOrSend<Self> {
        FinishOrSend::new(self)
    }

    /// Counts each write answering a source against its replies (see `passive.rs`).
    fn passive_replies(self, quotas: Arc<ReplyQuotas>) -> PassiveReplies<Self> {
        PassiveReplies::new(self, quotas)
    }

    /// Waits out `Retry-After` on the calls that carry a final.
    fn retry_finals(self, policy: RetryPolicy) -> RetryFinals<Self> {
        RetryFinals::new(self, policy)
    }

    /// Paces edits and pauses a chat after `Retry-After`.
    fn throttle(self) -> Throttle<Self> {
        Throttle::new(self)
    }

    /// Keeps writes within `plan`'s rate budgets (see `budgets.rs`).
    fn budgets(self, plan: BudgetPlan) -> Budgets<Self> {
        Budgets::new(self, plan)
    }

    /// Notes into `newest` what each chat was sent last (see `newest.rs`).
    fn newest(self, newest: Arc<NewestMessages>) -> Newest<Self> {
        Newest::new(self, newest)
    }

    /// Asks the delivery's gate before each write of a final (see `fence.rs`).
    fn fenced(self) -> Fenced<Self> {
        Fenced::new(self)
    }
}

impl<C: Channel> ChannelExt for C {}

/// A shared channel is a channel, so layers can wrap `Arc<dyn Channel>`.
impl<C: Channel + ?Sized> Channel for Arc<C> {
    forward_channel!(as_ref() => identity, name, capabilities, is_connected, exclusive_transport, run, send_text, start_stream,
        edit_text, finish_stream, send_file, show_typing, turn_ended, react, thread_of, fetch_file);
}

/// Delivers outbound messages to one channel.
///
/// Dropping it stops its flusher tasks; partial texts still pending are dropped with them.
pub struct Delivery {
    channel: Arc<dyn Channel>,
    /// The replies each source message has taken (channels with a reply window).
    quotas: Arc<ReplyQuotas>,
    /// What each chat was sent last, for replies that stay last.
    newest: Arc<NewestMessages>,
    flusher: Flusher<Stack>,
    streams: Streams,
    /// Parent of every stream's token; cancelled on drop.
    shutdown: CancellationToken,
}

impl std::fmt::Debug for Delivery {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Delivery")
            .field("channel", &self.channel.name())
            .field("live_streams", &self.streams.len())
            .finish()
    }
}

impl Delivery {
    /// A delivery engine over `channel`, with the default [`RetryPolicy`].
    pub fn new(channel: Arc<dyn Channel>) -> Self {
        Self::with_policy(channel, RetryPolicy::default())
    }

    /// A delivery engine over `channel` whose finals retry under `policy`, within the rate
    /// budgets the channel declares, kept in this process.
    pub fn with_policy(channel: Arc<dyn Channel>, policy: RetryPolicy) -> Self {
        let plan = BudgetPlan::declared(&channel.capabilities());
        Self::with_budgets(channel, policy, plan)
    }

    /// A delivery engine over `channel` whose finals retry under `policy`, within the rate
    /// budgets of `plan`.
    pub fn with_budgets(channel: Arc<dyn Channel>, policy: RetryPolicy, plan: BudgetPlan) -> Self {
        let newest = Arc::new(NewestMessages::default());
        let throttle = channel
            .clone()
            .fenced()
            .newest(newest.clone())
            .budgets(plan)
            .throttle();
        let clock = throttle.clock().clone();
        let quotas = Arc::new(ReplyQuotas::default());
        let stack = LimitLength::with_quotas(
            throttle
                .retry_finals(policy)
                .passive_replies(quotas.clone())
                .finish_or_send(),
            quotas.clone(),
        );
        Self {
            channel,
            quotas,
            newest,
            flusher: Flusher {
                stack: Arc::new(stack),
                clock,
                tasks: TaskTracker::new(),
                started: None,
            },
            streams: Streams::default(),
            shutdown: CancellationToken::new(),
        }
    }

    /// Calls `started` whenever a streamed reply got the platform message that shows it
    /// (the daemon journals it, so a restarted process can finish that same message).
    pub fn on_stream_started(mut self, started: StreamStarted) -> Self {
        self.flusher.started = Some(started);
        self
    }

    /// The channel this engine delivers to.
    pub fn channel(&self) -> &Arc<dyn Channel> {
        &self.channel
    }

    /// How many more messages may answer `msg`'s source: `None` when the channel has no
    /// reply window or `msg` answers no source.
    pub fn replies_left(&self, msg: &OutboundMessage) -> Option<u32> {
        self.quotas.remaining(
            self.channel.capabilities().reply_window,
            &SendTarget::from(msg),
        )
    }

    /// Shows the typing hint in `to`'s chat, unless a rate budget it draws on is short.
    pub async fn show_typing(&self, to: SendTarget<'_>) -> ChannelResult {
        self.flusher.stack.show_typing(to).await
    }

    /// How many replies are being streamed right now.
    pub fn live_streams(&self) -> usize {
        self.streams.len()
    }

    /// Delivers one outbound message.
    ///
    /// A partial returns once it is shown or left pending for a flusher; it never waits
    /// for the edit interval and never fails (a partial that cannot be shown is dropped).
    /// A final returns once its text was accepted and its attachments were tried; an error
    /// means the text did not land.
    ///
    /// A final's `Ok` names the message that shows it (the streamed message it finished, or
    /// the one it was sent as), so the daemon can tell which conversation a later reply to
    /// it belongs to; a partial's names the message showing its stream once there is one
    /// (the daemon journals it, so a restarted bridge can finish that same message).
    ///
    /// A stream's message is started under a send key of the stream's own, the same on
    /// every attempt, so a start the platform took whose answer was lost is, where the
    /// platform names a send by its key, the same message when it is started again (by the
    /// next partial, or by the final), not a second one above the answer.
    ///
    /// A final whose [`hints`](OutboundMessage::hints) name a message it
    /// [`resumes`](crate::DeliveryHints::resumes) and whose stream is not live
    /// (the process that streamed it stopped) finishes that message instead of sending a new
    /// one; if it can no longer be edited, the final is sent as a new message.
    pub async fn deliver(&self, msg: &OutboundMessage) -> ChannelResult<Option<MessageId>> {
        self.deliver_noting(msg, None, None).await
    }

    /// [`Delivery::deliver`], telling a final's `before` which message the final is about
    /// to finish (`None`: it will be sent as a new message) once that is settled and before
    /// any platform call that writes the final (a stream start lost to network trouble is
    /// made again first, to find its message), and waiting for it: a caller that must
    /// survive a crash records there which message a re-delivery has to edit (issue 27).
    /// `gate` is asked just before each call that writes a final until one of them landed
    /// (not for a stream the final leaves behind), and one it refuses fails
    /// with [`ChannelError::Withheld`](crate::ChannelError::Withheld) (see `fence.rs`). A
    /// partial ignores both.
    pub async fn deliver_noting(
        &self,
        msg: &OutboundMessage,
        before: Option<BeforeFinal>,
        gate: Option<WriteGate>,
    ) -> ChannelResult<Option<MessageId>> {
        if msg.is_final {
            self.deliver_final(msg, before, FinalFence::new(gate))
                .await
                .map(Some)
        } else {
            Ok(self.deliver_partial(msg).await)
        }
    }

    async fn deliver_partial(&self, msg: &OutboundMessage) -> Option<MessageId> {
        if !self.channel.capabilities().shows_partial_updates() {
            return None;
        }
        let mut stream = self.streams.get_or_open(msg, &self.shutdown);
        if msg.hints.stays_last && self.overtaken(&stream) {
            self.streams.remove(&stream_key(msg));
            self.leave_behind(&stream).await;
            stream = self.streams.reopen(msg, &self.shutdown);
        }
        if stream.offer(&msg.text) == Offer::Flush {
            self.flusher.flush(stream.clone()).await;
        }
        stream.message()
    }

    /// Delivers final `msg`, its writes under `fence`.
    async fn deliver_final(
        &self,
        msg: &OutboundMessage,
        before: Option<BeforeFinal>,
        fence: FinalFence,
    ) -> ChannelResult<MessageId> {
        let (started, overtaken) = match self.streams.remove(&stream_key(msg)) {
            Some(stream) if msg.hints.stays_last && self.overtaken(&stream) => (None, Some(stream)),
            Some(stream) => (fence.scope(self.close_for_final(&stream, msg)).await?, None),
            None => (resumed(msg), None),
        };
        if let Some(before) = before {
            before(started.clone()).await;
        }
        if let Some(stream) = overtaken {
            // Not a write of the final: the stream it leaves behind is finished ungated.
            self.leave_behind(&stream).await;
        }
        fence.scope(self.write_final(msg, started)).await
    }

    /// Writes final `msg`: finishes the stream message `started`, or sends it as a new
    /// one; then its files.
    async fn write_final(
        &self,
        msg: &OutboundMessage,
        started: Option<MessageId>,
    ) -> ChannelResult<MessageId> {
        let stack = &self.flusher.stack;
        let target = SendTarget::from(msg);
        let shown = match started {
            Some(message) => {
                stack.finish_stream(target, &message, &msg.text).await?;
                message
            }
            None => stack.send_text(target, &msg.text).await?.id,
        };
        // Files answer the message that shows the final, so they read as part of it; where
        // a bot may only answer the user's message (a reply window), they answer that.
        let target = if self.channel.capabilities().reply_window.is_some() {
            target
        } else {
            SendTarget {
                reply_to: Some(&shown),
                ..target
            }
        };
        for file in &msg.attachments {
            if let Err(error) = stack.send_file(target, file).await {
                tracing::warn!(channel = self.channel.name(), %error, "Uploading an attachment failed.");
                // Never silent: the reader is told which file did not come. A line of its
                // own, never under the answer's send key (that would name the answer).
                let hints = target.hints.unnamed();
                let target = SendTarget {
                    hints: &hints,
                    ..target
                };
                if let Some(line) = &file.if_refused
                    && let Err(error) = stack.send_text(target, line).await
                {
                    tracing::warn!(channel = self.channel.name(), %error, "Telling the chat a file was refused failed.");
                }
            }
        }
        Ok(shown)
    }

    /// Ends `stream` (already removed) for its final `msg`: the message to finish, if the
    /// stream has one. When a start of it met network or server trouble and none landed
    /// since, the platform may show a message all the same: the stream is started again
    /// under its send key, which a platform that names a send by its key (Discord's
    /// `nonce`, Feishu's `uuid`) answers with that message, so the final finishes it
    /// instead of showing a second one. Elsewhere this is the new message the final would
    /// have been sent as; if the start fails, the final is sent as a new message. A start
    /// the final's gate withheld is [`ChannelError::Withheld`](crate::ChannelError::Withheld):
    /// the final waits, to be sent as a new message by whichever process delivers it again
    /// (a lost start that landed after all stays as it shows). The stream is not kept for
    /// that: its key is the source message's, which the turn's next reply (a goal's next
    /// segment) streams under meanwhile.
    async fn close_for_final(
        &self,
        stream: &Stream,
        msg: &OutboundMessage,
    ) -> ChannelResult<Option<MessageId>> {
        if let Some(message) = stream.close().await {
            return Ok(Some(message));
        }
        let Some(hints) = stream.lost_start() else {
            return Ok(None);
        };
        let target = stream.target().with_hints(&hints);
        match self.flusher.stack.start_stream(target, &msg.text).await {
            Ok(sent) => Ok(Some(sent.id)),
            Err(crate::ChannelError::Withheld) => Err(crate::ChannelError::Withheld),
            Err(error) => {
                tracing::debug!(channel = self.channel.name(), %error, "Starting a stream again for its final failed.");
                Ok(None)
            }
        }
    }

    /// Whether `stream`'s message is no longer the newest in its chat (or its thread,
    /// where the chat's threads read apart).
    fn overtaken(&self, stream: &Stream) -> bool {
        let Some(message) = stream.message() else {
            return false;
        };
        let to = stream.target();
        self.newest
            .overtaken(to.chat_id, self.channel.thread_of(to), &message)
    }

    /// Ends `stream` (already removed) where it stands, since the reply goes on below it:
    /// where a streamed message shows it is still being written until finished, it is
    /// finished with what it shows. Below the splitting and the fallback: the text fits
    /// (it is shown), and one that cannot be finished is not sent again as a new message.
    async fn leave_behind(&self, stream: &Stream) {
        let (Some(message), Some(text)) = stream.close_showing().await else {
            return;
        };
        if !self.channel.capabilities().finish_closes_stream {
            return;
        }
        let target = stream.target();
        let below_fallback = self.flusher.stack.inner().inner();
        if let Err(error) = below_fallback.finish_stream(target, &message, &text).await {
            tracing::debug!(channel = self.channel.name(), %error, "Finishing an overtaken stream message failed.");
        }
    }
}

/// Told which message a final is about to finish, before the platform hears of it (see
/// [`Delivery::deliver_noting`]).
pub type BeforeFinal =
    Box<dyn FnOnce(Option<MessageId>) -> futures_util::future::BoxFuture<'static, ()> + Send>;

/// The message a reply resumes (see [`Delivery::deliver`]), on a channel that edits
/// streamed messages.
pub(super) fn resumed(msg: &OutboundMessage) -> Option<MessageId> {
    msg.hints
        .resumes
        .clone()
        .filter(|id| !id.as_str().is_empty())
}

impl Drop for Delivery {
    fn drop(&mut self) {
        self.shutdown.cancel();
        self.flusher.tasks.close();
    }
}

#[cfg(test)]
mod tests;
