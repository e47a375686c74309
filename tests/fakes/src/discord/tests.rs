//! The fake's own checks, with a plain WebSocket client and reqwest.

use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;

use super::*;

const DEADLINE: Duration = Duration::from_secs(10);

type Ws =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

async fn next_json(ws: &mut Ws) -> Value {
    loop {
        match tokio::time::timeout(DEADLINE, ws.next()).await {
            Ok(Some(Ok(Message::Text(t)))) => return serde_json::from_str(t.as_str()).unwrap(),
            Ok(Some(Ok(Message::Close(f)))) => {
                return json!({"close": f.map(|f| u16::from(f.code))});
            }
            Ok(Some(Ok(_))) => continue,
            other => panic!("no frame: {other:?}"),
        }
    }
}

async fn send(ws: &mut Ws, v: Value) {
    ws.send(Message::Text(v.to_string().into())).await.unwrap();
}

async fn connect(url: &str) -> Ws {
    tokio_tungstenite::connect_async(url).await.unwrap().0
}

/// A connection at the discovery URL that read HELLO and sent IDENTIFY with `token` and
/// `intents`.
async fn identify(fake: &FakeDiscord, token: &str, intents: u64) -> Ws {
    let mut ws = connect(&fake.gateway_url()).await;
    next_json(&mut ws).await;
    let identify = json!({"op": 2, "d": {"token": token, "intents": intents}});
    send(&mut ws, identify).await;
    ws
}

/// A new session: identified at the discovery URL, READY and GUILD_CREATE read.
async fn identified(fake: &FakeDiscord) -> Ws {
    let mut ws = identify(fake, TOKEN, INTENTS).await;
    assert_eq!(next_json(&mut ws).await["t"], "READY");
    assert_eq!(next_json(&mut ws).await["t"], "GUILD_CREATE");
    ws
}

/// The JSON a bot's `GET` of `url` answers.
async fn get_json(http: &reqwest::Client, url: &str) -> Value {
    let answer = http
        .get(url)
        .header("Authorization", format!("Bot {TOKEN}"));
    answer.send().await.unwrap().json().await.unwrap()
}

#[tokio::test]
async fn identify_ready_resume_replays_what_was_missed() {
    let fake = FakeDiscord::start().await.unwrap();
    let http = reqwest::Client::new();
    let gw = get_json(&http, &format!("{}/api/v10/gateway/bot", fake.api_url())).await;
    let url = gw["url"].as_str().unwrap().to_owned();
    assert_eq!(url, fake.gateway_url());
    let mut ws = connect(&format!("{url}?v=10&encoding=json")).await;
    assert_eq!(next_json(&mut ws).await["op"], 10);
    send(
        &mut ws,
        json!({"op": 2, "d": {"token": TOKEN, "intents": INTENTS}}),
    )
    .await;
    let ready = next_json(&mut ws).await;
    assert_eq!(ready["t"], "READY");
    assert_eq!(ready["d"]["user"]["id"], BOT_ID);
    let session = ready["d"]["session_id"].as_str().unwrap().to_owned();
    let resume_url = ready["d"]["resume_gateway_url"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(next_json(&mut ws).await["t"], "GUILD_CREATE");
    send(&mut ws, json!({"op": 1, "d": 2})).await;
    assert_eq!(next_json(&mut ws).await["op"], 11);
    let first = fake.push(&Event::guild("10", "20", "hello"));
    let got = next_json(&mut ws).await;
    assert_eq!(
        (got["t"].as_str(), got["s"].as_u64()),
        (Some("MESSAGE_CREATE"), first.seq)
    );
    drop(ws);
    fake.wait_until("closed", DEADLINE, |f| f.open_connections() == 0)
        .await
        .unwrap();
    let missed = fake.push(&Event::dm("11", "20", "while away"));
    let mut ws = connect(&format!("{resume_url}?v=10&encoding=json")).await;
    assert_eq!(next_json(&mut ws).await["op"], 10);
    send(
        &mut ws,
        json!({"op": 6, "d": {"token": TOKEN, "session_id": session, "seq": first.seq}}),
    )
    .await;
    let replay = next_json(&mut ws).await;
    assert_eq!(replay["d"]["content"], "while away");
    assert_eq!(replay["s"].as_u64(), missed.seq);
    assert_eq!(next_json(&mut ws).await["t"], "RESUMED");
    let r = &fake.resumes()[0];
    assert!(r.accepted && r.path.starts_with("/resume"), "{r:?}");
    fake.send_invalid_session(false);
    assert_eq!(next_json(&mut ws).await, json!({"op": 9, "d": false}));
    // With the session ended and none current, an event reaches no session: a new one
    // gets only what happens after its READY. The history has it.
    let gap = fake.push(&Event::dm("11", "20", "in the gap"));
    assert_eq!(gap.seq, None);
    let mut ws = identified(&fake).await;
    fake.push(&Event::dm("11", "20", "after ready"));
    assert_eq!(next_json(&mut ws).await["d"]["content"], "after ready");
    let history = get_json(
        &http,
        &format!("{}/api/v10/channels/11/messages", fake.api_url()),
    )
    .await;
    assert_eq!(history[1]["content"], "in the gap", "{history}");
}

#[tokio::test]
async fn a_wrong_token_or_missing_intents_are_closed() {
    let fake = FakeDiscord::start().await.unwrap();
    let mut ws = identify(&fake, "nope", INTENTS).await;
    assert_eq!(next_json(&mut ws).await, json!({"close": 4004}));
    let mut ws = identify(&fake, TOKEN, 1).await;
    assert_eq!(next_json(&mut ws).await, json!({"close": 4014}));
}

#[tokio::test]
async fn a_revoked_token_is_refused_on_every_connection_and_call() {
    let fake = FakeDiscord::start().await.unwrap();
    let mut open = identified(&fake).await;
    fake.revoke_token();
    assert_eq!(next_json(&mut open).await, json!({"close": 4004}));
    let mut again = identify(&fake, TOKEN, INTENTS).await;
    assert_eq!(next_json(&mut again).await, json!({"close": 4004}));
    let answer = reqwest::Client::new()
        .get(format!("{}/api/v10/gateway/bot", fake.api_url()))
        .header("Authorization", format!("Bot {TOKEN}"))
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 401);
}

#[tokio::test]
async fn messages_keep_the_limit_record_mentions_and_honour_scripted_429s() {
    let fake = FakeDiscord::start().await.unwrap();
    // Channel 5 exists: a user wrote in it.
    fake.push(&Event::guild("5", "20", "hello bot"));
    let http = reqwest::Client::new();
    let post = |body: Value| {
        http.post(format!("{}/api/v10/channels/5/messages", fake.api_url()))
            .header("Authorization", format!("Bot {TOKEN}"))
            .json(&body)
            .send()
    };
    let long = "x".repeat(MAX_CONTENT + 1);
    assert_eq!(post(json!({"content": long})).await.unwrap().status(), 400);
    let ok: Value = post(json!({"content": "@everyone hi", "allowed_mentions": {"parse": []}}))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let id = ok["id"].as_str().unwrap();
    assert_eq!(fake.sent()[0].allowed_mentions, json!({"parse": []}));
    let edit = http
        .patch(format!(
            "{}/api/v10/channels/5/messages/{id}",
            fake.api_url()
        ))
        .header("Authorization", format!("Bot {TOKEN}"))
        .json(&json!({"content": "edited"}))
        .send()
        .await
        .unwrap();
    assert_eq!(edit.status(), 200);
    assert_eq!(fake.sent()[0].content, "edited");
    fake.fail_next(
        "create_message",
        Failure::RateLimited {
            retry_after: 30.0,
            global: false,
        },
    );
    let limited = post(json!({"content": "a"})).await.unwrap();
    assert_eq!(limited.status(), 429);
    assert_eq!(limited.headers()["x-ratelimit-remaining"], "0");
    assert_eq!(limited.headers()["x-ratelimit-reset-after"], "30.000");
    let body: Value = limited.json().await.unwrap();
    assert_eq!(body["retry_after"], 30.0);
    assert_eq!(post(json!({"content": "b"})).await.unwrap().status(), 429);
    assert_eq!(fake.early_calls(), 1);
    let unauthorized = http
        .post(format!("{}/api/v10/channels/5/typing", fake.api_url()))
        .send()
        .await
        .unwrap();
    assert_eq!(unauthorized.status(), 401);
    let react = http
        .put(format!(
            "{}/api/v10/channels/5/messages/{id}/reactions/%E2%9C%85/@me",
            fake.api_url()
        ))
        .header("Authorization", format!("Bot {TOKEN}"))
        .send()
        .await
        .unwrap();
    assert_eq!(react.status(), 204);
    assert_eq!(fake.reactions()[0].emoji, "✅");
}

/// A fake, a client, the bot's `Authorization` and the REST base.
async fn rest_fake() -> (FakeDiscord, reqwest::Client, String, String) {
    let fake = FakeDiscord::start().await.unwrap();
    let base = format!("{}/api/v10", fake.api_url());
    (fake, reqwest::Client::new(), format!("Bot {TOKEN}"), base)
}

#[tokio::test]
async fn threads_channels_uploads_and_events_before_ready() {
    let (fake, http, auth, base) = rest_fake().await;
    let posted = fake.push(&Event::guild("5", "20", "start here"));
    let thread: Value = http
        .post(format!(
            "{base}/channels/5/messages/{}/threads",
            posted.message_id
        ))
        .header("Authorization", &auth)
        .json(&json!({"name": "deerflow-x-77", "auto_archive_duration": 1440}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        (thread["type"].as_u64(), thread["parent_id"].as_str()),
        (Some(11), Some("5"))
    );
    let again = http
        .post(format!(
            "{base}/channels/5/messages/{}/threads",
            posted.message_id
        ))
        .header("Authorization", &auth)
        .json(&json!({"name": "again"}))
        .send()
        .await
        .unwrap();
    assert_eq!(again.status(), 400, "one thread per message");
    let id = thread["id"].as_str().unwrap();
    let channel = get_json(&http, &format!("{base}/channels/{id}")).await;
    assert_eq!(channel["type"], 11);
    // A channel the fake does not know is Discord's Unknown Channel.
    let unknown = http
        .get(format!("{base}/channels/77"))
        .header("Authorization", &auth)
        .send()
        .await
        .unwrap();
    assert_eq!(unknown.status(), 404);
    let unknown: Value = unknown.json().await.unwrap();
    assert_eq!(unknown["code"], code::UNKNOWN_CHANNEL);
    let form = reqwest::multipart::Form::new()
        .text(
            "payload_json",
            json!({"content": "", "allowed_mentions": {"parse": []}}).to_string(),
        )
        .part(
            "files[0]",
            reqwest::multipart::Part::bytes(b"abc".to_vec()).file_name("a.txt"),
        );
    let up = http
        .post(format!("{base}/channels/5/messages"))
        .header("Authorization", &auth)
        .multipart(form)
        .send()
        .await
        .unwrap();
    assert_eq!(up.status(), 200);
    let sent = &fake.sent_to("5")[0];
    assert_eq!(
        (
            sent.uploads[0].filename.as_str(),
            sent.uploads[0].bytes.as_slice()
        ),
        ("a.txt", &b"abc"[..])
    );
    // Events posted before any session reach none, not even the first: READY's session
    // gets only what happens after it.
    let early = fake.push(&Event::guild("5", "9", "early"));
    assert_eq!((posted.seq, early.seq), (None, None));
    let mut ws = identified(&fake).await;
    fake.push(&Event::guild("5", "9", "after ready"));
    assert_eq!(next_json(&mut ws).await["d"]["content"], "after ready");
    // Message Content disabled in the portal: 4014.
    fake.disable_message_content();
    let mut ws = identify(&fake, TOKEN, INTENTS).await;
    assert_eq!(next_json(&mut ws).await, json!({"close": 4014}));
}

#[tokio::test]
async fn a_drop_window_drops_each_new_connection_before_hello_until_it_ends() {
    let fake = FakeDiscord::start().await.unwrap();
    fake.drop_connections_for(Duration::from_secs(3600));
    for _ in 0..2 {
        let mut ws = connect(&fake.gateway_url()).await;
        let ended = tokio::time::timeout(DEADLINE, ws.next()).await.unwrap();
        assert!(
            !matches!(ended, Some(Ok(Message::Text(_) | Message::Binary(_)))),
            "{ended:?}"
        );
    }
    assert_eq!(fake.dropped_connections(), 2);
    assert!(fake.connections().is_empty(), "{:?}", fake.connections());
    fake.drop_connections_for(Duration::ZERO);
    let mut ws = connect(&fake.gateway_url()).await;
    assert_eq!(next_json(&mut ws).await["op"], 10, "HELLO again");
    assert_eq!(fake.dropped_connections(), 2);
}

#[tokio::test]
async fn threads_start_only_from_a_message_in_a_guild_text_channel() {
    let (fake, http, auth, base) = rest_fake().await;
    let posted = fake.push(&Event::guild("5", "20", "start here"));
    let from = |channel: &str, message: &str| {
        http.post(format!(
            "{base}/channels/{channel}/messages/{message}/threads"
        ))
        .header("Authorization", &auth)
        .json(&json!({"name": "a thread"}))
    };
    // Only from a message there, only in a guild text channel.
    let refused = |response: reqwest::Response| async move {
        let status = response.status().as_u16();
        let body: Value = response.json().await.unwrap();
        (status, body["code"].as_i64().unwrap())
    };
    let unknown_channel = from("6", &posted.message_id).send().await.unwrap();
    assert_eq!(refused(unknown_channel).await, (404, code::UNKNOWN_CHANNEL));
    let unknown_message = from("5", "77").send().await.unwrap();
    assert_eq!(refused(unknown_message).await, (404, code::UNKNOWN_MESSAGE));
    let dm = fake.push(&Event::dm("7", "20", "in a dm"));
    let in_dm = from("7", &dm.message_id).send().await.unwrap();
    assert_eq!(refused(in_dm).await, (400, code::WRONG_CHANNEL_TYPE));
    fake.add_thread_of("8", "5", "20");
    let inside = fake.push(&Event::in_thread("8", "20", "in a thread"));
    let in_thread = from("8", &inside.message_id).send().await.unwrap();
    assert_eq!(refused(in_thread).await, (400, code::WRONG_CHANNEL_TYPE));
    let started = from("5", &posted.message_id).send().await.unwrap();
    assert_eq!(started.status(), 200);
}

/// No route under `/channels/{id}` serves a channel the fake does not know: each answers
/// 404 with code 10003, as Discord does, and nothing is created in it.
#[tokio::test]
async fn every_channel_route_refuses_a_channel_it_does_not_know() {
    let (fake, http, auth, base) = rest_fake().await;
    let posted = fake.push(&Event::guild("5", "20", "a known channel"));
    let id = &posted.message_id;
    let unknown = [
        http.get(format!("{base}/channels/77")),
        http.get(format!("{base}/channels/77/messages")),
        http.post(format!("{base}/channels/77/messages"))
            .json(&json!({"content": "hello"})),
        http.patch(format!("{base}/channels/77/messages/{id}"))
            .json(&json!({"content": "edited"})),
        http.post(format!("{base}/channels/77/messages/{id}/threads"))
            .json(&json!({"name": "a thread"})),
        http.post(format!("{base}/channels/77/typing")),
        http.put(format!(
            "{base}/channels/77/messages/{id}/reactions/%F0%9F%91%80/@me"
        )),
    ];
    for request in unknown {
        let response = request.header("Authorization", &auth).send().await.unwrap();
        let status = response.status().as_u16();
        let body: Value = response.json().await.unwrap();
        assert_eq!(
            (status, body["code"].as_i64()),
            (404, Some(code::UNKNOWN_CHANNEL))
        );
    }
    assert!(fake.sent_to("77").is_empty(), "nothing created there");
    assert!(fake.typing().is_empty() && fake.reactions().is_empty());
    // The known channel still takes them.
    let known = http
        .post(format!("{base}/channels/5/messages"))
        .header("Authorization", &auth)
        .json(&json!({"content": "hello"}))
        .send()
        .await
        .unwrap();
    assert_eq!(known.status(), 200);
}

/// Each connection is held to the heartbeat interval of its own HELLO: one that heartbeats
/// in time stays, one that sends none within its interval and the grace is closed with
/// 4009 (Session timed out) and its session ended, so a RESUME of it is refused.
#[tokio::test]
async fn a_connection_is_timed_out_at_its_own_hellos_interval() {
    let fake = FakeDiscord::start().await.unwrap();
    fake.set_heartbeat_interval(100);
    let mut ws = identified(&fake).await;
    let session = fake.connections()[0].session.clone().unwrap();
    let hello = |f: &FakeDiscord, id: usize| f.connections()[id].heartbeat_interval_ms;
    assert_eq!(hello(&fake, 0), 100);
    // A later connection's HELLO gives the interval set since.
    fake.set_heartbeat_interval(60_000);
    let mut kept = identified(&fake).await;
    assert_eq!(hello(&fake, 1), 60_000);
    assert_eq!(next_json(&mut ws).await, json!({"close": 4009}));
    fake.wait_until("the first closed", DEADLINE, |f| !f.connections()[0].open)
        .await
        .unwrap();
    assert!(fake.connections()[0].timed_out);
    assert!(!fake.connections()[1].timed_out, "its interval is a minute");
    send(&mut kept, json!({"op": 1, "d": null})).await;
    assert_eq!(next_json(&mut kept).await["op"], 11);
    // The timed-out session cannot be resumed.
    let mut ws = connect(&format!("{}?v=10", fake.gateway_url())).await;
    assert_eq!(next_json(&mut ws).await["op"], 10);
    send(
        &mut ws,
        json!({"op": 6, "d": {"token": TOKEN, "session_id": session, "seq": 1}}),
    )
    .await;
    assert_eq!(next_json(&mut ws).await, json!({"op": 9, "d": false}));
}
