//! Every wire type against its recorded payloads in `tests/fixtures/`: read, written back,
//! equal (`im_bridge_channel::fixtures::round_trip`).

use im_bridge_channel::fixture;
use im_bridge_channel::fixtures::round_trip;

use super::*;

/// The `d` of a payload fixture, as JSON text.
fn data(payload: &Payload) -> String {
    payload.d.to_string()
}

#[test]
fn gateway_frames_round_trip() {
    let hello: Payload = round_trip(fixture!("gateway_hello.json"));
    let hello: Hello = round_trip(&data(&hello));
    assert_eq!(hello.heartbeat_interval, Some(41_250));
    let ready: Payload = round_trip(fixture!("gateway_ready.json"));
    assert_eq!(
        (ready.op, ready.s, ready.t.as_deref()),
        (0, Some(1), Some("READY"))
    );
    let ready: ReadyData = round_trip(&data(&ready));
    assert_eq!(ready.user.id, "3889001234");
    let resumed: Payload = round_trip(fixture!("gateway_resumed.json"));
    assert_eq!(resumed.t.as_deref(), Some("RESUMED"));
    for (name, text, op) in [
        ("ack", fixture!("gateway_heartbeat_ack.json"), 11),
        ("reconnect", fixture!("gateway_reconnect.json"), 7),
        (
            "invalid session",
            fixture!("gateway_invalid_session.json"),
            9,
        ),
    ] {
        let frame: Payload = round_trip(text);
        assert_eq!(frame.op, op, "{name}");
    }
    assert!(
        serde_json::from_str::<Payload>(r#"{"op": 300}"#).is_err(),
        "a gateway op is a byte"
    );
}

#[test]
fn frames_the_adapter_writes_round_trip() {
    let identify: Outgoing<Identify> = round_trip(fixture!("gateway_identify.json"));
    assert_eq!((identify.op, identify.d.shard), (2, [0, 1]));
    let resume: Outgoing<Resume> = round_trip(fixture!("gateway_resume.json"));
    assert_eq!(resume.d.seq, 42);
    let beat: Outgoing<Option<u64>> = round_trip(fixture!("gateway_heartbeat.json"));
    assert_eq!(beat.d, Some(8));
    let first: Outgoing<Option<u64>> = round_trip(fixture!("gateway_heartbeat_first.json"));
    assert_eq!(first.d, None);
}

#[test]
fn message_events_round_trip() {
    for text in [
        fixture!("gateway_group_at_message.json"),
        fixture!("gateway_c2c_message.json"),
        fixture!("webhook_c2c_message.json"),
    ] {
        let payload: Payload<i64> = round_trip(text);
        let event: MessageEvent = round_trip(&payload.d.to_string());
        assert!(event.id.starts_with("ROBOT1.0_"), "{event:?}");
    }
    let group: Payload = round_trip(fixture!("gateway_group_at_message.json"));
    let group: MessageEvent = round_trip(&data(&group));
    assert_eq!(group.attachments.len(), 2);
    assert_eq!(
        group.author.member_openid.as_deref(),
        Some("E4F4AEA33253A2797FB897C50B81D7ED")
    );
}

#[test]
fn webhook_bodies_round_trip() {
    let validation: Payload<i64> = round_trip(fixture!("webhook_validation.json"));
    assert_eq!(validation.op, 13);
    let validation: Validation = round_trip(&validation.d.to_string());
    assert_eq!(validation.event_ts.as_deref(), Some("1725442341"));
    let answer: ValidationAnswer = round_trip(fixture!("webhook_validation_answer.json"));
    assert_eq!(answer.plain_token, "Arq0D5A61EgUu4OxUvOp");
    let ack: Outgoing<u8> = round_trip(fixture!("webhook_ack.json"));
    assert_eq!((ack.op, ack.d), (12, 0));
}

#[test]
fn api_bodies_round_trip() {
    let request: TokenRequest = round_trip(fixture!("api_token_request.json"));
    assert_eq!(request.app_id, "102012345");
    let token: TokenAnswer = round_trip(fixture!("api_token_answer.json"));
    assert_eq!(token.expires_in, Some(Value::from("7200")));
    let refused: TokenAnswer = round_trip(fixture!("api_token_refusal.json"));
    assert_eq!(refused.code, Some(100_016));
    let gateway: GatewayAnswer = round_trip(fixture!("api_gateway.json"));
    assert!(gateway.url.is_some_and(|u| u.starts_with("wss://")));
    let reply: ReplyRequest = round_trip(fixture!("api_reply_request.json"));
    assert_eq!((reply.msg_type, reply.msg_seq), (0, 1));
    let sent: ReplyAnswer = round_trip(fixture!("api_reply_answer.json"));
    assert!(sent.id.is_some() && sent.code.is_none());
    for text in [
        fixture!("api_refusal.json"),
        fixture!("api_rate_limited.json"),
    ] {
        let refusal: Refusal = round_trip(text);
        assert!(refusal.code.is_some());
        let as_reply: ReplyAnswer = serde_json::from_str(text).unwrap();
        assert_eq!(as_reply.code, refusal.code, "a refusal under HTTP 200");
    }
}
