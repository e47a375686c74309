//! `/compact` in chat (issue 8): every outcome in every shipped locale, the no-binding path, the
//! `keep` argument, and a `/compact` while a run streams.

use std::time::Duration;

use im_bridge::i18n::{Arg, msg};
use im_bridge::simulator::{Fault, Hold, Reply, Route, Script};

use crate::support::{Harness, Options, catalog_text, goal_met_at_once, shipped_locales};

/// A final-only channel in locale `tag`, with a Gateway timeout (`from_chat_timeout`, which
/// also bounds `/compact`) short enough that a delayed reply times out quickly.
fn options(tag: &str) -> Options {
    Options {
        from_chat_timeout: Duration::from_millis(300),
        ..Options::final_only().notification_locale(tag)
    }
}

/// Has `n` question-and-answer turns, after `finals_before` finals.
async fn chat(h: &Harness, n: usize, finals_before: usize) {
    for i in 0..n {
        h.sim
            .script_next_run(Script::with_answer(format!("answer {i}")).chunks(1));
        h.say(&format!("question {i}")).await;
        h.channel.wait_finals(finals_before + i + 1).await;
    }
}

#[tokio::test]
async fn no_conversation_means_nothing_to_compact_and_no_call() {
    let h = Harness::with(options("en-US")).await;
    assert_eq!(
        h.ask("/compact", 1).await,
        "There's no conversation to condense yet."
    );
    assert!(h.conversation_calls().is_empty());
    assert!(h.sim.thread_ids().is_empty());
    h.stop().await;
}

#[tokio::test]
async fn every_outcome_in_every_shipped_locale() {
    for tag in shipped_locales() {
        let tag = tag.as_str();
        let text = catalog_text(tag);
        let h = Harness::with(options(tag)).await;
        chat(&h, 1, 0).await;
        // Two messages: under the simulator's threshold of four.
        assert_eq!(
            h.ask("/compact", 2).await,
            text(msg::COMPACT_NOT_NEEDED, &[]),
            "{tag}"
        );
        chat(&h, 2, 2).await;
        let done = h.ask("/compact", 5).await;
        assert_eq!(
            done,
            text(
                msg::COMPACT_DONE,
                &[("removed", Arg::Num(4)), ("kept", Arg::Num(2))]
            ),
            "{tag}"
        );
        assert_eq!(h.last_body("/compact")["force"], true);
        h.sim.configure(|c| c.compaction_enabled = false);
        assert_eq!(
            h.ask("/compact", 6).await,
            text(msg::COMPACT_DISABLED, &[]),
            "{tag}"
        );
        h.sim.configure(|c| c.compaction_enabled = true);
        h.sim.push_fault(
            Fault::on(Route::Compact)
                .reply(Reply::detail(500, "Failed to compact thread context.")),
        );
        assert_eq!(
            h.ask("/compact", 7).await,
            text(msg::COMPACT_FAILED, &[]),
            "{tag}"
        );
        h.sim
            .push_fault(Fault::on(Route::Compact).delay(Duration::from_secs(2)));
        assert_eq!(
            h.ask("/compact", 8).await,
            text(msg::COMPACT_TIMEOUT, &[]),
            "{tag}"
        );
        h.sim
            .push_fault(Fault::on(Route::Compact).reply(Reply::detail(
                409,
                "Thread has a run in flight. Compact after the run finishes.",
            )));
        assert_eq!(
            h.ask("/context compact", 9).await,
            text(msg::COMPACT_BUSY, &[]),
            "{tag}"
        );
        // A Gateway from before compaction has no such route (FastAPI's bare 404).
        h.sim
            .push_fault(Fault::on(Route::Compact).reply(Reply::detail(404, "Not Found")));
        assert_eq!(
            h.ask("/compact", 10).await,
            text(msg::COMPACT_DISABLED, &[]),
            "{tag}"
        );
        // The thread was deleted in DeerFlow: nothing to condense (the next message
        // starts another), not a failure to try again.
        h.sim
            .push_fault(Fault::on(Route::Compact).reply(Reply::detail(404, "Thread not found")));
        assert_eq!(
            h.ask("/compact", 11).await,
            text(msg::COMPACT_NOTHING, &[]),
            "{tag}"
        );
        for f in h.channel.finals() {
            assert!(
                !f.contains("Failed to compact"),
                "the Gateway's text never reaches users: {f}"
            );
        }
        h.stop().await;
    }
}

#[tokio::test]
async fn keep_argument_and_its_bad_input() {
    let h = Harness::with(options("en-US")).await;
    chat(&h, 3, 0).await;
    let done = h.ask("/compact keep 3", 4).await;
    assert!(done.contains("the latest 3 were kept"), "{done}");
    assert_eq!(
        h.last_body("/compact")["keep"],
        serde_json::json!({"type": "messages", "value": 3})
    );
    let before = h.conversation_calls().len();
    for (i, bad) in [
        "/compact keep",
        "/compact keep 0",
        "/compact keep lots",
        "/compact everything",
        "/context",
        "/context everything",
    ]
    .iter()
    .enumerate()
    {
        h.say(bad).await;
        let finals = h.channel.wait_finals(5 + i).await;
        assert!(
            finals[4 + i].starts_with("To condense this conversation, send /compact"),
            "{bad}: {finals:?}"
        );
    }
    assert_eq!(
        h.conversation_calls().len(),
        before,
        "bad input sends nothing"
    );
    h.stop().await;
}

#[tokio::test]
async fn the_configured_agent_summarizes() {
    let mut o = options("en-US");
    o.manager.session.assistant_id = Some("Report_Writer".into());
    let h = Harness::with(o).await;
    chat(&h, 2, 0).await;
    h.say("/compact").await;
    h.channel.wait_finals(3).await;
    let body = h.last_body("/compact");
    assert_eq!(body["agent_name"], "report-writer");
    assert!(body.get("model_name").is_none(), "no model named: {body}");
    h.stop().await;
}

/// The model the conversation's runs name (`session.context.model_name`) writes the
/// summary too, not the Gateway's default (which may not fit the thread).
#[tokio::test]
async fn the_chats_model_summarizes() {
    let mut o = options("en-US");
    o.manager
        .session
        .context
        .insert("model_name".into(), serde_json::json!("gpt-long-context"));
    let h = Harness::with(o).await;
    chat(&h, 2, 0).await;
    h.say("/compact").await;
    h.channel.wait_finals(3).await;
    assert_eq!(h.last_body("/compact")["model_name"], "gpt-long-context");
    h.stop().await;
}

#[tokio::test]
async fn compact_during_a_streaming_run_is_busy_and_the_run_still_finishes() {
    let h = Harness::with(Options {
        from_chat_timeout: Duration::from_secs(5),
        ..Options::default()
    })
    .await;
    chat(&h, 2, 0).await;
    h.sim.script_next_run(
        Script::with_answer("the long answer")
            .chunks(2)
            .hold(Hold::UntilFinished),
    );
    h.say("a long task").await;
    h.wait_until_sent(3, "/runs/stream").await;
    h.say("/compact").await;
    let finals = h.channel.wait_finals(3).await;
    assert_eq!(
        finals[2],
        "A task is still running in this conversation. Please send /compact again once it has finished."
    );
    h.finish_runs();
    let finals = h.channel.wait_finals(4).await;
    assert_eq!(finals[3], "the long answer");
    h.stop().await;
}

/// Two turns on a final-only channel, then a `/compact` that DeerFlow takes 1.5 s over,
/// its request sent.
async fn compacting() -> Harness {
    let h = Harness::with(Options {
        from_chat_timeout: Duration::from_secs(5),
        ..Options::final_only()
    })
    .await;
    chat(&h, 2, 0).await;
    h.sim
        .push_fault(Fault::on(Route::Compact).delay(Duration::from_millis(1500)));
    h.say("/compact").await;
    h.wait_until_sent(1, "/compact").await;
    h
}

/// A message sent right after `/compact`, while DeerFlow still compacts the thread (which
/// holds its checkpoint writes meanwhile): its run starts once the compaction returned, so
/// it is answered, not refused as busy (or, on a single-process Gateway, left waiting on
/// the thread past the bridge's timeout and then run with no one to take its answer).
#[tokio::test]
async fn a_message_sent_during_a_compaction_is_answered_after_it() {
    let h = compacting().await;
    h.sim
        .script_next_run(Script::with_answer("after the compaction").chunks(1));
    h.say("next question").await;
    let finals = h.channel.wait_finals(4).await;
    let text = catalog_text("en-US");
    let done = text(
        msg::COMPACT_DONE,
        &[("removed", Arg::Num(2)), ("kept", Arg::Num(2))],
    );
    assert_eq!(finals[2..], [done.as_str(), "after the compaction"]);
    h.stop().await;
}

/// A `/goal` sent right after `/compact`, while DeerFlow still compacts the thread: the
/// goal is written once the compaction returned, not refused as busy, and its run answers.
#[tokio::test]
async fn a_goal_set_during_a_compaction_is_saved_after_it() {
    let h = compacting().await;
    h.sim.script_next_run(goal_met_at_once("the goal's answer"));
    h.say("/goal finish the quarterly report").await;
    let answered = |_: &[_]| h.channel.finals().iter().any(|f| f == "the goal's answer");
    h.channel.wait_for("the goal's answer", answered).await;
    let busy = catalog_text("en-US")(msg::GOAL_BUSY_UNCHANGED, &[]);
    h.channel.assert_never_shown(&busy);
    h.stop().await;
}

/// The report reads in the singular all through when one message was kept.
#[test]
fn one_kept_message_reads_in_the_singular() {
    let text = catalog_text("en-US");
    let done = |removed, kept| {
        text(
            msg::COMPACT_DONE,
            &[("removed", Arg::Num(removed)), ("kept", Arg::Num(kept))],
        )
    };
    let one = done(1, 1);
    assert!(
        one.contains("one message was summarized and the latest one was kept as it is. "),
        "{one}"
    );
    let more = done(4, 2);
    assert!(
        more.contains("4 messages were summarized and the latest 2 were kept as they are. "),
        "{more}"
    );
}
