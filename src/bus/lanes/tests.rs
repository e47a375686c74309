//! Lanes over a channel whose writes to the chat `slow` wait for a gate the test opens, so
//! a test sees what happens while a reply waits for its chat's budget.

use std::sync::Mutex as StdMutex;
use std::time::Duration;

use async_trait::async_trait;
use futures_util::FutureExt;
use im_bridge_channel::{
    Capabilities, Channel, ChannelError, ChannelExit, ChannelIdentity, ChannelResult,
    InboundMessage, InboundSink, SendTarget, SentMessage, UpdateMode,
};
use tokio::sync::{Notify, oneshot};
use tokio_util::sync::CancellationToken;

use super::*;

const DEADLINE: Duration = Duration::from_secs(10);

/// Records every write as `(chat, text)`; writes to `slow` first take a permit of `gate`.
struct Gated {
    identity: ChannelIdentity,
    gate: Semaphore,
    writes: StdMutex<Vec<(String, String)>>,
    wrote: Notify,
}

impl Gated {
    fn new() -> Arc<Self> {
        let caps = Capabilities {
            updates: UpdateMode::EditInPlace,
            ..Capabilities::final_only(4096)
        };
        Arc::new(Self {
            identity: ChannelIdentity::always_connected("gated", caps),
            gate: Semaphore::new(0),
            writes: StdMutex::new(Vec::new()),
            wrote: Notify::new(),
        })
    }

    async fn write(&self, to: SendTarget<'_>, text: &str) {
        if to.chat_id.as_str() == "slow" {
            self.gate.acquire().await.unwrap().forget();
        }
        self.writes
            .lock()
            .unwrap()
            .push((to.chat_id.to_string(), text.to_owned()));
        self.wrote.notify_waiters();
    }

    fn writes_to(&self, chat: &str) -> Vec<String> {
        self.writes
            .lock()
            .unwrap()
            .iter()
            .filter(|(c, _)| c == chat)
            .map(|(_, t)| t.clone())
            .collect()
    }

    /// Waits until `chat` saw `n` writes, and returns them.
    async fn wait_writes(&self, chat: &str, n: usize) -> Vec<String> {
        tokio::time::timeout(DEADLINE, async {
            loop {
                let wrote = self.wrote.notified();
                let writes = self.writes_to(chat);
                if writes.len() >= n {
                    return writes;
                }
                wrote.await;
            }
        })
        .await
        .unwrap_or_else(|_| panic!("{chat} saw {:?}, not {n} writes", self.writes_to(chat)))
    }
}

#[async_trait]
impl Channel for Gated {
    fn identity(&self) -> &ChannelIdentity {
        &self.identity
    }

    async fn run(&self, _: InboundSink, _: CancellationToken) -> ChannelResult<ChannelExit> {
        Ok(ChannelExit::Stopped)
    }

    async fn send_text(&self, to: SendTarget<'_>, text: &str) -> ChannelResult<SentMessage> {
        self.write(to, text).await;
        Ok(SentMessage {
            id: MessageId::new(format!("shown-{text}")),
        })
    }

    async fn edit_text(&self, to: SendTarget<'_>, _: &MessageId, text: &str) -> ChannelResult {
        self.write(to, text).await;
        Ok(())
    }

    async fn finish_stream(&self, to: SendTarget<'_>, _: &MessageId, text: &str) -> ChannelResult {
        self.write(to, text).await;
        Ok(())
    }
}

fn setup(max_pending: usize) -> (Arc<Gated>, Arc<Delivery>, Lanes) {
    let channel = Gated::new();
    let delivery = Arc::new(Delivery::new(channel.clone()));
    (channel, delivery, Lanes::new(max_pending))
}

/// A reply in `chat` to the message `source`.
fn reply(chat: &str, source: &str, text: &str, is_final: bool) -> OutboundMessage {
    let mut inbound = InboundMessage::new("gated", chat, "u1", "hi");
    inbound.thread_ts = Some(MessageId::new(source));
    inbound.reply(text, is_final)
}

#[tokio::test]
async fn a_reply_waiting_in_its_chat_holds_neither_the_publisher_nor_other_chats() {
    let (channel, delivery, lanes) = setup(16);
    // Each push returns at once although the slow chat's write cannot go yet.
    lanes
        .push(
            "gated",
            &delivery,
            reply("slow", "s1", "late", true),
            Hooks::default(),
            Job::Reply,
        )
        .now_or_never()
        .expect("publishing waits for nobody's budget");
    lanes
        .push(
            "gated",
            &delivery,
            reply("fast", "f1", "quick", true),
            Hooks::default(),
            Job::Reply,
        )
        .now_or_never()
        .expect("publishing waits for nobody's budget");
    assert_eq!(channel.wait_writes("fast", 1).await, ["quick"]);
    assert!(channel.writes_to("slow").is_empty());
    assert_eq!(lanes.pending(), 1, "only the slow chat's reply still waits");

    channel.gate.add_permits(1);
    assert_eq!(channel.wait_writes("slow", 1).await, ["late"]);
    assert!(lanes.flush(DEADLINE).await);
    assert_eq!(lanes.pending(), 0);
}

#[tokio::test]
async fn a_chat_reads_its_replies_in_the_order_they_were_published() {
    let (channel, delivery, lanes) = setup(16);
    for (i, text) in ["one", "two", "three", "four"].into_iter().enumerate() {
        let source = format!("s{i}");
        lanes
            .push(
                "gated",
                &delivery,
                reply("slow", &source, text, true),
                Hooks::default(),
                Job::Reply,
            )
            .await;
    }
    channel.gate.add_permits(4);
    assert_eq!(
        channel.wait_writes("slow", 4).await,
        ["one", "two", "three", "four"]
    );
}

#[tokio::test]
async fn partials_of_one_reply_fold_into_one_while_the_lane_waits() {
    let (channel, delivery, lanes) = setup(16);
    lanes
        .push(
            "gated",
            &delivery,
            reply("slow", "s1", "first answer", true),
            Hooks::default(),
            Job::Reply,
        )
        .await;
    for text in ["Sec", "Second", "Second ans"] {
        lanes
            .push(
                "gated",
                &delivery,
                reply("slow", "s2", text, false),
                Hooks::default(),
                Job::Reply,
            )
            .await;
    }
    assert_eq!(
        lanes.pending(),
        2,
        "the final being delivered and one partial"
    );
    channel.gate.add_permits(2);
    assert_eq!(
        channel.wait_writes("slow", 2).await,
        ["first answer", "Second ans"],
        "the newest partial only"
    );
}

#[tokio::test]
async fn a_final_overtakes_its_replys_queued_partial_but_never_the_reverse() {
    let (channel, delivery, lanes) = setup(16);
    lanes
        .push(
            "gated",
            &delivery,
            reply("slow", "s0", "hold", true),
            Hooks::default(),
            Job::Reply,
        )
        .await;
    lanes
        .push(
            "gated",
            &delivery,
            reply("slow", "s1", "Hel", false),
            Hooks::default(),
            Job::Reply,
        )
        .await;
    // The final says all the queued partial did: one write for the whole reply.
    lanes
        .push(
            "gated",
            &delivery,
            reply("slow", "s1", "Hello", true),
            Hooks::default(),
            Job::Reply,
        )
        .await;
    assert_eq!(lanes.pending(), 2);
    // A partial after its final opens no stream of a reply that already ended: it is
    // queued behind the final, never folded into it.
    lanes
        .push(
            "gated",
            &delivery,
            reply("slow", "s1", "late partial", false),
            Hooks::default(),
            Job::Reply,
        )
        .await;
    assert_eq!(lanes.pending(), 3);
    channel.gate.add_permits(3);
    let writes = channel.wait_writes("slow", 2).await;
    assert_eq!(writes[..2], ["hold", "Hello"]);
}

#[tokio::test]
async fn at_the_bound_publishing_waits_for_room() {
    let (channel, delivery, lanes) = setup(2);
    lanes
        .push(
            "gated",
            &delivery,
            reply("slow", "s1", "a", true),
            Hooks::default(),
            Job::Reply,
        )
        .await;
    lanes
        .push(
            "gated",
            &delivery,
            reply("slow", "s2", "b", true),
            Hooks::default(),
            Job::Reply,
        )
        .await;
    let mut third = Box::pin(lanes.push(
        "gated",
        &delivery,
        reply("slow", "s3", "c", true),
        Hooks::default(),
        Job::Reply,
    ));
    assert!(
        (&mut third).now_or_never().is_none(),
        "two replies already wait: the third must wait for room"
    );
    channel.gate.add_permits(1);
    tokio::time::timeout(DEADLINE, third)
        .await
        .expect("room came back when the first reply landed");
    channel.gate.add_permits(2);
    assert_eq!(channel.wait_writes("slow", 3).await, ["a", "b", "c"]);
}

#[tokio::test]
async fn the_hook_hears_which_message_shows_the_final() {
    let (channel, delivery, lanes) = setup(16);
    let (tx, rx) = oneshot::channel();
    let hook: AfterShown = Box::new(move |shown| {
        Box::pin(async move {
            let _ = tx.send(shown);
        })
    });
    lanes
        .push(
            "gated",
            &delivery,
            reply("slow", "s1", "answer", true),
            Hooks::after(Some(hook)),
            Job::Reply,
        )
        .await;
    channel.gate.add_permits(1);
    let shown = tokio::time::timeout(DEADLINE, rx).await.unwrap().unwrap();
    assert_eq!(shown, Landed::Shown(Some(MessageId::new("shown-answer"))));
}

#[tokio::test(start_paused = true)]
async fn flush_gives_up_at_its_bound_and_says_so() {
    let (channel, delivery, lanes) = setup(16);
    lanes
        .push(
            "gated",
            &delivery,
            reply("slow", "s1", "stuck", true),
            Hooks::default(),
            Job::Reply,
        )
        .await;
    assert!(!lanes.flush(Duration::from_secs(5)).await);
    assert_eq!(lanes.pending(), 1);
    // The lane goes on after a flush that gave up; a later flush sees it through.
    channel.gate.add_permits(1);
    assert!(lanes.flush(Duration::from_secs(5)).await);
    assert_eq!(channel.writes_to("slow"), ["stuck"]);
}

#[tokio::test]
async fn a_final_folded_into_a_partial_that_stays_last_stays_last_too() {
    let (channel, delivery, lanes) = setup(16);
    let push = |msg: OutboundMessage, hooks| lanes.push("gated", &delivery, msg, hooks, Job::Reply);
    // The second message's notice is shown before anything of the first answer.
    push(reply("slow", "s2", "waiting", false), Hooks::default()).await;
    channel.gate.add_permits(1);
    assert_eq!(channel.wait_writes("slow", 1).await, ["waiting"]);
    // The first answer waits for its chat; meanwhile the second's turn begins and ends.
    push(reply("slow", "s1", "first answer", true), Hooks::default()).await;
    let mut turn = reply("slow", "s2", "thinking", false);
    turn.hints.stays_last = true;
    push(turn, Hooks::default()).await;
    let (tx, rx) = oneshot::channel();
    let hook: AfterShown = Box::new(move |shown| {
        Box::pin(async move {
            let _ = tx.send(shown);
        })
    });
    push(
        reply("slow", "s2", "second answer", true),
        Hooks::after(Some(hook)),
    )
    .await;
    assert_eq!(lanes.pending(), 2, "the final took the partial's place");
    channel.gate.add_permits(2);
    // The second answer is a message below the first, not the notice's message above it.
    let shown = tokio::time::timeout(DEADLINE, rx).await.unwrap().unwrap();
    assert_eq!(
        shown,
        Landed::Shown(Some(MessageId::new("shown-second answer")))
    );
    assert_eq!(
        channel.writes_to("slow"),
        ["waiting", "first answer", "second answer"]
    );
}

/// Refuses every reply with what `error` says for its text (for good, unless transient);
/// asks to hear of turns' ends, which it records with whether the turn went unanswered.
struct Refusing {
    identity: ChannelIdentity,
    error: fn(&str) -> ChannelError,
    ended: StdMutex<Vec<bool>>,
}

impl Refusing {
    /// The channel and its delivery engine.
    fn start(error: fn(&str) -> ChannelError) -> (Arc<Self>, Arc<Delivery>) {
        let caps = Capabilities {
            turn_ends: true,
            ..Capabilities::final_only(4096)
        };
        let channel = Arc::new(Refusing {
            identity: ChannelIdentity::always_connected("refusing", caps),
            error,
            ended: StdMutex::new(Vec::new()),
        });
        let delivery = Arc::new(Delivery::new(channel.clone()));
        (channel, delivery)
    }
}

#[async_trait]
impl Channel for Refusing {
    fn identity(&self) -> &ChannelIdentity {
        &self.identity
    }

    async fn run(&self, _: InboundSink, _: CancellationToken) -> ChannelResult<ChannelExit> {
        Ok(ChannelExit::Stopped)
    }

    async fn send_text(&self, _: SendTarget<'_>, text: &str) -> ChannelResult<SentMessage> {
        Err((self.error)(text))
    }

    async fn turn_ended(&self, to: SendTarget<'_>) -> ChannelResult {
        self.ended.lock().unwrap().push(to.hints.unanswered);
        Ok(())
    }
}

#[tokio::test]
async fn a_turn_whose_answer_was_refused_ends_unanswered_and_the_record_stays_bounded() {
    let (channel, delivery) = Refusing::start(|_| ChannelError::Unsupported("refused"));
    let lanes = Lanes::new(16);
    let marker = |source: &str| reply("c1", source, "", true);
    lanes
        .push(
            "refusing",
            &delivery,
            reply("c1", "s1", "lost", true),
            Hooks::default(),
            Job::Reply,
        )
        .await;
    lanes
        .push(
            "refusing",
            &delivery,
            marker("s1"),
            Hooks::default(),
            Job::TurnEnd,
        )
        .await;
    // A turn with no final refused ends answered.
    lanes
        .push(
            "refusing",
            &delivery,
            marker("s2"),
            Hooks::default(),
            Job::TurnEnd,
        )
        .await;
    assert!(lanes.flush(DEADLINE).await);
    assert_eq!(*channel.ended.lock().unwrap(), [true, false]);
    assert!(lanes.shared.fates().is_empty(), "told, then forgotten");
    // Refused finals whose turn's end never comes are forgotten at the bound.
    for n in 0..MAX_UNANSWERED + 5 {
        let source = format!("r{n}");
        lanes
            .push(
                "refusing",
                &delivery,
                reply("c1", &source, "lost", true),
                Hooks::default(),
                Job::Reply,
            )
            .await;
    }
    assert!(lanes.flush(DEADLINE).await);
    assert!(lanes.shared.fates().len() <= MAX_UNANSWERED);
}

#[tokio::test]
async fn a_turn_whose_answer_waits_for_a_retry_ends_once_the_retry_settled() {
    // "lost" is refused for good, anything else fails for now.
    let (channel, delivery) = Refusing::start(|text| match text {
        "lost" => ChannelError::Unsupported("refused"),
        _ => ChannelError::Transport("down".into()),
    });
    let lanes = Lanes::new(16);
    let push = |msg, job| lanes.push("refusing", &delivery, msg, Hooks::default(), job);
    let marker = |source: &str| reply("c1", source, "", true);
    // The journal wrote this final ahead (it carries a send key): it retries it.
    let retried = |source: &str| {
        let mut msg = reply("c1", source, "later", true);
        msg.hints.send_key = Some(format!("key-{source}"));
        msg
    };
    push(retried("s1"), Job::Reply).await;
    push(marker("s1"), Job::TurnEnd).await;
    // A final refused for good: unanswered.
    push(reply("c1", "s2", "lost", true), Job::Reply).await;
    push(marker("s2"), Job::TurnEnd).await;
    // A final that failed for now and that nothing retries (a notice, a command's reply)
    // may not have been the answer: it changes nothing.
    push(reply("c1", "s5", "not retried", true), Job::Reply).await;
    push(marker("s5"), Job::TurnEnd).await;
    assert!(lanes.flush(DEADLINE).await);
    assert_eq!(
        *channel.ended.lock().unwrap(),
        [true, false],
        "s1's end waits"
    );
    // Its retry landed, or gave up.
    push(marker("s1"), settled(true, &["key-s1"])).await;
    push(retried("s3"), Job::Reply).await;
    push(marker("s3"), Job::TurnEnd).await;
    push(marker("s3"), settled(false, &["key-s3"])).await;
    assert!(lanes.flush(DEADLINE).await);
    assert_eq!(*channel.ended.lock().unwrap(), [true, false, false, true]);
    assert!(lanes.shared.fates().is_empty(), "told, then forgotten");
    // A retry that settles while the turn goes on (a later message carried the final, and
    // runs): the turn's own end tells, once.
    push(retried("s4"), Job::Reply).await;
    push(marker("s4"), settled(true, &["key-s4"])).await;
    assert!(lanes.flush(DEADLINE).await);
    assert_eq!(channel.ended.lock().unwrap().len(), 4, "the turn goes on");
    push(marker("s4"), Job::TurnEnd).await;
    assert!(lanes.flush(DEADLINE).await);
    assert_eq!(channel.ended.lock().unwrap()[4..], [false]);
    assert!(lanes.shared.fates().is_empty());
    // At the bound, refusals whose end never came are forgotten before an end held back.
    push(retried("held"), Job::Reply).await;
    for n in 0..MAX_UNANSWERED + 5 {
        push(reply("c1", &format!("r{n}"), "lost", true), Job::Reply).await;
    }
    assert!(lanes.flush(DEADLINE).await);
    let fates = lanes.shared.fates();
    assert!(fates.len() <= MAX_UNANSWERED);
    let held = (
        ("refusing", ChatId::new("c1")),
        Some(MessageId::new("held")),
    );
    assert!(
        fates
            .get(&held)
            .is_some_and(|fate| !fate.retried.is_empty())
    );
}

#[tokio::test]
async fn a_retried_final_that_gave_way_to_a_later_one_holds_the_end_back_no_more() {
    let (channel, delivery) = Refusing::start(|_| ChannelError::Transport("down".into()));
    let lanes = Lanes::new(16);
    let push = |msg, job| lanes.push("refusing", &delivery, msg, Hooks::default(), job);
    let marker = |source: &str| reply("c1", source, "", true);
    let retried = |source: &str| {
        let mut msg = reply("c1", source, "so far", true);
        msg.hints.send_key = Some(format!("key-{source}"));
        msg
    };
    // A hand-off failed for now, and the answer took its place before the turn ended.
    push(retried("s1"), Job::Reply).await;
    push(marker("s1"), superseded("s1")).await;
    push(marker("s1"), Job::TurnEnd).await;
    assert!(lanes.flush(DEADLINE).await);
    assert_eq!(*channel.ended.lock().unwrap(), [false]);
    // The end came first: told once the retry gave way.
    push(retried("s2"), Job::Reply).await;
    push(marker("s2"), Job::TurnEnd).await;
    assert!(lanes.flush(DEADLINE).await);
    assert_eq!(channel.ended.lock().unwrap().len(), 1, "s2's end waits");
    push(marker("s2"), superseded("s2")).await;
    assert!(lanes.flush(DEADLINE).await);
    assert_eq!(*channel.ended.lock().unwrap(), [false, false]);
    // Nothing held back: nothing to tell before the turn's end.
    push(marker("s3"), superseded("s3")).await;
    assert!(lanes.flush(DEADLINE).await);
    assert_eq!(channel.ended.lock().unwrap().len(), 2);
    assert!(lanes.shared.fates().is_empty());
    // Two finals wait for retries, one gives way: the end still waits for the other's.
    let mut answer = retried("s4");
    answer.hints.send_key = Some("key-s4-answer".into());
    push(retried("s4"), Job::Reply).await;
    push(answer, Job::Reply).await;
    push(marker("s4"), superseded("s4")).await;
    push(marker("s4"), Job::TurnEnd).await;
    assert!(lanes.flush(DEADLINE).await);
    assert_eq!(channel.ended.lock().unwrap().len(), 2, "s4's end waits");
    push(marker("s4"), settled(true, &["key-s4-answer"])).await;
    assert!(lanes.flush(DEADLINE).await);
    assert_eq!(*channel.ended.lock().unwrap(), [false, false, false]);
    assert!(lanes.shared.fates().is_empty());
}

#[tokio::test]
async fn past_the_keys_it_tells_apart_an_end_waits_for_the_retries_to_settle() {
    let (channel, delivery) = Refusing::start(|_| ChannelError::Transport("down".into()));
    let lanes = Lanes::new(64);
    let push = |msg, job| lanes.push("refusing", &delivery, msg, Hooks::default(), job);
    let marker = reply("c1", "s1", "", true);
    for n in 0..=MAX_RETRIED_KEYS {
        let mut msg = reply("c1", "s1", "so far", true);
        msg.hints.send_key = Some(format!("key-{n}"));
        push(msg, Job::Reply).await;
    }
    push(marker.clone(), Job::TurnEnd).await;
    // Every final it told apart gave way; the one past them did not.
    for n in 0..MAX_RETRIED_KEYS {
        let key = Some(format!("key-{n}"));
        push(marker.clone(), Job::Superseded { key }).await;
    }
    assert!(lanes.flush(DEADLINE).await);
    assert!(
        channel.ended.lock().unwrap().is_empty(),
        "one final untracked still waits"
    );
    let last = format!("key-{MAX_RETRIED_KEYS}");
    push(marker, settled(true, &[last.as_str()])).await;
    assert!(lanes.flush(DEADLINE).await);
    assert_eq!(*channel.ended.lock().unwrap(), [false]);
}

/// A message that carried finals held for its chat has two journal entries' finals
/// waiting for retries: its own and the carried ones. Each entry's retries settle on their
/// own; the end is told once, when the last of them settled, with what became of all.
#[tokio::test]
async fn a_carriers_end_waits_for_every_entrys_retries_and_is_told_once() {
    let (channel, delivery) = Refusing::start(|_| ChannelError::Transport("down".into()));
    let lanes = Lanes::new(16);
    let push = |msg, job| lanes.push("refusing", &delivery, msg, Hooks::default(), job);
    let marker = reply("c1", "s1", "", true);
    let retried = |key: &str| {
        let mut msg = reply("c1", "s1", "so far", true);
        msg.hints.send_key = Some(key.to_owned());
        msg
    };
    push(retried("carried"), Job::Reply).await;
    push(retried("own"), Job::Reply).await;
    push(marker.clone(), Job::TurnEnd).await;
    // The carried entry's retry gave up; the carrier's own final still waits.
    push(marker.clone(), settled(false, &["carried"])).await;
    assert!(lanes.flush(DEADLINE).await);
    assert!(
        channel.ended.lock().unwrap().is_empty(),
        "its own still waits"
    );
    push(marker.clone(), settled(true, &["own"])).await;
    assert!(lanes.flush(DEADLINE).await);
    assert_eq!(
        *channel.ended.lock().unwrap(),
        [true],
        "once, unanswered in part"
    );
    // Left by an entry taken over, the other's retries still hold the end back here.
    push(retried("carried-2"), Job::Reply).await;
    push(retried("own-2"), Job::Reply).await;
    push(marker.clone(), Job::TurnEnd).await;
    assert!(lanes.flush(DEADLINE).await);
    let source = Some(MessageId::new("s1"));
    let left = lanes.retries_left(
        ("refusing", ChatId::new("c1")),
        source,
        true,
        &["carried-2".to_owned()],
    );
    assert!(!left, "the carrier's own final still waits");
    push(marker, settled(true, &["own-2"])).await;
    assert!(lanes.flush(DEADLINE).await);
    assert_eq!(channel.ended.lock().unwrap().len(), 2, "told once more");
    assert!(lanes.shared.fates().is_empty());
}

/// A journal entry's retries settled: `answered`, its finals' send keys `keys`.
fn settled(answered: bool, keys: &[&str]) -> Job {
    let keys = keys.iter().map(|k| (*k).to_owned()).collect();
    Job::Settled { answered, keys }
}

/// The hand-off `source`'s retried final gave way (its key as `retried` writes it).
fn superseded(source: &str) -> Job {
    Job::Superseded {
        key: Some(format!("key-{source}")),
    }
}

/// A final the lane's gate lets into the engine but the engine's withholds (its lease
/// lapsed between the two asks) writes nothing, fails for now with the journal's
/// [`WITHHELD`], and is counted as `withheld`.
#[tokio::test]
async fn a_final_withheld_inside_the_engine_fails_for_now_and_is_counted() {
    use std::sync::atomic::{AtomicUsize, Ordering};

    let probe = im_bridge_fakes::telemetry::TelemetryProbe::new();
    // A test's runtime is single-threaded: the lane's drainer counts here.
    let _counted = metrics::set_default_local_recorder(&probe);
    let (channel, delivery, lanes) = setup(16);
    let asked = Arc::new(AtomicUsize::new(0));
    let counter = asked.clone();
    let gate: Gate = Arc::new(move || counter.fetch_add(1, Ordering::SeqCst) == 0);
    let (told, landed) = oneshot::channel();
    let after: AfterShown = Box::new(move |landed| {
        let _ = told.send(landed);
        Box::pin(async {})
    });
    let hooks = Hooks {
        before: None,
        after: Some(after),
        gate: Some(gate),
    };
    let answer = reply("fast", "f1", "the answer", true);
    lanes
        .push("gated", &delivery, answer, hooks, Job::Reply)
        .await;
    let landed = tokio::time::timeout(DEADLINE, landed)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        landed,
        Landed::Failed {
            transient: true,
            error: WITHHELD.to_owned()
        }
    );
    assert_eq!(
        asked.load(Ordering::SeqCst),
        2,
        "in the lane, then in the engine"
    );
    assert!(channel.writes_to("fast").is_empty());
    let withheld = [("channel", "gated"), ("result", "withheld")];
    assert_eq!(
        probe.counter(crate::telemetry::names::OUTBOUND, &withheld),
        1
    );
}
