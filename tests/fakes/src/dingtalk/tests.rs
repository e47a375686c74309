//! The fake driven through its sockets, as the adapter will drive it: stream mode
//! (open, tickets, pushes, acks, ping, disconnect, redelivery, bad frames) and the REST
//! edge (tokens, robot messages, files, uploads, cards, scripted failures).

use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message as Ws;

use super::*;

const WAIT: Duration = Duration::from_secs(5);

type Socket = crate::skeleton::client::Client;

fn subscription() -> Value {
    json!([{"type": "CALLBACK", "topic": TOPIC_BOT_MESSAGE}])
}

async fn post(fake: &FakeDingTalk, path: &str, token: Option<&str>, body: Value) -> (u16, Value) {
    let mut request = reqwest::Client::new()
        .post(format!("{}{path}", fake.api_url()))
        .json(&body);
    if let Some(token) = token {
        request = request.header("x-acs-dingtalk-access-token", token);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

async fn open(fake: &FakeDingTalk) -> (String, String) {
    let body = json!({"clientId": CLIENT_ID, "clientSecret": CLIENT_SECRET,
                      "subscriptions": subscription(), "ua": "test", "localIp": ""});
    let (status, answer) = post(fake, "/v1.0/gateway/connections/open", None, body).await;
    assert_eq!(status, 200, "{answer}");
    let endpoint = answer["endpoint"].as_str().unwrap().to_owned();
    (endpoint, answer["ticket"].as_str().unwrap().to_owned())
}

fn socket_url(endpoint: &str, ticket: &str) -> String {
    let mut url = reqwest::Url::parse(endpoint).unwrap();
    url.query_pairs_mut().append_pair("ticket", ticket);
    url.to_string()
}

async fn connect(fake: &FakeDingTalk) -> Socket {
    let (endpoint, ticket) = open(fake).await;
    let url = socket_url(&endpoint, &ticket);
    tokio_tungstenite::connect_async(url).await.unwrap().0
}

async fn next_frame(socket: &mut Socket) -> Value {
    crate::skeleton::client::next_json(socket, WAIT).await
}

async fn ack(socket: &mut Socket, frame: &Value, code: i64, data: &str) {
    let ack = json!({"code": code, "message": "OK", "data": data,
                     "headers": {"messageId": frame["headers"]["messageId"], "contentType": "application/json"}});
    socket.send(Ws::Text(ack.to_string().into())).await.unwrap();
}

async fn token(fake: &FakeDingTalk) -> String {
    let body = json!({"appKey": CLIENT_ID, "appSecret": CLIENT_SECRET});
    let (status, answer) = post(fake, "/v1.0/oauth2/accessToken", None, body).await;
    assert_eq!(status, 200);
    assert_eq!(answer["expireIn"], TOKEN_EXPIRE_SECS);
    answer["accessToken"].as_str().unwrap().to_owned()
}

fn markdown(cid: &str, text: &str) -> Value {
    json!({"robotCode": ROBOT_CODE, "openConversationId": cid, "msgKey": "sampleMarkdown",
           "msgParam": json!({"title": "DeerFlow", "text": text}).to_string()})
}

#[tokio::test]
async fn a_ticket_opens_one_connection_and_a_callback_is_pushed_and_acked() {
    let fake = FakeDingTalk::start().await.unwrap();
    let wrong =
        json!({"clientId": CLIENT_ID, "clientSecret": "nope", "subscriptions": subscription()});
    let (status, answer) = post(&fake, "/v1.0/gateway/connections/open", None, wrong).await;
    assert_eq!(
        (status, answer["code"].as_str()),
        (400, Some(code::INVALID_CLIENT))
    );
    let unsubscribed =
        json!({"clientId": CLIENT_ID, "clientSecret": CLIENT_SECRET, "subscriptions": []});
    let (status, _) = post(&fake, "/v1.0/gateway/connections/open", None, unsubscribed).await;
    assert_eq!(status, 400);

    let (endpoint, ticket) = open(&fake).await;
    assert_eq!(endpoint, format!("ws://{}/connect", fake.addr()));
    assert!(ticket.contains('+') && ticket.contains('/'), "{ticket}");
    let url = socket_url(&endpoint, &ticket);
    let mut socket = tokio_tungstenite::connect_async(&url).await.unwrap().0;
    fake.wait_connected(1, WAIT).await.unwrap();
    assert_eq!(fake.connections()[0].ticket, ticket);
    assert!(
        tokio_tungstenite::connect_async(&url).await.is_err(),
        "a ticket works once"
    );
    let raw = format!("ws://{}/connect?ticket={ticket}", fake.addr());
    assert!(
        tokio_tungstenite::connect_async(raw).await.is_err(),
        "an unencoded ticket is not it"
    );
    assert_eq!(fake.refused_upgrades(), 2);

    let message = Message::group_text("cidGroup1", "staff-1", "hello").nick("Ann");
    let pushed = fake.push(&message.to_json());
    assert_eq!(pushed.msg_id.as_deref(), Some(message.id()));
    let frame = next_frame(&mut socket).await;
    assert_eq!(frame["type"], "CALLBACK");
    assert_eq!(frame["headers"]["topic"], TOPIC_BOT_MESSAGE);
    assert_eq!(frame["headers"]["messageId"], pushed.message_id.as_str());
    let data: Value = serde_json::from_str(frame["data"].as_str().unwrap()).unwrap();
    assert_eq!(data["msgId"], message.id());
    assert_eq!(data["senderNick"], "Ann");
    assert_eq!(data["robotCode"], ROBOT_CODE);
    assert_eq!(
        (
            data["conversationType"].as_str(),
            data["text"]["content"].as_str()
        ),
        (Some("2"), Some("hello"))
    );
    ack(&mut socket, &frame, 200, r#"{"response":"OK"}"#).await;
    let acked = fake.wait_acked(&pushed.message_id, WAIT).await.unwrap();
    assert!(acked.known);
    assert_eq!(acked.content_type.as_deref(), Some("application/json"));
    assert_eq!(fake.deliveries().len(), 1);
}

#[tokio::test]
async fn pings_expect_their_data_back_and_disconnect_asks_for_a_new_ticket() {
    let fake = FakeDingTalk::start().await.unwrap();
    let mut socket = connect(&fake).await;
    fake.wait_connected(1, WAIT).await.unwrap();
    let id = fake.ping().pop().unwrap();
    let frame = next_frame(&mut socket).await;
    assert_eq!(
        (frame["type"].as_str(), frame["headers"]["topic"].as_str()),
        (Some("SYSTEM"), Some("ping"))
    );
    assert_eq!(fake.ping_echoed(&id), None);
    ack(&mut socket, &frame, 200, "{}").await;
    fake.wait_any_ack(&id, WAIT).await.unwrap();
    assert_eq!(
        fake.ping_echoed(&id),
        Some(false),
        "the data was not echoed"
    );
    let id = fake.ping().pop().unwrap();
    let frame = next_frame(&mut socket).await;
    ack(&mut socket, &frame, 200, frame["data"].as_str().unwrap()).await;
    fake.wait_acked(&id, WAIT).await.unwrap();
    assert_eq!(fake.ping_echoed(&id), Some(true));

    let id = fake.disconnect().pop().unwrap();
    let frame = next_frame(&mut socket).await;
    assert_eq!(frame["headers"]["topic"], "disconnect");
    assert_eq!(frame["headers"]["messageId"], id.as_str());
    socket.close(None).await.unwrap();
    fake.wait_until("the old connection closed", WAIT, |f| {
        f.open_connections() == 0
    })
    .await
    .unwrap();
    let _again = connect(&fake).await;
    fake.wait_connected(1, WAIT).await.unwrap();
    assert_eq!(fake.tickets_issued(), 2);
}

#[tokio::test]
async fn unacked_callbacks_come_again_under_the_same_id_and_held_ones_wait_for_a_client() {
    let fake = FakeDingTalk::start().await.unwrap();
    fake.set_redeliver_after(Some(Duration::from_millis(50)));
    // Pushed before anyone connects: held, then delivered to the first connection.
    let pushed = fake.push(&Message::p2p_text("staff-2", "first").to_json());
    assert!(fake.deliveries().is_empty());
    let mut socket = connect(&fake).await;
    let first = next_frame(&mut socket).await;
    assert_eq!(first["headers"]["messageId"], pushed.message_id.as_str());
    // Not acked: it comes again; acked 500: again; acked 200: never again.
    let second = next_frame(&mut socket).await;
    assert_eq!(second["headers"]["messageId"], pushed.message_id.as_str());
    ack(&mut socket, &second, 500, "{}").await;
    let third = next_frame(&mut socket).await;
    ack(&mut socket, &third, 200, "{}").await;
    fake.wait_acked(&pushed.message_id, WAIT).await.unwrap();
    let attempts: Vec<u32> = fake.deliveries().iter().map(|d| d.attempt).collect();
    assert_eq!(
        attempts[..3],
        [0, 1, 2],
        "a slow machine may see a 4th, never fewer"
    );
    // A stray ack and frames that are no ack.
    socket
        .send(Ws::Text(
            r#"{"code":200,"headers":{"messageId":"nobody"}}"#.into(),
        ))
        .await
        .unwrap();
    socket.send(Ws::Text("not json".into())).await.unwrap();
    socket
        .send(Ws::Text(r#"{"headers":{}}"#.into()))
        .await
        .unwrap();
    socket.send(Ws::Binary(vec![1, 2].into())).await.unwrap();
    fake.wait_until("three bad frames", WAIT, |f| f.bad_frames() == 3)
        .await
        .unwrap();
    assert!(
        fake.acks()
            .iter()
            .any(|a| a.message_id == "nobody" && !a.known)
    );
    assert!(fake.push_raw("{broken"));
    let raw = async {
        loop {
            // Skipping a late redelivery a slow machine may still see.
            if let Ws::Text(text) = socket.next().await.unwrap().unwrap()
                && text.as_str() == "{broken"
            {
                break;
            }
        }
    };
    tokio::time::timeout(WAIT, raw)
        .await
        .expect("the raw frame came");
    fake.close_connections();
    fake.wait_until("closed", WAIT, |f| f.open_connections() == 0)
        .await
        .unwrap();
}

#[tokio::test]
async fn tokens_are_checked_and_the_stale_mode_refuses_old_ones() {
    let fake = FakeDingTalk::start().await.unwrap();
    let (status, answer) = post(
        &fake,
        "/v1.0/oauth2/accessToken",
        None,
        json!({"appKey": CLIENT_ID, "appSecret": "wrong"}),
    )
    .await;
    assert_eq!(
        (status, answer["code"].as_str()),
        (400, Some(code::INVALID_CLIENT))
    );
    fake.add_group("cidG");
    let (status, answer) = post(
        &fake,
        "/v1.0/robot/groupMessages/send",
        None,
        markdown("cidG", "x"),
    )
    .await;
    assert_eq!(
        (status, answer["code"].as_str()),
        (401, Some(code::INVALID_AUTHENTICATION))
    );
    let old = token(&fake).await;
    let (status, _) = post(
        &fake,
        "/v1.0/robot/groupMessages/send",
        Some(&old),
        markdown("cidG", "x"),
    )
    .await;
    assert_eq!(status, 200);
    fake.make_token_stale();
    let (status, _) = post(
        &fake,
        "/v1.0/robot/groupMessages/send",
        Some(&old),
        markdown("cidG", "y"),
    )
    .await;
    assert_eq!(status, 401);
    let fresh = token(&fake).await;
    let (status, _) = post(
        &fake,
        "/v1.0/robot/groupMessages/send",
        Some(&fresh),
        markdown("cidG", "y"),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(fake.tokens(), [old, fresh]);
    let texts: Vec<String> = fake.sent().iter().map(|s| s.text().to_owned()).collect();
    assert_eq!(texts, ["x", "y"]);
    assert_eq!(fake.sent()[0].title(), Some("DeerFlow"));
}

#[tokio::test]
async fn robot_messages_follow_dingtalks_rules() {
    let fake = FakeDingTalk::start().await.unwrap();
    let t = token(&fake).await;
    let send = |path: &'static str, body: Value| {
        let (fake, t) = (&fake, t.clone());
        async move { post(fake, path, Some(&t), body).await }
    };
    let group = "/v1.0/robot/groupMessages/send";
    let (status, answer) = send(group, markdown("cidUnknown", "x")).await;
    assert_eq!(
        (status, answer["code"].as_str()),
        (400, Some(code::CONVERSATION_NOT_FOUND))
    );
    fake.push(&Message::group_text("cidKnown", "staff-3", "hi").to_json());
    let mut object_param = markdown("cidKnown", "x");
    object_param["msgParam"] = json!({"title": "t", "text": "x"});
    assert_eq!(
        send(group, object_param).await.1["code"],
        code::INVALID_MSG_PARAM
    );
    let mut wrong_robot = markdown("cidKnown", "x");
    wrong_robot["robotCode"] = json!("other");
    assert_eq!(
        send(group, wrong_robot).await.1["code"],
        code::INVALID_ROBOT_CODE
    );
    fake.set_max_markdown_bytes(10);
    assert_eq!(
        send(group, markdown("cidKnown", "ünïcödé…")).await.1["code"],
        code::CONTENT_TOO_LONG
    );
    let (status, answer) = send(group, markdown("cidKnown", "fits")).await;
    assert_eq!(status, 200);
    assert!(
        answer["processQueryKey"]
            .as_str()
            .unwrap()
            .starts_with("fake-process")
    );
    let mut unknown_key = markdown("cidKnown", "x");
    unknown_key["msgKey"] = json!("sampleVideo");
    assert_eq!(
        send(group, unknown_key).await.1["code"],
        code::INVALID_MSG_KEY
    );

    let private = "/v1.0/robot/oToMessages/batchSend";
    fake.add_user("staff-4");
    fake.flow_control("staff-5");
    fake.add_user("staff-5");
    let body = |ids: Value| {
        json!({"robotCode": ROBOT_CODE, "userIds": ids, "msgKey": "sampleText",
                                   "msgParam": json!({"content": "hello"}).to_string()})
    };
    let (status, answer) = send(
        private,
        body(json!(["staff-3", "staff-4", "ghost", "staff-5"])),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(answer["invalidStaffIdList"], json!(["ghost"]));
    assert_eq!(answer["flowControlledStaffIdList"], json!(["staff-5"]));
    let last = fake.sent().pop().unwrap();
    assert_eq!(
        (last.route, last.user_ids.clone(), last.text()),
        (
            "private_send",
            vec!["staff-3".to_owned(), "staff-4".to_owned()],
            "hello"
        )
    );
    assert_eq!(send(private, body(json!([]))).await.0, 400);
    let many: Vec<String> = (0..=MAX_USER_IDS).map(|i| format!("u{i}")).collect();
    assert_eq!(send(private, body(json!(many))).await.0, 400);
    fake.fail("group_send", 1, Failure::Http(429));
    let response = reqwest::Client::new()
        .post(format!("{}{group}", fake.api_url()))
        .header("x-acs-dingtalk-access-token", &t)
        .json(&markdown("cidKnown", "x"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 429);
    assert_eq!(response.headers()["retry-after"], "1");
    fake.fail("group_send", 2, Failure::Code(403, code::QPS_LIMIT.into()));
    assert_eq!(
        send(group, markdown("cidKnown", "x")).await.1["code"],
        code::QPS_LIMIT
    );
    assert_eq!(send(group, markdown("cidKnown", "x")).await.0, 403);
    assert_eq!(
        send(group, markdown("cidKnown", "x")).await.0,
        200,
        "the failures are used up"
    );
}

#[tokio::test]
async fn files_download_through_a_signed_url_and_uploads_become_media_ids() {
    let fake = FakeDingTalk::start().await.unwrap();
    let t = token(&fake).await;
    fake.put_file("dc-photo", b"PNGDATA".to_vec());
    let path = "/v1.0/robot/messageFiles/download";
    let (status, answer) = post(
        &fake,
        path,
        Some(&t),
        json!({"downloadCode": "nope", "robotCode": ROBOT_CODE}),
    )
    .await;
    assert_eq!(
        (status, answer["code"].as_str()),
        (400, Some(code::DOWNLOAD_CODE_INVALID))
    );
    let (status, answer) = post(
        &fake,
        path,
        Some(&t),
        json!({"downloadCode": "dc-photo", "robotCode": ROBOT_CODE}),
    )
    .await;
    assert_eq!(status, 200);
    let url = answer["downloadUrl"].as_str().unwrap();
    let bytes = reqwest::get(url).await.unwrap().bytes().await.unwrap();
    assert_eq!(&bytes[..], b"PNGDATA");
    let forged = url.replace("sig=", "sig=x");
    assert_eq!(reqwest::get(forged).await.unwrap().status(), 403);

    let upload = |kind: &'static str, token: String, bytes: Vec<u8>| {
        let url = format!("{}/media/upload", fake.oapi_url());
        async move {
            let form = reqwest::multipart::Form::new().part(
                "media",
                reqwest::multipart::Part::bytes(bytes).file_name("report.pdf"),
            );
            let response = reqwest::Client::new()
                .post(url)
                .query(&[("access_token", token.as_str()), ("type", kind)])
                .multipart(form)
                .send()
                .await
                .unwrap();
            response.json::<Value>().await.unwrap()
        }
    };
    assert_eq!(
        upload("file", "stale".into(), b"x".to_vec()).await["errcode"],
        code::LEGACY_INVALID_TOKEN
    );
    assert_eq!(
        upload("sticker", t.clone(), b"x".to_vec()).await["errcode"],
        code::LEGACY_INVALID_TYPE
    );
    assert_eq!(
        upload("file", t.clone(), Vec::new()).await["errcode"],
        code::LEGACY_INVALID_SIZE
    );
    let answer = upload("file", t.clone(), b"%PDF".to_vec()).await;
    assert_eq!(answer["errcode"], 0);
    let media_id = answer["media_id"].as_str().unwrap().to_owned();
    assert_eq!(fake.uploads()[0].file_name, "report.pdf");
    fake.add_group("cidF");
    let file = |media: &str| {
        json!({"robotCode": ROBOT_CODE, "openConversationId": "cidF", "msgKey": "sampleFile",
        "msgParam": json!({"mediaId": media, "fileName": "report.pdf", "fileType": "pdf"}).to_string()})
    };
    let send = "/v1.0/robot/groupMessages/send";
    assert_eq!(
        post(&fake, send, Some(&t), file("@unknown")).await.1["code"],
        code::MEDIA_NOT_FOUND
    );
    assert_eq!(post(&fake, send, Some(&t), file(&media_id)).await.0, 200);
    assert_eq!(fake.sent()[0].text(), "report.pdf");
}

#[tokio::test]
async fn cards_are_created_streamed_and_finalized_once() {
    let fake = FakeDingTalk::start().await.unwrap();
    let t = token(&fake).await;
    fake.push(&Message::group_text("cidCard", "staff-6", "hi").to_json());
    let create = |out: &str, template: &str, space: &str| {
        json!({
            "cardTemplateId": template, "outTrackId": out, "callbackType": "STREAM", "userIdType": 1,
            "cardData": {"cardParamMap": {"content": "working"}}, "openSpaceId": space,
            "imGroupOpenDeliverModel": {"robotCode": ROBOT_CODE}, "imRobotOpenDeliverModel": {"spaceType": "IM_ROBOT"},
        })
    };
    let path = "/v1.0/card/instances/createAndDeliver";
    let group = "dtv1.card//IM_GROUP.cidCard";
    assert_eq!(
        post(&fake, path, Some(&t), create("c1", "other", group))
            .await
            .1["code"],
        code::TEMPLATE_NOT_FOUND
    );
    assert_eq!(
        post(
            &fake,
            path,
            Some(&t),
            create("c1", CARD_TEMPLATE_ID, "dtv1.card//IM_GROUP.cidX")
        )
        .await
        .1["code"],
        code::INVALID_OPEN_SPACE
    );
    let (status, answer) = post(&fake, path, Some(&t), create("c1", CARD_TEMPLATE_ID, group)).await;
    assert_eq!((status, answer["success"].as_bool()), (200, Some(true)));
    assert_eq!(answer["result"]["deliverResults"][0]["success"], true);
    assert_eq!(
        post(&fake, path, Some(&t), create("c1", CARD_TEMPLATE_ID, group))
            .await
            .1["code"],
        code::OUT_TRACK_ID_USED
    );
    let robot = "dtv1.card//IM_ROBOT.staff-6";
    assert_eq!(
        post(&fake, path, Some(&t), create("c2", CARD_TEMPLATE_ID, robot))
            .await
            .0,
        200
    );

    let put = |body: Value| {
        let (fake, t) = (&fake, t.clone());
        async move {
            let response = reqwest::Client::new()
                .put(format!("{}/v1.0/card/streaming", fake.api_url()))
                .header("x-acs-dingtalk-access-token", t)
                .json(&body)
                .send()
                .await
                .unwrap();
            let status = response.status().as_u16();
            (status, response.json::<Value>().await.unwrap())
        }
    };
    let update = |out: &str, content: &str, fin: bool| {
        json!({"outTrackId": out, "guid": format!("g-{content}"),
        "key": "content", "content": content, "isFull": true, "isFinalize": fin, "isError": false})
    };
    assert_eq!(put(update("c1", "Hel", false)).await.0, 200);
    assert_eq!(put(update("c1", "Hello", true)).await.0, 200);
    assert_eq!(
        put(update("c1", "Hello again", true)).await.1["code"],
        code::CARD_FINALIZED
    );
    assert_eq!(
        put(update("nope", "x", false)).await.1["code"],
        code::CARD_NOT_FOUND
    );
    let mut wrong_key = update("c2", "x", false);
    wrong_key["key"] = json!("msgContent");
    assert_eq!(put(wrong_key).await.1["code"], code::CARD_KEY_UNKNOWN);
    let card = fake.card("c1").unwrap();
    assert_eq!(card.contents(), ["Hel", "Hello"]);
    assert_eq!(
        (card.finalizations(), card.refused_updates, card.content()),
        (1, 1, "Hello".to_owned())
    );
    assert_eq!(card.initial, "working");

    fake.fail("card_create", 1, Failure::SuccessFalse);
    let (status, answer) = post(&fake, path, Some(&t), create("c3", CARD_TEMPLATE_ID, group)).await;
    assert_eq!((status, answer["success"].as_bool()), (200, Some(false)));
    assert!(fake.card("c3").is_none());
    fake.fail("card_create", 1, Failure::NotDelivered);
    let (_, answer) = post(&fake, path, Some(&t), create("c4", CARD_TEMPLATE_ID, group)).await;
    assert_eq!(answer["result"]["deliverResults"][0]["success"], false);
    assert!(!fake.card("c4").unwrap().delivered);
    fake.fail("card_stream", 1, Failure::Http(500));
    assert_eq!(put(update("c2", "x", false)).await.0, 500);
    assert_eq!(put(update("c2", "x", false)).await.0, 200);
    let calls = fake.calls_to("card_stream");
    assert!(calls.iter().all(|c| c.path == "/v1.0/card/streaming"));
    assert_eq!(calls.iter().filter(|c| c.ok()).count(), 3);
}
