//! The goal resource, goal continuations inside a run, from-chat and compaction
//! (`spec/gateway.md` §4).

use std::time::Duration;

use im_bridge::simulator::{Fault, GoalState, Reply, Route, Script, SimulatorConfig};
use reqwest::Method;
use serde_json::{Value, json};

use crate::simulator::support::*;

fn ai_ids(frames: &[Frame]) -> Vec<String> {
    let mut ids: Vec<String> = Vec::new();
    for p in payloads(frames) {
        let id = p["id"].as_str().unwrap().to_owned();
        if p["type"] == "AIMessageChunk" && !ids.contains(&id) {
            ids.push(id);
        }
    }
    ids
}

#[tokio::test]
async fn a_goal_is_set_continued_and_met_within_one_run() {
    let h = Harness::start().await;
    let t = h.thread().await;
    let goal = format!("/api/threads/{t}/goal");
    assert_eq!(
        h.call(Method::GET, &goal, None).await,
        (200, json!({"goal": null}))
    );
    let body = json!({"objective": "  ship   the\nreport ", "max_continuations": 5});
    let (status, set) = h.call(Method::PUT, &goal, Some(body)).await;
    assert_eq!(status, 200);
    let g = &set["goal"];
    assert_eq!(
        (g["objective"].as_str(), g["status"].as_str()),
        (Some("ship the report"), Some("active"))
    );
    assert_eq!(
        (
            g["continuation_count"].as_u64(),
            g["max_continuations"].as_u64()
        ),
        (Some(0), Some(5))
    );
    assert_eq!(g["max_no_progress_continuations"], 2);
    assert!(g.get("last_evaluation").is_none());
    assert_eq!(h.call(Method::GET, &goal, None).await.1, set);

    let script = Script::with_answer("Working on it.")
        .goal_continuations(2)
        .goal_met()
        .goal_evaluation("MARKER-reason", "MARKER-evidence");
    h.sim.script_thread(&t, script);
    let frames = h.frames(&t, "ship the report").await;
    let ids = ai_ids(&frames);
    assert_eq!(ids.len(), 3, "the answer plus two continuations");

    // Each continuation: a values snapshot ending in the hidden human message, with the
    // count incremented, before the new AI message streams.
    let snapshots: Vec<&Value> = frames
        .iter()
        .filter(|f| f.event == "values")
        .map(|f| &f.data)
        .collect();
    let counts: Vec<u64> = snapshots
        .iter()
        .filter_map(|v| v["goal"]["continuation_count"].as_u64())
        .collect();
    assert!(counts.contains(&1) && counts.contains(&2), "{counts:?}");
    let continuation = snapshots
        .iter()
        .find(|v| v["goal"]["continuation_count"] == 1)
        .unwrap();
    let last = continuation["messages"].as_array().unwrap().last().unwrap();
    assert_eq!(last["type"], "human");
    assert!(
        last["content"]
            .as_str()
            .unwrap()
            .starts_with("<goal_continuation>")
    );
    assert_eq!(
        last["additional_kwargs"],
        json!({"hide_from_ui": true, "deerflow_goal_continuation": true})
    );
    assert_eq!(
        continuation["goal"]["last_evaluation"]["blocker"],
        "goal_not_met_yet"
    );
    assert_eq!(
        continuation["goal"]["last_evaluation"]["reason"],
        "MARKER-reason"
    );

    let done = last_values(&frames);
    assert_eq!(done["goal"], Value::Null);
    let outcome = &done["goal_outcome"];
    assert_eq!(
        (outcome["status"].as_str(), outcome["objective"].as_str()),
        (Some("achieved"), Some("ship the report"))
    );
    assert_eq!(outcome["continuation_count"], 2);
    assert_eq!(outcome["reason"], "MARKER-reason");
    assert_eq!(outcome["reply_message_id"], ids[2].as_str());
    assert_eq!(events(&frames).last(), Some(&"end"));

    assert_eq!(
        h.call(Method::GET, &goal, None).await.1,
        json!({"goal": null})
    );
    let (_, state) = h
        .call(Method::GET, &format!("/api/threads/{t}/state"), None)
        .await;
    assert_eq!(state["values"]["goal_outcome"]["status"], "achieved");
    // Every goal write removes the outcome.
    h.call(Method::PUT, &goal, Some(json!({"objective": "next"})))
        .await;
    let (_, state) = h
        .call(Method::GET, &format!("/api/threads/{t}/state"), None)
        .await;
    assert!(state["values"].get("goal_outcome").is_none());
    assert_eq!(state["values"]["goal"]["objective"], "next");
}

#[tokio::test]
async fn a_goal_stands_down_at_its_limit_or_when_blocked() {
    let h = Harness::start().await;
    let t = h.thread().await;
    let goal = format!("/api/threads/{t}/goal");
    h.call(
        Method::PUT,
        &goal,
        Some(json!({"objective": "fix the build", "max_continuations": 1})),
    )
    .await;
    h.sim
        .script_thread(&t, Script::with_answer("Trying.").goal_continuations(3));
    let frames = h.frames(&t, "fix it").await;
    assert_eq!(ai_ids(&frames).len(), 2);
    let g = last_values(&frames)["goal"].clone();
    assert_eq!(g["continuation_count"], 1);
    assert_eq!(
        g["last_evaluation"]["stand_down_reason"],
        "max_continuations_reached"
    );

    let script = Script::with_answer("Need input.")
        .goal_continuations(0)
        .goal_stand_down("blocked:needs_user_input")
        .goal_evaluation("MARKER-r", "MARKER-e");
    h.sim.script_thread(&t, script);
    h.frames(&t, "again").await;
    let (_, body) = h.call(Method::GET, &goal, None).await;
    let e = &body["goal"]["last_evaluation"];
    assert_eq!(
        (e["blocker"].as_str(), e["stand_down_reason"].as_str()),
        (Some("needs_user_input"), Some("blocked:needs_user_input"))
    );
    assert_eq!(
        (e["reason"].as_str(), e["evidence_summary"].as_str()),
        (Some("MARKER-r"), Some("MARKER-e"))
    );
    assert_eq!(e["satisfied"], false);

    // A scripted GoalState is served as is.
    let mut scripted = GoalState::new("scripted", 8);
    scripted.continuation_count = 4;
    h.sim.set_goal(&t, Some(scripted));
    let (_, body) = h.call(Method::GET, &goal, None).await;
    assert_eq!(
        (
            body["goal"]["objective"].as_str(),
            body["goal"]["continuation_count"].as_u64()
        ),
        (Some("scripted"), Some(4))
    );
}

#[tokio::test]
async fn goal_writes_are_validated_and_faults_are_scriptable() {
    let h = Harness::start().await;
    let t = h.thread().await;
    let goal = format!("/api/threads/{t}/goal");
    let (status, body) = h
        .call(Method::PUT, &goal, Some(json!({"objective": " \n\t "})))
        .await;
    assert_eq!(
        (status, body),
        (422, json!({"detail": "Goal objective must not be empty."}))
    );
    let (status, body) = h
        .call(
            Method::PUT,
            &goal,
            Some(json!({"objective": "a".repeat(4001)})),
        )
        .await;
    assert_eq!(
        (status, body["detail"][0]["type"].as_str()),
        (422, Some("string_too_long"))
    );
    let (status, body) = h
        .call(
            Method::PUT,
            &goal,
            Some(json!({"objective": "x", "max_continuations": 9})),
        )
        .await;
    assert_eq!(
        (status, body["detail"][0]["type"].as_str()),
        (422, Some("less_than_equal"))
    );
    assert_eq!(
        body["detail"][0]["loc"],
        json!(["body", "max_continuations"])
    );
    let (status, body) = h.call(Method::PUT, &goal, Some(json!({}))).await;
    assert_eq!(
        (status, body["detail"][0]["type"].as_str()),
        (422, Some("missing"))
    );

    // PUT creates a missing thread; DELETE answers null either way.
    let (status, _) = h
        .call(
            Method::PUT,
            "/api/threads/fresh-1/goal",
            Some(json!({"objective": "x"})),
        )
        .await;
    assert_eq!(status, 200);
    assert_eq!(
        h.call(Method::GET, "/api/threads/fresh-1", None).await.0,
        200
    );
    assert_eq!(
        h.call(Method::DELETE, "/api/threads/fresh-1/goal", None)
            .await,
        (200, json!({"goal": null}))
    );
    assert_eq!(
        h.call(Method::DELETE, "/api/threads/never/goal", None)
            .await,
        (200, json!({"goal": null}))
    );
    assert_eq!(
        h.call(Method::GET, "/api/threads/never/goal", None).await,
        (200, json!({"goal": null}))
    );

    h.sim.push_fault(
        Fault::on(Route::GoalGet).reply(Reply::detail(500, "Failed to read thread goal")),
    );
    assert_eq!(
        h.call(Method::GET, &goal, None).await,
        (500, json!({"detail": "Failed to read thread goal"}))
    );
    assert_eq!(
        h.call(Method::GET, &goal, None).await.0,
        200,
        "one-shot faults are consumed"
    );

    h.sim
        .push_fault(Fault::on(Route::GoalPut).drop_connection());
    let sent = h
        .http
        .put(h.url(&goal))
        .json(&json!({"objective": "x"}))
        .send()
        .await;
    assert!(sent.is_err(), "the connection closes with no response");

    // A slow PUT holds a checkpoint write: a run meanwhile is refused.
    h.sim.push_fault(
        Fault::on(Route::GoalPut)
            .thread(&t)
            .delay(Duration::from_millis(300)),
    );
    let put = tokio::spawn({
        let (http, url) = (h.http.clone(), h.url(&goal));
        async move {
            http.put(url)
                .json(&json!({"objective": "slow"}))
                .send()
                .await
                .map(|r| r.status())
        }
    });
    within(h.sim.wait_until(DEADLINE, |s| s.pending_faults() == 0))
        .await
        .unwrap();
    let (status, body) = h.wait_run(&t, "x").await;
    assert_eq!(
        (status, body["detail"].as_str()),
        (
            409,
            // The Gateway's run manager counts a checkpoint write as an operation in flight
            // and words a `reject` run's refusal the same either way.
            Some(format!("Thread {t} already has an active run").as_str())
        )
    );
    assert_eq!(within(put).await.unwrap().unwrap(), 200);
}

#[tokio::test]
async fn from_chat_composes_from_the_visible_conversation() {
    let h = Harness::start().await;
    let (status, body) = h
        .call(
            Method::POST,
            "/api/threads/nowhere/goal/from-chat",
            Some(json!({})),
        )
        .await;
    assert_eq!(status, 404, "{body}");

    let t = h.thread().await;
    let path = format!("/api/threads/{t}/goal/from-chat");
    let (status, body) = h.call(Method::POST, &path, Some(json!({}))).await;
    assert_eq!(
        (status, body["detail"]["code"].as_str()),
        (422, Some("no_context"))
    );
    assert!(body["detail"]["message"].is_string());
    h.frames(&t, "hi!").await;
    let (status, body) = h.call(Method::POST, &path, None).await;
    assert_eq!(
        (status, body["detail"]["code"].as_str()),
        (422, Some("unclear"))
    );

    h.frames(&t, "Please   prepare the quarterly\nsales report")
        .await;
    h.frames(&t, "thanks").await;
    let (status, body) = h.call(Method::POST, &path, Some(json!({}))).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["source"], "chat");
    assert_eq!(
        body["goal"]["objective"],
        "Please prepare the quarterly sales report"
    );
    assert_eq!(body["goal"]["status"], "active");
    let (_, got) = h
        .call(Method::GET, &format!("/api/threads/{t}/goal"), None)
        .await;
    assert_eq!(got["goal"], body["goal"]);
    let (_, body) = h
        .call(Method::POST, &path, Some(json!({"hint": "focus on EMEA"})))
        .await;
    assert_eq!(
        body["goal"]["objective"],
        "Please prepare the quarterly sales report (focus: focus on EMEA)"
    );
    let (status, _) = h
        .call(Method::POST, &path, Some(json!({"hint": "x".repeat(4001)})))
        .await;
    assert_eq!(status, 422);
}

#[tokio::test]
async fn from_chat_failures_are_coded() {
    let h = Harness::start().await;
    let t = h.thread().await;
    let path = format!("/api/threads/{t}/goal/from-chat");
    h.frames(&t, "Please prepare the quarterly sales report")
        .await;
    for (status, code) in [
        (409, "pending_tool_approval"),
        (409, "goal_changed"),
        (502, "synthesis_failed"),
        (403, "forbidden"),
    ] {
        h.sim.push_fault(
            Fault::on(Route::GoalFromChat)
                .thread(&t)
                .reply(Reply::coded(status, code, "MARKER-never-shown")),
        );
        let (got, body) = h.call(Method::POST, &path, Some(json!({}))).await;
        assert_eq!((got, body["detail"]["code"].as_str()), (status, Some(code)));
    }
    assert!(h.sim.goal(&t).is_none());

    // A goal written while a slow synthesis runs: goal_changed, nothing overwritten.
    h.sim
        .push_fault(Fault::on(Route::GoalFromChat).delay(Duration::from_millis(300)));
    let call = tokio::spawn({
        let (http, url) = (h.http.clone(), h.url(&path));
        async move {
            http.post(url)
                .json(&json!({}))
                .send()
                .await
                .unwrap()
                .json::<Value>()
                .await
                .unwrap()
        }
    });
    within(h.sim.wait_until(DEADLINE, |s| s.pending_faults() == 0))
        .await
        .unwrap();
    h.call(
        Method::PUT,
        &format!("/api/threads/{t}/goal"),
        Some(json!({"objective": "mine"})),
    )
    .await;
    let body = within(call).await.unwrap();
    assert_eq!(body["detail"]["code"], "goal_changed");
    assert_eq!(h.sim.goal(&t).unwrap().objective, "mine");

    // The assistant asked a question: pending_human_input.
    h.sim.script_thread(
        &t,
        Script::with_answer("").ask_clarification("Which region?"),
    );
    h.frames(&t, "Plan the regional launch event").await;
    let (status, body) = h.call(Method::POST, &path, Some(json!({}))).await;
    assert_eq!(
        (status, body["detail"]["code"].as_str()),
        (409, Some("pending_human_input"))
    );
}

#[tokio::test]
async fn compaction_reports_its_outcome() {
    let h = Harness::start().await;
    let t = h.thread().await;
    let path = format!("/api/threads/{t}/compact");
    let (status, body) = h
        .call(Method::POST, &path, Some(json!({"force": true})))
        .await;
    assert_eq!(status, 200);
    assert_eq!(
        (body["compacted"].as_bool(), body["reason"].as_str()),
        (Some(false), Some("not_enough_messages"))
    );
    assert_eq!(body["checkpoint_id"], Value::Null);

    h.frames(&t, "one").await;
    h.frames(&t, "two").await;
    let (status, body) = h.call(Method::POST, &path, None).await;
    assert_eq!(status, 200);
    assert_eq!(body["thread_id"], t.as_str());
    assert_eq!(
        (body["compacted"].as_bool(), body["reason"].clone()),
        (Some(true), Value::Null)
    );
    assert_eq!(
        (
            body["removed_message_count"].as_u64(),
            body["preserved_message_count"].as_u64()
        ),
        (Some(2), Some(2))
    );
    assert!(body["checkpoint_id"].is_string() && body["summary_updated"] == true);
    let keep = json!({"keep": {"type": "messages", "value": 1}});
    assert_eq!(
        h.call(Method::POST, &path, Some(keep)).await.1["removed_message_count"],
        3
    );
    assert_eq!(h.sim.messages(&t).len(), 4, "the visible history stays");

    h.sim.push_fault(
        Fault::on(Route::Compact).reply(Reply::detail(500, "Failed to compact thread context.")),
    );
    assert_eq!(h.call(Method::POST, &path, None).await.0, 500);
    h.sim.configure(|c| c.compaction_enabled = false);
    assert_eq!(
        h.call(Method::POST, &path, None).await,
        (409, json!({"detail": "Context compaction is disabled."}))
    );
    assert_eq!(
        h.call(Method::POST, "/api/threads/nope/compact", None)
            .await
            .0,
        404
    );

    let h = Harness::with(SimulatorConfig {
        compact_min_messages: 10,
        ..Default::default()
    })
    .await;
    let t = h.thread().await;
    h.frames(&t, "one").await;
    h.frames(&t, "two").await;
    let (_, body) = h
        .call(Method::POST, &format!("/api/threads/{t}/compact"), None)
        .await;
    assert_eq!(body["reason"], "not_enough_messages");
}
