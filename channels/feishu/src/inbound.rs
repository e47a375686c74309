//! Normalization of Feishu events (spec platforms.md §4.2): a schema-2.0
//! `im.message.receive_v1` event becomes an [`InboundMessage`], or is skipped with a reason.
//!
//! - `chat_id` is the message's chat, `user_id` the sender's `open_id`, `thread_ts` the
//!   message id (replies answer it);
//! - text is the message's `text`; a rich `post` joins its `text`/`at` elements with spaces
//!   per paragraph and paragraphs with blank lines; images and files become `[image]` /
//!   `[file]` and are attached as handles the channel downloads
//!   (`…/messages/{id}/resources/{key}`);
//! - mention placeholders (`@_user_1`) become the mentioned names in chat text (`@Alice`),
//!   as a post's `at` elements do, so the agent reads who was meant; a command has its
//!   leading mentions stripped first (`@Bot /goal x` → `/goal x`);
//! - in a group, only a message that @-mentions the bot (its `open_id` among the message's
//!   `mentions`) is for the bot ([`Skip::NotAddressed`] otherwise): Feishu sends every
//!   group message to an app holding the "read all group messages" permission, and the
//!   bridge answers in groups only when asked, as without that permission;
//! - in a group, the conversation (`topic_id`) is the message's `root_id`, else its own id:
//!   a reply in a thread (to the bot's card too) continues that thread's conversation; the
//!   replied-to message (`parent_id`) is the reply chain's link;
//! - the redelivery key is the message id scoped by its chat, since Feishu re-pushes an
//!   event it did not see acknowledged in time;
//! - the message's `create_time` (milliseconds, as a string) dates it;
//! - a message sent in a topic thread keeps that thread in the metadata (`topic_thread`):
//!   the answer is shown in it, and it reads apart from the rest of the chat.

use im_bridge_channel::{
    AllowedUsers, ChatKind, CommandVocabulary, FileKind, FileSource, InboundFile, InboundMessage,
    MessageId, RedeliveryKey, Skip,
};
use serde_json::Value;

use crate::NAME;
use crate::model::{Envelope, Mention, MessageEvent};

/// The event type the adapter handles.
pub const MESSAGE_RECEIVED: &str = "im.message.receive_v1";
/// The metadata key holding the topic thread of a message sent in one (Feishu's own
/// thread id, not a DeerFlow thread).
pub(crate) const TOPIC_THREAD_KEY: &str = "topic_thread";

/// What normalization needs from the channel.
pub struct InboundContext<'a> {
    /// Who may talk to the bot.
    pub allowed_users: &'a AllowedUsers,
    /// The daemon's commands.
    pub commands: &'a CommandVocabulary,
    /// The bot's `open_id` (`GET /open-apis/bot/v3/info`): a group message is for the bot
    /// when its `mentions` name it. `None` (not known) takes every group message; the
    /// channel learns it before it serves.
    pub bot_open_id: Option<&'a str>,
}

/// The handle of an attachment: which message's resource, of which kind.
pub fn resource_handle(kind: &str, message_id: &str, key: &str) -> String {
    format!("{kind}:{message_id}:{key}")
}

/// Splits a handle made by [`resource_handle`].
pub fn parse_handle(handle: &str) -> Option<(&str, &str, &str)> {
    let (kind, rest) = handle.split_once(':')?;
    let (message_id, key) = rest.split_once(':')?;
    matches!(kind, "image" | "file")
        .then_some((kind, message_id, key))
        .filter(|(_, m, k)| !m.is_empty() && !k.is_empty())
}

/// Normalizes one decoded envelope.
pub fn normalize(envelope: &Envelope, ctx: &InboundContext<'_>) -> Result<InboundMessage, Skip> {
    if envelope.header.event_type != MESSAGE_RECEIVED {
        return Err(Skip::NotAMessage);
    }
    let event: MessageEvent =
        serde_json::from_value(envelope.event.clone()).map_err(|_| Skip::Malformed)?;
    if event.sender.sender_type != "user" || event.sender.sender_id.open_id.is_empty() {
        return Err(Skip::NotAUser);
    }
    let user = event.sender.sender_id.open_id;
    if !ctx.allowed_users.allows(&user) {
        return Err(Skip::NotAllowed);
    }
    let mut message = event.message;
    if message.chat_type != "p2p" && !mentions_bot(&message.mentions, ctx.bot_open_id) {
        return Err(Skip::NotAddressed);
    }
    let content: Value = serde_json::from_str(&message.content).unwrap_or(Value::Null);
    let (text, files) = read_content(
        &message.message_type,
        &message.message_id,
        &content,
        &mut message.mentions,
    );
    if text.trim().is_empty() && files.is_empty() {
        return Err(Skip::Empty);
    }
    let stripped = strip_leading_mentions(&text);
    let is_command = ctx.commands.classify(stripped) == im_bridge_channel::MsgType::Command;
    let text = if is_command {
        stripped.to_owned()
    } else {
        resolve_mentions(&text, &message.mentions)
    };
    let chat_kind = if message.chat_type == "p2p" {
        ChatKind::Private
    } else {
        ChatKind::Group
    };
    let mut msg = InboundMessage::new(NAME, message.chat_id.clone(), user, text);
    if let Some(millis) = message.create_time.as_deref().and_then(|t| t.parse().ok()) {
        msg.sent_at_millis(millis);
    }
    msg.msg_type = ctx.commands.classify(&msg.text);
    msg.chat_kind = chat_kind;
    msg.thread_ts = Some(MessageId::new(message.message_id.clone()));
    let non_empty = |id: &Option<String>| id.clone().filter(|s| !s.is_empty());
    msg.reply_to = non_empty(&message.parent_id).map(MessageId::new);
    msg.topic_id = match chat_kind {
        ChatKind::Private => None,
        ChatKind::Group => Some(
            non_empty(&message.root_id)
                .or_else(|| non_empty(&message.topic_thread))
                .unwrap_or_else(|| message.message_id.clone()),
        ),
    };
    msg.redelivery = Some(RedeliveryKey::new(
        message.chat_id.clone(),
        message.message_id.clone(),
    ));
    msg.keep_metadata([("message_id", message.message_id.as_str())]);
    // A reply to a message in a topic thread is shown in that thread.
    if let Some(thread) = non_empty(&message.topic_thread) {
        msg.keep_metadata([(TOPIC_THREAD_KEY, thread.as_str())]);
    }
    if !envelope.header.event_id.is_empty() {
        msg.keep_metadata([("event_id", envelope.header.event_id.as_str())]);
    }
    msg.files = files;
    Ok(msg)
}

/// The text and attachments of a message's `content`.
/// A post's `at` elements name their placeholders in `mentions` too.
fn read_content(
    kind: &str,
    message_id: &str,
    content: &Value,
    mentions: &mut Vec<Mention>,
) -> (String, Vec<InboundFile>) {
    let str_of = |key: &str| content.get(key).and_then(Value::as_str).unwrap_or("");
    let mut files = Vec::new();
    let mut attach = |file_kind: FileKind, key: &str, name: Option<&str>| {
        if key.is_empty() {
            return;
        }
        let wire = if file_kind == FileKind::Image {
            "image"
        } else {
            "file"
        };
        files.push(InboundFile {
            kind: file_kind,
            filename: name.filter(|n| !n.is_empty()).map(str::to_owned),
            mime_type: None,
            size: None,
            source: FileSource::Handle {
                id: resource_handle(wire, message_id, key),
            },
        });
    };
    let text = match kind {
        "text" => str_of("text").to_owned(),
        "image" => {
            attach(FileKind::Image, str_of("image_key"), None);
            "[image]".to_owned()
        }
        "file" | "media" | "audio" => {
            let kind = match kind {
                "media" => FileKind::Video,
                "audio" => FileKind::Audio,
                _ => FileKind::File,
            };
            attach(
                kind,
                str_of("file_key"),
                content.get("file_name").and_then(Value::as_str),
            );
            "[file]".to_owned()
        }
        "post" => read_post(content, &mut attach, mentions),
        _ => String::new(),
    };
    (text, files)
}

/// A rich post: `{"title"?, "content": [[element…]…]}`, possibly under a locale key.
fn read_post(
    content: &Value,
    attach: &mut impl FnMut(FileKind, &str, Option<&str>),
    mentions: &mut Vec<Mention>,
) -> String {
    let body = match content.get("content") {
        Some(_) => content,
        // `{"zh_cn": {"title", "content"}}`: the first locale's post.
        None => content
            .as_object()
            .and_then(|o| o.values().next())
            .unwrap_or(&Value::Null),
    };
    let mut paragraphs = Vec::new();
    if let Some(title) = body.get("title").and_then(Value::as_str)
        && !title.trim().is_empty()
    {
        paragraphs.push(title.trim().to_owned());
    }
    for paragraph in body
        .get("content")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let mut words = Vec::new();
        for element in paragraph.as_array().into_iter().flatten() {
            let text_of = |key: &str| element.get(key).and_then(Value::as_str).unwrap_or("");
            match text_of("tag") {
                "text" => words.push(text_of("text").to_owned()),
                // A named link keeps where it points: the agent may need to open it.
                "a" => words.push(match (text_of("text").trim(), text_of("href").trim()) {
                    (text, "") => text.to_owned(),
                    ("", href) => href.to_owned(),
                    (text, href) if text == href => href.to_owned(),
                    (text, href) => format!("[{text}]({href})"),
                }),
                "at" => {
                    // The placeholder, like a text's: commands strip it, chat names it.
                    let key = text_of("user_id");
                    let name = text_of("user_name");
                    words.push(if is_placeholder(key) {
                        if !name.is_empty() && !mentions.iter().any(|m| m.key == key) {
                            mentions.push(Mention {
                                key: key.to_owned(),
                                id: None,
                                name: name.to_owned(),
                                tenant_key: None,
                            });
                        }
                        key.to_owned()
                    } else if name.is_empty() {
                        format!("@{key}")
                    } else {
                        format!("@{name}")
                    });
                }
                "code_block" => words.push(text_of("text").to_owned()),
                "img" => {
                    attach(FileKind::Image, text_of("image_key"), None);
                    words.push("[image]".to_owned());
                }
                "media" | "file" => {
                    attach(FileKind::File, text_of("file_key"), None);
                    words.push("[file]".to_owned());
                }
                _ => {}
            }
        }
        let line = words
            .iter()
            .map(|w| w.trim())
            .filter(|w| !w.is_empty())
            .collect::<Vec<_>>()
            .join(" ");
        if !line.is_empty() {
            paragraphs.push(line);
        }
    }
    paragraphs.join("\n\n")
}

/// Whether `mentions` name the bot `bot` (any message does while the bot is not known).
fn mentions_bot(mentions: &[Mention], bot: Option<&str>) -> bool {
    let Some(bot) = bot else {
        return true;
    };
    mentions
        .iter()
        .any(|m| m.id.as_ref().is_some_and(|id| id.open_id == bot))
}

/// Whether `word` is a whole mention placeholder, `@_user_<digits>`.
fn is_placeholder(word: &str) -> bool {
    word.strip_prefix("@_user_")
        .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

/// `text` with each mention placeholder replaced by `@name` (kept when `mentions` does not
/// name it).
fn resolve_mentions(text: &str, mentions: &[Mention]) -> String {
    if mentions.is_empty() || !text.contains("@_user_") {
        return text.to_owned();
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("@_user_") {
        out.push_str(&rest[..at]);
        let tail = &rest[at + "@_user_".len()..];
        let digits = tail
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(tail.len());
        let (key, after) = rest[at..].split_at("@_user_".len() + digits);
        match mentions.iter().find(|m| m.key == key && !m.name.is_empty()) {
            Some(m) if digits > 0 => {
                out.push('@');
                out.push_str(&m.name);
            }
            _ => out.push_str(key),
        }
        rest = after;
    }
    out.push_str(rest);
    out
}

/// `text` without the mention placeholders it starts with (`@_user_1 /goal x` → `/goal x`).
fn strip_leading_mentions(text: &str) -> &str {
    let mut rest = text.trim_start();
    while let Some(after) = rest.strip_prefix("@_user_") {
        let end = after
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(after.len());
        if end == 0 {
            break;
        }
        rest = after[end..].trim_start();
    }
    rest
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn envelope(message: Value) -> Envelope {
        serde_json::from_value(json!({
            "schema": "2.0",
            "header": {"event_id": "ev1", "event_type": MESSAGE_RECEIVED},
            "event": {
                "sender": {"sender_id": {"open_id": "ou_alice"}, "sender_type": "user"},
                "message": message,
            }
        }))
        .unwrap()
    }

    fn text_message(chat_type: &str, text: &str) -> Value {
        json!({
            "message_id": "om_1", "chat_id": "oc_chat", "chat_type": chat_type,
            "message_type": "text", "content": json!({"text": text}).to_string(),
        })
    }

    fn run(envelope: &Envelope) -> Result<InboundMessage, Skip> {
        let commands = CommandVocabulary::new(["goal", "help"]);
        let allowed = AllowedUsers::Anyone;
        normalize(
            envelope,
            &InboundContext {
                allowed_users: &allowed,
                commands: &commands,
                bot_open_id: None,
            },
        )
    }

    /// The recorded events (`tests/fixtures/event_*.json`), normalized.
    #[test]
    fn recorded_events_normalize() {
        let read = |text: &str| run(&serde_json::from_str(text).unwrap());
        let private = read(im_bridge_channel::fixture!("event_text_p2p.json")).unwrap();
        assert_eq!(private.chat_kind, ChatKind::Private);
        assert_eq!(private.text, "Summarize the last release notes, please");
        // The message's own `create_time` dates it (not the event header's).
        assert_eq!(private.created_at, 1_767_225_600.1);
        let group = read(im_bridge_channel::fixture!("event_text_group_mention.json")).unwrap();
        assert_eq!(group.text, "/goal ship the 1.4 release");
        let reply = read(im_bridge_channel::fixture!("event_post_thread_reply.json")).unwrap();
        assert_eq!(
            reply.topic_id.as_deref(),
            Some("om_dc13264520392913993dd051dba21dcf")
        );
        assert_eq!(reply.files.len(), 1);
        let image = read(im_bridge_channel::fixture!("event_image.json")).unwrap();
        assert_eq!(image.files[0].kind, FileKind::Image);
        let file = read(im_bridge_channel::fixture!("event_file.json")).unwrap();
        assert_eq!(file.files[0].filename.as_deref(), Some("release-notes.pdf"));
        let other = read(im_bridge_channel::fixture!("event_reaction_created.json"));
        assert_eq!(other.unwrap_err(), Skip::NotAMessage);
    }

    #[test]
    fn a_private_text_message() {
        let m = run(&envelope(text_message("p2p", "hello"))).unwrap();
        assert_eq!(m.chat_id.as_str(), "oc_chat");
        assert_eq!(m.user_id.as_str(), "ou_alice");
        assert_eq!(m.text, "hello");
        assert_eq!(m.chat_kind, ChatKind::Private);
        assert_eq!(m.topic_id, None);
        assert_eq!(m.thread_ts.as_ref().map(MessageId::as_str), Some("om_1"));
        assert_eq!(
            m.redelivery,
            Some(RedeliveryKey::new("oc_chat".to_owned(), "om_1".to_owned()))
        );
    }

    #[test]
    fn group_commands_lose_their_leading_mentions_and_chat_keeps_them() {
        let m = run(&envelope(text_message("group", "@_user_1 /goal ship it"))).unwrap();
        assert_eq!(m.text, "/goal ship it");
        assert_eq!(m.msg_type, im_bridge_channel::MsgType::Command);
        assert_eq!(m.topic_id.as_deref(), Some("om_1"), "a new thread");
        let m = run(&envelope(text_message("group", "@_user_1 what now?"))).unwrap();
        assert_eq!(
            m.text, "@_user_1 what now?",
            "no mentions list: kept as sent"
        );
        assert_eq!(m.msg_type, im_bridge_channel::MsgType::Chat);
    }

    #[test]
    fn chat_names_whom_its_placeholders_mention() {
        let mut message = text_message("group", "@_user_1 ask @_user_12 and @_user_2, not @_user_");
        message["mentions"] = json!([
            {"key": "@_user_1", "id": {"open_id": "ou_bot"}, "name": "Bridge"},
            {"key": "@_user_2", "id": {"open_id": "ou_bob"}, "name": "Bob"},
            {"key": "@_user_12", "id": {"open_id": "ou_eve"}, "name": "Eve"},
        ]);
        let m = run(&envelope(message.clone())).unwrap();
        assert_eq!(m.text, "@Bridge ask @Eve and @Bob, not @_user_");
        message["content"] = json!({"text": "@_user_1 /help"}).to_string().into();
        assert_eq!(run(&envelope(message)).unwrap().text, "/help");
        // A post's `at` element is a placeholder too: a command strips it.
        let post = json!({
            "message_id": "om_p", "chat_id": "oc_chat", "chat_type": "group",
            "message_type": "post",
            "content": json!({"title": "", "content": [[
                {"tag": "at", "user_id": "@_user_1", "user_name": "Bridge"},
                {"tag": "text", "text": "/goal ship it"},
            ]]}).to_string(),
            "mentions": [{"key": "@_user_1", "name": "Bridge"}],
        });
        assert_eq!(run(&envelope(post)).unwrap().text, "/goal ship it");
    }

    #[test]
    fn a_reply_in_a_thread_continues_its_root() {
        let mut message = text_message("group", "and then?");
        message["root_id"] = json!("om_root");
        message["parent_id"] = json!("om_card");
        let m = run(&envelope(message.clone())).unwrap();
        assert_eq!(m.topic_id.as_deref(), Some("om_root"));
        assert_eq!(m.reply_to.as_ref().map(MessageId::as_str), Some("om_card"));
        // A quoted reply in the chat is no topic thread; one in a topic thread names it.
        assert_eq!(m.metadata.get(TOPIC_THREAD_KEY), None);
        message["thread_id"] = json!("omt_topic");
        let m = run(&envelope(message)).unwrap();
        assert_eq!(m.topic_id.as_deref(), Some("om_root"));
        assert_eq!(m.metadata[TOPIC_THREAD_KEY], "omt_topic");
    }

    #[test]
    fn posts_images_and_files() {
        let post = json!({
            "message_id": "om_2", "chat_id": "oc", "chat_type": "p2p", "message_type": "post",
            "content": json!({"title": "Plan", "content": [
                [{"tag": "text", "text": "look at"}, {"tag": "at", "user_id": "@_user_1", "user_name": "Bot"}],
                [{"tag": "img", "image_key": "img_k"}],
                [{"tag": "text", "text": "read"},
                 {"tag": "a", "text": "the spec", "href": "https://example.com/spec"},
                 {"tag": "a", "text": "https://e.x", "href": "https://e.x"}],
            ]}).to_string(),
        });
        let m = run(&envelope(post)).unwrap();
        assert_eq!(
            m.text,
            "Plan\n\nlook at @Bot\n\n[image]\n\nread [the spec](https://example.com/spec) https://e.x"
        );
        assert_eq!(m.files.len(), 1);
        assert_eq!(
            m.files[0].source,
            FileSource::Handle {
                id: "image:om_2:img_k".into()
            }
        );
        let file = json!({
            "message_id": "om_3", "chat_id": "oc", "chat_type": "p2p", "message_type": "file",
            "content": json!({"file_key": "file_k", "file_name": "q3.pdf"}).to_string(),
        });
        let m = run(&envelope(file)).unwrap();
        assert_eq!(m.text, "[file]");
        assert_eq!(m.files[0].filename.as_deref(), Some("q3.pdf"));
        assert_eq!(
            parse_handle("file:om_3:file_k"),
            Some(("file", "om_3", "file_k"))
        );
        assert_eq!(parse_handle("file::k"), None);
        assert_eq!(parse_handle("other:a:b"), None);
    }

    #[test]
    fn what_is_skipped() {
        let mut other = envelope(text_message("p2p", "x"));
        other.header.event_type = "im.message.message_read_v1".into();
        assert_eq!(run(&other).unwrap_err(), Skip::NotAMessage);
        let mut bad = envelope(text_message("p2p", "x"));
        bad.event["message"] = json!("not an object");
        assert_eq!(run(&bad).unwrap_err(), Skip::Malformed);
        let mut app = envelope(text_message("p2p", "x"));
        app.event["sender"]["sender_type"] = json!("app");
        assert_eq!(run(&app).unwrap_err(), Skip::NotAUser);
        assert_eq!(
            run(&envelope(text_message("p2p", "  "))).unwrap_err(),
            Skip::Empty
        );
        let commands = CommandVocabulary::new(["goal"]);
        let only = AllowedUsers::from_entries(Some(vec![Some("ou_bob".to_owned())]));
        let refused = normalize(
            &envelope(text_message("p2p", "hi")),
            &InboundContext {
                allowed_users: &only,
                commands: &commands,
                bot_open_id: None,
            },
        );
        assert_eq!(refused.unwrap_err(), Skip::NotAllowed);
    }

    /// With the bot known, a group message is for it only when it @-mentions it; a
    /// private one always is.
    #[test]
    fn a_group_message_is_for_the_bot_only_when_it_mentions_it() {
        let commands = CommandVocabulary::new(["goal"]);
        let allowed = AllowedUsers::Anyone;
        let ctx = InboundContext {
            allowed_users: &allowed,
            commands: &commands,
            bot_open_id: Some("ou_bot2b87c6b1f6c1a44dff0b8d0f"),
        };
        let read = |text: &str| normalize(&serde_json::from_str(text).unwrap(), &ctx);
        let mentioned = read(im_bridge_channel::fixture!("event_text_group_mention.json"));
        assert_eq!(mentioned.unwrap().text, "/goal ship the 1.4 release");
        let mut other: Value =
            serde_json::from_str(im_bridge_channel::fixture!("event_text_group_mention.json"))
                .unwrap();
        other["event"]["message"]["mentions"][0]["id"]["open_id"] = json!("ou_someone_else");
        let other = normalize(&serde_json::from_value(other).unwrap(), &ctx);
        assert_eq!(other.unwrap_err(), Skip::NotAddressed);
        let unmentioned = normalize(&envelope(text_message("group", "hello all")), &ctx);
        assert_eq!(unmentioned.unwrap_err(), Skip::NotAddressed);
        let private = normalize(&envelope(text_message("p2p", "hello")), &ctx);
        assert_eq!(private.unwrap().text, "hello");
    }
}
