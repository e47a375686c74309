//! The fake Slack driven over HTTP and its socket, as the adapter will drive it: the
//! signature against Slack's published example, tokens, message rules, the edit pace,
//! scripted failures, uploads and the file host, streams, and Socket Mode (hello, acks,
//! redelivery, bad frames, disconnects, hand-overs).

use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message as Ws;

use super::rest::Params;
use super::*;

const WAIT: Duration = Duration::from_secs(5);
const DM: &str = "D0FAKEDM01";
const GENERAL: &str = "C0FAKEGEN1";
const USER: &str = "U0FAKEUSER";

type Socket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// Calls `method` with a JSON body; the status, the answer and its `Retry-After`.
async fn api(
    fake: &FakeSlack,
    method: &str,
    token: Option<&str>,
    body: Value,
) -> (u16, Value, Option<String>) {
    let mut request = reqwest::Client::new()
        .post(format!("{}/api/{method}", fake.api_url()))
        .header("content-type", "application/json; charset=utf-8")
        .body(body.to_string());
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    let retry_after = response
        .headers()
        .get("retry-after")
        .map(|v| v.to_str().unwrap().to_owned());
    (
        status,
        response.json().await.unwrap_or(Value::Null),
        retry_after,
    )
}

async fn bot(fake: &FakeSlack, method: &str, body: Value) -> Value {
    api(fake, method, Some(BOT_TOKEN), body).await.1
}

async fn post(fake: &FakeSlack, channel: &str, text: &str, thread_ts: Option<&str>) -> Value {
    let mut body = json!({"channel": channel, "text": text});
    if let Some(thread_ts) = thread_ts {
        body["thread_ts"] = json!(thread_ts);
    }
    bot(fake, "chat.postMessage", body).await
}

#[test]
fn the_signature_is_slacks_published_example() {
    // docs.slack.dev/authentication/verifying-requests-from-slack, the worked example.
    let body = "token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id=G8PSS9T3V&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&command=%2Fwebhook-collect&text=&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN&trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c";
    assert_eq!(
        signature(
            "8f742231b10e8888abcd99yyyzzz85a5",
            "1531420618",
            body.as_bytes()
        ),
        "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503"
    );
}

#[test]
fn signed_requests_and_their_spoiled_variants() {
    let event = Event::dm(DM, USER, "hi").to_json();
    let request = HttpRequest::event(&event);
    assert!(request.event_id().unwrap().starts_with("Ev"));
    let signed = request.signed(SIGNING_SECRET);
    let timestamp = signed.header(TIMESTAMP_HEADER).unwrap().to_owned();
    let expected = signature(SIGNING_SECRET, &timestamp, &signed.body);
    assert_eq!(signed.header(SIGNATURE_HEADER), Some(expected.as_str()));
    assert_eq!(signed.header("content-type"), Some("application/json"));
    let body: Value = serde_json::from_slice(&signed.body).unwrap();
    assert_eq!(
        (body["type"].as_str(), &body["event"]),
        (Some("event_callback"), &event)
    );

    let forged = request.forged(SIGNING_SECRET);
    let stamp = forged.header(TIMESTAMP_HEADER).unwrap();
    assert_ne!(
        forged.header(SIGNATURE_HEADER),
        Some(signature(SIGNING_SECRET, stamp, &forged.body).as_str())
    );
    let stale = request.stale(SIGNING_SECRET);
    let stamp: u64 = stale.header(TIMESTAMP_HEADER).unwrap().parse().unwrap();
    assert!(stamp + 5 * 60 < timestamp.parse::<u64>().unwrap());
    assert_eq!(
        stale.header(SIGNATURE_HEADER).unwrap(),
        signature(SIGNING_SECRET, &stamp.to_string(), &stale.body)
    );
    let retried = signed.clone().retried(2, "http_timeout");
    assert_eq!(retried.header("x-slack-retry-num"), Some("2"));
    assert_eq!(retried.header("X-Slack-Retry-Reason"), Some("http_timeout"));
    assert_ne!(signed.clone().tampered().body, signed.body);

    let command = SlashCommand::new("/goal", "ship it", USER, GENERAL);
    let form = HttpRequest::command(&command).signed(SIGNING_SECRET);
    assert_eq!(
        form.header("content-type"),
        Some("application/x-www-form-urlencoded")
    );
    let text = String::from_utf8(form.body).unwrap();
    assert!(
        text.contains("command=%2Fgoal") && text.contains("text=ship+it"),
        "{text}"
    );
    let challenge = HttpRequest::url_verification("abc");
    let challenge: Value = serde_json::from_slice(challenge.body()).unwrap();
    assert_eq!(challenge["type"], "url_verification");
}

#[test]
fn events_are_written_as_slack_writes_them() {
    let dm = Event::dm(DM, USER, "hello").to_json();
    assert_eq!(
        (dm["type"].as_str(), dm["channel_type"].as_str()),
        (Some("message"), Some("im"))
    );
    assert_eq!(dm["ts"], dm["event_ts"]);
    assert!(dm["client_msg_id"].is_string() && dm["blocks"][0]["type"] == "rich_text");
    let mention = Event::mention(GENERAL, USER, "status?").in_thread("1700000000.000100");
    let json = mention.to_json();
    assert_eq!(json["type"], "app_mention");
    assert_eq!(json["text"], format!("<@{BOT_USER_ID}> status?"));
    assert!(json.get("channel_type").is_none());
    assert_eq!(mention.thread_root(), "1700000000.000100");
    let bot = Event::bot_message(GENERAL, "B0OTHER", "beep").to_json();
    assert_eq!(
        (bot["subtype"].as_str(), bot["bot_id"].as_str()),
        (Some("bot_message"), Some("B0OTHER"))
    );
    assert!(bot.get("user").is_none());
    let echo = Event::own_echo(DM, "mine").to_json();
    assert_eq!(
        (echo["user"].as_str(), echo["bot_id"].as_str()),
        (Some(BOT_USER_ID), Some(BOT_ID))
    );
    let changed = Event::message_changed(DM, USER, "1.000001", "old", "new").to_json();
    assert_eq!(changed["subtype"], "message_changed");
    assert_eq!(
        (
            changed["message"]["ts"].as_str(),
            changed["message"]["text"].as_str()
        ),
        (Some("1.000001"), Some("new"))
    );
    assert!(next_ts() < next_ts());
}

#[tokio::test]
async fn tokens_are_checked_as_slack_checks_them() {
    let fake = FakeSlack::start().await.unwrap();
    let (status, answer, _) = api(&fake, "auth.test", None, json!({})).await;
    assert_eq!(
        (status, answer["error"].as_str()),
        (200, Some(code::NOT_AUTHED))
    );
    let (_, answer, _) = api(&fake, "auth.test", Some("xoxb-nope"), json!({})).await;
    assert_eq!(answer["error"], code::INVALID_AUTH);
    let (_, answer, _) = api(&fake, "chat.postMessage", Some(APP_TOKEN), json!({})).await;
    assert_eq!(answer["error"], code::NOT_ALLOWED_TOKEN_TYPE);
    let (_, answer, _) = api(&fake, "apps.connections.open", Some(BOT_TOKEN), json!({})).await;
    assert_eq!(answer["error"], code::NOT_ALLOWED_TOKEN_TYPE);
    let (status, answer, _) = api(&fake, "chat.nope", Some(BOT_TOKEN), json!({})).await;
    assert_eq!(
        (status, answer["error"].as_str()),
        (404, Some(code::UNKNOWN_METHOD))
    );
    let me = bot(&fake, "auth.test", json!({})).await;
    assert_eq!(
        (
            me["ok"].as_bool(),
            me["user_id"].as_str(),
            me["bot_id"].as_str()
        ),
        (Some(true), Some(BOT_USER_ID), Some(BOT_ID))
    );
    // A form body may carry the token; a JSON body cannot.
    let form = reqwest::Client::new()
        .post(format!("{}/api/auth.test", fake.api_url()))
        .form(&[("token", BOT_TOKEN)])
        .send()
        .await
        .unwrap();
    assert_eq!(form.json::<Value>().await.unwrap()["ok"], true);
    let (_, answer, _) = api(&fake, "auth.test", None, json!({"token": BOT_TOKEN})).await;
    assert_eq!(answer["error"], code::NOT_AUTHED);
    let refused = fake
        .calls_to("auth.test")
        .iter()
        .filter(|c| !c.ok())
        .count();
    assert_eq!(refused, 3);
}

#[tokio::test]
async fn messages_keep_to_channels_threads_and_the_length_limit() {
    let fake = FakeSlack::start().await.unwrap();
    assert_eq!(
        post(&fake, GENERAL, "hi", None).await["error"],
        code::CHANNEL_NOT_FOUND
    );
    let pushed = fake.push_event(&Event::mention(GENERAL, USER, "hi").to_json());
    let root = pushed.ts.unwrap();
    assert_eq!(
        post(&fake, GENERAL, " \n", None).await["error"],
        code::NO_TEXT
    );
    let long = "é".repeat(MAX_TEXT_CHARS + 1);
    assert_eq!(
        post(&fake, GENERAL, &long, None).await["error"],
        code::MSG_TOO_LONG
    );
    let full = post(&fake, GENERAL, &long[2..], Some(&root)).await;
    assert_eq!(full["ok"], true, "{full}");
    assert_eq!(
        post(&fake, GENERAL, "x", Some("yesterday")).await["error"],
        code::INVALID_THREAD_TS
    );
    assert_eq!(
        post(&fake, GENERAL, "x", Some("1.000001")).await["error"],
        code::THREAD_NOT_FOUND
    );
    let reply_ts = full["ts"].as_str().unwrap();
    assert_eq!(
        post(&fake, GENERAL, "x", Some(reply_ts)).await["error"],
        code::THREAD_NOT_FOUND,
        "a reply's ts is no thread"
    );

    let answer = post(&fake, GENERAL, "*done*", Some(&root)).await;
    assert_eq!(
        (
            answer["channel"].as_str(),
            answer["message"]["thread_ts"].as_str()
        ),
        (Some(GENERAL), Some(root.as_str()))
    );
    let ts = answer["ts"].as_str().unwrap();
    assert!(ts > reply_ts && answer["message"]["bot_id"] == BOT_ID);
    let replies = fake.thread_replies(GENERAL, &root);
    assert_eq!(
        replies
            .iter()
            .map(|m| m.text.chars().count())
            .collect::<Vec<_>>(),
        [MAX_TEXT_CHARS, 6]
    );

    fake.set_truncate_long_text(true);
    let cut = post(&fake, GENERAL, &long, None).await;
    assert_eq!(cut["warning"], "message_truncated");
    assert_eq!(
        fake.message(GENERAL, cut["ts"].as_str().unwrap())
            .unwrap()
            .text
            .chars()
            .count(),
        MAX_TEXT_CHARS
    );
}

#[tokio::test(start_paused = true)]
async fn a_message_takes_one_edit_a_second() {
    let mut slack = Slack::new();
    slack.know_channel(DM, None);
    let posted = chat::post(
        &mut slack,
        &Params(&json!({"channel": DM, "text": "Working on it"})),
    );
    let ts = posted.json_body().unwrap()["ts"]
        .as_str()
        .unwrap()
        .to_owned();
    let edit = |text: &str| json!({"channel": DM, "ts": ts, "text": text});
    let first = chat::update(&mut slack, &Params(&edit("a")));
    assert_eq!(first.status, 200);
    tokio::time::advance(Duration::from_millis(400)).await;
    let refused = chat::update(&mut slack, &Params(&edit("b")));
    assert_eq!(
        (
            refused.status,
            refused.json_body().unwrap()["error"].as_str()
        ),
        (429, Some(code::RATELIMITED))
    );
    assert_eq!(refused.headers, [("retry-after", "1".to_owned())]);
    tokio::time::advance(Duration::from_millis(600)).await;
    assert_eq!(chat::update(&mut slack, &Params(&edit("c"))).status, 200);
    assert_eq!(slack.rate_refusals, 1);
    let message = slack.message(DM, &ts).unwrap();
    assert_eq!((message.text.as_str(), message.edits.len()), ("c", 2));
    // A user's message, and one that does not exist.
    slack
        .messages
        .push(Message::new(DM, "1.000001", USER, false));
    let theirs = chat::update(
        &mut slack,
        &Params(&json!({"channel": DM, "ts": "1.000001", "text": "x"})),
    );
    assert_eq!(
        theirs.json_body().unwrap()["error"],
        code::CANT_UPDATE_MESSAGE
    );
    let none = chat::update(
        &mut slack,
        &Params(&json!({"channel": DM, "ts": "2.000002", "text": "x"})),
    );
    assert_eq!(none.json_body().unwrap()["error"], code::MESSAGE_NOT_FOUND);
}

#[tokio::test]
async fn reactions_and_scripted_failures() {
    let fake = FakeSlack::start().await.unwrap();
    let ts = fake
        .push_event(&Event::dm(DM, USER, "hi").to_json())
        .ts
        .unwrap();
    let react = |name: &str| json!({"channel": DM, "timestamp": ts, "name": name});
    assert_eq!(bot(&fake, "reactions.add", react("eyes")).await["ok"], true);
    assert_eq!(
        bot(&fake, "reactions.add", react("eyes")).await["error"],
        code::ALREADY_REACTED
    );
    assert_eq!(
        bot(&fake, "reactions.add", react(":x:")).await["error"],
        code::INVALID_NAME
    );
    assert_eq!(
        bot(&fake, "reactions.add", json!({"name": "x"})).await["error"],
        code::NO_ITEM_SPECIFIED
    );
    let missing = json!({"channel": DM, "timestamp": "1.000001", "name": "x"});
    assert_eq!(
        bot(&fake, "reactions.add", missing).await["error"],
        code::MESSAGE_NOT_FOUND
    );
    assert_eq!(fake.reactions_on(DM, &ts), ["eyes"]);

    fake.fail(
        "chat.postMessage",
        Trigger::Next,
        Failure::RateLimited { retry_after: 30 },
    );
    let (status, answer, retry_after) = api(
        &fake,
        "chat.postMessage",
        Some(BOT_TOKEN),
        json!({"channel": DM, "text": "a"}),
    )
    .await;
    assert_eq!(
        (status, answer["error"].as_str(), retry_after.as_deref()),
        (429, Some(code::RATELIMITED), Some("30"))
    );
    let (status, _, _) = api(
        &fake,
        "chat.postMessage",
        Some(BOT_TOKEN),
        json!({"channel": DM, "text": "a"}),
    )
    .await;
    assert_eq!((status, fake.early_calls()), (429, 1));
    fake.clear_failures();
    fake.fail(
        "reactions.add",
        Trigger::Times(2),
        Failure::Error("internal_error".into()),
    );
    fake.fail("auth.test", Trigger::Always, Failure::Http(503));
    assert_eq!(
        bot(&fake, "reactions.add", react("x")).await["error"],
        "internal_error"
    );
    assert_eq!(
        api(&fake, "auth.test", Some(BOT_TOKEN), json!({})).await.0,
        503
    );
    // A call refused for its token uses no failure up.
    assert_eq!(
        api(&fake, "reactions.add", None, react("x")).await.1["error"],
        code::NOT_AUTHED
    );
    assert_eq!(
        bot(&fake, "reactions.add", react("x")).await["error"],
        "internal_error"
    );
    assert_eq!(bot(&fake, "reactions.add", react("x")).await["ok"], true);
    assert_eq!(post(&fake, DM, "a", None).await["ok"], true);
}

#[tokio::test]
async fn an_upload_is_announced_posted_and_completed_into_a_thread() {
    let fake = FakeSlack::start().await.unwrap();
    let root = fake
        .push_event(&Event::dm(DM, USER, "chart please").to_json())
        .ts
        .unwrap();
    let zero = bot(
        &fake,
        "files.getUploadURLExternal",
        json!({"filename": "a.png", "length": 0}),
    )
    .await;
    assert_eq!(zero["error"], code::MISSING_ARGUMENT);
    let form = reqwest::Client::new()
        .post(format!("{}/api/files.getUploadURLExternal", fake.api_url()))
        .bearer_auth(BOT_TOKEN)
        .form(&[("filename", "chart.png"), ("length", "4")])
        .send()
        .await
        .unwrap();
    let got: Value = form.json().await.unwrap();
    let (url, file_id) = (
        got["upload_url"].as_str().unwrap(),
        got["file_id"].as_str().unwrap(),
    );
    let complete = json!({"files": [{"id": file_id, "title": "Chart"}], "channel_id": DM,
                          "thread_ts": root, "initial_comment": "here"});
    let early = bot(&fake, "files.completeUploadExternal", complete.clone()).await;
    assert_eq!(early["error"], code::FILE_NOT_FOUND, "not uploaded yet");
    let client = reqwest::Client::new();
    let wrong = client.post(url).body(vec![1, 2, 3]).send().await.unwrap();
    assert_eq!(wrong.status().as_u16(), 400);
    let sent = client
        .post(url)
        .body(vec![1, 2, 3, 4])
        .send()
        .await
        .unwrap();
    assert_eq!(
        (sent.status().as_u16(), sent.text().await.unwrap()),
        (200, "OK - 4".to_owned())
    );
    let done = bot(&fake, "files.completeUploadExternal", complete.clone()).await;
    assert_eq!(
        (done["ok"].as_bool(), done["files"][0]["id"].as_str()),
        (Some(true), Some(file_id))
    );
    assert_eq!(
        bot(&fake, "files.completeUploadExternal", complete).await["error"],
        code::FILE_NOT_FOUND,
        "completed once"
    );
    let upload = &fake.uploads()[0];
    assert_eq!(
        (
            upload.filename.as_str(),
            upload.bytes.as_slice(),
            upload.title.as_deref()
        ),
        ("chart.png", &[1u8, 2, 3, 4][..], Some("Chart"))
    );
    assert_eq!(
        (
            upload.channel.as_deref(),
            upload.thread_ts.as_deref(),
            upload.initial_comment.as_deref()
        ),
        (Some(DM), Some(root.as_str()), Some("here"))
    );
    assert_eq!(fake.thread_replies(DM, &root)[0].files, [file_id]);
}

#[tokio::test]
async fn user_files_are_served_only_to_the_bot_token() {
    let fake = FakeSlack::start().await.unwrap();
    let file = fake.put_file("photo.png", "image/png", vec![9, 8, 7]);
    let event = Event::dm(DM, USER, "look")
        .with_files(vec![file.clone()])
        .to_json();
    assert_eq!(
        (
            event["subtype"].as_str(),
            event["files"][0]["url_private"].as_str()
        ),
        (Some("file_share"), Some(file.url_private.as_str()))
    );
    let client = reqwest::Client::new();
    let anonymous = client.get(&file.url_private).send().await.unwrap();
    assert_eq!(anonymous.status().as_u16(), 200);
    assert!(
        anonymous.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/html")
    );
    let page = client
        .get(&file.url_private)
        .bearer_auth(APP_TOKEN)
        .send()
        .await
        .unwrap();
    assert!(page.text().await.unwrap().contains("Sign in"));
    let private = client
        .get(&file.url_private)
        .bearer_auth(BOT_TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(private.headers()["content-type"], "image/png");
    assert_eq!(private.bytes().await.unwrap().as_ref(), [9, 8, 7]);
    let download = client
        .get(&file.url_private_download)
        .bearer_auth(BOT_TOKEN)
        .send()
        .await
        .unwrap();
    assert!(
        download.headers()["content-disposition"]
            .to_str()
            .unwrap()
            .contains("photo.png")
    );
}

#[tokio::test]
async fn streams_start_append_and_stop_once() {
    let fake = FakeSlack::start().await.unwrap();
    let root = fake
        .push_event(&Event::mention(GENERAL, USER, "go").to_json())
        .ts
        .unwrap();
    let start = json!({"channel": GENERAL, "thread_ts": root, "markdown_text": "Hel"});
    assert_eq!(
        bot(&fake, "chat.startStream", start.clone()).await["error"],
        code::MISSING_RECIPIENT_USER_ID
    );
    let mut start = start;
    start["recipient_user_id"] = json!(USER);
    start["recipient_team_id"] = json!(TEAM_ID);
    let started = bot(&fake, "chat.startStream", start.clone()).await;
    let ts = started["ts"].as_str().unwrap();
    let call = |md: &str| json!({"channel": GENERAL, "ts": ts, "markdown_text": md});
    assert_eq!(
        bot(&fake, "chat.appendStream", call("lo")).await["ok"],
        true
    );
    assert_eq!(
        bot(
            &fake,
            "chat.appendStream",
            call(&"x".repeat(MAX_MARKDOWN_CHARS + 1))
        )
        .await["error"],
        code::MSG_TOO_LONG
    );
    let open = fake.message(GENERAL, ts).unwrap();
    assert!(!open.settled() && open.text == "Hello");
    assert_eq!(bot(&fake, "chat.stopStream", call("!")).await["ok"], true);
    assert_eq!(
        bot(&fake, "chat.appendStream", call("late")).await["error"],
        code::NOT_STREAMING
    );
    assert_eq!(
        bot(&fake, "chat.stopStream", call("")).await["error"],
        code::NOT_STREAMING
    );
    let stream = fake.message(GENERAL, ts).unwrap().stream.unwrap();
    assert_eq!(
        (stream.open, stream.chunks),
        (false, vec!["Hel".to_owned(), "lo".into(), "!".into()])
    );
    bot(
        &fake,
        "reactions.add",
        json!({"channel": GENERAL, "timestamp": root, "name": "white_check_mark"}),
    )
    .await;
    assert_eq!(
        fake.wait_final_text(GENERAL, &root, WAIT).await.unwrap(),
        "Hello!"
    );
    fake.wait_text(GENERAL, &root, "Hello!", WAIT)
        .await
        .unwrap();

    fake.set_streaming(false);
    let (status, off, _) = api(&fake, "chat.startStream", Some(BOT_TOKEN), start).await;
    assert_eq!(
        (status, off["error"].as_str()),
        (404, Some(code::UNKNOWN_METHOD))
    );
}

async fn open(fake: &FakeSlack) -> String {
    let (_, answer, _) = api(fake, "apps.connections.open", Some(APP_TOKEN), json!({})).await;
    answer["url"].as_str().unwrap().to_owned()
}

async fn connect(fake: &FakeSlack) -> Socket {
    let url = open(fake).await;
    tokio_tungstenite::connect_async(url).await.unwrap().0
}

async fn next_frame(socket: &mut Socket) -> Value {
    loop {
        let message = tokio::time::timeout(WAIT, socket.next())
            .await
            .expect("no frame before the deadline")
            .unwrap()
            .unwrap();
        if let Ws::Text(text) = message {
            return serde_json::from_str(text.as_str()).unwrap();
        }
    }
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
