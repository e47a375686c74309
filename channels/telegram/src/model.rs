//! The Bot API payload types this adapter reads and writes, and nothing more.
//!
//! Shapes follow <https://core.telegram.org/bots/api>. Only fields the adapter uses are
//! modelled; unknown fields are ignored on input, so a newer Bot API never breaks parsing.
//! Optional fields are skipped when absent so every type serializes back to the JSON it
//! was read from; each one round-trips against a fixture in `tests/fixtures/`.

use serde::{Deserialize, Serialize};

/// The MIME type of bytes of no known type (a file part's, a document's default).
pub const OCTET_STREAM: &str = "application/octet-stream";

/// The envelope of every Bot API answer: `{"ok": true, "result": …}` or
/// `{"ok": false, "error_code": …, "description": …, "parameters": …}`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ApiResponse<T> {
    /// Whether the call succeeded.
    pub ok: bool,
    /// The result, when `ok` (a missing `Option` reads as `None` without `default`,
    /// which would otherwise demand `T: Default`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub result: Option<T>,
    /// HTTP-like error code, when not `ok`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_code: Option<i64>,
    /// Human-readable error, when not `ok` (Telegram's wording, never user text).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Machine-readable hints (`retry_after`, `migrate_to_chat_id`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parameters: Option<ResponseParameters>,
}

/// `ResponseParameters`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResponseParameters {
    /// Seconds to wait before repeating a throttled request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_after: Option<u64>,
    /// The supergroup a group was migrated to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub migrate_to_chat_id: Option<i64>,
}

/// `User` (the sender, or the bot itself from `getMe`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct User {
    /// Unique id.
    pub id: i64,
    /// Whether this user is a bot.
    pub is_bot: bool,
    /// First name.
    pub first_name: String,
    /// Last name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_name: Option<String>,
    /// Username without `@`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub username: Option<String>,
    /// IETF language tag of the user's client.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub language_code: Option<String>,
}

/// `Chat.type`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ChatType {
    /// A one-to-one chat with a user.
    Private,
    /// A basic group.
    Group,
    /// A supergroup.
    Supergroup,
    /// A broadcast channel.
    Channel,
    /// A type this adapter does not know (read only; written back as `unknown`).
    #[serde(other)]
    Unknown,
}

/// `Chat`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Chat {
    /// Unique id (negative for groups).
    pub id: i64,
    /// The kind of chat.
    #[serde(rename = "type")]
    pub kind: ChatType,
    /// Group title.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// Username of a private chat or public group.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub username: Option<String>,
    /// First name of the other party of a private chat.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_name: Option<String>,
}

/// `MessageEntity`: its position and kind, and a `text_link`'s URL.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MessageEntity {
    /// `bot_command`, `mention`, `url`, ….
    #[serde(rename = "type")]
    pub kind: String,
    /// Offset in UTF-16 code units.
    pub offset: u32,
    /// Length in UTF-16 code units.
    pub length: u32,
    /// Where a `text_link` points.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
}

/// What every Bot API file carries: the handles and, when known, the size.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileRef {
    /// Handle for `getFile`.
    pub file_id: String,
    /// Stable id across bots.
    pub file_unique_id: String,
    /// Size in bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file_size: Option<u64>,
}

/// `PhotoSize`: one resolution of a photo.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PhotoSize {
    /// The file's handles and size.
    #[serde(flatten)]
    pub file: FileRef,
    /// Width in pixels.
    pub width: u32,
    /// Height in pixels.
    pub height: u32,
}

/// `Document`: a general file.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Document {
    /// The file's handles and size.
    #[serde(flatten)]
    pub file: FileRef,
    /// Original file name, as the sender gave it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file_name: Option<String>,
    /// MIME type, as the sender declared it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mime_type: Option<String>,
}

/// `Voice`: a voice note.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Voice {
    /// The file's handles and size.
    #[serde(flatten)]
    pub file: FileRef,
    /// Length in seconds.
    pub duration: u32,
    /// MIME type, as the sender declared it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mime_type: Option<String>,
}

/// `Audio`: a music or audio file.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Audio {
    /// The file's handles and size.
    #[serde(flatten)]
    pub file: FileRef,
    /// Length in seconds.
    pub duration: u32,
    /// Performer, as the sender's tags say.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub performer: Option<String>,
    /// Title, as the sender's tags say.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// Original file name, as the sender gave it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file_name: Option<String>,
    /// MIME type, as the sender declared it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mime_type: Option<String>,
}

/// `Video`: a video file.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Video {
    /// The file's handles and size.
    #[serde(flatten)]
    pub file: FileRef,
    /// Width in pixels.
    pub width: u32,
    /// Height in pixels.
    pub height: u32,
    /// Length in seconds.
    pub duration: u32,
    /// Original file name, as the sender gave it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file_name: Option<String>,
    /// MIME type, as the sender declared it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mime_type: Option<String>,
}

/// `VideoNote`: a round video message.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct VideoNote {
    /// The file's handles and size.
    #[serde(flatten)]
    pub file: FileRef,
    /// Diameter in pixels.
    pub length: u32,
    /// Length in seconds.
    pub duration: u32,
}

/// `Message`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Message {
    /// Unique inside the chat.
    pub message_id: i64,
    /// Unix time it was sent.
    pub date: i64,
    /// The conversation.
    pub chat: Chat,
    /// The sender; absent for channel posts. A placeholder user for a message sent on
    /// behalf of a chat (see `sender_chat`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<User>,
    /// The chat a message was sent on behalf of: an anonymous group admin's (the group
    /// itself), a channel posting in its discussion group.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sender_chat: Option<Chat>,
    /// A channel post the linked discussion group received automatically.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub is_automatic_forward: Option<bool>,
    /// The forum topic the message belongs to (supergroups with topics), or the thread of
    /// a reply.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message_thread_id: Option<i64>,
    /// Whether the message was sent in a forum topic.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub is_topic_message: Option<bool>,
    /// The message this one replies to (itself without a nested reply).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reply_to_message: Option<Box<Message>>,
    /// Unix time of the last edit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub edit_date: Option<i64>,
    /// Text of a text message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// Entities of `text` (a `bot_command` at offset 0 marks a command).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub entities: Vec<MessageEntity>,
    /// Every resolution of a photo.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub photo: Vec<PhotoSize>,
    /// A general file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub document: Option<Document>,
    /// A voice note.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub voice: Option<Voice>,
    /// A music or audio file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub audio: Option<Audio>,
    /// A video.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub video: Option<Video>,
    /// A round video message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub video_note: Option<VideoNote>,
    /// The album (media group) the message is a part of: Telegram delivers each photo,
    /// video or document of an album as a message of its own, all with this id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub media_group_id: Option<String>,
    /// Caption of a photo, document, audio or video.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub caption: Option<String>,
    /// Entities of `caption`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub caption_entities: Vec<MessageEntity>,
}

/// `Update`: one event. Only `message` is acted upon; the other kinds are acknowledged
/// and skipped.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Update {
    /// Increasing id; acknowledging it means polling with a higher `offset`.
    pub update_id: i64,
    /// A new incoming message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<Message>,
    /// A new version of an earlier message (not acted upon).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub edited_message: Option<Message>,
    /// A channel post (not acted upon).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub channel_post: Option<Message>,
}

/// `getFile` parameters.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct GetFile {
    /// The handle from a `PhotoSize` or `Document`.
    pub file_id: String,
}

/// `File`: the answer to `getFile`, a file ready to download from
/// `{api_url}/file/bot<token>/<file_path>` (for at least an hour).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct File {
    /// The file's handles and size.
    #[serde(flatten)]
    pub file: FileRef,
    /// Where to download it; absent when Telegram will not serve the file (too large).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file_path: Option<String>,
}

/// `getUpdates` parameters.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct GetUpdates {
    /// First update to return; confirms every lower one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offset: Option<i64>,
    /// 1 to 100.
    pub limit: u32,
    /// Long-poll timeout in seconds.
    pub timeout: u64,
    /// Update kinds to receive.
    pub allowed_updates: Vec<String>,
}

/// `ReplyParameters`: which message a new one answers.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReplyParameters {
    /// The message to reply to.
    pub message_id: i64,
    /// Send anyway when that message is gone.
    pub allow_sending_without_reply: bool,
}

/// `sendMessage` parameters.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SendMessage {
    /// The conversation.
    pub chat_id: i64,
    /// 1 to 4096 UTF-16 code units after entity parsing.
    pub text: String,
    /// `HTML`: the text is in Telegram's HTML subset (what the delivery engine renders).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parse_mode: Option<String>,
    /// The message this one answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reply_parameters: Option<ReplyParameters>,
    /// The forum topic to post in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message_thread_id: Option<i64>,
}

/// `sendChatAction` parameters.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SendChatAction {
    /// The conversation.
    pub chat_id: i64,
    /// What the bot is doing: `typing`.
    pub action: String,
    /// The forum topic, if the chat has topics.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message_thread_id: Option<i64>,
}

/// `setMessageReaction` parameters: the bot's reaction on a message, replacing any it set
/// before (a bot sets at most one).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SetMessageReaction {
    /// The conversation.
    pub chat_id: i64,
    /// The user's message to react to.
    pub message_id: i64,
    /// The reaction; only emoji from Telegram's fixed list are accepted.
    pub reaction: Vec<ReactionType>,
}

/// `ReactionType`: the adapter only sets emoji (`{"type": "emoji", "emoji": "👀"}`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReactionType {
    /// `emoji`.
    #[serde(rename = "type")]
    pub kind: String,
    /// One of the emoji Telegram allows as a reaction.
    pub emoji: String,
}

/// `editMessageText` parameters.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct EditMessageText {
    /// The conversation.
    pub chat_id: i64,
    /// The bot's message to replace.
    pub message_id: i64,
    /// The new text.
    pub text: String,
    /// `HTML`, as for [`SendMessage::parse_mode`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parse_mode: Option<String>,
}

/// `deleteWebhook` parameters.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeleteWebhook {
    /// Drop updates queued while nobody polled (we keep them).
    pub drop_pending_updates: bool,
}

/// `getWebhookInfo`'s result: where Telegram delivers updates, if anywhere.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WebhookInfo {
    /// The webhook URL; empty when none is set (updates wait for `getUpdates`).
    pub url: String,
    /// Whether a self-signed certificate was uploaded for it.
    pub has_custom_certificate: bool,
    /// Updates waiting to be delivered.
    pub pending_update_count: i64,
    /// When the last delivery to the webhook failed (unix seconds).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error_date: Option<i64>,
    /// Telegram's words on that failure (`Connection refused`, a status line).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error_message: Option<String>,
}

/// `setWebhook` parameters.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SetWebhook {
    /// The public URL Telegram posts to.
    pub url: String,
    /// Echoed in `X-Telegram-Bot-Api-Secret-Token` on every delivery.
    pub secret_token: String,
    /// Update kinds to receive.
    pub allowed_updates: Vec<String>,
}

/// `BotCommand`: one entry of the command picker.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BotCommand {
    /// 1 to 32 characters of `a-z 0-9 _`, without the slash.
    pub command: String,
    /// 1 to 256 characters.
    pub description: String,
}

/// `setMyCommands` parameters.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SetMyCommands {
    /// The menu.
    pub commands: Vec<BotCommand>,
    /// Two-letter language the menu is for; absent = everyone without a menu of their own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub language_code: Option<String>,
}

#[cfg(test)]
mod tests {
    use im_bridge_channel::fixtures::round_trip;
    use serde_json::Value;

    use super::*;

    macro_rules! fixture {
        ($name:literal) => {
            include_str!(concat!("../tests/fixtures/", $name))
        };
    }

    #[test]
    fn updates_round_trip() {
        let private: Update = round_trip(fixture!("update_private_text.json"));
        assert_eq!(private.message.unwrap().chat.kind, ChatType::Private);
        let group: Update = round_trip(fixture!("update_group_reply_command.json"));
        let msg = group.message.unwrap();
        assert_eq!(msg.chat.kind, ChatType::Supergroup);
        assert_eq!(msg.entities[0].kind, "bot_command");
        assert!(msg.reply_to_message.is_some());
        let photo: Update = round_trip(fixture!("update_photo_caption.json"));
        assert_eq!(photo.message.unwrap().photo.len(), 3);
        let linked: Update = round_trip(fixture!("update_text_link.json"));
        let entities = linked.message.unwrap().entities;
        assert_eq!(
            entities[0].url.as_deref(),
            Some("https://example.com/releases/v2")
        );
        assert_eq!(entities[1].url, None);
        let doc: Update = round_trip(fixture!("update_document.json"));
        assert!(doc.message.unwrap().document.is_some());
        let media: Vec<Update> = round_trip(fixture!("updates_voice_audio_video.json"));
        let media: Vec<Message> = media.into_iter().filter_map(|u| u.message).collect();
        assert!(media[0].voice.is_some() && media[1].audio.is_some());
        assert!(media[2].video.is_some() && media[3].video_note.is_some());
        let edited: Update = round_trip(fixture!("update_edited_message.json"));
        assert!(edited.message.is_none() && edited.edited_message.is_some());
        let album: Vec<Update> = round_trip(fixture!("updates_album.json"));
        let groups: Vec<Option<String>> = album
            .into_iter()
            .map(|u| u.message.and_then(|m| m.media_group_id))
            .collect();
        let id = Some("13862045827411925".to_owned());
        assert_eq!(groups, [id.clone(), id]);
    }

    #[test]
    fn responses_round_trip() {
        let me: ApiResponse<User> = round_trip(fixture!("response_get_me.json"));
        assert_eq!(
            me.result.unwrap().username.as_deref(),
            Some("DeerBridgeBot")
        );
        let sent: ApiResponse<Message> = round_trip(fixture!("response_send_message.json"));
        assert!(sent.ok);
        let updates: ApiResponse<Vec<Update>> = round_trip(fixture!("response_get_updates.json"));
        assert_eq!(updates.result.unwrap().len(), 2);
        let yes: ApiResponse<bool> = round_trip(fixture!("response_true.json"));
        assert_eq!(yes.result, Some(true));
        let throttled: ApiResponse<Value> = round_trip(fixture!("error_retry_after.json"));
        assert_eq!(throttled.parameters.unwrap().retry_after, Some(7));
        let unchanged: ApiResponse<Value> = round_trip(fixture!("error_not_modified.json"));
        assert_eq!(unchanged.error_code, Some(400));
        let hook: ApiResponse<WebhookInfo> = round_trip(fixture!("response_get_webhook_info.json"));
        let hook = hook.result.unwrap();
        assert_eq!(hook.url, "https://bot.example.com/telegram/hook");
        assert_eq!(
            hook.last_error_message.as_deref(),
            Some("Connection refused")
        );
        let file: ApiResponse<File> = round_trip(fixture!("response_get_file.json"));
        let file = file.result.unwrap();
        assert_eq!(file.file.file_size, Some(482_113));
        assert_eq!(file.file_path.as_deref(), Some("documents/file_37.pdf"));
    }

    #[test]
    fn requests_round_trip() {
        let send: SendMessage = round_trip(fixture!("request_send_message.json"));
        assert!(send.reply_parameters.unwrap().allow_sending_without_reply);
        let _: EditMessageText = round_trip(fixture!("request_edit_message_text.json"));
        let react: SetMessageReaction = round_trip(fixture!("request_set_message_reaction.json"));
        assert_eq!(react.reaction[0].emoji, "👀");
        let typing: SendChatAction = round_trip(fixture!("request_send_chat_action.json"));
        assert_eq!(typing.message_thread_id, Some(1187));
        let poll: GetUpdates = round_trip(fixture!("request_get_updates.json"));
        assert_eq!(poll.allowed_updates, ["message"]);
        let menu: SetMyCommands = round_trip(fixture!("request_set_my_commands.json"));
        assert_eq!(menu.language_code.as_deref(), Some("zh"));
        let _: SetWebhook = round_trip(fixture!("request_set_webhook.json"));
        let _: DeleteWebhook = round_trip(fixture!("request_delete_webhook.json"));
        let get_file: GetFile = round_trip(fixture!("request_get_file.json"));
        assert_eq!(get_file.file_id, "BQACAgIAAxkBAAIBs2Z_doc");
    }

    #[test]
    fn unknown_fields_and_chat_types_do_not_break_parsing() {
        let update: Update = serde_json::from_str(
            r#"{"update_id": 9, "message": {"message_id": 1, "date": 0, "chat": {"id": 5, "type": "business"},
                "text": "hi", "some_future_field": {"x": 1}}, "business_message": {}}"#,
        )
        .unwrap();
        assert_eq!(update.message.unwrap().chat.kind, ChatType::Unknown);
    }
}
