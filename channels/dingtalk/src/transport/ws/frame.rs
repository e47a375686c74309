//! The stream protocol's JSON frames, both ways.
//!
//! DingTalk sends text frames `{specVersion, type, headers, data}`: `type` is `SYSTEM`
//! (the connection's own business: `ping`, `disconnect`), `EVENT` or `CALLBACK` (a robot
//! message is a `CALLBACK` of topic `/v1.0/im/bot/messages/get`); `headers` carry
//! `messageId`, `topic`, `contentType`, `time` and more; `data` is a JSON document *in a
//! string*. Every frame is answered with an [`Ack`] naming its `messageId`: `{code,
//! headers: {messageId, contentType}, message, data}`, `data` again a JSON string.
//!
//! Reading never panics and never echoes a payload into an error: what does not fit is a
//! [`Malformed`] with the `messageId` when one could still be read, so the frame can be
//! acked as an error.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// `type` of the connection's own frames.
pub const TYPE_SYSTEM: &str = "SYSTEM";
/// `type` of event pushes.
pub const TYPE_EVENT: &str = "EVENT";
/// `type` of callbacks (robot messages among them).
pub const TYPE_CALLBACK: &str = "CALLBACK";
/// SYSTEM topic: answer with an ack echoing the frame's `data`.
pub const TOPIC_PING: &str = "ping";
/// SYSTEM topic: ack, close, and connect again with a new ticket.
pub const TOPIC_DISCONNECT: &str = "disconnect";
/// The `contentType` of every ack.
pub const CONTENT_TYPE_JSON: &str = "application/json";

/// Ack codes, as the official SDKs use them.
pub mod code {
    /// Handled (or admitted): DingTalk does not deliver it again.
    pub const OK: u16 = 200;
    /// The frame could not be read; delivering it again will not help.
    pub const BAD_REQUEST: u16 = 400;
    /// No handler for its type or topic (the SDKs' "not implemented").
    pub const NOT_FOUND: u16 = 404;
    /// The handler could not take it now: DingTalk delivers it again (the SDKs' answer to
    /// a handler error).
    pub const SYSTEM_EXCEPTION: u16 = 500;
}

/// A frame from DingTalk.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Frame {
    /// The protocol version (`1.0`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub spec_version: String,
    /// [`TYPE_SYSTEM`], [`TYPE_EVENT`] or [`TYPE_CALLBACK`].
    #[serde(rename = "type")]
    pub kind: String,
    /// `messageId`, `topic`, …; values are strings, numbers are tolerated.
    #[serde(default)]
    pub headers: Map<String, Value>,
    /// The payload, a JSON document in a string.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<String>,
}

/// Why a frame could not be read, and the `messageId` it carried if that much was
/// readable.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Malformed {
    /// The frame's `headers.messageId`, when the frame was at least a JSON object.
    pub message_id: Option<String>,
    /// What did not fit: serde's error class, never the frame.
    pub detail: String,
}

impl Frame {
    /// Reads one text frame.
    pub fn parse(text: &str) -> Result<Self, Malformed> {
        serde_json::from_str::<Frame>(text).map_err(|error| {
            let message_id = serde_json::from_str::<Value>(text)
                .ok()
                .and_then(|v| {
                    v.pointer("/headers/messageId")
                        .and_then(Value::as_str)
                        .map(str::to_owned)
                })
                .filter(|id| !id.is_empty());
            Malformed {
                message_id,
                detail: format!("{:?} error", error.classify()),
            }
        })
    }

    /// A header as a string (numbers are written out), `None` when absent or empty.
    pub fn header(&self, key: &str) -> Option<String> {
        match self.headers.get(key)? {
            Value::String(s) if !s.is_empty() => Some(s.clone()),
            Value::Number(n) => Some(n.to_string()),
            _ => None,
        }
    }

    /// `headers.messageId`.
    pub fn message_id(&self) -> Option<String> {
        self.header("messageId")
    }

    /// `headers.topic`.
    pub fn topic(&self) -> Option<String> {
        self.header("topic")
    }
}

/// The answer to one frame.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ack {
    /// A [`code`].
    pub code: u16,
    /// `messageId` (of the frame answered) and `contentType`.
    pub headers: AckHeaders,
    /// A short word for humans reading traffic dumps (`OK`, …); never a payload.
    pub message: String,
    /// A JSON document in a string: the ping's own `data`, or `{"response": …}`.
    pub data: String,
}

/// The headers of an [`Ack`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AckHeaders {
    /// The frame answered.
    pub message_id: String,
    /// Always [`CONTENT_TYPE_JSON`].
    pub content_type: String,
}

impl Ack {
    /// An ack of `message_id` with `code`, `message` and `data` (a JSON string).
    pub fn new(message_id: &str, code: u16, message: &str, data: String) -> Self {
        Self {
            code,
            headers: AckHeaders {
                message_id: message_id.to_owned(),
                content_type: CONTENT_TYPE_JSON.to_owned(),
            },
            message: message.to_owned(),
            data,
        }
    }

    /// The answer to a callback: `data` `{"response": <response>}`.
    pub fn callback(message_id: &str, code: u16, message: &str, response: Value) -> Self {
        let data = serde_json::json!({ "response": response }).to_string();
        Self::new(message_id, code, message, data)
    }

    /// The ack as the text frame sent.
    pub fn to_text(&self) -> String {
        // Serializing plain strings and a number cannot fail; the fallback keeps the
        // signature total anyway.
        serde_json::to_string(self).unwrap_or_else(|_| String::from("{}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Recorded frames (`tests/fixtures/frame_*.json`) read and write back unchanged, and
    /// the acks written for them are the recorded ones (`tests/fixtures/ack_*.json`).
    #[test]
    fn recorded_frames_and_acks_round_trip() {
        use im_bridge_channel::fixture;
        use im_bridge_channel::fixtures::round_trip;
        let message: Frame = round_trip(fixture!("frame_bot_message.json"));
        assert_eq!(message.kind, TYPE_CALLBACK);
        assert_eq!(
            message.topic().as_deref(),
            Some("/v1.0/im/bot/messages/get")
        );
        let ack = Ack::callback(
            &message.message_id().unwrap(),
            code::OK,
            "OK",
            Value::from("OK"),
        );
        assert_eq!(ack, round_trip::<Ack>(fixture!("ack_bot_message.json")));
        let ping: Frame = round_trip(fixture!("frame_system_ping.json"));
        assert_eq!(ping.topic().as_deref(), Some(TOPIC_PING));
        let echo = Ack::new(
            &ping.message_id().unwrap(),
            code::OK,
            "OK",
            ping.data.unwrap(),
        );
        assert_eq!(echo, round_trip::<Ack>(fixture!("ack_ping.json")));
        let disconnect: Frame = round_trip(fixture!("frame_system_disconnect.json"));
        assert_eq!(disconnect.topic().as_deref(), Some(TOPIC_DISCONNECT));
    }

    #[test]
    fn a_callback_frame_reads_with_its_headers_and_string_data() {
        let text = json!({
            "specVersion": "1.0", "type": "CALLBACK",
            "headers": {"appId": "a", "connectionId": "c", "contentType": "application/json",
                        "messageId": "m-1", "time": 1_700_000_000_000_i64,
                        "topic": "/v1.0/im/bot/messages/get"},
            "data": json!({"msgId": "x"}).to_string(),
        })
        .to_string();
        let frame = Frame::parse(&text).unwrap();
        assert_eq!(frame.kind, TYPE_CALLBACK);
        assert_eq!(frame.message_id().as_deref(), Some("m-1"));
        assert_eq!(frame.topic().as_deref(), Some("/v1.0/im/bot/messages/get"));
        assert_eq!(frame.header("time").as_deref(), Some("1700000000000"));
        assert_eq!(frame.data.as_deref(), Some(r#"{"msgId":"x"}"#));
    }

    #[test]
    fn an_unreadable_frame_keeps_only_its_message_id() {
        let bad = json!({"headers": {"messageId": "m-2"}, "data": "secret text"}).to_string();
        let error = Frame::parse(&bad).unwrap_err();
        assert_eq!(error.message_id.as_deref(), Some("m-2"));
        assert!(!error.detail.contains("secret"), "{error:?}");
        assert_eq!(Frame::parse("not json").unwrap_err().message_id, None);
        assert_eq!(
            Frame::parse(r#"{"type": 7, "headers": {"messageId": ""}}"#)
                .unwrap_err()
                .message_id,
            None
        );
    }

    #[test]
    fn acks_serialize_as_the_sdks_write_them() {
        let ack = Ack::new("m-3", code::OK, "OK", r#"{"opaque":"x"}"#.into());
        assert_eq!(
            serde_json::from_str::<Value>(&ack.to_text()).unwrap(),
            json!({"code": 200, "headers": {"messageId": "m-3", "contentType": "application/json"},
                   "message": "OK", "data": "{\"opaque\":\"x\"}"})
        );
        let callback = Ack::callback("m-4", code::SYSTEM_EXCEPTION, "retry", Value::Null);
        assert_eq!(callback.data, r#"{"response":null}"#);
    }
}
