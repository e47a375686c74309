//! Stream mode against the fake DingTalk (`im_bridge_fakes::dingtalk`): callbacks handed
//! over and acked by verdict, ping echoes, `disconnect` rotations, reconnects, malformed
//! and oversized frames, refusals, shutdown, and logs free of secrets; and against an
//! in-test server that never answers a ping, for the keepalive.
//!
//! Timers are short (reconnect after 1 ms, no jitter). Every wait has a deadline; none
//! sleeps.

use std::sync::{Arc, Mutex};

use im_bridge_channel::Telemetry;
use im_bridge_channel::fixtures;
use im_bridge_fakes::dingtalk::{CLIENT_ID, CLIENT_SECRET, FakeDingTalk, Message};
use im_bridge_fakes::running::Spawned;
use serde_json::json;

use super::endpoint::OPEN_PATH;
use super::*;

const DEADLINE: Duration = Duration::from_secs(5);

fn quick() -> Timers {
    Timers {
        keepalive: Duration::from_secs(3600),
        pong_timeout: Duration::from_secs(3600),
    }
}

/// Reconnects after 1 ms, doubling to 5 ms, no jitter.
fn quick_reconnect() -> Reconnect {
    Telemetry::new("dingtalk-test").reconnect(Backoff::quick())
}

/// What the handler saw, in order; the verdicts it gives, in order (then `Accepted`).
#[derive(Clone, Default)]
struct Seen {
    log: Arc<Mutex<Vec<String>>>,
    verdicts: Arc<Mutex<Vec<Verdict>>>,
}

impl Seen {
    fn log(&self) -> Vec<String> {
        self.log.lock().unwrap().clone()
    }
}

impl EventHandler for Seen {
    fn handle(&mut self, data: &str) -> Verdict {
        let message: Value = serde_json::from_str(data).unwrap_or(Value::Null);
        let text = message["text"]["content"].as_str().unwrap_or("?");
        self.log.lock().unwrap().push(format!("message:{text}"));
        let mut verdicts = self.verdicts.lock().unwrap();
        if verdicts.is_empty() {
            Verdict::Accepted
        } else {
            verdicts.remove(0)
        }
    }

    fn dropped(&mut self, reason: Dropped) {
        self.log.lock().unwrap().push(format!("dropped:{reason:?}"));
    }
}

struct Client {
    task: Spawned<Result<(), StreamError>>,
    seen: Seen,
}

fn spawn_client(api_url: String, secret: &str, timers: Timers) -> Client {
    let seen = Seen::default();
    let mut handler = seen.clone();
    let settings = StreamSettings {
        api_url,
        client_id: CLIENT_ID.into(),
        client_secret: Secret::new(secret),
        timers,
    };
    let task = Spawned::spawn(|shutdown| async move {
        let http = reqwest::Client::new();
        run(&settings, &http, &mut handler, quick_reconnect(), &shutdown).await
    });
    Client { task, seen }
}

async fn connected() -> (FakeDingTalk, Client) {
    let fake = FakeDingTalk::start().await.unwrap();
    let client = spawn_client(fake.api_url(), CLIENT_SECRET, quick());
    fake.wait_connected(1, DEADLINE).await.unwrap();
    (fake, client)
}

async fn wait_log(client: &Client, fake: &FakeDingTalk, entry: &str) {
    let what = format!("the handler to see {entry}");
    fake.wait_until(&what, DEADLINE, |_| {
        client.seen.log().iter().any(|e| e == entry)
    })
    .await
    .unwrap();
}

#[tokio::test]
async fn a_robot_message_is_handed_over_and_acked_200_and_shutdown_closes() {
    let (fake, client) = connected().await;
    let open = &fake.calls_to("open")[0].body;
    assert_eq!(open["clientId"], CLIENT_ID);
    assert_eq!(
        open["subscriptions"],
        json!([{"type": "CALLBACK", "topic": TOPIC_BOT_MESSAGE}])
    );
    assert!(open["ua"].as_str().unwrap().starts_with("im-bridge/"));
    let pushed = fake.push(&Message::group_text("cidG", "staff-1", "hello").to_json());
    let ack = fake.wait_acked(&pushed.message_id, DEADLINE).await.unwrap();
    assert_eq!(client.seen.log(), ["message:hello"]);
    assert_eq!(ack.content_type.as_deref(), Some("application/json"));
    assert_eq!(ack.message.as_deref(), Some("OK"));
    let data: Value = serde_json::from_str(ack.data.as_deref().unwrap()).unwrap();
    assert_eq!(data, json!({"response": "OK"}));
    assert_eq!(client.task.stop().await, Ok(()));
    fake.wait_until("the socket closed", DEADLINE, |f| f.open_connections() == 0)
        .await
        .unwrap();
}

#[tokio::test]
async fn a_ping_is_acked_with_its_own_data() {
    let (fake, _client) = connected().await;
    let ping = fake.ping().pop().unwrap();
    fake.wait_acked(&ping, DEADLINE).await.unwrap();
    assert_eq!(fake.ping_echoed(&ping), Some(true));
}

#[tokio::test]
async fn disconnect_is_acked_then_a_new_ticket_serves_the_next_message() {
    let (fake, client) = connected().await;
    let disconnect = fake.disconnect().pop().unwrap();
    fake.wait_acked(&disconnect, DEADLINE).await.unwrap();
    fake.wait_until("a second connection", DEADLINE, |f| {
        let conns = f.connections();
        conns.len() == 2 && !conns[0].open && conns[1].open
    })
    .await
    .unwrap();
    assert_eq!(fake.tickets_issued(), 2);
    let conns = fake.connections();
    assert_ne!(conns[0].ticket, conns[1].ticket);
    let pushed = fake.push(&Message::p2p_text("staff-2", "after").to_json());
    let ack = fake.wait_acked(&pushed.message_id, DEADLINE).await.unwrap();
    assert_eq!(ack.connection, 2);
    assert_eq!(client.seen.log(), ["message:after"]);
}

#[tokio::test]
async fn a_lost_connection_is_opened_again() {
    let (fake, client) = connected().await;
    fake.close_connections();
    fake.wait_until("a second connection", DEADLINE, |f| {
        f.connections().len() == 2 && f.open_connections() == 1
    })
    .await
    .unwrap();
    let pushed = fake.push(&Message::p2p_text("staff-2", "again").to_json());
    fake.wait_acked(&pushed.message_id, DEADLINE).await.unwrap();
    wait_log(&client, &fake, "message:again").await;
}

#[tokio::test]
async fn a_message_not_admitted_is_acked_500_and_comes_again() {
    let (fake, client) = connected().await;
    fake.set_redeliver_after(Some(Duration::from_millis(20)));
    client.seen.verdicts.lock().unwrap().push(Verdict::Retry);
    let pushed = fake.push(&Message::p2p_text("staff-3", "busy").to_json());
    fake.wait_acked(&pushed.message_id, DEADLINE).await.unwrap();
    // (A slow machine may see one more delivery before the 200 lands; never fewer.)
    let codes: Vec<Option<i64>> = fake.acks().iter().map(|a| a.code).collect();
    assert_eq!(codes[..2], [Some(500), Some(200)]);
    assert_eq!(client.seen.log()[..2], ["message:busy", "message:busy"]);
}

#[tokio::test]
async fn malformed_frames_are_counted_and_acked_as_errors_without_breaking_the_connection() {
    let (fake, client) = connected().await;
    let frame = |kind: &str, topic: &str, id: &str, data: Value| {
        json!({"specVersion": "1.0", "type": kind, "data": data,
               "headers": {"messageId": id, "topic": topic, "contentType": "application/json"}})
        .to_string()
    };
    assert!(fake.push_raw("not json at all"));
    assert!(fake.push_raw(&json!({"type": 7, "headers": {"messageId": "m-type"}}).to_string()));
    assert!(fake.push_raw(&frame("WEIRD", "x", "m-weird", json!("{}"))));
    assert!(fake.push_raw(&frame(
        "CALLBACK",
        "/v1.0/card/instances/callback",
        "m-card",
        json!("{}")
    )));
    assert!(fake.push_raw(&frame("EVENT", "chat_update", "m-event", json!("{}"))));
    assert!(fake.push_raw(&frame(
        "CALLBACK",
        TOPIC_BOT_MESSAGE,
        "m-nodata",
        Value::Null
    )));
    assert!(fake.push_raw(&frame("CALLBACK", TOPIC_BOT_MESSAGE, "", json!("{}"))));
    let huge = "x".repeat(MAX_FRAME_BYTES + 1);
    assert!(fake.push_raw(&frame("CALLBACK", TOPIC_BOT_MESSAGE, "m-huge", json!(huge))));
    // The connection still serves.
    let pushed = fake.push(&Message::p2p_text("staff-4", "still here").to_json());
    fake.wait_acked(&pushed.message_id, DEADLINE).await.unwrap();
    let code_of = |id: &str| {
        fake.acks()
            .iter()
            .find(|a| a.message_id == id)
            .and_then(|a| a.code)
    };
    assert_eq!(code_of("m-type"), Some(400));
    assert_eq!(code_of("m-weird"), Some(400));
    assert_eq!(code_of("m-card"), Some(404));
    assert_eq!(code_of("m-event"), Some(404));
    assert_eq!(code_of("m-nodata"), Some(400));
    assert_eq!(code_of("m-huge"), None, "dropped unread");
    assert_eq!(
        client.seen.log(),
        [
            "dropped:Unreadable",
            "dropped:Unreadable",
            "dropped:UnknownType",
            "dropped:Unreadable",
            "dropped:Unreadable",
            "dropped:TooLarge",
            "message:still here",
        ]
    );
    assert_eq!(fake.connections().len(), 1);
    assert_eq!(fake.bad_frames(), 0, "every ack was well-formed");
}

#[tokio::test]
async fn wrong_credentials_end_run_with_the_refusal() {
    let fake = FakeDingTalk::start().await.unwrap();
    let client = spawn_client(fake.api_url(), "wrong-secret", quick());
    let error = client.task.finished().await.unwrap_err();
    let StreamError::Refused { status, code } = &error;
    assert_eq!(
        (*status, code.as_str()),
        (400, im_bridge_fakes::dingtalk::code::INVALID_CLIENT)
    );
    assert!(!error.to_string().contains("wrong-secret"));
    assert!(fake.connections().is_empty());
}

#[tokio::test]
async fn failures_to_open_are_retried() {
    let fake = FakeDingTalk::start().await.unwrap();
    fake.fail("open", 2, im_bridge_fakes::dingtalk::Failure::Http(503));
    let _client = spawn_client(fake.api_url(), CLIENT_SECRET, quick());
    fake.wait_connected(1, DEADLINE).await.unwrap();
    assert_eq!(fake.calls_to("open").len(), 3);
}

/// A `connections/open` whose socket accepts and then never reads (so never answers a
/// ping); each accepted socket is reported on the channel.
async fn silent_server() -> (String, tokio::sync::mpsc::Receiver<()>) {
    let ws = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let ws_addr = ws.local_addr().unwrap();
    let (accepted, sockets) = tokio::sync::mpsc::channel(8);
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((stream, _)) = ws.accept().await {
            if let Ok(socket) = tokio_tungstenite::accept_async(stream).await {
                held.push(socket);
                let _ = accepted.send(()).await;
            }
        }
    });
    let endpoint = format!("ws://{ws_addr}/connect");
    let app = axum::Router::new().route(
        OPEN_PATH,
        axum::routing::post(move || {
            let endpoint = endpoint.clone();
            async move { axum::Json(json!({"endpoint": endpoint, "ticket": "t"})) }
        }),
    );
    (fixtures::serve(app).await, sockets)
}

#[tokio::test]
async fn an_unanswered_keepalive_ping_counts_as_a_lost_connection() {
    let (api_url, mut sockets) = silent_server().await;
    let timers = Timers {
        keepalive: Duration::from_millis(30),
        pong_timeout: Duration::from_millis(30),
    };
    let client = spawn_client(api_url, CLIENT_SECRET, timers);
    for n in 1..=2 {
        tokio::time::timeout(DEADLINE, sockets.recv())
            .await
            .unwrap_or_else(|_| panic!("no connection {n} before the deadline"));
    }
    assert_eq!(client.task.stop().await, Ok(()));
}

/// Collects formatted log lines.
#[derive(Clone, Default)]
struct Logs(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Logs {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[tokio::test]
async fn logs_name_no_secret_ticket_or_message_text() {
    let logs = Logs::default();
    let writer = logs.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::TRACE)
        .with_writer(move || writer.clone())
        .finish();
    // A current-thread runtime: every task of the test logs on this thread.
    let _guard = tracing::subscriber::set_default(subscriber);
    let (fake, client) = connected().await;
    let pushed = fake.push(&Message::p2p_text("staff-5", "my private words").to_json());
    fake.wait_acked(&pushed.message_id, DEADLINE).await.unwrap();
    assert!(fake.push_raw(
        &json!({"type": 1, "data": "my private words", "headers": {"messageId": "m"}}).to_string()
    ));
    let ping = fake.ping().pop().unwrap();
    fake.wait_acked(&ping, DEADLINE).await.unwrap();
    let disconnect = fake.disconnect().pop().unwrap();
    fake.wait_acked(&disconnect, DEADLINE).await.unwrap();
    fake.wait_connected(1, DEADLINE).await.unwrap();
    fake.wait_until("two tickets", DEADLINE, |f| f.connections().len() == 2)
        .await
        .unwrap();
    client.task.stop().await.unwrap();
    let text = String::from_utf8(logs.0.lock().unwrap().clone()).unwrap();
    assert!(
        text.contains("Connected to DingTalk stream mode."),
        "{text}"
    );
    for conn in fake.connections() {
        assert!(!text.contains(&conn.ticket), "the ticket leaked: {text}");
        let encoded = conn.ticket.replace('+', "%2B").replace('/', "%2F");
        assert!(!text.contains(&encoded), "the ticket leaked: {text}");
    }
    assert!(!text.contains(CLIENT_SECRET), "{text}");
    assert!(!text.contains("my private words"), "{text}");
}

#[test]
fn the_backoff_doubles_from_one_second_to_a_minute() {
    let mut backoff = RECONNECT_BACKOFF;
    let first = backoff.next_wait();
    assert!(first >= Duration::from_secs(1) && first < Duration::from_secs(2));
    for _ in 0..10 {
        backoff.next_wait();
    }
    let late = backoff.next_wait();
    assert!(late >= Duration::from_secs(60) && late < Duration::from_secs(61));
}
