//! Test helpers for the webhook host: a metrics probe, handlers and a raw HTTP/1 client.
//!
//! The client writes bytes to a real socket so tests can send headers without a body, or
//! half a body, which an HTTP client library would not do. Every read has a deadline.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use metrics_util::CompositeKey;
use metrics_util::debugging::{DebugValue, DebuggingRecorder, Snapshotter};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::Notify;

use crate::telemetry::{Stage, Telemetry, names};
use crate::webhook::{
    HeaderMap, Installed, RunningHost, WEBHOOK_REFUSED_METRIC, WebhookHandler, WebhookHost,
    WebhookLimits, WebhookRequest, WebhookResponse, WebhookRoute,
};

/// How long any awaited outcome may take before the test fails.
pub(in crate::webhook) const DEADLINE: Duration = Duration::from_secs(5);

/// The header [`Echo`] checks.
pub(in crate::webhook) const SECRET_HEADER: &str = "x-test-secret";
pub(in crate::webhook) const SECRET: &str = "open sesame";

/// Awaits `future` or panics after [`DEADLINE`].
pub(in crate::webhook) async fn within<T>(future: impl Future<Output = T>) -> T {
    match tokio::time::timeout(DEADLINE, future).await {
        Ok(value) => value,
        Err(_) => panic!("no outcome within {DEADLINE:?}"),
    }
}

/// A local recorder; series registered inside [`Probe::build`] report here.
pub(in crate::webhook) struct Probe {
    recorder: DebuggingRecorder,
    snapshotter: Snapshotter,
    totals: Mutex<HashMap<CompositeKey, u64>>,
}

impl Probe {
    pub(in crate::webhook) fn new() -> Self {
        let recorder = DebuggingRecorder::new();
        let snapshotter = recorder.snapshotter();
        Self {
            recorder,
            snapshotter,
            totals: Mutex::default(),
        }
    }

    pub(in crate::webhook) fn build<T>(&self, build: impl FnOnce() -> T) -> T {
        metrics::with_local_recorder(&self.recorder, build)
    }

    /// The total of a counter so far. A snapshot resets the recorder's counters, so the
    /// totals are kept here.
    fn counter(&self, name: &str, labels: &[(&str, &str)]) -> u64 {
        let mut totals = self.totals.lock().unwrap();
        for (key, _, _, value) in self.snapshotter.snapshot().into_vec() {
            if let DebugValue::Counter(n) = value {
                *totals.entry(key).or_default() += n;
            }
        }
        totals
            .iter()
            .filter(|(key, _)| {
                key.key().name() == name
                    && labels.iter().all(|(k, v)| {
                        key.key()
                            .labels()
                            .any(|label| label.key() == *k && label.value() == *v)
                    })
            })
            .map(|(_, n)| n)
            .sum()
    }

    /// The refusal counter of `channel` for `reason`.
    pub(in crate::webhook) fn refused(&self, channel: &str, reason: &str) -> u64 {
        self.counter(
            WEBHOOK_REFUSED_METRIC,
            &[("channel", channel), ("reason", reason)],
        )
    }

    /// The receiving errors of `channel`.
    pub(in crate::webhook) fn receiving_errors(&self, channel: &str) -> u64 {
        self.counter(
            names::ERRORS,
            &[("channel", channel), ("stage", Stage::Receiving.as_str())],
        )
    }

    /// The events `channel` received.
    pub(in crate::webhook) fn received(&self, channel: &str) -> u64 {
        self.counter(names::RECEIVED, &[("channel", channel)])
    }
}

/// Answers 200 with `{"channel": …, "body": …}`; requires [`SECRET`] in [`SECRET_HEADER`]
/// when `secret` is set; answers [`WebhookResponse::unauthorized`] to a body `forged`,
/// [`WebhookResponse::stale`] to `stale` and [`WebhookResponse::malformed`] to `garbage`.
pub(in crate::webhook) struct Echo {
    pub(in crate::webhook) telemetry: Telemetry,
    pub(in crate::webhook) secret: bool,
    pub(in crate::webhook) calls: AtomicUsize,
}

impl Echo {
    pub(in crate::webhook) fn new(telemetry: &Telemetry) -> Arc<Self> {
        Arc::new(Self {
            telemetry: telemetry.clone(),
            secret: false,
            calls: AtomicUsize::new(0),
        })
    }

    pub(in crate::webhook) fn with_secret(telemetry: &Telemetry) -> Arc<Self> {
        Arc::new(Self {
            telemetry: telemetry.clone(),
            secret: true,
            calls: AtomicUsize::new(0),
        })
    }

    pub(in crate::webhook) fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }
}

#[async_trait]
impl WebhookHandler for Echo {
    fn authorize(&self, headers: &HeaderMap) -> bool {
        !self.secret || headers.get(SECRET_HEADER).is_some_and(|v| v == SECRET)
    }

    async fn handle(&self, request: WebhookRequest) -> WebhookResponse {
        self.calls.fetch_add(1, Ordering::SeqCst);
        self.telemetry.received(1);
        match request.body.as_ref() {
            b"forged" => return WebhookResponse::unauthorized(),
            b"stale" => return WebhookResponse::stale(),
            b"garbage" => return WebhookResponse::malformed(),
            _ => {}
        }
        WebhookResponse::json_value(&serde_json::json!({
            "channel": self.telemetry.channel(),
            "body": String::from_utf8_lossy(&request.body),
            "query": request.query,
        }))
    }
}

/// Signals `entered` and answers 200 only once `release` is notified.
#[derive(Default)]
pub(in crate::webhook) struct Blocking {
    pub(in crate::webhook) entered: Notify,
    pub(in crate::webhook) release: Notify,
}

#[async_trait]
impl WebhookHandler for Blocking {
    async fn handle(&self, _request: WebhookRequest) -> WebhookResponse {
        self.entered.notify_one();
        self.release.notified().await;
        WebhookResponse::status(crate::webhook::StatusCode::OK)
    }
}

/// One started host with one route of channel `unit` on 127.0.0.1 (adopted socket).
pub(in crate::webhook) struct Fixture {
    pub(in crate::webhook) probe: Probe,
    pub(in crate::webhook) telemetry: Telemetry,
    pub(in crate::webhook) route: WebhookRoute,
    pub(in crate::webhook) running: RunningHost,
    pub(in crate::webhook) addr: SocketAddr,
}

pub(in crate::webhook) const CHANNEL: &str = "unit";
pub(in crate::webhook) const PATH: &str = "/hook";

pub(in crate::webhook) async fn fixture(limits: WebhookLimits) -> Fixture {
    let probe = Probe::new();
    let host = WebhookHost::new();
    let socket = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let listen = socket.local_addr().unwrap();
    host.adopt(listen, socket);
    let (telemetry, route) = probe.build(|| {
        let telemetry = Telemetry::new(CHANNEL);
        let route = host.route(&telemetry, listen, PATH, limits).unwrap();
        (telemetry, route)
    });
    let running = host.start().await.unwrap();
    assert_eq!(running.local_addr(listen), Some(listen));
    Fixture {
        probe,
        telemetry,
        route,
        running,
        addr: listen,
    }
}

/// A fixture whose limits are the defaults as `change` leaves them.
pub(in crate::webhook) async fn fixture_with(change: impl FnOnce(&mut WebhookLimits)) -> Fixture {
    let mut limits = WebhookLimits::default();
    change(&mut limits);
    fixture(limits).await
}

impl Fixture {
    pub(in crate::webhook) fn install(&self, handler: Arc<dyn WebhookHandler>) -> Installed {
        self.route.install(handler)
    }

    /// Installs an [`Echo`] on the route; it stays installed while the guard lives.
    pub(in crate::webhook) fn echo(&self) -> (Arc<Echo>, Installed) {
        let echo = Echo::new(&self.telemetry);
        (echo.clone(), self.install(echo))
    }

    /// Asserts that `n` requests were refused for `reason`, and that those are all the
    /// receiving errors counted.
    pub(in crate::webhook) fn assert_refused(&self, reason: &str, n: u64) {
        assert_eq!(self.probe.refused(CHANNEL, reason), n, "refused: {reason}");
        assert_eq!(self.probe.receiving_errors(CHANNEL), n);
    }
}

/// Connects and writes `bytes` (leaving the connection open for more).
pub(in crate::webhook) async fn send(addr: SocketAddr, bytes: &[u8]) -> TcpStream {
    let mut stream = within(TcpStream::connect(addr)).await.unwrap();
    within(stream.write_all(bytes)).await.unwrap();
    stream
}

/// Connects from the loopback address `from` (e.g. `127.0.0.2`: another peer than the
/// tests' own `127.0.0.1`) and writes `bytes`, leaving the connection open.
pub(in crate::webhook) async fn send_from(
    from: std::net::IpAddr,
    addr: SocketAddr,
    bytes: &[u8],
) -> TcpStream {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.bind(SocketAddr::new(from, 0)).unwrap();
    let mut stream = within(socket.connect(addr)).await.unwrap();
    within(stream.write_all(bytes)).await.unwrap();
    stream
}

/// The head of a request, `Connection: close`, with `headers` lines added verbatim.
pub(in crate::webhook) fn head(method: &str, path: &str, headers: &[&str]) -> String {
    let mut head = format!("{method} {path} HTTP/1.1\r\nhost: test\r\nconnection: close\r\n");
    for header in headers {
        head.push_str(header);
        head.push_str("\r\n");
    }
    head.push_str("\r\n");
    head
}

/// Writes the raw `request` on a new connection and reads its answer's status code.
pub(in crate::webhook) async fn raw_status(addr: SocketAddr, request: &str) -> u16 {
    status(&mut send(addr, request.as_bytes()).await).await
}

/// Reads the status code of the response on `stream`.
pub(in crate::webhook) async fn status(stream: &mut TcpStream) -> u16 {
    let mut line = Vec::new();
    let mut byte = [0u8; 1];
    while !line.ends_with(b"\r\n") {
        let n = within(stream.read(&mut byte)).await.unwrap();
        assert_eq!(n, 1, "the connection closed before a status line");
        line.push(byte[0]);
    }
    let line = String::from_utf8(line).unwrap();
    line.split(' ').nth(1).unwrap().parse().unwrap()
}

/// A complete POST of `body`; returns the status and the response body.
pub(in crate::webhook) async fn post(
    addr: SocketAddr,
    path: &str,
    headers: &[&str],
    body: &str,
) -> (u16, String) {
    let length = format!("content-length: {}", body.len());
    let mut all = headers.to_vec();
    all.push(&length);
    let request = head("POST", path, &all) + body;
    let mut stream = send(addr, request.as_bytes()).await;
    let mut response = Vec::new();
    within(stream.read_to_end(&mut response)).await.unwrap();
    let response = String::from_utf8(response).unwrap();
    let status = response.split(' ').nth(1).unwrap().parse().unwrap();
    let body = response
        .split_once("\r\n\r\n")
        .map(|(_, body)| body.to_owned())
        .unwrap_or_default();
    (status, body)
}
