//! Every frame against its recorded payload: read into its type, written back unchanged;
//! and unknown commands, fields and message types read without failing.

use im_bridge_channel::fixture;
use im_bridge_channel::fixtures::round_trip;
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::*;

/// The fixture as a [`Frame`], and its body round-tripped as `T`.
fn frame_with<T: Serialize + DeserializeOwned + std::fmt::Debug>(text: &str) -> (Frame, T) {
    let frame: Frame = round_trip(text);
    let body = serde_json::to_string(frame.body.as_ref().expect("a body")).unwrap();
    (frame.clone(), round_trip::<T>(&body))
}

#[test]
fn the_handshake_and_heartbeat_round_trip() {
    let (frame, sub) = frame_with::<Subscribe>(fixture!("subscribe.json"));
    assert_eq!(frame.cmd.as_deref(), Some(SUBSCRIBE));
    assert_eq!(sub.bot_id, "aibAbCdEfGh123");
    assert!(!format!("{sub:?}").contains("FAKE-SECRET"));
    let ping: Frame = round_trip(fixture!("ping.json"));
    assert_eq!(
        ping,
        Frame::request(PING, "ping_1733467841000_e5f6a7b8", None)
    );
    for answer in [
        fixture!("subscribe_ack.json"),
        fixture!("ping_ack.json"),
        fixture!("subscribe_refused.json"),
        fixture!("respond_refused_expired.json"),
        fixture!("answer_refused_unnamed.json"),
    ] {
        let answer: Frame = round_trip(answer);
        assert_eq!(answer.kind(), Kind::Answer);
        assert!(answer.errcode.is_some());
    }
    // WeCom's answer to an invalid request names no req_id: a refusal of no known request.
    let unnamed: Frame = round_trip(fixture!("answer_refused_unnamed.json"));
    assert!(unnamed.is_unnamed_refusal());
    assert_eq!(unnamed.errcode, Some(40058));
    let expired: Frame = round_trip(fixture!("respond_refused_expired.json"));
    assert!(!expired.is_unnamed_refusal());
}

#[test]
fn every_message_callback_round_trips() {
    for text in [
        fixture!("msg_text_group.json"),
        fixture!("msg_text_single_quote.json"),
        fixture!("msg_text_group_quote_image.json"),
        fixture!("msg_image.json"),
        fixture!("msg_mixed.json"),
        fixture!("msg_voice.json"),
        fixture!("msg_file.json"),
    ] {
        let (frame, message) = frame_with::<Message>(text);
        assert_eq!(frame.kind(), Kind::Message);
        assert!(!message.msgid.is_empty() && !message.from.userid.is_empty());
    }
    let (_, mixed) = frame_with::<Message>(fixture!("msg_mixed.json"));
    let items = &mixed.mixed.unwrap().msg_item;
    assert_eq!(items.len(), 2);
    assert!(items[1].image.as_ref().unwrap().aeskey.is_some());
}

#[test]
fn every_event_callback_round_trips() {
    for (text, eventtype) in [
        (fixture!("event_enter_chat.json"), ENTER_CHAT),
        (fixture!("event_disconnected.json"), DISCONNECTED_EVENT),
        (fixture!("event_template_card.json"), "template_card_event"),
        (fixture!("event_feedback.json"), "feedback_event"),
    ] {
        let (frame, event) = frame_with::<EventMessage>(text);
        assert_eq!(frame.kind(), Kind::Event);
        assert_eq!(event.event.eventtype, eventtype);
    }
}

#[test]
fn every_reply_and_send_round_trips() {
    let (_, first) = frame_with::<StreamReply>(fixture!("respond_stream.json"));
    assert_eq!(
        first,
        StreamReply::new(
            "stream_1733467812000_0a1b2c3d",
            "**广州**今日天气：29度",
            false
        )
    );
    let (_, last) = frame_with::<StreamReply>(fixture!("respond_stream_finish.json"));
    assert!(last.stream.finish && last.stream.msg_item.is_some());
    frame_with::<TextReply>(fixture!("respond_welcome.json"));
    frame_with::<UpdateCard>(fixture!("respond_update.json"));
    let (_, send) = frame_with::<Outgoing>(fixture!("send_markdown.json"));
    assert_eq!(
        send,
        Outgoing::markdown("lisi", "# 通知\n\n这是一条**主动推送**的消息。")
    );
    let (frame, file) = frame_with::<Outgoing>(fixture!("respond_file.json"));
    assert_eq!(frame.cmd.as_deref(), Some(RESPOND_MSG));
    assert!(file.chatid.is_none() && file.file.is_some());
}

#[test]
fn the_upload_steps_round_trip() {
    let (_, init) = frame_with::<UploadInit>(fixture!("upload_init.json"));
    assert!(init.total_chunks <= MAX_UPLOAD_CHUNKS);
    frame_with::<UploadStarted>(fixture!("upload_init_ack.json"));
    frame_with::<UploadChunk>(fixture!("upload_chunk.json"));
    frame_with::<UploadFinish>(fixture!("upload_finish.json"));
    let (_, done) = frame_with::<Uploaded>(fixture!("upload_finish_ack.json"));
    assert_eq!(done.media_id, "3a8asd892asd8asd8MEDIAID");
}

#[test]
fn what_is_unknown_is_skipped_not_an_error() {
    let frame: Frame = serde_json::from_str(
        r#"{"cmd":"aibot_future_cmd","headers":{"req_id":"r","trace":"t"},"body":[1],"extra":true}"#,
    )
    .unwrap();
    assert_eq!(frame.kind(), Kind::Unknown);
    assert!(frame.body_as::<Message>().is_none());
    let message: Message = serde_json::from_str(
        r#"{"msgid":"m","msgtype":"hologram","hologram":{"x":1},"chattype":"galaxy","new":1}"#,
    )
    .unwrap();
    assert_eq!(message.msgtype, "hologram");
    let event: EventMessage =
        serde_json::from_str(r#"{"msgid":"m","event":{"eventtype":"new_event","new_event":{}}}"#)
            .unwrap();
    assert_eq!(event.event.eventtype, "new_event");
}
