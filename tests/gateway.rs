//! The Gateway client against the Gateway simulator over loopback, route by route (issue 3):
//! the client's wire format and the simulator's are written independently, so agreement
//! here is real evidence for both.

use std::time::Duration;

use im_bridge::gateway::ThreadId;
use im_bridge::gateway::{
    CompactRequest, GatewayClient, GatewayConfig, GatewayError, InternalToken, Owner, RunEvent,
    RunRequest,
};
use im_bridge::simulator::{
    Fault, GoalState, Hold, Reply, Route, RunningSimulator, Script, SimModel, SimSkill, Simulator,
    SimulatorConfig,
};
use serde_json::json;

const TOKEN: &str = "internal-token-for-tests";

/// A simulator that checks the internal token and CSRF, and a client that knows the token.
async fn start(config: SimulatorConfig) -> (RunningSimulator, GatewayClient) {
    let sim = Simulator::start(SimulatorConfig {
        internal_token: Some(TOKEN.into()),
        enforce_csrf: true,
        ..config
    })
    .await
    .unwrap();
    let client = client_for(&sim, TOKEN, Duration::from_secs(5));
    (sim, client)
}

/// [`start`] with the default configuration, plus a fresh ownerless thread.
async fn start_on_a_thread() -> (RunningSimulator, GatewayClient, ThreadId) {
    let (sim, client) = start(SimulatorConfig::default()).await;
    let thread = new_thread(&client, None).await;
    (sim, client, thread)
}

/// A client for `sim` that sends `token` and gives `/goal/from-chat` (and `/compact`)
/// `from_chat_timeout`.
fn client_for(sim: &RunningSimulator, token: &str, from_chat_timeout: Duration) -> GatewayClient {
    GatewayClient::new(GatewayConfig {
        langgraph_url: sim.langgraph_url(),
        gateway_url: sim.gateway_url(),
        internal_token: Some(InternalToken::new(token)),
        from_chat_timeout,
        ..GatewayConfig::default()
    })
    .unwrap()
}

/// Creates a thread with chat metadata, owned by `owner`.
async fn new_thread(client: &GatewayClient, owner: Option<&Owner>) -> ThreadId {
    client.create_thread(owner, &json!({"channel_source": {"type": "im_channel", "provider": "telegram", "chat_id": "1"}}), None).await.unwrap().thread_id
}

/// Streams a run of `text` on `thread` to its end and returns every event.
async fn collect(client: &GatewayClient, thread: &ThreadId, text: &str) -> Vec<RunEvent> {
    let mut stream = client
        .stream_run(None, thread, &RunRequest::new(text))
        .await
        .unwrap();
    let mut events = Vec::new();
    while let Some(event) = stream.next().await {
        events.push(event.unwrap());
    }
    events
}

/// How a streaming run on `thread` fails (the test expects it to).
async fn stream_error(client: &GatewayClient, thread: &ThreadId) -> GatewayError {
    client
        .stream_run(None, thread, &RunRequest::new("x"))
        .await
        .unwrap_err()
}

/// How a `runs.wait` on `thread` fails (the test expects it to).
async fn wait_error(client: &GatewayClient, thread: &ThreadId) -> GatewayError {
    client
        .wait_run(None, thread, &RunRequest::new("x"))
        .await
        .unwrap_err()
}

/// How a default `/compact` of `thread` fails (the test expects it to).
async fn compact_error(client: &GatewayClient, thread: &ThreadId) -> GatewayError {
    client
        .compact_thread(None, thread, &CompactRequest::default())
        .await
        .unwrap_err()
}

/// How a hintless `/goal/from-chat` on `thread` fails (the test expects it to).
async fn from_chat_error(client: &GatewayClient, thread: &ThreadId) -> GatewayError {
    client.goal_from_chat(None, thread, None).await.unwrap_err()
}

#[tokio::test]
async fn threads_create_get_patch_and_state() {
    let (sim, client) = start(SimulatorConfig::default()).await;
    // A safe id, as the bridge sends (issue 26): DeerFlow's PATCH matches only the
    // sanitized owner, so a raw id with `@` would lose its own thread there.
    let owner = Owner::new("alice-example");
    let thread = new_thread(&client, Some(&owner)).await;
    assert_eq!(
        sim.thread_owner(thread.as_str()).as_deref(),
        Some("alice-example")
    );
    assert_eq!(
        client
            .get_thread(Some(&owner), &thread)
            .await
            .unwrap()
            .thread_id,
        thread
    );
    // Another owner cannot see it.
    assert_eq!(
        client
            .get_thread(Some(&Owner::new("mallory")), &thread)
            .await
            .unwrap_err(),
        GatewayError::NotFound
    );
    client
        .update_thread_metadata(
            Some(&owner),
            &thread,
            &json!({"channel_source": {"topic_id": "t"}}),
        )
        .await
        .unwrap();
    assert_eq!(
        sim.thread_metadata(thread.as_str()).unwrap()["channel_source"]["topic_id"],
        "t"
    );
    // A preferred id is honoured and the call is idempotent.
    let preferred = ThreadId::new("gh-repo-42");
    let a = client
        .create_thread(None, &json!({}), Some(&preferred))
        .await
        .unwrap();
    let b = client
        .create_thread(None, &json!({}), Some(&preferred))
        .await
        .unwrap();
    assert_eq!(
        (a.thread_id.as_str(), b.thread_id.as_str()),
        ("gh-repo-42", "gh-repo-42")
    );
    let state = client
        .get_thread_state(Some(&owner), &thread)
        .await
        .unwrap();
    assert!(state.goal().is_none() && state.goal_outcome().is_none());
    // Every write carried the CSRF pair (the simulator enforces it) and the token.
    for r in sim.requests() {
        assert_eq!(r.header("x-deerflow-internal-token"), Some(TOKEN));
    }
}

#[tokio::test]
async fn a_wrong_token_is_unauthorized() {
    let (sim, _) = start(SimulatorConfig::default()).await;
    let client = client_for(&sim, "wrong", Duration::from_secs(5));
    assert_eq!(
        client
            .create_thread(None, &json!({}), None)
            .await
            .unwrap_err(),
        GatewayError::Unauthorized
    );
    assert_eq!(
        client.list_models(None).await.unwrap_err(),
        GatewayError::Unauthorized
    );
}

#[tokio::test]
async fn stream_wait_and_create_runs() {
    let (sim, client, thread) = start_on_a_thread().await;
    sim.script_next_run(Script::with_answer("Hello there, friend.").chunks(3));
    let events = collect(&client, &thread, "hi").await;
    assert!(matches!(events.first(), Some(RunEvent::Metadata { .. })));
    assert_eq!(events.last(), Some(&RunEvent::End));
    let text: String = events
        .iter()
        .filter_map(|e| match e {
            RunEvent::Messages { message, .. } => Some(message.text().to_owned()),
            _ => None,
        })
        .collect();
    assert_eq!(text, "Hello there, friend.");
    assert!(
        events
            .iter()
            .any(|e| matches!(e, RunEvent::Values(v) if v.message_count() == 2))
    );

    sim.script_next_run(Script::with_answer("Waited answer."));
    let values = client
        .wait_run(None, &thread, &RunRequest::new("again"))
        .await
        .unwrap();
    assert_eq!(
        values["messages"].as_array().unwrap().last().unwrap()["content"],
        "Waited answer."
    );

    sim.script_next_run(Script::with_answer("later").hold(Hold::UntilFinished));
    let run_id = client
        .create_run(None, &thread, &RunRequest::new("background"))
        .await
        .unwrap();
    // While it runs, a second run is busy on every path.
    assert_eq!(stream_error(&client, &thread).await, GatewayError::Busy);
    assert_eq!(wait_error(&client, &thread).await, GatewayError::Busy);
    assert_eq!(
        client.put_goal(None, &thread, "goal").await.unwrap_err(),
        GatewayError::Busy
    );
    assert_eq!(
        client.delete_goal(None, &thread).await.unwrap_err(),
        GatewayError::Busy
    );
    assert_eq!(compact_error(&client, &thread).await, GatewayError::Busy);
    assert_eq!(from_chat_error(&client, &thread).await, GatewayError::Busy);
    assert!(sim.finish_run(&run_id));
    sim.wait_idle(thread.as_str(), Duration::from_secs(5))
        .await
        .unwrap();
    // The simulator accepted every body the client sent (it rejects unknown keys with 422).
    assert!(
        sim.requests().iter().all(|r| r.status != Some(422)),
        "{:?}",
        sim.requests()
    );
}

#[tokio::test]
async fn stream_failures_surface_as_typed_errors() {
    let (sim, client, thread) = start_on_a_thread().await;
    sim.script_next_run(
        Script::with_answer("partial text here")
            .chunks(4)
            .error_mid_stream("MARKER server text", "ValueError"),
    );
    let events = collect(&client, &thread, "x").await;
    assert!(events.contains(&RunEvent::Error {
        name: "ValueError".into()
    }));
    assert_eq!(events.last(), Some(&RunEvent::End));
    assert!(!format!("{events:?}").contains("MARKER"));

    sim.script_next_run(
        Script::with_answer("cut short here please")
            .chunks(4)
            .drop_mid_stream(),
    );
    let mut stream = client
        .stream_run(None, &thread, &RunRequest::new("x"))
        .await
        .unwrap();
    let mut last = None;
    while let Some(event) = stream.next().await {
        last = Some(event);
    }
    assert_eq!(last, Some(Err(GatewayError::StreamClosed)));

    sim.script_next_run(Script::rejected(Reply::html(502)));
    assert_eq!(
        stream_error(&client, &thread).await,
        GatewayError::Server { status: 502 }
    );
    sim.script_next_run(Script::rejected(Reply::already_running_task(500)));
    assert_eq!(wait_error(&client, &thread).await, GatewayError::Busy);
}

#[tokio::test]
async fn goal_get_put_delete_and_state() {
    let (sim, client, thread) = start_on_a_thread().await;
    assert_eq!(client.get_goal(None, &thread).await.unwrap(), None);
    let goal = client
        .put_goal(None, &thread, "  ship   the report ")
        .await
        .unwrap();
    assert_eq!(goal.objective, "ship the report");
    assert_eq!(
        client
            .get_goal(None, &thread)
            .await
            .unwrap()
            .unwrap()
            .objective,
        "ship the report"
    );
    assert_eq!(
        client.put_goal(None, &thread, "   ").await.unwrap_err(),
        GatewayError::Invalid { status: 422 }
    );
    sim.script_next_run(Script::with_answer("done").goal_continuations(1).goal_met());
    collect(&client, &thread, "ship the report").await;
    assert_eq!(client.get_goal(None, &thread).await.unwrap(), None);
    let outcome = client
        .get_thread_state(None, &thread)
        .await
        .unwrap()
        .goal_outcome()
        .unwrap();
    assert_eq!(
        (outcome.status.as_str(), outcome.objective.as_str()),
        ("achieved", "ship the report")
    );
    client.put_goal(None, &thread, "next").await.unwrap();
    client.delete_goal(None, &thread).await.unwrap();
    assert_eq!(client.get_goal(None, &thread).await.unwrap(), None);
    let mut stopped = GoalState::new("x", 8);
    stopped.continuation_count = 8;
    sim.set_goal(thread.as_str(), Some(stopped));
    assert_eq!(
        client
            .get_goal(None, &thread)
            .await
            .unwrap()
            .unwrap()
            .continuation_count,
        8
    );
}

#[tokio::test]
async fn goal_from_chat_outcomes() {
    let (sim, client, thread) = start_on_a_thread().await;
    assert_eq!(
        from_chat_error(&client, &thread).await,
        GatewayError::NoContext
    );
    sim.append_human_message(thread.as_str(), "hi", false);
    assert_eq!(
        from_chat_error(&client, &thread).await,
        GatewayError::Unclear
    );
    sim.append_human_message(
        thread.as_str(),
        "Please write the quarterly sales report",
        false,
    );
    let goal = client
        .goal_from_chat(None, &thread, Some("focus on Q3"))
        .await
        .unwrap();
    assert!(
        goal.objective
            .starts_with("Please write the quarterly sales report"),
        "{}",
        goal.objective
    );
    let body = sim
        .requests()
        .into_iter()
        .rfind(|r| r.path.ends_with("/goal/from-chat"))
        .unwrap();
    assert_eq!(body.json().unwrap()["hint"], "focus on Q3");
    for (reply, expected) in [
        (
            Reply::coded(409, "pending_tool_approval", "m"),
            GatewayError::PendingApproval,
        ),
        (
            Reply::coded(409, "goal_changed", "m"),
            GatewayError::GoalChanged,
        ),
        (
            Reply::coded(502, "synthesis_failed", "m"),
            GatewayError::SynthesisFailed,
        ),
        (Reply::coded(403, "forbidden", "m"), GatewayError::Forbidden),
    ] {
        sim.push_fault(Fault::on(Route::GoalFromChat).reply(reply));
        assert_eq!(from_chat_error(&client, &thread).await, expected);
    }
    // A synthesis slower than the client's patience is a timeout, not a failure.
    let impatient = client_for(&sim, TOKEN, Duration::from_millis(100));
    sim.push_fault(Fault::on(Route::GoalFromChat).delay(Duration::from_millis(500)));
    assert_eq!(
        from_chat_error(&impatient, &thread).await,
        GatewayError::Timeout
    );
}

#[tokio::test]
async fn compaction_outcomes() {
    let (sim, client, thread) = start_on_a_thread().await;
    let outcome = client
        .compact_thread(None, &thread, &CompactRequest::default())
        .await
        .unwrap();
    assert!(!outcome.compacted);
    assert_eq!(outcome.reason.as_deref(), Some("not_enough_messages"));
    for i in 0..3 {
        sim.script_next_run(Script::with_answer(format!("a{i}")));
        collect(&client, &thread, &format!("q{i}")).await;
    }
    let outcome = client
        .compact_thread(
            None,
            &thread,
            &CompactRequest {
                keep_messages: Some(2),
                agent_name: Some("writer".into()),
                model_name: Some("sim-model".into()),
            },
        )
        .await
        .unwrap();
    assert!(outcome.compacted);
    assert_eq!(
        (
            outcome.removed_message_count,
            outcome.preserved_message_count
        ),
        (4, 2)
    );
    sim.configure(|c| c.compaction_enabled = false);
    assert_eq!(
        compact_error(&client, &thread).await,
        GatewayError::Disabled
    );
}

#[tokio::test]
async fn models_memory_skills_and_preferences() {
    let config = SimulatorConfig {
        models: vec![SimModel::new("gpt-4")],
        memory_facts: vec!["a".into(), "b".into(), "c".into()],
        skills: vec![
            SimSkill::new("summarize", "s"),
            SimSkill {
                enabled: false,
                ..SimSkill::new("translate", "t")
            },
        ],
        ..SimulatorConfig::default()
    };
    let (sim, client) = start(config).await;
    assert_eq!(client.list_models(None).await.unwrap(), ["gpt-4"]);
    assert_eq!(client.get_memory(None).await.unwrap(), 3);
    let skills = client.list_skills(None).await.unwrap();
    assert_eq!(
        skills
            .iter()
            .map(|s| (s.name.as_str(), s.enabled))
            .collect::<Vec<_>>(),
        [("summarize", true), ("translate", false)]
    );
    let owner = Owner::new("bob");
    assert_eq!(client.owner_locale(Some(&owner)).await.unwrap(), None);
    sim.set_user_locale("bob", Some("zh-CN"));
    assert_eq!(
        client.owner_locale(Some(&owner)).await.unwrap().as_deref(),
        Some("zh-CN")
    );
    sim.push_fault(Fault::on(Route::Memory).reply(Reply::detail(
        409,
        "Memory changed concurrently; reload and retry.",
    )));
    assert!(client.get_memory(None).await.is_err());
    sim.configure(|c| c.failure_status = Some(503));
    assert_eq!(
        client.list_models(None).await.unwrap_err(),
        GatewayError::Server { status: 503 }
    );
}

#[tokio::test]
async fn a_gateway_that_is_not_there_is_a_transport_error() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    let client = GatewayClient::new(GatewayConfig {
        langgraph_url: format!("http://{addr}/api"),
        gateway_url: format!("http://{addr}"),
        ..GatewayConfig::default()
    })
    .unwrap();
    assert!(matches!(
        client.list_models(None).await.unwrap_err(),
        GatewayError::Transport { .. }
    ));
    assert!(matches!(
        client
            .create_thread(None, &json!({}), None)
            .await
            .unwrap_err(),
        GatewayError::Transport { .. }
    ));
}

#[tokio::test]
async fn issue_13_a_run_in_flight_is_cancelled_and_its_stream_ends() {
    let (sim, client, thread) = start_on_a_thread().await;
    // A slow answer: each chunk waits long enough that the cancel lands mid-stream.
    sim.script_next_run(
        Script::with_answer("one two three four five six seven eight")
            .chunks(8)
            .chunk_delay(Duration::from_millis(200)),
    );
    let mut stream = client
        .stream_run(None, &thread, &RunRequest::new("go slowly"))
        .await
        .unwrap();
    let run_id = stream.run_id().unwrap().to_owned();
    // The first chunk arrived: the run is streaming.
    loop {
        match tokio::time::timeout(Duration::from_secs(5), stream.next())
            .await
            .unwrap()
        {
            Some(Ok(RunEvent::Messages { .. })) => break,
            Some(Ok(_)) => {}
            other => panic!("{other:?}"),
        }
    }
    client.cancel_run(None, &thread, &run_id).await.unwrap();
    // The stream ends cleanly, before the script could have finished.
    let mut events = Vec::new();
    while let Some(event) = tokio::time::timeout(Duration::from_secs(5), stream.next())
        .await
        .unwrap()
    {
        events.push(event.unwrap());
    }
    assert!(
        matches!(events.last(), Some(RunEvent::End)),
        "the stream ends with end: {events:?}"
    );
    sim.wait_idle(thread.as_str(), Duration::from_secs(5))
        .await
        .unwrap();
    assert_eq!(
        sim.run(&run_id).unwrap().status,
        im_bridge::simulator::RunStatus::Interrupted
    );
    // A finished run cannot be cancelled; an unknown one is not found; ids are checked.
    assert_eq!(
        client.cancel_run(None, &thread, &run_id).await.unwrap_err(),
        GatewayError::Conflict
    );
    assert_eq!(
        client
            .cancel_run(None, &thread, "no-such-run")
            .await
            .unwrap_err(),
        GatewayError::NotFound
    );
    assert!(matches!(
        client.cancel_run(None, &thread, "..").await.unwrap_err(),
        GatewayError::InvalidArgument { .. }
    ));
    // The request carried the action and passed the simulator's CSRF check.
    let cancels: Vec<_> = sim
        .requests()
        .into_iter()
        .filter(|r| r.path.ends_with("/cancel"))
        .collect();
    assert_eq!(cancels.len(), 3, "{cancels:?}");
    assert_eq!(cancels[0].status, Some(202));
    assert_eq!(cancels[0].query.as_deref(), Some("action=interrupt"));
}
