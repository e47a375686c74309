//! Streaming runs: SSE framing and order, delivery modes, frames a client must filter,
//! clarification and files, failures mid-stream, heartbeats (`spec/gateway.md` §3.3, §8).

use std::time::Duration;

use futures_util::StreamExt;
use im_bridge::simulator::{ExtraFrame, Failure, HOST_OUTPUTS, RunStatus, Script, SimulatorConfig};
use reqwest::Method;
use serde_json::{Value, json};

use crate::simulator::support::*;

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

/// `present_files` answers as DeerFlow's tool does: it records the normalized paths of a
/// call whose paths all lie in the outputs (a host path under `thread_data.outputs_path`,
/// a virtual one without its slash), refuses a whole call with an `Error:` answer and
/// records nothing when one does not, and a tool that raised is answered with
/// `status: error`; each answer names its call's `tool_call_id`.
#[tokio::test]
async fn present_files_records_normalized_paths_or_refuses_the_call() {
    let h = Harness::start().await;
    let t = h.thread().await;
    let script = Script::with_answer("Done.")
        .present_files([
            format!("{HOST_OUTPUTS}/a.md"),
            "mnt/user-data/outputs/b/../c.md".to_owned(),
        ])
        .present_files(["/mnt/user-data/outputs/d.md", "/mnt/user-data/uploads/e"])
        .present_files_raising(["/mnt/user-data/outputs/f.md"])
        .present_files(["/mnt/user-data/outputs/a.md"]);
    h.sim.script_thread(&t, script);
    let frames = h.frames(&t, "files").await;
    let values = last_values(&frames);
    let outputs = values["thread_data"]["outputs_path"].as_str().unwrap();
    assert!(
        outputs.ends_with(&format!("/threads/{t}/user-data/outputs"))
            && !outputs.starts_with("/mnt/"),
        "a host path: {outputs}"
    );
    let messages = values["messages"].as_array().unwrap();
    let calls: Vec<&Value> = messages.iter().filter(|m| m["type"] == "ai").collect();
    assert_eq!(
        calls[0]["tool_calls"][0]["args"]["filepaths"][0],
        format!("{outputs}/a.md"),
        "the host path as the model wrote it"
    );
    let answers: Vec<(&str, &str, &str)> = messages
        .iter()
        .filter(|m| m["type"] == "tool")
        .map(|m| {
            (
                m["tool_call_id"].as_str().unwrap(),
                m["status"].as_str().unwrap(),
                m["content"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(answers.len(), 4, "{answers:?}");
    for (answer, call) in answers.iter().zip(&calls) {
        assert_eq!(call["tool_calls"][0]["id"], answer.0);
    }
    assert_eq!(
        (answers[0].1, answers[0].2),
        ("success", "Successfully presented files")
    );
    assert_eq!(
        (answers[1].1, answers[1].2),
        (
            "success",
            "Error: Only files in /mnt/user-data/outputs can be presented: /mnt/user-data/uploads/e"
        )
    );
    assert_eq!(answers[2].1, "error");
    assert!(
        answers[2]
            .2
            .starts_with("Error: Tool 'present_files' failed"),
        "{answers:?}"
    );
    assert_eq!(answers[3].2, "Successfully presented files");
    // Recorded once each, as the `merge_artifacts` reducer deduplicates.
    assert_eq!(
        values["artifacts"],
        json!(["/mnt/user-data/outputs/a.md", "/mnt/user-data/outputs/c.md"])
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
    let (status, body) = h.wait_run(&t, "again").await;
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
