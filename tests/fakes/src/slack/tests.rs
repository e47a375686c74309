//! The fake Slack's Web API driven over HTTP, as the adapter will drive it: tokens, message
//! rules, the edit pace, reactions, scripted failures, uploads and the file host, streams.
//! (Socket Mode's tests are `socket_mode`'s, the signature's `signing`'s.)

use std::time::Duration;

use serde_json::{Value, json};

use super::rest::Params;
use super::*;

pub(super) const WAIT: Duration = Duration::from_secs(5);
pub(super) const DM: &str = "D0FAKEDM01";
pub(super) const GENERAL: &str = "C0FAKEGEN1";
pub(super) const USER: &str = "U0FAKEUSER";

/// Calls `method` with a JSON body; the status, the answer and its `Retry-After`.
pub(super) async fn api(
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
    // An edit over 4,000 bytes is refused whole, even when posts are truncated.
    slack.truncate_long_text = true;
    tokio::time::advance(Duration::from_secs(1)).await;
    let long = chat::update(&mut slack, &Params(&edit(&"路".repeat(1_334))));
    assert_eq!(long.json_body().unwrap()["error"], code::MSG_TOO_LONG);
    let fits = chat::update(&mut slack, &Params(&edit(&"路".repeat(1_333))));
    assert_eq!(fits.status, 200);
    assert_eq!(slack.message(DM, &ts).unwrap().edits.len(), 3);
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

#[tokio::test]
async fn a_response_url_takes_five_json_posts_seen_in_the_conversation_or_by_the_user() {
    let fake = FakeSlack::start().await.unwrap();
    let mut command = SlashCommand::new("/goal", "", USER, "D0OUTSIDE1");
    fake.issue_response_url(&mut command);
    assert!(command.response_url.starts_with(&fake.api_url()));
    let post = |body: String, json: bool| {
        let request = reqwest::Client::new()
            .post(&command.response_url)
            .header(
                "content-type",
                if json {
                    "application/json"
                } else {
                    "text/plain"
                },
            )
            .body(body);
        async move {
            let response = request.send().await.unwrap();
            (response.status().as_u16(), response.text().await.unwrap())
        }
    };
    let said = |text: &str, kind: &str| json!({"text": text, "response_type": kind}).to_string();
    assert_eq!(
        post(said("x", "in_channel"), false).await,
        (400, "invalid_payload".into())
    );
    assert_eq!(
        post(json!({}).to_string(), true).await,
        (400, "no_text".into())
    );
    assert_eq!(
        post(said("only you", "ephemeral"), true).await,
        (200, "ok".into())
    );
    for n in 2..=RESPONSES_PER_URL {
        let text = format!("answer {n}");
        assert_eq!(
            post(said(&text, "in_channel"), true).await,
            (200, "ok".into())
        );
    }
    assert_eq!(
        post(said("sixth", "in_channel"), true).await,
        (404, "used_url".into())
    );
    let responses = fake.responses();
    assert_eq!(responses.len(), RESPONSES_PER_URL as usize);
    assert!(!responses[0].in_channel && responses[1].in_channel);
    // Only what the conversation sees is a message in it.
    let shown: Vec<String> = fake
        .bot_messages("D0OUTSIDE1")
        .into_iter()
        .map(|m| m.text)
        .collect();
    assert_eq!(shown, ["answer 2", "answer 3", "answer 4", "answer 5"]);
    // A URL the fake never issued takes nothing.
    let forged = command.response_url.replace("/commands/", "/commands/x");
    let response = reqwest::Client::new()
        .post(forged)
        .header("content-type", "application/json")
        .body(said("forged", "in_channel"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 404);
}
