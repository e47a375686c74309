//! Runs followed after a restart: one that ended while the thread went on to another run
//! publishes its own answer, not the thread's newest turn (the thread moves on when another
//! client, DeerFlow's UI or another replica taking the conversation's next message, runs
//! on it between the crash and the recovery); one the restart could not look up, met again
//! as the run holding the thread, is followed rather than waited for and run twice.

use im_bridge::simulator::{Fault, Hold, RecordedRequest, Reply, Route, Script};
use std::time::Duration;

use serde_json::json;
use tokio::time::Instant;

use super::{
    Crashable, DEADLINE, USER, accepted_unanswered, goal_run_continuing, kill9, late, streamed,
};
use crate::support::OWNER_HEADER;

#[tokio::test]
async fn a_recovered_run_that_ended_answers_with_its_own_turn_after_the_thread_moved_on() {
    recovered_after_the_thread_moved_on(false).await;
}

/// The thread no longer holds the run's turn at all (a summarization in the later run, a
/// compaction): the answer is read from the messages the run wrote (the run event store).
#[tokio::test]
async fn a_recovered_run_whose_turn_the_thread_no_longer_holds_answers_from_its_own_record() {
    recovered_after_the_thread_moved_on(true).await;
}

/// Kills the bridge while its run answers, lets the run end, has another client run on the
/// thread (then, when `compacted`, keeps only that client's exchange in the thread's
/// history) and restarts: the recovered message gets its own run's answer.
async fn recovered_after_the_thread_moved_on(compacted: bool) {
    let c = Crashable::start().await;
    c.sim.script_next_run(
        Script::with_answer("The recovered run's answer.")
            .chunks(1)
            .hold(Hold::UntilFinished),
    );
    let daemon = c.spawn(0);
    c.say("first question");
    c.wait_journal("the run id", |r| r.contains("run_id")).await;
    kill9(daemon).await;
    let thread = c.sim.thread_ids().pop().expect("the conversation's thread");
    for run in c.sim.active_runs(&thread) {
        c.sim.finish_run(&run);
    }
    another_client_runs(&c, &thread, compacted).await;
    // The restart follows the recovered run, which ended: its answer is read from the
    // thread's state, where it is no longer the newest turn.
    let daemon = c.spawn(1);
    let messages = c.wait_text(&late("The recovered run's answer.")).await;
    assert!(
        messages.iter().all(|m| !m.text.contains("Another client")),
        "{messages:?}"
    );
    c.wait_journal_empty().await;
    drop(daemon);
}

/// Once the bridge's run on `thread` ended, another client's run answers on the thread
/// before the bridge is back; then, when `compacted`, the thread's history keeps only that
/// client's exchange (as after a summarization or a compaction).
async fn another_client_runs(c: &Crashable, thread: &str, compacted: bool) {
    c.sim.wait_idle(thread, DEADLINE).await.unwrap();
    c.sim
        .script_thread(thread, Script::with_answer("Another client's answer."));
    let body = json!({
        "assistant_id": "lead_agent",
        "input": {"messages": [{"role": "user", "content": "from the web UI"}]},
    });
    let response = reqwest::Client::new()
        .post(format!("{}/threads/{thread}/runs", c.sim.langgraph_url()))
        .header(OWNER_HEADER, c.sim.thread_owner(thread).unwrap())
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    c.sim.wait_idle(thread, DEADLINE).await.unwrap();
    if compacted {
        assert!(c.sim.keep_last_messages(thread, 2));
    }
}

/// A goal run that was streaming its first segment at the crash, and whose two
/// continuations ran while the bridge was down, when the thread no longer holds its turn:
/// read from the run's own record, split where each continuation began (its `run.start`),
/// each segment is shown, the first in the message it streamed into; none is lost.
#[tokio::test]
async fn a_recovered_goal_run_read_from_its_record_shows_each_of_its_segments() {
    goal_run_read_from_its_record(Record::Whole).await;
}

/// The same, read while the Gateway has marked the run succeeded but not yet written the
/// rest of its record (nothing of its last continuation, not even where it began, and no
/// receipt), though what is written ends in an answer: the record is read again until
/// its receipt shows, rather than taken for a run of one continuation.
#[tokio::test]
async fn a_goal_runs_record_read_before_the_gateway_wrote_all_of_it_is_read_again() {
    goal_run_read_from_its_record(Record::Held).await;
}

/// The same, when each segment made so many tool calls that the record is longer than the
/// pages the Gateway serves: older pages are read back to the run's start, and the first
/// segment, which no longer is on the newest page, still ends in its own answer.
#[tokio::test]
async fn a_goal_runs_record_longer_than_a_page_is_read_back_to_the_runs_start() {
    goal_run_read_from_its_record(Record::Long).await;
}

/// How the run's record reads in [`goal_run_read_from_its_record`].
#[derive(Clone, Copy, PartialEq)]
enum Record {
    /// Whole when the bridge first reads it.
    Whole,
    /// Its last continuation (its start, a tool call, the call's result and the answer)
    /// shows only once the bridge read the events twice.
    Held,
    /// Longer than three pages of `…/messages` (the tool calls of every segment).
    Long,
}

/// See the three tests above.
async fn goal_run_read_from_its_record(record: Record) {
    let c = Crashable::start().await;
    let daemon = c.spawn(0);
    let first = Script::with_answer("First answer.")
        .chunks(2)
        .wait_after_chunk(1);
    // Long: each segment 2 × 110 rows and its answer, 664 rows in all with the input.
    let first = match record {
        Record::Whole => first,
        Record::Held => first.tool_steps(1),
        Record::Long => first.tool_steps(110),
    };
    let before = goal_run_continuing(&c, first, 2).await;
    let first = streamed(&c.fake, "the first words", "First").await;
    let shows_first = format!("\"stream_message_id\":\"{first}\"");
    c.wait_journal("the first stream", |r| r.contains(&shows_first))
        .await;
    let thread = c.sim.thread_ids().pop().unwrap();
    let run_id = c.sim.active_runs(&thread).pop().expect("the goal run");
    kill9(daemon).await;
    // The run goes on while the bridge is down, through both continuations, and ends.
    let until = Instant::now() + DEADLINE;
    while !c.sim.active_runs(&thread).is_empty() {
        assert!(Instant::now() < until, "the run never ended");
        for run in c.sim.active_runs(&thread) {
            c.sim.finish_run(&run);
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    another_client_runs(&c, &thread, true).await;

    let held = record == Record::Held;
    assert!(c.sim.hold_run_record(&run_id, if held { 4 } else { 0 }));
    let daemon = c.spawn(1);
    if held {
        let events = |r: &RecordedRequest| r.path.ends_with(&format!("{run_id}/events"));
        c.sim
            .wait_for_requests(2, DEADLINE, events)
            .await
            .unwrap_or_else(|_| panic!("the events read again: {:?}", c.paths()));
        c.sim.hold_run_record(&run_id, 0);
    }
    c.wait_journal_empty().await;
    let messages = c.fake.bot_messages(USER);
    let answer = &messages[before..];
    assert_eq!(answer.len(), 3, "{messages:#?}");
    assert_eq!(answer[0].message_id, first);
    assert!(answer[0].text.ends_with("First answer."), "{messages:#?}");
    for (n, shown) in answer.iter().enumerate().skip(1) {
        let text = format!("(continuation {n} of 8)");
        assert!(shown.text.contains(&text), "{n}: {messages:#?}");
    }
    assert_eq!(c.run_starts(), 2, "{:?}", c.paths());
    if record == Record::Long {
        let pages = c.paths().iter().filter(|p| p.contains("/messages")).count();
        assert!(pages >= 4, "{:?}", c.paths());
    }
    drop(daemon);
}

#[tokio::test]
async fn a_message_run_again_that_meets_its_own_run_in_flight_follows_it() {
    meets_its_own_run(Crashable::start().await).await;
}

/// `busy_policy: reject` turns away a message meeting another run, never its own.
#[tokio::test]
async fn under_busy_policy_reject_a_message_run_again_follows_its_own_run_too() {
    let mut c = Crashable::start().await;
    c.telegram_keys = "    busy_policy: reject\n".into();
    meets_its_own_run(c).await;
}

/// The restart cannot look the run up, runs the message again, and meets that run.
async fn meets_its_own_run(c: Crashable) {
    c.sim
        .script_next_run(accepted_unanswered("Only the one run."));
    let daemon = c.spawn(0);
    c.say("hello");
    c.wait_run_requested().await;
    // The restart cannot look the run up, so it runs the message again: the Gateway says
    // the thread is busy, with the run whose metadata names this message's entry.
    let thread = c.sim.thread_ids().pop().unwrap();
    c.sim.push_fault(
        Fault::on(Route::RunList)
            .thread(&thread)
            .reply(Reply::detail(500, "Internal Server Error")),
    );
    // The first start, and the one refused with 409; the answer is shown once.
    let daemon = c.restart_and_follow(daemon, "Only the one run.", 2).await;
    assert_eq!(c.sim.runs(&thread).len(), 1, "{:?}", c.paths());
    assert!(c.log(1).contains("this message's own run"), "{}", c.log(1));
    drop(daemon);
}
