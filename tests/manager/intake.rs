//! Admission and shutdown: a serializing channel queues a conversation's messages in order,
//! a full queue tells the sender, shutdown delivers an in-flight final first or, past the
//! grace period, cancels and releases the message, and an ended input is answered in full.

use std::time::Duration;

use im_bridge::daemon::DaemonExit;
use im_bridge::simulator::{Hold, Script};

use crate::support::{Harness, Options, catalog_text, streaming};

#[tokio::test]
async fn a_serializing_channel_queues_same_conversation_messages_in_order() {
    let mut caps = streaming();
    caps.serialize_conversations = true;
    let h = Harness::with(Options {
        caps,
        channel: "console",
        ..Options::default()
    })
    .await;
    h.sim.script_next_run(
        Script::with_answer("first")
            .chunks(1)
            .hold(Hold::For(Duration::from_millis(200))),
    );
    h.sim
        .script_next_run(Script::with_answer("second").chunks(1));
    h.say("one").await;
    h.say("two").await;
    let finals = h.channel.wait_finals(2).await;
    assert_eq!(finals, ["first", "second"]);
    let texts: Vec<String> = h
        .channel
        .calls()
        .iter()
        .map(|c| c.text().to_owned())
        .collect();
    let queued = texts
        .iter()
        .position(|t| t.starts_with("Another request in this conversation is still running"))
        .expect("queue notice");
    let thinking = texts
        .iter()
        .position(|t| t == "Working on it…")
        .expect("thinking notice");
    assert!(queued < thinking, "{texts:?}");
    // No busy reply: the second run waited instead.
    assert!(
        !texts
            .iter()
            .any(|t| t.starts_with("This conversation is still busy")),
        "{texts:?}"
    );
    h.stop().await;
}

#[tokio::test]
async fn a_full_queue_tells_the_sender_instead_of_dropping_silently() {
    let h = Harness::with(Options {
        queue: 1,
        concurrency: 1,
        ..Options::final_only()
    })
    .await;
    h.sim.script_next_run(
        Script::with_answer("slow")
            .chunks(1)
            .hold(Hold::UntilFinished),
    );
    h.say("first").await;
    h.wait_until_sent(1, "/runs").await;
    // One worker is busy; the second message waits its turn in the one queue slot (it
    // holds it until it has a worker, and is told it waits), so the third is refused.
    h.say("second").await;
    h.say("third").await;
    let told = h.channel.wait_finals(2).await;
    for expected in [
        "I'm handling too many messages right now. Please try again in a minute.",
        "Another request in this conversation is still running. I'll start on yours as soon as it's done.",
    ] {
        assert!(told.iter().any(|t| t == expected), "{told:?}");
    }
    let run = h.sim.active_runs(&h.only_thread());
    h.sim.finish_run(&run[0]);
    let finals = h.channel.wait_finals(4).await;
    assert_eq!(finals[2], "slow", "{finals:?}");
    assert_eq!(
        h.sim.runs(&h.only_thread()).len(),
        2,
        "the second ran, the third did not"
    );
    h.stop().await;
}

#[tokio::test]
async fn shutdown_with_an_in_flight_run_delivers_its_final_first() {
    let h = Harness::start().await;
    h.sim.script_next_run(
        Script::with_answer("finished during shutdown")
            .chunks(2)
            .hold(Hold::For(Duration::from_millis(300))),
    );
    h.say("long task").await;
    h.wait_until_sent(1, "/runs/stream").await;
    let channel = h.channel.clone();
    h.stop().await;
    assert_eq!(channel.finals(), ["finished during shutdown"]);
}

#[tokio::test]
async fn issue_19_shutdown_past_the_grace_period_leaves_the_turn_to_the_next_start() {
    let h = Harness::with(Options {
        grace: Duration::from_millis(100),
        ..Options::final_only()
    })
    .await;
    h.sim.script_next_run(
        Script::with_answer("the answer")
            .chunks(1)
            .hold(Hold::UntilFinished),
    );
    let msg = h.say("stuck").await;
    // Joined: the run's id is journaled by then.
    h.wait_until_sent(1, "/join").await;
    let h = h.restart().await;
    // The run outlived the stopped bridge (`on_disconnect: continue`); the next start
    // follows it by id, and the platform's redelivery is a duplicate.
    h.wait_until_sent(2, "/join").await;
    h.send(msg).await;
    h.finish_runs();
    let late = catalog_text("en-US")("run-recovered", &[]);
    assert_eq!(
        h.channel.wait_finals(1).await,
        [format!("{late}\n\nthe answer")]
    );
    let starts = h
        .sim
        .requests()
        .iter()
        .filter(|r| r.method == "POST" && r.path.ends_with("/runs"))
        .count();
    assert_eq!(starts, 1, "the run is not started twice");
    h.stop().await;
}

#[tokio::test]
async fn when_input_ends_every_admitted_message_is_answered_before_exit() {
    let mut h = Harness::with(Options {
        grace: Duration::from_millis(1),
        ..Options::final_only()
    })
    .await;
    for i in 0..3 {
        h.sim.script_next_run(
            Script::with_answer(format!("answer {i}"))
                .chunks(1)
                .hold(Hold::For(Duration::from_millis(100))),
        );
    }
    for i in 0..3 {
        let mut msg = h.message(&format!("q{i}"));
        msg.chat_id = format!("chat{i}").into();
        h.send(msg).await;
    }
    // The grace period is tiny, but an ended input waits for the work it admitted.
    let exit = h.end_input().await;
    assert_eq!(exit, DaemonExit::InputEnded);
    let mut finals = h.channel.finals();
    finals.sort();
    assert_eq!(finals, ["answer 0", "answer 1", "answer 2"]);
}
