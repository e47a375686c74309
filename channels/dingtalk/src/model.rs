//! The JSON DingTalk sends and answers that this adapter reads, and nothing more: the
//! robot message (`ChatbotMessage`, the `data` of a stream `CALLBACK`) and the answers of
//! the token, `connections/open`, robot send, file download and media upload calls. The
//! stream's frames and acks are `transport::ws::frame`; the bodies the adapter sends are
//! written where they are sent (`api`).
//!
//! Only fields the adapter uses are modelled (plus the few that identify a payload when
//! reading a log of traffic); unknown fields are ignored on input, so a newer DingTalk
//! never breaks parsing. Optional fields are skipped when absent, so every type writes back
//! the JSON it was read from: each one round-trips against a recorded payload in
//! `tests/fixtures/` (`im_bridge_channel::fixtures::round_trip`).
//!
//! `sessionWebhook` (a token-bearing URL) is deliberately not modelled: it is never read,
//! so it can never be copied, logged or printed.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

/// A robot message as DingTalk sends it (the fields the adapter reads).
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ChatbotMessage {
    /// The conversation (`cid…`).
    #[serde(default)]
    pub conversation_id: String,
    /// One-to-one or group; DingTalk writes `"1"`/`"2"`, sometimes as a number.
    #[serde(
        default,
        deserialize_with = "conversation_type",
        serialize_with = "write_conversation_type",
        skip_serializing_if = "Option::is_none"
    )]
    pub conversation_type: Option<ConversationType>,
    /// The group's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conversation_title: Option<String>,
    /// The message's id, unique per conversation.
    #[serde(default)]
    pub msg_id: String,
    /// When it was sent, milliseconds since the epoch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub create_at: Option<i64>,
    /// The sender's id for this robot (`$:LWCP_v1:…`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sender_id: Option<String>,
    /// The sender's staff id in the organization (empty for some external senders).
    #[serde(default)]
    pub sender_staff_id: String,
    /// The sender's display name.
    #[serde(default)]
    pub sender_nick: String,
    /// The robot's own id in the conversation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chatbot_user_id: Option<String>,
    /// Whether the robot was mentioned (groups).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub is_in_at_list: Option<bool>,
    /// `text`, `richText`, `picture`, `file`, `audio`, `video`, …
    #[serde(default)]
    pub msgtype: String,
    /// `{content}` of a `text` message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<Text>,
    /// The payload of the other types: `{downloadCode, fileName}` or `{richText: [...]}`.
    #[serde(default, skip_serializing_if = "Value::is_null")]
    pub content: Value,
    /// The robot that received it; replies and downloads name it.
    #[serde(default)]
    pub robot_code: String,
}

/// `text` of a text message.
#[derive(Debug, Default, Serialize, Deserialize)]
pub struct Text {
    /// What the user wrote (DingTalk leaves out the mention of the robot itself).
    #[serde(default)]
    pub content: String,
}

/// `conversationType`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConversationType {
    /// `"1"`: a one-to-one chat with the robot.
    Private,
    /// `"2"`: a group chat.
    Group,
}

impl ConversationType {
    /// The wire value, as kept in metadata.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Private => "1",
            Self::Group => "2",
        }
    }
}

/// `"1"`, `"2"`, `1`, `2`; anything else (or nothing) is `None`.
fn conversation_type<'de, D: Deserializer<'de>>(
    de: D,
) -> Result<Option<ConversationType>, D::Error> {
    let value = Option::<Value>::deserialize(de)?;
    let text = match &value {
        Some(Value::String(s)) => s.trim().to_owned(),
        Some(Value::Number(n)) => n.to_string(),
        _ => String::new(),
    };
    Ok(match text.as_str() {
        "1" => Some(ConversationType::Private),
        "2" => Some(ConversationType::Group),
        _ => None,
    })
}

/// Written as DingTalk usually writes it: `"1"` or `"2"`.
fn write_conversation_type<S: Serializer>(
    kind: &Option<ConversationType>,
    out: S,
) -> Result<S::Ok, S::Error> {
    match kind {
        Some(kind) => out.serialize_str(kind.as_str()),
        None => out.serialize_none(),
    }
}

/// The answer of `POST /v1.0/oauth2/accessToken`.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TokenAnswer {
    /// The token.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub access_token: Option<String>,
    /// Its life in seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expire_in: Option<u64>,
}

/// The answer of `POST /v1.0/gateway/connections/open`.
#[derive(Debug, Serialize, Deserialize)]
pub struct Opened {
    /// The WebSocket endpoint.
    #[serde(default)]
    pub endpoint: String,
    /// The one-time ticket that opens it (a credential: never logged).
    #[serde(default)]
    pub ticket: String,
}

/// The answer of a robot send (`groupMessages/send`, `oToMessages/batchSend`).
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Sent {
    /// What identifies the send.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub process_query_key: Option<String>,
    /// Recipients DingTalk does not know (one-to-one sends).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub invalid_staff_id_list: Vec<String>,
    /// Recipients DingTalk held back (one-to-one sends).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub flow_controlled_staff_id_list: Vec<String>,
}

/// The answer of `messageFiles/download`.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DownloadUrl {
    /// A short-lived, signed URL of the file (never logged).
    pub download_url: String,
}

/// The answer of the legacy media upload.
#[derive(Debug, Serialize, Deserialize)]
pub struct Uploaded {
    /// 0 on success.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub errcode: Option<i64>,
    /// DingTalk's words about the code (never kept in an error).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub errmsg: Option<String>,
    /// What a robot image or file message sends.
    pub media_id: String,
    /// `image` or `file`.
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// When it was uploaded, milliseconds since the epoch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_at: Option<i64>,
}

#[cfg(test)]
mod tests {
    use im_bridge_channel::fixture;
    use im_bridge_channel::fixtures::round_trip;

    use super::*;

    #[test]
    fn robot_messages_round_trip() {
        for (text, kind, conversation) in [
            (fixture!("chatbot_text_private.json"), "text", "1"),
            (fixture!("chatbot_text_group.json"), "text", "2"),
            (fixture!("chatbot_rich_text.json"), "richText", "2"),
            (fixture!("chatbot_picture.json"), "picture", "1"),
            (fixture!("chatbot_file.json"), "file", "1"),
            (fixture!("chatbot_audio.json"), "audio", "1"),
        ] {
            let message: ChatbotMessage = round_trip(text);
            assert_eq!(message.msgtype, kind);
            assert_eq!(
                message.conversation_type.map(|k| k.as_str()),
                Some(conversation)
            );
            assert!(!text.contains("sessionWebhook"), "never recorded");
        }
    }

    #[test]
    fn api_answers_round_trip() {
        let token: TokenAnswer = round_trip(fixture!("access_token.json"));
        assert_eq!(token.expire_in, Some(7200));
        let opened: Opened = round_trip(fixture!("connections_open.json"));
        assert!(opened.endpoint.starts_with("wss://"));
        let sent: Sent = round_trip(fixture!("group_send.json"));
        assert!(sent.process_query_key.is_some());
        let held: Sent = round_trip(fixture!("batch_send_flow_controlled.json"));
        assert_eq!(held.flow_controlled_staff_id_list.len(), 1);
        let url: DownloadUrl = round_trip(fixture!("message_file_download.json"));
        assert!(url.download_url.starts_with("https://"));
        let uploaded: Uploaded = round_trip(fixture!("media_upload.json"));
        assert_eq!(uploaded.errcode, Some(0));
    }
}
