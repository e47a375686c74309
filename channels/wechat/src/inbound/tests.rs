//! Normalization of the recorded messages.

use im_bridge_channel::{AllowedUsers, FileKind, MsgType, fixture};
use serde_json::json;

use super::*;
use crate::model::Updates;

fn messages(text: &str) -> Vec<Message> {
    let updates: Updates = serde_json::from_str(text).unwrap();
    updates
        .msgs
        .unwrap()
        .into_iter()
        .map(|m| serde_json::from_value(m).unwrap())
        .collect()
}

fn run_with(message: &Message, allowed: &AllowedUsers) -> Result<InboundMessage, Skip> {
    let commands = CommandVocabulary::new(["goal", "help"]);
    let ctx = InboundContext {
        allowed_users: allowed,
        commands: &commands,
    };
    normalize(message, &ctx)
}

fn run(message: &Message) -> Result<InboundMessage, Skip> {
    run_with(message, &AllowedUsers::Anyone)
}

const USER: &str = "o9cq8user0000000000000001@im.wechat";

#[test]
fn a_text_is_a_private_message_with_its_context_token() {
    let message = &messages(fixture!("updates_text.json"))[0];
    let msg = run(message).unwrap();
    assert_eq!(msg.text, "你好, what can you do?");
    assert_eq!(msg.msg_type, MsgType::Chat);
    assert_eq!(msg.chat_kind, ChatKind::Private);
    assert_eq!((msg.chat_id.as_str(), msg.user_id.as_str()), (USER, USER));
    assert_eq!(
        msg.redelivery,
        Some(RedeliveryKey::new(
            "b0f5860fdecb@im.bot",
            "7000000000000000001"
        ))
    );
    assert_eq!(
        msg.thread_ts.as_ref().unwrap().as_str(),
        "7000000000000000001"
    );
    assert_eq!(msg.metadata[CONTEXT_TOKEN], "AARzJWAFAAABAAAAAAAp2m6nPLB");
    assert_eq!(msg.created_at, 1_767_225_600.123);
    assert!(msg.files.is_empty());
}

#[test]
fn media_are_handles_and_a_voice_is_its_transcript() {
    let msgs = messages(fixture!("updates_media.json"));
    let image = run(&msgs[0]).unwrap();
    assert_eq!(image.text, "what is on this whiteboard?");
    assert_eq!(image.files.len(), 1);
    let file = &image.files[0];
    assert_eq!(file.kind, FileKind::Image);
    let FileSource::Handle { id } = &file.source else {
        panic!("not a handle");
    };
    let (key, param, full_url) = parse_handle(id).unwrap();
    // The item's hex `aeskey` wins over `media.aes_key`.
    assert_eq!(cdn::hex(&key.unwrap()), "deadbeef000102030405060708090a0b");
    assert_eq!(param, "++//ZmFrZS1kb3dubG9hZC0x");
    assert!(full_url.starts_with("https://novac2c.cdn.weixin.qq.com/"));
    let voice = run(&msgs[1]).unwrap();
    assert_eq!(voice.text, "明天的会议几点开始");
    assert!(voice.files.is_empty());
    let mixed = run(&msgs[2]).unwrap();
    assert_eq!(mixed.text, "see above\n\n> earlier");
    let kinds: Vec<FileKind> = mixed.files.iter().map(|f| f.kind).collect();
    assert_eq!(kinds, [FileKind::File, FileKind::Video]);
    assert_eq!(mixed.files[0].filename.as_deref(), Some("季度报告.pdf"));
    assert_eq!(mixed.files[0].size, Some(52_311));
    let FileSource::Handle { id } = &mixed.files[0].source else {
        panic!("not a handle");
    };
    let (key, _, full_url) = parse_handle(id).unwrap();
    assert_eq!(cdn::hex(&key.unwrap()), "00112233445566778899aabbccddeeff");
    assert_eq!(full_url, "");
}

#[test]
fn commands_bots_groups_strangers_and_empties() {
    let mut message = messages(fixture!("updates_text.json")).remove(0);
    message.item_list[0].text_item.as_mut().unwrap().text = "/goal ship it".into();
    assert_eq!(run(&message).unwrap().msg_type, MsgType::Command);
    let only_bob = AllowedUsers::from_entries(Some(vec![Some("bob@im.wechat".to_owned())]));
    assert_eq!(run_with(&message, &only_bob), Err(Skip::NotAllowed));
    let mut bot = message.clone();
    bot.message_type = Some(2);
    assert_eq!(run(&bot), Err(Skip::NotAUser));
    let mut group = message.clone();
    group.group_id = Some("g1".into());
    assert_eq!(run(&group), Err(Skip::Other("group")));
    let mut empty = message.clone();
    empty.item_list.clear();
    assert_eq!(run(&empty), Err(Skip::Empty));
    let mut no_id = message.clone();
    no_id.message_id = Some(json!(""));
    no_id.msg_id = Some(json!(" "));
    no_id.client_id = Some(json!(null));
    assert_eq!(run(&no_id), Err(Skip::Malformed), "no usable id at all");
    let unvoiced: Message = serde_json::from_value(json!({
        "message_id": 9, "from_user_id": USER, "message_type": 1,
        "item_list": [{"type": 3, "voice_item": {"media": {
            "encrypt_query_param": "p", "aes_key": "MDAxMTIyMzM0NDU1NjY3Nzg4OTlhYWJiY2NkZGVlZmY="}}}],
    }))
    .unwrap();
    let voice = run(&unvoiced).unwrap();
    assert_eq!(voice.files[0].kind, FileKind::Audio);
    assert_eq!(voice.files[0].filename.as_deref(), Some("wechat-9-1.silk"));
}

#[test]
fn a_handle_is_only_what_file_handle_made() {
    assert!(parse_handle("wechat-media:zz:p:").is_none());
    assert!(parse_handle("wechat-media:::").is_none());
    assert!(parse_handle("other:00112233445566778899aabbccddeeff:p:").is_none());
    assert!(parse_handle("wechat-media:00112233445566778899aabbccddeeff::").is_none());
    let (_, param, url) =
        parse_handle("wechat-media:00112233445566778899aabbccddeeff:p:http://h/x?a=b:c").unwrap();
    assert_eq!((param, url), ("p", "http://h/x?a=b:c"));
}

#[test]
fn without_a_message_id_the_msg_id_or_the_client_id_stands_in() {
    let bot = "b0f5860fdecb@im.bot";
    let mut message = messages(fixture!("updates_text.json")).remove(0);
    message.message_id = None;
    message.msg_id = Some(json!(7_000_000_000_000_000_002_u64));
    message.client_id = Some(json!("wx-client-1"));
    let by_msg_id = run(&message).unwrap();
    assert_eq!(
        by_msg_id.redelivery,
        Some(RedeliveryKey::new(bot, "7000000000000000002"))
    );
    assert_eq!(by_msg_id.metadata["message_id"], "7000000000000000002");
    message.msg_id = None;
    let by_client_id = run(&message).unwrap();
    assert_eq!(by_client_id.text, "你好, what can you do?");
    assert_eq!(
        by_client_id.thread_ts.as_ref().unwrap().as_str(),
        "wx-client-1"
    );
    assert_eq!(
        by_client_id.redelivery,
        Some(RedeliveryKey::new(bot, "client_id:wx-client-1")),
        "a client's id never meets a message_id"
    );
}

#[test]
fn a_picture_without_a_key_is_a_plain_handle_and_other_media_need_theirs() {
    let media = json!({"encrypt_query_param": "p", "full_url": "https://c.weixin.qq.com/d?x=1"});
    let message = |item: serde_json::Value| -> Message {
        serde_json::from_value(json!({
            "message_id": 11, "from_user_id": USER, "message_type": 1, "item_list": [item],
        }))
        .unwrap()
    };
    let plain = run(&message(json!({"type": 2, "image_item": {"media": media}}))).unwrap();
    let FileSource::Handle { id } = &plain.files[0].source else {
        panic!("not a handle");
    };
    let (key, param, full_url) = parse_handle(id).unwrap();
    assert_eq!(key, None, "used as it is");
    assert_eq!((param, full_url), ("p", "https://c.weixin.qq.com/d?x=1"));
    // A key named but unreadable is not a plain picture: its bytes are ciphertext.
    let mut bad_key = media.clone();
    bad_key["aes_key"] = json!("not a key");
    let unreadable = message(json!({"type": 2, "image_item": {"media": bad_key}}));
    assert_eq!(run(&unreadable), Err(Skip::Empty));
    // Files, videos and voice notes without a key are still not attached.
    for (kind, field) in [(4, "file_item"), (5, "video_item"), (3, "voice_item")] {
        let keyless = message(json!({"type": kind, field: {"media": media, "file_name": "a.pdf"}}));
        assert_eq!(run(&keyless), Err(Skip::Empty), "{field}");
    }
}

#[test]
fn a_quoted_picture_comes_with_a_question_that_brings_none() {
    let media = json!({
        "encrypt_query_param": "q",
        "aes_key": "MDAxMTIyMzM0NDU1NjY3Nzg4OTlhYWJiY2NkZGVlZmY=",
        "encrypt_type": 1,
    });
    let quoting = |own: Option<serde_json::Value>| -> Message {
        let mut items = vec![json!({
            "type": 1,
            "text_item": {"text": "what is this?"},
            "ref_msg": {"title": "", "message_item": {"type": 2, "image_item": {"media": media}}},
        })];
        items.extend(own);
        serde_json::from_value(json!({
            "message_id": 12, "from_user_id": USER, "message_type": 1, "item_list": items,
        }))
        .unwrap()
    };
    let asked = run(&quoting(None)).unwrap();
    assert_eq!(asked.text, "what is this?");
    assert_eq!(asked.files.len(), 1);
    assert_eq!(asked.files[0].kind, FileKind::Image);
    // A message with a picture of its own brings that one only.
    let mut own = media.clone();
    own["encrypt_query_param"] = json!("own");
    let with_own = run(&quoting(Some(
        json!({"type": 2, "image_item": {"media": own}}),
    )))
    .unwrap();
    assert_eq!(with_own.files.len(), 1);
    let FileSource::Handle { id } = &with_own.files[0].source else {
        panic!("not a handle");
    };
    assert_eq!(parse_handle(id).unwrap().1, "own");
}
