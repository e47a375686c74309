//! Answers held for a chat's next message (issue 33): what a channel with a reply window
//! could not deliver because its source took no more replies.
//!
//! - A turn that **handed off** its answer records what it showed, written ahead with the
//!   hand-off (`Final::HandOff`); the rest of its final is then written into the entry as a held
//!   final, or, where the platform takes messages that answer no source, published as one
//!   and held only if refused ([`Entry::send_rest`]).
//! - Any final whose delivery meets a closed window (or spent replies) is held the same way
//!   (`Progress::settle_final`).
//! - An entry left with held finals only is saved [`JournalState::Held`]: the store indexes
//!   it by its chat, it is never retried nor given up on, and a restart leaves it in place.
//! - Every admitted message of a channel with a reply window first takes up what waits for
//!   its chat ([`Journal::carry_held`]): each held final goes out as a reply to that message,
//!   before the message's own answer (one delivery lane per chat keeps the order), opening
//!   with the line its final carried for this case. The entry then lives on as an ordinary
//!   pending final of that message, and is held again if that one's window closes too.

use im_bridge_channel::{InboundMessage, OutboundMessage};

use super::{Entry, Final, Journal, Note, Progress, remove};
use crate::bus::{AfterShown, Hooks, Landed};
use crate::store::{JournalState, Journaled, PendingFinal};
use crate::telemetry::names;

/// How long a turn's final waits for its hand-off's delivery to come to an end before it
/// cuts the rest from what the hand-off showed ([`Entry::handed_off_known`]).
const HAND_OFF_WAIT: std::time::Duration = std::time::Duration::from_secs(120);

impl Entry {
    /// What the turn showed when it handed its answer off, if it did.
    pub(crate) fn handed_off(&self) -> Option<String> {
        self.progress().record.handed_off.clone()
    }

    /// [`Entry::handed_off`] once the hand-off's first delivery came to an end (waiting at
    /// most [`HAND_OFF_WAIT`]): a hand-off refused for good showed nothing, and the rest
    /// must not be cut from it. Its delivery is ahead of the final in the chat's lane anyway.
    ///
    /// A hand-off that failed for now gives way to the final (`None`): it is not retried,
    /// and the final carries the whole answer. Cut from a hand-off still to be retried, the
    /// rest would lose the answer's beginning should the retry be refused for good, and
    /// come before it should the retry land after the rest.
    pub(crate) async fn handed_off_known(&self) -> Option<String> {
        let until = tokio::time::Instant::now() + HAND_OFF_WAIT;
        loop {
            let done = self.0.hand_off_done.notified();
            tokio::pin!(done);
            done.as_mut().enable();
            if self.progress().hand_off_in_flight.is_none() {
                break;
            }
            if tokio::time::timeout_at(until, done).await.is_err() {
                // Still on its way (a shutdown dropped it, a long wait): as recorded.
                return self.handed_off();
            }
        }
        let (shown, gave_way) = {
            let mut progress = self.progress();
            let gave_way = progress.hand_off_gives_way();
            (progress.record.handed_off.clone(), gave_way)
        };
        if let Some(gone) = gave_way {
            tracing::info!("A hand-off that failed for now gave way to the whole answer.");
            let msg = self.record().message;
            let key = gone.hints.send_key;
            self.0.shared.outbound.retry_superseded(&msg, key).await;
        }
        shown
    }

    /// Delivers `out`, the rest of a handed-off answer: published as a message that answers
    /// no source when `unsourced` (held if the platform refuses it), else written into the
    /// entry as held, for the chat's next message. `kind`: the answer, or a segment the run
    /// goes on after.
    pub(crate) async fn send_rest(&self, mut out: OutboundMessage, unsourced: bool, kind: Final) {
        if unsourced {
            out.thread_ts = None;
            out.source_created_at = None;
            let hooks = self.track_final(&mut out, "", true, kind).await;
            self.0.shared.outbound.publish_hooked(out, hooks).await;
            return;
        }
        {
            let mut progress = self.progress();
            progress.next_final += 1;
            let id = progress.next_final;
            let mut hints = out.hints;
            hints.send_key = Some(super::new_send_key());
            progress.record.finals.push(PendingFinal {
                id,
                text: out.text,
                metadata: out.metadata,
                hints,
                late: None,
                finishes: None,
                unsourced: false,
                held: true,
                part: kind != Final::Answer,
                hand_off: false,
            });
            progress.record.note(kind);
        }
        self.save().await;
    }

    /// `pending` as a reply with `text`: to the message that carries it now (the entry's
    /// own, or the later one a held entry was taken up by), or to none when unsourced.
    /// The carrier's metadata wins over what the final was written with: what a platform
    /// answers a message by (WeChat's `context_token`, WeCom's `req_id`, QQ's `msg_id`) is
    /// the carrier's, live, where the held final's is the spent or expired one it could
    /// not go out on.
    pub(super) fn reply(&self, pending: &PendingFinal, text: String) -> OutboundMessage {
        let progress = self.progress();
        let record = &progress.record;
        let mut out = record
            .carrier
            .as_ref()
            .unwrap_or(&record.message)
            .reply(text, true);
        let carried = std::mem::replace(&mut out.metadata, pending.metadata.clone());
        out.metadata.extend(carried);
        out.hints = pending.hints.clone();
        if pending.unsourced {
            out.thread_ts = None;
            out.source_created_at = None;
        }
        out
    }

    /// The entry's finals all wait for the chat's next message: saved so, for the store
    /// to find by its chat. The record's state says [`JournalState::Held`] already.
    pub(super) async fn wait_for_next_message(&self) {
        self.leave_live();
        // Any replica's next message for the chat may take it up: renewals no longer judge
        // it here.
        self.unhold();
        self.save().await;
        let (channel, finals) = {
            let progress = self.progress();
            let channel = progress.record.message.channel_name.clone();
            (channel, progress.record.finals.len())
        };
        tracing::info!(
            finals,
            "An answer waits for the chat's next message: its own took no more replies."
        );
        let channel = self.0.shared.outbound.channel_label(&channel);
        metrics::counter!(names::HANDOFFS, "channel" => channel, "step" => "held").increment(1);
    }
}

impl Progress {
    /// Records what became of final `id`: struck off when it landed or was refused for
    /// good, held for the chat's next message when its source takes no more replies (or,
    /// sent unsourced, the platform refused it), kept for a retry otherwise. Whether the
    /// record changed.
    pub(super) fn settle_final(&mut self, id: u32, landed: &Landed) -> bool {
        let Some(index) = self.record.finals.iter().position(|f| f.id == id) else {
            return false;
        };
        let unsourced = self.record.finals[index].unsourced;
        match landed {
            Landed::Failed {
                transient: true,
                error,
            } => {
                // Kept for a retry; why is saved with the entry (issue 33).
                self.record.note_error(error);
                false
            }
            Landed::Shown(_) => {
                self.record.finals.remove(index);
                true
            }
            Landed::Failed {
                transient: false, ..
            } if !unsourced => {
                let refused = self.record.finals.remove(index);
                if refused.hand_off {
                    // Never shown: the rest is the whole answer.
                    self.record.handed_off = None;
                }
                true
            }
            Landed::Failed { .. } | Landed::WindowClosed { .. } => {
                let pending = &mut self.record.finals[index];
                pending.held = true;
                pending.unsourced = false;
                if let Landed::WindowClosed { rest: Some(rest) } = landed {
                    // Its first messages were shown: only what they did not show waits,
                    // as the reader would have seen it, under the line saying it goes on.
                    pending.text.clone_from(rest);
                    pending.finishes = None;
                    pending.hints.literal = true;
                    if let Some(note) = &pending.hints.rest_note {
                        pending.hints.held_note = Some(note.clone());
                    }
                }
                true
            }
        }
    }

    /// Drops the hand-off's final when its delivery failed for now (it waits for a retry,
    /// not for the chat's next message), and what it was to show: `true` when it did
    /// (saved with the entry's next write, the final's; a crash before that delivers the
    /// hand-off again and follows the run, as if this never happened).
    pub(super) fn hand_off_gives_way(&mut self) -> Option<PendingFinal> {
        let finals = &mut self.record.finals;
        let index = finals.iter().position(|f| f.hand_off && !f.held)?;
        let gone = finals.remove(index);
        self.record.handed_off = None;
        Some(gone)
    }

    /// Where an entry whose turn ended and whose finals are all settled stands: `None`
    /// when nothing is left to deliver, [`JournalState::Held`] when what is left waits
    /// for the chat's next message, else [`JournalState::FinalPending`] (set in the record
    /// too).
    pub(super) fn settled_state(&mut self) -> Option<JournalState> {
        let finals = &self.record.finals;
        if finals.is_empty() {
            return None;
        }
        self.record.state = if finals.iter().all(|f| f.held) {
            JournalState::Held
        } else {
            JournalState::FinalPending
        };
        Some(self.record.state)
    }
}

impl Journal {
    /// Takes up the answers waiting for `msg`'s chat (whichever replica held them) and
    /// publishes them as `msg`'s first replies; see the module docs. A store failure leaves
    /// them waiting (logged).
    pub(crate) async fn carry_held(&self, msg: &InboundMessage) {
        let shared = &self.shared;
        if msg.thread_ts.is_none() {
            return;
        }
        let taken = match shared
            .store
            .journal_take_held(
                &msg.channel_name,
                &msg.chat_id,
                &shared.holder,
                shared.config.lease,
            )
            .await
        {
            Ok(taken) => taken,
            Err(error) => {
                tracing::warn!(%error, "Looking for answers held for this chat failed; they keep waiting.");
                return;
            }
        };
        for Journaled {
            id,
            retry_from_ms,
            mut record,
            ..
        } in taken
        {
            record.carrier = Some(msg.clone());
            record.state = JournalState::FinalPending;
            for pending in &mut record.finals {
                pending.held = false;
                // Said once, in the text, so a retry says it the same way.
                if let Some(note) = pending.hints.held_note.take() {
                    pending.text = format!("{note}\n\n{}", pending.text);
                }
            }
            let finals = record.finals.clone();
            if finals.is_empty() {
                remove(shared, &id).await;
                continue;
            }
            let entry = Entry::new(shared.clone(), id, retry_from_ms, record, false);
            {
                let mut progress = entry.progress();
                progress.ended = true;
                progress.outstanding = finals.len();
            }
            entry.save().await;
            tracing::info!(
                finals = finals.len(),
                "Sending an answer that waited for this chat's next message."
            );
            let channel = shared.outbound.channel_label(&msg.channel_name);
            metrics::counter!(names::HANDOFFS, "channel" => channel, "step" => "carried")
                .increment(1);
            for pending in finals {
                let out = entry.reply(&pending, pending.text.clone());
                let after = entry.clone();
                let hook: AfterShown = Box::new(move |landed: Landed| {
                    Box::pin(async move { after.final_landed(landed, pending.id).await })
                });
                let hooks = Hooks {
                    gate: Some(entry.gate(pending.id)),
                    ..Hooks::after(Some(hook))
                };
                shared.outbound.publish_hooked(out, hooks).await;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use im_bridge_channel::MessageId;

    use super::*;
    use crate::store::JournalRecord;

    fn pending(id: u32, unsourced: bool) -> PendingFinal {
        PendingFinal {
            unsourced,
            ..PendingFinal::new(id, format!("final {id}"))
        }
    }

    fn progress(finals: Vec<PendingFinal>) -> Progress {
        let message = InboundMessage::new("windowed", "group:g", "u", "question");
        let mut record = JournalRecord::admitted(message);
        record.finals = finals;
        Progress {
            record,
            ended: true,
            settled: false,
            outstanding: 0,
            resume: None,
            next_final: 9,
            open_stream: None,
            hand_off_in_flight: None,
            late_on: None,
            at_rest: false,
        }
    }

    fn failed(transient: bool) -> Landed {
        Landed::Failed {
            transient,
            error: "calling sendMessage failed".into(),
        }
    }

    fn held(progress: &Progress) -> Vec<(u32, bool, bool)> {
        let finals = &progress.record.finals;
        finals.iter().map(|f| (f.id, f.held, f.unsourced)).collect()
    }

    #[test]
    fn a_final_whose_source_takes_no_more_replies_waits_for_the_next_message() {
        let mut p = progress((1..=5).map(|id| pending(id, id == 5)).collect());
        let shown = Landed::Shown(Some(MessageId::new("m")));
        assert!(p.settle_final(1, &shown), "landed: struck off");
        assert!(!p.settle_final(2, &failed(true)), "kept for a retry");
        assert!(p.settle_final(3, &failed(false)), "refused: struck off");
        assert!(
            p.settle_final(4, &Landed::WindowClosed { rest: None }),
            "held"
        );
        // Sent unsourced and refused: held, and a later message carries it as a reply.
        assert!(p.settle_final(5, &failed(false)));
        assert!(
            !p.settle_final(42, &shown),
            "an unknown final changes nothing"
        );
        assert_eq!(
            held(&p),
            [(2, false, false), (4, true, false), (5, true, false)]
        );
        // One still to retry: the entry is a pending final.
        assert_eq!(p.settled_state(), Some(JournalState::FinalPending));
        assert!(p.settle_final(2, &Landed::WindowClosed { rest: None }));
        // Only held finals: the entry waits for its chat.
        assert_eq!(p.settled_state(), Some(JournalState::Held));
        assert_eq!(p.record.state, JournalState::Held);
        assert_eq!(p.record.held_chat(), Some(("windowed", "group:g")));
        assert_eq!(progress(Vec::new()).settled_state(), None, "nothing left");
    }

    /// A held final a later message carries answers with that message's metadata (its
    /// live context token), keeping only what the carrier lacks.
    #[tokio::test]
    async fn a_carried_final_answers_with_the_carriers_metadata() {
        use serde_json::json;
        let rig = super::super::retry::tests::rig(std::time::Duration::from_secs(60)).await;
        let mut msg = InboundMessage::new("flaky", "4242", "u1", "question");
        msg.metadata.insert("context_token".into(), json!("spent"));
        msg.metadata.insert("first_only".into(), json!("kept"));
        let super::super::Admission::New {
            entry: Some(entry), ..
        } = rig.journal.admit(&msg, None, true).await
        else {
            panic!("a chat message is journaled");
        };
        let pending = PendingFinal {
            metadata: msg.reply("answer", true).metadata,
            ..PendingFinal::new(1, "answer")
        };
        let mut later = InboundMessage::new("flaky", "4242", "u1", "later");
        later
            .metadata
            .insert("context_token".into(), json!("fresh"));
        assert_eq!(
            entry.reply(&pending, "answer".into()).metadata["context_token"],
            "spent",
            "not carried: its own message's"
        );
        entry.progress().record.carrier = Some(later);
        let out = entry.reply(&pending, "answer".into());
        assert_eq!(out.metadata["context_token"], "fresh");
        assert_eq!(out.metadata["first_only"], "kept");
    }

    #[test]
    fn a_final_cut_short_by_its_window_waits_with_only_what_was_not_shown() {
        let mut first = pending(1, false);
        first.finishes = Some("m1".into());
        first.hints.held_note = Some("(held)".into());
        first.hints.rest_note = Some("(continuing)".into());
        let mut p = progress(vec![first]);
        let rest = Landed::WindowClosed {
            rest: Some("the tail".into()),
        };
        assert!(p.settle_final(1, &rest));
        let f = &p.record.finals[0];
        assert_eq!((f.text.as_str(), f.held), ("the tail", true));
        assert_eq!(f.finishes, None, "a new message, not the edit shown");
        assert!(f.hints.literal, "as the reader would have seen it");
        assert_eq!(f.hints.held_note.as_deref(), Some("(continuing)"));
        assert_eq!(p.settled_state(), Some(JournalState::Held));
    }
}
