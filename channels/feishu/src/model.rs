//! The JSON Feishu sends and answers that this adapter reads, and nothing more: events
//! (`im.message.receive_v1`), the open API's `{code, msg, data}` answers, the token
//! answer, and the long connection's endpoint discovery and timers. The long connection's
//! binary frame is `transport::ws::frame` (protobuf), the cards the adapter writes are
//! `api::card`.
//!
//! Only fields the adapter uses are modelled (plus the few that identify a payload when
//! reading a log of traffic); unknown fields are ignored on input, so a newer Feishu never
//! breaks parsing. Optional fields are skipped when absent, so every type writes back the
//! JSON it was read from: each one round-trips against a recorded payload in
//! `tests/fixtures/` (`im_bridge_channel::fixtures::round_trip`).
//!
//! `msg` fields are read, never trusted: no error or log line carries one (it can quote
//! what was sent).

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A schema-2.0 event: `{schema, header, event}`, the `event` read according to
/// `header.event_type`.
#[derive(Debug, Serialize, Deserialize)]
pub struct Envelope {
    /// `2.0`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schema: Option<String>,
    /// `header.event_type` and friends.
    pub header: Header,
    /// The event itself; a message event is a [`MessageEvent`].
    #[serde(default)]
    pub event: Value,
}

/// `header` of a schema-2.0 event.
#[derive(Debug, Serialize, Deserialize)]
pub struct Header {
    /// The event's id (unique per app).
    #[serde(default)]
    pub event_id: String,
    /// E.g. `im.message.receive_v1`.
    #[serde(default)]
    pub event_type: String,
    /// When the event was made, milliseconds since the epoch, as a string.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub create_time: Option<String>,
    /// The verification token of webhook deliveries.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
    /// The app the event is for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub app_id: Option<String>,
    /// The tenant it happened in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant_key: Option<String>,
}

/// The `event` of an `im.message.receive_v1`.
#[derive(Debug, Serialize, Deserialize)]
pub struct MessageEvent {
    /// Who sent it.
    pub sender: Sender,
    /// What was sent.
    pub message: Message,
}

/// `event.sender`.
#[derive(Debug, Serialize, Deserialize)]
pub struct Sender {
    /// The sender's ids.
    #[serde(default)]
    pub sender_id: UserIds,
    /// `user` for a person, `app` for a bot.
    #[serde(default)]
    pub sender_type: String,
    /// The sender's tenant.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant_key: Option<String>,
}

/// A user's ids: the adapter reads the `open_id` (unique per app).
#[derive(Debug, Default, Serialize, Deserialize)]
pub struct UserIds {
    /// The id within this app (`ou_…`).
    #[serde(default)]
    pub open_id: String,
    /// The id across the developer's apps (`on_…`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub union_id: Option<String>,
    /// The tenant's own user id, when the app may read it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_id: Option<String>,
}

/// `event.message`.
#[derive(Debug, Serialize, Deserialize)]
pub struct Message {
    /// The message's id (`om_…`).
    pub message_id: String,
    /// The first message of the thread it belongs to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub root_id: Option<String>,
    /// The message it replies to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_id: Option<String>,
    /// Feishu's own topic thread of the message (not a DeerFlow thread).
    #[serde(default, rename = "thread_id", skip_serializing_if = "Option::is_none")]
    pub topic_thread: Option<String>,
    /// When it was sent, milliseconds since the epoch, as a string.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub create_time: Option<String>,
    /// The chat (`oc_…`).
    pub chat_id: String,
    /// `p2p` or `group`.
    #[serde(default)]
    pub chat_type: String,
    /// `text`, `post`, `image`, `file`, `audio`, `media`, …
    #[serde(default)]
    pub message_type: String,
    /// The content, a JSON document in a string, read according to `message_type`.
    #[serde(default)]
    pub content: String,
    /// Who the placeholders in `content` stand for.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mentions: Vec<Mention>,
}

/// One of `message.mentions`.
#[derive(Debug, Serialize, Deserialize)]
pub struct Mention {
    /// The placeholder, `@_user_1`.
    #[serde(default)]
    pub key: String,
    /// The mentioned user's (or bot's) ids.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<UserIds>,
    /// The mentioned user's (or bot's) name.
    #[serde(default)]
    pub name: String,
    /// The mentioned user's tenant.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant_key: Option<String>,
}

/// The open API's answer to every call: `{code, msg, data}`, `code` 0 on success.
#[derive(Debug, Serialize, Deserialize)]
pub struct Answer<T> {
    /// 0, or why the call was refused.
    pub code: i64,
    /// Feishu's words about the code (never kept in an error).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub msg: Option<String>,
    /// The result (a missing `Option` reads as `None` without `default`, which would
    /// demand `T: Default`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub data: Option<T>,
}

/// The bot info answer (`GET /open-apis/bot/v3/info`): Feishu writes `bot` beside `code`
/// rather than under `data`.
#[derive(Debug, Serialize, Deserialize)]
pub struct BotAnswer {
    /// 0, or why the call was refused.
    pub code: i64,
    /// Feishu's words about the code (never kept in an error).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub msg: Option<String>,
    /// The bot.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bot: Option<BotInfo>,
}

/// The bot, as the bot info answer describes it.
#[derive(Debug, Serialize, Deserialize)]
pub struct BotInfo {
    /// The bot's `open_id` in this app: what a mention of the bot carries.
    #[serde(default)]
    pub open_id: String,
    /// The app's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub app_name: Option<String>,
    /// 0 not installed yet, 1 stopped, 2 active, 3 installed but not activated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub activate_status: Option<i64>,
    /// Fields the adapter does not read (`avatar_url`, `ip_white_list`).
    #[serde(flatten)]
    pub extra: serde_json::Map<String, Value>,
}

/// `data` of a sent or replied message.
#[derive(Debug, Serialize, Deserialize)]
pub struct Sent {
    /// The new message's id.
    pub message_id: String,
    /// The thread it went into, for a reply.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub root_id: Option<String>,
    /// The message it replied to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_id: Option<String>,
    /// `interactive`, `image`, `file`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub msg_type: Option<String>,
    /// Its chat.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chat_id: Option<String>,
}

/// `data` of an image upload.
#[derive(Debug, Serialize, Deserialize)]
pub struct ImageKey {
    /// What an image message sends.
    pub image_key: String,
}

/// `data` of a file upload.
#[derive(Debug, Serialize, Deserialize)]
pub struct FileKey {
    /// What a file message sends.
    pub file_key: String,
}

/// The `tenant_access_token` answer (not the usual `data` envelope).
#[derive(Debug, Serialize, Deserialize)]
pub struct TokenAnswer {
    /// 0, or why the app was refused.
    pub code: i64,
    /// Feishu's words about the code (never kept in an error).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub msg: Option<String>,
    /// The token.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant_access_token: Option<String>,
    /// Its life in seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expire: Option<u64>,
}

/// The answer of the long connection's endpoint discovery.
#[derive(Debug, Serialize, Deserialize)]
pub struct EndpointAnswer {
    /// 0, 1 (busy), 1000040343 (internal error), or a refusal.
    pub code: i64,
    /// Feishu's words about the code (clipped into a refusal; never logged whole).
    #[serde(default)]
    pub msg: String,
    /// The endpoint, on success.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<Endpoint>,
}

/// `data` of the endpoint discovery.
#[derive(Debug, Serialize, Deserialize)]
pub struct Endpoint {
    /// The one-time WebSocket URL (its query carries `device_id`, `service_id` and a
    /// ticket: never logged).
    #[serde(rename = "URL", default)]
    pub url: String,
    /// The server's timers.
    #[serde(
        rename = "ClientConfig",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub client_config: Option<ClientConfig>,
}

/// The long connection's timers as the server writes them (at discovery and in pongs):
/// seconds, each field optional.
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct ClientConfig {
    /// Reconnect attempts in a row before giving up; -1 forever.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reconnect_count: Option<i64>,
    /// The least wait between two failed reconnect attempts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reconnect_interval: Option<i64>,
    /// The largest random extra wait before a reconnect attempt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reconnect_nonce: Option<i64>,
    /// How often the client pings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ping_interval: Option<i64>,
}

#[cfg(test)]
mod tests {
    use im_bridge_channel::fixture;
    use im_bridge_channel::fixtures::round_trip;

    use super::*;

    #[test]
    fn message_events_round_trip() {
        for (text, kind) in [
            (fixture!("event_text_p2p.json"), "text"),
            (fixture!("event_text_group_mention.json"), "text"),
            (fixture!("event_post_thread_reply.json"), "post"),
            (fixture!("event_image.json"), "image"),
            (fixture!("event_file.json"), "file"),
        ] {
            let envelope: Envelope = round_trip(text);
            assert_eq!(envelope.header.event_type, "im.message.receive_v1");
            let event: MessageEvent = round_trip(&envelope.event.to_string());
            assert_eq!(event.message.message_type, kind);
            assert!(event.sender.sender_id.open_id.starts_with("ou_"));
        }
        let group: Envelope = round_trip(fixture!("event_text_group_mention.json"));
        let event: MessageEvent = round_trip(&group.event.to_string());
        assert_eq!(event.message.mentions[0].key, "@_user_1");
        let other: Envelope = round_trip(fixture!("event_reaction_created.json"));
        assert_eq!(other.header.event_type, "im.message.reaction.created_v1");
    }

    #[test]
    fn api_answers_round_trip() {
        let info: BotAnswer = round_trip(fixture!("answer_bot_info.json"));
        let bot = info.bot.unwrap();
        assert_eq!(bot.open_id, "ou_e6e14f667cfe239d7b129b521dce0569");
        assert_eq!(bot.activate_status, Some(2));
        let sent: Answer<Sent> = round_trip(fixture!("answer_reply.json"));
        assert!(sent.data.unwrap().message_id.starts_with("om_"));
        let image: Answer<ImageKey> = round_trip(fixture!("answer_image_upload.json"));
        assert!(image.data.unwrap().image_key.starts_with("img_"));
        let file: Answer<FileKey> = round_trip(fixture!("answer_file_upload.json"));
        assert!(file.data.unwrap().file_key.starts_with("file_"));
        let reaction: Answer<Value> = round_trip(fixture!("answer_reaction.json"));
        assert_eq!(reaction.code, 0);
        let limited: Answer<Value> = round_trip(fixture!("answer_rate_limited.json"));
        assert_eq!(limited.code, 99991400);
        assert!(limited.data.is_none());
        let recalled: Answer<Value> = round_trip(fixture!("answer_recalled.json"));
        assert_eq!(recalled.code, 230011);
    }

    #[test]
    fn token_and_endpoint_answers_round_trip() {
        let token: TokenAnswer = round_trip(fixture!("tenant_access_token.json"));
        assert_eq!(token.expire, Some(7200));
        let refused: TokenAnswer = round_trip(fixture!("tenant_access_token_refused.json"));
        assert_eq!((refused.code, refused.tenant_access_token), (10014, None));
        let endpoint: EndpointAnswer = round_trip(fixture!("ws_endpoint.json"));
        let data = endpoint.data.unwrap();
        assert!(data.url.starts_with("wss://"));
        assert_eq!(data.client_config.unwrap().ping_interval, Some(120));
        let pong: ClientConfig = round_trip(fixture!("ws_pong_client_config.json"));
        assert_eq!(pong.reconnect_count, Some(-1));
    }
}
