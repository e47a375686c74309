//! Finishing what a previous process left in the journal (issue 19; `journal.rs` explains
//! the entries).
//!
//! Each claimed entry is handled like a new message, in its conversation's line and in a
//! worker slot, except that nothing is admitted again and its replies are marked late:
//! - **admitted**: the message runs now, unless the entry names the thread it was about to
//!   start a run on (issue 27): that thread's runs are listed first, and one whose metadata
//!   names the entry is followed like a running one. A failed lookup (a Gateway without
//!   `GET …/runs` included) runs the message, as before;
//! - **running**: the same run is followed by its id (`run::follow`): joined while it still
//!   runs, its answer read from the thread when it already ended, and the reply finishes
//!   the platform message the previous process streamed into. A run the Gateway no longer
//!   knows (it restarted too) runs again;
//! - **final pending**: the finals that did not land are retried in the background, outside
//!   the line. Parts of an answer alone (a goal segment's final, a hand-off: the run went
//!   on) are not: they are sent again first in the turn, which then follows the run for
//!   the segments after them (`run::follow`; dropped when the Gateway no longer knows the
//!   run, and the message runs again).
//!
//! A `/goal from-chat` whose goal the Gateway had composed and saved records the objective
//! in its entry: wherever the message would run again, the command is not run again (no
//! second composition, no second "goal saved" line); its run starts on the recorded
//! objective and thread, after the same binding re-check.

use std::sync::Arc;

use im_bridge_channel::InboundMessage;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use super::journal::Entry;
use super::{Disposition, Manager, Place, Workers, commands, run};
use crate::gateway::{GatewayError, ThreadId};
use crate::store::JournalState;
use crate::telemetry::names;

impl Manager {
    /// Starts finishing each claimed entry in the order the manager took the messages
    /// ([`JournalRecord::arrived`](crate::store::JournalRecord::arrived)), so each
    /// conversation keeps its line's order: admission runs on a task per message, so the
    /// store's order is not always the line's, nor are the platform's timestamps (a burst
    /// of photos held a moment goes after a text sent just after it). Records from before
    /// the stamp keep the store's order, first.
    pub(super) fn spawn_recovered(&self, entries: Vec<Entry>, workers: &Workers) {
        let mut entries: Vec<_> = entries
            .into_iter()
            .map(|entry| {
                let record = entry.record();
                (entry, record)
            })
            .collect();
        entries.sort_by_key(|(_, record)| record.arrived);
        for (entry, record) in entries {
            let state = match record.state {
                JournalState::Admitted => "admitted",
                JournalState::Running => "running",
                JournalState::FinalPending => "final_pending",
                // Never claimed for recovery: it waits in the store for its chat.
                JournalState::Held => "held",
            };
            metrics::counter!(names::JOURNAL_RECOVERED, "state" => state).increment(1);
            // Finals written ahead mean the run had ended and its answer was on the way
            // (the crash came before the turn recorded its end): deliver exactly those.
            // Parts alone (a goal segment's final, a hand-off) are resent in the turn,
            // which then follows the run for the rest.
            if record.has_pending_finals() {
                entry.retry_finals_later();
                let manager = self.clone();
                workers.tasks.spawn(async move {
                    manager.inner.staging.release(&record.message).await;
                });
                continue;
            }
            let msg = record.message;
            let place = self.place_in_line(&msg);
            let manager = self.clone();
            let (cancel, slots) = (workers.cancel.clone(), workers.slots.clone());
            let span = tracing::info_span!("recovered", channel = %msg.channel_name, chat = %msg.chat_id, state);
            workers.tasks.spawn(
                async move { manager.resume(entry, msg, cancel, place, slots).await }
                    .instrument(span),
            );
        }
    }

    async fn resume(
        &self,
        entry: Entry,
        msg: InboundMessage,
        cancel: CancellationToken,
        place: Place,
        slots: Arc<Semaphore>,
    ) {
        let mut ticket = match place {
            Place::InLine(ticket) => Some(ticket),
            Place::Free | Place::Busy => None,
        };
        let turn = async {
            if let Some(ticket) = &mut ticket {
                ticket.wait_turn().await;
            }
            slots.acquire_owned().await.ok()
        };
        let permit = tokio::select! {
            permit = turn => permit,
            // Still journaled: the next start takes it up again.
            () = cancel.cancelled() => return,
        };
        // Like a message that waited its turn (`handle.rs`), it carries what the run before
        // it left for the chat's next message, first.
        if ticket.is_some() {
            self.carry_held(&msg).await;
        }
        let disposition = tokio::select! {
            d = entry.scope(self.resume_turn(&entry, &msg)) => d,
            () = cancel.cancelled() => {
                tracing::warn!("Cancelled a recovered message at shutdown.");
                return;
            }
        };
        if disposition == Disposition::Release {
            // None once the entry was taken over (`journal/fence.rs`).
            self.release(entry.releasable(&entry.recorded_keys())).await;
        }
        entry.turn_ended().await;
        self.inner.staging.release(&msg).await;
        // As a turn that was not interrupted does (`handle.rs`).
        self.inner.replier.outbound().turn_ended(&msg).await;
        if ticket.is_some() {
            drop(permit);
            self.rest_for_the_next(&entry, &msg, &cancel).await;
        }
        drop(ticket);
    }

    async fn resume_turn(&self, entry: &Entry, msg: &InboundMessage) -> Disposition {
        let record = entry.record();
        if let (JournalState::Running, Some(thread), Some(run_id)) =
            (record.state, &record.thread_id, &record.run_id)
            && let Some(disposition) =
                run::follow(&self.inner, msg, &ThreadId::new(thread.as_str()), run_id).await
        {
            return disposition;
        }
        if let Some(thread) = entry.maybe_started_on()
            && let Some(run_id) = self.started_run(entry, msg, &thread).await
        {
            let thread = ThreadId::new(thread.as_str());
            entry.run_started(thread.as_str(), &run_id, false).await;
            if let Some(disposition) = run::follow(&self.inner, msg, &thread, &run_id).await {
                return disposition;
            }
        }
        // `/goal from-chat` whose goal the Gateway had saved: the run starts on it.
        if let Some((thread, objective)) = entry.composed_goal() {
            tracing::info!("Starting the run on a goal composed before the restart.");
            let thread = ThreadId::new(thread);
            return commands::resume_from_chat(&self.inner, msg, &thread, &objective).await;
        }
        tracing::info!("Running a journaled message that had not started.");
        self.dispatch(msg).await.disposition
    }

    /// The run a previous process started for `entry` on `thread` before it could save the
    /// run id: the newest of the thread's runs whose metadata names the entry. `None` when
    /// there is none or the lookup failed (logged).
    async fn started_run(
        &self,
        entry: &Entry,
        msg: &InboundMessage,
        thread: &str,
    ) -> Option<String> {
        let owner = self.inner.owner(msg);
        let thread = ThreadId::new(thread);
        match self.inner.gateway.list_runs(Some(&owner), &thread).await {
            Ok(runs) => {
                let found = runs.into_iter().find(|run| entry.marked(&run.metadata));
                if found.is_some() {
                    tracing::info!(
                        "Found the run a previous process started before it could journal it."
                    );
                }
                found.map(|run| run.run_id)
            }
            Err(GatewayError::RouteMissing) => {
                tracing::info!(
                    "The Gateway cannot list a thread's runs; running a journaled message again."
                );
                None
            }
            Err(error) => {
                tracing::warn!(%error, "Looking up a journaled message's run failed; running it again.");
                None
            }
        }
    }
}
