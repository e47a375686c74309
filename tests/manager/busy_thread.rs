//! A message whose run meets a thread another process's run holds (409): another replica
//! handling the same conversation, DeerFlow's own UI, a dead replica's run that goes on.
//! Under `busy_policy: queue` it waits for that run with the queued notice and then runs,
//! answered once; under `reject` it gets the busy reply at once; a 409 with no run in
//! flight to wait for gets the busy reply after a bounded few attempts; shutdown stops the
//! wait, and the next start runs the journaled message.

use im_bridge::manager::BusyPolicy;
use im_bridge::simulator::{Fault, Gate, Hold, Reply, Route, Script};
use serde_json::json;

use super::queueing::with_policy;
use crate::support::{DEADLINE, Harness, OWNER_HEADER, Options, SHORT_GRACE};

const QUEUED: &str = "Another request in this conversation is still running. I'll start on yours as soon as it's done.";
const BUSY: &str = "This conversation is still busy with an earlier request. Please wait until it finishes, then send your message again.";

/// What the other client asks.
const OTHER_CLIENT: &str = "from the web UI";

/// Binds the conversation's thread with a first exchange, then starts a held run on it as
/// another client would (`POST …/runs`, `on_disconnect: continue`, acting for the
/// conversation's DeerFlow user): the thread and that run's id.
pub(crate) async fn another_clients_run(h: &Harness) -> (String, String) {
    h.sim.script_next_run(Script::with_answer("Hi."));
    assert_eq!(h.ask("hello", 1).await, "Hi.");
    let thread = h.only_thread();
    h.sim.wait_idle(&thread, DEADLINE).await.unwrap();
    let run_id = start_another_clients_run(h, &thread).await;
    (thread, run_id)
}

/// Starts a held run on `thread`, idle, as another client would (see
/// [`another_clients_run`]): its id.
async fn start_another_clients_run(h: &Harness, thread: &str) -> String {
    h.sim.script_thread(
        thread,
        Script::with_answer("The other client's answer.").hold(Hold::UntilFinished),
    );
    let owner = h.sim.thread_owner(thread).unwrap();
    let body = json!({
        "assistant_id": "lead_agent",
        "input": {"messages": [{"role": "user", "content": OTHER_CLIENT}]},
        "on_disconnect": "continue",
        "multitask_strategy": "reject",
    });
    let response = reqwest::Client::new()
        .post(format!("{}/threads/{thread}/runs", h.sim.langgraph_url()))
        .header(OWNER_HEADER, owner)
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let run: serde_json::Value = response.json().await.unwrap();
    let run_id = run["run_id"].as_str().unwrap().to_owned();
    assert_eq!(h.sim.active_runs(thread), std::slice::from_ref(&run_id));
    run_id
}

/// Waits until the daemon read run `run_id`'s status (it waits for that run).
async fn polled(h: &Harness, run_id: &str) {
    let path = format!("/runs/{run_id}");
    h.sim
        .wait_for_requests(1, DEADLINE, |r| {
            r.method == "GET" && r.path.ends_with(&path)
        })
        .await
        .unwrap();
}

/// How many runs the daemon asked to start (streamed or in the background), the other
/// client's aside.
fn starts(h: &Harness) -> usize {
    h.conversation_calls()
        .iter()
        .filter(|r| {
            r.method == "POST" && (r.path.ends_with("/runs/stream") || r.path.ends_with("/runs"))
        })
        .filter(|r| !r.json().unwrap().to_string().contains(OTHER_CLIENT))
        .count()
}

/// The message meets the other client's run, waits for it told once, then runs.
async fn waits_for_another_clients_run(options: Options) {
    let h = Harness::with(options).await;
    let (thread, other) = another_clients_run(&h).await;
    h.sim
        .script_next_run(Script::with_answer("The answer.").chunks(1));
    h.say("question").await;
    h.channel
        .wait_for("the queued notice", |calls| {
            calls.iter().any(|c| c.text() == QUEUED)
        })
        .await;
    // The daemon reads the other run's status while it waits.
    polled(&h, &other).await;
    let finals = h.channel.finals();
    assert!(
        !finals.iter().any(|f| f == "The answer." || f == BUSY),
        "no answer while the run holds: {finals:?}"
    );
    h.sim.finish_run(&other);
    h.channel
        .wait_for("the answer", |calls| {
            calls
                .iter()
                .any(|c| c.is_final() && c.text() == "The answer.")
        })
        .await;
    h.sim.wait_idle(&thread, DEADLINE).await.unwrap();
    let calls = h.channel.calls();
    assert_eq!(calls.iter().filter(|c| c.text() == QUEUED).count(), 1);
    h.channel.assert_never_shown(BUSY);
    assert_eq!(h.channel.finals().last().unwrap(), "The answer.");
    assert_eq!(
        h.channel
            .finals()
            .iter()
            .filter(|f| *f == "The answer.")
            .count(),
        1,
        "answered once"
    );
    // The first exchange, the start refused, the start again.
    assert_eq!(starts(&h), 3);
    h.stop().await;
}

#[tokio::test]
async fn a_message_meeting_another_clients_run_waits_for_it_then_runs() {
    waits_for_another_clients_run(Options::default()).await;
}

#[tokio::test]
async fn on_a_final_only_channel_a_message_meeting_another_clients_run_waits_too() {
    waits_for_another_clients_run(Options::final_only()).await;
}

#[tokio::test]
async fn with_busy_policy_reject_another_clients_run_gets_the_busy_reply() {
    let h = Harness::with(with_policy(BusyPolicy::Reject, 3)).await;
    let (_, other) = another_clients_run(&h).await;
    h.say("question").await;
    assert_eq!(h.channel.nth_final(2).await, BUSY);
    h.channel.assert_never_shown(QUEUED);
    assert_eq!(starts(&h), 2, "no start again");
    h.sim.finish_run(&other);
    h.stop().await;
}

#[tokio::test]
async fn a_409_with_no_run_in_flight_gets_the_busy_reply_after_a_few_attempts() {
    let h = Harness::start().await;
    h.sim.script_next_run(Script::with_answer("Hi."));
    assert_eq!(h.ask("hello", 1).await, "Hi.");
    let thread = h.only_thread();
    h.sim.wait_idle(&thread, DEADLINE).await.unwrap();
    h.sim.push_fault(
        Fault::on(Route::RunStream)
            .reply(Reply::run_busy(&thread))
            .sticky(),
    );
    h.say("question").await;
    assert_eq!(h.channel.nth_final(2).await, BUSY);
    h.channel.assert_never_shown(QUEUED);
    // The first exchange, then the refused start and three more, each after a look for
    // the run in flight.
    assert_eq!(starts(&h), 5);
    let lists = h
        .conversation_calls()
        .iter()
        .filter(|r| r.method == "GET" && r.path.ends_with("/runs"))
        .count();
    assert_eq!(lists, 3);
    h.stop().await;
}

/// Shutdown does not wait for the other run: the waiting message is stopped with its turn,
/// stays journaled, and the next start runs it once that run ended.
#[tokio::test]
async fn a_message_waiting_at_shutdown_runs_after_the_restart() {
    // The other run is held until the test ends it: the stop waits out the whole grace.
    let h = Harness::with(Options {
        grace: SHORT_GRACE,
        ..Options::default()
    })
    .await;
    let (thread, other) = another_clients_run(&h).await;
    h.say("question").await;
    h.channel
        .wait_for("the queued notice", |calls| {
            calls.iter().any(|c| c.text() == QUEUED)
        })
        .await;
    let h = h.restart().await;
    h.sim
        .script_next_run(Script::with_answer("The answer.").chunks(1));
    // The restarted daemon meets the run again, and waits for it.
    polled(&h, &other).await;
    h.sim.finish_run(&other);
    // Its answer, said to come late.
    h.channel
        .wait_for("the answer", |calls| {
            calls
                .iter()
                .any(|c| c.is_final() && c.text().ends_with("\n\nThe answer."))
        })
        .await;
    h.sim.wait_idle(&thread, DEADLINE).await.unwrap();
    h.channel.assert_never_shown(BUSY);
    assert_eq!(h.channel.finals().len(), 1, "answered once");
    h.stop().await;
}

/// A message told in its conversation's line that it waits, whose turn then meets another
/// client's run (409), waits for that run too without being told again. On a final-only
/// channel, where each notice is a message of its own (where the notice is a partial, a
/// second one is an edit the answer soon replaces).
#[tokio::test]
async fn a_message_told_in_line_that_it_waits_is_not_told_again_at_a_busy_thread() {
    let h = Harness::with(Options::final_only()).await;
    h.sim.script_next_run(Script::with_answer("Hi."));
    assert_eq!(h.ask("hello", 1).await, "Hi.");
    let thread = h.only_thread();
    h.sim.wait_idle(&thread, DEADLINE).await.unwrap();
    h.sim.script_next_run(
        Script::with_answer("The first answer.")
            .chunks(1)
            .hold(Hold::UntilFinished),
    );
    h.say("first").await;
    h.sim
        .wait_until(DEADLINE, |sim| !sim.active_runs(&thread).is_empty())
        .await
        .unwrap();
    let first = h.sim.active_runs(&thread).pop().unwrap();
    // The second message waits in line, told so; its run request, once its turn comes, is
    // held until another client's run holds the thread.
    let gate = Gate::new();
    h.sim
        .push_fault(Fault::on(Route::RunCreate).thread(&thread).gate(&gate));
    h.say("second").await;
    h.channel
        .wait_for("the queued notice", |calls| {
            calls.iter().any(|c| c.text() == QUEUED)
        })
        .await;
    h.sim.finish_run(&first);
    h.sim
        .wait_until(DEADLINE, |sim| sim.pending_faults() == 0)
        .await
        .unwrap();
    h.sim.wait_idle(&thread, DEADLINE).await.unwrap();
    let other = start_another_clients_run(&h, &thread).await;
    h.sim
        .script_next_run(Script::with_answer("The second answer.").chunks(1));
    gate.open();
    polled(&h, &other).await;
    h.sim.finish_run(&other);
    h.channel
        .wait_for("the second answer", |calls| {
            calls
                .iter()
                .any(|c| c.is_final() && c.text() == "The second answer.")
        })
        .await;
    let calls = h.channel.calls();
    assert_eq!(calls.iter().filter(|c| c.text() == QUEUED).count(), 1);
    h.channel.assert_never_shown(BUSY);
    // The first exchange, the first message, the second's start refused and started again.
    assert_eq!(starts(&h), 4);
    h.stop().await;
}
