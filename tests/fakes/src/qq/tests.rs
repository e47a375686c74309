//! The fake QQ against a raw client (reqwest and tungstenite), so its rules are pinned
//! without the adapter: tokens, the reply rules and their clock, the gateway's sessions,
//! replay and scripts, and webhook signatures.

use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;

use super::*;

const DEADLINE: Duration = Duration::from_secs(5);

type Ws =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

async fn token(fake: &FakeQq) -> String {
    let answer: Value = reqwest::Client::new()
        .post(format!("{}/app/getAppAccessToken", fake.token_url()))
        .json(&json!({"appId": APP_ID, "clientSecret": CLIENT_SECRET}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    answer["access_token"].as_str().unwrap().to_owned()
}

async fn post_reply(
    fake: &FakeQq,
    token: &str,
    chat: &str,
    msg_id: &str,
    seq: u64,
) -> (u16, Value) {
    let path = match chat.split_once(':') {
        Some(("group", id)) => format!("/v2/groups/{id}/messages"),
        Some((_, id)) => format!("/v2/users/{id}/messages"),
        None => unreachable!(),
    };
    let response = reqwest::Client::new()
        .post(format!("{}{path}", fake.api_url()))
        .header("Authorization", format!("QQBot {token}"))
        .header("X-Union-Appid", APP_ID)
        .json(&json!({"msg_type": 0, "content": "hi", "msg_id": msg_id, "msg_seq": seq}))
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

async fn next_json(ws: &mut Ws) -> Value {
    let wait = async {
        loop {
            match ws.next().await.expect("closed").expect("socket error") {
                Message::Text(t) => return serde_json::from_str::<Value>(t.as_str()).unwrap(),
                _ => continue,
            }
        }
    };
    tokio::time::timeout(DEADLINE, wait)
        .await
        .expect("no frame")
}

async fn send(ws: &mut Ws, value: Value) {
    ws.send(Message::Text(value.to_string().into()))
        .await
        .unwrap();
}

async fn connect(fake: &FakeQq) -> Ws {
    let (ws, _) = tokio_tungstenite::connect_async(format!("ws://{}/websocket", fake.addr()))
        .await
        .unwrap();
    ws
}

async fn identify(fake: &FakeQq, token: &str) -> (Ws, String) {
    let mut ws = connect(fake).await;
    let hello = next_json(&mut ws).await;
    assert_eq!(hello["op"], 10);
    assert_eq!(hello["d"]["heartbeat_interval"], DEFAULT_HEARTBEAT_MS);
    send(&mut ws, json!({"op": 2, "d": {"token": format!("QQBot {token}"), "intents": 1 << 25, "shard": [0, 1]}})).await;
    let ready = next_json(&mut ws).await;
    assert_eq!(
        (ready["t"].as_str(), ready["s"].as_u64()),
        (Some("READY"), Some(1))
    );
    assert_eq!(
        ready["d"]["user"],
        json!({"id": BOT_ID, "username": BOT_USERNAME, "bot": true, "status": 1})
    );
    (ws, ready["d"]["session_id"].as_str().unwrap().to_owned())
}

#[tokio::test]
async fn tokens_and_the_gateway_url() {
    let fake = FakeQq::start().await.unwrap();
    let t = token(&fake).await;
    assert_eq!(fake.tokens(), std::slice::from_ref(&t));
    fake.set_token_expires_in(60, true);
    let raw: Value = reqwest::Client::new()
        .post(format!("{}/app/getAppAccessToken", fake.token_url()))
        .json(&json!({"appId": APP_ID, "clientSecret": CLIENT_SECRET}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(raw["expires_in"], 60);
    let wrong: Value = reqwest::Client::new()
        .post(format!("{}/app/getAppAccessToken", fake.token_url()))
        .json(&json!({"appId": APP_ID, "clientSecret": "nope"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(wrong["code"], code::INVALID_CREDENTIALS);
    let gateway = |token: String| {
        let url = format!("{}/gateway", fake.api_url());
        async move {
            reqwest::Client::new()
                .get(url)
                .header("Authorization", format!("QQBot {token}"))
                .header("X-Union-Appid", APP_ID)
                .send()
                .await
                .unwrap()
        }
    };
    let answer: Value = gateway(t.clone()).await.json().await.unwrap();
    assert_eq!(answer["url"], format!("ws://{}/websocket", fake.addr()));
    assert_eq!(gateway("bogus".into()).await.status(), 401);
    // A token past its life is refused.
    fake.advance_clock(Duration::from_secs(TOKEN_EXPIRES_IN));
    assert_eq!(gateway(t).await.status(), 401);
}

#[tokio::test]
async fn replies_follow_the_passive_reply_rules() {
    let fake = FakeQq::start().await.unwrap();
    let t = token(&fake).await;
    let group = Event::group_at("G1", "M1", "hello");
    fake.push(&group);
    let chat = group.chat_id();
    for seq in 1..=5 {
        let (status, body) = post_reply(&fake, &t, &chat, group.message_id(), seq).await;
        assert_eq!(status, 200, "{body}");
        assert!(body["id"].as_str().unwrap().starts_with("ROBOT1.0_"));
    }
    let (_, body) = post_reply(&fake, &t, &chat, group.message_id(), 3).await;
    assert_eq!(body["code"], code::DUPLICATE_SEQ);
    let (_, body) = post_reply(&fake, &t, &chat, group.message_id(), 6).await;
    assert_eq!(body["code"], code::REPLY_LIMIT);
    assert_eq!(fake.replies_to(group.message_id()).len(), 5);
    let (_, body) = post_reply(&fake, &t, "group:OTHER", group.message_id(), 9).await;
    assert_eq!(body["code"], code::MSG_ID_INVALID, "another chat's message");
    // A message that answers no source is proactive, which QQ no longer serves.
    for (path, extra) in [
        ("/v2/groups/G1/messages", json!({})),
        ("/v2/users/U1/messages", json!({"is_wakeup": true})),
    ] {
        let mut body = json!({"msg_type": 0, "content": "unprompted", "msg_seq": 1});
        body.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        let response = reqwest::Client::new()
            .post(format!("{}{path}", fake.api_url()))
            .header("Authorization", format!("QQBot {t}"))
            .header("X-Union-Appid", APP_ID)
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status().as_u16(), 400);
        let answer: Value = response.json().await.unwrap();
        assert_eq!(answer["code"], code::PROACTIVE_REFUSED, "{path}");
    }
    let (status, body) = post_reply(&fake, "stale", &chat, group.message_id(), 9).await;
    assert_eq!(
        (status, body["code"].as_i64()),
        (401, Some(code::TOKEN_INVALID))
    );
    // Windows: five minutes in a group, an hour in C2C.
    let g2 = Event::group_at("G1", "M1", "again");
    let c2c = Event::c2c("U1", "hi");
    fake.push(&g2);
    fake.push(&c2c);
    fake.advance_clock(GROUP_WINDOW);
    let (_, body) = post_reply(&fake, &t, &g2.chat_id(), g2.message_id(), 1).await;
    assert_eq!(body["code"], code::REPLY_EXPIRED);
    let (status, _) = post_reply(&fake, &t, &c2c.chat_id(), c2c.message_id(), 1).await;
    assert_eq!(status, 200);
    fake.advance_clock(C2C_WINDOW);
    let (_, body) = post_reply(&fake, &t, &c2c.chat_id(), c2c.message_id(), 2).await;
    assert_eq!(body["code"], code::REPLY_EXPIRED);
    // Scripted throttling, then the rule again.
    let c2 = Event::c2c("U1", "late");
    fake.push(&c2);
    fake.fail_next("c2c_reply", Failure::Code(code::RATE_LIMITED));
    let (status, body) = post_reply(&fake, &t, &c2.chat_id(), c2.message_id(), 1).await;
    assert_eq!(
        (status, body["code"].as_i64()),
        (400, Some(code::RATE_LIMITED))
    );
    let (status, _) = post_reply(&fake, &t, &c2.chat_id(), c2.message_id(), 1).await;
    assert_eq!(status, 200);
    // Stale-token mode: the newest token is refused once and for good.
    fake.make_token_stale();
    let (status, _) = post_reply(&fake, &t, &c2.chat_id(), c2.message_id(), 2).await;
    assert_eq!(status, 401);
    let (status, _) = post_reply(&fake, &t, &c2.chat_id(), c2.message_id(), 2).await;
    assert_eq!(status, 401);
    let fresh = token(&fake).await;
    let (status, _) = post_reply(&fake, &fresh, &c2.chat_id(), c2.message_id(), 2).await;
    assert_eq!(status, 200);
}

#[tokio::test]
async fn the_gateway_identifies_dispatches_and_acks() {
    let fake = FakeQq::start().await.unwrap();
    let t = token(&fake).await;
    // Pushed before any session: it reaches none (a new session gets only what comes
    // after its READY; a RESUME only what its own session missed).
    let early = fake.push(&Event::c2c("U1", "early"));
    assert_eq!(early.seq, None);
    let (mut ws, _) = identify(&fake, &t).await;
    let pushed = fake.push(&Event::group_at("G", "M", "hi"));
    assert_eq!(pushed.seq, Some(2));
    let event = next_json(&mut ws).await;
    assert_eq!(event["s"].as_u64(), Some(2), "not the early event: {event}");
    assert_eq!(event["t"], "GROUP_AT_MESSAGE_CREATE");
    assert_eq!(event["d"]["group_openid"], "G");
    assert_eq!(event["d"]["content"], " hi");
    send(&mut ws, json!({"op": 1, "d": 2})).await;
    assert_eq!(next_json(&mut ws).await["op"], 11);
    fake.set_heartbeat_acks(false);
    send(&mut ws, json!({"op": 1, "d": null})).await;
    send(&mut ws, json!({"op": 99})).await;
    fake.wait_until("the frames", DEADLINE, |f| {
        f.heartbeats().len() == 2 && f.bad_frames() == 1
    })
    .await
    .unwrap();
    let beats = fake.heartbeats();
    assert_eq!((beats[0].seq, beats[0].acked), (Some(2), true));
    assert_eq!((beats[1].seq, beats[1].acked), (None, false));
    // A bad token or missing intents are refused with their close codes.
    for (token, intents, code) in [
        ("QQBot nope", 1 << 25, 4004u16),
        (&*format!("QQBot {t}"), 1 << 30, 4014),
    ] {
        let mut ws = connect(&fake).await;
        next_json(&mut ws).await;
        send(
            &mut ws,
            json!({"op": 2, "d": {"token": token, "intents": intents, "shard": [0, 1]}}),
        )
        .await;
        let closed = tokio::time::timeout(DEADLINE, ws.next()).await.unwrap();
        let Some(Ok(Message::Close(Some(frame)))) = closed else {
            panic!("expected a close frame, got {closed:?}");
        };
        assert_eq!(u16::from(frame.code), code);
    }
}

#[tokio::test]
async fn a_resume_replays_what_the_client_missed() {
    let fake = FakeQq::start().await.unwrap();
    let t = token(&fake).await;
    let (mut ws, session) = identify(&fake, &t).await;
    fake.push(&Event::c2c("U1", "one"));
    let one = next_json(&mut ws).await;
    assert_eq!(one["s"], 2);
    fake.drop_sockets();
    fake.wait_until("closed", DEADLINE, |f| f.open_connections() == 0)
        .await
        .unwrap();
    let missed = fake.push(&Event::c2c("U1", "two"));
    assert_eq!(missed.seq, Some(3));
    let mut ws = connect(&fake).await;
    next_json(&mut ws).await;
    send(
        &mut ws,
        json!({"op": 6, "d": {"token": format!("QQBot {t}"), "session_id": session, "seq": 2}}),
    )
    .await;
    let replayed = next_json(&mut ws).await;
    assert_eq!(
        (replayed["s"].as_u64(), replayed["id"].as_str()),
        (Some(3), Some(missed.event_id.as_str()))
    );
    let resumed = next_json(&mut ws).await;
    assert_eq!(resumed["t"], "RESUMED");
    assert!(fake.dispatched().iter().any(|d| d.replay && d.seq == 3));
    // op 9 (not resumable) ends the session: a resume is refused with op 9.
    fake.send_invalid_session(false);
    assert_eq!(next_json(&mut ws).await, json!({"op": 9, "d": false}));
    let mut again = connect(&fake).await;
    next_json(&mut again).await;
    send(
        &mut again,
        json!({"op": 6, "d": {"token": format!("QQBot {t}"), "session_id": session, "seq": 3}}),
    )
    .await;
    assert_eq!(next_json(&mut again).await, json!({"op": 9, "d": false}));
    // Scripted op 7 and close codes reach open connections.
    fake.send_reconnect();
    assert_eq!(next_json(&mut again).await["op"], 7);
    fake.close_with(4009);
    let closed = tokio::time::timeout(DEADLINE, again.next()).await.unwrap();
    assert!(matches!(closed, Some(Ok(Message::Close(Some(f)))) if u16::from(f.code) == 4009));
    assert_eq!(fake.resumes().iter().filter(|r| r.accepted).count(), 1);
}

#[tokio::test]
async fn webhook_requests_are_signed_with_the_secrets_key() {
    let fake = FakeQq::start().await.unwrap();
    let event = Event::group_at("G", "M", "hi");
    let request = fake.webhook_event(&event);
    let ts = request.header(TIMESTAMP_HEADER).unwrap().to_owned();
    let sig = request.header(SIGNATURE_HEADER).unwrap().to_owned();
    assert!(verify(CLIENT_SECRET, &ts, &request.body, &sig));
    assert!(!verify("another", &ts, &request.body, &sig));
    // Signed now by default; at the time a test picks when asked.
    let now = unix_seconds(SystemTime::now()).parse::<u64>().unwrap();
    assert!(now.abs_diff(ts.parse().unwrap()) <= 1, "{ts}");
    let at = std::time::UNIX_EPOCH + Duration::from_secs(1_483_228_800);
    let old = fake.webhook_event_at(&event, at);
    assert_eq!(old.header(TIMESTAMP_HEADER), Some("1483228800"));
    let old_sig = old.header(SIGNATURE_HEADER).unwrap();
    assert!(verify(CLIENT_SECRET, "1483228800", &old.body, old_sig));
    let tampered = request.clone().tampered();
    assert!(!verify(
        CLIENT_SECRET,
        &ts,
        &tampered.body,
        tampered.header(SIGNATURE_HEADER).unwrap()
    ));
    let body: Value = serde_json::from_slice(&request.body).unwrap();
    assert_eq!(
        (body["op"].as_u64(), body["t"].as_str()),
        (Some(0), Some("GROUP_AT_MESSAGE_CREATE"))
    );
    assert!(body.get("s").is_none());
    // The official Go SDK's vector signs the same way.
    let sdk_body = r#"{"id":"ROBOT1.0_veoihSEXDc8Q.g-6eLpNIa11bH8MisOjn-m-LKxCPntMk6exUXgcWCGpVO7L2QKTNZzjZzFFDSbiOFcqAPWyVA!!","content":"哦一下","timestamp":"2024-10-15T16:33:15+08:00","author":{"id":"675860273","user_openid":"675860273"}}"#;
    assert_eq!(
        sign("123456abcdef", "1728981195", sdk_body.as_bytes()),
        "e949b5b94ef4103df903fb031d1d16e358db3db83e79e117edd404c8508be3ce8a76d7bad1bed353194c126a1a5915b4ad8b5288c1191cc53a12acffccd82004"
    );
    let validation = validation_request("pt-1", "1725442341");
    let body: Value = serde_json::from_slice(&validation.body).unwrap();
    assert_eq!(
        body,
        json!({"op": 13, "d": {"plain_token": "pt-1", "event_ts": "1725442341"}})
    );
    let good =
        json!({"plain_token": "pt-1", "signature": sign(CLIENT_SECRET, "1725442341", b"pt-1")});
    assert!(validation_answer_ok(&good, "pt-1", "1725442341"));
    assert!(!validation_answer_ok(&good, "pt-1", "1725442342"));
    // The event's message is one the bot may reply to.
    let t = token(&fake).await;
    let (status, _) = post_reply(&fake, &t, &event.chat_id(), event.message_id(), 1).await;
    assert_eq!(status, 200);
}
