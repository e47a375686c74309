//! From a Telegram `Update` to an [`InboundMessage`] (spec platforms §3.2): pure
//! normalization, no I/O.
//!
//! [`normalize`] decides everything about one update (who, where, which topic, which
//! text, command or chat, attachments), so every rule is unit tested below and fuzzed
//! (`fuzz/fuzz_targets/telegram_update.rs`). How updates arrive (polling, the webhook) is
//! `transport`; the bytes of an attachment are fetched on demand by `api`.
//!
//! Children: `media` — a message's attachments as `file_id` handles (pure); `album` —
//! which album (media group) a message is a part of, and how a part joins the album's
//! message (pure; the transports gather the parts); `links` — a named link
//! (`text_link`) written `[text](url)` for the agent (pure).

mod album;
mod links;
mod media;

use im_bridge_channel::{
    AllowedUsers, ChatKind, CommandVocabulary, InboundMessage, MessageId, RedeliveryKey, Skip,
};
use serde_json::Value;

pub(crate) use self::album::{AlbumKey, MAX_ALBUM_PARTS, album_key, join};
use self::links::with_links;
use self::media::attachments;
use crate::NAME;
use crate::model::{ChatType, Update};

/// A chat kind the adapter does not serve (channels).
pub const UNSUPPORTED_CHAT: Skip = Skip::Other("unsupported_chat");

/// The metadata key holding a forum-topic message's `message_thread_id`, so replies are
/// posted in the same topic.
pub(crate) const FORUM_TOPIC_KEY: &str = "message_thread_id";

/// Longest file name kept from a sender, in bytes.
const MAX_FILENAME_BYTES: usize = 128;

/// What [`normalize`] needs to know besides the update.
#[derive(Clone, Copy, Debug)]
pub struct InboundContext<'a> {
    /// This bot's username (from `getMe`), to recognise `/cmd@ThisBot`.
    pub bot_username: Option<&'a str>,
    /// Who may talk to the bot.
    pub allowed_users: &'a AllowedUsers,
    /// The daemon's commands.
    pub commands: &'a CommandVocabulary,
}

/// The outcome of normalizing one update.
#[derive(Clone, Debug, PartialEq)]
pub enum Normalized {
    /// A message for the daemon.
    Message(Box<InboundMessage>),
    /// Nothing to do; the update is acknowledged anyway.
    Skipped(Skip),
}

/// Normalizes one update.
///
/// - `chat_id` = chat id, `user_id` = sender id, `thread_ts` and `metadata.message_id` =
///   the message id; the redelivery key is (chat id, message id);
/// - a private chat has no topic unless it has topics (Bot API 9.3); in a topic (a forum's,
///   or a private chat's) the topic is `forum:<message_thread_id>`
///   (kept in the metadata so replies are posted there); in other groups it is the
///   replied-to message id, else the message's own id; `reply_to` is the replied-to message
///   (the daemon follows reply chains through it);
/// - the text is the text or else the caption, a named link in it (`text_link`) written
///   `[text](url)`; `/cmd@ThisBot` becomes `/cmd`;
///   `/cmd@OtherBot` is skipped (another bot's command in a shared group); `/start` with or
///   without arguments becomes `/help`;
/// - the sender's `language_code` is the locale hint; the message's `date` dates it;
/// - photos (largest size) and documents are attached as `file_id` handles, never URLs.
pub fn normalize(update: &Update, ctx: &InboundContext<'_>) -> Normalized {
    let Some(message) = &update.message else {
        return Normalized::Skipped(Skip::NotAMessage);
    };
    let chat_kind = match message.chat.kind {
        ChatType::Private => ChatKind::Private,
        ChatType::Group | ChatType::Supergroup => ChatKind::Group,
        ChatType::Channel | ChatType::Unknown => {
            return Normalized::Skipped(UNSUPPORTED_CHAT);
        }
    };
    let Some(from) = &message.from else {
        return Normalized::Skipped(Skip::NotAUser);
    };
    if message.is_automatic_forward == Some(true) {
        // A channel's post copied into its discussion group: nobody asked anything.
        return Normalized::Skipped(Skip::NotAUser);
    }
    // On behalf of a chat (an anonymous admin, a channel), `from` is a placeholder every
    // such sender shares: the chat is who speaks.
    let user_id = match &message.sender_chat {
        Some(chat) => chat.id.to_string(),
        None => from.id.to_string(),
    };
    if !ctx.allowed_users.allows(&user_id) {
        return Normalized::Skipped(Skip::NotAllowed);
    }
    let (raw_text, entities) = match (&message.text, &message.caption) {
        (Some(text), _) => (text.as_str(), message.entities.as_slice()),
        (None, Some(caption)) => (caption.as_str(), message.caption_entities.as_slice()),
        (None, None) => ("", &[][..]),
    };
    let files = attachments(message);
    if raw_text.trim().is_empty() && files.is_empty() {
        return Normalized::Skipped(Skip::Empty);
    }
    if addressed_elsewhere(raw_text, ctx.bot_username) {
        return Normalized::Skipped(Skip::NotAddressed);
    }
    let text = start_as_help(rewrite_command(
        &with_links(raw_text, entities),
        ctx.bot_username,
    ));

    let message_id = message.message_id.to_string();
    let mut msg = InboundMessage::new(NAME, message.chat.id.to_string(), user_id, text);
    msg.sent_at(message.date as f64);
    msg.msg_type = ctx.commands.classify(&msg.text);
    msg.chat_kind = chat_kind;
    msg.thread_ts = Some(MessageId::new(message_id.clone()));
    let forum_topic = message
        .message_thread_id
        .filter(|_| message.is_topic_message == Some(true));
    msg.reply_to = message
        .reply_to_message
        .as_ref()
        .map(|r| MessageId::new(r.message_id.to_string()));
    msg.topic_id = match (chat_kind, forum_topic) {
        // A topic is one conversation, its replies posted back into it: a forum's, or (Bot
        // API 9.3) one of a private chat with topics.
        (_, Some(topic)) => {
            msg.metadata
                .insert(FORUM_TOPIC_KEY.into(), Value::from(topic));
            Some(format!("forum:{topic}"))
        }
        (ChatKind::Private, None) => None,
        (ChatKind::Group, None) => Some(
            message
                .reply_to_message
                .as_ref()
                .map_or(message.message_id, |r| r.message_id)
                .to_string(),
        ),
    };
    // Message ids are unique within a chat: a redelivered update repeats the pair.
    msg.redelivery = Some(RedeliveryKey::new(
        message.chat.id.to_string(),
        message_id.clone(),
    ));
    msg.keep_metadata([("message_id", message_id.as_str())]);
    msg.locale_hint = from.language_code.clone().filter(|l| !l.is_empty());
    msg.files = files;
    Normalized::Message(Box::new(msg))
}

/// Rewrites a leading `/cmd@ThisBot` to `/cmd` (case-insensitive username match); any
/// other text, including `/cmd@OtherBot`, is returned unchanged.
fn rewrite_command(text: &str, bot_username: Option<&str>) -> String {
    let (Some(bot), true) = (bot_username, text.starts_with('/')) else {
        return text.to_owned();
    };
    let end = text.find(char::is_whitespace).unwrap_or(text.len());
    let (token, rest) = text.split_at(end);
    match token.split_once('@') {
        Some((command, name)) if name.eq_ignore_ascii_case(bot) => format!("{command}{rest}"),
        _ => text.to_owned(),
    }
}

/// Whether `text` is a command addressed to another bot (`/cmd@OtherBot …`): left alone,
/// neither answered nor sent to the agent. Unknown until `getMe` named this bot.
fn addressed_elsewhere(text: &str, bot_username: Option<&str>) -> bool {
    let (Some(bot), Some(rest)) = (bot_username, text.strip_prefix('/')) else {
        return false;
    };
    let token = rest.split(char::is_whitespace).next().unwrap_or("");
    token
        .split_once('@')
        .is_some_and(|(_, name)| !name.is_empty() && !name.eq_ignore_ascii_case(bot))
}

/// `/start` (a user opening the bot) gets the localized help. `/start <code>` is the
/// account-binding deep link, not supported yet, so it gets the help too.
fn start_as_help(text: String) -> String {
    let first = text.split(char::is_whitespace).next().unwrap_or("");
    if first.eq_ignore_ascii_case("/start") {
        "/help".to_owned()
    } else {
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use im_bridge_channel::MsgType;
    use im_bridge_channel::{FileKind, FileSource};
    use serde_json::json;

    const BOT: &str = "DeerBridgeBot";

    /// The daemon's commands, as far as these tests need them.
    fn vocabulary() -> CommandVocabulary {
        CommandVocabulary::new(["goal", "help", "new", "status"])
    }

    fn update(message: Value) -> Update {
        serde_json::from_value(json!({"update_id": 1, "message": message})).unwrap()
    }

    fn private(text: &str) -> Value {
        json!({"message_id": 10, "date": 0, "chat": {"id": 42, "type": "private"},
               "from": {"id": 42, "is_bot": false, "first_name": "A", "language_code": "zh-hans"},
               "text": text})
    }

    fn group(text: &str, reply_to: Option<i64>) -> Value {
        let mut m = json!({"message_id": 20, "date": 0, "chat": {"id": -100, "type": "supergroup"},
               "from": {"id": 7, "is_bot": false, "first_name": "B"}, "text": text});
        if let Some(id) = reply_to {
            m["reply_to_message"] =
                json!({"message_id": id, "date": 0, "chat": {"id": -100, "type": "supergroup"}});
        }
        m
    }

    fn norm(message: Value) -> InboundMessage {
        norm_with(message, &AllowedUsers::Anyone)
    }

    /// The update carrying `message`, normalized for this bot with the test vocabulary.
    fn normalized(message: Value, allowed: &AllowedUsers) -> Normalized {
        let ctx = InboundContext {
            bot_username: Some(BOT),
            allowed_users: allowed,
            commands: &vocabulary(),
        };
        normalize(&update(message), &ctx)
    }

    fn norm_with(message: Value, allowed: &AllowedUsers) -> InboundMessage {
        match normalized(message, allowed) {
            Normalized::Message(m) => *m,
            other => panic!("{other:?}"),
        }
    }

    fn skip(message: Value, allowed: &AllowedUsers) -> Skip {
        match normalized(message, allowed) {
            Normalized::Skipped(s) => s,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn private_messages_have_one_thread_and_a_locale_hint() {
        let m = norm(private("hello"));
        assert_eq!(m.channel_name, "telegram");
        assert_eq!(m.chat_id.as_str(), "42");
        assert_eq!(m.user_id.as_str(), "42");
        assert_eq!(m.chat_kind, ChatKind::Private);
        assert_eq!(m.topic_id, None);
        assert_eq!(m.thread_ts.as_ref().unwrap().as_str(), "10");
        assert_eq!(m.metadata["message_id"], "10");
        assert_eq!(m.locale_hint.as_deref(), Some("zh-hans"));
        assert_eq!(m.msg_type, MsgType::Chat);
    }

    #[test]
    fn a_channels_automatic_forward_is_skipped_and_a_chat_speaks_as_itself() {
        let mut forward = group("a channel post", None);
        forward["from"] = json!({"id": 777_000, "is_bot": false, "first_name": "Telegram"});
        forward["sender_chat"] = json!({"id": -100_555, "type": "channel"});
        forward["is_automatic_forward"] = json!(true);
        assert_eq!(skip(forward, &AllowedUsers::Anyone), Skip::NotAUser);
        let mut anonymous = group("a question", None);
        anonymous["from"] = json!({"id": 1_087_968_824, "is_bot": true, "first_name": "Group", "username": "GroupAnonymousBot"});
        anonymous["sender_chat"] = json!({"id": -100, "type": "supergroup"});
        assert_eq!(norm(anonymous).user_id.as_str(), "-100");
    }

    #[test]
    fn a_private_chats_topics_are_conversations_of_their_own() {
        let mut topic = private("in a topic");
        topic["message_thread_id"] = json!(5);
        topic["is_topic_message"] = json!(true);
        let m = norm(topic);
        assert_eq!(m.topic_id.as_deref(), Some("forum:5"));
        assert_eq!(m.metadata[FORUM_TOPIC_KEY], 5);
        assert_eq!(norm(private("no topic")).topic_id, None);
    }

    #[test]
    fn the_messages_date_dates_it() {
        let mut sent = private("hello");
        sent["date"] = json!(1_700_000_000);
        assert_eq!(norm(sent).created_at, 1_700_000_000.0);
        // Without a date (0), the message keeps its arrival time: never taken for stale.
        let before = InboundMessage::new("t", "c", "u", "x").created_at;
        assert!(norm(private("hello")).created_at >= before);
    }

    #[test]
    fn group_topics_follow_replies() {
        let own = norm(group("hi", None));
        assert_eq!(own.chat_kind, ChatKind::Group);
        assert_eq!(own.chat_id.as_str(), "-100");
        assert_eq!(own.topic_id.as_deref(), Some("20"));
        let reply = norm(group("and then?", Some(15)));
        assert_eq!(reply.topic_id.as_deref(), Some("15"));
        assert_eq!(reply.thread_ts.as_ref().unwrap().as_str(), "20");
    }

    #[test]
    fn commands_addressed_to_this_bot_are_rewritten() {
        let m = norm(group("/goal@deerbridgebot clear", None));
        assert_eq!(m.text, "/goal clear");
        assert_eq!(m.msg_type, MsgType::Command);
        let m = norm(group("/GOAL@DeerBridgeBot", None));
        assert_eq!(m.text, "/GOAL");
        assert_eq!(m.msg_type, MsgType::Command);
        // Issue 13: another bot's command is left alone, not sent to the agent.
        let anyone = AllowedUsers::Anyone;
        assert_eq!(
            skip(group("/goal@OtherBot clear", None), &anyone),
            Skip::NotAddressed
        );
        assert_eq!(skip(private("/new@otherbot"), &anyone), Skip::NotAddressed);
        // An address only counts on a command, and an e-mail-like word is no address.
        assert_eq!(
            norm(group("mail me@OtherBot", None)).msg_type,
            MsgType::Chat
        );
        assert!(!addressed_elsewhere("/goal@OtherBot", None));
        assert!(!addressed_elsewhere("/goal@ clear", Some(BOT)));
        assert_eq!(
            rewrite_command("hi /new@DeerBridgeBot", Some(BOT)),
            "hi /new@DeerBridgeBot"
        );
        assert_eq!(
            rewrite_command("/new@DeerBridgeBot", None),
            "/new@DeerBridgeBot"
        );
        assert_eq!(
            rewrite_command("/new@DeerBridgeBot\nmore", Some(BOT)),
            "/new\nmore"
        );
    }

    #[test]
    fn start_shows_the_help() {
        for text in ["/start", "/start@DeerBridgeBot", "/start bind-code-123"] {
            let m = norm(private(text));
            assert_eq!(m.text, "/help", "{text}");
            assert_eq!(m.msg_type, MsgType::Command);
        }
        assert_eq!(
            skip(private("/start@OtherBot"), &AllowedUsers::Anyone),
            Skip::NotAddressed
        );
        assert_eq!(norm(private("/startle")).text, "/startle");
    }

    #[test]
    fn voice_audio_and_video_become_named_handles() {
        let updates: Vec<Update> = serde_json::from_str(include_str!(
            "../tests/fixtures/updates_voice_audio_video.json"
        ))
        .unwrap();
        let ctx = InboundContext {
            bot_username: Some(BOT),
            allowed_users: &AllowedUsers::Anyone,
            commands: &vocabulary(),
        };
        let files: Vec<(String, FileKind, String, Option<u64>)> = updates
            .iter()
            .map(|u| {
                let Normalized::Message(m) = normalize(u, &ctx) else {
                    panic!("{u:?} is a message")
                };
                let f = &m.files[0];
                (
                    f.filename.clone().unwrap(),
                    f.kind,
                    f.mime_type.clone().unwrap(),
                    f.size,
                )
            })
            .collect();
        assert_eq!(
            files,
            [
                (
                    "telegram-voice-5001.ogg".into(),
                    FileKind::Audio,
                    "audio/ogg".into(),
                    Some(9821)
                ),
                (
                    "standup.m4a".into(),
                    FileKind::Audio,
                    "audio/mp4".into(),
                    Some(2_980_112)
                ),
                (
                    "telegram-video-5003.mp4".into(),
                    FileKind::Video,
                    "video/mp4".into(),
                    Some(1_843_312)
                ),
                (
                    "telegram-video-note-5004.mp4".into(),
                    FileKind::Video,
                    "video/mp4".into(),
                    Some(402_211)
                ),
            ]
        );
    }

    #[test]
    fn a_named_link_reaches_the_agent_with_its_url() {
        let linked: Update =
            serde_json::from_str(include_str!("../tests/fixtures/update_text_link.json")).unwrap();
        let ctx = InboundContext {
            bot_username: Some(BOT),
            allowed_users: &AllowedUsers::Anyone,
            commands: &vocabulary(),
        };
        let Normalized::Message(m) = normalize(&linked, &ctx) else {
            panic!()
        };
        assert_eq!(
            m.text,
            "🦌 Summarize [the release notes](https://example.com/releases/v2), not the \
             [old](https://example.com/releases/v1) ones"
        );
        // A caption's links are in `caption_entities`; the text's entities do not apply.
        let mut captioned = private("");
        captioned.as_object_mut().unwrap().remove("text");
        captioned["caption"] = json!("see the plan");
        captioned["caption_entities"] =
            json!([{"type": "text_link", "offset": 4, "length": 8, "url": "https://e.x/plan"}]);
        captioned["document"] = json!({"file_id": "F", "file_unique_id": "U"});
        assert_eq!(norm(captioned).text, "see [the plan](https://e.x/plan)");
    }

    #[test]
    fn captions_and_attachments_become_text_and_handles() {
        let photo: Update =
            serde_json::from_str(include_str!("../tests/fixtures/update_photo_caption.json"))
                .unwrap();
        let ctx = InboundContext {
            bot_username: Some(BOT),
            allowed_users: &AllowedUsers::Anyone,
            commands: &vocabulary(),
        };
        let Normalized::Message(m) = normalize(&photo, &ctx) else {
            panic!()
        };
        assert_eq!(m.text, "What is on this whiteboard?");
        assert_eq!(m.files.len(), 1);
        assert_eq!(m.files[0].kind, FileKind::Image);
        assert_eq!(
            m.files[0].filename.as_deref(),
            Some("telegram-photo-4830.jpg")
        );
        assert_eq!(
            m.files[0].source,
            FileSource::Handle {
                id: "AgACAgIAAxkBAAIBsmZ_large".into()
            }
        );
        let doc: Update =
            serde_json::from_str(include_str!("../tests/fixtures/update_document.json")).unwrap();
        let Normalized::Message(m) = normalize(&doc, &ctx) else {
            panic!()
        };
        assert_eq!(m.chat_kind, ChatKind::Group);
        assert_eq!(m.files[0].filename.as_deref(), Some("q3-report.pdf"));
        assert_eq!(m.files[0].mime_type.as_deref(), Some("application/pdf"));
        let json = serde_json::to_string(&*m).unwrap();
        assert!(!json.contains("http"), "no URL may be carried: {json}");
        // A file without a caption is still a message.
        let mut bare = private("");
        bare.as_object_mut().unwrap().remove("text");
        bare["document"] =
            json!({"file_id": "F", "file_unique_id": "U", "file_name": "../../etc/\u{7}passwd"});
        let m = norm(bare);
        assert_eq!(m.text, "");
        assert_eq!(m.files[0].filename.as_deref(), Some("passwd"));
        assert_eq!(
            m.files[0].mime_type.as_deref(),
            Some("application/octet-stream")
        );
    }

    #[test]
    fn other_updates_and_senders_are_skipped() {
        let anyone = AllowedUsers::Anyone;
        let edited: Update =
            serde_json::from_str(include_str!("../tests/fixtures/update_edited_message.json"))
                .unwrap();
        let ctx = InboundContext {
            bot_username: Some(BOT),
            allowed_users: &anyone,
            commands: &vocabulary(),
        };
        assert_eq!(
            normalize(&edited, &ctx),
            Normalized::Skipped(Skip::NotAMessage)
        );
        let mut no_sender = private("x");
        no_sender.as_object_mut().unwrap().remove("from");
        assert_eq!(skip(no_sender, &anyone), Skip::NotAUser);
        let mut join = private("");
        join.as_object_mut().unwrap().remove("text");
        assert_eq!(skip(join, &anyone), Skip::Empty);
        let mut channel = private("news");
        channel["chat"]["type"] = json!("channel");
        assert_eq!(skip(channel, &anyone), UNSUPPORTED_CHAT);
    }

    #[test]
    fn allowed_users_fail_closed() {
        let only = AllowedUsers::from_entries(Some(vec![Some("42".into())]));
        assert_eq!(norm_with(private("hi"), &only).user_id.as_str(), "42");
        assert_eq!(skip(group("hi", None), &only), Skip::NotAllowed);
        let nobody = AllowedUsers::from_entries(Some(vec![None]));
        assert_eq!(skip(private("hi"), &nobody), Skip::NotAllowed);
    }
}
