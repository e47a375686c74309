//! Run control: busy threads, scripted refusals, `runs.wait`, `runs.create`, run body
//! validation and cancellation (`spec/gateway.md` §3.2, §3.4–3.6, §8).

use std::time::{Duration, Instant};

use futures_util::StreamExt;
use im_bridge::simulator::{Hold, Reply, RunStatus, Script, WaitBody};
use reqwest::Method;
use serde_json::{Value, json};

use crate::simulator::support::*;

#[tokio::test]
async fn a_busy_thread_refuses_runs_goal_writes_and_compaction() {
    let h = Harness::start().await;
    let t = h.thread().await;
    h.sim
        .script_thread(&t, Script::with_answer("held").hold(Hold::UntilFinished));
    let first = h.stream(&t, "one").await;
    within(
        h.sim
            .wait_until(DEADLINE, |s| !s.active_runs(&t).is_empty()),
    )
    .await
    .unwrap();

    let busy = json!({"detail": format!("Thread {t} already has an active run")});
    for (path, body) in [
        ("runs/stream", stream_body(&t, "two")),
        ("runs/wait", wait_body(&t, "two")),
        ("runs", create_body(&t, "two")),
    ] {
        let (status, reply) = h
            .call(
                Method::POST,
                &format!("/api/threads/{t}/{path}"),
                Some(body),
            )
            .await;
        assert_eq!((status, &reply), (409, &busy), "{path}");
    }
    let goal = format!("/api/threads/{t}/goal");
    let compact = format!("/api/threads/{t}/compact");
    for (method, path, body, detail) in [
        (
            Method::PUT,
            &goal,
            Some(json!({"objective": "x"})),
            "Thread has a run in flight. Set the goal after the run finishes.",
        ),
        (
            Method::DELETE,
            &goal,
            None,
            "Thread has a run in flight. Clear the goal after the run finishes.",
        ),
        (
            Method::POST,
            &compact,
            Some(json!({})),
            "Thread has a run in flight. Compact after the run finishes.",
        ),
    ] {
        let (status, reply) = h.call(method.clone(), path, body).await;
        assert_eq!(
            (status, reply["detail"].as_str()),
            (409, Some(detail)),
            "{method} {path}"
        );
    }
    let (status, reply) = h
        .call(Method::POST, &format!("{goal}/from-chat"), Some(json!({})))
        .await;
    assert_eq!(
        (status, reply["detail"]["code"].as_str()),
        (409, Some("thread_busy"))
    );
    let (_, thread) = h
        .call(Method::GET, &format!("/api/threads/{t}"), None)
        .await;
    assert_eq!(thread["status"], "busy");

    let run = h.sim.active_runs(&t).remove(0);
    assert!(h.sim.finish_run(&run));
    let text = within(first.text()).await.unwrap();
    assert!(text.ends_with("event: end\ndata: null\n\n"));
    assert_eq!(h.sim.run(&run).unwrap().status, RunStatus::Success);
    assert_eq!(events(&h.frames(&t, "three").await).last(), Some(&"end"));
}

#[tokio::test]
async fn scripted_rejections_and_slow_headers() {
    let h = Harness::start().await;
    let t = h.thread().await;
    h.sim
        .script_thread(&t, Script::rejected(Reply::already_running_task(400)));
    h.sim.script_thread(&t, Script::rejected(Reply::html(502)));
    h.sim
        .script_thread(&t, Script::rejected(Reply::run_busy(&t)));
    let path = format!("/api/threads/{t}/runs/stream");
    let (status, body) = h
        .call(Method::POST, &path, Some(stream_body(&t, "x")))
        .await;
    assert_eq!(status, 400);
    assert!(
        body["detail"]
            .as_str()
            .unwrap()
            .contains("already running a task")
    );
    let response = h
        .send(Method::POST, &path, Some(stream_body(&t, "x")))
        .await;
    assert_html_error(response, 502, "<h1>502 Bad Gateway</h1>").await;
    let (status, _) = h
        .call(Method::POST, &path, Some(stream_body(&t, "x")))
        .await;
    assert_eq!(status, 409);
    assert!(
        h.sim.messages(&t).is_empty(),
        "refused runs leave no history"
    );

    h.sim.script_thread(
        &t,
        Script::with_answer("late").response_delay(Duration::from_millis(50)),
    );
    let started = Instant::now();
    let response = h.stream(&t, "slow").await;
    assert!(started.elapsed() >= Duration::from_millis(50));
    assert_eq!(response.status(), 200);
}

#[tokio::test]
async fn wait_answers_with_values_or_a_status_body_and_cancels_on_timeout() {
    let h = Harness::start().await;
    let t = h.thread().await;
    h.sim.script_thread(&t, Script::with_answer("Done."));
    let (status, body) = h.wait_run(&t, "do it").await;
    assert_eq!(status, 200);
    assert_eq!(body["messages"][1]["content"], "Done.");
    assert_eq!(body["title"], "do it");

    let status_body = WaitBody::Status {
        status: "error".into(),
        error: Some("boom".into()),
    };
    h.sim
        .script_thread(&t, Script::with_answer("x").wait_body(status_body));
    let (status, body) = h.wait_run(&t, "again").await;
    assert_eq!(
        (status, body),
        (200, json!({"status": "error", "error": "boom"}))
    );

    // A response slower than the client's timeout: the client gives up, the run is cancelled.
    h.sim.script_thread(
        &t,
        Script::with_answer("x").response_delay(Duration::from_secs(30)),
    );
    let sent = h
        .http
        .post(h.url(&format!("/api/threads/{t}/runs/wait")))
        .json(&wait_body(&t, "slow"))
        .timeout(Duration::from_millis(50))
        .send()
        .await;
    assert!(sent.unwrap_err().is_timeout());
    within(h.sim.wait_idle(&t, DEADLINE)).await.unwrap();
    assert_eq!(
        h.sim.runs(&t).last().unwrap().status,
        RunStatus::Interrupted
    );
}

#[tokio::test]
async fn issue_27_the_runs_of_a_thread_are_listed_newest_first_with_their_metadata() {
    let h = Harness::start().await;
    let t = h.thread().await;
    let path = format!("/api/threads/{t}/runs");
    let (status, listed) = h.call(Method::GET, &path, None).await;
    assert_eq!((status, listed), (200, json!([])));
    let mut first = create_body(&t, "one");
    first["metadata"] = json!({"im_bridge": {"entry": "e1"}});
    let (status, run) = h.call(Method::POST, &path, Some(first)).await;
    assert_eq!(status, 200, "{run}");
    assert_eq!(run["metadata"]["im_bridge"]["entry"], "e1");
    within(h.sim.wait_idle(&t, DEADLINE)).await.unwrap();
    let (status, _) = h
        .call(Method::POST, &path, Some(create_body(&t, "two")))
        .await;
    assert_eq!(status, 200);
    within(h.sim.wait_idle(&t, DEADLINE)).await.unwrap();
    let (status, listed) = h.call(Method::GET, &path, None).await;
    assert_eq!(status, 200);
    let listed = listed.as_array().unwrap();
    assert_eq!(listed.len(), 2);
    assert_eq!(listed[0]["metadata"], json!({}), "newest first");
    assert_eq!(listed[1]["metadata"]["im_bridge"]["entry"], "e1");
    assert_eq!(listed[1]["status"], "success");
    // A thread nobody created has no runs.
    let (status, listed) = h.call(Method::GET, "/api/threads/t-none/runs", None).await;
    assert_eq!((status, listed), (200, json!([])));
}

#[tokio::test]
async fn create_returns_a_pending_run_that_finishes_on_command_or_on_time() {
    let h = Harness::start().await;
    let t = h.thread().await;
    let path = format!("/api/threads/{t}/runs");
    h.sim
        .script_thread(&t, Script::with_answer("Filed.").hold(Hold::UntilFinished));
    let (status, run) = h
        .call(Method::POST, &path, Some(create_body(&t, "follow up")))
        .await;
    assert_eq!(status, 200);
    assert_eq!(
        (run["status"].as_str(), run["thread_id"].as_str()),
        (Some("pending"), Some(t.as_str()))
    );
    assert_eq!(run["multitask_strategy"], "reject");
    let run_id = run["run_id"].as_str().unwrap().to_owned();
    let (status, _) = h
        .call(Method::POST, &path, Some(create_body(&t, "more")))
        .await;
    assert_eq!(status, 409);
    within(h.sim.wait_until(DEADLINE, |s| s.messages(&t).len() == 2))
        .await
        .unwrap();
    assert_eq!(h.sim.active_runs(&t), std::slice::from_ref(&run_id));
    assert!(h.sim.finish_run(&run_id));
    within(h.sim.wait_idle(&t, DEADLINE)).await.unwrap();
    let (status, got) = h.call(Method::GET, &format!("{path}/{run_id}"), None).await;
    assert_eq!((status, got["status"].as_str()), (200, Some("success")));
    assert!(!h.sim.finish_run(&run_id));

    h.sim.script_thread(
        &t,
        Script::with_answer("x").hold(Hold::For(Duration::from_millis(30))),
    );
    let (status, _) = h
        .call(Method::POST, &path, Some(create_body(&t, "timed")))
        .await;
    assert_eq!(status, 200);
    within(h.sim.wait_idle(&t, DEADLINE)).await.unwrap();
    assert_eq!(h.sim.messages(&t).len(), 4);
}

#[tokio::test]
async fn run_bodies_are_validated_like_the_gateway() {
    let h = Harness::start().await;
    let t = h.thread().await;
    let path = format!("/api/threads/{t}/runs/stream");
    let with = |key: &str, value: Value| {
        let mut body = stream_body(&t, "x");
        body[key] = value;
        body
    };

    let mut extra = with("durability", json!("sync"));
    extra["checkpoint_during"] = json!(true);
    let (status, body) = h.call(Method::POST, &path, Some(extra)).await;
    assert_eq!(status, 422);
    let mut locs: Vec<Value> = body["detail"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            assert_eq!(e["type"], "extra_forbidden");
            assert_eq!(e["msg"], "Extra inputs are not permitted");
            e["loc"].clone()
        })
        .collect();
    locs.sort_by_key(Value::to_string);
    assert_eq!(
        locs,
        [
            json!(["body", "checkpoint_during"]),
            json!(["body", "durability"])
        ]
    );

    let (status, body) = h
        .call(
            Method::POST,
            &path,
            Some(with("stream_mode", json!(["messages", "values"]))),
        )
        .await;
    assert_eq!(
        (status, body["detail"][0]["type"].as_str()),
        (422, Some("unsupported_stream_mode"))
    );
    assert_eq!(
        body["detail"][0]["msg"],
        "Unsupported stream mode(s): messages"
    );
    let (status, body) = h
        .call(
            Method::POST,
            &path,
            Some(with("webhook", json!("http://x"))),
        )
        .await;
    assert_eq!(
        (status, body["detail"][0]["ctx"]["option"].as_str()),
        (422, Some("webhook"))
    );
    // DeerFlow refuses `enqueue` in the body model (422, not 501) and accepts `interrupt`.
    let (status, body) = h
        .call(
            Method::POST,
            &path,
            Some(with("multitask_strategy", json!("enqueue"))),
        )
        .await;
    assert_eq!(
        (status, body["detail"][0]["type"].as_str()),
        (422, Some("unsupported_run_option"))
    );
    let mut context = stream_body(&t, "x")["context"].clone();
    context["model_name"] = json!("nope");
    let (status, body) = h
        .call(Method::POST, &path, Some(with("context", context.clone())))
        .await;
    assert_eq!(
        (status, body["detail"].as_str()),
        (
            400,
            Some("Model 'nope' is not in the configured model allowlist")
        )
    );
    let (status, body) = h
        .call(
            Method::POST,
            &path,
            Some(with(
                "input",
                json!({"messages": [{"role": "robot", "content": "x"}]}),
            )),
        )
        .await;
    assert_eq!(status, 400);
    assert!(
        body["detail"]
            .as_str()
            .unwrap()
            .starts_with("Invalid message at input.messages[0]: ")
    );

    let (status, body) = h
        .call(
            Method::POST,
            "/api/threads/bad%20id/runs/stream",
            Some(stream_body("x", "x")),
        )
        .await;
    assert_eq!(
        (status, body["detail"][0]["type"].as_str()),
        (422, Some("string_pattern_mismatch"))
    );
    let (status, body) = h
        .call(
            Method::POST,
            "/api/threads/unknown/runs/stream",
            Some(stream_body("x", "x")),
        )
        .await;
    assert_eq!(
        (status, body),
        (404, json!({"detail": "Thread unknown not found"}))
    );
    assert!(h.sim.messages(&t).is_empty());

    context["model_name"] = json!("sim-fast");
    let response = h
        .send(Method::POST, &path, Some(with("context", context)))
        .await;
    assert_eq!(response.status(), 200);
}

#[tokio::test]
async fn a_client_that_goes_away_cancels_its_run() {
    let h = Harness::start().await;
    let t = h.thread().await;
    h.sim
        .script_thread(&t, Script::with_answer("held").hold(Hold::UntilFinished));
    let response = h.stream(&t, "bye").await;
    let mut body = response.bytes_stream();
    let first = within(body.next()).await.unwrap().unwrap();
    assert!(first.starts_with(b"event: metadata"));
    drop(body);
    within(h.sim.wait_idle(&t, DEADLINE)).await.unwrap();
    assert_eq!(h.sim.runs(&t)[0].status, RunStatus::Interrupted);
}
