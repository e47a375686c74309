//! The in-flight journal (issue 19): every admitted chat message is recorded in the store
//! until its final landed, so a bridge that was killed, or stopped mid-turn, finishes it on
//! its next start, and on a shared store another replica does once this one's lease on the
//! entry ran out a whole lease ago.
//!
//! # An entry's life
//!
//! 1. **Admitted** with its dedupe record in one store transaction (`Journal::admit`): a
//!    platform's redelivery after a crash is still refused as a duplicate, and the entry is
//!    what makes sure the message is answered anyway.
//! 2. **Starting** (still admitted, with the thread named) just before the run request, the
//!    run carrying the entry's id in its metadata (child `starting`). A `/goal from-chat`
//!    records before that, saved at once, the objective the Gateway composed and saved,
//!    with its thread: a restart starts the run on it instead of composing another goal.
//! 3. **Running** once the Gateway accepted the run: the run id is saved before the first
//!    event is read. Runs are started with `on_disconnect: "continue"`, so a run outlives
//!    the bridge and a restarted bridge follows the same run instead of starting another.
//!    The platform message a streamed reply is shown in (the queued notice, the placeholder
//!    or the first partial) is saved as soon as the delivery engine started it
//!    ([`Outbound::watch_streams`]).
//! 4. **Final pending** once the turn ended while a final had not landed yet: every final
//!    is written into the entry before it is published and struck off once it landed, so a
//!    crash delivers exactly the finals that did not land (never the run's answer read
//!    again). The answer's final writes the stage ahead with it, and an entry holding one
//!    is a pending final to recovery whatever its stage, so the stage itself is not written
//!    at the turn's end, only with the entry's next save. A final published while the run
//!    goes on (a goal continuation's segment, what a hand-off shows) is written ahead as a
//!    *part* instead, and the goal segments sent are counted: a crash then resends the
//!    parts that did not land and follows the run for the rest, publishing only the
//!    segments after those (`recover.rs`). A final that failed for a reason that may pass
//!    (a platform outage, a long
//!    `Retry-After`, the network) is retried with backoff for `bridge.final_retry_hours`,
//!    across restarts (child `retry`). A final that finishes a streamed message records that message
//!    before the platform hears of the edit (the delivery engine's `before` hook), so one
//!    whose edit landed unacknowledged is delivered again as the same edit (a no-op on the
//!    platform), never as a second message (issue 27).
//! 5. Deleted once every final of the turn landed (or was refused for good, which a retry
//!    cannot change); or **given up** once the retry window is over: then no process works
//!    on it and it waits for an operator (issue 33, `im-bridge deliveries`: the `Deliveries`
//!    handle of `crate::operator`), who retries it (any process claims it, its window
//!    restarted) or drops it, for at most [`GAVE_UP_KEPT`](crate::store::GAVE_UP_KEPT). A
//!    retry of a pending final marks it due: its holder's next sweep wakes its retries at
//!    once.
//! 6. **Held** instead when what is left could not go out because its message took no more
//!    replies (a reply window closed, issue 33): it waits, indexed by its chat, for the
//!    chat's next message to carry it (child `held`); it is never given up, and an operator
//!    may only drop it.
//!
//! # How replies find their entry
//!
//! The manager runs a journaled message's turn inside `Entry::scope`, a task-local: every
//! reply the turn publishes, however deep in the command and run code, is tracked against
//! the entry by `Replier::publish_keeping` without threading the entry through each call.
//! A command journaled (one that may start a run: `/goal <objective>`, `/bootstrap`) has
//! its replies tracked the same way, so a goal run's answer is never lost where a chat
//! turn's would not be; the other commands' replies publish untracked.
//!
//! # Recovery
//!
//! At start the manager claims the entries no live process holds (with the single-replica
//! SQLite store, every entry: its lock file proves the previous holder dead) and finishes
//! each (`recover.rs`): an admitted message runs now, a running one is followed by its run
//! id (its answer read when it ended, and the streamed message completed in place), a
//! pending final is retried. A recovered reply opens with a short localized line saying why
//! it comes late. Holders renew their leases every third of the lease; on a shared store
//! every replica claims expired entries at the same pace.
//!
//! Bounded: entries exist only for messages queued, running, with finals pending (at most
//! `final_retry_hours`), held for their chat, or given up (at most
//! [`GAVE_UP_KEPT`](crate::store::GAVE_UP_KEPT)), and the store caps them
//! ([`JOURNAL_CAP`](crate::store::JOURNAL_CAP)).
//!
//! A drain (issue 33) holds the retries of pending finals at once (`Journal::hold`): they
//! stay for the next process, their attempts not counted.
//!
//! On a store replicas share, a final goes out only while its entry is provably this
//! process's (child `fence`): a replica cut off from the store for longer than its lease
//! withholds its finals, and one that finds its entry taken over stops acting for it.
//!
//! Children: `fence` (the renewal clock finals are published under), `held` (answers held
//! for a chat's next message), `retry` (the retries of pending finals), `starting` (a run
//! start journaled before its request, issue 27), `tests` (a joined message's keys).

mod fence;
mod held;
mod retry;
mod starting;
#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::time::Duration;

use im_bridge_channel::{
    ChatId, ChatKind, InboundFile, InboundMessage, MessageId, OutboundMessage,
};
use tokio::sync::Notify;
use tokio::task::futures::TaskLocalFuture;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use self::fence::{Fence, Owned};
use self::retry::give_up;
use crate::bus::{Hooks, Landed, Outbound};
use crate::policy::DEFAULT_FINAL_RETRY_HOURS;
use crate::store::{
    DedupeKey, JournalRecord, JournalState, Journaled, PendingFinal, Store, StoreError, unix_millis,
};

tokio::task_local! {
    /// The entry whose turn this task runs; see the module docs.
    static CURRENT: Entry;
}

/// The journal's settings.
#[derive(Clone, Debug)]
pub struct JournalConfig {
    /// How long an entry stays this process's without a renewal.
    pub lease: Duration,
    /// How long a final that cannot be delivered is retried (`bridge.final_retry_hours`).
    pub final_retry: Duration,
}

impl Default for JournalConfig {
    fn default() -> Self {
        Self {
            lease: crate::lease::DEFAULT_TTL,
            final_retry: Duration::from_secs(DEFAULT_FINAL_RETRY_HOURS * 3600),
        }
    }
}

/// What admitting a message found.
pub(crate) enum Admission {
    /// Live dedupe records of all its keys say this is a redelivery.
    Duplicate,
    /// New: handle it.
    New {
        /// Its journal entry, when it is journaled and the store took it.
        entry: Option<Entry>,
        /// The dedupe keys its admission recorded: all a release of its turn may free.
        keys: Vec<DedupeKey>,
    },
}

impl Admission {
    /// A message the store failed to admit with `keys`, handled anyway (fail open): an
    /// error that says nothing was written recorded nothing, so it releases nothing (the
    /// keys may be another admission's); a call that got no answer in time may have been
    /// written all the same, and its keys are kept releasable, so that a failed turn does
    /// not leave the platform's retry to be dropped as a redelivery.
    fn failed(error: &StoreError, keys: Vec<DedupeKey>) -> Self {
        let keys = match error {
            StoreError::TimedOut { .. } => keys,
            _ => Vec::new(),
        };
        Self::New { entry: None, keys }
    }
}

/// The journal: the store, this process's holder name, and the tasks retrying finals.
pub(crate) struct Journal {
    shared: Arc<Shared>,
}

struct Shared {
    store: Arc<dyn Store>,
    /// This manager's name as the holder of entries: unique per start, so a restarted
    /// process never mistakes its predecessor's entries for its own.
    holder: String,
    /// Where retried finals are published.
    outbound: Arc<Outbound>,
    config: JournalConfig,
    /// The renewal clock this process's finals are published under (`fence.rs`).
    fence: Fence,
    /// The entries whose turn runs now, by the reply stream they publish (channel, chat,
    /// source message): how a stream's platform message finds its entry. Bounded by the
    /// turns running.
    live: Mutex<HashMap<LiveKey, Entry>>,
    /// Retries of pending finals, cancelled at shutdown (their entries stay in the store).
    retries: TaskTracker,
    stop: CancellationToken,
    /// What wakes each running retry of pending finals when an operator asks to retry it
    /// now, by entry id. Bounded by the retries running (at most the journal's cap).
    wakers: Mutex<HashMap<String, Arc<Notify>>>,
    /// Asks the manager for the journal's upkeep now (an operator retried something).
    upkeep: Arc<Notify>,
    /// The entries this process works on, by id, for renewals to judge (`fence.rs`):
    /// admitted, claimed or taken up here, until removed, given up, held for their chat
    /// or lost; one nothing refers to any more is forgotten at the next renewal. Bounded
    /// by the entries in memory (at most the journal's cap, [`JOURNAL_CAP`](crate::store::JOURNAL_CAP)).
    mine: Mutex<HashMap<String, Weak<EntryState>>>,
    /// The task renewing the leases every third of the lease ([`Journal::keep_renewing`]),
    /// stopped by `renewing` at shutdown (or when the journal is dropped).
    renewals: TaskTracker,
    renewing: CancellationToken,
}

impl Journal {
    pub(crate) fn new(
        store: Arc<dyn Store>,
        outbound: Arc<Outbound>,
        config: JournalConfig,
    ) -> Self {
        let fence = Fence::new(config.lease, store.is_shared());
        let shared = Arc::new(Shared {
            store,
            holder: crate::lease::holder_id(),
            outbound: outbound.clone(),
            config,
            fence,
            live: Mutex::new(HashMap::new()),
            retries: TaskTracker::new(),
            stop: CancellationToken::new(),
            wakers: Mutex::new(HashMap::new()),
            upkeep: Arc::new(Notify::new()),
            mine: Mutex::new(HashMap::new()),
            renewals: TaskTracker::new(),
            renewing: CancellationToken::new(),
        });
        // A streamed reply's platform message is saved as soon as the engine started it.
        let weak = Arc::downgrade(&shared);
        outbound.watch_streams(move |channel, chat, source, shown| {
            let Some(shared) = weak.upgrade() else {
                return;
            };
            let key = (channel.to_owned(), chat.clone(), source.cloned());
            let entry = relock(&shared.live).get(&key).cloned();
            if let Some(entry) = entry {
                entry.stream_shown(shown.as_str());
            }
        });
        Self { shared }
    }

    /// The settings.
    pub(crate) fn config(&self) -> &JournalConfig {
        &self.shared.config
    }

    /// Admits `msg` with its dedupe keys `keys` ([`dedupe_keys`](super::dedupe::dedupe_keys):
    /// its own, then its joined parts'), recorded for the dedupe TTL, and, when it is
    /// `journaled` (a chat message, or a command that may start a run), its journal entry,
    /// all in one transaction. The rule (`dedupe.rs`): a message is new when any of its keys
    /// has no live record, and its admission records exactly those, so a message joined from
    /// a part handled before and a new one is admitted for the new one and leaves the other
    /// to the admission that owns it. A store failure admits the message unjournaled (fail
    /// open, as the dedupe record always did: a hiccup must not lose a message), having
    /// recorded nothing.
    pub(crate) async fn admit_at(
        &self,
        msg: &InboundMessage,
        keys: Vec<DedupeKey>,
        journaled: bool,
        arrived: i64,
    ) -> Admission {
        let store = &self.shared.store;
        if !journaled {
            return match super::dedupe::admit(store.as_ref(), keys.clone()).await {
                Ok(Some(keys)) => Admission::New { entry: None, keys },
                Ok(None) => Admission::Duplicate,
                Err(error) => {
                    tracing::warn!(%error, "Dedupe lookup failed; handling the message anyway.");
                    Admission::failed(&error, keys)
                }
            };
        }
        let id = new_id();
        let mut record = JournalRecord::admitted(msg.clone());
        record.arrived = arrived;
        // The thread the message will most likely run on, when the store has the binding in
        // memory: a run that starts there needs no store write of its own before its
        // request (`starting.rs`; issue 35).
        record.thread_id = store
            .cached_binding(&crate::store::conversation_key(msg))
            .map(|binding| binding.thread_id.as_str().to_owned());
        let config = &self.shared.config;
        match store
            .journal_admit(
                &keys,
                super::DEDUPE_TTL,
                &id,
                &record,
                &self.shared.holder,
                config.lease,
            )
            .await
        {
            Ok(Some(live)) => {
                if !live.is_empty() {
                    // As the store wrote it.
                    record.note_not_recorded(&keys, &live);
                }
                let entry = Entry::new(self.shared.clone(), id, unix_millis(), record, false);
                entry.go_live();
                let keys = super::dedupe::recorded(keys, &live);
                Admission::New {
                    entry: Some(entry),
                    keys,
                }
            }
            Ok(None) => Admission::Duplicate,
            Err(error) => {
                tracing::warn!(%error, "Journaling a message failed; handling it unjournaled.");
                Admission::failed(&error, keys)
            }
        }
    }

    /// [`Journal::admit_at`] of `msg` with its own key `dedupe`, if any, taken now.
    #[cfg(test)]
    pub(crate) async fn admit(
        &self,
        msg: &InboundMessage,
        dedupe: Option<&DedupeKey>,
        journaled: bool,
    ) -> Admission {
        let arrived = crate::store::arrival_stamp();
        let keys = dedupe.into_iter().cloned().collect();
        self.admit_at(msg, keys, journaled, arrived).await
    }

    /// Takes over the entries no live process holds (`take_live`: every entry another
    /// holder has, for a store only one process opens), oldest first, as entries this
    /// process now owns. Entries older than the retry window are given up, logged.
    pub(crate) async fn claim(&self, take_live: bool) -> Vec<Entry> {
        let shared = &self.shared;
        let claimed = match shared
            .store
            .journal_claim(&shared.holder, shared.config.lease, take_live)
            .await
        {
            Ok(claimed) => claimed,
            Err(error) => {
                tracing::warn!(%error, "Reading the journal failed; nothing recovered this time.");
                return Vec::new();
            }
        };
        let now = unix_millis();
        let window = i64::try_from(shared.config.final_retry.as_millis()).unwrap_or(i64::MAX);
        let mut entries = Vec::with_capacity(claimed.len());
        for Journaled {
            id,
            retry_from_ms,
            mut record,
            ..
        } in claimed
        {
            if record.state == JournalState::Held {
                // Waiting for its chat, in the store (and never given up on: it stays
                // there for the operator to see until a message takes it up). Saved as it
                // is, so it is indexed by its chat again should its holder have died
                // between taking it up and saving it as that message's.
                self.keep_held(&id, &record).await;
                continue;
            }
            let windowed = shared
                .outbound
                .reply_window(&record.message.channel_name)
                .is_some();
            if now.saturating_sub(retry_from_ms) >= window
                && record.hold_instead_of_giving_up(windowed)
            {
                // Carried or held before: it waits for the chat's next message again.
                self.keep_held(&id, &record).await;
                continue;
            }
            if now.saturating_sub(retry_from_ms) >= window {
                tracing::warn!(
                    channel = %record.message.channel_name,
                    state = ?record.state,
                    "Gave up on a journaled message older than the final retry window."
                );
                give_up(shared, &id, &record).await;
                continue;
            }
            let entry = Entry::new(shared.clone(), id, retry_from_ms, record, true);
            entry.go_live();
            entries.push(entry);
        }
        if !entries.is_empty() {
            tracing::info!(entries = entries.len(), "Recovering journaled messages.");
        }
        entries
    }

    /// Saves `record`, held, as this process's.
    async fn keep_held(&self, id: &str, record: &JournalRecord) {
        let shared = &self.shared;
        if let Err(error) = shared.store.journal_save(id, record, &shared.holder).await {
            tracing::warn!(%error, "Saving an answer held for its chat failed.");
        }
    }

    /// Stops the retries of pending finals and gives this process's leases up, so another
    /// replica (or the next start) takes the entries at once. The entries stay. The leases
    /// go only once the replies already in the delivery lanes landed (waiting for at most
    /// `flush`, the leases renewed first): a replica that took an entry while this process
    /// still delivers its final would deliver it too. Lanes that did not empty in time
    /// keep the leases to their end (a lease outlasts the shutdown grace period); `false`
    /// then, so the daemon does not wait for them again. The renewals
    /// ([`Journal::keep_renewing`]) go on while the lanes empty, however long the grace,
    /// and stop, the one under way finished, before the leases go: a renewal after the
    /// release would take them back.
    pub(crate) async fn shut_down(&self, flush: Duration) -> bool {
        let shared = &self.shared;
        shared.stop.cancel();
        shared.retries.close();
        shared.retries.wait().await;
        self.renew().await;
        let flushed = shared.outbound.flush(flush).await;
        shared.renewing.cancel();
        shared.renewals.close();
        shared.renewals.wait().await;
        if !flushed {
            tracing::info!(
                "Replies were still on their way at shutdown; the journal's leases run out on their own."
            );
            return false;
        }
        if let Err(error) = shared.store.journal_release(&shared.holder).await {
            tracing::debug!(%error, "Giving the journal leases up failed.");
        }
        true
    }
}

impl Drop for Journal {
    /// The renewals stop with the journal, shut down or not.
    fn drop(&mut self) {
        self.shared.renewing.cancel();
    }
}

/// A turn's reply stream: channel, chat, source message.
type LiveKey = (String, ChatId, Option<MessageId>);

fn relock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A new entry id: random, 128 bits, hex.
fn new_id() -> String {
    format!("{:032x}", rand::random::<u128>())
}

/// A new final's send key ([`DeliveryHints::send_key`](im_bridge_channel::DeliveryHints)):
/// random, 128 bits, hex, as entry ids are.
pub(super) fn new_send_key() -> String {
    new_id()
}

/// Removes entry `id` from the store if this process still holds it: one another holder
/// took over is that holder's work now. An [`Entry`] this process works on is removed with
/// [`Entry::remove`], which also stops renewals judging it.
async fn remove(shared: &Shared, id: &str) {
    match shared.store.journal_remove(id, &shared.holder).await {
        Ok(true) => {}
        Ok(false) => {
            tracing::debug!("A journal entry was taken over or dropped before its removal.")
        }
        Err(error) => {
            tracing::warn!(%error, "Removing a journal entry failed; it will be recovered again.");
        }
    }
}

impl Entry {
    /// Removes the entry ([`remove`]): renewals no longer judge it (this entry's
    /// registration only: a newer one of the same id, taken up again, stays judged).
    async fn remove(&self) {
        self.unhold();
        remove(&self.0.shared, &self.0.id).await;
    }
}

/// What a final of a journaled turn is to its entry ([`Entry::track`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Final {
    /// The answer, or its last part: a restart that finds it knows the run ended.
    Answer,
    /// A goal-continuation segment's final while the run goes on (counted: a restart
    /// that follows the run publishes only the segments after it).
    Segment,
    /// What a hand-off shows while the run goes on: `shown`, the part of the answer the
    /// rest continues from ([`JournalRecord::handed_off`]).
    HandOff(String),
}

/// What writing a final of `kind` ahead tells the record.
trait Note {
    fn note(&mut self, kind: Final);
}

impl Note for JournalRecord {
    fn note(&mut self, kind: Final) {
        match kind {
            // The answer is out: a restart delivers what did not land and follows the run
            // no more.
            Final::Answer => self.state = JournalState::FinalPending,
            Final::Segment => {
                self.segments_sent = self.segments_sent.saturating_add(1);
                // The message it finishes is done with: the run's next stream is the one
                // a restart goes on in (after a hand-off too).
                self.stream_message_id = None;
            }
            Final::HandOff(shown) => {
                self.handed_off = Some(shown);
                self.stream_message_id = None;
            }
        }
    }
}

/// What [`Progress::late_on`] names for a final the turn composed, not one delivered again
/// (final ids start at 1).
const COMPOSED: u32 = 0;

/// One admitted message's entry, owned by the work that handles it. Cheap to clone.
#[derive(Clone)]
pub(crate) struct Entry(Arc<EntryState>);

struct EntryState {
    id: String,
    /// When its final retry window began: admission, or an operator's retry.
    retry_from_ms: i64,
    /// Claimed from a previous holder: its replies are marked late.
    recovered: bool,
    shared: Arc<Shared>,
    progress: Mutex<Progress>,
    /// Serializes saves, so the last save writes the newest record.
    saving: tokio::sync::Mutex<()>,
    /// Woken when the hand-off's first delivery came to an end ([`Entry::handed_off_known`]).
    hand_off_done: Notify,
    /// Woken when the entry came to rest ([`Entry::at_rest`]).
    rested: Notify,
    /// Since when it is this process's, and whether it was found no longer so (`fence.rs`).
    owned: Owned,
}

struct Progress {
    record: JournalRecord,
    /// The turn finished publishing.
    ended: bool,
    /// [`Entry::settle`] went past its guard: the entry was removed or its retries began.
    /// The turn's end and its last final's landing may both reach it; only one goes on.
    settled: bool,
    /// Finals published whose fate is not known yet.
    outstanding: usize,
    /// A recovered reply still has to finish the message the previous process streamed
    /// into (cleared by the first final that carries it).
    resume: Option<String>,
    /// The id of the last final written ahead.
    next_final: u32,
    /// The newest stream the engine started for this turn and no final tracked since:
    /// the message the next final most likely finishes (written ahead with it, so the
    /// engine's `before` hook usually confirms it without another store write).
    open_stream: Option<String>,
    /// The hand-off's final while its first delivery has not come to an end.
    hand_off_in_flight: Option<u32>,
    /// The final of a recovered entry that says why the answer comes late
    /// ([`COMPOSED`]: one the turn composed): only the first one the turn publishes does
    /// (a goal run's later segments, and the rest after a resent part, go on without it).
    late_on: Option<u32>,
    /// [`Entry::settle`] went through: the entry was removed, saved for its retries, or
    /// held for the chat's next message.
    at_rest: bool,
}

impl Entry {
    /// Whether the entry was claimed from a previous holder (a restart, a dead replica).
    pub(crate) fn is_recovered(&self) -> bool {
        self.0.recovered
    }

    fn new(
        shared: Arc<Shared>,
        id: String,
        retry_from_ms: i64,
        record: JournalRecord,
        recovered: bool,
    ) -> Self {
        let next_final = record.finals.iter().map(|f| f.id).max().unwrap_or(0);
        let resume = if recovered {
            record.stream_message_id.clone()
        } else {
            None
        };
        let owned = Owned::new(shared.fence.now());
        let entry = Self(Arc::new(EntryState {
            id,
            retry_from_ms,
            recovered,
            shared,
            progress: Mutex::new(Progress {
                record,
                ended: false,
                settled: false,
                outstanding: 0,
                resume,
                next_final,
                open_stream: None,
                hand_off_in_flight: None,
                late_on: None,
                at_rest: false,
            }),
            saving: tokio::sync::Mutex::new(()),
            hand_off_done: Notify::new(),
            rested: Notify::new(),
            owned,
        }));
        entry.hold();
        entry
    }

    /// The entry of the journaled turn this task runs, if any.
    pub(crate) fn current() -> Option<Entry> {
        CURRENT.try_with(Clone::clone).ok()
    }

    /// Runs `work` as this entry's turn (see the module docs). A plain function, not an
    /// `async` one: the turn's future is moved in once, not copied into a wrapper too.
    pub(crate) fn scope<F: Future>(&self, work: F) -> TaskLocalFuture<Entry, F> {
        CURRENT.scope(self.clone(), work)
    }

    /// Makes the entry findable by its reply stream until its turn ends.
    fn go_live(&self) {
        relock(&self.0.shared.live).insert(self.live_key(), self.clone());
    }

    fn leave_live(&self) {
        let key = self.live_key();
        let mut live = relock(&self.0.shared.live);
        if live.get(&key).is_some_and(|e| Arc::ptr_eq(&e.0, &self.0)) {
            live.remove(&key);
        }
    }

    fn live_key(&self) -> LiveKey {
        let progress = self.progress();
        let msg = &progress.record.message;
        (
            msg.channel_name.clone(),
            msg.chat_id.clone(),
            msg.thread_ts.clone(),
        )
    }

    /// Whether the final the turn composes now opens with the line saying why the answer
    /// comes late: in a recovered entry, when no final did before (noted so).
    pub(crate) fn late_line_due(&self) -> bool {
        self.late_line_for(COMPOSED)
    }

    /// Whether final `id`, delivered again, opens with the line saying why it comes late:
    /// in a recovered entry, when no other final of the turn did (noted so).
    fn late_line_for(&self, id: u32) -> bool {
        if !self.0.recovered {
            return false;
        }
        let mut progress = self.progress();
        *progress.late_on.get_or_insert(id) == id
    }

    /// A copy of the record.
    pub(crate) fn record(&self) -> JournalRecord {
        self.progress().record.clone()
    }

    /// The dedupe keys this entry's admission recorded
    /// ([`recorded_keys`](super::dedupe::recorded_keys)): all a release of its turn may
    /// free, whichever process admitted it.
    pub(crate) fn recorded_keys(&self) -> Vec<DedupeKey> {
        super::dedupe::recorded_keys(&self.progress().record)
    }

    fn progress(&self) -> MutexGuard<'_, Progress> {
        self.0
            .progress
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Records that the Gateway accepted run `run_id`: from here on recovery follows it.
    /// Saved at once unless the run is `findable`: while the Gateway lists a thread's runs,
    /// a restarted process finds a run whose id was not saved by the entry key in its
    /// metadata (`starting.rs`), so the id goes with the entry's next save instead (issue
    /// 35: one store write less per message).
    pub(crate) async fn run_started(&self, thread: &str, run_id: &str, findable: bool) {
        {
            let mut progress = self.progress();
            let record = &mut progress.record;
            if record.run_id.as_deref() != Some(run_id) {
                // Another run (the one before was lost): none of its segments went out,
                // and nothing of its answer was handed off.
                record.segments_sent = 0;
                record.handed_off = None;
            }
            record.state = JournalState::Running;
            record.thread_id = Some(thread.to_owned());
            record.run_id = Some(run_id.to_owned());
        }
        if !findable {
            self.save().await;
        }
    }

    /// Prepares `out`, a reply of this entry's turn, and returns the hooks that track it:
    /// a recovered reply resumes the previous process's stream message, and a final is
    /// written ahead into the entry before it is published (so a crash before it landed
    /// delivers exactly this text later), records the message it finishes before the
    /// platform call, and is struck off once it landed or was refused for good. `late` is
    /// the line a delivery by a later process opens with; a final that is a part of the
    /// answer ([`Final`]) leaves the turn under way for a restart.
    pub(crate) async fn track(&self, out: &mut OutboundMessage, late: &str, kind: Final) -> Hooks {
        self.track_final(out, late, false, kind).await
    }

    /// [`Entry::track`]; an `unsourced` final answers no source, and waits for the chat's
    /// next message when the platform refuses it.
    async fn track_final(
        &self,
        out: &mut OutboundMessage,
        late: &str,
        unsourced: bool,
        kind: Final,
    ) -> Hooks {
        let id = {
            let mut progress = self.progress();
            if let Some(message) = &progress.resume {
                out.hints.resumes = Some(MessageId::new(message.as_str()));
                if out.is_final {
                    progress.resume = None;
                }
            }
            if !out.is_final {
                return Hooks::default();
            }
            progress.outstanding += 1;
            progress.next_final += 1;
            let id = progress.next_final;
            // Every attempt at this final, after a restart too, names it alike (the key
            // is written ahead with it), so a platform that drops a repeated send shows it
            // once. Random: final ids start again after a restart, once the finals before
            // were struck off, and a key must never name two replies.
            out.hints.send_key = Some(new_send_key());
            let finishes = match &out.hints.resumes {
                Some(message) => Some(message.as_str().to_owned()),
                None => progress.open_stream.take(),
            };
            progress.record.finals.push(PendingFinal {
                id,
                text: out.text.clone(),
                metadata: out.metadata.clone(),
                hints: out.hints.clone(),
                late: Some(late.to_owned()).filter(|l| !l.is_empty()),
                finishes,
                unsourced,
                held: false,
                part: kind != Final::Answer,
                hand_off: matches!(kind, Final::HandOff(_)),
            });
            if matches!(kind, Final::HandOff(_)) {
                progress.hand_off_in_flight = Some(id);
            }

            // All saved with it, as it is written ahead.
            progress.record.note(kind);
            id
        };
        self.save().await;
        self.hooks(id)
    }

    /// The hooks that track final `id` (see [`Entry::track`]).
    fn hooks(&self, id: u32) -> Hooks {
        let (before, after) = (self.clone(), self.clone());
        Hooks {
            gate: Some(self.gate(id)),
            before: Some(Box::new(move |target: Option<MessageId>| {
                Box::pin(async move { before.finishing(id, target).await })
            })),
            after: Some(Box::new(move |landed: Landed| {
                Box::pin(async move { after.final_landed(landed, id).await })
            })),
        }
    }

    /// Publishes again, in order, the parts of the answer a previous process published
    /// while the run went on and that did not land ([`PendingFinal::part`]), tracked like
    /// the turn's own finals; the turn then follows the run for the rest.
    pub(crate) async fn resend_parts(&self) {
        let parts: Vec<PendingFinal> = {
            let progress = self.progress();
            let finals = progress.record.finals.iter();
            finals.filter(|f| f.part && !f.held).cloned().collect()
        };
        for pending in parts {
            let out = self.again(&pending);
            {
                let mut progress = self.progress();
                progress.outstanding += 1;
                if pending.hand_off {
                    // The final waits for its fate, as for the first delivery's.
                    progress.hand_off_in_flight = Some(pending.id);
                }
            }
            let hooks = self.hooks(pending.id);
            self.0.shared.outbound.publish_hooked(out, hooks).await;
        }
    }

    /// The message's files were read ahead (`staging.rs`): the entry names the copies from
    /// now on, saved at once, so a restart reads them from disk rather than from handles
    /// that may have expired. A file still as it was admitted keeps its handle.
    pub(crate) async fn files_staged(&self, files: &[InboundFile]) {
        {
            let mut progress = self.progress();
            if progress.record.message.files == files {
                return;
            }
            progress.record.message.files = files.to_vec();
        }
        self.save().await;
    }

    /// Forgets the parts a previous process published of a run the Gateway no longer knows:
    /// the message runs again, and they are not its answer (saved with the next write).
    pub(crate) fn drop_parts(&self) {
        let mut progress = self.progress();
        progress.record.finals.retain(|f| !f.part);
    }

    /// How many goal-continuation segments of the run had their finals published
    /// ([`JournalRecord::segments_sent`]).
    pub(crate) fn segments_sent(&self) -> usize {
        self.progress().record.segments_sent as usize
    }

    /// The engine started a stream of this turn showing `message`: the next final finishes
    /// it, and the first one is what a recovered run's reply goes on in (saved), or one
    /// that took the place of a stream left without a final (a notice overtaken by the
    /// answer before it, a message the platform lost): the reply goes on there. In a group
    /// the message joins the turn's conversation at once, with the one it answers: a reply
    /// to the answer while it is still being written continues the conversation, as one
    /// after the answer does (its final remembers them again when it lands).
    fn stream_shown(&self, message: &str) {
        let (save, chain) = {
            let mut progress = self.progress();
            let left = progress.open_stream.replace(message.to_owned());
            let save = match &progress.record.stream_message_id {
                None => true,
                Some(saved) => left.as_ref() == Some(saved) && saved != message,
            };
            if save {
                progress.record.stream_message_id = Some(message.to_owned());
            }
            let msg = &progress.record.message;
            let chain = (msg.chat_kind == ChatKind::Group)
                .then(|| (super::conversation_key(msg), msg.thread_ts.clone()));
            (save, chain)
        };
        if save {
            let entry = self.clone();
            tokio::spawn(async move { entry.save().await });
        }
        if let Some((key, source)) = chain {
            let store = self.0.shared.store.clone();
            let shown = MessageId::new(message);
            tokio::spawn(async move {
                super::remember_chain(store.as_ref(), &key, source.as_ref(), Some(&shown)).await;
            });
        }
    }

    /// Final `id` is about to be delivered, finishing `target` (or as a new message): the
    /// entry says so before the platform call, so a re-delivery edits the same message.
    /// No store write when the final was written ahead with it already.
    async fn finishing(&self, id: u32, target: Option<MessageId>) {
        let target = target.map(|m| m.as_str().to_owned());
        let changed = {
            let mut progress = self.progress();
            match progress.record.finals.iter_mut().find(|f| f.id == id) {
                Some(pending) if pending.finishes != target => {
                    pending.finishes = target;
                    true
                }
                _ => false,
            }
        };
        if changed {
            self.save().await;
        }
    }

    async fn final_landed(&self, landed: Landed, id: u32) {
        let (changed, hand_off) = {
            let mut progress = self.progress();
            progress.outstanding = progress.outstanding.saturating_sub(1);
            let hand_off = progress.hand_off_in_flight == Some(id);
            if hand_off {
                progress.hand_off_in_flight = None;
            }
            (progress.settle_final(id, &landed), hand_off)
        };
        if hand_off {
            self.0.hand_off_done.notify_waiters();
        }
        if changed && !self.progress().ended {
            self.save().await;
        }
        self.settle().await;
    }

    /// The turn published everything it will: the entry goes once its finals landed. Until
    /// then it is a pending final: a crash now delivers the written-ahead finals, and never
    /// follows the run again. That needs no store write here: every final in flight was
    /// written into the stored record before it was published, and recovery takes an entry
    /// with finals for a pending final whatever its stage (`recover.rs`). The stage is
    /// saved with the entry's next write, if it has one before it goes (issue 35: one
    /// store write less per message).
    pub(crate) async fn turn_ended(&self) {
        self.leave_live();
        {
            let mut progress = self.progress();
            progress.ended = true;
            if progress.outstanding > 0 {
                progress.record.state = JournalState::FinalPending;
            }
        }
        self.settle().await;
    }

    /// Once the turn ended and no final is in flight: deletes the entry, keeps its
    /// undelivered finals and retries them, or leaves them waiting for the chat's next
    /// message when that is all they can do (`held.rs`).
    async fn settle(&self) {
        let state = {
            let mut progress = self.progress();
            if !progress.ended || progress.outstanding > 0 || progress.settled {
                return;
            }
            progress.settled = true;
            let state = progress.settled_state();
            // The turn's own delivery was the first attempt, unless it was cut short by a
            // drain or a shutdown (issue 33).
            if state == Some(JournalState::FinalPending) && !self.0.shared.stop.is_cancelled() {
                progress.record.attempts = progress.record.attempts.saturating_add(1);
            }
            state
        };
        match state {
            // Taken over (or dropped): neither removed nor retried from here.
            _ if self.lost() => {
                self.leave_to_its_owner(self.lapsed(), &self.send_keys())
                    .await
            }
            None => self.remove().await,
            Some(JournalState::Held) => self.wait_for_next_message().await,
            Some(_) if self.save().await => self.retry_finals_later(),
            Some(_) => {
                self.leave_to_its_owner(self.lapsed(), &self.send_keys())
                    .await
            }
        }
        self.progress().at_rest = true;
        self.0.rested.notify_waiters();
    }

    /// Waits, for at most `bound`, until the turn ended and each of its finals was
    /// delivered once or failed, and the store says so: the entry is gone, saved for its
    /// retries, or held, where the chat's next message finds it (`held.rs`).
    pub(crate) async fn at_rest(&self, bound: Duration) {
        let until = tokio::time::Instant::now() + bound;
        loop {
            let rested = self.0.rested.notified();
            tokio::pin!(rested);
            rested.as_mut().enable();
            if self.progress().at_rest {
                return;
            }
            if tokio::time::timeout_at(until, rested).await.is_err() {
                tracing::debug!("A turn's finals did not come to rest in time; going on.");
                return;
            }
        }
    }

    /// Saves the record: `false` when the entry is no longer this process's (an operator
    /// dropped it, or another replica took it over), which marks it lost: from then on this
    /// process publishes no final of it and does not remove it (`fence.rs`). A failed write
    /// counts as still ours: the renewal clock, and the renewals that judge the entry, then
    /// say whether a final may go out.
    async fn save(&self) -> bool {
        let _saving = self.0.saving.lock().await;
        let record = self.record();
        let shared = &self.0.shared;
        let sent = shared.fence.now();
        match shared
            .store
            .journal_save(&self.0.id, &record, &shared.holder)
            .await
        {
            Ok(true) => {
                self.proven(sent);
                true
            }
            Ok(false) => {
                tracing::debug!("A journal entry was removed or taken over before a save.");
                self.lose();
                false
            }
            Err(error) => {
                tracing::warn!(%error, "Saving a journal entry failed.");
                true
            }
        }
    }
}
