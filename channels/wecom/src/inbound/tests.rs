//! Normalization of the recorded callbacks.

use im_bridge_channel::{AllowedUsers, ChatKind, FileKind, FileSource, MsgType, Skip, fixture};
use serde_json::json;

use super::*;

fn run_with(text: &str, allowed: &AllowedUsers) -> Result<InboundMessage, Skip> {
    let commands = CommandVocabulary::new(["goal", "help"]);
    let ctx = InboundContext {
        allowed_users: allowed,
        commands: &commands,
    };
    normalize_frame(&serde_json::from_str(text).unwrap(), &ctx)
}

fn run(text: &str) -> Result<InboundMessage, Skip> {
    run_with(text, &AllowedUsers::Anyone)
}

#[test]
fn a_group_mention_is_stripped_before_the_command_check() {
    let msg = run(fixture!("msg_text_group.json")).unwrap();
    assert_eq!(msg.text, "/goal 写一份周报");
    assert_eq!(msg.msg_type, MsgType::Command);
    assert_eq!(msg.chat_kind, ChatKind::Group);
    assert_eq!(msg.chat_id.as_str(), "wrkSFfCgAAxxxxGroup");
    assert_eq!(msg.user_id.as_str(), "zhangsan");
    let msgid = "CAIQ16HMjQYY/NGagIOAgAMgq4KM0AI=";
    assert_eq!(msg.topic_id.as_deref(), Some(msgid));
    assert_eq!(
        msg.redelivery,
        Some(RedeliveryKey::new("aibAbCdEfGh123", msgid))
    );
    assert_eq!(msg.metadata["req_id"], "Gf3kQ9nX2mRvL8pT");
    assert_eq!(msg.metadata["chatid"], "wrkSFfCgAAxxxxGroup");
    assert_eq!(msg.created_at, 1_733_467_811.0);
}

#[test]
fn a_private_text_keeps_its_quote_and_chat_keeps_mentions() {
    let msg = run(fixture!("msg_text_single_quote.json")).unwrap();
    assert_eq!(msg.text, "帮我总结一下\n\n> 这是今日的测试情况");
    assert_eq!(msg.chat_kind, ChatKind::Private);
    assert_eq!(msg.chat_id.as_str(), "lisi");
    assert_eq!(msg.topic_id, None);
    let mixed = run(fixture!("msg_mixed.json")).unwrap();
    assert_eq!(mixed.text, "@RobotA 这是今日的测试情况");
    assert_eq!(mixed.msg_type, MsgType::Chat);
    assert_eq!(mixed.files.len(), 1);
    assert_eq!(mixed.files[0].kind, FileKind::Image);
}

#[test]
fn images_and_files_are_handles_with_their_key() {
    for (text, kind) in [
        (fixture!("msg_image.json"), FileKind::Image),
        (fixture!("msg_file.json"), FileKind::File),
    ] {
        let msg = run(text).unwrap();
        assert_eq!(msg.text, "");
        let FileSource::Handle { id } = &msg.files[0].source else {
            panic!("not a handle");
        };
        let (key, url) = parse_handle(id).unwrap();
        assert_eq!(key, "kx3nD0pZqS8vB2wYt6mL9cR4fH1jE7uA5gN0oP2iQ3s=");
        assert!(
            url.starts_with("https://ww-aibot-img-1258476243.cos."),
            "{url}"
        );
        assert_eq!(msg.files[0].kind, kind);
    }
    assert_eq!(
        run(fixture!("msg_voice.json")).unwrap().text,
        "这是语音转成文本的内容"
    );
}

/// In a group the bot hears only text and mixed messages: "@Bot what is this?" quoting a
/// picture, a file, a video or a mixed message brings what was quoted, as handles like the
/// message's own; a message with media of its own keeps only those.
#[test]
fn a_quoted_picture_file_or_video_is_attached_when_the_message_has_none() {
    let msg = run(fixture!("msg_text_group_quote_image.json")).unwrap();
    assert_eq!(msg.text, "@RobotA 这张图里是什么？");
    assert_eq!(msg.chat_kind, ChatKind::Group);
    assert_eq!(msg.files.len(), 1, "{:?}", msg.files);
    assert_eq!(msg.files[0].kind, FileKind::Image);
    let FileSource::Handle { id } = &msg.files[0].source else {
        panic!("not a handle");
    };
    let (key, url) = parse_handle(id).unwrap();
    assert_eq!(key, "kx3nD0pZqS8vB2wYt6mL9cR4fH1jE7uA5gN0oP2iQ3s=");
    assert!(
        url.starts_with("https://ww-aibot-img-1258476243.cos."),
        "{url}"
    );

    let media =
        |n: u32| json!({"url": format!("https://cos.example/{n}"), "aeskey": format!("k{n}")});
    let with_quote = |body: serde_json::Value, quote: serde_json::Value| {
        let mut body = body;
        body["quote"] = quote;
        let frame = json!({"cmd": "aibot_msg_callback", "headers": {"req_id": "r"}, "body": body});
        run(&frame.to_string()).unwrap()
    };
    let text = json!({"msgid": "m", "aibotid": "b", "chattype": "group", "chatid": "g",
                      "from": {"userid": "u"}, "msgtype": "text",
                      "text": {"content": "@RobotA what is this?"}});
    let handles = |msg: &InboundMessage| -> Vec<(FileKind, String)> {
        msg.files
            .iter()
            .map(|f| match &f.source {
                FileSource::Handle { id } => (f.kind, parse_handle(id).unwrap().1.to_owned()),
                other => panic!("not a handle: {other:?}"),
            })
            .collect()
    };
    for (msgtype, kind) in [("file", FileKind::File), ("video", FileKind::Video)] {
        let msg = with_quote(text.clone(), json!({"msgtype": msgtype, msgtype: media(1)}));
        assert_eq!(handles(&msg), [(kind, "https://cos.example/1".to_owned())]);
    }
    let quoted_mixed = json!({"msgtype": "mixed", "mixed": {"msg_item": [
        {"msgtype": "text", "text": {"content": "两张图"}},
        {"msgtype": "image", "image": media(1)},
        {"msgtype": "image", "image": media(2)}]}});
    let msg = with_quote(text.clone(), quoted_mixed.clone());
    assert_eq!(msg.text, "@RobotA what is this?\n\n> 两张图");
    assert_eq!(
        handles(&msg),
        [
            (FileKind::Image, "https://cos.example/1".to_owned()),
            (FileKind::Image, "https://cos.example/2".to_owned()),
        ]
    );
    // A mixed message's own picture: the quoted ones are not added.
    let own = json!({"msgid": "m", "aibotid": "b", "chattype": "group", "chatid": "g",
                     "from": {"userid": "u"}, "msgtype": "mixed", "mixed": {"msg_item": [
                         {"msgtype": "text", "text": {"content": "@RobotA compare"}},
                         {"msgtype": "image", "image": media(3)}]}});
    let msg = with_quote(own, quoted_mixed);
    assert_eq!(
        handles(&msg),
        [(FileKind::Image, "https://cos.example/3".to_owned())]
    );
    // A quote without a URL attaches nothing.
    let msg = with_quote(text, json!({"msgtype": "image", "image": {"url": ""}}));
    assert!(msg.files.is_empty());
}

#[test]
fn what_cannot_be_answered_is_skipped_with_its_reason() {
    let frame = |body: serde_json::Value| {
        json!({"cmd": "aibot_msg_callback", "headers": {"req_id": "r"}, "body": body}).to_string()
    };
    let base = json!({"msgid": "m", "aibotid": "b", "chattype": "single", "from": {"userid": "u"},
                      "msgtype": "text", "text": {"content": "hi"}});
    assert!(run(&frame(base.clone())).is_ok());
    let with = |key: &str, value: serde_json::Value| {
        let mut b = base.clone();
        b[key] = value;
        run(&frame(b)).unwrap_err()
    };
    assert_eq!(with("msgid", json!("")), Skip::Malformed);
    assert_eq!(with("from", json!({})), Skip::NotAUser);
    assert_eq!(with("chattype", json!("group")), Skip::Malformed);
    assert_eq!(with("msgtype", json!("hologram")), Skip::Empty);
    assert_eq!(with("text", json!({"content": "  "})), Skip::Empty);
    let only = AllowedUsers::from_entries(Some(vec![Some("other".to_owned())]));
    assert_eq!(run_with(&frame(base), &only).unwrap_err(), Skip::NotAllowed);
    assert_eq!(
        run(fixture!("event_enter_chat.json")).unwrap_err(),
        Skip::NotAMessage
    );
}

#[test]
fn events_are_handled_deliberately() {
    let action = |text: &str| event(&serde_json::from_str(text).unwrap());
    assert_eq!(
        action(fixture!("event_disconnected.json")),
        EventAction::Replaced
    );
    assert_eq!(
        action(fixture!("event_enter_chat.json")),
        EventAction::EnteredChat
    );
    assert_eq!(
        action(fixture!("event_feedback.json")),
        EventAction::Ignored
    );
    assert_eq!(
        action(fixture!("event_template_card.json")),
        EventAction::Ignored
    );
    // Another field of an unexpected shape does not hide what the event is.
    let mut odd: serde_json::Value =
        serde_json::from_str(fixture!("event_disconnected.json")).unwrap();
    odd["body"]["create_time"] = serde_json::json!("not a number");
    odd["body"]["from"] = serde_json::json!(7);
    assert_eq!(
        event(&serde_json::from_value(odd).unwrap()),
        EventAction::Replaced
    );
}
