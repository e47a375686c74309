//! A run that meets a busy thread (409) under `busy_policy: queue`: it waits for the run in
//! flight there, then starts again, instead of dropping a message the platform was told is
//! taken.
//!
//! The conversation's line (`manager/order.rs`) lives in one process, so it cannot hold back
//! what holds the thread elsewhere: another replica handling the same conversation (a
//! platform that hands one chat's messages to several replicas), DeerFlow's own UI, or the
//! run of a replica that died and goes on (`on_disconnect: continue`). The Gateway starts
//! runs with `multitask_strategy: reject`, so the start answers 409; the turn then finds the
//! thread's run in flight (`GET …/runs`, newest first), tells the user once that it waits
//! (the queued notice, as a message waiting in line is told; one told so in line is not
//! told again), and polls that run's status
//! until it ended (`join::until_ended`: a join would cancel, when dropped, a run another
//! client started with `on_disconnect: cancel`). A 409 with no run in flight to be found (the
//! run just ended, a checkpoint write) is tried again after a short pause.
//!
//! A run in flight whose `metadata` names the message's own journal entry is that
//! message's run, which the process before started (a restart whose lookup of it failed
//! runs the message again): the turn follows it instead of waiting to run the message
//! twice, under either policy.
//!
//! Bounds: the start is tried again at most [`MAX_STARTS_AGAIN`] times, a wait lasts at
//! most the Gateway client's wait timeout, and a thread whose runs cannot be listed is not
//! waited for; past any of them the turn gives the busy reply, as `reject` does at once.
//! Shutdown drops the waiting turn with the rest of its dispatch (`handle.rs`), leaving a
//! journaled message to the next start. Several messages waiting on different replicas
//! race for the thread when it frees: their order is not kept.

use std::time::Duration;

use im_bridge_channel::InboundMessage;
use im_bridge_channel::backoff::Backoff;
use tokio::task::futures::TaskLocalFuture;
use tokio::time::Instant;

use super::Source;
use crate::gateway::GatewayError;
use crate::i18n::msg as m;
use crate::manager::journal::Entry;
use crate::manager::{Inner, join};
use crate::policy::BusyPolicy;

/// How many times a turn starts its run again after a busy thread; the next 409 gets the
/// busy reply. Each time follows a wait for the run in flight, or a short pause when none
/// was found.
pub const MAX_STARTS_AGAIN: u32 = 3;

/// The pause before starting again when the thread answered 409 but listed no run in
/// flight (it just ended, or a checkpoint write holds the thread): a tenth of a second,
/// doubling (without jitter: the attempts are few), so the whole bound passes in under a
/// second.
const NONE_FOUND_PAUSE: Backoff = Backoff::new(
    Duration::from_millis(100),
    Duration::from_millis(400),
    Duration::ZERO,
);

/// One turn's waits for a busy thread.
pub(super) struct BusyWaits {
    /// Starts made again so far (at most [`MAX_STARTS_AGAIN`]).
    again: u32,
    /// The queued notice was shown by this wait (once per turn).
    noticed: bool,
    /// The message was told it waits in its conversation's line ([`told_it_waits`]).
    told_in_line: bool,
    /// The pause when no run in flight was found.
    pause: Backoff,
}

tokio::task_local! {
    /// Set around the dispatch of a message told it waits in its conversation's line
    /// ([`told_it_waits`]).
    static TOLD_IT_WAITS: bool;
}

/// Runs `dispatch`, a message's, noting whether the message was already told it waits
/// (the queued notice, in its conversation's line): a wait for a busy thread then tells it
/// nothing more where that notice is a message of its own (where it is a partial, it was
/// replaced by "on it" once its turn came, and is shown again).
pub(in crate::manager) fn told_it_waits<F: Future>(
    told: bool,
    dispatch: F,
) -> TaskLocalFuture<bool, F> {
    TOLD_IT_WAITS.scope(told, dispatch)
}

impl BusyWaits {
    pub(super) fn new() -> Self {
        Self {
            again: 0,
            noticed: false,
            told_in_line: TOLD_IT_WAITS.try_with(|told| *told).unwrap_or(false),
            pause: NONE_FOUND_PAUSE,
        }
    }

    /// After the Gateway refused to start the run with `error`: whether to start it again,
    /// once the thread's run in flight ended (see the module docs), or to follow that run
    /// when it is this message's own. A notice shown takes the place of the placeholder
    /// still due (`placeholder_at`); none is shown when the caller reports a run that did
    /// not start (`quiet`: `/goal from-chat` words the one reply itself).
    pub(super) async fn waited_out(
        &mut self,
        inner: &Inner,
        msg: &InboundMessage,
        Source { thread, owner }: Source<'_>,
        error: &GatewayError,
        placeholder_at: &mut Option<Instant>,
        quiet: bool,
    ) -> Waited {
        if *error != GatewayError::Busy || self.again >= MAX_STARTS_AGAIN {
            return Waited::GiveUp;
        }
        let queues = queues(inner, msg);
        // Only a recovered message's run may be in flight already: its own, started by the
        // process before. Under `reject`, it is the only run worth a look.
        let entry = Entry::current().filter(Entry::is_recovered);
        if !queues && entry.is_none() {
            return Waited::GiveUp;
        }
        self.again += 1;
        let in_flight = match inner.gateway.list_runs(owner, thread).await {
            Ok(runs) => runs.into_iter().find(|r| r.status.is_active()),
            Err(error) => {
                tracing::info!(%error, "Listing the busy thread's runs failed; not waiting.");
                return Waited::GiveUp;
            }
        };
        if let Some(run) = &in_flight
            && entry.is_some_and(|entry| entry.marked(&run.metadata))
        {
            tracing::info!("The thread is busy with this message's own run; following it.");
            return Waited::Own(run.run_id.clone());
        }
        if !queues {
            return Waited::GiveUp;
        }
        let Some(run) = in_flight else {
            tracing::info!("The thread is busy with no run listed; starting again shortly.");
            tokio::time::sleep(self.pause.next_wait()).await;
            return Waited::Again;
        };
        tracing::info!(
            again = self.again,
            "The thread is busy with another run; waiting for it."
        );
        let told = self.told_in_line && !inner.replier.shows_partials(msg);
        let notice = !self.noticed && !quiet && !told;
        if notice {
            self.noticed = true;
            *placeholder_at = None;
            inner.replier.notice(msg, m::RUN_QUEUED).await;
        }
        match join::until_ended(inner, owner, thread, &run.run_id).await {
            // A run the Gateway forgot is over too.
            Ok(_) | Err(GatewayError::NotFound) => {}
            Err(error) => {
                tracing::warn!(%error, "Waiting for the busy thread's run failed.");
                return Waited::GiveUp;
            }
        }
        // As after a wait in line (`handle.rs`, taking its place): where the notice is a
        // partial, the reply now says the agent is on it.
        if notice && inner.replier.shows_partials(msg) {
            inner.replier.turn_notice(msg).await;
        }
        Waited::Again
    }
}

/// What a turn does after a busy thread ([`BusyWaits::waited_out`]).
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Waited {
    /// Start the run again: the run in flight ended, or none was found.
    Again,
    /// Give the busy reply (or the reply `error` calls for): not a busy thread, the policy
    /// rejects, the bound was reached, or the wait failed.
    GiveUp,
    /// The run in flight is this message's own, run `0` (its `metadata` names the
    /// message's journal entry): the process before started it, and the restart could not
    /// look it up. It is followed, not run a second time.
    Own(String),
}

/// Whether `msg`'s channel queues a message meeting a busy conversation
/// (`busy_policy: queue`, the default).
fn queues(inner: &Inner, msg: &InboundMessage) -> bool {
    inner.config.queueing(&msg.channel_name).policy == BusyPolicy::Queue
}
