//! The fake iLink driven over HTTP, as the adapter will drive it: QR login, the token and
//! session expiry, the cursor, the send rules, typing, the CDN round trip, failures.

use std::time::Duration;

use serde_json::{Value, json};

use super::*;

const WAIT: Duration = Duration::from_secs(5);
const USER: &str = "o9cq8fakeuser00000000001@im.wechat";
const OTHER: &str = "o9cq8fakeuser00000000002@im.wechat";

/// `X-WECHAT-UIN` as clients build it: base64 of a uint32's decimal digits.
fn uin() -> String {
    STANDARD.encode("2813405412")
}

/// A POST to `/ilink/bot/{endpoint}` with the token headers (`app`: with the app headers).
fn request(fake: &FakeWechat, endpoint: &str, token: &str, app: bool) -> reqwest::RequestBuilder {
    let request = reqwest::Client::new()
        .post(format!("{}/ilink/bot/{endpoint}", fake.base_url()))
        .header("content-type", "application/json")
        .header("AuthorizationType", "ilink_bot_token")
        .header("Authorization", format!("Bearer {token}"))
        .header("X-WECHAT-UIN", uin());
    if !app {
        return request;
    }
    request
        .header("iLink-App-Id", "bot")
        .header("iLink-App-ClientVersion", "65536")
}

/// POSTs `body` to `/ilink/bot/{endpoint}` with the token headers; the status and the JSON.
async fn post(fake: &FakeWechat, endpoint: &str, token: &str, body: Value) -> (u16, Value) {
    let response = request(fake, endpoint, token, true)
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

/// POSTs `body` to `getupdates` without the app headers; the JSON.
async fn poll_without_app_headers(fake: &FakeWechat, body: &Value) -> Value {
    let response = request(fake, "getupdates", BOT_TOKEN, false)
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    response.json().await.unwrap()
}

/// GETs `/ilink/bot/{path_and_query}` with the common headers only (the QR endpoints).
async fn get(fake: &FakeWechat, path_and_query: &str) -> Value {
    reqwest::Client::new()
        .get(format!("{}/ilink/bot/{path_and_query}", fake.base_url()))
        .header("iLink-App-ClientVersion", "65536")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

fn base_info() -> Value {
    json!({"channel_version": "1.0.0"})
}

async fn poll(fake: &FakeWechat, cursor: &str) -> Value {
    let body = json!({"get_updates_buf": cursor, "base_info": base_info()});
    post(fake, "getupdates", BOT_TOKEN, body).await.1
}

fn text_msg(to: &str, context_token: &str, text: &str) -> Value {
    json!({"msg": {"from_user_id": "", "to_user_id": to, "client_id": "c-1",
                   "message_type": 2, "message_state": 2, "context_token": context_token,
                   "item_list": [{"type": 1, "text_item": {"text": text}}]},
           "base_info": base_info()})
}

async fn send_text(fake: &FakeWechat, to: &str, context_token: &str, text: &str) -> Value {
    post(
        fake,
        "sendmessage",
        BOT_TOKEN,
        text_msg(to, context_token, text),
    )
    .await
    .1
}

fn seqs(answer: &Value) -> Vec<u64> {
    answer["msgs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["seq"].as_u64().unwrap())
        .collect()
}

async fn short_polls() -> FakeWechat {
    let fake = FakeWechat::start().await.unwrap();
    fake.set_long_poll_hold(Duration::from_millis(50));
    fake
}

#[tokio::test]
async fn qr_login_walks_wait_scaned_confirmed_and_issues_a_token() {
    let fake = FakeWechat::start_logged_out().await.unwrap();
    fake.set_long_poll_hold(Duration::from_millis(50));
    let (_, refused) = post(
        &fake,
        "getupdates",
        BOT_TOKEN,
        json!({"get_updates_buf": ""}),
    )
    .await;
    assert_eq!(refused["errcode"], -14, "no session before the login");

    let qr = get(&fake, "get_bot_qrcode?bot_type=3").await;
    let id = qr["qrcode"].as_str().unwrap().to_owned();
    assert!(qr["qrcode_img_content"].as_str().unwrap().contains(&id));
    let status = |q: Value| q["status"].as_str().unwrap().to_owned();
    let path = format!("get_qrcode_status?qrcode={id}");
    assert_eq!(status(get(&fake, &path).await), "wait");
    // Nothing changed: held, then `wait` again.
    assert_eq!(status(get(&fake, &path).await), "wait");
    assert!(fake.confirm().is_none(), "confirming needs a scan first");
    assert!(fake.scan());
    assert_eq!(status(get(&fake, &path).await), "scaned");
    let token = fake.confirm().unwrap();
    let confirmed = get(&fake, &path).await;
    assert_eq!(confirmed["status"], "confirmed");
    assert_eq!(confirmed["bot_token"], token.as_str());
    assert_eq!(confirmed["ilink_bot_id"], BOT_ID);
    assert_eq!(confirmed["ilink_user_id"], OWNER_ID);
    assert_eq!(confirmed["baseurl"], fake.base_url().as_str());
    // Used up.
    assert_eq!(status(get(&fake, &path).await), "expired");

    let (_, ok) = post(&fake, "getupdates", &token, json!({"get_updates_buf": ""})).await;
    assert_eq!(ok["ret"], 0);
    assert_eq!(fake.calls_to("get_bot_qrcode").len(), 1);
    assert_eq!(fake.calls_to("get_qrcode_status").len(), 5);
    assert_eq!(fake.qrcodes()[0].polls, 5);
}

#[tokio::test]
async fn a_held_status_poll_answers_as_soon_as_the_code_is_scanned_or_expires() {
    let fake = FakeWechat::start_logged_out().await.unwrap();
    let qr = get(&fake, "get_bot_qrcode?bot_type=3").await;
    let path = format!(
        "get_qrcode_status?qrcode={}",
        qr["qrcode"].as_str().unwrap()
    );
    assert_eq!(get(&fake, &path).await["status"], "wait");
    let held = get(&fake, &path);
    let scan = async {
        fake.wait_until("the second status poll", WAIT, |f| {
            f.qrcodes()[0].polls == 2
        })
        .await
        .unwrap();
        fake.scan();
    };
    let (answer, ()) = tokio::time::timeout(WAIT, async { tokio::join!(held, scan) })
        .await
        .expect("the 35 s hold ended by the scan");
    assert_eq!(answer["status"], "scaned");
    assert!(fake.expire());
    assert_eq!(get(&fake, &path).await["status"], "expired");
    assert!(
        !fake.scan() && fake.confirm().is_none(),
        "an expired code is done"
    );
    assert_eq!(
        get(&fake, "get_qrcode_status?qrcode=never-issued").await["status"],
        "expired"
    );
}

#[tokio::test]
async fn the_token_and_the_app_headers_are_required() {
    let fake = short_polls().await;
    let body = json!({"get_updates_buf": "", "base_info": base_info()});
    let (status, answer) = post(&fake, "getupdates", "not-the-token", body.clone()).await;
    assert_eq!(status, 200);
    assert_eq!(answer, json!({"errcode": -14, "errmsg": "session timeout"}));
    // Without iLink-App-Id / iLink-App-ClientVersion.
    let bare = poll_without_app_headers(&fake, &body).await;
    assert_eq!(bare["errcode"], -14);
    fake.set_require_app_headers(false);
    let relaxed = poll_without_app_headers(&fake, &body).await;
    assert_eq!(relaxed["ret"], 0);
    let calls = fake.calls_to("getupdates");
    assert_eq!(calls[0].code, Some(-14));
    assert!(!calls[0].ok() && calls[2].ok());
}

#[tokio::test]
async fn an_expired_session_ends_a_held_poll_and_every_call_until_a_new_login() {
    let fake = FakeWechat::start().await.unwrap();
    let held = poll(&fake, "");
    let expire = async {
        fake.wait_polling(WAIT).await.unwrap();
        fake.expire_session();
    };
    let (answer, ()) = tokio::join!(held, expire);
    assert_eq!(answer["errcode"], -14);
    assert!(answer.get("ret").is_none(), "iLink's -14 carries no ret");
    let pushed = fake.push(&Inbound::text(USER, "hi"));
    assert_eq!(
        send_text(&fake, USER, &pushed.context_token, "x").await["errcode"],
        -14
    );
    assert_eq!(fake.bot_token(), None);
    // A new login revives the bot with a new token; the old one stays dead.
    get(&fake, "get_bot_qrcode?bot_type=3").await;
    fake.scan();
    let token = fake.confirm().unwrap();
    fake.set_long_poll_hold(Duration::from_millis(50));
    let (_, ok) = post(&fake, "getupdates", &token, json!({"get_updates_buf": ""})).await;
    assert_eq!(seqs(&ok), [1]);
    assert_eq!(poll(&fake, "").await["errcode"], -14);
}

#[tokio::test]
async fn a_scripted_session_expiry_fires_once_and_stays() {
    let fake = short_polls().await;
    fake.fail("sendmessage", Trigger::Next, Failure::SessionExpired);
    let pushed = fake.push(&Inbound::text(USER, "hi"));
    assert_eq!(
        send_text(&fake, USER, &pushed.context_token, "a").await["errcode"],
        -14
    );
    assert_eq!(poll(&fake, "").await["errcode"], -14);
}

#[tokio::test]
async fn the_cursor_returns_what_came_after_it_and_an_old_one_replays() {
    let fake = short_polls().await;
    let empty = poll(&fake, "").await;
    assert_eq!(
        seqs(&empty),
        Vec::<u64>::new(),
        "the hold elapsed: an empty answer"
    );
    assert_eq!(empty["longpolling_timeout_ms"], 50);
    let start = empty["get_updates_buf"].as_str().unwrap().to_owned();
    assert!(!start.is_empty());

    fake.push(&Inbound::text(USER, "one"));
    fake.push(&Inbound::text(OTHER, "two"));
    let first = poll(&fake, &start).await;
    assert_eq!(seqs(&first), [1, 2]);
    assert_eq!(first["msgs"][0]["item_list"][0]["text_item"]["text"], "one");
    assert_eq!(first["msgs"][1]["from_user_id"], OTHER);
    let after_two = first["get_updates_buf"].as_str().unwrap().to_owned();
    assert_eq!(after_two, fake.cursor_after(2));

    fake.push(&Inbound::text(USER, "three"));
    let next = poll(&fake, &after_two).await;
    assert_eq!(seqs(&next), [3], "nothing seen is sent again");
    let after_three = next["get_updates_buf"].as_str().unwrap().to_owned();
    // A client restarted with a persisted cursor neither loses nor replays...
    assert_eq!(seqs(&poll(&fake, &after_three).await), Vec::<u64>::new());
    // ...and one that kept an older cursor gets what came after it again.
    assert_eq!(seqs(&poll(&fake, &after_two).await), [3]);
    assert_eq!(seqs(&poll(&fake, &start).await), [1, 2, 3]);
    // A cursor the fake never issued is refused.
    assert_eq!(poll(&fake, "bm90LWEtY3Vyc29y").await["ret"], -1);
    assert_eq!(poll(&fake, &fake.cursor_after(9)).await["ret"], -1);
}

#[tokio::test]
async fn a_held_poll_answers_when_a_message_arrives() {
    let fake = FakeWechat::start().await.unwrap();
    let held = poll(&fake, "");
    let push = async {
        fake.wait_polling(WAIT).await.unwrap();
        fake.push(&Inbound::text(USER, "hello"))
    };
    let (answer, pushed) = tokio::time::timeout(WAIT, async { tokio::join!(held, push) })
        .await
        .expect("answered before the 35 s hold");
    assert_eq!(seqs(&answer), [1]);
    let msg = &answer["msgs"][0];
    assert_eq!(msg["context_token"], pushed.context_token.as_str());
    assert_eq!(msg["message_type"], 1);
    assert_eq!(msg["to_user_id"], BOT_ID);
    assert_eq!(fake.waiting_polls(), 0);
}

#[tokio::test]
async fn a_reply_needs_the_users_context_token_and_at_most_ten_use_one() {
    let fake = short_polls().await;
    let pushed = fake.push(&Inbound::text(USER, "hi"));
    let other = fake.push(&Inbound::text(OTHER, "hey"));
    assert_eq!(send_text(&fake, USER, "", "x").await["ret"], -2);
    assert_eq!(send_text(&fake, USER, "made-up", "x").await["ret"], -2);
    assert_eq!(
        send_text(&fake, USER, &other.context_token, "x").await["ret"],
        -2,
        "another user's token"
    );
    for i in 0..REPLIES_PER_CONTEXT {
        let answer = send_text(&fake, USER, &pushed.context_token, &format!("part {i}")).await;
        assert_eq!(answer, json!({}), "success is an empty object");
    }
    let eleventh = send_text(&fake, USER, &pushed.context_token, "one more").await;
    assert_eq!(eleventh["ret"], -2);
    let sent = fake
        .wait_sent(USER, REPLIES_PER_CONTEXT, WAIT)
        .await
        .unwrap();
    assert_eq!(sent[0].text(), Some("part 0"));
    assert!(sent.iter().all(|s| s.delivered));
    // A new message from the user brings a fresh token.
    let again = fake.push(&Inbound::text(USER, "more please"));
    assert_eq!(
        send_text(&fake, USER, &again.context_token, "ok").await,
        json!({})
    );
}

#[tokio::test]
async fn text_is_limited_to_16_kib_of_utf8() {
    let fake = short_polls().await;
    let pushed = fake.push(&Inbound::text(USER, "hi"));
    let ascii = "a".repeat(MAX_TEXT_BYTES);
    assert_eq!(
        send_text(&fake, USER, &pushed.context_token, &ascii).await,
        json!({})
    );
    let over = "a".repeat(MAX_TEXT_BYTES + 1);
    assert_eq!(
        send_text(&fake, USER, &pushed.context_token, &over).await["ret"],
        -2
    );
    // 6000 CJK characters are 18000 bytes: over, though far under 16384 characters.
    let cjk = "字".repeat(6000);
    assert_eq!(
        send_text(&fake, USER, &pushed.context_token, &cjk).await["ret"],
        -2
    );
    assert_eq!(fake.sent().len(), 1);
}

#[tokio::test]
async fn a_message_holds_one_item_of_a_bot_finished_message() {
    let fake = short_polls().await;
    let pushed = fake.push(&Inbound::text(USER, "hi"));
    let mut two = text_msg(USER, &pushed.context_token, "a");
    two["msg"]["item_list"] = json!([{"type": 1, "text_item": {"text": "a"}},
                                     {"type": 1, "text_item": {"text": "b"}}]);
    assert_eq!(
        post(&fake, "sendmessage", BOT_TOKEN, two).await.1["ret"],
        -2
    );
    let mut user_type = text_msg(USER, &pushed.context_token, "a");
    user_type["msg"]["message_type"] = json!(1);
    assert_eq!(
        post(&fake, "sendmessage", BOT_TOKEN, user_type).await.1["ret"],
        -2
    );
    assert!(fake.sent().is_empty());
}

#[tokio::test]
async fn past_the_reply_window_a_send_succeeds_but_is_dropped() {
    let fake = short_polls().await;
    let pushed = fake.push(&Inbound::text(USER, "hi"));
    fake.advance_clock(REPLY_WINDOW + Duration::from_secs(1));
    assert_eq!(
        send_text(&fake, USER, &pushed.context_token, "late").await,
        json!({})
    );
    assert!(!fake.sent()[0].delivered);
}

#[tokio::test]
async fn scripted_failures_fire_after_the_token_check() {
    let fake = short_polls().await;
    let pushed = fake.push(&Inbound::text(USER, "hi"));
    fake.fail("sendmessage", Trigger::Times(2), Failure::RateLimited);
    fake.fail(
        "sendmessage",
        Trigger::Nth(4),
        Failure::Error {
            ret: -1,
            errmsg: "system error".into(),
        },
    );
    // A refused token uses no failure up.
    let (_, bad) = post(&fake, "sendmessage", "wrong", text_msg(USER, "x", "y")).await;
    assert_eq!(bad["errcode"], -14);
    let limited = send_text(&fake, USER, &pushed.context_token, "a").await;
    assert_eq!(limited, json!({"ret": -2, "errmsg": "rate limited"}));
    assert_eq!(
        send_text(&fake, USER, &pushed.context_token, "b").await["ret"],
        -2
    );
    assert_eq!(
        send_text(&fake, USER, &pushed.context_token, "c").await,
        json!({})
    );
    assert_eq!(
        send_text(&fake, USER, &pushed.context_token, "d").await["ret"],
        -1
    );
    fake.fail("sendmessage", Trigger::Next, Failure::Http(502));
    let (status, _) = post(
        &fake,
        "sendmessage",
        BOT_TOKEN,
        text_msg(USER, &pushed.context_token, "e"),
    )
    .await;
    assert_eq!(status, 502);
    assert_eq!(fake.sent().len(), 1);
    // A delay does the send and answers late: a client timeout.
    fake.fail(
        "sendmessage",
        Trigger::Next,
        Failure::Delay(Duration::from_secs(30)),
    );
    let slow = request(&fake, "sendmessage", BOT_TOKEN, true)
        .timeout(Duration::from_millis(200))
        .body(text_msg(USER, &pushed.context_token, "f").to_string())
        .send()
        .await;
    assert!(slow.is_err(), "the client timed out");
    fake.wait_until("the delayed send took effect", WAIT, |f| {
        f.sent().len() == 2
    })
    .await
    .unwrap();
    // A slow body does the send and answers at once, but its body stalls after a byte.
    fake.fail(
        "sendmessage",
        Trigger::Next,
        Failure::SlowBody(Duration::from_secs(30)),
    );
    let answer = request(&fake, "sendmessage", BOT_TOKEN, true)
        .body(text_msg(USER, &pushed.context_token, "g").to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 200);
    assert_eq!(fake.sent().len(), 3, "done before it answered");
    let body = tokio::time::timeout(Duration::from_millis(200), answer.bytes()).await;
    assert!(body.is_err(), "the body stalled");
}

#[tokio::test]
async fn typing_needs_the_users_ticket() {
    let fake = short_polls().await;
    let pushed = fake.push(&Inbound::text(USER, "hi"));
    let (_, unknown) = post(
        &fake,
        "getconfig",
        BOT_TOKEN,
        json!({"ilink_user_id": "nobody@im.wechat"}),
    )
    .await;
    assert_ne!(unknown["ret"], 0);
    let (_, config) = post(
        &fake,
        "getconfig",
        BOT_TOKEN,
        json!({"ilink_user_id": USER, "context_token": pushed.context_token}),
    )
    .await;
    assert_eq!(config["ret"], 0);
    let ticket = config["typing_ticket"].as_str().unwrap();
    let typing = |ticket: &str, status: i64| {
        json!({"ilink_user_id": USER, "typing_ticket": ticket, "status": status,
               "base_info": base_info()})
    };
    assert_eq!(
        post(&fake, "sendtyping", BOT_TOKEN, typing("forged", 1))
            .await
            .1["ret"],
        -1
    );
    assert_eq!(
        post(&fake, "sendtyping", BOT_TOKEN, typing(ticket, 1))
            .await
            .1["ret"],
        0
    );
    assert_eq!(
        post(&fake, "sendtyping", BOT_TOKEN, typing(ticket, 2))
            .await
            .1["ret"],
        0
    );
    assert_eq!(
        fake.typing(),
        [
            Typing {
                user: USER.into(),
                status: 1
            },
            Typing {
                user: USER.into(),
                status: 2
            }
        ]
    );
}

#[test]
fn aes_128_ecb_pads_and_round_trips() {
    let key = *b"0123456789abcdef";
    for len in [0, 1, 15, 16, 17, 1000] {
        let plain: Vec<u8> = (0..len).map(|i| i as u8).collect();
        let encrypted = encrypt(&plain, &key);
        assert_eq!(encrypted.len() as u64, padded_size(len as u64));
        assert_eq!(decrypt(&encrypted, &key).unwrap(), plain);
    }
    // FIPS-197 C.1's key and block, as the first block of ECB.
    let key: [u8; 16] = core::array::from_fn(|i| i as u8);
    let plain: Vec<u8> = (0..16u8).map(|i| i * 0x11).collect();
    assert_eq!(
        cdn::hex(&encrypt(&plain, &key)[..16]),
        "69c4e0d86a7b0430d8cdb78070b4c55a"
    );
    assert!(decrypt(&[0u8; 15], &key).is_none());
    assert!(decrypt(&encrypt(b"x", &key), b"fedcba9876543210").is_none());
    // Both encodings of a media key.
    assert_eq!(parse_aes_key(&STANDARD.encode(key)), Some(key));
    assert_eq!(parse_aes_key(&STANDARD.encode(cdn::hex(&key))), Some(key));
    assert_eq!(parse_aes_key("c2hvcnQ="), None);
}

#[tokio::test]
async fn inbound_media_download_and_decrypt_with_their_keys() {
    let fake = short_polls().await;
    let png = b"\x89PNG\r\n\x1a\nfake image bytes";
    fake.push(&Inbound::image(USER, png));
    fake.push(&Inbound::file(USER, "report.pdf", b"%PDF-1.4 fake"));
    fake.push(&Inbound::voice(
        USER,
        b"#!SILK_V3 fake",
        Some("hello there"),
    ));
    fake.push(&Inbound::video(USER, b"fake mp4").and_text("look"));
    let msgs = poll(&fake, "").await["msgs"].as_array().unwrap().clone();
    let http = reqwest::Client::new();
    let fetch = |url: String| {
        let http = http.clone();
        async move {
            http.get(url)
                .send()
                .await
                .unwrap()
                .bytes()
                .await
                .unwrap()
                .to_vec()
        }
    };
    // The image: the hex key in image_item.aeskey, base64 of the raw key in media.aes_key.
    let image = &msgs[0]["item_list"][0];
    assert_eq!(image["type"], 2);
    let media = &image["image_item"]["media"];
    let key = parse_aes_key(media["aes_key"].as_str().unwrap()).unwrap();
    assert_eq!(
        cdn::hex(&key),
        image["image_item"]["aeskey"].as_str().unwrap()
    );
    let encrypted = fetch(media["full_url"].as_str().unwrap().to_owned()).await;
    assert_eq!(decrypt(&encrypted, &key).unwrap(), png);
    // The file: base64 of the hex key; the URL built from encrypt_query_param works too.
    let file = &msgs[1]["item_list"][0]["file_item"];
    assert_eq!(file["file_name"], "report.pdf");
    assert_eq!(file["len"], "13");
    let key = parse_aes_key(file["media"]["aes_key"].as_str().unwrap()).unwrap();
    let built = fake.download_url(file["media"]["encrypt_query_param"].as_str().unwrap());
    assert_eq!(
        decrypt(&fetch(built).await, &key).unwrap(),
        b"%PDF-1.4 fake"
    );
    let voice = &msgs[2]["item_list"][0];
    assert_eq!(voice["type"], 3);
    assert_eq!(voice["voice_item"]["text"], "hello there");
    let video = &msgs[3]["item_list"];
    assert_eq!(video[0]["type"], 5);
    assert_eq!(video[1]["text_item"]["text"], "look");
    // A parameter that is not percent-encoded does not reach the file.
    let raw = format!(
        "{}/download?encrypted_query_param={}",
        fake.cdn_base_url(),
        file["media"]["encrypt_query_param"].as_str().unwrap()
    );
    assert_eq!(http.get(raw).send().await.unwrap().status(), 404);
}

/// The upload request for `plain` under `key`, as the SDK builds it.
fn upload_request(to: &str, plain: &[u8], key: &[u8; 16], media_type: i64) -> Value {
    json!({"filekey": "f1", "media_type": media_type, "to_user_id": to,
           "rawsize": plain.len(), "rawfilemd5": cdn::md5_hex(plain),
           "filesize": padded_size(plain.len() as u64), "no_need_thumb": true,
           "aeskey": cdn::hex(key), "base_info": base_info()})
}

async fn cdn_post(url: &str, body: Vec<u8>) -> (u16, Option<String>, Option<String>) {
    let response = reqwest::Client::new()
        .post(url)
        .header("content-type", "application/octet-stream")
        .body(body)
        .send()
        .await
        .unwrap();
    let header = |name: &str| {
        response
            .headers()
            .get(name)
            .map(|v| v.to_str().unwrap().to_owned())
    };
    let (param, error) = (header("x-encrypted-param"), header("x-error-message"));
    (response.status().as_u16(), param, error)
}

#[tokio::test]
async fn an_upload_round_trips_through_the_cdn_into_a_sent_file() {
    let fake = short_polls().await;
    let pushed = fake.push(&Inbound::text(USER, "send me the report"));
    let plain = b"the report, in full".to_vec();
    let key = *b"k-0123456789abcd";
    let (_, urls) = post(
        &fake,
        "getuploadurl",
        BOT_TOKEN,
        upload_request(USER, &plain, &key, 3),
    )
    .await;
    let param = urls["upload_param"].as_str().unwrap();
    assert!(urls.get("upload_full_url").is_none(), "the README's answer");
    let mut url = reqwest::Url::parse(&format!("{}/upload", fake.cdn_base_url())).unwrap();
    url.query_pairs_mut()
        .append_pair("encrypted_query_param", param)
        .append_pair("filekey", "f1");
    // Wrong bytes are refused, each with its reason.
    let (status, _, why) = cdn_post(url.as_str(), plain.clone()).await;
    assert_eq!(
        (status, why.as_deref()),
        (400, Some("size mismatch: body is not filesize bytes"))
    );
    let (status, _, why) = cdn_post(url.as_str(), encrypt(&plain, b"another-key-0000")).await;
    assert_eq!(
        (status, why.as_deref()),
        (400, Some("decrypt failed: not AES-128-ECB under aeskey"))
    );
    let (status, download, _) = cdn_post(url.as_str(), encrypt(&plain, &key)).await;
    assert_eq!(status, 200);
    let download = download.unwrap();
    let (again, _, _) = cdn_post(url.as_str(), encrypt(&plain, &key)).await;
    assert_eq!(again, 400, "an upload parameter is used once");
    let upload = &fake.uploads()[0];
    assert_eq!(upload.plain.as_deref(), Some(plain.as_slice()));
    assert_eq!(upload.refusals.len(), 3);

    let file_msg = |aes_key: String| {
        json!({"msg": {"from_user_id": "", "to_user_id": USER, "client_id": "c-f",
                       "message_type": 2, "message_state": 2,
                       "context_token": pushed.context_token,
                       "item_list": [{"type": 4, "file_item": {
                           "media": {"encrypt_query_param": download, "aes_key": aes_key,
                                     "encrypt_type": 1},
                           "file_name": "report.txt", "md5": cdn::md5_hex(&plain),
                           "len": plain.len().to_string()}}]}})
    };
    let wrong = file_msg(STANDARD.encode(cdn::hex(b"another-key-0000")));
    assert_eq!(
        post(&fake, "sendmessage", BOT_TOKEN, wrong).await.1["ret"],
        -2
    );
    let right = file_msg(STANDARD.encode(cdn::hex(&key)));
    assert_eq!(
        post(&fake, "sendmessage", BOT_TOKEN, right).await.1,
        json!({})
    );
    let sent = fake.wait_sent(USER, 1, WAIT).await.unwrap();
    assert_eq!(
        sent[0].item,
        SentItem::File {
            name: "report.txt".into(),
            bytes: plain
        }
    );
}

#[tokio::test]
async fn getuploadurl_checks_what_it_is_told() {
    let fake = short_polls().await;
    fake.set_upload_full_url(true);
    fake.push(&Inbound::text(USER, "hi"));
    let key = [7u8; 16];
    let plain = b"0123456789abcdef";
    let call = |body: Value| post(&fake, "getuploadurl", BOT_TOKEN, body);
    let mut wrong_size = upload_request(USER, plain, &key, 3);
    wrong_size["filesize"] = json!(16);
    assert_eq!(
        call(wrong_size).await.1["ret"],
        -1,
        "16 bytes encrypt to 32"
    );
    assert_eq!(
        call(upload_request("dummy@im.wechat", plain, &key, 3))
            .await
            .1["ret"],
        -1
    );
    let mut image = upload_request(USER, plain, &key, 1);
    image.as_object_mut().unwrap().remove("no_need_thumb");
    assert_eq!(
        call(image).await.1["ret"],
        -1,
        "an image needs its thumb fields"
    );
    let (_, ok) = call(upload_request(USER, plain, &key, 1)).await;
    let full = ok["upload_full_url"].as_str().unwrap();
    let (status, download, _) = cdn_post(full, encrypt(plain, &key)).await;
    assert_eq!(status, 200);
    assert!(download.unwrap().starts_with("++//"));
}

#[tokio::test]
async fn unknown_routes_and_methods_are_refused() {
    let fake = short_polls().await;
    let (status, _) = post(&fake, "no_such_endpoint", BOT_TOKEN, json!({})).await;
    assert_eq!(status, 404);
    let status = reqwest::get(format!("{}/ilink/bot/getupdates", fake.base_url()))
        .await
        .unwrap()
        .status();
    assert_eq!(status, 405);
    assert_eq!(fake.calls_to("unknown").len(), 1);
}
