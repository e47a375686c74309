//! A message the platform was told is taken, still waiting for a worker when the bridge is
//! killed: it was journaled as it came, so the next start answers it, in its line's order.

use im_bridge::simulator::{Hold, Script};
use im_bridge_fakes::telegram::Incoming;
use tokio::process::Child;
use tokio::time::Instant;

use super::{Crashable, DEADLINE, USER, kill9, late, with_text};

/// A second user, in a private chat of their own: a conversation of its own, waiting only
/// for a worker.
const OTHER: i64 = 4343;

/// Starts the bridge and has the test's user say something whose run goes on until the
/// test lets it end (its answer "first answer"; the next run's is "second answer").
/// Returns once the run's id is journaled.
async fn first_run_held(c: &Crashable) -> Child {
    c.sim.script_next_run(
        Script::with_answer("first answer")
            .chunks(1)
            .hold(Hold::UntilFinished),
    );
    c.sim
        .script_next_run(Script::with_answer("second answer").chunks(1));
    let daemon = c.spawn(0);
    c.say("first");
    c.wait_journal("the first run", |r| r.contains("run_id"))
        .await;
    daemon
}

#[tokio::test]
async fn a_message_waiting_for_a_worker_at_a_kill_is_answered_after_the_restart() {
    let mut c = Crashable::start().await;
    // The first message's run holds the only worker until the test lets it end.
    c.channels_keys = "  max_concurrency: 1\n".into();
    let daemon = first_run_held(&c).await;
    c.fake.inject(Incoming::private(OTHER, "me too"));
    // Telegram is told the second message was taken (the next poll confirms its update)
    // while no worker is free for it...
    let until = Instant::now() + DEADLINE;
    while !c.fake.pending_updates().is_empty() {
        assert!(Instant::now() < until, "the update was never confirmed");
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
    // ... and it is journaled all the same.
    c.wait_journal("the waiting message", |r| r.contains("me too"))
        .await;
    assert_eq!(c.run_starts(), 1, "{:?}", c.paths());
    kill9(daemon).await;

    let daemon = c.spawn(1);
    c.finish_once_joined().await;
    c.wait_text(&late("first answer")).await;
    let second = c
        .wait_text_of(OTHER, &late("second answer"), DEADLINE)
        .await;
    assert_eq!(with_text(&second, "second answer").len(), 1, "{second:?}");
    let first = c.fake.bot_messages(USER);
    assert_eq!(with_text(&first, "first answer").len(), 1, "{first:?}");
    assert_eq!(c.run_starts(), 2, "{:?}", c.paths());
    c.wait_journal_empty().await;
    drop(daemon);
}

/// Recovery keeps a conversation's line in the order the bridge took its messages, not
/// the platform's timestamps: the message taken second (with an older `date`, as a photo
/// held a moment or a clock's step gives) waits for the first one's run, which the
/// restarted bridge follows; each sender's answer is their own.
#[tokio::test]
async fn a_restart_keeps_the_order_the_messages_were_taken_in() {
    let c = Crashable::start().await;
    let daemon = first_run_held(&c).await;
    c.fake
        .inject(Incoming::private(USER, "second").sent_ago(std::time::Duration::from_secs(60)));
    c.wait_journal("the second message", |r| r.contains("\"second\""))
        .await;
    kill9(daemon).await;

    let daemon = c.spawn(1);
    c.finish_once_joined().await;
    let messages = c.wait_text(&late("second answer")).await;
    let texts: Vec<&str> = messages.iter().map(|m| m.text.as_str()).collect();
    let first = texts.iter().position(|t| *t == late("first answer"));
    let second = texts.iter().position(|t| *t == late("second answer"));
    assert!(
        matches!((first, second), (Some(f), Some(s)) if f < s),
        "{texts:?}"
    );
    assert_eq!(with_text(&messages, "first answer").len(), 1, "{texts:?}");
    assert_eq!(with_text(&messages, "second answer").len(), 1, "{texts:?}");
    assert_eq!(c.run_starts(), 2, "{:?}", c.paths());
    c.wait_journal_empty().await;
    drop(daemon);
}
