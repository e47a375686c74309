//! Test harness: a running simulator plus a plain `reqwest` client, the run bodies the
//! im-bridge client puts on the wire (`spec/gateway.md` §3.2), and a strict SSE parser.

use std::future::Future;
use std::time::Duration;

use im_bridge::simulator::{RunningSimulator, Simulator, SimulatorConfig};
use reqwest::header::HeaderMap;
use reqwest::{Client, Method, Response};
use serde_json::{Value, json};

/// Deadline for any single wait in these tests.
pub const DEADLINE: Duration = Duration::from_secs(10);

/// Fails the test if `future` does not finish within [`DEADLINE`].
pub async fn within<F: Future>(future: F) -> F::Output {
    tokio::time::timeout(DEADLINE, future)
        .await
        .expect("deadline passed")
}

/// A simulator on loopback and a client.
pub struct Harness {
    pub sim: RunningSimulator,
    pub http: Client,
}

impl Harness {
    pub async fn start() -> Self {
        Self::with(SimulatorConfig::default()).await
    }

    pub async fn with(config: SimulatorConfig) -> Self {
        let sim = Simulator::start(config).await.expect("simulator starts");
        let http = Client::builder()
            .timeout(DEADLINE)
            .build()
            .expect("client builds");
        Self { sim, http }
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.sim.gateway_url())
    }

    pub async fn send(&self, method: Method, path: &str, body: Option<Value>) -> Response {
        let mut request = self.http.request(method, self.url(path));
        if let Some(body) = body {
            request = request.json(&body);
        }
        within(request.send()).await.expect("request sent")
    }

    /// Sends and returns `(status, JSON body)`.
    pub async fn call(&self, method: Method, path: &str, body: Option<Value>) -> (u16, Value) {
        let response = self.send(method, path, body).await;
        let status = response.status().as_u16();
        let text = within(response.text()).await.expect("body read");
        let body = if text.is_empty() {
            Value::Null
        } else {
            serde_json::from_str(&text).unwrap_or(Value::String(text))
        };
        (status, body)
    }

    /// Creates a thread with a minted id.
    pub async fn thread(&self) -> String {
        let (status, body) = self
            .call(Method::POST, "/api/threads", Some(json!({"metadata": {}})))
            .await;
        assert_eq!(status, 200, "{body}");
        body["thread_id"].as_str().expect("thread id").to_owned()
    }

    /// A whole `runs.wait` of `text` on `thread`: `(status, JSON body)`.
    pub async fn wait_run(&self, thread: &str, text: &str) -> (u16, Value) {
        self.call(
            Method::POST,
            &format!("/api/threads/{thread}/runs/wait"),
            Some(wait_body(thread, text)),
        )
        .await
    }

    /// Starts a streaming run (headers received).
    pub async fn stream(&self, thread: &str, text: &str) -> Response {
        self.send(
            Method::POST,
            &format!("/api/threads/{thread}/runs/stream"),
            Some(stream_body(thread, text)),
        )
        .await
    }

    /// A whole streaming run: its headers and parsed body.
    pub async fn stream_all(&self, thread: &str, text: &str) -> (HeaderMap, Vec<Item>) {
        let response = self.stream(thread, text).await;
        assert_eq!(response.status(), 200);
        let headers = response.headers().clone();
        let text = within(response.text()).await.expect("stream read");
        (headers, parse_sse(&text))
    }

    /// The frames of a whole streaming run.
    pub async fn frames(&self, thread: &str, text: &str) -> Vec<Frame> {
        frames(&self.stream_all(thread, text).await.1)
    }
}

/// Checks that `response` is the HTML error page a proxy or server in front of the
/// Gateway sends: status `status`, an HTML content type, and `text` in the page.
pub async fn assert_html_error(response: Response, status: u16, text: &str) {
    assert_eq!(response.status(), status);
    let content_type = response.headers()["content-type"].to_str().unwrap();
    assert!(content_type.starts_with("text/html"), "{content_type}");
    let page = within(response.text()).await.unwrap();
    assert!(page.contains(text), "{page}");
}

fn config_for(thread: &str) -> Value {
    json!({"recursion_limit": 100, "configurable": {"checkpoint_ns": "", "thread_id": thread}})
}

fn context_for(thread: &str) -> Value {
    json!({"thinking_enabled": true, "is_plan_mode": false, "subagent_enabled": false,
           "thread_id": thread, "channel_name": "telegram", "user_id": "u_42",
           "channel_user_id": "987654"})
}

fn input(text: &str) -> Value {
    json!({"messages": [{"role": "human", "content": text}]})
}

/// The `runs.stream` body of §3.2.
pub fn stream_body(thread: &str, text: &str) -> Value {
    json!({"assistant_id": "lead_agent", "input": input(text), "config": config_for(thread),
           "context": context_for(thread), "stream_mode": ["messages-tuple", "values"],
           "stream_subgraphs": false, "stream_resumable": false, "multitask_strategy": "reject"})
}

/// The `runs.wait` body of §3.2.
pub fn wait_body(thread: &str, text: &str) -> Value {
    json!({"assistant_id": "lead_agent", "input": input(text), "config": config_for(thread),
           "context": context_for(thread), "multitask_strategy": "reject"})
}

/// The `runs.create` body of §3.2.
pub fn create_body(thread: &str, text: &str) -> Value {
    json!({"assistant_id": "lead_agent", "input": input(text), "config": config_for(thread),
           "context": context_for(thread), "stream_mode": "values", "stream_subgraphs": false,
           "stream_resumable": false, "multitask_strategy": "reject"})
}

/// One SSE frame.
#[derive(Debug, Clone)]
pub struct Frame {
    pub event: String,
    pub data: Value,
    pub id: Option<String>,
}

/// A frame or a comment.
#[derive(Debug, Clone)]
pub enum Item {
    Frame(Frame),
    Comment(String),
}

/// Parses an event-stream body strictly: every block is a comment, or exactly
/// `event:` / `data:` (one line of JSON) / optional `id:`.
pub fn parse_sse(text: &str) -> Vec<Item> {
    assert!(
        text.is_empty() || text.ends_with("\n\n"),
        "stream ends mid-frame: {text:?}"
    );
    text.split_terminator("\n\n")
        .map(|block| {
            if let Some(comment) = block.strip_prefix(':') {
                return Item::Comment(comment.trim().to_owned());
            }
            let lines: Vec<&str> = block.split('\n').collect();
            assert!(lines.len() == 2 || lines.len() == 3, "bad frame: {block:?}");
            let event = lines[0].strip_prefix("event: ").expect("event line");
            let data = lines[1].strip_prefix("data: ").expect("data line");
            let id = lines
                .get(2)
                .map(|l| l.strip_prefix("id: ").expect("id line").to_owned());
            Item::Frame(Frame {
                event: event.to_owned(),
                data: serde_json::from_str(data).expect("data is JSON"),
                id,
            })
        })
        .collect()
}

/// The frames, without comments.
pub fn frames(items: &[Item]) -> Vec<Frame> {
    items
        .iter()
        .filter_map(|i| match i {
            Item::Frame(f) => Some(f.clone()),
            Item::Comment(_) => None,
        })
        .collect()
}

/// The event names in order.
pub fn events(frames: &[Frame]) -> Vec<&str> {
    frames.iter().map(|f| f.event.as_str()).collect()
}

/// The `messages` payloads (first tuple element).
pub fn payloads(frames: &[Frame]) -> Vec<Value> {
    frames
        .iter()
        .filter(|f| f.event == "messages" || f.event == "messages-tuple")
        .map(|f| f.data[0].clone())
        .collect()
}

/// The last `values` snapshot.
pub fn last_values(frames: &[Frame]) -> Value {
    frames
        .iter()
        .rev()
        .find(|f| f.event == "values")
        .map(|f| f.data.clone())
        .expect("a values frame")
}

/// The concatenated text of streamed AI chunks with message id `id`.
pub fn delta_text(frames: &[Frame], id: &str) -> String {
    payloads(frames)
        .iter()
        .filter(|p| p["id"] == id)
        .filter_map(|p| p["content"].as_str().map(str::to_owned))
        .collect()
}
