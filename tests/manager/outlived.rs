//! A streamed run that outlives its stream (DeerFlow keeps a run going when its
//! `/runs/stream` connection goes, the bridge asks `on_disconnect: continue`, and when a
//! reader falls behind its buffer and gets `gap`): the turn follows the run by id and
//! finishes the message it streamed with the whole answer, once; a run that then fails
//! still ends as a failure.

use im_bridge::simulator::{Failure, Script, StreamLoss};

use crate::support::{Call, Harness};

/// The answer the runs of these tests write, in six chunks.
const ANSWER: &str = "The whole answer, written to its very end by the agent.";

/// The start of the line that says an answer was cut off (en-US).
const CUT_OFF: &str = "(This answer was cut off";

/// Runs one turn whose stream loses the run's events (`loss`) after the third of six
/// chunks, once text was shown; returns the channel's calls for it.
async fn turn_losing(h: &Harness, script: Script, loss: StreamLoss) -> Vec<Call> {
    h.sim.script_next_run(
        script
            .chunks(6)
            .wait_after_chunk(3)
            .lose_stream_after_chunk(3, loss),
    );
    h.say("go").await;
    h.channel
        .wait_for("text streamed", |calls| {
            calls.iter().any(|c| c.text().starts_with("The whole"))
        })
        .await;
    h.finish_runs();
    h.channel.wait_finals(1).await;
    h.channel.calls()
}

/// Every call of the turn went to the one message its stream started, which it finished.
fn assert_one_message(calls: &[Call]) {
    let Some(Call::Send {
        id, stream: true, ..
    }) = calls.first()
    else {
        panic!("a streamed message first: {calls:#?}");
    };
    for call in &calls[1..] {
        match call {
            Call::Edit { id: edited, .. } | Call::Finish { id: edited, .. } => {
                assert_eq!(edited, id, "{calls:#?}")
            }
            other => panic!("a call to another message: {other:?}"),
        }
    }
}

/// The joins of the run and the `Last-Event-ID` each sent.
fn joins(h: &Harness) -> Vec<Option<String>> {
    h.sim
        .requests_matching(|r| r.path.ends_with("/join"))
        .into_iter()
        .map(|r| r.headers.get("last-event-id").cloned())
        .collect()
}

#[tokio::test]
async fn a_stream_dropped_mid_answer_is_followed_to_the_whole_answer_once() {
    let h = Harness::start().await;
    let calls = turn_losing(&h, Script::with_answer(ANSWER), StreamLoss::Drop).await;
    assert_eq!(h.channel.finals(), [ANSWER]);
    assert_one_message(&calls);
    // The join read on after the last event the stream read.
    let joins = joins(&h);
    assert_eq!(joins.len(), 1, "{joins:?}");
    assert!(joins[0].is_some(), "{joins:?}");
    // The run ended before the turn did: the next message runs, it is not "busy".
    h.sim.script_next_run(Script::with_answer("next").chunks(1));
    assert_eq!(h.ask("again", 2).await, "next");
    h.channel.assert_never_shown(CUT_OFF);
    assert_eq!(h.streamed_runs(), 2);
    h.stop().await;
}

#[tokio::test]
async fn a_stream_that_gapped_is_followed_to_the_whole_answer_once() {
    let h = Harness::start().await;
    let calls = turn_losing(&h, Script::with_answer(ANSWER), StreamLoss::Gap).await;
    assert_eq!(h.channel.finals(), [ANSWER]);
    assert_one_message(&calls);
    // After a gap there is nothing to resume after: the join reads what the Gateway keeps.
    assert_eq!(joins(&h), [None]);
    h.sim.script_next_run(Script::with_answer("next").chunks(1));
    assert_eq!(h.ask("again", 2).await, "next");
    h.channel.assert_never_shown(CUT_OFF);
    h.stop().await;
}

#[tokio::test]
async fn a_run_that_fails_after_its_stream_dropped_still_ends_as_a_failure() {
    let h = Harness::start().await;
    let error = Failure::Error {
        message: "MARKER-ERR model text".into(),
        name: "ValueError".into(),
    };
    let failing = Script::with_answer(ANSWER).fail_after_chunk(5, error);
    turn_losing(&h, failing, StreamLoss::Drop).await;
    let finals = h.channel.finals();
    assert_eq!(finals.len(), 1, "{finals:?}");
    assert!(finals[0].starts_with("The whole answer,"), "{finals:?}");
    assert!(
        finals[0].ends_with("before the agent finished.)"),
        "{finals:?}"
    );
    assert!(finals[0].contains(CUT_OFF), "{finals:?}");
    assert_eq!(joins(&h).len(), 1);
    h.channel.assert_never_shown("MARKER-ERR");
    h.stop().await;
}
