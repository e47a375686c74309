//! Runs: SSE framing, delivery modes, frames a client must filter, failures, busy threads,
//! `runs.wait`, `runs.create`, and run body validation (`spec/gateway.md` §3, §8).

use std::time::{Duration, Instant};

use futures_util::StreamExt;
use im_bridge::simulator::{
    ExtraFrame, Failure, Hold, Reply, RunStatus, Script, SimulatorConfig, WaitBody,
};
use reqwest::Method;
use serde_json::{Value, json};

use crate::support::*;

#[tokio::test]
async fn a_stream_is_framed_and_ordered_like_the_gateway() {
    let h = Harness::start().await;
    let t = h.thread().await;
    let answer = "Hello, wörld! 你好";
    h.sim
        .script_thread(&t, Script::with_answer(answer).chunks(3).message_id("ai-1"));
    let response = h.stream(&t, "hi there").await;
    let headers = response.headers().clone();
    let raw = within(response.text()).await.unwrap();
    assert_eq!(headers["content-type"], "text/event-stream; charset=utf-8");
    assert_eq!(headers["cache-control"], "no-cache");
    assert_eq!(headers["x-accel-buffering"], "no");
    assert!(raw.ends_with("\n\nevent: end\ndata: null\n\n"), "{raw}");
    assert!(raw.contains("你好"), "non-ASCII stays raw UTF-8");

    let frames = frames(&parse_sse(&raw));
    assert_eq!(
        events(&frames),
        [
            "metadata", "values", "messages", "messages", "messages", "messages", "values", "end"
        ]
    );
    let run_id = frames[0].data["run_id"].as_str().unwrap();
    assert_eq!(frames[0].data["thread_id"], t.as_str());
    assert_eq!(
        headers["content-location"],
        format!("/api/threads/{t}/runs/{run_id}").as_str()
    );
    for (seq, frame) in frames[..frames.len() - 1].iter().enumerate() {
        let (ms, n) = frame.id.as_deref().unwrap().split_once('-').unwrap();
        assert!(ms.parse::<u128>().unwrap() > 1_600_000_000_000);
        assert_eq!(n, seq.to_string());
    }
    let end = frames.last().unwrap();
    assert_eq!((end.id.as_deref(), &end.data), (None, &Value::Null));

    let (chunk, meta) = (&frames[2].data[0], &frames[2].data[1]);
    assert_eq!(chunk["type"], "AIMessageChunk");
    assert_eq!(chunk["tool_call_chunks"], json!([]));
    assert_eq!(
        (meta["run_id"].as_str(), meta["thread_id"].as_str()),
        (Some(run_id), Some(t.as_str()))
    );
    assert_eq!(delta_text(&frames, "ai-1"), answer);
    assert_eq!(payloads(&frames)[3]["chunk_position"], "last");

    let initial = &frames[1].data;
    assert_eq!(initial["messages"].as_array().unwrap().len(), 1);
    let values = last_values(&frames);
    let messages = values["messages"].as_array().unwrap();
    assert_eq!(
        (
            messages[0]["type"].as_str(),
            messages[0]["content"].as_str()
        ),
        (Some("human"), Some("hi there"))
    );
    assert_eq!(
        (
            messages[1]["type"].as_str(),
            messages[1]["content"].as_str()
        ),
        (Some("ai"), Some(answer))
    );
    assert_eq!(messages[1]["id"], "ai-1");
    assert_eq!(values["title"], "hi there");

    // The history persists: the next run, /state and GET thread see the whole conversation.
    let next = h.frames(&t, "second").await;
    assert_eq!(last_values(&next)["messages"].as_array().unwrap().len(), 4);
    let (status, state) = h
        .call(Method::GET, &format!("/api/threads/{t}/state"), None)
        .await;
    assert_eq!(status, 200);
    assert_eq!(state["values"]["messages"].as_array().unwrap().len(), 4);
    let (_, thread) = h
        .call(Method::GET, &format!("/api/threads/{t}"), None)
        .await;
    assert_eq!(thread["status"], "idle");
    assert_eq!(thread["values"]["messages"][2]["content"], "second");
}

#[tokio::test]
async fn the_default_agent_answers_kindly() {
    let h = Harness::start().await;
    let t = h.thread().await;
    let frames = h.frames(&t, "what can you do?").await;
    let values = last_values(&frames);
    let reply = values["messages"][1]["content"].as_str().unwrap();
    assert!(
        reply.contains("simulator") && reply.contains("/goal"),
        "{reply}"
    );
    assert!(reply.contains("what can you do?"));
    let id = values["messages"][1]["id"].as_str().unwrap();
    assert!(id.starts_with("lc_run--"));
    assert_eq!(delta_text(&frames, id), reply);
}

#[tokio::test]
async fn cumulative_chunks_grow_under_a_custom_event_name() {
    let h = Harness::start().await;
    let t = h.thread().await;
    let script = Script::with_answer("one two three four")
        .chunks(4)
        .cumulative()
        .message_id("m-7")
        .messages_event("messages-tuple");
    h.sim.script_thread(&t, script);
    let frames = h.frames(&t, "count").await;
    let texts: Vec<String> = payloads(&frames)
        .iter()
        .map(|p| p["content"].as_str().unwrap().to_owned())
        .filter(|c| !c.is_empty())
        .collect();
    assert_eq!(texts.len(), 4);
    assert!(
        texts
            .windows(2)
            .all(|w| w[1].starts_with(&w[0]) && w[1].len() > w[0].len())
    );
    assert_eq!(texts.last().unwrap(), "one two three four");
    assert!(frames.iter().any(|f| f.event == "messages-tuple"));
    assert!(!frames.iter().any(|f| f.event == "messages"));
}

#[tokio::test]
async fn hidden_frames_and_constructor_form_are_sent_for_clients_to_filter() {
    let h = Harness::start().await;
    let t = h.thread().await;
    let raw = ExtraFrame::Raw {
        event: "values|sub:1".into(),
        data: json!({"x": 1}),
    };
    let script = Script::with_answer("visible")
        .hidden_frames()
        .constructor_form()
        .extra_frame(raw);
    h.sim.script_thread(&t, script);
    let frames = h.frames(&t, "go").await;
    let payloads = payloads(&frames);
    let kind = |p: &Value| -> String {
        let t = p["type"].as_str().unwrap();
        if t == "constructor" {
            format!("constructor:{}", p["id"][3].as_str().unwrap())
        } else {
            t.to_owned()
        }
    };
    let kinds: Vec<String> = payloads.iter().map(kind).collect();
    assert_eq!(
        &kinds[..4],
        ["tool", "human", "system", "constructor:ToolMessage"]
    );
    assert_eq!(payloads[1]["additional_kwargs"]["hide_from_ui"], true);
    assert!(
        kinds[4..]
            .iter()
            .all(|k| k == "constructor:AIMessageChunk" || k == "AIMessageChunk")
    );
    let text: String = payloads[4..]
        .iter()
        .filter_map(|p| p["kwargs"]["content"].as_str().or(p["content"].as_str()))
        .collect();
    assert_eq!(text, "visible");
    assert!(
        frames
            .iter()
            .any(|f| f.event == "values|sub:1" && f.data == json!({"x": 1}))
    );
    // Hidden frames never reach the history.
    let values = last_values(&frames);
    assert_eq!(values["messages"].as_array().unwrap().len(), 2);
}

#[tokio::test]
async fn clarification_and_present_files_land_in_the_final_values() {
    let h = Harness::start().await;
    let t = h.thread().await;
    let path = "/mnt/user-data/outputs/report.md";
    let script = Script::with_answer("Here is the report.")
        .present_files([path])
        .ask_clarification("Which quarter?");
    h.sim.script_thread(&t, script);
    let frames = h.frames(&t, "write the report").await;
    let values = last_values(&frames);
    let messages = values["messages"].as_array().unwrap();
    let types: Vec<&str> = messages
        .iter()
        .map(|m| m["type"].as_str().unwrap())
        .collect();
    assert_eq!(types, ["human", "ai", "tool", "ai", "tool"]);
    assert_eq!(messages[1]["tool_calls"][0]["name"], "present_files");
    assert_eq!(
        messages[1]["tool_calls"][0]["args"]["filepaths"],
        json!([path])
    );
    assert_eq!(messages[1]["tool_calls"][0]["type"], "tool_call");
    assert_eq!(
        messages[2]["tool_call_id"],
        messages[1]["tool_calls"][0]["id"]
    );
    assert_eq!(messages[3]["content"], "Here is the report.");
    assert_eq!(messages[3]["tool_calls"][0]["name"], "ask_clarification");
    assert_eq!(
        (
            messages[4]["name"].as_str(),
            messages[4]["content"].as_str()
        ),
        (Some("ask_clarification"), Some("Which quarter?"))
    );
    assert_eq!(values["artifacts"], json!([path]));
    // The present_files call is also streamed as a whole `ai` message.
    assert!(
        payloads(&frames)
            .iter()
            .any(|p| p["type"] == "ai" && p["tool_calls"][0]["name"] == "present_files")
    );
}

#[tokio::test]
async fn an_error_mid_stream_comes_just_before_end() {
    let h = Harness::start().await;
    let t = h.thread().await;
    h.sim.script_thread(
        &t,
        Script::with_answer("abcdef")
            .chunks(6)
            .error_mid_stream("MARKER-boom", "RuntimeError"),
    );
    let frames = h.frames(&t, "fail please").await;
    let names = events(&frames);
    assert_eq!(names[names.len() - 2..], ["error", "end"]);
    assert_eq!(
        frames[frames.len() - 2].data,
        json!({"message": "MARKER-boom", "name": "RuntimeError"})
    );
    assert_eq!(names.iter().filter(|e| **e == "messages").count(), 3);
    assert_eq!(h.sim.runs(&t)[0].status, RunStatus::Error);
    // The thread is free at once; `wait` still answers 200 with the checkpoint values.
    h.sim
        .script_thread(&t, Script::with_answer("x").error_mid_stream("boom", "E"));
    let (status, body) = h
        .call(
            Method::POST,
            &format!("/api/threads/{t}/runs/wait"),
            Some(wait_body(&t, "again")),
        )
        .await;
    assert_eq!(status, 200);
    let last = body["messages"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(
        (last["type"].as_str(), last["content"].as_str()),
        (Some("human"), Some("again"))
    );
}

#[tokio::test]
async fn a_dropped_connection_has_no_end_and_ends_the_run() {
    let h = Harness::start().await;
    let t = h.thread().await;
    h.sim.script_thread(
        &t,
        Script::with_answer("abcdef").chunks(6).drop_mid_stream(),
    );
    let response = h.stream(&t, "drop").await;
    assert_eq!(response.status(), 200);
    let mut body = response.bytes_stream();
    let mut text = Vec::new();
    let error = within(async {
        loop {
            match body.next().await {
                Some(Ok(bytes)) => text.extend_from_slice(&bytes),
                Some(Err(e)) => return Some(e),
                None => return None,
            }
        }
    })
    .await;
    assert!(error.is_some(), "the body must fail, not end cleanly");
    let text = String::from_utf8(text).unwrap();
    assert!(
        text.contains("event: messages") && !text.contains("event: end"),
        "{text}"
    );
    within(h.sim.wait_idle(&t, DEADLINE)).await.unwrap();
    assert_eq!(h.sim.runs(&t)[0].status, RunStatus::Error);

    // The clean variant: the body ends without `end`.
    h.sim.script_thread(
        &t,
        Script::with_answer("abc").fail_after_chunk(1, Failure::CloseWithoutEnd),
    );
    let (_, items) = h.stream_all(&t, "close").await;
    let names: Vec<String> = frames(&items).iter().map(|f| f.event.clone()).collect();
    assert_eq!(names.last().map(String::as_str), Some("messages"));
}

#[tokio::test]
async fn an_idle_gap_sends_heartbeats() {
    let config = SimulatorConfig {
        heartbeat_interval: Duration::from_millis(20),
        ..Default::default()
    };
    let h = Harness::with(config).await;
    let t = h.thread().await;
    let script = Script::with_answer("ab")
        .chunks(2)
        .pause_after_chunk(1, Duration::from_millis(150));
    h.sim.script_thread(&t, script);
    let (_, items) = h.stream_all(&t, "wait for it").await;
    let first_chunk = items
        .iter()
        .position(|i| matches!(i, Item::Frame(f) if f.event == "messages"))
        .unwrap();
    let beats: Vec<usize> = items
        .iter()
        .enumerate()
        .filter(|(_, i)| matches!(i, Item::Comment(c) if c == "heartbeat"))
        .map(|(n, _)| n)
        .collect();
    assert!(beats.len() >= 2, "{items:?}");
    assert!(beats.iter().all(|b| *b > first_chunk));
    assert!(matches!(items.last(), Some(Item::Frame(f)) if f.event == "end"));
}

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
    let (status, reply) = h
        .call(Method::PUT, &goal, Some(json!({"objective": "x"})))
        .await;
    assert_eq!(
        (status, reply["detail"].as_str()),
        (
            409,
            Some("Thread has a run in flight. Set the goal after the run finishes.")
        )
    );
    let (status, reply) = h.call(Method::DELETE, &goal, None).await;
    assert_eq!(
        (status, reply["detail"].as_str()),
        (
            409,
            Some("Thread has a run in flight. Clear the goal after the run finishes.")
        )
    );
    let (status, reply) = h
        .call(
            Method::POST,
            &format!("/api/threads/{t}/compact"),
            Some(json!({})),
        )
        .await;
    assert_eq!(
        (status, reply["detail"].as_str()),
        (
            409,
            Some("Thread has a run in flight. Compact after the run finishes.")
        )
    );
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
    assert_eq!(response.status(), 502);
    assert!(
        response.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/html")
    );
    assert!(
        within(response.text())
            .await
            .unwrap()
            .contains("<h1>502 Bad Gateway</h1>")
    );
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
    let path = format!("/api/threads/{t}/runs/wait");
    h.sim.script_thread(&t, Script::with_answer("Done."));
    let (status, body) = h
        .call(Method::POST, &path, Some(wait_body(&t, "do it")))
        .await;
    assert_eq!(status, 200);
    assert_eq!(body["messages"][1]["content"], "Done.");
    assert_eq!(body["title"], "do it");

    let status_body = WaitBody::Status {
        status: "error".into(),
        error: Some("boom".into()),
    };
    h.sim
        .script_thread(&t, Script::with_answer("x").wait_body(status_body));
    let (status, body) = h
        .call(Method::POST, &path, Some(wait_body(&t, "again")))
        .await;
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
        .post(h.url(&path))
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
    assert_eq!(h.sim.active_runs(&t), [run_id.clone()]);
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
    let (status, _) = h
        .call(
            Method::POST,
            &path,
            Some(with("multitask_strategy", json!("enqueue"))),
        )
        .await;
    assert_eq!(status, 501);
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
