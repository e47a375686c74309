//! Normalization against the payload fixtures (shaped after the official docs' and SDK's
//! examples) and hand-built variations of them.

use serde_json::json;

use super::*;

const APP: &str = "102012345";
const BOT: &str = "3889001234";

fn fixture(name: &str) -> Value {
    let text = match name {
        "group" => im_bridge_channel::fixture!("gateway_group_at_message.json"),
        "c2c" => im_bridge_channel::fixture!("gateway_c2c_message.json"),
        _ => unreachable!(),
    };
    serde_json::from_str(text).unwrap()
}

/// Two minutes after the fixtures' `2024-10-15T16:33:15+08:00`.
fn soon() -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(1_728_981_195 + 120)
}

fn run_at(
    payload: &Value,
    allowed: &AllowedUsers,
    now: SystemTime,
) -> Result<InboundMessage, Skip> {
    let commands = CommandVocabulary::new(["goal", "help"]);
    let ctx = InboundContext {
        app_id: APP,
        bot_id: Some(BOT),
        allowed_users: allowed,
        commands: &commands,
        now,
    };
    normalize(
        payload["t"].as_str().unwrap(),
        payload["id"].as_str(),
        &payload["d"],
        &ctx,
    )
}

fn run(payload: &Value) -> Result<InboundMessage, Skip> {
    run_at(payload, &AllowedUsers::Anyone, soon())
}

#[test]
fn the_fixtures_read_back_as_they_were_written() {
    for name in ["group", "c2c"] {
        let payload = fixture(name);
        let event = MessageEvent::deserialize(&payload["d"]).unwrap();
        assert_eq!(event.id, payload["d"]["id"]);
        assert_eq!(
            Some(event.content.as_str()),
            payload["d"]["content"].as_str()
        );
        assert_eq!(
            event.timestamp.as_deref(),
            payload["d"]["timestamp"].as_str()
        );
    }
}

#[test]
fn a_group_at_message_is_a_thread_per_sender_without_the_bot_mention() {
    let payload = fixture("group");
    let m = run(&payload).unwrap();
    assert_eq!(m.channel_name, NAME);
    assert_eq!(m.chat_id.as_str(), "group:C9F778FE6ADF9D1D1DBE395BF744A33A");
    assert_eq!(m.user_id.as_str(), "E4F4AEA33253A2797FB897C50B81D7ED");
    assert_eq!(m.chat_kind, ChatKind::Group);
    assert_eq!(
        m.topic_id.as_deref(),
        Some("E4F4AEA33253A2797FB897C50B81D7ED")
    );
    assert_eq!(m.text, "/goal ship the release notes");
    assert_eq!(m.msg_type, im_bridge_channel::MsgType::Command);
    let id = payload["d"]["id"].as_str().unwrap();
    assert_eq!(m.thread_ts.as_ref().map(MessageId::as_str), Some(id));
    assert_eq!(m.redelivery, Some(RedeliveryKey::new(APP, id)));
    assert_eq!(
        m.workspace_id.as_deref(),
        Some("102012345:group:C9F778FE6ADF9D1D1DBE395BF744A33A")
    );
    assert_eq!(m.metadata["event_id"], payload["id"]);
    assert_eq!(m.metadata["timestamp"], "2024-10-15T16:33:15+08:00");
    assert_eq!(m.metadata["sent_at"], json!(1_728_981_195.0));
    assert_eq!(m.metadata["reply_window_end"], json!(1_728_981_495.0));
    // The image is attached as a handle on its URL; the plain file is not.
    assert_eq!(m.files.len(), 1);
    let image = &m.files[0];
    assert_eq!(image.kind, FileKind::Image);
    assert_eq!(image.filename.as_deref(), Some("0A7B5C2E9F.png"));
    assert_eq!(image.mime_type.as_deref(), Some("image/png"));
    assert_eq!(image.size, Some(123_456));
    assert_eq!(
        m.created_at, 1_728_981_195.0,
        "the window runs from QQ's timestamp"
    );
    let FileSource::Handle { id } = &image.source else {
        panic!("a handle");
    };
    assert!(
        id.starts_with("https://multimedia.nt.qq.com.cn/download?"),
        "{id}"
    );
}

#[test]
fn a_c2c_message_is_one_conversation() {
    let payload = fixture("c2c");
    let m = run(&payload).unwrap();
    assert_eq!(m.chat_id.as_str(), "c2c:B7C3A1D9E5F4A2B6C8D0E1F3A5B7C9D1");
    assert_eq!(m.user_id.as_str(), "B7C3A1D9E5F4A2B6C8D0E1F3A5B7C9D1");
    assert_eq!(m.chat_kind, ChatKind::Private);
    assert_eq!(m.topic_id, None);
    assert_eq!(m.text, "哦一下");
    assert_eq!(m.workspace_id.as_deref(), Some("102012345:c2c"));
    assert_eq!(
        m.metadata["reply_window_end"],
        json!(1_728_981_195.0 + 3600.0)
    );
}

#[test]
fn only_the_bots_own_leading_mentions_are_stripped() {
    assert_eq!(
        strip_bot_mentions(" <@!3889001234> <@3889001234>hi ", Some(BOT)),
        "hi"
    );
    assert_eq!(
        strip_bot_mentions("<@!42> look", Some(BOT)),
        "<@!42> look",
        "someone else's mention stays"
    );
    assert_eq!(
        strip_bot_mentions("hi <@!3889001234>", Some(BOT)),
        "hi <@!3889001234>"
    );
    assert_eq!(
        strip_bot_mentions(" <@!3889001234> x", None),
        "<@!3889001234> x"
    );
    assert_eq!(
        strip_bot_mentions("<@!3889001234", Some(BOT)),
        "<@!3889001234"
    );
    // Only in groups: a direct message keeps what it says.
    let mut payload = fixture("c2c");
    payload["d"]["content"] = json!("<@!3889001234> hi");
    assert_eq!(run(&payload).unwrap().text, "<@!3889001234> hi");
}

#[test]
fn an_image_alone_is_a_message_and_an_empty_text_is_not() {
    let mut payload = fixture("group");
    payload["d"]["content"] = json!(" <@!3889001234> ");
    let m = run(&payload).unwrap();
    assert_eq!(m.text, "");
    assert_eq!(m.files.len(), 1);
    payload["d"]["attachments"] = json!([]);
    assert_eq!(run(&payload).unwrap_err(), Skip::Empty);
    // A URL without a scheme (as QQ sometimes writes them) is made https.
    let mut payload = fixture("c2c");
    payload["d"]["attachments"] = json!([
        {"content_type": "image/jpeg", "url": "gchat.qpic.cn/qmeetpic/0/x/0", "filename": "../x.jpg", "size": 0},
        {"content_type": "image/gif", "url": "ftp://host/x"},
    ]);
    let m = run(&payload).unwrap();
    assert_eq!(m.files.len(), 1);
    assert_eq!(m.files[0].filename.as_deref(), Some("x.jpg"));
    assert_eq!(m.files[0].size, None, "0 is QQ's unknown size");
    assert_eq!(
        m.files[0].source,
        FileSource::Handle {
            id: "https://gchat.qpic.cn/qmeetpic/0/x/0".into()
        }
    );
}

#[test]
fn a_message_whose_window_closed_is_skipped() {
    let group = fixture("group");
    let sent = UNIX_EPOCH + Duration::from_secs(1_728_981_195);
    let anyone = AllowedUsers::Anyone;
    assert!(run_at(&group, &anyone, sent + Duration::from_secs(299)).is_ok());
    assert_eq!(
        run_at(&group, &anyone, sent + GROUP_WINDOW).unwrap_err(),
        Skip::Expired
    );
    let c2c = fixture("c2c");
    assert!(run_at(&c2c, &anyone, sent + GROUP_WINDOW).is_ok());
    assert_eq!(
        run_at(&c2c, &anyone, sent + C2C_WINDOW).unwrap_err(),
        Skip::Expired
    );
    let mut naive = fixture("c2c");
    naive["d"]["timestamp"] = json!("2024-10-15T16:33:15");
    assert_eq!(run(&naive).unwrap_err(), BAD_TIMESTAMP);
    naive["d"]["timestamp"] = Value::Null;
    assert_eq!(run(&naive).unwrap_err(), BAD_TIMESTAMP);
}

#[test]
fn what_is_skipped() {
    let mut other = fixture("c2c");
    other["t"] = json!("FRIEND_ADD");
    assert_eq!(run(&other).unwrap_err(), Skip::NotAMessage);
    let mut bad = fixture("group");
    bad["d"]["group_openid"] = Value::Null;
    assert_eq!(run(&bad).unwrap_err(), Skip::Malformed);
    let mut bad = fixture("c2c");
    bad["d"]["author"] = json!({"member_openid": "x"});
    assert_eq!(run(&bad).unwrap_err(), Skip::Malformed);
    let mut bad = fixture("c2c");
    bad["d"] = json!("not an object");
    assert_eq!(run(&bad).unwrap_err(), Skip::Malformed);
    let only =
        AllowedUsers::from_entries(Some(vec![Some("B7C3A1D9E5F4A2B6C8D0E1F3A5B7C9D1".into())]));
    assert!(run_at(&fixture("c2c"), &only, soon()).is_ok());
    assert_eq!(
        run_at(&fixture("group"), &only, soon()).unwrap_err(),
        Skip::NotAllowed
    );
}

#[test]
fn seen_drops_a_duplicate_by_event_id_or_by_message_id() {
    let t0 = Instant::now();
    let mut seen = Seen::new(8, Duration::from_secs(60));
    assert!(seen.first_time(Some("e1"), "m1", t0));
    assert!(!seen.first_time(Some("e1"), "m1", t0), "the same push");
    assert!(
        !seen.first_time(Some("e2"), "m1", t0),
        "the same message, a new event"
    );
    assert!(!seen.first_time(Some("e1"), "m9", t0), "the same event id");
    assert!(seen.first_time(None, "m2", t0));
    // Forgotten after the ttl.
    assert!(seen.first_time(Some("e1"), "m1", t0 + Duration::from_secs(61)));
    // Bounded: old ids make room.
    for i in 0..100 {
        seen.first_time(
            Some(&format!("x{i}")),
            &format!("y{i}"),
            t0 + Duration::from_secs(61),
        );
    }
    assert!(seen.len() <= 8, "{}", seen.len());
}

#[test]
fn seen_looks_without_remembering_until_told() {
    let t0 = Instant::now();
    let mut seen = Seen::new(16, Duration::from_secs(60));
    assert!(!seen.contains(Some("e1"), "m1", t0));
    assert!(
        !seen.contains(Some("e1"), "m1", t0),
        "looking remembers nothing"
    );
    seen.remember(Some("e1"), "m1", t0);
    assert!(seen.contains(Some("e1"), "m1", t0));
    assert!(seen.contains(None, "m1", t0), "by the message id");
    assert!(seen.contains(Some("e1"), "m2", t0), "by the event id");
    assert!(!seen.contains(Some("e1"), "m1", t0 + Duration::from_secs(61)));
}
