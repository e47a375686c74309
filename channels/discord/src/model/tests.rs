//! Every wire type against its recorded payloads in `tests/fixtures/`: read, written back,
//! equal (`im_bridge_channel::fixtures::round_trip`).

use im_bridge_channel::fixture;
use im_bridge_channel::fixtures::round_trip;

use super::*;

#[test]
fn requests_round_trip() {
    let message: MessageBody = round_trip(fixture!("request_create_message.json"));
    assert!(message.allowed_mentions.parse.is_empty());
    let upload: UploadPayload = round_trip(fixture!("request_upload_payload.json"));
    assert_eq!(upload.attachments[0].filename, "report.txt");
    let thread: StartThread = round_trip(fixture!("request_start_thread.json"));
    assert_eq!(thread.auto_archive_duration, 1440);
}

#[test]
fn answers_round_trip() {
    let gateway: GatewayBot = round_trip(fixture!("response_gateway_bot.json"));
    assert_eq!(gateway.url.as_deref(), Some("wss://gateway.discord.gg"));
    let me: CurrentUser = round_trip(fixture!("response_current_user.json"));
    assert_eq!(
        me.id.as_ref().and_then(snowflake),
        Some(1_100_000_000_000_000_001)
    );
    let text: ChannelAnswer = round_trip(fixture!("response_channel_text.json"));
    assert!(!text.is_thread());
    let thread: ChannelAnswer = round_trip(fixture!("response_channel_thread.json"));
    assert!(thread.is_thread());
    assert_eq!(
        thread.parent_id.as_ref().and_then(snowflake),
        text.id.as_ref().and_then(snowflake)
    );
    let sent: MessageAnswer = round_trip(fixture!("response_message.json"));
    assert_eq!(snowflake(&sent.id), Some(1_500_000_000_000_000_005));
}

#[test]
fn refusals_round_trip() {
    let gone: ErrorBody = round_trip(fixture!("error_unknown_message.json"));
    assert_eq!(gone.code, Some(10008));
    let invalid: ErrorBody = round_trip(fixture!("error_invalid_form_body.json"));
    assert_eq!(invalid.code, Some(50035));
    let limited: ErrorBody = round_trip(fixture!("error_rate_limited.json"));
    assert_eq!(
        (limited.retry_after, limited.global),
        (Some(2.5), Some(false))
    );
    let global: ErrorBody = round_trip(fixture!("error_rate_limited_global.json"));
    assert_eq!(global.global, Some(true));
}

#[test]
fn a_field_of_the_wrong_type_reads_as_absent() {
    let odd: ErrorBody =
        serde_json::from_str(r#"{"code": "x", "retry_after": "soon", "global": 1}"#).unwrap();
    assert_eq!(odd, ErrorBody::default());
    let odd: ChannelAnswer = serde_json::from_str(r#"{"type": "thread"}"#).unwrap();
    assert!(!odd.is_thread());
}
