//! Retrying the finals of a turn that did not land (issue 19), and how that ends (issue
//! 33): delivered (the entry goes), given up once the retry window is over (kept for an
//! operator), or left because the entry is no longer this process's (an operator dropped
//! it, or another replica took it over while this one could not renew). Also what an
//! operator and a drain do to the retries: the sweep that wakes the ones asked for, and
//! holding them all.
//!
//! Between two passes the retry waits with backoff, or until an operator asks to retry now
//! (the holder's sweep wakes it). Each pass counts one attempt (one that stopped at a
//! final that failed for now, the finals after it waiting for it, too); a pass cut short
//! by a drain or shutdown counts none.

use std::sync::Arc;
use std::time::Duration;

use im_bridge_channel::backoff::Backoff;
use im_bridge_channel::{ChannelError, MessageId, OutboundMessage};
use tokio::sync::Notify;

use super::{Entry, Journal, Shared, relock};
use crate::bus::{AfterShown, Hooks, Landed};
use crate::store::{GAVE_UP_KEPT, JournalRecord, JournalState, PendingFinal, unix_millis};
use crate::telemetry::names;

/// The first wait before a pending final is tried again; it doubles up to
/// [`RETRY_MAX_WAIT`].
const RETRY_FIRST_WAIT: Duration = Duration::from_secs(2);
/// The longest wait between two tries of a pending final.
const RETRY_MAX_WAIT: Duration = Duration::from_secs(300);

/// How a retry of pending finals ended.
#[derive(Clone, Copy, Debug)]
pub(super) enum Ended {
    /// Each landed, was refused for good, or waits for the chat's next message (held).
    Settled,
    /// The retry window is over.
    GaveUp,
    /// The entry is no longer this process's.
    Gone,
}

impl Journal {
    /// The journal's upkeep on the store besides renewing (`Store::journal_sweep`): wakes
    /// the retries an operator asked to run now, forgets entries given up longer than
    /// [`GAVE_UP_KEPT`] ago, and sets the gauge of entries given up.
    pub(crate) async fn sweep(&self) {
        let shared = &self.shared;
        let sweep = match shared
            .store
            .journal_sweep(&shared.holder, GAVE_UP_KEPT)
            .await
        {
            Ok(sweep) => sweep,
            Err(error) => {
                tracing::warn!(%error, "Sweeping the journal failed.");
                return;
            }
        };
        {
            let wakers = relock(&shared.wakers);
            for id in &sweep.due {
                if let Some(waker) = wakers.get(id) {
                    waker.notify_one();
                }
            }
        }
        metrics::gauge!(names::JOURNAL_GAVE_UP).set(sweep.gave_up as f64);
        if sweep.forgotten > 0 {
            tracing::info!(
                entries = sweep.forgotten,
                "Forgot deliveries that gave up longer ago than they are kept."
            );
        }
    }

    /// What an operator's retry notifies, so the upkeep runs at once ([`Journal::upkept`]).
    pub(crate) fn upkeep_handle(&self) -> Arc<Notify> {
        self.shared.upkeep.clone()
    }

    /// Resolves when an operator asked for the journal's upkeep now.
    pub(crate) async fn upkept(&self) {
        self.shared.upkeep.notified().await;
    }

    /// Holds the retries of pending finals for a drain (issue 33): none is tried again by
    /// this process, and none counts an attempt; [`Journal::shut_down`] then leaves them to
    /// the next one.
    pub(crate) fn hold(&self) {
        self.shared.stop.cancel();
    }
}

/// Gives entry `id` up with its `record`: kept for an operator, and counted once the store
/// took it. Not counted when the store refused it (the entry was removed or taken over
/// meanwhile: another replica's to finish) nor when the write failed: the entry then stays
/// pending in the store, held by this process until it stops, and whichever process takes
/// it up next gives it up again, and counts it then, once. An [`Entry`] this process works
/// on is given up with [`Entry::give_up`], which also stops renewals judging it.
pub(super) async fn give_up(shared: &Shared, id: &str, record: &JournalRecord) {
    match shared
        .store
        .journal_give_up(id, record, &shared.holder)
        .await
    {
        Ok(true) => metrics::counter!(names::JOURNAL_GIVEN_UP).increment(1),
        Ok(false) => tracing::debug!("A journal entry was removed or taken over before giving up."),
        Err(error) => tracing::warn!(
            %error,
            "Giving a journal entry up failed; it stays pending in the store, and is given up again when it is next taken up."
        ),
    }
}

impl Entry {
    /// Gives the entry up ([`give_up`]) with its record: renewals no longer judge it (this
    /// entry's registration only: a newer one of the same id stays judged).
    pub(super) async fn give_up(&self) {
        self.unhold();
        give_up(&self.0.shared, &self.0.id, &self.record()).await;
    }

    /// Retries this entry's pending finals in the background; see [`Entry::retry_finals`].
    pub(crate) fn retry_finals_later(&self) {
        let entry = self.clone();
        let shared = self.0.shared.clone();
        shared.retries.spawn(async move {
            tokio::select! {
                // Held (a drain) or stopped first: not even one more try.
                biased;
                () = entry.0.shared.stop.cancelled() => entry.forget_waker(),
                () = entry.retry_finals() => {}
            }
        });
    }

    /// Delivers the pending finals again with backoff until each landed or was refused for
    /// good (the entry goes, or waits for the chat's next message with what was held), the
    /// retry window is over (it is given up), or the entry is no longer this process's.
    async fn retry_finals(&self) {
        let wake = Arc::new(Notify::new());
        relock(&self.0.shared.wakers).insert(self.0.id.clone(), wake.clone());
        // What the channel's turn end waits for of this entry (its finals are struck off
        // as they land): their send keys.
        let keys = self.send_keys();
        let ended = self.retry_until_settled(&wake).await;
        self.forget_waker();
        self.leave_live();
        self.retry_ended(ended, &keys).await;
    }

    /// Finishes with the entry as its retry `ended`. A renewal runs on a task of its own
    /// and may mark the entry lost after the retry last looked (between a final's fate and
    /// here): taken over, it is the other replica's to finish and to tell the channel of,
    /// however the retry ended here. While the renewal clock lapsed, nobody can tell yet
    /// whether it was (the renewals fail), so that is waited for first: the next renewal
    /// that goes through judges the entry. Dropped by an operator meanwhile, what the retry
    /// did still stands (the finals it delivered were delivered).
    /// `keys`: the send keys of the finals the retry settled.
    pub(super) async fn retry_ended(&self, ended: Ended, keys: &[String]) {
        if !matches!(ended, Ended::Gone) && !self.lost() {
            self.0.shared.fence.holds_again().await;
        }
        let taken = self.lost() && self.lapsed();
        match ended {
            Ended::Settled | Ended::GaveUp if taken => self.leave_to_its_owner(true, keys).await,
            Ended::Settled if self.progress().settled_state() == Some(JournalState::Held) => {
                // Done with for now: what is left comes with the chat's next message.
                self.tell_settled(true, keys).await;
                self.wait_for_next_message().await;
            }
            Ended::Settled => {
                self.remove().await;
                self.tell_settled(true, keys).await;
            }
            Ended::GaveUp => {
                tracing::warn!("Gave up delivering a final after the retry window.");
                self.give_up().await;
                self.tell_settled(false, keys).await;
            }
            // Most likely taken over while this process could not renew its lease: the
            // replica that took it answers and tells the channel, so nothing is told from
            // here, and the end held back for this retry is let go.
            Ended::Gone if self.lapsed() => self.leave_to_its_owner(true, keys).await,
            Ended::Gone => {
                tracing::info!(
                    "A pending delivery was dropped or taken over; this process no longer retries it."
                );
                // Dropped, it will not come from here.
                self.tell_settled(false, keys).await;
            }
        }
    }

    async fn retry_until_settled(&self, wake: &Notify) -> Ended {
        let shared = &self.0.shared;
        let mut backoff = Backoff::new(RETRY_FIRST_WAIT, RETRY_MAX_WAIT, RETRY_FIRST_WAIT);
        let window = i64::try_from(shared.config.final_retry.as_millis()).unwrap_or(i64::MAX);
        loop {
            let finals: Vec<PendingFinal> = {
                let progress = self.progress();
                let finals = progress.record.finals.iter();
                finals.filter(|f| !f.held).cloned().collect()
            };
            if finals.is_empty() {
                return Ended::Settled;
            }
            // Not while another replica may hold it (`fence.rs`).
            if !self.still_ours().await {
                return Ended::Gone;
            }
            for pending in finals {
                let (landed, ours) = self.deliver_again(&pending).await;
                if !ours {
                    return Ended::Gone;
                }
                // The finals after one that failed for now wait for it: they come in order.
                if matches!(
                    landed,
                    Landed::Failed {
                        transient: true,
                        ..
                    }
                ) {
                    break;
                }
            }
            let done = {
                let mut progress = self.progress();
                progress.record.attempts = progress.record.attempts.saturating_add(1);
                progress.record.finals.iter().all(|f| f.held)
            };
            if done {
                return Ended::Settled;
            }
            if unix_millis().saturating_sub(self.0.retry_from_ms) >= window {
                let mut progress = self.progress();
                let channel = &progress.record.message.channel_name;
                let windowed = shared.outbound.reply_window(channel).is_some();
                if !progress.record.hold_instead_of_giving_up(windowed) {
                    return Ended::GaveUp;
                }
                return Ended::Settled;
            }
            if !self.save().await {
                return Ended::Gone;
            }
            tokio::select! {
                () = tokio::time::sleep(backoff.next_wait()) => {}
                () = wake.notified() => {
                    tracing::info!("Retrying a pending delivery now, as an operator asked.");
                }
            }
            // An operator may have dropped it meanwhile: then it is not delivered again.
            if !self.save().await {
                return Ended::Gone;
            }
        }
    }

    /// Tells the channel that the bridge is done with the message the retried finals
    /// (their send keys `keys`) answer (the entry's own, or the later one that carried
    /// them), now that they were delivered (`answered`) or not: it held that turn's end
    /// back (`Outbound::turn_ended`).
    async fn tell_settled(&self, answered: bool, keys: &[String]) {
        let record = self.record();
        let answers = record.carrier.as_ref().unwrap_or(&record.message);
        let outbound = &self.0.shared.outbound;
        outbound.retries_settled(answers, answered, keys).await;
    }

    /// The send keys of the entry's finals still on record.
    pub(super) fn send_keys(&self) -> Vec<String> {
        let progress = self.progress();
        let finals = progress.record.finals.iter();
        finals.filter_map(|f| f.hints.send_key.clone()).collect()
    }

    fn forget_waker(&self) {
        relock(&self.0.shared.wakers).remove(&self.0.id);
    }

    /// Publishes `pending` once more and waits for its fate: what became of it, and
    /// whether the entry is still this process's. It is struck off (or held) as soon as
    /// its fate is known, in the delivery's own hook: a shutdown that stops this retry
    /// while the lanes still deliver it must not leave it to be delivered again.
    async fn deliver_again(&self, pending: &PendingFinal) -> (Landed, bool) {
        let out = self.again(pending);
        let (tx, rx) = tokio::sync::oneshot::channel();
        let (entry, id) = (self.clone(), pending.id);
        let hook: AfterShown = Box::new(move |landed: Landed| {
            Box::pin(async move {
                let changed = entry.progress().settle_final(id, &landed);
                let ours = !changed || entry.save().await;
                let _ = tx.send((landed, ours && !entry.lost()));
            })
        });
        let hooks = Hooks {
            gate: Some(self.gate(id)),
            ..Hooks::after(Some(hook))
        };
        self.0.shared.outbound.publish_hooked(out, hooks).await;
        // Never run: the lanes were dropped at shutdown.
        rx.await.unwrap_or_else(|_| {
            let error = ChannelError::Stopped.to_string();
            let landed = Landed::Failed {
                transient: true,
                error,
            };
            (landed, true)
        })
    }

    /// `pending` as it is delivered again: a final that replaces a message unchanged (the
    /// same edit), another one under the line saying why it comes late when this process
    /// did not write it. That line is a lead note, not part of the text
    /// ([`DeliveryHints::lead_note`](im_bridge_channel::DeliveryHints::lead_note)): the
    /// final is split as in the attempt before the restart, so a message of it that landed
    /// then is dropped by the platform as a repeat of its key, not shown again shifted.
    pub(super) fn again(&self, pending: &PendingFinal) -> OutboundMessage {
        let late = match (&pending.late, &pending.finishes) {
            // A final that replaces a message goes out unchanged: the same edit again, a
            // no-op if the first one landed unacknowledged.
            (_, Some(_)) => None,
            // Delivered by a later process than the one that wrote it: say why it is late.
            (Some(late), None)
                if !pending.text.starts_with(late.as_str()) && self.late_line_for(pending.id) =>
            {
                Some(late.clone())
            }
            _ => None,
        };
        let mut out = self.reply(pending, pending.text.clone());
        out.hints.lead_note = late;
        if let Some(message) = &pending.finishes {
            out.hints.resumes = Some(MessageId::new(message.as_str()));
        }
        out
    }
}

#[cfg(test)]
pub(super) mod tests;
