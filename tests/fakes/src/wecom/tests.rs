//! The fake WeCom driven over its long connection as the adapter will drive it: subscribe,
//! heartbeats, hand-over, frames, streams and replies with their windows and limits,
//! proactive sends, uploads, the file host, scripted failures, redelivery.

use std::collections::VecDeque;
use std::time::Duration;

use futures_util::SinkExt;
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message as WsMessage;

use super::*;
use crate::skeleton::client::{self, next_json};

const WAIT: Duration = Duration::from_secs(5);
const USER: &str = "zhangsan";
const GROUP: &str = "wrkSFfCgAAfakeGroup";

/// A test's end of the long connection: commands answered by `req_id`, pushes kept aside.
struct Bot {
    ws: client::Client,
    pushes: VecDeque<Value>,
    n: u64,
}

impl Bot {
    async fn connect(fake: &FakeWecom) -> Self {
        Self {
            ws: client::connect(&fake.ws_url()).await,
            pushes: VecDeque::new(),
            n: 0,
        }
    }

    /// Connected and subscribed with the right credentials.
    async fn subscribed(fake: &FakeWecom) -> Self {
        let mut bot = Self::connect(fake).await;
        let answer = bot.subscribe(BOT_ID, SECRET).await;
        assert_eq!(answer["errcode"], 0, "{answer}");
        bot
    }

    async fn subscribe(&mut self, bot_id: &str, secret: &str) -> Value {
        let body = json!({"bot_id": bot_id, "secret": secret});
        self.call("aibot_subscribe", Some(body)).await
    }

    async fn send_text(&mut self, text: String) {
        self.ws.send(WsMessage::Text(text.into())).await.unwrap();
    }

    /// Sends `cmd` with a new `req_id`; its answer.
    async fn call(&mut self, cmd: &str, body: Option<Value>) -> Value {
        self.n += 1;
        let req_id = format!("{cmd}_{}", self.n);
        self.call_as(cmd, &req_id, body).await
    }

    /// Sends `cmd` under `req_id` (a reply carries its callback's); the answer.
    async fn call_as(&mut self, cmd: &str, req_id: &str, body: Option<Value>) -> Value {
        let mut frame = json!({"cmd": cmd, "headers": {"req_id": req_id}});
        if let Some(body) = body {
            frame["body"] = body;
        }
        self.send_text(frame.to_string()).await;
        self.answer(req_id).await
    }

    /// The answer to `req_id`, keeping pushes that come first. An answer naming no request
    /// (WeCom's to an invalid one) is taken as this one's: the bot sends one at a time.
    async fn answer(&mut self, req_id: &str) -> Value {
        loop {
            let frame = next_json(&mut self.ws, WAIT).await;
            if frame.get("cmd").is_some() {
                self.pushes.push_back(frame);
            } else if frame.get("headers").is_none() || frame["headers"]["req_id"] == req_id {
                return frame;
            }
        }
    }

    /// The next push.
    async fn push(&mut self) -> Value {
        if let Some(push) = self.pushes.pop_front() {
            return push;
        }
        next_json(&mut self.ws, WAIT).await
    }

    async fn stream(&mut self, req_id: &str, id: &str, content: &str, finish: bool) -> Value {
        let body = json!({"msgtype": "stream",
                          "stream": {"id": id, "finish": finish, "content": content}});
        self.call_as("aibot_respond_msg", req_id, Some(body)).await
    }
}

fn errcode(answer: &Value) -> i64 {
    answer["errcode"].as_i64().unwrap()
}

#[tokio::test]
async fn subscribe_checks_the_credentials_and_answers_by_req_id() {
    let fake = FakeWecom::start().await.unwrap();
    let mut bot = Bot::connect(&fake).await;
    let refused = bot.subscribe(BOT_ID, "wrong").await;
    assert_eq!(errcode(&refused), code::INVALID_CREDENTIALS);
    assert_eq!(refused["errmsg"], "invalid bot_id or secret");
    assert!(refused.get("cmd").is_none());
    // Observed: the service leaves the refused connection open.
    assert_eq!(fake.open_connections(), 1);
    let answer = bot.subscribe(BOT_ID, SECRET).await;
    assert_eq!(answer["errcode"], 0);
    assert_eq!(answer["errmsg"], "ok");
    assert_eq!(answer["headers"]["req_id"], "aibot_subscribe_2");
    assert!(fake.connections()[0].subscribed);
    // Subscribing again is throttled.
    assert_eq!(
        errcode(&bot.subscribe(BOT_ID, SECRET).await),
        code::FREQ_OUT_OF_LIMIT
    );
    let ping = bot.call("ping", None).await;
    assert_eq!(ping["errcode"], 0);
    assert_eq!(fake.connections()[0].pings, 1);
}

#[tokio::test]
async fn a_command_before_subscribing_closes_the_connection() {
    let fake = FakeWecom::start().await.unwrap();
    let mut bot = Bot::connect(&fake).await;
    let answer = bot.call("ping", None).await;
    assert_eq!(errcode(&answer), code::NOT_SUBSCRIBED);
    let closed = fake.wait_closed(1, WAIT).await.unwrap();
    assert_eq!(closed.closed_by, Some(Closed::NotSubscribed));
}

/// WeCom dropped the subscription, the socket stays open: every command, a ping too, is
/// answered 846609 and does nothing, until a new connection subscribes.
#[tokio::test]
async fn a_dropped_subscription_answers_every_command_846609_on_an_open_socket() {
    let fake = FakeWecom::start().await.unwrap();
    let mut bot = Bot::subscribed(&fake).await;
    let pushed = fake.push(&Message::text(USER, "hello"));
    assert_eq!(
        bot.push().await["headers"]["req_id"],
        pushed.req_id.as_str()
    );
    fake.drop_subscription(1);
    for _ in 0..2 {
        let answer = bot.stream(&pushed.req_id, "s1", "hi", false).await;
        assert_eq!(errcode(&answer), code::NOT_SUBSCRIBED);
        assert_eq!(answer["errmsg"], "aibot websocket not subscribed");
    }
    assert_eq!(errcode(&bot.call("ping", None).await), code::NOT_SUBSCRIBED);
    assert!(
        fake.streams_of(&pushed.req_id).is_empty(),
        "nothing applied"
    );
    assert_eq!(fake.connections()[0].pings, 0, "the heartbeat lapses");
    assert_eq!(fake.open_connections(), 1, "the socket stays open");
    // Pushes wait for a connection that is subscribed.
    let held = fake.push(&Message::text(USER, "again"));
    let mut second = Bot::subscribed(&fake).await;
    assert_eq!(
        second.push().await["headers"]["req_id"],
        held.req_id.as_str()
    );
    let answer = second.call("ping", None).await;
    assert_eq!(errcode(&answer), code::OK);
}

#[tokio::test]
async fn a_silent_connection_is_closed_after_the_subscribe_window() {
    let fake = FakeWecom::start().await.unwrap();
    fake.set_subscribe_window(Duration::from_millis(100));
    let _bot = Bot::connect(&fake).await;
    let closed = fake.wait_closed(1, WAIT).await.unwrap();
    assert_eq!(closed.closed_by, Some(Closed::SubscribeTimeout));
}

#[tokio::test]
async fn a_missed_heartbeat_closes_the_connection_and_pings_keep_it() {
    let fake = FakeWecom::start().await.unwrap();
    fake.set_heartbeat_timeout(Duration::from_millis(300));
    let mut pinging = Bot::subscribed(&fake).await;
    // A second bot replaces the first, so each test of the heartbeat needs its own fake.
    for _ in 0..4 {
        assert_eq!(pinging.call("ping", None).await["errcode"], 0);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(fake.connections()[0].open, "pings keep the connection");
    let closed = fake.wait_closed(1, WAIT).await.unwrap();
    assert_eq!(closed.closed_by, Some(Closed::Heartbeat));
    assert_eq!(closed.pings, 4);
}

#[tokio::test]
async fn a_newer_connection_replaces_the_older_one() {
    let fake = FakeWecom::start().await.unwrap();
    let mut old = Bot::subscribed(&fake).await;
    let pushed = fake.push(&Message::text(USER, "hello"));
    assert_eq!(
        old.push().await["headers"]["req_id"],
        pushed.req_id.as_str()
    );
    let mut new = Bot::subscribed(&fake).await;
    let event = old.push().await;
    assert_eq!(event["cmd"], "aibot_event_callback");
    assert_eq!(event["body"]["event"]["eventtype"], "disconnected_event");
    let closed = fake.wait_closed(1, WAIT).await.unwrap();
    assert_eq!(closed.closed_by, Some(Closed::Replaced));
    assert!(closed.replaced);
    assert_eq!(fake.live_connection(), Some(2));
    // The old connection's callback cannot be answered on the new one.
    let answer = new.stream(&pushed.req_id, "s1", "hi", true).await;
    assert_eq!(errcode(&answer), code::INVALID_REQ_ID);
    // New pushes go to the new connection.
    let second = fake.push(&Message::text(USER, "again"));
    assert_eq!(
        new.push().await["headers"]["req_id"],
        second.req_id.as_str()
    );
}

#[tokio::test]
async fn pushes_are_held_until_a_connection_subscribes() {
    let fake = FakeWecom::start().await.unwrap();
    let pushed = fake.push(&Message::mention(GROUP, USER, "what time is it"));
    assert_eq!(pushed.connection, None);
    let mut bot = Bot::subscribed(&fake).await;
    let frame = bot.push().await;
    assert_eq!(frame["cmd"], "aibot_msg_callback");
    let body = &frame["body"];
    assert_eq!(body["chattype"], "group");
    assert_eq!(body["chatid"], GROUP);
    assert_eq!(body["aibotid"], BOT_ID);
    assert_eq!(body["text"]["content"], "@DeerFlow what time is it");
    assert_eq!(fake.pushed()[0].connection, Some(1));
}

#[tokio::test]
async fn a_stream_is_answered_updated_and_finished() {
    let fake = FakeWecom::start().await.unwrap();
    let mut bot = Bot::subscribed(&fake).await;
    let pushed = fake.push(&Message::text(USER, "hi"));
    bot.push().await;
    let req = pushed.req_id.as_str();
    for (content, finish) in [("Work", false), ("Working on it", false), ("Done.", true)] {
        assert_eq!(bot.stream(req, "s1", content, finish).await["errcode"], 0);
    }
    assert_eq!(fake.wait_final_text(req, WAIT).await.unwrap(), "Done.");
    let stream = &fake.streams_of(req)[0];
    assert_eq!(stream.updates.len(), 3);
    assert!(stream.shrank, "\"Done.\" replaced \"Working on it\"");
    assert_eq!(stream.msgid, pushed.msgid);
    // Nothing after finish.
    let late = bot.stream(req, "s1", "Done. More", false).await;
    assert_eq!(errcode(&late), code::STREAM_FINISHED);
    // Another stream on the same callback is a new message.
    assert_eq!(bot.stream(req, "s2", "PS", true).await["errcode"], 0);
    assert_eq!(fake.streams_of(req).len(), 2);
}

#[tokio::test]
async fn stream_bodies_are_checked() {
    let fake = FakeWecom::start().await.unwrap();
    let mut bot = Bot::subscribed(&fake).await;
    let req = fake.push(&Message::text(USER, "hi")).req_id;
    let over = "字".repeat(MAX_CONTENT_BYTES / 3 + 1);
    assert!(over.len() > MAX_CONTENT_BYTES);
    let answer = bot.stream(&req, "s1", &over, false).await;
    assert_eq!(errcode(&answer), code::INVALID_PARAMETER);
    let at_limit = "a".repeat(MAX_CONTENT_BYTES);
    assert_eq!(bot.stream(&req, "s1", &at_limit, false).await["errcode"], 0);
    let no_id = json!({"msgtype": "stream", "stream": {"content": "x"}});
    let answer = bot.call_as("aibot_respond_msg", &req, Some(no_id)).await;
    assert_eq!(errcode(&answer), code::INVALID_PARAMETER);
    let msg_item = json!({"msgtype": "stream", "stream": {"id": "s9", "finish": true,
        "content": "x", "msg_item": [{"msgtype": "image", "image": {"base64": "", "md5": ""}}]}});
    let answer = bot.call_as("aibot_respond_msg", &req, Some(msg_item)).await;
    assert_eq!(errcode(&answer), code::INVALID_PARAMETER);
    let text = json!({"msgtype": "text", "text": {"content": "plain"}});
    let answer = bot.call_as("aibot_respond_msg", &req, Some(text)).await;
    assert_eq!(
        errcode(&answer),
        code::INVALID_PARAMETER,
        "text is no reply type"
    );
    let unknown = bot.stream("never-pushed", "s1", "x", true).await;
    assert_eq!(errcode(&unknown), code::INVALID_REQ_ID);
    fake.set_refuse_shrinking(true);
    let shorter = bot.stream(&req, "s1", "a", false).await;
    assert_eq!(errcode(&shorter), code::INVALID_PARAMETER);
    // Frames refused before the stream existed belong to no stream.
    assert_eq!(
        fake.streams_of(&req)[0].refused,
        [(code::INVALID_PARAMETER, "a".into())]
    );
}

#[tokio::test]
async fn replies_keep_to_their_windows() {
    let fake = FakeWecom::start().await.unwrap();
    let mut bot = Bot::subscribed(&fake).await;
    let req = fake.push(&Message::text(USER, "hi")).req_id;
    assert_eq!(bot.stream(&req, "s1", "first", false).await["errcode"], 0);
    fake.advance_clock(STREAM_WINDOW + Duration::from_secs(1));
    let late = bot.stream(&req, "s1", "first, then", false).await;
    assert_eq!(errcode(&late), code::STREAM_EXPIRED);
    assert_eq!(late["errmsg"], "stream message update expired");
    // Nor does the callback take a new stream: the answer goes as aibot_send_msg.
    let again = bot.stream(&req, "s2", "first, then", true).await;
    assert_eq!(errcode(&again), code::STREAM_EXPIRED);
    assert_eq!(fake.streams_of(&req).len(), 1);
    // Within 24 h a new message may still answer the callback; after, not.
    let md = json!({"msgtype": "markdown", "markdown": {"content": "**late** answer"}});
    let answer = bot
        .call_as("aibot_respond_msg", &req, Some(md.clone()))
        .await;
    assert_eq!(answer["errcode"], 0);
    assert_eq!(fake.replies()[0].text(), Some("**late** answer"));
    fake.advance_clock(REPLY_WINDOW);
    let answer = bot.call_as("aibot_respond_msg", &req, Some(md)).await;
    assert_eq!(errcode(&answer), code::INVALID_REQ_ID);
}

/// The window counts from the callback (the user's message), not from the stream's first
/// frame: a stream opened five minutes after its message has one minute left.
#[tokio::test]
async fn the_stream_window_counts_from_the_callback() {
    let fake = FakeWecom::start().await.unwrap();
    let mut bot = Bot::subscribed(&fake).await;
    let req = fake.push(&Message::text(USER, "hi")).req_id;
    fake.advance_clock(Duration::from_secs(5 * 60));
    assert_eq!(bot.stream(&req, "s1", "late", false).await["errcode"], 0);
    fake.advance_clock(Duration::from_secs(61));
    let update = bot.stream(&req, "s1", "late, then", false).await;
    assert_eq!(errcode(&update), code::STREAM_EXPIRED);
    let another = bot.stream(&req, "s2", "late, then", true).await;
    assert_eq!(errcode(&another), code::STREAM_EXPIRED);
}

#[tokio::test]
async fn the_observed_stream_expiry_counts_from_the_last_update() {
    let fake = FakeWecom::start().await.unwrap();
    fake.set_stream_expiry(STREAM_WINDOW, StreamExpiry::SinceLast);
    let mut bot = Bot::subscribed(&fake).await;
    let req = fake.push(&Message::text(USER, "hi")).req_id;
    for (i, content) in ["a", "ab", "abc"].iter().enumerate() {
        if i > 0 {
            fake.advance_clock(Duration::from_secs(4 * 60));
        }
        assert_eq!(bot.stream(&req, "s1", content, false).await["errcode"], 0);
    }
}

#[tokio::test]
async fn messages_to_a_conversation_are_rate_limited() {
    let fake = FakeWecom::start().await.unwrap();
    let mut bot = Bot::subscribed(&fake).await;
    let req = fake.push(&Message::text(USER, "hi")).req_id;
    for i in 0..MESSAGES_PER_MINUTE {
        let answer = bot.stream(&req, &format!("s{i}"), "x", true).await;
        assert_eq!(answer["errcode"], 0, "message {i}");
    }
    let answer = bot.stream(&req, "one-too-many", "x", true).await;
    assert_eq!(errcode(&answer), code::FREQ_OUT_OF_LIMIT);
    assert_eq!(fake.rate_refusals(), 1);
    // Updates of an open stream are no new messages.
    fake.advance_clock(Duration::from_secs(60));
    assert_eq!(bot.stream(&req, "long", "a", false).await["errcode"], 0);
    for _ in 0..40 {
        assert_eq!(bot.stream(&req, "long", "ab", false).await["errcode"], 0);
    }
}

#[tokio::test]
async fn welcomes_answer_enter_chat_within_five_seconds() {
    let fake = FakeWecom::start().await.unwrap();
    let mut bot = Bot::subscribed(&fake).await;
    let event = fake.push_event(&Event::enter_chat(USER));
    let frame = bot.push().await;
    assert_eq!(frame["body"]["event"]["eventtype"], "enter_chat");
    assert!(frame["body"]["create_time"].is_u64());
    // An event's req_id is no message callback's.
    let answer = bot.stream(&event.req_id, "s1", "hi", true).await;
    assert_eq!(errcode(&answer), code::INVALID_REQ_ID);
    let welcome = json!({"msgtype": "text", "text": {"content": "Hello! Ask me anything."}});
    let answer = bot
        .call_as(
            "aibot_respond_welcome_msg",
            &event.req_id,
            Some(welcome.clone()),
        )
        .await;
    assert_eq!(answer["errcode"], 0);
    let again = bot
        .call_as(
            "aibot_respond_welcome_msg",
            &event.req_id,
            Some(welcome.clone()),
        )
        .await;
    assert_eq!(errcode(&again), code::ALREADY_REPLIED);
    let late = fake.push_event(&Event::enter_chat("lisi"));
    fake.advance_clock(EVENT_REPLY_WINDOW + Duration::from_secs(1));
    let answer = bot
        .call_as("aibot_respond_welcome_msg", &late.req_id, Some(welcome))
        .await;
    assert_eq!(errcode(&answer), code::INVALID_REQ_ID);
    assert_eq!(fake.replies().len(), 1);
}

#[tokio::test]
async fn proactive_sends_need_a_conversation_that_wrote() {
    let fake = FakeWecom::start().await.unwrap();
    let mut bot = Bot::subscribed(&fake).await;
    let md = |chatid: &str, content: &str| json!({"chatid": chatid, "msgtype": "markdown", "markdown": {"content": content}});
    let answer = bot.call("aibot_send_msg", Some(md(GROUP, "hi"))).await;
    assert_eq!(errcode(&answer), code::CHAT_NOT_ALLOWED);
    fake.push(&Message::mention(GROUP, USER, "remind me"));
    let answer = bot
        .call("aibot_send_msg", Some(md(GROUP, "Reminder!")))
        .await;
    assert_eq!(answer["errcode"], 0);
    assert_eq!(
        fake.wait_sent(GROUP, WAIT).await.unwrap().text(),
        Some("Reminder!")
    );
    let over = "a".repeat(MAX_CONTENT_BYTES + 1);
    let answer = bot.call("aibot_send_msg", Some(md(GROUP, &over))).await;
    assert_eq!(errcode(&answer), code::INVALID_PARAMETER);
    let no_chat = json!({"msgtype": "markdown", "markdown": {"content": "x"}});
    let answer = bot.call("aibot_send_msg", Some(no_chat)).await;
    assert_eq!(errcode(&answer), code::INVALID_PARAMETER);
}

/// Uploads `bytes` in chunks of `chunk` bytes; the finish's answer.
async fn upload(bot: &mut Bot, kind: &str, name: &str, bytes: &[u8], md5: &str) -> Value {
    use base64::Engine;
    let chunks: Vec<&[u8]> = bytes.chunks(MAX_CHUNK_BYTES).collect();
    let init = json!({"type": kind, "filename": name, "total_size": bytes.len(),
                      "total_chunks": chunks.len(), "md5": md5});
    let answer = bot.call("aibot_upload_media_init", Some(init)).await;
    assert_eq!(answer["errcode"], 0, "{answer}");
    let upload_id = answer["body"]["upload_id"].as_str().unwrap().to_owned();
    // In reverse order, and one twice: both are allowed.
    for (i, chunk) in chunks.iter().enumerate().rev().chain([(0, &chunks[0])]) {
        let data = base64::engine::general_purpose::STANDARD.encode(chunk);
        let body = json!({"upload_id": upload_id, "chunk_index": i, "base64_data": data});
        let answer = bot.call("aibot_upload_media_chunk", Some(body)).await;
        assert_eq!(answer["errcode"], 0, "{answer}");
    }
    let finish = json!({"upload_id": upload_id});
    bot.call("aibot_upload_media_finish", Some(finish)).await
}

fn md5_hex(bytes: &[u8]) -> String {
    use md5::{Digest, Md5};
    Md5::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[tokio::test]
async fn media_uploads_in_chunks_and_is_sent_by_media_id() {
    let fake = FakeWecom::start().await.unwrap();
    let mut bot = Bot::subscribed(&fake).await;
    let req = fake.push(&Message::text(USER, "send me the report")).req_id;
    let bytes: Vec<u8> = (0..MAX_CHUNK_BYTES + 1000)
        .map(|i| (i % 251) as u8)
        .collect();
    let answer = upload(&mut bot, "file", "report.pdf", &bytes, &md5_hex(&bytes)).await;
    assert_eq!(answer["errcode"], 0, "{answer}");
    assert_eq!(answer["body"]["type"], "file");
    assert!(answer["body"]["created_at"].is_string());
    let media_id = answer["body"]["media_id"].as_str().unwrap().to_owned();
    let uploaded = fake.wait_upload("report.pdf", WAIT).await.unwrap();
    assert_eq!(uploaded.bytes, bytes);
    assert_eq!(uploaded.chunks_received, 2);
    // As an image it is refused; as a file it goes.
    let as_image = json!({"msgtype": "image", "image": {"media_id": media_id}});
    let answer = bot.call_as("aibot_respond_msg", &req, Some(as_image)).await;
    assert_eq!(errcode(&answer), code::INVALID_MEDIA_ID);
    let as_file = json!({"msgtype": "file", "file": {"media_id": media_id}});
    let answer = bot.call_as("aibot_respond_msg", &req, Some(as_file)).await;
    assert_eq!(answer["errcode"], 0);
    let uploaded = fake.uploads().pop().unwrap();
    assert_eq!(
        uploaded.used_in,
        [MediaUse::Reply {
            req_id: req.clone()
        }]
    );
    // Sent proactively too; three days later the media_id is gone.
    let send = json!({"chatid": USER, "msgtype": "file", "file": {"media_id": media_id}});
    let answer = bot.call("aibot_send_msg", Some(send.clone())).await;
    assert_eq!(answer["errcode"], 0);
    let uses = fake.uploads().pop().unwrap().used_in;
    assert_eq!(
        uses[1],
        MediaUse::Send {
            chatid: USER.into()
        }
    );
    fake.advance_clock(MEDIA_LIFETIME);
    let answer = bot.call("aibot_send_msg", Some(send)).await;
    assert_eq!(errcode(&answer), code::INVALID_MEDIA_ID);
}

#[tokio::test]
async fn uploads_are_checked() {
    let fake = FakeWecom::start().await.unwrap();
    let mut bot = Bot::subscribed(&fake).await;
    let bytes = b"a small picture".to_vec();
    let answer = upload(&mut bot, "image", "a.png", &bytes, &md5_hex(b"other")).await;
    assert_eq!(errcode(&answer), code::MD5_MISMATCH);
    let init = |size: usize, chunks: usize| json!({"type": "file", "filename": "f.bin", "total_size": size, "total_chunks": chunks});
    for (size, chunks) in [(5, 1), (MAX_CHUNK_BYTES + 1, 1), (100, 0), (100, 101)] {
        let answer = bot
            .call("aibot_upload_media_init", Some(init(size, chunks)))
            .await;
        assert_eq!(
            errcode(&answer),
            code::INVALID_PARAMETER,
            "{size} in {chunks}"
        );
    }
    let answer = bot.call("aibot_upload_media_init", Some(init(10, 2))).await;
    let upload_id = answer["body"]["upload_id"].as_str().unwrap().to_owned();
    let chunk = |i: usize, data: &str| json!({"upload_id": upload_id, "chunk_index": i, "base64_data": data});
    // "hello" is aGVsbG8=.
    assert_eq!(
        bot.call("aibot_upload_media_chunk", Some(chunk(0, "aGVsbG8=")))
            .await["errcode"],
        0
    );
    let answer = bot
        .call("aibot_upload_media_chunk", Some(chunk(2, "aGVsbG8=")))
        .await;
    assert_eq!(
        errcode(&answer),
        code::INVALID_PARAMETER,
        "index past total_chunks"
    );
    let finish = json!({"upload_id": upload_id});
    let answer = bot.call("aibot_upload_media_finish", Some(finish)).await;
    assert_eq!(errcode(&answer), code::UPLOAD_INCOMPLETE);
    fake.advance_clock(UPLOAD_SESSION);
    let answer = bot
        .call("aibot_upload_media_chunk", Some(chunk(1, "aGVsbG8=")))
        .await;
    assert_eq!(errcode(&answer), code::INVALID_UPLOAD_ID);
}

#[tokio::test]
async fn the_file_host_serves_encrypted_bytes_for_five_minutes() {
    let fake = FakeWecom::start().await.unwrap();
    let bytes = b"\x89PNG\r\n\x1a\n a picture of exactly some bytes".to_vec();
    let file = fake.put_file(bytes.clone(), Some("photo.png"));
    assert_eq!(file.aeskey.len(), 43);
    let message = Message::image(USER, &file).to_json();
    assert_eq!(message["image"]["url"], file.url.as_str());
    assert_eq!(message["image"]["aeskey"], file.aeskey.as_str());
    let response = reqwest::get(&file.url).await.unwrap();
    assert_eq!(response.status(), 200);
    let encrypted = response.bytes().await.unwrap();
    assert_eq!(encrypted.len() % 32, 0);
    assert_ne!(&encrypted[..], &bytes[..]);
    assert_eq!(decrypt_file(&encrypted, &file.aeskey), Some(bytes));
    let forged = file.url.replace("sign=", "sign=0");
    assert_eq!(reqwest::get(&forged).await.unwrap().status(), 403);
    fake.advance_clock(URL_LIFETIME);
    assert_eq!(reqwest::get(&file.url).await.unwrap().status(), 403);
    assert_eq!(fake.calls_to("file").len(), 3);
}

#[test]
fn encryption_pads_to_32_bytes() {
    let key = [7u8; 32];
    for len in [0, 1, 16, 31, 32, 33] {
        let plain = vec![1u8; len];
        let sealed = encrypt_file(&plain, &key);
        assert_eq!(sealed.len(), (len / 32 + 1) * 32);
        use base64::Engine;
        let aeskey = base64::engine::general_purpose::STANDARD.encode(key);
        assert_eq!(decrypt_file(&sealed, &aeskey), Some(plain));
    }
}

#[tokio::test]
async fn malformed_frames_are_protocol_errors() {
    let fake = FakeWecom::start().await.unwrap();
    let mut bot = Bot::subscribed(&fake).await;
    bot.send_text("not json".into()).await;
    let answer = bot.answer("").await;
    assert_eq!(errcode(&answer), code::INVALID_PARAMETER);
    let answer = bot.call("aibot_do_something", Some(json!({}))).await;
    assert_eq!(errcode(&answer), code::INVALID_PARAMETER);
    // As WeCom answers an invalid request: no headers, so no req_id.
    assert_eq!(
        answer,
        json!({"errcode": 40_058, "errmsg": "invalid Request Parameter"})
    );
    bot.send_text(json!({"cmd": "ping", "headers": {}}).to_string())
        .await;
    let answer = bot.answer("").await;
    assert_eq!(errcode(&answer), code::INVALID_PARAMETER);
    assert_eq!(fake.bad_frames(), 3);
    assert_eq!(fake.protocol_errors()[0], "not json");
    let answer = bot.call("aibot_send_msg", None).await;
    assert_eq!(
        errcode(&answer),
        code::INVALID_PARAMETER,
        "a body is required"
    );
}

#[tokio::test]
async fn failures_are_scripted_per_command() {
    let fake = FakeWecom::start().await.unwrap();
    let mut bot = Bot::subscribed(&fake).await;
    let req = fake.push(&Message::text(USER, "hi")).req_id;
    fake.fail(
        "aibot_respond_msg",
        Trigger::Next,
        Failure::Code(-1, "system error".into()),
    );
    let answer = bot.stream(&req, "s1", "x", false).await;
    assert_eq!(answer["errcode"], -1);
    assert_eq!(answer["errmsg"], "system error");
    assert!(fake.streams().is_empty(), "a failed frame is not applied");
    fake.fail(
        "ping",
        Trigger::Next,
        Failure::Delay(Duration::from_millis(50)),
    );
    assert_eq!(bot.call("ping", None).await["errcode"], 0);
    fake.fail("ping", Trigger::Next, Failure::Drop);
    bot.send_text(json!({"cmd": "ping", "headers": {"req_id": "p"}}).to_string())
        .await;
    let closed = fake.wait_closed(1, WAIT).await.unwrap();
    assert_eq!(closed.closed_by, Some(Closed::Server));
}

#[tokio::test]
async fn a_message_can_be_delivered_again() {
    let fake = FakeWecom::start().await.unwrap();
    let mut bot = Bot::subscribed(&fake).await;
    let first = fake.push(&Message::text(USER, "once"));
    let again = fake.redeliver(&first.msgid).unwrap();
    assert!(again.redelivery);
    assert_ne!(again.req_id, first.req_id);
    let (a, b) = (bot.push().await, bot.push().await);
    assert_eq!(a["body"], b["body"]);
    assert_eq!(b["headers"]["req_id"], again.req_id.as_str());
    assert!(fake.redeliver("unknown").is_none());
    // Each callback may be answered.
    assert_eq!(
        bot.stream(&again.req_id, "s1", "ok", true).await["errcode"],
        0
    );
}

#[tokio::test]
async fn the_builders_write_what_wecom_pushes() {
    let fake = FakeWecom::start().await.unwrap();
    let file = fake.put_file(b"%PDF-1.7 fake".to_vec(), Some("a.pdf"));
    let mixed = Message::mixed(
        Some(GROUP),
        USER,
        &[
            MixedItem::Text("@DeerFlow look".into()),
            MixedItem::Image(file.clone()),
        ],
    )
    .to_json();
    assert_eq!(mixed["msgtype"], "mixed");
    assert_eq!(
        mixed["mixed"]["msg_item"][1]["image"]["aeskey"],
        file.aeskey.as_str()
    );
    let single = Message::file(USER, &file).quoting("earlier").to_json();
    assert_eq!(single["chattype"], "single");
    assert!(single.get("chatid").is_none());
    assert_eq!(single["quote"]["text"]["content"], "earlier");
    assert_eq!(
        Message::voice(USER, "transcript").to_json()["voice"]["content"],
        "transcript"
    );
    let click = Event::card_click(Some(GROUP), USER, "confirm", "task-1").to_json();
    assert_eq!(
        click["event"]["template_card_event"]["event_key"],
        "confirm"
    );
    assert_eq!(
        Event::feedback(USER, "fb-1", 1).eventtype(),
        "feedback_event"
    );
}
