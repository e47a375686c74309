//! Questions the agent asked in a group, so a plain answer finds them (spec platforms.md
//! §4.2, DeerFlow's Feishu "pending clarification", here for every group chat).
//!
//! On group channels a message that neither replies to anything nor sits in a thread
//! starts a conversation of its own. When the agent's final in a group asked the user a
//! question (`ask_clarification`), the user's next such message in that chat — within
//! [`WINDOW`], a chat message, not a reply to something else — is taken as the answer and
//! joins the asking conversation instead. An entry is used once, and dropped when the
//! conversation later ends a turn without a question.
//!
//! The questions live in the store ([`Store::remember_question`]), so a restart (every
//! deploy) forgets none and replicas sharing a store share them. How they are looked up
//! depends on who else opens the store, so the dispatcher's hot path stays lean:
//!
//! - **a store only this process opens** (SQLite, [`Store::is_shared`] false): a map in
//!   memory is the authority for lookups, bounded by [`MAX_PENDING`] (past it the oldest
//!   is forgotten) and loaded from the store at start ([`Pending::load`]). A plain group
//!   message costs no store call; the store hears a question when the turn that asked it
//!   ends (before its final is published, so the question is on file before the user can
//!   answer it), and hears a taken one once the message that took it was admitted, on
//!   that message's task, off the dispatcher loop;
//! - **a shared store** (PostgreSQL): nothing is kept in memory, as another replica may
//!   take a question meanwhile. A fresh plain group message takes its sender's question
//!   from the store in one statement, atomically, so two replicas never both join one
//!   answer; the store bounds the questions by its own cap. The take runs on the
//!   dispatcher loop, so it is bounded ([`TAKE_TIMEOUT`]) and, after one failed or was
//!   slow, skipped for a few seconds: the message then starts its own conversation.
//!
//! **Giving back.** A question is taken on the dispatcher loop, before the message is
//! admitted (`handle.rs`): a platform redelivering a message the bridge already handled (a
//! reconnect, a webhook retry) would otherwise spend the question, typically the very one
//! the first copy's answer asked, on a copy that is then dropped. So what a message took
//! travels with it ([`Taken`]) until either the agent saw it (its turn's run started: it
//! keeps the question, even if the run then failed) or it was not run: a redelivery, a
//! message turned away by a full line (or stopped unjournaled by shutdown before its turn),
//! or one whose run never started (the Gateway down or refusing it, the bridge failing: the
//! user, told so, likely sends the answer again). That one gives the question back
//! ([`Pending::give_back`]) with its original deadline, unless a turn changed it meanwhile
//! (**Overtaken** below). With a store only this process opens, memory takes it back, and
//! the store, which forgets a taken question only once its message was admitted, never lost
//! it on a redelivery (a message refused after its admission has it remembered there again,
//! after the forget, on the same task); a shared store has it remembered again, over no
//! newer question ([`Store::give_back_question`]). A platform often redelivers in a batch,
//! the old copy just before the user's answer, which may reach the dispatcher before the
//! copy's admission ends: a fresh message of a user whose question a message not yet
//! admitted holds waits for that admission (in this process; a copy on another replica is
//! not waited for). The wait holds the intake, every chat's next message, so it is bounded
//! per question lent, not per message waiting: all of them together wait at most
//! [`TAKE_TIMEOUT`] after the question was taken, none once that passed, none while a
//! shared store's takes are paused (the store would not be asked anyway), and what a
//! message waited comes off its own take's bound, so no message holds the dispatcher longer
//! than [`TAKE_TIMEOUT`] in all.
//!
//! **Overtaken.** While a message holds the question (from its take until its run started
//! or it gave the question back), a turn may change what the user has: the user was asked
//! another question, or the asking conversation ended a turn without one (a threaded reply
//! there), which closes it. That turn finds nothing to forget (the question is out), so it
//! marks the loan instead ([`Loan::overtaken`]), before the store hears the turn; a message
//! whose loan was marked neither gives the question back (a closed one would catch the
//! user's unrelated next message, for up to [`WINDOW`]) nor, at its admission, forgets it
//! in the store (which may hold a question the same conversation asked since: memory
//! would keep it, the store lose it at the next start). This is per process: on a shared
//! store a turn ended on another replica marks no loan here, and a question it closed
//! while a message here held it comes back with that message's give-back (a message not
//! run: a redelivery, a full line, a Gateway down), until its original deadline. Closing
//! that would take a mark in the store's row; a turn asking a question there is seen all
//! the same (the store gives back over no live question). A turn ending while the
//! message's own store call is under way may meet it there in either order: the memory is
//! right, but a question the turn asked may be deleted from the store by the admission's
//! forget, and then be missing after the next start. A turn whose own store call failed
//! still marks the loan, so the admission no longer forgets the old question in the store
//! either: after a restart it may come back once.
//!
//! A store failure degrades to what happens without this feature: the message starts its
//! own conversation (logged with the channel and chat, never the text), and is never
//! lost; a question that could not be written is still remembered in memory (unshared).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use im_bridge_channel::{ChatKind, InboundMessage, MsgType};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::store::{AskedKey, PendingQuestion, QUESTION_CAP, Store};

/// How long a question waits for its answer to join it.
pub const WINDOW: Duration = Duration::from_secs(30 * 60);
/// How long the dispatcher waits, at the most, for one message to join: for the admission
/// of a message holding the sender's question, then for a shared store's take, together
/// (see the module docs); also how long after a question was lent anyone waits for it. It
/// holds every chat's next message meanwhile, so a slow store costs an answer its
/// conversation, not the intake.
pub const TAKE_TIMEOUT: Duration = Duration::from_millis(300);
/// After a take failed or timed out, how long fresh group messages skip the store.
const TAKE_PAUSE: Duration = Duration::from_secs(5);
/// Questions remembered at most in memory (and, by default, in a store): past it the
/// oldest is forgotten.
pub const MAX_PENDING: usize = QUESTION_CAP;

/// The questions waiting: with a store only this process opens, also in memory, by who
/// was asked, with the asking conversation and when the question stops waiting.
pub(crate) struct Pending {
    store: Arc<dyn Store>,
    /// Whether replicas share the store: then it alone is asked.
    shared: bool,
    /// The memory's bound, [`MAX_PENDING`] (smaller in tests).
    cap: usize,
    /// Until when a shared store's takes are skipped (one failed or timed out).
    paused_until: Mutex<Option<Instant>>,
    memory: Arc<Mutex<Memory>>,
}

/// What this process keeps of the questions.
#[derive(Default)]
struct Memory {
    /// The questions pending (a store only this process opens), by who was asked: the
    /// asking topic and when it stops waiting. At most the cap ([`Pending::remember`]).
    asked: HashMap<AskedKey, (String, Instant)>,
    /// The questions out on loan, by who was asked: taken by a message that neither kept
    /// them (its run started, it is dropped after the run) nor gave them back yet. One per
    /// user asked (a later take, of a question asked since, replaces the record), and at
    /// most one per message in flight (queued, waiting in its line, or running), so bounded
    /// by the inbound queue, the lines and the workers.
    lent: HashMap<AskedKey, Loan>,
    /// The number the next loan gets, so that a message tells its loan from a later one.
    loans: u64,
}

/// A question lent to a message, as the sender's next messages and the asking
/// conversation's turns see it.
struct Loan {
    /// Which take this is ([`Memory::loans`]).
    id: u64,
    /// The asking conversation.
    topic: String,
    /// Cancelled once the message was admitted or gave the question back.
    done: CancellationToken,
    /// Until when the sender's messages wait for that: [`TAKE_TIMEOUT`] after the take,
    /// whoever waits, however many of them (past it, none waits).
    until: Instant,
    /// Whether the user's question changed since the take ([`Pending::turn_ended`]): they
    /// were asked again, or the asking conversation ended a turn without a question. The
    /// store heard that itself, so the question is neither given back nor forgotten there
    /// by its message.
    overtaken: bool,
}

/// A question a message took when it joined the asking conversation ([`Pending::join`]).
/// Its message keeps it once its run started (the agent saw the answer), or gives it back
/// ([`Pending::give_back`]) when it is not run; until its admission
/// ([`Pending::admitted`]) the sender's next fresh message waits for it.
#[must_use]
pub(crate) struct Taken {
    asked: AskedKey,
    topic: String,
    /// When it stops waiting, on this process's clock: a question given back keeps it.
    until: Instant,
    /// Whether the store no longer holds it: taken from a shared store, or forgotten once
    /// its message was admitted (a store only this process opens).
    forgotten: bool,
    /// Held until the message kept the question or gave it back.
    lent: Lent,
}

/// Marks a question as lent to a message: admitted, it wakes the sender's messages
/// waiting for it; dropped (kept or given back), also its [`Loan`] leaves
/// [`Memory::lent`].
struct Lent {
    asked: AskedKey,
    id: u64,
    done: CancellationToken,
    memory: Arc<Mutex<Memory>>,
}

impl Memory {
    /// Remembers a question until `until`, within `cap`: past it, the expired ones go, then
    /// the one nearest its end.
    fn remember(&mut self, cap: usize, key: AskedKey, topic: String, until: Instant) {
        let now = Instant::now();
        let asked = &mut self.asked;
        if asked.len() >= cap && !asked.contains_key(&key) {
            asked.retain(|_, (_, until)| *until > now);
            if asked.len() >= cap
                && let Some(oldest) = asked
                    .iter()
                    .min_by_key(|(_, (_, until))| *until)
                    .map(|(k, _)| k.clone())
            {
                asked.remove(&oldest);
            }
        }
        asked.insert(key, (topic, until));
    }
}

impl Lent {
    /// Whether the loan is still this message's and the user's question unchanged since
    /// the take (see [`Loan::overtaken`]).
    fn current(&self, memory: &Memory) -> bool {
        memory
            .lent
            .get(&self.asked)
            .is_some_and(|loan| loan.id == self.id && !loan.overtaken)
    }
}

impl Drop for Lent {
    fn drop(&mut self) {
        self.done.cancel();
        let mut memory = relock(&self.memory);
        // Not a later lender's (a message that took a question asked since).
        if memory
            .lent
            .get(&self.asked)
            .is_some_and(|loan| loan.id == self.id)
        {
            memory.lent.remove(&self.asked);
        }
    }
}

fn relock(memory: &Mutex<Memory>) -> MutexGuard<'_, Memory> {
    memory.lock().unwrap_or_else(|p| p.into_inner())
}

fn who(msg: &InboundMessage) -> AskedKey {
    AskedKey {
        channel: msg.channel_name.clone(),
        chat_id: msg.chat_id.clone(),
        user_id: msg.user_id.as_str().to_owned(),
    }
}

/// Whether `msg` may answer a question: a group chat message that replies to nothing and
/// sits in no thread of its own (its topic is its own message).
fn fresh(msg: &InboundMessage) -> bool {
    msg.chat_kind == ChatKind::Group
        && msg.msg_type == MsgType::Chat
        && msg.reply_to.is_none()
        && msg.topic_id.as_ref()
            == msg
                .thread_ts
                .as_ref()
                .map(|t| t.as_str().to_owned())
                .as_ref()
}

impl Pending {
    /// The questions kept in `store`, and in memory unless the store is shared.
    pub(crate) fn new(store: Arc<dyn Store>) -> Self {
        Self::with_cap(store, MAX_PENDING)
    }

    fn with_cap(store: Arc<dyn Store>, cap: usize) -> Self {
        Self {
            shared: store.is_shared(),
            store,
            cap: cap.max(1),
            paused_until: Mutex::new(None),
            memory: Arc::default(),
        }
    }

    /// Loads the questions a previous process left unanswered into memory (a store only
    /// this process opens; a shared store is asked per message instead). A failure is
    /// logged and leaves them to the store alone: they go unanswered, as before a restart.
    pub(crate) async fn load(&self) {
        if self.shared {
            return;
        }
        let loaded = match self.store.pending_questions(self.cap).await {
            Ok(loaded) => loaded,
            Err(error) => {
                tracing::warn!(%error, "Loading the agent's pending questions failed; answers to them start conversations of their own.");
                return;
            }
        };
        let now = Instant::now();
        let mut memory = self.lock();
        for question in loaded {
            // Newest first: a key seen twice keeps its newest question.
            memory
                .asked
                .entry(question.asked)
                .or_insert((question.topic, now + question.expires_in.min(WINDOW)));
        }
        if !memory.asked.is_empty() {
            tracing::info!(
                questions = memory.asked.len(),
                "Loaded the agent's pending questions."
            );
        }
    }

    /// Records how `msg`'s conversation ended a turn: with a question for its sender
    /// (remembered) or not (any question of that conversation is forgotten). The store
    /// hears it before this returns, so the final that shows the question goes out after.
    pub(crate) async fn turn_ended(&self, msg: &InboundMessage, asked_question: bool) {
        let Some(topic) = msg
            .topic_id
            .as_deref()
            .filter(|_| msg.chat_kind == ChatKind::Group)
        else {
            return;
        };
        let key = who(msg);
        // Before the store hears it: a message holding the user's question must not give
        // it back, or forget it in the store, after this turn decided what the user has.
        self.overtake(&key, topic, asked_question);
        if asked_question {
            if let Err(error) = self.store.remember_question(&key, topic, WINDOW).await {
                tracing::warn!(%error, channel = %key.channel, chat = %key.chat_id, "Storing the agent's question failed; an answer after a restart or on another replica starts its own conversation.");
            }
            if !self.shared {
                self.remember(key, topic.to_owned(), Instant::now() + WINDOW);
            }
            return;
        }
        if !self.shared {
            let asked = &mut self.lock().asked;
            // Only a question this conversation asked is forgotten.
            if asked.get(&key).is_some_and(|(t, _)| t == topic) {
                asked.remove(&key);
            }
        }
        // In the store too, whatever memory held (a load that failed, the memory's bound):
        // a question left there would come back at the next start.
        if let Err(error) = self.store.forget_question(&key, topic).await {
            tracing::warn!(%error, channel = %key.channel, chat = %key.chat_id, "Forgetting the agent's answered question in the store failed.");
        }
    }

    /// Marks the loan of `key`'s question, if one is out, as overtaken by the turn that
    /// ended in `topic`: a question asked replaces it, whichever conversation asked; a turn
    /// without one closes it if its conversation asked it.
    fn overtake(&self, key: &AskedKey, topic: &str, asked_question: bool) {
        if let Some(loan) = self.lock().lent.get_mut(key)
            && (asked_question || loan.topic == topic)
        {
            loan.overtaken = true;
        }
    }

    /// Whether a shared store's takes, and the waits for lenders, are paused after a
    /// failure or a wait that ran out (see [`TAKE_PAUSE`]).
    fn take_paused(&self) -> bool {
        let paused = self.paused_until.lock().unwrap_or_else(|p| p.into_inner());
        paused.is_some_and(|until| Instant::now() < until)
    }

    /// Skips the shared store's takes for [`TAKE_PAUSE`]: a store that failed or was slow
    /// would hold the intake at every fresh group message.
    fn pause_takes(&self) {
        let mut paused = self.paused_until.lock().unwrap_or_else(|p| p.into_inner());
        *paused = Some(Instant::now() + TAKE_PAUSE);
    }

    /// Remembers a question in memory until `until`, within the bound.
    fn remember(&self, key: AskedKey, topic: String, until: Instant) {
        self.lock().remember(self.cap, key, topic, until);
    }

    /// `msg` joins the conversation whose question its sender is answering, if it is a
    /// fresh group chat message (no reply, no thread of its own) sent within the window;
    /// then it carries the question it took, to keep or give back. Runs on the dispatcher
    /// loop, in arrival order: from memory (an expired question found there is forgotten
    /// by the store on a task of `tasks`); from a shared store, one statement.
    pub(crate) async fn join(
        &self,
        mut msg: InboundMessage,
        tasks: &TaskTracker,
    ) -> (InboundMessage, Option<Taken>) {
        if !fresh(&msg) {
            return (msg, None);
        }
        let key = who(&msg);
        let left = self.wait_for_lender(&key).await;
        let taken = if self.shared {
            self.take_shared(key, left).await
        } else {
            self.take_remembered(key, tasks)
        };
        if let Some(taken) = &taken {
            tracing::debug!("A group message joined the conversation whose question it answers.");
            msg.topic_id = Some(taken.topic.clone());
        }
        (msg, taken)
    }

    /// Waits for the admission of a message holding `key`'s question, if one does and its
    /// loan's wait has not run out ([`Loan::until`]): should that message be a redelivery,
    /// it gives the question back for this one. Not while the store is paused (see
    /// [`TAKE_PAUSE`]): after a shared store's take failed, the question given back would
    /// not be looked for; after a wait ran out, admissions are slow (the store is), and
    /// another wait would hold the intake again, for another user's message. Returns what
    /// is left of this message's [`TAKE_TIMEOUT`] for the take.
    async fn wait_for_lender(&self, key: &AskedKey) -> Duration {
        let start = Instant::now();
        let loan = self
            .lock()
            .lent
            .get(key)
            // An overtaken loan gives nothing back: nothing to wait for.
            .filter(|loan| start < loan.until && !loan.done.is_cancelled() && !loan.overtaken)
            .map(|loan| (loan.done.clone(), loan.until));
        let Some((done, until)) = loan else {
            return TAKE_TIMEOUT;
        };
        if self.take_paused() {
            return TAKE_TIMEOUT;
        }
        tokio::select! {
            // An admission that ended counts, however late this wait looks again.
            biased;
            () = done.cancelled() => {}
            () = tokio::time::sleep_until(until) => {
                tracing::warn!(channel = %key.channel, chat = %key.chat_id, timeout_ms = TAKE_TIMEOUT.as_millis(), "An earlier message holding the sender's question was not admitted in time; the message starts its own conversation.");
                self.pause_takes();
            }
        }
        TAKE_TIMEOUT.saturating_sub(start.elapsed())
    }

    /// Takes `key`'s question from memory, if it is live; an expired one goes, from the
    /// store too (unless another question replaced it since), on a task of `tasks`.
    fn take_remembered(&self, key: AskedKey, tasks: &TaskTracker) -> Option<Taken> {
        let (topic, until) = self.lock().asked.remove(&key)?;
        if Instant::now() < until {
            // The store forgets it once its message was admitted (`admitted`).
            return Some(self.lend(key, topic, until, false));
        }
        let store = self.store.clone();
        tasks.spawn(async move {
            if let Err(error) = store.forget_question(&key, &topic).await {
                tracing::warn!(%error, channel = %key.channel, chat = %key.chat_id, "Forgetting the agent's expired question in the store failed.");
            }
        });
        None
    }

    /// Takes `key`'s question from the shared store, in one statement, bounded by `within`
    /// (what the wait for a lender left of [`TAKE_TIMEOUT`]; nothing left, no take). A take
    /// that runs out of it pauses the takes: the dispatcher was held its whole bound.
    async fn take_shared(&self, key: AskedKey, within: Duration) -> Option<Taken> {
        if self.take_paused() || within.is_zero() {
            return None;
        }
        let taken = tokio::time::timeout(within, self.store.take_question(&key)).await;
        match taken {
            Ok(Ok(Some(question))) => {
                let until = Instant::now() + question.expires_in.min(WINDOW);
                return Some(self.lend(key, question.topic, until, true));
            }
            Ok(Ok(None)) => {}
            Ok(Err(error)) => {
                tracing::warn!(%error, channel = %key.channel, chat = %key.chat_id, "Taking the agent's pending question failed; the message starts its own conversation.");
                self.pause_takes();
            }
            Err(_) => {
                tracing::warn!(channel = %key.channel, chat = %key.chat_id, timeout_ms = within.as_millis(), "Taking the agent's pending question took too long; the message starts its own conversation.");
                self.pause_takes();
            }
        }
        None
    }

    /// A question just taken, marked as lent until its message kept it or gave it back; the
    /// sender's next messages wait for its admission [`TAKE_TIMEOUT`] from now, at the most.
    fn lend(&self, asked: AskedKey, topic: String, until: Instant, forgotten: bool) -> Taken {
        let done = CancellationToken::new();
        let mut memory = self.lock();
        memory.loans += 1;
        let id = memory.loans;
        let loan = Loan {
            id,
            topic: topic.clone(),
            done: done.clone(),
            until: Instant::now() + TAKE_TIMEOUT,
            overtaken: false,
        };
        memory.lent.insert(asked.clone(), loan);
        drop(memory);
        Taken {
            lent: Lent {
                asked: asked.clone(),
                id,
                done,
                memory: self.memory.clone(),
            },
            asked,
            topic,
            until,
            forgotten,
        }
    }

    /// `taken`'s message was admitted (no redelivery): the sender's next message need not
    /// wait for it, and a store only this process opens forgets the question now, unless
    /// a turn changed the user's question since the take (the store heard that turn: it
    /// may hold a question the same conversation asked since, which must stay). Should the
    /// message not run after all, it still gives the question back.
    pub(crate) async fn admitted(&self, taken: &mut Taken) {
        taken.lent.done.cancel();
        if taken.forgotten {
            return;
        }
        taken.forgotten = true;
        if !taken.lent.current(&self.lock()) {
            return;
        }
        if let Err(error) = self.store.forget_question(&taken.asked, &taken.topic).await {
            tracing::warn!(%error, channel = %taken.asked.channel, chat = %taken.asked.chat_id, "Forgetting the agent's answered question in the store failed.");
        }
    }

    /// Gives back the question `taken`'s message took and is not run with: it waits again,
    /// until its original deadline, unless a turn changed it meanwhile: its user was asked
    /// another question (that one stays), or the asking conversation ended a turn without
    /// one (the question is closed). In memory (a store only this process opens) and, when
    /// the store no longer holds it, in the store. Only then may the sender's next message
    /// look.
    pub(crate) async fn give_back(&self, taken: Taken) {
        let Taken {
            asked,
            topic,
            until,
            forgotten,
            lent,
        } = taken;
        let now = Instant::now();
        if now >= until {
            return;
        }
        // Checked and given back to memory at once: a turn ending meanwhile finds it
        // either out on loan, and marks the loan, or back in memory.
        let current = {
            let mut memory = self.lock();
            let current = lent.current(&memory);
            if current && !self.shared {
                memory.remember(self.cap, asked.clone(), topic.clone(), until);
            }
            current
        };
        if !current {
            return; // The turn that changed it told the store too.
        }
        if forgotten {
            let question = PendingQuestion {
                asked,
                topic,
                expires_in: until - now,
            };
            if let Err(error) = self.store.give_back_question(&question).await {
                let key = &question.asked;
                tracing::warn!(%error, channel = %key.channel, chat = %key.chat_id, "Giving the agent's question back to the store failed; an answer after a restart or on another replica starts its own conversation.");
            }
        }
        drop(lent);
        tracing::debug!("Gave the agent's question back for the sender's next message.");
    }

    fn lock(&self) -> MutexGuard<'_, Memory> {
        relock(&self.memory)
    }
}

#[cfg(test)]
mod tests;
