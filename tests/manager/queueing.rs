//! Messages of one conversation arriving while it is busy (issue 13): they run in arrival
//! order on one thread, waiting their turn with the queued notice (`busy_policy: queue`, at
//! most `max_queued_per_conversation` waiting), or get DeerFlow's busy reply (`reject`, or a
//! full line); each notice once per run, later messages marked with a reaction (issue 33).

use im_bridge::manager::{BusyPolicy, Queueing};
use im_bridge::simulator::{Hold, Script};
use im_bridge_channel::{InboundMessage, Reaction};

use crate::support::{Call, Harness, Options};

const QUEUED: &str = "Another request in this conversation is still running. I'll start on yours as soon as it's done.";
const BUSY: &str = "This conversation is still busy with an earlier request. Please wait until it finishes, then send your message again.";

/// Default options with `busy_policy: policy` and `max_queued_per_conversation: max_queued`.
pub(super) fn with_policy(policy: BusyPolicy, max_queued: usize) -> Options {
    policy_on(Options::default(), policy, max_queued)
}

/// `options` with `busy_policy: policy` and `max_queued_per_conversation: max_queued`.
pub(super) fn policy_on(mut options: Options, policy: BusyPolicy, max_queued: usize) -> Options {
    options
        .manager
        .channel_queueing
        .insert(options.channel.to_owned(), Queueing { policy, max_queued });
    options
}

/// Says `text` and waits until its run started; the run answers "running" once finished.
async fn run_held(h: &Harness, text: &str) -> InboundMessage {
    h.sim.script_next_run(
        Script::with_answer("running")
            .chunks(1)
            .hold(Hold::UntilFinished),
    );
    let msg = h.say(text).await;
    h.wait_until_sent(1, "/runs/stream").await;
    msg
}

#[tokio::test]
async fn issue_13_two_messages_sent_together_run_in_order_on_one_thread() {
    let h = Harness::start().await;
    h.sim.script_next_run(
        Script::with_answer("The first answer.")
            .chunks(1)
            .hold(Hold::UntilFinished),
    );
    h.sim
        .script_next_run(Script::with_answer("The second answer.").chunks(1));
    h.say("first").await;
    h.say("second").await;
    // The second waits, told so, while the first is still running.
    h.channel
        .wait_for("the queued notice", |calls| {
            calls.iter().any(|c| c.text() == QUEUED)
        })
        .await;
    h.wait_until_sent(1, "/runs/stream").await;
    assert_eq!(
        h.streamed_runs(),
        1,
        "the second must not start beside the first"
    );
    h.finish_runs();
    let finals = h.channel.wait_finals(2).await;
    assert_eq!(finals, ["The first answer.", "The second answer."]);
    // One thread, its runs in arrival order.
    let thread = h.only_thread();
    let inputs: Vec<String> = h
        .sim
        .runs(&thread)
        .iter()
        .map(|r| r.kwargs["input"]["messages"][0]["content"].to_string())
        .collect();
    assert_eq!(inputs.len(), 2);
    assert!(
        inputs[0].contains("first") && inputs[1].contains("second"),
        "{inputs:?}"
    );
    h.stop().await;
}

/// The sources of the reactions saying `reaction` so far.
fn reacted(calls: &[Call], reaction: Reaction) -> Vec<String> {
    calls
        .iter()
        .filter_map(|c| match c {
            Call::React {
                source,
                reaction: r,
            } if *r == reaction => Some(source.clone()),
            _ => None,
        })
        .collect()
}

fn source(msg: &InboundMessage) -> String {
    msg.thread_ts.as_ref().unwrap().to_string()
}

#[tokio::test]
async fn issue_13_a_full_line_gets_the_busy_reply_and_the_rest_still_run() {
    // Issue 33: one notice of each kind per run; the later messages get a reaction.
    let mut options = Options::default();
    options.caps.reactions = true;
    let h = Harness::with(options).await;
    run_held(&h, "one").await;
    let mut waiting = Vec::new();
    for text in ["two", "three", "four"] {
        waiting.push(h.say(text).await);
    }
    let calls = h
        .channel
        .wait_for("the queued notice and two reactions", |calls| {
            reacted(calls, Reaction::Queued).len() == 2 && calls.iter().any(|c| c.text() == QUEUED)
        })
        .await;
    assert_eq!(calls.iter().filter(|c| c.text() == QUEUED).count(), 1);
    // Whichever of the three was told (the first handled), the other two are marked.
    let marked = reacted(&calls, Reaction::Queued);
    assert_eq!(marked.len(), 2, "{marked:?}");
    assert_ne!(marked[0], marked[1]);
    assert!(
        marked
            .iter()
            .all(|m| waiting.iter().any(|w| source(w) == *m))
    );
    // One running and three waiting: the fifth is refused at once, the sixth marked.
    h.say("five").await;
    assert_eq!(h.channel.nth_final(1).await, BUSY);
    let sixth = h.say("six").await;
    let calls = h
        .channel
        .wait_for("a busy reaction", |calls| {
            !reacted(calls, Reaction::Busy).is_empty()
        })
        .await;
    assert_eq!(reacted(&calls, Reaction::Busy), [source(&sixth)]);
    h.finish_runs();
    let finals = h.channel.wait_finals(5).await;
    assert_eq!(finals[0], BUSY);
    assert_eq!(finals.len(), 5, "{finals:?}");
    assert_eq!(
        h.streamed_runs(),
        4,
        "one, then two, three and four in turn"
    );
    assert_eq!(h.channel.finals().iter().filter(|f| *f == BUSY).count(), 1);
    h.stop().await;
}

#[tokio::test]
async fn issue_33_a_redelivery_during_the_run_leaves_the_notice_to_the_next_message() {
    let h = Harness::start().await;
    let first = run_held(&h, "one").await;
    // The platform delivers the running message again: dropped, and it takes no notice.
    h.send(first).await;
    h.say("two").await;
    h.channel
        .wait_for("the queued notice", |calls| {
            calls.iter().any(|c| c.text() == QUEUED)
        })
        .await;
    h.finish_runs();
    assert_eq!(h.channel.wait_finals(2).await.len(), 2);
    assert_eq!(h.streamed_runs(), 2);
    h.stop().await;
}

#[tokio::test]
async fn issue_33_without_reactions_later_waiting_messages_show_nothing_and_still_run() {
    let h = Harness::start().await;
    run_held(&h, "one").await;
    for text in ["two", "three"] {
        h.say(text).await;
    }
    h.channel
        .wait_for("the queued notice", |calls| {
            calls.iter().any(|c| c.text() == QUEUED)
        })
        .await;
    h.finish_runs();
    let finals = h.channel.wait_finals(3).await;
    assert_eq!(finals.len(), 3, "{finals:?}");
    assert_eq!(h.streamed_runs(), 3);
    let calls = h.channel.calls();
    assert_eq!(calls.iter().filter(|c| c.text() == QUEUED).count(), 1);
    assert!(!calls.iter().any(|c| matches!(c, Call::React { .. })));
    h.stop().await;
}

/// Without reactions to mark them, every message turned away is told so: it is dropped,
/// and its sender must know to send it again.
#[tokio::test]
async fn without_reactions_each_message_turned_away_gets_the_busy_reply() {
    let h = Harness::with(with_policy(BusyPolicy::Reject, 3)).await;
    run_held(&h, "one").await;
    for text in ["two", "three"] {
        h.say(text).await;
    }
    let calls = h
        .channel
        .wait_for("two busy replies", |calls| {
            calls.iter().filter(|c| c.text() == BUSY).count() == 2
        })
        .await;
    assert!(!calls.iter().any(|c| matches!(c, Call::React { .. })));
    h.finish_runs();
    assert_eq!(h.channel.wait_finals(3).await.len(), 3);
    assert_eq!(h.streamed_runs(), 1);
    h.stop().await;
}

#[tokio::test]
async fn issue_13_reject_gives_deerflows_busy_reply() {
    let h = Harness::with(with_policy(BusyPolicy::Reject, 3)).await;
    run_held(&h, "one").await;
    h.say("two").await;
    assert_eq!(h.channel.nth_final(1).await, BUSY);
    h.channel.assert_never_shown(QUEUED);
    // Commands are not turns: they answer at once beside the run.
    assert!(
        h.ask("/status", 2)
            .await
            .starts_with("This chat is in conversation")
    );
    h.finish_runs();
    assert_eq!(h.channel.nth_final(3).await, "running");
    assert_eq!(h.streamed_runs(), 1);
    h.stop().await;
}

/// A goal's run holds its conversation as a chat turn's does: a message sent while it
/// works waits for it with the queued notice, then runs (it used to start beside the run
/// and meet a busy thread, then be dropped with the busy reply).
#[tokio::test]
async fn a_message_sent_during_a_goals_run_waits_for_it() {
    let h = Harness::start().await;
    h.sim.script_next_run(
        crate::support::goal_met_at_once("Working on the goal.").hold(Hold::UntilFinished),
    );
    h.sim
        .script_next_run(Script::with_answer("The Q3 numbers are in.").chunks(1));
    h.say("/goal ship the quarterly report").await;
    h.wait_until_sent(1, "/runs/stream").await;
    h.say("and add the Q3 numbers").await;
    h.channel
        .wait_for("the queued notice", |calls| {
            calls.iter().any(|c| c.text() == QUEUED)
        })
        .await;
    assert_eq!(
        h.streamed_runs(),
        1,
        "the message must not start beside the goal's run"
    );
    h.finish_runs();
    h.channel
        .wait_for("the message's answer", |calls| {
            calls
                .iter()
                .any(|c| c.is_final() && c.text() == "The Q3 numbers are in.")
        })
        .await;
    let texts: Vec<String> = h
        .channel
        .calls()
        .iter()
        .map(|c| c.text().to_owned())
        .collect();
    assert!(!texts.iter().any(|t| t == BUSY), "{texts:?}");
    assert_eq!(h.streamed_runs(), 2);
    h.stop().await;
}
