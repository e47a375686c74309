//! The long connection against an in-test Feishu: an axum route answers endpoint discovery
//! and a `TcpListener` upgrades with `accept_hdr_async` (or refuses like Feishu does), then
//! hands each server-side socket to the test, which plays the server frame by frame.
//!
//! The fake's `ClientConfig` keeps the timers short (reconnect at once, no jitter) and the
//! ping interval long unless a test changes it, and the client's own backoff is zero
//! ([`no_backoff`]). Every wait has a deadline; none sleeps.
//!
//! The reconnect storm of issue 27 is played against the fake Feishu of
//! `im_bridge_fakes` instead, with the production backoff in paused time.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use axum::extract::State;
use axum::routing::post;
use axum::{Json, Router};
use serde_json::{Value, json};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::handshake::server::{ErrorResponse, Request, Response};

use im_bridge_channel::backoff::Backoff;
use im_bridge_channel::fixtures;
use im_bridge_channel::{Cause, Telemetry};
use im_bridge_fakes::running::Spawned;

use super::frame::Header;
use super::*;

const SECRET: &str = "s3cr3t-app-secret";
const DEADLINE: Duration = Duration::from_secs(5);

type ServerWs = WebSocketStream<TcpStream>;

/// How the fake answers an upgrade.
#[derive(Clone, Copy)]
enum Upgrade {
    Accept,
    /// Refuse with these `Handshake-Status` and `Handshake-Autherrcode` headers.
    Refuse(&'static str, Option<&'static str>),
    /// Advertise `wss://` on the plain listener: the TLS handshake fails.
    Tls,
}

#[derive(Clone)]
struct DiscoveryState {
    ws_url: String,
    config: Value,
    /// Codes answered first, in order (0: the usual success); then success always.
    script: Arc<Mutex<Vec<i64>>>,
    calls: Arc<AtomicUsize>,
    bodies: Arc<Mutex<Vec<Value>>>,
}

struct Fake {
    domain: String,
    conns: mpsc::Receiver<ServerWs>,
    discovery: DiscoveryState,
}

async fn discover(State(state): State<DiscoveryState>, Json(body): Json<Value>) -> Json<Value> {
    state.calls.fetch_add(1, Ordering::SeqCst);
    state.bodies.lock().unwrap().push(body);
    let scripted = {
        let mut codes = state.script.lock().unwrap();
        (!codes.is_empty()).then(|| codes.remove(0))
    };
    if let Some(code) = scripted.filter(|&c| c != 0) {
        return Json(json!({"code": code, "msg": "not now"}));
    }
    Json(
        json!({"code": 0, "msg": "ok", "data": {"URL": state.ws_url, "ClientConfig": state.config}}),
    )
}

async fn start(config: Value, upgrade: Upgrade, script: Vec<i64>) -> Fake {
    let ws_listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let ws_addr = ws_listener.local_addr().unwrap();
    let (tx, conns) = mpsc::channel(8);
    tokio::spawn(async move {
        while let Ok((stream, _)) = ws_listener.accept().await {
            // The signature is tungstenite's `Callback`.
            #[allow(clippy::result_large_err)]
            let callback =
                move |req: &Request, resp: Response| -> Result<Response, ErrorResponse> {
                    let query = req.uri().query().unwrap_or("");
                    assert!(query.contains("device_id=") && query.contains("service_id="));
                    match upgrade {
                        Upgrade::Accept | Upgrade::Tls => Ok(resp),
                        Upgrade::Refuse(status, auth) => {
                            let mut refusal = axum::http::Response::builder()
                                .status(400)
                                .header("Handshake-Status", status)
                                .header("Handshake-Msg", "refused by the fake");
                            if let Some(code) = auth {
                                refusal = refusal.header("Handshake-Autherrcode", code);
                            }
                            Err(refusal.body(None).unwrap())
                        }
                    }
                };
            if let Ok(ws) = tokio_tungstenite::accept_hdr_async(stream, callback).await {
                let _ = tx.send(ws).await;
            }
        }
    });
    let discovery = DiscoveryState {
        ws_url: format!(
            "{}://{ws_addr}/ws?device_id=dev-1&service_id=7&ticket=secret-ticket",
            if matches!(upgrade, Upgrade::Tls) {
                "wss"
            } else {
                "ws"
            }
        ),
        config,
        script: Arc::new(Mutex::new(script)),
        calls: Arc::new(AtomicUsize::new(0)),
        bodies: Arc::new(Mutex::new(Vec::new())),
    };
    let app = Router::new()
        .route("/callback/ws/endpoint", post(discover))
        .with_state(discovery.clone());
    let domain = fixtures::serve(app).await;
    Fake {
        domain,
        conns,
        discovery,
    }
}

/// The client's reconnect policy in these tests: no wait of its own.
fn no_backoff() -> Reconnect {
    Telemetry::new("feishu-test").reconnect(Backoff::new(
        Duration::ZERO,
        Duration::ZERO,
        Duration::ZERO,
    ))
}

/// Reconnect at once, never ping again unless told.
fn quick() -> Value {
    json!({"ReconnectCount": -1, "ReconnectInterval": 0, "ReconnectNonce": 0, "PingInterval": 3600})
}

/// Records what it saw, in order, into a log the fake also writes to.
struct Recorder {
    log: Arc<Mutex<Vec<String>>>,
    accept: bool,
}

impl EventHandler for Recorder {
    fn handle(&mut self, kind: &str, payload: Bytes) -> Verdict {
        let text = String::from_utf8_lossy(&payload).into_owned();
        self.log.lock().unwrap().push(format!("{kind}:{text}"));
        self.accept.into()
    }

    fn dropped(&mut self, reason: Dropped) {
        self.log.lock().unwrap().push(format!("dropped:{reason:?}"));
    }
}

struct Client {
    task: Spawned<Result<(), WsError>>,
    log: Arc<Mutex<Vec<String>>>,
}

fn spawn_client(fake: &Fake, accept: bool) -> Client {
    let log = Arc::new(Mutex::new(Vec::new()));
    let mut handler = Recorder {
        log: log.clone(),
        accept,
    };
    let settings = WsSettings {
        domain: fake.domain.clone(),
        app_id: "cli_test".into(),
        app_secret: Secret::new(SECRET),
    };
    let task = Spawned::spawn(|shutdown| async move {
        let http = reqwest::Client::new();
        run(&settings, &http, &mut handler, no_backoff(), &shutdown).await
    });
    Client { task, log }
}

async fn next_conn(fake: &mut Fake) -> ServerWs {
    tokio::time::timeout(DEADLINE, fake.conns.recv())
        .await
        .expect("no connection before the deadline")
        .expect("the fake stopped")
}

/// The next frame the client sent (skipping pings unless `pings`).
async fn next_frame(ws: &mut ServerWs, pings: bool) -> Frame {
    let wait = async {
        loop {
            match ws.next().await.expect("the client closed").unwrap() {
                Message::Binary(data) => {
                    let frame = Frame::decode(data).unwrap();
                    if pings || frame.method != METHOD_CONTROL {
                        return frame;
                    }
                }
                _ => continue,
            }
        }
    };
    tokio::time::timeout(DEADLINE, wait)
        .await
        .expect("no frame before the deadline")
}

async fn send(ws: &mut ServerWs, frame: &Frame) {
    ws.send(Message::Binary(frame.encode_to_vec().into()))
        .await
        .unwrap();
}

fn h(key: &str, value: &str) -> Header {
    Header {
        key: key.into(),
        value: value.into(),
    }
}

fn event(message_id: &str, sum: usize, seq: usize, payload: &str) -> Frame {
    Frame {
        seq_id: 11 + seq as u64,
        log_id: 22,
        service: 7,
        method: METHOD_DATA,
        headers: vec![
            h("type", "event"),
            h("message_id", message_id),
            h("sum", &sum.to_string()),
            h("seq", &seq.to_string()),
            h("trace_id", "trace-1"),
        ],
        payload: Some(Bytes::from(payload.to_owned())),
        ..Frame::default()
    }
}

fn ack_code(ack: &Frame) -> Value {
    serde_json::from_slice(&ack.payload_bytes()).unwrap()
}

#[tokio::test]
async fn pings_are_sent_and_a_pong_config_changes_the_interval() {
    let mut fake = start(quick(), Upgrade::Accept, vec![]).await;
    let client = spawn_client(&fake, true);
    let mut ws = next_conn(&mut fake).await;

    let ping = next_frame(&mut ws, true).await;
    assert_eq!(ping.method, METHOD_CONTROL);
    assert_eq!(ping.header("type"), Some("ping"));
    assert_eq!(ping.service, 7, "the service_id of the URL");

    // With the fake's 3600 s only this pong's 1 s brings the second ping before the deadline.
    let mut pong = Frame::ping(7);
    pong.headers = vec![h("type", "pong")];
    pong.payload = Some(Bytes::from_static(br#"{"PingInterval":1}"#));
    send(&mut ws, &pong).await;
    let again = next_frame(&mut ws, true).await;
    assert_eq!(again.header("type"), Some("ping"));

    // The discovery body carried the credentials under the SDK's keys.
    let body = fake.discovery.bodies.lock().unwrap()[0].clone();
    assert_eq!(body, json!({"AppID": "cli_test", "AppSecret": SECRET}));

    assert_eq!(client.task.stop().await, Ok(()));
}

#[tokio::test]
async fn a_server_that_stops_answering_pings_is_left_for_a_new_connection() {
    let mut fake = start(quick(), Upgrade::Accept, vec![]).await;
    let client = spawn_client(&fake, true);
    let mut ws = next_conn(&mut fake).await;
    let ping = next_frame(&mut ws, true).await;
    assert_eq!(ping.header("type"), Some("ping"));
    // A pong that sets a one-second interval, then silence: the next ping goes unanswered.
    let mut pong = Frame::ping(7);
    pong.headers = vec![h("type", "pong")];
    pong.payload = Some(Bytes::from_static(br#"{"PingInterval":1}"#));
    send(&mut ws, &pong).await;
    let again = next_frame(&mut ws, true).await;
    assert_eq!(again.header("type"), Some("ping"));
    // Within a second more the client gives up on this socket and connects again.
    let _second = next_conn(&mut fake).await;
    assert_eq!(fake.discovery.calls.load(Ordering::SeqCst), 2);
    drop(ws);
    assert_eq!(client.task.stop().await, Ok(()));
}

#[tokio::test]
async fn a_data_frame_is_acked_200_after_the_handler_saw_it() {
    let mut fake = start(quick(), Upgrade::Accept, vec![]).await;
    let client = spawn_client(&fake, true);
    let mut ws = next_conn(&mut fake).await;

    let frame = event("msg-1", 1, 0, r#"{"schema":"2.0"}"#);
    send(&mut ws, &frame).await;
    let ack = next_frame(&mut ws, false).await;
    client.log.lock().unwrap().push("ack".into());

    assert_eq!(ack_code(&ack), json!({"code": 200}));
    assert_eq!(ack.seq_id, frame.seq_id);
    assert_eq!(ack.log_id, frame.log_id);
    assert_eq!(ack.header("message_id"), Some("msg-1"));
    assert!(
        ack.header("biz_rt")
            .is_some_and(|ms| ms.parse::<u64>().is_ok())
    );
    assert_eq!(
        *client.log.lock().unwrap(),
        [r#"event:{"schema":"2.0"}"#, "ack"]
    );
    assert_eq!(client.task.stop().await, Ok(()));
}

#[tokio::test]
async fn a_split_payload_is_reassembled_and_acked_once() {
    let mut fake = start(quick(), Upgrade::Accept, vec![]).await;
    let client = spawn_client(&fake, true);
    let mut ws = next_conn(&mut fake).await;

    send(&mut ws, &event("msg-2", 2, 1, r#""b":2}"#)).await;
    send(&mut ws, &event("msg-2", 2, 0, r#"{"a":1,"#)).await;
    let ack = next_frame(&mut ws, false).await;
    assert_eq!(ack_code(&ack), json!({"code": 200}));
    assert_eq!(*client.log.lock().unwrap(), [r#"event:{"a":1,"b":2}"#]);

    // One ack only: the next data frame the fake sees answers the next event.
    send(&mut ws, &event("msg-3", 1, 0, "{}")).await;
    let next = next_frame(&mut ws, false).await;
    assert_eq!(next.header("message_id"), Some("msg-3"));
    assert_eq!(client.task.stop().await, Ok(()));
}

#[tokio::test]
async fn a_refused_event_is_acked_500() {
    let mut fake = start(quick(), Upgrade::Accept, vec![]).await;
    let client = spawn_client(&fake, false);
    let mut ws = next_conn(&mut fake).await;

    send(&mut ws, &event("msg-4", 1, 0, "{}")).await;
    let ack = next_frame(&mut ws, false).await;
    assert_eq!(ack_code(&ack), json!({"code": 500}));
    assert_eq!(*client.log.lock().unwrap(), ["event:{}"]);
    assert_eq!(client.task.stop().await, Ok(()));
}

#[tokio::test]
async fn junk_is_dropped_and_the_connection_stays() {
    let mut fake = start(quick(), Upgrade::Accept, vec![]).await;
    let client = spawn_client(&fake, true);
    let mut ws = next_conn(&mut fake).await;

    ws.send(Message::Binary(Bytes::from_static(&[0x2A, 0x7F, 0x01])))
        .await
        .unwrap();
    ws.send(Message::Text("not a frame".into())).await.unwrap();
    let oversized = "x".repeat(MAX_FRAME_BYTES + 1);
    send(&mut ws, &event("big", 1, 0, &oversized)).await;
    let mut unknown = event("odd", 1, 0, "{}");
    unknown.headers[0].value = "mystery".into();
    send(&mut ws, &unknown).await;
    send(&mut ws, &event("msg-5", 1, 0, "{}")).await;

    let ack = next_frame(&mut ws, false).await;
    assert_eq!(ack.header("message_id"), Some("msg-5"));
    assert_eq!(
        *client.log.lock().unwrap(),
        ["dropped:Undecodable", "dropped:TooLarge", "event:{}"]
    );
    assert_eq!(client.task.stop().await, Ok(()));
}

#[tokio::test]
async fn the_client_reconnects_after_the_server_closes() {
    let mut fake = start(quick(), Upgrade::Accept, vec![]).await;
    let client = spawn_client(&fake, true);
    let mut first = next_conn(&mut fake).await;
    first.close(None).await.unwrap();

    let mut second = next_conn(&mut fake).await;
    assert_eq!(
        fake.discovery.calls.load(Ordering::SeqCst),
        2,
        "discovered again"
    );
    send(&mut second, &event("msg-6", 1, 0, "{}")).await;
    let ack = next_frame(&mut second, false).await;
    assert_eq!(ack_code(&ack), json!({"code": 200}));
    assert_eq!(client.task.stop().await, Ok(()));
}

#[tokio::test]
async fn busy_discovery_is_retried() {
    // A busy answer carries no timers: connect once to learn the fake's short ones.
    let mut fake = start(quick(), Upgrade::Accept, vec![0, 1, 1_000_040_343]).await;
    let client = spawn_client(&fake, true);
    let mut first = next_conn(&mut fake).await;
    first.close(None).await.unwrap();
    let _second = next_conn(&mut fake).await;
    assert_eq!(
        fake.discovery.calls.load(Ordering::SeqCst),
        4,
        "busy, internal, then ok"
    );
    assert_eq!(client.task.stop().await, Ok(()));
}

#[tokio::test]
async fn a_refused_discovery_is_fatal_and_names_no_secret() {
    let fake = start(quick(), Upgrade::Accept, vec![10_014]).await;
    let client = spawn_client(&fake, true);
    let error = client.task.finished().await.unwrap_err();
    assert_eq!(
        error,
        WsError::Refused {
            code: 10_014,
            msg: "not now".into()
        }
    );
    assert!(!format!("{error} {error:?}").contains(SECRET));
}

#[tokio::test]
async fn retries_stop_after_the_reconnect_count() {
    let config = json!({"ReconnectCount": 2, "ReconnectInterval": 0, "ReconnectNonce": 0, "PingInterval": 3600});
    // Discovery succeeds (bringing the timers); the upgrade is refused with a retryable 502.
    let fake = start(config, Upgrade::Refuse("502", None), vec![]).await;
    let client = spawn_client(&fake, true);
    assert_eq!(
        client.task.finished().await,
        Err(WsError::GaveUp { attempts: 2 })
    );
    assert_eq!(
        fake.discovery.calls.load(Ordering::SeqCst),
        3,
        "one try and two retries"
    );
}

#[tokio::test]
async fn a_514_handshake_is_auth_failed() {
    let fake = start(quick(), Upgrade::Refuse("514", None), vec![]).await;
    let client = spawn_client(&fake, true);
    assert_eq!(
        client.task.finished().await,
        Err(WsError::AuthFailed {
            msg: "refused by the fake".into()
        })
    );
}

#[tokio::test]
async fn too_many_connections_is_its_own_error() {
    let fake = start(quick(), Upgrade::Refuse("514", Some("1000040350")), vec![]).await;
    let client = spawn_client(&fake, true);
    assert_eq!(
        client.task.finished().await,
        Err(WsError::TooManyConnections {
            msg: "refused by the fake".into()
        })
    );
}

#[tokio::test]
async fn shutdown_returns_promptly_and_closes_politely() {
    let mut fake = start(quick(), Upgrade::Accept, vec![]).await;
    let client = spawn_client(&fake, true);
    let mut ws = next_conn(&mut fake).await;
    let _ping = next_frame(&mut ws, true).await;

    let asked = Instant::now();
    assert_eq!(client.task.stop().await, Ok(()));
    assert!(asked.elapsed() < socket::CLOSE_GRACE + Duration::from_millis(500));
    let closing = tokio::time::timeout(DEADLINE, ws.next()).await.unwrap();
    assert!(
        matches!(closing, Some(Ok(Message::Close(_)))),
        "{closing:?}"
    );
}

#[tokio::test]
async fn shutdown_while_waiting_to_reconnect_returns_at_once() {
    // Discovery is always busy and the (default) reconnect wait is minutes long.
    let fake = start(quick(), Upgrade::Accept, vec![1; 100]).await;
    let client = spawn_client(&fake, true);
    let wait = async {
        while fake.discovery.calls.load(Ordering::SeqCst) == 0 {
            tokio::task::yield_now().await;
        }
    };
    tokio::time::timeout(DEADLINE, wait).await.unwrap();
    assert_eq!(client.task.stop().await, Ok(()));
}

#[tokio::test]
async fn a_failed_tls_handshake_is_retried_not_a_panic() {
    // wss:// goes through rustls (webpki roots); the fake speaks no TLS.
    let config = json!({"ReconnectCount": 0, "ReconnectInterval": 0, "ReconnectNonce": 0, "PingInterval": 3600});
    let fake = start(config, Upgrade::Tls, vec![]).await;
    let client = spawn_client(&fake, true);
    assert_eq!(
        client.task.finished().await,
        Err(WsError::GaveUp { attempts: 0 })
    );
}

/// A server that drops every new connection for 15 s, with the fake's timers (reconnect
/// every second, no jitter: the server does not slow the client down, only the client's
/// own backoff can): before issue 27 the client reconnected hundreds of times a second.
/// Now it makes a handful of attempts, each counted, and serves again afterwards.
#[tokio::test(start_paused = true)]
async fn issue_27_fifteen_seconds_of_dropped_connections_make_at_most_ten_attempts() {
    use im_bridge_channel::reconnect::BACKOFF;
    use im_bridge_fakes::feishu::{self, FakeFeishu};
    use im_bridge_fakes::telemetry::TelemetryProbe;

    let fake = FakeFeishu::start().await.unwrap();
    fake.drop_connections_for(Duration::from_secs(15));
    let probe = TelemetryProbe::new();
    let telemetry = probe.build(|| Telemetry::new("feishu"));
    let settings = WsSettings {
        domain: fake.domain(),
        app_id: feishu::APP_ID.into(),
        app_secret: Secret::new(feishu::APP_SECRET),
    };
    let log = Arc::new(Mutex::new(Vec::new()));
    let mut handler = Recorder {
        log: log.clone(),
        accept: true,
    };
    let task = Spawned::spawn(|shutdown| async move {
        let http = reqwest::Client::new();
        let reconnect = telemetry.reconnect(BACKOFF);
        run(&settings, &http, &mut handler, reconnect, &shutdown).await
    });
    let attempts = fake
        .wait_through_dropped_connections(DEADLINE * 12)
        .await
        .unwrap();
    assert!((2..=10).contains(&attempts), "{attempts} attempts in 15 s");
    // Each dropped connection was followed by one reconnect, counted as a failed connect.
    let counted = probe.restarts("feishu", Cause::ConnectFailed);
    assert_eq!(counted, attempts as u64);
    assert_eq!(probe.restarts("feishu", Cause::Lost), 0);
    // And it serves again.
    let pushed = fake.push_event(&feishu::Event::text("oc_1", "ou_1", "back?").to_json());
    let ack = fake.wait_acked(&pushed.event_id, DEADLINE).await.unwrap();
    assert_eq!(ack.code, Some(200));
    assert_eq!(log.lock().unwrap().len(), 1, "{:?}", log.lock().unwrap());
    assert_eq!(task.stop().await, Ok(()));
}

#[test]
fn the_servers_timers_are_taken_within_bounds() {
    let mut config = ClientConfig::default();
    config.apply(&WireConfig {
        reconnect_count: Some(3),
        reconnect_interval: Some(i64::MAX),
        reconnect_nonce: Some(-5),
        ping_interval: Some(i64::MAX),
    });
    assert_eq!(
        config,
        ClientConfig {
            reconnect_count: 3,
            reconnect_interval: MAX_SERVER_TIMER,
            reconnect_nonce: ClientConfig::default().reconnect_nonce,
            ping_interval: MAX_SERVER_TIMER,
        }
    );
    // The next ping can be scheduled: nothing overflows the clock.
    assert!(Instant::now().checked_add(config.ping_interval).is_some());
    config.apply(&WireConfig {
        ping_interval: Some(0),
        ..WireConfig::default()
    });
    assert_eq!(
        config.ping_interval, MAX_SERVER_TIMER,
        "a ping storm is refused"
    );
}
