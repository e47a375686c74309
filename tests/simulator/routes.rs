//! Threads, auth and CSRF, the read-only routes, global switches, the request log and
//! shutdown (`spec/gateway.md` §1, §2, §4.6, §5, §8).

use std::time::{Duration, Instant};

use im_bridge::simulator::{
    Fault, Hold, RecordedBody, Reply, Route, Script, SimModel, Simulator, SimulatorConfig,
};
use reqwest::Method;
use serde_json::{Value, json};

use crate::simulator::support::*;

#[tokio::test]
async fn threads_are_created_idempotently_and_patched() {
    let h = Harness::start().await;
    let meta = json!({"channel_source": {"type": "im_channel", "provider": "telegram", "chat_id": "1"}, "owner_id": "x"});
    let (status, first) = h
        .call(
            Method::POST,
            "/api/threads",
            Some(json!({"thread_id": "gh-1", "metadata": meta})),
        )
        .await;
    assert_eq!(status, 200);
    assert_eq!(
        (first["thread_id"].as_str(), first["status"].as_str()),
        (Some("gh-1"), Some("idle"))
    );
    assert_eq!(first["values"], json!({}));
    assert_eq!(first["interrupts"], json!({}));
    assert!(
        first["metadata"].get("owner_id").is_none(),
        "reserved keys are stripped"
    );
    let (status, again) = h
        .call(
            Method::POST,
            "/api/threads",
            Some(json!({"thread_id": "gh-1", "metadata": {}})),
        )
        .await;
    assert_eq!((status, &again["created_at"]), (200, &first["created_at"]));

    let (status, body) = h
        .call(
            Method::POST,
            "/api/threads",
            Some(json!({"thread_id": "bad id"})),
        )
        .await;
    assert_eq!(status, 422);
    assert_eq!(
        body["detail"],
        "Invalid thread_id: expected 1-64 ASCII letters, digits, hyphens, or underscores"
    );
    let (status, body) = h.call(Method::GET, "/api/threads/nope", None).await;
    assert_eq!(
        (status, body),
        (404, json!({"detail": "Thread nope not found"}))
    );
    assert_eq!(
        h.call(Method::GET, "/api/threads/nope/state", None).await.0,
        404
    );

    let patch = json!({"metadata": {"channel_source": {"chat_id": "2"}}});
    let (status, body) = h
        .call(Method::PATCH, "/api/threads/gh-1", Some(patch))
        .await;
    assert_eq!(status, 200);
    assert_eq!(body["values"], json!({}), "PATCH answers empty values");
    assert_eq!(
        h.sim.thread_metadata("gh-1").unwrap()["channel_source"]["chat_id"],
        "2"
    );
    assert_eq!(
        h.call(Method::PATCH, "/api/threads/nope", Some(json!({})))
            .await
            .0,
        404
    );

    // The race path: a scripted 409 on create, then GET succeeds.
    h.sim.push_fault(
        Fault::on(Route::CreateThread).reply(Reply::detail(409, "Thread already exists")),
    );
    h.sim.push_fault(
        Fault::on(Route::PatchThread).reply(Reply::detail(500, "Failed to update thread")),
    );
    assert_eq!(
        h.call(
            Method::POST,
            "/api/threads",
            Some(json!({"thread_id": "gh-1"}))
        )
        .await
        .0,
        409
    );
    assert_eq!(h.call(Method::GET, "/api/threads/gh-1", None).await.0, 200);
    assert_eq!(
        h.call(Method::PATCH, "/api/threads/gh-1", Some(json!({})))
            .await
            .0,
        500
    );
    h.sim
        .push_fault(Fault::on(Route::CreateThread).drop_connection());
    assert!(
        h.http
            .post(h.url("/api/threads"))
            .json(&json!({}))
            .send()
            .await
            .is_err()
    );
    assert_eq!(
        h.sim.requests().last().unwrap().status,
        None,
        "a dropped request has no status"
    );
}

#[tokio::test]
async fn the_internal_token_and_owners_are_enforced() {
    let config = SimulatorConfig {
        internal_token: Some("s3cret".into()),
        ..Default::default()
    };
    assert!(!format!("{config:?}").contains("s3cret"));
    let h = Harness::with(config).await;
    let unauthorized =
        json!({"detail": {"code": "not_authenticated", "message": "Authentication required"}});
    assert_eq!(
        h.call(Method::GET, "/api/models", None).await,
        (401, unauthorized.clone())
    );
    let wrong = h
        .http
        .get(h.url("/api/models"))
        .header("X-DeerFlow-Internal-Token", "nope")
        .send()
        .await
        .unwrap();
    assert_eq!(wrong.status(), 401);

    let as_owner = |method: Method, path: &str, owner: Option<&str>| {
        let mut request = h
            .http
            .request(method, h.url(path))
            .header("X-DeerFlow-Internal-Token", "s3cret");
        if let Some(owner) = owner {
            request = request.header("X-DeerFlow-Owner-User-Id", owner);
        }
        request
    };
    let created: Value = as_owner(Method::POST, "/api/threads", Some("alice@example.com"))
        .json(&json!({"thread_id": "t-alice"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(created["thread_id"], "t-alice");
    assert_eq!(
        h.sim.thread_owner("t-alice").as_deref(),
        Some("alice@example.com")
    );
    for path in [
        "/api/threads/t-alice",
        "/api/threads/t-alice/goal",
        "/api/threads/t-alice/state",
    ] {
        let bob = as_owner(Method::GET, path, Some("bob"))
            .send()
            .await
            .unwrap();
        assert_eq!(bob.status(), 404, "{path}");
        let alice = as_owner(Method::GET, path, Some("alice@example.com"))
            .send()
            .await
            .unwrap();
        assert_eq!(alice.status(), 200, "{path}");
    }
    let run = as_owner(Method::POST, "/api/threads/t-alice/runs/wait", Some("bob"))
        .json(&wait_body("t-alice", "x"))
        .send()
        .await
        .unwrap();
    assert_eq!(run.status(), 404);
    // Creating an existing id is idempotent per owner; without a header (user `default`)
    // another owner's id is a 500, and with a header the Gateway re-owns the thread.
    let anonymous_create = as_owner(Method::POST, "/api/threads", None)
        .json(&json!({"thread_id": "t-alice"}))
        .send()
        .await
        .unwrap();
    assert_eq!(anonymous_create.status(), 500);
    let bob_create = as_owner(Method::POST, "/api/threads", Some("bob"))
        .json(&json!({"thread_id": "t-alice"}))
        .send()
        .await
        .unwrap();
    assert_eq!(bob_create.status(), 200);
    assert_eq!(h.sim.thread_owner("t-alice").as_deref(), Some("bob"));
    let alice = as_owner(
        Method::GET,
        "/api/threads/t-alice",
        Some("alice@example.com"),
    )
    .send()
    .await
    .unwrap();
    assert_eq!(alice.status(), 404);
    // Without a valid token the owner header is not even looked at.
    let anonymous = h
        .http
        .get(h.url("/api/threads/t-alice"))
        .header("X-DeerFlow-Owner-User-Id", "alice@example.com")
        .send()
        .await
        .unwrap();
    assert_eq!(anonymous.status(), 401);
}

#[tokio::test]
async fn csrf_is_enforced_on_writes_when_switched_on() {
    let h = Harness::with(SimulatorConfig {
        enforce_csrf: true,
        ..Default::default()
    })
    .await;
    let (status, body) = h.call(Method::POST, "/api/threads", Some(json!({}))).await;
    assert_eq!(
        (status, body),
        (
            403,
            json!({"detail": "CSRF token missing. Include X-CSRF-Token header."})
        )
    );
    let mismatch = h
        .http
        .post(h.url("/api/threads"))
        .header("X-CSRF-Token", "a")
        .header("Cookie", "csrf_token=b")
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(mismatch.status(), 403);
    assert_eq!(
        mismatch.json::<Value>().await.unwrap(),
        json!({"detail": "CSRF token mismatch."})
    );
    let ok = h
        .http
        .post(h.url("/api/threads"))
        .header("X-CSRF-Token", "tok")
        .header("Cookie", "csrf_token=tok")
        .json(&json!({"thread_id": "c1"}))
        .send()
        .await
        .unwrap();
    assert_eq!(ok.status(), 200);
    assert_eq!(
        h.call(Method::GET, "/api/threads/c1", None).await.0,
        200,
        "reads need no pair"
    );
    assert_eq!(
        h.call(Method::DELETE, "/api/threads/c1/goal", None).await.0,
        403
    );
}

#[tokio::test]
async fn models_memory_skills_and_preferences() {
    let h = Harness::start().await;
    let (status, body) = h.call(Method::GET, "/api/models", None).await;
    assert_eq!(status, 200);
    assert_eq!(body["models"][0]["name"], "sim-fast");
    assert_eq!(body["models"][0]["model"], "sim-fast");
    assert_eq!(body["token_usage"], json!({"enabled": false}));
    h.sim.configure(|c| {
        c.models = vec![SimModel::new("only")];
        c.memory_facts = vec!["a".into(), "b".into(), "c".into()];
        c.default_locale = Some("en-US".into());
    });
    assert_eq!(
        h.call(Method::GET, "/api/models", None).await.1["models"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
    let (_, memory) = h.call(Method::GET, "/api/memory", None).await;
    assert_eq!(memory["facts"].as_array().unwrap().len(), 3);
    assert_eq!(memory["facts"][0]["id"], "fact_1");
    assert_eq!(memory["version"], "1.0");
    h.sim
        .push_fault(Fault::on(Route::Memory).reply(Reply::detail(
            501,
            "Operation 'get memory' not supported by memory backend 'Null'.",
        )));
    assert_eq!(h.call(Method::GET, "/api/memory", None).await.0, 501);
    let (_, skills) = h.call(Method::GET, "/api/skills", None).await;
    assert_eq!(
        skills["skills"][0],
        json!({"name": "deep-research", "description": "Research a topic across many sources.", "enabled": true})
    );

    h.sim.set_user_locale("alice", Some("zh-CN"));
    h.sim.set_user_locale("carol", None);
    let prefs = |owner: &'static str| {
        let request = h
            .http
            .get(h.url("/api/user-preferences"))
            .header("X-DeerFlow-Owner-User-Id", owner);
        async move { request.send().await.unwrap().json::<Value>().await.unwrap() }
    };
    assert_eq!(prefs("alice").await["settings"]["locale"], "zh-CN");
    assert_eq!(prefs("bob").await["settings"]["locale"], "en-US");
    assert!(prefs("carol").await["settings"].get("locale").is_none());
    h.sim
        .push_fault(Fault::on(Route::UserPreferences).reply(Reply::detail(404, "Not Found")));
    assert_eq!(
        h.call(Method::GET, "/api/user-preferences", None).await.0,
        404
    );
    assert_eq!(
        h.call(Method::GET, "/api/unknown", None).await,
        (404, json!({"detail": "Not Found"}))
    );
}

#[tokio::test]
async fn global_switches_fail_or_slow_every_route() {
    let h = Harness::start().await;
    h.sim.configure(|c| c.failure_status = Some(503));
    for path in ["/api/models", "/api/threads/x/goal"] {
        let response = h.send(Method::GET, path, None).await;
        assert_html_error(response, 503, "503 Service Unavailable").await;
    }
    h.sim.configure(|c| {
        c.failure_status = None;
        c.latency = Duration::from_millis(50);
    });
    let started = Instant::now();
    assert_eq!(h.call(Method::GET, "/api/models", None).await.0, 200);
    assert!(started.elapsed() >= Duration::from_millis(50));
}

#[tokio::test]
async fn requests_are_recorded_and_can_be_awaited() {
    let h = Harness::start().await;
    let t = h.thread().await;
    let waiter = {
        let sim = h.sim.simulator().clone();
        tokio::spawn(async move {
            sim.wait_for_requests(2, DEADLINE, |r| {
                r.method == "PUT" && r.path.ends_with("/goal") && r.status.is_some()
            })
            .await
        })
    };
    for objective in ["one", "two"] {
        h.http
            .put(h.url(&format!("/api/threads/{t}/goal?x=1")))
            .header("X-Custom-Header", "Yes")
            .json(&json!({"objective": objective}))
            .send()
            .await
            .unwrap();
    }
    let seen = within(waiter).await.unwrap().unwrap();
    assert_eq!(seen.len(), 2);
    assert_eq!(seen[0].json(), Some(&json!({"objective": "one"})));
    assert_eq!(
        (seen[0].header("x-custom-header"), seen[0].status),
        (Some("Yes"), Some(200))
    );
    assert_eq!(seen[0].query.as_deref(), Some("x=1"));
    assert!(seen[0].headers.keys().all(|k| k == &k.to_lowercase()));
    h.http
        .post(h.url("/api/threads"))
        .body("not json")
        .send()
        .await
        .unwrap();
    assert_eq!(
        h.sim.requests().last().unwrap().body,
        RecordedBody::Text("not json".into())
    );
    let timeout = h
        .sim
        .wait_for_requests(1, Duration::from_millis(20), |r| r.path == "/never")
        .await;
    assert!(timeout.is_err());
    h.sim.clear_requests();
    assert!(h.sim.requests().is_empty());
}

#[tokio::test]
async fn shutdown_ends_open_streams_and_stops_listening() {
    let sim = Simulator::start(SimulatorConfig::default()).await.unwrap();
    assert_eq!(sim.langgraph_url(), format!("http://{}/api", sim.addr()));
    let http = reqwest::Client::new();
    let t = "held-thread";
    sim.create_thread(t, None);
    sim.script_thread(t, Script::with_answer("held").hold(Hold::UntilFinished));
    let response = http
        .post(format!("{}/threads/{t}/runs/stream", sim.langgraph_url()))
        .json(&stream_body(t, "x"))
        .send()
        .await
        .unwrap();
    within(sim.wait_until(DEADLINE, |s| !s.active_runs(t).is_empty()))
        .await
        .unwrap();
    let handle = sim.simulator().clone();
    let url = sim.gateway_url();
    within(sim.shutdown()).await.unwrap();
    let text = within(response.text()).await.unwrap_or_default();
    assert!(!text.contains("event: end"));
    assert!(handle.active_runs(t).is_empty());
    assert!(http.get(format!("{url}/api/models")).send().await.is_err());
}
