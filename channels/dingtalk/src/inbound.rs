//! Normalization of robot messages (spec platforms.md §5.2): a `ChatbotMessage` (the
//! `data` of a stream `CALLBACK`) becomes an [`InboundMessage`], or is skipped with a
//! reason.
//!
//! - `conversationType` `"1"` (or `1`) is a one-to-one chat with the robot, `"2"` (or `2`)
//!   a group;
//! - `chat_id` is the group's `conversationId`, or in a one-to-one chat the sender's
//!   `senderStaffId` (a one-to-one message without one is dropped: nobody could be
//!   answered; in a group, a member from outside the organization has none and is told
//!   apart by `senderId`, the answer going to the group);
//!   `user_id` is `senderStaffId` (else, in a group, `senderId`); `thread_ts` is `msgId`;
//! - in a group every message starts a conversation of its own (`topic_id` = `msgId`),
//!   as DeerFlow does; a one-to-one chat is one long conversation;
//! - text is `text.content` trimmed; a `richText` joins its text items with spaces; a
//!   command has its leading mentions (`@Bot`) stripped first, chat keeps them;
//! - pictures, the images of a `richText`, files, audio and video are attached as handles
//!   ([`file_handle`]: the `robotCode` and `downloadCode` the channel exchanges through
//!   `messageFiles/download` later);
//! - the redelivery key is the `msgId` scoped by the conversation; `createAt`
//!   (milliseconds) dates the message;
//! - the metadata the replies need: `conversation_type`, `conversation_id`,
//!   `sender_staff_id`, `sender_nick`, `message_id`, `robot_code`.
//!
//! `sessionWebhook` is a token-bearing URL and is never copied anywhere.

use im_bridge_channel::{
    AllowedUsers, ChatKind, CommandVocabulary, FileKind, FileSource, InboundFile, InboundMessage,
    MessageId, MsgType, RedeliveryKey, Skip, strip_leading_mentions,
};
use serde_json::Value;

use crate::NAME;
use crate::model::{ChatbotMessage, ConversationType};

/// The prefix of every attachment handle.
const HANDLE_PREFIX: &str = "dingtalk-file:";

/// What normalization needs from the channel.
pub struct InboundContext<'a> {
    /// Who may talk to the bot (staff ids).
    pub allowed_users: &'a AllowedUsers,
    /// The daemon's commands.
    pub commands: &'a CommandVocabulary,
    /// The robot to name when a message carries no `robotCode` (the app's `client_id`).
    pub robot_code: &'a str,
}

/// The handle of an attachment: which robot received it and its `downloadCode`.
pub fn file_handle(robot_code: &str, download_code: &str) -> String {
    format!("{HANDLE_PREFIX}{robot_code}:{download_code}")
}

/// Splits a handle made by [`file_handle`] into `(robot_code, download_code)`.
pub fn parse_handle(handle: &str) -> Option<(&str, &str)> {
    let rest = handle.strip_prefix(HANDLE_PREFIX)?;
    let (robot, code) = rest.split_once(':')?;
    (!robot.is_empty() && !code.is_empty()).then_some((robot, code))
}

/// Reads and normalizes one callback's `data`.
pub fn normalize_data(data: &str, ctx: &InboundContext<'_>) -> Result<InboundMessage, Skip> {
    let message: ChatbotMessage = serde_json::from_str(data).map_err(|_| Skip::Malformed)?;
    normalize(&message, ctx)
}

/// Normalizes one robot message.
pub fn normalize(
    message: &ChatbotMessage,
    ctx: &InboundContext<'_>,
) -> Result<InboundMessage, Skip> {
    let kind = message.conversation_type.ok_or(Skip::Malformed)?;
    let msg_id = message.msg_id.trim();
    if msg_id.is_empty() {
        return Err(Skip::Malformed);
    }
    let staff = message.sender_staff_id.trim();
    let sender = message.sender_id.as_deref().map_or("", str::trim);
    // A group is answered in the group: a member from outside the organization, who has
    // no staff id, is told apart by the (encrypted) senderId. A one-to-one answer needs
    // the staff id.
    let user = match (staff, kind) {
        ("", ConversationType::Group) if !sender.is_empty() => sender,
        ("", _) => return Err(Skip::NotAUser),
        (staff, _) => staff,
    };
    let conversation = message.conversation_id.trim();
    let (chat_id, chat_kind) = match kind {
        ConversationType::Private => (staff, ChatKind::Private),
        ConversationType::Group if conversation.is_empty() => return Err(Skip::Malformed),
        ConversationType::Group => (conversation, ChatKind::Group),
    };
    if !ctx.allowed_users.allows(user) {
        return Err(Skip::NotAllowed);
    }
    let robot_code = match message.robot_code.trim() {
        "" => ctx.robot_code,
        code => code,
    };
    let (text, files) = read_content(message, robot_code);
    if text.is_empty() && files.is_empty() {
        return Err(Skip::Empty);
    }
    let stripped = strip_leading_mentions(&text);
    let text = if ctx.commands.classify(stripped) == MsgType::Command {
        stripped.to_owned()
    } else {
        text
    };
    let mut msg = InboundMessage::new(NAME, chat_id, user, text);
    if let Some(millis) = message.create_at {
        msg.sent_at_millis(millis);
    }
    msg.msg_type = ctx.commands.classify(&msg.text);
    msg.chat_kind = chat_kind;
    msg.thread_ts = Some(MessageId::new(msg_id));
    msg.topic_id = (chat_kind == ChatKind::Group).then(|| msg_id.to_owned());
    // A one-to-one chat's conversationId is its own; the staff id scopes it otherwise.
    let scope = if conversation.is_empty() {
        user
    } else {
        conversation
    };
    msg.redelivery = Some(RedeliveryKey::new(scope.to_owned(), msg_id.to_owned()));
    msg.keep_metadata([
        ("conversation_type", kind.as_str()),
        ("conversation_id", conversation),
        ("sender_staff_id", staff),
        ("sender_nick", message.sender_nick.trim()),
        ("message_id", msg_id),
        ("robot_code", robot_code),
    ]);
    msg.files = files;
    Ok(msg)
}

/// The text and attachments of a message.
fn read_content(message: &ChatbotMessage, robot_code: &str) -> (String, Vec<InboundFile>) {
    let content = &message.content;
    let mut files = Vec::new();
    let mut attach = |kind: FileKind, code: &str, name: Option<String>| {
        if !code.is_empty() {
            files.push(InboundFile {
                kind,
                filename: name,
                mime_type: None,
                size: None,
                source: FileSource::Handle {
                    id: file_handle(robot_code, code),
                },
            });
        }
    };
    let text = match message.msgtype.as_str() {
        "text" => message
            .text
            .as_ref()
            .map(|t| t.content.trim().to_owned())
            .unwrap_or_default(),
        "richText" => {
            let mut words = Vec::new();
            let items = content.get("richText").and_then(Value::as_array);
            for item in items.into_iter().flatten() {
                let word = str_of(item, "text");
                if !word.is_empty() {
                    words.push(word.to_owned());
                }
                let code = str_of(item, "downloadCode");
                // No name of our own: the daemon names each picture apart from every
                // other message's (a made-up `image_1.png` would replace the last one).
                attach(FileKind::Image, code, None);
            }
            words.join(" ")
        }
        "picture" => {
            attach(FileKind::Image, str_of(content, "downloadCode"), None);
            String::new()
        }
        "file" | "audio" | "video" => {
            let kind = match message.msgtype.as_str() {
                "audio" => FileKind::Audio,
                "video" => FileKind::Video,
                _ => FileKind::File,
            };
            let name = Some(str_of(content, "fileName"))
                .filter(|n| !n.is_empty())
                .map(str::to_owned);
            attach(kind, str_of(content, "downloadCode"), name);
            // A voice message comes with DingTalk's transcript.
            str_of(content, "recognition").to_owned()
        }
        _ => String::new(),
    };
    (text, files)
}

/// The string at `key` of `v`, trimmed; empty when absent.
fn str_of<'a>(v: &'a Value, key: &str) -> &'a str {
    v.get(key).and_then(Value::as_str).unwrap_or("").trim()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn group_text(text: &str) -> Value {
        json!({
            "conversationId": "cidGROUP", "conversationType": "2", "msgId": "msg-1",
            "senderStaffId": "staff-1", "senderNick": "Ann", "senderId": "$:LWCP:x",
            "msgtype": "text", "text": {"content": text}, "robotCode": "dingrobot",
            "isInAtList": true, "sessionWebhook": "https://oapi.dingtalk.com/robot/sendBySession?session=SECRET",
        })
    }

    fn run_with(data: &Value, allowed: &AllowedUsers) -> Result<InboundMessage, Skip> {
        let commands = CommandVocabulary::new(["goal", "help", "connect"]);
        let ctx = InboundContext {
            allowed_users: allowed,
            commands: &commands,
            robot_code: "dingapp",
        };
        normalize_data(&data.to_string(), &ctx)
    }

    fn run(data: &Value) -> Result<InboundMessage, Skip> {
        run_with(data, &AllowedUsers::Anyone)
    }

    /// The recorded robot messages (`tests/fixtures/chatbot_*.json`), normalized.
    #[test]
    fn recorded_messages_normalize() {
        let read = |text: &str| run(&serde_json::from_str(text).unwrap()).unwrap();
        let private = read(im_bridge_channel::fixture!("chatbot_text_private.json"));
        assert_eq!(
            (private.chat_kind, private.chat_id.as_str()),
            (ChatKind::Private, "manager4862")
        );
        assert_eq!(private.created_at, 1_767_225_600.123, "createAt dates it");
        let group = read(im_bridge_channel::fixture!("chatbot_text_group.json"));
        assert_eq!(group.text, "/goal ship the 1.4 release");
        assert_eq!(group.msg_type, MsgType::Command);
        let rich = read(im_bridge_channel::fixture!("chatbot_rich_text.json"));
        assert_eq!(
            (rich.text.as_str(), rich.files.len()),
            ("What does this chart say?", 1)
        );
        let picture = read(im_bridge_channel::fixture!("chatbot_picture.json"));
        assert_eq!(picture.files[0].kind, FileKind::Image);
        let file = read(im_bridge_channel::fixture!("chatbot_file.json"));
        assert_eq!(file.files[0].filename.as_deref(), Some("release-notes.pdf"));
        let audio = read(im_bridge_channel::fixture!("chatbot_audio.json"));
        assert_eq!(audio.text, "what changed since yesterday");
    }

    #[test]
    fn a_group_message_starts_its_own_conversation() {
        let m = run(&group_text("  what now?  ")).unwrap();
        assert_eq!(m.chat_id.as_str(), "cidGROUP");
        assert_eq!(m.user_id.as_str(), "staff-1");
        assert_eq!(m.text, "what now?");
        assert_eq!(m.chat_kind, ChatKind::Group);
        assert_eq!(m.topic_id.as_deref(), Some("msg-1"));
        assert_eq!(m.thread_ts.as_ref().map(MessageId::as_str), Some("msg-1"));
        assert_eq!(
            m.redelivery,
            Some(RedeliveryKey::new(
                "cidGROUP".to_owned(),
                "msg-1".to_owned()
            ))
        );
        assert_eq!(m.metadata["conversation_type"], "2");
        assert_eq!(m.metadata["conversation_id"], "cidGROUP");
        assert_eq!(m.metadata["sender_staff_id"], "staff-1");
        assert_eq!(m.metadata["robot_code"], "dingrobot");
        let all = serde_json::to_string(&m).unwrap();
        assert!(!all.contains("SECRET"), "the session webhook leaked: {all}");
    }

    #[test]
    fn a_private_chat_is_one_conversation_with_the_staff_id() {
        let mut data = group_text("hi");
        data["conversationType"] = json!(1);
        data["conversationId"] = json!("cidPRIVATE");
        data["robotCode"] = json!("");
        let m = run(&data).unwrap();
        assert_eq!(m.chat_id.as_str(), "staff-1");
        assert_eq!(m.chat_kind, ChatKind::Private);
        assert_eq!(m.topic_id, None);
        assert_eq!(m.metadata["conversation_type"], "1");
        assert_eq!(
            m.metadata["robot_code"], "dingapp",
            "the app's robot by default"
        );
        data["senderStaffId"] = json!(" ");
        assert_eq!(run(&data).unwrap_err(), Skip::NotAUser);
    }

    #[test]
    fn a_group_member_from_outside_the_organization_is_answered_in_the_group() {
        let mut data = group_text("@DeerFlow what is the plan?");
        data["senderStaffId"] = json!("");
        data["senderId"] = json!("$:LWCP_v1:$outsider");
        let m = run(&data).unwrap();
        assert_eq!(m.user_id.as_str(), "$:LWCP_v1:$outsider");
        assert_eq!(m.chat_kind, ChatKind::Group);
        assert_eq!(m.metadata["sender_staff_id"], "");
        data["senderId"] = json!("");
        assert_eq!(run(&data).unwrap_err(), Skip::NotAUser);
    }

    #[test]
    fn commands_lose_their_leading_mentions_and_chat_keeps_them() {
        let m = run(&group_text("@Ann @Bob /goal ship it")).unwrap();
        assert_eq!(m.text, "/goal ship it");
        assert_eq!(m.msg_type, MsgType::Command);
        let m = run(&group_text("<@staff-9> /help")).unwrap();
        assert_eq!(m.text, "/help");
        let m = run(&group_text("@Ann what do you think?")).unwrap();
        assert_eq!(m.text, "@Ann what do you think?");
        assert_eq!(m.msg_type, MsgType::Chat);
        let m = run(&group_text("@ /help")).unwrap();
        assert_eq!(m.msg_type, MsgType::Chat, "a lone @ is not a mention");
    }

    #[test]
    fn rich_text_pictures_and_files_become_text_and_handles() {
        let mut rich = group_text("");
        rich["msgtype"] = json!("richText");
        rich["content"] = json!({"richText": [
            {"text": "look"}, {"downloadCode": "dc-1", "type": "picture"}, {"text": "here"},
            {"pictureDownloadCode": "ignored", "downloadCode": "dc-2"},
        ]});
        let m = run(&rich).unwrap();
        assert_eq!(m.text, "look here");
        let handles: Vec<_> = m
            .files
            .iter()
            .map(|f| (f.kind, f.filename.clone(), f.source.clone()))
            .collect();
        assert_eq!(
            handles,
            [
                (
                    FileKind::Image,
                    None,
                    FileSource::Handle {
                        id: "dingtalk-file:dingrobot:dc-1".into()
                    }
                ),
                (
                    FileKind::Image,
                    None,
                    FileSource::Handle {
                        id: "dingtalk-file:dingrobot:dc-2".into()
                    }
                ),
            ]
        );
        let mut picture = group_text("");
        picture["msgtype"] = json!("picture");
        picture["content"] = json!({"downloadCode": "dc/+=3"});
        let m = run(&picture).unwrap();
        assert_eq!(m.text, "");
        assert_eq!(m.files[0].filename, None, "the daemon names it");
        let FileSource::Handle { id } = &m.files[0].source else {
            panic!("no handle");
        };
        assert_eq!(parse_handle(id), Some(("dingrobot", "dc/+=3")));
        let mut file = group_text("");
        file["msgtype"] = json!("file");
        file["content"] = json!({"downloadCode": "dc-4", "fileName": "q3.pdf"});
        let m = run(&file).unwrap();
        assert_eq!(m.files[0].kind, FileKind::File);
        assert_eq!(m.files[0].filename.as_deref(), Some("q3.pdf"));
        let mut voice = group_text("");
        voice["msgtype"] = json!("audio");
        voice["content"] = json!({"downloadCode": "dc-5", "recognition": "call me"});
        let m = run(&voice).unwrap();
        assert_eq!(
            (m.text.as_str(), m.files[0].kind),
            ("call me", FileKind::Audio)
        );
        assert_eq!(parse_handle("dingtalk-file::x"), None);
        assert_eq!(parse_handle("other:a:b"), None);
    }

    #[test]
    fn what_is_skipped() {
        assert_eq!(
            normalize_data(
                "not json",
                &InboundContext {
                    allowed_users: &AllowedUsers::Anyone,
                    commands: &CommandVocabulary::default(),
                    robot_code: "r",
                }
            )
            .unwrap_err(),
            Skip::Malformed
        );
        let mut unknown = group_text("x");
        unknown["conversationType"] = json!("3");
        assert_eq!(run(&unknown).unwrap_err(), Skip::Malformed);
        let mut no_id = group_text("x");
        no_id["msgId"] = json!("");
        assert_eq!(run(&no_id).unwrap_err(), Skip::Malformed);
        let mut no_group = group_text("x");
        no_group["conversationId"] = json!("");
        assert_eq!(run(&no_group).unwrap_err(), Skip::Malformed);
        assert_eq!(run(&group_text("   ")).unwrap_err(), Skip::Empty);
        let mut sticker = group_text("");
        sticker["msgtype"] = json!("unknownSticker");
        assert_eq!(run(&sticker).unwrap_err(), Skip::Empty);
        let only_bob = AllowedUsers::from_entries(Some(vec![Some("staff-bob".to_owned())]));
        assert_eq!(
            run_with(&group_text("hi"), &only_bob).unwrap_err(),
            Skip::NotAllowed
        );
        let nobody = AllowedUsers::from_entries(Some(vec![None]));
        assert_eq!(
            run_with(&group_text("hi"), &nobody).unwrap_err(),
            Skip::NotAllowed,
            "a malformed list fails closed"
        );
    }
}
