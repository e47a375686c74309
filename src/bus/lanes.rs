//! Delivery lanes: one FIFO of replies per chat, drained by one task while it is not empty.
//!
//! A lane exists exactly while its drainer runs: `push` creates it (and spawns the
//! drainer) when the chat has none, the drainer removes it under the same lock when it
//! finds it empty. So a chat never has two drainers, and its replies reach the delivery
//! engine one at a time, in the order they were pushed.

use std::collections::hash_map::Entry;
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use futures_util::future::BoxFuture;
use im_bridge_channel::{BeforeFinal, ChatId, Delivery, MessageId, OutboundMessage};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_util::task::TaskTracker;
use tracing::Instrument;

use crate::telemetry::names;

/// Most replies waiting in all lanes together (each a final of at most
/// `bridge.max_reply_messages` messages, or one partial per reply).
pub const MAX_PENDING_REPLIES: usize = 4096;

/// Sources whose finals were refused for good or wait for a retry and whose end was not
/// told yet, at most. At the bound the refused ones are forgotten first (those turns'
/// ends then say answered), the retried ones only when there are this many (an end held
/// back is then told once the retry settled, one still to come at once, and again then).
pub const MAX_UNANSWERED: usize = 4096;
/// The most finals of one source whose retries an end waits for, told apart by send key.
const MAX_RETRIED_KEYS: usize = 16;

/// Runs once a reply was delivered or failed, with what became of it. A partial replaced
/// by a newer one before it was delivered drops its hook unrun.
pub type AfterShown = Box<dyn FnOnce(Landed) -> BoxFuture<'static, ()> + Send>;

/// Asked, when a reply's turn in its lane came and again just before each platform call
/// that writes it until one landed (after any wait in the delivery engine: a
/// `Retry-After`, a rate budget), whether it may still go out: `false` withholds it (the
/// journal's fence: its entry may belong to another replica by now).
pub type Gate = im_bridge_channel::WriteGate;

/// What a withheld reply ([`Gate`]) failed with, for now (the journal keeps it as the
/// entry's last error, which an operator's listing shows): its journal entry may belong
/// to another replica, which delivers it then.
pub const WITHHELD: &str = "withheld (fenced)";

/// What a publisher hears of its reply: which message a final is about to finish, before
/// the platform call (the journal records it, issue 27), and what became of the reply;
/// and what it asks before the reply goes out.
#[derive(Default)]
pub struct Hooks {
    /// Told which message the final is about to finish; delivery waits for it.
    pub before: Option<BeforeFinal>,
    /// Runs once the reply was delivered or failed.
    pub after: Option<AfterShown>,
    /// Asked when the reply's turn in its lane came, and again before each platform call
    /// that writes it until one landed: a reply it refuses is not delivered, and `after`
    /// hears it failed for now ([`WITHHELD`]).
    pub gate: Option<Gate>,
}

impl Hooks {
    /// Only an [`AfterShown`] hook.
    pub fn after(after: Option<AfterShown>) -> Self {
        Self {
            before: None,
            after,
            gate: None,
        }
    }
}

/// What became of a reply, for its [`AfterShown`] hook.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Landed {
    /// Delivered: a final names the message that shows it, a partial the message showing
    /// its stream once there is one.
    Shown(Option<MessageId>),
    /// Not delivered; `transient` when a later try may succeed (rate limit, network or
    /// platform trouble), not when the platform refused it for good.
    Failed {
        /// Whether a later try may succeed.
        transient: bool,
        /// Why, log-safe (the channel error's text: an operation and a code, never message
        /// text or a token), for the journal's record of the last failure (issue 33).
        error: String,
    },
    /// Not delivered, because its source message takes no more replies (its reply window
    /// closed, or its replies are spent): a later message's replies may carry it. `rest`:
    /// only its first messages were delivered, and this is what the reader did not get,
    /// as the reader would have seen it (`ChannelError::ReplyWindowRest`).
    WindowClosed {
        /// What is left, when part of it was delivered.
        rest: Option<String>,
    },
}

impl Landed {
    /// The message named, if it was delivered.
    pub fn shown(&self) -> Option<&MessageId> {
        match self {
            Self::Shown(id) => id.as_ref(),
            Self::Failed { .. } | Self::WindowClosed { .. } => None,
        }
    }
}

/// A lane: the channel's name and the chat.
type Key = (&'static str, ChatId);

/// What a lane's job is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Job {
    /// A reply.
    Reply,
    /// The bridge is done with the message the job's `msg` answers (its turn ended): the
    /// channel hears so ([`Channel::turn_ended`](im_bridge_channel::Channel::turn_ended)),
    /// unless a final of the turn failed and waits for the journal's retry, which tells
    /// it once that settled ([`Job::Settled`]).
    TurnEnd,
    /// The retried finals of one journal entry, answering the message the job's `msg`
    /// answers, settled: delivered (`answered`), or given up. The channel hears that the
    /// bridge is done with that message, once no other final of it waits for a retry (a
    /// message that carried held finals has its own entry's as well).
    Settled {
        /// Every final landed or was refused for good; not when the retries gave up.
        answered: bool,
        /// The send keys of the entry's finals: only these stop waiting.
        keys: Vec<String>,
    },
    /// A final of the message the job's `msg` answers that failed and waited for the
    /// journal's retry will not be retried: a later final of the turn carries its text
    /// (a hand-off the answer took the place of). The turn's own end tells, once no other
    /// final of it waits for a retry.
    Superseded {
        /// The final's send key (`None`: every final of the turn).
        key: Option<String>,
    },
}

struct Queued {
    msg: OutboundMessage,
    hooks: Hooks,
    job: Job,
    /// This job's room in [`MAX_PENDING_REPLIES`], given back when it was delivered.
    room: OwnedSemaphorePermit,
}

/// What became of a source's finals so far, on a channel told of turns' ends.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct Fate {
    /// One was refused for good.
    refused: bool,
    /// The send keys of those that failed and wait for the journal's retry (at most
    /// [`MAX_RETRIED_KEYS`]).
    retried: Vec<String>,
    /// More failed than [`MAX_RETRIED_KEYS`]: only the retries' settling tells the end.
    overflowed: bool,
    /// The turn's end came and was held back for the retry.
    ended: bool,
    /// The retries were left to another replica, which took the entry over and tells the
    /// end: nothing is told from here ([`Lanes::retries_left`]).
    quiet: bool,
}

impl Fate {
    /// Whether a final of the source waits for the journal's retry.
    fn waits_for_retries(&self) -> bool {
        !self.retried.is_empty() || self.overflowed
    }

    /// The finals under `keys` (one journal entry's) wait for no retry any more. Past the
    /// keys told apart ([`MAX_RETRIED_KEYS`]) nobody knows whose the others were: they are
    /// taken for settled too.
    fn settled(&mut self, keys: &[String]) {
        self.retried.retain(|key| !keys.contains(key));
        self.overflowed = false;
    }
}

struct Shared {
    lanes: Mutex<HashMap<Key, VecDeque<Queued>>>,
    /// The sources (by lane) a final was refused for good to or waits for a retry, on
    /// channels told of turns' ends, until their end is told (bounded by
    /// [`MAX_UNANSWERED`]).
    fates: Mutex<HashMap<(Key, Option<MessageId>), Fate>>,
    room: Arc<Semaphore>,
    max: usize,
}

impl Shared {
    fn lanes(&self) -> MutexGuard<'_, HashMap<Key, VecDeque<Queued>>> {
        self.lanes.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn pending(&self) -> usize {
        self.max.saturating_sub(self.room.available_permits())
    }

    fn fates(&self) -> MutexGuard<'_, HashMap<(Key, Option<MessageId>), Fate>> {
        self.fates.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn report(&self) {
        metrics::gauge!(names::OUTBOUND_PENDING).set(self.pending() as f64);
    }
}

/// Every chat's lane.
pub(super) struct Lanes {
    shared: Arc<Shared>,
    tasks: TaskTracker,
}

impl Lanes {
    pub(super) fn new(max_pending: usize) -> Self {
        let max = max_pending.max(1);
        Self {
            shared: Arc::new(Shared {
                lanes: Mutex::new(HashMap::new()),
                fates: Mutex::new(HashMap::new()),
                room: Arc::new(Semaphore::new(max)),
                max,
            }),
            tasks: TaskTracker::new(),
        }
    }

    /// Replies queued or being delivered.
    pub(super) fn pending(&self) -> usize {
        self.shared.pending()
    }

    /// Queues `msg` on its chat's lane, starting the lane's drainer when it has none.
    pub(super) async fn push(
        &self,
        channel: &'static str,
        delivery: &Arc<Delivery>,
        msg: OutboundMessage,
        hooks: Hooks,
        job: Job,
    ) {
        let key = (channel, msg.chat_id.clone());
        // A reply that only supersedes the lane's newest partial needs no room of its own.
        let (msg, hooks) = if job != Job::Reply {
            (msg, hooks)
        } else {
            let Some(reply) = self.fold(&key, msg, hooks) else {
                return;
            };
            reply
        };
        let Ok(room) = self.shared.room.clone().acquire_owned().await else {
            // The semaphore is never closed; were it, delivering in place keeps the reply.
            perform(&self.shared, &key, delivery, msg, hooks, job).await;
            return;
        };
        {
            let mut lanes = self.shared.lanes();
            match lanes.entry(key) {
                Entry::Occupied(mut lane) => {
                    let lane = lane.get_mut();
                    // Another partial of this reply may have been queued while we waited.
                    let (msg, hooks) = if job != Job::Reply {
                        (msg, hooks)
                    } else {
                        let Some(reply) = fold(lane, msg, hooks) else {
                            return;
                        };
                        reply
                    };
                    lane.push_back(Queued {
                        msg,
                        hooks,
                        job,
                        room,
                    });
                }
                Entry::Vacant(vacant) => {
                    let key = vacant.key().clone();
                    vacant.insert(VecDeque::from([Queued {
                        msg,
                        hooks,
                        job,
                        room,
                    }]));
                    let span = tracing::debug_span!("lane", channel, chat = %key.1);
                    self.tasks
                        .spawn(drain(self.shared.clone(), key, delivery.clone()).instrument(span));
                }
            }
        }
        self.shared.report();
    }

    /// [`fold`]s `msg` into its lane, if the chat has one.
    fn fold(
        &self,
        key: &Key,
        msg: OutboundMessage,
        hooks: Hooks,
    ) -> Option<(OutboundMessage, Hooks)> {
        match self.shared.lanes().get_mut(key) {
            Some(lane) => fold(lane, msg, hooks),
            None => Some((msg, hooks)),
        }
    }

    /// The journal no longer retries the finals of `source` (lane `key`): see
    /// [`Outbound::retries_left`](super::Outbound::retries_left). Synchronous, so a drainer
    /// may call it from a reply's hook without waiting for room in its own lane; the
    /// turn's end, if it comes later, reads what it left.
    pub(super) fn retries_left(
        &self,
        key: Key,
        source: Option<MessageId>,
        taken: bool,
        keys: &[String],
    ) -> bool {
        let mut fates = self.shared.fates();
        let source = (key, source);
        let Some(fate) = fates.get_mut(&source) else {
            return false;
        };
        fate.settled(keys);
        if taken {
            fate.quiet = true;
        } else {
            fate.refused = true;
        }
        // The end waits for the turn, or for other finals' retries (another entry's).
        if !fate.ended || fate.waits_for_retries() {
            return false;
        }
        fates.remove(&source);
        !taken
    }

    /// Sources whose finals' fate is kept for their turn's end.
    #[cfg(test)]
    pub(super) fn fates_kept(&self) -> usize {
        self.shared.fates().len()
    }

    /// Waits until every lane ran empty, for at most `bound`: `false` when it ran out.
    pub(super) async fn flush(&self, bound: Duration) -> bool {
        self.tasks.close();
        let flushed = tokio::time::timeout(bound, self.tasks.wait()).await.is_ok();
        self.tasks.reopen();
        if !flushed {
            tracing::warn!(
                pending = self.pending(),
                "Replies were still waiting for delivery when the shutdown bound ran out."
            );
        }
        flushed
    }
}

/// Replaces the lane's newest job with `msg` when that job is a partial of the same reply,
/// not shown yet: a reply's texts are cumulative, so a newer partial, or its final, says
/// everything the queued partial did (a reply whose final overtakes its only partial so
/// costs one write). Gives `msg` back when it needs a place of its own. A reply the queued
/// partial told to stay last still does.
fn fold(
    lane: &mut VecDeque<Queued>,
    mut msg: OutboundMessage,
    hooks: Hooks,
) -> Option<(OutboundMessage, Hooks)> {
    match lane.back_mut() {
        Some(newest)
            if newest.job == Job::Reply
                && !newest.msg.is_final
                && newest.msg.thread_ts == msg.thread_ts =>
        {
            msg.hints.stays_last |= newest.msg.hints.stays_last;
            newest.msg = msg;
            newest.hooks = hooks;
            None
        }
        _ => Some((msg, hooks)),
    }
}

/// The lane's drainer: delivers its jobs in order until the lane is empty, then removes it.
async fn drain(shared: Arc<Shared>, key: Key, delivery: Arc<Delivery>) {
    let mut guard = Closing {
        shared: &shared,
        key: &key,
        armed: true,
    };
    loop {
        let job = {
            let mut lanes = shared.lanes();
            let next = lanes.get_mut(&key).and_then(VecDeque::pop_front);
            match next {
                Some(job) => job,
                None => {
                    lanes.remove(&key);
                    break;
                }
            }
        };
        perform(&shared, &key, &delivery, job.msg, job.hooks, job.job).await;
        drop(job.room);
        shared.report();
    }
    guard.armed = false;
}

/// Delivers `msg` (running its hooks) and notes what became of a final, or for a turn's
/// end tells the channel so, with whether a final of the turn went unanswered.
async fn perform(
    shared: &Shared,
    key: &Key,
    delivery: &Delivery,
    mut msg: OutboundMessage,
    hooks: Hooks,
    job: Job,
) {
    let source = (key.clone(), msg.thread_ts.clone());
    let unanswered = match job {
        Job::Reply => {
            let shown = match hooks.gate.as_ref().is_none_or(|gate| gate()) {
                true => super::deliver(delivery, &msg, hooks.before, hooks.gate).await,
                false => super::withheld(delivery.channel().name()),
            };
            if msg.is_final && delivery.channel().capabilities().turn_ends {
                note_fate(shared, source, &msg, &shown);
            }
            if let Some(after) = hooks.after {
                after(shown).await;
            }
            return;
        }
        Job::TurnEnd => {
            let mut fates = shared.fates();
            if let Some(fate) = fates
                .get_mut(&source)
                .filter(|fate| fate.waits_for_retries())
            {
                // The journal's retry tells the end once it settled.
                fate.ended = true;
                return;
            }
            match fates.remove(&source) {
                // Left to the replica that took the entry over: it tells.
                Some(fate) if fate.quiet => return,
                fate => fate.is_some_and(|fate| fate.refused),
            }
        }
        Job::Settled { answered, keys } => {
            let mut fates = shared.fates();
            match fates.get_mut(&source) {
                Some(fate) => {
                    fate.settled(&keys);
                    fate.refused |= !answered;
                    // The turn goes on (a later message that carried held finals runs),
                    // or another entry's finals of it still wait for their retries (the
                    // carrier's own): its own end, or the last retry to settle, tells.
                    if !fate.ended || fate.waits_for_retries() {
                        return;
                    }
                    fates.remove(&source).is_some_and(|fate| fate.refused)
                }
                // Its end was told (or this process never saw the turn: a restart).
                None => !answered,
            }
        }
        Job::Superseded { key } => {
            let mut fates = shared.fates();
            let Some(fate) = fates.get_mut(&source) else {
                // Nothing held back: the turn's end tells as it comes.
                return;
            };
            match &key {
                Some(key) => fate.retried.retain(|k| k != key),
                None => fate.retried.clear(),
            }
            // The end waits for the turn, or for the other finals' retries.
            if !fate.ended || fate.waits_for_retries() {
                return;
            }
            fates.remove(&source).is_some_and(|fate| fate.refused)
        }
    };
    msg.hints.unanswered = unanswered;
    let to = im_bridge_channel::SendTarget::from(&msg);
    if let Err(error) = delivery.channel().turn_ended(to).await {
        tracing::debug!(%error, "Telling a channel a turn ended failed.");
    }
}

/// Notes what became of final `msg` to `source` for its turn's end: refused for good, or
/// failed for now and retried by the journal (a final it wrote ahead carries a send key).
/// A final that failed for now and is not retried (a notice, a command's reply) changes
/// nothing: it may not have been the answer.
fn note_fate(
    shared: &Shared,
    source: (Key, Option<MessageId>),
    msg: &OutboundMessage,
    shown: &Landed,
) {
    let Landed::Failed { transient, .. } = shown else {
        return;
    };
    let retried = *transient && msg.hints.send_key.is_some();
    if *transient && !retried {
        return;
    }
    let mut fates = shared.fates();
    if fates.len() >= MAX_UNANSWERED && !fates.contains_key(&source) {
        // Refusals whose turn's end never came go first; ends held back for a retry
        // (they live as long as it does) only when nothing else is left.
        fates.retain(|_, fate| fate.waits_for_retries());
        if fates.len() >= MAX_UNANSWERED {
            fates.clear();
        }
    }
    let fate = fates.entry(source).or_default();
    match &msg.hints.send_key {
        Some(key) if retried => {
            if fate.retried.len() >= MAX_RETRIED_KEYS {
                fate.overflowed = true;
            } else if !fate.retried.contains(key) {
                fate.retried.push(key.clone());
            }
        }
        _ => fate.refused = true,
    }
}

/// Removes a lane whose drainer panicked, so the chat's next reply starts a new one.
struct Closing<'a> {
    shared: &'a Shared,
    key: &'a Key,
    /// Cleared when the drainer removed its lane itself.
    armed: bool,
}

impl Drop for Closing<'_> {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let dropped = self
            .shared
            .lanes()
            .remove(self.key)
            .map_or(0, |lane| lane.len());
        tracing::error!(
            channel = self.key.0,
            dropped,
            "A delivery lane stopped unexpectedly; its queued replies were dropped."
        );
    }
}

#[cfg(test)]
mod tests;
