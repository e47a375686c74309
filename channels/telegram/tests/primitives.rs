//! The primitives against the fake Bot API: the sends' request shapes and error mapping,
//! and the download of inbound attachments with its size bounds.

// Helpers outside `#[test]` functions fail the test by panicking, like the tests.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "primitives/flood.rs"]
mod flood;

use std::time::Duration;

use bytes::Bytes;
use im_bridge_channel::{
    AllowedUsers, Channel, ChannelError, ChatId, ChatKind, CommandVocabulary, FileKind, FileSource,
    InboundFile, MessageId, OutboundFile, Secret, SendTarget, Stage,
};
use im_bridge_fakes::build_context;
use im_bridge_fakes::telegram::{BOT_USERNAME, Failure, FakeTelegram, Incoming, TOKEN, Trigger};
use im_bridge_fakes::telemetry::TelemetryProbe;
use im_bridge_telegram::inbound::{InboundContext, Normalized, normalize};
use im_bridge_telegram::model::Update;
use im_bridge_telegram::{MAX_DOWNLOAD_BYTES, NAME, TelegramChannel, TelegramSettings};
use serde_json::{Map, json};

const CHAT: i64 = 4242;

/// The fake, and a channel whose telemetry reports to the returned probe.
async fn setup() -> (FakeTelegram, TelegramChannel, TelemetryProbe) {
    let fake = FakeTelegram::start().await.unwrap();
    let settings = TelegramSettings::new(Secret::new(TOKEN)).with_api_url(fake.api_url());
    let probe = TelemetryProbe::new();
    let channel = probe
        .build(|| TelegramChannel::new(settings, &build_context(AllowedUsers::Anyone)))
        .unwrap();
    (fake, channel, probe)
}

/// A private-chat reply in [`CHAT`] to message `source`, owning what its target borrows.
struct Reply {
    chat: ChatId,
    source: MessageId,
    meta: Map<String, serde_json::Value>,
}

impl Reply {
    fn to(source: &str) -> Self {
        Self {
            chat: ChatId::new(CHAT.to_string()),
            source: MessageId::new(source),
            meta: Map::new(),
        }
    }

    fn target(&self) -> SendTarget<'_> {
        SendTarget {
            chat_id: &self.chat,
            chat_kind: ChatKind::Private,
            reply_to: Some(&self.source),
            metadata: &self.meta,
            hints: im_bridge_channel::DeliveryHints::NONE,
            source_at: None,
        }
    }
}

/// The adapter is given texts in Telegram's HTML subset (the delivery engine renders the
/// agent's Markdown), and sends them so.
#[tokio::test]
async fn texts_are_html_replies_and_edits_replace_them() {
    let (fake, channel, _) = setup().await;
    let reply = Reply::to("17");
    let t = reply.target();
    let sent = channel
        .send_text(t, "*not markdown* <b>but html</b> &amp;")
        .await
        .unwrap();
    let call = fake.calls_to("sendMessage").pop().unwrap();
    assert_eq!(
        call.params,
        json!({"chat_id": CHAT, "text": "*not markdown* <b>but html</b> &amp;", "parse_mode": "HTML",
               "reply_parameters": {"message_id": 17, "allow_sending_without_reply": true}})
    );
    assert_eq!(fake.bot_messages(CHAT)[0].text, "*not markdown* but html &");
    channel.edit_text(t, &sent.id, "second").await.unwrap();
    // The same text again is "not modified": a success.
    channel.edit_text(t, &sent.id, "second").await.unwrap();
    channel.finish_stream(t, &sent.id, "final").await.unwrap();
    let messages = fake.bot_messages(CHAT);
    assert_eq!(messages.len(), 1);
    assert_eq!(messages[0].text, "final");
    assert_eq!(messages[0].reply_to, Some(17));
    // HTML Telegram cannot parse is `BadMarkup`, which the engine resends as plain text.
    let e = channel.send_text(t, "<blink>x</blink>").await.unwrap_err();
    assert!(matches!(e, ChannelError::BadMarkup), "{e:?}");
}

#[tokio::test]
async fn telegram_errors_become_channel_errors() {
    let (fake, channel, probe) = setup().await;
    let reply = Reply::to("1");
    let t = reply.target();
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

fn attachment(dir: &tempfile::TempDir, name: &str, bytes: &[u8], mime: &str) -> OutboundFile {
    let path = dir.path().join(name);
    std::fs::write(&path, bytes).unwrap();
    OutboundFile {
        path,
        filename: name.into(),
        mime_type: mime.into(),
        size: bytes.len() as u64,
        is_image: mime.starts_with("image/"),
        if_refused: None,
    }
}

#[tokio::test]
async fn files_upload_as_photos_or_documents() {
    let (fake, channel, _) = setup().await;
    let dir = tempfile::tempdir().unwrap();
    let reply = Reply::to("5");
    let t = reply.target();
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

/// A group upgraded to a supergroup: an upload to the old id is refused with the new one,
/// and made once more there, a photo and a document alike, replying to nothing (the
/// supergroup numbers its messages anew).
#[tokio::test]
async fn files_for_a_group_that_became_a_supergroup_go_to_the_supergroup() {
    const OLD_GROUP: i64 = -4_123_456_789;
    let (fake, channel, _) = setup().await;
    let dir = tempfile::tempdir().unwrap();
    let supergroup = fake.migrate_group(OLD_GROUP);
    let chat = ChatId::new(OLD_GROUP.to_string());
    let reply = Reply::to("5");
    let t = SendTarget {
        chat_id: &chat,
        chat_kind: ChatKind::Group,
        ..reply.target()
    };
    let files = [
        attachment(&dir, "chart.png", b"\x89PNG fake", "image/png"),
        attachment(&dir, "report.pdf", b"%PDF-1.7 fake", "application/pdf"),
    ];
    for file in &files {
        channel.send_file(t, file).await.unwrap();
    }
    let uploads: Vec<_> = fake
        .calls()
        .into_iter()
        .filter(|c| c.method == "sendPhoto" || c.method == "sendDocument")
        .map(|c| (c.method.clone(), c.int("chat_id"), c.status))
        .collect();
    let call = |method: &str, chat, status| (method.to_owned(), Some(chat), status);
    assert_eq!(
        uploads,
        [
            call("sendPhoto", OLD_GROUP, 400),
            call("sendPhoto", supergroup, 200),
            call("sendDocument", OLD_GROUP, 400),
            call("sendDocument", supergroup, 200),
        ]
    );
    assert!(
        fake.calls()
            .iter()
            .filter(|c| c.int("chat_id") == Some(supergroup))
            .all(|c| c.params.get("reply_parameters").is_none())
    );
    let shown: Vec<_> = fake
        .bot_messages(supergroup)
        .iter()
        .map(|m| (m.kind, m.reply_to))
        .collect();
    assert_eq!(shown, [("photo", None), ("document", None)]);
}

#[tokio::test]
async fn oversized_files_are_refused_before_upload() {
    let (fake, channel, _) = setup().await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("huge.bin");
    let file = std::fs::File::create(&path).unwrap();
    file.set_len(50 * 1024 * 1024 + 1).unwrap();
    let huge = OutboundFile {
        path,
        filename: "huge.bin".into(),
        mime_type: "application/octet-stream".into(),
        size: 1,
        is_image: false,
        if_refused: None,
    };
    let reply = Reply::to("5");
    let e = channel.send_file(reply.target(), &huge).await.unwrap_err();
    assert!(matches!(e, ChannelError::Rejected { .. }), "{e:?}");
    assert!(fake.calls_to("sendDocument").is_empty());
}

/// The attachments the adapter makes of `incoming`, as the daemon receives them.
fn attachments_of(fake: &FakeTelegram, incoming: Incoming) -> Vec<InboundFile> {
    let update: Update = serde_json::from_value(fake.make_update(incoming).update).unwrap();
    let ctx = InboundContext {
        bot_username: Some(BOT_USERNAME),
        allowed_users: &AllowedUsers::Anyone,
        commands: &CommandVocabulary::new(im_bridge_fakes::COMMANDS),
    };
    match normalize(&update, &ctx) {
        Normalized::Message(msg) => msg.files,
        other => panic!("{other:?}"),
    }
}

/// A document handle as `normalize` makes it, with the size the update declared.
fn handle(file_id: &str, size: Option<u64>) -> InboundFile {
    InboundFile {
        kind: FileKind::File,
        filename: Some("notes.bin".into()),
        mime_type: Some("application/octet-stream".into()),
        size,
        source: FileSource::Handle { id: file_id.into() },
    }
}

/// Binary content that is not valid UTF-8 and spans several download chunks.
fn content(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i * 7 % 256) as u8).collect()
}

/// Panics unless `error` is a refusal naming `limit`, and nothing in it shows the token.
fn assert_refused_over(error: &ChannelError, limit: u64) {
    assert!(
        matches!(error, ChannelError::TooLarge { limit: l } if *l == limit),
        "{error:?}"
    );
    assert_eq!(
        error.to_string(),
        format!("the file is larger than {limit} bytes")
    );
    assert_no_token(error);
}

fn assert_no_token(error: &ChannelError) {
    let text = format!("{error} {error:?}");
    let (bot_id, _) = TOKEN.split_once(':').unwrap();
    assert!(!text.contains(TOKEN) && !text.contains(bot_id), "{text}");
}

#[tokio::test]
async fn attachments_come_back_byte_for_byte() {
    let (fake, channel, probe) = setup().await;
    let doc = content(10_000);
    let files = attachments_of(
        &fake,
        fake.with_document(
            Incoming::private(CHAT, "see attached").as_caption(),
            "notes.bin",
            "application/octet-stream",
            doc.clone(),
        ),
    );
    let [file] = files.as_slice() else {
        panic!("{files:?}");
    };
    assert_eq!(file.size, Some(10_000));
    let bytes = channel.fetch_file(file, 10_000).await.unwrap();
    assert_eq!(bytes, doc);

    let picture = content(3_000);
    let files = attachments_of(
        &fake,
        fake.with_photo(
            Incoming::private(CHAT, "").as_caption(),
            picture.clone(),
            800,
            600,
        ),
    );
    let bytes = channel.fetch_file(&files[0], u64::MAX).await.unwrap();
    assert_eq!(bytes, picture);

    // A download without Content-Length is assembled from its chunks all the same.
    let streamed = content(50_000);
    let id = fake.add_file(streamed.clone());
    fake.serve_without_length(&id);
    let bytes = channel
        .fetch_file(&handle(&id, None), 50_000)
        .await
        .unwrap();
    assert_eq!(bytes, streamed);

    assert_eq!(fake.calls_to("getFile").len(), 3);
    assert_eq!(fake.downloads().len(), 3);
    // Inline bytes need no download; a staged path is nothing Telegram produces.
    let inline = InboundFile {
        source: FileSource::Inline {
            bytes: Bytes::from_static(b"inline"),
        },
        ..handle("", None)
    };
    assert_eq!(channel.fetch_file(&inline, 6).await.unwrap(), "inline");
    let staged = InboundFile {
        source: FileSource::Path {
            path: "/tmp/x".into(),
            handle: None,
        },
        ..handle("", None)
    };
    let e = channel.fetch_file(&staged, 6).await.unwrap_err();
    assert!(matches!(e, ChannelError::Unsupported(_)), "{e:?}");
    assert_eq!(fake.downloads().len(), 3);
    assert_eq!(probe.errors(NAME, Stage::Processing), 1);
}

#[tokio::test]
async fn declared_sizes_over_the_bound_are_refused_before_downloading() {
    let (fake, channel, probe) = setup().await;
    // The update declares more than Telegram serves: refused before `getFile`.
    let id = fake.add_file(content(100));
    let files = attachments_of(
        &fake,
        Incoming::private(CHAT, "big").as_caption().document(
            &id,
            "big.iso",
            "application/octet-stream",
            MAX_DOWNLOAD_BYTES + 1,
        ),
    );
    let e = channel.fetch_file(&files[0], u64::MAX).await.unwrap_err();
    assert_refused_over(&e, MAX_DOWNLOAD_BYTES);
    assert!(fake.calls_to("getFile").is_empty());

    // `getFile` declares too much: refused before the download.
    fake.declare_file_size(&id, Some(MAX_DOWNLOAD_BYTES + 1));
    let e = channel
        .fetch_file(&handle(&id, None), u64::MAX)
        .await
        .unwrap_err();
    assert_refused_over(&e, MAX_DOWNLOAD_BYTES);
    assert_eq!(fake.calls_to("getFile").len(), 1);

    // The caller's bound, when smaller, is the one kept: 100 bytes > 50.
    let small = fake.add_file(content(100));
    let e = channel
        .fetch_file(&handle(&small, None), 50)
        .await
        .unwrap_err();
    assert_refused_over(&e, 50);
    let e = channel
        .fetch_file(&handle(&small, Some(100)), 50)
        .await
        .unwrap_err();
    assert_refused_over(&e, 50);

    assert!(fake.downloads().is_empty(), "{:?}", fake.downloads());
    assert_eq!(probe.errors(NAME, Stage::Processing), 4);
    assert_eq!(probe.errors(NAME, Stage::Sending), 0);
}

#[tokio::test]
async fn bytes_past_the_bound_are_refused_while_downloading() {
    let (fake, channel, probe) = setup().await;
    // `getFile` says nothing of the size; the Content-Length does.
    let id = fake.add_file(content(100));
    fake.declare_file_size(&id, None);
    let e = channel
        .fetch_file(&handle(&id, None), 50)
        .await
        .unwrap_err();
    assert_refused_over(&e, 50);
    // Nothing says the size but the bytes: counted as they arrive.
    let id = fake.add_file(content(20_000));
    fake.declare_file_size(&id, Some(10));
    fake.serve_without_length(&id);
    let e = channel
        .fetch_file(&handle(&id, Some(10)), 5_000)
        .await
        .unwrap_err();
    assert_refused_over(&e, 5_000);
    assert_eq!(fake.downloads().len(), 2);
    assert_eq!(probe.errors(NAME, Stage::Processing), 2);
}

#[tokio::test]
async fn unknown_or_unavailable_files_are_errors_that_never_show_the_token() {
    let (fake, channel, probe) = setup().await;
    let e = channel
        .fetch_file(&handle("no-such-file", None), u64::MAX)
        .await
        .unwrap_err();
    assert!(matches!(e, ChannelError::Rejected { .. }), "{e:?}");
    assert_no_token(&e);

    let id = fake.add_file(content(10));
    fake.fail(
        "getFile",
        Trigger::Nth(2),
        Failure::Status(502, "Bad Gateway".into()),
    );
    let e = channel
        .fetch_file(&handle(&id, None), u64::MAX)
        .await
        .unwrap_err();
    assert!(matches!(e, ChannelError::Transport(_)), "{e:?}");
    assert_no_token(&e);
    fake.fail("getFile", Trigger::Nth(3), Failure::RetryAfter(4));
    let e = channel
        .fetch_file(&handle(&id, None), u64::MAX)
        .await
        .unwrap_err();
    assert!(
        matches!(e, ChannelError::RetryAfter(d) if d == Duration::from_secs(4)),
        "{e:?}"
    );
    // The file is still there once Telegram recovers.
    let bytes = channel.fetch_file(&handle(&id, None), 10).await.unwrap();
    assert_eq!(bytes, content(10));

    assert!(fake.downloads().len() == 1, "{:?}", fake.downloads());
    probe.assert_contract(NAME);
    assert_eq!(probe.errors(NAME, Stage::Processing), 3);
    assert_eq!(probe.errors(NAME, Stage::Receiving), 0);
}
