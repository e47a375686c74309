//! The channel manager: from an admitted inbound message to its replies.
//!
//! One dispatcher owns the inbound queue and takes each message as it comes, while it
//! still counts against the queue's bound (its [`Room`](im_bridge_channel::Room)). A
//! message older than its channel's `max_event_age` (a backlog delivered after an outage)
//! is consumed without being acted on, its chat told once (`stale`). Any other is resolved
//! to its conversation (a group reply joins the conversation of the message it answers,
//! `follow_reply_chain`; an answer to a pending question, `clarify`), takes its place in
//! that conversation's line in arrival order, and is handled on a tracked task in five
//! stages (`handle`), holding its room until it holds a worker slot (at most
//! `channels.max_concurrency` messages are handled at once):
//!
//! 1. **admit** — journaled with its dedupe record at once, before it waits for a worker,
//!    so a message the platform was told is taken survives a crash however long the
//!    workers are busy; a redelivery (same channel, workspace, chat and platform message
//!    id within the TTL, persisted across restarts) is dropped silently;
//! 2. **take its place** — it waits for the conversation's earlier messages, or a full line
//!    gets the busy reply;
//! 3. **show presence** — "typing…" for an agent turn;
//! 4. **dispatch** — known commands are answered here (`commands`), everything else
//!    becomes an agent run on the conversation's thread (`run`);
//! 5. **settle** — the dedupe key is kept on success and released when the provider
//!    should be able to retry (a failed run, a busy thread, a cancelled message), always
//!    after the final reply was published; the journal entry hears the turn ended.
//!
//! Replies reach the delivery engine as `OutboundMessage`s; what the manager tells the
//! engine beyond the text (the truncation note, the message a recovered reply finishes, the
//! line a held answer opens with) travels in their typed
//! [`hints`](im_bridge_channel::DeliveryHints).
//!
//! Shutdown order (spec manager §3.4), driven by [`Manager::run`]'s `closing` token: close
//! admission → let the queue drain for the grace period → cancel unfinished handlers
//! (releasing their dedupe keys) → discard never-started messages → wait for every task.
//! Transports are stopped by the daemon only after this returns, so a reply already under
//! way can still land.

mod artifacts;
mod bindings;
mod clarify;
pub mod commands;
mod compacting;
mod dedupe;
mod deliveries;
mod files;
mod handle;
mod inflight;
mod join;
pub mod journal;
mod order;
mod owners;
pub mod params;
mod recover;
mod reply;
mod run;
mod staging;
pub mod stale;
pub mod stream;
pub mod turn;
mod typing;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use im_bridge_channel::{ChatKind, InboundMessage, InboundQueue, MessageId, MsgType, Queued};
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::Instrument;

use crate::bus::Outbound;
use crate::config::SessionLayer;
use crate::gateway::{GatewayClient, Owner};
use crate::i18n::Catalogs;
use crate::policy::DEFAULT_MAX_REPLY_MESSAGES;
use crate::store::{ConversationKey, Store};
use crate::telemetry::names;

pub use crate::policy::{BusyPolicy, Queueing};
pub use bindings::{BindError, Bindings, channel_source, conversation_key};
pub use owners::{Owners, SINGLE_USER};
pub use reply::{LocaleSource, Replier};
pub use run::PLACEHOLDER_DELAY;

/// How long a platform message id is remembered for dedupe: at least twice the signed
/// webhooks' freshness window, so a replay inside it is dropped (asserted in `dedupe`).
pub const DEDUPE_TTL: Duration = Duration::from_secs(600);

/// What the manager needs from the configuration.
#[derive(Clone, Debug)]
pub struct ManagerConfig {
    /// `channels.session`.
    pub session: SessionLayer,
    /// `channels.<channel>.session`, by channel name.
    pub channel_sessions: HashMap<String, SessionLayer>,
    /// `channels.<channel>.locale`, by channel name.
    pub channel_locales: HashMap<String, String>,
    /// `channels.<channel>.admin_users`, by channel name: who may change group settings.
    pub channel_admins: HashMap<String, im_bridge_channel::AllowedUsers>,
    /// `channel_connections.notification_locale`.
    pub notification_locale: String,
    /// Messages handled at once.
    pub max_concurrency: usize,
    /// Who owns each conversation on the DeerFlow side.
    pub owners: Owners,
    /// Most messages one reply may fill (`bridge.max_reply_messages`); a longer answer is
    /// cut, its last message ending with a localized note.
    pub max_reply_messages: usize,
    /// How each channel treats a message that arrives while its conversation is busy, by
    /// channel name (absent: [`Queueing::default`]).
    pub channel_queueing: HashMap<String, Queueing>,
    /// The in-flight journal's holder name, lease and final retry window.
    pub journal: journal::JournalConfig,
    /// How old a message may be and still be acted on, by channel
    /// (`max_event_age_seconds`).
    pub max_event_age: stale::EventAge,
    /// Where inbound files are kept from a message's admission to its turn, on channels
    /// whose file handles expire (`staging.rs`); `None` reads them at the turn. The daemon
    /// puts it beside the SQLite file
    /// ([`StoreLocation::inbound_files`](crate::store::StoreLocation::inbound_files)), or,
    /// with Postgres, in a temporary directory of its process.
    pub inbound_files: Option<std::path::PathBuf>,
}

impl Default for ManagerConfig {
    fn default() -> Self {
        Self {
            session: SessionLayer::default(),
            channel_sessions: HashMap::new(),
            channel_locales: HashMap::new(),
            channel_admins: HashMap::new(),
            notification_locale: String::new(),
            max_concurrency: 0,
            owners: Owners::default(),
            max_reply_messages: DEFAULT_MAX_REPLY_MESSAGES,
            channel_queueing: HashMap::new(),
            journal: journal::JournalConfig::default(),
            max_event_age: stale::EventAge::default(),
            inbound_files: None,
        }
    }
}

impl ManagerConfig {
    /// How `channel` treats a message that arrives while its conversation is busy.
    pub(crate) fn queueing(&self, channel: &str) -> Queueing {
        self.channel_queueing
            .get(channel)
            .copied()
            .unwrap_or_default()
    }
}

/// A message's place in its conversation's line.
#[derive(Debug)]
pub(crate) enum Place {
    /// It keeps no place (a command beside the conversation's turns).
    Free,
    /// It waits for the earlier ones.
    InLine(order::Ticket),
    /// The line is full (or the channel rejects while busy): the busy reply, or when the
    /// run had its busy reply already, a reaction.
    Busy,
}

impl Place {
    /// Gives the place up without being handled, keeping the line's order.
    fn abandon(self) {
        if let Self::InLine(ticket) = self {
            ticket.abandon();
        }
    }
}

/// What became of a message, for the dedupe key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Disposition {
    /// Handled: a redelivery must not run again.
    Keep,
    /// Not handled for good: a redelivery may retry.
    Release,
}

/// Counts from a drain, for the shutdown log line.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DrainReport {
    /// Reservations invalidated when admission closed.
    pub invalidated_reservations: usize,
    /// Handlers cancelled because the grace period ran out.
    pub cancelled: usize,
    /// Queued messages that never started.
    pub discarded: usize,
    /// Replies were still on their way when the journal's flush (one grace period after
    /// the drain) gave up: the daemon waits for them no longer.
    pub replies_left: bool,
}

/// The dispatcher's workers: the slots that bound how many messages are handled at once,
/// the tasks handling them, and what cancels those once the grace period ran out.
pub(crate) struct Workers {
    slots: Arc<Semaphore>,
    tasks: TaskTracker,
    cancel: CancellationToken,
}

impl Workers {
    /// `max_concurrency` slots (at least one).
    fn new(max_concurrency: usize) -> Self {
        Self {
            slots: Arc::new(Semaphore::new(max_concurrency.max(1))),
            tasks: TaskTracker::new(),
            cancel: CancellationToken::new(),
        }
    }
}

/// The channel manager. Cheap to clone.
#[derive(Clone)]
pub struct Manager {
    inner: Arc<Inner>,
}

pub(crate) struct Inner {
    pub(crate) gateway: GatewayClient,
    pub(crate) store: Arc<dyn Store>,
    pub(crate) bindings: Bindings,
    pub(crate) replier: Replier,
    pub(crate) config: ManagerConfig,
    turnstile: order::Turnstile,
    /// Runs in flight by conversation, for `/stop` (one entry per run in flight).
    pub(crate) runs: inflight::Runs,
    /// Attachment bytes held in memory at once, across all messages.
    pub(crate) attachments: files::AttachmentBudget,
    /// Questions asked in groups, so a plain answer joins the asking conversation.
    pub(crate) clarifications: clarify::Pending,
    /// The threads a `/compact` is compacting: a run start on one waits for it.
    pub(crate) compacting: compacting::Compacting,
    /// Admitted chat messages until their final landed (issue 19).
    pub(crate) journal: journal::Journal,
    /// Inbound files read ahead, on channels whose file handles expire.
    pub(crate) staging: staging::Staging,
}

impl Inner {
    /// The DeerFlow user `msg`'s conversation acts as (`owners.rs` has the rule).
    pub(crate) fn owner(&self, msg: &InboundMessage) -> Owner {
        self.config.owners.owner_of(msg)
    }
}

impl Manager {
    /// A manager over its collaborators.
    pub fn new(
        config: ManagerConfig,
        gateway: GatewayClient,
        store: Arc<dyn Store>,
        catalogs: Arc<Catalogs>,
        outbound: Arc<Outbound>,
    ) -> Self {
        let journal =
            journal::Journal::new(store.clone(), outbound.clone(), config.journal.clone());
        let replier = Replier::new(catalogs, store.clone(), gateway.clone(), outbound, &config);
        let bindings = Bindings::new(store.clone(), gateway.clone());
        let staging = staging::Staging::new(config.inbound_files.clone());
        let clarifications = clarify::Pending::new(store.clone());
        Self {
            inner: Arc::new(Inner {
                gateway,
                store,
                bindings,
                replier,
                config,
                turnstile: order::Turnstile::default(),
                runs: inflight::Runs::default(),
                attachments: files::AttachmentBudget::new(files::MEMORY_BUDGET_BYTES),
                clarifications,
                compacting: compacting::Compacting::default(),
                journal,
                staging,
            }),
        }
    }

    /// Handles admitted messages until `closing` is cancelled and the queue is drained
    /// (or the grace period ran out after `closing`), then returns what the drain did.
    /// The grace period is read from `grace` when `closing` fires, so the daemon can pick
    /// it by the reason for stopping (a signal, or the console's input ending).
    pub async fn run(
        &self,
        mut queue: InboundQueue,
        closing: CancellationToken,
        grace: tokio::sync::watch::Receiver<Duration>,
    ) -> DrainReport {
        let workers = Workers::new(self.inner.config.max_concurrency);
        let mut report = DrainReport::default();
        let mut closed = false;
        let deadline = tokio::time::sleep(Duration::MAX);
        tokio::pin!(deadline);
        self.inner.clarifications.load().await;
        // Starts the renewal clock finals are published under (`journal/fence.rs`) now,
        // however long the daemon took to get here, rather than at the first tick; the
        // renewals then run on their own until the journal's shutdown, or until this run
        // ends otherwise (the guard).
        self.inner.journal.renew().await;
        let _renewing = self.inner.journal.keep_renewing();
        let mut journal_tick = self.recover_at_start(&workers).await;
        loop {
            // Closing (or the grace running out) wins over the wait for a message.
            let queued = tokio::select! {
                biased;
                () = closing.cancelled(), if !closed => {
                    closed = true;
                    report.invalidated_reservations = queue.close();
                    deadline.as_mut().reset(grace_deadline(*grace.borrow()));
                    continue;
                }
                () = &mut deadline, if closed => break,
                // Another replica may have died holding work, or an operator retried some.
                _ = journal_tick.tick() => {
                    metrics::gauge!(names::QUEUE_DEPTH).set(queue.waiting() as f64);
                    self.journal_upkeep(closed, &workers).await;
                    continue;
                }
                () = self.inner.journal.upkept() => {
                    self.journal_upkeep(closed, &workers).await;
                    continue;
                }
                queued = queue.recv_held() => queued,
            };
            let Some(queued) = queued else {
                // Closed and drained: wait for the running handlers within the grace.
                workers.tasks.close();
                tokio::select! {
                    () = workers.tasks.wait() => {
                        let flush = *grace.borrow();
                        report.replies_left = !self.inner.journal.shut_down(flush).await;
                        return report;
                    }
                    () = &mut deadline => break,
                }
            };
            metrics::gauge!(names::QUEUE_DEPTH).set(queue.waiting() as f64);
            self.start(queued, &workers).await;
        }
        // The grace period ran out: cancel what still runs, drop what never started.
        report.cancelled = workers.tasks.len();
        workers.cancel.cancel();
        report.discarded = queue.discard_pending();
        workers.tasks.close();
        workers.tasks.wait().await;
        let flush = *grace.borrow();
        report.replies_left = !self.inner.journal.shut_down(flush).await;
        if report.cancelled > 0 || report.discarded > 0 {
            tracing::warn!(
                cancelled = report.cancelled,
                discarded = report.discarded,
                "Shutdown grace period ran out."
            );
        }
        report
    }

    /// What a previous process (or a dead replica) left unfinished goes first: claimed and
    /// started before any new message. Returns the clock of the journal's upkeep.
    async fn recover_at_start(&self, workers: &Workers) -> tokio::time::Interval {
        let take_live = !self.inner.store.is_shared();
        let recovered = self.inner.journal.claim(take_live).await;
        let staged = staging::named_by(&recovered);
        self.inner.staging.sweep(&staged).await;
        self.spawn_recovered(recovered, workers);
        self.inner.journal.sweep().await;
        let mut journal_tick = tokio::time::interval(
            (self.inner.journal.config().lease / 3).max(Duration::from_millis(100)),
        );
        journal_tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        journal_tick.reset();
        journal_tick
    }

    /// Starts handling a received message: one too old to act on is only consumed; any
    /// other takes its place in its conversation's line now, in arrival order, and is
    /// handled on a task of its own (`handle.rs`), which takes a worker slot once it was
    /// journaled.
    async fn start(&self, queued: Queued, workers: &Workers) {
        let (msg, room) = queued.into_parts();
        // Its place in its conversation's line, as journaled: recovery keeps this order.
        let arrived = crate::store::arrival_stamp();
        let outbound = self.inner.replier.outbound();
        metrics::counter!(names::INBOUND, "channel" => outbound.channel_label(&msg.channel_name))
            .increment(1);
        let manager = self.clone();
        if let Some(age) = self
            .inner
            .config
            .max_event_age
            .stale(&msg, stale::now_unix())
        {
            // Too old to act on: it takes no place in any line.
            let span = message_span(&msg);
            workers.tasks.spawn(
                async move {
                    stale::consume(&manager.inner, &msg, age).await;
                    manager.inner.replier.outbound().turn_ended(&msg).await;
                    drop(room);
                }
                .instrument(span),
            );
            return;
        }
        // The conversation a group reply belongs to decides its line: resolved here,
        // in arrival order, before it takes a place.
        let msg = self.follow_reply_chain(msg).await;
        // A question it took travels with it: kept if it runs, else given back.
        let (msg, taken) = self.inner.clarifications.join(msg, &workers.tasks).await;
        let place = self.place_in_line(&msg);
        let cancel = workers.cancel.clone();
        let slot = handle::Slot::queued(room, workers.slots.clone());
        let span = message_span(&msg);
        workers.tasks.spawn(
            async move {
                manager
                    .handle(msg, cancel, place, slot, arrived, taken)
                    .await;
            }
            .instrument(span),
        );
    }

    /// A group message that replies to a message the bridge saw or sent continues that
    /// message's conversation (issue 13): its topic becomes that conversation's. Anything
    /// else keeps the topic its adapter gave it. A failed lookup keeps it too (logged).
    async fn follow_reply_chain(&self, mut msg: InboundMessage) -> InboundMessage {
        if msg.chat_kind != ChatKind::Group {
            return msg;
        }
        let Some(replied) = &msg.reply_to else {
            return msg;
        };
        match self
            .inner
            .store
            .message_conversation(&msg.channel_name, &msg.chat_id, replied.as_str())
            .await
        {
            Ok(Some(topic)) => msg.topic_id = (!topic.is_empty()).then_some(topic),
            Ok(None) => {}
            Err(error) => {
                tracing::debug!(%error, "Reading a reply chain failed; keeping the message's topic.");
            }
        }
        msg
    }

    /// The message's place in its conversation's line, taken in arrival order: chat turns
    /// and the commands that may start a run (`/goal <objective>`, `/bootstrap`, …) keep
    /// their order on every channel, so a message sent while a goal's run works waits for
    /// it instead of meeting a busy thread (the other commands answer at once, beside
    /// them); every message does on channels that serialize conversations, but `/stop`,
    /// which acts on the run in line before it.
    fn place_in_line(&self, msg: &InboundMessage) -> Place {
        let serialized = self
            .inner
            .replier
            .outbound()
            .capabilities(&msg.channel_name)
            .is_some_and(|c| c.serialize_conversations);
        let runs = msg.msg_type == MsgType::Chat || commands::starts_a_run(msg);
        if (!runs && !serialized) || commands::acts_on_the_line(msg) {
            return Place::Free;
        }
        let queueing = self.inner.config.queueing(&msg.channel_name);
        match self
            .inner
            .turnstile
            .enter(conversation_key(msg).storage_key(), queueing.limit())
        {
            Ok(ticket) => Place::InLine(ticket),
            Err(order::LineFull) => Place::Busy,
        }
    }
}

/// The span every log line about one inbound message is in.
fn message_span(msg: &InboundMessage) -> tracing::Span {
    let message = msg.thread_ts.as_ref().map(|m| m.as_str()).unwrap_or("");
    tracing::info_span!("message", channel = %msg.channel_name, chat = %msg.chat_id, message)
}

/// `now + grace`, clamped so an "unbounded" grace cannot overflow the clock.
fn grace_deadline(grace: Duration) -> tokio::time::Instant {
    const LONGEST: Duration = Duration::from_secs(30 * 24 * 3600);
    tokio::time::Instant::now() + grace.min(LONGEST)
}

/// Remembers that `shown`, a reply's message, and `source`, the message it answers, belong
/// to the conversation `key`, so a reply to either continues it (issue 13, reply chains).
/// A failure is only logged: the next message then starts a conversation of its own.
async fn remember_chain(
    store: &dyn Store,
    key: &ConversationKey,
    source: Option<&MessageId>,
    shown: Option<&MessageId>,
) {
    let ids: Vec<&str> = source
        .into_iter()
        .chain(shown)
        .map(MessageId::as_str)
        .collect();
    if let Err(error) = store.remember_messages(key, &ids).await {
        tracing::debug!(%error, "Remembering a reply chain failed.");
    }
}
