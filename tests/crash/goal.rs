//! `/goal from-chat` across `kill -9`: a goal the Gateway composed (with its model, which
//! takes time and tokens) before the bridge died is not composed again. The restarted
//! bridge starts the run on the objective the journal entry recorded, on the same thread,
//! and does not say again that the goal was saved. Run on SQLite and, where a PostgreSQL
//! server is at hand, on PostgreSQL.

use std::time::Duration;

use im_bridge::simulator::{Fault, RecordedRequest, Route, Script};
use tokio::time::Instant;

use super::{Crashable, DEADLINE, kill9, late, with_text};
use crate::support::{PgSchema, goal_met_at_once};

/// What the user asked for before the goal: what the Gateway composes the goal from.
const ASKED: &str = "Please help me write the quarterly report";
/// The hint of the command, so the composed objective is not the message before it.
const COMMAND: &str = "/goal from-chat the numbers";
/// The objective the Gateway composes from [`ASKED`] and the hint.
const OBJECTIVE: &str = "Please help me write the quarterly report (focus: the numbers)";
/// The answer of the run on the objective.
const ANSWER: &str = "Working on the report now.";

/// A request that starts a streamed run.
fn run_start(r: &RecordedRequest) -> bool {
    r.method == "POST" && r.path.ends_with("/runs/stream")
}

/// Binds the conversation, then sends `/goal from-chat` and kills the bridge once the
/// Gateway saved the composed goal and the "saved" line landed, while the goal's run
/// request waits before the Gateway starts the run (so no run is found after the crash).
/// Starts the bridge again and waits, for at most `within`, for the recovered answer:
/// the Gateway composed one goal, the chat shows the "saved" line once and the answer
/// once, and the recovered run is on the composed objective, on the same thread.
async fn composed_before_a_crash(c: &Crashable, within: Duration) -> tokio::process::Child {
    c.sim
        .script_next_run(Script::with_answer("Sure, let's plan it.").chunks(1));
    let daemon = c.spawn(0);
    c.say(ASKED);
    c.wait_text("Sure, let's plan it.").await;
    c.sim
        .push_fault(Fault::on(Route::RunStream).delay(Duration::from_secs(600)));
    c.sim.script_next_run(goal_met_at_once(ANSWER));
    c.say(COMMAND);
    c.sim
        .wait_for_requests(2, DEADLINE, run_start)
        .await
        .unwrap_or_else(|_| panic!("the goal's run request: {:?}", c.paths()));
    let saved = format!("Goal set from our conversation: {OBJECTIVE}");
    c.wait_text(&saved).await;
    kill9(daemon).await;
    c.sim.clear_faults();
    let daemon = c.spawn(1);
    let messages = c.wait_text_within(&late(ANSWER), within).await;
    assert_eq!(with_text(&messages, &saved).len(), 1, "{messages:?}");
    assert_eq!(with_text(&messages, ANSWER).len(), 1, "{messages:?}");
    // The binding's run, the request the first bridge died waiting on, the recovered run.
    let runs = c.sim.requests_matching(run_start);
    assert_eq!(runs.len(), 3, "{:?}", c.paths());
    // Each start also probes the route, on a thread of its own.
    let composed = c.sim.requests_matching(|r| {
        r.method == "POST"
            && r.path.ends_with("/goal/from-chat")
            && !r.path.contains("im-bridge-route-probe")
    });
    assert_eq!(composed.len(), 1, "{:?}", c.paths());
    assert_eq!(runs[2].path, runs[1].path, "the same thread");
    let input = runs[2].json().map(ToString::to_string).unwrap_or_default();
    assert!(input.contains(OBJECTIVE), "{input}");
    assert!(
        c.log(1)
            .contains("Starting the run on a goal composed before the restart."),
        "{}",
        c.log(1)
    );
    daemon
}

#[tokio::test]
async fn a_goal_composed_before_a_crash_is_not_composed_again() {
    let c = Crashable::start().await;
    let daemon = composed_before_a_crash(&c, DEADLINE).await;
    c.wait_journal_empty().await;
    drop(daemon);
}

#[tokio::test]
async fn with_postgres_a_goal_composed_before_a_crash_is_not_composed_again() {
    let Some(pg) = PgSchema::create("im_bridge_crash_goal").await else {
        return;
    };
    let c = Crashable::with_short_leases(tempfile::tempdir().unwrap(), pg.url.clone()).await;
    // The restarted bridge takes the entry once the killed one's lease ran out.
    let daemon = composed_before_a_crash(&c, Duration::from_secs(90)).await;
    let until = Instant::now() + DEADLINE;
    while !pg.journal_records().await.is_empty() {
        assert!(
            Instant::now() < until,
            "the journal kept entries\n{}",
            c.logs()
        );
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    drop(daemon);
    pg.drop().await;
}
