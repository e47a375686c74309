//! When a run does not go to plan: a busy thread gets the busy reply (in either wording) and
//! no retry under `busy_policy: reject` (under `queue` it waits first: `busy_thread`), an error or a dropped stream still ends in exactly one final without leaking
//! server text, and a Gateway that is down gets an honest reply and leaves the message
//! retryable.

use im_bridge::manager::BusyPolicy;
use im_bridge::simulator::{Failure, Fault, Reply, Route, Script};

use super::queueing::policy_on;
use crate::support::{Harness, Options};

/// `options` with `busy_policy: reject`: a busy thread is not waited for.
fn rejecting(options: Options) -> Options {
    policy_on(options, BusyPolicy::Reject, 3)
}

#[tokio::test]
async fn with_busy_policy_reject_a_busy_thread_gets_the_busy_reply_and_no_retry() {
    let h = Harness::with(rejecting(Options::default())).await;
    h.sim
        .script_next_run(Script::rejected(Reply::run_busy("x")));
    h.say("are you there?").await;
    let finals = h.channel.wait_finals(1).await;
    assert_eq!(
        finals,
        [
            "This conversation is still busy with an earlier request. Please wait until it finishes, then send your message again."
        ]
    );
    // The busy message's dedupe key was released, so the platform may redeliver it, but
    // the manager itself does not retry.
    h.say("/status").await;
    h.channel.wait_finals(2).await;
    assert_eq!(h.streamed_runs(), 1);
    h.stop().await;
}

#[tokio::test]
async fn the_langgraph_busy_wording_is_busy_too() {
    let h = Harness::with(rejecting(Options::final_only())).await;
    h.sim
        .script_next_run(Script::rejected(Reply::already_running_task(400)));
    let reply = h.ask("hi", 1).await;
    assert!(
        reply.starts_with("This conversation is still busy"),
        "{reply:?}"
    );
    h.stop().await;
}

#[tokio::test]
async fn an_error_event_mid_stream_still_yields_exactly_one_final_with_the_partial_text() {
    let h = Harness::start().await;
    h.sim.script_next_run(
        Script::with_answer("Partial answer that is cut")
            .chunks(4)
            .error_mid_stream("MARKER-ERR secret model text", "ValueError"),
    );
    h.say("go").await;
    h.channel.wait_finals(1).await;
    // Wait for the daemon to be idle, then check nothing more arrives.
    h.say("/status").await;
    let finals = h.channel.wait_finals(2).await;
    assert_eq!(finals.len(), 2);
    assert!(!finals[0].is_empty());
    assert!(!finals[0].contains("MARKER-ERR"));
    h.channel.assert_never_shown("MARKER-ERR");
    h.stop().await;
}

#[tokio::test]
async fn an_error_before_any_text_yields_the_failure_sentence() {
    let h = Harness::start().await;
    h.sim
        .script_next_run(Script::with_answer("x").chunks(1).fail_after_chunk(
            0,
            Failure::Error {
                message: "boom".into(),
                name: "RuntimeError".into(),
            },
        ));
    h.say("go").await;
    let finals = h.channel.wait_finals(1).await;
    assert_eq!(
        finals,
        ["Something went wrong while the agent was working on this. Please try again."]
    );
    h.stop().await;
}

#[tokio::test]
async fn a_dropped_stream_still_yields_exactly_one_final() {
    let h = Harness::start().await;
    h.sim.script_next_run(
        Script::with_answer("This will be cut off halfway")
            .chunks(6)
            .drop_mid_stream(),
    );
    let msg = h.say("go").await;
    let finals = h.channel.wait_finals(1).await;
    assert_eq!(finals.len(), 1);
    // The failed run released its dedupe key: a redelivery runs again.
    h.sim
        .script_next_run(Script::with_answer("second try").chunks(1));
    h.send(msg).await;
    assert_eq!(h.channel.nth_final(2).await, "second try");
    h.stop().await;
}

#[tokio::test]
async fn a_gateway_that_is_down_gets_an_honest_reply() {
    let h = Harness::final_only().await;
    h.sim.push_fault(
        Fault::on(Route::CreateThread)
            .reply(Reply::html(503))
            .sticky(),
    );
    let msg = h.say("hello?").await;
    assert_eq!(
        h.channel.nth_final(1).await,
        "I can't reach the agent right now. Please try again in a little while."
    );
    // Nothing was bound or run, and the message may be retried.
    h.sim.clear_faults();
    h.sim.script_next_run(Script::with_answer("back").chunks(1));
    h.send(msg).await;
    assert_eq!(h.channel.nth_final(2).await, "back");
    h.stop().await;
}

/// Issue 13: partial text is never passed off as complete. A run that fails after text was
/// shown keeps that text and ends with a localized line saying the answer was cut off.
#[tokio::test]
async fn issue_13_a_stream_broken_mid_way_ends_with_the_interrupted_line_in_every_locale() {
    for (locale, line) in [
        (
            "en-US",
            "(This answer was cut off: something went wrong before the agent finished.)",
        ),
        ("zh-CN", "（回答没有写完：智能体完成之前出了问题。）"),
        (
            "zh-TW",
            "（這則回答沒有寫完：AI 代理程式完成前發生了問題。）",
        ),
        (
            "ja-JP",
            "（この回答は途中で途切れています。エージェントの処理が終わる前に問題が発生しました。）",
        ),
    ] {
        let h = Harness::with(crate::support::Options::default().notification_locale(locale)).await;
        h.sim.script_next_run(
            Script::with_answer("Partial answer that is cut")
                .chunks(4)
                .error_mid_stream("MARKER-ERR secret model text", "ValueError"),
        );
        h.say("go").await;
        let last = h.channel.nth_final(1).await;
        assert!(last.starts_with("Partial answer"), "{locale}: {last:?}");
        assert!(last.ends_with(&format!("\n\n{line}")), "{locale}: {last:?}");
        assert!(!last.contains("MARKER-ERR"));
        // A failure before any text still gets the plain failure sentence, no cut-off line.
        h.sim.script_next_run(
            Script::with_answer("never shown")
                .chunks(2)
                .fail_after_chunk(0, Failure::DropConnection),
        );
        h.say("again").await;
        let failed = h.channel.nth_final(2).await;
        assert!(!failed.contains(line), "{locale}: {failed:?}");
        h.stop().await;
    }
}

/// Audit finding 3: DeerFlow ends a run `error` without an `error` event after the run
/// published its answer (the LLM error fallback answered, or outputs were left
/// unpresented: `runtime/runs/worker.py`, final status). On a final-only channel that
/// answer is complete: no cut-off line, and the message's dedupe key is kept. A run that
/// sent `error` still fails.
#[tokio::test]
async fn a_run_ending_error_without_an_error_event_after_its_answer_is_complete() {
    let h = Harness::final_only().await;
    h.sim.script_next_run(
        Script::with_answer("The whole answer.")
            .chunks(2)
            .error_status(),
    );
    let msg = h.say("go").await;
    assert_eq!(h.channel.nth_final(1).await, "The whole answer.");
    // Kept: a redelivery is a duplicate, not a second run.
    h.send(msg).await;
    let status = h.ask("/status", 2).await;
    assert_ne!(status, "The whole answer.");
    let runs = h
        .sim
        .requests_matching(|r| r.method == "POST" && r.path.ends_with("/runs"));
    assert_eq!(runs.len(), 1);
    h.sim.script_next_run(
        Script::with_answer("Partial answer that is cut")
            .chunks(4)
            .error_mid_stream("MARKER-ERR secret model text", "ValueError"),
    );
    let failed = h.ask("again", 3).await;
    assert!(failed.to_lowercase().contains("went wrong"), "{failed:?}");
    h.stop().await;
}
