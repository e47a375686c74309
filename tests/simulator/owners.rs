//! Owners and users, as the real Gateway keeps them apart (issue 26): every thread route
//! runs the owner check of `authz.py` (another owner's thread is `404 Thread <id> not
//! found`); uploads, what runs write and memory live in the acting user's area; and a
//! simulator without the routes the DeerFlow snapshot lacks answers their route-level 404.

use im_bridge::simulator::{ExtraRoute, Script, SimulatorConfig};
use reqwest::Method;
use reqwest::multipart::{Form, Part};
use serde_json::{Value, json};

use crate::simulator::support::*;

/// Sends `method path` with `body`, acting for `owner` (`None`: no header, user `default`):
/// `(status, JSON body or text)`.
async fn call_as(
    h: &Harness,
    owner: Option<&str>,
    method: Method,
    path: &str,
    body: Option<Value>,
) -> (u16, Value) {
    let mut request = h.http.request(method, h.url(path));
    if let Some(owner) = owner {
        request = request.header("X-DeerFlow-Owner-User-Id", owner);
    }
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = within(request.send()).await.unwrap();
    let status = response.status().as_u16();
    let text = within(response.text()).await.unwrap();
    let body = serde_json::from_str(&text).unwrap_or(Value::String(text));
    (status, body)
}

/// Uploads one file `name` with `bytes` to `thread` as `owner`.
async fn upload_as(
    h: &Harness,
    owner: &str,
    thread: &str,
    name: &str,
    bytes: &[u8],
) -> (u16, Value) {
    let form = Form::new().part(
        "files",
        Part::bytes(bytes.to_vec()).file_name(name.to_owned()),
    );
    let response = within(
        h.http
            .post(h.url(&format!("/api/threads/{thread}/uploads")))
            .header("X-DeerFlow-Owner-User-Id", owner)
            .multipart(form)
            .send(),
    )
    .await
    .unwrap();
    let status = response.status().as_u16();
    (status, within(response.json()).await.unwrap())
}

#[tokio::test]
async fn issue_26_a_thread_of_one_owner_is_not_found_for_another() {
    let h = Harness::start().await;
    let (status, _) = call_as(
        &h,
        Some("alice"),
        Method::POST,
        "/api/threads",
        Some(json!({"thread_id": "t-a"})),
    )
    .await;
    assert_eq!(status, 200);
    let (status, run) = call_as(
        &h,
        Some("alice"),
        Method::POST,
        "/api/threads/t-a/runs/wait",
        Some(wait_body("t-a", "mine")),
    )
    .await;
    assert_eq!(status, 200, "{run}");
    let run_id = h.sim.runs("t-a")[0].run_id.clone();
    let runs = format!("/api/threads/t-a/runs/{run_id}");
    let not_found = json!({"detail": "Thread t-a not found"});
    let routes: Vec<(Method, String, Option<Value>)> = vec![
        (Method::GET, "/api/threads/t-a".into(), None),
        (
            Method::PATCH,
            "/api/threads/t-a".into(),
            Some(json!({"metadata": {}})),
        ),
        (Method::GET, "/api/threads/t-a/state".into(), None),
        (Method::GET, "/api/threads/t-a/goal".into(), None),
        (
            Method::PUT,
            "/api/threads/t-a/goal".into(),
            Some(json!({"objective": "x"})),
        ),
        (Method::DELETE, "/api/threads/t-a/goal".into(), None),
        (
            Method::POST,
            "/api/threads/t-a/goal/from-chat".into(),
            Some(json!({})),
        ),
        (
            Method::POST,
            "/api/threads/t-a/compact".into(),
            Some(json!({})),
        ),
        (
            Method::GET,
            "/api/threads/t-a/artifacts/mnt/user-data/outputs/a.md".into(),
            None,
        ),
        (
            Method::POST,
            "/api/threads/t-a/runs".into(),
            Some(create_body("t-a", "x")),
        ),
        (
            Method::POST,
            "/api/threads/t-a/runs/stream".into(),
            Some(stream_body("t-a", "x")),
        ),
        (
            Method::POST,
            "/api/threads/t-a/runs/wait".into(),
            Some(wait_body("t-a", "x")),
        ),
        (Method::GET, "/api/threads/t-a/runs".into(), None),
        (Method::GET, runs.clone(), None),
        (Method::GET, format!("{runs}/join"), None),
        (Method::GET, format!("{runs}/stream"), None),
        (
            Method::POST,
            format!("{runs}/stream?action=interrupt"),
            None,
        ),
        (Method::POST, format!("{runs}/cancel"), None),
    ];
    for owner in [Some("bob"), None, Some(" ")] {
        for (method, path, body) in &routes {
            let answer = call_as(&h, owner, method.clone(), path, body.clone()).await;
            assert_eq!(
                answer,
                (404, not_found.clone()),
                "{owner:?} {method} {path}"
            );
        }
        let (status, _) = upload_as(&h, owner.unwrap_or("default"), "t-a", "x.txt", b"x").await;
        assert_eq!(status, 404, "{owner:?} upload");
    }
    let (status, _) = call_as(&h, Some(" alice "), Method::GET, "/api/threads/t-a", None).await;
    assert_eq!(status, 200, "the header is trimmed");
    assert!(h.sim.messages("t-a").len() == 2, "nobody else ran on it");

    // A thread is recorded for the raw header; that header reaches it, its safe form (another
    // user's id) does not.
    let raw = "tg:42@x";
    call_as(
        &h,
        Some(raw),
        Method::POST,
        "/api/threads",
        Some(json!({"thread_id": "t-raw"})),
    )
    .await;
    assert_eq!(h.sim.thread_owner("t-raw").as_deref(), Some(raw));
    let (status, _) = call_as(&h, Some(raw), Method::GET, "/api/threads/t-raw", None).await;
    assert_eq!(status, 200);
    let safe = "tg-42-x-03400aabb52d4ddf";
    let (status, _) = call_as(&h, Some(safe), Method::GET, "/api/threads/t-raw", None).await;
    assert_eq!(status, 404);
    // Without a header the thread is `default`'s.
    call_as(
        &h,
        None,
        Method::POST,
        "/api/threads",
        Some(json!({"thread_id": "t-d"})),
    )
    .await;
    assert_eq!(h.sim.thread_owner("t-d").as_deref(), Some("default"));
    let (status, _) = call_as(&h, Some("default"), Method::GET, "/api/threads/t-d", None).await;
    assert_eq!(status, 200);
}

#[tokio::test]
async fn issue_26_uploads_and_artifacts_live_in_the_acting_users_area() {
    let h = Harness::start().await;
    // A thread nobody created takes uploads (the Gateway does not require it to exist).
    let (status, body) = upload_as(&h, "alice", "t-up", "notes.txt", b"alice's notes").await;
    assert_eq!(status, 200, "{body}");
    let file = &body["files"][0];
    assert_eq!(file["virtual_path"], "/mnt/user-data/uploads/notes.txt");
    assert!(
        file["path"]
            .as_str()
            .unwrap()
            .contains("/users/alice/threads/t-up/"),
        "{file}"
    );
    let artifact = "/api/threads/t-up/artifacts/mnt/user-data/uploads/notes.txt";
    let (status, text) = call_as(&h, Some("alice"), Method::GET, artifact, None).await;
    assert_eq!((status, text), (200, json!("alice's notes")));
    let (status, body) = call_as(&h, Some("bob"), Method::GET, artifact, None).await;
    assert_eq!(
        (status, body),
        (
            404,
            json!({"detail": "Artifact not found: mnt/user-data/uploads/notes.txt"})
        )
    );
    assert_eq!(h.sim.uploads("t-up"), [("notes.txt".to_owned(), 13)]);

    // What a run presents lands in the run's user's area: its `context.user_id`.
    let report = "/mnt/user-data/outputs/report.md";
    h.sim.put_output(report, "# Report");
    for (thread, context_user, alice_finds_it) in [("t-1", "alice", true), ("t-2", "carol", false)]
    {
        call_as(
            &h,
            Some("alice"),
            Method::POST,
            "/api/threads",
            Some(json!({"thread_id": thread})),
        )
        .await;
        h.sim
            .script_thread(thread, Script::with_answer("Here.").present_files([report]));
        let mut body = wait_body(thread, "report please");
        body["context"]["user_id"] = json!(context_user);
        let path = format!("/api/threads/{thread}/runs/wait");
        let (status, _) = call_as(&h, Some("alice"), Method::POST, &path, Some(body)).await;
        assert_eq!(status, 200);
        let path = format!("/api/threads/{thread}/artifacts{report}");
        let (status, _) = call_as(&h, Some("alice"), Method::GET, &path, None).await;
        assert_eq!(status == 200, alice_finds_it, "{thread}");
        assert!(
            h.sim
                .user_file(Some(context_user), thread, report)
                .is_some()
        );
    }
    let outside = call_as(
        &h,
        Some("alice"),
        Method::GET,
        "/api/threads/t-1/artifacts/etc/passwd",
        None,
    )
    .await;
    assert_eq!(
        outside,
        (
            400,
            json!({"detail": "Path must start with /mnt/user-data"})
        )
    );
}

#[tokio::test]
async fn issue_26_memory_is_per_user() {
    let h = Harness::start().await;
    h.sim
        .set_user_memory(Some("alice@example.com"), vec!["Likes tea.".into()]);
    let (_, alice) = call_as(
        &h,
        Some("alice@example.com"),
        Method::GET,
        "/api/memory",
        None,
    )
    .await;
    assert_eq!(alice["facts"].as_array().unwrap().len(), 1);
    assert_eq!(alice["facts"][0]["content"], "Likes tea.");
    let (_, bob) = call_as(&h, Some("bob"), Method::GET, "/api/memory", None).await;
    let configured = h.sim.config().memory_facts.len();
    assert_eq!(bob["facts"].as_array().unwrap().len(), configured);
    assert_ne!(bob["facts"][0]["content"], "Likes tea.");
}

#[tokio::test]
async fn issue_26_a_simulator_without_the_extra_routes_answers_route_level_404() {
    let route_404 = json!({"detail": "Not Found"});
    let h = Harness::with(SimulatorConfig::default().deerflow_routes_only()).await;
    let t = h.thread().await;
    let from_chat = format!("/api/threads/{t}/goal/from-chat");
    assert_eq!(
        h.call(Method::POST, &from_chat, Some(json!({}))).await,
        (404, route_404.clone())
    );
    assert_eq!(
        h.call(Method::GET, "/api/user-preferences", None).await,
        (404, route_404.clone())
    );
    // The routes the snapshot has are all still there.
    assert_eq!(
        h.call(Method::GET, &format!("/api/threads/{t}/goal"), None)
            .await
            .0,
        200
    );

    // By default both are served (and a wrong method is a 405, as for any known path).
    h.sim
        .configure(|c| c.extra_routes = ExtraRoute::ALL.to_vec());
    assert_eq!(
        h.call(Method::GET, "/api/user-preferences", None).await.0,
        200
    );
    let (status, body) = h.call(Method::POST, &from_chat, Some(json!({}))).await;
    assert_ne!(body, route_404, "{status} {body}");
    assert_eq!(h.call(Method::GET, &from_chat, None).await.0, 405);
}
