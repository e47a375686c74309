//! The client against the fake DingTalk (`im_bridge_fakes::dingtalk`) on 127.0.0.1:0:
//! robot messages, the one retry on a refused token (and no other retry), the error
//! mapping, file download and upload, cards and their `success` checks; and against a tiny
//! in-test server for answers no real DingTalk gives (non-JSON, oversized, redirects).

use std::time::Duration;

use axum::response::IntoResponse;
use im_bridge_channel::fixtures;
use im_bridge_channel::{ChannelError, FileHosts};
use im_bridge_fakes::dingtalk::{
    CARD_TEMPLATE_ID, CLIENT_ID, CLIENT_SECRET, Failure, FakeDingTalk, Message, ROBOT_CODE, code,
};

use super::*;

async fn start() -> (FakeDingTalk, Api) {
    let fake = FakeDingTalk::start().await.unwrap();
    let api = Api::new(
        &fake.api_url(),
        &fake.oapi_url(),
        CLIENT_ID,
        Secret::new(CLIENT_SECRET),
    )
    .and_then(|api| api.with_file_hosts(FileHosts::new(["127.0.0.1"]).unwrap()))
    .unwrap();
    (fake, api)
}

const GROUP: Recipient<'static> = Recipient::Group {
    open_conversation_id: "cidGroup",
};

fn markdown(text: &str) -> RobotMessage<'_> {
    RobotMessage::Markdown {
        title: "Agent",
        text,
    }
}

#[tokio::test]
async fn markdown_goes_to_a_group_and_to_a_user_as_a_json_string_param() {
    let (fake, api) = start().await;
    fake.push(&Message::group_text("cidGroup", "staff-1", "hi").to_json());
    let key = api
        .send(ROBOT_CODE, GROUP, &markdown("**bold** answer"))
        .await
        .unwrap();
    let to_user = Recipient::User {
        staff_id: "staff-1",
    };
    let text = markdown("working");
    api.send(ROBOT_CODE, to_user, &text).await.unwrap();
    let sent = fake.sent();
    assert_eq!(sent[0].process_query_key, key);
    assert_eq!(sent[0].conversation_id.as_deref(), Some("cidGroup"));
    assert_eq!(
        (sent[0].msg_key.as_str(), sent[0].text()),
        ("sampleMarkdown", "**bold** answer")
    );
    assert_eq!(sent[0].title(), Some("Agent"));
    assert_eq!(sent[1].user_ids, ["staff-1"]);
    assert_eq!(sent[1].msg_key, "sampleMarkdown");
    assert_eq!(fake.tokens().len(), 1, "one token serves both");
    // The header carried it; nothing else did.
    let call = &fake.calls_to("group_send")[0];
    assert!(!call.body.to_string().contains("fake-access-token"));
    let debug = format!("{api:?}");
    assert!(
        !debug.contains(CLIENT_SECRET) && !debug.contains("fake-access-token"),
        "{debug}"
    );
}

#[tokio::test]
async fn a_user_dingtalk_does_not_know_or_holds_back_is_an_error_not_a_success() {
    let (fake, api) = start().await;
    let ghost = Recipient::User { staff_id: "ghost" };
    let error = api
        .send(ROBOT_CODE, ghost, &markdown("x"))
        .await
        .unwrap_err();
    assert!(matches!(error, ApiError::NotDone { .. }), "{error:?}");
    fake.add_user("busy");
    fake.flow_control("busy");
    let busy = Recipient::User { staff_id: "busy" };
    let error = api
        .send(ROBOT_CODE, busy, &markdown("x"))
        .await
        .unwrap_err();
    assert!(
        matches!(error, ApiError::Http(HttpError::RetryAfter(d)) if d == FLOW_CONTROL_RETRY_AFTER),
        "{error:?}"
    );
    assert!(fake.sent().is_empty());
    let error = api
        .send(ROBOT_CODE, GROUP, &markdown("x"))
        .await
        .unwrap_err();
    assert!(
        matches!(&error, ApiError::Api { status: 400, code: c, .. } if c == code::CONVERSATION_NOT_FOUND),
        "{error:?}"
    );
}

#[tokio::test]
async fn a_stale_token_is_refreshed_and_the_call_sent_once_more_and_only_once() {
    let (fake, api) = start().await;
    fake.add_group("cidGroup");
    api.send(ROBOT_CODE, GROUP, &markdown("one")).await.unwrap();
    fake.make_token_stale();
    api.send(ROBOT_CODE, GROUP, &markdown("two")).await.unwrap();
    assert_eq!(fake.tokens().len(), 2);
    let statuses = fake.statuses("group_send");
    assert_eq!(statuses, [200, 401, 200]);
    let texts: Vec<String> = fake.sent().iter().map(|s| s.text().to_owned()).collect();
    assert_eq!(texts, ["one", "two"], "each delivered exactly once");
    // Refused again after the refresh: given up after the second attempt.
    let refused = Failure::Code(401, code::INVALID_AUTHENTICATION.into());
    fake.fail("group_send", 2, refused);
    let error = api
        .send(ROBOT_CODE, GROUP, &markdown("three"))
        .await
        .unwrap_err();
    assert!(error.is_token_refusal(), "{error:?}");
    assert_eq!(fake.calls_to("group_send").len(), 5);
    // A token-invalid code in the body counts too, not only the 401.
    fake.fail(
        "group_send",
        1,
        Failure::Code(400, "InvalidAuthentication".into()),
    );
    api.send(ROBOT_CODE, GROUP, &markdown("four"))
        .await
        .unwrap();
}

#[tokio::test]
async fn other_failures_are_never_sent_again_here_and_map_onto_channel_errors() {
    let (fake, api) = start().await;
    fake.add_group("cidGroup");
    fake.fail("group_send", 1, Failure::Http(500));
    let error = api
        .send(ROBOT_CODE, GROUP, &markdown("x"))
        .await
        .unwrap_err();
    assert!(matches!(
        ChannelError::from(error),
        ChannelError::Transport(_)
    ));
    fake.fail("group_send", 1, Failure::Http(429));
    let error = api
        .send(ROBOT_CODE, GROUP, &markdown("x"))
        .await
        .unwrap_err();
    assert!(
        matches!(ChannelError::from(error), ChannelError::RetryAfter(d) if d == Duration::from_secs(1))
    );
    fake.fail("group_send", 1, Failure::Code(403, code::QPS_LIMIT.into()));
    let error = api
        .send(ROBOT_CODE, GROUP, &markdown("x"))
        .await
        .unwrap_err();
    assert!(
        matches!(error, ApiError::Http(HttpError::RetryAfter(_))),
        "{error:?}"
    );
    fake.fail("group_send", 1, Failure::SuccessFalse);
    let error = api
        .send(ROBOT_CODE, GROUP, &markdown("x"))
        .await
        .unwrap_err();
    assert!(matches!(error, ApiError::NotDone { .. }), "{error:?}");
    assert_eq!(fake.calls_to("group_send").len(), 4, "one call each");
    let error = api
        .send("other-robot", GROUP, &markdown("x"))
        .await
        .unwrap_err();
    let ChannelError::Rejected { reason } = ChannelError::from(error) else {
        panic!("not rejected");
    };
    assert!(reason.contains(code::INVALID_ROBOT_CODE), "{reason}");
    assert!(fake.sent().is_empty());
}

#[tokio::test]
async fn a_user_file_is_downloaded_through_its_download_url_within_the_bound() {
    let (fake, api) = start().await;
    fake.put_file("dc-1", b"0123456789".to_vec());
    let bytes = api.download_file(ROBOT_CODE, "dc-1", 10).await.unwrap();
    assert_eq!(&bytes[..], b"0123456789");
    let error = api.download_file(ROBOT_CODE, "dc-1", 9).await.unwrap_err();
    assert!(
        matches!(error, ApiError::Http(HttpError::TooLarge { limit: 9 })),
        "{error:?}"
    );
    let error = api.download_file(ROBOT_CODE, "nope", 10).await.unwrap_err();
    assert!(
        matches!(&error, ApiError::Api { code: c, .. } if c == code::DOWNLOAD_CODE_INVALID),
        "{error:?}"
    );
    fake.fail("download", 1, Failure::Http(503));
    let error = api.download_file(ROBOT_CODE, "dc-1", 10).await.unwrap_err();
    assert!(error.is_transient(), "{error:?}");
    assert!(!error.to_string().contains("sig="), "{error}");
}

#[tokio::test]
async fn a_download_url_off_the_file_hosts_is_never_fetched() {
    let (fake, api) = start().await;
    // A second server that must see no request: `localhost` by name is not `127.0.0.1`.
    let evil = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let evil_port = evil.local_addr().unwrap().port();
    fake.put_file_elsewhere("dc-evil", &format!("http://localhost:{evil_port}/x?sig=s"));
    // Bounded: were the URL fetched, nobody would answer on the other server.
    let deadline = Duration::from_secs(10);
    let error = tokio::time::timeout(deadline, api.download_file(ROBOT_CODE, "dc-evil", 10))
        .await
        .expect("refused at once, not fetched")
        .unwrap_err();
    assert!(
        matches!(error, ApiError::Http(HttpError::HostNotAllowed)),
        "{error:?}"
    );
    assert!(!error.to_string().contains("sig"), "{error}");
    // The allowed host on another port, when the pattern names the port.
    fake.put_file_elsewhere("dc-port", &format!("http://127.0.0.1:{evil_port}/x"));
    let fake_port = reqwest::Url::parse(&fake.api_url())
        .unwrap()
        .port()
        .unwrap();
    let pinned = api
        .clone()
        .with_file_hosts(FileHosts::new([format!("127.0.0.1:{fake_port}")]).unwrap())
        .unwrap();
    let error = tokio::time::timeout(deadline, pinned.download_file(ROBOT_CODE, "dc-port", 10))
        .await
        .expect("refused at once, not fetched")
        .unwrap_err();
    assert!(
        matches!(error, ApiError::Http(HttpError::HostNotAllowed)),
        "{error:?}"
    );
    // DingTalk's own hosts only, by default: the fake's loopback URL is refused.
    fake.put_file("dc-1", b"0123456789".to_vec());
    let default = Api::new(
        &fake.api_url(),
        &fake.oapi_url(),
        CLIENT_ID,
        Secret::new(CLIENT_SECRET),
    )
    .unwrap();
    let error = default
        .download_file(ROBOT_CODE, "dc-1", 10)
        .await
        .unwrap_err();
    assert!(
        matches!(error, ApiError::Http(HttpError::HostNotAllowed)),
        "{error:?}"
    );
    assert!(
        fake.calls().iter().all(|c| c.route != "download"),
        "the fake's own file was not read either"
    );
    // Nothing connected to the other server.
    let accepted = tokio::time::timeout(Duration::ZERO, evil.accept()).await;
    assert!(accepted.is_err(), "the other server was called");
    let refused = ChannelError::from(error);
    assert!(
        matches!(refused, ChannelError::Rejected { .. }),
        "{refused:?}"
    );
}

#[tokio::test]
async fn uploads_become_file_and_image_messages() {
    let (fake, api) = start().await;
    fake.add_group("cidGroup");
    let media = api
        .upload_media(
            MediaType::File,
            "q3 report.PDF",
            Bytes::from_static(b"%PDF-1.7"),
        )
        .await
        .unwrap();
    let pdf = file_type("q3 report.PDF");
    let message = RobotMessage::File {
        media_id: &media,
        file_name: "q3 report.PDF",
        file_type: &pdf,
    };
    api.send(ROBOT_CODE, GROUP, &message).await.unwrap();
    assert_eq!(fake.sent()[0].msg_param["fileType"], "pdf");
    // The legacy host refuses a stale token with errcode 40014: refreshed and sent again.
    fake.make_token_stale();
    let image = api
        .upload_media(
            MediaType::Image,
            "chart.png",
            Bytes::from_static(b"\x89PNG\r\n\x1a\n a tiny chart"),
        )
        .await
        .unwrap();
    api.send(
        ROBOT_CODE,
        GROUP,
        &RobotMessage::Image { photo_url: &image },
    )
    .await
    .unwrap();
    let uploads = fake.uploads();
    assert_eq!(
        (uploads[0].kind.as_str(), uploads[0].file_name.as_str()),
        ("file", "q3 report.PDF")
    );
    assert_eq!(
        (uploads[1].kind.as_str(), &uploads[1].bytes[..]),
        ("image", &b"\x89PNG\r\n\x1a\n a tiny chart"[..])
    );
    assert_eq!(fake.calls_to("upload").len(), 3);
    let too_big = Bytes::from(vec![0u8; MAX_UPLOAD_BYTES as usize + 1]);
    let error = api
        .upload_media(MediaType::File, "big.bin", too_big)
        .await
        .unwrap_err();
    assert!(matches!(error, ApiError::Http(HttpError::TooLarge { .. })));
    assert_eq!(fake.calls_to("upload").len(), 3, "refused unsent");
    fake.fail("upload", 1, Failure::Code(200, "90018".into()));
    let error = api
        .upload_media(MediaType::File, "a.txt", Bytes::from_static(b"a"))
        .await
        .unwrap_err();
    assert!(
        matches!(error, ApiError::Http(HttpError::RetryAfter(_))),
        "{error:?}"
    );
    assert_eq!(file_type("README"), "file");
    assert_eq!(file_type("x.tar.GZ"), "gz");
    assert_eq!(file_type("evil.p/df"), "file");
}

fn card<'a>(out: &'a str, to: Recipient<'a>) -> NewCard<'a> {
    NewCard {
        template_id: CARD_TEMPLATE_ID,
        out_track_id: out,
        robot_code: ROBOT_CODE,
        to,
        content: "working on it",
    }
}

#[tokio::test]
async fn a_card_is_created_streamed_and_finalized_and_every_answer_is_checked() {
    let (fake, api) = start().await;
    fake.push(&Message::group_text("cidGroup", "staff-1", "hi").to_json());
    let out = new_out_track_id();
    assert_eq!(out.len(), 64);
    api.create_and_deliver_card(&card(&out, GROUP))
        .await
        .unwrap();
    api.stream_card(&out, "Hel ▉", false).await.unwrap();
    api.stream_card(&out, "Hello", true).await.unwrap();
    let shown = fake.card(&out).unwrap();
    assert_eq!(shown.open_space_id, "dtv1.card//IM_GROUP.cidGroup");
    assert_eq!(shown.initial, "working on it");
    assert_eq!(shown.contents(), ["Hel ▉", "Hello"]);
    assert_eq!(shown.finalizations(), 1);
    let guids: std::collections::HashSet<_> =
        shown.updates.iter().map(|u| u.guid.clone()).collect();
    assert_eq!(guids.len(), 2, "a new guid per update");
    let error = api.stream_card(&out, "again", true).await.unwrap_err();
    assert!(
        matches!(&error, ApiError::Api { code: c, .. } if c == code::CARD_FINALIZED),
        "{error:?}"
    );
    let user = Recipient::User {
        staff_id: "staff-1",
    };
    let private = new_out_track_id();
    api.create_and_deliver_card(&card(&private, user))
        .await
        .unwrap();
    assert_eq!(
        fake.card(&private).unwrap().open_space_id,
        "dtv1.card//IM_ROBOT.staff-1"
    );

    fake.fail("card_create", 1, Failure::SuccessFalse);
    let error = api
        .create_and_deliver_card(&card(&new_out_track_id(), GROUP))
        .await
        .unwrap_err();
    assert!(matches!(error, ApiError::NotDone { .. }), "{error:?}");
    fake.fail("card_create", 1, Failure::NotDelivered);
    let error = api
        .create_and_deliver_card(&card(&new_out_track_id(), GROUP))
        .await
        .unwrap_err();
    assert!(
        matches!(error, ApiError::NotDone { reason, .. } if reason.contains("not delivered")),
        "{error:?}"
    );
    fake.fail("card_stream", 1, Failure::SuccessFalse);
    let error = api.stream_card(&private, "x", false).await.unwrap_err();
    assert!(matches!(error, ApiError::NotDone { .. }), "{error:?}");
    let error = api.stream_card("unknown", "x", false).await.unwrap_err();
    assert!(
        matches!(&error, ApiError::Api { code: c, .. } if c == code::CARD_NOT_FOUND),
        "{error:?}"
    );
    let id = new_out_track_id();
    let mut bad_template = card(&id, GROUP);
    bad_template.template_id = "missing";
    assert!(api.create_and_deliver_card(&bad_template).await.is_err());
}

#[test]
fn params_are_json_strings_and_guids_are_uuids() {
    let file = RobotMessage::File {
        media_id: "@m",
        file_name: "a \"b\".pdf",
        file_type: "pdf",
    };
    let param: Value = serde_json::from_str(&file.msg_param()).unwrap();
    assert_eq!(
        param,
        json!({"mediaId": "@m", "fileName": "a \"b\".pdf", "fileType": "pdf"})
    );
    assert_eq!(file.msg_key(), "sampleFile");
    let guid = new_guid();
    let parts: Vec<usize> = guid.split('-').map(str::len).collect();
    assert_eq!(parts, [8, 4, 4, 4, 12]);
    assert_eq!(&guid[14..15], "4");
    assert_ne!(new_guid(), guid);
}

/// An in-test server answering whatever the test wants, for answers no DingTalk gives.
async fn odd_server(answer: axum::response::Response) -> String {
    let answer = std::sync::Arc::new(std::sync::Mutex::new(Some(answer)));
    let app = axum::Router::new().fallback(move || {
        let answer = answer.clone();
        async move {
            answer
                .lock()
                .unwrap()
                .take()
                .unwrap_or_else(|| axum::http::StatusCode::GONE.into_response())
        }
    });
    fixtures::serve(app).await
}

#[tokio::test]
async fn odd_answers_are_decode_errors_and_redirects_are_not_followed() {
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let not_json = odd_server("<html>gateway</html>".into_response()).await;
    let error = read_answer("op", client.get(&not_json), Dialect::OpenApi)
        .await
        .unwrap_err();
    assert!(
        matches!(error, ApiError::Http(HttpError::Decode { .. })),
        "{error:?}"
    );
    let huge = "x".repeat(crate::error::MAX_RESPONSE_BYTES as usize + 1);
    let oversized = odd_server(huge.into_response()).await;
    let error = read_answer("op", client.get(&oversized), Dialect::OpenApi)
        .await
        .unwrap_err();
    assert!(
        matches!(&error, ApiError::Http(HttpError::Decode { detail, .. }) if detail.contains("exceeds")),
        "{error:?}"
    );
    let redirect = axum::response::Redirect::temporary("http://127.0.0.1:1/steal").into_response();
    let moved = odd_server(redirect).await;
    let error = read_answer("op", client.get(&moved), Dialect::OpenApi)
        .await
        .unwrap_err();
    assert!(
        matches!(error, ApiError::Api { status: 307, .. }),
        "{error:?}"
    );
    let legacy = odd_server(axum::Json(json!({"media_id": "@x"})).into_response()).await;
    let error = read_answer("op", client.get(&legacy), Dialect::Legacy)
        .await
        .unwrap_err();
    assert!(
        matches!(error, ApiError::Http(HttpError::Decode { .. })),
        "no errcode: {error:?}"
    );
}

/// The recorded `createAndDeliver` answers (`tests/fixtures/card_create_*.json`): one
/// delivered, one made but not delivered to its chat.
#[test]
fn recorded_card_answers_are_checked() {
    let read = |text: &str| serde_json::from_str::<Value>(text).unwrap();
    let not_done = |answer: &Value| match card_delivered("card", answer) {
        Err(ApiError::NotDone { reason, .. }) => reason,
        other => panic!("{other:?}"),
    };
    let delivered = read(im_bridge_channel::fixture!("card_create_and_deliver.json"));
    assert!(card_delivered("card", &delivered).is_ok());
    let refused = read(im_bridge_channel::fixture!(
        "card_create_not_delivered.json"
    ));
    assert!(not_done(&refused).contains("not delivered"));
    assert!(not_done(&json!({"success": false})).contains("success"));
}
