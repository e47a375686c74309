//! Handling one message, in five stages ([`Manager::handle`] reads as their sequence):
//!
//! 1. **admit** — the message (a chat message, or a command that may start a run) is
//!    journaled with its dedupe record in one store transaction (`journal.rs`); a
//!    redelivery ends here, dropped silently, giving back the agent's question it took on
//!    joining the asking conversation (`clarify.rs`). On a channel whose file
//!    handles expire, a chat message's files are then read and kept on disk until its turn
//!    (`staging.rs`), and the entry names the copies; they are removed once the message was
//!    handled. On a channel with a reply window, what waits for the chat's next message
//!    goes out first (issue 33).
//! 2. **take its place** — in its conversation's line (`order.rs`): it waits for the earlier
//!    messages, holding no worker slot meanwhile (but still its room in the inbound queue),
//!    told so once per run (the queued notice; later ones a reaction), then for a worker
//!    slot. A full line, or a channel that rejects while busy, gets the busy
//!    reply instead, and the message ends there (giving back a question it took).
//! 3. **show presence** — an agent turn shows "typing…" at once and keeps it up until its
//!    first reply (the "working on it" placeholder is the run's, `run.rs`).
//! 4. **dispatch** — a command is answered (`commands`), anything else becomes an agent run
//!    (`run`), inside the journal entry's scope, so every reply is tracked against it. A
//!    chat message whose run never started gives back a question it took.
//! 5. **settle** — the dedupe keys its admission recorded are released when the provider
//!    should be able to retry (never a key another admission recorded: `dedupe.rs`),
//!    after the final reply was published, and the entry hears the turn ended; then the
//!    line moves on (on a channel with a reply window, once the turn's finals came to rest,
//!    so that the next message carries what they left for it), and the channel hears the
//!    bridge is done with the message.
//!
//! Shutdown may cancel a message while it waits its turn or is dispatched: a journaled one
//! stays journaled (its key kept) for the next start to finish; an unjournaled one's key is
//! released, so the platform may redeliver it. Neither is told done to its channel.

use std::sync::Arc;

use futures_util::future::Either;
use im_bridge_channel::{InboundMessage, MsgType, Reaction, Room};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::task::futures::TaskLocalFuture;
use tokio_util::sync::CancellationToken;

use super::clarify::Taken;
use super::journal::{Admission, Entry};
use super::order::Ticket;
use super::typing::TypingGuard;
use super::{Disposition, Manager, Place, commands, conversation_key, dedupe, run};
use crate::i18n::msg as m;
use crate::store::DedupeKey;
use crate::telemetry::names;

/// The worker slot a message holds while it is handled (at most
/// `channels.max_concurrency` are held at once), and before that its room in the inbound
/// queue: a message received and waiting for a worker still counts against the queue's
/// bound.
pub(crate) struct Slot {
    permit: Option<OwnedSemaphorePermit>,
    room: Option<Room>,
    slots: Arc<Semaphore>,
}

impl Slot {
    /// No worker slot yet: the message holds `room` until it takes one from `slots`.
    pub(crate) fn queued(room: Room, slots: Arc<Semaphore>) -> Self {
        Self {
            permit: None,
            room: Some(room),
            slots,
        }
    }

    /// Gives the worker slot back: a message waiting its turn holds none (it keeps its
    /// room in the queue).
    fn give_back(&mut self) {
        self.permit = None;
    }

    /// Takes a worker slot, once one is free, unless it holds one; its room in the queue
    /// goes then.
    async fn take(&mut self) {
        if self.permit.is_none() {
            self.permit = self.slots.clone().acquire_owned().await.ok();
        }
        self.room = None;
    }
}

/// An admitted message: what its later stages share.
struct Admitted<'m> {
    msg: &'m InboundMessage,
    /// The dedupe keys its admission recorded (of its own and its parts'), when its
    /// channel names redeliveries: all a release may free (`dedupe.rs`).
    keys: Vec<DedupeKey>,
    /// Its journal entry: a chat message's, or a command's that may start a run
    /// (`commands::starts_a_run`), unless the store failed at admission.
    entry: Option<Entry>,
}

impl Admitted<'_> {
    /// Runs `work` in the journal entry's scope, if there is one: the replies it publishes
    /// are tracked against the entry until they landed (`journal.rs`). Not an `async fn`:
    /// a turn's future is large, and is moved in once instead of copied into a wrapper.
    fn journaled<F: Future>(&self, work: F) -> Either<TaskLocalFuture<Entry, F>, F> {
        match &self.entry {
            Some(entry) => Either::Left(entry.scope(work)),
            None => Either::Right(work),
        }
    }

    fn is_chat(&self) -> bool {
        self.msg.msg_type == MsgType::Chat
    }

    /// Whether the message may start an agent run: a chat message, or a command such as
    /// `/goal <objective>` (`commands::starts_a_run`).
    fn may_run(&self) -> bool {
        self.is_chat() || commands::starts_a_run(self.msg)
    }
}

/// What dispatching a message came to.
pub(super) struct Dispatched {
    /// What becomes of its dedupe key.
    pub(super) disposition: Disposition,
    /// Whether the agent saw the chat message: its turn's run started. Not when the bridge
    /// answered it alone (a skill it does not know, a run the Gateway or the bridge could
    /// not start), nor for a command, which never answers the agent's question.
    pub(super) agent_saw_it: bool,
}

/// What taking its place in line came to.
enum Placed {
    /// Its turn came: handle it, keeping its place (when it has one) until it settled.
    Turn(Option<Ticket>),
    /// The line was full: it had the busy reply (or a reaction), and a redelivery may retry.
    TurnedAway,
    /// Shutdown came while it waited.
    Cancelled,
}

/// How long a turn on a channel with reply windows waits, at the most, for its finals'
/// first deliveries to end before the conversation's next message takes its turn: one
/// delivery, its waits for a platform's pauses included.
const AT_REST_WAIT: std::time::Duration = std::time::Duration::from_secs(120);

impl Manager {
    /// Handles one message end to end, in the module's five stages; in line, only after
    /// its conversation's earlier messages were handled. Then, whatever became of it, its
    /// channel hears that the bridge is done with it (if it asks to), unless shutdown
    /// stopped it: then the process that finishes it tells (or nobody, when it is not
    /// journaled and nothing will answer it), never a "done" on a message not answered.
    ///
    /// `taken` is the agent's question the message took on joining its conversation
    /// (`clarify.rs`): kept once its run started, given back if it is not run.
    pub(crate) async fn handle(
        &self,
        mut msg: InboundMessage,
        cancel: CancellationToken,
        place: Place,
        slot: Slot,
        arrived: i64,
        mut taken: Option<Taken>,
    ) {
        // A chat message is journaled, and so is a command that may start a run: the run's
        // answer is kept until it landed, whoever asked for it.
        let journaled = msg.msg_type == MsgType::Chat || commands::starts_a_run(&msg);
        let journal = &self.inner.journal;
        let keys = dedupe::dedupe_keys(&msg);
        let (admitted, keys) = match journal.admit_at(&msg, keys, journaled, arrived).await {
            Admission::New { entry, keys } => (entry, keys),
            Admission::Duplicate => {
                tracing::info!("Dropped a redelivered message.");
                // Its place first: the give-back wakes the sender's next message, which
                // may join the same line, and must not find this one still in it.
                place.abandon();
                self.give_back(taken).await;
                self.inner.replier.outbound().turn_ended(&msg).await;
                return;
            }
        };
        if let Some(taken) = &mut taken {
            self.inner.clarifications.admitted(taken).await;
        }
        self.read_files_ahead(&mut msg, admitted.as_ref(), &place, &cancel)
            .await;
        let admitted = Admitted {
            msg: &msg,
            keys,
            entry: admitted,
        };
        if self
            .handle_stages(admitted, &cancel, place, slot, taken)
            .await
        {
            // Handled: its files read ahead are no longer needed; a message shutdown
            // stopped keeps them for the next start.
            self.inner.staging.release(&msg).await;
            self.inner.replier.outbound().turn_ended(&msg).await;
        }
    }

    /// On a channel whose file handles expire, a journaled chat message that will have a
    /// turn gets its files read now and kept on disk until then (`staging.rs`): it may
    /// wait behind a long run, or be recovered after a restart. The journal entry was
    /// written first, with the handles, so a crash while the files download loses nothing
    /// (the next start reads them by handle); it names the copies once they are on disk.
    /// Shutdown stops the reading: the copies already on disk are named all the same (the
    /// next start need not read them again, by handles that may have expired by then); what
    /// was not staged keeps its handle.
    async fn read_files_ahead(
        &self,
        msg: &mut InboundMessage,
        entry: Option<&Entry>,
        place: &Place,
        cancel: &CancellationToken,
    ) {
        let outbound = self.inner.replier.outbound();
        let expire = outbound
            .capabilities(&msg.channel_name)
            .and_then(|c| c.files_expire_after);
        let Some(within) = expire else {
            return;
        };
        if msg.files.is_empty() || msg.msg_type != MsgType::Chat || matches!(place, Place::Busy) {
            return;
        }
        let mut staged = msg.clone();
        tokio::select! {
            () = self.inner.staging.stage(&self.inner, &mut staged, within) => {}
            () = cancel.cancelled() => {}
        }
        if let Some(entry) = entry {
            entry.files_staged(&staged.files).await;
        }
        msg.files = staged.files;
    }

    /// The stages after admission, in order; a busy line or shutdown ends them early, and
    /// the message gives back the question it took (`taken`) unless it will still run (a
    /// journaled one stopped by shutdown runs at the next start); so does a message whose
    /// run never started. `false` when shutdown stopped the message.
    ///
    /// A message may wait here for its turn and a worker slot, up to the inbound queue's
    /// bound of them at once: what it does after (and what it seldom does before) is boxed,
    /// so that a waiting message's task holds only what the wait needs, a few kilobytes
    /// instead of the whole turn's state (tens: 20 MB more at a saturating load).
    async fn handle_stages(
        &self,
        admitted: Admitted<'_>,
        cancel: &CancellationToken,
        place: Place,
        mut slot: Slot,
        taken: Option<Taken>,
    ) -> bool {
        self.carry_held(admitted.msg).await;
        let ticket = match self.take_place(&admitted, place, &mut slot, cancel).await {
            Placed::Turn(ticket) => ticket,
            Placed::TurnedAway => {
                // Before the key goes: a platform retry may follow at once.
                self.give_back(taken).await;
                Box::pin(self.settle(&admitted, Some(Disposition::Release))).await;
                return true;
            }
            Placed::Cancelled => {
                if admitted.entry.is_none() {
                    self.give_back(taken).await;
                }
                Box::pin(self.settle(&admitted, None)).await;
                return false;
            }
        };
        Box::pin(self.take_turn(&admitted, ticket, cancel, slot, taken)).await
    }

    /// The message's turn, once it has its place (`ticket`, when in a line) and a worker
    /// slot: the run, its settling, and the rest before the conversation's next message.
    async fn take_turn(
        &self,
        admitted: &Admitted<'_>,
        ticket: Option<Ticket>,
        cancel: &CancellationToken,
        mut slot: Slot,
        taken: Option<Taken>,
    ) -> bool {
        let _presence = self.show_presence(admitted).await;
        let dispatched = self.dispatch_turn(admitted, ticket.as_ref(), cancel).await;
        // The question is the turn's once the agent saw the answer. A run that never
        // started (the Gateway down, the bridge failing) leaves it to the user's next
        // message, likely the answer again; given back before the key goes, as a platform
        // retry may follow at once.
        match &dispatched {
            Some(d) if !d.agent_saw_it => self.give_back(taken).await,
            // Stopped by shutdown with no entry to run it at the next start (the store
            // failed at its admission): its redelivery is the answer again.
            None if admitted.entry.is_none() => self.give_back(taken).await,
            _ => drop(taken),
        }
        let disposition = dispatched.map(|d| d.disposition);
        let finished = disposition.is_some();
        self.settle(admitted, disposition).await;
        if let (Some(_), Some(entry)) = (&ticket, &admitted.entry) {
            // The lanes deliver without a worker slot: the wait holds only the line.
            slot.give_back();
            self.rest_for_the_next(entry, admitted.msg, cancel).await;
        }
        // Settled: only now may the conversation's next message go, in this slot or another.
        drop(ticket);
        drop(slot);
        finished
    }

    /// Publishes what waits for `msg`'s chat as its first replies, on a channel with reply
    /// windows (`journal/held.rs`).
    pub(super) async fn carry_held(&self, msg: &InboundMessage) {
        let outbound = self.inner.replier.outbound();
        if outbound.reply_window(&msg.channel_name).is_some() {
            // Boxed: see `handle_stages`.
            Box::pin(self.inner.journal.carry_held(msg)).await;
        }
    }

    /// On a channel with reply windows, waits until what the turn leaves for the chat's
    /// next message is in the store (its finals' first deliveries ended: one that found
    /// its source closed is held), so that a message waiting behind the turn carries it
    /// (at most [`AT_REST_WAIT`], or until shutdown).
    pub(super) async fn rest_for_the_next(
        &self,
        entry: &Entry,
        msg: &InboundMessage,
        cancel: &CancellationToken,
    ) {
        let outbound = self.inner.replier.outbound();
        if outbound.reply_window(&msg.channel_name).is_none() {
            return;
        }
        tokio::select! {
            () = entry.at_rest(AT_REST_WAIT) => {}
            () = cancel.cancelled() => {}
        }
    }

    /// **Take its place**: waits for the conversation's earlier messages, holding no worker
    /// slot meanwhile; a full line gets the busy reply instead.
    async fn take_place(
        &self,
        admitted: &Admitted<'_>,
        place: Place,
        slot: &mut Slot,
        cancel: &CancellationToken,
    ) -> Placed {
        let mut ticket = match place {
            // `/stop` must reach a run while every worker runs one: it takes no worker
            // slot (it only asks the Gateway; the inbound queue's bound still holds it).
            Place::Free if commands::acts_on_the_line(admitted.msg) => {
                return Placed::Turn(None);
            }
            Place::Free => return Self::take_slot(slot, None, cancel).await,
            Place::InLine(ticket) => ticket,
            Place::Busy => {
                Box::pin(self.turn_away(admitted)).await;
                return Placed::TurnedAway;
            }
        };
        if !ticket.must_wait() {
            return Self::take_slot(slot, Some(ticket), cancel).await;
        }
        let msg = admitted.msg;
        // No "still running" notice when the run before is over and only its answer is on
        // the way: the wait is short, and the notice would follow that answer. Only the
        // first message to wait during a run is told; the others get a reaction.
        let waits = admitted.may_run() && !ticket.predecessor_settling();
        let noticed = waits && ticket.claim_notice();
        // Boxed, as what follows the wait: see `handle_stages`.
        if noticed {
            let notice = self.inner.replier.notice(msg, m::RUN_QUEUED);
            Box::pin(admitted.journaled(notice)).await;
        } else if waits {
            let outbound = self.inner.replier.outbound();
            Box::pin(outbound.react(msg, Reaction::Queued)).await;
        }
        // Waiting holds no worker slot; the turn takes one again.
        slot.give_back();
        let turn = async {
            ticket.wait_turn().await;
            slot.take().await;
        };
        tokio::select! {
            () = turn => {}
            () = cancel.cancelled() => return Placed::Cancelled,
        }
        // The run it waited for may have left the rest of its answer for the chat's next
        // message (issue 33): this one carries it, first.
        self.carry_held(msg).await;
        // Where the notice is a partial, the reply's stream now says the agent is on it; a
        // notice of its own stays as it is (another message would only repeat it).
        if noticed && self.inner.replier.shows_partials(msg) {
            let notice = self.inner.replier.turn_notice(msg);
            Box::pin(admitted.journaled(notice)).await;
        }
        Placed::Turn(Some(ticket))
    }

    /// Its turn has come (`ticket`, when it is in a line): it waits for a worker slot.
    async fn take_slot(
        slot: &mut Slot,
        ticket: Option<Ticket>,
        cancel: &CancellationToken,
    ) -> Placed {
        tokio::select! {
            () = slot.take() => Placed::Turn(ticket),
            () = cancel.cancelled() => Placed::Cancelled,
        }
    }

    /// The line is full (or the channel rejects while busy): DeerFlow's busy reply, once
    /// per run where later ones can be marked with a reaction; where they cannot, each
    /// message turned away gets the reply, so none is dropped unseen.
    async fn turn_away(&self, admitted: &Admitted<'_>) {
        let msg = admitted.msg;
        let reacts = self
            .inner
            .replier
            .outbound()
            .capabilities(&msg.channel_name)
            .is_some_and(|c| c.reactions);
        let first = self
            .inner
            .turnstile
            .claim_busy_reply(&conversation_key(msg).storage_key());
        let noticed = first || !reacts;
        tracing::info!(noticed, "The conversation is busy and its line is full.");
        metrics::counter!(names::RUNS, "outcome" => "busy").increment(1);
        if noticed {
            let busy = self.inner.replier.reply(msg, m::RUN_BUSY, &[]);
            admitted.journaled(busy).await;
        } else {
            self.inner
                .replier
                .outbound()
                .react(msg, Reaction::Busy)
                .await;
        }
    }

    /// **Show presence**: only agent turns wait long enough to need a sign of life —
    /// "typing…" at once, kept up until the first reply, where the hint fades (or the
    /// returned guard is dropped). Replies the bridge answers itself go out at once,
    /// without it.
    async fn show_presence(&self, admitted: &Admitted<'_>) -> Option<TypingGuard> {
        let msg = admitted.msg;
        let outbound = self.inner.replier.outbound();
        let caps = outbound.capabilities(&msg.channel_name);
        if !admitted.is_chat() {
            return None;
        }
        if caps.is_some_and(|c| c.working_placeholder || c.typing_refresh.is_some()) {
            outbound.show_typing(&msg.reply(String::new(), false)).await;
        }
        let every = caps.and_then(|c| c.typing_refresh)?;
        Some(self.inner.replier.keep_typing(msg, every))
    }

    /// **Dispatch**: the command's answer or the agent run, in the journal entry's scope
    /// (and, in line, the ticket's settling scope); `None` when shutdown cancelled it.
    async fn dispatch_turn(
        &self,
        admitted: &Admitted<'_>,
        ticket: Option<&Ticket>,
        cancel: &CancellationToken,
    ) -> Option<Dispatched> {
        let msg = admitted.msg;
        tracing::debug!(
            text_len = msg.text.len(),
            files = msg.files.len(),
            "Handling a message."
        );
        let dispatched = admitted.journaled(self.dispatch(msg));
        // Told it waits, it is not told so again should its run meet a busy thread.
        let dispatched = run::told_it_waits(ticket.is_some_and(Ticket::told), dispatched);
        let dispatched = match ticket {
            Some(ticket) => Either::Left(ticket.settling().scope(dispatched)),
            None => Either::Right(dispatched),
        };
        tokio::select! {
            d = dispatched => {
                // Run or none (a command, a Gateway that is down), the turn's work is done:
                // a message behind it is not told that a request is still running.
                if let Some(ticket) = ticket {
                    ticket.settling().mark();
                }
                Some(d)
            }
            () = cancel.cancelled() => {
                tracing::warn!("Cancelled a message at shutdown.");
                None
            }
        }
    }

    /// A command is answered here, anything else becomes an agent run.
    pub(super) async fn dispatch(&self, msg: &InboundMessage) -> Dispatched {
        let answered = |disposition| Dispatched {
            disposition,
            agent_saw_it: false,
        };
        match msg.msg_type {
            MsgType::Command => answered(commands::handle(&self.inner, msg).await),
            MsgType::Chat => {
                if let Some(disposition) = commands::slash_skill(&self.inner, msg).await {
                    return answered(disposition);
                }
                let options = run::TurnOptions::default();
                let (disposition, start) =
                    run::chat_turn(&self.inner, msg, &msg.text, options).await;
                Dispatched {
                    disposition,
                    agent_saw_it: start == run::RunStart::Started,
                }
            }
        }
    }

    /// **Settle**: what became of the message (`None`: shutdown stopped it) decides its
    /// dedupe key, and the entry hears the turn ended. A journaled message stopped by
    /// shutdown stays journaled, its key kept: the next start finishes it. Otherwise the key
    /// goes, so the platform may redeliver.
    async fn settle(&self, admitted: &Admitted<'_>, disposition: Option<Disposition>) {
        match (disposition, &admitted.entry) {
            (Some(disposition), entry) => {
                // The key first: a platform retry may follow the final at once. Not an
                // entry's that was taken over: the replica that took it answers the message.
                if disposition == Disposition::Release {
                    let keys = match entry {
                        Some(entry) => entry.releasable(&admitted.keys),
                        None => &admitted.keys,
                    };
                    self.release(keys).await;
                }
                if let Some(entry) = entry {
                    entry.turn_ended().await;
                }
            }
            (None, Some(_)) => {}
            (None, None) => self.release(&admitted.keys).await,
        }
    }

    /// Gives back the question a message took, if it took one, as it will not run
    /// (`clarify.rs`).
    async fn give_back(&self, taken: Option<Taken>) {
        if let Some(taken) = taken {
            self.inner.clarifications.give_back(taken).await;
        }
    }

    /// Forgets `keys`, so a redelivery of their message is handled again.
    pub(crate) async fn release(&self, keys: &[DedupeKey]) {
        for key in keys {
            if let Err(error) = self.inner.store.dedupe_release(key).await {
                tracing::warn!(%error, "Releasing a dedupe key failed.");
            }
        }
    }
}

#[cfg(test)]
mod tests;
