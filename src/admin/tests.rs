//! Tests of the admin endpoints over real loopback HTTP.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use async_trait::async_trait;
use im_bridge_channel::{
    Capabilities, ChannelError, ChannelExit, ChannelIdentity, ChannelResult, InboundSink,
    SendTarget, SentMessage,
};

use super::*;
use crate::telemetry::names;

/// A channel whose connection a test switches (it overrides what its identity says).
struct FakeChannel {
    identity: ChannelIdentity,
    connected: AtomicBool,
}

impl FakeChannel {
    fn new(connected: bool) -> Arc<Self> {
        Arc::new(Self {
            identity: ChannelIdentity::always_connected("fake", Capabilities::final_only(100)),
            connected: AtomicBool::new(connected),
        })
    }
}

#[async_trait]
impl Channel for FakeChannel {
    fn identity(&self) -> &ChannelIdentity {
        &self.identity
    }
    fn is_connected(&self) -> bool {
        self.connected.load(Ordering::SeqCst)
    }
    async fn run(&self, _: InboundSink, _: CancellationToken) -> ChannelResult<ChannelExit> {
        Ok(ChannelExit::Stopped)
    }
    async fn send_text(&self, _: SendTarget<'_>, _: &str) -> ChannelResult<SentMessage> {
        Err(ChannelError::Stopped)
    }
}

struct FakeProbe {
    up: AtomicBool,
    calls: AtomicUsize,
}

impl GatewayProbe for FakeProbe {
    fn probe(&self) -> BoxFuture<'_, bool> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        let up = self.up.load(Ordering::SeqCst);
        Box::pin(async move { up })
    }
}

async fn start(state: AdminState) -> (String, CancellationToken) {
    let listener = bind("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let token = CancellationToken::new();
    tokio::spawn(serve(listener, state, token.clone()));
    (base, token)
}

#[tokio::test]
async fn healthz_readyz_and_metrics() {
    let channel = FakeChannel::new(false);
    let probe = Arc::new(FakeProbe {
        up: AtomicBool::new(true),
        calls: AtomicUsize::new(0),
    });
    let (base, token) = start(AdminState::new(vec![channel.clone()], probe.clone())).await;
    let http = reqwest::Client::new();

    let health = http.get(format!("{base}/healthz")).send().await.unwrap();
    assert_eq!(health.status(), 200);

    // A disconnected channel makes the daemon not ready, and says which.
    let ready = http.get(format!("{base}/readyz")).send().await.unwrap();
    assert_eq!(ready.status(), 503);
    let body: serde_json::Value = ready.json().await.unwrap();
    assert_eq!(body["not_ready"], serde_json::json!(["channel:fake"]));

    channel.connected.store(true, Ordering::SeqCst);
    let ready = http.get(format!("{base}/readyz")).send().await.unwrap();
    assert_eq!(ready.status(), 200);
    // The probe result is cached: two readiness checks, one probe.
    assert_eq!(probe.calls.load(Ordering::SeqCst), 1);

    metrics::counter!(names::INBOUND, "channel" => "fake").increment(3);
    let page = http.get(format!("{base}/metrics")).send().await.unwrap();
    assert_eq!(page.status(), 200);
    let text = page.text().await.unwrap();
    assert!(
        text.contains("im_bridge_inbound_messages_total{channel=\"fake\"} 3"),
        "{text}"
    );
    token.cancel();
}

#[tokio::test]
async fn a_channel_standing_by_for_its_lease_is_ready() {
    let channel = FakeChannel::new(false);
    let probe = Arc::new(FakeProbe {
        up: AtomicBool::new(true),
        calls: AtomicUsize::new(0),
    });
    let standby = crate::lease::Standby::default();
    standby.set("fake", true);
    let state = AdminState::new(vec![channel], probe).with_standby(standby.clone());
    let (base, token) = start(state).await;
    let ready = reqwest::get(format!("{base}/readyz")).await.unwrap();
    assert_eq!(ready.status(), 200, "another replica runs its transport");
    // Once it takes the lease it must connect like any channel.
    standby.set("fake", false);
    let ready = reqwest::get(format!("{base}/readyz")).await.unwrap();
    assert_eq!(ready.status(), 503);
    token.cancel();
}

#[tokio::test]
async fn an_unreachable_gateway_is_not_ready() {
    let channel = FakeChannel::new(true);
    let probe = Arc::new(FakeProbe {
        up: AtomicBool::new(false),
        calls: AtomicUsize::new(0),
    });
    let (base, token) = start(AdminState::new(vec![channel], probe)).await;
    let ready = reqwest::get(format!("{base}/readyz")).await.unwrap();
    assert_eq!(ready.status(), 503);
    let body: serde_json::Value = ready.json().await.unwrap();
    assert_eq!(body["not_ready"], serde_json::json!(["gateway"]));
    token.cancel();
}

#[tokio::test]
async fn issue_12_a_transport_waiting_to_restart_is_not_ready_and_named() {
    use crate::supervisor::{Failure, TransportHealth, TransportState};
    // Connected as far as the channel knows, and even standing by: restarting wins.
    let channel = FakeChannel::new(true);
    let probe = Arc::new(FakeProbe {
        up: AtomicBool::new(true),
        calls: AtomicUsize::new(0),
    });
    let standby = crate::lease::Standby::default();
    standby.set("fake", true);
    let transports = TransportHealth::new(["fake"]);
    let state = AdminState::new(vec![channel], probe)
        .with_standby(standby)
        .with_transports(transports.clone());
    let (base, token) = start(state).await;
    let ready = reqwest::get(format!("{base}/readyz")).await.unwrap();
    assert_eq!(ready.status(), 200);
    let body: serde_json::Value = ready.json().await.unwrap();
    assert_eq!(
        body,
        serde_json::json!({"ready": true}),
        "no restart, no key"
    );

    transports.set(
        "fake",
        TransportState::Restarting {
            failures: 3,
            last: Failure::Panic,
        },
    );
    let ready = reqwest::get(format!("{base}/readyz")).await.unwrap();
    assert_eq!(ready.status(), 503);
    let body: serde_json::Value = ready.json().await.unwrap();
    assert_eq!(
        body,
        serde_json::json!({
            "ready": false,
            "not_ready": ["channel:fake"],
            "restarting": {"fake": {"failures": 3, "last_failure": "panic"}},
        })
    );

    transports.set("fake", TransportState::Running);
    let ready = reqwest::get(format!("{base}/readyz")).await.unwrap();
    assert_eq!(ready.status(), 200, "ready again once the transport runs");
    token.cancel();
}

/// Issue 27: 2,000 idle connections used to be held without bound. Now one address holds
/// at most its share (the rest are closed at once) and the endpoints answer everyone else.
#[tokio::test]
async fn issue_27_idle_connections_from_one_address_are_bounded() {
    use tokio::io::AsyncReadExt;
    let channel = FakeChannel::new(true);
    let probe = Arc::new(FakeProbe {
        up: AtomicBool::new(true),
        calls: AtomicUsize::new(0),
    });
    let (base, token) = start(AdminState::new(vec![channel], probe)).await;
    let addr: std::net::SocketAddr = base.trim_start_matches("http://").parse().unwrap();
    let idle: std::net::IpAddr = "127.0.0.6".parse().unwrap();
    let connect = async || {
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket.bind(std::net::SocketAddr::new(idle, 0)).unwrap();
        socket.connect(addr).await.unwrap()
    };
    let mut held = Vec::new();
    for _ in 0..400 {
        held.push(connect().await);
    }
    // Past the share, connections are closed without a byte: reading ends at once.
    let mut closed = 0;
    for stream in held.iter_mut().rev().take(200) {
        let mut byte = [0u8; 1];
        match tokio::time::timeout(std::time::Duration::from_secs(5), stream.read(&mut byte)).await
        {
            Ok(Ok(0) | Err(_)) => closed += 1,
            other => panic!("an idle connection past the share got {other:?}"),
        }
    }
    assert_eq!(closed, 200);
    let started = std::time::Instant::now();
    let health = reqwest::get(format!("{base}/healthz")).await.unwrap();
    assert_eq!(health.status(), 200);
    assert!(started.elapsed() < std::time::Duration::from_secs(1));
    token.cancel();
}
