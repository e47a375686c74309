//! Issue 26: following a run by id on a final-only channel, as DeerFlow serves it. The join
//! is the run's event stream; a join that loses its connection joins again, and a run on a
//! Gateway worker that cannot stream it (409) is polled by status, then read from the
//! thread's state. Each ends in exactly one answer from exactly one run.

use im_bridge::simulator::{Fault, Hold, Reply, Route, Script};

use crate::support::{DEADLINE, Harness};

/// Run starts the simulator saw (`POST …/runs`).
fn run_starts(h: &Harness) -> usize {
    h.sim
        .requests_matching(|r| r.method == "POST" && r.path.ends_with("/runs"))
        .len()
}

/// Joins the simulator saw.
fn joins(h: &Harness) -> usize {
    h.sim.requests_matching(|r| r.path.ends_with("/join")).len()
}

#[tokio::test]
async fn issue_26_a_final_only_answer_comes_through_the_joined_event_stream() {
    let h = Harness::final_only().await;
    h.sim
        .script_next_run(Script::with_answer("the whole answer").chunks(3));
    assert_eq!(h.ask("hi", 1).await, "the whole answer");
    let join = h
        .sim
        .requests_matching(|r| r.path.ends_with("/join"))
        .pop()
        .unwrap();
    assert_eq!(join.status, Some(200));
    assert_eq!(
        join.headers.get("accept").map(String::as_str),
        Some("text/event-stream")
    );
    assert_eq!(run_starts(&h), 1);
    h.stop().await;
}

#[tokio::test]
async fn issue_26_a_join_that_lost_its_connection_joins_again() {
    let h = Harness::final_only().await;
    h.sim.script_next_run(
        Script::with_answer("still here")
            .chunks(1)
            .hold(Hold::UntilFinished),
    );
    // The first join's connection is cut before any answer.
    h.sim
        .push_fault(Fault::on(Route::RunJoin).drop_connection());
    h.say("hi").await;
    h.sim
        .wait_for_requests(2, DEADLINE, |r| r.path.ends_with("/join"))
        .await
        .unwrap();
    h.finish_runs();
    assert_eq!(h.channel.nth_final(1).await, "still here");
    assert_eq!(
        run_starts(&h),
        1,
        "the run is followed, never started again"
    );
    assert_eq!(joins(&h), 2);
    h.stop().await;
}

#[tokio::test]
async fn issue_26_a_run_on_another_worker_is_polled_until_it_ended() {
    let h = Harness::final_only().await;
    h.sim.script_next_run(
        Script::with_answer("done elsewhere")
            .chunks(1)
            .hold(Hold::UntilFinished),
    );
    // DeerFlow's answer when the run's stream lives on a worker this one cannot read.
    h.sim
        .push_fault(Fault::on(Route::RunJoin).reply(Reply::detail(
            409,
            "Run r is not active on this worker and cannot be streamed",
        )));
    h.say("hi").await;
    // Polled by status while it runs.
    let thread_runs = |r: &im_bridge::simulator::RecordedRequest| {
        r.method == "GET" && r.path.contains("/runs/") && !r.path.ends_with("/join")
    };
    h.sim
        .wait_for_requests(1, DEADLINE, thread_runs)
        .await
        .unwrap();
    h.finish_runs();
    assert_eq!(h.channel.nth_final(1).await, "done elsewhere");
    assert_eq!(run_starts(&h), 1);
    assert_eq!(joins(&h), 1, "no second join: the status is polled");
    assert!(
        h.sim
            .requests_matching(|r| r.path.ends_with("/state"))
            .len()
            >= 1,
        "the answer is read from the thread's state"
    );
    h.stop().await;
}
