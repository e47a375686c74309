//! The retries of pending finals against a channel that fails while told to, on a real
//! SQLite store (issue 33): a final undeliverable for the whole retry window is given up,
//! kept with its attempts and last error; a drain holds the retries without counting an
//! attempt; an operator's retry wakes a waiting retry at once, and a drop stops it.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use im_bridge_channel::{
    Capabilities, Channel, ChannelError, ChannelExit, ChannelIdentity, ChannelResult,
    InboundMessage, InboundSink, MessageId, SendTarget, SentMessage,
};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::super::{Admission, Entry, Final, Journal, JournalConfig};
use crate::bus::Outbound;
use crate::store::{JournalState, Listed, SqliteStore, Store};

/// How long any wait here may take.
const DEADLINE: Duration = Duration::from_secs(10);

/// A final-only channel whose sends fail (transiently) while `failing`.
struct Flaky {
    identity: ChannelIdentity,
    failing: AtomicBool,
    /// The next send answers this `Retry-After` instead, once.
    retry_after: std::sync::Mutex<Option<Duration>>,
    sends: AtomicUsize,
    delivered: AtomicUsize,
    /// The turn ends it was told (with capabilities that ask for them): whether each
    /// said the message went unanswered.
    turn_ends: std::sync::Mutex<Vec<bool>>,
}

#[async_trait]
impl Channel for Flaky {
    fn identity(&self) -> &ChannelIdentity {
        &self.identity
    }
    async fn run(&self, _: InboundSink, _: CancellationToken) -> ChannelResult<ChannelExit> {
        Ok(ChannelExit::Stopped)
    }
    async fn send_text(&self, _: SendTarget<'_>, _: &str) -> ChannelResult<SentMessage> {
        let n = self.sends.fetch_add(1, Ordering::SeqCst);
        if let Some(wait) = self.retry_after.lock().unwrap().take() {
            return Err(ChannelError::RetryAfter(wait));
        }
        if self.failing.load(Ordering::SeqCst) {
            return Err(ChannelError::Transport(
                "calling sendMessage failed: 502".into(),
            ));
        }
        self.delivered.fetch_add(1, Ordering::SeqCst);
        Ok(SentMessage {
            id: MessageId::new(format!("m{n}")),
        })
    }
    async fn turn_ended(&self, to: SendTarget<'_>) -> ChannelResult {
        self.turn_ends.lock().unwrap().push(to.hints.unanswered);
        Ok(())
    }
}

/// A journal on a real SQLite store, publishing to a [`Flaky`] channel (also used by the
/// journal's other tests).
pub(in crate::manager::journal) struct Rig {
    pub(in crate::manager::journal) store: Arc<dyn Store>,
    channel: Arc<Flaky>,
    pub(in crate::manager::journal) outbound: Arc<Outbound>,
    pub(in crate::manager::journal) journal: Journal,
    _dir: Option<tempfile::TempDir>,
}

pub(in crate::manager::journal) async fn rig(final_retry: Duration) -> Rig {
    rig_with(final_retry, Capabilities::final_only(1000)).await
}

/// [`rig`] on a channel of `caps`.
async fn rig_with(final_retry: Duration, caps: Capabilities) -> Rig {
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn Store> =
        Arc::new(SqliteStore::open(&dir.path().join("s.db")).await.unwrap());
    let config = JournalConfig {
        lease: Duration::from_secs(15),
        final_retry,
    };
    let mut rig = rig_over(store, config, caps);
    rig._dir = Some(dir);
    rig
}

/// A journal of `config` on `store` (another rig's too: a second replica), publishing to
/// a [`Flaky`] channel of `caps` of its own.
pub(in crate::manager::journal) fn rig_over(
    store: Arc<dyn Store>,
    config: JournalConfig,
    caps: Capabilities,
) -> Rig {
    let channel = Arc::new(Flaky {
        identity: ChannelIdentity::always_connected("flaky", caps),
        failing: AtomicBool::new(true),
        retry_after: std::sync::Mutex::new(None),
        sends: AtomicUsize::new(0),
        delivered: AtomicUsize::new(0),
        turn_ends: std::sync::Mutex::new(Vec::new()),
    });
    let outbound = Arc::new(Outbound::new(&[channel.clone() as Arc<dyn Channel>]));
    let journal = Journal::new(store.clone(), outbound.clone(), config);
    Rig {
        store,
        channel,
        outbound,
        journal,
        _dir: None,
    }
}

impl Rig {
    /// Its channel's sends go through from now on.
    pub(in crate::manager::journal) fn deliver_all(&self) {
        self.channel.failing.store(false, Ordering::SeqCst);
    }

    /// Its channel's next send answers `Retry-After: wait` (once).
    pub(in crate::manager::journal) fn retry_after_next_send(&self, wait: Duration) {
        *self.channel.retry_after.lock().unwrap() = Some(wait);
    }

    /// How many sends its channel delivered.
    pub(in crate::manager::journal) fn delivered(&self) -> usize {
        self.channel.delivered.load(Ordering::SeqCst)
    }

    /// Its channel's sends fail (for now) from now on.
    pub(in crate::manager::journal) fn fail_all(&self) {
        self.channel.failing.store(true, Ordering::SeqCst);
    }

    /// The turn ends its channel was told so far: whether each said unanswered.
    pub(in crate::manager::journal) fn turn_ends(&self) -> Vec<bool> {
        self.channel.turn_ends.lock().unwrap().clone()
    }

    /// How many sends its channel was asked for (delivered or not).
    pub(in crate::manager::journal) fn sends(&self) -> usize {
        self.channel.sends.load(Ordering::SeqCst)
    }

    /// Admits a chat message, journaled; returns it with its entry.
    pub(in crate::manager::journal) async fn admit_one(&self) -> (InboundMessage, Entry) {
        let msg = InboundMessage::new("flaky", "4242", "u1", "question");
        let Admission::New {
            entry: Some(entry), ..
        } = self.journal.admit(&msg, None, true).await
        else {
            panic!("a chat message is journaled");
        };
        (msg, entry)
    }

    /// Admits a message and publishes its answer as the turn's one final, then ends the
    /// turn; returns the entry's id.
    async fn answer(&self) -> String {
        let (msg, entry) = self.admit_one().await;
        let mut out = msg.reply("the answer".to_owned(), true);
        let hooks = entry.track(&mut out, "", Final::Answer).await;
        self.outbound.publish_hooked(out, hooks).await;
        entry.turn_ended().await;
        entry.0.id.clone()
    }

    /// Waits until the journal's only entry satisfies `pick`; returns it.
    pub(in crate::manager::journal) async fn wait_entry(
        &self,
        what: &str,
        pick: impl Fn(&Listed) -> bool,
    ) -> Listed {
        let until = Instant::now() + DEADLINE;
        loop {
            let listed = self.store.journal_list(0, 10).await.unwrap();
            if let Some(entry) = listed.into_iter().find(|e| pick(e)) {
                return entry;
            }
            assert!(Instant::now() < until, "never saw {what}");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    pub(in crate::manager::journal) async fn wait_empty(&self) {
        let until = Instant::now() + DEADLINE;
        while !self.store.journal_list(0, 10).await.unwrap().is_empty() {
            assert!(Instant::now() < until, "the entry stayed");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

#[tokio::test]
async fn issue_33_a_final_undeliverable_for_the_retry_window_is_given_up_and_kept() {
    let rig = rig(Duration::ZERO).await;
    let id = rig.answer().await;
    let given_up = rig
        .wait_entry("the entry given up", |e| e.gave_up_ms.is_some())
        .await;
    assert_eq!(given_up.id, id);
    let record = &given_up.record;
    assert_eq!(record.state, JournalState::FinalPending);
    assert_eq!(record.finals.len(), 1, "the answer is kept for an operator");
    // The turn's own delivery and one retry, each counted, each the channel's.
    assert_eq!(record.attempts, 2);
    assert_eq!(rig.channel.sends.load(Ordering::SeqCst), 2);
    assert_eq!(
        record.last_error.as_deref(),
        Some("transport error: calling sendMessage failed: 502")
    );
    // Nobody works on it any more, this process included.
    assert!(rig.journal.claim(true).await.is_empty());
    rig.journal.shut_down(DEADLINE).await;
}

#[tokio::test]
async fn issue_33_a_drain_holds_the_retries_and_counts_no_attempt() {
    let rig = rig(Duration::from_secs(3600)).await;
    rig.journal.hold();
    rig.answer().await;
    let pending = rig
        .wait_entry("the pending final and why", |e| {
            e.record.state == JournalState::FinalPending && e.record.last_error.is_some()
        })
        .await;
    rig.journal.shut_down(DEADLINE).await;
    assert_eq!(
        rig.channel.sends.load(Ordering::SeqCst),
        1,
        "the turn's own delivery, then no retry"
    );
    let after = rig.store.journal_list(0, 10).await.unwrap();
    assert_eq!(after.len(), 1, "left for the next process");
    assert_eq!(
        after[0].record.attempts, 0,
        "a delivery cut short by the drain"
    );
    assert_eq!(after[0].record, pending.record);
}

#[tokio::test]
async fn issue_33_an_operators_retry_wakes_a_waiting_retry_at_once() {
    let rig = rig(Duration::from_secs(3600)).await;
    let id = rig.answer().await;
    // The first delivery, a retry at once, a second after 2 s: then the wait is 4 s.
    rig.wait_entry("three attempts", |e| e.record.attempts == 3)
        .await;
    rig.channel.failing.store(false, Ordering::SeqCst);
    let asked = Instant::now();
    assert_eq!(rig.store.journal_retry(&[id]).await.unwrap(), 1);
    rig.journal.sweep().await;
    rig.wait_empty().await;
    assert_eq!(rig.channel.delivered.load(Ordering::SeqCst), 1);
    assert!(
        asked.elapsed() < Duration::from_secs(3),
        "woken, not after the 4 s wait: {:?}",
        asked.elapsed()
    );
    rig.journal.shut_down(DEADLINE).await;
}

#[tokio::test]
async fn issue_33_a_dropped_delivery_is_not_tried_again() {
    let rig = rig(Duration::from_secs(3600)).await;
    let id = rig.answer().await;
    rig.wait_entry("two attempts", |e| e.record.attempts == 2)
        .await;
    assert_eq!(
        rig.store
            .journal_drop(std::slice::from_ref(&id))
            .await
            .unwrap(),
        1
    );
    let sends = rig.channel.sends.load(Ordering::SeqCst);
    // An operator's retry wakes the waiting retry, which finds the entry gone.
    rig.channel.failing.store(false, Ordering::SeqCst);
    let waker = super::super::relock(&rig.journal.shared.wakers)
        .get(&id)
        .cloned();
    waker.expect("the retry waits").notify_one();
    let until = Instant::now() + DEADLINE;
    while super::super::relock(&rig.journal.shared.wakers).contains_key(&id) {
        assert!(Instant::now() < until, "the retry went on");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    rig.journal.shut_down(DEADLINE).await;
    assert_eq!(rig.channel.sends.load(Ordering::SeqCst), sends);
    assert!(rig.store.journal_list(0, 10).await.unwrap().is_empty());
}

#[tokio::test]
async fn another_run_forgets_what_the_lost_one_sent() {
    let rig = rig(Duration::from_secs(60)).await;
    let msg = InboundMessage::new("flaky", "4242", "u1", "question");
    let Admission::New {
        entry: Some(entry), ..
    } = rig.journal.admit(&msg, None, true).await
    else {
        panic!("a chat message is journaled");
    };
    entry.run_started("t1", "r1", false).await;
    let mut shown = msg.reply("so far".to_owned(), true);
    let _hooks = entry
        .track(&mut shown, "", Final::HandOff("so far".to_owned()))
        .await;
    let mut segment = msg.reply("first".to_owned(), true);
    let _hooks = entry.track(&mut segment, "", Final::Segment).await;
    let record = entry.record();
    assert_eq!(record.handed_off.as_deref(), Some("so far"));
    assert_eq!(record.segments_sent, 1);
    assert!(record.finals.iter().all(|f| f.part) && record.finals[0].hand_off);
    assert!(!record.has_pending_finals(), "parts alone: the run goes on");
    // The same run again (a restart that found it): nothing is forgotten.
    entry.run_started("t1", "r1", false).await;
    assert_eq!(entry.record().segments_sent, 1);
    // Another run (the Gateway lost the first): what the lost one sent is not this one's.
    entry.run_started("t1", "r2", false).await;
    let record = entry.record();
    assert_eq!((record.handed_off, record.segments_sent), (None, 0));
}

/// An answer held for its chat, or carried by a later message, is never given up: a
/// restart past its retry window holds it for the chat's next message again, and one whose
/// holder died between taking it up and saving it is found by its chat again.
#[tokio::test]
async fn a_held_or_carried_answer_past_its_window_waits_for_the_chat_again() {
    use crate::store::{JournalRecord, PendingFinal};
    use im_bridge_channel::{LateReplies, ReplyWindow};
    let window = ReplyWindow {
        group: Duration::from_secs(300),
        private: Duration::from_secs(3600),
        max_replies_per_source: 5,
        late: LateReplies::NextMessage,
        repeats_shown_once: true,
    };
    let caps = Capabilities {
        reply_window: Some(window),
        ..Capabilities::final_only(1000)
    };
    let rig = rig_with(Duration::ZERO, caps).await;
    let msg = InboundMessage::new("flaky", "4242", "u1", "question");
    let carried = |id: u32| {
        let mut record = JournalRecord::admitted(msg.clone());
        record.state = JournalState::FinalPending;
        record.carrier = Some(InboundMessage::new("flaky", "4242", "u2", "later"));
        record
            .finals
            .push(PendingFinal::new(id, format!("answer {id}")));
        record
    };
    let mut taken = JournalRecord::admitted(msg.clone());
    taken.state = JournalState::Held;
    let lease = Duration::ZERO;
    let admit = |id: &'static str, record: JournalRecord| {
        let store = rig.store.clone();
        async move {
            let admitted = store.journal_admit(&[], lease, id, &record, "dead", lease);
            assert!(admitted.await.unwrap().is_some());
        }
    };
    admit("carried", carried(1)).await;
    // Taken up by a process that died before saving it as the later message's: in the
    // store it reads held, but no chat index names it.
    admit("taken", taken).await;
    assert!(rig.journal.claim(true).await.is_empty(), "nothing to retry");
    let listed = rig.store.journal_list(0, 10).await.unwrap();
    assert!(listed.iter().all(|e| e.gave_up_ms.is_none()), "{listed:?}");
    let held = rig
        .store
        .journal_take_held("flaky", &msg.chat_id, "next", Duration::from_secs(15))
        .await
        .unwrap();
    let mut ids: Vec<&str> = held.iter().map(|h| h.id.as_str()).collect();
    ids.sort_unstable();
    assert_eq!(ids, ["carried", "taken"]);
    rig.journal.shut_down(DEADLINE).await;
}
