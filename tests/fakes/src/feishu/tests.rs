//! The fake driven through its sockets, as the adapter will drive it: discovery, the
//! WebSocket (pings, pushes, splits, acks, re-pushes, cluster mode, refusals, bad frames,
//! dropped connections)
//! and the REST edge (tokens, replies, reactions, resources, uploads, scripted failures).

use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;

use super::*;

const WAIT: Duration = Duration::from_secs(5);

type Socket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

async fn discover(fake: &FakeFeishu) -> Value {
    reqwest::Client::new()
        .post(format!("{}/callback/ws/endpoint", fake.domain()))
        .json(&json!({"AppID": APP_ID, "AppSecret": APP_SECRET}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

async fn connect(fake: &FakeFeishu) -> Socket {
    let url = discover(fake).await["data"]["URL"]
        .as_str()
        .unwrap()
        .to_owned();
    tokio_tungstenite::connect_async(url).await.unwrap().0
}

async fn next_frame(socket: &mut Socket) -> Frame {
    loop {
        let message = tokio::time::timeout(WAIT, socket.next())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        if let Message::Binary(bytes) = message {
            return Frame::decode_bytes(&bytes).unwrap();
        }
    }
}

/// Acks `frame` as the SDK does: the same frame back, `{"code": 200}`, a `biz_rt` header.
async fn ack(socket: &mut Socket, mut frame: Frame, code: i64) {
    frame.push_header("biz_rt", "3");
    frame.payload = Some(
        json!({"code": code, "headers": null, "data": null})
            .to_string()
            .into_bytes(),
    );
    socket
        .send(Message::Binary(frame.encode_to_vec().into()))
        .await
        .unwrap();
}

#[tokio::test]
async fn discovery_ping_push_and_ack() {
    let fake = FakeFeishu::start().await.unwrap();
    let endpoint = discover(&fake).await;
    assert_eq!(endpoint["code"], 0);
    assert_eq!(endpoint["data"]["ClientConfig"]["ReconnectCount"], -1);
    assert_eq!(endpoint["data"]["ClientConfig"]["PingInterval"], 5);
    let url = endpoint["data"]["URL"].as_str().unwrap();
    assert!(url.starts_with(&format!("ws://{}/ws?device_id=", fake.addr())));
    assert!(url.ends_with("&service_id=1"));

    let mut socket = connect(&fake).await;
    fake.wait_connected(1, WAIT).await.unwrap();
    fake.set_pong_config(Some(ClientConfig {
        ping_interval: 2,
        ..ClientConfig::default()
    }));
    let mut ping = Frame::new(METHOD_CONTROL, &[("type", "ping")]);
    ping.service = 1;
    socket
        .send(Message::Binary(ping.encode_to_vec().into()))
        .await
        .unwrap();
    let pong = next_frame(&mut socket).await;
    assert_eq!(
        (pong.method, pong.header("type")),
        (METHOD_CONTROL, Some("pong"))
    );
    let config: Value = serde_json::from_slice(&pong.payload.unwrap()).unwrap();
    assert_eq!(config["PingInterval"], 2);
    assert_eq!(fake.connections()[0].pings, 1);

    let event = Event::text("oc_1", "ou_u", "hello").to_json();
    let pushed = fake.push_event(&event);
    let frame = next_frame(&mut socket).await;
    assert_eq!(frame.method, METHOD_DATA);
    assert_eq!(frame.header("type"), Some("event"));
    assert_eq!(frame.header("message_id"), Some(pushed.frame_id.as_str()));
    assert_eq!(
        (frame.header("sum"), frame.header("seq")),
        (Some("1"), Some("0"))
    );
    assert!(frame.header("trace_id").is_some());
    let got: Value = serde_json::from_slice(frame.payload.as_deref().unwrap()).unwrap();
    assert_eq!(got, event);
    ack(&mut socket, frame, 200).await;
    let acked = fake.wait_acked(&pushed.event_id, WAIT).await.unwrap();
    assert_eq!(acked.biz_rt.as_deref(), Some("3"));
    assert_eq!(acked.frame_id, pushed.frame_id);
    assert_eq!(
        pushed.message_id.as_deref(),
        event["event"]["message"]["message_id"].as_str()
    );
}

#[tokio::test]
async fn a_split_push_arrives_in_sum_frames_that_join_to_the_event() {
    let fake = FakeFeishu::start().await.unwrap();
    let event = Event::text("oc_1", "ou_u", &"x".repeat(300)).to_json();
    // Held until a client connects.
    let pushed = fake.push_split(&event, 4);
    let mut socket = connect(&fake).await;
    let mut parts = Vec::new();
    for _ in 0..4 {
        let f = next_frame(&mut socket).await;
        assert_eq!(f.header("sum"), Some("4"));
        assert_eq!(f.header("message_id"), Some(pushed.frame_id.as_str()));
        parts.push(f);
    }
    parts.sort_by_key(|f| f.header("seq").unwrap().parse::<usize>().unwrap());
    let joined: Vec<u8> = parts
        .iter()
        .flat_map(|f| f.payload.clone().unwrap())
        .collect();
    assert_eq!(serde_json::from_slice::<Value>(&joined).unwrap(), event);
}

#[tokio::test]
async fn an_unacked_event_is_pushed_again_until_acked() {
    let fake = FakeFeishu::start().await.unwrap();
    fake.set_repush_after(Some(Duration::from_millis(100)));
    let mut socket = connect(&fake).await;
    fake.wait_connected(1, WAIT).await.unwrap();
    let pushed = fake.push_event(&Event::text("oc_1", "ou_u", "hi").to_json());
    let first = next_frame(&mut socket).await;
    // A handler error (500) is not an ack: the event comes again, under a new frame id.
    ack(&mut socket, first.clone(), 500).await;
    let second = next_frame(&mut socket).await;
    assert_ne!(second.header("message_id"), first.header("message_id"));
    assert_eq!(second.payload, first.payload);
    ack(&mut socket, second, 200).await;
    fake.wait_acked(&pushed.event_id, WAIT).await.unwrap();
    let deliveries = fake.deliveries();
    assert_eq!(deliveries.len(), 2);
    assert_eq!(deliveries[1].attempt, 1);
    // No third push once acked.
    let quiet = tokio::time::timeout(Duration::from_millis(300), socket.next()).await;
    assert!(quiet.is_err(), "pushed again after the ack: {quiet:?}");
}

#[tokio::test]
async fn cluster_mode_refusals_server_close_and_bad_frames() {
    let fake = FakeFeishu::start().await.unwrap();
    let mut a = connect(&fake).await;
    let mut b = connect(&fake).await;
    fake.wait_connected(2, WAIT).await.unwrap();
    fake.push_event(&Event::text("oc_1", "ou_u", "1").to_json());
    fake.push_event(&Event::text("oc_1", "ou_u", "2").to_json());
    next_frame(&mut a).await;
    next_frame(&mut b).await;
    let to: Vec<u64> = fake.deliveries().iter().map(|d| d.connection).collect();
    assert_eq!(to, [1, 2], "one client per event, in turn");

    // Garbage and text are counted, not fatal.
    a.send(Message::Binary(vec![0xff, 0xff].into()))
        .await
        .unwrap();
    a.send(Message::Text("hi".into())).await.unwrap();
    fake.wait_until("two bad frames", WAIT, |f| f.bad_frames() == 2)
        .await
        .unwrap();

    fake.close_connections();
    fake.wait_until("all closed", WAIT, |f| f.open_connections() == 0)
        .await
        .unwrap();
    assert!(matches!(
        tokio::time::timeout(WAIT, a.next()).await.unwrap(),
        Some(Ok(Message::Close(_))) | None | Some(Err(_))
    ));

    fake.refuse_handshake(code::HANDSHAKE_AUTH_FAILED, Some(code::EXCEED_CONN_LIMIT));
    let url = discover(&fake).await["data"]["URL"]
        .as_str()
        .unwrap()
        .to_owned();
    let err = tokio_tungstenite::connect_async(url.clone())
        .await
        .unwrap_err();
    let tokio_tungstenite::tungstenite::Error::Http(response) = err else {
        panic!("expected an HTTP refusal, got {err:?}");
    };
    let h = response.headers();
    assert_eq!(h["handshake-status"], "514");
    assert_eq!(h["handshake-autherrcode"], "1000040350");
    assert!(h.contains_key("handshake-msg"));
    // Only the next one.
    tokio_tungstenite::connect_async(url).await.unwrap();
    assert_eq!(fake.refused_handshakes(), 1);
}

#[tokio::test]
async fn a_drop_window_drops_each_new_connection_until_it_ends() {
    let fake = FakeFeishu::start().await.unwrap();
    fake.drop_connections_for(Duration::from_secs(3600));
    for _ in 0..2 {
        let mut socket = connect(&fake).await;
        let ended = tokio::time::timeout(WAIT, socket.next()).await.unwrap();
        assert!(
            !matches!(ended, Some(Ok(Message::Binary(_) | Message::Text(_)))),
            "{ended:?}"
        );
    }
    assert_eq!(fake.dropped_connections(), 2);
    assert!(fake.connections().is_empty(), "{:?}", fake.connections());
    fake.drop_connections_for(Duration::ZERO);
    let _socket = connect(&fake).await;
    fake.wait_connected(1, WAIT).await.unwrap();
    assert_eq!(fake.dropped_connections(), 2);
}

#[tokio::test]
async fn discovery_refuses_a_wrong_secret() {
    let fake = FakeFeishu::start().await.unwrap();
    let answer: Value = reqwest::Client::new()
        .post(format!("{}/callback/ws/endpoint", fake.domain()))
        .json(&json!({"AppID": APP_ID, "AppSecret": "wrong"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(answer["code"], code::APP_SECRET_INVALID);
    // The refused call above was the first.
    fake.fail(
        "endpoint",
        Trigger::Nth(2),
        Failure::Code(code::SYSTEM_BUSY, "busy".into()),
    );
    assert_eq!(discover(&fake).await["code"], code::SYSTEM_BUSY);
    assert_eq!(discover(&fake).await["code"], 0);
}

struct Rest {
    http: reqwest::Client,
    base: String,
    token: String,
}

impl Rest {
    async fn new(fake: &FakeFeishu) -> Self {
        let http = reqwest::Client::new();
        let base = format!("{}/open-apis", fake.domain());
        let token: Value = http
            .post(format!("{base}/auth/v3/tenant_access_token/internal"))
            .json(&json!({"app_id": APP_ID, "app_secret": APP_SECRET}))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(token["code"], 0);
        let token = token["tenant_access_token"].as_str().unwrap().to_owned();
        Self { http, base, token }
    }

    async fn call(&self, method: reqwest::Method, path: &str, body: Value) -> (u16, Value) {
        let mut request = self
            .http
            .request(method, format!("{}{path}", self.base))
            .bearer_auth(&self.token);
        if !body.is_null() {
            request = request.json(&body);
        }
        let r = request.send().await.unwrap();
        (r.status().as_u16(), r.json().await.unwrap_or(Value::Null))
    }
}

#[tokio::test]
async fn replies_patches_reactions_downloads_and_uploads_over_http() {
    let fake = FakeFeishu::start().await.unwrap();
    let rest = Rest::new(&fake).await;
    let pushed = fake.push_event(&Event::text("oc_9", "ou_u", "hi").to_json());
    let user_msg = pushed.message_id.unwrap();
    let card = |t: &str| {
        json!({"config": {"wide_screen_mode": true, "update_multi": true},
            "elements": [{"tag": "markdown", "content": t}]})
        .to_string()
    };
    let (status, reply) = rest
        .call(
            reqwest::Method::POST,
            &format!("/im/v1/messages/{user_msg}/reply"),
            json!({"msg_type": "interactive", "content": card("thinking...")}),
        )
        .await;
    assert_eq!((status, reply["code"].as_i64()), (200, Some(0)));
    let card_id = reply["data"]["message_id"].as_str().unwrap().to_owned();
    let (_, patched) = rest
        .call(
            reqwest::Method::PATCH,
            &format!("/im/v1/messages/{card_id}"),
            json!({"content": card("Done")}),
        )
        .await;
    assert_eq!(patched["code"], 0);
    for emoji in ["OK", "DONE"] {
        rest.call(
            reqwest::Method::POST,
            &format!("/im/v1/messages/{user_msg}/reactions"),
            json!({"reaction_type": {"emoji_type": emoji}}),
        )
        .await;
    }
    assert_eq!(fake.reactions(&user_msg), ["OK", "DONE"]);
    let m = fake.message(&card_id).unwrap();
    assert_eq!(
        (m.chat_id.as_str(), m.reply_to.as_deref()),
        ("oc_9", Some(user_msg.as_str()))
    );
    assert_eq!(m.card_text(), "Done");
    assert_eq!(m.patches.len(), 1);

    let (_, created) = rest
        .call(
            reqwest::Method::POST,
            "/im/v1/messages?receive_id_type=chat_id",
            json!({"receive_id": "oc_9", "msg_type": "text", "content": "{\"text\":\"hey\"}"}),
        )
        .await;
    assert_eq!(created["code"], 0);
    let (_, no_type) = rest
        .call(
            reqwest::Method::POST,
            "/im/v1/messages",
            json!({"receive_id": "oc_9"}),
        )
        .await;
    assert_eq!(no_type["code"], code::INVALID_PARAMETER);

    fake.put_resource(&user_msg, "file_k", b"PDF!".to_vec(), "a.pdf");
    let download = rest
        .http
        .get(format!(
            "{}/im/v1/messages/{user_msg}/resources/file_k?type=file",
            rest.base
        ))
        .bearer_auth(&rest.token)
        .send()
        .await
        .unwrap();
    assert_eq!(download.status(), 200);
    assert!(
        download.headers()["content-disposition"]
            .to_str()
            .unwrap()
            .contains("a.pdf")
    );
    assert_eq!(download.bytes().await.unwrap().as_ref(), b"PDF!");
    let (_, missing) = rest
        .call(
            reqwest::Method::GET,
            &format!("/im/v1/messages/{user_msg}/resources/nope?type=file"),
            Value::Null,
        )
        .await;
    assert_eq!(missing["code"], code::FILE_NOT_IN_MESSAGE);

    let form = reqwest::multipart::Form::new()
        .text("file_type", "pdf")
        .text("file_name", "r.pdf")
        .part(
            "file",
            reqwest::multipart::Part::bytes(b"%PDF".to_vec()).file_name("r.pdf"),
        );
    let up: Value = rest
        .http
        .post(format!("{}/im/v1/files", rest.base))
        .bearer_auth(&rest.token)
        .multipart(form)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let file_key = up["data"]["file_key"].as_str().unwrap();
    assert_eq!(fake.uploads()[0].name, "r.pdf");
    let big = reqwest::multipart::Form::new()
        .text("image_type", "message")
        .part(
            "image",
            reqwest::multipart::Part::bytes(vec![0; MAX_IMAGE_BYTES + 1]).file_name("big.png"),
        );
    let refused: Value = rest
        .http
        .post(format!("{}/im/v1/images", rest.base))
        .bearer_auth(&rest.token)
        .multipart(big)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(refused["code"], code::FILE_TOO_LARGE);
    let (_, sent_file) = rest
        .call(
            reqwest::Method::POST,
            &format!("/im/v1/messages/{user_msg}/reply"),
            json!({"msg_type": "file", "content": json!({"file_key": file_key}).to_string()}),
        )
        .await;
    assert_eq!(sent_file["code"], 0);
    let images = fake.calls_to("images");
    assert_eq!(images[0].body["image"]["size"], MAX_IMAGE_BYTES + 1);
    assert_eq!(images[0].code, Some(code::FILE_TOO_LARGE));
}

#[tokio::test]
async fn stale_tokens_scripted_failures_and_bad_bodies_over_http() {
    let fake = FakeFeishu::start().await.unwrap();
    let mut rest = Rest::new(&fake).await;
    let user_msg = fake
        .push_event(&Event::text("oc_1", "ou_u", "hi").to_json())
        .message_id
        .unwrap();
    let path = format!("/im/v1/messages/{user_msg}/reactions");
    let ok = json!({"reaction_type": {"emoji_type": "OK"}});

    fake.make_token_stale();
    let (status, stale) = rest.call(reqwest::Method::POST, &path, ok.clone()).await;
    assert_eq!(
        (status, stale["code"].as_i64()),
        (400, Some(code::TOKEN_INVALID))
    );
    rest = Rest::new(&fake).await;
    assert_eq!(
        rest.call(reqwest::Method::POST, &path, ok.clone()).await.1["code"],
        0
    );
    assert_eq!(fake.tokens().len(), 2);

    fake.fail("reactions", Trigger::Nth(2), Failure::Http(429));
    let (status, limited) = rest.call(reqwest::Method::POST, &path, ok.clone()).await;
    assert_eq!(
        (status, limited["code"].as_i64()),
        (429, Some(code::FREQUENCY_LIMIT))
    );
    fake.fail(
        "reactions",
        Trigger::Always,
        Failure::Code(230_002, "bot not in chat".into()),
    );
    for _ in 0..2 {
        assert_eq!(
            rest.call(reqwest::Method::POST, &path, ok.clone()).await.1["code"],
            230_002
        );
    }
    fake.clear_failures();
    assert_eq!(
        rest.call(reqwest::Method::POST, &path, ok.clone()).await.1["code"],
        0
    );

    let bad = rest
        .http
        .post(format!("{}{path}", rest.base))
        .bearer_auth(&rest.token)
        .header("content-type", "application/json")
        .body("{not json")
        .send()
        .await
        .unwrap();
    assert_eq!(bad.status(), 400);
    assert_eq!(
        bad.json::<Value>().await.unwrap()["code"],
        code::BAD_REQUEST
    );
    let unknown = rest
        .call(reqwest::Method::GET, "/nowhere", Value::Null)
        .await;
    assert_eq!(unknown.0, 404);

    let calls = fake
        .wait_for("the reactions", WAIT, |c| {
            c.iter().filter(|c| c.route == "reactions").count() >= 7
        })
        .await
        .unwrap();
    let codes: Vec<Option<i64>> = calls
        .iter()
        .filter(|c| c.route == "reactions")
        .map(|c| c.code)
        .collect();
    assert_eq!(
        codes,
        [
            Some(code::TOKEN_INVALID),
            Some(0),
            Some(code::FREQUENCY_LIMIT),
            Some(230_002),
            Some(230_002),
            Some(0),
            Some(code::BAD_REQUEST)
        ]
    );
    assert_eq!(fake.reactions(&user_msg), ["OK", "OK"]);
}
