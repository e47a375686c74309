//! Socket Mode driven through its socket, as the adapter will drive it: hello, envelopes,
//! acks and redeliveries, slash commands, bad frames, disconnects and hand-overs, the
//! connection limit.

use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message as Ws;

use crate::skeleton::client::{self, Client as Socket};
use crate::slack::*;

use crate::slack::tests::{DM, USER, WAIT, api};

async fn open(fake: &FakeSlack) -> String {
    let (_, answer, _) = api(fake, "apps.connections.open", Some(APP_TOKEN), json!({})).await;
    answer["url"].as_str().unwrap().to_owned()
}

async fn connect(fake: &FakeSlack) -> Socket {
    client::connect(&open(fake).await).await
}

async fn next_frame(socket: &mut Socket) -> Value {
    client::next_json(socket, WAIT).await
}

async fn ack(socket: &mut Socket, envelope: &Value) {
    let ack = json!({"envelope_id": envelope["envelope_id"]});
    socket.send(Ws::Text(ack.to_string().into())).await.unwrap();
}

#[tokio::test]
async fn socket_mode_says_hello_and_delivers_unacked_events_again() {
    let fake = FakeSlack::start().await.unwrap();
    let url = open(&fake).await;
    assert!(
        url.starts_with(&format!("ws://{}/link/?ticket=", fake.addr())),
        "{url}"
    );
    fake.set_ack_window(Duration::from_millis(100));
    // Pushed before anyone connects: held for the first connection, after its hello.
    let pushed = fake.push_event(&Event::dm(DM, USER, "hi").to_json());
    let mut socket = tokio_tungstenite::connect_async(&url).await.unwrap().0;
    assert!(
        tokio_tungstenite::connect_async(&url).await.is_err(),
        "a ticket opens one connection"
    );
    assert_eq!(fake.refused_upgrades(), 1);
    let hello = next_frame(&mut socket).await;
    assert_eq!(
        (hello["type"].as_str(), hello["num_connections"].as_u64()),
        (Some("hello"), Some(1))
    );
    assert_eq!(hello["connection_info"]["app_id"], APP_ID);
    let first = next_frame(&mut socket).await;
    assert_eq!(first["envelope_id"], pushed.envelope_id.as_str());
    assert_eq!(
        (
            first["type"].as_str(),
            first["retry_attempt"].as_u64(),
            first["retry_reason"].as_str()
        ),
        (Some("events_api"), Some(0), Some(""))
    );
    assert_eq!(
        first["payload"]["event_id"],
        pushed.event_id.unwrap().as_str()
    );
    assert_eq!(first["accepts_response_payload"], false);
    // Not acked within the window: a new envelope, retry_attempt 1.
    let second = next_frame(&mut socket).await;
    assert_ne!(second["envelope_id"], first["envelope_id"]);
    assert_eq!(
        (
            second["retry_attempt"].as_u64(),
            second["retry_reason"].as_str()
        ),
        (Some(1), Some("timeout"))
    );
    assert_eq!(second["payload"], first["payload"]);
    ack(&mut socket, &second).await;
    let acked = fake.wait_acked(&pushed.envelope_id, WAIT).await.unwrap();
    assert!(acked.known && acked.envelope_id == second["envelope_id"]);
    let attempts: Vec<u32> = fake.deliveries().iter().map(|d| d.attempt).collect();
    assert_eq!(
        attempts[..2],
        [0, 1],
        "a slow machine may see a third, never fewer"
    );

    // Never acked: at most three retries.
    let ignored = fake.push_event(&Event::dm(DM, USER, "again").to_json());
    fake.wait_until("three retries", WAIT, |f| {
        f.deliveries()
            .iter()
            .filter(|d| d.first == ignored.envelope_id)
            .count()
            == 4
    })
    .await
    .unwrap();
    let retries: Vec<u32> = fake
        .deliveries()
        .iter()
        .filter(|d| d.first == ignored.envelope_id)
        .map(|d| d.attempt)
        .collect();
    assert_eq!(retries, [0, 1, 2, 3]);

    // A slash command is acked with a payload and never retried.
    let command = fake.push_command(&SlashCommand::new("/status", "", USER, DM));
    let envelope = loop {
        let frame = next_frame(&mut socket).await;
        if frame["envelope_id"] == command.envelope_id.as_str() {
            break frame;
        }
    };
    assert_eq!(
        (
            envelope["type"].as_str(),
            envelope["accepts_response_payload"].as_bool()
        ),
        (Some("slash_commands"), Some(true))
    );
    assert_eq!(envelope["payload"]["command"], "/status");
    let reply = json!({"envelope_id": command.envelope_id, "payload": {"text": "ok"}});
    socket
        .send(Ws::Text(reply.to_string().into()))
        .await
        .unwrap();
    let acked = fake.wait_acked(&command.envelope_id, WAIT).await.unwrap();
    assert_eq!(acked.payload, Some(json!({"text": "ok"})));
}

#[tokio::test]
async fn a_lost_ack_counts_for_nothing_and_the_payload_comes_again() {
    let fake = FakeSlack::start().await.unwrap();
    let mut socket = connect(&fake).await;
    assert_eq!(next_frame(&mut socket).await["type"], "hello");
    fake.set_ack_window(Duration::from_millis(100));
    fake.lose_acks(1);
    let pushed = fake.push_event(&Event::dm(DM, USER, "hi").to_json());
    let first = next_frame(&mut socket).await;
    ack(&mut socket, &first).await;
    let second = next_frame(&mut socket).await;
    assert_eq!(second["retry_attempt"], 1);
    assert_eq!(second["payload"], first["payload"]);
    ack(&mut socket, &second).await;
    fake.wait_until("the second ack", WAIT, |f| f.acks().len() == 2)
        .await
        .unwrap();
    let lost: Vec<bool> = fake.acks().iter().map(|a| a.lost).collect();
    assert_eq!(lost, [true, false]);
    let chain = fake
        .deliveries()
        .into_iter()
        .filter(|d| d.first == pushed.envelope_id);
    assert_eq!(chain.map(|d| d.attempt).take(2).collect::<Vec<_>>(), [0, 1]);
}

#[tokio::test]
async fn frames_that_are_no_ack_are_protocol_errors() {
    let fake = FakeSlack::start().await.unwrap();
    let mut socket = connect(&fake).await;
    next_frame(&mut socket).await;
    for frame in ["not json", r#"{"envelope":"x"}"#, r#"{"envelope_id":7}"#] {
        socket.send(Ws::Text(frame.into())).await.unwrap();
    }
    socket.send(Ws::Binary(vec![1].into())).await.unwrap();
    socket
        .send(Ws::Text(r#"{"envelope_id":"nobody"}"#.into()))
        .await
        .unwrap();
    fake.wait_until("a stray ack", WAIT, |f| !f.acks().is_empty())
        .await
        .unwrap();
    assert_eq!(fake.bad_frames(), 4);
    assert_eq!(fake.protocol_errors()[0], "not json");
    assert!(!fake.acks()[0].known);
    assert!(fake.push_raw("{broken"));
    let raw = tokio::time::timeout(WAIT, socket.next())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(raw, Ws::Text("{broken".into()));
}

#[tokio::test]
async fn a_rotation_warns_then_closes_and_the_new_connection_comes_first() {
    let fake = FakeSlack::start().await.unwrap();
    let mut old = connect(&fake).await;
    next_frame(&mut old).await;
    let warned = fake.rotate(Duration::from_millis(200));
    assert_eq!(warned, [1]);
    let warning = next_frame(&mut old).await;
    assert_eq!(
        (warning["type"].as_str(), warning["reason"].as_str()),
        (Some("disconnect"), Some("warning"))
    );
    let mut new = connect(&fake).await;
    let hello = next_frame(&mut new).await;
    assert_eq!(hello["num_connections"], 2);
    let closed = tokio::time::timeout(WAIT, old.next()).await.unwrap();
    assert!(matches!(closed, Some(Ok(Ws::Close(_))) | None));
    fake.wait_until("the old connection closed", WAIT, |f| {
        f.open_connections() == 1
    })
    .await
    .unwrap();
    assert!(fake.opened_before_closed(2, 1));
    assert!(!fake.opened_before_closed(1, 2));
    assert_eq!(fake.disconnect("refresh_requested"), [2]);
    assert_eq!(next_frame(&mut new).await["reason"], "refresh_requested");
    fake.close_connection(2);
    fake.wait_until("closed", WAIT, |f| f.open_connections() == 0)
        .await
        .unwrap();
}

#[tokio::test]
async fn at_most_ten_connections_are_open() {
    let fake = FakeSlack::start().await.unwrap();
    let mut sockets = Vec::new();
    for _ in 0..MAX_CONNECTIONS {
        sockets.push(connect(&fake).await);
    }
    fake.wait_connected(MAX_CONNECTIONS, WAIT).await.unwrap();
    let url = open(&fake).await;
    assert!(tokio_tungstenite::connect_async(url).await.is_err());
    assert_eq!(fake.refused_upgrades(), 1);
}
