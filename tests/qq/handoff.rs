//! Issue 33, item 4: an answer that outlives QQ's passive-reply window. The real
//! `im-bridge` binary runs against the fake QQ (on its gateway) and the Gateway simulator.
//!
//! No test waits minutes: the question is stamped as sent 36 s before its window closes
//! (both the bridge and the fake read the window from that stamp), the simulator's run
//! writes part of its answer and then waits for the test, and "six minutes later" is the
//! fake's clock moved on, so the fake refuses any reply to the question from then on, as
//! QQ would. The fake refuses a reply that answers no message (a proactive message, gone
//! since 2025-04-21), so the rest can only come as a reply to a later message.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use im_bridge::i18n::Arg;
use im_bridge::simulator::{RunningSimulator, Script, Simulator, SimulatorConfig};
use im_bridge_fakes::qq::{
    APP_ID, BOT_ID, CLIENT_SECRET, Event, Failure, FakeQq, Pushed, Reply, Trigger, code,
};
use tokio::process::{Child, Command};
use tokio::time::Instant;

use super::{ALICE, GROUP};
use crate::crash::{journal_records, kill9};
use crate::support::catalog_text;

const DEADLINE: Duration = Duration::from_secs(30);
const BOB: &str = "MEMBEROPENID00000000000000000002";
/// How long before the window closes the question was asked: the bridge hands the answer
/// off 30 s before the end, so 2 to 3 s after it arrives (stamps are whole seconds): time
/// for the run to have written the first half, which the simulator writes as soon as the
/// run starts (a fraction of a second after the question), with room for a loaded machine.
/// Each second more is a second every hand-off test waits.
const LEFT: Duration = Duration::from_secs(33);
const ANSWER: &str = "The first half of the answer was written in good time. \
                      The second half came long after QQ stopped taking replies to the question.";

/// The fake QQ, the simulator and the daemon's directory (config, store, logs).
struct Bridge {
    fake: FakeQq,
    sim: RunningSimulator,
    dir: tempfile::TempDir,
}

impl Bridge {
    async fn start() -> Self {
        Self {
            fake: FakeQq::start().await.unwrap(),
            sim: Simulator::start(SimulatorConfig::default()).await.unwrap(),
            dir: tempfile::tempdir().unwrap(),
        }
    }

    fn store(&self) -> PathBuf {
        self.dir.path().join("bridge.store")
    }

    /// Starts the real daemon (log in `daemon-<n>.log`) and waits for its session.
    async fn spawn(&self, n: usize) -> Child {
        let config = format!(
            "channels:\n  langgraph_url: {}\n  gateway_url: {}\n  qq:\n    enabled: true\n    \
             app_id: \"{APP_ID}\"\n    client_secret: \"{CLIENT_SECRET}\"\n    api_url: {}\n    \
             token_url: {}\nbridge:\n  store: \"sqlite://{}\"\n  admin_listen: 127.0.0.1:0\n",
            self.sim.langgraph_url(),
            self.sim.gateway_url(),
            self.fake.api_url(),
            self.fake.token_url(),
            self.store().display(),
        );
        let path = self.dir.path().join("bridge.yaml");
        std::fs::write(&path, config).unwrap();
        let log = std::fs::File::create(self.dir.path().join(format!("daemon-{n}.log"))).unwrap();
        let child = Command::new(env!("CARGO_BIN_EXE_im-bridge"))
            .args(["run", "--config"])
            .arg(&path)
            .env_remove("DEER_FLOW_INTERNAL_AUTH_TOKEN")
            .env_remove("DEER_FLOW_CONFIG_PATH")
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        if let Err(error) = self.fake.wait_ready(n + 1, DEADLINE).await {
            panic!("{error}\n{}", self.logs());
        }
        child
    }

    fn logs(&self) -> String {
        (0..3)
            .filter_map(|n| {
                let path = self.dir.path().join(format!("daemon-{n}.log"));
                std::fs::read_to_string(path)
                    .ok()
                    .map(|text| format!("--- daemon {n}\n{text}"))
            })
            .collect()
    }

    /// Waits until a reply satisfies `pick`.
    async fn wait_reply(&self, what: &str, pick: impl Fn(&Reply) -> bool) {
        let found = self
            .fake
            .wait_until(what, DEADLINE, |fake| fake.replies().iter().any(&pick))
            .await;
        if let Err(error) = found {
            panic!("{error}\n{:#?}\n{}", self.fake.replies(), self.logs());
        }
    }

    /// Waits until the journal (read beside the daemon) satisfies `pick`.
    async fn wait_journal(&self, what: &str, pick: impl Fn(&[String]) -> bool) {
        let until = Instant::now() + DEADLINE;
        loop {
            let records = journal_records(&self.store());
            if pick(&records) {
                return;
            }
            assert!(
                Instant::now() < until,
                "the journal never showed {what}: {records:?}\n{}",
                self.logs()
            );
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    }

    /// Asks `question` (a message whose window is `window` long) so late that the bridge
    /// hands the answer off (`route` the line's `where`) while the run still writes: what
    /// the handoff showed.
    async fn ask_slowly(&self, question: Event, window: Duration, route: &str) -> String {
        self.sim.script_next_run(slow_run());
        let asked = self.fake.now() - (window - LEFT);
        let question = self.fake.push(&question.sent_at(asked));
        let line = text(
            "run-handoff",
            &[("where", Arg::Str(route)), ("shown", Arg::Str("yes"))],
        );
        self.wait_reply("the handoff", |r| r.content.ends_with(&line))
            .await;
        let replies = self.fake.replies_to(&question.message_id);
        assert_eq!(replies.len(), 1, "{replies:#?}");
        let shown = replies[0]
            .content
            .strip_suffix(&line)
            .and_then(|s| s.strip_suffix("\n\n"))
            .unwrap_or_else(|| panic!("nothing shown before the line: {replies:#?}"));
        assert!(
            !shown.is_empty() && ANSWER.starts_with(shown) && shown.len() < ANSWER.len(),
            "{shown:?}"
        );
        shown.to_owned()
    }

    /// Asks a group question so late that the bridge hands the answer off while the run
    /// still writes, QQ answering the hand-off's attempts with `failures` in turn; returns
    /// the question once the first was answered.
    async fn hand_off_meeting(&self, failures: &[Failure]) -> Pushed {
        self.sim.script_next_run(slow_run());
        for failure in failures {
            self.fake.fail_next("group_reply", failure.clone());
        }
        let asked = self.fake.now() - (Duration::from_secs(300) - LEFT);
        let question = Event::group_at(GROUP, ALICE, &format!("<@!{BOT_ID}> write it all"));
        let question = self.fake.push(&question.sent_at(asked));
        let met = |fake: &FakeQq| !fake.calls_to("group_reply").is_empty();
        self.fake
            .wait_until("the hand-off refused", DEADLINE, met)
            .await
            .unwrap();
        question
    }

    /// `later` after the question (its window long closed) the run ends: the rest waits
    /// in the journal, and nothing but the handoff was sent or tried on `route`.
    async fn finish_later(&self, later: Duration, route: &str) {
        self.fake.advance_clock(later);
        let thread = self.sim.thread_ids().pop().unwrap();
        let runs = self.sim.active_runs(&thread);
        assert_eq!(runs.len(), 1, "one run in flight");
        assert!(self.sim.finish_run(&runs[0]));
        self.wait_journal("the rest waiting for the chat", is_held)
            .await;
        assert_eq!(
            self.fake.calls_to(route).len(),
            1,
            "{:#?}",
            self.fake.calls()
        );
    }

    /// Waits until a run is in flight.
    async fn wait_running(&self) {
        let running = |sim: &Simulator| {
            sim.thread_ids()
                .iter()
                .any(|t| !sim.active_runs(t).is_empty())
        };
        self.sim.wait_until(DEADLINE, running).await.unwrap();
    }

    /// Lets every run of the (only) thread end.
    fn finish_runs(&self) {
        let thread = self.sim.thread_ids().pop().unwrap();
        for run in self.sim.active_runs(&thread) {
            self.sim.finish_run(&run);
        }
    }

    /// Sends `next`, the chat's next message, answered `answer`: the texts of its replies
    /// once that answer came.
    async fn replies_to_next(&self, next: &Event, answer: &str) -> Vec<String> {
        self.sim
            .script_next_run(Script::with_answer(answer).chunks(1));
        let next = self.fake.push(next);
        self.wait_reply("the next message's answer", |r| r.content == answer)
            .await;
        let replies = self.fake.replies_to(&next.message_id);
        replies.into_iter().map(|r| r.content).collect()
    }

    /// The chat's next message, `next`, gets the rest of the answer after `shown` as its
    /// first reply, then `answer`, its own; nothing is left in the journal.
    async fn next_message_carries_the_rest(&self, next: &Event, shown: &str, answer: &str) {
        let texts = self.replies_to_next(next, answer).await;
        assert_eq!(texts, [rest(shown).as_str(), answer]);
        self.wait_journal("nothing left", <[String]>::is_empty)
            .await;
    }
}

fn text(id: &str, args: &[(&str, Arg<'_>)]) -> String {
    catalog_text("en-US")(id, args)
}

/// The rest of [`ANSWER`] after `shown`, as it reaches the chat.
fn rest(shown: &str) -> String {
    let heading = text("run-rest", &[("more", Arg::Str("yes"))]);
    format!("{heading}\n\n{}", ANSWER[shown.len()..].trim_start())
}

/// A run that writes the first part of [`ANSWER`], then waits for the test.
fn slow_run() -> Script {
    Script::with_answer(ANSWER).chunks(2).wait_after_chunk(1)
}

fn is_held(records: &[String]) -> bool {
    records.len() == 1 && records[0].contains("\"state\":\"held\"")
}

#[tokio::test]
async fn issue_33_a_six_minute_group_run_delivers_its_whole_answer_across_a_restart() {
    let b = Bridge::start().await;
    let daemon = b.spawn(0).await;
    let question = Event::group_at(GROUP, ALICE, &format!("<@!{BOT_ID}> write it all"));
    let shown = b
        .ask_slowly(question, Duration::from_secs(300), "group")
        .await;
    // Six minutes after the question, the run ends: QQ takes no reply to it any more.
    b.finish_later(Duration::from_secs(360), "group_reply")
        .await;

    // The journal keeps it across a crash.
    kill9(daemon).await;
    let daemon = b.spawn(1).await;
    assert!(is_held(&journal_records(&b.store())));

    // Anyone's next message in the group opens a reply: the rest first, then its answer.
    let bob = Event::group_at(GROUP, BOB, &format!("<@!{BOT_ID}> anything new?"));
    b.next_message_carries_the_rest(&bob, &shown, "Bob's own answer.")
        .await;
    // Every word of the answer reached the group, once.
    assert_eq!(b.fake.replies().len(), 3, "{:#?}", b.fake.replies());
    drop(daemon);
}

/// A restarted bridge answers a message it took before the crash without reusing a
/// `msg_seq` the bridge before it spent on that message (its "waiting" notice): QQ would
/// refuse the answer as a duplicate, for good.
#[tokio::test]
async fn a_message_answered_across_a_restart_is_not_refused_as_a_duplicate() {
    queued_across_a_restart(false).await;
}

/// A crash while a waiting message's notice was still on its way (QQ asked for a pause)
/// does not make the restarted bridge take the notice for the message's answer: the
/// message still runs and is answered.
#[tokio::test]
async fn a_message_whose_notice_was_pending_at_a_crash_still_runs() {
    queued_across_a_restart(true).await;
}

/// An answer QQ took while the bridge died before it read QQ's answer is not shown twice:
/// the restarted bridge sends it again under the same `msg_seq`, QQ refuses the repeat as
/// a duplicate, and the bridge takes that as delivered.
#[tokio::test]
async fn an_answer_taken_as_the_bridge_died_is_shown_once() {
    use im_bridge_fakes::qq::{Failure, code};
    let b = Bridge::start().await;
    let daemon = b.spawn(0).await;
    b.sim
        .script_next_run(Script::with_answer("The answer.").chunks(1));
    b.fake.fail_next("c2c_reply", Failure::AnswerLost);
    let asked = b.fake.push(&Event::c2c(ALICE, "a question"));
    b.wait_reply("the answer taken", |r| r.content == "The answer.")
        .await;
    kill9(daemon).await;
    let daemon = b.spawn(1).await;
    b.wait_journal("nothing left", <[String]>::is_empty).await;
    let replies = b.fake.replies_to(&asked.message_id);
    assert_eq!(replies.len(), 1, "{replies:#?}");
    let repeats = b.fake.calls_to("c2c_reply");
    assert!(
        repeats.iter().any(|c| c.code == Some(code::DUPLICATE_SEQ)),
        "the restarted bridge sent it again: {repeats:#?}"
    );
    drop(daemon);
}

/// A second message waits behind a run and is told so, the bridge is killed (while the
/// notice waits out a rate limit, if `notice_paused`), and the restarted bridge answers
/// the second message after the first, each once.
async fn queued_across_a_restart(notice_paused: bool) {
    use im_bridge_fakes::qq::{Failure, code};
    let b = Bridge::start().await;
    let daemon = b.spawn(0).await;
    b.sim.script_next_run(
        Script::with_answer("First answer.").hold(im_bridge::simulator::Hold::UntilFinished),
    );
    b.fake.push(&Event::c2c(ALICE, "first question"));
    b.wait_running().await;
    b.sim
        .script_next_run(Script::with_answer("Second answer.").chunks(1));
    if notice_paused {
        b.fake
            .fail_next("c2c_reply", Failure::Code(code::RATE_LIMITED));
    }
    let second = b.fake.push(&Event::c2c(ALICE, "second question"));
    let queued = text("run-queued", &[]);
    if notice_paused {
        let refused = |fake: &FakeQq| fake.calls_to("c2c_reply").iter().any(|c| c.code.is_some());
        b.fake
            .wait_until("the notice refused", DEADLINE, refused)
            .await
            .unwrap();
    } else {
        b.wait_reply("the second's notice", |r| r.content == queued)
            .await;
    }
    b.wait_journal("both messages kept", |r| r.len() == 2).await;
    kill9(daemon).await;
    let daemon = b.spawn(1).await;
    b.finish_runs();
    b.wait_reply("the second answer", |r| {
        r.content.ends_with("Second answer.")
    })
    .await;
    let replies = b.fake.replies_to(&second.message_id);
    let texts: Vec<&str> = replies.iter().map(|r| r.content.as_str()).collect();
    // It comes late, and says so; a notice that never landed is not sent late.
    let late = format!("{}\n\nSecond answer.", text("run-recovered", &[]));
    match notice_paused {
        false => assert_eq!(texts, [queued.as_str(), late.as_str()]),
        true => assert_eq!(texts, [late.as_str()]),
    }
    b.wait_journal("nothing left", <[String]>::is_empty).await;
    drop(daemon);
}

#[tokio::test]
async fn issue_33_a_private_run_past_the_hour_finishes_with_the_users_next_message() {
    let b = Bridge::start().await;
    let daemon = b.spawn(0).await;
    let question = Event::c2c(ALICE, "research this");
    let shown = b
        .ask_slowly(question, Duration::from_secs(3600), "private")
        .await;
    b.finish_later(Duration::from_secs(3600), "c2c_reply").await;
    let next = Event::c2c(ALICE, "thanks, and one more thing");
    b.next_message_carries_the_rest(&next, &shown, "Your new answer.")
        .await;
    drop(daemon);
}

/// A bridge restarted after its hand-off landed follows the run, and the rest it sends is
/// the rest: what the hand-off showed is not sent again (the line saying the restart made
/// it late goes above the rest, not into what is compared with the hand-off).
#[tokio::test]
async fn a_handed_off_run_followed_after_a_restart_sends_only_the_rest() {
    let b = Bridge::start().await;
    let daemon = b.spawn(0).await;
    let question = Event::group_at(GROUP, ALICE, &format!("<@!{BOT_ID}> write it all"));
    let shown = b
        .ask_slowly(question, Duration::from_secs(300), "group")
        .await;
    b.wait_journal("the hand-off landed", |r| {
        r.len() == 1 && r[0].contains("handed_off") && !r[0].contains("\"finals\"")
    })
    .await;
    kill9(daemon).await;
    let daemon = b.spawn(1).await;
    b.finish_later(Duration::from_secs(360), "group_reply")
        .await;
    let bob = Event::group_at(GROUP, BOB, &format!("<@!{BOT_ID}> anything new?"));
    let texts = b.replies_to_next(&bob, "Bob's own answer.").await;
    let heading = text("run-rest", &[("more", Arg::Str("yes"))]);
    let late = text("run-recovered", &[]);
    let rest = ANSWER[shown.len()..].trim_start();
    let expected = format!("{heading}\n\n{late}\n\n{rest}");
    assert_eq!(texts, [expected.as_str(), "Bob's own answer."]);
    b.wait_journal("nothing left", <[String]>::is_empty).await;
    drop(daemon);
}

/// A hand-off QQ refuses for good was never shown: the answer that ends the run is then
/// the whole answer, not the rest after what the hand-off would have shown.
#[tokio::test]
async fn a_refused_hand_off_leaves_the_whole_answer_to_come() {
    let b = Bridge::start().await;
    let daemon = b.spawn(0).await;
    let question = b
        .hand_off_meeting(&[Failure::Code(code::BAD_REQUEST)])
        .await;
    b.wait_journal("the hand-off forgotten", |r| {
        r.len() == 1 && r[0].contains("\"running\"") && !r[0].contains("\"finals\"")
    })
    .await;
    assert!(!journal_records(&b.store())[0].contains("handed_off"));
    // The run ends while the question still takes replies: its answer is all of it.
    b.finish_runs();
    b.wait_reply("the whole answer", |r| r.content == ANSWER)
        .await;
    assert_eq!(b.fake.replies_to(&question.message_id).len(), 1);
    b.wait_journal("nothing left", <[String]>::is_empty).await;
    drop(daemon);
}

/// QQ's count of a window may end before the bridge's (clocks differ, a source's stamp
/// is late): the answer QQ then refuses as too late is held for the chat's next message,
/// not lost.
#[tokio::test]
async fn an_answer_qq_refuses_as_too_late_waits_for_the_next_message() {
    let b = Bridge::start().await;
    let daemon = b.spawn(0).await;
    b.sim.script_next_run(slow_run());
    let question = Event::group_at(GROUP, ALICE, &format!("<@!{BOT_ID}> write it all"));
    let question = b.fake.push(&question);
    b.wait_running().await;
    // Six minutes pass for QQ, seconds for the bridge.
    b.fake.advance_clock(Duration::from_secs(360));
    b.finish_runs();
    let expired = |fake: &FakeQq| {
        let calls = fake.calls_to("group_reply");
        calls.iter().any(|c| c.code == Some(code::REPLY_EXPIRED))
    };
    b.fake
        .wait_until("QQ refusing the late answer", DEADLINE, expired)
        .await
        .unwrap();
    b.wait_journal("the answer waiting for the chat", is_held)
        .await;
    assert!(b.fake.replies_to(&question.message_id).is_empty());
    let bob = Event::group_at(GROUP, BOB, &format!("<@!{BOT_ID}> anything new?"));
    let texts = b.replies_to_next(&bob, "Bob's own answer.").await;
    assert_eq!(texts.len(), 2, "{texts:#?}");
    assert!(texts[0].ends_with(ANSWER), "{texts:#?}");
    b.wait_journal("nothing left", <[String]>::is_empty).await;
    drop(daemon);
}

/// A message that waited behind a handed-off run carries the rest of its answer once its
/// turn comes: the rest does not wait for a message after it.
#[tokio::test]
async fn a_message_waiting_behind_a_handed_off_run_carries_the_rest() {
    let b = Bridge::start().await;
    let daemon = b.spawn(0).await;
    let shown = b
        .ask_slowly(
            Event::c2c(ALICE, "research this"),
            Duration::from_secs(3600),
            "private",
        )
        .await;
    let queued = text("run-queued", &[]);
    let next = b.fake.push(&Event::c2c(ALICE, "and the rest?"));
    b.wait_reply("the waiting notice", |r| r.content == queued)
        .await;
    // A minute later for QQ: the question takes no more replies; the one waiting does.
    b.fake.advance_clock(Duration::from_secs(60));
    b.sim
        .script_next_run(Script::with_answer("Your new answer.").chunks(1));
    let thread = b.sim.thread_ids().pop().unwrap();
    let runs = b.sim.active_runs(&thread);
    assert_eq!(runs.len(), 1, "one run in flight");
    assert!(b.sim.finish_run(&runs[0]));
    b.wait_reply("the waiting message's answer", |r| {
        r.content == "Your new answer."
    })
    .await;
    let replies = b.fake.replies_to(&next.message_id);
    let texts: Vec<&str> = replies.iter().map(|r| r.content.as_str()).collect();
    assert_eq!(
        texts,
        [queued.as_str(), rest(&shown).as_str(), "Your new answer."]
    );
    b.wait_journal("nothing left", <[String]>::is_empty).await;
    drop(daemon);
}

/// A hand-off still on its way when the run ends (QQ asked for a pause), and then refused
/// for good, showed nothing: the final waits for its fate, and is the whole answer.
#[tokio::test]
async fn a_run_that_ends_while_its_hand_off_waits_is_cut_only_once_it_landed() {
    let b = Bridge::start().await;
    let daemon = b.spawn(0).await;
    let question = b
        .hand_off_meeting(&[
            Failure::Code(code::RATE_LIMITED),
            Failure::Code(code::BAD_REQUEST),
        ])
        .await;
    // The run ends while the hand-off waits out QQ's pause.
    b.finish_runs();
    b.wait_reply("the whole answer", |r| r.content == ANSWER)
        .await;
    let calls = b.fake.calls_to("group_reply");
    assert!(
        calls.iter().any(|c| c.code == Some(code::BAD_REQUEST)),
        "{calls:#?}"
    );
    assert_eq!(b.fake.replies_to(&question.message_id).len(), 1);
    b.wait_journal("nothing left", <[String]>::is_empty).await;
    drop(daemon);
}

/// A hand-off that failed for now (QQ answered 500) gives way to the answer when the run
/// ends: the answer is the whole of it, and the hand-off is not tried again, so a retry
/// QQ refused for good could not cut the beginning away, nor one landing late put the
/// beginning after the rest.
#[tokio::test]
async fn a_hand_off_that_failed_for_now_gives_way_to_the_whole_answer() {
    let b = Bridge::start().await;
    let daemon = b.spawn(0).await;
    let question = b.hand_off_meeting(&[Failure::Http(500)]).await;
    b.wait_journal("the hand-off waiting for a retry", |r| {
        r.len() == 1 && r[0].contains("handed_off") && r[0].contains("\"finals\"")
    })
    .await;
    b.finish_runs();
    b.wait_reply("the whole answer", |r| r.content == ANSWER)
        .await;
    b.wait_journal("nothing left", <[String]>::is_empty).await;
    assert_eq!(b.fake.replies_to(&question.message_id).len(), 1);
    let calls = b.fake.calls_to("group_reply");
    assert_eq!(calls.len(), 2, "the hand-off, then the answer: {calls:#?}");
    drop(daemon);
}

/// QQ's count of a window may end between the messages of a long answer: what the chat
/// was shown is not sent again; the rest waits for the chat's next message and comes as
/// its first reply, under the line saying it continues.
#[tokio::test]
async fn an_answer_cut_short_between_its_messages_leaves_only_the_rest_for_later() {
    use im_bridge_fakes::qq::Trigger;
    let b = Bridge::start().await;
    let daemon = b.spawn(0).await;
    // Two messages: the first paragraph fills one (QQ takes 4000 bytes).
    let first = "The first part. ".repeat(240);
    let first = first.trim_end();
    let second = "The second part, which QQ no longer took. ".repeat(8);
    let second = second.trim_end();
    let answer = format!("{first}\n\n{second}");
    b.sim
        .script_next_run(Script::with_answer(&answer).chunks(1));
    b.fake.fail(
        "group_reply",
        Trigger::Nth(2),
        Failure::Code(code::REPLY_EXPIRED),
    );
    let question = Event::group_at(GROUP, ALICE, &format!("<@!{BOT_ID}> write a lot"));
    let question = b.fake.push(&question);
    b.wait_journal("the rest waiting for the chat", is_held)
        .await;
    let shown = b.fake.replies_to(&question.message_id);
    let shown: Vec<&str> = shown.iter().map(|r| r.content.as_str()).collect();
    assert_eq!(shown, [first]);
    let bob = Event::group_at(GROUP, BOB, &format!("<@!{BOT_ID}> anything new?"));
    let texts = b.replies_to_next(&bob, "Bob's own answer.").await;
    let heading = text("run-rest", &[("more", Arg::Str("yes"))]);
    let rest = format!("{heading}\n\n{second}");
    assert_eq!(texts, [rest.as_str(), "Bob's own answer."]);
    b.wait_journal("nothing left", <[String]>::is_empty).await;
    drop(daemon);
}

/// A message waiting behind a run carries that run's answer when QQ refuses it as too
/// late only after a pause QQ asked for: the next turn starts once the answer is held.
#[tokio::test]
async fn a_message_waiting_behind_an_answer_refused_late_carries_it() {
    let b = Bridge::start().await;
    let daemon = b.spawn(0).await;
    b.sim.script_next_run(slow_run());
    b.fake.push(&Event::c2c(ALICE, "research this"));
    b.wait_running().await;
    // More than an hour passes for QQ: the question takes no more replies there.
    b.fake.advance_clock(Duration::from_secs(3700));
    let queued = text("run-queued", &[]);
    let next = b.fake.push(&Event::c2c(ALICE, "and this?"));
    b.wait_reply("the waiting notice", |r| r.content == queued)
        .await;
    b.fake
        .fail_next("c2c_reply", Failure::Code(code::RATE_LIMITED));
    b.fake
        .fail_next("c2c_reply", Failure::Code(code::REPLY_EXPIRED));
    b.sim
        .script_next_run(Script::with_answer("Your new answer.").chunks(1));
    b.finish_runs();
    b.wait_reply("the waiting message's answer", |r| {
        r.content == "Your new answer."
    })
    .await;
    let replies = b.fake.replies_to(&next.message_id);
    let texts: Vec<&str> = replies.iter().map(|r| r.content.as_str()).collect();
    assert_eq!(texts.len(), 3, "{texts:#?}");
    assert_eq!(texts[0], queued);
    assert!(texts[1].ends_with(ANSWER), "{texts:#?}");
    assert_eq!(texts[2], "Your new answer.");
    b.wait_journal("nothing left", <[String]>::is_empty).await;
    drop(daemon);
}

/// A goal run on QQ shows each segment as a goal continuation ends it, while the question
/// still takes replies, as a streaming channel would: a hand-off later in the run shows
/// only the segment the run is in, after the ones before it.
#[tokio::test]
async fn a_goal_segment_goes_out_as_it_ends_before_a_later_hand_off() {
    use im_bridge::simulator::Hold;
    const FIRST: &str = "First, the plan: three steps, in order.";
    let b = Bridge::start().await;
    let daemon = b.spawn(0).await;
    b.sim.script_next_run(
        Script::with_answer("Goal noted.")
            .chunks(1)
            .goal_continuations(0)
            .goal_stand_down("blocked:needs_user_input"),
    );
    b.fake.push(&Event::c2c(ALICE, "/goal ship it"));
    b.wait_reply("the goal's first answer", |r| r.content == "Goal noted.")
        .await;
    let thread = b.sim.thread_ids().pop().unwrap();
    b.sim.wait_idle(&thread, DEADLINE).await.unwrap();
    b.sim.script_next_run(
        Script::with_answer(FIRST)
            .chunks(1)
            .goal_continuations(1)
            .goal_met()
            .hold(Hold::UntilFinished),
    );
    let asked = b.fake.now() - (Duration::from_secs(3600) - LEFT);
    let question = Event::c2c(ALICE, "how is it going").sent_at(asked);
    let question = b.fake.push(&question);
    let line = text(
        "run-handoff",
        &[("where", Arg::Str("private")), ("shown", Arg::Str("yes"))],
    );
    b.wait_reply("the handoff", |r| r.content.ends_with(&line))
        .await;
    let replies = b.fake.replies_to(&question.message_id);
    let texts: Vec<&str> = replies.iter().map(|r| r.content.as_str()).collect();
    assert_eq!(texts.len(), 2, "{texts:#?}");
    assert_eq!(texts[0], FIRST, "the first segment, as it ended");
    let second = texts[1].strip_suffix(&line).unwrap_or_default();
    assert!(
        second.contains("continuation 1 of 8") && !second.contains(FIRST),
        "{texts:#?}"
    );
    // The run ends an hour later: the hand-off showed all of the second segment.
    b.fake.advance_clock(Duration::from_secs(3600));
    b.finish_runs();
    b.wait_journal("the end waiting for the chat", is_held)
        .await;
    let next = Event::c2c(ALICE, "done?");
    let texts = b.replies_to_next(&next, "Yes.").await;
    let all = text("run-rest", &[("more", Arg::Str("no"))]);
    assert_eq!(texts, [all.as_str(), "Yes."]);
    b.wait_journal("nothing left", <[String]>::is_empty).await;
    drop(daemon);
}

/// A long answer of three QQ messages whose third landed as the bridge died (its answer
/// lost on the way back): the restarted bridge delivers the final again, with the line
/// saying why it comes late where it fits. The answer is split as it was, so QQ takes each
/// of its messages as a repeat of its `msg_seq` and the user reads it once (the line, which
/// fits before the first full message no more than after the last, is left out). Written
/// into the text, it would shift every cut and push the end of the answer into a fourth
/// message under a new `msg_seq`: that end shown twice.
#[tokio::test]
async fn a_split_answer_delivered_again_after_a_restart_is_read_once() {
    // Three messages of at most 4,000 bytes: 800, 800 and 795 words, the last nearly full.
    const WORDS: usize = 2395;
    let b = Bridge::start().await;
    let daemon = b.spawn(0).await;
    let answer = vec!["word"; WORDS].join(" ");
    b.sim
        .script_next_run(Script::with_answer(&answer).chunks(1));
    b.fake
        .fail("c2c_reply", Trigger::Nth(3), Failure::AnswerLost);
    let question = b.fake.push(&Event::c2c(ALICE, "write it all"));
    let three = |fake: &FakeQq| fake.replies_to(&question.message_id).len() == 3;
    b.fake
        .wait_until("the third message", DEADLINE, three)
        .await
        .unwrap();
    kill9(daemon).await;
    let daemon = b.spawn(1).await;
    b.wait_journal("nothing left", <[String]>::is_empty).await;
    let replies = b.fake.replies_to(&question.message_id);
    let texts: Vec<&str> = replies.iter().map(|r| r.content.as_str()).collect();
    let words: usize = texts.iter().map(|t| t.matches("word").count()).sum();
    assert_eq!(words, WORDS, "every word once: {:?}", texts.len());
    assert_eq!(texts.len(), 3, "the three messages, once");
    drop(daemon);
}
