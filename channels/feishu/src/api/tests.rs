//! The client against a tiny in-process Feishu on 127.0.0.1:0: envelopes and paths, the
//! one retry on a stale token, the error mapping, download bounds and multipart fields.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use axum::body::Body;
use axum::extract::{FromRequest, Multipart, Request, State};
use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use im_bridge_channel::ChannelError;
use im_bridge_channel::fixtures;

use super::card::card;
use super::*;
use crate::token::TOKEN_PATH;

const SECRET: &str = "app-SECRET-value";

/// One request the fake saw (token requests are only counted).
#[derive(Clone, Debug)]
struct Seen {
    method: String,
    path_and_query: String,
    auth: String,
    json: Option<Value>,
    /// Multipart fields: name, file name, content.
    fields: Vec<(String, Option<String>, Vec<u8>)>,
}

/// A scripted answer to the next non-token request.
struct Scripted {
    status: StatusCode,
    headers: Vec<(&'static str, String)>,
    body: Body,
}

#[derive(Default)]
struct Fake {
    token_requests: AtomicUsize,
    seen: Mutex<Vec<Seen>>,
    script: Mutex<VecDeque<Scripted>>,
}

impl Fake {
    fn push(&self, status: u16, headers: &[(&'static str, &str)], body: impl Into<Body>) {
        self.script.lock().unwrap().push_back(Scripted {
            status: StatusCode::from_u16(status).unwrap(),
            headers: headers.iter().map(|(k, v)| (*k, (*v).to_owned())).collect(),
            body: body.into(),
        });
    }

    fn push_json(&self, status: u16, body: Value) {
        self.push(
            status,
            &[("content-type", "application/json")],
            body.to_string(),
        );
    }

    fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }

    fn tokens(&self) -> usize {
        self.token_requests.load(Ordering::SeqCst)
    }
}

async fn handle(State(fake): State<Arc<Fake>>, request: Request) -> Response {
    let path = request.uri().path().to_owned();
    if path == TOKEN_PATH {
        let n = fake.token_requests.fetch_add(1, Ordering::SeqCst) + 1;
        let body = json!({"code": 0, "msg": "ok", "tenant_access_token": format!("t-{n}"), "expire": 7200});
        return axum::Json(body).into_response();
    }
    let method = request.method().to_string();
    let path_and_query = request
        .uri()
        .path_and_query()
        .map(|p| p.to_string())
        .unwrap_or_default();
    let auth = request
        .headers()
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let content_type = request
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let mut fields = Vec::new();
    let mut json = None;
    if content_type.starts_with("multipart/form-data") {
        let mut multipart = Multipart::from_request(request, &()).await.unwrap();
        while let Some(field) = multipart.next_field().await.unwrap() {
            let name = field.name().unwrap_or_default().to_owned();
            let file_name = field.file_name().map(str::to_owned);
            let bytes = field.bytes().await.unwrap().to_vec();
            fields.push((name, file_name, bytes));
        }
    } else {
        let bytes = axum::body::to_bytes(request.into_body(), usize::MAX)
            .await
            .unwrap();
        json = serde_json::from_slice(&bytes).ok();
    }
    fake.seen.lock().unwrap().push(Seen {
        method,
        path_and_query,
        auth,
        json,
        fields,
    });
    if let Some(scripted) = fake.script.lock().unwrap().pop_front() {
        let mut response = Response::new(scripted.body);
        *response.status_mut() = scripted.status;
        for (k, v) in scripted.headers {
            response
                .headers_mut()
                .insert(k, HeaderValue::from_str(&v).unwrap());
        }
        return response;
    }
    let data = if path.ends_with("/images") {
        json!({"image_key": "img_v2_1"})
    } else if path.ends_with("/files") {
        json!({"file_key": "file_v2_1"})
    } else if path.ends_with("/reactions") {
        json!({"reaction_id": "r_1"})
    } else {
        json!({"message_id": "om_new"})
    };
    axum::Json(json!({"code": 0, "msg": "success", "data": data})).into_response()
}

async fn start() -> (Api, Arc<Fake>) {
    let fake = Arc::new(Fake::default());
    let app = axum::Router::new()
        .fallback(handle)
        .with_state(fake.clone());
    let api = Api::new(&fixtures::serve(app).await, "cli_test", Secret::new(SECRET)).unwrap();
    (api, fake)
}

fn msg(id: &str) -> MessageId {
    MessageId::new(id)
}

#[tokio::test]
async fn a_named_card_carries_its_uuid() {
    let (api, fake) = start().await;
    let c = card("the answer");
    api.send_card(&ChatId::new("oc_1"), &c, Some("imb-00ab"))
        .await
        .unwrap();
    api.reply_card(&msg("om_src"), &c, Some("imb-00cd"))
        .await
        .unwrap();
    let seen = fake.seen();
    let uuids: Vec<&Value> = seen
        .iter()
        .map(|s| &s.json.as_ref().unwrap()["uuid"])
        .collect();
    assert_eq!(uuids, [&json!("imb-00ab"), &json!("imb-00cd")]);
}

#[tokio::test]
async fn cards_are_sent_replied_and_patched_in_the_envelope() {
    let (api, fake) = start().await;
    let c = card("**thinking…**");
    let sent = api.send_card(&ChatId::new("oc_1"), &c, None).await.unwrap();
    assert_eq!(sent, msg("om_new"));
    let replied = api.reply_card(&msg("om_src"), &c, None).await.unwrap();
    assert_eq!(replied, msg("om_new"));
    api.patch_card(&msg("om_new"), &card("done")).await.unwrap();
    api.add_reaction(&msg("om_src"), "OK").await.unwrap();

    let seen = fake.seen();
    assert_eq!(seen.len(), 4);
    assert_eq!(seen[0].method, "POST");
    assert_eq!(
        seen[0].path_and_query,
        "/open-apis/im/v1/messages?receive_id_type=chat_id"
    );
    let body = seen[0].json.as_ref().unwrap();
    assert_eq!(body["receive_id"], "oc_1");
    assert_eq!(body["msg_type"], "interactive");
    assert!(
        body.get("uuid").is_none(),
        "no uuid unless the reply is named"
    );
    // The card travels as a JSON string.
    let content: Value = serde_json::from_str(body["content"].as_str().unwrap()).unwrap();
    assert_eq!(content, c);
    assert_eq!(content["config"]["update_multi"], true);

    assert_eq!(
        seen[1].path_and_query,
        "/open-apis/im/v1/messages/om_src/reply"
    );
    assert_eq!(seen[1].json.as_ref().unwrap()["msg_type"], "interactive");

    assert_eq!(seen[2].method, "PATCH");
    assert_eq!(seen[2].path_and_query, "/open-apis/im/v1/messages/om_new");
    let patched = seen[2].json.as_ref().unwrap()["content"].as_str().unwrap();
    assert_eq!(
        serde_json::from_str::<Value>(patched).unwrap(),
        card("done")
    );

    assert_eq!(
        seen[3].path_and_query,
        "/open-apis/im/v1/messages/om_src/reactions"
    );
    assert_eq!(
        seen[3].json.as_ref().unwrap(),
        &json!({"reaction_type": {"emoji_type": "OK"}})
    );
    for s in &seen {
        assert_eq!(s.auth, "Bearer t-1");
    }
    assert_eq!(fake.tokens(), 1);
}

#[tokio::test]
async fn a_stale_token_is_refreshed_and_the_call_retried_exactly_once() {
    let (api, fake) = start().await;
    fake.push_json(
        400,
        json!({"code": 99991663, "msg": "Invalid access token for authorization"}),
    );
    let sent = api
        .send_card(&ChatId::new("oc_1"), &card("x"), None)
        .await
        .unwrap();
    assert_eq!(sent, msg("om_new"));
    let seen = fake.seen();
    assert_eq!(seen.len(), 2);
    assert_eq!(seen[0].auth, "Bearer t-1");
    assert_eq!(seen[1].auth, "Bearer t-2");
    assert_eq!(fake.tokens(), 2);

    // Refused twice: given up after the second attempt.
    for code in [99991668, 99991661] {
        fake.push_json(401, json!({"code": code, "msg": "token expired"}));
    }
    let error = api
        .reply_card(&msg("om_src"), &card("x"), None)
        .await
        .unwrap_err();
    assert!(matches!(error, ApiError::TokenInvalid { .. }), "{error:?}");
    assert!(matches!(
        ChannelError::from(error),
        ChannelError::Rejected { .. }
    ));
    assert_eq!(fake.seen().len(), 4);
    assert_eq!(fake.tokens(), 3);
}

#[tokio::test]
async fn other_failures_are_never_sent_twice() {
    let (api, fake) = start().await;
    fake.push_json(
        400,
        json!({"code": 230002, "msg": "The bot SECRET-TEXT is not in the chat"}),
    );
    let error = api
        .send_card(&ChatId::new("oc_1"), &card("x"), None)
        .await
        .unwrap_err();
    let ChannelError::Rejected { reason } = ChannelError::from(error) else {
        panic!("not rejected");
    };
    assert!(reason.contains("230002"), "{reason}");
    assert!(!reason.contains("SECRET"), "{reason}");
    assert_eq!(fake.seen().len(), 1);

    fake.push(502, &[], "<html>bad gateway</html>");
    let error = api
        .send_card(&ChatId::new("oc_1"), &card("x"), None)
        .await
        .unwrap_err();
    assert!(matches!(
        ChannelError::from(error),
        ChannelError::Transport(_)
    ));
    assert_eq!(fake.seen().len(), 2);

    fake.push_json(500, json!({"code": 1500, "msg": "internal error"}));
    let error = api.patch_card(&msg("om_1"), &card("x")).await.unwrap_err();
    assert!(matches!(
        ChannelError::from(error),
        ChannelError::Transport(_)
    ));
    assert_eq!(fake.seen().len(), 3);
    assert_eq!(fake.tokens(), 1);
}

#[tokio::test]
async fn rate_limits_become_retry_after() {
    let (api, fake) = start().await;
    fake.push(429, &[("x-ogw-ratelimit-reset", "3")], "");
    let error = api
        .send_card(&ChatId::new("oc_1"), &card("x"), None)
        .await
        .unwrap_err();
    assert!(
        matches!(ChannelError::from(error), ChannelError::RetryAfter(d) if d == Duration::from_secs(3))
    );
    fake.push(429, &[], "");
    let error = api.add_reaction(&msg("om_1"), "OK").await.unwrap_err();
    assert!(
        matches!(error, ApiError::Http(HttpError::RetryAfter(d)) if d == Duration::from_secs(1))
    );
    fake.push_json(
        400,
        json!({"code": 99991400, "msg": "request trigger frequency limit"}),
    );
    let error = api.patch_card(&msg("om_1"), &card("x")).await.unwrap_err();
    assert!(
        matches!(error, ApiError::Http(HttpError::RetryAfter(d)) if d == Duration::from_secs(1))
    );
    // None of them was retried here.
    assert_eq!(fake.seen().len(), 3);
}

#[tokio::test]
async fn a_recalled_or_old_card_is_not_editable() {
    let (api, fake) = start().await;
    for code in [230011, 230031] {
        fake.push_json(
            400,
            json!({"code": code, "msg": "The message is recalled."}),
        );
        let error = api.patch_card(&msg("om_1"), &card("x")).await.unwrap_err();
        assert!(matches!(
            ChannelError::from(error),
            ChannelError::NotEditable
        ));
    }
}

#[tokio::test]
async fn oversized_cards_uploads_and_odd_ids_are_refused_unsent() {
    let (api, fake) = start().await;
    let huge = card(&"a".repeat(MAX_CARD_BYTES));
    let error = api
        .send_card(&ChatId::new("oc_1"), &huge, None)
        .await
        .unwrap_err();
    assert!(matches!(error, ApiError::CardTooLarge { .. }));
    let image = Bytes::from(vec![0u8; MAX_IMAGE_BYTES as usize + 1]);
    let error = api.upload_image(image).await.unwrap_err();
    assert!(matches!(
        ChannelError::from(error),
        ChannelError::TooLarge { limit } if limit == MAX_IMAGE_BYTES
    ));
    let file = Bytes::from(vec![0u8; MAX_FILE_BYTES as usize + 1]);
    let error = api.upload_file("a.pdf", file).await.unwrap_err();
    assert!(
        matches!(error, ApiError::Http(HttpError::TooLarge { limit }) if limit == MAX_FILE_BYTES)
    );
    for bad in ["", "om_1/../../auth", "om_1?x=1", "om 1", "om_1#f"] {
        let error = api.patch_card(&msg(bad), &card("x")).await.unwrap_err();
        assert!(
            matches!(error, ApiError::Http(HttpError::BadId { .. })),
            "{bad:?}"
        );
    }
    let error = api
        .download_resource(&msg("om_1"), "../x", MediaKind::File, 10)
        .await
        .unwrap_err();
    assert!(matches!(error, ApiError::Http(HttpError::BadId { .. })));
    assert!(fake.seen().is_empty());
    assert_eq!(fake.tokens(), 0);
}

#[tokio::test]
async fn downloads_are_bounded_and_named() {
    let (api, fake) = start().await;
    fake.push(
        200,
        &[("content-disposition", "attachment; filename=\"report.pdf\"")],
        vec![7u8; 100],
    );
    let (bytes, name) = api
        .download_resource(&msg("om_1"), "file_v2_abc-1", MediaKind::File, 100)
        .await
        .unwrap();
    assert_eq!(bytes.len(), 100);
    assert_eq!(name.as_deref(), Some("report.pdf"));
    assert_eq!(
        fake.seen()[0].path_and_query,
        "/open-apis/im/v1/messages/om_1/resources/file_v2_abc-1?type=file"
    );

    // Over the bound by Content-Length.
    fake.push(200, &[], vec![7u8; 101]);
    let error = api
        .download_resource(&msg("om_1"), "img_1", MediaKind::Image, 100)
        .await
        .unwrap_err();
    assert!(matches!(
        error,
        ApiError::Http(HttpError::TooLarge { limit: 100 })
    ));
    assert!(fake.seen()[1].path_and_query.ends_with("?type=image"));

    // Over the bound while streaming, with no Content-Length.
    let chunks = (0..10).map(|_| Ok::<_, std::io::Error>(Bytes::from(vec![1u8; 64])));
    fake.push(
        200,
        &[],
        Body::from_stream(futures_util::stream::iter(chunks)),
    );
    let error = api
        .download_resource(&msg("om_1"), "img_1", MediaKind::Image, 100)
        .await
        .unwrap_err();
    assert!(matches!(
        ChannelError::from(error),
        ChannelError::TooLarge { limit: 100 }
    ));

    // A UTF-8 name, reduced to its last segment; a refusal is an envelope.
    fake.push(
        200,
        &[(
            "content-disposition",
            "attachment; filename=\"x.txt\"; filename*=UTF-8''..%2F%E6%8A%A5%E5%91%8A.txt",
        )],
        "hi",
    );
    let (_, name) = api
        .download_resource(&msg("om_1"), "file_1", MediaKind::File, 100)
        .await
        .unwrap();
    assert_eq!(name.as_deref(), Some("报告.txt"));
    fake.push_json(400, json!({"code": 234003, "msg": "File not in msg."}));
    let error = api
        .download_resource(&msg("om_1"), "file_1", MediaKind::File, 100)
        .await
        .unwrap_err();
    assert!(
        matches!(error, ApiError::Api { code: 234003, .. }),
        "{error:?}"
    );
}

#[tokio::test]
async fn a_stale_token_on_a_download_is_retried_once() {
    let (api, fake) = start().await;
    fake.push_json(400, json!({"code": 99991663, "msg": "invalid token"}));
    fake.push(200, &[], "bytes");
    let (bytes, name) = api
        .download_resource(&msg("om_1"), "file_1", MediaKind::File, 100)
        .await
        .unwrap();
    assert_eq!(&bytes[..], b"bytes");
    assert_eq!(name, None);
    assert_eq!(fake.seen().len(), 2);
    assert_eq!(fake.seen()[1].auth, "Bearer t-2");
}

#[tokio::test]
async fn uploads_send_the_multipart_fields_feishu_expects() {
    let (api, fake) = start().await;
    let key = api
        .upload_image(Bytes::from_static(b"\x89PNG"))
        .await
        .unwrap();
    assert_eq!(key, "img_v2_1");
    let key = api
        .upload_file("Q3 Report.DOCX", Bytes::from_static(b"PK"))
        .await
        .unwrap();
    assert_eq!(key, "file_v2_1");
    let seen = fake.seen();
    assert_eq!(seen[0].path_and_query, "/open-apis/im/v1/images");
    let fields: Vec<_> = seen[0].fields.iter().map(|f| f.0.as_str()).collect();
    assert_eq!(fields, ["image_type", "image"]);
    assert_eq!(seen[0].fields[0].2, b"message");
    assert_eq!(seen[0].fields[1].2, b"\x89PNG");
    assert!(seen[0].fields[1].1.is_some());

    assert_eq!(seen[1].path_and_query, "/open-apis/im/v1/files");
    let fields: Vec<_> = seen[1].fields.iter().map(|f| f.0.as_str()).collect();
    assert_eq!(fields, ["file_type", "file_name", "file"]);
    assert_eq!(seen[1].fields[0].2, b"doc");
    assert_eq!(seen[1].fields[1].2, b"Q3 Report.DOCX");
    assert_eq!(seen[1].fields[2].1.as_deref(), Some("Q3 Report.DOCX"));
    assert_eq!(seen[1].fields[2].2, b"PK");
}

#[tokio::test]
async fn a_stale_token_on_an_upload_resends_the_whole_form() {
    let (api, fake) = start().await;
    fake.push_json(400, json!({"code": 99991663, "msg": "invalid token"}));
    api.upload_image(Bytes::from_static(b"img")).await.unwrap();
    let seen = fake.seen();
    assert_eq!(seen.len(), 2);
    assert_eq!(seen[1].fields[1].2, b"img");
}

#[tokio::test]
async fn file_messages_carry_their_keys() {
    let (api, fake) = start().await;
    let content = json!({"file_key": "file_v2_1"});
    api.reply_file(&msg("om_src"), MediaKind::File, &content)
        .await
        .unwrap();
    api.send_file_message(
        &ChatId::new("oc_1"),
        MediaKind::Image,
        &json!({"image_key": "img_1"}),
    )
    .await
    .unwrap();
    let seen = fake.seen();
    let body = seen[0].json.as_ref().unwrap();
    assert_eq!(body["msg_type"], "file");
    assert_eq!(body["content"], content.to_string());
    let body = seen[1].json.as_ref().unwrap();
    assert_eq!(body["msg_type"], "image");
    assert_eq!(body["receive_id"], "oc_1");
}

#[tokio::test]
async fn an_answer_without_data_is_a_decode_error() {
    let (api, fake) = start().await;
    fake.push_json(200, json!({"code": 0, "msg": "success"}));
    let error = api
        .send_card(&ChatId::new("oc_1"), &card("x"), None)
        .await
        .unwrap_err();
    assert!(
        matches!(error, ApiError::Http(HttpError::Decode { .. })),
        "{error:?}"
    );
    fake.push(200, &[], "<html>hello</html>");
    let error = api.add_reaction(&msg("om_1"), "OK").await.unwrap_err();
    assert!(
        matches!(error, ApiError::Http(HttpError::Decode { .. })),
        "{error:?}"
    );
    assert!(matches!(
        ChannelError::from(error),
        ChannelError::Transport(_)
    ));
}

#[test]
fn file_types_follow_the_extension() {
    for (name, kind) in [
        ("a.pdf", "pdf"),
        ("a.PDF", "pdf"),
        ("a.doc", "doc"),
        ("a.docx", "doc"),
        ("a.xls", "xls"),
        ("a.xlsx", "xls"),
        ("a.ppt", "ppt"),
        ("a.pptx", "ppt"),
        ("a.zip", "stream"),
        ("pdf", "stream"),
        ("", "stream"),
    ] {
        assert_eq!(file_type(name), kind, "{name}");
    }
}

#[tokio::test]
async fn secrets_never_reach_debug_or_errors() {
    let (api, _fake) = start().await;
    let token = api.tokens().get().await.unwrap();
    let text = format!("{api:?} {token:?} {token}");
    assert!(!text.contains("SECRET"), "{text}");
    assert!(!text.contains("t-1"), "{text}");
    // A transport error (nothing listens on port 1).
    let dead = Api::new("http://127.0.0.1:1", "cli_test", Secret::new(SECRET)).unwrap();
    let error = dead
        .send_card(&ChatId::new("oc_1"), &card("x"), None)
        .await
        .unwrap_err();
    assert!(
        matches!(error, ApiError::Http(HttpError::Transport { .. })),
        "{error:?}"
    );
    let channel = ChannelError::from(error);
    let text = format!("{channel} {channel:?} {dead:?}");
    assert!(!text.contains("SECRET"), "{text}");
}
