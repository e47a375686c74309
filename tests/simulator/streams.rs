//! The streams of an existing run, as the real Gateway serves them (issue 26):
//! `GET …/runs/{id}/join` and `GET|POST …/runs/{id}/stream` are event streams of the run's
//! events (replayed from the start, or after `Last-Event-ID`), never JSON; cancelling
//! answers 202 with no body; a reader going away cancels a run that says
//! `on_disconnect: cancel`.

use std::time::Duration;

use futures_util::StreamExt;
use im_bridge::simulator::{Hold, RunStatus, Script, SimulatorConfig};
use reqwest::Method;
use serde_json::{Value, json};

use crate::simulator::support::*;

/// Starts a held background run (`POST …/runs`) on a new thread: `(thread, run id)`.
async fn held_run(h: &Harness, extra: Value) -> (String, String) {
    let t = h.thread().await;
    h.sim
        .script_thread(&t, Script::with_answer("Held.").hold(Hold::UntilFinished));
    let mut body = create_body(&t, "hold on");
    if let (Some(body), Some(extra)) = (body.as_object_mut(), extra.as_object()) {
        body.extend(extra.clone());
    }
    let (status, run) = h
        .call(Method::POST, &format!("/api/threads/{t}/runs"), Some(body))
        .await;
    assert_eq!(status, 200, "{run}");
    (t, run["run_id"].as_str().unwrap().to_owned())
}

/// A GET with optional `Last-Event-ID`: `(status, content type, body text)`.
/// Streams a run of `text` on `t` to its end: the run's URL (`Content-Location`) and the
/// frames the starting reader got, once the thread is idle again.
async fn finished_run(h: &Harness, t: &str, text: &str) -> (String, Vec<Frame>) {
    let response = h.stream(t, text).await;
    let location = response.headers()["content-location"]
        .to_str()
        .unwrap()
        .to_owned();
    let frames = frames(&parse_sse(&within(response.text()).await.unwrap()));
    within(h.sim.wait_idle(t, DEADLINE)).await.unwrap();
    (location, frames)
}

async fn get_stream(h: &Harness, path: &str, last_event_id: Option<&str>) -> (u16, String, String) {
    let mut request = h.http.get(h.url(path));
    if let Some(id) = last_event_id {
        request = request.header("Last-Event-ID", id);
    }
    let response = within(request.send()).await.unwrap();
    let status = response.status().as_u16();
    let kind = response
        .headers()
        .get("content-type")
        .map(|v| v.to_str().unwrap().to_owned())
        .unwrap_or_default();
    (status, kind, within(response.text()).await.unwrap())
}

/// The ids of `frames`, checking each is `{ms}-{seq}` with `seq` counting from `first`.
fn ids_from(frames: &[Frame], first: u64) -> Vec<String> {
    frames
        .iter()
        .enumerate()
        .map(|(n, f)| {
            let id = f.id.clone().unwrap_or_else(|| panic!("no id on {f:?}"));
            let (ms, seq) = id.split_once('-').expect("{ms}-{seq}");
            assert!(ms.parse::<u64>().is_ok(), "{id}");
            assert_eq!(seq.parse::<u64>().unwrap(), first + n as u64, "{id}");
            id
        })
        .collect()
}

/// The frames before `end`, checking the stream ends with exactly one id-less `end`.
fn before_end(frames: &[Frame]) -> &[Frame] {
    let (end, rest) = frames.split_last().expect("frames");
    assert_eq!((end.event.as_str(), &end.data), ("end", &Value::Null));
    assert_eq!(end.id, None, "`end` carries no id");
    assert!(rest.iter().all(|f| f.event != "end"));
    rest
}

#[tokio::test]
async fn issue_26_join_answers_an_event_stream_not_json() {
    let h = Harness::start().await;
    let t = h.thread().await;
    h.sim.script_thread(&t, Script::with_answer("Joined."));
    let (status, run) = h
        .call(
            Method::POST,
            &format!("/api/threads/{t}/runs"),
            Some(create_body(&t, "join me")),
        )
        .await;
    assert_eq!(status, 200);
    let run_id = run["run_id"].as_str().unwrap();
    let path = format!("/api/threads/{t}/runs/{run_id}/join");
    let (status, kind, text) = get_stream(&h, &path, None).await;
    assert_eq!(status, 200);
    assert!(kind.starts_with("text/event-stream"), "{kind}: {text}");
    assert!(
        serde_json::from_str::<Value>(&text).is_err(),
        "JSON: {text}"
    );
    let frames = frames(&parse_sse(&text));
    let events = before_end(&frames);
    assert_eq!(
        (events[0].event.as_str(), &events[0].data),
        ("metadata", &json!({"run_id": run_id, "thread_id": t}))
    );
    ids_from(events, 0);
    // A background run streams its request's mode (`values`): the last one holds the answer.
    let values = last_values(events);
    let last = values["messages"].as_array().unwrap().last().unwrap();
    assert_eq!(last["content"], "Joined.");
}

#[tokio::test]
async fn issue_26_a_finished_run_replays_its_events_on_both_stream_routes() {
    let h = Harness::start().await;
    let t = h.thread().await;
    h.sim
        .script_thread(&t, Script::with_answer("Once more.").chunks(3));
    let (location, original) = finished_run(&h, &t, "replay").await;
    let original_ids = ids_from(before_end(&original), 0);

    let join = format!("{location}/join");
    let stream = format!("{location}/stream");
    for (method, path) in [
        (Method::GET, &join),
        (Method::GET, &stream),
        (Method::POST, &stream),
    ] {
        let response = h.send(method.clone(), path, None).await;
        assert_eq!(response.status(), 200, "{method} {path}");
        assert!(response.headers().get("content-location").is_none());
        let replay = frames(&parse_sse(&within(response.text()).await.unwrap()));
        let replay_ids = ids_from(before_end(&replay), 0);
        assert_eq!(replay_ids, original_ids, "{method} {path}");
        assert_eq!(events(&replay), events(&original));
    }
}

#[tokio::test]
async fn issue_26_last_event_id_resumes_after_that_event() {
    let h = Harness::start().await;
    let t = h.thread().await;
    h.sim
        .script_thread(&t, Script::with_answer("abcdef").chunks(6));
    let (location, all) = finished_run(&h, &t, "resume").await;
    let ids = ids_from(before_end(&all), 0);
    let join = format!("{location}/join");

    let k = 4;
    let (_, _, text) = get_stream(&h, &join, Some(&ids[k])).await;
    let resumed = frames(&parse_sse(&text));
    assert_eq!(ids_from(before_end(&resumed), k as u64 + 1), ids[k + 1..]);
    // After the last event: just `end`.
    let (_, _, text) = get_stream(&h, &join, ids.last().map(String::as_str)).await;
    assert_eq!(text, "event: end\ndata: null\n\n");
    // An id the run never had replays everything, as the bridge does.
    let (_, _, text) = get_stream(&h, &join, Some("1-999")).await;
    assert_eq!(ids_from(before_end(&frames(&parse_sse(&text))), 0), ids);
}

#[tokio::test]
async fn issue_26_an_id_older_than_the_retained_events_is_a_gap() {
    let h = Harness::with(SimulatorConfig {
        stream_buffer: 3,
        ..Default::default()
    })
    .await;
    let t = h.thread().await;
    h.sim
        .script_thread(&t, Script::with_answer("abcdef").chunks(6));
    // The first reader may or may not keep up; either way the stream stays well formed.
    let (location, _) = finished_run(&h, &t, "long").await;
    let join = format!("{location}/join");
    let (_, _, text) = get_stream(&h, &join, None).await;
    let retained = frames(&parse_sse(&text));
    let retained = before_end(&retained);
    assert_eq!(retained.len(), 3, "{retained:?}");
    let first_seq: u64 = retained[0]
        .id
        .as_ref()
        .unwrap()
        .split_once('-')
        .unwrap()
        .1
        .parse()
        .unwrap();
    assert!(first_seq > 1, "{retained:?}");

    let old = format!("1-{}", first_seq - 1);
    let (status, _, text) = get_stream(&h, &join, Some(&old)).await;
    assert_eq!(status, 200);
    let gap = frames(&parse_sse(&text));
    assert_eq!(gap.len(), 1, "a gap, and no `end`: {text}");
    assert_eq!((gap[0].event.as_str(), gap[0].id.as_deref()), ("gap", None));
    let run_id = location.rsplit('/').next().unwrap();
    assert_eq!(
        gap[0].data,
        json!({"code": "stream_replay_gap", "run_id": run_id, "requested_event_id": old,
               "earliest_available_event_id": retained[0].id,
               "latest_available_event_id": retained[2].id,
               "recovery": "reload_durable_state"})
    );
}

#[tokio::test]
async fn issue_26_a_join_follows_a_live_run_with_heartbeats_to_its_end() {
    let h = Harness::with(SimulatorConfig {
        heartbeat_interval: Duration::from_millis(20),
        ..Default::default()
    })
    .await;
    let (t, run_id) = held_run(&h, json!({})).await;
    let response = h
        .send(
            Method::GET,
            &format!("/api/threads/{t}/runs/{run_id}/join"),
            None,
        )
        .await;
    let mut body = response.bytes_stream();
    let mut text = String::new();
    while !text.contains(": heartbeat\n\n") {
        let chunk = within(body.next()).await.unwrap().unwrap();
        text.push_str(std::str::from_utf8(&chunk).unwrap());
    }
    assert!(text.starts_with("event: metadata\n"), "{text}");
    assert!(!text.contains("event: end"));
    assert!(h.sim.finish_run(&run_id));
    while let Some(chunk) = within(body.next()).await {
        text.push_str(std::str::from_utf8(&chunk.unwrap()).unwrap());
    }
    let frames = frames(&parse_sse(&text));
    ids_from(before_end(&frames), 0);
    assert_eq!(h.sim.run(&run_id).unwrap().status, RunStatus::Success);
}

#[tokio::test]
async fn issue_26_a_reader_going_away_cancels_a_run_that_says_cancel() {
    let h = Harness::start().await;
    // Two held runs, one with the default `on_disconnect` (cancel), one that continues; a
    // join of each is dropped at the same moment.
    let (cancel_thread, cancelled) = held_run(&h, json!({})).await;
    let (_, continued) = held_run(&h, json!({"on_disconnect": "continue"})).await;
    let mut bodies = Vec::new();
    for (t, run_id) in [
        (&cancel_thread, &cancelled),
        (&h.sim.run(&continued).unwrap().thread_id, &continued),
    ] {
        let response = h
            .send(
                Method::GET,
                &format!("/api/threads/{t}/runs/{run_id}/join"),
                None,
            )
            .await;
        let mut body = response.bytes_stream();
        let first = within(body.next()).await.unwrap().unwrap();
        assert!(first.starts_with(b"event: metadata"));
        bodies.push(body);
    }
    drop(bodies);
    within(h.sim.wait_idle(&cancel_thread, DEADLINE))
        .await
        .unwrap();
    assert_eq!(
        h.sim.run(&cancelled).unwrap().status,
        RunStatus::Interrupted
    );
    assert_eq!(h.sim.run(&continued).unwrap().status, RunStatus::Running);
    assert!(h.sim.finish_run(&continued));
    within(h.sim.wait_until(DEADLINE, |s| {
        s.run(&continued)
            .is_some_and(|r| r.status == RunStatus::Success)
    }))
    .await
    .unwrap();
}

#[tokio::test]
async fn issue_26_a_run_whose_events_are_forgotten_answers_just_end() {
    let h = Harness::with(SimulatorConfig {
        stream_retention: Duration::ZERO,
        ..Default::default()
    })
    .await;
    let t = h.thread().await;
    // The reader that started the run still reads all of it.
    let (location, first) = finished_run(&h, &t, "gone").await;
    assert!(before_end(&first).len() > 2);
    let (status, kind, text) = get_stream(&h, &format!("{location}/join"), None).await;
    assert_eq!(status, 200);
    assert!(kind.starts_with("text/event-stream"));
    assert_eq!(text, "event: end\ndata: null\n\n");
}

#[tokio::test]
async fn issue_26_cancel_answers_202_without_a_body_and_stream_can_interrupt() {
    let h = Harness::start().await;
    let (t, run_id) = held_run(&h, json!({"on_disconnect": "continue"})).await;
    let cancel = format!("/api/threads/{t}/runs/{run_id}/cancel");
    let response = h.send(Method::POST, &cancel, None).await;
    assert_eq!(response.status(), 202);
    assert_eq!(within(response.text()).await.unwrap(), "");
    within(h.sim.wait_idle(&t, DEADLINE)).await.unwrap();
    assert_eq!(h.sim.run(&run_id).unwrap().status, RunStatus::Interrupted);
    assert_eq!(
        h.call(Method::POST, &cancel, None).await,
        (
            409,
            json!({"detail": format!("Run {run_id} is not cancellable (status: interrupted)")})
        )
    );
    // The cancelled run's log still ends with `end`.
    let (_, _, text) = get_stream(&h, &format!("/api/threads/{t}/runs/{run_id}/join"), None).await;
    before_end(&frames(&parse_sse(&text)));

    // Cancel-then-stream: the rest of the run's events, then `end`.
    let (t, run_id) = held_run(&h, json!({"on_disconnect": "continue"})).await;
    let path = format!("/api/threads/{t}/runs/{run_id}/stream?action=interrupt");
    let response = h.send(Method::POST, &path, None).await;
    assert_eq!(response.status(), 200);
    let frames = frames(&parse_sse(&within(response.text()).await.unwrap()));
    assert_eq!(before_end(&frames)[0].event, "metadata");
    assert_eq!(h.sim.run(&run_id).unwrap().status, RunStatus::Interrupted);
    assert_eq!(h.call(Method::POST, &path, None).await.0, 409);

    // `wait`: 204 once the run stopped.
    let (t, run_id) = held_run(&h, json!({"on_disconnect": "continue"})).await;
    let response = h
        .send(
            Method::POST,
            &format!("/api/threads/{t}/runs/{run_id}/cancel?wait=true"),
            None,
        )
        .await;
    assert_eq!(response.status(), 204);
    assert_eq!(h.sim.run(&run_id).unwrap().status, RunStatus::Interrupted);

    assert_eq!(
        h.call(
            Method::POST,
            &format!("/api/threads/{t}/runs/nope/cancel"),
            None
        )
        .await,
        (404, json!({"detail": "Run nope not found"}))
    );
    assert_eq!(
        h.call(
            Method::GET,
            &format!("/api/threads/{t}/runs/nope/join"),
            None
        )
        .await,
        (404, json!({"detail": "Run nope not found"}))
    );
    let (status, body) = h
        .call(Method::POST, &format!("{}?action=later", &cancel), None)
        .await;
    assert_eq!(
        (status, &body["detail"][0]["loc"]),
        (422, &json!(["query", "action"]))
    );
}
