//! HTTP-level tests of [`GatewayClient`] against a tiny recording axum server on
//! 127.0.0.1:0: identity and CSRF headers, bodies, paths and lookups. The server records
//! every request (method, raw path, headers, body) and answers from a per-test closure.
//!
//! Child: `transport` (status mapping end to end, timeouts, refused connections, how run
//! streams end).

mod transport;

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use futures_util::{StreamExt, stream};
use serde_json::{Value, json};

use super::*;

use crate::ThreadId;

const TOKEN: &str = "internal-token-XYZ";
const OWNER: &str = "alice@example.com";

#[derive(Debug, Clone)]
struct Recorded {
    method: String,
    /// The raw (still percent-encoded) path.
    path: String,
    /// The raw query, empty without one.
    query: String,
    headers: HeaderMap,
    body: Vec<u8>,
}

impl Recorded {
    fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap()
    }

    fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).map(|v| v.to_str().unwrap())
    }
}

enum Tail {
    /// End the body cleanly.
    Close,
    /// Keep the connection open and silent.
    Hang,
}

enum Reply {
    Json(u16, Value),
    Raw(u16, &'static str, &'static str),
    /// Never answer.
    Hang,
    /// An event stream: chunks, each after a pause, then the tail.
    Sse(Vec<(Duration, Vec<u8>)>, Tail),
}

type Handler = Arc<dyn Fn(&Recorded) -> Reply + Send + Sync>;
type Log = Arc<Mutex<Vec<Recorded>>>;

struct Server {
    addr: SocketAddr,
    log: Log,
}

impl Server {
    async fn start(handler: impl Fn(&Recorded) -> Reply + Send + Sync + 'static) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let log = Log::default();
        let app = Router::new()
            .fallback(record)
            .with_state((log.clone(), Arc::new(handler) as Handler));
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        Self { addr, log }
    }

    fn config(&self) -> GatewayConfig {
        GatewayConfig {
            langgraph_url: format!("http://{}/api/", self.addr),
            gateway_url: format!("http://{}", self.addr),
            internal_token: Some(InternalToken::new(TOKEN)),
            ..GatewayConfig::default()
        }
    }

    fn client(&self) -> GatewayClient {
        GatewayClient::new(self.config()).unwrap()
    }

    fn requests(&self) -> Vec<Recorded> {
        self.log.lock().unwrap().clone()
    }

    fn last(&self) -> Recorded {
        self.requests().pop().unwrap()
    }
}

async fn record(State((log, handler)): State<(Log, Handler)>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let body = axum::body::to_bytes(body, usize::MAX).await.unwrap();
    let recorded = Recorded {
        method: parts.method.to_string(),
        path: parts.uri.path().to_owned(),
        query: parts.uri.query().unwrap_or_default().to_owned(),
        headers: parts.headers,
        body: body.to_vec(),
    };
    log.lock().unwrap().push(recorded.clone());
    match handler(&recorded) {
        Reply::Json(status, value) => {
            (StatusCode::from_u16(status).unwrap(), axum::Json(value)).into_response()
        }
        Reply::Raw(status, content_type, text) => (
            StatusCode::from_u16(status).unwrap(),
            [("content-type", content_type)],
            text,
        )
            .into_response(),
        Reply::Hang => std::future::pending().await,
        Reply::Sse(chunks, tail) => {
            let chunks = stream::iter(chunks).then(|(pause, chunk)| async move {
                tokio::time::sleep(pause).await;
                Ok::<_, std::io::Error>(Bytes::from(chunk))
            });
            let tail = match tail {
                Tail::Close => stream::empty().boxed(),
                Tail::Hang => stream::pending().boxed(),
            };
            Response::builder()
                .header("content-type", "text/event-stream; charset=utf-8")
                .header("content-location", "/api/threads/t1/runs/run-7")
                .body(Body::from_stream(chunks.chain(tail)))
                .unwrap()
        }
    }
}

fn sse(text: &str, chunk: usize, tail: Tail) -> Reply {
    let chunks = text
        .as_bytes()
        .chunks(chunk)
        .map(|c| (Duration::ZERO, c.to_vec()))
        .collect();
    Reply::Sse(chunks, tail)
}

const SAMPLE: &str = crate::sse::tests::SAMPLE;
const HEAD: &str = "event: metadata\ndata: {\"run_id\":\"r1\",\"thread_id\":\"t1\"}\n\nevent: messages\ndata: [{\"type\":\"AIMessageChunk\",\"content\":\"Hi\"},{}]\n\n";

/// A server answering every route the client knows with a plausible 200.
fn happy(r: &Recorded) -> Reply {
    let goal =
        json!({"goal": {"objective": "ship it", "status": "active", "continuation_count": 0}});
    match (r.method.as_str(), r.path.as_str()) {
        ("POST", "/api/threads") => Reply::Json(
            200,
            json!({"thread_id": "t1", "status": "idle", "metadata": {}, "values": {}}),
        ),
        ("GET" | "PATCH", "/api/threads/t1") => {
            Reply::Json(200, json!({"thread_id": "t1", "status": "busy"}))
        }
        ("GET", "/api/threads/t1/state") => Reply::Json(
            200,
            json!({"values": {"goal_outcome": {"status": "achieved", "objective": "o"}}}),
        ),
        ("POST", "/api/threads/t1/runs/stream") => sse(SAMPLE, 4096, Tail::Close),
        ("POST", "/api/threads/t1/runs/wait") => {
            Reply::Json(200, json!({"messages": [], "title": "T"}))
        }
        ("POST", "/api/threads/t1/runs") => {
            Reply::Json(200, json!({"run_id": "r-9", "status": "pending"}))
        }
        ("GET" | "PUT" | "POST", p) if p.starts_with("/api/threads/t1/goal") => {
            Reply::Json(200, goal)
        }
        ("DELETE", "/api/threads/t1/goal") => Reply::Json(200, json!({"goal": null})),
        ("POST", "/api/threads/t1/compact") => Reply::Json(
            200,
            json!({"thread_id": "t1", "compacted": true, "reason": null,
            "removed_message_count": 12, "preserved_message_count": 4, "summary_updated": true, "checkpoint_id": "c2", "total_tokens": 99}),
        ),
        ("GET", "/api/models") => Reply::Json(
            200,
            json!({"models": [{"name": "gpt-4", "display_name": "GPT-4"}, {"name": "qwen"}]}),
        ),
        ("GET", "/api/memory") => Reply::Json(
            200,
            json!({"version": "1.0", "facts": [{"id": "f1"}, {"id": "f2"}, {"id": "f3"}]}),
        ),
        ("GET", "/api/skills") => Reply::Json(
            200,
            json!({"skills": [{"name": "deep-research", "enabled": true}, {"name": "ppt", "enabled": false}]}),
        ),
        ("GET", "/api/user-preferences") => {
            Reply::Json(200, json!({"settings": {"locale": "zh-CN"}, "revision": 1}))
        }
        _ => Reply::Json(404, json!({"detail": "no route"})),
    }
}

#[tokio::test]
async fn every_call_sends_identity_and_csrf_headers() {
    let server = Server::start(happy).await;
    let client = server.client();
    let owner = Owner::new(OWNER);
    let o = Some(&owner);
    let t1 = ThreadId::new("t1");
    let meta =
        json!({"channel_source": {"type": "im_channel", "provider": "telegram", "chat_id": "1"}});

    assert_eq!(
        client
            .create_thread(o, &meta, None)
            .await
            .unwrap()
            .thread_id,
        t1
    );
    assert_eq!(
        client.get_thread(o, &t1).await.unwrap().status.as_deref(),
        Some("busy")
    );
    client.update_thread_metadata(o, &t1, &meta).await.unwrap();
    assert_eq!(
        client
            .get_thread_state(o, &t1)
            .await
            .unwrap()
            .goal_outcome()
            .unwrap()
            .objective,
        "o"
    );
    let mut stream = client
        .stream_run(o, &t1, &RunRequest::new("hi"))
        .await
        .unwrap();
    assert_eq!(stream.run_id(), Some("run-7"));
    let mut events = Vec::new();
    while let Some(event) = stream.next().await {
        events.push(event.unwrap());
    }
    assert_eq!(events.len(), 7);
    assert_eq!(events.last(), Some(&RunEvent::End));
    assert_eq!(
        client
            .wait_run(o, &t1, &RunRequest::new("hi"))
            .await
            .unwrap()["title"],
        "T"
    );
    assert_eq!(
        client
            .create_run(o, &t1, &RunRequest::new("hi"))
            .await
            .unwrap(),
        "r-9"
    );
    assert_eq!(
        client.get_goal(o, &t1).await.unwrap().unwrap().objective,
        "ship it"
    );
    assert_eq!(
        client.put_goal(o, &t1, "ship it").await.unwrap().objective,
        "ship it"
    );
    client.delete_goal(o, &t1).await.unwrap();
    assert_eq!(
        client
            .goal_from_chat(o, &t1, Some("focus"))
            .await
            .unwrap()
            .objective,
        "ship it"
    );
    let compacted = client
        .compact_thread(o, &t1, &CompactRequest::default())
        .await
        .unwrap();
    assert_eq!(
        (
            compacted.compacted,
            compacted.removed_message_count,
            compacted.preserved_message_count
        ),
        (true, 12, 4)
    );
    assert_eq!(client.list_models(o).await.unwrap(), ["gpt-4", "qwen"]);
    assert_eq!(client.get_memory(o).await.unwrap(), 3);
    let skills = client.list_skills(o).await.unwrap();
    assert_eq!((skills[1].name.as_str(), skills[1].enabled), ("ppt", false));
    assert_eq!(
        client.owner_locale(o).await.unwrap().as_deref(),
        Some("zh-CN")
    );

    let requests = server.requests();
    assert_eq!(requests.len(), 16);
    let mut csrf_tokens = std::collections::HashSet::new();
    for r in &requests {
        let what = format!("{} {}", r.method, r.path);
        assert_eq!(r.header("x-deerflow-internal-token"), Some(TOKEN), "{what}");
        assert_eq!(r.header("x-deerflow-owner-user-id"), Some(OWNER), "{what}");
        if r.method != "GET" {
            let token = r
                .header("x-csrf-token")
                .unwrap_or_else(|| panic!("no CSRF header: {what}"));
            assert!(
                token.len() >= 32 && token.chars().all(|c| c.is_ascii_alphanumeric()),
                "{what}"
            );
            assert_eq!(
                r.header("cookie"),
                Some(format!("csrf_token={token}").as_str()),
                "{what}"
            );
            csrf_tokens.insert(token.to_owned());
        }
    }
    assert_eq!(csrf_tokens.len(), 1, "one CSRF token per client");
    let writes: Vec<_> = requests
        .iter()
        .filter(|r| r.method != "GET")
        .map(|r| format!("{} {}", r.method, r.path))
        .collect();
    for expected in [
        "PUT /api/threads/t1/goal",
        "DELETE /api/threads/t1/goal",
        "POST /api/threads/t1/goal/from-chat",
        "POST /api/threads/t1/compact",
        "PATCH /api/threads/t1",
    ] {
        assert!(
            writes.contains(&expected.to_owned()),
            "{expected} in {writes:?}"
        );
    }
    // Bodies of the simple writes.
    let body_of = |method: &str, path: &str| {
        requests
            .iter()
            .find(|r| r.method == method && r.path == path)
            .unwrap()
            .json()
    };
    assert_eq!(body_of("POST", "/api/threads"), json!({"metadata": meta}));
    assert_eq!(
        body_of("PATCH", "/api/threads/t1"),
        json!({"metadata": meta})
    );
    assert_eq!(
        body_of("PUT", "/api/threads/t1/goal"),
        json!({"objective": "ship it"})
    );
    assert_eq!(
        body_of("POST", "/api/threads/t1/goal/from-chat"),
        json!({"hint": "focus"})
    );
    assert_eq!(
        body_of("POST", "/api/threads/t1/compact"),
        json!({"force": true})
    );
}

#[tokio::test]
async fn no_owner_and_no_token_send_neither_header() {
    let server = Server::start(happy).await;
    let client = GatewayClient::new(GatewayConfig {
        internal_token: None,
        ..server.config()
    })
    .unwrap();
    client
        .create_thread(None, &json!({}), Some(&ThreadId::new("t1")))
        .await
        .unwrap();
    let r = server.last();
    assert_eq!(r.header("x-deerflow-internal-token"), None);
    assert_eq!(r.header("x-deerflow-owner-user-id"), None);
    assert_eq!(r.json(), json!({"metadata": {}, "thread_id": "t1"}));
    assert!(r.header("x-csrf-token").is_some());
    assert!(!format!("{:?} {:?}", server.client(), server.config()).contains(TOKEN));
}

#[tokio::test]
async fn run_bodies_carry_exactly_the_allowed_keys() {
    let server = Server::start(happy).await;
    let client = server.client();
    let t1 = ThreadId::new("t1");
    let mut run = RunRequest::new("hello 你好");
    run.config =
        json!({"recursion_limit": 100, "configurable": {"checkpoint_ns": "", "thread_id": "t1"}});
    run.context = json!({"thinking_enabled": true, "user_id": "u_42"});
    let mut stream = client.stream_run(None, &t1, &run).await.unwrap();
    while stream.next().await.is_some() {}
    client.wait_run(None, &t1, &run).await.unwrap();
    run.metadata = Some(json!({"deerflow_origin": {"kind": "im_channel", "provider": "telegram"}}));
    client.create_run(None, &t1, &run).await.unwrap();
    let bodies: Vec<Value> = server.requests().iter().map(Recorded::json).collect();
    let keys = |v: &Value| {
        let mut k: Vec<String> = v.as_object().unwrap().keys().cloned().collect();
        k.sort();
        k.join(",")
    };
    assert_eq!(
        keys(&bodies[0]),
        "assistant_id,config,context,input,multitask_strategy,on_disconnect,stream_mode,stream_resumable,stream_subgraphs"
    );
    assert_eq!(
        bodies[0]["stream_mode"],
        json!(["messages-tuple", "values"])
    );
    assert_eq!(
        keys(&bodies[1]),
        "assistant_id,config,context,input,multitask_strategy,on_disconnect"
    );
    assert_eq!(
        keys(&bodies[2]),
        "assistant_id,config,context,input,metadata,multitask_strategy,on_disconnect,stream_mode,stream_resumable,stream_subgraphs"
    );
    assert_eq!(bodies[2]["stream_mode"], "values");
    for body in &bodies {
        assert_eq!(
            body["input"],
            json!({"messages": [{"role": "human", "content": "hello 你好"}]})
        );
        assert_eq!(body["config"]["configurable"]["thread_id"], "t1");
        assert_eq!(body["multitask_strategy"], "reject");
    }
    assert_eq!(
        server.requests()[0].header("accept"),
        Some("text/event-stream")
    );
}

#[tokio::test]
async fn thread_ids_are_percent_encoded() {
    let server = Server::start(|_| Reply::Json(200, json!({"goal": null}))).await;
    let client = server.client();
    let odd = ThreadId::new("a b/c?d#é%.x");
    client.get_goal(None, &odd).await.unwrap();
    assert_eq!(
        server.last().path,
        "/api/threads/a%20b%2Fc%3Fd%23%C3%A9%25.x/goal"
    );
    for bad in ["", ".", ".."] {
        let err = client
            .delete_goal(None, &ThreadId::new(bad))
            .await
            .unwrap_err();
        assert_eq!(err, GatewayError::InvalidArgument { what: "thread id" });
    }
    assert_eq!(server.requests().len(), 1, "refused ids send nothing");
}

#[tokio::test]
async fn from_chat_omits_empty_hints_and_refuses_long_ones() {
    let server = Server::start(happy).await;
    let client = server.client();
    let t1 = ThreadId::new("t1");
    for hint in [None, Some(""), Some("   ")] {
        client.goal_from_chat(None, &t1, hint).await.unwrap();
        assert_eq!(server.last().json(), json!({}), "{hint:?}");
    }
    client
        .goal_from_chat(None, &t1, Some(" focus on tests "))
        .await
        .unwrap();
    assert_eq!(server.last().json(), json!({"hint": "focus on tests"}));
    let long = "字".repeat(MAX_HINT_CHARS + 1);
    let err = client
        .goal_from_chat(None, &t1, Some(&long))
        .await
        .unwrap_err();
    assert_eq!(err, GatewayError::InvalidArgument { what: "hint" });
    assert_eq!(server.requests().len(), 4);
}

#[tokio::test]
async fn owner_locale_reads_top_level_or_settings() {
    let server = Server::start(|r| match r.header("x-deerflow-owner-user-id") {
        Some("top") => Reply::Json(
            200,
            json!({"locale": "pt-BR", "settings": {"locale": "zh-CN"}}),
        ),
        Some("nested") => Reply::Json(200, json!({"settings": {"locale": "zh-CN"}, "revision": 3})),
        Some("junk") => Reply::Json(200, json!({"locale": "<b>", "settings": {"locale": 5}})),
        _ => Reply::Json(200, json!({"settings": null, "revision": 0})),
    })
    .await;
    let client = server.client();
    let locale = |id: &str| {
        let client = client.clone();
        let owner = Owner::new(id);
        async move { client.owner_locale(Some(&owner)).await.unwrap() }
    };
    assert_eq!(locale("top").await.as_deref(), Some("pt-BR"));
    assert_eq!(locale("nested").await.as_deref(), Some("zh-CN"));
    assert_eq!(locale("junk").await, None);
    assert_eq!(locale("none").await, None);
}

#[tokio::test]
async fn upload_limits_are_read_once_and_default_without_the_route() {
    let server = Server::start(|r| match r.header("x-deerflow-owner-user-id") {
        Some("configured") => Reply::Json(
            200,
            json!({"max_files": 2, "max_file_size": 5, "max_total_size": 8}),
        ),
        Some("old") => Reply::Json(404, json!({"detail": "Not Found"})),
        _ => Reply::Json(500, json!({"detail": "boom"})),
    })
    .await;
    let t1 = ThreadId::new("t1");
    let client = server.client();
    let configured = Owner::new("configured");
    let limits = UploadLimits {
        max_files: 2,
        max_file_size: 5,
        max_total_size: 8,
    };
    assert_eq!(client.upload_limits(Some(&configured), &t1).await, limits);
    assert_eq!(server.last().path, "/api/threads/t1/uploads/limits");
    assert_eq!(server.last().method, "GET");
    // Kept: the second ask sends nothing.
    assert_eq!(client.upload_limits(Some(&configured), &t1).await, limits);
    assert_eq!(server.requests().len(), 1);
    // A Gateway without the route applies DeerFlow's defaults, and so does the client.
    let old = server.client();
    let defaults = UploadLimits::default();
    assert_eq!(
        old.upload_limits(Some(&Owner::new("old")), &t1).await,
        defaults
    );
    assert_eq!(
        old.upload_limits(Some(&Owner::new("old")), &t1).await,
        defaults
    );
    assert_eq!(server.requests().len(), 2, "a missing route is kept too");
    // A failed read is not kept.
    let failing = server.client();
    assert_eq!(failing.upload_limits(None, &t1).await, defaults);
    assert_eq!(failing.upload_limits(None, &t1).await, defaults);
    assert_eq!(server.requests().len(), 4);
}

/// A run's record: read at once where the Gateway has no events route (it writes no
/// receipt either, so there is nothing to wait for), and read again until the receipt shows
/// where it has.
#[tokio::test]
async fn a_run_record_is_read_again_only_while_a_receipt_may_come() {
    let receipts = Arc::new(Mutex::new(0_usize));
    let seen = receipts.clone();
    let server = Server::start(move |r| {
        let row =
            json!({"seq": 2, "category": "message", "content": {"type": "ai", "content": "Done."}});
        if r.path.contains("/messages") {
            return record_page(&[row], &r.query);
        }
        match r.header("x-deerflow-owner-user-id") {
            Some("old") => Reply::Json(404, json!({"detail": "Not Found"})),
            _ => {
                // The receipt shows at the third read of the events.
                let mut reads = seen.lock().unwrap();
                *reads += 1;
                let mut events = vec![json!({"seq": 1, "event_type": "run.start"})];
                if *reads >= 3 {
                    events.push(json!({"seq": 3, "event_type": "run.delivery"}));
                }
                Reply::Json(200, Value::Array(events))
            }
        }
    })
    .await;
    let (client, t1) = (server.client(), ThreadId::new("t1"));
    let read = |owner: &'static str| {
        let client = client.clone();
        let t1 = t1.clone();
        async move {
            let messages = client
                .run_messages(Some(&Owner::new(owner)), &t1, "r1")
                .await;
            let messages = messages.unwrap();
            messages
                .iter()
                .map(|m| m.text().to_owned())
                .collect::<Vec<_>>()
        }
    };
    assert_eq!(read("old").await, ["Done."]);
    let paths: Vec<String> = server.requests().into_iter().map(|r| r.path).collect();
    assert_eq!(paths.len(), 2, "the events once, the rows once: {paths:?}");
    assert_eq!(read("new").await, ["Done."]);
    assert_eq!(
        *receipts.lock().unwrap(),
        3,
        "read until the receipt showed"
    );
}

/// A page of a run's record as DeerFlow's `list_run_messages` serves it for `query`: the
/// rows after `after_seq` oldest first, else the newest before `before_seq`, `limit` of
/// them, and whether there are more (`trim_run_message_page`); a `limit` outside 1 to 200
/// or a cursor under 1 is FastAPI's 422.
fn record_page(rows: &[Value], query: &str) -> Reply {
    let param = |name: &str| {
        query.split('&').find_map(|pair| {
            let (key, value) = pair.split_once('=')?;
            (key == name).then(|| value.parse::<i64>().unwrap())
        })
    };
    let limit = param("limit").unwrap_or(50);
    let (before, after) = (param("before_seq"), param("after_seq"));
    if !(1..=200).contains(&limit) || before.is_some_and(|b| b < 1) || after.is_some_and(|a| a < 1)
    {
        return Reply::Json(422, json!({"detail": [{"type": "greater_than_equal"}]}));
    }
    let limit = usize::try_from(limit).unwrap();
    let mut kept: Vec<Value> = rows
        .iter()
        .filter(|row| {
            let seq = row["seq"].as_i64().unwrap();
            before.is_none_or(|b| seq < b) && after.is_none_or(|a| seq > a)
        })
        .cloned()
        .collect();
    let has_more = kept.len() > limit;
    let data = if after.is_some() {
        kept.truncate(limit);
        kept
    } else {
        kept.split_off(kept.len().saturating_sub(limit))
    };
    Reply::Json(200, json!({"data": data, "has_more": has_more}))
}

/// A Gateway whose run record holds `rows(reads)` answers once its events were read
/// `reads` times, its receipt written from the `receipt_at`-th read on; and how often
/// the events were read.
async fn growing_record(
    rows: impl Fn(i64) -> i64 + Send + Sync + 'static,
    receipt_at: i64,
) -> (Server, Arc<Mutex<i64>>) {
    let events_read = Arc::new(Mutex::new(0_i64));
    let seen = events_read.clone();
    let server = Server::start(move |r| {
        let mut reads = seen.lock().unwrap();
        if r.path.ends_with("/messages") {
            return record_page(&agent_rows(rows(*reads)), &r.query);
        }
        *reads += 1;
        let mut events = vec![json!({"seq": 1, "event_type": "run.start"})];
        if *reads >= receipt_at {
            events.push(json!({"seq": 100_000, "event_type": "run.delivery"}));
        }
        Reply::Json(200, Value::Array(events))
    })
    .await;
    (server, events_read)
}

/// `count` answers of the agent's, seq 1 on.
fn agent_rows(count: i64) -> Vec<Value> {
    (1..=count)
        .map(|seq| json!({"seq": seq, "category": "message", "content": {"type": "ai", "content": format!("m{seq}")}}))
        .collect()
}

/// The texts of a run's record as the client reads it, and the queries of the pages read.
async fn read_record(server: &Server) -> (Vec<String>, Vec<String>) {
    let client = server.client();
    let messages = client.run_messages(None, &ThreadId::new("t1"), "r1").await;
    let texts = messages
        .unwrap()
        .iter()
        .map(|m| m.text().to_owned())
        .collect();
    let pages = server
        .requests()
        .into_iter()
        .filter(|r| r.path.ends_with("/messages"))
        .map(|r| r.query)
        .collect();
    (texts, pages)
}

/// A record longer than a page is read back to its first row even when its events, and so
/// its start, cannot be read: a file presented early in a long run is not missed.
#[tokio::test]
async fn a_long_record_is_read_whole_when_its_start_is_unknown() {
    let rows = agent_rows(450);
    let server = Server::start(move |r| {
        if r.path.ends_with("/messages") {
            record_page(&rows, &r.query)
        } else {
            Reply::Json(500, json!({"detail": "event store down"}))
        }
    })
    .await;
    let (texts, pages) = read_record(&server).await;
    let expected: Vec<String> = (1..=450).map(|n| format!("m{n}")).collect();
    assert_eq!(texts, expected);
    assert_eq!(
        pages,
        [
            "limit=200",
            "limit=200&before_seq=251",
            "limit=200&before_seq=51"
        ]
    );
}

/// A record read again while it settles is read on from the newest row read, not from its
/// start again, and every row comes once.
#[tokio::test]
async fn a_record_read_again_is_read_on_from_its_newest_row() {
    // Ten more rows are written before each read of the events after the first.
    let (server, events_read) = growing_record(|reads| 250 + 10 * (reads - 1), 3).await;
    let (texts, pages) = read_record(&server).await;
    let expected: Vec<String> = (1..=270).map(|n| format!("m{n}")).collect();
    assert_eq!(texts, expected);
    assert_eq!(
        pages,
        [
            "limit=200",
            "limit=200&before_seq=51",
            "limit=200&after_seq=250",
            "limit=200&after_seq=260"
        ]
    );
    assert_eq!(*events_read.lock().unwrap(), 3);
}

/// A later read of the events that fails is no end: the route was read before, so the
/// receipt is awaited as before, and the rows written meanwhile are read.
#[tokio::test]
async fn a_failed_later_read_of_the_events_still_waits_for_the_receipt() {
    let events_read = Arc::new(Mutex::new(0_i64));
    let seen = events_read.clone();
    let server = Server::start(move |r| {
        let mut reads = seen.lock().unwrap();
        if r.path.ends_with("/messages") {
            return record_page(&agent_rows(2 + *reads), &r.query);
        }
        *reads += 1;
        match *reads {
            2 => Reply::Json(500, json!({"detail": "event store down"})),
            3 => Reply::Json(200, json!([{"seq": 1, "event_type": "run.start"}, {"seq": 9, "event_type": "run.delivery"}])),
            _ => Reply::Json(200, json!([{"seq": 1, "event_type": "run.start"}])),
        }
    })
    .await;
    let (texts, _) = read_record(&server).await;
    assert_eq!(texts, ["m1", "m2", "m3", "m4", "m5"]);
    assert_eq!(*events_read.lock().unwrap(), 3);
}

/// A Gateway (or a proxy) that drops the `after_seq` cursor answers rows already read: the
/// record is read from the newest page back instead, and no row comes twice.
#[tokio::test]
async fn a_gateway_that_drops_the_cursor_shows_no_row_twice() {
    let events_read = Arc::new(Mutex::new(0_i64));
    let seen = events_read.clone();
    let server = Server::start(move |r| {
        let mut reads = seen.lock().unwrap();
        if r.path.ends_with("/messages") {
            let query = r
                .query
                .split('&')
                .filter(|p| !p.starts_with("after_seq="))
                .collect::<Vec<_>>()
                .join("&");
            return record_page(&agent_rows(3), &query);
        }
        *reads += 1;
        let mut events = vec![json!({"seq": 1, "event_type": "run.start"})];
        if *reads == 2 {
            events.push(json!({"seq": 9, "event_type": "run.delivery"}));
        }
        Reply::Json(200, Value::Array(events))
    })
    .await;
    let (texts, pages) = read_record(&server).await;
    assert_eq!(texts, ["m1", "m2", "m3"]);
    assert_eq!(pages.len(), 3, "{pages:?}");
}

/// A record that grew past what the client reads between two reads keeps its newest rows
/// (an answer is at its end): read on when it grew by five pages at most, the oldest rows
/// let go; from the newest page back when it grew by more.
#[tokio::test]
async fn a_record_that_grew_past_what_is_read_keeps_its_newest_rows() {
    for (grown, pages_read) in [(1_000, 1 + 5), (1_300, 1 + 5 + 5)] {
        let rows = move |reads| if reads == 1 { 100 } else { 100 + grown };
        let (server, _) = growing_record(rows, 2).await;
        let (texts, pages) = read_record(&server).await;
        let newest = 100 + grown;
        let expected: Vec<String> = (newest - 999..=newest).map(|n| format!("m{n}")).collect();
        assert_eq!(texts, expected, "grown by {grown}");
        assert_eq!(pages.len(), pages_read, "grown by {grown}: {pages:?}");
    }
}
