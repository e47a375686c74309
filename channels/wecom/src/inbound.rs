//! Normalization of message callbacks: an `aibot_msg_callback` frame becomes an
//! [`InboundMessage`], or is skipped with a reason.
//!
//! - WeCom delivers a group message only when the bot is @-mentioned (text, mixed and
//!   quotes; images, voice and files come from private chats only: doc path 100719), so
//!   every group message is addressed to the bot; its text keeps the `@Bot` mention,
//!   which is stripped before the command check (the kit's `strip_leading_mentions`);
//!   chat keeps it;
//! - `chat_id` is the group's `chatid`, or in a private chat the sender's `userid`;
//!   `user_id` is `from.userid`; `thread_ts` is `msgid`; in a group each message starts a
//!   conversation of its own (`topic_id` = `msgid`), a private chat is one conversation;
//! - text: `text.content`; a voice message is WeCom's transcript (`voice.content`); a
//!   mixed message's texts joined by blank lines, its images attached; a quote's text
//!   follows the message's, as a quoted line, and a quoted picture, file or video (or a
//!   quoted mixed message's pictures) is attached when the message brings no media of its
//!   own: in a group the bot hears only text and mixed messages, so "@Bot what is this?"
//!   quoting a photo is how a user shows it one (WeCom's plugin downloads quoted media);
//! - images, files and videos are attached as handles ([`file_handle`]: the signed `url`
//!   and the `aeskey` the channel downloads and decrypts with, `media`);
//! - the redelivery key is `msgid` scoped by `aibotid`;
//! - the metadata the reply needs: `req_id` (a reply goes through the callback's),
//!   `chattype`, `aibotid`, `chatid` (where a proactive message goes), `message_id`.
//!
//! Events (`aibot_event_callback`) are never messages: [`event`] says what each one asks of
//! the transport. Nothing here logs, and no URL leaves the handle.

pub mod media;

use im_bridge_channel::{
    AllowedUsers, ChatKind, CommandVocabulary, FileKind, FileSource, InboundFile, InboundMessage,
    MessageId, RedeliveryKey, Skip, strip_leading_mentions,
};

use crate::NAME;
use crate::model::{
    DISCONNECTED_EVENT, ENTER_CHAT, EventMessage, Frame, Kind, Media, Message, Mixed, Quote,
};

/// The prefix of every attachment handle.
const HANDLE_PREFIX: &str = "wecom-media:";

/// What normalization needs from the channel.
pub struct InboundContext<'a> {
    /// Who may talk to the bot (user ids).
    pub allowed_users: &'a AllowedUsers,
    /// The daemon's commands.
    pub commands: &'a CommandVocabulary,
}

/// What an event callback asks of the transport.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventAction {
    /// Another connection subscribed for this bot and WeCom closes this one: a
    /// replacement, not a failure (the transport does not count it as lost).
    Replaced,
    /// A user opened the private chat (`enter_chat`): no welcome is sent (the daemon
    /// writes no unprompted sentence), so nothing to do.
    EnteredChat,
    /// Card clicks, feedback and events not known yet: skipped.
    Ignored,
}

/// The handle of an attachment: the key, then the signed URL.
pub fn file_handle(media: &Media) -> Option<String> {
    let url = media.url.trim();
    let key = media.aeskey.as_deref().map(str::trim).unwrap_or_default();
    (!url.is_empty()).then(|| format!("{HANDLE_PREFIX}{key}:{url}"))
}

/// Splits a handle made by [`file_handle`] into `(aeskey, url)`; the key is empty when the
/// callback had none (the file is then not encrypted).
pub fn parse_handle(handle: &str) -> Option<(&str, &str)> {
    let rest = handle.strip_prefix(HANDLE_PREFIX)?;
    let (key, url) = rest.split_once(':')?;
    (!url.is_empty()).then_some((key, url))
}

/// What an event callback's frame asks for, by its `event.eventtype` alone: a field of
/// another shape elsewhere in the body (a `create_time` as a string, say) must not hide a
/// `disconnected_event`, or two connections would keep replacing each other.
pub fn event(frame: &Frame) -> EventAction {
    let eventtype = match frame.body_as::<EventMessage>() {
        Some(message) => Some(message.event.eventtype),
        None => frame
            .body
            .as_ref()
            .and_then(|body| body.pointer("/event/eventtype"))
            .and_then(serde_json::Value::as_str)
            .map(str::to_owned),
    };
    match eventtype.as_deref() {
        Some(DISCONNECTED_EVENT) => EventAction::Replaced,
        Some(ENTER_CHAT) => EventAction::EnteredChat,
        _ => EventAction::Ignored,
    }
}

/// Normalizes a message callback's frame.
pub fn normalize_frame(frame: &Frame, ctx: &InboundContext<'_>) -> Result<InboundMessage, Skip> {
    if frame.kind() != Kind::Message {
        return Err(Skip::NotAMessage);
    }
    let message: Message = frame.body_as().ok_or(Skip::Malformed)?;
    normalize(&message, &frame.headers.req_id, ctx)
}

/// Normalizes one message; `req_id` is its callback's.
pub fn normalize(
    message: &Message,
    req_id: &str,
    ctx: &InboundContext<'_>,
) -> Result<InboundMessage, Skip> {
    let msgid = message.msgid.trim();
    if msgid.is_empty() || req_id.trim().is_empty() {
        return Err(Skip::Malformed);
    }
    let user = message.from.userid.trim();
    if user.is_empty() {
        return Err(Skip::NotAUser);
    }
    let group = message.chatid.as_deref().map(str::trim).unwrap_or_default();
    let (chat_id, chat_kind) = match message.chattype.as_str() {
        "single" => (user, ChatKind::Private),
        "group" if group.is_empty() => return Err(Skip::Malformed),
        "group" => (group, ChatKind::Group),
        _ => return Err(Skip::Malformed),
    };
    if !ctx.allowed_users.allows(user) {
        return Err(Skip::NotAllowed);
    }
    let (text, files) = read_content(message);
    if text.is_empty() && files.is_empty() {
        return Err(Skip::Empty);
    }
    let stripped = strip_leading_mentions(&text);
    let text = if ctx.commands.classify(stripped) == im_bridge_channel::MsgType::Command {
        stripped.to_owned()
    } else {
        text
    };
    let mut msg = InboundMessage::new(NAME, chat_id, user, text);
    msg.msg_type = ctx.commands.classify(&msg.text);
    msg.chat_kind = chat_kind;
    msg.thread_ts = Some(MessageId::new(msgid));
    msg.topic_id = (chat_kind == ChatKind::Group).then(|| msgid.to_owned());
    let bot = message.aibotid.trim();
    msg.redelivery = Some(RedeliveryKey::new(bot.to_owned(), msgid.to_owned()));
    if let Some(at) = message.create_time {
        msg.sent_at(at as f64);
    }
    msg.keep_metadata([
        ("req_id", req_id.trim()),
        ("chattype", message.chattype.as_str()),
        ("aibotid", bot),
        ("chatid", chat_id),
        ("message_id", msgid),
    ]);
    msg.files = files;
    Ok(msg)
}

/// The text and attachments of a message.
fn read_content(message: &Message) -> (String, Vec<InboundFile>) {
    let mut files = Vec::new();
    let mut parts = Vec::new();
    let text_of = |t: &Option<crate::model::Text>| {
        t.as_ref()
            .map(|t| t.content.trim().to_owned())
            .unwrap_or_default()
    };
    match message.msgtype.as_str() {
        "text" => parts.push(text_of(&message.text)),
        "voice" => parts.push(text_of(&message.voice)),
        "image" => attach(&mut files, FileKind::Image, message.image.as_ref()),
        "file" => attach(&mut files, FileKind::File, message.file.as_ref()),
        "video" => attach(&mut files, FileKind::Video, message.video.as_ref()),
        "mixed" => read_mixed(message.mixed.as_ref(), &mut parts, &mut files),
        _ => {}
    }
    if files.is_empty()
        && let Some(quote) = &message.quote
    {
        attach_quoted(&mut files, quote);
    }
    let mut text = parts
        .into_iter()
        .filter(|p| !p.is_empty())
        .collect::<Vec<_>>()
        .join("\n\n");
    if let Some(quoted) = message
        .quote
        .as_ref()
        .map(quote_text)
        .filter(|q| !q.is_empty())
    {
        if !text.is_empty() {
            text.push_str("\n\n");
        }
        text.push_str("> ");
        text.push_str(&quoted.replace('\n', "\n> "));
    }
    (text, files)
}

fn read_mixed(mixed: Option<&Mixed>, parts: &mut Vec<String>, files: &mut Vec<InboundFile>) {
    for item in mixed.map(|m| m.msg_item.as_slice()).unwrap_or_default() {
        match item.msgtype.as_str() {
            "text" => parts.push(
                item.text
                    .as_ref()
                    .map(|t| t.content.trim().to_owned())
                    .unwrap_or_default(),
            ),
            "image" => attach(files, FileKind::Image, item.image.as_ref()),
            _ => {}
        }
    }
}

/// Attaches a quote's picture, file or video, or a quoted mixed message's pictures, as
/// handles like the message's own.
fn attach_quoted(files: &mut Vec<InboundFile>, quote: &Quote) {
    match quote.msgtype.as_str() {
        "image" => attach(files, FileKind::Image, quote.image.as_ref()),
        "file" => attach(files, FileKind::File, quote.file.as_ref()),
        "video" => attach(files, FileKind::Video, quote.video.as_ref()),
        "mixed" => read_mixed(quote.mixed.as_ref(), &mut Vec::new(), files),
        _ => {}
    }
}

/// A quote's text: its text, transcript or mixed texts (its media are [`attach_quoted`]'s).
fn quote_text(quote: &Quote) -> String {
    let mut parts = Vec::new();
    let mut ignored = Vec::new();
    match quote.msgtype.as_str() {
        "text" => parts.extend(quote.text.as_ref().map(|t| t.content.trim().to_owned())),
        "voice" => parts.extend(quote.voice.as_ref().map(|t| t.content.trim().to_owned())),
        "mixed" => read_mixed(quote.mixed.as_ref(), &mut parts, &mut ignored),
        _ => {}
    }
    parts.retain(|p| !p.is_empty());
    parts.join("\n")
}

fn attach(files: &mut Vec<InboundFile>, kind: FileKind, media: Option<&Media>) {
    let Some(id) = media.and_then(file_handle) else {
        return;
    };
    // No name of our own: the daemon names each file apart from every other message's (a
    // made-up `image_1.jpg` would replace the last one in the thread).
    files.push(InboundFile {
        kind,
        filename: None,
        mime_type: None,
        size: None,
        source: FileSource::Handle { id },
    });
}

#[cfg(test)]
mod tests;
