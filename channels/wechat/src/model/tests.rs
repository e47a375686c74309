//! Every body against its recorded payload: read into its type, written back unchanged;
//! messages keep what the adapter does not read, and an unknown item type reads.

use im_bridge_channel::fixture;
use im_bridge_channel::fixtures::round_trip;

use super::*;

#[test]
fn polls_and_their_answers_round_trip() {
    let poll: GetUpdates = round_trip(fixture!("get_updates.json"));
    assert_eq!(poll.get_updates_buf, "");
    let updates: Updates = round_trip(fixture!("updates_text.json"));
    assert_eq!(updates.longpolling_timeout_ms, Some(35_000));
    let msgs = updates.msgs.unwrap();
    let message: Message = round_trip(&msgs[0].to_string());
    assert_eq!(
        message.id().map(|(id, _)| id).as_deref(),
        Some("7000000000000000001")
    );
    assert_eq!(message.message_type, Some(FROM_USER));
    assert_eq!(
        message.item_list[0].text_item.as_ref().unwrap().text,
        "你好, what can you do?"
    );
    assert!(message.extra.contains_key("session_id"));
    // Observed: a success without `ret`.
    let empty: Updates = round_trip(fixture!("updates_empty_without_ret.json"));
    assert_eq!(empty.envelope, Envelope::default());
    let expired: Envelope = round_trip(fixture!("session_expired.json"));
    assert_eq!((expired.ret, expired.errcode), (None, Some(-14)));
}

#[test]
fn every_media_item_round_trips() {
    let updates: Updates = round_trip(fixture!("updates_media.json"));
    let msgs: Vec<Message> = updates
        .msgs
        .unwrap()
        .iter()
        .map(|m| round_trip(&m.to_string()))
        .collect();
    assert_eq!(
        msgs[0].id().map(|(id, _)| id).as_deref(),
        Some("7000000000000000002")
    );
    let image = msgs[0].item_list[0].image_item.as_ref().unwrap();
    assert_eq!(
        image.aeskey.as_deref(),
        Some("deadbeef000102030405060708090a0b")
    );
    assert!(image.media.as_ref().unwrap().full_url.is_some());
    let voice = msgs[1].item_list[0].voice_item.as_ref().unwrap();
    assert_eq!(voice.text.as_deref(), Some("明天的会议几点开始"));
    let file = msgs[2].item_list[0].file_item.as_ref().unwrap();
    assert_eq!(file.file_name.as_deref(), Some("季度报告.pdf"));
    assert_eq!(msgs[2].item_list[1].kind, item::VIDEO);
    assert!(msgs[2].item_list[2].extra.contains_key("ref_msg"));
    assert_eq!(msgs[2].item_list[3].kind, 11);
}

#[test]
fn sends_typing_and_uploads_round_trip() {
    for text in [
        fixture!("send_message_text.json"),
        fixture!("send_message_image.json"),
        fixture!("send_message_file.json"),
    ] {
        let send: SendMessage = round_trip(text);
        assert_eq!(send.msg.item_list.len(), 1);
        assert_eq!(
            (send.msg.message_type, send.msg.message_state),
            (BOT_FINISHED, BOT_FINISHED)
        );
    }
    let refused: Envelope = round_trip(fixture!("send_message_refused.json"));
    assert_eq!(refused.ret, Some(-2));
    let _: GetConfig = round_trip(fixture!("get_config.json"));
    let config: Config = round_trip(fixture!("config.json"));
    assert!(config.typing_ticket.is_some());
    let typing: SendTyping = round_trip(fixture!("send_typing.json"));
    assert_eq!(typing.status, TYPING);
    let upload: GetUploadUrl = round_trip(fixture!("get_upload_url.json"));
    assert_eq!(upload.filesize, 16);
    let url: UploadUrl = round_trip(fixture!("upload_url.json"));
    assert!(url.upload_param.is_some() && url.upload_full_url.is_none());
    let full: UploadUrl = round_trip(fixture!("upload_url_full.json"));
    assert!(full.upload_full_url.is_some());
}

#[test]
fn the_qr_login_round_trips() {
    let code: QrCode = round_trip(fixture!("qrcode.json"));
    assert!(code.qrcode_img_content.starts_with("https://"));
    let wait: QrStatus = round_trip(fixture!("qr_status_wait.json"));
    assert_eq!(wait.status, "wait");
    let confirmed: QrStatus = round_trip(fixture!("qr_status_confirmed.json"));
    assert!(confirmed.bot_token.is_some() && confirmed.ilink_bot_id.is_some());
}
