//! The agent's question in a group waits for its answer in the store: a restart between the
//! question and the answer still joins the answer to the asking conversation, and with
//! replicas sharing PostgreSQL the answer joins it on whichever replica it reaches, once. A
//! redelivery of the asking message, dropped, leaves the question to the answer, and so
//! does an answer whose run never started.
//!
//! Where a message gives the question back, the test waits for the daemon's log line saying
//! so before the next message goes: the dispatcher's bounded wait for such a give-back
//! (its unit tests, `clarify/tests.rs`) is not what these tests are about, so no wall-clock
//! bound decides them.

use im_bridge::config::StoreLocation;
use im_bridge::simulator::{
    Fault, Reply, Route, RunningSimulator, Script, Simulator, SimulatorConfig,
};
use im_bridge_channel::{ChatKind, InboundMessage, Secret};

use crate::security::Capture;
use crate::support::{
    DEADLINE, Harness, Options, PgSchema, Spawned, catalog_text, message_on, spawn_daemon,
    stop_cleanly,
};

const QUESTION: &str = "Which quarter?";

/// What the daemon logs once a message not run gave the question back.
const GAVE_BACK: &str = "Gave the agent's question back";

/// Waits until the daemon logged `n` give-backs.
async fn given_back(capture: &Capture, n: usize) {
    let what = format!("{n} give-backs");
    capture
        .wait_for(&what, |logs| logs.matches(GAVE_BACK).count() >= n)
        .await;
}

/// A plain group message from `u1` in `c1`: no reply, no thread, so its topic is its own
/// message (a conversation of its own, unless it answers a question).
fn plain_in_group(text: &str) -> InboundMessage {
    let mut msg = message_on("telegram", text);
    msg.chat_kind = ChatKind::Group;
    msg.topic_id = msg.thread_ts.as_ref().map(|id| id.as_str().to_owned());
    msg
}

/// The agent's next run asks [`QUESTION`].
fn asks(sim: &RunningSimulator) {
    sim.script_next_run(
        Script::with_answer("")
            .chunks(1)
            .ask_clarification(QUESTION),
    );
}

#[tokio::test]
async fn a_restart_between_the_question_and_the_answer_still_joins_the_answer() {
    let h = Harness::start().await;
    asks(&h.sim);
    h.send(plain_in_group("write the report")).await;
    assert_eq!(h.channel.nth_final(1).await, QUESTION);
    let h = h.restart().await;
    h.sim
        .script_next_run(Script::with_answer("The Q3 report it is.").chunks(1));
    h.send(plain_in_group("Q3")).await;
    assert_eq!(h.channel.nth_final(1).await, "The Q3 report it is.");
    let thread = h.only_thread();
    assert_eq!(
        h.sim.runs(&thread).len(),
        2,
        "the answer ran on the asking thread"
    );
    h.stop().await;
}

/// A platform redelivering the asking message (a reconnect, a webhook retry) before the
/// user's answer: the copy is dropped as a redelivery, and the answer still joins the
/// asking conversation.
#[tokio::test]
async fn a_redelivered_question_still_waits_for_the_answer() {
    let (capture, _guard) = Capture::start(&[]);
    let h = Harness::start().await;
    asks(&h.sim);
    let asking = plain_in_group("write the report");
    h.send(asking.clone()).await;
    assert_eq!(h.channel.nth_final(1).await, QUESTION);
    h.sim
        .script_next_run(Script::with_answer("The Q3 report it is.").chunks(1));
    h.send(asking).await;
    given_back(&capture, 1).await;
    h.send(plain_in_group("Q3")).await;
    assert_eq!(h.channel.nth_final(2).await, "The Q3 report it is.");
    let thread = h.only_thread();
    assert_eq!(
        h.sim.runs(&thread).len(),
        2,
        "the answer ran on the asking thread, the copy not at all"
    );
    h.stop().await;
}

/// The Gateway down when the answer comes: its run never started, so the agent never saw
/// it. The user, told so, answers again, and that joins the asking conversation.
#[tokio::test]
async fn an_answer_whose_run_never_started_leaves_the_question_waiting() {
    let (capture, _guard) = Capture::start(&[]);
    let h = Harness::start().await;
    asks(&h.sim);
    h.send(plain_in_group("write the report")).await;
    assert_eq!(h.channel.nth_final(1).await, QUESTION);
    let thread = h.only_thread();
    let down = Fault::on(Route::RunStream).thread(thread.as_str());
    h.sim.push_fault(down.reply(Reply::html(503)));
    h.send(plain_in_group("Q3")).await;
    let unavailable = catalog_text("en-US")("err-gateway-unavailable", &[]);
    assert_eq!(h.channel.nth_final(2).await, unavailable);
    given_back(&capture, 1).await;
    h.sim
        .script_next_run(Script::with_answer("The Q3 report it is.").chunks(1));
    h.send(plain_in_group("Q3, again")).await;
    assert_eq!(h.channel.nth_final(3).await, "The Q3 report it is.");
    assert_eq!(h.only_thread(), thread, "no conversation of its own");
    assert_eq!(
        h.sim.runs(&thread).len(),
        2,
        "the question's and the answer's"
    );
    h.stop().await;
}

/// A daemon on the shared store at `url`, fed by a test channel of its own.
fn replica(sim: &RunningSimulator, url: &str) -> Spawned {
    let store = StoreLocation::Postgres(Secret::new(url.to_owned()));
    spawn_daemon(sim, store, &Options::default())
}

async fn send(replica: &Spawned, msg: InboundMessage) {
    replica.feed.send(msg).await.unwrap();
}

async fn stop(replica: Spawned) {
    stop_cleanly(replica.shutdown, replica.daemon, DEADLINE).await;
}

#[tokio::test]
async fn with_replicas_on_postgres_the_answer_joins_the_question_on_the_other_replica_once() {
    answered_on_the_other_replica_once(false).await;
}

/// On PostgreSQL too, a redelivered asking message gives the question it took back: the
/// answer after it joins the asking conversation, and no replica joins it twice.
#[tokio::test]
async fn with_replicas_on_postgres_a_redelivered_question_still_waits_for_the_answer() {
    answered_on_the_other_replica_once(true).await;
}

/// Replica `a` asks; the answer reaches `b` (after a redelivery of the asking message
/// there gave the question back, when `redelivered`) and continues the asking
/// conversation, once.
async fn answered_on_the_other_replica_once(redelivered: bool) {
    let Some(pg) = PgSchema::create("im_bridge_questions").await else {
        return;
    };
    let (capture, _guard) = Capture::start(&[]);
    let sim = Simulator::start(SimulatorConfig::default()).await.unwrap();
    let a = replica(&sim, &pg.url);
    let b = replica(&sim, &pg.url);
    asks(&sim);
    let asking = plain_in_group("write the report");
    send(&a, asking.clone()).await;
    assert_eq!(a.channel.nth_final(1).await, QUESTION);
    sim.script_next_run(Script::with_answer("The Q3 report it is.").chunks(1));
    if redelivered {
        send(&b, asking).await;
        given_back(&capture, 1).await;
    }
    send(&b, plain_in_group("Q3")).await;
    assert_eq!(b.channel.nth_final(1).await, "The Q3 report it is.");
    let threads = sim.thread_ids();
    assert_eq!(threads.len(), 1, "{threads:?}");
    assert_eq!(sim.runs(&threads[0]).len(), 2);
    // Taken once: the next plain message, on the first replica, starts its own.
    sim.script_next_run(Script::with_answer("Something else.").chunks(1));
    send(&a, plain_in_group("and lunch?")).await;
    assert_eq!(a.channel.nth_final(2).await, "Something else.");
    assert_eq!(sim.thread_ids().len(), 2);
    stop(a).await;
    stop(b).await;
    pg.drop().await;
}
