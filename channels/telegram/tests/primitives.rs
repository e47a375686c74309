//! The send primitives against the fake Bot API: request shapes and error mapping.

// Helpers outside `#[test]` functions fail the test by panicking, like the tests.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use im_bridge_channel::{
    AllowedUsers, Channel, ChannelError, ChatId, ChatKind, CommandMenu, MessageId,
    ResolvedAttachment, Secret, SendTarget, Stage,
};
use im_bridge_fakes::telegram::{Failure, FakeTelegram, TOKEN, Trigger};
use im_bridge_fakes::telemetry::TelemetryProbe;
use im_bridge_telegram::{NAME, TelegramChannel, TelegramSettings};
use serde_json::{Map, json};

const CHAT: i64 = 4242;

/// The fake, and a channel whose telemetry reports to the returned probe.
async fn setup() -> (FakeTelegram, TelegramChannel, TelemetryProbe) {
    let fake = FakeTelegram::start().await.unwrap();
    let settings = TelegramSettings::new(Secret::new(TOKEN)).with_api_url(fake.api_url());
    let probe = TelemetryProbe::new();
    let channel = probe
        .build(|| TelegramChannel::new(settings, AllowedUsers::Anyone, CommandMenu::default()))
        .unwrap();
    (fake, channel, probe)
}

fn target<'a>(
    chat: &'a ChatId,
    source: &'a MessageId,
    meta: &'a Map<String, serde_json::Value>,
) -> SendTarget<'a> {
    SendTarget {
        chat_id: chat,
        chat_kind: ChatKind::Private,
        reply_to: Some(source),
        metadata: meta,
    }
}

#[tokio::test]
async fn texts_are_plain_replies_and_edits_replace_them() {
    let (fake, channel, _) = setup().await;
    let (chat, source, meta) = (
        ChatId::new(CHAT.to_string()),
        MessageId::new("17"),
        Map::new(),
    );
    let t = target(&chat, &source, &meta);
    let sent = channel
        .send_text(t, "*not markdown* <b>nor html</b>")
        .await
        .unwrap();
    let call = fake.calls_to("sendMessage").pop().unwrap();
    assert_eq!(
        call.params,
        json!({"chat_id": CHAT, "text": "*not markdown* <b>nor html</b>",
               "reply_parameters": {"message_id": 17, "allow_sending_without_reply": true}})
    );
    channel.edit_text(t, &sent.id, "second").await.unwrap();
    // The same text again is "not modified": a success.
    channel.edit_text(t, &sent.id, "second").await.unwrap();
    channel.finish_stream(t, &sent.id, "final").await.unwrap();
    let messages = fake.bot_messages(CHAT);
    assert_eq!(messages.len(), 1);
    assert_eq!(messages[0].text, "final");
    assert_eq!(messages[0].reply_to, Some(17));
}

#[tokio::test]
async fn telegram_errors_become_channel_errors() {
    let (fake, channel, probe) = setup().await;
    let (chat, source, meta) = (
        ChatId::new(CHAT.to_string()),
        MessageId::new("1"),
        Map::new(),
    );
    let t = target(&chat, &source, &meta);
    let sent = channel.send_text(t, "hello").await.unwrap();
    fake.fail_nth_edit(1, Failure::RetryAfter(3));
    fake.fail_nth_edit(2, Failure::CantBeEdited);
    fake.fail_nth_edit(3, Failure::NotModified);
    let e = channel.edit_text(t, &sent.id, "a").await.unwrap_err();
    assert!(
        matches!(e, ChannelError::RetryAfter(d) if d == Duration::from_secs(3)),
        "{e:?}"
    );
    let e = channel.edit_text(t, &sent.id, "b").await.unwrap_err();
    assert!(matches!(e, ChannelError::NotEditable), "{e:?}");
    channel.edit_text(t, &sent.id, "c").await.unwrap();
    let gone = MessageId::new("999999");
    let e = channel.edit_text(t, &gone, "d").await.unwrap_err();
    assert!(matches!(e, ChannelError::NotEditable), "{e:?}");
    fake.fail(
        "sendMessage",
        Trigger::Nth(2),
        Failure::Status(400, "Bad Request: chat not found".into()),
    );
    let e = channel.send_text(t, "x").await.unwrap_err();
    assert!(matches!(e, ChannelError::Rejected { .. }), "{e:?}");
    fake.fail(
        "sendMessage",
        Trigger::Nth(3),
        Failure::Status(502, "Bad Gateway".into()),
    );
    let e = channel.send_text(t, "x").await.unwrap_err();
    assert!(matches!(e, ChannelError::Transport(_)), "{e:?}");
    let odd = ChatId::new("group:abc");
    let e = channel
        .send_text(SendTarget { chat_id: &odd, ..t }, "x")
        .await
        .unwrap_err();
    assert!(matches!(e, ChannelError::Rejected { .. }), "{e:?}");
    // The telemetry contract: the send and the "not modified" edit count as sent, every
    // failed call above as a sending error.
    probe.assert_contract(NAME);
    assert_eq!(probe.sent(NAME), 2);
    assert_eq!(probe.errors(NAME, Stage::Sending), 6);
    assert_eq!(probe.errors(NAME, Stage::Receiving), 0);
    assert_eq!(probe.received(NAME), 0);
}

fn attachment(dir: &tempfile::TempDir, name: &str, bytes: &[u8], mime: &str) -> ResolvedAttachment {
    let path = dir.path().join(name);
    std::fs::write(&path, bytes).unwrap();
    ResolvedAttachment {
        virtual_path: format!("/mnt/user-data/outputs/{name}"),
        actual_path: path,
        filename: name.into(),
        mime_type: mime.into(),
        size: bytes.len() as u64,
        is_image: mime.starts_with("image/"),
    }
}

#[tokio::test]
async fn files_upload_as_photos_or_documents() {
    let (fake, channel, _) = setup().await;
    let dir = tempfile::tempdir().unwrap();
    let (chat, source, meta) = (
        ChatId::new(CHAT.to_string()),
        MessageId::new("5"),
        Map::new(),
    );
    let t = target(&chat, &source, &meta);
    channel
        .send_file(
            t,
            &attachment(&dir, "chart.png", b"\x89PNG fake", "image/png"),
        )
        .await
        .unwrap();
    channel
        .send_file(
            t,
            &attachment(&dir, "report.pdf", b"%PDF-1.7 fake", "application/pdf"),
        )
        .await
        .unwrap();
    let photo = fake.calls_to("sendPhoto").pop().unwrap();
    assert_eq!(photo.params["photo"]["file_name"], "chart.png");
    assert_eq!(photo.params["photo"]["content_type"], "image/png");
    assert_eq!(photo.int("chat_id"), Some(CHAT));
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(
            photo.params["reply_parameters"].as_str().unwrap()
        )
        .unwrap()["message_id"],
        5
    );
    let doc = fake.calls_to("sendDocument").pop().unwrap();
    assert_eq!(doc.params["document"]["file_name"], "report.pdf");
    assert_eq!(doc.params["document"]["size"], 13);
    let kinds: Vec<_> = fake.bot_messages(CHAT).iter().map(|m| m.kind).collect();
    assert_eq!(kinds, ["photo", "document"]);

    // A picture Telegram refuses as a photo still arrives as a document.
    fake.fail(
        "sendPhoto",
        Trigger::Nth(2),
        Failure::Status(400, "Bad Request: PHOTO_INVALID_DIMENSIONS".into()),
    );
    channel
        .send_file(
            t,
            &attachment(&dir, "wide.png", b"\x89PNG wide", "image/png"),
        )
        .await
        .unwrap();
    assert_eq!(fake.calls_to("sendDocument").len(), 2);
}

#[tokio::test]
async fn oversized_files_are_refused_before_upload() {
    let (fake, channel, _) = setup().await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("huge.bin");
    let file = std::fs::File::create(&path).unwrap();
    file.set_len(50 * 1024 * 1024 + 1).unwrap();
    let huge = ResolvedAttachment {
        virtual_path: "/mnt/user-data/outputs/huge.bin".into(),
        actual_path: path,
        filename: "huge.bin".into(),
        mime_type: "application/octet-stream".into(),
        size: 1,
        is_image: false,
    };
    let (chat, source, meta) = (
        ChatId::new(CHAT.to_string()),
        MessageId::new("5"),
        Map::new(),
    );
    let e = channel
        .send_file(target(&chat, &source, &meta), &huge)
        .await
        .unwrap_err();
    assert!(matches!(e, ChannelError::Rejected { .. }), "{e:?}");
    assert!(fake.calls_to("sendDocument").is_empty());
}
