//! The `/goal` family in chat (issue 5): every outcome, through the real daemon and the
//! Gateway simulator.

use std::time::Duration;

use im_bridge::i18n::Arg;
use im_bridge::simulator::{
    Fault, GoalEvaluation, GoalState, Hold, RecordedRequest, Reply, Route, Script, SimulatorConfig,
};

use crate::support::{Harness, Options, catalog_text, goal_met_at_once, shipped_locales};

/// Sends one chat message so the conversation has a thread, and returns it.
async fn bind(h: &Harness, finals_before: usize) -> String {
    h.sim.script_next_run(
        Script::with_answer("Sure, let's plan the quarterly report together.").chunks(1),
    );
    h.say("Please help me write the quarterly report").await;
    h.channel.wait_finals(finals_before + 1).await;
    h.only_thread()
}

fn goal_calls(h: &Harness) -> usize {
    h.conversation_calls()
        .iter()
        .filter(|r| r.path.contains("/goal"))
        .count()
}

/// A request that starts a run (a chat turn's or a goal's), not one that follows one.
fn is_run_start(r: &RecordedRequest) -> bool {
    r.method == "POST"
        && ["/runs", "/runs/wait", "/runs/stream"]
            .iter()
            .any(|s| r.path.ends_with(s))
}

fn run_calls(h: &Harness) -> usize {
    h.conversation_calls()
        .iter()
        .filter(|r| is_run_start(r))
        .count()
}

#[tokio::test]
async fn status_and_clear_without_a_conversation_make_no_call() {
    let h = Harness::final_only().await;
    assert_eq!(
        h.ask("/goal", 1).await,
        "There's no active goal in this conversation."
    );
    assert_eq!(h.ask("/goal clear", 2).await, "The goal is cleared.");
    let refusal = h.ask("/goal from-chat", 3).await;
    assert!(
        refusal.starts_with("There's nothing in this conversation yet to build a goal from."),
        "{refusal}"
    );
    assert!(
        h.conversation_calls().is_empty(),
        "{:?}",
        h.conversation_calls()
    );
    h.stop().await;
}

#[tokio::test]
async fn set_saves_then_starts_exactly_one_run() {
    let h = Harness::final_only().await;
    h.sim.script_next_run(goal_met_at_once("On it."));
    h.say("/goal ship the quarterly report").await;
    assert_eq!(h.channel.wait_finals(1).await, ["On it."]);
    let requests = h.conversation_calls();
    let put = requests
        .iter()
        .position(|r| r.method == "PUT" && r.path.ends_with("/goal"))
        .expect("PUT");
    let run = requests.iter().position(is_run_start).expect("run");
    assert!(put < run, "the goal is saved before the run starts");
    assert_eq!(
        requests[put].json().unwrap(),
        &serde_json::json!({"objective": "ship the quarterly report"})
    );
    assert_eq!(
        requests[run].json().unwrap()["input"]["messages"][0]["content"],
        "ship the quarterly report"
    );
    assert_eq!(run_calls(&h), 1);
    // The goal is met: status says so, with the objective.
    assert_eq!(
        h.ask("/goal", 2).await,
        "Goal met: ship the quarterly report"
    );
    h.stop().await;
}

/// Audit finding 6: over DeerFlow's delta checkpoints, the goal verdict's `values` (the
/// run's last) carries the goal without the history; the answer of the frame before still
/// goes out.
#[tokio::test]
async fn a_goal_verdict_without_the_history_keeps_the_answer() {
    let h = Harness::final_only().await;
    h.sim
        .script_next_run(goal_met_at_once("On it.").delta_checkpoints());
    h.say("/goal ship the quarterly report").await;
    assert_eq!(h.channel.wait_finals(1).await, ["On it."]);
    h.stop().await;
}

#[tokio::test]
async fn clear_the_build_cache_is_an_objective() {
    let h = Harness::final_only().await;
    h.sim.script_next_run(goal_met_at_once("ok"));
    h.say("/goal clear the build cache").await;
    h.channel.wait_finals(1).await;
    let put = h
        .sim
        .requests()
        .into_iter()
        .find(|r| r.method == "PUT")
        .expect("a set, not a clear");
    assert_eq!(put.json().unwrap()["objective"], "clear the build cache");
    h.stop().await;
}

#[tokio::test]
async fn set_refusals_start_no_run() {
    let h = Harness::final_only().await;
    let thread = bind(&h, 0).await;
    h.sim
        .push_fault(Fault::on(Route::GoalPut).reply(Reply::detail(
            409,
            "Thread has a run in flight. Set the goal after the run finishes.",
        )));
    assert_eq!(
        h.ask("/goal finish it", 2).await,
        "A task is still running in this conversation, so I left the goal as it was. Send /stop to stop it, or wait for it to finish, then try again."
    );
    h.sim.push_fault(
        Fault::on(Route::GoalPut).reply(Reply::detail(500, "Failed to set thread goal")),
    );
    assert_eq!(
        h.ask("/goal finish it", 3).await,
        "I couldn't set the goal, so I haven't started on it. Please try again."
    );
    assert_eq!(run_calls(&h), 1, "only the binding run");
    assert!(h.sim.goal(&thread).is_none());
    let long = "x".repeat(4001);
    let before = goal_calls(&h);
    assert_eq!(
        h.ask(&format!("/goal {long}"), 4).await,
        "That goal is too long. Please keep it under 4000 characters."
    );
    assert_eq!(goal_calls(&h), before, "nothing sent");
    h.stop().await;
}

#[tokio::test]
async fn status_reports_progress_stand_down_and_never_the_evaluator_text() {
    let h = Harness::final_only().await;
    let thread = bind(&h, 0).await;
    let mut goal = GoalState::new("ship the report", 8);
    h.sim.set_goal(&thread, Some(goal.clone()));
    assert_eq!(h.ask("/goal", 2).await, "Current goal: ship the report");
    goal.continuation_count = 3;
    h.sim.set_goal(&thread, Some(goal.clone()));
    assert_eq!(
        h.ask("/goal", 3).await,
        "Current goal: ship the report\nStill working on it (3/8 automatic follow-ups used)."
    );
    goal.last_evaluation = Some(GoalEvaluation {
        satisfied: false,
        blocker: "needs_user_input".into(),
        reason: "MARKER-REASON the evaluator thinks".into(),
        evidence_summary: "MARKER-EVIDENCE".into(),
        relied_on_assumption: false,
        run_id: "r".into(),
        evaluated_at: "2026-01-01T00:00:00Z".into(),
        progress_key: "{}".into(),
        stand_down_reason: Some("blocked:needs_user_input".into()),
    });
    h.sim.set_goal(&thread, Some(goal.clone()));
    let stopped = h.ask("/goal", 4).await;
    assert_eq!(
        stopped,
        "Current goal: ship the report\nI stopped following up on my own after 3/8 attempts: I need your input to go on.\nSend a message to keep going, or /goal clear to drop it."
    );
    goal.last_evaluation.as_mut().unwrap().stand_down_reason = Some("something_new".into());
    h.sim.set_goal(&thread, Some(goal));
    assert!(h.ask("/goal", 5).await.contains("no reason was recorded"));
    h.sim
        .push_fault(Fault::on(Route::GoalGet).reply(Reply::html(502)));
    assert_eq!(
        h.ask("/goal", 6).await,
        "I couldn't look up the goal right now. Please try again."
    );
    h.channel.assert_never_shown("MARKER");
    h.stop().await;
}

#[tokio::test]
async fn clear_outcomes() {
    let h = Harness::final_only().await;
    let thread = bind(&h, 0).await;
    h.sim.set_goal(&thread, Some(GoalState::new("x", 8)));
    h.sim
        .push_fault(Fault::on(Route::GoalDelete).reply(Reply::detail(
            409,
            "Thread has a run in flight. Clear the goal after the run finishes.",
        )));
    assert!(h.ask("/goal CANCEL", 2).await.starts_with(
        "A task is still running in this conversation, so I left the goal as it was."
    ));
    assert!(h.sim.goal(&thread).is_some(), "unchanged");
    h.sim.push_fault(
        Fault::on(Route::GoalDelete).reply(Reply::detail(500, "Failed to clear thread goal")),
    );
    assert_eq!(
        h.ask("/goal off", 3).await,
        "I couldn't clear the goal. Please try again."
    );
    assert_eq!(h.ask("/goal reset", 4).await, "The goal is cleared.");
    assert!(h.sim.goal(&thread).is_none());
    h.stop().await;
}

#[tokio::test]
async fn from_chat_saves_then_publishes_the_objective_then_runs_once() {
    let h = Harness::final_only().await;
    let thread = bind(&h, 0).await;
    h.sim
        .script_next_run(goal_met_at_once("Working on the report now."));
    h.say("/goal from-chat").await;
    let finals = h.channel.wait_finals(3).await;
    assert_eq!(
        finals[1],
        "Goal set from our conversation: Please help me write the quarterly report"
    );
    assert_eq!(finals[2], "Working on the report now.");
    let requests = h.conversation_calls();
    let post = requests
        .iter()
        .position(|r| r.path.ends_with("/goal/from-chat"))
        .unwrap();
    assert_eq!(
        requests[post].json(),
        Some(&serde_json::json!({})),
        "no hint key without a hint"
    );
    let runs: Vec<_> = requests
        .iter()
        .enumerate()
        .filter(|(_, r)| is_run_start(r))
        .map(|(i, _)| i)
        .collect();
    assert_eq!(runs.len(), 2, "the binding run and exactly one goal run");
    assert!(runs[1] > post);
    assert!(requests.iter().all(|r| r.method != "PUT"), "no second PUT");
    assert_eq!(
        h.sim.goal_outcome(&thread).map(|o| o.objective),
        Some("Please help me write the quarterly report".into())
    );
    h.stop().await;
}

#[tokio::test]
async fn from_chat_sends_the_hint_and_refuses_a_long_one() {
    let h = Harness::final_only().await;
    bind(&h, 0).await;
    h.sim.script_next_run(goal_met_at_once("ok"));
    h.say("/goal from-chat  focus on Q3  ").await;
    h.channel.wait_finals(3).await;
    assert_eq!(h.first_body("/goal/from-chat")["hint"], "focus on Q3");
    let before = goal_calls(&h);
    let long_hint = format!("/goal from-chat {}", "y".repeat(4001));
    assert_eq!(
        h.ask(&long_hint, 4).await,
        "That hint is too long. Please keep it under 4000 characters."
    );
    assert_eq!(goal_calls(&h), before);
    h.stop().await;
}

#[tokio::test]
async fn from_chat_outcomes_each_get_their_own_reply() {
    let cases: Vec<(Reply, &str)> = vec![
        (
            Reply::coded(409, "thread_busy", "MARKER"),
            "A task is still running in this conversation. Please try /goal from-chat again once it has finished.",
        ),
        (
            Reply::detail(409, "MARKER plain string detail"),
            "A task is still running in this conversation. Please try /goal from-chat again once it has finished.",
        ),
        (
            Reply::coded(409, "pending_human_input", "MARKER"),
            "I'm still waiting for your answer to my last question. Please answer it first, then try /goal from-chat again.",
        ),
        (
            Reply::coded(409, "pending_tool_approval", "MARKER"),
            "An action is waiting for your approval. Please approve or reject it first, then try /goal from-chat again.",
        ),
        (
            Reply::coded(409, "goal_changed", "MARKER"),
            "The goal changed while I was working one out, so I left it as it is. Send /goal to see the current goal.",
        ),
        (
            Reply::coded(422, "no_context", "MARKER"),
            "There's nothing in this conversation yet to build a goal from. Tell me what you're working on first, or set one directly with /goal <condition>.",
        ),
        (
            Reply::coded(422, "unclear", "MARKER"),
            "I couldn't find a clear goal in our conversation. Try /goal from-chat with a short hint, or set one directly with /goal <condition>.",
        ),
        (
            Reply::coded(502, "synthesis_failed", "MARKER the model refused because"),
            "I couldn't work out a goal from our conversation this time. Please try again, or set one directly with /goal <condition>.",
        ),
        (
            Reply::coded(403, "forbidden", "MARKER"),
            "You don't have permission to set a goal in this conversation.",
        ),
        (
            Reply::coded(404, "not_found", "MARKER"),
            "There's nothing in this conversation yet to build a goal from. Tell me what you're working on first, or set one directly with /goal <condition>.",
        ),
        (
            Reply::coded(418, "teapot", "MARKER"),
            "I couldn't set a goal from our conversation. Please try again, or set one directly with /goal <condition>.",
        ),
        (
            Reply::html(500),
            "I couldn't set a goal from our conversation. Please try again, or set one directly with /goal <condition>.",
        ),
    ];
    let h = Harness::final_only().await;
    bind(&h, 0).await;
    for (i, (reply, expected)) in cases.into_iter().enumerate() {
        h.sim
            .push_fault(Fault::on(Route::GoalFromChat).reply(reply));
        h.say("/goal from-chat").await;
        let finals = h.channel.wait_finals(i + 2).await;
        assert_eq!(finals[i + 1], expected, "case {i}");
    }
    assert_eq!(run_calls(&h), 1, "no outcome but saved starts a run");
    h.channel.assert_never_shown("MARKER");
    h.stop().await;
}

#[tokio::test]
async fn from_chat_timeout_does_not_claim_nothing_was_saved() {
    let h = Harness::with(Options {
        from_chat_timeout: Duration::from_millis(200),
        ..Options::final_only()
    })
    .await;
    bind(&h, 0).await;
    h.sim
        .push_fault(Fault::on(Route::GoalFromChat).delay(Duration::from_millis(800)));
    let reply = h.ask("/goal from-chat", 2).await;
    assert_eq!(
        reply,
        "Working out the goal is taking longer than expected. It may still be saved in a moment — send /goal to check before trying again."
    );
    h.stop().await;
}

#[tokio::test]
async fn new_during_a_slow_synthesis_keeps_the_goal_on_the_old_thread_and_starts_nothing() {
    // Conversation messages are handled concurrently here, so /new can land while the
    // model composes.
    let h = Harness::final_only().await;
    let old = bind(&h, 0).await;
    h.sim
        .push_fault(Fault::on(Route::GoalFromChat).delay(Duration::from_millis(400)));
    h.say("/goal from-chat").await;
    h.wait_until_sent(1, "/goal/from-chat").await;
    h.say("/new").await;
    let finals = h.channel.wait_finals(3).await;
    assert!(
        finals
            .contains(&"Started a new conversation. Earlier messages won't carry over.".to_owned()),
        "{finals:?}"
    );
    let moved = finals
        .iter()
        .find(|f| f.starts_with("I saved this goal in the previous conversation"))
        .expect("binding-changed reply");
    assert!(moved.contains("Please help me write the quarterly report"));
    assert_eq!(run_calls(&h), 1, "no run for the moved goal");
    assert!(
        h.sim.goal(&old).is_some(),
        "the goal stays on the old thread"
    );
    h.stop().await;
}

/// A `/stop` sent while the model composes a `/goal from-chat` goal keeps its task from
/// starting: the goal is saved (the Gateway saved it), no run starts, and the command's
/// one reply says so; never "nothing to stop", then the run the user asked to stop.
#[tokio::test]
async fn stop_while_from_chat_composes_saves_the_goal_and_starts_nothing() {
    let h = Harness::final_only().await;
    let thread = bind(&h, 0).await;
    h.sim
        .push_fault(Fault::on(Route::GoalFromChat).delay(Duration::from_millis(400)));
    h.say("/goal from-chat").await;
    h.wait_until_sent(1, "/goal/from-chat").await;
    h.say("/stop").await;
    let finals = h.channel.wait_finals(2).await;
    let objective = Arg::Str("Please help me write the quarterly report");
    let stopped = catalog_text("en-US")(
        "goal-from-chat-not-started-stopped",
        &[("objective", objective)],
    );
    assert_eq!(finals[1], stopped);
    assert!(h.sim.goal(&thread).is_some(), "the goal is saved");
    // Stopped with everything admitted handled: no run was asked for the goal.
    let (sim, _dir, _) = h.stop().await;
    let runs = sim.requests().iter().filter(|r| is_run_start(r)).count();
    assert_eq!(runs, 1, "only the first message's run");
}

/// A message sent while the run of a `/goal from-chat` goal works waits for it and is told
/// so, as behind any run (the command's registration while it composed is not its run:
/// its end does not count as the turn settling).
#[tokio::test]
async fn a_message_during_a_from_chat_goals_run_is_told_it_waits() {
    let h = Harness::final_only().await;
    bind(&h, 0).await;
    h.sim
        .script_next_run(goal_met_at_once("the goal's answer").hold(Hold::UntilFinished));
    h.say("/goal from-chat").await;
    h.wait_until_sent(2, "/runs").await;
    h.sim
        .script_next_run(Script::with_answer("the next answer").chunks(1));
    h.say("and one more thing").await;
    let queued = catalog_text("en-US")("run-queued", &[]);
    h.channel
        .wait_for("the queued notice", |_| {
            h.channel.finals().contains(&queued)
        })
        .await;
    h.finish_runs();
    let finals = h.channel.wait_finals(5).await;
    assert_eq!(finals[3..], ["the goal's answer", "the next answer"]);
    h.stop().await;
}

/// Why a saved `/goal from-chat` goal's run did not start, and how to make it not start.
#[derive(Clone, Copy, Debug)]
enum NotStartedBy {
    /// Another run holds the thread (409).
    Busy,
    /// The Gateway answers 503.
    Unavailable,
    /// The Gateway refuses the run for another reason (422).
    Refused,
    /// The message names an agent whose name is not valid.
    InvalidAgent,
}

/// `/goal from-chat` saved the goal but its run did not start: after the "saved" line, one
/// reply that says the goal is saved and, truthfully, why the task did not start (wait for
/// the current task, try again later, ask an admin, or it failed) — never the plain reply
/// of a chat turn beside it.
#[tokio::test]
async fn from_chat_saved_but_not_started_says_why_in_one_reply() {
    let text = catalog_text("en-US");
    let objective = "Please help me write the quarterly report";
    for (cause, id) in [
        (NotStartedBy::Busy, "goal-from-chat-not-started-busy"),
        (
            NotStartedBy::Unavailable,
            "goal-from-chat-not-started-unavailable",
        ),
        (NotStartedBy::Refused, "goal-from-chat-not-started-failed"),
        (
            NotStartedBy::InvalidAgent,
            "goal-from-chat-not-started-invalid-agent",
        ),
    ] {
        let h = Harness::final_only().await;
        bind(&h, 0).await;
        let mut command = h.message("/goal from-chat");
        match cause {
            // Busy past the waits for a run in flight (none is listed).
            NotStartedBy::Busy => h.sim.push_fault(
                Fault::on(Route::RunCreate)
                    .reply(Reply::run_busy("x"))
                    .sticky(),
            ),
            NotStartedBy::Unavailable => h.sim.script_next_run(Script::rejected(Reply::html(503))),
            NotStartedBy::Refused => h
                .sim
                .script_next_run(Script::rejected(Reply::detail(422, "refused"))),
            NotStartedBy::InvalidAgent => {
                command
                    .metadata
                    .insert("agent_name".into(), serde_json::json!("not a valid name!"));
            }
        }
        h.send(command).await;
        let finals = h.channel.wait_finals(3).await;
        assert_eq!(
            finals[1],
            text(
                "goal-from-chat-saved",
                &[("objective", Arg::Str(objective))]
            ),
            "{cause:?}"
        );
        assert_eq!(
            finals[2],
            text(id, &[("objective", Arg::Str(objective))]),
            "{cause:?}: {finals:#?}"
        );
        // Nothing more about it: the next reply is the next command's.
        h.say("/goal").await;
        let finals = h.channel.wait_finals(4).await;
        assert_eq!(
            finals[3..],
            [text(
                "goal-status-active",
                &[("objective", Arg::Str(objective))]
            )],
            "{cause:?}: the goal is saved, and nothing else came: {finals:#?}"
        );
        h.stop().await;
    }
}

#[tokio::test]
async fn two_continuations_render_three_messages_when_streaming() {
    let h = Harness::start().await;
    h.sim.script_next_run(
        Script::with_answer("First answer.")
            .chunks(2)
            .goal_continuations(2)
            .goal_stand_down("max_continuations_reached")
            .goal_evaluation("MARKER-REASON", "MARKER-EVIDENCE"),
    );
    h.say("/goal ship it").await;
    let finals = h.channel.wait_finals(3).await;
    assert_eq!(finals[0], "First answer.");
    assert!(
        finals[1].starts_with("↻ Still working toward the goal (follow-up 1 of 8)\n\n"),
        "{finals:?}"
    );
    assert!(
        finals[2].starts_with("↻ Still working toward the goal (follow-up 2 of 8)\n\n"),
        "{finals:?}"
    );
    // The partials of a continuation carry the marker too, and nothing leaks.
    h.channel.assert_never_shown("MARKER");
    h.channel.assert_never_shown("goal_continuation");
    h.say("/goal").await;
    let finals = h.channel.wait_finals(4).await;
    assert!(finals[3].contains("I stopped following up on my own after 2/8 attempts: I used all my automatic follow-ups."), "{finals:?}");
    h.stop().await;
}

#[tokio::test]
async fn continuations_end_in_finals_on_final_only_channels() {
    let h = Harness::final_only().await;
    h.sim.script_next_run(
        Script::with_answer("First answer.")
            .chunks(1)
            .goal_continuations(2)
            .goal_met()
            .hold(Hold::Natural),
    );
    h.say("/goal ship it").await;
    let finals = h.channel.wait_finals(3).await;
    assert_eq!(finals.len(), 3, "{finals:?}");
    assert_eq!(finals[0], "First answer.");
    assert!(
        finals[1].starts_with("↻ Still working toward the goal (follow-up 1"),
        "{finals:?}"
    );
    assert!(
        finals[2].starts_with("↻ Still working toward the goal (follow-up 2"),
        "{finals:?}"
    );
    h.stop().await;
}

/// Issue 26: DeerFlow's Gateway has no `goal/from-chat` route. The bridge says this version
/// cannot compose a goal (not "nothing in the conversation yet"), in the reader's language,
/// starts nothing, and once it knows the route is missing does not ask again.
#[tokio::test]
async fn issue_26_from_chat_on_a_gateway_without_the_route_says_so_in_every_locale() {
    for tag in shipped_locales() {
        let tag = tag.as_str();
        let text = catalog_text(tag);
        let h = Harness::with(Options {
            sim: SimulatorConfig::default().deerflow_routes_only(),
            ..Options::final_only().notification_locale(tag)
        })
        .await;
        bind(&h, 0).await;
        let unsupported = text("goal-from-chat-unsupported", &[]);
        h.say("/goal from-chat").await;
        assert_eq!(h.channel.nth_final(2).await, unsupported, "{tag}");
        let asked = goal_calls(&h);
        h.say("/goal from-chat focus on Q3").await;
        assert_eq!(h.channel.nth_final(3).await, unsupported, "{tag}");
        assert_eq!(
            goal_calls(&h),
            asked,
            "{tag}: a missing route is not asked again"
        );
        assert!(
            asked <= 1,
            "{tag}: at most the one call that found it missing"
        );
        assert_eq!(run_calls(&h), 1, "{tag}: only the chat message ran");
        h.stop().await;
    }
}

/// A `/goal` command's own run answers like a chat message's: the final of its first
/// segment, refused for now by Telegram (a 502), is retried and lands once, before or
/// after the continuation the run went on to, which lands once too.
#[cfg(feature = "telegram")]
#[tokio::test]
async fn a_goal_runs_final_that_failed_for_now_is_retried_and_lands_once() {
    use im_bridge_fakes::telegram::{Failure, Incoming, Trigger};

    use crate::telegram::harness::Tg;

    const USER: i64 = 270_581_443;
    let tg = Tg::start().await;
    tg.ready().await;
    let first = "First answer.";
    tg.fake.fail(
        "sendMessage",
        Trigger::TextEquals(first.into()),
        Failure::Status(502, "Bad Gateway".into()),
    );
    tg.sim.script_next_run(
        Script::with_answer(first)
            .chunks(2)
            .goal_continuations(1)
            .goal_met(),
    );
    tg.fake.inject(Incoming::private(USER, "/goal ship it"));
    let next = "↻ Still working toward the goal (follow-up 1 of 8)\n\n\
                Still on it: continuing toward “ship it” (continuation 1 of 8).";
    tg.wait_text("the continuation", next).await;
    let calls = tg.wait_text("the first segment, retried", first).await;
    assert!(
        calls
            .iter()
            .any(|c| c.status == 502 && c.text() == Some(first)),
        "the scripted failure fired"
    );
    let shown = tg.fake.bot_messages(USER);
    for text in [first, next] {
        let times = shown.iter().filter(|m| m.text == text).count();
        assert_eq!(times, 1, "{text:?} in {shown:?}");
    }
    tg.stop().await;
}
